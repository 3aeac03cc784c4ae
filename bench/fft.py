"""A 2^20-point complex64 FFT: ``python -m bench.fft [--n 1048576] [--json FILE]``.

hlo.numpy.fft.fft compiled for the CPU (``hlo.ir.decompositions.fft``: 20 radix-2 stages, each
one kernel over the array, then a bit-reversal transpose) beside numpy's pocketfft and jax.jit's
(XLA's DUCC FFT), all on the same complex64 input, with ``bench.timing.measure``. Also checks
the three agree (relative error against numpy in complex128). Timings live here only; tests
never assert them."""
from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fft", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 20, help="transform length (default 2^20)")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    os.environ.setdefault("HLO_CACHE", "0")
    import numpy as np

    import hlo
    import hlo.numpy as hnp
    from bench.timing import measure

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(a.n) + 1j * rng.standard_normal(a.n)).astype(np.complex64)
    ref = np.fft.fft(x.astype(np.complex128))
    scale = np.abs(ref).max()
    rows = []

    def row(name, call, sync):
        out = np.asarray(call())
        err = float(np.abs(out - ref).max() / scale)
        t = measure(call, sync)
        rows.append({"system": name, "median_ms": t.median_s * 1e3, "min_ms": t.min_s * 1e3,
                     "rel_err": err, "note": t.note})
        print(f"{name:<12} median {t.median_s * 1e3:8.2f} ms  min {t.min_s * 1e3:8.2f} ms  "
              f"rel. error {err:.1e}  {t.note}", flush=True)

    f = hlo.jit(hnp.fft.fft).lower(x).compile(target="cpu")
    row("hlo cpu", lambda: f(x), lambda o: None)
    row("numpy", lambda: np.fft.fft(x), lambda o: None)
    try:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(jnp.fft.fft)
        xj = jax.device_put(x)
        row("jax.jit", lambda: jf(xj), lambda o: o.block_until_ready())
    except ImportError:
        print("jax.jit      (jax not installed)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"n": a.n, "dtype": "complex64", "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
