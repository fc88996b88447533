"""ExecuTorch programs (``.pte``): each Core ML delegate extracted as an ``.mlpackage``.

ExecuTorch's own inspector shows a Core ML delegate as one opaque operator; the program
inside it is an ordinary ML program package, flattened into the delegate's bytes by the
delegate's in-memory filesystem. The ``executorch`` wheel (Linux and macOS) reads both:
``deserialize_pte_binary`` the program's flatbuffer, ``executorchcoreml`` the
delegate's payload — the same two calls as ExecuTorch's
``examples/apple/coreml/scripts/extract_coreml_models.py``. They run in an isolated child
(:func:`extract_job`): a ``.pte`` is input, and reading it must not take this process
down. A payload is stored inline in the program, or — for multifunction models — as a
``CMJR``-prefixed JSON reference to the program's named data.

Each extracted package is then an ordinary package source (``run``, ``lint``, ``bisect``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.errors import NebisectError
from nebisect.files import parse_untrusted_json
from nebisect.isolate import Needs
from nebisect.package import MANIFEST
from nebisect.sources.loading import ChildSubject, describe_in_child, record_verdict
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.isolate import Isolator

SUFFIX = ".pte"
#: the backend id ExecuTorch's Core ML delegate registers
COREML_BACKEND = "CoreMLBackend"
#: the prefix of a payload that refers to the program's named data (multifunction)
NAMED_REFERENCE = b"CMJR"
PTE_SUBJECT = ChildSubject("reading the ExecuTorch program", "its Core ML delegates")
INSTALL = "pip install executorch"


def is_executorch_program(text: str) -> bool:
    """Does ``text`` name an ExecuTorch program file?"""
    return Path(text).suffix.lower() == SUFFIX


def extract_programs(pte: str, directory: Path, *, timeout: float,
                     isolator: Isolator | None = None) -> list[Path]:
    """The ML program package of each Core ML delegate of ``pte``, written under
    ``directory`` in the program's order; a file that is not a program, or one without
    a Core ML delegate, is a one-line error."""
    if not Path(pte).is_file():
        raise NebisectError(f"{pte}: no such file")
    record = describe_in_child(f"{__name__}:extract_job",
                               ExtractArguments(str(Path(pte).resolve()), str(directory)),
                               label=pte, subject=PTE_SUBJECT, timeout=timeout,
                               needs=Needs(imports=("torch",)), isolator=isolator)
    packages = [Path(p) for p in record["packages"]]
    if not packages:
        raise NebisectError(f"{pte}: no Core ML delegate in this ExecuTorch program "
                            f"(its delegates: {', '.join(record['backends']) or 'none'})")
    return packages


@dataclass(frozen=True)
class ExtractArguments:
    """The arguments of :func:`extract_job`: the ``.pte`` file and the directory its
    packages are written under."""

    pte: str
    directory: str


def extract_job(arguments: ExtractArguments) -> Verdict:
    """Child side of :func:`extract_programs`."""

    def build() -> dict[str, Any]:
        try:
            from executorch.backends.apple.coreml import executorchcoreml
            from executorch.exir._serialize._program import deserialize_pte_binary
        except ImportError as exc:
            raise NebisectError(f"reading an ExecuTorch program needs the executorch "
                                f"package ({INSTALL}): {exc}") from None
        try:
            pte = deserialize_pte_binary(Path(arguments.pte).read_bytes())
        except Exception as exc:
            raise NebisectError(f"not an ExecuTorch program ({type(exc).__name__}: "
                                f"{str(exc).strip()[:200]})") from None
        delegates = [d for plan in pte.program.execution_plan for d in plan.delegates]
        packages: list[str] = []
        seen: set[str] = set()
        for delegate in (d for d in delegates if d.id == COREML_BACKEND):
            data = _payload(pte, delegate, seen)
            if data is None:
                continue
            where = Path(arguments.directory) / f"delegate-{len(packages) + 1}"
            where.mkdir(parents=True)
            if not executorchcoreml.unflatten_directory_contents(data, str(where)):
                raise NebisectError(f"Core ML delegate {len(packages) + 1} does not unpack")
            found = sorted(m.parent for m in where.rglob(MANIFEST))
            if not found:
                raise NebisectError(f"Core ML delegate {len(packages) + 1} holds no package")
            packages.append(str(found[0]))
        return {"packages": packages, "backends": sorted({d.id for d in delegates})}

    return record_verdict(build)


def _payload(pte: Any, delegate: Any, seen: set[str]) -> bytes | None:
    """The flattened package of ``delegate``: inline, or the named data a ``CMJR``
    reference names (None for a partition of a multifunction model already taken)."""
    from executorch.exir.schema import DataLocation

    reference = delegate.processed
    if reference.location != DataLocation.INLINE:
        raise NebisectError("a Core ML delegate stored outside the program (a data "
                            "segment) is not read yet")
    raw = bytes(pte.program.backend_delegate_data[reference.index].data)
    if not raw.startswith(NAMED_REFERENCE):
        return raw
    try:
        named_reference = parse_untrusted_json(raw[len(NAMED_REFERENCE):].decode())
    except ValueError as exc:
        raise NebisectError(f"a Core ML delegate's reference to named data {exc}") from None
    key = named_reference.get("key") if isinstance(named_reference, dict) else None
    if not isinstance(key, str):
        raise NebisectError("a Core ML delegate's reference to named data names no key")
    if key in seen:
        return None
    seen.add(key)
    named = pte.named_data
    entry = named.pte_data.get(key) if named is not None else None
    if entry is None:
        raise NebisectError(f"a Core ML delegate names data {key!r} the program lacks")
    return bytes(named.buffers[entry.buffer_index])
