"""The one dataclass <-> JSON codec: a record's JSON form is read off its field types.

:func:`encode` writes a dataclass as a JSON object, its fields in declaration order:
nested records as objects, tuples and lists as lists, enums by value, numpy scalars as
the Python numbers they hold; a field typed ``Any`` is written as it is. :func:`decode`
reads the object back, checking every value against its field's type, so an unknown
key, a missing field or a wrongly typed value is a one-line :class:`CodecError` that
names it — never dropped, never a ``TypeError`` deeper in.

A record whose JSON differs from its fields declares how in a :class:`Form` (its
``json_form`` class attribute): fields left out at their default, properties written
beside the fields, a schema name and version, non-finite floats as strings. A nested
record with a ``to_dict`` / ``from_dict`` of its own (a custom form) is written and read
by them. :class:`Record` gives a dataclass ``to_dict`` / ``from_dict`` through the codec.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar

import numpy as np

from nebisect.errors import NebisectError

T = TypeVar("T")

#: The strings strict JSON holds non-finite floats as (:func:`to_jsonable`).
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class CodecError(NebisectError, ValueError):
    """A JSON object that does not follow its record's form."""


@dataclass(frozen=True)
class Form:
    """How a record's JSON object differs from its fields in declaration order.

    ``what`` names a key in errors (``case option`` → "unknown case option 'x'");
    ``omit_defaults`` leaves out every field equal to its default (True) or those named;
    ``skipped`` fields are never written nor read (they keep their default: arrays that
    travel beside the JSON, a start time); ``order`` puts the keys it names first, in
    its order (a command's JSON output reads in that order); ``derived`` are
    properties written after the field each names (``""``: after every field) and
    skipped when read; ``schema`` is a (name, version) written first as ``schema`` and
    ``schema_version`` and checked when read; ``strict_floats`` writes the whole record
    as strict JSON (:func:`to_jsonable`: non-finite floats as strings, any other value
    as plain data).
    """

    what: str = ""
    omit_defaults: bool | tuple[str, ...] = False
    skipped: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()
    schema: tuple[str, int] | None = None
    strict_floats: bool = False


PLAIN = Form()


class Record:
    """``to_dict`` / ``from_dict`` by the codec, for a dataclass (its form: ``json_form``)."""

    json_form: ClassVar[Form] = PLAIN

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON object (:func:`encode`)."""
        return _encode_record(self, strict=False)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """The record a JSON object stands for (:func:`decode`)."""
        return _decode_record(cls, data)


def to_jsonable(value: Any) -> Any:
    """``value`` as strict-JSON data: non-finite floats become strings, numpy → Python,
    anything else unknown → its ``str``."""
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, np.generic | np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return str(value)


def number(value: Any) -> float:
    """The float a JSON number or non-finite string stands for."""
    if isinstance(value, str):
        return NONFINITE[value]
    return float(value)


def encode(value: Any, *, strict: bool = False) -> Any:
    """``value`` as JSON data, records by their form; ``strict``: as :func:`to_jsonable`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if own is None or isinstance(value, Record):
            return _encode_record(value, strict=strict)
        return to_jsonable(own()) if strict else own()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, np.generic):
        return encode(value.item(), strict=strict)
    if isinstance(value, dict):
        return {(str(k) if strict else k): encode(v, strict=strict) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v, strict=strict) for v in value]
    return to_jsonable(value) if strict else value


def decode(cls: type[T], data: Any) -> T:
    """The ``cls`` record ``data`` stands for, every value checked against its field type."""
    own = getattr(cls, "from_dict", None)
    if own is not None and not issubclass(cls, Record):
        return typing.cast(T, own(data))
    return _decode_record(cls, data)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved field types of ``cls``, read once."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _form(cls: type) -> Form:
    form = getattr(cls, "json_form", PLAIN)
    return form if isinstance(form, Form) else PLAIN


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _encode_record(record: Any, *, strict: bool) -> dict[str, Any]:
    cls = type(record)
    form = _form(cls)
    strict = strict or form.strict_floats
    hints = _hints(cls)
    body: dict[str, Any] = {}
    if form.schema is not None:
        body["schema"], body["schema_version"] = form.schema
    derived = dict(form.derived)
    for field in dataclasses.fields(record):
        if field.name in form.skipped:
            continue
        value = getattr(record, field.name)
        omitted = (form.omit_defaults is True or field.name in (form.omit_defaults or ()))
        if not (omitted and value == _default(field)):
            if hints.get(field.name) is Any and not strict:
                body[field.name] = value
            else:
                body[field.name] = encode(value, strict=strict)
        _add_derived(body, record, derived, field.name, strict)
    _add_derived(body, record, derived, "", strict)
    if form.order:
        return {**{key: body[key] for key in form.order if key in body}, **body}
    return body


