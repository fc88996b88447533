"""Fork templates: which template serves a job (covering needs), templates started
ahead, the warm-up hooks a job's needs name, and templates stopped while busy — all
with real templates."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import warm_jobs
from support.leftovers import TOKEN_VAR, processes_with_token

from nebisect.isolate import Isolator, Job, Needs
from nebisect.isolation import fork
from nebisect.isolation.cancel import Cancelled
from nebisect.isolation.fork import MAX_TEMPLATES, TemplateRoster

WHERE = f"{warm_jobs.__name__}:where"
WARMED = Needs(imports=("numpy",), warm=(f"{warm_jobs.__name__}:warm_up",))
#: never imported here: its import blocks (tests/support/slow_import.py)
SLOW_IMPORT = "support.slow_import"


@pytest.mark.parametrize(("template", "job", "served"), [
    (Needs(("numpy", "torch", "coremltools")), Needs(("numpy", "torch")), True),
    (Needs(("numpy", "torch")), Needs(("numpy", "torch")), True),
    # nebisect's own modules do not count: the job's module is imported before its child
    (Needs(("numpy", "torch", "nebisect.fuzzing.warm")), Needs(("numpy", "nebisect.mil.interp")),
     True),
    (Needs(("numpy",)), Needs(("numpy", "torch")), False),
    # the job blocks torch; a template that imported it cannot honour that
    (Needs(("numpy", "torch")), Needs(("numpy",), blocks=("torch",)), False),
    # the template blocks scipy; the job may need it
    (Needs(("numpy",), blocks=("scipy",)), Needs(("numpy",)), False),
    (Needs(("numpy", "coremltools"), blocks=("scipy",)), Needs(("numpy",), blocks=("scipy",)),
     True),
    # warm-up hooks do not decide the template: it runs them when it first needs them
    (Needs(("numpy",)), WARMED, True),
])
def test_a_template_serves_a_job_it_covers(template: Needs, job: Needs, served: bool) -> None:
    assert template.covers(job.template_key) is served


@pytest.fixture
def fork_isolator(tmp_path: Path) -> Iterator[Isolator]:
    """A fork isolator of the test's own, its workspace in ``tmp_path``: nothing of it
    may be left there once it is closed."""
    with Isolator("fork", tmp_dir=tmp_path) as made:
        yield made
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def roster(monkeypatch: pytest.MonkeyPatch) -> Iterator[TemplateRoster]:
    """An empty roster for a test that counts templates: the roster is the process's, so
    the idle templates other tests' isolators left in it are stopped and reaped first
    (an isolator starts its template again when it needs it), the test gets a roster of
    its own, and the process's is put back after it, once the templates the test left
    are stopped too."""
    _stop_idle(fork.ROSTER)
    assert len(fork.ROSTER) == 0, "a template outside this test is busy"
    own = TemplateRoster(MAX_TEMPLATES)
    monkeypatch.setattr(fork, "ROSTER", own)
    yield own
    _stop_idle(own)


def _stop_idle(roster: TemplateRoster) -> None:
    """Stop and reap every idle template in ``roster``, as making room for others does."""
    with roster.lock:
        for slot in [slot for slot in roster._slots if slot not in roster._busy]:
            backend, key = slot
            roster.leave(slot)
            backend.evict(key)


def served_by(isolator: Isolator, needs: Needs) -> int:
    """The pid of the template that ran a job with ``needs``."""
    verdict = isolator.run(Job(WHERE, {}, needs=needs)).verdict
    assert verdict.status == "pass", verdict.message
    return int(verdict.job_result["template_pid"])


def test_an_expected_template_serves_the_jobs_it_covers_and_no_other(
        fork_isolator: Isolator) -> None:
    fork_isolator.expect(Needs(("numpy", "json", "csv")))
    first = served_by(fork_isolator, Needs(("numpy", "json")))
    assert served_by(fork_isolator, Needs(("numpy", "json", "csv"))) == first
    assert served_by(fork_isolator, Needs(("numpy",))) == first
    blocked = served_by(fork_isolator, Needs(("numpy",), blocks=("csv",)))
    assert blocked != first
    assert served_by(fork_isolator, Needs(("numpy",), blocks=("csv",))) == blocked


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_templates_are_bounded_the_least_recently_used_stopped_first(
        roster: TemplateRoster, fork_isolator: Isolator) -> None:
    """A sweep of many sources (each held by a template of its own) keeps at most
    MAX_TEMPLATES processes: starting one more stops the one used longest ago."""
    modules = ["json", "csv", "fractions", "decimal", "difflib", "textwrap", "heapq",
               "statistics", "bisect", "shlex"][:MAX_TEMPLATES + 2]
    pids = [served_by(fork_isolator, Needs(("numpy", module))) for module in modules]
    assert len(set(pids)) == len(modules)  # each needs a template of its own
    assert [_alive(pid) for pid in pids] == [False, False] + [True] * MAX_TEMPLATES
    # used again, the third becomes the most recent: the fourth is the next to go
    assert served_by(fork_isolator, Needs(("numpy", modules[2]))) == pids[2]
    restarted = served_by(fork_isolator, Needs(("numpy", modules[0])))
    assert restarted not in pids
    assert not _alive(pids[3]) and _alive(pids[2])


def test_the_bound_holds_across_isolators_and_for_templates_started_ahead(
        roster: TemplateRoster, fork_isolator: Isolator,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The templates of every isolator of the process count against one bound: the
    least recently used idle one goes, whichever isolator started it, also for a
    template started ahead of its jobs (a hint: expect) that never serves one."""
    modules = ["json", "csv", "fractions", "decimal", "difflib", "textwrap", "heapq",
               "statistics", "bisect", "shlex"][:MAX_TEMPLATES + 2]
    first = [served_by(fork_isolator, Needs(("numpy", module))) for module in modules[:-2]]
    with Isolator("fork", tmp_dir=tmp_path_factory.mktemp("other")) as other:
        later = [served_by(other, Needs(("numpy", module))) for module in modules[-2:]]
        assert [_alive(pid) for pid in first + later] == (
            [False, False] + [True] * (MAX_TEMPLATES - 2) + [True, True])
        assert len(roster) == MAX_TEMPLATES
        hints = ("this", "queue", "zipimport")
        for module in hints:
            other.expect(Needs(("numpy", module)))
        assert len(roster) == MAX_TEMPLATES
        assert [_alive(pid) for pid in first[2:]] == (
            [False] * len(hints) + [True] * (MAX_TEMPLATES - 2 - len(hints)))
    assert len(roster) == MAX_TEMPLATES - 2 - len(hints)


