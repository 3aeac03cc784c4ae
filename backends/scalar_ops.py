"""Per-element semantics of the elementwise ops, on register values (see ``llvm_util``).

This is the one place where each op's exact meaning per element type is written down for the
LLVM backends, following StableHLO and XLA where the spec leaves room:

* integer ``divide``: x / 0 = -1 (all ones), INT_MIN / -1 = INT_MIN; ``remainder``: x % 0 = x,
  INT_MIN % -1 = 0; signed overflow wraps;
* shifts by an amount >= the bit width (as unsigned): ``shift_left`` and
  ``shift_right_logical`` give 0, ``shift_right_arithmetic`` fills with the sign bit;
* float ``maximum``/``minimum`` propagate NaN and order -0 < +0;
* float -> int ``convert`` saturates and maps NaN to 0; x -> pred is ``x != 0``;
* f16/bf16 and the 8-bit and narrower floats compute in f32 and round to the narrow type
  after every op;
* complex numbers (``{re, im}`` structs) follow ``complex_ops``; converting a complex number to
  another type takes its real part, converting to complex sets the imaginary part to 0.

Everything is branch-free so loops over these ops vectorize. Math functions (intrinsics, libm,
libdevice, hlo's own polynomials) are the target's choice: every one goes through
``ctx.math`` (``mathlib.MathPolicy``).
"""
from __future__ import annotations

import llvmlite.ir as ir

from hlo.ir.types import ElementType
from hlo.ir.types import f32 as F32_T

from . import complex_ops
from .llvm_util import (
    F32,
    F64,
    I1,
    I32,
    ModuleContext,
    bits_to_reg,
    reg_to_bits,
    reg_type,
    round_f32_to,
)


class UnsupportedOp(NotImplementedError):
    """An op or type combination the LLVM backends do not implement."""


def _narrow(et: ElementType) -> bool:
    return et.is_narrow_float


def _round(b, v, et: ElementType):
    return round_f32_to(b, v, et) if _narrow(et) else v


def _fconst(ty, v):
    return ir.Constant(ty, v)


# Unary float ops computed by a math function of the target's policy (``ctx.math``), rounded to
# f16/bf16 after.
_MATH_UNARY = {"exponential": "exp", "log": "log", "tanh": "tanh", "logistic": "logistic",
               "exponential_minus_one": "expm1", "log_plus_one": "log1p", "sqrt": "sqrt",
               "cbrt": "cbrt", "sine": "sin", "cosine": "cos", "tan": "tan"}


def unary(ctx: ModuleContext, b: ir.IRBuilder, name: str, et: ElementType, x: ir.Value) -> ir.Value:
    ty = x.type
    if et.is_complex:
        return _complex(complex_ops.unary, ctx, b, name, et, x)
    if et.is_float:
        m = ctx.math
        intr = lambda n: m.call(ctx, b, n, [x])
        if name == "abs":
            return intr("fabs")
        if name == "negate":
            return b.fneg(x)
        if name == "sign":
            one, zero = _fconst(ty, 1.0), _fconst(ty, 0.0)
            s = b.select(b.fcmp_ordered(">", x, zero), one,
                         b.select(b.fcmp_ordered("<", x, zero), _fconst(ty, -1.0), x))
            return s  # NaN and +-0 come back unchanged
        fn = _MATH_UNARY.get(name)
        if fn is not None:
            return _round(b, intr(fn), et)
        if name == "rsqrt":
            return _round(b, b.fdiv(_fconst(ty, 1.0), intr("sqrt")), et)
        if name == "floor":
            return intr("floor")
        if name == "ceil":
            return intr("ceil")
        if name == "round_nearest_even":
            return intr("roundeven")
        if name == "round_nearest_afz":
            return intr("round")
        if name == "is_finite":
            a = intr("fabs")
            return b.fcmp_ordered("!=", a, _fconst(ty, float("inf")))
    elif et.is_int:
        zero = ir.Constant(ty, 0)
        if name == "abs":
            return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
        if name == "negate":
            return b.sub(zero, x)
        if name == "sign":
            pos = b.zext(b.icmp_signed(">", x, zero), ty)
            neg = b.zext(b.icmp_signed("<", x, zero), ty)
            return b.sub(pos, neg)
        if name == "not":
            return b.xor(x, ir.Constant(ty, -1))
        if name == "popcnt":
            return ctx.math.call(ctx, b, "ctpop", [x])
        if name == "count_leading_zeros":
            return ctx.math.call(ctx, b, "ctlz", [x])
    elif et.is_pred:
        if name == "not":
            return b.xor(x, ir.Constant(I1, 1))
    raise UnsupportedOp(f"'{name}' on {et} is not implemented by the LLVM backend")


