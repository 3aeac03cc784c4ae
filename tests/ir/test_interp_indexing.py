"""Interpreter: gather and scatter against a direct transcription of the spec's formulas (element
by element) and against jax.lax; batching dimensions, index clamping (gather), out-of-bounds
skipping (scatter), duplicate indices, and update regions (fast paths and generic)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from interp_helpers import assert_same, body, region, run_op

from hlo.ir import tensor

jax = pytest.importorskip("jax")
lax = jax.lax


# ------------------------------------------------------------------------------------------
# The spec's formulas, element by element
# ------------------------------------------------------------------------------------------

def ref_gather(x, idx, offset_dims, collapsed, obatch, ibatch, sim, ivd, ss, result_shape):
    out = np.zeros(result_shape, x.dtype)
    batch_dims = [d for d in range(len(result_shape)) if d not in offset_dims]
    for ri in itertools.product(*map(range, result_shape)):
        bi = [ri[d] for d in batch_dims]
        if ivd < idx.ndim:
            sidx = bi[:ivd] + [slice(None)] + bi[ivd:]
            start = list(idx[tuple(sidx)])
        else:
            start = [idx[tuple(bi)]]
        full_start = [0] * x.ndim
        for ds, do in enumerate(sim):
            full_start[do] = int(np.clip(int(start[ds]), 0, x.shape[do] - ss[do]))
        full_batch = [0] * x.ndim
        for i, do in enumerate(obatch):
            dstart = ibatch[i]
            full_batch[do] = bi[dstart - (0 if dstart < ivd else 1)]
        off = [ri[d] for d in offset_dims]
        full_off, k = [], 0
        for d in range(x.ndim):
            if d in collapsed or d in obatch:
                full_off.append(0)
            else:
                full_off.append(off[k])
                k += 1
        oi = tuple(a + b + c for a, b, c in zip(full_start, full_batch, full_off))
        out[ri] = x[oi]
    return out


def ref_scatter(x, idx, upd, uwd, iwd, ibatch, sibatch, sdod, ivd, combine):
    out = x.copy()
    usd = [d for d in range(upd.ndim) if d not in uwd]
    for ui in itertools.product(*map(range, upd.shape)):
        usi = [ui[d] for d in usd]
        if ivd < idx.ndim:
            sidx = usi[:ivd] + [slice(None)] + usi[ivd:]
            start = list(idx[tuple(sidx)])
        else:
            start = [idx[tuple(usi)]]
        full_start = [0] * x.ndim
        for ds, di in enumerate(sdod):
            full_start[di] = int(start[ds])
        full_batch = [0] * x.ndim
        for i, di in enumerate(ibatch):
            dstart = sibatch[i]
            full_batch[di] = usi[dstart - (0 if dstart < ivd else 1)]
        wi = [ui[d] for d in uwd]
        full_w, k = [], 0
        for d in range(x.ndim):
            if d in iwd or d in ibatch:
                full_w.append(0)
            else:
                full_w.append(wi[k])
                k += 1
        ri = tuple(a + b + c for a, b, c in zip(full_start, full_batch, full_w))
        if all(0 <= r < n for r, n in zip(ri, x.shape)):
            out[ri] = combine(out[ri], upd[ui])
    return out


GATHER_CASES = [
    # operand shape, indices shape, offset_dims, collapsed, operand_batching, indices_batching,
    # start_index_map, index_vector_dim, slice_sizes
    ((5, 6), (3, 1), [1], [0], [], [], [0], 1, [1, 6]),          # rows
    ((5, 6), (4, 2), [1, 2], [], [], [], [0, 1], 1, [2, 3]),       # 2-d windows, clamped
    ((5, 6), (2, 3), [], [0, 1], [], [], [1, 0], 0, [1, 1]),       # index vector in dim 0
    ((5, 6), (4,), [1], [0], [], [], [0], 1, [1, 6]),              # implicit index vector dim
    ((3, 5, 4), (3, 2, 1), [2], [1], [0], [0], [1], 2, [1, 1, 4]),  # batching dims
    ((2, 3, 4, 2), (2, 2, 3, 2), [3, 4], [1], [0], [1], [2, 1], 3, [1, 1, 2, 2]),  # spec example
    ((4, 3), (0, 1), [1], [0], [], [], [0], 1, [1, 3]),            # no indices
    ((6,), (), [0], [], [], [], [0], 0, [3]),                      # scalar index
]


def _gather_attrs(c):
    _, _, off, col, ob, ib, sim, ivd, ss = c
    return {"offset_dims": off, "collapsed_slice_dims": col, "operand_batching_dims": ob,
            "start_indices_batching_dims": ib, "start_index_map": sim, "index_vector_dim": ivd,
            "slice_sizes": ss}


@pytest.mark.parametrize("case", GATHER_CASES, ids=range(len(GATHER_CASES)))
@pytest.mark.parametrize("idt", [np.int32, np.uint8, np.int64], ids=lambda d: np.dtype(d).name)
def test_gather_vs_spec_formula(case, idt):
    xs, ishape, off, col, ob, ib, sim, ivd, ss = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    lo = 0 if np.dtype(idt).kind == "u" else -3
    idx = rng.integers(lo, 9, ishape).astype(idt)  # includes out-of-range starts: clamped
    got = run_op("gather", x, idx, attrs=_gather_attrs(case))
    want = ref_gather(x, idx, off, col, ob, ib, sim, ivd, ss, got.shape)
    assert_same(got, want)


@pytest.mark.parametrize("case", GATHER_CASES[:6], ids=range(6))
def test_gather_vs_jax(case):
    xs, ishape, off, col, ob, ib, sim, ivd, ss = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    idx = rng.integers(-3, 9, ishape).astype(np.int32)
    got = run_op("gather", x, idx, attrs=_gather_attrs(case))
    idx = idx[..., None] if ivd == len(ishape) else np.moveaxis(idx, ivd, -1)  # jax: vector last
    dn = lax.GatherDimensionNumbers(offset_dims=tuple(off), collapsed_slice_dims=tuple(col),
                                    start_index_map=tuple(sim), operand_batching_dims=tuple(ob),
                                    start_indices_batching_dims=tuple(ib))
    want = np.asarray(lax.gather(x, idx, dn, tuple(ss), mode=lax.GatherScatterMode.CLIP))
    assert_same(got, want)


SCATTER_CASES = [
    # operand shape, indices shape, updates shape, update_window_dims, inserted_window_dims,
    # input_batching, indices_batching, scatter_dims_to_operand_dims, index_vector_dim
    ((6, 4), (5, 1), (5, 4), [1], [0], [], [], [0], 1),                  # rows, duplicates
    ((6, 4), (3, 2), (3, 2, 3), [1, 2], [], [], [], [0, 1], 1),           # windows (partly OOB)
    ((6, 4), (7,), (7,), [], [0, 1], [], [], [1], 1),                     # wait: fixed below
    ((2, 3, 4, 2), (2, 2, 3, 2), (2, 2, 3, 2, 2), [3, 4], [1], [0], [1], [2, 1], 3),  # spec example
    ((3, 5), (3, 2, 1), (3, 2), [], [1], [0], [0], [1], 2),               # batching, scalars
]
SCATTER_CASES[2] = ((6, 4), (7, 2), (7,), [], [0, 1], [], [], [1, 0], 1)


def _scatter_attrs(c):
    _, _, _, uwd, iwd, ib, sib, sdod, ivd = c
    return {"update_window_dims": uwd, "inserted_window_dims": iwd, "input_batching_dims": ib,
            "scatter_indices_batching_dims": sib, "scatter_dims_to_operand_dims": sdod,
            "index_vector_dim": ivd}


def _replace_body(dt):
    return region([dt, dt], lambda b, old, new: [new])


def _unbatchable_max(dt):
    def fn(b, p, q):
        m = b.value("maximum", [p, q])
        r = b.value("reshape", [m], result_types=[tensor((1,), dt)])
        return [b.value("reshape", [r], result_types=[tensor((), dt)])]
    return region([dt, dt], fn)


def _affine_body(dt):
    """old * 2 + new: not commutative or associative, so the update order is observable."""
    def fn(b, old, new):
        two = b.value("constant", [], attrs={"value": np.array(2, dt)})
        return [b.value("add", [b.value("multiply", [old, two]), new])]
    return region([dt, dt], fn)


BODIES = {
    "add": (lambda dt: body("add", dt), lambda a, b: a + b),
    "replace": (_replace_body, lambda a, b: b),
    "max": (lambda dt: body("maximum", dt), max),
    "max_unbatchable": (_unbatchable_max, max),
    "affine": (_affine_body, lambda a, b: a * 2 + b),
    "mul": (lambda dt: body("multiply", dt), lambda a, b: a * b),
}


@pytest.mark.parametrize("case", SCATTER_CASES, ids=range(len(SCATTER_CASES)))
@pytest.mark.parametrize("kind", list(BODIES))
@pytest.mark.parametrize("dt", [np.int32, np.float64], ids=lambda d: np.dtype(d).name)
def test_scatter_vs_spec_formula(case, kind, dt):
    xs, ishape, ushape, uwd, iwd, ib, sib, sdod, ivd = case
    rng = np.random.default_rng(2)
    x = rng.integers(-5, 6, xs).astype(dt)
    idx = rng.integers(-2, 7, ishape).astype(np.int32)  # some out of bounds: skipped per element
    upd = rng.integers(-5, 6, ushape).astype(dt)
    make_body, combine = BODIES[kind]
    got = run_op("scatter", x, idx, upd, attrs=_scatter_attrs(case), regions=[make_body(np.dtype(dt))])
    want = ref_scatter(x, idx, upd, uwd, iwd, ib, sib, sdod, ivd, combine)
    assert_same(got, want)


def test_scatter_add_vs_jax_in_bounds():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    idx = rng.integers(0, 8, (20, 1)).astype(np.int32)
    upd = rng.standard_normal((20, 5)).astype(np.float32)
    c = ((8, 5), (20, 1), (20, 5), [1], [0], [], [], [0], 1)
    got = run_op("scatter", x, idx, upd, attrs=_scatter_attrs(c), regions=[body("add", np.float32)])
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    want = np.asarray(lax.scatter_add(x, idx, upd, dn))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_variadic_scatter():
    x1 = np.zeros(5, np.int32)
    x2 = np.ones(5, np.float32)
    idx = np.array([[1], [3], [1], [9]], np.int32)
    u1 = np.array([1, 2, 3, 4], np.int32)
    u2 = np.array([2, 3, 4, 5], np.float32)

    def fn(b, a1, a2, n1, n2):
        return [b.value("add", [a1, n1]), b.value("multiply", [a2, n2])]
    body_r = region([np.int32, np.float32, np.int32, np.float32], fn)
    attrs = {"update_window_dims": [], "inserted_window_dims": [0],
             "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1}
    o1, o2 = run_op("scatter", x1, x2, idx, u1, u2, attrs=attrs, regions=[body_r])
    assert_same(o1, np.array([0, 4, 0, 2, 0], np.int32))
    assert_same(o2, np.array([1, 8, 1, 3, 1], np.float32))


def test_scatter_does_not_modify_operand():
    x = np.zeros(4, np.float32)
    idx = np.array([[0]], np.int32)
    run_op("scatter", x, idx, np.array([5.0], np.float32), attrs={
        "update_window_dims": [], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
        "index_vector_dim": 1}, regions=[body("add", np.float32)])
    assert not x.any()
