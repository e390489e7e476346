"""The lazy elementwise graph.

A `Node` is one elementwise op whose result has the node's shape; every node of one graph has
the same shape (an op that broadcasts a lazy input to a bigger shape materialises it first),
so broadcasting happens only at leaves, where a stride of 0 expresses it. Inputs are other
nodes, materialised tensors (leaves, any broadcastable view) or `Const`s (Python scalars,
passed to the kernel as scalar arguments so their values are not part of the kernel)."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType
from . import settings


@dataclass(frozen=True, slots=True)
class Const:
    value: object
    dtype: DType  # the compute type the value enters the kernel as


class Node:
    __slots__ = ("op", "inputs", "in_types", "dtype", "shape", "attrs", "size", "result",
                 "__weakref__")

    def __init__(self, op: str, inputs: tuple, in_types: tuple, dtype: DType, shape: tuple,
                 attrs: tuple = ()):
        self.op = op
        self.inputs = inputs
        self.in_types = in_types  # the compute type each input is converted to
        self.dtype = dtype  # the result's storage type
        self.shape = shape
        self.attrs = attrs  # static op parameters: part of the kernel's structure
        # an upper bound on the nodes of the graph (shared subgraphs counted twice)
        size = 1
        for x in inputs:
            if x.__class__ is Node:
                size += x.size
        self.size = min(settings.MAX_NODES + 1, size)
        self.result = None  # the materialised tensor, once computed: later graphs read it

    def __repr__(self) -> str:
        return f"<Node {self.op} {self.dtype.name} {self.shape}>"
