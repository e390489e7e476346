"""Epilogues applied to a result before it is stored: a bias and an activation, so a matmul
or convolution can fuse them instead of running another pass over memory."""
from math import erf

import numpy as np

import cube as cb
from cube import Comptime, cube

ACTIVATIONS = ("none", "relu", "gelu", "tanh")


@cube
def activate(v, ACT: Comptime[str]):
    if ACT == "relu":
        v = max(v, 0.0)
    elif ACT == "gelu":
        v = 0.5 * v * (1.0 + cb.erf(v * 0.7071067811865476))
    elif ACT == "tanh":
        v = cb.tanh(v)
    return v


def reference(x, act: str):
    """NumPy version for tests."""
    if act == "relu":
        return np.maximum(x, 0)
    if act == "gelu":
        return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    if act == "tanh":
        return np.tanh(x)
    return x
