"""Torch sources: ``path/to/file.py:factory`` — a model handed to nebisect as Python code.

The contract (also in ``nebisect run --help`` and ``examples/``): the file is loaded by
path, ``factory()`` is called with no arguments and returns a dict (or any object with
these attributes)::

    {
        "module": torch.nn.Module,                 # put in eval() by nebisect
        "example_inputs": {"tokens": tensor, ...}, # or a tuple, named by forward()'s
                                                   # parameters, else x0, x1, … by
                                                   # position (forward(*args)); the names
                                                   # become the Core ML input names
        "dynamic_dims": {"tokens": {1: (1, 382)}}, # optional: {input: {axis: (min, max)}}
        "input_domains": {"pixels": (0.0, 1.0),    # optional: the values each input takes,
                          "mask": "mask"},         # (lo, hi), "mask" or an image's 8-bit
                                                   # levels "image:MEAN/STD" (sources/domains.py)
        "masked_outputs": {"hidden": "mask"},      # optional: outputs whose [batch, seq]
                                                   # positions follow a mask (inferred for
                                                   # [batch, seq, …] outputs otherwise)
    }

Axes given the same ``(min, max)`` are one symbolic dimension (a sequence length shared
by ``input_ids`` and ``attention_mask``), because torch.export rejects two independent
dims that the model forces equal. Outputs are named after what ``forward`` returns: a
tensor is ``output``, a tuple ``output_0, output_1, …``, a dict keeps its keys; the
converted package uses the same names, so torch and Core ML results line up.

**The same weights in every process.** The factory runs in several children (the
description, each conversion, the eager reference, bisection's pieces), and users'
factories rarely seed: two calls of ``nn.Linear(8, 8)`` draw two different weights, and
a reference built from one compared with a program converted from the other is a false
``conversion`` finding. So every call of a factory starts from the same seeds (torch,
numpy, ``random``: :data:`FACTORY_SEED`), and describing a source calls it twice and
compares the fingerprints of what it built (:func:`state_fingerprint`): a factory that
still builds different weights (it draws from the clock or the OS) is refused there, in
one line, before anything is judged. Rebuilding beats shipping the captured tensors to
every child: the factory has to run anyway to give the module's structure, and a
MiniLM's weights would cross the process boundary once per case.

**Buffers updated in place are states.** A module that writes a registered buffer in
``forward`` (``self.k_cache[:, :, pos] = k``, ``self.acc.add_(x)``) is how a KV cache
is written for Core ML: coremltools converts each such buffer into a ``ct.StateType``
state (iOS 18). :meth:`TorchSource.state_buffers` finds them — the buffers one call of
``forward`` on the example writes in place, as torch.export's
``graph_signature.buffers_to_mutate`` names them where the module exports — and
:func:`state_name` names each as the converted package does. Every buffer's value at
build time is kept (:meth:`TorchSource.reset_buffers`), so that each conversion and
each case starts from it, not from what an earlier ``forward`` in the same process left.

Everything a user can get wrong is a one-line :class:`NebisectError`; nothing imports
torch until a source is actually loaded.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.isolate import Needs
from nebisect.mil.quiet import quiet
from nebisect.sources.domains import (
    MASK,
    InputDomain,
    infer_masked_outputs,
    parse_domains,
    parse_masked_outputs,
)
from nebisect.sources.inputs import InputDescription

Range = tuple[int, int]
#: the seed of torch, numpy and ``random`` whenever a factory is called
FACTORY_SEED = 0

#: what a child that builds or converts a torch source needs: a factory's description,
#: the conversions (which also rehearse one: :data:`nebisect.sources.convert.CONVERSION`)
#: and the torch-side lint fork from one template
TORCH_AND_COREMLTOOLS = Needs(imports=("numpy", "torch", "coremltools"))
#: coremltools' two torch conversion paths (:mod:`nebisect.sources.convert`)
PATHS = ("export", "trace")
#: the torch dtype (its name in ``torch``) a precision computes in
TORCH_DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}


@dataclass
class TorchSource:
    """A loaded torch source: the eval-mode module, named example inputs, dynamic dims."""

    location: str
    module: Any
    example_inputs: dict[str, Any]
    dynamic_dims: dict[str, dict[int, Range]] = field(default_factory=dict)
    domains: dict[str, InputDomain] = field(default_factory=dict)
    #: declared ``masked_outputs`` (output → mask input); None: not declared
    masked_outputs: dict[str, str] | None = None
    #: the conversion paths that apply (a TorchScript program is not exported)
    paths: tuple[str, ...] = PATHS
    #: the TorchScript program the trace path converts, when the source carries one
    #: (a module captured in the caller's process): None — trace ``module``
    traced: Any = None
    _cast: dict[str, Any] = field(default_factory=dict, repr=False)
    #: every buffer's value when the source was built (:meth:`reset_buffers`)
    _initial: dict[str, Any] = field(default_factory=dict, repr=False)
    #: :meth:`state_buffers`, once found
    _states: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._initial = {name: buffer.detach().clone()
                         for name, buffer in self.module.named_buffers()}

    def reset_buffers(self, module: Any = None) -> None:
        """Put the buffers of ``module`` (the source's own, or its copy in another dtype:
        :meth:`module_in`) back to their values when the source was built: a stateful
        module's ``forward`` writes them, and each conversion and each case starts from
        the module as the factory built it."""
        import torch

        module = self.module if module is None else module
        with torch.no_grad():
            for name, buffer in module.named_buffers():
                initial = self._initial.get(name)
                if initial is not None and initial.shape == buffer.shape:
                    buffer.copy_(initial.to(buffer.dtype))

    def state_buffers(self) -> list[str]:
        """The buffers ``forward`` updates in place, by name (``acc``,
        ``layers.0.k_cache``), in the module's order: coremltools' stateful recipe
        converts each into a ``ct.StateType`` state. Found once: the buffers one call on
        the example inputs writes in place (their version counters move), then, where
        any does and the module exports, torch.export's ``buffers_to_mutate`` (what the
        converter itself reads). A ``forward`` that raises has none here: its crash is a
        finding of the cases that run it. The buffers are reset afterwards."""
        if self._states is None:
            self._states = self._find_states()
        return list(self._states)

    def _find_states(self) -> list[str]:
        buffers = dict(self.module.named_buffers())
        if not buffers:
            return []
        versions = buffer_versions(self.module)
        try:
            run_module(self.module, self.example_inputs)
        except Exception:
            return []
        finally:
            written = [name for name, buffer in buffers.items()
                       if buffer._version != versions[name]]
            self.reset_buffers()
        if not written or "export" not in self.paths:
            return written
        try:
            with quiet():
                exported = export_module(self, self.module).run_decompositions({})
        except Exception:
            return written  # not exportable: what forward wrote is all there is to go on
        finally:
            self.reset_buffers()
        mutated = set(exported.graph_signature.buffers_to_mutate.values())
        return [name for name in buffers if name in mutated]

    def state_names(self) -> list[str]:
        """The package's names of :meth:`state_buffers` (:func:`state_name`)."""
        return [state_name(name) for name in self.state_buffers()]

    def module_in(self, dtype: Any) -> Any:
        """The module with floating parameters and buffers in ``dtype`` (cached).

        The original module is left untouched (other targets in the same process use
        it); a copy is cast only when some floating tensor is not already in ``dtype``.
        """
        key = str(dtype)
        if key not in self._cast:
            tensors = [*self.module.parameters(), *self.module.buffers()]
            if all(t.dtype == dtype for t in tensors if t.is_floating_point()):
                self._cast[key] = self.module
            else:
                self._cast[key] = copy.deepcopy(self.module).to(dtype)
        return self._cast[key]

    def descriptions(self) -> list[InputDescription]:
        """Inputs as the converted package will declare them (int32 ids, float32 values)."""
        described = []
        for name, tensor in self.example_inputs.items():
            dims = [(int(n), int(n)) for n in tensor.shape]
            for axis, bounds in self.dynamic_dims.get(name, {}).items():
                dims[axis] = bounds
            described.append(InputDescription(name, coreml_dtype(tensor), dims))
        return described

    def symbols(self) -> dict[Range, str]:
        """One symbol name per distinct dynamic range, in first-seen order."""
        names: dict[Range, str] = {}
        for axes in self.dynamic_dims.values():
            for bounds in axes.values():
                names.setdefault(bounds, f"dim{len(names)}")
        return names

    def output_names(self) -> list[str]:
        """Names of ``forward``'s outputs on the example inputs (see the module doc)."""
        return list(run_module(self.module, self.example_inputs))

    def mask_inputs(self) -> list[str]:
        """Inputs that are attention masks: declared so, or integer or boolean inputs
        whose name says mask."""
        return [name for name, tensor in self.example_inputs.items()
                if (name in self.domains and self.domains[name].kind == MASK)
                or (name not in self.domains and "mask" in name.lower()
                    and not tensor.dtype.is_floating_point)]

    def output_masks(self) -> tuple[dict[str, str], bool]:
        """Which outputs follow which mask, and whether that was inferred: the declared
        ``masked_outputs``, else :func:`infer_masked_outputs` on the example's shapes."""
        if self.masked_outputs is not None:
            return dict(self.masked_outputs), False
        masks = {name: tuple(self.example_inputs[name].shape) for name in self.mask_inputs()}
        if not masks:
            return {}, False
        outputs = run_module(self.module, self.example_inputs)
        inferred = infer_masked_outputs({n: a.shape for n, a in outputs.items()}, masks)
        return inferred, bool(inferred)


