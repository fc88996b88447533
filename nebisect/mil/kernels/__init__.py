"""Kernel registry: MIL op type → small numpy function.

A kernel receives a :class:`KernelContext` and the op's inputs already resolved to
numpy values (``None`` for an absent optional input; a list for tuple inputs such as
``concat``'s ``values``). Floating inputs arrive in ``ctx.dtype`` — the compute dtype
the precision model chose — and the kernel computes in that dtype; the precision model
rounds results to the storage dtype afterwards. A kernel returns one array, or a tuple
for multi-output ops.

Variants: the default kernel is the careful implementation (max-shift etc.). A kernel
registered with ``variant="naive"`` is the textbook formula (no max-shift, accumulate
in the compute dtype) used by ``fp16-naive``; device profiles register their own
variants (``variant="ane"``). Lookup falls back from a variant to the default kernel.
An op without a kernel is a :class:`MissingKernelError` naming the op — never a wrong
answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.errors import CannotJudge
from nebisect.registry import ImportOnce, Registry, package_modules

Kernel = Callable[..., Any]


class MissingKernelError(CannotJudge):
    """The simulator has no kernel for an op type: a gap of nebisect's, not the model's."""


@dataclass
class KernelContext:
    """What a kernel may know about where it runs.

    ``dtype`` is the floating compute dtype (float64, float32 or float16); ``op`` is
    the coremltools MIL operation (output types, attribute access); ``variant`` is the
    kernel variant in force; ``notes`` collects profile observations (e.g. the reason
    an op was placed on CPU) for the verdict.
    """

    dtype: Any = np.float64
    op: Any = None
    variant: str = ""
    notes: list[str] = field(default_factory=list)

    def f(self, value: Any) -> np.ndarray:
        """``value`` as an array in the compute dtype (ints and bools become floats)."""
        return np.asarray(value, dtype=self.dtype)


#: Kernels by (op type, variant); loading imports the kernel family modules.
KERNELS: Registry[tuple[str, str], Kernel] = Registry(
    "kernel", ImportOnce(package_modules(__name__))
)


def kernel(*op_types: str, variant: str = "") -> Callable[[Kernel], Kernel]:
    """Register a function as the kernel of one or more MIL op types."""

    def decorate(fn: Kernel) -> Kernel:
        return KERNELS.register_all([(op_type, variant) for op_type in op_types], fn)

    return decorate


def get_kernel(op_type: str, variants: tuple[str, ...] = ()) -> Kernel:
    """The most specific kernel for ``op_type``: the first variant found, else default."""
    for variant in (*variants, ""):
        if (op_type, variant) in KERNELS:
            return KERNELS.get((op_type, variant))
    raise MissingKernelError(f"the simulator has no kernel for MIL op '{op_type}'")


def kernel_ops() -> list[str]:
    """Every op type with a kernel (of any variant), in name order."""
    return sorted({op_type for op_type, _ in KERNELS.names()})
