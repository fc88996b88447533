"""Fuzzing: campaigns over one MIL op (``fuzz --op``) or one model (``fuzz SOURCE``).

``nebisect fuzz`` draws one-op MIL programs and their inputs with Hypothesis (the op
catalogue is :mod:`nebisect.opspecs`), runs each case isolated on a target against the
float64 oracle, shrinks every failure to the smallest case with the same signature and
pins numeric cliffs down to two adjacent fp16 values (:mod:`nebisect.search.cliff`;
DESIGN.md §7).
"""
