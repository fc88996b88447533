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
  groups, parent-death signals, exit handles), ``memory`` (the memory limit of every
  job: ``--memory``, the machine default, RLIMIT_DATA in the child), ``threads`` (a
  job's share of the cores among the jobs running at once, set in the child), ``watch``
  (waiting for a process with a timeout while draining its stderr), ``reaper`` (child
  subreapers: the descendants a case leaves outside its process group), ``cancel``
  (stopping the waits of other threads at once);
* above the isolator — ``pool`` (a thread pool of isolators that cancels its cases in
  flight when interrupted).

What is guaranteed when a case ends (finished, crashed, timed out, or the parent was
interrupted by Ctrl-C, SIGTERM or SIGHUP):

* its process group is killed and its process reaped, on every platform;
* Linux: every descendant is killed and reaped, including one that left the group with
  ``setsid()`` or a double fork — the fork template and the persistent worker are child
  subreapers that kill whatever their case left behind, and the parent (spawn and
  persistent mode, and for helpers that die) adopts and kills the strays of a case
  process that died; only a descendant that makes itself a subreaper, or one stuck in
  uninterruptible sleep, can still escape;
* macOS: no subreaper exists, so only the process-group kill applies: a descendant that
  calls ``setsid()`` escapes it and can outlive the case and nebisect;
* everything the case wrote to temp (``TMPDIR``, ``tempfile``) is in its case
  directory, which the parent removes; a helper's own temp files (the conversion
  template's rehearsal) are in the isolator's workspace, removed with it.

An interrupted parent starts nothing more and waits for nothing: its isolators are
aborted — every helper killed rather than asked to stop, as one may be importing or
warming up and would not listen.

A SIGKILL of nebisect itself runs no cleanup: the parent-death signal still ends its
helpers and case processes, but not their descendants.

This package's ``__init__`` imports nothing: a spawned child pays only for what it uses.
"""
