"""Small fp32 programs around ``reduce_log_sum_exp`` for the max-shift matcher, with
whether each is max-shifted (its ``Σ exp`` cannot overflow fp16).

Shared by the matcher's own tests and by the test that lint and the
``logsumexp-max-shift`` fix agree on every one of them; ``cast-after-sub`` and
``lossy-cast-on-max`` are the two where they used to disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

SHAPE = (8, 8)


def _shift(x: Any, axes: list[int] | None = None, keep: bool = True) -> Any:
    return mb.sub(x=x, y=mb.reduce_max(x=x, axes=axes or [1], keep_dims=keep))


def _lse(x: Any, axes: list[int] | None = None) -> Any:
    return mb.reduce_log_sum_exp(x=x, axes=axes or [1], keep_dims=True, name="lse")


#: name → (body of a one-input fp32 program, is the lse's input max-shifted)
BODIES: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "shifted": (lambda x: _lse(_shift(x)), True),
    "unshifted": (lambda x: _lse(x), False),
    # sub in fp32, then rounded to fp16: x − m ≤ 0 stays ≤ 0 (values < −65504 → −inf).
    "cast-after-sub": (lambda x: _lse(mb.cast(x=mb.cast(x=_shift(x), dtype="fp16"),
                                              dtype="fp32")), True),
    # both operands rounded the same way: round(x_i) ≤ round(max x).
    "same-rounding-both-sides": (lambda x: _lse(mb.sub(
        x=mb.cast(x=x, dtype="fp16"),
        y=mb.cast(x=mb.reduce_max(x=x, axes=[1], keep_dims=True), dtype="fp16"))), True),
    "max-over-fewer-axes": (lambda x: _lse(_shift(x, [1]), [0, 1]), True),
    # the max alone is rounded to fp16: near 60 000 it can come out 16 below an element.
    "lossy-cast-on-max": (lambda x: _lse(mb.sub(x=x, y=mb.cast(x=mb.cast(
        x=mb.reduce_max(x=x, axes=[1], keep_dims=True), dtype="fp16"), dtype="fp32"))),
        False),
    "integer-cast-after-sub": (lambda x: _lse(mb.cast(x=mb.cast(x=_shift(x), dtype="int32"),
                                                      dtype="fp32")), False),
    "max-of-another-value": (lambda x: _lse(mb.sub(x=x, y=mb.reduce_max(
        x=mb.mul(x=x, y=2.0), axes=[1], keep_dims=True))), False),
    "max-without-keep-dims": (lambda x: _lse(_shift(x, keep=False)), False),
    "max-over-more-axes": (lambda x: _lse(_shift(x, [0, 1])), False),
    "add-not-sub": (lambda x: _lse(mb.add(x=x, y=mb.reduce_max(
        x=x, axes=[1], keep_dims=True))), False),
}


def build(name: str) -> Any:
    """A fresh program for ``BODIES[name]`` (the fix rewrites programs in place)."""
    body = BODIES[name][0]
    return mb.program(input_specs=[mb.TensorSpec(shape=SHAPE, dtype=types.fp32)],
                      opset_version=ct.target.iOS17)(body)


def lse_op(program: Any) -> Any:
    """The program's ``reduce_log_sum_exp`` op (named ``lse``)."""
    return next(op for op in program.functions["main"].operations if op.name == "lse")
