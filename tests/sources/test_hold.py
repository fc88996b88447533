"""Which torch sources a template holds built: those whose build is worth a template.

A held source costs a template of its own (a fresh interpreter importing torch and
coremltools, kept alive); it saves each child the build. The description measures the
build in its child; :func:`held_needs` holds a source that took at least
``HOLD_FROM_SECONDS`` and one this process never described.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nebisect.isolate import Isolator, Needs
from nebisect.sources import torch as torch_sources
from nebisect.sources.torch import (
    HOLD_FROM_SECONDS,
    TorchDescription,
    describe_torch,
    held_needs,
)
from nebisect.sources.torch_load import holding

FACTORY = """
import time
import torch

def model():
    time.sleep({seconds})
    return {{"module": torch.nn.Tanh(), "example_inputs": (torch.ones(2, 3),)}}
"""


def test_the_decision_follows_the_measured_build(monkeypatch: pytest.MonkeyPatch) -> None:
    described = {(location, "sha"): TorchDescription(location, [], build_seconds=seconds)
                 for location, seconds in (("/m/one_op.py:model", HOLD_FROM_SECONDS / 50),
                                           ("/m/real.py:model", 1.5))}
    monkeypatch.setattr(torch_sources, "_described", described)
    assert held_needs("/m/one_op.py:model") == Needs()
    assert held_needs("/m/real.py:model") == holding("/m/real.py:model")
    # never described here (a worker, a replayed case): held, as always
    assert held_needs("/m/other.py:model") == holding("/m/other.py:model")


def test_the_description_measures_the_factory(tmp_path: Path) -> None:
    slow, quick = tmp_path / "slow.py", tmp_path / "quick.py"
    slow.write_text(textwrap.dedent(FACTORY.format(seconds=0.3)))
    quick.write_text(textwrap.dedent(FACTORY.format(seconds=0)))
    with Isolator() as isolator:
        slow_built = describe_torch(f"{slow}:model", timeout=120, isolator=isolator)
        quick_built = describe_torch(f"{quick}:model", timeout=120, isolator=isolator)
    assert slow_built.build_seconds >= 0.3 > quick_built.build_seconds > 0
    assert held_needs(slow_built.location) == holding(slow_built.location)
    expected = Needs() if quick_built.build_seconds < HOLD_FROM_SECONDS else holding(
        quick_built.location)
    assert held_needs(quick_built.location) == expected
