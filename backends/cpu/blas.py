"""The optional BLAS behind ``HLO_CPU_GEMM=blas``: OpenBLAS from the ``scipy-openblas32`` /
``scipy-openblas64`` wheels (``pip install 'hlo[blas]'``).

Every float product runs on the generated GEMM (``gemm_tiled.py``) unless ``HLO_CPU_GEMM=blas``
asks for this BLAS (to compare the two). numpy's own bundled OpenBLAS (``numpy.libs``) is not
used: it is no dependency that hlo declares, only a private part of numpy's wheel.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
from dataclasses import dataclass
from typing import Optional

# The optional dependency that provides the BLAS (the ``blas`` extra of hlo's pyproject).
BLAS_PACKAGE = "scipy-openblas32"


@dataclass(frozen=True)
class Blas:
    path: str
    sgemm: str
    dgemm: str
    int_bits: int  # width of BLAS integer arguments (32 or 64)
    set_threads: Optional[str]  # OpenBLAS's thread-count setter and getter, where exported
    get_threads: Optional[str]


def _candidates():
    for mod in ("scipy_openblas32", "scipy_openblas64"):
        try:
            m = __import__(mod)
            d = m.get_lib_dir()
        except Exception:
            continue
        for p in sorted(glob.glob(os.path.join(d, "*openblas*"))):
            yield p


def gemm_mode() -> str:
    """``HLO_CPU_GEMM``: "auto" (unset; the generated GEMM), "generated" or "blas"."""
    mode = os.environ.get("HLO_CPU_GEMM", "").strip().lower() or "auto"
    if mode not in ("auto", "generated", "blas"):
        raise ValueError(f"HLO_CPU_GEMM must be 'auto', 'generated' or 'blas', got {mode!r}")
    return mode


def find_blas() -> Optional[Blas]:
    """The installed BLAS, or None (also under ``HLO_CPU_GEMM=generated``, which turns it off
    for the process's compilations while it is set)."""
    if gemm_mode() == "generated":
        return None
    return _search()


@functools.lru_cache(maxsize=None)
def _search() -> Optional[Blas]:
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
                found = lambda names: next((n for n in names if hasattr(lib, n)), None)
                return Blas(path, s, d, bits, found(_SET_THREADS), found(_GET_THREADS))
    return None


_SET_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                "openblas_set_num_threads")
_GET_THREADS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                "openblas_get_num_threads")
