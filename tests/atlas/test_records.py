"""The atlas's records: failures read off the grid, the JSON codec, the cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from nebisect.atlas.records import ATLAS_SCHEMA, Atlas, AtlasEntry, AtlasFinding
from nebisect.atlas.render import (
    failure_counts,
    failure_rows,
    idiom_rows,
    markdown,
    op_rows,
    pair_rows,
)
from nebisect.atlas.samples import OpSample
from nebisect.atlas.sweep import EntryCache, SweepSettings, sweep
from nebisect.codec import CodecError

PASS_ROW = {"converts": "ok", "fp64": "pass", "fp32": "pass", "fp16": "pass", "ane": "pass"}
TOLERANCE = "mismatch:tolerance"


def _entry(index: str, cells: dict[str, dict[str, str]], op: str = "var") -> AtlasEntry:
    return AtlasEntry(op, index, f"torch.{op}(x0)", "digest", cells,
                      [AtlasFinding("title", "tolerance", "conversion", "sqrt", ["trace"])])


def test_a_column_failing_as_the_one_before_inherits_that_failure() -> None:
    wrong_everywhere = {**PASS_ROW, "fp64": TOLERANCE, "fp32": TOLERANCE, "fp16": TOLERANCE,
                        "ane": TOLERANCE}
    entry = _entry("float32:6", {"export": PASS_ROW, "trace": wrong_everywhere})
    assert entry.failures() == {f"fp64: {TOLERANCE}": ["trace"]}


def test_a_new_failure_down_the_precisions_is_its_own() -> None:
    row = {**PASS_ROW, "fp64": TOLERANCE, "fp32": TOLERANCE, "fp16": "mismatch:nonfinite",
           "ane": "mismatch:nonfinite"}
    entry = _entry("float32:0", {"export": row, "trace": row})
    assert entry.failures() == {f"fp64: {TOLERANCE}": ["export", "trace"],
                                "fp16: mismatch:nonfinite": ["export", "trace"]}


def test_a_path_that_does_not_convert_is_a_converts_failure() -> None:
    broken = {"converts": "error: NotImplementedError", "fp64": "-", "fp32": "-", "fp16": "-",
              "ane": "-"}
    entry = _entry("float32:0", {"export": PASS_ROW, "trace": broken})
    assert entry.failures() == {"converts: error: NotImplementedError": ["trace"]}


def test_a_path_torch_refuses_is_no_converter_failure() -> None:
    """torch.export refusing the program (a data-dependent row count) never reached
    coremltools: no failure, whatever the other path does."""
    refused = {"converts": "error: not exportable: GuardOnDataDependentSymNode: Could not "
               "guard on data-dependent expression Eq(uN, N)", "fp64": "-", "fp32": "-",
               "fp16": "-", "ane": "-"}
    entry = AtlasEntry("masked_rows", "0:3", "call", "digest", {"export": refused,
                                                                 "trace": PASS_ROW})
    assert entry.failures() == {} and not entry.failed
    not_traceable = {**refused, "converts": "error: not traceable: TracingCheckError: …"}
    broken = {**refused, "converts": "error: NotImplementedError: not exportable: x"}
    assert AtlasEntry("x", "0", "c", "d", {"trace": not_traceable}).failures() == {}
    assert AtlasEntry("x", "0", "c", "d", {"export": broken}).failures() == {
        "converts: error: NotImplementedError: not exportable: x": ["export"]}


def test_distinct_failures_are_op_failure_and_paths() -> None:
    trace_only = {**PASS_ROW, "fp64": TOLERANCE}
    atlas = Atlas({"coremltools": "9.0"}, {}, [
        _entry("float32:0", {"export": trace_only, "trace": trace_only}),
        _entry("float32:6", {"export": PASS_ROW, "trace": trace_only}),
        _entry("float32:7", {"export": PASS_ROW, "trace": trace_only}),
        _entry("float32:0", {"export": PASS_ROW, "trace": PASS_ROW}, op="exp"),
    ])
    assert [(op, failure, paths, count, first) for op, failure, paths, count, first, _
            in failure_rows(atlas)] == [
        ("var", f"fp64: {TOLERANCE}", "export trace", "1", "float32:0"),
        ("var", f"fp64: {TOLERANCE}", "trace", "2", "float32:6")]
    assert failure_counts(atlas) == {"fp64 mismatch:tolerance": 2}
    rows = {(r[0], r[1]): r for r in op_rows(atlas)}
    assert rows[("var", "export")][3] == f"{TOLERANCE} (float32:0)"
    assert rows[("exp", "trace")][2:7] == ["ok", "pass", "pass", "pass", "pass"]
    assert "| var | fp64: mismatch:tolerance | trace | 2 | float32:6 |" in markdown(atlas)


def test_a_pattern_sweep_tells_failures_apart_across_programs() -> None:
    """One converter bug in two programs (and another program's own): two distinct
    failures, each named after the first program that shows it."""
    broken = {"converts": "error: TypeError: only 0-dimensional arrays", "fp64": "-",
              "fp32": "-", "fp16": "-", "ane": "-"}
    entries = [_entry("0:0", {"trace": broken}, op="sdpa_mask"),
               _entry("0:1", {"trace": broken}, op="sdpa_mask+lstm_twice"),
               _entry("0:2", {"trace": {**PASS_ROW, "fp64": TOLERANCE}}, op="slice_assign"),
               AtlasEntry("masked_rows+slice_assign", "0:3", "call", "digest", {
                   "export": {"converts": "error: not exportable: GuardOnDataDependentSymNode",
                              "fp64": "-", "fp32": "-", "fp16": "-", "ane": "-"},
                   "trace": PASS_ROW})]
    per_op = Atlas({"coremltools": "9.0"}, {}, entries)
    assert len(per_op.distinct_failures()) == 3
    across = Atlas({"coremltools": "9.0"}, {"samples": "patterns"}, entries)
    assert [(op, failure, [e.index for e in found]) for (op, failure, _), found
            in across.distinct_failures().items()] == [
        ("sdpa_mask", "converts: error: TypeError: only N-dimensional arrays", ["0:0", "0:1"]),
        ("slice_assign", f"fp64: {TOLERANCE}", ["0:2"])]
    assert idiom_rows(across) == [["lstm_twice", "1", "0", "0", "1", "0"],
                                  ["masked_rows", "1", "1", "0", "0", "0"],
                                  ["sdpa_mask", "2", "0", "0", "2", "1"],
                                  ["slice_assign", "2", "1", "1", "1", "1"]]
    assert pair_rows(across) == [["sdpa_mask, then lstm_twice", "1", "0", "0", "1"],
                                 ["masked_rows, then slice_assign", "1", "1", "0", "0"]]
    assert "### Idioms" in markdown(across) and "### Idioms" not in markdown(per_op)
    assert "| masked_rows, then slice_assign | 1 | 1 | 0 | 0 |" in markdown(across)


def test_the_atlas_json_has_a_schema_and_reads_back() -> None:
    atlas = Atlas({"coremltools": "9.0"}, {"budget": "8"},
                  [_entry("float32:0", {"export": PASS_ROW})], {"var": ["a reason"]}, 1, 2.5)
    document = atlas.to_dict()
    assert (document["schema"], document["schema_version"]) == (ATLAS_SCHEMA, 1)
    assert Atlas.from_dict(json.loads(json.dumps(document))) == atlas
    with pytest.raises(CodecError):
        Atlas.from_dict({**document, "extra": 1})


class _NoRunner:
    """A runner a fully cached sweep must never touch."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the sweep used the runner ({name}) for a cached sample")


