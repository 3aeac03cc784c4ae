"""Fusion passes: IR text in, checks on the fused IR and the decision log out; every result
is also run on the interpreter against the unfused program."""
import numpy as np
import pytest
from pass_testing import assert_ir, filecheck, random_args, run_passes

from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes.fusion_kinds import NotFusible, analyze, inplace_pairs

FUSE = ["layout-assignment", "fusion", "multi-output-fusion", "horizontal-fusion", "dce"]

ADD_BODY = """{
        ^body(%body_lhs: f32[], %body_rhs: f32[]):
          %body_out = add(%body_lhs, %body_rhs) : f32[]
          return(%body_out)
      }"""
MAX_BODY = ADD_BODY.replace("add(", "maximum(")


def fused(src, passes=FUSE, target="cpu", options=None):
    log = []
    out = run_passes(src, passes, target, options, log)
    m0, m1 = parse_module(src), parse_module(out)
    args = random_args(m0)
    for a, b in zip(run(m0, args), run(m1, args)):
        np.testing.assert_array_equal(a, b)
    return out, "\n".join(log)


def kernels(text):
    m = parse_module(text)
    return [op for op in m.main.ops if op.name not in ("constant",)]


def test_loop_fusion_of_elementwise_and_movement_chain():
    src = """
    func @main(%x: f32[4,8], %v: f32[8]) -> (f32[8,4]) {
      %b = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[4,8]
      %a = add(%x, %b) : f32[4,8]
      %e = tanh(%a) : f32[4,8]
      %c = constant dense<2.0> : f32[]
      %cb = broadcast_in_dim(%c) {broadcast_dimensions = []} : f32[4,8]
      %m = multiply(%e, %cb) : f32[4,8]
      %t = transpose(%m) {permutation = [1, 0]} : f32[8,4]
      %s = negate(%t) : f32[8,4]
      return(%s)
    }
    """
    out, log = fused(src)
    assert len(kernels(out)) == 1
    filecheck(out, """
    CHECK: fusion(%arg1, %arg0) {kind = "loop"
    CHECK: broadcast_in_dim
    CHECK: tanh
    CHECK: transpose
    CHECK: negate
    """)


def test_softmax_is_one_row_kernel():
    src = f"""
    func @main(%x: f32[4,8]) -> (f32[4,8]) {{
      %ninf = constant dense<-inf> : f32[]
      %m = reduce(%x, %ninf) {{dimensions = [1]}} : f32[4] {MAX_BODY}
      %mb = broadcast_in_dim(%m) {{broadcast_dimensions = [0]}} : f32[4,8]
      %d = subtract(%x, %mb) : f32[4,8]
      %e = exponential(%d) : f32[4,8]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%e, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      %sb = broadcast_in_dim(%s) {{broadcast_dimensions = [0]}} : f32[4,8]
      %r = divide(%e, %sb) : f32[4,8]
      return(%r)
    }}
    """
    out, log = fused(src)
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "input"
    filecheck(out, """
    CHECK: kind = "input"
    CHECK: reduce
    CHECK: exponential
    CHECK: reduce
    CHECK: divide
    """)
    assert "fused %7 exponential into input_fusion.0" in log, log


def test_input_fusion_of_producer_into_reduction():
    src = f"""
    func @main(%x: f32[4,8]) -> (f32[4]) {{
      %sq = multiply(%x, %x) : f32[4,8]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%sq, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      return(%s)
    }}
    """
    out, log = fused(src)
    assert len(kernels(out)) == 1
    filecheck(out, """
    CHECK: fusion(%arg0) {kind = "input"
    CHECK: multiply
    CHECK: reduce
    """)


def test_output_fusion_of_dot_with_bias_activation_and_residual():
    src = """
    func @main(%x: f32[4,8], %w: f32[8,8], %b: f32[8]) -> (f32[4,8]) {
      %d = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,8]
      %bb = broadcast_in_dim(%b) {broadcast_dimensions = [1]} : f32[4,8]
      %a = add(%d, %bb) : f32[4,8]
      %z = constant dense<0.0> : f32[4,8]
      %r = maximum(%a, %z) : f32[4,8]
      %o = add(%r, %x) : f32[4,8]
      return(%o)
    }
    """
    out, log = fused(src)
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "output"
    filecheck(out, """
    CHECK: kind = "output"
    CHECK: dot_general
    CHECK: add
    CHECK: maximum
    CHECK: add
    """)


