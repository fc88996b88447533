"""``F.log_softmax`` converted as ``log(softmax(x))`` — -inf in fp16 once one class dominates.

Source: apple/coremltools issue #2728, "log_softmax produces -inf on Apple Neural Engine in
fp16 when one class dominates" (open; the fix in PR #2763 was closed unmerged). The torch
frontend emits ``softmax`` then ``log``. In an fp16 program the probabilities of the
non-dominant classes underflow to 0 (below the smallest fp16 subnormal, 6e-8, i.e. once a
logit trails the leader by more than ~16.6) and ``log(0)`` is -inf; torch returns the
finite ``x - logsumexp(x)``. The report's reproducer: logits ``[0, 0, 0, 50, 0, 0, 0, 0]``
give -50 in torch and -inf on the Neural Engine. Checked with coremltools 9.0 / torch 2.13:
both conversion paths emit ``softmax → log``.

What nebisect should report with :data:`TRIGGER`: ``mismatch`` / ``nonfinite`` on
``sim:fp16`` and ``sim:ane`` (the fp64 evaluation of the same program agrees with torch, so
the attribution is ``precision``); ``sim:fp32`` passes. The example logits are a typical
classifier head's (spread < 4), where fp16 holds every probability.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

#: The report's input: class 3 leads the others by 50.
TRIGGER = {"logits": np.array([[0.0, 0.0, 0.0, 50.0, 0.0, 0.0, 0.0, 0.0]], np.float32)}


class LogSoftmaxHead(torch.nn.Module):
    """The report's model: class log-probabilities over the last axis."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(logits, dim=-1)


def model() -> dict[str, Any]:
    """Benign example: logits within a few units of each other."""
    logits = torch.tensor([[0.3, -1.2, 2.1, 0.8, -0.4, 1.5, -2.0, 0.1]])
    return {"module": LogSoftmaxHead(), "example_inputs": {"logits": logits}}
