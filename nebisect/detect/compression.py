"""Compression as an attribution: what ``run --baseline`` adds to a run's report.

The comparison itself is :mod:`nebisect.evaluate.compression`'s. Here an input set
whose compressed outputs move beyond the tolerance becomes a failing row on the exact
target (``sim:fp64``: the compressed program evaluated exactly, against the baseline
evaluated exactly — no device, no fp16, so nothing but the weights differs), attributed
``compression`` at the first weight whose restoring the localization needed. The rows
of one run share their message, so they merge into one finding, whose title names
every such op, the error compression adds beside fp16's own, and the least change that
passes.
"""

from __future__ import annotations

from collections.abc import Mapping

from nebisect.detect.causes import COMPRESSION
from nebisect.detect.findings import Row
from nebisect.detect.titles import trigger_words
from nebisect.evaluate.compression import CompressionCheck, InputSetError
from nebisect.search.records import Culprit
from nebisect.search.space import Member
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import Status, Verdict, mismatch_signature

#: what a compression culprit compared
BY_RESTORING = "outputs against the baseline's, weights restored one set at a time (ddmin)"


def compression_rows(check: CompressionCheck, members: Mapping[str, Member]) -> list[Row]:
    """One failing row per input set the compression fails (``members``: the run's
    input sets by label)."""
    if not check.failing:
        return []
    signature = mismatch_signature("tolerance")
    culprit = None
    if check.restore:
        first = check.restore[0]
        culprit = Culprit(first.op, first.op_type, signature, BY_RESTORING)
    message = failure_words(check, members)
    return [Row(REFERENCE_TARGET, int(member.magnitude) if member.family == "length" else 0,
                Verdict(Status.MISMATCH, signature=signature, message=message,
                        target=REFERENCE_TARGET),
                attribution=COMPRESSION, input_set=member, culprit=culprit)
            for error in check.failing if (member := members.get(error.label)) is not None]


def failure_words(check: CompressionCheck, members: Mapping[str, Member]) -> str:
    """The finding's title after ``compression:``: where, how much (at the worst input
    set), what passes."""
    worst = _worst(check.failing)
    at = trigger_words(members[worst.label]) if worst.label in members else worst.label
    measured = (f"move the outputs by {_percent(worst.compression)} of their scale {at} "
                f"(max abs {worst.max_abs:.3g}; fp16 alone {_percent(worst.fp16)}; tolerance "
                f"{_percent(check.tolerance)})")
    if not check.restore:
        return f"the compressed weights {measured}; {check.note or 'no weight named'}"
    hows = ", ".join(dict.fromkeys(w.how for w in check.restore))
    ops = ", ".join(f'{w.op_type} "{w.op}"' for w in check.restore)
    after = max(e.restored for e in check.failing)
    evaluations = check.stats.evaluations if check.stats else 0
    partial = "" if check.complete else " (the search stopped early: not minimal)"
    them = "it" if len(check.restore) == 1 else "them"
    alternative = (f"; so does {check.milder} of {them} (≈{_percent(check.milder_error)})"
                   if check.milder else "; no milder compression tried passes")
    return (f"{hows} weights of {ops} {measured}; keeping {them} uncompressed passes "
            f"({_percent(after)}, {evaluations} evaluations){partial}{alternative}")


def check_lines(check: CompressionCheck | None) -> list[str]:
    """The comparison with the baseline, for the terminal: every input set's errors."""
    if check is None:
        return []
    hows = ", ".join(dict.fromkeys(w.how for w in check.weights))
    lines = [f"compression against {check.baseline}: {len(check.weights)} compressed "
             f"weight(s) ({hows}); tolerance {_percent(check.tolerance)} of an output's scale"]
    lines += [f"    {e.label}: compression {_percent(e.compression)} (max abs {e.max_abs:.3g}),"
              f" fp16 alone {_percent(e.fp16)}"
              + (f", restored {_percent(e.restored)}" if e.restored >= 0 else "")
              for e in check.errors]
    return lines


def _worst(errors: list[InputSetError]) -> InputSetError:
    return max(errors, key=lambda e: e.compression)


def _percent(value: float) -> str:
    return f"{100 * value:.3g}%"
