"""The corpus store: content-addressed cases, verified loads, atomic and locked writes."""

from __future__ import annotations

from support import REPO

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from support.corpus_helpers import add, filled, lse_package

from nebisect.arrays import load_npz, save_npz
from nebisect.corpus import CaseRecord, Corpus, CorruptCaseError, Expected, NewCase
from nebisect.errors import NebisectError
from nebisect.verdict import Verdict

NEBISECT = [str(Path(sys.executable).parent / "nebisect")]


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return Corpus(tmp_path / "corpus", create=True)


def test_add_is_content_addressed_and_round_trips(corpus: Corpus, lse: Path) -> None:
    inputs = filled("x", (1, 32), 7.7)
    failing = Expected("failing", "mismatch:collapse", "mismatch")
    first = corpus.add(NewCase("mlpackage", str(lse), "sim:ane", inputs, failing,
                               name="lse-cliff", fixes=["logsumexp-max-shift"]))
    again = corpus.add(NewCase("mlpackage", str(lse), "sim:ane", inputs, failing))
    other = corpus.add(NewCase("mlpackage", str(lse), "sim:fp16", inputs, Expected("pass")))

    assert first.created and not again.created
    assert again.case.case_id == first.case.case_id != other.case.case_id
    case = corpus.find("lse-cliff")
    assert case.path.name == case.case_id == first.case.case_id
    record = case.record
    assert (record.source_kind, record.target, record.stage) == ("mlpackage", "sim:ane", "predict")
    assert record.expected == failing and record.fixes == ["logsumexp-max-shift"]
    assert set(record.files) == {"model.mlpackage", "inputs.npz"}
    assert record.provenance["nebisect"] and record.reference == "sim:fp64"
    np.testing.assert_array_equal(load_npz(case.path / "inputs.npz")["x"], inputs["x"])
    as_case = case.to_case()
    assert record.identity() == case.case_id
    assert as_case.ref.location == str(case.path / "model.mlpackage")
    assert CaseRecord.from_json(record.to_json()) == record
    assert sorted(c.case_id for c in corpus.scan().cases) == sorted(
        [first.case.case_id, other.case.case_id])
    assert not list(corpus.root.glob(".tmp-*"))


def test_find_by_prefix_and_errors(corpus: Corpus, lse: Path) -> None:
    case_id = add(corpus, lse, filled("x", (1, 32), 1.0), Expected("pass"))
    assert corpus.find(case_id[:6]).case_id == case_id
    with pytest.raises(NebisectError, match="no case 'zzz'"):
        corpus.find("zzz")
    with pytest.raises(NebisectError, match="no such corpus directory"):
        Corpus(corpus.root / "missing")
    with pytest.raises(NebisectError, match="needs the signature"):
        Expected("failing")
    with pytest.raises(NebisectError, match="unknown expected status 'broken'"):
        Expected("broken")
    with pytest.raises(NebisectError, match=r"not an \.mlpackage"):
        corpus.add(NewCase("mlpackage", str(corpus.root), "sim:fp16", {}, Expected("pass")))


