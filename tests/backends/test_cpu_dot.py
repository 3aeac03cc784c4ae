"""dot_general on the CPU backend against the reference interpreter: IR text in, outputs compared.

Covers the operand and result layouts the dot kernel reads in place (strided views through
reshapes and transposes inside a fusion, permuted layouts of fusion parameters and results),
regressions, and random dimension numbers (batch and contracting dimensions anywhere,
transposed operands, f32/f64/s32) through a hypothesis search.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from cpu_helpers import assert_close, check, compile_through_pipeline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo.backends.cpu.blas import find_blas
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret


def _t(dt, shape, layout=None):
    s = f"{dt}[{','.join(map(str, shape))}]"
    return s + ("{" + ",".join(map(str, layout)) + "}" if layout is not None and shape else "")


def _rand(rng, dt, shape):
    if dt == "s32":
        return rng.integers(-4, 5, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32 if dt == "f32" else np.float64)


# ------------------------------------------------------------------------------------------
# Regressions
# ------------------------------------------------------------------------------------------

# matmul(b.T, c) with b: [4,5], c: [2,4,3] as the passes fused it: the output fusion's result is
# laid out {2,0,1} so that the transpose after it is a bitcast. The dot used to write it
# row-major (region values carry no layout), and the result came out permuted.
MATRIX_TIMES_BATCH = """module @m

func @main(%arg0: f32[4,5]{1,0}, %arg1: f32[2,4,3]{2,1,0}) -> (f32[2,5,3]{2,1,0}) {
  %0 = fusion(%arg0, %arg1) {kind = "output"} : f32[5,2,3]{2,0,1} {
    ^fused(%1: f32[4,5], %2: f32[2,4,3]):
      %3 = transpose(%1) {permutation = [1, 0]} : f32[5,4]
      %4 = dot_general(%3, %2) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[5,2,3]
      return(%4)
  }
  %5 = transpose(%0) {permutation = [1, 0, 2]} : f32[2,5,3]{2,1,0}
  return(%5)
}
"""


def test_output_fusion_result_in_permuted_layout():
    rng = np.random.default_rng(0)
    b, c = _rand(rng, "f32", (4, 5)), _rand(rng, "f32", (2, 4, 3))
    got = check(MATRIX_TIMES_BATCH, [b, c], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[0], np.matmul(b.T, c), rtol=1e-5, atol=1e-6)


def test_output_fusion_result_in_permuted_layout_through_pipeline():
    rng = np.random.default_rng(1)
    b, c = _rand(rng, "f32", (4, 5)), _rand(rng, "f32", (2, 4, 3))
    got = compile_through_pipeline(MATRIX_TIMES_BATCH).run([b, c])[0]
    np.testing.assert_allclose(got, np.matmul(b.T, c), rtol=1e-5, atol=1e-6)


def test_loop_fusion_result_and_parameter_in_permuted_layouts():
    """A loop fusion writes {0,1}; the next fusion reads that value through its parameter."""
    src = """module @m

func @main(%arg0: f32[4,5]) -> (f32[5,4], f32[4,5]) {
  %0 = fusion(%arg0) {kind = "loop"} : f32[4,5]{0,1} {
    ^fused(%1: f32[4,5]):
      %2 = exponential(%1) : f32[4,5]
      return(%2)
  }
  %3 = transpose(%0) {permutation = [1, 0]} : f32[5,4]{1,0}
  %4 = fusion(%0) {kind = "loop"} : f32[4,5] {
    ^fused(%5: f32[4,5]):
      %6 = negate(%5) : f32[4,5]
      return(%6)
  }
  return(%3, %4)
}
"""
    x = _rand(np.random.default_rng(2), "f32", (4, 5))
    check(src, [x], rtol=1e-6, atol=0)


# Attention's two products as the passes fuse them: q and k are head-split views
# ([B,S,H*D] -> [B,H,S,D]) of the projections, read in place (strided batches, lda = H*D); the
# second product's result is laid out {3,1,2,0} ([B,S,H,D] in memory), the row-major
# [B,S,H*D] that the output projection reads.
ATTENTION = """module @m

