"""The dot-split-k pass (passes/dot_split_k.py): a product of few rows whose RHS streams from
memory becomes ``parts`` products over ranges of its contraction and their sum -- IR text in,
IR text out, every refusal's reason in the decision log, the rewritten programs against the
originals (interpreter, random shapes), and CPU code against float64 numpy with fusion on and
off, on one thread and two."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pass_testing import assert_ir, rewritten, run_passes

import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes import dot_split_k
from hlo.passes.options import Options
from hlo.passes.pipeline import optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.workloads import WORKLOADS, Case, Ops

ON = {"dot_split_k": 2, "dot_split_k_min_rhs_bytes": 0}


def split(src, options=ON, target="cpu"):
    """The module after dot-split-k, its decision log, and a check that it computes what the
    original does (interpreter, random inputs)."""
    return rewritten(src, ["dot-split-k"], target, options, tol=1e-5)


def dots(text):
    return [op for op in parse_module(text).main.ops if op.name == "dot_general"]


def product(m, k, n, lhs_t=False, rhs_t=False, dtype="f32"):
    lhs = f"{dtype}[{k},{m}]" if lhs_t else f"{dtype}[{m},{k}]"
    rhs = f"{dtype}[{n},{k}]" if rhs_t else f"{dtype}[{k},{n}]"
    return f"""
    func @main(%x: {lhs}, %w: {rhs}, %b: {dtype}[{n}]) -> ({dtype}[{m},{n}]) {{
      %p = dot_general(%x, %w) {{lhs_contracting_dimensions = [{0 if lhs_t else 1}], rhs_contracting_dimensions = [{1 if rhs_t else 0}]}} : {dtype}[{m},{n}]
      %bb = broadcast_in_dim(%b) {{broadcast_dimensions = [1]}} : {dtype}[{m},{n}]
      %y = add(%p, %bb) : {dtype}[{m},{n}]
      return(%y)
    }}
    """


def test_a_few_row_product_becomes_two_half_depth_products_and_their_sum():
    out, log = split(product(4, 512, 8))
    assert_ir(out, """
    func @main(%x: f32[4,512], %w: f32[512,8], %b: f32[8]) -> (f32[4,8]) {
      %xs = reshape(%x) : f32[4,2,256]
      %ws = reshape(%w) : f32[2,256,8]
      %p = dot_general(%xs, %ws) {lhs_batching_dimensions = [1], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]} : f32[2,4,8]
      %p0 = slice(%p) {start_indices = [0, 0, 0], limit_indices = [1, 4, 8], strides = [1, 1, 1]} : f32[1,4,8]
      %q0 = reshape(%p0) : f32[4,8]
      %p1 = slice(%p) {start_indices = [1, 0, 0], limit_indices = [2, 4, 8], strides = [1, 1, 1]} : f32[1,4,8]
      %q1 = reshape(%p1) : f32[4,8]
      %s = add(%q0, %q1) : f32[4,8]
      %bb = broadcast_in_dim(%b) {broadcast_dimensions = [1]} : f32[4,8]
      %y = add(%s, %bb) : f32[4,8]
      return(%y)
    }
    """)
    assert "split %0 dot_general (f32[4,512] x [512,8]) into 2 products of 256 of its 512" in log


LOOP = """
func @main(%h0: f32[4,512], %w: f32[512,512]) -> (s32[], f32[4,512]) {
  %zero = constant dense<0> : s32[]
  %i, %h = while(%zero, %h0) : s32[], f32[4,512] {
    ^cond(%c: s32[], %ch: f32[4,512]):
      %n = constant dense<3> : s32[]
      %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
      return(%lt)
    ^body(%k: s32[], %x: f32[4,512]):
      %one = constant dense<1> : s32[]
      %k1 = add(%k, %one) : s32[]
      %p = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,512]
      %y = tanh(%p) : f32[4,512]
      return(%k1, %y)
  }
  %fused = fusion(%h0, %w) {kind = "output", name = "kernel.0"} : f32[4,512] {
    ^fused(%a: f32[4,512], %b: f32[512,512]):
      %q = dot_general(%a, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,512]
      return(%q)
  }
  return(%i, %h)
}
"""


def test_a_product_in_a_loop_body_is_split_there_and_one_in_a_fusion_is_not():
    """A scan's few-row product runs once a step: it is split inside the loop's body, where it
    is, and the loop computes what it did; a product inside a fusion is a kernel already."""
    out, log = split(LOOP)
    m = parse_module(out)
    (loop,) = [op for op in m.main.ops if op.name == "while"]
    body = loop.regions[1]
    (d,) = [op for op in body.ops if op.name == "dot_general"]
    assert d.result_types[0].shape == (2, 4, 512), out
    assert [op.name for op in body.ops].count("add") == 2, out   # the step count and the parts' sum
    (f,) = [op for op in m.main.ops if op.name == "fusion"]
    assert [op.result_types[0].shape for op in f.regions[0].ops] == [(4, 512)], out
    assert "split %11 dot_general (f32[4,512] x [512,512]) into 2 products of 256" in log
    assert "%16" not in log  # the fusion's product (%16 in the IR above) is left alone


@pytest.mark.parametrize("lhs_t,rhs_t", [(True, False), (False, True), (True, True)])
def test_transposed_operands_split_along_their_own_contracting_dimension(lhs_t, rhs_t):
    out, log = split(product(3, 768, 5, lhs_t, rhs_t), {"dot_split_k": 3, "dot_split_k_min_rhs_bytes": 0})
    d = dots(out)
    assert len(d) == 1 and d[0].result_types[0].shape == (3, 3, 5), out
    assert "into 3 products of 256" in log
    assert out.count("add(") == 3   # the three parts summed, then the bias


@pytest.mark.parametrize("src,options,reason", [
    (product(4, 512, 8), {"dot_split_k": 2, "dot_split_k_min_rhs_bytes": 9 << 10},
     "a part's RHS (8 KiB) stays in cache (the least that streams: 9 KiB)"),
    (product(4, 384, 8), ON, "its contraction (384) does not divide into 2 parts of at least 256"),
    (product(4, 510, 8), {"dot_split_k": 4, "dot_split_k_min_rhs_bytes": 0},
     "its contraction (510) does not divide into 4 parts of at least 256"),
    (product(86, 512, 8), ON, "its 86 rows: the partial results (2 x 86 x 8) would move more than the RHS saves"),
    (product(4, 512, 8, dtype="bf16"), ON, "not an f32 or f64 product"),
    (product(4, 512, 8, dtype="s32"), ON, "not an f32 or f64 product"),
    ("""
    func @main(%x: f32[2,4,512], %w: f32[2,512,8]) -> (f32[2,4,8]) {
      %p = dot_general(%x, %w) {lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]} : f32[2,4,8]
      return(%p)
    }""", ON, "it has batch dimensions"),
    ("""
    func @main(%x: f32[4,2,256], %w: f32[2,256,8]) -> (f32[4,8]) {
      %p = dot_general(%x, %w) {lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [0, 1]} : f32[4,8]
      return(%p)
    }""", ON, "it has no contracting dimension or several"),
])
def test_refusals_say_why(src, options, reason):
    out, log = split(src, options)
    assert len(dots(out)) == 1 and dots(out)[0].result_types[0].rank == dots(src)[0].result_types[0].rank
    assert reason in log, log


def test_off_on_the_interpreter_and_cuda_and_with_one_part_and_after_layout_assignment():
    src = product(4, 512, 8)
    for target in ("interpreter", "cuda"):
        out, _ = split(src, ON, target)
        assert dots(out)[0].result_types[0].rank == 2
    out, _ = split(src, {"dot_split_k": 1, "dot_split_k_min_rhs_bytes": 0})
    assert dots(out)[0].result_types[0].rank == 2
    log = []
    out = run_passes(src, ["layout-assignment", "dot-split-k"], "cpu", ON, log)
    assert dots(out)[0].result_types[0].rank == 2 and "the pass runs before layout assignment" in "\n".join(log)


def test_a_cpu_compile_splits_over_its_threads_where_parts_are_three_eighths_of_its_l2(monkeypatch):
    """The CPU target's pass options (what a compile for it, ``hlo.tools.opt --target=cpu`` and the
    backend's ``compile_module`` pass the pipeline) carry its thread count and L2; the options
    alone are off on every target."""
    from hlo.runtime.cpu.target import cache_bytes, host
    monkeypatch.setenv("HLO_CPU_THREADS", "1")
    opts = host().pass_options()
    assert opts["dot_split_k"] == 1 and opts["dot_split_k_min_rhs_bytes"] == cache_bytes(2, 1 << 20) * 3 // 8
    assert Options.from_any(opts).dot_split_k_for("cpu") == (1, opts["dot_split_k_min_rhs_bytes"])
    assert Options.from_any(opts).dot_split_k_for("cuda") == (0, 0)
    assert Options().dot_split_k_for("cpu") == (0, 0)
    for bad in ({"dot_split_k": -1}, {"dot_split_k": 2.5}, {"dot_split_k_min_rhs_bytes": "1M"}):
        with pytest.raises(ValueError, match="must be None or a non-negative integer"):
            Options.from_any(bad)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 12), depth=st.integers(1, 6), n=st.integers(1, 9), parts=st.integers(2, 4),
       lhs_t=st.booleans(), rhs_t=st.booleans(), dtype=st.sampled_from(["f32", "f64"]))
def test_random_products_compute_what_they_did(m, depth, n, parts, lhs_t, rhs_t, dtype):
    """Random shapes and operand orders (parts as shallow as 1 with the pass's depth limit
    lowered), the split program against the original in the interpreter."""
    k = parts * depth
    src = product(m, k, n, lhs_t, rhs_t, dtype)
    old, dot_split_k.MIN_DEPTH = dot_split_k.MIN_DEPTH, 1
    try:
        out, log = split(src, {"dot_split_k": parts, "dot_split_k_min_rhs_bytes": 0})
    finally:
        dot_split_k.MIN_DEPTH = old
    if (parts + 1) * m <= dot_split_k.MAX_ROWS_PER_DEPTH * k:
        assert f"into {parts} products of {depth}" in log, log
    else:
        assert "would move more than the RHS saves" in log, log


def _mlp(dims):
    w = next(w for w in WORKLOADS if w.id == "simple_mlp")
    return w, w.make_inputs(np.random.default_rng(0), dims, np.float32)


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_chained_split_products_on_the_cpu_match_float64(fusion, threads):
    """fc2(gelu(fc1(x))) with both products split (the first's sum takes its bias and gelu, the
    second reads the result): CPU code against float64 numpy and the interpreter."""
    import hlo
    from hlo.backends.cpu import compile as cpu_compile
    w, inputs = _mlp({"batch": 5, "d_in": 512, "hidden": 768})
    ir = hlo.jit(lambda *a: w.fn(Ops(hnp), *a)).lower(*inputs).ir
    o = optimize(ir, "cpu", options={**ON, "fusion": fusion})
    assert sum(" dot_general " in d and ": split %" in d for d in o.decisions) == 2, o.decisions
    got = np.asarray(cpu_compile(o, threads=threads)(*inputs)[0])
    np.testing.assert_allclose(got, run(o.module, inputs)[0], rtol=1e-4, atol=1e-5)
    x, w1, b1, w2, b2 = (a.astype(np.float64) for a in inputs)
    h = x @ w1 + b1
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    want = h @ w2 + b2
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_the_seed_workloads_at_bench_size_on_two_threads_with_2_mib_of_l2():
    """What the pass decides for the seed workloads' products on a two-thread CPU with 2 MiB of
    L2 (parts of at least 768 KiB): simple_mlp's two products split (1 MiB of RHS a part);
    linear_relu's (256 KiB a part) and the transformer's (1024 rows) do not."""
    import hlo
    decided = {}
    for wid in ("simple_mlp", "linear_relu", "transformer_layer"):
        w = next(w for w in WORKLOADS if w.id == wid)
        case = Case(w, "cpu", "f32")
        inputs = case.inputs()
        ir = hlo.jit(lambda *a, w=w: w.fn(Ops(hnp), *a)).lower(*inputs).ir
        o = optimize(ir, "cpu", options={"dot_split_k": 2, "dot_split_k_min_rhs_bytes": 768 << 10})
        decided[wid] = [d for d in o.decisions if d.startswith("dot-split-k:")]
    assert sum(" dot_general " in d and ": split %" in d for d in decided["simple_mlp"]) == 2, decided
    assert any("a part's RHS (256 KiB) stays in cache" in d for d in decided["linear_relu"]), decided
    assert not any(": split %" in d for d in decided["transformer_layer"]), decided
    assert any("its 1024 rows" in d for d in decided["transformer_layer"]), decided


@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_jit_compile_for_the_cpu_splits_over_its_threads(monkeypatch, threads):
    """hlo.jit's compile takes this machine's options: 8 x 1024 x 1024 (2 MiB of RHS a part on
    two threads, past 3/8 of any L2 this project meets) is split over two threads, not on one."""
    import hlo
    from hlo.runtime.cpu.target import default_threads
    monkeypatch.setenv("HLO_CPU_THREADS", threads)
    if default_threads() < int(threads):
        pytest.skip("a one-core machine")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 1024)).astype(np.float32)
    w = rng.standard_normal((1024, 1024)).astype(np.float32)
    c = hlo.jit(lambda x, w: hnp.tanh(x @ w)).lower(x, w).compile("cpu")
    assert ("f32[2,8,1024]" in c.as_text()) == (threads == "2"), c.as_text()
    np.testing.assert_allclose(c(x, w), np.tanh(x.astype(np.float64) @ w), rtol=1e-4, atol=1e-4)


def test_a_scan_step_product_on_the_cpu_is_split_and_matches_float64(monkeypatch):
    """A jit compile of a loop whose step multiplies a few rows by a streaming weight splits the
    step's product over two threads; the loop's result matches float64 numpy."""
    import hlo
    from hlo.runtime.cpu.target import default_threads
    monkeypatch.setenv("HLO_CPU_THREADS", "2")
    if default_threads() < 2:
        pytest.skip("a one-core machine")
    rng = np.random.default_rng(2)
    h0 = rng.standard_normal((8, 1024)).astype(np.float32)
    w = (rng.standard_normal((1024, 1024)) / 32).astype(np.float32)

    def steps(h, w):
        return hlo.lax.fori_loop(0, 3, lambda i, h: hnp.tanh(h @ w), h)

    c = hlo.jit(steps).lower(h0, w).compile("cpu")
    assert "f32[2,8,1024]" in c.as_text(), c.as_text()
    want = h0.astype(np.float64)
    for _ in range(3):
        want = np.tanh(want @ w)
    np.testing.assert_allclose(c(h0, w), want, rtol=1e-4, atol=1e-4)
