"""Model input descriptions: generate valid inputs at each length, check given ones.

Seed 003 crashed at every sequence length the reporter tried (2, 8, 37, 128, 380), but a
bug that appears only at some lengths is common, so every flexible dimension is run at
each requested length inside its range. Integer inputs that look like token ids or
attention masks get values a real tokenizer would produce; a mask gets trailing zeros
so masked pooling is exercised, not just an all-ones multiply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.codec import Record
from nebisect.errors import NebisectError

DEFAULT_LENGTHS = (2, 8, 37, 128, 380)
_SPEC_DTYPES = {
    "FLOAT16": "float16",
    "FLOAT32": "float32",
    "DOUBLE": "float64",
    "FLOAT64": "float64",
    "INT32": "int32",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT16": "int16",
}


@dataclass
class InputDescription(Record):
    """One model input: dtype and per-dimension ``(lo, hi)`` bounds (lo == hi: fixed).

    ``hi`` of -1 means unbounded. ``enumerated`` lists the allowed shapes of an
    EnumeratedShapes input (then ``dims`` holds the default shape).
    """

    name: str
    dtype: str
    dims: list[tuple[int, int]]
    enumerated: list[list[int]] = field(default_factory=list)

    @property
    def flexible(self) -> bool:
        return bool(self.enumerated) or any(lo != hi for lo, hi in self.dims)

    def shapes_at(self, length: int) -> list[int]:
        """The shape at a requested ``length``: every flexible dim clipped into range."""
        if self.enumerated:
            return min(self.enumerated, key=lambda s: abs(max(s) - length))
        shape = []
        for lo, hi in self.dims:
            upper = hi if hi > 0 else max(lo, length)
            shape.append(lo if lo == hi else int(min(max(length, lo), upper)))
        return shape

    def accepts(self, shape: tuple[int, ...]) -> bool:
        if self.enumerated:
            return list(shape) in self.enumerated
        return len(shape) == len(self.dims) and all(
            lo <= n and (hi < 0 or n <= hi) for n, (lo, hi) in zip(shape, self.dims, strict=True)
        )

    def describe(self) -> str:
        dims = ", ".join(str(lo) if lo == hi else f"{lo}..{hi if hi > 0 else '∞'}"
                         for lo, hi in self.dims)
        return f"{self.name}: {self.dtype}[{dims}]"


def describe_package(path: str | Path, function: str = "") -> list[InputDescription]:
    """Input descriptions from an ``.mlpackage``'s model spec (ranges included), of
    ``function`` for a multifunction package (its default when "")."""
    from nebisect.mil.load import function_description, read_spec

    try:
        spec = read_spec(path)
    except Exception as exc:
        raise NebisectError(f"{path}: cannot read the model spec ({exc})") from None
    return describe_spec(function_description(spec, function, str(path)), path)


def describe_spec(description: Any, path: str | Path) -> list[InputDescription]:
    """Input descriptions from a model's (or one function's) description already read
    (``path`` names it in errors)."""
    described = []
    for feature in description.input:
        array = feature.type.multiArrayType
        if feature.type.WhichOneof("Type") != "multiArrayType":
            raise NebisectError(f"{path}: input {feature.name!r} is not a tensor (image inputs "
                                "are not supported)")
        dtype_name = type(array).ArrayDataType.Name(array.dataType)
        if dtype_name not in _SPEC_DTYPES:
            raise NebisectError(f"{path}: input {feature.name!r} has unsupported type {dtype_name}")
        shape = [int(n) for n in array.shape]
        dims = [(n, n) for n in shape]
        ranges = array.shapeRange.sizeRanges
        if len(ranges):
            dims = [(int(r.lowerBound), int(r.upperBound)) for r in ranges]
        enumerated = [[int(n) for n in s.shape] for s in array.enumeratedShapes.shapes]
        described.append(InputDescription(feature.name, _SPEC_DTYPES[dtype_name], dims, enumerated))
    return described


def lengths_for(descriptions: list[InputDescription], lengths: tuple[int, ...]) -> list[int]:
    """The requested lengths, clipped into the flexible ranges, duplicates dropped.

    A model with no flexible dimension runs once (length 0 stands for "static").
    """
    flexible = [d for d in descriptions if d.flexible]
    if not flexible:
        return [0]
    clipped: list[int] = []
    for length in lengths:
        value = _clip_to_ranges(flexible, length)
        if value not in clipped:
            clipped.append(value)
    return clipped


def _clip_to_ranges(flexible: list[InputDescription], length: int) -> int:
    lows = [lo for d in flexible for lo, hi in d.dims if lo != hi]
    highs = [hi for d in flexible for lo, hi in d.dims if lo != hi and hi > 0]
    value = max(length, max(lows, default=1))
    return min(value, min(highs)) if highs else value


def generate(
    descriptions: list[InputDescription], length: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """Deterministic inputs for every description at ``length``; an input too large for
    the memory limit is refused before it is drawn (:mod:`nebisect.mil.sizes`)."""
    from nebisect.isolation import memory
    from nebisect.mil.sizes import check_shape

    budget = memory.budget()
    rng = np.random.default_rng(seed)
    arrays = {}
    for desc in descriptions:
        shape = desc.shapes_at(length) if desc.flexible else [lo for lo, _ in desc.dims]
        check_shape(shape, f"input {desc.name!r}", budget)
        arrays[desc.name] = _values(desc, shape, rng)
    return arrays


def _values(desc: InputDescription, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    lowered = desc.name.lower()
    if np.issubdtype(np.dtype(desc.dtype), np.floating):
        return rng.standard_normal(shape).astype(desc.dtype)
    if "mask" in lowered:
        mask = np.ones(shape, dtype=desc.dtype)
        if shape and shape[-1] >= 4:
            mask[..., -(shape[-1] // 4):] = 0
        return mask
    if "type" in lowered or "segment" in lowered:
        return np.zeros(shape, dtype=desc.dtype)
    if "position" in lowered and shape:
        return np.broadcast_to(np.arange(shape[-1], dtype=desc.dtype), shape).copy()
    return rng.integers(1, 1000, size=shape).astype(desc.dtype)


def check(descriptions: list[InputDescription], arrays: dict[str, np.ndarray]) -> None:
    """Reject inputs that do not fit the model, naming the first problem."""
    expected = {d.name: d for d in descriptions}
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected))
    if missing or extra:
        raise NebisectError(
            f"inputs do not match the model: missing {missing or 'none'}, unexpected "
            f"{extra or 'none'}; the model takes " + "; ".join(d.describe() for d in descriptions)
        )
    for name, desc in expected.items():
        array = arrays[name]
        want = np.dtype(desc.dtype)
        if array.dtype.kind != want.kind:
            raise NebisectError(f"input {name!r} has dtype {array.dtype}, the model takes {want}")
        if not desc.accepts(tuple(array.shape)):
            raise NebisectError(
                f"input {name!r} has shape {list(array.shape)}, the model takes {desc.describe()}"
            )
