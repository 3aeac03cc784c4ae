"""hlo.numpy creation, shape manipulation, sorting and products against jax.numpy."""
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, assert_same, compare, hlo_run, jax_run, rand, stable_seed

import hlo.numpy as hnp


def _shape_table(np_, x, y):
    """x: (3, 4, 2), y: (3, 4, 2) of the same dtype."""
    return {
        "reshape": x.reshape(4, -1), "reshape_f": np_.reshape(x, (2, 12), order="F"),
        "ravel": np_.ravel(x), "transpose": np_.transpose(x, (2, 0, 1)), "T": x.T,
        "moveaxis": np_.moveaxis(x, (0, 1), (-1, 0)), "swapaxes": np_.swapaxes(x, 0, 2),
        "expand": np_.expand_dims(x, (0, 3)), "squeeze": np_.squeeze(x[:1, :, 1:], axis=(0, 2)),
        "broadcast_to": np_.broadcast_to(x[:, :1], (2, 3, 5, 2)),
        "broadcast_arrays": np_.broadcast_arrays(x[:1], y[:, :, :1]),
        "concatenate": np_.concatenate([x, y], axis=-1), "concat_none": np_.concatenate([x, y], axis=None),
        "stack": np_.stack([x, y], axis=1), "vstack": np_.vstack([x[0], y[1]]),
        "hstack": np_.hstack([x[0], y[1]]), "dstack": np_.dstack([x[0], y[0]]),
        "column_stack": np_.column_stack([x[0, :, 0], y[0, :, 1]]),
        "split": np_.split(x, 2, axis=1), "split_idx": np_.split(x, [1, 3], axis=1),
        "array_split": np_.array_split(x, 3, axis=1), "hsplit": np_.hsplit(x, 2),
        "tile": np_.tile(x, (2, 1, 1, 2)), "tile_small": np_.tile(x[0, 0], 3),
        "repeat": np_.repeat(x, 2, axis=0), "repeat_none": np_.repeat(x[0], 2),
        "repeat_counts": np_.repeat(x, np.array([2, 0, 1]), axis=0),
        "pad": np_.pad(x, ((1, 0), (0, 2), (1, 1))), "pad_value": np_.pad(x, 1, constant_values=3),
        "pad_edge": np_.pad(x, ((2, 1), (1, 1), (0, 0)), mode="edge"),
        "pad_reflect": np_.pad(x, ((2, 2), (3, 3), (1, 1)), mode="reflect"),
        "pad_symmetric": np_.pad(x, ((4, 1), (1, 5), (0, 0)), mode="symmetric"),
        "pad_wrap": np_.pad(x, ((1, 4), (0, 0), (3, 0)), mode="wrap"),
        "flip": np_.flip(x, axis=(0, 2)), "flip_all": np_.flip(x), "fliplr": np_.fliplr(x),
        "flipud": np_.flipud(x), "rot90": np_.rot90(x), "rot90_3": np_.rot90(x, 3, axes=(1, 2)),
        "roll": np_.roll(x, 3), "roll_axes": np_.roll(x, (1, -5), axis=(0, 1)),
        "take": np_.take(x, np.array([[0, 3], [1, -1]]), axis=1), "take_flat": np_.take(x, np.array([5, 0, 23])),
        "take_oob_fill": np_.take(x, np.array([0, 9]), axis=1, mode="fill", fill_value=7),
        "take_clip": np_.take(x, np.array([-9, 9]), axis=1, mode="clip"),
        "take_along": np_.take_along_axis(x, np_.argsort(y, axis=1), axis=1),
        "take_along_bcast": np_.take_along_axis(x, np.array([[[1], [0], [3], [2]]]), axis=1),
        "tril": np_.tril(x[..., 0], 1), "triu": np_.triu(x[..., 0], -1), "tril3": np_.tril(np_.moveaxis(x, 2, 0)),
        "diagonal": np_.diagonal(x, 1), "diagonal_axes": np_.diagonal(x, -1, 1, 2),
        "trace": np_.trace(x[..., 0]), "sort": np_.sort(x, axis=1), "sort_none": np_.sort(x, axis=None),
        "argsort": np_.argsort(x, axis=0), "argsort_desc": np_.argsort(x, axis=1, descending=True),
        "sort_desc": np_.sort(x, axis=-1, descending=True), "append": np_.append(x, y, axis=2),
        "atleast": np_.atleast_3d(x[0, 0]), "unstack": np_.unstack(x, axis=2),
        "where": np_.where(x > y, x, y), "astype": x.astype(np_.float32),
    }


