"""pytest plugin: coremltools' MIL op tests with prediction routed to the simulator.

Load it with ``-p nebisect.mil.conformance_plugin`` (``conformance.run_pytest`` does).
Off macOS coremltools' ``compare_backend`` returns without predicting; the plugin
replaces it so the converted ML program runs in :func:`nebisect.mil.interp.run_program`
— fp32 backends at precision ``fp32``, fp16 backends at ``fp16`` (the ``sim:fp32`` /
``sim:fp16`` targets, Core ML runtime semantics) — and is checked with the test's own
tolerances, relaxed for fp16 exactly as coremltools relaxes them for a device. A case that
fails gets a cause (:func:`failure_cause`): a simulator error, or a mismatch re-run under
the op definitions and in float64 to tell runtime semantics, precision and kernel (or
expectation) apart, and marked device-verified or not — never a bare AssertionError.

Tests that call ``MLModel.predict`` themselves get the simulator too (Core ML CPU
semantics, the test's own assertions are the comparison), and the tests' macOS version
gates see a current macOS, so cases skipped only for old-OS bugs are judged.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.mil.conformance import (
    ENVIRONMENT,
    ConformanceRecord,
    excluded,
    family_of,
    in_hash_sample,
    short_id,
)
from nebisect.mil.dtypes import var_element_dtype


@dataclass(frozen=True)
class _Check:
    """A test's comparison settings (coremltools' ``compare_backend`` arguments)."""

    atol: float
    rtol: float
    shapes: bool
    mismatch_ratio: float


class _Session:
    """Where this pytest session appends its verdicts (``--conformance-log``), and
    whether it audits the exclusions (runs only excluded tests, recording what their
    verdict would have been)."""

    log: Path | None = None
    audit = False


class _Current:
    """Per-test state the patched ``compare_backend`` reports into."""

    predictions = 0
    precision = ""
    direct = False  # the test called MLModel.predict itself and compares on its own
    failure: str | None = None  # raised by the simulated prediction or its comparison
    cause = ""  # after a failure: why (failure_cause)
    test_failure: str | None = None  # anything the test raised


def _model_inputs(program: Any, values: dict[str, Any]) -> dict[str, np.ndarray]:
    """Inputs as Core ML would hand them to the program: converted to the declared dtype
    (the test passes float32 for every input, like ``run_core_ml_predict``)."""
    declared = program.functions["main"].inputs
    out = {}
    for name, value in values.items():
        array = np.asarray(value)
        if array.ndim == 0:
            array = array.reshape(1)
        dtype = var_element_dtype(declared[name]) if name in declared else None
        out[name] = array.astype(dtype if dtype is not None else np.float32)
    return out


def _output(outputs: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name in outputs:
        return outputs[name]
    from coremltools.converters.mil.mil.passes.defs.preprocess import NameSanitizer

    sanitized = NameSanitizer._replace_invalid_char_with_underscore(name)
    if sanitized in outputs:
        return outputs[sanitized]
    raise KeyError(f"{name} output not found in the simulated outputs")


def _first_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip().splitlines()[0][:300]


class Mismatch(AssertionError):
    """Simulated outputs outside the test's tolerance; the message gives the numbers."""


#: the unit whose runtime rules apply, per the compute units a test converts for
UNIT_OF_COMPUTE_UNITS = {"CPU_ONLY": "cpu", "CPU_AND_GPU": "gpu", "CPU_AND_NE": "ne", "ALL": "ne"}


def _predict_and_compare(
    mlmodel: Any, inputs: dict[str, Any], expected: dict[str, Any], check: _Check,
    precision: str, semantics: str = "coreml",
) -> dict[str, np.ndarray]:
    from nebisect.mil.interp import run_program
    from nebisect.mil.load import load_program

    program = load_program(mlmodel)
    unit = UNIT_OF_COMPUTE_UNITS.get(mlmodel.compute_unit.name, "cpu")
    result = run_program(
        program, _model_inputs(program, inputs), precision, semantics=semantics, unit=unit
    )
    for name, value in expected.items():
        got = _output(result.outputs, name)
        want = np.asarray(value)
        scalar = want.shape == () and got.shape == (1,)
        if check.shapes and not scalar and got.shape != want.shape:
            raise Mismatch(f"output {name}: shape {got.shape} != {want.shape}")
        close = np.isclose(got, want, atol=check.atol, rtol=check.rtol, equal_nan=True)
        bad = int(np.sum(~close))
        if bad and bad / max(want.size, 1) > check.mismatch_ratio:
            error = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
            raise Mismatch(
                f"output {name}: {bad} of {want.size} elements off, max |error| "
                f"{np.nanmax(error):.3g} (atol {check.atol:g}, rtol {check.rtol:g})"
            )
    return result.outputs


