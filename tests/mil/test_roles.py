"""Input roles read off the graph (nebisect.mil.roles) on MIL-builder programs: the
table an id indexes, through the negative-index wrap coremltools emits; a mask that
gates a softmax; integers for arithmetic; a float input has none."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.quiet import import_coremltools
from nebisect.mil.roles import ARITHMETIC, INDICES, MASK, InputRole, infer_roles
from nebisect.sources.domains import RANGE, role_domains
from nebisect.sources.inputs import InputDescription

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

OPSET = ct.target.iOS17


def _two_tables() -> object:
    """ids index a 100-row table (through the wrap) and a 40-row one."""
    big = np.zeros((100, 4), np.float32)
    small = np.zeros((40, 4), np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 8), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 8), dtype=types.fp32)],
                opset_version=OPSET)
    def prog(ids, x):
        wrapped = mb.select(cond=mb.greater_equal(x=ids, y=0), a=ids, b=mb.add(x=ids, y=100))
        rows = mb.gather(x=big, indices=mb.cast(x=wrapped, dtype="int16"), axis=0,
                         name="table_big")
        other = mb.gather(x=small, indices=mb.reshape(x=ids, shape=[8]), axis=0,
                          name="table_small")
        return mb.add(x=mb.reduce_sum(x=rows, axes=[1]), y=mb.reduce_sum(x=other, axes=[0])), x

    return prog


def _mask_and_offset() -> object:
    """A 0/1 mask added to attention scores before a softmax; an int offset added to x."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 8), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 8), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 8), dtype=types.fp32)],
                opset_version=OPSET)
    def prog(mask, offset, x):
        bias = mb.mul(x=mb.sub(x=1.0, y=mb.cast(x=mask, dtype="fp32")), y=-1e4)
        scores = mb.softmax(x=mb.add(x=x, y=bias), axis=-1, name="attn")
        shifted = mb.add(x=mb.clip(x=mb.cast(x=offset, dtype="fp32"), alpha=0.0, beta=1e9),
                         y=scores, name="shift")
        return shifted

    return prog


def test_ids_take_the_smallest_table_they_index() -> None:
    roles = infer_roles(_two_tables())
    assert roles == [InputRole("ids", INDICES, "table_small", "gather", 0.0, 39.0)]
    assert "ids in [0, 39]" in roles[0].describe() and "40-row" in roles[0].describe()


def test_mask_and_arithmetic_inputs() -> None:
    roles = {role.name: role for role in infer_roles(_mask_and_offset())}
    assert set(roles) == {"mask", "offset"}
    assert (roles["mask"].role, roles["mask"].op, roles["mask"].op_type) == (
        MASK, "attn", "softmax")
    assert roles["offset"].role == ARITHMETIC and roles["offset"].op_type == "clip"


@pytest.mark.parametrize("dtype", ["int32", "int16"])
def test_role_domains(dtype: str) -> None:
    inputs = [InputDescription("ids", dtype, [(1, 1), (8, 8)]),
              InputDescription("n", dtype, [(1, 1)]), InputDescription("m", dtype, [(1, 1)])]
    domains = role_domains([InputRole("ids", INDICES, "g", "gather", 0.0, 99.0),
                            InputRole("n", ARITHMETIC, "a", "add"),
                            InputRole("m", MASK, "s", "softmax")], inputs)
    assert (domains["ids"].kind, domains["ids"].lo, domains["ids"].hi) == (RANGE, 0.0, 99.0)
    info = np.iinfo(dtype)
    assert (domains["n"].lo, domains["n"].hi) == (info.min, info.max)
    assert domains["m"].kind == MASK
