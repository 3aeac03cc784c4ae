"""Wide programs (issue 35): concatenates of thousands of operands and programs of thousands of
outputs compile in time in proportion to their width. Concatenates wider than
``max_concat_operands`` become trees (pass ``concat-split``), the fusion passes make no kernel
past ``max_kernel_outputs`` outputs or ``max_concat_operands`` concatenate operands, the
multi-output pass pairs a program's outputs in one round, and the CPU's call entry is a loop
over its outputs. Checked by counts (kernels, widths, rounds, the entry's size) and against
numpy and the interpreter; the times are in ``bench/compile_scaling.py``, never asserted."""
import numpy as np
import pytest
from pass_testing import assert_ir, random_args, run_passes

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.ir.interpreter import run
from hlo.passes import multi_output
from hlo.passes.fusion import unit_concat_operands
from hlo.passes.options import Options
from hlo.passes.pipeline import optimize


def _kernels(module):
    return [op for op in module.main.ops if op.name == "fusion"]


def _widths(module):
    """(most outputs of a kernel, most concatenate operands of a kernel); a multi fusion counts
    its parts together (one launch)."""
    ks = _kernels(module)
    return max(len(k.results) for k in ks), max(unit_concat_operands(k) for k in ks)


def test_concat_split_makes_a_tree_of_bounded_fan_in():
    src = """
    func @main(%a: f32[1,2], %b: f32[2,2], %c: f32[1,2], %d: f32[1,2], %e: f32[3,2]) -> (f32[8,2]) {
      %r = concatenate(%a, %b, %c, %d, %e) {dimension = 0} : f32[8,2]
      return(%r)
    }
    """
    log = []
    out = run_passes(src, ["concat-split"], "cpu", {"max_concat_operands": 2}, log)
    assert_ir(out, """
    func @main(%arg0: f32[1,2], %arg1: f32[2,2], %arg2: f32[1,2], %arg3: f32[1,2], %arg4: f32[3,2]) -> (f32[8,2]) {
      %0 = concatenate(%arg0, %arg1) {dimension = 0} : f32[3,2]
      %1 = concatenate(%arg2, %arg3) {dimension = 0} : f32[2,2]
      %2 = concatenate(%0, %1) {dimension = 0} : f32[5,2]
      %3 = concatenate(%2, %arg4) {dimension = 0} : f32[8,2]
      return(%3)
    }
    """)
    assert len(log) == 1 and "split a concatenate of 5 operands" in log[0] and "max_concat_operands" in log[0]
    m0, m1 = parse_module(src), parse_module(out)
    args = random_args(m0)
    np.testing.assert_array_equal(run(m0, args)[0], run(m1, args)[0])


def test_concat_split_leaves_a_concatenate_within_the_bound():
    src = """
    func @main(%a: f32[2,3], %b: f32[2,1]) -> (f32[2,4]) {
      %r = concatenate(%a, %b) {dimension = 1} : f32[2,4]
      return(%r)
    }
    """
    log = []
    out = run_passes(src, ["concat-split"], "cpu", {"max_concat_operands": 2}, log)
    assert out == run_passes(src, [], "cpu") and log == []


@pytest.mark.parametrize("bad", [1, 0, True, "8"])
def test_width_bounds_are_checked(bad):
    with pytest.raises(ValueError, match="at least 2"):
        Options.from_any({"max_concat_operands": bad})
    with pytest.raises(ValueError, match="at least 2"):
        Options.from_any({"max_kernel_outputs": bad})


def _stack_and_outputs_module(rows: int, outs: int):
    """A program of both wide shapes: a stack of ``rows`` rows (each scaled, some through an
    exp) and ``outs`` outputs read from one input."""
    def f(x, y):
        s = hnp.stack([hnp.exp(x[i]) if i % 7 == 0 else x[i] * float(i % 5 + 1) for i in range(rows)])
        return (s,) + tuple(y * float(i) + 1.0 for i in range(outs))
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    y = np.arange(5, dtype=np.float32)
    return hlo.jit(f).lower(x, y).ir, [x, y]


@pytest.mark.parametrize("target", ["cpu", "cuda", "interpreter"])
def test_small_bounds_keep_the_meaning(target):
    """Bounds of 3 and 4 force trees three deep and many bounded merges: the optimized program
    computes what the original does, on the interpreter, with its plan checked."""
    m, args = _stack_and_outputs_module(50, 20)
    o = optimize(m, target, options={"max_concat_operands": 4, "max_kernel_outputs": 3})
    o.buffers.check()
    most_outputs, most_operands = _widths(o.module)
    assert most_outputs <= 3 and most_operands <= 4, o.text()
    assert any(d.startswith("concat-split: split a concatenate of 50 operands") for d in o.decisions)
    for a, b in zip(run(m, args), run(o.module, args)):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_stack_of_2000_rows_compiles_into_bounded_kernels():
    n = 2000
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    f = hlo.jit(lambda x: hnp.stack([x[i] * float(i % 5 + 1) for i in range(n)]))
    c = f.lower(x).compile(target="cpu")
    want = np.stack([x[i] * float(i % 5 + 1) for i in range(n)])
    np.testing.assert_array_equal(np.asarray(c(x)), want)
    module = parse_module(c.as_text())
    most_outputs, most_operands = _widths(module)
    assert most_operands <= Options().max_concat_operands
    # 2,000 rows: 32 groups of at most 64, then the root (and nothing merged them back)
    assert 32 <= len(_kernels(module)) <= 34, c.as_text()


def test_1000_outputs_compile_into_bounded_kernels_in_one_round(monkeypatch):
    builds = []

    class CountingReach(multi_output.Reach):
        def __init__(self, region):
            builds.append(len(region.ops))
            super().__init__(region)
    monkeypatch.setattr(multi_output, "Reach", CountingReach)
    n = 1000
    x = np.arange(4, dtype=np.float32)
    f = hlo.jit(lambda x: tuple(x * float(i) + 1.0 for i in range(n)))
    c = f.lower(x).compile(target="cpu")
    got = c(x)
    assert len(got) == n
    for i in (0, 1, 63, 64, 500, 999):
        np.testing.assert_array_equal(got[i], x * float(i) + 1.0)
    module = parse_module(c.as_text())
    most_outputs, _ = _widths(module)
    assert most_outputs == Options().max_kernel_outputs
    assert len(_kernels(module)) == -(-n // most_outputs)  # 16
    # siblings that are sinks pair in one round (each round rebuilds reachability: one a merge
    # had made this quadratic): the pass's rounds, two passes each, not a thousand
    assert len(builds) <= 6, builds


def _call_entry_lines(c) -> int:
    text = c._runtime_executable().ir_text
    start = text.index('@"hlo_call_py"') if '@"hlo_call_py"' in text else text.index("@hlo_call_py")
    return text[start:text.index("\n}", start)].count("\n")


def test_call_entry_does_not_grow_with_outputs_or_inputs():
    x = np.arange(4, dtype=np.float32)
    small = hlo.jit(lambda x, y: (x + 1.0, y * 2.0)).lower(x, x).compile(target="cpu")
    wide = hlo.jit(lambda *xs: tuple(v * float(i) + 1.0 for i, v in enumerate(xs)) * 2)
    args = [x + i for i in range(150)]
    big = wide.lower(*args).compile(target="cpu")
    assert _call_entry_lines(big) == _call_entry_lines(small)
    got = big(*args)
    assert len(got) == 300
    for i in (0, 149, 150, 299):
        np.testing.assert_array_equal(got[i], args[i % 150] * float(i % 150) + 1.0)
