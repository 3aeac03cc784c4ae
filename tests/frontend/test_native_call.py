"""The CPU executable's native entry (``hlo_call_py``, ``Executable.native_call``) that
``hlo.jit``, ``Compiled`` and loaded ``.hlox`` files call first, differentially: the same
results as numpy and as the Python path, the same errors (every call it refuses goes to the
Python path), no leaked references, correct under threads, and off where the interpreter's
layout is not the one it reads. No timings here."""
import contextlib
import gc
import sys
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hlo
import hlo.numpy as hnp
from hlo.runtime.cpu import abi, pycall

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "aot"))
from aot_util import run_python
from frontend_util import outcome, same

rng = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _cpu_target():
    """The native entry is the CPU executable's: pin the target (a GPU machine defaults to cuda)."""
    with hlo.config.override(target="cpu"):
        yield


def native_and_python(fn, **kw):
    """The same function with its native entry (made by two calls), and with the Python path
    only (``_fast_limit = 0``: no fast entry, so no native entry either)."""
    nat = hlo.jit(fn, **kw)
    py = hlo.jit(fn, **kw)
    py._fast_limit = 0
    return nat, py


class _refuse_python:
    """Inside this block a call of ``f`` that reaches the Python path fails the test."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        def refuse(*a, **k):
            raise AssertionError("the call took the Python path")
        self.saved = self.f._call, self.f._fast
        self.f._call = refuse
        self.f._fast = _Refusing()

    def __exit__(self, *exc):
        self.f._call, self.f._fast = self.saved


class _Refusing(dict):
    def get(self, *a):
        raise AssertionError("the call took the Python fast path")


def warmed(f, *args):
    f(*args)
    f(*args)
    assert f._native is not None
    return f


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

HALF = [np.float16, ml_dtypes.bfloat16]  # (numpy rounds these differently: checked against the Python path)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.int8, np.uint16, np.bool_, np.complex64] + HALF


@settings(max_examples=16, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES))
def test_native_matches_python_path_and_numpy(shape, dtype):
    def fn(x, y):
        return x * y + x if dtype is not np.bool_ else x ^ y
    nat, py = native_and_python(fn)
    x = np.asarray(rng.standard_normal(shape) * 10).astype(dtype)
    y = np.asarray(rng.standard_normal(shape) * 10).astype(dtype)
    nat(x, y)
    nat(x, y)
    # (an empty array's strides are 0: not the fast path's C strides, so no native entry)
    assert (nat._native is not None) == (x.size > 0)
    with _refuse_python(nat) if x.size else contextlib.nullcontext():
        got = nat(x, y)
    same(("ok", got), outcome(py, x, y))
    expect = np.asarray(fn(x, y))  # numpy
    assert got.dtype == expect.dtype and got.shape == expect.shape
    if dtype not in HALF:
        np.testing.assert_array_equal(got, expect)


def test_hits_count_and_each_call_returns_a_fresh_array():
    f = warmed(hlo.jit(lambda x: x + 1), np.zeros(8, np.float32))
    assert f.cache_info() == (1, 1, 1)
    x = np.arange(8, dtype=np.float32)
    with _refuse_python(f):
        outs = [f(x) for _ in range(5)]
    assert len({id(o) for o in outs}) == 5 and all(o.flags.owndata for o in outs)
    np.testing.assert_array_equal(outs[-1], x + 1)
    assert f.cache_info() == (6, 1, 1)


def test_several_outputs_and_pytrees():
    x, y = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    for fn in (lambda a, b: (a + b, a - b),
               lambda a, b: {"s": a.sum(), "p": [a * b, (b,)]},
               lambda a, b: [a @ b.T],
               lambda a, b: (a,)):
        nat, py = native_and_python(fn)
        warmed(nat, x, y)
        with _refuse_python(nat):
            same(outcome(nat, x, y), outcome(py, x, y))
    c = hlo.jit(lambda a, b: (a * b, a.max())).lower(x, y).compile()
    same(("ok", c(x, y)), ("ok", c(x, y)))
    assert c._native is not None
    got = c(x, y)
    assert type(got) is tuple and len(got) == 2
    np.testing.assert_array_equal(got[0], x * y)
    np.testing.assert_array_equal(got[1], x.max())


def test_program_with_an_arena_from_threads():
    def fn(a, b):  # a reduction over a product: scratch memory between kernels
        t = hnp.exp(a @ b)
        return t / t.sum(axis=1, keepdims=True), (t * 2).max()
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    f = warmed(hlo.jit(fn), a, b)
    assert f._native.__self__[abi.SELF_CTX][abi.CTX_ARENA] != 0
    expect = [hlo.jit(fn)(a + k, b) for k in range(4)]

    def worker(k):
        for _ in range(200):
            got = f(a + k, b)
            np.testing.assert_array_equal(got[0], expect[k][0])
            np.testing.assert_array_equal(got[1], expect[k][1])
    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(worker, k) for k in range(4)]:
            done.result()  # raises a worker's failure


def test_busy_arena_falls_back():
    a = rng.standard_normal((16, 16)).astype(np.float32)
    fn = lambda x: hnp.exp(x @ x).sum(axis=0) * x
    c = hlo.jit(fn).lower(a).compile()
    exe = c._artifact.executable
    calls = []
    nat = exe.native_call(lambda *args: calls.append(args) or "fell back", "single")
    ctx = nat.__self__[abi.SELF_CTX]
    assert ctx[abi.CTX_ARENA] != 0
    np.testing.assert_allclose(nat(a), exe.run([a])[0], rtol=1e-6)
    ctx[abi.CTX_ARENA_BUSY] = 1  # as while another thread's call runs
    assert nat(a) == "fell back" and calls[0][0] is a
    ctx[abi.CTX_ARENA_BUSY] = 0
    assert isinstance(nat(a), np.ndarray) and pycall.hits(nat) == 2


# --------------------------------------------------------------------------------------------
# Every other call takes the Python path, with its errors
# --------------------------------------------------------------------------------------------

class Sub(np.ndarray):
    pass


def test_mismatches_fall_back_with_the_same_outcome():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    nat, py = native_and_python(lambda a, b: a * b + 1)
    warmed(nat, x, x)
    big = np.zeros((6, 8), np.float32)
    unaligned = np.zeros(12 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)
    assert not unaligned.flags.aligned
    cases = [
        (x,), (x, x, x), (x, x.astype(np.float64)), (x, x[:2]), (x, x.reshape(4, 3)),
        (x, 2.0), (x, 3), (x, True), (x, np.float32(2)), (x, x.tolist()), (x, "a"), (x, None),
        (x, big[::2, ::2]), (x, x.T.copy().T), (x, np.asfortranarray(x)), (x, x.astype(">f4")),
        (x, x.view(Sub)), (x, np.ma.masked_array(x)), (x, unaligned), (x, x.reshape(1, 3, 4)),
        (x, x.astype(np.float32).reshape(12)), (x, np.zeros((3, 4), np.int32)),
    ]
    for args in cases:
        same(outcome(nat, *args), outcome(py, *args))
    assert nat._native is not None


def test_wrong_argument_error_names_the_users_line():
    f = warmed(hlo.jit(lambda a: a + 1), np.zeros(3, np.float32))
    with pytest.raises(TypeError) as e:
        f(np.zeros(3, np.float32), np.zeros(3, np.float32))
    g = hlo.jit(lambda a: a + 1)
    g._fast_limit = 0
    with pytest.raises(TypeError) as e2:
        g(np.zeros(3, np.float32), np.zeros(3, np.float32))
    assert str(e.value) == str(e2.value)


def test_keyword_and_static_arguments_take_the_python_path():
    f = warmed(hlo.jit(lambda a, b: a - b), np.ones(3), np.ones(3))
    np.testing.assert_array_equal(f(np.ones(3), b=np.full(3, 2.0)), np.full(3, -1.0))
    g = hlo.jit(lambda a, n: a * n, static_argnums=1)
    for _ in range(3):
        np.testing.assert_array_equal(g(np.ones(2), 3), np.full(2, 3.0))
    assert g._native is None


def test_other_signatures_and_config_changes():
    f = warmed(hlo.jit(lambda a: a * 2), np.ones(4, np.float32))
    served = f._native
    np.testing.assert_array_equal(f(np.ones(5, np.float64)), np.full(5, 2.0))  # another signature
    assert f._native is served
    before = f.cache_info().hits
    hlo.config.update("log_recompiles", hlo.config.read("log_recompiles"))  # any update: a new epoch
    np.testing.assert_array_equal(f(np.ones(4, np.float32)), np.full(4, 2, np.float32))
    assert f._native is not served  # made again by the Python path
    f(np.ones(4, np.float32))
    assert f.cache_info().hits == before + 2


def test_matmul_precision_change_reaches_the_python_path():
    f = hlo.jit(lambda a, b: a @ b)
    a = np.ones((4, 4), np.float32)
    warmed(f, a, a)
    served, generation = f._native, f._fast_generation
    old = hlo.config.read("matmul_precision")
    try:
        hlo.config.update("matmul_precision", "highest" if old != "highest" else "default")
        np.testing.assert_array_equal(f(a, a), a @ a)
        # the Python path saw the new generation (it drops the fast entries: on cuda the key
        # names the precision), and the native entry was made again
        assert f._fast_generation == hlo.config.generation != generation
        assert f._native is not served
    finally:
        hlo.config.update("matmul_precision", old)


def test_jit_inside_a_trace_is_inlined_not_run():
    c = np.arange(3, dtype=np.float32)
    inner = warmed(hlo.jit(lambda a: hnp.multiply(a, 3)), c)
    hits = inner.cache_info().hits
    seen = []

    def body(y):
        r = inner(c)  # a numpy argument while tracing outer: inlined, so a tracer
        seen.append(type(r))
        return r + y
    outer = hlo.jit(body)
    outer.lower(np.ones(3, np.float32))
    assert seen == [hlo.tracing.tracer.Tracer]
    assert inner.cache_info().hits == hits
    np.testing.assert_array_equal(outer(np.ones(3, np.float32)), c * 3 + 1)


def test_programs_that_keep_the_python_path(monkeypatch):
    from hlo.staging.stages import Compiled
    asked = []
    native_call = Compiled.native_call
    monkeypatch.setattr(Compiled, "native_call", lambda self, fb: asked.append(1) or native_call(self, fb))
    x = np.ones(4, np.float32)
    f = hlo.jit(lambda a: hlo.debug.print("a {}", a) or a + 1)  # a host call
    for _ in range(5):
        f(x)
    assert f._native is None
    assert len(asked) == 1  # refused once, not asked again on every fast hit


def test_interpreter_check_failing_turns_it_off(monkeypatch):
    monkeypatch.setattr(pycall, "_api", {})
    f = hlo.jit(lambda a: a - 1)
    x = np.arange(5, dtype=np.int32)
    f(x)
    np.testing.assert_array_equal(f(x), x - 1)
    assert f._native is None and f.cache_info().hits == 1
    monkeypatch.setenv("HLO_NATIVE_CALL", "0")
    monkeypatch.setattr(pycall, "_api", None)
    assert not pycall.available()


def test_the_probe_accepts_this_interpreter():
    assert pycall._probe()  # CPython 3 with numpy, 64-bit: what CI runs


# --------------------------------------------------------------------------------------------
# Outputs from the recycled-output pool (``output_pool``): made by the native entry too
# --------------------------------------------------------------------------------------------

def _is_pooled(o):
    from hlo.runtime import output_pool
    return isinstance(o.base, output_pool._Block)


POOLED_CASES = {
    # two medium outputs (256 KiB each): pooled by ``output_pool.call_threshold``
    "add_relu": ((lambda a, b: (a + b, hnp.maximum(a + b, 0))),
                 lambda a, b: (a + b, np.maximum(a + b, 0)), [(128, 512), (128, 512)], [True, True]),
    # one 2 MiB output
    "single": ((lambda a: a + 1), lambda a: a + 1, [(1024, 512)], [True]),
    # a pytree (``finish``): a 2 MiB output beside a scalar that is not pooled
    "finish": ((lambda a: {"big": a * 2, "s": [a.sum()]}),
               lambda a: {"big": a * 2, "s": [a.sum()]}, [(1024, 512)], [True, False]),
}


@pytest.mark.parametrize("case", sorted(POOLED_CASES))
def test_pooled_outputs_come_from_the_native_entry(case):
    fn, ref, shapes, pooled = POOLED_CASES[case]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    nat, py = native_and_python(fn)
    warmed(nat, *args)
    hits = pycall.hits(nat._native)
    with _refuse_python(nat):
        got = nat(*args)
    assert pycall.hits(nat._native) == hits + 1
    same(("ok", got), outcome(py, *args))
    leaves = hlo.tree_util.tree_leaves(got)
    expect = hlo.tree_util.tree_leaves(ref(*[a.astype(np.float64) for a in args]))
    for g, e in zip(leaves, expect):
        assert g.dtype == np.float32 and g.shape == np.shape(e)
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-3)  # (f32 sums of 512K values)
    assert [_is_pooled(o) for o in leaves] == pooled
    # dropped, their blocks go back to the pool and the next call takes them again
    addrs = {o.ctypes.data for o, p in zip(leaves, pooled) if p}
    del got, leaves, g
    with _refuse_python(nat):
        again = nat(*args)
    assert {o.ctypes.data for o, p in zip(hlo.tree_util.tree_leaves(again), pooled) if p} == addrs


def test_pooled_native_calls_fault_no_pages():
    """Two 256 KiB outputs a call, in a fresh process (where glibc's heap top is the outputs'):
    from the pool, the native entry faults no pages in steady state; made by numpy instead
    (the allocators left out), freed together they passed glibc's trim threshold and every call
    faulted ~96 pages in again."""
    code = """
