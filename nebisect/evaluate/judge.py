"""Evaluate one case: predict on the target and on the reference, judge, in isolation.

The child side (:func:`evaluate_job`) does everything that can crash — loading the
artifact, predicting — and returns a verdict plus the raw outputs; the parent side
(:func:`evaluate`) only builds the job and hands it to the isolation engine. Running
the reference in the same child halves the process count for fuzzing and replay; the
reference (the float64 simulator, or torch fp64) cannot crash the way a device does,
and if it fails the verdict says so explicitly rather than blaming the target.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import load_npz, save_npz, sha256_arrays
from nebisect.case import Case, SourceRef
from nebisect.codec import encode
from nebisect.errors import CannotJudge
from nebisect.isolate import Isolator, Job, Needs, Outcome, mark_stage, run_isolated
from nebisect.isolation.job import is_out_of_memory
from nebisect.oracle import judge
from nebisect.sources.artifact import Artifact
from nebisect.sources.domains import masked_positions
from nebisect.sources.torch import held_needs
from nebisect.targets.base import Prediction, TargetSkipped
from nebisect.targets.placement import check_routing, off_device, required_devices
from nebisect.targets.registry import get_target, load_plugins
from nebisect.targets.sim import follow_semantics, predicting_together
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import Stage, Status, Tolerance, Verdict, error_signature, mismatch_signature


def load_registries() -> None:
    """What every evaluation reads lazily — the targets, the simulator with its kernels,
    profiles and semantics, the program loader — loaded in a fork template, once
    (:data:`EVALUATION`), instead of once per forked child."""
    from nebisect.mil import interp, load  # noqa: F401  (imported for their side effect)
    from nebisect.mil.kernels import KERNELS
    from nebisect.mil.profiles import PROFILES
    from nebisect.mil.semantics import SEMANTICS
    from nebisect.targets.registry import TARGETS

    for registry in (TARGETS, KERNELS, PROFILES, SEMANTICS):
        registry.load()


@dataclass(frozen=True)
class EvaluateArguments:
    """The arguments of :func:`evaluate_job`: the case as its JSON object (read in the
    child once the plugins it names are loaded: a plugin target's name is known only
    then), the reference target, the directory keeping the reference's outputs per
    inputs, and the tolerance that replaces the target's."""

    case: dict[str, Any]
    reference: str | None
    reference_cache: str = ""
    tolerance: Tolerance | None = None
    #: further cases (as JSON objects) of the case's model on its inputs, each on a sim
    #: target sharing predictions with the case's (:func:`evaluate_together`), judged
    #: in the same child after it
    beside: tuple[dict[str, Any], ...] = ()


#: Where a job judging cases together hands back the verdicts of those beside its own
#: (``job_result``), and the prefix of the ``i``-th one's arrays (``beside0/out:y``).
BESIDE = "beside"


def evaluate_job(arguments: EvaluateArguments) -> tuple[Verdict, dict[str, np.ndarray]]:
    """Child side of :func:`evaluate` and :func:`evaluate_together`; see their
    docstrings for the options honoured."""
    # Plugins first: a fresh child knows a plugin target's name only once it is loaded,
    # and Case validates its target name on construction.
    load_plugins(arguments.case.get("options", {}).get("plugins", ()))
    case = Case.from_dict(arguments.case)
    if not arguments.beside:
        return _evaluate_case(case, arguments)
    with predicting_together():
        mark_stage(Stage.LOAD)
        artifact = Artifact.of(case.ref, case.options.params)
        inputs = load_npz(case.inputs_path) if case.inputs_path else {}
        verdict, arrays = _evaluate_case(case, arguments, artifact, inputs)
        judged: list[dict[str, Any] | None] = []
        for index, document in enumerate(arguments.beside):
            other = Case.from_dict(document)
            started = time.perf_counter()
            try:
                if (other.ref, other.inputs_path, other.options.params) != (
                        case.ref, case.inputs_path, case.options.params):
                    raise ValueError("a case judged beside another runs its model and inputs")
                beside, beside_arrays = _evaluate_case(other, arguments, artifact, inputs)
            except Exception:  # that case is judged in a process of its own
                judged.append(None)
                continue
            beside.timings.call = time.perf_counter() - started
            judged.append(json.loads(beside.to_json()))
            arrays.update(_prefixed(f"{BESIDE}{index}/", beside_arrays))
    verdict.job_result[BESIDE] = judged
    return verdict, arrays


