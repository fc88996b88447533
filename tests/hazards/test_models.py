"""Acceptance: ``nebisect lint`` flags the seeds' converted models (seed 000's
conv → logsumexp → linear, a softplus model, seed 003's dynamic masked mean-pool) and
does not flag them after ``nebisect fix apply`` — nor hand-written cured versions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nebisect.cli import main
from nebisect.fixes import get_fix
from nebisect.hazards import Range, lint_program
from nebisect.mil.load import load_program, save_program
from nebisect.mil.quiet import import_coremltools, quiet

torch = pytest.importorskip("torch")
ct = import_coremltools()


class Seed000(torch.nn.Module):
    """Seed 000: delta conv(1→32) → logsumexp over channels → flatten → pick-element linear."""

    def __init__(self, shifted: bool = False) -> None:
        super().__init__()
        self.shifted = shifted
        self.conv = torch.nn.Conv2d(1, 32, kernel_size=3, padding="same")
        self.fc = torch.nn.Linear(8 * 8 * 32, 16)
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[:, 0, 1, 1] = 1.0
            self.conv.bias.zero_()
            self.fc.weight.zero_()
            self.fc.weight.fill_diagonal_(1.0)
            self.fc.bias.zero_()

    def forward(self, x):
        c = self.conv(x)
        if self.shifted:  # the seed's workaround: host-side max-shift
            m = c.amax(dim=1, keepdim=True)
            y = torch.logsumexp(c - m, dim=1, keepdim=True) + m
        else:
            y = torch.logsumexp(c, dim=1, keepdim=True)
        return self.fc(torch.flatten(y.expand_as(c), 1))


class Softplus(torch.nn.Module):
    def __init__(self, stable: bool = False) -> None:
        super().__init__()
        self.stable = stable

    def forward(self, x):
        if self.stable:
            return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))
        return torch.nn.functional.softplus(x)


class MeanPool(torch.nn.Module):
    """Seed 003's masked mean-pool (``static``: broadcast the mask instead of expand)."""

    def __init__(self, static: bool = False) -> None:
        super().__init__()
        self.static = static

    def forward(self, tokens, attention_mask):
        mask = attention_mask.unsqueeze(-1)
        if not self.static:
            mask = mask.expand(tokens.size())
        mask = mask.float()
        return torch.sum(tokens * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


def convert_traced(module, example, path: Path) -> Path:
    with quiet():
        traced = torch.jit.trace(module.eval(), example)
        model = ct.convert(
            traced, convert_to="mlprogram",
            inputs=[ct.TensorType(name="x", shape=example.shape)],
            minimum_deployment_target=ct.target.macOS14,
            compute_precision=ct.precision.FLOAT16,
        )
        model.save(str(path))
    return path


def meanpool_program(module, precision=ct.precision.FLOAT16):
    """Seed 003's conversion path: torch.export with a RangeDim(1, 382) sequence."""
    from torch.export import Dim, export

    example = (torch.randn(1, 8, 16), torch.ones(1, 8, dtype=torch.int32))
    seq = Dim("seq", min=1, max=382)
    with quiet():
        program = export(module.eval(), example,
                         dynamic_shapes={"tokens": {1: seq}, "attention_mask": {1: seq}})
        return ct.convert(program.run_decompositions({}), convert_to="milinternal",
                          minimum_deployment_target=ct.target.iOS18,
                          compute_precision=precision)


def convert_meanpool(module, path: Path) -> Path:
    save_program(meanpool_program(module), path)
    return path


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """``nebisect ARGS`` in this process: (exit code, stdout)."""
    monkeypatch.setattr(sys, "argv", ["nebisect", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().out


def lint_cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    return cli(monkeypatch, capsys, "lint", *args)


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lint-models")
    x = torch.zeros(1, 1, 8, 8)
    return {
        "seed000": convert_traced(Seed000(), x, root / "seed000.mlpackage"),
        "seed000-shifted": convert_traced(Seed000(shifted=True), x,
                                          root / "seed000_shifted.mlpackage"),
        "softplus": convert_traced(Softplus(), torch.zeros(1, 10), root / "softplus.mlpackage"),
        "softplus-stable": convert_traced(Softplus(stable=True), torch.zeros(1, 10),
                                          root / "softplus_stable.mlpackage"),
        "seed003": convert_meanpool(MeanPool(), root / "seed003.mlpackage"),
        "seed003-static": convert_meanpool(MeanPool(static=True), root / "seed003s.mlpackage"),
    }


CASES = [
    ("seed000", "lse-no-max-shift", "logsumexp-max-shift"),
    ("softplus", "softplus-fp16", "softplus-stable"),
    ("seed003", "data-dependent-shape", "meanpool-static-shape"),
]


@pytest.mark.parametrize("name, rule, fix", CASES)
def test_seed_model_flagged_then_clean_after_fix_apply(
    packages, tmp_path, monkeypatch, capsys, name, rule, fix
):
    code, out = lint_cli(monkeypatch, capsys, str(packages[name]), "--format", "json")
    report = json.loads(out)
    assert code == 1
    assert [f["rule_id"] for f in report["findings"]] == [rule]
    assert report["findings"][0]["fix"] == fix

    repaired = tmp_path / f"{name}_fixed.mlpackage"
    code, out = cli(monkeypatch, capsys, "fix", "apply", fix, str(packages[name]),
                    "-o", str(repaired))
    assert code == 0 and "1 rewrite(s)" in out, out
    code, out = lint_cli(monkeypatch, capsys, str(repaired))
    assert code == 0, out
    assert "0 finding(s)" in out


@pytest.mark.parametrize("name", ["seed000-shifted", "softplus-stable", "seed003-static"])
def test_hand_cured_models_are_clean(packages, monkeypatch, capsys, name):
    code, out = lint_cli(monkeypatch, capsys, str(packages[name]))
    assert code == 0, out


def test_seed000_interval_proof_from_the_command_line(packages, monkeypatch, capsys):
    code, out = lint_cli(monkeypatch, capsys, str(packages["seed000"]), "--input-range",
                         "x=-15:15")
    assert code == 1
    assert "fp16-range-overflow" in out and "Σexp(x) over 32 elements" in out
    repaired = load_program(packages["seed000"])
    get_fix("logsumexp-max-shift").apply(repaired)
    assert lint_program(repaired, input_ranges={"x": Range(-15, 15)}).findings == []


def test_seed003_flagged_in_fp32_too():
    """The data-dependent shape is a graph property: fp32 conversions fail on ALL too."""
    (finding,) = lint_program(meanpool_program(MeanPool(), ct.precision.FLOAT32)).findings
    assert (finding.rule_id, finding.severity, finding.op_type) == (
        "data-dependent-shape", "error", "tile")
    assert finding.details["outputs"] == ["div"]
