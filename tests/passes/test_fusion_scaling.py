"""The fusion passes on large programs: a 2,000-op generated program (chains, diamonds, row
reductions, dots; simplified first, as in the pipeline) and a 1,000-op elementwise chain finish, keep the program's meaning, and give
the same IR whether loop kernels grow in place (``fusion_build.absorb``) or through the general
build-and-analyze path (``preview`` + ``analyze``); the incrementally kept top-level use lists
match a fresh computation. Times are printed (run with -s), never asserted."""
import time

import numpy as np
import pytest
from large_programs import _add_body, large_program
from pass_testing import random_args

from hlo.ir import parse_module, print_module
from hlo.ir.builder import Builder
from hlo.ir.core import Function, Module
from hlo.ir.interpreter import run
from hlo.ir.types import TensorType, f32
from hlo.passes.fusion import RECOMPUTE_LIMIT, recompute_factor
from hlo.passes.fusion_build import TopLevel
from hlo.passes.options import Options, PassConfig
from hlo.passes.pipeline import optimize, verify
from hlo.passes.registry import create_pass
from hlo.passes.util import top_users

SIMPLIFY = ["canonicalize", "algebraic-simplifier", "constant-folding", "cse", "dce"]
FUSE = ["layout-assignment", "fusion", "multi-output-fusion", "horizontal-fusion"]


def _simplified(m: Module) -> Module:
    """``m`` after the simplification passes (what the fusion passes see in the pipeline)."""
    m = m.clone()
    config = PassConfig("cpu", Options(), [])
    for name in SIMPLIFY:
        create_pass(name, config).run(m)
    return m


def _fuse(m: Module, grow_in_place: bool, options=None):
    """Run the fusion passes on ``m`` (changed in place); return (decision log, seconds)."""
    config = PassConfig("cpu", options or Options(), [])
    t0 = time.perf_counter()
    for name in FUSE:
        p = create_pass(name, config)
        if name == "fusion":
            p.grow_in_place = grow_in_place
        p.run(m)
        verify(m)
    return config.decisions, time.perf_counter() - t0


def _chain(n: int) -> Module:
    fn = Function("main", [TensorType((4, 6), f32), TensorType((4, 6), f32)])
    m = Module("chain")
    m.add(fn)
    b = Builder(fn.body)
    x, y = fn.args
    a = x
    for i in range(n):
        name = ["tanh", "negate", "add", "multiply"][i % 4]
        a = b.value(name, [a] if i % 4 < 2 else [a, y])
    fn.body.outputs = [a]
    return m


