"""What a job's process must hold before the job starts, declared once by the job.

A job names its :class:`Needs` — the modules to import, the heavy optional
dependencies to keep out, the warm-up hooks that initialise what every child would
otherwise build lazily, the calls whose result every child inherits — and the isolator
does the rest: a fork-mode template is started (ahead, from a hint of the work to come:
:meth:`~nebisect.isolation.isolator.Isolator.expect`) with exactly those, and serves
every later job its needs are covered by. Domain code never names a template.

Why blocks exist: importing coremltools drags in torch (about 400 MB, seconds of CPU),
and with it transformers and scipy, which a simulator-only child never touches and
which make every fork copy a far larger process; blocked, they raise ImportError and
coremltools treats them as not installed (:data:`BLOCK_GROUPS`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from nebisect.codec import Form, Record
from nebisect.errors import NebisectError

#: A blocked name keeps each of these out of the process unless the same needs import
#: it: 7.0 → 3.6 ms per fork + exit of a simulator template on a 2-core VM with torch,
#: transformers and scipy blocked.
BLOCK_GROUPS: dict[str, tuple[str, ...]] = {
    "torch": ("torch", "torchvision", "torchaudio", "torchao", "executorch"),
    "sklearn": ("sklearn",),
    "transformers": ("transformers",),
    "scipy": ("scipy",),
}

#: nebisect's own modules cost milliseconds: a template imports (and warms) a job's own
#: module before its first child anyway, so they never decide which template serves it.
OWN_PACKAGE = "nebisect."


def check_function_name(text: str, what: str) -> None:
    """``text`` must name a function as ``package.module:function`` (a job's, a hook's)."""
    module, sep, name = text.partition(":")
    if not (module and sep and name):
        raise NebisectError(f"{what} {text!r} must look like 'package.module:function'")


@dataclass(frozen=True)
class Hold(Record):
    """A call a template makes once, after its imports: ``function(argument)``, so that
    every child it forks inherits what the call built (a torch source's module, built
    once by the template that runs its reference). User code may run here: its output
    goes nowhere and a failure is logged, not fatal — the child that needs the result
    builds it again and reports its own failure as its verdict."""

    function: str
    argument: str

    def __post_init__(self) -> None:
        check_function_name(self.function, "held call")


@dataclass(frozen=True)
class Needs(Record):
    """What a job's child must have in its process; a template serves the jobs whose
    needs it covers (:meth:`covers`).

    ``imports``: modules imported once in the template instead of in every child.
    ``blocks``: modules kept out of the process (a name of :data:`BLOCK_GROUPS` stands for
    its group). ``warm``:
    ``"module:function"`` hooks a template calls once, before forking the first child of
    a job that names them (registries, a rehearsed conversion); they cost a template
    that never serves such a job nothing, and do not decide which template serves one.
    ``holds``: calls made at start-up whose result every child inherits.
    """

    json_form: ClassVar[Form] = Form(what="need", omit_defaults=True)

    imports: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    warm: tuple[str, ...] = ()
    holds: tuple[Hold, ...] = ()

    def __post_init__(self) -> None:
        for text in self.warm:
            check_function_name(text, "warm-up hook")
        for name in ("imports", "blocks", "warm"):
            object.__setattr__(self, name, tuple(sorted(set(getattr(self, name)))))
        object.__setattr__(self, "holds", tuple(sorted(
            set(self.holds), key=lambda hold: (hold.function, hold.argument))))

    def adding(self, other: Needs) -> Needs:
        """These needs with ``other``'s imports, warm-ups and holds added, blocks kept:
        a job that also wants what ``other`` preloads in the same kind of process."""
        return replace(self, imports=self.imports + other.imports,
                       warm=self.warm + other.warm, holds=self.holds + other.holds)

    @classmethod
    def serving(cls, *parties: Needs) -> Needs:
        """One child serving several parties (a target and its reference): imports,
        warm-ups and holds add up; a block survives only if every party asks for it — a
        simulator target blocks torch, a torch reference runs user code that may import
        it, so their child blocks nothing of the two."""
        combined = cls()
        for party in parties:
            combined = combined.adding(party)
        blocked = set.intersection(*(set(p.blocks) for p in parties)) if parties else set()
        return replace(combined, blocks=tuple(blocked))

    def covers(self, job: Needs) -> bool:
        """Can a template started with these needs run a job that has ``job``?

        It can when it has imported every third-party module the job names, made every
        call the job holds and blocks exactly what the job blocks: a module imported
        beyond the job's is harmless (the job's child would import it anyway, or never
        touch it), a block beyond the job's is not (the job may need that module), nor
        is a module the job blocks. One warm template that has imported torch and
        coremltools thus also serves the describe, evaluation and reference jobs.
        """
        offered, wanted = ({m for m in needs.imports if not m.startswith(OWN_PACKAGE)}
                           for needs in (self, job))
        return (wanted <= offered and set(job.holds) <= set(self.holds)
                and self.blocks == job.blocks)

    @property
    def template_key(self) -> Needs:
        """The part that decides a template's start-up: these needs without the warm-up
        hooks (a template runs those when it first serves a job that names them)."""
        return replace(self, warm=())

    def blocked_modules(self) -> list[str]:
        """The module names the blocks keep out, less any these needs import."""
        return [module for name in self.blocks if name not in self.imports
                for module in BLOCK_GROUPS.get(name, (name,))]


NOTHING = Needs()

#: What a child that reads or simulates ML programs and runs no torch needs: with torch,
#: scikit-learn, transformers and scipy blocked, coremltools imports in about a second
#: instead of six.
COREMLTOOLS_ONLY = Needs(imports=("numpy", "coremltools"),
                         blocks=("torch", "sklearn", "transformers", "scipy"))
