"""Split reductions on cuda (``kernels.emit_split_reduce``): a reduction of fewer results than
the GPU has multiprocessors, each over at least ``SPLIT_MIN_ELEMENTS`` elements, runs as two
kernels -- slices of each result's elements a block each into partials, then the partials of
each result, in order, with the init value applied once -- instead of one block per result.
Column reductions (``emit_split_column_reduce``) of few results over long columns likewise:
runs of each column a thread each, then the same second kernel.
The steps' text is read from compiles that need no GPU (ptxas assembles them where present);
with a GPU (marker ``gpu``) the results are checked against the interpreter: sums, max,
argmax (two results), a non-identity init, any over pred, integers, bf16, a mean whose division
runs after the split sum, and a softmax over one long row (its row fusion declined)."""
from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import check, compile_src

from hlo.backends.cuda.kernels import SPLIT_MIN_ELEMENTS

RNG = np.random.default_rng(0)


def full_reduce(et, n, m, op="add", init="0", dims="[0, 1]", out="[]"):
    return f"""module @m
func @main(%x: {et}[{n},{m}]) -> ({et}{out}) {{
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%x, %0) {{dimensions = {dims}}} : {et}{out} {{
    ^body(%a: {et}[], %b: {et}[]):
      %c = {op}(%a, %b) : {et}[]
      return(%c)
  }}
  return(%1)
}}
"""


ARGMAX = """module @m
func @main(%x: f32[{shape}]) -> (f32[{out}], s32[{out}]) {{
  %i = iota() {{iota_dimension = 0}} : s32[{shape}]
  %v0 = constant dense<-inf> : f32[]
  %i0 = constant dense<0> : s32[]
  %rv, %ri = reduce(%x, %i, %v0, %i0) {{dimensions = [0]}} : f32[{out}], s32[{out}] {{
    ^body(%a: f32[], %ai: s32[], %b: f32[], %bi: s32[]):
      %gt = compare(%a, %b) {{comparison_direction = "GT"}} : pred[]
      %eq = compare(%a, %b) {{comparison_direction = "EQ"}} : pred[]
      %lt = compare(%ai, %bi) {{comparison_direction = "LT"}} : pred[]
      %tie = and(%eq, %lt) : pred[]
      %take = or(%gt, %tie) : pred[]
      %v = select(%take, %a, %b) : f32[]
      %k = select(%take, %ai, %bi) : s32[]
      return(%v, %k)
  }}
  return(%rv, %ri)
}}
"""


def _parts(prog):
    return [ln for ln in prog.steps_text.splitlines() if "part 1 of 2" in ln or "part 2 of 2" in ln]


def test_a_full_reduction_of_a_big_array_is_two_kernels():
    prog = compile_src(full_reduce("f32", 2048, 2048))
    first, second = _parts(prog)
    assert first.startswith("k_reduce_part") and "slices a result" in first, prog.steps_text
    blocks = int(first.split("<<<(")[1].split(",")[0])
    assert blocks > 100, first  # spread over the multiprocessors, not one block
    assert second.startswith("k_reduce_total"), prog.steps_text


