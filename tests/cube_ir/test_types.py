"""The promotion rules of docs/language.md, enforced by cube_ir.types and the frontend."""
import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, cube
from cube_ir.types import (
    PromotionError,
    Vec,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    from_numpy_dtype,
    i8,
    i32,
    i64,
    promote,
    u8,
    u32,
    u64,
)


@pytest.mark.parametrize("a,b,out", [
    (f16, f32, f32), (f32, f64, f64), (f16, bf16, f32), (i32, i64, i64), (u8, u32, u32),
    (i8, i8, i8), (boolean, boolean, boolean), (Vec(f32, 4), f32, Vec(f32, 4)),
    (Vec(f16, 2), Vec(f32, 2), Vec(f32, 2)),
])
def test_promote(a, b, out):
    assert promote(a, b) == out and promote(b, a) == out


@pytest.mark.parametrize("a,b", [(i32, u32), (i64, u64), (f32, i32), (u8, f16),
                                 (Vec(f32, 4), Vec(f32, 2)), (boolean, i32)])
def test_promote_rejects(a, b):
    with pytest.raises(PromotionError):
        promote(a, b)


def test_numpy_dtypes_roundtrip():
    for t in (f16, f32, f64, i8, i32, i64, u8, u32, u64, boolean):
        assert from_numpy_dtype(t.np) == t


@cube
def expr(a, b):
    return a + b


@pytest.mark.parametrize("ta,tb,lit,expect", [
    (cb.f16, cb.f16, None, "f16"), (cb.f16, cb.f32, None, "f32"), (cb.i32, None, 1, "i32"),
    (cb.f16, None, 2.5, "f16"), (cb.u8, None, 3, "u8"), (cb.i32, cb.i64, None, "i64"),
])
def test_frontend_result_types(ta, tb, lit, expect):
    if tb is None:
        @cube(launch=True)
        def k(x: Array[ta], out: Array[ta]):
            out[ABSOLUTE_POS] = cb.cast(expr(x[0], lit), ta)
    else:
        @cube(launch=True)
        def k(x: Array[ta], y: Array[tb], out: Array[ta]):
            out[ABSOLUTE_POS] = cb.cast(expr(x[0], y[0]), ta)
    ir = k.source("ir")
    assert f": {expect} = add" in ir, ir


def test_literal_alone_defaults():
    @cube(launch=True)
    def k(out: Array[cb.f32], n: Array[cb.i32]):
        a = 1
        b = 1.0
        for _ in range(2):
            a += 1
            b += 1.0
        out[0] = b
        n[0] = a

    ir = k.source("ir")
    assert "%a" in ir and ": i32 = 1:i32" in ir and ": f32 = 1.0:f32" in ir
    assert np is not None
