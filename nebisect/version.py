"""nebisect's version: below every module, so any layer may stamp it on what it writes."""

__version__ = "0.1.0"
