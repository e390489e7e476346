"""LLVM instruction helpers over typed operands (an operand is its text: `%t3`, `1.0`...)."""
from __future__ import annotations

from .fn import Fn
from .types import elem_of, lanes_of, lit, with_elem


class Lower:
    def __init__(self, fn: Fn) -> None:
        self.fn = fn
        self.mod = fn.mod

    # ---- plain instructions ------------------------------------------------------------
    def bin(self, opc: str, ll: str, a: str, b: str) -> str:
        return self.fn.op(f"{opc} {ll} {a}, {b}")

    def icmp(self, pred: str, ll: str, a: str, b: str) -> str:
        return self.fn.op(f"icmp {pred} {ll} {a}, {b}")

    def fcmp(self, pred: str, ll: str, a: str, b: str) -> str:
        return self.fn.op(f"fcmp {pred} {ll} {a}, {b}")

    def select(self, c: str, ll: str, a: str, b: str, cll: str | None = None) -> str:
        cll = cll or with_elem(ll, "i1")
        return self.fn.op(f"select {cll} {c}, {ll} {a}, {ll} {b}")

    def conv(self, opc: str, src: str, x: str, dst: str) -> str:
        if src == dst and opc in ("bitcast", "zext", "sext", "trunc", "fpext", "fptrunc"):
            return x
        return self.fn.op(f"{opc} {src} {x} to {dst}")

    def call(self, name: str, ret: str, args: list[tuple[str, str]]) -> str:
        a = ", ".join(f"{t} {v}" for t, v in args)
        if ret == "void":
            self.fn.do(f"call void @{name}({a})")
            return ""
        return self.fn.op(f"call {ret} @{name}({a})")

    def intr(self, base: str, ll: str, *xs: str) -> str:
        """Call llvm.<base> overloaded on ll with operands xs of type ll."""
        name = self.mod.intrinsic(base, ll, len(xs))
        return self.call(name, ll, [(ll, x) for x in xs])

    def c(self, value, ll: str) -> str:
        return lit(value, ll)

    # ---- lanes -------------------------------------------------------------------------
    def splat(self, x: str, e: str, n: int) -> str:
        v = self.fn.op(f"insertelement <{n} x {e}> poison, {e} {x}, i64 0")
        return self.fn.op(f"shufflevector <{n} x {e}> {v}, <{n} x {e}> poison, "
                          f"<{n} x i32> zeroinitializer")

    def per_lane(self, ll: str, xs: list[str], scalar_fn) -> str:
        """Apply scalar_fn(list of scalar operands) -> operand lane by lane."""
        if not ll.startswith("<"):
            return scalar_fn(xs)
        n, e = lanes_of(ll), elem_of(ll)
        acc = "poison"
        for k in range(n):
            parts = [self.fn.op(f"extractelement {ll} {x}, i32 {k}") for x in xs]
            r = scalar_fn(parts)
            acc = self.fn.op(f"insertelement {ll} {acc}, {e} {r}, i32 {k}")
        return acc

    def libm(self, name: str, ll: str, *xs: str) -> str:
        """A libm function of len(xs) operands, applied per lane."""
        e = elem_of(ll)
        fname = self.mod.declare(name, e, [e] * len(xs), " nounwind")
        return self.per_lane(ll, list(xs),
                             lambda parts: self.call(fname, e, [(e, p) for p in parts]))

    # ---- bf16 --------------------------------------------------------------------------
    def bf16_round(self, ll: str, x: str) -> str:
        """A float (or float line) rounded to bf16 precision, nearest even; NaNs stay NaN."""
        il = with_elem(ll, "i32")
        b = self.conv("bitcast", ll, x, il)
        lsb = self.bin("and", il, self.bin("lshr", il, b, self.c(16, il)), self.c(1, il))
        r = self.bin("add", il, self.bin("add", il, b, self.c(0x7FFF, il)), lsb)
        r = self.bin("and", il, r, self.c(-65536, il))
        q = self.bin("and", il, self.bin("or", il, b, self.c(0x400000, il)), self.c(-65536, il))
        isnan = self.fcmp("uno", ll, x, x)
        r = self.select(isnan, il, q, r)
        return self.conv("bitcast", il, r, ll)

    def bf16_load(self, ll: str, x: str) -> str:
        """Raw bf16 bits (i16 / line of i16) to float."""
        il = with_elem(ll, "i32")
        z = self.conv("zext", with_elem(ll, "i16"), x, il)
        return self.conv("bitcast", il, self.bin("shl", il, z, self.c(16, il)), ll)

    def bf16_store(self, ll: str, x: str) -> str:
        """A bf16-exact float to its raw i16 bits."""
        il = with_elem(ll, "i32")
        b = self.bin("lshr", il, self.conv("bitcast", ll, x, il), self.c(16, il))
        return self.conv("trunc", il, b, with_elem(ll, "i16"))
