"""Report payloads for the report tests, made from real simulator runs.

The fuzz payload is seed 000's cliff as the fuzzer reports it: a one-op
``reduce_log_sum_exp`` over 32 delta-replicated channels swept over [−15, 15] on the
simulator's Neural Engine profile against fp64, localized to two adjacent fp16 values
by :func:`nebisect.search.cliff.localize`. The bisect payload is the per-op error of
seed 000's conv → logsumexp → linear graph at x = 7.7.
"""

from __future__ import annotations

import math

import numpy as np

import support.lint_programs as lp
from nebisect.mil.interp import run_program
from nebisect.mil.quiet import import_coremltools
from nebisect.oracle import compare, judge
from nebisect.report import (
    CliffSweep,
    Divergence,
    NamedVerdict,
    OpError,
    ReportPayload,
    RunMatrix,
    Table,
)
from nebisect.search.cliff import Boundary, localize
from nebisect.verdict import Verdict

ct = import_coremltools()

from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

CHANNELS = 32
BOUNDARY = math.log(65504 / CHANNELS)


def _lse_program():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, CHANNELS, 1, 1), dtype=types.fp16)],
                opset_version=ct.target.iOS17)
    def prog(x):
        return mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True, name="lse")

    return prog


def _predict(program, value: float, precision: str, profile: str | None) -> float:
    inputs = {"x": np.full((1, CHANNELS, 1, 1), value)}
    outputs = run_program(program, inputs, precision, profile=profile).outputs
    return float(next(iter(outputs.values())).reshape(-1)[0])


def lse_sweep(points: int = 241) -> CliffSweep:
    program = _lse_program()
    xs = np.linspace(-15.0, 15.0, points)
    output = [_predict(program, x, "fp16", "ane") for x in xs]
    reference = [_predict(program, x, "fp64", None) for x in xs]

    def failing(value: float) -> bool:
        return not math.isfinite(value) or abs(value) < 1e-3

    cliff = localize(lambda x: _predict(program, x, "fp16", "ane"), failing,
                     boundaries=[Boundary("log(65504/32)", BOUNDARY)])
    assert cliff is not None, "the simulated Neural Engine shows no logsumexp cliff"
    return CliffSweep(
        title="reduce_log_sum_exp over 32 delta-replicated channels",
        x=[float(v) for v in xs], output=output, reference=reference,
        target="sim:ane", bracket=[cliff.lo, cliff.hi],
        bracket_outputs=[cliff.lo_output, cliff.hi_output],
        predicted_boundary=BOUNDARY, predicted_label="log(65504/32)",
        predictions=cliff.predictions, x_label="x (every channel)",
        series={"sim:fp16": [_predict(program, x, "fp16", None) for x in xs]},
    )


def fuzz_payload() -> ReportPayload:
    sweep = lse_sweep()
    program = _lse_program()
    verdict = judge({"y": np.array([_predict(program, 7.7, "fp64", None)])},
                    {"y": np.array([_predict(program, 7.7, "fp16", "ane")])}, "fp16")
    verdict.target = "sim:ane"
    return ReportPayload(
        title="nebisect fuzz --op reduce_log_sum_exp --target sim:ane",
        summary={"target": "sim:ane", "seed": 0, "findings": 1},
        verdicts=[NamedVerdict("delta-replicated C=32", verdict, group="reduce_log_sum_exp")],
        sweeps=[sweep],
        tables=[Table("findings", ["op", "signature", "cliff bracket", "predictions"],
                      [["reduce_log_sum_exp", verdict.signature,
                        f"{sweep.bracket[0]:.8g} | {sweep.bracket[1]:.8g}",
                        sweep.predictions]])],
        notes=["collapse: output ≈ 0 where the float64 reference is large"],
    )


def bisect_divergence(value: float = 7.7) -> Divergence:
    program = lp.seed000()
    inputs = {"x": np.full((1, 1, 8, 8), value)}
    ref = run_program(program, inputs, "fp64", intermediates=True)
    out = run_program(program, inputs, "fp16", profile="ane", intermediates=True)
    ops = []
    for index, (name, reference) in enumerate(ref.intermediates.items()):
        result = compare(name, reference, out.intermediates[name], "fp16")
        error = math.inf if result.kind == "nonfinite" else result.max_ulp_error
        ops.append(OpError(index, name, ref.op_types.get(name, "?"), error, result.passed))
    first = next((op.name for op in ops if not op.passed), None)
    return Divergence("first divergence at x = 7.7 on sim:ane", ops, first_divergent=first,
                      target="sim:ane", unit="ULP", threshold=16.0, evaluations=2)


def run_matrix() -> RunMatrix:
    entries = []
    for target in ("sim:fp32", "sim:fp16", "sim:ane"):
        for length in ("2", "8", "37"):
            if target == "sim:ane":
                verdict = Verdict("error", "predict", message="Invalid blob shape: "
                                  "Data-dependent shapes were disabled: var_39 - [?, 16]")
            else:
                verdict = Verdict("pass")
            verdict.target = target
            entries.append((target, length, verdict))
    return RunMatrix.from_verdicts("verdict per target × length", entries)


#: the versions a recorded run was made with (an issue's versions line)
RECORDED_ENVIRONMENT = {"coremltools": "9.0", "torch": "2.13.0", "numpy": "2.4.6",
                        "python": "3.11.7", "os": "macOS 15.1", "machine": "arm64",
                        "chip": "Apple M2 Pro", "nebisect": "0.1.0"}


def issue_payload(value: float = 7.7) -> ReportPayload:
    """Seed 000's cliff as ``run`` reports it: the one-op logsumexp package judged at a
    constant ``value`` on the simulated Neural Engine (collapse, attributed ``device`` at
    ``lse``, found by intermediates) and on sim:fp16 (pass), made into findings by the
    run's own grouping and into a payload by the run's own report; recorded with
    :data:`RECORDED_ENVIRONMENT`, and a repro note standing in for the script a factory
    source gets."""
    from nebisect.detect.culprit import BY_INTERMEDIATES
    from nebisect.detect.findings import Row
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.report import run_payload
    from nebisect.search.records import Culprit
    from nebisect.search.space import Member

    program = _lse_program()
    reference = {"lse": np.full((1, 1, 1, 1), _predict(program, value, "fp64", None))}
    collapsed = judge(reference, {"lse": np.full((1, 1, 1, 1),
                                                 _predict(program, value, "fp16", "ane"))},
                      "fp16")
    member = Member("const", f"const(x={value})", x=value, magnitude=value)
    rows = [Row("sim:fp16", 0, judge(reference, reference, "fp16"), input_set=member),
            Row("sim:ane", 0, collapsed, attribution="device", input_set=member,
                culprit=Culprit("lse", "reduce_log_sum_exp", collapsed.signature,
                                BY_INTERMEDIATES))]
    report = RunReport("/tmp/nebisect-run-abc123/seed000.mlpackage", "sim:fp64", rows=rows)
    report.regroup()
    payload = run_payload(report)
    payload.environment = dict(RECORDED_ENVIRONMENT)
    payload.findings[0].repro_note = "No standalone script: the source is a package."
    return payload
