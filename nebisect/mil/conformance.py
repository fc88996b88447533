"""Conformance of the simulator with coremltools' own MIL op tests: the bookkeeping.

coremltools ships its op tests in the wheel (``converters/mil/mil/ops/tests``); the pytest
plugin :mod:`nebisect.mil.conformance_plugin` runs them with their prediction step routed
to the simulator and logs one :class:`ConformanceRecord` per test (JSON lines). This module is
what the plugin, ``bench/conformance.py`` and the tests share: the exclusion list, the
record format, per-family aggregation and the subprocess runner.

Every test that reaches prediction is one conformance case. Nothing is skipped
silently: :data:`EXCLUSIONS` lists every test the simulator cannot judge, with the
reason, and excluded tests are logged as such.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

TESTS_PACKAGE = "coremltools.converters.mil.mil.ops.tests"
ENVIRONMENT = {"PYMIL_TEST_TARGETS": "mlprogram", "INCLUDE_MIL_FP32_UNIT_TESTS": "1"}
PYTEST_PLUGIN = "nebisect.mil.conformance_plugin"


@dataclass(frozen=True)
class Exclusion:
    """Tests (an fnmatch pattern over the pytest node id) the simulator cannot judge.

    An excluded case still counts against the headline figure (passes over reached plus
    excluded): an exclusion explains a case, it does not make it pass. Only two kinds
    are allowed — :data:`NEEDS_RUNTIME` (the test needs Core ML itself) and
    :data:`UNVERIFIED` (the expected value was never checked on a device: coremltools'
    CI runs its op tests on the fp16 backend only, ``testing_reqs.py`` adds the fp32
    backend only under ``INCLUDE_MIL_FP32_UNIT_TESTS``). A device-verified expected
    value is never excluded: the simulator matches it, or the case fails.
    """

    pattern: str
    kind: str
    reason: str


NEEDS_RUNTIME = "needs the Core ML runtime"
UNVERIFIED = "expected value not device-verified (fp32 backend, outside coremltools' CI)"

EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion(
        "iOS18/test_states.py::*", NEEDS_RUNTIME,
        "stateful models: MLModel.make_state() needs the Core ML runtime (macOS) before any "
        "prediction, and the simulator has no state storage",
    ),
    *(
        Exclusion(
            f"iOS18/test_compression.py::{test}*precision='fp32'*_dtype=fp16*", UNVERIFIED,
            "expected values are computed in numpy fp16 arithmetic (decompressed fp16 "
            "weights + 1, rounded to fp16) while the program promotes to fp32 and adds there: "
            "off by up to half an fp16 ulp (4.9e-4 near 1-2) > fp32 atol 1e-4 with declared "
            "dtypes honored; the fp16-backend twins (device-verified) pass",
        )
        for test in (
            "TestConstexprLutToSparse::test_builder_to_backend_stress",
            "TestConstexprSparseToDense::test_builder_to_backend_stress",
            "TestJointCompressionOps::test_sparse_lut",
        )
    ),
    Exclusion(
        "iOS16/test_image_resizing.py::TestCropResize::test_builder_to_backend_ios16*"
        "precision='fp32'*", UNVERIFIED,
        "hand-written expected value 7.899 where the exact bilinear sample is 7.9 (rows 1-2 "
        "at w=0.9 hold 5.9 and 9.9, sampled at h=1.5): error 1e-3 > fp32 atol 1e-4; the "
        "fp16 twin (device-verified, atol 0.5 on device) passes",
    ),
    Exclusion(
        "iOS17/test_image_resizing.py::TestCropResize::test_builder_to_backend_ios17*"
        "precision='fp32'*N=3*", UNVERIFIED,
        "same hand-written 7.899 (exact value 7.9) as the iOS16 crop_resize test",
    ),
    Exclusion(
        "iOS14/test_normalization.py::TestNormalizationLocalResponseNorm::"
        "test_builder_to_backend_smoke*precision='fp32'*", UNVERIFIED,
        "hand-written expected values sum only the channel itself (S = x_c^2 for size 2 and "
        "3), contradicting the torch.nn.LocalResponseNorm reference of the same file's "
        "stress tests (which the simulator matches on every rank); off by ~1e-3 > fp32 atol, "
        "the fp16 twin passes",
    ),
)


@dataclass
class ConformanceRecord:
    """One op test's conformance verdict (a line of the JSON log)."""

    nodeid: str
    family: str
    status: str  # pass | fail | excluded | not-reached
    precision: str = ""
    detail: str = ""
    predictions: int = 0
    cause: str = ""  # for a fail: why (see conformance_plugin.failure_cause)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> ConformanceRecord:
        """A record of the log; fields of older log formats are ignored."""
        data = json.loads(line)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def short_id(nodeid: str) -> str:
    """A node id relative to the op-tests package: ``iOS17/test_conv.py::TestConv::...``."""
    marker = "/ops/tests/"
    return nodeid.split(marker, 1)[1] if marker in nodeid else nodeid


