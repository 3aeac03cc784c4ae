"""Algebraic simplification: a table of local rewrites that remove work.

Identities: ``x+0``, ``x-0``, ``x*1``, ``x/1``, integer ``x*0``, ``--x``, ``not(not(x))``,
``max(x,x)``, ``min(x,x)``, ``and(x,x)``, ``or(x,x)``, ``select`` on a constant predicate or
with equal branches; ``x / 2^k`` becomes ``x * 2^-k`` (exact).
Chains: transpose of transpose, reshape of reshape, broadcast of broadcast (and of a reshape
that only adds or drops unit dimensions), conversions through a type that holds every value
exactly, slice of slice; no-op transposes, reshapes, broadcasts, slices, pads and
concatenates disappear.
Slices of a concatenate read the one operand they fall in. A dynamic_slice, or a gather of one
slice, at constant start indices is a slice (clamped as they clamp). Reductions of a broadcast reduce
the small operand instead (a sum over broadcast copies becomes a multiply by their count).
A dot_general without a contraction (or with one of size 1) becomes a multiply of broadcasts.

Floating-point note: like XLA, ``x + 0.0`` becomes ``x`` (which differs only in the sign of a
zero result), and a sum of ``n`` broadcast copies becomes one multiply by ``n`` (which may
differ in the last bit). Everything else here is exact.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Module, Value
from hlo.ir.types import TensorType

from .base import Pass, register_pass
from .rewrite import apply_patterns
from .util import scalar_body_op


def _same(a: Value, b: Value) -> bool:
    return a is b


# -- identities ---------------------------------------------------------------------------

def add_zero(op, rw):
    x, y = op.operands
    if rw.is_splat_of(y, 0) and x.type.dtype == op.results[0].type.dtype:
        return [x]
    if rw.is_splat_of(x, 0):
        return [y]
    return None


def sub_zero(op, rw):
    x, y = op.operands
    if rw.is_splat_of(y, 0):
        return [x]
    return None


def mul_one(op, rw):
    x, y = op.operands
    if op.results[0].type.dtype.is_pred:
        return None
    if rw.is_splat_of(y, 1):
        return [x]
    if rw.is_splat_of(x, 1):
        return [y]
    if op.results[0].type.dtype.is_int and (rw.is_splat_of(y, 0) or rw.is_splat_of(x, 0)):
        return [rw.splat_like(0, op.results[0].type)]
    return None


def div_one(op, rw):
    x, y = op.operands
    if rw.is_splat_of(y, 1):
        return [x]
    t = op.results[0].type
    s = rw.splat(y)
    if t.dtype.is_float and s is not None:
        # Division by a power of two is multiplication by its exact reciprocal.
        f = float(s)
        if f != 0 and np.isfinite(f):
            m, e = np.frexp(abs(f))
            if m == 0.5:
                inv = np.array(1.0 / f, dtype=t.np_dtype)
                if float(inv) * f == 1.0 and np.isfinite(inv) and inv != 0:
                    return [rw.build("multiply", [x, rw.splat_like(inv, t)])]
    return None


def involution(op, rw):
    x = op.operands[0]
    p = x.op
    if p is not None and p.name == op.name:
        return [p.operands[0]]
    return None


def idempotent(op, rw):
    x, y = op.operands
    if _same(x, y):
        return [x]
    return None


def select_simplify(op, rw):
    p, a, b = op.operands
    if _same(a, b):
        return [a]
    s = rw.splat(p)
    if s is not None:
        return [a if bool(s) else b]
    return None


# -- conversions --------------------------------------------------------------------------

def _holds_exactly(src, dst) -> bool:
    """Every value of element type ``src`` is exactly representable in ``dst``."""
    if src == dst or src.is_pred:
        return True
    if dst.is_pred:
        return False
    if src.is_float:
        if not dst.is_float:
            return False
        info_s, info_d = ml_dtypes.finfo(src.np_dtype), ml_dtypes.finfo(dst.np_dtype)
        return info_d.nmant >= info_s.nmant and info_d.maxexp >= info_s.maxexp and info_d.minexp <= info_s.minexp
    # integers
    if dst.is_float:
        mant = ml_dtypes.finfo(dst.np_dtype).nmant + 1
        return (src.bits - (1 if src.is_signed else 0)) <= mant
    if src.is_signed and not dst.is_signed:
        return False
    need = src.bits + (1 if (src.is_unsigned and dst.is_signed) else 0)
    return dst.bits >= need


def convert_simplify(op, rw):
    x = op.operands[0]
    t = op.results[0].type
    if x.type.dtype == t.dtype:
        return [x]
    p = x.op
    if p is not None and p.name == "convert":
        inner = p.operands[0]
        if _holds_exactly(inner.type.dtype, x.type.dtype):
            if inner.type.dtype == t.dtype:
                return [inner]
            return [rw.build("convert", [inner], result_types=[t])]
    return None


# -- shape chains -------------------------------------------------------------------------

def transpose_simplify(op, rw):
    x = op.operands[0]
    perm = list(op.attrs["permutation"])
    if perm == list(range(len(perm))):
        return [x]
    p = x.op
    if p is not None and p.name == "dot_general" and rw.num_users(x) == 1:
        swapped = _transposed_dot(p, perm, rw)
        if swapped is not None:
            return [swapped]
    if p is not None and p.name == "transpose":
        inner = list(p.attrs["permutation"])
        composed = [inner[i] for i in perm]
        if composed == list(range(len(composed))):
            return [p.operands[0]]
        return [rw.build("transpose", [p.operands[0]], {"permutation": composed})]
    return None


def _transposed_dot(dot, perm, rw):
    """transpose(dot_general(a, b)) whose permutation swaps the lhs and rhs free dimensions is
    dot_general(b, a): the transposed product without a transpose."""
    g = dot.attrs.get
    lb, rb = list(g("lhs_batching_dimensions", ())), list(g("rhs_batching_dimensions", ()))
    lc, rc = list(g("lhs_contracting_dimensions", ())), list(g("rhs_contracting_dimensions", ()))
    a, b = dot.operands
    nb = len(lb)
    nl = a.type.rank - nb - len(lc)
    nr = b.type.rank - nb - len(rc)
    want = list(range(nb)) + list(range(nb + nl, nb + nl + nr)) + list(range(nb, nb + nl))
    if perm != want:
        return None
    attrs = {"lhs_batching_dimensions": rb, "rhs_batching_dimensions": lb,
             "lhs_contracting_dimensions": rc, "rhs_contracting_dimensions": lc}
    attrs = {k: v for k, v in attrs.items() if v}
    shape = [dot.results[0].type.shape[i] for i in perm]
    t = TensorType(tuple(shape), dot.results[0].type.dtype)
    return rw.build("dot_general", [b, a], attrs, result_types=[t])


def dot_outer(op, rw):
    """A dot_general with no contraction, or one of size 1, computes one product per result
    element: it becomes ``multiply(broadcast(lhs), broadcast(rhs))`` (the size-1 contracting
    dimensions reshaped away, operands converted to the result's type first), which fuses with
    its neighbours and runs at memory speed. vmap(grad) makes such products: per-example
    weight gradients are batched outer products (on the H100 cuBLASLt wrote the 205 MB one at
    1.9 TB/s). Exact: a product of two values converted to the result type, rounded once, as
    the dot rounds its single term."""
    a, b = op.operands
    t = op.results[0].type
    dt = t.dtype
    if dt.is_pred:
        return None
    g = op.attrs.get
    lb, rb = list(g("lhs_batching_dimensions", ())), list(g("rhs_batching_dimensions", ()))
    lc, rc = list(g("lhs_contracting_dimensions", ())), list(g("rhs_contracting_dimensions", ()))
    if any(a.type.shape[d] != 1 for d in lc):
        return None
    nb = len(lb)
    lfree = [d for d in range(a.type.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(b.type.rank) if d not in rb and d not in rc]
    full = TensorType(tuple(t.shape), dt)

    def side(x, batch, contract, free, first):
        pos = {d: batch.index(d) for d in batch}
        pos.update({d: first + i for i, d in enumerate(free)})
        keep = [d for d in range(x.type.rank) if d not in contract]
        if contract:
            x = rw.build("reshape", [x], result_types=[
                TensorType(tuple(x.type.shape[d] for d in keep), x.type.dtype)])
        if x.type.dtype != dt:
            x = rw.build("convert", [x], result_types=[TensorType(tuple(x.type.shape), dt)])
        return rw.build("broadcast_in_dim", [x], {"broadcast_dimensions": [pos[d] for d in keep]},
                        result_types=[full])

    return [rw.build("multiply", [side(a, lb, lc, lfree, nb), side(b, rb, rc, rfree, nb + len(lfree))],
                     result_types=[full])]


def reshape_simplify(op, rw):
    x = op.operands[0]
    t = op.results[0].type
    if x.type.shape == t.shape:
        return [x]
    p = x.op
    if p is not None and p.name == "reshape":
        inner = p.operands[0]
        if inner.type.shape == t.shape:
            return [inner]
        return [rw.build("reshape", [inner], result_types=[t])]
    if p is not None and p.name == "broadcast_in_dim" and p.operands[0].type.rank == 0:
        return [rw.build("broadcast_in_dim", [p.operands[0]], {"broadcast_dimensions": []},
                         result_types=[t])]
    return None


def _unit_reshape_map(src_shape, dst_shape):
    """For a reshape that only adds or removes unit dimensions: the position in ``dst`` of
    each non-unit dimension of ``src`` (None for unit ones). None when it does more."""
    src = [i for i, d in enumerate(src_shape) if d != 1]
    dst = [i for i, d in enumerate(dst_shape) if d != 1]
    if [src_shape[i] for i in src] != [dst_shape[i] for i in dst]:
        return None
    m = [None] * len(src_shape)
    for a, b in zip(src, dst):
        m[a] = b
    return m


def broadcast_simplify(op, rw):
    x = op.operands[0]
    t = op.results[0].type
    dims = list(op.attrs["broadcast_dimensions"])
    if x.type.shape == t.shape and dims == list(range(t.rank)):
        return [x]
    p = x.op
    if p is None:
        return None
    if p.name == "broadcast_in_dim":
        inner = p.operands[0]
        composed = [dims[d] for d in p.attrs["broadcast_dimensions"]]
        return [rw.build("broadcast_in_dim", [inner], {"broadcast_dimensions": composed},
                         result_types=[t])]
    if p.name == "reshape":
        inner = p.operands[0]
        m = _unit_reshape_map(inner.type.shape, x.type.shape)
        if m is not None and all(v is not None for v in m):
            composed = [dims[m[i]] for i in range(inner.type.rank)]
            return [rw.build("broadcast_in_dim", [inner], {"broadcast_dimensions": composed},
                             result_types=[t])]
        if m is not None:
            # Unit dimensions of the source go to result dimensions of size 1 or to any
            # dimension not otherwise used (a size-1 operand dimension broadcasts anywhere).
            used = {dims[m[i]] for i in range(inner.type.rank) if m[i] is not None}
            free = [d for d in range(t.rank) if d not in used]
            composed = []
            for i in range(inner.type.rank):
                if m[i] is not None:
                    composed.append(dims[m[i]])
                else:
                    if not free:
                        return None
                    composed.append(free.pop(0))
            if len(set(composed)) == len(composed):
                return [rw.build("broadcast_in_dim", [inner], {"broadcast_dimensions": composed},
                                 result_types=[t])]
    return None


def slice_simplify(op, rw):
    x = op.operands[0]
    st = list(op.attrs["start_indices"])
    li = list(op.attrs["limit_indices"])
    sd = list(op.attrs.get("strides") or [1] * len(st))
    if x.type.shape == op.results[0].type.shape and all(s == 0 for s in st) and all(d == 1 for d in sd):
        return [x]
    p = x.op
    if p is None:
        return None
    if p.name == "slice":
        pst = list(p.attrs["start_indices"])
        psd = list(p.attrs.get("strides") or [1] * len(pst))
        shape = op.results[0].type.shape
        nst = [pst[d] + st[d] * psd[d] for d in range(len(st))]
        nsd = [psd[d] * sd[d] for d in range(len(st))]
        nli = [nst[d] + (shape[d] - 1) * nsd[d] + 1 if shape[d] else nst[d] for d in range(len(st))]
        attrs = {"start_indices": nst, "limit_indices": nli}
        if any(s != 1 for s in nsd):
            attrs["strides"] = nsd
        return [rw.build("slice", [p.operands[0]], attrs)]
    if p.name == "concatenate":
        dim = p.attrs["dimension"]
        off = 0
        for a in p.operands:
            n = a.type.shape[dim]
            if off <= st[dim] and li[dim] <= off + n and n > 0:
                nst = list(st)
                nli = list(li)
                nst[dim] -= off
                nli[dim] -= off
                if a.type.shape == op.results[0].type.shape and all(s == 0 for s in nst) \
                        and all(d == 1 for d in sd):
                    return [a]
                attrs = {"start_indices": nst, "limit_indices": nli}
                if any(s != 1 for s in sd):
                    attrs["strides"] = sd
                return [rw.build("slice", [a], attrs)]
            off += n
    return None


def _constant_ints(v: Value):
    """The integer elements of ``v`` when it is a constant (through reshapes), else None."""
    op = v.op
    while op is not None and op.name == "reshape":
        op = op.operands[0].op
    if op is None or op.name != "constant" or not v.dtype.is_int:
        return None
    return [int(x) for x in np.asarray(op.attrs["value"]).reshape(-1)]


def _clamped_slice(x: Value, starts, sizes, rw) -> Value:
    """``x[starts : starts + sizes]`` with each start clamped into range, as dynamic_slice and
    gather clamp theirs."""
    st = [min(max(s, 0), n - k) for s, n, k in zip(starts, x.type.shape, sizes)]
    return rw.build("slice", [x], {"start_indices": st, "limit_indices": [s + k for s, k in zip(st, sizes)],
                                   "strides": [1] * len(st)})


def dynamic_slice_of_constant(op, rw):
    """dynamic_slice at constant start indices: a slice (an unrolled loop's ``xs[i]``)."""
    starts = [_constant_ints(i) for i in op.operands[1:]]
    if any(s is None or len(s) != 1 for s in starts):
        return None
    return [_clamped_slice(op.operands[0], [s[0] for s in starts], list(op.attrs["slice_sizes"]), rw)]


def gather_of_constant(op, rw):
    """A gather of one slice at a constant start (its indices one index vector, no batch
    dimensions): a slice and a reshape dropping the collapsed dimensions (``xs[i]`` with a
    constant ``i``, as loop unrolling leaves it)."""
    a = op.attrs
    x, idx = op.operands
    vec = _constant_ints(idx)
    out = op.results[0].type
    if vec is None or a.get("operand_batching_dims") or a.get("start_indices_batching_dims"):
        return None
    batch = [n for d, n in enumerate(idx.type.shape) if d != a["index_vector_dim"]]
    if any(n != 1 for n in batch) or out.rank != len(a.get("offset_dims") or ()):
        return None
    starts = [0] * x.type.rank
    for d, s in zip(a["start_index_map"], vec):
        starts[d] = s
    piece = _clamped_slice(x, starts, list(a["slice_sizes"]), rw)
    return [rw.build("reshape", [piece], result_types=[out])]


def concatenate_simplify(op, rw):
    dim = op.attrs["dimension"]
    ops = [v for v in op.operands if v.type.shape[dim] != 0]
    flat = []
    for v in ops:
        p = v.op
        if p is not None and p.name == "concatenate" and p.attrs["dimension"] == dim:
            flat.extend(p.operands)
        else:
            flat.append(v)
    if len(flat) == 1:
        return [flat[0]]
    if len(flat) != len(op.operands) or any(a is not b for a, b in zip(flat, op.operands)):
        if not flat:
            return None
        return [rw.build("concatenate", flat, {"dimension": dim})]
    return None


def pad_simplify(op, rw):
    if all(v == 0 for k in ("edge_padding_low", "edge_padding_high", "interior_padding")
           for v in op.attrs[k]):
        return [op.operands[0]]
    return None


# -- reductions ---------------------------------------------------------------------------

_IDEMPOTENT = op_table.with_trait(op_table.IDEMPOTENT)


def reduce_of_broadcast(op, rw):
    """reduce(broadcast(x)) over dimensions the broadcast made: reduce x over the rest, then
    (for a sum) multiply by the number of copies, then broadcast to the result."""
    if len(op.operands) != 2:
        return None
    b, init = op.operands
    kind = scalar_body_op(op.regions[0])
    if kind != "add" and kind not in _IDEMPOTENT:
        return None  # extra copies of x would change the result
    p = b.op
    if p is None or p.name != "broadcast_in_dim":
        return None
    x = p.operands[0]
    bd = list(p.attrs["broadcast_dimensions"])
    R = set(op.attrs["dimensions"])
    bt = b.type
    et = bt.dtype
    if any(bt.shape[r] == 0 for r in R):
        return None  # an empty reduction is its init; x * 0 would not be (inf, nan)
    # The reduction's identity: otherwise the init would be combined a different number of times.
    ident = op_table.identity(kind, et)
    if ident is None or not rw.is_splat_of(init, ident):
        return None
    # x dimensions that are reduced; unit dims expanded by the broadcast count as made copies.
    rx = []
    copies = 1
    for r in R:
        if r in bd:
            i = bd.index(r)
            if x.type.shape[i] == bt.shape[r]:
                rx.append(i)
            else:
                copies *= bt.shape[r]
                rx.append(i)  # a unit dimension: reducing it leaves the value unchanged
        else:
            copies *= bt.shape[r]
    if not [r for r in R if r not in bd] and all(x.type.shape[bd.index(r)] == bt.shape[r] for r in R):
        return None  # nothing made by the broadcast is reduced
    rx = sorted(rx)
    small = x
    if rx:
        red = rw.build_op("reduce", [x, init], {"dimensions": rx},
                          regions=[_clone_body(op.regions[0])])
        small = red.results[0]
    if kind == "add" and copies != 1:
        if et.is_pred:
            return None
        c = rw.splat_like(copies, small.type)
        small = rw.build("multiply", [small, c])
    # Broadcast the reduced operand to the result.
    out_t = op.results[0].type
    kept_b = [d for d in range(bt.rank) if d not in R]  # result dim k is b dim kept_b[k]
    kept_x = [i for i in range(x.type.rank) if i not in rx]
    dims = [kept_b.index(bd[i]) for i in kept_x]
    if small.type.shape == out_t.shape and dims == list(range(out_t.rank)):
        return [small]
    return [rw.build("broadcast_in_dim", [small], {"broadcast_dimensions": dims},
                     result_types=[out_t])]


def reduce_unit_dims(op, rw):
    """A reduction over dimensions of size 1 that starts from its identity is a reshape."""
    if len(op.operands) != 2:
        return None
    x, init = op.operands
    dims = op.attrs["dimensions"]
    if any(x.type.shape[d] != 1 for d in dims):
        return None
    ident = op_table.identity(scalar_body_op(op.regions[0]), x.type.dtype)
    if ident is None or not rw.is_splat_of(init, ident):
        return None
    return [rw.build("reshape", [x], result_types=[op.results[0].type])]


def window_sum_of_spread(op, rw):
    """A window sum of an array spread out by a pad, where each window meets exactly one of its
    elements, is that element repeated: the gradient of average (sum) pooling whose windows
    tile the input (window = stride = s), which jax and hlo.grad write as ``pad`` (s-1 zeros
    between the elements and at either end) then a ``reduce_window`` sum of s, a window per
    output that also reads the zeros. ``broadcast_in_dim`` + ``reshape`` instead: out[i] =
    g[i // s] along each such axis (the 2x2 average pooling's gradient of [16,64,64,32] on the
    CPU: the pad's kernel alone took 42 ms, an integer division per index and element)."""
    if len(op.operands) != 2 or scalar_body_op(op.regions[0]) != "add":
        return None
    p, init = op.operands
    pad = p.op
    if pad is None or pad.name != "pad" or not rw.is_splat_of(init, 0) or not rw.is_splat_of(pad.operands[1], 0):
        return None
    g = pad.operands[0]
    a, r = op.attrs, g.type.rank
    wd = list(a.get("window_dimensions", [1] * r))
    if any(any(x != 1 for x in a.get(k, [1] * r)) for k in ("window_strides", "base_dilations", "window_dilations")):
        return None
    if any(tuple(x) != (0, 0) for x in a.get("padding", [(0, 0)] * r)):
        return None
    lo, hi, mid = (list(pad.attrs[k]) for k in ("edge_padding_low", "edge_padding_high", "interior_padding"))
    spread = []
    for d in range(r):
        w = wd[d]
        if w == 1 and lo[d] == hi[d] == mid[d] == 0:
            continue
        if w < 2 or not lo[d] == hi[d] == mid[d] == w - 1:
            return None
        spread.append(d)
    if not spread:
        return None
    shape, dims = [], []
    for d in range(r):
        dims.append(len(shape))
        shape.append(g.type.shape[d])
        if d in spread:
            shape.append(wd[d])
    t = op.results[0].type
    b = rw.build("broadcast_in_dim", [g], {"broadcast_dimensions": dims},
                 result_types=[TensorType(tuple(shape), t.dtype)])
    return [rw.build("reshape", [b], result_types=[t])]


def _clone_body(r):
    from hlo.ir.clone import clone_region
    return clone_region(r, {})


PATTERNS = {
    "add": [add_zero], "subtract": [sub_zero], "multiply": [mul_one], "divide": [div_one],
    "or": [add_zero, idempotent], "xor": [add_zero],
    "negate": [involution], "not": [involution],
    "maximum": [idempotent], "minimum": [idempotent], "and": [idempotent],
    "select": [select_simplify], "convert": [convert_simplify],
    "transpose": [transpose_simplify], "reshape": [reshape_simplify],
    "broadcast_in_dim": [broadcast_simplify], "slice": [slice_simplify],
    "concatenate": [concatenate_simplify], "pad": [pad_simplify],
    "reduce": [reduce_unit_dims, reduce_of_broadcast], "dot_general": [dot_outer],
    "reduce_window": [window_sum_of_spread],
    "dynamic_slice": [dynamic_slice_of_constant], "gather": [gather_of_constant],
}


@register_pass("algebraic-simplifier", "identities, shape-op chains, slices of concatenates, reductions of broadcasts")
class AlgebraicSimplifier(Pass):
    name = "algebraic-simplifier"

    def __init__(self, config=None):
        pass

    def run(self, module: Module) -> bool:
        return apply_patterns(module, PATTERNS)
