"""The converter atlas: torch ops through coremltools, sample by sample (``nebisect atlas``).

:mod:`~nebisect.atlas.samples` turns torch's op database into one-op torch sources;
:mod:`~nebisect.atlas.plan` picks the ops and samples; :mod:`~nebisect.atlas.sweep`
runs each through ``run`` on one runner, cached; :mod:`~nebisect.atlas.records` are
the entries and the atlas; :mod:`~nebisect.atlas.render` its tables and Markdown.
"""
