"""Scheduling and buffer assignment: reuse, in-place updates, donation, bitcast aliasing, the
checker, and the buffer-level simulation of whole programs."""
import numpy as np
import pytest
from pass_testing import filecheck, random_args, simulate

from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes.buffer_assignment import (
    BufferAssignment,
    BufferAssignmentError,
    DonationWarning,
    Slice,
    _clash,
)
from hlo.passes.pipeline import optimize
from hlo.passes.scheduling import schedule_region


def plan(src, donate=(), warn=True):
    m = parse_module(src)
    return m, BufferAssignment(m.main.body, list(m.main.ops), donate, warn)


CHAIN = """
func @main(%x: f32[4,8]) -> (f32[8,4]) {
  %a = transpose(%x) {permutation = [1, 0]} : f32[8,4]
  %b = transpose(%a) {permutation = [1, 0]} : f32[4,8]
  %c = transpose(%b) {permutation = [1, 0]} : f32[8,4]
  %d = transpose(%c) {permutation = [1, 0]} : f32[4,8]
  %e = transpose(%d) {permutation = [1, 0]} : f32[8,4]
  return(%e)
}
"""


def test_dead_buffers_are_reused():
    m, ba = plan(CHAIN)
    ba.check()
    a, b, c, d, e = [op.results[0] for op in m.main.ops]
    # Four 128-byte temporaries, never more than two alive at once (one may sit in the output
    # buffer before the output is written): at most two arena slots.
    temps = [ba.slice_for(v) for v in (a, b, c, d)]
    assert ba.arena_size <= 256
    assert ba.slice_for(e) == Slice("output", 0, 0, 128)
    assert len({(s.kind, s.offset) for s in temps}) < 4
    args = random_args(m)
    assert np.array_equal(simulate(_opt(m, ba), args)[0], run(m, args)[0])


def _opt(m, ba):
    class O:
        pass
    o = O()
    o.module, o.buffers, o.schedule = m, ba, list(m.main.ops)
    return o


def test_text_form_lists_buffers_with_offsets_sizes_and_live_ranges():
    m, ba = plan(CHAIN)
    filecheck(ba.text(), """
    CHECK: buffer assignment: arena
    CHECK: param0[0:128]  size 128  live [entry, 0]  values %arg0
    CHECK: output0[0:128]  size 128  live [4, exit]  values %4
    CHECK: temp[
    """)


def test_elementwise_kernels_update_in_place():
    src = """
    func @main(%x: f32[64]) -> (f32[64]) {
      %a = fusion(%x) {kind = "loop"} : f32[64] {
        ^fused(%p: f32[64]):
          %e = exponential(%p) : f32[64]
          return(%e)
      }
      %b = fusion(%a) {kind = "loop"} : f32[64] {
        ^fused(%p: f32[64]):
          %n = negate(%p) : f32[64]
          return(%n)
      }
      %c = fusion(%b, %a) {kind = "loop"} : f32[64] {
        ^fused(%p: f32[64], %q: f32[64]):
          %s = add(%p, %p) : f32[64]
          return(%s)
      }
      return(%c)
    }
    """
    m, ba = plan(src)
    ba.check()
    a, b, c = [op.results[0] for op in m.main.ops]
    # %a is still read by %c, so %b cannot overwrite it; %c overwrites %b (its last reader).
    assert ba.slice_for(b) == ba.slice_for(c) == Slice("output", 0, 0, 256)
    assert ba.slice_for(a) != ba.slice_for(b)
    filecheck(ba.text(), "CHECK: in place:")


def test_bitcasts_share_their_operands_slice():
    src = """
    func @main(%x: f32[4,8]) -> (f32[8,4]) {
      %a = exponential(%x) : f32[4,8]
      %r = reshape(%a) : f32[32]
      %s = reshape(%r) : f32[8,4]
      %n = negate(%s) : f32[8,4]
      return(%n)
    }
    """
    m, ba = plan(src)
    ba.check()
    a, r, s, n = [op.results[0] for op in m.main.ops]
    assert ba.slice_for(a) == ba.slice_for(r) == ba.slice_for(s)