def buffer_versions(module: Any) -> dict[str, int]:
    """The version counter of each buffer of ``module``: an in-place write moves it."""
    return {name: buffer._version for name, buffer in module.named_buffers()}


def written_buffers(module: Any, versions: dict[str, int]) -> dict[str, np.ndarray]:
    """The buffers of ``module`` written in place since ``versions`` were read
    (:func:`buffer_versions`), by the names their states have in the converted package
    (:func:`state_name`): what a stateful module holds for its next call (bf16
    widened to float32, as outputs are)."""
    import torch

    return {state_name(name): (buffer.detach().float() if buffer.dtype == torch.bfloat16
                               else buffer.detach()).cpu().numpy().copy()
            for name, buffer in module.named_buffers()
            if name in versions and buffer._version != versions[name]}


def export_module(source: TorchSource, module: Any) -> Any:
    """``torch.export.export`` of ``module`` (the source's, or a wrapper of it) on the
    example inputs, each distinct dynamic range one ``torch.export.Dim``."""
    import torch

    dims = {bounds: torch.export.Dim(name, min=bounds[0], max=bounds[1])
            for bounds, name in source.symbols().items()}
    specs = [({axis: dims[b] for axis, b in source.dynamic_dims[name].items()}
              if name in source.dynamic_dims else None)
             for name in source.example_inputs]
    return torch.export.export(module, tuple(source.example_inputs.values()),
                               dynamic_shapes=_by_signature(module, specs)
                               if source.dynamic_dims else None)


