"""The row kernel's next-row carry (backends/cpu/kernels.py ``_NextRowCarry``): softmax's row max
for row r+1 is taken inside row r's exp-sum loop. Results must be bit-identical to the kernel
without the carry and match the interpreter, including rows whose max is a zero (the sign is
recomputed exactly), NaN and infinite rows, thread-chunk boundaries (a chunk's first row runs
the ordinary max pass) and several row dimensions."""
import re

import numpy as np
import pytest
from cpu_helpers import check, compile_text
from test_cpu_fusion import SOFTMAX

import hlo
import hlo.backends.cpu.kernels as K

rng = np.random.default_rng(97)

# softmax plus its row max as a second output: the carried max itself is observable
SOFTMAX_AND_MAX = """module @m
func @main(%arg0: f32[{n},{m}]) -> (f32[{n},{m}], f32[{n}]) {{
  %0, %1 = fusion(%arg0) {{kind = "input"}} : f32[{n},{m}], f32[{n}] {{
    ^fused(%2: f32[{n},{m}]):
      %3 = constant dense<-inf> : f32[]
      %4 = reduce(%2, %3) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%5: f32[], %6: f32[]):
          %7 = maximum(%5, %6) : f32[]
          return(%7)
      }}
      %8 = broadcast_in_dim(%4) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %9 = subtract(%2, %8) : f32[{n},{m}]
      %10 = exponential(%9) : f32[{n},{m}]
      %11 = constant dense<0.0> : f32[]
      %12 = reduce(%10, %11) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%13: f32[], %14: f32[]):
          %15 = add(%13, %14) : f32[]
          return(%15)
      }}
      %16 = broadcast_in_dim(%12) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %17 = divide(%10, %16) : f32[{n},{m}]
      return(%17, %4)
  }}
  return(%0, %1)
}}
"""


def _without_carry(fn):
    saved = K.CARRY_NEXT_ROW
    K.CARRY_NEXT_ROW = False
    try:
        return fn()
    finally:
        K.CARRY_NEXT_ROW = saved


def _maximum_calls(text: str) -> int:
    return len(re.findall(r"call [^\n]*@\"?llvm\.maximum", text))


def _special_rows(n, m):
    x = (rng.standard_normal((n, m)) * 4).astype(np.float32)
    if n > 6:
        x[1] = -np.abs(x[1])
        x[1, m // 2] = 0.0           # max +0
        x[2] = -np.abs(x[2]) - 1
        x[2, 0] = -0.0               # max -0 (the sign must survive the carry)
        x[3, m - 1] = np.nan
        x[4, :] = -np.inf            # exp(nan) rows
        x[5, 0] = np.inf
        x[6] = 0.0
        x[6, -1] = -0.0
    return x


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("n,m", [(1, 8), (2, 3), (9, 1), (9, 33), (12, 300), (64, 2048)])
def test_carried_max_is_bit_identical(n, m):
    src = SOFTMAX_AND_MAX.format(n=n, m=m)
    exe = compile_text(src)
    plain = _without_carry(lambda: compile_text(src))
    if n > 1 and m > 1:
        # the carried max adds one maximum in the exp-sum loop
        assert _maximum_calls(exe.ir_text) > _maximum_calls(plain.ir_text)
    x = _special_rows(n, m)
    got = exe.run([x])
    ref = plain.run([x])
    for g, r in zip(got, ref):
        assert _same_bits(g, r)
    check(src, [x], rtol=3e-6, atol=1e-30)


def test_zero_max_sign_matches_the_interpreter():
    n, m = 10, 64
    x = -np.abs(rng.standard_normal((n, m))).astype(np.float32) - 1
    x[3, 5] = -0.0   # rows 3..5 in the middle of a chunk: carried, then recomputed exactly
    x[4, 7] = 0.0
    x[4, 9] = -0.0
    x[5, :] = -0.0
    got = compile_text(SOFTMAX_AND_MAX.format(n=n, m=m)).run([x])[1]
    want = np.array([np.max(r) if not np.all(r == 0) else r[0] for r in x], np.float32)
    want[4] = 0.0
    assert _same_bits(got, want)


@pytest.mark.parametrize("n,m", [(1, 64), (2, 5), (16, 512), (64, 2048)])
def test_softmax_without_second_output_uses_the_carry(n, m):
    src = SOFTMAX.format(n=n, m=m)
    exe = compile_text(src)
    plain = _without_carry(lambda: compile_text(src))
    if n > 1:
        assert _maximum_calls(exe.ir_text) > _maximum_calls(plain.ir_text)
    x = _special_rows(n, m)
    assert _same_bits(exe.run([x])[0], plain.run([x])[0])
    check(src, [x], rtol=3e-6, atol=1e-30)


def test_carry_with_a_donated_input():
    x = (rng.standard_normal((40, 1024)) * 3).astype(np.float32)
    want = np.asarray(hlo.jit(lambda v: hlo.nn.softmax(v, axis=-1) + 0.0)(x))
    f = hlo.jit(lambda v: hlo.nn.softmax(v, axis=-1), donate_argnums=0)
    got = np.asarray(f(x.copy()))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


def test_min_reduction_and_rank3_softmax_through_jit():
    import hlo.numpy as hnp

    def f(x):
        m = hnp.min(x, axis=-1, keepdims=True)
        e = hnp.exp(m - x)
        return e / hnp.sum(e, axis=-1, keepdims=True)

    x = (rng.standard_normal((3, 5, 300)) * 3).astype(np.float32)
    x[1, 2, 7] = np.nan
    for fn in (f, lambda v: hlo.nn.softmax(v, axis=-1)):
        got = np.asarray(hlo.jit(fn)(x))
        ref = _without_carry(lambda: np.asarray(hlo.jit(lambda v: fn(v) * 1.0)(x)))
        assert _same_bits(got, ref)
    x64 = x.astype(np.float64)
    want = np.exp(x64 - x64.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    got = np.asarray(hlo.jit(lambda v: hlo.nn.softmax(v, axis=-1))(x))
    ok = ~np.isnan(want)
    assert np.array_equal(np.isnan(got), ~ok)
    np.testing.assert_allclose(got[ok], want[ok], rtol=3e-6, atol=1e-30)
