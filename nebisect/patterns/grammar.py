"""The grammar of pattern programs: idioms that write torch code, and the generator that
chains them into a program.

The bugs users meet in coremltools are rarely in one op: an in-place write through a
slice, a gather with a small index tensor, a shape read off a flexible dimension, an
LSTM called twice with its state carried, SDPA with grouped key/value heads, a
broadcasting ``mul`` + ``add`` a graph pass fuses. An :class:`Idiom` writes one such
pattern as lines of a ``forward`` (and of ``__init__`` for its layers), from a
:class:`Tensor` in the program's invariant form to the next: rank 3, float32,
``(batch, length, width)``, the length possibly flexible, the width a multiple of 4. Any
chain of idioms is therefore a valid program, and each idiom's own choices (which
element, which head count, which dtype) are drawn from :class:`Choices`.

Everything here writes text and draws numbers: no torch, no I/O. The choices come
from a seeded random generator (:class:`SeededChoices`: a campaign's program ``n`` is
the same in every campaign), or from any other :class:`Choices` (Hypothesis's draws,
say). Each idiom's decisions are kept (:class:`IdiomStep`), so :func:`build` writes a
program again from them and :func:`smaller` writes the programs one step simpler —
what a kept failure is shrunk with.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from nebisect.registry import ImportOnce, Registry

T = TypeVar("T")

#: widths the stream may have: every idiom keeps its width a multiple of 4
WIDTHS = (4, 8, 12, 16)
#: the flexible length's bounds, as the factory declares them
FLEXIBLE_LENGTH = (2, 16)
#: the most idioms one program chains
MAX_IDIOMS = 4


class Choices(Protocol):
    """Where a program's decisions come from (Hypothesis's draws, or a seeded generator)."""

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``; the smaller ones are the simpler."""
        ...

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``; the earlier ones are the simpler."""
        ...


class SeededChoices:
    """:class:`Choices` from a seeded random generator: one seed, one program."""

    def __init__(self, seed: int | str) -> None:
        self._random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self._random.randint(low, high)

    def pick(self, options: Sequence[T]) -> T:
        return options[self._random.randrange(len(options))]


@dataclass(frozen=True)
class Tensor:
    """The stream between idioms: the variable holding it and its example shape
    ``(batch, length, width)``; ``flexible``: the length is a flexible dimension, so an
    idiom must read it from ``.shape`` rather than write it as a number."""

    name: str
    shape: tuple[int, int, int]
    flexible: bool

    @property
    def width(self) -> int:
        return self.shape[2]

    def renamed(self, name: str) -> Tensor:
        """The same stream, held by ``name``."""
        return Tensor(name, self.shape, self.flexible)

    def with_width(self, name: str, width: int) -> Tensor:
        """The stream held by ``name``, ``width`` wide."""
        return Tensor(name, (self.shape[0], self.shape[1], width), self.flexible)

    def narrower(self) -> tuple[int, ...]:
        """The widths an idiom may narrow the stream to (at most its own)."""
        return tuple(w for w in WIDTHS if w <= self.width)


@dataclass
class Builder:
    """The program being written: ``__init__`` lines (layers, constants) and ``forward``
    lines, with fresh names for both."""

    init: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    _count: int = 0

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def layer(self, prefix: str, constructor: str) -> str:
        """``self.<name> = <constructor>`` in ``__init__``; the attribute's expression."""
        name = self.fresh(prefix)
        self.init.append(f"self.{name} = {constructor}")
        return f"self.{name}"

    def let(self, prefix: str, *lines: str) -> str:
        """A fresh variable; ``lines`` write it, ``{out}`` standing for its name."""
        out = self.fresh(prefix)
        self.body.extend(line.format(out=out) for line in lines)
        return out


@dataclass(frozen=True)
class Idiom:
    """One pattern users write: ``emit`` appends its code to the builder and returns the
    stream after it. ``family`` groups idioms by the way converters get them wrong;
    ``source``: the published bug the idiom was written from, when there is one."""

    name: str
    family: str
    emit: Callable[[Builder, Tensor, Choices], Tensor]
    source: str = ""


IDIOMS: Registry[str, Idiom] = Registry(
    "idiom", ImportOnce(lambda: ["nebisect.patterns.idioms"]))


def idiom(name: str, family: str, source: str = ""
          ) -> Callable[[Callable[[Builder, Tensor, Choices], Tensor]],
                        Callable[[Builder, Tensor, Choices], Tensor]]:
    """Register the decorated function as the idiom ``name``."""
    def register(emit: Callable[[Builder, Tensor, Choices], Tensor]
                 ) -> Callable[[Builder, Tensor, Choices], Tensor]:
        IDIOMS.register(name, Idiom(name, family, emit, source))
        return emit

    return register


