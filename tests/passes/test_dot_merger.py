"""The dot-merger pass (passes/dot_merger.py): products that read the same LHS become one
product of the concatenated RHS operands (and biases) plus a slice each -- IR text in, IR text
out, every refusal's reason in the decision log, and the rewritten programs against the
originals (interpreter, CPU code, the transformer layer against float64 numpy)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pass_testing import assert_ir, rewritten, run_passes

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes.pipeline import optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.workloads import WORKLOADS, Case, Ops, reference

DOT = "{lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]}"

QKV = f"""
func @main(%x: f32[2,4,8], %wq: f32[8,8], %bq: f32[8], %wk: f32[8,8], %bk: f32[8], %wv: f32[8,6], %bv: f32[6]) -> (f32[2,4,2,4], f32[2,4,8], f32[2,4,6]) {{
  %q = dot_general(%x, %wq) {DOT} : f32[2,4,8]
  %qb = broadcast_in_dim(%bq) {{broadcast_dimensions = [2]}} : f32[2,4,8]
  %q1 = add(%q, %qb) : f32[2,4,8]
  %k = dot_general(%x, %wk) {DOT} : f32[2,4,8]
  %kb = broadcast_in_dim(%bk) {{broadcast_dimensions = [2]}} : f32[2,4,8]
  %k1 = add(%kb, %k) : f32[2,4,8]
  %v = dot_general(%x, %wv) {DOT} : f32[2,4,6]
  %vb = broadcast_in_dim(%bv) {{broadcast_dimensions = [2]}} : f32[2,4,6]
  %v1 = add(%v, %vb) : f32[2,4,6]
  %qh = reshape(%q1) : f32[2,4,2,4]
  return(%qh, %k1, %v1)
}}
"""


def merged(src, target="cuda", options=None):
    """The module after dot-merger, its decision log, and a check that it computes what the
    original does (interpreter, random inputs)."""
    return rewritten(src, ["dot-merger"], target, options)


def dots(text):
    return [op for op in parse_module(text).main.ops if op.name == "dot_general"]


def test_qkv_projections_become_one_product_with_the_biases_concatenated():
    out, log = merged(QKV)
    assert_ir(out, """
    func @main(%x: f32[2,4,8], %wq: f32[8,8], %bq: f32[8], %wk: f32[8,8], %bk: f32[8], %wv: f32[8,6], %bv: f32[6]) -> (f32[2,4,2,4], f32[2,4,8], f32[2,4,6]) {
      %w = concatenate(%wq, %wk, %wv) {dimension = 1} : f32[8,22]
      %d = dot_general(%x, %w) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[2,4,22]
      %b = concatenate(%bq, %bk, %bv) {dimension = 0} : f32[22]
      %bb = broadcast_in_dim(%b) {broadcast_dimensions = [2]} : f32[2,4,22]
      %y = add(%d, %bb) : f32[2,4,22]
      %q = slice(%y) {start_indices = [0, 0, 0], limit_indices = [2, 4, 8], strides = [1, 1, 1]} : f32[2,4,8]
      %k = slice(%y) {start_indices = [0, 0, 8], limit_indices = [2, 4, 16], strides = [1, 1, 1]} : f32[2,4,8]
      %v = slice(%y) {start_indices = [0, 0, 16], limit_indices = [2, 4, 22], strides = [1, 1, 1]} : f32[2,4,6]
      %qh = reshape(%q) : f32[2,4,2,4]
      return(%qh, %k, %v)
    }
    """)
    assert "merged 3 products reading the same LHS" in log and "BIAS epilogue kept" in log


def test_off_by_default_on_cpu_and_the_interpreter_and_forced_on_by_the_option():
    for target in ("cpu", "interpreter"):
        out, log = merged(QKV, target)
        assert len(dots(out)) == 3
        assert f"off on target {target}" in log
    out, log = merged(QKV, "cpu", {"dot_merger": True})
    assert len(dots(out)) == 1
    out, log = merged(QKV, "cuda", {"dot_merger": False})
    assert len(dots(out)) == 3 and "off on target cuda" in log


def test_large_products_stay_apart():
    out, log = merged(QKV, options={"dot_merger_max_elements": 63})
    # q and k have 64 elements (over the limit), v 48: v alone is left, nothing to merge it with
    assert len(dots(out)) == 3
    assert "%0 dot_general: its product has 64 elements (limit 63 a product)" in log


def test_bare_products_merge_and_feed_their_readers_through_slices():
    src = """
    func @main(%x: f32[3,5], %a: f32[5,4], %b: f32[5,4], %c: f32[5,2]) -> (f32[3], f32[4,3], f32[3,2]) {
      %p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[3,4]
      %q = dot_general(%x, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[3,4]
      %r = dot_general(%x, %c) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[3,2]
      %z = constant dense<0.0> : f32[]
      %s = reduce(%p, %z) {dimensions = [1]} : f32[3] {
        ^body(%u: f32[], %w: f32[]):
          %o = add(%u, %w) : f32[]
          return(%o)
      }
      %t = transpose(%q) {permutation = [1, 0]} : f32[4,3]
      return(%s, %t, %r)
    }
    """
    out, log = merged(src)
    assert len(dots(out)) == 1 and "merged 3 products" in log and "BIAS" not in log
    assert "concatenate(%arg1, %arg2, %arg3) {dimension = 1} : f32[5,10]" in out


def test_transposed_rhs_concatenates_along_its_free_dimension():
    # x @ w.T: the RHS's free dimension is its first
    src = """
    func @main(%x: f32[3,5], %a: f32[4,5], %b: f32[6,5]) -> (f32[3,4], f32[3,6]) {
      %p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[3,4]
      %q = dot_general(%x, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[3,6]
      return(%p, %q)
    }
    """
    out, log = merged(src)
    assert len(dots(out)) == 1
    assert "concatenate(%arg1, %arg2) {dimension = 0} : f32[10,5]" in out


def test_batched_products_merge():
    src = """
    func @main(%x: f32[2,3,5], %a: f32[2,5,4], %b: f32[2,5,4]) -> (f32[2,3,4], f32[2,3,4]) {
      %p = dot_general(%x, %a) {lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]} : f32[2,3,4]
      %q = dot_general(%x, %b) {lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]} : f32[2,3,4]
      return(%p, %q)
    }
    """
    out, log = merged(src)
    assert len(dots(out)) == 1 and "f32[2,3,8]" in out


@pytest.mark.parametrize("body,reason", [
    # the second RHS is computed from the first product: merging would be a cycle
    ("""%p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %b2 = transpose(%p) {permutation = [1, 0]} : f32[4,4]
      %q = dot_general(%x, %b2) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %o = transpose(%q) {permutation = [1, 0]} : f32[4,4]""",
     "%2 dot_general with %0 dot_general: the RHS or bias of %2 dot_general is computed from "
     "%0 dot_general's product"),
    # different contracting dimensions
    ("""%p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %q = dot_general(%x, %b) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4,4]
      %o = transpose(%q) {permutation = [1, 0]} : f32[4,4]""",
     "their lhs contracting dimensions differ"),
    # one with a bias, one without
    ("""%p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %q0 = dot_general(%x, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %vb = broadcast_in_dim(%v) {broadcast_dimensions = [1]} : f32[4,4]
      %q = add(%q0, %vb) : f32[4,4]
      %o = transpose(%q) {permutation = [1, 0]} : f32[4,4]""",
     "one has a bias epilogue and the other not"),
    # an elementwise op after the product (cuBLASLt's RELU epilogue) would move off it
    ("""%p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %q0 = dot_general(%x, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %z = constant dense<0.0> : f32[4,4]
      %q = maximum(%q0, %z) : f32[4,4]
      %o = transpose(%q) {permutation = [1, 0]} : f32[4,4]""",
     "%1 dot_general: its product feeds elementwise 'maximum'"),
    # a bias along the rows (not the merged dimension) is not a bias epilogue: the add is
    # an elementwise reader
    ("""%p = dot_general(%x, %a) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %q0 = dot_general(%x, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,4]
      %vb = broadcast_in_dim(%v) {broadcast_dimensions = [0]} : f32[4,4]
      %q = add(%q0, %vb) : f32[4,4]
      %o = transpose(%q) {permutation = [1, 0]} : f32[4,4]""",
     "%1 dot_general: its product feeds elementwise 'add'"),
])
def test_refusals_say_why(body, reason):
    src = f"""
    func @main(%x: f32[4,4], %a: f32[4,4], %b: f32[4,4], %v: f32[4]) -> (f32[4,4], f32[4,4]) {{
      {body}
      return(%p, %o)
    }}
    """
    out, log = merged(src)
    assert len(dots(out)) == 2, out
    assert reason in log, log


def test_rhs_that_differ_in_contraction_order_or_another_free_dimension():
    src = """
    func @main(%x: f32[3,5,2], %a: f32[5,2,4], %b: f32[5,2,4], %c: f32[2,5,4], %d: f32[5,2,3,4]) -> (f32[3,4], f32[3,4], f32[3,4], f32[3,3,4]) {
      %p = dot_general(%x, %a) {lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [0, 1]} : f32[3,4]
      %q = dot_general(%x, %b) {lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [0, 1]} : f32[3,4]
      %r = dot_general(%x, %c) {lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [1, 0]} : f32[3,4]
      %s = dot_general(%x, %d) {lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [0, 1]} : f32[3,3,4]
      return(%p, %q, %r, %s)
    }
    """
    out, log = merged(src)
    assert len(dots(out)) == 3  # p and q merge; r contracts in another order; s has two free dims
    assert "not merged: %2 dot_general with %0 dot_general: their rhs contracting dimensions differ" in log
    assert ("not merged: %3 dot_general with %0 dot_general: their RHS shapes [5, 2, 4] and "
            "[5, 2, 3, 4] differ outside the last free dimension (2)") in log


def _transformer(dtype="f32", mode="quick"):
    w = next(w for w in WORKLOADS if w.id == "transformer_layer")
    case = Case(w, mode, dtype)
    inputs = case.inputs()

    def fn(*a):
        return w.fn(Ops(hnp), *a)
    return case, inputs, hlo.jit(fn).lower(*inputs).ir


@pytest.mark.parametrize("target", ["interpreter", "cpu"])
def test_transformer_layer_with_the_pass_forced_on_matches_float64(target):
    """The pass on the whole transformer layer (its Q/K/V projections merge), on the CPU where
    it is off by default: the optimized program against the float64 numpy reference, and the
    CPU code against the interpreter."""
    from hlo.backends.cpu import compile as cpu_compile
    case, inputs, ir = _transformer()
    o = optimize(ir, target, options={"dot_merger": True})
    assert any("merged 3 products reading the same LHS" in d for d in o.decisions), o.decisions
    assert sum(op.name == "dot_general" for op in o.module.walk()) == 6  # qkv, qk^T, pv, wo, ffn x2
    got = run(o.module, inputs)
    if target == "cpu":
        got_cpu = cpu_compile(o)(*inputs)
        for a, b in zip(got, got_cpu):
            np.testing.assert_allclose(np.asarray(b), a, rtol=1e-4, atol=1e-5)
    for g, r in zip(got, reference(case, inputs)):
        err = np.linalg.norm(np.asarray(g, np.float64) - r) / np.linalg.norm(r)
        assert err < 1e-4, err
    off = optimize(ir, target)
    assert sum(op.name == "dot_general" for op in off.module.walk()) == 8


def test_no_free_dimension_and_after_layout_assignment():
    src = """
    func @main(%x: f32[5], %a: f32[5], %b: f32[5]) -> (f32[], f32[]) {
      %p = dot_general(%x, %a) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[]
      %q = dot_general(%x, %b) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[]
      return(%p, %q)
    }
    """
    out, log = merged(src)
    assert len(dots(out)) == 2 and "%0 dot_general: its RHS has no free dimension to extend" in log
    log = []
    out = run_passes(QKV, ["layout-assignment", "dot-merger"], "cuda", None, log)
    assert len(dots(out)) == 3 and "the pass runs before layout assignment" in "\n".join(log)
