"""Every matrix product of the CPU seed workloads, alone: hlo's generated GEMM next to numpy.

    python -m bench.gemm_shapes [--only transformer_layer,...] [--rounds 5] [--env both|set|unset]

Each workload (bench/workloads.py, cpu sizes) is traced and optimized by hlo; every dot_general
of the optimized program is compiled alone (its operands as parameters, in the layouts and
transposition the program has, no prologue or epilogue) on 1 and 2 threads, and numpy.matmul
runs the same product over the same operand views (numpy's bundled OpenBLAS, held to 1 and 2
threads). Timing is side by side in one process, in short bursts (the best call of each burst,
the best burst of ``--rounds``; a pause after each multi-threaded burst; one thread timed by its
CPU time, which leaves out the time other processes took the core), so a machine shared with other work still gives comparable
figures. OpenBLAS's speed here depends on ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``: with
``--env both`` (the default) the numpy column is measured twice, in a child process with the
environment as it is (``MACHINE_OPENBLAS_ENV`` where it sets neither) and in one with both
variables removed (only for that child).
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

from bench.numpy_unset import OPENBLAS_VARS, unset_env

SEED_GEMM_WORKLOADS = ("transformer_layer", "simple_mlp", "linear_relu", "mlp_train_step",
                       "ln_linear_gelu_res", "per_example_grads")
# What the project's AVX-512 machines set for every process (older OpenBLAS builds fail on their
# processor without them): the "set" column uses these where the environment has neither.
MACHINE_OPENBLAS_ENV = dict(zip(OPENBLAS_VARS, ("Haswell", "512")))


def products(ids):
    """[(workload, dot op)] of every distinct product (shape, dims and operand layouts)."""
    import hlo
    import hlo.numpy as hnp
    from bench import workloads as W
    from hlo.passes.pipeline import optimize
    seen, out = set(), []
    for wid in ids:
        case = W.select([wid], "cpu")[0]
        inputs = case.inputs()
        ops = W.Ops(hnp, hlo.grad, hlo.vmap)
        f = hlo.jit(lambda *a, _c=case: _c.workload.fn(ops, *a), target="cpu")
        opt = optimize(f.lower(*inputs).ir, target="cpu")
        for top in opt.module.main.body.ops:
            for d in top.walk():
                if d.name != "dot_general" or not d.operands[0].dtype.is_float:
                    continue
                key = (tuple(str(o.type) for o in d.operands), tuple(sorted(d.attrs.items())))
                if key not in seen:
                    seen.add(key)
                    out.append((wid, d))
    return out


def dot_module(d):
    from hlo.ir.clone import clone_op
    from hlo.ir.core import Function, Module
    fn = Function("main", [v.type for v in d.operands])
    new = clone_op(d, dict(zip(d.operands, fn.args)))
    fn.body.append(new)
    fn.body.outputs = list(new.results)
    m = Module("gemm")
    m.add(fn)
    return m


def numpy_views(d, a, b):
    """a, b as [B, M, K] and [B, K, N] views (transposes, no copies where numpy can avoid them)."""
    at = d.attrs
    lb, rb = list(at.get("lhs_batching_dimensions", ())), list(at.get("rhs_batching_dimensions", ()))
    lc, rc = list(at.get("lhs_contracting_dimensions", ())), list(at.get("rhs_contracting_dimensions", ()))
    lf = [i for i in range(a.ndim) if i not in lb + lc]
    rf = [i for i in range(b.ndim) if i not in rb + rc]
    p = lambda s, ds: int(np.prod([s[i] for i in ds])) if ds else 1
    A = np.transpose(a, lb + lf + lc).reshape(p(a.shape, lb), p(a.shape, lf), p(a.shape, lc))
    B = np.transpose(b, rb + rc + rf).reshape(p(b.shape, rb), p(b.shape, rc), p(b.shape, rf))
    return A, B


def _numpy_threads():
    """A setter of numpy's OpenBLAS thread count."""
    base = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(base, "../numpy.libs/*openblas*"))):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads"):
            if hasattr(lib, name):
                f = getattr(lib, name)
                f.argtypes, f.restype = [ctypes.c_int], None
                return f
    return lambda n: None


# Idle threads of OpenBLAS and of hlo's pool spin for a while after a call; a pause after each
# multi-threaded burst keeps them from slowing the next one.
SPIN_SECONDS = 0.2


def _burst(fn, clock, seconds=0.02, max_calls=200):
    best, end, n = float("inf"), time.perf_counter() + seconds, 0
    while n < 3 or (time.perf_counter() < end and n < max_calls):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
        n += 1
    return best


