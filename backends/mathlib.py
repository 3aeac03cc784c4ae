"""Vectorizable math functions emitted as straight-line LLVM IR.

LLVM's ``llvm.exp``/``llvm.log`` on f32 lower to scalar libm calls, which stops the loop
vectorizer. These versions are branch-free (selects only), so a loop that uses them vectorizes
at the host's full width. exp uses Cody-Waite range reduction and a degree-6 polynomial (<= 1.1
ulp), log Cephes' single-precision algorithm (<= 2 ulp); tanh an odd polynomial near 0 and the
exp above beyond (<= 2.2 ulp); logistic uses exp (<= 4 ulp,
accurate down to subnormal results). ``tests/backends/test_cpu_mathlib.py`` checks them against
numpy in float64.

Which function a target computes how is its ``MathPolicy`` (below; ``ModuleContext.math``):
``CpuMath`` uses these polynomials for f32 and LLVM intrinsics / libm for f64 and the other
functions; ``LibdeviceMath`` (NVPTX) calls libdevice for exp and tanh too (cheaper and, for tanh,
more accurate there: see its docstring) and keeps the log and logistic polynomials. f16/bf16 are
computed with the f32 versions and rounded by the caller.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .llvm_util import F32, F64, I1, I32, ModuleContext


def _c(v: float) -> ir.Constant:
    return ir.Constant(F32, v)


def _i(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _fma(ctx: ModuleContext, b: ir.IRBuilder, x, y, z) -> ir.Value:
    """x * y + z, fused where the target can (``llvm.fmuladd``)."""
    return ctx.math.call(ctx, b, "fmuladd", [x, y, z])


def _poly(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value, coeffs) -> ir.Value:
    """Horner evaluation of sum(coeffs[k] * x**(n-1-k)) with fused multiply-adds."""
    acc = _c(coeffs[0])
    for c in coeffs[1:]:
        acc = _fma(ctx, b, acc, x, _c(c))
    return acc


def _select_nan(b, x, y):
    """x if x is NaN, else y."""
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def _clamp(b, x, lo: float, hi: float):
    """min(max(x, lo), hi) that keeps a NaN (compare-and-select: one vminps/vmaxps each on x86,
    where llvm.minnum/maxnum would turn a NaN into the bound and need a fix-up select)."""
    x = b.select(b.fcmp_ordered(">", x, _c(hi)), _c(hi), x)
    return b.select(b.fcmp_ordered("<", x, _c(lo)), _c(lo), x)


_ROUND_MAGIC = 12582912.0  # 1.5 * 2**23 (bits 0x4B400000): adding it rounds to an integer kept
_EXP_MAGIC = _ROUND_MAGIC + 254.0  # in the low bits; exp's also carries twice the f32 exponent bias
# exp(r) on [-ln2/2, ln2/2] as 1 + r*(1 + r*(c1 + ...)): a least-squares-minimax fit (relative
# error 2e-9 in exact arithmetic; <= 1.1 ulp with the f32 roundings, checked by the tests).
_EXP_POLY = [1.3843606e-3, 8.3741965e-3, 4.1668005e-2, 1.666643e-1, 4.9999994e-1, 1.0, 1.0]


def exp_f32(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp(x) = 2**n * exp(r), n = round(x / ln2), r = x - n*ln2 (Cody-Waite, two parts).
    The rounding adds a magic constant, so n's integer is read from the sum's low bits (no
    round/convert instructions); 2**n is applied as two factors 2**(n//2) * 2**(n - n//2), so
    results in the subnormal range (down to x = -104) and up to the overflow point come out
    right. NaN propagates through the clamps and the arithmetic."""
    xc = _clamp(b, x, -104.0, 88.8)
    # The magic constant carries both exponent biases: t's low 9 bits hold v = n + 254, in
    # [104, 383] for the clamped range (the magic's own low 9 bits are zero).
    t = _fma(ctx, b, xc, _c(1.44269504088896341), _c(_EXP_MAGIC))
    n = b.fsub(t, _c(_EXP_MAGIC))
    r = _fma(ctx, b, n, _c(-0.693359375), xc)
    r = _fma(ctx, b, n, _c(2.12194440e-4), r)
    p = _poly(ctx, b, r, _EXP_POLY)
    # 2**n as s1 * s2: s1's biased exponent is a = v >> 1 = n//2 + 127, read straight from t's
    # bits (shift v's bits 1..8 into the exponent field, mask off the rest); s2's is v - a,
    # formed as (v << 23) - (a << 23) modulo 2**32 (bits above v's drop out of the shift).
    # 4 integer ops where adding the biases separately took 7; the result is the same.
    tb = b.bitcast(t, I32)
    s1 = b.and_(b.shl(tb, _i(22)), _i(0x7F800000))
    s2 = b.sub(b.shl(tb, _i(23)), s1)
    return b.fmul(b.fmul(p, b.bitcast(s1, F32)), b.bitcast(s2, F32))


