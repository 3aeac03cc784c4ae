"""Shared helpers of the frontend tests: random inputs per dtype, and running the same function
through hlo.jit and jax.jit (with jax's x64 mode on when a 64-bit input is involved, since hlo
keeps 64-bit inputs in 64 bits) and comparing values, shapes and dtypes."""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

import hlo

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)]

RTOL = {np.dtype(np.float16): 4e-3, BF16: 3e-2, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def rand(rng, shape, dtype, low=None, high=None):
    """Random values of ``dtype``: normal floats (or uniform in [low, high)), small integers."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = (0 if dt.kind == "u" else -20) if low is None else low
        hi = 21 if high is None else high
        return rng.integers(lo, hi, size=shape).astype(dt)
    if low is not None:
        return rng.uniform(low, high, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def is64(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype != np.bool_ and (
        x.dtype.itemsize == 8 and x.dtype.kind != "c" or x.dtype == np.complex128)


_REFERENCES = {}


def _reference_key(fn, args, x64):
    """A key for a jax result that is the same for the same function code, closure values and
    argument values, so that tests parametrized over targets compile the reference once."""
    try:
        closure = tuple(repr(c.cell_contents) for c in (fn.__closure__ or ()))
        leaves, tree = jax.tree_util.tree_flatten(args)
        data = tuple((np.asarray(a).dtype.str, np.asarray(a).shape, np.asarray(a).tobytes())
                     if isinstance(a, np.ndarray) else (type(a).__name__, repr(a)) for a in leaves)
        return (fn.__code__, closure, repr(fn.__defaults__), str(tree), data, x64)
    except (AttributeError, TypeError, ValueError):
        return None


def jax_run(fn, args, x64=None, jit=True):
    """``fn(*args)`` through jax (jitted), with x64 on when any argument is 64-bit. Results are
    remembered per function and arguments."""
    if x64 is None:
        x64 = any(is64(a) for a in jax.tree_util.tree_leaves(args))
    key = _reference_key(fn, args, x64)
    if key is not None and key in _REFERENCES:
        return _REFERENCES[key]
    with jax.enable_x64(x64):
        f = jax.jit(fn) if jit else fn
        out = jax.tree_util.tree_map(np.asarray, f(*args))
    if key is not None:
        _REFERENCES[key] = out
    return out


def hlo_run(fn, args, target, **kw):
    """``fn(*args)`` through hlo.jit on ``target``, as numpy (cuda's DeviceArrays copied back)."""
    return hlo.device_get(hlo.jit(fn, target=target, **kw)(*args))


def tolerance(dt, rtol=None):
    if rtol is not None:
        return rtol
    return RTOL.get(np.dtype(dt), 0)


def assert_same(got, want, rtol=None, atol=None, check_dtype=True, what=""):
    """Pytrees of arrays: same structure, shapes, dtypes; values equal (ints, bools) or close
    (floats, NaNs equal)."""
    gl, gt = jax.tree_util.tree_flatten(got)
    wl, wt = jax.tree_util.tree_flatten(want)
    assert len(gl) == len(wl), f"{what}: {len(gl)} results, expected {len(wl)} ({gt} vs {wt})"
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(want)[0]]
    for g, w, p in zip(gl, wl, paths):
        g, w = np.asarray(g), np.asarray(w)
        where = f"{what}{p}"
        assert g.shape == w.shape, f"{where}: shape {g.shape}, expected {w.shape}"
        if check_dtype:
            assert g.dtype == w.dtype, f"{where}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "biu" and g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            r = tolerance(w.dtype, rtol)
            a = r if atol is None else atol
            wide = np.complex128 if "c" in (g.dtype.kind, w.dtype.kind) else np.float64
            np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=r, atol=a,
                                       equal_nan=True, err_msg=where)


def compare(hfn, jfn, args, target, rtol=None, atol=None, check_dtype=True, x64=None, **jit_kw):
    """Run ``hfn`` with hlo.jit on ``target`` and ``jfn`` with jax.jit; assert they agree."""
    got = hlo_run(hfn, args, target, **jit_kw)
    want = jax_run(jfn, args, x64)
    assert_same(got, want, rtol, atol, check_dtype)
    return got


# Differential outcomes of one call (the fast/native/Python paths of hlo.jit against each other)

def outcome(f, *args, **kwargs):
    """("ok", result) or ("error", type, message) of one call (always from this line)."""
    try:
        return ("ok", f(*args, **kwargs))
    except Exception as e:  # the error itself is what is compared
        return ("error", type(e), str(e))


def same(a, b):
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1:] == b[1:]
        return
    la, ta = hlo.tree_util.tree_flatten(a[1])
    lb, tb = hlo.tree_util.tree_flatten(b[1])
    assert ta == tb
    for u, v in zip(la, lb):
        assert type(u) is type(v) and u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def stable_seed(*parts) -> int:
    """A seed from ``parts`` that is the same in every process (``hash`` of a string is
    randomized per process: inputs, and so outcomes, changed from run to run)."""
    import zlib
    return zlib.crc32(repr(parts).encode())
