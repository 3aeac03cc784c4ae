"""hlo.jit's fast path (a cache hit keyed by the arguments' type, shape, dtype and strides) against
the full path (flatten, abstractify, cache lookup), differentially: same results, same errors,
same cache counts and recompile logs. ``f._fast_limit = 0`` turns a function's fast path off;
``_no_full_path(f)`` proves that a call was served by the fast path. No timings here."""
import logging
import sys
import threading

import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import outcome, same

import hlo
import hlo.numpy as hnp
from hlo import errors
from hlo.tracing.abstract import c_strides

CacheInfo = hlo.jit.__globals__["CacheInfo"]  # (``import hlo.jit`` would shadow the function)
targets = sys.modules["hlo.staging.targets"]

rng = np.random.default_rng(0)
X = rng.standard_normal(8).astype(np.float32)
M = rng.standard_normal((4, 6)).astype(np.float32)


def pair(fn, target="cpu", **kw):
    """The same function twice: with the fast path, and with only the full path."""
    fast = hlo.jit(fn, target=target, **kw)
    full = hlo.jit(fn, target=target, **kw)
    full._fast_limit = 0
    return fast, full


class _FullPathUsed(AssertionError):
    pass


class _no_full_path:
    """Inside this block, a call of ``f`` that takes the full path fails the test."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        def refuse(args, kwargs):
            raise _FullPathUsed("the call took the full path")
        self.f._call = refuse

    def __exit__(self, *exc):
        del self.f._call


def run_both(fast, full, *args, expect_fast=True):
    """Call both twice (the first call may compile); the fast one's second call must be a fast
    hit when ``expect_fast``; all four outcomes must agree."""
    a1, b1 = outcome(fast, *args), outcome(full, *args)
    same(a1, b1)
    if expect_fast:
        with _no_full_path(fast):
            a2 = outcome(fast, *args)
    else:
        a2 = outcome(fast, *args)
    same(a2, b1)
    same(outcome(full, *args), b1)
    return a2


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

def test_dispatch_workload_takes_the_fast_path_and_counts_hits():
    fast, full = pair(lambda x: x + 1.0)
    r = run_both(fast, full, X)
    np.testing.assert_array_equal(r[1], X + np.float32(1))
    assert r[1].dtype == np.float32
    assert fast.cache_info() == CacheInfo(hits=1, misses=1, entries=1)
    assert full.cache_info() == CacheInfo(hits=1, misses=1, entries=1)
    out = fast(X)
    assert out is not fast(X)  # a fresh array each call
    X2 = X * 2
    np.testing.assert_array_equal(fast(X2), X2 + 1)  # the same entry, other data
    assert fast.cache_info() == CacheInfo(hits=4, misses=1, entries=1)


@pytest.mark.parametrize("target", ["cpu", "interpreter"])
def test_output_structures(target):
    fast, full = pair(lambda x, y: (x * y, {"s": x.sum(), "m": [y - 1.0]}), target=target)
    run_both(fast, full, X, X[::-1].copy())
    fast, full = pair(lambda x, y: (x + y, x - y), target=target)
    run_both(fast, full, M, M.T.copy().T)
    fast, full = pair(lambda x: x.T, target=target)
    run_both(fast, full, M)


def test_weak_scalars_and_numpy_scalars():
    fast, full = pair(lambda x, s: x * s)
    for s in (2.5, 3, True, np.float32(1.5), np.int32(2), np.float64(0.5)):
        run_both(fast, full, X, s)
    # int and float keep separate entries (a weak int and a weak float are different signatures)
    assert fast.cache_info().entries == 6
    fast, full = pair(lambda i, x: x + i)
    run_both(fast, full, 7, np.arange(4, dtype=np.int32))
    assert fast(7, np.arange(4, dtype=np.int32)).dtype == np.int32
    # a Python int out of int32's range: the fast entry for ints hands back to the full path
    same(outcome(fast, 2 ** 40, np.arange(4, dtype=np.int32)),
         outcome(full, 2 ** 40, np.arange(4, dtype=np.int32)))
    r = outcome(fast, 2 ** 40, np.arange(4, dtype=np.int32))
    assert r[1] is errors.ScalarOverflowError and "out of range for int32" in r[2]


def test_non_contiguous_and_strided_inputs():
    fast, full = pair(lambda a, b: a @ b)
    A = rng.standard_normal((6, 5)).astype(np.float32)
    for a in (A[::2, :].copy(), A[::2, :], np.asfortranarray(A[:3]), A[:3, ::-1][:, ::-1]):
        assert a.shape == (3, 5)
        b = rng.standard_normal((5, 2)).astype(np.float32)
        run_both(fast, full, a, b)
        np.testing.assert_allclose(fast(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert not A[::2].flags.c_contiguous
    assert c_strides((3, 5), np.float32) == (20, 4)


def test_donated_arguments():
    # a donated argument may be overwritten by the call, so every call gets a fresh copy
    fast, full = pair(lambda x, y: x * 2.0 + y, donate_argnums=(0,))
    y = X[::-1].copy()
    want = ("ok", X * np.float32(2) + y)
    same(outcome(fast, X.copy(), y), want)
    same(outcome(full, X.copy(), y), want)
    with _no_full_path(fast):
        same(outcome(fast, X.copy(), y), want)
    same(outcome(full, X.copy(), y), want)
    assert fast.cache_info() == full.cache_info() == CacheInfo(hits=1, misses=1, entries=1)


# --------------------------------------------------------------------------------------------
# What falls back to the full path, with the same answer
# --------------------------------------------------------------------------------------------

def test_static_arguments_and_keyword_arguments():
    fast, full = pair(lambda x, n: x * n, static_argnums=(1,))
    run_both(fast, full, X, 3, expect_fast=False)
    run_both(fast, full, X, 4, expect_fast=False)
    assert fast.cache_info() == full.cache_info()
    fast, full = pair(lambda x, n=2: x ** n, static_argnames=("n",))
    run_both(fast, full, X, expect_fast=True)
    for kw in ({"n": 3}, {"n": 2}):
        same(outcome(fast, X, **kw), outcome(full, X, **kw))
    fast, full = pair(lambda x, y: x - y)
    same(outcome(fast, X, y=X), outcome(full, X, y=X))
    same(outcome(fast, x=X, y=X), outcome(full, x=X, y=X))
    assert fast.cache_info() == full.cache_info()


class WithArray:
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


class Sub(np.ndarray):
    pass


def test_other_input_types():
    fast, full = pair(lambda x, y: x * y + 1.0)
    run_both(fast, full, X, X)  # makes the numpy entry first
    for y in (jnp.asarray(X), WithArray(X), X.view(Sub), list(X[:1]), [1.0] * 8):
        same(outcome(fast, X, y), outcome(full, X, y))
        with _no_full_path(fast):
            with pytest.raises(_FullPathUsed):
                fast(X, y)
    assert fast.cache_info() == full.cache_info()
    fast, full = pair(lambda t: t[0] * t[1]["k"])
    run_both(fast, full, (X, {"k": X}), expect_fast=False)


def test_hlo_outputs_fed_back_in():
    # outputs of 1 MiB and more come from hlo's recycled-memory pool (arrays over a _Block)
    fast, full = pair(lambda x: x * 0.5 + 1.0)
    big = rng.standard_normal(1 << 19).astype(np.float32)
    y = fast(big)
    assert type(y) is np.ndarray and y.flags.c_contiguous
    for _ in range(3):
        with _no_full_path(fast):
            z = fast(y)
        same(("ok", z), outcome(full, y))
        y = z
    np.testing.assert_allclose(y, full(full(full(full(big)))), rtol=0, atol=0)


def test_wrong_shapes_dtypes_and_structure_agree():
    fast, full = pair(lambda x, y: x + y)
    run_both(fast, full, X, X)
    cases = [
        (X, X[:4]),                                    # shapes that do not broadcast
        (X, X.astype(np.longdouble)),                  # a dtype hlo does not support
        (X, X.astype(">f4")),                          # non-native byte order
        (X, "text"),                                   # not an array
        (X,),                                          # too few arguments
        (X, X, X),                                     # too many
        (X, object()),
    ]
    for args in cases:
        a, b = outcome(fast, *args), outcome(full, *args)
        same(a, b)
        assert a[0] == "error", args
    assert fast.cache_info() == full.cache_info()


def test_compiled_call_fast_path_and_errors():
    f = hlo.jit(lambda x, y: (x * y, y), target="cpu")
    c = f.lower(M, M).compile()
    same(("ok", c(M, M)), ("ok", f(M, M)))
    same(("ok", c(np.asfortranarray(M), M)), ("ok", f(np.asfortranarray(M), M)))
    same(("ok", c(WithArray(M), M)), ("ok", f(M, M)))
    same(("ok", c(jnp.asarray(M), M)), ("ok", f(M, M)))
    r = outcome(c, M[:2], M)
    assert r[1] is errors.SignatureMismatchError and "x is f32[2,6] (compiled for f32[4,6])" in r[2]
    r = outcome(c, M, M, M)
    assert r[1] is errors.SignatureMismatchError and "structure differs" in r[2]
    r = outcome(c, M, y=M)
    assert r[1] is errors.SignatureMismatchError


def test_compiled_from_stablehlo_has_flat_signatures_on_both_paths():
    import jax
    text = jax.jit(lambda a, b: (a * b, a - b)).lower(M, M).as_text()
    c = hlo.load_stablehlo(text).compile("cpu")
    fast_result = c(M, M[::-1].copy())
    assert isinstance(fast_result, list) and len(fast_result) == 2
    np.testing.assert_array_equal(fast_result[0], M * M[::-1])
    slow_result = c(M, M[::-1])  # a strided view: the full path
    same(("ok", fast_result), ("ok", slow_result))
    r = outcome(c, M)
    assert r[1] is errors.SignatureMismatchError and "takes 2 arrays, called with 1" in r[2]


def test_executable_run_checks_and_normalizes():
    f = hlo.jit(lambda x: x + 1.0, target="cpu")
    exe = f.lower(M).compile()._artifact.executable
    np.testing.assert_array_equal(exe.run([M])[0], M + 1)
    np.testing.assert_array_equal(exe.run([np.asfortranarray(M)])[0], M + 1)
    np.testing.assert_array_equal(exe.run([M.view(Sub)])[0], M + 1)
    from hlo.runtime.signature import ArgumentError
    with pytest.raises(ArgumentError, match=r"argument 0: expected f32\[4,6\], got float64\[4,6\]"):
        exe.run([M.tolist()])  # a list of Python floats is float64
    with pytest.raises(ArgumentError, match="expected 1 argument"):
        exe.run([M, M])
    with pytest.raises(ArgumentError, match=r"expected f32\[4,6\], got float32\[6,4\]"):
        exe.run([M.T])


# --------------------------------------------------------------------------------------------
# Bookkeeping: recompile log, cache_info, clear_cache, tracing, threads
# --------------------------------------------------------------------------------------------

def test_recompile_log_and_cache_info_after_fast_hits(caplog):
    def logged(f):
        caplog.clear()
        with hlo.config.override(log_recompiles=True), \
                caplog.at_level(logging.WARNING, logger="hlo.recompiles"):
            f(X, 1.0)
            f(X, 1.0)
            f(X[:4], 1.0)
            f(X[:4], 1)
            f(X[:4], 1)
        return [r.getMessage() for r in caplog.records if r.name == "hlo.recompiles"]
    fast, full = pair(lambda x, s: x * s)
    mf, ms = logged(fast), logged(full)
    assert mf == ms and len(mf) == 2
    assert "argument x changed shape from f32[8] to f32[4]" in mf[0]
    assert "argument s changed dtype from f32[]{weak} to s32[]{weak}" in mf[1]
    assert fast.cache_info() == full.cache_info() == CacheInfo(hits=2, misses=3, entries=3)
    fast.clear_cache()
    assert fast.cache_info() == CacheInfo(0, 0, 0) and not fast._fast
    fast(X, 1.0)
    assert fast.cache_info() == CacheInfo(hits=0, misses=1, entries=1)


def test_config_target_is_part_of_the_fast_key():
    f = hlo.jit(lambda x: x * 3.0)  # no target: the default (hlo.config's, else the machine's)
    with hlo.config.override(target="interpreter"):
        f(X)
        f(X)
    f(X)
    f(X)
    assert f.cache_info() == CacheInfo(hits=2, misses=2, entries=2)
    assert {t for t, _ in f._fast} == {"interpreter", targets.default_target()}


def test_a_jit_function_inside_a_trace_is_inlined_even_for_numpy_arguments():
    inner = hlo.jit(lambda x: hnp.sin(x), target="cpu")
    inner(X)
    inner(X)  # the fast entry exists
    outer = hlo.jit(lambda y: inner(X) * y, target="cpu")
    text = outer.lower(X).as_text()
    assert "sine(" in text  # traced, not a constant computed by the executable
    np.testing.assert_allclose(outer(X), np.sin(X.astype(np.float64)) * X, rtol=1e-5, atol=1e-6)


def test_leaked_tracer_takes_the_full_path_error():
    leaked = []
    g = hlo.jit(lambda x: leaked.append(x) or x, target="interpreter")
    g(X)
    fast, full = pair(lambda x: x + 1.0)
    run_both(fast, full, X)
    a, b = outcome(fast, leaked[0]), outcome(full, leaked[0])
    same(a, b)
    assert a[1] is errors.TracerLeakError


def test_concurrent_calls_from_four_threads():
    fast = hlo.jit(lambda x, s: x * s + 1.0, target="cpu")
    inputs = [rng.standard_normal(n).astype(np.float32) for n in (8, 8, 16, 16)]
    for x in inputs[::2]:
        fast(x, 2.0)
    base = fast.cache_info()
    failures, barrier = [], threading.Barrier(4)

    def work(k):
        x = inputs[k]
        barrier.wait()
        for i in range(300):
            out = fast(x, float(i % 3))
            if not np.array_equal(out, x * np.float32(i % 3) + np.float32(1)):
                failures.append((k, i))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    info = fast.cache_info()
    assert info.misses == base.misses and info.hits == base.hits + 1200


# --------------------------------------------------------------------------------------------
# The default target
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime,gpu,expected", [(False, False, "cpu"), (False, True, "cpu"),
                                                   (True, False, "cpu"), (True, True, "cuda")])
def test_default_target_needs_the_cuda_runtime_and_a_gpu(monkeypatch, runtime, gpu, expected):
    monkeypatch.setattr(targets, "has_cuda_runtime", lambda: runtime)
    monkeypatch.setattr(targets, "has_usable_nvidia_gpu", lambda: gpu)
    with hlo.config.override(target=None):
        assert targets.default_target() == expected
    with hlo.config.override(target="interpreter"):
        assert targets.default_target() == "interpreter"


def test_the_cuda_runtime_needs_the_driver_binding(monkeypatch):
    targets.has_cuda_runtime.cache_clear()
    monkeypatch.setattr(targets, "_module_exists", lambda name: name != "cuda.bindings")
    try:
        assert not targets.has_cuda_runtime()  # a GPU machine without `hlo[cuda]` defaults to cpu
    finally:
        targets.has_cuda_runtime.cache_clear()
