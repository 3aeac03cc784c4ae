"""Differences of hlo.numpy: diff, ediff1d and cross (static slices and elementwise ops)."""
from __future__ import annotations

from .. import dtypes
from ..errors import ShapeError
from ..lax import structural as ls
from ..lax.common import as_tracer, broadcast_to_shape, canonical_axis, reshape
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer


def _edge(what: str, value, x: Tracer, axis: int) -> Tracer:
    """``prepend``/``append``: a scalar becomes a slab of size 1 along ``axis``."""
    v = as_tracer(value, what=what)
    if v.ndim == 0:
        shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
        return broadcast_to_shape(v, shape, what)
    return v


@api_function
def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None) -> Tracer:
    """The n-th discrete difference along ``axis`` (booleans: ``!=``, as numpy), after
    joining ``prepend`` and ``append`` to the array along that axis."""
    from .shapes import concatenate
    from .ufuncs import not_equal, subtract
    x = as_tracer(a, what="diff")
    if isinstance(n, bool) or int(n) != n:
        raise TypeError(f"diff: n must be an integer, got {n!r}")
    n = int(n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if x.ndim == 0:
        raise ShapeError("diff requires an input that is at least one-dimensional")
    ax = canonical_axis("diff", axis, x.ndim)
    if n == 0:
        return x
    parts = []
    if prepend is not None:
        parts.append(_edge("diff: prepend", prepend, x, ax))
    parts.append(x)
    if append is not None:
        parts.append(_edge("diff: append", append, x, ax))
    if len(parts) > 1:
        x = concatenate(parts, axis=ax)
    op = not_equal if dtypes.is_bool(x.dtype) else subtract
    for _ in range(n):
        m = x.shape[ax]
        if m == 0:
            break
        hi = ls.slice_in_dim(x, 1, m, axis=ax)
        lo = ls.slice_in_dim(x, 0, m - 1, axis=ax)
        x = op(hi, lo)
    return x


@api_function
def ediff1d(ary, to_end=None, to_begin=None) -> Tracer:
    """Differences of consecutive elements of the flattened array, with ``to_begin`` and
    ``to_end`` (flattened, cast to the array's dtype) joined at either end."""
    from .shapes import concatenate
    x = as_tracer(ary, what="ediff1d")
    x = reshape(x, (x.size,))
    parts = [diff(x)]
    if to_begin is not None:
        b = as_tracer(to_begin, x.dtype if dtypes.is_python_scalar(to_begin) else None, "ediff1d")
        parts.insert(0, reshape(b, (b.size,)).astype(x.dtype))
    if to_end is not None:
        e = as_tracer(to_end, x.dtype if dtypes.is_python_scalar(to_end) else None, "ediff1d")
        parts.append(reshape(e, (e.size,)).astype(x.dtype))
    return concatenate(parts) if len(parts) > 1 else parts[0]


@api_function
def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None) -> Tracer:
    """Cross product of 3-vectors (or 2-vectors, taken with a zero third component) along
    ``axisa``/``axisb`` (``axis`` sets all three); the vectors broadcast. Two 2-vectors give
    the scalar third component, as numpy does."""
    from .promotion import promote
    from .shapes import moveaxis, stack
    from .ufuncs import multiply, subtract
    if axis is not None:
        axisa = axisb = axisc = axis
    (x, y), dt, weak = promote("cross", a, b, broadcast=False)
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError("cross: both arguments must have at least one dimension")
    x = moveaxis(x, canonical_axis("cross", axisa, x.ndim), -1)
    y = moveaxis(y, canonical_axis("cross", axisb, y.ndim), -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ShapeError(f"cross: incompatible dimensions for cross product (dimension must be 2 "
                         f"or 3), got vectors of sizes {x.shape[-1]} and {y.shape[-1]}")
    if dtypes.is_bool(dt):
        raise TypeError("cross: boolean arrays are not supported (numpy refuses their subtraction)")

    def comp(t: Tracer, i: int):
        return t[..., i] if i < t.shape[-1] else None

    def mul(p, q):
        return None if p is None or q is None else multiply(p, q)

    def sub(p, q):
        if p is None and q is None:
            return None
        if q is None:
            return p
        if p is None:
            from .ufuncs import negative
            return negative(q)
        return subtract(p, q)

    x0, x1, x2 = (comp(x, i) for i in range(3))
    y0, y1, y2 = (comp(y, i) for i in range(3))
    z = sub(mul(x0, y1), mul(x1, y0))
    if x.shape[-1] == 2 and y.shape[-1] == 2:
        return z
    cx = sub(mul(x1, y2), mul(x2, y1))
    cy = sub(mul(x2, y0), mul(x0, y2))
    from .promotion import promote as _p
    cx, cy, z = _p("cross", cx, cy, z)[0]
    out = stack([cx, cy, z], axis=-1)
    return moveaxis(out, -1, canonical_axis("cross", axisc, out.ndim)) if axisc != -1 else out
