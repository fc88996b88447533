"""Small packages and corpora for the corpus, replay and fix-verify tests.

The packages are one- or two-op ML programs saved with nebisect's own writer: the
``reduce_log_sum_exp`` over 32 channels that seed 000 reports (it collapses on
``sim:ane`` past x = log(65504/32) ≈ 7.62) and a plain softplus (its ``sim:ane`` cliff
is at ln 2^15 ≈ 10.4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected, NewCase
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools
from support import REPO


def _save(body: Any, shape: tuple[int, ...], path: Path) -> Path:
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    program = mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=types.fp16)],
                         opset_version=ct.target.iOS17)(body)
    save_program(program, path)
    return path


def lse_package(path: Path) -> Path:
    """x (1, 32) fp16 → reduce_log_sum_exp over the 32 channels (keep_dims)."""
    from coremltools.converters.mil import Builder as mb

    return _save(lambda x: mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True), (1, 32), path)


def softplus_package(path: Path) -> Path:
    """x (1, 16) fp16 → softplus."""
    from coremltools.converters.mil import Builder as mb

    return _save(lambda x: mb.softplus(x=x), (1, 16), path)


def filled(name: str, shape: tuple[int, ...], value: float) -> dict[str, np.ndarray]:
    return {name: np.full(shape, value, np.float32)}


def add(
    corpus: Corpus, package: Path, inputs: dict[str, np.ndarray], expected: Expected,
    *, target: str = "sim:ane", name: str = "", fixes: tuple[str, ...] = (),
    options: CaseOptions | None = None,
) -> str:
    """Add one case with an explicit expectation; its case id."""
    added = corpus.add(NewCase("mlpackage", str(package), target, inputs, expected, name=name,
                               fixes=list(fixes), options=options or CaseOptions()))
    return added.case.case_id


def shipped_package(name: str) -> Path:
    """The model of the shipped corpus case named ``name`` (case ids change with the
    schema; names do not)."""
    import json

    root = REPO / "corpus"
    for case in sorted(root.iterdir()):
        record = case / "case.json"
        if record.is_file() and json.loads(record.read_text()).get("name") == name:
            return case / "model.mlpackage"
    raise LookupError(f"no shipped corpus case named {name!r}")
