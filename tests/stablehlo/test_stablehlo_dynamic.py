"""Shape-polymorphic StableHLO (issue 38, second layer): ``tensor<?x...>`` and the dynamic ops
imported into symbolic hlo types, run on the interpreter and on cpu (specialized to the sizes
of the call), against numpy and against jax's own shape refinement + XLA."""
import numpy as np
import pytest

from hlo.ir import parse_module, print_module
from hlo.ir.interp import InterpreterError
from hlo.ir.interpreter import run
from hlo.ir.specialize import bind_symbols, dim_arg_values, specialize_module
from hlo.ir.stablehlo import UnsupportedError, export_module, import_module

# jax.export's older calling convention, as StableHLO's testdata/dynamic has it: the dimension
# argument first; the sizes computed from it feed dynamic_broadcast_in_dim's shape operand.
BROADCAST_ADD = """
module @m {
  func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>, %arg2: tensor<2x?x4xf32>) -> tensor<2x?x4xf32> {
    %0 = stablehlo.constant dense<2> : tensor<1xi32>
    %1 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
    %2 = stablehlo.reshape %1 : (tensor<i32>) -> tensor<1xi32>
    %3 = stablehlo.constant dense<4> : tensor<1xi32>
    %4 = stablehlo.concatenate %0, %2, %3, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %5 = stablehlo.dynamic_broadcast_in_dim %arg1, %4, dims = [1, 2] : (tensor<?x4xf32>, tensor<3xi32>) -> tensor<2x?x4xf32>
    %6 = stablehlo.add %5, %arg2 : tensor<2x?x4xf32>
    return %6 : tensor<2x?x4xf32>
  }
}
"""

BROADCAST_ADD_HLO = """module @m

func @main(%arg0: s64[] {dim = d0}, %arg1: f32[d0,4], %arg2: f32[2,d0,4]) -> (f32[2,d0,4]) {
  %0 = constant dense<[2]> : s32[1]
  %1 = convert(%arg0) : s32[]
  %2 = reshape(%1) : s32[1]
  %3 = constant dense<[4]> : s32[1]
  %4 = concatenate(%0, %2, %3) {dimension = 0} : s32[3]
  %5 = broadcast_in_dim(%arg1) {broadcast_dimensions = [1, 2]} : f32[2,d0,4]
  %6 = add(%5, %arg2) : f32[2,d0,4]
  return(%6)
}
"""

# dynamic_iota from the dimension argument, reshaped with 2*b, a get_dimension_size of an
# argument's '?', a real_dynamic_slice up to b-1, and a private function called with '?' types.
MIXED = """
module @m {
  func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x3xf32>) -> (tensor<?xi32>, tensor<i32>, tensor<?x3xf32>, tensor<3xf32>) {
    %0 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
    %1 = stablehlo.constant dense<2> : tensor<i32>
    %2 = stablehlo.multiply %0, %1 : tensor<i32>
    %3 = stablehlo.reshape %2 : (tensor<i32>) -> tensor<1xi32>
    %4 = stablehlo.dynamic_iota %3, dim = 0 : (tensor<1xi32>) -> tensor<?xi32>
    %5 = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
    %6 = stablehlo.constant dense<1> : tensor<i32>
    %7 = stablehlo.subtract %0, %6 : tensor<i32>
    %8 = stablehlo.reshape %7 : (tensor<i32>) -> tensor<1xi32>
    %9 = stablehlo.constant dense<3> : tensor<1xi32>
    %10 = stablehlo.concatenate %8, %9, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %11 = stablehlo.constant dense<0> : tensor<2xi32>
    %12 = stablehlo.constant dense<1> : tensor<2xi32>
    %13 = stablehlo.real_dynamic_slice %arg1, %11, %10, %12 : (tensor<?x3xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x3xf32>
    %14 = call @colsum(%arg0, %arg1) : (tensor<i64>, tensor<?x3xf32>) -> tensor<3xf32>
    return %4, %5, %13, %14 : tensor<?xi32>, tensor<i32>, tensor<?x3xf32>, tensor<3xf32>
  }
  func.func private @colsum(%arg0: tensor<i64>, %arg1: tensor<?x3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.constant dense<0.0> : tensor<f32>
    %1 = stablehlo.reduce(%arg1 init: %0) applies stablehlo.add across dimensions = [0] : (tensor<?x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
"""


