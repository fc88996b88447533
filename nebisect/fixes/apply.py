"""Apply fixes to a source: convert (with converter fixes), then run the graph passes.

Both steps run in isolated children — a converter or the package loader may crash, and
that must be a verdict, not a dead ``nebisect``. The result is a real ``.mlpackage``
(saved with :func:`nebisect.mil.load.save_program`), so ``fix verify`` evaluates exactly
the artifact ``fix apply`` would hand to a user.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nebisect.case import SourceRef
from nebisect.codec import encode
from nebisect.errors import NebisectError
from nebisect.fixes import resolve_fixes
from nebisect.fixes.base import ConverterFix, Fix, GraphFix
from nebisect.isolate import Isolator, Job, mark_stage
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS, Timeouts
from nebisect.targets.registry import get_target
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import Stage, Status, Verdict


@dataclass
class FixedSource:
    """What applying fixes to one source produced.

    ``converted`` is the package before the graph passes (the source itself for an
    ``.mlpackage``), ``package`` the one to evaluate (``converted`` when no pass
    matched); both are None when a step failed, and ``verdict`` says how.
    """

    verdict: Verdict
    converted: Path | None = None
    package: Path | None = None
    rewrites: dict[str, int] = field(default_factory=dict)
    converter_fixes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when some fix touched the program (or its conversion)."""
        return bool(self.converter_fixes) or any(self.rewrites.values())


def split_levels(fixes: Sequence[Fix]) -> tuple[list[GraphFix], list[ConverterFix]]:
    graph = [f for f in fixes if isinstance(f, GraphFix)]
    convert = [f for f in fixes if isinstance(f, ConverterFix)]
    return graph, convert


def apply_graph_fixes(program: Any, fixes: Sequence[GraphFix]) -> dict[str, int]:
    """Run each graph pass over ``program`` in place; rewrites per fix name."""
    return {fix.name: fix.apply(program) for fix in fixes}


@dataclass(frozen=True)
class FixArguments:
    """The arguments of :func:`fix_job`: the package, the graph fixes to apply (by name),
    the modules that register them, and where the fixed package is saved."""

    package: str
    fixes: list[str]
    modules: list[str]
    output: str


def fix_job(arguments: FixArguments) -> Verdict:
    """Child side: load ``package``, apply ``fixes``, save ``output`` if anything changed.

    ``modules`` names the modules that register the fixes, imported first, so fixes
    from plugins (registered by import, like targets) exist in the child too.
    """
    from nebisect.isolation import memory
    from nebisect.mil.load import load_program, save_program

    for module in arguments.modules:
        importlib.import_module(module)
    mark_stage("load")
    program = load_program(arguments.package, memory_budget=memory.budget())
    graph, _ = split_levels(resolve_fixes(arguments.fixes))
    rewrites = apply_graph_fixes(program, graph)
    if any(rewrites.values()):
        save_program(program, arguments.output)
    return Verdict(Status.PASS, Stage.LOAD, job_result={"rewrites": rewrites})


def fix_source(
    kind: str,
    location: str,
    fixes: Sequence[Fix],
    workdir: Path,
    isolator: Isolator,
    *,
    precision: str = "fp16",
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    paths: tuple[str, ...] | None = None,
) -> FixedSource:
    """Convert (torch sources) and apply ``fixes``, writing packages under ``workdir``.

    With no fixes this is just the conversion a torch case needs before it can run.
    Conversion is bounded by ``timeouts.convert``, the graph passes (which load the
    program) by ``timeouts.load``. A torch source converts on the first of ``paths``
    that converts (default: torch.export, then jit.trace).
    """
    graph, convert = split_levels(fixes)
    workdir.mkdir(parents=True, exist_ok=True)
    source = SourceRef(kind, location)
    if source.is_torch:
        from nebisect.sources.convert import PATHS, convert_isolated
        from nebisect.sources.resolve import Source

        converted, verdict = convert_isolated(
            Source("torch", location), precision, workdir, isolator,
            setup=tuple(f.setup for f in convert), timeout=timeouts.convert,
            paths=paths or PATHS,
        )
        applied = [f.name for f in convert]
        if converted is None:
            return FixedSource(verdict, converter_fixes=applied)
    elif source.is_package:
        converted, applied = Path(location), []
    else:
        raise NebisectError(f"fixes apply to .mlpackage and torch sources, not {kind!r}")
    if not graph:
        return FixedSource(Verdict(Status.PASS, Stage.LOAD), converted, converted, {}, applied)
    output = workdir / "fixed.mlpackage"
    outcome = isolator.run(Job(
        function="nebisect.fixes.apply:fix_job",
        payload=encode(FixArguments(str(converted), [f.name for f in graph],
                                    sorted({type(f).__module__ for f in graph}), str(output))),
        stage="load",
        timeout=timeouts.load,
        # The job loads programs as the simulator does: sharing its needs lets both
        # fork from the same warm template.
        needs=get_target(REFERENCE_TARGET).needs,
    ))
    if outcome.verdict.status != "pass":
        return FixedSource(outcome.verdict, converted, None, {}, applied)
    rewrites = {str(k): int(v) for k, v in outcome.verdict.job_result["rewrites"].items()}
    package = output if any(rewrites.values()) else converted
    return FixedSource(outcome.verdict, converted, package, rewrites, applied)