import json, resource, sys, numpy as np, hlo, hlo.numpy as hnp
from hlo.runtime import output_pool
from hlo.runtime.cpu import executable, pycall
if sys.argv[1] == "numpy":
    make = executable.Executable.native_call
    def native_call(self, fallback, finish):
        self._pooled = [None] * self._nout
        return make(self, fallback, finish)
    executable.Executable.native_call = native_call
f = hlo.jit(lambda a, b: (a + b, hnp.maximum(a + b, 0)), target="cpu")
x, y = np.ones((128, 512), np.float32), np.ones((128, 512), np.float32)
for _ in range(50):
    f(x, y)
hits, cached = pycall.hits(f._native), output_pool.cached_bytes()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(2000):
    f(x, y)
print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
                  "native": pycall.hits(f._native) - hits, "same_cache": output_pool.cached_bytes() == cached}))
"""
    pooled = run_python(code, "pool")
    plain = run_python(code, "numpy")
    assert pooled["native"] == plain["native"] == 2000
    assert pooled["same_cache"]
    # (a few from the interpreter at most; numpy's outputs: see plain)
    assert pooled["faults"] < 100, (pooled, plain)


def _arena_program():
    """Scratch memory between kernels (an arena) and two pooled 256 KiB outputs."""
    def fn(a, b):
        t = hnp.exp(a @ b)
        return t / t.sum(axis=1, keepdims=True), t * 2
    a = rng.standard_normal((128, 16)).astype(np.float32) * 0.1
    b = rng.standard_normal((16, 512)).astype(np.float32)
    return fn, a, b


def test_pool_allocator_error_raises_and_leaks_nothing(monkeypatch):
    from hlo.runtime import output_pool
    fn, a, b = _arena_program()
    f = warmed(hlo.jit(fn), a, b)
    ctx = f._native.__self__[abi.SELF_CTX]
    assert ctx[abi.CTX_ARENA] != 0 and all(p != 0 for p in ctx[-2:])  # both outputs pooled
    expect = f(a, b)
    f(a, b)  # the pool holds blocks for both outputs now
    gc.collect()
    d = np.dtype(np.float32)
    refs = (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(d))
    cached = output_pool.cached_bytes()
    take, taken = output_pool._POOL.take, []

    def second_fails(nbytes):  # the first output is made, the second fails
        if taken:
            raise MemoryError("no memory for the second output")
        taken.append(nbytes)
        return take(nbytes)
    monkeypatch.setattr(output_pool._POOL, "take", second_fails)
    hits = pycall.hits(f._native)
    with _refuse_python(f):
        with pytest.raises(MemoryError, match="second output"):
            f(a, b)
    assert taken and pycall.hits(f._native) == hits
    monkeypatch.undo()
    gc.collect()
    assert ctx[abi.CTX_ARENA_BUSY] == 0
    assert output_pool.cached_bytes() == cached  # the first output went back to the pool
    assert (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(d)) == refs
    with _refuse_python(f):  # the next call runs natively
        got = f(a, b)
    assert pycall.hits(f._native) == hits + 1
    np.testing.assert_array_equal(got[0], expect[0])
    np.testing.assert_array_equal(got[1], expect[1])


def test_pool_allocator_returning_no_array_falls_back():
    fn, a, b = _arena_program()
    exe = hlo.jit(fn).lower(a, b).compile()._artifact.executable
    assert all(t is not None for t in exe._pooled)
    real = exe._pooled[1]
    exe._pooled[1] = lambda: "not an array"
    calls = []
    nat = exe.native_call(lambda *args: calls.append(args) or "fell back", "tuple")
    exe._pooled[1] = real
    refs = sys.getrefcount(a)
    assert nat(a, b) == "fell back" and calls[0][0] is a and pycall.hits(nat) == 0
    calls.clear()   # the fallback's arguments go
    assert sys.getrefcount(a) == refs
    assert nat.__self__[abi.SELF_CTX][abi.CTX_ARENA_BUSY] == 0


def test_pooled_outputs_from_threads():
    """Concurrent native calls with pooled outputs: each result right, and an output kept
    while the next calls run keeps its values (the pool never hands out live memory)."""
    fn, a, b = _arena_program()
    f = warmed(hlo.jit(fn), a, b)
    assert _is_pooled(f(a, b)[0])
    expect = [tuple(np.asarray(o) for o in hlo.jit(fn)(a + 0.1 * k, b)) for k in range(4)]
    hits = pycall.hits(f._native)

    def worker(k):
        x = a + np.float32(0.1 * k)
        kept = None
        for _ in range(150):
            got = f(x, b)
            np.testing.assert_array_equal(got[0], expect[k][0])
            np.testing.assert_array_equal(got[1], expect[k][1])
            if kept is not None:
                np.testing.assert_array_equal(kept[1], expect[k][1])
            kept = got
    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(worker, k) for k in range(4)]:
            done.result()  # raises a worker's failure
    assert pycall.hits(f._native) > hits  # (calls finding the arena busy took the Python path)


# --------------------------------------------------------------------------------------------
# References and memory
# --------------------------------------------------------------------------------------------

def test_no_leaked_references_or_memory():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    f = warmed(hlo.jit(lambda a: (a + 1, a * 2)), x)
    g = warmed(hlo.jit(lambda a: {"k": a.sum()}), x)
    d = np.dtype(np.float64)
    out = f(x)
    gc.collect()  # (earlier tests' garbage holds references to the dtype too)
    refs = (sys.getrefcount(x), sys.getrefcount(d), sys.getrefcount(out[0]))
    for _ in range(10_000):
        f(x)
        g(x)
    served = f._native
    for _ in range(1000):  # fallbacks too (as many as native calls: the entry stays)
        try:
            f(x, x)
        except TypeError:
            pass
        f(x.astype(np.float32))
        f(x)
    assert f._native is served
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(d), sys.getrefcount(out[0])) == refs
    tracemalloc.start()
    try:
        for _ in range(2000):
            f(x)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            f(x)
            g(x)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown


def test_entry_makes_no_reference_cycle():
    import weakref
    gc.disable()  # freed by reference counting alone
    try:
        f = warmed(hlo.jit(lambda a: a + 1), np.ones(2))
        c = f.lower(np.ones(2)).compile()
        c(np.ones(2))
        assert c._native is not None
        refs = weakref.ref(f), weakref.ref(c)
        del f, c
        assert refs[0]() is None and refs[1]() is None
    finally:
        gc.enable()


# --------------------------------------------------------------------------------------------
# Saved executables
# --------------------------------------------------------------------------------------------

def test_saved_executable_uses_the_native_entry_in_a_fresh_process(tmp_path):
    f = hlo.jit(lambda a, b: (a * b, a + b))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f.lower(x, x).compile().save(tmp_path / "m.hlox")
    code = f"""