def test_dot_never_duplicated_and_reason_logged():
    src = """
    func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8], f32[4,8]) {
      %d = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,8]
      %a = tanh(%d) : f32[4,8]
      %b = negate(%d) : f32[4,8]
      return(%a, %b)
    }
    """
    out, log = fused(src, ["layout-assignment", "fusion"])
    assert "a dot is never computed twice" in log
    filecheck(out, "CHECK-COUNT-1: dot_general")
    # The multi-output pass then puts the dot with one consumer and exports its value.
    out, log = fused(src, ["layout-assignment", "fusion", "multi-output-fusion", "dce"])
    filecheck(out, "CHECK-COUNT-1: dot_general")
    assert "merged" in log


def test_expensive_producer_not_duplicated_past_limit():
    src = """
    func @main(%x: f32[4,8]) -> (f32[4,8], f32[8,4]) {
      %e = exponential(%x) : f32[4,8]
      %a = negate(%e) : f32[4,8]
      %t = transpose(%e) {permutation = [1, 0]} : f32[8,4]
      %b = abs(%t) : f32[8,4]
      return(%a, %b)
    }
    """
    out, log = fused(src, ["fusion"])
    filecheck(out, "CHECK-COUNT-1: exponential")
    assert "copying it would repeat 16 units of work per element (limit 8)" in log
    # With a higher limit the exponential is copied into both consumers.
    out, log = fused(src, ["fusion", "dce"], options={"duplication_limit": 20})
    filecheck(out, "CHECK-COUNT-2: exponential")
    assert "copied into" in log


def test_no_fusion_that_increases_bytes_moved():
    # %s reads two big inputs and is read by two kernels: copying it into both would read
    # 2 x 2 inputs instead of one result each.
    src = f"""
    func @main(%x: f32[64,64], %y: f32[64,64]) -> (f32[64], f32[64]) {{
      %s = add(%x, %y) : f32[64,64]
      %z = constant dense<0.0> : f32[]
      %r1 = reduce(%s, %z) {{dimensions = [1]}} : f32[64] {ADD_BODY}
      %t = transpose(%s) {{permutation = [1, 0]}} : f32[64,64]
      %r2 = reduce(%t, %z) {{dimensions = [1]}} : f32[64] {ADD_BODY}
      return(%r1, %r2)
    }}
    """
    out, log = fused(src, ["fusion"])
    assert "would increase bytes moved" in log


def test_expensive_producer_not_fused_into_broadcasting_consumer():
    src = """
    func @main(%v: f32[8], %x: f32[64,8]) -> (f32[64,8]) {
      %e = exponential(%v) : f32[8]
      %b = broadcast_in_dim(%e) {broadcast_dimensions = [1]} : f32[64,8]
      %m = multiply(%x, %b) : f32[64,8]
      return(%m)
    }
    """
    out, log = fused(src, ["fusion"])
    assert "reads each element of the producer many times" in log
    assert len(kernels(out)) == 2


def test_dot_refuses_expensive_operand_producer_with_reason():
    src = """
    func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8]) {
      %e = exponential(%x) : f32[4,8]
      %d = dot_general(%e, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,8]
      return(%d)
    }
    """
    out, log = fused(src, ["fusion"])
    assert ("not fused: %0 exponential -> %1 dot_general: the consumer reads each element of the "
            "producer many times (broadcast or dot operand)") in log
    assert len(kernels(out)) == 2
    # A cheap producer reading more bytes than the operand it makes stays out of the dot too.
    src2 = src.replace("%e = exponential(%x) : f32[4,8]", "%e = add(%x, %y) : f32[4,8]") \
              .replace("(%x: f32[4,8], %w: f32[8,8])", "(%x: f32[4,8], %y: f32[4,8], %w: f32[8,8])")
    out, log = fused(src2, ["fusion"])
    assert ("not fused: %0 add -> %1 dot_general: the consumer is a dot whose kernel cannot take "
            "this producer (its operand would read 256 bytes of the producer's inputs instead of "
            "128 bytes of its result)") in log


