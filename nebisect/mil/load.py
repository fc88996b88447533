"""Program I/O: an ``.mlpackage`` ⇄ a coremltools MIL ``Program``.

Loading goes through coremltools' own milproto loader (the inverse of its serializer),
with the package's weight blobs, so the simulator sees exactly the ops, attributes and
weights Core ML would compile — once the shapes the program declares fit the memory
budget the caller gives (:mod:`nebisect.mil.sizes`): the loader computes some ops as it
builds them.
The package's model description carries the flexible input shapes (``shapeRange`` /
``enumeratedShapes``) that the MIL function itself does not; they are restored as the
main function's ``input_types`` so inputs can be checked against their ranges and a
re-saved program keeps them.

A multifunction package (``ct.utils.save_multifunction``) holds several functions, each
described in ``description.functions`` with inputs of its own. Loading one names it
(else the package's ``defaultFunctionName``) and gives a program whose ``main`` is that
function alone: the simulator, the dependency view, the reducer and the saver then
treat it as the single-function program it is (functions never call each other).

Saving serializes with coremltools' ML-program backend directly instead of
``ct.convert``: ``ct.convert`` runs its backend pass pipeline (constant folding,
``cast_optimization``, silu fusion, ...) on the program *in place*, which would change
the graph a reducer just cut. Only the two passes that make a valid package are run —
I/O dtype adjustment and name sanitizing — on a copy.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.files import WriteError, staged
from nebisect.mil.quiet import import_coremltools, quiet
from nebisect.mil.sizes import check_spec
from nebisect.package import MANIFEST, Manifest, check_package, item_path

#: the manifest entry of a package's weights directory (coremltools' _WEIGHTS_DIR_NAME,
#: _MLPACKAGE_AUTHOR_NAME)
WEIGHTS_ITEM, COREML_AUTHOR = "weights", "com.apple.CoreML"
#: the one function of a package without ``description.functions``; the name a loaded
#: program gives the function it holds
MAIN = "main"
_SAVE_PASSES = ("mil_backend::adjust_io_to_supported_types", "mil_backend::sanitize_name_strings")


class ProgramLoadError(NebisectError):
    """The artifact is not a loadable ML program."""


@contextlib.contextmanager
def loadable_package(path: str | os.PathLike[str]) -> Iterator[Path]:
    """``path`` (checked: nothing in it leads outside it), or a temporary copy of it with
    the empty directories git dropped.

    A package without weights still lists an (empty) weights directory in its
    manifest, and coremltools refuses a package whose listed item is missing. git
    stores no empty directories, so a package checked into a corpus comes back
    without it. The copy recreates only directories the manifest lists; the
    original is never written to.
    """
    package = Path(path)
    manifest = check_package(package)
    missing = [item for item in manifest.items
               if not Path(item.path).suffix and not item_path(package, item).exists()]
    if not missing:
        yield package
        return
    with tempfile.TemporaryDirectory(prefix="nebisect-package-") as tmp:
        copy_path = Path(tmp) / package.name
        shutil.copytree(package, copy_path)
        for item in missing:
            item_path(copy_path, item).mkdir(parents=True, exist_ok=True)
        yield copy_path


def _weights_dir(package: Path, manifest: Manifest) -> str | None:
    """The package's weights directory, as its manifest names it (None: it has none,
    or git dropped it empty)."""
    found = [item_path(package, item) for item in manifest.items
             if item.name == WEIGHTS_ITEM and item.author == COREML_AUTHOR]
    return str(found[0]) if found and found[0].is_dir() else None


def read_spec(path: str | os.PathLike[str]) -> Any:
    """The model spec (``Model_pb2.Model``) of an ``.mlpackage`` or ``.mlmodel``, read
    without writing to it, and for a package only once nothing in it leads outside it
    (:func:`~nebisect.package.check_package`, a one-line :class:`PackageError`).

    Not ``coremltools.utils.load_spec``: for a package it opens a read-write
    ``ModelPackage``, whose destructor rewrites ``Manifest.json`` in place — a
    ``Manifest.<uuid>`` file renamed over it (coremltools 9.0; so does
    ``_try_get_weights_dir_path``). Reading must never write to the user's package, and
    a run hashing the package while one of its children read it saw that file vanish.
    The root model's path comes from the manifest, as ``ModelPackage`` finds it.
    Raises ValueError naming what is wrong.
    """
    location = Path(path)
    if location.is_dir():
        return _package_spec(location, check_package(location))
    return _parse_spec(location)


def _package_spec(package: Path, manifest: Manifest) -> Any:
    return _parse_spec(item_path(package, manifest.root))


def _parse_spec(location: Path) -> Any:
    ct = import_coremltools()
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(location.read_bytes())
    return spec


def load_program(source: Any, function: str = "", *, memory_budget: int | None = None) -> Any:
    """A MIL Program from a path (``.mlpackage`` / ``.mlmodel``), an MLModel or a Program;
    of a multifunction package, the program of ``function`` (its default when "").
    ``memory_budget``: the bytes one declared tensor may take, refused before
    coremltools builds the program (:func:`~nebisect.mil.sizes.check_spec`); None
    leaves shapes unchecked."""
    if hasattr(source, "functions"):
        return source
    ct = import_coremltools()
    if isinstance(source, ct.models.MLModel):
        program = getattr(source, "_mil_program", None)
        if program is not None:
            return program
        return _from_spec(source.get_spec(), source.weights_dir, "the MLModel", function,
                          memory_budget)
    if not isinstance(source, (str, os.PathLike)):
        raise ProgramLoadError(f"cannot load a program from a {type(source).__name__}")
    return _load_path(Path(source), function, memory_budget)


def function_names(spec: Any) -> tuple[str, ...]:
    """The functions a multifunction spec describes, the default first; () for a spec
    without ``description.functions`` (its one function is ``main``)."""
    names = [f.name for f in spec.description.functions]
    default = spec.description.defaultFunctionName
    return tuple(sorted(names, key=lambda name: name != default))


def function_description(spec: Any, function: str, where: str) -> Any:
    """The description (inputs, outputs) of ``function`` of ``spec`` — the model's own
    for a spec without functions and ``function`` "" — or a one-line error naming the
    functions there are."""
    names = function_names(spec)
    if not names and function in ("", MAIN):
        return spec.description
    chosen = function or names[0]
    for described in spec.description.functions:
        if described.name == chosen:
            return described
    there = ", ".join(names) if names else "only main, not a multifunction package"
    raise ProgramLoadError(f"{where}: no function {chosen!r} (its functions: {there})")


def _load_path(path: Path, function: str, memory_budget: int | None) -> Any:
    if not path.exists():
        raise ProgramLoadError(f"{path}: no such file or directory")
    if path.is_dir() and not (path / MANIFEST).is_file():
        raise ProgramLoadError(f"{path}: not an .mlpackage (no {MANIFEST})")
    manifest = check_package(path) if path.is_dir() else None
    try:
        spec = _package_spec(path, manifest) if manifest else _parse_spec(path)
    except Exception as exc:
        raise ProgramLoadError(f"{path}: corrupt model package ({_first_line(exc)})") from exc
    return _from_spec(spec, _weights_dir(path, manifest) if manifest else None, str(path),
                      function, memory_budget)


def _from_spec(spec: Any, weights_dir: str | None, where: str, function: str,
               memory_budget: int | None) -> Any:
    kind = spec.WhichOneof("Type")
    if kind == "neuralNetwork":
        raise ProgramLoadError(
            f"{where} is a neuralnetwork model; nebisect simulates ML programs only "
            "(re-convert with convert_to='mlprogram')"
        )
    if kind != "mlProgram":
        raise ProgramLoadError(f"{where} is a {kind or 'empty'} model, not an ML program")
    description = function_description(spec, function, where)
    # Before coremltools builds any op: it computes a constant-shaped fill as it loads it.
    if memory_budget is not None:
        check_spec(spec, where, memory_budget)
    _check_weight_files(spec.mlProgram, weights_dir, where)
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load

    try:
        with quiet():
            program = milproto_load(
                spec, spec.specificationVersion, file_weights_dir=weights_dir or ""
            )
    except Exception as exc:
        raise ProgramLoadError(f"{where}: cannot load the ML program ({_load_failure(exc)})"
                               ) from exc
    if function_names(spec):
        program = _only(program, description.name)
    _restore_input_types(program, description)
    return program


def _only(program: Any, function: str) -> Any:
    """A program whose ``main`` is ``program``'s ``function`` alone."""
    from coremltools.converters.mil.mil import Program

    single = Program()
    single.add_function(MAIN, program.functions[function])
    return single


