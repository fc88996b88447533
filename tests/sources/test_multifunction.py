"""Multifunction packages (``ct.utils.save_multifunction``): each function judged as the
program it is — ``run`` every function (``--function``: one), ``lint``, ``bisect``,
``fuzz`` and ``corpus add`` the one named (a corpus case records it, replay runs it) —
and a function the package lacks is a one-line error, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from support.multifunction import DEFAULT, FUNCTIONS, build_multifunction

from nebisect.arrays import save_npz
from nebisect.case import Case, SourceRef
from nebisect.cli import main
from nebisect.corpus import Corpus
from nebisect.corpus.record import CaseRecord, Expected
from nebisect.errors import NebisectError
from nebisect.mil.load import load_program
from nebisect.sources.resolve import package_functions, resolve_source

#: a torch source, for ``--function`` where there is none to pick
TORCH_SOURCE = "examples/meanpool.py:model"
#: the fuzz options every campaign here takes: the fp16 simulator, a few cases
FUZZ = ("-t", "sim:fp16", "--budget", "6", "--shrink-budget", "0", "--json")


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Path:
    return build_multifunction(tmp_path_factory.mktemp("multifunction"))


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["nebisect", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_each_function_loads_as_the_main_of_a_program_of_its_own(multi):
    for name, (_, shape) in FUNCTIONS.items():
        program = load_program(multi, name)
        assert list(program.functions) == ["main"]
        assert tuple(program.functions["main"].inputs["x"].shape) == shape
    default = load_program(multi)
    assert tuple(default.functions["main"].inputs["x"].shape) == FUNCTIONS[DEFAULT][1]


def test_resolving_names_the_function_with_its_own_inputs(multi):
    assert package_functions(str(multi)) == ("prefill", "decode")
    decode = resolve_source(str(multi), function="decode")
    assert decode.ref == SourceRef("mlpackage", str(multi), "decode")
    assert [d.dims for d in decode.inputs] == [[(1, 1), (3, 3), (5, 5)]]
    assert resolve_source(str(multi)).function == DEFAULT
    with pytest.raises(NebisectError, match=r"no function 'nope' \(its functions: "
                       r"prefill, decode\)"):
        resolve_source(str(multi), function="nope")


def test_the_function_is_part_of_a_case_identity_and_travels_in_its_json(multi):
    cases = [Case(SourceRef("mlpackage", str(multi), name), "sim:fp16") for name in FUNCTIONS]
    assert cases[0].case_id != cases[1].case_id
    assert Case.from_dict(cases[1].to_dict()).ref.function == "decode"
    plain = Case(SourceRef("mlpackage", str(multi)), "sim:fp16").to_dict()
    assert "function" not in plain["ref"]
    with pytest.raises(NebisectError, match=r"only an \.mlpackage has functions"):
        SourceRef("torch", "m.py:factory", "decode")


def test_run_judges_every_function_and_names_it(multi, monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "run", str(multi), "-t", "sim:fp16",
                       "--explore", "none", "--json")
    assert code == 1
    document = json.loads(out)
    reports = {p["function"]: p for p in document["programs"]}
    assert list(reports) == ["prefill", "decode"]
    assert [r["failed"] for r in reports.values()] == [False, True]
    assert reports["prefill"]["findings"] == []
    (finding,) = reports["decode"]["findings"]
    assert [r["verdict"]["signature"] for r in reports["decode"]["rows"]] == [
        "mismatch:nonfinite"]
    assert finding["attribution"] == "precision"


def test_run_function_judges_that_one(multi, monkeypatch, capsys, tmp_path):
    code, out, _ = cli(monkeypatch, capsys, "run", str(multi), "--function", "prefill",
                       "-t", "sim:fp16", "--explore", "none", "--json")
    assert code == 0
    assert json.loads(out)["function"] == "prefill"
    code, out, _ = cli(monkeypatch, capsys, "run", str(multi), "--function", "decode",
                       "-t", "sim:fp16", "--explore", "none",
                       "--save-triggers", str(tmp_path / "triggers"))
    assert code == 1
    # the matrix's title wraps at the table's width (a long temporary path)
    assert f"nebisect run {multi} --function decode" in " ".join(out.split())
    (trigger,) = json.loads((tmp_path / "triggers" / "triggers.json").read_text())["triggers"]
    bisect, corpus_add = trigger["commands"]
    assert f"bisect {multi} --function decode -t sim:fp16" in bisect
    assert f"corpus add corpus {multi} --function decode -t sim:fp16 --inputs " in corpus_add


def _extra(command: str, tmp_path: Path) -> list[str]:
    """What ``command`` needs besides SOURCE and --function to get as far as resolving."""
    save_npz(tmp_path / "x.npz", {"x": np.zeros((1, 3, 5), np.float32)})
    return {"run": ["--explore", "none"], "lint": [],
            "bisect": ["-t", "sim:fp16", "--out", str(tmp_path / "out")],
            "fuzz": list(FUZZ),
            "corpus": ["-t", "sim:fp16", "--inputs", str(tmp_path / "x.npz")]}[command]


def _typed(command: str, tmp_path: Path, source: str, function: str) -> list[str]:
    """``command`` on ``source``'s ``function`` as typed (``corpus add`` into a corpus)."""
    head = ["corpus", "add", str(tmp_path / "corpus")] if command == "corpus" else [command]
    return [*head, source, "--function", function, *_extra(command, tmp_path)]


