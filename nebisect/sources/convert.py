"""torch → MIL program → ``.mlpackage``, always inside isolation.

Conversion is a stage of its own: a converter that raises (or crashes) is a verdict at
stage ``convert`` carrying the converter's message, never a traceback in the user's
process. Both of coremltools' torch paths are tried and **both outcomes recorded** —
which path breaks is half the diagnosis when a torch / transformers / coremltools
upgrade lands:

* ``export`` — ``torch.export.export`` (dynamic dims as ``torch.export.Dim``), then
  ``run_decompositions({})`` as coremltools asks for torch's TRAINING dialect;
* ``trace`` — ``torch.jit.trace`` with dynamic dims as ``ct.RangeDim``.

:func:`convert_isolated` keeps the package of the first path that succeeds (export
preferred); :func:`convert_paths` keeps one package per path that converts, because the
two paths emit different MIL for one module and a bug may live on one of them (``run
--convert both``). Precision
follows the target: fp16 targets get a FLOAT16 program, everything else FLOAT32. Input
and output names come from the torch source (``nebisect.sources.torch_module``), so the package
and the eager module are compared name by name; an output that returns an input unchanged
(``return x``) passes through a multiplication by one, since coremltools cannot name an
output that is a program input (:func:`_convert_path`).

A module whose ``forward`` updates registered buffers in place (a KV cache, a running
sum: :meth:`~nebisect.sources.torch_module.TorchSource.state_buffers`) is converted as
coremltools' stateful recipe converts it, on both paths: each such buffer a
``ct.StateType`` (fp16, the only state dtype Core ML has) named as the buffer
(:func:`~nebisect.sources.torch_module.state_name`), for iOS 18 at least
(:func:`_stateful`); the conversion's note says so.

A run reports a path that fails while another converts as a failure of its own
(``nebisect.detect.matrix``): :func:`failed_attempts` reads those paths back from the
convert verdict.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.codec import Record, encode
from nebisect.errors import NebisectError
from nebisect.files import staged, write_text
from nebisect.isolate import Needs
from nebisect.isolation.job import OOM_PATTERN
from nebisect.mil.quiet import import_coremltools, quiet
from nebisect.sources.converter_overrides import CURED_OPS, FAILS_TOO, overrides_hint
from nebisect.sources.converter_setup import setup_function
from nebisect.sources.deployment import DEFAULT_DEPLOYMENT, running_deployment
from nebisect.sources.export_guards import violated_condition
from nebisect.sources.frontend import Refused, torch_step
from nebisect.sources.precisions import PrecisionOutcome, convert_at_precisions
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import (
    PATHS,
    TORCH_AND_COREMLTOOLS,
    TorchSource,
    export_module,
)
from nebisect.verdict import ConversionFacts, Stage, Status, Verdict, error_signature

if TYPE_CHECKING:
    from nebisect.isolate import Isolator
    from nebisect.sources.resolve import Source

#: The ``setup`` entry that installs nebisect's converter overrides in the child.
OVERRIDES_SETUP = "nebisect.sources.converter_overrides:install"
#: the paths' names as messages say them ("conversion, jit.trace path only")
PATH_LABELS = {"export": "torch.export", "trace": "jit.trace"}
#: what a path converted only with nebisect's converter overrides says, on its attempt
#: and on every verdict judged on its program
OVERRIDES_NOTE = f"converted with nebisect's converter overrides ({', '.join(CURED_OPS)})"
#: how the message of a failure at coremltools' defaults begins when the overrides
#: cured it (:func:`cured_failures`), and how it ends
CURED_PREFIX = "conversion fails at coremltools' defaults"
CURED_SUFFIX = "judged as converted with nebisect's converter overrides"


@dataclass
class ConversionAttempt(Record):
    """One conversion path's outcome: ``ok`` or ``failed`` with the converter's message;
    ``note`` says what nebisect did to make it convert (outputs kept apart from the
    inputs they return unchanged, nebisect's converter overrides installed); ``cured``
    is the converter's message at coremltools' defaults when the path converted only
    with nebisect's converter overrides (:data:`OVERRIDES_NOTE`), which the run keeps
    as a finding of its own (:func:`cured_failure`)."""

    path: str
    status: str
    message: str = ""
    seconds: float = 0.0
    note: str = ""
    cured: str = ""


def conversion_precision(precision: str) -> str:
    """fp16 targets get a FLOAT16 program; fp32/fp64 (and bf16 torch) get FLOAT32."""
    return "fp16" if precision == "fp16" else "fp32"


def convert_source(
    source: TorchSource, precision: str, *, deployment: str = DEFAULT_DEPLOYMENT,
    paths: tuple[str, ...] = PATHS, cure: bool = False,
) -> tuple[dict[str, Any], list[ConversionAttempt]]:
    """:func:`convert_precisions` at one precision: the converted MLModel of each path
    that converts (in order of ``paths``) and every attempt."""
    return convert_precisions(source, (precision,), deployment=deployment, paths=paths,
                              cure=cure)[conversion_precision(precision)]


def convert_precisions(
    source: TorchSource, precisions: tuple[str, ...], *, deployment: str = DEFAULT_DEPLOYMENT,
    paths: tuple[str, ...] = PATHS, cure: bool = False,
) -> dict[str, tuple[dict[str, Any], list[ConversionAttempt]]]:
    """Try ``paths`` in order, each converted from torch once for all of ``precisions``
    (:func:`~nebisect.sources.precisions.convert_at_precisions`: the first conversion
    precision converts, the others derive from its program); by conversion precision,
    the converted MLModel of each path that converts (in order) and every attempt.

    With ``cure``, a path that fails with a message nebisect's converter overrides are
    known to cure (:func:`~nebisect.sources.converter_overrides.overrides_hint`), while they
    are not installed, is converted again with them installed for that conversion only
    (:func:`_cured_path`): converted, its attempt is ``ok`` with the failure at
    coremltools' defaults as ``cured`` and :data:`OVERRIDES_NOTE`; failing again, it
    stays ``failed`` with its message at the defaults, and the note says what the
    overrides ran into next."""
    ct = import_coremltools()
    # fp32 first: the others derive from its program as FLOAT32 declares its outputs
    order = tuple(sorted(dict.fromkeys(conversion_precision(p) for p in precisions),
                         key=lambda precision: precision != "fp32"))
    options = {
        "convert_to": "mlprogram",
        "minimum_deployment_target": _deployment(ct, deployment),
        "outputs": [ct.TensorType(name=name) for name in source.output_names()],
        # Conversion is a stage of its own: without this ct.convert compiles and loads the
        # program on every compute unit (a Neural Engine compile included), and a
        # load-time crash would be blamed on the converter.
        "skip_model_load": True,
    }
    stateful = _stateful(ct, source, options)
    converted: dict[str, tuple[dict[str, Any], list[ConversionAttempt]]] = {
        precision: ({}, []) for precision in order}
    for path in (path for path in paths if path in source.paths):
        # every path converts the module as the factory built it, whatever an earlier
        # forward (naming the outputs, another path's trace) wrote in its buffers
        source.reset_buffers()
        outcomes, note = _convert_path(ct, path, source, options, order)
        note = "; ".join(n for n in (stateful, note) if n)
        curable = {precision: converter_message(outcome.error)
                   for precision, outcome in outcomes.items() if outcome.error is not None
                   and cure and overrides_hint(converter_message(outcome.error))
                   and not _overrides_installed()}
        cured = _cured_path(ct, path, source, options, curable) if curable else {}
        for precision, outcome in outcomes.items():
            models, attempts = converted[precision]
            if precision in cured:
                attempt, model = cured[precision]
            elif outcome.error is not None:
                attempt, model = ConversionAttempt(
                    path, "failed", converter_message(outcome.error)), None
            else:
                attempt, model = ConversionAttempt(path, "ok", "", note=note), outcome.model
            attempt.seconds = outcome.seconds + (attempt.seconds if precision in cured else 0)
            attempts.append(attempt)
            if model is not None:
                models[path] = model
    return converted


#: the deployment target coremltools' stateful recipe converts for (states are iOS 18's)
STATEFUL_DEPLOYMENT = "iOS18"


def _stateful(ct: Any, source: TorchSource, options: dict[str, Any]) -> str:
    """Convert the buffers ``forward`` updates in place as states: raise the deployment
    target of ``options`` to :data:`STATEFUL_DEPLOYMENT` where it is older (states are
    iOS 18's). Each path names the states after the buffers of the program it converts
    (:func:`_state_types`). Returns the conversion's note ("" without states)."""
    buffers = source.state_buffers()
    if not buffers:
        return ""
    stateful = _deployment(ct, STATEFUL_DEPLOYMENT)
    raised = ""
    if options["minimum_deployment_target"] < stateful:
        raised = f", for {STATEFUL_DEPLOYMENT} (states are iOS 18's)"
        options["minimum_deployment_target"] = stateful
    return f"buffers updated in place converted as states: {', '.join(buffers)}{raised}"


def _state_types(ct: Any, source: TorchSource, converted: Any) -> tuple[list[Any], dict[str, str]]:
    """The ``ct.StateType`` of each buffer ``forward`` updates in place, named as the
    buffer is in ``converted`` (the program or module a path converts: a wrapper's own
    buffers are ``module.acc``), fp16 (Core ML's only state dtype); and the renames that
    give each state its buffer's name in the source (:func:`state_name`), where the
    converted program names it otherwise."""
    import numpy as np

    from nebisect.sources.torch_module import state_name

    buffers = source.state_buffers()
    if not buffers:
        return [], {}
    own = dict(source.module.named_buffers())
    named = [name for name, _ in converted.named_buffers()] if hasattr(
        converted, "named_buffers") else []
    types, renames = [], {}
    for buffer in buffers:
        inside = buffer if buffer in named or not named else next(
            (name for name in named if name.endswith(f".{buffer}")), buffer)
        types.append(ct.StateType(wrapped_type=ct.TensorType(
            shape=tuple(own[buffer].shape), dtype=np.float16), name=inside))
        if state_name(inside) != state_name(buffer):
            renames[state_name(inside)] = state_name(buffer)
    return types, renames


def _renamed_states(ct: Any, model: Any, renames: dict[str, str]) -> Any:
    """``model`` with its states renamed (``module_acc`` → ``acc``): in the spec's
    description and wherever the program names them (its function inputs, the
    ``read_state``/``coreml_update_state`` arguments, nested blocks included)."""
    if not renames:
        return model
    spec = model.get_spec()
    for state in spec.description.state:
        state.name = renames.get(state.name, state.name)

    def rename_in(block: Any) -> None:
        for op in block.operations:
            for argument in op.inputs.values():
                for binding in argument.arguments:
                    if binding.WhichOneof("binding") == "name":
                        binding.name = renames.get(binding.name, binding.name)
            for inner in op.blocks:
                rename_in(inner)
        block.outputs[:] = [renames.get(name, name) for name in block.outputs]

    for function in spec.mlProgram.functions.values():
        for value in function.inputs:
            value.name = renames.get(value.name, value.name)
        for block in function.block_specializations.values():
            rename_in(block)
    return ct.models.MLModel(spec, weights_dir=model.weights_dir, skip_model_load=True,
                             mil_program=model._mil_program)


def _overrides_installed() -> bool:
    from nebisect.sources import converter_overrides

    return converter_overrides.installed()


def _cured_path(ct: Any, path: str, source: TorchSource, options: dict[str, Any],
                messages: dict[str, str]) -> dict[str, tuple[ConversionAttempt, Any]]:
    """Convert ``path`` again with nebisect's converter overrides installed (and
    uninstalled after, whatever happens: they stay opt-in for everything else), at the
    precisions of ``messages`` (each its converter's failure at coremltools' defaults);
    by precision, the attempt and the model when it converted (None otherwise)."""
    from nebisect.sources import converter_overrides

    converter_overrides.install()
    try:
        source.reset_buffers()
        outcomes, note = _convert_path(ct, path, source, options, tuple(messages))
    finally:
        converter_overrides.uninstall()
    cured: dict[str, tuple[ConversionAttempt, Any]] = {}
    for precision, outcome in outcomes.items():
        message = messages[precision]
        if outcome.error is not None:
            cured[precision] = ConversionAttempt(path, "failed", message, outcome.seconds, (
                f"{FAILS_TOO}: {converter_message(outcome.error)}")), None
        else:
            cured[precision] = ConversionAttempt(path, "ok", "", outcome.seconds, note="; ".join(
                filter(None, (OVERRIDES_NOTE, note))), cured=message), outcome.model
    return cured


#: what coremltools asserts when an output it is asked to name is a program input
#: (``forward`` returned an input unchanged: naming the output renames the input)
RETURNED_INPUT = "Main block's input name"


def _convert_path(ct: Any, path: str, source: TorchSource, options: dict[str, Any],
                  precisions: tuple[str, ...]) -> tuple[dict[str, PrecisionOutcome], str]:
    """One path's outcome at each of ``precisions``, and a note when it converted only
    with the outputs that return an input unchanged kept apart (a multiplication by one,
    exact in every dtype): a model whose ``forward`` is ``return x`` converts on both
    paths then, instead of failing on nebisect's own output naming."""
    converter = {"export": _via_export, "trace": _via_trace}[path]
    outcomes = _outcomes(converter, ct, source, options, convertible(source), precisions)
    failure = outcomes[precisions[0]].error
    kept = (_returned_inputs(source) if isinstance(failure, AssertionError)
            and RETURNED_INPUT in str(failure) else [])
    if not kept:
        return outcomes, ""
    outcomes = _outcomes(converter, ct, source, options, convertible(source, kept), precisions)
    return outcomes, ("returned an input unchanged, so passed through a multiplication by "
                      f"one to be named: {', '.join(kept)}")


def _outcomes(converter: Any, ct: Any, source: TorchSource, options: dict[str, Any],
              module: Any, precisions: tuple[str, ...]) -> dict[str, PrecisionOutcome]:
    """``converter``'s outcomes; a failure before coremltools converts (torch.export,
    the tracer) is every precision's."""
    started = time.perf_counter()
    try:
        with quiet():
            return converter(ct, source, options, module, precisions)  # type: ignore[no-any-return]
    except Exception as exc:
        return {precision: PrecisionOutcome(error=exc, seconds=time.perf_counter() - started)
                for precision in precisions}


def _deployment(ct: Any, name: str) -> Any:
    target = getattr(ct.target, name, None)
    if target is None:
        raise NebisectError(f"unknown deployment target {name!r} (e.g. iOS18, macOS15)")
    return target


def converter_message(exc: BaseException) -> str:
    """``TypeError: first line of the message``: a converter's failure in one line — and
    the condition a torch.export constraint violation states on a later line
    (``UserError: Constraints violated (seq): needs seq ≠ 2 (seq: ids.shape[1], …)``);
    torch's step refusing the program says so first (``not exportable: UserError: …``,
    :mod:`~nebisect.sources.frontend`)."""
    if isinstance(exc, Refused) and exc.__cause__ is not None:
        return f"{exc}: {converter_message(exc.__cause__)}"
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else "(no message)"
    condition = violated_condition(text)
    if condition:
        # "Constraints violated (seq)! For more information, run with TORCH_LOGS=…"
        first = f"{first.partition('!')[0]}: needs {condition}"
    return f"{type(exc).__name__}: {first}"


def _input_types(ct: Any, source: TorchSource, *, shapes: bool) -> list[Any]:
    """Core ML input types; with ``shapes``, one shared ``RangeDim`` per dynamic range.

    Sharing the RangeDim object (not only equal bounds) tells coremltools that, say,
    ``input_ids`` and ``attention_mask`` have the same length.
    """
    import numpy as np

    ranges: dict[tuple[int, int], Any] = {}
    for name, axes in source.dynamic_dims.items():
        for axis, (lo, hi) in axes.items():
            default = int(source.example_inputs[name].shape[axis])
            ranges.setdefault((lo, hi), ct.RangeDim(lo, hi, default=default))
    types = []
    for desc in source.descriptions():
        kwargs: dict[str, Any] = {"name": desc.name, "dtype": np.dtype(desc.dtype).type}
        if shapes:
            kwargs["shape"] = ct.Shape([lo if lo == hi else ranges[(lo, hi)]
                                        for lo, hi in desc.dims])
        types.append(ct.TensorType(**kwargs))
    return types


def _via_export(ct: Any, source: TorchSource, options: dict[str, Any], module: Any,
                precisions: tuple[str, ...]) -> dict[str, PrecisionOutcome]:
    with torch_step("export"):
        program = export_module(source, module).run_decompositions({})
    return _converted_program(ct, source, options, program, precisions, shapes=False)


def _via_trace(ct: Any, source: TorchSource, options: dict[str, Any], module: Any,
               precisions: tuple[str, ...]) -> dict[str, PrecisionOutcome]:
    """Trace ``module`` — a TorchScript program (the source's own trace-path program,
    or a loaded one) is converted as it is."""
    import torch

    with torch_step("trace"):
        traced = (source.traced if source.traced is not None
                  else module if isinstance(module, torch.jit.ScriptModule)
                  else torch.jit.trace(module, tuple(source.example_inputs.values())))
    return _converted_program(ct, source, options, traced, precisions, shapes=True)


def _converted_program(ct: Any, source: TorchSource, options: dict[str, Any], program: Any,
                       precisions: tuple[str, ...], *, shapes: bool) -> dict[str, PrecisionOutcome]:
    """The exported or traced ``program`` converted at each of ``precisions``, its states
    named as the source's buffers."""
    states, renames = _state_types(ct, source, program)
    outcomes = convert_at_precisions(ct, program, precisions, options,
                                     inputs=_input_types(ct, source, shapes=shapes),
                                     **({"states": states} if states else {}))
    for outcome in outcomes.values():
        if outcome.model is not None:
            outcome.model = _renamed_states(ct, outcome.model, renames)
    return outcomes


def _returned(source: TorchSource) -> Any:
    """What ``forward`` returns on the example inputs."""
    import torch

    with torch.no_grad():
        return source.module(*source.example_inputs.values())


def _returned_inputs(source: TorchSource) -> list[str]:
    """The outputs (by name) that equal an example input — dtype, shape and values —
    as one that returns it unchanged (``return x``, ``x.clone()``) does."""
    import torch

    names = source.output_names()
    values = _flat(_returned(source))
    inputs = list(source.example_inputs.values())
    return [name for name, value in zip(names, values, strict=True)
            if any(value.dtype == given.dtype and value.shape == given.shape
                   and bool(torch.equal(value, given)) for given in inputs)]


def _flat(returned: Any) -> list[Any]:
    """``forward``'s result as a list of tensors, in output-name order."""
    if isinstance(returned, dict):
        return list(returned.values())
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


def convertible(source: TorchSource, kept: list[str] | None = None,
                module: Any = None) -> Any:
    """The module (``module``: the source's own, or its copy in another dtype), or a
    wrapper when the converters need one: when ``forward`` returns
    a dict (the factory contract allows it, and every Hugging Face wrapper does), its
    values as a tuple in the order of :meth:`~TorchSource.output_names` — the tracer
    refuses dict outputs and coremltools has no ``dictconstruct``, and the package's
    outputs are named by position anyway (``outputs=`` of ``ct.convert``); the outputs
    named in ``kept`` pass through a multiplication by one (a logical or with itself
    for bool), so that no output is a program input."""
    import torch

    module = source.module if module is None else module
    returned = _returned(source)
    if not isinstance(returned, dict) and not kept:
        return module
    keep = [name in (kept or ()) for name in source.output_names()]
    single = isinstance(returned, torch.Tensor)

    def apart(value: torch.Tensor) -> torch.Tensor:
        return torch.logical_or(value, value) if value.dtype == torch.bool else value * 1

    class Convertible(torch.nn.Module):
        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

        def forward(self, *args: Any) -> Any:
            values = [apart(v) if k else v
                      for v, k in zip(_flat(self.module(*args)), keep, strict=True)]
            return values[0] if single else tuple(values)

    wrapper = Convertible(module)
    # The wrapper's own flag only: ``eval()`` would recurse into the module, which is
    # already in eval mode and, as an ExportedProgram's module (``.pt2``), refuses any
    # change of mode.
    wrapper.training = False
    return wrapper


def failed_attempts(verdict: Verdict) -> list[ConversionAttempt]:
    """The paths of a passing convert verdict that did not convert (another did)."""
    if verdict.status != Status.PASS:
        return []
    facts = verdict.conversion
    attempts = [ConversionAttempt.from_dict(a) for a in (facts.attempts if facts else ())]
    return [a for a in attempts if a.status == "failed"]


def one_path_failure(attempt: ConversionAttempt, beside: dict[str, str]) -> Verdict:
    """The verdict of a path that failed to convert while another converted: an error at
    stage ``convert`` whose signature is what converting on that path alone gives
    (``error:convert:jit.trace: …``, so bisecting it keeps it), its message
    ``conversion fails on jit.trace only: …`` with the other paths' verdicts beside it
    (``beside``: path → signature)."""
    others = "; ".join(f"{PATH_LABELS.get(path, path)}: {signature}"
                       for path, signature in beside.items())
    message = (f"conversion fails on {PATH_LABELS.get(attempt.path, attempt.path)} only: "
               f"{attempt.message}" + (f" ({attempt.note})" if attempt.note else "")
               + (f"; {others}" if others else ""))
    return Verdict(Status.ERROR, Stage.CONVERT,
                   error_signature(Stage.CONVERT, summarize([attempt])), message=message)


def cured_attempts(verdict: Verdict) -> list[ConversionAttempt]:
    """The paths of a passing convert verdict that converted only with nebisect's
    converter overrides (their ``cured`` failure at coremltools' defaults)."""
    if verdict.status != Status.PASS:
        return []
    facts = verdict.conversion
    attempts = [ConversionAttempt.from_dict(a) for a in (facts.attempts if facts else ())]
    return [a for a in attempts if a.status == "ok" and a.cured]


def cured_failure(attempt: ConversionAttempt) -> Verdict:
    """The verdict of a path that fails to convert at coremltools' defaults but converted
    with nebisect's converter overrides (and is judged as so converted): an error at
    stage ``convert`` whose signature is what converting on that path alone at the
    defaults gives (``error:convert:torch.export: …``: bisecting it without the
    overrides keeps it), its message ``conversion fails at coremltools' defaults on
    torch.export: …; judged as converted with nebisect's converter overrides``."""
    failed = ConversionAttempt(attempt.path, "failed", attempt.cured)
    message = (f"{CURED_PREFIX} on {PATH_LABELS.get(attempt.path, attempt.path)}: "
               f"{attempt.cured}; {CURED_SUFFIX}")
    return Verdict(Status.ERROR, Stage.CONVERT,
                   error_signature(Stage.CONVERT, summarize([failed])), message=message)


def cured_failures(verdict: Verdict) -> list[tuple[str, Verdict]]:
    """The failures at coremltools' defaults that nebisect's converter overrides cured,
    as ``(path, verdict)``: one per cured path (:func:`cured_failure`) while another path
    converted at the defaults, else — no path converted at the defaults — one for the
    whole conversion (path ``""``), with the signature ``--strict-conversion`` gives
    (``error:convert:torch.export: … | jit.trace: …``: one finding, bisected as such),
    which also tells the paths that failed with the overrides too (no row of their own
    then), its message naming the paths judged when not all were."""
    if verdict.status != Status.PASS or verdict.conversion is None:
        return []
    attempts = [ConversionAttempt.from_dict(a) for a in verdict.conversion.attempts]
    cured = [a for a in attempts if a.status == "ok" and a.cured]
    if not cured:
        return []
    if any(a.status == "ok" and not a.cured for a in attempts):
        return [(a.path, cured_failure(a)) for a in cured]
    at_defaults = summarize([ConversionAttempt(a.path, "failed", a.cured or a.message)
                             for a in attempts])
    judged = "" if len(cured) == len(attempts) else (
        ", ".join(PATH_LABELS.get(a.path, a.path) for a in cured) + " ")
    return [("", Verdict(Status.ERROR, Stage.CONVERT, error_signature(Stage.CONVERT, at_defaults),
                         message=f"{CURED_PREFIX}: {at_defaults}; {judged}{CURED_SUFFIX}"))]


def is_cured_failure(verdict: Verdict) -> bool:
    """Is this the verdict of a path's failure at coremltools' defaults that the
    overrides cured (:func:`cured_failure`)? Its path was judged all the same."""
    return verdict.stage == Stage.CONVERT and verdict.message.startswith(CURED_PREFIX)


def summarize(attempts: list[ConversionAttempt]) -> str:
    """One line: ``torch.export: ok | jit.trace: TypeError: …`` (signature-friendly); a
    path that converted only with nebisect's converter overrides is ``ok with the
    overrides``."""
    return " | ".join(
        f"{PATH_LABELS[a.path]}: "
        f"{a.message if a.status == 'failed' else 'ok with the overrides' if a.cured else 'ok'}"
        for a in attempts
    )


def op_type_counts(model: Any) -> dict[str, int]:
    """MIL op types of the converted main function (what the simulator must run)."""
    program = model._mil_program
    return dict(Counter(op.op_type for op in program.functions["main"].operations))


def save_package(model: Any, destination: str | os.PathLike[str]) -> Path:
    """Save atomically: a reader never sees half a package at ``destination``."""
    with staged(destination) as staging, quiet():
        model.save(str(staging))
    return Path(destination)


@dataclass(frozen=True)
class ConvertArguments:
    """The arguments of :func:`convert_job`: ``source`` (``file.py:factory``),
    ``precision`` (the target's), ``packages`` (``{path: location}``: the paths tried,
    in order, each saved where it says when it converts — or, unless
    ``every_path``, only the first that converts); ``setup`` (``module:function``
    callables run first — e.g. :data:`OVERRIDES_SETUP`), ``deployment_target`` (""
    : the newest target the running macOS loads,
    :func:`nebisect.sources.deployment.running_deployment`) and ``cure`` (a path that
    fails for a reason nebisect's converter overrides cure is converted again with
    them: :func:`convert_source`); ``cache`` (a directory: the conversion is read from
    there when it was made before, and kept there otherwise,
    :mod:`nebisect.sources.conversion_cache`; ``""``: none); ``derived`` (other
    conversion precisions made from the same conversion of each path, their packages
    ``{precision: {path: location}}``) and ``derived_verdicts`` (``{precision: file}``:
    where each one's verdict is written)."""

    source: str
    precision: str
    packages: dict[str, str]
    every_path: bool = False
    setup: list[str] = field(default_factory=list)
    deployment_target: str = ""
    cure: bool = False
    cache: str = ""
    derived: dict[str, dict[str, str]] = field(default_factory=dict)
    derived_verdicts: dict[str, str] = field(default_factory=dict)


def convert_job(arguments: ConvertArguments) -> Verdict:
    """Child side: convert the source and write its package(s) — at
    ``arguments.precision`` and at every precision of ``arguments.derived``, from one
    conversion per path (:func:`convert_precisions`) — or copy them from the cache when it
    holds a conversion (``arguments.cache``). The verdict of ``arguments.precision`` is
    returned, the others' are written where ``arguments.derived_verdicts`` says. Each
    verdict's :class:`~nebisect.verdict.ConversionFacts` list the paths saved and say
    where a cached conversion came from."""
    from nebisect.isolate import mark_stage
    from nebisect.sources import conversion_cache

    mark_stage("convert")
    for call in arguments.setup:
        setup_function(call)()
    source = load_torch_source(arguments.source)
    deployment = arguments.deployment_target or running_deployment()
    precision = conversion_precision(arguments.precision)
    wanted = {precision: arguments.packages, **arguments.derived}
    cache = Path(arguments.cache) if arguments.cache else None
    keys = {precision: conversion_cache.conversion_key(source, {
        "paths": list(arguments.packages), "precision": precision,
        "every_path": arguments.every_path, "setup": arguments.setup,
        "deployment": deployment, "cure": arguments.cure}) for precision in wanted} if cache else {}
    verdicts: dict[str, Verdict] = {}
    ignored: dict[str, str] = {}
    for precision, key in keys.items():
        assert cache is not None
        found = conversion_cache.lookup(cache, key, wanted[precision])
        ignored[precision] = found.ignored
        if found.verdict is not None and found.verdict.conversion is not None:
            found.verdict.conversion.cache = f"{CACHE_HIT} {cache} ({key[:12]})"
            verdicts[precision] = found.verdict
    missing = tuple(precision for precision in wanted if precision not in verdicts)
    converted = convert_precisions(source, missing, deployment=deployment,
                                   paths=tuple(arguments.packages), cure=arguments.cure
                                   ) if missing else {}
    for precision, (models, attempts) in converted.items():
        verdict = _saved(arguments, precision, models, attempts, wanted[precision])
        verdicts[precision] = verdict
        if cache is None or verdict.conversion is None or verdict.status not in (
                Status.PASS, Status.ERROR):
            continue
        conversion_cache.store(cache, keys[precision], verdict, {
            path: wanted[precision][path] for path in verdict.conversion.paths or ()})
        verdict.conversion.cache = "; ".join(filter(None, (
            ignored[precision], f"kept in {cache} ({keys[precision][:12]})")))
    for precision, location in arguments.derived_verdicts.items():
        write_text(location, verdicts[precision].to_json())
    return verdicts[conversion_precision(arguments.precision)]


#: how the ``cache`` fact of a conversion read from the cache begins
CACHE_HIT = "read from the cache"


def _saved(arguments: ConvertArguments, precision: str, models: dict[str, Any],
           attempts: list[ConversionAttempt], wanted: dict[str, str]) -> Verdict:
    """The verdict of one precision's conversion, its package(s) saved where ``wanted``
    says (every path that converted, or the first, as ``arguments`` ask)."""
    facts = ConversionFacts([a.to_dict() for a in attempts], precision, list(arguments.setup))
    message = summarize(attempts)
    if not models and attempts and all(OOM_PATTERN.search(a.message) for a in attempts):
        # every path ran out of memory: the memory limit's verdict, not the converter's
        return Verdict(Status.OOM, Stage.CONVERT, "oom", message=message, conversion=facts)
    if not models:
        # what the overrides did not cure either is said beside the failures (never in
        # the signature, which is what coremltools' defaults give)
        tried = "; ".join(f"{PATH_LABELS[a.path]}: {a.note}" for a in attempts if a.note)
        return Verdict(Status.ERROR, Stage.CONVERT, error_signature("convert", message),
                       message=message + (f" ({tried})" if tried else ""), conversion=facts)
    kept = models if arguments.every_path else dict(list(models.items())[:1])
    facts.path = next(iter(kept))
    facts.paths = list(kept)
    facts.op_types = op_type_counts(kept[facts.path])
    for path, model in kept.items():
        save_package(model, wanted[path])
    return Verdict(Status.PASS, Stage.CONVERT, message=message, conversion=facts)


def convert_isolated(
    source: Source,
    precision: str,
    workdir: Path,
    isolator: Isolator,
    *,
    setup: tuple[str, ...] = (),
    timeout: float = 900.0,
    deployment: str = "",
    paths: tuple[str, ...] = PATHS,
    cache: str = "",
) -> tuple[Path | None, Verdict]:
    """Parent side: run :func:`convert_job` in a fresh process.

    Returns the package of the first of ``paths`` that converts (None when none does)
    and the convert verdict — ``error`` with the converter's messages, or
    ``crash``/``timeout`` from isolation. ``cache``: the directory conversions are kept
    in across runs (:mod:`nebisect.sources.conversion_cache`; ``""``: none).
    """
    package = Path(workdir) / f"converted-{conversion_precision(precision)}.mlpackage"
    where = {path: str(package) for path in paths}
    verdict = _convert_in_child(source, precision, where, isolator, setup, timeout, deployment,
                                cache=cache)
    ok = verdict.status == "pass" and package.is_dir()
    return (package if ok else None), verdict


def convert_paths(
    source: Source,
    precision: str,
    workdir: Path,
    isolator: Isolator,
    *,
    paths: tuple[str, ...] = PATHS,
    setup: tuple[str, ...] = (),
    timeout: float = 900.0,
    deployment: str = "",
    cure: bool = False,
    cache: str = "",
    precisions: tuple[str, ...] = (),
    threads: int | None = None,
) -> tuple[dict[str, Path], Verdict]:
    """:func:`convert_isolated` keeping every path of ``paths`` that converts: ``{path:
    package}`` (empty when none converts) and the convert verdict (one child converts
    them all, so torch and coremltools are imported once). ``cure``: a path that fails
    for a reason nebisect's converter overrides cure converts again with them
    (:func:`convert_source`; ``run``'s default). ``cache``: the directory conversions are
    kept in across runs (:mod:`nebisect.sources.conversion_cache`; ``""``: none).
    ``precisions``: every conversion precision the caller asks ``workdir`` for — the first
    call converts each path once for all of them (:func:`convert_precisions`) and leaves
    the others' packages and verdicts in ``workdir``, where the calls that ask for them
    find them. ``threads``: the child's share of the cores (None: the isolator's)."""
    key = conversion_precision(precision)
    verdict = _read_handed(_handed_verdict(workdir, key))
    if verdict is None:
        others = [p for p in dict.fromkeys(map(conversion_precision, precisions)) if p != key]
        verdict = _convert_in_child(
            source, precision, _packages(workdir, key, paths), isolator, setup, timeout,
            deployment, every_path=True, cure=cure, cache=cache, threads=threads,
            derived={p: _packages(workdir, p, paths) for p in others},
            derived_verdicts={p: str(_handed_verdict(workdir, p)) for p in others})
        for other in others:
            _stamp(_handed_verdict(workdir, other), verdict)
    packages = {path: Path(location) for path, location in _packages(workdir, key, paths).items()}
    converted = verdict.conversion if verdict.status == "pass" else None
    saved = (converted.paths or []) if converted else []
    return {path: packages[path] for path in saved if packages[path].is_dir()}, verdict


def _packages(workdir: Path, precision: str, paths: tuple[str, ...]) -> dict[str, str]:
    """Where :func:`convert_paths` saves each path's package at ``precision``."""
    return {path: str(Path(workdir) / f"converted-{precision}-{path}.mlpackage")
            for path in paths}


def _handed_verdict(workdir: Path, precision: str) -> Path:
    """Where a conversion child leaves the verdict of a precision it derived."""
    return Path(workdir) / f"converted-{precision}.verdict.json"


def _read_handed(handed: Path) -> Verdict | None:
    """The verdict a conversion child left at ``handed`` (:meth:`Verdict.read`:
    bounded); None when there is none, or none to trust (it is removed, and the
    conversion made again)."""
    if not handed.is_file():
        return None
    try:
        return Verdict.read(handed)
    except NebisectError:
        handed.unlink(missing_ok=True)
        return None


def _stamp(handed: Path, made_with: Verdict) -> None:
    """Give the verdict a conversion child left at ``handed`` the provenance and process
    facts of the child's own verdict ``made_with``: it was made in that process."""
    verdict = _read_handed(handed)
    if verdict is None:
        return
    verdict.provenance = dict(made_with.provenance)
    verdict.process = copy.deepcopy(made_with.process)
    write_text(handed, verdict.to_json())


def _convert_in_child(source: Source, precision: str, where: dict[str, str],
                      isolator: Isolator, setup: tuple[str, ...], timeout: float,
                      deployment: str, *, every_path: bool = False, cure: bool = False,
                      cache: str = "", derived: dict[str, dict[str, str]] | None = None,
                      derived_verdicts: dict[str, str] | None = None,
                      threads: int | None = None) -> Verdict:
    from nebisect.isolate import Job

    # Fork mode: the template has imported torch and coremltools and rehearsed a
    # conversion once (:data:`CONVERSION`); each conversion is a fork of it. Where
    # the isolator spawns (macOS: forking after Core ML loaded aborts the child), every
    # conversion is a fresh interpreter and the verdict says why.
    job = Job(
        function="nebisect.sources.convert:convert_job",
        payload=encode(ConvertArguments(source.location, conversion_precision(precision),
                                        where, every_path, list(setup), deployment, cure,
                                        cache, derived or {}, derived_verdicts or {})),
        stage="convert",
        timeout=timeout,
        needs=CONVERSION,
        threads=threads,
    )
    verdict = isolator.run(job).verdict
    verdict.process.template = conversion_template(isolator.mode)
    return verdict


#: the conversion precisions a run asks for (fp16 targets, everything else)
REHEARSED_PRECISIONS = ("fp32", "fp16")


def rehearse_conversions() -> None:
    """The conversion template's warm-up (:data:`CONVERSION`): one rehearsed conversion
    per path and precision, before the first conversion child.

    Importing torch and coremltools is most of a fresh interpreter's cost, but not all
    of it: the first conversion in a process also pays for torch.export's first use
    (dynamo, the decomposition tables, FX passes), the jit tracer's and coremltools'
    lazily built registries (op converters, MIL passes, the FLOAT16 cast pass) and the
    package writer — about as much again as a second conversion of the same model. A
    forked child inherits all of that *initialised* only if the template did it first;
    run here rather than at start-up, it costs nothing to a template that only
    describes a factory or evaluates on torch.

    The rehearsal converts and saves a tiny built-in module on every path at every
    precision in a temporary directory it removes again, with ``tempfile`` pointed
    there, so the ``tmp*.mlpackage`` directories coremltools leaves are removed too. No
    user code runs here. torch is held to one thread meanwhile, so that no intra-op
    thread pool exists when the template forks (a pool started before ``fork`` is not
    usable in the child).
    """
    import tempfile

    import torch

    class Rehearsal(torch.nn.Module):
        """A reduction, an elementwise op and a matmul: the passes most models use."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(torch.logsumexp(x, dim=1, keepdim=True).expand_as(x) * 0.5)

    torch.manual_seed(0)
    source = TorchSource(f"{__name__}:rehearse_conversions", Rehearsal().eval(),
                         {"x": torch.randn(1, 4)})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cached = tempfile.tempdir
    try:
        with tempfile.TemporaryDirectory(prefix="nebisect-warm-") as scratch:
            tempfile.tempdir = scratch
            for precision in REHEARSED_PRECISIONS:
                models, _ = convert_source(source, precision, paths=PATHS)
                for path, model in models.items():
                    save_package(model, Path(scratch) / f"{precision}-{path}.mlpackage")
    finally:
        tempfile.tempdir = cached
        torch.set_num_threads(threads)


#: the conversion job's needs: torch and coremltools imported, and one conversion
#: rehearsed (:func:`rehearse_conversions`) before the first conversion child
CONVERSION = TORCH_AND_COREMLTOOLS.adding(Needs(warm=(f"{__name__}:rehearse_conversions",)))


def conversion_template(mode: str) -> str:
    """``warm`` when conversions fork from the warm template, else why they do not."""
    from nebisect.isolation.isolator import refused_mode

    if mode == "fork":
        return "warm"
    return refused_mode("fork", sys.platform) or f"isolation mode {mode}: a fresh process"
