"""Hostile memory, end to end: programs that declare a tensor no machine holds, a package
that computes more than it declares, and cases that really allocate past ``--memory``.

Item 3 of issue #22: a ``fill`` of 60000×60000 made the case child allocate until the
kernel killed it, and ``lint`` and ``bisect`` were themselves OOM-killed (exit −9,
temp directories left) because they read the program in their own process. Now the
declared shapes are refused before anything is allocated (one line, exit 2, nothing
left), a package is read in a child under the memory limit before ``lint`` or
``bisect`` reads it, and a case past its limit is an ``oom`` verdict naming the limit.

Every command here runs under an 8 GiB RLIMIT_AS (:data:`SAFETY_LIMIT`): a nebisect that
tried to allocate a bomb fails instead of taking the machine down.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.leftovers import Sandbox, one_error_line
from support.memory_bombs import SAFETY_LIMIT, fill_bomb, heavy_chain, liar, tile_bomb

HUNGRY = '''
import torch


class Hungry(torch.nn.Module):
    """Doubles x; its eager forward first fills 2 GiB (never while traced or exported)."""

    def forward(self, x):
        tracing = torch.jit.is_tracing() or torch.compiler.is_compiling()
        if not tracing and not isinstance(x, torch._subclasses.FakeTensor):
            hog = torch.ones(1 << 28, dtype=torch.float64)
            x = x + hog[:1].sum() * 0
        return x * 2


def model():
    return {"module": Hungry(), "example_inputs": {"x": torch.ones(1, 4)}}
'''


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("bombs")
    return {"fill": fill_bomb(root), "tile": tile_bomb(root), "liar": liar(root),
            "chain": heavy_chain(root)}


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


def nothing_in(out: Path) -> bool:
    """Did ``bisect --out`` stay empty (it is created, empty, before the work starts)?"""
    return not out.exists() or not any(out.iterdir())


def assert_refused(line: str, package: Path, op: str) -> None:
    """``line`` refuses a 60000×60000 ``op`` under the default limit (half this machine:
    its figures are the unit tests' business)."""
    prefix = (f"nebisect: error: {package}: tensor of 3.6e9 elements exceeds the limit: "
              f"'big' ({op}) declares [60000, 60000]; ")
    assert line.startswith(prefix), line
    assert re.fullmatch(r"[\d.]+[KMGT] of memory \(--memory\) holds \d\.\de\d+ at 8 bytes each",
                        line[len(prefix):]), line


@pytest.mark.parametrize("op", ["fill", "tile"])
def test_run_refuses_a_bomb_by_its_shapes(bombs: dict[str, tuple[Path, Path]], op: str,
                                          sandbox: Sandbox) -> None:
    package, _ = bombs[op]
    done = sandbox.run("run", str(package), "-t", "sim:fp32", "--explore", "none",
                       address_space=SAFETY_LIMIT)
    assert done.returncode == 2, done.stderr
    assert_refused(one_error_line(done.stderr), package, op)
    assert done.stdout == ""
    assert sandbox.leftovers() == []


@pytest.mark.parametrize("op", ["fill", "tile"])
def test_lint_refuses_a_bomb_by_its_shapes(bombs: dict[str, tuple[Path, Path]], op: str,
                                           sandbox: Sandbox) -> None:
    package, _ = bombs[op]
    done = sandbox.run("lint", str(package), address_space=SAFETY_LIMIT)
    assert done.returncode == 2, done.stdout + done.stderr
    assert_refused(one_error_line(done.stderr), package, op)
    assert sandbox.leftovers() == []


@pytest.mark.parametrize("op", ["fill", "tile"])
def test_bisect_refuses_a_bomb_by_its_shapes(bombs: dict[str, tuple[Path, Path]], op: str,
                                             sandbox: Sandbox, tmp_path: Path) -> None:
    package, inputs = bombs[op]
    out = tmp_path / "out"
    done = sandbox.run("bisect", str(package), "-t", "sim:fp32", "--inputs", str(inputs),
                       "--out", str(out), address_space=SAFETY_LIMIT)
    assert done.returncode == 2, done.stderr
    assert_refused(one_error_line(done.stderr), package, op)
    assert nothing_in(out)
    assert sandbox.leftovers() == []


@pytest.mark.parametrize("command", ["lint", "bisect"])
def test_a_package_that_computes_more_than_it_declares_is_read_in_a_child(
        bombs: dict[str, tuple[Path, Path]], command: str, sandbox: Sandbox,
        tmp_path: Path) -> None:
    """Its shapes pass the size check, reading it computes an 8000×8000 fill (256 MB):
    under --memory 128M that is refused in the child that reads it first — read here,
    lint would have linted it and bisect cut it."""
    package, inputs = bombs["liar"]
    args = {"lint": ["lint", str(package)],
            "bisect": ["bisect", str(package), "-t", "sim:fp32", "--inputs", str(inputs),
                       "--out", str(tmp_path / "out")]}[command]
    done = sandbox.run(*args, "--memory", "128M", address_space=SAFETY_LIMIT)
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_error_line(done.stderr).startswith(
        f"nebisect: error: {package}: cannot load the ML program (Unable to allocate 244. MiB "
        "for an array with shape (8000, 8000)")
    assert nothing_in(tmp_path / "out")
    assert sandbox.leftovers() == []


def test_a_case_past_its_memory_is_oom_naming_the_limit(
        bombs: dict[str, tuple[Path, Path]], sandbox: Sandbox) -> None:
    """Three 5000×5000 tensors: each within the size check, 600 MB together at float64
    (the reference), 300 MB at float32 (the target)."""
    package, _ = bombs["chain"]
    done = sandbox.run("run", str(package), "-t", "sim:fp32", "--explore", "none",
                       "--memory", "512M", "--json", address_space=SAFETY_LIMIT)
    assert done.returncode == 1, done.stderr
    rows = {row["role"]: row["verdict"] for row in json.loads(done.stdout)["rows"]}
    reference = rows["reference"]
    assert (reference["status"], reference["stage"]) == ("oom", "reference")
    assert reference["metrics"]["memory_limit"] == "512M"
    assert "(memory limit 512M, --memory)" in reference["message"]
    assert rows["target"]["status"] == "skipped"  # not judged: its reference failed
    assert sandbox.leftovers() == []


def test_a_torch_forward_past_its_memory_is_oom_not_a_crash(sandbox: Sandbox,
                                                            tmp_path: Path) -> None:
    """The factory's eager forward allocates 2 GiB; under --memory 512M every case is an
    ``oom`` verdict (the allocator's refusal in the child), the run exits 1."""
    (tmp_path / "hungry.py").write_text(HUNGRY)
    done = sandbox.run("run", f"{tmp_path}/hungry.py:model", "-t", "sim:fp32", "--explore",
                       "none", "--memory", "512M", "--json", address_space=SAFETY_LIMIT,
                       timeout=900)
    assert done.returncode == 1, done.stderr
    verdicts = [row["verdict"] for row in json.loads(done.stdout)["rows"]]
    assert verdicts and {v["status"] for v in verdicts} == {"oom"}, verdicts
    assert {v["metrics"]["memory_limit"] for v in verdicts} == {"512M"}
    assert all("can't allocate memory: you tried to allocate 2147483648 bytes" in v["message"]
               for v in verdicts)
    assert sandbox.leftovers() == []


def test_a_saved_program_past_its_memory_while_loading_is_out_of_memory(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """A ``.pt2`` holding 256 MB of weights, loaded under --memory 128M: the load is
    refused for memory, which the line says (not that the file is no ExportedProgram)."""
    import torch

    class Heavy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(8192, 8192))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.weight[:4, :4]

    program = tmp_path / "heavy.pt2"
    torch.export.save(torch.export.export(Heavy(), (torch.ones(1, 4),)), str(program))
    done = sandbox.run("run", str(program), "-t", "sim:fp32", "--explore", "none",
                       "--memory", "128M", address_space=SAFETY_LIMIT)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stderr)
    assert line.startswith(f"nebisect: error: {program}: ") and "out of memory" in line, line
    assert "not an ExportedProgram" not in line
    assert sandbox.leftovers() == []