def _by_signature(module: Any, specs: list[Any]) -> tuple[Any, ...]:
    """The inputs' dynamic shapes in the structure ``torch.export`` binds them to
    ``forward``'s parameters: one per named positional parameter, the rest as one tuple
    for a ``*args`` (a wrapper's ``forward(*args)`` takes them all there)."""
    shaped: list[Any] = []
    for parameter in inspect.signature(module.forward).parameters.values():
        if parameter.kind == parameter.VAR_POSITIONAL:
            return (*shaped, tuple(specs[len(shaped):]))
        if len(shaped) < len(specs):
            shaped.append(specs[len(shaped)])
    return tuple(shaped)


#: names coremltools' name sanitizer changes (a MIL type or keyword): ``name_workaround``
_RESERVED = {"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true",
             "false", "string", "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32",
             "int64", "uint8", "uint16", "uint32", "uint64", "state"}


def state_name(buffer: str) -> str:
    """The name a converted package gives the state of ``buffer`` (``layers.0.k_cache``
    → ``layers_0_k_cache``), as coremltools' name sanitizer writes it: what the eager
    reference calls the buffer, so that each state is judged beside its twin."""
    return coreml_name(buffer, "_")


def coreml_name(name: str, prefix: str = "var_") -> str:
    """``name`` as coremltools' name sanitizer writes it into a program (``input.5`` →
    ``input_5``, ``bool`` → ``bool_workaround``; one that starts with neither a letter
    nor ``_`` takes ``prefix``: ``var_`` for a value, ``_`` for a state). The suffix it
    adds to a sanitized name that is already taken is not predicted here."""
    sanitized = re.sub("[^a-zA-Z0-9_]", "_", name)
    if re.match("[^a-zA-Z_]", sanitized):
        sanitized = prefix + sanitized
    return f"{sanitized}_workaround" if sanitized in _RESERVED else sanitized


