"""Functional activations beyond the core: softplus, mish, hardswish, leaky_relu, elu, selu, glu,
logsigmoid."""
from __future__ import annotations

__all__: list[str] = []
