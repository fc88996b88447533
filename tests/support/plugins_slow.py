"""Test-only targets for the signal tests: work that is visibly busy until it is stopped.

``sim:slow`` counts its predictions in ``$NEBISECT_TEST_CALLS`` (one byte appended per
call, so concurrent case processes count correctly), creates ``$NEBISECT_TEST_READY``
once ``$NEBISECT_TEST_READY_AFTER`` (default 1) calls have started, and then sleeps far
longer than any test waits: a test sends its signal when the ready file exists.
With ``$NEBISECT_TEST_AFTER`` set, it first waits for that file: ``sim:quick`` (plain
sim:fp16) creates it once its own prediction is made, so a test knows that case is done.
``sim:crash-then-slow`` segfaults on its first ``$NEBISECT_TEST_CRASHES`` calls (a
finding for the fuzzer, re-confirmed in a fresh process) and behaves like ``sim:slow``
after that.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.targets.base import Prediction
from nebisect.targets.registry import register_target
from nebisect.targets.sim import SimFP16

SLEEP_SECONDS = 3600


def _count_call() -> int:
    """This call's number, counted across every case process of the test."""
    fd = os.open(os.environ["NEBISECT_TEST_CALLS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, b".")
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _ready_then_sleep(calls: int) -> None:
    after = os.environ.get("NEBISECT_TEST_AFTER")
    while after and not Path(after).exists():
        time.sleep(0.01)
    if calls >= int(os.environ.get("NEBISECT_TEST_READY_AFTER", "1")):
        ready = Path(os.environ["NEBISECT_TEST_READY"])
        staging = ready.with_name(f".{ready.name}.{os.getpid()}")
        staging.write_text(str(os.getpid()))
        staging.replace(ready)
    time.sleep(SLEEP_SECONDS)


@register_target("sim:slow")
class SlowTarget(SimFP16):
    """Test target: announces itself, then sleeps until killed."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        _ready_then_sleep(_count_call())
        raise AssertionError("unreachable: the sleep outlasts every test")


@register_target("sim:quick")
class QuickTarget(SimFP16):
    """Test target: sim:fp16, announcing each prediction made in ``$NEBISECT_TEST_AFTER``."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        prediction = super().predict(model, inputs, intermediates=intermediates)
        Path(os.environ["NEBISECT_TEST_AFTER"]).touch()
        return prediction


@register_target("sim:crash-then-slow")
class CrashThenSlowTarget(SimFP16):
    """Test target: a NULL dereference for the first calls, then a sleep until killed."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        calls = _count_call()
        if calls <= int(os.environ.get("NEBISECT_TEST_CRASHES", "0")):
            ctypes.string_at(0)
        _ready_then_sleep(calls - int(os.environ.get("NEBISECT_TEST_CRASHES", "0")))
        raise AssertionError("unreachable: the sleep outlasts every test")


@register_target("sim:slow-once")
class SlowOnceTarget(SimFP16):
    """Test target: the first call of the test announces itself and sleeps until killed
    (a worker to kill under it); every later call is plain sim:fp16."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        if _count_call() == 1:
            _ready_then_sleep(1)
        return super().predict(model, inputs, intermediates=intermediates)