func @main(%q: f32[2,5,12], %k: f32[2,5,12], %v: f32[2,5,12]) -> (f32[2,5,12]) {
  %0 = fusion(%q, %k) {kind = "output"} : f32[2,3,5,5] {
    ^fused(%1: f32[2,5,12], %2: f32[2,5,12]):
      %3 = reshape(%1) : f32[2,5,3,4]
      %4 = transpose(%3) {permutation = [0, 2, 1, 3]} : f32[2,3,5,4]
      %5 = reshape(%2) : f32[2,5,3,4]
      %6 = transpose(%5) {permutation = [0, 2, 3, 1]} : f32[2,3,4,5]
      %7 = dot_general(%4, %6) {lhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 1], rhs_contracting_dimensions = [2]} : f32[2,3,5,5]
      return(%7)
  }
  %8 = fusion(%0, %v) {kind = "output"} : f32[2,3,5,4]{3,1,2,0} {
    ^fused(%9: f32[2,3,5,5], %10: f32[2,5,12]):
      %11 = reshape(%10) : f32[2,5,3,4]
      %12 = transpose(%11) {permutation = [0, 2, 1, 3]} : f32[2,3,5,4]
      %13 = dot_general(%9, %12) {lhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 1], rhs_contracting_dimensions = [2]} : f32[2,3,5,4]
      return(%13)
  }
  %14 = transpose(%8) {permutation = [0, 2, 1, 3]} : f32[2,5,3,4]
  %15 = reshape(%14) : f32[2,5,12]
  return(%15)
}
"""


def test_attention_products_read_head_views_in_place():
    rng = np.random.default_rng(3)
    args = [_rand(rng, "f32", (2, 5, 12)) for _ in range(3)]
    check(ATTENTION, args, rtol=1e-5, atol=1e-5)
    exe = compile_through_pipeline(ATTENTION)
    assert_close(exe.run(args)[0], interpret(parse_module(ATTENTION), args)[0], rtol=1e-5, atol=1e-5)


def test_head_views_need_no_operand_copies():
    """The strided views are read where they are: no canonical copy kernels for q, k, v."""
    from cpu_helpers import compile_text
    exe = compile_text(ATTENTION)
    assert "canonical" not in exe.steps_text, exe.steps_text
    assert "dot result" not in exe.steps_text, exe.steps_text


# Windows of a weight as products' operands: its first rows, a block of rows and columns, every
# third column (B's columns gathered into the panel), A's strided columns; and a batched window
# (every other matrix of a batch, a few rows of each).
WINDOWS = """module @m

