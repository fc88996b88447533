"""What a model is fed: value families (named, seeded input sets per model input,
:mod:`~nebisect.inputs.families`), the input sets a user brings
(:mod:`~nebisect.inputs.inputsets`) and the guided probes that lint's interval analysis
aims at a program's fp16 boundaries (:mod:`~nebisect.inputs.probes`). Shared by
detection and fuzzing, below both.
"""
