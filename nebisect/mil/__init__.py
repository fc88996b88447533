"""ML program I/O and the MIL simulator (a numpy interpreter with precision models)."""
