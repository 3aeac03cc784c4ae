"""hlo.lax control flow (cond, switch, while_loop, fori_loop, scan, map) against jax.lax, on
every target: values, shapes and dtypes for random shapes and dtypes, pytree operands and
carries, closures over traced values, nesting, weak-type promotion of carries, eager calls;
the IR ops they lower to; and errors that name the op, both types and the user's own line."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, assert_same, compare, rand, stable_seed

import hlo
import hlo.numpy as hnp
from hlo import lax
from hlo.errors import ArgumentTypeError, DTypeError, ShapeError

DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, np.dtype(np.int32),
          np.dtype(np.uint8), np.dtype(np.float64), np.dtype(np.int64)]


def _shape(rng, max_rank=3):
    return tuple(int(d) for d in rng.integers(1, 5, size=rng.integers(0, max_rank + 1)))


def _ops(module):
    return [op.name for op in module.walk()]


# --------------------------------------------------------------------------------------------
# cond and switch
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cond_random_shapes_and_dtypes(target, dtype):
    rng = np.random.default_rng(stable_seed(str(dtype)))
    shape = _shape(rng)
    x, y = rand(rng, shape, dtype), rand(rng, shape, dtype)

    def make(L, np_):
        def f(p, x, y):
            return L.cond(p, lambda a, b: {"s": a + b, "m": np_.maximum(a, b)},
                          lambda a, b: {"s": a - b, "m": np_.minimum(a, b)}, x, y)
        return f
    for p in (True, False):
        compare(make(lax, hnp), make(jax.lax, jnp), (np.bool_(p), x, y), target)


def test_cond_numeric_pred_closure_and_ir(target):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def f(n, x):
        s = x.sum()  # a traced value of the enclosing trace, read by the branches
        return lax.cond(n, lambda v: v * s, lambda v: v - s, x)

    def fj(n, x):
        s = x.sum()
        return jax.lax.cond(n, lambda v: v * s, lambda v: v - s, x)
    for n in (np.int32(0), np.int32(-3), np.float32(0.0), np.float32(0.5)):
        compare(f, fj, (n, x), target)
    m = hlo.jit(f).lower(np.int32(1), x).ir
    assert "if" in _ops(m) and "while" not in _ops(m)


def test_cond_no_operands_and_none_output(target):
    def f(p, x):
        y = lax.cond(p, lambda: x * 2.0, lambda: x + 1.0)
        z = lax.cond(p, lambda: None, lambda: None)
        return y, z

    def fj(p, x):
        return jax.lax.cond(p, lambda: x * 2.0, lambda: x + 1.0), None
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    for p in (True, False):
        compare(f, fj, (p, x), target)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.uint8, np.int64], ids=lambda d: np.dtype(d).name)
def test_switch_clamps_like_jax(target, idx_dtype):
    branches_h = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: hnp.sin(a) - b]
    branches_j = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: jnp.sin(a) - b]
    rng = np.random.default_rng(1)
    x, y = rand(rng, (3, 2), np.float32), rand(rng, (3, 2), np.float32)
    jf = hlo.jit(lambda i, a, b: lax.switch(i, branches_h, a, b), target=target)
    info = np.iinfo(idx_dtype)
    for i in sorted({max(info.min, -2), 0, 1, 2, 3, min(info.max, 200)}):
        idx = np.asarray(i, idx_dtype)
        with jax.enable_x64(np.dtype(idx_dtype).itemsize == 8):
            want = np.asarray(jax.jit(lambda i, a, b: jax.lax.switch(i, branches_j, a, b))(idx, x, y))
        assert_same(jf(idx, x, y), want, what=f"index {i}")
    m = hlo.jit(lambda i, a, b: lax.switch(i, branches_h, a, b)).lower(np.int32(0), x, y).ir
    case = [op for op in m.walk() if op.name == "case"]
    assert len(case) == 1 and [r.name for r in case[0].regions] == ["branch0", "branch1", "branch2"]


def test_switch_single_branch_is_a_call(target):
    compare(lambda i, x: lax.switch(i, [lambda v: v * 3], x),
            lambda i, x: jax.lax.switch(i, [lambda v: v * 3], x), (np.int32(5), np.ones(3, np.float32)), target)


def test_cond_weak_outputs_join(target):
    # one branch returns a Python scalar (weak), the other a float32 array: the result is
    # strongly typed, so adding a float16 array promotes to float32 (as in jax)
    def f(p, h):
        return lax.cond(p, lambda: 1.0, lambda: np.float32(2.0)) + h

    def fj(p, h):
        return jax.lax.cond(p, lambda: 1.0, lambda: np.float32(2.0)) + h
    compare(f, fj, (True, np.ones(2, np.float16)), target)


# --------------------------------------------------------------------------------------------
# while_loop and fori_loop
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64], ids=lambda d: np.dtype(d).name)
def test_while_loop_pytree_carry(target, dtype):
    rng = np.random.default_rng(2)
    shape = _shape(rng, 2)
    x = rand(rng, shape, dtype)

    def make(L):
        def f(x, n):
            def body(c):
                i, (a, b) = c["i"], c["ab"]
                return {"i": i + 1, "ab": (a + b, b * 2 - a)}
            return L.while_loop(lambda c: c["i"] < n, body, {"i": np.int32(0), "ab": (x, x)})
        return f
    compare(make(lax), make(jax.lax), (x, np.int32(5)), target)
    compare(make(lax), make(jax.lax), (x, np.int32(0)), target)  # zero trips


def test_while_loop_reads_enclosing_values_and_nests_cond(target):
    def make(L):
        def f(x, limit):
            scale = x.max()

            def body(c):
                i, v = c
                return i + 1, L.cond(v.sum() > 0, lambda: v * 1.5 + scale, lambda: v * -2.0 - scale)
            return L.while_loop(lambda c: (c[0] < 50) & (abs(c[1]).sum() < limit), body,
                                (np.int32(0), x))
        return f
    x = np.array([0.25, -0.5, 0.125], np.float32)
    compare(make(lax), make(jax.lax), (x, np.float32(40.0)), target)


def test_while_loop_promotes_weak_initial_carry(target):
    # init is a Python int (weak int32); the body makes it float32: jax starts the loop in
    # float32 and so do we
    def make(L):
        def f(x):
            return L.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] + x, c[1] + 1), (0, 0))
        return f
    got = compare(make(lax), make(jax.lax), (np.float32(1.5),), target)
    assert got[0].dtype == np.float32


@pytest.mark.parametrize("bounds", [(0, 7), (3, 3), (5, 2), (-4, 4)])
def test_fori_loop_static_bounds(target, bounds):
    lo, hi = bounds

    def make(L):
        def f(x):
            return L.fori_loop(lo, hi, lambda i, c: (c[0] * 1.5 + i, c[1] + i), (x, 0))
        return f
    compare(make(lax), make(jax.lax), (np.arange(3, dtype=np.float32),), target)


def test_fori_loop_traced_bounds_and_index_dtype(target):
    def make(L):
        def f(lo, hi, x):
            return L.fori_loop(lo, hi, lambda i, v: v + i.astype(v.dtype) * (i + 1).astype(v.dtype), x)
        return f
    x = np.zeros(2, np.float32)
    compare(make(lax), make(jax.lax), (np.int32(2), np.int32(9), x), target)
    compare(make(lax), make(jax.lax), (np.int16(-3), np.int16(4), x), target)
    # a Python int bound adopts the traced bound's signed dtype
    f = hlo.jit(lambda hi, x: lax.fori_loop(0, hi, lambda i, v: (v[0] + 1, i), (x, hi)), target=target)
    out = hlo.device_get(f(np.int16(6), np.float32(0)))
    assert out[0] == 6 and out[1].dtype == np.int16 and out[1] == 5


def test_fori_loop_index_is_weak_for_static_bounds(target):
    # jax: with concrete bounds the index is a weak int32, so it does not promote uint8
    def make(L):
        return lambda x: L.fori_loop(np.int32(0), np.int32(3), lambda i, v: v + i, x)
    compare(make(lax), make(jax.lax), (np.array([1, 2], np.uint8),), target)


# --------------------------------------------------------------------------------------------
# scan and map
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, BF16], ids=lambda d: np.dtype(d).name)
def test_scan_pytrees(target, reverse, dtype):
    rng = np.random.default_rng(3)
    n = 5
    xs = {"a": rand(rng, (n, 3), dtype), "b": rand(rng, (n,), dtype)}
    init = (rand(rng, (3,), dtype), np.zeros((), dtype))

    def make(L, np_):
        def f(init, xs):
            def step(c, x):
                v, t = c
                v2 = np_.maximum(v, x["a"]) + x["b"]
                return (v2, t + x["b"]), {"v": v2, "pair": (x["b"] * 2, v2.sum())}
            return L.scan(step, init, xs, reverse=reverse)
        return f
    compare(make(lax, hnp), make(jax.lax, jnp), (init, xs), target)


def test_scan_without_xs_and_zero_length(target):
    def make(L):
        def f(c):
            fib = L.scan(lambda c, _: ((c[1], c[0] + c[1]), c[0]), c, None, length=8)
            empty = L.scan(lambda c, x: (c + x, c * x), c[0] * np.ones(2, np.float32),
                           np.zeros((0, 2), np.float32))
            return fib, empty
        return f
    c = (np.float32(0), np.float32(1))
    got = compare(make(lax), make(jax.lax), (c,), target)
    assert got[1][1].shape == (0, 2)


def test_scan_lowering_and_closure(target):
    def f(xs, w):
        return lax.scan(lambda c, x: (c + x @ w, (x * c.sum()).astype(np.float16)), np.zeros(2, np.float32), xs)

    def fj(xs, w):
        return jax.lax.scan(lambda c, x: (c + x @ w, (x * c.sum()).astype(np.float16)), np.zeros(2, np.float32), xs)
    rng = np.random.default_rng(4)
    args = (rand(rng, (4, 3), np.float32), rand(rng, (3, 2), np.float32))
    compare(f, fj, args, target, rtol=1e-3)
    ops = _ops(hlo.jit(f).lower(*args).ir)
    assert ops.count("while") == 1
    assert "dynamic_slice" in ops and "dynamic_update_slice" in ops


def test_map(target):
    def make(L, np_):
        return lambda xs: L.map(lambda x: {"n": np_.sqrt((x * x).sum()), "x2": x * 2}, xs)
    xs = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    compare(make(lax, hnp), make(jax.lax, jnp), (xs,), target)


def test_eager_calls(target):
    # outside hlo.jit each function compiles on its own for the default target
    with hlo.config.override(target=target):
        x = np.arange(4, dtype=np.float32)
        np.testing.assert_array_equal(lax.cond(np.bool_(False), lambda v: v + 1, lambda v: v * 3, x), x * 3)
        assert hlo.device_get(lax.switch(7, [lambda: np.int32(1), lambda: np.int32(2)])) == 2
        assert hlo.device_get(lax.fori_loop(np.int64(0), np.int64(4), lambda i, v: v + i, 0)) == 6
        assert hlo.device_get(lax.while_loop(lambda v: v < 100, lambda v: v * 3, np.int32(1))) == 243
        carry, ys = hlo.device_get(lax.scan(lambda c, x: (c + x, c), np.float32(0), x))
        assert carry == 6 and list(ys) == [0, 0, 1, 3]


# --------------------------------------------------------------------------------------------
# Errors: the op, both types, and the user's line
# --------------------------------------------------------------------------------------------

def _line(marker: str) -> int:
    """The line of this file that ends with the comment ``# <marker>``."""
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# <{marker}>"):
                return i
    raise AssertionError(marker)


