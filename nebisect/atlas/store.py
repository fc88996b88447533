"""Keep an atlas failure: its sample as a torch source, its triggers, a corpus case each.

``--keep DIR`` writes ``DIR/<sample>/model.py`` beside the triggers ``run
--save-triggers`` writes (``N.npz``, ``triggers.json`` with the ``bisect`` and ``corpus
add`` commands) and the ready issue text ``run --markdown`` writes (:data:`ISSUE_FILE`:
versions, torch against the converted numbers, a standalone repro). ``--corpus DIR``
stores each finding's smallest trigger as a corpus case — the sample's source itself,
its inputs, the target and the conversion path it fails on (``convert_path``), expected
failing with its signature — so ``replay`` guards it and ``fix verify`` can target it.
A conversion nebisect's overrides changed is not stored (a corpus case converts
plainly), nor a trigger on a target that runs no program.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from nebisect.arrays import load_npz
from nebisect.atlas.samples import Sample
from nebisect.case import CaseOptions, case_stage
from nebisect.files import write_text

if TYPE_CHECKING:
    from nebisect.detect.source_run import RunOutcome

#: the kept failure's issue text, beside its source
ISSUE_FILE = "issue.md"


def keep(sample: Sample, outcome: RunOutcome, directory: Path) -> Path:
    """The failing sample as a torch source beside its findings' triggers and issue
    text, under ``directory/<sample name>/`` (returned)."""
    from nebisect.detect.triggers import save_triggers
    from nebisect.minimize.repro.finding import issue_text

    here = directory / sample.name
    source = here / "model.py"
    write_text(source, sample.source_text())
    report = outcome.report
    triggers = save_triggers(here, [f.representative for f in report.findings], report.rows,
                             outcome.inputs_files, source=f"{source}:model",
                             typed=f"{source}:model")
    write_text(here / ISSUE_FILE, issue_text(report, triggers, outcome.inputs_files))
    return here


def store(sample: Sample, outcome: RunOutcome, source: Path, corpus_root: Path) -> list[str]:
    """Each finding's smallest trigger as a corpus case under ``corpus_root``; the case
    directories."""
    from nebisect.corpus import Corpus, Expected, NewCase
    from nebisect.detect.triggers import trigger_of
    from nebisect.targets.registry import spec_of

    report = outcome.report
    corpus = Corpus(corpus_root, create=True)
    stored = []
    for number, finding in enumerate(report.findings, 1):
        group = finding.representative
        trigger = trigger_of(number, group, report.rows)
        if not spec_of(trigger.target).runs_programs:
            continue
        status = trigger.signature.partition(":")[0]
        added = corpus.add(NewCase(
            "torch", f"{source}:model", trigger.target,
            load_npz(outcome.inputs_files[group.smallest.label]),
            Expected("failing", trigger.signature, status, group.message[:300]),
            stage=case_stage(trigger.stage), options=CaseOptions(convert_path=trigger.path),
            name=f"atlas-{sample.name}-{number}",
            description=f"{sample.call} on {trigger.target} [{trigger.path}]: {finding.title}",
            provenance={"found_by": sample.found_by,
                        "sample": sample.index},
        ))
        stored.append(os.fspath(added.case.path))
    return stored
