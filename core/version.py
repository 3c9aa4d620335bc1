"""The package version, in the one place setup.py and ``dlbench.__version__`` read it."""

__version__ = "0.1.0"
