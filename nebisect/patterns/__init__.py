"""The pattern fuzzer: small torch programs built from the idioms models are written in
(:mod:`~nebisect.patterns.grammar`, :mod:`~nebisect.patterns.idioms`), written out as
sources ``run`` judges (:mod:`~nebisect.patterns.program`)."""
