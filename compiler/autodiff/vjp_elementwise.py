"""VJP rules of elementwise ops: unary and binary arithmetic, compare/select/clamp, convert.

Derivatives follow jax.lax's definitions, including its choices at non-smooth points:
``maximum``/``minimum`` split the gradient evenly between equal operands, ``abs`` has
derivative ``sign(x)`` (0 at 0), rounding ops have zero derivative, and ``power``'s derivative
with respect to the base is 0 where the exponent is 0.
"""
from __future__ import annotations

from ..tracing.tracer import Tracer
from . import prims as P
from .table import Eqn, vjp_rule


def _unary(*names):
    """Register ``fn(x, y, g) -> dx`` as the VJP rule of unary ops ``names``."""
    def register(fn):
        @vjp_rule(*names)
        def rule(e: Eqn):
            return [fn(e.args[0], e.outs[0], e.ct)]
        return fn
    return register


@_unary("negate")
def _negate(x, y, g):
    return P.neg(g)


@_unary("abs")
def _abs(x, y, g):
    if x.dtype.kind == "c":  # g * conj(x) / |x| (0 at 0), as jax
        zero = P.compare(y, P.zeros_like(y), "EQ")
        safe = P.convert(P.select(zero, P.full_like(y, 1), y), x.dtype)
        conj = P.emit1("complex", [P.unary("real", x), P.neg(P.unary("imag", x))])
        return P.mul(P.convert(P.select(zero, P.zeros_like(g), g), x.dtype), P.div(conj, safe))
    return P.mul(g, P.unary("sign", x))


# Complex parts, with jax's convention (transposes of the real-linear maps, no conjugation):
# real^T(g) = g + 0i, imag^T(g) = -i g, complex^T(g) = (Re g, -Im g).
@_unary("real")
def _real(x, y, g):
    if x.dtype.kind != "c":
        return g
    return P.emit1("complex", [g, P.zeros_like(g)])


@_unary("imag")
def _imag(x, y, g):
    if x.dtype.kind != "c":
        return P.zeros_like(x)
    return P.emit1("complex", [P.zeros_like(g), P.neg(g)])


@vjp_rule("complex")
def _complex(e: Eqn):
    g = e.ct
    return [P.unary("real", g) if e.needs[0] else None,
            P.neg(P.unary("imag", g)) if e.needs[1] else None]


@_unary("exponential")
def _exp(x, y, g):
    return P.mul(g, y)


@_unary("exponential_minus_one")
def _expm1(x, y, g):
    return P.mul(g, P.add(y, 1))


@_unary("log")
def _log(x, y, g):
    return P.div(g, x)


@_unary("log_plus_one")
def _log1p(x, y, g):
    return P.div(g, P.add(x, 1))


@_unary("logistic")
def _logistic(x, y, g):
    return P.mul(g, P.mul(y, P.sub(1, y)))


@_unary("tanh")
def _tanh(x, y, g):
    return P.mul(g, P.sub(1, P.mul(y, y)))


@_unary("sqrt")
def _sqrt(x, y, g):
    return P.div(P.mul(g, 0.5), y)


@_unary("rsqrt")
def _rsqrt(x, y, g):
    return P.mul(P.mul(g, -0.5), P.div(y, x))


@_unary("cbrt")
def _cbrt(x, y, g):
    return P.div(g, P.mul(P.mul(y, y), 3))


@_unary("sine")
def _sin(x, y, g):
    return P.mul(g, P.unary("cosine", x))


@_unary("cosine")
def _cos(x, y, g):
    return P.neg(P.mul(g, P.unary("sine", x)))


@_unary("tan")
def _tan(x, y, g):
    return P.mul(g, P.add(P.mul(y, y), 1))


@_unary("sign", "floor", "ceil", "round_nearest_even", "round_nearest_afz")
def _piecewise_constant(x, y, g):
    return P.zeros_like(x)


@vjp_rule("reduce_precision")
def _reduce_precision(e: Eqn):
    return [P.emit1("reduce_precision", [e.ct], dict(e.attrs))]


# --------------------------------------------------------------------------------------------
# Binary
# --------------------------------------------------------------------------------------------

@vjp_rule("add")
def _add(e: Eqn):
    return [e.ct, e.ct]


@vjp_rule("subtract")
def _subtract(e: Eqn):
    return [e.ct, P.neg(e.ct) if e.needs[1] else None]


