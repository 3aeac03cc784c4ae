"""Shape ops, reductions, dot_general, convolution, windows, sort, scatter and control flow on
the CPU backend vs the reference interpreter."""
import numpy as np
import pytest
from cpu_helpers import BF16, check

rng = np.random.default_rng(42)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_broadcast_reshape_transpose():
    src = """module @m
func @main(%arg0: f32[3,1,5], %arg1: f32[5]) -> (f32[3,4,5], f32[5,3], f32[4,5,3], s32[6,2]) {
  %0 = broadcast_in_dim(%arg0) {broadcast_dimensions = [0, 1, 2]} : f32[3,4,5]
  %1 = broadcast_in_dim(%arg1) {broadcast_dimensions = [2]} : f32[3,4,5]
  %2 = add(%0, %1) : f32[3,4,5]
  %3 = reshape(%arg0) : f32[15]
  %4 = reshape(%3) : f32[5,3]
  %5 = transpose(%2) {permutation = [1, 2, 0]} : f32[4,5,3]
  %6 = iota() {iota_dimension = 0} : s32[6,2]
  return(%2, %4, %5, %6)
}
"""
    check(src, [f32(3, 1, 5), f32(5)])


def test_slices_pad_concat_reverse():
    src = """module @m
func @main(%arg0: f32[6,7], %arg1: f32[2,7], %arg2: s32[], %arg3: s64[]) -> (f32[2,3], f32[8,7], f32[12,11], f32[6,7], f32[3,4], f32[6,7]) {
  %0 = slice(%arg0) {limit_indices = [6, 7], start_indices = [1, 0], strides = [3, 3]} : f32[2,3]
  %1 = concatenate(%arg0, %arg1) {dimension = 0} : f32[8,7]
  %2 = constant dense<-1.0> : f32[]
  %3 = pad(%arg0, %2) {edge_padding_high = [-1, 2], edge_padding_low = [2, -1], interior_padding = [1, 0]} : f32[12,8]
  %4 = slice(%3) {limit_indices = [12, 8], start_indices = [0, 0]} : f32[12,8]
  %5 = reverse(%arg0) {dimensions = [0, 1]} : f32[6,7]
  %6 = dynamic_slice(%arg0, %arg2, %arg2) {slice_sizes = [3, 4]} : f32[3,4]
  %7 = dynamic_update_slice(%arg0, %arg1, %arg3, %arg3) : f32[6,7]
  return(%0, %1, %4, %5, %6, %7)
}
""".replace("f32[12,11], f32[6,7], f32[3,4]", "f32[12,8], f32[6,7], f32[3,4]")
    for s in [0, 2, 5, -3]:
        check(src, [f32(6, 7), f32(2, 7), np.int32(s), np.int64(s * 2)])


def test_gather():
    src = """module @m
func @main(%arg0: f32[5,4,3], %arg1: s32[2,2]) -> (f32[2,4,2]) {
  %0 = gather(%arg0, %arg1) {collapsed_slice_dims = [0], index_vector_dim = 1, offset_dims = [1, 2], slice_sizes = [1, 4, 2], start_index_map = [0, 2]} : f32[2,4,2]
  return(%0)
}
"""
    check(src, [f32(5, 4, 3), np.array([[1, 1], [7, -2]], np.int32)])


def test_gather_batching():
    src = """module @m
func @main(%arg0: f32[3,5,4], %arg1: s32[3,2]) -> (f32[3,2,4]) {
  %0 = gather(%arg0, %arg1) {collapsed_slice_dims = [1], index_vector_dim = 2, offset_dims = [2], operand_batching_dims = [0], slice_sizes = [1, 1, 4], start_index_map = [1], start_indices_batching_dims = [0]} : f32[3,2,4]
  return(%0)
}
"""
    check(src, [f32(3, 5, 4), np.array([[0, 4], [2, 1], [3, 9]], np.int32)])


REDUCE = """module @m
func @main(%arg0: {t}) -> ({rt}) {{
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%arg0, %0) {{dimensions = {dims}}} : {rt} {{
    ^body(%2: {et}[], %3: {et}[]):
      %4 = {op}(%2, %3) : {et}[]
      return(%4)
  }}
  return(%1)
}}
"""


@pytest.mark.parametrize("shape,dims", [((6, 33), [1]), ((6, 33), [0]), ((6, 33), [0, 1]),
                                        ((4, 5, 6), [1]), ((4, 5, 6), [0, 2]), ((3, 0), [1])])
