"""Shape-polymorphic StableHLO (``tensor<?x4xf32>``) imported into symbolic hlo types.

The StableHLO that jax exports for symbolic shapes takes its *dimension arguments* first
(scalar integers: ``@main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>)``, the convention of
StableHLO's ``testdata/dynamic`` files) and computes every dynamic size from them with small
integer tensors (``convert``, ``reshape``, ``concatenate``, arithmetic, ``get_dimension_size``)
that feed the dynamic ops' shape operands. The importer follows those computations with
``ShapeValues``:

- the entry's leading scalar integer arguments, when a function type of the module has a
  ``?``, are dimension arguments: argument ``k`` is symbol ``d<k>`` (``Function.dim_args``);
- every ``?`` of a function argument is a fresh placeholder symbol (``_p<n>``); an op that
  needs two dimensions equal (elementwise operands, a broadcast's operand and result, a
  concatenate's other dimensions, dot_general's batch and contracting pairs, reduce's inputs)
  *unifies* them: a placeholder takes the other side's expression everywhere (``unify``), as
  StableHLO's shape refinement would find when the program runs;
- a small integer tensor whose elements are known dimension expressions carries them
  (``svals``); a dynamic op whose shape operand has them gets its symbolic result type and
  becomes its static form (``dynamic_broadcast_in_dim`` -> ``broadcast_in_dim : f32[2,d0,4]``,
  ``dynamic_iota`` -> ``iota``, ``dynamic_reshape`` -> ``reshape``, ``real_dynamic_slice`` ->
  ``slice`` / ``dynamic_slice`` with symbolic bounds); pads, gather sizes and strides must still
  be constants;
- a private function whose type has a ``?`` is imported at each call with the call's operand
  types (one copy per distinct signature), as StableHLO's refinement specializes callees.

Comparisons of sizes (and their ``and``/``or``) carry True/False where the symbols' bounds
decide them, so jax.export's ``custom_call @shape_assertion`` is dropped when proven. A shape
operand that is not such a computation and a pad or gather size that is not constant are
UnsupportedErrors naming the op.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import Value
from ..dim_expr import (
    DimExpr,
    InconclusiveDimensionError,
    SymbolicDimError,
    bounds,
    divmod_dim,
    floordiv,
    mod,
    symbols_of,
)
from ..types import TensorType

PLACEHOLDER = "_p"
Dims = Tuple[object, ...]


def is_placeholder(d) -> bool:
    if not isinstance(d, DimExpr) or len(d.terms) != 1:
        return False
    m, c = d.terms[0]
    return c == 1 and len(m) == 1 and isinstance(m[0][0], str) and m[0][1] == 1 \
        and m[0][0].startswith(PLACEHOLDER)


class ShapeValues:
    """Placeholders, their unification and the known dimension values of small int tensors."""

    def __init__(self):
        self.count = 0
        self.subst: Dict[str, object] = {}
        self.values: List[Value] = []
        self.svals: Dict[Value, Dims] = {}

    def fresh(self) -> DimExpr:
        self.count += 1
        return DimExpr.symbol(f"{PLACEHOLDER}{self.count - 1}")

    def register(self, vals: Sequence[Value]) -> None:
        for v in vals:
            if not v.type.is_static:
                self.values.append(v)

    # -- unification ------------------------------------------------------------------------
    def resolve(self, d):
        return d.substitute(self.subst) if isinstance(d, DimExpr) and self.subst else d

    def unify(self, a, b) -> bool:
        """Make dims ``a`` and ``b`` equal by solving for a placeholder that appears in
        ``a - b`` only as ``k*p`` (``_p0`` = ``d0``, ``2*_p0`` = ``2*_p1``, ``8*_p0`` = ``8*d0``);
        True if types changed."""
        a, b = self.resolve(a), self.resolve(b)
        if a == b:
            return False
        diff = a - b
        if not isinstance(diff, DimExpr):
            return False
        for name in sorted(diff.symbols()):
            if not name.startswith(PLACEHOLDER):
                continue
            k, rest = _linear_in(diff, name)
            if k is None:
                continue
            q, r = divmod_dim(-rest, k) if isinstance(rest, DimExpr) or rest else (0, 0)
            if r == 0 and not (isinstance(q, DimExpr) and name in q.symbols()) \
                    and (not isinstance(q, int) or q >= 0):
                return self._bind(DimExpr.symbol(name), q)
        return False

    def _bind(self, p: DimExpr, e) -> bool:
        name = next(iter(p.symbols()))
        self.subst[name] = e
        for k, v in list(self.subst.items()):
            if isinstance(v, DimExpr):
                self.subst[k] = v.substitute({name: e})
        for v in self.values:
            if not v.type.is_static:
                v.type = self.type(v.type)
        for v, dims in list(self.svals.items()):
            self.svals[v] = tuple(self.resolve(d) for d in dims)
        return True

    def type(self, t: TensorType) -> TensorType:
        if t.is_static or not self.subst:
            return t
        return TensorType(tuple(self.resolve(d) for d in t.shape), t.dtype, t.layout)

    def unify_shapes(self, a: Sequence, b: Sequence) -> None:
        if len(a) == len(b):
            for x, y in zip(a, b):
                self.unify(x, y)

    def unify_slice_operand(self, x: Value, limits: Sequence) -> None:
        """A slice whose limit is a symbolic size of a dimension that is a placeholder: jax
        slices up to the whole dimension (``x[0:b]``, ``x[b-1:b]``), so the placeholder is the
        limit (a limit ``e-c`` ties it to ``e``)."""
        for d, lim in enumerate(limits):
            if d < x.type.rank and isinstance(lim, DimExpr) and is_placeholder(self.resolve(x.type.shape[d])):
                const = dict(lim.terms).get((), 0)
                self.unify(x.type.shape[d], lim - const if const < 0 else lim)

    def unify_reshape(self, x: TensorType, result: TensorType) -> None:
        """A reshape keeps the element count: solve it for one placeholder; else, when the
        element counts are ``k * (product of placeholders)`` and ``k * (product of symbols)``,
        pair the placeholders with the symbols in the order they appear; else tie leading
        dimensions one by one until it is solved."""
        xs, rs = self.type(x).shape, self.type(result).shape
        holders = [d for d in xs if is_placeholder(d)]
        if len(holders) > 1 and all(is_placeholder(d) or not isinstance(d, DimExpr) for d in xs):
            syms: List[str] = []
            konst_r = 1
            for d in rs:
                if isinstance(d, DimExpr):
                    if len(d.terms) != 1:
                        syms = []
                        break
                    m, c = d.terms[0]
                    konst_r *= c
                    for f, p in m:
                        if not isinstance(f, str) or f.startswith(PLACEHOLDER):
                            syms = []
                            break
                        syms.extend([f] * p)
                else:
                    konst_r *= d
            konst_x = 1
            for d in xs:
                if not isinstance(d, DimExpr):
                    konst_x *= d
            if len(syms) == len(holders) and konst_x == konst_r:
                for h, sname in zip(holders, syms):
                    self.unify(h, DimExpr.symbol(sname))
                return
        for i in range(x.rank + 1):
            xs = self.type(x).shape
            rs = self.type(result).shape
            n_x, n_r = 1, 1
            for d in xs:
                n_x = n_x * d
            for d in rs:
                n_r = n_r * d
            if n_x == n_r or self.unify(n_x, n_r):
                return
            if i >= min(len(xs), len(rs)) or not self.unify(xs[i], rs[i]):
                return

    def unify_operands(self, short: str, operands: Sequence[Value], attrs: Dict, elementwise: bool,
                       result: Optional[TensorType] = None) -> None:
        """The unifications an op's verification needs (before it is built)."""
        ts = [v.type for v in operands]
        if elementwise or short in ("select", "clamp", "compare", "complex"):
            full = [t for t in ts if t.rank > 0]
            for t in full[1:]:
                self.unify_shapes(full[0].shape, t.shape)
        elif short == "concatenate":
            d = attrs.get("dimension", 0)
            for t in ts[1:]:
                for i, (x, y) in enumerate(zip(ts[0].shape, t.shape)):
                    if i != d:
                        self.unify(x, y)
        elif short == "dot_general":
            lhs, rhs = ts
            pairs = list(zip(attrs.get("lhs_batching_dimensions", ()), attrs.get("rhs_batching_dimensions", ())))
            pairs += list(zip(attrs.get("lhs_contracting_dimensions", ()), attrs.get("rhs_contracting_dimensions", ())))
            for i, j in pairs:
                if i < lhs.rank and j < rhs.rank:
                    self.unify(lhs.shape[i], rhs.shape[j])
        elif short == "reshape" and result is not None:
            self.unify_reshape(ts[0], result)
        elif short in ("reduce", "reduce_window", "sort", "scatter"):
            n = len(ts) // 2 if short in ("reduce", "reduce_window") else len(ts)
            if short == "scatter":
                n = (len(ts) - 1) // 2
            for t in ts[1:n]:
                self.unify_shapes(ts[0].shape, t.shape)

    # -- known values of small integer tensors -----------------------------------------------
    def track(self, short: str, operands: Sequence[Value], attrs: Dict, results: Sequence[Value]) -> None:
        if len(results) != 1:
            return
        r = results[0]
        if not ((r.type.dtype.is_int or r.type.dtype.is_pred) and r.type.rank <= 1
                and r.type.is_static and r.type.size <= 64):
            return
        vals = self._value_of(short, operands, attrs, r)
        if vals is not None:
            self.svals[r] = tuple(vals)

    def _value_of(self, short, operands, attrs, r) -> Optional[list]:
        sv = [self.svals.get(v) for v in operands]
        if short == "constant":
            a = np.asarray(attrs["value"])
            return [int(x) for x in a.reshape(-1)]
        if short in ("convert", "reshape") and sv and sv[0] is not None:
            return list(sv[0])
        if any(s is None for s in sv) or not sv:
            return None
        if short == "compare":  # a condition on sizes: True / False where the bounds decide it
            x, y = sv
            if len(x) != len(y):
                return None
            return [_decide(attrs["comparison_direction"], a, b) for a, b in zip(x, y)]
        if short in ("and", "or") and r.type.dtype.is_pred:
            x, y = sv
            if len(x) != len(y):
                return None
            return [_bool_op(short, a, b) for a, b in zip(x, y)]
        if short == "concatenate":
            return [d for s in sv for d in s]
        if short == "slice":
            st, li = attrs["start_indices"][0], attrs["limit_indices"][0]
            sd = (attrs.get("strides") or (1,))[0]
            return list(sv[0][st:li:sd])
        if short == "broadcast_in_dim" and len(sv[0]) == 1:
            return list(sv[0]) * r.type.size
        if short in ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum"):
            x, y = sv
            if len(x) != len(y):
                return None
            try:
                return [_arith(short, a, b) for a, b in zip(x, y)]
            except (InconclusiveDimensionError, SymbolicDimError, ZeroDivisionError, ValueError):
                return None
        return None

    def dims_of(self, v: Value) -> Optional[Dims]:
        s = self.svals.get(v)
        return None if s is None else tuple(self.resolve(d) for d in s)