def family_of(nodeid: str) -> str:
    """``.../iOS17/test_conv.py::TestConv::test_x[...]`` → ``conv`` (opsets merged)."""
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return name.removeprefix("test_").removesuffix(".py")


def excluded(nodeid: str) -> Exclusion | None:
    for rule in EXCLUSIONS:
        if fnmatch.fnmatch(short_id(nodeid), rule.pattern):
            return rule
    return None


@dataclass
class FamilyRow:
    """Per-family counts. ``headline`` is passes over the cases that reached prediction
    plus the excluded ones (an exclusion is a failure until the simulator matches);
    ``reached_rate`` is the former figure, passes over reached cases only."""

    family: str
    passed: int = 0
    failed: int = 0
    excluded: int = 0
    not_reached: int = 0

    @property
    def reached(self) -> int:
        return self.passed + self.failed

    @property
    def headline(self) -> float:
        judged = self.reached + self.excluded
        return self.passed / judged if judged else 1.0

    @property
    def reached_rate(self) -> float:
        return self.passed / self.reached if self.reached else 1.0


def read_log(path: str | os.PathLike[str]) -> list[ConformanceRecord]:
    """Records of a log; a test logged twice (a re-run) keeps its last verdict."""
    latest: dict[str, ConformanceRecord] = {}
    with open(path) as fh:
        for line in fh:
            if line.strip():
                record = ConformanceRecord.from_json(line)
                latest[record.nodeid] = record
    return list(latest.values())


def current_status(record: ConformanceRecord) -> str:
    """A logged verdict under today's :data:`EXCLUSIONS`: a case matching an exclusion
    counts as excluded; one excluded by a rule since removed has no verdict yet."""
    if excluded(record.nodeid) is not None:
        return "excluded"
    return "not-reached" if record.status == "excluded" else record.status


def summarize(records: list[ConformanceRecord]) -> tuple[list[FamilyRow], FamilyRow]:
    """Per-family rows (sorted by family) and the overall row, under today's exclusions."""
    rows: dict[str, FamilyRow] = {}
    total = FamilyRow("TOTAL")
    field = {"pass": "passed", "fail": "failed", "excluded": "excluded",
             "not-reached": "not_reached"}
    for record in records:
        status = current_status(record)
        name = field[status]
        row = rows.setdefault(record.family, FamilyRow(record.family))
        for target in (row, total):
            setattr(target, name, getattr(target, name) + 1)
    return [rows[k] for k in sorted(rows)], total


def in_hash_sample(nodeid: str, percent: int) -> bool:
    """Whether a test belongs to the deterministic ``percent`` % sample (by id hash), the
    same tests on every machine and every run, spread over every family."""
    digest = hashlib.sha256(short_id(nodeid).encode()).digest()
    return int.from_bytes(digest[:4], "little") % 100 < percent


def run_pytest(
    paths: list[str], log: str | os.PathLike[str], *, sample: int = 0, timeout: float = 3600,
    extra: tuple[str, ...] = (), hash_sample: int = 100,
) -> int:
    """Run op-test files in a fresh interpreter with the plugin; returns pytest's exit code.

    ``extra`` goes to pytest verbatim (e.g. ``--conformance-audit-exclusions``).
    """
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", PYTEST_PLUGIN, "-p", "no:cacheprovider",
        f"--conformance-log={log}", f"--conformance-sample={sample}",
        f"--conformance-hash-sample={hash_sample}",
        "-o", "addopts=", *extra, *paths,
    ]
    env = {**os.environ, **ENVIRONMENT}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return done.returncode


def op_test_files(families: list[str] | None = None) -> dict[str, list[str]]:
    """The op-test files per family (all opsets), optionally restricted to ``families``."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests_root().glob("iOS*/test_*.py")):
        family = family_of(path.name)
        if families is None or family in families:
            found.setdefault(family, []).append(str(path))
    return found


def tests_root() -> Path:
    import importlib.util

    from nebisect.mil.quiet import import_coremltools

    import_coremltools()
    spec = importlib.util.find_spec(TESTS_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"coremltools' op tests ({TESTS_PACKAGE}) are not installed")
    return Path(spec.origin).parent
