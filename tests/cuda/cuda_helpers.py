"""Compile IR text for the CUDA target (no GPU needed) and, where a CUDA device is present,
run it and compare with the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from hlo.backends.cuda import compile as cuda_compile
from hlo.backends.nvptx import find_ptxas as ptxas_path
from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import optimize
from hlo.staging.targets import has_usable_nvidia_gpu

HAVE_GPU = has_usable_nvidia_gpu()
gpu = pytest.mark.gpu  # skipped without a GPU (conftest.py)


def compile_src(src: str):
    """The ``CudaProgram`` of IR text, through the CUDA pipeline; with ptxas present, the PTX
    must assemble (the build raises otherwise) and the program carries the cubin."""
    prog = cuda_compile(optimize(parse_module(src), target="cuda"))
    assert prog.ptx.startswith("//") and ".entry" in prog.ptx or not prog.kernels
    if ptxas_path() is not None and prog.kernels:
        assert prog.arch in prog.cubins, "ptxas did not assemble the PTX"
    return prog


# float tolerances on the GPU: fused multiply-adds, reduction order and libdevice's functions
# differ from the CPU's and the interpreter's rounding by a few ulp
GPU_RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6}


def _tol(dt: np.dtype, rtol: float) -> float:
    return max(rtol, GPU_RTOL.get(np.dtype(dt), 1e-2))


def _atol(dt: np.dtype, rtol: float, atol: float) -> float:
    """f16/bf16 round after every op: a reduction summed in another order than the
    interpreter's lands some of their ulps (of the partial sums) away."""
    narrow = np.dtype(dt).itemsize == 2
    return max(atol, 0.08 if narrow else _tol(dt, rtol) * 1e-3)


def check(src: str, args, rtol=0.0, atol=0.0, **kw):
    """``cpu_helpers.check`` for CUDA: compile; on a GPU, run and compare with the interpreter."""
    from cpu_helpers import assert_close
    prog = compile_src(src)
    if not HAVE_GPU:
        return None
    ref = interpret(parse_module(src), list(args))
    got = prog(*args)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        r = np.asarray(r)
        if r.dtype.kind in "fc" or r.dtype.name == "bfloat16":
            part = r.real.dtype  # a complex array's tolerance is its parts'
            assert_close(g, r, _tol(part, rtol), _atol(part, rtol, atol), what=f"output {i}")
        else:
            assert_close(g, r, what=f"output {i}")
    return got


# Row kernels' programs: softmax and layer norm (with gamma, beta) over the last axis of an
# {et}[{n},{m}], read and written in the storage type {et}, computed in f32 (``row_src``)
ROW_SOFTMAX = """module @m
func @main(%arg0: {et}[{n},{m}]) -> ({et}[{n},{m}]) {{
  %x = convert(%arg0) : f32[{n},{m}]
  %0 = constant dense<-inf> : f32[]
  %1 = reduce(%x, %0) {{dimensions = [1]}} : f32[{n}] {{
    ^body(%2: f32[], %3: f32[]):
      %4 = maximum(%2, %3) : f32[]
      return(%4)
  }}
  %5 = broadcast_in_dim(%1) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
  %6 = subtract(%x, %5) : f32[{n},{m}]
  %7 = exponential(%6) : f32[{n},{m}]
  %8 = constant dense<0.0> : f32[]
  %9 = reduce(%7, %8) {{dimensions = [1]}} : f32[{n}] {{
    ^body(%10: f32[], %11: f32[]):
      %12 = add(%10, %11) : f32[]
      return(%12)
  }}
  %13 = broadcast_in_dim(%9) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
  %14 = divide(%7, %13) : f32[{n},{m}]
  %15 = convert(%14) : {et}[{n},{m}]
  return(%15)
}}
"""

ROW_LAYERNORM = """module @m
func @main(%arg0: {et}[{n},{m}], %arg1: f32[{m}], %arg2: f32[{m}]) -> ({et}[{n},{m}]) {{
  %x = convert(%arg0) : f32[{n},{m}]
  %0 = constant dense<0.0> : f32[]
  %1 = reduce(%x, %0) {{dimensions = [1]}} : f32[{n}] {{
    ^body(%2: f32[], %3: f32[]):
      %4 = add(%2, %3) : f32[]
      return(%4)
  }}
  %5 = constant dense<{inv}> : f32[]
  %6 = broadcast_in_dim(%5) {{broadcast_dimensions = []}} : f32[{n}]
  %7 = multiply(%1, %6) : f32[{n}]
  %8 = broadcast_in_dim(%7) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
  %9 = subtract(%x, %8) : f32[{n},{m}]
  %10 = multiply(%9, %9) : f32[{n},{m}]
  %11 = reduce(%10, %0) {{dimensions = [1]}} : f32[{n}] {{
    ^body(%12: f32[], %13: f32[]):
      %14 = add(%12, %13) : f32[]
      return(%14)
  }}
  %15 = multiply(%11, %6) : f32[{n}]
  %16 = constant dense<1e-05> : f32[]
  %17 = broadcast_in_dim(%16) {{broadcast_dimensions = []}} : f32[{n}]
  %18 = add(%15, %17) : f32[{n}]
  %19 = sqrt(%18) : f32[{n}]
  %20 = broadcast_in_dim(%19) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
  %21 = divide(%9, %20) : f32[{n},{m}]
  %22 = broadcast_in_dim(%arg1) {{broadcast_dimensions = [1]}} : f32[{n},{m}]
  %23 = multiply(%21, %22) : f32[{n},{m}]
  %24 = broadcast_in_dim(%arg2) {{broadcast_dimensions = [1]}} : f32[{n},{m}]
  %25 = add(%23, %24) : f32[{n},{m}]
  %26 = convert(%25) : {et}[{n},{m}]
  return(%26)
}}
"""


def row_src(tmpl: str, et: str, n: int, m: int) -> str:
    return tmpl.format(et=et, n=n, m=m, inv=repr(float(np.float32(1.0 / m))))
