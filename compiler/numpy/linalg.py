"""hlo.numpy.linalg: numpy.linalg on traced arrays, built on ``hlo.lax.linalg``'s factorizations
(hlo's own ops: they trace to IR and run on every target, with no library or host calls).

Matrices are the last two axes; leading axes are batch axes (broadcast where numpy broadcasts:
``solve``). Integer inputs compute in a float type (int64 in float64, others in float32, hlo's
rule). float16/bfloat16 are refused (numpy refuses them too; convert with ``.astype``), except by
``norm``'s elementwise orders. Results are namedtuples where numpy's are (``SlogdetResult``,
``QRResult``, ``EighResult``, ``SVDResult``, ``LstsqResult`` is a plain tuple as in numpy).

Differences from numpy, all as jax.numpy does under jit:
- failures give NaN/inf instead of raising ``LinAlgError`` (singular ``inv``/``solve``,
  non-positive-definite ``cholesky``), since values are not known at compile time;
- ``pinv``/``matrix_rank``/``lstsq`` default cutoffs are ``max(M, N) * eps`` relative to the
  largest singular value;
- ``lstsq`` returns the residuals whenever ``M > N`` (numpy returns an empty array when the
  rank is below N, a shape hlo cannot know at compile time).

Not available: ``eig``/``eigvals`` (general nonsymmetric eigenproblems), ``tensorsolve``,
``tensorinv``: calling them raises ``UnsupportedError`` (a ``NotImplementedError``) saying so.
"""
from __future__ import annotations

import builtins
import functools
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError, UnsupportedError
from ..lax import linalg as lla
from ..lax.common import as_tracer, canonical_axes, convert
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer


class SlogdetResult(NamedTuple):
    sign: Tracer
    logabsdet: Tracer


class QRResult(NamedTuple):
    Q: Tracer
    R: Tracer


class EighResult(NamedTuple):
    eigenvalues: Tracer
    eigenvectors: Tracer


class SVDResult(NamedTuple):
    U: Tracer
    S: Tracer
    Vh: Tracer


def _float(what: str, a, allow_half: bool = False) -> Tracer:
    """``a`` as a Tracer of a float dtype (ints and bools become float, 64-bit ones float64)."""
    x = as_tracer(a, what=what)
    if not dtypes.is_float(x.dtype):
        if x.dtype.kind not in "biu":
            raise DTypeError(f"{what}: unsupported dtype {x.dtype}")
        x = convert(x, dtypes.to_inexact(x.dtype))
    if not allow_half and x.dtype.itemsize < 4:
        raise DTypeError(f"{what}: {x.dtype} is not supported in linear algebra (numpy refuses it "
                         f"too); convert with .astype(hnp.float32)")
    return x


def _matrix(what: str, a, square: bool = True) -> Tracer:
    x = _float(what, a)
    if x.ndim < 2:
        raise ShapeError(f"{what}: expected an array of at least two dimensions (..., M, N), got "
                         f"shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{what}: last two dimensions must be square, got shape {x.shape}")
    return x


def _hnp():
    from .. import numpy as hnp
    return hnp


# --------------------------------------------------------------------------------------------
# Norms
# --------------------------------------------------------------------------------------------

