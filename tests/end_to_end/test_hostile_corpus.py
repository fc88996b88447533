"""A corpus arrives in a pull request: what a hostile (or careless) contributor can put in it.

Each case below verifies by the old rules (every *listed* file matches its sha256, the
record's checksum is right — an attacker recomputes both) yet would make replay read or
run something the record does not describe: an extra module beside a torch case that
shadows a stdlib import, a ``files`` entry outside the case (relative or absolute), a
symlink out of the case, a plugin anywhere on disk. Each must be reported damaged with
its reason, never run, and fail the command. ``corpus add`` must never follow a symlink
out of a source, record nebisect's own refusal as a bug, or lose a second factory.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.corpus_helpers import filled, softplus_package
from support.leftovers import Sandbox

from nebisect.arrays import save_npz, sha256_path
from nebisect.case import CaseOptions
from nebisect.corpus import CaseRecord, Corpus, CorpusCase, Expected, NewCase

MODEL_PY = '''\
import colorsys  # stdlib; a colorsys.py beside this file would shadow it
import torch


def model():
    return {"module": torch.nn.ReLU(), "example_inputs": (torch.ones(1, 16),)}


def other():
    return {"module": torch.nn.Softplus(), "example_inputs": (torch.ones(1, 16),)}
'''
MARKER_CODE = 'open({marker!r}, "w").write("ran")\n'


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return softplus_package(tmp_path_factory.mktemp("pkg") / "softplus.mlpackage")


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "sandbox")
    yield box
    assert box.leftovers() == []


def forge(case: CorpusCase, record: CaseRecord) -> Path:
    """Rewrite a case's record as an attacker would: checksum and id recomputed."""
    record.case_id = record.identity()
    forged = case.path.with_name(record.case_id)
    case.path.rename(forged)
    (forged / "case.json").write_text(record.to_json())
    return forged


def hostile_corpus(root: Path, package: Path, outside: Path) -> dict[str, str]:
    """A corpus of one good case and six hostile ones; case directory -> expected reason."""
    corpus = Corpus(root, create=True)
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("not for the corpus\n")

    def softplus(value: float) -> CorpusCase:
        return corpus.add(NewCase("mlpackage", str(package), "sim:fp16",
                                  filled("x", (1, 16), value), Expected("pass"))).case

    softplus(1.0)  # the good case: still replayed
    model = outside / "model.py"
    model.write_text(MODEL_PY)
    torch_case = corpus.add(NewCase("torch", f"{model}:model", "sim:fp32",
                                    filled("x", (1, 16), 1.0), Expected("pass"))).case
    (torch_case.path / "colorsys.py").write_text(
        MARKER_CODE.format(marker=str(outside / "shadow-ran")))
    reasons = {torch_case.case_id: "colorsys.py is not listed in case.json (an unlisted file "
                                   "never runs; remove it)"}

    traversal = softplus(2.0)
    record = traversal.record
    record.files["../../outside/secret.txt"] = sha256_path(secret)
    reasons[forge(traversal, record).name] = (
        "case.json lists '../../outside/secret.txt', a path outside the case")

    absolute = softplus(3.0)
    record = absolute.record
    record.files[str(secret)] = sha256_path(secret)
    reasons[forge(absolute, record).name] = f"case.json lists '{secret}', a path outside the case"

    symlinked = softplus(4.0)
    copy = outside / "inputs.npz"
    copy.write_bytes((symlinked.path / "inputs.npz").read_bytes())
    (symlinked.path / "inputs.npz").unlink()
    (symlinked.path / "inputs.npz").symlink_to(copy)  # same bytes: the old hash check passed
    reasons[symlinked.case_id] = "inputs.npz is a symlink (a case holds regular files only)"

    escaping = softplus(6.0)
    manifest_file = escaping.path / "model.mlpackage" / "Manifest.json"
    manifest = json.loads(manifest_file.read_text())
    root_item = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    shutil.copy(escaping.path / "model.mlpackage" / "Data" / root_item["path"], outside)
    root_item["path"] = "../../../../outside/model.mlmodel"  # a working model, outside
    manifest_file.write_text(json.dumps(manifest))
    record = escaping.record
    record.files["model.mlpackage"] = sha256_path(escaping.path / "model.mlpackage")
    reasons[forge(escaping, record).name] = (
        "model.mlpackage: Manifest.json names '../../../../outside/model.mlmodel', a path "
        "outside the package")

    plugin = outside / "evil_plugin.py"
    plugin.write_text(MARKER_CODE.format(marker=str(outside / "plugin-ran")))
    plugged = softplus(5.0)
    record = plugged.record
    record.options = CaseOptions(plugins=(str(plugin),))
    reasons[forge(plugged, record).name] = (
        f"plugin '{plugin}' is not one of the case's own files (plugins/*.py)")
    return reasons


