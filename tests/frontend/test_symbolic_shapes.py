"""Symbolic dimensions at the API (issue 38, third layer) and symbolic programs on cpu by
specialization at the call (fourth layer, first form): ``hlo.Dim``, symbolic
``ShapeDtypeStruct``s to ``f.lower``, constraints checked at the call with errors naming the
dimension, its constraint and the user's line; one compile per distinct size (cached)."""
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.errors import HloIndexError, SignatureMismatchError

S = hlo.ShapeDtypeStruct


def mlp(x, w, b):
    return hnp.tanh(x @ w + b).sum(axis=1)


def _mlp_args(n, seed=0):
    rng = np.random.default_rng(seed + n)
    return (rng.standard_normal((n, 8)).astype(np.float32),
            rng.standard_normal((8, 16)).astype(np.float32),
            rng.standard_normal(16).astype(np.float32))


def test_lower_with_a_symbolic_batch_gives_symbolic_ir():
    low = hlo.jit(mlp).lower(S((hlo.Dim("b", max=64), 8), "float32"), S((8, 16), "float32"),
                             S((16,), "float32"))
    text = low.as_text()
    assert "func @main(%arg0: f32[b,8], %arg1: f32[8,16], %arg2: f32[16]) -> (f32[b])" in text
    assert "tanh(%2) : f32[b,16]" in text
    assert low.dim_ranges == {"b": (1, 64)}
    # the string forms name the same shapes
    low2 = hlo.jit(mlp).lower(S("b, 8", "float32"), S((8, 16), "float32"), S((16,), "float32"))
    low3 = hlo.jit(mlp).lower(S(("b", 8), "float32"), S((8, 16), "float32"), S((16,), "float32"))
    assert low2.as_text() == low3.as_text() == text


def test_one_compile_per_distinct_size_against_float64():
    c = hlo.jit(mlp).lower(S((hlo.Dim("b", max=64), 8), "float32"), S((8, 16), "float32"),
                           S((16,), "float32")).compile("cpu")
    assert "specialized at the call, one compile per distinct size" in c.as_text()
    for n in (1, 7, 64, 7):  # 1, a prime, the max, a size again
        x, w, b = _mlp_args(n)
        r = c(x, w, b)
        want = np.tanh(x.astype(np.float64) @ w + b).sum(1)
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(r, hlo.jit(mlp)(x, w, b))  # the static compile's answer
    assert c.compiles == 3 and [s["b"] for s in c.sizes_compiled] == [1, 64, 7]


def test_constraints_are_checked_at_the_call_with_the_users_line():
    c = hlo.jit(mlp).lower(S((hlo.Dim("b", max=64), 8), "float32"), S((8, 16), "float32"),
                           S((16,), "float32")).compile("cpu")
    x, w, b = _mlp_args(65)
    with pytest.raises(SignatureMismatchError) as e:
        c(x, w, b)  # the call's line
    msg = str(e.value)
    assert "dimension b is 65 (x dimension 0), outside its declared range [1, 64]" in msg
    assert "test_symbolic_shapes.py:" in msg

    def g(x, y):
        return x * 2 + y
    cg = hlo.jit(g).lower(S("2*b, 4", "float32"), S(("2*b", 4), "float32")).compile("cpu")
    with pytest.raises(SignatureMismatchError, match=r"x dimension 0 is 7, which '2\*b' cannot be"):
        cg(np.ones((7, 4), np.float32), np.ones((7, 4), np.float32))  # divisibility
    with pytest.raises(SignatureMismatchError, match=r"y dimension 0 is 8 but its type says '2\*b' = 6 "
                                                     r"with b=3 \(from x dimension 0\)"):
        cg(np.ones((6, 4), np.float32), np.ones((8, 4), np.float32))  # equal dims across inputs
    with pytest.raises(SignatureMismatchError, match=r"x must be f32\[2\*b,4\], got float64\[6, 4\]"):
        cg(np.ones((6, 4)), np.ones((6, 4), np.float32))
    np.testing.assert_array_equal(cg(np.ones((6, 4), np.float32), np.ones((6, 4), np.float32)),
                                  np.full((6, 4), 3, np.float32))


def test_what_does_not_trace_symbolically_yet_names_the_dimension_and_line():
    def h(x):
        return x[1:]  # the line
    with pytest.raises(HloIndexError, match="symbolic dimension 'b' used where a concrete size") as e:
        hlo.jit(h).lower(S(("b", 4), "float32"))
    reshaped = hlo.jit(lambda x: x.reshape(-1, 2)).lower(S(("b", 4), "float32")).as_text()
    assert "reshape(%arg0) : f32[2*b,2]" in reshaped
    assert any("the line" in (ln or "") for ln in [str(t.statement) for t in e.traceback])


def test_dim_declarations():
    with pytest.raises(ValueError, match="min must be an int of at least 1"):
        hlo.Dim("b", min=0)
    with pytest.raises(ValueError, match="max must be None or an int of at least min=4"):
        hlo.Dim("b", min=4, max=2)
    with pytest.raises(ValueError, match="is not a dimension symbol name"):
        hlo.Dim("2b")
    assert repr(hlo.Dim("b", max=8)) == "Dim('b', min=1, max=8)"
    with pytest.raises(ValueError, match="dimension b is declared with two ranges"):
        hlo.jit(lambda x, y: x + y).lower(S((hlo.Dim("b", max=8),), "float32"),
                                          S((hlo.Dim("b", max=9),), "float32"))


def test_save_of_a_per_size_compile_is_refused():
    c = hlo.jit(mlp).lower(S(("b", 8), "float32"), S((8, 16), "float32"),
                           S((16,), "float32")).compile("cpu")
    with pytest.raises(NotImplementedError, match="compiled per size at the call"):
        c.save("/nonexistent/x.hlox")


@pytest.mark.parametrize("wid, batched", [("simple_mlp", (0,)), ("transformer_layer", (0,)),
                                          ("mlp_train_step", (4, 5))])
def test_seed_workloads_with_a_symbolic_batch(wid, batched):
    """A seed workload lowered once with its batch symbolic (the arguments ``batched``), run at
    sizes other than the lowering's example (1 and a prime), equals the static compile of
    that size (a mean over the batch divides by a count summed at run time)."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from bench.workloads import BY_ID, Case, Ops  # the repo root holds bench/
    w = BY_ID[wid]
    ins = Case(w, "quick", "f32").inputs()
    batch = ins[batched[0]].shape[0]
    specs = [S(("b",) + a.shape[1:], a.dtype) if i in batched else S(a.shape, a.dtype)
             for i, a in enumerate(ins)]
    ops = Ops(hnp, hlo.grad, hlo.vmap, hlo.lax)

    def fn(*a):
        return w.fn(ops, *a)
    c = hlo.jit(fn).lower(*specs).compile("cpu")
    assert "[b," in c.as_text()
    for n in (1, 3):
        rng = np.random.default_rng(n)
        args = list(ins)
        for i in batched:
            a = ins[i]
            args[i] = (rng.standard_normal((n,) + a.shape[1:]).astype(a.dtype) if a.dtype.kind == "f"
                       else rng.integers(0, 10, (n,) + a.shape[1:]).astype(a.dtype))
        got, want = hlo.tree_util.tree_leaves(c(*args)), hlo.tree_util.tree_leaves(hlo.jit(fn)(*args))
        for g, x in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(x))
    assert c.compiles == 2 and batch not in (1, 3)
