"""A conversion culprit by torch's intermediates: MIL values matched to torch's nodes by
name, op, shape and place, the first that disagrees and reaches a diverging output blamed
(pure: arrays and records)."""

from __future__ import annotations

import numpy as np

from nebisect.detect.culprit import BY_TORCH, by_torch
from nebisect.detect.torch_match import candidates, compatible, placed, reaching
from nebisect.evaluate.programs import ProgramOutline
from nebisect.search.divergence import Dag
from nebisect.sources.torch_graph import TorchGraph, TorchNode

#: the MIL program of a padded attention as coremltools converts it on torch.export: the
#: key-padding mask built from the attention mask (``eq``, then a bool ``cast`` of its
#: own, then the ``select`` named after torch's ``masked_fill``), reshaped, read by the
#: attention; ``mul_1`` is a value coremltools made and named itself
OUTLINE = ProgramOutline(
    Dag(["equal_0", "cast_3", "masked_fill", "view_6", "linear_0", "sdpa_0", "mul_9", "add_0"],
        {"equal_0": ["attention_mask"], "cast_3": ["eq"], "masked_fill": ["cast_0"],
         "view_6": ["masked_fill"], "linear_0": ["x"], "sdpa_0": ["linear", "view_6"],
         "mul_9": ["linear"], "add_0": ["scaled_dot_product_attention", "mul_1"]},
        {"equal_0": ["eq"], "cast_3": ["cast_0"], "masked_fill": ["masked_fill"],
         "view_6": ["view_6"], "linear_0": ["linear"],
         "sdpa_0": ["scaled_dot_product_attention"], "mul_9": ["mul_1"], "add_0": ["output"]},
        ["x", "attention_mask"], ["output"]),
    {"equal_0": "equal", "cast_3": "cast", "masked_fill": "select", "view_6": "reshape",
     "linear_0": "linear", "sdpa_0": "scaled_dot_product_attention", "mul_9": "mul",
     "add_0": "add"})


def _node(name: str, op: str, *inputs: str) -> TorchNode:
    return TorchNode(name, op, inputs, name)


#: torch.export's graph: its own ``mul_1`` reads the attention's output
GRAPH = TorchGraph("export", [
    _node("x", "input"), _node("attention_mask", "input"), _node("p_weight", "input"),
    _node("eq", "eq", "attention_mask"), _node("zeros_like", "zeros_like", "eq"),
    _node("masked_fill", "masked_fill", "zeros_like", "eq"),
    _node("view_6", "view", "masked_fill"), _node("linear", "linear", "x", "p_weight"),
    _node("scaled_dot_product_attention", "scaled_dot_product_attention", "linear",
          "view_6"),
    _node("mul_1", "mul", "scaled_dot_product_attention"),
    _node("add", "add", "mul_1", "x")])

PADDED = np.array([[False, False, True]])
#: the program's output, which disagrees with torch's
OUTPUT = ["output"]
#: torch's values at float64: the additive mask is 0 / -inf
TORCH = {"eq": PADDED, "zeros_like": np.zeros((1, 3)),
         "masked_fill": np.array([[0.0, 0.0, -np.inf]]),
         "view_6": np.array([[[[0.0, 0.0, -np.inf]]]]), "linear": np.array([[1.0, 2.0, 3.0]]),
         "scaled_dot_product_attention": np.array([[1.5, 1.5, 1.5]]),
         "mul_1": np.array([[3.0, 3.0, 3.0]])}


def _program(**changed: np.ndarray) -> dict[str, np.ndarray]:
    """The exact program's values: torch's, but for ``changed`` and its own cast."""
    values = {name: TORCH[name] for name in ("eq", "masked_fill", "view_6", "linear",
                                             "scaled_dot_product_attention")}
    return {**values, "cast_0": PADDED, "mul_1": np.array([[9.0, 9.0, 9.0]]),
            "output": np.zeros((1, 3)), **changed}


