"""The CPU backend at both x86 vector widths: the generated GEMM and the elementwise kernels
compiled for this machine and for an AVX2-only CPU (Haswell, 256-bit vectors; LLVM emits it
here and this machine runs it), and the ``.hlox`` CPU-feature check refusing AVX-512 code on an
AVX2-only machine (the host's features faked with ``standing_in``)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_helpers import binary_src, check, compile_text, unary_src
from test_cpu_fusion import LAYERNORM, SOFTMAX

from hlo.runtime.cpu import target as T

# An AVX2-only x86-64 CPU: Haswell's features, none of AVX-512's.
AVX2_FEATURES = ("+64bit,+cmov,+cx8,+fxsr,+mmx,+sahf,+sse,+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+avx,+avx2,+fma,+f16c,"
                 "+bmi,+bmi2,+lzcnt,+movbe,+xsave,+fsgsbase,+rdrnd")


# A Sapphire Rapids-like AVX-512 CPU (what LLVM tunes to prefer 256-bit vectors).
AVX512_FEATURES = AVX2_FEATURES + ",+avx512f,+avx512dq,+avx512cd,+avx512bw,+avx512vl,+avx512bf16,+amx-tile"


def _avx2():
    return T.CpuTarget(T.host().triple, "haswell", AVX2_FEATURES)


def _avx512():
    return T.CpuTarget(T.host().triple, "sapphirerapids", AVX512_FEATURES)


def _plus(t):
    return {f[1:] for f in t.features.split(",") if f.startswith("+")}


def _targets():
    h = T.host()
    out = [pytest.param("host", id=f"host-{h.vector_bits}bit")]
    if not h.triple.startswith("x86_64"):
        return out
    runs_avx2 = {"avx2", "fma"} <= _plus(h)
    out.append(pytest.param("avx2", id="avx2-256bit", marks=pytest.mark.skipif(
        not runs_avx2, reason="this CPU cannot run AVX2 code")))
    return out


def _gemm_src(m, k, n, bt=False, batch=1, relu=False):
    bpre = [batch] if batch > 1 else []
    ash, bsh = bpre + [m, k], bpre + ([n, k] if bt else [k, n])
    t = lambda s: f"f32[{','.join(map(str, s))}]"
    out = t(bpre + [m, n])
    nb = len(bpre)
    dims = ("lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], " if batch > 1 else "")
    dims += f"lhs_contracting_dimensions = [{nb + 1}], rhs_contracting_dimensions = [{nb + (1 if bt else 0)}]"
    body = [f"  %0 = dot_general(%a, %b) {{{dims}}} : {out}"]
    res = "%0"
    if relu:
        body += ["  %z = constant dense<0.0> : f32[]",
                 f"  %zb = broadcast_in_dim(%z) {{broadcast_dimensions = []}} : {out}",
                 f"  %1 = maximum(%0, %zb) : {out}"]
        res = "%1"
    return (f"module @m\n\nfunc @main(%a: {t(ash)}, %b: {t(bsh)}) -> ({out}) {{\n" + "\n".join(body)
            + f"\n  return({res})\n}}\n"), ash, bsh


def _cores_ir(exe) -> str:
    """The LLVM IR of the GEMM's library code that ``exe`` calls (its tiles are there)."""
    from hlo.backends.cpu.gemm_library import core_ir
    return "".join(core_ir(c["symbol"]) for c in exe.manifest.get("cores", []))