def _evaluate_case(case: Case, arguments: EvaluateArguments, artifact: Artifact | None = None,
                   inputs: dict[str, np.ndarray] | None = None,
                   ) -> tuple[Verdict, dict[str, np.ndarray]]:
    """One case judged in this child (its model and inputs loaded unless given)."""
    options = case.options
    want_intermediates = options.intermediates
    mark_stage(Stage.LOAD)
    if artifact is None:
        artifact = Artifact.of(case.ref, options.params)
    if inputs is None:
        inputs = load_npz(case.inputs_path) if case.inputs_path else {}
    target = get_target(case.target)
    unavailable = target.availability()
    if unavailable:
        return Verdict(Status.SKIPPED, case.stage, "skipped", message=unavailable), {}
    try:
        target.load(artifact)
        mark_stage(Stage.PREDICT)
        started = time.perf_counter()
        predictions = target.predict_steps(artifact, inputs, options.steps,
                                           intermediates=want_intermediates)
        prediction = next(predictions)
    except TargetSkipped as skip:
        return Verdict(Status.SKIPPED, case.stage, "skipped", message=str(skip)), {}
    except CannotJudge as gap:
        # nebisect's gap, never the model's failure: the case is not judged.
        return Verdict(Status.SKIPPED, case.stage, "skipped",
                       message=f"{CannotJudge.PREFIX}{gap}", target=case.target), {}
    unusable = unusable_outputs(prediction)
    if unusable:
        # The target's own fault, its verdict: judged (or shipped to the parent) these
        # outputs would fail later, under the reference's name.
        return Verdict(Status.ERROR, Stage.PREDICT, error_signature(Stage.PREDICT, unusable),
                       message=unusable, target=case.target), {}
    arrays = _prefixed("out:", prediction.outputs)
    arrays.update(_prefixed("mid:", prediction.intermediates))
    reference_name = follow_semantics(arguments.reference or "", case.target)
    if not reference_name:
        verdict = Verdict(Status.PASS, Stage.PREDICT, placement=prediction.placement,
                          target=case.target)
        return _routed(case, prediction, verdict), arrays
    predicted = time.perf_counter()
    mark_stage(Stage.REFERENCE)
    reference_source = options.reference_source
    reference_artifact = (
        Artifact.of(SourceRef(*reference_source), options.params)
        if reference_source is not None and reference_source != (case.ref.kind,
                                                                  case.ref.location)
        else artifact
    )
    references = get_target(reference_name).predict_steps(
        reference_artifact, inputs, options.steps, intermediates=want_intermediates)
    try:
        # A stateful model's reference carries its own state: no cached outputs.
        expected = _numeric(next(references)) if prediction.state else _reference(
            reference_name, reference_artifact, inputs, want_intermediates,
            arguments.reference_cache)
    except Exception as exc:
        if is_out_of_memory(exc):
            raise  # the case is ``oom``, whichever side ran out
        message = f"reference {reference_name} failed: {exc}"
        return Verdict(Status.ERROR, Stage.REFERENCE, error_signature(Stage.REFERENCE, message),
                       message=message), arrays
    referenced = time.perf_counter()
    arrays.update(_prefixed("ref:", expected.outputs))
    arrays.update(_prefixed("refmid:", expected.intermediates))
    precision = options.judging_precision(target.precision)
    if precision in ("fp32", "fp64") and any(
            np.asarray(value).dtype == np.float16 for value in prediction.outputs.values()):
        # A program whose outputs are declared fp16 stores them at fp16 on every backend
        # (Core ML's typed execution, which sim:fp32 follows): judge them in fp16 ULPs.
        precision = "fp16"
    elif precision == "fp32" and _computes_in_fp16(artifact):
        # So does an fp32 target with what a program computes between casts, as
        # coremltools' default FLOAT16 precision converts (fp32 in and out, fp16
        # inside): judged as an fp32 program's, its fp16 rounding would be a failure.
        # An fp64 target (the oracle's precision) computes through the casts, and is
        # judged in fp64.
        precision = "fp16"
    verdict = _judge(case, precision, expected, prediction, arguments.tolerance, inputs)
    # What ``run``'s summary adds up: the target's and the reference's share of the case.
    spent = [predicted - started, referenced - predicted]
    if prediction.state:
        verdict, arrays = _decode(case, precision, verdict, arrays, predictions,
                                  references, spent, arguments.tolerance, inputs)
    verdict.timings.predict, verdict.timings.reference = spent
    return verdict, arrays


