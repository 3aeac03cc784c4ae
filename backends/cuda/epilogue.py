"""Which part of an output fusion's epilogue cuBLASLt computes inside the matrix product.

cuBLASLt's matmul computes ``D = act(alpha * op(A) op(B) + beta * C + bias)`` with ``act`` one
of nothing, ReLU or the tanh-approximated GELU, ``bias`` a vector broadcast along the result's
rows and ``C`` a matrix of the result's type and layout (what XLA's ``gemm_rewriter`` fuses;
the exact erf-GELU is not one of cuBLASLt's and stays a loop kernel).

``match_epilogue(dot, root, buffers, users)`` looks at the epilogue of an output fusion (the
elementwise ops from the ``dot_general`` result ``dot`` up to the fusion's ``root``) and returns
a ``Match``: the largest value ``value`` of the root's operand tree that has that form, with the
epilogue's name, alpha, beta, the bias and C values, and -- where ``value`` is not the root --
why the rest is not (``rest_reason``; the rest then runs as a loop kernel reading ``value`` from
the product's buffer). Where nothing above the product has the form, ``value`` is the product
itself with epilogue ``"DEFAULT"``.

A candidate value qualifies when
- its expression is ``[relu|gelu_tanh](sum of terms)`` where the terms are: the product exactly
  once (optionally times a constant: alpha), at most one bias (``broadcast_in_dim`` of a rank-1
  vector along one dimension: a buffer, or computed in the fusion from buffers without the
  product, which the lowering then computes into scratch first), at most one C (a buffer of the
  result's shape and element type, optionally times a constant: beta);
- every value computed between it and the product is read only inside its own expression (the
  product's buffer then holds it, and nothing else needs the product itself).

Constants of the activations match when they equal the exact ones rounded to their element
type (``0.5``, ``0.044715``, ``sqrt(2/pi)``), as XLA's matcher compares them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Container, Dict, List, Optional, Tuple

import numpy as np

from hlo.ir.core import Operation, Value
from hlo.passes.rewrite import Rewriter

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


class NoMatch(Exception):
    """The value is not of cuBLASLt's epilogue form; the message says why."""


@dataclass
class Match:
    value: Value                    # what cuBLASLt writes into the product's buffer
    epilogue: str = "DEFAULT"       # cuBLASLt's epilogue name (gemm.EPILOGUES)
    alpha: float = 1.0
    beta: float = 0.0
    bias: Optional[Value] = None    # rank-1 buffer, broadcast along result dimension bias_dim
    bias_dim: Optional[int] = None
    c: Optional[Value] = None       # buffer of the result's type, scaled by beta
    rest_reason: str = ""           # why the ops above ``value`` stay a loop kernel ("" at the root)
    fused_ops: List[str] = field(default_factory=list)

    @property
    def at_root(self) -> bool:
        return not self.rest_reason

    def describe(self) -> str:
        parts = [f"epilogue {self.epilogue}"]
        if self.alpha != 1.0:
            parts.append(f"alpha {self.alpha:g}")
        if self.c is not None:
            parts.append(f"C beta {self.beta:g}")
        return ", ".join(parts)


def _splat(v: Value) -> Optional[float]:
    s = Rewriter.splat(v)
    if s is None:
        return None
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def _near(x: Optional[float], want: float, dtype) -> bool:
    """``x`` is ``want`` rounded to ``dtype`` (a few ulp of that type apart at most)."""
    if x is None:
        return False
    npd = dtype.np_dtype if hasattr(dtype, "np_dtype") else np.dtype(np.float32)
    try:
        eps = float(np.finfo(npd).eps)
    except (TypeError, ValueError):
        eps = 2.0 ** -7  # bf16 through ml_dtypes
    return abs(x - want) <= 4 * eps * abs(want)


def _mul_factors(v: Value, stop: Container[Value]) -> Tuple[float, List[Value], List[Operation]]:
    """``v`` as ``k * f1 * f2 * ...``: the constant ``k`` and the non-constant factors, through
    nested ``multiply``, ``negate``, division by a constant and ``power(x, 3)``. ``stop``:
    values not to look into (buffers)."""
    k, out, ops = 1.0, [], []

    def walk(x: Value):
        nonlocal k
        s = _splat(x)
        if s is not None:
            k *= s
            return
        op = x.op
        if x in stop or op is None:
            out.append(x)
            return
        if op.name == "multiply":
            ops.append(op)
            walk(op.operands[0])
            walk(op.operands[1])
        elif op.name == "negate":
            ops.append(op)
            k = -k
            walk(op.operands[0])
        elif op.name == "divide" and _splat(op.operands[1]) not in (None, 0.0):
            ops.append(op)
            k /= _splat(op.operands[1])
            walk(op.operands[0])
        elif op.name == "power" and _splat(op.operands[1]) == 3.0:
            ops.append(op)
            out.extend([op.operands[0]] * 3)
        else:
            out.append(x)

    walk(v)
    return k, out, ops


