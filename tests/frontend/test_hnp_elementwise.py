"""hlo.numpy elementwise functions against jax.numpy (values, shapes and dtypes), on every
target, for float, integer and boolean inputs, broadcasting shapes and mixed dtypes.

Each test compiles one function that applies a whole table of hlo.numpy functions (a dict of
results), so a dtype costs one compilation, and a failure names the function."""
import math

import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16, assert_same, compare, hlo_run, jax_run, rand, stable_seed

import hlo.numpy as hnp

SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.5])

# name -> input domain
UNARY_FLOAT = {
    "sqrt": "pos", "cbrt": "any", "rsqrt": "pos", "exp": "small", "exp2": "small",
    "expm1": "small", "log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos", "sin": "any",
    "cos": "any", "tan": "unit", "tanh": "special", "arcsin": "unit", "arccos": "unit",
    "arctan": "special", "sinh": "small", "cosh": "small", "arcsinh": "any", "arccosh": "ge1",
    "arctanh": "unit", "deg2rad": "any", "rad2deg": "any", "sinc": "any", "rint": "special",
    "floor": "special", "ceil": "special", "trunc": "special", "fix": "special",
    "round": "special", "sign": "special", "abs": "special", "fabs": "any", "negative": "special",
    "square": "any", "reciprocal": "pos", "isnan": "special", "isinf": "special",
    "isfinite": "special", "signbit": "special", "isposinf": "special", "isneginf": "special",
    "positive": "any", "nan_to_num": "special",
}

def _domain(rng, kind, shape, dt):
    if kind == "pos":
        return rand(rng, shape, dt, 0.1, 5.0)
    if kind == "small":
        return rand(rng, shape, dt, -3.0, 3.0)
    if kind == "unit":
        return rand(rng, shape, dt, -0.95, 0.95)
    if kind == "ge1":
        return rand(rng, shape, dt, 1.05, 6.0)
    x = rand(rng, shape, dt) * 3
    if kind == "special":
        x = x.reshape(-1)
        x[:len(SPECIALS)] = SPECIALS.astype(dt)
        x = x.reshape(shape)
    return x.astype(dt)


