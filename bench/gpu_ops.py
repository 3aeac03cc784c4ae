"""Single ops and small patterns on the GPU beside jax.jit: ``python -m bench.gpu_ops [--json FILE]``.

The seed workloads exercise products, row kernels and elementwise chains; this times what they
do not: running reductions, sorts, transposes, gathers, reductions over a major or middle axis,
concatenation, a full reduction. Each case runs on hlo (target cuda) and jax.jit on the same
inputs, is checked to agree (relative error against jax's result; exit status 1 where a case
is off by more than 1e-3), and is timed with ``bench.timing.measure``, hlo's time over jax's
printed last. A case much slower than jax.jit is a bug to look at: the first run (2026-11-26,
H200) found a quadratic cumsum (2^22: 20 s), reductions on one multiprocessor (max |x| over
2048 x 2048: 719 us; column sums of [2^20, 8]: 18 ms), fixed since, and a one-block sort.
Timings live here only; tests never assert them."""
from __future__ import annotations

import argparse
import os
import sys


def cases(xp, lax):
    """(name, function, input shapes; "idx" is 8192 row indices into 65536)."""
    return [
        ("cumsum 2^22", lambda x: xp.cumsum(x), [(1 << 22,)]),
        ("cumsum rows 4096x4096", lambda x: xp.cumsum(x, axis=1), [(4096, 4096)]),
        ("sort 2^18", lambda x: xp.sort(x), [(1 << 18,)]),
        ("sort rows 4096x1024", lambda x: xp.sort(x, axis=1), [(4096, 1024)]),
        ("transpose 8192x8192 (+1)", lambda x: x.T + 1.0, [(8192, 8192)]),
        ("take 8192 rows of 65536x512", lambda t, i: xp.take(t, i, axis=0), [(65536, 512), "idx"]),
        ("sum axis 1 of 64x4096x64", lambda x: xp.sum(x, axis=1), [(64, 4096, 64)]),
        ("sum axis 0 of 2^20x8", lambda x: xp.sum(x, axis=0), [(1 << 20, 8)]),
        ("max |x| of 2048x2048", lambda x: xp.max(xp.abs(x)), [(2048, 2048)]),
        ("softmax axis 0 4096x4096",
         lambda x: xp.exp(x) / xp.sum(xp.exp(x), axis=0, keepdims=True), [(4096, 4096)]),
        ("var axis 0 8192x1024", lambda x: xp.var(x, axis=0), [(8192, 1024)]),
        ("logsumexp 2^22", lambda x: xp.log(xp.sum(xp.exp(x - xp.max(x)))) + xp.max(x), [(1 << 22,)]),
        ("batched matmul 512x64x64", lambda a, b: a @ b, [(512, 64, 64), (512, 64, 64)]),
        ("concatenate 3 x 4096x4096", lambda a: xp.concatenate([a, a * 2, a * 3], axis=1), [(4096, 4096)]),
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_ops", description=__doc__.split("\n")[0])
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument("--only", default=None, help="comma-separated substrings of case names")
    a = p.parse_args(argv)
    os.environ.setdefault("HLO_CACHE", "0")
    import jax
    import jax.numpy as jnp
    import numpy as np

    import hlo
    import hlo.numpy as hnp
    from bench.report import finish_side_by_side
    from bench.timing import measure
    jax.config.update("jax_default_matmul_precision", "highest")

    rng = np.random.default_rng(0)
    ours, theirs = cases(hnp, hlo.lax), cases(jnp, jax.lax)
    rows, wrong = [], []
    for (name, fn, shapes), (_, jfn, _) in zip(ours, theirs):
        if a.only and not any(s in name for s in a.only.split(",")):
            continue
        args = [rng.integers(0, 65536, 8192).astype(np.int32) if s == "idx"
                else rng.standard_normal(s).astype(np.float32) for s in shapes]
        f = hlo.jit(fn, target="cuda")
        dargs = [hlo.device_put(x) for x in args]
        jf = jax.jit(jfn)
        jargs = [jax.device_put(x) for x in args]
        ref = np.asarray(jf(*jargs), np.float64)
        got = np.asarray(f(*dargs), np.float64)
        err = float(np.max(np.abs(got - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
        th = measure(lambda: f(*dargs), lambda o: o.block_until_ready(), min_time=0.3)
        tj = measure(lambda: jf(*jargs), lambda o: o.block_until_ready(), min_time=0.3)
        row = {"case": name, "hlo_us": th.median_s * 1e6, "jax_us": tj.median_s * 1e6,
               "hlo_over_jax": th.median_s / tj.median_s, "rel_err": err}
        rows.append(row)
        if not err <= 1e-3:
            wrong.append(name)
        print(f"{name:<30} hlo {row['hlo_us']:10.1f} us   jax.jit {row['jax_us']:9.1f} us   "
              f"x{row['hlo_over_jax']:7.2f}   rel err {err:.1e}", flush=True)
    return finish_side_by_side(a.json, {"device": jax.devices()[0].device_kind}, rows, wrong)


if __name__ == "__main__":
    sys.exit(main())
