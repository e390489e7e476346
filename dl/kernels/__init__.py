"""The tensor layer's own `@cube` kernels (the kernel library adds its kernels here too)."""
