"""nebisect's Python API: the commands as functions, for notebooks and scripts.

``nebisect.run`` is what ``nebisect run`` does — the CLI is a thin layer over it (it
parses the same options, calls this, prints the result) — so a notebook and a terminal
get the same findings and the same JSON. Keyword arguments are named like the CLI's
options (``target``, ``lengths``, ``budget``, ``input_range``, …) and take either the
CLI's text (``lengths="1,8"``) or Python values (``lengths=[1, 8]``). A bad argument
raises :class:`~nebisect.errors.NebisectError` with the CLI's one-line message; nothing
here raises ``SystemExit``.

**A crash is a verdict.** Every prediction and conversion runs in an isolated child, and
a model that lives in the caller's process is exported or traced in a fork of it
(:mod:`nebisect.sources.capture`): a SIGSEGV in Core ML, in a converter or in the
module's own ``forward`` is a ``crash:SIGSEGV`` row of the result, and the notebook
kernel lives on.

The source may be what the CLI takes (a path: ``.mlpackage``, ``file.py:factory``,
``.pt2``, TorchScript) or an object: an ``nn.Module`` (with ``example_inputs``, and
optionally ``dynamic_dims``, ``input_domains``, ``masked_outputs`` as a factory declares
them), a ``torch.export.ExportedProgram``, a TorchScript module or a coremltools
``MLModel``. An object is saved first — into ``report`` when given (so the report's
commands can be run later), else into a temporary directory removed after the run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.errors import NebisectError

if TYPE_CHECKING:
    from nebisect.detect.causes import RunFinding
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.run import RunOptions
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.sources.capture import Capture

#: what ``lengths``, ``target`` and the other list-valued arguments accept
Many = str | Sequence[Any] | None


@dataclass
class RunResult:
    """What ``run`` found: the report (its rows, findings, explorations) and the index
    of the triggers saved for it (``report`` / ``save_triggers``; None: not saved).

    ``ok`` is the CLI's exit code 0; ``to_json()`` is ``run --json``; in a notebook the
    result shows as the findings and the matrix (``_repr_html_``)."""

    report: RunReport
    triggers: TriggerIndex | None = None

    @property
    def ok(self) -> bool:
        """No failure was found (``nebisect run`` exits 0)."""
        return not self.report.failed

    @property
    def findings(self) -> list[RunFinding]:
        """One per root cause, most severe first."""
        return self.report.findings

    def to_json(self) -> str:
        """The report as ``nebisect run --json`` prints it."""
        return json.dumps(self.report.to_dict(), indent=2, default=str)

    def _repr_html_(self) -> str:
        from nebisect.detect.report import run_payload
        from nebisect.report.html import render_fragment

        return render_fragment(run_payload(self.report, self.triggers))

    def __repr__(self) -> str:
        """The findings as the terminal shows them, without the colours."""
        from rich.text import Text

        from nebisect.detect.summary import finding_lines

        head = (f"RunResult({self.report.source}: {'ok' if self.ok else 'failed'}, "
                f"{len(self.findings)} finding(s))")
        return "\n".join([head, *(Text.from_markup(line).plain for finding in self.findings
                                  for line in finding_lines(finding))])


class RunStopped(KeyboardInterrupt):
    """The run was interrupted (Ctrl-C, a kernel interrupt, SIGTERM): ``result`` holds
    the rows evaluated until then, and its outputs were written."""

    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result


def run(
    source: Any,
    *,
    example_inputs: Any = None,
    dynamic_dims: dict[str, dict[int, tuple[int, int]]] | None = None,
    input_domains: dict[str, Any] | None = None,
    masked_outputs: dict[str, str] | None = None,
    target: Many = None,
    inputs: str | os.PathLike[str] | None = None,
    lengths: Many = None,
    reference: str = "",
    timeout: Many = None,
    memory: str | None = None,
    converter_overrides: bool = False,
    deployment_target: str = "",
    plugin: Many = None,
    explore: str = "auto",
    budget: int | str | None = None,
    families: Many = None,
    seed: int = 0,
    input_range: Many = None,
    convert: str = "both",
    jobs: int | None = None,
    report: str | os.PathLike[str] | None = None,
    save_triggers: str | os.PathLike[str] | None = None,
    cluster: str | None = None,
    require: Many = None,
    progress: bool | Callable[[str], None] = True,
) -> RunResult:
    """``nebisect run`` (see ``nebisect run --help``) on ``source``; the options are the
    CLI's. ``progress``: True shows it (a line in a notebook, a live status in a
    terminal, plain lines in a log), False hides it, a callable receives each message.
    """
    from nebisect.detect.run import RunInterrupted, RunOutputs
    from nebisect.detect.run import run as run_source

    given: dict[str, Any] = dict(target=target, inputs=inputs, lengths=lengths, reference=reference,
                 timeout=timeout, memory=memory, converter_overrides=converter_overrides,
                 deployment_target=deployment_target, plugin=plugin, explore=explore,
                 budget=budget, families=families, seed=seed, input_range=input_range,
                 convert=convert, jobs=jobs, cluster=cluster, require=require)
    declared = {"dynamic_dims": dynamic_dims, "input_domains": input_domains,
                "masked_outputs": masked_outputs}
    report_dir = Path(report) if report is not None else None
    with tempfile.TemporaryDirectory(prefix="nebisect-run-") as tmp:
        workdir = Path(tmp)
        saved, capture = _saved_source(source, example_inputs, declared,
                                       report_dir or workdir / "source", given)
        options = run_options(saved, **given)
        outputs = RunOutputs(report_dir, Path(save_triggers) if save_triggers else None,
                             saved, options.fixes)
        check_outputs(outputs, options.inputs)
        if capture is not None and capture.artifact is None:
            return RunResult(_capture_report(saved, capture, options.targets))
        with _progress(progress) as told:
            try:
                outcome = run_source(options, workdir, told)
            except RunInterrupted as stop:
                _add_capture_failures(stop.outcome.report, capture)
                raise RunStopped(RunResult(stop.outcome.report,
                                           outputs.write(stop.outcome))) from stop
        _add_capture_failures(outcome.report, capture)
        return RunResult(outcome.report, outputs.write(outcome))


def save_torchscript(module: Any, example_inputs: Any, path: str | os.PathLike[str], *,
                     dynamic_dims: dict[str, dict[int, tuple[int, int]]] | None = None,
                     input_domains: dict[str, Any] | None = None) -> Path:
    """Save a TorchScript module (``torch.jit.trace`` / ``script``) with the example
    inputs ``nebisect run model.pt`` needs (TorchScript keeps none of its own)."""
    declared = {"dynamic_dims": dynamic_dims, "input_domains": input_domains}
    return _saved_script(module, example_inputs, declared, Path(path), str(path))


def run_options(source: str, *, target: Many = None, inputs: Any = None, lengths: Many = None,
                reference: str = "", timeout: Many = None, memory: str | None = None,
                converter_overrides: bool = False, deployment_target: str = "",
                plugin: Many = None, explore: str = "auto", budget: int | str | None = None,
                families: Many = None, seed: int = 0, input_range: Many = None,
                convert: str = "both", jobs: int | None = None, cluster: str | None = None,
                require: Many = None) -> RunOptions:
    """The CLI's checks of ``run``'s options, each error the CLI's one line; the checked
    :class:`~nebisect.detect.run.RunOptions`."""
    from nebisect.bounds import MAX_JOBS, check_count, check_seed
    from nebisect.detect import DEFAULT_BUDGET
    from nebisect.detect.run import RunOptions
    from nebisect.isolation.pool import default_jobs
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options import (
        CONVERT_CHOICES,
        parse_budget,
        parse_choice,
        parse_families,
        parse_input_ranges,
        use_memory,
    )
    from nebisect.sources.deployment import check_deployment
    from nebisect.sources.inputs import DEFAULT_LENGTHS

    if not source:
        raise NebisectError("give a SOURCE (an .mlpackage or path/to/file.py:factory)")
    timeouts = Timeouts.parse(_items(timeout))
    use_memory(memory)
    check_deployment(deployment_target)
    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    check_seed(f"--seed {seed}", seed)
    explores = parse_choice("--explore", explore, EXPLORE_CHOICES) != "none"
    return RunOptions(
        source, tuple(_items(target) or default_targets()), reference,
        Path(inputs) if inputs else None, timeouts=timeouts, paths=paths,
        converter_overrides=converter_overrides, deployment_target=deployment_target,
        plugins=tuple(_items(plugin)), explore=explores,
        budget=parse_budget(str(DEFAULT_BUDGET if budget is None else budget))
        if explores else DEFAULT_BUDGET,
        families=parse_families(",".join(_items(families))) if explores else None,
        seed=seed,
        lengths=parse_lengths(DEFAULT_LENGTHS if lengths is None else lengths),
        input_ranges=parse_input_ranges(_items(input_range)),
        jobs=default_jobs() if jobs is None else check_count(f"--jobs {jobs}", jobs, MAX_JOBS),
        cluster=cluster, require=tuple(dict.fromkeys(
            parse_choice("--require", device, REQUIRE_CHOICES)
            for device in _items(require))))


EXPLORE_CHOICES = ("auto", "none")
#: the devices ``--require`` makes placement fail closed on
REQUIRE_CHOICES = ("ne", "gpu")


def default_targets() -> list[str]:
    """Real Core ML compute units on macOS; the simulator's fp32/fp16/ANE models elsewhere."""
    import platform

    if platform.system() == "Darwin":
        return ["coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all"]
    return ["sim:fp32", "sim:fp16", "sim:ane"]


