"""``converter-compat``: the converter overrides torch 2.13 + coremltools 9.0 need.

Why: all-MiniLM-L6-v2 with a masked mean-pool does not convert with this combination —
``Unsupported fx node new_ones`` on the torch.export path, ``only 0-dimensional arrays
can be converted to Python scalars`` on the jit.trace path (NumPy ≥ 2.4). The smallest
converters that fix both live in :mod:`nebisect.convert_overrides`; this fix makes them
a named, verifiable rewrite at the convert stage (:mod:`nebisect.convert` runs ``setup``
in its conversion child).

Before::

    torch graph ──► coremltools converters ──✗ (new_ones / aten::Int)

After::

    torch graph ──► coremltools converters + {new_ones, int} overrides ──► MIL program

The overrides are active only while the fix is (``with fix.active(): convert(...)``);
coremltools' own converters are restored afterwards.
"""

from __future__ import annotations

from nebisect.fixes import register_fix
from nebisect.fixes.base import ConverterFix


@register_fix
class ConverterCompat(ConverterFix):
    """Converter overrides (new_ones, aten::Int) so MiniLM + mean-pool converts today."""

    name = "converter-compat"
    cures = ("error:convert:*",)
    setup = "nebisect.convert_overrides:install"
    teardown = "nebisect.convert_overrides:uninstall"
