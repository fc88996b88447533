"""Run a describe job in isolation; return its record, or say in one line what went wrong.

Both sides live here so the contract stays in one place: the child returns a ``pass``
verdict whose ``job_result["record"]`` is a JSON dict, or an ``error`` verdict flagged
``user_error`` whose message is already the sentence to show. Anything else the
isolation engine reports — a crash, a timeout, an exit without a result — is phrased
here for the user, and never passes silently: a factory that calls ``sys.exit(0)``
must not turn into a green CI for a model that was never tested.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.codec import encode
from nebisect.errors import NebisectError
from nebisect.isolate import NOTHING, Isolator, Job, Needs, run_isolated
from nebisect.verdict import Status, Verdict, error_signature

STAGE = "load"


@dataclass(frozen=True)
class ChildSubject:
    """Who ran in the child and what it was for, as words for the error line; ``when``
    ends the line where the noun alone does not say what was going on."""

    noun: str
    purpose: str
    when: str = f" during {STAGE}"


@dataclass(frozen=True)
class SourceArguments:
    """The arguments of a job that reads one source: its location (``file.py:factory``,
    a package path, …)."""

    source: str


@dataclass(frozen=True)
class PackageArguments:
    """The arguments of a job that reads one package: its path and the function of a
    multifunction package ("": its default)."""

    package: str
    function: str = ""


def describe_in_child(function: str, arguments: object, **options: Any) -> dict[str, Any]:
    """Run ``function(arguments)`` (a record) at stage ``load``; its record, or
    NebisectError naming ``label`` (the source or plugin as the user typed it).
    ``options``: those of
    :func:`describe_with_arrays` (``label``, ``subject``, ``timeout``, ``needs``,
    ``isolator``)."""
    return describe_with_arrays(function, arguments, **options)[0]


def describe_with_arrays(
    function: str,
    arguments: object,
    *,
    label: str,
    subject: ChildSubject,
    timeout: float,
    needs: Needs = NOTHING,
    isolator: Isolator | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """:func:`describe_in_child`, plus the arrays the child returned beside its record
    (e.g. a factory's example inputs: arrays travel as ``.npz``, never in the JSON)."""
    job = Job(function=function, payload=encode(arguments), stage=STAGE, timeout=timeout,
              needs=needs)
    outcome = isolator.run(job) if isolator is not None else run_isolated(job)
    return (record_of(outcome.verdict, label=label, subject=subject, timeout=timeout),
            outcome.arrays)


def record_of(verdict: Verdict, *, label: str, subject: ChildSubject,
              timeout: float) -> dict[str, Any]:
    """The record a describe child returned, or NebisectError naming ``label`` and what
    happened to the child (for a caller that runs the job itself, e.g. to get arrays)."""
    record = verdict.job_result.get("record") if verdict.status == "pass" else None
    if isinstance(record, dict):
        return record
    raise NebisectError(f"{label}: {explain(verdict, subject, timeout)}")


def explain(verdict: Verdict, subject: ChildSubject, timeout: float) -> str:
    """What happened to a describe child, as the rest of an error line."""
    if verdict.job_result.get("user_error"):
        return verdict.message
    if verdict.status == "timeout":
        return f"{subject.noun} did not finish within {timeout:g} s{subject.when}"
    if verdict.status == "crash":
        signal = verdict.signature.removeprefix("crash:")
        return f"{subject.noun} crashed with {signal}{subject.when}"
    if verdict.status == "oom":
        return f"{subject.noun} ran out of memory{subject.when}"
    code = verdict.process.exit_code
    if code is not None:
        return f"{subject.noun} exited with status {code} without {subject.purpose}"
    return f"{subject.noun} failed{subject.when}: {first_line(verdict.message)}"


def record_verdict(build: Callable[[], dict[str, Any]]) -> Verdict:
    """Child side: the record ``build`` returns, or its NebisectError as the rest of the
    user's line (the parent puts the source's name, as the user typed it, in front)."""
    return record_outcome(lambda: (build(), {}))[0]


def record_outcome(
    build: Callable[[], tuple[dict[str, Any], dict[str, np.ndarray]]],
) -> tuple[Verdict, dict[str, np.ndarray]]:
    """:func:`record_verdict` for a ``build`` that also returns arrays."""
    try:
        record, arrays = build()
    except NebisectError as exc:
        message = str(exc)
        return Verdict(Status.ERROR, STAGE, error_signature(STAGE, message), message=message,
                       job_result={"user_error": True}), {}
    return Verdict(Status.PASS, STAGE, job_result={"record": record}), arrays


def unprefixed(message: str, location: str) -> str:
    """torchsource's messages start with the location or its file; the parent puts the
    name the user typed there instead."""
    for prefix in (location, location.rpartition(":")[0], repr(location)):
        if message.startswith(f"{prefix}: "):
            return message[len(prefix) + 2:]
    return message


def first_line(message: str) -> str:
    """The first non-blank line of an exception message (the rest is in the capture)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"