@pytest.mark.parametrize("which", _targets())
@pytest.mark.parametrize("m,k,n,bt,batch,blocked", [
    (32, 512, 256, False, 1, False),     # linear_relu's product: whole panels
    (13, 1300, 10, False, 1, True),      # a contraction in blocks and a masked column tail only
    (37, 1300, 200, False, 1, True),     # blocked contraction, row tails, panels, a tail panel
    (128, 10, 512, True, 1, False),      # a transposed B (gathered panels), short contraction
    (64, 64, 64, True, 3, False),        # attention's batched heads
    (130, 64, 1030, False, 1, False),    # B's rows a page apart: grouped panels, then a tail
    (130, 1300, 1030, True, 1, True),     # blocked, gathered, grouped... and a tail
    (45, 37, 77, True, 2, False),        # a transposed B: W x W blocks transposed in registers,
    (9, 21, 5, True, 1, False),          # ...the rows left copied one by one, masked columns
])
def test_generated_gemm_at_each_vector_width(monkeypatch, which, m, k, n, bt, batch, blocked):
    """The register tile, blocking and masked column tail follow the target's vector width;
    results match numpy (float64) at both widths, on 1 and 2 threads. ``blocked``: the
    contraction runs in blocks whose panel fits in L1 (forced, whatever this machine's L2)."""
    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.gemm_tiled import register_tile, vector_lanes
    from hlo.ir.types import f32
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    if blocked:
        monkeypatch.setattr(gt, "PANEL_BLOCK_L2_FRACTION", 0.0)
    src, ash, bsh = _gemm_src(m, k, n, bt, batch, relu=True)
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal(ash).astype(np.float32)
    b = rng.standard_normal(bsh).astype(np.float32)
    bm = np.swapaxes(b, -1, -2) if bt else b
    ref = np.maximum(np.matmul(a.astype(np.float64), bm.astype(np.float64)), 0)
    target = T.host() if which == "host" else _avx2()
    with T.standing_in(target):
        lanes = vector_lanes(f32)
        assert lanes == target.vector_bits // 32
        assert register_tile() == ((6, 4) if lanes == 16 else (6, 2))
        for threads in (1, 2):
            exe = compile_text(src, threads=threads)
            got = exe.run([a, b])[0]
            np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4 * np.sqrt(k))
    # the tiles are in the GEMM's library code, which the program calls
    from hlo.backends.cpu.gemm_library import core_calls
    text = _cores_ir(exe)
    # a transposed B (its rows contiguous) is packed by blocks transposed in registers
    assert ("pt.body" in text) == bt
    widths = {int(w) for w in re.findall(r"call <(\d+) x float> @\"?llvm\.fma\.v", text)}
    assert widths == {lanes}, f"FMA vector widths {widths}, expected <{lanes} x float>"
    # forced, or chosen for a small item (its panel kept in L1: SMALL_ITEM_TILES): later blocks
    # of the contraction add to C (the body's ``acc`` argument known at run time only)
    assert any(not c["acc"].isdigit() for c in core_calls(exe.ir_text)) or not blocked
    assert exe.manifest["target"]["cpu"] == target.cpu


GELU_EPILOGUE = """module @m
func @main(%a: f32[{m},{k}], %b: f32[{k},{n}], %c: f32[{n}]) -> (f32[{m},{n}]) {{
  %0 = fusion(%a, %b, %c) {{kind = "output"}} : f32[{m},{n}] {{
    ^fused(%1: f32[{m},{k}], %2: f32[{k},{n}], %3: f32[{n}]):
      %4 = dot_general(%1, %2) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{m},{n}]
      %5 = broadcast_in_dim(%3) {{broadcast_dimensions = [1]}} : f32[{m},{n}]
      %6 = add(%4, %5) : f32[{m},{n}]
      %h = constant dense<0.5> : f32[]
      %hb = broadcast_in_dim(%h) {{broadcast_dimensions = []}} : f32[{m},{n}]
      %s = constant dense<0.7978845608> : f32[]
      %sb = broadcast_in_dim(%s) {{broadcast_dimensions = []}} : f32[{m},{n}]
      %q = constant dense<0.044715> : f32[]
      %qb = broadcast_in_dim(%q) {{broadcast_dimensions = []}} : f32[{m},{n}]
      %one = constant dense<1.0> : f32[]
      %ob = broadcast_in_dim(%one) {{broadcast_dimensions = []}} : f32[{m},{n}]
      %x2 = multiply(%6, %6) : f32[{m},{n}]
      %x3 = multiply(%x2, %6) : f32[{m},{n}]
      %t0 = multiply(%qb, %x3) : f32[{m},{n}]
      %t1 = add(%6, %t0) : f32[{m},{n}]
      %t2 = multiply(%sb, %t1) : f32[{m},{n}]
      %t3 = tanh(%t2) : f32[{m},{n}]
      %t4 = add(%ob, %t3) : f32[{m},{n}]
      %t5 = multiply(%hb, %6) : f32[{m},{n}]
      %7 = multiply(%t5, %t4) : f32[{m},{n}]
      return(%7)
  }}
  return(%0)
}}
"""


