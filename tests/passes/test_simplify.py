"""Simplification passes: IR text in, expected IR text out."""
import numpy as np
import pytest
from pass_testing import assert_ir, filecheck, random_args, rewritten, run_passes

from hlo.ir import parse_module
from hlo.ir.interpreter import run


def test_dce_removes_unused_ops_and_private_functions():
    src = """
    func @main(%x: f32[4]) -> (f32[4]) {
      %a = exponential(%x) : f32[4]
      %b = negate(%x) : f32[4]
      %c = call(%x) {callee = "helper"} : f32[4]
      return(%b)
    }
    func private @helper(%y: f32[4]) -> (f32[4]) {
      %z = abs(%y) : f32[4]
      return(%z)
    }
    func @public_unused(%y: f32[4]) -> (f32[4]) {
      return(%y)
    }
    """
    assert_ir(run_passes(src, ["dce"]), """
    func @main(%x: f32[4]) -> (f32[4]) {
      %b = negate(%x) : f32[4]
      return(%b)
    }
    func @public_unused(%y: f32[4]) -> (f32[4]) {
      return(%y)
    }
    """)


def test_dce_inside_regions():
    src = """
    func @main(%x: f32[4], %z: f32[]) -> (f32[]) {
      %r = reduce(%x, %z) {dimensions = [0]} : f32[] {
        ^body(%a: f32[], %b: f32[]):
          %dead = multiply(%a, %b) : f32[]
          %s = add(%a, %b) : f32[]
          return(%s)
      }
      return(%r)
    }
    """
    filecheck(run_passes(src, ["dce"]), """
    CHECK: reduce
    CHECK-NOT: multiply
    CHECK: add
    """)


def test_cse_merges_equal_ops_but_not_different_constants():
    src = """
    func @main(%x: f32[4]) -> (f32[4], f32[4], f32[4]) {
      %a = exponential(%x) : f32[4]
      %b = exponential(%x) : f32[4]
      %c = add(%a, %b) : f32[4]
      %z1 = constant dense<0.0> : f32[4]
      %z2 = constant dense<-0.0> : f32[4]
      %z3 = constant dense<0.0> : f32[4]
      %d = add(%c, %z1) : f32[4]
      %e = add(%c, %z2) : f32[4]
      %f = add(%c, %z3) : f32[4]
      return(%d, %e, %f)
    }
    """
    assert_ir(run_passes(src, ["cse", "dce"]), """
    func @main(%x: f32[4]) -> (f32[4], f32[4], f32[4]) {
      %a = exponential(%x) : f32[4]
      %c = add(%a, %a) : f32[4]
      %z1 = constant dense<0.0> : f32[4]
      %z2 = constant dense<-0.0> : f32[4]
      %d = add(%c, %z1) : f32[4]
      %e = add(%c, %z2) : f32[4]
      return(%d, %e, %d)
    }
    """)


def test_cse_compares_regions_structurally():
    body = """{
        ^body(%a: f32[], %b: f32[]):
          %s = BODY(%a, %b) : f32[]
          return(%s)
      }"""
    src = f"""
    func @main(%x: f32[4,2], %z: f32[]) -> (f32[4], f32[4], f32[4]) {{
      %r1 = reduce(%x, %z) {{dimensions = [1]}} : f32[4] {body.replace('BODY', 'add')}
      %r2 = reduce(%x, %z) {{dimensions = [1]}} : f32[4] {body.replace('BODY', 'add')}
      %r3 = reduce(%x, %z) {{dimensions = [1]}} : f32[4] {body.replace('BODY', 'maximum')}
      return(%r1, %r2, %r3)
    }}
    """
    out = run_passes(src, ["cse", "dce"])
    filecheck(out, """
    CHECK-COUNT-2: reduce(
    CHECK: return(%0, %0, %4)
    """)


def test_inline_replaces_calls_and_drops_private_functions():
    src = """
    func @main(%x: f32[4]) -> (f32[4]) {
      %a = call(%x) {callee = "f"} : f32[4]
      %b = call(%a) {callee = "f"} : f32[4]
      return(%b)
    }
    func private @f(%y: f32[4]) -> (f32[4]) {
      %z = call(%y) {callee = "g"} : f32[4]
      %w = add(%z, %y) : f32[4]
      return(%w)
    }
    func private @g(%y: f32[4]) -> (f32[4]) {
      %n = negate(%y) : f32[4]
      return(%n)
    }
    """
    assert_ir(run_passes(src, ["inline"]), """
    func @main(%x: f32[4]) -> (f32[4]) {
      %0 = negate(%x) : f32[4]
      %1 = add(%0, %x) : f32[4]
      %2 = negate(%1) : f32[4]
      %3 = add(%2, %1) : f32[4]
      return(%3)
    }
    """)


