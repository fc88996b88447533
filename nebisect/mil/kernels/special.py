"""Special functions numpy lacks: ``erf`` (used by ``erf`` and ``gelu`` EXACT).

Two evaluations, picked by the compute dtype:

* float64 (the oracle) — to double precision: the all-positive series
  ``erf(x) = 2/√π · e^{-x²} · Σ 2ⁿ x^{2n+1} / (2n+1)!!`` for |x| < 3 (no cancellation),
  the Laplace continued fraction for ``erfc`` on 3 ≤ |x| < 6, and ±1 beyond
  (erfc(6) ≈ 2e-17 is below half an ulp of 1).
* float32 / float16 — the rational approximation ``x·P(x²)/Q(x²)`` on |x| ≤ 4 used by
  Eigen and XLA for float erf (max error a few float32 ulps), evaluated in float32: fast
  enough for gelu on every activation of a transformer.
"""

from __future__ import annotations

import numpy as np

from nebisect.mil.blocks import blockwise

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
_ONE_OVER_SQRT_2 = np.float32(1.0 / np.sqrt(2.0))
_SERIES_TERMS = 60
_FRACTION_DEPTH = 80

_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def erf(x: np.ndarray) -> np.ndarray:
    """Error function of ``x`` in ``x``'s float dtype."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        return _erf64(x)
    return blockwise(_erf32_block, x, 3).astype(x.dtype, copy=False)


def gelu_exact32(x: np.ndarray) -> np.ndarray:
    """``0.5·x·(1 + erf(x/√2))`` of a float32 ``x``, each product and sum in float32 in
    that order — gelu ``EXACT`` on every activation of a transformer, block by block."""
    return blockwise(_gelu_block, x, 4)


def _gelu_block(x: np.ndarray, out: np.ndarray, scratch: list[np.ndarray]) -> None:
    scaled, *rest = scratch
    np.multiply(x, _ONE_OVER_SQRT_2, out=scaled)
    _erf32_block(scaled, scaled, rest)
    scaled += np.float32(1)
    np.multiply(x, np.float32(0.5), out=out)
    out *= scaled


def _erf32_block(x: np.ndarray, out: np.ndarray, scratch: list[np.ndarray]) -> None:
    """The rational approximation of one block into ``out`` (which may be ``x``)."""
    x2, p, q = scratch
    np.clip(x, np.float32(-4.0), np.float32(4.0), out=out)
    np.multiply(out, out, out=x2)
    for coefficients, acc in ((_ALPHA, p), (_BETA, q)):
        np.multiply(x2, np.float32(coefficients[0]), out=acc)
        acc += np.float32(coefficients[1])
        for c in coefficients[2:]:
            acc *= x2
            acc += np.float32(c)
    out *= p
    out /= q


def _erf64(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    out = np.where(np.isnan(x), np.nan, 1.0)
    small = a < 3.0
    if small.any():
        out[small] = _series(a[small])
    middle = (a >= 3.0) & (a < 6.0)
    if middle.any():
        out[middle] = 1.0 - _erfc_fraction(a[middle])
    return np.copysign(out, x)


def _series(a: np.ndarray) -> np.ndarray:
    two_x2 = 2.0 * a * a
    term = a.copy()
    total = a.copy()
    for n in range(_SERIES_TERMS):
        term = term * two_x2 / (2 * n + 3)
        total += term
    return _TWO_OVER_SQRT_PI * np.exp(-a * a) * total


def _erfc_fraction(a: np.ndarray) -> np.ndarray:
    fraction = a.copy()
    for k in range(_FRACTION_DEPTH, 0, -1):
        fraction = a + (k / 2.0) / fraction
    return np.exp(-a * a) / np.sqrt(np.pi) / fraction