def _passes(
    mlmodel: Any, inputs: dict[str, Any], expected: dict[str, Any], check: _Check,
    precision: str, semantics: str = "coreml",
) -> bool:
    try:
        _predict_and_compare(mlmodel, inputs, expected, check, precision, semantics)
    except Exception:
        return False
    return True


def _declares_fp16(mlmodel: Any) -> bool:
    """Whether the program types any tensor fp16 (mixed precision in an fp32 program)."""
    from nebisect.mil.load import load_program

    function = load_program(mlmodel).functions["main"]
    return any(var_element_dtype(v) == np.float16 for op in function.operations
               for v in op.outputs)


def failure_cause(
    exc: BaseException, mlmodel: Any, inputs: dict[str, Any], expected: dict[str, Any],
    check: _Check, precision: str,
) -> str:
    """Why a simulated prediction failed, in words a reader can act on.

    A simulator exception is its own cause. A mismatch is re-run under the op definitions
    (passes: the runtime semantics the simulator models is what the expectation
    contradicts) and in float64 (passes: a precision difference; fails: the kernel or the
    expected value). The fp16 backend's expected values are device-verified (coremltools'
    CI runs it on macOS), the fp32 backend's are not.
    """
    from nebisect.mil.interp import SimRefusal

    if isinstance(exc, SimRefusal):
        return f"runtime rule: the simulator refuses the program: {_first_line(exc)}"
    if not isinstance(exc, AssertionError):
        return f"simulator error: {_first_line(exc)}"
    verified = "device-verified" if precision == "fp16" else "not device-verified"
    mixed = precision == "fp32" and _declares_fp16(mlmodel)
    verified += " expectation" + ("; fp32 program with fp16-typed tensors" if mixed else "")
    if _passes(mlmodel, inputs, expected, check, precision, "spec"):
        kind = "runtime semantics: passes under the op definitions (--semantics spec)"
    elif _passes(mlmodel, inputs, expected, check, "fp64"):
        kind = f"precision: passes in float64, fails at {precision}"
    else:
        kind = "kernel or expected value: fails in float64 too"
    return f"{kind} [{verified}]"


def simulated_compare_backend(
    mlmodel: Any,
    input_key_values: dict[str, Any],
    expected_outputs: dict[str, Any],
    dtype: str = "fp32",
    atol: float = 1e-04,
    rtol: float = 1e-05,
    also_compare_shapes: bool = True,
    state: Any = None,
    allow_mismatch_ratio: float = 0.0,
) -> dict[str, np.ndarray]:
    """Drop-in for coremltools' ``compare_backend`` that predicts with the simulator.

    A failure raised here (simulator error or mismatch) is the case's verdict; a test
    that fails later, on its own assertions about the converted program, does not
    count against the simulator.
    """
    precision = "fp16" if dtype == "fp16" else "fp32"
    _Current.predictions += 1
    _Current.precision = precision
    if dtype == "fp16" or mlmodel.compute_unit.name != "CPU_ONLY":
        atol, rtol = max(atol * 100.0, 5e-1), max(rtol * 100.0, 5e-2)
    check = _Check(atol, rtol, also_compare_shapes, allow_mismatch_ratio)
    inputs = dict(input_key_values)
    try:
        return _predict_and_compare(mlmodel, inputs, expected_outputs, check, precision)
    except Exception as exc:
        _Current.failure = _first_line(exc)
        _Current.cause = failure_cause(exc, mlmodel, inputs, expected_outputs, check, precision)
        raise


def simulated_predict(mlmodel: Any, data: Any, state: Any = None) -> Any:
    """Drop-in for ``MLModel.predict``: Core ML's CPU, i.e. ``sim:fp32`` — float32 compute,
    every value at its declared dtype (the model does not say which backend built it)."""
    from nebisect.mil.interp import run_program
    from nebisect.mil.load import load_program

    if isinstance(data, list):
        return [simulated_predict(mlmodel, item, state) for item in data]
    _Current.predictions += 1
    _Current.direct = True
    _Current.precision = _Current.precision or "declared"
    program = load_program(mlmodel)
    inputs = _model_inputs(program, dict(data))
    return run_program(program, inputs, "fp32").outputs


