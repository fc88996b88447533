"""Torch's own intermediate values, named as the converted program names them.

A conversion culprit (:func:`nebisect.detect.culprit.by_torch`) is the first op of the
converted program whose value disagrees with the value torch computes for the same node.
This module records torch's side, in an isolated child (:func:`record_job`): the graph of
one conversion path — the graph the converter was handed — evaluated on one input set at
the reference's precision, every node's value kept.

* ``export`` — the program :mod:`nebisect.sources.convert` converts (``torch.export`` of
  the module, then ``run_decompositions({})``), run node by node by a
  ``torch.fx.Interpreter`` with every floating dtype widened to the reference's (its
  parameters, its inputs, every ``dtype`` an op names, the default dtype): the node
  names are exactly those coremltools names the MIL values after.
* ``trace`` — the TorchScript graph of the module traced at the reference's precision,
  kept only when it is, node for node, the graph traced at float32 (what was
  converted). Each value is cloned where it is produced, so that a later in-place op
  (``masked_fill_``) cannot rewrite it, and is named only when its debug name is a word
  (``input.5`` → ``input_5``): coremltools renumbers the numeric ones (``%52``) before it
  names values after them.

Each node carries its op and the nodes it reads, which the parent checks a match with,
and in ``mil`` the name coremltools gives the value it converts the node to
(:func:`~nebisect.sources.torch_module.coreml_name`), or '' where that is not sure. The
values come back as ``torchmid:<torch name>`` arrays: torch's intermediates by torch's
own names, never mistaken for the ``refmid:`` values of a program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.arrays import load_npz
from nebisect.codec import Record
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Needs
from nebisect.sources.loading import ChildSubject, describe_with_arrays, record_outcome

#: the prefix of torch's intermediates among a job's arrays
TORCH_PREFIX = "torchmid:"
RECORDING = ChildSubject("recording torch's intermediates", "its record")


@dataclass
class TorchNode(Record):
    """One node of a path's graph: its name in torch (an FX node's, a TorchScript
    value's debug name), its op without namespace or overload (``masked_fill``), the
    nodes it reads, and the name of the MIL value coremltools converts it to ('' when
    that cannot be told)."""

    name: str
    op: str
    inputs: tuple[str, ...] = ()
    mil: str = ""


@dataclass
class TorchGraph(Record):
    """The nodes of one conversion path's graph in order (graph inputs first)."""

    path: str
    nodes: list[TorchNode] = field(default_factory=list)


@dataclass(frozen=True)
class RecordArguments:
    """The arguments of :func:`record_job`: the torch source, its inputs file, the
    conversion path whose graph is recorded and the precision it runs at."""

    source: str
    inputs: str
    path: str
    precision: str


def record_job(arguments: RecordArguments) -> tuple[Any, dict[str, np.ndarray]]:
    """Child side of :func:`torch_intermediates`."""

    def build() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        from nebisect.sources.torch_load import load_torch_source

        source = load_torch_source(arguments.source)
        graph, values = record_graph(source, load_npz(arguments.inputs), arguments.path,
                                     arguments.precision)
        return graph.to_dict(), {f"{TORCH_PREFIX}{k}": v for k, v in values.items()}

    return record_outcome(build)


def torch_intermediates(location: str, inputs: str, path: str, precision: str, *,
                        isolator: Isolator, needs: Needs, timeout: float,
                        ) -> tuple[TorchGraph, dict[str, np.ndarray]] | None:
    """The graph of ``path`` for the torch source at ``location`` and its values on the
    inputs file ``inputs`` at ``precision`` (``fp64``/``fp32``), recorded in a child with
    ``needs``; None when the child could not record them (the caller falls back to the
    outputs)."""
    try:
        record, arrays = describe_with_arrays(
            f"{__name__}:record_job", RecordArguments(location, inputs, path, precision),
            label=location, subject=RECORDING, timeout=timeout, needs=needs,
            isolator=isolator)
    except NebisectError:
        return None
    values = {k[len(TORCH_PREFIX):]: v for k, v in arrays.items() if k.startswith(TORCH_PREFIX)}
    return TorchGraph.from_dict(record), values