def binary(ctx: ModuleContext, b: ir.IRBuilder, name: str, et: ElementType, x: ir.Value,
           y: ir.Value) -> ir.Value:
    ty = x.type
    if et.is_complex:
        return _complex(complex_ops.binary, ctx, b, name, et, x, y)
    if et.is_pred:
        if name in ("add", "or", "maximum"):
            return b.or_(x, y)
        if name in ("multiply", "and", "minimum"):
            return b.and_(x, y)
        if name == "xor":
            return b.xor(x, y)
        raise UnsupportedOp(f"'{name}' on pred is not implemented by the LLVM backend")
    if et.is_float:
        if name == "add":
            return _round(b, b.fadd(x, y), et)
        if name == "subtract":
            return _round(b, b.fsub(x, y), et)
        if name == "multiply":
            return _round(b, b.fmul(x, y), et)
        if name == "divide":
            return _round(b, b.fdiv(x, y), et)
        if name == "remainder":
            return _round(b, ctx.math.call(ctx, b, "fmod", [x, y]), et)
        if name in ("maximum", "minimum"):
            return ctx.math.call(ctx, b, name, [x, y])
        if name == "power":
            return _round(b, ctx.math.call(ctx, b, "pow", [x, y]), et)
        if name == "atan2":
            return _round(b, ctx.math.call(ctx, b, "atan2", [x, y]), et)
        raise UnsupportedOp(f"'{name}' on {et} is not implemented by the LLVM backend")
    # Integers.
    signed = et.is_signed
    bits = et.bits
    zero, one, ones = ir.Constant(ty, 0), ir.Constant(ty, 1), ir.Constant(ty, -1)
    if name == "add":
        return b.add(x, y)
    if name == "subtract":
        return b.sub(x, y)
    if name == "multiply":
        return b.mul(x, y)
    if name in ("and", "or", "xor"):
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[name](x, y)
    if name in ("maximum", "minimum"):
        op = ">" if name == "maximum" else "<"
        c = b.icmp_signed(op, x, y) if signed else b.icmp_unsigned(op, x, y)
        return b.select(c, x, y)
    if name in ("divide", "remainder"):
        yzero = b.icmp_unsigned("==", y, zero)
        if signed:
            int_min = ir.Constant(ty, -(1 << (bits - 1)))
            ovf = b.and_(b.icmp_signed("==", x, int_min), b.icmp_signed("==", y, ones))
            bad = b.or_(yzero, ovf)
            safe_y = b.select(bad, one, y)
            if name == "divide":
                q = b.sdiv(x, safe_y)
                return b.select(yzero, ones, b.select(ovf, int_min, q))
            r = b.srem(x, safe_y)
            return b.select(yzero, x, b.select(ovf, zero, r))
        safe_y = b.select(yzero, one, y)
        if name == "divide":
            return b.select(yzero, ones, b.udiv(x, safe_y))
        return b.select(yzero, x, b.urem(x, safe_y))
    if name in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
        big = b.icmp_unsigned(">=", y, ir.Constant(ty, bits))
        if name == "shift_right_arithmetic":
            amt = b.select(big, ir.Constant(ty, bits - 1), y)
            return b.ashr(x, amt)
        # a funnel shift (amount taken modulo the width) rather than shl/lshr of a selected
        # amount: NVPTX folds select(y >= bits, 0, shl(x, y)) into a shift by the amount's low
        # 32 bits (PTX clamps only those), wrong for amounts of 2^32 and up
        if name == "shift_left":
            r = b.call(ctx.intrinsic("fshl", ty, 3), [x, zero, y])
        else:
            r = b.call(ctx.intrinsic("fshr", ty, 3), [zero, x, y])
        return b.select(big, zero, r)
    if name == "power":
        return _int_power(b, x, y, ty, signed, bits)
    raise UnsupportedOp(f"'{name}' on {et} is not implemented by the LLVM backend")


