"""An N-op fp16 chain with one unshifted ``reduce_log_sum_exp`` in the middle (seed 000).

The input is a constant 8.0 over 32 channels; the chain alternates exact fp16 steps
(``add``/``sub`` of 0.5, ``mul`` by 1, ``relu``), so every device that computes each op
correctly agrees with the float64 reference bit for bit — until the
``reduce_log_sum_exp`` over the channels: 32·exp(8) = 95 389 overflows fp16, and the
Neural Engine (``sim:ane``, coremltools #2690) returns 0.0 instead of 11.47. What
follows carries the collapse to the output. This is the chain Polygraphy's
``debug reduce --mode=bisect`` needs 18 checks for at 1 000 nodes::

    python examples/lse_chain.py 1000 chain.mlpackage
    nebisect bisect chain.mlpackage --target sim:ane --inputs chain.npz
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

CHANNELS = 32
SHAPE = (1, CHANNELS, 4, 4)
LEVEL = 8.0  # 32·exp(8.0) > 65504: the unshifted fp16 sum overflows


def _step(mb: Any, x: Any, index: int) -> Any:
    kind = index % 4
    name = f"op{index}"
    if kind == 0:
        return mb.add(x=x, y=np.float16(0.5), name=name)
    if kind == 1:
        return mb.mul(x=x, y=np.float16(1.0), name=name)
    if kind == 2:
        return mb.sub(x=x, y=np.float16(0.5), name=name)
    return mb.relu(x=x, name=name)


def chain_program(ops: int, position: float = 0.5) -> Any:
    """``ops`` non-const ops; the ``reduce_log_sum_exp`` (named ``lse``) sits at
    ``position`` of the chain (0 = first op, 1 = last)."""
    from nebisect.mil.quiet import import_coremltools

    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    if ops < 1:
        raise ValueError("a chain needs at least one op")
    at = min(int(position * ops), ops - 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=SHAPE, dtype=types.fp16)],
                opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        for index in range(ops):
            if index == at:
                x = mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True, name="lse")
            else:
                x = _step(mb, x, index)
        return x

    return prog


def chain_inputs() -> dict[str, np.ndarray]:
    return {"x": np.full(SHAPE, LEVEL, dtype=np.float16)}


def main(argv: list[str]) -> None:
    from nebisect.arrays import save_npz
    from nebisect.mil.load import save_program

    ops, package = int(argv[0]), Path(argv[1])
    save_program(chain_program(ops), package)
    save_npz(package.with_suffix(".npz"), chain_inputs())


if __name__ == "__main__":
    main(sys.argv[1:])
