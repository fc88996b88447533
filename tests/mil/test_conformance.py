"""The coremltools op-test conformance harness: its bookkeeping, its simulated
``compare_backend``, and (slow) a representative sample of every op family."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil import conformance as conf
from nebisect.mil import conformance_plugin as plugin

NODE = (
    ".venv/lib/python3.11/site-packages/coremltools/converters/mil/mil/ops/tests/"
    "iOS17/test_conv.py::TestConv::test_x[backend=BackendConfig(backend='mlprogram', "
    "precision='fp32', opset_version=8)-dtype=<class 'numpy.float16'>]"
)


def test_node_ids_map_to_families_and_exclusions():
    assert conf.short_id(NODE).startswith("iOS17/test_conv.py::TestConv::")
    assert conf.family_of(NODE) == "conv"
    # fp16 tensors on the fp32 backend are judged now (declared dtypes are modelled)
    assert conf.excluded(NODE) is None
    rule = conf.excluded("iOS18/test_states.py::TestState::test_x")
    assert rule is not None and rule.kind == conf.NEEDS_RUNTIME


def test_device_verified_expectations_are_never_excluded():
    """Issue 15 item 2: only tests that need Core ML itself, or whose expected value
    coremltools' CI never checks on a device (the fp32 backend), may be excluded."""
    for rule in conf.EXCLUSIONS:
        assert rule.kind in (conf.NEEDS_RUNTIME, conf.UNVERIFIED), rule.pattern
        if rule.kind == conf.UNVERIFIED:
            assert "precision='fp32'" in rule.pattern, rule.pattern
    smoke = ("iOS15/test_image_resizing.py::TestCropResize::test_builder_to_backend_smoke["
             "backend=BackendConfig(backend='mlprogram', precision='fp16', opset_version=6)]")
    assert conf.excluded(smoke) is None  # device-verified: it passes or it fails


def test_every_exclusion_has_a_reason_and_matches_a_collected_test_shape():
    patterns = [rule.pattern for rule in conf.EXCLUSIONS]
    assert len(patterns) == len(set(patterns))
    for rule in conf.EXCLUSIONS:
        assert len(rule.reason) > 40, rule.pattern
        assert "::" in rule.pattern or rule.pattern.startswith("*"), rule.pattern


def test_summary_counts_and_rate_under_current_exclusions():
    records = [
        conf.ConformanceRecord("a::1", "conv", "pass"),
        conf.ConformanceRecord("a::2", "conv", "fail", detail="Mismatch", cause="precision: ..."),
        conf.ConformanceRecord("a::3", "conv", "fail", detail="Mismatch", cause="kernel: ..."),
        conf.ConformanceRecord("iOS18/test_states.py::T::t", "states", "fail"),  # excluded now
        conf.ConformanceRecord("b::1", "pool", "pass"),
        conf.ConformanceRecord("b::2", "pool", "not-reached"),
        conf.ConformanceRecord("b::3", "pool", "excluded"),  # no rule matches any more: stale
    ]
    rows, total = conf.summarize(records)
    assert [r.family for r in rows] == ["conv", "pool", "states"]
    assert (rows[0].reached, rows[0].passed, rows[0].failed) == (3, 1, 2)
    assert rows[0].reached_rate == pytest.approx(1 / 3)
    assert (rows[2].excluded, rows[2].reached) == (1, 0)
    assert (total.reached, total.passed, total.failed, total.not_reached) == (4, 2, 2, 2)
    # the headline counts exclusions as not passing: 2 / (4 reached + 1 excluded)
    assert (total.reached_rate, total.headline) == (pytest.approx(0.5), pytest.approx(0.4))
    assert rows[2].headline == 0.0
    assert conf.ConformanceRecord.from_json(records[1].to_json()) == records[1]
    old = '{"nodeid": "a::1", "family": "conv", "status": "fail", "declared": "pass"}'
    assert conf.ConformanceRecord.from_json(old).status == "fail"  # older logs still read


def test_hash_sample_is_deterministic_and_about_the_asked_share():
    ids = [f"iOS17/test_conv.py::TestConv::test_x[{i}]" for i in range(4000)]
    chosen = [i for i in ids if conf.in_hash_sample(i, 10)]
    assert 300 < len(chosen) < 500
    assert chosen == [i for i in ids if conf.in_hash_sample(i, 10)]
    assert all(conf.in_hash_sample(i, 100) for i in ids[:50])


