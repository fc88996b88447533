"""The package zoo's recipes: packages as coremltools 9.0 writes them at its defaults.

Users run ``nebisect run model.mlpackage`` on a package they already have, converted by
``ct.convert`` with its defaults (an ML program, FLOAT16 compute precision), often with
flexible shapes (``ct.RangeDim``, ``ct.EnumeratedShapes``). Each recipe builds one such
package from a small seeded torch module, in seconds; ``build.py`` writes them all. No
package is kept in git: they are built where they are judged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

RECIPES: dict[str, Callable[[Path], Path]] = {}


def recipe(fn: Callable[[Path], Path]) -> Callable[[Path], Path]:
    """Register ``fn(out_dir) -> package path`` under its name."""
    if fn.__name__ in RECIPES:
        raise ValueError(f"recipe {fn.__name__!r} registered twice")
    RECIPES[fn.__name__] = fn
    return fn


def _convert(module: Any, example: tuple[Any, ...], inputs: list[Any], path: Path,
             **options: Any) -> Path:
    """``module`` traced on ``example`` and converted at coremltools' defaults."""
    import coremltools as ct
    import torch

    traced = torch.jit.trace(module.eval(), example)
    model = ct.convert(traced, inputs=inputs, convert_to="mlprogram", **options)
    model.save(str(path))
    return path


def _embedding_tagger() -> Any:
    """int32 ids → Embedding(100, 16) → mean over the sequence → Linear(16, 4)."""
    import torch

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e = torch.nn.Embedding(100, 16)
            self.l = torch.nn.Linear(16, 4)

        def forward(self, ids: Any) -> Any:
            return self.l(self.e(ids).mean(1))

    torch.manual_seed(0)
    return Tagger()


def _ids(length: int) -> Any:
    import torch

    return torch.randint(0, 100, (1, length), dtype=torch.int32)


@recipe
def token_ids(out: Path) -> Path:
    """Token ids of a fixed length into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=(1, 8), dtype=np.int32)],
                    out / "token_ids.mlpackage")


@recipe
def token_ids_range(out: Path) -> Path:
    """Token ids of a flexible length (``RangeDim(1, 64)``) into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    shape = ct.Shape(shape=(1, ct.RangeDim(1, 64, default=8)))
    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=shape, dtype=np.int32)],
                    out / "token_ids_range.mlpackage")


@recipe
def token_ids_enumerated(out: Path) -> Path:
    """Token ids of enumerated lengths (4, 8, 16) into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    shape = ct.EnumeratedShapes(shapes=[(1, 4), (1, 8), (1, 16)], default=(1, 8))
    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=shape, dtype=np.int32)],
                    out / "token_ids_enumerated.mlpackage")


@recipe
def int_arithmetic(out: Path) -> Path:
    """Integer arithmetic on an int32 input: ``clamp(x, min=0) + 1`` (coremltools 9.0
    lowers the clamp through float32, exact only up to 2^24)."""
    import coremltools as ct
    import numpy as np
    import torch

    class Clamp(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.clamp(x, min=0) + 1

    example = torch.tensor([[0, 1, 1, 0]], dtype=torch.int32)
    return _convert(Clamp(), (example,),
                    [ct.TensorType(name="x", shape=(1, 4), dtype=np.int32)],
                    out / "int_arithmetic.mlpackage")


@recipe
def bert_finfo_mask(out: Path) -> Path:
    """A BERT-style encoder layer whose additive mask is ``(1 - mask) × finfo(float32).min``,
    as BERT's ``get_extended_attention_mask`` writes it: at coremltools' default FLOAT16
    precision the constant is stored as fp16 ``-inf``, and ``0 × -inf`` makes every
    output NaN (torch computes finite values)."""
    import coremltools as ct
    import numpy as np
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32)
            self.qkv = torch.nn.Linear(32, 96)
            self.out = torch.nn.Linear(32, 32)
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.embed(input_ids)
            q, k, v = self.qkv(hidden).chunk(3, dim=-1)
            extended = (1.0 - attention_mask[:, None, :].to(hidden.dtype)) * torch.finfo(
                torch.float32).min
            scores = q @ k.transpose(-1, -2) / 32 ** 0.5 + extended
            return self.norm(hidden + self.out(scores.softmax(-1) @ v))

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (1, 8), dtype=torch.int32)
    mask = torch.ones(1, 8, dtype=torch.int32)
    return _convert(Encoder(), (ids, mask),
                    [ct.TensorType(name="input_ids", shape=(1, 8), dtype=np.int32),
                     ct.TensorType(name="attention_mask", shape=(1, 8), dtype=np.int32)],
                    out / "bert_finfo_mask.mlpackage")


def _mlp() -> Any:
    """Linear(16, 64) → ReLU → Linear(64, 64) → ReLU → Linear(64, 8), seeded."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8))


