"""Structural figures of a nebisect checkout, read from its source (nothing is run).

Prints the measures the structural issues track, so a before → after is one command on
two checkouts::

    python scripts/structure_figures.py                 # this checkout
    git worktree add /tmp/before <rev> && python scripts/structure_figures.py /tmp/before

* import cycles among modules, counting type-only imports (``if TYPE_CHECKING:``), and
  cycles among top-level folders (``detect`` → ``fuzz`` → ``detect``);
* distinct string keys written into ``Verdict.metrics``;
* hand-written ``to_dict`` / ``from_dict`` methods;
* public target-spec parsers and their call sites, registry-blind parses (which reject
  plugin targets) outside ``targets/``, and prefix checks on target strings
  (``target.startswith("sim:")``);
* mentions of preload / prestart / warm_up / crew outside ``isolation/`` (Dask's own
  worker ``--preload``, :mod:`nebisect.executors.preload`, is another thing and not
  counted);
* fan-out paths: modules that map work over threads of isolators themselves;
* the longest command function (``nebisect/commands``), in lines;
* nebisect modules reachable from ``nebisect.commands.run`` by imports;
* how options travel: parameters of ``nebisect run``'s command function, of
  ``nebisect.run`` and of the function that checks its options; ``--memory`` /
  ``--timeout`` declared in ``nebisect/commands``; module state set from functions
  (``global`` statements, ``_STATE.x =``);
* how targets and payloads travel: target-like names annotated as strings
  (``target: str``, ``targets: tuple[str, ...]``, ``reference: str``), the files that call
  ``spec_of`` (its call sites are the parsers' above), ``payload["…"]`` reads;
* names: functions named ``run``, files named ``run.py`` / ``terminal.py``; imports of
  isolation from the simulator (``mil/``).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name → file, for every module under ``package``."""
    found = {}
    for file in sorted(package.rglob("*.py")):
        parts = list(file.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = file
    return found


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Every import of a nebisect module, late and type-only ones included."""

    def resolve(name: str) -> str:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, file in known.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                targets |= {resolve(a.name) for a in node.names if a.name.startswith("nebisect")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nebisect"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in known else resolve(str(node.module)))
        graph[module] = targets - {module, ""}
    return graph


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[list[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                yield from visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                yield sorted(component)

    for node in sorted(graph):
        if node not in index:
            yield from visit(node)


def folder_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def longest_function(files: list[Path]) -> tuple[int, str]:
    best = (0, "")
    for file in files:
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                best = max(best, (length, f"{file.name}:{node.name}"))
    return best


def main(root: Path) -> None:
    package = root / "nebisect"
    known = modules(package)
    graph = import_graph(known)
    texts = {module: file.read_text() for module, file in known.items()}
    everything = "\n".join(texts.values())

    module_cycles = list(cycles(graph))
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folders.setdefault(folder_of(module), set()).update(
            folder_of(t) for t in targets if folder_of(t) != folder_of(module))
    folder_cycles = list(cycles(folders))

    metric_keys = set(re.findall(r"metrics\[\s*[\"'](\w+)[\"']\s*\]\s*=", everything))
    metric_keys |= set(re.findall(r"metrics\.setdefault\(\s*[\"'](\w+)[\"']", everything))
    codecs = len(re.findall(r"^\s+def (?:to_dict|from_dict)\(", everything, re.M))
    parsers = len(re.findall(r"^def (?:parse_target|spec_of)\(", everything, re.M))
    parse_calls = len(re.findall(r"\b(?:parse_target|spec_of)\(", everything)) - parsers
    grammar_calls = sum(len(re.findall(r"\b(?:parse_target|TargetSpec\.parse)\(", text))
                        for module, text in texts.items()
                        if module not in ("nebisect.targets.spec", "nebisect.targets.registry"))
    prefix_checks = len(re.findall(r"startswith\(\(?[\"'](?:sim|torch|coreml)[:\"'-]",
                                   everything))
    plumbing = sum(len(re.findall(r"\b(?:preload|prestart|warm_up|crew)\w*", _without_dask(text)))
                   for module, text in texts.items()
                   if not module.startswith("nebisect.isolation")
                   and module != "nebisect.executors.preload")
    fan_out = sorted(module for module, text in texts.items()
                     if re.search(r"\b(?:map_isolated|ThreadPoolExecutor)\(", text)
                     and module != "nebisect.isolation.pool")
    length, where = longest_function(sorted((package / "commands").glob("*.py")))
    traced = reachable(graph, "nebisect.commands.run")

    print(f"modules                                   {len(known)}")
    print(f"module import cycles (type-only counted)  {len(module_cycles)}")
    for cycle in module_cycles:
        print(f"    {' ↔ '.join(cycle)}")
    print(f"folder import cycles                      {len(folder_cycles)}")
    for cycle in folder_cycles:
        print(f"    {' ↔ '.join(cycle)}")
    print(f"string keys written into Verdict.metrics  {len(metric_keys)}")
    print(f"hand-written to_dict / from_dict          {codecs}")
    print(f"target-spec parsers / call sites          {parsers} / {parse_calls}")
    print(f"registry-blind parses outside targets/    {grammar_calls}")
    print(f"prefix checks on target strings           {prefix_checks}")
    print(f"preload/prestart/warm_up/crew outside isolation/  {plumbing}")
    print(f"fan-out paths                             {len(fan_out)} ({', '.join(fan_out)})")
    print(f"longest command function                  {length} lines ({where})")
    print(f"modules reachable from commands.run       {len(traced)}")
    travel_figures(package, known, texts, graph)


#: the process limits' options, as a typer declaration spells them
MEMORY_FLAG, TIMEOUT_FLAG = '"--memory"', '"--timeout"'


def parameters(file: Path, name: str) -> int | None:
    """Parameters of the module-level function ``name`` in ``file`` (None: not there)."""
    if not file.exists():
        return None
    for node in ast.parse(file.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            arguments = node.args
            return (len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
                    + bool(arguments.vararg) + bool(arguments.kwarg))
    return None


def travel_figures(package: Path, known: dict[str, Path], texts: dict[str, str],
                   graph: dict[str, set[str]]) -> None:
    """The figures of how options, targets and payloads travel (see the module docstring)."""
    commands = "\n".join(f.read_text() for f in sorted((package / "commands").glob("*.py")))
    everything = "\n".join(texts.values())
    run_checks = next((known[module] for module, text in texts.items()
                       if re.search(r"^def run_options\(", text, re.M)), None)
    stringly = re.compile(r"\b(?:targets?|reference)\s*:\s*(?:str\b|Sequence\[str\]|"
                          r"tuple\[str, \.\.\.\]|list\[str\]|Iterable\[str\])")
    spec_callers = [module for module, text in texts.items()
                    if re.search(r"^(?!def ).*\bspec_of\(", text, re.M)]
    names = [f.name for f in package.rglob("*.py")]
    mil_isolation = sorted(f"{m} → {t}" for m, targets in graph.items()
                           if m.startswith("nebisect.mil") for t in targets
                           if t.startswith(("nebisect.isolation", "nebisect.isolate")))
    globals_set = re.findall(r"^\s+global \w", everything, re.M)
    state_set = re.findall(r"\b_STATE\.\w+\s*=(?!=)", everything)
    counted = [
        ("parameters: commands run / api run / run_options", " / ".join(str(n) for n in (
            parameters(package / "commands" / "run.py", "run"),
            parameters(package / "api" / "run.py", "run"),
            parameters(run_checks, "run_options") if run_checks else None))),
        ("--memory / --timeout declared in commands/",
         f"{commands.count(MEMORY_FLAG)} / {commands.count(TIMEOUT_FLAG)}"),
        ("module state set from functions (global / _STATE)",
         f"{len(globals_set)} / {len(state_set)}"),
        ("target-like names annotated as strings", str(len(stringly.findall(everything)))),
        ("files calling spec_of", str(len(spec_callers))),
        ('payload["…"] reads', str(len(re.findall(r"payload\[[\"']", everything)))),
        ("functions named run", str(len(re.findall(r"^\s*def run\(", everything, re.M)))),
        ("files named run.py / terminal.py",
         f"{names.count('run.py')} / {names.count('terminal.py')}"),
        ("mil/ → isolation imports", f"{len(mil_isolation)} {mil_isolation or ''}"),
    ]
    for label, value in counted:
        print(f"{label:<50}{value}")


def _without_dask(text: str) -> str:
    """``text`` without the mentions of Dask's worker preload (``--preload``, the
    :mod:`nebisect.executors.preload` module and its ``PRELOAD`` name)."""
    return re.sub(r"--preload|executors\.preload|\bPRELOAD\b|worker preload|"
                  r"Dask's preload|set by the preload|started without the preload", "", text)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
