"""The while-unroll pass (passes/while_unroll.py) and what it leaves for the simplifier: a loop
with a known, small trip count becomes copies of its body (IR text in, IR text out, checked
against the loop in the interpreter); every loop kept says why in the decision log; the counter
folds to constants and ``xs[i]`` to a slice (``algebraic.gather_of_constant`` /
``dynamic_slice_of_constant``); on by default for cuda only."""
from __future__ import annotations

import numpy as np
import pytest
from pass_testing import assert_ir, random_args, rewritten, run_passes

import hlo
import hlo.numpy as hnp
from hlo import lax
from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes import while_unroll
from hlo.passes.options import Options
from hlo.passes.pipeline import optimize, pipeline_passes

ON = {"while_unroll": True}


def loop(start=0, bound=3, extra="", body_extra="", cond_extra=""):
    """A counted loop whose step is tanh(y @ w) (a product: what unrolling is for)."""
    return f"""
    func @main(%x: f32[4], %m: s32[], %w: f32[4,4]) -> (s32[], f32[4]) {{
      %zero = constant dense<{start}> : s32[]
      %i, %h = while(%zero, %x) : s32[], f32[4] {{
        ^cond(%c: s32[], %ch: f32[4]):
          %n = constant dense<{bound}> : s32[]
          {cond_extra}
          %lt = compare(%c, %n) {{comparison_direction = "LT"}} : pred[]
          return(%lt)
        ^body(%k: s32[], %y: f32[4]):
          %one = constant dense<1> : s32[]
          %k1 = add(%k, %one) : s32[]
          %p = dot_general(%y, %w) {{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}} : f32[4]
          %t = tanh(%p) : f32[4]
          {body_extra}
          return(%k1, %t)
      }}
      {extra}
      return(%i, %h)
    }}
    """


def test_a_counted_loop_becomes_copies_of_its_body():
    out, log = rewritten(loop(), ["while-unroll"], "interpreter", ON)
    dot = "{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4]"
    assert_ir(out, f"""
    func @main(%x: f32[4], %m: s32[], %w: f32[4,4]) -> (s32[], f32[4]) {{
      %zero = constant dense<0> : s32[]
      %one = constant dense<1> : s32[]
      %k1 = add(%zero, %one) : s32[]
      %p = dot_general(%x, %w) {dot}
      %t = tanh(%p) : f32[4]
      %one2 = constant dense<1> : s32[]
      %k2 = add(%k1, %one2) : s32[]
      %p2 = dot_general(%t, %w) {dot}
      %t2 = tanh(%p2) : f32[4]
      %one3 = constant dense<1> : s32[]
      %k3 = add(%k2, %one3) : s32[]
      %p3 = dot_general(%t2, %w) {dot}
      %t3 = tanh(%p3) : f32[4]
      return(%k3, %t3)
    }}
    """)
    assert "unrolled while: 3 steps of 4 ops" in log


def test_a_loop_of_no_steps_leaves_its_initial_values():
    out, log = rewritten(loop(start=5, bound=2), ["while-unroll"], "interpreter", ON)
    assert_ir(out, """
    func @main(%x: f32[4], %m: s32[], %w: f32[4,4]) -> (s32[], f32[4]) {
      %zero = constant dense<5> : s32[]
      return(%zero, %x)
    }
    """)
    assert "unrolled while: 0 steps" in log
    m = parse_module(out)
    np.testing.assert_array_equal(run(m, [np.arange(4, dtype=np.float32), np.int32(0),
                                          np.eye(4, dtype=np.float32)])[1], np.arange(4, dtype=np.float32))


def test_the_simplifier_folds_the_counter_and_the_index():
    """After unrolling, ``xs[i]`` at each step is a slice at a constant offset and the counter a
    constant: no gather, no dynamic_slice, no loop left."""
    xs = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    h = np.ones((3, 4), np.float32)

    def f(h, xs):
        h = lax.fori_loop(0, 5, lambda i, h: hnp.tanh(h + xs[i]), h)
        return lax.scan(lambda c, x: (c * 0.5 + x, None), h, xs)[0]

    low = hlo.jit(f).lower(h, xs)
    o = optimize(low.ir, "interpreter", options={"while_unroll": True, "fusion": False})
    names = {op.name for op in o.module.main.body.walk()}
    assert not names & {"while", "gather", "dynamic_slice"}, o.text()
    assert "slice" in names
    want = run(low.ir, [h, xs])[0]
    np.testing.assert_allclose(run(o.module, [h, xs])[0], want, rtol=1e-6)
    ref = h.astype(np.float64)
    for i in range(5):
        ref = np.tanh(ref + xs[i])
    for i in range(5):
        ref = ref * 0.5 + xs[i]
    np.testing.assert_allclose(want, ref, rtol=1e-5)


