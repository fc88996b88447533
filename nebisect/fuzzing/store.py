"""Keep fuzz findings: each becomes a corpus case (DESIGN.md §9) that replay guards.

The corpus materializes the builder program to ``model.mlpackage`` (it keeps model
bytes, so later changes to the op specs cannot change what a stored case means) and
records the expected failure signature; the finding's recipe, seed and cliff go into
the case's provenance and description so the case explains itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected, NewCase
from nebisect.fuzzing.campaign import Finding
from nebisect.fuzzing.model_subject import ModelSubject, describe_case
from nebisect.fuzzing.subject import BUILDER, OpSubject
from nebisect.opspecs.strategies import describe
from nebisect.targets.spec import REFERENCE_TARGET


def describe_finding(finding: Finding, target: str) -> str:
    """One sentence a newcomer can read: what failed, on what, and where the cliff is."""
    if "program" in finding.case:
        program = finding.case["program"]
        values = ", ".join(f"{name}={describe(recipe)}"
                           for name, recipe in finding.case["values"].items())
        shapes = ", ".join(f"{name}{shape}" for name, shape in program["inputs"].items())
        what = f"{program['op']} on {target}: {finding.signature} with {shapes} ({values})"
    else:
        what = (f"{finding.subject} on {target}: {finding.signature} with "
                f"{describe_case(finding.case)}")
    text = f"{what}, class {finding.param_class}"
    cliff = finding.cliff
    if cliff is not None:
        text += f"; cliff between {cliff.lo!r} and {cliff.hi!r}"
        if cliff.predicted:
            text += f" (predicted {cliff.predicted['label']} = {cliff.predicted['value']:.5g})"
    return text


def record_finding(
    corpus: Corpus,
    finding: Finding,
    subject: OpSubject,
    target: str,
    *,
    reference: str = REFERENCE_TARGET,
    plugins: tuple[str, ...] = (),
    seed: int = 0,
) -> str:
    """Add one finding to ``corpus``; returns the case directory."""
    return _add(corpus, finding, target, NewCase(
        source_kind="builder", source=BUILDER, target=target,
        inputs=subject.arrays(finding.case),
        options=replace(subject.options(), params=finding.case["program"]), reference=reference,
        provenance={"found_by": f"nebisect fuzz --op {subject.name} --seed {seed}",
                    "values": json.dumps(finding.case["values"], sort_keys=True)},
    ), plugins)


def record_model_finding(
    corpus: Corpus,
    finding: Finding,
    subject: ModelSubject,
    target: str,
    *,
    reference: str,
    plugins: tuple[str, ...] = (),
    seed: int = 0,
) -> str:
    """Add one model-level finding to ``corpus``; returns the case directory.

    A torch source is stored as itself (``model.py`` and its factory) with the
    conversion path the finding lives on (``convert_path``), which replay converts; a
    package is stored as its bytes, with the function fuzzed when it has several.
    """
    source, path = subject.source, finding.case["path"]
    return _add(corpus, finding, target, NewCase(
        source_kind=source.kind, source=source.location, target=target,
        function=source.function,
        inputs=subject.input_set(finding.case).arrays,
        options=CaseOptions(convert_path=path or ""), reference=reference,
        provenance={"found_by": f"nebisect fuzz {subject.name} --seed {seed}",
                    "case": json.dumps(finding.case, sort_keys=True)},
    ), plugins)


def _add(corpus: Corpus, finding: Finding, target: str, new: NewCase,
         plugins: tuple[str, ...]) -> str:
    """Store ``new`` as the finding's case: failing with its signature, named and
    described after it, its cliff in the provenance; returns the case directory."""
    if plugins:
        new.options = replace(new.options, plugins=tuple(plugins))
    new.expected = Expected("failing", finding.signature, finding.status,
                            finding.message[:300])
    new.name = f"fuzz-{finding.param_class}-{finding.signature}".replace("/", "-")
    new.description = describe_finding(finding, target)
    new.provenance["cliff"] = finding.cliff.to_json() if finding.cliff else ""
    return os.fspath(corpus.add(new).case.path)
