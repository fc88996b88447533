"""Input domains: the values each input of a model really takes.

A model sees pixels in [0, 1], token ids below its vocabulary size, audio in [-1, 1],
attention masks with at least one valid position per sequence. Outside that, fp16
overflows and 0/0s are true statements about the arithmetic but nobody's bug: a Linear
overflowing fp16 at inputs of 30 000 on an image model, or a mean-pool over an all-zero
mask. A domain is declared by the factory (``"input_domains"``) or on the command line
(``--input-range NAME=LO:HI``, ``NAME=mask``); exploration stays inside it, and what
breaks only beyond it is a margin, not a failure.

* :class:`InputDomain` — ``range`` (a closed interval ``[lo, hi]``) or ``mask`` (0/1,
  at least one 1 along the last axis of every sequence); it moves an array inside itself
  (:meth:`~InputDomain.project`: clipped into the range, a mask's values into {0, 1})
  or says it cannot be (NaN is in no range; a sequence with no valid position is no
  mask).
* :func:`parse_domains` — the factory's ``input_domains`` dict, checked against the
  inputs; :func:`parse_input_range` — one ``--input-range`` option.
* :func:`role_domains` — the domains the graph implies (:mod:`nebisect.mil.roles`): an
  index takes the rows of its table, an integer for arithmetic its whole dtype, a mask
  is a mask.
* :func:`masked_positions` — the elements of an output that a mask leaves padded: for
  the usual ``[batch, seq, …]`` hidden states the mask's ``[batch, seq]`` is the
  output's leading axes, and those positions are not compared. Which output follows
  which mask is declared (the factory's ``masked_outputs``, ``--masked-output
  OUTPUT=MASK``: :func:`parse_masked_output`, :func:`parse_masked_outputs`) or inferred
  from the shapes (:func:`infer_masked_outputs`).

Nothing here imports torch; every mistake is one :class:`NebisectError` line.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.roles import ARITHMETIC, INDICES, InputRole

if TYPE_CHECKING:
    from nebisect.sources.inputs import InputDescription

RANGE, MASK = "range", "mask"
#: how ``--input-range`` is written (also in its --help)
INPUT_RANGE_FORMAT = "NAME=LO:HI (e.g. pixel_values=0:1), or NAME=mask for an attention mask"
#: how ``--masked-output`` is written (also in its --help)
MASKED_OUTPUT_FORMAT = "OUTPUT=MASK (e.g. last_hidden_state=attention_mask)"
#: how an input becomes a mask, after a ``--masked-output`` naming one that is not
MASK_HINT = ("; declare one with --input-range NAME=mask (a package's integer input that "
             "gates a softmax or a select is one already, read off the graph)")


@dataclass(frozen=True)
class InputDomain:
    """The values one input takes: the closed range ``[lo, hi]``, or an attention mask."""

    kind: str
    lo: float = -math.inf
    hi: float = math.inf

    def __post_init__(self) -> None:
        if self.kind not in (RANGE, MASK):
            raise NebisectError(f"unknown input domain kind {self.kind!r}: {RANGE} or {MASK}")
        if not self.lo <= self.hi:
            raise NebisectError(f"input domain [{self.lo:g}, {self.hi:g}] is empty")

    @property
    def declaration(self) -> Any:
        """The domain as a factory declares it: ``"mask"`` or ``[lo, hi]``."""
        return MASK if self.kind == MASK else [self.lo, self.hi]

    @property
    def magnitude(self) -> float:
        """The largest |value| inside the domain (1 for a mask)."""
        return 1.0 if self.kind == MASK else max(abs(self.lo), abs(self.hi))

    def describe(self) -> str:
        return "an attention mask" if self.kind == MASK else f"[{self.lo:g}, {self.hi:g}]"

    def project(self, array: np.ndarray) -> np.ndarray | None:
        """``array`` moved inside the domain (in its own dtype), or None when it cannot
        be: NaN lies in no range, and a mask needs a valid position in every sequence."""
        values = np.asarray(array)
        if self.kind == MASK:
            mask = (values != 0).astype(values.dtype)
            rows = mask.reshape(-1, mask.shape[-1]) if mask.ndim else mask.reshape(1, 1)
            return mask if rows.shape[-1] == 0 or bool(rows.any(axis=-1).all()) else None
        if values.dtype.kind == "f" and bool(np.isnan(values).any()):
            return None
        lo, hi = self.lo, self.hi
        if values.dtype.kind in "iu":
            info = np.iinfo(values.dtype)
            lo, hi = math.ceil(max(lo, info.min)), math.floor(min(hi, info.max))
        return np.clip(values, lo, hi).astype(values.dtype)

    def contains(self, array: np.ndarray) -> bool:
        """Is every value of ``array`` inside the domain already?"""
        projected = self.project(array)
        return projected is not None and bool(np.array_equal(projected, np.asarray(array)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, written by hand rather than by the codec: a mask is its kind
        alone (its bounds mean nothing), and an unbounded range writes ``"inf"``, the
        spelling a factory declares it with."""
        if self.kind == MASK:
            return {"kind": MASK}
        return {"kind": RANGE, "lo": _json_float(self.lo), "hi": _json_float(self.hi)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputDomain:
        if data.get("kind") == MASK:
            return cls(MASK)
        return cls(RANGE, float(data["lo"]), float(data["hi"]))


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def parse_domain(where: str, name: str, given: Any) -> InputDomain:
    """One declared domain: ``(lo, hi)`` or ``"mask"``."""
    if given == MASK:
        return InputDomain(MASK)
    ok = (isinstance(given, (tuple, list)) and len(given) == 2
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given))
    if not ok:
        raise NebisectError(f"{where}: the domain of {name!r} must be (lo, hi) or 'mask', "
                            f"got {given!r}")
    lo, hi = float(given[0]), float(given[1])
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise NebisectError(f"{where}: the domain of {name!r} must have lo <= hi, got {given!r}")
    return InputDomain(RANGE, lo, hi)


