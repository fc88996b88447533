"""The CLI's command signatures and the API's keyword arguments, made from the table.

typer reads a command's options from its function's signature; the API's callers (and
``help()``) read its keywords from the function's signature and docstring. Both come
from :mod:`nebisect.options.table` here, and :func:`keywords` fills and checks what an
API call gave against the same table, so an option is declared in one place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import typer

from nebisect.options.table import Command, Option

Function = TypeVar("Function", bound=Callable[..., Any])


def typer_default(option: Option) -> Any:
    """The ``typer.Argument`` / ``typer.Option`` that declares ``option`` to typer."""
    if option.argument:
        return typer.Argument(option.default, help=option.help, metavar=option.metavar,
                              show_default=option.show_default)
    return typer.Option(option.default, *option.flags, help=option.help,
                        metavar=option.metavar, envvar=option.envvar,
                        show_default=option.show_default)


def cli_command(command: Command, body: Callable[..., None]) -> Callable[..., None]:
    """A function typer registers as ``command``: every option of the table's
    ``command`` as its parameters, in the table's order, calling ``body`` with them by
    name."""
    def invoked(**values: Any) -> None:
        body(**values)

    invoked.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter(option.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          default=typer_default(option), annotation=option.cli_type)
        for option in command.options])
    invoked.__annotations__ = {option.name: option.cli_type for option in command.options}
    invoked.__name__ = invoked.__qualname__ = command.name.replace(" ", "_")
    invoked.__module__ = body.__module__
    invoked.__doc__ = body.__doc__
    return invoked


def api_function(command: Command) -> Callable[[Function], Function]:
    """Decorate the API function of ``command``: its ``**options`` become the table's
    keyword-only parameters (with their defaults and accepted types) in its signature,
    and its docstring ends with each one's help."""
    def decorate(function: Function) -> Function:
        own = inspect.signature(function)
        kept = [parameter for parameter in own.parameters.values()
                if parameter.kind is not inspect.Parameter.VAR_KEYWORD]
        function.__signature__ = own.replace(parameters=[  # type: ignore[attr-defined]
            *kept, *(inspect.Parameter(
                option.name, inspect.Parameter.KEYWORD_ONLY, annotation=option.api_type,
                default=inspect.Parameter.empty if option.required else option.default)
                for option in command.api_options)])
        function.__doc__ = f"{inspect.cleandoc(function.__doc__ or '')}\n\n{_described(command)}"
        return function

    return decorate


def _described(command: Command) -> str:
    """The options part of an API docstring: each keyword, its CLI flag and help."""
    lines = [f"Options (the keywords of ``nebisect {command.name}``'s options):", ""]
    for option in command.api_options:
        default = "required" if option.required else f"default ``{option.default!r}``"
        lines.append(f"``{option.name}`` (``{'/'.join(option.flags)}``, {default}): "
                     f"{option.help}")
    return "\n".join(lines)


def keywords(command: Command, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every API keyword of ``command``: ``given``'s, the table's default for the rest
    (and for one given as None: not given); a keyword the table does not know is the
    ``TypeError`` Python raises for one."""
    known = {option.name: option for option in command.api_options}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{command.name}() got an unexpected keyword argument {unknown[0]!r}")
    missing = [name for name, option in known.items()
               if option.required and given.get(name) is None]
    if missing:
        raise TypeError(f"{command.name}() missing a required keyword argument: "
                        f"{missing[0]!r}")
    return {name: option.default if given.get(name) is None else given[name]
            for name, option in known.items()}