def _decode(case: Case, precision: str, verdict: Verdict, arrays: dict[str, np.ndarray],
            predictions: Iterator[Prediction], references: Iterator[Prediction],
            spent: list[float], tolerance: Tolerance | None, inputs: dict[str, np.ndarray],
            ) -> tuple[Verdict, dict[str, np.ndarray]]:
    """A stateful model past its first step: each later step judged in turn, up to the
    first that fails (the verdict, pinned to its step) or the last; the arrays are the
    judged step's. ``spent`` (target, reference seconds) grows by the steps' share."""
    step = 1
    while not verdict.failed:
        began = time.perf_counter()
        prediction = next(predictions, None)
        predicted = time.perf_counter()
        expected = next(references, None)
        spent[0] += predicted - began
        spent[1] += time.perf_counter() - predicted
        if prediction is None or expected is None:
            break
        step += 1
        unusable = unusable_outputs(prediction)
        if unusable:
            verdict = Verdict(Status.ERROR, Stage.PREDICT,
                              error_signature(Stage.PREDICT, unusable), message=unusable,
                              target=case.target)
            break
        arrays = {**_prefixed("out:", prediction.outputs),
                  **_prefixed("mid:", prediction.intermediates),
                  **_prefixed("ref:", expected.outputs),
                  **_prefixed("refmid:", expected.intermediates)}
        verdict = _judge(case, precision, expected, prediction, tolerance, inputs)
    verdict.target_facts.steps = step
    if verdict.failed:
        verdict.message = f"at step {step}: {verdict.message}"
    return verdict, arrays


#: How a state is named beside the outputs it is judged with (``state:acc``).
STATE_PREFIX = "state:"

#: The dtype kinds a prediction's arrays may have: bool, signed and unsigned integers,
#: floats (what the oracle compares, and what crosses the process boundary).
NUMERIC_KINDS = "biuf"


def unusable_outputs(prediction: Prediction) -> str:
    """What makes a prediction's outputs or intermediates uncomparable (an array of
    objects, strings or complex numbers, or no array at all), as the rest of a sentence;
    "" when they are all numeric arrays."""
    for kind, arrays in (("output", prediction.outputs),
                         ("intermediate", prediction.intermediates)):
        for name, value in arrays.items():
            try:
                dtype = np.asarray(value).dtype
            except (TypeError, ValueError) as exc:
                return f"{kind} {name!r} is not an array ({exc})"
            if dtype.kind not in NUMERIC_KINDS:
                return (f"{kind} {name!r} has dtype {dtype}; a prediction's outputs must be "
                        "numeric arrays (bool, integer or float)")
    return ""


def _reference(name: str, artifact: Artifact, inputs: dict[str, np.ndarray],
               intermediates: bool, cache: str) -> Prediction:
    """The reference's prediction; with a ``cache`` directory, computed once per
    (reference, artifact, inputs) across every cell of a run: a run judges each input
    set on every target and path against the same torch fp64 outputs, and rebuilding
    the module for each of them was most of a real model's run. Outputs that are not
    numeric arrays are the reference's failure (ValueError)."""
    if not cache or intermediates:
        return _numeric(get_target(name).predict(artifact, inputs,
                                                 intermediates=intermediates))
    key = sha256_arrays({f"in:{k}": v for k, v in inputs.items()}
                        | {"who": np.frombuffer(
                            f"{name}|{artifact.kind}|{artifact.location}|{artifact.function}"
                            .encode(), np.uint8)})
    stored = Path(cache) / f"{key[:32]}.npz"
    if stored.is_file():
        return Prediction(load_npz(stored))
    expected = _numeric(get_target(name).predict(artifact, inputs, intermediates=False))
    if not expected.placement and not expected.notes:  # outputs are all it has
        stored.parent.mkdir(parents=True, exist_ok=True)
        save_npz(stored, {k: np.asarray(v) for k, v in expected.outputs.items()})
    return expected


