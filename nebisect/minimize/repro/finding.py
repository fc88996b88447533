"""The repro of a run's finding, for its upstream issue (``run --markdown``).

Not a minimization: the script :mod:`.script` writes for a torch factory
(:func:`~.script.factory_script`), with the factory's file inline and the trigger's
inputs written out, so that a maintainer runs one file. The failure it shows is the
finding's on the target a Mac runs as itself — the fp32, fp16 or Neural Engine
program, not the exact float64 evaluation nebisect attributes with — at that target's
smallest trigger, on its conversion path. Inputs of up to :data:`INLINE_ELEMENTS`
values are literals (a constant fill is ``np.full`` at any size); larger ones are the
factory's own example inputs, which the note says.

Only a ``file.py:factory`` has a file to inline: for a package or a saved program the
note names ``nebisect bisect``, which writes a minimized standalone ``repro.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nebisect.arrays import load_npz
from nebisect.case import FACTORY, torch_form
from nebisect.detect.causes import RunFinding
from nebisect.detect.findings import Row
from nebisect.detect.matrix import RunReport
from nebisect.detect.titles import input_words, issue_title
from nebisect.detect.triggers import TriggerIndex, trigger_of
from nebisect.minimize.repro import templates
from nebisect.minimize.repro.script import devices_for, factory_script, inline_inputs
from nebisect.search.records import FailureGroup
from nebisect.sources.convert import PATH_LABELS
from nebisect.sources.torch_module import PATHS, parse_location
from nebisect.targets.registry import spec_of
from nebisect.targets.spec import TargetSpec

#: inputs with more values than this (constant fills aside) are not written out
INLINE_ELEMENTS = 256


@dataclass(frozen=True)
class FindingRepro:
    """A finding's repro script ('' when there is none) and what a reader needs to know
    about it: what it runs on, what it prints, where its inputs come from."""

    script: str
    note: str


def finding_repro(finding: RunFinding, rows: Sequence[Row], inputs_files: Mapping[str, str],
                  *, source: str, run_paths: Sequence[str], fixes: Sequence[str] = (),
                  cured: Sequence[str] = ()) -> FindingRepro:
    """The repro of ``finding`` of a run of ``source`` (see the module docstring):
    ``inputs_files`` are the run's inputs files by input-set label, ``fixes`` the
    converter fixes it converted with, ``cured`` the paths it judged as converted with
    nebisect's converter overrides."""
    if torch_form(source) != FACTORY:
        return FindingRepro("", "No standalone script: the source is not a torch "
                                "`file.py:factory`. `nebisect bisect` (the run's next command) "
                                "writes a minimized standalone `repro.py` for it.")
    group = shown_group(finding)
    trigger = trigger_of(finding.number, group, rows, fixes, cured)
    file, factory = parse_location(source)
    arrays = load_npz(inputs_files[group.smallest.label])
    inputs, inputs_doc = _inputs(group, arrays, factory)
    paths = tuple(dict.fromkeys([group.path, *run_paths] if group.path else PATHS))
    target = spec_of(group.target)
    script = factory_script(
        file.read_text(), factory, inputs, names=list(arrays), inputs_doc=inputs_doc,
        signature=group.signature, message=group.message, target=target,
        stage=trigger.stage, setup=_setups(trigger.fixes),
        header=f"{issue_title(finding, run_paths)}\n\nRepro written by nebisect run from "
               f"{file.name}:{factory}, inline below.", paths=paths)
    return FindingRepro(script, _note(group, target, trigger.stage, paths, inputs_doc,
                                      bool(trigger.fixes)))


def shown_group(finding: RunFinding) -> FailureGroup:
    """The group a repro shows: the smallest trigger among the targets a Mac runs as
    themselves (any precision but the exact float64 evaluation), else the finding's
    smallest overall."""
    runnable = [g for g in finding.groups if spec_of(g.target).precision != "fp64"]
    return min(runnable, key=lambda g: (g.smallest.magnitude, g.smallest.label)) \
        if runnable else finding.representative


def _inputs(group: FailureGroup, arrays: dict[str, np.ndarray], factory: str
            ) -> tuple[str, str]:
    """``trigger_inputs``' body and docstring: the trigger written out, or the
    factory's example inputs when it is too large."""
    varying = sum(a.size for a in arrays.values()
                  if a.size > 1 and not (a.reshape(-1) == a.reshape(-1)[0]).all())
    said = input_words(group.smallest).removeprefix("at ")
    if varying <= INLINE_ELEMENTS:
        return inline_inputs(arrays), f"The trigger: {said}, as the run recorded it."
    shows = any(m.family == "example" for m in group.members)
    return templates.EXAMPLE_INPUTS.format(factory=factory), (
        f"The factory's example inputs: the trigger ({said}) has {varying} values, too "
        "many to write out; " + (
            "the finding shows at the example inputs too." if shows else
            "the finding did not show at the example inputs on this target: "
            "`nebisect run --save-triggers DIR` writes the trigger as DIR/N.npz."))


def _setups(fixes: Sequence[str]) -> tuple[str, ...]:
    """The ``module:function`` setups of the converter fixes a trigger converts with."""
    from nebisect.fixes import resolve_fixes
    from nebisect.fixes.base import ConverterFix

    return tuple(f.setup for f in resolve_fixes(fixes) if isinstance(f, ConverterFix))


def _note(group: FailureGroup, target: TargetSpec, stage: str, paths: tuple[str, ...],
          inputs_doc: str, fixed: bool) -> str:
    """What the script runs on and prints, where its inputs come from."""
    labels = " then ".join(PATH_LABELS.get(p, p) for p in paths)
    needs = ("It needs numpy, torch and coremltools" + (
        ", and nebisect for the converter overrides the path converts with" if fixed else
        "; the model and its inputs are inline") + ".")
    if stage == "convert":
        does = f"It converts the module on {labels} and prints each converter's message."
    else:
        units, sim = devices_for(target)
        does = (f"It converts the module ({labels}: the first that converts) at "
                f"{target.precision}, predicts on Core ML with compute units "
                f"{units} on macOS — elsewhere Core ML cannot predict, so on nebisect's MIL "
                f"simulator `{sim}` when nebisect is installed — and compares with the "
                "module itself in float64.")
    return (f"{needs} {does} It prints `REPRODUCED` and exits 0 when it sees "
            f"`{group.signature}`. {inputs_doc}")


def issue_text(report: RunReport, triggers: TriggerIndex | None,
               inputs_files: Mapping[str, str], fixes: Sequence[str] = ()) -> str:
    """``run --markdown``'s text of one run: its report payload, each finding with its
    repro (:func:`finding_repro`), rendered by :func:`nebisect.report.issue.issue_markdown`.
    A run that judged a package it compressed has no factory script to give: the
    package, not the factory, failed."""
    from nebisect.detect.report import run_payload
    from nebisect.report.issue import issue_markdown

    payload = run_payload(report, triggers)
    for entry, finding in zip(payload.findings, report.findings, strict=True):
        if report.compressed is not None:
            repro = FindingRepro("", f"No standalone script: the findings were judged on the "
                                     f"package compressed with {report.compressed.spec}.")
        else:
            repro = finding_repro(finding, report.rows, inputs_files, source=report.source,
                                  run_paths=report.paths, fixes=fixes,
                                  cured=report.cured_paths)
        entry.repro, entry.repro_note = repro.script, repro.note
    return issue_markdown(payload)
