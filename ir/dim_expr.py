"""Symbolic dimension sizes: exact polynomials over named symbols, with floordiv and mod.

A dimension of a ``TensorType`` is a plain ``int`` when it is known, or a ``DimExpr`` when it
depends on symbols (``b``, ``2*b``, ``b*s``, ``b-1``, ``floordiv(b,2)``). The semantics are
jax.export's shape polymorphism (``jax/_src/export/shape_poly.py``), in our own code:

- An expression is a sum of terms ``coeff * monomial`` with integer coefficients; a monomial is
  a product of factors raised to positive powers; a factor is a symbol or an operation
  ``floordiv(e, d)`` / ``mod(e, d)`` that could not be simplified. The form is normalized
  (terms sorted, zero terms dropped), so two expressions are equal exactly when they are the
  same polynomial, and an expression without symbols is returned as a plain ``int``: ``b - b``
  is ``0``, never a ``DimExpr``.
- ``e // d`` and ``e % d`` divide term by term (leading term first, as jax's ``_divmod``):
  when every step divides exactly the quotient is a polynomial (``(2*b+4)//2 = b+2``,
  ``b*s // s = b``, ``(2*b+5) // 2 = b+2`` with remainder 1), otherwise they become
  ``floordiv``/``mod`` factors. A symbolic divisor must divide exactly or the result is a factor.
- Every symbol is at least 1 (jax's assumption); ``bounds(e, ranges)`` gives an interval from
  per-symbol ranges (``Dim("b", min=1, max=4096)``). ``<``, ``<=``, ``>``, ``>=`` are decided
  from bounds and raise ``InconclusiveDimensionError`` when the bounds do not decide them;
  ``==`` is structural (as jax's: ``b == 4`` is False, since they are different polynomials).
- ``int(e)``, ``operator.index(e)`` (so numpy shapes) raise ``SymbolicDimError`` naming the
  expression: code that needs a concrete size meets a clear error, not a wrong one.

Text form (``str``, ``parse``): ``2*b``, ``b*s``, ``b-1``, ``-b+4``, ``floordiv(b,2)``,
``mod(b,2)``, no spaces (the IR's types print ``f32[2*b,512]``). ``parse`` also takes spaces,
parentheses, ``//`` and ``%``.
"""
from __future__ import annotations

import math
import re
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

