"""Verdicts: the outcome of one case and the records it carries.

A verdict is the outcome of one case. Its *signature* is the stable key used for dedup
and for bisection: two failures with the same signature are "the same bug", so a
reducer that keeps the signature can never slip from one bug to another. What the
oracle (:mod:`nebisect.oracle`) measured travels in it as :class:`ErrorMetrics`.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np

from nebisect.codec import Form, Record, decode
from nebisect.files import MAX_DOCUMENT_BYTES, read_json


class Status(StrEnum):
    """What happened to a case (DESIGN §2). A member equals its string, so verdict JSON
    and comparisons with ``"pass"`` read the same as before statuses were typed."""

    PASS = "pass"
    CRASH = "crash"
    ERROR = "error"
    TIMEOUT = "timeout"
    OOM = "oom"
    MISMATCH = "mismatch"
    UNROUTED = "unrouted"
    SKIPPED = "skipped"


class Stage(StrEnum):
    """Where a case runs to, and where a failure entered.

    A case asks for one of :data:`CASE_STAGES`; a verdict may also name a finer step a
    target marks (``compile``, ``plan`` on Core ML) or ``reference`` when the oracle,
    not the target, failed.
    """

    CONVERT = "convert"
    LOAD = "load"
    COMPILE = "compile"
    PLAN = "plan"
    PREDICT = "predict"
    REFERENCE = "reference"


#: The stages a case can be asked to run to (convert → load → predict).
CASE_STAGES = (Stage.CONVERT, Stage.LOAD, Stage.PREDICT)
MISMATCH_KINDS = ("shape", "integer", "nan-suppressed", "nonfinite", "collapse", "tolerance")


@dataclass
class TargetFacts:
    """What the target reported beside its outputs, and what the placement check made of
    it: the prediction's ``notes``, the elements each ``masked`` output left out of the
    comparison, the ``routed`` summary, the ops placed ``off_device`` (op → count), a
    ``placement_note`` (routing off the device as information, not a failure), the
    signature ``judged`` before routing made the verdict ``unrouted`` and, for a stateful
    model, the decode ``steps`` judged (the verdict is the last one's: the first step
    that failed, when one did). An empty fact was not reported."""

    notes: list[str] = field(default_factory=list)
    masked: dict[str, int] = field(default_factory=dict)
    routed: str = ""
    off_device: dict[str, int] = field(default_factory=dict)
    placement_note: str = ""
    judged: str = ""
    steps: int | None = None


@dataclass
class ProcessFacts:
    """What isolation saw of the process that ran the case: its ``exit_code`` (negative:
    a signal) when it died without a result, the ``memory_limit`` an ``oom`` ran under,
    the case number of a persistent ``worker_case``, how many ``stderr_bytes`` it wrote,
    the OS ``crash_report`` (macOS), whether a fresh process ``reconfirmed`` a warm
    worker's failure (and the worker's ``persistent_signature``), the conversion
    ``template`` (``warm`` or why not) and the executor's ``worker_attempts`` when a
    unit took more than one. None (or "") is a fact not seen."""

    exit_code: int | None = None
    memory_limit: str = ""
    worker_case: int | None = None
    stderr_bytes: int | None = None
    crash_report: dict[str, Any] | None = None
    reconfirmed: bool | None = None
    persistent_signature: str = ""
    template: str = ""
    worker_attempts: list[dict[str, str]] | None = None


@dataclass
class ConversionFacts:
    """What a torch → Core ML conversion did: every path's ``attempts`` (the JSON form of
    :class:`nebisect.sources.convert.ConversionAttempt`), the program ``precision``, the
    ``setup`` callables run first and, once a path converted, the first ``path``, the
    ``paths`` saved and the first program's ``op_types`` (MIL op → count); ``cache``
    says, when conversions are cached (``run --cache``), whether this one was read from
    the cache or kept there (and why an entry found there was not trusted)."""

    attempts: list[dict[str, Any]] = field(default_factory=list)
    precision: str = ""
    setup: list[str] = field(default_factory=list)
    path: str | None = None
    paths: list[str] | None = None
    op_types: dict[str, int] | None = None
    cache: str = ""


@dataclass
class Timings(Record):
    """How long one case took, in seconds, each by the layer that measured it: the
    child's whole ``call`` and, within it, the judge's ``predict`` and ``reference``;
    the parent's ``wall`` around the isolated run (fork, call, collect), and a cell's
    ``total`` with the workbench's own work. None: not measured there."""

    json_form: ClassVar[Form] = Form(omit_defaults=True)

    call: float | None = None
    predict: float | None = None
    reference: float | None = None
    wall: float | None = None
    total: float | None = None

    @property
    def seconds(self) -> float:
        """The case's duration, from the outermost measure taken (0 when none was)."""
        for outermost in (self.total, self.wall, self.call):
            if outermost is not None:
                return outermost
        return (self.predict or 0.0) + (self.reference or 0.0)


