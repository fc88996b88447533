"""CLI commands, one module each; every module defines ``ORDER`` and ``register(app)``."""
