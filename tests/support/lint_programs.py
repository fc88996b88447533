"""Small MIL programs for the lint tests: each hazard and its cured counterpart.

Built with coremltools' MIL builder so the tests need no torch conversion; every
function takes only JSON-able keyword arguments, so ``support.lint_programs:NAME`` also works
as a ``module:function`` builder source on the command line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()

from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol, types  # noqa: E402

OPSET = ct.target.iOS17
CHANNELS = 32


def _dtype(name: str) -> Any:
    return {"fp16": types.fp16, "fp32": types.fp32}[name]


def _np(name: str) -> Any:
    return {"fp16": np.float16, "fp32": np.float32}[name]


def seed000(shifted: bool = False, dtype: str = "fp16", delta: bool = True) -> Any:
    """Seed 000 in MIL: delta conv(1→32) → logsumexp over channels → tile → linear.

    ``delta`` keeps the seed's centre-tap conv (all channels equal the input, the
    regime where the cliff is attained); otherwise the conv weights are random.
    """
    rng = np.random.default_rng(0)
    weight = np.zeros((CHANNELS, 1, 3, 3), dtype=_np(dtype))
    if delta:
        weight[:, 0, 1, 1] = 1
    else:
        weight[:] = rng.uniform(-0.5, 0.5, weight.shape)
    head = np.eye(16, 8 * 8 * CHANNELS, dtype=_np(dtype))

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 8, 8), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        c = mb.conv(x=x, weight=weight, bias=np.zeros(CHANNELS, _np(dtype)), pad_type="same",
                    name="conv")
        if shifted:
            peak = mb.reduce_max(x=c, axes=[1], keep_dims=True, name="peak")
            lse = mb.reduce_log_sum_exp(x=mb.sub(x=c, y=peak), axes=[1], keep_dims=True,
                                        name="lse")
            lse = mb.add(x=lse, y=peak, name="unshift")
        else:
            lse = mb.reduce_log_sum_exp(x=c, axes=[1], keep_dims=True, name="lse")
        tiled = mb.tile(x=lse, reps=[1, CHANNELS, 1, 1])
        flat = mb.reshape(x=tiled, shape=[1, 8 * 8 * CHANNELS])
        return mb.linear(x=flat, weight=head, name="head")

    return prog


def softplus(stable: bool = False, dtype: str = "fp16") -> Any:
    """softplus(x), or the stable identity max(x, 0) + log(1 + exp(-|x|))."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 10), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        if not stable:
            return mb.softplus(x=x, name="softplus")
        tail = mb.log(x=mb.add(x=mb.exp(x=mb.mul(x=mb.abs(x=x), y=_np(dtype)(-1))),
                               y=_np(dtype)(1)))
        return mb.add(x=mb.relu(x=x), y=tail, name="softplus_stable")

    return prog


def log_softmax(stable: bool = False, dtype: str = "fp16") -> Any:
    """log(softmax(x)) as coremltools 9.0 converts log_softmax, or x − m − log Σ exp(x − m)."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 8), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        if not stable:
            return mb.log(x=mb.softmax(x=x, axis=-1, name="softmax"), name="log")
        peak = mb.reduce_max(x=x, axes=[-1], keep_dims=True)
        shifted = mb.sub(x=x, y=peak)
        total = mb.reduce_sum(x=mb.exp(x=shifted), axes=[-1], keep_dims=True)
        return mb.sub(x=shifted, y=mb.log(x=total), name="log_softmax")

    return prog


def logcumsumexp(shifted: bool = False, dtype: str = "fp16") -> Any:
    """log(cumsum(exp(x))), or its max-shifted form m + log(cumsum(exp(x − m)))."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 8), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        if not shifted:
            return mb.log(x=mb.cumsum(x=mb.exp(x=x), axis=-1), name="log")
        peak = mb.reduce_max(x=x, axes=[-1], keep_dims=True)
        total = mb.cumsum(x=mb.exp(x=mb.sub(x=x, y=peak)), axis=-1)
        return mb.add(x=mb.log(x=total), y=peak, name="logcumsumexp")

    return prog


