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
    # the obvious numbers are the CLI's: seconds, bytes, one length
    for timeout in (30, 30.0):
        result = nebisect.run(EXAMPLE, timeout=timeout, memory=2 << 30, lengths=8,
                              explore="none", target="sim:fp32", progress=False)
        assert result.ok
        assert {r.input_set.name for r in result.report.rows} == {"length 8"}
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


def test_the_docstrings_say_what_each_keyword_takes() -> None:
    from nebisect.options.generate import spelled

    assert spelled(MEMORY.api_type) == "a string, an integer or None"
    assert spelled(TIMEOUT.api_type) == "a string, a number, a list or tuple of them or None"
    assert "``memory`` (``--memory``, default ``None``; a string, an integer or None)" in (
        nebisect.run.__doc__ or "")
    assert "a number of bytes" in MEMORY.help
