"""Simulator targets: the MIL interpreter under each precision model and device profile.

They run anywhere (no Core ML), take builder programs and ``.mlpackage`` artifacts
alike, and report intermediates on request so bisection can find the first op that
diverges. Nothing heavy is imported here; the interpreter is imported on first use.

Every sim target computes what the Core ML runtime computes where that differs from the
op definition and is published (``coreml`` semantics, :mod:`nebisect.mil.semantics`);
naming ``spec`` after the variant (``sim:fp16:spec``) gives the definition instead. The
semantics is part of the target name, hence of a case's identity.

Under the ``coreml`` semantics the targets also refuse what the runtime refuses
(:mod:`nebisect.mil.semantics.rules`), on the compute unit each models: ``sim:fp32``
Core ML's CPU, ``sim:fp16`` and ``sim:fp16-naive`` its GPU, ``sim:ane`` the Neural
Engine with the CPU for the ops it falls back on. The float64 oracle models no unit and
refuses nothing: it is the reference every other target is judged against.

``sim:fp16`` and ``sim:ane`` run one fp16 program; the Neural Engine profile computes a
few of its ops differently (its kernels, its CPU fallbacks). Predicted in one process
(:func:`predicting_together`), the second of them runs only the ops whose plan differs
and what their changed values reach (:func:`nebisect.mil.plan.diff_plans`), bit for bit
the prediction it would make alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.isolate import COREMLTOOLS_ONLY, Needs
from nebisect.mil.semantics import DEFAULT_SEMANTICS
from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import register_target, spec_of
from nebisect.targets.spec import REFERENCE_TARGET, TargetSpec

if TYPE_CHECKING:
    from nebisect.mil.interp import CompiledProgram, ComputedValues, SimResult
    from nebisect.mil.plan import PlanDiff

#: The sim variants that run one program under sibling plans (:func:`predict_together`).
SHARING_VARIANTS = frozenset({"fp16", "ane"})


class _SimTarget(Target):
    """Shared load and predict: the interpreter with this target's precision and profile."""

    #: the heavy packages a simulator child never needs blocked (see isolation.needs)
    needs = COREMLTOOLS_ONLY.adding(Needs(imports=("nebisect.mil.interp",)))
    sim_precision = "fp64"
    sim_profile: str | None = None
    #: the compute unit the runtime's refusals are checked for (a profile places each op)
    sim_unit: str | None = None

    @property
    def semantics(self) -> str:
        """The op semantics this target runs: the spec's, else the Core ML runtime's."""
        return self.spec.semantics or DEFAULT_SEMANTICS

    def _compiled(self, model: Any) -> Any:
        """The program's plan under this target (compiled once per program object)."""
        from nebisect.isolation import memory
        from nebisect.mil.interp import compile_program

        program = model.program if hasattr(model, "program") else model
        return compile_program(program, self.sim_precision, profile=self.sim_profile,
                               semantics=self.semantics, unit=self.sim_unit,
                               memory_budget=memory.budget())

    def load(self, model: Any) -> None:
        """Read the program and compile its plan (cached for :meth:`predict`): a program
        that does not load, declares a tensor over the memory limit, or breaks a rule the
        runtime applies when it loads or plans a model, fails here."""
        self._compiled(model).refuse()

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        compiled = self._compiled(model)
        shared = _SHARED.get()
        if shared is None or compiled.plan.states:
            return _prediction(compiled.run(inputs, intermediates=intermediates))
        program = model.program if hasattr(model, "program") else model
        return _prediction(shared.run(self.spec, program, compiled, inputs, intermediates))

    def predict_steps(
        self, model: Any, inputs: dict[str, np.ndarray], steps: int, *,
        intermediates: bool = False,
    ) -> Iterator[Prediction]:
        """Each step starts from the states the previous one left (zeros at the first).
        The first is :meth:`predict`'s, so a target that refines it (a plugin's
        subclass) judges a model without state exactly as it predicts."""
        prediction = self.predict(model, inputs, intermediates=intermediates)
        yield prediction
        compiled = self._compiled(model)
        for _ in range(steps - 1):
            if not prediction.state:
                return
            prediction = _prediction(compiled.run(inputs, intermediates=intermediates,
                                                  state=prediction.state))
            yield prediction


def shares_predictions(first: TargetSpec, second: TargetSpec) -> bool:
    """Do two targets run one program under sibling plans, so that predicting both in
    one process (:func:`predicting_together`) runs its common ops once? ``sim:fp16`` and
    ``sim:ane`` of one semantics do."""
    return (first != second and first.backend == second.backend == "sim"
            and {first.variant, second.variant} <= SHARING_VARIANTS
            and first.semantics == second.semantics and not first.device)


