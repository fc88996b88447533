"""CLI commands, one module each; every module defines ``ORDER`` and ``register(app)``.

``_``-prefixed modules hold what several commands share (option parsing) and are not
commands.
"""