def _ids(corpus: Corpus, package: Path, n: int) -> list[str]:
    return [add(corpus, package, filled("x", (1, 32), float(i)), Expected("pass"))
            for i in range(n)]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "model.mlpackage" / "Manifest.json").write_text("{}"),
         "model.mlpackage does not match its sha256"),
        (lambda d: (d / "inputs.npz").write_bytes((d / "inputs.npz").read_bytes()[:40]),
         "inputs.npz does not match its sha256 (tampered or truncated)"),
        (lambda d: (d / "inputs.npz").unlink(), "inputs.npz is missing"),
        (lambda d: (d / "case.json").write_text(
            (d / "case.json").read_text().replace('"status": "pass"', '"status": "fixed"')),
         "case.json checksum mismatch"),
        (lambda d: (d / "case.json").write_text("{"), "case.json is not valid JSON"),
        (lambda d: (d / "case.json").unlink(), "no case.json (half-written or not a case)"),
        (lambda d: (d / "case.json").write_text(
            (d / "case.json").read_text().replace('"schema": 2', '"schema": 99')),
         "schema version 99"),
    ],
)
def test_damaged_cases_are_reported_and_skipped(
    corpus: Corpus, lse: Path, damage: object, reason: str
) -> None:
    ids = _ids(corpus, lse, 3)
    damage(corpus.root / ids[1])  # type: ignore[operator]
    scan = corpus.scan()
    assert sorted(c.case_id for c in scan.cases) == sorted([ids[0], ids[2]])
    assert [(p.path.name, p.damaged) for p in scan.problems] == [(ids[1], True)]
    assert reason in scan.problems[0].reason
    with pytest.raises(NebisectError, match=r"sha256|checksum|missing|JSON|case\.json|schema"):
        corpus.find(ids[1])


def test_half_written_and_renamed_directories(corpus: Corpus, lse: Path) -> None:
    ids = _ids(corpus, lse, 2)
    abandoned = f".tmp-{uuid.uuid4().hex}"
    (corpus.root / abandoned).mkdir()
    (corpus.root / ".tmp-notes").mkdir()  # a user's, not a writer's: not reported
    half = corpus.root / "0123456789abcdef"
    half.mkdir()
    save_npz(half / "inputs.npz", filled("x", (1, 32), 0.0))
    shutil.copytree(corpus.root / ids[0], corpus.root / "renamed")
    scan = corpus.scan()
    assert sorted(c.case_id for c in scan.cases) == sorted(ids)
    problems = {p.path.name: (p.damaged, p.reason) for p in scan.problems}
    assert problems[abandoned][0] is False
    assert "unfinished write" in problems[abandoned][1]
    assert ".tmp-notes" not in problems
    assert problems["0123456789abcdef"] == (True, "no case.json (half-written or not a case)")
    assert problems["renamed"][1] == f"directory name does not match case id {ids[0]}"


def test_a_damaged_copy_is_replaced_by_a_fresh_add(corpus: Corpus, lse: Path) -> None:
    case_id = add(corpus, lse, filled("x", (1, 32), 2.0), Expected("pass"))
    (corpus.root / case_id / "inputs.npz").write_bytes(b"truncated")
    again = corpus.add(NewCase("mlpackage", str(lse), "sim:ane", filled("x", (1, 32), 2.0),
                               Expected("pass")))
    assert again.created and "does not match its sha256" in again.replaced
    assert not corpus.scan().problems


def test_update_and_remove(corpus: Corpus, lse: Path) -> None:
    case_id = add(corpus, lse, filled("x", (1, 32), 7.7), Expected("pass"), name="x")
    updated = corpus.update_expected(corpus.find(case_id),
                                     Expected("failing", "mismatch:collapse"))
    assert updated.record.expected.signature == "mismatch:collapse"
    assert updated.case_id == case_id
    assert corpus.remove("x") == case_id
    assert not corpus.scan().cases
    broken = corpus.root / "fedcba9876543210"
    broken.mkdir()
    (broken / "case.json").write_text("{not json")
    assert corpus.remove("fedcba9876543210") == "fedcba9876543210"
    assert not any(p for p in corpus.root.iterdir() if not p.name.startswith(".lock"))


def test_expectation_from_a_verdict() -> None:
    failed = Verdict("mismatch", signature="mismatch:collapse", message="collapse at x[0]")
    assert Expected.from_verdict(failed) == Expected(
        "failing", "mismatch:collapse", "mismatch", "collapse at x[0]")
    passed = Verdict("pass")
    assert Expected.from_verdict(passed).status == "pass"
    assert Expected.from_verdict(passed, previous=Expected("failing", "x")).status == "fixed"
    assert Expected.from_verdict(passed, previous=Expected("fixed")).status == "fixed"


