"""Imported once by the conversion template (fork mode) before it forks a conversion child.

Importing torch and coremltools is most of a fresh interpreter's cost, but not all of
it: the first conversion in a process also pays for torch.export's first use (dynamo,
the decomposition tables, FX passes), the jit tracer's and coremltools' lazily built
registries (op converters, MIL passes, the FLOAT16 cast pass) and the package writer —
about as much again as a second conversion of the same model. A forked child inherits
all of that *initialised* only if the template did it first.

Importing this module therefore rehearses one whole conversion per path and precision —
:func:`~nebisect.sources.convert.convert_source` on a tiny built-in module, then the
package saved — in a temporary directory it removes again, with ``tempfile`` pointed
there, so the ``tmp*.mlpackage`` directories coremltools leaves are removed too. No user
code runs here: the user's factory is loaded only in the forked child. torch is held to
one thread meanwhile, so that no intra-op thread pool exists when the template forks
(a pool started before ``fork`` is not usable in the child).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from nebisect.sources.convert import PATHS, convert_source, save_package
from nebisect.sources.torch_module import TorchSource

#: the conversion precisions a run asks for (fp16 targets, everything else)
REHEARSED_PRECISIONS = ("fp32", "fp16")


class _Rehearsal(torch.nn.Module):
    """A reduction, an elementwise op and a matmul: the converter passes most models use."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.logsumexp(x, dim=1, keepdim=True).expand_as(x) * 0.5)


def rehearse() -> None:
    """Convert and save the rehearsal module on every path at every precision."""
    torch.manual_seed(0)
    source = TorchSource("nebisect.sources.warm", _Rehearsal().eval(),
                         {"x": torch.randn(1, 4)})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cached = tempfile.tempdir
    try:
        with tempfile.TemporaryDirectory(prefix="nebisect-warm-") as scratch:
            tempfile.tempdir = scratch
            for precision in REHEARSED_PRECISIONS:
                models, _ = convert_source(source, precision, paths=PATHS)
                for path, model in models.items():
                    save_package(model, Path(scratch) / f"{precision}-{path}.mlpackage")
    finally:
        tempfile.tempdir = cached
        torch.set_num_threads(threads)


rehearse()
