"""A module that lives in the caller's process, saved as a torch program nebisect runs.

A notebook's model is an object, often of a class defined in ``__main__``: no other
process can import it, and nebisect's children never run the caller's classes. So the
module is saved where it lives, on both conversion paths — ``torch.jit.trace`` to
TorchScript, ``torch.export.export`` to a ``.pt2`` that names the TorchScript beside it —
and the children load the saved programs (:mod:`nebisect.sources.torch_saved`) for
conversion and as the reference.

Exporting or tracing runs ``forward`` (tracing on the real example inputs), and a
``forward`` can crash the process: a C extension, a ``ctypes`` call, a torch bug. So
each capture runs in a **fork of the caller**, bounded as every isolated step of
nebisect is (:func:`_in_fork`):

* the fork has the module and its classes, and when it dies the caller — a notebook
  kernel — lives on, with the death as the verdict of that path (``crash:SIGSEGV`` at
  stage ``convert``), as converting a factory's module in a child gives;
* it may add ``--memory`` to what it holds when it starts (``RLIMIT_DATA``, as a case
  process: :func:`~nebisect.isolation.memory.confine`); an allocation past it is ``oom``;
* past the convert timeout it is killed: ``timeout``;
* what ``forward`` starts dies with the capture, also a process that left its group
  with ``setsid()``: the fork runs under a **supervisor**, a second fork of the caller in
  a session of its own that runs no code of the caller's, is a child subreaper (Linux),
  and kills and reaps every process left under it when the capture ends. Stopped from
  the caller (timeout, Ctrl-C, SIGTERM), every live process under the supervisor is
  killed before it (:func:`~nebisect.isolation.reaper.kill_descendants`), and the
  interruption is raised on; the caller is not made a subreaper for it.

Torch is held to one thread in the fork: an intra-op pool started before the fork is
not usable in it.

Both paths are tried and every failure recorded (:class:`Capture`); a bad
declaration (example inputs that are not ``forward``'s parameters, a dynamic range the
example lies outside) is the caller's error, raised as the factory's would be.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from nebisect.errors import NebisectError
from nebisect.files import read_json
from nebisect.isolation.collect import name_memory_limit, signal_name
from nebisect.isolation.job import is_out_of_memory
from nebisect.isolation.memory import confine, limit_mb
from nebisect.isolation.osproc import kill_group, reap, set_pdeathsig
from nebisect.isolation.reaper import PATIENCE, become_subreaper, kill_descendants, reap_strays
from nebisect.sources.convert import (
    PATH_LABELS,
    ConversionAttempt,
    converter_message,
    convertible,
    summarize,
)
from nebisect.sources.frontend import torch_step
from nebisect.sources.torch_module import (
    TorchSource,
    export_module,
    first_line,
    named_inputs,
    validated,
)
from nebisect.sources.torch_saved import save_exported, save_scripted
from nebisect.verdict import Stage, Status, Verdict, crash_signature, error_signature

#: the files capture saves: the exported program and the traced one
EXPORTED_FILE, TRACED = "module.pt2", "module.pt"
#: how often the caller looks whether the fork has finished
POLL_SECONDS = 0.02
#: the exit code of a supervisor or fork that could not run the capture
EXIT_UNSUPERVISED = 70
#: a supervisor's exit code above this is 128 + the signal that ended the fork it
#: watched (or the supervisor)
EXIT_SIGNALLED = 128


@dataclass
class Capture:
    """The saved program (None when no path saved one) and each failed path's verdict."""

    artifact: Path | None
    failures: dict[str, Verdict] = field(default_factory=dict)


def capture_module(module: Any, example_inputs: Any, declared: dict[str, Any],
                   directory: Path, *, label: str, timeout: float,
                   memory: int | None = None) -> Capture:
    """Save ``module`` into ``directory`` on both paths; ``declared`` holds what a
    factory would declare (``dynamic_dims``, ``input_domains``, ``masked_outputs``),
    ``label`` names the module in errors; each path's fork within ``timeout`` seconds
    and ``memory`` bytes (None: the machine default).

    ``jit.trace`` runs first and saves TorchScript; ``torch.export`` then saves the
    ``.pt2``, naming the TorchScript as its trace-path program
    (:mod:`nebisect.sources.torch_saved`). The artifact is the ``.pt2`` when export
    saved one, else the TorchScript alone (then only the trace path runs)."""
    import torch

    failures: dict[str, Verdict] = {}
    traced, exported = directory / TRACED, directory / EXPORTED_FILE

    def trace() -> None:
        source = _source(module, example_inputs, declared, label)
        wrapper = convertible(source)
        with torch_step("trace"):
            scripted = torch.jit.trace(wrapper, tuple(source.example_inputs.values()))
        save_scripted(scripted, source, traced)

    def export() -> None:
        source = _source(module, example_inputs, declared, label)
        with torch_step("export"):
            program = export_module(source, source.module)
        save_exported(program, source, exported, traced=traced.name if traced.is_file() else "")

    for path, work, saved in (("trace", trace, traced), ("export", export, exported)):
        verdict = _in_fork(work, directory / f"{path}.log", path, timeout,
                           limit_mb(memory))
        if verdict is not None or not saved.is_file():
            failures[path] = verdict or _failed(path, "saved no program")
    artifact = exported if exported.is_file() else traced if traced.is_file() else None
    return Capture(artifact, failures)


