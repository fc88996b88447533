"""Input domains: the values each input of a model really takes.

A model sees pixels in [0, 1], token ids below its vocabulary size, audio in [-1, 1],
attention masks with at least one valid position per sequence. Outside that, fp16
overflows and 0/0s are true statements about the arithmetic but nobody's bug: a Linear
overflowing fp16 at inputs of 30 000 on an image model, or a mean-pool over an all-zero
mask. A domain is declared by the factory (``"input_domains"``) or on the command line
(``--input-range NAME=LO:HI``, ``NAME=mask``, ``NAME=image:MEAN/STD``); exploration stays
inside it, and what breaks only beyond it is a margin, not a failure.

* :class:`InputDomain` — ``range`` (a closed interval ``[lo, hi]``), ``mask`` (0/1, at
  least one 1 along the last axis of every sequence) or ``image``: 8-bit pixels, the
  levels k/255 (k = 0..255) an image processor rescales to [0, 1], normalized by
  ``(v - mean) / std`` per channel (axis 1, NCHW; one mean and std for every channel,
  or one per channel). It moves an array inside itself (:meth:`~InputDomain.project`:
  clipped into the range, a mask's values into {0, 1}, an image's onto the nearest
  level of its channel) or says it cannot be (NaN is in no range; a sequence with no
  valid position is no mask). An image's example may lie between levels (a resized
  image; :meth:`~InputDomain.contains` asks its channel's range of levels), but what
  exploration draws lies on them: a constant image of 6e-8 is no input of an ImageNet
  model, whose values nearest zero are 0.0056, -0.0049 and 0.0082 on its three channels.
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
import shlex
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.roles import ARITHMETIC, INDICES, InputRole

if TYPE_CHECKING:
    from nebisect.sources.inputs import InputDescription

RANGE, MASK, IMAGE = "range", "mask", "image"
#: how ``--input-range`` is written (also in its --help)
INPUT_RANGE_FORMAT = (
    "NAME=LO:HI (e.g. pixel_values=0:1), NAME=mask for an attention mask, or "
    "NAME=image:MEAN/STD for 8-bit images (v = k/255, k = 0..255) normalized as "
    "(v - mean) / std on the channel axis 1: MEAN and STD one number each (image:0.5/0.5) "
    "or one per channel, comma-separated (ImageNet's: "
    "image:0.485,0.456,0.406/0.229,0.224,0.225); image alone: v itself")
#: the largest 8-bit level: an image's values are k/255 for k = 0..LEVELS
LEVELS = 255
#: how ``--masked-output`` is written (also in its --help)
MASKED_OUTPUT_FORMAT = "OUTPUT=MASK (e.g. last_hidden_state=attention_mask)"
#: how an input becomes a mask, after a ``--masked-output`` naming one that is not
MASK_HINT = ("; declare one with --input-range NAME=mask (a package's integer input that "
             "gates a softmax or a select is one already, read off the graph)")


def input_range_option(name: str) -> str:
    """``--input-range NAME=LO:HI`` for the input ``name``, quoted for the shell as a
    hint's command must be (an input name is the model's, and may hold anything)."""
    return f"--input-range {shlex.quote(f'{name}=LO:HI')}"


@dataclass(frozen=True)
class InputDomain:
    """The values one input takes: the closed range ``[lo, hi]``, an attention mask, or
    8-bit images normalized by ``mean`` and ``std`` (:meth:`image`; ``lo`` and ``hi``
    then bound every channel's levels)."""

    kind: str
    lo: float = -math.inf
    hi: float = math.inf
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in (RANGE, MASK, IMAGE):
            raise NebisectError(f"unknown input domain kind {self.kind!r}: {RANGE}, {MASK} "
                                f"or {IMAGE}")
        if not self.lo <= self.hi:
            raise NebisectError(f"input domain [{self.lo:g}, {self.hi:g}] is empty")
        if self.kind == IMAGE and (not self.mean or len(self.mean) != len(self.std)):
            raise NebisectError("an image domain needs its mean and std (InputDomain.image)")

    @classmethod
    def image(cls, mean: tuple[float, ...] = (0.0,), std: tuple[float, ...] = (1.0,)
              ) -> InputDomain:
        """8-bit images, ``(k/255 - mean) / std`` on each channel: one ``mean`` and
        ``std`` for every channel, or one per channel."""
        if len(mean) != len(std) or not mean or not all(
                math.isfinite(v) for v in (*mean, *std)) or min(std) <= 0:
            raise NebisectError(f"an image domain needs as many means as stds (one, or one "
                                f"per channel), finite, each std > 0; got mean {mean}, "
                                f"std {std}")
        low = min((0.0 - m) / s for m, s in zip(mean, std, strict=True))
        high = max((1.0 - m) / s for m, s in zip(mean, std, strict=True))
        return cls(IMAGE, low, high, tuple(map(float, mean)), tuple(map(float, std)))

    @property
    def declaration(self) -> Any:
        """The domain as a factory declares it: ``"mask"``, ``[lo, hi]`` or
        ``"image:MEAN/STD"``."""
        if self.kind == IMAGE:
            return f"{IMAGE}:{_numbers(self.mean)}/{_numbers(self.std)}"
        return MASK if self.kind == MASK else [self.lo, self.hi]

    @property
    def magnitude(self) -> float:
        """The largest |value| inside the domain (1 for a mask)."""
        return 1.0 if self.kind == MASK else max(abs(self.lo), abs(self.hi))

    def describe(self) -> str:
        if self.kind == IMAGE:
            return (f"[{self.lo:.4g}, {self.hi:.4g}] (8-bit images, (k/255 - mean) / std: "
                    f"mean {_numbers(self.mean)}, std {_numbers(self.std)})")
        return "an attention mask" if self.kind == MASK else f"[{self.lo:g}, {self.hi:g}]"

    def fits(self, shape: tuple[int, ...]) -> str:
        """Why an input of ``shape`` cannot take this domain ("" when it can): one mean
        and std per channel need the channels on axis 1."""
        channels = len(self.mean)
        if self.kind != IMAGE or channels == 1 or (len(shape) > 1 and shape[1] == channels):
            return ""
        return (f"its {channels} means and stds are one per channel on axis 1, but its "
                f"shape is {list(shape)}")

    def project(self, array: np.ndarray) -> np.ndarray | None:
        """``array`` moved inside the domain (in its own dtype), or None when it cannot
        be: NaN lies in no range, a mask needs a valid position in every sequence, and
        an image's channels must line up with its means."""
        values = np.asarray(array)
        if self.kind == MASK:
            mask = (values != 0).astype(values.dtype)
            rows = mask.reshape(-1, mask.shape[-1]) if mask.ndim else mask.reshape(1, 1)
            return mask if rows.shape[-1] == 0 or bool(rows.any(axis=-1).all()) else None
        if values.dtype.kind == "f" and bool(np.isnan(values).any()):
            return None
        if self.kind == IMAGE:
            return self._snapped(values)
        lo, hi = self.lo, self.hi
        if values.dtype.kind in "iu":
            info = np.iinfo(values.dtype)
            lo, hi = math.ceil(max(lo, info.min)), math.floor(min(hi, info.max))
        return np.clip(values, lo, hi).astype(values.dtype)

    def contains(self, array: np.ndarray) -> bool:
        """Is every value of ``array`` inside the domain already? An image's: within its
        channel's first and last level (on a level or between: an example may be a
        resized image), up to the rounding of its dtype."""
        values = np.asarray(array)
        if self.kind == IMAGE:
            return self._within(values)
        projected = self.project(values)
        return projected is not None and bool(np.array_equal(projected, values))

    def _channels(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """An image's mean and std, broadcast over ``values`` (one per channel on axis
        1), or None when the channels do not line up."""
        if self.fits(values.shape):
            return None
        shape = (1, -1, *([1] * (values.ndim - 2))) if len(self.mean) > 1 else ()
        return (np.asarray(self.mean, np.float64).reshape(shape),
                np.asarray(self.std, np.float64).reshape(shape))

    def _snapped(self, values: np.ndarray) -> np.ndarray | None:
        """An image's ``values``, each on its channel's nearest 8-bit level."""
        channels = self._channels(values)
        if channels is None:
            return None
        mean, std = channels
        levels = np.clip(np.rint((values.astype(np.float64) * std + mean) * LEVELS), 0, LEVELS)
        return ((levels / LEVELS - mean) / std).astype(values.dtype)

    def _within(self, values: np.ndarray) -> bool:
        """Are an image's ``values`` floats between their channel's first and last
        level (widened by a few of their dtype's epsilons: an example normalized in
        float32 rounds its ends)?"""
        channels = self._channels(values)
        if channels is None or values.dtype.kind != "f" or bool(np.isnan(values).any()):
            return False
        mean, std = channels
        slack = 4 * float(np.finfo(values.dtype).eps)
        lo, hi = -mean / std, (1.0 - mean) / std
        wide = values.astype(np.float64)
        return bool(np.all(wide >= lo - slack * np.abs(lo))
                    and np.all(wide <= hi + slack * np.abs(hi)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, written by hand rather than by the codec: a mask is its kind
        alone (its bounds mean nothing), an unbounded range writes ``"inf"``, the
        spelling a factory declares it with, and an image its mean and std (its bounds
        follow from them)."""
        if self.kind == MASK:
            return {"kind": MASK}
        if self.kind == IMAGE:
            return {"kind": IMAGE, "mean": list(self.mean), "std": list(self.std)}
        return {"kind": RANGE, "lo": _json_float(self.lo), "hi": _json_float(self.hi)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputDomain:
        if data.get("kind") == MASK:
            return cls(MASK)
        if data.get("kind") == IMAGE:
            return cls.image(tuple(map(float, data["mean"])), tuple(map(float, data["std"])))
        return cls(RANGE, float(data["lo"]), float(data["hi"]))


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _numbers(values: tuple[float, ...]) -> str:
    """``0.485,0.456,0.406``: as ``--input-range`` writes them (shortest repr)."""
    return ",".join(repr(v) for v in values)


def parse_domain(where: str, name: str, given: Any) -> InputDomain:
    """One declared domain: ``(lo, hi)``, ``"mask"``, an image as ``--input-range``
    writes it (``"image:0.485,0.456,0.406/0.229,0.224,0.225"``, ``"image"``) or as its
    JSON form (``{"kind": "image", "mean": [...], "std": [...]}``)."""
    if given == MASK:
        return InputDomain(MASK)
    if isinstance(given, str) and given.partition(":")[0].strip() == IMAGE:
        return parse_image(where, name, given)
    if isinstance(given, Mapping) and given.get("kind") == IMAGE:
        return _image_of(where, name, given)
    ok = (isinstance(given, (tuple, list)) and len(given) == 2
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given))
    if not ok:
        raise NebisectError(f"{where}: the domain of {name!r} must be (lo, hi), 'mask' or "
                            f"'image:MEAN/STD', got {given!r}")
    lo, hi = float(given[0]), float(given[1])
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise NebisectError(f"{where}: the domain of {name!r} must have lo <= hi, got {given!r}")
    return InputDomain(RANGE, lo, hi)


def parse_image(where: str, name: str, text: str) -> InputDomain:
    """``image`` (the levels k/255 themselves) or ``image:MEAN/STD``, each a number or
    one per channel, comma-separated."""
    _, colon, spec = text.partition(":")
    mean_text, slash, std_text = spec.partition("/")
    try:
        mean, std = ((0.0,), (1.0,)) if not colon else (
            tuple(float(v) for v in mean_text.split(",")),
            tuple(float(v) for v in std_text.split(",")))
    except ValueError:
        slash = ""
    if colon and not slash:
        raise NebisectError(f"{where}: the image domain of {name!r} is image:MEAN/STD, each "
                            "a number or one per channel (image:0.485,0.456,0.406/0.229,"
                            "0.224,0.225), or image alone")
    return _checked_image(where, name, mean, std)


def _image_of(where: str, name: str, given: Mapping[str, Any]) -> InputDomain:
    """An image domain's JSON form: ``{"kind": "image", "mean": [...], "std": [...]}``."""
    try:
        mean = tuple(float(v) for v in given.get("mean", (0.0,)))
        std = tuple(float(v) for v in given.get("std", (1.0,)))
    except (TypeError, ValueError) as exc:
        raise NebisectError(f"{where}: the image domain of {name!r} needs numbers for its "
                            f"mean and std: {exc}") from exc
    return _checked_image(where, name, mean, std)


def _checked_image(where: str, name: str, mean: tuple[float, ...],
                   std: tuple[float, ...]) -> InputDomain:
    try:
        return InputDomain.image(mean, std)
    except NebisectError as exc:
        raise NebisectError(f"{where}: the domain of {name!r}: {exc}") from exc


def parse_domains(where: str, given: Any, inputs: Iterable[str]) -> dict[str, InputDomain]:
    """A factory's ``input_domains``: ``{input: (lo, hi) | "mask" | "image:MEAN/STD"}``
    over known inputs."""
    if given is None:
        return {}
    names = list(inputs)
    if not isinstance(given, Mapping):
        raise NebisectError(f"{where}: 'input_domains' must be {{input: (lo, hi), 'mask' or "
                            "'image:MEAN/STD'}")
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
    if spec.partition(":")[0].strip() == IMAGE:
        return name.strip(), parse_image(where, name.strip(), spec)
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
