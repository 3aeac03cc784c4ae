"""Where a loop's state lives when the loop starts: an operand that dies at the ``while`` is
already the state's buffer (``fusion_kinds.inplace_pairs``: (i, i), merged by the buffer plan;
one value passed to two slots gives its buffer to one of them), and a slot the body passes
through unchanged reads an input where it is when nothing after the loop reads that result
(``lower.read_in_place``); a donated input, a result read after the loop, keep their copies. IR
text in, the plan and the steps out, and every program against the interpreter."""
import numpy as np
from cpu_helpers import assert_close

from hlo.backends.cpu import compile as cpu_compile
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import as_written, optimize

LOOP = """module @m
func @main(%x: f32[64], %w: f32[64], %n: s32[]) -> ({results}) {{
  %zero = constant dense<0> : s32[]
  %e = exponential(%x) : f32[64]
  %i, %a, %b, %ww = while(%zero, %e, {second}, %w) : s32[], f32[64], f32[64], f32[64] {{
    ^cond(%c: s32[], %ca: f32[64], %cb: f32[64], %cw: f32[64]):
      %lt = compare(%c, %n) {{comparison_direction = "LT"}} : pred[]
      return(%lt)
    ^body(%k: s32[], %y: f32[64], %z: f32[64], %v: f32[64]):
      %one = constant dense<1> : s32[]
      %k1 = add(%k, %one) : s32[]
      %t = tanh(%y) : f32[64]
      %u = multiply(%t, %v) : f32[64]
      %s = add(%z, %u) : f32[64]
      return(%k1, %u, %s, %v)
  }}
  {tail}
}}
"""


def program(second="%x", results="f32[64], f32[64]", tail="return(%a, %b)"):
    return LOOP.format(second=second, results=results, tail=tail)


def check(src, donate=()):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32),
            np.int32(4)]
    opt = optimize(parse_module(src), target="cpu", options={"donate_argnums": tuple(donate)})
    exe = cpu_compile(opt)
    got = exe.run([a.copy() for a in args])
    for g, r in zip(got, interpret(parse_module(src), list(args))):
        assert_close(g, r, 1e-6, 1e-6)
    return opt, exe.steps_text.split("while")[0]   # the steps before the loop: its copies in


def loop_op(opt):
    return [op for op in opt.module.main.ops if op.name == "while"][0]


def test_an_operand_that_dies_at_the_loop_is_its_state():
    opt = as_written(parse_module(program()))
    w = loop_op(opt)
    plan = opt.buffers
    assert plan.slice_for(w.results[1]) == plan.slice_for(w.operands[1])   # %e: no copy in
    _, before = check(program())
    assert "copy input0" in before and "copy input1" not in before, before   # %x copied; %w read


def test_one_value_in_two_slots_gives_its_buffer_to_one():
    """%a is not read after the loop, so the first slot's buffer ends at the loop too: the second
    slot may not take it as well (the two states would be one buffer)."""
    src = program(second="%e", results="f32[64]", tail="return(%b)")
    opt = as_written(parse_module(src))
    w = loop_op(opt)
    plan = opt.buffers
    plan.check()
    assert plan.slice_for(w.results[1]) != plan.slice_for(w.results[2])
    assert plan.slice_for(w.operands[1]) in (plan.slice_for(w.results[1]), plan.slice_for(w.results[2]))
    _, before = check(src)
    assert before.count("(256 bytes)") == 1, before   # one copy of %e, into the other slot


def test_a_passed_through_input_read_after_the_loop_is_copied():
    src = program(results="f32[64], f32[64], f32[64]", tail="return(%a, %b, %ww)")
    _, before = check(src)
    assert "copy input1" in before, before


def test_a_donated_input_passed_through_is_copied():
    """%w is donated and its buffer holds an output after the loop: the loop may not read it
    there while that output is being written."""
    src = """module @m
func @main(%x: f32[64], %w: f32[64], %n: s32[]) -> (f32[64], f32[64]) {
  %zero = constant dense<0> : s32[]
  %i, %a, %ww = while(%zero, %x, %w) : s32[], f32[64], f32[64] {
    ^cond(%c: s32[], %ca: f32[64], %cw: f32[64]):
      %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
      return(%lt)
    ^body(%k: s32[], %y: f32[64], %v: f32[64]):
      %one = constant dense<1> : s32[]
      %k1 = add(%k, %one) : s32[]
      %t = tanh(%y) : f32[64]
      %u = multiply(%t, %v) : f32[64]
      return(%k1, %u, %v)
  }
  %o = negate(%a) : f32[64]
  return(%o, %a)
}
"""
    plain, before = check(src)
    assert "copy input1" not in before, before
    opt, before = check(src, donate=(1,))
    assert list(opt.buffers.aliases.values()) == [1], opt.buffers.text()   # an output over %w
    assert "copy input1" in before, before