def log_f32(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # Scale subnormals up by 2**23 so the exponent field is meaningful.
    tiny = b.fcmp_ordered("<", x, _c(1.17549435e-38))
    xs = b.select(tiny, b.fmul(x, _c(8388608.0)), x)
    eadj = b.select(tiny, _c(-23.0), _c(0.0))
    bits = b.bitcast(xs, I32)
    e = b.sub(b.and_(b.lshr(bits, _i(23)), _i(0xFF)), _i(126))
    m = b.bitcast(b.or_(b.and_(bits, _i(0x807FFFFF)), _i(0x3F000000)), F32)  # [0.5, 1)
    small = b.fcmp_ordered("<", m, _c(0.707106781186547524))
    e = b.select(small, b.sub(e, _i(1)), e)
    m = b.select(small, b.fsub(b.fadd(m, m), _c(1.0)), b.fsub(m, _c(1.0)))
    ef = b.fadd(b.sitofp(e, F32), eadj)
    z = b.fmul(m, m)
    y = _poly(ctx, b, m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                          3.3333331174e-1])
    y = b.fmul(b.fmul(y, m), z)
    y = _fma(ctx, b, ef, _c(-2.12194440e-4), y)
    y = _fma(ctx, b, z, _c(-0.5), y)
    res = b.fadd(m, y)
    res = _fma(ctx, b, ef, _c(0.693359375), res)
    # Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, log(NaN) = NaN.
    res = b.select(b.fcmp_ordered("==", x, _c(float("inf"))), x, res)
    res = b.select(b.fcmp_ordered("==", x, _c(0.0)), _c(float("-inf")), res)
    res = b.select(b.fcmp_ordered("<", x, _c(0.0)), _c(float("nan")), res)
    return _select_nan(b, x, res)


def _div_estimate(ctx: ModuleContext, b: ir.IRBuilder, p: ir.Value, q: ir.Value, fn: str) -> ir.Value:
    """p / q inside our own approximation ``fn``, whose divisor is finite, normal and bounded
    away from zero: the target's ``MathPolicy.quotient`` (an estimate of about 1 ulp where it
    measured faster, else the correctly rounded division). Only for internal divisions: a
    user's ``divide`` stays correctly rounded."""
    return ctx.math.quotient(ctx, b, p, q, fn)


# tanh(x) = x + x^3 * P(x^2) on |x| < 0.625: a relative-error minimax fit (iteratively
# reweighted least squares in float64; 1.1e-8 relative in exact arithmetic with these f32
# coefficients, well under an ulp).
_TANH_SPLIT = 0.625
_TANH_POLY = [-5.7374295e-3, 2.0670455e-2, -5.3750277e-2, 1.3331585e-1, -3.3333287e-1]


