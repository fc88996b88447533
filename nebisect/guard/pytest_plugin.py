"""pytest plugin: ``pytest --nebisect-corpus corpus/`` runs every corpus case as a test.

Each case becomes one item named by its case id, judged exactly as ``nebisect replay``
judges it: a known bug that still reproduces with its recorded signature passes, a
regression fails with the reason, a case for a target unavailable here is skipped with
the reason, and a damaged case directory is an error (it no longer guards anything).
So a project can put its Core ML guard cases into its own test run.

The plugin is registered through the ``pytest11`` entry point and does nothing unless
the option is given; nothing heavy is imported before that.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_STATE = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nebisect", "nebisect corpus replay")
    group.addoption(
        "--nebisect-corpus", action="append", default=[], metavar="DIR",
        help="Run every case of this nebisect corpus as a test (repeatable).",
    )
    group.addoption(
        "--nebisect-target", action="append", default=[], metavar="SPEC",
        help="Only corpus cases recorded for these targets (globs like 'sim:*').",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Add every corpus directory to what the session collects (beside testpaths)."""
    roots = [str(Path(root)) for root in config.getoption("nebisect_corpus")]
    config.args = [*config.args, *(r for r in roots if r not in config.args)]


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    roots = {Path(root).resolve() for root in parent.config.getoption("nebisect_corpus")}
    if path.resolve() in roots:
        return CorpusCollector.from_parent(parent, path=path)
    return None


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state:
        state["runner"].close()
        state["scratch"].cleanup()


class CorpusRegression(Exception):
    """A corpus case that no longer behaves as recorded."""


class CorpusCollector(pytest.Directory):
    """One corpus directory: an item per case, an error item per damaged entry."""

    def collect(self) -> Iterator[pytest.Item]:  # type: ignore[override]
        from nebisect.corpus import Corpus
        from nebisect.guard.replay import selected

        scan = Corpus(self.path).scan()
        targets = self.config.getoption("nebisect_target")
        for case in scan.cases:
            if selected(case, targets):
                yield CorpusCaseItem.from_parent(self, name=case.case_id, case=case)
        for problem in scan.problems:
            if problem.damaged:
                yield DamagedCaseItem.from_parent(self, name=problem.path.name,
                                                  reason=problem.reason)


class CorpusCaseItem(pytest.Item):
    """One case, replayed in isolation and held to its expectation."""

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        from nebisect.guard.replay import replay_case

        state = _state(self.config)
        result = replay_case(self.case, state["runner"].isolator,
                             Path(state["scratch"].name))
        if result.outcome == "skipped":
            pytest.skip(result.reason)
        if result.outcome == "regression":
            raise CorpusRegression(f"{result.label}: {result.reason}\n{result.verdict.message}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CorpusRegression):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, None, str]:
        record = self.case.record
        return self.case.path, None, f"nebisect case {record.label} on {record.target}"


class DamagedCaseItem(pytest.Item):
    """A corpus entry that failed verification (tampered, truncated, half-written)."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        raise CorpusRegression(f"damaged corpus case {self.name}: {self.reason}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[str, None, str]:
        return self.name, None, f"damaged nebisect case {self.name}"


def _state(config: pytest.Config) -> dict[str, Any]:
    """One runner and scratch directory for the whole session (closed at unconfigure)."""
    state = config.stash.get(_STATE, None)
    if state is None:
        from nebisect.executors.runner import Runner

        state = {"runner": Runner(local=True),
                 "scratch": tempfile.TemporaryDirectory(prefix="nebisect-pytest-")}
        config.stash[_STATE] = state
    return state
