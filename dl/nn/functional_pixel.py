"""pixel_shuffle / pixel_unshuffle with torch.nn.functional's signatures: a reshape, a
permute and a reshape (one copy), so any dtype, any batch dims, and autograd through the
views."""
from __future__ import annotations

from ..tensor import Tensor

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _factor(r, what: str, name: str) -> int:
    r = int(r)
    if r <= 0:
        raise RuntimeError(f"{what} expects a positive {name}, but got {r}")
    return r


def _rank(x: Tensor, what: str) -> None:
    if x.ndim < 3:
        raise RuntimeError(f"{what} expects input to have at least 3 dimensions, but got input "
                           f"with {x.ndim} dimension(s)")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C * r^2, H, W) to (*, C, H * r, W * r), r the upscale_factor, as
    torch.nn.functional.pixel_shuffle (channel c * r^2 + i * r + j goes to pixel (i, j) of
    each r x r block). Errors as PyTorch's (RuntimeError). Differentiable."""
    _rank(input, "pixel_shuffle")
    r = _factor(upscale_factor, "pixel_shuffle", "upscale_factor")
    *b, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(b)
    x = input.reshape(*b, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*b, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H * r, W * r) to (*, C * r^2, H, W), the inverse of pixel_shuffle, as
    torch.nn.functional.pixel_unshuffle. Errors as PyTorch's (RuntimeError).
    Differentiable."""
    _rank(input, "pixel_unshuffle")
    r = _factor(downscale_factor, "pixel_unshuffle", "downscale_factor")
    *b, c, h, w = input.shape
    for name, size, d in (("height", h, -2), ("width", w, -1)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by "
                               f"downscale_factor, but input.size({d})={size} is not divisible "
                               f"by {r}")
    n = len(b)
    x = input.reshape(*b, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*b, c * r * r, h // r, w // r)
