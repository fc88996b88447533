"""``nebisect run``: isolated multi-target runs with attribution."""

from __future__ import annotations

from pathlib import Path

import typer

from nebisect import api
from nebisect.arrays import INPUTS_LIMIT_HELP
from nebisect.detect import DEFAULT_BUDGET, DEFAULT_STEPS
from nebisect.detect.run_console import print_run
from nebisect.evaluate.compression import DEFAULT_TOLERANCE
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options import (
    INPUT_RANGE_HELP,
    INPUT_RANGE_METAVAR,
    MASKED_OUTPUT_HELP,
    MEMORY_HELP,
)
from nebisect.sources.compress import FORMS
from nebisect.sources.inputs import DEFAULT_LENGTHS
from nebisect.targets.spec import REFERENCE_TARGET

ORDER = 10

SOURCE_HELP = (
    "An .mlpackage (ML program); a saved torch program: model.pt2 (torch.export.save) or "
    "TorchScript model.pt (saved with nebisect.save_torchscript, which keeps its example "
    "inputs); an ExecuTorch model.pte (each Core ML delegate runs as a package); or a "
    "torch model as path/to/file.py:factory. The factory "
    "takes no arguments and returns a dict with 'module' (torch.nn.Module), "
    "'example_inputs' (dict name → tensor, or a tuple of tensors named by forward()'s "
    "parameters, else x0, x1, … by position as for forward(*args); the names become the "
    "Core ML input names) and optionally 'dynamic_dims' ({input: {axis: (min, max)}}). "
    "See examples/meanpool.py."
)

RUN_HELP = """\
Run every prediction in a fresh process on each target and compare with a float64
reference; say where a divergence enters (conversion, precision, device; with
--baseline or --compress, compression).

It goes looking: besides the lengths (or --inputs) it evaluates the factory's example
inputs and value families (constant fills, scaled normals, spikes, special values,
…), probing first the input magnitudes lint predicts overflow fp16, and localizes a
cliff to two adjacent fp16 values. Each root cause is one finding — one culprit op,
one symptom (crash, error, nonfinite, collapse, shape, integer, tolerance), however
many targets, paths and input sets show it — most severe first, with where it shows,
its smallest trigger and the command that bisects it; then the matrix, one line per
target and path. --json has every row, the failure groups and a findings array.

A torch source is converted on torch.export and jit.trace (--convert). A path that
fails at coremltools' defaults for a reason nebisect's converter overrides cure is
converted again with them and judged all the same: the failure is a 'conversion'
finding, every row and finding on the overridden program says so
(--strict-conversion: the failure ends the path; --converter-overrides: overrides
from the start, no such finding).

The torch source's factory and every --plugin are loaded in isolated children: one
that raises, exits, crashes or hangs is a one-line error (exit 2), as is a package
whose program cannot load (a missing or corrupt weight file, an unknown op, a
cycle). A target whose outputs are not numeric arrays fails with an error of its
own. A reference that fails is a row of its own ("reference failed"); the targets
it should have judged are shown as not judged.

Placement is information: ops a target such as sim:ane or coreml:ne runs off its
device are a note per target (counted per op type, with the reason); with
--require ne a target that ran every compute op off the Neural Engine is 'unrouted'.

A multifunction package (ct.utils.save_multifunction: a prefill/decode pair, LoRA
adapters) is judged function by function, each with its own inputs, the default
first; --function NAME judges that one alone.

Exit code: 0 all pass, 1 a failure was found (a failing reference included), 2 usage
or input error.
"""


