"""dl.utils: data loading (torch.utils.data names)."""
from . import data

__all__ = ["data"]
