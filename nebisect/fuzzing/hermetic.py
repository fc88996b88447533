"""Keep Hypothesis' generation independent of which modules happen to be imported.

Hypothesis (6.1xx) mixes "local constants" into generation: every literal it finds in
the source of loaded, non-site-packages modules (``sys.modules``) becomes a value it
sometimes draws. For a test suite that is a good heuristic; for nebisect it breaks the
promise "the same ``--seed`` gives the same findings": a campaign run after
``import nebisect.detect`` (or from an editable install, whose modules count as local,
or beside a user's factory file) draws different values from the same campaign on a
cluster worker or in a fresh interpreter. The literals of nebisect's own modules say
nothing about a model's cliffs, so the campaign draws from Hypothesis' global constants
only.

The hook is private Hypothesis API (``providers._get_local_constants``); when a future
version drops it there is nothing to neutralize and the context manager does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis.internal.conjecture import providers


@contextmanager
def without_local_constants() -> Iterator[None]:
    """Generate from Hypothesis' global constants only while the block runs."""
    original = getattr(providers, "_get_local_constants", None)
    constants_type = getattr(providers, "Constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or constants_type is None or cache is None:
        yield
        return
    empty = constants_type()
    providers._get_local_constants = lambda: empty
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()