def _complex(fn, ctx, b, name, et, *args):
    try:
        return fn(ctx, b, name, et, *args)
    except complex_ops.UnsupportedComplexOp as e:
        raise UnsupportedOp(str(e)) from None


def _int_power(b, x, y, ty, signed, bits):
    """x**y by squaring, unrolled over the exponent's bits (branch-free). For negative y (signed
    types): 1 if x == 1, +-1 if x == -1 (by y's parity), else 0, as XLA defines it."""
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    acc, base = one, x
    for i in range(bits):
        bit = b.icmp_unsigned("!=", b.and_(b.lshr(y, ir.Constant(ty, i)), one), zero)
        acc = b.select(bit, b.mul(acc, base), acc)
        base = b.mul(base, base)
    if not signed:
        return acc
    neg = b.icmp_signed("<", y, zero)
    odd = b.icmp_unsigned("!=", b.and_(y, one), zero)
    neg_res = b.select(b.icmp_signed("==", x, one), one,
                       b.select(b.icmp_signed("==", x, ir.Constant(ty, -1)),
                                b.select(odd, ir.Constant(ty, -1), one), zero))
    return b.select(neg, neg_res, acc)


def compare(ctx: ModuleContext, b: ir.IRBuilder, direction: str, compare_type, et: ElementType,
            x: ir.Value, y: ir.Value) -> ir.Value:
    op = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}[direction]
    if et.is_complex:
        return complex_ops.compare(ctx, b, direction, x, y)
    if et.is_float:
        if compare_type == "TOTALORDER":
            xi, yi = _total_order_key(b, x, et), _total_order_key(b, y, et)
            return b.icmp_signed(op, xi, yi)
        if op == "!=":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(op, x, y)
    if et.is_pred or et.is_unsigned or compare_type == "UNSIGNED":
        return b.icmp_unsigned(op, x, y)
    return b.icmp_signed(op, x, y)


def _total_order_key(b, x, et):
    """Map float bits to a signed integer whose order is IEEE totalOrder."""
    bits = reg_to_bits(b, x, et)
    ty = bits.type
    w = ty.width
    sign_fill = b.ashr(bits, ir.Constant(ty, w - 1))
    return b.xor(bits, b.lshr(sign_fill, ir.Constant(ty, 1)))


# ------------------------------------------------------------------------------------------
# Conversions
# ------------------------------------------------------------------------------------------

def _f64_to_f32_round_odd(ctx, b, x):
    """f64 -> f32 with round-to-odd, so a second rounding to f16/bf16 is correct."""
    r = b.fptrunc(x, F32)
    back = b.fpext(r, F64)
    inexact = b.fcmp_ordered("!=", back, x)
    # If rounding went away from zero, step one ulp back toward zero.
    fabs = lambda v: ctx.math.call(ctx, b, "fabs", [v])
    away = b.fcmp_ordered(">", fabs(back), fabs(x))
    rb = b.bitcast(r, I32)
    rb = b.select(b.and_(inexact, away), b.sub(rb, ir.Constant(I32, 1)), rb)
    rb = b.select(inexact, b.or_(rb, ir.Constant(I32, 1)), rb)
    return b.bitcast(rb, F32)