def _vector_norm(x: Tracer, ord, axes, keepdims: bool) -> Tracer:
    hnp = _hnp()
    ax = axes if len(axes) != 1 else axes[0]
    ab = hnp.abs(x)
    if ord is None or ord == 2:
        return hnp.sqrt(hnp.sum(x * x, axis=ax, keepdims=keepdims))
    if ord == np.inf:
        return hnp.max(ab, axis=ax, keepdims=keepdims)
    if ord == -np.inf:
        return hnp.min(ab, axis=ax, keepdims=keepdims)
    if ord == 0:
        return hnp.sum(ab != 0, axis=ax, keepdims=keepdims, dtype=x.dtype)
    if ord == 1:
        return hnp.sum(ab, axis=ax, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    p = float(ord)
    return hnp.power(hnp.sum(hnp.power(ab, p), axis=ax, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x: Tracer, ord, axes, keepdims: bool) -> Tracer:
    hnp = _hnp()
    r, c = axes
    if r == c:
        raise ValueError("norm: the two axes of a matrix norm must differ")
    if ord is None or ord == "fro":
        out = hnp.sqrt(hnp.sum(x * x, axis=(r, c)))
    elif ord in (1, -1, np.inf, -np.inf):
        summed_axis, other = (r, c) if ord in (1, -1) else (c, r)
        s = hnp.sum(hnp.abs(x), axis=summed_axis)
        other = other - 1 if other > summed_axis else other
        out = hnp.max(s, axis=other) if ord in (1, np.inf) else hnp.min(s, axis=other)
    elif ord in (2, -2, "nuc"):
        if x.dtype.itemsize < 4:
            raise DTypeError(f"norm: ord={ord!r} needs an SVD, which {x.dtype} does not support; "
                             f"convert with .astype(hnp.float32)")
        m = hnp.moveaxis(x, (r, c), (-2, -1))
        s = lla.svd(m, full_matrices=False, compute_uv=False)
        out = hnp.sum(s, axis=-1) if ord == "nuc" else (hnp.max(s, axis=-1) if ord == 2 else hnp.min(s, axis=-1))
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        out = hnp.expand_dims(out, tuple(sorted((r, c))))
    return out


@api_function
def norm(x, ord=None, axis=None, keepdims: bool = False) -> Tracer:
    """Vector norms (ord None/2, 1, inf, -inf, 0, any p) and matrix norms (None/'fro', 'nuc',
    1, -1, 2, -2, inf, -inf) as numpy.linalg.norm; 2, -2 and 'nuc' take singular values."""
    t = _float("norm", x, allow_half=True)
    if axis is None:
        if ord is None:
            out = _vector_norm(_hnp().ravel(t), None, (0,), False)
            return _hnp().reshape(out, (1,) * t.ndim) if keepdims else out
        if t.ndim == 1:
            axes = (0,)
        elif t.ndim == 2:
            axes = (0, 1)
        else:
            raise ShapeError(f"norm: ord={ord!r} with axis=None needs a 1-D or 2-D array, got shape {t.shape}")
    else:
        axes = canonical_axes("norm", tuple(axis) if isinstance(axis, list) else axis, t.ndim)
    if len(axes) == 1:
        return _vector_norm(t, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(t, ord, axes, keepdims)
    raise ShapeError(f"norm: axis must name one or two axes, got {axis!r}")


@api_function
def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Tracer:
    """The array API's vector norm: over all axes when ``axis`` is None."""
    t = _float("vector_norm", x, allow_half=True)
    axes = canonical_axes("vector_norm", axis, t.ndim)
    if axis is None:
        out = _vector_norm(_hnp().ravel(t), ord, (0,), False)
        return _hnp().reshape(out, (1,) * t.ndim) if keepdims else out
    return _vector_norm(t, ord, axes, keepdims)


@api_function
def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Tracer:
    """The array API's matrix norm of the last two axes."""
    t = _float("matrix_norm", x, allow_half=True)
    if t.ndim < 2:
        raise ShapeError(f"matrix_norm: expected at least two dimensions, got shape {t.shape}")
    return _matrix_norm(t, ord, (t.ndim - 2, t.ndim - 1), keepdims)


# --------------------------------------------------------------------------------------------
# Determinants, inverses, solves
# --------------------------------------------------------------------------------------------

@api_function
def det(a) -> Tracer:
    """Determinants of square matrices (LU with partial pivoting)."""
    hnp = _hnp()
    x = _matrix("det", a)
    if x.shape[-1] == 0:
        return hnp.ones(x.shape[:-2], x.dtype)
    lu, _, _, sign = lla.lu(x)
    return sign * hnp.prod(hnp.diagonal(lu, 0, -2, -1), axis=-1)


@api_function
def slogdet(a) -> SlogdetResult:
    """Sign and natural log of the absolute determinant: ``(sign, logabsdet)``; a singular
    matrix gives sign 0 and logabsdet -inf."""
    hnp = _hnp()
    x = _matrix("slogdet", a)
    if x.shape[-1] == 0:
        return SlogdetResult(hnp.ones(x.shape[:-2], x.dtype), hnp.zeros(x.shape[:-2], x.dtype))
    lu, _, _, sign = lla.lu(x)
    d = hnp.diagonal(lu, 0, -2, -1)
    sign = sign * hnp.prod(hnp.sign(d), axis=-1)
    logabs = hnp.sum(hnp.log(hnp.abs(d)), axis=-1)
    return SlogdetResult(sign, hnp.where(sign == 0, -np.inf, logabs).astype(x.dtype))


@api_function
def solve(a, b) -> Tracer:
    """x with ``a @ x = b``: b is a vector (..., M) only when it is 1-D (numpy 2's rule),
    otherwise (..., M, K); batch dimensions broadcast."""
    hnp = _hnp()
    from .promotion import promote
    x = _matrix("solve", a)
    y = as_tracer(b, what="solve")
    (x, y), _, _ = promote("solve", x, y, broadcast=False)
    x = _matrix("solve", x)
    vec = y.ndim == 1
    if vec:
        y = y[:, None]
    if y.ndim < 2 or y.shape[-2] != x.shape[-1]:
        raise ShapeError(f"solve: b must have shape (..., {x.shape[-1]}, K) or ({x.shape[-1]},) to "
                         f"match a of shape {x.shape}, got {as_tracer(b).shape}")
    from ..lax.common import broadcast_shapes
    batch = broadcast_shapes("solve", x.shape[:-2], y.shape[:-2])
    x = hnp.broadcast_to(x, batch + x.shape[-2:])
    y = hnp.broadcast_to(y, batch + y.shape[-2:])
    lu, _, perm, _ = lla.lu(x)
    out = lla.lu_solve(lu, perm, y)
    return out[..., 0] if vec else out


@api_function
def inv(a) -> Tracer:
    """Inverses of square matrices (LU; a singular matrix gives infs/NaNs, as jax)."""
    hnp = _hnp()
    x = _matrix("inv", a)
    n = x.shape[-1]
    lu, _, perm, _ = lla.lu(x)
    return lla.lu_solve(lu, perm, hnp.broadcast_to(hnp.eye(n, dtype=x.dtype), x.shape))


def _symmetrize(x: Tracer) -> Tracer:
    return (x + _hnp().matrix_transpose(x)) * 0.5


@api_function
def cholesky(a, /, *, upper: bool = False, symmetrize_input: bool = True) -> Tracer:
    """Cholesky factor L (lower; its transpose with ``upper=True``) of symmetric
    positive-definite matrices. As jax, the input is first symmetrized (``(a + a.T) / 2``,
    which also makes gradients symmetric); with ``symmetrize_input=False`` only the lower
    triangle is read, as numpy does. Not positive definite: NaNs."""
    x = _matrix("cholesky", a)
    if symmetrize_input:
        x = _symmetrize(x)
    L = lla.cholesky(x)
    return _hnp().matrix_transpose(L) if upper else L


@api_function
def qr(a, mode: str = "reduced"):
    """Householder QR: ``QRResult(Q, R)`` for modes "reduced" and "complete", R alone for
    "r" ("raw" is not supported)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: unrecognized mode {mode!r}")
    if mode == "raw":
        raise UnsupportedError("qr: mode='raw' (LAPACK's Householder vectors) is not supported; "
                               "use 'reduced', 'complete' or 'r'")
    x = _matrix("qr", a, square=False)
    q, r = lla.qr(x, full_matrices=(mode == "complete"))
    return r if mode == "r" else QRResult(q, r)


@api_function
def eigh(a, UPLO: str = "L", symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric matrices
    (cyclic Jacobi). As jax, the input is symmetrized first; with ``symmetrize_input=False``
    only the ``UPLO`` triangle is read, as numpy does."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    x = _matrix("eigh", a)
    if symmetrize_input:
        x = _symmetrize(x)
    v, w = lla.eigh(x, lower=(UPLO == "L"))
    return EighResult(w, v)


@api_function
def eigvalsh(a, UPLO: str = "L", *, symmetrize_input: bool = True) -> Tracer:
    """Eigenvalues (ascending) of symmetric matrices."""
    return eigh.__hlo_traced__(a, UPLO, symmetrize_input).eigenvalues  # type: ignore[attr-defined]


@api_function
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """Singular value decomposition ``SVDResult(U, S, Vh)`` (one-sided Jacobi), or S alone when
    not ``compute_uv``; S descends."""
    x = _matrix("svd", a, square=False)
    if not compute_uv:
        return lla.svd(x, full_matrices, compute_uv=False)
    u, s, vh = lla.svd(x, full_matrices, compute_uv=True)
    return SVDResult(u, s, vh)


@api_function
def svdvals(x, /) -> Tracer:
    return lla.svd(_matrix("svdvals", x, square=False), False, compute_uv=False)


def _cutoff_rtol(what, x: Tracer, rcond, rtol):
    if rcond is not None and rtol is not None:
        raise ValueError(f"{what}: give rcond or rtol, not both")
    r = rcond if rcond is not None else rtol
    if r is None:
        r = builtins.max(x.shape[-2:]) * float(dtypes.finfo(x.dtype).eps)
    return r


@api_function
def pinv(a, rcond=None, hermitian: bool = False, *, rtol=None) -> Tracer:
    """Moore-Penrose pseudo-inverse through the SVD; singular values at most
    ``rtol * max(s)`` (default ``max(M, N) * eps``) count as zero."""
    hnp = _hnp()
    x = _matrix("pinv", a, square=False)
    r = _cutoff_rtol("pinv", x, rcond, rtol)
    u, s, vh = lla.svd(x, full_matrices=False)
    cut = hnp.asarray(r, dtype=x.dtype)[..., None] * hnp.max(s, axis=-1, keepdims=True) if s.shape[-1] else 0
    sinv = hnp.where(s > cut, 1 / hnp.where(s > cut, s, 1), 0).astype(x.dtype)
    return hnp.matmul(hnp.matrix_transpose(vh) * sinv[..., None, :], hnp.matrix_transpose(u))


@api_function
def matrix_rank(A, tol=None, hermitian: bool = False, *, rtol=None) -> Tracer:
    """Number of singular values above ``tol`` (default ``max(s) * max(M, N) * eps``); a
    vector's rank is 1 unless it is all zero."""
    hnp = _hnp()
    x = _float("matrix_rank", A)
    if x.ndim < 2:
        return hnp.any(x != 0).astype(np.int32)
    s = lla.svd(x, full_matrices=False, compute_uv=False)
    if tol is None:
        r = _cutoff_rtol("matrix_rank", x, None, rtol)
        tol_ = hnp.max(s, axis=-1, keepdims=True) * r
    else:
        tol_ = hnp.asarray(tol, dtype=x.dtype)[..., None]
    return hnp.sum(s > tol_, axis=-1, dtype=np.int32)


@api_function
def lstsq(a, b, rcond=None):
    """Least-squares solution of ``a @ x = b`` through the SVD: ``(x, residuals, rank, s)``.
    ``residuals`` (squared 2-norms of ``b - a @ x`` per column) are returned whenever M > N and
    are empty otherwise."""
    hnp = _hnp()
    from .promotion import promote
    x = _matrix("lstsq", a, square=False)
    (x, y), _, _ = promote("lstsq", x, as_tracer(b, what="lstsq"), broadcast=False)
    if x.ndim != 2:
        raise ShapeError(f"lstsq: a must be two-dimensional, got shape {x.shape}")
    vec = y.ndim == 1
    if vec:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] != x.shape[0]:
        raise ShapeError(f"lstsq: b must have shape ({x.shape[0]},) or ({x.shape[0]}, K), got {y.shape}")
    m, n = x.shape
    u, s, vh = lla.svd(x, full_matrices=False)
    r = float(dtypes.finfo(x.dtype).eps) * builtins.max(m, n) if rcond is None else rcond
    cut = hnp.max(s) * r if s.shape[0] else 0
    keep = s > cut
    sinv = hnp.where(keep, 1 / hnp.where(keep, s, 1), 0).astype(x.dtype)
    sol = hnp.matmul(hnp.matrix_transpose(vh) * sinv[None, :], hnp.matmul(hnp.matrix_transpose(u), y))
    rank = hnp.sum(keep, dtype=np.int32)
    if m > n:
        res = hnp.sum(hnp.square(y - hnp.matmul(x, sol)), axis=0)
    else:
        res = hnp.zeros((0,), x.dtype)
    if vec:
        sol = sol[:, 0]
        if m > n:
            res = hnp.reshape(res, (1,))
    return sol, res, rank, s


@api_function
def matrix_power(a, n: int) -> Tracer:
    """``a`` multiplied by itself ``n`` times (a static integer; negative powers invert first,
    ``n == 0`` gives identities), by repeated squaring."""
    hnp = _hnp()
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: exponent must be a static integer, got {n!r}")
    x = as_tracer(a, what="matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"matrix_power: expected square matrices (..., M, M), got shape {x.shape}")
    n = int(n)
    if n == 0:
        return hnp.broadcast_to(hnp.eye(x.shape[-1], dtype=x.dtype), x.shape)
    if n < 0:
        x = inv.__hlo_traced__(x)  # type: ignore[attr-defined]
        n = -n
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else hnp.matmul(result, base)
        n >>= 1
        if n:
            base = hnp.matmul(base, base)
    return result


@api_function
def multi_dot(arrays) -> Tracer:
    """The product of a chain of matrices in the cheapest order (by static shapes); the first
    and last may be vectors."""
    hnp = _hnp()
    ts = [as_tracer(t, what="multi_dot") for t in arrays]
    if len(ts) < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0][None, :]
    if last_vec:
        ts[-1] = ts[-1][:, None]
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise ShapeError(f"multi_dot: array {i} has shape {t.shape}; only the first and last "
                             f"may be 1-D, the others must be 2-D")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise ShapeError(f"multi_dot: shapes {ts[i].shape} (array {i}) and {ts[i + 1].shape} "
                             f"(array {i + 1}) are not aligned")
    k = len(ts)

    @functools.lru_cache(maxsize=None)
    def best(i, j):  # (cost, split) of multiplying ts[i..j]
        if i == j:
            return 0, None
        return builtins.min((best(i, s)[0] + best(s + 1, j)[0] + dims[i] * dims[s + 1] * dims[j + 1], s)
                            for s in range(i, j))

    def build(i, j):
        if i == j:
            return ts[i]
        s = best(i, j)[1]
        return hnp.matmul(build(i, s), build(s + 1, j))

    out = build(0, k - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


@api_function
def cond(x, p=None) -> Tracer:
    """Condition number: ``s_max / s_min`` for p None/2 (-2: the inverse ratio), else
    ``norm(x, p) * norm(inv(x), p)``."""
    t = _matrix("cond", x, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = lla.svd(t, full_matrices=False, compute_uv=False)
        r = s[..., 0] / s[..., -1]
        return r if p != -2 else 1 / r
    axes = (t.ndim - 2, t.ndim - 1)
    return _matrix_norm(t, p, axes, False) * _matrix_norm(inv.__hlo_traced__(t), p, axes, False)  # type: ignore[attr-defined]


# The array API's names that numpy.linalg also exports.
def _reexports():
    from .differences import cross
    from .products import matmul, outer, tensordot, vdot
    from .shapes import diagonal as _diagonal
    from .shapes import matrix_transpose
    from .shapes import trace as _trace

    def diagonal(x, /, *, offset: int = 0):
        return _diagonal(x, offset, -2, -1)

    def trace(x, /, *, offset: int = 0, dtype=None):
        return _trace(x, offset, -2, -1, dtype=dtype)

    def vecdot(x1, x2, /, *, axis: int = -1):
        hnp = _hnp()
        return hnp.sum(hnp.multiply(x1, x2), axis=axis)

    return dict(matmul=matmul, tensordot=tensordot, outer=outer, vdot=vdot,
                matrix_transpose=matrix_transpose, diagonal=diagonal, trace=trace, cross=cross,
                vecdot=vecdot)


globals().update(_reexports())


def _missing(name: str, why: str):
    def fn(*args, **kwargs):
        raise UnsupportedError(f"hlo.numpy.linalg.{name} is not implemented: {why}")
    fn.__name__ = name
    fn.__doc__ = f"Not implemented in hlo: {why}"
    return fn


eig = _missing("eig", "general (nonsymmetric) eigendecomposition has no hlo implementation; for "
                      "symmetric matrices use hnp.linalg.eigh")
eigvals = _missing("eigvals", "general (nonsymmetric) eigenvalues have no hlo implementation; for "
                              "symmetric matrices use hnp.linalg.eigvalsh")
tensorsolve = _missing("tensorsolve", "reshape to matrices and use hnp.linalg.solve")
tensorinv = _missing("tensorinv", "reshape to a matrix and use hnp.linalg.inv")


class LinAlgError(ValueError):
    """numpy.linalg.LinAlgError's place; hlo reports failures as NaNs instead (see above)."""


def _install_missing_names():  # hnp.foo: "did you mean ...?", and whether jax has it
    from hlo.base import missing
    missing.install(__name__)


_install_missing_names()


# hlo.numpy.polyfit (exported by hlo.numpy, not hlo.numpy.linalg): numpy's least-squares fit,
# here because it solves with lstsq.
@api_function
def _polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit of degree ``deg`` (numpy's column scaling); ``full``
    adds (residuals, rank, singular values, rcond)."""
    if cov:
        raise UnsupportedError("polyfit: cov=True is not supported; compute the covariance from the "
                               "residuals and vander(x) with hlo.numpy.linalg")
    from . import creation as cr
    from . import reductions as red
    from . import ufuncs as uf
    from .polynomials import vander as _vander
    from .promotion import promote_inexact
    deg = int(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    (xt, yt), dt, _ = promote_inexact("polyfit", x, y, broadcast=False)
    if xt.ndim != 1 or yt.ndim not in (1, 2) or yt.shape[0] != xt.shape[0]:
        raise ShapeError(f"polyfit: x must be 1-D and y 1-D or 2-D with x's length, got {xt.shape} and {yt.shape}")
    order = deg + 1
    if rcond is None:
        rcond = xt.shape[0] * float(dtypes.finfo(dt).eps)
    lhs = _vander(xt, order)
    rhs = yt
    if w is not None:
        wt = cr.asarray(w).astype(dt)
        lhs = lhs * wt[:, None]
        rhs = rhs * (wt if rhs.ndim == 1 else wt[:, None])
    scale = uf.sqrt(red.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, cr.asarray(rcond).astype(dt)
    return c