# The macOS the simulator stands in for: op tests gated on an older macOS's bugs (e.g.
# "Bug fixed in macOS 15.2") run, as they would on a current Mac.
SIMULATED_MACOS = (15, 5)


def install() -> None:
    """Route coremltools' ``compare_backend`` (both module copies) and ``MLModel.predict``
    to the simulator, and report a current macOS to the tests' version gates (the
    MLModel class keeps its own reference to the real, Linux answer)."""
    import coremltools as ct
    import coremltools.converters.mil.testing_utils as base_utils
    import coremltools.models.utils as model_utils
    from coremltools.converters.mil.mil.ops.tests import testing_utils as op_utils

    base_utils.compare_backend = simulated_compare_backend
    op_utils.compare_backend = simulated_compare_backend
    ct.models.MLModel.predict = simulated_predict
    model_utils._macos_version = lambda: SIMULATED_MACOS


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("nebisect conformance")
    group.addoption("--conformance-log", default=None, help="JSON-lines verdict log")
    group.addoption(
        "--conformance-sample", type=int, default=0,
        help="keep only N evenly spaced tests per test file (0: all)",
    )
    group.addoption(
        "--conformance-hash-sample", type=int, default=100,
        help="keep only the tests whose id hash falls in this percentage (100: all)",
    )
    group.addoption(
        "--conformance-audit-exclusions", action="store_true",
        help="run only the excluded tests; their records keep what the verdict would be",
    )


def pytest_configure(config: Any) -> None:
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    from nebisect.mil.quiet import import_coremltools

    import_coremltools()
    install()


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    import pytest

    percent = config.getoption("--conformance-hash-sample")
    if percent < 100:
        items[:] = [item for item in items if in_hash_sample(item.nodeid, percent)]
    sample = config.getoption("--conformance-sample")
    if sample:
        by_file: dict[str, list[Any]] = {}
        for item in items:
            by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
        kept: list[Any] = []
        for group in by_file.values():
            step = max(len(group) / sample, 1.0)
            kept.extend(group[int(i * step)] for i in range(min(sample, len(group))))
        items[:] = kept
    _Session.audit = config.getoption("--conformance-audit-exclusions")
    if _Session.audit:
        items[:] = [item for item in items if excluded(item.nodeid) is not None]
    for item in items:
        rule = excluded(item.nodeid)
        if rule is not None and not _Session.audit:
            item.add_marker(pytest.mark.skip(reason=f"nebisect exclusion: {rule.reason}"))


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _Current.predictions, _Current.precision, _Current.cause = 0, "", ""
    _Current.direct = False
    _Current.failure = _Current.test_failure = None


def pytest_runtest_makereport(item: Any, call: Any) -> None:
    if call.when == "call" and call.excinfo is not None and _Current.predictions:
        _Current.test_failure = _first_line(call.excinfo.value)


def _status(report: Any, nodeid: str) -> tuple[str, str]:
    rule = excluded(nodeid)
    if rule is not None:
        if not _Session.audit:
            return "excluded", rule.reason
        status, detail = _verdict(report)
        return "excluded", f"audit: would be {status} {detail}".strip()
    return _verdict(report)


def _verdict(report: Any) -> tuple[str, str]:
    skip = f"skipped: {report.longrepr[2]}"[:300] if isinstance(report.longrepr, tuple) else ""
    if _Current.predictions == 0:
        return "not-reached", skip or report.outcome
    if report.passed:  # also when the test expected the prediction to raise
        return "pass", ""
    if _Current.failure is not None:
        return "fail", _Current.failure
    if report.skipped:
        return "not-reached", skip
    if _Current.direct:  # the test compared MLModel.predict outputs itself
        return "fail", _Current.test_failure or report.outcome
    return "pass", f"prediction matched; the test then failed on its own: {_Current.test_failure}"


def pytest_runtest_logreport(report: Any) -> None:
    log = _Session.log
    if log is None or (report.when != "call" and not (report.when == "setup" and report.skipped)):
        return
    status, detail = _status(report, report.nodeid)
    record = ConformanceRecord(
        short_id(report.nodeid), family_of(report.nodeid), status, _Current.precision, detail,
        _Current.predictions, _Current.cause if status == "fail" else "",
    )
    with open(log, "a") as fh:
        fh.write(record.to_json() + "\n")


def pytest_sessionstart(session: Any) -> None:
    path = session.config.getoption("--conformance-log")
    _Session.log = Path(path).resolve() if path else None
