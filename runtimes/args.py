"""The argument packer every runtime uses: a kernel's launch arguments -> its argument block.

`Packer(layout)` works out once per executable how each slot of the block (cube_ir.layout)
is filled: one `struct` format for the whole block (padding included) and one Python
expression per slot. `pack(args[, header])` is a function generated from that plan (one
`struct.pack` call, no per-slot branching) that returns the block's bytes and the argument
buffers in buffer order (for runtimes that bind them outside the block). A runtime whose
whole launch is generated code (cpu) puts the plan's statements in it instead
(`statements`, `env`), so the hot path makes no extra call.

Slot contents (`cube_ir.layout`'s rules):

    ptr            `buffer.<pointer>` (a host address; layouts with pointers only)
    len            buffer.size // line_size (the allocation's elements: lines for line views)
    shape, stride  buffer.shape[d], buffer.strides[d] (scalar elements)
    header word    the value given for it
    scalar         by type and slot width (SCALAR_CODES): f32 its 32 bits, f16/bf16 their raw
                   bits, bool 0/1, ints in their own width (sign-extended to 32 bits in a
                   32-bit slot), the rest of the slot zero

Metadata and header words of a 64-bit slot are packed as signed 64-bit (a negative stride is
its two's complement); in a 32-bit slot they are reduced modulo 2**32. A scalar that does not
fit its type raises (`struct.error`; the launch API has already checked the range).
"""
from __future__ import annotations

import struct

from cube_ir.layout import Layout
from cube_ir.types import Scalar

from .errors import LaunchError
from .scalar_bits import bf16_bits, f16_bits

ERRORS = (TypeError, ValueError, AttributeError, IndexError, OverflowError, struct.error)
_INT_CODES = {8: "b", 16: "h", 32: "i", 64: "q"}


def _pad(bits: int) -> str:
    return f"{bits // 8}x" if bits else ""


def scalar_code(e: Scalar, slot_bits: int) -> tuple[str, str | None]:
    """(struct format filling one slot, the converter applied to the value first or None)."""
    if e.bits > slot_bits:
        raise ValueError(f"a {e} scalar does not fit a {slot_bits}-bit slot")
    if e.name in ("f16", "bf16"):
        return "H" + _pad(slot_bits - 16), f"_{e.name}_bits"
    if e.is_bool:
        return "?" + _pad(slot_bits - 8), None
    if e.is_float:
        return ("f" if e.bits == 32 else "d") + _pad(slot_bits - e.bits), None
    if e.is_signed and slot_bits == 32:
        return "i", None  # i8/i16 sign-extended to the slot
    code = _INT_CODES[e.bits]
    return (code if e.is_signed else code.upper()) + _pad(slot_bits - e.bits), None