def _mlp_model() -> Any:
    import coremltools as ct
    import torch

    torch.manual_seed(1)
    traced = torch.jit.trace(_mlp().eval(), (torch.randn(1, 16),))
    return ct.convert(traced, inputs=[ct.TensorType(name="x", shape=(1, 16))],
                      convert_to="mlprogram")


@recipe
def mlp(out: Path) -> Path:
    """An MLP at coremltools' defaults: the baseline of the compressed variants."""
    path = out / "mlp.mlpackage"
    _mlp_model().save(str(path))
    return path


@recipe
def mlp_palettized4(out: Path) -> Path:
    """The MLP with 4-bit k-means palettized weights (``coremltools.optimize.coreml``)."""
    import coremltools.optimize.coreml as cto

    config = cto.OptimizationConfig(global_config=cto.OpPalettizerConfig(
        mode="kmeans", nbits=4, weight_threshold=0))
    path = out / "mlp_palettized4.mlpackage"
    cto.palettize_weights(_mlp_model(), config).save(str(path))
    return path


@recipe
def mlp_int8(out: Path) -> Path:
    """The MLP with int8 linear-quantized weights (``coremltools.optimize.coreml``)."""
    import coremltools.optimize.coreml as cto

    config = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(
        mode="linear_symmetric", dtype="int8", weight_threshold=0))
    path = out / "mlp_int8.mlpackage"
    cto.linear_quantize_weights(_mlp_model(), config).save(str(path))
    return path


@recipe
def two_outputs(out: Path) -> Path:
    """A model with two outputs: softmax class scores and a sigmoid box."""
    import coremltools as ct
    import torch

    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Linear(16, 32)
            self.classes = torch.nn.Linear(32, 10)
            self.box = torch.nn.Linear(32, 4)

        def forward(self, x: Any) -> Any:
            hidden = torch.relu(self.body(x))
            return self.classes(hidden).softmax(-1), torch.sigmoid(self.box(hidden))

    torch.manual_seed(0)
    return _convert(Heads(), (torch.randn(1, 16),),
                    [ct.TensorType(name="x", shape=(1, 16))], out / "two_outputs.mlpackage")


@recipe
def conv_flexible(out: Path) -> Path:
    """Conv1d → ReLU → Conv1d over a flexible time axis (``RangeDim(8, 128)``)."""
    import coremltools as ct
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv1d(8, 4, 3, padding=1))
    shape = ct.Shape(shape=(1, 4, ct.RangeDim(8, 128, default=16)))
    return _convert(model, (torch.randn(1, 4, 16),), [ct.TensorType(name="x", shape=shape)],
                    out / "conv_flexible.mlpackage")


@recipe
def running_sum_state(out: Path) -> Path:
    """A stateful decoder's cache in miniature: ``acc += x`` kept in a ``ct.StateType``
    (iOS 18), returned each step."""
    import coremltools as ct
    import torch

    class Accumulate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("acc", torch.zeros(1, 4))

        def forward(self, x: Any) -> Any:
            self.acc.add_(x)
            return self.acc * 1.0

    return _convert(Accumulate(), (torch.ones(1, 4),), [ct.TensorType(name="x", shape=(1, 4))],
                    out / "running_sum_state.mlpackage",
                    states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 4)), name="acc")],
                    minimum_deployment_target=ct.target.iOS18)


@recipe
def prefill_decode(out: Path) -> Path:
    """A multifunction package (``ct.utils.save_multifunction``): ``prefill`` over 8
    token ids and ``decode`` over one, sharing the embedding table."""
    import tempfile

    import coremltools as ct
    import numpy as np

    with tempfile.TemporaryDirectory() as scratch:
        parts = Path(scratch)
        for name, length in (("prefill", 8), ("decode", 1)):
            _convert(_embedding_tagger(), (_ids(length),),
                     [ct.TensorType(name="ids", shape=(1, length), dtype=np.int32)],
                     parts / f"{name}.mlpackage", minimum_deployment_target=ct.target.iOS18)
        described = ct.utils.MultiFunctionDescriptor()
        for name in ("prefill", "decode"):
            described.add_function(str(parts / f"{name}.mlpackage"), src_function_name="main",
                                   target_function_name=name)
        described.default_function_name = "prefill"
        path = out / "prefill_decode.mlpackage"
        ct.utils.save_multifunction(described, str(path))
    return path


# --- the ordinary packages users ship: the torch zoo's factories (``zoo/*.py``) at defaults

ZOO = Path(__file__).resolve().parent.parent


