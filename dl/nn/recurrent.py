"""Recurrent layers as PyTorch's: GRU and LSTM (multi-layer, bidirectional, batch_first,
bias, dropout between layers, initial states) and GRUCell / LSTMCell, with PyTorch's gate
order (LSTM: i, f, g, o; GRU: r, z, n), parameter names (weight_ih_l0, weight_hh_l0,
bias_ih_l0, bias_hh_l0, ..._reverse) and U(+-1/sqrt(hidden_size)) initialisation.

Each layer and direction projects the whole input sequence in one matmul (x @ W_ih^T +
b_ih over T*B rows); each time step is one (B, H) @ W_hh^T matmul plus the gates, lazy
elementwise ops that fuse into one kernel. Gradients come from the tape (backpropagation
through time over those ops)."""
from __future__ import annotations

import math

from .. import ops
from . import functional as F
from . import init
from .layers import _param
from .module import Module

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNNBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}  # weight rows per unit


def _lstm_step(xp, h, c, w_hh, b_hh):
    """One LSTM step from the input projection xp (B, 4H): (h', c')."""
    g = xp + F.linear(h, w_hh, b_hh)
    hs = h.shape[-1]
    i, f, gg, o = (g[..., k * hs:(k + 1) * hs] for k in range(4))
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(gg)
    return F.sigmoid(o) * F.tanh(c), c


def _gru_step(xp, h, w_hh, b_hh):
    """One GRU step from the input projection xp (B, 3H): h'."""
    gh = F.linear(h, w_hh, b_hh)
    hs = h.shape[-1]
    xr, xz, xn = (xp[..., k * hs:(k + 1) * hs] for k in range(3))
    hr, hz, hn = (gh[..., k * hs:(k + 1) * hs] for k in range(3))
    r = F.sigmoid(xr + hr)
    z = F.sigmoid(xz + hz)
    n = F.tanh(xn + r * hn)
    return (1.0 - z) * n + z * h


