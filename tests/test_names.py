"""One name, one meaning (DESIGN.md §3): a grep for a class or a constant finds one thing.

Three checks read the source with :mod:`ast` and regular expressions, importing nothing:

* no public top-level class or constant is defined in two modules of the package — two
  ``Plan`` classes, or two ``STAGES`` tuples with different members, make every grep and
  every ``from … import`` a guess;
* every dotted reference ``nebisect.x.y`` written in the docstrings and comments of the
  package, bench/ and examples/, and in README.md and docs/, names a module or an
  attribute that exists: after a re-layout a docstring still pointing at
  ``nebisect.runner`` sends a reader to a file that is not there;
* every name bench/ and scripts/ import from the package exists (nothing runs them in
  the suite, so a renamed class would otherwise break them unseen).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from support import REPO

PACKAGE = REPO / "nebisect"

#: Names several modules define on purpose, each with the reason.
ALLOWED = {
    # The command protocol: cli.py reads each command module's ORDER (its place in
    # ``--help``); one meaning, one per command module by design.
    "ORDER",
}


def _modules() -> dict[str, Path]:
    modules = {}
    for file in PACKAGE.rglob("*.py"):
        parts = list(file.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = file
    return modules


MODULES = _modules()
TREES = {name: ast.parse(file.read_text(), str(file)) for name, file in MODULES.items()}


def _is_constant(name: str) -> bool:
    return name.isupper() and not name.startswith("_")


def _is_typevar(value: ast.expr | None) -> bool:
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("TypeVar", "ParamSpec"))


def public_definitions(tree: ast.Module) -> set[str]:
    """Top-level public classes and UPPER_CASE constants a module defines itself.

    Private names (``_X``) never leave their module, so a grep across modules is not
    misled by them; type variables are local placeholders, not meanings."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and not _is_typevar(node.value):
            names.update(t.id for t in node.targets
                         if isinstance(t, ast.Name) and _is_constant(t.id))
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and _is_constant(node.target.id)):
            names.add(node.target.id)
    return names


def duplicated_names() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for module, tree in TREES.items():
        for name in public_definitions(tree):
            where[name].append(module)
    return {n: sorted(m) for n, m in where.items() if len(m) > 1 and n not in ALLOWED}


def test_no_class_or_constant_is_defined_in_two_modules() -> None:
    assert duplicated_names() == {}


def test_the_duplicate_check_sees_classes_and_constants() -> None:
    tree = ast.parse("class Plan: ...\nSTAGES = ()\n_PRIVATE = 1\nT = TypeVar('T')\n"
                     "def f(): ...\n")
    assert public_definitions(tree) == {"Plan", "STAGES"}


# ---------------------------------------------------------------------------- references
_REFERENCE = re.compile(r"(?<![\w./'\"-])nebisect(?:\.[A-Za-z_]\w*)+")


def _top_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            names.update(_top_level_names(ast.Module(body=node.body, type_ignores=[])))
    return names


def _class_names(node: ast.ClassDef) -> set[str]:
    members = set(_top_level_names(ast.Module(body=node.body, type_ignores=[])))
    for inner in ast.walk(node):  # attributes set in methods: self.x = …
        if (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                and inner.value.id == "self"):
            members.add(inner.attr)
    return members


def resolves(reference: str) -> bool:
    """True when ``reference`` is a module, or a module's attribute (one level into a
    class defined there)."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in MODULES:
            break
    else:
        return False
    rest = parts[cut:]
    if not rest:
        return True
    if module == "nebisect" and rest[0] not in _top_level_names(TREES[module]):
        # the package re-exports the Python API on first use (``nebisect.run``)
        return resolves(".".join(["nebisect.api", *rest]))
    names = _top_level_names(TREES[module])
    found = names.get(rest[0])
    if found is None:
        return False
    if len(rest) == 1 or not isinstance(found, ast.ClassDef):
        return True
    return rest[1] in _class_names(found)


def _documentation(file: Path) -> str:
    """The text of a file a reader reads as prose: docstrings and comments of a module,
    or the whole of a Markdown file."""
    text = file.read_text()
    if file.suffix != ".py":
        return text
    tree = ast.parse(text)
    pieces = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(tree)
              if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                   ast.AsyncFunctionDef))]
    pieces += re.findall(r"#[^\n]*", text)
    return "\n".join(pieces)


def stale_references() -> dict[str, list[str]]:
    files = [*MODULES.values(), REPO / "README.md",
             *(file for folder in ("docs", "bench", "examples")
               for pattern in ("*.py", "*.md") for file in sorted((REPO / folder).rglob(pattern)))]
    stale: dict[str, list[str]] = defaultdict(list)
    for file in files:
        if not file.exists():
            continue
        for reference in sorted(set(_REFERENCE.findall(_documentation(file)))):
            if not resolves(reference):
                stale[str(file.relative_to(REPO))].append(reference)
    return dict(stale)


def test_dotted_references_in_documentation_resolve() -> None:
    assert stale_references() == {}


def test_reference_resolution_rejects_what_is_gone() -> None:
    assert resolves("nebisect.search.ddmin")
    assert resolves("nebisect.search.ddmin.ddmin")
    assert resolves("nebisect.search.ddmin.Evaluator.interesting")
    assert resolves("nebisect.run") and resolves("nebisect.RunResult.ok")
    assert not resolves("nebisect.runner")
    assert not resolves("nebisect.search.ddmin.no_such_function")
    assert not resolves("nebisect.search.ddmin.Evaluator.no_such_method")


def unresolved_imports() -> dict[str, list[str]]:
    """The ``from nebisect… import name`` lines of bench/ and scripts/ (run by hand, so
    no test imports them) that name what the package does not define."""
    unresolved: dict[str, list[str]] = defaultdict(list)
    for file in sorted([*(REPO / "bench").glob("*.py"), *(REPO / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nebisect"):
                unresolved[str(file.relative_to(REPO))] += [
                    f"{node.module}.{alias.name}" for alias in node.names
                    if not resolves(f"{node.module}.{alias.name}")]
    return {file: names for file, names in unresolved.items() if names}


def test_bench_and_scripts_import_what_exists() -> None:
    assert unresolved_imports() == {}
