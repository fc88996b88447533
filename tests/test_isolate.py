"""The isolation engine against real faults in real child processes.

Every test checks the exact status and signature, and — through the fixtures — that
no process is left over: processes are found by an environment token every
descendant inherits (and by parent pid, for zombies). After each test only the warm
helpers of the module's shared isolators may remain (a template, its idle pre-forked
child, a persistent worker) and no case directory; once the isolators close, nothing
at all — no process, no temporary directory. That this test process is still alive
to assert anything is the "parent survives" check.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from support import TERMINAL_SIGNALS, TESTS, fault_jobs

from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Job, Needs, mark_stage, run_isolated
from nebisect.isolation.collect import RawExit, collect
from nebisect.isolation.job import CaseFiles, current_stage
from nebisect.isolation.provenance import provenance
from nebisect.isolation.watch import TAIL_BYTES, StderrSink
from nebisect.isolation.workspace import default_parent

MODES = ("fork", "spawn", "persistent")
FAULTS = fault_jobs.__name__
TOKEN_VAR = "NEBISECT_ISOLATION_TEST_TOKEN"


def leftover_processes(token: str) -> list[int]:
    """Processes carrying ``token`` in their environment, or zombies of ours.

    A zombie's environment is gone, so un-reaped children are found by parent and
    state; live children of this process that lack the token belong to other test
    modules (their own isolators) and are not this module's leftovers.
    """
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state, ppid_text = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            ppid = int(ppid_text)
        except (OSError, IndexError, ValueError):
            continue
        if token.encode() in environ or (ppid == me and state == "Z"):
            found.append(int(entry.name))
    return found


def stray_processes(token: str) -> list[int]:
    """Leftovers other than the warm helpers of shared isolators.

    A helper is our own child running ``-m nebisect.isolation.template|worker``, or a
    template's pre-forked child still waiting for a case (named ``nebisect-spare``).
    A case process has the template's command line too, but neither property.
    """
    helpers = (b"nebisect.isolation.template", b"nebisect.isolation.worker")
    processes = {}
    for pid in leftover_processes(token):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        processes[pid] = (command, name, ppid)
    warm = {pid for pid, (command, _, ppid) in processes.items()
            if ppid == os.getpid() and any(h in command for h in helpers)}
    spares = {pid for pid, (_, name, ppid) in processes.items()
              if ppid in warm and name == "nebisect-spare"}
    return sorted(set(processes) - warm - spares)


def assert_no_strays(token: str) -> None:
    """No stray process, allowing a just-forked spare a moment to name itself."""
    deadline = time.monotonic() + 2
    while (stray := stray_processes(token)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stray == []


def gone(pid: int) -> bool:
    """Dead: no /proc entry, or a zombie waiting for init (it was reparented)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.fixture(scope="module")
def token() -> Iterator[str]:
    """An environment token every process started from this module inherits."""
    with pytest.MonkeyPatch.context() as patch:
        value = uuid.uuid4().hex
        patch.setenv(TOKEN_VAR, value)
        yield value


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("isolation")


@pytest.fixture(scope="module")
def shared(shared_root: Path, token: str) -> Iterator[dict[str, Isolator]]:
    """One warm isolator per mode for the module; everything gone once they close."""
    isolators = {mode: Isolator(mode, tmp_dir=shared_root) for mode in MODES}
    yield isolators
    for isolator in isolators.values():
        isolator.close()
    assert leftover_processes(token) == []
    assert list(shared_root.iterdir()) == []


@pytest.fixture(params=MODES)
def mode_isolator(
    request: pytest.FixtureRequest, shared: dict[str, Isolator], shared_root: Path, token: str
) -> Iterator[Isolator]:
    """The module's isolator of each mode in turn; after the test, no case process and no
    case dir remain."""
    yield shared[request.param]
    assert_no_strays(token)
    assert list(shared_root.glob("*/case-*")) == []


@pytest.fixture
def make_isolator(tmp_path: Path, token: str) -> Iterator[Callable[[str], Isolator]]:
    """Fresh isolators for tests that depend on a cold state; checked after closing."""
    root = tmp_path / "isolation"
    root.mkdir()
    created: list[Isolator] = []
    before = set(leftover_processes(token))

    def make(mode: str) -> Isolator:
        created.append(Isolator(mode, tmp_dir=root))
        return created[-1]

    yield make
    for isolator in created:
        isolator.close()
    assert set(leftover_processes(token)) - before == set()
    assert list(root.iterdir()) == []


