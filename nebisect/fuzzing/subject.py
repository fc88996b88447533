"""An op spec seen as a fuzzing subject: full cases, dedup class, cliff family, case files.

A full case is JSON: ``{"program": {"op", "dtype", "inputs", "params", "wrap"},
"values": {input name: recipe}}``. ``program`` is exactly the builder's keyword
arguments (``nebisect.fuzzing.builders:build``); ``values`` are the value recipes the
inputs are materialized from. This module is the only place where the campaign engine's
generic notions meet an op spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from nebisect.arrays import sha256_bytes
from nebisect.case import BUILDER as BUILDER_KIND
from nebisect.case import Case, CaseOptions, SourceRef
from nebisect.errors import NebisectError
from nebisect.fuzzing.builders import WRAPS, output_names
from nebisect.opspecs import strategies
from nebisect.opspecs.ops import OpSpec
from nebisect.search.cliff import Boundary

BUILDER = "nebisect.fuzzing.builders:build"
#: the model every op case runs: a program built by :data:`BUILDER` from the case's params
BUILT = SourceRef(BUILDER_KIND, BUILDER)


def builder_case(program: dict[str, Any], target: str, inputs: Path, inputs_sha256: str,
                 options: CaseOptions) -> Case:
    """The isolated case that builds ``program`` and runs it on ``target`` with the
    inputs at ``inputs``; its model hash is the program's."""
    model = json.dumps([BUILDER, program], sort_keys=True)
    return Case(BUILT, target, inputs_path=str(inputs),
                model_sha256=sha256_bytes(model.encode()), inputs_sha256=inputs_sha256,
                options=replace(options, params=program))


def op_case(case: dict[str, Any]) -> dict[str, Any]:
    """The op-level part of a full case (what op specs' callables take)."""
    return {"inputs": case["program"]["inputs"], "params": case["program"]["params"]}


@dataclass(frozen=True)
class OpSubject:
    """Fuzz one op spec at one dtype, optionally wrapped (``--wrap ne-attract``)."""

    spec: OpSpec
    dtype: str = "fp16"
    wrap: str = "none"

    def __post_init__(self) -> None:
        if self.wrap not in WRAPS:
            raise NebisectError(f"unknown wrap {self.wrap!r}: one of {', '.join(WRAPS)}")
        if self.dtype not in strategies.DTYPES:
            raise NebisectError(
                f"unknown dtype {self.dtype!r}: one of {', '.join(strategies.DTYPES)}"
            )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def cases(self) -> st.SearchStrategy[dict[str, Any]]:
        return _full_cases(self)

    def param_class(self, case: dict[str, Any]) -> str:
        return self.spec.param_class(op_case(case))

    def boundaries(self, case: dict[str, Any]) -> list[Boundary]:
        return self.spec.boundaries(op_case(case))

    def family(self, case: dict[str, Any], x: float) -> dict[str, Any]:
        """The case with its first input delta-replicated at ``x`` (seed 000's family)."""
        first = next(iter(case["values"]))
        return {**case, "values": {**case["values"], first: strategies.delta(x)}}

    def family_start(self, case: dict[str, Any]) -> float | None:
        """The case's own x when its first input already is a finite delta."""
        recipe = next(iter(case["values"].values()))
        value = recipe.get("value")
        if recipe.get("kind") == "delta" and isinstance(value, float | int):
            return float(value)
        return None

    def arrays(self, case: dict[str, Any]) -> dict[str, np.ndarray]:
        """The input arrays a case names."""
        program = case["program"]
        return {
            name: strategies.materialize(case["values"][name], shape, program["dtype"])
            for name, shape in program["inputs"].items()
        }

    def options(self) -> CaseOptions:
        """Case options: the op whose placement counts, and with a wrap, what to judge."""
        outputs = output_names(self.spec.outputs) if self.wrap != "none" else []
        return CaseOptions(op_of_interest=self.spec.op_type, outputs=tuple(outputs))


@st.composite
def _full_cases(draw: st.DrawFn, subject: OpSubject) -> dict[str, Any]:
    spec = subject.spec
    drawn = draw(spec.cases(subject.dtype))
    hints = (*(b.value for b in spec.boundaries(drawn)), *spec.hints)
    recipe = strategies.values(subject.dtype, spec.ranges, hints)
    return {
        "program": {"op": spec.name, "dtype": subject.dtype, "inputs": drawn["inputs"],
                    "params": drawn["params"], "wrap": subject.wrap},
        "values": {name: draw(recipe) for name in drawn["inputs"]},
    }

