"""First divergence and input cutting against pure-Python checks (no ML anywhere)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from nebisect.search.ddmin import Evaluator
from nebisect.search.divergence import Dag, first_divergence, locate_divergence


def test_first_divergence_binary_search() -> None:
    for count in (1, 2, 3, 100, 1000, 10_000):
        for first in {0, count // 3, count - 1}:
            calls: list[int] = []

            def broken(i: int, first: int = first, calls: list[int] = calls) -> bool:
                calls.append(i)
                return i >= first

            found = first_divergence(count, broken)
            assert found.index == first
            assert found.checks == len(calls) <= 1 + math.ceil(math.log2(count)) + 1
    assert first_divergence(50, lambda i: False).index is None
    assert first_divergence(0, lambda i: True).index is None


def diamond() -> Dag:
    #   x -> a -> b -> d -> (out)
    #        a -> c -> d ;  c also -> (out2)
    return Dag(
        order=["a", "b", "c", "d"],
        consumes={"a": ["x"], "b": ["va"], "c": ["va"], "d": ["vb", "vc"]},
        produces={"a": ["va"], "b": ["vb"], "c": ["vc"], "d": ["vd"]},
        inputs=["x"],
        outputs=["vd", "vc"],
    )


def test_dag_cut_frontier_ancestors() -> None:
    dag = diamond()
    assert dag.frontier(0) == ["va"]
    assert dag.frontier(1) == ["va", "vb"]
    assert dag.frontier(2) == ["vb", "vc"]
    assert dag.frontier(3) == ["vc", "vd"]
    assert dag.ancestors("d") == ["c", "b", "a"]
    assert dag.ancestors("a") == []

    cut = dag.cut({"d"})
    assert (cut.units, cut.inputs, cut.outputs) == (("d",), ("vb", "vc"), ("vd",))
    cut = dag.cut({"c", "b"})
    assert (cut.units, cut.inputs, cut.outputs) == (("b", "c"), ("va",), ("vb", "vc"))
    cut = dag.cut({"a", "c", "d"})
    assert cut.inputs == ("x", "vb")
    assert cut.outputs == ("vc", "vd")  # vc is read by d but is also a graph output
    with pytest.raises(KeyError):
        dag.cut({"zz"})


def chain(count: int) -> Dag:
    order = [f"u{i}" for i in range(count)]
    return Dag(
        order,
        consumes={u: [f"v{i - 1}" if i else "x"] for i, u in enumerate(order)},
        produces={u: [f"v{i}"] for i, u in enumerate(order)},
        inputs=["x"],
        outputs=[f"v{count - 1}"],
    )


def test_locate_divergence_single_bad_op_costs_one_isolated_evaluation() -> None:
    dag = chain(1000)
    bad = 517
    compared: list[str] = []

    def divergence(value: str) -> str | None:
        compared.append(value)
        i = int(value[1:])
        if i < bad:
            return None
        return "mismatch:collapse" if i == bad else "mismatch:tolerance"

    def test(units: Sequence[str]) -> str | None:
        return "mismatch:collapse" if f"u{bad}" in units else None

    evaluator = Evaluator(test, confirm=0)
    found = locate_divergence(dag, divergence, evaluator)
    assert found.unit == f"u{bad}" and found.index == bad
    assert found.signature == "mismatch:collapse"
    assert found.reduction is not None and found.reduction.units == [f"u{bad}"]
    assert evaluator.stats.evaluations == 1
    assert found.checks <= 1 + math.ceil(math.log2(1000))


def test_locate_divergence_grows_window_when_op_alone_does_not_reproduce() -> None:
    dag = chain(200)

    def divergence(value: str) -> str | None:
        return "mismatch:nonfinite" if int(value[1:]) >= 120 else None

    def test(units: Sequence[str]) -> str | None:
        return "mismatch:nonfinite" if {"u117", "u120"} <= set(units) else None

    evaluator = Evaluator(test, confirm=0)
    found = locate_divergence(dag, divergence, evaluator)
    assert found.unit == "u120"
    assert found.reduction is not None
    assert found.reduction.units == ["u117", "u120"]
    assert found.reduction.strategy == "first-divergence+ddmin"


def test_locate_divergence_is_monotone_across_branches() -> None:
    # Branch c never diverges; d's output diverges because b does.
    dag = diamond()
    found = locate_divergence(
        dag,
        lambda v: "mismatch:collapse" if v in ("vb", "vd") else None,
        Evaluator(lambda units: "mismatch:collapse" if "b" in units else None, confirm=0),
    )
    assert found.unit == "b"
    assert found.reduction is not None and found.reduction.units == ["b"]


def test_locate_divergence_unreproducible_and_no_divergence() -> None:
    dag = chain(10)
    found = locate_divergence(dag, lambda v: "mismatch:tolerance",
                              Evaluator(lambda u: None, confirm=0))
    assert found.unit == "u0" and found.reduction is None
    nothing = locate_divergence(dag, lambda v: None, Evaluator(lambda u: "x"))
    assert nothing.index is None and nothing.reduction is None
