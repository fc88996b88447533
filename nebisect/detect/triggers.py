"""From a finding to the next command: each finding's trigger, saved and indexed.

``run --save-triggers DIR`` (and ``run --report DIR``, into ``DIR/triggers``) writes,
for finding N (1-based, in the order ``run`` prints them; its failure group with the
smallest trigger), the inputs of that smallest failing input set as ``N.npz`` — the
plain, pickle-free ``.npz`` that ``--inputs`` reads — and one index, ``triggers.json``:
per group its target, conversion path, stage, signature, attribution, culprit op,
input-set label, the ``.npz`` file name, and the exact commands that take it further
(``nebisect bisect …``, ``nebisect corpus add …``, and ``nebisect run …
--converter-overrides`` when those overrides cure its conversion failure).

``bisect --finding FILE#N`` reads entry N back (:func:`read_finding`); FILE is such an
index or the ``report.json`` of a run, whose summary names its index
(:data:`REPORT_KEY`), a file inside the report's directory. Every file is written
atomically, and read back by :func:`nebisect.files.read_json` (bounded).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nebisect.arrays import load_npz, save_npz
from nebisect.codec import Form, Record
from nebisect.detect.causes import COMPRESSION
from nebisect.detect.findings import Row
from nebisect.errors import NebisectError
from nebisect.files import read_json, staged, write_text
from nebisect.search.records import FailureGroup
from nebisect.sources.converter_overrides import overrides_hint
from nebisect.targets.registry import spec_of

SCHEMA = "nebisect.triggers"
SCHEMA_VERSION = 1
INDEX = "triggers.json"
#: where ``run --report DIR`` puts its triggers, and the report summary's key naming
#: the index (relative to the report's directory)
REPORT_DIRECTORY = "triggers"
REPORT_KEY = "triggers"
#: the corpus the printed ``corpus add`` command stores into
CORPUS = "corpus"
#: the compressed package of a ``run --compress``, kept beside its triggers for the
#: commands of a finding that is no compression's
COMPRESSED = "compressed.mlpackage"
#: N of ``FILE#N``: a finding's number, in digits (no more than a run could find)
_NUMBER = re.compile(r"[0-9]{1,9}")


@dataclass
class Trigger(Record):
    """One failure group's trigger: where it fails, how, and the commands that follow.

    ``inputs`` is the ``.npz`` file's name in the index's directory; ``fixes`` the
    converter fixes the run converted with (``converter-compat`` for
    ``--converter-overrides``), which a bisection of it must convert with too.
    """

    number: int
    target: str
    path: str
    stage: str
    signature: str
    attribution: str
    culprit: str
    input_set: str
    inputs: str
    fixes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    @property
    def graph(self) -> str:
        """What ``bisect`` reduces for it: the torch graph for a conversion bug (the
        converted program agrees with itself), else what its stage implies."""
        return "fx" if self.attribution == "conversion" and self.stage != "convert" else "auto"


@dataclass
class TriggerIndex(Record):
    """``triggers.json``: the run's source (absolute) and one :class:`Trigger` per group,
    under the index's schema name and version."""

    json_form: ClassVar[Form] = Form(schema=(SCHEMA, SCHEMA_VERSION))

    source: str
    triggers: list[Trigger] = field(default_factory=list)


def save_triggers(directory: Path, groups: Sequence[FailureGroup], rows: Sequence[Row],
                  saved: Mapping[str, str], *, source: str, typed: str,
                  fixes: Sequence[str] = (), function: str = "",
                  baseline: str = "", compress: str = "",
                  compressed: str = "", cured: Sequence[str] = ()) -> TriggerIndex:
    """Write ``N.npz`` per group and ``triggers.json`` into ``directory``.

    ``saved`` maps input-set labels to the run's inputs files; ``source`` is the
    resolved location, ``typed`` the source as the user typed it (what the printed
    commands say, beside ``directory`` as given), ``function`` the function of a
    multifunction package the groups failed in (the commands name it), ``baseline`` the
    package a compressed source was compared with (``run --baseline``). ``compress``: the
    SPEC a torch source was compressed with (``run --compress``), whose compressed
    package ``compressed`` is copied into ``directory`` as :data:`COMPRESSED` for the
    commands of a finding other than compression's, which is that package's own.
    ``cured``: the conversion paths the run judged as converted with nebisect's
    converter overrides (a group judged there is bisected with them: :func:`trigger_of`).
    """
    index = TriggerIndex(source)
    program = ""
    for number, group in enumerate(groups, 1):
        # a compressed package's own failure: bisected as the package, no conversion fixed
        own = bool(compressed) and group.attribution != COMPRESSION
        trigger = trigger_of(number, group, rows, () if own else fixes, () if own else cured)
        save_npz(directory / trigger.inputs, load_npz(saved[group.smallest.label]))
        if own and not program:
            program = _copied(Path(compressed), directory / COMPRESSED)
        trigger.commands = next_commands(trigger, program or typed, directory, group.message,
                                         function, baseline,
                                         compress=(typed, compress) if compress else None)
        index.triggers.append(trigger)
    write_text(directory / INDEX, json.dumps(index.to_dict(), indent=2) + "\n")
    return index


def trigger_of(number: int, group: FailureGroup, rows: Sequence[Row],
               fixes: Sequence[str] = (), cured: Sequence[str] = ()) -> Trigger:
    """Group ``number``'s trigger (no commands yet); the stage is that of its smallest
    failing row among ``rows``. A group past conversion on a path of ``cured`` (judged
    as converted with nebisect's converter overrides) converts with them too (the
    ``converter-compat`` fix), as its program did; its failure at coremltools' defaults
    is a conversion group of its own, bisected without them."""
    stage = next(row.verdict.stage for row in rows
                 if row.key == group.key and row.input_set == group.smallest)
    needed = list(fixes)
    if group.path and group.path in cured and stage != "convert":
        from nebisect.fixes.converter_compat import ConverterCompat

        needed += [ConverterCompat.name] if ConverterCompat.name not in needed else []
    return Trigger(number, group.target, group.path, stage, group.signature,
                   group.attribution, group.culprit.describe() if group.culprit else "",
                   group.smallest.label, f"{number}.npz", needed)


