"""Elementwise ops on the CPU backend vs the reference interpreter, per element type."""
import numpy as np
import pytest
from cpu_helpers import BF16, binary_src, check, int_values, special_floats, unary_src

FLOATS = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": BF16}
INTS = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
        "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}

EXACT_UNARY = ["abs", "negate", "sign", "floor", "ceil", "round_nearest_even", "round_nearest_afz", "sqrt"]
APPROX_UNARY = ["exponential", "log", "tanh", "logistic", "rsqrt", "sine", "cosine", "tan",
                "exponential_minus_one", "log_plus_one", "cbrt"]


def _ulp_tol(dt):
    return {"f32": 4e-6, "f64": 1e-14, "f16": 1e-3, "bf16": 8e-3}[dt]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", EXACT_UNARY)
def test_exact_float_unary(op, dt):
    x = special_floats(FLOATS[dt], 40)
    check(unary_src(op, f"{dt}[40]"), [x])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", APPROX_UNARY)
def test_transcendental_unary(op, dt):
    x = special_floats(FLOATS[dt], 40)
    check(unary_src(op, f"{dt}[40]"), [x], rtol=_ulp_tol(dt), atol=1e-30)


@pytest.mark.parametrize("dt", FLOATS)
def test_is_finite(dt):
    x = special_floats(FLOATS[dt], 24)
    check(unary_src("is_finite", f"{dt}[24]", "pred[24]"), [x])


@pytest.mark.parametrize("dt", INTS)
@pytest.mark.parametrize("op", ["abs", "negate", "sign", "not", "popcnt", "count_leading_zeros"])
def test_int_unary(op, dt):
    if op in ("abs", "sign") and dt.startswith("u"):
        pytest.skip("signed-only op")
    x = int_values(INTS[dt], 48)
    check(unary_src(op, f"{dt}[48]"), [x])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum"])
def test_float_binary(op, dt):
    x = special_floats(FLOATS[dt], 48, seed=1)
    y = special_floats(FLOATS[dt], 48, seed=2)[::-1].copy()
    check(binary_src(op, f"{dt}[48]"), [x, y])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("op", ["power", "atan2"])
def test_float_binary_transcendental(op, dt):
    x = special_floats(FLOATS[dt], 48, seed=1)
    y = special_floats(FLOATS[dt], 48, seed=2)[::-1].copy()
    check(binary_src(op, f"{dt}[48]"), [np.abs(x) if op == "power" else x, y], rtol=_ulp_tol(dt), atol=1e-30)


@pytest.mark.parametrize("dt", INTS)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "remainder", "maximum",
                                "minimum", "and", "or", "xor", "shift_left",
                                "shift_right_arithmetic", "shift_right_logical", "power"])
def test_int_binary(op, dt):
    x = int_values(INTS[dt], 64, seed=1)
    y = int_values(INTS[dt], 64, seed=2)[::-1].copy()
    if op == "power":
        y = (y % 9).astype(INTS[dt]) - (3 if dt.startswith("s") else 0)
        y = y.astype(INTS[dt])
    check(binary_src(op, f"{dt}[64]"), [x, y])


@pytest.mark.parametrize("op", ["and", "or", "xor", "add", "multiply", "maximum", "minimum"])
def test_pred_binary(op):
    x = np.array([0, 0, 1, 1], bool)
    y = np.array([0, 1, 0, 1], bool)
    check(binary_src(op, "pred[4]"), [x, y])


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
@pytest.mark.parametrize("dt,ctype", [("f32", None), ("f16", None), ("bf16", None), ("f64", "TOTALORDER"),
                                      ("f32", "TOTALORDER"), ("s32", None), ("u8", None), ("pred", None)])
def test_compare(direction, dt, ctype):
    attrs = f" {{comparison_direction = \"{direction}\"" + (f", compare_type = \"{ctype}\"" if ctype else "") + "}"
    if dt == "pred":
        x = np.array([0, 0, 1, 1] * 8, bool); y = np.array([0, 1, 0, 1] * 8, bool)
    elif dt in INTS:
        x = int_values(INTS[dt], 32, 1); y = int_values(INTS[dt], 32, 2)
    else:
        x = special_floats(FLOATS[dt], 32, 1); y = special_floats(FLOATS[dt], 32, 1)[::-1].copy()
    check(binary_src("compare", f"{dt}[32]", "pred[32]", attrs), [x, y])


ALL = {**FLOATS, **INTS, "pred": np.bool_}


@pytest.mark.parametrize("src", list(ALL))
@pytest.mark.parametrize("dst", list(ALL))
def test_convert(src, dst):
    if src in FLOATS:
        x = special_floats(FLOATS[src], 32, 3)
        with np.errstate(all="ignore"):
            x = np.concatenate([x, np.array([1e10, -1e10, 255.5, -128.7, 3e38, 70000.0], np.float64).astype(FLOATS[src])])
    elif src == "pred":
        x = np.array([True, False] * 19)
    else:
        x = int_values(INTS[src], 38, 3)
    n = x.size
    check(unary_src("convert", f"{src}[{n}]", f"{dst}[{n}]"), [x])


def test_select_clamp():
    src = """module @m
func @main(%arg0: pred[16], %arg1: f32[16], %arg2: f32[16], %arg3: f32[], %arg4: pred[]) -> (f32[16], f32[16], f32[16]) {
  %0 = select(%arg0, %arg1, %arg2) : f32[16]
  %1 = clamp(%arg3, %arg1, %arg2) : f32[16]
  %2 = select(%arg4, %arg1, %arg2) : f32[16]
  return(%0, %1, %2)
}
"""
    rng = np.random.default_rng(0)
    check(src, [rng.random(16) > 0.5, rng.standard_normal(16).astype(np.float32),
                rng.standard_normal(16).astype(np.float32) + 2, np.float32(-0.5), np.array(True)])


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "f64"])
@pytest.mark.parametrize("eb,mb", [(5, 10), (8, 7), (4, 3), (8, 23), (5, 2)])
def test_reduce_precision(dt, eb, mb):
    x = special_floats(FLOATS[dt], 40, 5)
    check(unary_src("reduce_precision", f"{dt}[40]", attrs=f" {{exponent_bits = {eb}, mantissa_bits = {mb}}}"), [x])


@pytest.mark.parametrize("src,dst,shape_in,shape_out", [
    ("f32", "s32", [8], [8]), ("s32", "f32", [8], [8]), ("f32", "u8", [8], [8, 4]),
    ("u8", "f32", [8, 4], [8]), ("f64", "s32", [4], [4, 2]), ("bf16", "s16", [8], [8]), ("f16", "u16", [8], [8])])
def test_bitcast_convert(src, dst, shape_in, shape_out):
    x = special_floats(FLOATS[src], int(np.prod(shape_in)), 7).reshape(shape_in) if src in FLOATS else \
        int_values(INTS[src], int(np.prod(shape_in)), 7).reshape(shape_in)
    si = ",".join(map(str, shape_in)); so = ",".join(map(str, shape_out))
    check(unary_src("bitcast_convert", f"{src}[{si}]", f"{dst}[{so}]"), [x])
