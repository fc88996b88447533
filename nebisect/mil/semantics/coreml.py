"""Kernel variants for the Core ML runtime's published semantics (``--semantics coreml``).

Each variant models one difference between what the Core ML runtime computes and what the
MIL op definition (and coremltools' constant folding, which implements it in numpy) says,
reported with numbers in a public coremltools issue or pull request; the docstring quotes
the source. Nothing here is inferred from anything but those reports. The differences are
also listed in :data:`RUNTIME_DIFFERENCES`, which the fold-versus-runtime differential test
(:mod:`nebisect.mil.fold`) and the ``fold-runtime`` lint rule read.

Reported but not modelled, for lack of published numbers:

* ``round`` of exact halves: "implementation defined ... X.5 may result in either ceil(X)
  or floor(X) depending on which backend (MPS, BNNS, ANE, CPU, etc)" (webmachinelearning/
  webnn#817, an Apple engineer); the simulator keeps the definition (halves to even).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.elementwise import power, promote
from nebisect.mil.kernels.pool import average_pool


@dataclass(frozen=True)
class RuntimeDifference:
    """One op whose runtime result differs from its definition (and its constant fold)."""

    op_type: str
    summary: str
    source: str


RUNTIME_DIFFERENCES: dict[str, RuntimeDifference] = {
    "mod": RuntimeDifference(
        "mod",
        "the runtime computes a truncated remainder (sign of the dividend, C fmod); the "
        "definition and coremltools' constant folding use the floored one (sign of the "
        "divisor): mod(-7, 2) is -1 on device, 1 when folded",
        "coremltools PR #2778; kasper0406/stablehlo-coreml PR #70",
    ),
    "pow": RuntimeDifference(
        "pow",
        "with a constant operand of exactly 2 the runtime takes a square fast path whichever "
        "side the 2 is on: pow(2, y) returns y**2 (pow(2.0, 0.0) = 0.0); folding gives 2**y",
        "coremltools issue #2628; PR #2742",
    ),
}


@kernel("mod", variant="coreml")
def mod_truncated(ctx: KernelContext, x: Any, y: Any) -> Any:
    """Remainder with the sign of the dividend, as the Core ML runtime computes it.

    coremltools PR #2778: "the runtime uses truncated (`fmod`) semantics — `mod(-2, 5)`
    returns `-2`, not `3`"; "`mb.mod([-7,7,-7,7], [2,-2,-2,2])` folds to `[1,-1,-1,1]` but
    computes `[-1,1,-1,1]` on device. Its sibling `floor_div` is floored in both".
    Independently, kasper0406/stablehlo-coreml PR #70: "the CoreML runtime happens to
    produce C-style results for `mod`".
    """
    a, b = promote(ctx, x, y)
    return np.fmod(a, b)


@kernel("pow", variant="coreml")
def pow_square_fast_path(ctx: KernelContext, x: Any, y: Any) -> Any:
    """``pow`` with the runtime's square fast path for a constant base of exactly 2.

    coremltools issue #2628: "`mb.pow(x=2.0, y=0.0) != 1.0`" (the model predicts 0.0);
    PR #2742: "`pow(x, y)` with a constant base of 2 returns `y ** 2` instead of `2 ** y`.
    Only an exact constant base of 2 is affected. Other bases, and a constant exponent of 2
    (`pow(x, 2)`), are computed correctly. The behavior matches a `pow(_, 2)` square fast
    path in the runtime that keys on a constant operand of 2 regardless of which side it is
    on." A constant exponent of 2 squares the base, which is the definition anyway, so only
    the base is tested; the base is constant when the program gives it a value.
    """
    a, b = promote(ctx, x, y)
    base = getattr(ctx.op, "x", None) if ctx.op is not None else None
    if a.dtype.kind == "f" and base is not None and base.val is not None and np.all(a == 2):
        return np.broadcast_to(b * b, np.broadcast_shapes(a.shape, b.shape))
    return power(a, b)


#: ``avg_pool`` counting the ``ceil_mode`` overhang as padding, as the runtime does.
#: coremltools issue #2772: "MIL counts the ceil-mode overflow region as padding, and
#: PyTorch never does ... every ceil-extended window ends up divided by the full kernel
#: size instead of the number of real elements in it"; PR #2844, for
#: ``AvgPool2d(2, stride=3, ceil_mode=True)`` on ``arange(49).reshape(1, 1, 7, 7)``:
#: torch ``[[4, 7, 9.5], [25, 28, 30.5], [42.5, 45.5, 48]]``, Core ML
#: ``[[4, 7, 4.75], [25, 28, 15.25], [21.25, 22.75, 12]]`` ("AvgPool1d is affected the
#: same way: [0.5, 3.5, 6.0] becomes [0.5, 3.5, 3.0]"). Excluding padding excludes the
#: overhang too: that is the PR's fix, so that case keeps the definition.
avg_pool_overhang_as_padding = kernel("avg_pool", variant="coreml")(
    average_pool(overhang_as_padding=True))
