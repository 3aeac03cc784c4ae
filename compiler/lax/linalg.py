"""hlo.lax.linalg: dense factorizations built from hlo's own ops (no library calls, no host
callbacks), so they trace to IR, run on every target and, where their loops have static trip
counts, differentiate with ``hlo.grad``. Every function takes leading batch dimensions.

The frontends built on them are in ``hlo.numpy.linalg``; ``lu_solve`` solves with ``lu``'s
factors.

- ``lu(a)``: LU with partial pivoting, one ``fori_loop`` over the columns (a rank-1 update of
  the whole matrix per step, masked to the trailing block). Returns ``(lu, pivots,
  permutation, sign)``: L (unit diagonal, below) and U packed in one matrix as LAPACK does,
  the row swapped in at each step, the resulting row permutation, and the permutation's sign.
- ``cholesky(a)``: right-looking Cholesky of the lower triangle, one ``fori_loop``; not
  positive definite gives NaNs (as jax), never an exception.
- ``triangular_solve(a, b, ...)``: substitution one row per ``fori_loop`` step (jax's signature).
- ``qr(a, full_matrices)``: Householder reflections (LAPACK's sign convention: a reflection is
  skipped when the column below the diagonal is already zero).
- ``eigh(a)``: parallel cyclic Jacobi. Each round of a sweep rotates ``n/2`` disjoint index pairs
  at once (the round-robin "circle" pairing; odd ``n`` is padded with an inert zero row and
  column), applied to rows and columns as O(n^2) gathers and multiply-adds. A pair whose
  entry is already negligible (``|a_pq| <= eps * sqrt(|a_pp a_qq|)``) is not rotated, so
  rounding noise does not keep rotating; sweeps run in a ``while_loop`` until every pair is negligible (at most
  ``_MAX_SWEEPS``). Eigenvalues ascend.
- ``svd(a, full_matrices, compute_uv)``: one-sided Jacobi (Hestenes) with the same pairing on
  the columns of ``A`` (of ``A^T`` when it is wide), then a Householder QR of the orthogonalized
  columns to give ``U`` orthonormal columns even for zero singular values and the complete
  basis for ``full_matrices``. More accurate than an eigendecomposition of ``A^T A``.

``eigh`` and ``svd`` iterate in float64 whatever the input's float type (in float32 the many
rotations would cost about two decimal digits: ~1e-5 relative error at n = 64 instead of ~1e-7)
and round the results once. They stop on convergence (a ``while_loop`` with a data-dependent
condition, which hlo.grad cannot differentiate), so they run on ``stop_gradient`` of the input
and add jax's analytic JVP, written as a tangent linear in ``x - stop_gradient(x)`` (zero in
value): hlo.grad then differentiates that expression. ``lu``, ``cholesky``,
``triangular_solve`` and ``qr`` differentiate through their loops.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..autodiff.api import stop_gradient
from ..errors import DTypeError, ShapeError
from ..numpy import creation, products, reductions, shapes, sorting, ufuncs
from ..tracing.api_util import api_function
from .common import as_tracer
from .control_flow import fori_loop, while_loop
from .elementwise import conj
from .structural import dynamic_slice_in_dim, dynamic_update_slice_in_dim

_MAX_SWEEPS = 30


def _require_float(what: str, x) -> None:
    if not dtypes.is_float(x.dtype):
        raise DTypeError(f"{what}: expected a floating-point array, got {x.dtype}")


def _require_matrix(what: str, x, square: bool = True) -> None:
    if x.ndim < 2:
        raise ShapeError(f"{what}: expected an array with at least 2 dimensions (..., M, N), got "
                         f"shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{what}: expected square matrices in the last two dimensions, got shape "
                         f"{x.shape}")


def _iotas(x, n_rows: int, n_cols: int):
    """Row and column indices of an (n_rows, n_cols) plane, broadcastable against ``x``."""
    rows = creation.arange(n_rows, dtype=np.int32)[:, None]
    cols = creation.arange(n_cols, dtype=np.int32)[None, :]
    return rows, cols


def _row(x, k):
    return dynamic_slice_in_dim(x, k, 1, axis=x.ndim - 2)


def _col(x, k):
    return dynamic_slice_in_dim(x, k, 1, axis=x.ndim - 1)


# --------------------------------------------------------------------------------------------
# LU, Cholesky, triangular solves
# --------------------------------------------------------------------------------------------

@api_function
def lu(a):
    """LU with partial pivoting of square matrices: ``(lu, pivots, permutation, sign)`` with
    ``a[..., permutation, :] == L @ U`` and ``sign`` = the permutation's determinant sign."""
    x = as_tracer(a, what="lu")
    _require_float("lu", x)
    _require_matrix("lu", x)
    n = x.shape[-1]
    batch = x.shape[:-2]
    rows, cols = _iotas(x, n, n)
    rvec = creation.arange(n, dtype=np.int32)
    perm0 = shapes.broadcast_to(rvec, batch + (n,))
    piv0 = creation.zeros(batch + (n,), np.int32)
    sign0 = creation.ones(batch, x.dtype)

    def step(k, carry):
        A, perm, piv, sign = carry
        col = _col(A, k)[..., 0]
        mag = ufuncs.where(rvec >= k, ufuncs.abs(col), -1.0)
        p = reductions.argmax(mag, axis=-1).astype(np.int32)
        row_k = _row(A, k)
        row_p = shapes.take_along_axis(A, p[..., None, None], axis=-2, mode="clip")
        is_k, is_p = rows == k, rows == p[..., None, None]
        A = ufuncs.where(is_k, row_p, ufuncs.where(is_p, row_k, A))
        perm_k = _col(perm[..., None, :], k)[..., 0, 0]
        perm_p = shapes.take_along_axis(perm, p[..., None], axis=-1, mode="clip")[..., 0]
        perm = ufuncs.where(rvec == k, perm_p[..., None], ufuncs.where(rvec == p[..., None], perm_k[..., None], perm))
        piv = ufuncs.where(rvec == k, p[..., None], piv)
        sign = ufuncs.where(p == k, sign, -sign)
        pivot = _col(row_p, k)[..., 0, 0]
        col = _col(A, k)[..., 0]
        safe = ufuncs.where(pivot == 0, 1.0, pivot).astype(A.dtype)
        l = ufuncs.where((rvec > k) & (pivot != 0)[..., None], col / safe[..., None], 0.0).astype(A.dtype)
        u = ufuncs.where(rvec > k, row_p[..., 0, :], 0.0).astype(A.dtype)
        A = A - l[..., :, None] * u[..., None, :]
        A = ufuncs.where((rows > k) & (cols == k), l[..., :, None], A)
        return A, perm, piv, sign

    lu_, perm, piv, sign = fori_loop(0, n, step, (x, perm0, piv0, sign0))
    return lu_, piv, perm, sign