RUN_SOURCE_ARGUMENT = typer.Argument(None, help=SOURCE_HELP, show_default=False)
RUN_TARGET_OPTION = typer.Option(
    None, "--target", "-t",
    help="Target spec (repeatable), e.g. sim:ane, coreml:ne, torch:cpu:fp32. "
    "Default: coreml:cpu,gpu,ne,all on macOS; sim:fp32, sim:fp16, sim:ane elsewhere.",
)
RUN_INPUTS_OPTION = typer.Option(
    None, "--inputs",
    help=f"An .npz of named inputs (loaded without pickle). {INPUTS_LIMIT_HELP}",
)
RUN_LENGTHS_OPTION = typer.Option(
    ",".join(map(str, DEFAULT_LENGTHS)), "--lengths",
    help="Lengths for every flexible dimension, clipped to its range.",
)
RUN_REFERENCE_OPTION = typer.Option(
    "", "--reference",
    help=f"Oracle target (default: {REFERENCE_TARGET}; torch:cpu:fp64 for torch).",
)
RUN_TIMEOUT_OPTION = typer.Option(None, "--timeout", metavar=TIMEOUT_METAVAR, help=TIMEOUT_HELP)
RUN_MEMORY_OPTION = typer.Option(
    None, "--memory", metavar="SIZE", help=MEMORY_HELP, show_default=False)
RUN_CONVERTER_OVERRIDES_OPTION = typer.Option(
    False, "--converter-overrides",
    help="Install nebisect's converter overrides (the converter-compat fix: new_ones, "
    "aten::Int, …) before converting a torch source, on every path. Without it a path "
    "fails at coremltools' defaults first: see --strict-conversion.",
)
RUN_STRICT_CONVERSION_OPTION = typer.Option(
    False, "--strict-conversion",
    help="Let a conversion failure end its path, as plain coremltools does. By default a "
    "path that fails for a reason nebisect's converter overrides cure (a known "
    "coremltools / torch / NumPy incompatibility) is converted again with them and "
    "judged on every target like any other path — its rows and findings say 'converted "
    "with nebisect's converter overrides' — while the failure at coremltools' defaults "
    "stays a 'conversion' finding (exit 1).",
)
RUN_DEPLOYMENT_TARGET_OPTION = typer.Option(
    "", "--deployment-target", metavar="TARGET",
    help="Core ML deployment target to convert a torch source for (e.g. macOS14, iOS18). "
    "Default: the newest this macOS loads (iOS18 elsewhere).",
)
RUN_PLUGIN_OPTION = typer.Option(
    None, "--plugin",
    help="A module or .py file registering extra targets (repeatable); imported only in "
    "isolated children, never in nebisect's own process.",
)
RUN_EXPLORE_OPTION = typer.Option(
    "auto", "--explore",
    help="auto: also evaluate the factory's example inputs and search the value families "
    "(--list-families) within --budget predictions per target; none: only the lengths "
    "(or --inputs).",
)
RUN_BUDGET_OPTION = typer.Option(
    str(DEFAULT_BUDGET), "--budget", metavar="N",
    help="Exploration predictions per target (each evaluates every conversion path).",
)
RUN_STEPS_OPTION = typer.Option(
    str(DEFAULT_STEPS), "--steps", metavar="N",
    help="Successive predictions a stateful model (ct.StateType, iOS 18: a KV cache, a "
    "running sum; a torch module whose forward updates its buffers in place) is judged "
    "over on each input set, its state carried from one to the next as in a decode loop; "
    "a failure is pinned to its first step. A model without state is predicted once.",
)
RUN_FAMILIES_OPTION = typer.Option(
    "", "--families", metavar="A,B", help="Explore only these value families (default: all).")
RUN_LIST_FAMILIES_OPTION = typer.Option(
    False, "--list-families", help="List the value families and exit.")
RUN_SEED_OPTION = typer.Option(0, "--seed", help="Seed of the value families' random draws.")
RUN_INPUT_RANGE_OPTION = typer.Option(
    None, "--input-range", metavar=INPUT_RANGE_METAVAR, help=INPUT_RANGE_HELP)
RUN_MASKED_OUTPUT_OPTION = typer.Option(
    None, "--masked-output", metavar="OUTPUT=MASK", help=MASKED_OUTPUT_HELP)