def measure(ids, rounds, threads=(1, 2), with_hlo=True):
    from hlo.backends.cpu import compile as cpu_compile
    from hlo.backends.cpu.profile_records import gemm_shape
    from hlo.passes.pipeline import as_written
    set_threads = _numpy_threads()
    rng = np.random.default_rng(0)
    rows = []
    for wid, d in products(ids):
        Bn, M, K, N = gemm_shape(d)
        flops = 2.0 * Bn * M * K * N
        args = [rng.standard_normal(v.shape).astype(v.dtype.np_dtype) for v in d.operands]
        A, B = numpy_views(d, *args)
        C = np.empty((A.shape[0], A.shape[1], B.shape[2]), A.dtype)
        runs = {}
        runs["np1"] = None
        if with_hlo:
            m = dot_module(d)
            for t in threads:
                exe = cpu_compile(as_written(m), threads=t)
                out = exe.run(args)[0]
                ref = np.matmul(A.astype(np.float64), B.astype(np.float64))
                err = np.max(np.abs(np.asarray(out, np.float64).reshape(ref.shape) - ref)) / (np.max(np.abs(ref)) + 1e-30)
                assert err < 1e-4, (wid, Bn, M, K, N, err)
                runs[f"hlo{t}"] = lambda e=exe: e.run(args)
        for t in threads:
            runs[f"np{t}"] = lambda: np.matmul(A, B, out=C)
        best = {k: float("inf") for k in runs}
        for _ in range(rounds):
            for k, fn in runs.items():
                set_threads(int(k[2:]) if k.startswith("np") else 1)
                # one thread runs on the calling thread: its CPU time leaves out the time the
                # machine's other work took the core
                clock = time.thread_time if k.endswith("1") else time.perf_counter
                best[k] = min(best[k], _burst(fn, clock))
                if not k.endswith("1"):
                    time.sleep(SPIN_SECONDS)
        set_threads(max(threads))
        trans = "".join(("A^T" if M > 1 and A.strides[1] < A.strides[2] else "") +
                        (" B^T" if N > 1 and B.strides[2] > B.strides[1] else ""))
        rows.append({"workload": wid, "shape": f"{Bn}x{M}x{K}x{N}", "trans": trans.strip(),
                     "gflop": {k: flops / v / 1e9 for k, v in best.items()}})
    return rows


def _child(env_mode, args):
    env = unset_env() if env_mode == "unset" else dict(os.environ)
    if env_mode != "unset" and not any(v in env for v in OPENBLAS_VARS):
        env.update(MACHINE_OPENBLAS_ENV)
    cmd = [sys.executable, "-m", "bench.gemm_shapes", "--json", "--rounds", str(args.rounds),
           "--only", args.only] + (["--numpy-only"] if env_mode == "unset" else [])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(SEED_GEMM_WORKLOADS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--env", choices=("both", "set", "unset"), default="both")
    ap.add_argument("--json", action="store_true", help="(child) one JSON line of this process's rows")
    ap.add_argument("--numpy-only", action="store_true")
    args = ap.parse_args(argv)
    ids = [i for i in args.only.split(",") if i]
    if args.json:
        print(json.dumps(measure(ids, args.rounds, with_hlo=not args.numpy_only)))
        return 0
    modes = ("set", "unset") if args.env == "both" else (args.env,)
    res = {m: _child(m, args) for m in modes}
    base = res[modes[0]] if "set" not in res else res["set"]
    set_env = os.environ if any(v in os.environ for v in OPENBLAS_VARS) else MACHINE_OPENBLAS_ENV
    env = ", ".join(f"{v}={set_env.get(v, '-')}" for v in OPENBLAS_VARS)
    print(f"GFLOP/s (best burst); np: numpy.matmul, env as set ({env}) / unset")
    print(f"{'workload':20s} {'BxMxKxN':18s} {'':7s} {'hlo 1t':>7s} {'np 1t':>13s} {'hlo 2t':>7s} {'np 2t':>13s}")
    for i, r in enumerate(base):
        g = r["gflop"]
        npv = lambda t: "/".join(f"{res[m][i]['gflop'][f'np{t}']:.0f}" for m in modes)
        hl = lambda t: f"{g[f'hlo{t}']:7.1f}" if f"hlo{t}" in g else " " * 7
        print(f"{r['workload']:20s} {r['shape']:18s} {r['trans']:7s} {hl(1)} {npv(1):>13s} {hl(2)} {npv(2):>13s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
