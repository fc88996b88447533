"""Torch sources (``file.py:factory``) and the eager torch targets."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from support import REPO

import nebisect.targets.torch  # noqa: F401  (registers the torch targets)
from nebisect.errors import NebisectError
from nebisect.sources.artifact import Artifact
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import (
    output_arrays,
    parse_location,
    run_module,
    to_torch_inputs,
)
from nebisect.targets.registry import get_target

EXAMPLES = REPO / "examples"
MEANPOOL = f"{EXAMPLES / 'meanpool.py'}:model"

HEADER = """
import torch

class Pool(torch.nn.Module):
    def forward(self, tokens, attention_mask):
        return (tokens * attention_mask.unsqueeze(-1)).sum(1)

def tensors():
    return torch.ones(1, 4, 3), torch.ones(1, 4, dtype=torch.int64)
"""


def write_source(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def error_of(text: str) -> str:
    with pytest.raises(NebisectError) as info:
        load_torch_source(text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_location_needs_a_py_file_and_a_factory_name() -> None:
    assert parse_location("a/b.py:make") == (Path("a/b.py"), "make")
    for bad in ("a/b.py", "a/b.txt:make", "a/b.py:not-a-name"):
        with pytest.raises(NebisectError, match=r"path/to/file\.py:factory_function"):
            parse_location(bad)


def test_missing_file_and_missing_factory(tmp_path: Path) -> None:
    assert error_of(f"{tmp_path / 'absent.py'}:model").endswith("absent.py: no such file")
    path = write_source(tmp_path, "def model():\n    return {}\n")
    message = error_of(f"{path}:other")
    assert "no factory named 'other'" in message and "model, tensors" in message


def test_factory_or_import_that_raises_is_one_line(tmp_path: Path) -> None:
    path = write_source(tmp_path, "def model():\n    raise RuntimeError('no weights\\nhere')\n")
    assert error_of(f"{path}:model").endswith(
        "the factory raised RuntimeError: no weights"
    )
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nraise ImportError('transformers missing')\n")
    assert "importing it raised ImportError: transformers missing" in error_of(f"{broken}:model")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("def model():\n    return 3\n", "got a int"),
        ("def model():\n    return {'module': 1}\n", "got a dict with keys ['module']"),
        ("def model():\n    return {'module': Pool()}\n", "'example_inputs' must be"),
        ("def model():\n    return {'module': Pool(), 'example_inputs': {'tokens': 1}}\n",
         "example input 'tokens' is a int, not a tensor"),
        ("def model():\n    return {'module': Pool(), 'example_inputs': (1, 2)}\n",
         "example input 'tokens' is a int, not a tensor"),
        ("def model():\n    return {'module': Pool(), 'example_inputs': {}}\n",
         "'example_inputs' must be a non-empty tuple or dict of tensors, got a dict with keys []"),
        ("def model():\n    return {'module': Pool(), 'example_inputs': tensors() * 2}\n",
         "4 example inputs but forward() names only 2"),
        ("def model():\n    return {'module': Pool(), "
         "'example_inputs': {'attention_mask': tensors()[1]}}\n",
         "example inputs ['attention_mask'] must be forward()'s first 1 parameter(s): tokens"),
    ],
)
def test_wrong_return_values(tmp_path: Path, body: str, expected: str) -> None:
    path = write_source(tmp_path, body)
    assert expected in error_of(f"{path}:model")


@pytest.mark.parametrize(
    ("dims", "expected"),
    [
        ("{'mask': {1: (1, 8)}}", "names 'mask', not an input"),
        ("{'tokens': {3: (1, 8)}}", "axis 3 of 'tokens' is not in a rank-3 tensor"),
        ("{'tokens': {1: (0, 8)}}", "must be (min, max) with 1 <= min <= max"),
        ("{'tokens': {1: (5, 8)}}", "has size 4 on axis 1, outside its dynamic range (5, 8)"),
        ("[1]", "'dynamic_dims' must be"),
    ],
)
def test_bad_dynamic_dims(tmp_path: Path, dims: str, expected: str) -> None:
    path = write_source(
        tmp_path,
        f"def model():\n    return {{'module': Pool(), 'example_inputs': tensors(), "
        f"'dynamic_dims': {dims}}}\n",
    )
    assert expected in error_of(f"{path}:model")


def test_tuple_inputs_are_named_by_forward_and_dicts_reordered(tmp_path: Path) -> None:
    path = write_source(
        tmp_path,
        """
        class Made:
            module = Pool()
            example_inputs = {'attention_mask': tensors()[1], 'tokens': tensors()[0]}
            dynamic_dims = {'tokens': {-2: (1, 64)}, 'attention_mask': {1: (1, 64)}}

        def model():
            return Made()

        def as_tuple():
            return {'module': Pool(), 'example_inputs': tensors()}
        """,
    )
    source = load_torch_source(f"{path}:model")
    assert list(source.example_inputs) == ["tokens", "attention_mask"]
    assert source.dynamic_dims == {"tokens": {1: (1, 64)}, "attention_mask": {1: (1, 64)}}
    assert source.symbols() == {(1, 64): "dim0"}
    assert [d.describe() for d in source.descriptions()] == [
        "tokens: float32[1, 1..64, 3]", "attention_mask: int32[1, 1..64]",
    ]
    assert list(load_torch_source(f"{path}:as_tuple").example_inputs) == [
        "tokens", "attention_mask",
    ]


def test_sources_are_cached_until_the_file_changes(tmp_path: Path) -> None:
    body = "def model():\n    return {{'module': Pool(), 'example_inputs': tensors()}}\n{}"
    path = write_source(tmp_path, body.format(""))
    first = load_torch_source(f"{path}:model")
    assert load_torch_source(f"{path}:model") is first
    write_source(tmp_path, body.format("# edited\n"))
    assert load_torch_source(f"{path}:model") is not first


def test_meanpool_example_describes_seed_003_inputs() -> None:
    described = {d.name: d for d in load_torch_source(MEANPOOL).descriptions()}
    assert described["tokens"].dims == [(1, 1), (1, 382), (768, 768)]
    assert described["attention_mask"].dims == [(1, 1), (1, 382)]
    assert described["attention_mask"].dtype == "int32"
    assert load_torch_source(MEANPOOL).output_names() == ["output"]


def test_outputs_are_named_by_structure() -> None:
    t = torch.zeros(2)
    assert list(output_arrays(t)) == ["output"]
    assert list(output_arrays((t, t))) == ["output_0", "output_1"]
    assert list(output_arrays({"emb": t})) == ["emb"]
    assert output_arrays(t.to(torch.bfloat16))["output"].dtype == np.float32
    with pytest.raises(NebisectError, match="returned a int"):
        output_arrays(3)
    with pytest.raises(NebisectError, match="output 'output_1' is a str"):
        output_arrays((t, "x"))


LOGSUMEXP = f"{EXAMPLES / 'logsumexp_ne.py'}:model"


@pytest.mark.parametrize(
    ("target", "dtype", "rtol"),
    [("torch:cpu:fp64", np.float64, 1e-12), ("torch:cpu:fp32", np.float32, 1e-6),
     ("torch:cpu", np.float32, 1e-6), ("torch:cpu:fp16", np.float16, 2e-3),
     ("torch:cpu:bf16", np.float32, 1e-2)],
)
def test_torch_targets_run_the_module_in_their_dtype(
    target: str, dtype: type, rtol: float
) -> None:
    runner = get_target(target)
    assert runner.availability() is None
    x = np.full((1, 1, 8, 8), 2.5, dtype=np.float32)
    out = runner.predict(Artifact("torch", LOGSUMEXP), {"x": x}).outputs["output"]
    assert out.dtype == dtype and out.shape == (1, 16)
    np.testing.assert_allclose(out, 2.5 + np.log(32.0), rtol=rtol)


def test_integer_inputs_take_the_example_dtype(tmp_path: Path) -> None:
    path = write_source(
        tmp_path, "def model():\n    return {'module': Pool(), 'example_inputs': tensors()}\n"
    )
    source = load_torch_source(f"{path}:model")
    arrays = {"tokens": np.ones((1, 2, 3), np.float32), "attention_mask": np.ones((1, 2), np.int32)}
    tensors = to_torch_inputs(source, arrays, torch.float64)
    assert tensors["attention_mask"].dtype == torch.int64
    assert tensors["tokens"].dtype == torch.float64
    out = get_target("torch:cpu:fp64").predict(Artifact("torch", f"{path}:model"), arrays)
    assert out.outputs["output"].tolist() == [[2.0, 2.0, 2.0]]


def test_fp64_target_leaves_the_source_module_alone() -> None:
    x = np.full((1, 1, 8, 8), 1.0, dtype=np.float32)
    get_target("torch:cpu:fp64").predict(Artifact("torch", LOGSUMEXP), {"x": x})
    source = load_torch_source(LOGSUMEXP)
    assert source.module.fc.weight.dtype == torch.float32
    assert source.module_in(torch.float32) is source.module
    assert source.module_in(torch.float64) is source.module_in(torch.float64)
    assert source.module_in(torch.float64).fc.weight.dtype == torch.float64


def test_torch_target_refuses_other_artifacts_and_missing_inputs() -> None:
    with pytest.raises(NebisectError, match="runs torch sources"):
        get_target("torch:cpu:fp32").predict(Artifact("mlpackage", "m.mlpackage"), {})
    with pytest.raises(NebisectError, match="inputs missing: attention_mask"):
        get_target("torch:cpu:fp32").predict(
            Artifact("torch", MEANPOOL), {"tokens": np.zeros((1, 2, 768), np.float32)}
        )


def test_variadic_forward_inputs_are_named_by_position(tmp_path: Path) -> None:
    """``forward(self, first, *rest)``: the named parameter, then ``x1, x2`` by position,
    and the module is called positionally (it has no keyword for them)."""
    path = write_source(
        tmp_path,
        """
        class Sum(torch.nn.Module):
            def forward(self, first, *rest):
                return first + sum(rest)

        def model():
            return {'module': Sum(), 'example_inputs': (torch.ones(2), torch.ones(2),
                                                         torch.full((2,), 3.0))}
        """,
    )
    source = load_torch_source(f"{path}:model")
    assert list(source.example_inputs) == ["first", "x1", "x2"]
    assert [d.name for d in source.descriptions()] == ["first", "x1", "x2"]
    assert source.output_names() == ["output"]
    assert run_module(source.module, source.example_inputs)["output"].tolist() == [5.0, 5.0]
