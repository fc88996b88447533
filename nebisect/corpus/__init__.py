"""The corpus of minimized cases: store (verified, atomic, locked) and replay.

* :mod:`nebisect.corpus.record` — ``case.json``: schema, expectation, checksum;
* :mod:`nebisect.corpus.store` — :class:`Corpus`: scan/find/add/remove/update on disk;
* :mod:`nebisect.guard.replay` — run every case in isolation and judge it against its
  expectation (``nebisect replay``, ``nebisect fix verify``, the pytest plugin).
"""

from __future__ import annotations

from nebisect.corpus.record import (
    EXPECTED_STATUSES,
    CASE_SCHEMA_VERSION,
    CaseRecord,
    CorruptCaseError,
    Expected,
)
from nebisect.corpus.store import Added, Corpus, CorpusCase, NewCase, Problem, Scan, load_case

__all__ = [
    "EXPECTED_STATUSES", "CASE_SCHEMA_VERSION", "Added", "CaseRecord", "Corpus", "CorpusCase",
    "CorruptCaseError", "Expected", "NewCase", "Problem", "Scan", "load_case",
]
