"""``converter-compat``: the converter overrides torch 2.13 + coremltools 9.0 need, as a
fix — a named, verifiable rewrite at the convert stage (:mod:`nebisect.sources.convert`
runs ``setup`` in its conversion child). The overrides themselves, and why each is
needed, are :mod:`nebisect.sources.converter_overrides`: a run converts with them too
when they cure a conversion failure, below the fixes engine.

The overrides are active only while the fix is (``with fix.active(): convert(...)``);
coremltools' own converters are restored afterwards.
"""

from __future__ import annotations

from nebisect.fixes import register_fix
from nebisect.fixes.base import ConverterFix


@register_fix
class ConverterCompat(ConverterFix):
    """Converter overrides (new_ones, aten::Int, …) so MiniLM + mean-pool converts today."""

    name = "converter-compat"
    cures = ("error:convert:*",)
    setup = "nebisect.sources.converter_overrides:install"
    teardown = "nebisect.sources.converter_overrides:uninstall"