def parse_lengths(given: str | Sequence[Any]) -> tuple[int, ...]:
    """``--lengths``: comma-separated integers (or a sequence of them), each a count."""
    from nebisect.bounds import check_count

    text = given if isinstance(given, str) else ",".join(str(v) for v in given)
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise NebisectError(f"--lengths {text!r}: give comma-separated integers") from None
    if not values:
        raise NebisectError(f"--lengths {text!r}: give at least one length")
    return tuple(check_count(f"--lengths {value}", value) for value in values)


def check_outputs(outputs: Any, inputs: Path | None) -> None:
    """``report`` and ``save_triggers`` are directories apart from what the run reads."""
    from nebisect.options import source_path
    from nebisect.report.outputs import apart_from_inputs, output_directory

    for directory, option in ((outputs.report, "--report"), (outputs.triggers, "--save-triggers")):
        if directory:
            apart_from_inputs(directory, option, [
                ("the source", source_path(outputs.source)),
                *([("--inputs", inputs)] if inputs else [])])
            output_directory(directory, option)


def _items(given: Many) -> list[str]:
    """A list-valued option as the CLI's list of strings (one string is one item)."""
    if given is None:
        return []
    return [given] if isinstance(given, str) else [str(item) for item in given]


def _saved_source(source: Any, example_inputs: Any, declared: dict[str, Any],
                  directory: Path, given: dict[str, Any]) -> tuple[str, Capture | None]:
    """The source as the CLI names it: a path as it is; an object saved into
    ``directory`` (a module by :func:`~nebisect.sources.capture.capture_module`, whose
    outcome comes back too)."""
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
    if torch is None:
        raise NebisectError(f"{type(source).__name__}: not a source (give a path, an "
                            "nn.Module, an ExportedProgram or an MLModel)")
    if isinstance(source, torch.export.ExportedProgram):
        program = directory / "program.pt2"
        torch.export.save(source, str(program))
        return str(program), None
    if isinstance(source, torch.jit.ScriptModule):
        return str(_saved_script(source, example_inputs, declared, directory / "module.pt",
                                 label)), None
    if not isinstance(source, torch.nn.Module):
        raise NebisectError(f"{type(source).__name__}: not a source (give a path, an "
                            "nn.Module, an ExportedProgram or an MLModel)")
    if example_inputs is None:
        raise NebisectError(f"{label}: give example_inputs (a tuple or a dict of tensors)")
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.sources.capture import capture_module

    timeouts = Timeouts.parse(_items(given["timeout"]))
    captured = capture_module(source, example_inputs, declared, directory, label=label,
                              timeout=timeouts.convert)
    location = captured.artifact or directory / "module.pt2"
    return str(location), captured


def _saved_script(module: Any, example_inputs: Any, declared: dict[str, Any],
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


def _capture_report(location: str, capture: Capture, targets: Sequence[str]) -> RunReport:
    """The report of a module no path could save: each path's failure on every target,
    grouped and ranked as a run's are (the reference cannot run either)."""
    from nebisect.case import TORCH_REFERENCE
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.run import EXACT_ROW

    report = RunReport(location, TORCH_REFERENCE)
    _add_capture_failures(report, capture, [EXACT_ROW, *targets])
    return report


def _add_capture_failures(report: RunReport, capture: Capture | None,
                          targets: Sequence[str] = ()) -> None:
    """Rows for the paths that could not save the module (every target fails there at
    conversion), the groups and findings made again with them."""
    if capture is None or not capture.failures:
        return
    from nebisect.detect.findings import Row

    named = list(dict.fromkeys([*targets, *(r.target for r in report.rows
                                             if r.role == "target")]))
    for path, verdict in capture.failures.items():
        report.rows += [Row(name, 0, verdict, attribution="conversion", path=path)
                        for name in named]
    report.regroup()


@contextmanager
def _progress(given: bool | Callable[[str], None]) -> Iterator[Callable[[str], None]]:
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
