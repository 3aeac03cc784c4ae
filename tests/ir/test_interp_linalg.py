"""Interpreter: dot_general and convolution against jax.lax and numpy (batching and contracting
dimensions, result types wider than the operands, integer wraparound, all convolution dimension
numbers, strides, padding, dilations, window reversal, feature and batch groups)."""
from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import BF16, assert_same, jax_x64, run_op

from hlo.ir import tensor

jax = pytest.importorskip("jax")
lax = jax.lax


def _dot(lhs, rhs, lb, rb, lc, rc, out_dt=None, out_shape=None):
    attrs = {"lhs_batching_dimensions": lb, "rhs_batching_dimensions": rb,
             "lhs_contracting_dimensions": lc, "rhs_contracting_dimensions": rc}
    rts = None
    if out_dt is not None:
        rts = [tensor(out_shape, out_dt)]
    return run_op("dot_general", lhs, rhs, attrs=attrs, result_types=rts)


@pytest.mark.parametrize("dims", [
    # (lhs shape, rhs shape, lb, rb, lc, rc)
    ((3, 4), (4, 5), [], [], [1], [0]),
    ((2, 3, 4), (2, 5, 4), [0], [0], [2], [2]),
    ((4, 2, 3, 5), (5, 3, 2, 6), [1], [2], [3, 2], [0, 1]),
    ((3,), (3,), [], [], [0], [0]),
    ((2, 3), (4,), [], [], [], []),
    ((2, 0, 3), (2, 3, 4), [0], [0], [2], [1]),
    ((2, 3, 0), (2, 0, 4), [0], [0], [2], [1]),
])
def test_dot_general_shapes_vs_jax(dims):
    ls, rs, lb, rb, lc, rc = dims
    rng = np.random.default_rng(0)
    lhs = rng.integers(-4, 5, ls).astype(np.float32)
    rhs = rng.integers(-4, 5, rs).astype(np.float32)
    got = _dot(lhs, rhs, lb, rb, lc, rc)
    want = np.asarray(lax.dot_general(lhs, rhs, ((lc, rc), (lb, rb))))
    assert_same(got + 0.0, want + 0.0)  # the sign of a zero sum depends on the schedule


@pytest.mark.parametrize("in_dt,out_dt", [
    (np.int8, np.int32), (np.int8, np.int8), (np.uint8, np.uint32), (np.int32, np.int32),
    (np.int64, np.int64), (BF16, np.float32), (np.float16, np.float32), (np.float16, np.float16),
    (BF16, BF16), (np.float32, np.float64), (np.float64, np.float64), (np.int16, np.float32),
], ids=lambda d: np.dtype(d).name)
def test_dot_general_result_types_vs_jax(in_dt, out_dt):
    rng = np.random.default_rng(1)
    if np.dtype(in_dt).kind in "iu" and np.dtype(out_dt).kind == "f":
        lhs = rng.integers(-100, 100, (2, 5, 7)).astype(in_dt)  # exact float products and sums
        rhs = rng.integers(-100, 100, (2, 7, 3)).astype(in_dt)
    elif np.dtype(in_dt).kind in "iu":
        info = np.iinfo(in_dt)
        lhs = rng.integers(info.min, info.max, (2, 5, 7), endpoint=True).astype(in_dt)
        rhs = rng.integers(info.min, info.max, (2, 7, 3), endpoint=True).astype(in_dt)
    else:
        lhs = rng.integers(-8, 9, (2, 5, 7)).astype(in_dt)
        rhs = (rng.integers(-8, 9, (2, 7, 3)) / 4).astype(in_dt)
    got = _dot(lhs, rhs, [0], [0], [2], [1], out_dt, (2, 5, 3))
    with jax_x64():
        want = np.asarray(lax.dot_general(lhs, rhs, (([2], [1]), ([0], [0])), preferred_element_type=out_dt))
    assert_same(got, want)


def test_dot_general_integer_wraps():
    lhs = np.full((1, 4), 2**30, np.int32)
    rhs = np.full((4, 1), 4, np.int32)
    assert_same(_dot(lhs, rhs, [], [], [1], [0]), np.array([[0]], np.int32))
    assert_same(_dot(np.array([[True, False]]), np.array([[True], [True]]), [], [], [1], [0]),
                np.array([[True]]))


def test_dot_general_f32_accuracy():
    rng = np.random.default_rng(2)
    lhs = rng.standard_normal((16, 300)).astype(np.float32)
    rhs = rng.standard_normal((300, 8)).astype(np.float32)
    got = _dot(lhs, rhs, [], [], [1], [0]).astype(np.float64)
    want = lhs.astype(np.float64) @ rhs.astype(np.float64)
    assert np.max(np.abs(got - want)) < 1e-4


# ------------------------------------------------------------------------------------------
# convolution
# ------------------------------------------------------------------------------------------

