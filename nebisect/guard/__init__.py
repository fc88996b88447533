"""Guarding against regressions with the corpus (DESIGN §3, §9).

:mod:`~nebisect.guard.replay` replays a corpus and holds every case to its recorded
expectation, :mod:`~nebisect.guard.devices` does so on every selected device of a
cluster, :mod:`~nebisect.guard.verify` replays it without and with fixes (``fix
verify``), and :mod:`~nebisect.guard.pytest_plugin` makes each case a pytest item.
"""
