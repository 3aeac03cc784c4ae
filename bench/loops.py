"""Loops beside jax.jit: ``python -m bench.loops [--gpu] [--json FILE]``.

Programs whose work is a ``fori_loop`` / ``scan``, where what a compiler does with a loop's body
(fusion, split products, the state written in place, on the GPU no wait for the device between
steps of a counted loop) decides the time:

- ``ew``: five tanh-and-scale steps a loop step, on 256x256 for 32 steps (``--gpu``: 2048x2048)
  and on 16x64 for 64 steps (per-step overhead);
- ``rnn``: tanh(h @ w + xs[i] @ u + 0.5), h 32x512, 16 steps (``fori_loop``), and the same cell
  as a ``scan`` over xs;
- ``mv``: tanh(h @ w), h 8x1024, w 1024x1024, 16 steps (a few-row product: split-K on the CPU).

hlo (target cpu, or cuda with ``--gpu``) and jax.jit run the same math on the same inputs
(checked to agree), timed with ``bench.timing.measure``. Timings live here only; tests never
assert them."""
from __future__ import annotations

import argparse
import os
import sys


def programs(xp, lax, gpu: bool):
    """{name: (function, input shapes)} written against ``xp`` (hlo.numpy or jax.numpy) and
    ``lax`` (hlo.lax or jax.lax)."""
    def ew(i, h):
        for _ in range(5):
            h = xp.tanh(h * 1.01 + 0.1) * 0.9 - h * 0.05
        return h

    big = 2048 if gpu else 256
    rnn_shapes = [(32, 512), (512, 512), (128, 512), (16, 32, 128)]
    return {
        f"ew {big}x{big}, 32 steps": (lambda h: lax.fori_loop(0, 32, ew, h), [(big, big)]),
        "ew 16x64, 64 steps": (lambda h: lax.fori_loop(0, 64, ew, h), [(16, 64)]),
        "rnn 32x512, 16 steps": (lambda h, w, u, xs: lax.fori_loop(
            0, 16, lambda i, h: xp.tanh(h @ w + xs[i] @ u + 0.5), h), rnn_shapes),
        "rnn as a scan": (lambda h, w, u, xs: lax.scan(
            lambda h, x: (xp.tanh(h @ w + x @ u + 0.5), None), h, xs)[0], rnn_shapes),
        "mv 8x1024x1024, 16 steps": (lambda h, w: lax.fori_loop(0, 16, lambda i, h: xp.tanh(h @ w), h),
                                     [(8, 1024), (1024, 1024)]),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loops", description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", help="hlo on target cuda, jax on its GPU")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    os.environ.setdefault("HLO_CACHE", "0")
    import numpy as np

    import hlo
    import hlo.numpy as hnp
    from bench.report import finish_side_by_side
    from bench.timing import measure

    rng = np.random.default_rng(0)
    target = "cuda" if a.gpu else "cpu"
    rows, wrong = [], []
    try:
        import jax
        import jax.numpy as jnp
        # f32 products in f32 on the GPU too (no TF32), as hlo's and the bench's (bench/run.py)
        jax.config.update("jax_default_matmul_precision", "highest")
        theirs = programs(jnp, jax.lax, a.gpu)
    except ImportError:
        jax = theirs = None
    for name, (fn, shapes) in programs(hnp, hlo.lax, a.gpu).items():
        args = [(rng.standard_normal(s) / (np.sqrt(s[0]) if len(s) == 2 and s[0] >= 128 else 1)).astype(np.float32)
                for s in shapes]
        f = hlo.jit(fn, target=target)
        hargs = [hlo.device_put(x) for x in args] if a.gpu else args
        sync = (lambda o: o.block_until_ready()) if a.gpu else (lambda o: None)
        ours = np.asarray(f(*hargs))
        t = measure(lambda: f(*hargs), sync)
        row = {"program": name, "target": target, "hlo_ms": t.median_s * 1e3}
        if theirs is not None:
            jf = jax.jit(theirs[name][0])
            jargs = [jax.device_put(x) for x in args]
            ref = np.asarray(jf(*jargs))
            row["max_abs_diff"] = float(np.abs(ours - ref).max())
            if not row["max_abs_diff"] <= 1e-3 * max(1.0, float(np.abs(ref).max())):
                wrong.append(name)
            tj = measure(lambda: jf(*jargs), lambda o: o.block_until_ready())
            row["jax_ms"] = tj.median_s * 1e3
            row["hlo_over_jax"] = row["hlo_ms"] / row["jax_ms"]
        rows.append(row)
        print(f"{name:<26} hlo {row['hlo_ms']:9.3f} ms"
              + (f"   jax.jit {row['jax_ms']:9.3f} ms   x{row['hlo_over_jax']:.2f}   max |diff| "
                 f"{row['max_abs_diff']:.1e}" if "jax_ms" in row else "   (jax not installed)"), flush=True)
    return finish_side_by_side(a.json, {"target": target}, rows, wrong)


if __name__ == "__main__":
    sys.exit(main())