def _conv(lhs, rhs, dn, strides, padding, lhs_dil, rhs_dil, fgc=1, bgc=1, reversal=None,
          out_dt=None):
    """Run our convolution with jax-style dimension numbers ``dn`` (lhs, rhs, out spec strings)."""
    ldn, rdn, odn = dn
    sp = lambda s: [i for i, c in enumerate(s) if c not in "NCIO"]
    lsp = sorted(sp(ldn), key=lambda i: ldn[i])
    rsp = sorted(sp(rdn), key=lambda i: rdn[i])
    osp = sorted(sp(odn), key=lambda i: odn[i])
    attrs = {
        "window_strides": strides, "padding": padding, "lhs_dilation": lhs_dil, "rhs_dilation": rhs_dil,
        "input_batch_dimension": ldn.index("N"), "input_feature_dimension": ldn.index("C"),
        "input_spatial_dimensions": lsp,
        "kernel_input_feature_dimension": rdn.index("I"), "kernel_output_feature_dimension": rdn.index("O"),
        "kernel_spatial_dimensions": rsp,
        "output_batch_dimension": odn.index("N"), "output_feature_dimension": odn.index("C"),
        "output_spatial_dimensions": osp,
        "feature_group_count": fgc, "batch_group_count": bgc,
    }
    if reversal is not None:
        attrs["window_reversal"] = reversal
    from hlo.ir import TensorType, element_type
    from hlo.ir.ops import OPS
    lt, rt = tensor(lhs.shape, lhs.dtype), tensor(rhs.shape, rhs.dtype)
    inferred = OPS["convolution"].infer([lt, rt], OPS["convolution"].normalize_attrs(attrs), [])[0]
    rts = [TensorType(inferred.shape, element_type(out_dt or lhs.dtype))]
    return run_op("convolution", lhs, rhs, attrs=attrs, result_types=rts)


CONV_CASES = [
    # lhs shape, rhs shape, dn, strides, padding, lhs_dil, rhs_dil, fgc, bgc
    ((2, 3, 9, 8), (4, 3, 3, 2), ("NCHW", "OIHW", "NCHW"), [1, 1], [[0, 0], [0, 0]], [1, 1], [1, 1], 1, 1),
    ((2, 9, 8, 3), (3, 2, 3, 4), ("NHWC", "HWIO", "NHWC"), [2, 1], [[1, 2], [0, 1]], [1, 1], [1, 1], 1, 1),
    ((1, 4, 7, 6), (6, 4, 2, 3), ("NCHW", "OIHW", "NHWC"), [1, 2], [[2, 0], [1, 1]], [2, 1], [1, 2], 1, 1),
    ((2, 6, 10), (4, 3, 3), ("NCH", "OIH", "NCH"), [1], [[1, 1]], [1], [2], 2, 1),
    ((4, 3, 8), (6, 3, 2), ("NCH", "OIH", "NCH"), [2], [[0, 1]], [1], [1], 1, 2),
    ((2, 5, 5, 2), (2, 2, 2, 4), ("NHWC", "HWIO", "NCHW"), [1, 1], [[-1, 0], [0, -1]], [1, 1], [1, 1], 1, 1),
    ((1, 2, 3, 3, 3), (2, 2, 2, 1, 2), ("NCDHW", "OIDHW", "NCDHW"), [1, 1, 1], [[0, 0]] * 3, [1, 2, 1], [1, 1, 2], 1, 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=range(len(CONV_CASES)))
def test_convolution_vs_jax(case):
    ls, rs, dn, strides, padding, ld, rd, fgc, bgc = case
    rng = np.random.default_rng(3)
    lhs = rng.integers(-3, 4, ls).astype(np.float32)  # small integers: exact in any order
    rhs = rng.integers(-3, 4, rs).astype(np.float32)
    got = _conv(lhs, rhs, dn, strides, padding, ld, rd, fgc, bgc)
    want = np.asarray(lax.conv_general_dilated(lhs, rhs, strides, [tuple(p) for p in padding], ld, rd,
                                               dimension_numbers=dn, feature_group_count=fgc,
                                               batch_group_count=bgc))
    assert_same(got, want)


def test_convolution_window_reversal_flips_the_kernel():
    rng = np.random.default_rng(4)
    lhs = rng.integers(-3, 4, (1, 2, 6, 5)).astype(np.float32)
    rhs = rng.integers(-3, 4, (3, 2, 3, 2)).astype(np.float32)
    dn = ("NCHW", "OIHW", "NCHW")
    got = _conv(lhs, rhs, dn, [1, 1], [[0, 0], [0, 0]], [1, 1], [1, 1], reversal=[True, False])
    want = _conv(lhs, rhs[:, :, ::-1, :].copy(), dn, [1, 1], [[0, 0], [0, 0]], [1, 1], [1, 1])
    assert_same(got, want)


def test_convolution_integer_and_result_type():
    rng = np.random.default_rng(5)
    lhs = rng.integers(-128, 128, (1, 3, 5)).astype(np.int8)
    rhs = rng.integers(-128, 128, (2, 3, 2)).astype(np.int8)
    dn = ("NCH", "OIH", "NCH")
    got = _conv(lhs, rhs, dn, [1], [[0, 0]], [1], [1], out_dt=np.int32)
    with jax_x64():
        want = np.asarray(lax.conv_general_dilated(lhs, rhs, [1], [(0, 0)], dimension_numbers=dn,
                                                   preferred_element_type=np.int32))
    assert_same(got, want)


def test_convolution_f32_random_accuracy():
    rng = np.random.default_rng(6)
    lhs = rng.standard_normal((2, 8, 12, 12)).astype(np.float32)
    rhs = rng.standard_normal((5, 8, 3, 3)).astype(np.float32)
    dn = ("NCHW", "OIHW", "NCHW")
    got = _conv(lhs, rhs, dn, [1, 1], [[1, 1], [1, 1]], [1, 1], [1, 1])
    with jax_x64():
        want = np.asarray(lax.conv_general_dilated(lhs.astype(np.float64), rhs.astype(np.float64), [1, 1],
                                                   [(1, 1), (1, 1)], dimension_numbers=dn))
    assert np.max(np.abs(got - want)) < 1e-4
