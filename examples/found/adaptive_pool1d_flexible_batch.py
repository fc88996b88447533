"""``nn.AdaptiveAvgPool1d(4)`` with a flexible batch: the conversion fails on both paths.

Found by ``nebisect atlas --patterns 50 --seed 0`` (program ``0:31``, shrunk to
``adaptive_pool``: ``F.adaptive_avg_pool1d`` of a stream whose second dimension is a
flexible length). coremltools 9.0 (and 9.1.dev1) converts 1-D adaptive pooling to one
``slice_by_index`` window per output element, and writes each window's ``end`` as the
constant ``[x.shape[0], x.shape[1], …]``; a flexible batch or channel dimension is a
symbol, which a constant cannot hold: ``ValueError: Cannot add const [is0, 3, 2]``. The
same model with a fixed batch converts. Not reported upstream that we could find
(searched the apple/coremltools tracker for adaptive pooling with flexible shapes:
#976 and #977 are the 2-D op with enumerated shapes, PR #2787 (open) handles output
size 1 over a flexible *pooled* length, PR #2808 (open) a symbolic batch in ``narrow``
and ``group_norm`` only). Checked with torch 2.13 on both conversion paths.

A 1-D convnet head (audio, sensor or text classifiers: ``Conv1d`` then
``AdaptiveAvgPool1d(k)``) converted for a variable batch size does not convert.

What ``run`` reports with the example: ``error`` at ``convert`` on both paths,
attributed ``conversion``.
"""

from __future__ import annotations

from typing import Any

import torch


class ConvPoolHead(torch.nn.Module):
    """A 1-D convolution pooled to four bins per channel."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv1d(2, 3, 3)
        self.pool = torch.nn.AdaptiveAvgPool1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


def model() -> dict[str, Any]:
    return {"module": ConvPoolHead().eval(),
            "example_inputs": {"x": torch.randn(2, 2, 10,
                                                generator=torch.Generator().manual_seed(0))},
            "dynamic_dims": {"x": {0: (1, 8)}}}
