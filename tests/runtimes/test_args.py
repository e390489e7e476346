"""The argument block: cube_ir.layout's description and runtimes.args' packer, checked against
slot values worked out here directly (NumPy / struct / hand-computed bit patterns) for every
spec in use (64-bit C-family struct, the CPU's i64 block with pointers and the grid header,
the shaders' u32 words padded to vec4s), and end to end on every runtime that starts."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import cube as cb
from cube import ABSOLUTE_POS, Array, Line, Tensor, cube, f32, u32
from cube_ir import types as T
from cube_ir.builder import Builder
from cube_ir.layout import C_FAMILY, GRID, LLVM, SHADER, Spec, layout
from runtimes.args import Packer
from runtimes.errors import LaunchError

# (name, type, value, its bits as the type's own width, independently worked out)
SCALARS = [
    ("f32", T.f32, 0.1, int(np.array([0.1], np.float32).view(np.uint32)[0])),
    ("f64", T.f64, -2.5, int(np.array([-2.5], np.float64).view(np.uint64)[0])),
    ("f16", T.f16, 0.1, int(np.array([0.1], np.float16).view(np.uint16)[0])),
    # 1 + 3/4 of a bf16 ulp (2**-7) rounds up to 1 + 2**-7: sign 0, exponent 127, mantissa 1
    ("bf16", T.bf16, 1 + 2 ** -8 + 2 ** -9, 0x3F81),
    ("bf16n", T.bf16, -1.5, 0xBFC0),
    ("i8", T.i8, -3, 0xFD),
    ("i16", T.i16, -300, (-300) & 0xFFFF),
    ("i32", T.i32, -7, 0xFFFFFFF9),
    ("i64", T.i64, -(1 << 40), (-(1 << 40)) & (2 ** 64 - 1)),
    ("u8", T.u8, 200, 200),
    ("u16", T.u16, 60000, 60000),
    ("u32", T.u32, 4_000_000_000, 4_000_000_000),
    ("u64", T.u64, 2 ** 63 + 5, 2 ** 63 + 5),
    ("b1", T.boolean, True, 1),
    ("b0", T.boolean, np.bool_(False), 0),
    ("i8np", T.i8, np.int8(-128), 0x80),
]
WIDE = {"f64", "i64", "u64"}


def _scalars(slot_bits: int):
    return [s for s in SCALARS if slot_bits == 64 or s[0] not in WIDE]


def _kernel(slot_bits: int):
    b = Builder("args")
    b.array("a", T.Vec(T.f32, 4))
    b.tensor("t", T.f32, 2)
    for name, t, _, _ in _scalars(slot_bits):
        b.scalar(name, t)
    return b.finish()


def _slot_value(name: str, t, bits: int, slot_bits: int) -> int:
    """What a scalar's slot holds: its own bits, sign-extended to 32 for i8/i16 in a 32-bit
    slot, zero above."""
    if slot_bits == 32 and t.is_signed and not t.is_float and t.bits < 32:
        return (bits - (1 << t.bits) if bits >> (t.bits - 1) else bits) & 0xFFFFFFFF
    return bits


@pytest.fixture(scope="module")
def cpu():
    return cb.runtime("cpu")


def _args(cpu, slot_bits):
    a = cpu.from_numpy(np.arange(24, dtype=np.float32)).lines(4)  # 6 lines
    base = cpu.from_numpy(np.zeros((5, 8), np.float32))
    t = base.view((5, 3), (8, 2))  # every other column of the first six: strided
    return [a, t] + [v for _, _, v, _ in _scalars(slot_bits)], a, t


def test_indices_are_the_same_order_for_every_spec():
    k = _kernel(64)
    c, ll, sh = (layout(k.params, s) for s in (C_FAMILY, LLVM, SHADER))
    a, t, f = c.params[0], c.params[1], c.params[2]
    assert (a.len, t.len, [t.shape(d) for d in (0, 1)], [t.stride(d) for d in (0, 1)],
            f.value) == (0, 1, [2, 3], [4, 5], 6)
    assert (a.buffer, t.buffer, f.buffer) == (0, 1, -1)
    with pytest.raises(AttributeError):
        _ = a.ptr
    a, t, f = ll.params[0], ll.params[1], ll.params[2]
    assert [ll.header_slot(h) for h in GRID] == list(range(6))
    assert (a.ptr, a.len, t.ptr, t.len, t.shape(1), t.stride(0), t.stride(1), f.value) == \
        (6, 7, 8, 9, 11, 12, 13, 14)
    assert ll.nslots == 14 + len(SCALARS) and c.nslots == 6 + len(SCALARS)
    # the shader words: the C-family order, padded to whole vec4s
    assert [(s.offset, s.end) for s in sh.params] == [(s.offset, s.end) for s in c.params]
    assert sh.nslots % 4 == 0 and sh.nslots >= c.nslots and sh.nbytes == 4 * sh.nslots
    assert layout([], SHADER).nslots == 4 and layout([], C_FAMILY).nslots == 1
    assert layout([], LLVM).nslots == 6


@pytest.mark.parametrize("spec", [C_FAMILY, LLVM, SHADER], ids=["c64", "llvm64", "shader32"])
def test_packed_bytes_match_direct_values(cpu, spec):
    bits = spec.slot_bits
    lay = layout(_kernel(bits).params, spec)
    args, a, t = _args(cpu, bits)
    header = (3, 2, 1, 64, 1, 1)[:len(spec.header)]
    blob, bufs = Packer(lay, "args").pack(args, header)
    assert bufs == (a.buffer, t.buffer)

    # the expectation, slot by slot, from the values above (not from the layout's indices)
    want = list(header)
    if spec.pointers:
        want.append(a.buffer.ptr)
    want.append(6)  # 24 floats as lines of 4
    if spec.pointers:
        want.append(t.buffer.ptr)
    want += [40, 5, 3, 8, 2]  # len: the whole allocation; shape; strides
    want += [_slot_value(n, ty, b, bits) for n, ty, _, b in _scalars(bits)]
    want += [0] * (lay.nslots - len(want))
    fmt = "<" + ("Q" if bits == 64 else "I") * lay.nslots
    assert blob == struct.pack(fmt, *want)
    got = np.frombuffer(blob, np.uint64 if bits == 64 else np.uint32)
    assert got.tolist() == want


def test_cpu_launch_plan_is_the_packer(cpu):
    """The CPU's generated launch embeds the plan's statements: same bytes as `pack`."""
    lay = layout(_kernel(64).params, LLVM)
    p = Packer(lay, "args")
    args, _, _ = _args(cpu, 64)
    names = ("cx", "cy", "cz", "dx", "dy", "dz")
    src = "def f(args, cx, cy, cz, dx, dy, dz):\n" + "".join(
        f"    {ln}\n" for ln in p.statements(header=names)) + "    return blob\n"
    env = dict(p.env)
    exec(src, env)
    assert env["f"](args, 3, 2, 1, 64, 1, 1) == p.pack(args, (3, 2, 1, 64, 1, 1))[0]


def test_metadata_wraps_to_the_slot():
    b = Builder("neg")
    b.tensor("t", T.f32, 1)
    k = b.finish()

    class Buf:  # a view with a negative stride, as a runtime's buffer presents it
        line_size, size, shape, strides, ptr = 1, 10, (5,), (-2,), 4096
        buffer = property(lambda self: self)

    blob64, _ = Packer(layout(k.params, C_FAMILY)).pack([Buf()])
    assert struct.unpack("<3q", blob64) == (10, 5, -2)
    blob32, _ = Packer(layout(k.params, SHADER)).pack([Buf()])
    assert struct.unpack("<4I", blob32) == (10, 5, 2 ** 32 - 2, 0)


def test_wide_scalar_in_a_narrow_slot_is_refused():
    b = Builder("wide")
    b.scalar("x", T.u64)
    with pytest.raises(ValueError, match="32-bit slot"):
        Packer(layout(b.finish().params, SHADER))
    with pytest.raises(ValueError, match="slot width"):
        Spec(16)


def test_bad_arguments_name_the_argument(cpu):
    lay = layout(_kernel(64).params, C_FAMILY)
    p = Packer(lay, "args")
    args, a, t = _args(cpu, 64)
    with pytest.raises(LaunchError, match="arguments expected"):
        p.pack(args[:-1])
    bad = list(args)
    bad[1] = 3
    with pytest.raises(LaunchError, match="'t' must be a buffer of rank 2, got int"):
        p.pack(bad)
    bad = list(args)
    bad[2 + [n for n, *_ in SCALARS].index("i32")] = "x"
    with pytest.raises(LaunchError, match="'i32' is not a i32"):
        p.pack(bad)
    _, bufs = p.pack(args)
    with pytest.raises(LaunchError, match="'a' must be a buffer of this wgpu runtime"):
        p.check_buffers(bufs, type(None), type("Rt", (), {"name": "wgpu"})())


@cube(launch=True)
def echo_meta(a: Array[Line[f32]], t: Tensor[f32], n: u32, x: f32, out: Array[f32]):
    if ABSOLUTE_POS == 0:
        out[0] = f32(a.len())
        out[1] = f32(t.shape(0))
        out[2] = f32(t.shape(1))
        out[3] = f32(t.stride(0))
        out[4] = f32(t.stride(1))
        out[5] = f32(n)
        out[6] = x


def test_every_runtime_reads_the_block(rt):
    a = rt.from_numpy(np.zeros(24, np.float32)).lines(4)
    t = rt.from_numpy(np.zeros((5, 8), np.float32)).view((5, 3), (8, 2))
    out = rt.zeros(8, np.float32)
    echo_meta.launch(rt, cube_count=1, cube_dim=1, a=a, t=t, n=77, x=0.25, out=out)
    np.testing.assert_array_equal(out.numpy(), [6, 5, 3, 8, 2, 77, 0.25, 0])
