"""Hostile user code: factories, plugins and builders that exit, crash, hang or chatter.

Issue 11, items 1, 2, 3 and 15. User code runs only in isolated children: whatever it
does, nebisect answers with one line and exit 2 (a source it cannot load), or with a
verdict (a conversion or a reference that fails) — never a silent exit 0, never a
traceback, never corrupted ``--json``, and nothing left behind.

Each test fails on the base commit (d6b97ca), where the factory, the plugin and the
builder ran in nebisect's own process: exit 0 with no output for ``sys.exit(0)`` /
``os._exit(0)``, exit -11 for the segfault, a hang for the hang (killed here by the
subprocess timeout), a traceback and exit 1 for the plugin, garbage before the JSON.
The ``bisect --graph fx`` tests fail on 95da96d, where the graph was exported in
nebisect's own process: exit -11, a hang, the CLI's own pid among the importers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import SUPPORT
from support.corpus_helpers import shipped_package
from support.leftovers import Sandbox

FACTORIES = SUPPORT / "hostile_factories.py"
PLUGIN_CRASH = SUPPORT / "plugins_crash.py"
MLPACKAGE = shipped_package("seed000-logsumexp-stack2-cliff")


class TorchSandbox(Sandbox):
    """A sandbox whose runs keep torch's compile cache out of ``$TMPDIR``.

    torch.export creates ``$TMPDIR/torchinductor_$USER``, torch's persistent cache,
    shared across runs by design (not per-run debris, and not nebisect's to delete).
    """

    def env(self, **extra: str) -> dict[str, str]:
        cache = self.root / "torchinductor-cache"
        return super().env(TORCHINDUCTOR_CACHE_DIR=str(cache), **extra)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return TorchSandbox(tmp_path / "sandbox")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """The factories as the user's own ``model.py`` in a directory of its own."""
    work = tmp_path / "work"
    work.mkdir()
    return Path(shutil.copy(FACTORIES, work / "model.py"))


def _one_line_error(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("factory", ["exits_zero", "hard_exit_zero"])
def test_factory_that_exits_zero_is_an_error_not_a_green_run(
    factory: str, model: Path, sandbox: Sandbox
) -> None:
    done = sandbox.run("run", f"{model}:{factory}", "-t", "sim:fp32")
    line = _one_line_error(done, f"nebisect: error: {model}:{factory}: ",
                           "the factory exited with status 0 without describing the model")
    assert done.stdout == ""
    assert line
    assert sandbox.leftovers() == []


def test_factory_that_segfaults_is_one_line_and_nebisect_survives(
    model: Path, sandbox: Sandbox
) -> None:
    done = sandbox.run("run", f"{model}:segfaults", "-t", "sim:fp32")
    _one_line_error(done, f"{model}:segfaults: the factory crashed with SIGSEGV during load")
    assert sandbox.leftovers() == []


def test_factory_that_hangs_is_stopped_by_the_load_timeout(
    model: Path, sandbox: Sandbox
) -> None:
    done = sandbox.run("run", f"{model}:hangs", "-t", "sim:fp32", "--timeout", "2",
                       timeout=60)
    _one_line_error(done, f"{model}:hangs: the factory did not finish within 2 s during load")
    assert sandbox.leftovers() == []


def test_factory_printing_to_fd1_does_not_corrupt_json(model: Path, sandbox: Sandbox) -> None:
    done = sandbox.run("run", f"{model}:prints_to_stdout", "-t", "torch:cpu:fp32",
                       "--lengths", "2", "--json")
    payload = json.loads(done.stdout)  # nothing but the JSON document on stdout
    assert "chatter" not in done.stdout and "more through" not in done.stdout
    rows = {r["target"]: r["verdict"] for r in payload["rows"]}
    assert rows["torch:cpu:fp32"]["status"] == "pass"
    assert rows["sim:fp64"]["stage"] == "convert"  # lgamma: no converter, a verdict
    assert done.returncode == 1
    assert sandbox.leftovers() == []


def test_plugin_that_raises_at_import_is_one_line(tmp_path: Path, sandbox: Sandbox) -> None:
    plugin = tmp_path / "exploding_plugin.py"
    plugin.write_text('raise RuntimeError("plugin exploded at import")\n')
    done = sandbox.run("run", str(MLPACKAGE), "-t", "sim:fp32", "--plugin", str(plugin))
    _one_line_error(done, f"nebisect: error: plugin {plugin}: importing it raised "
                          "RuntimeError: plugin exploded at import")
    assert sandbox.leftovers() == []


def test_missing_plugin_is_one_line(tmp_path: Path, sandbox: Sandbox) -> None:
    missing = tmp_path / "no_such_plugin.py"
    done = sandbox.run("run", str(MLPACKAGE), "-t", "sim:fp32", "--plugin", str(missing))
    _one_line_error(done, f"nebisect: error: plugin {missing}: no such file")
    done = sandbox.run("run", str(MLPACKAGE), "-t", "sim:fp32", "--plugin", "no_such_plugin_mod")
    _one_line_error(done, "nebisect: error: plugin no_such_plugin_mod: importing it raised "
                          "ModuleNotFoundError: No module named 'no_such_plugin_mod'")
    assert sandbox.leftovers() == []


def test_plugin_that_exits_zero_is_one_line(tmp_path: Path, sandbox: Sandbox) -> None:
    plugin = tmp_path / "quitting_plugin.py"
    plugin.write_text("import os\nos._exit(0)\n")
    done = sandbox.run("fuzz", "--op", "exp", "-t", "sim:fp16", "-n", "1",
                       "--plugin", str(plugin))
    _one_line_error(done, f"plugin {plugin}: the plugin exited with status 0 without "
                          "registering its targets")
    assert sandbox.leftovers() == []


def test_lint_builder_that_exits_zero_is_one_line(tmp_path: Path, sandbox: Sandbox) -> None:
    (tmp_path / "user_builder.py").write_text("import os\n\ndef build():\n    os._exit(0)\n")
    done = sandbox.run("lint", "user_builder:build", cwd=tmp_path)
    _one_line_error(done, "user_builder:build: the builder exited with status 0 without "
                          "returning a program")
    assert sandbox.leftovers() == []


def test_relative_source_survives_a_factory_and_forward_that_chdir(
    model: Path, sandbox: Sandbox
) -> None:
    """Item 3: the path is made absolute once; the torch row is judged against torch."""
    done = sandbox.run("run", "model.py:wanders", "-t", "torch:cpu:fp32", "--lengths", "2",
                       "--json", cwd=model.parent)
    payload = json.loads(done.stdout)
    rows = {r["target"]: r["verdict"] for r in payload["rows"]}
    assert rows["torch:cpu:fp32"]["status"] == "pass", rows["torch:cpu:fp32"]["message"]
    assert "no such file" not in json.dumps(payload)
    assert payload["source"] == f"{model}:wanders"
    assert sandbox.leftovers() == []


def test_forward_that_hangs_while_traced_is_a_convert_timeout(
    model: Path, sandbox: Sandbox
) -> None:
    """Item 2: --timeout reaches the conversion child. Only the conversion's limit is
    lowered: on a busy machine describing the source (torch's import, the trace) may take
    longer than a conversion limit short enough to test."""
    done = sandbox.run("run", f"{model}:hangs_while_traced", "-t", "sim:fp32", "--lengths",
                       "2", "--timeout", "convert=10", "--json", timeout=300)
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    verdicts = [r["verdict"] for r in payload["rows"]]
    assert {(v["status"], v["stage"]) for v in verdicts} == {("timeout", "convert")}
    assert "within 10 s" in verdicts[0]["message"]
    assert sandbox.leftovers() == []


def test_crashing_reference_target_is_its_own_row(sandbox: Sandbox) -> None:
    """Item 15: the targets are not blamed for the reference's SIGSEGV."""
    done = sandbox.run("run", str(MLPACKAGE), "-t", "sim:fp32", "-t", "sim:fp16",
                       "--reference", "sim:segv-in-predict", "--plugin", str(PLUGIN_CRASH),
                       "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    rows = payload["rows"]
    judged = {r["target"]: r for r in rows if r.get("role", "target") == "target"}
    for target in ("sim:fp32", "sim:fp16"):
        assert judged[target]["verdict"]["status"] == "skipped", judged[target]["verdict"]
        assert "not judged" in judged[target]["verdict"]["message"]
        assert judged[target]["attribution"] == ""
    reference = [r for r in rows if r["role"] == "reference"]
    assert [(r["target"], r["verdict"]["signature"]) for r in reference] == [
        ("sim:segv-in-predict", "crash:SIGSEGV")]
    assert payload["reference_failed"] is True
    assert sandbox.leftovers() == []


def test_crashing_torch_reference_is_its_own_row(model: Path, sandbox: Sandbox) -> None:
    """Item 15, torch eager: fp32 runs, the fp64 reference segfaults."""
    done = sandbox.run("run", f"{model}:reference_segfaults", "-t", "torch:cpu:fp32",
                       "--lengths", "2")
    assert done.returncode == 1, done.stderr
    assert "reference torch:cpu:fp64 @ static: reference failed" in done.stdout
    assert "crash:SIGSEGV" in done.stdout
    assert "attribution precision" not in done.stdout
    assert sandbox.leftovers() == []


# ------------------------------------------------------------------ bisect --graph fx
#: A torch source that logs, per process, that it was imported and that its forward ran
#: under torch.export: "import|export PID PPID" lines appended to LOG.
LOGGED_SOURCE = '''
import os

import torch

LOG = {log!r}


def _log(what):
    with open(LOG, "a") as file:
        file.write(f"{{what}} {{os.getpid()}} {{os.getppid()}}\\n")


_log("import")


class Lgamma(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():
            _log("export")
        return torch.lgamma(x.abs() + 1.0)


def model():
    return {{"module": Lgamma(), "example_inputs": {{"x": torch.ones(1, 4)}}}}
'''


def _bisect_fx(sandbox: Sandbox, source: str, out: Path, *args: str,
               timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return sandbox.run("bisect", source, "--graph", "fx", "--stage", "convert",
                       "-t", "sim:fp32", "--out", str(out), *args, timeout=timeout)


def test_bisect_fx_forward_that_segfaults_while_exported_is_one_line(
    model: Path, sandbox: Sandbox, tmp_path: Path
) -> None:
    """The conversion's crash is the failure to bisect; exporting the graph to reduce it
    crashes too — in its child (the base commit exported it here: exit -11)."""
    source = f"{model}:segfaults_while_traced"
    done = _bisect_fx(sandbox, source, tmp_path / "out")
    _one_line_error(done, f"nebisect: error: {source}: exporting the graph crashed with "
                          "SIGSEGV")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert sandbox.leftovers() == []


def test_bisect_fx_forward_that_hangs_while_exported_is_stopped_by_the_load_timeout(
    model: Path, sandbox: Sandbox, tmp_path: Path
) -> None:
    """--case-timeout load= bounds the graph's export (the base commit hung forever)."""
    source = f"{model}:hangs_while_traced"
    done = _bisect_fx(sandbox, source, tmp_path / "out", "--case-timeout", "3", timeout=60)
    _one_line_error(done, f"nebisect: error: {source}: exporting the graph did not finish "
                          "within 3 s")
    assert sandbox.leftovers() == []


def test_bisect_fx_never_imports_the_source_in_nebisect(tmp_path: Path,
                                                        sandbox: Sandbox) -> None:
    """Every import of the user's module and every export of its forward happens in
    another process than the CLI's; the graph's own export in a child of the CLI."""
    log = tmp_path / "pids.log"
    work = tmp_path / "work"
    work.mkdir()
    source = work / "logged.py"
    source.write_text(LOGGED_SOURCE.format(log=str(log)))
    process = sandbox.start("bisect", f"{source}:model", "--graph", "fx", "--stage",
                            "convert", "-t", "sim:fp32", "--max-evals", "1",
                            "--out", str(tmp_path / "out"))
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    entries = [line.split() for line in log.read_text().splitlines()]
    assert {what for what, _, _ in entries} == {"import", "export"}
    assert str(process.pid) not in {pid for _, pid, _ in entries}
    assert str(process.pid) in {ppid for what, _, ppid in entries if what == "export"}
    assert sandbox.leftovers() == []
