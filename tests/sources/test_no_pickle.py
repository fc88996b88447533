"""A ``.pt2`` holds pickles, and a pickle can run code: with ``--no-pickle``
(``$NEBISECT_NO_PICKLE``) a program whose weights torch stored with pickle is refused
before torch reads it, and one whose weights are raw bytes (what ``torch.export.save``
writes for a plain module) loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nebisect.errors import NebisectError
from nebisect.sources.torch_saved import load_saved


def _saved(path: Path, *, pickled: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``.pt2`` of a Linear layer; ``pickled``: its weights stored as torch stores a
    tensor subclass's, with ``torch.save``."""
    from torch.export.pt2_archive import _package

    program = torch.export.export(torch.nn.Linear(4, 2).eval(), (torch.ones(1, 4),))
    with monkeypatch.context() as patched:
        if pickled:
            patched.setattr(_package, "_should_use_pickle", lambda tensor: True)
        torch.export.save(program, str(path))
    return str(path)


def test_no_pickle_refuses_pickled_weights_and_loads_raw_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pickled = _saved(tmp_path / "pickled.pt2", pickled=True, monkeypatch=monkeypatch)
    raw = _saved(tmp_path / "raw.pt2", pickled=False, monkeypatch=monkeypatch)
    assert load_saved(pickled).module is not None  # torch itself unpickles them
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0")  # restored after the test
    monkeypatch.setenv("NEBISECT_NO_PICKLE", "1")
    with pytest.raises(NebisectError) as refused:
        load_saved(pickled)
    assert str(refused.value) == (
        f"{pickled}: weight 'weight' is stored as a pickle, which can run code when "
        "loaded; refused (--no-pickle, $NEBISECT_NO_PICKLE)")
    source = load_saved(raw)
    assert [tuple(t.shape) for t in source.example_inputs.values()] == [(1, 4)]


def test_replay_declares_no_pickle_once_with_its_environment_variable() -> None:
    from nebisect.options.replay_table import REPLAY
    from nebisect.sources.pickled import NO_PICKLE_ENV

    option = REPLAY.option("no_pickle")
    assert (option.flags, option.envvar, option.default) == (("--no-pickle",), NO_PICKLE_ENV,
                                                             False)
