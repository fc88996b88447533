"""``torch.nn.RMSNorm(dim)`` with its default epsilon does not convert on the torch.export path.

Found by ``nebisect atlas`` (OpInfo's ``nn.functional.rms_norm`` samples 2, 3 and 5:
``rms_norm(x0, (1,), x1)`` and others without ``eps``): not reported upstream that we
could find (searched the apple/coremltools tracker for rms_norm conversion errors; #2821
and PR #2822 are about the epsilon's scaling, #2585 / PR #2592 added the converter).
``nn.RMSNorm``'s default is ``eps=None`` (torch then uses the dtype's epsilon), and
torch.export drops the ``None`` from the call: the exported graph holds
``aten.rms_norm.default(x, [8], weight)`` with three arguments. coremltools 9.0's
``rms_norm`` converter asks for exactly four, so conversion fails with ``ValueError: node
rms_norm (rms_norm) got 3 input(s), expected [4]``. jit.trace passes the ``None``
positionally and converts; with ``eps`` given, torch.export converts too. Checked with
coremltools 9.0 / torch 2.13.

What ``run`` reports: ``error`` at ``convert`` on the torch.export path, attributed
``conversion``, while jit.trace converts (a one-path conversion failure) — the fix a
user can take today is ``RMSNorm(dim, eps=1e-6)`` or ``--convert trace``.
"""

from __future__ import annotations

from typing import Any

import torch


def model() -> dict[str, Any]:
    """A Llama-style pre-norm with the default epsilon."""
    norm = torch.nn.RMSNorm(8)
    return {"module": norm,
            "example_inputs": {"x": torch.randn(2, 8, generator=torch.Generator().manual_seed(0))}}
