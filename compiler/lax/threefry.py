"""The threefry2x32 counter-based PRNG on raw ``uint32[2]`` keys, bit for bit as jax computes
it with its default settings (``jax_threefry_partitionable=True`` since jax 0.5; the
implementation is jax/_src/random/threefry2x32.py and prng.py).

- ``threefry2x32(k1, k2, x1, x2)``: Salmon et al.'s Threefry-2x32 block cipher, 20 rounds,
  rotations (13, 15, 26, 6) / (17, 29, 16, 24), key schedule with parity 0x1BD11BDA.
- ``counters(shape)``: the high and low 32-bit words of the row-major element index (jax's
  ``iota_2x32_shape``).
- ``random_bits(key, bit_width, shape)``: hash the counters with the key; 32 bits are
  ``hi ^ lo``, 64 bits are ``hi << 32 | lo``, 8 and 16 bits are ``hi ^ lo`` truncated.
- ``split(key, shape)``: the hashed counters of ``shape`` as ``(*shape, 2)`` keys.
- ``fold_in(key, data)``: the hash of the counter pair ``(0, data)``.
- ``seed(x)``: a key from an integer scalar: ``(x >> 32, x & 0xFFFFFFFF)`` as uint32.

Everything here works on Tracers inside a trace; ``hlo.random`` is the public API.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..tracing.tracer import Tracer
from .common import broadcast_in_dim, convert, full, reshape, scalar_const
from .elementwise import add, mul, or_, shift_left, shift_right_logical, xor
from .structural import broadcasted_iota, concatenate, iota
from .structural import slice as _slice

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA
UINT_OF_BITS = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def threefry2x32(k1: Tracer, k2: Tracer, x1: Tracer, x2: Tracer) -> Tuple[Tracer, Tracer]:
    """The Threefry-2x32 hash of the counter pairs ``(x1, x2)`` under the key ``(k1, k2)``.
    All operands are uint32; rank-0 operands broadcast. Keys and constants are broadcast once
    per call (not once per use), which keeps the traced program small (~130 ops)."""
    shape = x1.shape if x1.ndim else x2.shape
    consts = {}

    def c(v: int) -> Tracer:
        if v not in consts:
            consts[v] = full(shape, v, dtypes.uint32)
        return consts[v]

    def rotl(v: Tracer, r: int) -> Tracer:
        return or_(shift_left(v, c(r)), shift_right_logical(v, c(32 - r)))

    ks = [_full(k, shape) for k in (k1, k2, xor(xor(k1, k2), _PARITY))]
    x1, x2 = add(_full(x1, shape), ks[0]), add(_full(x2, shape), ks[1])
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x1 = add(x1, x2)
            x2 = xor(x1, rotl(x2, r))
        x1 = add(x1, ks[(block + 1) % 3])
        x2 = add(add(x2, ks[(block + 2) % 3]), c(block + 1))
    return x1, x2


def counters(shape: Sequence[int]) -> Tuple[Tracer, Tracer]:
    """(high, low) 32-bit words of each element's row-major index, as uint32 (a rank-0 zero
    stands for an all-zero high word)."""
    shape = tuple(shape)
    size = int(np.prod(shape, dtype=np.int64))
    zero = _u32(0)
    if not shape:
        return zero, zero
    if size <= 2 ** 32:
        return zero, reshape(iota(dtypes.uint32, size), shape)
    # more than 2**32 elements: build the 64-bit index from per-dimension iotas, as jax does
    strides = np.cumprod((shape[1:] + (1,))[::-1])[::-1]
    idx = None
    for d, s in enumerate(strides):
        term = broadcasted_iota(dtypes.uint64, shape, d)
        if s != 1:
            term = mul(term, np.uint64(s))
        idx = term if idx is None else add(idx, term)
    return convert(shift_right_logical(idx, 32), dtypes.uint32), convert(idx, dtypes.uint32)


def _u32(v: int) -> Tracer:
    return scalar_const(v, dtypes.uint32)


def key_words(what: str, key: Tracer) -> Tuple[Tracer, Tracer]:
    """The two uint32 words of a ``uint32[2]`` key, as scalars."""
    if key.dtype != dtypes.uint32:
        raise DTypeError(f"{what}: key must be a uint32[2] PRNG key (from hlo.random.key), got "
                         f"{key.aval.strip_weak()}")
    if key.shape != (2,):
        extra = "; hlo.random functions take one key (index a batch of keys first)" \
            if key.ndim >= 1 and key.shape[-1] == 2 else ""
        raise ShapeError(f"{what}: key must be a uint32[2] PRNG key (from hlo.random.key), got "
                         f"{key.aval.strip_weak()}{extra}")
    return reshape(_slice(key, [0], [1]), ()), reshape(_slice(key, [1], [2]), ())


def random_bits(what: str, key: Tracer, bit_width: int, shape: Sequence[int]) -> Tracer:
    """``shape`` random unsigned integers of ``bit_width`` bits (8, 16, 32 or 64)."""
    k1, k2 = key_words(what, key)
    hi, lo = counters(shape)
    return _bits_of(threefry2x32(k1, k2, hi, lo), bit_width, tuple(shape))


def random_bits_per_key(keys: Tracer, bit_width: int, shape: Sequence[int]) -> Tracer:
    """``random_bits`` for each key of ``keys`` (``uint32[n, 2]``) at once: ``(n, *shape)``.
    Row ``j`` equals ``random_bits(keys[j], ...)``; one hash over the batch keeps the program
    half the size of ``n`` separate ones."""
    shape = tuple(shape)
    n = keys.shape[0]
    full_shape = (n,) + shape
    dims = list(range(1, len(full_shape)))
    ks = [broadcast_in_dim(reshape(_slice(keys, [0, j], [n, j + 1]), (n,)), full_shape, [0])
          for j in (0, 1)]
    hi, lo = counters(shape)
    hi = _full(hi, full_shape) if hi.ndim == 0 else broadcast_in_dim(hi, full_shape, dims)
    lo = _full(lo, full_shape) if lo.ndim == 0 else broadcast_in_dim(lo, full_shape, dims)
    return _bits_of(threefry2x32(ks[0], ks[1], hi, lo), bit_width, full_shape)


def _bits_of(hashed: Tuple[Tracer, Tracer], bit_width: int, shape: tuple) -> Tracer:
    b1, b2 = (_full(b, shape) for b in hashed)
    dt = UINT_OF_BITS[bit_width]
    if bit_width == 64:
        return or_(shift_left(convert(b1, dt), 32), convert(b2, dt))
    bits = xor(b1, b2)
    return bits if bit_width == 32 else convert(bits, dt)


def _full(x: Tracer, shape) -> Tracer:
    shape = tuple(shape)
    return x if x.shape == shape else broadcast_in_dim(x, shape, [])


def split(what: str, key: Tracer, shape: Sequence[int]) -> Tracer:
    """``(*shape, 2)`` new keys."""
    k1, k2 = key_words(what, key)
    hi, lo = counters(shape)
    b1, b2 = threefry2x32(k1, k2, hi, lo)
    shape = tuple(shape)
    b1, b2 = _full(b1, shape), _full(b2, shape)
    n = len(shape)
    return concatenate([reshape(b1, shape + (1,)), reshape(b2, shape + (1,))], n)


def fold_in(what: str, key: Tracer, data: Tracer) -> Tracer:
    """A new key from ``key`` and the uint32 scalar ``data``."""
    k1, k2 = key_words(what, key)
    b1, b2 = threefry2x32(k1, k2, _u32(0), data)
    return concatenate([reshape(b1, (1,)), reshape(b2, (1,))], 0)


def seed(x: Tracer) -> Tracer:
    """A key from an integer scalar: its high and low 32-bit words (the high word is 0 for
    types of 32 bits or fewer; narrower signed values sign-extend, as jax's do)."""
    lo = convert(x, dtypes.uint32)
    if x.dtype.itemsize == 8:
        hi = convert(shift_right_logical(x, 32), dtypes.uint32)
    else:
        hi = _u32(0)
    return concatenate([reshape(hi, (1,)), reshape(lo, (1,))], 0)