@pytest.mark.parametrize("which", _targets())
@pytest.mark.parametrize("m,k,n,chunks", [
    (37, 70, 131, False),     # row tails, whole panels and a masked column tail under the epilogue
    (301, 40, 45, True),      # several chunks of rows (forced), narrow columns
    (7, 5, 3, False),         # less than one vector of columns
])
def test_math_epilogue_at_each_vector_width(monkeypatch, which, m, k, n, chunks):
    """A product whose output fusion computes tanh-GELU of the product plus a bias: the
    epilogue, run on each chunk of C inside the GEMM kernel, is vectorized at the widest
    vectors (the kernel prefers 512-bit vectors on an AVX-512 target, as elementwise kernels
    with a math routine do; LLVM's choice on AVX2) and matches numpy (float64) on 1 and 2
    threads, across the chunks of rows it runs on."""
    import hlo.backends.cpu.gemm_tiled as gt
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    if chunks:
        monkeypatch.setattr(gt, "L2_FRACTION", 2e-3)   # chunks of a few row tiles
    src = GELU_EPILOGUE.format(m=m, k=k, n=n)
    rng = np.random.default_rng(m + 13 * n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    z = a.astype(np.float64) @ b.astype(np.float64) + c
    ref = 0.5 * z * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3)))
    target = T.host() if which == "host" else _avx2()
    with T.standing_in(target):
        for threads in (1, 2):
            exe = compile_text(src, threads=threads)
            assert len(exe.kernels) == 1   # the epilogue runs inside the GEMM kernel
            np.testing.assert_allclose(exe.run([a, b, c])[0], ref, rtol=1e-5, atol=1e-5)
    wide = '"prefer-vector-width"="512"' in exe.ir_text
    assert wide == (target.vector_bits == 512)


