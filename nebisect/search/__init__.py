"""Search algorithms with no I/O and no ML: cliff localization on a value grid
(:mod:`~nebisect.search.cliff`) and the budgeted exploration engine over value families
(:mod:`~nebisect.search.explore`), with the records they produce
(:mod:`~nebisect.search.records`). Delta debugging and first divergence are
:mod:`nebisect.ddmin`. Every caller injects the test (``evaluate(input_set)``), so
nothing here knows which model, op or target it searches.
"""