def test_the_culprit_is_the_first_value_that_disagrees_with_its_torch_node() -> None:
    """The converter kept the mask bool (its ``zeros_like`` lost the dtype): the
    ``select`` named ``masked_fill`` holds bools where torch holds 0 / -inf, and every
    value after it disagrees too."""
    program = _program(masked_fill=PADDED, view_6=PADDED.reshape(1, 1, 1, 3),
                       scaled_dot_product_attention=np.array([[3.0, 3.0, 3.0]]))
    culprit = by_torch(OUTLINE, program, GRAPH, TORCH, OUTPUT, "fp32")
    assert culprit is not None
    assert (culprit.op, culprit.op_type, culprit.signature, culprit.matched) == (
        "masked_fill", "select", "mismatch:shape", True)
    assert culprit.compared == (
        f"{BY_TORCH}: the first value of the program whose disagreement with the "
        "torch.export node it is named after reaches the outputs, masked_fill: dtype bool "
        "where the reference is float64")
    # the chart: the values before it agree, the culprit and what follows do not (and
    # coremltools' own mul_1 is not torch's: not charted)
    assert [(e.name, e.passed) for e in culprit.ops] == [
        ("equal_0", True), ("masked_fill", False), ("view_6", False), ("linear_0", True),
        ("sdpa_0", False)]


def test_a_later_value_is_blamed_when_the_first_ones_agree() -> None:
    culprit = by_torch(OUTLINE, _program(scaled_dot_product_attention=np.array([[3.0] * 3])),
                       GRAPH, TORCH, OUTPUT, "fp32")
    assert culprit is not None and (culprit.op, culprit.signature) == (
        "sdpa_0", "mismatch:tolerance")


def test_a_value_named_like_a_torch_node_elsewhere_is_never_blamed() -> None:
    """coremltools' own ``mul_1`` reads the linear, torch's reads the attention: the
    names match, the places do not, so its disagreement blames nothing."""
    matched = candidates(OUTLINE, _program(), GRAPH, TORCH)
    assert "mul_1" in matched  # the name, op and shape match
    assert placed(OUTLINE, matched, GRAPH) == set(matched) - {"mul_1"}
    assert by_torch(OUTLINE, _program(), GRAPH, TORCH, OUTPUT, "fp32") is None


def test_a_converter_swapping_minus_inf_for_a_large_finite_value_agrees() -> None:
    """coremltools writes -inf as -3.4e38 on jit.trace: the mask means the same."""
    lowest = np.array([[0.0, 0.0, -3.4e38]])
    assert by_torch(OUTLINE, _program(masked_fill=lowest, view_6=lowest.reshape(1, 1, 1, 3)),
                    GRAPH, TORCH, OUTPUT, "fp32") is None


def test_only_a_compatible_op_and_the_same_shape_match() -> None:
    other = ProgramOutline(OUTLINE.dag, {**OUTLINE.op_types, "masked_fill": "softmax"})
    assert "masked_fill" not in candidates(other, _program(), GRAPH, TORCH)
    reshaped = candidates(OUTLINE, _program(view_6=np.zeros((3, 1))), GRAPH, TORCH)
    assert "view_6" not in reshaped and "masked_fill" in reshaped
    assert compatible("masked_fill", "select") and compatible("view", "reshape")
    assert compatible("layer_norm", "layer_norm") and compatible("linear", "cast")
    assert not compatible("masked_fill", "softmax") and not compatible("relu", "add")


def test_a_name_two_torch_nodes_would_take_is_nobodys() -> None:
    """``input.5`` and ``input_5`` both sanitize to ``input_5``: neither is matched."""
    twice = TorchGraph("trace", [*GRAPH.nodes, TorchNode("masked_fill.1", "masked_fill",
                                                         ("eq",), "masked_fill")])
    assert "masked_fill" not in candidates(OUTLINE, _program(), twice,
                                           {**TORCH, "masked_fill.1": TORCH["masked_fill"]})


def test_nothing_matched_is_no_culprit() -> None:
    unnamed = TorchGraph("trace", [TorchNode(n.name, n.op, n.inputs) for n in GRAPH.nodes])
    assert candidates(OUTLINE, _program(masked_fill=PADDED), unnamed, TORCH) == {}
    assert by_torch(OUTLINE, _program(masked_fill=PADDED), unnamed, TORCH, OUTPUT,
                    "fp32") is None


