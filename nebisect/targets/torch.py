"""Eager torch targets: ``torch:cpu[:fp32|fp16|bf16|fp64]``.

They run the module of a torch source (``file.py:factory``) exactly as the user wrote
it, in the requested dtype, on the CPU. ``torch:cpu:fp64`` is the oracle for torch
sources: the math the user meant, before any converter touched it — so a converted
program that disagrees with it at fp64 points at the converter (attribution
``conversion``). Integer inputs keep the dtype of the factory's example inputs (Core ML
feeds int32 token ids; BERT wants int64); floating inputs take the target's dtype.
Eager torch has no op list, so predictions carry no placement and no intermediates.

A module whose ``forward`` updates its buffers in place (a KV cache) is stateful:
:meth:`TorchTarget.predict_steps` calls it on one instance step after step, its buffers
carried as a stateful package's states are (in the target's dtype: float64 for the
reference), each prediction holding the buffers written so far by the names of their
states in the converted package. Every case starts from the buffers as the factory
built them (:meth:`~nebisect.sources.torch_module.TorchSource.reset_buffers`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.isolate import Needs
from nebisect.sources.torch_module import TORCH_DTYPE_NAMES
from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import register_target


@register_target("torch:cpu", "torch:cpu:fp32", "torch:cpu:fp16", "torch:cpu:bf16",
                 "torch:cpu:fp64")
class TorchTarget(Target):
    """Eager PyTorch on the CPU in the spec's dtype (fp64: the reference for torch sources)."""

    needs = Needs(imports=("numpy", "torch"))

    def availability(self) -> str | None:
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install torch)"
        return None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        return next(self.predict_steps(model, inputs, 1, intermediates=intermediates))

    def predict_steps(
        self, model: Any, inputs: dict[str, np.ndarray], steps: int, *,
        intermediates: bool = False,
    ) -> Iterator[Prediction]:
        """Up to ``steps`` calls of the module on ``inputs``, from its buffers as the
        factory built them, each call finding what the one before wrote in them; each
        prediction holds the buffers written so far as its ``state``. A module that
        writes none is called once."""
        from nebisect.sources.torch_load import load_torch_source
        from nebisect.sources.torch_module import (
            buffer_versions,
            run_module,
            to_torch_inputs,
            written_buffers,
        )

        if not model.ref.is_torch:
            raise NebisectError(
                f"{self.name} runs torch sources (file.py:factory), not a {model.kind} artifact"
            )
        import torch

        dtype = getattr(torch, TORCH_DTYPE_NAMES[self.spec.dtype or "fp32"])
        source = load_torch_source(model.location)
        module = source.module_in(dtype)
        source.reset_buffers(module)
        versions = buffer_versions(module)
        tensors = to_torch_inputs(source, inputs, dtype)
        for _ in range(max(steps, 1)):
            outputs = run_module(module, tensors)
            state = written_buffers(module, versions)
            yield Prediction(outputs, state=state)
            if not state:
                return