@api_function
def cholesky(a):
    """Lower Cholesky factor of symmetric positive-definite matrices (only the lower triangle
    is read); NaNs where the matrix is not positive definite."""
    x = as_tracer(a, what="cholesky")
    _require_float("cholesky", x)
    _require_matrix("cholesky", x)
    n = x.shape[-1]
    rows, cols = _iotas(x, n, n)
    rvec = creation.arange(n, dtype=np.int32)
    x = shapes.tril(x)

    def step(k, A):
        col = _col(A, k)[..., 0]
        akk = _row(_col(A, k), k)[..., 0, 0]
        lkk = ufuncs.sqrt(akk)
        l = ufuncs.where(rvec > k, col / lkk[..., None], 0.0).astype(A.dtype)
        A = A - ufuncs.where((rows > k) & (cols > k), l[..., :, None] * l[..., None, :], 0.0).astype(A.dtype)
        newcol = ufuncs.where(rvec == k, lkk[..., None], l).astype(A.dtype)
        return ufuncs.where(cols == k, newcol[..., :, None], A)

    return shapes.tril(fori_loop(0, n, step, x))


def _solve_lower(L, B, unit: bool):
    """X with L X = B (L lower triangular (..., n, n), B (..., n, k))."""
    n = L.shape[-1]

    def step(i, X):
        li = _row(L, i)
        s = products.matmul(li, X)
        xi = _row(B, i) - s
        if not unit:
            xi = xi / _col(li, i)
        return dynamic_update_slice_in_dim(X, xi.astype(X.dtype), i, X.ndim - 2)

    return fori_loop(0, n, step, creation.zeros_like(B))


