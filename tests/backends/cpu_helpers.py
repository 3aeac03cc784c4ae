"""Shared helpers for the CPU backend tests: compile IR text, run it on the CPU and on the
reference interpreter, and compare."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from hlo.backends.cpu import compile as cpu_compile
from hlo.backends.cpu import compile_module
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import as_written

BF16 = np.dtype(ml_dtypes.bfloat16)


def compile_text(src: str, **kw):
    """Compile IR text as written (fusions by hand, every top-level op a kernel) with the real
    buffer plan and no other pass (``hlo.passes.pipeline.as_written``): tests the backend
    independently of the passes."""
    return cpu_compile(as_written(parse_module(src)), **kw)


def compile_through_pipeline(src: str, **kw):
    """Compile IR text through the passes' CPU pipeline (fusion, layout, buffer assignment)."""
    return compile_module(parse_module(src), **kw)


def _ml_float(dt) -> bool:
    """ml_dtypes's 8-bit and narrower floats."""
    try:
        ml_dtypes.finfo(dt)
    except (ValueError, TypeError):
        return False
    return dt.kind == "V"


def assert_close(got, ref, rtol=0.0, atol=0.0, what=""):
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    if got.dtype.kind == "c":  # each part as a float array
        assert_close(got.real.copy(), ref.real.copy(), rtol, atol, what=f"{what} (real part)")
        assert_close(got.imag.copy(), ref.imag.copy(), rtol, atol, what=f"{what} (imaginary part)")
        return
    if got.dtype.kind == "f" or got.dtype == BF16 or _ml_float(got.dtype):
        g = got.astype(np.float64)
        r = ref.astype(np.float64)
        nan_g, nan_r = np.isnan(g), np.isnan(r)
        assert (nan_g == nan_r).all(), f"{what}: NaN positions differ\n got={got}\n ref={ref}"
        ok = ~nan_r
        if rtol == 0 and atol == 0:
            same = (g[ok] == r[ok]) & (np.signbit(g[ok]) == np.signbit(r[ok]))
            assert same.all(), f"{what}: not bit-equal\n got={got[ok][~same][:8]}\n ref={ref[ok][~same][:8]}"
        else:
            inf = np.isinf(r[ok])
            assert (g[ok][inf] == r[ok][inf]).all(), f"{what}: infinities differ"
            np.testing.assert_allclose(g[ok][~inf], r[ok][~inf], rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


def check(src: str, args, rtol=0.0, atol=0.0, **kw):
    """Run ``src`` on the CPU backend and on the interpreter; compare every output."""
    ref = interpret(parse_module(src), list(args))
    exe = compile_text(src, **kw)
    got = exe.run(list(args))
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert_close(g, r, rtol, atol, what=f"output {i}")
    return got


def unary_src(op, t, rt=None, attrs=""):
    rt = rt or t
    return f"""module @m
func @main(%arg0: {t}) -> ({rt}) {{
  %0 = {op}(%arg0){attrs} : {rt}
  return(%0)
}}
"""


def binary_src(op, t, rt=None, attrs=""):
    rt = rt or t
    return f"""module @m
func @main(%arg0: {t}, %arg1: {t}) -> ({rt}) {{
  %0 = {op}(%arg0, %arg1){attrs} : {rt}
  return(%0)
}}
"""


def special_floats(dtype, n=64, seed=0):
    rng = np.random.default_rng(seed)
    base = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e-3, 65504.0,
                     1e30, -1e-30, 7.0, 100.0])
    x = np.concatenate([base, rng.standard_normal(max(0, n - base.size)) * 4])[:n]
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def int_values(dtype, n=64, seed=0):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    base = [0, 1, -1, 2, -2, 7, info.min, info.max, info.min + 1, info.max - 1, 3, -3, 31, 32, 33, 63, 64]
    base = [v for v in base if info.min <= v <= info.max]
    r = rng.integers(info.min, info.max, max(0, n - len(base)), dtype=dtype, endpoint=True)
    return np.concatenate([np.array(base, dtype=dtype), r])[:n]
