"""torch models as reducible graphs: torch.export nodes are units, submodules are groups.

The model is exported once (``torch.export.export``, the graph coremltools' export path
converts; dynamic dims as ``torch.export.Dim``) and run once on its example inputs to
record every node's value. A subset of nodes becomes a new, self-contained torch module
— plain Python source that calls the same ``torch.ops.aten`` ops — so that a candidate
can be converted in a fresh process like any torch source, and the final one *is* the
repro's model. Rules of the cut:

* Call nodes whose value is a tensor (or nothing: assertions) are units. Weights
  (``get_attr``) and symbolic scalars (``sym_size`` and the arithmetic on them) are not:
  they travel with the units that read them, so a kept ``view(x, [1, s, -1])`` still
  sees the dynamic length ``s``. The tuple of a multi-output op and its ``getitem``\\ s
  form one unit.
* A value a kept node reads from a dropped node is either *bypassed* — "drop the
  submodule where shapes allow": replaced by the dropped node's first tensor argument
  when that has the same shape and dtype, transitively — or, failing that (or with
  ``bypass=False``), *recorded*: it becomes a new input fed with its value from the
  recording run, dynamic on every axis that carries one of the source's dynamic
  symbols.
* Outputs are the kept tensor values no kept node reads, plus kept graph outputs.

:attr:`FxGraph.levels` groups units by the submodule they run in (``nn_module_stack``)
at depth 1, 2, …: :func:`nebisect.search.ddmin.hierarchical_ddmin` strips whole submodules
before it looks at single nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz, sha256_arrays, sha256_bytes
from nebisect.mil.graph import ExtractionError
from nebisect.mil.quiet import quiet
from nebisect.search.divergence import Dag
from nebisect.sources.torch_module import TorchSource

Range = tuple[int, int]
#: Globals the generated forward may use, and how the module source defines them.
_PRELUDE = {
    "torch": "import torch",
    "device": "from torch import device",
    "inf": 'inf = float("inf")',
    "nan": 'nan = float("nan")',
    "NoneType": "NoneType = type(None)",
}
_TOP = "<top>"
_IGNORED_MODULES = frozenset({"_guards_fn"})


@dataclass
class TorchCandidate:
    """A subgraph as a standalone module: ``forward`` source, buffers, example inputs."""

    forward: str
    weights: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    dynamic_dims: dict[str, dict[int, Range]]
    nodes: list[str] = field(default_factory=list)

    def digest(self) -> str:
        """Content hash of the candidate (code, weight and input bytes, dynamic dims)."""
        dims = {name: {str(a): list(b) for a, b in axes.items()}
                for name, axes in self.dynamic_dims.items()}
        text = json.dumps([self.forward, sha256_arrays(self.weights),
                           sha256_arrays(self.inputs), dims], sort_keys=True)
        return sha256_bytes(text.encode())

    def to_record(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """JSON record (code, array names in order, dims, nodes) and the arrays under
        ``weights:``/``inputs:`` names: how a candidate crosses the process boundary."""
        record = {
            "forward": self.forward, "weights": list(self.weights), "inputs": list(self.inputs),
            "dynamic_dims": {name: {str(axis): list(b) for axis, b in axes.items()}
                             for name, axes in self.dynamic_dims.items()},
            "nodes": list(self.nodes),
        }
        arrays = {**{f"weights:{k}": v for k, v in self.weights.items()},
                  **{f"inputs:{k}": v for k, v in self.inputs.items()}}
        return record, arrays

    @classmethod
    def from_record(cls, record: dict[str, Any],
                    arrays: dict[str, np.ndarray]) -> TorchCandidate:
        return cls(
            forward=str(record["forward"]),
            weights={str(n): arrays[f"weights:{n}"] for n in record["weights"]},
            inputs={str(n): arrays[f"inputs:{n}"] for n in record["inputs"]},
            dynamic_dims={str(name): {int(axis): (int(b[0]), int(b[1]))
                                      for axis, b in axes.items()}
                          for name, axes in record["dynamic_dims"].items()},
            nodes=[str(n) for n in record["nodes"]],
        )

    def module_source(self, title: str) -> str:
        """Python source of the module class and its weights/inputs loading helpers."""
        lines = [line.rstrip() for line in self.forward.strip().splitlines()]
        body = "\n".join(f"    {line}" if line else "" for line in lines)
        dims = {name: {axis: tuple(b) for axis, b in axes.items()}
                for name, axes in self.dynamic_dims.items()}
        return _MODULE_TEMPLATE.format(
            title=docstring_text(title), prelude="\n".join(_PRELUDE.values()), forward=body,
            inputs=list(self.inputs), dynamic=repr(dims),
        )

    def write(self, directory: Path, title: str) -> str:
        """``model.py`` + ``weights.npz`` + ``inputs.npz`` in ``directory``; the torch
        source location ``directory/model.py:model``."""
        directory.mkdir(parents=True, exist_ok=True)
        save_npz(directory / "weights.npz", self.weights)
        save_npz(directory / "inputs.npz", self.inputs)
        source = self.module_source(title) + _FACTORY
        (directory / "model.py").write_text(source)
        return f"{directory / 'model.py'}:model"


_MODULE_TEMPLATE = '''"""{title}"""

from pathlib import Path

import numpy as np
{prelude}

HERE = Path(__file__).resolve().parent
INPUT_NAMES = {inputs!r}
DYNAMIC_DIMS = {dynamic}


class Minimized(torch.nn.Module):
    """The kept graph nodes, op for op (torch.ops.aten calls as torch.export recorded them)."""

    def __init__(self, weights: dict) -> None:
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name, torch.from_numpy(value))

{forward}


def load_arrays(name: str) -> dict:
    with np.load(HERE / name, allow_pickle=False) as data:
        return {{key: data[key] for key in data.files}}
'''

_FACTORY = '''

def model() -> dict:
    """nebisect's torch-source contract: module, named example inputs, dynamic dims."""
    inputs = load_arrays("inputs.npz")
    return {
        "module": Minimized(load_arrays("weights.npz")),
        "example_inputs": {name: torch.from_numpy(inputs[name]) for name in INPUT_NAMES},
        "dynamic_dims": DYNAMIC_DIMS,
    }
