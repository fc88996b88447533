"""``nebisect lint`` on the command line: formats, exit codes 0/1/2, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import support.lint_programs as lp
from support import REPO

from nebisect.cli import main
from nebisect.mil.load import save_program


def lint_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["nebisect", "lint", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lint-cli")
    built = {
        "lse": lp.seed000(),
        "lse-shifted": lp.seed000(shifted=True),
        "rms": lp.rms_norm(),
    }
    paths = {}
    for name, program in built.items():
        paths[name] = root / f"{name}.mlpackage"
        save_program(program, paths[name])
    return paths


def test_error_hazard_exits_1_with_the_fix_to_apply(packages, monkeypatch, capsys):
    code, out, _ = lint_cli(monkeypatch, capsys, str(packages["lse"]))
    assert code == 1
    assert "error lse-no-max-shift main/lse (reduce_log_sum_exp)" in out
    assert f"fix: nebisect fix apply logsumexp-max-shift {packages['lse']}" in out
    assert "1 finding(s): 1 error(s), 0 warning(s), 0 note(s)" in out


def test_clean_package_exits_0(packages, monkeypatch, capsys):
    code, out, _ = lint_cli(monkeypatch, capsys, str(packages["lse-shifted"]), "--input-range",
                            "x=-15:15")
    assert code == 0
    assert out.strip() == "0 finding(s): 0 error(s), 0 warning(s), 0 note(s)"


def test_warnings_alone_exit_0_and_show_the_remedy(packages, monkeypatch, capsys):
    code, out, _ = lint_cli(monkeypatch, capsys, str(packages["rms"]))
    assert code == 0
    assert "warning rms-sum-squares-fp16" in out and "remedy: divide x by" in out


def test_json_format(packages, monkeypatch, capsys):
    code, out, _ = lint_cli(monkeypatch, capsys, str(packages["lse"]), "--format", "json",
                            "--input-range", "x=-15:15")
    document = json.loads(out)
    assert code == 1
    assert document["schema_version"] == 1
    assert document["input_ranges"] == {"x": [-15.0, 15.0]}
    assert document["counts"] == {"error": 2, "warning": 0, "note": 0}
    assert [f["rule_id"] for f in document["findings"]] == [
        "fp16-range-overflow", "lse-no-max-shift"]
    assert {r["id"] for r in document["rules"]} >= {"lse-no-max-shift", "softplus-fp16"}


def test_output_file_and_builder_source(tmp_path, monkeypatch, capsys):
    target = tmp_path / "out" / "lint.sarif"
    code, out, _ = lint_cli(monkeypatch, capsys, "support.lint_programs:softplus",
                            "--format", "sarif", "-o", str(target))
    assert code == 1 and out == ""
    log = json.loads(target.read_text())
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["softplus-fp16"]


def test_list_rules(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["nebisect", "lint", "--list-rules", "--format", "json"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    rules = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 0
    assert {r["id"]: r["fix"] for r in rules}["softplus-fp16"] == "softplus-stable"


@pytest.mark.parametrize("args, message", [
    (["missing.mlpackage"], "missing.mlpackage: no such .mlpackage"),
    (["{empty}"], "not an .mlpackage"),
    (["{lse}", "--input-range", "x=5:1"], "LO 5 is above HI 1"),
    (["{lse}", "--input-range", "y=0:1"], "not among the model's inputs (x)"),
    (["{lse}", "--format", "xml"], "--format 'xml': one of text, json, sarif"),
    ([], "lint needs a SOURCE"),
    (["no_such_module_xyz:build"],
     "no_such_module_xyz:build: building the program raised ModuleNotFoundError"),
])
def test_bad_input_is_one_line_exit_2(packages, tmp_path, monkeypatch, capsys, args, message):
    empty = tmp_path / "empty.mlpackage"
    empty.mkdir()
    args = [a.format(empty=empty, lse=packages["lse"]) for a in args]
    code, out, err = lint_cli(monkeypatch, capsys, *args)
    assert code == 2
    assert message in " ".join(err.split())
    assert "Traceback" not in err and out == ""



SEED000 = REPO / "examples" / "logsumexp_ne.py"


def test_torch_source_is_converted_and_its_program_linted(monkeypatch, capsys):
    code, out, err = lint_cli(monkeypatch, capsys, f"{SEED000}:model", "--convert", "export")
    assert code == 1, err
    assert "error lse-no-max-shift" in out and "(reduce_log_sum_exp)" in out
    assert f"fix: nebisect fix apply logsumexp-max-shift {SEED000}:model" in out


def test_known_converter_incompatibility_names_the_overrides(tmp_path, monkeypatch, capsys):
    (tmp_path / "new_ones.py").write_text(NEW_ONES)
    code, out, err = lint_cli(monkeypatch, capsys, f"{tmp_path}/new_ones.py:model",
                              "--convert", "export")
    assert code == 2 and out == ""
    line = " ".join(err.split())
    assert "does not convert" in line and "Unsupported fx node new_ones" in line
    assert "--converter-overrides" in line


NEW_ONES = '''
import torch


class NewOnes(torch.nn.Module):
    def forward(self, x):
        return x + x.new_ones(x.shape)


def model():
    return {"module": NewOnes(), "example_inputs": {"x": torch.rand(1, 4)}}
'''


def test_the_suggested_fix_command_is_quoted_for_the_shell(packages, tmp_path, monkeypatch,
                                                           capsys):
    import shlex
    import shutil

    hostile = tmp_path / "a b;touch pwned;.mlpackage"
    shutil.copytree(packages["lse"], hostile)
    code, out, _ = lint_cli(monkeypatch, capsys, str(hostile))
    assert code == 1
    command = next(line for line in out.splitlines() if "nebisect fix apply" in line)
    assert shlex.split(command.split("fix: ", 1)[1]) == [
        "nebisect", "fix", "apply", "logsumexp-max-shift", str(hostile), "-o", "FIXED.mlpackage"]