def parse_domains(where: str, given: Any, inputs: Iterable[str]) -> dict[str, InputDomain]:
    """A factory's ``input_domains``: ``{input: (lo, hi) | "mask"}`` over known inputs."""
    if given is None:
        return {}
    names = list(inputs)
    if not isinstance(given, Mapping):
        raise NebisectError(f"{where}: 'input_domains' must be {{input: (lo, hi) or 'mask'}}")
    unknown = sorted(str(name) for name in given if name not in names)
    if unknown:
        raise NebisectError(f"{where}: input_domains names {', '.join(unknown)}, not an input "
                            f"({', '.join(names)})")
    return {str(name): parse_domain(where, str(name), value) for name, value in given.items()}


def parse_input_range(text: str) -> tuple[str, InputDomain]:
    """One ``--input-range`` value (:data:`INPUT_RANGE_FORMAT`)."""
    name, sep, spec = text.partition("=")
    where = f"--input-range {text!r}"
    if not sep or not name.strip():
        raise NebisectError(f"{where}: write {INPUT_RANGE_FORMAT}")
    if spec.strip() == MASK:
        return name.strip(), InputDomain(MASK)
    lo, colon, hi = spec.partition(":")
    try:
        bounds = (float(lo), float(hi)) if colon else None
    except ValueError:
        bounds = None
    if bounds is None:
        raise NebisectError(f"{where}: write {INPUT_RANGE_FORMAT}")
    return name.strip(), parse_domain(where, name.strip(), bounds)


def parse_masked_output(text: str) -> tuple[str, str]:
    """One ``--masked-output`` value (:data:`MASKED_OUTPUT_FORMAT`): (output, mask input)."""
    output, sep, mask = text.partition("=")
    if not sep or not output.strip() or not mask.strip():
        raise NebisectError(f"--masked-output {text!r}: write {MASKED_OUTPUT_FORMAT}")
    return output.strip(), mask.strip()


def role_domains(roles: Iterable[InputRole],
                 inputs: Iterable[InputDescription]) -> dict[str, InputDomain]:
    """The domain each inferred role implies for its input."""
    dtypes = {desc.name: np.dtype(desc.dtype) for desc in inputs}
    domains = {}
    for role in roles:
        if role.role == INDICES:
            domains[role.name] = InputDomain(RANGE, role.lo, role.hi)
        elif role.role == ARITHMETIC:
            info = np.iinfo(dtypes[role.name])
            domains[role.name] = InputDomain(RANGE, float(info.min), float(info.max))
        else:
            domains[role.name] = InputDomain(MASK)
    return domains


def parse_masked_outputs(where: str, given: Any, outputs: Iterable[str],
                         masks: Iterable[str], *, named: str = "masked_outputs",
                         hint: str = "") -> dict[str, str]:
    """A factory's ``masked_outputs`` (or ``--masked-output``, ``named`` so in the
    messages): ``{output: mask input}`` over known names; ``hint`` ends the line about
    an input that is not a mask (how to declare one)."""
    if given is None:
        return {}
    output_names, mask_names = list(outputs), list(masks)
    if not isinstance(given, Mapping) or not all(isinstance(v, str) for v in given.values()):
        raise NebisectError(f"{where}: {named!r} must be {{output: mask input name}}")
    for output, mask in given.items():
        if output not in output_names:
            raise NebisectError(f"{where}: {named} names {output!r}, not an output "
                                f"({', '.join(output_names)})")
        if mask not in mask_names:
            raise NebisectError(f"{where}: {named} {output}={mask}: {mask!r} is not a mask "
                                f"input ({', '.join(mask_names) or 'none declared'}){hint}")
    return {str(k): str(v) for k, v in given.items()}


def infer_masked_outputs(outputs: Mapping[str, tuple[Hashable, ...]],
                         masks: Mapping[str, tuple[Hashable, ...]]) -> dict[str, str]:
    """Outputs whose leading axes are exactly one mask's shape (``[batch, seq, …]``
    hidden states under a ``[batch, seq]`` mask) follow that mask; an output that two
    masks of the same shape could follow follows neither (a guess is worse than none).
    A dim is a size, or any value that stands for a flexible one (a package's)."""
    inferred = {}
    for output, shape in outputs.items():
        fits = [name for name, mask in masks.items()
                if len(mask) >= 2 and tuple(shape[:len(mask)]) == tuple(mask)]
        if len(fits) == 1:
            inferred[output] = fits[0]
    return inferred


def masked_positions(output: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """The boolean positions of ``output`` that ``mask`` marks padded (mask value 0),
    broadcast over the output's trailing axes; None when the shapes do not line up."""
    mask = np.asarray(mask)
    if output.ndim < mask.ndim or output.shape[:mask.ndim] != mask.shape:
        return None
    padded = (mask == 0).reshape(mask.shape + (1,) * (output.ndim - mask.ndim))
    return np.broadcast_to(padded, output.shape)