def tanh_f32(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh(|x|) as |x| + |x|^3 * P(x^2) below 0.625 and 1 - 2/(exp(2|x|) + 1) beyond (with the
    exp above: no cancellation there, as tanh >= 0.55), both computed and one selected, so a
    loop still vectorizes; x's sign is copied onto the result (-0 stays -0). Measured over
    60M f32 in [-10, 10] (all of [2^-14, 10] stepped by 3 bit patterns): 1.77 ulp from float64
    on AVX-512 (2.13 on AVX2, whose reciprocal estimate is coarser; 1.35 with the correctly
    rounded division, which cost 1.5x where the estimate costs 1.25x the old time), at most 2
    ulp from the correctly rounded f32. Eigen's rational approximation x * P(x^2)/Q(x^2), used
    before, had 4.95 (5 from the rounded value, where the StableHLO testdata allows 3): its
    P/Q is 2 ulp below 1 at x = 0, and it was clamped at |x| = 7.9, below where tanh rounds
    to +-1 (9.01). The polynomial keeps tiny and subnormal x exact (x^3 underflows); |x| = inf
    comes out +-1 and a NaN flows through exp to the result (the select's compare is false)."""
    ax = ctx.math.call(ctx, b, "fabs", [x])
    x2 = b.fmul(ax, ax)
    small = _fma(ctx, b, b.fmul(ax, x2), _poly(ctx, b, x2, _TANH_POLY), ax)
    # 2|x| <= 64 (tanh is 1 in f32 from 9.01): keeps e + 1 within the divide estimate's range
    a2 = b.fadd(ax, ax)
    e = ctx.math.call(ctx, b, "exp", [b.select(b.fcmp_ordered(">", a2, _c(64.0)), _c(64.0), a2)])
    big = b.fsub(_c(1.0), _div_estimate(ctx, b, _c(2.0), b.fadd(e, _c(1.0)), "tanh"))
    t = b.select(b.fcmp_ordered("<", ax, _c(_TANH_SPLIT)), small, big)
    return ctx.math.call(ctx, b, "copysign", [t, x])


def logistic_f32(ctx: ModuleContext, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # e = exp(-|x|) never overflows: 1/(1+e) for x >= 0, e/(1+e) for x < 0 (keeps subnormal
    # results accurate where 1/(1+exp(-x)) would give 0).
    e = ctx.math.call(ctx, b, "exp", [b.fneg(ctx.math.call(ctx, b, "fabs", [x]))])
    r = _div_estimate(ctx, b, _c(1.0), b.fadd(_c(1.0), e), "logistic")
    return b.select(b.fcmp_ordered(">=", x, _c(0.0)), r, b.fmul(e, r))


# ------------------------------------------------------------------------------------------
# Math policies: how a target computes each math function
# ------------------------------------------------------------------------------------------

# The math functions the shared emitter asks for (``MathPolicy.call``). Float functions take and
# return values of one float type (f32 or f64, scalar or vector); ``ctpop``/``ctlz`` take an
# integer; ``fptosi_sat``/``fptoui_sat`` convert a float to the integer type ``ret``.
FLOAT_FUNCTIONS = ("exp", "log", "tanh", "logistic", "expm1", "log1p", "cbrt", "tan", "sin", "cos",
                   "pow", "atan2", "sqrt", "fabs", "floor", "ceil", "roundeven", "round",
                   "maximum", "minimum", "copysign", "fmuladd", "fmod", "hypot")
INT_FUNCTIONS = ("ctpop", "ctlz", "fptosi_sat", "fptoui_sat")
_ARITY = {"pow": 2, "atan2": 2, "hypot": 2, "maximum": 2, "minimum": 2, "copysign": 2, "fmuladd": 3,
          "fmod": 2}

# How one function is computed for one float width: an LLVM intrinsic (``llvm.<name>``), a C
# math library function (``name`` for double, ``name + "f"`` for float), NVIDIA's libdevice
# (``__nv_<name>``, ``f`` suffix for float), or hlo's own code (below).
INTRINSIC, LIBM, LIBDEVICE, OWN = "intrinsic", "libm", "libdevice", "own"


def _own_logistic_f64(ctx, b, x):
    one = ir.Constant(F64, 1.0)
    return b.fdiv(one, b.fadd(one, ctx.math.call(ctx, b, "exp", [b.fneg(x)])))


_OWN = {("exp", 32): exp_f32, ("log", 32): log_f32, ("tanh", 32): tanh_f32,
        ("logistic", 32): logistic_f32, ("logistic", 64): _own_logistic_f64}


def _width(ty: ir.Type) -> int:
    t = ty.element if isinstance(ty, ir.VectorType) else ty
    return 64 if isinstance(t, ir.DoubleType) else 32


class MathPolicy:
    """How a target computes each math function: one rule per (function, float width), looked
    up when the op is emitted (a dictionary lookup at compile time; the IR holds only the
    rule's code). ``call(ctx, b, fn, args)`` is the one entry the shared emitter uses
    (``ctx.math``); a target states its rules in ``RULES`` ({fn: (f32 rule, f64 rule)}) and
    inherits the rest (LLVM intrinsics)."""

    name = "llvm"
    RULES: dict = {}
    # own approximations whose internal division ``quotient`` estimates (the others divide
    # correctly rounded)
    ESTIMATED_DIVISIONS = frozenset()

    def quotient(self, ctx, b: ir.IRBuilder, p: ir.Value, q: ir.Value, fn: str) -> ir.Value:
        """p / q inside the own approximation ``fn`` (see ``_div_estimate``). Here: ``arcp
        ninf`` lets the x86 backend use a reciprocal estimate and one Newton step in vector
        loops (about 1 ulp)."""
        if fn not in self.ESTIMATED_DIVISIONS:
            return b.fdiv(p, q)
        return b.fdiv(p, q, flags=("arcp", "ninf"))

    def rule(self, fn: str, width: int) -> str:
        r = self.RULES.get(fn)
        return r[0 if width == 32 else 1] if r is not None else INTRINSIC

    def call(self, ctx, b: ir.IRBuilder, fn: str, args, ret: ir.Type = None, fastmath=()) -> ir.Value:
        args = list(args)
        ty = args[0].type
        if fn in INT_FUNCTIONS:
            return self._int(ctx, b, fn, args, ret)
        how = self.rule(fn, _width(ty))
        if how == OWN:
            return _OWN[fn, _width(ty)](ctx, b, *args)
        if how == INTRINSIC:
            if fn == "fmod":  # LLVM's frem instruction (C's fmod)
                return b.frem(*args)
            f = ctx.intrinsic(fn, ty, _ARITY.get(fn, 1))
            return b.call(f, args, fastmath=fastmath) if fastmath else b.call(f, args)
        if how == LIBM:
            cname = fn if _width(ty) == 64 else fn + "f"
        elif how == LIBDEVICE:
            cname = "__nv_" + fn + ("" if _width(ty) == 64 else "f")
        else:
            raise AssertionError(f"no rule {how!r} for {fn}")
        return b.call(ctx.declare(cname, ty, [ty] * len(args)), args)

    @staticmethod
    def _int(ctx, b, fn, args, ret):
        x = args[0]
        if fn == "ctpop":
            return b.call(ctx.intrinsic("ctpop", x.type), [x])
        if fn == "ctlz":
            return b.call(ctx.intrinsic("ctlz", x.type, 1, extra=[I1]), [x, ir.Constant(I1, 0)])
        name = "fptosi.sat" if fn == "fptosi_sat" else "fptoui.sat"
        f = ctx.declare(f"llvm.{name}.i{ret.width}.{'f64' if x.type == F64 else 'f32'}", ret, [x.type])
        return b.call(f, [x])


class CpuMath(MathPolicy):
    """The host CPU: branch-free f32 polynomials for exp/log/tanh/logistic (they vectorize,
    where llvm.exp.f32 becomes a scalar libm call), LLVM intrinsics where x86 has instructions
    or LLVM's vector library does, the C math library for the rest."""

    name = "cpu"
    # measured on f32[4096,4096]: logistic 6.7 -> 6.0 ms with the estimate; tanh's divide
    # (2 / (exp(2|x|) + 1)) 1.5x -> 1.25x the time of the rational approximation it replaced
    ESTIMATED_DIVISIONS = frozenset({"logistic", "tanh"})
    RULES = {"exp": (OWN, INTRINSIC), "log": (OWN, INTRINSIC), "tanh": (OWN, LIBM),
             "logistic": (OWN, OWN), "expm1": (LIBM, LIBM), "log1p": (LIBM, LIBM),
             "cbrt": (LIBM, LIBM), "tan": (LIBM, LIBM), "atan2": (LIBM, LIBM),
             "hypot": (LIBM, LIBM)}


class LibdeviceMath(MathPolicy):
    """NVIDIA GPUs (NVPTX): no libm and no lowering for ``llvm.sin/cos/pow.f32`` or
    ``llvm.exp/log.f64``, so every transcendental hlo has no polynomial of its own calls
    libdevice (``__nv_sinf``, ``__nv_exp``, ...; ``backends/nvptx.py`` links it in). f32 exp
    and tanh call libdevice as well: ``__nv_expf`` (an FMA range reduction and ``ex2.approx``;
    CUDA documents 2 ulp, measured 1.90 on 9.4M points over [-80, 88], the polynomial's 1.04)
    and ``__nv_tanhf`` (``ex2.approx`` and ``rcp.approx`` for large |x|, a polynomial near 0;
    CUDA documents 2 ulp, measured 1.81 where the rational polynomial had 4.66) cost fewer
    instructions than the shared polynomials, whose FMA chains made elementwise kernels with
    several transcendentals issue-bound: the bench's tinyops (sigmoid, tanh and two divisions
    per element, f32[16384,16384]) on an H200 0.707 -> 0.611 ms, the copy of its bytes taking
    0.517. f32 log (Cephes, <= 2 ulp) and logistic (the exp above, an estimated division) stay
    hlo's. ``tanh.approx.f32`` (one instruction, but 2^-11 relative error) is not used."""

    name = "libdevice"
    # the correctly rounded division is a reciprocal, two refinements and a range check with a
    # slow-path branch (about 12 instructions); the estimate is 4
    ESTIMATED_DIVISIONS = frozenset({"logistic"})

    def quotient(self, ctx, b: ir.IRBuilder, p: ir.Value, q: ir.Value, fn: str) -> ir.Value:
        """``rcp.approx.ftz`` of q (1 ulp; q is normal here) and one Newton step on the
        quotient: p*r + r*(p - q*(p*r)), within about an ulp."""
        if fn not in self.ESTIMATED_DIVISIONS or q.type != F32:
            return super().quotient(ctx, b, p, q, fn)
        r = b.call(ctx.declare("llvm.nvvm.rcp.approx.ftz.f", F32, [F32]), [q])
        y = b.fmul(p, r)
        e = _fma(ctx, b, b.fneg(q), y, p)
        return _fma(ctx, b, e, r, y)
    RULES = {"exp": (LIBDEVICE, LIBDEVICE), "log": (OWN, LIBDEVICE), "tanh": (LIBDEVICE, LIBDEVICE),
             "logistic": (OWN, OWN), "expm1": (LIBDEVICE, LIBDEVICE),
             "log1p": (LIBDEVICE, LIBDEVICE), "cbrt": (LIBDEVICE, LIBDEVICE),
             "tan": (LIBDEVICE, LIBDEVICE), "atan2": (LIBDEVICE, LIBDEVICE),
             "sin": (LIBDEVICE, LIBDEVICE), "cos": (LIBDEVICE, LIBDEVICE),
             "pow": (LIBDEVICE, LIBDEVICE), "hypot": (LIBDEVICE, LIBDEVICE),
             # NVPTX lowers frem to x - trunc(x / y) * y, wrong when x / y is large
             "fmod": (LIBDEVICE, LIBDEVICE)}


CPU_MATH = CpuMath()
LIBDEVICE_MATH = LibdeviceMath()
