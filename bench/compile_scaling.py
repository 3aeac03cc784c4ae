"""Compile time against program size: ``python -m bench.compile_scaling [--sizes 1000,5000,20000]
[--shapes chain,stack,outputs] [--scalars 10000]``.

Shapes of program, each one ``hlo.jit`` function (``--shapes``):

- ``chain`` (long): about N top-level traced ops, repeating a block of the kinds of work real
  programs hold: a short elementwise chain, a row softmax (reductions read back by the row), a
  small matrix product with a bias and an activation, and a full reduction read back by every
  element;
- ``stack`` (wide): ``hnp.stack`` of N rows, each a row of the input times a constant;
- ``outputs`` (wide): N outputs, ``x * i + 1`` for i < N.

Shapes are small, so the time is the compiler's: tracing, the passes and LLVM (the persistent
cache is off). Prints one line per shape and size and the time per 1,000 traced ops (process
CPU time: wall time is shown too, but it counts whatever else the machine runs) relative to the
shape's smallest program (1.0 = linear growth). ``--scalars N`` also times a stack of N scalars
(``hnp.stack([x[i] for i in range(N)])``, the issue's case: it had not finished in 3 minutes at
10,000). Timings live here only; tests never assert them."""
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


def stack_program(n: int):
    """``x`` of shape [n, 4] -> ``hnp.stack`` of its n rows, each scaled by a constant."""
    import hlo.numpy as hnp

    def f(x, w):
        return hnp.stack([x[i] * float(i % 5 + 1) for i in range(n)])
    return f


def outputs_program(n: int):
    """``x`` -> n outputs ``x * i + 1``."""
    def f(x, w):
        return tuple(x * float(i) + 1.0 for i in range(n))
    return f


def scalars_program(n: int):
    """``x`` of n elements -> ``hnp.stack`` of its n scalars."""
    import hlo.numpy as hnp

    def f(x, w):
        return hnp.stack([x[i] for i in range(n)])
    return f


def traced_ops(lowered) -> int:
    return sum(1 for _ in lowered.ir.walk())


def measure(n_ops: int, shape: str = "chain") -> dict:
    import numpy as np

    import hlo
    w = np.full((16, 16), 0.01, np.float32)
    if shape == "chain":
        x, f = np.ones((8, 16), np.float32), program(n_ops)
    elif shape == "stack":
        x, f = np.arange(n_ops * 4, dtype=np.float32).reshape(n_ops, 4), stack_program(n_ops)
    elif shape == "outputs":
        x, f = np.arange(4, dtype=np.float32), outputs_program(n_ops)
    elif shape == "scalars":
        x, f = np.arange(n_ops, dtype=np.float32), scalars_program(n_ops)
    else:
        raise ValueError(f"unknown program shape {shape!r} (chain, stack, outputs, scalars)")
    f = hlo.jit(f)
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = f.lower(x, w)
    t1 = time.perf_counter()
    compiled = lowered.compile(target="cpu")
    c2, t2 = time.process_time(), time.perf_counter()
    out = compiled(x, w)
    if shape == "chain":
        assert np.isfinite(np.asarray(out)).all()
    else:  # the wide shapes against numpy
        ref = {"stack": lambda: np.stack([x[i] * float(i % 5 + 1) for i in range(n_ops)]),
               "outputs": lambda: tuple(x * float(i) + 1.0 for i in range(n_ops)),
               "scalars": lambda: x.copy()}[shape]()
        if shape == "outputs":
            assert len(out) == n_ops and all(np.array_equal(a, b) for a, b in zip(out, ref))
        else:
            assert np.array_equal(np.asarray(out), ref)
    return {"shape": shape, "n": n_ops, "ops": traced_ops(lowered), "trace_s": t1 - t0, "compile_s": t2 - t1,
            "total_s": t2 - t0, "cpu_s": c2 - c0, "kernels": compiled.cost_analysis()["kernels"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compile_scaling", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,5000,20000",
                   help="program sizes, comma-separated: ops (chain), stacked rows (stack), outputs")
    p.add_argument("--shapes", default="chain,stack,outputs",
                   help="program shapes, comma-separated: chain, stack, outputs (see the docstring)")
    p.add_argument("--scalars", type=int, default=10000,
                   help="also time a stack of this many scalars (0: not)")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    os.environ["HLO_CACHE"] = "0"
    rows = []
    runs = [(shape, int(n)) for shape in a.shapes.split(",") for n in a.sizes.split(",")]
    if a.scalars:
        runs.append(("scalars", a.scalars))
    for shape, n in runs:
        r = measure(n, shape)
        rows.append(r)
        base = next(b for b in rows if b["shape"] == shape)
        rel = (r["cpu_s"] / r["ops"]) / (base["cpu_s"] / base["ops"])
        print(f"{shape:>8} {n:>6}: {r['ops']:>7} ops  {r['kernels']:>6} kernels  trace {r['trace_s']:7.2f}s  "
              f"compile {r['compile_s']:7.2f}s  total {r['total_s']:7.2f}s  CPU {r['cpu_s']:7.2f}s  "
              f"{r['cpu_s'] / r['ops'] * 1e3:5.2f} CPU s per 1,000 ops ({rel:.2f}x the first size's)",
              flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