def _sample(index: str) -> OpSample:
    return OpSample("exp", "", index, "torch.exp(x0)", {"x0": np.arange(3, dtype=np.float32)})


def test_the_cache_skips_unchanged_samples_and_recomputes_a_changed_setting(
        tmp_path: Path) -> None:
    settings = SweepSettings()
    cache = EntryCache(tmp_path, settings)
    sample = _sample("float32:0")
    stored = AtlasEntry("exp", "float32:0", sample.call, sample.digest(), {"export": PASS_ROW})
    cache.put(sample, stored)
    atlas = sweep([sample], settings, _NoRunner(), cache)  # type: ignore[arg-type]
    assert (atlas.entries, atlas.computed) == ([stored], 0)
    assert EntryCache(tmp_path, SweepSettings(seed=1)).get(sample) is None  # another key
    assert EntryCache(tmp_path, settings).get(_sample("float32:1")) is None


def test_a_cache_file_that_does_not_read_back_is_a_miss(tmp_path: Path) -> None:
    cache = EntryCache(tmp_path, SweepSettings())
    sample = _sample("float32:0")
    cache.put(sample, AtlasEntry("exp", "float32:0", sample.call, sample.digest()))
    (tmp_path / f"{cache.key(sample)}.json").write_text('{"op": "exp", "tampered": true}')
    assert cache.get(sample) is None