def convert(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value, src: ElementType,
            dst: ElementType) -> ir.Value:
    if src == dst:
        return x
    if dst.is_complex:  # the real part converts; the imaginary part is 0 (or converts too)
        part = dst.component
        if src.is_complex:
            re, im = complex_ops.parts(b, x)
            return complex_ops.make(b, reg_type(dst), convert(ctx, b, re, src.component, part),
                                    convert(ctx, b, im, src.component, part))
        return complex_ops.make(b, reg_type(dst), convert(ctx, b, x, src, part),
                                ir.Constant(reg_type(part), 0.0))
    if src.is_complex:  # the imaginary part is dropped
        return convert(ctx, b, b.extract_value(x, 0), src.component, dst)
    dty = reg_type(dst)
    if dst.is_pred:
        if src.is_float:
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if src.is_pred:
        if dst.is_float:
            return b.uitofp(x, dty)
        return b.zext(x, dty)
    if src.is_int and dst.is_int:
        if dst.bits > src.bits:
            return b.sext(x, dty) if src.is_signed else b.zext(x, dty)
        if dst.bits < src.bits:
            return b.trunc(x, dty)
        return x
    if src.is_int and dst.is_float:
        conv = b.sitofp if src.is_signed else b.uitofp
        if _narrow(dst):
            # via f64 (exact for up to 53 bits) and round-to-odd, to round once.
            return round_f32_to(b, _f64_to_f32_round_odd(ctx, b, conv(x, F64)), dst)
        return conv(x, dty)
    if src.is_float and dst.is_int:
        return ctx.math.call(ctx, b, "fptosi_sat" if dst.is_signed else "fptoui_sat", [x], ret=dty)
    # float -> float
    if x.type == F32 and dty == F32:  # among f32/f16/bf16
        return _round(b, x, dst)
    if x.type == F32 and dty == F64:
        return b.fpext(x, F64)
    if x.type == F64 and dty == F32:
        if _narrow(dst):
            return round_f32_to(b, _f64_to_f32_round_odd(ctx, b, x), dst)
        return b.fptrunc(x, F32)
    raise UnsupportedOp(f"convert {src} -> {dst} is not implemented by the LLVM backend")


# ------------------------------------------------------------------------------------------
# reduce_precision (XLA's bit algorithm on the storage bits)
# ------------------------------------------------------------------------------------------

_FLOAT_LAYOUT = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def reduce_precision(ctx, b, x, et: ElementType, exponent_bits: int, mantissa_bits: int):
    if et.name not in _FLOAT_LAYOUT:  # an 8-bit or narrower float: in its f32 register, rounded back
        return _round(b, reduce_precision(ctx, b, x, F32_T, exponent_bits, mantissa_bits), et)
    src_exp, src_mant = _FLOAT_LAYOUT[et.name]
    bits = reg_to_bits(b, x, et)
    ty = bits.type
    nbits = ty.width
    C = lambda v: ir.Constant(ty, v & ((1 << nbits) - 1))
    xb = bits
    if mantissa_bits < src_mant:
        shift = src_mant - mantissa_bits
        last = 1 << shift
        base_bias = (last >> 1) - 1
        x_last = b.lshr(b.and_(xb, C(last)), C(shift))
        bias = b.add(x_last, C(base_bias))
        xb = b.and_(b.add(xb, bias), C(~(last - 1)))
    if exponent_bits < src_exp:
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_exp) - 1) << src_mant
        bias = (1 << (src_exp - 1)) - 1
        rbias = (1 << (exponent_bits - 1)) - 1
        rmax, rmin = bias + rbias, bias - rbias
        xe = b.and_(xb, C(exp_mask))
        over = b.icmp_unsigned(">", xe, C(rmax << src_mant))
        under = b.icmp_unsigned("<=", xe, C(rmin << src_mant))
        szero = b.and_(xb, C(sign_mask))
        sinf = b.or_(szero, C(exp_mask))
        xb = b.select(over, sinf, b.select(under, szero, xb))
    res = bits_to_reg(b, xb, et)
    is_nan = b.fcmp_unordered("uno", x, x)
    if mantissa_bits > 0:
        return b.select(is_nan, x, res)
    # No mantissa bits left: a NaN has no representation; XLA turns it into infinity.
    inf = ctx.math.call(ctx, b, "copysign", [ir.Constant(x.type, float("inf")), x])
    return b.select(is_nan, inf, res)