def test_a_template_may_add_at_most_the_memory_limit_to_its_data(tmp_path: Path) -> None:
    """--memory covers the templates: past its imports a template's data may grow by
    the isolator's limit, as a job's may."""
    with Isolator("fork", tmp_dir=tmp_path, memory=300 << 20) as limited_isolator:
        pid = served_by(limited_isolator, Needs(("numpy",)))
        data_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[5])
        limits = Path(f"/proc/{pid}/limits").read_text()
    soft = next(line.split()[3] for line in limits.splitlines()
                if line.startswith("Max data size"))
    headroom = int(soft) - data_pages * os.sysconf("SC_PAGE_SIZE")
    assert 250 << 20 < headroom <= 300 << 20


def test_a_template_imports_coremltools_without_the_dependencies_it_only_probes_for(
        fork_isolator: Isolator) -> None:
    """executorch, scikit-learn and transformers were most of a 10–11 s coremltools
    import in every converting template; a job that imports one still gets it."""
    needs = Needs(("numpy", "torch", "coremltools"))
    verdict = fork_isolator.run(Job(f"{warm_jobs.__name__}:probed_modules", {},
                                    needs=needs)).verdict
    assert verdict.status == "pass", verdict.message
    assert verdict.job_result == {"held": [], "importable": list(warm_jobs.PROBED)}


def test_a_template_nobody_used_is_stopped_on_close(tmp_path: Path) -> None:
    isolator = Isolator("fork", tmp_dir=tmp_path)
    isolator.expect(Needs(("numpy",)))
    isolator.close()
    assert list(tmp_path.iterdir()) == []


def test_a_warm_up_hook_runs_once_in_the_template_and_children_inherit_it(
        fork_isolator: Isolator) -> None:
    runs = [fork_isolator.run(Job(WHERE, {}, needs=WARMED)).verdict for _ in range(3)]
    templates = {v.job_result["template_pid"] for v in runs}
    assert len(templates) == 1
    # The spare forked before the template knew the job's module was retired: even the
    # first child was forked after the warm-up.
    assert [v.job_result["warmed_in"] for v in runs] == [list(templates)] * 3


#: Killing a template and reaping it takes milliseconds; waiting for it to finish
#: importing (or for a grace period to run out) takes seconds: 5 s before the fix.
KILLED_WITHIN = 3.0


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="fork mode and /proc are Linux-only")
@pytest.mark.parametrize("busy", ["starting", "importing the job's module"])
def test_a_template_busy_when_its_work_is_cancelled_is_killed_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: str) -> None:
    """A template importing (a module it needs while it starts, or the job's module before its
    first fork) does not read its requests: asked to stop, it would not; it is killed."""
    importing, token = tmp_path / "importing", uuid.uuid4().hex
    monkeypatch.setenv("NEBISECT_TEST_IMPORTING", str(importing))
    monkeypatch.setenv(TOKEN_VAR, token)
    needs = Needs((SLOW_IMPORT,) if busy == "starting" else ())
    job = Job(f"{SLOW_IMPORT}:never_runs", {}, needs=needs, timeout=600)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    isolator = Isolator("fork", tmp_dir=workspace)
    cancelled: list[float] = []

    def cancel_once_importing() -> None:
        deadline = time.monotonic() + 300
        while not importing.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        cancelled.append(time.monotonic())
        isolator.cancel_token.cancel()

    canceller = threading.Thread(target=cancel_once_importing)
    canceller.start()
    with pytest.raises(Cancelled):
        isolator.run(job)
    stopped = time.monotonic() - cancelled[0]
    canceller.join()
    assert importing.exists(), "the template never got to the slow import"
    assert stopped < KILLED_WITHIN, f"the cancelled run took {stopped:.1f} s to stop"
    assert processes_with_token(token) == []
    assert list(workspace.iterdir()) == []
