"""`dl.autograd.Function`: a differentiable op from a forward and a backward (the extension
point for ops built elsewhere, e.g. the kernel library's reductions and matmul).

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    y = Square.apply(x)
"""
from __future__ import annotations

from ..tensor import Tensor
from .grad_mode import no_grad
from .tape import record


class Context:
    def __init__(self):
        self.saved_tensors: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors


class Function:
    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        ctx = Context()
        with no_grad():
            out = cls.forward(ctx, *args)
        tensors = tuple(a for a in args if isinstance(a, Tensor))

        def back(g):
            grads = cls.backward(ctx, g)
            grads = grads if isinstance(grads, tuple) else (grads,)
            it = iter(grads)
            per_arg = [next(it, None) for _ in args]
            return tuple(gr for a, gr in zip(args, per_arg) if isinstance(a, Tensor))

        return record(out, cls.__name__, tensors, back)
