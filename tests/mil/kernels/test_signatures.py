"""Every kernel accepts every input of every opset version of its op, and the ops the
PyTorch frontend emits for CNNs and transformer encoders all have kernels."""

from __future__ import annotations

import inspect

import pytest

from nebisect.mil.kernels import get_kernel, kernel_ops
from nebisect.mil.quiet import import_coremltools

import_coremltools()
from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry  # noqa: E402

FAMILIES: dict[str, tuple[str, ...]] = {
    "tensor": (
        "reshape", "reshape_like", "transpose", "expand_dims", "squeeze", "flatten2d",
        "concat", "split", "stack", "tile", "slice_by_index", "slice_by_size",
        "slice_update", "pad", "reverse", "reverse_sequence", "sliding_windows",
    ),
    "construct": (
        "fill", "fill_like", "range_1d", "shape", "cast", "select", "band_part", "non_zero",
        "one_hot",
    ),
    "layout": (
        "depth_to_space", "space_to_depth", "pixel_shuffle", "pixel_unshuffle",
        "space_to_batch", "batch_to_space",
    ),
    "gather": ("gather", "gather_nd", "gather_along_axis"),
    "scatter": ("scatter", "scatter_nd", "scatter_along_axis"),
    "linalg": ("matmul", "linear", "einsum"),
    "conv": ("conv", "conv_transpose"),
    "pool": ("avg_pool", "max_pool", "l2_pool"),
    "norm": ("layer_norm", "batch_norm", "instance_norm", "l2_norm", "local_response_norm"),
    "scan": ("cumsum", "topk", "argsort"),
    "constexpr": (
        "constexpr_affine_dequantize", "constexpr_cast", "constexpr_lut_to_dense",
        "constexpr_sparse_to_dense", "constexpr_blockwise_shift_scale",
        "constexpr_lut_to_sparse", "constexpr_sparse_blockwise_shift_scale",
    ),
    "quantization": ("quantize", "dequantize"),
    "resize": (
        "upsample_nearest_neighbor", "resize_nearest_neighbor", "upsample_bilinear",
        "resize_bilinear", "resize", "crop", "crop_resize",
    ),
    "sample": ("resample", "affine"),
    "recurrent": ("lstm", "gru", "rnn"),
    "attention": ("scaled_dot_product_attention",),
    "random": ("random_bernoulli", "random_normal", "random_uniform", "random_categorical"),
}
FAMILY_OPS = [op for ops in FAMILIES.values() for op in ops]


def test_every_family_op_has_a_kernel_in_its_module():
    assert sorted(set(FAMILY_OPS) - set(kernel_ops())) == []
    for family, ops in FAMILIES.items():
        for op_type in ops:
            assert get_kernel(op_type).__module__ == f"nebisect.mil.kernels.{family}", op_type


@pytest.mark.parametrize("op_type", FAMILY_OPS)
def test_kernel_accepts_every_declared_input(op_type):
    parameters = inspect.signature(get_kernel(op_type)).parameters
    versions = SSAOpRegistry.core_ops[op_type]
    assert versions, f"coremltools defines no {op_type}"
    for opset, cls in versions.items():
        names = [k for k in cls.input_spec.input_types if not k.startswith("_")]
        unknown = [k for k in names if k not in parameters]
        assert unknown == [], f"{op_type} at {opset}: kernel lacks {unknown}"