def next_commands(trigger: Trigger, typed: str, directory: Path, message: str,
                  function: str = "", baseline: str = "",
                  compress: tuple[str, str] | None = None) -> list[str]:
    """The shell commands that take ``trigger`` further — on ``function`` of a
    multifunction package when set — its inputs read from ``directory``: bisect it (into
    ``directory/bisect-N``), store it in a corpus (not for a torch target, nor a
    conversion nebisect's fixes changed: a corpus case converts plainly), and rerun with
    the converter overrides when they cure it. A compression trigger is no program's
    failure to bisect: it is rerun against its ``baseline``, which localizes it already —
    or, for a torch source compressed by the run (``compress``: the source as typed and
    the SPEC), compressed again."""
    inputs = str(directory / trigger.inputs)
    chosen = ["--function", function] if function else []
    if trigger.attribution == COMPRESSION and compress is not None:
        overrides = ["--converter-overrides"] if trigger.fixes else []
        return [shlex.join(["nebisect", "run", compress[0], "--compress", compress[1],
                            *overrides, "--inputs", inputs, "--explore", "none"])]
    if trigger.attribution == COMPRESSION:
        return [shlex.join(["nebisect", "run", typed, *chosen, "--baseline", baseline,
                            "--inputs", inputs, "--explore", "none"])]
    bisect = ["nebisect", "bisect", typed, *chosen, "-t", trigger.target]
    if trigger.stage == "convert":
        bisect += ["--stage", "convert"]
    if trigger.path:
        bisect += ["--convert", trigger.path]
    if trigger.graph == "fx":
        bisect += ["--graph", "fx"]
    if trigger.stage != "convert":
        bisect += ["--inputs", inputs]
    for fix in trigger.fixes:
        bisect += ["--fix", fix]
    commands = [shlex.join([*bisect, "--out", str(directory / f"bisect-{trigger.number}")])]
    if spec_of(trigger.target).runs_programs and not trigger.fixes:
        stage = ["--stage", trigger.stage] if trigger.stage == "convert" else []
        commands.append(shlex.join(["nebisect", "corpus", "add", CORPUS, typed, *chosen,
                                    "-t", trigger.target, "--inputs", inputs, *stage]))
    if trigger.stage == "convert" and not trigger.fixes and overrides_hint(message):
        commands.append(shlex.join(["nebisect", "run", typed, "--converter-overrides"]))
    return commands


def _copied(package: Path, destination: Path) -> str:
    """``package`` copied to ``destination`` (atomically); its path."""
    import shutil

    with staged(destination) as building:
        shutil.copytree(package, building, symlinks=True)
    return str(destination)


@dataclass
class SavedTrigger:
    """What ``bisect --finding FILE#N`` takes: the source, the trigger, its inputs file."""

    source: str
    trigger: Trigger
    inputs: Path


def read_finding(text: str) -> SavedTrigger:
    """Entry N of the index ``FILE`` names in ``FILE#N`` (a ``triggers.json``, or a run's
    ``report.json``); every problem is one line."""
    file_text, hashed, number = text.rpartition("#")
    if not hashed or not _NUMBER.fullmatch(number):
        named = file_text if hashed else text
        raise NebisectError(f"{named}: name the finding as {named}#N")
    file = Path(file_text)
    document = _read_json(file)
    if document.get("schema") == "nebisect.report":
        summary = document.get("summary")
        name = summary.get(REPORT_KEY) if isinstance(summary, dict) else None
        if document.get("kind") != "run" or not isinstance(name, str):
            raise NebisectError(f"{file}: a report without triggers (run --report writes them)")
        index_file = file.parent / name
        if not _inside(index_file, file.parent):
            raise NebisectError(f"{file}: its summary names triggers outside its directory "
                                f"({name!r})")
        file = index_file
        document = _read_json(file)
    if document.get("schema") != SCHEMA or document.get("schema_version") != SCHEMA_VERSION:
        raise NebisectError(f"{file}: neither a run's report.json nor a {INDEX} of "
                            f"version {SCHEMA_VERSION}")
    try:
        index = TriggerIndex.from_dict(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise NebisectError(f"{file}: a damaged {INDEX} ({type(exc).__name__}: {exc})") from None
    chosen = int(number)
    if not 1 <= chosen <= len(index.triggers):
        raise NebisectError(f"{text}: no finding {chosen} (the report has "
                            f"{len(index.triggers)})")
    trigger = index.triggers[chosen - 1]
    if Path(trigger.inputs).name != trigger.inputs:
        raise NebisectError(f"{file}: finding {chosen} names inputs outside its directory "
                            f"({trigger.inputs!r})")
    return SavedTrigger(index.source, trigger, file.parent / trigger.inputs)


def _inside(file: Path, directory: Path) -> bool:
    """Whether ``file``, its symlinks followed, lies inside ``directory`` (not for a name
    that cannot be resolved: a NUL byte, a symlink loop)."""
    try:
        return file.resolve().is_relative_to(directory.resolve())
    except (OSError, ValueError, RuntimeError):
        return False


def _read_json(file: Path) -> dict[str, Any]:
    """A JSON object from a file (:func:`~nebisect.files.read_json`)."""
    document = read_json(file)
    if not isinstance(document, dict):
        raise NebisectError(f"{file}: not a nebisect report")
    return document
