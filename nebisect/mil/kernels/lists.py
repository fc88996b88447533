"""MIL list ops (``make_list``, ``list_*``), which coremltools emits inside ``while_loop``.

Semantics from coremltools ``mil/ops/defs/iOS15/control_flow.py`` and its op tests: a
list is an auto-resizing array of equally shaped tensors, initially ``init_length``
zeros; writing past the end grows it with zeros; reads and gathers of never-written
slots give zeros. Lists are values (every write returns a new list), so a list held
by a loop iteration is never changed behind its back. The element shape may be
symbolic at build time (strings in ``elem_shape``); it is then taken from the first
element written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel

_DTYPES = {"fp16": "f", "fp32": "f", "int32": np.int32, "bool": np.bool_}


@dataclass(frozen=True)
class TensorList:
    """An immutable list value; ``None`` marks a slot never written (reads as zeros)."""

    items: tuple[Any, ...]
    elem_shape: tuple[int, ...] | None
    dtype: Any

    def slot(self, index: int) -> np.ndarray:
        if index < 0 or index >= len(self.items):
            raise IndexError(f"list index {index} outside a list of length {len(self.items)}")
        item = self.items[index]
        return self.zeros() if item is None else item

    def zeros(self) -> np.ndarray:
        shape = self.elem_shape
        if shape is None:
            written = [i for i in self.items if i is not None]
            if not written:
                raise ValueError("list element shape is symbolic and nothing was written yet")
            shape = written[0].shape
        return np.zeros(shape, dtype=self.dtype)

    def write(self, index: int, value: np.ndarray) -> TensorList:
        items = list(self.items)
        if index >= len(items):
            items.extend([None] * (index + 1 - len(items)))
        items[index] = np.asarray(value)
        return TensorList(tuple(items), self.elem_shape, self.dtype)


@kernel("make_list")
def make_list(
    ctx: KernelContext,
    elem_shape: list[Any],
    init_length: Any = None,
    dynamic_length: Any = None,
    dtype: Any = None,
) -> TensorList:
    kind = _DTYPES.get(str(dtype) if dtype is not None else "fp32")
    if kind is None:
        raise ValueError(f"unsupported list dtype {dtype!r}")
    numpy_dtype = ctx.dtype if kind == "f" else kind
    dims = [np.asarray(d).item() for d in elem_shape]
    shape = None if any(isinstance(d, str) for d in dims) else tuple(int(d) for d in dims)
    length = 1 if init_length is None else int(init_length)
    return TensorList((None,) * length, shape, numpy_dtype)


@kernel("list_length")
def list_length(ctx: KernelContext, ls: TensorList) -> np.ndarray:
    return np.asarray(len(ls.items), dtype=np.int32)


@kernel("list_write")
def list_write(ctx: KernelContext, ls: TensorList, index: Any, value: Any) -> TensorList:
    return ls.write(int(index), value)


@kernel("list_read")
def list_read(ctx: KernelContext, ls: TensorList, index: Any) -> np.ndarray:
    return ls.slot(int(index))


@kernel("list_gather")
def list_gather(ctx: KernelContext, ls: TensorList, indices: Any) -> np.ndarray:
    return np.stack([ls.slot(int(i)) for i in np.atleast_1d(indices)])


@kernel("list_scatter")
def list_scatter(ctx: KernelContext, ls: TensorList, indices: Any, value: Any) -> TensorList:
    for index, row in zip(np.atleast_1d(indices), np.asarray(value), strict=True):
        ls = ls.write(int(index), row)
    return ls
