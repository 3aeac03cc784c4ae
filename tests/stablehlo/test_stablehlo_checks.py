"""The test suites' check ops: their custom syntax, how the importer collects them, and their
semantics (StableHLO's reference checker)."""
import ml_dtypes
import numpy as np
import pytest

from hlo.ir.stablehlo import import_with_checks, mlir_bridge
from hlo.ir.stablehlo.check_syntax import rewrite_check_ops
from hlo.ir.stablehlo.checks import Check, ulp_difference

FORMS = [
    ("check.expect_eq %a, %b : tensor<2xi32>",
     '"check.expect_eq"(%a, %b) : (tensor<2xi32>, tensor<2xi32>) -> ()'),
    ("check.expect_eq_const %a, dense<[1, 2]> : tensor<2xi32>",
     '"check.expect_eq_const"(%a) {value = dense<[1, 2]> : tensor<2xi32>} : (tensor<2xi32>) -> ()'),
    ("check.expect_almost_eq %a, %b, tolerance = 0.1 : tensor<2xf32>",
     '"check.expect_almost_eq"(%a, %b) {tolerance = 0.1 : f64} : (tensor<2xf32>, tensor<2xf32>) -> ()'),
    ("check.expect_almost_eq_const %a, dense<5.1> : tensor<f64> {tolerance = 0.1 : f64}",
     '"check.expect_almost_eq_const"(%a) {value = dense<5.1> : tensor<f64>, tolerance = 0.1 : f64} : (tensor<f64>) -> ()'),
    ("check.expect_close %a, %b, max_ulp_difference = 3 : tensor<f16>, tensor<f16>",
     '"check.expect_close"(%a, %b) {max_ulp_difference = 3 : ui64} : (tensor<f16>, tensor<f16>) -> ()'),
    ('check.expect_serialized_eq %a, probe_id = "p", iter = 1 : tensor<i64>',
     '"check.expect_serialized_eq"(%a) {probe_id = "p", iteration = 1 : ui32} : (tensor<i64>) -> ()'),
]


@pytest.mark.parametrize("custom,generic", FORMS)
def test_custom_form_becomes_generic(custom, generic):
    assert rewrite_check_ops("  " + custom + "\n") == "  " + generic + "\n"


def test_multiline_constant_and_trailing_comment():
    text = ("  check.expect_eq_const %r,\n      dense<[[1, 2],\n             [3, 4]]> : tensor<2x2xi64> // note\n"
            "  func.return\n")
    out = rewrite_check_ops(text)
    assert out.startswith('  "check.expect_eq_const"(%r) {value = dense<[[1, 2],\n             [3, 4]]> : '
                          'tensor<2x2xi64>} : (tensor<2x2xi64>) -> () // note\n')
    assert out.endswith("  func.return\n")


TEST_FUNC = """
func.func @t() {
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = stablehlo.add %a, %a : tensor<2xf32>
  check.expect_almost_eq_const %b, dense<[2.0, 4.0]> : tensor<2xf32>
  check.expect_close %b, %a, max_ulp_difference = 2 : tensor<2xf32>, tensor<2xf32>
  func.return
}
"""


def test_checks_become_results_of_their_function():
    m, checks = import_with_checks(TEST_FUNC, source_name="t.mlir")
    fn = m["t"]
    assert len(fn.result_types) == 3  # %b for the first check, %b and %a for the second
    c1, c2 = checks["t"]
    assert (c1.kind, c1.actual, c1.expected, c1.tolerance) == ("expect_almost_eq", 0, None, 1e-4)
    np.testing.assert_array_equal(c1.expected_value, [2.0, 4.0])
    assert (c2.kind, c2.actual, c2.expected, c2.max_ulp) == ("expect_close", 1, 2, 2)
    assert c1.loc.file == "t.mlir" and c1.loc.line == 5


