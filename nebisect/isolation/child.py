"""What runs inside a case process (fork child, spawned interpreter, persistent worker).

The child does as little as possible and trusts nothing it calls: the job's function
may raise, exhaust memory, print garbage on stdout, or kill the process outright. The
first three become a written verdict; the last is diagnosed by the parent from the exit
status, the stage file and the stderr capture. The result is written last, atomically,
so its presence means "the child finished its job".

Spawn-mode entry point: ``python -m nebisect.isolation.child CASE_DIR``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from nebisect.arrays import save_npz
from nebisect.codec import arguments_for
from nebisect.files import write_text
from nebisect.isolation.job import (
    CaseFiles,
    Job,
    bind_stage_file,
    current_stage,
    is_out_of_memory,
)
from nebisect.isolation.memory import limited
from nebisect.isolation.osproc import (
    orphaned,
    reuse_freed_memory,
    set_pdeathsig,
    set_process_name,
)
from nebisect.isolation.threads import sharing
from nebisect.verdict import Status, Verdict, error_signature

#: Exit codes for a child that never reached the job (visible in "exited with code N").
EXIT_ORPHANED = 120
EXIT_SETUP_FAILED = 121


def enter_case_process(parent_pid: int) -> None:
    """Die with the parent (PR_SET_PDEATHSIG), or right now if it is already gone."""
    set_pdeathsig(signal.SIGKILL)
    if orphaned(parent_pid):
        os._exit(EXIT_ORPHANED)


def arm_faulthandler() -> None:
    """On a fatal signal, write the Python stack of every thread to fd 2 (the capture).

    Done once per process, before any job runs; fd 2 must already be the capture pipe.
    """
    faulthandler.enable(file=sys.stderr, all_threads=True)


def redirect_stdio(stderr_fd: int) -> None:
    """stdin and stdout to /dev/null, stderr to the capture pipe.

    stdout is program chatter (progress bars, prints), never evidence, and must not be
    able to reach the result channel; native crash reports go to fd 2.
    """
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(stderr_fd, 2)
    os.close(devnull)
    if stderr_fd > 2:
        os.close(stderr_fd)


def spare_child(parent_pid: int, request_fd: int, stderr_fd: int, done_fd: int) -> NoReturn:
    """Fork-mode child, forked before its case exists: set up, then wait for the request.

    Named ``nebisect-spare`` while it waits and ``nebisect-case`` once it runs one (see
    ``ps``). The template closes the request pipe without writing to retire a spare.
    Once the result is written a byte on ``done_fd`` says so: the template can report
    before this process's address space is torn down (a millisecond for a numpy one).
    """
    try:
        os.setsid()
        enter_case_process(parent_pid)
        redirect_stdio(stderr_fd)
        arm_faulthandler()
        set_process_name("nebisect-spare")
        message = _read_to_eof(request_fd)
    except BaseException:
        os._exit(EXIT_SETUP_FAILED)
    if not message:
        os._exit(0)
    set_process_name("nebisect-case")
    document = json.loads(message)
    code = run_job(document["request"], Path(document["case_dir"]))
    if code is None:
        _flush_stdio()
        os.write(done_fd, b"\n")
    leave(code or 0)


def _read_to_eof(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def run_and_exit(request: dict[str, Any], case_dir: Path) -> NoReturn:
    """Run the job in a process that exists only for it, then leave."""
    leave(run_job(request, case_dir) or 0)


def run_job(request: dict[str, Any], case_dir: Path) -> int | None:
    """Run the job; None when it reached a verdict, else the code the process must exit with.

    ``sys.exit(n)`` inside the job exits with ``n`` (no result → an ``error`` verdict),
    exactly as it would in a fresh interpreter, in every isolation mode.
    """
    try:
        execute(request, case_dir)
    except SystemExit as exc:
        return _exit_code(exc)
    except BaseException:
        traceback.print_exc()
        return 1
    return None


def leave(code: int) -> NoReturn:
    """Exit without running the host's atexit handlers or finalizers (fork-safe)."""
    _flush_stdio()
    os._exit(code)


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def execute(request: dict[str, Any], case_dir: Path) -> None:
    """Call the job's function and write its verdict; the function's faults included.

    Raises only SystemExit (the job asked to exit) and what cannot be caught: signals
    (reported by the faulthandler each kind of case process arms at set-up).
    """
    job = Job.from_dict(request["job"])
    sys.path[:] = request["sys_path"]
    bind_stage_file(case_dir / CaseFiles.STAGE, job.stage)
    private_temp(case_dir / CaseFiles.TEMP)
    reuse_freed_memory()
    started = time.perf_counter()
    try:
        function = _resolve(job.function)
        with limited(job.memory_mb), sharing(job.threads):
            returned = function(arguments_for(function, job.payload))
        verdict, arrays = _unpack(job.function, returned)
    except Exception as exc:
        verdict, arrays = exception_verdict(exc), {}
    verdict.timings.call = time.perf_counter() - started
    try:
        write_result(case_dir, verdict, arrays)
    except (TypeError, ValueError) as exc:
        write_result(case_dir, exception_verdict(exc), {})


