"""Products with a row prologue whole vs in chunks of rows (``backends/cpu/dot_chunks.py``),
side by side in one process.

    python -m bench.dot_chunks_ab [--only ln_linear_gelu_res,...] [--reps 60] [--json PATH]

Each seed workload (cpu sizes) is built twice: "whole" (``dot_chunks.CHUNK_BYTES`` so large
that nothing is split: the code before chunking) and "chunked" (the default, from the
machine). The two builds are called in alternation ``--reps`` times; per build the median and
10th/90th percentiles of the wall time and of the process's CPU time a call (which leaves out
time other processes took the cores, on a shared machine), and the temp bytes of
``memory_analysis()``. Workloads without such a product build the same code twice.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

NO_SPLIT = 1 << 62


def measure(case, reps: int) -> dict:
    import hlo
    import hlo.numpy as hnp
    from bench.workloads import Ops
    from hlo.backends.cpu import dot_chunks
    w, ins = case.workload, case.inputs()
    ops = Ops(hnp, getattr(hlo, "grad", None), getattr(hlo, "vmap", None), getattr(hlo, "lax", None))
    builds = {}
    saved = dot_chunks.CHUNK_BYTES
    try:
        with hlo.config.override(cache=False):
            for tag, cb in (("whole", NO_SPLIT), ("chunked", saved)):
                dot_chunks.CHUNK_BYTES = cb
                builds[tag] = hlo.jit(lambda *a: w.fn(ops, *a)).lower(*ins).compile()
    finally:
        dot_chunks.CHUNK_BYTES = saved
    for f in builds.values():
        f(*ins)
    wall = {k: [] for k in builds}
    cpu = {k: [] for k in builds}
    for _ in range(reps):
        for k, f in builds.items():
            t0, c0 = time.perf_counter(), time.process_time()
            f(*ins)
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    out = {}
    for k, f in builds.items():
        row = {"temp_bytes": int(f.memory_analysis().temp_size_in_bytes)}
        for name, xs in (("wall_ms", wall[k]), ("cpu_ms", cpu[k])):
            a = np.array(xs) * 1e3
            row[name] = {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)),
                         "p90": float(np.percentile(a, 90))}
        out[k] = row
    return out


def main() -> None:
    from bench.workloads import select
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    ids = [s for s in args.only.split(",") if s] or None
    results = {}
    for case in select(ids, "cpu", None if ids else ["seed"]):
        r = results[case.name] = measure(case, args.reps)
        cells = "  ".join(f"{k}: wall {v['wall_ms']['median']:.3f} [{v['wall_ms']['p10']:.3f}-{v['wall_ms']['p90']:.3f}] "
                          f"cpu {v['cpu_ms']['median']:.3f} [{v['cpu_ms']['p10']:.3f}-{v['cpu_ms']['p90']:.3f}] ms "
                          f"temp {v['temp_bytes']}" for k, v in r.items())
        print(f"{case.name:24s} {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reps": args.reps, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
