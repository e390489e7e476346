"""C expressions for constants, casts and memory conversions (one lane at a time)."""
from __future__ import annotations

import math

import numpy as np

from cube_ir.interpreter import round_bf16
from cube_ir.types import Scalar

from .dialects import Dialect


class Values:
    """Per-lane expression helpers; records helper functions it uses in `needs`."""

    def __init__(self, d: Dialect, needs: dict):
        self.d, self.needs = d, needs

    def need(self, *keys: str) -> None:
        for k in keys:
            self.needs.setdefault(k, None)

    # ---- constants ---------------------------------------------------------------------
    def const(self, value, e: Scalar) -> str:
        d = self.d
        if e.is_bool:
            return "true" if value else "false"
        if e.is_float:
            v = float(value)
            with np.errstate(over="ignore"):  # a literal past the type's range is its inf
                if e.name == "f16":
                    v = float(np.float16(v))
                elif e.name == "bf16":
                    v = float(round_bf16(np.float64(v)))
                elif e.bits == 32:
                    v = float(np.float32(v))
            wide = e.bits == 64
            if math.isnan(v) or math.isinf(v):
                if wide:
                    bits = {1: "0x7ff0000000000000ull", -1: "0xfff0000000000000ull"}
                    return d.as_float(64, bits.get(int(math.copysign(1, v)), "") if
                                      math.isinf(v) else "0x7ff8000000000000ull")
                bits = "0x7fc00000u" if math.isnan(v) else \
                    ("0x7f800000u" if v > 0 else "0xff800000u")
                return d.as_float(32, bits)
            s = repr(v) + ("" if wide else "f")
            return f"({s})" if s.startswith("-") else s
        n = int(value) & ((1 << e.bits) - 1)
        if e.is_signed and n >= 1 << (e.bits - 1):
            n -= 1 << e.bits
        c = d.reg(e)
        if e.bits == 64:
            if e.is_signed:
                return "(-9223372036854775807ll - 1)" if n == -(1 << 63) else \
                    (f"({n}ll)" if n < 0 else f"{n}ll")
            return f"{n}ull"
        if e.bits == 32:
            if e.is_signed:
                return "(-2147483647 - 1)" if n == -(1 << 31) else (f"({n})" if n < 0 else
                                                                    str(n))
            return f"{n}u"
        return f"(({c}){n})"

    def erf(self, t: str, x: str) -> str:
        """erf on float (or a float vector type t) by the prelude's branch-free helper."""
        self.need(f"erf:{t}")
        return f"cube_erf_{t}({x})"

    # ---- rounding of f16/bf16 computed in float -----------------------------------------
    def rnd(self, e: Scalar, x: str) -> str:
        if e.name == "bf16":
            self.need("bf16")
            return f"cube_round_bf16({x})"
        if e.name == "f16":
            return self.f16_round(x)
        return x

    def f16_round(self, x: str) -> str:
        self.need(*self.d.f16_needs())
        return self.d.f16_round(x)

    # ---- casts -------------------------------------------------------------------------
    def cast(self, x: str, se: Scalar, de: Scalar) -> str:
        if se == de:
            return x
        d = self.d
        if de.is_bool:
            return f"({x} != 0)"
        if se.is_bool:
            return f"({d.reg(de)})({x})"
        if de.is_float:
            y = x if d.reg(se) == d.reg(de) else f"({d.reg(de)})({x})"
            return self.rnd(de, y)
        if se.is_float:
            src = "f64" if se.bits == 64 else "f32"
            self.need(f"f2i:{de.name}:{src}")
            return f"cube_f2i_{de.name}_{src}({x})"
        return f"({d.reg(de)})({x})"

    # ---- memory representation -----------------------------------------------------------
    def from_mem(self, e: Scalar, x: str) -> str:
        if e.is_bool:
            return f"({x} != 0)"
        if e.name == "bf16":
            self.need("bf16")
            return f"cube_bf16_to_f32({x})"
        if e.name == "f16":
            self.need(*self.d.f16_needs())
            return self.d.f16_load(x)
        return x

    def to_mem(self, e: Scalar, x: str) -> str:
        if e.is_bool:
            return f"({self.d.mem(e)})({x})"
        if e.name == "bf16":
            self.need("bf16")
            return f"cube_f32_to_bf16({x})"
        if e.name == "f16":
            self.need(*self.d.f16_needs())
            return self.d.f16_store(x)
        return x

    def from_bits(self, e: Scalar, slot: str) -> str:
        """A scalar kernel argument from its 64-bit slot."""
        d = self.d
        if e.is_bool:
            return f"({slot} != 0)"
        if e.name == "bf16" or (e.name == "f16" and d.mem(e) == d.uint(16)):
            return self.from_mem(e, f"({d.uint(16)})({slot})")
        if e.name == "f16":
            return self.d.f16_from_bits(slot)
        if e.is_float:
            return d.as_float(e.bits, f"({d.uint(e.bits)})({slot})")
        return f"({d.reg(e)})({slot})"
