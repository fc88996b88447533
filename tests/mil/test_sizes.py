"""Declared tensor sizes against the memory limit: a ``fill`` or ``tile`` of 60000×60000
is refused from its shapes — by the package reader before coremltools builds (and
computes) the op, by the simulator's plan before the kernel allocates — and a case on
such a package is an ``error`` at stage ``load``.

The simulator is handed its budget as a number of bytes; every load here also runs
under a 1 GiB RLIMIT_DATA (``memory.limited``): a check that failed to refuse would be
a MemoryError in this test, not 28.8 GB of this machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.memory_bombs import fill_bomb, tile_bomb

from nebisect.arrays import sha256_path
from nebisect.case import Case, SourceRef
from nebisect.evaluate.judge import evaluate
from nebisect.isolation import memory
from nebisect.mil.interp import run_program
from nebisect.mil.load import load_program, read_spec
from nebisect.mil.quiet import import_coremltools
from nebisect.mil.sizes import TensorTooLarge, approximate, check_shape, check_spec

GIB = 1 << 30
#: what the error line says under --memory 4G
OVER_4G = ("tensor of 3.6e9 elements exceeds the limit: 'big' ({op}) declares "
           "[60000, 60000]; 4G of memory (--memory) holds 5.4e8 at 8 bytes each")


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bombs")
    return {"fill": fill_bomb(root)[0], "tile": tile_bomb(root)[0]}


@pytest.fixture
def guarded() -> Iterator[None]:
    """This test process's guard: 1 GiB it may allocate."""
    with memory.limited(1024):
        yield


@pytest.mark.parametrize(("count", "text"), [
    (3_600_000_000, "3.6e9"), (536_870_912, "5.4e8"), (1_000, "1.0e3"), (25_000_000, "2.5e7"),
])
def test_counts_read_like_the_error_line(count: int, text: str) -> None:
    assert approximate(count) == text


def test_a_shape_within_the_budget_passes_and_unknown_dims_are_left_to_the_limit() -> None:
    check_shape([8192, 16384], "'ok' (fill)", GIB)  # 1.3e8 elements, 1 GiB at 8 bytes
    check_shape([None, 60000, 60000], "'dynamic' (tile)", GIB)
    check_shape(None, "'list' (make_list)", GIB)
    with pytest.raises(TensorTooLarge, match=r"^tensor of 1.3e8 elements exceeds the limit"):
        check_shape([8192, 16385], "'over' (fill)", GIB)
    check_shape([8192, 16385], "'over' (fill)", 2 * GIB)  # the budget handed in decides


@pytest.mark.parametrize("op", ["fill", "tile"])
def test_the_package_reader_refuses_the_bomb_before_building_it(
        bombs: dict[str, Path], op: str) -> None:
    with pytest.raises(TensorTooLarge) as raised:
        check_spec(read_spec(bombs[op]), str(bombs[op]), 4 * GIB)
    assert str(raised.value) == f"{bombs[op]}: {OVER_4G.format(op=op)}"
    with memory.limited(1024), pytest.raises(TensorTooLarge, match=r"tensor of 3\.6e9"):
        load_program(bombs[op], memory_budget=GIB)


def test_the_simulator_refuses_an_in_memory_tile_bomb_before_its_kernel(
        guarded: None) -> None:
    """A builder program never passes through a package: the plan checks its shapes."""
    import_coremltools()
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1))])
    def program(x):  # type: ignore[no-untyped-def]
        return mb.tile(x=x, reps=[60000, 60000], name="big")

    with pytest.raises(TensorTooLarge, match=r"^tensor of 3.6e9 elements exceeds the limit: "
                                             r"'big' \(tile\) declares \[60000, 60000\]; 1G "):
        run_program(program, {"x": np.ones((1, 1), np.float32)}, memory_budget=GIB)


@pytest.mark.parametrize("op", ["fill", "tile"])
def test_a_case_on_the_bomb_is_an_error_at_load(bombs: dict[str, Path], op: str,
                                                tmp_path: Path) -> None:
    """What replay sees of a corpus case holding one: the verdict, not an allocation."""
    from nebisect.arrays import save_npz

    inputs = tmp_path / "x.npz"
    save_npz(inputs, {"x": np.ones((1, 1), np.float32)})
    case = Case(SourceRef("mlpackage", str(bombs[op])), "sim:fp16", inputs_path=str(inputs),
                model_sha256=sha256_path(bombs[op]))
    verdict = evaluate(case, memory_mb=4096).verdict
    assert (verdict.status, verdict.stage) == ("error", "load"), verdict.message
    assert f"{OVER_4G.format(op=op)}" in verdict.message
    assert verdict.signature.startswith("error:load:")