RUN_CONVERT_OPTION = typer.Option(
    "both", "--convert", metavar="export|trace|both",
    help="Torch conversion paths: torch.export, jit.trace, or both (every path that "
    "converts is evaluated; a bug may live on one).",
)
RUN_JOBS_OPTION = typer.Option(
    None, "--jobs", "-j", show_default=False,
    help="Matrix cells and targets' explorations evaluated in parallel, each in "
    "isolated processes of its own (default: the cores this process may use).",
)
RUN_AS_JSON_OPTION = typer.Option(False, "--json", help="Print the matrix as JSON.")
RUN_REPORT_OPTION = typer.Option(
    None, "--report",
    help="Write report.json/report.html here, and the findings' triggers as with "
    "--save-triggers into its triggers/ (bisect --finding DIR/report.json#N).",
)
RUN_SAVE_TRIGGERS_OPTION = typer.Option(
    None, "--save-triggers", metavar="DIR",
    help="Write each finding's smallest failing inputs as DIR/N.npz (N: the finding's "
    "number, as --inputs reads it) and DIR/triggers.json: where each fails and the "
    "next commands (bisect, corpus add).",
)
RUN_MARKDOWN_OPTION = typer.Option(
    None, "--markdown", metavar="FILE",
    help="Write each finding as a ready upstream issue text (Markdown) for coremltools' "
    "maintainers: a title without nebisect's terms, the versions, where the divergence "
    "enters and at which op, the conversion paths and targets, torch against the "
    "converted program at the failing element (abs error, ULPs, the tolerance that "
    "would pass) and, for a file.py:factory, a standalone repro script inline. A run "
    "without findings writes a short text saying so. FILE's directory must exist.",
)
RUN_CLUSTER_OPTION = typer.Option(None, "--cluster", envvar=CLUSTER_ENV, help=CLUSTER_HELP)
RUN_REQUIRE_OPTION = typer.Option(
    None, "--require", metavar="ne|gpu",
    help="Fail closed on placement (repeatable): a target that places ops on this "
    "device and ran every compute op elsewhere is 'unrouted', a failure. Without it "
    "placement is information: a note per target, never a failure.",
)
RUN_FUNCTION_OPTION = typer.Option(
    "", "--function", metavar="NAME",
    help="The function of a multifunction .mlpackage to judge (default: every function, "
    "each a run of its own).",
)
RUN_BASELINE_OPTION = typer.Option(
    None, "--baseline", metavar="ORIGINAL.mlpackage",
    help="The uncompressed package a compressed SOURCE was made from (same inputs and "
    "outputs). Both are also evaluated exactly (sim:fp64) on the lengths (or --inputs) and "
    "the example; an input set whose compressed outputs move past --compression-tolerance "
    "is a 'compression' finding at the ops whose weights must stay uncompressed for it to "
    "pass (found by restoring weights from the baseline, ddmin). fp16's own error is shown "
    "beside compression's.",
)
RUN_COMPRESSION_TOLERANCE_OPTION = typer.Option(
    str(DEFAULT_TOLERANCE), "--compression-tolerance", metavar="FRACTION",
    help="With --baseline or --compress: how far compression may move an output, as a "
    "fraction of the output's largest |value| in the baseline (max |compressed - baseline| / max "
    "|baseline|). The default passes int8 linear quantization of an ordinary MLP (under 1%) "
    "and fails 2-bit palettization (20-40%).",
)

RUN_COMPRESS_OPTION = typer.Option(
    "", "--compress", metavar="SPEC",
    help="Judge what compressing a torch source's weights costs: convert it as usual "
    "(fp16; torch.export, else jit.trace), compress that package with "
    "coremltools.optimize.coreml and its defaults (weights of 2048+ elements), then judge "
    "the compressed package against the uncompressed one as --baseline does. SPEC: "
    f"{FORMS} (k-means palettization to N bits; symmetric linear quantization, a scale per "
    "output channel; magnitude pruning to that sparsity). Example: nebisect run "
    "model.py:factory --compress palettize:4 -t sim:fp16. A package source: compress it "
    "yourself and pass the original with --baseline.",
)