def _factory(name: str) -> dict[str, Any]:
    """``zoo/NAME.py``'s ``model()``, loaded as nebisect loads it (``zoo/`` on ``sys.path``)."""
    import importlib.util
    import sys

    if str(ZOO) not in sys.path:
        sys.path.insert(0, str(ZOO))
    spec = importlib.util.spec_from_file_location(f"zoo_factory_{name}", ZOO / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model()


def _tuple_outputs(module: Any) -> Any:
    """``module`` with its dict of outputs returned as a tuple (``jit.trace`` wants one)."""
    import torch

    class Outputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *args: Any) -> tuple[Any, ...]:
            return tuple(self.inner(*args).values())

    return Outputs()


def _convert_factory(name: str, out: Path, *, flexible: bool = False, overrides: bool = False,
                     package: str | None = None) -> Path:
    """Zoo factory ``name`` traced on its example (int inputs as int32) and converted at
    defaults, its outputs named as its dict names them; ``flexible`` makes each
    ``dynamic_dims`` axis a ``ct.RangeDim`` (axes of one range share it); ``overrides``
    converts with nebisect's converter overrides (``nebisect.sources.converter_overrides``:
    ``new_ones`` and a NumPy ≥ 2.4-safe ``aten::Int``, which transformers' masks and
    BERT's position slice need with torch 2.13 + coremltools 9.0), then restores them."""
    import coremltools as ct
    import numpy as np
    import torch

    source = _factory(name)
    example = {key: value.to(torch.int32) if not value.is_floating_point() else value
               for key, value in source["example_inputs"].items()}
    ranges: dict[tuple[int, int], Any] = {}
    inputs = []
    for key, value in example.items():
        shape: Any = tuple(value.shape)
        if flexible and key in source.get("dynamic_dims", {}):
            dims = list(shape)
            for axis, (low, high) in source["dynamic_dims"][key].items():
                dims[axis] = ranges.setdefault(
                    (low, high), ct.RangeDim(low, high, default=shape[axis]))
            shape = ct.Shape(shape=tuple(dims))
        dtype = np.int32 if value.dtype == torch.int32 else np.float32
        inputs.append(ct.TensorType(name=key, shape=shape, dtype=dtype))
    module = source["module"].eval()
    with torch.no_grad():
        names = list(module(*example.values()))
    with _converter_overrides() if overrides else nullcontext():
        return _convert(_tuple_outputs(module), tuple(example.values()), inputs,
                        out / f"{package or name}.mlpackage",
                        outputs=[ct.TensorType(name=key) for key in names])


@contextmanager
def _converter_overrides() -> Iterator[None]:
    """nebisect's converter overrides registered in coremltools while the block runs."""
    from nebisect.sources import converter_overrides

    converter_overrides.install()
    try:
        yield
    finally:
        converter_overrides.uninstall()


@recipe
def resnet(out: Path) -> Path:
    """The zoo's ResNet (``zoo/resnet.py``): a 32x32 image to 10 logits."""
    return _convert_factory("resnet", out)


@recipe
def vit(out: Path) -> Path:
    """The zoo's ViT (``zoo/vit.py``): a 32x32 image in 8x8 patches to 10 logits."""
    return _convert_factory("vit", out)


@recipe
def mobilenet_v2(out: Path) -> Path:
    """The zoo's MobileNetV2 (``zoo/mobilenet_v2.py``) at depth multiplier 0.35."""
    return _convert_factory("mobilenet_v2", out)


@recipe
def clip_vision(out: Path) -> Path:
    """The zoo's CLIP vision tower (``zoo/clip_vision.py``): hidden states and pooled."""
    return _convert_factory("clip_vision", out)


@recipe
def wav2vec2(out: Path) -> Path:
    """The zoo's Wav2Vec2 encoder (``zoo/wav2vec2.py``) over 800 samples of audio."""
    return _convert_factory("wav2vec2", out)


@recipe
def bert(out: Path) -> Path:
    """The zoo's BERT (``zoo/bert.py``) over 8 ids and their mask (converter overrides)."""
    return _convert_factory("bert", out, overrides=True)


@recipe
def bert_range(out: Path) -> Path:
    """The zoo's BERT over a ``RangeDim(2, 16)`` sequence, ids and mask (converter overrides)."""
    return _convert_factory("bert", out, flexible=True, overrides=True,
                            package="bert_range")


@recipe
def gpt2(out: Path) -> Path:
    """The zoo's GPT-2 (``zoo/gpt2.py``): logits over 8 token ids (converter overrides)."""
    return _convert_factory("gpt2", out, overrides=True)


