"""Float sums stay accurate at any length (issue 35): every float sum accumulates in blocks of
at most ``elemental.SUM_BLOCK`` values whose totals are added in f64 and rounded once, so the
error does not grow with the number of values (a float32 running sum of 2^26 uniform values
had stalled 1.6% low). Checked against float64 numpy on the issue's reproducers (a (2^20, 64)
and an 8192^2 array, 2^26 values, a fused outer-product sum), along every axis and set of axes
of a 3-D array with fusion on and off and on one thread or several (the row, loop, column and
split kernels), means and variances, dot products, sums in f16/bf16 (added
in f32) and f64, and the sign of a zero sum. The interpreter (a balanced tree) is a second
reference."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from cpu_helpers import compile_text

import hlo
import hlo.numpy as hnp
from hlo.backends.cpu import compile as cpu_compile
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import optimize
from hlo.runtime.cpu.target import host

RTOL = 1e-6


def _rel(got, ref) -> float:
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


@pytest.fixture(scope="module")
def big():
    """2^26 uniform float32 values (256 MiB): made once for the tests that need that length."""
    return np.random.default_rng(35).random((8192, 8192), dtype=np.float32)


def test_sum_of_2_26_values_within_1e6_of_float64(big):
    total = np.sum(big, dtype=np.float64)
    sum_all = hlo.jit(lambda x: x.sum())
    assert _rel(sum_all(big), total) < RTOL                      # 8192 x 8192 (the issue: 7.8e-3)
    assert _rel(sum_all(big.reshape(-1)), total) < RTOL          # 2^26 in one dimension
    assert _rel(sum_all(big.reshape(1 << 20, 64)), total) < RTOL  # rows of 64 (the issue: 3.1%)
    assert _rel(hlo.jit(lambda x: hnp.mean(x))(big), total / big.size) < RTOL


def test_axis_sums_and_var_of_8192_squared(big):
    for axis in (0, 1):
        got = hlo.jit(lambda x: x.sum(axis=axis))(big)
        assert _rel(got, np.sum(big, axis=axis, dtype=np.float64)) < RTOL, axis
    got = hlo.jit(lambda x: hnp.var(x, axis=0))(big[:, :2048])
    assert _rel(got, np.var(big[:, :2048].astype(np.float64), axis=0)) < RTOL


def test_fused_outer_product_sum():
    """The reduction of a broadcast product that is never materialized (2^28 products, 1 GiB
    if it were): one fused kernel, accurate to float64's 1e-6."""
    rng = np.random.default_rng(1)
    a = rng.random(1 << 14, dtype=np.float32)
    b = rng.random(1 << 14, dtype=np.float32)
    f = hlo.jit(lambda a, b: (a[:, None] * b[None, :]).sum())
    ref = np.sum(a, dtype=np.float64) * np.sum(b, dtype=np.float64)
    assert _rel(f(a, b), ref) < RTOL
    assert f.lower(a, b).compile().memory_analysis().temp_size_in_bytes < (1 << 20)


def _reduce_src(shape, dims, et="f32", init="0.0"):
    t = f"{et}[{','.join(map(str, shape))}]"
    out = [n for d, n in enumerate(shape) if d not in dims]
    ot = f"{et}[{','.join(map(str, out))}]"
    return f"""module @m
func @main(%x: {t}) -> ({ot}) {{
  %s0 = constant dense<1.5> : {et}[]
  %s = broadcast_in_dim(%s0) {{broadcast_dimensions = []}} : {t}
  %y = multiply(%x, %s) : {t}
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%y, %0) {{dimensions = {list(dims)}}} : {ot} {{
    ^body(%a: {et}[], %b: {et}[]):
      %c = add(%a, %b) : {et}[]
      return(%c)
  }}
  return(%1)
}}
"""


def _build(src, fusion: bool, threads: int):
    """Through the CPU pipeline (fusion on or off), or as written (every op its own kernel)."""
    if fusion is None:
        return compile_text(src, threads=threads)
    options = host().pass_options()
    options["fusion"] = fusion
    return cpu_compile(optimize(parse_module(src), target="cpu", options=options), threads=threads)


# Long reduced extents (1 + a small fraction, so that every addition rounds) in every kernel
# kind: rows (dims [2]), columns ([0]: stack rows; with few columns: split), middle dimensions,
# full sums (row kernel, or split over threads).
SHAPE = (2048, 8, 1024)


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 1), (1, 2), (0, 2), (0, 1, 2)])
def test_every_axis_fusion_and_threads(dims):
    rng = np.random.default_rng(len(dims) * 7 + dims[0])
    x = (1.0 + rng.random(SHAPE) * 2.0 ** -10).astype(np.float32)
    src = _reduce_src(SHAPE, dims)
    ref = np.sum(x.astype(np.float64) * 1.5, axis=dims)
    interp = interpret(parse_module(src), [x])[0]
    assert _rel(interp, ref) < RTOL  # the interpreter's balanced tree: the second reference
    for fusion, threads in ((True, 2), (False, 1), (None, 4)):
        got = _build(src, fusion, threads)(x)[0]
        assert _rel(got, ref) < RTOL, (dims, fusion, threads)
        np.testing.assert_allclose(got, interp, rtol=2 * RTOL)


