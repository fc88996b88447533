"""nebisect: find, isolate, minimize and guard against crashes and numeric cliffs in Core ML."""

__version__ = "0.1.0"
