"""The condition a ``torch.export`` constraint violation states, in one clause.

When a dynamic dimension cannot take every value of its declared range, torch.export
refuses with ``Constraints violated (seq)!`` on its first line and the reason on the
next: ``Not all values of seq = L['ids'].size()[1] in the specified range seq <= 64
satisfy the generated guard ((-1) + L['ids'].size()[1]) != 1.`` — MobileBERT's slice
needs a length other than 2. A conversion failure is told in one line, so the reason
would be lost; :func:`violated_condition` keeps it as ``seq ≠ 2 (seq: ids.shape[1],
declared seq <= 64)``.

Pure text: the guard is solved for its dimension with sympy where it is a linear
(in)equality reading that dimension and numbers alone, and otherwise given as torch wrote it, its
``L['ids'].size()[1]`` read as ``ids.shape[1]``.
"""

from __future__ import annotations

import re

_VIOLATION = re.compile(
    r"Not all values of (?P<dim>\w+) = L\['(?P<input>[^']+)'\]\.size\(\)\[(?P<axis>\d+)\]"
    r" in the specified range (?P<range>.+?) satisfy the generated guard (?P<guard>.+?)\.?$",
    re.MULTILINE)
#: a name in a guard: solved only when the dimension is the one name it reads
_NAME = re.compile(r"[A-Za-z_]\w*")
_SIZE = re.compile(r"L\['(?P<input>[^']+)'\]\.size\(\)\[(?P<axis>\d+)\]")
#: the relations a guard is written with, longest first (so ``<=`` is not read as ``<``)
_RELATIONS = ("!=", "==", "<=", ">=", "<", ">")
_SAID = {"!=": "≠", "==": "=", "<=": "≤", ">=": "≥", "<": "<", ">": ">"}


def violated_condition(text: str) -> str:
    """The condition a constraint violation in ``text`` (an exception's message) states,
    as ``seq ≠ 2 (seq: ids.shape[1], declared seq <= 64)``; "" when ``text`` states none."""
    found = _VIOLATION.search(text)
    if found is None:
        return ""
    dim, source = found["dim"], f"{found['input']}.shape[{found['axis']}]"
    guard = _SIZE.sub(lambda size: (dim if f"{size['input']}.shape[{size['axis']}]" == source
                                    else f"{size['input']}.shape[{size['axis']}]"),
                      found["guard"])
    return f"{_solved(guard, dim)} ({dim}: {source}, declared {found['range']})"


def _solved(guard: str, dim: str) -> str:
    """``guard`` as a condition on ``dim`` alone (``seq ≠ 2``) where it is a linear
    relation in ``dim``; else ``guard`` as written."""
    split = _split(guard)
    if split is None or set(_NAME.findall(guard)) != {dim}:
        return guard
    left, relation, right = split
    import sympy

    symbol = sympy.Symbol(dim)
    try:
        difference = sympy.sympify(left, locals={dim: symbol}) - sympy.sympify(
            right, locals={dim: symbol})
    except (sympy.SympifyError, SyntaxError):
        return guard
    if sympy.degree(difference, symbol) != 1:
        return guard
    slope = difference.coeff(symbol, 1)
    bound = sympy.nsimplify(-difference.coeff(symbol, 0) / slope)
    flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
    said = flipped.get(relation, relation) if slope < 0 else relation
    return f"{dim} {_SAID[said]} {bound}"


def _split(guard: str) -> tuple[str, str, str] | None:
    """``guard`` as (left, relation, right) at its one relation outside parentheses;
    None when it has none, or more than one."""
    depth, found = 0, []
    index = 0
    while index < len(guard):
        char = guard[index]
        depth += (char == "(") - (char == ")")
        relation = next((r for r in _RELATIONS if guard.startswith(r, index)), None)
        if depth == 0 and relation is not None:
            found.append((index, relation))
            index += len(relation)
            continue
        index += 1
    if len(found) != 1:
        return None
    at, relation = found[0]
    return guard[:at].strip(), relation, guard[at + len(relation):].strip()
