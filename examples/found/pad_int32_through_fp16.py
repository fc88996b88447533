"""``F.pad`` of int32 token ids: coremltools pads them as floats, so in the fp16 program
(coremltools' default) ids above 2048 come back rounded.

Found by ``nebisect atlas`` (``nn.functional.pad.constant``, sample ``int32:0``:
``F.pad(x0, (2, 2))``: ``fp32: mismatch:integer`` on both paths at int32 values above
2^24, the fp16 columns already at 2049). MIL's ``pad`` takes fp16 and fp32 only, so
coremltools 9.0 (and 9.1.dev1) casts an int32 input to the program's float dtype, pads
and leaves the result a float: ``cast(x, "fp16") → pad``. fp16 holds every integer only
up to 2048 and rounds to multiples of 16 between 16384 and 32768, so a vocabulary id of
30 522 becomes 30 528 — another token. Not reported upstream as such that we could find:
coremltools #1804 (open) is the conversion *error* int32 ``pad`` raised before the cast
existed; the rounding the cast brings is not mentioned there nor elsewhere we searched
("pad int32", "pad integer fp16"). Checked with torch 2.13 on both conversion paths.

A model that pads its token ids to a fixed length inside ``forward`` (a pad id appended
before the embedding) looks up other rows of the embedding table once it is converted
at coremltools' default precision.

What ``run --target sim:fp16`` reports (ids up to BERT's vocabulary size): "the model
returns wrong integers in fp16 at the example inputs" on both paths (2049 comes back
2048; the explored token ids 30 521 → 30 528), ``mismatch`` / ``integer``, attributed
``conversion``: the converter turned integer data into floats.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class PadIds(torch.nn.Module):
    """Token ids padded on the right with two pad ids (0)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.pad(ids, (0, 2), value=0)


def model() -> dict[str, Any]:
    ids = torch.tensor([[101, 2049, 7592, 30521, 102]], dtype=torch.int32)
    return {"module": PadIds(), "example_inputs": {"ids": ids},
            "input_domains": {"ids": (0, 30521)}}
