"""Guarding against regressions with the corpus (DESIGN §3, §9): replays over devices.

Today's single-machine replay and fix verification still live in
:mod:`nebisect.guard.replay` and :mod:`nebisect.guard.verify` (the re-layout moves them
here later).
"""
