"""Compile IR text for the CUDA target (no GPU needed) and, where a CUDA device is present,
run it and compare with the reference interpreter."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from hlo.ir import parse_module
from hlo.ir.interpreter import run as interpret
from hlo.passes.pipeline import optimize
from hlo.backends.cuda import compile as cuda_compile
from hlo.backends.nvptx import find_ptxas as ptxas_path
from hlo.targets import has_usable_nvidia_gpu

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