def run(
    source: str = RUN_SOURCE_ARGUMENT,
    target: list[str] = RUN_TARGET_OPTION,
    inputs: Path = RUN_INPUTS_OPTION,
    lengths: str = RUN_LENGTHS_OPTION,
    reference: str = RUN_REFERENCE_OPTION,
    timeout: list[str] = RUN_TIMEOUT_OPTION,
    memory: str = RUN_MEMORY_OPTION,
    converter_overrides: bool = RUN_CONVERTER_OVERRIDES_OPTION,
    strict_conversion: bool = RUN_STRICT_CONVERSION_OPTION,
    deployment_target: str = RUN_DEPLOYMENT_TARGET_OPTION,
    plugin: list[str] = RUN_PLUGIN_OPTION,
    explore: str = RUN_EXPLORE_OPTION,
    budget: str = RUN_BUDGET_OPTION,
    steps: str = RUN_STEPS_OPTION,
    families: str = RUN_FAMILIES_OPTION,
    list_families: bool = RUN_LIST_FAMILIES_OPTION,
    seed: int = RUN_SEED_OPTION,
    input_range: list[str] = RUN_INPUT_RANGE_OPTION,
    masked_output: list[str] = RUN_MASKED_OUTPUT_OPTION,
    convert: str = RUN_CONVERT_OPTION,
    jobs: int = RUN_JOBS_OPTION,
    as_json: bool = RUN_AS_JSON_OPTION,
    report: Path = RUN_REPORT_OPTION,
    save_triggers: Path = RUN_SAVE_TRIGGERS_OPTION,
    markdown: Path = RUN_MARKDOWN_OPTION,
    cluster: str = RUN_CLUSTER_OPTION,
    require: list[str] = RUN_REQUIRE_OPTION,
    function: str = RUN_FUNCTION_OPTION,
    baseline: Path = RUN_BASELINE_OPTION,
    compression_tolerance: str = RUN_COMPRESSION_TOLERANCE_OPTION,
    compress: str = RUN_COMPRESS_OPTION,
) -> None:
    """``nebisect run`` (its help is :data:`RUN_HELP`): :func:`nebisect.api.run` on the
    options as typed, then its table or JSON and the exit code."""
    if list_families:
        _list_families()
        return
    try:
        result = api.run(
            source, target=target, inputs=inputs, lengths=lengths, reference=reference,
            timeout=timeout, memory=memory, converter_overrides=converter_overrides,
            strict_conversion=strict_conversion, deployment_target=deployment_target,
            plugin=plugin, explore=explore,
            budget=budget, steps=steps, families=families or None, seed=seed,
            input_range=input_range, masked_output=masked_output, convert=convert,
            jobs=jobs, report=report, save_triggers=save_triggers, markdown=markdown,
            cluster=cluster,
            require=require, function=function, baseline=baseline,
            compression_tolerance=compression_tolerance, compress=compress)
    except api.Stopped as stop:
        assert isinstance(stop.result, api.RunResult)
        _emit(stop.result, as_json)
        raise
    _emit(result, as_json)
    raise typer.Exit(0 if result.ok else 1)


def _emit(result: api.RunResult | api.ProgramsResult, as_json: bool) -> None:
    """The JSON or the table (also of a run that was stopped); an ExecuTorch program's
    delegates, a multifunction package's functions, one after the other."""
    if as_json:
        typer.echo(result.to_json())
    elif isinstance(result, api.ProgramsResult):
        for header, program in zip(result.headers, result.programs, strict=True):
            typer.echo(f"{header} of {result.source}:")
            print_run(program.report, program.triggers)
    else:
        print_run(result.report, result.triggers)


def _list_families() -> None:
    from nebisect.inputs.families import listing

    for name, description in listing():
        typer.echo(f"{name:<10} {description}")


def register(app: typer.Typer) -> None:
    app.command("run", help=RUN_HELP)(run)