#: A verdict's typed parts: its JSON form writes their facts flat under ``"metrics"``.
_TYPED_PARTS = ("error_metrics", "target_facts", "process", "conversion", "job_result")


@dataclass
class Verdict(Record):
    """The outcome of one case, always produced — a crash included.

    Beside status, stage, signature and message a verdict carries typed parts: the
    oracle's :class:`ErrorMetrics` (None when nothing was compared), the
    :class:`TargetFacts`, the :class:`ProcessFacts`, the :class:`ConversionFacts` of a
    conversion, and ``job_result``: what a job hands back to its caller that is no fact
    about the case (a loaded source's record, a fix's rewrite counts), keyed by the job.
    The JSON form keeps them flat under ``"metrics"`` (:attr:`metrics`, read back by
    :meth:`unfold_metrics`): a custom form because every stored verdict — corpus
    expectations, run and replay reports — reads them there, and a metric's key names
    the fact wherever it came from.
    """

    json_form: ClassVar[Form] = Form(skipped=_TYPED_PARTS, derived=(("metrics", "message"),),
                                     unfold="unfold_metrics")

    status: Status
    stage: str = Stage.PREDICT
    signature: str = ""
    message: str = ""
    error_metrics: ErrorMetrics | None = None
    target_facts: TargetFacts = field(default_factory=TargetFacts)
    process: ProcessFacts = field(default_factory=ProcessFacts)
    conversion: ConversionFacts | None = None
    job_result: dict[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""
    provenance: dict[str, str] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    placement: dict[str, str] = field(default_factory=dict)
    target: str = ""

    def __post_init__(self) -> None:
        try:
            self.status = Status(self.status)
        except ValueError:
            raise ValueError(f"unknown verdict status {self.status!r}") from None
        if not self.signature:
            self.signature = self.status.value

    @property
    def failed(self) -> bool:
        return self.status not in (Status.PASS, Status.SKIPPED)

    @property
    def metrics(self) -> dict[str, Any]:
        """The typed parts as the flat ``"metrics"`` object of the JSON form: the facts
        written in the case's child with every object's keys in order (as the child's
        sorted JSON hands them over), then the process facts isolation adds, in field
        order."""
        written: dict[str, Any] = dict(self.job_result)
        if self.error_metrics is not None:
            written.update(self.error_metrics.to_dict())
        written.update(_present(self.target_facts))
        if self.conversion is not None:
            written.update(_present(self.conversion, keep_empty=("attempts", "setup")))
        return {**_keys_sorted(written),
                **_present(self.process, keep_empty=("worker_attempts",))}

    @classmethod
    def unfold_metrics(cls, derived: dict[str, Any]) -> dict[str, Any]:
        """The typed parts a JSON form's flat ``"metrics"`` holds (:attr:`metrics` read
        back): the error metrics when it measured any, the target's and the process's
        facts, the conversion's when it has attempts, and what no part claims as the
        job's result."""
        metrics = dict(derived.get("metrics") or {})
        measured = ("max_ulp_error" in metrics
                    and decode(ErrorMetrics, _take(metrics, ErrorMetrics)))
        target_facts = decode(TargetFacts, _take(metrics, TargetFacts))
        process = decode(ProcessFacts, _take(metrics, ProcessFacts))
        conversion = ("attempts" in metrics
                      and decode(ConversionFacts, _take(metrics, ConversionFacts)))
        return {"error_metrics": measured or None, "target_facts": target_facts,
                "process": process, "conversion": conversion or None, "job_result": metrics}

    def to_json(self) -> str:
        # Serialized from the parts without the codec's copy (for callers that keep
        # the dict): it cost a persistent worker ~5 % of a fuzz case.
        document = {**{f.name: getattr(self, f.name) for f in fields(self)
                       if f.name not in _WRITTEN_APART}, "metrics": self.metrics,
                    "timings": self.timings.to_dict()}
        return json.dumps(document, sort_keys=True, default=_json_default)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))

    @classmethod
    def read(cls, path: str | os.PathLike[str], limit: int = MAX_DOCUMENT_BYTES) -> Verdict:
        """The verdict in a file another process or a cache left (:meth:`to_json`'s
        text, at most ``limit`` bytes: :func:`~nebisect.files.read_json`). Raises
        NebisectError: one line naming the file, or a CodecError for a value that is
        no verdict."""
        return cls.from_dict(read_json(path, limit, follow_symlinks=False, nonfinite=True))


#: The fields :meth:`Verdict.to_json` writes in a form of their own.
_WRITTEN_APART = frozenset({*_TYPED_PARTS, "timings"})