class Packer:
    """The packing plan of one layout; `pointer` names the buffer attribute holding its
    address (layouts with pointers in the block)."""

    def __init__(self, layout: Layout, name: str = "kernel", pointer: str = "ptr"):
        self.layout, self.name = layout, name
        bits = layout.slot_bits
        meta = "q" if bits == 64 else "I"
        wrap = "{}" if bits == 64 else "({}) & 0xFFFFFFFF"
        nhead = len(layout.spec.header)
        self.header_names = tuple(f"h{j}" for j in range(nhead))
        self._wrap = wrap
        fmt = [meta * nhead]
        vals: list[str] = []
        pre: list[str] = []
        for s in layout.params:
            a, b = f"a{s.index}", f"b{s.index}"
            if s.kind == "scalar":
                code, conv = scalar_code(s.elem, bits)
                fmt.append(code)
                vals.append(f"{conv}({a})" if conv else a)
                continue
            pre.append(f"{b} = {a}.buffer")
            if s.has_ptr:
                fmt.append("q")
                vals.append(f"{b}.{pointer}")
            fmt.append(meta * (1 + 2 * s.rank))
            vals.append(wrap.format(f"{b}.size // {a}.line_size"))
            vals += [wrap.format(f"{b}.shape[{d}]") for d in range(s.rank)]
            vals += [wrap.format(f"{b}.strides[{d}]") for d in range(s.rank)]
        used = layout.params[-1].end if layout.params else nhead
        fmt.append(_pad((layout.nslots - used) * bits))
        self.struct = struct.Struct("<" + "".join(fmt))
        assert self.struct.size == layout.nbytes, (self.struct.format, layout)
        n = len(layout.params)
        self.nargs = n
        self.arg_names = tuple(f"a{i}" for i in range(n))
        self.buffer_names = tuple(f"b{s.index}" for s in layout.buffers)
        self._pre, self._vals = pre, vals
        self.env = {"_args_pack": self.struct.pack, "_f16_bits": f16_bits,
                    "_bf16_bits": bf16_bits}
        self.pack = self._compile()

    def statements(self, args: str = "args", blob: str = "blob",
                   header: tuple[str, ...] | None = None) -> list[str]:
        """Python statements unpacking `args` into a0.. (buffers b0..) and binding `blob` to
        the block's bytes; the header words are read from the variables named `header` (in
        the spec's order; default h0..), which the caller binds first. They raise one of
        `ERRORS` on a bad argument (`error` names it)."""
        n = self.nargs
        header = self.header_names if header is None else header
        assert len(header) == len(self.header_names)
        vals = [self._wrap.format(h) for h in header] + self._vals
        unpack = (f"{', '.join(self.arg_names)}{',' if n == 1 else ''} = {args}" if n
                  else f"if {args}: raise ValueError('no arguments expected')")
        return [unpack, *self._pre, f"{blob} = _args_pack({', '.join(vals)})"]

    def _compile(self):
        hdr = f"    {', '.join(self.header_names)}{',' if len(self.header_names) == 1 else ''}" \
              f" = header\n" if self.header_names else ""
        body = "".join(f"        {ln}\n" for ln in self.statements())
        bufs = ", ".join(self.buffer_names) + ("," if len(self.buffer_names) == 1 else "")
        src = (f"def pack(args, header=()):\n{hdr}    try:\n{body}"
               f"    except _errors as e:\n        raise _bad(args, e) from None\n"
               f"    return blob, ({bufs})\n")
        env = dict(self.env, _errors=ERRORS, _bad=self.error)
        exec(compile(src, f"<pack {self.name}>", "exec"), env)
        return env["pack"]

    def check_buffers(self, bufs: tuple, cls: type, rt) -> None:
        """A LaunchError unless every buffer `pack` returned is a `cls` of runtime rt."""
        for s, b in zip(self.layout.buffers, bufs):
            if not isinstance(b, cls) or b.rt is not rt:
                where = getattr(getattr(b, "rt", None), "name", "?")
                raise LaunchError(f"launch of {self.name}: argument '{s.name}' must be a "
                                  f"buffer of this {rt.name} runtime, got "
                                  f"{type(b).__name__} of {where}")

    def error(self, args, e: Exception) -> LaunchError:
        """The LaunchError for arguments the plan could not pack, naming the first bad one."""
        n, names = self.nargs, [s.name for s in self.layout.params]
        try:
            args = list(args)
        except TypeError:
            args = None
        if args is None or len(args) != n:
            got = "not a sequence" if args is None else f"got {len(args)}"
            return LaunchError(f"launch of {self.name}: {n} arguments expected "
                               f"({', '.join(names)}), {got}")
        for s, a in zip(self.layout.params, args):
            if s.kind == "scalar":
                code, conv = scalar_code(s.elem, self.layout.slot_bits)
                try:
                    struct.pack("<" + code, self.env[conv](a) if conv else a)
                except ERRORS as e2:
                    return LaunchError(f"launch of {self.name}: argument '{s.name}' is not a "
                                       f"{s.elem} ({type(e2).__name__}: {e2})")
                continue
            b = getattr(a, "buffer", None)
            if b is None or not hasattr(a, "line_size") or len(getattr(b, "shape", ())) < s.rank:
                what = f"a buffer of rank {s.rank}" if s.kind == "tensor" else "a buffer"
                return LaunchError(f"launch of {self.name}: argument '{s.name}' must be "
                                   f"{what}, got {type(a).__name__}")
        return LaunchError(f"launch of {self.name}: bad arguments ({type(e).__name__}: {e})")
