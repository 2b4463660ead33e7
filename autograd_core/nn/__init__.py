"""`autograd_core.nn`: modules, parameters, losses, init and functional ops with torch's names.

The convolution / pooling / normalisation / dropout / recurrent layers live in their own files
(another engineer's); while one of those files does not exist yet, its names are simply absent.
"""
from . import functional, init, utils  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401
from .module import Module  # noqa: F401
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from .flatten import Flatten, Identity, Unflatten  # noqa: F401
from .linear import Linear  # noqa: F401
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, ReLU, ReLU6, SiLU,  # noqa: F401
                         Sigmoid, Softmax, Softplus, Softsign, Tanh)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,  # noqa: F401
                   SmoothL1Loss)


def _absent(e, name):
    """True when `e` says exactly the optional module `name` is missing (anything else re-raises)."""
    return e.name == __name__ + "." + name


try:
    from .conv import Conv2d  # noqa: F401
except ModuleNotFoundError as e:
    if not _absent(e, "conv"):
        raise
try:
    from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
except ModuleNotFoundError as e:
    if not _absent(e, "pooling"):
        raise
try:
    from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm  # noqa: F401
except ModuleNotFoundError as e:
    if not _absent(e, "normalization"):
        raise
try:
    from .dropout import Dropout  # noqa: F401
except ModuleNotFoundError as e:
    if not _absent(e, "dropout"):
        raise
try:
    from .rnn import GRU, GRUCell, LSTMCell  # noqa: F401
except ModuleNotFoundError as e:
    if not _absent(e, "rnn"):
        raise
