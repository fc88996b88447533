"""``--converter-setup``: the user's ``module:function`` calls made before converting.

A setup call runs in the conversion child (:func:`nebisect.sources.convert.convert_job`);
one that does not resolve there — a misspelt module or function — would fail every
conversion, and every sample would report it as the converter's failure. So
:func:`check_converter_setup` resolves each call once, in an isolated child (the user's
module is code: it is never imported in nebisect's own process), before any work, and a
call that does not resolve is a usage error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nebisect.errors import NebisectError
from nebisect.isolation.needs import check_function_name
from nebisect.sources.loading import ChildSubject, describe_in_child, first_line, record_verdict
from nebisect.sources.torch_module import TORCH_AND_COREMLTOOLS
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.isolate import Isolator

OPTION = "--converter-setup"
SETUP_SUBJECT = ChildSubject("the converter setup", "resolving its function")


@dataclass(frozen=True)
class SetupArguments:
    """The argument of :func:`setup_job`: one ``module:function`` call."""

    call: str


def setup_function(call: str) -> Callable[[], Any]:
    """The function ``module:function`` names, its module imported (not called); what
    the import or the lookup raises propagates."""
    module, _, name = call.partition(":")
    function = getattr(importlib.import_module(module), name)
    if not callable(function):
        raise TypeError(f"{call} is not a function")
    return function


def setup_job(arguments: SetupArguments) -> Verdict:
    """Child side: resolve the call (:func:`setup_function`) without making it; what
    fails is the rest of the user's error line."""

    def build() -> dict[str, Any]:
        try:
            setup_function(arguments.call)
        except Exception as exc:
            raise NebisectError(f"{type(exc).__name__}: {first_line(str(exc))}") from None
        return {}

    return record_verdict(build)


def check_converter_setup(calls: Iterable[str], *, timeout: float,
                          isolator: Isolator | None = None) -> None:
    """Each call's form, then each call resolved in a child (bounded by ``timeout``): a
    one-line NebisectError naming the call that does not resolve."""
    calls = list(calls)
    for call in calls:
        check_function_name(call, OPTION)
    for call in calls:
        describe_in_child(f"{__name__}:setup_job", SetupArguments(call),
                          label=f"{OPTION} {call}", subject=SETUP_SUBJECT, timeout=timeout,
                          needs=TORCH_AND_COREMLTOOLS, isolator=isolator)