def test_optimization_barrier_results_share_their_operands_slices():
    """A barrier fences and orders; it moves nothing (before, each result was a copy)."""
    src = """
    func @main(%x: f32[64], %y: f32[16]) -> (f32[64], f32[16]) {
      %a = exponential(%x) : f32[64]
      %b = negate(%y) : f32[16]
      %fa, %fb = optimization_barrier(%a, %b) : f32[64], f32[16]
      %c = tanh(%fa) : f32[64]
      %d = add(%fb, %b) : f32[16]
      return(%c, %d)
    }
    """
    m, ba = plan(src)
    ba.check()
    a, b = m.main.ops[0].results[0], m.main.ops[1].results[0]
    fa, fb = m.main.ops[2].results
    assert ba.slice_for(fa) == ba.slice_for(a) and ba.slice_for(fb) == ba.slice_for(b)
    assert ba.slice_for(a) != ba.slice_for(b)
    o = optimize(m, "interpreter")
    args = random_args(m)
    for got, want in zip(simulate(o, args), run(m, args)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_values_inside_fusions_have_no_slice():
    m, ba = plan("""
    func @main(%x: f32[4]) -> (f32[4]) {
      %a = fusion(%x) {kind = "loop"} : f32[4] {
        ^fused(%p: f32[4]):
          %e = exponential(%p) : f32[4]
          return(%e)
      }
      return(%a)
    }
    """)
    inner = m.main.ops[0].regions[0].ops[0].results[0]
    with pytest.raises(KeyError, match="live in registers"):
        ba.slice_for(inner)


UPDATE = """
func @main(%w: f32[16,8], %g: f32[16,8], %b: f32[3]) -> (f32[16,8], f32[3]) {
  %u = fusion(%w, %g) {kind = "loop"} : f32[16,8] {
    ^fused(%p: f32[16,8], %q: f32[16,8]):
      %lr = constant dense<0.5> : f32[16,8]
      %m = multiply(%q, %lr) : f32[16,8]
      %s = subtract(%p, %m) : f32[16,8]
      return(%s)
  }
  %c = negate(%b) : f32[3]
  return(%u, %c)
}
"""


def test_donated_argument_is_updated_in_place():
    m, ba = plan(UPDATE, donate=(0,))
    ba.check()
    u = m.main.body.outputs[0]
    assert ba.slice_for(u) == Slice("param", 0, 0, 512)
    assert ba.aliases == {0: 0}
    assert ba.alias_size == 512


def test_donation_that_cannot_be_honored_warns_with_the_reason():
    with pytest.warns(DonationWarning, match="donated argument 1 .* no output has its size"):
        plan("""
        func @main(%x: f32[4], %y: f32[7]) -> (f32[4]) {
          %a = negate(%x) : f32[4]
          return(%a)
        }""", donate=(1,))
    with pytest.warns(DonationWarning, match="it is itself returned"):
        plan("""
        func @main(%x: f32[4]) -> (f32[4], f32[4]) {
          %a = negate(%x) : f32[4]
          return(%a, %x)
        }""", donate=(0,))
    with pytest.warns(DonationWarning, match=r"still read \(by 'add' at step 1\) after output 0"):
        plan("""
        func @main(%x: f32[4]) -> (f32[4], f32[8]) {
          %a = negate(%x) : f32[4]
          %b = add(%x, %x) : f32[4]
          %c = concatenate(%b, %b) {dimension = 0} : f32[8]
          return(%a, %c)
        }""", donate=(0,))
    with pytest.raises(ValueError, match="argument 3 does not exist"):
        plan(UPDATE, donate=(3,))


def test_checker_catches_overlapping_live_values():
    m, ba = plan(CHAIN)
    a, b = m.main.ops[0].results[0], m.main.ops[1].results[0]
    # Put %b where %a is while %a is still being read.
    ba.slices[b] = ba.slices[a]
    with pytest.raises(BufferAssignmentError, match="overlap"):
        ba.check()


def test_checker_catches_writes_into_arguments_not_donated():
    m, ba = plan(CHAIN)
    a = m.main.ops[0].results[0]
    ba.slices[a] = Slice("param", 0, 0, 128)
    with pytest.raises(BufferAssignmentError):
        ba.check()


def test_schedule_lowers_peak_memory():
    # In this order four 4 KiB temporaries are alive at once; interleaving needs one.
    src = """
    func @main(%x: f32[32,32], %y: f32[32,32], %z: f32[32,32], %w: f32[32,32]) -> (f32[32,32]) {
      %a = transpose(%x) {permutation = [1, 0]} : f32[32,32]
      %b = transpose(%y) {permutation = [1, 0]} : f32[32,32]
      %c = transpose(%z) {permutation = [1, 0]} : f32[32,32]
      %d = transpose(%w) {permutation = [1, 0]} : f32[32,32]
      %ta = transpose(%a) {permutation = [1, 0]} : f32[32,32]
      %tb = transpose(%b) {permutation = [1, 0]} : f32[32,32]
      %s1 = add(%ta, %tb) : f32[32,32]
      %tc = transpose(%c) {permutation = [1, 0]} : f32[32,32]
      %s2 = add(%s1, %tc) : f32[32,32]
      %td = transpose(%d) {permutation = [1, 0]} : f32[32,32]
      %s3 = add(%s2, %td) : f32[32,32]
      return(%s3)
    }
    """
    m = parse_module(src)
    before = BufferAssignment(m.main.body, list(m.main.ops)).arena_size
    order, peaks = schedule_region(m.main.body)
    assert peaks["chosen"] != "current"
    m.main.body.ops = order
    ba = BufferAssignment(m.main.body, order)
    ba.check()
    assert ba.arena_size < before
    args = random_args(m)
    assert np.array_equal(simulate(_opt(m, ba), args)[0], run(m, args)[0])


def test_pipeline_donation_reuses_parameters_of_an_update_step():
    src = """
    func @main(%w: f32[64,32], %g: f32[64,32], %b: f32[32], %gb: f32[32]) -> (f32[64,32], f32[32]) {
      %lr = constant dense<0.01> : f32[64,32]
      %m = multiply(%g, %lr) : f32[64,32]
      %nw = subtract(%w, %m) : f32[64,32]
      %lrb = constant dense<0.01> : f32[32]
      %mb = multiply(%gb, %lrb) : f32[32]
      %nb = subtract(%b, %mb) : f32[32]
      return(%nw, %nb)
    }
    """
    m = parse_module(src)
    o = optimize(m, "cpu", options={"donate_argnums": (0, 2)})
    mem = o.memory_analysis()
    assert mem.alias_size_in_bytes == 64 * 32 * 4 + 32 * 4
    assert mem.temp_size_in_bytes == 0
    args = random_args(m)
    ref = run(m, args)
    for a, b in zip(simulate(o, args), ref):
        np.testing.assert_array_equal(a, b)


def test_the_overlap_sweep_agrees_with_checking_every_pair():
    """``check`` sweeps over the steps (``_clash``); on random plans, with in-place handovers,
    it finds a clash exactly when comparing every pair of values does."""
    import random

    def every_pair(vals, slices, sizes, live, allowed):
        for u in vals:
            for w in vals:
                su, sw = slices[u].offset, slices[w].offset
                if u == w or su + sizes[u] <= sw or sw + sizes[w] <= su:
                    continue
                lu, lw = live[u], live[w]
                if lu[1] < lw[0] or lw[1] < lu[0]:
                    continue
                if su == sw and ((lu[1] == lw[0] and (u, w) in allowed) or
                                 (lw[1] == lu[0] and (w, u) in allowed)):
                    continue
                return True
        return False

    rng = random.Random(0)
    found = {True: 0, False: 0}
    for _ in range(3000):
        n = rng.randint(1, 12)
        vals = list(range(n))
        sizes = {v: rng.choice([64, 128, 192]) for v in vals}
        slices = {v: Slice("temp", 0, 64 * rng.randint(0, 6), sizes[v]) for v in vals}
        live = {}
        for v in vals:
            a = rng.randint(0, 10)
            live[v] = [a, a + rng.randint(0, 3)]
        allowed = {(u, w) for u in vals for w in vals
                   if u != w and live[u][1] == live[w][0] and rng.random() < 0.7}
        want = every_pair(vals, slices, sizes, live, allowed)
        got = _clash(vals, slices, sizes, live, allowed)
        assert (got is not None) == want, (slices, live, allowed)
        if got is not None:
            u, w = got
            assert every_pair([u, w], slices, sizes, live, allowed)
        found[want] += 1
    assert found[True] > 300 and found[False] > 300