def job(function: str, payload: dict | None = None, **options: object) -> Job:
    return Job(f"{FAULTS}:{function}", payload or {}, **options)  # type: ignore[arg-type]


CRASHES = [
    ("segfault", "crash:SIGSEGV", "Segmentation fault"),
    ("abort", "crash:SIGABRT", "Aborted"),
    ("sigfpe", "crash:SIGFPE", "Floating point exception"),
    ("sigbus", "crash:SIGBUS", "Bus error"),
]


@pytest.mark.parametrize(("function", "signature", "fatal"), CRASHES)
def test_crash_is_a_verdict_with_the_signal_name(
    mode_isolator: Isolator, function: str, signature: str, fatal: str
) -> None:
    verdict = mode_isolator.run(job(function)).verdict
    assert (verdict.status, verdict.signature, verdict.stage) == ("crash", signature, "predict")
    assert verdict.message == f"killed by {signature.split(':')[1]} during predict"
    # faulthandler wrote the fatal error and the Python stack of the faulting function.
    assert f"Fatal Python error: {fatal}" in verdict.stderr_tail
    assert f"in {function}" in verdict.stderr_tail
    if mode_isolator.mode == "persistent":
        assert verdict.process.reconfirmed is True
        assert verdict.process.persistent_signature == signature


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the kernel's count of OOM kills is Linux's /proc/vmstat")
def test_a_case_that_kills_itself_is_a_crash_not_oom(isolator: Isolator) -> None:
    verdict = isolator.run(job("kill_self")).verdict
    assert (verdict.status, verdict.signature, verdict.stage) == (
        "crash", "crash:SIGKILL", "predict")
    assert verdict.message == "killed by SIGKILL during predict"


def test_a_case_that_deletes_the_workspace_costs_its_own_verdict_only(
        isolator: Isolator) -> None:
    isolator.run(job("remove_workspace"))  # its own verdict: whatever the mode makes of it
    for _ in range(2):
        verdict = isolator.run(job("passing", {"n": 3})).verdict
        assert verdict.status == "pass", verdict.message


def test_after_a_case_deleted_the_workspace_a_new_template_starts_in_it(tmp_path: Path) -> None:
    # The fault a run met: its next template (other needs) was started with its temp
    # directory inside the deleted root — exit 2 'No such file or directory'.
    with Isolator("fork", tmp_dir=tmp_path) as fresh:
        fresh.run(job("remove_workspace"))
        other_needs = Needs(imports=("fractions",))
        verdict = fresh.run(job("passing", {"n": 3}, needs=other_needs)).verdict
        assert verdict.status == "pass", verdict.message
    assert list(tmp_path.iterdir()) == []


NO_RESULT = [
    ("exit_code", {"code": 3}, "error:predict:child exited with code 3 without a result"),
    ("exit_code", {"code": 0}, "error:predict:child exited with code 0 without a result"),
    ("sys_exit", {"code": 4}, "error:predict:child exited with code 4 without a result"),
]


@pytest.mark.parametrize(("function", "payload", "signature"), NO_RESULT)
def test_exit_without_result_is_an_error(
    mode_isolator: Isolator, function: str, payload: dict, signature: str
) -> None:
    verdict = mode_isolator.run(job(function, payload)).verdict
    assert (verdict.status, verdict.signature) == ("error", signature)
    assert verdict.process.exit_code == payload["code"]


ERRORS = [
    ("raise_error", "error", "predict", "error:predict:ValueError: bad value N at 0x? in <path>"),
    ("staged_error", "error", "load",
     "error:load:RuntimeError: cannot load var_? from <path>"),
    ("bad_return", "error", "predict",
     f"error:predict:TypeError: {FAULTS}:bad_return returned int, expected Verdict or "
     "(Verdict, dict of arrays)"),
    ("object_array", "error", "predict",
     f"error:predict:TypeError: {FAULTS}:object_array returned array 'boxed' of dtype "
     "object; only plain numeric arrays cross the process boundary"),
    ("allocator_message", "oom", "predict", "oom"),
]


