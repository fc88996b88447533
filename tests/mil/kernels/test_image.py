"""Image resizing and grid-sampling kernels against torch.nn.functional and the
sampling-grid examples of coremltools' ``resize_bilinear`` docstring."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels.resize import sampling_grid
from nebisect.mil.single_op import build_op, run_kernel

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(29)


@pytest.mark.parametrize(
    "size_out, mode, expected",
    [
        (5, "UNALIGN_CORNERS", [0.0, 0.1, 0.5, 0.9, 1.0]),
        (5, "STRICT_ALIGN_CORNERS", [0.0, 0.25, 0.5, 0.75, 1.0]),
        (5, "DEFAULT", [0.0, 0.4, 0.8, 1.0, 1.0]),
        (5, "OFFSET_CORNERS", [0.1, 0.3, 0.5, 0.7, 0.9]),
        (6, "UNALIGN_CORNERS", [0.0, 0.0, 1 / 3, 2 / 3, 1.0, 1.0]),
        (6, "DEFAULT", [0.0, 1 / 3, 2 / 3, 1.0, 1.0, 1.0]),
        (6, "OFFSET_CORNERS", [1 / 12, 0.25, 5 / 12, 7 / 12, 0.75, 11 / 12]),
    ],
)
def test_sampling_grid_matches_the_documented_examples(size_out, mode, expected):
    np.testing.assert_allclose(sampling_grid(2, size_out, mode), expected, atol=1e-12)


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


@pytest.mark.parametrize("align_corners", [True, False])
def test_upsample_bilinear_matches_torch(align_corners):
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    op = build_op("upsample_bilinear", "iOS16", x=x, scale_factor_height=2,
                  scale_factor_width=3, align_corners=align_corners)
    (out,) = run_kernel(op)
    expected = F.interpolate(_t(x), scale_factor=(2, 3), mode="bilinear",
                             align_corners=align_corners)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-10)


def test_nearest_upsample_and_resize_use_in_over_out():
    x = RNG.standard_normal((1, 1, 3, 5)).astype(np.float32)
    (up,) = run_kernel(build_op("upsample_nearest_neighbor", "iOS17", x=x,
                                scale_factor_height=2.0, scale_factor_width=1.5))
    expected = F.interpolate(_t(x), size=(6, 7), mode="nearest").numpy()
    np.testing.assert_array_equal(up, expected)
    (resized,) = run_kernel(build_op("resize_nearest_neighbor", "iOS17", x=x,
                                     target_size_height=4, target_size_width=2))
    np.testing.assert_array_equal(resized, F.interpolate(_t(x), size=(4, 2)).numpy())


def test_iOS17_resize_rounds_its_grid_for_nearest():
    x = np.array([-6.174, 9.371], np.float32).reshape(1, 1, 1, 2, 1)
    op = build_op("resize", "iOS17", x=x, shape=np.array([1, 1, 3, 2], np.int32),
                  resized_dims=np.uint32(2), interpolation_mode="NEAREST_NEIGHBOR")
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out.reshape(-1), [-6.174, -6.174, 9.371, 9.371, 9.371, 9.371],
                               rtol=1e-6)


def test_crop_and_crop_resize_align_corners():
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    (cropped,) = run_kernel(build_op("crop", "iOS17", x=x, crop_height=np.array([1, 0]),
                                     crop_width=np.array([0, 2])))
    np.testing.assert_array_equal(cropped[0, 0], x[0, 0, 1:, :2])
    op = build_op("crop_resize", "iOS17", x=x, boxes=np.array([[1, 1, 2, 2]], np.float32),
                  target_height=4, target_width=4, sampling_mode="ALIGN_CORNERS")
    (out,) = run_kernel(op)
    expected = 6 + np.arange(4)[:, None] * 4 / 3 + np.arange(4)[None, :] / 3
    np.testing.assert_allclose(out[0, 0], expected, rtol=1e-12)


def test_crop_resize_pads_samples_outside_the_image():
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    roi = np.array([0, 0.1, 0.3, 1.3, 1.0], np.float32).reshape(1, 1, 5, 1, 1)
    op = build_op("crop_resize", "iOS16", x=x, roi=roi, target_height=2, target_width=2,
                  normalized_coordinates=True, sampling_mode="ALIGN_CORNERS",
                  pad_value=np.float32(-7.0))
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out.reshape(-1), [3.1, 5.2, -7.0, -7.0], rtol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_resample_matches_grid_sample(mode, padding, align_corners):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, size=(2, 3, 6, 2)).astype(np.float32)
    mil_padding = {"zeros": "constant", "border": "border", "reflection": "reflection"}[padding]
    if padding == "reflection" and not align_corners:
        mil_padding = "symmetric"  # the torch frontend's mapping
    op = build_op("resample", "iOS17", x=x, coordinates=grid, sampling_mode=mode,
                  padding_mode=mil_padding, padding_value=np.float32(0.0),
                  coordinates_mode="normalized_minus_one_to_one", align_corners=align_corners)
    (out,) = run_kernel(op)
    expected = F.grid_sample(_t(x), _t(grid), mode=mode, padding_mode=padding,
                             align_corners=align_corners)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_matches_affine_grid_sample(align_corners):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    theta = RNG.uniform(-1, 1, size=(2, 2, 3)).astype(np.float32)
    op = build_op("affine", "iOS17", x=x, transform_matrix=theta.reshape(2, 6), output_height=3,
                  output_width=4, sampling_mode="bilinear", padding_mode="constant",
                  padding_value=np.float32(0.0), coordinates_mode="normalized_minus_one_to_one",
                  align_corners=align_corners)
    (out,) = run_kernel(op)
    grid = F.affine_grid(_t(theta), [2, 3, 3, 4], align_corners=align_corners)
    expected = F.grid_sample(_t(x), grid, align_corners=align_corners)
    np.testing.assert_allclose(out, expected.numpy(), atol=1e-6)
