"""Targets: where a program executes.

:mod:`~nebisect.targets.spec` is the grammar of a target name (a bottom module, cheap to
import: this package's init imports nothing); :mod:`~nebisect.targets.registry` maps
names to target classes, which ``sim.py``, ``coreml.py``, ``coreml_remote.py`` and
``torch.py`` register.
"""
