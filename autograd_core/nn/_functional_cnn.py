"""torch.nn.functional's convolution, pooling, normalisation, dropout and recurrent-cell kernels.

Every kernel is ONE fused autograd node with a hand-derived NumPy backward: Python overhead per
node, not FLOPs, decides small-network speed, so a conv is one node, not an unfold + matmul +
reshape chain, and a GRU layer over a whole sequence is one node. The kernels live in files that
mirror `nn/` (`_functional_conv`, `_functional_pooling`, `_functional_normalization`,
`_functional_dropout`, `_functional_rnn`; shared helpers in `_functional_common`); this module
gathers them under one name (`nn.functional` re-exports it; `export.trace` names its ops by it).
"""
from ._functional_common import (  # noqa: F401
    _gs, _new, _next_seq, _TORCH_DTYPE_NAME, _tune_malloc, _MALLOC_TUNED, _pair, _single, _check_float,
    _same_dtype, _data, _edge, _needs_grad, _node, _vcs, _sigmoid
)
from ._functional_conv import (  # noqa: F401
    ConvolutionBackward0, _conv_padding, _conv2d_core, _ARGS_CACHE, _conv_args, _conv_nd, conv2d,
    conv1d, _pad_index, _ModePadBackward, _mode_pad
)
from ._functional_pooling import (  # noqa: F401
    _pool_out, _pool_args, _padded, MaxPool2DWithIndicesBackward0, max_pool2d, AvgPool2DBackward0,
    avg_pool2d, _adaptive_matrix, AdaptiveAvgPool2DBackward0, adaptive_avg_pool2d, _unsqueeze_h,
    _squeeze_h, max_pool1d, avg_pool1d, adaptive_avg_pool1d
)
from ._functional_normalization import (  # noqa: F401
    NativeBatchNormBackward0, batch_norm, NativeLayerNormBackward0, layer_norm
)
from ._functional_dropout import (  # noqa: F401
    _DropoutBackward, _dropout_mask, _apply_mask, _check_p, dropout, _feature_dropout, dropout1d,
    dropout2d
)
from ._functional_rnn import (  # noqa: F401
    _cell_args, _gru_forward, _gru_gate_grads, GRUCellBackward0, gru_cell, GRUBackward0, _gru_layer,
    LstmCellBackward0, lstm_cell, _RNNCellBackward, _rnn_cell, rnn_tanh_cell, rnn_relu_cell
)

__all__ = [
    "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "batch_norm", "layer_norm", "dropout", "dropout1d", "dropout2d", "gru_cell",
    "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell"
]