Dim = Union[int, "DimExpr"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = frozenset({"floordiv", "mod"})


class SymbolicDimError(TypeError):
    """A symbolic dimension used where a concrete size is needed."""


class InconclusiveDimensionError(ValueError):
    """A comparison of dimension expressions that their bounds do not decide."""


class DimParseError(ValueError):
    """Text that is not a dimension expression."""


# A factor: a symbol name, or (op, dividend, divisor) for op in ("floordiv", "mod").
# A monomial: a sorted tuple of (factor, power). A term: (monomial, coefficient).


def _factor_key(f) -> Tuple:
    if isinstance(f, str):
        return (0, f)
    return (1, f[0], str(f[1]), str(f[2]))


def _mono_key(m) -> Tuple:
    # higher degree first, then by factors
    return (-sum(p for _, p in m), tuple((_factor_key(f), -p) for f, p in m))


class DimExpr:
    """A normalized dimension polynomial (never a constant: constants are ints)."""

    __slots__ = ("_terms", "_hash")

    def __init__(self, terms: Tuple[Tuple[Tuple, int], ...]):
        self._terms = terms
        self._hash = hash(terms)

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def symbol(name: str) -> "DimExpr":
        if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
            raise DimParseError(f"{name!r} is not a dimension symbol name (a letter or _ then "
                                f"letters, digits, _; not 'floordiv' or 'mod')")
        return DimExpr(((((name, 1),), 1),))

    @staticmethod
    def _from(coeffs: Dict[Tuple, int]) -> Dim:
        items = [(m, c) for m, c in coeffs.items() if c != 0]
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        items.sort(key=lambda mc: _mono_key(mc[0]))
        return DimExpr(tuple(items))

    def _coeffs(self) -> Dict[Tuple, int]:
        return dict(self._terms)

    # -- queries -----------------------------------------------------------------------------
    @property
    def terms(self):
        return self._terms

    def symbols(self) -> frozenset:
        out = set()
        for m, _ in self._terms:
            for f, _ in m:
                if isinstance(f, str):
                    out.add(f)
                else:
                    out |= symbols_of(f[1]) | symbols_of(f[2])
        return frozenset(out)

    def evaluate(self, env: Mapping[str, int]) -> int:
        total = 0
        for m, c in self._terms:
            v = c
            for f, p in m:
                v *= _eval_factor(f, env) ** p
            total += v
        return total

    def substitute(self, env: Mapping[str, Dim]) -> Dim:
        """The expression with symbols of ``env`` replaced (by ints or expressions)."""
        total: Dim = 0
        for m, c in self._terms:
            v: Dim = c
            for f, p in m:
                if isinstance(f, str):
                    fv = env.get(f, DimExpr.symbol(f))
                else:
                    a, d = substitute(f[1], env), substitute(f[2], env)
                    fv = floordiv(a, d) if f[0] == "floordiv" else mod(a, d)
                for _ in range(p):
                    v = v * fv
            total = total + v
        return total

    # -- arithmetic --------------------------------------------------------------------------
    def __add__(self, other):
        if isinstance(other, DimExpr):
            co = self._coeffs()
            for m, c in other._terms:
                co[m] = co.get(m, 0) + c
            return DimExpr._from(co)
        if _is_int(other):
            co = self._coeffs()
            co[()] = co.get((), 0) + int(other)
            return DimExpr._from(co)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return DimExpr(tuple((m, -c) for m, c in self._terms))

    def __sub__(self, other):
        if isinstance(other, DimExpr) or _is_int(other):
            return self + (-other)
        return NotImplemented

    def __rsub__(self, other):
        if _is_int(other):
            return (-self) + int(other)
        return NotImplemented

    def __mul__(self, other):
        if _is_int(other):
            k = int(other)
            return DimExpr._from({m: c * k for m, c in self._terms})
        if not isinstance(other, DimExpr):
            return NotImplemented
        co: Dict[Tuple, int] = {}
        for m1, c1 in self._terms:
            for m2, c2 in other._terms:
                m = _mono_mul(m1, m2)
                co[m] = co.get(m, 0) + c1 * c2
        return DimExpr._from(co)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, DimExpr) or _is_int(other):
            return divmod_dim(self, other)[0]
        return NotImplemented

    def __rfloordiv__(self, other):
        if _is_int(other):
            return divmod_dim(int(other), self)[0]
        return NotImplemented

    def __mod__(self, other):
        if isinstance(other, DimExpr) or _is_int(other):
            return divmod_dim(self, other)[1]
        return NotImplemented

    def __rmod__(self, other):
        if _is_int(other):
            return divmod_dim(int(other), self)[1]
        return NotImplemented

    # -- comparisons -------------------------------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, DimExpr):
            return self._terms == other._terms
        return False  # a normalized DimExpr is never a constant

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return self._hash

    def __ge__(self, other):
        return _geq(self, other, f"'{self}' >= '{other}'")

    def __le__(self, other):
        return _geq(other, self, f"'{self}' <= '{other}'")

    def __gt__(self, other):
        return not _geq(other, self, f"'{self}' > '{other}'")

    def __lt__(self, other):
        return not _geq(self, other, f"'{self}' < '{other}'")

    # -- no concrete value -------------------------------------------------------------------
    def __int__(self):
        raise SymbolicDimError(f"symbolic dimension '{self}' used where a concrete size is needed")

    __index__ = __int__

    def __bool__(self):
        lo, hi = bounds(self)
        if lo > 0 or hi < 0:
            return True
        raise InconclusiveDimensionError(f"whether '{self}' is 0 is not decided by the symbols' "
                                         f"bounds (each symbol is at least 1)")

    # -- text --------------------------------------------------------------------------------
    def __str__(self):
        out = ""
        for i, (m, c) in enumerate(self._terms):
            if not m:
                body, k = str(abs(c)), c
            else:
                fs = "*".join(_factor_str(f) for f, p in m for _ in range(p))
                k = c
                body = fs if abs(c) == 1 else f"{abs(c)}*{fs}"
            if i == 0:
                out = ("-" if k < 0 else "") + body
            else:
                out += ("-" if k < 0 else "+") + body
        return out

    def __repr__(self):
        return f"DimExpr({self})"

    def __reduce__(self):
        return (parse, (str(self),))


