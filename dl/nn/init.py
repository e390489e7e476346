"""Weight initialisation as PyTorch does it (in place, on materialised parameters)."""
from __future__ import annotations

import math

from .. import ops
from ..autograd import no_grad


def _fans(t) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError("fan in/out need a tensor of at least 2 dims")
    field = 1
    for s in t.shape[2:]:
        field *= s
    return t.shape[1] * field, t.shape[0] * field


@no_grad()
def uniform_(t, a: float = 0.0, b: float = 1.0, generator=None):
    r = ops.rand(*t.shape, generator=generator, dtype=t.dtype, device=t.device)
    return t.copy_(r * (b - a) + a)


@no_grad()
def normal_(t, mean: float = 0.0, std: float = 1.0, generator=None):
    r = ops.randn(*t.shape, generator=generator, dtype=t.dtype, device=t.device)
    return t.copy_(r * std + mean)


@no_grad()
def zeros_(t):
    return t.fill_(0.0)


@no_grad()
def ones_(t):
    return t.fill_(1.0)


@no_grad()
def constant_(t, val: float):
    """Fills t with val, in place."""
    return t.fill_(val)


@no_grad()
def eye_(t):
    """The identity in a 2-D t (ones on the diagonal, zeros elsewhere), in place."""
    if t.ndim != 2:
        raise ValueError(f"eye_ takes a 2-D tensor, got shape {t.shape}")
    return t.copy_(ops.eye(t.shape[0], t.shape[1], dtype=t.dtype, device=t.device))


_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for a nonlinearity, as PyTorch's: 1 for linear, conv and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu (slope
    `param`, 0.01 by default), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def _kaiming_std(t, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} is not supported, use 'fan_in' or 'fan_out'")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0


def kaiming_uniform_(t, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan) (He et al.), as PyTorch's: the default
    for Linear/Conv weights uses a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan) (He et al.), as PyTorch's."""
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)


def xavier_uniform_(t, gain: float = 1.0, generator=None):
    """U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t, gain: float = 1.0, generator=None):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


# Giles, "Approximating the erfinv function" (2010): single-precision polynomials in w =
# -log(1 - y^2), for w < 5 (in w - 2.5) and beyond (in sqrt(w) - 3), highest power first
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _poly(coeffs, w):
    p = coeffs[0]
    for c in coeffs[1:]:
        p = p * w + c
    return p


def _erfinv(y):
    """erf^-1 of a tensor y in (-1, 1): Giles' approximation (a few float32 ulps), and for
    float64 a Newton step on erf (in float32 erf's own rounding, divided by the small slope
    near +-1, would undo the approximation's accuracy)."""
    w = -ops.log1p(-y * y)
    central = _poly(_ERFINV_CENTRAL, w - 2.5)
    tail = _poly(_ERFINV_TAIL, ops.sqrt(ops.clamp(w, min=5.0)) - 3.0)
    x = ops.where(w < 5.0, central, tail) * y
    if y.dtype.itemsize < 8:
        return x
    return x - (ops.erf(x) - y) / (2.0 / math.sqrt(math.pi) * ops.exp(-x * x))


@no_grad()
def trunc_normal_(t, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None):
    """N(mean, std^2) truncated to [a, b], as PyTorch's: uniform values between the normal
    CDF at a and at b, mapped through the inverse CDF, then clamped to [a, b]."""
    if a > b:
        raise ValueError(f"trunc_normal_: the lower bound a={a} is above b={b}")

    def cdf(v):
        return (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0
    lo, hi = 2 * cdf((a - mean) / std) - 1, 2 * cdf((b - mean) / std) - 1
    u = ops.rand(*t.shape, generator=generator, dtype=t.dtype, device=t.device)
    x = _erfinv(u * (hi - lo) + lo) * (std * math.sqrt(2.0)) + mean
    return t.copy_(ops.clamp(x, min=a, max=b))


@no_grad()
def orthogonal_(t, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix (Saxe et al.), as PyTorch's: t seen as (rows, the rest)
    takes the Q of the QR factorisation of a normal matrix (the R with a positive diagonal),
    scaled by gain. Q is made by Gram-Schmidt with each column orthogonalised twice against
    the ones before (orthogonal to rounding), in dl's own kernels."""
    if t.ndim < 2:
        raise ValueError("orthogonal_ takes a tensor of at least 2 dims")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    flat = ops.randn(rows, cols, generator=generator, dtype=t.dtype, device=t.device)
    a = flat.t() if rows < cols else flat  # tall: Q's columns are orthonormal
    n = a.shape[1]
    q = ops.zeros(a.shape, dtype=t.dtype, device=t.device)._materialise()
    for j in range(n):
        v = a[:, j]
        if j:
            done = q[:, :j]
            for _ in range(2):
                v = v - done @ (done.t() @ v)
        q[:, j] = v / ops.linalg.vector_norm(v)
    if rows < cols:
        q = q.t()
    return t.copy_((q * gain).reshape(*t.shape))