def _load_failure(exc: Exception) -> str:
    """Why the milproto loader refused a program, in words: its ``KeyError('Var x not
    found')`` is an op reading a value no earlier op defined."""
    found = re.fullmatch(r"Var (.+) not found", exc.args[0]) if (
        isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str)) else None
    if found:
        return (f"var {found.group(1)!r} is read before any op defines it: a cycle, or a "
                "name no op defines")
    return _first_line(exc)


def _check_weight_files(program_spec: Any, weights_dir: str | None, where: str) -> None:
    """Name a missing weight blob up front (the loader would fail deep inside with less)."""
    for name in sorted(_blob_files(program_spec)):
        file = Path(weights_dir or "") / name.split("/")[-1]
        if weights_dir is None or not file.is_file():
            raise ProgramLoadError(f"{where}: missing weight file {name}")


def _blob_files(message: Any) -> set[str]:
    """Every ``blobFileValue.fileName`` referenced anywhere in a protobuf message."""
    found: set[str] = set()
    stack = [message]
    while stack:
        current = stack.pop()
        for descriptor, value in current.ListFields():
            if descriptor.name == "blobFileValue":
                found.add(value.fileName)
            elif descriptor.type == descriptor.TYPE_MESSAGE:
                if hasattr(value, "ListFields"):
                    stack.append(value)
                else:  # repeated field or map
                    items = value.values() if hasattr(value, "values") else value
                    stack.extend(v for v in items if hasattr(v, "ListFields"))
    return found


