"""LLVM helpers shared by the backends: type mapping, storage conversions, intrinsics, loops.

Element types live in two forms:

* in memory (``mem_type``): pred is ``i8`` (numpy's bool), f16 is ``half``, bf16 is the raw
  ``i16`` bit pattern, the 8-bit and narrower floats their one-byte code, 2- and 4-bit
  integers one byte each holding the value's bits (zero above them, as ml_dtypes stores them),
  complex numbers ``{T, T}`` (real, imaginary: interleaved, as numpy stores them), everything
  else its natural LLVM type;
* in registers (``reg_type``): pred is ``i1``; 2- and 4-bit integers ``i2``/``i4``; f16, bf16
  and the narrower floats are held as ``float`` values that are always exactly representable
  in the narrow type (every op computes in f32 and rounds back, which is exact for +,-,*,/,sqrt
  since f32 has more than twice the narrow mantissa + 2 bits); complex numbers ``{T, T}``.
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence

import llvmlite.ir as ir
import numpy as np

from hlo.ir.types import ElementType, TensorType

from . import small_float

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

NSW = ("nsw",)


def i64(n: int) -> ir.Constant:
    return ir.Constant(I64, int(n))


def reg_type(et: ElementType) -> ir.Type:
    if et.is_pred:
        return I1
    if et.is_int:
        return ir.IntType(et.bits)
    if et.is_complex:
        p = reg_type(et.component)
        return ir.LiteralStructType([p, p])
    if et.bits == 64:
        return F64
    return F32  # f32, and f16/bf16/the 8-bit floats computed in f32


def mem_type(et: ElementType) -> ir.Type:
    if et.is_pred or et.is_sub_byte or is_small_float(et):
        return I8
    if et.name == "f16":
        return F16
    if et.name == "bf16":
        return I16
    return reg_type(et)


def is_small_float(et: ElementType) -> bool:
    """The 8-bit and narrower floats (one-byte codes in memory; ``small_float``)."""
    return et.is_float and et.bits <= 8


def bits_type(et: ElementType) -> ir.IntType:
    """The integer type of the element's storage bits."""
    return ir.IntType(8 if et.is_pred or is_small_float(et) else et.bits)


def reg_constant(et: ElementType, value) -> ir.Constant:
    """A register constant of element type ``et`` holding ``value`` (a Python/numpy scalar)."""
    t = reg_type(et)
    if et.is_pred:
        return ir.Constant(I1, int(bool(value)))
    if et.is_int:
        v = int(np.asarray(value).astype(et.np_dtype))
        return ir.Constant(t, v & ((1 << et.bits) - 1))
    if et.is_complex:
        z = np.asarray(value).astype(et.np_dtype)
        return ir.Constant(t, [reg_constant(et.component, z.real), reg_constant(et.component, z.imag)])
    x = np.asarray(value).astype(et.np_dtype)
    return ir.Constant(t, float(np.float64(x.astype(np.float32) if is_small_float(et) else x)))


def storage_align(et: ElementType) -> int:
    return max(1, et.component.itemsize if et.is_complex else et.itemsize)


# ------------------------------------------------------------------------------------------
# Module context: intrinsics, libm functions and constant globals, declared once per module
# ------------------------------------------------------------------------------------------

