"""The conv-gemm pass (passes/conv_gemm.py): a convolution becomes an im2col gather and one
product, a depthwise one a sum of taps -- IR text in, IR text out, each decision in the log, the
rewritten programs against the originals on the interpreter (random strides, dilations, padding,
groups, layouts and dtypes), and compiled CPU code against float64 numpy and jax (forward
convolutions and their gradients, as jax emits them)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pass_testing import assert_ir, rewritten

from hlo.passes.options import Options

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def gemm(src, target="cpu", options=None, tol=1e-5):
    return rewritten(src, ["conv-gemm"], target, options, tol=tol)


CONV_1D = """
func @main(%x: f32[2,9,3], %w: f32[3,3,4]) -> (f32[2,4,4]) {
  %y = convolution(%x, %w) {input_batch_dimension = 0, input_feature_dimension = 2, input_spatial_dimensions = [1], kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 2, kernel_spatial_dimensions = [0], output_batch_dimension = 0, output_feature_dimension = 2, output_spatial_dimensions = [1], padding = [[1, 0]], window_strides = [2]} : f32[2,4,4]
  return(%y)
}
"""


def test_a_convolution_becomes_its_im2col_and_one_product():
    out, log = gemm(CONV_1D)
    assert_ir(out, """
    func @main(%x: f32[2,9,3], %w: f32[3,3,4]) -> (f32[2,4,4]) {
      %z = constant dense<0.0> : f32[]
      %p = pad(%x, %z) {edge_padding_low = [0, 1, 0], edge_padding_high = [0, 0, 0], interior_padding = [0, 0, 0]} : f32[2,10,3]
      %t0 = slice(%p) {start_indices = [0, 0, 0], limit_indices = [2, 7, 3], strides = [1, 2, 1]} : f32[2,4,3]
      %r0 = reshape(%t0) : f32[2,4,1,3]
      %t1 = slice(%p) {start_indices = [0, 1, 0], limit_indices = [2, 8, 3], strides = [1, 2, 1]} : f32[2,4,3]
      %r1 = reshape(%t1) : f32[2,4,1,3]
      %t2 = slice(%p) {start_indices = [0, 2, 0], limit_indices = [2, 9, 3], strides = [1, 2, 1]} : f32[2,4,3]
      %r2 = reshape(%t2) : f32[2,4,1,3]
      %a = concatenate(%r0, %r1, %r2) {dimension = 2} : f32[2,4,3,3]
      %d = dot_general(%a, %w) {lhs_contracting_dimensions = [2, 3], rhs_contracting_dimensions = [0, 1]} : f32[2,4,4]
      return(%d)
    }
    """)
    assert "conv-gemm: %0 convolution (f32[2,9,3] * [3,3,4]): a product of [8 x 9] x [9 x 4], its im2col gathered by 3 slices (one a tap)" in log


def test_off_where_the_target_keeps_convolutions():
    out, log = gemm(CONV_1D, target="interpreter")
    assert "convolution(" in out and not log
    out, _ = gemm(CONV_1D, target="interpreter", options=Options(conv_products=True))
    assert "convolution(" not in out


def conv_text(*, dtype="f32", n=2, c=4, o=4, spatial=(7, 6), kernel=(3, 2), strides=(1, 1),
              padding=((1, 1), (0, 0)), lhs_dil=(1, 1), rhs_dil=(1, 1), rev=(False, False),
              fgc=1, bgc=1, lhs_perm=(0, 1, 2, 3), rhs_perm=(0, 1, 2, 3), out_perm=(0, 1, 2, 3)):
    """A convolution in IR text; the perms place (batch/feature dims, spatial dims) in memory."""
    nsp = len(spatial)
    rank = nsp + 2
    # logical roles -> positions: lhs (b, f, s...), rhs (o, i, s...), out (b, f, s...)
    lp, rp, op = list(lhs_perm)[:rank], list(rhs_perm)[:rank], list(out_perm)[:rank]
    lshape = [0] * rank
    for role, size in zip(lp, [n, c] + list(spatial)):
        lshape[role] = size
    rshape = [0] * rank
    for role, size in zip(rp, [o, c // fgc] + list(kernel)):
        rshape[role] = size
    osp = []
    for i in range(nsp):
        dl = (spatial[i] - 1) * lhs_dil[i] + 1 + padding[i][0] + padding[i][1]
        dk = (kernel[i] - 1) * rhs_dil[i] + 1
        osp.append(max(0, (dl - dk) // strides[i] + 1) if dl >= dk else 0)
    oshape = [0] * rank
    for role, size in zip(op, [n // bgc, o] + osp):
        oshape[role] = size

    def ty(shape):
        return f"{dtype}[{','.join(map(str, shape))}]"

    def ints(xs):
        return "[" + ", ".join(str(int(x)) for x in xs) + "]"
    attrs = (f"input_batch_dimension = {lp[0]}, input_feature_dimension = {lp[1]}, input_spatial_dimensions = {ints(lp[2:])}, "
             f"kernel_input_feature_dimension = {rp[1]}, kernel_output_feature_dimension = {rp[0]}, kernel_spatial_dimensions = {ints(rp[2:])}, "
             f"output_batch_dimension = {op[0]}, output_feature_dimension = {op[1]}, output_spatial_dimensions = {ints(op[2:])}, "
             f"padding = [{', '.join(f'[{a}, {b}]' for a, b in padding)}], window_strides = {ints(strides)}, "
             f"lhs_dilation = {ints(lhs_dil)}, rhs_dilation = {ints(rhs_dil)}, "
             f"window_reversal = [{', '.join('true' if r else 'false' for r in rev)}], "
             f"feature_group_count = {fgc}, batch_group_count = {bgc}")
    return f"""
    func @main(%x: {ty(lshape)}, %w: {ty(rshape)}) -> ({ty(oshape)}) {{
      %y = convolution(%x, %w) {{{attrs}}} : {ty(oshape)}
      return(%y)
    }}
    """, oshape


@st.composite
def convs(draw):
    nsp = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    kind = draw(st.sampled_from(["feature", "batch"])) if groups > 1 else "none"
    dtype = draw(st.sampled_from(["f32", "f32", "f64", "s32"]))
    depthwise = kind == "feature" and draw(st.booleans())
    cg = 1 if depthwise else draw(st.integers(1, 3))
    c = cg * (groups if kind == "feature" else 1)
    og = draw(st.integers(1, 2)) if depthwise else draw(st.sampled_from([1, 2, 4, 5]))
    o = og * groups
    n = draw(st.integers(1, 2)) * (groups if kind == "batch" else 1)
    spatial = tuple(draw(st.integers(1, 7)) for _ in range(nsp))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nsp))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nsp))
    padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp))
    lhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    rhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    rev = tuple(draw(st.booleans()) for _ in range(nsp))
    perms = [tuple(draw(st.permutations(range(nsp + 2)))) for _ in range(3)]
    return dict(dtype=dtype, n=n, c=c, o=o, spatial=spatial, kernel=kernel, strides=strides,
                padding=padding, lhs_dil=lhs_dil, rhs_dil=rhs_dil, rev=rev,
                fgc=groups if kind == "feature" else 1, bgc=groups if kind == "batch" else 1,
                lhs_perm=perms[0], rhs_perm=perms[1], out_perm=perms[2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convs())
def test_rewritten_convolutions_compute_what_the_convolution_does(kw):
    src, oshape = conv_text(**kw)
    if 0 in oshape:
        return
    out, log = gemm(src, tol=1e-9 if kw["dtype"] == "f64" else 2e-5)
    assert log.startswith("conv-gemm: ")
    if "kept" not in log:
        assert "convolution(" not in out


def test_depthwise_becomes_a_sum_of_taps():
    src, _ = conv_text(n=2, c=4, o=4, fgc=4, spatial=(6, 6), kernel=(3, 3), padding=((1, 1), (1, 1)))
    out, log = gemm(src)
    assert "dot_general" not in out and out.count("multiply(") == 9 and out.count("add(") == 8
    assert "depthwise (4 groups of one input feature, 1 output feature each): a sum of 9 taps' products" in log


def test_weight_gradient_gathers_by_output_position():
    # a weight gradient's convolution: the window is the image, the output the kernel's taps
    src, _ = conv_text(n=3, c=2, o=5, spatial=(8, 8), kernel=(6, 6), padding=((0, 0), (0, 0)))
    out, log = gemm(src)
    assert "9 products (one an output position) of [5 x 72] x [72 x 3]" in log and "dot_general" in out


def test_depthwise_weight_gradient_is_a_sum_per_position():
    # jax's depthwise weight gradient: lhs batch = channels (one a group), one output feature a group
    src, _ = conv_text(n=4, c=3, o=4, bgc=4, spatial=(6, 5), kernel=(4, 4), padding=((0, 0), (0, 0)),
                       lhs_perm=(3, 0, 1, 2), rhs_perm=(3, 0, 1, 2), out_perm=(2, 3, 0, 1))
    out, log = gemm(src)
    assert "convolution(" not in out and "dot_general" not in out and out.count("reduce(") == 6
    assert "a depthwise weight gradient (4 batch groups of one element and one output feature): 6 sums" in log


def test_a_large_im2col_is_made_in_parts_of_the_batch(monkeypatch):
    from hlo.passes import conv_gemm
    src, _ = conv_text(n=5, c=3, o=4, spatial=(6, 6), kernel=(3, 3), padding=((1, 1), (1, 1)), lhs_dil=(2, 1),
                       lhs_perm=(0, 3, 1, 2), rhs_perm=(3, 2, 0, 1), out_perm=(0, 3, 1, 2))
    per_image = 11 * 6 * 9 * 3 * 4      # output positions x taps x features x 4 bytes
    monkeypatch.setattr(conv_gemm, "IM2COL_MAX_BYTES", 2 * per_image)
    out, log = gemm(src)
    assert "convolution(" not in out
    assert "past 0 MiB: 3 convolutions of parts of its batch (convolution.0, convolution.1, convolution.2)" in log


def test_kept_with_reasons():
    src, _ = conv_text(n=8, c=2, o=4, bgc=4, spatial=(5, 5), kernel=(2, 2), padding=((0, 0), (0, 0)))
    out, log = gemm(src)
    assert "convolution(" in out
    assert "kept %0 convolution (f32[8,2,5,5] * [4,2,2,2], 4 batch groups): 4 batch groups of 1 output feature" in log
    src, _ = conv_text(dtype="c64", spatial=(5, 5), padding=((0, 0), (0, 0)))
    _, log = gemm(src, tol=1e-4)
    assert "c64 convolutions stay loops" in log


# ---------------------------------------------------------------- compiled, against numpy and jax

jax = pytest.importorskip("jax")


def _family(wid):
    import bench.workloads  # noqa: F401  (bench.families is imported through it)
    from bench.families import FAMILIES
    return next(w for w in FAMILIES if w.id == wid)


CONV_FAMILIES = ["conv_s2", "conv_nchw_dil", "conv_depthwise", "conv_depthwise_grad", "conv_grouped", "conv_transpose",
                 "conv_grad_s2", "conv_bn_relu_grad"]


@pytest.mark.parametrize("wid", CONV_FAMILIES)
def test_jax_convolutions_on_cpu_against_float64_and_jax(wid):
    import jax.numpy as jnp

    import hlo
    from bench.workloads import Ops
    w = _family(wid)
    ins = w.make_inputs(np.random.default_rng(1), w.dims["quick"], np.float32)
    jops = Ops(jnp, jax.grad, jax.vmap, jax.lax)
    f = jax.jit(lambda *a: w.fn(jops, *a))
    lowered = hlo.load_stablehlo(f.lower(*ins).as_text())
    got = lowered.compile(target="cpu")(*ins)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    ref = w.numpy_fn(None, *ins)
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    want = jax.tree_util.tree_leaves(f(*ins))
    assert len(got) == len(ref) == len(want)
    for g, r, j in zip(got, ref, want):
        scale = np.max(np.abs(r)) + 1e-30
        assert np.max(np.abs(np.asarray(g, np.float64) - r)) / scale < 2e-6
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-4, atol=1e-5 * scale)


def _grad_program(groups, strides, dims):
    from jax import lax

    def f(x, w, g):
        def loss(x, w):
            y = lax.conv_general_dilated(x, w, strides, "SAME", rhs_dilation=(1, 2) if strides == (1, 1) else None,
                                         dimension_numbers=dims, feature_group_count=groups)
            return (y * g).sum()
        return jax.grad(loss, argnums=(0, 1))(x, w)
    return f


@pytest.mark.parametrize("groups,strides,dims", [
    (4, (1, 1), ("NHWC", "HWIO", "NHWC")),      # depthwise: its weight gradient as window sums
    (2, (2, 1), ("NHWC", "HWIO", "NHWC")),      # grouped: batch-grouped per-position products
    (1, (2, 2), ("NCHW", "OIHW", "NCHW")),      # phases of the input gradient, in NCHW
])
def test_grouped_and_depthwise_gradients_on_cpu_against_jax(groups, strides, dims):
    import hlo
    rng = np.random.default_rng(2)
    nchw = dims[0] == "NCHW"
    x = rng.standard_normal((2, 4, 7, 6) if nchw else (2, 7, 6, 4)).astype(np.float32)
    ci = 4 // groups
    w = rng.standard_normal((4, ci, 3, 3) if nchw else (3, 3, ci, 4)).astype(np.float32)
    f = _grad_program(groups, strides, dims)
    y_shape = jax.eval_shape(lambda x, w: jax.lax.conv_general_dilated(
        x, w, strides, "SAME", rhs_dilation=(1, 2) if strides == (1, 1) else None, dimension_numbers=dims,
        feature_group_count=groups), x, w).shape
    g = rng.standard_normal(y_shape).astype(np.float32)
    got = hlo.load_stablehlo(jax.jit(f).lower(x, w, g).as_text()).compile(target="cpu")(x, w, g)
    for a, b in zip(got, jax.jit(f)(x, w, g)):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f64", "s32"])
@pytest.mark.parametrize("layout", ["nhwc", "nchw_grouped", "depthwise", "transposed"])
def test_compiled_convolutions_of_every_dtype_against_the_interpreter(dtype, layout):
    """The CPU's products (f16/bf16 accumulated in f32, s32 on the integer loop) against the
    interpreter's convolution, for the forward forms and an lhs-dilated one (phases)."""
    import ml_dtypes

    from hlo.ir import parse_module
    from hlo.ir.interpreter import run
    kw = {"nhwc": dict(lhs_perm=(0, 3, 1, 2), rhs_perm=(3, 2, 0, 1), out_perm=(0, 3, 1, 2), strides=(2, 1)),
          "nchw_grouped": dict(c=4, o=6, fgc=2, rhs_dil=(2, 1)),
          "depthwise": dict(c=4, o=8, fgc=4, lhs_perm=(0, 3, 1, 2), rhs_perm=(3, 2, 0, 1), out_perm=(0, 3, 1, 2)),
          "transposed": dict(lhs_dil=(2, 2), padding=((2, 1), (1, 2)), rev=(True, False))}[layout]
    src, _ = conv_text(dtype=dtype, **kw)
    module = parse_module(src)
    np_dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64, "s32": np.int32}[dtype]
    rng = np.random.default_rng(3)
    args = [(rng.integers(-3, 4, size=t.shape) if dtype == "s32" else rng.standard_normal(t.shape)).astype(np_dt)
            for t in module.main.arg_types]
    want = run(parse_module(src), args)[0]
    from hlo.backends.cpu import compile_module
    got = compile_module(parse_module(src)).run(list(args))[0]
    tol = {"f16": 2e-2, "bf16": 5e-2, "f64": 1e-12, "s32": 0}[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol * 4)
