"""Value families: the registry (``nebisect run --list-families``) and how to build them.

One small module per family registers its class with :func:`value_family`; a name
registered twice is an error. The engine (:mod:`nebisect.search.explore`) takes built
families, so it knows none of them.

API::

    value_family(name, description, priority=50)  # class decorator
    FAMILIES: Registry[str, type[Family]]          # name → class
    listing() -> list[tuple[str, str]]             # (name, one-line description), explore order
    default_names() -> list[str]                   # every family, in exploration order
    build(inputs: ModelInputs, names=None, seed=0) -> list[Family]
        # the named families (all by default) bound to one model's inputs, in the given
        # order; an unknown name is a NebisectError (one line, exit 2)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nebisect.inputs.families.base import (
    Family,
    InputSet,
    Member,
    ModelInputs,
    ParametricFamily,
    VariantFamily,
)
from nebisect.registry import ImportOnce, Registry, package_modules

__all__ = [
    "FAMILIES", "Family", "InputSet", "Member", "ModelInputs", "ParametricFamily",
    "VariantFamily", "build", "default_names", "listing", "value_family",
]

FAMILIES: Registry[str, type[Family]] = Registry(
    "value family", ImportOnce(package_modules(__name__, skip=("base",)))
)


def value_family(
    name: str, description: str, *, priority: int = 50
) -> Callable[[type[Family]], type[Family]]:
    """Register the decorated class as value family ``name`` (a duplicate is an error).

    ``priority`` orders the default exploration (lower first): the families that found
    the published cliffs come first, so a small budget reaches them.
    """

    def decorate(cls: type[Family]) -> type[Family]:
        cls.name, cls.description, cls.priority = name, description, priority
        return FAMILIES.register(name, cls)

    return decorate


def default_names() -> list[str]:
    """Every registered family, in exploration order."""
    return [name for name, _ in sorted(FAMILIES.items(), key=lambda kv: (kv[1].priority, kv[0]))]


def listing() -> list[tuple[str, str]]:
    """(name, description) of every family, in exploration order."""
    return [(name, FAMILIES.get(name).description) for name in default_names()]


def build(inputs: ModelInputs, names: Sequence[str] | None = None, seed: int = 0) -> list[Family]:
    """The families ``names`` (default: all) bound to ``inputs``, in that order."""
    chosen = default_names() if names is None else list(dict.fromkeys(names))
    classes = [FAMILIES.get(name) for name in chosen]
    return [cls(inputs, seed) for cls in classes]
