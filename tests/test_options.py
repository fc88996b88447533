"""Every option of a command and every keyword of its API function comes from the option
table (:mod:`nebisect.options.table`): what typer registered, the API's signature and
its typed keywords are compared with the table, so an option declared anywhere else — or
a table entry one side lost — fails here."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from typing import Any, get_type_hints

import pytest
import typer

from nebisect import api
from nebisect.api.bisect import BisectKeywords
from nebisect.api.fix import FixKeywords
from nebisect.api.fuzz import FuzzKeywords
from nebisect.api.lint import LintKeywords
from nebisect.api.replay import ReplayKeywords
from nebisect.api.run import RunKeywords
from nebisect.cli import app
from nebisect.options.commands import COMMANDS
from nebisect.options.run_table import RUN
from nebisect.options.table import Command

#: each command of the table → its API function and the TypedDict typing its keywords
API = {"run": (api.run, RunKeywords), "bisect": (api.bisect, BisectKeywords),
       "fuzz": (api.fuzz, FuzzKeywords), "lint": (api.lint, LintKeywords),
       "replay": (api.replay, ReplayKeywords), "fix apply": (api.fix, FixKeywords)}
#: the commands whose options declare no API keyword (no API function takes them)
CLI_ONLY = ("fix verify", "corpus add")
#: every ``--memory`` and ``--timeout`` of the CLI, by command (none declared elsewhere)
SHARED = ("--memory", "--timeout")


def _registered(name: str) -> Any:
    """The command typer built for ``name`` (``fix apply``: a subcommand; typer's own
    click classes)."""
    found: Any = typer.main.get_command(app)
    for part in name.split():
        found = found.commands[part]
    return found


def test_every_command_is_in_the_table_or_declares_neither_memory_nor_timeout() -> None:
    """A command outside the table declares no option the table shares."""
    named = {command.name for command in COMMANDS}
    assert set(API) | set(CLI_ONLY) == named
    root: Any = typer.main.get_command(app)

    def walk(group: Any, prefix: str) -> list[tuple[str, Any]]:
        found = []
        for name, command in group.commands.items():
            full = f"{prefix} {name}".strip()
            found += walk(command, full) if hasattr(command, "commands") else [(full, command)]
        return found

    for name, command in walk(root, ""):
        if name not in named:
            flags = {flag for param in command.params for flag in param.opts}
            assert not flags & set(SHARED), name


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_cli_parameter_is_the_tables(command: Command) -> None:
    params = _registered(command.name).params
    assert [p.name for p in params if p.name != "help"] == [o.name for o in command.options]
    for param in params:
        if param.name == "help":
            continue
        option = command.option(str(param.name))
        assert param.help == option.help
        assert tuple(param.opts) == (option.flags or (option.name,))
        assert param.show_default == option.show_default
        if option.flags:
            assert param.envvar == option.envvar
            assert param.metavar == option.metavar


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_api_keyword_is_the_tables(command: Command) -> None:
    if command.name in CLI_ONLY:
        return
    function, typed = API[command.name]
    keyword_only = {name: p for name, p in inspect.signature(function).parameters.items()
                    if p.kind is inspect.Parameter.KEYWORD_ONLY}
    for option in command.api_options:
        assert keyword_only[option.name].default == (
            inspect.Parameter.empty if option.required else option.default)
        assert keyword_only[option.name].annotation == option.api_type
        assert f"``{option.name}`` (``{'/'.join(option.flags)}``" in (function.__doc__ or "")
    assert get_type_hints(typed) == {o.name: o.api_type for o in command.api_options}


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'budgets'"):
        api.run("model.mlpackage", budgets=3)  # type: ignore[call-arg]


def test_run_help_lists_every_option() -> None:
    env = dict(os.environ, COLUMNS="200", TERM="dumb", NO_COLOR="1")
    text = subprocess.run([sys.executable, "-m", "nebisect", "run", "--help"],
                          capture_output=True, text=True, env=env, check=True).stdout
    for option in RUN.options:
        for flag in option.flags:
            assert flag in text, flag
