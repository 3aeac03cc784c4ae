"""Regressions of CPU-backend miscompiles, each reduced to a small IR program: IR text in, the
CPU executable's outputs compared with the reference interpreter's.

* A fusion with several outputs whose buffer plan writes one output over an operand that
  another output still reads (found as: two scatters of one array sharing a buffer, a median
  next to a sum, an MLP loss with ``take_along_axis`` labels). A loop kernel now computes every
  output's element before storing any; the buffer plan refuses the pair where the outputs are
  written one after another (row kernels, outputs computed by their own kernels, outputs of
  other shapes or layouts).
* ``bitcast_convert`` with ``pred``: one bit per element, as in StableHLO.
"""
import cpu_helpers as helpers
import numpy as np
import pytest

from hlo.backends.cpu import compile as cpu_compile
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.buffer_assignment import usable_inplace_pairs
from hlo.passes.fusion_kinds import inplace_pairs
from hlo.passes.pipeline import optimize


def run_both(src, args, fusion=False, rtol=0.0):
    """Optimize for cpu (by default keeping the hand-written fusions as they are), compile, run;
    return (optimized, cpu outputs, interpreter outputs)."""
    m = parse_module(src)
    opt = optimize(m, target="cpu", options={"fusion": fusion})
    got = cpu_compile(opt).run([np.array(a) for a in args])
    want = interpret(m, [np.array(a) for a in args])
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        helpers.assert_close(g, w, rtol=rtol, what=f"output {i}")
    return opt


def fusion_ops(opt, name):
    return [op for op in opt.module.main.ops if op.name == "fusion" and op.attrs.get("name") == name]


# A loop fusion with two outputs: output 0 does not read %q, output 1 does. The plan writes
# output 0 over %q (the negate's result, dead after the fusion).
LOOP_TWO_OUTPUTS = """module @m
func @main(%x: f32[8], %y: f32[8]) -> (f32[8], f32[8]) {
  %t = fusion(%x) {kind = "loop", name = "producer"} : f32[8] {
    ^fused(%a: f32[8]):
      %n = negate(%a) : f32[8]
      return(%n)
  }
  %r0, %r1 = fusion(%y, %t) {kind = "loop", name = "two_outputs"} : f32[8], f32[8] {
    ^fused(%p: f32[8], %q: f32[8]):
      %c = abs(%p) : f32[8]
      %d = multiply(%q, %q) : f32[8]
      return(%c, %d)
  }
  return(%r0, %r1)
}
"""


def test_loop_fusion_output_over_an_operand_another_output_reads():
    x = np.arange(8, dtype=np.float32) - 3
    y = np.arange(8, dtype=np.float32) * -2
    opt = run_both(LOOP_TWO_OUTPUTS, [x, y])
    # The in-place update is still made (one loop kernel computes both elements, then stores).
    assert any(op.attrs.get("name") == "two_outputs" for op, _, _ in opt.buffers.inplace)


# An Adam-like update: %m feeds both outputs; writing m_new over %m stays allowed.
LOOP_SHARED_OPERAND = """module @m
func @main(%g: f32[16], %m0: f32[16], %p: f32[16]) -> (f32[16], f32[16]) {
  %m = fusion(%m0) {kind = "loop", name = "producer"} : f32[16] {
    ^fused(%a: f32[16]):
      %h = constant dense<0.5> : f32[16]
      %n = multiply(%a, %h) : f32[16]
      return(%n)
  }
  %mn, %pn = fusion(%m, %g, %p) {kind = "loop", name = "update"} : f32[16], f32[16] {
    ^fused(%a: f32[16], %b: f32[16], %c: f32[16]):
      %s = add(%a, %b) : f32[16]
      %t = subtract(%c, %s) : f32[16]
      return(%s, %t)
  }
  return(%mn, %pn)
}
"""


def test_loop_fusion_in_place_kept_when_every_reader_is_in_the_same_loop():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(16).astype(np.float32) for _ in range(3)]
    opt = run_both(LOOP_SHARED_OPERAND, args)
    op, = fusion_ops(opt, "update")
    assert (0, 0) in usable_inplace_pairs(op)
    assert any(o is op for o, _, _ in opt.buffers.inplace)