def test_shared_producer_is_not_copied_into_dot_operands():
    """relu(h) read by two products (the train step's forward and dW2) stays one kernel: each
    dot's kernel would write a fused operand to a copy first, one pass per consumer. A shared
    transpose, which the dots read in place, is still copied into both."""
    src = """
    func @main(%h: f32[8,16], %w: f32[16,4], %g: f32[8,4]) -> (f32[8,4], f32[16,4]) {
      %z = constant dense<0.0> : f32[]
      %zb = broadcast_in_dim(%z) {broadcast_dimensions = []} : f32[8,16]
      %r = maximum(%h, %zb) : f32[8,16]
      %y = dot_general(%r, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[8,4]
      %dw = dot_general(%r, %g) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[16,4]
      return(%y, %dw)
    }
    """
    out, log = fused(src, ["fusion"])
    assert ("the producer has other consumers and would be computed into a dot's operand, "
            "which the dot's kernel writes to a copy first") in log
    assert out.count("maximum(") == 1 and len(kernels(out)) == 3
    moved = src.replace("%r = maximum(%h, %zb) : f32[8,16]", "%r = transpose(%ht) {permutation = [1, 0]} : f32[8,16]") \
               .replace("%h: f32[8,16]", "%ht: f32[16,8]")
    out, log = fused(moved, ["fusion", "dce"])
    assert "copied into" in log and len(kernels(out)) == 2


def test_cheap_transpose_goes_into_dot_operand():
    src = """
    func @main(%x: f32[8,4], %w: f32[8,8]) -> (f32[4,8]) {
      %s = slice(%x) {start_indices = [0, 0], limit_indices = [8, 4]} : f32[8,4]
      %c = convert(%s) : f64[8,4]
      %t = transpose(%c) {permutation = [1, 0]} : f64[4,8]
      %wc = convert(%w) : f64[8,8]
      %d = dot_general(%t, %wc) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f64[4,8]
      %o = convert(%d) : f32[4,8]
      return(%o)
    }
    """
    out, log = fused(src, ["fusion"])
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "output"


def test_layer_norm_goes_into_the_dot_operand_on_cpu_not_on_cuda():
    src = f"""
    func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8]) {{
      %z = constant dense<0.0> : f32[]
      %s = reduce(%x, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      %n = constant dense<0.125> : f32[4]
      %mu = multiply(%s, %n) : f32[4]
      %mb = broadcast_in_dim(%mu) {{broadcast_dimensions = [0]}} : f32[4,8]
      %c = subtract(%x, %mb) : f32[4,8]
      %sq = multiply(%c, %c) : f32[4,8]
      %v = reduce(%sq, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      %vn = multiply(%v, %n) : f32[4]
      %r = rsqrt(%vn) : f32[4]
      %rb = broadcast_in_dim(%r) {{broadcast_dimensions = [0]}} : f32[4,8]
      %h = multiply(%c, %rb) : f32[4,8]
      %d = dot_general(%h, %w) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[4,8]
      return(%d)
    }}
    """
    out, log = fused(src, target="cpu")
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "output"
    out, log = fused(src, target="cuda")
    ks = kernels(out)
    assert [k.attrs.get("kind", k.name) for k in ks] == ["input", "dot_general"]
    assert "the target takes no row-wise prologue" in log


def test_sibling_reductions_share_one_pass():
    # Mean and mean of squares of the same input: two reductions, one kernel.
    src = f"""
    func @main(%x: f32[4,8]) -> (f32[4], f32[4]) {{
      %z = constant dense<0.0> : f32[]
      %s = reduce(%x, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      %sq = multiply(%x, %x) : f32[4,8]
      %q = reduce(%sq, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
      return(%s, %q)
    }}
    """
    out, log = fused(src, ["fusion", "multi-output-fusion"])
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "input" and len(ks[0].results) == 2
    assert "siblings reading the same f32[4,8]" in log


def test_horizontal_fusion_of_independent_updates():
    src = """
    func @main(%w1: f32[8,4], %g1: f32[8,4], %w2: f32[4], %g2: f32[4], %w3: f32[3,3], %g3: f32[3,3]) -> (f32[8,4], f32[4], f32[3,3]) {
      %lr1 = constant dense<0.1> : f32[8,4]
      %u1 = multiply(%g1, %lr1) : f32[8,4]
      %n1 = subtract(%w1, %u1) : f32[8,4]
      %lr2 = constant dense<0.1> : f32[4]
      %u2 = multiply(%g2, %lr2) : f32[4]
      %n2 = subtract(%w2, %u2) : f32[4]
      %lr3 = constant dense<0.1> : f32[3,3]
      %u3 = multiply(%g3, %lr3) : f32[3,3]
      %n3 = subtract(%w3, %u3) : f32[3,3]
      return(%n1, %n2, %n3)
    }
    """
    out, log = fused(src)
    ks = kernels(out)
    assert len(ks) == 1 and ks[0].attrs["kind"] == "multi"
    filecheck(out, """
    CHECK: kind = "multi"
    CHECK-COUNT-3: kind = "loop"
    """)
    assert "merged 3 independent kernels into one launch" in log
    # Disabled, they stay three kernels.
    out, log = fused(src, ["layout-assignment", "fusion", "dce"])
    assert len(kernels(out)) == 3


