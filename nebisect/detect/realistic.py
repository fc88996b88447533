"""Findings only at inputs no model sees: margins, not failures.

Without a declared domain, exploration drives a model's floating inputs across fp16's
whole range. There every Linear overflows somewhere: a ResNet at pixels of 1.4e4, a
Wav2Vec2 at a waveform whose std is 192, a running-sum state at a feature of 1.1e4 —
true statements about fp16, and nobody's bug. A finding whose **smallest** trigger (so
every trigger) lies more than :data:`REALISTIC_FACTOR` times beyond the scale of the
inputs the run starts from — the factory's example, else the generated inputs, whose
largest |value| is :func:`value_scale` — is a margin: reported beside the findings, with
the ``--input-range`` that would judge it, and not a failure (exit 0).

Far below is degenerate too: an image whose every pixel is ±6e-8 (the ``tiny`` family,
a ``const`` fill) makes a ConvNeXt's, a Swin's and a SegFormer's LayerNorm divide by its
epsilon — a finding only there, every trigger such a fill under the starting scale over
:data:`REALISTIC_FACTOR`, is a margin as well. Zeros are not: silence is an input.

What this leaves alone:

* inputs that all declare their domain (``--input-range``, ``input_domains``):
  exploration stays inside them, so everything found there is realistic by
  declaration; with some declared, the limit is never below their largest |value|;
* process failures (crash, timeout, oom): Core ML taking the app down is a bug at any
  finite input;
* triggers whose shrink key is not a float's magnitude — a length (``lengths``, the
  matrix's ``length(N)``) or an integer's value (``bigints``, inside a domain by
  construction).

128× is the bound the zoos chose (``bench/margins.py``). The published bugs'
triggers lie within 75× of their examples — seed 000's ``reduce_log_sum_exp`` at 7.62
against an example of 2.5 (3×), Llama's RMSNorm squares overflowing at residual-stream
outliers of 256 against unit-scale activations (75×) — and the package zoo's findings
nobody would act on from 163× (Wav2Vec2 at a waveform of std 192) to 25 000× (a running
sum at 1.1e4). A UNet block's GroupNorm overflowing at 261 (67×) stays a finding: fp16
overflow in diffusion UNets' GroupNorm is a known hazard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from nebisect.detect.causes import RunFinding
from nebisect.inputs.families.base import largest
from nebisect.sources.domains import input_range_option

#: how far beyond the starting inputs' largest |value| a trigger may lie and still be an
#: input the model sees, when its inputs declare no domain
REALISTIC_FACTOR = 128.0
#: symptoms that are findings at any input
PROCESS_SYMPTOMS = ("crash", "timeout", "oom")
#: member families whose shrink key is not a floating input's magnitude
NOT_A_VALUE = ("lengths", "length", "bigints")
#: families whose every element has one magnitude (a constant fill, ±x): far below the
#: starting inputs such an input is degenerate (a LayerNorm over a constant image of
#: 6e-8 divides by its epsilon)
DEGENERATE = ("const", "tiny")


def value_scale(arrays: Mapping[str, np.ndarray], floats: Sequence[str]) -> float:
    """The largest |value| of the floating inputs ``floats`` of ``arrays`` (1.0 when
    there is none, or it is 0 or not finite): what a trigger's distance is measured
    from."""
    magnitude = largest(arrays, [name for name in floats if name in arrays]) if floats else 0.0
    return magnitude if 0 < magnitude < np.inf else 1.0


def realistic_limit(scale: float, declared: Sequence[float], undeclared: Sequence[str]
                    ) -> float:
    """The largest trigger magnitude that is still realistic: inf when every floating
    input declares its domain, else :data:`REALISTIC_FACTOR` × ``scale``, and never
    below a declared domain's largest |value| (``declared``)."""
    if not undeclared:
        return float("inf")
    return max([REALISTIC_FACTOR * scale, *declared])


def beyond(finding: RunFinding, limit: float, floor: float = 0.0) -> bool:
    """Does ``finding`` fail only beyond ``limit``, or only at inputs whose every element
    is nonzero and below ``floor`` (see the module docstring)?"""
    if finding.symptom in PROCESS_SYMPTOMS:
        return False
    members = [m for group in finding.groups for m in group.members]
    if any(m.family in NOT_A_VALUE for m in members):
        return False
    return (all(m.magnitude > limit for m in members)
            or all(0 < m.magnitude < floor and m.family in DEGENERATE for m in members))


def realistic_floor(scale: float, undeclared: Sequence[str]) -> float:
    """The largest |value| below which a constant-magnitude input (every element ±x) is
    degenerate: the starting scale over :data:`REALISTIC_FACTOR` (0 when every floating
    input declares its domain: exploration stays inside it)."""
    return scale / REALISTIC_FACTOR if undeclared else 0.0


def margin_line(finding: RunFinding, scale: float, undeclared: Sequence[str]) -> str:
    """One line saying what fails only beyond realistic inputs, how far out, and how to
    judge it anyway."""
    magnitude = finding.smallest.magnitude
    option = input_range_option(undeclared[0]) if undeclared else "--input-range NAME=LO:HI"
    where = (f"only at inputs with |value| ≥ {magnitude:.3g}, {magnitude / scale:,.0f}× "
             if magnitude > scale else
             f"only at constant inputs of |value| ≤ {_largest(finding):.3g}, "
             f"{scale / _largest(finding):,.0f}× below ")
    return (f"margin: {finding.title} — {where}the largest starting input ({scale:.3g}); "
            f"not a failure: declare a domain to judge it ({option})")


def _largest(finding: RunFinding) -> float:
    return max(m.magnitude for group in finding.groups for m in group.members)
