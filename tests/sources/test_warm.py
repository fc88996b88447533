"""Conversion in the warm template (fork mode): same program as a fresh interpreter, and a
factory that dies mid-conversion is a one-line verdict that leaves nothing in $TMPDIR
and does not take the template down."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import REPO

from nebisect.arrays import sha256_bytes
from nebisect.isolate import Isolator
from nebisect.sources.convert import conversion_template, convert_paths
from nebisect.sources.resolve import Source

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="fork mode is Linux-only")

LOGSUMEXP = str(REPO / "examples" / "logsumexp_ne.py")

#: Factories whose conversion dies once coremltools has created its temp package (the
#: ``tmp*.mlpackage`` it would leave behind): the factory wraps coremltools'
#: ``_create_mlpackage``, so the death comes in the middle of ``ct.convert``.
DIES_MID_CONVERSION = """
import ctypes, os, time
import torch
import coremltools.models.model as ct_model

class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)

def _dying(how):
    create = ct_model._create_mlpackage
    def wrapped(*args, **kwargs):
        created = create(*args, **kwargs)
        how()
        return created
    ct_model._create_mlpackage = wrapped
    return {"module": Relu(), "example_inputs": {"x": torch.ones(1, 4)}}

def segfaults():
    return _dying(lambda: ctypes.string_at(0))

def exits():
    return _dying(lambda: os._exit(0))

def hangs():
    return _dying(lambda: time.sleep(3600))
"""


@pytest.fixture(scope="module")
def tmpdir_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tmpdir")


@pytest.fixture(scope="module")
def warm(tmpdir_root: Path) -> Iterator[Isolator]:
    """One fork-mode isolator whose temp root is in ``tmpdir_root`` (shared by the tests,
    so the template that survives one crash serves the next test)."""
    with Isolator("fork", tmp_dir=tmpdir_root) as isolator:
        yield isolator


def program_hash(package: Path) -> str:
    """The program's hash: the spec serialized deterministically, plus the weights.

    The package's bytes are not compared: protobuf writes map fields (the metadata) in
    an order that depends on the interpreter's string-hash seed, which differs between
    any two fresh interpreters.
    """
    from coremltools.proto import Model_pb2

    data = package / "Data" / "com.apple.CoreML"
    spec = Model_pb2.Model()
    spec.ParseFromString((data / "model.mlmodel").read_bytes())
    weights = sorted((data / "weights").glob("*"))
    return sha256_bytes(spec.SerializeToString(deterministic=True)
                        + b"".join(w.read_bytes() for w in weights))


def _hashes(source: str, isolator: Isolator, workdir: Path) -> dict[str, str]:
    workdir.mkdir()
    packages, verdict = convert_paths(Source("torch", source), "fp16", workdir, isolator)
    assert verdict.status == "pass", verdict.message
    return {path: program_hash(package) for path, package in packages.items()}


def test_warm_template_converts_the_same_program_as_a_fresh_interpreter(
    warm: Isolator, tmp_path: Path
) -> None:
    source = f"{LOGSUMEXP}:model"
    forked = _hashes(source, warm, tmp_path / "fork")
    with Isolator("spawn") as fresh:
        spawned = _hashes(source, fresh, tmp_path / "spawn")
    assert set(forked) == {"export", "trace"}
    assert forked == spawned


@pytest.mark.parametrize(("factory", "status", "words"), [
    ("segfaults", "crash", "SIGSEGV"),
    ("exits", "error", "exit"),
    ("hangs", "timeout", "no result within"),
])
def test_a_factory_dying_mid_conversion_is_one_line_and_leaves_no_temp(
    warm: Isolator, tmpdir_root: Path, tmp_path: Path, factory: str, status: str, words: str,
) -> None:
    model = tmp_path / "dies.py"
    model.write_text(textwrap.dedent(DIES_MID_CONVERSION))
    packages, verdict = convert_paths(Source("torch", f"{model}:{factory}"), "fp32",
                                      tmp_path, warm, paths=("trace",), timeout=10.0)
    assert packages == {}
    assert (verdict.status, verdict.stage) == (status, "convert"), verdict.message
    assert words in verdict.message and "\n" not in verdict.message
    assert verdict.process.template == "warm"
    # The case directory (where the child's tempfile pointed) is gone with its
    # tmp*.mlpackage; only the isolator's own workspace (template logs) remains.
    leftovers = [p for p in tmpdir_root.rglob("*") if not p.name.startswith("template-")]
    assert [p for p in leftovers if p.is_file() or p.suffix == ".mlpackage"] == []
    assert not list(tmp_path.glob("*.mlpackage"))
    # The template survived its child: the next conversion works, forked from the
    # same template (a restarted one would have logged to template-2.log).
    (tmp_path / "again").mkdir()
    again, verdict = convert_paths(Source("torch", f"{LOGSUMEXP}:model"), "fp32",
                                   tmp_path / "again", warm, paths=("trace",))
    assert verdict.status == "pass" and set(again) == {"trace"}
    assert [p.name for p in tmpdir_root.rglob("template-*.log")] == ["template-1.log"]


def test_without_fork_the_verdict_says_why_conversion_is_fresh() -> None:
    assert conversion_template("fork") == "warm"
    assert "fresh process" in conversion_template("spawn")
