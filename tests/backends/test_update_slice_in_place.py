"""A ``dynamic_update_slice`` over its operand's buffer writes only the update
(``cpu/update_slice.py``): a loop that stacks a row into its carry each step (a scan's outputs, the
residuals an LSTM keeps for its backward pass) neither rewrites the whole carry nor copies it
back (``lower.state_in_place`` with the pair of ``fusion_kinds.inplace_pairs``). At the top
level the buffer plan puts the result over an operand that dies there. Each program is compared
with the interpreter, with fusion on and off; where the old carry is still read after the
update in the same step, the update goes to scratch and the copy stays."""
import numpy as np
import pytest
from cpu_helpers import assert_close

from hlo.backends.cpu import compile as cpu_compile
from hlo.backends.lower import state_in_place
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.fusion_kinds import inplace_pairs
from hlo.passes.pipeline import FUSION, as_written, optimize
from hlo.runtime.cpu.target import host


def scan(body_ops: str, outputs: str, n_rows: int = 8) -> str:
    """A loop over %n steps with a counter %k, a state %y: f32[16] and a stack %acc: f32[R,16]."""
    return f"""module @m
func @main(%x: f32[16], %n: s32[], %init: f32[{n_rows},16]) -> (s32[], f32[16], f32[{n_rows},16]) {{
  %zero = constant dense<0> : s32[]
  %i, %h, %s = while(%zero, %x, %init) : s32[], f32[16], f32[{n_rows},16] {{
    ^cond(%c: s32[], %cy: f32[16], %cacc: f32[{n_rows},16]):
      %lt = compare(%c, %n) {{comparison_direction = "LT"}} : pred[]
      return(%lt)
    ^body(%k: s32[], %y: f32[16], %acc: f32[{n_rows},16]):
      %one = constant dense<1> : s32[]
      %z0 = constant dense<0> : s32[]
      %k1 = add(%k, %one) : s32[]
      %t = tanh(%y) : f32[16]
      %u = multiply(%t, %y) : f32[16]
      %row = reshape(%u) : f32[1,16]
{body_ops}
      return({outputs})
  }}
  return(%i, %h, %s)
}}
"""


STACK = "      %acc1 = dynamic_update_slice(%acc, %row, %k, %z0) : f32[8,16]"


def args(n, rows=8):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(16).astype(np.float32), np.int32(n),
            rng.standard_normal((rows, 16)).astype(np.float32)]


def run(src, a, fusion=True):
    """The loop compiled (fusion on or off), checked against the interpreter; its steps' text."""
    options = host().pass_options()
    if not fusion:
        options["disabled_passes"] = frozenset(FUSION)
    exe = cpu_compile(optimize(parse_module(src), target="cpu", options=options))
    got = exe.run(list(a))
    ref = interpret(parse_module(src), list(a))
    for g, r in zip(got, ref):
        assert_close(g, r, 1e-6, 1e-6)
    return exe.steps_text


def loop_body(steps_text: str) -> str:
    return steps_text.split("do:")[1]


def the_body(src):
    return [op for op in parse_module(src).main.ops if op.name == "while"][0].regions[1]


def carry_copies(body: str, nbytes: int = 8 * 16 * 4) -> list:
    """The copies of a whole stacked carry in a loop's steps (the counter's may stay)."""
    return [ln for ln in body.splitlines() if "copy" in ln and f"({nbytes} bytes)" in ln]


def test_the_pair():
    dus = [op for op in the_body(scan(STACK, "%k1, %u, %acc1")).ops if op.name == "dynamic_update_slice"][0]
    assert inplace_pairs(dus) == [(0, 0)]   # the operand, never the update


@pytest.mark.parametrize("fusion", [True, False])
def test_a_stacked_carry_is_updated_in_place(fusion):
    src = scan(STACK, "%k1, %u, %acc1")
    assert state_in_place(the_body(src), 2)
    body = loop_body(run(src, args(5), fusion))
    assert not carry_copies(body), body
    # the update's kernel writes the carry's own buffer (output 2: the loop's result slot)
    dus = [ln for ln in body.splitlines() if "k.dynamic_update_slice" in ln]
    assert len(dus) == 1 and "(output2," in dus[0], body


@pytest.mark.parametrize("fusion", [True, False])
def test_a_start_past_the_end_is_clamped_as_the_op_clamps_it(fusion):
    """Steps 8..11 write at start 8..11, clamped to the last row (7): in place as out of place."""
    run(scan(STACK, "%k1, %u, %acc1"), args(12), fusion)
    neg = STACK.replace("%acc, %row, %k, %z0", "%acc, %row, %m, %z0")
    src = scan("      %m = negate(%k) : s32[]\n" + neg, "%k1, %u, %acc1")   # negative: row 0
    run(src, args(4), fusion)


@pytest.mark.parametrize("fusion", [True, False])
def test_the_old_carry_read_after_the_update_sees_the_old_values(fusion):
    """%acc is read at row k after the update that writes row k: that read must see the old
    row, so the update may not go over %acc (scratch and a copy back, as before)."""
    ops = STACK + """
      %old = dynamic_slice(%acc, %k, %z0) {slice_sizes = [1, 16]} : f32[1,16]
      %oldr = reshape(%old) : f32[16]
      %y2 = add(%u, %oldr) : f32[16]"""
    src = scan(ops, "%k1, %y2, %acc1")
    assert not state_in_place(the_body(src), 2)
    body = loop_body(run(src, args(6), False))
    assert carry_copies(body), body
    run(src, args(6), fusion)