def _computes_in_fp16(artifact: Artifact) -> bool:
    """Does the ML program of ``artifact`` declare any op's output fp16 (False for a
    torch source: each target gets a program converted at its own precision)? A
    package's spec is read, not its program built: every case on an fp32 target asks."""
    if artifact.ref.is_torch:
        return False
    if artifact.ref.is_package:
        from nebisect.mil.dtypes import spec_declares_fp16
        from nebisect.mil.load import read_spec

        return spec_declares_fp16(read_spec(artifact.location), artifact.function)
    from nebisect.mil.dtypes import var_element_dtype

    return any(var_element_dtype(output) == np.float16
               for function in artifact.program.functions.values()
               for op in function.operations for output in op.outputs)


def _numeric(prediction: Prediction) -> Prediction:
    unusable = unusable_outputs(prediction)
    if unusable:
        raise ValueError(unusable)
    return prediction


def _judge(
    case: Case,
    precision: str,
    expected: Prediction,
    prediction: Prediction,
    tolerance: Tolerance | None,
    inputs: dict[str, np.ndarray],
) -> Verdict:
    names = list(case.options.outputs) or sorted(expected.outputs)
    wanted = {n: expected.outputs[n] for n in names if n in expected.outputs}
    got = {n: prediction.outputs[n] for n in names if n in prediction.outputs}
    masked = _unpadded(case.options.masked_outputs, inputs, wanted, got)
    held = {f"{STATE_PREFIX}{n}": n for n in prediction.state if n in expected.state}
    wanted.update((key, expected.state[n]) for key, n in held.items())
    got.update((key, prediction.state[n]) for key, n in held.items())
    verdict = judge(wanted, got, precision, tolerance, held=held)
    if verdict.status == Status.PASS and case.ref.is_package and not case.options.reference_source:
        verdict = _self_nonfinite(wanted, inputs) or verdict
    if masked:
        verdict.target_facts.masked = masked
    verdict.placement = prediction.placement
    verdict.target = case.target
    return _routed(case, prediction, verdict)


def _self_nonfinite(expected: dict[str, Any], inputs: dict[str, np.ndarray]) -> Verdict | None:
    """A package's reference is its own program in float64, so an inf or NaN the
    program computes is in the reference too, and "agrees": at finite inputs that is
    still a failure (an fp16 ``-inf`` mask constant makes every output NaN)."""
    if not all(np.isfinite(array).all() for array in inputs.values()
               if np.asarray(array).dtype.kind == "f"):
        return None
    for name, value in sorted(expected.items()):
        values = np.asarray(value)
        if values.dtype.kind != "f" or np.isfinite(values).all():
            continue
        bad = int((~np.isfinite(values)).sum())
        return Verdict(Status.MISMATCH, Stage.PREDICT, mismatch_signature("nonfinite"),
                       message=f"{name}: inf/NaN in {bad} of {values.size} elements at finite "
                               "inputs, in the program's own float64 evaluation too: the "
                               "program computes it")
    return None


def _unpadded(masked_outputs: dict[str, str], inputs: dict[str, np.ndarray],
              expected: dict[str, Any], predicted: dict[str, Any]) -> dict[str, int]:
    """Blank (zero, on both sides) the padded positions of every masked output, in place:
    a padded position's value is nobody's bug. Returns how many elements each output
    left out of the comparison."""
    left_out = {}
    for output, mask_name in masked_outputs.items():
        if output not in expected or output not in predicted or mask_name not in inputs:
            continue
        want, got = np.asarray(expected[output]), np.asarray(predicted[output])
        padded = masked_positions(want, inputs[mask_name])
        if padded is None or got.shape != want.shape or not padded.any():
            continue
        expected[output] = np.where(padded, np.zeros((), want.dtype), want)
        predicted[output] = np.where(padded, np.zeros((), got.dtype), got)
        left_out[output] = int(padded.sum())
    return left_out


