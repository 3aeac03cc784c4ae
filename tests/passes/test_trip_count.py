"""``passes.trip_count.known_trip_count``: a ``while`` whose counter starts at a constant, steps
by one and is compared below a constant runs its body a known number of times -- read from IR
text, from the optimized program (through fusions), from a traced ``fori_loop``; every other
shape gives None. Steps carry it through JSON; the CUDA runtime's use of it is tested in
``tests/cuda/test_cuda_runtime_nogpu.py``."""
from __future__ import annotations

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.passes.pipeline import optimize
from hlo.passes.trip_count import known_trip_count
from hlo.runtime.steps import BufRef, While, describe_steps, steps_from_json, steps_to_json


def loop(start="0", bound="5", direction="LT", step="1", counter_out="%k1", bound_value=None):
    bound_def = (f'%n = constant dense<{bound}> : s32[]' if bound_value is None else "")
    return f"""
    func @main(%x: f32[4], %m: s32[]) -> (s32[], f32[4]) {{
      %zero = constant dense<{start}> : s32[]
      %i, %h = while(%zero, %x) : s32[], f32[4] {{
        ^cond(%c: s32[], %ch: f32[4]):
          {bound_def}
          %lt = compare(%c, {bound_value or '%n'}) {{comparison_direction = "{direction}"}} : pred[]
          return(%lt)
        ^body(%k: s32[], %y: f32[4]):
          %one = constant dense<{step}> : s32[]
          %k1 = add(%k, %one) : s32[]
          %t = tanh(%y) : f32[4]
          %u = multiply(%t, %y) : f32[4]
          return({counter_out}, %u)
      }}
      return(%i, %h)
    }}
    """


def the_while(module):
    return [op for op in module.main.ops if op.name == "while"][0]


@pytest.mark.parametrize("start,bound,trips", [("0", "5", 5), ("2", "5", 3), ("7", "5", 0), ("-3", "4", 7)])
def test_a_counted_loop_has_its_trip_count_before_and_after_fusion(start, bound, trips):
    m = parse_module(loop(start, bound))
    assert known_trip_count(the_while(m)) == trips
    opt = optimize(m, target="cpu")
    w = the_while(opt.module)
    assert any(op.name == "fusion" for r in w.regions for op in r.ops), opt.text()
    assert known_trip_count(w) == trips


@pytest.mark.parametrize("kw", [{"direction": "LE"}, {"step": "2"}, {"bound_value": "%m"},
                                {"counter_out": "%k"}, {"direction": "GT"}])
def test_other_loops_have_none(kw):
    m = parse_module(loop(**kw))
    assert known_trip_count(the_while(m)) is None
    assert known_trip_count(the_while(optimize(m, target="cpu").module)) is None


def test_a_traced_fori_loop_with_constant_bounds_has_one_and_one_with_a_traced_bound_not():
    x = np.ones(4, np.float32)
    c = hlo.jit(lambda x: hlo.lax.fori_loop(3, 11, lambda i, h: hnp.tanh(h) + i, x)).lower(x).compile("cpu")
    assert [known_trip_count(op) for op in c.ir.main.walk() if op.name == "while"] == [8]
    c = hlo.jit(lambda x, n: hlo.lax.fori_loop(0, n, lambda i, h: h * 2, x)).lower(x, np.int32(3)).compile("cpu")
    assert [known_trip_count(op) for op in c.ir.main.walk() if op.name == "while"] == [None]


def test_the_while_step_carries_the_trip_count_through_json_and_its_description():
    ref = BufRef("arena", 0, 0, 1)
    for trips in (None, 0, 12):
        (back,) = steps_from_json(steps_to_json([While([], ref, [], trips)]))
        assert back.trip_count == trips
    assert describe_steps([While([], ref, [], 12)])[0].strip() == "while (12 steps):"
    assert describe_steps([While([], ref, [])])[0].strip() == "while:"