def test_large_program_fuses_the_same_either_way_and_keeps_its_meaning():
    m = large_program(2000, seed=0)
    assert len(m.main.ops) >= 2000
    s = _simplified(m)
    n_ops = len(s.main.ops)
    fast, general = s.clone(), s.clone()
    log_fast, t_fast = _fuse(fast, True)
    log_general, t_general = _fuse(general, False)
    assert print_module(fast) == print_module(general)
    assert log_fast == log_general
    kernels = [op for op in fast.main.ops if op.name in ("fusion", "dot_general")]
    assert 10 < len(kernels) < n_ops // 10
    assert any(op.attrs.get("kind") == "input" for op in kernels)
    assert any(op.attrs.get("kind") == "output" for op in kernels)
    args = random_args(m, seed=3)
    for want, got in zip(run(m, args), run(fast, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    print(f"\nfusion passes on {n_ops} ops: {t_fast:.2f}s growing in place, "
          f"{t_general:.2f}s through preview")


def test_whole_pipeline_on_a_large_program_verifying_after_every_pass():
    m = large_program(1000, seed=1)
    t0 = time.perf_counter()
    o = optimize(m, "cpu", options={"verify": "all"})
    seconds = time.perf_counter() - t0
    args = random_args(m, seed=4)
    for want, got in zip(run(m, args), run(o.module, args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    fusion = sum(s for n, s in o.pass_times if "fusion" in n)
    print(f"\noptimize on {len(m.main.ops)} ops: {seconds:.2f}s (fusion passes {fusion:.2f}s, "
          f"verification {o.compile_times['verify']:.2f}s)")


def test_long_chain_becomes_one_kernel_either_way():
    """Without a bound on a kernel's work (``max_fusion_cost``), the fusion pass itself scales."""
    unbounded = Options(max_fusion_cost=10 ** 9)
    fast, general = _chain(300), _chain(300)
    _, t_fast = _fuse(fast, True, unbounded)
    _, t_general = _fuse(general, False, unbounded)
    assert print_module(fast) == print_module(general)
    assert [op.name for op in fast.main.ops] == ["fusion"]
    m = _chain(1000)
    log, t_long = _fuse(m, True, unbounded)
    assert [op.name for op in m.main.ops] == ["fusion"]
    assert len(m.main.ops[0].regions[0].ops) == 1000
    print(f"\n300-op chain: {t_fast:.3f}s in place, {t_general:.3f}s through preview; "
          f"1000-op chain: {t_long:.3f}s")


def test_a_long_chain_is_cut_into_kernels_within_the_bound():
    """The default bound: kernels of at most ``max_fusion_cost`` units each, as few as that
    allows, the chain's meaning kept, and the decision log says why each cut is there."""
    from hlo.passes.fusion import unit_cost
    m = _chain(1000)
    ref = m.clone()
    log, _ = _fuse(m, True)
    bound = Options().max_fusion_cost
    kernels = [op for op in m.main.ops if op.name == "fusion"]
    costs = [unit_cost(k) for k in kernels]
    total = sum(costs)
    assert len(kernels) == len(m.main.ops) and max(costs) <= bound, costs
    assert len(kernels) <= 2 * total // bound + 1, (len(kernels), total)
    assert any(f"more than {bound} (max_fusion_cost)" in ln for ln in log)
    args = random_args(ref, seed=5)
    np.testing.assert_allclose(run(m, args)[0], run(ref, args)[0], rtol=1e-5, atol=1e-6)


def test_incremental_use_lists_match_a_fresh_computation():
    m = large_program(600, seed=2)
    config = PassConfig("cpu", Options(), [])
    create_pass("layout-assignment", config).run(m)
    p = create_pass("fusion", config)
    p.run(m)
    top, region = p.top, m.main.body
    fresh = top_users(region)
    kept = {v: us for v, us in top.users.items() if us}
    assert {v: [id(u) for u in us] for v, us in kept.items()} == \
        {v: [id(u) for u in us] for v, us in fresh.items()} or \
        {v: sorted(map(id, us)) for v, us in kept.items()} == \
        {v: sorted(map(id, us)) for v, us in fresh.items()}
    order = [top.pos[id(op)] for op in region.ops]
    assert order == sorted(order) and len(set(order)) == len(order)
    assert set(top.returned) == set(region.outputs)
    assert all(top.alive(op) for op in region.ops)
    assert isinstance(TopLevel(region).users, dict)



def _reduce_broadcast_chain(k: int, row: bool) -> Module:
    """``x = tanh(x - x.sum(axes))`` k times: each step reads back the reduction of the last."""
    S = (8, 16)
    fn = Function("main", [TensorType(S, f32)])
    m = Module("reductions")
    m.add(fn)
    b = Builder(fn.body)
    x = fn.args[0]
    zero = b.value("constant", [], attrs={"value": np.array(0.0, np.float32)})
    dims, kept = ([1], [0]) if row else ([0, 1], [])
    for _ in range(k):
        r = b.op("reduce", [x, zero], {"dimensions": dims}, regions=[_add_body()]).results[0]
        back = b.value("broadcast_in_dim", [r], attrs={"broadcast_dimensions": kept},
                       result_types=[TensorType(S, f32)])
        x = b.value("tanh", [b.value("subtract", [x, back])])
    fn.body.outputs = [x]
    return m


@pytest.mark.parametrize("row", [True, False])
def test_reduction_broadcast_chains_are_cut_where_recomputation_outgrows_the_work(row):
    # One kernel for the whole chain would evaluate step j's elementwise ops once for every
    # later reduction: quadratic work and code in the chain's length.
    counts = {}
    for k in (12, 24, 48):
        m = _reduce_broadcast_chain(k, row)
        before = m.clone()
        log, _ = _fuse(m, True)
        kernels = [op for op in m.main.ops if op.name == "fusion"]
        assert all(recompute_factor(op.regions[0]) <= RECOMPUTE_LIMIT for op in kernels)
        assert any("times the work of its ops" in line for line in log)
        counts[k] = len(kernels)
        if k == 12:
            args = random_args(before, seed=5)
            np.testing.assert_allclose(run(m, args)[0], run(before, args)[0], rtol=1e-5, atol=1e-5)
    assert 1 < counts[12] and counts[48] <= 4 * counts[12] + 1 and counts[48] >= 2 * counts[12]


def test_a_softmax_stays_one_kernel_within_the_recompute_limit():
    text = """
module @norms

func @main(%x: f32[8,16]) -> (f32[8,16]) {
  %z = constant dense<0.0> : f32[]
  %ninf = constant dense<-inf> : f32[]
  %m = reduce(%x, %ninf) {dimensions = [1]} : f32[8] {
    ^body(%a: f32[], %b: f32[]):
      %c = maximum(%a, %b) : f32[]
      return(%c)
  }
  %mb = broadcast_in_dim(%m) {broadcast_dimensions = [0]} : f32[8,16]
  %d = subtract(%x, %mb) : f32[8,16]
  %e = exponential(%d) : f32[8,16]
  %s = reduce(%e, %z) {dimensions = [1]} : f32[8] {
    ^body(%a: f32[], %b: f32[]):
      %c = add(%a, %b) : f32[]
      return(%c)
  }
  %sb = broadcast_in_dim(%s) {broadcast_dimensions = [0]} : f32[8,16]
  %p = divide(%e, %sb) : f32[8,16]
  return(%p)
}
"""
    m = parse_module(text)
    _fuse(m, True)
    assert [op.name for op in m.main.ops if op.name != "constant"] == ["fusion"]
    assert recompute_factor(m.main.ops[-1].regions[0]) <= RECOMPUTE_LIMIT
