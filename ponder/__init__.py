"""ponder: PonderNet (Banino et al. 2021) — halting math, losses, models, training, evaluation."""
__version__ = "0.1.0"
