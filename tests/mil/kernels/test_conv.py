"""conv / conv_transpose / pooling kernels against torch (coremltools has no value
inference for them)."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.single_op import build_op, run_kernel

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(5)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _torch(fn, *arrays, **kwargs):
    tensors = [torch.tensor(a, dtype=torch.float64) for a in arrays]
    return fn(*tensors, **kwargs).numpy()


@pytest.mark.parametrize(
    "spatial, strides, dilations, groups, pads",
    [
        ((7,), (2,), (1,), 1, (1, 2)),
        ((6, 7), (1, 1), (1, 1), 1, (0, 0, 0, 0)),
        ((6, 7), (2, 1), (2, 1), 2, (1, 1, 2, 0)),
        ((5, 6), (1, 2), (1, 1), 4, (2, 1, 0, 1)),
        ((4, 5, 6), (1, 2, 1), (1, 1, 2), 1, (1, 0, 0, 1, 2, 2)),
    ],
)
def test_conv_custom_padding_matches_torch(spatial, strides, dilations, groups, pads):
    rank = len(spatial)
    x = _f(2, 4, *spatial)
    weight = _f(8, 4 // groups, *([3] * rank))
    bias = _f(8)
    op = build_op("conv", "iOS17", x=x, weight=weight, bias=bias, strides=np.array(strides),
                  pad_type="custom", pad=np.array(pads), dilations=np.array(dilations),
                  groups=groups)
    (out,) = run_kernel(op)
    torch_pad = []
    for i in reversed(range(rank)):
        torch_pad += [pads[2 * i], pads[2 * i + 1]]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(rank)])
    conv = (F.conv1d, F.conv2d, F.conv3d)[rank - 1]
    expected = _torch(conv, xp, weight, bias, stride=strides, dilation=dilations, groups=groups)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("pad_type", ["same", "same_lower"])
@pytest.mark.parametrize("kernel, stride", [(3, 1), (4, 1), (2, 2), (3, 2)])
def test_conv_same_padding_puts_odd_pad_after_or_before(pad_type, kernel, stride):
    x = _f(1, 2, 7, 8)
    weight = _f(3, 2, kernel, kernel)
    op = build_op("conv", "iOS17", x=x, weight=weight, strides=np.array([stride, stride]),
                  pad_type=pad_type)
    (out,) = run_kernel(op)
    assert out.shape == (1, 3, -(-7 // stride), -(-8 // stride))
    pads = []
    for size in (7, 8):
        total = max(0, (-(-size // stride) - 1) * stride + kernel - size)
        small = total // 2
        pads.append((small, total - small) if pad_type == "same" else (total - small, small))
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    np.testing.assert_allclose(out, _torch(F.conv2d, xp, weight, stride=stride), atol=1e-10)


@pytest.mark.parametrize(
    "spatial, strides, dilations, groups, pads",
    [
        ((5,), (2,), (1,), 1, (0, 0)),
        ((4, 5), (2, 3), (1, 2), 2, (1, 0, 2, 1)),
        ((3, 4), (1, 1), (1, 1), 1, (1, 1, 1, 1)),
    ],
)
def test_conv_transpose_custom_matches_torch(spatial, strides, dilations, groups, pads):
    rank = len(spatial)
    x = _f(2, 4, *spatial)
    weight = _f(4, 6 // groups, *([3] * rank))
    op = build_op("conv_transpose", "iOS17", x=x, weight=weight, strides=np.array(strides),
                  pad_type="custom", pad=np.array(pads), dilations=np.array(dilations),
                  groups=groups)
    (out,) = run_kernel(op)
    full = (F.conv_transpose1d, F.conv_transpose2d)[rank - 1]
    uncropped = _torch(full, x, weight, stride=strides, dilation=dilations, groups=groups)
    crop = tuple(slice(pads[2 * i], uncropped.shape[2 + i] - pads[2 * i + 1]) for i in range(rank))
    expected = uncropped[(slice(None), slice(None), *crop)]
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=1e-10)


def test_conv_transpose_output_shape_adds_trailing_rows():
    """PyTorch ``output_padding``: the extra output rows come after the natural output."""
    x, weight = _f(1, 3, 4, 4), _f(3, 2, 3, 3)
    op = build_op("conv_transpose", "iOS17", x=x, weight=weight, strides=np.array([2, 2]),
                  pad_type="custom", pad=np.array([1, 1, 1, 1]),
                  output_shape=np.array([1, 2, 8, 8], np.int32))
    (out,) = run_kernel(op)
    expected = _torch(F.conv_transpose2d, x, weight, stride=2, padding=1, output_padding=1)
    np.testing.assert_allclose(out, expected, atol=1e-10)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("exclude", [False, True])
def test_avg_pool_matches_torch(ceil_mode, exclude):
    x = _f(2, 3, 7, 8)
    op = build_op("avg_pool", "iOS17", x=x, kernel_sizes=np.array([3, 2]),
                  strides=np.array([2, 3]), pad_type="custom", pad=np.array([1, 1, 1, 1]),
                  exclude_padding_from_average=exclude, ceil_mode=ceil_mode)
    (out,) = run_kernel(op)
    expected = _torch(F.avg_pool2d, x, kernel_size=(3, 2), stride=(2, 3), padding=(1, 1),
                      ceil_mode=ceil_mode, count_include_pad=not exclude)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=1e-10)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool_matches_torch(ceil_mode):
    x = _f(1, 2, 9, 6, 5)
    op = build_op("max_pool", "iOS17", x=x, kernel_sizes=np.array([3, 2, 2]),
                  strides=np.array([2, 2, 1]), pad_type="valid", ceil_mode=False)
    (out,) = run_kernel(op)
    np.testing.assert_allclose(
        out, _torch(F.max_pool3d, x, kernel_size=(3, 2, 2), stride=(2, 2, 1)), atol=0
    )
    x2 = _f(1, 2, 7, 7)
    op = build_op("max_pool", "iOS17", x=x2, kernel_sizes=np.array([2, 2]),
                  strides=np.array([2, 2]), pad_type="custom", pad=np.array([1, 1, 1, 1]),
                  ceil_mode=ceil_mode)
    (out,) = run_kernel(op)
    expected = _torch(F.max_pool2d, x2, kernel_size=2, stride=2, padding=1, ceil_mode=ceil_mode)
    np.testing.assert_allclose(out, expected, atol=0)


def test_l2_pool_is_root_sum_of_squares():
    x = _f(1, 1, 4, 4)
    op = build_op("l2_pool", "iOS17", x=x, kernel_sizes=np.array([2, 2]),
                  strides=np.array([2, 2]), pad_type="valid")
    (out,) = run_kernel(op)
    expected = np.sqrt(_torch(F.avg_pool2d, x.astype(np.float64) ** 2, kernel_size=2) * 4)
    np.testing.assert_allclose(out, expected, rtol=1e-10)


def test_same_pool_counts_padding_unless_excluded():
    x = np.ones((1, 1, 3, 3), np.float32)
    include = build_op("avg_pool", "iOS17", x=x, kernel_sizes=np.array([2, 2]),
                       strides=np.array([1, 1]), pad_type="same")
    exclude = build_op("avg_pool", "iOS17", x=x, kernel_sizes=np.array([2, 2]),
                       strides=np.array([1, 1]), pad_type="same",
                       exclude_padding_from_average=True)
    (with_pad,) = run_kernel(include)
    (without,) = run_kernel(exclude)
    assert with_pad[0, 0, 2, 2] == 0.25  # one real element over a 2x2 window
    np.testing.assert_array_equal(without, np.ones((1, 1, 3, 3)))


def test_naive_conv_accumulates_in_fp16():
    """4096 input channels of 1·1: an fp16 running sum stalls at 2048."""
    x = np.ones((1, 4096, 1, 1), np.float16)
    weight = np.ones((1, 4096, 1, 1), np.float16)
    op = build_op("conv", "iOS17", x=x, weight=weight)
    (careful,) = run_kernel(op, dtype=np.float16)
    (naive,) = run_kernel(op, dtype=np.float16, variants=("naive",))
    assert careful.item() == 4096.0
    assert naive.item() == 2048.0
    x64 = _f(1, 4, 5, 5)
    op = build_op("conv_transpose", "iOS17", x=x64, weight=_f(4, 3, 3, 3),
                  strides=np.array([2, 2]))
    (a,) = run_kernel(op)
    (b,) = run_kernel(op, variants=("naive",))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