def test_record_rejects_unknown_kinds() -> None:
    with pytest.raises(NebisectError, match="not 'builder'"):
        CaseRecord("id", "builder", "sim:fp16", Expected("pass"))
    with pytest.raises(CorruptCaseError, match="not a JSON object"):
        CaseRecord.from_json("[]")


def test_two_concurrent_writers_leave_every_case_intact(tmp_path: Path, lse: Path) -> None:
    root = tmp_path / "corpus"
    commands = []
    for writer in range(2):
        files = []
        for i in range(50):
            path = tmp_path / f"w{writer}" / f"{i}.npz"
            path.parent.mkdir(exist_ok=True)
            save_npz(path, filled("x", (1, 32), writer * 100 + i))
            files += ["--inputs", str(path)]
        commands.append([*NEBISECT, "corpus", "add", str(root), str(lse),
                         "--target", "sim:fp16", "--expect", "pass", *files])
    writers = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for c in commands]
    outputs = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0, 0], outputs
    assert all(out.count("added: ") == 50 for out, _ in outputs)
    scan = Corpus(root).scan()
    assert len(scan.cases) == 100 and not scan.problems
    values = sorted(float(load_npz(c.path / "inputs.npz")["x"][0, 0]) for c in scan.cases)
    assert values == sorted([float(i) for i in range(50)] + [100.0 + i for i in range(50)])
    assert not list(root.glob(".tmp-*")) and not list(root.glob(".trash-*"))


def test_concurrent_writers_of_the_same_cases_store_each_once(
    tmp_path: Path, lse: Path
) -> None:
    root = tmp_path / "corpus"
    files = []
    for i in range(20):
        save_npz(tmp_path / f"{i}.npz", filled("x", (1, 32), i))
        files += ["--inputs", str(tmp_path / f"{i}.npz")]
    command = [*NEBISECT, "corpus", "add", str(root), str(lse), "--target", "sim:fp16",
               "--expect", "pass", *files]
    writers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [w.communicate(timeout=300)[0] for w in writers]
    assert [w.returncode for w in writers] == [0, 0]
    assert sum(o.count("added: ") for o in outputs) == 20
    assert sum(o.count("already present: ") for o in outputs) == 20
    assert len(Corpus(root).scan().cases) == 20


