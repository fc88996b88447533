"""torch → Core ML conversion: both paths recorded, precision, isolation, overrides.

Small models only (MiniLM lives in test_minilm.py, marked slow). Conversions are cached
per test session by content (source file, precision, setup), since several tests look
at the same converted package.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from support import REPO

from nebisect.arrays import sha256_bytes
from nebisect.isolate import Isolator
from nebisect.mil.interp import run_program
from nebisect.mil.load import load_program
from nebisect.sources import converter_overrides
from nebisect.sources.convert import (
    OVERRIDES_NOTE,
    OVERRIDES_SETUP,
    PATHS,
    ConvertArguments,
    convert_isolated,
    convert_job,
    convert_paths,
    convert_source,
    converter_message,
    summarize,
)
from nebisect.sources.resolve import Source
from nebisect.sources.torch_load import load_torch_source
from nebisect.verdict import error_signature

EXAMPLES = REPO / "examples"
MEANPOOL = f"{EXAMPLES / 'meanpool.py'}:model"
LOGSUMEXP = f"{EXAMPLES / 'logsumexp_ne.py'}:model"
FAILS = f"{EXAMPLES / 'convert_fails.py'}:model"

#: Exercises every export-path override: a scalar bool ``new_ones`` (folded to a
#: constant), a ``new_ones`` of run-time size (``fill``) and ``&`` (``aten.__and__``).
OVERRIDE_PROBE = """
import torch

class Probe(torch.nn.Module):
    def forward(self, x):
        keep = x.new_ones((), dtype=torch.bool) & (x > 0)
        return torch.where(keep, x, x.new_ones(x.shape[1]) * 2)

def model():
    return {"module": Probe(), "example_inputs": (torch.randn(2, 5),),
            "dynamic_dims": {"x": {1: (2, 64)}}}
"""


@pytest.fixture(scope="session")
def converted(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., dict[str, object]]:
    """(source, precision, setup) → convert_job's verdict + package, cached by content."""
    root = tmp_path_factory.mktemp("converted")
    cache: dict[str, dict[str, object]] = {}

    def convert(source: str, precision: str, setup: tuple[str, ...] = ()) -> dict[str, object]:
        path, _, factory = source.rpartition(":")
        key = sha256_bytes(
            Path(path).read_bytes() + f"{factory}|{precision}|{setup}".encode()
        )[:16]
        if key not in cache:
            package = root / f"{key}.mlpackage"
            try:
                verdict = convert_job(ConvertArguments(
                    source, precision, dict.fromkeys(PATHS, str(package)), setup=list(setup)))
            finally:
                converter_overrides.uninstall()
            cache[key] = {"verdict": verdict, "package": package}
        return cache[key]

    return convert


@pytest.fixture
def probe_source(tmp_path: Path) -> str:
    path = tmp_path / "probe.py"
    path.write_text(textwrap.dedent(OVERRIDE_PROBE))
    return f"{path}:model"


def test_meanpool_converts_through_export_with_its_dynamic_range(converted) -> None:
    result = converted(MEANPOOL, "fp32")
    verdict = result["verdict"]
    assert verdict.status == "pass" and verdict.stage == "convert"
    attempts = {a["path"]: a for a in verdict.conversion.attempts}
    assert list(attempts) == ["export", "trace"]
    assert attempts["export"]["status"] == "ok"
    assert verdict.conversion.path == "export"
    assert verdict.conversion.op_types["reduce_sum"] == 2
    program = load_program(result["package"])
    main = program.functions["main"]
    assert list(main.inputs) == ["tokens", "attention_mask"]
    assert [v.name for v in main.outputs] == ["output"]
    spec = _spec(result["package"])
    ranges = {i.name: [(r.lowerBound, r.upperBound)
                       for r in i.type.multiArrayType.shapeRange.sizeRanges]
              for i in spec.description.input}
    assert ranges == {"tokens": [(1, 1), (1, 382), (768, 768)],
                      "attention_mask": [(1, 1), (1, 382)]}


def _spec(package: object):
    from nebisect.mil.quiet import import_coremltools

    return import_coremltools().utils.load_spec(str(package))


def test_precision_follows_the_target(converted) -> None:
    def float_dtypes(precision: str) -> set[str]:
        program = load_program(converted(LOGSUMEXP, precision)["package"])
        return {str(op.outputs[0].dtype.__name__) for op in program.functions["main"].operations
                if op.op_type in ("conv", "reduce_log_sum_exp", "linear")}

    assert float_dtypes("fp16") == {"fp16"}
    assert float_dtypes("fp32") == {"fp32"}
    assert float_dtypes("fp64") == {"fp32"}


