"""The CUDA kernel families at the sizes that select each launch shape: cooperative reductions
by a warp and by a block (f32, f64, s64, pred, a variadic argmax), row kernels (softmax, layer
norm) with the row in registers of a warp, of a block, and streamed, column reductions,
unrolled loop kernels, generated (integer) dots, rank sort and merge sort, scatter by window
position, by update element with atomic adds, and on one thread. Compiled to PTX that ptxas accepts everywhere; with a GPU, run
against the reference interpreter."""
import numpy as np
import pytest
from cuda_helpers import HAVE_GPU, ROW_SOFTMAX, check, compile_src, row_src

from hlo.backends.cuda import compile as cuda_compile
from hlo.backends.cuda.kernels import MAX_BLOCK, ROW_REGS, WARP, row_group
from hlo.passes.pipeline import optimize

rng = np.random.default_rng(7)

REDUCE = """module @m
func @main(%arg0: {et}[{shape}]) -> ({et}[{rshape}]) {{
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%arg0, %0) {{dimensions = {dims}}} : {et}[{rshape}] {{
    ^body(%2: {et}[], %3: {et}[]):
      %4 = {op}(%2, %3) : {et}[]
      return(%4)
  }}
  return(%1)
}}
"""


def _reduce(et, shape, dims, op, init):
    rshape = ",".join(str(s) for i, s in enumerate(shape) if i not in dims)
    return REDUCE.format(et=et, shape=",".join(map(str, shape)), rshape=rshape, dims=list(dims), op=op, init=init)


@pytest.mark.parametrize("et,shape,dims,op,init", [
    ("f32", (3, 5000), [1], "add", "0.0"),        # a block per row
    ("f32", (2, 100000), [1], "maximum", "-inf"),  # a block per row, many elements a thread
    ("f32", (70001,), [0], "add", "0.0"),          # everything to one value
    ("f64", (5, 3000), [1], "add", "0.0"),         # 64-bit shuffles
    ("s64", (4, 2500), [1], "add", "0"),
    ("f32", (7, 40, 9), [1, 2], "minimum", "inf"),  # two reduced dimensions, a warp each
    ("f32", (3000, 5), [0], "add", "0.0"),         # column reduction: a thread per column
])
def test_reductions(et, shape, dims, op, init):
    x = rng.standard_normal(shape)
    x = (x * 1000).astype(np.int64) if et == "s64" else x.astype(et.replace("f", "float"))
    check(_reduce(et, shape, dims, op, init), [x], rtol=1e-5, atol=1e-3)


def test_reduce_init_applied_once():
    # the init value is not the body's identity: applied once, as the spec's body(init, ...)
    x = rng.standard_normal((4, 3000)).astype(np.float32)
    check(_reduce("f32", (4, 3000), [1], "add", "10.0"), [x], rtol=1e-5, atol=1e-3)


def test_pred_reduction_through_shared_memory():
    src = _reduce("pred", (4, 2000), [1], "or", "false")
    x = np.zeros((4, 2000), bool)
    x[1, 1999] = x[3, 0] = True
    check(src, [x])


def test_argmax_by_a_block():
    src = """module @m
func @main(%arg0: f32[3,3000]) -> (f32[3], s32[3]) {
  %0 = iota() {iota_dimension = 1} : s32[3,3000]
  %1 = constant dense<-inf> : f32[]
  %2 = constant dense<0> : s32[]
  %3, %4 = reduce(%arg0, %0, %1, %2) {dimensions = [1]} : f32[3], s32[3] {
    ^body(%5: f32[], %6: s32[], %7: f32[], %8: s32[]):
      %9 = compare(%5, %7) {comparison_direction = "GT"} : pred[]
      %10 = compare(%5, %7) {comparison_direction = "EQ"} : pred[]
      %11 = compare(%6, %8) {comparison_direction = "LT"} : pred[]
      %12 = and(%10, %11) : pred[]
      %13 = or(%9, %12) : pred[]
      %14 = select(%13, %5, %7) : f32[]
      %15 = select(%13, %6, %8) : s32[]
      return(%14, %15)
  }
  return(%3, %4)
}
"""
    check(src, [rng.standard_normal((3, 3000)).astype(np.float32)])


