"""Compile time against program size: ``python -m bench.compile_scaling [--sizes 1000,5000,20000]``.

Each program is one ``hlo.jit`` function of about N top-level traced ops, repeating a block of
the kinds of work real programs hold: a short elementwise chain, a row softmax (reductions read
back by the row), a small matrix product with a bias and an activation, and a full reduction
read back by every element. Shapes are small, so the time is the compiler's: tracing, the passes
and LLVM (the persistent cache is off). Prints one line per size and the time per 1,000 ops
(process CPU time: wall time is shown too, but it counts whatever else the machine runs)
relative to the smallest program (1.0 = linear growth). Timings live here only; tests never
assert them."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def program(n_ops: int):
    """A function of ``(x, w)`` that traces to about ``n_ops`` ops."""
    import hlo.numpy as hnp

    def block(x, w, i):
        y = hnp.tanh(x * 0.5 + i) - x                                    # chain
        m = y.max(axis=1, keepdims=True)
        e = hnp.exp(y - m)
        y = e / e.sum(axis=1, keepdims=True)                             # row softmax
        y = hnp.maximum(y @ w + 0.1, 0.0)                                # dot + bias + relu
        return y - y.mean() + x                                          # full reduce read back

    per_block = 33  # traced ops of one block, reduction bodies included (``traced_ops``)
    blocks = max(1, n_ops // per_block)

    def f(x, w):
        for i in range(blocks):
            x = block(x, w, float(i % 7))
        return x
    return f


def traced_ops(lowered) -> int:
    return sum(1 for _ in lowered.ir.walk())


def measure(n_ops: int) -> dict:
    import numpy as np

    import hlo
    x = np.ones((8, 16), np.float32)
    w = np.full((16, 16), 0.01, np.float32)
    f = hlo.jit(program(n_ops))
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = f.lower(x, w)
    t1 = time.perf_counter()
    compiled = lowered.compile(target="cpu")
    c2, t2 = time.process_time(), time.perf_counter()
    out = compiled(x, w)
    assert np.isfinite(np.asarray(out)).all()
    return {"ops": traced_ops(lowered), "trace_s": t1 - t0, "compile_s": t2 - t1,
            "total_s": t2 - t0, "cpu_s": c2 - c0, "kernels": compiled.cost_analysis()["kernels"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compile_scaling", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,5000,20000", help="program sizes in ops, comma-separated")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    os.environ["HLO_CACHE"] = "0"
    rows = []
    for n in [int(s) for s in a.sizes.split(",")]:
        r = measure(n)
        rows.append(r)
        base = rows[0]
        rel = (r["cpu_s"] / r["ops"]) / (base["cpu_s"] / base["ops"])
        print(f"{r['ops']:>7} ops  {r['kernels']:>6} kernels  trace {r['trace_s']:7.2f}s  "
              f"compile {r['compile_s']:7.2f}s  total {r['total_s']:7.2f}s  CPU {r['cpu_s']:7.2f}s  "
              f"{r['cpu_s'] / r['ops'] * 1e3:5.2f} CPU s per 1,000 ops ({rel:.2f}x the first size's)",
              flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
