"""Layout assignment: layouts in the text form, free transposes and reshapes, dot operands."""
from pass_testing import assert_ir, filecheck, run_passes

from hlo.ir import parse_module
from hlo.passes.layout import is_bitcast


def test_parameters_and_results_are_row_major_in_the_text():
    src = """
    func @main(%x: f32[4,8], %v: f32[8]) -> (f32[4,8]) {
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[4,8]
      %a = add(%x, %b) : f32[4,8]
      return(%a)
    }
    """
    assert_ir(run_passes(src, ["layout-assignment"]), """
    func @main(%x: f32[4,8]{1,0}, %v: f32[8]{0}) -> (f32[4,8]{1,0}) {
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[4,8]{1,0}
      %a = add(%x, %b) : f32[4,8]{1,0}
      return(%a)
    }
    """)


def test_producer_writes_the_layout_that_makes_a_transpose_free():
    src = """
    func @main(%x: f32[4,8], %y: f32[4,8]) -> (f32[8,4]) {
      %a = add(%x, %y) : f32[4,8]
      %t = transpose(%a) {permutation = [1, 0]} : f32[8,4]
      return(%t)
    }
    """
    out = run_passes(src, ["layout-assignment"])
    assert_ir(out, """
    func @main(%x: f32[4,8]{1,0}, %y: f32[4,8]{1,0}) -> (f32[8,4]{1,0}) {
      %a = add(%x, %y) : f32[4,8]{0,1}
      %t = transpose(%a) {permutation = [1, 0]} : f32[8,4]{1,0}
      return(%t)
    }
    """)
    m = parse_module(out)
    t = m.main.ops[1]
    assert t.name == "transpose" and is_bitcast(t)


def test_transpose_of_a_parameter_into_a_dot_is_a_layout_not_a_copy():
    # x @ w.T: the dot reads w's bytes as a column-major [8,16] operand.
    src = """
    func @main(%x: f32[4,8], %w: f32[16,8]) -> (f32[4,16]) {
      %t = transpose(%w) {permutation = [1, 0]} : f32[8,16]
      %d = dot_general(%x, %t) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,16]
      return(%d)
    }
    """
    out = run_passes(src, ["layout-assignment"])
    filecheck(out, """
    CHECK: transpose(%arg1) {permutation = [1, 0]} : f32[8,16]{0,1}
    CHECK: dot_general
    """)
    assert is_bitcast(parse_module(out).main.ops[0])


def test_dot_batch_dimensions_must_stay_major():
    # The transposed layout would put a batch dimension inside a matrix: the dot refuses it.
    src = """
    func @main(%x: f32[2,3,4], %w: f32[3,2,4]) -> (f32[2,3,3]) {
      %t = transpose(%w) {permutation = [1, 0, 2]} : f32[2,3,4]
      %d = dot_general(%x, %t) {lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]} : f32[2,3,3]
      return(%d)
    }
    """
    out = run_passes(src, ["layout-assignment"])
    filecheck(out, "CHECK: transpose(%arg1) {permutation = [1, 0, 2]} : f32[2,3,4]{2,1,0}")
    assert not is_bitcast(parse_module(out).main.ops[0])


def test_row_major_reshapes_are_bitcasts_and_permuted_ones_are_not():
    m = parse_module("""
    func @main(%x: f32[4,8]) -> (f32[32], f32[8,4]) {
      %r = reshape(%x) : f32[32]
      %t = transpose(%x) {permutation = [1, 0]} : f32[8,4]
      return(%r, %t)
    }
    """)
    r, t = m.main.ops
    assert is_bitcast(r)
    assert not is_bitcast(t)  # both row-major: the transpose moves data
    t.results[0].type = t.results[0].type.with_layout((0, 1))
    assert is_bitcast(t)