def _check_error(err, marker, *fragments):
    assert err.location is not None
    assert os.path.samefile(err.location.file, __file__), err.location
    assert err.location.line == _line(marker), (err.location, str(err))
    msg = str(err)
    assert msg.startswith(f"{err.location}: "), msg
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_error_cond_branch_shapes_differ():
    def f(p, x):
        return lax.cond(p, lambda v: v, lambda v: v[:2], x)  # <cond-shape>
    with pytest.raises(ShapeError) as e:
        hlo.jit(f).lower(True, np.ones(3, np.float32))
    _check_error(e.value, "cond-shape", "hlo.lax.cond", "f32[3]", "f32[2]", "true_fun", "false_fun")


def test_error_switch_branch_dtypes_differ():
    def f(i, x):
        branches = [lambda v: {"y": v}, lambda v: {"y": v.astype(np.float64)}]
        return lax.switch(i, branches, x)  # <switch-dtype>
    with pytest.raises(DTypeError) as e:
        hlo.jit(f).lower(np.int32(0), np.ones(3, np.float32))
    _check_error(e.value, "switch-dtype", "hlo.lax.switch", "output['y']", "f32[3]", "f64[3]",
                 "branches[0]", "branches[1]")


def test_error_cond_branch_structures_differ():
    def f(p, x):
        return lax.cond(p, lambda: (x, x), lambda: [x, x])  # <cond-tree>
    with pytest.raises(ArgumentTypeError) as e:
        hlo.jit(f).lower(True, np.ones(3, np.float32))
    _check_error(e.value, "cond-tree", "hlo.lax.cond", "same structure", "tuple", "list")


