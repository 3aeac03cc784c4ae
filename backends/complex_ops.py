"""Per-element semantics of the elementwise ops on complex numbers, for the LLVM backends.

A complex value is an LLVM struct ``{T, T}`` (real, imaginary; ``T`` is float for c64, double
for c128) in registers and in memory, where it is interleaved like numpy's complex arrays. Every
function here builds on the part type's operations and the target's math policy (``ctx.math``:
exp, log, sin, cos, tan, atan2, hypot, expm1, log1p, sqrt, cbrt), so it carries over to every
target. The formulas are the usual ones (C99 Annex G, XLA's ``math.cc``), written branch-free:

* ``divide``: Smith's algorithm (no overflow of ``c*c + d*d``); a zero divisor gives
  ``(copysign(inf, c) * a, copysign(inf, c) * b)`` as C99 Annex G (and numpy);
* ``abs``: ``hypot``; ``sign``: ``z / |z|``, 0 for 0;
* ``sqrt``: ``t = sqrt((|a| + |z|) / 2)``, then ``(t, b / 2t)`` or ``(|b| / 2t, copysign(t, b))``;
* ``tanh``: Kahan's form (``tan(b)``, ``sinh(a)``), ``(+-1, 0)`` past |a| = 22;
* ``exp``/``expm1``/``log``/``log1p``/``sin``/``cos``/``tan``/``logistic``/``cbrt``/``power``/
  ``atan2`` from their definitions (``log1p`` and ``expm1`` keep their accuracy near 0);
* ``maximum``/``minimum``/``compare``: lexicographic on (real, imaginary), as the spec says; a
  NaN part wins in maximum/minimum.
"""
from __future__ import annotations

import llvmlite.ir as ir

from hlo.ir.types import ElementType


class UnsupportedComplexOp(NotImplementedError):
    pass


def parts(b: ir.IRBuilder, z: ir.Value):
    return b.extract_value(z, 0), b.extract_value(z, 1)


def make(b: ir.IRBuilder, ty: ir.Type, re, im) -> ir.Value:
    z = b.insert_value(ir.Constant(ty, ir.Undefined), re, 0)
    return b.insert_value(z, im, 1)


