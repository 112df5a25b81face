"""The trainer (kept at its old import path): see :mod:`elecsolver.training.trainer`."""

from .training.trainer import ResumeError, Trainer, build_model

__all__ = ["ResumeError", "Trainer", "build_model"]
