"""Op specs: what the fuzzer knows about one MIL op, registered by name.

A spec pairs a Hypothesis strategy for *op cases* — JSON dicts
``{"inputs": {name: shape}, "params": {...}}`` — with an emitter that builds the op
from such a case with coremltools' MIL builder, a parameter class for dedup
(``reduce_log_sum_exp/axes=1/keep_dims``: two findings with the same signature in the
same class are one bug) and the overflow boundaries theory predicts for a case (shown
beside the cliff the fuzzer measures). The campaign engine sees none of this: it gets
strategies and callables built from a spec (``nebisect.fuzzing.subject``).

Spec definitions live in ``nebisect/opspecs/specs/<family>.py`` and register on import;
emitters receive ``mb`` as an argument, so nothing here imports coremltools.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.shapes import normalize_axes
from nebisect.registry import ImportOnce, Registry, package_modules
from nebisect.search.cliff import Boundary

LN_FP16_MAX = math.log(FP16_MAX)

#: ``(dtype) -> strategy of {"inputs": {...}, "params": {...}}``
CaseStrategy = Callable[[str], st.SearchStrategy[dict[str, Any]]]
#: ``(mb, inputs {name: Var}, params, dtype) -> Var | tuple[Var, ...]``
Emitter = Callable[[Any, dict[str, Any], dict[str, Any], str], Any]


def no_boundaries(case: dict[str, Any]) -> list[Boundary]:
    return []


def no_params(op: Any) -> dict[str, Any]:
    return {}


def fixed(*found: Boundary) -> Callable[[dict[str, Any]], list[Boundary]]:
    """Boundaries that do not depend on the case's shape."""
    return lambda case: list(found)


def default_class(
    name: str, case: dict[str, Any], keys: tuple[str, ...] | None = None
) -> str:
    """``op/axes=1/keep_dims``: the op plus its axes and its non-float params.

    Axes are spelled so that the class survives shrinking where it should: reducing
    every axis is ``axes=all`` and the last axis is ``axis=last`` whatever the rank, so
    a NaN-dropping full reduction found on a rank-4 tensor can shrink to rank 1. Float
    params and seeds (of constant weights) are left out on purpose: a cliff found at
    alpha=0.1 and at alpha=0.2 is the same bug.
    """
    shape: list[int] = next(iter(case["inputs"].values()), [])
    rank = len(shape)
    params = case.get("params", {})
    parts = [name]
    for key in sorted(params):
        value = params[key]
        if "seed" in key or (keys is not None and key not in keys):
            continue
        if key == "axes":
            axes = list(range(rank)) if value is None else normalize_axes(value, rank)
            rendered = "all" if axes == list(range(rank)) else ",".join(map(str, axes))
            parts.append(f"axes={rendered}")
        elif key == "axis" and isinstance(value, int) and rank:
            parts.append("axis=last" if value % rank == rank - 1 else f"axis={value % rank}")
        elif isinstance(value, bool):
            parts.append(key if value else f"no_{key}")
        elif isinstance(value, str | int):
            parts.append(f"{key}={value}")
    return "/".join(parts)


@dataclass(frozen=True)
class OpSpec:
    """Everything the fuzzer needs to generate, build and explain cases of one op."""

    name: str
    family: str
    op_type: str
    emit: Emitter
    cases: CaseStrategy
    param_class: Callable[[dict[str, Any]], str]
    boundaries: Callable[[dict[str, Any]], list[Boundary]]
    #: preferred uniform value ranges for inputs (e.g. log wants positive values)
    ranges: tuple[tuple[float, float], ...] = ()
    #: extra values worth trying for this op (fp16 boundaries of its formula)
    hints: tuple[float, ...] = field(default_factory=tuple)
    #: number of op outputs (topk: values and indices)
    outputs: int = 1
    doc: str = ""
    #: the case params ``boundaries`` reads, taken from an op of a real program (lint's
    #: guided probes ask for the boundary of ops the fuzzer did not build)
    params_of: Callable[[Any], dict[str, Any]] = no_params


#: Op specs by name; loading imports the spec modules of ``nebisect/opspecs/specs``.
OP_SPECS: Registry[str, OpSpec] = Registry(
    "op", ImportOnce(package_modules("nebisect.opspecs.specs"))
)


def op_spec(
    name: str,
    *,
    family: str,
    cases: CaseStrategy,
    op_type: str | None = None,
    param_class: Callable[[dict[str, Any]], str] | None = None,
    boundaries: Callable[[dict[str, Any]], list[Boundary]] = no_boundaries,
    ranges: tuple[tuple[float, float], ...] = (),
    hints: tuple[float, ...] = (),
    class_keys: tuple[str, ...] | None = None,
    outputs: int = 1,
    doc: str = "",
    params_of: Callable[[Any], dict[str, Any]] = no_params,
) -> Callable[[Emitter], Emitter]:
    """Register the decorated emitter as the op spec ``name`` (duplicates are errors).

    ``class_keys`` limits the params that enter the dedup class (sizes such as a
    matmul's inner dimension do not make a different bug); default: all of them.
    ``params_of`` reads, from a MIL op of any program, the params ``boundaries`` needs
    beyond the input's shape (a dot product's inner dimension).
    """

    def decorate(emit: Emitter) -> Emitter:
        OP_SPECS.register(name, OpSpec(
            name=name,
            family=family,
            op_type=op_type or name,
            emit=emit,
            cases=cases,
            param_class=param_class or (lambda case: default_class(name, case, class_keys)),
            boundaries=boundaries,
            ranges=ranges,
            hints=hints,
            outputs=outputs,
            doc=doc or _first_line(emit.__doc__),
            params_of=params_of,
        ))
        return emit

    return decorate


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def registered_ops() -> dict[str, OpSpec]:
    """Every registered op spec by name, in name order."""
    return dict(OP_SPECS.items())


def get_op(name: str) -> OpSpec:
    """The spec registered as ``name``; an unknown name suggests the closest ones."""
    return OP_SPECS.get(name)
