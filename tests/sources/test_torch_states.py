"""A torch module that updates its buffers in place is stateful (issue 43, item 5): its
buffers are found, converted as ``ct.StateType`` states named after them, and the eager
reference carries them from one call to the next, from the factory's values each case."""

from __future__ import annotations

import numpy as np
import torch
from support import SUPPORT

import nebisect.targets.torch  # noqa: F401  (registers the torch targets)
from nebisect.sources.artifact import Artifact
from nebisect.sources.convert import convert_source
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import state_name
from nebisect.targets.registry import get_target

MODELS = SUPPORT / "state_models.py"
RUNNING_SUM, CACHED = f"{MODELS}:running_sum", f"{MODELS}:cached"
SCALED, RAISING = f"{MODELS}:scaled", f"{MODELS}:raising"
X = {"x": np.full((1, 4), 2.0, np.float32)}


def test_the_states_are_the_buffers_forward_writes_in_place() -> None:
    assert load_torch_source(RUNNING_SUM).state_buffers() == ["acc"]
    cached = load_torch_source(CACHED)
    # the slice write and the nested buffer; the buffer only read is no state
    assert cached.state_buffers() == ["k_cache", "inner.acc"]
    assert cached.state_names() == ["k_cache", "inner_acc"]
    # finding them called forward; the buffers are the factory's again
    assert not cached.module.inner.acc.any() and not cached.module.k_cache.any()
    assert load_torch_source(SCALED).state_buffers() == []
    # a forward that raises has no state: its crash is the cases' finding
    assert load_torch_source(RAISING).state_buffers() == []


def test_a_state_is_named_as_coremltools_names_it() -> None:
    assert [state_name(n) for n in ("acc", "layers.0.k_cache", "0.acc", "state")] == [
        "acc", "layers_0_k_cache", "_0_acc", "state_workaround"]


def test_the_reference_carries_the_buffers_in_float64_from_the_factory_s_values() -> None:
    reference = get_target("torch:cpu:fp64")
    for _ in range(2):  # each case starts from the buffers as the factory built them
        steps = list(reference.predict_steps(Artifact("torch", RUNNING_SUM), X, 3))
        assert [p.outputs["output"].tolist() for p in steps] == [
            [[2.0] * 4], [[4.0] * 4], [[6.0] * 4]]
        assert [p.state["acc"].tolist() for p in steps] == [[[2.0] * 4], [[4.0] * 4],
                                                            [[6.0] * 4]]
        assert steps[-1].state["acc"].dtype == np.float64
    source = load_torch_source(RUNNING_SUM)
    assert source.module.acc.dtype == torch.float32  # the float64 copy carried them
    # a module without state is called once, whatever the steps
    (once,) = reference.predict_steps(Artifact("torch", SCALED), X, 3)
    assert once.state == {} and once.outputs["output"].tolist() == [[1.0] * 4]


def test_states_keep_their_buffers_names_through_nebisect_s_wrapper() -> None:
    from coremltools.proto import FeatureTypes_pb2

    # a dict output is converted through a wrapper whose buffers are module.inner.acc,
    # module.k_cache: the package's states are renamed to the source's names
    models, attempts = convert_source(load_torch_source(CACHED), "fp32")
    assert [(a.path, a.status) for a in attempts] == [("export", "ok"), ("trace", "ok")]
    assert {a.note for a in attempts} == {
        "buffers updated in place converted as states: k_cache, inner.acc"}
    for model in models.values():
        spec = model.get_spec()
        assert [s.name for s in spec.description.state] == ["k_cache", "inner_acc"]
        # fp16 states even in an fp32 program: Core ML has no other
        assert {s.type.stateType.arrayType.dataType for s in spec.description.state} == {
            FeatureTypes_pb2.ArrayFeatureType.FLOAT16}
