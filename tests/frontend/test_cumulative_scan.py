"""Running reductions (cumsum, cumprod, cummax, cummin) of more than ``SCAN_MIN`` elements along
their axis trace as an associative scan (``hlo.ir.prefix_scan``: strided slices,
the op on pairs, zero-padded interleaves, each level through an optimization barrier) instead of
a ``reduce_window`` over the whole prefix, which did O(n^2) work (cumsum of 2^16 f32: 1.75 s on
the CPU). Checked against float64 numpy on every target here (``target``), forward and reverse,
along each axis, for lengths around the powers of two, for ints and bools; the IR's shape
(no reduce_window, levels written out); gradients and vmap; jax's running reductions imported from StableHLO (the window-scan pass)."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo import lax
from hlo.lax.reductions import SCAN_MIN
from hlo.passes.fusion import unit_cost
from hlo.passes.pipeline import optimize
from hlo.passes.window_scan import SCAN_MIN as PASS_SCAN_MIN

RNG = np.random.default_rng(0)

OPS = {
    "cumsum": (lax.cumsum, np.add.accumulate),
    "cumprod": (lax.cumprod, np.multiply.accumulate),
    "cummax": (lax.cummax, np.maximum.accumulate),
    "cummin": (lax.cummin, np.minimum.accumulate),
}


def reference(name, x, axis, reverse):
    f = OPS[name][1]
    x = np.asarray(x, np.float64) if x.dtype.kind == "f" else x
    if reverse:
        return np.flip(f(np.flip(x, axis), axis=axis), axis)
    return f(x, axis=axis)


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("n", [SCAN_MIN + 1, SCAN_MIN + 2, 33, 64, 100, 1000])
def test_running_reductions_match_numpy(target, name, n):
    x = RNG.standard_normal((3, n)).astype(np.float32)
    if name == "cumprod":
        x = 1.0 + 0.01 * x   # a product of n terms stays in range
    for axis, reverse in ((1, False), (1, True), (-1, True)):
        got = np.asarray(hlo.jit(lambda x: OPS[name][0](x, axis=axis, reverse=reverse), target=target)(x))
        want = reference(name, x, axis, reverse)
        np.testing.assert_allclose(got, want, rtol=2e-5 * np.log2(n) + 1e-6, atol=1e-5 * np.sqrt(n),
                                   err_msg=f"{name} axis {axis} reverse {reverse}")


def test_along_the_major_axis_of_a_3d_array_and_with_nans():
    x = RNG.standard_normal((70, 3, 5)).astype(np.float32)
    x[40, 1, 2] = np.nan
    got = np.asarray(hlo.jit(lambda x: (lax.cumsum(x, 0), lax.cummax(x, 0)))(x)[0])
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64), 0), rtol=1e-5, atol=1e-4)
    mx = np.asarray(hlo.jit(lambda x: lax.cummax(x, 0))(x))
    assert np.isnan(mx[40:, 1, 2]).all() and not np.isnan(mx[:40, 1, 2]).any()


def test_ints_and_bools():
    xi = RNG.integers(-9, 9, (200, 2)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(hlo.jit(lambda x: hnp.cumsum(x, axis=0))(xi)), np.cumsum(xi, axis=0))
    np.testing.assert_array_equal(np.asarray(hlo.jit(lambda x: lax.cummax(x, 0, reverse=True))(xi)),
                                  reference("cummax", xi, 0, True))
    xb = RNG.random((4, 90)) > 0.95
    np.testing.assert_array_equal(np.asarray(hlo.jit(lambda x: lax.cumsum(x, axis=1))(xb)),
                                  np.logical_or.accumulate(xb, axis=1))


def test_the_ir_is_a_scan_of_levels_written_out():
    n = 1 << 16
    x = np.zeros(n, np.float32)
    low = hlo.jit(lambda x: hnp.cumsum(x)).lower(x)
    names = [op.name for op in low.ir.main.body.walk()]
    assert "reduce_window" not in names and names.count("optimization_barrier") >= 16
    o = optimize(low.ir, "cpu")
    kernels = [op for op in o.module.main.ops if op.name == "fusion"]
    # each level a few small kernels: fused into one, every level read its input twice over
    assert len(kernels) >= 16 and max(unit_cost(k) for k in kernels) <= 8, o.text()
    short = hlo.jit(lambda x: hnp.cumsum(x)).lower(np.zeros(SCAN_MIN, np.float32))
    assert [op.name for op in short.ir.main.ops].count("reduce_window") == 1


def test_gradient_and_vmap():
    x = RNG.standard_normal(50).astype(np.float32)
    w = RNG.standard_normal(50).astype(np.float32)
    g = np.asarray(hlo.jit(hlo.grad(lambda x: hnp.sum(w * hnp.cumsum(x))))(x))
    np.testing.assert_allclose(g, np.cumsum(w[::-1].astype(np.float64))[::-1], rtol=1e-5, atol=1e-5)
    gm = np.asarray(hlo.jit(hlo.grad(lambda x: hnp.sum(lax.cummax(x))))(x))
    want = np.zeros(50)
    for i in range(50):   # each running max's input position gets one
        want[int(np.argmax(x[:i + 1]))] += 1
    np.testing.assert_allclose(gm, want)
    xs = RNG.standard_normal((4, 40)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(hlo.jit(hlo.vmap(lambda r: hnp.cumsum(r)))(xs)),
                               np.cumsum(xs.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


def test_the_pass_and_lax_agree_on_what_is_short():
    assert PASS_SCAN_MIN == SCAN_MIN


def _only(out):
    return out[0] if isinstance(out, (list, tuple)) else out


# jax's running reductions are one reduce_window whose window is the prefix: imported, the
# window-scan pass (passes/window_scan.py) makes them the same scan.


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
@pytest.mark.parametrize("axis,reverse", [(1, False), (1, True), (0, True)])
def test_jax_running_reductions_imported_are_scans_on_every_target(target, name, axis, reverse):
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((40, 70)).astype(np.float32)
    if name == "cumprod":
        x = 1 + 0.01 * x
    f = lambda x: getattr(jax.lax, name)(x, axis=axis, reverse=reverse)
    low = hlo.load_stablehlo(jax.jit(f).lower(x).as_text())
    o = optimize(low.ir, "cpu")
    assert not any(op.name == "reduce_window" for op in o.module.main.walk()), o.decisions
    got = np.asarray(_only(low.compile(target=target)(x)), np.float64)
    want = np.asarray(jax.jit(f)(x), np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_jax_cumsum_of_ints_and_bools():
    jax = pytest.importorskip("jax")
    x = RNG.integers(-5, 5, (3, 200)).astype(np.int32)
    for f in (lambda x: jax.numpy.cumsum(x, 1), lambda x: jax.numpy.cumsum(x > 0, 1),
              lambda x: jax.lax.cummax(x, 1, reverse=True)):
        low = hlo.load_stablehlo(jax.jit(f).lower(x).as_text())
        np.testing.assert_array_equal(np.asarray(_only(low.compile(target="cpu")(x))), np.asarray(jax.jit(f)(x)))


# jax 0.11 writes jnp.cumsum as an associative chlo.scan (the text below is what it lowered
# cumsum along the rows to on an H200): imported as the reduce_window over the prefix
# (mlir_bridge.associative_scans_to_windows), then the same scan, not jaxlib's legalization to a
# while loop of one slice a step.
CHLO_SCAN = """module @jit__lambda {
  func.func public @main(%arg0: tensor<8x100xf32>) -> (tensor<8x100xf32>) {
    %cst = stablehlo.constant dense<INIT> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %1:2 = chlo.scan(%arg0) inits (%0) dimension=1  attributes {is_associative = true, is_reverse = REV} {
    ^bb0(%input: tensor<8xf32>, %carry: tensor<8xf32>):
      %2 = stablehlo.OP %input, %carry : tensor<8xf32>
      stablehlo.return %2, %2 : tensor<8xf32>, tensor<8xf32>
    } : (tensor<8x100xf32>, tensor<8xf32>) -> (tensor<8x100xf32>, tensor<8xf32>)
    return %1#0 : tensor<8x100xf32>
  }
}
"""


@pytest.mark.parametrize("op,init,reverse,scan", [
    ("add", "0.000000e+00", False, True), ("add", "0.000000e+00", True, True),
    ("maximum", "0xFF800000", False, True), ("maximum", "-3.0", False, False),
    ("multiply", "1.000000e+00", True, True),
    ("add", "1.0", False, False)])             # not add's identity: jaxlib's loop, right all the same
def test_jax_associative_chlo_scans_become_scans(target, op, init, reverse, scan):
    pytest.importorskip("jaxlib")
    src = CHLO_SCAN.replace("INIT", init).replace("REV", str(reverse).lower()).replace("OP", op)
    low = hlo.load_stablehlo(src)
    names = [o.name for o in optimize(low.ir, "cpu").module.main.walk()]
    assert ("while" not in names and "reduce_window" not in names) == scan, names
    x = (1 + 0.01 * RNG.standard_normal((8, 100))).astype(np.float32)
    f = {"add": np.add, "maximum": np.maximum, "multiply": np.multiply}[op]
    xs = np.flip(x, 1) if reverse else x
    c = -np.inf if init == "0xFF800000" else float(init)
    want = f.accumulate(np.concatenate([np.full((8, 1), c), xs.astype(np.float64)], 1), axis=1)[:, 1:]
    want = np.flip(want, 1) if reverse else want
    np.testing.assert_allclose(np.asarray(_only(low.compile(target=target)(x)), np.float64), want, rtol=2e-5, atol=1e-4)
