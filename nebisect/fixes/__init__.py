"""Fix registry: named rewrites that cure a failure signature, verified against the corpus.

A fix lives at one of two levels (DESIGN.md §8):

* ``graph`` — a MIL graph pass (:class:`~nebisect.fixes.base.GraphFix`), a guard-clause
  pattern matcher in the style of coremltools' ``@register_pass`` passes, applied to a
  loaded or converted program;
* ``convert`` — converter overrides (:class:`~nebisect.fixes.base.ConverterFix`) that are
  active while a torch source is converted.

Each fix module in this package registers one class with :func:`register_fix`; the
modules are imported on first lookup, so ``nebisect fix list`` needs neither torch nor
coremltools. Duplicate names are an error, unknown names a one-line
:class:`~nebisect.errors.NebisectError` that lists the known ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from nebisect.fixes.base import ConverterFix, Fix, GraphFix
from nebisect.registry import ImportOnce, Registry, package_modules

__all__ = [
    "FIXES", "ConverterFix", "Fix", "GraphFix", "get_fix", "register_fix", "registered_fixes",
    "resolve_fixes",
]

#: Modules of this package that are machinery, not fixes.
_SUPPORT_MODULES = frozenset({"base", "apply", "verify"})

#: Fix classes by name; loading imports the fix modules of this package.
FIXES: Registry[str, type[Fix]] = Registry(
    "fix", ImportOnce(package_modules(__name__, skip=_SUPPORT_MODULES))
)


def register_fix(cls: type[Fix]) -> type[Fix]:
    """Class decorator: register a fix under its ``name`` (unique)."""
    if not cls.name or cls.level not in ("graph", "convert"):
        raise ValueError(f"fix class {cls.__name__} needs a name and a level graph|convert")
    return FIXES.register(cls.name, cls)


def registered_fixes() -> dict[str, type[Fix]]:
    """Every registered fix class by name, in name order."""
    return dict(FIXES.items())


def get_fix(name: str) -> Fix:
    """An instance of the fix registered under ``name``."""
    return FIXES.get(name)()


def resolve_fixes(names: Iterable[str] | None) -> list[Fix]:
    """Instances for ``names`` (all fixes when ``None``), deduplicated, order kept."""
    chosen = list(registered_fixes()) if names is None else list(dict.fromkeys(names))
    return [get_fix(name) for name in chosen]
