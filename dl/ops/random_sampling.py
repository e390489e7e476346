"""Random sampling functions, as torch's: `randint`, `randint_like`, `randperm`,
`multinomial`, `normal`, `bernoulli`, composed of the counter-based uniform draw
(`dl.rand`: reproducible under `dl.manual_seed`, not torch's numbers) and existing ops.

- integers: floor(u * (high - low)) + low, u with 48 random bits (two draws, in float64)
  where the device has float64, else 24;
- randperm: the argsort of n uniform draws (always a permutation);
- multinomial: the exponential race (category i's key E_i / w_i, E_i ~ Exp(1)): with
  replacement each sample is the argmin of fresh keys, without it the `num_samples`
  smallest keys, which draws in proportion to the weights left; a zero weight's key is
  +inf, so it is never drawn (while a positive one remains)."""
from __future__ import annotations

from .. import devices as _device
from .. import dtypes
from ..autograd import record
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from .creation import _shape, full, rand, randn, zeros_like
from .registry import register

__all__ = ["bernoulli", "multinomial", "normal", "randint", "randint_like", "randperm"]


def _uniform64(shape, generator, device) -> Tensor:
    """Uniform in [0, 1): 48 random bits in float64 where the device has it, else 24."""
    dev = _device.get(device)
    if not dev.rt.features.f64:
        return rand(*shape, generator=generator, device=dev)
    hi = rand(*shape, generator=generator, dtype=dtypes.float64, device=dev)
    lo = rand(*shape, generator=generator, dtype=dtypes.float64, device=dev)
    return hi + lo * (1.0 / (1 << 24))


def _ints(low: int, high: int, shape, generator, dtype, device) -> Tensor:
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    n = high - low
    u = _uniform64(shape, generator, device)
    return ((u * n).floor().clamp(max=n - 1) + low).to(dtypes.get(dtype or dtypes.int64))


@register("randint")
def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform in [low, high) of shape `size`, as torch.randint: `randint(high,
    size)` or `randint(low, high, size)` (or keywords); int64 unless `dtype`."""
    args = list(args)
    if size is None and args:
        size = args.pop()
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    elif args:
        raise TypeError("randint(): expected (high, size) or (low, high, size)")
    if high is None or size is None:
        raise TypeError("randint(): missing 'high' or 'size'")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    t = _ints(int(low or 0), int(high), _shape((size,)), generator, dtype, device)
    if requires_grad:
        t._materialise()
        t.requires_grad = True
    return t


def randint_like(x: Tensor, low=0, high=None, *, generator=None, dtype=None,
                 device=None) -> Tensor:
    """randint of x's shape with x's dtype and device unless given: `randint_like(x, high)`
    or `randint_like(x, low, high)`, as torch's."""
    if high is None:
        low, high = 0, low
    return _ints(int(low), int(high), x.shape, generator, dtype or x.dtype,
                 device if device is not None else x.device)


@register("randperm")
def randperm(n: int, *, generator=None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (int64 unless `dtype`), as torch.randperm."""
    n = int(n)
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dt = dtypes.get(dtype or dtypes.int64)
    if n == 0:
        return full((0,), 0, dt, _device.get(device))
    u = _uniform64((n,), generator, device)
    t = u.argsort().to(dt)
    if requires_grad:
        t._materialise()
        t.requires_grad = True
    return t


@register("multinomial", method=True)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None) -> Tensor:
    """Indices of categories drawn from the non-negative weights of each row of `input`
    (1-D or 2-D): (num_samples,) or (rows, num_samples), int64, as torch.multinomial.
    Without replacement a row's categories are drawn at most once each. Also
    `t.multinomial(n)`."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_float:
        raise RuntimeError(f'"multinomial" not implemented for \'{input.dtype.name}\'')
    k, c = int(num_samples), input.shape[-1]
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and k > c:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    with no_grad():
        w = input.detach().reshape(-1, c).to(dtypes.float64 if input.device.rt.features.f64
                                             else dtypes.float32)
        host = w.numpy()
        if not (host >= 0).all() or not abs(host).max(initial=0) < float("inf"):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or "
                               "element < 0")
        if (host.sum(axis=1) <= 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        rows = w.shape[0]
        shape = (rows, k, c) if replacement else (rows, c)
        e = -(1 - rand(*shape, generator=generator, dtype=w.dtype, device=w.device)).log()
        ww = w.unsqueeze(1) if replacement else w
        keys = (e / ww).where(ww > 0, float("inf"))
        out = keys.argmin(-1) if replacement else keys.topk(k, largest=False)[1]
        out = out.to(dtypes.int64)
    return out.reshape(-1) if input.ndim == 1 else out


def _zero_grads(out: Tensor, name: str, inputs: tuple) -> Tensor:
    """Records out with a zero gradient for each tensor input, as torch's (a draw is no
    differentiable function of its parameters there)."""
    ts = tuple(t for t in inputs if isinstance(t, Tensor))
    if any(t.requires_grad for t in ts):
        out._materialise()
        return record(out, name, ts, lambda g: tuple(zeros_like(t) for t in ts))
    return out


@register("normal")
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal numbers of mean `mean` and standard deviation `std`, as torch.normal: either
    may be a tensor (the result has their broadcast shape and their dtype), or both floats
    with `size`. Gradients to mean and std are zero, as torch's."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not (mt or st):
        if size is None:
            raise TypeError("normal(): floats mean and std need a size")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        t = randn(*_shape((size,)), generator=generator, dtype=dtype, device=device) * std \
            + mean
        if requires_grad:
            t._materialise()
            t.requires_grad = True
        return t
    ref = mean if mt else std
    with no_grad():
        m = mean.detach() if mt else mean
        s = std.detach() if st else std
        if st and s.numel() and bool((s < 0).any().item()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        if not st and s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        shape = (m * 0 + s * 0).shape if mt and st else ref.shape
        dt = ref.dtype if ref.dtype.is_float else dtypes.default_float
        out = randn(*shape, generator=generator, dtype=dt, device=ref.device) * s + m
    return _zero_grads(out, "normal", (mean, std))


@register("bernoulli", method=True)
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """1 where a uniform draw falls below the probability in `input` (or below `p`, for
    every element, where given), else 0; input's shape and dtype, as torch.bernoulli. Also
    `t.bernoulli()`."""
    with no_grad():
        prob = input.detach() if p is None else p
        if p is None and input.dtype.is_float and input.numel() and \
                bool(((prob < 0) | (prob > 1)).any().item()):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true")
        dt = input.dtype if input.dtype.is_float else dtypes.default_float
        u = rand(*input.shape, generator=generator, dtype=dt, device=input.device)
        out = (u < prob).to(input.dtype)
    return _zero_grads(out, "bernoulli", (input,))