def private_temp(path: Path) -> None:
    """Send everything the job writes "to temp" into its case directory.

    A case process ends with ``os._exit`` (or a crash), so no library gets to clean up
    its temp files — coremltools leaves two to six ``tmp*.mlpackage`` directories per
    conversion. The case directory is removed by the parent whatever happens. Both
    Python's cached ``tempfile.tempdir`` (a fork template may have filled it in before
    forking) and ``TMPDIR`` (for the job's own subprocesses) point there.
    """
    path.mkdir(exist_ok=True)
    tempfile.tempdir = str(path)
    os.environ["TMPDIR"] = str(path)


def exception_verdict(exc: BaseException) -> Verdict:
    """``oom`` for allocation failures, else ``error`` with a normalized signature.

    The traceback goes to stderr, where it ends up in the verdict's stderr tail.
    """
    stage = current_stage()
    message = f"{type(exc).__name__}: {exc}"
    traceback.print_exception(exc)
    if is_out_of_memory(exc):
        return Verdict(Status.OOM, stage, "oom", message=message)
    return Verdict(Status.ERROR, stage, error_signature(stage, message), message=message)


def write_result(case_dir: Path, verdict: Verdict, arrays: dict[str, np.ndarray]) -> None:
    """Arrays first, then the result JSON by atomic rename: its presence means done."""
    document = f'{{"arrays": {json.dumps(sorted(arrays))}, "verdict": {verdict.to_json()}}}'
    if arrays:
        save_npz(case_dir / CaseFiles.ARRAYS, arrays)
    write_text(case_dir / CaseFiles.RESULT, document)


def _resolve(function: str) -> Callable[[Any], Any]:
    module, _, name = function.partition(":")
    target = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{function} is not callable")
    return target  # type: ignore[no-any-return]


def _unpack(function: str, returned: Any) -> tuple[Verdict, dict[str, np.ndarray]]:
    """Check the function kept its contract: a Verdict, maybe with plain numeric arrays."""
    if isinstance(returned, Verdict):
        return returned, {}
    if (
        isinstance(returned, tuple) and len(returned) == 2
        and isinstance(returned[0], Verdict) and isinstance(returned[1], dict)
    ):
        arrays = {str(name): np.asarray(value) for name, value in returned[1].items()}
        for name, array in arrays.items():
            if array.dtype.hasobject:
                raise TypeError(
                    f"{function} returned array {name!r} of dtype object; only plain "
                    "numeric arrays cross the process boundary"
                )
        return returned[0], arrays
    raise TypeError(
        f"{function} returned {type(returned).__name__}, expected Verdict or "
        "(Verdict, dict of arrays)"
    )


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def main() -> NoReturn:
    case_dir = Path(sys.argv[1])
    request = json.loads((case_dir / CaseFiles.REQUEST).read_text())
    enter_case_process(int(request["parent"]))
    arm_faulthandler()
    run_and_exit(request, case_dir)


if __name__ == "__main__":
    main()
