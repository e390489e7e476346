"""Layer modules beyond the core (torch's names): Conv1d, ConvTranspose2d, norms, Upsample,
recurrent layers, the decoder layer."""
from __future__ import annotations

__all__: list[str] = []
