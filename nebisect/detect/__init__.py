"""Discovery (DESIGN §10): search a model's input space for failures.

* :mod:`nebisect.detect.families` — value families: named, seeded input sets per model
  input (scaled normals, constant fills, spikes, zero slices, special values, …);
* :mod:`nebisect.detect.probes` — the input magnitudes lint's interval analysis says
  make a hazard op leave the fp16 range, probed first;
* :mod:`nebisect.detect.explore` — the budgeted engine that evaluates family members,
  localizes model-level cliffs on the fp16 grid and groups failures.

Nothing here runs a model: the caller injects ``evaluate(input_set)``.
"""

#: exploration predictions per target by default (``run --budget``): seed 000's model on
#: the three default simulator targets, both conversion paths, finishes in well under a
#: minute on 2 cores
DEFAULT_BUDGET = 40