@pytest.mark.parametrize("n,m", [(37, 100), (9, 700), (5, 5000), (3, 70001), (2, 33)])
def test_softmax_row_kernel(n, m):
    size, block, in_regs = row_group(m)
    assert (size == WARP) == (m <= WARP * ROW_REGS) and in_regs == (m <= 2 * ROW_REGS * MAX_BLOCK)
    src = row_src(ROW_SOFTMAX, "f32", n, m)
    x = rng.standard_normal((n, m)).astype(np.float32) * 3
    x[1, m // 2] = np.nan
    prog = compile_src(src)
    assert "row-fused" in prog.steps_text and len(prog.kernels) == 1
    check(src, [x], rtol=1e-5, atol=1e-7)


def test_loop_kernel_unrolled_with_a_tail():
    n = 4 * 256 * 132 * 3 + 77
    src = f"""module @m
func @main(%arg0: f32[{n}], %arg1: f32[{n}]) -> (f32[{n}]) {{
  %0 = multiply(%arg0, %arg1) : f32[{n}]
  %1 = tanh(%0) : f32[{n}]
  return(%1)
}}
"""
    check(src, [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)],
          rtol=1e-5, atol=1e-6)


def test_transpose_and_integer_dot():
    src = """module @m
func @main(%arg0: s32[33,17], %arg1: s32[17,9], %arg2: f32[300,500]) -> (s32[33,9], f32[500,300]) {
  %0 = dot_general(%arg0, %arg1) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : s32[33,9]
  %1 = transpose(%arg2) {permutation = [1, 0]} : f32[500,300]
  %2 = exponential(%1) : f32[500,300]
  return(%0, %2)
}
"""
    prog = compile_src(src)
    assert prog.manifest["generated_dots"], "an s32 product is a generated kernel"
    check(src, [rng.integers(-50, 50, (33, 17)).astype(np.int32), rng.integers(-50, 50, (17, 9)).astype(np.int32),
                rng.standard_normal((300, 500)).astype(np.float32)], rtol=1e-5, atol=1e-6)


SORT = """module @m
func @main(%arg0: f32[{r},{n}], %arg1: s32[{r},{n}]) -> (f32[{r},{n}], s32[{r},{n}]) {{
  %0, %1 = sort(%arg0, %arg1) {{dimension = 1, is_stable = true}} : f32[{r},{n}], s32[{r},{n}] {{
    ^comparator(%2: f32[], %3: f32[], %4: s32[], %5: s32[]):
      %6 = compare(%2, %3) {{comparison_direction = "LT", compare_type = "TOTALORDER"}} : pred[]
      return(%6)
  }}
  return(%0, %1)
}}
"""


@pytest.mark.parametrize("r,n", [(3, 700), (2, 5000)])  # rank sort; merge sort
def test_stable_sort(r, n):
    x = rng.integers(0, 20, (r, n)).astype(np.float32)  # many ties: stability matters
    x[0, 5] = np.nan
    x[-1, 7] = -0.0
    prog = compile_src(SORT.format(r=r, n=n))
    assert ("rank sort" if n <= 4096 else "merge sort") in prog.steps_text
    check(SORT.format(r=r, n=n), [x, np.arange(r * n, dtype=np.int32).reshape(r, n)])


SCATTER = """module @m
func @main(%arg0: f32[50,8], %arg1: s32[{k},1], %arg2: f32[{k},{w},8]) -> (f32[50,8]) {{
  %0 = scatter(%arg0, %arg1, %arg2) {{index_vector_dim = 1, {wins}, scatter_dims_to_operand_dims = [0], update_window_dims = [{uwd}]}} : f32[50,8] {{
    ^update(%1: f32[], %2: f32[]):
      return(%2)
  }}
  return(%0)
}}
"""


