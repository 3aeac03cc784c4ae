"""The pipeline: per-target pass lists, options, verification between passes, timing, dumps,
and ``python -m hlo.opt``."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from pass_testing import random_args, simulate

from hlo.ir import parse_module, print_module
from hlo.ir.interpreter import run
from hlo.passes.analysis import cost_analysis, memory_analysis
from hlo.passes.base import Pass
from hlo.passes.dump import add_backend_times
from hlo.passes.options import Options, PassConfig
from hlo.passes.pipeline import PipelineError, Runner, optimize, pipeline_passes
from hlo.passes.registry import create_pass, registered_passes

SRC = """
module @mlp
func @main(%x: f32[8,16], %w: f32[16,4], %b: f32[4]) -> (f32[8,4]) {
  %d = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[8,4]
  %bb = broadcast_in_dim(%b) {broadcast_dimensions = [1]} : f32[8,4]
  %a = add(%d, %bb) : f32[8,4]
  %z = constant dense<0.0> : f32[8,4]
  %r = maximum(%a, %z) : f32[8,4]
  return(%r)
}
"""


def test_optimize_leaves_its_input_alone_and_reports_everything():
    m = parse_module(SRC)
    before = print_module(m)
    o = optimize(m, "cpu")
    assert print_module(m) == before
    assert o.schedule == list(o.module.main.ops)
    assert [n for n, _ in o.pass_times][:7] == ["inline", "canonicalize", "algebraic-simplifier",
                                               "constant-folding", "window-scan", "cse", "dce"]
    assert all(t >= 0 for _, t in o.pass_times)
    assert any(re.match(r"fusion: fused %\d+ dot_general", d) for d in o.decisions), o.decisions
    assert parse_module(o.text())  # the optimized IR parses back
    c = cost_analysis(o)
    assert c["kernels"] == 1 and c["flops"] >= 2 * 8 * 4 * 16
    assert c["bytes accessed"] == (8 * 16 + 16 * 4 + 4 + 8 * 4) * 4
    mem = memory_analysis(o)
    assert (mem.argument_size_in_bytes, mem.output_size_in_bytes, mem.temp_size_in_bytes) == \
        ((8 * 16 + 16 * 4 + 4) * 4, 8 * 4 * 4, 0)


@pytest.mark.parametrize("target", ["interpreter", "cpu", "cuda"])
def test_every_target_preserves_meaning(target):
    m = parse_module(SRC)
    o = optimize(m, target)
    args = random_args(m)
    np.testing.assert_array_equal(run(o.module, args)[0], run(m, args)[0])
    np.testing.assert_array_equal(simulate(o, args)[0], run(m, args)[0])


def test_options_as_dict_or_dataclass_and_bad_options():
    m = parse_module(SRC)
    o = optimize(m, "cpu", options={"fusion": False})
    assert not any(op.name == "fusion" for op in o.module.main.ops)
    o = optimize(m, "cpu", options=Options(disabled_passes={"cse", "layout-assignment"}))
    names = {n for n, _ in o.pass_times}
    assert "cse" not in names and "layout-assignment" not in names and "fusion" in names
    with pytest.raises(ValueError, match="unknown optimization option.*fusoin"):
        optimize(m, "cpu", options={"fusoin": False})
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        optimize(m, "tpu")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        optimize(m, "cpu", options={"dump_filter": "("})
    # The jit front door's spelling of donation is accepted.
    assert Options.from_any({"donated_args": (0,)}).donate_argnums == (0,)


def test_pipeline_lists_per_target():
    simplify, rest = pipeline_passes("cpu", Options())
    assert simplify[0] == "inline" and rest[-2:] == ["schedule", "buffer-assignment"]
    assert "fusion" in rest
    simplify, rest = pipeline_passes("cuda", Options(fusion=False))
    assert "fusion" not in rest and "horizontal-fusion" not in rest


class _Breaker(Pass):
    name = "breaker"

    def run(self, module):
        op = module.main.ops[0]
        op.operands = list(reversed(op.operands))  # dot operands swapped: shapes no longer agree
        return True


def test_verification_between_passes_names_the_pass():
    m = parse_module(SRC)
    runner = Runner(PassConfig("cpu"), None)
    with pytest.raises(PipelineError, match="after pass 'breaker'"):
        runner.run(_Breaker(), m)


class _QuietBreaker(_Breaker):
    name = "quiet-breaker"

    def run(self, module):
        super().run(module)
        return False  # claims it changed nothing


def test_verification_modes():
    # Default: after every pass that reports a change; "all": after every pass.
    m = parse_module(SRC)
    Runner(PassConfig("cpu"), None).run(_QuietBreaker(), m)
    m = parse_module(SRC)
    with pytest.raises(PipelineError, match="after pass 'quiet-breaker'"):
        Runner(PassConfig("cpu", Options(verify="all")), None).run(_QuietBreaker(), m)
    m = parse_module(SRC)
    Runner(PassConfig("cpu", Options(verify=False)), None).run(_Breaker(), m)
    with pytest.raises(ValueError, match="verify must be True, False or 'all'"):
        Options.from_any({"verify": "sometimes"})
    o = optimize(parse_module(SRC), "cpu", options={"verify": "all"})
    t = o.compile_times
    assert set(t) == {"passes", "verify", "optimize"} and t["verify"] > 0
    assert t["optimize"] >= t["passes"] + t["verify"]
    assert optimize(parse_module(SRC), "cpu", options={"verify": False}).compile_times["verify"] == 0


def test_registry_lists_every_pass():
    names = set(registered_passes())
    assert {"dce", "cse", "constant-folding", "algebraic-simplifier", "canonicalize", "inline",
            "layout-assignment", "fusion", "multi-output-fusion", "horizontal-fusion", "schedule",
            "buffer-assignment", "window-scan"} <= names
    with pytest.raises(KeyError, match="unknown pass 'nope'"):
        create_pass("nope")


def test_dump_dir_holds_every_pass_decisions_and_plan(tmp_path):
    m = parse_module(SRC)
    o = optimize(m, "cpu", dump_dir=str(tmp_path))
    files = sorted(os.listdir(tmp_path))
    numbered = [f for f in files if re.match(r"\d{3}-", f)]
    assert numbered[0] == "000-input.hlo"
    assert len(numbered) == len(o.pass_times) + 1
    for f in numbered:
        parse_module(open(tmp_path / f).read())  # decisions are // comments: still parses
    fusion_dump = next(f for f in numbered if re.match(r"\d{3}-fusion\.hlo$", f))
    assert "// fusion: fused" in open(tmp_path / fusion_dump).read()
    assert re.search(r"^fusion: fused %\d+ dot_general", open(tmp_path / "fusion-decisions.txt").read(), re.M)
    plan = open(tmp_path / "buffer-assignment.txt").read()
    assert "buffer assignment: arena" in plan and "live [" in plan
    summary = open(tmp_path / "summary.txt").read()
    assert "time per pass" in summary and "1 kernels" in summary
    for name, _ in o.pass_times:
        assert name in summary
    assert re.search(r"compile time \(seconds\):\n  passes \(summed\) +[0-9.]+\n  verification between "
                     r"passes +[0-9.]+\n  optimize \(clone, passes, verification, dumps\) +[0-9.]+\n$", summary)
    # A backend appends its own figures and the total.
    times = add_backend_times(str(tmp_path), 0.5, {"emit": 0.25, "llvm_opt": 1.0, "load": 0.125})
    assert times["backend"] == 1.375 and times["total"] == 1.875
    tail = open(tmp_path / "summary.txt").read()[len(summary):]
    assert "backend: LLVM optimization" in tail and "1.000000" in tail
    assert re.search(r"total compile \(optimize \+ backend\) +1\.875000\n$", tail)


def test_dump_filter_and_environment_variable(tmp_path, monkeypatch):
    m = parse_module(SRC)
    optimize(m, "cpu", dump_dir=str(tmp_path / "f"), options={"dump_filter": "fusion$"})
    dumped = [f for f in os.listdir(tmp_path / "f") if re.match(r"\d{3}-", f)]
    assert sorted(f.split("-", 1)[1] for f in dumped) == ["fusion.hlo", "horizontal-fusion.hlo", "input.hlo",
                                                                 "multi-output-fusion.hlo"]
    monkeypatch.setenv("HLO_DUMP_DIR", str(tmp_path / "env"))
    optimize(m, "cpu")
    optimize(m, "cpu")
    assert sorted(os.listdir(tmp_path / "env")) == ["mlp", "mlp.1"]


def test_opt_command_line(tmp_path, capsys):
    from hlo.tools.opt import main
    f = tmp_path / "m.hlo"
    f.write_text(SRC)
    assert main(["--passes=layout-assignment,fusion,schedule,buffer-assignment", str(f)]) == 0
    out = capsys.readouterr().out
    assert 'kind = "output"' in out and "// buffer assignment: arena" in out
    parse_module(out)
    assert main(["--pipeline", "--target=interpreter", str(f)]) == 0
    assert main(["--list"]) == 0
    assert "horizontal-fusion" in capsys.readouterr().out
    assert main(["--passes=nope", str(f)]) == 1
    assert "unknown pass 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.hlo"
    bad.write_text("func @main(%x: f32[4]) -> (f32[4]) {\n  %y = add(%x, %q) : f32[4]\n  return(%y)\n}\n")
    assert main(["--passes=dce", str(bad)]) == 1
    assert "bad.hlo:2:" in capsys.readouterr().err
    assert main(["--passes=dce", str(tmp_path / "missing.hlo")]) == 1


def test_opt_runs_as_a_module(tmp_path):
    f = tmp_path / "m.hlo"
    f.write_text(SRC)
    p = subprocess.run([sys.executable, "-m", "hlo.opt", "--passes=canonicalize,cse,dce", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "func @main" in p.stdout


def test_cpu_backend_adds_its_compile_times_to_the_dump_summary(tmp_path):
    from hlo.backends.cpu import compile as cpu_compile
    o = optimize(parse_module(SRC), "cpu", dump_dir=str(tmp_path))
    exe = cpu_compile(o)
    t = exe.compile_times
    for key in ("emit", "llvm_opt", "llvm_codegen", "load", "backend", "total"):
        assert t[key] > 0, key
    assert t["total"] == pytest.approx(o.compile_times["optimize"] + t["backend"])
    summary = open(tmp_path / "summary.txt").read()
    for label in ("backend: LLVM IR emission", "backend: LLVM optimization",
                  "backend: object code emission", "backend: load and link", "total compile"):
        assert label in summary
    args = random_args(o.module, seed=0)
    np.testing.assert_allclose(exe(*args)[0], run(o.module, args)[0], rtol=1e-5, atol=1e-5)