@pytest.mark.parametrize(("function", "status", "stage", "signature"), ERRORS)
def test_exception_becomes_a_normalized_verdict(
    mode_isolator: Isolator, function: str, status: str, stage: str, signature: str
) -> None:
    verdict = mode_isolator.run(job(function)).verdict
    assert (verdict.status, verdict.stage, verdict.signature) == (status, stage, signature)
    assert "Traceback (most recent call last)" in verdict.stderr_tail


def test_missing_module_is_an_error_at_the_job_stage(mode_isolator: Isolator) -> None:
    verdict = mode_isolator.run(Job("no_such_module_for_nebisect:f", {}, stage="load")).verdict
    assert verdict.signature == (
        "error:load:ModuleNotFoundError: No module named 'no_such_module_for_nebisect'"
    )


def test_crash_is_blamed_on_the_last_marked_stage(mode_isolator: Isolator) -> None:
    verdict = mode_isolator.run(job("staged_crash")).verdict
    assert (verdict.status, verdict.stage) == ("crash", "convert")
    assert verdict.signature == "crash:SIGSEGV"
    assert verdict.message == "killed by SIGSEGV during convert"


def test_memory_blowup_under_the_limit_is_oom(mode_isolator: Isolator) -> None:
    verdict = mode_isolator.run(job("memory_blowup", memory_mb=128)).verdict
    assert (verdict.status, verdict.signature) == ("oom", "oom")
    assert verdict.message.startswith("MemoryError")


def test_infinite_loop_times_out(mode_isolator: Isolator) -> None:
    verdict = mode_isolator.run(job("infinite_loop", timeout=0.5)).verdict
    assert (verdict.status, verdict.signature, verdict.stage) == ("timeout", "timeout", "predict")
    assert verdict.message == "no result within 0.5 s during predict; process group killed"
    assert verdict.timings.wall is not None and verdict.timings.wall >= 0.5


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_timeout_kills_the_whole_process_group(
    shared: dict[str, Isolator], mode: str, tmp_path: Path
) -> None:
    isolator = shared[mode]
    pid_file = tmp_path / "grandchild.pid"
    # Long enough for the child to start its grandchild (spawn: interpreter start-up).
    timeout = 3.0 if mode == "spawn" else 1.0
    verdict = isolator.run(job("loop_with_grandchild", {"pid_file": str(pid_file)},
                               timeout=timeout))
    assert verdict.verdict.status == "timeout"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone(grandchild)


def test_stderr_flood_is_bounded_and_keeps_the_last_bytes(mode_isolator: Isolator) -> None:
    outcome = mode_isolator.run(job("stderr_flood"))
    verdict = outcome.verdict
    assert (verdict.status, verdict.signature) == ("pass", "pass")
    assert verdict.process.stderr_bytes == fault_jobs.FLOOD_BYTES + len(
        fault_jobs.FLOOD_LAST_LINE) + 1
    assert len(verdict.stderr_tail.encode()) <= TAIL_BYTES
    assert verdict.stderr_tail.rstrip().endswith(fault_jobs.FLOOD_LAST_LINE)
    np.testing.assert_array_equal(outcome.arrays["ok"], [1.5])


def test_junk_on_stdout_cannot_corrupt_the_result(mode_isolator: Isolator) -> None:
    outcome = mode_isolator.run(job("stdout_junk"))
    assert (outcome.verdict.status, outcome.verdict.signature) == ("pass", "pass")
    assert list(outcome.arrays) == ["answer"]
    np.testing.assert_array_equal(outcome.arrays["answer"], [42.0])
    assert mode_isolator.run(job("passing")).verdict.status == "pass"


def test_a_wrong_argument_is_an_error_at_the_boundary(mode_isolator: Isolator) -> None:
    """The child reads a job's JSON arguments as the record its function declares: a
    misspelt key is a one-line error verdict, never a KeyError inside the job."""
    verdict = mode_isolator.run(job("passing", {"nn": 6})).verdict
    assert verdict.status == "error"
    assert "unknown FaultArguments field 'nn'" in verdict.message


GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
_REALLOCATION_FAULTS = textwrap.dedent("""
    from support import fault_jobs
    print(fault_jobs.page_faults_of_reallocation(None).job_result["faults"])
""")


