"""nn.RNN as PyTorch's: the Elman recurrence h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh),
act tanh or relu; multi-layer, bidirectional, batch_first, bias, dropout between layers,
initial h_0. Built on recurrent.py's RNNBase (parameter names weight_ih_l0, weight_hh_l0,
bias_ih_l0, bias_hh_l0, ..._reverse; U(+-1/sqrt(hidden_size)) initialisation; the whole
input sequence projected in one matmul per layer and direction)."""
from __future__ import annotations

from .. import ops
from . import functional as F
from .recurrent import RNNBase

__all__ = ["RNN"]

_ACTS = {"tanh": F.tanh, "relu": F.relu}


class RNN(RNNBase):
    """A multi-layer Elman RNN as PyTorch's nn.RNN: nonlinearity "tanh" or "relu";
    forward(input, h_0) gives (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in _ACTS:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        """(output, h_n). input: (L, B, input_size), (B, L, input_size) with batch_first,
        or unbatched (L, input_size); hx: h_0 (num_layers * directions, B, hidden_size),
        zeros when None. output: (L, B, directions * hidden_size) (batch_first: (B, L,
        ...)), the last layer's h at every step."""
        act = _ACTS[self.nonlinearity]
        if input.ndim not in (2, 3):
            raise ValueError(f"RNN takes a 2-D or 3-D input, got {input.shape}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"input has {input.shape[-1]} features, expected "
                             f"{self.input_size}")
        unbatched = input.ndim == 2
        if unbatched:
            input = input.unsqueeze(1)  # noqa: A001
            hx = None if hx is None else hx.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)  # noqa: A001
        seq_len, batch = input.shape[:2]
        dirs = 2 if self.bidirectional else 1
        shape = (self.num_layers * dirs, batch, self.hidden_size)
        h0 = ops.zeros(*shape, device=input.device, dtype=input.dtype) if hx is None else hx
        if tuple(h0.shape) != shape:
            raise ValueError(f"h_0 has shape {h0.shape}, expected {shape}")
        seq, h_n = input, []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._params(layer, d)
                xp = F.linear(seq, w_ih, b_ih)  # (L, B, H) in one matmul
                h = h0[layer * dirs + d]
                steps = [None] * seq_len
                for t in (reversed(range(seq_len)) if d else range(seq_len)):
                    h = act(xp[t] + F.linear(h, w_hh, b_hh))
                    steps[t] = h
                outs.append(ops.stack(steps, 0))
                h_n.append(h)
            seq = outs[0] if dirs == 1 else ops.cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                seq = F.dropout(seq, self.dropout, True)
        out, hn = seq, ops.stack(h_n, 0)
        if unbatched:
            out, hn = out.squeeze(1), hn.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, hn

