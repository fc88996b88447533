"""How far apart two correct fp32 implementations of one ill-conditioned sum land.

The factor :data:`nebisect.detect.same_precision.AS_BAD_FACTOR` — how many times torch's
error at the same precision Core ML's may be and still be the model's own conditioning —
is read off this: a row of one constant value, centred by its own mean and divided by
``sqrt(var + 1e-5)`` (a feature extractor fed DC; the float64 result is exactly 0), in
float32 by numpy (pairwise summation: the simulator's ``reduce_mean``) and by torch
(its own vectorized sum). Both leave a rounding residue of the mean, amplified by
1/√1e-5; the two residues differ only by the order of their roundings. Prints how
often both, one or neither is exact, and the quantiles of the ratio where both are off.

    .venv/bin/python bench/rounding_order.py
"""

from __future__ import annotations

import numpy as np
import torch

LENGTHS = (16, 24, 39, 48, 50, 64, 100, 128, 200, 256, 400, 768, 1000)
CONSTANTS_PER_LENGTH = 40
EPS = 1e-5


def _torch(x: np.ndarray) -> float:
    row = torch.from_numpy(x)
    centred = row - row.mean(-1, keepdim=True)
    variance = (centred * centred).mean(-1, keepdim=True)
    return float((centred / torch.sqrt(variance + EPS)).abs().max())


def _numpy(x: np.ndarray) -> float:
    centred = x - np.mean(x, -1, keepdims=True)
    variance = np.mean(centred * centred, -1, keepdims=True)
    return float(np.abs(centred / np.sqrt(variance + np.float32(EPS))).max())


def main() -> None:
    rng = np.random.default_rng(0)
    ratios, exact, one_exact = [], 0, 0
    for length in LENGTHS:
        for constant in rng.uniform(1e-3, 10, CONSTANTS_PER_LENGTH):
            row = np.full((1, length), constant, np.float32)
            ours, theirs = _numpy(row), _torch(row)
            if ours and theirs:
                ratios.append(max(ours, theirs) / min(ours, theirs))
            elif ours or theirs:
                one_exact += 1
            else:
                exact += 1
    spread = np.array(ratios)
    print(f"{len(LENGTHS) * CONSTANTS_PER_LENGTH} constant rows: both exact {exact}, "
          f"one exact {one_exact}, both off {spread.size}")
    quantiles = np.quantile(spread, [0.5, 0.9, 0.95, 0.99, 1.0])
    print("ratio of the larger residue to the smaller: median {:.2f}, 90% {:.2f}, "
          "95% {:.2f}, 99% {:.2f}, max {:.2f}".format(*quantiles))
    print(f"within 2×: {np.mean(spread <= 2):.1%}; within 4×: {np.mean(spread <= 4):.1%}")


if __name__ == "__main__":
    main()
