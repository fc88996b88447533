"""The two kinds of fix: MIL graph passes and converter overrides.

A :class:`GraphFix` walks every block of a program (nested blocks included) and offers
each op whose type is one of its ``anchors`` to :meth:`GraphFix.rewrite`, a
guard-clause matcher that either leaves the graph untouched and returns ``False`` or
rewrites one occurrence and returns ``True`` — the shape of coremltools'
``_try_to_transform`` helpers. Ops left without consumers are removed afterwards with
coremltools' own dead-code elimination, so a rewrite never has to track what it
orphaned.

A :class:`ConverterFix` changes how torch is lowered to MIL; it is active only inside
:meth:`ConverterFix.active` (or in a conversion child told to run its ``setup``), so
one process can convert with and without it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

from nebisect.mil.quiet import import_coremltools


class Fix:
    """A named rewrite and the failure signatures it claims to cure (base of both levels)."""

    name: ClassVar[str] = ""
    level: ClassVar[str] = ""
    #: Signature patterns (fnmatch: ``mismatch:collapse``, ``error:convert:*``) it addresses.
    cures: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def summary(cls) -> str:
        """First line of the class docstring (``nebisect fix list``)."""
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def claims(cls, signature: str) -> bool:
        """True when ``signature`` is one this fix says it cures."""
        return any(fnmatch.fnmatchcase(signature, pattern) for pattern in cls.cures)


class GraphFix(Fix):
    """A MIL graph pass: guard-clause matching at anchor ops, one rewrite per match."""

    level = "graph"
    #: Op types at which a match can start.
    anchors: ClassVar[tuple[str, ...]] = ()

    def apply(self, program: Any) -> int:
        """Rewrite every match in ``program`` in place; the number of rewrites."""
        import_coremltools()
        from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

        count = sum(self._apply_block(f) for f in program.functions.values())
        if count:
            PASS_REGISTRY["common::dead_code_elimination"](program)
        return count

    def _apply_block(self, block: Any) -> int:
        count = 0
        with block:
            for op in list(block.operations):
                if op.enclosing_block is None:
                    continue
                count += sum(self._apply_block(inner) for inner in op.blocks)
                if op.op_type in self.anchors and self.rewrite(op, block):
                    count += 1
        return count

    @abstractmethod
    def rewrite(self, op: Any, block: Any) -> bool:
        """Match the pattern anchored at ``op``; rewrite it and return True, or return False."""


class ConverterFix(Fix):
    """Converter overrides, in force only inside :meth:`active`.

    ``setup`` and ``teardown`` are ``module:function`` references, not callables, so an
    isolated conversion child can be told to run them (``nebisect.sources.convert``'s ``setup``).
    """

    level = "convert"
    setup: ClassVar[str] = ""
    teardown: ClassVar[str] = ""

    def install(self) -> None:
        _call(self.setup)

    def uninstall(self) -> None:
        _call(self.teardown)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self.install()
        try:
            yield
        finally:
            self.uninstall()


def _call(reference: str) -> None:
    module, _, function = reference.partition(":")
    getattr(importlib.import_module(module), function)()
