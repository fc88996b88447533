"""Which values of a converted program are torch's own values, node by node.

coremltools names the MIL value it converts a torch node to after the node: the FX
node's name on the torch.export path, the sanitized debug name on the jit.trace path
(:mod:`nebisect.sources.torch_graph` records torch's side and says which names are
sure). A name alone proves little — coremltools also names the values it makes itself
(``mul_1`` inside a lowered attention) — so a MIL value matches the torch node of its
name only with

* the same shape;
* an op coremltools may end that node's conversion with: the node's own op name, one of
  :data:`LOWERED` (``masked_fill`` → ``select``), or a ``cast``/``identity``, which pass
  the value on;
* the same place in the graph (:func:`placed`): torch's nearest inputs that the program
  computes too — looked for through the nodes it holds no value of (a ``clone``, a
  ``dropout``, a folded constant) — are all among the MIL value's ancestors, and there
  is at least one; and where torch's op only moves data (a ``transpose``), so do the MIL
  ops between those inputs and the value. coremltools' passes move arithmetic across
  such ops: its attention lowering scales the query before the ``transpose`` that keeps
  torch's name (SegFormer's ``transpose_10`` holds a quarter of torch's).

Nothing else is matched: an unmatched value is never compared. A matched value that
disagrees is where a failure enters only if its divergence reaches a diverging output
(:func:`reaching`): torch's own code may compute a value and discard it (T5's relative
position buckets cast ``log(0) = -inf`` to int64, which a ``where`` then drops; the
program's cast gives another integer there, and nothing downstream differs). The parent
side only: arrays and records in, no process, no torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.sources.torch_graph import TorchGraph, TorchNode

#: ops through which a MIL value is still the value named after the node
PASS_THROUGH = ("cast", "identity")
RESHAPES = ("reshape", "expand_dims", "squeeze")
#: MIL ops that only move (or retype) data
MIL_MOVES = (*PASS_THROUGH, *RESHAPES, "transpose", "slice_by_index", "slice_by_size", "tile",
             "concat", "stack", "split", "gather", "gather_along_axis", "reverse")
#: torch ops that only move data: between their inputs and their value a program may hold
#: nothing but :data:`MIL_MOVES`
TORCH_MOVES = ("view", "_unsafe_view", "view_copy", "reshape", "reshape_as", "unflatten",
               "flatten", "unsqueeze", "squeeze", "permute", "transpose", "t", "numpy_T",
               "select", "slice", "narrow", "expand", "expand_as", "repeat", "cat", "stack",
               "clone", "contiguous", "alias", "detach")
CONVOLUTIONS = ("conv", "conv_transpose")
#: torch op → the MIL op types coremltools 9.0's torch frontend may end its conversion
#: with, where they are not the op's own name (read off ``frontend/torch/ops.py``); an
#: op missing here matches only a MIL op of its own name
LOWERED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("view", "_unsafe_view", "view_copy", "reshape", "reshape_as",
                     "unflatten", "flatten"), RESHAPES),
    "unsqueeze": ("expand_dims",),
    "squeeze": ("squeeze", "reshape"),
    **dict.fromkeys(("permute", "t", "numpy_T"), ("transpose",)),
    "select": ("slice_by_index", "gather", "squeeze"),
    **dict.fromkeys(("slice", "narrow"), ("slice_by_index", "slice_by_size")),
    **dict.fromkeys(("expand", "expand_as", "repeat"), ("tile", "reshape")),
    "cat": ("concat",),
    "stack": ("stack", "concat"),
    "linear": ("linear", "matmul", "add"),
    **dict.fromkeys(("matmul", "mm", "bmm"), ("matmul", "linear")),
    "addmm": ("linear", "add"),
    "baddbmm": ("add", "matmul"),
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "matmul"),
    "div": ("real_div", "floor_div", "mul"),
    "true_divide": ("real_div",),
    "floor_divide": ("floor_div",),
    "rsub": ("sub",),
    **dict.fromkeys(("neg", "square"), ("mul",)),
    "reciprocal": ("inverse",),
    "mul": ("mul", "logical_and"),
    "add": ("add", "logical_or"),
    **dict.fromkeys(("clamp", "clip"), ("clip", "maximum", "minimum")),
    "hardtanh": ("clip",),
    "clamp_min": ("maximum",),
    "clamp_max": ("minimum",),
    "hardsigmoid": ("sigmoid_hard",),
    "mean": ("reduce_mean",),
    "sum": ("reduce_sum",),
    "amax": ("reduce_max",),
    "amin": ("reduce_min",),
    "prod": ("reduce_prod",),
    "logsumexp": ("reduce_log_sum_exp",),
    "argmax": ("reduce_argmax",),
    "argmin": ("reduce_argmin",),
    **dict.fromkeys(("_softmax", "softmax"), ("softmax",)),
    **dict.fromkeys(("_log_softmax", "log_softmax"), ("log",)),
    **dict.fromkeys(("embedding", "index_select"), ("gather",)),
    "gather": ("gather_along_axis",),
    "index": ("gather", "gather_nd"),
    **dict.fromkeys(("masked_fill", "where"), ("select",)),
    "eq": ("equal",),
    "ne": ("not_equal",),
    "lt": ("less",),
    "le": ("less_equal",),
    "gt": ("greater",),
    "ge": ("greater_equal",),
    "bitwise_not": ("logical_not",),
    **dict.fromkeys(("bitwise_and", "__and__"), ("logical_and",)),
    **dict.fromkeys(("bitwise_or", "__or__"), ("logical_or",)),
    "native_layer_norm": ("layer_norm",),
    "_native_batch_norm_legit_no_training": ("batch_norm",),
    **dict.fromkeys(("convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                     "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"),
                    CONVOLUTIONS),
    **dict.fromkeys(("max_pool1d", "max_pool2d", "max_pool3d"), ("max_pool",)),
    **dict.fromkeys(("avg_pool1d", "avg_pool2d", "avg_pool3d"), ("avg_pool",)),
    **dict.fromkeys(("adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d"),
                    ("avg_pool", "reduce_mean")),
    **dict.fromkeys(("zeros", "ones", "full", "new_zeros", "new_ones", "new_full"), ("fill",)),
    **dict.fromkeys(("zeros_like", "ones_like", "full_like"), ("fill", "fill_like")),
    "arange": ("range_1d",),
    "flip": ("reverse",),
    **dict.fromkeys(("pad", "constant_pad_nd"), ("pad",)),
    "upsample_nearest2d": ("upsample_nearest_neighbor",),
    "upsample_bilinear2d": ("upsample_bilinear",),
}


def compatible(torch_op: str, mil_op: str) -> bool:
    """May coremltools end the conversion of ``torch_op`` with a ``mil_op``?"""
    return mil_op in (torch_op, *PASS_THROUGH, *LOWERED.get(torch_op, ()))


def candidates(graph: Any, program: dict[str, np.ndarray], torch_graph: TorchGraph,
               values: dict[str, np.ndarray]) -> dict[str, TorchNode]:
    """MIL value → the torch node of its name, for every value of ``program`` (by MIL
    name) whose node torch computed in ``values`` (by torch name) with the same shape and
    a compatible op (:func:`placed` is asked of a value only when it disagrees). A MIL
    name two torch nodes would both take is nobody's."""
    named: dict[str, list[TorchNode]] = {}
    for node in torch_graph.nodes:
        if node.mil:
            named.setdefault(node.mil, []).append(node)
    found = {}
    dag = graph.dag
    for op in dag.order:
        for name in dag.produces[op]:
            nodes = named.get(name, [])
            if len(nodes) != 1 or name not in program or nodes[0].name not in values:
                continue
            node = nodes[0]
            if (np.shape(values[node.name]) == np.shape(program[name])
                    and compatible(node.op, graph.op_types[op])):
                found[name] = node
    return found


