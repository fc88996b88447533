"""Conversions kept across runs by content: a hit converts nothing, a damaged entry is
converted again, a changed source or precision is another entry; ``bisect`` and
``fuzz SOURCE`` read and keep theirs as ``run`` does."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support import REPO

import nebisect
from nebisect.arrays import sha256_path
from nebisect.sources import convert
from nebisect.sources.conversion_cache import (
    MANIFEST_FILE,
    VERDICT_FILE,
    cache_bytes,
    cache_directory,
    lookup,
)
from nebisect.sources.convert import CACHE_HIT, PATHS, ConvertArguments, convert_job
from nebisect.verdict import Status, Verdict

LOGSUMEXP = f"{REPO / 'examples' / 'logsumexp_ne.py'}:model"


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The precisions :func:`~nebisect.sources.convert.convert_precisions` converted at."""
    made: list[str] = []
    converting = convert.convert_precisions

    def counted(source: Any, precisions: tuple[str, ...], **options: Any) -> Any:
        made.extend(precisions)
        return converting(source, precisions, **options)

    monkeypatch.setattr(convert, "convert_precisions", counted)
    return made


def _packages(out: Path, precision: str) -> dict[str, str]:
    return {path: str(out / f"{precision}-{path}.mlpackage") for path in PATHS}


def _job(cache: Path, out: Path, precision: str = "fp32", source: str = LOGSUMEXP,
         derived: tuple[str, ...] = ()) -> Verdict:
    return convert_job(ConvertArguments(
        source, precision, _packages(out, precision), every_path=True, cache=str(cache),
        derived={other: _packages(out, other) for other in derived},
        derived_verdicts={other: str(out / f"{other}.json") for other in derived}))


def test_a_second_conversion_of_the_same_model_is_read_from_the_cache(
        tmp_path: Path, conversions: list[str]) -> None:
    cache = tmp_path / "cache"
    first = _job(cache, tmp_path / "first")
    second = _job(cache, tmp_path / "second")
    assert conversions == ["fp32"]
    assert first.status == second.status == Status.PASS
    assert first.conversion is not None and second.conversion is not None
    assert first.conversion.cache.startswith("kept in")
    assert second.conversion.cache.startswith(CACHE_HIT)
    assert second.conversion.paths == first.conversion.paths == list(PATHS)
    assert second.conversion.attempts == first.conversion.attempts
    for path in PATHS:
        assert sha256_path(tmp_path / "second" / f"fp32-{path}.mlpackage") == sha256_path(
            tmp_path / "first" / f"fp32-{path}.mlpackage")
    assert cache_bytes(cache) > 0
    # another precision is another conversion, kept beside the first
    _job(cache, tmp_path / "fp16", "fp16")
    assert conversions == ["fp32", "fp16"]
    assert len([entry for entry in cache.iterdir() if entry.is_dir()]) == 2


