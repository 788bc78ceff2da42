"""deltakeeper keeps Delta Lake tables healthy."""

__version__ = "0.1.0"
