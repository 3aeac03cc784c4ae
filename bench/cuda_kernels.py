"""Per-kernel GPU time and DRAM traffic of every seed workload on hlo:cuda, read with Nsight
Compute (``ncu``), so a speed change can be aimed at the kernel that costs the time.

    ncu --clock-control none --profile-from-start off --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        python3 bench/cuda_kernels.py [--workloads softmax,layernorm] > kernels.csv
    python3 bench/cuda_kernels.py --report kernels.csv

Each workload is compiled and called twice outside the profiled range (the first call builds the
CUDA graphs), then once inside it (``cuProfilerStart`` / ``cuProfilerStop``), so the CSV holds
exactly one call's kernels per workload, in launch order, cuBLASLt's included. ``--report``
prints, per workload, each kernel's time, its bytes and the bandwidth they make, and the
workload's sum.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ncu's CSV units (it prints nanoseconds as "ns" or "nsecond" depending on its version)
UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
         "s": 1.0, "second": 1.0, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
         "KB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}


def run(ids) -> None:
    sys.path.insert(0, str(REPO))
    from cuda.bindings import driver as cu

    import hlo
    import hlo.numpy as hnp
    from bench.workloads import Ops, flatten, select
    for case in select(ids, "gpu"):
        w = case.workload

        def fn(*a, _body=w.fn):
            return _body(Ops(hnp, hlo.grad, hlo.vmap), *a)
        jf = hlo.jit(fn, target="cuda")
        args = [hlo.device_put(a) for a in case.inputs()]
        for _ in range(2):
            for o in flatten(jf(*args)):
                o.block_until_ready()
        print(f"# workload {case.name}", file=sys.stderr, flush=True)
        cu.cuProfilerStart()
        for o in flatten(jf(*args)):
            o.block_until_ready()
        cu.cuProfilerStop()


def report(path: str) -> None:
    text = Path(path).read_text()
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels = defaultdict(dict)  # (launch id) -> fields
    order = []
    for r in rows:
        key = r["ID"]
        if key not in kernels:
            order.append(key)
        k = kernels[key]
        k["name"] = r["Kernel Name"]
        unit, val = r["Metric Unit"], float(r["Metric Value"].replace(",", "") or 0)
        scale = UNITS.get(unit)
        if scale is None:
            raise SystemExit(f"unknown unit {unit!r} for {r['Metric Name']} in {path}")
        k[r["Metric Name"]] = val * scale
    total_t = total_b = 0.0
    for key in order:
        k = kernels[key]
        t = k.get("gpu__time_duration.sum", 0.0)
        b = k.get("dram__bytes_read.sum", 0.0) + k.get("dram__bytes_write.sum", 0.0)
        total_t, total_b = total_t + t, total_b + b
        print(f"{t * 1e6:9.1f} us {b / 1e6:9.2f} MB {b / max(t, 1e-12) / 1e9:7.0f} GB/s  {k['name'][:90]}")
    print(f"{total_t * 1e6:9.1f} us {total_b / 1e6:9.2f} MB  total of {len(order)} kernels")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--report", default=None, help="print a CSV that ncu wrote")
    a = ap.parse_args()
    if a.report:
        report(a.report)
    else:
        run(a.workloads.split(",") if a.workloads else None)