# A row (input) fusion with two full-shape outputs: the row kernel writes them one after the
# other, so neither may go over %p, which both read.
ROW_TWO_OUTPUTS = """module @m
func @main(%x: f32[4,8]) -> (f32[4,8], f32[4,8]) {
  %t = fusion(%x) {kind = "loop", name = "producer"} : f32[4,8] {
    ^fused(%a: f32[4,8]):
      %n = negate(%a) : f32[4,8]
      return(%n)
  }
  %r0, %r1 = fusion(%t) {kind = "input", name = "rows"} : f32[4,8], f32[4,8] {
    ^fused(%p: f32[4,8]):
      %z = constant dense<0.0> : f32[]
      %s = reduce(%p, %z) {dimensions = [1]} : f32[4] {
        ^body(%u: f32[], %v: f32[]):
          %w = add(%u, %v) : f32[]
          return(%w)
      }
      %b = broadcast_in_dim(%s) {broadcast_dimensions = [0]} : f32[4,8]
      %c = subtract(%p, %b) : f32[4,8]
      %two = constant dense<2.0> : f32[4,8]
      %d = multiply(%p, %two) : f32[4,8]
      return(%c, %d)
  }
  return(%r0, %r1)
}
"""


def test_row_fusion_outputs_do_not_overwrite_an_operand_both_read():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    opt = run_both(ROW_TWO_OUTPUTS, [x])
    op, = fusion_ops(opt, "rows")
    assert inplace_pairs(op) and not usable_inplace_pairs(op)


# The median-next-to-a-sum program: an input fusion reducing a middle dimension; one output is
# the reduction itself (its own kernel, run first), the other reads %a elementwise. The
# reduction must not be written over %a.
REDUCE_ROOT_AND_ELEMENTWISE = """module @m
func @main(%x: f32[3,4,2], %y: f32[3,2]) -> (f32[3,2], f32[3,2]) {
  %a = fusion(%y) {kind = "loop", name = "producer"} : f32[3,2] {
    ^fused(%q: f32[3,2]):
      %n = negate(%q) : f32[3,2]
      return(%n)
  }
  %r0, %r1 = fusion(%a, %x) {kind = "input", name = "mixed"} : f32[3,2], f32[3,2] {
    ^fused(%p: f32[3,2], %v: f32[3,4,2]):
      %h = constant dense<0.5> : f32[3,2]
      %m = multiply(%p, %h) : f32[3,2]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%v, %z) {dimensions = [1]} : f32[3,2] {
        ^body(%u: f32[], %w: f32[]):
          %t = add(%u, %w) : f32[]
          return(%t)
      }
      return(%s, %m)
  }
  return(%r0, %r1)
}
"""


def test_reduction_output_not_written_over_an_operand_another_output_reads():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    opt = run_both(REDUCE_ROOT_AND_ELEMENTWISE, [x, y], rtol=1e-6)
    op, = fusion_ops(opt, "mixed")
    assert (0, 0) in inplace_pairs(op) and (0, 0) not in usable_inplace_pairs(op)


# Two scatters of one array, with index math that the fusion passes merge into multi-output
# loop fusions (the frontend's x.at[i].power(2), x.at[j].apply(...)), through the full pipeline.
TWO_SCATTERS = """module @m
func @main(%x: s32[6], %idx: s32[5]) -> (s32[6], s32[6]) {
  %0 = slice(%idx) {limit_indices = [4], start_indices = [3]} : s32[1]
  %1 = reshape(%0) : s32[]
  %z = constant dense<0> : s32[]
  %six = constant dense<6> : s32[]
  %2 = compare(%1, %z) {compare_type = "SIGNED", comparison_direction = "LT"} : pred[]
  %3 = add(%1, %six) : s32[]
  %4 = select(%2, %3, %1) : s32[]
  %5 = reshape(%4) : s32[1,1]
  %6 = gather(%x, %5) {collapsed_slice_dims = [0], index_vector_dim = 1, offset_dims = [], operand_batching_dims = [], slice_sizes = [1], start_index_map = [0], start_indices_batching_dims = []} : s32[1]
  %7 = multiply(%6, %6) : s32[1]
  %8 = scatter(%x, %5, %7) {index_vector_dim = 1, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], update_window_dims = []} : s32[6] {
    ^update(%a: s32[], %b: s32[]):
      return(%b)
  }
  %9 = slice(%idx) {limit_indices = [1], start_indices = [0]} : s32[1]
  %z1 = broadcast_in_dim(%z) {broadcast_dimensions = []} : s32[1]
  %six1 = broadcast_in_dim(%six) {broadcast_dimensions = []} : s32[1]
  %10 = compare(%9, %z1) {compare_type = "SIGNED", comparison_direction = "LT"} : pred[1]
  %11 = add(%9, %six1) : s32[1]
  %12 = select(%10, %11, %9) : s32[1]
  %13 = reshape(%12) : s32[1,1]
  %14 = gather(%x, %13) {collapsed_slice_dims = [0], index_vector_dim = 1, offset_dims = [], operand_batching_dims = [], slice_sizes = [1], start_index_map = [0], start_indices_batching_dims = []} : s32[1]
  %three = constant dense<3> : s32[1]
  %15 = multiply(%14, %three) : s32[1]
  %16 = scatter(%x, %13, %15) {index_vector_dim = 1, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], update_window_dims = []} : s32[6] {
    ^update(%c: s32[], %d: s32[]):
      return(%d)
  }
  return(%8, %16)
}
"""


