"""``run``'s matrix cells on an executor: one ``run-cell`` unit per cell (DESIGN §11).

A cell (target × conversion path × input set) is a :class:`~nebisect.case.Case` judged
against the run's reference. It crosses to an executor as JSON: the case's dict with
every file it names — the model (a converted or given ``.mlpackage``), the torch
source file behind it, the inputs ``.npz``, plugin files — rewritten relative to the
files' common folder, which the executor ships by sha256 (a converted package goes
once per worker, however many cells use it). On the other side the names are rebased
onto where the files landed, the case is evaluated in the executor's isolated child,
and the verdict comes back as JSON with the outputs as an ``.npz`` (base64 in the
JSON, loaded here without pickle and with its headers checked), so
:class:`~nebisect.evaluate.workbench.Workbench` caches it exactly as if it had run here: the
rows, attributions and groups built from it are the same wherever it ran.

A torch source travels as its one ``.py`` file: a factory that imports sibling
modules of its own needs them installed on the workers.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import load_npz, save_npz
from nebisect.case import Case, SourceRef
from nebisect.codec import encode
from nebisect.evaluate.judge import evaluate
from nebisect.evaluate.workbench import CellKey, Workbench
from nebisect.executors import Unit, UnitResult
from nebisect.executors.local import LOCAL
from nebisect.executors.runner import Runner
from nebisect.executors.units import LOST_SIGNATURE
from nebisect.isolate import Isolator
from nebisect.targets.plugins import use_plugins
from nebisect.verdict import Stage, Status, Verdict

#: the unit kind (:data:`nebisect.executors.units.UNIT_KINDS`)
CELL_KIND = "run-cell"


@dataclass(frozen=True)
class CellArguments:
    """A ``run-cell`` unit's arguments: the case (its files named relative to the unit's
    root), the run's reference target and the case's timeout."""

    case: Case
    reference: str
    timeout: float


def _moved(case: Case, move: Callable[[str], str]) -> Case:
    """``case`` with ``move`` applied to every file it names: its model
    (:meth:`SourceRef.moved`), its reference's, its inputs and its plugin files."""
    options = case.options
    reference = options.reference_source
    if reference is not None:
        moved = SourceRef(*reference).moved(move)
        reference = (moved.kind, moved.location)
    plugins = tuple(move(p) if p.endswith(".py") else p for p in options.plugins)
    return replace(case, ref=case.ref.moved(move),
                   inputs_path=move(case.inputs_path) if case.inputs_path else "",
                   options=replace(options, reference_source=reference, plugins=plugins))


def _named_files(case: Case) -> list[Path]:
    """Every file ``case`` names, resolved."""
    found: list[Path] = []

    def collect(path: str) -> str:
        found.append(Path(path).resolve())
        return path

    _moved(case, collect)
    return found


def cell_unit_of(case: Case, reference: str, timeout: float) -> Unit:
    """The ``run-cell`` unit of one cell: its files named relative to their common folder."""
    files = _named_files(case)
    root = Path(os.path.commonpath(files)) if files else Path.cwd()
    if root in files:
        root = root.parent
    relative = _moved(case, lambda p: Path(p).resolve().relative_to(root).as_posix())
    names = sorted({file.relative_to(root).as_posix() for file in files})
    return Unit(CELL_KIND, encode(CellArguments(relative, reference, timeout)), paths=names,
                root=root,
                label=f"{case.target} {Path(case.inputs_path).name}")


def cell_unit(arguments: CellArguments, root: Path, workdir: Path,
              isolator: Isolator) -> dict[str, Any]:
    """Handler of ``run-cell`` units: the cell evaluated as
    :meth:`Workbench.evaluate_cell` does, its verdict as JSON and its outputs as a base64
    ``.npz``."""
    case = _moved(arguments.case, lambda name: str(root / name))
    use_plugins(case.options.plugins, timeout=arguments.timeout, isolator=isolator)
    started = time.perf_counter()
    outcome = evaluate(case, reference=arguments.reference,
                       isolator=isolator, timeout=arguments.timeout)
    if outcome.verdict.timings.total is None:
        outcome.verdict.timings.total = time.perf_counter() - started
    workdir.mkdir(parents=True, exist_ok=True)
    save_npz(workdir / "arrays.npz", outcome.arrays)
    return {"verdict": outcome.verdict.to_dict(),
            "arrays": base64.b64encode((workdir / "arrays.npz").read_bytes()).decode()}


def _received(result: UnitResult, target: str, folder: Path
              ) -> tuple[Verdict, dict[str, np.ndarray]]:
    """A unit's verdict and arrays; an ``error`` verdict when no attempt finished."""
    if result.value is None:
        verdict = Verdict(Status.ERROR, Stage.PREDICT, LOST_SIGNATURE, target=target,
                          message=f"no verdict: {result.error}")
        verdict.process.worker_attempts = result.describe_attempts()
        return verdict, {}
    verdict = Verdict.from_dict(result.value["verdict"])
    if result.worker and result.worker != LOCAL:
        verdict.provenance["worker"] = result.worker
    if len(result.attempts) > 1:
        verdict.process.worker_attempts = result.describe_attempts()
    folder.mkdir(parents=True, exist_ok=True)
    npz = folder / "arrays.npz"
    npz.write_bytes(base64.b64decode(result.value["arrays"]))
    return verdict, load_npz(npz)


def run_cells(bench: Workbench, keys: Sequence[CellKey], runner: Runner,
              progress: Callable[[str], None] = lambda _msg: None) -> None:
    """Evaluate the cells of ``keys`` not cached yet on ``runner``'s executor, into the
    workbench's cache
    (each key's path must have converted for its target: :meth:`Workbench.paths_of`)."""
    pending = [key for key in dict.fromkeys(keys) if not bench.cached(key)]
    units = [cell_unit_of(bench.case(key.target, key.path, key.inputs), str(bench.reference),
                          bench.timeouts.predict) for key in pending]
    received = bench.workdir / "received"

    done: list[CellKey] = []

    def store(index: int, result: UnitResult) -> None:
        key = pending[index]
        bench.store(key, *_received(result, str(key.target), received / str(index)))
        done.append(key)
        progress(f"evaluated {len(done)}/{len(pending)} cells on {runner.executor.name}")

    runner.map_units(units, store)
