"""The process-isolation engine behind :mod:`nebisect.isolate`.

Modules, by side of the process boundary:

* parent side — ``isolator`` (the public :class:`Isolator`), ``fork`` (client of the
  template process), ``spawn``, ``persistent`` (client of the worker), ``helper``
  (handle on a long-lived helper process), ``workspace`` (the temp root), ``collect``
  (turns what a finished or dead child left behind into a verdict);
* child side — ``child`` (what runs inside a case process), ``template`` (the small
  long-lived process that forks one child per case), ``worker`` (the persistent
  worker), ``server`` (their common start-up and framing);
* both — ``job`` (the records that cross the boundary as JSON), ``osproc`` (process
  groups, parent-death signals, limits, exit handles), ``watch`` (waiting for a process
  with a timeout while draining its stderr).

This package's ``__init__`` imports nothing: a spawned child pays only for what it uses.
"""