@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_shape_functions(target, dtype):
    rng = np.random.default_rng(stable_seed(dtype))
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    x = rand(rng, (3, 4, 2), dt)
    y = rand(rng, (3, 4, 2), dt)
    got = hlo_run(lambda x, y: _shape_table(hnp, x, y), (x, y), target)
    want = jax_run(lambda x, y: _shape_table(jnp, x, y), (x, y))
    for k in want:
        w = want[k]
        if k.startswith("argsort") and dt.itemsize == 8:
            w = w.astype(np.int32)  # hlo's indices are int32; jax's x64 mode makes them int64
        assert_same(got[k], w, what=k)


def test_sort_orders_nans_and_signed_zeros_as_numpy(target):
    x = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, np.nan, -2.0, np.inf, 0.0], np.float32)
    got = hlo_run(lambda x: (hnp.sort(x), hnp.argsort(x), hnp.sort(x, descending=True)), (x,), target)
    np.testing.assert_array_equal(got[0], np.sort(x))
    np.testing.assert_array_equal(got[1], np.argsort(x, kind="stable"))
    want_desc = np.asarray(jnp.sort(x, descending=True))
    np.testing.assert_array_equal(got[2], want_desc)


def _creation_table(np_, a):
    return {
        "zeros": np_.zeros((2, 3)), "ones_i": np_.ones(4, dtype=np_.int8), "empty": np_.empty((0, 2)),
        "full": np_.full((2, 2), 7), "full_f": np_.full((3,), 2.5, dtype=np_.float16),
        "full_arr": np_.full((2, 3), a[0, :3]), "zeros_like": np_.zeros_like(a),
        "ones_like": np_.ones_like(a, dtype=np_.int32), "full_like": np_.full_like(a, 3),
        "arange": np_.arange(10), "arange2": np_.arange(2, 11, 3), "arange_neg": np_.arange(5, -3, -2),
        "arange_f": np_.arange(0.5, 3.0, 0.25), "arange_dt": np_.arange(4, dtype=np_.float32),
        "linspace": np_.linspace(0, 1, 7), "linspace_ne": np_.linspace(-1.0, 2.0, 6, endpoint=False),
        "linspace_arr": np_.linspace(a[0], a[1], 4, axis=-1), "linspace_int": np_.linspace(0, 10, 4, dtype=np_.int32),
        "logspace": np_.logspace(0, 2, 3), "eye": np_.eye(3), "eye_k": np_.eye(3, 5, k=2, dtype=np_.int32),
        "identity": np_.identity(2), "tri": np_.tri(3, 4, -1), "diag_v": np_.diag(a[0], k=1),
        "diag_m": np_.diag(a, k=-1), "meshgrid": np_.meshgrid(a[0, :2], a[1]),
        "meshgrid_ij": np_.meshgrid(a[0, :2], a[1], indexing="ij"),
        "array_list": np_.array([[1, 2], [3, 4]]), "array_mixed": np_.array([1, 2.5, True]),
        "array_tracers": np_.array([a[0, 0], a[1, 1], 3.0]), "asarray": np_.asarray(a, dtype=np_.float16),
        "array_nd": np_.array(a[0], ndmin=3), "asarray_np": np_.asarray(np.arange(3, dtype=np.int16)),
    }


def test_creation_functions(target):
    a = rand(np.random.default_rng(0), (3, 4), "float32")
    got = hlo_run(lambda a: _creation_table(hnp, a), (a,), target)
    want = jax_run(lambda a: _creation_table(jnp, a), (a,))
    for k in want:
        assert_same(got[k], want[k], rtol=2e-6, atol=1e-6, what=k)


def test_iota(target):
    got = hlo_run(lambda: (hnp.iota(4), hnp.iota((2, 3), dtype=hnp.float32, axis=1)), (), target)
    np.testing.assert_array_equal(got[0], np.arange(4, dtype=np.int32))
    assert got[0].dtype == np.int32
    np.testing.assert_array_equal(got[1], np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))


