"""Search algorithms with no I/O and no ML: cliff localization on a value grid
(:mod:`~nebisect.search.cliff`) and the budgeted exploration engine over value families
(:mod:`~nebisect.search.explore`), with the records they produce
(:mod:`~nebisect.search.records`); delta debugging (:mod:`~nebisect.search.ddmin`) and
first divergence (:mod:`~nebisect.search.divergence`), which the simulator's dependency
view and the layers below ``search/`` build on too. Every caller injects the test
(``evaluate(input_set)``, ``test(subset)``), so nothing here knows which model, op or
target it searches.
"""