func @main(%x: f32[9,40], %w: f32[50,70], %q: f32[6,7,8], %k: f32[6,8,9]) -> (f32[9,70], f32[9,21], f32[9,13], f32[3,5,9]) {
  %0 = fusion(%x, %w) {kind = "output"} : f32[9,70] {
    ^fused(%1: f32[9,40], %2: f32[50,70]):
      %3 = slice(%2) {limit_indices = [40, 70], start_indices = [0, 0]} : f32[40,70]
      %4 = dot_general(%1, %3) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[9,70]
      return(%4)
  }
  %5 = fusion(%x, %w) {kind = "output"} : f32[9,21] {
    ^fused(%6: f32[9,40], %7: f32[50,70]):
      %8 = slice(%7) {limit_indices = [47, 63], start_indices = [7, 0], strides = [1, 3]} : f32[40,21]
      %9 = dot_general(%6, %8) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[9,21]
      return(%9)
  }
  %10 = fusion(%x, %w) {kind = "output"} : f32[9,13] {
    ^fused(%11: f32[9,40], %12: f32[50,70]):
      %13 = slice(%11) {limit_indices = [9, 39], start_indices = [0, 1], strides = [1, 2]} : f32[9,19]
      %14 = slice(%12) {limit_indices = [31, 68], start_indices = [12, 55]} : f32[19,13]
      %15 = dot_general(%13, %14) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[9,13]
      return(%15)
  }
  %16 = fusion(%q, %k) {kind = "output"} : f32[3,5,9] {
    ^fused(%17: f32[6,7,8], %18: f32[6,8,9]):
      %19 = slice(%17) {limit_indices = [6, 7, 8], start_indices = [1, 2, 0], strides = [2, 1, 1]} : f32[3,5,8]
      %20 = slice(%18) {limit_indices = [5, 8, 9], start_indices = [0, 0, 0], strides = [2, 1, 1]} : f32[3,8,9]
      %21 = dot_general(%19, %20) {lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]} : f32[3,5,9]
      return(%21)
  }
  return(%0, %5, %10, %16)
}
"""


@pytest.mark.parametrize("gemm", ["generated", "blas"])
def test_windows_of_operands_are_read_in_place(monkeypatch, gemm):
    """Slices of a parameter are read where they lie (an offset into its buffer, its strides
    scaled by the slice's steps), not copied into canonical form first; the results match."""
    from cpu_helpers import compile_text
    if gemm == "blas" and find_blas() is None:
        pytest.skip("no BLAS")
    monkeypatch.setenv("HLO_CPU_GEMM", gemm)
    rng = np.random.default_rng(11)
    args = [_rand(rng, "f32", s) for s in ((9, 40), (50, 70), (6, 7, 8), (6, 8, 9))]
    check(WINDOWS, args, rtol=1e-5, atol=1e-5)
    steps = compile_text(WINDOWS).steps_text
    # BLAS reads B's columns only when they are contiguous: the every-third-column window and
    # the strided A are copied there, and only there
    want = 0 if gemm == "generated" else 2
    assert steps.count("canonical") == want, steps


def test_column_major_result_is_computed_transposed():
    """A 2-D product whose result is laid out {0,1}: C^T = B^T A^T, no relayout kernel."""
    from cpu_helpers import compile_text
    src = """module @m

func @main(%a: f32[6,8], %b: f32[8,7]) -> (f32[7,6]) {
  %0 = fusion(%a, %b) {kind = "output"} : f32[6,7]{0,1} {
    ^fused(%1: f32[6,8], %2: f32[8,7]):
      %3 = dot_general(%1, %2) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[6,7]
      %4 = exponential(%3) : f32[6,7]
      return(%4)
  }
  %5 = transpose(%0) {permutation = [1, 0]} : f32[7,6]
  return(%5)
}
"""
    rng = np.random.default_rng(4)
    check(src, [_rand(rng, "f32", (6, 8)) * 0.3, _rand(rng, "f32", (8, 7)) * 0.3], rtol=1e-5, atol=1e-6)
    assert "dot result" not in compile_text(src).steps_text


# ------------------------------------------------------------------------------------------
# Random dimension numbers
# ------------------------------------------------------------------------------------------

@st.composite
def dot_programs(draw):
    dt = draw(st.sampled_from(["f32", "f64", "s32"]))
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nl, nr = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    size = st.integers(1, 4)
    bs = [draw(size) for _ in range(nb)]
    cs = [draw(size) for _ in range(nc)]
    ls = [draw(size) for _ in range(nl)]
    rs = [draw(size) for _ in range(nr)]
    # where each group's dimensions sit in the operands
    lperm = draw(st.permutations(range(nb + nc + nl)))
    rperm = draw(st.permutations(range(nb + nc + nr)))
    lkinds = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nl)]
    rkinds = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nr)]
    lhs_dims = [lkinds[p] for p in lperm]
    rhs_dims = [rkinds[p] for p in rperm]
    sz = {"b": bs, "c": cs}
    lshape = [(sz.get(k) or ls)[i] for k, i in lhs_dims]
    rshape = [(sz.get(k) or rs)[i] for k, i in rhs_dims]
    attrs = {
        "lhs_batching_dimensions": [lhs_dims.index(("b", i)) for i in range(nb)],
        "rhs_batching_dimensions": [rhs_dims.index(("b", i)) for i in range(nb)],
        "lhs_contracting_dimensions": [lhs_dims.index(("c", i)) for i in range(nc)],
        "rhs_contracting_dimensions": [rhs_dims.index(("c", i)) for i in range(nc)],
    }
    out_shape = bs + [lshape[d] for d in range(len(lshape)) if lhs_dims[d][0] == "f"] + \
        [rshape[d] for d in range(len(rshape)) if rhs_dims[d][0] == "f"]
    # operands as transposes of parameters (read in place or copied), result in a random layout
    ltr = draw(st.permutations(range(len(lshape))))
    rtr = draw(st.permutations(range(len(rshape))))
    olay = draw(st.permutations(range(len(out_shape))))
    epilogue = draw(st.booleans())
    # each operand a window of a larger parameter or not: (start, step, past the end) per dimension
    window = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(0, 2)),
                      min_size=8, max_size=8)
    lwin = draw(st.one_of(st.none(), window))
    rwin = draw(st.one_of(st.none(), window))
    return dt, lshape, rshape, attrs, out_shape, ltr, rtr, olay, epilogue, lwin, rwin


