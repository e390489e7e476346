"""parameters_to_vector and vector_to_parameters (torch.nn.utils names)."""
from __future__ import annotations

from ... import ops
from ...autograd import no_grad
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and joined into one 1-D tensor (a copy; differentiable, as
    PyTorch's)."""
    params = list(parameters)
    if not params:
        raise ValueError("parameters_to_vector needs at least one parameter")
    device = params[0].device
    for p in params:
        if p.device != device:
            raise TypeError("parameters_to_vector: found parameters on different devices")
    return ops.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of the 1-D `vec` into the parameters, in order. Unlike
    PyTorch, which rebinds each parameter's `.data` to a view of vec, the values are copied
    into the parameters' own storage (one kernel each)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected a dl.Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters needs a 1-D vector, got shape {vec.shape}")
    params = list(parameters)
    n = sum(p.numel() for p in params)
    if n != vec.shape[0]:
        raise ValueError(f"vector_to_parameters: the vector has {vec.shape[0]} elements, the "
                         f"parameters {n}")
    pos = 0
    with no_grad():
        for p in params:
            k = p.numel()
            ops.assign(p, vec[pos:pos + k].reshape(p.shape))
            pos += k