def _add_terms(v: Value, stop: Container[Value]) -> Tuple[List[Tuple[float, Value]], List[Operation]]:
    """``v`` as a signed sum of terms through nested ``add`` / ``subtract`` / ``negate``."""
    terms, ops = [], []

    def walk(x: Value, sign: float):
        op = x.op
        if x not in stop and op is not None and op.name in ("add", "subtract"):
            ops.append(op)
            walk(op.operands[0], sign)
            walk(op.operands[1], sign if op.name == "add" else -sign)
        elif x not in stop and op is not None and op.name == "negate":
            ops.append(op)
            walk(op.operands[0], -sign)
        else:
            terms.append((sign, x))

    walk(v, 1.0)
    return terms, ops


def _relu_input(v: Value, stop) -> Optional[Tuple[Value, List[Operation]]]:
    op = v.op
    if v in stop or op is None or op.name != "maximum":
        return None
    a, b = op.operands
    if _splat(b) == 0.0:
        return a, [op]
    if _splat(a) == 0.0:
        return b, [op]
    return None


def _gelu_input(v: Value, stop) -> Optional[Tuple[Value, List[Operation]]]:
    """``x`` when ``v`` is ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (the
    factors in any order and grouping)."""
    if v in stop or v.op is None:
        return None
    dt = v.type.dtype
    k, fs, ops = _mul_factors(v, stop)
    if len(fs) != 2 or not _near(k, 0.5, dt):
        return None
    for x, t in (fs, fs[::-1]):
        atoms = set(stop) | {x}  # x is the activation's input: not looked into
        terms, add_ops = _add_terms(t, atoms)
        if len(terms) != 2:
            continue
        ones = [s * _splat(u) for s, u in terms if _splat(u) is not None]
        tanhs = [u for s, u in terms if s == 1.0 and u.op is not None and u.op.name == "tanh" and u not in atoms]
        if ones != [1.0] or len(tanhs) != 1:
            continue
        c1, inner, ops1 = _mul_factors(tanhs[0].op.operands[0], atoms)
        if len(inner) != 1 or not _near(c1, SQRT_2_OVER_PI, dt):
            continue
        cubic, ops2 = _add_terms(inner[0], atoms)
        if len(cubic) != 2:
            continue
        ok = False
        for (s1, a), (s2, b) in (cubic, cubic[::-1]):
            if s1 != 1.0 or s2 != 1.0 or a is not x:
                continue
            c2, xs, ops3 = _mul_factors(b, atoms)
            if xs == [x, x, x] and _near(c2, GELU_CUBIC, dt):
                ok = True
                ops2 = ops2 + ops3
                break
        if ok:
            return x, ops + add_ops + [tanhs[0].op] + ops1 + ops2
    return None


def _linear(pre: Value, dot: Value, out_shape, out_dtype, buffers: Container[Value]):
    """``pre`` as ``alpha * dot + beta * C + bias``: (alpha, beta, c, bias, bias_dim, ops), or
    raises ``NoMatch``."""
    terms, ops = _add_terms(pre, buffers)
    alpha = beta = None
    c = bias = bias_dim = None
    for sign, t in terms:
        if _relu_input(t, buffers) or _gelu_input(t, buffers):
            raise NoMatch(f"a term is added to an activation's result ({_name(t)}); cuBLASLt adds C "
                          "and the bias before its activation")
        k, fs, mops = _mul_factors(t, buffers)
        if len(fs) != 1:
            raise NoMatch(f"the term {_name(t)} is not the product, a bias vector or a matrix")
        f = k * sign
        x = fs[0]
        if x is dot:
            if alpha is not None:
                raise NoMatch("the product is added twice")
            alpha = f
        elif x.op is not None and x.op.name == "broadcast_in_dim" and x not in buffers \
                and x.op.operands[0].type.rank == 1 and len(x.op.attrs["broadcast_dimensions"]) == 1 \
                and _from_buffers(x.op.operands[0], buffers, dot):
            if bias is not None:
                raise NoMatch("two bias vectors are added")
            if f != 1.0:
                raise NoMatch(f"the bias vector is scaled by {f:g} (cuBLASLt adds it as it is)")
            bias, bias_dim = x.op.operands[0], int(x.op.attrs["broadcast_dimensions"][0])
            mops = mops + [x.op]
        elif x in buffers:
            if tuple(x.type.shape) != tuple(out_shape) or x.type.dtype != out_dtype:
                raise NoMatch(f"the added array {x.type} is not of the result's type (C must be)")
            if c is not None:
                raise NoMatch("two matrices are added to the product (cuBLASLt has one C)")
            c, beta = x, f
        else:
            raise NoMatch(f"the term {_name(x)} is computed in the fusion (cuBLASLt's C and bias "
                          "are buffers)")
        ops = ops + mops
    if alpha is None:
        raise NoMatch("the product is not one of the added terms")
    return alpha, (beta if c is not None else 0.0), c, bias, bias_dim, ops