@dataclass
class _SharedEvaluations:
    """The first evaluation of a program on one input set by a target that shares
    predictions, kept for the others predicting it after (with each pair's plan
    difference, computed once)."""

    held: tuple[TargetSpec, Any, dict[str, Any], CompiledProgram, ComputedValues] | None = None
    diffs: dict[tuple[int, int], PlanDiff] = field(default_factory=dict)

    def run(self, spec: TargetSpec, program: Any, compiled: CompiledProgram,
            inputs: dict[str, Any], intermediates: bool) -> SimResult:
        if self.held is None and spec.variant in SHARING_VARIANTS:
            evaluation = compiled.evaluate(inputs)
            self.held = spec, program, inputs, compiled, evaluation
            return evaluation.result(intermediates)
        if self.held is not None:
            held_spec, held_program, held_inputs, base, evaluation = self.held
            if shares_predictions(held_spec, spec) and held_program is program and (
                    _same_inputs(held_inputs, inputs)):
                diff = self._diff(base, compiled)
                if diff.shareable:
                    return compiled.run_beside(evaluation, diff, inputs,
                                               intermediates=intermediates)
        return compiled.run(inputs, intermediates=intermediates)

    def _diff(self, base: CompiledProgram, other: CompiledProgram) -> PlanDiff:
        from nebisect.mil.plan import diff_plans

        key = id(base), id(other)
        if key not in self.diffs:
            self.diffs[key] = diff_plans(base.plan, other.plan)
        return self.diffs[key]


def _same_inputs(first: dict[str, Any], second: dict[str, Any]) -> bool:
    from nebisect.mil.plan import same_value

    return first.keys() == second.keys() and all(
        same_value(np.asarray(value), np.asarray(second[name])) for name, value in first.items())


_SHARED: ContextVar[_SharedEvaluations | None] = ContextVar("nebisect_sim_shared", default=None)


@contextmanager
def predicting_together() -> Iterator[None]:
    """Within it, the first prediction of a program by ``sim:fp16`` or ``sim:ane`` keeps
    every value it computed, and the other (:func:`shares_predictions`) predicting the
    same program on the same inputs re-runs only the ops it computes differently; any
    other prediction runs as it does outside. A program with state, or a prediction that
    raised, shares nothing."""
    token = _SHARED.set(_SharedEvaluations())
    try:
        yield
    finally:
        _SHARED.reset(token)


def _prediction(result: Any) -> Prediction:
    """A simulator result (:class:`~nebisect.mil.interp.SimResult`) as a prediction."""
    return Prediction(
        outputs=result.outputs,
        placement=result.placement,
        op_types=result.op_types,
        intermediates=result.intermediates,
        fallbacks=result.fallbacks,
        state=result.state,
    )


@register_target(REFERENCE_TARGET)
class SimFP64(_SimTarget):
    """MIL simulator, float64 everywhere (fp16 casts are identities): the oracle."""

    sim_precision = "fp64"


@register_target("sim:fp32")
class SimFP32(_SimTarget):
    """MIL simulator, float32 compute, values stored as declared (Core ML's CPU)."""

    sim_precision = "fp32"
    sim_unit = "cpu"


@register_target("sim:fp16")
class SimFP16(_SimTarget):
    """MIL simulator, fp16 storage with each op computed in fp32 (a careful fp16 device)."""

    sim_precision = "fp16"
    sim_unit = "gpu"


@register_target("sim:fp16-naive")
class SimFP16Naive(_SimTarget):
    """MIL simulator, fp16 arithmetic by textbook formulas (no max-shift, fp16 sums)."""

    sim_precision = "fp16-naive"
    sim_unit = "gpu"


@register_target("sim:ane")
class SimANE(_SimTarget):
    """MIL simulator with the Neural Engine profile (published behaviour, not the silicon)."""

    sim_precision = "fp16"
    sim_profile = "ane"


def follow_semantics(reference: str, target: str) -> str:
    """``reference`` with the op semantics of ``target`` when it is a sim spec naming none.

    The float64 oracle measures precision, not semantics: judging ``sim:fp16:spec``
    against a ``sim:fp64`` that follows the runtime would report the semantics
    difference as a precision failure. A reference that names its semantics keeps it.
    """
    if not reference:
        return reference  # no reference: a case that is not judged (a recording)
    ref, tgt = spec_of(reference), spec_of(target)
    if not ref.simulated or not tgt.simulated or ref.semantics or not tgt.semantics:
        return reference
    return f"{reference}:{tgt.semantics}"
