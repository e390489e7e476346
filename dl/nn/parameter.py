"""`Parameter`: a leaf tensor that requires grad and that modules register."""
from __future__ import annotations

from ..tensor import Tensor


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter: a leaf that requires grad
    (unless `requires_grad=False`), sharing `data`'s storage (a lazy `data` is computed)."""
    def __init__(self, data: Tensor, requires_grad: bool = True):
        data = data.detach()._materialise()
        super().__init__(data._buf, data.shape, data._strides, data.offset, data.dtype,
                         data.device)
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
