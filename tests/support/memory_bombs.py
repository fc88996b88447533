"""Programs whose declared tensors are far too large to hold: memory bombs, built
without allocating them.

* :func:`fill_bomb` — ``fill`` of shape 60000×60000 (3.6e9 elements, 14.4 GB at fp32)
  summed into a one-element output. coremltools computes a ``fill`` of constant shape
  while it builds the op (``value_inference``: ``np.full``), so the op is built here
  with that inference switched off; whoever loads the package without a size check
  runs it (the loader builds every op again).
* :func:`tile_bomb` — ``tile`` of a 1×1 input by 60000×60000: nothing is computed at
  load, the simulator's kernel would allocate it at predict.
* :func:`liar` — the ``fill`` bomb at 8000×8000 (256 MB), its output declared 1×1: the
  declared shapes pass any size check, the loader still computes the whole fill.
* :func:`heavy_chain` — three 5000×5000 tensors (a ``tile``, then ``add`` and ``mul``
  of it): each fits a 512 MiB limit (25e6 elements, 200 MB at float64), the three the
  simulator holds at once do not — at float64 (the reference); at float32 they do.

Each saves an ``.mlpackage`` of a few hundred bytes and its inputs (``x``: float32
[1, 1]).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools

SIDE = 60_000
#: the address space a command run on a bomb gets in the tests (RLIMIT_AS, bytes): far
#: above an ordinary run, far below 3.6e9 elements, so a nebisect that tried to allocate
#: a bomb would fail there instead of taking the machine down
SAFETY_LIMIT = 8 << 30


@contextlib.contextmanager
def _no_fill_inference() -> Iterator[None]:
    """coremltools' ``fill`` without its value inference (``np.full`` of the shape)."""
    import_coremltools()
    from coremltools.converters.mil.mil.ops.defs.iOS15.tensor_operation import fill

    original = fill.value_inference

    def uncomputed(self: Any) -> None:
        return None

    fill.value_inference = uncomputed
    try:
        yield
    finally:
        fill.value_inference = original


def _program(bomb: str, side: int) -> Any:
    import_coremltools()
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1))])
    def program(x: Any) -> Any:
        if bomb == "fill":
            big = mb.fill(shape=np.array([side, side], np.int32), value=1.0, name="big")
        else:
            big = mb.tile(x=x, reps=[side, side], name="big")
        if bomb == "chain":
            big = mb.mul(x=mb.add(x=big, y=big, name="twice"), y=big, name="big2")
        peak = mb.reduce_max(x=big, axes=[0, 1], keep_dims=True, name="peak")
        return mb.add(x=x, y=peak, name="y")

    return program


def save_bomb(directory: Path, bomb: str, side: int = SIDE,
              name: str = "") -> tuple[Path, Path]:
    """(package, inputs) of the ``fill``, ``tile`` or ``chain`` program in ``directory``,
    named ``name`` (default: ``{bomb}_bomb``)."""
    name = name or f"{bomb}_bomb"
    package, inputs = directory / f"{name}.mlpackage", directory / f"{name}.npz"
    with _no_fill_inference():
        save_program(_program(bomb, side), package)
    save_npz(inputs, {"x": np.ones((1, 1), np.float32)})
    return package, inputs


def fill_bomb(directory: Path) -> tuple[Path, Path]:
    return save_bomb(directory, "fill")


def tile_bomb(directory: Path) -> tuple[Path, Path]:
    return save_bomb(directory, "tile")


def heavy_chain(directory: Path) -> tuple[Path, Path]:
    return save_bomb(directory, "chain", 5000)


def liar(directory: Path) -> tuple[Path, Path]:
    """(package, inputs) of an 8000×8000 ``fill`` whose package declares it 1×1."""
    from nebisect.mil.load import read_spec
    from nebisect.package import check_package, item_path

    package, inputs = save_bomb(directory, "fill", 8000, "liar")
    spec = read_spec(package)
    for function in spec.mlProgram.functions.values():
        for block in function.block_specializations.values():
            for operation in block.operations:
                if operation.type == "fill":
                    for dim in operation.outputs[0].type.tensorType.dimensions:
                        dim.constant.size = 1
    item_path(package, check_package(package).root).write_bytes(spec.SerializeToString())
    return package, inputs