'''


def docstring_text(text: str) -> str:
    """``text`` made safe to sit between triple quotes in generated source."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _is_tensor_tuple(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and bool(value) and all(
        _is_tensor(v) or v is None for v in value
    )


class FxGraph:
    """The dependency view of an exported torch module and its recorded values.

    ``inputs`` (name → tensor, default: the source's example inputs) are what the
    recording runs on and what candidates are fed: a failure seen on particular inputs
    is reduced on those inputs.
    """

    def __init__(self, source: TorchSource, inputs: dict[str, Any] | None = None) -> None:
        import torch

        self.source = source
        given = inputs if inputs is not None else source.example_inputs
        self._run_with = [given[name] for name in source.example_inputs]
        dims = {b: torch.export.Dim(name, min=b[0], max=b[1])
                for b, name in source.symbols().items()}
        dynamic = {name: ({axis: dims[b] for axis, b in source.dynamic_dims[name].items()}
                          if name in source.dynamic_dims else None)
                   for name in source.example_inputs}
        try:
            with quiet():
                exported = torch.export.export(
                    source.module, tuple(source.example_inputs.values()),
                    dynamic_shapes=dynamic if source.dynamic_dims else None,
                )
                self.module = exported.module()
        except Exception as exc:
            raise ExtractionError(
                f"{source.location}: torch.export failed, so its graph cannot be reduced "
                f"({type(exc).__name__}: {str(exc).strip().splitlines()[0]})"
            ) from None
        self.nodes = {n.name: n for n in self.module.graph.nodes}
        self.inputs = [n.name for n in self.module.graph.nodes if n.op == "placeholder"]
        self.symbols = self._input_symbols()
        self.recorded = self._record()
        self._classify()

    # ----------------------------------------------------------------- structure
    def _classify(self) -> None:
        """Units, travelling nodes (weights, symbolic scalars), the Dag and the levels."""
        self.unit_nodes: dict[str, list[str]] = {}
        self.value_unit: dict[str, str] = {}
        self.travelling: set[str] = set()
        for node in self.module.graph.nodes:
            val = node.meta.get("val")
            if node.op == "get_attr":
                if not _is_tensor(self.recorded.get(node.name)):
                    raise ExtractionError(
                        f"node {node.name!r} is a subgraph ({node.target}: control flow); "
                        "it cannot be cut"
                    )
                self.travelling.add(node.name)
            elif node.op == "call_module":
                if node.target not in _IGNORED_MODULES:
                    raise ExtractionError(
                        f"node {node.name!r} calls submodule {node.target!r} (control flow); "
                        "it cannot be cut"
                    )
            elif node.op == "call_function":
                self._classify_call(node, val)
        outputs = [a.name for a in _flatten(self.module.graph.output_node().args)
                   if hasattr(a, "name")]
        order = list(self.unit_nodes)
        self.dag = Dag(
            order=order,
            consumes={u: self._consumed(u) for u in order},
            produces={u: self._produced(u) for u in order},
            inputs=self.inputs,
            outputs=outputs,
        )

    def _classify_call(self, node: Any, val: Any) -> None:
        source = getattr(node.args[0], "name", None) if node.args else None
        if source in self.unit_nodes and _is_tensor_tuple(self.nodes[source].meta.get("val")):
            self.unit_nodes[source].append(node.name)  # getitem of a tuple unit
            self.value_unit[node.name] = source
        elif val is None or _is_tensor(val) or _is_tensor_tuple(val):
            self.unit_nodes[node.name] = [node.name]
            self.value_unit[node.name] = node.name
        else:
            self.travelling.add(node.name)

    def _produced(self, unit: str) -> list[str]:
        names = self.unit_nodes[unit]
        return names[1:] if len(names) > 1 else [n for n in names
                                                  if _is_tensor(self.nodes[n].meta.get("val"))]

    def _consumed(self, unit: str) -> list[str]:
        seen: dict[str, None] = {}
        for name in self.unit_nodes[unit]:
            for value in self._tensor_reads(self.nodes[name]):
                if self.value_unit.get(value) != unit:
                    seen.setdefault(value)
        return list(seen)

    def _tensor_reads(self, node: Any) -> list[str]:
        """Tensor values ``node`` reads, looking through travelling scalar nodes."""
        found: list[str] = []
        for arg in node.all_input_nodes:
            if arg.op == "get_attr":
                continue
            if arg.name in self.travelling:
                found.extend(self._tensor_reads(arg))
            else:
                found.append(arg.name)
        return found

    @property
    def units(self) -> tuple[str, ...]:
        return self.dag.order

    def module_path(self, unit: str) -> list[str]:
        """Submodule qualified names from outermost to innermost (``[]``: top level)."""
        stack = self.nodes[unit].meta.get("nn_module_stack") or {}
        return [path for path, _ in stack.values()
                if path and not path.startswith("_empty_nn_module_stack")]

    @property
    def levels(self) -> list[Callable[[str], str]]:
        """Group-of-unit functions, depth 1 … deepest submodule nesting."""
        depth = max((len(self.module_path(u)) for u in self.units), default=0)
        return [self._level(d) for d in range(1, depth + 1)]

    def _level(self, depth: int) -> Callable[[str], str]:
        def group(unit: str) -> str:
            path = self.module_path(unit)
            return path[min(depth, len(path)) - 1] if path else _TOP

        return group

    # ----------------------------------------------------------------- recording
    def _input_symbols(self) -> dict[str, Range]:
        """Symbol name (``s53``) → (min, max) of each dynamic input axis."""
        symbols: dict[str, Range] = {}
        for name in self.inputs:
            shape = getattr(self.nodes[name].meta.get("val"), "shape", ())
            for axis, bounds in self.source.dynamic_dims.get(name, {}).items():
                symbols[str(shape[axis])] = bounds
        return symbols

    def _record(self) -> dict[str, Any]:
        import torch

        values: dict[str, Any] = {}

        class Recorder(torch.fx.Interpreter):
            def run_node(self, node: Any) -> Any:
                result = super().run_node(node)
                values[node.name] = result
                return result

        with torch.no_grad():
            Recorder(self.module).run(*self._run_with)
        return values

    # ----------------------------------------------------------------- materializing
    def candidate(self, units: Iterable[str], *, bypass: bool = True) -> TorchCandidate:
        """The subgraph of ``units`` as a :class:`TorchCandidate` (see the module doc)."""
        import torch

        cut = self.dag.cut(set(units))
        kept_nodes = [n for u in cut.units for n in self.unit_nodes[u]]
        if not kept_nodes:
            raise ExtractionError("cannot extract an empty set of nodes")
        kept = set(kept_nodes)
        feeds = {v: self._resolve(v, kept, bypass) for v in cut.inputs}
        graph = torch.fx.Graph()
        env: dict[str, Any] = {}
        inputs: dict[str, np.ndarray] = {}
        for name in sorted({f for f in feeds.values() if f not in kept},
                           key=list(self.nodes).index):
            env[name] = graph.placeholder(name)
            inputs[env[name].name] = _array(self.recorded[name])
        weights: dict[str, np.ndarray] = {}
        needed = self._travelling_closure(kept_nodes)

        def lookup(arg: Any) -> Any:
            if arg.name in env:
                return env[arg.name]
            return env[feeds[arg.name]]

        for node in self.module.graph.nodes:
            if node.name in needed and node.op == "get_attr":
                flat = node.name
                weights[flat] = _array(self.recorded[node.name])
                env[node.name] = graph.get_attr(flat)
            elif node.name in needed or node.name in kept:
                env[node.name] = graph.node_copy(node, lookup)
        outputs = [v for v in cut.outputs if _is_tensor(self.recorded.get(v))]
        if not outputs:
            raise ExtractionError("the kept nodes produce no tensor output")
        graph.output(env[outputs[0]] if len(outputs) == 1 else tuple(env[v] for v in outputs))
        code = graph.python_code("self")
        unknown = sorted(name for name in set(code.globals) - set(_PRELUDE)
                         if re.search(rf"\b{re.escape(name)}\b", code.src))
        if unknown:
            raise ExtractionError(f"generated code needs unsupported globals {unknown}")
        dynamic = self._dynamic({env[n].name: n for n in env if env[n].op == "placeholder"})
        return TorchCandidate(code.src, weights, inputs, dynamic, list(cut.units))

    def _resolve(self, value: str, kept: set[str], bypass: bool) -> str:
        """What feeds ``value`` in the cut: itself (a recorded or original input) or,
        bypassing dropped nodes, an upstream value of the same shape and dtype."""
        current = value
        while bypass and current not in kept and current not in self.inputs:
            node = self.nodes[current]
            same = next((a for a in node.all_input_nodes
                         if a.op != "get_attr" and a.name not in self.travelling
                         and _same_type(a.meta.get("val"), node.meta.get("val"))), None)
            if same is None:
                break
            current = same.name
        return current

    def _travelling_closure(self, kept_nodes: list[str]) -> set[str]:
        needed: set[str] = set()
        stack = list(kept_nodes)
        while stack:
            for arg in self.nodes[stack.pop()].all_input_nodes:
                if (arg.op == "get_attr" or arg.name in self.travelling) and (
                        arg.name not in needed):
                    needed.add(arg.name)
                    stack.append(arg.name)
        return needed

    def _dynamic(self, placeholders: dict[str, str]) -> dict[str, dict[int, Range]]:
        """Dynamic axes of the candidate's inputs (new name → original value name)."""
        dims: dict[str, dict[int, Range]] = {}
        for name, value in placeholders.items():
            shape = getattr(self.nodes[value].meta.get("val"), "shape", ())
            axes = {axis: self.symbols[str(size)] for axis, size in enumerate(shape)
                    if str(size) in self.symbols}
            if axes:
                dims[name] = axes
        return dims


def _same_type(a: Any, b: Any) -> bool:
    return (_is_tensor(a) and _is_tensor(b) and a.dtype == b.dtype
            and [str(s) for s in a.shape] == [str(s) for s in b.shape])


def _array(value: Any) -> np.ndarray:
    import torch

    tensor = value.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.contiguous().numpy().copy()


def _flatten(args: Any) -> list[Any]:
    if isinstance(args, (list, tuple)):
        return [x for a in args for x in _flatten(a)]
    return [args]