def rms_norm(rescaled: bool = False, dtype: str = "fp16", width: int = 64) -> Any:
    """x · rsqrt(mean(x²) + eps), optionally rescaled by max|x| first (coremltools' form)."""
    fp = _np(dtype)

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, width), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        if not rescaled:
            squares = mb.pow(x=x, y=fp(2), name="squares")
            mean = mb.reduce_mean(x=squares, axes=[-1], keep_dims=True, name="mean")
            return mb.mul(x=x, y=mb.rsqrt(x=mb.add(x=mean, y=fp(1e-5))), name="rms")
        scale = mb.reduce_max(x=mb.abs(x=x), axes=[-1], keep_dims=True)
        scaled = mb.real_div(x=x, y=scale)
        mean = mb.reduce_mean(x=mb.square(x=scaled), axes=[-1], keep_dims=True)
        rms = mb.mul(x=mb.sqrt(x=mb.add(x=mean, y=fp(1e-5))), y=scale)
        return mb.real_div(x=x, y=rms, name="rms")

    return prog


def masked_attention(sentinel: float = float(np.finfo(np.float32).min), dtype: str = "fp16",
                     multiply: bool = True) -> Any:
    """softmax(scores + mask) with the mask built from ``sentinel``.

    ``multiply``: ``(1 − m) · sentinel`` (the HF eager pattern); else
    ``select(m, 0, sentinel)``.
    """

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4, 4), dtype=_dtype(dtype)),
                             mb.TensorSpec(shape=(1, 1, 4), dtype=_dtype(dtype))],
                opset_version=OPSET)
    def prog(scores: Any, m: Any) -> Any:
        value = np.array(sentinel, dtype=np.float32)
        if dtype == "fp16":
            value = value.astype(np.float16)
        fill = mb.const(val=value, name="sentinel")
        if multiply:
            mask = mb.mul(x=mb.sub(x=_np(dtype)(1), y=m), y=fill, name="mask")
        else:
            keep = mb.greater(x=m, y=_np(dtype)(0.5))
            mask = mb.select(cond=keep, a=_np(dtype)(0), b=fill, name="mask")
        return mb.softmax(x=mb.add(x=scores, y=mask), axis=-1, name="attention")

    return prog


def big_constant(value: float = 1.0e5) -> Any:
    """An fp32 program that adds a constant; out of the fp16 range for |value| > 65504."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)],
                opset_version=OPSET)
    def prog(x: Any) -> Any:
        return mb.add(x=x, y=np.full((1, 4), value, np.float32), name="shifted")

    return prog


def meanpool(static: bool = False) -> Any:
    """Seed 003's masked mean-pool over a flexible sequence, as coremltools converts it.

    The mask is tiled by repetitions computed from shapes at run time (data-dependent
    output shape); ``static`` multiplies by the broadcastable mask instead.
    """
    length = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, length, 16), dtype=types.fp32),
                             mb.TensorSpec(shape=(1, length), dtype=types.int32)],
                opset_version=ct.target.iOS18)
    def prog(tokens: Any, mask: Any) -> Any:
        column = mb.expand_dims(x=mask, axes=[-1])
        if not static:
            reps = mb.real_div(x=mb.shape(x=tokens), y=mb.shape(x=column))
            column = mb.tile(x=column, reps=reps, name="expand")
        weights = mb.cast(x=column, dtype="fp32")
        total = mb.reduce_sum(x=mb.mul(x=tokens, y=weights), axes=[1], keep_dims=False)
        count = mb.clip(x=mb.reduce_sum(x=weights, axes=[1], keep_dims=False),
                        alpha=np.float32(1e-9), beta=np.float32(np.inf))
        return mb.real_div(x=total, y=count, name="pooled")

    return prog