@pytest.mark.parametrize("command", ["run", "lint", "bisect", "fuzz", "corpus"])
def test_an_unknown_function_is_one_line_exit_2(multi, monkeypatch, capsys, tmp_path,
                                                command):
    code, out, err = cli(monkeypatch, capsys, *_typed(command, tmp_path, str(multi), "nope"))
    assert code == 2
    assert err.strip().splitlines() == [
        f"nebisect: error: {multi}: no function 'nope' (its functions: prefill, decode)"]
    assert out == ""
    assert not (tmp_path / "corpus").exists() or not any((tmp_path / "corpus").iterdir())


@pytest.mark.parametrize("command", ["fuzz", "corpus"])
def test_a_function_of_a_torch_source_is_run_s_one_line_exit_2(monkeypatch, capsys,
                                                               tmp_path, command):
    code, _, err = cli(monkeypatch, capsys, *_typed("run", tmp_path, TORCH_SOURCE, "decode"))
    assert (code, len(err.strip().splitlines())) == (2, 1)
    assert "a torch source has none" in err
    assert cli(monkeypatch, capsys, *_typed(command, tmp_path, TORCH_SOURCE, "decode")) == (
        2, "", err)


def test_fuzz_with_op_takes_no_function(monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, "fuzz", "--op", "sqrt", "--function", "decode")
    assert code == 2
    assert err.strip().splitlines() == ["nebisect: error: --function decode names a function "
                                        "of a SOURCE package; --op campaigns fuzz single ops"]


def test_fuzz_function_fuzzes_that_one_and_its_corpus_cases_replay_it(multi, monkeypatch,
                                                                      capsys, tmp_path):
    corpus = tmp_path / "corpus"
    code, out, _ = cli(monkeypatch, capsys, "fuzz", str(multi), "--function", "decode",
                       *FUZZ, "--corpus", str(corpus))
    assert code == 1
    (result,) = json.loads(out)["results"]
    assert result["subject"] == "multi.mlpackage --function decode"
    assert result["findings"]
    assert {f["signature"] for f in result["findings"]} == {"mismatch:nonfinite"}
    cases = Corpus(corpus).scan().cases
    assert len(cases) == len(result["findings"])
    for case in cases:
        body = json.loads((case.path / "case.json").read_text())
        assert body["function"] == "decode"
        assert body["provenance"]["found_by"] == (
            "nebisect fuzz multi.mlpackage --function decode --seed 0")
    code, out, _ = cli(monkeypatch, capsys, "replay", str(corpus), "--json")
    assert code == 0
    assert {r["outcome"] for r in json.loads(out)["results"]} == {"ok"}
    # prefill, the default function, computes within tolerance: nothing to find
    for named in (["--function", "prefill"], []):
        code, out, _ = cli(monkeypatch, capsys, "fuzz", str(multi), *named, *FUZZ)
        assert code == 0
        (result,) = json.loads(out)["results"]
        assert (result["subject"], result["findings"]) == (
            "multi.mlpackage --function prefill", [])
        assert result["evaluations"] > 0


