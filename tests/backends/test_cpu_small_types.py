"""2- and 4-bit integers and the 8-bit and narrower floats on the CPU backend vs the reference
interpreter (ml_dtypes): conversions from f32 round exactly as ml_dtypes does (every code's
value, every midpoint between neighbours and its two f32 neighbours, NaN, infinities,
overflow), arithmetic rounds after every op, and values move in and out of compiled code in
ml_dtypes's one-byte layout."""
import ml_dtypes
import numpy as np
import pytest
from cpu_helpers import binary_src, check, compile_text, unary_src

from hlo.ir.types import SMALL_FLOATS

SMALL = [t.name for t in SMALL_FLOATS]


def _probe_values(dt):
    codes = np.arange(256 if np.dtype(dt).itemsize else 0, dtype=np.uint8)
    vals = codes.view(dt).astype(np.float32)
    vals = vals[np.isfinite(vals)]
    v = np.unique(vals.astype(np.float64))
    mids = (v[1:] + v[:-1]) / 2
    pts = np.concatenate([v, mids, v * 1.5, v * 4]).astype(np.float32)
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)),
                          np.nextafter(pts, np.float32(-np.inf))])
    pts = np.concatenate([pts, -pts, np.array([np.nan, -np.nan, np.inf, -np.inf, 3e38, 1e-40], np.float32)])
    return pts


@pytest.mark.parametrize("name", SMALL)
def test_convert_from_f32_rounds_like_ml_dtypes(name):
    dt = np.dtype(getattr(ml_dtypes, dict(zip(SMALL, [
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
        "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
        "float4_e2m1fn"]))[name]))
    x = _probe_values(dt)
    if name == "f8e8m0fnu":  # a scale format: ml_dtypes rounds f32 subnormals and values past
        # 2^127 its own way (documented in backends/small_float.py); compare the normal range
        a = np.abs(x)
        x = x[np.isnan(x) | (a == 0) | ((a >= 2.0 ** -126) & (a <= 2.0 ** 127))]
    n = x.size
    exe = compile_text(unary_src("convert", f"f32[{n}]", f"{name}[{n}]"))
    got = exe.run([x])[0]
    want = x.astype(dt)
    assert got.dtype == dt
    bad = got.view(np.uint8) != want.view(np.uint8)
    assert not bad.any(), (x[bad][:8], got.view(np.uint8)[bad][:8], want.view(np.uint8)[bad][:8])


@pytest.mark.parametrize("name", ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e4m3b11fnuz", "f8e3m4"])
@pytest.mark.parametrize("op", ["add", "multiply", "divide", "maximum"])
def test_small_float_arithmetic(name, op):
    et = next(t for t in SMALL_FLOATS if t.name == name)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64) * 4).astype(et.np_dtype)
    y = (rng.standard_normal(64) * 4).astype(et.np_dtype)
    check(binary_src(op, f"{name}[64]"), [x, y])


def test_small_float_dot_and_widening():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((4, 8))).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((8, 3))).astype(ml_dtypes.float8_e4m3fn)
    src = """module @m
func @main(%a: f8e4m3fn[4,8], %b: f8e4m3fn[8,3]) -> (f32[4,3], f32[4,8]) {
  %0 = dot_general(%a, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,3]
  %1 = convert(%a) : f32[4,8]
  return(%0, %1)
}
"""
    got = check(src, [a, b], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0], a.astype(np.float32) @ b.astype(np.float32), rtol=1e-6)


SUB = {"s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2}
INT_OPS = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and",
           "or", "xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "power"]


def _all_pairs(dt):
    info = ml_dtypes.iinfo(dt)
    v = np.arange(info.min, info.max + 1)
    x, y = np.meshgrid(v, v)
    return x.reshape(-1).astype(dt), y.reshape(-1).astype(dt)


@pytest.mark.parametrize("name", SUB)
@pytest.mark.parametrize("op", INT_OPS)
def test_sub_byte_integer_ops_on_every_pair(name, op):
    x, y = _all_pairs(SUB[name])
    n = x.size
    check(binary_src(op, f"{name}[{n}]"), [x, y])


@pytest.mark.parametrize("name", SUB)
@pytest.mark.parametrize("op", ["negate", "not", "popcnt", "count_leading_zeros"])
def test_sub_byte_integer_unary(name, op):
    info = ml_dtypes.iinfo(SUB[name])
    x = np.arange(info.min, info.max + 1).astype(SUB[name])
    check(unary_src(op, f"{name}[{x.size}]"), [x])


@pytest.mark.parametrize("name", SUB)
def test_sub_byte_conversions(name):
    x = np.array([-100.5, -9, -8.7, -2, -1.5, -0.0, 0.4, 1, 3.9, 7.5, 8, 15.5, 16, 300, np.nan, np.inf], np.float32)
    n = x.size
    src = f"""module @m
func @main(%a: f32[{n}]) -> ({name}[{n}], s32[{n}], f32[{n}]) {{
  %0 = convert(%a) : {name}[{n}]
  %1 = convert(%0) : s32[{n}]
  %2 = convert(%0) : f32[{n}]
  return(%0, %1, %2)
}}
"""
    got = check(src, [x])
    info = ml_dtypes.iinfo(SUB[name])
    want = np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x, posinf=1e9)), info.min, info.max))
    np.testing.assert_array_equal(got[1], want.astype(np.int32))
