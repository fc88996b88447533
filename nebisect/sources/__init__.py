"""What the user hands in — torch sources, plugins — described in isolated children.

User code never runs in nebisect's own process (DESIGN §3): a torch source's module body
and factory, and every ``--plugin``, are imported in a child started by the isolation
engine at stage ``load``, with the run's load timeout. The parent gets back records
(:class:`~nebisect.sources.torch.TorchDescription`,
:class:`~nebisect.targets.plugins.PluginTarget`) and nothing else; a child that raises,
exits, crashes or hangs becomes one line naming the source and what happened.

* ``loading`` — run a describe job, turn its verdict into a record or a one-line error;
* ``torch`` — describe a ``file.py:factory`` torch source;
* ``plugins`` — describe the targets a plugin registers, and stand in for them here.
"""
