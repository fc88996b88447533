"""Build the shipped ``corpus/``: the seed reports' bugs as minimized, recorded cases.

Run from the repository root (``.venv/bin/python scripts/make_corpus.py [corpus]``).
Every model is converted from the torch code that shows the bug (seed 000's repro model
is ``examples/logsumexp_ne.py``, seed 003's pool ``examples/meanpool.py``, the MiniLM
wrapper ``examples/minilm_meanpool.py``), stored as bytes, and its expectation is
*recorded by running it* in isolation — the script then checks that each seed case
fails the way its report says (and each control case passes), so a corpus that no
longer reproduces its seeds is never shipped.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nebisect.corpus import Corpus, NewCase
from nebisect.guard.replay import run_case
from nebisect.isolate import Isolator
from nebisect.sources.convert import convert_source, save_package
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import TorchSource

ROOT = Path(__file__).resolve().parent.parent


class Softplus(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x)


class StackLogsumexp(torch.nn.Module):
    """Seed 000's follow-up: lsexp(stack([x, 0]), dim=0), algebraically softplus(x)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(torch.stack([x, torch.zeros_like(x)], dim=0), dim=0)


class LogSoftmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


class LogCumSumExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(x, dim=-1)


@dataclass
class Seed:
    """One case to build: where the model comes from and what it must show."""

    name: str
    description: str
    model: Callable[[], TorchSource]
    inputs: dict[str, np.ndarray]
    target: str
    expect: str
    fixes: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    torch_source: str = ""


def _module(module: torch.nn.Module, **examples: torch.Tensor) -> Callable[[], TorchSource]:
    return lambda: TorchSource(f"<{type(module).__name__}>", module.eval(), dict(examples))


def _example(location: str) -> Callable[[], TorchSource]:
    return lambda: load_torch_source(str(ROOT / location))


def _seed000(x: float) -> dict[str, np.ndarray]:
    return {"x": np.full((1, 1, 8, 8), x, np.float32)}


def _pool_inputs() -> dict[str, np.ndarray]:
    tokens = np.random.default_rng(3).standard_normal((1, 8, 768)).astype(np.float32)
    return {"tokens": tokens, "attention_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0]], np.int32)}


def _minilm_inputs() -> dict[str, np.ndarray]:
    ids = 1000 + (np.arange(8, dtype=np.int32) * 37) % 20000
    return {"input_ids": ids[None, :], "attention_mask": np.ones((1, 8), np.int32)}


ROW = torch.zeros(1, 16)

SEEDS = [
    Seed("seed000-logsumexp-c32-cliff",
         "Seed 000: conv -> logsumexp(dim=1) over 32 equal channels -> linear at x = 7.7, past "
         "the Neural Engine's fp16 overflow at log(65504/32) = 7.62: output collapses to 0.",
         _example("examples/logsumexp_ne.py:model"), _seed000(7.7), "sim:ane", "failing",
         ["logsumexp-max-shift"], {"op_of_interest": "reduce_log_sum_exp"}),
    Seed("seed000-logsumexp-c32-below-cliff",
         "Control for seed 000: the same model at x = 7.5, below the cliff, must pass.",
         _example("examples/logsumexp_ne.py:model"), _seed000(7.5), "sim:ane", "pass",
         [], {"op_of_interest": "reduce_log_sum_exp"}),
    Seed("seed000-logsumexp-stack2-cliff",
         "Seed 000's follow-up: logsumexp(stack([x, 0]), dim=0) at x = 11.1, past "
         "log 65504 = 11.09 (one dominant term): the Neural Engine output collapses.",
         _module(StackLogsumexp(), x=ROW), {"x": np.full((1, 16), 11.1, np.float32)},
         "sim:ane", "failing", ["logsumexp-max-shift"],
         {"op_of_interest": "reduce_log_sum_exp"}),
    Seed("softplus-cliff",
         "coremltools #2687 (seed 000's cross-op table): softplus on the Neural Engine "
         "collapses to 0 past ln 2^15 = 10.397; here at x = 10.5.",
         _module(Softplus(), x=ROW), {"x": np.full((1, 16), 10.5, np.float32)},
         "sim:ane", "failing", ["softplus-stable"]),
    Seed("seed003-meanpool-data-dependent-shape",
         "Seed 003: masked mean-pool over a dynamic sequence (RangeDim 1..382): the pooled "
         "output is typed [?, 768] and non-CPU units refuse it ('Data-dependent shapes were "
         "disabled'; a full encoder segfaults).",
         _example("examples/meanpool.py:model"), _pool_inputs(), "sim:ane", "failing",
         ["meanpool-static-shape"]),
    Seed("log-softmax-fp16-underflow",
         "coremltools 9 converts log_softmax to log(softmax(x)); a logit 40 below the maximum "
         "underflows to probability 0 in fp16 and its log is -inf.",
         _module(LogSoftmax(), x=torch.zeros(1, 4)),
         {"x": np.array([[0.0, -40.0, 3.0, 1.0]], np.float32)}, "sim:fp16", "failing",
         ["log-softmax-stable"]),
    Seed("logcumsumexp-fp16-overflow",
         "torch.logcumsumexp converts to log(cumsum(exp(x))); exp(12) overflows fp16 and every "
         "later prefix is inf.",
         _module(LogCumSumExp(), x=torch.zeros(1, 4)),
         {"x": np.array([[1.0, 12.0, 3.0, -2.0]], np.float32)}, "sim:fp16", "failing",
         ["logcumsumexp-stable"]),
    Seed("minilm-meanpool-conversion",
         "all-MiniLM-L6-v2 + masked mean-pool (dynamic sequence) fails to convert with torch "
         "2.13 + coremltools 9.0 on both paths (new_ones; aten::Int under NumPy 2.4).",
         _example("examples/minilm_meanpool.py:model"), _minilm_inputs(), "sim:fp32",
         "failing", ["converter-compat"], torch_source="examples/minilm_meanpool.py:model"),
]


def build(root: Path) -> None:
    corpus = Corpus(root, create=True)
    with Isolator() as isolator, tempfile.TemporaryDirectory() as tmp:
        def record(case: Any) -> Any:
            return run_case(case, isolator, Path(tmp) / "record").verdict

        for seed in SEEDS:
            if seed.torch_source:
                kind, source, stage = "torch", str(ROOT / seed.torch_source), "convert"
            else:
                kind, source, stage = "mlpackage", _convert(seed, Path(tmp)), "predict"
            added = corpus.add(NewCase(
                kind, source, seed.target, seed.inputs, None, stage=stage, options=seed.options,
                name=seed.name, description=seed.description, fixes=seed.fixes,
            ), record)
            expected = added.case.record.expected
            print(f"{seed.name}: {added.case.case_id} {expected.status} {expected.signature}")
            if expected.status != seed.expect:
                raise SystemExit(f"{seed.name}: recorded {expected.status}, the seed says "
                                 f"{seed.expect} — not shipping it")


def _convert(seed: Seed, tmp: Path) -> str:
    model, attempts = convert_source(seed.model(), "fp16")
    if model is None:
        raise SystemExit(f"{seed.name}: conversion failed: {attempts}")
    return str(save_package(model, tmp / f"{seed.name}.mlpackage"))


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "corpus")