@pytest.mark.parametrize("fusion", [True, False])
def test_the_old_carry_read_before_the_update(fusion):
    """Read before the update (the row it overwrites, and the row it wrote a step ago): in place."""
    ops = """      %old = dynamic_slice(%acc, %k, %z0) {slice_sizes = [1, 16]} : f32[1,16]
      %km = subtract(%k, %one) : s32[]
      %prev = dynamic_slice(%acc, %km, %z0) {slice_sizes = [1, 16]} : f32[1,16]
      %both = add(%old, %prev) : f32[1,16]
      %row2 = add(%row, %both) : f32[1,16]
      %acc1 = dynamic_update_slice(%acc, %row2, %k, %z0) : f32[8,16]"""
    src = scan(ops, "%k1, %u, %acc1")
    assert state_in_place(the_body(src), 2)
    body = loop_body(run(src, args(7), False))
    assert not carry_copies(body), body
    run(src, args(7), fusion)


@pytest.mark.parametrize("fusion", [True, False])
def test_an_update_made_from_the_carry_itself(fusion):
    """The row written is the carry's row k-1 (a shift down the stack): read into the update
    before the carry is written."""
    ops = """      %km = subtract(%k, %one) : s32[]
      %prev = dynamic_slice(%acc, %km, %z0) {slice_sizes = [1, 16]} : f32[1,16]
      %acc1 = dynamic_update_slice(%acc, %prev, %k, %z0) : f32[8,16]"""
    run(scan(ops, "%k1, %u, %acc1"), args(8), fusion)


@pytest.mark.parametrize("fusion", [True, False])
def test_nested_loops_stack_into_the_outer_carry(fusion):
    """An inner loop stacks rows into its own carry, passed on to the outer loop's carry, which
    the outer step also updates in place; both against the interpreter."""
    src = """module @m
func @main(%x: f32[4], %init: f32[3,5,4]) -> (f32[3,5,4], f32[4]) {
  %z = constant dense<0> : s32[]
  %i, %acc, %y = while(%z, %init, %x) : s32[], f32[3,5,4], f32[4] {
    ^cond(%c: s32[], %ca: f32[3,5,4], %cy: f32[4]):
      %three = constant dense<3> : s32[]
      %lt = compare(%c, %three) {comparison_direction = "LT"} : pred[]
      return(%lt)
    ^body(%k: s32[], %a: f32[3,5,4], %yy: f32[4]):
      %one = constant dense<1> : s32[]
      %z0 = constant dense<0> : s32[]
      %blank = constant dense<0.0> : f32[5,4]
      %j, %rows, %y2 = while(%z0, %blank, %yy) : s32[], f32[5,4], f32[4] {
        ^cond(%d: s32[], %cr: f32[5,4], %cyy: f32[4]):
          %five = constant dense<5> : s32[]
          %lt2 = compare(%d, %five) {comparison_direction = "LT"} : pred[]
          return(%lt2)
        ^body(%m: s32[], %r: f32[5,4], %w: f32[4]):
          %one2 = constant dense<1> : s32[]
          %zz = constant dense<0> : s32[]
          %m1 = add(%m, %one2) : s32[]
          %w2 = sine(%w) : f32[4]
          %wr = reshape(%w2) : f32[1,4]
          %r2 = dynamic_update_slice(%r, %wr, %m, %zz) : f32[5,4]
          return(%m1, %r2, %w2)
      }
      %slab = reshape(%rows) : f32[1,5,4]
      %a2 = dynamic_update_slice(%a, %slab, %k, %z0, %z0) : f32[3,5,4]
      %k1 = add(%k, %one) : s32[]
      return(%k1, %a2, %y2)
  }
  return(%acc, %y)
}
"""
    rng = np.random.default_rng(1)
    a = [rng.standard_normal(4).astype(np.float32), rng.standard_normal((3, 5, 4)).astype(np.float32)]
    steps = run(src, a, fusion)
    body = loop_body(steps)   # the outer step, the inner loop in it; copies in: the inner's start
    assert not carry_copies(body, 3 * 5 * 4 * 4), steps
    inner = carry_copies(body, 5 * 4 * 4)
    assert len(inner) == 1 and "const#" in inner[0], steps   # the inner carry's zeros, once a step


def test_a_top_level_update_goes_over_its_dying_operand():
    """Outside loops the buffer plan puts the result over the operand (it dies there) and the
    kernel writes only the update's 16 elements: its loop runs over one row."""
    src = """module @m
func @main(%a: f32[64,16], %v: f32[16], %k: s32[]) -> (f32[64,16]) {
  %z = constant dense<0> : s32[]
  %e = exponential(%a) : f32[64,16]
  %row = reshape(%v) : f32[1,16]
  %d = dynamic_update_slice(%e, %row, %k, %z) : f32[64,16]
  %r = negate(%d) : f32[64,16]
  return(%r)
}
"""
    opt = as_written(parse_module(src))
    ops = {op.name: op for op in opt.module.main.ops}
    plan = opt.buffers
    assert plan.slice_for(ops["dynamic_update_slice"].results[0]) == plan.slice_for(ops["exponential"].results[0])
    exe = cpu_compile(opt)
    dus = [ln for ln in exe.steps_text.splitlines() if "k.dynamic_update_slice" in ln]
    assert len(dus) == 1 and dus[0].rstrip().endswith("x1  dynamic_update_slice"), exe.steps_text  # not x64
    rng = np.random.default_rng(2)
    for k in (0, 5, 63, 100, -3):
        a = [rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal(16).astype(np.float32),
             np.int32(k)]
        assert_close(exe.run(list(a))[0], interpret(parse_module(src), list(a))[0], 1e-6, 1e-6)
