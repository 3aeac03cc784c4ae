"""``sort``: sorts slices along one dimension with a comparator region.

Comparators that compare key functions of the two elements lexicographically (``LT(k1(a),
k1(b))``, or ``or(LT(k1..), and(EQ(k1..), ...))`` as JAX writes multi-key and NaN-canonicalizing
comparators) sort by numeric keys with numpy's stable lexsort, after checking on the data that
both sides of each compare compute the same key. Any other elementwise comparator runs a vectorized,
stable bottom-up merge sort: at each level every element finds its place in the neighbouring
run by a binary search, so the comparator is evaluated O(n log^2 n) times, but on whole arrays
at once (log^2 n region evaluations). Comparators that are not elementwise fall back to
Python's sort, one comparator call per comparison. All of these are stable, which satisfies both
``is_stable`` values. A comparator that is not a strict weak order gives some permutation.
"""
from __future__ import annotations

import functools

import numpy as np

from . import numerics as nm
from .registry import attr, handler


def _deps(v, body, memo):
    """The argument numbers of ``body`` that ``v`` depends on (values from outside: none)."""
    r = memo.get(v)
    if r is not None:
        return r
    if v.is_arg:
        r = frozenset([v.index]) if v.owner is body else frozenset()
    elif v.op is None or v.op.parent is not body:
        r = frozenset()
    else:
        r = frozenset().union(*(_deps(u, body, memo) for u in v.op.operands)) if v.op.operands \
            else frozenset()
    memo[v] = r
    return r


def _compare_of(v, directions):
    op = v.op
    if op is None or op.name != "compare" or op.attrs["comparison_direction"] not in directions:
        return None
    return op


def _key_plan(body):
    """Parse a comparator of the form ``LT(a1, b1)`` or ``or(LT(a1, b1), and(EQ(a1, b1), rest))``
    (GT instead of LT, operands of or/and in either order) into key levels
    ``[(a, b, direction, compare_type)]``, or None."""
    return _parse_levels(body.outputs[0]) if len(body.outputs) == 1 else None


def _parse_levels(v):
    c = _compare_of(v, ("LT", "GT"))
    if c is not None:
        return [(c.operands[0], c.operands[1], c.attrs["comparison_direction"], c.attrs.get("compare_type"))]
    op = v.op
    if op is None or op.name != "or" or len(op.operands) != 2:
        return None
    for first, second in (op.operands, op.operands[::-1]):
        c = _compare_of(first, ("LT", "GT"))
        land = second.op
        if c is None or land is None or land.name != "and":
            continue
        a, b = c.operands
        for e, rest in (land.operands, land.operands[::-1]):
            eq = _compare_of(e, ("EQ",))
            if eq is None or eq.attrs.get("compare_type") != c.attrs.get("compare_type"):
                continue
            if not ((eq.operands[0] is a and eq.operands[1] is b) or (eq.operands[0] is b and eq.operands[1] is a)):
                continue
            tail = _parse_levels(rest)
            if tail is not None:
                return [(a, b, c.attrs["comparison_direction"], c.attrs.get("compare_type"))] + tail
    return None


def _same_bits(p, q):
    if p.dtype == np.bool_:
        return np.array_equal(p, q)
    return np.array_equal(nm.uint_view(p), nm.uint_view(q))


def _key_sort_perm(it, body, flat, env):
    """The stable sorting permutation when the comparator compares key functions of the two
    elements lexicographically (see ``_key_plan``), checked on the data; else None."""
    plan = _key_plan(body)
    if plan is None:
        return None
    memo = {}
    for a, b, _, _ in plan:
        da, db = _deps(a, body, memo), _deps(b, body, memo)
        if not da or not db:
            return None
        pa, pb = {i % 2 for i in da}, {i % 2 for i in db}
        if len(pa) != 1 or len(pb) != 1 or pa == pb:
            return None
    args = []
    for f in flat:
        args += [f, f]  # each element compared with itself: both sides give its key
    values = it.eval_region_batched(body, args, env, flat[0].shape,
                                    extra=[v for a, b, _, _ in plan for v in (a, b)])[1:]
    keys = []
    for lvl, (a, b, direction, ctype) in enumerate(plan):
        ka, kb = values[2 * lvl], values[2 * lvl + 1]
        if not (nm.is_bool(ka.dtype) or ka.dtype.kind in "iu" or nm.is_float(ka.dtype)):
            return None  # complex and 2/4-bit keys: the comparator itself decides
        if not _same_bits(ka, kb):
            return None
        key = nm.order_key(np.asarray(ka), ctype)
        lhs_first = min(_deps(a, body, memo)) % 2 == 0
        descending = (direction == "GT") == lhs_first
        keys.append(~key if descending else key)
    return np.lexsort(keys[::-1], axis=-1)


