"""Standalone repro scripts: the writer (:mod:`.script`) and its templates (:mod:`.templates`)."""
