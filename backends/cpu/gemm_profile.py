"""Where a compiled CPU program spends its time, kernel by kernel, and how its matrix products
compare with numpy's BLAS on the same shapes.

    python -m hlo.backends.cpu.gemm_profile transformer_layer [--quick] [--reps N]

(run from the repository root: the workloads come from ``bench/workloads.py``.)
``profile(optimized)`` compiles every top-level op of the optimized ``main`` (in schedule order)
as a program of its own, with its operands as parameters, and times it (median of repeated
runs, random inputs). Ops that hold a ``dot_general`` also report the product's canonical
shape [B x M x K] x [B x K x N], their GFLOP/s, and the time of ``numpy.matmul`` on the same
shapes (numpy's bundled OpenBLAS, all cores) next to it: the GEMM's own speed, apart from its
prologues and epilogues. Bitcasts (free reshapes and transposes) and constants are skipped.

Timing one op alone leaves out what running next to its neighbours changes (caches warmed by
the previous kernel), so the per-op times add up to a little more than the whole program.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from hlo.ir.core import Function, Module, Operation
from hlo.ir.clone import clone_op


@dataclass
class OpTime:
    index: int
    what: str  # op name (fusion kind and name)
    result: str  # result type(s)
    seconds: float
    gemm: Optional[tuple] = None  # (B, M, K, N) of the op's dot_general, if any
    numpy_seconds: Optional[float] = None  # numpy.matmul on the same canonical shapes
    numpy_dtype: Optional[object] = None

    @property
    def gflops(self) -> Optional[float]:
        if self.gemm is None:
            return None
        B, M, K, N = self.gemm
        return 2.0 * B * M * K * N / self.seconds / 1e9


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


def gemm_shape(dot: Operation) -> tuple:
    """(B, M, K, N) of a dot_general: batch, lhs free, contracting and rhs free sizes."""
    lhs, rhs = dot.operands
    a = dot.attrs
    lb, rb = list(a.get("lhs_batching_dimensions", ())), list(a.get("rhs_batching_dimensions", ()))
    lc, rc = list(a.get("lhs_contracting_dimensions", ())), list(a.get("rhs_contracting_dimensions", ()))
    p = lambda v, ds: int(np.prod([v.shape[d] for d in ds])) if ds else 1
    lfree = [d for d in range(lhs.type.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.type.rank) if d not in rb and d not in rc]
    return p(lhs, lb), p(lhs, lfree), p(lhs, lc), p(rhs, rfree)


def _random(t, rng):
    dt = t.dtype.np_dtype
    if t.dtype.is_float:
        return rng.standard_normal(t.shape).astype(dt)
    if t.dtype.is_pred:
        return rng.random(t.shape) < 0.5
    return rng.integers(0, 4, size=t.shape).astype(dt)


def single_op_module(op: Operation) -> Module:
    """A module whose main runs ``op`` alone, its distinct operands as parameters."""
    params = []
    for v in op.operands:
        if v not in params:
            params.append(v)
    fn = Function("main", [v.type for v in params])
    vmap = dict(zip(params, fn.args))
    new = clone_op(op, vmap)
    fn.body.append(new)
    fn.body.outputs = list(new.results)
    m = Module("profile")
    m.add(fn)
    return m


def profile(optimized, threads: Optional[int] = None, min_time: float = 0.2) -> List[OpTime]:
    from hlo.passes.layout import is_bitcast
    from . import compile as cpu_compile
    from .fallback_plan import Unoptimized
    rng = np.random.default_rng(0)
    out: List[OpTime] = []
    for i, op in enumerate(optimized.module.main.body.ops):
        if op.name == "constant" or is_bitcast(op):
            continue
        m = single_op_module(op)
        exe = cpu_compile(Unoptimized(m), threads=threads)
        args = [_random(t, rng) for t in m.main.arg_types]
        sec = _median_time(lambda: exe.run(args), min_time)
        what = op.name if op.name != "fusion" else f"fusion {op.attrs.get('kind')} {op.attrs.get('name', '')}"
        rec = OpTime(i, what.strip(), ", ".join(str(r.type) for r in op.results), sec)
        dots = [o for o in op.walk() if o.name == "dot_general"]
        if len(dots) == 1 and dots[0].operands[0].dtype.is_float:
            rec.gemm = gemm_shape(dots[0])
            rec.numpy_dtype = dots[0].operands[0].dtype.np_dtype
        out.append(rec)
    # numpy last: OpenBLAS's own threads spin for a while after each call and would slow the
    # next op's timing if the two were interleaved
    for rec in out:
        if rec.gemm is not None:
            B, M, K, N = rec.gemm
            a = rng.standard_normal((B, M, K)).astype(rec.numpy_dtype)
            b = rng.standard_normal((B, K, N)).astype(rec.numpy_dtype)
            c = np.empty((B, M, N), rec.numpy_dtype)
            rec.numpy_seconds = _median_time(lambda: np.matmul(a, b, out=c), min_time)
    return out


def report(rows: List[OpTime], total: Optional[float] = None) -> str:
    lines = [f"{'#':>3} {'ms':>8} {'GFLOP/s':>8} {'numpy ms':>9} {'hlo/np':>6}  op"]
    for r in rows:
        g = f"{r.gflops:8.1f}" if r.gflops is not None else " " * 8
        n = f"{r.numpy_seconds * 1e3:9.3f}" if r.numpy_seconds else " " * 9
        q = f"{r.seconds / r.numpy_seconds:6.2f}" if r.numpy_seconds else " " * 6
        shape = f" gemm[{'x'.join(map(str, r.gemm))}]" if r.gemm else ""
        lines.append(f"{r.index:>3} {r.seconds * 1e3:8.3f} {g} {n} {q}  {r.what} -> {r.result}{shape}")
    s = sum(r.seconds for r in rows)
    lines.append(f"sum of kernels {s * 1e3:.3f} ms" + (f"; whole program {total * 1e3:.3f} ms" if total else ""))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--min-time", type=float, default=0.2)
    args = ap.parse_args(argv)
    import hlo
    import hlo.numpy as hnp
    from hlo.passes.pipeline import optimize
    from bench import workloads as W
    case = W.select([args.workload], "quick" if args.quick else "cpu")[0]
    inputs = case.inputs()
    ops = W.Ops(hnp, hlo.grad, hlo.vmap)
    fn = lambda *a: case.workload.fn(ops, *a)
    f = hlo.jit(fn, target="cpu")
    f(*inputs)
    total = _median_time(lambda: f(*inputs), args.min_time)
    opt = optimize(f.lower(*inputs).ir, target="cpu")
    print(report(profile(opt, args.threads, args.min_time), total))


if __name__ == "__main__":
    main()
