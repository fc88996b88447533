"""Imported once by the isolation template (fork) or worker (persistent) before fuzz cases.

A forked child inherits everything its template imported *and initialised*. Fuzz cases
would otherwise pay, in every child, for loading the op specs (and Hypothesis with
them), the simulator's kernel families and coremltools' builder on first use — ~100 ms
against the ~2 ms the case itself needs — and then for every lazily built cache on the
way (op registries, compiled plans, numpy's npz writer): a fresh child allocates them
anew, and each page it writes costs a copy-on-write fault.

Importing this module therefore rehearses one whole case per simulator precision, the
same code path a child takes (:func:`nebisect.evaluate.judge.evaluate_job` on a builder case,
then the result written as npz), in a temporary directory it removes again. Measured on
2 cores, fork mode: 20.4 → 15.4 ms of CPU per fuzz case, 1 920 → 1 470 page faults in
the child (``bench/fuzz.py``). Only the simulator runs here — never a device target:
the template must stay a plain numpy process that is safe to fork.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from nebisect.arrays import save_npz, sha256_arrays
from nebisect.case import CaseOptions
from nebisect.evaluate.judge import EvaluateArguments, evaluate_job
from nebisect.fuzzing.subject import builder_case
from nebisect.mil.kernels import kernel_ops
from nebisect.opspecs.ops import registered_ops
from nebisect.targets.spec import REFERENCE_TARGET

#: One target per simulator precision a fuzz campaign runs on (the profile included).
REHEARSED_TARGETS = ("sim:fp16", "sim:fp16-naive", "sim:fp32", "sim:ane")

_PROGRAM = {"op": "reduce_sum", "dtype": "fp16", "inputs": {"x": [2, 3]},
            "params": {"axes": [-1], "keep_dims": False}, "wrap": "none"}


def rehearse() -> None:
    """Evaluate one small reduction on each rehearsed target, as a child would."""
    arrays = {"x": np.linspace(-1.0, 1.0, 6, dtype=np.float16).reshape(2, 3)}
    with tempfile.TemporaryDirectory(prefix="nebisect-warm-") as scratch:
        inputs = Path(scratch) / "inputs.npz"
        save_npz(inputs, arrays)
        for target in REHEARSED_TARGETS:
            case = builder_case(_PROGRAM, target, inputs, sha256_arrays(arrays), CaseOptions())
            verdict, outputs = evaluate_job(EvaluateArguments(case.to_dict(), REFERENCE_TARGET))
            verdict.to_json()
            save_npz(Path(scratch) / "outputs.npz", outputs)


registered_ops()
kernel_ops()
rehearse()
