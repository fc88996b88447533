"""nebisect's modules import downwards only, and never in a cycle (DESIGN.md §3).

The import graph is read from the source: every ``import`` statement, including the
late ones inside functions (a late import hides a cycle from Python, not from a
reader) and those under ``if TYPE_CHECKING:`` (a type-only import is still a
dependency a reader must hold). Each module sits in the layer of its longest matching
prefix in :data:`LAYERS`; a module may import its own layer or a lower one.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from types import ModuleType

import pytest
from support import REPO

PACKAGE = REPO / "nebisect"


def _load_structure() -> ModuleType:
    """``scripts/structure_figures.py``: the module list and the cycle search the
    structural figures report are the ones this test holds the layers to."""
    spec = importlib.util.spec_from_file_location(
        "structure_figures", REPO / "scripts" / "structure_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STRUCTURE = _load_structure()

#: Lowest first: records and pure algorithms, then the machinery that runs a case, the
#: model-level layers, the pipeline stages and the commands (DESIGN.md §3).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("nebisect", "nebisect.version", "nebisect.errors", "nebisect.files", "nebisect.registry",
     "nebisect.codec", "nebisect.arrays", "nebisect.case", "nebisect.verdict", "nebisect.oracle",
     "nebisect.bounds", "nebisect.package", "nebisect.search.ddmin",
     "nebisect.search.divergence", "nebisect.targets.spec"),
    ("nebisect.isolation", "nebisect.isolate"),
    ("nebisect.executors",),
    ("nebisect.mil",),
    ("nebisect.sources",),
    ("nebisect.targets",),
    ("nebisect.corpus",),
    ("nebisect.fixes",),
    ("nebisect.hazards",),
    ("nebisect.report",),
    ("nebisect.evaluate",),
    ("nebisect.search",),
    ("nebisect.opspecs",),
    ("nebisect.inputs",),
    ("nebisect.detect",),
    ("nebisect.minimize",),
    ("nebisect.fuzzing",),
    ("nebisect.patterns",),
    ("nebisect.atlas",),
    ("nebisect.guard",),
    ("nebisect.options",),
    ("nebisect.api",),
    ("nebisect.commands",),
    ("nebisect.cli", "nebisect.__main__"),
)

#: The package itself is the API's front door (``nebisect.run``): above everything, it
#: imports only :mod:`nebisect.api` and the records below it; no module imports it.
FACADE = "nebisect"


MODULES = STRUCTURE.modules(PACKAGE)


def _known(name: str) -> str:
    """The module ``name`` refers to: itself, else its closest enclosing package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str) -> set[str]:
    """The nebisect modules ``module`` imports (``from pkg import mod`` counts as mod)."""
    file = MODULES[module]
    tree = ast.parse(file.read_text(), str(file))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(a.name) for a in node.names if a.name.startswith("nebisect"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nebisect"):
            assert node.level == 0, f"{module}: relative import"
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else _known(str(node.module)))
    found.discard(module)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the longest prefix naming ``module`` (the
    :data:`FACADE` above them all)."""
    if module == FACADE:
        return len(LAYERS)
    best, best_length = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def _cycles() -> Iterator[list[str]]:
    """Strongly connected components with more than one module."""
    return STRUCTURE.cycles(GRAPH)


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_import_cycles() -> None:
    assert list(_cycles()) == []


def test_imports_point_down() -> None:
    upward = sorted(
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in GRAPH.items() for target in targets
        if layer_of(target) > layer_of(module))
    assert upward == []


def test_the_checker_sees_a_cycle_and_an_upward_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: a synthetic graph with both faults is reported."""
    monkeypatch.setitem(GRAPH, "nebisect.case", GRAPH["nebisect.case"] | {"nebisect.guard"})
    monkeypatch.setitem(GRAPH, "nebisect.guard", GRAPH["nebisect.guard"] | {"nebisect.case"})
    assert ["nebisect.case", "nebisect.guard"] in list(_cycles())
    assert layer_of("nebisect.guard") > layer_of("nebisect.case")


#: Folders that must not know what sits beside them in the layer picture, though it is
#: lower: the search algorithms know no model and no process (DESIGN.md §3), and the
#: simulator is handed what it needs (a memory budget) as plain values, never the
#: isolation layer that runs it.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "nebisect.search": ("nebisect.mil", "nebisect.sources", "nebisect.targets",
                        "nebisect.evaluate", "nebisect.isolation", "nebisect.isolate",
                        "nebisect.executors"),
    "nebisect.mil": ("nebisect.isolation", "nebisect.isolate", "nebisect.executors"),
}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _forbidden_crossings() -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for folder, banned in FORBIDDEN.items()
        for module, targets in GRAPH.items() if _within(module, folder)
        for target in targets if any(_within(target, b) for b in banned))


def test_forbidden_imports() -> None:
    assert _forbidden_crossings() == []


def test_the_checker_sees_a_forbidden_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "nebisect.mil.sizes",
                        GRAPH["nebisect.mil.sizes"] | {"nebisect.isolation.memory"})
    assert _forbidden_crossings() == ["nebisect.mil.sizes imports nebisect.isolation.memory"]


#: The modules that construct an ``Isolator``: the runner (a command's isolators), the
#: Dask worker (a worker thread's) and isolation itself. Anything else is handed one, so
#: every child runs under the limits the command's runner gives its isolators.
ISOLATOR_MAKERS = ("nebisect.executors.runner", "nebisect.executors.worker",
                   "nebisect.isolation")


def isolator_constructions(module: str) -> list[int]:
    """The lines of ``module`` that call ``Isolator(...)``."""
    file = MODULES[module]
    tree = ast.parse(file.read_text(), str(file))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and (
                (isinstance(node.func, ast.Name) and node.func.id == "Isolator")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "Isolator"))]


def test_only_the_runner_makes_isolators() -> None:
    made = sorted(f"{module}:{line}" for module in MODULES
                  if not any(_within(module, maker) for maker in ISOLATOR_MAKERS)
                  for line in isolator_constructions(module))
    assert made == []
    assert isolator_constructions("nebisect.executors.runner")