def test_corpus_add_function_records_it_and_replay_reproduces_it(multi, monkeypatch, capsys,
                                                                 tmp_path):
    corpus = tmp_path / "corpus"
    save_npz(tmp_path / "x.npz", {"x": np.full((1, 3, 5), 0.5, np.float32)})
    add = ["corpus", "add", str(corpus), str(multi), "-t", "sim:fp16",
           "--inputs", str(tmp_path / "x.npz")]
    # decode's inputs are no inputs of prefill, the default function
    code, _, err = cli(monkeypatch, capsys, *add)
    assert code == 2
    assert "x" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli(monkeypatch, capsys, *add, "--function", "decode")
    assert code == 0
    assert out.startswith("added: ")
    assert out.strip().endswith("function decode sim:fp16 expected failing mismatch:nonfinite")
    (case,) = Corpus(corpus).scan().cases
    body = json.loads((case.path / "case.json").read_text())
    assert (body["function"], body["expected"]["status"], body["expected"]["signature"]) == (
        "decode", "failing", "mismatch:nonfinite")
    code, out, _ = cli(monkeypatch, capsys, "corpus", "show", str(corpus), case.case_id)
    assert code == 0
    assert '"function": "decode"' in out
    code, out, _ = cli(monkeypatch, capsys, "replay", str(corpus), "--json")
    assert code == 0
    (replayed,) = json.loads(out)["results"]
    assert (replayed["outcome"], replayed["verdict"]["signature"]) == (
        "ok", "mismatch:nonfinite")
    # nebisect's fixes rewrite a package's default program: this case is not theirs
    code, out, _ = cli(monkeypatch, capsys, "fix", "verify", str(corpus), "--fix",
                       "softplus-stable", "--json")
    (verified,) = json.loads(out)["cases"]
    assert (code, verified["category"], verified["after"]) == (0, "unaffected", None)
    assert verified["detail"].startswith("not verified: fixes rewrite a package's default")
    # adding it again is the same case: the function is part of its identity
    code, out, _ = cli(monkeypatch, capsys, *add, "--function", "decode")
    assert (code, out.split(":")[0]) == (0, "already present")


def test_corpus_add_function_takes_no_fix(multi, monkeypatch, capsys, tmp_path):
    code, _, err = cli(monkeypatch, capsys, *_typed("corpus", tmp_path, str(multi), "decode"),
                       "--fix", "softplus-stable")
    assert code == 2
    assert err.strip().splitlines() == [
        "nebisect: error: --fix: fixes rewrite a package's default program, not one function "
        "of a multifunction package (decode)"]


def test_a_record_names_its_function_only_when_it_has_one():
    plain = CaseRecord("", "mlpackage", "sim:fp16", Expected("pass"),
                       files={"model.mlpackage": "a", "inputs.npz": "b"})
    decode = CaseRecord(**{**plain.__dict__, "function": "decode"})
    assert "function" not in json.loads(plain.to_json())
    assert plain.identity() != decode.identity()
    decode.case_id = decode.identity()
    assert CaseRecord.from_json(decode.to_json()).function == "decode"
    with pytest.raises(NebisectError, match=r"only an \.mlpackage has functions"):
        CaseRecord("", "torch", "sim:fp16", Expected("pass"), factory="model",
                   function="decode")


def test_lint_reads_the_function_named(multi, monkeypatch, capsys):
    findings = {}
    for name in FUNCTIONS:
        code, out, _ = cli(monkeypatch, capsys, "lint", str(multi), "--function", name,
                           "--format", "json", "--fp16")
        findings[name] = {f["op_type"] for f in json.loads(out)["findings"]}
        assert code in (0, 1)
    assert "linear" not in findings["decode"]
    assert "mul" not in findings["prefill"]


def test_bisect_reduces_the_function_named(multi, monkeypatch, capsys, tmp_path):
    out = tmp_path / "bisect"
    code, _, _ = cli(monkeypatch, capsys, "bisect", str(multi), "--function", "decode",
                     "-t", "sim:fp16", "--out", str(out), "--json")
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0
    assert summary["signature"] == "mismatch:nonfinite"
    # decode's four ops (mul, mul, sqrt, mul), not prefill's three; the square and its root
    assert (summary["units_before"], summary["kept_types"]) == (4, ["mul", "sqrt"])
