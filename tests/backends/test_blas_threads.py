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


@pytest.mark.parametrize("cache", ["off", "on"])
def test_the_generated_gemm_does_not_open_the_blas(cache, tmp_path):
    """Compiling and running products on the generated GEMM (the default) leaves the optional
    BLAS unopened: opening OpenBLAS starts threads that spin for a while and took the second
    core from a program's first calls. With the compilation cache on too (the default), whose
    key names the GEMM (it had opened the BLAS to name it: ~27 ms of every process's first
    compile, and the spinning thread)."""
    import importlib.util
    import subprocess
    import sys
    import textwrap
    if importlib.util.find_spec("scipy_openblas32") is None:   # (importing it opens it)
        pytest.skip("the optional BLAS is not installed: nothing that could be opened")
    code = textwrap.dedent("""
        import os, numpy as np, hlo
        a = np.ones((64, 128), np.float32); w = np.ones((128, 96), np.float32)
        r = hlo.jit(lambda a, w: a @ w, target="cpu")(a, w)
        assert float(r[0, 0]) == 128.0
        maps = open("/proc/self/maps").read()
        print("opened" if "/scipy_openblas32/" in maps else "not opened")
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("HLO_CPU_GEMM", "HLO_CACHE")}
    if cache == "off":
        env["HLO_CACHE"] = "0"
    else:
        env["HLO_CACHE_DIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "not opened"
