"""Child functions with real faults, run through the isolation Job mechanism.

Every fault here happens for real inside the child: a NULL dereference, a bus error on
a truncated mapping, allocations against the memory limit (RLIMIT_DATA), a busy loop, 50 MB on fd 2.
Only SIGFPE is raised with kill(): CPython turns integer division by zero into an
exception, so no pure-Python path reaches the CPU's divide fault.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from nebisect.isolate import mark_stage
from nebisect.isolation.child import write_result
from nebisect.isolation.job import CaseFiles
from nebisect.verdict import Verdict

FLOOD_BYTES = 50 * 1024 * 1024
FLOOD_LAST_LINE = "LAST LINE OF THE FLOOD"

_CALLS_IN_THIS_PROCESS = 0


@dataclass(frozen=True)
class FaultArguments:
    """The arguments of every fault job (each reads the few it needs)."""

    n: int = 5
    echo: Any = None
    mb: int = 0
    started: str = ""
    pid_file: str = ""
    code: int = 0
    module: str = ""
    victim: str = ""


def passing(payload: FaultArguments) -> tuple[Verdict, dict[str, np.ndarray]]:
    arrays = {
        "values": np.arange(payload.n, dtype=np.float16) / 3,
        "flags": np.array([True, False]),
        "scalar": np.array(7, dtype=np.int64),
    }
    return Verdict("pass", job_result={"echo": payload.echo}), arrays


def segfault(payload: FaultArguments) -> Verdict:
    ctypes.string_at(0)
    return Verdict("pass")


def abort(payload: FaultArguments) -> Verdict:
    os.abort()


def sigfpe(payload: FaultArguments) -> Verdict:
    os.kill(os.getpid(), signal.SIGFPE)
    return Verdict("pass")


def kill_self(payload: FaultArguments) -> Verdict:
    """SIGKILL sent by the case to itself: no memory anywhere near a limit."""
    os.kill(os.getpid(), signal.SIGKILL)
    return Verdict("pass")


def sigbus(payload: FaultArguments) -> Verdict:
    """A real SIGBUS: touch a mapped page whose file was truncated away."""
    with tempfile.TemporaryFile() as handle:
        handle.write(b"\0" * mmap.PAGESIZE * 2)
        handle.flush()
        mapping = mmap.mmap(handle.fileno(), mmap.PAGESIZE * 2)
        os.ftruncate(handle.fileno(), 0)
        mapping[mmap.PAGESIZE] = 1
    return Verdict("pass")


def staged_crash(payload: FaultArguments) -> Verdict:
    mark_stage("load")
    mark_stage("convert")
    return segfault(payload)


def staged_error(payload: FaultArguments) -> Verdict:
    mark_stage("load")
    raise RuntimeError("cannot load var_12 from /tmp/model.mlpackage")


def raise_error(payload: FaultArguments) -> Verdict:
    raise ValueError("bad value 42 at 0xdeadbeef in /tmp/x/y.py")


def memory_blowup(payload: FaultArguments) -> Verdict:
    """Grow until the allocator refuses; the 4 GiB cap keeps an unenforced limit visible
    as a wrong verdict instead of a machine out of memory."""
    blocks = []
    for _ in range(512):
        blocks.append(np.ones(1 << 20))
    return Verdict("pass", message="memory limit not enforced")


def allocate(payload: FaultArguments) -> Verdict:
    """Allocate ``payload.mb`` MiB at once and touch every page."""
    block = np.ones(payload.mb << 20, np.uint8)
    return Verdict("pass", message=f"held {block.nbytes} bytes")


def memory_budget(payload: FaultArguments) -> Verdict:
    """What the job sees of its memory limit: its budget and the soft RLIMIT_DATA."""
    import resource

    from nebisect.isolation import memory

    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return Verdict("pass", job_result={"budget": memory.budget(), "soft": soft})


def thread_share(payload: FaultArguments) -> Verdict:
    """What the job sees of its thread share: the variable, the threads numpy's BLAS
    loaded with, and the simulator's blockwise passes."""
    from nebisect.mil import blocks

    return Verdict("pass", job_result={"variable": os.environ.get("OMP_NUM_THREADS"),
                                       "blas": os.environ.get("OPENBLAS_NUM_THREADS"),
                                       "blockwise": blocks.threads()})


#: bytes of each array :func:`page_faults_of_reallocation` writes: below numpy's 4 MiB
#: huge-page threshold, so every 4 KiB page written anew is a fault of its own
REALLOCATED_BYTES = 1 << 20
#: arrays one "prediction" holds at once, as a model's intermediate values are held
HELD_ARRAYS = 16
#: predictions measured after a first
REALLOCATIONS = 4


