"""Vector add: the smallest kernel. `python examples/vector_add.py [runtime]`"""
import sys

import numpy as np

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, cube, f32


@cube(launch=True)
def vector_add(a: Array[Line[f32]], b: Array[Line[f32]], out: Array[Line[f32]]):
    i = ABSOLUTE_POS
    if i < out.len():
        out[i] = a[i] + b[i]


def run(rt, n: int = 100_003, line: int = 1) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    da, db = rt.from_numpy(a), rt.from_numpy(b)
    out = rt.empty_like(da)
    lines = n // line
    vector_add.launch(rt, cube_count=((lines + 255) // 256,), cube_dim=(256,),
                      a=da.lines(line), b=db.lines(line), out=out.lines(line))
    err = float(np.max(np.abs(out.numpy() - (a + b))))
    assert err == 0.0, err
    return err


if __name__ == "__main__":
    rt = cb.runtime(sys.argv[1] if len(sys.argv) > 1 else None)
    run(rt, 1 << 20, 4)
    print(f"vector_add on {rt.name}: matches NumPy")