@recipe
def gru_tagger(out: Path) -> Path:
    """int32 ids → Embedding(100, 16) → GRU(16, 16) → Linear(16, 5) tag logits per token."""
    import coremltools as ct
    import numpy as np
    import torch

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e = torch.nn.Embedding(100, 16)
            self.gru = torch.nn.GRU(16, 16, batch_first=True)
            self.l = torch.nn.Linear(16, 5)

        def forward(self, ids: Any) -> Any:
            return self.l(self.gru(self.e(ids))[0])

    torch.manual_seed(0)
    return _convert(Tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=(1, 8), dtype=np.int32)],
                    out / "gru_tagger.mlpackage")


@recipe
def unet_block(out: Path) -> Path:
    """A small UNet block: conv, GroupNorm, SiLU, a strided down and a nearest up, skip concat."""
    import coremltools as ct
    import torch
    from torch import nn

    def stage(cin: int, cout: int, stride: int = 1) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(4, cout), nn.SiLU())

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp, self.down, self.mid = stage(3, 16), stage(16, 32, 2), stage(32, 32)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.merge, self.out = stage(48, 16), nn.Conv2d(16, 3, 1)

        def forward(self, x: Any) -> Any:
            skip = self.inp(x)
            hidden = self.up(self.mid(self.down(skip)))
            return self.out(self.merge(torch.cat([hidden, skip], 1)))

    torch.manual_seed(0)
    return _convert(Block(), (torch.randn(1, 3, 32, 32),),
                    [ct.TensorType(name="x", shape=(1, 3, 32, 32))], out / "unet_block.mlpackage")


@recipe
def llama_kv_state(out: Path) -> Path:
    """A one-layer Llama-style decoder (RMSNorm, rotary attention, SwiGLU) whose KV cache
    is two ``ct.StateType`` states, as coremltools' stateful guide writes it: ids of
    ``RangeDim(1, 16)`` and an additive ``causal_mask`` [1, 1, query, end] (iOS 18)."""
    import coremltools as ct
    import numpy as np
    import torch
    from torch import nn

    vocab, dim, heads, cache = 100, 32, 2, 16
    head = dim // heads

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x: Any) -> Any:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

    def rotate(x: Any, positions: Any) -> Any:
        freq = 1.0 / 10000 ** (torch.arange(0, head, 2, dtype=torch.float32) / head)
        angle = positions[:, None].float() * freq[None, :]
        cos, sin = angle.cos(), angle.sin()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], -1)

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.norm1, self.norm2, self.norm3 = RMSNorm(), RMSNorm(), RMSNorm()
            self.qkv, self.o = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
            self.gate_up = nn.Linear(dim, 128, bias=False)
            self.down, self.head = nn.Linear(64, dim, bias=False), nn.Linear(dim, vocab, bias=False)
            self.register_buffer("k_cache", torch.zeros(1, heads, cache, head))
            self.register_buffer("v_cache", torch.zeros(1, heads, cache, head))

        def forward(self, input_ids: Any, causal_mask: Any) -> Any:
            hidden = self.embed(input_ids)
            length, end = input_ids.shape[-1], causal_mask.shape[-1]
            past = end - length
            q, k, v = (t.view(1, length, heads, head).transpose(1, 2)
                       for t in self.qkv(self.norm1(hidden)).chunk(3, -1))
            positions = torch.arange(past, end)
            q, k = rotate(q, positions), rotate(k, positions)
            self.k_cache[:, :, past:end] = k
            self.v_cache[:, :, past:end] = v
            keys, values = self.k_cache[:, :, :end], self.v_cache[:, :, :end]
            scores = q @ keys.transpose(-1, -2) / head ** 0.5 + causal_mask
            attended = (scores.softmax(-1) @ values).transpose(1, 2).reshape(1, length, dim)
            hidden = hidden + self.o(attended)
            gate, up = self.gate_up(self.norm2(hidden)).chunk(2, -1)
            hidden = hidden + self.down(nn.functional.silu(gate) * up)
            return self.head(self.norm3(hidden))

    torch.manual_seed(0)
    ids = _ids(4)
    mask = torch.triu(torch.full((1, 1, 4, 4), -1e4), 1)
    query, end = ct.RangeDim(1, cache, default=4), ct.RangeDim(1, cache, default=4)
    return _convert(Decoder(), (ids, mask),
                    [ct.TensorType(name="input_ids", shape=ct.Shape((1, query)), dtype=np.int32),
                     ct.TensorType(name="causal_mask", shape=ct.Shape((1, 1, query, end)))],
                    out / "llama_kv_state.mlpackage",
                    outputs=[ct.TensorType(name="logits")],
                    states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, heads, cache, head)),
                                         name=name) for name in ("k_cache", "v_cache")],
                    minimum_deployment_target=ct.target.iOS18)
