"""The MIL op catalogue: for each op the simulator fuzzes, its parameter space, how to
emit a one-op program, and the fp16 boundary theory that says where it should fail
(:mod:`~nebisect.opspecs.ops`, one module per op family under
:mod:`~nebisect.opspecs.specs`). Read by fuzzing (what to draw) and by detection's
guided probes (where a model's ops break).
"""