#: T5's relative position buckets: torch casts log(0) = -inf to int64 (its lowest), the
#: program's cast gives another integer, and a ``where`` drops both; a ``mul`` after it
#: is where this program's outputs go wrong
BUCKETS = ProgramOutline(
    Dag(["log_0", "cast_5", "where_0", "mul_0", "add_0"],
        {"log_0": ["x"], "cast_5": ["log"], "where_0": ["x", "_to_copy"], "mul_0": ["where"],
         "add_0": ["mul", "x"]},
        {"log_0": ["log"], "cast_5": ["_to_copy"], "where_0": ["where"], "mul_0": ["mul"],
         "add_0": ["output"]}, ["x"], ["output"]),
    {"log_0": "log", "cast_5": "cast", "where_0": "select", "mul_0": "mul", "add_0": "add"})
BUCKET_GRAPH = TorchGraph("export", [
    _node("x", "input"), _node("log", "log", "x"), _node("_to_copy", "_to_copy", "log"),
    _node("where", "where", "x", "_to_copy"), _node("mul", "mul", "where"),
    _node("add", "add", "mul", "x")])
BUCKET_TORCH = {"log": np.array([-np.inf, 0.0]), "_to_copy": np.array([-2**63, 0]),
                "where": np.array([0, 0]), "mul": np.array([0.0, 0.0])}


def test_a_divergence_torch_itself_discards_is_not_the_culprit() -> None:
    program = {**BUCKET_TORCH, "_to_copy": np.array([-99, 0], np.int32),
               "mul": np.array([0.0, 1.0]), "output": np.array([1.0, 2.0])}
    culprit = by_torch(BUCKETS, program, BUCKET_GRAPH, BUCKET_TORCH, OUTPUT, "fp32")
    assert culprit is not None and (culprit.op, culprit.op_type) == ("mul_0", "mul")
    # without the where known to agree, the cast's divergence would reach the output
    dag = BUCKETS.dag
    assert reaching(dag, {"_to_copy", "mul"}, {"log", "where"}, OUTPUT) == {"mul"}
    assert reaching(dag, {"_to_copy", "mul"}, {"log"}, OUTPUT) == {"_to_copy", "mul"}
    # and a divergence that reaches no diverging output blames nothing
    assert reaching(dag, {"_to_copy"}, {"log", "where"}, OUTPUT) == set()


def test_a_moved_value_keeps_its_name_but_not_its_place() -> None:
    """coremltools' attention lowering scales the query before the transpose that keeps
    torch's name: SegFormer's ``transpose_10`` holds a quarter of torch's. torch's
    transpose only moves data; the program's holds a ``mul`` between: not matched."""
    moved = ProgramOutline(
        Dag(["reshape_0", "mul_3", "transpose_4", "matmul_0"],
            {"reshape_0": ["x"], "mul_3": ["view_12"], "transpose_4": ["mul_1"],
             "matmul_0": ["transpose_10"]},
            {"reshape_0": ["view_12"], "mul_3": ["mul_1"], "transpose_4": ["transpose_10"],
             "matmul_0": ["output"]}, ["x"], ["output"]),
        {"reshape_0": "reshape", "mul_3": "mul", "transpose_4": "transpose",
         "matmul_0": "matmul"})
    graph = TorchGraph("export", [_node("x", "input"), _node("view_12", "view", "x"),
                                  _node("transpose_10", "transpose", "view_12")])
    values = {"view_12": np.ones((2, 4)), "transpose_10": np.ones((4, 2))}
    program = {**values, "mul_1": np.full((2, 4), 0.25), "transpose_10": np.full((4, 2), 0.25)}
    matched = candidates(moved, program, graph, values)
    assert sorted(matched) == ["transpose_10", "view_12"]
    assert placed(moved, matched, graph) == {"view_12"}
    assert by_torch(moved, program, graph, values, OUTPUT, "fp32") is None
