"""Ops whose constant fold and runtime result disagree.

coremltools folds an op whose inputs are all constant with numpy at conversion time;
otherwise Core ML computes it at predict time. For the ops in
:data:`nebisect.mil.semantics.coreml.RUNTIME_DIFFERENCES` the two give different
numbers, so the same model computes differently depending on whether a shape or an
index happened to be static (coremltools PR #2778: ``torch.roll`` by a negative shift
is right with a static dim, wrong with a dynamic one). ``fold-runtime`` reports every
such op that survives to run time; ``fold-deviation`` reports constant subgraphs that
coremltools' own fold gets wrong (:data:`nebisect.mil.fold.FOLD_DEVIATIONS`, found by
the differential test in ``tests/mil/test_fold.py``); ``runtime-rule`` reports every op
that breaks one of the runtime's published rules (:mod:`nebisect.mil.semantics.rules`):
a program Core ML refuses to load, or computes otherwise than the op definition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule
from nebisect.mil.fold import FOLD_DEVIATIONS
from nebisect.mil.semantics.coreml import RUNTIME_DIFFERENCES
from nebisect.mil.semantics.rules import runtime_rules


def _constant(var: Any) -> np.ndarray | None:
    return None if var is None or var.val is None else np.asarray(var.val)


def _same_signs(x: np.ndarray | None, y: np.ndarray | None) -> bool:
    """Both operands constant and never of opposite signs: fold and runtime agree."""
    if x is None or y is None:
        return False
    return bool((np.all(x >= 0) and np.all(y > 0)) or (np.all(x <= 0) and np.all(y < 0)))


def _runtime_hazard(op: Any) -> bool:
    if op.op_type == "mod":
        return not _same_signs(_constant(op.inputs.get("x")), _constant(op.inputs.get("y")))
    base = _constant(op.inputs.get("x"))
    return base is not None and base.dtype.kind == "f" and bool(np.all(base == 2))


@lint_rule(
    "fold-runtime",
    severity="warning",
    title="op computed differently at run time than by coremltools' constant folding",
    rationale=(
        "Core ML's runtime computes mod as a truncated remainder and pow(2, y) as y**2, "
        "while the op definitions (and coremltools' fold of constant inputs) give the "
        "floored remainder and 2**y: the model's numbers depend on what was constant."
    ),
    source="coremltools PR #2778 (mod); coremltools issue #2628, PR #2742 (pow)",
    remedy="keep mod operands non-negative (or compute x - floor(x / y) * y); write "
    "pow(2, y) as exp(y * ln 2)",
)
def fold_runtime(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops(*RUNTIME_DIFFERENCES):
        if _runtime_hazard(op):
            difference = RUNTIME_DIFFERENCES[op.op_type]
            yield finding(
                view, "fold-runtime", op, f"{op.op_type} '{op.name}': {difference.summary}",
                source=difference.source,
            )


def _all_constant(op: Any) -> bool:
    values = [v for key, v in op.inputs.items() if not key.startswith("_")]
    flat = [v for value in values
            for v in (value if isinstance(value, (list, tuple)) else (value,))]
    return all(v.val is not None for v in flat)


def _folded_wrong(view: ProgramView, op: Any) -> bool:
    if op.op_type == "scatter_along_axis":
        mode = op.inputs.get("mode")
        return _all_constant(op) and mode is not None and mode.val != "update"
    x = op.inputs.get("x")
    return x is not None and x.val is not None and len(list(view.consumers(x))) > 1


@lint_rule(
    "fold-deviation",
    severity="warning",
    title="constant subgraph that coremltools' own constant folding computes wrongly",
    rationale=(
        "coremltools' value_inference of scatter_along_axis ignores the mode, and that of "
        "thresholded_relu zeroes its input constant in place: a conversion that folds "
        "them changes the model's numbers."
    ),
    source="coremltools 9.0 mil/ops/defs/iOS15/scatter_gather.py#scatter_along_axis and "
    "activation.py#thresholded_relu (value_inference; found by nebisect's fold/runtime "
    "differential test)",
    remedy="feed the op a runtime value (an input) instead of a constant, or fold it "
    "yourself with the op's definition",
)
def fold_deviation(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops(*FOLD_DEVIATIONS):
        if _folded_wrong(view, op):
            yield finding(
                view, "fold-deviation", op,
                f"{op.op_type} '{op.name}': {FOLD_DEVIATIONS[op.op_type]}",
            )


@lint_rule(
    "runtime-rule",
    severity="error",
    title="op the Core ML runtime refuses to load, or computes otherwise than defined",
    rationale=(
        "coremltools converts and saves programs that Core ML then refuses when it loads "
        "or plans them, or computes differently from the op definition; each case is a "
        "public report, registered as a runtime rule with its error text and units."
    ),
    source="each rule's own reports (coremltools #2575, #2576, #2772 and the others cited "
    "in nebisect.mil.semantics.published)",
    remedy="the broken rule's own (each finding carries it: details['remedy'])",
)
def runtime_rule_broken(view: ProgramView) -> Iterator[LintFinding]:
    for rule in runtime_rules():
        for op in view.ops(rule.op_type):
            if rule.applies(op):
                effect = (f"refused at {rule.stage}" if rule.refuses
                          else f"computed otherwise at {rule.stage}")
                yield finding(
                    view, "runtime-rule", op,
                    f"{op.op_type} '{op.name}': {effect} on {', '.join(sorted(rule.units))}: "
                    f"{rule.message} ({rule.trigger}; rule {rule.name})",
                    severity="error" if rule.refuses else "warning", source=rule.source,
                    remedy=rule.remedy,
                )
