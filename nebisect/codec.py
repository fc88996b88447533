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
:func:`arguments_for` reads the JSON arguments of an isolated job or an executor's unit
as the record its function declares.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import math
import types
import typing
from collections.abc import Callable
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
    skipped when read — unless ``unfold`` names a classmethod that reads them back (a
    mapping of the derived keys present → the field values they hold: a record whose
    fields travel inside a derived key, in a shape of their own); ``schema`` is a
    (name, version) written first as ``schema`` and ``schema_version`` and checked when
    read; ``strict_floats`` writes the whole record as strict JSON (:func:`to_jsonable`:
    non-finite floats as strings, any other value as plain data).
    """

    what: str = ""
    omit_defaults: bool | tuple[str, ...] = False
    skipped: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()
    unfold: str = ""
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
    kind = type(value)
    if kind in _PLAIN_TYPES or (kind is float and not strict):
        return value
    if kind is dict:
        return {(str(k) if strict else k): encode(v, strict=strict) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [encode(v, strict=strict) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Record):
        return _encode_record(value, strict=strict)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if own is None:
            return _encode_record(value, strict=strict)
        return to_jsonable(own()) if strict else own()
    if isinstance(value, np.generic):
        return encode(value.item(), strict=strict)
    if isinstance(value, dict):
        return {(str(k) if strict else k): encode(v, strict=strict) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v, strict=strict) for v in value]
    return to_jsonable(value) if strict else value


#: Values written as they are, whatever the form.
_PLAIN_TYPES = frozenset({str, int, bool, type(None)})


def decode(cls: type[T], data: Any) -> T:
    """The ``cls`` record ``data`` stands for, every value checked against its field type."""
    own = getattr(cls, "from_dict", None)
    if own is not None and not issubclass(cls, Record):
        return typing.cast(T, own(data))
    return _decode_record(cls, data)


def arguments_for(function: Callable[..., Any], data: Any) -> Any:
    """``data`` read as the record ``function``'s first parameter is annotated with: how
    the receiving side of a job or a unit reads its JSON arguments, so a wrong or
    missing key is a :class:`CodecError` at the boundary."""
    if function not in _ARGUMENT_TYPES:
        first = next(iter(inspect.signature(function).parameters))
        _ARGUMENT_TYPES[function] = typing.get_type_hints(function)[first]
    return decode(_ARGUMENT_TYPES[function], data)


_ARGUMENT_TYPES: dict[Callable[..., Any], type] = {}
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


@dataclass(frozen=True)
class _Writer:
    """How one record class is written, worked out once from its fields and form:
    per written field its name, whether it is typed ``Any`` (written as it is), the
    default it is left out at (:data:`_KEPT`: never left out) and the derived keys
    that follow it."""

    form: Form
    fields: tuple[tuple[str, bool, Any, tuple[str, ...]], ...]
    last: tuple[str, ...]


#: A field no default leaves out.
_KEPT = object()
_WRITERS: dict[type, _Writer] = {}


def _writer(cls: type) -> _Writer:
    if cls not in _WRITERS:
        form, hints = _form(cls), _hints(cls)
        omitted = (form.omit_defaults if isinstance(form.omit_defaults, tuple)
                   else tuple(f.name for f in dataclasses.fields(cls)) if form.omit_defaults
                   else ())

        def after(anchor: str) -> tuple[str, ...]:
            return tuple(name for name, at in form.derived if at == anchor)

        _WRITERS[cls] = _Writer(form, tuple(
            (f.name, hints.get(f.name) is Any,
             _default(f) if f.name in omitted else _KEPT, after(f.name))
            for f in dataclasses.fields(cls) if f.name not in form.skipped), after(""))
    return _WRITERS[cls]


def _encode_record(record: Any, *, strict: bool) -> dict[str, Any]:
    writer = _writer(type(record))
    form = writer.form
    strict = strict or form.strict_floats
    body: dict[str, Any] = {}
    if form.schema is not None:
        body["schema"], body["schema_version"] = form.schema
    for name, raw, default, derived in writer.fields:
        value = getattr(record, name)
        if default is _KEPT or value != default:
            body[name] = value if raw and not strict else encode(value, strict=strict)
        for key in derived:
            body[key] = encode(getattr(record, key), strict=strict)
    for key in writer.last:
        body[key] = encode(getattr(record, key), strict=strict)
    if form.order:
        return {**{key: body[key] for key in form.order if key in body}, **body}
    return body


class _WrongType(Exception):
    """A value that does not have its field's type (worded by the field's reader)."""


@dataclass(frozen=True)
class _Reader:
    """How one record class is read, worked out once: the name errors give a key, the
    reader of each field's type, and the fields that must be present."""

    form: Form
    what: str
    fields: dict[str, Callable[[Any], Any]]
    required: tuple[str, ...]


_READERS: dict[type, _Reader] = {}


def _reader(cls: type) -> _Reader:
    if cls not in _READERS:
        form, hints = _form(cls), _hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init and f.name not in form.skipped]
        _READERS[cls] = _Reader(
            form, form.what or f"{cls.__name__} field",
            {f.name: _read(hints[f.name]) for f in fields},
            tuple(f.name for f in fields if _default(f) is dataclasses.MISSING))
    return _READERS[cls]