def _product_table(np_, a, b, c, v):
    """a: (2, 3, 4), b: (4, 5), c: (2, 4, 3), v: (4,)."""
    return {
        "matmul": a @ b, "matmul_batch": np_.matmul(a, c),
        "matmul_vec": a @ v, "vec_matmul": v @ b, "vec_vec": v @ v,
        "matmul_bcast": np_.matmul(a[:1], c), "dot": np_.dot(a, b), "dot_nd": np_.dot(a, c[0]),
        "dot_scalar": np_.dot(a, 2.0), "vdot": np_.vdot(a[0], c[1].T), "inner": np_.inner(a, v),
        "outer": np_.outer(v, b[0]), "tensordot": np_.tensordot(a, c, axes=([1, 2], [2, 1])),
        "tensordot_int": np_.tensordot(a, b, axes=1), "tensordot0": np_.tensordot(v, v, axes=0),
        "kron": np_.kron(b[:2, :2], v[:3]),
        "einsum_mm": np_.einsum("bij,jk->bik", a, b), "einsum_bmm": np_.einsum("bij,bjk->bik", a, c),
        "einsum_trace": np_.einsum("ii", b[:, :4]), "einsum_diag": np_.einsum("ii->i", b[:, :4]),
        "einsum_sum": np_.einsum("bij->j", a), "einsum_outer": np_.einsum("i,j->ij", v, b[0]),
        "einsum_ell": np_.einsum("...ij,jk->...ik", a, b), "einsum_implicit": np_.einsum("bij,jk", a, b),
        "einsum_three": np_.einsum("bij,jk,k->bi", a, b, b[0]), "einsum_transpose": np_.einsum("ijk->kij", a),
        "einsum_dot": np_.einsum("i,i", v, v), "einsum_bcast": np_.einsum("...i,...i->...", a, a[:1]),
    }


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_products(target, dtype):
    rng = np.random.default_rng(stable_seed(dtype))
    args = [rand(rng, s, dtype) if dtype not in ("int32",) else rand(rng, s, dtype, -3, 4)
            for s in [(2, 3, 4), (4, 5), (2, 4, 3), (4,)]]
    got = hlo_run(lambda *a: _product_table(hnp, *a), args, target)
    want = jax_run(lambda *a: _product_table(jnp, *a), args)
    for k in want:
        assert_same(got[k], want[k], rtol=1e-2 if dtype == "float16" else 2e-6, atol=1e-2 if dtype == "float16" else 2e-6, what=k)


def test_matmul_mixed_dtypes_and_preferred_type(target):
    rng = np.random.default_rng(9)
    a = rand(rng, (3, 4), "int8")
    b = rand(rng, (4, 2), "float16")
    c = rand(rng, (4, 2), "int8")

    def f(np_):
        return lambda a, b, c: {"mixed": a @ b, "pref": np_.matmul(a, c, preferred_element_type=np_.int32),
                                "einsum_pref": np_.einsum("ij,jk->ik", a, c, preferred_element_type=np_.float32)}
    compare(f(hnp), f(jnp), (a, b, c), target, rtol=1e-3)


def test_matrix_times_batch_of_matrices(target):
    """(n, k) @ (batch, k, m): regression for a cpu backend miscompile found by this suite (an
    output fusion's dot wrote row-major into a result laid out {2,0,1})."""
    rng = np.random.default_rng(0)
    b, c = rand(rng, (4, 5), "float32"), rand(rng, (2, 4, 3), "float32")
    got = hlo_run(lambda b, c: hnp.matmul(b.T, c), (b, c), target)
    np.testing.assert_allclose(got, np.matmul(b.T, c), rtol=1e-5, atol=1e-6)


def test_boolean_products_follow_numpy(target):
    rng = np.random.default_rng(1)
    a, b = rand(rng, (3, 4), "bool"), rand(rng, (4, 2), "bool")
    got = hlo_run(lambda a, b: (a @ b, hnp.dot(a, b[:, 0]), hnp.einsum("ij,jk->ik", a, b)), (a, b), target)
    for g in got:
        assert g.dtype == np.bool_
    np.testing.assert_array_equal(got[0], a @ b)
    np.testing.assert_array_equal(got[1], np.dot(a, b[:, 0]))
    np.testing.assert_array_equal(got[2], np.einsum("ij,jk->ik", a, b))