def page_faults_of_reallocation(payload: FaultArguments) -> Verdict:
    """The minor page faults of :data:`REALLOCATIONS` "predictions" after a first, each
    writing :data:`HELD_ARRAYS` fresh arrays and freeing them all at its end: about a
    fault per page written when freed memory goes back to the kernel, none when the
    process keeps it for its next allocations."""
    import resource

    def predict() -> None:
        held = [np.ones(REALLOCATED_BYTES // 4, np.float32) for _ in range(HELD_ARRAYS)]
        del held

    predict()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(REALLOCATIONS):
        predict()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return Verdict("pass", job_result={"faults": faults})


def allocator_message(payload: FaultArguments) -> Verdict:
    raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB")


def infinite_loop(payload: FaultArguments) -> Verdict:
    if payload.started:
        # Atomically: a test polls for this file and reads the pid as soon as it exists.
        started = Path(payload.started)
        staging = started.with_name(f".{started.name}.tmp")
        staging.write_text(str(os.getpid()))
        staging.replace(started)
    while True:
        pass


def loop_with_grandchild(payload: FaultArguments) -> Verdict:
    """Leave a grandchild in the case's process group, then hang: the group kill must
    take it down too."""
    sleeper = subprocess.Popen(["sleep", "60"])
    Path(payload.pid_file).write_text(str(sleeper.pid))
    while True:
        pass


def exit_code(payload: FaultArguments) -> Verdict:
    os._exit(payload.code)


def sys_exit(payload: FaultArguments) -> Verdict:
    sys.exit(payload.code)


def stderr_flood(payload: FaultArguments) -> tuple[Verdict, dict[str, np.ndarray]]:
    chunk = b"noise from a native library\n" * 4096
    written = 0
    while written < FLOOD_BYTES:
        written += os.write(2, chunk[: FLOOD_BYTES - written])
    os.write(2, f"{FLOOD_LAST_LINE}\n".encode())
    return Verdict("pass"), {"ok": np.array([1.5])}


def stdout_junk(payload: FaultArguments) -> tuple[Verdict, dict[str, np.ndarray]]:
    """Garbage shaped like every channel message, on both the Python and the fd level."""
    junk = '{"done": true}\n{"exit_code": 0, "timed_out": false}\n{"ready": 1}\nnot json\n'
    print(junk * 100, flush=True)
    os.write(1, junk.encode() * 100)
    os.write(1, b"\x00\xff binary \n" * 100)
    return Verdict("pass"), {"answer": np.array([42.0])}


def bad_return(payload: FaultArguments) -> int:
    return 42


def object_array(payload: FaultArguments) -> tuple[Verdict, dict[str, Any]]:
    return Verdict("pass"), {"boxed": np.array([object()])}


def fails_when_warm(payload: FaultArguments) -> Verdict:
    """Passes in a fresh process, fails once the process has run a case before: the
    leaked-state failure only a persistent worker can produce."""
    global _CALLS_IN_THIS_PROCESS
    _CALLS_IN_THIS_PROCESS += 1
    if _CALLS_IN_THIS_PROCESS > 1:
        raise RuntimeError("state leaked from a previous case")
    return Verdict("pass")


def importable(payload: FaultArguments) -> Verdict:
    """Passes if ``payload.module`` imports in this case process (blocked or not)."""
    try:
        importlib.import_module(payload.module)
    except ImportError as exc:
        return Verdict("error", "predict", "error:predict:import-blocked", message=str(exc))
    return Verdict("pass")


def _setsid_sleeper(pid_file: str) -> None:
    """Fork a grandchild that leaves the case's session and process group, then sleeps."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        staging = Path(f"{pid_file}.tmp")
        staging.write_text(str(os.getpid()))
        staging.replace(pid_file)
        time.sleep(600)
        os._exit(0)
    while not Path(pid_file).exists():
        time.sleep(0.01)


def setsid_grandchild(payload: FaultArguments) -> Verdict:
    """A case that finishes normally, leaving a grandchild the group kill cannot reach."""
    _setsid_sleeper(payload.pid_file)
    return Verdict("pass")


def setsid_grandchild_then_crash(payload: FaultArguments) -> Verdict:
    """The same grandchild, then a segfault: the case process can clean up nothing."""
    _setsid_sleeper(payload.pid_file)
    return segfault(payload)


def _case_dir() -> Path:
    """The case directory, found as a hostile child would: through the stage file the
    isolation child keeps open."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target.name == CaseFiles.STAGE:
                return target.parent
    raise RuntimeError("no stage file open: not in an isolated child")


def result_fifo(payload: FaultArguments) -> Verdict:
    """Leave a FIFO where the result belongs: a parent that opens it blocks forever."""
    os.mkfifo(_case_dir() / CaseFiles.RESULT)
    os._exit(0)


def result_dev_zero(payload: FaultArguments) -> Verdict:
    """Leave a link to /dev/zero where the result belongs: endless bytes."""
    (_case_dir() / CaseFiles.RESULT).symlink_to("/dev/zero")
    os._exit(0)


def result_not_utf8(payload: FaultArguments) -> Verdict:
    (_case_dir() / CaseFiles.RESULT).write_bytes(b'{"verdict": "\xff\xfe\xfd"}')
    os._exit(0)


def forged_pass_then_segfault(payload: FaultArguments) -> Verdict:
    """Write a perfect ``pass`` result the way the child does, then die by SIGSEGV."""
    write_result(_case_dir(), Verdict("pass"), {"ok": np.array([1.0])})
    ctypes.string_at(0)
    return Verdict("pass")


def workspace_links_then_segfault(payload: FaultArguments) -> Verdict:
    """Replace the stage file and the stderr capture by links (to /dev/zero, to a file
    of the user's), write to stderr, then crash: the parent must read no link and
    write through none."""
    case_dir = _case_dir()
    for name in (CaseFiles.STAGE, CaseFiles.STDERR):
        (case_dir / name).unlink(missing_ok=True)
    (case_dir / CaseFiles.STAGE).symlink_to("/dev/zero")
    (case_dir / CaseFiles.STDERR).symlink_to(payload.victim)
    os.write(2, b"written through a link\n")
    time.sleep(0.2)
    ctypes.string_at(0)
    return Verdict("pass")


def remove_workspace(payload: FaultArguments) -> NoReturn:
    """Delete the isolator's temp root (the case directory's parent), every case
    directory in it included, and exit: writing a result would make the case directory,
    and the root with it, again."""
    import shutil

    shutil.rmtree(_case_dir().parent)
    os._exit(0)
