"""The sim:ane profile reproduces the seeds' published Neural Engine behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nebisect.mil.interp import SimPredictError, run_program
from nebisect.mil.load import save_program
from nebisect.mil.profiles import get_profile
from nebisect.mil.quiet import import_coremltools
from nebisect.sources.artifact import Artifact
from nebisect.targets.registry import get_target

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402

FP16_MAX = 65504.0
C = 32


@mb.program(input_specs=[mb.TensorSpec(shape=(1, C, 2, 2))], opset_version=ct.target.iOS17)
def lse_program(x):
    half = mb.cast(x=x, dtype="fp16", name="x_fp16")
    return mb.reduce_log_sum_exp(x=half, axes=[1], keep_dims=True, name="lse")


@mb.program(input_specs=[mb.TensorSpec(shape=(4,))], opset_version=ct.target.iOS17)
def softplus_program(x):
    return mb.softplus(x=mb.cast(x=x, dtype="fp16", name="x_fp16"), name="sp")


def _lse(x: np.float16, **how) -> float:
    inputs = {"x": np.full((1, C, 2, 2), x, np.float32)}
    return float(run_program(lse_program, inputs, **how).outputs["lse"].flat[0])


def _collapsed(x: np.float16) -> bool:
    return _lse(x, profile="ane") == 0.0


def test_logsumexp_cliff_sits_within_one_fp16_ulp_of_the_overflow_point():
    """Seed 000 / coremltools #2690: 32 equal channels, cliff at log(65504 / 32)."""
    lo, hi = np.float16(7.0), np.float16(8.0)
    assert not _collapsed(lo) and _collapsed(hi)
    while np.nextafter(lo, hi) != hi:  # bisect over the representable fp16 grid
        bits = (int(lo.view(np.int16)) + int(hi.view(np.int16))) // 2
        mid = np.int16(bits).view(np.float16)
        lo, hi = (lo, mid) if _collapsed(mid) else (mid, hi)
    boundary = np.log(FP16_MAX / C)
    assert float(lo) <= boundary <= float(hi)
    assert float(hi) - float(lo) == float(np.spacing(lo))
    assert _lse(lo, profile="ane") == pytest.approx(float(lo) + np.log(C), abs=0.01)
    assert _lse(hi, profile="ane") == 0.0
    # a careful fp16 device has no cliff there; the naive lowering overflows to inf instead
    assert _lse(hi, precision="fp16") == pytest.approx(float(hi) + np.log(C), abs=0.01)
    assert np.isinf(_lse(hi, precision="fp16-naive"))


@pytest.mark.parametrize("x", [-17.0, -745.0, -65504.0])
def test_logsumexp_models_no_underflow_cliff_nobody_reported(x: float):
    """Only the published overflow collapse: a very negative input stays accurate."""
    assert _lse(np.float16(x), profile="ane") == pytest.approx(x + np.log(C), rel=1e-3)


def test_softplus_collapses_past_ln_2_pow_15():
    """coremltools #2687: passes at 10.394, collapses at 10.395 (fp16: 10.390625 | 10.3984375)."""
    x = np.array([10.390625, 10.3984375, 10.394, 10.395], np.float32)
    result = run_program(softplus_program, {"x": x}, profile="ane")
    out = result.outputs["sp"].astype(np.float64)
    assert out[0] == pytest.approx(np.log1p(np.exp(10.390625)), abs=0.01)
    assert out[1] == 0.0
    assert out[2] == pytest.approx(np.log1p(np.exp(10.390625)), abs=0.01)
    assert out[3] == 0.0
    assert result.placement == {"x_fp16": "cpu", "sp": "ne"}
    careful = run_program(softplus_program, {"x": x}, "fp16").outputs["sp"]
    assert np.all(careful > 10.3)


def test_placement_follows_dtypes_and_is_reported_by_the_target(tmp_path):
    save_program(lse_program, tmp_path / "lse.mlpackage")
    artifact = Artifact("mlpackage", str(tmp_path / "lse.mlpackage"))
    prediction = get_target("sim:ane").predict(
        artifact, {"x": np.full((1, C, 2, 2), 7.0, np.float32)}
    )
    assert prediction.placement == {"x_fp16": "cpu", "lse": "ne"}
    assert prediction.op_types == {"x_fp16": "cast", "lse": "reduce_log_sum_exp"}
    assert get_target("sim:fp16").predict(artifact, {"x": np.ones((1, C, 2, 2), np.float32)}
                                          ).placement == {}


