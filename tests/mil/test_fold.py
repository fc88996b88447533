"""Constant folding versus run time (issue 15 item 3): the differential test over every
foldable MIL op, and the lint rules that flag the ops concerned.

Findings (coremltools 9.0), all asserted below:

* ``mod`` — the runtime's truncated remainder differs from the fold's floored one
  (runtime semantics, coremltools PR #2778): mod(-7, 2) folds to 1, runs as -1.
* ``pow`` — a constant base of 2 runs the square fast path (coremltools #2628 / PR
  #2742): pow(2, -7) folds to 2**-7, runs as 49.
* ``scatter_along_axis`` — coremltools' fold ignores ``mode`` (always an update).
* ``thresholded_relu`` — coremltools' fold zeroes its input constant in place.

The last two are coremltools fold bugs (the fold departs from the op definition, which
the simulator follows under both semantics); the first two are runtime semantics, which
``sim:*:spec`` gives up to reproduce the fold side exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from nebisect.mil import fold
from nebisect.mil.semantics.coreml import RUNTIME_DIFFERENCES

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil import Builder as mb  # noqa: E402

#: coremltools' fold departs from the op definition (the simulator's both semantics).
FOLD_BUGS = set(fold.FOLD_DEVIATIONS)
#: The runtime departs from the definition and the fold (coreml semantics only).
RUNTIME = set(RUNTIME_DIFFERENCES)


@pytest.fixture(scope="module")
def reports():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {s: fold.compare(s) for s in ("coreml", "spec")}


def test_every_foldable_op_is_compared(reports):
    expected = set(fold.foldable_ops()) - fold.NOT_RUNTIME
    report = reports["coreml"]
    assert len(expected) >= 100
    # reverse_sequence has a value_inference that folds nothing (it returns None)
    assert report.unbuilt == {"reverse_sequence": "coremltools does not fold these inputs"}
    assert set(report.compared) == expected - set(report.unbuilt)


def test_runtime_semantics_disagree_exactly_where_published(reports):
    found = reports["coreml"].disagreements
    print("\n".join(map(str, found)))  # the findings, listed (pytest -s)
    assert {d.op_type for d in found} == RUNTIME | FOLD_BUGS
    mod = [str(d) for d in found if d.op_type == "mod"]
    assert "mod (x=np.int32(-7), y=np.int32(2)): folded 1, computed -1" in mod
    pow_ = [str(d) for d in found if d.op_type == "pow"]
    assert pow_ == ["pow (x=2.0, y=np.float32(-7.0)): folded 0.0078125, computed 49"]


def test_spec_semantics_reproduces_the_fold_except_its_own_bugs(reports):
    found = reports["spec"].disagreements
    assert {d.op_type for d in found} == FOLD_BUGS
    scatter = [str(d) for d in found if d.op_type == "scatter_along_axis"]
    assert [s.split("mode=")[1][:5] for s in scatter] == ["'add'", "'mul'", "'max'"]
    assert any("modified in place" in str(d) for d in found if d.op_type == "thresholded_relu")


def test_lint_flags_ops_whose_fold_and_runtime_disagree():
    @mb.program(input_specs=[mb.TensorSpec((3,)), mb.TensorSpec((2, 3))],
                opset_version=ct.target.iOS17)
    def prog(x, m):
        shift = mb.mod(x=x, y=5.0)                       # runs truncated on device
        safe = mb.mod(x=np.float32(7.0), y=np.float32(5.0))  # same sign: no hazard
        power = mb.pow(x=np.float32(2.0), y=x)           # square fast path
        cube = mb.pow(x=np.float32(3.0), y=x)            # other bases are fine
        data = np.zeros((2, 3), np.float32)
        scatter = mb.scatter_along_axis(data=data, indices=np.zeros((2, 3), np.int32),
                                        updates=np.ones((2, 3), np.float32), axis=1, mode="add")
        return shift, safe, power, cube, mb.add(x=m, y=scatter)

    from nebisect.hazards import lint_program

    findings = lint_program(prog).findings
    found = {(f.rule_id, f.op_type) for f in findings}
    assert ("fold-runtime", "mod") in found and ("fold-runtime", "pow") in found
    assert ("fold-deviation", "scatter_along_axis") in found
    runtime = [f for f in findings if f.rule_id == "fold-runtime"]
    assert len(runtime) == 2  # the same-sign constant mod and pow(3, x) are not flagged
    assert any("PR #2778" in f.details["source"] for f in runtime)