def _restore_input_types(program: Any, description: Any) -> None:
    ct = import_coremltools()
    function = program.functions[MAIN]
    types = []
    for feature in description.input:
        var = function.inputs.get(feature.name)
        array = feature.type.multiArrayType if feature.type.HasField("multiArrayType") else None
        if var is None or array is None or var.shape is None:
            continue
        symbolic = list(var.shape)
        if array.HasField("enumeratedShapes") and len(array.enumeratedShapes.shapes) > 1:
            shapes = [tuple(s.shape) for s in array.enumeratedShapes.shapes]
            shape: Any = ct.EnumeratedShapes(shapes=shapes)
        elif array.HasField("shapeRange") and len(array.shapeRange.sizeRanges) == len(symbolic):
            dims: list[Any] = []
            for declared, size in zip(symbolic, array.shapeRange.sizeRanges, strict=True):
                if isinstance(declared, int):
                    dims.append(declared)
                else:
                    flexible = ct.RangeDim(int(size.lowerBound), int(size.upperBound))
                    flexible.symbol = declared  # the function's own symbol, not a new one
                    dims.append(flexible)
            shape = ct.Shape(shape=dims)
        else:
            continue
        types.append(ct.TensorType(name=feature.name, shape=shape, dtype=_np_dtype(var)))
    if types:
        function.input_types = tuple(types)


def _np_dtype(var: Any) -> Any:
    from nebisect.mil.dtypes import var_element_dtype

    return var_element_dtype(var)


def save_program(program: Any, path: str | os.PathLike[str]) -> None:
    """Write ``program`` as an ``.mlpackage`` at ``path`` (atomically; replaces ``path``)."""
    target = Path(path)
    if target.suffix != ".mlpackage":
        raise NebisectError(f"{target}: an ML program package must end in .mlpackage")
    import_coremltools()
    from coremltools.converters.mil.backend.mil.load import load as backend_load
    from coremltools.converters.mil.mil.passes.pass_pipeline import (
        PassPipeline,
        PassPipelineManager,
    )
    from coremltools.models.utils import _create_mlpackage

    prog = _deepcopy_program(program)
    function = prog.functions[prog.default_function_name]
    version = max(function.get_max_opset_version_and_op()[0], function.opset_version or 0)
    with tempfile.TemporaryDirectory() as weights, quiet():
        pipeline = PassPipeline(list(_SAVE_PASSES), "nebisect_save")
        try:
            PassPipelineManager.apply_pipeline(prog, pipeline)
            spec = backend_load(prog, weights_dir=weights, specification_version=int(version))
        except Exception as exc:
            raise NebisectError(f"cannot serialize the program: {_first_line(exc)}") from exc
        with staged(target) as staging:
            try:
                _create_mlpackage(spec, weights, str(staging))
            except RuntimeError as exc:
                raise _native_write_error(staging, exc) from None


def _native_write_error(path: Path, exc: RuntimeError) -> Exception:
    """coremltools writes packages in C++, whose failed writes (a full disk) arrive as
    ``RuntimeError("filesystem error: cannot copy: No space left on device [a] [b]")``:
    a :class:`~nebisect.files.WriteError` without the temporary paths; else ``exc``."""
    found = re.match(r"filesystem error: (.*?)(?: \[|$)", str(exc))
    return WriteError(path, found.group(1)) if found else exc


def _deepcopy_program(program: Any) -> Any:
    """``copy.deepcopy`` recurses along the var → op → var chain: a long program (a
    10 000-op chain from the reducer's benchmark) needs a deeper limit than Python's."""
    ops = sum(len(f.operations) for f in program.functions.values())
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50 * ops + 1000))
    try:
        return copy.deepcopy(program)
    finally:
        sys.setrecursionlimit(limit)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
