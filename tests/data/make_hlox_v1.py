"""Writes ``hlox_v1_small.hlox`` (+ ``.npz`` with its inputs and outputs): a tiny program saved in
executable format version 1, which tests/aot/test_aot_back_compat.py must keep loading.

Run once per format version, never again for the same version (the point is to keep the bytes an
older hlo wrote): ``python3 tests/data/make_hlox_v1.py``. The code is built for the baseline CPU
of the architecture (no optional features, e.g. plain x86-64) with the generated matrix product
instead of a BLAS, so that any machine of the same architecture and OS can load it.
"""
import os
import sys

os.environ["HLO_CPU_GEMM"] = "generated"   # no BLAS symbol whose name depends on numpy's build
os.environ["HLO_CACHE"] = "0"
os.environ["HLO_CPU_THREADS"] = "1"

import numpy as np

import hlo
import hlo.numpy as hnp
import hlo.runtime.cpu.target as target

BASELINE = {"x86_64": "x86-64", "aarch64": "generic", "arm64": "generic"}


def small(x, w, k):
    y = hnp.tanh(x) * 2.0 + 1.0
    z = y @ w
    return {"z": z, "rowsum": hnp.sum(y, axis=1), "kmax": hnp.max(k)}, hnp.mean(z)


def main(folder):
    h = target.host()
    arch = h.triple.split("-")[0]
    base = target.CpuTarget(h.triple, BASELINE.get(arch, "generic"), "")
    with target.standing_in(base):  # compile for the baseline CPU
        _save(folder)


def _save(folder):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    k = rng.integers(-50, 50, size=5).astype(np.int32)
    c = hlo.aot.compile(small, x, w, k, target="cpu")
    path = os.path.join(folder, "hlox_v1_small.hlox")
    c.save(path)
    out = c(x, w, k)
    np.savez(os.path.join(folder, "hlox_v1_small.npz"), x=x, w=w, k=k, z=out[0]["z"],
             rowsum=out[0]["rowsum"], kmax=out[0]["kmax"], mean=out[1])
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