def _strip_locs(text: str) -> str:
    import re
    return re.sub(r' loc\("[^"]*":\d+\)', "", text)


def test_import_gives_symbolic_types():
    m = import_module(BROADCAST_ADD)
    assert _strip_locs(print_module(m)) == BROADCAST_ADD_HLO
    assert print_module(parse_module(print_module(m))) == print_module(m)


@pytest.mark.parametrize("b", [1, 3, 7])
def test_interpreter_runs_at_any_size(b):
    m = import_module(BROADCAST_ADD)
    rng = np.random.default_rng(b)
    x = rng.standard_normal((b, 4)).astype(np.float32)
    y = rng.standard_normal((2, b, 4)).astype(np.float32)
    (r,) = run(m, [np.array(b), x, y])
    np.testing.assert_array_equal(r, x[None] + y)


def test_dimension_argument_must_match_the_shapes():
    m = import_module(BROADCAST_ADD)
    x, y = np.zeros((3, 4), np.float32), np.zeros((2, 3, 4), np.float32)
    with pytest.raises(InterpreterError, match=r"argument #1 dimension 0 is 3 but its type says "
                                               r"'d0' = 5 with d0=5 \(from the value of argument #0\)"):
        run(m, [np.array(5), x, y])


@pytest.mark.parametrize("b", [2, 5])
def test_mixed_dynamic_ops(b):
    m = import_module(MIXED)
    text = print_module(m)
    assert "iota() {iota_dimension = 0} : s32[2*d0]" in text
    assert "slice(%arg1) {limit_indices = [(d0-1), 3], start_indices = [0, 0]} : f32[d0-1,3]" in text
    assert "func private @colsum(%arg0: s64[], %arg1: f32[d0,3])" in text
    assert print_module(parse_module(text)) == text  # symbolic attributes print and parse
    x = np.random.default_rng(0).standard_normal((b, 3)).astype(np.float32)
    iota, n, head, colsum = run(m, [np.array(b), x])
    np.testing.assert_array_equal(iota, np.arange(2 * b, dtype=np.int32))
    assert n == b and n.dtype == np.int32
    np.testing.assert_array_equal(head, x[:b - 1])
    np.testing.assert_allclose(colsum, x.astype(np.float64).sum(0), rtol=1e-6)


