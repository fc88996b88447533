"""What the API's functions share: list-valued options, sources that are objects,
progress, and the result protocol (``ok``, ``findings``, ``to_json()``,
``_repr_html_``)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from nebisect.errors import ArgumentError, NebisectError
from nebisect.options.generate import Function
from nebisect.options.table import Many

if TYPE_CHECKING:
    from nebisect.sources.capture import Capture

#: what ``progress`` accepts: shown (True), hidden (False), or a callable of messages
Progress = bool | Callable[[str], None]


class Result:
    """The protocol of every API result: ``ok`` is the command's exit code 0,
    ``findings`` what it found, ``to_json()`` its ``--json``, ``_repr_html_`` what a
    notebook shows."""

    @property
    def ok(self) -> bool:
        raise NotImplementedError

    @property
    def findings(self) -> list[Any]:
        raise NotImplementedError

    @property
    def interrupted(self) -> str:
        """What stopped the command before it finished ("interrupted by SIGTERM"); ""
        when it finished."""
        return ""

    def to_json(self) -> str:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        raise NotImplementedError


class Stopped(KeyboardInterrupt):
    """A command was interrupted (Ctrl-C, a kernel interrupt, SIGTERM): ``result`` holds
    what it did until then, and its outputs were written."""

    def __init__(self, result: Result) -> None:
        super().__init__()
        self.result = result


@contextmanager
def stopped_with(result: Callable[[str], Result]) -> Iterator[None]:
    """An interruption of the block (Ctrl-C, or SIGTERM and SIGHUP under
    :func:`stoppable`) that is not :class:`Stopped` already becomes one holding
    ``result(why)``: the command's own result, saying what stopped it. For a step that
    keeps no partial work (capturing a module, converting, a lint), that result holds
    nothing found. The block's temporary directories and processes are gone by then."""
    try:
        yield
    except Stopped:
        raise
    except KeyboardInterrupt as stop:
        from nebisect.isolation.interrupt import describe

        raise Stopped(result(describe(stop))) from stop


def source_label(source: Any) -> str:
    """How a result names ``source``: a path as given, an object by its type."""
    return (os.fspath(source) if isinstance(source, (str, os.PathLike))
            else f"the {type(source).__name__} module")


def stoppable(function: Function) -> Function:
    """An API function that SIGTERM and SIGHUP stop as Ctrl-C does, when the caller left
    them at their default (:func:`~nebisect.isolation.interrupt.terminations_interrupt`):
    its temporary directories and processes are cleaned up before the interruption
    reaches the caller; the signals' default is restored when it returns."""
    @functools.wraps(function)
    def stopped_cleanly(*args: Any, **kwargs: Any) -> Any:
        from nebisect.isolation.interrupt import terminations_interrupt

        with terminations_interrupt():
            return function(*args, **kwargs)

    return cast(Function, stopped_cleanly)


def items(given: Many) -> list[str]:
    """A list-valued option as the CLI's list of strings (one string is one item)."""
    if given is None:
        return []
    return [given] if isinstance(given, str) else [str(item) for item in given]


def saved_source(source: Any, example_inputs: Any, declared: dict[str, Any],
                 directory: Path, *, timeout: float, memory: int | None
                 ) -> tuple[str, Capture | None]:
    """The source as the CLI names it: a path as it is; an object saved into
    ``directory`` (a module by :func:`~nebisect.sources.capture.capture_module`, each of
    its forks within ``timeout`` seconds and ``memory`` bytes — None: the machine
    default —, whose outcome comes back too)."""
    if isinstance(source, (str, os.PathLike)):
        if example_inputs is not None or any(v is not None for v in declared.values()):
            raise NebisectError("example_inputs, dynamic_dims, input_domains and "
                                "masked_outputs describe a module object; a saved source "
                                "declares its own")
        return os.fspath(source), None
    directory.mkdir(parents=True, exist_ok=True)
    label = f"the {type(source).__name__} module"
    torch = sys.modules.get("torch")
    coremltools = sys.modules.get("coremltools")
    if coremltools is not None and isinstance(source, coremltools.models.MLModel):
        package = directory / "model.mlpackage"
        source.save(str(package))
        return str(package), None
    if torch is None or not isinstance(source, (torch.export.ExportedProgram,
                                                 torch.nn.Module)):
        raise NebisectError(f"{type(source).__name__}: not a source (give a path, an "
                            "nn.Module, an ExportedProgram or an MLModel)")
    if isinstance(source, torch.export.ExportedProgram):
        program = directory / "program.pt2"
        torch.export.save(source, str(program))
        return str(program), None
    if isinstance(source, torch.jit.ScriptModule):
        return str(saved_script(source, example_inputs, declared, directory / "module.pt",
                                 label)), None
    if example_inputs is None:
        raise NebisectError(f"{label}: give example_inputs (a tuple or a dict of tensors)")
    from nebisect.sources.capture import capture_module

    captured = capture_module(source, example_inputs, declared, directory, label=label,
                              timeout=timeout, memory=memory)
    # a module no path saved is named as the caller knows it (the report's source)
    return str(captured.artifact or label), captured


