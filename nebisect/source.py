"""Resolve what the user handed to ``run``/``bisect``: an .mlpackage or ``file.py:factory``.

Everything that can be wrong with a source is found here, before any child process
starts, and reported as one line: a missing path, a neuralnetwork ``.mlmodel`` (the
simulator and the reducer need an ML program), a corrupt package, a factory that
raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nebisect.case import NebisectError
from nebisect.inputs import InputDescription, describe_package


@dataclass
class Source:
    """A resolved source: its kind, location and input descriptions."""

    kind: str
    location: str
    inputs: list[InputDescription] = field(default_factory=list)

    @property
    def reference(self) -> str:
        """The oracle: torch fp64 for torch sources, the fp64 simulator otherwise."""
        return "torch:cpu:fp64" if self.kind == "torch" else "sim:fp64"


def resolve_source(text: str) -> Source:
    """Classify and validate a source string."""
    path_part, _, factory = text.rpartition(":") if ".py:" in text else (text, "", "")
    if factory and path_part.endswith(".py"):
        from nebisect.torchsource import describe_torch_source

        return Source("torch", text, describe_torch_source(text))
    path = Path(text)
    if not path.exists():
        raise NebisectError(f"{text}: no such file or directory")
    if path.suffix == ".mlmodel":
        raise NebisectError(
            f"{text}: a neuralnetwork .mlmodel; nebisect needs an ML program (.mlpackage) — "
            "re-convert with convert_to='mlprogram'"
        )
    if path.suffix == ".py":
        raise NebisectError(f"{text}: name the factory as {text}:factory_function")
    if not (path.is_dir() and (path / "Manifest.json").is_file()):
        raise NebisectError(f"{text}: not an .mlpackage (no Manifest.json)")
    _require_ml_program(path)
    return Source("mlpackage", str(path), describe_package(path))


def _require_ml_program(path: Path) -> None:
    from nebisect.mil.load import loadable_package
    from nebisect.quiet import import_coremltools

    ct = import_coremltools()
    try:
        with loadable_package(path) as package:
            spec = ct.utils.load_spec(str(package))
    except Exception as exc:
        raise NebisectError(f"{path}: corrupt package ({type(exc).__name__}: {exc})") from None
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise NebisectError(f"{path}: a {kind} model; nebisect needs an ML program")
