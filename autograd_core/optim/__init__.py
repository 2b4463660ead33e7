"""Optimisers and learning-rate schedulers with torch.optim's names and update formulas.

`SGD`, `Adam`, `AdamW`, `RMSprop` step in place on NumPy arrays (no graph); see
`optimizer.py` for the flat-buffer design. `lr_scheduler` holds the schedulers.
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