def _linear_in(e: DimExpr, name: str):
    """(k, rest) with e = k*name + rest and name not in rest, or (None, None)."""
    k, rest = None, {}
    for m, c in e.terms:
        uses = any(f == name or (not isinstance(f, str) and name in (symbols_of(f[1]) | symbols_of(f[2])))
                   for f, _ in m)
        if not uses:
            rest[m] = c
        elif m == ((name, 1),) and k is None:
            k = c
        else:
            return None, None
    return k, DimExpr._from(rest)


def _decide(direction: str, a, b):
    """A comparison of sizes: True, False, or None when the symbols' bounds leave it open."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    lo, hi = bounds(a - b)
    table = {"EQ": (lo == hi == 0, lo > 0 or hi < 0), "NE": (lo > 0 or hi < 0, lo == hi == 0),
             "GE": (lo >= 0, hi < 0), "GT": (lo > 0, hi <= 0), "LE": (hi <= 0, lo > 0),
             "LT": (hi < 0, lo >= 0)}
    yes, no = table[direction]
    return True if yes else False if no else None


def _bool_op(op: str, a, b):
    if op == "and":
        return False if (a is False or b is False) else True if (a is True and b is True) else None
    return True if (a is True or b is True) else False if (a is False and b is False) else None


def _nonneg(d) -> bool:
    return bounds(d)[0] >= 0


def _arith(op, a, b):
    if op == "add":
        return a + b
    if op == "subtract":
        return a - b
    if op == "multiply":
        return a * b
    if op in ("divide", "remainder"):
        # StableHLO's integer division truncates; for non-negative sizes that is floor division
        if not (_nonneg(a) and _nonneg(b)) or b == 0:
            raise ValueError("not a size division")
        return floordiv(a, b) if op == "divide" else mod(a, b)
    if op == "maximum":
        return a if a >= b else b
    return a if a <= b else b


def finish_types(module, dyn: ShapeValues) -> None:
    """Apply the final unifications to every type of the imported module."""
    if not dyn.subst:
        return
    for fn in module.functions.values():
        for a in fn.args:
            a.type = dyn.type(a.type)
        for op in fn.walk():
            for r in op.results:
                r.type = dyn.type(r.type)
            for reg in op.regions:
                for a in reg.args:
                    a.type = dyn.type(a.type)


def materialize(b, expr, rtype: TensorType, symbol_values: Dict[str, Value], loc) -> Value:
    """Ops computing the scalar value of dimension ``expr`` (of ``rtype``, a scalar integer type)
    from the dimension arguments' values; UnsupportedError when a symbol has none."""
    from .errors import UnsupportedError

    def const(k: int) -> Value:
        return b.value("constant", [], attrs={"value": np.array(k, dtype=rtype.np_dtype)})

    def sym(name: str) -> Value:
        v = symbol_values.get(name)
        if v is None:
            raise UnsupportedError("stablehlo.get_dimension_size",
                                   f"dimension symbol {name} is no dimension argument's value", loc)
        return v if v.type == rtype else b.value("convert", [v], result_types=[rtype])

    def value(e) -> Value:
        if not isinstance(e, DimExpr):
            return const(int(e))
        total = None
        for m, c in e.terms:
            t = const(c) if (c != 1 or not m) else None
            for f, p in m:
                fv = sym(f) if isinstance(f, str) else b.value(
                    "divide" if f[0] == "floordiv" else "remainder", [value(f[1]), value(f[2])])
                for _ in range(p):
                    t = fv if t is None else b.value("multiply", [t, fv])
            total = t if total is None else b.value("add", [total, t])
        return total

    return value(expr)
