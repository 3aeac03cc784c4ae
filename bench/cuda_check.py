"""The CUDA backend on a GPU machine, in one call: GPU-tier tests, every seed workload against
the float64 numpy reference, and the StableHLO conformance folders on ``--target cuda``.

    python bench/cuda_check.py [--conformance DIR ...] [--sample N] [--out DIR] [--skip PHASE ...]

Phases: ``tests`` (tests/cuda and the frontend tests with ``HLO_TEST_TARGETS=cuda``, not slow;
those marked ``whole_gpu`` alone after the rest),
``workloads`` (bench/workloads.py at its gpu sizes and dtypes: relative error of every output
and the median of a few timed calls on inputs put on the device first, each to
``block_until_ready``), ``conformance``
(each folder given; ``--sample N`` runs a fixed sample of N tests per folder). Prints a short
table last; logs and JSON go to ``--out`` (``$OUT`` on the device machine).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def sh(cmd, log: Path, timeout: float, env=None) -> tuple:
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(REPO),
                           env={**os.environ, **(env or {})})
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    log.write_text(out)
    return rc, out, time.monotonic() - t0


def pytest_summary(out: str) -> str:
    lines = [l for l in out.strip().splitlines() if " passed" in l or " failed" in l or " error" in l]
    return lines[-1].strip("= ") if lines else "(no summary)"


def phase_tests(out_dir: Path, rows: list, jobs: int) -> None:
    """Tests in parallel processes (``-n jobs``), those marked ``whole_gpu`` (they take nearly
    all free GPU memory for a while, which a test in another process would then lack) alone
    after them."""
    for name, log, args, env, marks, n in (
            ("tests/cuda", "tests_cuda", ["tests/cuda"], {}, "not slow and not whole_gpu", jobs),
            ("tests/cuda, whole GPU", "tests_cuda_whole_gpu", ["tests/cuda"], {}, "whole_gpu and not slow", 0),
            # jax is the frontend tests' reference: on the CPU (on the GPU, XLA uses TF32 products
            # and reciprocal divisions, which the tests' tolerances do not allow)
            ("frontend on cuda", "frontend", ["tests/frontend"],
             {"HLO_TEST_TARGETS": "cuda", "JAX_PLATFORMS": "cpu"}, "not slow", jobs)):
        rc, out, secs = sh([sys.executable, "-m", "pytest", "-q", "-m", marks, "-p", "no:cacheprovider",
                            "--maxfail=200", *(["-n", str(n)] if n else []), *args],
                           out_dir / f"pytest_{log}.log", 240, env)
        rows.append((name, pytest_summary(out), f"{secs:.0f}s"))
        fails = [l for l in out.splitlines() if l.startswith(("FAILED", "ERROR"))]
        for l in fails[:25]:
            print("   ", l[:200])


def phase_workloads(out_dir: Path, rows: list, mode: str) -> None:
    import numpy as np

    import hlo
    import hlo.numpy as hnp
    from bench.workloads import Ops, flatten, reference, select
    results = []
    for case in select(None, mode):
        w = case.workload
        try:
            inputs = case.inputs()

            def fn(*a, _body=w.fn):
                return _body(Ops(hnp, hlo.grad, hlo.vmap), *a)
            t0 = time.perf_counter()
            jf = hlo.jit(fn, target="cuda")
            got = flatten(jf(*inputs))
            for g in got:
                g.block_until_ready()
            first = time.perf_counter() - t0
            args = [hlo.device_put(a) for a in inputs]  # device inputs, as the bench times them
            times = []
            for _ in range(5):
                t = time.perf_counter()
                for o in flatten(jf(*args)):  # calls are asynchronous: wait for the results
                    o.block_until_ready()
                times.append(time.perf_counter() - t)
            ref = reference(case, inputs)
            errs = []
            for g, r in zip(got, ref):
                g = np.asarray(g).astype(np.float64)
                errs.append(float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)))
            err = max(errs)
            ok = err < {"f32": 1e-4, "f16": 2e-2, "bf16": 5e-2}.get(case.dtype, 1e-4) and np.isfinite(err)
            res = {"case": case.name, "rel_err": err, "ok": bool(ok), "first_s": first,
                   "median_ms": 1e3 * sorted(times)[len(times) // 2]}
        except Exception as e:  # report and go on with the next workload
            res = {"case": case.name, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        results.append(res)
        print("   ", json.dumps(res), flush=True)
        rows.append((f"workload {case.name}", ("ok" if res["ok"] else "FAIL")
                     + (f" err {res['rel_err']:.1e}" if "rel_err" in res else f" {res.get('error', '')[:60]}"),
                     f"{res['median_ms']:.2f}ms" if "median_ms" in res else ""))
    (out_dir / "workloads.json").write_text(json.dumps(results, indent=1))


def phase_conformance(out_dir: Path, rows: list, folders, sample: int, jobs: int) -> None:
    for folder in folders:
        name = Path(folder).name
        js = out_dir / f"conformance_{name}.json"
        cmd = [sys.executable, "-m", "hlo.conformance", folder, "--target", "cuda", "-q", "-j", str(jobs),
               "--json", str(js), "--timeout", "60"]
        if sample:
            cmd += ["--sample", str(sample)]
        rc, out, secs = sh(cmd, out_dir / f"conformance_{name}.log", 200)
        last = [l for l in out.splitlines() if l.startswith("conformance:")]
        rows.append((f"conformance {name}", last[-1][len("conformance: "):] if last else f"rc={rc}", f"{secs:.0f}s"))
        fails = [l for l in out.splitlines() if ": failed" in l]
        for l in fails[:15]:
            print("   ", l[:200])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--conformance", nargs="*", default=[])
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--mode", default="gpu", help="workload sizes: gpu or quick")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/cuda_check"))
    p.add_argument("--skip", nargs="*", default=[])
    a = p.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # jax (the tests' reference) shares the GPU
    from hlo.backends.cuda.device import launch_device
    print("compiling for:", launch_device(), flush=True)
    rows: list = []
    t0 = time.monotonic()
    if "tests" not in a.skip:
        phase_tests(out_dir, rows, a.jobs)
    if "workloads" not in a.skip:
        phase_workloads(out_dir, rows, a.mode)
    if "conformance" not in a.skip and a.conformance:
        phase_conformance(out_dir, rows, a.conformance, a.sample, a.jobs)
    print(f"\n{'what':40} {'result':55} time")
    for r in rows:
        print(f"{r[0]:40} {r[1]:55} {r[2]}")
    print(f"total {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
