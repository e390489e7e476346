"""The op registry: every tensor-level op by name. Tensor methods and operators dispatch
through it, so a later package (the kernel library: sum, matmul, softmax...) plugs in with
`@register("sum")` and gets `Tensor.sum` for free via `dl.ops.registry.add_method`."""
from __future__ import annotations

OPS: dict = {}


def register(*names):
    def wrap(fn):
        for n in names or (fn.__name__,):
            OPS[n] = fn
        return fn
    return wrap


def add_method(name: str) -> None:
    """Expose a registered op as a Tensor method of the same name."""
    from ..tensor import Tensor, _forward
    setattr(Tensor, name, _forward(name))