@pytest.mark.parametrize("op,init", [("add", "0.0"), ("maximum", "-inf"), ("minimum", "inf"), ("multiply", "1.0")])
def test_reduce_f32(shape, dims, op, init):
    x = f32(*shape)
    if x.size > 3:
        x.flat[3] = np.nan if op != "multiply" else x.flat[3]
    rt = "f32[" + ",".join(str(s) for i, s in enumerate(shape) if i not in dims) + "]"
    src = REDUCE.format(t=f"f32[{','.join(map(str, shape))}]", rt=rt, init=init, et="f32", dims=dims, op=op)
    check(src, [x], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("et,np_t", [("s32", np.int32), ("u8", np.uint8), ("f16", np.float16), ("bf16", BF16), ("f64", np.float64)])
@pytest.mark.parametrize("dims", [[1], [0], [0, 1]])
def test_reduce_types(et, np_t, dims):
    if np.dtype(np_t).kind in "iu":
        x = rng.integers(0, 200, (5, 40)).astype(np_t)
        rt_tol = (0, 0)
    else:
        x = rng.standard_normal((5, 40)).astype(np_t)
        rt_tol = (2e-2, 2e-2) if et in ("f16", "bf16") else (1e-12, 1e-12)
    rt = f"{et}[" + ",".join(str(s) for i, s in enumerate((5, 40)) if i not in dims) + "]"
    init = "0" if np.dtype(np_t).kind in "iu" else "0.0"
    src = REDUCE.format(t=f"{et}[5,40]", rt=rt, init=init, et=et, dims=dims, op="add")
    check(src, [x], rtol=rt_tol[0], atol=rt_tol[1])


def test_reduce_variadic_argmax():
    src = """module @m
func @main(%arg0: f32[4,9]) -> (f32[4], s32[4]) {
  %0 = iota() {iota_dimension = 1} : s32[4,9]
  %1 = constant dense<-inf> : f32[]
  %2 = constant dense<0> : s32[]
  %3, %4 = reduce(%arg0, %0, %1, %2) {dimensions = [1]} : f32[4], s32[4] {
    ^body(%5: f32[], %6: s32[], %7: f32[], %8: s32[]):
      %9 = compare(%5, %7) {comparison_direction = "GE"} : pred[]
      %10 = select(%9, %5, %7) : f32[]
      %11 = select(%9, %6, %8) : s32[]
      return(%10, %11)
  }
  return(%3, %4)
}
"""
    check(src, [f32(4, 9)])


DOT = """module @m
func @main(%arg0: {lt}, %arg1: {rt}) -> ({ot}) {{
  %0 = dot_general(%arg0, %arg1) {{{attrs}}} : {ot}
  return(%0)
}}
"""


@pytest.mark.parametrize("et", ["f32", "f64", "f16", "bf16", "s32", "s8"])
@pytest.mark.parametrize("case", ["mm", "mm_t", "batched", "multi_contract", "vec"])
def test_dot_general(et, case):
    np_t = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": BF16, "s32": np.int32, "s8": np.int8}[et]
    specs = {
        "mm": ((7, 5), (5, 9), "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", (7, 9)),
        "mm_t": ((5, 7), (9, 5), "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [1]", (7, 9)),
        "batched": ((3, 4, 6), (3, 6, 5), "lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]", (3, 4, 5)),
        "multi_contract": ((2, 3, 4, 5), (4, 3, 6), "lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [1, 0]", (2, 5, 6)),
        "vec": ((8,), (8, 3), "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]", (3,)),
    }
    ls, rs, attrs, os_ = specs[case]
    if np.dtype(np_t).kind in "iu":
        a = rng.integers(-5, 5, ls).astype(np_t); b = rng.integers(-5, 5, rs).astype(np_t)
        tol = (0, 0)
    else:
        a = rng.standard_normal(ls).astype(np_t); b = rng.standard_normal(rs).astype(np_t)
        tol = {"f32": (1e-5, 1e-5), "f64": (1e-12, 1e-12), "f16": (1e-2, 1e-2), "bf16": (2e-2, 5e-2)}[et]
    sh = lambda s: f"{et}[{','.join(map(str, s))}]"
    check(DOT.format(lt=sh(ls), rt=sh(rs), ot=sh(os_), attrs=attrs), [a, b], rtol=tol[0], atol=tol[1])


def test_dot_mixed_precision_result():
    src = DOT.format(lt="bf16[4,8]", rt="bf16[8,3]", ot="f32[4,3]",
                     attrs="lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]")
    check(src, [f32(4, 8).astype(BF16), f32(8, 3).astype(BF16)], rtol=1e-5, atol=1e-5)


def test_convolution_2d():
    src = """module @m
func @main(%arg0: f32[2,3,9,8], %arg1: f32[4,3,3,2]) -> (f32[2,4,5,4]) {
  %0 = convolution(%arg0, %arg1) {input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = [2, 3], kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = [2, 3], output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = [2, 3], padding = [[1, 1], [0, 1]], window_strides = [2, 2], rhs_dilation = [1, 2]} : f32[2,4,5,4]
  return(%0)
}
"""
    check(src, [f32(2, 3, 9, 8), f32(4, 3, 3, 2)], rtol=1e-4, atol=1e-4)


def test_convolution_groups_and_lhs_dilation():
    src = """module @m
func @main(%arg0: f32[1,7,4], %arg1: f32[3,2,6]) -> (f32[1,13,6]) {
  %0 = convolution(%arg0, %arg1) {feature_group_count = 2, input_batch_dimension = 0, input_feature_dimension = 2, input_spatial_dimensions = [1], kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 2, kernel_spatial_dimensions = [0], lhs_dilation = [2], output_batch_dimension = 0, output_feature_dimension = 2, output_spatial_dimensions = [1], padding = [[1, 1]], window_reversal = [true]} : f32[1,13,6]
  return(%0)
}
"""
    check(src, [f32(1, 7, 4), f32(3, 2, 6)], rtol=1e-4, atol=1e-4)


def test_reduce_window():
    src = """module @m
func @main(%arg0: f32[2,9,8]) -> (f32[2,5,4], f32[2,9,9]) {
  %0 = constant dense<-inf> : f32[]
  %1 = reduce_window(%arg0, %0) {padding = [[0, 0], [1, 1], [0, 1]], window_dimensions = [1, 3, 3], window_strides = [1, 2, 2]} : f32[2,5,4] {
    ^body(%2: f32[], %3: f32[]):
      %4 = maximum(%2, %3) : f32[]
      return(%4)
  }
  %5 = constant dense<1.0> : f32[]
  %6 = reduce_window(%arg0, %5) {base_dilations = [1, 1, 1], padding = [[0, 0], [1, 1], [1, 1]], window_dilations = [1, 2, 1], window_dimensions = [1, 2, 2]} : f32[2,9,9] {
    ^body(%7: f32[], %8: f32[]):
      %9 = add(%7, %8) : f32[]
      return(%9)
  }
  return(%1, %6)
}
"""
    check(src, [f32(2, 9, 8)], rtol=1e-5, atol=1e-5)


def test_sort_stable_multi_operand():
    src = """module @m
func @main(%arg0: f32[3,50], %arg1: s32[3,50]) -> (f32[3,50], s32[3,50]) {
  %0, %1 = sort(%arg0, %arg1) {dimension = 1, is_stable = true} : f32[3,50], s32[3,50] {
    ^comparator(%2: f32[], %3: f32[], %4: s32[], %5: s32[]):
      %6 = compare(%2, %3) {comparison_direction = "LT", compare_type = "TOTALORDER"} : pred[]
      return(%6)
  }
  return(%0, %1)
}
"""
    x = rng.integers(0, 6, (3, 50)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, 7] = -0.0
    check(src, [x, np.arange(150, dtype=np.int32).reshape(3, 50)])


def test_sort_dim0():
    src = """module @m
func @main(%arg0: s32[33,4]) -> (s32[33,4]) {
  %0 = sort(%arg0) {dimension = 0} : s32[33,4] {
    ^comparator(%1: s32[], %2: s32[]):
      %3 = compare(%1, %2) {comparison_direction = "GT"} : pred[]
      return(%3)
  }
  return(%0)
}
"""
    check(src, [rng.integers(-100, 100, (33, 4)).astype(np.int32)])


def test_scatter_add_with_out_of_bounds():
    src = """module @m
func @main(%arg0: f32[6,4], %arg1: s32[5,1], %arg2: f32[5,4]) -> (f32[6,4]) {
  %0 = scatter(%arg0, %arg1, %arg2) {index_vector_dim = 1, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], update_window_dims = [1]} : f32[6,4] {
    ^update(%1: f32[], %2: f32[]):
      %3 = add(%1, %2) : f32[]
      return(%3)
  }
  return(%0)
}
"""
    check(src, [f32(6, 4), np.array([[0], [5], [0], [9], [-1]], np.int32), f32(5, 4)], rtol=1e-6, atol=1e-6)


def test_while_if_case_call():
    src = """module @m
func private @twice(%arg0: f32[4]) -> (f32[4]) {
  %0 = add(%arg0, %arg0) : f32[4]
  return(%0)
}

func @main(%arg0: f32[4], %arg1: s32[]) -> (f32[4], s32[], f32[4], f32[4]) {
  %0 = constant dense<0> : s32[]
  %1, %2 = while(%0, %arg0) : s32[], f32[4] {
    ^cond(%3: s32[], %4: f32[4]):
      %5 = compare(%3, %arg1) {comparison_direction = "LT"} : pred[]
      return(%5)
    ^body(%6: s32[], %7: f32[4]):
      %8 = constant dense<1> : s32[]
      %9 = add(%6, %8) : s32[]
      %10 = call(%7) {callee = "twice"} : f32[4]
      return(%9, %10)
  }
  %11 = constant dense<2> : s32[]
  %12 = compare(%arg1, %11) {comparison_direction = "GT"} : pred[]
  %13 = if(%12) : f32[4] {
    ^true_branch():
      %14 = negate(%arg0) : f32[4]
      return(%14)
    ^false_branch():
      return(%arg0)
  }
  %15 = case(%arg1) : f32[4] {
    ^branch0():
      %16 = exponential(%arg0) : f32[4]
      return(%16)
    ^branch1():
      %17 = abs(%arg0) : f32[4]
      return(%17)
    ^branch2():
      return(%2)
  }
  return(%2, %1, %13, %15)
}
"""
    for n in [0, 1, 3, 5, -1]:
        check(src, [f32(4), np.int32(n)], rtol=1e-6, atol=1e-6)


def test_while_swapping_state():
    src = """module @m
func @main(%arg0: f32[3], %arg1: f32[3]) -> (s32[], f32[3], f32[3]) {
  %0 = constant dense<0> : s32[]
  %1, %2, %3 = while(%0, %arg0, %arg1) : s32[], f32[3], f32[3] {
    ^cond(%4: s32[], %5: f32[3], %6: f32[3]):
      %7 = constant dense<3> : s32[]
      %8 = compare(%4, %7) {comparison_direction = "LT"} : pred[]
      return(%8)
    ^body(%9: s32[], %10: f32[3], %11: f32[3]):
      %12 = constant dense<1> : s32[]
      %13 = add(%9, %12) : s32[]
      return(%13, %11, %10)
  }
  return(%1, %2, %3)
}
"""
    check(src, [f32(3), f32(3)])


def test_outputs_alias_inputs_and_constants():
    src = """module @m
func @main(%arg0: f32[3]) -> (f32[3], f32[2], f32[3], f32[3]) {
  %0 = constant dense<[1.0, 2.0]> : f32[2]
  %1 = negate(%arg0) : f32[3]
  return(%arg0, %0, %1, %1)
}
"""
    x = f32(3)
    got = check(src, [x])
    assert got[0] is not x and not np.shares_memory(got[0], x)


def test_unsupported_construct_names_the_op_and_line():
    from cpu_helpers import compile_text

    from hlo.backends.scalar_ops import UnsupportedOp
    # a reduce body that calls a function cannot be evaluated element by element
    src = """module @m
func private @f(%arg0: f32[], %arg1: f32[]) -> (f32[]) {
  %0 = add(%arg0, %arg1) : f32[]
  return(%0)
}

func @main(%arg0: f32[4]) -> (f32[]) {
  %0 = constant dense<0.0> : f32[]
  %1 = reduce(%arg0, %0) {dimensions = [0]} : f32[] loc("model.py":7) {
    ^body(%2: f32[], %3: f32[]):
      %4 = call(%2, %3) {callee = "f"} : f32[]
      return(%4)
  }
  return(%1)
}
"""
    with pytest.raises(UnsupportedOp, match=r"'call'.*in 'reduce' at model.py:7"):
        compile_text(src)