def test_constant_folding_evaluates_with_interpreter_semantics():
    src = """
    func @main(%x: s32[3]) -> (s32[3]) {
      %a = constant dense<[7, -7, 5]> : s32[3]
      %b = constant dense<[2, 2, 0]> : s32[3]
      %c = divide(%a, %b) : s32[3]
      %d = add(%x, %c) : s32[3]
      return(%d)
    }
    """
    out = run_passes(src, ["constant-folding", "dce"])
    # Integer division truncates toward zero; division by zero gives -1 (StableHLO / XLA).
    assert_ir(out, """
    func @main(%x: s32[3]) -> (s32[3]) {
      %0 = constant dense<[3, -3, -1]> : s32[3]
      %1 = add(%x, %0) : s32[3]
      return(%1)
    }
    """)


def test_constant_folding_size_limit_and_broadcasts():
    src = """
    func @main() -> (f32[64], f32[100]) {
      %a = iota() {iota_dimension = 0} : f32[64]
      %c = exponential(%a) : f32[64]
      %s = constant dense<2.0> : f32[]
      %d = broadcast_in_dim(%s) {broadcast_dimensions = []} : f32[100]
      return(%c, %d)
    }
    """
    out = run_passes(src, ["constant-folding", "dce"], options={"constant_fold_limit": 50})
    filecheck(out, """
    CHECK: iota
    CHECK: exponential
    CHECK: broadcast_in_dim
    """)
    out = run_passes(src, ["constant-folding", "dce"], options={"constant_fold_limit": 80})
    filecheck(out, """
    CHECK-NOT: iota
    CHECK-NOT: exponential
    CHECK: constant dense<[1.0, 2.7182817
    CHECK: broadcast_in_dim
    """)


