"""Where a compiled CPU program spends its time, kernel by kernel, measured inside the program,
and how its matrix products compare with numpy's BLAS on the same shapes.

    python -m hlo.backends.cpu.gemm_profile transformer_layer [--quick] [--min-time S]

(run from the repository root: the workloads come from ``bench/workloads.py``.)
``profile_calls(compiled, args)`` calls a profiled build (``compile(profile=True)``, whose
entry times every step with the monotonic clock: ``hlo.runtime.cpu.profile``) for ``min_time``
seconds after a warm-up call; the main table is its ``report()``: every kernel's time in the
real run, with neighbours' cache effects and the thread pool included, and the product
kernels' GFLOP/s. ``numpy_rows`` then times ``numpy.matmul`` (numpy's bundled OpenBLAS, all
cores) on each product kernel's canonical shapes [B x M x K] x [B x K x N]: the GEMM's speed
next to the library's, apart from prologues and epilogues (a fused epilogue runs inside the
product kernel, so it counts in hlo's time).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import List, Tuple

import numpy as np

from hlo.runtime.cpu.profile import Profile, StepProfile


def _median_time(fn, min_time: float = 0.2, reps: int = 5) -> float:
    fn()
    ts = []
    t_end = time.perf_counter() + min_time
    while len(ts) < reps or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        if len(ts) > 2000:
            break
    return statistics.median(ts)


def profile_calls(compiled, args, min_time: float = 0.2, min_calls: int = 3,
                  warmup: float = 0.0) -> Profile:
    """The in-program profile of calls of ``compiled`` (a profiled build) on ``args``: calls
    for ``warmup`` seconds (at least one), not counted, then at least ``min_calls`` calls and
    ``min_time`` seconds."""
    t_end = time.perf_counter() + warmup
    compiled(*args)
    while time.perf_counter() < t_end:
        compiled(*args)
    compiled.reset_profile()
    n, t_end = 0, time.perf_counter() + min_time
    while n < min_calls or time.perf_counter() < t_end:
        compiled(*args)
        n += 1
    return compiled.profile()


def numpy_rows(prof: Profile, min_time: float = 0.2) -> List[Tuple[StepProfile, float]]:
    """(product kernel, median seconds of ``numpy.matmul`` on its canonical shapes)."""
    from hlo.ir.types import BY_NAME
    rng = np.random.default_rng(0)
    out = []
    for s in prof.products:
        if not s.flops:
            continue
        B, M, K, N = s.gemm
        dt = BY_NAME[s.dtype].np_dtype
        a = rng.standard_normal((B, M, K)).astype(dt)
        b = rng.standard_normal((B, K, N)).astype(dt)
        c = np.empty((B, M, N), dt)
        out.append((s, _median_time(lambda: np.matmul(a, b, out=c), min_time)))
    return out


def numpy_report(rows: List[Tuple[StepProfile, float]]) -> str:
    lines = [f"{'#':>4} {'hlo ms':>8} {'GFLOP/s':>8} {'numpy ms':>9} {'hlo/np':>6}  product"]
    for s, t in rows:
        lines.append(f"{s.index:>4} {s.mean_seconds * 1e3:8.3f} {s.gflops or 0:8.1f} {t * 1e3:9.3f} "
                     f"{s.mean_seconds / t:6.2f}  {s.name} gemm[{'x'.join(map(str, s.gemm))}] {s.dtype}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--min-time", type=float, default=0.2)
    args = ap.parse_args(argv)
    import hlo
    import hlo.numpy as hnp
    from bench import workloads as W
    case = W.select([args.workload], "quick" if args.quick else "cpu")[0]
    inputs = case.inputs()
    ops = W.Ops(hnp, hlo.grad, hlo.vmap)
    f = hlo.jit(lambda *a: case.workload.fn(ops, *a), target="cpu")
    prof = profile_calls(f.lower(*inputs).compile(profile=True), inputs, args.min_time)
    print(prof.report())
    rows = numpy_rows(prof, args.min_time)  # numpy last: OpenBLAS's threads spin after a call
    if rows:
        print("\nproducts next to numpy.matmul on the same shapes (mean per call):")
        print(numpy_report(rows))


if __name__ == "__main__":
    main()
