"""One torch → MIL conversion, every conversion precision from it.

``ct.convert`` runs the torch frontend (the module → a MIL program, and the frontend's
passes), then its main pass pipeline (where ``compute_precision=FLOAT16`` adds
``common::add_fp16_cast``), then the backend. Everything before the main pipeline is the
same at both precisions but for one thing: at FLOAT16 (iOS 16 and newer) an output whose
type names no dtype and whose value is fp32 is declared fp16 (coremltools'
``_adjust_default_output_to_fp16``). So :func:`convert_at_precisions` converts at the
first precision with a pass of nebisect's own first in the main pipeline
(:class:`ProgramBeforeMainPipeline`) that keeps a copy of the program as the main
pipeline receives it, and the op-name counters the frontend left; every other precision
is ``ct.convert`` of that copy (outputs declared as that precision's frontend declares
them, the counters restored), which runs the same main pipeline and backend on the same
program as a conversion of its own would. The package records the torch source and its
dialect, as a direct conversion's does, not ``milinternal``.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from nebisect.sources import fp16_pass

#: the pass nebisect puts first in the main pipeline of the first precision's conversion
SNAPSHOT_PASS = "nebisect::program_before_main_pipeline"


@dataclass
class PrecisionOutcome:
    """One precision's conversion of one path: the MLModel, or the exception it raised,
    and the seconds it took (the first precision's include the frontend)."""

    model: Any = None
    error: Exception | None = None
    seconds: float = 0.0


@dataclass
class _Snapshot:
    """The program as the main pipeline received it (None when it could not be copied),
    the op-name counters then, and whether the main pipeline was reached."""

    program: Any = None
    names: dict[str, int] = field(default_factory=dict)
    reached: bool = False


#: how deep copying a program may recurse (it follows the chain of ops), and the stack
#: of the thread that copies it: a transformer's program is thousands of ops deep
COPY_RECURSION, COPY_STACK_BYTES = 200_000, 512 << 20


def _copied(program: Any) -> Any:
    """A deep copy of ``program`` made on a thread with a stack as deep as the copy
    needs; None when it cannot be made."""
    copies: list[Any] = []

    def copy_program() -> None:
        # a program that cannot be copied converts at each precision on its own
        with contextlib.suppress(Exception):
            copies.append(copy.deepcopy(program))

    limit, stack = sys.getrecursionlimit(), threading.stack_size(COPY_STACK_BYTES)
    sys.setrecursionlimit(max(limit, COPY_RECURSION))
    try:
        thread = threading.Thread(target=copy_program)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(stack)
        sys.setrecursionlimit(limit)
    return copies[0] if copies else None


_SNAPSHOT = _Snapshot()


def _register_snapshot_pass() -> None:
    """Register :data:`SNAPSHOT_PASS` with coremltools (once per process)."""
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil.passes.graph_pass import AbstractGraphPass
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY, register_pass

    if SNAPSHOT_PASS in PASS_REGISTRY:
        return

    namespace, _, name = SNAPSHOT_PASS.partition("::")

    @register_pass(namespace=namespace, name=name)
    class ProgramBeforeMainPipeline(AbstractGraphPass):  # type: ignore[misc]
        """Keep a copy of the program and the op-name counters; change nothing."""

        def apply(self, prog: Any) -> None:
            _SNAPSHOT.reached = True
            _SNAPSHOT.program = _copied(prog)
            _SNAPSHOT.names = dict(mb.name_count)


def convert_at_precisions(
    ct: Any, converted_from: Any, precisions: tuple[str, ...], options: dict[str, Any],
    **convert_args: Any,
) -> dict[str, PrecisionOutcome]:
    """``ct.convert(converted_from, **options, **convert_args)`` at each of
    ``precisions`` (``fp32``/``fp16``; ``options`` without ``compute_precision``): the
    first converted from torch, the others from its program before the main pipeline.
    A failure before that program exists (the frontend's) is every precision's."""
    from coremltools.converters._converters_entry import (
        _determine_source_dialect,
        _record_build_metadata,
    )
    from coremltools.converters.mil.mil import Builder as mb

    fp16_pass.install()
    first, *others = precisions
    pipeline = ct.PassPipeline()
    if others:
        _register_snapshot_pass()
        pipeline.insert_pass(0, SNAPSHOT_PASS)
    _SNAPSHOT.program, _SNAPSHOT.reached = None, False
    outcomes = {first: _outcome(lambda: ct.convert(
        converted_from, compute_precision=_compute_precision(ct, first),
        pass_pipeline=pipeline, **options, **convert_args))}
    snapshot, names, reached = _SNAPSHOT.program, _SNAPSHOT.names, _SNAPSHOT.reached
    _SNAPSHOT.program = None
    dialect = _determine_source_dialect(converted_from, "pytorch")
    for precision in others:
        if not reached:
            # the frontend failed: at every precision alike
            outcomes[precision] = PrecisionOutcome(error=outcomes[first].error)
            continue
        if snapshot is None:
            # the program could not be copied: a conversion of its own
            outcomes[precision] = _outcome(lambda precision=precision: ct.convert(
                converted_from, compute_precision=_compute_precision(ct, precision),
                **options, **convert_args))
            continue
        program = snapshot if precision == others[-1] else _copied(snapshot)
        if precision == "fp16":
            _default_fp16_outputs(ct, program, options["minimum_deployment_target"])
        mb.name_count.clear()
        mb.name_count.update(names)

        def derived(program: Any = program, precision: str = precision) -> Any:
            model = ct.convert(program, compute_precision=_compute_precision(ct, precision),
                               **options)
            # recorded as converted from torch, in place of the MIL source it was given
            # (and in the order a conversion from torch records it)
            del model._spec.mlProgram.attributes["buildInfo"]
            model._spec.description.metadata.userDefined.clear()
            return _record_build_metadata(model, "pytorch", source_dialect=dialect)

        outcomes[precision] = _outcome(derived)
    return outcomes


def _outcome(convert: Any) -> PrecisionOutcome:
    started = time.perf_counter()
    try:
        model = convert()
    except Exception as exc:
        return PrecisionOutcome(error=exc, seconds=time.perf_counter() - started)
    return PrecisionOutcome(model, seconds=time.perf_counter() - started)


def _compute_precision(ct: Any, precision: str) -> Any:
    return ct.precision.FLOAT16 if precision == "fp16" else ct.precision.FLOAT32


def _default_fp16_outputs(ct: Any, program: Any, deployment: Any) -> None:
    """Declare fp16 the outputs a FLOAT16 conversion's frontend declares fp16 (for iOS 16
    and newer): those whose type names no dtype and whose value is fp32."""
    from coremltools.converters.mil.mil import types

    if deployment < ct.target.iOS16:
        return
    main = program.functions["main"]
    for declared, value in zip(main.output_types or (), main.outputs, strict=False):
        if (isinstance(declared, ct.TensorType) and declared.dtype is None
                and value.dtype == types.fp32):
            declared.dtype = types.fp16
