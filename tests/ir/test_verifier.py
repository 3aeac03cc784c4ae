"""The verifier: each broken rule raises VerifyError whose message names the op, its operand
types and its source location, then says what is wrong."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hlo.ir import (
    Builder,
    Function,
    Location,
    Module,
    Operation,
    Region,
    VerifyError,
    scalar,
    tensor,
    verify_module,
)

LOC = Location("model.py", 12)


def _module(arg_types):
    m = Module("m")
    fn = m.add(Function("main", arg_types))
    return m, fn


def _expect(m, pattern):
    with pytest.raises(VerifyError) as e:
        verify_module(m)
    assert re.search(pattern, str(e.value)), str(e.value)
    return e.value


def _raw(fn, name, operands, attrs, result_types, regions=(), loc=LOC):
    op = Operation(name, operands, attrs, result_types, regions, loc)
    fn.body.append(op)
    fn.body.outputs = list(op.results)
    return op


def _scalar_body(dt, n=2, name="body", op="add"):
    r = Region([scalar(dt)] * n, name=name)
    r.outputs = [Builder(r).value(op, [r.args[0], r.args[1]])]
    return r


F4, F5, F45 = tensor((4,), np.float32), tensor((5,), np.float32), tensor((4, 5), np.float32)

# (name, arg types, op name, operand indices, attrs, result types, regions, message)
CASES = [
    ("elementwise shapes", [F4, F5], "add", [0, 1], {}, [F4], (),
     r"'add' \(operands: f32\[4\], f32\[5\]\) at model.py:12: operands must have the same type"),
    ("elementwise type class", [tensor((4,), np.int32)], "exponential", [0], {}, [tensor((4,), np.int32)], (),
     r"'exponential' \(operands: s32\[4\]\) at model.py:12: element type s32 is not a floating-point or complex type"),
    ("wrong result", [F4], "negate", [0], {}, [F5], (),
     r"'negate' \(operands: f32\[4\]\) at model.py:12: result type\(s\) f32\[5\] do not match the inferred f32\[4\]"),
    ("operand count", [F4], "add", [0], {}, [F4], (), r"'add' \(operands: f32\[4\]\) at model.py:12: expects 2 operand"),
    ("unknown op", [F4], "frobnicate", [0], {}, [F4], (), r"'frobnicate' \(operands: f32\[4\]\) at model.py:12: unknown op"),
    ("unknown attribute", [F4], "negate", [0], {"bogus": 1}, [F4], (), r"unknown attribute 'bogus'"),
    ("missing attribute", [F45], "transpose", [0], {}, [F45], (), r"'transpose' .* missing attribute 'permutation'"),
    ("bad permutation", [F45], "transpose", [0], {"permutation": [0, 0]}, [F45], (),
     r"'transpose' \(operands: f32\[4,5\]\) at model.py:12: permutation \[0, 0\] is not a permutation"),
    ("compare type", [tensor((4,), np.int32)] * 2, "compare", [0, 1],
     {"comparison_direction": "LT", "compare_type": "FLOAT"}, [tensor((4,), np.bool_)], (),
     r"'compare' \(operands: s32\[4\], s32\[4\]\) at model.py:12: compare_type FLOAT does not fit element type s32"),
    ("bad direction", [F4, F4], "compare", [0, 1], {"comparison_direction": "XX"}, [tensor((4,), np.bool_)], (),
     r"comparison_direction' must be one of EQ, NE"),
    ("slice bounds", [F4], "slice", [0], {"start_indices": [2], "limit_indices": [6]}, [F4], (),
     r"'slice' \(operands: f32\[4\]\) at model.py:12: slice \[2:6\] out of bounds for dimension 0 of size 4"),
    ("broadcast dims", [F4], "broadcast_in_dim", [0], {"broadcast_dimensions": [1]}, [tensor((4, 3), np.float32)], (),
     r"'broadcast_in_dim' \(operands: f32\[4\]\) at model.py:12: operand dimension 0 of size 4 cannot broadcast"),
    ("reshape size", [F4], "reshape", [0], {}, [F5], (),
     r"'reshape' \(operands: f32\[4\]\) at model.py:12: cannot reshape f32\[4\] \(4 elements\) to f32\[5\]"),
    ("dot contracting", [F45, F45], "dot_general", [0, 1],
     {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}, [tensor((4, 5), np.float32)], (),
     r"'dot_general' \(operands: f32\[4,5\], f32\[4,5\]\) at model.py:12: contracting dimension sizes differ"),
    ("reduce dims", [F45, scalar(np.float32)], "reduce", [0, 1], {"dimensions": [2]}, [F4],
     lambda: [_scalar_body(np.float32)],
     r"'reduce' \(operands: f32\[4,5\], f32\[\]\) at model.py:12: dimensions \[2\] out of range for rank 2"),
    ("concatenate", [F45, tensor((3, 4), np.float32)], "concatenate", [0, 1], {"dimension": 0},
     [tensor((7, 5), np.float32)], (), r"'concatenate' \(operands: f32\[4,5\], f32\[3,4\]\) .*shapes differ outside dimension 0"),
    ("pad negative", [F4, scalar(np.float32)], "pad", [0, 1],
     {"edge_padding_low": [-3], "edge_padding_high": [-3], "interior_padding": [0]}, [F4], (),
     r"'pad' .*padding makes dimension 0 negative"),
    ("iota pred", [], "iota", [], {"iota_dimension": 0}, [tensor((3,), np.bool_)], (), r"'iota' \(operands: none\) .*iota of pred"),
    ("convert shape", [F4], "convert", [0], {}, [tensor((5,), np.int32)], (), r"'convert' .*result must have the operand's shape"),
    ("select predicate", [F4, F4, F4], "select", [0, 1, 2], {}, [F4], (), r"'select' .*predicate must be pred"),
    ("gather index map", [F45, tensor((3, 1), np.int32)], "gather", [0, 1],
     {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0, 1], "index_vector_dim": 1,
      "slice_sizes": [1, 5]}, [tensor((3, 5), np.float32)], (),
     r"'gather' \(operands: f32\[4,5\], s32\[3,1\]\) at model.py:12: start_index_map has 2 entries, index vector has 1"),
    # gather's and scatter's batching dimensions pair up (they had gone unchecked: the
    # interpreter then failed with an IndexError, or gathered along a dimension of another size)
    ("gather batching count", [tensor((3, 5), np.float32), tensor((3, 1), np.int32)], "gather", [0, 1],
     {"offset_dims": [], "collapsed_slice_dims": [1], "operand_batching_dims": [0], "start_index_map": [1],
      "index_vector_dim": 1, "slice_sizes": [1, 1]}, [tensor((3,), np.float32)], (),
     r"'gather' .*start_indices_batching_dims \[\] must have one entry per operand_batching_dims entry \(\[0\]\)"),
    ("gather batching sizes", [tensor((3, 5), np.float32), tensor((2, 1), np.int32)], "gather", [0, 1],
     {"offset_dims": [], "collapsed_slice_dims": [1], "operand_batching_dims": [0],
      "start_indices_batching_dims": [0], "start_index_map": [1], "index_vector_dim": 1, "slice_sizes": [1, 1]},
     [tensor((2,), np.float32)], (), r"'gather' .*batching dimension sizes differ: operand 0 is 3, start_indices 0 is 2"),
    ("gather batching index vector", [tensor((3, 5), np.float32), tensor((3, 1), np.int32)], "gather", [0, 1],
     {"offset_dims": [], "collapsed_slice_dims": [1], "operand_batching_dims": [0],
      "start_indices_batching_dims": [1], "start_index_map": [1], "index_vector_dim": 1, "slice_sizes": [1, 1]},
     [tensor((3,), np.float32)], (), r"'gather' .*index_vector_dim 1 cannot be one of start_indices_batching_dims \[1\]"),
    ("scatter batching sizes", [tensor((3, 5), np.float32), tensor((2, 1), np.int32), tensor((2,), np.float32)],
     "scatter", [0, 1, 2],
     {"update_window_dims": [], "inserted_window_dims": [1], "input_batching_dims": [0],
      "scatter_indices_batching_dims": [0], "scatter_dims_to_operand_dims": [1], "index_vector_dim": 1},
     [tensor((3, 5), np.float32)], lambda: [_scalar_body(np.float32, name="update")],
     r"'scatter' .*batching dimension sizes differ: input 0 is 3, scatter_indices 0 is 2"),
    ("conv groups", [tensor((1, 3, 8), np.float32), tensor((4, 2, 3), np.float32)], "convolution", [0, 1],
     {"input_batch_dimension": 0, "input_feature_dimension": 1, "input_spatial_dimensions": [2],
      "kernel_input_feature_dimension": 1, "kernel_output_feature_dimension": 0, "kernel_spatial_dimensions": [2],
      "output_batch_dimension": 0, "output_feature_dimension": 1, "output_spatial_dimensions": [2]},
     [tensor((1, 4, 6), np.float32)], (), r"'convolution' .*input features 3 / feature_group_count 1 must equal kernel input features 2"),
    ("case index type", [tensor((), np.int64)], "case", [0], {}, [F4],
     lambda: [Region([], "branch0")], r"'case' \(operands: s64\[\]\) .*index must be an s32 scalar"),
    ("missing region", [F45, scalar(np.float32)], "reduce", [0, 1], {"dimensions": [1]}, [F4], (),
     r"'reduce' .*expects 1 region\(s\), got 0"),
    ("constant value", [], "constant", [], {"value": np.zeros(3, np.float32)}, [tensor((3,), np.int32)], (),
     r"'constant' \(operands: none\) at model.py:12: result type\(s\) s32\[3\] do not match the inferred f32\[3\]"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_rule_messages(case):
    _, args, name, idx, attrs, rts, regions, pattern = case
    m, fn = _module(args)
    regions = regions() if callable(regions) else regions
    if name == "case":
        regions[0].outputs = []
    _raw(fn, name, [fn.args[i] for i in idx], attrs, rts, regions)
    err = _expect(m, pattern)
    assert err.op is fn.body.ops[-1]


def test_message_without_location():
    m, fn = _module([F4, F5])
    _raw(fn, "add", list(fn.args), {}, [F4], loc=None)
    _expect(m, r"^'add' \(operands: f32\[4\], f32\[5\]\): operands must have the same type")


def test_use_before_definition():
    m, fn = _module([F4])
    b = Builder(fn.body, LOC)
    x = b.value("negate", [fn.args[0]])
    y = b.value("negate", [x])
    fn.body.ops.reverse()  # y's op now comes first
    fn.body.outputs = [y]
    _expect(m, r"'negate' \(operands: f32\[4\]\) at model.py:12: operand #0 \(f32\[4\]\) is not defined before this op")


def test_value_of_another_function_is_out_of_scope():
    m, fn = _module([F4])
    other = m.add(Function("other", [F4]))
    _raw(fn, "negate", [other.args[0]], {}, [F4])
    _expect(m, r"'negate' .*operand #0 \(f32\[4\]\) is not defined before this op in its scope")


def test_region_values_do_not_leak_out():
    m, fn = _module([F45])
    body = _scalar_body(np.float32)
    init = Builder(fn.body).value("constant", attrs={"value": np.array(0, np.float32)})
    red = Builder(fn.body, LOC).op("reduce", [fn.args[0], init], {"dimensions": [1]}, regions=[body])
    inner = body.ops[0].result
    _raw(fn, "negate", [inner], {}, [scalar(np.float32)])
    _expect(m, r"'negate' \(operands: f32\[\]\) at model.py:12: operand #0 \(f32\[\]\) is not defined")
    assert red is not None


def test_region_output_out_of_scope():
    m, fn = _module([F4])
    other = Function("other", [F5])
    fn.body.outputs = [other.args[0]]
    _expect(m, r"region 'body' returns value #0 \(f32\[5\]\) that is not in scope")


def test_while_region_types():
    m, fn = _module([F4])
    cond = Region([F4], "cond")
    cond.outputs = [Builder(cond).value("constant", attrs={"value": np.array(True)})]
    body = Region([F5], "body")
    body.outputs = [body.args[0]]
    _raw(fn, "while", [fn.args[0]], {}, [F4], [cond, body])
    _expect(m, r"'while' \(operands: f32\[4\]\) at model.py:12: body region must take the operands' types")


def test_if_branches_must_agree():
    m, fn = _module([scalar(np.bool_), F4, F5])
    t = Region([], "true_branch")
    t.outputs = [fn.args[1]]
    f = Region([], "false_branch")
    f.outputs = [fn.args[2]]
    _raw(fn, "if", [fn.args[0]], {}, [F4], [t, f])
    _expect(m, r"'if' \(operands: pred\[\]\) at model.py:12: branches must return the same types")


def test_calls():
    m, fn = _module([F4])
    _raw(fn, "call", [fn.args[0]], {"callee": "nope"}, [F4])
    _expect(m, r"'call' \(operands: f32\[4\]\) at model.py:12: calls unknown function @nope")
    m, fn = _module([F4])
    callee = m.add(Function("g", [F5], "private"))
    callee.body.outputs = [callee.args[0]]
    _raw(fn, "call", [fn.args[0]], {"callee": "g"}, [F5])
    _expect(m, r"'call' .*@g takes \(f32\[5\]\), called with \(f32\[4\]\)")


def test_recursion_is_refused():
    m, fn = _module([F4])
    _raw(fn, "call", [fn.args[0]], {"callee": "main"}, [F4])
    _expect(m, r"recursive calls are not allowed: @main -> @main")


def test_fusion_region_signature():
    m, fn = _module([F4])
    r = Region([F5], "fused")
    r.outputs = [r.args[0]]
    _raw(fn, "fusion", [fn.args[0]], {"kind": "loop"}, [F5], [r])
    _expect(m, r"'fusion' \(operands: f32\[4\]\) at model.py:12: fused region must take the operands' types")


def test_builder_reports_at_construction():
    m, fn = _module([F4, F5])
    with pytest.raises(VerifyError, match=r"'add' \(operands: f32\[4\], f32\[5\]\) at model.py:12"):
        Builder(fn.body, LOC).op("add", list(fn.args))


def test_stale_parent_link():
    m, fn = _module([F4])
    op = Builder(fn.body).op("negate", [fn.args[0]])
    fn.body.outputs = [op.result]
    op.parent = None
    _expect(m, r"'negate' .*parent link is stale")


def _reduce_text(it, ot, body_t=None):
    bt = body_t or ot
    return f"""func @main(%a: {it}[4]) -> ({ot}[]) {{
  %z = constant dense<0> : {ot}[]
  %r = reduce(%a, %z) {{dimensions = [0]}} : {ot}[] {{
    ^body(%x: {bt}[], %y: {bt}[]):
      %s = add(%x, %y) : {ot}[]
      return(%s)
  }}
  return(%r)
}}
"""


@pytest.mark.parametrize("it, ot, body_t, match", [
    ("u8", "f32", None, "input 0 of element type u8 does not fit its init value's type f32"),
    ("f32", "f16", None, "input 0 of element type f32 does not fit its init value's type f16"),
    ("s32", "f32", None, "input 0 of element type s32 does not fit"),
    ("f32", "f32", "f16", "result type"),
])
def test_type_mismatched_reductions_are_refused(it, ot, body_t, match):
    # issue 35: a u8 input with an f32 init passed the verifier and leaked llvmlite's ValueError
    from hlo.ir import parse_module
    from hlo.ir.errors import ParseError
    with pytest.raises(ParseError, match=match):
        parse_module(_reduce_text(it, ot, body_t))


def test_a_float_reduction_may_accumulate_wider():
    from hlo.ir import parse_module
    from hlo.ir.interpreter import run
    m = parse_module(_reduce_text("f16", "f32"))
    x = np.array([1, 2, 3, 2048], np.float16)
    (got,) = run(m, [x])
    assert float(got) == 2054.0


def test_a_type_mismatched_reduce_window_is_refused():
    from hlo.ir import parse_module
    from hlo.ir.errors import ParseError
    text = """func @main(%a: u8[4]) -> (f32[2]) {
  %z = constant dense<0.0> : f32[]
  %r = reduce_window(%a, %z) {window_dimensions = [2], window_strides = [2]} : f32[2] {
    ^body(%x: f32[], %y: f32[]):
      %s = add(%x, %y) : f32[]
      return(%s)
  }
  return(%r)
}
"""
    with pytest.raises(ParseError, match="input 0 of element type u8 does not fit its init value's type f32"):
        parse_module(text)
