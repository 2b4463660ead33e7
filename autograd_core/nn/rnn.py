"""Recurrent layers: `GRUCell`, `LSTMCell`, `RNNCell`, and the sequence layers `GRU`, `LSTM`, `RNN`.

Parameter names, shapes, gate order (GRU: r, z, n; LSTM: i, f, g, o) and initialisation
(every parameter ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), in registration order) are
torch's, so state dicts load unchanged in either direction.

`GRU` runs each layer and direction as ONE fused autograd node over the whole sequence (the input
projection of all steps is a single GEMM); `LSTM` and `RNN` chain one fused cell node per step.
"""
import math

import numpy as np

from ..ops.shape import cat, squeeze, stack, transpose, unsqueeze
from ..tensor import _wrap
from . import _functional_rnn as _FC
from ._functional_dropout import dropout as _dropout
from . import init
from .linear import _factory_dtype
from .module import Module
from .parameter import Parameter

__all__ = ["RNNCellBase", "RNNCell", "GRUCell", "LSTMCell", "RNNBase", "RNN", "GRU", "LSTM"]


def _check_size(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"{name} should be a positive integer, got {v!r}")
    return int(v)


class RNNCellBase(Module):
    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        npd = _factory_dtype(dtype, device)
        self.input_size = _check_size(input_size, "input_size")
        self.hidden_size = _check_size(hidden_size, "hidden_size")
        self.bias = bias
        G = self._gates * self.hidden_size
        self.weight_ih = Parameter(_wrap(np.empty((G, self.input_size), npd)))
        self.weight_hh = Parameter(_wrap(np.empty((G, self.hidden_size), npd)))
        if bias:
            self.bias_ih = Parameter(_wrap(np.empty((G,), npd)))
            self.bias_hh = Parameter(_wrap(np.empty((G,), npd)))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _check_input(self, input):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.dim()}D instead")

    def _zeros(self, input):
        x = input._data
        shape = (self.hidden_size,) if x.ndim == 1 else (x.shape[0], self.hidden_size)
        return _wrap(np.zeros(shape, x.dtype))


class GRUCell(RNNCellBase):
    """One GRU step: h' = (1 - z) * n + z * h (torch's equations and gate order r, z, n).

    weight_ih (3H, I), weight_hh (3H, H), bias_ih (3H,), bias_hh (3H,). Input (B, I) or (I,);
    hx (B, H) / (H,) or None (zeros). One fused autograd node per call.
    """

    _gates = 3

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input(input)
        if hx is None:
            hx = self._zeros(input)
        return _FC.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o); returns (h', c'). hx = (h, c) or None (zeros)."""

    _gates = 4

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input(input)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        return _FC.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class RNNCell(RNNCellBase):
    """h' = tanh (or relu)(W_ih x + b_ih + W_hh h + b_hh)."""

    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}. Select from 'tanh' or 'relu'.")
        self.__dict__["nonlinearity"] = nonlinearity  # before Module.__init__: plain attribute
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input(input)
        if hx is None:
            hx = self._zeros(input)
        cell = _FC.rnn_tanh_cell if self.nonlinearity == "tanh" else _FC.rnn_relu_cell
        return cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


