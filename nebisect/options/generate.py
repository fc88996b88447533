"""The CLI's command signatures and the API's keyword arguments, made from the table.

typer reads a command's options from its function's signature; the API's callers (and
``help()``) read its keywords from the function's signature and docstring. Both come
from :mod:`nebisect.options.table` here, and :func:`keywords` fills and checks what an
API call gave against the same table, so an option is declared in one place.
"""

from __future__ import annotations

import inspect
import os
import reprlib
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, Union, get_args, get_origin

import typer

from nebisect.errors import ArgumentError
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
        lines.append(f"``{option.name}`` (``{'/'.join(option.flags)}``, {default}; "
                     f"{spelled(option.api_type)}): {option.help}")
    return "\n".join(lines)


def keywords(command: Command, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every API keyword of ``command``: ``given``'s, the table's default for the rest
    (and for one given as None: not given); a keyword the table does not know is the
    ``TypeError`` Python raises for one.

    This is where an API call's values are checked, for every function: a value of no
    type the option's ``api_type`` names is an :class:`~nebisect.errors.ArgumentError`
    naming the keyword; one value where the CLI takes a repeatable option is that option
    given once (``timeout=30`` is ``--timeout 30``, seconds). The option's own parser
    then checks the value as it checks the CLI's."""
    known = {option.name: option for option in command.api_options}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{command.name}() got an unexpected keyword argument {unknown[0]!r}")
    missing = [name for name, option in known.items()
               if option.required and given.get(name) is None]
    if missing:
        raise TypeError(f"{command.name}() missing a required keyword argument: "
                        f"{missing[0]!r}")
    return {name: option.default if given.get(name) is None else _as_cli(option, given[name])
            for name, option in known.items()}


def _as_cli(option: Option, value: Any) -> Any:
    """``value`` of the API keyword ``option`` as the CLI's parser of it reads it."""
    if not accepts(option.api_type, value):
        raise ArgumentError(option.name, f"{option.name}={reprlib.repr(value)}: give "
                                         f"{spelled(option.api_type)}")
    if option.cli_type == list[str] and isinstance(value, (str, int, float)):
        return [value]
    return value


def accepts(annotation: Any, value: Any) -> bool:
    """Is ``value`` of the type ``annotation`` names? The annotations of the option
    table: classes (``bool`` is no ``int``, an ``int`` is a ``float``), unions,
    ``Sequence[X]`` (a list or tuple, not a string), ``os.PathLike[str]``, ``Any``."""
    if annotation is Any:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(accepts(member, value) for member in get_args(annotation))
    if origin is Sequence:
        (element,) = get_args(annotation) or (Any,)
        return (isinstance(value, Sequence) and not isinstance(value, (str, bytes))
                and all(accepts(element, item) for item in value))
    if origin is not None:
        return isinstance(value, origin)
    if isinstance(value, bool):
        return annotation is bool
    if annotation is float:
        return isinstance(value, (int, float))
    return isinstance(value, annotation)


#: how :func:`spelled` names a class of the option table's annotations
_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "True or False",
          os.PathLike: "a path", type(None): "None"}


def spelled(annotation: Any) -> str:
    """What ``annotation`` accepts, in words: ``a string, a number or a sequence of
    them``."""
    if annotation is Any:
        return "any value"
    members = (get_args(annotation) if get_origin(annotation) in (Union, types.UnionType)
               else (annotation,))
    words = [_WORDS.get(get_origin(member) or member, getattr(member, "__name__", str(member)))
             if get_origin(member) is not Sequence else "a list or tuple of them"
             for member in members]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