class _C:
    """Helpers on the part type ``t`` of one complex type."""

    def __init__(self, ctx, b: ir.IRBuilder, zty: ir.Type):
        self.ctx, self.b, self.zty = ctx, b, zty
        self.t = zty.elements[0]

    def k(self, v):
        return ir.Constant(self.t, v)

    def m(self, fn, *args):
        return self.ctx.math.call(self.ctx, self.b, fn, list(args))

    def z(self, re, im):
        return make(self.b, self.zty, re, im)

    # complex arithmetic on (re, im) tuples
    def mul(self, x, y):
        b = self.b
        (a, c), (d, e) = x, y
        return b.fsub(b.fmul(a, d), b.fmul(c, e)), b.fadd(b.fmul(a, e), b.fmul(c, d))

    def div(self, x, y):
        """Smith's algorithm, both branches computed, one selected."""
        b = self.b
        (a, bb), (c, d) = x, y
        big_c = b.fcmp_ordered(">=", self.m("fabs", c), self.m("fabs", d))
        r1 = b.fdiv(d, c)
        den1 = b.fadd(c, b.fmul(d, r1))
        re1 = b.fdiv(b.fadd(a, b.fmul(bb, r1)), den1)
        im1 = b.fdiv(b.fsub(bb, b.fmul(a, r1)), den1)
        r2 = b.fdiv(c, d)
        den2 = b.fadd(b.fmul(c, r2), d)
        re2 = b.fdiv(b.fadd(b.fmul(a, r2), bb), den2)
        im2 = b.fdiv(b.fsub(b.fmul(bb, r2), a), den2)
        re, im = b.select(big_c, re1, re2), b.select(big_c, im1, im2)
        # a zero divisor: (copysign(inf, c) * a, copysign(inf, c) * b), as C99 Annex G
        zero = b.and_(b.fcmp_ordered("==", c, self.k(0.0)), b.fcmp_ordered("==", d, self.k(0.0)))
        inf = self.m("copysign", self.k(float("inf")), c)
        return b.select(zero, b.fmul(inf, a), re), b.select(zero, b.fmul(inf, bb), im)

    def exp(self, x):
        b = self.b
        a, c = x
        e = self.m("exp", a)
        zero_im = b.fcmp_ordered("==", c, self.k(0.0))
        re = b.fmul(e, self.m("cos", c))
        im = b.select(zero_im, c, b.fmul(e, self.m("sin", c)))
        re = b.select(zero_im, e, re)
        return re, im

    def log(self, x):
        a, c = x
        return self.m("log", self.m("hypot", a, c)), self.m("atan2", c, a)

    def sqrt(self, x):
        b = self.b
        a, c = x
        mod = self.m("hypot", a, c)
        t = self.m("sqrt", b.fmul(b.fadd(self.m("fabs", a), mod), self.k(0.5)))
        two_t = b.fadd(t, t)
        pos = b.fcmp_ordered(">=", a, self.k(0.0))
        re = b.select(pos, t, b.fdiv(self.m("fabs", c), two_t))
        im = b.select(pos, b.fdiv(c, two_t), self.m("copysign", t, c))
        zero = b.fcmp_ordered("==", mod, self.k(0.0))
        re = b.select(zero, self.k(0.0), re)
        im = b.select(zero, c, im)
        inf_im = b.fcmp_ordered("==", self.m("fabs", c), self.k(float("inf")))
        re = b.select(inf_im, self.k(float("inf")), re)
        im = b.select(inf_im, c, im)
        return re, im

    def sinh_cosh(self, a):
        """(sinh a, cosh a), sinh accurate near 0 (through expm1)."""
        b = self.b
        em = self.m("expm1", self.m("fabs", a))
        # sinh|a| = (em + em / (em + 1)) / 2 ; cosh a = (e + 1/e) / 2 with e = em + 1
        e = b.fadd(em, self.k(1.0))
        sh = b.fmul(b.fadd(em, b.fdiv(em, e)), self.k(0.5))
        ch = b.fmul(b.fadd(e, b.fdiv(self.k(1.0), e)), self.k(0.5))
        return self.m("copysign", sh, a), ch

    def tanh(self, x):
        b = self.b
        a, c = x
        t = self.m("tan", c)
        beta = b.fadd(self.k(1.0), b.fmul(t, t))
        s, _ = self.sinh_cosh(a)
        rho = self.m("sqrt", b.fadd(self.k(1.0), b.fmul(s, s)))
        den = b.fadd(self.k(1.0), b.fmul(beta, b.fmul(s, s)))
        re = b.fdiv(b.fmul(beta, b.fmul(rho, s)), den)
        im = b.fdiv(t, den)
        big = b.fcmp_ordered(">", self.m("fabs", a), self.k(22.0))
        tiny = b.fmul(b.fmul(self.k(4.0), b.fmul(self.m("sin", c), self.m("cos", c))),
                      self.m("exp", b.fmul(self.k(-2.0), self.m("fabs", a))))
        re = b.select(big, self.m("copysign", self.k(1.0), a), re)
        im = b.select(big, tiny, im)
        return re, im


def unary(ctx, b: ir.IRBuilder, name: str, et: ElementType, z: ir.Value) -> ir.Value:
    c = _C(ctx, b, z.type)
    a, d = parts(b, z)
    one = (c.k(1.0), c.k(0.0))
    if name == "negate":
        return c.z(b.fneg(a), b.fneg(d))
    if name == "abs":
        return c.m("hypot", a, d)
    if name == "sign":
        mod = c.m("hypot", a, d)
        zero = b.fcmp_ordered("==", mod, c.k(0.0))
        return b.select(zero, z, c.z(b.fdiv(a, mod), b.fdiv(d, mod)))
    if name == "exponential":
        return c.z(*c.exp((a, d)))
    if name == "exponential_minus_one":
        s = c.m("sin", b.fmul(d, c.k(0.5)))
        re = b.fsub(b.fmul(c.m("expm1", a), c.m("cos", d)), b.fmul(c.k(2.0), b.fmul(s, s)))
        zero_im = b.fcmp_ordered("==", d, c.k(0.0))
        im = b.select(zero_im, d, b.fmul(c.m("exp", a), c.m("sin", d)))
        re = b.select(zero_im, c.m("expm1", a), re)
        return c.z(re, im)
    if name == "log":
        return c.z(*c.log((a, d)))
    if name == "log_plus_one":
        ap1 = b.fadd(a, c.k(1.0))
        small = b.fcmp_ordered("<", c.m("hypot", a, d), c.k(0.5))
        near = b.fmul(c.k(0.5), c.m("log1p", b.fadd(b.fmul(a, b.fadd(c.k(2.0), a)), b.fmul(d, d))))
        far = c.m("log", c.m("hypot", ap1, d))
        return c.z(b.select(small, near, far), c.m("atan2", d, ap1))
    if name == "sqrt":
        return c.z(*c.sqrt((a, d)))
    if name == "rsqrt":
        return c.z(*c.div(one, c.sqrt((a, d))))
    if name == "cbrt":
        r = c.m("cbrt", c.m("hypot", a, d))
        t = b.fdiv(c.m("atan2", d, a), c.k(3.0))
        return c.z(b.fmul(r, c.m("cos", t)), b.fmul(r, c.m("sin", t)))
    if name == "tanh":
        return c.z(*c.tanh((a, d)))
    if name == "tan":  # tan z = -i tanh(i z)
        p, q = c.tanh((b.fneg(d), a))
        return c.z(q, b.fneg(p))
    if name in ("sine", "cosine"):
        sh, ch = c.sinh_cosh(d)
        sa, ca = c.m("sin", a), c.m("cos", a)
        if name == "sine":
            return c.z(b.fmul(sa, ch), b.fmul(ca, sh))
        return c.z(b.fmul(ca, ch), b.fneg(b.fmul(sa, sh)))
    if name == "logistic":  # 1 / (1 + exp(-z))
        e = c.exp((b.fneg(a), b.fneg(d)))
        return c.z(*c.div(one, (b.fadd(c.k(1.0), e[0]), e[1])))
    raise UnsupportedComplexOp(f"'{name}' on {et} is not implemented by the LLVM backend")


