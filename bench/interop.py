"""hlo fed the arrays users hold: each seed case called with hlo's own DeviceArrays, torch
tensors, jax arrays and cupy arrays, beside jax.jit and torch eager (a GPU machine only).

    python -m bench.interop [--workloads a,b] [--json FILE] [--label NAME] [--hlo-only]

Per-call time: loops of calls ended by one sync (hlo: the last result's
``block_until_ready``; jax: ``block_until_ready``; torch: ``torch.cuda.synchronize``), the
median of several loops, after warm-up; each loop lasts at least ~20 ms. The same compiled hlo
function serves every input kind (one executable; only the argument route differs), so
``extra_us_per_arg`` = (time with foreign arrays - time with hlo's own) / number of arguments
is the host cost of reading another library's arrays. Before timing, each foreign-input
result is compared with the own-input result (they must be equal: same executable, same
inputs). ``python -m bench --gpu`` runs this as its ``interop`` section."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.workloads import Ops, flatten, select

KINDS = ("hlo", "torch", "jax", "cupy")  # the arrays hlo is fed


def per_call(fn, sync, reps: int = 5, min_loop_s: float = 0.02, max_n: int = 2000):
    """``(wall, host)`` seconds per call: the median over ``reps`` loops of calls, each loop
    ended by one ``sync`` (wall), and the median time to queue the loop's calls before that
    sync (host: what the caller's thread spends per call while the GPU works behind it)."""
    out = fn()
    sync(out)
    t = time.perf_counter()
    out = fn()
    sync(out)
    one = max(time.perf_counter() - t, 1e-6)
    n = int(min(max_n, max(10, min_loop_s / one)))
    for _ in range(max(3, n // 10)):
        out = fn()
    sync(out)
    walls, hosts = [], []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            out = fn()
        h = time.perf_counter()
        sync(out)
        e = time.perf_counter()
        walls.append((e - t) / n)
        hosts.append((h - t) / n)
        del out
    return statistics.median(walls), statistics.median(hosts)


def _to_torch(a, torch):
    from bench.systems import to_torch
    return to_torch(a, "cuda")


def _to_cupy(a, cp):
    if a.dtype.name == "bfloat16":
        return None  # cupy has no bfloat16
    return cp.asarray(a)


def run_case(case, hlo_only: bool, libs: dict) -> dict:
    import hlo
    import hlo.numpy as hnp
    w = case.workload
    inputs = case.inputs()
    row = {"case": case.name, "workload": w.id, "dtype": case.dtype, "args": len(inputs), "us": {},
           "extra_us_per_arg": {}, "status": "ok", "note": ""}
    body = w.fn

    def fn(*a):
        return body(Ops(hnp, getattr(hlo, "grad", None), getattr(hlo, "vmap", None)), *a)
    fn.__name__ = w.id

    def hlo_sync(out):
        flatten(out)[-1].block_until_ready()

    feeds = {"hlo": [hlo.device_put(a) for a in inputs]}
    torch, jax, cp = libs.get("torch"), libs.get("jax"), libs.get("cupy")
    if torch is not None:
        feeds["torch"] = [_to_torch(a, torch) for a in inputs]
    if jax is not None:
        dev = jax.devices("gpu")[0]
        feeds["jax"] = [jax.device_put(a, dev) for a in inputs]
        jax.block_until_ready(feeds["jax"])
    if cp is not None:
        c = [_to_cupy(a, cp) for a in inputs]
        if all(x is not None for x in c):
            feeds["cupy"] = c
    if torch is not None:
        torch.cuda.synchronize()
    row["host_us"], row["extra_host_us_per_arg"] = {}, {}
    ref = None
    for kind in KINDS:
        args = feeds.get(kind)
        if args is None:
            continue
        # a function (an executable, its graphs) per kind: each kind's steady state, as a
        # program fed one kind of array sees it (one executable fed alternating addresses
        # would split its graphs: runtime/cuda/graph.py's CAPTURES_BEFORE_SPLIT)
        f = hlo.jit(fn, target="cuda")
        try:
            got = [np.asarray(o) for o in flatten(f(*args))]
            if ref is None:
                ref = got
            elif any(not np.array_equal(g, r, equal_nan=True) for g, r in zip(got, ref)):
                row["status"], row["note"] = "wrong", f"hlo fed {kind} arrays differs from hlo fed its own"
                continue
            wall, host = per_call(lambda: f(*args), hlo_sync)
            row["us"][f"hlo({kind})"], row["host_us"][f"hlo({kind})"] = wall * 1e6, host * 1e6
        except Exception as e:
            row["us"][f"hlo({kind})"] = None
            row["note"] += f"hlo({kind}): {type(e).__name__}: {str(e).splitlines()[0][:200]} "
    for key, extra in (("us", "extra_us_per_arg"), ("host_us", "extra_host_us_per_arg")):
        own = row[key].get("hlo(hlo)")
        for kind in KINDS[1:]:
            t = row[key].get(f"hlo({kind})")
            if own is not None and t is not None:
                row[extra][kind] = (t - own) / len(inputs)
    if hlo_only:
        return row
    if jax is not None:
        import jax.numpy as jnp
        jf = jax.jit(lambda *a: body(Ops(jnp, jax.grad, jax.vmap), *a))
        row["us"]["jax.jit"] = per_call(lambda: jf(*feeds["jax"]), jax.block_until_ready)[0] * 1e6
    if torch is not None:
        from bench import torch_impl
        impl = torch_impl.EAGER[w.id]

        def teager():
            with torch.no_grad():
                return impl(*feeds["torch"])
        row["us"]["torch"] = per_call(teager, lambda out: torch.cuda.synchronize())[0] * 1e6
    return row


def _libs() -> dict:
    libs = {}
    try:
        import torch
        if torch.cuda.is_available():
            libs["torch"] = torch
    except ImportError:
        pass
    try:
        import jax
        jax.config.update("jax_default_matmul_precision", "highest")
        jax.devices("gpu")
        libs["jax"] = jax
    except (ImportError, RuntimeError):
        pass
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        libs["cupy"] = cupy
    except Exception:
        pass
    return libs


def run(workloads=None, hlo_only: bool = False, budget_s: float = None) -> list:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    libs = _libs()
    rows, t0 = [], time.perf_counter()
    for case in select(workloads, "gpu"):
        if case.dtype != case.workload.dtypes["gpu"][0] and case.workload.id != "transformer_layer":
            continue  # per-call host cost does not depend on the dtype; bf16 once (torch's bf16)
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            rows.append({"case": case.name, "status": "skipped", "note": "budget spent"})
            continue
        try:
            r = run_case(case, hlo_only, libs)
        except Exception as e:
            r = {"case": case.name, "status": "error", "note": f"{type(e).__name__}: {str(e)[:300]}"}
        rows.append(r)
        print(format_row(r), file=sys.stderr, flush=True)
    return rows


def format_row(r: dict) -> str:
    if r.get("status") not in ("ok",):
        return f"{r['case']:24} {r.get('status')}: {r.get('note', '')}"
    cells = " ".join(f"{k} {v:8.1f}" if v is not None else f"{k} error" for k, v in r["us"].items())
    extra = " ".join(f"{k} {v:+.2f}" for k, v in r["extra_us_per_arg"].items())
    return f"{r['case']:24} args {r['args']:2}  us/call: {cells}  | extra us/arg: {extra}  {r['note']}".rstrip()


def format_table(rows: list) -> str:
    cols = ["hlo(hlo)", "hlo(torch)", "hlo(jax)", "hlo(cupy)", "jax.jit", "torch"]
    lines = ["interop: us per call (loops ended by one sync, median); extra us per argument over hlo's own "
             "arrays, per call (wall) and in the calling thread (host: queueing the calls)",
             f"{'case':24} {'args':>4} " + " ".join(f"{c:>10}" for c in cols)
             + "   wall extra/arg torch   jax  cupy   host extra/arg torch   jax  cupy"]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"{r['case']:24} {r.get('status')}: {r.get('note', '')}")
            continue
        us = r["us"]
        cells = " ".join(f"{us[c]:10.1f}" if us.get(c) is not None else f"{'-':>10}" for c in cols)
        extra = ""
        for key in ("extra_us_per_arg", "extra_host_us_per_arg"):
            ex = r.get(key, {})
            extra += " " * 18 + " ".join(f"{ex[k]:+6.2f}" if k in ex else f"{'-':>6}" for k in ("torch", "jax", "cupy"))
        lines.append(f"{r['case']:24} {r['args']:4} {cells}{extra}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.interop")
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--label", default="", help="recorded in the JSON (e.g. the commit measured)")
    ap.add_argument("--hlo-only", action="store_true", help="leave out jax.jit and torch eager")
    args = ap.parse_args(argv)
    ids = [w for w in args.workloads.split(",") if w] if args.workloads else None
    rows = run(ids, args.hlo_only)
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"bench": "interop", "label": args.label, "rows": rows}, indent=1))
    return 1 if any(r.get("status") in ("wrong", "error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
