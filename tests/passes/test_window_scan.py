"""The window-scan pass (passes/window_scan.py): a reduce_window that is a running reduction (the
forms jax emits for cumsum, cumprod, cummax, cummin, cumlogsumexp, forward and reverse) becomes
an associative scan (IR text in, IR text out; checked against the reduce_window in the
interpreter and against float64 numpy); every other reduce_window stays, with its reason in the
decision log. Imported jax programs: tests/frontend/test_cumulative_scan.py."""
from __future__ import annotations

import numpy as np
import pytest
from pass_testing import filecheck, rewritten

from hlo.ir import parse_module
from hlo.ir.interpreter import run

RNG = np.random.default_rng(0)

LOGADDEXP_BODY = """
      %mx = maximum(%a, %b) : {t}[]
      %d = subtract(%a, %b) : {t}[]
      %nan = compare(%d, %d) {{compare_type = "FLOAT", comparison_direction = "NE"}} : pred[]
      %s = add(%a, %b) : {t}[]
      %ad = abs(%d) : {t}[]
      %ng = negate(%ad) : {t}[]
      %e = exponential(%ng) : {t}[]
      %l = log_plus_one(%e) : {t}[]
      %r0 = add(%mx, %l) : {t}[]
      %r = select(%nan, %s, %r0) : {t}[]
"""


def window(n=40, rows=3, kind="add", t="f32", init="0", pad=None, wd=None, axis=1, extra=""):
    """A reduce_window over [rows, n] along ``axis`` (jax's cumulative form unless ``pad`` /
    ``wd`` say otherwise) whose body is ``kind`` of its arguments."""
    shape = [rows, n]
    size = shape[axis]
    wd = wd or [size if d == axis else 1 for d in range(2)]
    pad = pad or [[size - 1, 0] if d == axis else [0, 0] for d in range(2)]
    body = LOGADDEXP_BODY.format(t=t) if kind == "logaddexp" else f"%r = {kind}(%a, %b) : {t}[]"
    return f"""
    func @main(%x: {t}[{rows},{n}]) -> ({t}[{rows},{n}]) {{
      %init = constant dense<{init}> : {t}[]
      %y = reduce_window(%x, %init) {{padding = {pad}, window_dimensions = {wd}{extra}}} : {t}[{rows},{n}] {{
        ^body(%a: {t}[], %b: {t}[]):
          {body}
          return(%r)
      }}
      return(%y)
    }}
    """


def test_a_cumsum_window_becomes_a_scan_of_levels():
    out, log = rewritten(window(40), ["window-scan"], "cpu", tol=1e-5)
    # 40 -> 20 -> 10 -> 5 -> 2 -> 1: five levels, each its pairs and its interleave kept
    filecheck(out, """
    CHECK-COUNT-10: optimization_barrier
    CHECK-NOT: reduce_window
    CHECK: slice(%arg0) {limit_indices = [3, 39], start_indices = [0, 0], strides = [1, 2]} : f32[3,20]
    CHECK-NEXT: slice(%arg0) {limit_indices = [3, 40], start_indices = [0, 1], strides = [1, 2]} : f32[3,20]
    CHECK-NEXT: add
    CHECK-NEXT: optimization_barrier
    CHECK: interior_padding = [0, 1]} : f32[3,40]
    CHECK-NEXT: interior_padding = [0, 1]} : f32[3,40]
    CHECK-NEXT: add(
    CHECK-NEXT: optimization_barrier
    CHECK-NEXT: return
    """)
    assert log == "window-scan: scan of reduce_window (f32[3,40]): running add along axis 1"


@pytest.mark.parametrize("kind,t,init", [
    ("add", "f32", "0.0"), ("multiply", "f64", "1.0"), ("maximum", "f32", "-inf"), ("minimum", "f32", "inf"),
    ("logaddexp", "f32", "-inf"), ("add", "s32", "0"), ("maximum", "s32", "-2147483648"),
    ("minimum", "u8", "255"), ("or", "pred", "false"), ("and", "pred", "true"), ("maximum", "pred", "false"),
    ("multiply", "s64", "1"), ("add", "f16", "0.0")])