def test_custom_call_checks_of_testdata():
    text = """
module @jit_main {
  func.func public @main() -> tensor<2xf32> {
    %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %1 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%0, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_almost_eq(%0, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %0 : tensor<2xf32>
  }
}"""
    m, checks = import_with_checks(text)
    close, almost = checks["main"]
    assert (close.kind, close.min_ulp, close.max_ulp, close.actual, close.expected) == ("expect_close", 0, 3, 1, 2)
    assert (almost.kind, almost.tolerance) == ("expect_almost_eq", 1e-3)
    assert len(m.main.result_types) == 5


def _check(kind, actual, expected, **kw):
    return Check(kind, 0, 1, **kw).evaluate([np.asarray(actual), np.asarray(expected)])


def test_expect_eq_is_ieee_equality():
    f = np.float32
    assert _check("expect_eq", f([0.0, 1.5]), f([-0.0, 1.5])) is None
    assert "1 of 1" in _check("expect_eq", f([np.nan]), f([np.nan]))  # as the reference: NaN != NaN
    assert _check("expect_eq", np.int8([1, -2]), np.int8([1, -2])) is None
    msg = _check("expect_eq", np.int8([1, 2, 3]), np.int8([1, 0, 0]))
    assert "2 of 3 element(s) differ" in msg and "index [1]: 2 (actual) vs 0 (expected)" in msg


def test_expect_almost_eq_tolerance_and_non_finite():
    f = np.float64
    assert _check("expect_almost_eq", f([5.0]), f([5.0001])) is None          # default 1e-4
    assert _check("expect_almost_eq", f([5.0]), f([5.00011])) is not None
    assert _check("expect_almost_eq", f([5.0]), f([5.1]), tolerance=0.1) is None
    assert _check("expect_almost_eq", f([np.nan, np.inf]), f([np.nan, np.inf])) is None
    assert _check("expect_almost_eq", f([np.nan]), f([1.0])) is not None
    assert _check("expect_almost_eq", f([np.inf]), f([1e308])) is not None


def test_ulp_difference_matches_the_reference_definition():
    one = np.float32(1.0)
    nxt = np.nextafter(one, np.float32(2))
    assert ulp_difference(np.float32([one]), np.float32([nxt]))[0] == 1
    tiny = np.float32(1e-45)  # the smallest subnormal
    assert ulp_difference(np.float32([tiny]), np.float32([-tiny]))[0] == 2
    assert ulp_difference(np.float32([0.0]), np.float32([-0.0]))[0] == 0
    nan2 = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert ulp_difference(np.float32([np.nan]), nan2)[0] == 0
    assert ulp_difference(np.float32([np.inf]), np.float32([3.4e38]))[0] == np.iinfo(np.uint64).max
    b = np.array([1.0, 1.0078125], ml_dtypes.bfloat16)  # adjacent bf16 values
    assert ulp_difference(b[:1], b[1:])[0] == 1
    h = np.float16([65504.0])
    assert ulp_difference(h, np.float16([np.inf]))[0] == np.iinfo(np.uint64).max


def test_expect_close_bounds():
    a = np.float32([1.0, 2.0])
    b = np.nextafter(a, np.float32(3))
    assert _check("expect_close", a, b, max_ulp=1) is None
    assert _check("expect_close", a, a, min_ulp=1, max_ulp=3) is not None
    assert "ULP difference" in _check("expect_close", a, np.float32([1.5, 2.0]), max_ulp=3)
    assert "floating-point" in _check("expect_close", np.int32([1]), np.int32([1]))


def test_generic_props_of_unregistered_check_ops_are_read():
    text = """
module {
  func.func @t() {
    %c = stablehlo.constant dense<[1, 2]> : tensor<2xi8>
    "check.expect_eq_const"(%c) <{value = dense<[1, 2]> : tensor<2xi8>}> : (tensor<2xi8>) -> ()
    return
  }
}"""
    mlir_bridge.parse(text)
    m, checks = import_with_checks(text)
    np.testing.assert_array_equal(checks["t"][0].expected_value, np.int8([1, 2]))