@pytest.mark.parametrize("src,why", [
    (loop(bound=while_unroll.MAX_TRIP_COUNT + 1), f"more than {while_unroll.MAX_TRIP_COUNT}"),
    (loop().replace("%lt = compare(%c, %n)", "%lt = compare(%c, %ch0)").replace(
        "          %n = constant dense<3> : s32[]",
        "          %ch0 = convert(%m) : s32[]"), "trip count is not known"),
])
def test_loops_kept_say_why(src, why):
    log: list = []
    out = run_passes(src, ["while-unroll"], "interpreter", ON, log)
    assert "while(" in out
    assert any(why in ln and ln.startswith("while-unroll: kept while") for ln in log), log


def test_a_body_too_big_to_copy_stays_a_loop(monkeypatch):
    monkeypatch.setattr(while_unroll, "MAX_UNROLLED_OPS", 3 * 4 - 1)   # 3 steps of 4 ops
    log: list = []
    out = run_passes(loop(), ["while-unroll"], "interpreter", ON, log)
    assert "while(" in out and any("3 steps x 4 ops, more than 11" in ln for ln in log), log
    monkeypatch.setattr(while_unroll, "MAX_UNROLLED_OPS", 3 * 4)
    assert "while(" not in run_passes(loop(), ["while-unroll"], "interpreter", ON)


def test_a_condition_that_calls_the_host_keeps_the_loop():
    def f(x):
        def cond(s):
            hlo.debug.print("step {}", s[0])
            return s[0] < 3
        return lax.while_loop(cond, lambda s: (s[0] + 1, hnp.tanh(s[1] @ s[1])), (0, x))[1]

    x = np.ones((4, 4), np.float32)
    low = hlo.jit(f).lower(x)
    o = optimize(low.ir, "cuda")
    assert any(op.name == "while" for op in o.module.main.body.walk())
    assert any("calls back into the host" in d for d in o.decisions), o.decisions


def test_nested_loops_unroll_inside_out_and_keep_their_meaning():
    def f(x, xs):
        def outer(i, x):
            return lax.fori_loop(0, 3, lambda j, y: hnp.sin(y) + xs[i] * 0.25 + j * 0.5, x)
        return lax.fori_loop(0, 4, outer, x)

    x = np.linspace(-1, 1, 6).astype(np.float32)
    xs = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    low = hlo.jit(f).lower(x, xs)
    o = optimize(low.ir, "interpreter", options=ON)
    assert not any(op.name == "while" for op in o.module.main.body.walk()), o.text()
    assert sum("unrolled while" in d for d in o.decisions) == 2, o.decisions
    ref = x.astype(np.float64)
    for i in range(4):
        for j in range(3):
            ref = np.sin(ref) + xs[i] * 0.25 + j * 0.5
    np.testing.assert_allclose(run(o.module, [x, xs])[0], ref, rtol=1e-5)


def test_an_elementwise_body_stays_a_loop():
    """Nothing in it that unrolling takes out of a step; fused across steps it would be one
    long kernel."""
    x = np.ones(8, np.float32)
    low = hlo.jit(lambda x: lax.fori_loop(0, 8, lambda i, y: hnp.tanh(y) * 0.5 + i, x)).lower(x)
    o = optimize(low.ir, "cuda")
    assert any(op.name == "while" for op in o.module.main.body.walk())
    assert any("no product and no indexing" in d for d in o.decisions), o.decisions


def test_a_body_returning_an_earlier_loops_result_as_it_is():
    src = """
    func @main(%x: f32[4], %w: f32[4,4]) -> (f32[4], f32[4]) {
      %zero = constant dense<0> : s32[]
      %i, %a = while(%zero, %x) : s32[], f32[4] {
        ^cond(%c: s32[], %ca: f32[4]):
          %n = constant dense<2> : s32[]
          %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
          return(%lt)
        ^body(%k: s32[], %y: f32[4]):
          %one = constant dense<1> : s32[]
          %k1 = add(%k, %one) : s32[]
          %t = dot_general(%y, %w) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4]
          return(%k1, %t)
      }
      %j, %b, %keep = while(%zero, %x, %x) : s32[], f32[4], f32[4] {
        ^cond(%c2: s32[], %cb: f32[4], %ck: f32[4]):
          %n2 = constant dense<3> : s32[]
          %lt2 = compare(%c2, %n2) {comparison_direction = "LT"} : pred[]
          return(%lt2)
        ^body(%k2: s32[], %y2: f32[4], %z2: f32[4]):
          %one2 = constant dense<1> : s32[]
          %k3 = add(%k2, %one2) : s32[]
          %d2 = dot_general(%y2, %w) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4]
          %u = multiply(%d2, %a) : f32[4]
          return(%k3, %u, %a)
      }
      return(%b, %keep)
    }
    """
    out, log = rewritten(src, ["while-unroll"], "interpreter", ON)
    assert "while(" not in out, out
    assert "unrolled while: 2 steps of 3 ops" in log and "unrolled while: 3 steps of 4 ops" in log, log


