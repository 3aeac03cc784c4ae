"""Interpreter: ops that move data (constant, iota, broadcast_in_dim, reshape, transpose, slice,
dynamic_slice, dynamic_update_slice, concatenate, pad, reverse), against numpy and jax.lax,
including rank-0 and zero-sized shapes, negative and interior padding and index clamping."""
from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import ALL, BF16, assert_same, run_op, sample

from hlo.ir import tensor

jax = pytest.importorskip("jax")
lax = jax.lax


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_constant_roundtrips_every_type(dt):
    rng = np.random.default_rng(0)
    v = sample(rng, dt, (3, 4))
    assert_same(run_op("constant", attrs={"value": v}), v)
    z = np.zeros((0, 3), dt)
    assert_same(run_op("constant", attrs={"value": z}), z)


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.float16, BF16, np.float32],
                         ids=lambda d: np.dtype(d).name)
def test_iota(dt):
    for shape, d in [((5,), 0), ((3, 4), 1), ((3, 4, 2), 0), ((0, 3), 1)]:
        got = run_op("iota", attrs={"iota_dimension": d}, result_types=[tensor(shape, dt)])
        want = np.broadcast_to(np.arange(shape[d]).reshape([-1 if i == d else 1 for i in range(len(shape))]),
                               shape).astype(dt)
        assert_same(got, want)
    got = run_op("iota", attrs={"iota_dimension": 0}, result_types=[tensor((300,), np.int8)])
    assert_same(got, np.arange(300).astype(np.int8))  # wraps


def test_broadcast_in_dim_permuted_and_degenerate():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run_op("broadcast_in_dim", x, attrs={"broadcast_dimensions": [2, 0]},
                 result_types=[tensor((3, 4, 2), np.float32)])
    want = np.broadcast_to(x.T[:, None, :], (3, 4, 2))
    assert_same(got, want)
    y = np.array([[7]], np.int32)
    got = run_op("broadcast_in_dim", y, attrs={"broadcast_dimensions": [0, 2]},
                 result_types=[tensor((4, 5, 6), np.int32)])
    assert_same(got, np.full((4, 5, 6), 7, np.int32))
    s = np.array(2.5, np.float64)
    assert_same(run_op("broadcast_in_dim", s, attrs={"broadcast_dimensions": []},
                       result_types=[tensor((0, 2), np.float64)]), np.zeros((0, 2)))


def test_reshape_transpose_reverse():
    rng = np.random.default_rng(1)
    x = sample(rng, np.int16, (2, 3, 4))
    assert_same(run_op("reshape", x, result_types=[tensor((4, 6), np.int16)]), x.reshape(4, 6))
    assert_same(run_op("reshape", np.array([5], np.int16), result_types=[tensor((), np.int16)]),
                np.array(5, np.int16))
    assert_same(run_op("transpose", x, attrs={"permutation": [2, 0, 1]}), x.transpose(2, 0, 1))
    assert_same(run_op("reverse", x, attrs={"dimensions": [0, 2]}), x[::-1, :, ::-1])
    assert_same(run_op("reverse", x, attrs={"dimensions": []}), x)


def test_slice_strided_and_empty():
    x = np.arange(60, dtype=np.uint32).reshape(5, 12)
    got = run_op("slice", x, attrs={"start_indices": [1, 2], "limit_indices": [5, 11], "strides": [2, 3]})
    assert_same(got, x[1:5:2, 2:11:3])
    got = run_op("slice", x, attrs={"start_indices": [2, 0], "limit_indices": [2, 12]})
    assert_same(got, x[2:2, :])


def test_dynamic_slice_clamps_start_indices():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for i, j in [(0, 0), (3, 4), (-5, 2), (100, -1), (2, 3)]:
        for idt in (np.int32, np.uint8, np.int64):
            if np.dtype(idt).kind == "u" and (i < 0 or j < 0):
                continue
            got = run_op("dynamic_slice", x, np.array(i, idt), np.array(j, idt),
                         attrs={"slice_sizes": [2, 3]})
            ci, cj = min(max(i, 0), 2), min(max(j, 0), 2)
            assert_same(got, x[ci:ci + 2, cj:cj + 3])
    big = np.array(2**64 - 1, np.uint64)  # must clamp to the end, not wrap to -1
    got = run_op("dynamic_slice", x, big, np.array(0, np.uint64), attrs={"slice_sizes": [1, 5]})
    assert_same(got, x[3:4])


def test_dynamic_update_slice_clamps_and_copies():
    x = np.zeros((4, 5), np.int32)
    u = np.arange(6, dtype=np.int32).reshape(2, 3) + 1
    got = run_op("dynamic_update_slice", x, u, np.array(3, np.int32), np.array(-2, np.int32))
    want = x.copy()
    want[2:4, 0:3] = u
    assert_same(got, want)
    assert not x.any()  # the operand is not modified


def test_concatenate():
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    b = np.arange(4, dtype=np.int8).reshape(2, 2)
    c = np.zeros((2, 0), np.int8)
    assert_same(run_op("concatenate", a, b, c, attrs={"dimension": 1}), np.concatenate([a, b, c], 1))


@pytest.mark.parametrize("lo,hi,interior", [
    ([1, 2], [0, 3], [0, 0]), ([0, 0], [0, 0], [1, 2]), ([-1, 2], [2, -3], [1, 0]),
    ([-2, -1], [-1, -2], [0, 1]), ([2, 0], [-4, 1], [3, 2]), ([-4, 0], [0, 0], [0, 0])])
def test_pad_vs_jax(lo, hi, interior):
    rng = np.random.default_rng(2)
    x = sample(rng, np.float32, (4, 5))
    pv = np.array(-7.5, np.float32)
    want = np.asarray(lax.pad(x, pv, [(a, b, c) for a, b, c in zip(lo, hi, interior)]))
    got = run_op("pad", x, pv, attrs={"edge_padding_low": lo, "edge_padding_high": hi,
                                      "interior_padding": interior})
    assert_same(got, want)


def test_pad_zero_sized_operand():
    x = np.zeros((0, 3), np.int32)
    got = run_op("pad", x, np.array(9, np.int32), attrs={
        "edge_padding_low": [1, 0], "edge_padding_high": [1, 1], "interior_padding": [2, 1]})
    assert_same(got, np.full((2, 6), 9, np.int32))


def test_optimization_barrier_passes_values_through():
    a, b = np.arange(3.0), np.array(True)
    outs = run_op("optimization_barrier", a, b)
    assert_same(outs[0], a)
    assert_same(outs[1], b)
