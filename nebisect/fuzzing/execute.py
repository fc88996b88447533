"""Run fuzz cases: materialize inputs to ``.npz``, evaluate isolated, summarize the outcome.

This is the parent side between the engine (which deals in JSON cases) and
:func:`nebisect.evaluate.judge.evaluate` (which deals in :class:`~nebisect.case.Case`): it writes
each case's inputs to a content-addressed ``.npz`` in a private work directory, builds
the builder case, and reduces the outcome to an :class:`Evaluation` — the verdict plus
the judged element's value on the target and on the reference (what a cliff report
shows on each side).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz, sha256_arrays
from nebisect.case import Case
from nebisect.evaluate.judge import build_job, split_arrays
from nebisect.fuzzing.campaign import Evaluation
from nebisect.fuzzing.subject import OpSubject, builder_case
from nebisect.isolate import Isolator, Needs
from nebisect.isolation.workspace import default_parent
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import Status, Tolerance, Verdict

#: what a fuzz case's child also needs: the op specs, kernels and builder rehearsed
WARM = Needs(imports=("nebisect.fuzzing.warm",))


class SubjectEvaluator:
    """Evaluates the full cases of one subject on one target, one isolated process each.

    ``isolator`` is shared by every case (persistent mode for throughput: the isolation
    engine re-confirms every failure in a fresh process). Not thread-safe — one evaluator
    per thread, like the isolator.
    """

    def __init__(
        self,
        subject: OpSubject,
        target: str,
        isolator: Isolator,
        *,
        reference: str = REFERENCE_TARGET,
        plugins: tuple[str, ...] = (),
        timeout: float = 60.0,
        tolerance: Tolerance | None = None,
    ) -> None:
        self.subject, self.target, self.isolator = subject, target, isolator
        self.reference, self.plugins = reference, plugins
        self.timeout, self.tolerance = timeout, tolerance
        # Every case writes its inputs here: on tmpfs where the isolator's cases live too
        # (a small file on this VM's disk costs ~0.5 ms, as much as the case itself).
        self.workdir = Path(tempfile.mkdtemp(prefix="nebisect-fuzz-", dir=default_parent()))

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def case(self, case: dict[str, Any]) -> tuple[Case, dict[str, np.ndarray]]:
        """The runner case for a full case, with its inputs written to an npz."""
        arrays = self.subject.arrays(case)
        digest = sha256_arrays(arrays)
        inputs = self.workdir / f"{digest[:24]}.npz"
        if not inputs.exists():
            save_npz(inputs, arrays)
        options = replace(self.subject.options(), plugins=tuple(self.plugins))
        return builder_case(case["program"], self.target, inputs, digest, options), arrays

    def __call__(self, case: dict[str, Any]) -> Evaluation:
        """Evaluate one case in isolation (what :func:`nebisect.evaluate.judge.evaluate` does).

        The job is built with the runner's :func:`~nebisect.evaluate.judge.build_job` and
        also needs :mod:`nebisect.fuzzing.warm` imported, so fork children start with the op
        specs, kernels and builder already imported.
        """
        runner_case, _ = self.case(case)
        job = build_job(runner_case, reference=self.reference, tolerance=self.tolerance,
                        timeout=self.timeout)
        job.needs = job.needs.adding(WARM)
        outcome = self.isolator.run(job)
        outcome.verdict.target = outcome.verdict.target or runner_case.target
        names = list(runner_case.options.outputs) or None
        output, reference = judged_values(
            outcome.verdict, split_arrays(outcome.arrays, "out:"),
            split_arrays(outcome.arrays, "ref:"), names,
        )
        return Evaluation(outcome.verdict, output, reference, near_miss(outcome.verdict),
                          outcome.arrays)


#: a pass counts as a near miss (and is climbed by Hypothesis) from this fraction of its
#: error budget on
NEAR_MISS = 0.25


def near_miss(verdict: Verdict) -> float | None:
    """How much of its ULP budget a passing case used, when that is at least 1/4."""
    measured = verdict.error_metrics
    if verdict.status != Status.PASS or measured is None:
        return None
    used = [
        c.max_ulp_error / c.tolerance.ulps
        for c in measured.comparisons
        if c.tolerance.ulps and math.isfinite(c.max_ulp_error)
    ]
    worst = max(used, default=0.0)
    return worst if worst >= NEAR_MISS else None


def judged_values(
    verdict: Verdict,
    outputs: dict[str, np.ndarray],
    references: dict[str, np.ndarray],
    names: list[str] | None = None,
) -> tuple[float | None, float | None]:
    """(target, reference) at the failing element, else at the first element judged."""
    measured = verdict.error_metrics
    for comparison in measured.comparisons if measured else ():
        if not comparison.passed and comparison.kind != "shape":
            return comparison.worst_output, comparison.worst_reference
    name = next(iter(names or sorted(references)), None)
    if name is None:
        return None, None
    return _first(outputs.get(name)), _first(references.get(name))


def _first(array: np.ndarray | None) -> float | None:
    if array is None or array.size == 0:
        return None
    return float(np.asarray(array).reshape(-1)[0])
