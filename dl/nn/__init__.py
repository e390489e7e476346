"""Modules. Layers needing matmul/conv/reductions (Linear, Conv2d, LayerNorm...) come with
the kernel library (issue 5) and subclass `Module` the same way."""
from . import functional
from .activation import GELU, Dropout, Identity, MSELoss, ReLU, Sigmoid, SiLU, Tanh
from .containers import ModuleList, Sequential
from .module import Module
from .parameter import Parameter