@pytest.mark.parametrize("expr, expect", [
    ("%r = add(%x, %zero) : f32[4]", "return(%arg0)"),
    ("%r = add(%zero, %x) : f32[4]", "return(%arg0)"),
    ("%r = subtract(%x, %zero) : f32[4]", "return(%arg0)"),
    ("%r = multiply(%x, %one) : f32[4]", "return(%arg0)"),
    ("%r = divide(%x, %one) : f32[4]", "return(%arg0)"),
    ("%n = negate(%x) : f32[4]\n %r = negate(%n) : f32[4]", "return(%arg0)"),
    ("%r = maximum(%x, %x) : f32[4]", "return(%arg0)"),
    ("%r = minimum(%x, %x) : f32[4]", "return(%arg0)"),
    ("%p = constant dense<true> : pred[]\n %pb = broadcast_in_dim(%p) {broadcast_dimensions = []} : pred[4]\n"
     " %r = select(%pb, %x, %y) : f32[4]", "return(%arg0)"),
    ("%p = compare(%x, %y) {comparison_direction = \"LT\"} : pred[4]\n %r = select(%p, %y, %y) : f32[4]",
     "return(%arg1)"),
    ("%c = convert(%x) : f64[4]\n %r = convert(%c) : f32[4]", "return(%arg0)"),
    ("%c = convert(%x) : f32[4]\n %r = convert(%c) : f32[4]", "return(%arg0)"),
])
def test_algebraic_identities(expr, expect):
    src = f"""
    func @main(%x: f32[4], %y: f32[4]) -> (f32[4]) {{
      %zs = constant dense<0.0> : f32[]
      %zero = broadcast_in_dim(%zs) {{broadcast_dimensions = []}} : f32[4]
      %one = constant dense<1.0> : f32[4]
      {expr}
      return(%r)
    }}
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    filecheck(out, f"CHECK: {expect}")


def test_algebraic_keeps_lossy_conversions_and_float_times_zero():
    src = """
    func @main(%x: f32[4], %i: s32[4]) -> (f32[4], f32[4], s32[4]) {
      %h = convert(%x) : f16[4]
      %a = convert(%h) : f32[4]
      %z = constant dense<0.0> : f32[4]
      %b = multiply(%x, %z) : f32[4]
      %zi = constant dense<0> : s32[4]
      %c = multiply(%i, %zi) : s32[4]
      return(%a, %b, %c)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    filecheck(out, """
    CHECK: convert(%arg0) : f16[4]
    CHECK: convert
    CHECK: multiply(%arg0
    CHECK-NOT: multiply(%arg1
    CHECK: return
    """)


def test_division_by_power_of_two_becomes_exact_multiply():
    src = """
    func @main(%x: f32[4]) -> (f32[4], f32[4]) {
      %c = constant dense<8.0> : f32[4]
      %d = constant dense<3.0> : f32[4]
      %a = divide(%x, %c) : f32[4]
      %b = divide(%x, %d) : f32[4]
      return(%a, %b)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    filecheck(out, """
    CHECK: constant dense<0.125>
    CHECK: multiply(%arg0
    CHECK: divide(%arg0
    """)


def test_shape_chains_collapse():
    src = """
    func @main(%x: f32[2,3,4], %v: f32[3]) -> (f32[4,2,3], f32[6,4], f32[5,2,3]) {
      %t1 = transpose(%x) {permutation = [1, 0, 2]} : f32[3,2,4]
      %t2 = transpose(%t1) {permutation = [2, 1, 0]} : f32[4,2,3]
      %r1 = reshape(%x) : f32[24]
      %r2 = reshape(%r1) : f32[6,4]
      %b1 = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[2,3]
      %b2 = broadcast_in_dim(%b1) {broadcast_dimensions = [1, 2]} : f32[5,2,3]
      return(%t2, %r2, %b2)
    }
    """
    assert_ir(run_passes(src, ["algebraic-simplifier", "dce"]), """
    func @main(%x: f32[2,3,4], %v: f32[3]) -> (f32[4,2,3], f32[6,4], f32[5,2,3]) {
      %0 = transpose(%x) {permutation = [2, 0, 1]} : f32[4,2,3]
      %1 = reshape(%x) : f32[6,4]
      %2 = broadcast_in_dim(%v) {broadcast_dimensions = [2]} : f32[5,2,3]
      return(%0, %1, %2)
    }
    """)


def test_keepdims_broadcast_through_unit_reshape():
    src = """
    func @main(%x: f32[4], %y: f32[4,8]) -> (f32[4,8]) {
      %r = reshape(%x) : f32[4,1]
      %b = broadcast_in_dim(%r) {broadcast_dimensions = [0, 1]} : f32[4,8]
      %s = add(%y, %b) : f32[4,8]
      return(%s)
    }
    """
    filecheck(run_passes(src, ["algebraic-simplifier", "dce"]), """
    CHECK-NOT: reshape
    CHECK: broadcast_in_dim(%arg0) {broadcast_dimensions = [0]} : f32[4,8]
    """)


def test_slice_of_concatenate_and_slice_of_slice():
    src = """
    func @main(%a: f32[4,3], %b: f32[4,5]) -> (f32[4,2], f32[4,5], f32[2,2]) {
      %c = concatenate(%a, %b) {dimension = 1} : f32[4,8]
      %s1 = slice(%c) {start_indices = [0, 4], limit_indices = [4, 6]} : f32[4,2]
      %s2 = slice(%c) {start_indices = [0, 3], limit_indices = [4, 8]} : f32[4,5]
      %s3 = slice(%a) {start_indices = [0, 0], limit_indices = [4, 3], strides = [2, 1]} : f32[2,3]
      %s4 = slice(%s3) {start_indices = [0, 1], limit_indices = [2, 3]} : f32[2,2]
      return(%s1, %s2, %s4)
    }
    """
    assert_ir(run_passes(src, ["algebraic-simplifier", "dce"]), """
    func @main(%a: f32[4,3], %b: f32[4,5]) -> (f32[4,2], f32[4,5], f32[2,2]) {
      %0 = slice(%b) {limit_indices = [4, 3], start_indices = [0, 1]} : f32[4,2]
      %1 = slice(%a) {limit_indices = [3, 3], start_indices = [0, 1], strides = [2, 1]} : f32[2,2]
      return(%0, %b, %1)
    }
    """)


def test_reduce_of_broadcast_reduces_the_small_operand():
    src = """
    func @main(%v: f32[8]) -> (f32[8], f32[8]) {
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[4,8]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%b, %z) {dimensions = [0]} : f32[8] {
        ^body(%p: f32[], %q: f32[]):
          %a = add(%p, %q) : f32[]
          return(%a)
      }
      %ninf = constant dense<-inf> : f32[]
      %m = reduce(%b, %ninf) {dimensions = [0]} : f32[8] {
        ^body(%p: f32[], %q: f32[]):
          %a = maximum(%p, %q) : f32[]
          return(%a)
      }
      return(%s, %m)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    assert_ir(out, """
    func @main(%v: f32[8]) -> (f32[8], f32[8]) {
      %0 = constant dense<4.0> : f32[8]
      %1 = multiply(%v, %0) : f32[8]
      return(%1, %v)
    }
    """)
    m0, m1 = parse_module(src), parse_module(out)
    args = random_args(m0)
    for a, b in zip(run(m0, args), run(m1, args)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_reduce_over_an_empty_broadcast_dimension_stays_its_init():
    src = """
    func @main(%v: f32[3]) -> (f32[3]) {
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[0,3]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%b, %z) {dimensions = [0]} : f32[3] {
        ^body(%p: f32[], %q: f32[]):
          %a = add(%p, %q) : f32[]
          return(%a)
      }
      return(%s)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    args = [np.array([np.inf, 1.0, np.nan], np.float32)]
    np.testing.assert_array_equal(run(parse_module(out), args)[0], np.zeros(3, np.float32))


def test_integer_and_reduction_starts_from_all_bits_set():
    # The identity of an integer `and` is -1 (all bits), not 1: an init of 1 keeps the lowest
    # bit only, so neither the unit-dimension nor the broadcast rewrite may drop it.
    src = """
    func @main(%x: s32[4,1], %v: s32[4]) -> (s32[4], s32[4], s32[4]) {
      %one = constant dense<1> : s32[]
      %r = reduce(%x, %one) {dimensions = [1]} : s32[4] {
        ^body(%p: s32[], %q: s32[]):
          %a = and(%p, %q) : s32[]
          return(%a)
      }
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : s32[3,4]
      %s = reduce(%b, %one) {dimensions = [0]} : s32[4] {
        ^body(%p: s32[], %q: s32[]):
          %a = and(%p, %q) : s32[]
          return(%a)
      }
      %all = constant dense<-1> : s32[]
      %t = reduce(%x, %all) {dimensions = [1]} : s32[4] {
        ^body(%p: s32[], %q: s32[]):
          %a = and(%p, %q) : s32[]
          return(%a)
      }
      return(%r, %s, %t)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    filecheck(out, """
    CHECK-COUNT-2: reduce(
    """)
    args = [np.array([[6], [7], [2], [3]], np.int32), np.array([6, 7, 2, 3], np.int32)]
    want = [np.array([0, 1, 0, 1], np.int32)] * 2 + [args[0][:, 0]]
    for got, w in zip(run(parse_module(out), args), want):
        np.testing.assert_array_equal(got, w)


def test_transpose_of_dot_swaps_the_operands():
    src = """
    func @main(%a: f32[5,3], %b: f32[5,4]) -> (f32[4,3]) {
      %d = dot_general(%a, %b) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[3,4]
      %t = transpose(%d) {permutation = [1, 0]} : f32[4,3]
      return(%t)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    assert_ir(out, """
    func @main(%a: f32[5,3], %b: f32[5,4]) -> (f32[4,3]) {
      %0 = dot_general(%b, %a) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4,3]
      return(%0)
    }
    """)


def test_canonicalize_puts_constants_second_and_flips_compares():
    src = """
    func @main(%x: f32[4]) -> (f32[4], pred[4], f32[4]) {
      %c = constant dense<2.0> : f32[4]
      %a = multiply(%c, %x) : f32[4]
      %p = compare(%c, %x) {comparison_direction = "LT"} : pred[4]
      %n = not(%p) : pred[4]
      %s = select(%n, %x, %a) : f32[4]
      return(%a, %p, %s)
    }
    """
    assert_ir(run_passes(src, ["canonicalize", "dce"]), """
    func @main(%x: f32[4]) -> (f32[4], pred[4], f32[4]) {
      %c = constant dense<2.0> : f32[4]
      %a = multiply(%x, %c) : f32[4]
      %p = compare(%x, %c) {comparison_direction = "GT"} : pred[4]
      %s = select(%p, %a, %x) : f32[4]
      return(%a, %p, %s)
    }
    """)


def test_canonicalize_drops_default_attributes_and_spells_broadcast_as_reshape():
    src = """
    func @main(%x: f32[4,6], %v: f32[6]) -> (f32[4,3], f32[1,6]) {
      %s = slice(%x) {start_indices = [0, 0], limit_indices = [4, 3], strides = [1, 1]} : f32[4,3]
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[1,6]
      return(%s, %b)
    }
    """
    assert_ir(run_passes(src, ["canonicalize", "dce"]), """
    func @main(%x: f32[4,6], %v: f32[6]) -> (f32[4,3], f32[1,6]) {
      %s = slice(%x) {start_indices = [0, 0], limit_indices = [4, 3]} : f32[4,3]
      %b = reshape(%v) : f32[1,6]
      return(%s, %b)
    }
    """)


def test_outer_product_dot_becomes_a_multiply_of_broadcasts():
    # vmap(grad) of x @ w: per-example weight gradients are batched outer products (no contraction)
    src = """
    func @main(%x: f32[8,5], %d: f32[8,3]) -> (f32[8,5,3]) {
      %g = dot_general(%x, %d) {lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]} : f32[8,5,3]
      return(%g)
    }
    """
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    assert_ir(out, """
    func @main(%x: f32[8,5], %d: f32[8,3]) -> (f32[8,5,3]) {
      %0 = broadcast_in_dim(%x) {broadcast_dimensions = [0, 1]} : f32[8,5,3]
      %1 = broadcast_in_dim(%d) {broadcast_dimensions = [0, 2]} : f32[8,5,3]
      %2 = multiply(%0, %1) : f32[8,5,3]
      return(%2)
    }
    """)


@pytest.mark.parametrize("case", [
    # (lhs type, rhs type, attrs, result type)
    ("f32[5,1]", "f32[1,3]", "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", "f32[5,3]"),
    ("f32[1,5]", "f32[3,1]", "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [1]", "f32[5,3]"),
    ("f32[4,1,2,5]", "f32[2,3,4,1]", "lhs_batching_dimensions = [0, 2], rhs_batching_dimensions = [2, 0], "
     "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [3]", "f32[4,2,5,3]"),
    ("bf16[6]", "bf16[4]", "", "f32[6,4]"),
    ("s8[3,1]", "s8[1,2]", "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", "s32[3,2]"),
])
def test_outer_product_dot_rewrite_matches_the_dot(case):
    lt, rt, attrs, res = case
    src = f"""
    func @main(%a: {lt}, %b: {rt}) -> ({res}) {{
      %d = dot_general(%a, %b) {{{attrs}}} : {res}
      return(%d)
    }}
    """.replace("{}", "")
    out = run_passes(src, ["algebraic-simplifier", "dce"])
    assert "dot_general" not in out and "multiply" in out
    m0, m1 = parse_module(src), parse_module(out)
    args = random_args(m0, seed=3)
    want, got = run(m0, args), run(m1, args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_dot_with_a_real_contraction_stays_a_dot():
    src = """
    func @main(%a: f32[5,2], %b: f32[2,3]) -> (f32[5,3]) {
      %d = dot_general(%a, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[5,3]
      return(%d)
    }
    """
    assert "dot_general" in run_passes(src, ["algebraic-simplifier", "dce"])


SPREAD = """
func @main(%g: f32[2,3,4,5]) -> (f32[2,{h},{w},5]) {{
  %z = constant dense<0.0> : f32[]
  %p = pad(%g, %z) {{edge_padding_high = [0, {e}, {e}, 0], edge_padding_low = [0, {e}, {e}, 0], interior_padding = [0, {i}, {i}, 0]}} : f32[2,{ph},{pw},5]
  %r = reduce_window(%p, %z) {{window_dimensions = [1, {k}, {k}, 1]}} : f32[2,{h},{w},5] {{
    ^body(%a: f32[], %b: f32[]):
      %s = add(%a, %b) : f32[]
      return(%s)
  }}
  return(%r)
}}
"""


def test_a_window_sum_of_a_spread_that_meets_one_element_a_window_is_a_broadcast():
    """Average pooling's gradient (window = stride = 2) as jax and hlo.grad write it."""
    src = SPREAD.format(e=1, i=1, k=2, ph=7, pw=9, h=6, w=8)
    out, _ = rewritten(src, ["algebraic-simplifier", "dce"], "cpu")
    assert_ir(out, """
    func @main(%g: f32[2,3,4,5]) -> (f32[2,6,8,5]) {
      %b = broadcast_in_dim(%g) {broadcast_dimensions = [0, 1, 3, 5]} : f32[2,3,2,4,2,5]
      %r = reshape(%b) : f32[2,6,8,5]
      return(%r)
    }
    """)


def test_a_window_sum_of_a_spread_whose_windows_meet_two_elements_stays():
    src = SPREAD.format(e=2, i=1, k=3, ph=9, pw=11, h=7, w=9)   # windows of 3 over a spread of 2
    out, _ = rewritten(src, ["algebraic-simplifier", "dce"], "cpu")
    assert "reduce_window" in out and "pad" in out
