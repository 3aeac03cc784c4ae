"""hlo.lax.associative_scan: jax.lax's parallel prefix scan of a user's associative function over
pytrees of arrays, built as ``hlo.ir.prefix_scan`` builds hlo's own running reductions (log2(n)
levels of strided slices, each level's pairs and its interleaved result kept apart by one
``optimization_barrier``, so that fusing a level into its readers does not double its work)."""
from __future__ import annotations

from typing import Callable, List

from .. import tree_util
from ..errors import ShapeError
from ..ir.prefix_scan import _interleave, _slice_axis
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit
from .common import as_tracer, canonical_axis
from .reductions import _TracerScanOps
from .structural import concatenate, rev


@api_function
def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """The inclusive scan of ``fn`` (associative; ``fn(a, b)`` with ``a`` the earlier elements,
    on pytrees shaped like ``elems`` whose leaves carry the scanned axis) along ``axis``."""
    what = "lax.associative_scan"
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        raise ValueError(f"{what}: elems has no arrays")
    xs = [as_tracer(x, what=what) for x in leaves]
    ax = canonical_axis(what, axis, xs[0].ndim)
    n = xs[0].shape[ax]
    for x in xs[1:]:
        if x.ndim <= ax or x.shape[ax] != n:
            raise ShapeError(f"{what}: every array of elems needs axis {axis} of length {n}, got shapes "
                             f"{[t.shape for t in xs]}")
    ops = [_TracerScanOps(x.weak_type) for x in xs]

    def combine(a: List[Tracer], b: List[Tracer]) -> List[Tracer]:
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"{what}: fn must return the structure of elems {tree}, got {out_tree}")
        outs = [as_tracer(o, what=what) for o in out_leaves]
        for o, ref in zip(outs, a):
            if o.shape != ref.shape:
                raise ShapeError(f"{what}: fn must keep its operands' shapes (elementwise in the scanned "
                                 f"axis), got {o.shape} from {ref.shape}")
        return outs

    def kept(ts: List[Tracer]) -> List[Tracer]:
        return list(emit("optimization_barrier", ts, {}, weak_type=[t.weak_type for t in ts]))

    def sl(i, t, start, limit, stride=1):
        return _slice_axis(ops[i], t, ax, start, limit, stride)

    def scan(ts: List[Tracer]) -> List[Tracer]:
        k = ts[0].shape[ax]
        if k < 2:
            return ts
        pairs = kept(combine([sl(i, t, 0, k - 1, 2) for i, t in enumerate(ts)],
                             [sl(i, t, 1, k, 2) for i, t in enumerate(ts)]))
        odd = scan(pairs)
        m = odd[0].shape[ax]
        first = [sl(i, t, 0, 1) for i, t in enumerate(ts)]
        if k > 2:
            rest = [sl(i, t, 2, k, 2) for i, t in enumerate(ts)]
            lead = [sl(i, o, 0, m - 1) for i, o in enumerate(odd)] if k % 2 == 0 else odd
            even = [concatenate([f, e], ax) for f, e in zip(first, combine(lead, rest))]
        else:
            even = first
        return kept([_interleave(ops[i], e, o, ax) for i, (e, o) in enumerate(zip(even, odd))])

    if reverse:
        xs = [rev(x, [ax]) for x in xs]
    out = scan(xs)
    if reverse:
        out = [rev(x, [ax]) for x in out]
    return tree_util.tree_unflatten(tree, out)
