"""Functional layers beyond the core: conv1d, conv_transpose2d, group/rms/instance norm,
interpolate, adaptive_avg_pool2d."""
from __future__ import annotations

__all__: list[str] = []
