"""Interpreter entry point: argument checking, error messages, coverage of the op table, outputs
that are fresh arrays, and a parsed text module end to end."""
from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_same, one_op_module

from hlo.ir import IRError, VerifyError, parse_module
from hlo.ir.interp import HANDLERS
from hlo.ir.interpreter import InterpreterError, run
from hlo.ir.ops import OPS

TEXT = """module @example

func @main(%arg0: f32[4,8], %arg1: f32[8]) -> (f32[4]) {
  %0 = broadcast_in_dim(%arg1) {broadcast_dimensions = [1]} : f32[4,8] loc("model.py":3)
  %1 = add(%arg0, %0) : f32[4,8] loc("model.py":3)
  %2 = constant dense<0.0> : f32[]
  %3 = reduce(%1, %2) {dimensions = [1]} : f32[4] {
    ^body(%4: f32[], %5: f32[]):
      %6 = add(%4, %5) : f32[]
      return(%6)
  }
  return(%3)
}
"""


def test_every_op_in_the_table_has_a_handler():
    assert set(OPS) - set(HANDLERS) == set()
    assert set(HANDLERS) - set(OPS) == set()


def test_interpreter_error_is_an_ir_error():
    assert issubclass(InterpreterError, IRError)


def test_runs_parsed_text():
    m = parse_module(TEXT)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones(8, np.float32)
    (out,) = run(m, [a, b])
    assert_same(out, (a + b).sum(1))
    assert out.flags.writeable and out.flags.c_contiguous


@pytest.mark.parametrize("args,match", [
    ([np.zeros((4, 8), np.float32)], r"takes 2 argument\(s\).*got 1"),
    ([np.zeros((4, 8), np.float64), np.zeros(8, np.float32)], r"argument #0 must be f32\[4,8\].*float64"),
    ([np.zeros((4, 9), np.float32), np.zeros(8, np.float32)], r"argument #0 must be f32\[4,8\].*shape \(4, 9\)"),
    ([np.zeros((4, 8), np.float32), [1.0] * 8], r"argument #1 must be a numpy array"),
])
def test_bad_arguments(args, match):
    with pytest.raises(InterpreterError, match=match):
        run(parse_module(TEXT), args)


def test_arguments_must_be_a_sequence():
    with pytest.raises(InterpreterError, match="list or tuple"):
        run(parse_module(TEXT), np.zeros((4, 8), np.float32))


def test_unknown_function():
    with pytest.raises(InterpreterError, match=r"no function @nope.*@main"):
        run(parse_module(TEXT), [], function="nope")


def test_numpy_scalars_are_accepted_for_rank0():
    m = one_op_module("add", [np.float32(1), np.float32(2)])
    assert_same(run(m, [np.float32(1), np.float32(2)])[0], np.array(3, np.float32))


def test_unimplemented_op_names_op_and_location(monkeypatch):
    m = parse_module(TEXT)
    monkeypatch.delitem(HANDLERS, "broadcast_in_dim")
    with pytest.raises(InterpreterError, match=r"'broadcast_in_dim' \(operands: f32\[8\]\) at model.py:3: "
                                               r"the interpreter does not implement"):
        run(m, [np.zeros((4, 8), np.float32), np.zeros(8, np.float32)])


def test_failure_inside_an_op_names_the_op(monkeypatch):
    m = parse_module(TEXT)

    def broken(it, op, ins, env):
        raise ValueError("boom")
    monkeypatch.setitem(HANDLERS, "add", broken)
    with pytest.raises(InterpreterError, match=r"'add' \(operands: f32\[4,8\], f32\[4,8\]\) at model.py:3: ValueError: boom"):
        run(m, [np.zeros((4, 8), np.float32), np.zeros(8, np.float32)])


def test_wrong_result_from_a_handler_is_caught(monkeypatch):
    m = parse_module(TEXT)
    monkeypatch.setitem(HANDLERS, "add", lambda it, op, ins, env: [ins[0].astype(np.float64)])
    with pytest.raises(InterpreterError, match="interpreter bug"):
        run(m, [np.zeros((4, 8), np.float32), np.zeros(8, np.float32)])


def test_unverified_module_is_refused():
    m = parse_module(TEXT)
    op = m.main.body.ops[1]
    op.attrs["bogus"] = 1
    with pytest.raises(VerifyError, match="unknown attribute 'bogus'"):
        run(m, [np.zeros((4, 8), np.float32), np.zeros(8, np.float32)])


def test_inputs_are_not_modified_and_outputs_are_copies():
    m = one_op_module("negate", [np.zeros(3, np.float32)])
    x = np.arange(3, dtype=np.float32)
    out = run(m, [x])[0]
    out[0] = 100
    assert_same(x, np.arange(3, dtype=np.float32))


def test_layouts_do_not_change_values():
    text = TEXT.replace("%arg0: f32[4,8]", "%arg0: f32[4,8]{0,1}")
    m = parse_module(text)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert_same(run(m, [a, np.zeros(8, np.float32)])[0], a.sum(1))


def test_deep_programs_free_dead_values():
    """A long chain of ops: values die after their last use (the run stays small)."""
    lines = ["func @main(%arg0: f32[256,256]) -> (f32[256,256]) {", "  %0 = negate(%arg0) : f32[256,256]"]
    for i in range(1, 200):
        lines.append(f"  %{i} = negate(%{i - 1}) : f32[256,256]")
    lines += ["  return(%199)", "}"]
    m = parse_module("\n".join(lines))
    x = np.ones((256, 256), np.float32)
    assert_same(run(m, [x])[0], np.ones((256, 256), np.float32))
    from hlo.ir.interpreter import Interpreter
    plan = Interpreter(m)._drop_plan(m.main.body)
    assert sum(len(p) for p in plan) == 200  # %arg0 and %0..%198


def test_random_modules_run_and_give_declared_types():
    """Random valid modules (every op kind, zero-sized and rank-0 shapes) run to completion."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from interp_helpers import sample
    from ir_gen import build_module

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        m = build_module(data.draw)
        rng = np.random.default_rng(0)
        args = [sample(rng, t.np_dtype, t.shape) for t in m.main.arg_types]
        outs = run(m, args)
        assert [(o.shape, o.dtype) for o in outs] == [(t.shape, t.np_dtype) for t in m.main.result_types]
    check()