def _sliced(name, dt, shape, win):
    """(parameter shape, the slice op's text or "", the value the transpose reads): ``shape``
    read as a window of a larger parameter."""
    if win is None:
        return shape, "", name
    full = [a + (n - 1) * k + 1 + z for n, (a, k, z) in zip(shape, win)]
    start = [a for a, _, _ in win[:len(shape)]]
    limit = [a + (n - 1) * k + 1 for n, (a, k, _) in zip(shape, win)]
    step = [k for _, k, _ in win[:len(shape)]]
    op = (f"      {name}s = slice({name}) {{limit_indices = {limit}, start_indices = {start}, "
          f"strides = {step}}} : {_t(dt, shape)}\n")
    return full, op, name + "s"


def _dot_src(dt, lshape, rshape, attrs, out_shape, ltr, rtr, olay, epilogue, lwin=None, rwin=None):
    inv = lambda p: [p.index(i) for i in range(len(p))]
    # parameter shapes: transpose(param, ltr) has shape lshape (of a window of it, when sliced)
    lp, lslice, lv = _sliced("%p0", dt, [lshape[i] for i in inv(ltr)], lwin)
    rp, rslice, rv = _sliced("%p1", dt, [rshape[i] for i in inv(rtr)], rwin)
    at = ", ".join(f"{k} = {v}" for k, v in sorted(attrs.items()))
    ot = _t(dt, out_shape)
    ep = ""
    res = "%5"
    extra_arg, extra_param = "", ""
    if epilogue:
        extra_arg, extra_param = ", %arg2", f", %p2: {ot}"
        ep = f"      %6 = add(%5, %p2) : {ot}\n"
        res = "%6"
    args = f"%arg0: {_t(dt, lp)}, %arg1: {_t(dt, rp)}" + (f", %arg2: {ot}" if epilogue else "")
    return f"""module @m

func @main({args}) -> ({ot}) {{
  %0 = fusion(%arg0, %arg1{extra_arg}) {{kind = "output"}} : {_t(dt, out_shape, list(reversed(olay)))} {{
    ^fused(%p0: {_t(dt, lp)}, %p1: {_t(dt, rp)}{extra_param}):
{lslice}{rslice}      %3 = transpose({lv}) {{permutation = {list(ltr)}}} : {_t(dt, lshape)}
      %4 = transpose({rv}) {{permutation = {list(rtr)}}} : {_t(dt, rshape)}
      %5 = dot_general(%3, %4) {{{at}}} : {ot}
{ep}      return({res})
  }}
  %7 = transpose(%0) {{permutation = {list(range(len(out_shape)))}}} : {ot}
  return(%7)
}}
""", [lp, rp] + ([out_shape] if epilogue else [])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dot_programs(), st.sampled_from(["generated", "blas"]), st.integers(0, 2 ** 31 - 1))
def test_random_dimension_numbers(prog, gemm, seed):
    """Through the generated tiled GEMM and through BLAS (``HLO_CPU_GEMM``); operands as
    windows (slices, any step) of their parameters, too."""
    dt = prog[0]
    src, shapes = _dot_src(*prog)
    rng = np.random.default_rng(seed)
    args = [_rand(rng, dt, s) for s in shapes]
    tol = {"f32": 1e-5, "f64": 1e-12, "s32": 0}[dt]
    old = os.environ.get("HLO_CPU_GEMM")
    os.environ["HLO_CPU_GEMM"] = gemm
    try:
        check(src, args, rtol=tol, atol=tol)
    finally:
        if old is None:
            del os.environ["HLO_CPU_GEMM"]
        else:
            os.environ["HLO_CPU_GEMM"] = old


