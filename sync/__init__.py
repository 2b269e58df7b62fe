"""upstream-sync: automate the upstream sync cycle of a hand port."""

__version__ = "0.1.0"
