"""Minimize a failing case: the bisector, its reductions, candidate spaces, graphs, repros.

``bisector.py`` drives :mod:`nebisect.search.ddmin`'s algorithms with an isolated test;
``reductions.py`` are the objects it is handed (MIL ops, FX nodes, wrapper submodules);
``candidates.py`` turns a kept subset into a runnable candidate; ``graphs/`` cut MIL and
FX graphs; ``repro/`` writes the standalone script.
"""
