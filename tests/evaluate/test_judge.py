"""Judging precision follows what the program declares, not only the target's name.

coremltools converts to FLOAT16 by default: fp32 inputs, a cast to fp16, the math in
fp16, a cast back. Core ML's CPU (and sim:fp32, which follows its typed execution)
stores those values at fp16, so judging the outputs in fp32 ULPs calls ordinary fp16
rounding a failure — on the commonest kind of package users have.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from support import REPO

from nebisect.evaluate.judge import _computes_in_fp16
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools
from nebisect.sources.artifact import Artifact


def _lse(path: Path, *, fp16_inside: bool) -> Path:
    """x (1, 32, 4) fp32 → [cast fp16] → reduce_log_sum_exp over the channels → fp32."""
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    def body(x: object) -> object:
        if not fp16_inside:
            return mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True)
        half = mb.cast(x=x, dtype="fp16")
        return mb.cast(x=mb.reduce_log_sum_exp(x=half, axes=[1], keep_dims=True),
                       dtype="fp32")

    program = mb.program(input_specs=[mb.TensorSpec(shape=(1, 32, 4), dtype=types.fp32)],
                         opset_version=ct.target.iOS17)(body)
    save_program(program, path)
    return path


def test_a_program_computing_in_fp16_between_casts_is_judged_in_fp16(tmp_path: Path) -> None:
    package = _lse(tmp_path / "lse16.mlpackage", fp16_inside=True)
    assert _computes_in_fp16(Artifact("mlpackage", str(package)))
    assert not _computes_in_fp16(Artifact("mlpackage",
                                          str(_lse(tmp_path / "lse32.mlpackage",
                                                   fp16_inside=False))))
    inputs = tmp_path / "x.npz"
    rng = np.random.default_rng(0)
    np.savez(inputs, x=rng.normal(0, 2, (1, 32, 4)).astype(np.float32))
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(package),
                           "--explore", "none", "--inputs", str(inputs), "-t", "sim:fp32",
                           "-t", "sim:fp16"], capture_output=True, text=True, timeout=600,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all targets agree with the reference" in done.stdout
