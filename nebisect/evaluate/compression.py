"""What compressing a package's weights cost, measured against its uncompressed baseline.

A palettized or quantized package judged against itself passes: the exact evaluation
runs the same compressed weights. With a baseline (``run --baseline``) both programs
are evaluated exactly (``sim:fp64``) on the run's input sets, and the compressed
outputs are compared with the baseline's. The measure is *relative error*: the largest
|compressed − baseline| over an output, divided by that output's largest |baseline|
value — the error on the scale the output lives at, whatever its units. It passes
within the tolerance (:data:`DEFAULT_TOLERANCE`); beside it stands fp16's own error
(the baseline at ``sim:fp16`` against itself at fp64), the error every fp16 device adds
anyway.

When an input set fails, ddmin (:func:`nebisect.search.ddmin.ddmin`) finds which compressed
weights to restore: a candidate is a set of weights taken back from the baseline
(:func:`nebisect.mil.compressed.restored`), and it is *interesting* when every failing
input set then passes. All restored is the baseline itself, so the reduction starts
from a pass and ends at a 1-minimal set: the ops whose compression the divergence
enters, and the least change that passes (keep these uncompressed). If restoring every
weight still fails, the packages differ beyond their weights and nothing is blamed.
The milder compressions of the weights found (:mod:`nebisect.evaluate.recompress`: a
LUT or scale per group of channels, more bits) are then measured the same way.

Both programs are read and run in one isolated child (:func:`check_job`): packages
are data, and the reduction's many evaluations are milliseconds each in process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.codec import Record
from nebisect.errors import NebisectError
from nebisect.evaluate.recompress import alternatives
from nebisect.isolate import COREMLTOOLS_ONLY, Isolator
from nebisect.mil.compressed import CompressedWeight
from nebisect.search.ddmin import Budget, Evaluator, ReductionError, Stats, ddmin
from nebisect.sources.loading import ChildSubject, describe_in_child, record_verdict
from nebisect.verdict import Verdict

#: the default bar: compression may move an output by 5 % of its largest magnitude —
#: int8 linear quantization of an ordinary MLP adds under 1 %, 2-bit palettization 20–40 %
DEFAULT_TOLERANCE = 0.05
#: how many restorations a localization may evaluate
MAX_EVALUATIONS = 500
#: what the reduction's test returns for a candidate that passes (its "signature")
PASSES = "passes"
BASELINE_SUBJECT = ChildSubject("comparing with the baseline", "its comparison")


@dataclass
class InputSetError(Record):
    """One input set: the relative error compression adds (``compression``; its
    largest absolute error ``max_abs``), fp16's own (``fp16``), and the error left with
    the localized weights restored (``restored``; -1 when nothing was restored)."""

    label: str
    compression: float
    max_abs: float
    fp16: float
    restored: float = -1.0


@dataclass
class CompressionCheck(Record):
    """The comparison of a compressed package with its ``baseline`` at ``tolerance``:
    its compressed ``weights``, each input set's errors, and — when one fails — the
    weights whose restoring makes every input set pass (``restore``, in program order),
    the reduction's cost (``stats``), whether it ran to its end (``complete``) and the
    first milder compression of those weights that passes too (``milder``, its worst
    relative error ``milder_error``; :mod:`nebisect.evaluate.recompress`) — empty when
    none tried does. ``note`` says why no weight could be named."""

    baseline: str
    tolerance: float
    weights: list[CompressedWeight] = field(default_factory=list)
    errors: list[InputSetError] = field(default_factory=list)
    restore: list[CompressedWeight] = field(default_factory=list)
    stats: Stats | None = None
    complete: bool = True
    milder: str = ""
    milder_error: float = -1.0
    note: str = ""

    @property
    def failing(self) -> list[InputSetError]:
        return [e for e in self.errors if e.compression > self.tolerance]


def relative_error(outputs: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> tuple[
        float, float]:
    """(relative error, largest absolute error) of ``outputs`` against ``reference``, the
    worst output's (see the module docstring); a value finite in the reference and not
    in the outputs is infinitely wrong."""
    worst, worst_abs = 0.0, 0.0
    for name, expected in reference.items():
        ref = np.asarray(expected, dtype=np.float64)
        out = np.asarray(outputs[name], dtype=np.float64)
        finite = np.isfinite(ref)
        if not finite.any():
            continue
        error = np.abs(out[finite] - ref[finite])
        largest = float(error.max()) if np.isfinite(error).all() else float("inf")
        scale = float(np.abs(ref[finite]).max())
        worst_abs = max(worst_abs, largest)
        worst = max(worst, largest / scale if scale > 0 else largest)
    return worst, worst_abs


@dataclass(frozen=True)
class CheckArguments:
    """The arguments of :func:`check_job`: the compressed package, its baseline, the
    input sets to compare them on (label → ``.npz``; none: the baseline is only
    checked) and the tolerance."""

    package: str
    baseline: str
    inputs: dict[str, str]
    tolerance: float


def check_job(arguments: CheckArguments) -> Verdict:
    """Child side of :func:`check_compression` (and, without ``inputs``, of
    :func:`check_baseline`)."""
    return record_verdict(lambda: _check(arguments).to_dict())


def _check(arguments: CheckArguments) -> CompressionCheck:
    from nebisect.arrays import load_npz
    from nebisect.isolation import memory
    from nebisect.mil.compressed import baseline_values, compressed_weights
    from nebisect.mil.interp import compile_program

    package, baseline = _pair(arguments.package, arguments.baseline)
    weights = compressed_weights(package.functions["main"])
    if not weights:
        raise NebisectError(f"{arguments.package} has no compressed weights (no constexpr "
                            "op feeds a compute op): no compression to measure")
    check = CompressionCheck(arguments.baseline, arguments.tolerance, weights)
    if not arguments.inputs:
        return check
    budget = memory.budget()
    exact = compile_program(package, "fp64", memory_budget=budget)
    base = compile_program(baseline, "fp64", memory_budget=budget)
    base16 = compile_program(baseline, "fp16", memory_budget=budget)
    runs: dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = {}
    produced: dict[str, Any] = {}
    for label, npz in arguments.inputs.items():
        inputs = load_npz(npz)
        expected = base.run(inputs, intermediates=not produced)
        produced = produced or expected.intermediates
        error, largest = relative_error(exact.run(inputs).outputs, expected.outputs)
        fp16, _ = relative_error(base16.run(inputs).outputs, expected.outputs)
        check.errors.append(InputSetError(label, error, largest, fp16))
        runs[label] = inputs, expected.outputs
    if check.failing:
        values = baseline_values(base, produced, baseline.functions["main"], weights)
        _localize(check, exact, values, {e.label: runs[e.label] for e in check.failing})
    return check


def _pair(package_path: str, baseline_path: str) -> tuple[Any, Any]:
    """Both programs, loaded; a baseline whose inputs or outputs differ is an error."""
    from nebisect.isolation import memory
    from nebisect.mil.load import load_program
    from nebisect.mil.validate import input_specs

    budget = memory.budget()
    package = load_program(package_path, memory_budget=budget)
    baseline = load_program(baseline_path, memory_budget=budget)
    mains = package.functions["main"], baseline.functions["main"]
    inputs = [sorted((s.name, s.describe()) for s in input_specs(f)) for f in mains]
    outputs = [[v.name for v in f.outputs] for f in mains]
    if inputs[0] != inputs[1] or outputs[0] != outputs[1]:
        raise NebisectError(
            "its inputs and outputs do not match the package's "
            f"(inputs {_io(inputs[1])} → {', '.join(outputs[1])}; the package's "
            f"{_io(inputs[0])} → {', '.join(outputs[0])})")
    return package, baseline


def _io(specs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{name} {spec}" for name, spec in specs)


def _localize(check: CompressionCheck, exact: Any,
              values: dict[str, Any],
              failing: dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]) -> None:
    """Fill ``check.restore``: ddmin over the restorable weights (module docstring);
    then ``check.milder``."""
    from nebisect.mil.compressed import restored

    def worst(replaced: dict[str, Any]) -> dict[str, float]:
        program = restored(exact, replaced)
        return {label: relative_error(program.run(inputs).outputs, expected)[0]
                for label, (inputs, expected) in failing.items()}

    def test(units: list[str]) -> str | None:
        errors = worst({var: values[var] for var in units})
        return PASSES if max(errors.values()) <= check.tolerance else None

    units = [w.var for w in check.weights if w.var in values]
    evaluator: Evaluator[str] = Evaluator(test, key=lambda u: ",".join(sorted(u)),
                                          stop=Budget(MAX_EVALUATIONS), confirm=0)
    try:
        reduction = ddmin(units, evaluator)
    except ReductionError:
        check.note = ("restoring every compressed weight the baseline has still fails: the "
                      "packages differ beyond their weights, so no weight is blamed")
        check.stats = evaluator.stats
        return
    kept = set(reduction.units)
    check.restore = [w for w in check.weights if w.var in kept]
    check.stats, check.complete = reduction.stats, reduction.complete
    after = worst({var: values[var] for var in reduction.units})
    for error in check.errors:
        error.restored = after.get(error.label, -1.0)
    for alternative in alternatives(check.restore[0].how):
        errors = worst({var: alternative.apply(np.asarray(values[var], dtype=np.float64))
                        for var in reduction.units})
        if max(errors.values()) <= check.tolerance:
            check.milder, check.milder_error = alternative.words, max(errors.values())
            return


def check_baseline(package: str, baseline: str, *, tolerance: float, isolator: Isolator,
                   timeout: float) -> CompressionCheck:
    """The baseline checked against the package, before anything runs: both load, their
    inputs and outputs match, the package has compressed weights — else a one-line
    :class:`~nebisect.errors.NebisectError`. The check holds the weights, no errors."""
    return _run(package, baseline, {}, tolerance, isolator, timeout)


def check_compression(package: str, baseline: str, inputs: dict[str, str], *,
                      tolerance: float, isolator: Isolator,
                      timeout: float) -> CompressionCheck:
    """The package compared with its baseline on ``inputs`` (label → ``.npz``), and the
    weights a failure enters at (module docstring)."""
    return _run(package, baseline, inputs, tolerance, isolator, timeout)


def _run(package: str, baseline: str, inputs: dict[str, str], tolerance: float,
         isolator: Isolator, timeout: float) -> CompressionCheck:
    record = describe_in_child(
        f"{__name__}:check_job", CheckArguments(package, baseline, inputs, tolerance),
        label=f"--baseline {baseline}", subject=BASELINE_SUBJECT, timeout=timeout,
        needs=COREMLTOOLS_ONLY, isolator=isolator)
    return CompressionCheck.from_dict(record)
