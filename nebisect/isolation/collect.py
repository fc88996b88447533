"""Turn what a finished (or dead) case process left behind into a verdict.

The parent never trusts the child: a verdict comes from a result file that parses and
whose arrays load without pickle, and only from a process that ended cleanly (exit 0, or
the fork child's "done"); otherwise the exit status speaks — a signal is a ``crash``
named after it whatever the child wrote before dying, a timeout is ``timeout``, an exit
without a result is an ``error``, and the usual fingerprints of memory exhaustion are
``oom`` (its message and the verdict's ``process.memory_limit`` name the job's limit). The stage is
the last one the child declared through ``mark_stage``. A SIGKILL is ``oom`` when the
kernel's out-of-memory killer struck while the case ran (or, where the kernel does not
say, as the likeliest cause); a case that sends itself SIGKILL is a ``crash``. On macOS
a crash carries the native stack from the OS's crash report when one is found
(:mod:`nebisect.isolation.crashreport`).

Every file in the case directory was written by the child, so it is read as
:func:`nebisect.files.read_untrusted` reads: no symlink followed, nothing but a regular
file, at most a capped size, decoded strictly and parsed within limits of nesting
(:func:`nebisect.files.parse_untrusted_json`) — a FIFO, a link to ``/dev/zero``,
bytes that are not UTF-8 or JSON nested 200 000 deep give an ``error`` verdict, never
a hung or dead parent.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from nebisect.arrays import load_npz
from nebisect.bounds import format_size
from nebisect.errors import NebisectError
from nebisect.files import parse_untrusted_json, read_untrusted
from nebisect.isolation.crashreport import find_crash_report
from nebisect.isolation.job import OOM_PATTERN, CaseFiles, Job, Outcome, read_stage_file
from nebisect.isolation.memory import MIB
from nebisect.isolation.watch import read_tail
from nebisect.verdict import ProcessFacts, Status, Verdict, crash_signature, error_signature


@dataclass
class RawExit:
    """How a case process ended, as seen by whoever reaped it.

    ``exit_code`` is negative for death by signal (like ``Popen.returncode``) and None
    when it was not awaited (a fork child that signalled its result was written).
    ``failure`` explains an isolation-side failure (a helper process that died), which
    then becomes the case's ``error``. ``worker_case`` is how many cases the persistent
    worker that ran it had run, this one included (None: no persistent worker). ``pid``
    and ``started`` (epoch seconds) identify the case process, where the backend knows
    it, so that the crash report the OS wrote for it can be found (macOS).
    ``oom_killed``: whether the kernel's out-of-memory killer killed a process while
    the case ran (None: the kernel does not say), which tells its SIGKILL from any other.
    """

    exit_code: int | None
    timed_out: bool = False
    stderr_bytes: int = 0
    failure: str = ""
    worker_case: int | None = None
    pid: int | None = None
    started: float = 0.0
    oom_killed: bool | None = None


#: The most a result document may hold: a verdict is a few kilobytes; anything near
#: this is not a verdict.
RESULT_BYTES = 16 << 20


def collect(job: Job, case_dir: Path, raw: RawExit) -> Outcome:
    stage = read_stage_file(case_dir / CaseFiles.STAGE) or job.stage
    tail = read_tail(case_dir / CaseFiles.STDERR)
    clean = raw.exit_code in (None, 0) and not raw.timed_out and not raw.failure
    outcome = _read_result(case_dir, stage) if clean else None
    if outcome is None:
        outcome = Outcome(_exit_verdict(job, raw, stage, tail))
    verdict = outcome.verdict
    if verdict.status == Status.OOM and job.memory_mb is not None:
        name_memory_limit(verdict, job.memory_mb)
    verdict.stderr_tail = verdict.stderr_tail or tail
    verdict.process.worker_case = raw.worker_case
    verdict.process.stderr_bytes = raw.stderr_bytes
    if verdict.status == "crash" and raw.pid and sys.platform == "darwin":
        report = find_crash_report(raw.pid, raw.started)
        if report is not None:
            verdict.process.crash_report = report
    return outcome


def name_memory_limit(verdict: Verdict, memory_mb: int) -> None:
    """An ``oom`` verdict's message and ``process.memory_limit`` name the limit it ran
    under."""
    limit = format_size(memory_mb * MIB)
    verdict.process.memory_limit = limit
    verdict.message = f"{verdict.message} (memory limit {limit}, --memory)"


def _read_result(case_dir: Path, stage: str) -> Outcome | None:
    try:
        data = read_untrusted(case_dir / CaseFiles.RESULT, RESULT_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, NebisectError) as exc:
        return _unreadable(stage, f"{CaseFiles.RESULT} {exc}")
    try:
        document = parse_untrusted_json(data.decode("utf-8"), RESULT_BYTES, nonfinite=True)
        verdict = Verdict.from_dict(document["verdict"])
        names = sorted(document["arrays"])
        arrays = load_npz(case_dir / CaseFiles.ARRAYS, follow_symlinks=False) if names else {}
        if sorted(arrays) != names:
            raise ValueError(f"arrays {names} announced, {sorted(arrays)} found")
    except (ValueError, KeyError, TypeError, NebisectError) as exc:
        return _unreadable(stage, f"{type(exc).__name__}: {exc}")
    return Outcome(verdict, arrays)


def _unreadable(stage: str, detail: str) -> Outcome:
    message = f"child wrote an unreadable result: {detail}"
    return Outcome(Verdict(Status.ERROR, stage, error_signature(stage, message), message=message))


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def _exit_verdict(job: Job, raw: RawExit, stage: str, tail: str) -> Verdict:
    if raw.timed_out:
        return Verdict(
            Status.TIMEOUT, stage, "timeout",
            message=f"no result within {job.timeout:g} s during {stage}; process group killed",
        )
    if raw.failure or raw.exit_code is None:
        message = raw.failure or "case process vanished without an exit status"
        return Verdict(Status.ERROR, stage, error_signature(stage, message), message=message)
    code = raw.exit_code
    facts = ProcessFacts(exit_code=code)
    if code < 0:
        name = signal_name(-code)
        if -code == signal.SIGKILL and raw.oom_killed is not False:
            message = ("killed by the kernel's out-of-memory killer" if raw.oom_killed else
                       "killed by SIGKILL, not by nebisect: most likely the kernel's "
                       "out-of-memory killer")
            return Verdict(Status.OOM, stage, "oom", message=message, process=facts)
        if -code == signal.SIGABRT and "std::bad_alloc" in tail:
            message = "aborted on std::bad_alloc (native allocation failed)"
            return Verdict(Status.OOM, stage, "oom", message=message, process=facts)
        return Verdict(Status.CRASH, stage, crash_signature(name),
                       message=f"killed by {name} during {stage}", process=facts)
    last_line = next((ln for ln in reversed(tail.splitlines()) if ln.strip()), "")
    if OOM_PATTERN.search(last_line):
        return Verdict(Status.OOM, stage, "oom", message=last_line.strip(), process=facts)
    # Built by hand, not by error_signature(): the exit code is deterministic and tells
    # sys.exit(3) from an interpreter failure, so it stays in the signature.
    message = f"child exited with code {code} without a result"
    return Verdict(Status.ERROR, stage, f"error:{stage}:{message}", message=message,
                   process=facts)
