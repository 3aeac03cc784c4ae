"""Symbolic dimensions (issue 38, first layer): the dimension-expression module, symbolic types
in the text form, shape inference and the verifier on expressions, the interpreter binding
symbols from its arguments."""
import pickle
import random

import numpy as np
import pytest

from hlo.ir import parse_module, print_module
from hlo.ir.dim_expr import (
    DimExpr,
    DimParseError,
    InconclusiveDimensionError,
    SymbolicDimError,
    bounds,
    divmod_dim,
    evaluate,
    parse,
)
from hlo.ir.errors import ParseError
from hlo.ir.interp import InterpreterError
from hlo.ir.interpreter import run
from hlo.ir.types import TensorType, f32

b, s = DimExpr.symbol("b"), DimExpr.symbol("s")


def test_normal_form_and_text():
    assert str(2 * b) == "2*b" and str(b * s) == "b*s" and str(b - 1) == "b-1"
    assert str(-b + 4) == "-b+4" and str(b * b * s - 3 * s) == "b*b*s-3*s"
    assert b - b == 0 and type(b - b) is int
    assert (b + 1) * (b - 1) == b * b - 1
    assert s * b == b * s and hash(s * b) == hash(b * s)
    assert b != 4 and b + 0 == b


def test_floordiv_mod_as_jax():
    # exact polynomial division where every step divides, jax's _divmod
    assert (2 * b + 4) // 2 == b + 2 and (2 * b + 4) % 2 == 0
    assert (2 * b + 5) // 2 == b + 2 and (2 * b + 5) % 2 == 1
    assert (b * s) // s == b and (b * s) % s == 0
    assert str(b // 2) == "floordiv(b,2)" and str(b % 2) == "mod(b,2)"
    assert str((b + 1) // s) == "floordiv(b+1,s)"
    with pytest.raises(ZeroDivisionError):
        divmod_dim(b, 0)


def test_parse_round_trip_and_errors():
    for text in ["b", "2*b", "b*s", "b-1", "-b+4", "floordiv(b,2)", "mod(b*s+1,3)",
                 "b*b*s-3*s+floordiv(b*s+1,2)"]:
        e = parse(text)
        assert str(e) == text and parse(str(e)) == e
    assert parse("b - 1") == b - 1 and parse("(b + 1) * 2") == 2 * b + 2
    assert parse("b // 2") == parse("floordiv(b, 2)") and parse("12") == 12
    for bad in ["", "b +", "2b", "floordiv(b)", "b.c", "mod"]:
        with pytest.raises(DimParseError):
            parse(bad)


@pytest.mark.parametrize("seed", range(5))
def test_evaluate_matches_integers(seed):
    """Random expressions evaluate as Python integers do at random sizes (floor division and
    modulo with Python's signs)."""
    rng = random.Random(seed)
    syms = {"b": b, "s": s}
    for _ in range(200):
        vals = {"b": rng.randint(1, 40), "s": rng.randint(1, 40)}

        def gen(depth):
            r = rng.random()
            if depth == 0 or r < 0.3:
                if rng.random() < 0.5:
                    k = rng.choice(["b", "s"])
                    return syms[k], vals[k]
                c = rng.randint(-5, 9)
                return c, c
            (x, xv), (y, yv) = gen(depth - 1), gen(depth - 1)
            op = rng.choice("+-*/%")
            if op == "+":
                return x + y, xv + yv
            if op == "-":
                return x - y, xv - yv
            if op == "*":
                return x * y, xv * yv
            d = rng.randint(1, 5)
            return (x // d, xv // d) if op == "/" else (x % d, xv % d)
        e, want = gen(3)
        assert evaluate(e, vals) == want, (e, vals)
        assert evaluate(parse(str(e)), vals) == want, (e, vals)


def test_comparisons_decided_by_bounds():
    assert b >= 1 and b + 1 > b and 2 * b >= b and not (b < 1)
    assert bounds(b % 4) == (0, 3) and bounds(b - 1)[0] == 0
    assert bounds(b, {"b": (2, 10)}) == (2, 10)
    with pytest.raises(InconclusiveDimensionError, match="'b' >= '2'"):
        b >= 2
    with pytest.raises(SymbolicDimError, match="symbolic dimension 'b-1'"):
        int(b - 1)
    with pytest.raises(SymbolicDimError):
        np.zeros((b, 4))


def test_pickle_and_types():
    assert pickle.loads(pickle.dumps(2 * b - 1)) == 2 * b - 1
    t = TensorType((b, 512), f32)
    assert str(t) == "f32[b,512]" and not t.is_static and t.size == 512 * b
    assert TensorType((4, 5), f32).is_static and TensorType((np.int64(4),), f32).shape == (4,)
    assert type(TensorType((np.int64(4),), f32).shape[0]) is int


PROGRAM = """module @m

func @main(%arg0: f32[b,4], %arg1: f32[4], %arg2: f32[s,4]) -> (f32[b], f32[4*b], f32[b+s,4], f32[b,s]) {
  %0 = broadcast_in_dim(%arg1) {broadcast_dimensions = [1]} : f32[b,4]
  %1 = multiply(%arg0, %0) : f32[b,4]
  %2 = constant dense<0.0> : f32[]
  %3 = reduce(%1, %2) {dimensions = [1]} : f32[b] {
    ^body(%4: f32[], %5: f32[]):
      %6 = add(%4, %5) : f32[]
      return(%6)
  }
  %7 = reshape(%1) : f32[4*b]
  %8 = concatenate(%1, %arg2) {dimension = 0} : f32[b+s,4]
  %9 = dot_general(%arg0, %arg2) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[b,s]
  return(%3, %7, %8, %9)
}
"""


def test_symbolic_program_text_round_trip():
    m = parse_module(PROGRAM)
    assert print_module(m) == PROGRAM
    assert print_module(parse_module(print_module(m))) == PROGRAM


@pytest.mark.parametrize("nb,ns", [(1, 1), (3, 7), (13, 2)])
def test_interpreter_binds_symbols(nb, ns):
    m = parse_module(PROGRAM)
    rng = np.random.default_rng(nb * 100 + ns)
    x = rng.standard_normal((nb, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    y = rng.standard_normal((ns, 4)).astype(np.float32)
    r = run(m, [x, w, y])
    xd, wd, yd = x.astype(np.float64), w.astype(np.float64), y.astype(np.float64)
    np.testing.assert_allclose(r[0], (xd * wd).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r[1], (x * w).reshape(-1))
    np.testing.assert_allclose(r[2], np.concatenate([x * w, y]))
    np.testing.assert_allclose(r[3], xd @ yd.T, rtol=1e-5, atol=1e-5)


def test_interpreter_binding_errors():
    m = parse_module("""module @m

func @main(%arg0: f32[b,4], %arg1: f32[2*b+1]) -> (f32[b,4]) {
  return(%arg0)
}
""")
    x = np.zeros((3, 4), np.float32)
    run(m, [x, np.zeros(7, np.float32)])
    with pytest.raises(InterpreterError, match=r"argument #1 dimension 0 is 9 but its type says "
                                               r"'2\*b\+1' = 7 with b=3 \(from argument #0 dimension 0\)"):
        run(m, [x, np.zeros(9, np.float32)])
    with pytest.raises(InterpreterError, match=r"argument #0 must be f32\[3,4\].*shape \(3, 5\)"):
        run(m, [np.zeros((3, 5), np.float32), np.zeros(7, np.float32)])


@pytest.mark.parametrize("body,msg", [
    ("%0 = add(%arg0, %arg1) : f32[b,4]", "operands must have the same type"),
    ("%0 = reshape(%arg0) : f32[floordiv(b,2),8]", "cannot reshape f32[b,4] (4*b elements)"),
    ("%0 = slice(%arg0) {start_indices = [0, 0], limit_indices = [2, 4]} : f32[2,4]",
     "symbolic dimensions: 'b' >= '2' is not decided"),
])
def test_verifier_on_expressions(body, msg):
    res = body.split(" : ")[-1]
    text = (f"module @m\n\nfunc @main(%arg0: f32[b,4], %arg1: f32[s,4]) -> ({res}) {{\n"
            f"  {body}\n  return(%0)\n}}\n")
    with pytest.raises(ParseError) as e:
        parse_module(text)
    assert msg in str(e.value)


def test_parse_errors_in_dims():
    with pytest.raises(ParseError, match="bad dimension '2b'"):
        parse_module("module @m\n\nfunc @main(%arg0: f32[2b,4]) -> (f32[2b,4]) {\n  return(%arg0)\n}\n")
    with pytest.raises(ParseError, match="negative dimension"):
        parse_module("module @m\n\nfunc @main(%arg0: f32[-3,b]) -> (f32[-3,b]) {\n  return(%arg0)\n}\n")
