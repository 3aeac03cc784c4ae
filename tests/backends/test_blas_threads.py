"""An executable that calls the BLAS leaves the BLAS's thread count as it found it (its other
users keep their threads), also after concurrent calls from several Python threads."""
import ctypes
import threading

import numpy as np
import pytest

import hlo
from hlo.backends.cpu.blas import find_blas


def _get_threads():
    b = find_blas()
    if b is None or not b.get_threads:
        return None
    return getattr(ctypes.CDLL(b.path), b.get_threads)


def test_blas_thread_count_is_restored(monkeypatch):
    get = _get_threads()
    if get is None:
        pytest.skip("no OpenBLAS with a thread-count interface")
    monkeypatch.setenv("HLO_CPU_GEMM", "blas")
    monkeypatch.setenv("HLO_CACHE", "0")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    f = hlo.jit(lambda a, w: a @ w, target="cpu")
    before = get()
    want = a.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(f(a, w), want, rtol=1e-4, atol=1e-3)
    assert get() == before
    errors = []

    def worker():
        try:
            for _ in range(50):
                np.testing.assert_allclose(f(a, w), want, rtol=1e-4, atol=1e-3)
        except Exception as e:  # reported below: an assertion in a thread does not fail the test
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert get() == before
