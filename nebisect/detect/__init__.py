"""Detection (DESIGN §10): the run matrix — every target on both conversion paths,
judged against the float64 reference — its exploration of the input space, attribution
of each failure to the stage and op where it enters, and the findings a report shows.

The value families and guided probes it explores with live in :mod:`nebisect.inputs`,
the exploration engine in :mod:`nebisect.search`, and judging one case in
:mod:`nebisect.evaluate`; this package puts them together for one model.
"""

#: exploration predictions per target by default (``run --budget``): seed 000's model on
#: the three default simulator targets, both conversion paths, finishes in well under a
#: minute on 2 cores
DEFAULT_BUDGET = 40
