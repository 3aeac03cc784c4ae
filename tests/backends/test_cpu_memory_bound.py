"""The CPU backend's speed machinery for memory-bound kernels, checked for correctness: the
vectorizer's interleave hints, vectorized (reassociated) row reductions against numpy in float64,
the per-row cache of an expensive reduce input (softmax's exp), and non-temporal stores for large
outputs (including the plain fallback for a misaligned output)."""
import ctypes
import re

import numpy as np
import pytest
from cpu_helpers import check, compile_text
from test_cpu_fusion import LAYERNORM, SOFTMAX

rng = np.random.default_rng(23)

EXP_MAGIC = "0x4168001fc0000000"  # 1.5 * 2**23 + 254 as LLVM prints it: two per inlined f32 exp


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _kernel_text(ir_text: str, name_prefix: str) -> str:
    """The LLVM text of the first function whose name starts with ``name_prefix``."""
    m = re.search(r'define [^\n]*@"?' + re.escape(name_prefix) + r'[^\n]*\n(.*?)\n}', ir_text, re.S)
    assert m, f"no function {name_prefix}"
    return m.group(1)


# ------------------------------------------------------------------------------------------
# Interleave hints
# ------------------------------------------------------------------------------------------

def test_long_elementwise_chain_gets_interleave_hint_and_stays_exact():
    src = """module @m
func @main(%arg0: f32[37,101]) -> (f32[37,101]) {
  %0 = fusion(%arg0) {kind = "loop"} : f32[37,101] {
    ^fused(%1: f32[37,101]):
      %2 = exponential(%1) : f32[37,101]
      %3 = tanh(%2) : f32[37,101]
      %4 = abs(%3) : f32[37,101]
      %5 = constant dense<1.0> : f32[37,101]
      %6 = add(%4, %5) : f32[37,101]
      %7 = divide(%3, %6) : f32[37,101]
      return(%7)
  }
  return(%0)
}
"""
    exe = compile_text(src)
    # exp and tanh weigh 4 ops each (serial polynomial chains): 11 in all, a long chain -> 8
    assert 'llvm.loop.interleave.count", i32 8' in exe.ir_text
    x = f32(37, 101) * 4
    x[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    check(src, [x], rtol=4e-6, atol=1e-7)


@pytest.mark.parametrize("op,copies", [("exponential", 4), ("tanh", 4), ("logistic", 8)])
def test_lone_transcendental_is_interleaved(op, copies):
    """One exp/tanh is a ~20-instruction serial chain: it gets independent copies in flight."""
    src = f"""module @m
func @main(%arg0: f32[64,128]) -> (f32[64,128]) {{
  %0 = {op}(%arg0) : f32[64,128]
  return(%0)
}}
"""
    exe = compile_text(src)
    assert f'llvm.loop.interleave.count", i32 {copies}' in exe.ir_text
    x = f32(64, 128) * 8
    x[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    check(src, [x], rtol=4e-6, atol=1e-30)


def test_short_loop_keeps_llvm_choice():
    src = """module @m
func @main(%arg0: f32[8,64]) -> (f32[8,64]) {
  %0 = negate(%arg0) : f32[8,64]
  return(%0)
}
"""
    assert "interleave.count" not in compile_text(src).ir_text


# ------------------------------------------------------------------------------------------
# Vectorized row reductions
# ------------------------------------------------------------------------------------------

ROW_SUM = """module @m
func @main(%arg0: {t}[{n},{m}]) -> ({t}[{n}], {t}[{n},{m}]) {{
  %0, %1 = fusion(%arg0) {{kind = "input"}} : {t}[{n}], {t}[{n},{m}] {{
    ^fused(%2: {t}[{n},{m}]):
      %3 = constant dense<{zero}> : {t}[]
      %4 = reduce(%2, %3) {{dimensions = [1]}} : {t}[{n}] {{
        ^body(%5: {t}[], %6: {t}[]):
          %7 = add(%5, %6) : {t}[]
          return(%7)
      }}
      %8 = broadcast_in_dim(%4) {{broadcast_dimensions = [0]}} : {t}[{n},{m}]
      %9 = subtract(%2, %8) : {t}[{n},{m}]
      return(%4, %9)
  }}
  return(%0, %1)
}}
"""


@pytest.mark.parametrize("m", [1, 7, 8, 9, 31, 33, 257, 4099])
def test_row_sum_accuracy_against_float64(m):
    n = 5
    x = f32(n, m)
    x[1] *= 1e6  # wide magnitudes
    x[2, ::2] = 1e7  # large terms that cancel
    x[2, 1::2] = -1e7
    x[3] = np.float32(0.1)  # many equal small terms
    exe = compile_text(ROW_SUM.format(t="f32", n=n, m=m, zero="0.0"))
    assert "row-fused" in exe.steps_text
    s, d = exe.run([x])
    x64 = x.astype(np.float64)
    ref = x64.sum(axis=1)
    # any summation order: |error| <= (m - 1) * eps * sum|x|; a lost or doubled element is far off
    bound = max(m - 1, 1) * np.finfo(np.float32).eps * np.abs(x64).sum(axis=1) + 1e-30
    assert (np.abs(s.astype(np.float64) - ref) <= bound).all(), (s, ref)
    np.testing.assert_array_equal(d, (x - s[:, None]).astype(np.float32))


def test_row_sum_nan_and_inf_propagate():
    n, m = 4, 67
    x = f32(n, m)
    x[0, 13] = np.nan
    x[1, 66] = np.inf
    x[2, 0] = np.inf
    x[2, 5] = -np.inf
    s, _ = compile_text(ROW_SUM.format(t="f32", n=n, m=m, zero="0.0")).run([x])
    assert np.isnan(s[0]) and s[1] == np.inf and np.isnan(s[2]) and np.isfinite(s[3])


@pytest.mark.parametrize("m", [1, 9, 1000])
def test_integer_row_sum_wraps_like_the_interpreter(m):
    x = rng.integers(2**31 - 1000, 2**31 - 1, size=(3, m)).astype(np.int32)
    x[1] = -x[1]
    check(ROW_SUM.format(t="s32", n=3, m=m, zero="0"), [x])


@pytest.mark.parametrize("n,m", [(0, 5), (3, 0), (1, 1), (0, 0)])
def test_row_reductions_of_empty_and_single_sizes(n, m):
    check(ROW_SUM.format(t="f32", n=n, m=m, zero="0.0"), [f32(n, m)])
    check(SOFTMAX.format(n=n, m=m), [f32(n, m)], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------------
# The per-row cache of an expensive reduce input
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 8, 13, 300, 4096])
def test_softmax_computes_exp_once_per_element(m):
    src = SOFTMAX.format(n=6, m=m)
    exe = compile_text(src)
    body = _kernel_text(exe.ir_text, "k.")
    assert body.count(EXP_MAGIC) == 2  # one exp (the output pass reads the row cache)
    x = f32(6, m) * 5
    check(src, [x], rtol=2e-6, atol=1e-9)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(exe.run([x])[0], ref, rtol=3e-6, atol=1e-12)


def test_softmax_adversarial_rows():
    n, m = 6, 67
    x = f32(n, m) * 30
    x[0, 3] = np.nan  # a NaN row
    x[1, :] = -np.inf  # exp(-inf - -inf) = NaN everywhere, as the interpreter and numpy say
    x[2, 10] = np.inf  # inf - inf = NaN at that element, exp(-inf) = 0 elsewhere
    x[3, :] = -1e30  # huge but finite: uniform
    x[4, 5] = 80.0  # one dominant element: the others underflow towards subnormals
    x[4, :5] = -30.0
    got = check(SOFTMAX.format(n=n, m=m), [x], rtol=2e-6, atol=1e-30)[0]
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()
    np.testing.assert_allclose(got[3], np.full(m, 1.0 / m, np.float32), rtol=1e-6)


ROW_READ_ELSEWHERE = """module @m
func @main(%arg0: f32[{n},{m}]) -> (f32[{n},{m}]) {{
  %0 = fusion(%arg0) {{kind = "input"}} : f32[{n},{m}] {{
    ^fused(%1: f32[{n},{m}]):
      %2 = exponential(%1) : f32[{n},{m}]
      %3 = constant dense<0.0> : f32[]
      %4 = reduce(%2, %3) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%5: f32[], %6: f32[]):
          %7 = add(%5, %6) : f32[]
          return(%7)
      }}
      %8 = broadcast_in_dim(%4) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %9 = reverse(%2) {{dimensions = [0]}} : f32[{n},{m}]
      %10 = divide(%9, %8) : f32[{n},{m}]
      return(%10)
  }}
  return(%0)
}}
"""


def test_reduce_input_read_at_another_row_is_not_cached():
    src = ROW_READ_ELSEWHERE.format(n=5, m=40)
    exe = compile_text(src)
    if "row-fused" in exe.steps_text:
        assert _kernel_text(exe.ir_text, "k.").count(EXP_MAGIC) == 4  # recomputed, not cached
    check(src, [f32(5, 40)], rtol=2e-6, atol=1e-9)


def test_layernorm_unchanged_by_the_cache_rules():
    n, m = 9, 130
    check(LAYERNORM.format(n=n, m=m, inv=1.0 / m), [f32(n, m) + 3, f32(m), f32(m)],
          rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------
# Non-temporal stores for large outputs
# ------------------------------------------------------------------------------------------

BIG = """module @m
func @main(%arg0: f32[2048,2048]) -> (f32[2048,2048]) {
  %0 = fusion(%arg0) {kind = "loop"} : f32[2048,2048] {
    ^fused(%1: f32[2048,2048]):
      %2 = constant dense<2.0> : f32[2048,2048]
      %3 = multiply(%1, %2) : f32[2048,2048]
      %4 = constant dense<1.0> : f32[2048,2048]
      %5 = add(%3, %4) : f32[2048,2048]
      return(%5)
  }
  return(%0)
}
"""


def test_large_output_uses_streaming_stores():
    from hlo.backends.cpu.llvm_pipeline import compile_ir
    exe = compile_text(BIG)
    _, mod, _ = compile_ir(exe.ir_text)
    text = str(mod)
    assert "!nontemporal" in text and "llvm.x86.sse.sfence" in text
    for line in text.splitlines():
        if "!nontemporal" in line:  # only vector stores LLVM proved aligned to their size
            lanes, align = re.search(r"store <(\d+) x float>.*align (\d+)", line).groups()
            assert int(align) >= 4 * int(lanes)
    x = f32(2048, 2048)
    for threads in (1, 2):
        got = compile_text(BIG, threads=threads).run([x])[0]
        np.testing.assert_array_equal(got, x * np.float32(2) + np.float32(1))


def test_misaligned_output_takes_the_plain_loop():
    exe = compile_text(BIG, threads=2)
    x = f32(2048, 2048)
    raw = np.zeros(2048 * 2048 + 16, np.float32)
    base = (-raw.ctypes.data % 64) // 4 + 1  # 4 bytes past a 64-byte boundary
    out = raw[base:base + 2048 * 2048].reshape(2048, 2048)
    ip = (ctypes.c_void_p * 1)(x.ctypes.data)
    op = (ctypes.c_void_p * 1)(out.ctypes.data)
    arena = exe._take_arena() if exe.manifest["arena_size"] else None
    exe._fn(ip, op, arena, 2)
    np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(1))
    assert raw[base - 1] == 0 and raw[base + 2048 * 2048] == 0  # nothing written outside


def test_unaligned_fallback_stays_scalar_and_the_twin_vectorizes():
    """The plain loop of a streaming kernel runs only for buffers the runtime did not allocate:
    it is kept out of the loop vectorizer and its kernel is not optimized (compile time), the
    ``.stream`` twin is vectorized."""
    from hlo.backends.cpu.llvm_pipeline import compile_ir
    ir_text = compile_text(BIG).ir_text
    _, mod, _ = compile_ir(ir_text)
    fns = dict(re.findall(r'define [^\n]*@"?(k\.[\w.]+)"?\(.*?\n(.*?)\n}', str(mod), re.S))
    plain = [n for n in fns if n.startswith("k.") and not n.endswith((".stream", ".task"))]
    assert plain and all(n + ".stream" in fns for n in plain)
    defines = {m.group(1): m.group(0) for m in re.finditer(r'define [^\n]*@"?(k\.[\w.]+)"?\([^\n]*', ir_text)}
    for n in plain:
        assert "x float>" not in fns[n]
        assert "optnone" in defines[n] and "optnone" not in defines[n + ".stream"]
        # any vector width: the vectorizer picks 4, 8 or 16 lanes (and interleaves) per target
        assert re.search(r"<(4|8|16|32|64) x float>", fns[n + ".stream"])


@pytest.mark.parametrize("native", [True, False])
def test_streaming_outputs_come_aligned_so_the_fallback_does_not_run(native, monkeypatch):
    """Every output the runtime makes at the streaming size comes 64-byte aligned from the
    output pool, through the native entry and the Python path alike: the unoptimized fallback
    of a streaming kernel runs only for buffers made elsewhere."""
    import hlo
    from hlo.backends.cpu.streaming import NT_MIN_BYTES
    monkeypatch.setenv("HLO_NATIVE_CALL", "1" if native else "0")
    monkeypatch.setenv("HLO_CACHE", "0")
    n = NT_MIN_BYTES // 4 // 1024 + 1
    f = hlo.jit(lambda x: (x * 2.0 + 1.0, x - 1.0), target="cpu")
    x = np.ones((n, 1024), np.float32)
    held = []
    for _ in range(3):
        a, b = f(x)
        assert a.nbytes >= NT_MIN_BYTES
        assert a.ctypes.data % 64 == 0 and b.ctypes.data % 64 == 0
        assert float(a[-1, -1]) == 3.0 and float(b[0, 0]) == 0.0
        held.append(a)


def test_small_outputs_do_not_stream():
    src = BIG.replace("2048,2048", "256,256")
    assert "hlo.stream" not in compile_text(src).ir_text


def test_nontemporal_hint_rewrite_only_touches_tagged_aligned_vector_stores():
    from hlo.backends.cpu.streaming import add_nontemporal_hints
    text = """define void @f(ptr %p, <8 x float> %v, float %s) {
  store <8 x float> %v, ptr %p, align 32, !tbaa !3
  store <8 x float> %v, ptr %p, align 4, !tbaa !3
  store <8 x float> %v, ptr %p, align 32
  store float %s, ptr %p, align 32, !tbaa !3
  store <8 x float> %v, ptr %p, align 32, !tbaa !4
  ret void
}
!0 = !{!"hlo tbaa root"}
!1 = !{!"hlo.stream", !0, i64 0}
!2 = !{!"other", !0, i64 0}
!3 = !{!1, !1, i64 0}
!4 = !{!2, !2, i64 0}
"""
    out = add_nontemporal_hints(text)
    lines = [l for l in out.splitlines() if l.strip().startswith("store")]
    assert [("!nontemporal" in l) for l in lines] == [True, False, False, False, False]
    assert re.search(r"^!5 = !\{i32 1\}$", out, re.M)
    assert add_nontemporal_hints(text.replace("align 32, !tbaa !3\n  store <8 x float> %v, ptr %p, align 4", "align 4, !tbaa !3\n  store <8 x float> %v, ptr %p, align 4")) is None
    import llvmlite.binding as llvm

    from hlo.backends.cpu.llvm_pipeline import _init
    _init()
    llvm.parse_assembly(out).verify()