class MeanPool(torch.nn.Module):
    """Seed 003's masked mean-pool over a dynamic sequence."""

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).expand(tokens.size()).float()
        return torch.sum(tokens * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


HIDDEN = 16


@pytest.fixture(scope="module")
def mean_pool_programs():
    """The mean-pool converted through torch.export with a Dim (what coremltools 9 takes)."""
    example = (torch.randn(1, 8, HIDDEN), torch.ones(1, 8, dtype=torch.int32))
    length = torch.export.Dim("tokens", min=1, max=382)
    exported = torch.export.export(
        MeanPool().eval(), example,
        dynamic_shapes={"tokens": {1: length}, "attention_mask": {1: length}},
    ).run_decompositions({})
    programs = {}
    for name, precision in (("fp32", ct.precision.FLOAT32), ("fp16", ct.precision.FLOAT16)):
        model = ct.convert(exported, minimum_deployment_target=ct.target.iOS18,
                           compute_precision=precision, skip_model_load=True)
        programs[name] = model._mil_program
    return programs


def _pool_inputs(length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(length)
    mask = np.ones((1, length), np.int32)
    mask[0, length // 2:] = 0
    return {"tokens": rng.standard_normal((1, length, HIDDEN)).astype(np.float32),
            "attention_mask": mask}


def test_data_dependent_shape_is_a_predict_error_on_the_neural_engine(mean_pool_programs):
    inputs = _pool_inputs(8)
    with pytest.raises(SimPredictError) as info:
        run_program(mean_pool_programs["fp16"], inputs, profile="ane")
    assert str(info.value).startswith("Invalid blob shape: Data-dependent shapes were disabled: ")
    assert str(info.value).endswith(f" - [?, {HIDDEN}]")


@pytest.mark.parametrize("length", [2, 8, 37])
def test_mean_pool_runs_where_the_seed_says_it_runs(mean_pool_programs, length):
    """fp32 falls back to CPU on CPU_AND_NE (seed 003's matrix); no profile never fails."""
    inputs = _pool_inputs(length)
    with torch.no_grad():
        expected = MeanPool()(torch.from_numpy(inputs["tokens"]),
                              torch.from_numpy(inputs["attention_mask"])).numpy()
    on_ane = run_program(mean_pool_programs["fp32"], inputs, profile="ane")
    assert set(on_ane.placement.values()) == {"cpu"}
    (pooled,) = on_ane.outputs.values()
    np.testing.assert_allclose(pooled, expected, rtol=1e-5, atol=1e-6)
    (pooled16,) = run_program(mean_pool_programs["fp16"], inputs, "fp16").outputs.values()
    np.testing.assert_allclose(pooled16, expected, rtol=1e-2, atol=1e-2)


def test_profile_is_labelled():
    ane = get_profile("ane")
    assert "published behaviour, not of the silicon" in ane.label
    assert (ane.precision, ane.device, ane.variant) == ("fp16", "ne", "ane")


class TwoConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Conv1d(4, 8, 3), torch.nn.Conv1d(8, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module", params=["trace", "export"])
def flexible_conv(request, tmp_path_factory):
    """The two-conv model with a RangeDim(8, 128) time axis, converted at coremltools'
    defaults on either path and read back from its package (the loader gives each conv's
    output length a symbol of its own)."""
    module, example = TwoConv().eval(), torch.randn(1, 4, 16)
    if request.param == "trace":
        model = ct.convert(torch.jit.trace(module, example),
                           inputs=[ct.TensorType(name="x", shape=(1, 4, ct.RangeDim(8, 128)))])
    else:
        time = torch.export.Dim("time", min=8, max=128)
        exported = torch.export.export(module, (example,), dynamic_shapes={"x": {2: time}})
        model = ct.convert(exported.run_decompositions({}))
    path = tmp_path_factory.mktemp("flexible") / f"{request.param}.mlpackage"
    model.save(str(path))
    return Artifact("mlpackage", str(path)).program


@pytest.mark.parametrize("length", [8, 37, 128])
def test_a_flexible_input_length_runs_off_the_neural_engine(flexible_conv, length):
    """coremltools #2370: a RangeDim conv model runs at any length in range, on CPU —
    no "Data-dependent shapes" refusal, a placement reason instead."""
    (name,) = flexible_conv.functions["main"].inputs
    inputs = {name: np.random.default_rng(length).standard_normal((1, 4, length))
              .astype(np.float32)}
    on_ane = run_program(flexible_conv, inputs, profile="ane")
    (output,) = on_ane.outputs.values()
    assert output.shape == (1, 4, length - 4)
    computing = {key: why for key, why in on_ane.fallbacks.items()
                 if on_ane.op_types[key] in ("conv", "relu")}
    assert sorted(on_ane.op_types[key] for key in computing) == ["conv", "conv", "relu"]
    assert set(computing.values()) == {"flexible shape"}
    (exact,) = run_program(flexible_conv, inputs, "fp64").outputs.values()
    np.testing.assert_allclose(output, exact, rtol=1e-2, atol=1e-2)