@api_function
def triangular_solve(a, b, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """jax.lax.linalg.triangular_solve: X with ``op(a) @ X = b`` (``left_side``) or
    ``X @ op(a) = b``, ``op`` the transpose when ``transpose_a``, conjugated when
    ``conjugate_a`` (complex ``a``); only ``a``'s ``lower`` (or upper) triangle is read. Batch
    dimensions must match."""
    A = as_tracer(a, what="triangular_solve")
    B = as_tracer(b, what="triangular_solve")
    if not dtypes.is_complex(A.dtype):
        _require_float("triangular_solve", A)
    _require_matrix("triangular_solve", A)
    if B.dtype != A.dtype:
        raise DTypeError(f"triangular_solve: a and b must have the same dtype, got {A.dtype} and {B.dtype}")
    if B.ndim < 2 or B.shape[:-2] != A.shape[:-2]:
        raise ShapeError(f"triangular_solve: b must be (..., M, N) with a's batch dimensions, got "
                         f"shapes {A.shape} and {B.shape}")
    n = A.shape[-1]
    if B.shape[-2 if left_side else -1] != n:
        raise ShapeError(f"triangular_solve: shapes {A.shape} and {B.shape} do not fit "
                         f"(left_side={left_side})")
    A = shapes.tril(A) if lower else shapes.triu(A)
    if conjugate_a:
        A = conj(A)
    if transpose_a:
        A = shapes.matrix_transpose(A)
        lower = not lower
    if not left_side:  # X A = B  <=>  A^T X^T = B^T
        A, B, lower = shapes.matrix_transpose(A), shapes.matrix_transpose(B), not lower
    if not lower:  # reverse the order of the unknowns: an upper system becomes a lower one
        A, B = shapes.flip(A, (-2, -1)), shapes.flip(B, -2)
        X = shapes.flip(_solve_lower(A, B, unit_diagonal), -2)
    else:
        X = _solve_lower(A, B, unit_diagonal)
    return X if left_side else shapes.matrix_transpose(X)


@api_function
def lu_solve(lu_, permutation, b):
    """X with ``a @ X = b`` from ``lu(a)``'s factors; b is (..., n, k)."""
    pb = shapes.take_along_axis(b, shapes.broadcast_to(permutation[..., :, None], b.shape[:-1] + (1,)),
                             axis=-2, mode="clip")
    y = triangular_solve(lu_, pb, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


# --------------------------------------------------------------------------------------------
# QR
# --------------------------------------------------------------------------------------------

@api_function
def qr(a, full_matrices: bool = True):
    """Householder QR: ``(q, r)``, q (..., m, m) and r (..., m, n) when ``full_matrices``,
    else q (..., m, k) and r (..., k, n) with k = min(m, n)."""
    x = as_tracer(a, what="qr")
    _require_float("qr", x)
    _require_matrix("qr", x, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    batch = x.shape[:-2]
    rvec = creation.arange(m, dtype=np.int32)
    q0 = shapes.broadcast_to(creation.eye(m, dtype=x.dtype), batch + (m, m))

    def step(j, carry):
        A, Q = carry
        col = _col(A, j)[..., 0]
        alpha = _row(_col(A, j), j)[..., 0, 0]
        below = ufuncs.where(rvec > j, col, 0.0).astype(A.dtype)
        sub2 = reductions.sum(below * below, axis=-1)
        norm = ufuncs.sqrt(alpha * alpha + sub2)
        beta = ufuncs.where(alpha >= 0, -norm, norm)
        v = ufuncs.where(rvec == j, (alpha - beta)[..., None], below).astype(A.dtype)
        vv = reductions.sum(v * v, axis=-1)
        scale = ufuncs.where(sub2 == 0, 0.0, 2.0 / ufuncs.where(vv == 0, 1.0, vv)).astype(A.dtype)
        vs = v * scale[..., None]
        A = A - vs[..., :, None] * products.matmul(v[..., None, :], A)
        Q = Q - products.matmul(Q, v[..., :, None]) * vs[..., None, :]
        return A, Q

    R, Q = fori_loop(0, k, step, (x, q0))
    R = shapes.triu(R)
    if not full_matrices:
        Q, R = Q[..., :, :k], R[..., :k, :]
    return Q, R


# --------------------------------------------------------------------------------------------
# Jacobi methods: eigh and svd
# --------------------------------------------------------------------------------------------

def _partners(r, m: int):
    """The partner of every index in round ``r`` of the circle pairing of ``m`` (even)
    indices: index 0 stays, the others rotate; slot i meets slot m-1-i."""
    i = creation.arange(m, dtype=np.int32)
    # slot of each index (inverse of slot -> index: s(0) = 0, s(j) = (j - 1 + r) % (m-1) + 1)
    slot = ufuncs.where(i == 0, 0, (i - 1 - r) % (m - 1) + 1)
    other = m - 1 - slot
    return ufuncs.where(other == 0, 0, (other - 1 + r) % (m - 1) + 1).astype(np.int32)


def _rotations(app, aqq, apq, first, active):
    """Per index: (c, s) of the Jacobi rotation zeroing ``apq`` of [[app, apq], [apq, aqq]]
    (Golub & Van Loan's sym.schur2), with the index in the role of p; ``first`` says it is
    the lower index of its pair, which breaks the tie tau = 0 consistently. Where not
    ``active`` (``apq`` already negligible) the rotation is the identity."""
    dt = app.dtype
    nz = (apq != 0) & active
    tau = (aqq - app) / (2 * ufuncs.where(nz, apq, 1.0).astype(dt))
    at = ufuncs.abs(tau)
    big = at > 1
    root = ufuncs.where(big, at * ufuncs.sqrt(1 + ufuncs.square(1 / ufuncs.where(big, at, 1.0))),
                     ufuncs.sqrt(1 + ufuncs.square(ufuncs.where(big, 0.0, at))))
    sgn = ufuncs.where(tau > 0, 1.0, ufuncs.where(tau < 0, -1.0, ufuncs.where(first, 1.0, -1.0)))
    t = (sgn / (at + root)).astype(dt)
    c = (1 / ufuncs.sqrt(1 + t * t)).astype(dt)
    s = t * c
    return ufuncs.where(nz, c, 1.0).astype(dt), ufuncs.where(nz, s, 0.0).astype(dt)


def _rotate_columns(x, c, s, partner):
    """``x @ J`` for the rotation matrix J with ``J[i, i] = c[i]`` and ``J[i, partner[i]] =
    s[i]``: column j becomes ``c[j] x[:, j] + s[p(j)] x[:, p(j)]``, O(n^2) with one gather."""
    sp = shapes.take(s, partner, axis=-1, mode="clip")
    return x * c[..., None, :] + shapes.take(x, partner, axis=-1, mode="clip") * sp[..., None, :]


def _rotate_rows(x, c, s, partner):
    """``J^T @ x``: row i becomes ``c[i] x[i, :] + s[p(i)] x[p(i), :]``."""
    sp = shapes.take(s, partner, axis=-1, mode="clip")
    return x * c[..., :, None] + shapes.take(x, partner, axis=-2, mode="clip") * sp[..., :, None]


def _pad_even(x, axes_to_pad):
    """Pad the given trailing axes by one zero when their size is odd."""
    widths = [(0, 0)] * x.ndim
    for ax in axes_to_pad:
        widths[ax] = (0, 1)
    return shapes.pad(x, widths)


def _sweeps(converged, sweep, carry):
    """``while_loop`` over sweeps until ``converged(carry)`` or ``_MAX_SWEEPS``."""

    def cond(state):
        i, c = state
        return (i < _MAX_SWEEPS) & ~converged(c)

    def body(state):
        i, c = state
        return i + 1, sweep(c)

    return while_loop(cond, body, (np.int32(0), carry))[1]


def _guarded_inverse(d):
    """1/d, and 0 where d == 0."""
    z = d == 0
    return ufuncs.where(z, 0.0, 1 / ufuncs.where(z, 1.0, d)).astype(d.dtype)


def _stopped(x):
    """``(stop_gradient(x), x - stop_gradient(x))``: the value the iteration runs on, and a
    zero whose derivative is x's. Adding a tangent expression linear in the zero to a result
    gives it the analytic derivative without differentiating the iteration."""
    xs = stop_gradient(x)
    return xs, x - xs


@api_function
def eigh(a, lower: bool = True, sort_eigenvalues: bool = True):
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices, reading the
    ``lower`` (or upper) triangle: ``(v, w)`` as jax.lax.linalg.eigh returns them.
    Differentiable: the results carry jax's eigh JVP (``dw = diag(V^T dA V)``, ``dV = V (F o
    V^T dA V)``, ``F_ij = 1 / (w_j - w_i)``, 0 for equal eigenvalues) on top of the iteration."""
    x = as_tracer(a, what="eigh")
    _require_float("eigh", x)
    _require_matrix("eigh", x)
    n = x.shape[-1]
    if n == 0:
        return creation.zeros(x.shape, x.dtype), creation.zeros(x.shape[:-2] + (0,), x.dtype)
    tri = shapes.tril(x, -1) if lower else shapes.triu(x, 1)
    x = tri + shapes.matrix_transpose(tri) + shapes.diagonal(x, 0, -2, -1)[..., :, None] * creation.eye(n, dtype=x.dtype)
    xs, dx = _stopped(x)
    v, w = _eigh_jacobi(xs.astype(np.float64), sort_eigenvalues)
    v, w = v.astype(x.dtype), w.astype(x.dtype)
    vt = shapes.matrix_transpose(v)
    vdv = products.matmul(vt, products.matmul(dx, v))
    F = _guarded_inverse(w[..., None, :] - w[..., :, None])
    return v + products.matmul(v, F * vdv), w + shapes.diagonal(vdv, 0, -2, -1)


def _eigh_jacobi(x, sort_eigenvalues: bool):
    """The Jacobi iteration of ``eigh`` on symmetric float64 matrices."""
    n = x.shape[-1]
    batch = x.shape[:-2]
    m = n + (n % 2)
    A0 = _pad_even(x, (x.ndim - 2, x.ndim - 1)) if m != n else x
    V0 = shapes.broadcast_to(creation.eye(m, dtype=x.dtype), batch + (m, m))
    eps = float(dtypes.finfo(x.dtype).eps)
    offmask = ~creation.eye(m, dtype=bool)
    ivec = creation.arange(m, dtype=np.int32)
    floor = (eps * eps) * ufuncs.sqrt(reductions.sum(A0 * A0, axis=(-2, -1)))

    def negligible(apq, app, aqq):
        """An off-diagonal entry below ``eps * sqrt(|app aqq|)`` (or a tiny floor): no
        rotation; a sweep without rotations ends the iteration."""
        fl = floor.reshape(floor.shape + (1,) * (apq.ndim - floor.ndim))
        return ufuncs.abs(apq) <= ufuncs.maximum(eps * ufuncs.sqrt(ufuncs.abs(app * aqq)), fl)

    def rotate(r, carry):
        A, V = carry
        partner = _partners(r, m)
        d = shapes.diagonal(A, 0, -2, -1)
        dq = shapes.take(d, partner, axis=-1, mode="clip")
        apq = shapes.take_along_axis(A, shapes.broadcast_to(partner[:, None], A.shape[:-1] + (1,)),
                                  axis=-1, mode="clip")[..., 0]
        c, s = _rotations(d, dq, apq, ivec < partner, ~negligible(apq, d, dq))
        A = _rotate_rows(_rotate_columns(A, c, s, partner), c, s, partner)
        A = (A + shapes.matrix_transpose(A)) * 0.5
        return A, _rotate_columns(V, c, s, partner)

    def sweep(carry):
        return fori_loop(0, m - 1, rotate, carry)

    def converged(carry):
        A, _ = carry
        d = shapes.diagonal(A, 0, -2, -1)
        small = negligible(A, d[..., :, None], d[..., None, :])
        return reductions.all(~offmask | small)

    A, V = _sweeps(converged, sweep, (A0, V0))
    w = shapes.diagonal(A, 0, -2, -1)[..., :n]
    V = V[..., :n, :n]
    if sort_eigenvalues:
        order = sorting.argsort(w, axis=-1)
        w = shapes.take_along_axis(w, order, axis=-1)
        V = shapes.take_along_axis(V, shapes.broadcast_to(order[..., None, :], V.shape), axis=-1)
    return V, w


@api_function
def svd(a, full_matrices: bool = True, compute_uv: bool = True):
    """Singular value decomposition ``(u, s, vh)`` (s descending), or ``s`` alone when not
    ``compute_uv``; u is (..., m, m) when ``full_matrices`` else (..., m, k).
    Differentiable (jax's SVD JVP on top of the iteration) except ``u`` and ``vh`` of a
    non-square matrix with ``full_matrices``, whose extra columns have no derivative (as in
    jax: hlo.grad refuses it, naming the loop)."""
    x = as_tracer(a, what="svd")
    _require_float("svd", x)
    _require_matrix("svd", x, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    if k == 0 or (compute_uv and full_matrices and m != n):
        out = _svd_jacobi(x.astype(np.float64), full_matrices, compute_uv)
        return out.astype(x.dtype) if not compute_uv else tuple(t.astype(x.dtype) for t in out)
    xs, dx = _stopped(x)
    u, s, vh = (t.astype(x.dtype) for t in _svd_jacobi(xs.astype(np.float64), False, True))
    ut, v = shapes.matrix_transpose(u), shapes.matrix_transpose(vh)
    dS = products.matmul(ut, products.matmul(dx, v))
    s_new = s + shapes.diagonal(dS, 0, -2, -1)
    if not compute_uv:
        return s_new
    sd = s[..., None, :]
    F = _guarded_inverse((sd + shapes.matrix_transpose(sd)) * (sd - shapes.matrix_transpose(sd)))
    s_inv = _guarded_inverse(s)
    dSS, SdS = sd * dS, shapes.matrix_transpose(sd) * dS
    diag_part = 0.5 * (dS - shapes.matrix_transpose(dS)) * (creation.eye(k, dtype=x.dtype) * s_inv[..., None, :])
    du = products.matmul(u, F * (dSS + shapes.matrix_transpose(dSS)) + diag_part)
    dv = products.matmul(v, F * (SdS + shapes.matrix_transpose(SdS)))
    if m > n:
        dav = products.matmul(dx, v)
        du = du + (dav - products.matmul(u, products.matmul(ut, dav))) * s_inv[..., None, :]
    if n > m:
        dau = products.matmul(shapes.matrix_transpose(dx), u)
        dv = dv + (dau - products.matmul(v, products.matmul(vh, dau))) * s_inv[..., None, :]
    return u + du, s_new, vh + shapes.matrix_transpose(dv)


def _svd_jacobi(x, full_matrices: bool, compute_uv: bool):
    """The one-sided Jacobi iteration of ``svd`` on float64 matrices."""
    m0, n0 = x.shape[-2:]
    wide = n0 > m0
    if wide:
        x = shapes.matrix_transpose(x)
    m, n = x.shape[-2:]  # m >= n
    batch = x.shape[:-2]
    if n == 0:
        s = creation.zeros(batch + (0,), x.dtype)
        if not compute_uv:
            return s
        u = shapes.broadcast_to(creation.eye(m, dtype=x.dtype), batch + (m, m if full_matrices else 0))
        vh = creation.zeros(batch + (0, 0), x.dtype)
        return (shapes.matrix_transpose(vh), s, shapes.matrix_transpose(u)) if wide else (u, s, vh)
    p = n + (n % 2)
    U0 = _pad_even(x, (x.ndim - 1,)) if p != n else x
    V0 = shapes.broadcast_to(creation.eye(p, dtype=x.dtype), batch + (p, p))
    eps = float(dtypes.finfo(x.dtype).eps)
    ivec = creation.arange(p, dtype=np.int32)
    offmask = ~creation.eye(p, dtype=bool)
    tol = eps * float(np.sqrt(m))

    def rotate(r, carry):
        U, V = carry
        partner = _partners(r, p)
        alpha = reductions.sum(U * U, axis=-2)
        Up = shapes.take(U, partner, axis=-1, mode="clip")
        gamma = reductions.sum(U * Up, axis=-2)
        ap = shapes.take(alpha, partner, axis=-1, mode="clip")
        c, s = _rotations(alpha, ap, gamma, ivec < partner, ufuncs.abs(gamma) > tol * ufuncs.sqrt(alpha * ap))
        return _rotate_columns(U, c, s, partner), _rotate_columns(V, c, s, partner)

    def sweep(carry):
        return fori_loop(0, p - 1, rotate, carry)

    def converged(carry):
        U, _ = carry
        G = products.matmul(shapes.matrix_transpose(U), U)
        d = shapes.diagonal(G, 0, -2, -1)
        scale = d[..., :, None] * d[..., None, :]
        return reductions.all(~offmask | (ufuncs.abs(G) <= tol * ufuncs.sqrt(scale)))

    U, V = _sweeps(converged, sweep, (U0, V0))
    U, V = U[..., :n], V[..., :n, :n]
    s = ufuncs.sqrt(reductions.sum(U * U, axis=-2))
    order = sorting.argsort(-s, axis=-1)
    s = shapes.take_along_axis(s, order, axis=-1)
    if not compute_uv:
        return s
    U = shapes.take_along_axis(U, shapes.broadcast_to(order[..., None, :], U.shape), axis=-1)
    V = shapes.take_along_axis(V, shapes.broadcast_to(order[..., None, :], V.shape), axis=-1)
    Q, R = qr(U, full_matrices=True)
    rd = shapes.diagonal(R, 0, -2, -1)
    sign = ufuncs.where(rd < 0, -1.0, 1.0).astype(x.dtype)
    sign = shapes.concatenate([sign, creation.ones(batch + (m - n,), x.dtype)], axis=-1)
    Q = Q * sign[..., None, :]
    u = Q if full_matrices else Q[..., :, :n]
    vh = shapes.matrix_transpose(V)
    if wide:
        return shapes.matrix_transpose(vh), s, shapes.matrix_transpose(u)
    return u, s, vh