class RNNBase(Module):
    """The common base of GRU, LSTM and RNN (mode "GRU", "LSTM", "RNN_TANH" or
    "RNN_RELU"): their parameters and initialisation; not for direct use."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError(f"mode must be 'GRU', 'LSTM', 'RNN_TANH' or 'RNN_RELU', got "
                             f"{mode!r}")
        if proj_size:
            raise NotImplementedError("LSTM proj_size is not supported")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {dropout}")
        if num_layers < 1 or hidden_size < 1:
            raise ValueError("num_layers and hidden_size must be positive")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        dirs = 2 if bidirectional else 1
        gh = _GATES[mode] * hidden_size
        kw = dict(device=device, dtype=dtype)
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                setattr(self, "weight_ih" + sfx, _param(gh, n_in, **kw))
                setattr(self, "weight_hh" + sfx, _param(gh, hidden_size, **kw))
                if bias:
                    setattr(self, "bias_ih" + sfx, _param(gh, **kw))
                    setattr(self, "bias_hh" + sfx, _param(gh, **kw))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        b = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -b, b)

    def flatten_parameters(self) -> None:
        """Nothing to do (PyTorch packs cuDNN's weights here); kept so that code calling it
        runs."""

    @property
    def all_weights(self) -> list:
        """The parameters per layer and direction: [[w_ih, w_hh, b_ih, b_hh], ...]."""
        dirs = 2 if self.bidirectional else 1
        return [[p for p in self._params(layer, d) if p is not None]
                for layer in range(self.num_layers) for d in range(dirs)]

    def _params(self, layer: int, d: int):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = self._parameters.get
        return (get("weight_ih" + sfx), get("weight_hh" + sfx), get("bias_ih" + sfx),
                get("bias_hh" + sfx))

    def forward(self, input, hx=None):  # noqa: A002
        """(output, h_n) for GRU, (output, (h_n, c_n)) for LSTM.

        input: (L, B, input_size), (B, L, input_size) with batch_first, or unbatched
        (L, input_size). hx: h_0 (num_layers * directions, B, hidden_size) (LSTM: the pair
        (h_0, c_0)); zeros when None. output: (L, B, directions * hidden_size) (batch_first:
        (B, L, ...)), the last layer's h at every step."""
        lstm = self.mode == "LSTM"
        unbatched = input.ndim == 2
        if input.ndim not in (2, 3):
            raise ValueError(f"{self.mode} takes a 2-D or 3-D input, got {input.shape}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"input has {input.shape[-1]} features, expected "
                             f"{self.input_size}")
        if unbatched:
            input = input.unsqueeze(1)  # noqa: A001
            if hx is not None:
                hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)  # noqa: A001
        seq_len, batch = input.shape[:2]
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            z = ops.zeros(*shape, device=input.device, dtype=input.dtype)
            h0, c0 = z, z
        elif lstm:
            h0, c0 = hx
        else:
            h0, c0 = hx, None
        for t, what in ((h0, "h_0"), (c0 if lstm else h0, "c_0")):
            if tuple(t.shape) != shape:
                raise ValueError(f"{what} has shape {t.shape}, expected {shape}")
        seq = input
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._params(layer, d)
                k = layer * dirs + d
                xp = F.linear(seq, w_ih, b_ih)  # (L, B, G*H) in one matmul
                h, c = h0[k], (c0[k] if lstm else None)
                steps = [None] * seq_len
                for t in (reversed(range(seq_len)) if d else range(seq_len)):
                    if lstm:
                        h, c = _lstm_step(xp[t], h, c, w_hh, b_hh)
                    else:
                        h = _gru_step(xp[t], h, w_hh, b_hh)
                    steps[t] = h
                outs.append(ops.stack(steps, 0))
                h_n.append(h)
                c_n.append(c)
            seq = outs[0] if dirs == 1 else ops.cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                seq = F.dropout(seq, self.dropout, True)
        out, hn = seq, ops.stack(h_n, 0)
        cn = ops.stack(c_n, 0) if lstm else None
        if unbatched:
            out, hn = out.squeeze(1), hn.squeeze(1)
            cn = cn.squeeze(1) if lstm else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return (out, (hn, cn)) if lstm else (out, hn)

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class LSTM(RNNBase):
    """A multi-layer LSTM as PyTorch's nn.LSTM (no proj_size): forward(input, (h_0, c_0))
    gives (output, (h_n, c_n))."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """A multi-layer GRU as PyTorch's nn.GRU: forward(input, h_0) gives (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class _Cell(Module):
    _gates = 4

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = dict(device=device, dtype=dtype)
        g = self._gates * hidden_size
        self.weight_ih = _param(g, input_size, **kw)
        self.weight_hh = _param(g, hidden_size, **kw)
        self.bias_ih = _param(g, **kw) if bias else None
        self.bias_hh = _param(g, **kw) if bias else None
        b = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -b, b)

    def _zeros(self, x):
        return ops.zeros(x.shape[0], self.hidden_size, device=x.device, dtype=x.dtype)

    def _check_state(self, x, *states) -> None:
        """A state must be (B, hidden_size) for a (B, input_size) input, as PyTorch checks
        (a batch-1 state broadcast silently)."""
        want = (x.shape[0], self.hidden_size)
        for s in states:
            if tuple(s.shape) != want:
                raise RuntimeError(f"{type(self).__name__}: the hidden state has shape "
                                   f"{tuple(s.shape)}, the input {tuple(x.shape)} needs "
                                   f"{want}")

    def extra_repr(self) -> str:
        """The module's settings, shown in its repr."""
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias}"


class LSTMCell(_Cell):
    """One LSTM step as PyTorch's nn.LSTMCell: forward(input, (h, c)) gives (h', c');
    input (B, input_size) or (input_size,)."""

    _gates = 4

    def forward(self, input, hx=None):  # noqa: A002
        """(h', c') after one step."""
        if input.ndim == 1:
            hx = None if hx is None else tuple(h.unsqueeze(0) for h in hx)
            h, c = self.forward(input.unsqueeze(0), hx)
            return h.squeeze(0), c.squeeze(0)
        h, c = hx if hx is not None else (self._zeros(input), self._zeros(input))
        self._check_state(input, h, c)
        return _lstm_step(F.linear(input, self.weight_ih, self.bias_ih), h, c,
                          self.weight_hh, self.bias_hh)


class GRUCell(_Cell):
    """One GRU step as PyTorch's nn.GRUCell: forward(input, h) gives h'; input
    (B, input_size) or (input_size,)."""

    _gates = 3

    def forward(self, input, hx=None):  # noqa: A002
        """h' after one step."""
        if input.ndim == 1:
            h = self.forward(input.unsqueeze(0), None if hx is None else hx.unsqueeze(0))
            return h.squeeze(0)
        h = hx if hx is not None else self._zeros(input)
        self._check_state(input, h)
        return _gru_step(F.linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh,
                         self.bias_hh)
