"""A loop's step writes its new state over the old one where that is safe (``lower.state_in_place``):
no scratch buffer and no copy back every step. Through the CPU pipeline, against the interpreter;
where a later op of the step still reads the old state, or the state is passed to another slot,
the copy stays."""
import numpy as np
from cpu_helpers import assert_close, compile_through_pipeline

from hlo.backends.lower import state_in_place
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import optimize


def loop(body_ops, outputs, state="%k, %y", extra_types=""):
    return f"""module @m
func @main(%x: f32[64], %n: s32[]) -> (s32[], f32[64]{extra_types}) {{
  %zero = constant dense<0> : s32[]
  %i, %h{", %e" if extra_types else ""} = while(%zero, %x{", %x" if extra_types else ""}) : s32[], f32[64]{extra_types} {{
    ^cond(%c: s32[], %ch: f32[64]{", %ce: f32[64]" if extra_types else ""}):
      %lt = compare(%c, %n) {{comparison_direction = "LT"}} : pred[]
      return(%lt)
    ^body({"%k: s32[], %y: f32[64]" + (", %z: f32[64]" if extra_types else "")}):
      %one = constant dense<1> : s32[]
      %k1 = add(%k, %one) : s32[]
{body_ops}
      return({outputs})
  }}
  return(%i, %h{", %e" if extra_types else ""})
}}
"""


def run_both(src, n=5):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(64).astype(np.float32), np.int32(n)]
    exe = compile_through_pipeline(src)
    got = exe.run(list(args))
    ref = interpret(parse_module(src), list(args))
    for g, r in zip(got, ref):
        assert_close(g, r, 1e-5, 1e-5)
    body = exe.steps_text.split("do:")[1]
    return body


def test_an_elementwise_step_writes_its_state_in_place():
    src = loop("""      %t = tanh(%y) : f32[64]
      %u = multiply(%t, %y) : f32[64]""", "%k1, %u")
    body = run_both(src)
    assert "copy" not in body, body
    w = [op for op in optimize(parse_module(src), target="cpu").module.main.ops if op.name == "while"][0]
    assert [state_in_place(w.regions[1], i) for i in range(2)] == [True, True]


def the_body(src):
    return [op for op in parse_module(src).main.ops if op.name == "while"][0].regions[1]


def test_a_swapped_state_keeps_its_copies():
    src = loop("""      %t = tanh(%y) : f32[64]""", "%k1, %z, %t", extra_types=", f32[64]")
    assert not state_in_place(the_body(src), 1)   # the old %z goes to slot 1: %y is still needed
    body = run_both(src)
    assert "copy" in body, body


def test_the_old_state_read_after_the_new_one_is_made_keeps_the_copy():
    """%u is made first; a reduction after it still reads the old %y, so %u may not overwrite it
    (the unfused body, where that order is fixed); through the pipeline, whatever fusion does,
    the loop matches the interpreter."""
    src = loop("""      %t = tanh(%y) : f32[64]
      %u = multiply(%t, %y) : f32[64]
      %zf = constant dense<0.0> : f32[]
      %s = reduce(%y, %zf) {dimensions = [0]} : f32[] {
        ^body(%a: f32[], %b: f32[]):
          %r = add(%a, %b) : f32[]
          return(%r)
      }
      %sb = broadcast_in_dim(%s) {broadcast_dimensions = []} : f32[64]
      %e = add(%z, %sb) : f32[64]""", "%k1, %u, %e", extra_types=", f32[64]")
    body = the_body(src)
    assert not state_in_place(body, 1)
    assert state_in_place(body, 0) and state_in_place(body, 2)   # the counter; %e over %z
    run_both(src, n=3)