@pytest.mark.parametrize("dt", ["f32", "f64", "s32"])
def test_batched_products_through_pipeline(dt):
    """Batch dims in the middle, contracting dims first: the passes then the backend."""
    src = f"""module @m

func @main(%a: {_t(dt, [3, 2, 4])}, %b: {_t(dt, [4, 2, 5])}) -> ({_t(dt, [2, 3, 5])}) {{
  %0 = dot_general(%a, %b) {{lhs_batching_dimensions = [1], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [1], rhs_contracting_dimensions = [0]}} : {_t(dt, [2, 3, 5])}
  return(%0)
}}
"""
    rng = np.random.default_rng(5)
    args = [_rand(rng, dt, (3, 2, 4)), _rand(rng, dt, (4, 2, 5))]
    want = np.einsum("mbk,kbn->bmn", *args)
    got = compile_through_pipeline(src).run(args)[0]
    tol = 1e-5 if dt == "f32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("gemm", ["generated", "blas"])
@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n", [(13, 9, 37), (6, 33, 16), (1, 5, 8), (25, 1, 3), (7, 64, 24),
                                   (301, 40, 203)])  # the last is split over threads in blocks
@pytest.mark.parametrize("b_transposed", [False, True])
def test_gemm_kernels_on_odd_shapes(monkeypatch, gemm, dt, m, k, n, b_transposed):
    """Both float kernels (the generated tiled GEMM and BLAS) on shapes that exercise whole
    register tiles, row and column tails and scalar columns, with a fused epilogue."""
    if gemm == "blas" and find_blas() is None:
        pytest.skip("no BLAS")
    monkeypatch.setenv("HLO_CPU_GEMM", gemm)
    bsrc, bdim = ("%6", 1) if b_transposed else ("%2", 0)
    src = f"""module @m

func @main(%a: {_t(dt, [2, m, k])}, %b: {_t(dt, [k, n])}, %c: {_t(dt, [2, m, n])}) -> ({_t(dt, [2, m, n])}) {{
  %0 = fusion(%a, %b, %c) {{kind = "output"}} : {_t(dt, [2, m, n])} {{
    ^fused(%1: {_t(dt, [2, m, k])}, %2: {_t(dt, [k, n])}, %3: {_t(dt, [2, m, n])}):
      %6 = transpose(%2) {{permutation = [1, 0]}} : {_t(dt, [n, k])}
      %4 = dot_general(%1, {bsrc}) {{lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [{bdim}]}} : {_t(dt, [2, m, n])}
      %5 = add(%4, %3) : {_t(dt, [2, m, n])}
      return(%5)
  }}
  return(%0)
}}
"""
    rng = np.random.default_rng(m * 100 + n)
    args = [_rand(rng, dt, (2, m, k)), _rand(rng, dt, (k, n)), _rand(rng, dt, (2, m, n))]
    tol = 1e-5 if dt == "f32" else 1e-12
    check(src, args, rtol=tol, atol=tol)