def saved_script(module: Any, example_inputs: Any, declared: dict[str, Any],
                  destination: Path, label: str) -> Path:
    """A TorchScript module saved with its example inputs (no code of the caller's runs:
    a ScriptModule is already a program)."""
    from nebisect.sources.torch_module import validated
    from nebisect.sources.torch_saved import save_scripted

    if example_inputs is None:
        raise NebisectError(f"{label}: give example_inputs (a tuple or a dict of tensors)")
    names = [argument.name for argument in module.forward.schema.arguments[1:]]
    given = (example_inputs if isinstance(example_inputs, dict)
             else dict(zip(names, example_inputs, strict=False)))
    save_scripted(module, validated(label, module, given, declared), destination)
    return destination


def save_torchscript(module: Any, example_inputs: Any, path: str | os.PathLike[str], *,
                     dynamic_dims: dict[str, dict[int, tuple[int, int]]] | None = None,
                     input_domains: dict[str, Any] | None = None) -> Path:
    """Save a TorchScript module (``torch.jit.trace`` / ``script``) with the example
    inputs ``nebisect run model.pt`` needs (TorchScript keeps none of its own), to
    ``path``, a file in an existing directory. A module that is not TorchScript is an
    :class:`~nebisect.errors.ArgumentError` (``nebisect.run`` takes the module itself)."""
    from nebisect.report.outputs import output_file

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(module, torch.jit.ScriptModule):
        raise ArgumentError("module", f"{type(module).__name__}: not TorchScript; give "
                            "torch.jit.trace(module, example_inputs) or "
                            "torch.jit.script(module), or the module itself to nebisect.run")
    destination = output_file(path, "path", force=True, create=False)
    declared = declared_of(dynamic_dims, input_domains)
    return saved_script(module, example_inputs, declared, destination, str(path))


def saved_path(source: Any, example_inputs: Any, declared: dict[str, Any],
               directory: Path, *, timeout: float, memory: int | None) -> str:
    """:func:`saved_source` for a command that needs a program to work on (lint,
    bisect): a module no path could save is a one-line error naming why."""
    location, capture = saved_source(source, example_inputs, declared, directory,
                                     timeout=timeout, memory=memory)
    if capture is not None and capture.artifact is None:
        reasons = "; ".join(v.message for v in capture.failures.values())
        raise NebisectError(f"the module could not be exported or traced: {reasons}")
    return location


def declared_of(dynamic_dims: Any = None, input_domains: Any = None,
                masked_outputs: Any = None) -> dict[str, Any]:
    """What a module object's caller declares about it, as a factory would."""
    return {"dynamic_dims": dynamic_dims, "input_domains": input_domains,
            "masked_outputs": masked_outputs}


@contextmanager
def progress_to(given: Progress) -> Iterator[Callable[[str], None]]:
    """The progress callable ``given`` asks for (see :func:`run`)."""
    if callable(given):
        yield given
        return
    if not given:
        yield lambda _message: None
        return
    from nebisect.report.progress import NotebookProgress, in_notebook, progress_line

    if in_notebook():
        with NotebookProgress.shown("running") as shown:
            yield shown
        return
    from rich.console import Console

    with progress_line(Console(stderr=True), "running") as line:
        yield line
