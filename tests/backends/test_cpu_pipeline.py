"""The CPU backend behind the passes' real CPU pipeline (fusion, layout, buffer assignment):
a representative set of the op tests, compiled through ``hlo.passes.pipeline.optimize``."""
import cpu_helpers as helpers
import pytest
import test_cpu_ops as test_ops

CASES = [test_ops.test_broadcast_reshape_transpose, test_ops.test_slices_pad_concat_reverse,
         test_ops.test_gather, test_ops.test_reduce_variadic_argmax, test_ops.test_convolution_2d,
         test_ops.test_reduce_window, test_ops.test_sort_stable_multi_operand,
         test_ops.test_scatter_add_with_out_of_bounds, test_ops.test_while_if_case_call,
         test_ops.test_while_swapping_state, test_ops.test_outputs_alias_inputs_and_constants,
         test_ops.test_dot_mixed_precision_result]


@pytest.fixture
def through_pipeline(monkeypatch):
    pytest.importorskip("hlo.passes.pipeline")
    monkeypatch.setattr(helpers, "compile_text", helpers.compile_through_pipeline)


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_op_through_pipeline(through_pipeline, case):
    case()


@pytest.mark.parametrize("shape,dims", [((6, 33), [1]), ((6, 33), [0]), ((4, 5, 6), [0, 2])])
def test_reduce_through_pipeline(through_pipeline, shape, dims):
    test_ops.test_reduce_f32(shape, dims, "add", "0.0")


def test_softmax_layernorm_mlp_through_pipeline(through_pipeline):
    """Unfused programs that the fusion passes turn into row and output fusions."""
    import numpy as np
    rng = np.random.default_rng(3)
    src = """module @m
func @main(%arg0: f32[16,64], %arg1: f32[64,32], %arg2: f32[32]) -> (f32[16,32]) {
  %0 = constant dense<-inf> : f32[]
  %1 = reduce(%arg0, %0) {dimensions = [1]} : f32[16] {
    ^body(%2: f32[], %3: f32[]):
      %4 = maximum(%2, %3) : f32[]
      return(%4)
  }
  %5 = broadcast_in_dim(%1) {broadcast_dimensions = [0]} : f32[16,64]
  %6 = subtract(%arg0, %5) : f32[16,64]
  %7 = exponential(%6) : f32[16,64]
  %8 = constant dense<0.0> : f32[]
  %9 = reduce(%7, %8) {dimensions = [1]} : f32[16] {
    ^body(%10: f32[], %11: f32[]):
      %12 = add(%10, %11) : f32[]
      return(%12)
  }
  %13 = broadcast_in_dim(%9) {broadcast_dimensions = [0]} : f32[16,64]
  %14 = divide(%7, %13) : f32[16,64]
  %15 = dot_general(%14, %arg1) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[16,32]
  %16 = broadcast_in_dim(%arg2) {broadcast_dimensions = [1]} : f32[16,32]
  %17 = add(%15, %16) : f32[16,32]
  %18 = tanh(%17) : f32[16,32]
  %19 = add(%18, %17) : f32[16,32]
  return(%19)
}
"""
    args = [rng.standard_normal((16, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32),
            rng.standard_normal(32).astype(np.float32)]
    helpers.check(src, args, rtol=1e-5, atol=1e-5)
    exe = helpers.compile_through_pipeline(src)
    assert len(exe.kernels) < 6  # fused: far fewer kernels than ops


def test_glue_is_left_unoptimized_and_kernels_are_not():
    """A program's entry points and task wrappers are glue (``llvm_util.glue``: optnone, which
    keeps their O3 time out of every compile); its kernels are optimized, and the program gives
    the same results as numpy (the entry points run unoptimized)."""
    import re

    import numpy as np

    import hlo
    from hlo.runtime.cpu import abi
    f = hlo.jit(lambda x, y: np.float32(2) * x + y.sum(axis=1, keepdims=True), target="cpu")
    x = np.arange(64 * 256, dtype=np.float32).reshape(64, 256) / 1e3
    np.testing.assert_allclose(f(x, x), 2 * x + x.sum(axis=1, keepdims=True), rtol=1e-5)
    with hlo.config.override(cache=False):   # the IR as emitted (not a cached executable's)
        text = f.lower(x, x).compile()._artifact.executable.ir_text
    defs = dict(re.findall(r'(?m)^define [^@]*@"?([\w.]+)"?\(.*\)(.*)$', text))
    glue = {n for n, attrs in defs.items() if "optnone" in attrs}
    assert {abi.ENTRY, abi.PY_ENTRY, abi.CALL_ENTRY} <= glue
    assert all(n.endswith(".task") for n in glue - {abi.ENTRY, abi.PY_ENTRY, abi.CALL_ENTRY})
    kernels = [n for n in defs if n.startswith("k.") and not n.endswith(".task")]
    assert kernels and not glue & set(kernels)
