"""The API's keywords take ordinary Python values: the obvious numbers mean what the CLI
means (``timeout=30`` seconds, ``memory=2 << 30`` bytes, ``lengths=8``), and a value of
no type a keyword takes is a :class:`~nebisect.errors.NebisectError` naming the
keyword — never Python's ``TypeError`` or ``AttributeError`` from deep inside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from support import REPO

import nebisect
from nebisect.errors import NebisectError
from nebisect.options.table import MEMORY, TIMEOUT

EXAMPLE = str(REPO / "examples" / "logsumexp_ne.py") + ":model"


def _refused(call: Any, *args: Any, **kwargs: Any) -> NebisectError:
    with pytest.raises(NebisectError) as raised:
        call(*args, **kwargs)
    return raised.value


def test_ordinary_values_are_taken_or_refused_by_name(tmp_path: Path) -> None:
    # the obvious numbers are the CLI's (seconds, bytes, one length): taken, the call
    # goes on to the next check, a later option's
    assert "unknown target 'nope'" in str(_refused(
        nebisect.run, EXAMPLE, timeout=30, memory=2 << 30, reference="nope", progress=False))
    assert str(_refused(nebisect.run, EXAMPLE, timeout=30.0, lengths=8, steps=0,
                        progress=False)) == "--steps 0: give at least 1"
    # the rest name the keyword and what it takes
    for keyword, value in (("target", 5), ("seed", "x"), ("jobs", "x"), ("lengths", {8}),
                           ("memory", 2.5), ("timeout", object())):
        error = _refused(nebisect.run, EXAMPLE, progress=False, **{keyword: value})
        assert getattr(error, "argument", None) == keyword
        assert str(error).startswith(f"{keyword}=")
    assert str(_refused(nebisect.run, EXAMPLE, seed="x")) == "seed='x': give an integer"
    assert _refused(nebisect.run, EXAMPLE, memory="2<<30").args == (
        "--memory '2<<30': give a size such as 4G or 512M",)
    # save_torchscript: a module that is no TorchScript, a directory that does not exist
    module, example = torch.nn.Linear(4, 2), (torch.ones(1, 4),)
    error = _refused(nebisect.save_torchscript, module, example, tmp_path / "m.pt")
    assert getattr(error, "argument", None) == "module"
    assert "not TorchScript" in str(error)
    scripted = torch.jit.trace(module, example)
    error = _refused(nebisect.save_torchscript, scripted, example, tmp_path / "no" / "m.pt")
    assert str(error) == f"path {tmp_path / 'no' / 'm.pt'}: no directory {tmp_path / 'no'}"
    assert nebisect.save_torchscript(scripted, example, tmp_path / "m.pt").is_file()


def test_the_numbers_mean_seconds_bytes_and_lengths_and_the_docstrings_say_so() -> None:
    from nebisect.api.run import parse_lengths, run_invocation
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.generate import keywords, spelled
    from nebisect.options.run_table import RUN

    given = keywords(RUN, {"timeout": 30, "memory": 2 << 30, "lengths": 8})
    invocation = run_invocation(given)
    assert (invocation.timeouts, invocation.memory) == (Timeouts(30.0, 30.0, 30.0), 2 << 30)
    assert parse_lengths(given["lengths"]) == (8,)
    assert run_invocation(keywords(RUN, {"timeout": [30.0, "convert=600"]})).timeouts == (
        Timeouts(30.0, 600.0, 30.0))
    assert spelled(MEMORY.api_type) == "a string, an integer or None"
    assert spelled(TIMEOUT.api_type) == "a string, a number, a list or tuple of them or None"
    assert "``memory`` (``--memory``, default ``None``; a string, an integer or None)" in (
        nebisect.run.__doc__ or "")
    assert "a number of bytes" in MEMORY.help