def record_graph(source: Any, arrays: dict[str, np.ndarray], path: str, precision: str,
                 ) -> tuple[TorchGraph, dict[str, np.ndarray]]:
    """The graph of ``path`` for ``source`` (a
    :class:`~nebisect.sources.torch_module.TorchSource`) and every tensor value it
    computes on ``arrays`` at ``precision``, by torch name (see the module docstring)."""
    import torch

    from nebisect.mil.quiet import quiet
    from nebisect.sources.torch_module import PATHS, TORCH_DTYPE_NAMES, to_torch_inputs

    if precision not in TORCH_DTYPE_NAMES or path not in PATHS:
        raise NebisectError(f"cannot record torch's intermediates on {path} at {precision}")
    dtype = getattr(torch, TORCH_DTYPE_NAMES[precision])
    inputs = to_torch_inputs(source, arrays, dtype)
    # The graph is made as the converter made it: from the module as the factory built
    # it, on the example inputs, with autograd on (under no_grad torch's fused fast
    # paths, e.g. nn.TransformerEncoderLayer's, would be another graph).
    source.reset_buffers()
    with quiet():
        if path == "export":
            return _exported(source, inputs, dtype)
        return _traced(source, inputs, dtype)


def _exported(source: Any, inputs: dict[str, Any], dtype: Any,
              ) -> tuple[TorchGraph, dict[str, np.ndarray]]:
    """The torch.export path: the converted program, interpreted with floats widened."""
    import torch
    from torch.export.graph_signature import InputKind

    from nebisect.sources.convert import convertible
    from nebisect.sources.torch_module import coreml_name, export_module

    program = export_module(source, convertible(source)).run_decompositions({})
    state = {**program.state_dict, **program.constants}
    given = iter(inputs.values())
    args = [next(given) if spec.kind == InputKind.USER_INPUT else state[spec.target]
            for spec in program.graph_signature.input_specs]
    recorder = _widening_recorder(program.graph_module, dtype)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.no_grad():
            recorder.run(*[_widened(a, dtype) for a in args])
    finally:
        torch.set_default_dtype(default)
    # the program's inputs are named as the source's (``ct.TensorType`` names them),
    # whatever the placeholders are called (``args_0`` of a wrapper's ``forward(*args)``)
    named = dict(zip((spec.arg.name for spec in program.graph_signature.input_specs
                      if spec.kind == InputKind.USER_INPUT), source.example_inputs, strict=True))
    nodes = [TorchNode(node.name, _fx_op(node), tuple(n.name for n in node.all_input_nodes),
                       coreml_name(named.get(node.name, node.name)))
             for node in program.graph.nodes if node.op in ("placeholder", "call_function")]
    return TorchGraph("export", nodes), recorder.values


def _widened(value: Any, dtype: Any) -> Any:
    """``value`` with a floating dtype, or a floating tensor, taken to ``dtype``."""
    import torch

    if isinstance(value, torch.dtype) and value.is_floating_point:
        return dtype
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def _widening_recorder(module: Any, dtype: Any) -> Any:
    """A ``torch.fx.Interpreter`` of ``module`` that widens every floating argument to
    ``dtype`` and keeps a copy of every tensor a ``call_function`` node computes."""
    import torch

    class Recorder(torch.fx.Interpreter):
        def __init__(self) -> None:
            super().__init__(module)
            self.values: dict[str, np.ndarray] = {}

        def run_node(self, n: torch.fx.Node) -> Any:
            value = super().run_node(n)
            if n.op == "call_function" and isinstance(value, torch.Tensor):
                self.values[n.name] = _array(value)
            return value

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            widen = lambda a: _widened(a, dtype)  # noqa: E731
            return super().call_function(target, torch.fx.node.map_aggregate(args, widen),
                                         torch.fx.node.map_aggregate(kwargs, widen))

    return Recorder()