@pytest.mark.parametrize("idx", [[1, 1, 5, 9, -2], [-6, 0, 2, 3, 4], [5, 4, 3, -1, 0]])
def test_two_scatters_of_one_array_through_the_pipeline(idx):
    x = np.array([13, -17, -13, -11, -13, 12], np.int32)
    run_both(TWO_SCATTERS, [x, np.array(idx, np.int32)], fusion=True)


# ------------------------------------------------------------------------------------------
# bitcast_convert with pred: one bit per element, lowest bit first (StableHLO)
# ------------------------------------------------------------------------------------------

BITCASTS = [
    ("pred[64]", "s64[]", lambda r: r.random(64) < 0.5),
    ("f64[]", "pred[64]", lambda r: np.array(r.standard_normal(), np.float64)),
    ("pred[2,3,8]", "u8[2,3]", lambda r: r.random((2, 3, 8)) < 0.5),
    ("s16[5]", "pred[5,16]", lambda r: r.integers(-2**15, 2**15, 5).astype(np.int16)),
    ("pred[4,32]", "f32[4]", lambda r: r.random((4, 32)) < 0.3),
    ("pred[3]", "pred[3]", lambda r: np.array([True, False, True])),
]


@pytest.mark.parametrize("src,dst,make", BITCASTS, ids=[f"{s}->{d}" for s, d, _ in BITCASTS])
@pytest.mark.parametrize("pipeline", [False, True], ids=["unfused", "pipeline"])
def test_bitcast_convert_pred_is_one_bit(src, dst, make, pipeline):
    text = f"""module @m
func @main(%x: {src}) -> ({dst}) {{
  %0 = bitcast_convert(%x) : {dst}
  return(%0)
}}
"""
    x = make(np.random.default_rng(7))
    if pipeline:
        run_both(text, [x], fusion=True)
    else:
        helpers.check(text, [x])


def test_bitcast_convert_pred_bit_order_matches_the_spec():
    # stablehlo_interpret/bitcast_convert.mlir: 0x0123456789ABCDEF <-> its 64 bits, lowest first
    v = np.array(0x0123456789ABCDEF, np.int64)
    bits = np.array([(0x0123456789ABCDEF >> k) & 1 for k in range(64)], bool)
    to_bits = helpers.compile_text("""module @m
func @main(%x: s64[]) -> (pred[64]) {
  %0 = bitcast_convert(%x) : pred[64]
  return(%0)
}
""")
    from_bits = helpers.compile_text("""module @m
func @main(%x: pred[64]) -> (s64[]) {
  %0 = bitcast_convert(%x) : s64[]
  return(%0)
}
""")
    np.testing.assert_array_equal(to_bits.run([v])[0], bits)
    assert int(from_bits.run([bits])[0]) == 0x0123456789ABCDEF


def test_bitcast_convert_pred_widths_are_verified():
    from hlo.ir.errors import IRError
    with pytest.raises(IRError, match="widening bitcast needs the operand's last dimension to be 8"):
        parse_module("""module @m
func @main(%x: pred[4]) -> (s8[]) {
  %0 = bitcast_convert(%x) : s8[]
  return(%0)
}
""")