@pytest.mark.skipif(not GLIBC, reason="the thresholds set are glibc's allocator's")
def test_a_job_writes_its_next_arrays_into_the_memory_it_freed(mode_isolator: Isolator) -> None:
    # The same allocations in a plain interpreter: glibc gives most of what a
    # "prediction" frees back to the kernel, and the next one faults its pages in again
    plain = subprocess.run([sys.executable, "-c", _REALLOCATION_FAULTS], cwd=TESTS,
                           capture_output=True, text=True, timeout=120, check=True)
    pages = fault_jobs.HELD_ARRAYS * fault_jobs.REALLOCATED_BYTES // 4096
    assert int(plain.stdout) >= fault_jobs.REALLOCATIONS * pages // 2
    verdict = mode_isolator.run(job("page_faults_of_reallocation")).verdict
    assert verdict.status == "pass", verdict.message
    assert verdict.job_result["faults"] < pages // 4


def test_pass_returns_arrays_provenance_and_timings(mode_isolator: Isolator) -> None:
    outcome = mode_isolator.run(job("passing", {"n": 6, "echo": "hello"}))
    verdict = outcome.verdict
    assert (verdict.status, verdict.job_result["echo"]) == ("pass", "hello")
    assert sorted(outcome.arrays) == ["flags", "scalar", "values"]
    assert outcome.arrays["values"].dtype == np.float16
    np.testing.assert_array_equal(outcome.arrays["values"], np.arange(6, dtype=np.float16) / 3)
    np.testing.assert_array_equal(outcome.arrays["flags"], [True, False])
    assert outcome.arrays["scalar"].shape == () and int(outcome.arrays["scalar"]) == 7
    assert verdict.provenance == provenance(mode_isolator.mode)
    assert set(verdict.provenance) >= {
        "nebisect", "coremltools", "torch", "numpy", "python", "os", "machine", "isolation",
    }
    assert (verdict.timings.wall or 0) >= (verdict.timings.call or 0) > 0
    assert verdict.stderr_tail == ""


def test_persistent_worker_restarts_after_a_crash(make_isolator: Callable[[str], Isolator]) -> None:
    isolator = make_isolator("persistent")
    first, second = (isolator.run(job("passing")).verdict for _ in range(2))
    assert (first.process.worker_case, second.process.worker_case) == (1, 2)
    assert first.process.reconfirmed is False
    crash = isolator.run(job("segfault")).verdict
    assert (crash.signature, crash.process.reconfirmed) == ("crash:SIGSEGV", True)
    assert crash.provenance["isolation"] == "persistent, re-confirmed in fork"
    after = isolator.run(job("passing")).verdict
    assert (after.status, after.process.worker_case) == ("pass", 1)


def test_persistent_failure_is_reported_only_if_a_fresh_process_agrees(
    make_isolator: Callable[[str], Isolator],
) -> None:
    isolator = make_isolator("persistent")
    assert isolator.run(job("fails_when_warm")).verdict.status == "pass"
    verdict = isolator.run(job("fails_when_warm")).verdict
    assert (verdict.status, verdict.process.reconfirmed) == ("pass", True)
    assert verdict.process.persistent_signature == (
        "error:predict:RuntimeError: state leaked from a previous case"
    )


def test_isolator_is_reusable_after_close(make_isolator: Callable[[str], Isolator]) -> None:
    isolator = make_isolator("fork")
    assert isolator.run(job("passing")).verdict.status == "pass"
    isolator.close()
    assert isolator.run(job("segfault")).verdict.signature == "crash:SIGSEGV"


def test_run_isolated_and_auto_mode(token: str) -> None:
    before = set(leftover_processes(token))
    outcome = run_isolated(job("passing"))
    assert outcome.verdict.provenance["isolation"] == ("spawn" if sys.platform == "darwin"
                                                       else "fork")
    assert set(leftover_processes(token)) - before == set()


def test_bad_arguments_are_user_errors() -> None:
    with pytest.raises(NebisectError, match="unknown isolation mode 'thread'"):
        Isolator("thread")
    with pytest.raises(NebisectError, match=r"must look like 'package\.module:function'"):
        Job("no_colon", {})
    with pytest.raises(NebisectError, match="timeout must be positive"):
        Job("a:b", {}, timeout=0)
    with pytest.raises(NebisectError, match="memory_mb must be positive"):
        Job("a:b", {}, memory_mb=0)


