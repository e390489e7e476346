"""The kernel library: one module per op family, each op a `@cube` kernel (or several, as
autotune candidates) and a small launcher that validates arguments, picks cube_count and
cube_dim and lets `autotune` choose among the candidates.

    from dl.kernels.matmul import matmul      # matmul(rt, a, b, bias=..., act=...)
    from dl.kernels.reduce import reduce      # reduce(rt, x, axis, op)
    from dl.kernels.softmax import softmax, log_softmax
    from dl.kernels.norm import layer_norm
    from dl.kernels.pool import max_pool2d, avg_pool2d
    from dl.kernels.conv import conv2d
    from dl.kernels.view import strided, transpose, permute

Launchers take runtime buffers (or strided views) and return the output buffer. Each module
keeps its `Tunable` (e.g. `matmul.MATMUL`) so tests can run every candidate.

The tensor layer's own kernels (copies, fills, random numbers, indexing) are the
`tensor_*.py` modules."""