def _is_int(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    try:
        import numpy as np
        return isinstance(x, np.integer)
    except ImportError:  # pragma: no cover
        return False


def _mono_mul(a, b):
    d: Dict = dict(a)
    for f, p in b:
        d[f] = d.get(f, 0) + p
    return tuple(sorted(d.items(), key=lambda fp: _factor_key(fp[0])))


def _factor_str(f) -> str:
    if isinstance(f, str):
        return f
    return f"{f[0]}({f[1]},{f[2]})"


def _eval_factor(f, env) -> int:
    if isinstance(f, str):
        if f not in env:
            raise KeyError(f"no value for dimension symbol '{f}'")
        return int(env[f])
    a, d = evaluate(f[1], env), evaluate(f[2], env)
    if d == 0:
        raise ZeroDivisionError(f"{_factor_str(f)}: division by zero")
    return a // d if f[0] == "floordiv" else a % d


# --------------------------------------------------------------------------------------------
# Functions on dims (ints or DimExprs)
# --------------------------------------------------------------------------------------------

def is_symbolic(d) -> bool:
    return isinstance(d, DimExpr)


def is_static_shape(shape: Iterable) -> bool:
    return not any(isinstance(d, DimExpr) for d in shape)


def symbols_of(d) -> frozenset:
    return d.symbols() if isinstance(d, DimExpr) else frozenset()


def shape_symbols(shape: Iterable) -> frozenset:
    out: frozenset = frozenset()
    for d in shape:
        if isinstance(d, DimExpr):
            out = out | d.symbols()
    return out


def evaluate(d, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, DimExpr) else int(d)


def substitute(d, env: Mapping[str, Dim]) -> Dim:
    return d.substitute(env) if isinstance(d, DimExpr) else int(d)


def evaluate_shape(shape: Iterable, env: Mapping[str, int]) -> Tuple[int, ...]:
    return tuple(d.evaluate(env) if isinstance(d, DimExpr) else d for d in shape)


def _leading(e: "DimExpr"):
    return e._terms[0]


def _mono_divide(m, dm):
    """m / dm as a monomial, or None when dm does not divide m."""
    d = dict(m)
    for f, p in dm:
        if d.get(f, 0) < p:
            return None
        d[f] -= p
        if d[f] == 0:
            del d[f]
    return tuple(sorted(d.items(), key=lambda fp: _factor_key(fp[0])))


def divmod_dim(a: Dim, b: Dim) -> Tuple[Dim, Dim]:
    """(a // b, a % b) for dims: exact polynomial division when it goes through, else
    ``floordiv``/``mod`` factors (jax's ``_divmod``)."""
    if not isinstance(a, DimExpr) and not isinstance(b, DimExpr):
        return divmod(int(a), int(b))
    if not isinstance(b, DimExpr) and int(b) == 0:
        raise ZeroDivisionError(f"dimension '{a}' divided by 0")
    dividend: Dim = a
    quotient: Dim = 0
    ok = True
    while isinstance(dividend, DimExpr):
        mon, count = _leading(dividend)
        if not mon:
            break
        if isinstance(b, DimExpr):
            dmon, dcount = _leading(b)
            qmon = _mono_divide(mon, dmon)
            if qmon is None:
                ok = False
                break
        else:
            qmon, dcount = mon, int(b)
        qc, rc = divmod(count, dcount)
        if rc != 0:
            ok = False
            break
        q = DimExpr._from({qmon: qc})
        quotient = quotient + q
        dividend = dividend - q * b
    if ok:
        rest = dividend if not isinstance(dividend, DimExpr) else None
        if rest is not None:
            if isinstance(b, DimExpr):
                if rest == 0:
                    return quotient, 0
            else:
                q2, r2 = divmod(rest, int(b))
                return quotient + q2, r2
    return (DimExpr(((((("floordiv", a, b), 1),), 1),)),
            DimExpr(((((("mod", a, b), 1),), 1),)))


def floordiv(a: Dim, b: Dim) -> Dim:
    return divmod_dim(a, b)[0]


def mod(a: Dim, b: Dim) -> Dim:
    return divmod_dim(a, b)[1]


# -- bounds ----------------------------------------------------------------------------------

_INF = math.inf


def _imul(a, b):
    out = []
    for x in a:
        for y in b:
            out.append(0 if (x == 0 or y == 0) else x * y)
    return (min(out), max(out))


def _factor_bounds(f, ranges):
    if isinstance(f, str):
        lo, hi = ranges.get(f, (1, None))
        return (lo if lo is not None else 1, hi if hi is not None else _INF)
    op, a, d = f
    alo, ahi = bounds(a, ranges)
    if not isinstance(d, DimExpr) and int(d) > 0:
        k = int(d)
        if op == "mod":
            return (0, k - 1)
        return (alo // k if alo != -_INF else -_INF, ahi // k if ahi != _INF else _INF)
    if op == "mod":
        dlo, dhi = bounds(d, ranges)
        if dlo > 0:
            return (0, dhi - 1 if dhi != _INF else _INF)
    if op == "floordiv" and alo >= 0:
        dlo, _ = bounds(d, ranges)
        if dlo >= 1:
            return (0, ahi)
    return (-_INF, _INF)


def bounds(d: Dim, ranges: Optional[Mapping[str, Tuple[Optional[int], Optional[int]]]] = None):
    """(lo, hi) with lo <= d <= hi for all symbol values in ``ranges`` (each symbol's
    (min, max), None for no bound; a symbol not named is in [1, inf)). Infinite ends are
    ``math.inf``."""
    if not isinstance(d, DimExpr):
        return (int(d), int(d))
    ranges = ranges or {}
    lo, hi = 0, 0
    for m, c in d._terms:
        t = (1, 1)
        for f, p in m:
            fb = _factor_bounds(f, ranges)
            for _ in range(p):
                t = _imul(t, fb)
        t = _imul(t, (c, c))
        lo, hi = lo + t[0], hi + t[1]
    return (lo, hi)


def _geq(a: Dim, b: Dim, what: str) -> bool:
    lo, hi = bounds(a - b)
    if lo >= 0:
        return True
    if hi < 0:
        return False
    raise InconclusiveDimensionError(
        f"{what} is not decided by the symbols' bounds (each symbol is at least 1)")


def definitely_equal(a: Dim, b: Dim) -> bool:
    return a == b


# -- text ------------------------------------------------------------------------------------

_TOK = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%(),]))")


