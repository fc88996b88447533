"""Where a failure enters, as an op: the first op whose output breaks the oracle.

A failing row says *that* a target disagrees; the culprit says *where*: ``device at
reduce_log_sum_exp "var_12"``. Two comparisons, depending on the attribution:

* ``precision`` and ``device`` — the target's intermediates against the exact
  evaluation (``sim:fp64``) of the same program, by first-divergence search over the
  program's topological order (:func:`nebisect.search.divergence.first_divergence` with
  :meth:`~nebisect.search.divergence.Dag.frontier`, each value judged as ``bisect`` judges it);
* ``conversion`` — the divergence is between torch and the fp64 program. coremltools
  names the MIL values after torch's nodes, so torch's own intermediates (recorded by
  :mod:`nebisect.sources.torch_graph`) are matched to MIL values where that is sure
  (:mod:`nebisect.detect.torch_match`), and the culprit is the first op, in program
  order, whose matched value disagrees and carries that to a diverging output
  (:func:`by_torch`): where the divergence enters, not the op that shows it at the
  output. Where no matched value does, what is left are the outputs: the op producing
  the first (in program order) output that disagrees with torch, marked
  ``matched=False`` and said so (:func:`by_outputs`) — nothing is invented.

Parent side, no processes: the caller hands in the recorded arrays and the program.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.detect.torch_match import candidates, placed, reaching
from nebisect.oracle import compare, value_divergence
from nebisect.search.divergence import OpError, first_divergence
from nebisect.search.records import Culprit
from nebisect.sources.convert import PATH_LABELS
from nebisect.sources.torch_graph import TorchGraph
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import mismatch_signature

#: what a culprit found by intermediates compared, and the words for a conversion one
BY_INTERMEDIATES = f"intermediates against {REFERENCE_TARGET}"
#: the ops a culprit's divergence chart shows before and after it, in program order
CHART_BEFORE, CHART_AFTER = 24, 8
#: what a culprit found in the program's own values compared
OWN_NONFINITE = (f"the program's own values ({REFERENCE_TARGET}): the first op computing "
                 "inf/NaN from finite values")
#: the ops whose output is the value a state keeps for the next prediction: judged as a
#: held value (an fp16 state that overflows is the culprit even where the exact sum is
#: beyond fp16 range, see :func:`nebisect.oracle.compare`)
STATE_WRITES = ("coreml_update_state",)
#: the cliffs a culprit search follows to the op where they appear (see
#: :func:`by_intermediates`)
NONFINITE, COLLAPSE = mismatch_signature("nonfinite"), mismatch_signature("collapse")
OUTPUTS_ONLY = ("outputs against torch (no value matched to torch's intermediates carries "
                "the divergence: the op producing the first diverging output)")
#: how a culprit found by torch's intermediates says what it compared
BY_TORCH = "intermediates against torch"


def by_intermediates(graph: Any, target: dict[str, np.ndarray],
                     reference: dict[str, np.ndarray], precision: str,
                     signature: str = "") -> Culprit | None:
    """The first op of ``graph`` (a :class:`~nebisect.evaluate.programs.ProgramOutline` or a
    :class:`~nebisect.minimize.graphs.mil.MilGraph`) whose value in ``target`` breaks the
    oracle against ``reference``; None when no recorded value does.

    A cliff enters where its own symptom does, not at the first value past tolerance:
    at inputs large enough to overflow, fp16 has already rounded earlier values past it
    (a conv before GroupNorm's ``square``). For ``mismatch:nonfinite`` the culprit is
    the first op that makes inf/NaN of finite values where the exact value is finite —
    even beyond fp16's range, which excuses the value itself but not the op that
    overflows (:func:`first_overflow`); for ``mismatch:collapse``, the first value that
    collapses. When no value shows the symptom, the first to break the oracle at all —
    unless an op overflowed before it (a sum past 65504 that a division then turns into
    a finite wrong value)."""
    overflow = first_overflow(graph, target, reference, precision)
    if signature == NONFINITE and overflow is not None:
        return overflow
    matching = (_first_divergence(graph, target, reference, precision, signature)
                if signature == COLLAPSE else None)
    found = matching or _first_divergence(graph, target, reference, precision, "")
    if overflow is not None and (found is None or graph.dag.position[overflow.op]
                                 < graph.dag.position[found.op]):
        return overflow
    return found


def first_overflow(graph: Any, target: dict[str, np.ndarray],
                   reference: dict[str, np.ndarray], precision: str) -> Culprit | None:
    """The first op whose ``target`` value holds inf/NaN where its ``reference`` value is
    finite, while every ``target`` value it reads is finite; None when none does."""
    dag = graph.dag
    for index, op in enumerate(dag.order):
        made = [v for v in dag.produces[op] if v in target and v in reference]
        read = [target[v] for v in dag.consumes[op] if v in target]
        if any(_overflows(target[v], reference[v]) for v in made) and not any(
                _has_nonfinite(v) for v in read):
            return Culprit(op, graph.op_types[op], NONFINITE, BY_INTERMEDIATES,
                           ops=_chart(index, dag, graph.op_types, target, reference, precision),
                           rules=_rules_at(graph, op))
    return None


def _overflows(output: np.ndarray, reference: np.ndarray) -> bool:
    """Does ``output`` hold inf/NaN at an element whose ``reference`` is finite?"""
    out, ref = np.asarray(output), np.asarray(reference)
    if out.shape != ref.shape or out.dtype.kind != "f" or ref.dtype.kind != "f":
        return False
    return bool((~np.isfinite(out) & np.isfinite(ref)).any())


def _first_divergence(graph: Any, target: dict[str, np.ndarray],
                      reference: dict[str, np.ndarray], precision: str,
                      signature: str) -> Culprit | None:
    """:func:`by_intermediates`' search: the first op whose value breaks the oracle
    (with ``signature``, only as that mismatch)."""
    dag = graph.dag
    # A state written stays live to the end of the prediction: it diverges at every
    # point past its write, whatever the frontier holds.
    held = {value: dag.position[op] for op in dag.order
            if graph.op_types.get(op) in STATE_WRITES for value in dag.produces[op]}
    judged = value_divergence(target, reference, precision, held)

    def check(value: str) -> str | None:
        found = judged(value)
        return found if not signature or found == signature else None

    def diverges(i: int) -> bool:
        return (any(check(v) for v in dag.frontier(i))
                or any(check(v) for v, written in held.items() if written <= i))

    found = first_divergence(len(dag.order), diverges)
    if found.index is None:
        return None
    op = dag.order[found.index]
    shown = next((s for v in dag.produces[op] if (s := check(v))), "")
    return Culprit(op, graph.op_types[op], shown, BY_INTERMEDIATES,
                   ops=_chart(found.index, dag, graph.op_types, target, reference, precision),
                   rules=_rules_at(graph, op))


def _chart(index: int, dag: Any, op_types: dict[str, str], target: dict[str, np.ndarray],
           reference: dict[str, np.ndarray], precision: str) -> tuple[OpError, ...]:
    """The errors of the ops around position ``index``: the culprit's divergence chart."""
    window = range(max(0, index - CHART_BEFORE), min(len(dag.order), index + CHART_AFTER + 1))
    return tuple(chart for i in window
                 if (chart := _op_error(i, dag, op_types, target, reference, precision)))


def _op_error(index: int, dag: Any, op_types: dict[str, str], target: dict[str, np.ndarray],
              reference: dict[str, np.ndarray], precision: str) -> OpError | None:
    """One op's worst value against the reference (None: no value of it was recorded)."""
    op = dag.order[index]
    compared = [compare(v, reference[v], target[v], precision)
                for v in dag.produces[op] if v in target and v in reference]
    if not compared:
        return None
    return OpError(index, op, op_types[op], max(c.max_ulp_error for c in compared),
                   all(c.passed for c in compared))


def by_torch(graph: Any, program: dict[str, np.ndarray], torch_graph: TorchGraph,
             torch_values: dict[str, np.ndarray], diverging: list[str],
             precision: str) -> Culprit | None:
    """The first op of ``graph``, in program order, with a value in ``program`` (the
    exact evaluation's intermediates, by MIL name) that disagrees with the value torch
    computes for the node it is matched to (``torch_values``, by torch name; see
    :mod:`nebisect.detect.torch_match`) and whose divergence reaches one of the
    ``diverging`` outputs; None when no such value is found.

    Every matched value is judged (:func:`~nebisect.oracle.compare`), not bisected
    with :func:`~nebisect.search.divergence.first_divergence`: matched values are sparse, so "a
    matched value live after op i disagrees" is not monotone (a divergence carried
    between two of them by unmatched values only, or one torch's own code discards),
    and a bisection could step over the first."""
    dag = graph.dag
    matched = candidates(graph, program, torch_graph, torch_values)
    kept = placed(graph, matched, torch_graph)
    reference = {name: torch_values[matched[name].name] for name in kept}
    judged = {name: compare(name, reference[name], program[name], precision) for name in kept}
    disagree = {name for name, compared in judged.items() if not compared.passed}
    found = reaching(dag, disagree, set(judged) - disagree, diverging)
    if not found:
        return None
    name = min(found, key=lambda v: dag.position[dag.producer[v]])
    op, node, compared = dag.producer[name], matched[name], judged[name]
    called = node.name if node.name.startswith(node.op) else f"{node.name} ({node.op})"
    said = (f"{BY_TORCH}: the first value of the program whose disagreement with the "
            f"{PATH_LABELS.get(torch_graph.path, torch_graph.path)} node it is named after "
            f"reaches the outputs, {called}: {compared.detail}")
    return Culprit(op, graph.op_types[op], mismatch_signature(compared.kind), said,
                   ops=_chart(dag.position[op], dag, graph.op_types, program, reference,
                              precision),
                   rules=_rules_at(graph, op))


def diverging_outputs(graph: Any, torch_outputs: dict[str, np.ndarray],
                      program_outputs: dict[str, np.ndarray],
                      precision: str) -> list[tuple[str, str]]:
    """(name, mismatch kind) of each program output that disagrees with torch's, in
    program order."""
    dag = graph.dag
    diverging = []
    for name, expected in torch_outputs.items():
        if name not in program_outputs or name not in dag.producer:
            continue
        compared = compare(name, expected, program_outputs[name], precision)
        if not compared.passed:
            diverging.append((dag.position[dag.producer[name]], name, compared.kind))
    return [(name, kind) for _, name, kind in sorted(diverging)]


def by_outputs(graph: Any, torch_outputs: dict[str, np.ndarray],
               program_outputs: dict[str, np.ndarray], precision: str) -> Culprit | None:
    """The op producing the earliest program output that disagrees with torch."""
    diverging = diverging_outputs(graph, torch_outputs, program_outputs, precision)
    if not diverging:
        return None
    name, kind = diverging[0]
    op = graph.dag.producer[name]
    return Culprit(op, graph.op_types[op], mismatch_signature(kind), OUTPUTS_ONLY, matched=False,
                   rules=_rules_at(graph, op))


def first_nonfinite(graph: Any, reference: dict[str, np.ndarray]) -> Culprit | None:
    """The first op of ``graph`` whose exact value holds inf/NaN while every value it
    reads is finite: where a program that computes inf/NaN by itself (its reference
    "agrees") starts to. None when no recorded value is non-finite."""
    dag = graph.dag
    for op in dag.order:
        made = [reference[v] for v in dag.produces[op] if v in reference]
        read = [reference[v] for v in dag.consumes[op] if v in reference]
        if any(_has_nonfinite(v) for v in made) and not any(_has_nonfinite(v) for v in read):
            return Culprit(op, graph.op_types[op], NONFINITE, OWN_NONFINITE,
                           rules=_rules_at(graph, op),
                           constants=tuple(getattr(graph, "constants", {}).get(op, ())))
    return None


def _has_nonfinite(value: np.ndarray) -> bool:
    array = np.asarray(value)
    return array.dtype.kind == "f" and not bool(np.isfinite(array).all())


def _rules_at(graph: Any, op: str) -> tuple[str, ...]:
    """The runtime rules ``op`` breaks, as the graph records them (none for a graph that
    does not)."""
    return tuple(getattr(graph, "rules", {}).get(op, ()))