def _present(part: Any, keep_empty: tuple[str, ...] = ()) -> dict[str, Any]:
    """The facts of one typed part that were seen: neither None nor empty (an empty
    value is written only for the fields ``keep_empty`` names)."""
    return {f.name: value for f in fields(part)
            if (value := getattr(part, f.name)) is not None
            and (value not in ("", [], {}) or f.name in keep_empty)}


def _keys_sorted(value: Any) -> Any:
    """``value`` with the keys of every object in it in order."""
    if isinstance(value, dict):
        return {key: _keys_sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_keys_sorted(item) for item in value]
    return value


def _take(metrics: dict[str, Any], part: type) -> dict[str, Any]:
    """Remove and return the keys of ``metrics`` that are fields of ``part``."""
    return {f.name: metrics.pop(f.name) for f in fields(part) if f.name in metrics}


def placement_summary(placement: dict[str, str]) -> str:
    """``ne 12 · cpu 3`` — how many ops ran where, for tables and reports."""
    counts = Counter(placement.values())
    return " · ".join(f"{device} {n}" for device, n in counts.most_common())


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"(?<![A-Za-z_])\d+(?![A-Za-z_])")
_VARNAME = re.compile(r"\b(var|tmp|op|node|input)_\d+\b")
_PATH = re.compile(r"(/[^\s:'\"]+)+")


def normalize_message(message: str, limit: int = 160) -> str:
    """Reduce an error message to what identifies the bug, not the run.

    Addresses, variable numbers, paths and plain integers change between runs and
    between minimized variants of the same failure; they are masked so that the
    signature survives bisection. The first line carries the bug; the rest is dropped.
    """
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    first = _HEX.sub("0x?", first)
    first = _VARNAME.sub(r"\1_?", first)
    first = _PATH.sub("<path>", first)
    first = _NUM.sub("N", first)
    return first[:limit]


def error_signature(stage: str, message: str) -> str:
    return f"error:{stage}:{normalize_message(message)}"


def crash_signature(signal_name: str) -> str:
    return f"crash:{signal_name}"


def mismatch_signature(kind: str) -> str:
    return f"mismatch:{kind}"


@dataclass(frozen=True)
class Tolerance:
    """Allowed error = ``ulps`` × ulp_target(ref) + ``floor`` × max|ref| × eps_target.

    The floor is relative to the output's scale so that elements near zero (where one
    ULP is tiny) are judged by the precision the dtype can deliver for that tensor.
    """

    ulps: float = 8.0
    floor: float = 8.0
    min_cosine: float = 0.0

    @classmethod
    def for_precision(cls, precision: str) -> Tolerance:
        """Defaults that a correct implementation of a whole small network meets."""
        return {
            "fp64": cls(ulps=1e6, floor=1e6),
            "fp32": cls(ulps=256.0, floor=256.0),
            "fp16": cls(ulps=16.0, floor=16.0),
            "bf16": cls(ulps=16.0, floor=16.0),
        }[precision]


@dataclass
class Comparison(Record):
    """One output compared with its reference: pass/fail and what would have passed."""

    name: str
    passed: bool
    kind: str = ""
    max_abs_error: float = 0.0
    max_ulp_error: float = 0.0
    cosine: float = 1.0
    out_of_range: int = 0
    elements: int = 0
    worst_index: list[int] = field(default_factory=list)
    worst_reference: float = 0.0
    worst_output: float = 0.0
    tolerance: Tolerance = field(default_factory=Tolerance)
    required_ulps: float = 0.0
    detail: str = ""
    #: the precision whose ULPs the errors count (the target's, or the one it is judged in)
    precision: str = ""


@dataclass
class ErrorMetrics(Record):
    """What :func:`nebisect.oracle.judge` measured over all outputs: the worst errors,
    the lowest cosine, the out-of-range count, and each output's :class:`Comparison`.

    A verdict keeps them in :attr:`Verdict.error_metrics`; its JSON form writes them as
    :meth:`to_dict` does, flat under ``"metrics"`` beside its other parts' facts.
    """

    max_abs_error: float = 0.0
    max_ulp_error: float = 0.0
    min_cosine: float = 1.0
    out_of_range: int = 0
    comparisons: list[Comparison] = field(default_factory=list)

    @classmethod
    def over(cls, comparisons: list[Comparison]) -> ErrorMetrics:
        """The worst of ``comparisons`` (an empty list measured nothing: no error)."""
        return cls(
            max_abs_error=max((c.max_abs_error for c in comparisons), default=0.0),
            max_ulp_error=max((c.max_ulp_error for c in comparisons), default=0.0),
            min_cosine=min((c.cosine for c in comparisons), default=1.0),
            out_of_range=sum(c.out_of_range for c in comparisons),
            comparisons=comparisons,
        )


