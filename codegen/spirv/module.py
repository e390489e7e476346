"""A small SPIR-V binary writer: ids, sections, cached types and constants, and a minimal
disassembler (opcode names and operands) for when `spirv-dis` is missing."""
from __future__ import annotations

import struct

OPS = dict(
    Extension=10, ExtInstImport=11, ExtInst=12, MemoryModel=14, EntryPoint=15, ExecutionMode=16,
    Capability=17, TypeVoid=19, TypeBool=20, TypeInt=21, TypeFloat=22, TypeVector=23,
    TypeArray=28, TypeRuntimeArray=29, TypeStruct=30, TypePointer=32, TypeFunction=33,
    ConstantTrue=41, ConstantFalse=42, Constant=43, ConstantComposite=44, Function=54,
    FunctionEnd=56, Variable=59, Load=61, Store=62, AccessChain=65, Decorate=71,
    MemberDecorate=72, VectorExtractDynamic=77, CompositeConstruct=80, CompositeExtract=81,
    CompositeInsert=82,
    ConvertFToU=109, ConvertFToS=110, ConvertSToF=111, ConvertUToF=112, FConvert=115,
    Bitcast=124, SNegate=126, FNegate=127, IAdd=128, FAdd=129, ISub=130, FSub=131, IMul=132,
    FMul=133, UDiv=134, SDiv=135, FDiv=136, UMod=137, SRem=138, FRem=140, IsNan=156,
    LogicalEqual=164, LogicalNotEqual=165, LogicalOr=166, LogicalAnd=167, LogicalNot=168,
    Select=169, IEqual=170, INotEqual=171, UGreaterThan=172, SGreaterThan=173,
    UGreaterThanEqual=174, SGreaterThanEqual=175, ULessThan=176, SLessThan=177,
    ULessThanEqual=178, SLessThanEqual=179, FOrdEqual=180, FUnordNotEqual=183,
    FOrdLessThan=184, FOrdGreaterThan=186, FOrdLessThanEqual=188, FOrdGreaterThanEqual=190,
    ShiftRightLogical=194, ShiftRightArithmetic=195, ShiftLeftLogical=196, BitwiseOr=197,
    BitwiseXor=198, BitwiseAnd=199, Not=200, ControlBarrier=224, MemoryBarrier=225,
    AtomicLoad=227, AtomicStore=228, AtomicExchange=229, AtomicCompareExchange=230,
    AtomicIAdd=234, AtomicISub=235, AtomicSMin=236, AtomicUMin=237, AtomicSMax=238,
    AtomicUMax=239, AtomicAnd=240, AtomicOr=241, AtomicXor=242, LoopMerge=246,
    SelectionMerge=247, Label=248, Branch=249, BranchConditional=250, Return=253,
    Unreachable=255, GroupNonUniformAll=334, GroupNonUniformAny=335,
    GroupNonUniformBallot=339, GroupNonUniformShuffle=345, GroupNonUniformIAdd=349,
    GroupNonUniformFAdd=350, GroupNonUniformIMul=351, GroupNonUniformFMul=352,
    GroupNonUniformSMin=353, GroupNonUniformUMin=354, GroupNonUniformFMin=355,
    GroupNonUniformSMax=356, GroupNonUniformUMax=357, GroupNonUniformFMax=358,
    AtomicFAddEXT=6035,
)
NAMES = {v: k for k, v in OPS.items()}
SECTIONS = ("cap", "ext", "mem", "entry", "mode", "annot", "globals", "code")


def string_words(s: str) -> list[int]:
    b = s.encode() + b"\0"
    b += b"\0" * (-len(b) % 4)
    return list(struct.unpack(f"<{len(b) // 4}I", b))