def test_cli_ls_show_rm_and_usage_errors(tmp_path: Path, lse: Path) -> None:
    root = tmp_path / "corpus"
    save_npz(tmp_path / "x.npz", filled("x", (1, 32), 7.7))
    add_cmd = [*NEBISECT, "corpus", "add", str(root), str(lse), "--target", "sim:ane",
               "--inputs", str(tmp_path / "x.npz"), "--name", "cliff"]
    missing_sig = subprocess.run([*add_cmd, "--expect", "failing"], capture_output=True,
                                 text=True)
    assert missing_sig.returncode == 2 and "needs the signature" in missing_sig.stderr
    assert "Traceback" not in missing_sig.stderr
    done = subprocess.run([*add_cmd, "--expect", "failing", "--signature", "mismatch:collapse",
                           "--fix", "logsumexp-max-shift"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (root / "0123456789abcdef").mkdir()
    listed = subprocess.run([*NEBISECT, "corpus", "ls", str(root), "--json"],
                            capture_output=True, text=True)
    assert listed.returncode == 1  # a damaged case no longer guards anything
    listing = json.loads(listed.stdout)
    assert [c["name"] for c in listing["cases"]] == ["cliff"]
    assert listing["cases"][0]["expected"]["signature"] == "mismatch:collapse"
    assert listing["problems"][0]["path"].endswith("0123456789abcdef")
    shown = subprocess.run([*NEBISECT, "corpus", "show", str(root), "cliff"],
                           capture_output=True, text=True, check=True).stdout
    assert '"fixes": [\n    "logsumexp-max-shift"' in shown and "(verified)" in shown
    removed = subprocess.run([*NEBISECT, "corpus", "rm", str(root), "cliff"],
                             capture_output=True, text=True, check=True).stdout
    assert removed.startswith("removed ")
    unknown = subprocess.run([*NEBISECT, "corpus", "show", str(root), "cliff"],
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "no case 'cliff'" in unknown.stderr


def test_a_recording_that_nebisect_refused_is_no_expectation() -> None:
    """``corpus add`` never stores nebisect's own usage error (a NebisectError, or a
    subclass, raised in the child) as the bug a case guards; a model's failure it does."""
    import nebisect.mil.validate  # noqa: F401  (defines InputError, a NebisectError)
    from nebisect.commands.corpus import _refused

    assert _refused(Verdict("error", "predict", message="NebisectError: torch:cpu:fp32 runs "
                            "torch sources (file.py:factory), not a mlpackage artifact"))
    assert _refused(Verdict("error", "predict", message="InputError: missing input(s) x"))
    assert not _refused(Verdict("error", "convert", message="RuntimeError: new_ones"))
    assert not _refused(Verdict("mismatch", signature="mismatch:collapse",
                                message="NebisectError: not an error verdict"))


def test_per_chip_expectations_are_a_compatible_schema_field(tmp_path: Path) -> None:
    """A shipped case (recorded before ``chips`` existed) re-serializes byte for byte;
    a case with per-chip expectations keeps them through a save and a load."""
    shipped = next(p for p in sorted(REPO.glob("corpus/*/case.json")))
    record = CaseRecord.from_json(shipped.read_text())
    assert record.expected.chips == {} and record.to_json() == shipped.read_text()
    expected = Expected("failing", "mismatch:collapse", chips={"m4": "fixed", "m1": "failing"})
    assert expected.for_chip("m4") == Expected("fixed")
    assert expected.for_chip("m1") is expected and expected.for_chip("m2") is expected
    corpus = Corpus(tmp_path / "corpus", create=True)
    add(corpus, lse_package(tmp_path / "lse.mlpackage"), filled("x", (1, 32), 7.7), expected)
    [case] = corpus.scan().cases
    assert case.record.expected.chips == {"m1": "failing", "m4": "fixed"}
    with pytest.raises(NebisectError, match="unknown expected status 'broken'"):
        Expected("pass", chips={"m1": "broken"})
    with pytest.raises(NebisectError, match="needs the signature"):
        Expected("pass", chips={"m1": "failing"})


def test_cli_add_records_per_chip_expectations(tmp_path: Path, lse: Path) -> None:
    root = tmp_path / "corpus"
    save_npz(tmp_path / "x.npz", filled("x", (1, 32), 7.7))
    add_cmd = [*NEBISECT, "corpus", "add", str(root), str(lse), "--target", "sim:ane",
               "--inputs", str(tmp_path / "x.npz"), "--expect-chip", "m4=fixed"]
    alone = subprocess.run(add_cmd, capture_output=True, text=True)
    assert alone.returncode == 2
    assert alone.stderr.strip() == ("nebisect: error: --expect-chip needs --expect (the "
                                    "status on every other chip)")
    done = subprocess.run([*add_cmd, "--expect", "failing", "--signature", "mismatch:collapse"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [case] = Corpus(root).scan().cases
    assert case.record.expected.chips == {"m4": "fixed"}


#: The repository's own corpus (found from the project root, wherever this file sits).
REPO_CORPUS = next(p for p in Path(__file__).resolve().parents
                   if (p / "pyproject.toml").is_file()) / "corpus"


@pytest.mark.parametrize("record_file", sorted(REPO_CORPUS.glob("*/case.json")),
                         ids=lambda path: path.parent.name)
def test_every_stored_case_re_serializes_to_its_own_bytes_and_id(record_file: Path) -> None:
    """Typed options (CaseOptions) write what the string-keyed dict wrote: same bytes,
    same checksum, same content address."""
    text = record_file.read_text()
    record = CaseRecord.from_json(text)
    assert record.to_json() == text
    assert record.identity() == record.case_id == record_file.parent.name


def test_an_unknown_case_option_is_a_one_line_input_error(tmp_path: Path) -> None:
    from nebisect.corpus.record import _checksum

    source = REPO_CORPUS / "2e0faebcc682687f"
    root = tmp_path / "corpus"
    shutil.copytree(source, root / source.name)
    body = json.loads((source / "case.json").read_text())
    del body["checksum"]
    body["options"]["op_of_intrest"] = "softplus"
    body["checksum"] = _checksum(body)
    (root / source.name / "case.json").write_text(json.dumps(body, indent=2, sort_keys=True))
    with pytest.raises(CorruptCaseError, match="unknown case option 'op_of_intrest'"):
        CaseRecord.from_json((root / source.name / "case.json").read_text())
    shown = subprocess.run([*NEBISECT, "corpus", "show", str(root), source.name[:8]],
                           capture_output=True, text=True)
    assert shown.returncode == 2
    assert shown.stderr.strip().splitlines()[-1].endswith(
        "case.json: unknown case option 'op_of_intrest': one of plugins, params, outputs, "
        "intermediates, judge_precision, op_of_interest, reference_source, convert_path, "
        "masked_outputs, note_placement, steps")
    assert "Traceback" not in shown.stderr


@pytest.mark.parametrize("key", [
    "{outside}", "{case}/../../outside", "{case}/..", "{root}", "", "../outside", "link-",
    "link-to-outside",
])
def test_a_key_names_a_case_directory_under_the_root_and_nothing_else(
    corpus: Corpus, lse: Path, key: str
) -> None:
    """``rm`` and ``show`` resolve a key to a case directory directly under the root: an
    absolute path, a ``..``, the root itself or a symlinked case directory is no case,
    and nothing outside the corpus (nor the corpus) is touched."""
    outside = corpus.root.parent / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the corpus's\n")
    case_id = add(corpus, lse, filled("x", (1, 32), 1.0), Expected("pass"))
    (corpus.root / "link-to-outside").symlink_to(outside, target_is_directory=True)
    key = key.format(outside=outside, case=case_id, root=corpus.root)
    before = sorted(p.name for p in corpus.root.iterdir())
    for act in (corpus.remove, corpus.find):
        with pytest.raises(NebisectError):
            act(key)
    assert (outside / "keep.txt").read_text() == "not the corpus's\n"
    assert sorted(p.name for p in corpus.root.iterdir()) == before
    assert corpus.find(case_id).case_id == case_id


def test_gc_never_follows_a_symlink(corpus: Corpus) -> None:
    outside = corpus.root.parent / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept\n")
    links = sorted(f"{prefix}{uuid.uuid4().hex}" for prefix in (".trash-", ".tmp-"))
    for name in links:
        (corpus.root / name).symlink_to(outside, target_is_directory=True)
    assert corpus.collect_garbage() == []
    assert (outside / "keep.txt").read_text() == "kept\n"
    assert sorted(p.name for p in corpus.root.iterdir()) == [".lock", *links]


def test_rm_and_gc_touch_only_a_corpus_and_its_cases(corpus: Corpus, lse: Path) -> None:
    home = corpus.root.parent / "home"
    (home / "Documents").mkdir(parents=True)
    (home / ".tmp-build").mkdir()
    (home / f".trash-{uuid.uuid4().hex}").mkdir()
    before = sorted(p.name for p in home.iterdir())
    for act in (lambda: Corpus(home).remove("Doc"), Corpus(home).collect_garbage,
                Corpus(home).garbage):
        with pytest.raises(NebisectError, match=r"home: not a corpus \(no \.lock and no case "
                                                r"directory holding a case\.json\)"):
            act()
    assert sorted(p.name for p in home.iterdir()) == before  # no .lock left either

    case_id = add(corpus, lse, filled("x", (1, 32), 3.0), Expected("pass"))
    case = corpus.root / case_id
    with pytest.raises(NebisectError, match="a case directory, not a corpus"):
        Corpus(case).remove("model")
    with pytest.raises(NebisectError, match="not a corpus"):
        Corpus(case / "model.mlpackage").remove("Data")
    assert (case / "model.mlpackage" / "Data").is_dir()

    (corpus.root / "models").mkdir()  # not a case: no case.json of its own
    users = [".tmp-notes", ".trash-old", f".tmp-{uuid.uuid4().hex[:31]}"]
    for name in users:
        (corpus.root / name).mkdir()
    with pytest.raises(NebisectError, match="no case 'mod'"):
        corpus.remove("mod")
    assert corpus.collect_garbage() == []
    assert sorted(p.name for p in corpus.root.iterdir()) == sorted(
        [".lock", case_id, "models", *users])
    assert corpus.find(case_id).case_id == case_id


def _rewritten(record_file: Path, edit: object) -> str:
    """``case.json`` with ``edit`` applied to its body and the checksum recomputed (what
    an attacker, who can recompute it, writes)."""
    from nebisect.corpus.record import _checksum

    body = json.loads(record_file.read_text())
    del body["checksum"]
    edit(body)  # type: ignore[operator]
    body["checksum"] = _checksum(body)
    return json.dumps(body)


def _duplicate_expected(record_file: Path) -> str:
    """The record with a second ``expected`` key in front: a parser that keeps the last
    one verifies it, another reader may take the first."""
    text = record_file.read_text()
    return text.replace("{", '{\n  "expected": {"status": "fixed"},', 1)


@pytest.mark.parametrize(("write", "reason"), [
    (lambda f: "[" * 200_000 + "]" * 200_000, "nested deeper than"),
    (lambda f: '{"schema": ' + "9" * 5001 + "}", "a number longer than"),
    (lambda f: '{"schema": NaN}', "not valid JSON"),
    (_duplicate_expected, "holds the key 'expected' twice in one object"),
    (lambda f: _rewritten(f, lambda b: b.update(files=list(b["files"]))),
     "field 'files' has the wrong type (['inputs.npz', "),
    (lambda f: _rewritten(f, lambda b: b.update(name=5)), "field 'name' has the wrong type"),
    (lambda f: _rewritten(f, lambda b: b["expected"].update(chips=["m1"])),
     "field 'chips' has the wrong type (['m1'])"),
    (lambda f: _rewritten(f, lambda b: b.update(expected="pass")),
     "field 'expected' has the wrong type ('pass')"),
])
def test_a_malformed_record_is_a_damaged_case_not_a_crash(
    corpus: Corpus, lse: Path, write: object, reason: str
) -> None:
    ids = _ids(corpus, lse, 2)
    record_file = corpus.root / ids[1] / "case.json"
    record_file.write_text(write(record_file))  # type: ignore[operator]
    scan = corpus.scan()
    assert [c.case_id for c in scan.cases] == [ids[0]]
    [problem] = scan.problems
    assert problem.path.name == ids[1] and problem.damaged and reason in problem.reason
    with pytest.raises(NebisectError, match="case.json"):
        corpus.find(ids[1])
    assert corpus.remove(ids[1]) == ids[1]
    assert corpus.find(ids[0]).case_id == ids[0]


def test_an_expectation_keeps_empty_chips_in_reports_not_in_its_case_file() -> None:
    """Replay's JSON writes an expectation whole; ``case.json`` leaves empty ``chips``
    out, so cases recorded before they existed keep their bytes and checksum."""
    assert Expected("pass").to_dict() == {"status": "pass", "signature": "", "verdict": "",
                                          "message": "", "chips": {}}
    record = CaseRecord.from_json(next(iter(sorted(REPO_CORPUS.glob("*/case.json"))))
                                  .read_text())
    assert "chips" not in json.loads(record.to_json())["expected"]
