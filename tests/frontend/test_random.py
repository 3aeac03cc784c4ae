"""hlo.random and hlo.nn.dropout against jax.random (default threefry2x32, partitionable), on
every target: keys, split, fold_in, bits, uniform and randint are bit-identical; normal (and
uniform with bounds other than [0, 1), where XLA contracts ``u * span + lo`` into an FMA) agree
to within an ulp or two. Each compiled function takes the key as an argument and is run for
several keys, so a shape/dtype costs one compilation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import BF16

import hlo
import hlo.random as hr
from hlo.errors import DTypeError, ScalarOverflowError, ShapeError

KEYS = [np.asarray(jax.random.PRNGKey(s)) for s in (0, 1, 42, 2 ** 31 + 7)] + \
    [np.asarray(jax.random.split(jax.random.PRNGKey(3))[1])]


_JAX_CACHE = {}


def _jax_jit(tag, fn):
    """``jax.jit(fn)``, compiled once per ``tag`` for all targets (jax compiles take a second).
    ``fn`` must not read loop variables late: bind them as default arguments."""
    if tag not in _JAX_CACHE:
        _JAX_CACHE[tag] = jax.jit(fn)
    return _JAX_CACHE[tag]


def _run_keys(hfn, jfn, target, x64=False, keys=KEYS, tag=None):
    """(hlo results, jax results) of ``fn(key)`` for each key; ``tag`` names the jax function
    for reuse across targets."""
    hf = hlo.jit(hfn, target=target)
    with jax.enable_x64(x64):
        jf = _jax_jit(tag, jfn) if tag is not None else jax.jit(jfn)
        want = [np.asarray(jf(k)) for k in keys]
    return [np.asarray(hf(k)) for k in keys], want


def _assert_bits_equal(got, want):
    got = hlo.device_get(list(got))  # (cuda's DeviceArrays as numpy)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))


def _assert_ulps(got, want, ulps):
    """Equal to within ``ulps`` units of the larger of |want| and 1 (floats of any width)."""
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        eps = float(jnp.finfo(w.dtype).eps)
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        err = np.abs(g64 - w64) / (eps * np.maximum(np.abs(w64), 1.0))
        assert (err <= ulps).all(), f"{err.max()} ulps apart (allowed {ulps})"


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------

def test_key_from_python_ints_matches_prngkey(target):
    seeds = [0, 7, -1, 2 ** 31, 2 ** 32 - 1, 2 ** 40 + 5, -2 ** 63]
    f = hlo.jit(lambda: [hr.key(s) for s in seeds] + [hr.PRNGKey(3)], target=target)
    want = [np.asarray(jax.random.PRNGKey(s)) for s in seeds] + [np.asarray(jax.random.PRNGKey(3))]
    _assert_bits_equal(f(), want)
    with pytest.raises(ScalarOverflowError):
        hlo.jit(lambda: hr.key(2 ** 64)).lower()


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.int64, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_key_from_traced_seed(target, dtype):
    info = np.iinfo(dtype)
    seeds = [0, 1, info.max, info.min, info.max // 3]
    f = hlo.jit(hr.key, target=target)
    x64 = np.dtype(dtype).itemsize == 8  # hlo keeps 64-bit seeds: compare with jax's x64 mode
    with jax.enable_x64(x64):
        want = [np.asarray(jax.random.PRNGKey(np.asarray(s, dtype))) for s in seeds]
    _assert_bits_equal([f(np.asarray(s, dtype)) for s in seeds], want)


@pytest.mark.parametrize("num", [2, 5, (2, 3)], ids=str)
def test_split(target, num):
    _assert_bits_equal(*_run_keys(lambda k: hr.split(k, num), lambda k: jax.random.split(k, num), target,
                                  tag=("split", num)))


def test_fold_in(target):
    datas = [0, 1, 77, 2 ** 32 - 1]
    f = hlo.jit(hr.fold_in, target=target)
    for k in KEYS[:3]:
        _assert_bits_equal([f(k, np.uint32(d)) for d in datas],
                           [np.asarray(jax.random.fold_in(k, d)) for d in datas])
    # Python ints are static; a traced int32 (negative) wraps to uint32, as jax
    g = hlo.jit(lambda k, d: (hr.fold_in(k, 12345), hr.fold_in(k, d)), target=target)
    a, b = g(KEYS[0], np.int32(-5))
    _assert_bits_equal([a, b], [np.asarray(jax.random.fold_in(KEYS[0], 12345)),
                                np.asarray(jax.jit(jax.random.fold_in)(KEYS[0], np.int32(-5)))])


def test_key_chain_inside_loop(target):
    # split/fold_in/uniform composed inside a fori_loop: the same stream as jax's
    def make(R, L):
        def f(k):
            def body(i, c):
                k, acc = c
                k, sub = R.split(k)
                return k, acc + R.uniform(R.fold_in(sub, i), (3,))
            return L.fori_loop(0, 4, body, (k, jnp.zeros(3, np.float32) if R is jax.random
                                            else np.zeros(3, np.float32)))
        return f
    got, want = _run_keys(lambda k: make(hr, hlo.lax)(k)[1], lambda k: make(jax.random, jax.lax)(k)[1],
                          target, keys=KEYS[:2], tag="chain")
    _assert_ulps(got, want, 2)


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dtype", [((), np.uint32), ((1,), np.uint32), ((5, 7), np.uint32),
                                         ((3, 1, 4), np.uint8), ((9,), np.uint16), ((2, 3), np.uint64)],
                         ids=str)
def test_bits(target, shape, dtype):
    x64 = np.dtype(dtype).itemsize == 8
    _assert_bits_equal(*_run_keys(lambda k: hr.bits(k, shape, dtype),
                                  lambda k: jax.random.bits(k, shape, dtype), target, x64,
                                  tag=("bits", shape, dtype)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64], ids=lambda d: np.dtype(d).name)
def test_uniform(target, dtype):
    x64 = np.dtype(dtype) == np.float64
    shape = (4, 6)
    got, want = _run_keys(lambda k: hr.uniform(k, shape, dtype), lambda k: jax.random.uniform(k, shape, dtype),
                          target, x64, tag=("uniform", dtype))
    _assert_bits_equal(got, want)
    assert all(((g >= 0) & (g < 1)).all() for g in got)
    lo, hi = np.array([-3.0, 0.5, 2.0], np.float32), 4.25
    got, want = _run_keys(lambda k: hr.uniform(k, (2, 3), dtype, lo, hi),
                          lambda k: jax.random.uniform(k, (2, 3), dtype, lo, hi), target, x64,
                          tag=("uniform-range", dtype))
    _assert_ulps(got, want, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16], ids=lambda d: np.dtype(d).name)
def test_normal(target, dtype):
    x64 = np.dtype(dtype) == np.float64
    got, want = _run_keys(lambda k: hr.normal(k, (50, 40), dtype), lambda k: jax.random.normal(k, (50, 40), dtype),
                          target, x64, keys=KEYS[:2], tag=("normal", dtype))
    # the tails amplify the last-ulp differences of log1p/sqrt (and XLA's FMA contraction)
    # (a wrong polynomial or bit stream is off by far more)
    _assert_ulps(got, want, 32)
    both = np.concatenate([g.ravel() for g in got]).astype(np.float64)
    assert abs(both.mean()) < 0.1 and abs(both.std() - 1) < 0.1


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.uint16, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_randint(target, dtype):
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    bdt = np.int64 if dtype.itemsize == 8 else np.int32
    ranges = [(0, 10), (-5, 7), (3, 3), (9, 2), (0, 256), (-300, 300), (info.min, info.max),
              (max(info.min, -2 ** 31), min(info.max, 2 ** 31 - 1))]
    if dtype.itemsize == 8:
        ranges.append((-2 ** 40, 2 ** 62))
    x64 = dtype.itemsize == 8
    hf = hlo.jit(lambda k, lo, hi: hr.randint(k, (4, 5), lo, hi, dtype), target=target)
    with jax.enable_x64(x64):
        jf = _jax_jit(("randint", dtype), lambda k, lo, hi: jax.random.randint(k, (4, 5), lo, hi, dtype))
        for lo, hi in ranges:
            if not (np.iinfo(bdt).min <= lo and hi <= np.iinfo(bdt).max):
                continue
            args = (np.asarray(lo, bdt), np.asarray(hi, bdt))
            k = KEYS[(lo + hi) % len(KEYS)]
            _assert_bits_equal([hf(k, *args)], [np.asarray(jf(k, *args))])
    if dtype not in (np.int8, np.int64):
        return
    # Python-int bounds (static) and array bounds broadcasting to the shape
    got, want = _run_keys(lambda k: hr.randint(k, (2, 3), np.array([0, 10, -7], bdt), 100, dtype),
                          lambda k: jax.random.randint(k, (2, 3), np.array([0, 10, -7], bdt), 100, dtype),
                          target, x64, keys=KEYS[2:3], tag=("randint-static", dtype))
    _assert_bits_equal(got, want)


def test_bernoulli(target):
    p = np.array([0.0, 1e-3, 0.25, 0.5, 0.9, 1.0], np.float32)
    for mode in ("low", "high"):
        _assert_bits_equal(*_run_keys(lambda k: hr.bernoulli(k, p, (3, 6), mode=mode),
                                      lambda k, mode=mode: jax.random.bernoulli(k, p, (3, 6), mode=mode), target,
                                      tag=("bernoulli", mode)))
    _assert_bits_equal(*_run_keys(lambda k: hr.bernoulli(k), lambda k: jax.random.bernoulli(k), target,
                                  tag="bernoulli-default"))


def test_eager_calls(target):
    with hlo.config.override(target=target):
        k = hlo.device_get(hr.key(11))  # (a numpy key: jax takes it too)
        np.testing.assert_array_equal(k, jax.random.PRNGKey(11))
        np.testing.assert_array_equal(hr.uniform(k, (3,)), jax.random.uniform(k, (3,)))
        np.testing.assert_array_equal(hlo.device_get(hr.split(k))[1], jax.random.split(k)[1])


def test_errors():
    with pytest.raises(ShapeError, match="uint32\\[2\\] PRNG key"):
        hlo.jit(lambda k: hr.uniform(k)).lower(np.zeros((3, 2), np.uint32))
    with pytest.raises(DTypeError, match="uint32\\[2\\] PRNG key"):
        hlo.jit(lambda k: hr.normal(k)).lower(np.zeros(2, np.int32))
    with pytest.raises(DTypeError, match="floating-point"):
        hlo.jit(lambda k: hr.uniform(k, (2,), np.int32)).lower(KEYS[0])
    with pytest.raises(DTypeError, match="unsigned"):
        hlo.jit(lambda k: hr.bits(k, (2,), np.int32)).lower(KEYS[0])
    with pytest.raises(DTypeError, match="integer"):
        hlo.jit(lambda k: hr.randint(k, (2,), 0, 3, np.float32)).lower(KEYS[0])
    with pytest.raises(ShapeError, match="broadcast to the requested shape"):
        hlo.jit(lambda k: hr.uniform(k, (2,), minval=np.zeros(3, np.float32))).lower(KEYS[0])
    with pytest.raises(DTypeError, match="p must be a floating-point"):
        hlo.jit(lambda k: hr.bernoulli(k, 1)).lower(KEYS[0])
    with pytest.raises(ScalarOverflowError):
        hlo.jit(lambda k: hr.fold_in(k, -1)).lower(KEYS[0])
    with pytest.raises(ValueError, match="mode"):
        hlo.jit(lambda k: hr.bernoulli(k, mode="mid")).lower(KEYS[0])


# --------------------------------------------------------------------------------------------
# hlo.nn.dropout
# --------------------------------------------------------------------------------------------

def _dropout_ref(key, rate, x, broadcast_dims=()):
    keep = 1.0 - rate
    shape = tuple(1 if d in broadcast_dims else n for d, n in enumerate(x.shape))
    mask = jnp.broadcast_to(jax.random.bernoulli(key, keep, shape), x.shape)
    return jax.lax.select(mask, x / keep, jnp.zeros_like(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_dropout(target, dtype):
    x = np.random.default_rng(0).standard_normal((6, 8)).astype(dtype)
    x[0, 0] = np.inf  # dropped infinities give 0, not NaN
    for rate, bd in ((0.3, ()), (0.5, (0,))):
        hf = hlo.jit(lambda k, x: hlo.nn.dropout(k, rate, x, broadcast_dims=bd), target=target)
        jf = _jax_jit(("dropout", rate, bd), lambda k, x, rate=rate, bd=bd: _dropout_ref(k, rate, x, bd))
        for k in KEYS[:3]:
            got, want = np.asarray(hf(k, x)), np.asarray(jf(k, x))
            np.testing.assert_array_equal(got == 0, want == 0)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3)
            assert got.dtype == dtype and not np.isnan(got).any()
        if bd:
            assert ((got == 0).all(axis=0) | (got != 0).all(axis=0)).all()
    f = hlo.jit(lambda k, x: (hlo.nn.dropout(k, 0.0, x), hlo.nn.dropout(k, 0.7, x, deterministic=True),
                              hlo.nn.dropout(k, 1.0, x)), target=target)
    a, b, c = hlo.device_get(f(KEYS[0], x))
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, x)
    assert (c == 0).all()


def test_dropout_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="rate must be in"):
        hlo.jit(lambda k: hlo.nn.dropout(k, 1.5, x)).lower(KEYS[0])
    with pytest.raises(TypeError, match="static Python number"):
        hlo.jit(lambda k, r: hlo.nn.dropout(k, r, x)).lower(KEYS[0], np.float32(0.1))
    with pytest.raises(DTypeError, match="floating-point"):
        hlo.jit(lambda k: hlo.nn.dropout(k, 0.1, np.ones(3, np.int32))).lower(KEYS[0])