def _routed(case: Case, prediction: Prediction, verdict: Verdict) -> Verdict:
    """The verdict after the placement check of :mod:`nebisect.targets.placement`: a
    case that notes placement (``note_placement``, no op of interest) keeps its status
    when every compute op ran off the device, and says so in ``placement_note``."""
    if prediction.notes:
        verdict.target_facts.notes = list(prediction.notes)
    required = required_devices(case.target)
    if not required:
        return verdict
    routing = check_routing(required, prediction.placement, prediction.op_types,
                            case.options.op_of_interest,
                            prediction.placement_unknown)
    verdict.target_facts.routed = routing.summary
    away = off_device(required, prediction.placement, prediction.op_types,
                      prediction.fallbacks)
    if away:
        verdict.target_facts.off_device = away
    noted = case.options.note_placement and not case.options.op_of_interest
    if routing.unknown and verdict.status == "pass":
        verdict.status, verdict.signature = Status.SKIPPED, "skipped"
        verdict.message = (f"not judged on {case.target}: {routing.summary} — a pass here "
                           "cannot be told from a CPU fallback")
    elif routing.unrouted and noted:
        # Placement is information here (run without --require): said, not failed.
        verdict.target_facts.placement_note = routing.unrouted
    elif routing.unrouted and verdict.status in ("pass", "mismatch"):
        if verdict.status == "mismatch":
            verdict.target_facts.judged = verdict.signature
        op = case.options.op_of_interest
        verdict.status = Status.UNROUTED
        verdict.signature = f"unrouted:{op}" if op else "unrouted"
        verdict.message = routing.unrouted
    return verdict


