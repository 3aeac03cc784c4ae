"""hlo.numpy.fft: numpy.fft on traced arrays.

The transforms are ``hlo.ir.decompositions.fft`` (StableHLO's fft over up to three trailing
axes, written with hlo's own ops: radix-2 stages for powers of two, the DFT matrix for short
lengths, Bluestein's algorithm otherwise), so they compile on every target and differentiate
like any other ops. Axes are moved last for the transform and back after; ``n``/``s`` crop or
zero-pad as numpy does; ``norm`` is "backward" (default), "ortho" or "forward".

dtypes as jax.numpy: float32 and narrower (and integers) transform in complex64, float64 in
complex128; ``rfft`` of a complex array is an error.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from hlo.ir import decompositions

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..lax import elementwise as lax_ew
from ..lax.common import as_tracer, canonical_axes, convert
from ..lax.structural import pad, transpose
from ..lax.structural import slice as lax_slice
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, build_with

_NORMS = (None, "backward", "ortho", "forward")


def _check_norm(norm):
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of 'backward', 'ortho', 'forward' or None, got {norm!r}")
    return norm or "backward"


def _complex_dtype(dt):
    if dtypes.is_complex(dt):
        return dt
    return dtypes.complex128 if dt.itemsize == 8 and not dtypes.is_bool(dt) else dtypes.complex64


def _real_dtype(what, dt):
    if dtypes.is_complex(dt):
        raise DTypeError(f"{what}: expected a real array, got {dtypes.dtype_name(dt)}")
    return dtypes.float64 if dt.itemsize == 8 else dtypes.float32


def _resize(x: Tracer, axis: int, n: int) -> Tracer:
    """Crop or zero-pad ``x`` along ``axis`` to length ``n``."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        lim = list(x.shape)
        lim[axis] = n
        return lax_slice(x, [0] * x.ndim, lim)
    cfg = [(0, 0, 0)] * x.ndim
    cfg[axis] = (0, n - m, 0)
    return pad(x, np.zeros((), x.dtype).item() if not dtypes.is_complex(x.dtype) else 0j, cfg)


def _axes_and_sizes(what, x, s, axes, default_last_one=False):
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    axes = canonical_axes(what, axes, x.ndim)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{what}: repeated axes {list(axes)}")
    if s is None:
        s = [x.shape[a] for a in axes]
    s = [int(v) for v in s]
    if len(s) != len(axes):
        raise ShapeError(f"{what}: s {s} and axes {list(axes)} must have the same length")
    for v in s:
        if v < 1:
            raise ShapeError(f"{what}: invalid number of data points {v}")
    return list(axes), s


def _move_last(x, axes):
    perm = [d for d in range(x.ndim) if d not in axes] + list(axes)
    return transpose(x, perm), perm


def _move_back(y, perm):
    return transpose(y, [int(i) for i in np.argsort(perm)])


def _transform(x: Tracer, kind: str, axes, lengths) -> Tracer:
    """StableHLO's fft of ``kind`` over ``axes`` (in chunks of at most three, last first)."""
    y, perm = _move_last(x, axes)
    k = len(axes)
    if kind in ("FFT", "IFFT"):
        done = 0
        while done < k:  # chunks of up to three trailing axes
            c = min(3, k - done)
            lo = k - done - c
            sub = list(lengths[lo:lo + c])
            if lo + c < k:  # bring this chunk to the end
                r = y.ndim
                p2 = list(range(r - k)) + [r - k + i for i in range(k) if not lo <= i < lo + c] + \
                    [r - k + i for i in range(lo, lo + c)]
                y = transpose(y, p2)
                y = build_with(decompositions.fft, [y], fft_type=kind, lengths=sub)
                y = transpose(y, [int(i) for i in np.argsort(p2)])
            else:
                y = build_with(decompositions.fft, [y], fft_type=kind, lengths=sub)
            done += c
        return _move_back(y, perm)
    if k > 3:  # the leading axes as complex transforms, the last three as the real one
        lead = k - 3
        if kind == "RFFT":
            last = build_with(decompositions.fft, [y], fft_type="RFFT", lengths=list(lengths[lead:]))
            y = _transform(last, "FFT", list(range(y.ndim - k, y.ndim - 3)), list(lengths[:lead]))
        else:
            y = _transform(y, "IFFT", list(range(y.ndim - k, y.ndim - 3)), list(lengths[:lead]))
            y = build_with(decompositions.fft, [y], fft_type="IRFFT", lengths=list(lengths[lead:]))
        return _move_back(y, perm)
    y = build_with(decompositions.fft, [y], fft_type=kind, lengths=list(lengths))
    return _move_back(y, perm)


def _scale(y: Tracer, n: int, norm: str, inverse: bool) -> Tracer:
    """The decomposition computes "backward" (1/n on the inverse); rescale for the others."""
    if norm == "backward":
        return y
    if norm == "ortho":
        f = math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    else:  # forward
        f = float(n) if inverse else 1.0 / n
    return lax_ew.mul(y, f)


def _c2c(what, a, s, axes, norm, inverse):
    norm = _check_norm(norm)
    x = as_tracer(a, what=what)
    x = convert(x, _complex_dtype(x.dtype))
    axes, s = _axes_and_sizes(what, x, s, axes)
    for ax, n in zip(axes, s):
        x = _resize(x, ax, n)
    if x.size == 0 or not axes:
        return x
    y = _transform(x, "IFFT" if inverse else "FFT", axes, s)
    return _scale(y, int(np.prod(s)), norm, inverse)


