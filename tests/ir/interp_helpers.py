"""Helpers for the interpreter tests: build one-op modules, make test inputs, compare arrays
bit for bit (NaN-aware), and run jax on CPU without leaking configuration."""
from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np

from hlo.ir import Builder, Function, Module, Region, TensorType, element_type, scalar, tensor
from hlo.ir.interpreter import run

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
SINTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UINTS = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)]
INTS = SINTS + UINTS
ALL = [np.dtype(np.bool_)] + INTS + FLOATS


def ttype(a) -> TensorType:
    a = np.asarray(a)
    return tensor(a.shape, a.dtype)


def body(op_name, dtype, n_inputs=1, attrs=None, name="body") -> Region:
    """A scalar region ``(a0..an-1, b0..bn-1) -> op(a_i, b_i)`` (n_inputs=1: a binary op)."""
    et = element_type(dtype)
    r = Region([scalar(et)] * (2 * n_inputs), name=name)
    b = Builder(r)
    outs = [b.value(op_name, [r.args[i], r.args[n_inputs + i]], attrs=attrs) for i in range(n_inputs)]
    r.outputs = outs
    return r


def one_op_module(name, args, attrs=None, result_types=None, regions=(), n_results=None) -> Module:
    """A module whose @main applies one op to its arguments (typed like ``args``)."""
    m = Module("t")
    fn = Function("main", [ttype(a) for a in args])
    m.add(fn)
    op = Builder(fn.body).op(name, fn.args, attrs=attrs, result_types=result_types, regions=regions)
    fn.body.outputs = list(op.results)
    return m


def run_op(name, *args, attrs=None, result_types=None, regions=()):
    """Run one op in the interpreter; returns the single result or a list of results."""
    args = [np.asarray(a) for a in args]
    m = one_op_module(name, args, attrs, result_types, regions)
    outs = run(m, args)
    return outs[0] if len(outs) == 1 else outs


def same_bits(a, b) -> bool:
    """Arrays equal in shape, dtype and value; NaNs match NaNs (any payload); -0 != +0."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "c":
        return same_bits(a.real.copy(), b.real.copy()) and same_bits(a.imag.copy(), b.imag.copy())
    if a.dtype.kind == "f" or a.dtype == BF16 or (a.dtype.kind == "V" and not _is_ml_int(a.dtype)):
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(fa)
        if not np.array_equal(nan, np.isnan(fb)):
            return False
        return bool(np.all((fa == fb) & (np.signbit(fa) == np.signbit(fb)) | nan))
    return np.array_equal(a, b)


def assert_same(a, b, msg=""):
    if not same_bits(a, b):
        a, b = np.asarray(a), np.asarray(b)
        detail = ""
        if a.shape == b.shape and a.dtype == b.dtype:
            wide = np.complex128 if a.dtype.kind == "c" else np.float64
            fa, fb = a.astype(wide), b.astype(wide)
            bad = ~((fa == fb) & (np.signbit(fa) == np.signbit(fb)) | (np.isnan(fa) & np.isnan(fb)))
            idx = np.argwhere(bad)[:5]
            detail = "; first differences at " + ", ".join(
                f"{tuple(i)}: {a[tuple(i)]!r} vs {b[tuple(i)]!r}" for i in idx)
        raise AssertionError(f"{msg} got {a.dtype}{list(a.shape)}, expected "
                             f"{b.dtype}{list(b.shape)}{detail}")


def _is_ml_int(dt) -> bool:
    try:
        ml_dtypes.iinfo(dt)
    except (ValueError, TypeError):
        return False
    return True


def sample(rng, dtype, shape, specials=True, denormals=False):
    """Random values of ``dtype`` including each type's edge values."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "c":  # independent real and imaginary parts
        part = np.float32 if dtype == np.complex64 else np.float64
        re_ = sample(rng, part, shape, specials, denormals)
        im = sample(rng, part, shape, specials, denormals)
        return (re_ + 1j * im.astype(np.complex128)).astype(dtype)
    if dtype.kind == "V" and _is_ml_int(dtype):  # 2- and 4-bit integers
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        small = rng.integers(-9 if dtype.kind == "i" else 0, 10, size=n).astype(dtype)
        v = np.where(rng.random(n) < 0.5, small, v)
        if specials and n:
            edge = np.array([info.min, info.max, 0, 1] + ([-1] if dtype.kind == "i" else []),
                            dtype=np.int64 if dtype.kind == "i" else np.uint64).astype(dtype)
            k = min(len(edge), n)
            v[rng.choice(n, k, replace=False)] = edge[:k]
        return v.reshape(shape)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n))
    v = v.astype(dtype)
    if specials and n:
        edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5], dtype)
        k = min(len(edge), n)
        v[rng.choice(n, k, replace=False)] = edge[:k]
    if not denormals:
        tiny = ml_dtypes.finfo(np.float32 if dtype == BF16 else dtype).tiny
        f = v.astype(np.float64)
        v = np.where((f != 0) & (np.abs(f) < float(tiny)), np.zeros((), dtype), v).astype(dtype)
    return v.reshape(shape)


@contextlib.contextmanager
def jax_x64():
    """jax with 64-bit types enabled for the duration (restored afterwards)."""
    import jax
    with jax.enable_x64(True):
        yield


def region(arg_types, fn, name="body") -> Region:
    """A region built by ``fn(builder, *args) -> list of result values``."""
    r = Region([scalar(t) if not isinstance(t, TensorType) else t for t in arg_types], name=name)
    outs = fn(Builder(r), *r.args)
    r.outputs = list(outs)
    return r


def module_from(arg_types, fn, name="main") -> Module:
    """A module whose @main is built by ``fn(builder, *args) -> list of result values``."""
    m = Module("t")
    f = Function(name, list(arg_types))
    m.add(f)
    f.body.outputs = list(fn(Builder(f.body), *f.args))
    return m
