"""The memory limit travels with each command's invocation: two API calls with
different ``memory=`` in one process each run their children under their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.memory_bombs import save_bomb

import nebisect
from nebisect.errors import NebisectError
from nebisect.executors.invocation import Invocation
from nebisect.executors.runner import Runner
from nebisect.isolation.job import Job

MIB = 1 << 20
#: a ``tile`` to 4500×4500: 2e7 elements, 162 MB at float64 — past 128M, within 1G
SIDE = 4500


def test_two_api_calls_each_run_under_their_own_memory_limit(tmp_path: Path) -> None:
    package, inputs = save_bomb(tmp_path, "tile", SIDE)

    def run(memory: str) -> nebisect.RunResult:
        result = nebisect.run(str(package), inputs=str(inputs), target="sim:fp32",
                              explore="none", memory=memory, jobs=1, progress=False)
        assert isinstance(result, nebisect.RunResult)
        return result

    # the package's reader (a child) refuses what its limit cannot hold, before the run
    with pytest.raises(NebisectError, match=r"128M of memory \(--memory\)"):
        run("128M")
    assert run("1G").ok
    with pytest.raises(NebisectError, match=r"128M of memory \(--memory\)"):
        run("128M")


def test_a_runner_s_isolators_take_its_invocation_s_memory() -> None:
    with Runner.of(Invocation(memory=192 * MIB, jobs=2)) as runner:
        budgets = [isolator.run(Job("support.fault_jobs:memory_budget", {})).verdict
                   .job_result["budget"] for isolator in runner.isolators]
        assert runner.invocation.memory == 192 * MIB
    assert budgets == [192 * MIB, 192 * MIB]