def _lex_less(c: _C, x, y):
    b = c.b
    (a, d), (e, f) = x, y
    return b.or_(b.fcmp_ordered("<", a, e), b.and_(b.fcmp_ordered("==", a, e), b.fcmp_ordered("<", d, f)))


def _is_nan(c: _C, x):
    b = c.b
    return b.or_(b.fcmp_unordered("uno", x[0], x[0]), b.fcmp_unordered("uno", x[1], x[1]))


def binary(ctx, b: ir.IRBuilder, name: str, et: ElementType, x: ir.Value, y: ir.Value) -> ir.Value:
    c = _C(ctx, b, x.type)
    xp, yp = parts(b, x), parts(b, y)
    if name == "add":
        return c.z(b.fadd(xp[0], yp[0]), b.fadd(xp[1], yp[1]))
    if name == "subtract":
        return c.z(b.fsub(xp[0], yp[0]), b.fsub(xp[1], yp[1]))
    if name == "multiply":
        return c.z(*c.mul(xp, yp))
    if name == "divide":
        return c.z(*c.div(xp, yp))
    if name in ("maximum", "minimum"):
        lt = _lex_less(c, xp, yp)
        pick = b.select(lt, y, x) if name == "maximum" else b.select(lt, x, y)
        return b.select(_is_nan(c, xp), x, b.select(_is_nan(c, yp), y, pick))
    if name == "power":  # exp(y log x); 0^0 = 1, 0^y = 0 for Re(y) > 0
        e = c.exp(c.mul(yp, c.log(xp)))
        zero = c.k(0.0)
        x0 = b.and_(b.fcmp_ordered("==", xp[0], zero), b.fcmp_ordered("==", xp[1], zero))
        y0 = b.and_(b.fcmp_ordered("==", yp[0], zero), b.fcmp_ordered("==", yp[1], zero))
        ypos = b.fcmp_ordered(">", yp[0], zero)
        r = c.z(*e)
        r = b.select(b.and_(x0, ypos), c.z(zero, zero), r)
        return b.select(b.and_(x0, y0), c.z(c.k(1.0), zero), r)
    if name == "atan2":  # -i log((x + i y) / sqrt(x^2 + y^2))
        yv, xv = xp, yp  # atan2(lhs = y, rhs = x)
        num = (b.fsub(xv[0], yv[1]), b.fadd(xv[1], yv[0]))
        s = c.mul(xv, xv)
        t = c.mul(yv, yv)
        den = c.sqrt((b.fadd(s[0], t[0]), b.fadd(s[1], t[1])))
        lg = c.log(c.div(num, den))
        return c.z(lg[1], b.fneg(lg[0]))
    raise UnsupportedComplexOp(f"'{name}' on {et} is not implemented by the LLVM backend")


def compare(ctx, b: ir.IRBuilder, direction: str, x: ir.Value, y: ir.Value) -> ir.Value:
    c = _C(ctx, b, x.type)
    xp, yp = parts(b, x), parts(b, y)
    eq = b.and_(b.fcmp_ordered("==", xp[0], yp[0]), b.fcmp_ordered("==", xp[1], yp[1]))
    if direction == "EQ":
        return eq
    if direction == "NE":
        return b.xor(eq, ir.Constant(ir.IntType(1), 1))
    lt, gt = _lex_less(c, xp, yp), _lex_less(c, yp, xp)
    return {"LT": lt, "LE": b.or_(lt, eq), "GT": gt, "GE": b.or_(gt, eq)}[direction]
