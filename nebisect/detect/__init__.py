"""Detection (DESIGN §10): runs a model and says what fails, where and why.

:mod:`~nebisect.detect.source_run` is the work behind ``nebisect run``: it resolves the
source, converts it and evaluates it on every target and conversion path against the float64
reference, each prediction in an isolated child (:mod:`~nebisect.detect.matrix`);
explores the input space per target (:mod:`~nebisect.detect.discover`); attributes each
failure to the stage (:mod:`~nebisect.detect.attribution`) and op
(:mod:`~nebisect.detect.culprit`) where it enters; and merges the failures into one
finding per root cause (:mod:`~nebisect.detect.causes`), which
:mod:`~nebisect.detect.run_console` prints and :mod:`~nebisect.detect.report` writes.

The value families and guided probes it explores with live in :mod:`nebisect.inputs`,
the exploration engine in :mod:`nebisect.search`, and judging one case in
:mod:`nebisect.evaluate`; this package puts them together for one model.
"""

#: exploration predictions per target by default (``run --budget``): seed 000's model on
#: the three default simulator targets, both conversion paths, finishes in well under a
#: minute on 2 cores
DEFAULT_BUDGET = 40
#: decode steps a stateful model (``ct.StateType``) is judged over by default (``run
#: --steps``): enough for a state to be read back and rewritten several times, cheap
#: enough that every explored input set still costs a few predictions; a state that
#: breaks later (an fp16 running sum after 65504/|increment| steps) needs more. A model
#: without state is predicted once whatever the value.
DEFAULT_STEPS = 4