# ---------------------------------------------------------------------------------------------
class RNNBase(Module):
    _gates = 1
    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__()
        npd = _factory_dtype(dtype, device)
        self.input_size = _check_size(input_size, "input_size")
        self.hidden_size = _check_size(hidden_size, "hidden_size")
        self.num_layers = _check_size(num_layers, "num_layers")
        self.bias = bias
        self.batch_first = batch_first
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            import warnings
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        D = 2 if bidirectional else 1
        G = self._gates * self.hidden_size
        self._flat_weights_names = []
        for layer in range(self.num_layers):
            for d in range(D):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                in_size = self.input_size if layer == 0 else self.hidden_size * D
                names = [("weight_ih" + sfx, (G, in_size)), ("weight_hh" + sfx, (G, self.hidden_size))]
                if bias:
                    names += [("bias_ih" + sfx, (G,)), ("bias_hh" + sfx, (G,))]
                for name, shape in names:
                    setattr(self, name, Parameter(_wrap(np.empty(shape, npd))))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self):
        """No-op (cuDNN weight packing does not exist here); kept for torch code that calls it."""

    @property
    def all_weights(self):
        D = 2 if self.bidirectional else 1
        per = 4 if self.bias else 2
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i * per:(i + 1) * per] for i in range(self.num_layers * D)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _layer_params(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
        return (getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx),
                getattr(self, "bias_ih" + sfx) if self.bias else None,
                getattr(self, "bias_hh" + sfx) if self.bias else None)

    def _prepare(self, input, hx, n_states):
        """Time-major input, batched flag, and the initial states as a list of (L*D) lists."""
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D input instead")
        batched = input.dim() == 3
        x = input
        if not batched:
            x = unsqueeze(x, 1)
        elif self.batch_first:
            x = transpose(x, 0, 1)
        T, B, I = x._data.shape
        if I != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {I}")
        D = 2 if self.bidirectional else 1
        LD = self.num_layers * D
        states = []
        hxs = (hx,) if n_states == 1 else (tuple(hx) if hx is not None else None)
        for k in range(n_states):
            h = None if hx is None else hxs[k]
            if h is None:
                z = _wrap(np.zeros((B, self.hidden_size), x._data.dtype))
                states.append([z] * LD)
                continue
            if not batched:
                if h.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {h.dim()}-D tensor")
                h = unsqueeze(h, 1)
            elif h.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {h.dim()}-D tensor")
            if tuple(h._data.shape) != (LD, B, self.hidden_size):
                raise RuntimeError(f"Expected hidden size ({LD}, {B}, {self.hidden_size}), got {list(h._data.shape)}")
            states.append([h[i] for i in range(LD)])
        return x, batched, states

    def _finish(self, out, batched, finals):
        hn = [stack(f, 0) for f in finals]
        if not batched:
            out = squeeze(out, 1)
            hn = [squeeze(h, 1) for h in hn]
        elif self.batch_first:
            out = transpose(out, 0, 1)
        return out, hn

    def _run(self, x, states, layer_fn):
        D = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                idx = layer * D + d
                y, last = layer_fn(x, [s[idx] for s in states], self._layer_params(layer, d), d == 1)
                outs.append(y)
                for f, h in zip(finals, last):
                    f.append(h)
            x = outs[0] if D == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout, True)
        return x, finals


def _gru_layer_fn(x, states, params, reverse):
    y, h = _FC._gru_layer(x, states[0], *params, reverse)
    return y, [h]


class GRU(RNNBase):
    """Multi-layer GRU over a sequence: GRU(input_size, hidden_size, num_layers=1, bias=True,
    batch_first=False, dropout=0.0, bidirectional=False); forward(input, h0=None) returns
    (output, h_n) with output (T, B, D*H) ((B, T, D*H) when batch_first) and h_n (L*D, B, H).

    Each layer/direction is one fused autograd node over the whole sequence.
    """

    _gates = 3

    def forward(self, input, hx=None):  # noqa: A002
        x, batched, states = self._prepare(input, hx, 1)
        out, finals = self._run(x, states, _gru_layer_fn)
        out, (hn,) = self._finish(out, batched, finals)
        return out, hn


def _cell_seq(cell_fn, x, states, params, reverse, n_states):
    T = x._data.shape[0]
    order = range(T - 1, -1, -1) if reverse else range(T)
    ys = [None] * T
    st = states[0] if n_states == 1 else tuple(states)
    for t in order:
        st = cell_fn(x[t], st, *params)
        ys[t] = st if n_states == 1 else st[0]
    return stack(ys, 0), ([st] if n_states == 1 else list(st))


class LSTM(RNNBase):
    """Multi-layer LSTM: forward(input, (h0, c0)=None) returns (output, (h_n, c_n)).

    One fused lstm_cell node per step (no fused sequence kernel yet); proj_size is not supported.
    """

    _gates = 4

    def __init__(self, *args, proj_size=0, **kwargs):
        if proj_size:
            raise NotImplementedError("LSTM(proj_size > 0) is not supported by autograd_core")
        super().__init__(*args, **kwargs)

    def forward(self, input, hx=None):  # noqa: A002
        x, batched, states = self._prepare(input, hx, 2)
        out, finals = self._run(x, states,
                                lambda x, s, p, r: _cell_seq(_FC.lstm_cell, x, s, p, r, 2))
        out, (hn, cn) = self._finish(out, batched, finals)
        return out, (hn, cn)


class RNN(RNNBase):
    """Multi-layer Elman RNN (nonlinearity 'tanh' or 'relu'): forward(input, h0=None) -> (output, h_n)."""

    _gates = 1

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if len(args) > 2 and isinstance(args[2], str):  # RNN(input, hidden, 'relu') is not torch's order
            raise TypeError("RNN: pass nonlinearity as a keyword")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.__dict__["nonlinearity"] = nonlinearity
        super().__init__(*args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        x, batched, states = self._prepare(input, hx, 1)
        cell = _FC.rnn_tanh_cell if self.nonlinearity == "tanh" else _FC.rnn_relu_cell
        out, finals = self._run(x, states, lambda x, s, p, r: _cell_seq(cell, x, s, p, r, 1))
        out, (hn,) = self._finish(out, batched, finals)
        return out, hn