def test_few_long_columns_split():
    """Few columns (the split kernel's partials, read by rows: column_partials.py) over 2^22 rows."""
    x = (1.0 + np.random.default_rng(3).random((1 << 22, 4)) * 2.0 ** -10).astype(np.float32)
    src = _reduce_src(x.shape, (0,))
    ref = np.sum(x.astype(np.float64) * 1.5, axis=0)
    for threads in (1, 2, 4):
        assert _rel(_build(src, True, threads)(x)[0], ref) < RTOL, threads


def test_split_partials_by_rows_over_several_kept_dimensions():
    """Sums over the leading dimensions into a few values along two kept dimensions (the split
    kernel's partials by rows, column_partials.py: batch norm's statistics), with a fused
    producer, against float64."""
    x = (1.0 + np.random.default_rng(5).random((1 << 16, 3, 5)) * 2.0 ** -10).astype(np.float32)
    src = _reduce_src(x.shape, (0,))
    ref = np.sum(x.astype(np.float64) * 1.5, axis=0)
    for threads in (1, 2, 4):
        assert _rel(_build(src, True, threads)(x)[0], ref) < RTOL, threads
    x4 = (1.0 + np.random.default_rng(6).random((64, 32, 32, 6)) * 2.0 ** -10).astype(np.float32)
    src = _reduce_src(x4.shape, (0, 1, 2))
    assert _rel(_build(src, True, 2)(x4)[0], np.sum(x4.astype(np.float64) * 1.5, axis=(0, 1, 2))) < RTOL


@pytest.mark.parametrize("et,npt", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_narrow_floats_add_in_f32(et, npt):
    """A reduce in bf16/f16 adds in f32 and rounds once (XLA's excess precision): 2^14 values
    of about 1 sum to within the type's rounding of the exact sum (a bf16 running sum stalls
    at 256, an f16 one at 2048)."""
    n = 1 << 14
    x = (1.0 + np.random.default_rng(4).random((n // 64, 64)) * 2.0 ** -4).astype(npt)
    for dims, shape in (((0, 1), x.shape), ((0,), x.shape)):
        src = _reduce_src(shape, dims, et=et)
        want = np.sum(x.astype(np.float64) * 1.5, axis=dims)
        got = np.asarray(_build(src, True, 2)(x)[0]).astype(np.float64)
        eps = float(ml_dtypes.finfo(npt).eps)
        assert _rel(got, want) <= eps, (et, dims)


def test_f64_sums_and_the_sign_of_zero():
    x = np.random.default_rng(5).random((1 << 12, 1 << 10))
    got = _build(_reduce_src(x.shape, (0, 1), et="f64"), True, 2)(x)[0]
    assert _rel(got, np.sum(x * 1.5)) < 1e-13
    # -0.0 is the blocks' start: a sum of negative zeros with init -0.0 is -0.0, with +0.0 it is +0.0
    z = np.full((64, 8192), -0.0, np.float32)
    for init, neg in (("-0.0", True), ("0.0", False)):
        for fusion, threads in ((True, 2), (None, 1)):
            r = np.asarray(_build(_reduce_src(z.shape, (0, 1), init=init), fusion, threads)(z)[0])
            assert r == 0 and bool(np.signbit(r)) == neg, (init, fusion, threads)


def test_dot_products():
    """Dot products (a batch of them: M = N = 1, a long K) run as blocked sums, not in the
    GEMM's one-element tile."""
    rng = np.random.default_rng(6)
    a = (1.0 + rng.random((4, 1 << 18)) * 2.0 ** -10).astype(np.float32)
    b = (1.0 + rng.random((4, 1 << 18)) * 2.0 ** -10).astype(np.float32)
    got = hlo.jit(lambda a, b: hnp.einsum("bk,bk->b", a, b))(a, b)
    ref = np.einsum("bk,bk->b", a.astype(np.float64), b.astype(np.float64))
    assert _rel(got, ref) < RTOL


def test_sum_in_a_loop_body():
    x = (1.0 + np.random.default_rng(7).random((1 << 16, 64)) * 2.0 ** -10).astype(np.float32)
    f = hlo.jit(lambda x: hlo.lax.fori_loop(0, 3, lambda i, c: c + (x * (i + 1.0)).sum(), 0.0))
    ref = np.sum(x, dtype=np.float64) * 6.0
    assert _rel(f(x), ref) < RTOL
