"""Packages whose ML program cannot load, each broken one way after a clean save.

``healthy`` saves a small weighted program (linear → sigmoid → mul) and its inputs;
``broken(kind)`` copies it and breaks the copy:

* ``missing-weights`` — the weight blob file is deleted;
* ``unknown-op`` — the sigmoid's type becomes an op nobody registered;
* ``cycle`` — the sigmoid reads the output of the mul that reads the sigmoid;
* ``corrupt-blob`` — the weight blob file is overwritten with junk of the same size.

The manifest and the model spec stay readable: only loading the program fails.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools

MODEL = "Data/com.apple.CoreML/model.mlmodel"
WEIGHTS = "Data/com.apple.CoreML/weights/weight.bin"
#: kind → the end of the one error line every command gives for it
KINDS = {
    "missing-weights": "missing weight file @model_path/weights/weight.bin",
    "unknown-op": "cannot load the ML program (op frobnicate not registered.)",
    "cycle": "cannot load the ML program (var 'out' is read before any op defines it: a "
             "cycle, or a name no op defines)",
    "corrupt-blob": "cannot load the ML program (Storage Reader expects file format "
                    "version 2.)",
}


def _program() -> Any:
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb

    weight = np.random.default_rng(3).standard_normal((16, 32)).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 32))], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        hidden = mb.linear(x=x, weight=weight, name="hidden")
        return mb.mul(x=hidden, y=mb.sigmoid(x=hidden, name="gate"), name="out")

    return prog


def healthy(directory: Path) -> tuple[Path, Path]:
    """(package, inputs) of the program, saved as it should be."""
    package, inputs = directory / "healthy.mlpackage", directory / "healthy.npz"
    save_program(_program(), package)
    x = np.random.default_rng(4).standard_normal((2, 32)).astype(np.float32)
    save_npz(inputs, {"x": x})
    return package, inputs


def broken(healthy_package: Path, directory: Path, kind: str) -> Path:
    """A copy of ``healthy_package`` in ``directory``, broken as ``kind`` says."""
    package = directory / f"{kind}.mlpackage"
    shutil.copytree(healthy_package, package)
    _BREAK[kind](package)
    return package


def _edit_ops(package: Path, change: Callable[[Any], None]) -> None:
    """Apply ``change`` to each op of the main function in the package's spec."""
    ct = import_coremltools()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString((package / MODEL).read_bytes())
    main = spec.mlProgram.functions["main"]
    for op in main.block_specializations[main.opset].operations:
        change(op)
    (package / MODEL).write_bytes(spec.SerializeToString())


def _unknown_op(op: Any) -> None:
    if op.type == "sigmoid":
        op.type = "frobnicate"


def _cycle(op: Any) -> None:
    if op.type == "sigmoid":
        op.inputs["x"].arguments[0].name = "out"


def _corrupt(package: Path) -> None:
    blob = package / WEIGHTS
    size = blob.stat().st_size
    blob.write_bytes((b"\xde\xad\xbe\xef" * size)[:size])


_BREAK: dict[str, Callable[[Path], None]] = {
    "missing-weights": lambda package: (package / WEIGHTS).unlink(),
    "unknown-op": lambda package: _edit_ops(package, _unknown_op),
    "cycle": lambda package: _edit_ops(package, _cycle),
    "corrupt-blob": _corrupt,
}
