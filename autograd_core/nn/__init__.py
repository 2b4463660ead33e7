"""`autograd_core.nn`: modules, parameters, losses, init and functional ops with torch's names.

One file per family: linear, activation, loss, conv, pooling, normalization, dropout, rnn; the
fused NumPy kernels behind them are in `_functional_loss.py` and in `_functional_conv.py`,
`_functional_pooling.py`, `_functional_normalization.py`, `_functional_dropout.py` and
`_functional_rnn.py` (gathered under one name by `_functional_cnn.py`).
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


from .conv import Conv1d, Conv2d  # noqa: F401
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d,  # noqa: F401
                      MaxPool2d)
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from .sparse import Embedding  # noqa: F401,E402
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401,E402
from .attention import MultiheadAttention  # noqa: F401,E402
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,  # noqa: F401,E402
                          TransformerEncoderLayer)