@pytest.mark.parametrize("blocks", [(7, 20), (12, 16), (5, 9), (6, 45)])
def test_tiled_gemm_emits_the_tiles_every_block_needs(monkeypatch, blocks):
    """The tiled GEMM emits only the row-tail tiles and column loops that the (compile-time)
    block sizes can produce: blocks whose last row/column block is shorter must still get
    theirs (23 rows in blocks of 7 leave 2; 45 columns in blocks of 20 leave 5: a scalar tail)."""
    import hlo.backends.cpu.dot as dot
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    monkeypatch.setattr(dot, "_blocks", lambda cg, Bn, M, N, K=0, whole="", panels=True: blocks)
    m, k, n = 23, 17, 45
    src = f"""module @m

func @main(%a: {_t("f32", [m, k])}, %b: {_t("f32", [k, n])}) -> ({_t("f32", [m, n])}) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : {_t("f32", [m, n])}
  return(%0)
}}
"""
    rng = np.random.default_rng(7)
    check(src, [_rand(rng, "f32", (m, k)), _rand(rng, "f32", (k, n))], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M,N,K,whole,grid", [
    (1024, 512, 2048, "", (2, 1)),   # the FFN's second product: packing ties, whole-width rows
    (1024, 512, 512, "", (2, 1)),    # q/k/v: a tie too
    (1024, 2048, 512, "", (1, 2)),   # the FFN's first: column blocks pack the least
    (128, 512, 784, "", (1, 2)),     # column blocks pack the least
    (16, 16, 16, "", (1, 1)),        # too small to split
    (784, 512, 128, "", (2, 1)),     # the train step's dW1: row blocks pack the least
    (128, 512, 784, "rows", (1, 2)),  # packing 784 x 512 twice costs more than the epilogue
    (512, 784, 128, "cols", (1, 2)),  # computed transposed: C's rows are the columns here
    (128, 512, 10, "", (1, 2)),      # the train step's g @ w2^T: column blocks pack the least ...
    (128, 512, 10, "store", (2, 1)),  # ... but writing C bounds it: rows stay whole
    (128, 512, 64, "rows", (2, 1)),  # an epilogue reads C back: rows stay whole
    (128, 512, 64, "", (1, 2)),
])
def test_parallel_blocks_pack_the_least_then_keep_rows_whole(M, N, K, whole, grid):
    """Two threads split a product into a grid of 2 blocks, one per thread (row blocks x column
    blocks), shaped to pack the least; of grids that pack the same, the one with whole-width rows (each item
    reads its rows of A once). A grid that divides C's rows between threads costs more when an
    epilogue reads C back (``whole``). Blocks are whole register tiles of rows, whole panels of
    columns."""
    import hlo.backends.cpu.dot as dot
    from hlo.backends.cpu.gemm_tiled import register_tile, vector_lanes
    from hlo.ir.types import f32
    if whole == "store":   # no epilogue, a short contraction
        assert K <= dot.STORE_BOUND_K and dot._whole(None, K, False) == "rows"
        whole = dot._whole(None, K, False)
    assert dot._whole(None, 784, False) == "" and dot._whole(object(), 784, True) == "cols"

    class Cg:
        threads = 2

    mr, nv = register_tile()
    panel = nv * vector_lanes(f32)
    mb, nb = grid
    rows = -(-(-(-M // mb)) // mr) * mr if mb > 1 else M
    cols = -(-(-(-N // nb)) // panel) * panel if nb > 1 else N
    assert dot._blocks(Cg(), 1, M, N, K, whole) == (rows, cols)


@pytest.mark.parametrize("dt,n,group,min_stride", [
    ("f32", 123, 3, 0),      # 7 panels in groups of 3, 3, 1, then a vector and scalar columns
    ("f64", 37, 2, 0),       # 4 panels of 8 in groups of 2, then a vector and a scalar column
    ("f32", 1030, None, None),  # the default: rows of B 4120 bytes apart, groups of 4, 6 scalars
])
def test_tiled_gemm_packs_panels_in_groups(monkeypatch, dt, n, group, min_stride):
    """Panels packed together (B's rows a page apart) give the same products as one at a time,
    including the last, shorter group of a block."""
    import hlo.backends.cpu.gemm_tiled as gt
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    if group is not None:
        monkeypatch.setattr(gt, "PANEL_GROUP", group)
        monkeypatch.setattr(gt, "PANEL_GROUP_MIN_STRIDE", min_stride)
    m, k = 13, 20
    src = f"""module @m

func @main(%a: {_t(dt, [m, k])}, %b: {_t(dt, [k, n])}) -> ({_t(dt, [m, n])}) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : {_t(dt, [m, n])}
  return(%0)
}}
"""
    rng = np.random.default_rng(n)
    tol = 1e-5 if dt == "f32" else 1e-12
    check(src, [_rand(rng, dt, (m, k)), _rand(rng, dt, (k, n))], rtol=tol, atol=tol)


def _core_calls(ir_text: str):
    """The program's calls to the GEMM's library code (``gemm_library``): its run-time modes."""
    from hlo.backends.cpu.gemm_library import core_calls
    calls = core_calls(ir_text)
    assert calls, "the program calls no GEMM body"
    return calls


@pytest.mark.parametrize("m,panels,fills", [(32, 2, True), (13, 1, True), (12, 3, True),
                                             (32, None, False)])  # None: B's rows 4 KiB apart
def test_tiled_gemm_fills_panels_in_their_first_tile(monkeypatch, m, panels, fills):
    """With B's rows less than a page apart, the first tile of each whole panel (the row tail,
    or a whole tile when the rows divide evenly: m = 12) copies the panel while it computes,
    and no separate copy loop is emitted; the products equal those of the copy-first kernel bit
    for bit (the same tiles, the same order of the k loop). N is a whole number of panels of
    this machine's register tile (a column tail would be packed)."""
    from cpu_helpers import compile_text

    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.dot import vector_lanes
    from hlo.ir.types import f32
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    n = 1024 if panels is None else panels * gt.register_tile()[1] * vector_lanes(f32)
    k = 70
    src = f"""module @m

func @main(%a: {_t("f32", [m, k])}, %b: {_t("f32", [k, n])}) -> ({_t("f32", [m, n])}) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : {_t("f32", [m, n])}
  return(%0)
}}
"""
    rng = np.random.default_rng(m + n)
    args = [_rand(rng, "f32", (m, k)), _rand(rng, "f32", (k, n))]
    exe = compile_text(src, threads=2)
    # bit 0 of the body's ``fill`` argument: fill the panels in their first tile (else copy first)
    assert {int(c["fill"]) & 1 for c in _core_calls(exe.ir_text)} == {int(fills)}
    got = check(src, args, rtol=1e-5, atol=1e-5, threads=2)[0]
    monkeypatch.setattr(gt, "FILL_PREFETCH_ROWS", 0)
    plain = compile_text(src, threads=2)
    assert {int(c["fill"]) & 1 for c in _core_calls(plain.ir_text)} == {0}
    np.testing.assert_array_equal(plain.run(args)[0], got)


@pytest.mark.parametrize("gemm", ["generated", "auto"])
def test_long_contraction_past_the_tiled_panel(monkeypatch, gemm):
    """A long contraction: the tiled kernel runs it in blocks whose panels fit in L1."""
    monkeypatch.setenv("HLO_CPU_GEMM", gemm)
    k = 4101
    src = f"""module @m

func @main(%a: f32[3,{k}], %b: f32[{k},17]) -> (f32[3,17]) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[3,17]
  return(%0)
}}
"""
    rng = np.random.default_rng(6)
    a, b = _rand(rng, "f32", (3, k)), _rand(rng, "f32", (k, 17))
    check(src, [a, b], rtol=1e-4, atol=1e-3)


def test_bad_gemm_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HLO_CPU_GEMM", "fastest")
    with pytest.raises(ValueError, match="HLO_CPU_GEMM"):
        check(MATRIX_TIMES_BATCH, [np.zeros((4, 5), np.float32), np.zeros((2, 4, 3), np.float32)])


def test_blas_setting_without_a_blas_is_a_clear_error(monkeypatch):
    """HLO_CPU_GEMM=blas where the optional BLAS (scipy-openblas32) is not installed: an error
    that names it, not a silent fall-back (numpy's bundled OpenBLAS is never used)."""
    import hlo.backends.cpu.dot as dot
    monkeypatch.setenv("HLO_CPU_GEMM", "blas")
    monkeypatch.setattr(dot, "find_blas", lambda: None)
    with pytest.raises(RuntimeError, match=r"scipy-openblas32 \(pip install 'hlo\[blas\]'\)"):
        check(MATRIX_TIMES_BATCH, [np.zeros((4, 5), np.float32), np.zeros((2, 4, 3), np.float32)])


def test_find_blas_is_not_cached_off(monkeypatch):
    """A first search under HLO_CPU_GEMM=generated (BLAS off) leaves the BLAS to a later one."""
    from hlo.backends.cpu import blas
    blas._search.cache_clear()
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    assert blas.find_blas() is None
    monkeypatch.setenv("HLO_CPU_GEMM", "blas")
    assert blas.find_blas() == blas._search()
    if blas._search() is None:
        pytest.skip(f"no BLAS installed ({blas.BLAS_PACKAGE})")
    assert "numpy.libs" not in blas.find_blas().path


@pytest.mark.parametrize("gemm", ["generated", "blas"])
@pytest.mark.parametrize("lt,rt,ot", [("f16", "f16", "f16"), ("bf16", "bf16", "bf16"), ("f16", "f16", "f32"),
                                      ("s8", "s8", "s32"), ("f32", "f32", "f32")])
def test_mixed_and_narrow_types(monkeypatch, gemm, lt, rt, ot):
    """Narrow floats are computed in f32 (canonical copies), a preferred result type is
    converted on the way out; batch dims in the middle, a transposed rhs."""
    if gemm == "blas" and find_blas() is None:
        pytest.skip("no BLAS")
    import ml_dtypes
    monkeypatch.setenv("HLO_CPU_GEMM", gemm)
    src = f"""module @m

func @main(%a: {_t(lt, [5, 3, 20])}, %b: {_t(rt, [3, 17, 20])}) -> ({_t(ot, [3, 5, 17])}) {{
  %0 = dot_general(%a, %b) {{lhs_batching_dimensions = [1], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [2]}} : {_t(ot, [3, 5, 17])}
  return(%0)
}}
"""
    np_t = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "s8": np.int8}
    rng = np.random.default_rng(7)
    mk = lambda t, s: (rng.integers(-4, 5, size=s) if t == "s8" else rng.standard_normal(s)).astype(np_t[t])
    args = [mk(lt, (5, 3, 20)), mk(rt, (3, 17, 20))]
    tol = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-5, "s32": 0}[ot]
    check(src, args, rtol=tol, atol=tol)


def test_small_items_keep_their_panels_in_l1(monkeypatch):
    """A product of a few row tiles (M = 32) blocks its contraction so each panel stays in
    L1, and fills its panels as it computes even with B's rows a page apart (its whole tiles
    prefetching the next panel into L2); a tall product
    keeps the whole contraction (its panel in L2) and copies panels in groups."""
    from cpu_helpers import compile_text

    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.dot import vector_lanes
    from hlo.ir.types import f32
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    sizes = {1: 32 << 10, 2: 1 << 20}
    monkeypatch.setattr(gt, "cache_bytes", lambda level, default: sizes.get(level, default))
    _, nv = gt.register_tile()
    row = nv * vector_lanes(f32) * 4
    k = 4 * sizes[1] // row        # the whole panel: 4 x L1, at most an eighth of L2
    for m, small in ((32, True), (3000, False)):
        src = f"""module @m

func @main(%a: {_t("f32", [m, k])}, %b: {_t("f32", [k, 1024])}) -> ({_t("f32", [m, 1024])}) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : {_t("f32", [m, 1024])}
  return(%0)
}}
"""
        exe = compile_text(src, threads=1)
        calls = _core_calls(exe.ir_text)
        # blocked: later blocks add to C (``acc`` known at run time only); filled: bit 0 of ``fill``
        assert any(not c["acc"].isdigit() for c in calls) == small
        assert {int(c["fill"]) & 1 for c in calls} == {int(small)}
        # bit 2: its whole tiles prefetch the next panel's rows of B into L2
        assert {int(c["fill"]) >> 2 & 1 for c in calls} == {int(small)}
        if small:
            rng = np.random.default_rng(3)
            a, b = _rand(rng, "f32", (m, k)), _rand(rng, "f32", (k, 1024))
            np.testing.assert_allclose(exe.run([a, b])[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("M,N,whole,panels", [
    (32, 1024, "", True),      # simple_mlp's first product: a block per panel, rows whole
    (32, 256, "rows", True),   # linear_relu (an epilogue): rows stay whole anyway
    (32, 512, "cols", False),  # computed transposed: panels would divide C's rows
    (128, 512, "", False),     # more row tiles than a small product has
])
def test_small_products_get_a_block_per_panel(M, N, whole, panels):
    """A product of a few row tiles is cut into one block per panel of columns (its rows
    whole), so each block's C stays in L1 across the blocks of its contraction."""
    import hlo.backends.cpu.dot as dot
    from hlo.backends.cpu.gemm_tiled import SMALL_ITEM_TILES, register_tile, vector_lanes
    from hlo.ir.types import f32

    class Cg:
        threads = 2

    mr, nv = register_tile()
    panel = nv * vector_lanes(f32)
    assert (M <= SMALL_ITEM_TILES * mr) == (M == 32)
    got = dot._blocks(Cg(), 1, M, N, 512, whole)
    assert (got == (M, panel)) == panels, got
    # the BLAS's calls pack their own blocks: it keeps the grid that packs the least
    assert dot._blocks(Cg(), 1, M, N, 512, whole, panels=False) != (M, panel)