def coreml_dtype(tensor: Any) -> str:
    """The numpy dtype a Core ML input gets for this example tensor.

    Core ML has no int64 or bool inputs: integers and booleans become int32 (token ids,
    masks); every floating dtype becomes float32 (fp16 programs cast inside).
    """
    return "float32" if tensor.dtype.is_floating_point else "int32"


def parse_location(text: str) -> tuple[Path, str]:
    """Split ``path/to/file.py:factory``; the factory name is required."""
    path, sep, factory = text.rpartition(":")
    if not sep or not path.endswith(".py") or not factory.isidentifier():
        raise NebisectError(f"{text!r}: a torch source is path/to/file.py:factory_function")
    return Path(path), factory


def build_torch_source(text: str) -> TorchSource:
    """Import the file of ``text`` and call its factory, both from :data:`FACTORY_SEED`
    (a module may draw its weights at import time), and validate what it returns."""
    path, factory_name = parse_location(text)
    seed_everything(FACTORY_SEED)
    factory = _factory(path, factory_name)
    seed_everything(FACTORY_SEED)
    try:
        with quiet():
            produced = factory()
    except Exception as exc:
        raise NebisectError(
            f"{text}: the factory raised {type(exc).__name__}: {first_line(exc)}"
        ) from None
    return _validate(text, produced)


def check_rebuilds_identically(text: str, loaded: TorchSource) -> None:
    """Call the factory of ``text`` once more and compare the fingerprints of the state
    and example inputs both calls built: NebisectError when they differ."""
    again = build_torch_source(text)
    first, second = state_fingerprint(loaded), state_fingerprint(again)
    if first != second:
        raise NebisectError(
            f"{text}: the factory builds different weights or example inputs on each call, "
            f"even with torch, numpy and random seeded to {FACTORY_SEED}; nebisect rebuilds "
            "the module in every process, so it must be deterministic (draw from a seeded "
            "generator, not the clock or the OS)"
        )