def test_horizontal_fusion_keeps_dependent_kernels_apart():
    src = """
    func @main(%x: f32[4,8], %y: f32[3]) -> (f32[4,8], f32[3]) {
      %a = fusion(%x) {kind = "loop", name = "first"} : f32[4,8] {
        ^fused(%p: f32[4,8]):
          %e = exponential(%p) : f32[4,8]
          return(%e)
      }
      %b = fusion(%a) {kind = "loop", name = "second"} : f32[4,8] {
        ^fused(%p: f32[4,8]):
          %n = negate(%p) : f32[4,8]
          return(%n)
      }
      %c = fusion(%y) {kind = "loop", name = "third"} : f32[3] {
        ^fused(%p: f32[3]):
          %m = abs(%p) : f32[3]
          return(%m)
      }
      return(%b, %c)
    }
    """
    out, log = fused(src, ["horizontal-fusion"])
    ks = kernels(out)
    assert [k.attrs["kind"] for k in ks] == ["multi", "loop"]
    assert [p.attrs["name"] for p in ks[0].regions[0].ops] == ["first", "third"]
    assert ks[1].attrs["name"] == "second" and ks[1].operands[0].op is ks[0]


def test_singles_are_wrapped_and_bitcasts_stay_free():
    src = """
    func @main(%x: f32[4,8]) -> (f32[2,16], f32[4,8]) {
      %r = reshape(%x) : f32[2,16]
      %e = exponential(%x) : f32[4,8]
      return(%r, %e)
    }
    """
    out, log = fused(src)
    assert_ir(out, """
    func @main(%x: f32[4,8]{1,0}) -> (f32[2,16]{1,0}, f32[4,8]{1,0}) {
      %r = reshape(%x) : f32[2,16]{1,0}
      %f = fusion(%x) {kind = "loop", name = "loop_fusion.0"} : f32[4,8]{1,0} {
        ^fused(%p: f32[4,8]):
          %e = exponential(%p) : f32[4,8]
          return(%e)
      }
      return(%r, %f)
    }
    """)


@pytest.mark.parametrize("results, body, reason", [
    ("f32[4,8], f32[8,4]", """%a = exponential(%p) : f32[4,8]
        %b = transpose(%a) {permutation = [1, 0]} : f32[8,4]
        return(%a, %b)""", "loop fusion outputs of different shapes"),
    ("f32[4], f32[8]", """%z = constant dense<0.0> : f32[]
        %s = reduce(%p, %z) {dimensions = [1]} : f32[4] %ADD
        %t = reduce(%p, %z) {dimensions = [0]} : f32[8] %ADD
        return(%s, %t)""", "reductions of different shapes or dimensions"),
    ("f32[8,4]", """%z = constant dense<0.0> : f32[]
        %s = reduce(%p, %z) {dimensions = [1]} : f32[4] %ADD
        %b = broadcast_in_dim(%s) {broadcast_dimensions = [1]} : f32[8,4]
        return(%b)""", "broadcast other than back along its rows"),
    ("f32[8,8]", """%d = dot_general(%p, %p) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[8,8]
        %e = dot_general(%d, %d) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[8,8]
        return(%e)""", "more than one dot"),
    ("f32[8,8]", """%d = dot_general(%p, %p) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[8,8]
        %t = transpose(%d) {permutation = [1, 0]} : f32[8,8]
        return(%t)""", "not elementwise at the dot's shape"),
    ("f32[4,8]", """%s = sort(%p) {dimension = 1} : f32[4,8] {
          ^comparator(%a: f32[], %b: f32[]):
            %c = compare(%a, %b) {comparison_direction = "LT"} : pred[]
            return(%c)
        }
        return(%s)""", "'sort' cannot be fused"),
    ("f32[4,8]", """return(%p)""", "passed through unchanged"),
])
def test_fusion_kind_validator_reasons(results, body, reason):
    text = f"func @main(%p: f32[4,8]) -> ({results}) {{\n{body.replace('%ADD', ADD_BODY)}\n}}"
    with pytest.raises(NotFusible, match=reason):
        analyze(parse_module(text).main.body)


