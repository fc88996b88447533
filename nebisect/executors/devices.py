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

Workers also advertise their facts as Dask worker *resources*, one per fact, named
``KEY-VALUE`` (``family-m4``, ``chip-apple-m4-pro``, ``coremltools-8.1``; see
:func:`resource_name`), each as many as the worker has threads — set by the preload
:mod:`nebisect.executors.preload` (or ``dask worker --resources`` with what it
prints). The scheduler then places a unit that asks for a device's resources on a
worker of that device only, and on another of the same device if that one dies.

A selector is ``all`` or comma-separated ``key=glob`` terms; a worker matches when
every term matches its fact (``family=m1,family=m4`` is impossible: repeat a key's
values with ``|`` instead: ``family=m1|m4``). The workers it picks are grouped into
:class:`Device` records, one per distinct set of facts: a replay's matrix has a
column per device, whichever of its workers runs a cell.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from dataclasses import dataclass, field

from nebisect.errors import NebisectError
from nebisect.isolation.provenance import package_version, provenance

FACTS_ENV = "NEBISECT_WORKER_FACTS"
FACT_KEYS = ("os", "chip", "family", "compute_units", "coremltools", "nebisect")
#: how to give a worker its resources (named in the error when no worker has them)
PRELOAD = "nebisect.executors.preload"


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


def resource_name(key: str, value: str) -> str:
    """The resource that advertises one fact: ``family``, ``Apple M4 Pro`` →
    ``family-apple-m4-pro`` (lowercase letters, digits, dots and dashes only, so it
    survives ``dask worker --resources "NAME=N NAME=N"``)."""
    return f"{key}-{re.sub(r'[^a-z0-9.]+', '-', value.lower()).strip('-') or 'none'}"


def fact_resources(facts: dict[str, str]) -> list[str]:
    """The resources a worker with ``facts`` advertises, one per known fact."""
    return [resource_name(key, facts[key]) for key in FACT_KEYS if key in facts]


@dataclass
class Device:
    """Workers with the same facts: one column of a device matrix.

    ``resources`` is what a unit asks for to run on this device (any of ``workers``, or
    one that joins later with the same facts); ``label`` names the column: the chip
    family, with the facts that tell apart two devices of one family.
    """

    facts: dict[str, str]
    workers: list[str] = field(default_factory=list)
    label: str = ""

    @property
    def resources(self) -> dict[str, float]:
        return {name: 1.0 for name in fact_resources(self.facts)}


def group_devices(workers: dict[str, dict[str, str]]) -> list[Device]:
    """``workers`` (address → facts) as devices, in label order (then by first address):
    the same cluster gives the same matrix, whatever ports its workers were given."""
    devices: dict[tuple[str, ...], Device] = {}
    for address, facts in sorted(workers.items()):
        known = {k: facts[k] for k in FACT_KEYS if k in facts}
        devices.setdefault(tuple(fact_resources(known)), Device(known)).workers.append(address)
    grouped = list(devices.values())
    for device in grouped:
        family = device.facts.get("family", "?")
        twins = [d for d in grouped if d.facts.get("family", "?") == family]
        differ = [k for k in FACT_KEYS if k != "family" and len(
            {d.facts.get(k, "") for d in twins}) > 1]
        device.label = family + "".join(f" {k}={device.facts.get(k, '')}" for k in differ)
    return sorted(grouped, key=lambda device: (device.label, device.workers[0]))


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


def select(workers: dict[str, dict[str, str]], text: str) -> list[Device]:
    """The devices of the workers (address → facts) the selector ``text`` picks; none
    is a user error that lists what the cluster has."""
    selector = parse_selector(text)
    chosen = {a: f for a, f in workers.items() if matches(f, selector)}
    if not chosen:
        have = sorted({f"family={f.get('family', '?')}" for f in workers.values()})
        hint = f"no worker advertises its facts: start workers with --preload {PRELOAD}"
        raise NebisectError(f"--devices {text!r} matches no worker (the cluster has: "
                            f"{', '.join(have) or hint})")
    return group_devices(chosen)