def _from_buffers(v: Value, buffers: Container[Value], dot: Value) -> bool:
    """``v`` is a buffer, or computed in the fusion from buffers and constants without the
    product (a bias vector the lowering computes into scratch before the product: the
    concatenated biases of merged products)."""
    if v in buffers:
        return True
    seen, stack = set(), [v]
    while stack:
        x = stack.pop()
        if x is dot:
            return False
        op = x.op
        if x in buffers or op is None or id(op) in seen:
            if op is None and x not in buffers:
                return False  # a region argument that is not a buffer
            continue
        if op.regions:
            return False
        seen.add(id(op))
        stack.extend(op.operands)
    return True


def _name(v: Value) -> str:
    op = v.op
    if op is None:
        return f"parameter {v.type}"
    where = f" at {op.loc}" if op.loc is not None else ""
    return f"{op.name}{where}"


def _cone(v: Value, stop: Container[Value]) -> set:
    """The ops computing ``v`` from ``stop`` values and constants."""
    seen, stack = set(), [v]
    while stack:
        x = stack.pop()
        op = x.op
        if x in stop or op is None or op in seen:
            continue
        seen.add(op)
        stack.extend(op.operands)
    return seen


def _match_at(v: Value, dot: Value, buffers, users: Dict[Value, List[Operation]]) -> Match:
    """``v`` as cuBLASLt's epilogue of ``dot`` (raises ``NoMatch`` saying why not)."""
    stop = set(buffers) | {dot}
    act, pre = "", v
    r = _relu_input(v, stop)
    if r is not None:   # (the activation's ops are in the cone checked below)
        act, (pre, _) = "RELU", r
    else:
        g = _gelu_input(v, stop)
        if g is not None:
            act, (pre, _) = "GELU", g
    out = dot.type
    alpha, beta, c, bias, bias_dim, ops = _linear(pre, dot, out.shape, out.dtype, stop)
    if act and c is not None:
        pass  # act(alpha AB + beta C + bias): C is added before the activation, as cuBLASLt does
    cone = _cone(v, stop)
    for op in cone:
        if op is v.op:
            continue
        for res in op.results:
            if any(u not in cone for u in users.get(res, ())):
                raise NoMatch(f"{_name(res)} inside the epilogue is also read elsewhere")
    if any(u not in cone for u in users.get(dot, ())):
        raise NoMatch("the product itself is also read elsewhere in the fusion")
    if bias is not None:
        epi = {"": "BIAS", "RELU": "RELU_BIAS", "GELU": "GELU_BIAS"}[act]
    else:
        epi = act or "DEFAULT"
    return Match(v, epi, alpha, beta, bias, bias_dim, c, fused_ops=sorted(o.name for o in cone))


def match_epilogue(dot: Value, root: Value, buffers: Container[Value],
                   users: Dict[Value, List[Operation]]) -> Match:
    """The largest part of ``root``'s expression over ``dot`` that cuBLASLt computes (see the
    module's docstring). ``buffers``: values held in buffers (the fusion's parameters);
    ``users``: each value's reader ops in the fusion's region."""
    try:
        return _match_at(root, dot, buffers, users)
    except NoMatch as e:
        reason = str(e)
    # Below the root: the values on the way from the product up, largest expression first.
    best = None
    frontier, seen = [dot], set()
    order = []
    while frontier:
        x = frontier.pop()
        for u in users.get(x, ()):
            if u is None or u in seen:  # None: read as the region's output
                continue
            seen.add(u)
            for res in u.results:
                order.append(res)
                frontier.append(res)
    for v in order:
        if v is root or v.type.shape != dot.type.shape or v.type.dtype != dot.type.dtype:
            continue
        try:
            m = _match_at(v, dot, buffers, users)
        except NoMatch:
            continue
        if best is None or len(_cone(v, set(buffers) | {dot})) > len(_cone(best.value, set(buffers) | {dot})):
            best = m
    if best is None:
        best = Match(dot)
    best.rest_reason = reason
    return best
