"""``make demo`` / ``python examples/demo.py``: compile and run a real program, show its IR at each
stage, the compiler's decisions, and its speed next to numpy (and jax.jit).

The program is a post-norm transformer encoder layer (8-head self-attention, d=512, FFN with
GELU), the largest of the seed workloads, at a small batch so the demo finishes in seconds on
every target.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import hlo
import hlo.numpy as hnp


def layer_norm(xp, x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / xp.sqrt(var + eps) * g + b


def gelu_tanh(xp, x):
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def encoder_layer(xp, x, p, heads=8):
    """Post-norm encoder layer written once against a numpy-like namespace ``xp``."""
    B, T, D = x.shape
    hd = D // heads
    q = (x @ p["wq"]).reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
    k = (x @ p["wk"]).reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
    v = (x @ p["wv"]).reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
    att = softmax(xp, (q @ k.transpose(0, 1, 3, 2)) * (1.0 / float(np.sqrt(hd))))
    o = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ p["wo"]
    h = layer_norm(xp, x + o, p["g1"], p["b1"])
    f = gelu_tanh(xp, h @ p["w1"] + p["c1"]) @ p["w2"] + p["c2"]
    return layer_norm(xp, h + f, p["g2"], p["b2"])


def make_inputs(batch=2, seq=64, d=512, ff=2048):
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = rng.standard_normal((batch, seq, d), dtype=f32)
    s = np.float32(1 / np.sqrt(d))
    p = {
        "wq": rng.standard_normal((d, d), dtype=f32) * s, "wk": rng.standard_normal((d, d), dtype=f32) * s,
        "wv": rng.standard_normal((d, d), dtype=f32) * s, "wo": rng.standard_normal((d, d), dtype=f32) * s,
        "g1": np.ones(d, f32), "b1": np.zeros(d, f32), "g2": np.ones(d, f32), "b2": np.zeros(d, f32),
        "w1": rng.standard_normal((d, ff), dtype=f32) * s, "c1": np.zeros(ff, f32),
        "w2": rng.standard_normal((ff, d), dtype=f32) / np.float32(np.sqrt(ff)), "c2": np.zeros(d, f32),
    }
    return x, p


def best_time(fn, *args, min_seconds=0.5, max_calls=200):
    fn(*args)
    times = []
    start = time.perf_counter()
    while len(times) < max_calls and (time.perf_counter() - start < min_seconds or len(times) < 3):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def banner(title):
    print("\n" + "=" * 78 + f"\n{title}\n" + "=" * 78)


def head(text, n):
    lines = text.splitlines()
    out = "\n".join(lines[:n])
    if len(lines) > n:
        out += f"\n  ... ({len(lines) - n} more lines)"
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=None, help="cpu, cuda or interpreter (default: hlo's default)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lines", type=int, default=40, help="lines of each IR listing to show")
    ap.add_argument("--dump-dir", default=None, help="keep the per-pass dumps here")
    args = ap.parse_args(argv)

    target = args.target or hlo.default_target()
    x, p = make_inputs(batch=args.batch)
    print(f"hlo {hlo.__version__}: transformer encoder layer, x f32{list(x.shape)}, target {target}")

    layer = hlo.jit(lambda x, p: encoder_layer(hnp, x, p), target=target)

    banner("1. Traced IR (every op carries the user's file:line)")
    t0 = time.perf_counter()
    lowered = layer.lower(x, p)
    t_trace = time.perf_counter() - t0
    print(head(lowered.as_text(), args.lines))

    banner("2. Optimized IR: after simplification, layout, fusion, scheduling, buffer assignment")
    dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="hlo-demo-dump-")
    t0 = time.perf_counter()
    try:
        compiled = lowered.compile(dump_dir=dump_dir)
    except NotImplementedError as e:
        print(f"target {target} is not available here ({e}); falling back to the interpreter")
        target = "interpreter"
        layer = hlo.jit(lambda x, p: encoder_layer(hnp, x, p), target=target)
        lowered = layer.lower(x, p)
        compiled = lowered.compile(dump_dir=dump_dir)
    t_compile = time.perf_counter() - t0
    print(head(compiled.as_text(), args.lines))
    print(f"\nper-pass dumps, fusion decisions and the buffer plan: {dump_dir}")
    names = sorted(os.listdir(dump_dir))
    passes = [n for n in names if n[:3].isdigit()]
    print(f"    {len(passes)} per-pass modules ({passes[0]} ... {passes[-1]})" if passes else "    (no per-pass modules)")
    for name in names:
        if name not in passes:
            print("   ", name)

    banner("3. What the compiler decided")
    cost = compiled.cost_analysis()
    mem = compiled.memory_analysis()
    print(f"kernels: {cost['kernels']}   flops: {cost['flops']:.3g}   bytes accessed: {cost['bytes accessed']:.3g}")
    print(f"arguments {mem.argument_size_in_bytes} B, outputs {mem.output_size_in_bytes} B, "
          f"temp arena {mem.temp_size_in_bytes} B, aliased {mem.alias_size_in_bytes} B")
    print(f"trace {t_trace * 1e3:.1f} ms, compile {t_compile * 1e3:.1f} ms")

    banner("4. Run and check against numpy (float64 reference)")
    out = np.asarray(compiled(x, p))
    ref = encoder_layer(np, x.astype(np.float64), {k: v.astype(np.float64) for k, v in p.items()})
    err = float(np.max(np.abs(out - ref)))
    print(f"max |hlo - numpy(f64)| = {err:.2e}  ->  {'OK' if err < 2e-3 else 'MISMATCH'}")
    if not err < 2e-3:
        print("the compiled result does not match the reference", file=sys.stderr)
        return 1

    banner("5. Speed (median per call)")
    t_hlo = best_time(compiled, x, p)
    t_np = best_time(lambda x, p: encoder_layer(np, x, p), x, p)
    rows = [(f"hlo ({target})", t_hlo), ("numpy", t_np)]
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda x, p: encoder_layer(jnp, x, p))
        rows.append(("jax.jit", best_time(lambda x, p: jf(x, p).block_until_ready(), x, p)))
    except ImportError:
        pass
    for name, t in rows:
        print(f"  {name:<20} {t * 1e3:9.3f} ms   {t / t_hlo:6.2f}x hlo's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
