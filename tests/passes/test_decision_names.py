"""Decisions and the buffer plan name values as the printed IR does (``%N``), with the op and
the user's ``file:line``: IR text in, decisions out; and every name a dump's decision log uses
is found, with that op and line, in the dump file the log says the pass read."""
import os
import re

import numpy as np
from pass_testing import run_passes

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module, print_module
from hlo.ir.printer import value_names
from hlo.passes.pipeline import optimize

SOFTMAX = """
func @main(%x: f32[4,8]) -> (f32[4,8]) loc("model.py":1) {
  %ninf = constant dense<-inf> : f32[] loc("model.py":2)
  %m = reduce(%x, %ninf) {dimensions = [1]} : f32[4] loc("model.py":2) {
    ^body(%a: f32[], %b: f32[]):
      %c = maximum(%a, %b) : f32[] loc("model.py":2)
      return(%c)
  }
  %mb = broadcast_in_dim(%m) {broadcast_dimensions = [0]} : f32[4,8] loc("model.py":3)
  %d = subtract(%x, %mb) : f32[4,8] loc("model.py":3)
  %e = exponential(%d) : f32[4,8] loc("model.py":4)
  %w = constant dense<1.0> : f32[8,8] loc("model.py":5)
  %p = dot_general(%e, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,8] loc("model.py":5)
  %t = tanh(%p) : f32[4,8] loc("model.py":6)
  return(%t)
}
"""


def test_fusion_decisions_name_values_as_the_ir_text_prints_them():
    log: list = []
    run_passes(SOFTMAX, ["layout-assignment", "fusion"], "cpu", None, log)
    # The input, as printed: %0 constant, %1 reduce (%2..%4 its body), %5 broadcast_in_dim,
    # %6 subtract, %7 exponential, %8 constant, %9 dot_general, %10 tanh.
    assert log == [
        "fusion: fused %9 dot_general (model.py:5) into %10 tanh (model.py:6) -> "
        "output_fusion.0 (output fusion (dot with prologue/epilogue))",
        "fusion: not fused: %7 exponential (model.py:4) -> output_fusion.0: the consumer reads "
        "each element of the producer many times (broadcast or dot operand), which would "
        "recompute its expensive work",
        "fusion: fused %6 subtract (model.py:3) into %7 exponential (model.py:4) -> loop_fusion.0 "
        "(loop fusion)",
        "fusion: fused %5 broadcast_in_dim (model.py:3) into loop_fusion.0 -> loop_fusion.0 "
        "(loop fusion)",
        "fusion: fused %1 reduce (model.py:2) into loop_fusion.0 -> input_fusion.0 "
        "(input fusion (reduction))",
        "fusion: fused input_fusion.0 into output_fusion.0 -> output_fusion.0 (output fusion (dot "
        "with prologue/epilogue))",  # cpu takes a row-wise prologue into a dot's operand
    ], "\n".join(log)


def test_buffer_plan_names_values_with_their_op_and_line():
    out = run_passes(SOFTMAX, ["layout-assignment", "fusion", "schedule"], "cpu")
    o = optimize(parse_module(out), "cpu")
    text = o.buffers.text()
    printed = print_module(o.module)
    # each value the plan lists is printed with that name, op and line in the optimized IR
    labels = re.findall(r"(%\d+) (\S+) \((model\.py:\d+)\)", text)
    assert labels, text
    for name, what, loc in labels:
        file, line = loc.split(":")
        line_re = rf"^\s*{name}(, %\d+)* = (fusion\(.*name = \"{re.escape(what)}\"|{what}\().*" \
                  rf"loc\(\"{file}\":{line}\)"
        assert re.search(line_re, printed, re.M), (name, what, loc, printed)
    assert re.search(r"values %arg0\b", text), text


def test_value_names_are_the_printers_at_any_depth():
    src = """
    func @main(%x: f32[4], %n: s32[]) -> (f32[4]) {
      %z = constant dense<0> : s32[]
      %i, %y = while(%z, %x) : s32[], f32[4] {
        ^cond(%c: s32[], %v: f32[4]):
          %lt = compare(%c, %n) {comparison_direction = "LT"} : pred[]
          return(%lt)
        ^body(%k: s32[], %u: f32[4]):
          %one = constant dense<1> : s32[]
          %k1 = add(%k, %one) : s32[]
          %f = fusion(%u) {kind = "loop", name = "loop_fusion.0"} : f32[4] {
            ^fused(%q: f32[4]):
              %s = sine(%q) : f32[4]
              return(%s)
          }
          return(%k1, %f)
      }
      return(%y)
    }
    """
    m = parse_module(src)
    names = value_names(m.main)
    text = print_module(m)
    for op in m.main.walk():
        lhs = ", ".join(names[r] for r in op.results)
        if lhs:
            assert re.search(rf"^\s*{re.escape(lhs)} = {op.name}", text, re.M), (lhs, op.name, text)
        for region in op.regions:
            args = ", ".join(f"{names[a]}: {a.type}" for a in region.args)
            assert f"^{region.name}({args}):" in text, (args, text)
    assert sorted(int(n[1:]) for n in names.values() if not n.startswith("%arg")) == list(range(13))


def _model(x, w):
    h = hnp.tanh(x @ w)
    s = hnp.sum(h, axis=1, keepdims=True)
    return hnp.exp(h - s) * 2.0


def test_every_label_in_the_dumped_decisions_is_in_the_file_its_pass_read(tmp_path):
    x, w = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    low = hlo.jit(_model).lower(x, w)
    low.compile(target="cpu", dump_dir=str(tmp_path))
    d = tmp_path
    decisions = (d / "fusion-decisions.txt").read_text()
    read = dict(re.findall(r"^//   (\S+): (\S+\.hlo)", decisions, re.M))
    assert "fusion" in read, decisions
    me = os.path.basename(__file__)
    seen = 0
    for line in decisions.splitlines():
        prefix = line.split(":")[0]
        if line.startswith("//") or prefix not in read:
            continue
        ir = (d / read[prefix]).read_text()
        for name, what, file, lineno in re.findall(r"(%\d+) (\S+) \(([^:()]+):(\d+)\)", line):
            seen += 1
            assert file == me, line  # the user's line, not hlo's
            assert re.search(rf"^\s*{name}(, %\d+)* = {re.escape(what)}\b.*loc\(\"{file}\":{lineno}\)",
                             ir, re.M), (line, read[prefix])
    assert seen >= 5, decisions
    # the per-pass dump says which IR its decisions' names belong to
    fusion_dump = next(f for f in os.listdir(d) if re.match(r"\d{3}-fusion\.hlo$", f))
    assert f"// (values below are named as in {read['fusion']}, the IR this pass read)" in \
        (d / fusion_dump).read_text()
