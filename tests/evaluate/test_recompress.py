"""Milder compressions, recomputed from a weight's uncompressed value."""

from __future__ import annotations

import numpy as np

from nebisect.evaluate.recompress import alternatives, palettized, quantized

WEIGHT = np.random.default_rng(1).standard_normal((32, 24))


def test_palettization_keeps_two_to_the_bits_values_per_lut() -> None:
    assert len(np.unique(palettized(WEIGHT, 2))) == 4
    grouped = palettized(WEIGHT, 2, group=16)
    assert [len(np.unique(grouped[i:i + 16])) for i in (0, 16)] == [4, 4]
    errors = [np.abs(palettized(WEIGHT, bits) - WEIGHT).mean() for bits in (2, 4, 8)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 0.01


def test_symmetric_quantization_keeps_each_channels_extreme() -> None:
    q8 = quantized(WEIGHT, 8)
    np.testing.assert_allclose(np.abs(q8).max(axis=1), np.abs(WEIGHT).max(axis=1))
    scale = np.abs(WEIGHT).max(axis=1, keepdims=True) / 127
    np.testing.assert_allclose(q8 / scale, np.round(q8 / scale), atol=1e-9)
    assert np.abs(quantized(WEIGHT, 4, block=8) - WEIGHT).max() < np.abs(
        quantized(WEIGHT, 4) - WEIGHT).max()


def test_alternatives_follow_the_compression_mildest_first() -> None:
    assert [a.words.split(" (")[0] for a in alternatives("2-bit palettized")] == [
        "2-bit palettization with a LUT per 16 channels", "4-bit palettization",
        "8-bit palettization"]
    assert [a.words.split(" (")[0] for a in alternatives("int4 linear-quantized")] == [
        "int4 quantization with a scale per 32 inputs", "int8 quantization"]
    assert len(alternatives("int8 linear-quantized")) == 1
    assert alternatives("pruned") == []
