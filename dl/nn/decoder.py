"""TransformerDecoderLayer as PyTorch's: self-attention (tgt_mask, causal), cross-attention
over the memory, and a feed-forward block, each with dropout, residual and LayerNorm
(post-norm by default, pre-norm with norm_first)."""
from __future__ import annotations

from .activation import Dropout
from .attention import MultiheadAttention
from .layers import LayerNorm, Linear
from .module import Module

__all__ = ["TransformerDecoderLayer"]


class TransformerDecoderLayer(Module):
    """A transformer decoder layer with PyTorch's submodules and names (self_attn,
    multihead_attn, linear1, dropout, linear2, norm1-3, dropout1-3), so a torch layer's
    state_dict loads as is.

    activation: "relu" or "gelu" (fused into linear1's matmul epilogue) or a callable on
    tensors. Inputs are (seq, batch, d_model), or (batch, seq, d_model) with batch_first;
    masks as MultiheadAttention's; tgt_is_causal / memory_is_causal are hints that need
    their mask too (RuntimeError without one, as PyTorch's)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        fused = activation if isinstance(activation, str) else "none"
        if isinstance(activation, str) and activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got "
                             f"{activation!r}")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first,
                                                 **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, act=fused, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation

    def _sa(self, x, mask, pad, is_causal):
        y = self.self_attn(x, x, x, key_padding_mask=pad, need_weights=False, attn_mask=mask,
                           is_causal=is_causal)[0]
        return self.dropout1(y)

    def _mha(self, x, mem, mask, pad, is_causal):
        y = self.multihead_attn(x, mem, mem, key_padding_mask=pad, need_weights=False,
                                attn_mask=mask, is_causal=is_causal)[0]
        return self.dropout2(y)

    def _ff(self, x):
        h = self.linear1(x)
        if not isinstance(self.activation, str):
            h = self.activation(h)
        return self.dropout3(self.linear2(self.dropout(h)))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False):
        """The layer's output for tgt attending to itself and to memory."""
        x = tgt
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                              memory_is_causal)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha(x, memory, memory_mask, memory_key_padding_mask,
                                     memory_is_causal))
        return self.norm3(x + self._ff(x))
