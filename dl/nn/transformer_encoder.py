"""`nn.TransformerEncoder`: a stack of copies of one encoder layer, as PyTorch's."""
from __future__ import annotations

import copy

from .containers import ModuleList
from .module import Module


class TransformerEncoder(Module):
    """num_layers copies of `encoder_layer` (a TransformerEncoderLayer; each copy has its own
    weights, initialised as the given layer's), applied in turn, then `norm` if given. The
    masks and is_causal reach every layer, as PyTorch's. enable_nested_tensor and mask_check
    are accepted for PyTorch's signature (dl has no nested tensors: padding stays masked)."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        """src through every layer (then norm); shapes and masks as the layer's."""
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)