class _Recording:
    """:class:`Choices` that pass ``inner``'s decisions on and keep them, as integers
    (an integer as drawn, an option by its position)."""

    def __init__(self, inner: Choices) -> None:
        self._inner = inner
        self.decisions: list[int] = []

    def integer(self, low: int, high: int) -> int:
        value = self._inner.integer(low, high)
        self.decisions.append(value)
        return value

    def pick(self, options: Sequence[T]) -> T:
        position = self._inner.integer(0, len(options) - 1)
        self.decisions.append(position)
        return options[position]


class _Replay:
    """:class:`Choices` that give recorded decisions back, each brought into the range
    asked for now (an idiom replayed on a narrower stream asks for a smaller column), and
    the simplest one once the record is spent: any record replays into a valid program."""

    def __init__(self, decisions: Sequence[int]) -> None:
        self._decisions = list(decisions)

    def integer(self, low: int, high: int) -> int:
        return min(max(self._decisions.pop(0), low), high) if self._decisions else low

    def pick(self, options: Sequence[T]) -> T:
        return options[min(self.integer(0, len(options) - 1), len(options) - 1)]


@dataclass(frozen=True)
class IdiomStep:
    """One idiom of a program and the decisions it made."""

    idiom: str
    decisions: tuple[int, ...]


@dataclass(frozen=True)
class Draft:
    """A generated program before it is written out: the input's example shape and
    whether its length is flexible, its idioms in order with their decisions, and the
    code they wrote. :func:`build` writes the same code again from the decisions."""

    shape: tuple[int, int, int]
    flexible: bool
    steps: tuple[IdiomStep, ...]
    init: tuple[str, ...]
    body: tuple[str, ...]
    output: str

    @property
    def idioms(self) -> tuple[str, ...]:
        return tuple(step.idiom for step in self.steps)


def generate(choices: Choices, *, max_idioms: int = MAX_IDIOMS,
             names: Sequence[str] | None = None) -> Draft:
    """A program of 1 to ``max_idioms`` idioms (among ``names``; None: every one), each
    choice drawn from ``choices`` — the first decisions are the input's sizes, then how
    many idioms, then each idiom and its own choices, so a shrinker that lowers them
    reaches the fewest idioms on the smallest input."""
    chosen = sorted(names if names is not None else IDIOMS.names())
    shape = (choices.integer(1, 2), choices.integer(FLEXIBLE_LENGTH[0], 8),
             choices.pick(WIDTHS))
    flexible = choices.pick((False, True))
    steps = []
    stream = Tensor("x", shape, flexible)
    scratch = Builder()
    for _ in range(choices.integer(1, max_idioms)):
        picked = IDIOMS.get(choices.pick(chosen))
        recording = _Recording(choices)
        stream = picked.emit(scratch, stream, recording)
        steps.append(IdiomStep(picked.name, tuple(recording.decisions)))
    return build(shape, flexible, steps)


def build(shape: tuple[int, int, int], flexible: bool, steps: Sequence[IdiomStep]) -> Draft:
    """The program of ``steps`` on an input of ``shape``: each idiom written again from
    its decisions (brought into range where the stream before it changed)."""
    builder = Builder()
    stream = Tensor("x", shape, flexible)
    for step in steps:
        stream = IDIOMS.get(step.idiom).emit(builder, stream, _Replay(step.decisions))
    return Draft(shape, flexible, tuple(steps), tuple(builder.init), tuple(builder.body),
                 stream.name)


def smaller(draft: Draft) -> Iterator[Draft]:
    """Programs one step simpler than ``draft``, the simplest first: an idiom left out
    (while one remains), then a smaller input — batch 1, the shortest length, the next
    narrower width, a fixed length."""
    steps = draft.steps
    if len(steps) > 1:
        for position in range(len(steps)):
            yield build(draft.shape, draft.flexible, steps[:position] + steps[position + 1:])
    batch, length, width = draft.shape
    for shape in ((1, length, width), (batch, FLEXIBLE_LENGTH[0], width),
                  *((batch, length, narrower) for narrower in WIDTHS[:WIDTHS.index(width)][-1:])):
        if shape != draft.shape:
            yield build(shape, draft.flexible, steps)
    if draft.flexible:
        yield build(draft.shape, False, steps)