def test_converted_logsumexp_matches_torch_in_the_simulator(converted) -> None:
    program = load_program(converted(LOGSUMEXP, "fp32")["package"])
    x = np.full((1, 1, 8, 8), 7.7, dtype=np.float32)
    out = run_program(program, {"x": x}, "fp64").outputs["output"]
    np.testing.assert_allclose(out, np.full((1, 16), 7.7 + np.log(32.0)), rtol=1e-6)


def test_unconvertible_model_is_a_convert_error_with_both_messages(converted) -> None:
    verdict = converted(FAILS, "fp32")["verdict"]
    assert verdict.status == "error" and verdict.stage == "convert"
    assert verdict.message == (
        "torch.export: NotImplementedError: Unsupported fx node lgamma, kind lgamma | "
        "jit.trace: NotImplementedError: PyTorch convert function for op 'lgamma' "
        "not implemented."
    )
    assert verdict.signature.startswith(
        "error:convert:torch.export: NotImplementedError: Unsupported fx node lgamma"
    )
    assert [a["status"] for a in verdict.conversion.attempts] == ["failed", "failed"]
    assert verdict.conversion.path is None


def test_overrides_are_opt_in_and_restore_the_registry(probe_source: str) -> None:
    source = load_torch_source(probe_source)
    registry = converter_overrides._registry().name_to_func_mapping
    before = {name: registry.get(name) for name in converter_overrides.OVERRIDDEN_OPS}
    models, attempts = convert_source(source, "fp32")
    assert models == {}
    assert summarize(attempts) == (
        "torch.export: NotImplementedError: Unsupported fx node new_ones, kind new_ones | "
        "jit.trace: NotImplementedError: PyTorch convert function for op 'new_ones' "
        "not implemented."
    )
    converter_overrides.install()
    try:
        converter_overrides.install()
        assert converter_overrides.installed()
        models, attempts = convert_source(source, "fp32")
    finally:
        converter_overrides.uninstall()
    assert not converter_overrides.installed()
    assert {name: registry.get(name) for name in converter_overrides.OVERRIDDEN_OPS} == before
    assert [a.status for a in attempts] == ["ok", "ok"]
    model = models["export"]
    ops = [op.op_type for op in model._mil_program.functions["main"].operations]
    assert "fill" in ops and "logical_and" in ops
    for width in (3, 17):
        x = np.random.default_rng(width).standard_normal((2, width)).astype(np.float32)
        out = run_program(model._mil_program, {"x": x}, "fp64").outputs["output"]
        expected = source.module(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_int_override_fixes_the_trace_path_of_seed_003(converted) -> None:
    plain = {a["path"]: a for a in converted(MEANPOOL, "fp32")["verdict"].conversion.attempts}
    assert plain["trace"]["message"] == (
        "TypeError: only 0-dimensional arrays can be converted to Python scalars"
    )
    fixed = converted(MEANPOOL, "fp32", (OVERRIDES_SETUP,))["verdict"]
    assert [a["status"] for a in fixed.conversion.attempts] == ["ok", "ok"]
    assert fixed.conversion.setup == [OVERRIDES_SETUP]
    assert not converter_overrides.installed()


def test_isolated_conversion_failure_leaves_the_parent_unharmed(
    isolator: Isolator, tmp_path: Path
) -> None:
    package, verdict = convert_isolated(Source("torch", FAILS), "fp16", tmp_path, isolator)
    assert package is None
    assert verdict.status == "error" and verdict.stage == "convert"
    assert "Unsupported fx node lgamma" in verdict.message
    assert verdict.conversion.precision == "fp16"
    assert not converter_overrides.installed()


def test_isolated_conversion_writes_the_package(isolator: Isolator, tmp_path: Path) -> None:
    package, verdict = convert_isolated(
        Source("torch", LOGSUMEXP), "fp16", tmp_path, isolator
    )
    assert verdict.status == "pass", verdict.message
    assert package == tmp_path / "converted-fp16.mlpackage" and package.is_dir()
    assert verdict.message == "torch.export: ok | jit.trace: ok"
    assert verdict.provenance, "isolation stamps provenance on every verdict"


def test_isolated_conversion_on_one_path(isolator: Isolator, tmp_path: Path) -> None:
    """What replay does for a case recorded with ``convert_path``: a bug may live on
    one path only, so the package is that path's, not the first that converts."""
    package, verdict = convert_isolated(
        Source("torch", LOGSUMEXP), "fp32", tmp_path, isolator, paths=("trace",)
    )
    assert verdict.status == "pass" and package is not None and package.is_dir()
    assert verdict.message == "jit.trace: ok" and verdict.conversion.path == "trace"


def test_a_source_error_in_the_child_is_a_convert_error(
    isolator: Isolator, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def model():\n    raise RuntimeError('weights not found')\n")
    package, verdict = convert_isolated(
        Source("torch", f"{broken}:model"), "fp32", tmp_path, isolator
    )
    assert package is None
    assert verdict.status == "error" and verdict.stage == "convert"
    assert "the factory raised RuntimeError: weights not found" in verdict.message


DICT_OUTPUTS = """
import torch

class TwoHeads(torch.nn.Module):
    def forward(self, x):
        return {"logits": x * 2, "hidden": torch.tanh(x)}

def model():
    return {"module": TwoHeads(), "example_inputs": (torch.randn(2, 5),)}
"""


def test_a_forward_returning_a_dict_converts_on_both_paths(tmp_path: Path) -> None:
    """jit.trace refuses dict outputs and coremltools has no dictconstruct: every
    Hugging Face wrapper lost its trace path until the values were traced as a tuple."""
    path = tmp_path / "two_heads.py"
    path.write_text(textwrap.dedent(DICT_OUTPUTS))
    source = load_torch_source(f"{path}:model")
    models, attempts = convert_source(source, "fp32")
    assert [(a.path, a.status) for a in attempts] == [("export", "ok"), ("trace", "ok")]
    x = source.example_inputs["x"].numpy()
    for model in models.values():
        outputs = run_program(model._mil_program, {"x": x}).outputs
        assert sorted(outputs) == ["hidden", "logits"]
        np.testing.assert_allclose(outputs["logits"], x * 2, rtol=1e-6)
        np.testing.assert_allclose(outputs["hidden"], np.tanh(x), rtol=1e-5)


DATA_DEPENDENT_BRANCH = """
import torch

class Branch(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else -x

def model():
    return {"module": Branch(), "example_inputs": (torch.ones(2, 5),)}
"""


def test_torch_export_refusing_the_program_is_said_apart_from_the_converter(
    tmp_path: Path
) -> None:
    """A branch on a value: torch.export refuses it before coremltools sees a program
    (``not exportable``, torch's exception after it); jit.trace records the branch taken
    and converts."""
    path = tmp_path / "branch.py"
    path.write_text(textwrap.dedent(DATA_DEPENDENT_BRANCH))
    models, attempts = convert_source(load_torch_source(f"{path}:model"), "fp32")
    assert [(a.path, a.status) for a in attempts] == [("export", "failed"), ("trace", "ok")]
    assert attempts[0].message.startswith("not exportable: GuardOnDataDependentSymNode: "
                                          "Could not guard on data-dependent expression")
    assert list(models) == ["trace"]


def test_a_converter_message_says_torch_refused_before_the_cause() -> None:
    from nebisect.sources.frontend import Refused, is_refusal, torch_step

    with pytest.raises(Refused) as raised, torch_step("trace"):
        raise RuntimeError("Tracer cannot infer type of output\nsecond line")
    message = converter_message(raised.value)
    assert message == "not traceable: RuntimeError: Tracer cannot infer type of output"
    assert is_refusal(message) and not is_refusal("RuntimeError: not traceable: x")
    with pytest.raises(MemoryError), torch_step("export"):
        raise MemoryError  # the memory limit's verdict, not torch refusing the program


#: ``new_ones`` (cured by the overrides) and ``lgamma`` (no converter at all): with the
#: overrides the conversion gets past the first and stops at the second
PAST_THE_FIRST = """
import torch

class Both(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x + x.new_ones(x.shape[1]))

def model():
    return {"module": Both(), "example_inputs": (torch.rand(2, 5) + 0.5,)}
"""


def test_cure_converts_a_cured_failure_again_with_the_overrides(probe_source: str) -> None:
    """``run``'s default: a path failing for a reason the overrides cure converts again
    with them — ok, its failure at the defaults kept as ``cured``, a note saying how it
    converted — and the overrides are gone again afterwards."""
    source = load_torch_source(probe_source)
    registry = converter_overrides._registry().name_to_func_mapping
    before = {name: registry.get(name) for name in converter_overrides.OVERRIDDEN_OPS}
    models, attempts = convert_source(source, "fp32", cure=True)
    assert not converter_overrides.installed()
    assert {name: registry.get(name) for name in converter_overrides.OVERRIDDEN_OPS} == before
    assert [(a.path, a.status) for a in attempts] == [("export", "ok"), ("trace", "ok")]
    assert [a.cured for a in attempts] == [
        "NotImplementedError: Unsupported fx node new_ones, kind new_ones",
        "NotImplementedError: PyTorch convert function for op 'new_ones' not implemented."]
    assert {a.note for a in attempts} == {OVERRIDES_NOTE}
    assert OVERRIDES_NOTE.startswith("converted with nebisect's converter overrides (new_ones")
    assert summarize(attempts) == ("torch.export: ok with the overrides | "
                                   "jit.trace: ok with the overrides")
    x = np.random.default_rng(3).standard_normal((2, 9)).astype(np.float32)
    out = run_program(models["export"]._mil_program, {"x": x}, "fp64").outputs["output"]
    np.testing.assert_allclose(out, source.module(torch.from_numpy(x)).numpy(), rtol=1e-6)


def test_cure_leaves_other_failures_and_installed_overrides_alone(probe_source: str,
                                                                   tmp_path: Path) -> None:
    source = load_torch_source(FAILS)
    _, attempts = convert_source(source, "fp32", cure=True)
    assert [(a.status, a.cured, a.note) for a in attempts] == [("failed", "", "")] * 2
    # overrides installed by the user (--converter-overrides): nothing is "cured"
    converter_overrides.install()
    try:
        _, attempts = convert_source(load_torch_source(probe_source), "fp32", cure=True)
    finally:
        converter_overrides.uninstall()
    assert [(a.status, a.cured, a.note) for a in attempts] == [("ok", "", "")] * 2
    # past the cured failure, the next one: the path fails with its message at the
    # defaults, the note says what the overrides ran into
    both = tmp_path / "both.py"
    both.write_text(textwrap.dedent(PAST_THE_FIRST))
    models, [export] = convert_source(load_torch_source(f"{both}:model"), "fp32",
                                         cure=True, paths=("export",))
    assert models == {} and not converter_overrides.installed()
    assert export.status == "failed" and "new_ones" in export.message and not export.cured
    assert export.note.startswith("with nebisect's converter overrides it fails too: ")
    assert "lgamma" in export.note
    # the overrides tried in vain: the failure says so, and advises no rerun with them
    # (DINOv2's jit.trace: aten::Int cured, upsample_bicubic2d not)
    from nebisect.sources.convert import one_path_failure

    told = one_path_failure(export, {"trace": "pass"}).message
    assert told.endswith(f"({export.note}); jit.trace: pass") and "new_ones" in told
    assert converter_overrides.overrides_hint(export.message)
    assert converter_overrides.overrides_hint(told) == ""


def test_a_cured_path_is_a_convert_verdict_of_its_own() -> None:
    """What ``run`` makes of a cured path's failure at the defaults: an error at stage
    convert with the signature converting that path alone at the defaults gives."""
    from nebisect.sources.convert import ConversionAttempt, cured_failure, is_cured_failure

    attempt = ConversionAttempt("trace", "ok", cured="TypeError: only 0-dimensional arrays "
                                "can be converted to Python scalars", note=OVERRIDES_NOTE)
    verdict = cured_failure(attempt)
    assert verdict.status == "error" and verdict.stage == "convert" and is_cured_failure(verdict)
    assert verdict.signature == error_signature("convert", f"jit.trace: {attempt.cured}")
    assert verdict.message == (
        "conversion fails at coremltools' defaults on jit.trace: TypeError: only "
        "0-dimensional arrays can be converted to Python scalars; judged as converted "
        "with nebisect's converter overrides")
    assert converter_overrides.overrides_hint(verdict.message)


def test_cured_failures_are_per_path_beside_a_plain_conversion_else_the_whole_one() -> None:
    from nebisect.sources.convert import ConversionAttempt, cured_failures
    from nebisect.verdict import ConversionFacts, Verdict

    new_ones = "NotImplementedError: Unsupported fx node new_ones, kind new_ones"
    scalar = "TypeError: only 0-dimensional arrays can be converted to Python scalars"

    def converted(*attempts: ConversionAttempt) -> Verdict:
        return Verdict("pass", "convert", conversion=ConversionFacts(
            [a.to_dict() for a in attempts], "fp32"))

    plain = ConversionAttempt("export", "ok")
    assert cured_failures(converted(plain, ConversionAttempt("trace", "ok"))) == []
    [(path, verdict)] = cured_failures(converted(plain, ConversionAttempt(
        "trace", "ok", note=OVERRIDES_NOTE, cured=scalar)))
    assert path == "trace" and verdict.message.startswith(
        "conversion fails at coremltools' defaults on jit.trace: TypeError")
    [(path, verdict)] = cured_failures(converted(
        ConversionAttempt("export", "ok", note=OVERRIDES_NOTE, cured=new_ones),
        ConversionAttempt("trace", "ok", note=OVERRIDES_NOTE, cured=scalar)))
    at_defaults = f"torch.export: {new_ones} | jit.trace: {scalar}"
    assert path == "" and verdict.signature == error_signature("convert", at_defaults)
    assert verdict.message == (f"conversion fails at coremltools' defaults: {at_defaults}; "
                               "judged as converted with nebisect's converter overrides")


def test_a_path_failing_with_the_overrides_too_is_told_in_the_whole_conversions_failure(
) -> None:
    """MobileBERT: torch.export fails for a reason the overrides do not cure, jit.trace
    for one they do — one failure at the defaults, naming the path judged."""
    from nebisect.sources.convert import ConversionAttempt, cured_failures
    from nebisect.verdict import ConversionFacts, Verdict

    export = ConversionAttempt("export", "failed", "UserError: Constraints violated (dim0)!")
    trace = ConversionAttempt("trace", "ok", note=OVERRIDES_NOTE, cured="NotImplementedError: "
                              "PyTorch convert function for op 'new_ones' not implemented.")
    [(path, verdict)] = cured_failures(Verdict("pass", "convert", conversion=ConversionFacts(
        [export.to_dict(), trace.to_dict()], "fp32")))
    assert path == ""
    assert verdict.message == (
        "conversion fails at coremltools' defaults: torch.export: UserError: Constraints "
        "violated (dim0)! | jit.trace: NotImplementedError: PyTorch convert function for op "
        "'new_ones' not implemented.; jit.trace judged as converted with nebisect's converter "
        "overrides")


def _program_and_weights(package: Path) -> tuple[bytes, bytes]:
    """What a package runs: its MIL program (build info included) and its weights."""
    import coremltools as ct

    spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
    weights = package / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    return spec.mlProgram.SerializeToString(deterministic=True), (
        weights.read_bytes() if weights.is_file() else b"")


@pytest.mark.parametrize("location", [LOGSUMEXP, MEANPOOL])
def test_both_precisions_from_one_conversion_are_the_programs_two_conversions_make(
        isolator: Isolator, tmp_path: Path, location: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nebisect.sources import convert

    children: list[str] = []
    in_child = convert._convert_in_child

    def counted(source: Source, precision: str, *args: object, **kwargs: object) -> object:
        children.append(precision)
        return in_child(source, precision, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(convert, "_convert_in_child", counted)
    apart = {}
    for precision in ("fp32", "fp16"):
        (tmp_path / precision).mkdir()
        apart[precision] = convert_paths(Source("torch", location), precision,
                                         tmp_path / precision, isolator)
    # the first call converts once per path for both precisions; the second converts nothing
    (tmp_path / "together").mkdir()
    together = {precision: convert_paths(Source("torch", location), precision,
                                         tmp_path / "together", isolator,
                                         precisions=("fp32", "fp16"))
                for precision in ("fp16", "fp32")}
    assert children == ["fp32", "fp16", "fp16"]
    for precision, (packages, verdict) in apart.items():
        derived_packages, derived = together[precision]
        assert verdict.conversion is not None and derived.conversion is not None
        assert derived.conversion.precision == precision
        assert derived.conversion.op_types == verdict.conversion.op_types
        assert [(a["path"], a["status"], a["note"]) for a in derived.conversion.attempts] == [
            (a["path"], a["status"], a["note"]) for a in verdict.conversion.attempts]
        assert list(derived_packages) == list(packages)
        for path, package in packages.items():
            assert _program_and_weights(derived_packages[path]) == _program_and_weights(package)