@vjp_rule("multiply")
def _multiply(e: Eqn):
    a, b = e.args
    g = e.ct
    return [P.mul(g, b) if e.needs[0] else None, P.mul(a, g) if e.needs[1] else None]


@vjp_rule("divide")
def _divide(e: Eqn):
    a, b = e.args
    g = e.ct
    return [P.div(g, b) if e.needs[0] else None,
            P.neg(P.mul(g, P.div(e.outs[0], b))) if e.needs[1] else None]


@vjp_rule("remainder")
def _remainder(e: Eqn):
    a, b = e.args
    g = e.ct
    db = None
    if e.needs[1]:  # d/db (a - b * trunc(a / b)) = -trunc(a / b)
        q = P.div(a, b)
        trunc = P.mul(P.unary("sign", q), P.unary("floor", P.unary("abs", q)))
        db = P.neg(P.mul(g, trunc))
    return [g if e.needs[0] else None, db]


def _replace_zero(x: Tracer) -> Tracer:
    return P.select(P.compare(x, 0, "EQ"), P.full_like(x, 1), x)


@vjp_rule("power")
def _power(e: Eqn):
    x, y = e.args
    g = e.ct
    dx = dy = None
    if e.needs[0]:  # y * x^(y-1), 0 where y == 0
        jac = P.mul(_replace_zero(y), P.binary("power", x, P.sub(y, 1)))
        dx = P.mul(g, P.select(P.compare(y, 0, "EQ"), P.zeros_like(x), jac))
    if e.needs[1]:  # log(x) * x^y, with log(0) replaced by 0
        dy = P.mul(g, P.mul(P.unary("log", _replace_zero(x)), e.outs[0]))
    return [dx, dy]


@vjp_rule("atan2")
def _atan2(e: Eqn):
    a, b = e.args
    g = e.ct
    denom = P.add(P.mul(a, a), P.mul(b, b))
    return [P.mul(g, P.div(b, denom)) if e.needs[0] else None,
            P.neg(P.mul(g, P.div(a, denom))) if e.needs[1] else None]


def _balanced_eq(x: Tracer, z: Tracer, y: Tracer) -> Tracer:
    """1 where x == z and y != z, 0.5 where both equal z, 0 elsewhere (jax's tie rule)."""
    one, zero = P.full_like(z, 1), P.zeros_like(z)
    num = P.select(P.compare(x, z, "EQ"), one, zero)
    den = P.select(P.compare(y, z, "EQ"), P.full_like(z, 2), one)
    return P.div(num, den)


@vjp_rule("maximum", "minimum")
def _max_min(e: Eqn):
    a, b = e.args
    z, g = e.outs[0], e.ct
    return [P.mul(g, _balanced_eq(a, z, b)) if e.needs[0] else None,
            P.mul(g, _balanced_eq(b, z, a)) if e.needs[1] else None]


# --------------------------------------------------------------------------------------------
# select, clamp, convert
# --------------------------------------------------------------------------------------------

@vjp_rule("select")
def _select(e: Eqn):
    p, a, b = e.args
    g = e.ct
    zero = P.zeros_like(g)
    return [None, P.select(p, g, zero) if e.needs[1] else None,
            P.select(p, zero, g) if e.needs[2] else None]


@vjp_rule("clamp")
def _clamp(e: Eqn):
    lo, x, hi = e.args
    g = e.ct
    zero = P.zeros_like(g)

    def full(b):
        return b if b.shape == x.shape else P.broadcast_in_dim(b, x.shape, [])
    out = [None, None, None]
    if e.needs[0]:  # lo is chosen where lo > x (and lo < hi)
        m = P.logical_and(P.compare(full(lo), x, "GT"), P.compare(full(lo), full(hi), "LT"))
        out[0] = P.sum_to_shape(P.select(m, g, zero), lo.shape)
    if e.needs[1]:
        m = P.logical_and(P.compare(x, full(lo), "GT"), P.compare(x, full(hi), "LT"))
        out[1] = P.select(m, g, zero)
    if e.needs[2]:
        m = P.compare(full(hi), x, "LT")
        out[2] = P.sum_to_shape(P.select(m, g, zero), hi.shape)
    return out


@vjp_rule("convert")
def _convert(e: Eqn):
    # Only float -> float conversions are active (integer values carry no cotangent).
    return [P.convert(e.ct, e.args[0].dtype)]


@vjp_rule("optimization_barrier")
def _optimization_barrier(e: Eqn):
    return list(e.cts)  # result i is operand i