def test_row_chunks_have_equal_heights(monkeypatch):
    """A block's rows run in chunks of (nearly) equal height, whole register tiles each, rather
    than full chunks and a sliver: 1024 rows with room for 510 per chunk run as 342 + 342 +
    340, not 510 + 510 + 4."""
    import hlo.backends.cpu.gemm_tiled as gt
    monkeypatch.setattr(gt, "cache_bytes", lambda level, default: {1: 48 << 10, 2: 2 << 20}[level])
    assert gt.chunk_rows(6, 512, 512, 1, 4) == 510
    assert gt.chunk_rows(6, 512, 512, 1, 4, rows=1024) == 342
    assert gt.chunk_rows(6, 512, 512, 1, 4, rows=500) == 510     # one chunk: unchanged
    for rows in range(511, 5000, 7):
        mc = gt.chunk_rows(6, 512, 512, 1, 4, rows=rows)
        n = -(-rows // mc)
        assert mc % 6 == 0 and mc <= 510 and n == -(-rows // 510)   # no more chunks than before
        assert rows - (n - 1) * mc >= mc - 6 * n   # the last chunk nearly as tall as the others


def test_avx512_code_is_refused_on_an_avx2_only_machine(tmp_path):
    """A ``.hlox`` compiled with AVX-512 code is refused, before linking, on a machine with AVX2
    only, with a LoadError naming what is missing; AVX2 code loads on both. On an AVX-512
    machine the AVX2 machine is faked; on an AVX2 one the file is compiled standing in for an
    AVX-512 CPU (LLVM emits it; nothing runs it) and this machine refuses it."""
    import hlo.numpy as hnp
    from hlo import aot
    from hlo.runtime import hlox
    from hlo.runtime.cpu.thread_pool import pool_address
    h = T.host()
    if not h.triple.startswith("x86_64") or not {"avx2", "fma"} <= _plus(h):
        pytest.skip("not an x86-64 CPU with AVX2")
    native = "avx512f" in _plus(h)
    wide, narrow = (h, _avx2()) if native else (_avx512(), h)
    x = np.arange(64 * 48, dtype=np.float32).reshape(64, 48) / 100
    w = np.ones((48, 40), np.float32)
    f = lambda x, w: hnp.tanh(x @ w)
    pool_address()  # the process's worker pool, compiled for this machine (not a stand-in)
    path = tmp_path / "avx512.hlox"
    with T.standing_in(wide):
        aot.compile(f, x, w, target="cpu").save(path)
    with T.standing_in(narrow):
        with pytest.raises(hlox.LoadError, match=re.escape(
                f"512-bit vectors) with features this one ({narrow.cpu}, 256-bit vectors) lacks: avx512f, ")):
            aot.load(path)
        path2 = tmp_path / "avx2.hlox"
        aot.compile(f, x, w, target="cpu").save(path2)
    np.testing.assert_allclose(aot.load(path2)(x, w), np.tanh(x @ w), rtol=1e-5, atol=1e-5)
    if native:
        np.testing.assert_allclose(aot.load(path)(x, w), np.tanh(x @ w), rtol=1e-5, atol=1e-5)
    else:
        with pytest.raises(hlox.LoadError, match="lacks: avx512f, "):
            aot.load(path)


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# (source, inputs, whether its kernels go through a math routine)
_KERNELS = {
    "tanh": (unary_src("tanh", "f32[70,33]"), [_f32(70, 33)], True),
    "softmax": (SOFTMAX.format(n=6, m=300), [_f32(6, 300)], True),
    "divide": (binary_src("divide", "f32[70,33]"), [_f32(70, 33), _f32(70, 33, seed=1) + 4], False),
    "layernorm": (LAYERNORM.format(n=9, m=130, inv=1.0 / 130), [_f32(9, 130) + 3, _f32(130), _f32(130)], False),
}


@pytest.mark.parametrize("which", _targets())
@pytest.mark.parametrize("kernel", list(_KERNELS))
def test_math_routine_kernels_ask_for_the_widest_vectors(which, kernel):
    """On an AVX-512 CPU a kernel whose elements go through a math routine (exp, tanh: long
    polynomial chains that keep the vector ALUs busy) asks LLVM for 512-bit vectors (LLVM tunes
    Intel's AVX-512 CPUs to prefer 256 bits) and gets them; one bound by memory or the divider
    (a division, layernorm) keeps LLVM's choice, as does every kernel on an AVX2 CPU. Results
    match the interpreter at each width, on 1 and 2 threads."""
    from hlo.backends.cpu.llvm_pipeline import compile_ir
    src, args, heavy = _KERNELS[kernel]
    target = T.host() if which == "host" else _avx2()
    wide = heavy and target.vector_bits > 256
    with T.standing_in(target):
        exe = compile_text(src)
        kernels = [line for line in exe.ir_text.splitlines()
                   if line.startswith("define") and '@"k.' in line and '.task"' not in line]
        assert kernels
        for line in kernels:
            assert ('"prefer-vector-width"' in line) == wide, line
        if wide:
            _, mod, _ = compile_ir(exe.ir_text)
            assert f"<{target.vector_bits // 32} x float>" in str(mod)
        for threads in (1, 2):
            check(src, args, rtol=2e-6, atol=1e-6, threads=threads)


def test_an_avx2_cpu_refuses_code_built_for_avx512():
    """The feature check by itself, on any machine: code built for an AVX-512 CPU is refused by
    an AVX2-only one with a LoadError (TargetMismatchError) that names avx512f first; code built
    for the AVX2 CPU is accepted by the AVX-512 one (it has every feature the code needs)."""
    from hlo.runtime import hlox
    with pytest.raises(hlox.LoadError, match=r"^the file was compiled for a CPU \(sapphirerapids, 512-bit "
                       r"vectors\) with features this one \(haswell, 256-bit vectors\) lacks: avx512f, "
                       r".*; compile it again here$") as e:
        _avx2().check_loadable(_avx512().manifest_entry(), "the file")
    assert isinstance(e.value, hlox.TargetMismatchError)
    _avx512().check_loadable(_avx2().manifest_entry(), "the file")
    _avx2().check_loadable(_avx2().manifest_entry(), "the file")


@pytest.mark.parametrize("which", _targets())
@pytest.mark.parametrize("blocked", [False, True])
def test_narrow_panels_at_each_vector_width(monkeypatch, which, blocked):
    """Panels narrower than the register tile run taller tiles (``tile_rows``) and read a B
    no wider than a panel in place; a narrow product whose A has contiguous rows (A^T in
    memory: the train step's h^T @ dlogits; or copied so, a fused ReLU of it) is computed as
    C^T = B^T A^T, C written by scattered columns, its fused epilogue (ReLU, + bias) applied per
    transposed block. Next to
    them a product whose column tail is packed (B's rows past a panel: both kinds of tail in
    one shared body); row counts that leave every kind of row tail; 1 and 2 threads;
    ``blocked``: contractions in blocks, each after the first adding to C (gathered for C^T)."""
    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.gemm_library import core_calls
    from hlo.backends.cpu.gemm_tiled import register_tile, tile_rows
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    if blocked:
        monkeypatch.setattr(gt, "PANEL_BLOCK_L2_FRACTION", 0.0)
    k1 = 1300 if blocked else 128
    src = f"""module @m

func @main(%h: f32[{k1},77], %d: f32[{k1},10], %w: f32[77,10], %x: f32[53,40], %v: f32[40,150], %c: f32[10]) -> (f32[77,10], f32[128,10], f32[53,150], f32[77,10]) {{
  %0 = fusion(%h, %d, %c) {{kind = "output"}} : f32[77,10] {{
    ^fused(%p0: f32[{k1},77], %p1: f32[{k1},10], %p2: f32[10]):
      %t = dot_general(%p0, %p1) {{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}} : f32[77,10]
      %z = constant dense<0.0> : f32[]
      %zb = broadcast_in_dim(%z) {{broadcast_dimensions = []}} : f32[77,10]
      %r = maximum(%t, %zb) : f32[77,10]
      %cb = broadcast_in_dim(%p2) {{broadcast_dimensions = [1]}} : f32[77,10]
      %y = add(%r, %cb) : f32[77,10]
      return(%y)
  }}
  %1 = fusion(%h, %w) {{kind = "output"}} : f32[128,10] {{
    ^fused(%q0: f32[{k1},77], %q1: f32[77,10]):
      %hs = slice(%q0) {{start_indices = [0, 0], limit_indices = [128, 77], strides = [1, 1]}} : f32[128,77]
      %z1 = constant dense<0.0> : f32[]
      %zb1 = broadcast_in_dim(%z1) {{broadcast_dimensions = []}} : f32[128,77]
      %hr = maximum(%hs, %zb1) : f32[128,77]
      %u = dot_general(%hr, %q1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[128,10]
      return(%u)
  }}
  %2 = dot_general(%x, %v) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[53,150]
  %3 = fusion(%h, %d) {{kind = "output"}} : f32[77,10] {{
    ^fused(%s0: f32[{k1},77], %s1: f32[{k1},10]):
      %ht = transpose(%s0) {{permutation = [1, 0]}} : f32[77,{k1}]
      %z3 = constant dense<0.0> : f32[]
      %zb3 = broadcast_in_dim(%z3) {{broadcast_dimensions = []}} : f32[77,{k1}]
      %hr3 = maximum(%ht, %zb3) : f32[77,{k1}]
      %e = dot_general(%hr3, %s1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[77,10]
      return(%e)
  }}
  return(%0, %1, %2, %3)
}}
"""
    rng = np.random.default_rng(11)
    shapes = ((k1, 77), (k1, 10), (77, 10), (53, 40), (40, 150), (10,))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    h, d, w, x, v, c = [a.astype(np.float64) for a in args]
    refs = [np.maximum(h.T @ d, 0) + c, np.maximum(h[:128], 0) @ w, x @ v, np.maximum(h.T, 0) @ d]
    target = T.host() if which == "host" else _avx2()
    with T.standing_in(target):
        MR, NV = register_tile()
        assert tile_rows(NV) == MR and tile_rows(1) > MR
        for threads in (1, 2):
            exe = compile_text(src, threads=threads)
            for got, ref in zip(exe.run(args), refs):
                np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k1))
            # the narrow products whose A has its rows contiguous run transposed: h^T read in
            # place, relu(h^T) copied as A^T (reading h's rows as they lie); relu(h[:128]),
            # row-major, is copied as it lies (a transposing copy cost more than it saved)
            steps = exe.steps_text.splitlines()
            transposed = [l for l in steps if "as C^T = B^T A^T" in l]
            assert len(transposed) == 2 and "scatter" in _cores_ir(exe)
            assert not any("[1x128x77]" in l for l in transposed)
            copies = [l for l in steps if "for dot operand" in l]
            assert sorted(c.split("canonical ")[1].split(" ")[0] for c in copies) == \
                sorted(["f32[1,128,77]", f"f32[1,{k1},77]"]), copies
            assert any(not c["acc"].isdigit() for c in core_calls(exe.ir_text)) or not blocked