@pytest.mark.parametrize("damage", ["truncated", "added", "manifest"])
def test_a_damaged_entry_is_ignored_and_converted_again(
        tmp_path: Path, conversions: list[str], damage: str) -> None:
    cache = tmp_path / "cache"
    _job(cache, tmp_path / "first")
    (entry,) = [entry for entry in cache.iterdir() if entry.is_dir()]
    if damage == "truncated":
        weights = max((f for f in entry.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
        weights.write_bytes(weights.read_bytes()[:-1])
    elif damage == "added":
        (entry / "export.mlpackage" / "stray").write_text("x")
    else:
        (entry / MANIFEST_FILE).write_text("{")
    again = _job(cache, tmp_path / "again")
    assert conversions == ["fp32", "fp32"]
    assert again.status == Status.PASS and again.conversion is not None
    assert "ignored and made again" in again.conversion.cache
    assert "kept in" in again.conversion.cache
    # the entry made again is trusted on the next read
    _job(cache, tmp_path / "third")
    assert conversions == ["fp32", "fp32"]


def test_a_changed_factory_file_is_another_entry(tmp_path: Path,
                                                  conversions: list[str]) -> None:
    factory = tmp_path / "model.py"
    factory.write_text((REPO / "examples" / "logsumexp_ne.py").read_text())
    cache = tmp_path / "cache"
    _job(cache, tmp_path / "first", source=f"{factory}:model")
    factory.write_text(factory.read_text() + "\n# changed\n")
    _job(cache, tmp_path / "second", source=f"{factory}:model")
    assert conversions == ["fp32", "fp32"]


def test_the_cache_is_the_option_else_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEBISECT_CACHE", raising=False)
    assert cache_directory("") == ""
    monkeypatch.setenv("NEBISECT_CACHE", str(tmp_path / "env"))
    assert cache_directory("") == str(tmp_path / "env")
    monkeypatch.chdir(tmp_path)
    assert cache_directory("given") == str(tmp_path / "given")


def test_a_derived_precision_is_kept_too(tmp_path: Path, conversions: list[str]) -> None:
    cache = tmp_path / "cache"
    _job(cache, tmp_path / "first", "fp16", derived=("fp32",))
    assert conversions == ["fp16", "fp32"]
    handed = Verdict.from_json((tmp_path / "first" / "fp32.json").read_text())
    assert handed.status == Status.PASS and handed.conversion is not None
    assert handed.conversion.precision == "fp32" and handed.conversion.paths == list(PATHS)
    for precision in ("fp32", "fp16"):
        again = _job(cache, tmp_path / f"again-{precision}", precision)
        assert again.conversion is not None
        assert again.conversion.cache.startswith(CACHE_HIT)
    assert conversions == ["fp16", "fp32"]


@pytest.mark.parametrize(("damage", "why"), [
    ("fifo manifest", "unreadable manifest: {entry}/manifest.json: is not a regular file but a "
                      "FIFO"),
    ("deep verdict", "unreadable verdict: {entry}/verdict.json: is nested deeper than 32 levels"),
])
def test_an_entry_that_cannot_be_read_within_bounds_is_a_miss(tmp_path: Path, damage: str,
                                                              why: str) -> None:
    """A FIFO does not hang the lookup, a verdict nested 200 000 deep is no RecursionError:
    the entry is ignored (and removed), as any damaged one."""
    entry = tmp_path / "key"
    entry.mkdir()
    verdict = "[" * 200_000 + "]" * 200_000
    (entry / VERDICT_FILE).write_text(verdict)
    if damage == "fifo manifest":
        os.mkfifo(entry / MANIFEST_FILE)
    else:
        digest = hashlib.sha256(verdict.encode()).hexdigest()
        (entry / MANIFEST_FILE).write_text(json.dumps({VERDICT_FILE: digest}))
    found = lookup(tmp_path, "key", {})
    assert found.verdict is None
    reason = why.format(entry=entry)
    assert found.ignored == f"cached conversion key ignored and made again ({reason})"
    assert not entry.exists()


# ------------------------------------------------------------- bisect and fuzz take it too
@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[Verdict]:
    """The verdict of every conversion child this process starts, in order (the child
    converts in a template of its own, out of this process's reach: its verdict says
    whether it read the cache or converted and kept the conversion)."""
    verdicts: list[Verdict] = []
    in_child = convert._convert_in_child

    def counted(*args: Any, **options: Any) -> Verdict:
        verdict = in_child(*args, **options)
        verdicts.append(verdict)
        return verdict

    monkeypatch.setattr(convert, "_convert_in_child", counted)
    return verdicts


def _sources(verdicts: list[Verdict]) -> list[str]:
    """Where each conversion came from: ``read`` from the cache or ``made`` (and kept)."""
    assert all(v.conversion is not None for v in verdicts)
    return ["read" if v.conversion and v.conversion.cache.startswith(CACHE_HIT) else "made"
            for v in verdicts]


@pytest.mark.slow
def test_a_second_bisect_of_the_same_model_converts_nothing(
        tmp_path: Path, children: list[Verdict]) -> None:
    """Without --inputs a bisection converts at least twice: every path to look for a
    trigger, then the trigger's path to reduce; the second bisection reads them all."""
    cache = tmp_path / "cache"

    def bisect(out: str) -> nebisect.BisectReport:
        return nebisect.bisect(LOGSUMEXP, target="sim:ane", convert="export",
                               cache=str(cache), out=tmp_path / out, progress=False)

    first = bisect("first")
    made = len(children)
    second = bisect("second")
    assert made >= 2 and _sources(children) == ["made"] * made + ["read"] * made
    assert first.ok and second.ok
    assert second.result.kept_types == first.result.kept_types
    assert second.result.trigger == first.result.trigger
    assert len([entry for entry in cache.iterdir() if entry.is_dir()]) == made


@pytest.mark.slow
def test_a_second_fuzz_of_the_same_model_converts_nothing(
        tmp_path: Path, children: list[Verdict], monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache comes from ``--cache``, else ``$NEBISECT_CACHE`` (here)."""
    monkeypatch.setenv("NEBISECT_CACHE", str(tmp_path / "cache"))

    def fuzz() -> nebisect.FuzzReport:
        return nebisect.fuzz(LOGSUMEXP, target="sim:ane", convert="export", budget=2,
                             shrink_budget=0, progress=False)

    first = fuzz()
    made = len(children)
    second = fuzz()
    assert made >= 1 and _sources(children) == ["made"] * made + ["read"] * made
    assert [(r.generated, r.statuses) for r in second.results] == [
        (r.generated, r.statuses) for r in first.results]
    assert [f.title for f in second.findings] == [f.title for f in first.findings]


def test_run_bisect_and_fuzz_say_they_take_the_cache() -> None:
    from typer.testing import CliRunner

    from nebisect.cli import app

    for command in ("run", "bisect", "fuzz"):
        shown = CliRunner().invoke(app, [command, "--help"], terminal_width=400).output
        text = " ".join(shown.replace("│", " ").split())
        assert "--cache DIR" in text
        assert "(run, bisect and fuzz SOURCE all take it)" in text
