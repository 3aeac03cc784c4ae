"""Float sums on cuda stay accurate at any length (issue 35): a thread's partial of a float32
(or f16/bf16) sum over a long row or column is kept in f64 (``kernels.wide_sum``), a split
reduction's partials are f64 and their total is rounded once; a thread that sums a column
element by element (the loop kernel) adds at most ``THREAD_SUM_BLOCK`` values in f32 before
its f64 total takes them. The PTX is read without a GPU; with one (marker ``gpu``), a float32
sum of 2^26 uniform values is within 1e-6 of float64, and so are the issue's other shapes."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cuda_helpers import compile_src, gpu

import hlo
import hlo.numpy as hnp

RTOL = 1e-6


def _reduce(shape, dims, op="add", et="f32", init="0.0"):
    t = f"{et}[{','.join(map(str, shape))}]"
    out = [n for d, n in enumerate(shape) if d not in dims]
    ot = f"{et}[{','.join(map(str, out))}]"
    return f"""module @m
func @main(%x: {t}) -> ({ot}) {{
  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%x, %0) {{dimensions = {list(dims)}}} : {ot} {{
    ^body(%a: {et}[], %b: {et}[]):
      %c = {op}(%a, %b) : {et}[]
      return(%c)
  }}
  return(%1)
}}
"""


def _f64_adds(ptx: str) -> int:
    return len(re.findall(r"\badd\.(?:rn\.)?f64\b", ptx))


@pytest.mark.parametrize("shape,dims,kind", [
    ((8192, 8192), (0, 1), "split"),          # one result: slices a block each, then the total
    ((4096, 4096), (1,), "block"),            # a block per row
    ((1 << 20, 8), (0,), "split column"),     # few long columns: runs a thread each
    ((1024, 64), (0,), "column loop"),        # a thread per column, element by element
])
def test_float_sums_accumulate_in_f64(shape, dims, kind):
    prog = compile_src(_reduce(shape, dims))
    assert _f64_adds(prog.ptx) > 0, kind
    # max is exact in any order: no widening
    assert _f64_adds(compile_src(_reduce(shape, dims, op="maximum", init="-inf")).ptx) == 0, kind


def test_integer_and_f64_sums_are_not_widened():
    assert "f64" not in compile_src(_reduce((8192, 8192), (0, 1), et="s32", init="0")).ptx
    assert "cvt.f64.f32" not in compile_src(_reduce((8192, 8192), (0, 1), et="f64")).ptx


@gpu
def test_sum_of_2_26_values_on_cuda():
    x = np.random.default_rng(35).random((8192, 8192), dtype=np.float32)
    total = np.sum(x, dtype=np.float64)

    def rel(got, ref):
        got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
        return float(np.max(np.abs(got - ref) / np.abs(ref)))

    sum_all = hlo.jit(lambda x: x.sum(), target="cuda")
    assert rel(sum_all(x), total) < RTOL
    assert rel(sum_all(x.reshape(-1)), total) < RTOL
    assert rel(sum_all(x.reshape(1 << 20, 64)), total) < RTOL
    for axis in (0, 1):
        got = hlo.jit(lambda x: x.sum(axis=axis), target="cuda")(x)
        assert rel(got, np.sum(x, axis=axis, dtype=np.float64)) < RTOL, axis
    for shape in ((1 << 20, 64), (1 << 22, 16)):  # few long columns: the split column kernel
        got = hlo.jit(lambda x: x.sum(axis=0), target="cuda")(x.reshape(shape))
        assert rel(got, np.sum(x.reshape(shape), axis=0, dtype=np.float64)) < RTOL, shape
    got = hlo.jit(lambda x: hnp.var(x, axis=1), target="cuda")(x[:1024])
    assert rel(got, np.var(x[:1024].astype(np.float64), axis=1)) < RTOL
    a, b = x[0], x[1]
    got = hlo.jit(lambda a, b: (a[:, None] * b[None, :]).sum(), target="cuda")(a, b)
    assert rel(got, np.sum(a, dtype=np.float64) * np.sum(b, dtype=np.float64)) < RTOL