def test_on_for_cuda_only_by_default():
    assert Options().while_unroll_for("cuda") and not Options().while_unroll_for("cpu")
    assert not Options().while_unroll_for("interpreter")
    assert "while-unroll" in pipeline_passes("cuda", Options())[0]
    assert "while-unroll" not in pipeline_passes("cpu", Options())[0]
    assert "while-unroll" in pipeline_passes("cpu", Options(while_unroll=True))[0]
    assert "while-unroll" not in pipeline_passes("cuda", Options(while_unroll=False))[0]
    x = np.ones((4, 4), np.float32)
    low = hlo.jit(lambda x: lax.fori_loop(0, 4, lambda i, y: y @ y, x)).lower(x)
    assert not any(op.name == "while" for op in optimize(low.ir, "cuda").module.main.body.walk())
    assert any(op.name == "while" for op in optimize(low.ir, "cpu").module.main.body.walk())


# -- what the simplifier does with an unrolled loop's indexing ------------------------------

GATHER = """
func @main(%xs: f32[5,3,4]) -> (f32[3,4]) {{
  %i = constant dense<[{i}]> : s32[1]
  %g = gather(%xs, %i) {{collapsed_slice_dims = [0], index_vector_dim = 0, offset_dims = [0, 1], slice_sizes = [1, 3, 4], start_index_map = [0]}} : f32[3,4]
  return(%g)
}}
"""


@pytest.mark.parametrize("i,start", [(2, 2), (0, 0), (4, 4), (7, 4), (-1, 0)])
def test_a_gather_at_a_constant_index_is_a_clamped_slice(i, start):
    out, _ = rewritten(GATHER.format(i=i), ["algebraic-simplifier"], "interpreter")
    assert_ir(out, f"""
    func @main(%xs: f32[5,3,4]) -> (f32[3,4]) {{
      %s = slice(%xs) {{start_indices = [{start}, 0, 0], limit_indices = [{start + 1}, 3, 4], strides = [1, 1, 1]}} : f32[1,3,4]
      %r = reshape(%s) : f32[3,4]
      return(%r)
    }}
    """)


def test_a_gather_of_several_indices_or_a_computed_one_stays():
    many = GATHER.format(i=1).replace("dense<[1]> : s32[1]", "dense<[[1], [2]]> : s32[2,1]").replace(
        "index_vector_dim = 0, offset_dims = [0, 1]", "index_vector_dim = 1, offset_dims = [1, 2]").replace(
        ": f32[3,4]\n  return", ": f32[2,3,4]\n  return").replace("-> (f32[3,4])", "-> (f32[2,3,4])")
    assert "gather(" in run_passes(many, ["algebraic-simplifier"], "interpreter")
    computed = GATHER.format(i=1).replace("(%xs: f32[5,3,4])", "(%xs: f32[5,3,4], %j: s32[1])").replace(
        "%i = constant dense<[1]> : s32[1]", "%i = negate(%j) : s32[1]")
    assert "gather(" in run_passes(computed, ["algebraic-simplifier"], "interpreter")


@pytest.mark.parametrize("a,b", [(1, 2), (9, -3)])
def test_a_dynamic_slice_at_constant_indices_is_a_clamped_slice(a, b):
    src = f"""
    func @main(%x: f32[6,8]) -> (f32[2,4]) {{
      %a = constant dense<{a}> : s32[]
      %b = constant dense<{b}> : s32[]
      %d = dynamic_slice(%x, %a, %b) {{slice_sizes = [2, 4]}} : f32[2,4]
      return(%d)
    }}
    """
    out, _ = rewritten(src, ["algebraic-simplifier"], "interpreter")
    sa, sb = min(max(a, 0), 4), min(max(b, 0), 4)
    assert f"slice(%arg0) {{limit_indices = [{sa + 2}, {sb + 4}], start_indices = [{sa}, {sb}]" in out, out
    assert "dynamic_slice" not in out


def test_random_loops_unrolled_match_the_loop():
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7):
        src = loop(start=int(rng.integers(-3, 3)), bound=n, body_extra="%v = multiply(%t, %y) : f32[4]")
        m = parse_module(src)
        out = run_passes(src, ["while-unroll", "constant-folding", "dce"], "interpreter", ON)
        args = random_args(m)
        for got, want in zip(run(parse_module(out), args), run(m, args)):
            np.testing.assert_array_equal(got, want)