def parse(text: str) -> Dim:
    """A dimension from text: ``4``, ``b``, ``2*b``, ``b - 1``, ``b*s``, ``floordiv(b, 2)``,
    ``mod(b, 2)``, ``b // 2``, ``b % 2``, parentheses. DimParseError for anything else."""
    src = str(text)
    toks = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOK.match(src, pos)
        if m is None:
            raise DimParseError(f"unexpected {src[pos:].strip()[:1]!r} in dimension {src!r}")
        toks.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    if not toks:
        raise DimParseError("empty dimension expression")
    p = _Parser(toks, src)
    v = p.expr()
    if p.i != len(toks):
        raise DimParseError(f"unexpected {toks[p.i]!r} in dimension {src!r}")
    return v


class _Parser:
    def __init__(self, toks, src):
        self.toks, self.i, self.src = toks, 0, src

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise DimParseError(f"expected {want or 'more'} in dimension {self.src!r}, "
                                f"found {t if t is not None else 'the end'!r}")
        self.i += 1
        return t

    def expr(self):
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            r = self.term()
            v = v + r if op == "+" else v - r
        return v

    def term(self):
        v = self.unary()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            r = self.unary()
            v = v * r if op == "*" else floordiv(v, r) if op == "//" else mod(v, r)
        return v

    def unary(self):
        if self.peek() == "-":
            self.take()
            return -self.unary()
        return self.atom()

    def atom(self):
        t = self.take()
        if t.isdigit():
            return int(t)
        if t == "(":
            v = self.expr()
            self.take(")")
            return v
        if t in _RESERVED:
            self.take("(")
            a = self.expr()
            self.take(",")
            b = self.expr()
            self.take(")")
            return floordiv(a, b) if t == "floordiv" else mod(a, b)
        if _NAME.match(t):
            return DimExpr.symbol(t)
        raise DimParseError(f"unexpected {t!r} in dimension {self.src!r}")


def dim_str(d: Dim) -> str:
    return str(d)


def as_dim(d) -> Dim:
    """A dimension as the IR holds it: a ``DimExpr`` as it is, anything else ``int(d)``."""
    return d if isinstance(d, DimExpr) else int(d)
