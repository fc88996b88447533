"""``nn.TransformerEncoder`` with ``src_key_padding_mask`` attends to the padding on torch.export.

Found while checking where a conversion culprit enters (``run``'s culprit by torch's
intermediates). Not reported upstream that we could find: the apple/coremltools tracker
(searched for ``zeros_like`` dtype, torch.export keyword arguments, key_padding_mask,
src_key_padding_mask, TransformerEncoder and attention masks) has PR #2369, which taught
``zeros_like`` its ``dtype`` — read from the second positional input, where TorchScript
puts it —, PR #2408, which reads torch.export's ``dtype`` keyword for ``zeros``, ``full``,
``new_zeros`` and ``new_full`` but not ``zeros_like``, and PR #2668, mask-construction ops
for torch.export (new ops only); no report of this.

``nn.MultiheadAttention`` turns the bool key-padding mask (True = padded) into an additive
float mask, ``torch.zeros_like(mask, dtype=float32).masked_fill_(mask, -inf)``
(``torch.nn.functional._canonical_mask``). torch.export records the dtype as a keyword
(``aten.zeros_like.default(mask, dtype=torch.float32, pin_memory=False)``); coremltools
9.0 hands an export node's keywords to a converter as ``kwinputs``, and its
``zeros_like`` reads only the positional ones, so the zeros keep the mask's dtype: the
constant ``zeros_like`` is bool, and ``masked_fill`` becomes ``select(cond=mask, a=True,
b=zeros_like)`` — the padding mask itself, as bools, where torch holds 0 and -inf. The
attention then reads it as a bool attention mask is read, True = attend (iOS 18's
``scaled_dot_product_attention``; at coremltools' default deployment target the lowered
attention adds ``-30000 * (1 - mask)``): every query attends to the padded positions
only. The outputs are wrong in fp64 already, and NaN where nothing is padded (nothing
left to attend to). jit.trace passes the dtype positionally and converts right
(``select(cond=mask, a=-3.4e38, b=zeros)`` in fp32). Checked with coremltools 9.0 / torch
2.13, deployment target iOS 18 and coremltools' default.

The model takes an attention mask as a tokenizer makes one (1 = token, 0 = padding) and
hands the encoder ``attention_mask == 0``, so that ``run`` knows the input for a mask:
every sequence keeps a token, and padded positions of the output are not compared.

What ``run`` reports: one ``conversion`` finding, torch.export only — off beyond tolerance
at the example inputs (and wherever something is padded), inf/NaN at ``mask(ones)`` —
whose culprit is the ``select`` named ``masked_fill``: the first value of the program whose
disagreement with torch's reaches the outputs (a bool where torch computes floats), not
the ``layer_norm`` at the output. Three heads, not two: with an even head count torch's
fused fast path (``_transformer_encoder_layer_fwd``) takes the layer whenever autograd is
off, so jit.trace's sanity check, which traces again under no_grad, fails ("Graphs
differed across invocations") — torch's matter, not this one. On NumPy ≥ 2.4 the trace path
also fails at coremltools' defaults on ``aten::Int``, a finding of its own that nebisect's
converter overrides cure (``--converter-overrides`` leaves this finding alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

D_MODEL, HEADS, LAYERS, BATCH, LENGTH = 12, 3, 2, 2, 6


class PaddedEncoder(torch.nn.Module):
    """Two post-norm encoder layers over a padded batch (batch first, eval mode), fed an
    attention mask as a tokenizer makes one (1 = token, 0 = padding)."""

    def __init__(self) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=32,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=attention_mask == 0)


def _example() -> dict[str, torch.Tensor]:
    x = torch.randn(BATCH, LENGTH, D_MODEL, generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones(BATCH, LENGTH, dtype=torch.int64)
    attention_mask[0, 4:] = 0
    attention_mask[1, 2:] = 0
    return {"x": x, "attention_mask": attention_mask}


#: Any padding shows it: the mask means its opposite.
TRIGGER = {name: value.numpy().astype(np.float32 if value.is_floating_point() else np.int32)
           for name, value in _example().items()}


def model() -> dict[str, Any]:
    return {"module": PaddedEncoder().eval(), "example_inputs": _example()}