class Module:
    def __init__(self) -> None:
        self.bound = 1
        self.sec: dict[str, list[int]] = {s: [] for s in SECTIONS}
        self.cache: dict = {}

    def id(self) -> int:
        self.bound += 1
        return self.bound - 1

    def emit(self, section: str, op: str, *operands) -> None:
        words: list[int] = []
        for x in operands:
            if isinstance(x, str):
                words += string_words(x)
            elif isinstance(x, (list, tuple)):
                words += list(x)
            else:
                words.append(int(x) & 0xFFFFFFFF)
        self.sec[section] += [((len(words) + 1) << 16) | OPS[op], *words]

    def op(self, op: str, rtype: int, *operands) -> int:
        """A code instruction with a result type; returns its result id."""
        r = self.id()
        self.emit("code", op, rtype, r, *operands)
        return r

    def cached(self, key, make) -> int:
        r = self.cache.get(key)
        if r is None:
            r = self.cache[key] = make()
        return r

    def _g(self, op: str, *operands) -> int:
        r = self.id()
        self.emit("globals", op, r, *operands)
        return r

    def _gt(self, op: str, t: int, *operands) -> int:
        """A typed global (constants): result type before result id."""
        r = self.id()
        self.emit("globals", op, t, r, *operands)
        return r

    # ---- types -------------------------------------------------------------------------
    def void(self) -> int:
        return self.cached("void", lambda: self._g("TypeVoid"))

    def bool(self) -> int:
        return self.cached("bool", lambda: self._g("TypeBool"))

    def int(self, bits: int, signed: bool) -> int:
        return self.cached(("int", bits, signed), lambda: self._g("TypeInt", bits, int(signed)))

    def float(self, bits: int) -> int:
        return self.cached(("float", bits), lambda: self._g("TypeFloat", bits))

    def vec(self, elem: int, n: int) -> int:
        return self.cached(("vec", elem, n), lambda: self._g("TypeVector", elem, n))

    def ptr(self, storage: int, t: int) -> int:
        return self.cached(("ptr", storage, t), lambda: self._g("TypePointer", storage, t))

    def array(self, t: int, n: int, stride: int | None = None) -> int:
        def make():
            r = self._g("TypeArray", t, self.const(self.int(32, False), n))
            if stride:
                self.emit("annot", "Decorate", r, 6, stride)  # ArrayStride
            return r
        return self.cached(("array", t, n, stride), make)

    def fn_type(self, ret: int) -> int:
        return self.cached(("fn", ret), lambda: self._g("TypeFunction", ret))

    # ---- constants ---------------------------------------------------------------------
    def const(self, t: int, word: int) -> int:
        return self.cached(("const", t, word), lambda: self._gt("Constant", t, word))

    def const_bool(self, v: bool) -> int:
        b = self.bool()
        return self.cached(("cbool", v), lambda: self._gt(
            "ConstantTrue" if v else "ConstantFalse", b))

    def const_composite(self, t: int, parts: tuple) -> int:
        return self.cached(("ccomp", t, parts), lambda: self._gt("ConstantComposite", t,
                                                                  *parts))

    # ---- output ------------------------------------------------------------------------
    def words(self, version: int = 0x00010300) -> list[int]:
        out = [0x07230203, version, 0, self.bound, 0]
        for s in SECTIONS:
            out += self.sec[s]
        return out

    def binary(self) -> bytes:
        w = self.words()
        return struct.pack(f"<{len(w)}I", *w)


def disassemble(blob: bytes) -> str:
    """One line per instruction: opcode name and raw operand words (no spirv-dis here)."""
    w = struct.unpack(f"<{len(blob) // 4}I", blob)
    lines = [f"; SPIR-V {w[1] >> 16}.{(w[1] >> 8) & 0xFF}, bound {w[3]}"]
    i = 5
    while i < len(w):
        n, op = w[i] >> 16, w[i] & 0xFFFF
        lines.append(f"Op{NAMES.get(op, op)} " + " ".join(str(x) for x in w[i + 1:i + n]))
        i += max(n, 1)
    return "\n".join(lines)