@handler("sort")
def _sort(it, op, ins, env):
    if ins[0].ndim == 0:
        return list(ins)
    dim = attr(op, "dimension")
    if dim < 0:
        dim += ins[0].ndim
    body = op.regions[0]
    xs = [np.moveaxis(x, dim, -1) for x in ins]
    shape = xs[0].shape
    m = shape[-1]
    if m <= 1 or xs[0].size == 0:
        return list(ins)
    flat = [x.reshape(-1, m) for x in xs]
    perm = _key_sort_perm(it, body, flat, env) if it.batchable(body) else None
    if perm is not None:
        pass
    elif it.batchable(body):
        perm = _merge_sort_perm(it, body, flat, env)
    else:
        perm = _python_sort_perm(it, body, flat, env)
    out = [np.take_along_axis(f, perm, axis=-1).reshape(shape) for f in flat]
    return [np.moveaxis(o, -1, dim) for o in out]


def _less(it, body, flat, env, a_rows, a_cols, b_rows, b_cols):
    """comparator(elements at a, elements at b), vectorized."""
    args = []
    for f in flat:
        args.append(f[a_rows, a_cols])
        args.append(f[b_rows, b_cols])
    return np.asarray(it.eval_region_batched(body, args, env, a_rows.shape)[0], bool)


def _merge_sort_perm(it, body, flat, env):
    rows, m = flat[0].shape
    perm = np.tile(np.arange(m, dtype=np.int64), (rows, 1))  # perm[r, p]: source of position p
    row_ix = np.arange(rows)[:, None]
    pos = np.arange(m, dtype=np.int64)[None, :]
    w = 1
    while w < m:
        run = pos // w
        start = (run // 2) * 2 * w
        in_a = run % 2 == 0
        offset = pos - np.where(in_a, start, start + w)
        partner_start = np.where(in_a, start + w, start)
        partner_len = np.where(in_a, np.clip(m - (start + w), 0, w), w)
        lo = np.zeros((rows, m), np.int64)
        hi = np.broadcast_to(partner_len, (rows, m)).copy()
        in_a_b = np.broadcast_to(in_a, (rows, m))
        rr = np.broadcast_to(row_ix, (rows, m))
        me = np.broadcast_to(pos, (rows, m))
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            other = np.minimum(np.broadcast_to(partner_start, (rows, m)) + mid, m - 1)
            src_me = perm[rr, me]
            src_other = perm[rr, other]
            # element in run A: count partner elements strictly less (partner < me);
            # element in run B: count partner elements not greater (!(me < partner)).
            first = np.where(in_a_b, src_other, src_me)
            second = np.where(in_a_b, src_me, src_other)
            lt = _less(it, body, flat, env, rr, first, rr, second)
            go_right = np.where(in_a_b, lt, ~lt)
            lo = np.where(active & go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
        new_pos = np.broadcast_to(start + offset, (rows, m)) + lo
        new_perm = np.full((rows, m), -1, np.int64)
        new_perm[rr, new_pos] = perm
        if (new_perm < 0).any():  # comparator is not a strict weak order
            return _python_sort_perm(it, body, flat, env)
        perm = new_perm
        w *= 2
    return perm


def _python_sort_perm(it, body, flat, env):
    rows, m = flat[0].shape

    def less(r, i, j):
        args = []
        for f in flat:
            args.append(np.asarray(f[r, i]))
            args.append(np.asarray(f[r, j]))
        return bool(it.eval_region(body, args, env)[0])

    perm = np.empty((rows, m), np.int64)
    for r in range(rows):
        def cmp(i, j, r=r):
            if less(r, i, j):
                return -1
            if less(r, j, i):
                return 1
            return 0
        perm[r] = sorted(range(m), key=functools.cmp_to_key(cmp))
    return perm
