"""Cold start on the GPU: a fresh process's time to its first result (a GPU machine only).

    python -m bench.coldstart [--repeats 5] [--json FILE]

Rows, each the median of ``--repeats`` fresh ``python3`` processes (``--peer-repeats`` for torch
and jax, whose processes take seconds each; each after one unmeasured run that brings the files
into the page cache; a child gets 60 s), timed by the parent from
starting the process until the child prints that its result is on the host (the child's exit
is not counted):

- ``driver floor``: import numpy and cuda.bindings, cuInit, retain and set the primary
  context, one allocation, one copy of the input in and of a result out: what any CUDA
  program in Python pays before its own work.
- ``hlo``: import hlo, ``hlo.load`` a saved transformer_layer ``.hlox`` (target cuda, saved
  once by the parent), its first call on the inputs (numpy, from an ``.npz``), the result
  copied to the host.
- ``torch``: import torch, the inputs to the GPU, bench/torch_impl's transformer_layer (eager),
  the result to the host.
- ``jax``: import jax, jax.jit of the same definition as hlo's (trace + XLA compile + run), the
  result to the host.

The bar (issue 33): hlo within 100 ms of the driver floor. ``python -m bench --gpu`` runs
this as its ``coldstart`` section."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

FLOOR = r"""
import sys, numpy as np
from cuda.bindings import driver as cu
x = np.load(sys.argv[1])["a0"]
def ok(r):
    if r[0] != cu.CUresult.CUDA_SUCCESS: raise SystemExit(f"driver error {r[0]}")
    return r[1] if len(r) > 1 else None
ok(cu.cuInit(0))
dev = ok(cu.cuDeviceGet(0))
ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
ok(cu.cuCtxSetCurrent(ctx))
p = ok(cu.cuMemAlloc(x.nbytes))
ok(cu.cuMemcpyHtoD(p, x.ctypes.data, x.nbytes))
y = np.empty_like(x)
ok(cu.cuMemcpyDtoH(y.ctypes.data, p, x.nbytes))
print("RESULT", float(y.ravel()[0]), flush=True)
"""

HLO = r"""
import sys, numpy as np
import hlo
f = hlo.load(sys.argv[2])
d = np.load(sys.argv[1])
out = f(*[d[f"a{i}"] for i in range(len(d.files))])
print("RESULT", float(np.asarray(out).ravel()[0]), flush=True)
"""

TORCH = r"""
import sys, numpy as np
import torch
from bench import torch_impl
d = np.load(sys.argv[1])
args = [torch.from_numpy(d[f"a{i}"]).cuda() for i in range(len(d.files))]
with torch.no_grad():
    out = torch_impl.EAGER["transformer_layer"](*args)
print("RESULT", float(out.cpu().numpy().ravel()[0]), flush=True)
"""

JAX = r"""
import sys, numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_default_matmul_precision", "highest")
from bench.workloads import Ops, transformer_layer
d = np.load(sys.argv[1])
f = jax.jit(lambda *a: transformer_layer(Ops(jnp), *a))
out = f(*[d[f"a{i}"] for i in range(len(d.files))])
print("RESULT", float(np.asarray(out).ravel()[0]), flush=True)
"""


def first_result_s(script: str, argv: list, env: dict, timeout_s: float = 60.0) -> float:
    """Seconds from starting a fresh python3 until it prints its RESULT line (the child is
    killed after ``timeout_s``: a row that errors, not a section that never ends)."""
    import threading
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", script] + argv, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    timer = threading.Timer(timeout_s, p.kill)
    timer.start()
    try:
        for line in p.stdout:
            if line.startswith("RESULT"):
                dt = time.perf_counter() - t
                p.stdout.read()
                p.wait()
                return dt
        err = p.stderr.read()
        p.wait()
    finally:
        timer.cancel()
    if time.perf_counter() - t >= timeout_s:
        raise RuntimeError(f"no result within {timeout_s:g} s")
    raise RuntimeError(f"the child printed no result (exit {p.returncode}): {err.strip()[-400:]}")


def run(repeats: int = 5, peer_repeats: int = 3, json_path=None) -> dict:
    """The rows (see the module's docstring); with ``json_path``, the JSON is rewritten after
    each row, so a run stopped part way keeps the rows it finished."""
    import hlo
    import hlo.numpy as hnp
    from bench.workloads import Ops, select, transformer_layer
    tmp = Path(tempfile.mkdtemp(prefix="bench-coldstart-"))
    case = [c for c in select(["transformer_layer"], "gpu") if c.dtype == "f32"][0]
    inputs = case.inputs()
    npz = tmp / "inputs.npz"
    np.savez(npz, **{f"a{i}": a for i, a in enumerate(inputs)})
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env["HLO_CACHE_DIR"] = str(tmp / "hlo-cache")  # the .hlox is what is loaded, not a cache
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    f = hlo.jit(lambda *a: transformer_layer(Ops(hnp), *a), target="cuda")
    hlox = tmp / "transformer_layer.hlox"
    f.lower(*inputs).compile().save(hlox)
    rows = {}
    res = {"repeats": repeats, "peer_repeats": peer_repeats, "rows": rows, "hlo_over_floor_s": None}
    for name, script, argv, n in (("driver floor", FLOOR, [str(npz)], repeats),
                                  ("hlo", HLO, [str(npz), str(hlox)], repeats),
                                  ("torch", TORCH, [str(npz)], peer_repeats),
                                  ("jax", JAX, [str(npz)], peer_repeats)):
        try:
            first_result_s(script, argv, env)  # once unmeasured: files in the page cache
            ts = [first_result_s(script, argv, env) for _ in range(n)]
            rows[name] = {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts), "runs": ts}
        except Exception as e:
            rows[name] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        print(format_row(name, rows[name]), file=sys.stderr, flush=True)
        floor = rows.get("driver floor", {}).get("median_s")
        h = rows.get("hlo", {}).get("median_s")
        res["hlo_over_floor_s"] = (h - floor) if floor is not None and h is not None else None
        if json_path:
            Path(json_path).write_text(json.dumps({"bench": "coldstart", **res}, indent=1))
    return res


def format_row(name: str, r: dict) -> str:
    if "error" in r:
        return f"  {name:14} error: {r['error']}"
    return f"  {name:14} {r['median_s']:.3f} s (min {r['min_s']:.3f}, max {r['max_s']:.3f})"


def format_table(res: dict) -> str:
    lines = ["coldstart: a fresh process to its first result (transformer_layer f32; median of "
             f"{res['repeats']} fresh processes, torch and jax {res['peer_repeats']})"]
    lines += [format_row(n, r) for n, r in res["rows"].items()]
    if res.get("hlo_over_floor_s") is not None:
        lines.append(f"  hlo over the driver floor: {res['hlo_over_floor_s'] * 1e3:+.0f} ms (bar: +100 ms)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.coldstart")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-repeats", type=int, default=3, help="fresh processes for torch and jax (seconds each)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = run(args.repeats, args.peer_repeats, args.json)
    print(format_table(res))
    return 1 if any("error" in r for r in res["rows"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