def _jnp_fn(name):
    if name == "rsqrt":
        return lambda x: 1 / jnp.sqrt(x)
    if name == "fix":  # removed from jax.numpy; numpy's fix is trunc
        return jnp.trunc
    return getattr(jnp, name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_unary_float_functions(target, dtype):
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(stable_seed(dtype))
    kinds = sorted(set(UNARY_FLOAT.values()))
    inputs = {k: _domain(rng, k, (4, 5), dt) for k in kinds}

    def h(inp):
        return {n: getattr(hnp, n)(inp[k]) for n, k in UNARY_FLOAT.items()}

    def j(inp):
        return {n: _jnp_fn(n)(inp[k]) for n, k in UNARY_FLOAT.items()}
    rtol = {np.dtype(np.float16): 4e-3, BF16: 2e-2, np.dtype(np.float32): 4e-6, np.dtype(np.float64): 1e-13}[dt]
    got = hlo_run(h, (inputs,), target)
    want = jax_run(j, (inputs,))
    for n in UNARY_FLOAT:
        assert_same(got[n], want[n], rtol=rtol, atol=rtol, what=n)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32", "int64", "bool"])
def test_unary_functions_on_integers(target, dtype):
    """Float functions promote integers (int64 -> float64, others -> float32); integer-preserving
    ones (abs, sign, square, negative, floor...) keep the dtype, as jax.numpy."""
    rng = np.random.default_rng(7)
    x = rand(rng, (3, 4), dtype, 1, 9) if dtype != "bool" else rand(rng, (3, 4), dtype)
    floats = ["sqrt", "exp", "log", "sin", "arctan", "tanh", "log1p", "cbrt", "deg2rad"]
    if dtype != "bool":  # jax refuses rint of bools
        floats += ["rint"]
    keep = ["floor", "ceil", "trunc", "abs", "square", "positive", "isnan", "isinf", "isfinite",
            "signbit"]
    if dtype != "bool":  # jax refuses these for bools
        keep += ["negative", "round", "sign"]
    names = floats + keep

    def h(x):
        return {n: getattr(hnp, n)(x) for n in names}

    def j(x):
        return {n: getattr(jnp, n)(x) for n in names}
    compare(h, j, (x,), target, rtol=2e-6, atol=1e-6)


# (x dtype, x shape, y dtype, y shape): promotion and broadcasting cases
PAIRS = [
    ("float32", (3, 4), "float32", (4,)),
    ("float16", (2, 1, 3), "float32", (4, 1)),
    ("bfloat16", (3, 1), "float16", (1, 3)),
    ("int8", (5,), "uint8", (2, 5)),
    ("int32", (2, 3), "float16", (3,)),
    ("uint32", (4,), "int32", (4,)),
    ("bool", (3, 3), "int8", (3, 1)),
    ("int16", (1, 4), "uint16", (3, 1)),
    ("float64", (2, 3), "float32", (2, 3)),
    ("int64", (3,), "uint8", (2, 3)),
    ("uint64", (3,), "int64", (3,)),
    ("int64", (2, 2), "float64", (2,)),
]

ARITH = ["add", "multiply", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
         "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "fmax", "fmin"]
FLOAT_BINARY = ["true_divide", "arctan2", "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside"]
INT_DIV = ["floor_divide", "remainder", "fmod", "mod"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]


def _pair_inputs(rng, xd, xs, yd, ys, divisor=False):
    x = rand(rng, xs, xd)
    y = rand(rng, ys, yd)
    if divisor and np.dtype(yd).kind in "iub":
        y = np.where(y == 0, 3, y).astype(yd)
    return x, y


@pytest.mark.parametrize("xd,xs,yd,ys", PAIRS, ids=[f"{a}{b}-{c}{d}" for a, b, c, d in PAIRS])
def test_binary_functions_promote_and_broadcast(target, xd, xs, yd, ys):
    rng = np.random.default_rng(stable_seed(xd, yd))
    x, y = _pair_inputs(rng, xd, xs, yd, ys, divisor=True)
    both_bool = xd == yd == "bool"
    names = list(ARITH) + FLOAT_BINARY
    if not both_bool:
        names += ["subtract"] + INT_DIV
    if not np.issubdtype(hnp.result_type(x, y), np.inexact):
        names += BITWISE

    def h(x, y):
        return {n: getattr(hnp, n)(x, y) for n in names}

    def j(x, y):
        return {n: getattr(jnp, n)(x, y) for n in names}
    got = hlo_run(h, (x, y), target)
    want = jax_run(j, (x, y))
    # float16 results of composite functions (logaddexp2...) differ by a few ulps between
    # rounding orders, hence the absolute tolerance
    tol = 4e-3 if "float16" in (xd, yd) else (2e-2 if "bfloat16" in (xd, yd) else 2e-6)
    for n in names:
        assert_same(got[n], want[n], rtol=tol, atol=tol / 2, what=n)


@pytest.mark.parametrize("xd,scalar", [("float16", 2.5), ("uint8", 3), ("int32", 2.5), ("bool", 2),
                                       ("bfloat16", -1.5), ("int8", -7), ("float64", 3),
                                       ("uint32", True), ("float32", 0.1)])
def test_python_scalars_are_weakly_typed(target, xd, scalar):
    """``x op scalar`` keeps x's dtype when the scalar's kind fits (jax.numpy's weak types)."""
    rng = np.random.default_rng(3)
    x = rand(rng, (2, 3), xd, 1, 9) if xd != "bool" else rand(rng, (2, 3), xd)
    names = ["add", "multiply", "maximum", "less", "true_divide"]
    if xd != "bool" and not isinstance(scalar, bool):
        names += ["subtract", "floor_divide", "remainder"]

    def h(x):
        out = {n: getattr(hnp, n)(x, scalar) for n in names}
        out.update({"r" + n: getattr(hnp, n)(scalar, x) for n in ("add", "maximum", "less")})
        return out

    def j(x):
        out = {n: getattr(jnp, n)(x, scalar) for n in names}
        out.update({"r" + n: getattr(jnp, n)(scalar, x) for n in ("add", "maximum", "less")})
        return out
    compare(h, j, (x,), target, rtol=4e-3 if "16" in xd else 1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "float32", "float64"])
def test_power(target, dtype):
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind in "iu":
        x = rand(rng, (3, 4), dtype, 0 if dtype.startswith("u") else -3, 4)
        y = rand(rng, (3, 4), dtype, 0, 4)
    else:
        x = rand(rng, (3, 4), dtype, 0.2, 3.0)
        y = rand(rng, (3, 4), dtype, -2.0, 2.0)

    def f(np_):
        def run(x, y):
            out = {"pow": np_.power(x, y), "sq": x ** 2, "cube": x ** 3, "p0": x ** 0, "p7": x ** 7}
            if np.dtype(dtype).kind == "f":
                out["inv"] = x ** -1
                out["half"] = x ** 0.5
            return out
        return run
    compare(f(hnp), f(jnp), (x, y), target, rtol=2e-6 if dtype != "float64" else 1e-13)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64"])
def test_shifts_and_bitwise(target, dtype):
    rng = np.random.default_rng(11)
    bits = np.dtype(dtype).itemsize * 8
    x = rand(rng, (3, 5), dtype, 0 if dtype.startswith("u") else -100, 100)
    s = rand(rng, (3, 5), dtype, 0, bits)

    def f(np_):
        return lambda x, s: {"l": np_.left_shift(x, s), "r": np_.right_shift(x, s), "inv": np_.invert(x),
                             "and": x & s, "or": x | s, "xor": x ^ s, "lsh": x << 1, "rsh": x >> 2}
    compare(f(hnp), f(jnp), (x, s), target)


def test_floor_divide_and_mod_follow_python_sign_rules(target):
    x = np.array([7, -7, 7, -7, 0, 5], np.int32)
    y = np.array([2, 2, -2, -2, 3, -5], np.int32)
    got = hlo_run(lambda x, y: (x // y, x % y, hnp.fmod(x, y), hnp.divmod(x, y)), (x, y), target)
    np.testing.assert_array_equal(got[0], x // y)
    np.testing.assert_array_equal(got[1], x % y)
    np.testing.assert_array_equal(got[2], np.fmod(x, y))
    np.testing.assert_array_equal(got[3][0], x // y)
    xf, yf = x.astype(np.float32) + 0.5, y.astype(np.float32)
    got = hlo_run(lambda x, y: (x // y, x % y), (xf, yf), target)
    np.testing.assert_array_equal(got[0], xf // yf)
    np.testing.assert_allclose(got[1], xf % yf, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32", "uint64"])
def test_integer_remainder_by_zero_is_zero_like_numpy_and_jax(target, dtype):
    # numpy and jax.numpy give 0 for x % 0 and fmod(x, 0) on every integer type (the IR's
    # remainder keeps XLA's x % 0 = x; the frontend selects 0 where the divisor is 0)
    signed = dtype.startswith("i")
    x = np.array([5, -5, 0, 7, 9, -100] if signed else [5, 3, 0, 7, 9, 100], dtype)
    y = np.array([0, 0, 0, 3, -4, 7] if signed else [0, 0, 0, 3, 4, 7], dtype)
    fns = lambda np_: lambda x, y: {"mod": x % y, "fmod": np_.fmod(x, y), "rmod": 7 % y,
                                    "divmod1": np_.divmod(x, y)[1], "remainder": np_.remainder(x, y)}
    with np.errstate(divide="ignore"):
        want = fns(np)(x, y)
    got = hlo_run(fns(hnp), (x, y), target)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    compare(fns(hnp), fns(jnp), (x, y), target)


def test_where_clip_and_nan_handling(target):
    rng = np.random.default_rng(2)
    x = rand(rng, (4, 6), "float32")
    x[0, :3] = [np.nan, np.inf, -np.inf]
    y = rand(rng, (6,), "float32")

    def f(np_):
        return lambda x, y: {
            "where": np_.where(x > 0, x, y), "where_scalar": np_.where(x > 0, 1.0, 0),
            "where_int_cond": np_.where(np.array([1, 0, 2, 0, 0, 3]), x, -1),
            "clip": np_.clip(x, -0.5, 0.5), "clip_lo": np_.clip(x, min=0.0),
            "clip_arr": np_.clip(x, y, 1.0), "isclose": np_.isclose(x, y, atol=0.3),
            "nan_to_num": np_.nan_to_num(x, nan=-1.0, posinf=9.0),
            "allclose": np_.allclose(x[1:], x[1:] + 1e-9), "array_equal": np_.array_equal(x, x),
            "array_equal_nan": np_.array_equal(x, x, equal_nan=True)}
    compare(f(hnp), f(jnp), (x, y), target)


def test_erf_based_functions_match_float64_reference(target):
    """The error function (no IR op of its own) against math.erf in float64 and float32."""
    x = np.concatenate([np.linspace(-6, 6, 241), [0.0, -0.0, 1.0, -1.0, 27.5, -30.0, np.inf, -np.inf]])
    want = np.array([math.erf(v) for v in x])
    wantc = np.array([math.erfc(v) for v in x])
    got = hlo_run(lambda a: (hlo.lax.erf(a), hlo.lax.erfc(a)), (x,), target)
    np.testing.assert_allclose(got[0], want, rtol=2e-15, atol=1e-16)
    np.testing.assert_allclose(got[1], wantc, rtol=5e-14, atol=1e-300)
    got32 = hlo_run(lambda a: hlo.lax.erf(a), (x.astype(np.float32),), target)
    np.testing.assert_allclose(got32, want, rtol=3e-7, atol=3e-8)
    assert np.isnan(hlo_run(lambda a: hlo.lax.erf(a), (np.array([np.nan]),), target)).all()


import hlo  # used above through hlo.lax