def test_cpu_runs_the_specialized_module():
    from hlo.staging.stages import Lowered
    m = import_module(MIXED)
    for b in (1, 4):
        x = np.arange(3 * b, dtype=np.float32).reshape(b, 3)
        args = [np.array(b), x]
        given, where = dim_arg_values(m["main"], args)
        env = bind_symbols(m["main"].arg_types, [a.shape for a in args], env=given, env_from=where)
        static = specialize_module(m, env)
        got = Lowered(static).compile(target="cpu")(*args)
        want = run(m, args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("text", [BROADCAST_ADD, MIXED])
def test_export_writes_the_dynamic_ops_back(text):
    from hlo.tools.conformance_dynamic import check_export
    m = import_module(text)
    out = export_module(m, pretty=True)  # jaxlib parses and verifies it
    assert "tensor<2x?x4xf32>" in out or "tensor<?x3xf32>" in out
    assert "stablehlo.dynamic_broadcast_in_dim" in out
    if text is MIXED:
        assert "stablehlo.dynamic_iota" in out and "stablehlo.real_dynamic_slice" in out
    assert check_export(m) == "ok"  # re-imports to the same program (dead size ops aside)
    again = import_module(out)
    for b in (1, 4):
        args = [np.array(b)] + [np.random.default_rng(b).standard_normal(
            tuple(b if not isinstance(d, int) else d for d in t.shape)).astype(np.float32)
            for t in m["main"].arg_types[1:]]
        for x, y in zip(run(m, args), run(again, args)):
            np.testing.assert_array_equal(x, y)


def test_export_of_a_size_no_argument_holds_is_unsupported():
    m = parse_module("""module @m

func @main(%arg0: f32[4]) -> (s32[b]) {
  %0 = iota() {iota_dimension = 0} : s32[b]
  return(%0)
}
""")
    with pytest.raises(UnsupportedError, match="export of symbolic dimension b .no argument of @main holds it"):
        export_module(m)


def test_shape_operand_that_is_no_size_computation_is_unsupported():
    text = BROADCAST_ADD.replace("%4 = stablehlo.concatenate %0, %2, %3",
                                 "%x = stablehlo.abs %2 : tensor<1xi32>\n    %4 = stablehlo.concatenate %0, %x, %3")
    with pytest.raises(UnsupportedError, match="dynamic_broadcast_in_dim with a computed output_dimensions"):
        import_module(text)


@pytest.mark.parametrize("target", ["interpreter", "cpu"])
def test_conformance_runner_checks_against_jax_refinement(target):
    from hlo.tools.conformance_dynamic import compare, run_dynamic
    for text in (BROADCAST_ADD, MIXED):
        m = import_module(text)
        assert run_dynamic(text, m, "main", target) == ("passed", "")
    # the comparison is not vacuous
    assert compare([np.array([1.0, 2.0])], [np.array([1.0, 2.001])]) is not None
    assert compare([np.array([1, 2])], [np.array([1, 3])]) is not None
    assert compare([np.array([np.nan])], [np.array([np.nan])]) is None


def _jax_export(f, *specs):
    jax = pytest.importorskip("jax")
    from jax import export
    return export.export(jax.jit(f))(*specs).mlir_module()


def test_jax_export_modules_load_with_jaxs_symbol_names():
    """jax.export's own form: no dimension arguments, get_dimension_size, a shape_assertion
    that the bounds prove (b >= 1), the body in a private function whose dimension argument
    carries jax.global_constant = "b"."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import export

    import hlo

    def f(x, w):
        return jnp.tanh(x @ w).sum(axis=1), jnp.concatenate([x, x], axis=0)
    b, = export.symbolic_shape("b")
    text = _jax_export(f, jax.ShapeDtypeStruct((b, 8), jnp.float32), jax.ShapeDtypeStruct((8, 16), jnp.float32))
    low = hlo.load_stablehlo(text)
    assert "func @main(%arg0: f32[b,8], %arg1: f32[8,16]) -> (f32[b], f32[2*b,8])" in low.as_text()
    c = low.compile("cpu")
    w = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    for n in (1, 3, 17):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        got, want = c(x, w), f(x, w)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[1], want[1])
    assert c.compiles == 3


def test_undecided_shape_assertion_is_unsupported():
    from hlo.ir.dim_expr import DimExpr
    from hlo.ir.stablehlo.dynamic import _decide
    b = DimExpr.symbol("b")
    assert _decide("GE", b, 1) is True and _decide("LT", b, 1) is False
    assert _decide("GE", b, 2) is None and _decide("EQ", b % 2, 0) is None
    text = BROADCAST_ADD.replace(
        "    %6 = stablehlo.add", "    %g = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>\n"
        "    %two = stablehlo.constant dense<2> : tensor<i32>\n"
        "    %p = stablehlo.compare GE, %g, %two, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
        "    stablehlo.custom_call @shape_assertion(%p, %g) {error_message = \"b >= 2\", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()\n"
        "    %6 = stablehlo.add")
    with pytest.raises(UnsupportedError, match="shape_assertion .a condition on sizes that hlo cannot decide"):
        import_module(text)
