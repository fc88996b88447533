"""Failing models for the reducer's tests: small, built in code, saved as sources.

* ``chain`` — examples/lse_chain.py: an fp16 chain whose one unshifted
  ``reduce_log_sum_exp`` collapses on ``sim:ane`` (seed 000).
* ``meanpool`` — seed 003's masked mean-pool over a dynamic sequence behind a small
  "encoder", with a second, unrelated bug on a side output (an ``lse`` over large
  values that collapses on ``sim:ane``): the data-dependent-shape error comes first,
  and a reduction must stay on it.
* ``LGAMMA_NET`` — a torch module whose ``Odd`` submodule calls ``lgamma``, which
  coremltools cannot convert on either path.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools
from support import REPO

HIDDEN = 8


def _example(name: str) -> Any:
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lse_chain = _example("lse_chain")


def chain(directory: Path, ops: int) -> tuple[Path, Path]:
    """(package, inputs) of an ``ops``-op chain with the lse in the middle."""
    package, inputs = directory / f"chain{ops}.mlpackage", directory / f"chain{ops}.npz"
    save_program(lse_chain.chain_program(ops), package)
    save_npz(inputs, lse_chain.chain_inputs())
    return package, inputs


def meanpool_program() -> Any:
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.frontend._utils import pymil_broadcast_to
    from coremltools.converters.mil.mil import get_new_symbol, types

    seq = get_new_symbol()

    def body(tokens: Any, attention_mask: Any) -> Any:
        x = mb.cast(x=tokens, dtype="fp16", name="tokens16")
        weight = np.eye(HIDDEN, dtype=np.float16)
        x = mb.relu(x=mb.linear(x=x, weight=weight, name="enc_linear"), name="enc_relu")
        side = mb.reduce_log_sum_exp(x=mb.add(x=x, y=np.float16(8.0), name="shift"),
                                     axes=[2], keep_dims=False, name="side_lse")
        mask = mb.expand_dims(x=attention_mask, axes=[-1], name="mask3")
        expanded = pymil_broadcast_to(mask, mb.shape(x=x), "expand")
        mask16 = mb.cast(x=expanded, dtype="fp16", name="mask16")
        summed = mb.reduce_sum(x=mb.mul(x=x, y=mask16, name="masked"), axes=[1],
                               keep_dims=False, name="summed")
        count = mb.clip(x=mb.reduce_sum(x=mask16, axes=[1], keep_dims=False, name="count"),
                        alpha=np.float16(6e-8), beta=np.float16(np.inf), name="clipped")
        return mb.real_div(x=summed, y=count, name="pooled"), side

    specs = [mb.TensorSpec(shape=(1, seq, HIDDEN), dtype=types.fp32),
             mb.TensorSpec(shape=(1, seq), dtype=types.int32)]
    return mb.program(input_specs=specs, opset_version=ct.target.iOS18)(body)


def meanpool(directory: Path) -> tuple[Path, Path]:
    package, inputs = directory / "meanpool.mlpackage", directory / "meanpool.npz"
    save_program(meanpool_program(), package)
    mask = np.ones((1, 6), np.int32)
    mask[0, 4:] = 0
    tokens = np.random.default_rng(1).uniform(0.5, 1.5, (1, 6, HIDDEN)).astype(np.float32)
    save_npz(inputs, {"tokens": tokens, "attention_mask": mask})
    return package, inputs


LGAMMA_NET = textwrap.dedent('''
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.linear = nn.Linear(n, n)

        def forward(self, x):
            return torch.relu(self.linear(x))


    class Odd(nn.Module):
        """The piece coremltools cannot convert (no lowering of lgamma)."""

        def forward(self, x):
            return torch.lgamma(x.abs() + 1.0)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.pre, self.odd, self.post = Block(8), Odd(), Block(8)

        def forward(self, x, mask):
            h = self.post(self.odd(self.pre(x)))
            return h * mask.unsqueeze(-1)


    def model():
        generator = torch.Generator().manual_seed(1)
        return {
            "module": Net(),
            "example_inputs": {"x": torch.randn(1, 5, 8, generator=generator),
                               "mask": torch.ones(1, 5)},
            "dynamic_dims": {"x": {1: (1, 16)}, "mask": {1: (1, 16)}},
        }
''')


def lgamma_net(directory: Path) -> str:
    path = directory / "net.py"
    path.write_text(LGAMMA_NET)
    return f"{path}:model"
