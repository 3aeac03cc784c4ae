"""The 8-bit and narrower floats (f8e4m3fn, f8e5m2, ..., f4e2m1fn) in LLVM code.

Like f16 and bf16 they are computed in f32 registers that always hold a value of the narrow
type exactly; memory holds their one-byte code (ml_dtypes's layout). Both directions are
table driven, with tables made from ml_dtypes itself at compile time, so one routine serves
every format (IEEE-like with infinities, ``fn`` without, ``fnuz`` with NaN at 0x80 and no -0,
the saturating f4/f6 formats, the exponent-only f8e8m0fnu):

* decode (``code -> f32``): a load from a 2^bits-entry table of the values;
* encode (``f32 -> code``): round to nearest, ties to even (f8e8m0fnu: ties up, as ml_dtypes), by a branch-free binary search over
  the midpoints between consecutive non-negative values (code order is value order in every
  format), then the sign bit; past the largest finite value the format's overflow code
  (infinity, NaN, or the largest value for the saturating formats), and NaN's code for NaN,
  as ml_dtypes converts.

One exception: f8e8m0fnu (a scale format) rounds f32 subnormals and values past 2^127 by the
midpoint rule here, where ml_dtypes has rules of its own at those two ends.

Target-independent: only integer and float compares, selects and loads from internal
constant globals.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Tuple

import llvmlite.ir as ir
import numpy as np

from hlo.ir.types import ElementType

_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()


class Tables(NamedTuple):
    values: Tuple[float, ...]  # f32 value of every code (2^bits entries)
    thresholds: Tuple[float, ...]  # thresholds[j - 1]: midpoint between codes j - 1 and j
    steps: int  # binary search steps: len(thresholds) == 2^steps - 1 (padded with NaN)
    sign_bit: int  # the code's sign bit (0: unsigned format)
    neg_zero: bool  # has -0
    nan_pos: int  # codes ml_dtypes gives +NaN / -NaN
    nan_neg: int
    zero_is_nan: bool  # f8e8m0fnu: no zero, 0 converts to NaN
    ties_up: bool  # a midpoint rounds to the larger value (f8e8m0fnu), not to the even code


@lru_cache(maxsize=None)
def tables(et: ElementType) -> Tables:
    dt = et.np_dtype
    n = 1 << et.bits
    codes = np.arange(n, dtype=np.uint8)
    vals = codes.view(dt).astype(np.float32)
    finite_nonneg = [c for c in range(n) if np.isfinite(vals[c]) and not np.signbit(vals[c])]
    # code order is value order for the non-negative codes 0..K-1
    k = len(finite_nonneg)
    assert finite_nonneg == list(range(k)), et
    assert all(vals[i] < vals[i + 1] for i in range(k - 1)), et
    mids = [(float(vals[j - 1]) + float(vals[j])) / 2 for j in range(1, k)]
    big = np.array([np.float32(3e38)], np.float32).astype(dt).astype(np.float32)[0]
    if not np.isfinite(big):  # the overflow code K: infinity or NaN, past max + half an ulp
        top, prev = float(vals[k - 1]), float(vals[k - 2])
        mids.append(top + (top - prev) / 2)
    for m in mids:
        assert float(np.float32(m)) == m, (et, m)
    at_mid = np.array(mids[:k - 1], np.float32).astype(dt).view(np.uint8)
    ties_up = bool((at_mid == np.arange(1, k)).all())
    steps = max(1, int(np.ceil(np.log2(len(mids) + 1))))
    padded = mids + [float("nan")] * ((1 << steps) - 1 - len(mids))  # never compares true
    nan = np.array([0x7FC00000, 0xFFC00000], np.uint32).view(np.float32)  # +NaN, -NaN
    nan_codes = nan.astype(dt).view(np.uint8)
    signed = any(np.signbit(vals[c]) for c in range(n) if not np.isnan(vals[c]))
    neg_zero = bool(np.signbit(np.array([-0.0], np.float32).astype(dt).astype(np.float32)[0]))
    zero_is_nan = bool(np.isnan(np.array([0.0], np.float32).astype(dt).astype(np.float32)[0]))
    return Tables(tuple(float(v) for v in vals), tuple(padded), steps,
                  (n >> 1) if signed else 0, neg_zero, int(nan_codes[0]), int(nan_codes[1]),
                  zero_is_nan, ties_up)


def _table_global(module: ir.Module, name: str, values) -> ir.GlobalVariable:
    g = module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(_F32, len(values))
        g = ir.GlobalVariable(module, ty, name=name)
        g.initializer = ir.Constant(ty, [ir.Constant(_F32, v) for v in values])
        g.global_constant = True
        g.linkage = "internal"
        g.align = 16
    return g


def _load(b: ir.IRBuilder, g: ir.GlobalVariable, idx: ir.Value) -> ir.Value:
    p = b.gep(g, [ir.Constant(_I64, 0), idx], inbounds=True)
    return b.load(p, typ=_F32)


def decode(b: ir.IRBuilder, code: ir.Value, et: ElementType) -> ir.Value:
    """The f32 value of a code (an i8)."""
    t = tables(et)
    g = _table_global(b.module, f"hlo.{et.name}.values", t.values)
    return _load(b, g, b.zext(code, _I64))


def encode(b: ir.IRBuilder, x: ir.Value, et: ElementType) -> ir.Value:
    """The code (i8) of an f32 value rounded to ``et``."""
    t = tables(et)
    g = _table_global(b.module, f"hlo.{et.name}.midpoints", (0.0,) + t.thresholds)
    bits = b.bitcast(x, _I32)
    neg = b.icmp_signed("<", bits, ir.Constant(_I32, 0))
    a = b.bitcast(b.and_(bits, ir.Constant(_I32, 0x7FFFFFFF)), _F32)
    pos = ir.Constant(_I64, 0)
    for s in range(t.steps - 1, -1, -1):
        cand = b.add(pos, ir.Constant(_I64, 1 << s))
        m = _load(b, g, cand)
        even = ir.Constant(ir.IntType(1), 1) if t.ties_up else \
            b.icmp_unsigned("==", b.and_(cand, ir.Constant(_I64, 1)), ir.Constant(_I64, 0))
        take = b.or_(b.fcmp_ordered("<", m, a), b.and_(b.fcmp_ordered("==", m, a), even))
        pos = b.select(take, cand, pos)
    mag = b.trunc(pos, _I8)
    if t.sign_bit:
        signed = b.or_(mag, ir.Constant(_I8, t.sign_bit))
        if not t.neg_zero:  # no -0: a negative value rounding to zero is +0
            signed = b.select(b.icmp_unsigned("==", mag, ir.Constant(_I8, 0)), mag, signed)
        code = b.select(neg, signed, mag)
    else:  # unsigned format: negative values have no code but NaN
        is_zero = b.fcmp_ordered("==", a, ir.Constant(_F32, 0.0))
        code = b.select(b.and_(neg, b.not_(is_zero)), ir.Constant(_I8, t.nan_pos), mag)
    if t.zero_is_nan:
        code = b.select(b.fcmp_ordered("==", a, ir.Constant(_F32, 0.0)), ir.Constant(_I8, t.nan_pos), code)
    nan = b.fcmp_unordered("uno", x, x)
    nan_code = b.select(neg, ir.Constant(_I8, t.nan_neg), ir.Constant(_I8, t.nan_pos))
    return b.select(nan, nan_code, code)


def round_f32(b: ir.IRBuilder, x: ir.Value, et: ElementType) -> ir.Value:
    """An f32 register rounded to ``et``, still an f32 register."""
    return decode(b, encode(b, x, et), et)