def test_small_or_many_reductions_stay_one_kernel():
    small = compile_src(full_reduce("f32", 16, SPLIT_MIN_ELEMENTS // 32))   # half the threshold
    assert not _parts(small), small.steps_text
    rows = compile_src(full_reduce("f32", 4096, 4096, dims="[1]", out="[4096]"))  # a row each
    assert not _parts(rows), rows.steps_text


@pytest.mark.parametrize("et,op,init,dt", [
    ("f32", "add", "0.0", np.float32), ("f32", "maximum", "-inf", np.float32),
    ("f32", "add", "5.0", np.float32),          # applied once, not once a slice
    ("f64", "add", "0.0", np.float64), ("s32", "add", "3", np.int32),
    ("bf16", "maximum", "-inf", "bfloat16")])   # (a bf16 sum of 500K elements depends on its order)
def test_split_reductions_match_the_interpreter(et, op, init, dt):
    import ml_dtypes
    dtype = np.dtype(ml_dtypes.bfloat16) if dt == "bfloat16" else np.dtype(dt)
    x = (RNG.integers(-50, 50, (1024, 512)) if dtype.kind == "i" else RNG.standard_normal((1024, 512))).astype(dtype)
    prog = compile_src(full_reduce(et, 1024, 512, op=op, init=init))
    assert len(_parts(prog)) == 2, prog.steps_text
    check(full_reduce(et, 1024, 512, op=op, init=init), [x], rtol=1e-5, atol=1e-3)


def test_split_argmax_keeps_the_first_index_of_the_max():
    n = 1 << 20
    x = RNG.standard_normal(n).astype(np.float32)
    x[[1000, 700000]] = 10.0   # a tie: the first index wins
    src = ARGMAX.format(shape=n, out="")
    assert len(_parts(compile_src(src))) == 2
    got = check(src, [x])
    if got is not None:
        assert int(np.asarray(got[1])) == 1000


def test_split_any_over_pred():
    src = """module @m
func @main(%x: f32[2048,64]) -> (pred[]) {
  %z = constant dense<3.0> : f32[]
  %zb = broadcast_in_dim(%z) {broadcast_dimensions = []} : f32[2048,64]
  %p = compare(%x, %zb) {comparison_direction = "GT"} : pred[2048,64]
  %f = constant dense<false> : pred[]
  %r = reduce(%p, %f) {dimensions = [0, 1]} : pred[] {
    ^body(%a: pred[], %b: pred[]):
      %c = or(%a, %b) : pred[]
      return(%c)
  }
  return(%r)
}
"""
    assert len(_parts(compile_src(src))) == 2
    for hit in (False, True):
        x = np.zeros((2048, 64), np.float32)
        if hit:
            x[2000, 5] = 4.0
        check(src, [x])


def test_a_mean_and_a_softmax_over_few_long_rows():
    mean = """module @m
func @main(%x: f32[4,262144]) -> (f32[4]) {
  %0 = constant dense<0.0> : f32[]
  %1 = reduce(%x, %0) {dimensions = [1]} : f32[4] {
    ^body(%a: f32[], %b: f32[]):
      %c = add(%a, %b) : f32[]
      return(%c)
  }
  %n = constant dense<262144.0> : f32[]
  %nb = broadcast_in_dim(%n) {broadcast_dimensions = []} : f32[4]
  %m = divide(%1, %nb) : f32[4]
  return(%m)
}
"""
    assert len(_parts(compile_src(mean))) == 2
    check(mean, [RNG.standard_normal((4, 262144)).astype(np.float32)], rtol=1e-5, atol=1e-6)
    softmax = """module @m
func @main(%x: f32[2,262144]) -> (f32[2,262144]) {
  %0 = constant dense<-inf> : f32[]
  %1 = reduce(%x, %0) {dimensions = [1]} : f32[2] {
    ^body(%a: f32[], %b: f32[]):
      %c = maximum(%a, %b) : f32[]
      return(%c)
  }
  %2 = broadcast_in_dim(%1) {broadcast_dimensions = [0]} : f32[2,262144]
  %3 = subtract(%x, %2) : f32[2,262144]
  %4 = exponential(%3) : f32[2,262144]
  %5 = constant dense<0.0> : f32[]
  %6 = reduce(%4, %5) {dimensions = [1]} : f32[2] {
    ^body(%a2: f32[], %b2: f32[]):
      %c2 = add(%a2, %b2) : f32[]
      return(%c2)
  }
  %7 = broadcast_in_dim(%6) {broadcast_dimensions = [0]} : f32[2,262144]
  %8 = divide(%4, %7) : f32[2,262144]
  return(%8)
}
"""
    prog = compile_src(softmax)
    assert len(_parts(prog)) == 4, prog.steps_text   # two reductions, split each
    check(softmax, [RNG.standard_normal((2, 262144)).astype(np.float32)], rtol=1e-5, atol=1e-9)


COLUMN = """module @m
func @main(%x: {et}[{shape}]) -> ({et}[{out}]) {{
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%x, %0) {{dimensions = {dims}}} : {et}[{out}] {{
    ^body(%a: {et}[], %b: {et}[]):
      %c = {op}(%a, %b) : {et}[]
      return(%c)
  }}
  return(%1)
}}
"""


@pytest.mark.parametrize("shape,dims,out,op,init", [
    ((65536, 64), "[0]", "64", "add", "0.0"), ((1 << 18, 8), "[0]", "8", "maximum", "-inf"),
    ((4096, 4096), "[0]", "4096", "add", "2.0"), ((512, 64, 16), "[0, 1]", "16", "add", "0.0")])
def test_split_column_reductions_match_the_interpreter(shape, dims, out, op, init):
    src = COLUMN.format(et="f32", shape=",".join(map(str, shape)), dims=dims, out=out, op=op, init=init)
    prog = compile_src(src)
    first, second = _parts(prog)
    assert first.startswith("k_column_part") and second.startswith("k_reduce_total"), prog.steps_text
    check(src, [RNG.standard_normal(shape).astype(np.float32)], rtol=1e-5, atol=1e-4)


def test_a_small_column_reduction_stays_one_kernel():
    src = COLUMN.format(et="f32", shape="128,512", dims="[0]", out="512", op="add", init="0.0")
    prog = compile_src(src)
    assert not _parts(prog) and "k_column_reduce" in prog.steps_text, prog.steps_text


def test_split_column_argmax_matches_the_interpreter():
    src = ARGMAX.format(shape="65536,16", out="16")
    first, _ = _parts(compile_src(src))
    assert first.startswith("k_column_part")
    x = RNG.standard_normal((65536, 16)).astype(np.float32)
    x[[70, 60000], 3] = 9.0   # a tie in column 3: the first row wins
    got = check(src, [x])
    if got is not None:
        assert int(np.asarray(got[1])[3]) == 70
