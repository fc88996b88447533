"""Run one case in a process of its own and always come back with a verdict.

The public face of :mod:`nebisect.isolation` (see DESIGN §4): build a :class:`Job`
naming a ``module:function`` and a JSON payload, hand it to an :class:`Isolator` (or
:func:`run_isolated`), get an :class:`Outcome` — a verdict that is ``crash`` with the
signal's name if the child died, ``timeout``, ``oom``, ``error`` with a normalized
message, or whatever the function decided — plus the arrays it returned. Child code
calls :func:`mark_stage` so a crash is blamed on the right stage; a job states what its
process must hold once, as :class:`Needs`.
"""

from nebisect.isolation.isolator import MODES, Isolator, fresh_mode, run_isolated
from nebisect.isolation.job import Job, Outcome, mark_stage
from nebisect.isolation.needs import COREMLTOOLS_ONLY, NOTHING, Hold, Needs

__all__ = ["COREMLTOOLS_ONLY", "MODES", "NOTHING", "Hold", "Isolator", "Job", "Needs", "Outcome",
           "fresh_mode", "mark_stage", "run_isolated"]
