"""``nebisect run``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.arrays import INPUTS_LIMIT_HELP
from nebisect.detect import DEFAULT_BUDGET, DEFAULT_STEPS
from nebisect.evaluate.compression import DEFAULT_TOLERANCE
from nebisect.options.parsers import MASKED_OUTPUT_HELP
from nebisect.options.table import (
    AS_JSON,
    CACHE,
    CLUSTER,
    CONVERT,
    CONVERTER_OVERRIDES,
    FORCE,
    INPUT_RANGE,
    MEMORY,
    PLUGIN,
    REPORT,
    SEED,
    TIMEOUT,
    Command,
    Many,
    Numbers,
    Option,
    PathOption,
)
from nebisect.search.plan import DEFAULT_TIME_BUDGET, EXPENSIVE_PREDICTION, duration_words
from nebisect.sources.compress import FORMS
from nebisect.sources.inputs import DEFAULT_LENGTHS
from nebisect.targets.spec import REFERENCE_TARGET

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

RUN_SOURCE = Option("source", (), str, Any, None, SOURCE_HELP, show_default=False, api=False)
RUN_TARGETS = Option(
    "target", ("--target", "-t"), list[str], Many, None,
    "Target spec (repeatable), e.g. sim:ane, coreml:ne, torch:cpu:fp32. "
    "Default: coreml:cpu,gpu,ne,all on macOS; sim:fp32, sim:fp16, sim:ane elsewhere.")
RUN_INPUTS = Option("inputs", ("--inputs",), Path, PathOption, None,
                    f"An .npz of named inputs (loaded without pickle). {INPUTS_LIMIT_HELP}")
LENGTHS = Option("lengths", ("--lengths",), str, Numbers, ",".join(map(str, DEFAULT_LENGTHS)),
                 "Lengths for every flexible dimension, clipped to its range.")
RUN_REFERENCE = Option("reference", ("--reference",), str, str, "",
                       f"Oracle target (default: {REFERENCE_TARGET}; torch:cpu:fp64 for torch).")
STRICT_CONVERSION = Option(
    "strict_conversion", ("--strict-conversion",), bool, bool, False,
    "Let a conversion failure end its path, as plain coremltools does. By default a "
    "path that fails for a reason nebisect's converter overrides cure (a known "
    "coremltools / torch / NumPy incompatibility) is converted again with them and "
    "judged on every target like any other path — its rows and findings say 'converted "
    "with nebisect's converter overrides' — while the failure at coremltools' defaults "
    "stays a 'conversion' finding (exit 1).")
DEPLOYMENT_TARGET = Option(
    "deployment_target", ("--deployment-target",), str, str, "",
    "Core ML deployment target to convert a torch source for (e.g. macOS14, iOS18). "
    "Default: the newest this macOS loads (iOS18 elsewhere).", metavar="TARGET")
EXPLORE = Option(
    "explore", ("--explore",), str, str, "auto",
    "auto: also evaluate the factory's example inputs and search the value families "
    "(--list-families) within --budget predictions per target; none: only the lengths "
    "(or --inputs).")
RUN_BUDGET = Option("budget", ("--budget",), str, int | str | None, str(DEFAULT_BUDGET),
                    "Exploration predictions per target (each evaluates every conversion "
                    "path).", metavar="N")
TIME_BUDGET = Option(
    "time_budget", ("--time-budget",), str, str | float | None, None,
    "Wall time the whole run may take, e.g. 5m, 90s, 1h30m: the run measures one "
    "prediction per target and plans the exploration, culprit search and cliff "
    "localization that fit what the conversions and the example and lengths leave; once "
    "it is spent no new work starts, and the report says what was not explored. Without "
    f"it a model whose prediction takes over {EXPENSIVE_PREDICTION:g} s runs under "
    f"{duration_words(DEFAULT_TIME_BUDGET)}, said in the report.",
    metavar="DURATION", show_default=False)
RUN_STEPS = Option(
    "steps", ("--steps",), str, int | str | None, str(DEFAULT_STEPS),
    "Successive predictions a stateful model (ct.StateType, iOS 18: a KV cache, a "
    "running sum; a torch module whose forward updates its buffers in place) is judged "
    "over on each input set, its state carried from one to the next as in a decode loop; "
    "a failure is pinned to its first step. A model without state is predicted once.",
    metavar="N")
RUN_FAMILIES = Option("families", ("--families",), str, Many, "",
                      "Explore only these value families (default: all).", metavar="A,B")
LIST_FAMILIES = Option("list_families", ("--list-families",), bool, bool, False,
                       "List the value families and exit.", api=False)
MASKED_OUTPUT = Option("masked_output", ("--masked-output",), list[str], Many, None,
                       MASKED_OUTPUT_HELP, metavar="OUTPUT=MASK")
RUN_JOBS = Option(
    "jobs", ("--jobs", "-j"), int, int | None, None,
    "Matrix cells and targets' explorations evaluated in parallel, each in "
    "isolated processes of its own (default: the cores this process may use).",
    show_default=False)
SAVE_TRIGGERS = Option(
    "save_triggers", ("--save-triggers",), Path, PathOption, None,
    "Write each finding's smallest failing inputs as DIR/N.npz (N: the finding's "
    "number, as --inputs reads it) and DIR/triggers.json: where each fails and the "
    "next commands (bisect, corpus add).", metavar="DIR")
MARKDOWN = Option(
    "markdown", ("--markdown",), Path, PathOption, None,
    "Write each finding as a ready upstream issue text (Markdown) for coremltools' "
    "maintainers: a title without nebisect's terms, the versions, where the divergence "
    "enters and at which op, the conversion paths and targets, torch against the "
    "converted program at the failing element (abs error, ULPs, the tolerance that "
    "would pass) and, for a file.py:factory, a standalone repro script inline. A run "
    "without findings writes a short text saying so. FILE's directory must exist.",
    metavar="FILE")
REQUIRE = Option(
    "require", ("--require",), list[str], Many, None,
    "Fail closed on placement (repeatable): a target that places ops on this "
    "device and ran every compute op elsewhere is 'unrouted', a failure. Without it "
    "placement is information: a note per target, never a failure.", metavar="ne|gpu")
RUN_FUNCTION = Option(
    "function", ("--function",), str, str, "",
    "The function of a multifunction .mlpackage to judge (default: every function, "
    "each a run of its own).", metavar="NAME")
BASELINE = Option(
    "baseline", ("--baseline",), Path, PathOption, None,
    "The uncompressed package a compressed SOURCE was made from (same inputs and "
    "outputs). Both are also evaluated exactly (sim:fp64) on the lengths (or --inputs) and "
    "the example; an input set whose compressed outputs move past --compression-tolerance "
    "is a 'compression' finding at the ops whose weights must stay uncompressed for it to "
    "pass (found by restoring weights from the baseline, ddmin). fp16's own error is shown "
    "beside compression's.", metavar="ORIGINAL.mlpackage")
COMPRESSION_TOLERANCE = Option(
    "compression_tolerance", ("--compression-tolerance",), str, float | str | None,
    str(DEFAULT_TOLERANCE),
    "With --baseline or --compress: how far compression may move an output, as a "
    "fraction of the output's largest |value| in the baseline (max |compressed - baseline| / max "
    "|baseline|). The default passes int8 linear quantization of an ordinary MLP (under 1%) "
    "and fails 2-bit palettization (20-40%).", metavar="FRACTION")
COMPRESS = Option(
    "compress", ("--compress",), str, str, "",
    "Judge what compressing a torch source's weights costs: convert it as usual "
    "(fp16; torch.export, else jit.trace), compress that package with "
    "coremltools.optimize.coreml and its defaults (weights of 2048+ elements), then judge "
    "the compressed package against the uncompressed one as --baseline does. SPEC: "
    f"{FORMS} (k-means palettization to N bits; symmetric linear quantization, a scale per "
    "output channel; magnitude pruning to that sparsity). Example: nebisect run "
    "model.py:factory --compress palettize:4 -t sim:fp16. A package source: compress it "
    "yourself and pass the original with --baseline.", metavar="SPEC")

RUN_FORCE = FORCE.but(
    help="Replace an existing --markdown file, and the report.json/report.html a --report "
         "directory holds.")
RUN_AS_JSON = AS_JSON.but(help="Print the matrix as JSON.")
RUN_REPORT = REPORT.but(
    help="Write report.json/report.html here, and the findings' triggers as with "
         "--save-triggers into its triggers/ (bisect --finding DIR/report.json#N).")

RUN = Command("run", (
    RUN_SOURCE, RUN_TARGETS, RUN_INPUTS, LENGTHS, RUN_REFERENCE, TIMEOUT, MEMORY, CACHE,
    CONVERTER_OVERRIDES, STRICT_CONVERSION, DEPLOYMENT_TARGET, PLUGIN, EXPLORE, RUN_BUDGET,
    TIME_BUDGET, RUN_STEPS, RUN_FAMILIES, LIST_FAMILIES, SEED, INPUT_RANGE, MASKED_OUTPUT,
    CONVERT, RUN_JOBS, RUN_AS_JSON, RUN_REPORT, SAVE_TRIGGERS, MARKDOWN, RUN_FORCE, CLUSTER,
    REQUIRE,
    RUN_FUNCTION, BASELINE, COMPRESSION_TOLERANCE, COMPRESS))