class ModuleContext:
    """One LLVM module under construction, with caches for declarations and constants.
    ``math``: the target's ``mathlib.MathPolicy``, which the shared emitter asks for every math
    function (None for modules that compute none, such as the runtime's worker pool)."""

    def __init__(self, name: str, triple: str = "", datalayout: str = "", math=None):
        self.module = ir.Module(name=name)
        self.math = math
        if triple:
            self.module.triple = triple
        if datalayout:
            self.module.data_layout = datalayout
        self._decls: Dict[str, ir.Function] = {}
        self._consts: Dict[bytes, ir.GlobalVariable] = {}
        self._names: Dict[str, int] = {}

    def unique(self, base: str) -> str:
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return base if n == 0 else f"{base}.{n}"

    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type], attrs=()) -> ir.Function:
        f = self._decls.get(name)
        if f is None:
            f = ir.Function(self.module, ir.FunctionType(ret, list(args)), name=name)
            for a in attrs:
                f.attributes.add(a)
            self._decls[name] = f
        return f

    def intrinsic(self, base: str, ty: ir.Type, nargs: int = 1, ret: Optional[ir.Type] = None,
                  extra: Sequence[ir.Type] = ()) -> ir.Function:
        """``llvm.<base>.<suffix of ty>`` taking ``nargs`` values of ``ty`` (then ``extra``)."""
        suffix = _type_suffix(ty)
        return self.declare(f"llvm.{base}.{suffix}", ret or ty, [ty] * nargs + list(extra))

    def constant_global(self, data: np.ndarray) -> ir.GlobalVariable:
        """A read-only global holding ``data``'s raw bytes, 64-byte aligned."""
        raw = np.ascontiguousarray(data)
        if raw.dtype == np.bool_:
            raw = raw.astype(np.uint8)
        b = raw.tobytes()
        g = self._consts.get(b)
        if g is None:
            ty = ir.ArrayType(I8, max(len(b), 1))
            g = ir.GlobalVariable(self.module, ty, name=self.unique("hlo.const"))
            g.initializer = ir.FormattedConstant(ty, _c_string(b if b else b"\0"))
            g.global_constant = True
            g.linkage = "internal"
            g.align = 64
            self._consts[b] = g
        return g


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def _c_string(data: bytes) -> str:
    """LLVM's ``c"..."`` literal for raw bytes, built with a lookup table (llvmlite's own
    per-byte formatting takes seconds for megabytes of weights)."""
    arr = np.frombuffer(data, np.uint8)
    out = np.empty((arr.size, 3), np.uint8)
    out[:, 0] = ord("\\")
    out[:, 1] = _HEX_DIGITS[arr >> 4]
    out[:, 2] = _HEX_DIGITS[arr & 15]
    return 'c"' + out.tobytes().decode("ascii") + '"'


def _type_suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{_type_suffix(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.HalfType):
        return "f16"
    raise TypeError(f"no intrinsic suffix for {ty}")


# ------------------------------------------------------------------------------------------
# Storage <-> register conversions
# ------------------------------------------------------------------------------------------

def f32_to_bf16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round an f32 register to bf16 (nearest even; NaN stays a quiet NaN); returns i16 bits."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF)))
    is_nan = b.fcmp_unordered("uno", x, x)
    quiet = b.or_(bits, ir.Constant(I32, 0x00400000))
    out = b.select(is_nan, quiet, rounded)
    return b.trunc(b.lshr(out, ir.Constant(I32, 16)), I16)


def bf16_bits_to_f32(b: ir.IRBuilder, h: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(h, I32), ir.Constant(I32, 16)), F32)


def round_f32_to(b: ir.IRBuilder, x: ir.Value, et: ElementType) -> ir.Value:
    """Round an f32 register to the narrow type ``et`` (f16/bf16), staying an f32 register."""
    if et.name == "f16":
        return b.fpext(b.fptrunc(x, F16), F32)
    if et.name == "bf16":
        return bf16_bits_to_f32(b, f32_to_bf16_bits(b, x))
    if is_small_float(et):
        return small_float.round_f32(b, x, et)
    return x


def load_reg(b: ir.IRBuilder, ptr: ir.Value, et: ElementType, align: Optional[int] = None) -> ir.Value:
    """Load one element from memory and return it in register form."""
    return from_storage(b, b.load(ptr, typ=mem_type(et), align=align or storage_align(et)), et)


def from_storage(b: ir.IRBuilder, v: ir.Value, et: ElementType) -> ir.Value:
    """A loaded storage-form element (``mem_type``) in register form."""
    if et.is_pred:
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    if et.name == "f16":
        return b.fpext(v, F32)
    if et.name == "bf16":
        return bf16_bits_to_f32(b, v)
    if et.is_sub_byte:
        return b.trunc(v, reg_type(et))
    if is_small_float(et):
        return small_float.decode(b, v, et)
    return v


def to_storage(b: ir.IRBuilder, v: ir.Value, et: ElementType) -> ir.Value:
    """A register-form element in storage form (``mem_type``), as ``store_reg`` writes it."""
    if et.is_pred:
        return b.zext(v, I8)
    if et.name == "f16":
        return b.fptrunc(v, F16)
    if et.name == "bf16":
        return f32_to_bf16_bits(b, v)
    if et.is_sub_byte:
        return b.zext(v, I8)
    if is_small_float(et):
        return small_float.encode(b, v, et)
    return v