def test_read_log_keeps_the_last_verdict_of_a_rerun(tmp_path):
    log = tmp_path / "x.jsonl"
    log.write_text(
        conf.ConformanceRecord("a::1", "conv", "fail").to_json() + "\n"
        + conf.ConformanceRecord("a::1", "conv", "pass").to_json() + "\n"
    )
    assert [r.status for r in conf.read_log(log)] == ["pass"]


@pytest.fixture(scope="module")
def tiny_model():
    ct = pytest.importorskip("coremltools")
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.transpose(x=mb.mul(x=x, y=2.0), perm=[1, 0], name="out")

    return ct.convert(prog, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                      compute_units=ct.ComputeUnit.CPU_ONLY,
                      minimum_deployment_target=ct.target.iOS17)


def test_simulated_compare_backend_predicts_and_can_fail(tiny_model):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outputs = plugin.simulated_compare_backend(tiny_model, {"x": x}, {"out": (2 * x).T})
    np.testing.assert_array_equal(outputs["out"], (2 * x).T)
    with pytest.raises(AssertionError):
        plugin.simulated_compare_backend(tiny_model, {"x": x}, {"out": (2 * x).T + 1e-3})
    with pytest.raises(AssertionError, match="shape"):
        plugin.simulated_compare_backend(tiny_model, {"x": x}, {"out": 2 * x})
    # fp16 backends get coremltools' device tolerance (atol 0.5): an error of 0.1 passes
    plugin.simulated_compare_backend(tiny_model, {"x": x}, {"out": (2 * x).T + 0.1}, dtype="fp16")


def test_fp16_tensors_in_an_fp32_program_are_rounded_and_failures_get_a_cause():
    """Issue 15 item 4: an fp16-typed add in an fp32 program is rounded to fp16 on the
    fp32 backend, as Core ML's CPU stores it; a mismatch is explained by its cause."""
    ct = pytest.importorskip("coremltools")
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(3,))], opset_version=ct.target.iOS17)
    def prog(x):
        half = mb.add(x=mb.cast(x=x, dtype="fp16"), y=np.float16(1.0))
        return mb.cast(x=half, dtype="fp32", name="out")

    model = ct.convert(prog, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                       compute_units=ct.ComputeUnit.CPU_ONLY,
                       minimum_deployment_target=ct.target.iOS17)
    x = np.array([0.1, 0.2, 0.3], np.float32)
    rounded = (x.astype(np.float16) + np.float16(1)).astype(np.float32)
    plugin.pytest_runtest_logstart("case", None)
    plugin.simulated_compare_backend(model, {"x": x}, {"out": rounded}, atol=1e-6, rtol=0)
    assert plugin._Current.failure is None
    with pytest.raises(plugin.Mismatch, match=r"3 of 3 elements off, max \|error\| 0.000"):
        plugin.simulated_compare_backend(model, {"x": x}, {"out": x + 1}, atol=1e-6, rtol=0)
    assert plugin._Current.cause == (
        "precision: passes in float64, fails at fp32 [not device-verified expectation; fp32 "
        "program with fp16-typed tensors]"
    )


SAMPLE_PER_FILE = 3


@pytest.mark.slow
def test_representative_sample_of_every_family(tmp_path):
    """A few evenly spaced tests of every op-test file, both precisions, all opsets."""
    families = conf.op_test_files()
    log = tmp_path / "sample.jsonl"
    paths = [p for group in families.values() for p in group]
    conf.run_pytest(paths, log, sample=SAMPLE_PER_FILE, timeout=900)
    rows, total = conf.summarize(conf.read_log(log))
    logged = {row.family for row in rows}
    assert logged == set(families), f"families without a verdict: {set(families) - logged}"
    failures = [r for r in conf.read_log(log) if r.status == "fail"]
    assert total.reached >= 40, total
    # Excluded cases count against the headline, and the device-verified crop_resize
    # smoke test (an inverted, out-of-range box) fails by design: 85 / 92 at 3 per file.
    assert total.headline >= 0.9, [(f.nodeid, f.detail, f.cause) for f in failures]
    assert all(f.cause for f in failures)  # every failure explained by its cause