def _source(module: Any, example_inputs: Any, declared: dict[str, Any],
            label: str) -> TorchSource:
    """The validated torch source of the caller's module (in the fork: ``eval()`` and
    the checks touch only the fork's copy)."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise NebisectError(f"{label}: not a torch.nn.Module")
    module.eval()
    return validated(label, module, named_inputs(label, module, example_inputs), declared)


def _in_fork(work: Callable[[], None], log: Path, path: str, timeout: float,
             memory_mb: int) -> Verdict | None:
    """Run ``work`` in a fork of this process under a supervisor (the module's
    docstring), adding at most ``memory_mb`` MiB: None when it returned; the verdict of
    its failure otherwise. A :class:`NebisectError` it raises is raised here."""
    result = log.with_suffix(".json")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the supervisor's side; its outcome is read below
        _supervise(work, log, result, memory_mb)
    try:
        code = _exit_code(pid, time.monotonic() + timeout)
    except BaseException:
        _end(pid)
        raise
    if code is None:
        _end(pid)
        return Verdict(Status.TIMEOUT, Stage.CONVERT, "timeout",
                       message=f"{PATH_LABELS[path]} of the module did not finish within "
                       f"{timeout:g} s; the fork was killed")
    if code > EXIT_SIGNALLED:
        name = signal_name(code - EXIT_SIGNALLED)
        return Verdict(Status.CRASH, Stage.CONVERT, crash_signature(name),
                       message=f"killed by {name} while {_doing(path)} the module"
                       f"{_innermost_frame(log)} (in a fork of this process, which lives on)")
    try:
        outcome = read_json(result)
    except NebisectError:
        return _failed(path, f"exited with status {code} without a result")
    if not isinstance(outcome, dict):
        return _failed(path, f"exited with status {code} without a result")
    if outcome.get("user_error"):
        raise NebisectError(outcome["message"])
    if outcome.get("oom"):
        verdict = Verdict(Status.OOM, Stage.CONVERT, "oom",
                          message=f"{outcome['message']} while {_doing(path)} the module")
        name_memory_limit(verdict, memory_mb)
        return verdict
    return None if outcome.get("ok") else _failed(path, outcome["message"])


def _exit_code(pid: int, deadline: float) -> int | None:
    """The exit code of the supervisor ``pid`` (a signal that killed it: 128 + its
    number, as the fork's), or None past ``deadline``, the supervisor running."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return EXIT_SIGNALLED - code if code < 0 else code
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_SECONDS)


def _end(pid: int) -> None:
    """Stop the capture under the supervisor ``pid``: every live process under it
    killed, then the supervisor, reaped (it reaps what it adopted when it can)."""
    kill_descendants(pid)
    if _exit_code(pid, time.monotonic() + PATIENCE) is None:
        kill_group(pid)
        reap(pid)


def _supervise(work: Callable[[], None], log: Path, result: Path,
               memory_mb: int) -> NoReturn:
    """The supervisor: a session of its own, dies with the caller, adopts orphans;
    forks the capture, waits for it, kills and reaps whatever is left under it, and
    exits with the capture's code (128 + the signal that killed it)."""
    code = EXIT_UNSUPERVISED
    try:
        os.setsid()
        set_pdeathsig()
        become_subreaper()
        fork = os.fork()
        if fork == 0:
            _fork_side(work, log, result, memory_mb)
        status = reap(fork)
        reap_strays()
        code = EXIT_SIGNALLED - status if status < 0 else min(status, EXIT_SIGNALLED - 1)
    except BaseException:
        pass
    os._exit(code)


def _fork_side(work: Callable[[], None], log: Path, result: Path, memory_mb: int) -> NoReturn:
    """The fork: quiet, one torch thread, dies with the supervisor, adds at most
    ``memory_mb`` MiB to its data; writes its outcome and leaves by ``os._exit`` (never
    the caller's exit handlers or buffered output)."""
    code = 0
    try:
        set_pdeathsig()
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(descriptor, 1)
        os.dup2(descriptor, 2)
        # a crash's Python stack goes to the log (the caller's faulthandler, if any,
        # writes to the caller's stderr)
        faulthandler.enable(file=descriptor)
        import torch

        torch.set_num_threads(1)
        confine(memory_mb)
        try:
            work()
            outcome: dict[str, Any] = {"ok": True}
        except NebisectError as exc:
            outcome = {"user_error": True, "message": str(exc)}
        except Exception as exc:
            traceback.print_exc()
            outcome = ({"oom": True, "message": f"{type(exc).__name__}: {first_line(exc)}"}
                       if is_out_of_memory(exc) else {"message": converter_message(exc)})
        result.write_text(json.dumps(outcome))
    except BaseException:
        code = EXIT_UNSUPERVISED
    os._exit(code)


#: a frame of faulthandler's dump: ``  File "/x/model.py", line 12 in forward``
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)', re.M)


def _innermost_frame(log: Path) -> str:
    """`` at model.py:12 in forward``: where the caller's own code was when the fork
    crashed — the innermost frame of faulthandler's dump in the fork's log outside the
    installed libraries (torch, ctypes); "" when there is none."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    installed = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    for frame in FRAME.finditer(text):
        file = frame["file"]
        if not file.startswith(installed) and "site-packages" not in file:
            return f" at {Path(file).name}:{frame['line']} in {frame['name']}"
    return ""


def _doing(path: str) -> str:
    return "exporting (torch.export)" if path == "export" else "tracing (jit.trace)"


def _failed(path: str, message: str) -> Verdict:
    """An ``error`` at stage ``convert``: the path's converter message, as converting a
    factory's module on that path would give it."""
    text = summarize([ConversionAttempt(path, "failed", message)])
    return Verdict(Status.ERROR, Stage.CONVERT, error_signature(Stage.CONVERT, text),
                   message=text)
