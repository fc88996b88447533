"""``case.json``: the versioned record of one corpus case, and what it promises.

A corpus case is a directory ``<case id>/`` holding ``case.json``, the model
(``model.mlpackage``, or ``model.py`` for a torch source), ``inputs.npz`` and the
target plugins it needs (``plugins/*.py``). The record names every other file with its
sha256 and carries a checksum over its own canonical JSON, so *any* edit — a flipped
byte in a weight blob, a hand-changed expected status, a truncated npz — is detected on
load and the case is skipped, never run as something it is not.

The case id is :meth:`CaseRecord.identity`: a hash of every input of the verdict (the
model and plugin bytes, the torch factory's name or the package's function, target,
stage, reference, the input arrays and the options). Two cases that could judge
differently never share an id, and a record whose id does not match its content is
damaged. Schema 2 introduced this identity (schema 1 ids ignored the factory name and
the plugins' bytes); a schema-1 case is reported with how to re-add it.

The expectation is one of:

* ``failing`` — the case reproduces a known bug: replay must see a failure with the
  recorded ``signature`` (a *different* failure is a regression: the bug changed);
* ``fixed`` — it used to fail and must now pass (a failure is a regression);
* ``pass`` — it must pass.

An expectation may differ by chip family (``chips``: ``{"m1": "failing", "m4":
"fixed"}``; a failing chip fails with the case's ``signature``), for replays over a
device matrix (``replay --devices``, :meth:`Expected.for_chip`). The field is left out
of ``case.json`` when empty, so cases recorded before it existed still load (their
checksum never covered it) and a case without per-chip expectations is unchanged.

A case of a multifunction package (``ct.utils.save_multifunction``: a prefill/decode
pair) names the ``function`` it judges (``corpus add --function``, ``fuzz --function
--corpus``); the package is stored whole and replay runs that function. Like
``chips`` it is left out of ``case.json`` and of the identity when empty, so every
other case keeps its bytes and its id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, ClassVar

from nebisect.arrays import sha256_bytes
from nebisect.case import EXPORTED, SCRIPTED, CaseOptions, case_stage
from nebisect.codec import Form, Record
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.errors import NebisectError
from nebisect.files import parse_untrusted_json
from nebisect.verdict import Stage

CASE_SCHEMA_VERSION = 2
EXPECTED_STATUSES = ("failing", "fixed", "pass")
CASE_FILE = "case.json"
INPUTS_FILE = "inputs.npz"
MODEL_FILES = {"mlpackage": "model.mlpackage", "torch": "model.py"}
#: the file of a torch source stored as a saved program (no factory), by its form
SAVED_MODEL_FILES = {EXPORTED: "model.pt2", SCRIPTED: "model.pt"}
PLUGIN_DIR = "plugins"


class CorruptCaseError(NebisectError):
    """A case directory whose files do not match its record (tampered or half-written)."""


@dataclass
class Expected(Record):
    """What replay must observe for a case."""

    json_form: ClassVar[Form] = Form(what="field")

    status: str
    signature: str = ""
    verdict: str = ""
    message: str = ""
    chips: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for status in (self.status, *self.chips.values()):
            if status not in EXPECTED_STATUSES:
                raise NebisectError(f"unknown expected status {status!r}: one of "
                                    f"{', '.join(EXPECTED_STATUSES)}")
            if status == "failing" and not self.signature:
                raise NebisectError("a failing case needs the signature it fails with")

    def for_chip(self, family: str) -> Expected:
        """What replay must observe on a device of chip ``family`` (``m1``, ``m4``…)."""
        status = self.chips.get(family)
        if status is None or status == self.status:
            return self
        return Expected(status, self.signature if status == "failing" else "", self.verdict,
                        self.message)

    @classmethod
    def from_verdict(cls, verdict: Any, previous: Expected | None = None) -> Expected:
        """The expectation a verdict records: its failure, or pass/fixed.

        A case that used to fail and now passes becomes ``fixed``, so the corpus keeps
        the memory that this input once broke something. Per-chip expectations are
        kept (a ``failing`` chip only while there is a signature to fail with).
        """
        chips = dict(previous.chips) if previous is not None else {}
        if verdict.failed:
            return cls("failing", verdict.signature, verdict.status, verdict.message[:300],
                       chips)
        was_failing = previous is not None and previous.status in ("failing", "fixed")
        chips = {family: status for family, status in chips.items() if status != "failing"}
        return cls("fixed" if was_failing else "pass", "", verdict.status, chips=chips)


@dataclass
class CaseRecord(Record):
    """The content of ``case.json`` (schema version :data:`CASE_SCHEMA_VERSION`; the
    ``function`` and the expectation's ``chips`` left out when empty, so every case
    recorded before they existed keeps its bytes)."""

    json_form: ClassVar[Form] = Form(what="field", omit_defaults=("function",))

    case_id: str
    source_kind: str
    target: str
    expected: Expected
    stage: Stage = Stage.PREDICT
    factory: str = ""
    function: str = ""
    reference: str = REFERENCE_TARGET
    options: CaseOptions = field(default_factory=CaseOptions)
    name: str = ""
    description: str = ""
    fixes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    created: str = ""
    files: dict[str, str] = field(default_factory=dict)
    inputs_sha256: str = ""
    schema: int = CASE_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.source_kind not in MODEL_FILES:
            raise NebisectError(
                f"corpus cases store {' or '.join(MODEL_FILES)} models, not {self.source_kind!r}"
            )
        self.stage = case_stage(self.stage)
        if self.function and self.source_kind != "mlpackage":
            raise NebisectError(f"a {self.source_kind} case has no function to judge "
                                f"({self.function!r}): only an .mlpackage has functions")

    @property
    def model_file(self) -> str:
        """The stored model: the package, the torch source's ``model.py`` — or, for a
        saved torch program (no factory), the ``model.pt2`` or ``model.pt`` it lists."""
        if self.source_kind == "torch" and not self.factory:
            return next((name for name in SAVED_MODEL_FILES.values() if name in self.files),
                        SAVED_MODEL_FILES[EXPORTED])
        return MODEL_FILES[self.source_kind]

    @property
    def label(self) -> str:
        """The human name if there is one, else the id."""
        return self.name or self.case_id

    def to_json(self) -> str:
        """The text of ``case.json``: the record's JSON object and its checksum."""
        body = self.to_dict()
        if not self.expected.chips:
            del body["expected"]["chips"]
        body["checksum"] = _checksum(body)
        return json.dumps(body, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> CaseRecord:
        """Parse and verify a record; any mismatch is a :class:`CorruptCaseError`.

        The one reader of ``case.json`` text: untrusted JSON limits
        (:func:`~nebisect.files.parse_untrusted_json`), then the codec's check of every
        field, so a malformed record is a damaged case, never an exception elsewhere.
        """
        try:
            body = parse_untrusted_json(text)
        except ValueError as exc:
            raise CorruptCaseError(f"{CASE_FILE} {exc}") from None
        if not isinstance(body, dict):
            raise CorruptCaseError(f"{CASE_FILE} is not a JSON object")
        schema = body.get("schema")
        if schema != CASE_SCHEMA_VERSION:
            raise CorruptCaseError(
                f"{CASE_FILE} has schema version {schema!r}; this nebisect reads {CASE_SCHEMA_VERSION}"
                " (re-add the case with `nebisect corpus add`)"
            )
        stored = body.pop("checksum", None)
        if stored != _checksum(body):
            raise CorruptCaseError(f"{CASE_FILE} checksum mismatch (edited by hand or damaged)")
        try:
            record = cls.from_dict(body)
        except NebisectError as exc:
            raise CorruptCaseError(f"{CASE_FILE}: {exc}") from None
        record.check_layout()
        return record

    @property
    def plugins(self) -> list[str]:
        """The case's own plugin files (names in :attr:`files`), in load order."""
        return list(self.options.plugins)

    def identity(self) -> str:
        """The case id: a content address over every input of the verdict.

        ``inputs.npz`` enters through :attr:`inputs_sha256` (the arrays, not the zip's
        timestamps), every other file through its sha256.
        """
        key = {
            "files": {name: digest for name, digest in self.files.items() if name != INPUTS_FILE},
            "factory": self.factory, "inputs": self.inputs_sha256,
            "options": self.options.to_dict(),
            "reference": self.reference, "source_kind": self.source_kind, "stage": self.stage,
            "target": self.target,
        }
        if self.function:
            key["function"] = self.function
        return sha256_bytes(json.dumps(key, sort_keys=True).encode())[:16]

    def check_layout(self) -> None:
        """Every listed file is a plain relative path inside the case, and every plugin is
        one of them: nothing a record names can reach outside its own directory."""
        for name in self.files:
            parts = PurePosixPath(name).parts
            if (not name or name.startswith("/") or "\\" in name or name != "/".join(parts)
                    or any(part in ("", ".", "..") for part in parts)):
                raise CorruptCaseError(f"{CASE_FILE} lists {name!r}, a path outside the case")
        for required in (self.model_file, INPUTS_FILE):
            if required not in self.files:
                raise CorruptCaseError(f"{CASE_FILE} lists no hash for {required}")
        for plugin in self.options.plugins:
            if plugin not in self.files or not plugin.startswith(f"{PLUGIN_DIR}/"):
                raise CorruptCaseError(
                    f"plugin {plugin!r} is not one of the case's own files ({PLUGIN_DIR}/*.py)"
                )


def _checksum(body: dict[str, Any]) -> str:
    return sha256_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