def test_hostile_cases_are_damaged_and_never_run(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    root, outside = tmp_path / "corpus", tmp_path / "outside"
    reasons = hostile_corpus(root, package, outside)

    listed = sandbox.run("corpus", "ls", str(root), "--json")
    assert listed.returncode == 1, listed.stderr
    body = json.loads(listed.stdout)
    assert len(body["cases"]) == 1
    assert {Path(p["path"]).name: p["reason"] for p in body["problems"]} == reasons
    assert all(p["damaged"] for p in body["problems"])
    table = sandbox.run("corpus", "ls", str(root))
    assert table.returncode == 1 and table.stdout.count("damaged, skipped") == len(reasons)

    replayed = sandbox.run("replay", str(root), "--json")
    assert replayed.returncode == 1, replayed.stderr
    body = json.loads(replayed.stdout)
    assert [(r["outcome"], r["target"]) for r in body["results"]] == [("ok", "sim:fp16")]
    assert {Path(p["path"]).name: p["reason"] for p in body["problems"]} == reasons
    verified = sandbox.run("fix", "verify", str(root), "--fix", "softplus-stable", "--json")
    assert verified.returncode == 1, verified.stderr
    assert [c["target"] for c in json.loads(verified.stdout)["cases"]] == ["sim:fp16"]
    assert not (outside / "shadow-ran").exists() and not (outside / "plugin-ran").exists()


def test_add_refuses_a_package_with_a_symlink_out_or_in(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    """A symlink out of the package is refused before anything is read; one that stays
    inside is refused by the copy (a case holds regular files only). Nothing is stored."""
    save_npz(tmp_path / "x.npz", filled("x", (1, 16), 1.0))
    for target, message in [
        ("/etc/hostname", "{hostile}: Data/notes is a symlink to /etc/hostname, outside the "
                          "package"),
        ("../Manifest.json", "{resolved}/Data/notes: a symlink; a corpus case holds regular "
                             "files only"),
    ]:
        hostile = tmp_path / "hostile.mlpackage"
        shutil.rmtree(hostile, ignore_errors=True)
        shutil.copytree(package, hostile)
        (hostile / "Data" / "notes").symlink_to(target)
        root = tmp_path / "corpus"
        done = sandbox.run("corpus", "add", str(root), str(hostile), "-t", "sim:fp16",
                           "--inputs", str(tmp_path / "x.npz"), "--expect", "pass")
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            "nebisect: error: " + message.format(hostile=hostile, resolved=hostile.resolve())]
        assert not root.exists() or [p.name for p in root.iterdir()] == [".lock"]


def _torch_source(tmp_path: Path) -> Path:
    model = tmp_path / "f.py"
    model.write_text(MODEL_PY)
    save_npz(tmp_path / "x.npz", filled("input", (1, 16), 1.0))
    return model


def test_two_factories_in_one_file_are_two_cases(tmp_path: Path, sandbox: Sandbox) -> None:
    model, root = _torch_source(tmp_path), tmp_path / "corpus"
    ids = []
    for factory in ("model", "other"):
        done = sandbox.run("corpus", "add", str(root), f"{model}:{factory}", "-t", "sim:fp32",
                           "--inputs", str(tmp_path / "x.npz"), "--expect", "pass")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("added: ")
        ids.append(done.stdout.split()[1])
    assert ids[0] != ids[1]
    cases = Corpus(root).scan().cases
    assert sorted((c.case_id, c.record.factory) for c in cases) == sorted(
        zip(ids, ("model", "other"), strict=True))


@pytest.mark.parametrize(("target", "npz", "message"), [
    ("torch:cpu", "x.npz", "--target torch:cpu: a corpus case runs its model converted to "
                           "Core ML; torch is the reference, not a corpus target"),
    ("sim:fp32", "wrong.npz",
     "input 'input' has shape [1, 15], the model takes input: float32[1, 16]"),
])
def test_add_refuses_what_would_only_record_nebisects_own_refusal(
    tmp_path: Path, sandbox: Sandbox, target: str, npz: str, message: str
) -> None:
    model, root = _torch_source(tmp_path), tmp_path / "corpus"
    save_npz(tmp_path / "wrong.npz", filled("input", (1, 15), 1.0))
    done = sandbox.run("corpus", "add", str(root), f"{model}:model", "-t", target,
                       "--inputs", str(tmp_path / npz))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("nebisect: error: ") and line.endswith(message)
    assert not root.exists()


@pytest.mark.skipif(sys.platform == "darwin", reason="Core ML runs on macOS")
def test_add_refuses_to_record_a_skipped_run(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    save_npz(tmp_path / "x.npz", filled("x", (1, 16), 1.0))
    root = tmp_path / "corpus"
    done = sandbox.run("corpus", "add", str(root), str(package), "-t", "coreml:ne",
                       "--inputs", str(tmp_path / "x.npz"))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("nebisect: error: cannot record a run on coreml:ne (")
    assert line.endswith("nothing stored (give --expect)")
    assert [p.name for p in root.iterdir()] == [".lock"]


KILLED_WRITER = """
import os, signal, sys
import numpy as np
from nebisect.corpus import Corpus, NewCase
Corpus(sys.argv[1]).add(NewCase("mlpackage", sys.argv[2], "sim:fp16",
                                {"x": np.ones((1, 16), np.float32)}),
                        recorder=lambda case: os.kill(os.getpid(), signal.SIGKILL))
"""


def test_gc_removes_what_a_killed_writer_left_and_spares_a_live_one(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    root = tmp_path / "corpus"
    Corpus(root, create=True)
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(root), str(package)],
                            env=sandbox.env(), capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    [stale] = root.glob(".tmp-*")
    assert (stale / "model.mlpackage").is_dir()
    live = root / f".tmp-{uuid.uuid4().hex}"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a writer still at work
    try:
        refused = sandbox.run("corpus", "rm", str(root), stale.name)
        assert refused.returncode == 2
        assert refused.stderr.splitlines() == [
            f"nebisect: error: {root}: '{stale.name}' is not a case; `nebisect corpus gc` "
            "removes what interrupted writers left"]
        listed = sandbox.run("corpus", "ls", str(root), "--json")
        assert listed.returncode == 0, listed.stderr
        assert {Path(p["path"]).name: p["reason"] for p in json.loads(listed.stdout)["problems"]} \
            == {stale.name: "unfinished write whose writer is gone; ignored "
                            "(`nebisect corpus gc` removes it)",
                live.name: "write in progress; ignored"}
        dry = sandbox.run("corpus", "gc", str(root))
        assert dry.returncode == 0
        assert dry.stdout.splitlines() == [
            f"would remove {stale.name}", "1 left-over director(ies); `--yes` removes them"]
        assert stale.exists()
        done = sandbox.run("corpus", "gc", str(root), "--yes")
        assert done.returncode == 0 and done.stdout.splitlines() == [f"removed {stale.name}"]
        assert sorted(p.name for p in root.iterdir()) == [".lock", live.name]
    finally:
        os.close(fd)
    assert sandbox.run("corpus", "gc", str(root)).stdout.splitlines() == [
        f"would remove {live.name}", "1 left-over director(ies); `--yes` removes them"]



def test_rm_and_show_take_case_keys_not_paths(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    root, victim = tmp_path / "corpus", tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("kept\n")
    case = Corpus(root, create=True).add(NewCase(
        "mlpackage", str(package), "sim:fp16", filled("x", (1, 16), 1.0), Expected("pass"))).case
    for key in (str(victim), f"{case.case_id}/../../victim"):
        for command in ("rm", "show"):
            done = sandbox.run("corpus", command, str(root), key)
            assert done.returncode == 2, done.stdout
            assert done.stderr.splitlines() == [f"nebisect: error: {root}: no case {key!r}"]
    assert (victim / "keep.txt").read_text() == "kept\n"
    assert [c.case_id for c in Corpus(root).scan().cases] == [case.case_id]


def test_rm_and_gc_refuse_a_directory_that_is_not_a_corpus(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    home = tmp_path / "A" / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "keep.txt").write_text("kept\n")
    (home / ".tmp-build").mkdir()
    (home / ".trash-old").mkdir()
    for args in (("rm", str(home), "Doc"), ("gc", str(home), "--yes")):
        done = sandbox.run("corpus", *args)
        assert (done.returncode, done.stdout) == (2, ""), done.stdout
        assert done.stderr.splitlines() == [
            f"nebisect: error: {home}: not a corpus (no .lock and no case directory holding "
            "a case.json)"]
    assert sorted(p.name for p in home.iterdir()) == [".tmp-build", ".trash-old", "Documents"]
    assert (home / "Documents" / "keep.txt").read_text() == "kept\n"
    root = tmp_path / "corpus"
    case = Corpus(root, create=True).add(NewCase(
        "mlpackage", str(package), "sim:fp16", filled("x", (1, 16), 1.0), Expected("pass"))).case
    done = sandbox.run("corpus", "rm", str(case.path), "model")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"nebisect: error: {case.path}: a case directory, not a corpus (give the directory "
        "that holds the cases)"]
    assert Corpus(root).find(case.case_id).model_path.is_dir()


MALFORMED_RECORDS = {
    "0000000000000001": ("[" * 200_000 + "]" * 200_000,
                         "case.json is nested deeper than 32 levels"),
    "0000000000000002": ('{"schema": ' + "9" * 5001 + "}",
                         "case.json holds a number longer than 40 characters"),
    "0000000000000003": ('{"schema": 2, "schema": 2}',
                         "case.json holds the key 'schema' twice in one object"),
}


def test_a_malformed_record_is_damaged_and_the_other_cases_still_run(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    root = tmp_path / "corpus"
    good = Corpus(root, create=True).add(NewCase(
        "mlpackage", str(package), "sim:fp16", filled("x", (1, 16), 1.0), Expected("pass"))).case
    for case_id, (text, _) in MALFORMED_RECORDS.items():
        (root / case_id).mkdir()
        (root / case_id / "case.json").write_text(text)
    reasons = {case_id: reason for case_id, (_, reason) in MALFORMED_RECORDS.items()}

    junit = tmp_path / "junit.xml"
    replayed = sandbox.run("replay", str(root), "--json", "--junit", str(junit))
    assert replayed.returncode == 1 and "Traceback" not in replayed.stderr, replayed.stderr
    body = json.loads(replayed.stdout)
    assert [(r["case_id"], r["outcome"]) for r in body["results"]] == [(good.case_id, "ok")]
    assert {Path(p["path"]).name: p["reason"] for p in body["problems"]} == reasons
    assert all(case_id in junit.read_text() for case_id in reasons)
    verified = sandbox.run("fix", "verify", str(root), "--fix", "softplus-stable", "--json")
    assert verified.returncode == 1 and "Traceback" not in verified.stderr, verified.stderr
    assert [c["case_id"] for c in json.loads(verified.stdout)["cases"]] == [good.case_id]
    listed = sandbox.run("corpus", "ls", str(root), "--json")
    assert listed.returncode == 1, listed.stderr
    assert {Path(p["path"]).name: p["reason"] for p in json.loads(listed.stdout)["problems"]} \
        == reasons
    shown = sandbox.run("corpus", "show", str(root), "0000000000000001")
    assert shown.returncode == 2
    assert shown.stderr.splitlines() == [
        f"nebisect: error: {root / '0000000000000001'}: {reasons['0000000000000001']}"]
    assert sandbox.run("corpus", "show", str(root), good.case_id).returncode == 0
    removed = sandbox.run("corpus", "rm", str(root), "0000000000000002")
    assert (removed.returncode, removed.stdout) == (0, "removed 0000000000000002\n")


def test_case_data_never_reaches_the_terminal_as_control_sequences(
    tmp_path: Path, package: Path, sandbox: Sandbox
) -> None:
    """Names, signatures, reasons and directory names come from the corpus: an escape
    sequence in them (``ESC [2J`` clears the screen) is printed as text, and so is what
    Rich would take for markup."""
    root = tmp_path / "corpus"
    corpus = Corpus(root, create=True)
    corpus.add(NewCase("mlpackage", str(package), "sim:fp16", filled("x", (1, 16), 1.0),
                       Expected("failing", "mismatch:\x1b[2J"), name="n\x1b[2J[red]x"))
    (root / "d\x1b]0;t\x07").mkdir()
    for command in (["corpus", "ls", str(root)], ["replay", str(root)]):
        done = sandbox.run(*command, COLUMNS="400")  # wide enough that no cell wraps
        assert done.returncode == 1, done.stderr
        output = done.stdout + done.stderr
        assert "\x1b" not in output and "\x07" not in output
        assert "n\\x1b[2J[red]x" in output and "d\\x1b]0;t\\x07" in output
        assert "mismatch:\\x1b[2J" in output
