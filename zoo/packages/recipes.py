"""The package zoo's recipes: packages as coremltools 9.0 writes them at its defaults.

Users run ``nebisect run model.mlpackage`` on a package they already have, converted by
``ct.convert`` with its defaults (an ML program, FLOAT16 compute precision), often with
flexible shapes (``ct.RangeDim``, ``ct.EnumeratedShapes``). Each recipe builds one such
package from a small seeded torch module, in seconds; ``build.py`` writes them all. No
package is kept in git: they are built where they are judged.
"""

from __future__ import annotations

from collections.abc import Callable
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
