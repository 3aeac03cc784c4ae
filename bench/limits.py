"""The machine's own limits, measured in the same run as the workloads: copy bandwidth (bytes read +
written per second of a large copy) and matrix-product throughput. Memory-bound workloads report
their achieved bandwidth as a fraction of the copy bandwidth; matrix-heavy ones their GFLOP/s.
"""
from __future__ import annotations

import statistics
import time

import numpy as np


def _best_and_median(fn, reps: int) -> tuple:
    fn()                                              # warm-up (page faults, thread pools)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def _copy_GBps(copy, nbytes: int, reps: int) -> float:
    """Bytes read + written per second of ``copy()`` moving ``nbytes`` (median of ``reps``)."""
    best, med = _best_and_median(copy, reps)
    return 2 * nbytes / med / 1e9


def _matmul_GFLOPs(m: int, reps: int) -> float:
    a = np.random.default_rng(0).standard_normal((m, m)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((m, m)).astype(np.float32)
    best, med = _best_and_median(lambda: a @ b, reps)
    return 2.0 * m ** 3 / med / 1e9


def cpu_limits(quick: bool = False) -> dict:
    """numpy copy (one thread), torch copy_ (its thread pool, when torch is installed) and numpy
    (OpenBLAS, all cores) f32 matmul, the best median of three sizes, all on the host CPU."""
    n = (8 << 20) if quick else (64 << 20)           # f32 elements: 32 MiB or 256 MiB, past any cache
    reps = 3 if quick else 7
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    out: dict = {"copy_bytes": 2 * src.nbytes}
    out["copy_GBps_numpy_1thread"] = _copy_GBps(lambda: np.copyto(dst, src), src.nbytes, reps)
    try:
        import torch
        ts, td = torch.from_numpy(src), torch.from_numpy(dst)
        out["copy_GBps_torch_threads"] = _copy_GBps(lambda: td.copy_(ts), src.nbytes, reps)
        out["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    out["copy_GBps"] = max(v for k, v in out.items() if k.startswith("copy_GBps_"))
    per_n = {m: _matmul_GFLOPs(m, reps) for m in ((256, 512) if quick else (512, 1024, 2048))}
    out["matmul_GFLOPs_f32_by_n"] = per_n
    out["matmul_n"] = max(per_n, key=per_n.get)
    out["matmul_GFLOPs_f32"] = per_n[out["matmul_n"]]
    return out


def gpu_limits(quick: bool = False) -> dict:
    """Device-to-device copy and f32 (no TF32) / bf16 matmul through torch on CUDA, timed with CUDA
    events. Empty when torch has no CUDA device."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    out: dict = {"device_name": torch.cuda.get_device_name()}

    def timed(fn, reps):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        return statistics.median(ts)

    def copy_time(n):
        src = torch.ones(n, device="cuda")
        dst = torch.empty_like(src)
        return timed(lambda: dst.copy_(src), 10)

    def matmul_time(m, dt):
        a = torch.randn(m, m, device="cuda", dtype=dt)
        b = torch.randn(m, m, device="cuda", dtype=dt)
        return timed(lambda: a @ b, 10)

    n = (16 << 20) if quick else (256 << 20)          # f32 elements: 64 MiB or 1 GiB
    out["copy_bytes"] = 2 * n * 4
    out["copy_GBps"] = out["copy_bytes"] / copy_time(n) / 1e9
    m = 2048 if quick else 8192
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for dt, key in ((torch.float32, "matmul_GFLOPs_f32"), (torch.bfloat16, "matmul_GFLOPs_bf16")):
            out[key] = 2.0 * m ** 3 / matmul_time(m, dt) / 1e9
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    out["matmul_n"] = m
    torch.cuda.empty_cache()
    return out