def seed_everything(seed: int) -> None:
    """Seed every generator a factory is likely to draw from."""
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def state_fingerprint(source: TorchSource) -> str:
    """sha256 over the module's parameters and buffers (names, dtypes, shapes, bytes)
    and the example inputs: equal fingerprints, the same model on the same inputs."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    named = [*source.module.named_parameters(remove_duplicate=False),
             *source.module.named_buffers(remove_duplicate=False),
             *(("input:" + name, t) for name, t in source.example_inputs.items())]
    for name, tensor in named:
        value = tensor.detach().cpu().contiguous()
        if value.dtype == torch.bfloat16:
            value = value.view(torch.int16)
        digest.update(f"{name}|{value.dtype}|{tuple(value.shape)}|".encode())
        digest.update(value.numpy().tobytes())
    return digest.hexdigest()


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


def _factory(path: Path, name: str) -> Any:
    module_name = f"_nebisect_source_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise NebisectError(f"{path}: cannot be loaded as a Python module")
    user_module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        with quiet():
            spec.loader.exec_module(user_module)
    except Exception as exc:
        raise NebisectError(
            f"{path}: importing it raised {type(exc).__name__}: {first_line(exc)}"
        ) from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(path.parent.resolve()))
    factory = getattr(user_module, name, None)
    if factory is None:
        defined = sorted(n for n, v in vars(user_module).items()
                         if inspect.isfunction(v) and v.__module__ == module_name)
        raise NebisectError(
            f"{path}: no factory named {name!r} (functions defined: {', '.join(defined) or 'none'})"
        )
    if not callable(factory):
        raise NebisectError(f"{path}: {name!r} is not callable")
    return factory


def _field(produced: Any, name: str) -> Any:
    if isinstance(produced, dict):
        return produced.get(name)
    return getattr(produced, name, None)


def _validate(text: str, produced: Any) -> TorchSource:
    import torch

    module = _field(produced, "module")
    if not isinstance(module, torch.nn.Module):
        raise NebisectError(
            f"{text}: the factory must return a dict with 'module' (a torch.nn.Module), "
            f"'example_inputs' and optionally 'dynamic_dims', 'input_domains' and "
            f"'masked_outputs'; got {_describe(produced)}"
        )
    module.eval()
    inputs = named_inputs(text, module, _field(produced, "example_inputs"))
    declared = {name: _field(produced, name)
                for name in ("dynamic_dims", "input_domains", "masked_outputs")}
    return validated(text, module, inputs, declared)


def validated(text: str, module: Any, inputs: dict[str, Any], declared: dict[str, Any],
              paths: tuple[str, ...] = PATHS) -> TorchSource:
    """The torch source of ``module`` (in eval mode) on its named example ``inputs``,
    with what ``declared`` holds (``dynamic_dims``, ``input_domains``,
    ``masked_outputs``, as a factory returns them) checked against them; ``paths`` are
    the conversion paths that apply to it."""
    dynamic = _dynamic_dims(text, inputs, declared.get("dynamic_dims") or {})
    domains = parse_domains(text, declared.get("input_domains"), inputs)
    for name, domain in domains.items():
        why = domain.fits(tuple(inputs[name].shape))
        if why:
            raise NebisectError(f"{text}: the domain of {name!r}: {why}")
        if not domain.contains(inputs[name].detach().cpu().numpy()):
            raise NebisectError(f"{text}: example input {name!r} lies outside its declared "
                                f"domain {domain.describe()}")
    source = TorchSource(text, module, inputs, dynamic, domains, paths=paths)
    masked = declared.get("masked_outputs")
    if masked is not None:
        source.masked_outputs = parse_masked_outputs(
            text, masked, source.output_names(), source.mask_inputs())
    return source


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))}"
    return f"a {type(value).__name__}"


def named_inputs(text: str, module: Any, given: Any) -> dict[str, Any]:
    """Example inputs keyed by name, in ``forward``'s parameter order.

    They must be ``forward``'s leading positional parameters, so both converters can
    pass them positionally and the package's inputs line up with the module's. A tuple
    is named by those parameters; where ``forward(*args)`` takes more than it names,
    the rest are ``x0, x1, …`` by position (``x2`` is the third input), and a dict is
    then taken in its own order.
    """
    import torch

    signature = inspect.signature(module.forward).parameters.values()
    params = [p.name for p in signature if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in signature)
    if isinstance(given, torch.Tensor):
        given = (given,)
    if isinstance(given, (tuple, list)):
        if len(given) > len(params) and not variadic:
            raise NebisectError(
                f"{text}: {len(given)} example inputs but forward() names only "
                f"{len(params)} ({', '.join(params)})"
            )
        names = [*params, *(f"x{i}" for i in range(len(params), len(given)))]
        given = dict(zip(names, given, strict=False))
    if not isinstance(given, dict) or not given:
        raise NebisectError(
            f"{text}: 'example_inputs' must be a non-empty tuple or dict of tensors, "
            f"got {_describe(given)}"
        )
    leading = params[:len(given)]
    if set(leading) - set(given) or (not variadic and set(given) != set(leading)):
        raise NebisectError(
            f"{text}: example inputs {sorted(map(str, given))} must be forward()'s first "
            f"{len(given)} parameter(s): {', '.join(leading) or 'none'}"
        )
    order = [*leading, *(name for name in given if name not in leading)]
    for name in order:
        if not isinstance(given[name], torch.Tensor):
            raise NebisectError(
                f"{text}: example input {name!r} is a {type(given[name]).__name__}, "
                "not a tensor"
            )
    return {str(name): given[name] for name in order}


def _dynamic_dims(
    text: str, inputs: dict[str, Any], given: Any
) -> dict[str, dict[int, Range]]:
    if not isinstance(given, dict):
        raise NebisectError(f"{text}: 'dynamic_dims' must be {{input: {{axis: (min, max)}}}}")
    dims: dict[str, dict[int, Range]] = {}
    for name, axes in given.items():
        if name not in inputs:
            raise NebisectError(
                f"{text}: dynamic_dims names {name!r}, not an input ({', '.join(inputs)})"
            )
        if not isinstance(axes, dict):
            raise NebisectError(f"{text}: dynamic_dims[{name!r}] must be {{axis: (min, max)}}")
        shape = tuple(inputs[name].shape)
        dims[name] = {}
        for axis, bounds in axes.items():
            index = _axis(text, name, axis, len(shape))
            dims[name][index] = _bounds(text, name, index, bounds, shape)
    return dims


def _axis(text: str, name: str, axis: Any, rank: int) -> int:
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise NebisectError(f"{text}: dynamic axis {axis!r} of {name!r} is not in a rank-{rank} "
                            "tensor")
    return axis % rank


def _bounds(text: str, name: str, axis: int, bounds: Any, shape: tuple[int, ...]) -> Range:
    ok = (isinstance(bounds, (tuple, list)) and len(bounds) == 2
          and all(isinstance(b, int) for b in bounds) and 1 <= bounds[0] <= bounds[1])
    if not ok:
        raise NebisectError(
            f"{text}: dynamic_dims[{name!r}][{axis}] must be (min, max) with 1 <= min <= max, "
            f"got {bounds!r}"
        )
    lo, hi = int(bounds[0]), int(bounds[1])
    if not lo <= shape[axis] <= hi:
        raise NebisectError(
            f"{text}: example input {name!r} has size {shape[axis]} on axis {axis}, outside "
            f"its dynamic range ({lo}, {hi})"
        )
    return lo, hi


def to_torch_inputs(
    source: TorchSource, arrays: dict[str, np.ndarray], float_dtype: Any
) -> dict[str, Any]:
    """Numpy inputs → tensors in the example inputs' integer dtypes / ``float_dtype``."""
    import torch

    missing = sorted(set(source.example_inputs) - set(arrays))
    if missing:
        raise NebisectError(f"{source.location}: inputs missing: {', '.join(missing)}")
    tensors = {}
    for name, example in source.example_inputs.items():
        tensor = torch.from_numpy(np.ascontiguousarray(arrays[name]))
        tensors[name] = tensor.to(float_dtype if example.dtype.is_floating_point
                                  else example.dtype)
    return tensors


def run_module(module: Any, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Call ``module(*inputs.values())`` without autograd; name and convert the outputs.

    Positionally: the inputs are ``forward``'s leading parameters in order (see
    :func:`named_inputs`), which also reaches a ``forward(*args)``.
    """
    import torch

    with torch.no_grad():
        result = module(*inputs.values())
    return output_arrays(result)


def output_arrays(result: Any) -> dict[str, np.ndarray]:
    """``forward``'s result as named numpy arrays (bf16 widened to float32)."""
    import torch

    if isinstance(result, torch.Tensor):
        named = {"output": result}
    elif isinstance(result, dict):
        named = {str(k): v for k, v in result.items()}
    elif isinstance(result, (tuple, list)):
        named = {f"output_{i}": v for i, v in enumerate(result)}
    else:
        raise NebisectError(f"forward() returned a {type(result).__name__}; return a tensor, "
                            "a tuple of tensors or a dict of tensors")
    arrays = {}
    for name, value in named.items():
        if not isinstance(value, torch.Tensor):
            raise NebisectError(f"output {name!r} is a {type(value).__name__}, not a tensor")
        value = value.detach()
        if value.dtype == torch.bfloat16:
            value = value.float()
        arrays[name] = value.numpy()
    return arrays
