"""``scaled_dot_product_attention`` (iOS18): ``softmax(Q K^T / sqrt(E) + mask) V``.

A bool mask keeps the positions where it is True (others get -inf); a float mask is
added to the scores — coremltools' value inference. The careful kernel max-shifts the
softmax; the naive variant exponentiates raw scores in the compute dtype, so an fp16
score above ~11.1 overflows exactly like a textbook fp16 lowering would.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel


def _scores(query: Any, key: Any, attn_mask: Any) -> np.ndarray:
    q, k = np.asarray(query), np.asarray(key)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / q.dtype.type(np.sqrt(q.shape[-1]))
    if attn_mask is None:
        return scores
    mask = np.asarray(attn_mask)
    if mask.dtype == np.bool_:
        return np.where(mask, scores, q.dtype.type(-np.inf))
    return scores + mask.astype(q.dtype)


@kernel("scaled_dot_product_attention")
def scaled_dot_product_attention(
    ctx: KernelContext, query: Any, key: Any, value: Any, attn_mask: Any = None
) -> np.ndarray:
    scores = _scores(query, key, attn_mask)
    exps = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    return np.matmul(exps / np.sum(exps, axis=-1, keepdims=True), np.asarray(value))


@kernel("scaled_dot_product_attention", variant="naive")
def scaled_dot_product_attention_naive(
    ctx: KernelContext, query: Any, key: Any, value: Any, attn_mask: Any = None
) -> np.ndarray:
    exps = np.exp(_scores(query, key, attn_mask))
    total = np.cumsum(exps, axis=-1, dtype=exps.dtype)[..., -1:]
    return np.matmul(exps / total, np.asarray(value))
