"""Imported once by the isolation template (fork) or worker (persistent) before fuzz cases.

A forked child inherits everything its template imported. Fuzz cases would otherwise
pay, in every child, for loading the op specs (and Hypothesis with them), the
simulator's kernel families and coremltools' builder on first use — ~100 ms against the
~2 ms the case itself needs. Importing this module does that work once, including one
throw-away build so the builder's lazy state exists before the fork.
"""

from __future__ import annotations

from nebisect.fuzz.builders import build
from nebisect.fuzz.ops import registered_ops
from nebisect.mil.kernels import registered_ops as kernel_ops

registered_ops()
kernel_ops()
build("relu", "fp16", {"x": [1]}, {})
