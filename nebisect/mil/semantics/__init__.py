"""Op semantics: the MIL op definitions, or what the Core ML runtime computes.

coremltools defines every MIL op twice over: in its op documentation and in the
``value_inference`` it constant-folds with at conversion time (numpy). Where the Core ML
runtime computes something else at predict time — published in coremltools issues and
pull requests — the simulator follows the runtime by default, so a converter bug whose
wrong output comes from the runtime's semantics fails on ``sim:*`` as it does on a Mac.

A :class:`Semantics` is data: the kernel variants it puts in front of the default
kernels. ``coreml`` (the default) selects the runtime variants registered in
:mod:`nebisect.mil.semantics.coreml`, each citing its source; it also applies the runtime's
published refusals (:mod:`nebisect.mil.semantics.rules`). ``spec`` selects none, i.e.
the op definition, which is also what coremltools' constant folding computes — so the
simulator's two settings reproduce both sides of a fold-versus-runtime disagreement.
Kernels never test the setting: the plan looks kernels up through the variants.
"""

from __future__ import annotations

from dataclasses import dataclass

from nebisect.registry import ImportOnce, Registry

#: What ``sim:*`` targets use unless the target spec says ``:spec``.
DEFAULT_SEMANTICS = "coreml"


@dataclass(frozen=True)
class Semantics:
    """A named choice of kernel variants, looked up before the default kernels."""

    name: str
    variants: tuple[str, ...]
    description: str
    #: whether the runtime's published refusals apply (:mod:`nebisect.mil.semantics.rules`)
    refusals: bool = False


#: The semantics by name; loading imports the modules registering the kernel variants.
SEMANTICS: Registry[str, Semantics] = Registry(
    "semantics", ImportOnce(lambda: ("nebisect.mil.semantics.coreml",))
)


def register_semantics(semantics: Semantics) -> Semantics:
    """Add a semantics to the registry; a duplicate name is an error."""
    return SEMANTICS.register(semantics.name, semantics)


def get_semantics(name: str) -> Semantics:
    """The semantics called ``name`` (its kernel variants registered); a user error else."""
    return SEMANTICS.get(name)


register_semantics(
    Semantics("spec", (), "the MIL op definitions (= coremltools' constant folding)")
)
register_semantics(
    Semantics("coreml", ("coreml",),
              "what the Core ML runtime computes and refuses, where published", refusals=True)
)
