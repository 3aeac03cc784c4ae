"""A post-norm transformer encoder layer, for the ``hlo`` command line (see README.md).

    hlo compile examples/transformer.py:layer --arg f32[16,64,512] --arg f32[512,1536] \\
        --arg f32[512,512] --arg f32[512,2048] --arg f32[2048,512] --static heads=8 -o layer.hlox
    python examples/transformer.py inputs.npz       # writes x, wqkv, wo, w1, w2 (random)
    hlo run layer.hlox --input inputs.npz --output-dir out/
    python examples/transformer.py inputs.npz --check out/output_0.npy   # against numpy (float64)

``layer`` is written once against a numpy-like namespace: ``hlo.numpy`` when compiled, numpy for
the reference.
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

NAMES = ("x", "wqkv", "wo", "w1", "w2")


def encoder_layer(xp, x, wqkv, wo, w1, w2, heads):
    """x [B,S,D]; wqkv [D,3D]; wo [D,D]; w1 [D,F]; w2 [F,D]. Self-attention with ``heads``
    heads, residual + layer norm, tanh-GELU feed-forward, residual + layer norm."""
    B, S, D = x.shape
    hd = D // heads

    def norm(t):
        mu = xp.mean(t, axis=-1, keepdims=True)
        d = t - mu
        return d / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + 1e-5)

    def split(t):                                   # [B,S,D] -> [B,heads,S,hd]
        return xp.transpose(xp.reshape(t, (B, S, heads, hd)), (0, 2, 1, 3))

    qkv = x @ wqkv
    q, k, v = split(qkv[..., :D]), split(qkv[..., D:2 * D]), split(qkv[..., 2 * D:])
    s = (q @ xp.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(hd))
    e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    o = (e / xp.sum(e, axis=-1, keepdims=True)) @ v
    h = norm(x + xp.reshape(xp.transpose(o, (0, 2, 1, 3)), (B, S, D)) @ wo)
    f = h @ w1
    f = 0.5 * f * (1.0 + xp.tanh(0.7978845608028654 * (f + 0.044715 * f * f * f)))
    return norm(h + f @ w2)


def layer(x, wqkv, wo, w1, w2, heads=8):
    """The layer on hlo.numpy: what ``hlo compile examples/transformer.py:layer`` traces."""
    import hlo.numpy as hnp
    return encoder_layer(hnp, x, wqkv, wo, w1, w2, heads)


def make_inputs(batch=16, seq=64, d=512, ffn=2048, seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"x": (batch, seq, d), "wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, ffn), "w2": (ffn, d)}
    return {n: (rng.standard_normal(s) / (1.0 if n == "x" else math.sqrt(s[0]))).astype(np.float32)
            for n, s in shapes.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Write the example's inputs, or check an output.")
    ap.add_argument("inputs", metavar="INPUTS.npz", help="the arrays x, wqkv, wo, w1, w2")
    ap.add_argument("--check", metavar="OUT.npy", help="compare this output with numpy (float64)")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--shape", default="16,64,512,2048", help="batch,seq,d,ffn")
    a = ap.parse_args(argv)
    if a.check:
        with np.load(a.inputs) as z:
            ins = [z[n].astype(np.float64) for n in NAMES]
        ref = encoder_layer(np, *ins, heads=a.heads)
        got = np.load(a.check)
        err = float(np.max(np.abs(got - ref)))
        ok = got.shape == ref.shape and err < 1e-3
        print(f"{a.check}: {got.dtype}{list(got.shape)}, max abs error vs numpy float64 {err:.2e}: "
              f"{'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    b, s, d, f = (int(v) for v in a.shape.split(","))
    arrays = make_inputs(b, s, d, f)
    np.savez(a.inputs, **arrays)
    print(f"wrote {a.inputs}: " + ", ".join(f"{n} f32{list(v.shape)}" for n, v in arrays.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