@pytest.mark.parametrize("k,w,how", [
    (300, 1, "a thread per window position"),  # threads take the 8 columns, walk 300 indices in order
    (40, 3, "one thread"),                     # windows of 3 rows overlap: all in order on one thread
])
def test_scatter_replace_in_order(k, w, how):
    src = SCATTER.format(k=k, w=w, wins="inserted_window_dims = []", uwd="1, 2")
    assert how in compile_src(src).steps_text
    check(src, [rng.standard_normal((50, 8)).astype(np.float32), rng.integers(-2, 52, (k, 1)).astype(np.int32),
                rng.standard_normal((k, w, 8)).astype(np.float32)])


def test_optimization_barrier_and_constants():
    src = """module @m
func @main(%arg0: f32[4,300], %arg1: s32[300]) -> (f32[4,300], s32[300]) {
  %0, %1 = optimization_barrier(%arg0, %arg1) : f32[4,300], s32[300]
  %2 = constant dense<2.5> : f32[]
  %3 = broadcast_in_dim(%2) {broadcast_dimensions = []} : f32[4,300]
  %4 = multiply(%0, %3) : f32[4,300]
  return(%4, %1)
}
"""
    check(src, [rng.standard_normal((4, 300)).astype(np.float32), np.arange(300, dtype=np.int32)])


SCATTER_ADD = """module @m
func @main(%arg0: {t}[50,8], %arg1: s32[{k},1], %arg2: {t}[{k},{w},8]) -> ({t}[50,8]) {{
  %0 = scatter(%arg0, %arg1, %arg2) {{index_vector_dim = 1, inserted_window_dims = [], scatter_dims_to_operand_dims = [0], update_window_dims = [1, 2]}} : {t}[50,8] {{
    ^update(%1: {t}[], %2: {t}[]):
      %3 = add(%1, %2) : {t}[]
      return(%3)
  }}
  return(%0)
}}
"""


@pytest.mark.parametrize("t,k,w", [("f32", 300, 1), ("f32", 40, 3), ("s32", 300, 2), ("f64", 1000, 1)])
def test_scatter_add_is_one_atomic_pass_over_the_updates(t, k, w):
    """Colliding targets (300 updates into 50 rows, windows of 3 rows overlapping), indices out
    of bounds skipped: a thread per update element adding with an atomic, in the PTX."""
    src = SCATTER_ADD.format(t=t, k=k, w=w)
    prog = compile_src(src)
    assert "a thread per update element, atomic add" in prog.steps_text
    assert "atom.global.add" in prog.ptx or "red.global.add" in prog.ptx
    dt = {"f32": np.float32, "f64": np.float64, "s32": np.int32}[t]
    check(src, [rng.standard_normal((50, 8)).astype(dt), rng.integers(-2, 52, (k, 1)).astype(np.int32),
                (rng.standard_normal((k, w, 8)) * (1 if t[0] == "f" else 9)).astype(dt)], rtol=1e-5, atol=1e-4)


def test_a_scatter_that_replaces_or_of_one_index_has_no_atomics():
    src = SCATTER_ADD.format(t="f32", k=1, w=1)
    assert "atomic" not in compile_src(src).steps_text
    src = SCATTER_ADD.format(t="f32", k=40, w=1).replace("%3 = add(%1, %2) : f32[]", "%3 = multiply(%1, %2) : f32[]")
    assert "atomic" not in compile_src(src).steps_text


def test_max_pooling_gradient_from_jax_is_an_atomic_scatter():
    """jax's max-pooling gradient is a select_and_scatter, which the importer makes a
    reduce_window of (value, index) pairs and a scatter-add of one element a window."""
    jax = pytest.importorskip("jax")
    import hlo

    def pool(x):
        return jax.lax.reduce_window(x, -np.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")

    x = rng.standard_normal((2, 17, 17, 4)).astype(np.float32)
    g = jax.jit(lambda x: jax.grad(lambda x: (pool(x) ** 2).sum())(x))
    low = hlo.load_stablehlo(g.lower(x).as_text())
    assert "select_and_scatter" in g.lower(x).as_text()
    prog = cuda_compile(optimize(low.ir, target="cuda"))
    assert "atomic add" in prog.steps_text
    if HAVE_GPU:
        got = prog(x)[0]
        np.testing.assert_allclose(np.asarray(got), np.asarray(g(x)), rtol=1e-5, atol=1e-5)