def store_reg(b: ir.IRBuilder, v: ir.Value, ptr: ir.Value, et: ElementType,
              align: Optional[int] = None) -> ir.Instruction:
    """Store a register-form value to memory in storage form; returns the store."""
    return b.store(to_storage(b, v, et), ptr, align=align or storage_align(et))


def reg_to_bits(b: ir.IRBuilder, v: ir.Value, et: ElementType) -> ir.Value:
    """The storage bit pattern of a register value (pred as i8)."""
    if et.is_pred:
        return b.zext(v, I8)
    if et.is_int:
        return v
    if et.name == "f16":
        return b.bitcast(b.fptrunc(v, F16), I16)
    if et.name == "bf16":
        return f32_to_bf16_bits(b, v)
    if is_small_float(et):
        return small_float.encode(b, v, et)
    if et.is_complex:  # real part in the low half, as in memory
        w = et.component.bits
        pty, wide = ir.IntType(w), ir.IntType(2 * w)
        re = b.zext(b.bitcast(b.extract_value(v, 0), pty), wide)
        im = b.zext(b.bitcast(b.extract_value(v, 1), pty), wide)
        return b.or_(re, b.shl(im, ir.Constant(wide, w)))
    return b.bitcast(v, bits_type(et))


def bits_to_reg(b: ir.IRBuilder, bits: ir.Value, et: ElementType) -> ir.Value:
    if et.is_pred:
        return b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))
    if et.is_int:
        return bits
    if et.name == "f16":
        return b.fpext(b.bitcast(bits, F16), F32)
    if et.name == "bf16":
        return bf16_bits_to_f32(b, bits)
    if is_small_float(et):
        return small_float.decode(b, bits, et)
    if et.is_complex:
        w = et.component.bits
        pty = ir.IntType(w)
        ft = reg_type(et.component)
        re = b.bitcast(b.trunc(bits, pty), ft)
        im = b.bitcast(b.trunc(b.lshr(bits, ir.Constant(bits.type, w)), pty), ft)
        z = b.insert_value(ir.Constant(reg_type(et), ir.Undefined), re, 0)
        return b.insert_value(z, im, 1)
    return b.bitcast(bits, reg_type(et))


# ------------------------------------------------------------------------------------------
# Addressing and loops
# ------------------------------------------------------------------------------------------

def strides_of(t: TensorType) -> List[int]:
    """Element strides of each logical dimension under the type's physical layout."""
    strides = [0] * t.rank
    s = 1
    for d in t.minor_to_major:
        strides[d] = s
        s *= t.shape[d]
    return strides


def linear_offset(b: ir.IRBuilder, idx: Sequence[ir.Value], strides: Sequence[int]) -> ir.Value:
    off = None
    for i, s in zip(idx, strides):
        if s == 0:
            continue
        term = i if s == 1 else b.mul(i, i64(s), flags=NSW)
        off = term if off is None else b.add(off, term, flags=NSW)
    return off if off is not None else i64(0)


def elem_ptr(b: ir.IRBuilder, base: ir.Value, et: ElementType, offset: ir.Value) -> ir.Value:
    return b.gep(base, [offset], inbounds=True, source_etype=mem_type(et))


class _LoopID(ir.values.MDValue):
    """A loop's identity metadata, ``!N = distinct !{!N, hints...}``: it refers to itself, so it
    is hashed by identity (llvmlite's MDValue hashes its operands, which would recurse)."""

    def __init__(self, module: ir.Module, hints: Sequence[ir.values.MDValue]):
        super().__init__(module, [], name=str(len(module.metadata)))
        self.operands = (self,) + tuple(hints)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def descr(self, buf):
        ops = ", ".join(o.get_reference() for o in self.operands)
        buf += ("distinct !{{ {0} }}".format(ops), "\n")


