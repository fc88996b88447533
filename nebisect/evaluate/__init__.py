"""Judging cases: one case in an isolated child (:mod:`~nebisect.evaluate.judge`), the
workbench that caches conversions, references and verdicts for one model across many
cases (:mod:`~nebisect.evaluate.workbench`), and the program facts read in the template
that evaluates it (:mod:`~nebisect.evaluate.programs`). Every command that runs a model
runs it through here.
"""
