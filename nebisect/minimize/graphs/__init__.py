"""Graph adapters: turn a model into units for :mod:`nebisect.search.ddmin`, and a subset of
units back into a runnable model.

Each adapter exposes the dependency view (:class:`nebisect.search.divergence.Dag`: units in
topological order, the values they read and write) and materializes a cut — the kept
units, fed the values they read from outside the cut as recorded in a reference run.
``mil`` works on coremltools MIL programs (ops are units, constants travel with the ops
that read them); ``fx`` on torch.export / FX graphs and their submodule hierarchy.
``fx_jobs`` keeps an exported graph in an isolated child (exporting runs the user's
``forward``) and hands the parent records.
"""
