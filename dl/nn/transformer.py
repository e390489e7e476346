"""`nn.TransformerDecoder` (a stack of copies of one decoder layer) and `nn.Transformer` (an
encoder and a decoder stack, each with a final LayerNorm), as PyTorch's."""
from __future__ import annotations

import copy

from .. import ops
from ..autograd import no_grad
from . import init
from .attention import TransformerEncoderLayer
from .containers import ModuleList
from .decoder import TransformerDecoderLayer
from .layers import LayerNorm
from .module import Module
from .transformer_encoder import TransformerEncoder


class TransformerDecoder(Module):
    """num_layers copies of `decoder_layer` (each with its own weights, initialised as the
    given layer's), applied in turn to tgt with the encoder's `memory`, then `norm` if
    given; the masks and causal flags reach every layer, as PyTorch's."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False):
        """tgt through every layer (then norm); shapes and masks as the layer's."""
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder transformer of "Attention Is All You Need", as PyTorch's
    nn.Transformer: num_encoder_layers TransformerEncoderLayers and num_decoder_layers
    TransformerDecoderLayers, each stack ending in a LayerNorm; every weight matrix
    initialised with xavier_uniform_ (the layers' own initialisation otherwise). A given
    custom_encoder / custom_decoder replaces its stack."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
            LayerNorm(d_model, layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        with no_grad():
            for p in self.parameters():
                if p.ndim > 1:
                    init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        """The decoder's output for tgt attending to the encoded src."""
        b = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[b] != tgt.shape[b]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """The causal mask of size sz: -inf above the diagonal, 0 elsewhere (float32 unless
        dtype is given), as PyTorch's."""
        kw = {} if dtype is None else {"dtype": dtype}
        return ops.triu(ops.full((sz, sz), float("-inf"), device=device, **kw), diagonal=1)
