"""A torch factory's repro (``run --markdown``): the factory file inline, seeded as nebisect
seeds it, the trigger's inputs written out."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from nebisect.minimize.repro import templates
from nebisect.minimize.repro.script import factory_module, factory_script, inline_inputs
from nebisect.targets.spec import TargetSpec

FACTORY = '''"""A model: its docstring is the file's, not the script's."""

from __future__ import annotations

import torch


class Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def model() -> dict:
    return {"module": Twice(), "example_inputs": {"x": torch.ones(2, 3)}}
'''


def test_the_factory_file_loses_its_docstring_and_hoists_future_imports() -> None:
    future, body = factory_module(FACTORY)
    assert future == ["from __future__ import annotations"]
    assert "its docstring is the file's" not in body and "__future__" not in body
    assert body.strip().startswith("import torch")


@pytest.mark.parametrize("array", [
    np.random.default_rng(0).standard_normal((3, 5, 7)).astype(np.float32),
    np.array([np.inf, -np.inf, np.nan, 1e-30, 65504], np.float16),
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.full((4, 9, 11), 7.625, np.float32),
    np.array(2.5, np.float64),
])
def test_inline_inputs_read_back_as_the_arrays(array: np.ndarray) -> None:
    body = inline_inputs({"x": array})
    back = eval(body.strip().removeprefix("return "), {"np": np})["x"]
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    assert max(map(len, body.splitlines())) <= 100
    if array.size > 1 and (array == array.reshape(-1)[0]).all():
        assert "np.full((4, 9, 11), 7.625, dtype='float32')" in body


def test_a_factory_script_seeds_then_inlines_the_factory() -> None:
    script = factory_script(
        FACTORY, "model", inline_inputs({"x": np.ones((2, 3), np.float32)}), names=["x"],
        inputs_doc="The trigger.", signature="mismatch:tolerance", message="",
        target=TargetSpec.parse("sim:fp32"),
        stage="predict", setup=(), header="conversion: mul is off", paths=("trace", "export"))
    tree = ast.parse(script)
    assert ast.get_docstring(tree).startswith("conversion: mul is off\n\nSymptom: "
                                              "mismatch:tolerance")
    assert templates.TORCH_NEEDS_INLINE in script
    assert script.index("seed_everything()\n") < script.index("class Twice")
    assert "PATHS = ['trace', 'export']" in script and "SETUP = []" in script
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"model", "trigger_inputs", "load_module", "main", "seed_everything"} <= names
    assert not [node for node in tree.body if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("nebisect")]