def _add_derived(body: dict[str, Any], record: Any, derived: dict[str, str], after: str,
                 strict: bool) -> None:
    for name, anchor in derived.items():
        if anchor == after:
            body[name] = encode(getattr(record, name), strict=strict)


class _WrongType(Exception):
    """A value that does not have its field's type (worded by the field's reader)."""


def _decode_record(cls: type[T], data: Any) -> T:
    form = _form(cls)
    what = form.what or f"{cls.__name__} field"
    if not isinstance(data, collections.abc.Mapping):
        raise CodecError(f"{what}s are not a JSON object ({data!r})")
    body = dict(data)
    if form.schema is not None:
        _check_schema(cls, form.schema, body.pop("schema", None), body.pop("schema_version", None))
    for name, _ in form.derived:
        body.pop(name, None)
    hints = _hints(cls)
    fields = [f for f in dataclasses.fields(typing.cast(Any, cls))
              if f.init and f.name not in form.skipped]
    known = [f.name for f in fields]
    values: dict[str, Any] = {}
    for key, value in body.items():
        if key not in known:
            raise CodecError(f"unknown {what} {key!r}: one of {', '.join(known)}")
        try:
            values[key] = _decode(hints[key], value)
        except _WrongType:
            raise CodecError(f"{what} {key!r} has the wrong type ({value!r})") from None
    missing = [f.name for f in fields
               if f.name not in values and _default(f) is dataclasses.MISSING]
    if missing:
        raise CodecError(f"{what} {missing[0]!r} is missing")
    return cls(**values)


def _check_schema(cls: type, schema: tuple[str, int], name: Any, version: Any) -> None:
    if (name, version) != schema:
        raise CodecError(f"a {cls.__name__} of schema {name!r} version {version!r}: this "
                         f"nebisect reads {schema[0]} version {schema[1]}")


def _decode(hint: Any, value: Any) -> Any:
    """``value`` as an instance of ``hint``, or :class:`_WrongType`."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _decode_union(args, value)
    if hint is None or hint is type(None):
        return _checked(value, value is None)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return decode(hint, value)
    if origin is typing.Literal:
        return _checked(value, value in args)
    if origin is not None:
        return _decode_container(origin, args, value)
    return _decode_scalar(hint, value)


def _checked(value: Any, ok: bool) -> Any:
    if not ok:
        raise _WrongType
    return value


def _decode_union(arms: tuple[Any, ...], value: Any) -> Any:
    if value is None and type(None) in arms:
        return None
    for arm in arms:
        try:
            return _decode(arm, value)
        except (_WrongType, CodecError):
            continue
    raise _WrongType


def _decode_scalar(hint: Any, value: Any) -> Any:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise _WrongType from None
    if hint is bool:
        return _checked(value, isinstance(value, bool))
    if hint is int:
        return _checked(value, isinstance(value, int) and not isinstance(value, bool))
    if hint is float:
        if isinstance(value, str) and value in NONFINITE:
            return NONFINITE[value]
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        return float(_checked(value, numeric))
    if hint in (str, list, dict):
        return _checked(value, isinstance(value, hint))
    raise TypeError(f"the codec cannot read a field of type {hint!r}")


def _decode_key(hint: Any, key: Any) -> Any:
    """A JSON object's key (a string) as its declared type: an ``int`` key from digits."""
    if hint is int and isinstance(key, str):
        try:
            return int(key)
        except ValueError:
            raise _WrongType from None
    return _decode(hint, key)


def _decode_container(origin: Any, args: tuple[Any, ...], value: Any) -> Any:
    if origin in (dict, collections.abc.Mapping):
        _checked(value, isinstance(value, dict))
        key, item = args or (str, Any)
        return {_decode_key(key, k): _decode(item, v) for k, v in value.items()}
    _checked(value, isinstance(value, list | tuple))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        _checked(value, len(value) == len(args))
        return tuple(_decode(arm, v) for arm, v in zip(args, value, strict=True))
    item = args[0] if args else Any
    return [_decode(item, v) for v in value]
