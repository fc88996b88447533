"""Op-level fuzzing: op specs, value strategies, the campaign engine, cliff localization.

``nebisect fuzz`` draws one-op MIL programs and their inputs with Hypothesis, runs each
case isolated on a target against the float64 oracle, shrinks every failure to the
smallest case with the same signature and pins numeric cliffs down to two adjacent fp16
values (DESIGN.md §7).
"""
