"""dl: tensors, elementwise fusion, autodiff, modules and optimisers built from cube kernels.

    import dl
    x = dl.randn(4, 3, requires_grad=True)
    y = (x * 2).sigmoid()          # recorded lazily; computed in one fused kernel when needed
    y.backward(dl.ones_like(y))
    x.grad.numpy()

`dl.fusion(False)` turns fusion off; `with dl.count_kernels() as c:` counts launches.
"""
from . import autograd, distributed, dtypes, fusion, nn, ops, optim, utils
from .autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .capture import CaptureError, capture
from .devices import Device, get_default_device, set_default_device
from .devices import get as device
from .dtypes import bfloat16, bool_, float16, float32, float64, int32, int64
from .fusion import count_kernels
from .io.dlpack import from_dlpack
from .io.safetensors import load_file, save_file
from .ops import *  # noqa: F403
from .tensor import Tensor

half, double, long, int, float, bool = float16, float64, int64, int32, float32, bool_  # noqa: A001
