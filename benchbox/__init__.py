"""benchbox: benchmark ML inference tasks under explicit timing contracts."""

__version__ = "0.1.0"