def test_a_forged_or_odd_cache_file_is_a_miss_not_a_verdict(tmp_path: Path) -> None:
    """Only an entry of this sample, under its own key, in the shape a sweep writes, is
    trusted; anything else is judged again."""
    settings = SweepSettings()
    cache = EntryCache(tmp_path, settings)
    sample, other = _sample("float32:0"), _sample("float32:1")
    passing = AtlasEntry("exp", sample.index, sample.call, sample.digest(), {"export": PASS_ROW})
    cache.put(sample, passing)
    assert cache.get(sample) == passing
    file = tmp_path / f"{cache.key(sample)}.json"
    foreign = AtlasEntry("exp", other.index, other.call, other.digest(), {"export": PASS_ROW})
    file.write_text(json.dumps(foreign.to_dict()))  # another sample's verdict, planted
    assert cache.get(sample) is None
    cache.put(sample, passing)
    good = json.loads(file.read_text())
    cache.put(other, foreign)
    forged = {
        "a bare entry": passing.to_dict(),
        "another key's file": json.loads((tmp_path / f"{cache.key(other)}.json").read_text()),
        "another sample's entry": {**good, "entry": foreign.to_dict()},
        "a skipped entry": {**good, "entry": {**good["entry"], "skipped": "no"}},
        "a row without its columns": {**good, "entry": {**good["entry"],
                                                        "cells": {"export": {"fp64": "pass"}}}},
        "a negative time": {**good, "entry": {**good["entry"], "seconds": -1.0}},
    }
    for name, document in forged.items():
        file.write_text(json.dumps(document))
        assert cache.get(sample) is None, name
    file.write_text("[" * 200_000 + "]" * 200_000)
    assert cache.get(sample) is None
    file.unlink()
    os.mkfifo(file)
    assert cache.get(sample) is None  # not a hang


def test_a_diff_sorts_each_ops_failures_into_fixed_regressed_new_and_unchanged() -> None:
    from nebisect.atlas.diff import diff, diff_rows, versions

    wrong = {**PASS_ROW, "fp64": TOLERANCE}
    before = Atlas({"coremltools": "9.0", "torch": "2.13"}, {}, [
        _entry("float32:0", {"export": wrong, "trace": wrong}),
        _entry("float32:6", {"export": PASS_ROW, "trace": wrong}),
        _entry("float32:0", {"export": PASS_ROW}, op="exp"),
    ])
    after = Atlas({"coremltools": "9.1.dev1", "torch": "2.13"}, {}, [
        _entry("float32:0", {"export": wrong, "trace": wrong}),
        _entry("float32:6", {"export": PASS_ROW, "trace": PASS_ROW}),
        _entry("float32:0", {"export": wrong}, op="exp"),
        _entry("float32:0", {"export": wrong}, op="log"),
    ])
    changes = {c.op: c.changes for c in diff(before, after)}
    assert changes["var"]["fixed"] == [("float32:6", "torch.var(x0)", "trace",
                                        f"fp64: {TOLERANCE}")]
    assert len(changes["var"]["unchanged"]) == 2 and not changes["var"]["regressed"]
    assert [f[2] for f in changes["exp"]["regressed"]] == ["export"]
    assert [f[0] for f in changes["log"]["new"]] == ["float32:0"]
    assert diff_rows(diff(before, after)) == [["var", "1", "0", "0", "2"],
                                              ["exp", "0", "1", "0", "0"],
                                              ["log", "0", "0", "1", "0"]]
    assert versions(before, after) == "coremltools 9.0 → 9.1.dev1"


def test_conversion_errors_differing_in_numbers_only_are_one_failure() -> None:
    def broken(op_name: str) -> dict[str, str]:
        return {"converts": f'error: ValueError: Op "{op_name}" (op_type: layer_norm) gamma',
                "fp64": "-", "fp32": "-", "fp16": "-", "ane": "-"}

    atlas = Atlas({}, {}, [_entry("float32:0", {"trace": broken("10")}, op="layer_norm"),
                           _entry("float32:1", {"trace": broken("9")}, op="layer_norm")])
    assert list(atlas.distinct_failures()) == [
        ("layer_norm", 'converts: error: ValueError: Op "N" (op_type: layer_norm) gamma',
         ("trace",))]
