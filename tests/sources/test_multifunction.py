"""Multifunction packages (``ct.utils.save_multifunction``): each function judged as the
program it is — ``run`` every function (``--function``: one), ``lint`` and ``bisect``
the one named — and a function the package lacks is a one-line error, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.multifunction import DEFAULT, FUNCTIONS, build_multifunction

from nebisect.case import Case, SourceRef
from nebisect.cli import main
from nebisect.errors import NebisectError
from nebisect.mil.load import load_program
from nebisect.sources.resolve import package_functions, resolve_source


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
    assert f"bisect {multi} --function decode -t sim:fp16" in trigger["commands"][0]


@pytest.mark.parametrize("command", ["run", "lint", "bisect"])
def test_an_unknown_function_is_one_line_exit_2(multi, monkeypatch, capsys, tmp_path,
                                                command):
    extra = {"run": ["--explore", "none"], "lint": [],
             "bisect": ["-t", "sim:fp16", "--out", str(tmp_path / "out")]}[command]
    code, _, err = cli(monkeypatch, capsys, command, str(multi), "--function", "nope",
                         *extra)
    assert code == 2
    assert err.strip().splitlines() == [
        f"nebisect: error: {multi}: no function 'nope' (its functions: prefill, decode)"]


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
