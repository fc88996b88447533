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

from nebisect.case import REFERENCE_TARGET
from nebisect.corpus import Corpus, Expected, NewCase
from nebisect.fuzz.campaign import Finding
from nebisect.fuzz.strategies import describe
from nebisect.fuzz.subject import BUILDER, OpSubject


def describe_finding(finding: Finding, target: str) -> str:
    """One sentence a newcomer can read: what failed, on what, and where the cliff is."""
    program = finding.case["program"]
    values = ", ".join(f"{name}={describe(recipe)}"
                       for name, recipe in finding.case["values"].items())
    shapes = ", ".join(f"{name}{shape}" for name, shape in program["inputs"].items())
    text = (f"{program['op']} on {target}: {finding.signature} with {shapes} ({values}), "
            f"class {finding.param_class}")
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
    options = replace(subject.options(), params=finding.case["program"], plugins=plugins)
    added = corpus.add(NewCase(
        source_kind="builder", source=BUILDER, target=target,
        inputs=subject.arrays(finding.case),
        expected=Expected("failing", finding.signature, finding.status, finding.message[:300]),
        options=options, reference=reference,
        name=f"fuzz-{finding.param_class}-{finding.signature}".replace("/", "-"),
        description=describe_finding(finding, target),
        provenance={
            "found_by": f"nebisect fuzz --op {subject.name} --seed {seed}",
            "values": json.dumps(finding.case["values"], sort_keys=True),
            "cliff": finding.cliff.to_json() if finding.cliff else "",
        },
    ))
    return os.fspath(added.case.path)