def placed(graph: Any, matched: dict[str, TorchNode], torch_graph: TorchGraph) -> set[str]:
    """The MIL values of ``matched`` that are where their node is in torch's graph:
    torch's nearest inputs of the node that the program computes too (its values and
    inputs) are all among the value's ancestors, and there is one; for a node that only
    moves data, only data moves between them and the value."""
    dag = graph.dag
    held = set(dag.producer) | set(dag.inputs)
    nodes = {n.name: n for n in torch_graph.nodes}
    index, ancestors = _ancestors(dag)
    found = set()
    for name, node in matched.items():
        nearest = _nearest_held(node, nodes, held)
        if nearest and all(ancestors[name] >> index[v] & 1 for v in nearest) and (
                node.op not in TORCH_MOVES or _moves_only(graph, name, nearest)):
            found.add(name)
    return found


def _moves_only(graph: Any, name: str, inputs: set[str]) -> bool:
    """Are the MIL ops from ``inputs`` to the value ``name`` (its producer included) all
    :data:`MIL_MOVES`?"""
    dag = graph.dag
    seen: set[str] = set()
    stack = [name]
    while stack:
        value = stack.pop()
        producer = dag.producer.get(value)
        if value in inputs or value in seen or producer is None:
            continue
        seen.add(value)
        if graph.op_types[producer] not in MIL_MOVES:
            return False
        stack.extend(dag.consumes[producer])
    return True


def reaching(dag: Any, disagree: set[str], agree: set[str], ends: list[str]) -> set[str]:
    """The values of ``disagree`` whose divergence reaches one of ``ends`` (the
    diverging outputs): through values computed from a disagreeing one, never through a
    value known to agree (``agree``), which a discarded divergence ends at."""
    carried: set[str] = set()
    for op in dag.order:
        reads = any(v in carried for v in dag.consumes[op])
        carried.update(v for v in dag.produces[op]
                       if v in disagree or (reads and v not in agree))
    found: set[str] = set()
    seen: set[str] = set()
    stack = list(ends)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in disagree:
            found.add(name)
        producer = dag.producer.get(name)
        stack.extend(v for v in dag.consumes.get(producer, ()) if v in carried)
    return found


def _nearest_held(node: TorchNode, nodes: dict[str, TorchNode], held: set[str]) -> set[str]:
    """The MIL names of ``node``'s nearest torch inputs whose MIL name is in ``held``,
    looked for through the inputs that have none there."""
    found: set[str] = set()
    seen: set[str] = set()
    stack = list(node.inputs)
    while stack:
        name = stack.pop()
        read = nodes.get(name)
        if read is None or name in seen:
            continue  # a constant, or a node already followed
        seen.add(name)
        if read.mil in held:
            found.add(read.mil)
        else:
            stack.extend(read.inputs)
    return found


def _ancestors(dag: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Each value's bit, and every value's ancestors (program inputs included) as a set
    of those bits: one pass in program order, however many values are asked about."""
    index: dict[str, int] = {}
    for value in [*dag.inputs, *(v for op in dag.order for v in dag.produces[op])]:
        index.setdefault(value, len(index))
    ancestors = dict.fromkeys(dag.inputs, 0)
    for op in dag.order:
        mask = 0
        for value in dag.consumes[op]:
            if value in index:
                mask |= 1 << index[value] | ancestors.get(value, 0)
        ancestors.update(dict.fromkeys(dag.produces[op], mask))
    return index, ancestors