def _prefixed(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{prefix}{name}": np.asarray(value) for name, value in arrays.items()}


def split_arrays(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays an evaluation returned under one prefix (``out:``, ``ref:``, ``mid:``)."""
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


#: what every evaluation's child needs, whatever its target: the registries loaded once
EVALUATION = Needs(warm=(f"{__name__}:load_registries",))


@functools.cache
def evaluation_needs(target: str, reference: str | None, torch_source: str = "") -> Needs:
    """What the child of a case on ``target`` judged against ``reference`` needs (also
    the hint for :meth:`~nebisect.isolate.Isolator.expect`); with ``torch_source`` (the
    location of a torch source the case or its reference runs), it finds that module
    built when building it is worth a template of its own
    (:func:`~nebisect.sources.torch.held_needs`)."""
    parties = [get_target(target)] + ([get_target(reference)] if reference else [])
    needs = Needs.serving(*(party.needs for party in parties)).adding(EVALUATION)
    return needs.adding(held_needs(torch_source)) if torch_source else needs


def torch_source_of(case: Case) -> str:
    """The torch source a case's child runs — its own, or its reference's — or ""."""
    reference = case.options.reference_source
    if reference is not None and SourceRef(*reference).is_torch:
        return reference[1]
    return case.ref.location if case.ref.is_torch else ""


def build_job(
    case: Case,
    *,
    reference: str | None = REFERENCE_TARGET,
    tolerance: Tolerance | None = None,
    timeout: float = 60.0,
    memory_mb: int | None = None,
    reference_cache: str = "",
    beside: Sequence[Case] = (),
    among: Needs | None = None,
) -> Job:
    """The isolation job for one case; its child has what the target needs.

    ``reference_cache``: a directory where the reference's outputs are kept per inputs
    (one run's cells share it). A judged verdict's timings say how long the target's
    prediction (``predict``) and the reference's (``reference``) took, in the child.
    ``beside``: cases judged in the same child after it (:func:`evaluate_together`).
    ``among``: the needs of the jobs this one runs among; its child then has what theirs
    have (blocks only where both block), so their template serves it — a one-off job
    (a cell's intermediates) does not start a template of its own.
    """
    needs = evaluation_needs(case.target, reference,
                             torch_source_of(case) if reference else "")
    if among is not None:
        needs = Needs.serving(needs, among)
    arguments = EvaluateArguments(case.to_dict(), reference, reference_cache, tolerance,
                                  tuple(other.to_dict() for other in beside))
    return Job(
        function="nebisect.evaluate.judge:evaluate_job",
        payload=encode(arguments),
        stage="load",
        timeout=timeout,
        memory_mb=memory_mb,
        needs=needs,
    )


def evaluate(
    case: Case,
    *,
    reference: str | None = REFERENCE_TARGET,
    isolator: Isolator | None = None,
    tolerance: Tolerance | None = None,
    timeout: float = 60.0,
    memory_mb: int | None = None,
    reference_cache: str = "",
    among: Needs | None = None,
) -> Outcome:
    """Run one case in a fresh process and judge it against ``reference``.

    Every field of ``case.options`` (:class:`~nebisect.case.CaseOptions`) is honoured;
    with ``intermediates`` every intermediate value comes back as ``mid:``/``refmid:``
    arrays. The verdict's timings and ``among``: see :func:`build_job`.
    """
    job = build_job(case, reference=reference, tolerance=tolerance, timeout=timeout,
                    memory_mb=memory_mb, reference_cache=reference_cache, among=among)
    outcome = isolator.run(job) if isolator is not None else run_isolated(job)
    outcome.verdict.target = outcome.verdict.target or case.target
    return outcome


def evaluate_together(
    case: Case,
    beside: Sequence[Case],
    *,
    reference: str | None = REFERENCE_TARGET,
    isolator: Isolator | None = None,
    tolerance: Tolerance | None = None,
    timeout: float = 60.0,
    memory_mb: int | None = None,
    reference_cache: str = "",
) -> list[Outcome]:
    """:func:`evaluate` of ``case`` and of each case ``beside`` it — the same model and
    inputs on sim targets that share predictions with the case's
    (:func:`~nebisect.targets.sim.shares_predictions`) — in one child: the program runs
    once, each further target re-running only the ops it computes differently. Every
    outcome is the one its own job gives: the same verdict and arrays, the process facts
    of the child they shared; a case the child did not judge (its prediction raised,
    or the case before it failed the child) is evaluated in a process of its own.

    Timings: the job's ``timeout`` covers all of them (a multiple of ``timeout``); each
    beside verdict's ``call`` and ``wall`` are its share of the child, the case's its
    own share (the child's call and wall less theirs)."""
    alone = partial(evaluate, reference=reference, isolator=isolator, tolerance=tolerance,
                    timeout=timeout, memory_mb=memory_mb, reference_cache=reference_cache)
    if not beside:
        return [alone(case)]
    job = build_job(case, reference=reference, tolerance=tolerance,
                    timeout=timeout * (1 + len(beside)), memory_mb=memory_mb,
                    reference_cache=reference_cache, beside=beside)
    shared = isolator.run(job) if isolator is not None else run_isolated(job)
    verdict = shared.verdict
    verdict.target = verdict.target or case.target
    judged = verdict.job_result.pop(BESIDE, None) or [None] * len(beside)
    outcomes = [Outcome(verdict, {name: array for name, array in shared.arrays.items()
                                  if not name.startswith(BESIDE)})]
    for index, (other, document) in enumerate(zip(beside, judged, strict=True)):
        if document is None:
            outcomes.append(alone(other))
            continue
        own = Verdict.from_dict(document)
        # what isolation stamps on the verdict of the child they shared
        own.process = replace(verdict.process)
        own.stderr_tail = verdict.stderr_tail
        own.provenance = dict(verdict.provenance)
        own.timings.wall = own.timings.call
        for part in ("call", "wall"):
            if getattr(verdict.timings, part) is not None:
                setattr(verdict.timings, part,
                        getattr(verdict.timings, part) - (own.timings.call or 0.0))
        prefix = f"{BESIDE}{index}/"
        outcomes.append(Outcome(own, split_arrays(shared.arrays, prefix)))
    return outcomes
