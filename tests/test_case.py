"""Target spec grammar, cases and source references: building, identity, JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nebisect.arrays import save_npz
from nebisect.case import Case, CaseOptions, SourceRef
from nebisect.errors import NebisectError
from nebisect.targets.spec import TORCH_REFERENCE_SPEC, TargetSpec, TargetSpecError


@pytest.mark.parametrize(
    ("spec", "backend", "variant", "precision"),
    [
        ("sim:fp16", "sim", "fp16", "fp16"),
        ("sim:fp16-naive", "sim", "fp16-naive", "fp16"),
        ("sim:ane", "sim", "ane", "fp16"),
        ("sim:fp64", "sim", "fp64", "fp64"),
        ("coreml:ne", "coreml", "ne", "fp16"),
        ("coreml:cpu", "coreml", "cpu", "fp32"),
        ("torch:cpu", "torch", "cpu", "fp32"),
        ("torch:cpu:fp64", "torch", "cpu", "fp64"),
    ],
)
def test_parse_target(spec: str, backend: str, variant: str, precision: str) -> None:
    parsed = TargetSpec.parse(spec)
    assert (parsed.backend, parsed.variant, parsed.precision) == (backend, variant, precision)


def test_torch_spec_round_trips_with_default_dtype() -> None:
    assert str(TargetSpec.parse("torch:cpu")) == "torch:cpu:fp32"


@pytest.mark.parametrize(
    "spec", ["sim:fp8", "gpu", "coreml:npu", "torch:cuda", "torch:cpu:int8", ""]
)
def test_unknown_specs_are_clear_errors(spec: str) -> None:
    with pytest.raises(TargetSpecError, match="unknown target"):
        TargetSpec.parse(spec)


def test_case_round_trip_and_identity() -> None:
    case = Case(SourceRef("mlpackage", "m.mlpackage"), "sim:fp16", model_sha256="a" * 64,
                inputs_sha256="b" * 64, options=CaseOptions(op_of_interest="softplus"))
    again = Case.from_dict(case.to_dict())
    assert again == case and again.case_id == case.case_id
    other = Case.from_dict({**case.to_dict(), "target": "sim:ane"})
    assert other.case_id != case.case_id
    with pytest.raises(NebisectError, match="unknown stage"):
        Case(SourceRef("mlpackage", "m"), "sim:fp16", stage="compile")


def test_case_options_serialize_set_fields_only_and_round_trip() -> None:
    assert CaseOptions().to_dict() == {}
    assert CaseOptions(op_of_interest="softplus").to_dict() == {"op_of_interest": "softplus"}
    full = CaseOptions(plugins=("p.py",), params={"op": "exp", "axes": [-1]}, outputs=("y",),
                       intermediates=True, judge_precision="fp32", op_of_interest="exp",
                       reference_source=("torch", "m.py:f"), convert_path="trace")
    body = full.to_dict()
    assert json.dumps(body) == (
        '{"plugins": ["p.py"], "params": {"op": "exp", "axes": [-1]}, "outputs": ["y"], '
        '"intermediates": true, "judge_precision": "fp32", "op_of_interest": "exp", '
        '"reference_source": ["torch", "m.py:f"], "convert_path": "trace"}')
    assert CaseOptions.from_dict(json.loads(json.dumps(body))) == full
    case = Case(SourceRef("torch", "m.py:f"), "sim:fp32", options=full)
    assert Case.from_dict(json.loads(json.dumps(case.to_dict()))) == case


@pytest.mark.parametrize(("options", "message"), [
    ({"op_of_intrest": "exp"}, r"unknown case option 'op_of_intrest': one of plugins, params"),
    ({"plugins": "p.py"}, r"case option 'plugins' has the wrong type \('p.py'\)"),
    ({"reference_source": ["torch"]}, r"case option 'reference_source' has the wrong type"),
    ({"intermediates": 1}, r"case option 'intermediates' has the wrong type"),
    (["plugins"], r"Case field 'options' has the wrong type \(\['plugins'\]\)"),
])
def test_case_options_refuse_unknown_keys_and_wrong_types(options: object, message: str) -> None:
    with pytest.raises(NebisectError, match=message):
        Case.from_dict({"ref": {"kind": "mlpackage", "location": "m"}, "target": "sim:fp16",
                        "options": options})


@pytest.mark.parametrize(("target", "judged"), [("sim:fp64", "fp32"), ("sim:fp16", "")])
def test_every_site_judging_a_package_against_torch_applies_one_precision_rule(
        tmp_path, monkeypatch: pytest.MonkeyPatch, target: str, judged: str) -> None:
    """`run`'s cells, the reducer's torch candidates and replay's converted corpus cases
    each build a package case judged against the torch module; on an fp64 target all
    three judge at fp32 (the converter's fp32 weights), elsewhere at the target's own."""
    from nebisect.corpus import CaseRecord, CorpusCase, Expected
    from nebisect.evaluate.workbench import Workbench
    from nebisect.guard.replay import on_package
    from nebisect.isolate import Outcome
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.minimize import candidates
    from nebisect.sources import convert
    from nebisect.sources.resolve import Source
    from nebisect.verdict import Verdict

    package = tmp_path / "m.mlpackage"
    package.mkdir()
    (package / "Manifest.json").write_text("{}")
    inputs = tmp_path / "inputs.npz"
    save_npz(inputs, {"x": np.ones(3, np.float32)})
    built = {}

    converted = ({"export": package}, Verdict("pass", "convert"))
    bench = Workbench(Source("torch", "m.py:f"), tmp_path, None, TORCH_REFERENCE_SPEC,
                      Timeouts(), convert=lambda *args, **kwargs: converted)
    built["run"] = bench.case(TargetSpec.parse(target), "export", str(inputs)).options

    def evaluate(case: Case, **kwargs: object) -> Outcome:
        built["bisect"] = case.options
        return Outcome(Verdict("pass"))

    monkeypatch.setattr(convert, "convert_isolated", lambda *a, **k: (package, converted[1]))
    monkeypatch.setattr(candidates, "evaluate", evaluate)
    candidates.run_torch_source("m.py:f", "fp32", (), tmp_path, None, Timeouts(),
                                target=TargetSpec.parse(target), inputs={"x": np.ones(3)})

    record = CaseRecord("0" * 16, "torch", target, Expected("pass"), factory="f",
                        files={"model.py": "a" * 64, "inputs.npz": "b" * 64})
    case = CorpusCase(record, tmp_path / "case")
    built["replay"] = on_package(case, package).options

    assert {site: options.judge_precision for site, options in built.items()} == {
        "run": judged, "bisect": judged, "replay": judged}
    assert {options.reference_source[0] for options in built.values()} == {"torch"}


@pytest.mark.parametrize(("ref", "files", "factory", "oracle"), [
    (SourceRef("mlpackage", "m/model.mlpackage"), ("m/model.mlpackage",), "", "sim:fp64"),
    (SourceRef("torch", "m/model.py:build"), ("m/model.py",), "build", "torch:cpu:fp64"),
    (SourceRef("builder", "pkg.mod:program"), (), "", "sim:fp64"),
])
def test_a_source_ref_names_its_files_factory_and_oracle(
        ref: SourceRef, files: tuple[str, ...], factory: str, oracle: str) -> None:
    assert ref.files() == files and ref.factory == factory and str(ref.reference_target) == oracle
    rebased = ref.rebased("/ship")
    assert rebased.files() == tuple(f"/ship/{f}" for f in files)
    assert rebased.factory == factory and rebased.kind == ref.kind


def test_a_case_hands_out_its_source_ref_and_an_unknown_kind_is_refused() -> None:
    case = Case(SourceRef("torch", "m.py:build"), "sim:fp16")
    assert case.ref == SourceRef("torch", "m.py:build")
    with pytest.raises(NebisectError, match="unknown source kind 'onnx'"):
        SourceRef("onnx", "m.onnx")
