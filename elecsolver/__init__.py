"""elecsolver: physics-informed neural networks for electromagnetics."""
__version__ = "0.1.0"
