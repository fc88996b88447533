"""Saved torch programs as torch sources: ``model.pt2`` and ``model.pt``.

Users often have the model as an artifact, not as code: an ``ExportedProgram`` saved
with ``torch.export.save`` (``.pt2``), or TorchScript saved with ``torch.jit.save``
(``.pt``, ``.pth``, ``.ts``). Either loads into the same :class:`TorchSource` a factory
builds, so conversion, the fp64 reference and bisection treat all three alike:

* ``.pt2`` — the module is ``program.module()``; its example inputs are the ones the
  program was exported with (``torch.export.save`` keeps them), its dynamic dims the
  ranges of the program's symbolic input sizes. It converts on the ``torch.export``
  path (the module exported again: the same graph); on ``jit.trace`` only when a
  TorchScript program saved beside it is named in its :data:`RECORD`, as a module
  captured from the caller's process has (:data:`EXPORTED_PATHS` says why).
* TorchScript — the module is the loaded ``ScriptModule``, converted as it is on the
  ``jit.trace`` path (a ScriptModule cannot be exported). TorchScript keeps no example
  inputs, so the file must carry them: :func:`save_scripted` writes them beside the
  program (``torch.jit.save``'s extra files); a file without them is a one-line error
  that says how to add them.

Either file may carry :data:`RECORD` too — the input domains, dynamic dims and masked
outputs a factory would declare — which is how a module captured from the caller's
process (:mod:`nebisect.sources.capture`) keeps what the caller said about it.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import load_npz_bytes
from nebisect.case import EXPORTED, torch_form
from nebisect.errors import NebisectError
from nebisect.files import parse_untrusted_json
from nebisect.isolation.job import OOM_PATTERN
from nebisect.sources.pickled import refuse_pickled
from nebisect.sources.torch_module import (
    PATHS,
    TorchSource,
    first_line,
    named_inputs,
    validated,
)

#: the extra file holding what a factory would declare besides the module
RECORD = "nebisect.json"
#: the extra file holding a TorchScript program's example inputs (an ``.npz``)
EXAMPLE = "example_inputs.npz"
#: the upper bound given to a dynamic size an ``ExportedProgram`` leaves unbounded
UNBOUNDED_SIZE = 2048
#: the paths that convert a TorchScript program (it cannot be exported again)
SCRIPTED_PATHS = ("trace",)
#: the path that converts an ExportedProgram: the program itself. Tracing its module
#: would trace a graph whose sizes export already specialized or made symbolic — not
#: what a user who traces the model gets — so the trace path runs only on a TorchScript
#: program saved beside it (``traced`` in :data:`RECORD`).
EXPORTED_PATHS = ("export",)


def load_saved(location: str) -> TorchSource:
    """The torch source saved at ``location``, an existing ``.pt2`` or TorchScript file
    (:func:`~nebisect.sources.torch_load.load_torch_source` checks both)."""
    return _load_exported(location) if torch_form(location) == EXPORTED else (
        _load_scripted(location))


def _load_exported(location: str) -> TorchSource:
    import torch

    extra = {RECORD: ""}
    refuse_pickled(location)
    logged = _Logged()
    logging.getLogger("torch.export").addHandler(logged)
    try:
        program = torch.export.load(location, extra_files=extra)
    except Exception as exc:
        refusal = _memory_refusal(exc, logged.texts)
        if refusal:
            raise MemoryError(refusal) from exc  # the child's verdict: oom
        raise NebisectError(f"{location}: not an ExportedProgram torch.export.load reads "
                            f"({type(exc).__name__}: {first_line(exc)})") from None
    finally:
        logging.getLogger("torch.export").removeHandler(logged)
    declared = _record(location, extra[RECORD])
    args, kwargs = program.example_inputs or ((), {})
    if kwargs or not args:
        raise NebisectError(f"{location}: the program was saved without positional example "
                            "inputs; export it with example args (torch.export.export(m, args))")
    module = program.module()
    inputs = named_inputs(location, module, tuple(args))
    dynamic = declared.get("dynamic_dims") or _symbolic_ranges(program, list(inputs))
    traced = _companion(location, declared.get("traced") or "")
    source = validated(location, module, inputs, {**declared, "dynamic_dims": dynamic},
                       PATHS if traced is not None else EXPORTED_PATHS)
    source.traced = traced
    return source


class _Logged(logging.Handler):
    """The records torch logs meanwhile: torch.export.load logs the error a weight's
    load raised (the allocator's refusal) and raises a generic one in its place."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


def _memory_refusal(exc: BaseException, logged: list[str]) -> str:
    """The allocator's refusal behind a failed load (its line), from the chain of
    causes or what torch logged; "" when the load failed for another reason."""
    texts = []
    seen: BaseException | None = exc
    while seen is not None:
        texts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    for text in [*texts, *logged]:
        line = next((ln for ln in text.splitlines() if OOM_PATTERN.search(ln)), "")
        if line:
            return line.strip()
    return ""


def _companion(location: str, name: str) -> Any:
    """The TorchScript program a ``.pt2`` names for the trace path (saved beside it by
    :mod:`nebisect.sources.capture`); None when it names none."""
    if not name:
        return None
    import torch

    path = Path(location).parent / Path(name).name
    if not path.is_file():
        raise NebisectError(f"{location}: names its trace-path program {name}, which is "
                            "not beside it")
    return torch.jit.load(str(path), map_location="cpu")


def _symbolic_ranges(program: Any, names: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """The (min, max) of each symbolic input size, by input name and axis; an unbounded
    maximum becomes :data:`UNBOUNDED_SIZE`."""
    import torch

    placeholders = [node for node in program.graph.nodes if node.op == "placeholder"]
    user = set(program.graph_signature.user_inputs)
    ranges: dict[str, dict[int, tuple[int, int]]] = {}
    for name, node in zip(names, [n for n in placeholders if n.name in user], strict=False):
        for axis, size in enumerate(node.meta["val"].shape):
            if isinstance(size, torch.SymInt):
                bounds = program.range_constraints.get(size.node.expr)
                lower = max(1, int(bounds.lower)) if bounds is not None else 1
                upper: Any = bounds.upper if bounds is not None else UNBOUNDED_SIZE
                upper = int(upper) if getattr(upper, "is_finite", True) else UNBOUNDED_SIZE
                ranges.setdefault(name, {})[axis] = (lower, max(lower, upper))
    return ranges


def _load_scripted(location: str) -> TorchSource:
    import torch

    extra: dict[str, Any] = {RECORD: "", EXAMPLE: ""}  # torch.jit.load fills in bytes
    try:
        module = torch.jit.load(location, map_location="cpu", _extra_files=extra)
    except Exception as exc:
        refusal = _memory_refusal(exc, [])
        if refusal:
            raise MemoryError(refusal) from exc
        raise NebisectError(f"{location}: not TorchScript torch.jit.load reads "
                            f"({type(exc).__name__}: {first_line(exc)}); a torch.save "
                            "checkpoint holds no program") from None
    if not extra[EXAMPLE]:
        raise NebisectError(
            f"{location}: TorchScript keeps no example inputs; save it with "
            "nebisect.save_torchscript(module, example_inputs, path), or run the module "
            "from Python: nebisect.run(module, example_inputs=...)")
    arrays = load_npz_bytes(extra[EXAMPLE], f"{location}:{EXAMPLE}")
    names = [argument.name for argument in module.forward.schema.arguments[1:]]
    if set(arrays) - set(names):
        raise NebisectError(f"{location}: its example inputs {', '.join(sorted(arrays))} are "
                            f"not forward()'s parameters ({', '.join(names)})")
    inputs = {name: torch.from_numpy(arrays[name]) for name in names if name in arrays}
    declared = _record(location, extra[RECORD])
    return validated(location, module, inputs, declared, SCRIPTED_PATHS)


def _record(location: str, text: str | bytes) -> dict[str, Any]:
    """The declarations a saved program carries (:data:`RECORD`; {} when none)."""
    if not text:
        return {}
    try:
        record = parse_untrusted_json(text if isinstance(text, str) else text.decode())
    except ValueError:
        raise NebisectError(f"{location}: its {RECORD} is not JSON") from None
    if not isinstance(record, dict):
        raise NebisectError(f"{location}: its {RECORD} is not an object")
    dims = record.get("dynamic_dims") or {}
    if not isinstance(dims, dict) or not all(isinstance(axes, dict) for axes in dims.values()):
        raise NebisectError(f"{location}: its {RECORD} has malformed dynamic_dims")
    record["dynamic_dims"] = {name: {int(axis): tuple(bounds) for axis, bounds in axes.items()}
                              for name, axes in dims.items()}
    return record


def declarations(source: TorchSource, traced: str = "") -> str:
    """:data:`RECORD` for ``source``: what it declares besides module and inputs (and
    the trace-path program saved beside it)."""
    return json.dumps({
        **({"traced": traced} if traced else {}),
        "dynamic_dims": {name: {str(axis): list(bounds) for axis, bounds in axes.items()}
                         for name, axes in source.dynamic_dims.items()},
        "input_domains": {name: domain.declaration
                          for name, domain in source.domains.items()},
        "masked_outputs": source.masked_outputs,
    }, sort_keys=True)


def save_exported(program: Any, source: TorchSource, destination: Path, *,
                  traced: str = "") -> None:
    """Save ``program`` (exported from ``source``'s module) with its declarations and,
    when given, the name of the TorchScript program beside it for the trace path."""
    import torch

    torch.export.save(program, str(destination),
                      extra_files={RECORD: declarations(source, traced)})


def save_scripted(module: Any, source: TorchSource, destination: Path) -> None:
    """Save a ScriptModule with ``source``'s example inputs and declarations."""
    import torch

    buffer = io.BytesIO()
    np.savez(buffer, **{name: tensor.detach().cpu().numpy()
                        for name, tensor in source.example_inputs.items()})
    torch.jit.save(module, str(destination),
                   _extra_files={RECORD: declarations(source), EXAMPLE: buffer.getvalue()})
