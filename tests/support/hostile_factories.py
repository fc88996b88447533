"""Torch sources that misbehave while nebisect loads, converts or runs them.

Copied into each test's own directory and named as ``model.py:FACTORY``; every module
is one op. Imported only by nebisect's isolated children — never by the test process.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any

import torch

#: Set by :func:`wanders`: the directory its factory and forward move to.
ELSEWHERE = "elsewhere"


class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class Lgamma(torch.nn.Module):
    """Converts on neither torch path (coremltools has no lgamma), fast and cleanly."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x.abs() + 1.0)


class WandersOff(Lgamma):
    """Changes the working directory on every call, as careless user code does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.makedirs(ELSEWHERE, exist_ok=True)
        os.chdir(ELSEWHERE)
        return super().forward(x)


class SegfaultsInFloat64(Lgamma):
    """Fine at fp32; dereferences NULL when the float64 reference runs it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            ctypes.string_at(0)
        return super().forward(x)


class HangsWhileTraced(torch.nn.Module):
    """Eager calls return at once; tracing or exporting it never finishes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.jit.is_tracing() or torch.compiler.is_exporting():
            time.sleep(3600)
        return torch.relu(x)


class SegfaultsWhileTraced(Lgamma):
    """Eager calls work; tracing or exporting it dereferences NULL (as a C extension
    handed a fake tensor may)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.jit.is_tracing() or torch.compiler.is_exporting():
            ctypes.string_at(0)
        return super().forward(x)


def _spec(module: torch.nn.Module) -> dict[str, Any]:
    return {"module": module, "example_inputs": {"x": torch.ones(1, 4)}}


def exits_zero() -> dict[str, Any]:
    sys.exit(0)


def hard_exit_zero() -> dict[str, Any]:
    os._exit(0)


def hangs() -> dict[str, Any]:
    time.sleep(3600)
    return _spec(Relu())


def segfaults() -> dict[str, Any]:
    ctypes.string_at(0)
    return _spec(Relu())


def prints_to_stdout() -> dict[str, Any]:
    os.write(1, b"factory chatter on fd 1, not JSON\n")
    print("and more through sys.stdout")
    return _spec(Lgamma())


def wanders() -> dict[str, Any]:
    os.makedirs(ELSEWHERE, exist_ok=True)
    os.chdir(ELSEWHERE)
    return _spec(WandersOff())


def reference_segfaults() -> dict[str, Any]:
    return _spec(SegfaultsInFloat64())


def hangs_while_traced() -> dict[str, Any]:
    return _spec(HangsWhileTraced())


def segfaults_while_traced() -> dict[str, Any]:
    return _spec(SegfaultsWhileTraced())