def _decode_record(cls: type[T], data: Any) -> T:
    reader = _reader(cls)
    form, what = reader.form, reader.what
    if not isinstance(data, collections.abc.Mapping):
        raise CodecError(f"{what}s are not a JSON object ({data!r})")
    body = dict(data)
    if form.schema is not None:
        _check_schema(cls, form.schema, body.pop("schema", None), body.pop("schema_version", None))
    derived = {name: body.pop(name) for name, _ in form.derived if name in body}
    values: dict[str, Any] = getattr(cls, form.unfold)(derived) if form.unfold else {}
    for key, value in body.items():
        read = reader.fields.get(key)
        if read is None:
            raise CodecError(f"unknown {what} {key!r}: one of {', '.join(reader.fields)}")
        try:
            values[key] = read(value)
        except _WrongType:
            raise CodecError(f"{what} {key!r} has the wrong type ({value!r})") from None
    missing = [name for name in reader.required if name not in values]
    if missing:
        raise CodecError(f"{what} {missing[0]!r} is missing")
    return cls(**values)


def _check_schema(cls: type, schema: tuple[str, int], name: Any, version: Any) -> None:
    if (name, version) != schema:
        raise CodecError(f"a {cls.__name__} of schema {name!r} version {version!r}: this "
                         f"nebisect reads {schema[0]} version {schema[1]}")


_TYPE_READERS: dict[Any, Callable[[Any], Any]] = {}


def _read(hint: Any) -> Callable[[Any], Any]:
    """The function that reads a JSON value as ``hint`` (or raises :class:`_WrongType`),
    built once per type."""
    if hint not in _TYPE_READERS:
        _TYPE_READERS[hint] = _build_reader(hint)
    return _TYPE_READERS[hint]


def _build_reader(hint: Any) -> Callable[[Any], Any]:
    if hint is Any:
        return _as_is
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _union_reader(args)
    if hint is None or hint is type(None):
        return _checking(lambda value: value is None)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _record_reader(hint)
    if origin is typing.Literal:
        return _checking(lambda value: value in args)
    if origin in (dict, collections.abc.Mapping):
        return _dict_reader(*(args or (str, Any)))
    if origin is tuple:
        return _tuple_reader(args)
    if origin in (list, collections.abc.Sequence):
        return _list_reader(args[0] if args else Any)
    return _scalar_reader(hint)


def _record_reader(record: type) -> Callable[[Any], Any]:
    """A nested record's reader: one read by the codec is a JSON object (anything else
    is a wrong type, named by the field that holds it)."""
    if hasattr(record, "from_dict") and not issubclass(record, Record):
        return lambda value: decode(record, value)

    def read(value: Any) -> Any:
        if not isinstance(value, collections.abc.Mapping):
            raise _WrongType
        return decode(record, value)
    return read


def _as_is(value: Any) -> Any:
    return value


def _checking(ok: Callable[[Any], bool]) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if not ok(value):
            raise _WrongType
        return value
    return read


def _union_reader(arms: tuple[Any, ...]) -> Callable[[Any], Any]:
    optional = type(None) in arms
    readers = [_read(arm) for arm in arms if arm is not type(None)]

    def read(value: Any) -> Any:
        if value is None and optional:
            return None
        for reader in readers:
            try:
                return reader(value)
            except (_WrongType, CodecError):
                continue
        raise _WrongType
    return read


def _scalar_reader(hint: Any) -> Callable[[Any], Any]:
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        members = hint

        def read_enum(value: Any) -> Any:
            try:
                return members(value)
            except ValueError:
                raise _WrongType from None
        return read_enum
    if hint is bool:
        return _checking(lambda value: isinstance(value, bool))
    if hint is int:
        return _checking(lambda value: isinstance(value, int) and not isinstance(value, bool))
    if hint is float:
        return _read_float
    if hint in (str, list, dict):
        return _checking(lambda value: isinstance(value, hint))
    raise TypeError(f"the codec cannot read a field of type {hint!r}")


def _read_float(value: Any) -> float:
    if isinstance(value, str) and value in NONFINITE:
        return NONFINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _WrongType
    return float(value)


def _read_int_key(key: Any) -> int:
    """A JSON object's key (a string of digits) as an ``int``."""
    try:
        return int(key)
    except ValueError:
        raise _WrongType from None


def _dict_reader(key: Any, item: Any) -> Callable[[Any], Any]:
    read_key = _read_int_key if key is int else _read(key)
    read_item = _read(item)

    def read(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _WrongType
        return {read_key(k): read_item(v) for k, v in value.items()}
    return read


def _tuple_reader(args: tuple[Any, ...]) -> Callable[[Any], Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        read_item = _read(args[0])

        def read_any_length(value: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise _WrongType
            return tuple(read_item(v) for v in value)
        return read_any_length
    readers = [_read(arm) for arm in args]

    def read(value: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(readers):
            raise _WrongType
        return tuple(reader(v) for reader, v in zip(readers, value, strict=True))
    return read


def _list_reader(item: Any) -> Callable[[Any], Any]:
    read_item = _read(item)

    def read(value: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise _WrongType
        return [read_item(v) for v in value]
    return read