def test_error_while_carry_type_changes():
    def f(x):
        def body(state):
            return {"h": state["h"], "n": state["n"] * np.float64(2)}
        return lax.while_loop(lambda s: s["h"].sum() < 3, body, {"h": x, "n": x})  # <while-carry>
    with pytest.raises(DTypeError) as e:
        hlo.jit(f).lower(np.ones(2, np.float32))
    _check_error(e.value, "while-carry", "hlo.lax.while_loop", "state['n']", "f32[2] on input",
                 "f64[2] on output", "body_fun (body, defined at test_control_flow.py:")


def test_error_while_carry_shape_changes_and_structure():
    def f(x):
        return lax.while_loop(lambda v: v.sum() < 3, lambda v: hnp.concatenate([v, v]), x)  # <while-shape>
    with pytest.raises(ShapeError) as e:
        hlo.jit(f).lower(np.ones(2, np.float32))
    _check_error(e.value, "while-shape", "hlo.lax.while_loop", "f32[2]", "f32[4]")

    def g(x):
        return lax.fori_loop(0, 3, lambda i, c: (c[0], c[1], c[0]), (x, x))  # <fori-tree>
    with pytest.raises(ArgumentTypeError) as e:
        hlo.jit(g).lower(np.ones(2, np.float32))
    _check_error(e.value, "fori-tree", "hlo.lax.fori_loop", "structure", "length 2 became length 3")