def loop_hints(module: ir.Module, interleave: int) -> ir.values.MDValue:
    """Loop metadata asking the loop vectorizer to interleave ``interleave`` vector iterations
    (independent dependency chains in flight: a long per-element chain, such as fused
    transcendentals, otherwise leaves the out-of-order core waiting on latency)."""
    hint = module.add_metadata([ir.MetaDataString(module, "llvm.loop.interleave.count"),
                                ir.Constant(I32, int(interleave))])
    return _LoopID(module, [hint])


def glue(fn: ir.Function) -> ir.Function:
    """Mark ``fn`` as glue code that LLVM neither optimizes nor inlines into (``optnone``,
    which needs ``noinline``): a program's entry points, which check arguments and call its
    kernels once per call, and the thread pool's task wrappers. Their code generation at O0
    is fast; at O3 they were about a fifth of a small program's LLVM time (layernorm:
    hlo_call_py alone 8 of 40 ms) for code that runs a few hundred instructions per call."""
    fn.attributes.add("noinline")
    fn.attributes.add("optnone")
    return fn


def prefer_vector_width(fn: ir.Function, bits: int) -> None:
    """Let LLVM's vectorizers use vectors up to ``bits`` wide in ``fn`` (the string function
    attribute ``"prefer-vector-width"``, which overrides the CPU's tuning: LLVM's Intel
    AVX-512 CPUs, Ice Lake to Sapphire Rapids, prefer 256 bits by default). llvmlite's
    ``FunctionAttributes.add`` accepts only enum attributes, so the text goes into the set as
    is; it is printed in the function's attribute list."""
    set.add(fn.attributes, f'"prefer-vector-width"="{int(bits)}"')


# ``for_range(..., interleave=SCALAR_LOOP)``: a loop the loop vectorizer leaves alone (code
# that must exist but never runs hot, where vectorizing only costs compile time).
SCALAR_LOOP = 0


def scalar_hint(module: ir.Module) -> ir.values.MDValue:
    """Loop metadata turning the loop vectorizer off for one loop."""
    hint = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                ir.Constant(ir.IntType(1), 0)])
    return _LoopID(module, [hint])


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, lo, hi, name: str = "i", interleave: Optional[int] = None, step=1):
    """``for (i = lo; i < hi; i += step)``: yields the induction variable; the builder ends after
    the loop when the block exits (where the induction variable is the first value not run).
    ``interleave``: the loop vectorizer's interleave count for this loop (default: LLVM's cost
    model decides; ``SCALAR_LOOP``: not vectorized). ``step``: an int or an i64 value (a GPU
    kernel's grid-stride loop)."""
    lo = lo if isinstance(lo, ir.Value) else i64(lo)
    hi = hi if isinstance(hi, ir.Value) else i64(hi)
    step = step if isinstance(step, ir.Value) else i64(step)
    fn = b.function
    pre = b.block
    header = fn.append_basic_block(name + ".head")
    body = fn.append_basic_block(name + ".body")
    exit_ = fn.append_basic_block(name + ".exit")
    b.branch(header)
    b.position_at_end(header)
    phi = b.phi(I64, name=name)
    phi.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", phi, hi), body, exit_)
    b.position_at_end(body)
    yield phi
    nxt = b.add(phi, step, flags=NSW)
    phi.add_incoming(nxt, b.block)
    latch = b.branch(header)
    if interleave == SCALAR_LOOP:
        latch.set_metadata("llvm.loop", scalar_hint(b.module))
    elif interleave:
        latch.set_metadata("llvm.loop", loop_hints(b.module, interleave))
    b.position_at_end(exit_)


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, name: str = "") -> ir.Value:
    with b.goto_entry_block():
        return b.alloca(ty, name=name)


def memmove(ctx: ModuleContext, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes) -> None:
    f = ctx.declare("llvm.memmove.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
    n = nbytes if isinstance(nbytes, ir.Value) else i64(nbytes)
    b.call(f, [dst, src, n, ir.Constant(I1, 0)])


def clamp_i64(b: ir.IRBuilder, x: ir.Value, lo: int, hi: int) -> ir.Value:
    """min(max(x, lo), hi) on i64 (``hi >= lo``)."""
    x = b.select(b.icmp_signed("<", x, i64(lo)), i64(lo), x)
    return b.select(b.icmp_signed(">", x, i64(hi)), i64(hi), x)
