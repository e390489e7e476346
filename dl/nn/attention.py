"""MultiheadAttention and TransformerEncoderLayer with PyTorch's parameters, initialisation,
masks and (seq, batch, embed) default layout (`batch_first=True` for (batch, seq, embed))."""
from __future__ import annotations

from .. import dtypes, ops
from . import functional as F
from . import init
from .activation import Dropout
from .layers import LayerNorm, Linear, _param
from .module import Module


class MultiheadAttention(Module):
    """Multi-head attention with PyTorch's parameters (`in_proj_weight`, `in_proj_bias`,
    `out_proj`), initialisation and masks; also `MultiHeadAttention`.

    Inputs are (seq, batch, embed), or (batch, seq, embed) with batch_first=True.
    Self-attention (query is key is value) projects q, k and v in one matmul. No
    kdim/vdim, add_bias_kv or add_zero_attn."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads "
                             f"{num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = _param(3 * embed_dim, embed_dim, device=device, dtype=dtype)
        self.in_proj_bias = _param(3 * embed_dim, device=device, dtype=dtype) if bias \
            else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.out_proj.bias)

    def _heads(self, t, b: int, s: int):
        """(B, S, E) -> (B, H, S, Dh)."""
        return t.reshape(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        """(output, attention weights or None) of query attending to key/value.

        Masks as PyTorch's: a bool `attn_mask` (L, S) or `key_padding_mask` (B, S) is True
        where attention is *not* allowed; a float mask is added to the scores. The weights
        are averaged over the heads unless `average_attn_weights=False`; with
        need_weights=False the second item is None. is_causal is PyTorch's hint that
        attn_mask is the causal mask (it needs the mask: RuntimeError without one)."""
        if is_causal and attn_mask is None:  # PyTorch's error: is_causal is a hint on a mask
            raise RuntimeError("MultiheadAttention: is_causal=True needs the causal attn_mask "
                               "as well (PyTorch raises too): a bool (L, L) mask, True above "
                               "the diagonal")
        self_attn = query is key and key is value
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        b, lq, e = query.shape
        lk = key.shape[1]
        w, bias = self.in_proj_weight, self.in_proj_bias
        if self_attn:  # one matmul for q, k and v
            qkv = F.linear(query, w, bias)
            q, k, v = (qkv[..., i * e:(i + 1) * e] for i in range(3))
        else:
            parts = [(w[i * e:(i + 1) * e], None if bias is None else bias[i * e:(i + 1) * e])
                     for i in range(3)]
            q, k, v = (F.linear(t, pw, pb) for t, (pw, pb) in zip((query, key, value), parts))
        q, k, v = self._heads(q, b, lq), self._heads(k, b, lk), self._heads(v, b, lk)
        mask = self._mask(attn_mask, key_padding_mask, b, lq, lk, query.device, query.dtype)
        res = F.scaled_dot_product_attention(
            # is_causal with a mask: PyTorch's hint that the mask is causal (the mask rules)
            q, k, v, mask, self.dropout if self.training else 0.0,
            is_causal=is_causal and mask is None,
            training=self.training, return_weights=need_weights, _heads_last=True)
        out, weights = res if need_weights else (res, None)
        out = self.out_proj(out.transpose(1, 2).reshape(b, lq, e))
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, (weights.mean(1) if average_attn_weights else weights)

    @staticmethod
    def _mask(attn_mask, key_padding_mask, b, lq, lk, device, dtype):
        """One additive float mask (B or 1, 1, Lq, Lk) from PyTorch's two masks."""
        masks = []
        if attn_mask is not None:
            m = attn_mask if attn_mask.ndim == 2 else attn_mask.reshape(b, -1, lq, lk)
            masks.append(m.reshape(1, 1, lq, lk) if m.ndim == 2 else m)
        if key_padding_mask is not None:
            masks.append(key_padding_mask.reshape(b, 1, 1, lk))
        if not masks:
            return None
        total = None
        for m in masks:
            add = ops.where(m, float("-inf"), 0.0).to(dtype) if m.dtype is dtypes.bool_ \
                else m
            total = add if total is None else total + add
        return total


class TransformerEncoderLayer(Module):
    """A transformer encoder layer as PyTorch's: self-attention and a feed-forward block
    (linear1, relu or gelu, linear2), each with dropout, residual and LayerNorm.

    norm_first=False: post-norm (PyTorch's default), True: pre-norm. activation: "relu" or
    "gelu", which runs fused in linear1's matmul epilogue, or a callable on tensors (applied
    after linear1)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(activation, str) and activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu', 'gelu' or a callable, got "
                             f"{activation!r}")
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, **kw)
        # a named activation runs in linear1's epilogue
        self.linear1 = Linear(d_model, dim_feedforward, bias,
                              act=activation if isinstance(activation, str) else "none", **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation

    def _sa(self, x, mask, pad, is_causal):
        y = self.self_attn(x, x, x, key_padding_mask=pad, need_weights=False, attn_mask=mask,
                           is_causal=is_causal)[0]
        return self.dropout1(y)

    def _ff(self, x):
        h = self.linear1(x)
        if not isinstance(self.activation, str):
            h = self.activation(h)
        return self.dropout2(self.linear2(self.dropout(h)))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        """The layer's output for src (seq, batch, d_model), or (batch, seq, d_model) with
        batch_first; masks as MultiheadAttention's."""
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff(x))
