"""Complex numbers on the CPU backend vs the reference interpreter (numpy's complex functions
in complex128): every elementwise op that takes complex operands, conversions, reductions,
dot_general, and complex values in and out of compiled code (interleaved like numpy)."""
import numpy as np
import pytest
from cpu_helpers import binary_src, check, unary_src

CTYPES = {"c64": (np.complex64, 2e-5), "c128": (np.complex128, 1e-12)}
UNARY = ["negate", "sign", "exponential", "exponential_minus_one", "log", "log_plus_one",
         "sqrt", "rsqrt", "cbrt", "tanh", "tan", "sine", "cosine", "logistic"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "atan2"]


def values(dt, n=48, seed=0):
    rng = np.random.default_rng(seed)
    base = np.array([0, 1, -1, 1j, -1j, 0.5 + 0.5j, -2 - 3j, 3 + 0j, 1e-4 + 2e-4j, -0.3 + 0.1j,
                     4 - 4j, 0.25j])
    r = (rng.standard_normal(n) + 1j * rng.standard_normal(n)) * 2
    return np.concatenate([base, r])[:n].astype(dt)


def check_complex(src, args, tol):
    """``check`` (CPU vs interpreter) with one tolerance for both parts; on another target's
    ``check`` (tests/cuda), the values come back only where a device ran them."""
    return check(src, args, rtol=tol, atol=tol)


@pytest.mark.parametrize("ct", CTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, ct):
    dt, tol = CTYPES[ct]
    check_complex(unary_src(op, f"{ct}[48]"), [values(dt)], tol)


@pytest.mark.parametrize("ct", CTYPES)
def test_abs_is_the_modulus_in_the_part_type(ct):
    dt, tol = CTYPES[ct]
    part = "f32" if ct == "c64" else "f64"
    check_complex(unary_src("abs", f"{ct}[48]", f"{part}[48]"), [values(dt)], tol)


@pytest.mark.parametrize("ct", CTYPES)
@pytest.mark.parametrize("op", BINARY)
def test_binary(op, ct):
    dt, tol = CTYPES[ct]
    x, y = values(dt, seed=1), values(dt, seed=2)
    if op == "power":  # keep the results finite and away from the branch cut
        x = x + 3
    check_complex(binary_src(op, f"{ct}[48]"), [x, y], tol)


def test_lexicographic_max_min_and_compare():
    x = np.array([1 + 2j, 1 + 3j, 2 + 0j, np.nan + 0j, 0j], np.complex64)
    y = np.array([1 + 3j, 1 + 2j, 1 + 9j, 1 + 1j, 0j], np.complex64)
    src = """module @m
func @main(%a: c64[5], %b: c64[5]) -> (c64[5], c64[5], pred[5], pred[5], pred[5]) {
  %0 = maximum(%a, %b) : c64[5]
  %1 = minimum(%a, %b) : c64[5]
  %2 = compare(%a, %b) {comparison_direction = "LT"} : pred[5]
  %3 = compare(%a, %b) {comparison_direction = "EQ"} : pred[5]
  %4 = compare(%a, %b) {comparison_direction = "NE"} : pred[5]
  return(%0, %1, %2, %3, %4)
}
"""
    got = check_complex(src, [x, y], 0.0)
    if got is not None:
        assert got[0][0] == 1 + 3j and got[1][1] == 1 + 2j and np.isnan(got[0][3].real)
        assert got[2].tolist() == [True, False, False, False, False]
        assert got[4].tolist() == [True, True, True, True, False]


def test_complex_real_imag_and_conversions():
    re_ = np.linspace(-3, 3, 12).astype(np.float32)
    im = np.linspace(5, -1, 12).astype(np.float32)
    src = """module @m
func @main(%a: f32[12], %b: f32[12]) -> (c64[12], f32[12], f32[12], c128[12], s32[12], f32[12], c64[12]) {
  %0 = complex(%a, %b) : c64[12]
  %1 = real(%0) : f32[12]
  %2 = imag(%0) : f32[12]
  %3 = convert(%0) : c128[12]
  %4 = convert(%0) : s32[12]
  %5 = imag(%a) : f32[12]
  %6 = convert(%4) : c64[12]
  return(%0, %1, %2, %3, %4, %5, %6)
}
"""
    got = check_complex(src, [re_, im], 0.0)
    if got is not None:
        np.testing.assert_array_equal(got[0], re_ + 1j * im)
        np.testing.assert_array_equal(got[4], np.trunc(re_).astype(np.int32))


@pytest.mark.parametrize("ct", CTYPES)
def test_reduce_and_dot_general(ct):
    dt, tol = CTYPES[ct]
    a = values(dt, 48, seed=3).reshape(6, 8)
    b = values(dt, 48, seed=4).reshape(8, 6)
    src = f"""module @m
func @main(%a: {ct}[6,8], %b: {ct}[8,6]) -> ({ct}[6], {ct}[6,6]) {{
  %z = constant dense<(0.0, 0.0)> : {ct}[]
  %0 = reduce(%a, %z) {{dimensions = [1]}} : {ct}[6] {{
    ^body(%x: {ct}[], %y: {ct}[]):
      %s = add(%x, %y) : {ct}[]
      return(%s)
  }}
  %1 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : {ct}[6,6]
  return(%0, %1)
}}
"""
    got = check_complex(src, [a, b], tol * 10)
    if got is not None:
        np.testing.assert_allclose(got[1], a.astype(np.complex128) @ b, rtol=tol * 10, atol=tol * 10)


def test_bitcast_complex_to_and_from_integers():
    x = values(np.complex64, 8)
    src = """module @m
func @main(%a: c64[8]) -> (s64[8], c64[8]) {
  %0 = bitcast_convert(%a) : s64[8]
  %1 = bitcast_convert(%0) : c64[8]
  return(%0, %1)
}
"""
    got = check_complex(src, [x], 0.0)
    if got is not None:
        np.testing.assert_array_equal(got[0], x.view(np.int64))