import json, numpy as np, hlo
from hlo.runtime.cpu import pycall
e = hlo.load({str(tmp_path / 'm.hlox')!r})
x = np.arange(6, dtype=np.float32).reshape(2, 3)
a = e(x, x)
nat = e._native
b = e(x, x)
c = e(x, np.asfortranarray(x))  # the Python path
try:
    e(x)
    err = None
except Exception as ex:
    err = type(ex).__name__
print(json.dumps({{"native": nat is not None, "hits": pycall.hits(nat) if nat else -1,
                  "ok": all(np.array_equal(r[0], x * x) and np.array_equal(r[1], x + x) for r in (a, b, c)),
                  "tuple": type(b).__name__, "err": err}}))
"""
    r = run_python(code)
    assert r == {"native": True, "hits": 1, "ok": True, "tuple": "tuple", "err": "InputMismatchError"}


def test_lru_bound_sees_native_hits():
    old = hlo.config.read("jit_cache_size")
    hlo.config.update("jit_cache_size", 2)
    try:
        f = hlo.jit(lambda a: a + 1)
        A, B, C = np.ones(2), np.ones(3), np.ones(4)
        warmed(f, A)
        f(B)  # compiled after A
        f(A)  # a native hit: A is now the most recently used
        f(C)  # evicts the least recently used, B
        info = f.cache_info()
        assert info.entries == 2 and info.misses == 3
        f(A)
        assert f.cache_info().misses == 3
        f(B)
        assert f.cache_info().misses == 4
    finally:
        hlo.config.update("jit_cache_size", old)


def test_the_gil_is_released_around_a_long_program():
    """A program with a loop runs without the GIL (another thread keeps running meanwhile);
    ``entry.is_tiny`` decides which programs keep it."""
    import threading
    import time
    f = hlo.jit(lambda x, n: hlo.lax.fori_loop(0, n, lambda i, v: v * 0.5 + 1.0, x))
    x = np.ones(8, np.float32)
    n0 = np.asarray(100_000, np.int32)
    warmed(f, x, n0)
    t = time.perf_counter()
    f(x, n0)
    per_iter = (time.perf_counter() - t) / 100_000
    n = np.asarray(min(2 ** 31 - 1, int(0.4 / max(per_iter, 1e-10))), np.int32)  # ~0.4 s
    done = threading.Event()
    native_hits = pycall.hits(f._native)

    def long_call():
        f(x, n)
        done.set()
    th = threading.Thread(target=long_call)
    gaps, last = [], time.perf_counter()
    th.start()
    start = last
    while not done.is_set():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    th.join()
    took = last - start
    assert pycall.hits(f._native) == native_hits + 1
    assert took > 0.1, took  # long enough to tell
    assert max(gaps) < took * 0.5, (max(gaps), took)  # this thread ran meanwhile


def test_is_tiny():
    from hlo.backends.cpu.entry import TINY_BYTES, is_tiny
    from hlo.runtime.steps import BufRef, KernelCall, While
    k = KernelCall("k", [], [], 8, False)
    assert is_tiny([k], 1024) and not is_tiny([k], TINY_BYTES + 1)
    assert not is_tiny([KernelCall("k", [], [], 8, True)], 1024)
    assert not is_tiny([While([k], BufRef("arena", 0), [k])], 1024)


def test_native_entry_moves_to_the_busier_signature():
    f = hlo.jit(lambda a: a * 3)
    A, B = np.ones(2, np.float32), np.ones(5, np.float32)
    warmed(f, A)
    first = f._native
    for _ in range(100):  # B only: after 64 Python-path hits the entry serves B
        np.testing.assert_array_equal(f(B), B * 3)
    assert f._native is not first
    with _refuse_python(f):
        f(B)
    for _ in range(200):  # alternating: it stays where it is
        f(A)
        f(B)
    with _refuse_python(f):
        f(B)
    np.testing.assert_array_equal(f(A), A * 3)
    assert f.cache_info() == (1 + 99 + 1 + 400 + 1 + 1, 2, 2)  # every call but the 2 misses


def test_no_arguments_and_empty_arrays():
    f = warmed(hlo.jit(lambda: hnp.ones(3)))
    with _refuse_python(f):
        np.testing.assert_array_equal(f(), np.ones(3))
    with pytest.raises(TypeError, match="takes 0 positional arguments but 1 was given"):
        f(1)
    z = np.zeros((0, 3), np.float32)
    c = hlo.jit(lambda a: a.sum(axis=0) + 1).lower(z).compile()
    c(z)
    assert c._native is not None  # (C-contiguous by its flags; nothing to read)
    got = c(z)
    np.testing.assert_array_equal(got, np.ones(3, np.float32))
    assert got.dtype == np.float32
