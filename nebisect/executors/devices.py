"""Device facts a worker advertises, and the ``--devices`` selector that picks workers.

An M1 and an M4 do not behave alike (Neural Engine compile limits that fail on M1/M2
pass on later chips), so a replay over a fleet is a matrix: each case on every
selected device, each judged against the expectation recorded for that chip family
(:meth:`nebisect.corpus.record.Expected.for_chip`).

Facts are strings: ``os`` (name and build), ``chip`` (marketing name), ``family``
(``m1``, ``m4``… on Apple silicon; the machine architecture elsewhere),
``compute_units`` (``cpu,gpu,ne`` on Apple silicon, ``cpu`` elsewhere),
``coremltools`` and ``nebisect`` versions. A worker started with
``NEBISECT_WORKER_FACTS='{"family": "m4"}'`` in its environment reports those values
over the detected ones (a label for a machine detection gets wrong, and how tests
build a two-chip fleet on one Linux box).

A selector is ``all`` or comma-separated ``key=glob`` terms; a worker matches when
every term matches its fact (``family=m1,family=m4`` is impossible: repeat a key's
values with ``|`` instead: ``family=m1|m4``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys

from nebisect.errors import NebisectError
from nebisect.isolation.provenance import package_version, provenance

FACTS_ENV = "NEBISECT_WORKER_FACTS"
FACT_KEYS = ("os", "chip", "family", "compute_units", "coremltools", "nebisect")


def chip_family(chip: str, machine: str) -> str:
    """``Apple M2 Pro`` → ``m2``; anything else → the machine architecture."""
    match = re.search(r"\bApple (M\d+)\b", chip)
    return match.group(1).lower() if match else machine


def local_facts() -> dict[str, str]:
    """This machine's facts, with the ``NEBISECT_WORKER_FACTS`` overrides applied."""
    stamp = provenance("worker")
    apple = sys.platform == "darwin" and stamp["machine"] == "arm64"
    facts = {
        "os": stamp["os"], "chip": stamp["chip"],
        "family": chip_family(stamp["chip"], stamp["machine"]),
        "compute_units": "cpu,gpu,ne" if apple else "cpu",
        "coremltools": package_version("coremltools"), "nebisect": stamp["nebisect"],
    }
    overrides = os.environ.get(FACTS_ENV, "")
    if overrides:
        try:
            extra = json.loads(overrides)
        except json.JSONDecodeError:
            extra = None
        if not isinstance(extra, dict):
            raise NebisectError(f"{FACTS_ENV} must be a JSON object of fact: value")
        facts.update({str(k): str(v) for k, v in extra.items()})
    return facts


def parse_selector(text: str) -> list[tuple[str, list[str]]]:
    """``key=glob|glob,key=glob`` → [(key, globs)]; ``all`` → [] (every worker)."""
    if text.strip() in ("all", "*"):
        return []
    terms = []
    for term in text.split(","):
        key, sep, globs = term.partition("=")
        key = key.strip()
        if not sep or key not in FACT_KEYS or not globs.strip():
            raise NebisectError(
                f"--devices term {term.strip()!r}: expected KEY=GLOB with KEY one of "
                f"{', '.join(FACT_KEYS)} (or 'all')"
            )
        terms.append((key, [g.strip() for g in globs.split("|")]))
    return terms


def matches(facts: dict[str, str], selector: list[tuple[str, list[str]]]) -> bool:
    return all(any(fnmatch.fnmatchcase(facts.get(key, ""), g) for g in globs)
               for key, globs in selector)


def select(workers: dict[str, dict[str, str]], text: str) -> dict[str, dict[str, str]]:
    """The workers (address → facts) the selector ``text`` picks, in address order; none
    is a user error that lists what the cluster has."""
    selector = parse_selector(text)
    chosen = {a: f for a, f in sorted(workers.items()) if matches(f, selector)}
    if not chosen:
        have = sorted({f"family={f.get('family', '?')}" for f in workers.values()})
        raise NebisectError(f"--devices {text!r} matches no worker (the cluster has: "
                            f"{', '.join(have) or 'no workers'})")
    return chosen
