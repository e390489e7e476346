"""Tensor-level ops, each registered by name in `registry.OPS`; the registration declares
the Tensor methods and operators that call it (dl/ops/registry.py)."""
from .at_least_dims import atleast_1d, atleast_2d, atleast_3d
from .conv import avg_pool2d, conv2d, max_pool2d
from .creation import (
    arange,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from .diagonals import *  # noqa: F403  (diagonal, diag, diag_embed, trace)
from .elementwise import *  # noqa: F403  (every declared elementwise op: its __all__)
from .elementwise_math import *  # noqa: F403  (tan, asin, log2, erfc, fmax, ...)
from .elementwise_special import *  # noqa: F403  (logaddexp, xlogy, sinc, ...)
from .finite_differences import diff
from .flips_rotations import fliplr, flipud, rot90
from .grids import cartesian_prod, meshgrid
from .index import cat, gather, index_select, repeat, stack
from .indexing import *  # noqa: F403  (issue 17's modules each export their __all__)
from .interleaved_repeats import repeat_interleave
from .linalg import bmm, linear, matmul, mm
from .mathops import *  # noqa: F403
from .moving_dims import moveaxis, movedim
from .nan_reductions import nanmean, nansum
from .nonzero_count import count_nonzero
from .paired_reductions import aminmax, std_mean, var_mean
from .random import Generator, manual_seed
from .reduce import (
    amax,
    amin,
    argmax,
    argmin,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    sum_to,
    var,
)
from .registry import OPS, add_method, register
from .rows import layer_norm, log_softmax, softmax
from .scaled_products import addcdiv, addcdiv_, addcmul, addcmul_
from .shape import (
    assign,
    broadcast_tensors,
    broadcast_to,
    clone,
    contiguous,
    copy_,
    detach,
    expand,
    expand_as,
    fill_,
    flatten,
    permute,
    reshape,
    squeeze,
    t,
    to,
    transpose,
    unsqueeze,
    zero_,
)
from .sorting import *  # noqa: F403
from .tensor_products import cross, kron, tensordot
from .unflattening import unflatten

# isort: split
# last: the in-place forms (`t.add_`, `t += x`) of the ops registered above
from . import inplace  # noqa: F401

# torch's function names that dl registers as aliases of another op (`dl.clip` is clamp)
true_divide, clip, arctan2, swapaxes, concat, concatenate, ger = (OPS[n] for n in (
    "true_divide", "clip", "arctan2", "swapaxes", "concat", "concatenate", "ger"))

# isort: split
# Tensor methods only (`t.normal_()`, `t.new_zeros(...)`): declared by their registration
from . import random_fills, tensor_factories  # noqa: E402, F401
from .random_sampling import *  # noqa: E402, F403  (randint, randperm, multinomial, ...)
from .tensor_shortcuts import *  # noqa: E402, F403  (equal, numel, is_tensor, ...)