def test_inplace_pairs_follow_the_index_rule():
    text = f"""
    func @main(%x: f32[4,8], %y: f32[4,8]) -> (f32[4,8], f32[8,4]) {{
      %a = fusion(%x, %y) {{kind = "loop"}} : f32[4,8] {{
        ^fused(%p: f32[4,8], %q: f32[4,8]):
          %t = transpose(%q) {{permutation = [1, 0]}} : f32[8,4]
          %u = transpose(%t) {{permutation = [1, 0]}} : f32[4,8]
          %s = add(%p, %u) : f32[4,8]
          return(%s)
      }}
      %b = fusion(%x) {{kind = "input"}} : f32[4,8] {{
        ^fused(%p: f32[4,8]):
          %z = constant dense<0.0> : f32[]
          %r = reduce(%p, %z) {{dimensions = [1]}} : f32[4] {ADD_BODY}
          %rb = broadcast_in_dim(%r) {{broadcast_dimensions = [0]}} : f32[4,8]
          %d = divide(%p, %rb) : f32[4,8]
          return(%d)
      }}
      %c = transpose(%b) {{permutation = [1, 0]}} : f32[8,4]
      return(%a, %c)
    }}
    """
    m = parse_module(text)
    a, b = m.main.ops[0], m.main.ops[1]
    assert inplace_pairs(a) == [(0, 0)]  # %p at the same index; %q read transposed
    assert inplace_pairs(b) == [(0, 0)]  # a row's reduction finishes before the row is written


def test_loop_bodies_and_branches_are_fused_like_main_and_reduce_bodies_are_not():
    """A loop's body (and its condition) and a conditional's branches run their ops once a step
    each: they are fused as @main is; a reduction's scalar body inside them is left alone."""
    src = """
    func @main(%x: f32[4,8], %p: pred[]) -> (s32[], f32[4,8], f32[4]) {
      %zero = constant dense<0> : s32[]
      %i, %h = while(%zero, %x) : s32[], f32[4,8] {
        ^cond(%c: s32[], %ch: f32[4,8]):
          %n = constant dense<3> : s32[]
          %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
          return(%lt)
        ^body(%k: s32[], %y: f32[4,8]):
          %one = constant dense<1> : s32[]
          %k1 = add(%k, %one) : s32[]
          %t = tanh(%y) : f32[4,8]
          %two = constant dense<2.0> : f32[]
          %tb = broadcast_in_dim(%two) {broadcast_dimensions = []} : f32[4,8]
          %m = multiply(%t, %tb) : f32[4,8]
          %s = subtract(%m, %y) : f32[4,8]
          return(%k1, %s)
      }
      %r = if(%p) : f32[4] {
        ^true_branch():
          %z = constant dense<0.0> : f32[]
          %e = exponential(%h) : f32[4,8]
          %sum = reduce(%e, %z) {dimensions = [1]} : f32[4] """ + ADD_BODY + """
          %l = log(%sum) : f32[4]
          return(%l)
        ^false_branch():
          %z2 = constant dense<0.0> : f32[]
          %mx = reduce(%h, %z2) {dimensions = [1]} : f32[4] """ + MAX_BODY + """
          return(%mx)
      }
      return(%i, %h, %r)
    }
    """
    out, log = fused(src)
    m = parse_module(out)
    loop = [op for op in m.main.ops if op.name == "while"][0]
    cond, body = loop.regions
    assert [op.name for op in cond.ops if op.name != "constant"] == ["fusion"], out
    # the step's elementwise chain is one kernel (with the counter's add, at most two)
    assert {op.name for op in body.ops if op.name != "constant"} == {"fusion"}, out
    assert len([op for op in body.ops if op.name == "fusion"]) <= 2, out
    assert [op.attrs["kind"] for op in body.ops if op.name == "fusion" and
            any(o.name == "tanh" for o in op.walk())] in (["loop"], ["multi"]), out
    cond_op = [op for op in m.main.ops if op.name == "if"][0]
    true_ops = [op for op in cond_op.regions[0].ops if op.name != "constant"]
    assert [op.name for op in true_ops] == ["fusion"] and true_ops[0].attrs["kind"] == "input", out
    # the reductions' own bodies stay one scalar add / maximum
    for op in cond_op.walk():
        if op.name == "reduce":
            assert [o.name for o in op.regions[0].ops] in (["add"], ["maximum"]), out
    assert "fusion" in log
