"""CLI commands, one module each; every module defines ``ORDER`` and ``register(app)``.

A module is named after its command (``commands/run.py`` is ``nebisect run``); a command
the Python API also offers (run, bisect, fuzz, fix, lint, replay) has its function in the
:mod:`nebisect.api` module of the same name.

``_``-prefixed modules hold what several commands share (option parsing) and are not
commands.
"""
