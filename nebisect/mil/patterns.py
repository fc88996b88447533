"""Graph patterns that lint and the fixes must recognise the same way.

A lint rule says "this op is a hazard" and a fix says "this op still needs rewriting";
when each has its own matcher they drift — lint called ``sub → cast → lse`` safe while
``logsumexp-max-shift`` rewrote it again. Each pattern is written once here, as a
guard-clause matcher over coremltools MIL ops (``op.op_type``, ``op.inputs``,
``var.op``), and imported by both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Dtypes a cast may convert a max-shifted value to without losing the shift: rounding
#: to nearest in a floating type is monotone and keeps the sign, so ``x − m ≤ 0`` stays
#: ``≤ 0`` (fp16 sends values below −65504 to −inf, and exp(−inf) = 0 — still no
#: overflow). An integer or bool cast is not in the list: an unsigned cast wraps −3 to 253.
FLOAT_DTYPES = frozenset({"fp16", "fp32", "fp64"})


def reduced_axes(op: Any) -> list[int]:
    """A ``reduce_*`` op's axes, non-negative, sorted and distinct (all axes if none)."""
    rank = len(op.inputs["x"].shape)
    axes = op.inputs.get("axes")
    if axes is None or axes.val is None:
        return list(range(rank))
    return sorted({int(a) % rank for a in np.atleast_1d(axes.val)})


def keeps_dims(op: Any) -> bool:
    """True when a ``reduce_*`` op keeps the reduced axes (as size-1 dims)."""
    keep = op.inputs.get("keep_dims")
    return keep is not None and bool(keep.val)


def _cast_dtype(op: Any) -> str | None:
    """The dtype a ``cast`` converts to, as its MIL name (``fp16``…)."""
    dtype = op.inputs.get("dtype")
    return None if dtype is None or dtype.val is None else str(dtype.val)


def _through_casts(var: Any) -> tuple[Any, tuple[str, ...]] | None:
    """``var``'s source upstream of casts and identities, and the casts' dtypes from the
    source down to ``var``; None when one of the casts is not to a float dtype."""
    casts: list[str] = []
    while var.op is not None and var.op.op_type in ("cast", "identity"):
        if var.op.op_type == "cast":
            dtype = _cast_dtype(var.op)
            if dtype not in FLOAT_DTYPES:
                return None
            casts.append(dtype)
        var = var.op.inputs["x"]
    return var, tuple(reversed(casts))


def max_shift(var: Any) -> Any | None:
    """The ``reduce_max`` op ``m`` when ``var`` is ``a − m(a)``: every element ≤ 0.

    Matched graph (``cast*``: zero or more casts to float dtypes, or identities)::

        a ─► cast* (c1) ──────────────────────────────────────► x ─┐
                                                                       sub ─► cast* ─► var
        a ─► cast* (c2) ─► reduce_max(keep_dims) ─► cast* (c3) ─► y ─┘

    * after the ``sub``, float casts keep the shift (see :data:`FLOAT_DTYPES`);
    * before it, both operands must be the *same* rounding of ``a``: the casts on the
      ``x`` side (c1) must equal those on the max side (c2 then c3). Rounding is monotone,
      so it commutes with ``max``: ``r(a_i) ≤ r(max a)`` exactly. Rounded differently —
      ``sub(x_fp32, cast(cast(max x, fp16), fp32))`` — the max can come out 16 below an
      element near 60 000, and ``exp(16)`` overflows fp16: the shift is lost;
    * the max keeps its dims (or reduces to a scalar), so the ``sub`` broadcasts each
      element against its own group's maximum.
    """
    found = _through_casts(var)
    if found is None:
        return None
    sub = found[0].op
    if sub is None or sub.op_type != "sub":
        return None
    x_side = _through_casts(sub.inputs["x"])
    y_side = _through_casts(sub.inputs["y"])
    if x_side is None or y_side is None:
        return None
    peak = y_side[0].op
    if peak is None or peak.op_type != "reduce_max":
        return None
    if not keeps_dims(peak) and len(peak.outputs[0].shape) > 0:
        return None
    peak_side = _through_casts(peak.inputs["x"])
    if peak_side is None or peak_side[0] is not x_side[0]:
        return None
    if x_side[1] != peak_side[1] + y_side[1]:
        return None
    return peak


def is_max_shifted(reduce: Any) -> bool:
    """True when a reduction's input is max-shifted by a maximum over some of its axes.

    ``reduce`` is a ``reduce_log_sum_exp`` (or any ``reduce_*`` of an ``exp``). With its
    input ``a − reduce_max(a, axes')`` and ``axes'`` ⊆ its own axes, each term of ``Σ exp``
    is in (0, 1] and every group contains its own maximum's ``exp(0) = 1``: the sum lies in
    [1, C] and can neither overflow nor underflow. A maximum over *more* axes than the
    reduction still prevents the overflow, but a group far below the global maximum sums
    to 0 in fp16 and its log collapses to −inf: not cured.
    """
    peak = max_shift(reduce.inputs["x"])
    return peak is not None and set(reduced_axes(peak)) <= set(reduced_axes(reduce))