def _r2c(what, a, s, axes, norm):
    norm = _check_norm(norm)
    x = as_tracer(a, what=what)
    x = convert(x, _real_dtype(what, x.dtype))
    axes, s = _axes_and_sizes(what, x, s, axes)
    for ax, n in zip(axes, s):
        x = _resize(x, ax, n)
    y = _transform(x, "RFFT", axes, s)
    return _scale(y, int(np.prod(s)), norm, False)


def _c2r(what, a, s, axes, norm):
    norm = _check_norm(norm)
    x = as_tracer(a, what=what)
    x = convert(x, _complex_dtype(x.dtype))
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    axes = canonical_axes(what, axes, x.ndim)
    if s is None:
        s = [x.shape[ax] for ax in axes[:-1]] + [2 * (x.shape[axes[-1]] - 1)]
    axes, s = _axes_and_sizes(what, x, s, axes)
    for ax, n in zip(axes[:-1], s[:-1]):
        x = _resize(x, ax, n)
    x = _resize(x, axes[-1], s[-1] // 2 + 1)
    y = _transform(x, "IRFFT", axes, s)
    return _scale(y, int(np.prod(s)), norm, True)


def _one(n, axis):
    return (None if n is None else [n]), [axis]


@api_function
def fft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    """The 1-D discrete Fourier transform (numpy.fft.fft)."""
    return _c2c("fft", a, *_one(n, axis), norm, False)


@api_function
def ifft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    return _c2c("ifft", a, *_one(n, axis), norm, True)


@api_function
def rfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    """The 1-D transform of a real array: the n // 2 + 1 non-negative frequencies."""
    return _r2c("rfft", a, *_one(n, axis), norm)


@api_function
def irfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    """The inverse of rfft: n real points (default 2 * (m - 1))."""
    return _c2r("irfft", a, *_one(n, axis), norm)


_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


@api_function
def hfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    """The transform of a Hermitian-symmetric signal given by its first half (real result)."""
    x = lax_ew.conj(convert(as_tracer(a, what="hfft"), _complex_dtype(as_tracer(a).dtype)))
    return _c2r("hfft", x, *_one(n, axis), _SWAP[_check_norm(norm)])


@api_function
def ihfft(a, n: Optional[int] = None, axis: int = -1, norm: Optional[str] = None) -> Tracer:
    return lax_ew.conj(_r2c("ihfft", a, *_one(n, axis), _SWAP[_check_norm(norm)]))


@api_function
def fftn(a, s: Optional[Sequence[int]] = None, axes=None, norm: Optional[str] = None) -> Tracer:
    return _c2c("fftn", a, s, axes, norm, False)


@api_function
def ifftn(a, s: Optional[Sequence[int]] = None, axes=None, norm: Optional[str] = None) -> Tracer:
    return _c2c("ifftn", a, s, axes, norm, True)


@api_function
def rfftn(a, s: Optional[Sequence[int]] = None, axes=None, norm: Optional[str] = None) -> Tracer:
    return _r2c("rfftn", a, s, axes, norm)


@api_function
def irfftn(a, s: Optional[Sequence[int]] = None, axes=None, norm: Optional[str] = None) -> Tracer:
    return _c2r("irfftn", a, s, axes, norm)


@api_function
def fft2(a, s=None, axes=(-2, -1), norm: Optional[str] = None) -> Tracer:
    return _c2c("fft2", a, s, axes, norm, False)


@api_function
def ifft2(a, s=None, axes=(-2, -1), norm: Optional[str] = None) -> Tracer:
    return _c2c("ifft2", a, s, axes, norm, True)


@api_function
def rfft2(a, s=None, axes=(-2, -1), norm: Optional[str] = None) -> Tracer:
    return _r2c("rfft2", a, s, axes, norm)


@api_function
def irfft2(a, s=None, axes=(-2, -1), norm: Optional[str] = None) -> Tracer:
    return _c2r("irfft2", a, s, axes, norm)


def fftfreq(n: int, d: float = 1.0, dtype=None) -> np.ndarray:
    """Sample frequencies (a constant: numpy's own values, float32 unless ``dtype``)."""
    return np.fft.fftfreq(int(n), d).astype(dtypes.canonicalize(dtype) if dtype is not None else np.float32)


def rfftfreq(n: int, d: float = 1.0, dtype=None) -> np.ndarray:
    return np.fft.rfftfreq(int(n), d).astype(dtypes.canonicalize(dtype) if dtype is not None else np.float32)


@api_function
def fftshift(x, axes=None) -> Tracer:
    """Rotate the zero frequency to the center (numpy.fft.fftshift)."""
    from .shapes import roll
    t = as_tracer(x, what="fftshift")
    axes = list(range(t.ndim)) if axes is None else canonical_axes("fftshift", axes, t.ndim)
    return roll(t, [t.shape[a] // 2 for a in axes], axes)


@api_function
def ifftshift(x, axes=None) -> Tracer:
    from .shapes import roll
    t = as_tracer(x, what="ifftshift")
    axes = list(range(t.ndim)) if axes is None else canonical_axes("ifftshift", axes, t.ndim)
    return roll(t, [-(t.shape[a] // 2) for a in axes], axes)


def _install_missing_names():  # hnp.foo: "did you mean ...?", and whether jax has it
    from hlo.base import missing
    missing.install(__name__)


_install_missing_names()
