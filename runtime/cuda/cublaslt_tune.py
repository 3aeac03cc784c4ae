"""Choosing among cuBLASLt's candidate algorithms for one matrix product by timing them.

cuBLASLt's heuristic ranks the algorithms for a shape; its first is not always the fastest on
the device at hand (XLA's ``gemm_algorithm_picker`` times them for the same reason). When the
heuristic offers more than one (``MatmulPlan`` asks for ``CANDIDATES``), ``fastest(plan,
candidates)`` runs each on scratch buffers of the product's sizes (filled with a small
non-zero byte pattern), ``REPEATS`` times recorded into one CUDA graph so that the launch cost
from Python does not hide the kernels' own time, and returns the index of the fastest. The
choice is remembered for the process (``_chosen``, by device, params, pointer alignment and
workspace size), so each distinct product is timed once, when its plan is first built (at
load: ``launch.MatmulCall``). A candidate that fails to run is skipped; when timing itself
fails, the heuristic's first is kept. ``log`` holds a line per timed product (the candidates'
times and the choice, or why timing failed). Off unless ``HLO_CUBLASLT_AUTOTUNE=1``: timing
costs a few milliseconds a product at load (the first call of a saved executable has a
150 ms budget in all) and, measured on an H200, moved no seed workload beyond noise.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, List, Optional, Sequence

from . import driver
from .errors import CudaError

ENABLED = os.environ.get("HLO_CUBLASLT_AUTOTUNE", "0") not in ("", "0")
CANDIDATES = 8
REPEATS = 16
FILL_BYTE = 0x3C  # f32 0.0115, f16 1.06, bf16 0.0115: finite, non-zero

_chosen: Dict[tuple, int] = {}
LOG_LINES = 200
log: List[str] = []  # one line a timed product: the candidates' times and the choice (or the failure)
_lock = threading.Lock()


def fastest(plan, key: tuple, candidates: Sequence[int], workspace_sizes: Sequence[int]) -> int:
    """Index into ``candidates`` (addresses of ``cublasLtMatmulAlgo_t``) of the fastest
    algorithm for ``plan`` (a ``cublaslt.MatmulPlan`` whose descriptors and scales are set)."""
    if len(candidates) < 2 or not ENABLED:
        return 0
    with _lock:
        got = _chosen.get(key)
        if got is not None and got < len(candidates):
            return got
        try:
            got, times = _time_all(plan, candidates, workspace_sizes)
            us = " ".join("-" if t is None else f"{t * 1e6:.1f}" for t in times)
            _note(f"{plan.describe()}: candidate {got} of {len(candidates)} (us: {us})")
        except Exception as e:  # timing is an optimization: the heuristic's first always works
            got = 0
            _note(f"{plan.describe()}: timing failed ({type(e).__name__}: {e}); the heuristic's first")
        _chosen[key] = got
        return got


def _note(line: str) -> None:
    log.append(line)
    del log[:-LOG_LINES]


def _time_all(plan, candidates: Sequence[int], workspace_sizes: Sequence[int]) -> tuple:
    """(index of the fastest candidate, seconds per call of each: None where it did not run)."""
    cu = driver.cu
    lt, lib = plan.lt, plan.lib
    ctx = lt.ctx
    ctx.make_current()
    sizes = plan.operand_bytes()
    sizes["workspace"] = max(list(workspace_sizes) + [0])
    stream = driver.Stream(ctx)
    bufs: Dict[str, int] = {}
    graphs: List = []
    try:
        for name, n in sizes.items():
            if n:
                bufs[name] = ctx.alloc(n, what="timing cuBLASLt's algorithms")
                driver.check(cu.cuMemsetD8Async(bufs[name], FILL_BYTE, n, stream.handle), "cuMemsetD8Async")
        if "bias" in bufs:
            plan.set_bias(bufs["bias"])
        a, b, d = bufs["a"], bufs["b"], bufs["d"]
        c = bufs.get("c", d)
        times = []
        for algo, ws in zip(candidates, workspace_sizes):
            def call(s=stream.ptr, algo=algo, ws=ws):
                return lib.cublasLtMatmul(lt.handle, plan.desc, plan.alpha, a, plan.a_desc, b, plan.b_desc,
                                          plan.beta, c, plan.c_desc, d, plan.d_desc, algo,
                                          bufs.get("workspace", 0), ws, s)
            if call() != 0:  # this algorithm does not run here
                times.append(None)
                continue
            stream.synchronize("timing cuBLASLt's algorithms")
            try:
                times.append(_graph_time(stream, call, graphs))
            except CudaError:  # not recordable into a graph: not one the executable can replay
                times.append(None)
        ok = [(t, i) for i, t in enumerate(times) if t is not None]
        return (min(ok)[1] if ok else 0), times
    finally:
        try:
            stream.synchronize()
        finally:
            for g, ge in graphs:
                cu.cuGraphExecDestroy(ge)
                cu.cuGraphDestroy(g)
            for ptr in bufs.values():
                ctx.free(ptr)


def _graph_time(stream, call, graphs: list) -> Optional[float]:
    """Seconds one ``call()`` takes on the device: ``REPEATS`` of them recorded into a graph,
    launched once to warm up and once between two timing events."""
    cu = driver.cu
    driver.check(cu.cuStreamBeginCapture(stream.handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                 "cuStreamBeginCapture")
    bad = False
    try:
        for _ in range(REPEATS):
            bad = bad or call() != 0
    finally:
        g = driver.check(cu.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
    ge = driver.check(cu.cuGraphInstantiate(g, 0), "cuGraphInstantiate")
    graphs.append((g, ge))
    if bad:
        return None
    start = driver.check(cu.cuEventCreate(0), "cuEventCreate")
    end = driver.check(cu.cuEventCreate(0), "cuEventCreate")
    try:
        driver.check(cu.cuGraphLaunch(ge, stream.handle), "cuGraphLaunch")
        driver.check(cu.cuEventRecord(start, stream.handle), "cuEventRecord")
        driver.check(cu.cuGraphLaunch(ge, stream.handle), "cuGraphLaunch")
        driver.check(cu.cuEventRecord(end, stream.handle), "cuEventRecord")
        driver.check(cu.cuEventSynchronize(end), "cuEventSynchronize")
        elapsed = getattr(cu, "cuEventElapsedTime", None) or cu.cuEventElapsedTime_v2
        ms = driver.check(elapsed(start, end), "cuEventElapsedTime")
        return float(ms) * 1e-3 / REPEATS
    finally:
        cu.cuEventDestroy(start)
        cu.cuEventDestroy(end)
