"""Linear algebra kernels: ``matmul`` (transposes, batch broadcasting, 1-D promotion),
``linear`` (``x @ W.T + b``) and ``einsum``.

Products are computed in the compute dtype with numpy's matmul; numpy accumulates
float16 products in float32 internally, which is the careful-device model. The naive
variant accumulates in the compute dtype term by term (fp16 running sums), the
textbook lowering whose overflow ``fp16-naive`` is meant to expose.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.blocks import matmul_batches, matmul_rows
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import flag, into_fresh, text


def _operands(x: Any, y: Any, transpose_x: Any, transpose_y: Any) -> tuple[np.ndarray, ...]:
    x, y = np.asarray(x), np.asarray(y)
    if flag(transpose_x) and x.ndim > 1:
        x = np.swapaxes(x, -1, -2)
    if flag(transpose_y) and y.ndim > 1:
        y = np.swapaxes(y, -1, -2)
    return x, y


@kernel("matmul")
def matmul(
    ctx: KernelContext, x: Any, y: Any, transpose_x: Any = False, transpose_y: Any = False
) -> np.ndarray:
    a, b = _operands(x, y, transpose_x, transpose_y)
    return matmul_batches(a, b)


def naive_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` summing one rank-1 product at a time in the operands' dtype."""
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    a2 = a[None, :] if vec_a else a
    b2 = b[:, None] if vec_b else b
    shape = np.broadcast_shapes((*a2.shape[:-1], 1), (*b2.shape[:-2], 1, b2.shape[-1]))
    acc = np.zeros(shape, dtype=np.result_type(a2, b2))
    for k in range(a2.shape[-1]):
        acc = acc + a2[..., :, k : k + 1] * b2[..., k : k + 1, :]
    if vec_a:
        acc = acc[..., 0, :]
    if vec_b:
        acc = acc[..., 0]
    return acc


@kernel("matmul", variant="naive")
def matmul_naive(
    ctx: KernelContext, x: Any, y: Any, transpose_x: Any = False, transpose_y: Any = False
) -> np.ndarray:
    return naive_matmul(*_operands(x, y, transpose_x, transpose_y))


@kernel("linear")
def linear(ctx: KernelContext, x: Any, weight: Any, bias: Any = None) -> np.ndarray:
    x, weight = np.asarray(x), np.asarray(weight)
    if x.ndim >= 2 and weight.ndim == 2 and x.size == x.shape[-2] * x.shape[-1]:
        rows = matmul_rows(x.reshape(x.shape[-2:]), weight.T)  # one matrix, one product
        out = rows.reshape(*x.shape[:-1], weight.shape[0])
    else:
        out = np.matmul(x, weight.T)
    return out if bias is None else into_fresh(np.add, out, bias)


@kernel("linear", variant="naive")
def linear_naive(ctx: KernelContext, x: Any, weight: Any, bias: Any = None) -> np.ndarray:
    out = naive_matmul(np.asarray(x), np.asarray(weight).T)
    return out if bias is None else out + np.asarray(bias)


def _parse(equation: str) -> tuple[list[str], str]:
    lhs, rhs = equation.replace(" ", "").split("->")
    return lhs.split(","), rhs


@kernel("einsum")
def einsum(ctx: KernelContext, values: list[Any], equation: Any) -> np.ndarray:
    """numpy einsum after broadcasting size-1 dims of a label to its size elsewhere."""
    inputs, output = _parse(text(equation))
    arrays = [np.asarray(v) for v in values]
    sizes: dict[str, int] = {}
    for labels, array in zip(inputs, arrays, strict=True):
        for label, dim in zip(labels, array.shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), dim)
    expanded = [
        np.broadcast_to(array, [sizes[label] for label in labels])
        for labels, array in zip(inputs, arrays, strict=True)
    ]
    return np.asarray(np.einsum(f"{','.join(inputs)}->{output}", *expanded))