@pytest.mark.parametrize("m,k,n,ta,tb,out,blocked", [
    (13, 9, 37, False, False, "f32", False),     # odd contraction: a last single k
    (6, 33, 16, False, True, "bf16", False),     # B transposed (a copy), a bf16 result
    (25, 2, 3, True, False, "f32", False),       # A transposed (a copy), a narrow column tail
    (130, 1301, 200, False, False, "f32", True),  # blocked contraction (whole pairs per block)
    (64, 70, 1030, False, False, "bf16", False),  # B's rows a page apart, tails
])
def test_bf16_products_in_pairs(monkeypatch, m, k, n, ta, tb, out, blocked):
    """bf16 x bf16 on vdpbf16ps (``dot.bf16_pairs``: a CPU with AVX-512 BF16 where it pays;
    stood in for here when this machine has the feature) against float64 numpy, with a fused
    ReLU; the same program for a CPU without the pairs widens to f32 and agrees."""
    import ml_dtypes

    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.dot import bf16_pairs
    h = T.host()
    if not (h.vector_bits == 512 and h.has("avx512bf16")):
        pytest.skip("this CPU has no AVX-512 BF16")
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    if blocked:
        monkeypatch.setattr(gt, "PANEL_BLOCK_L2_FRACTION", 0.0)
    ash, bsh = ([k, m] if ta else [m, k]), ([n, k] if tb else [k, n])
    src = f"""module @m

func @main(%a: bf16[{ash[0]},{ash[1]}], %b: bf16[{bsh[0]},{bsh[1]}]) -> ({out}[{m},{n}]) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [{0 if ta else 1}], rhs_contracting_dimensions = [{1 if tb else 0}]}} : {out}[{m},{n}]
  %z = constant dense<0.0> : {out}[]
  %zb = broadcast_in_dim(%z) {{broadcast_dimensions = []}} : {out}[{m},{n}]
  %1 = maximum(%0, %zb) : {out}[{m},{n}]
  return(%1)
}}
"""
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal(ash).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(bsh).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.maximum((a64.T if ta else a64) @ (b64.T if tb else b64), 0)
    # products of bf16 are exact in f32; the sum's f32 rounding and a bf16 result's rounding
    tol = (2 ** -7 if out == "bf16" else 1e-5) * np.sqrt(k) * np.abs(ref).max()
    results = {}
    for cpu in ("znver4", "other"):
        with T.standing_in(T.CpuTarget(h.triple, cpu if cpu == "znver4" else h.cpu, h.features)):
            assert bf16_pairs() == (cpu == "znver4" or h.cpu.startswith("znver"))
            for threads in (1, 2):
                exe = compile_text(src, threads=threads)
                got = exe.run([a, b])[0]
                assert got.dtype == (np.float32 if out == "f32" else ml_dtypes.bfloat16)
                np.testing.assert_allclose(got.astype(np.float64), ref, rtol=0, atol=tol)
            assert ("dpbf16ps" in _cores_ir(exe)) == bf16_pairs()
            results[cpu] = got.astype(np.float64)
    np.testing.assert_allclose(results["znver4"], results["other"], rtol=0, atol=tol)
