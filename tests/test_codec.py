"""The dataclass <-> JSON codec: forms read off field types, unknown keys refused, and
the shipped corpus re-encoded byte for byte under its ids."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest
from support import REPO

from nebisect.codec import CodecError, Form, Record, arguments_for, decode, encode
from nebisect.corpus import CaseRecord
from nebisect.verdict import Stage, Verdict


@dataclass(frozen=True)
class Point(Record):
    x: float
    label: str = ""


@dataclass
class Shape(Record):
    json_form: ClassVar[Form] = Form(what="shape field", derived=(("count", "points"),),
                                     schema=("test.shape", 2))

    name: str
    points: list[Point] = field(default_factory=list)
    stage: Stage = Stage.PREDICT
    span: tuple[int, int] | None = None
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    note: Any = None

    @property
    def count(self) -> int:
        return len(self.points)


@dataclass
class Sparse(Record):
    json_form: ClassVar[Form] = Form(omit_defaults=True, strict_floats=True)

    values: list[float] = field(default_factory=list)
    flag: bool = False


def test_a_record_round_trips_in_field_order_with_its_schema_and_derived_keys() -> None:
    shape = Shape("s", [Point(np.float32(1.5)), Point(2.0, "b")], Stage.CONVERT, (1, 2),
                  {"k": ("a",)}, {"free": (1, 2)})
    body = shape.to_dict()
    assert list(body) == ["schema", "schema_version", "name", "points", "count", "stage",
                          "span", "tags", "note"]
    assert body["count"] == 2 and body["stage"] == "convert" and body["span"] == [1, 2]
    assert type(body["points"][0]["x"]) is float and body["note"] == {"free": (1, 2)}
    back = Shape.from_dict(json.loads(json.dumps(body)))
    assert back.points == shape.points and back.span == (1, 2) and back.tags == {"k": ("a",)}
    assert back.stage is Stage.CONVERT


def test_defaults_are_left_out_and_non_finite_floats_are_strings_where_the_form_says() -> None:
    assert Sparse().to_dict() == {}
    body = Sparse([math.inf, math.nan, 1.0]).to_dict()
    assert body == {"values": ["Infinity", "NaN", 1.0]}
    back = decode(Sparse, body)
    assert back.values[0] == math.inf and math.isnan(back.values[1])


@pytest.mark.parametrize(("data", "message"), [
    ({"name": "s", "colour": 1}, r"unknown shape field 'colour': one of name, points, stage"),
    ({"name": 3}, r"shape field 'name' has the wrong type \(3\)"),
    ({"name": "s", "span": [1]}, r"shape field 'span' has the wrong type"),
    ({"name": "s", "stage": "bake"}, r"shape field 'stage' has the wrong type"),
    ({"name": "s", "points": [{"x": True}]}, r"Point field 'x' has the wrong type \(True\)"),
    ({"name": "s", "points": ["p"]}, r"shape field 'points' has the wrong type"),
    ({}, r"shape field 'name' is missing"),
    ([], r"shape fields are not a JSON object"),
])
def test_a_malformed_object_is_one_line_naming_the_key(data: Any, message: str) -> None:
    if isinstance(data, dict):
        data = {"schema": "test.shape", "schema_version": 2, **data}
    with pytest.raises(CodecError, match=message):
        Shape.from_dict(data)


def test_another_schema_version_is_refused() -> None:
    with pytest.raises(CodecError, match=r"schema 'test\.shape' version 1: this "
                                         r"nebisect reads test\.shape version 2"):
        Shape.from_dict({"schema": "test.shape", "schema_version": 1, "name": "s"})


def test_encode_and_decode_serve_plain_dataclasses_too() -> None:
    @dataclass
    class Plain:
        values: tuple[int, ...] = ()

    assert encode(Plain((1, 2))) == {"values": [1, 2]}
    assert decode(Plain, {"values": [1, 2]}) == Plain((1, 2))


@pytest.mark.parametrize("case", sorted(REPO.glob("corpus/*/case.json")),
                         ids=lambda path: path.parent.name)
def test_every_shipped_case_re_encodes_byte_for_byte_under_its_id(case: Any) -> None:
    """Case ids are content hashes of the JSON: the codec must write every shipped case
    exactly as it is stored."""
    text = case.read_text()
    record = CaseRecord.from_json(text)
    assert record.to_json() == text
    assert record.identity() == record.case_id == case.parent.name


@dataclass
class Held(Record):
    verdict: Verdict | None = None


def test_a_nested_record_with_a_form_of_its_own_is_read_and_written_by_it() -> None:
    held = Held(Verdict(status="pass"))
    assert Held.from_dict(held.to_dict()).verdict == held.verdict
    assert Held.from_dict({"verdict": None}).verdict is None


@dataclass
class Folded(Record):
    """Two fields that travel inside one derived key, as a verdict's typed parts do."""

    json_form: ClassVar[Form] = Form(skipped=("low", "high"), derived=(("span", "name"),),
                                     unfold="unfold_span")

    name: str
    low: int = 0
    high: int = 0

    @property
    def span(self) -> str:
        return f"{self.low}..{self.high}"

    @classmethod
    def unfold_span(cls, derived: dict[str, Any]) -> dict[str, Any]:
        low, _, high = derived.get("span", "0..0").partition("..")
        return {"low": int(low), "high": int(high)}


def test_derived_keys_an_unfold_reads_back_into_fields() -> None:
    folded = Folded("f", 2, 5)
    assert folded.to_dict() == {"name": "f", "span": "2..5"}
    assert Folded.from_dict(folded.to_dict()) == folded


@dataclass(frozen=True)
class Arguments:
    path: str
    count: int = 1


def job(arguments: Arguments) -> str:
    return f"{arguments.path}×{arguments.count}"


def test_a_jobs_arguments_are_read_as_the_record_its_function_declares() -> None:
    assert job(arguments_for(job, encode(Arguments("p", 3)))) == "p×3"
    with pytest.raises(CodecError, match="unknown Arguments field 'paht'"):
        arguments_for(job, {"paht": "p"})
    with pytest.raises(CodecError, match="Arguments field 'path' is missing"):
        arguments_for(job, {"count": 2})