@pytest.mark.parametrize("n,reverse", [(17, False), (64, True), (100, False), (333, True)])
def test_each_body_and_dtype_forward_and_reverse_as_the_window_computes_it(kind, t, init, n, reverse):
    pad = [[0, 0], [0, n - 1] if reverse else [n - 1, 0]]
    src = window(n, kind=kind, t=t, init=init, pad=pad)
    tol = {"f16": 1e-3 * n, "f32": 2e-5 * n ** 0.5}.get(t, 1e-10)   # (both fold with rounding)
    if kind == "multiply" and t.startswith("f"):   # random inputs of any size: compare ratios
        tol = 1e-9
    out, log = rewritten(src, ["window-scan"], "cpu", tol=tol)
    assert "reduce_window" not in out and "scan of reduce_window" in log, log
    # against numpy in float64 on inputs of this test's choosing
    m = parse_module(out)
    x = RNG.standard_normal((3, n))
    if t == "pred":
        x = x > 0.8 if kind == "or" else x > -0.8
    elif t[0] in "su":
        x = np.clip(np.round(x * 3) + (3 if t[0] == "u" else 0), 1 if kind == "multiply" else -9, 9)
        if kind == "multiply":
            x = np.where(RNG.random((3, n)) < 0.9, 1, x)   # a product of n small ints stays in range
    elif kind == "multiply":
        x = 1 + 0.01 * x
    x = x.astype(m.main.arg_types[0].np_dtype)
    xf = np.flip(x, 1) if reverse else x
    ref = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "or": np.logical_or, "and": np.logical_and, "logaddexp": np.logaddexp}[kind]
    want = ref.accumulate(xf.astype(np.float64) if t[0] == "f" else xf, axis=1)
    want = np.flip(want, 1) if reverse else want
    got = run(m, [x])[0]
    if t[0] == "f":
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2 if t == "f16" else 1e-5,
                                   atol=(0.05 * n ** 0.5 if t == "f16" else 1e-4))
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


def test_nans_and_infinities_go_through_as_in_the_window():
    x = RNG.standard_normal((2, 50)).astype(np.float32)
    x[0, 10], x[1, 20], x[1, 30] = np.nan, np.inf, -np.inf
    for kind, init in (("add", "0.0"), ("maximum", "-inf"), ("logaddexp", "-inf")):
        src = window(50, rows=2, kind=kind, init=init)
        out, log = rewritten(src, ["window-scan"], "cpu", tol=1e-5)
        a, b = run(parse_module(src), [x])[0], run(parse_module(out), [x])[0]
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5, err_msg=kind)


@pytest.mark.parametrize("src,why", [
    (window(16), "16 elements along axis 1, at most 16"),
    (window(40, init="1.0"), "its init value 1.0 is not the identity 0.0 of add"),
    (window(40, kind="maximum", init="-1.0e+30"), "is not the identity -inf of maximum"),
    (window(40, kind="subtract"), "its body is not one the pass knows to be associative"),
    (window(40, kind="add", t="c64", init="(0.0,0.0)"), "add on c64 is not a scan the pass does"),
    (window(40, wd=[1, 8], pad=[[0, 0], [7, 0]]), "a sliding window of 8 of the 40 elements of axis 1"),
    (window(40, pad=[[0, 0], [38, 1]]), "its padding [38, 1] of axis 1 is not a prefix's (39, 0) or (0, 39)"),
    (window(40, wd=[3, 40], pad=[[2, 0], [39, 0]]), "its window spans 2 axes"),
    (window(40, rows=1, extra=", window_strides = [2, 1]"), "its window strides are not all 1"),
    (window(40, wd=[1, 1], pad=[[0, 0], [0, 0]]), "its windows have one element"),
])
def test_every_other_window_stays_with_its_reason(src, why):
    out, log = rewritten(src, ["window-scan"], "cpu", tol=1e-5)
    assert "reduce_window" in out and "kept reduce_window" in log
    assert why in log, log


def test_a_variadic_window_stays():
    src = """
    func @main(%x: f32[40], %i: s32[40]) -> (f32[40], s32[40]) {
      %z = constant dense<-inf> : f32[]
      %m = constant dense<-1> : s32[]
      %y, %j = reduce_window(%x, %i, %z, %m) {padding = [[39, 0]], window_dimensions = [40]} : f32[40], s32[40] {
        ^body(%a: f32[], %ai: s32[], %b: f32[], %bi: s32[]):
          %ge = compare(%a, %b) {comparison_direction = "GE"} : pred[]
          %v = select(%ge, %a, %b) : f32[]
          %k = select(%ge, %ai, %bi) : s32[]
          return(%v, %k)
      }
      return(%y, %j)
    }
    """
    out, log = rewritten(src, ["window-scan"], "cpu")
    assert "reduce_window" in out and "it reduces 2 arrays together" in log
