"""The package's version: the one source (pyproject.toml reads it; checkpoints, caches and output files record it)."""

__version__ = "0.2.0"