def test_mark_stage_outside_a_child_only_records() -> None:
    mark_stage("convert")
    assert current_stage() == "convert"
    mark_stage("predict")
    assert current_stage() == "predict"


@pytest.mark.parametrize(
    ("exit_code", "tail", "status", "signature"),
    [
        (-signal.SIGKILL, "", "oom", "oom"),  # where the kernel does not say
        (-signal.SIGABRT, "terminate called after throwing an instance of 'std::bad_alloc'\n",
         "oom", "oom"),
        (-signal.SIGABRT, "assertion failed\n", "crash", "crash:SIGABRT"),
        (1, "Traceback...\nMemoryError\n", "oom", "oom"),
        (1, "Traceback...\nKeyError: 'x'\n", "error",
         "error:load:child exited with code 1 without a result"),
    ],
)
def test_exit_status_classification(
    tmp_path: Path, exit_code: int, tail: str, status: str, signature: str
) -> None:
    """Memory exhaustion seen only from outside (OOM killer, bad_alloc) maps to oom."""
    (tmp_path / CaseFiles.STDERR).write_text(tail)
    (tmp_path / CaseFiles.STAGE).write_text("load".ljust(64))
    verdict = collect(Job("m:f", {}), tmp_path, RawExit(exit_code)).verdict
    assert (verdict.status, verdict.signature, verdict.stage) == (status, signature, "load")


def test_a_sigkill_is_oom_only_when_the_kernels_oom_killer_struck(tmp_path: Path) -> None:
    (tmp_path / CaseFiles.STDERR).write_text("")
    struck, not_struck = (RawExit(-signal.SIGKILL, oom_killed=killed) for killed in (True, False))
    verdict = collect(Job("m:f", {}), tmp_path, struck).verdict
    assert (verdict.status, verdict.message) == (
        "oom", "killed by the kernel's out-of-memory killer")
    verdict = collect(Job("m:f", {}), tmp_path, not_struck).verdict
    assert (verdict.status, verdict.signature) == ("crash", "crash:SIGKILL")


def test_unreadable_result_is_an_error(tmp_path: Path) -> None:
    (tmp_path / CaseFiles.RESULT).write_text('{"verdict": {"status": "bogus"}, "arrays": []}')
    verdict = collect(Job("m:f", {}), tmp_path, RawExit(0)).verdict
    assert verdict.status == "error"
    assert verdict.signature.startswith("error:predict:child wrote an unreadable result")


def test_a_result_nested_deep_is_an_error_and_a_nan_metric_reads_back(tmp_path: Path) -> None:
    from nebisect.isolation.child import write_result
    from nebisect.verdict import Verdict

    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / CaseFiles.RESULT).write_text(f'{{"verdict": {deep}, "arrays": []}}')
    verdict = collect(Job("m:f", {}), tmp_path, RawExit(0)).verdict
    assert verdict.status == "error"
    assert verdict.message.endswith("ValueError: is nested deeper than 32 levels")
    (tmp_path / CaseFiles.RESULT).unlink()
    write_result(tmp_path, Verdict("pass", job_result={"ratio": float("nan")}), {})
    verdict = collect(Job("m:f", {}), tmp_path, RawExit(0)).verdict
    assert verdict.status == "pass"
    assert np.isnan(verdict.job_result["ratio"])


def test_stderr_sink_keeps_head_and_tail_within_bounds(tmp_path: Path) -> None:
    sink = StderrSink(tmp_path / "log", head=100, tail=50)
    for i in range(1000):
        sink.feed(f"{i:04d}\n".encode())
    sink.close()
    text = (tmp_path / "log").read_text()
    assert sink.total == 5000
    assert text.startswith("0000\n0001\n")
    assert text.endswith("0998\n0999\n")
    assert "[nebisect: 4850 bytes of stderr elided]" in text
    assert len(text) <= 100 + 50 + 60


