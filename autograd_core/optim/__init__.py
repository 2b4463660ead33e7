"""Optimisers and learning-rate schedulers with torch.optim's names and update formulas.

`SGD`, `Adam`, `AdamW`, `RMSprop`, `Adadelta` step in place on NumPy arrays (no graph); see
`optimizer.py` for the flat-buffer design; `LBFGS` (closure-driven, strong-Wolfe line search) has its
own step. `lr_scheduler` holds the schedulers.
"""
from . import lr_scheduler
from .adadelta import Adadelta
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "LBFGS", "lr_scheduler"]