def test_error_while_cond_not_boolean_scalar():
    def f(x):
        return lax.while_loop(lambda v: v, lambda v: v + 1, x)  # <while-pred>
    with pytest.raises(ShapeError) as e:
        hlo.jit(f).lower(np.ones(2, np.float32))
    _check_error(e.value, "while-pred", "cond_fun", "boolean scalar", "f32[2]")


def test_error_scan_inputs():
    def f(c, a, b):
        return lax.scan(lambda c, x: (c, x), c, (a, b))  # <scan-length>
    with pytest.raises(ShapeError) as e:
        hlo.jit(f).lower(np.float32(0), np.ones(3, np.float32), np.ones(4, np.float32))
    _check_error(e.value, "scan-length", "hlo.lax.scan", "xs[0]: 3", "xs[1]: 4")

    def g(c):
        return lax.scan(lambda c, x: (c + 1.5, x), c, np.ones(3, np.int32))  # <scan-carry>
    with pytest.raises(DTypeError) as e:
        hlo.jit(g).lower(np.int32(0))
    _check_error(e.value, "scan-carry", "hlo.lax.scan", "s32[] on input", "f32[] on output")

    def h(c):
        return lax.scan(lambda c, x: c, c, np.ones(3, np.float32))  # <scan-pair>
    with pytest.raises(ArgumentTypeError) as e:
        hlo.jit(h).lower(np.float32(0))
    _check_error(e.value, "scan-pair", "must return a pair (carry, y)")


def test_error_bad_arguments():
    x = np.ones(3, np.float32)
    with pytest.raises(ShapeError, match="pred must be a scalar"):
        hlo.jit(lambda p: lax.cond(p, lambda: 1, lambda: 2)).lower(np.ones(2, bool))
    with pytest.raises(ArgumentTypeError, match="true_fun must be callable"):
        hlo.jit(lambda p: lax.cond(p, 1, lambda: 2)).lower(True)
    with pytest.raises(DTypeError, match="index must be an integer"):
        hlo.jit(lambda i: lax.switch(i, [lambda: 1, lambda: 2])).lower(np.float32(1))
    with pytest.raises(ValueError, match="branches is empty"):
        hlo.jit(lambda i: lax.switch(i, [])).lower(np.int32(1))
    with pytest.raises(DTypeError, match="same dtype"):
        hlo.jit(lambda a, b: lax.fori_loop(a, b, lambda i, v: v, x)).lower(np.int32(0), np.uint32(3))
    with pytest.raises(ValueError, match="length must be given"):
        hlo.jit(lambda c: lax.scan(lambda c, x: (c, x), c, None)).lower(np.float32(0))
    with pytest.raises(ShapeError, match="length=4 does not match"):
        hlo.jit(lambda c: lax.scan(lambda c, x: (c, x), c, x, length=4)).lower(np.float32(0))
    with pytest.raises(ArgumentTypeError, match=r"init\[1\]"):
        hlo.jit(lambda c: lax.scan(lambda c, x: (c, x), (c, "s"), x)).lower(np.float32(0))
