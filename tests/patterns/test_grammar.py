"""The pattern grammar: every program it writes is one torch runs, in the stream's form,
at its example length and at another when the length is flexible; the shrink a kept
failure gets reduces a program to the one idiom that makes it fail, on the smallest
input."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch

from nebisect.atlas.sweep import shrink
from nebisect.patterns.grammar import (
    FLEXIBLE_LENGTH,
    IDIOMS,
    MAX_IDIOMS,
    WIDTHS,
    SeededChoices,
    build,
    generate,
    smaller,
)
from nebisect.patterns.program import PatternProgram, campaign

PROGRAMS = 120


def _built(program: PatternProgram) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(program.source_text(), f"<{program.label}>", "exec"), namespace)
    return namespace["model"]()


def test_every_generated_program_runs_in_torch_in_the_streams_form() -> None:
    used: collections.Counter[str] = collections.Counter()
    for seed in range(PROGRAMS):
        program = PatternProgram(generate(SeededChoices(seed)), f"seed {seed}")
        used.update(program.draft.idioms)
        built = _built(program)
        example = built["example_inputs"]["x"]
        lengths = [example.shape[1]]
        if program.draft.flexible:
            assert built["dynamic_dims"] == {"x": {1: FLEXIBLE_LENGTH}}
            lengths.append(FLEXIBLE_LENGTH[1])
        for length in lengths:
            x = torch.randn(example.shape[0], length, example.shape[2])
            with torch.no_grad():
                y = built["module"](x)
            assert y.dtype == torch.float32 and y.dim() == 3, program.name
            assert y.shape[:2] == x.shape[:2] and y.shape[2] in WIDTHS, program.name
    assert set(used) == set(IDIOMS.names())  # every idiom was written and ran


def test_one_seed_writes_one_program_and_the_label_is_not_its_identity() -> None:
    first, again = (PatternProgram(generate(SeededChoices(7)), label) for label in ("a", "b"))
    assert first.source_text() != again.source_text()
    assert first.digest() == again.digest()
    assert 1 <= len(first.draft.idioms) <= MAX_IDIOMS
    draft = first.draft
    assert build(draft.shape, draft.flexible, draft.steps) == draft  # decisions replay
    assert [p.digest() for p in campaign(3, 5)] == [p.digest() for p in campaign(5, 5)[:3]]


def test_every_smaller_program_is_simpler_and_runs_in_torch() -> None:
    for program in campaign(12, 1):
        for draft in smaller(program.draft):
            assert len(draft.idioms) < len(program.draft.idioms) or (
                draft.idioms == program.draft.idioms and draft.shape <= program.draft.shape
                and draft.flexible <= program.draft.flexible and draft != program.draft)
            built = _built(PatternProgram(draft, "smaller"))
            with torch.no_grad():
                y = built["module"](built["example_inputs"]["x"])
            assert y.dim() == 3 and y.shape[2] in WIDTHS


@pytest.mark.parametrize("culprit", ["lstm_twice", "sdpa_gqa", "slice_assign"])
def test_shrinking_reduces_a_failing_program_to_its_one_idiom_on_the_smallest_input(
        culprit: str) -> None:
    """A converter bug in one idiom, however many others the failing program chains:
    the shrink a kept failure gets (``atlas --keep``) reaches that idiom alone, on a
    1×2×4 input of fixed length — deterministically, from a seeded campaign program."""
    program = next(p for p in campaign(400, 0)
                   if culprit in p.draft.idioms and len(p.draft.idioms) >= 3)
    shrunk = shrink(program, lambda p: culprit in p.draft.idioms, budget=400)
    assert isinstance(shrunk, PatternProgram)
    assert shrunk.draft.idioms == (culprit,)
    assert shrunk.draft.shape == (1, FLEXIBLE_LENGTH[0], WIDTHS[0]) and not shrunk.draft.flexible