INTERRUPTED_PARENT = TERMINAL_SIGNALS + """
import sys
sys.path.insert(0, {tests!r})
from nebisect.isolate import Isolator, Job
with Isolator({mode!r}) as isolator:
    isolator.run(Job("support.fault_jobs:infinite_loop", {{"started": {started!r}}}, timeout=120))
"""


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_in_the_parent_leaves_nothing_behind(
    tmp_path: Path, token: str, mode: str
) -> None:
    temp_root, started = tmp_path / "tmp", tmp_path / "started"
    temp_root.mkdir()
    script = textwrap.dedent(INTERRUPTED_PARENT).format(
        tests=str(TESTS), mode=mode, started=str(started)
    )
    env = {**os.environ, "TMPDIR": str(temp_root)}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.exists(), parent.communicate()[1]
        child = int(started.read_text())
        parent.send_signal(signal.SIGINT)
        _, stderr = parent.communicate(timeout=30)
    finally:
        # Whatever failed above, do not leave a looping case to the tests that follow.
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
    assert parent.returncode != 0
    assert "KeyboardInterrupt" in stderr
    assert gone(child)
    assert_no_strays(token)
    assert list(temp_root.iterdir()) == []


FORGETFUL_PARENT = """
import sys
sys.path.insert(0, {tests!r})
from nebisect.isolate import Isolator, Job
for mode in ("fork", "persistent"):
    isolator = Isolator(mode)
    assert isolator.run(Job("support.fault_jobs:passing", {{}})).verdict.status == "pass"
"""


def test_isolators_never_closed_are_cleaned_up_at_exit(tmp_path: Path, token: str) -> None:
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    script = textwrap.dedent(FORGETFUL_PARENT).format(tests=str(TESTS))
    env = {**os.environ, "TMPDIR": str(temp_root)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert_no_strays(token)
    assert list(temp_root.iterdir()) == []


def test_temp_root_follows_tmpdir_else_prefers_tmpfs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", "/somewhere")
    assert default_parent() is None
    monkeypatch.delenv("TMPDIR")
    assert default_parent() in (None, "/dev/shm")


def test_serving_several_parties_keeps_the_blocks_every_party_asks_for() -> None:
    simulator = Needs(("numpy", "coremltools"), blocks=("torch", "transformers"))
    assert Needs.serving(simulator, Needs(("numpy", "torch"))) == Needs(
        ("coremltools", "numpy", "torch"))
    assert Needs.serving(simulator, Needs(("numpy",), blocks=("transformers",))) == Needs(
        ("coremltools", "numpy"), blocks=("transformers",))
    assert Needs.serving(simulator) == simulator


@pytest.mark.parametrize("parties, status", [
    ((Needs(("numpy",), blocks=("scipy",)),), "error"),
    ((Needs(("numpy",), blocks=("scipy",)), Needs(("numpy",))), "pass"),
])
def test_a_block_reaches_the_fork_child_only_if_every_party_asks_for_it(
    parties: tuple[Needs, ...], status: str, make_isolator: Callable[[str], Isolator]
) -> None:
    isolator = make_isolator("fork")
    outcome = isolator.run(job("importable", {"module": "scipy"}, needs=Needs.serving(*parties)))
    assert outcome.verdict.status == status, outcome.verdict.message


HOSTILE_RESULTS = [
    ("result_fifo", "error", "result.json is not a regular file but a FIFO"),
    ("result_dev_zero", "error", "result.json is a symbolic link"),
    ("result_not_utf8", "error", "UnicodeDecodeError"),
    ("forged_pass_then_segfault", "crash", "killed by SIGSEGV during predict"),
]


@pytest.mark.parametrize(("function", "status", "message"), HOSTILE_RESULTS)
def test_a_hostile_result_file_gives_the_right_verdict_promptly(
        mode_isolator: Isolator, function: str, status: str, message: str) -> None:
    started = time.monotonic()
    verdict = mode_isolator.run(job(function, timeout=60)).verdict
    assert time.monotonic() - started < 20
    assert verdict.status == status
    assert message in verdict.message
    if status == "crash":
        assert verdict.signature == "crash:SIGSEGV"


def test_links_in_the_workspace_are_neither_read_nor_written_through(
        mode_isolator: Isolator, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    started = time.monotonic()
    verdict = mode_isolator.run(job("workspace_links_then_segfault", {"victim": str(victim)},
                               timeout=60)).verdict
    assert time.monotonic() - started < 20
    assert (verdict.status, verdict.signature, verdict.stage) == ("crash", "crash:SIGSEGV",
                                                                  "predict")
    assert victim.read_text() == "the user's file\n"