def _fx_op(node: Any) -> str:
    """An FX node's op: ``masked_fill`` of ``aten.masked_fill.Scalar``, ``input`` for a
    graph input."""
    if node.op == "placeholder":
        return "input"
    return str(getattr(node.target, "_opname", getattr(node.target, "__name__", node.target)))


def _traced(source: Any, inputs: dict[str, Any], dtype: Any,
            ) -> tuple[TorchGraph, dict[str, np.ndarray]]:
    """The jit.trace path: the module traced at ``dtype``, the graph's every value."""
    import torch

    from nebisect.sources.convert import convertible

    if source.traced is not None:
        raise NebisectError("a TorchScript program cannot be traced again at another precision")
    example = tuple(source.example_inputs.values())
    converted = torch.jit.trace(convertible(source), example, check_trace=False)
    traced = torch.jit.trace(convertible(source, module=source.module_in(dtype)),
                             tuple(_widened(v, dtype) for v in example), check_trace=False)
    graph = traced.inlined_graph
    if _outline(graph) != _outline(converted.inlined_graph):
        raise NebisectError(f"the module traces differently in {dtype}: its values cannot be "
                            "named as the converted program's")
    nodes, recorded = _script_nodes(graph, list(source.example_inputs))
    with torch.no_grad():
        computed = _recording_function(graph, [value for _, value in recorded])(
            traced._c, *inputs.values())
    values = {name: _array(value)
              for (name, _), value in zip(recorded, computed[1:], strict=True)}
    return TorchGraph("trace", nodes), values


def _outline(graph: Any) -> list[tuple[str, tuple[str, ...]]]:
    """What two traces must share for their debug names to mean the same values."""
    return [(n.kind(), tuple(o.debugName() for o in n.outputs())) for n in graph.nodes()]


def _script_nodes(graph: Any, inputs: list[str]) -> tuple[list[TorchNode], list[tuple[str, Any]]]:
    """The graph's inputs (named as the program names them: ``inputs``, the source's) and
    ``aten`` nodes as records, and (debug name, a clone of the value inserted where it is
    produced) for each tensor they compute under a name a MIL value can have."""
    import torch

    from nebisect.sources.torch_module import coreml_name

    nodes = [TorchNode(v.debugName(), "input", (), coreml_name(name))
             for v, name in zip(list(graph.inputs())[1:], inputs, strict=True)]
    none = graph.insertConstant(None)
    none.node().moveBefore(next(iter(graph.nodes())))
    recorded = []
    for node in list(graph.nodes()):
        if not node.kind().startswith("aten::"):
            continue
        reads = tuple(v.debugName() for v in node.inputs())
        for value in node.outputs():
            name = value.debugName()
            mil = "" if name[:1].isdigit() else coreml_name(name)
            nodes.append(TorchNode(name, _script_op(node.kind()), reads, mil))
            if mil and isinstance(value.type(), torch._C.TensorType):
                clone = graph.create("aten::clone", [value, none], 1)
                clone.insertAfter(node)
                clone.output().setType(value.type())
                recorded.append((name, clone.output()))
    return nodes, recorded


def _script_op(kind: str) -> str:
    """``aten::masked_fill_`` → ``masked_fill`` (an in-place op is its op)."""
    op = kind.partition("::")[2]
    return op[:-1] if op.endswith("_") and not op.endswith("__") else op


def _recording_function(graph: Any, values: list[Any]) -> Any:
    """A function of ``graph`` that returns its output and ``values``, as one tuple."""
    import torch

    for value in values:
        graph.registerOutput(value)
    graph.makeMultiOutputIntoTuple()
    return torch._C._create_function_from_graph("nebisect_record", graph)


def _array(value: Any) -> np.ndarray:
    """A tensor as the numpy array it holds (copied: it is no longer torch's to change)."""
    return value.detach().cpu().resolve_conj().numpy().copy()
