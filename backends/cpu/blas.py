"""Finding an optimized BLAS that ships as a pip dependency, for dot_general's fast path.

Looked for, in order: the ``scipy-openblas32`` / ``scipy-openblas64`` wheels (if installed),
then the OpenBLAS bundled inside numpy's own wheel (numpy is a dependency of hlo, so this is
always there on the platforms numpy ships wheels for). ``HLO_CPU_GEMM=generated`` turns the
BLAS path off and runs every product on the generated tiled GEMM (``gemm_tiled.py``; for
measurements, and the path on a numpy without a bundled BLAS).
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Blas:
    path: str
    sgemm: str
    dgemm: str
    int_bits: int  # width of BLAS integer arguments (32 or 64)
    set_threads_local: Optional[str]  # openblas_set_num_threads_local, if exported


def _candidates():
    for mod, bits in (("scipy_openblas32", 32), ("scipy_openblas64", 64)):
        try:
            m = __import__(mod)
            d = m.get_lib_dir()
            for p in sorted(glob.glob(os.path.join(d, "*openblas*"))):
                yield p
        except Exception:
            pass
    try:
        import numpy
        base = os.path.dirname(numpy.__file__)
        for pat in ("../numpy.libs/*openblas*", ".dylibs/*openblas*", "../numpy.libs/*.dll"):
            for p in sorted(glob.glob(os.path.join(base, pat))):
                yield os.path.normpath(p)
    except Exception:
        pass


@functools.lru_cache(maxsize=None)
def find_blas() -> Optional[Blas]:
    if os.environ.get("HLO_CPU_GEMM", "").lower() == "generated":
        return None
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for s, d, bits in (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", 64),
                           ("scipy_cblas_sgemm", "scipy_cblas_dgemm", 32),
                           ("cblas_sgemm64_", "cblas_dgemm64_", 64),
                           ("cblas_sgemm", "cblas_dgemm", 32)):
            if hasattr(lib, s) and hasattr(lib, d):
                stl = "openblas_set_num_threads_local" if hasattr(lib, "openblas_set_num_threads_local") else None
                return Blas(path, s, d, bits, stl)
    return None
