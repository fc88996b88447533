"""``ReflectionPad3d``: converted, saved, refused when Core ML parses the program.

Sources: apple/coremltools issues #2576 ("ReflectionPad3D fails at runtime") and #2571
(``ReplicationPad3d``, the same failure), pytorch/executorch #11708 and #11709; PR #2701
(open) states the runtime's rule: "all non-zero non-constant padding must be in the last
two dimensions". coremltools 9.0 converts ``ReflectionPad3d(2)`` to one ``pad`` in
``reflect`` mode over the last three dims; Core ML refuses it with "Unable to parse ML
Program: in operation …: Padding for more than two dimensions only supports `constant`
mode".

What nebisect should report with the example inputs: ``error`` at ``load`` with that text
on ``sim:fp32``, ``sim:fp16`` and ``sim:ane`` (the runtime rule
``pad-outer-dims-non-constant``), attributed ``device``; ``sim:fp64`` pads as torch does;
``nebisect lint`` flags the ``pad``.
"""

from __future__ import annotations

from typing import Any

import torch


class VolumePad(torch.nn.Module):
    """Reflect-pad a volume by 2 on each side of depth, height and width."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = torch.nn.ReflectionPad3d(padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pad(x)


def model() -> dict[str, Any]:
    """Example input: the report's shape, (1, 6, 6, 6, 6)."""
    generator = torch.Generator().manual_seed(0)
    return {"module": VolumePad(), "example_inputs": {"x": torch.randn(1, 6, 6, 6, 6,
                                                                      generator=generator)}}
