"""Programs of any length and nesting compile and run on cpu: the elemental emitter walks
elementwise chains without recursion, and walks over nested control flow run with a stack
sized for the program's nesting (``hlo.ir.nesting``). The full-size cases of issue 20 (a
4,500-op chain, a 200-deep ``case`` nest) are ``slow``; smaller ones past the old limits run in
``make test``."""
import sys

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module
from hlo.ir.nesting import region_depth
from hlo.staging.stages import Lowered


def _chain(steps: int):
    x = np.linspace(-1, 1, 16, dtype=np.float32)

    def f(x):
        for _ in range(steps):
            x = hnp.sin(x) + x
        return x
    want = x.astype(np.float64)
    for _ in range(steps):
        want = np.sin(want) + want
    got = hlo.jit(f, target="cpu")(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def nest_text(depth: int) -> str:
    """``case`` nested ``depth`` deep: branch 0 goes one level down and adds 1 on the way back
    (the innermost returns x + x), branch 1 returns x - 1."""
    lines = ["module @nest", "", "func @main(%i: s32[], %x: f32[4]) -> (f32[4]) {",
             "  %one = constant dense<1.0> : f32[]",
             "  %ones = broadcast_in_dim(%one) {broadcast_dimensions = []} : f32[4]"]
    for d in range(depth):
        lines += [f"  %c{d} = case(%i) : f32[4] {{", "  ^branch0():"]
    lines += ["  %two = add(%x, %x) : f32[4]", "  return(%two)"]
    for d in reversed(range(depth)):
        if d != depth - 1:
            lines += [f"  %p{d} = add(%c{d + 1}, %ones) : f32[4]", f"  return(%p{d})"]
        lines += ["  ^branch1():", f"  %m{d} = subtract(%x, %ones) : f32[4]", f"  return(%m{d})",
                  "  }"]
    return "\n".join(lines + ["  return(%c0)", "}"]) + "\n"


def _nest(depth: int):
    m = parse_module(nest_text(depth))
    assert region_depth(m) == depth
    c = Lowered(m).compile(target="cpu")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(c(np.int32(0), x)[0], 2 * x + depth - 1)
    np.testing.assert_array_equal(c(np.int32(1), x)[0], x - 1)


def test_an_elementwise_chain_past_the_old_recursion_limit():
    _chain(600)  # 1,200 fused ops; the recursive emitter stopped at about 490


def test_a_case_nest_gets_a_stack_for_its_depth():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # the lowering needs ~6 frames a level: 60 levels would not fit
    try:
        _nest(60)
        assert sys.getrecursionlimit() == 400
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.slow
def test_a_4500_op_elementwise_chain_compiles_and_runs():
    _chain(2250)


@pytest.mark.slow
def test_a_200_deep_case_nest_compiles_and_runs():
    _nest(200)
