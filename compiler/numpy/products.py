"""Products of hlo.numpy: matmul (``@``), dot, vdot, inner, outer, tensordot, einsum, kron.

All lower to ``dot_general`` (one op per contraction) after dtype promotion. Boolean products
are computed in int32 and converted back (``any(a and b)``), as numpy does.
"""
from __future__ import annotations

import builtins
from typing import Dict, List, Tuple

import numpy as np

from .. import dtypes
from ..errors import ArgumentTypeError, ShapeError, UnsupportedError
from ..lax import contractions as lc
from ..lax import structural as ls
from ..lax.common import (
    broadcast_in_dim,
    broadcast_shapes,
    broadcast_to_shape,
    canonical_axis,
    convert,
    reshape,
    with_weak,
)
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .promotion import promote


def _dot_general(what, a: Tracer, b: Tracer, contract, batch, preferred=None) -> Tracer:
    """dot_general with numpy's bool rule and a shape check naming ``what``."""
    lc_, rc_ = contract
    for x, y in zip(lc_, rc_):
        if a.shape[x] != b.shape[y]:
            raise ShapeError(f"{what}: contracted dimensions differ: {a.aval.str_short()} has size "
                             f"{a.shape[x]} in dimension {x}, {b.aval.str_short()} has size "
                             f"{b.shape[y]} in dimension {y}")
    if dtypes.is_bool(a.dtype):
        r = lc.dot_general(convert(a, dtypes.int32), convert(b, dtypes.int32), (contract, batch))
        return convert(r, dtypes.bool_)
    pref = dtypes.canonicalize(preferred) if preferred is not None else None
    return lc.dot_general(a, b, (contract, batch), preferred_element_type=pref)


@api_function
def matmul(a, b, precision=None, preferred_element_type=None) -> Tracer:
    """Matrix product with numpy's rules: 1-D operands are vectors, leading dimensions are
    batch dimensions that broadcast."""
    (x, y), dt, weak = promote("matmul", a, b, broadcast=False)
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least one dimension, got shapes {x.shape} and {y.shape}")
    xv, yv = x.ndim == 1, y.ndim == 1
    if xv:
        x = reshape(x, (1,) + x.shape)
    if yv:
        y = reshape(y, y.shape + (1,))
    if x.shape[-1] != y.shape[-2]:
        raise ShapeError(f"matmul: the last dimension of a ({a_shape(a)}) must match the "
                         f"second-to-last dimension of b ({a_shape(b)}): {x.shape[-1]} != {y.shape[-2]}")
    if y.ndim == 2:
        # (..., n, k) @ (k, m): one contraction, no batch broadcast needed
        out = _dot_general("matmul", x, y, ((x.ndim - 1,), (0,)), ((), ()), preferred_element_type)
    elif x.ndim == 2:
        # (n, k) @ (..., k, m) -> (n, ..., m) -> (..., n, m)
        out = _dot_general("matmul", x, y, ((1,), (y.ndim - 2,)), ((), ()), preferred_element_type)
        nb = y.ndim - 2
        out = ls.transpose(out, list(range(1, nb + 1)) + [0, nb + 1])
    else:
        batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
        x = broadcast_to_shape(x, batch + x.shape[-2:], "matmul")
        y = broadcast_to_shape(y, batch + y.shape[-2:], "matmul")
        nb = len(batch)
        out = _dot_general("matmul", x, y, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))),
                           preferred_element_type)
    if xv:
        out = reshape(out, out.shape[:-2] + out.shape[-1:])
    if yv:
        out = reshape(out, out.shape[:-1])
    return with_weak(out, weak)


def a_shape(x):
    from ..lax.common import aval_of
    return aval_of(x).shape


@api_function
def dot(a, b, precision=None, preferred_element_type=None) -> Tracer:
    """numpy.dot: scalars multiply; otherwise contract the last axis of a with the
    second-to-last of b (the only axis, for a 1-D b)."""
    (x, y), dt, weak = promote("dot", a, b, broadcast=False)
    if x.ndim == 0 or y.ndim == 0:
        from .ufuncs import multiply
        return multiply(x, y)
    cb = 0 if y.ndim == 1 else y.ndim - 2
    out = _dot_general("dot", x, y, ((x.ndim - 1,), (cb,)), ((), ()), preferred_element_type)
    return with_weak(out, weak)


@api_function
def vdot(a, b, precision=None, preferred_element_type=None) -> Tracer:
    """Dot product of the flattened arrays."""
    (x, y), dt, weak = promote("vdot", a, b, broadcast=False)
    if x.size != y.size:
        raise ShapeError(f"vdot: arrays of sizes {x.size} and {y.size} differ")
    return dot(reshape(x, (x.size,)), reshape(y, (y.size,)), preferred_element_type=preferred_element_type)


@api_function
def inner(a, b, precision=None, preferred_element_type=None) -> Tracer:
    """Contract the last axes of a and b."""
    (x, y), dt, weak = promote("inner", a, b, broadcast=False)
    if x.ndim == 0 or y.ndim == 0:
        from .ufuncs import multiply
        return multiply(x, y)
    return with_weak(_dot_general("inner", x, y, ((x.ndim - 1,), (y.ndim - 1,)), ((), ()),
                                  preferred_element_type), weak)


@api_function
def outer(a, b) -> Tracer:
    """a.ravel()[:, None] * b.ravel()[None, :]."""
    from .ufuncs import multiply
    (x, y), dt, weak = promote("outer", a, b, broadcast=False)
    x = reshape(x, (x.size,))
    y = reshape(y, (y.size,))
    return multiply(broadcast_in_dim(x, (x.size, y.size), [0]), broadcast_in_dim(y, (x.size, y.size), [1]))


@api_function
def tensordot(a, b, axes=2, precision=None, preferred_element_type=None) -> Tracer:
    """Contract the last ``axes`` axes of a with the first of b (an int), or the given axis
    lists (a pair of sequences)."""
    (x, y), dt, weak = promote("tensordot", a, b, broadcast=False)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > x.ndim or n > y.ndim:
            raise ShapeError(f"tensordot: axes={n} does not fit shapes {x.shape} and {y.shape}")
        xa, ya = list(range(x.ndim - n, x.ndim)), list(range(n))
    else:
        try:
            xa, ya = axes
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}") from None
        xa = [xa] if isinstance(xa, (int, np.integer)) else list(xa)
        ya = [ya] if isinstance(ya, (int, np.integer)) else list(ya)
        xa = [canonical_axis("tensordot", v, x.ndim) for v in xa]
        ya = [canonical_axis("tensordot", v, y.ndim) for v in ya]
        if len(xa) != len(ya):
            raise ShapeError(f"tensordot: axes {axes!r} name different numbers of axes")
    return with_weak(_dot_general("tensordot", x, y, (tuple(xa), tuple(ya)), ((), ()), preferred_element_type), weak)


@api_function
def kron(a, b) -> Tracer:
    """Kronecker product."""
    from .ufuncs import multiply
    (x, y), dt, weak = promote("kron", a, b, broadcast=False)
    nd = builtins.max(x.ndim, y.ndim)
    x = reshape(x, (1,) * (nd - x.ndim) + x.shape)
    y = reshape(y, (1,) * (nd - y.ndim) + y.shape)
    big = []
    for p, q in zip(x.shape, y.shape):
        big += [p, q]
    xb = broadcast_in_dim(x, big, [2 * i for i in range(nd)])
    yb = broadcast_in_dim(y, big, [2 * i + 1 for i in range(nd)])
    return reshape(multiply(xb, yb), [p * q for p, q in zip(x.shape, y.shape)])


# --------------------------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------------------------

_ELLIPSIS_LETTERS = "\u0391\u0392\u0393\u0394\u0395\u0396\u0397\u0398\u0399\u039a\u039b\u039c"


def _parse_einsum(subscripts: str, shapes: List[Tuple[int, ...]]):
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
        explicit = True
    else:
        lhs, out, explicit = s, None, False
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"einsum: subscripts {subscripts!r} name {len(terms)} operands, got {len(shapes)}")
    ell_rank = 0
    for t, shp in zip(terms, shapes):
        if "..." in t:
            ell_rank = builtins.max(ell_rank, len(shp) - (len(t) - 3))
    ell = _ELLIPSIS_LETTERS[:ell_rank]
    ins = []
    for t, shp in zip(terms, shapes):
        if "..." in t:
            k = len(shp) - (len(t) - 3)
            if k < 0:
                raise ShapeError(f"einsum: term {t!r} has more indices than operand dimensions {shp}")
            t = t.replace("...", ell[ell_rank - k:] if k else "")
        if len(t) != len(shp):
            raise ShapeError(f"einsum: term {t!r} has {len(t)} indices, but the operand has shape {shp}")
        for c in t:
            if not (c.isalpha()):
                raise ShapeError(f"einsum: invalid index {c!r} in {subscripts!r}")
        ins.append(t)
    if explicit:
        out = out.replace("...", ell)
        for c in out:
            if not any(c in t for t in ins):
                raise ShapeError(f"einsum: output index {c!r} does not appear in the inputs of {subscripts!r}")
        if len(set(out)) != len(out):
            raise ShapeError(f"einsum: output subscripts {out!r} repeat an index")
    else:
        counts: Dict[str, int] = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return ins, out


def _diag_letters(x: Tracer, letters: str) -> Tuple[Tracer, str]:
    """Take diagonals for letters repeated within one operand ("ii" -> "i")."""
    from .shapes import diagonal
    while True:
        seen = {}
        rep = None
        for i, c in enumerate(letters):
            if c in seen:
                rep = (seen[c], i)
                break
            seen[c] = i
        if rep is None:
            return x, letters
        i, j = rep
        if x.shape[i] != x.shape[j]:
            raise ShapeError(f"einsum: repeated index {letters[i]!r} has sizes {x.shape[i]} and {x.shape[j]}")
        x = diagonal(x, 0, i, j)
        letters = "".join(c for k, c in enumerate(letters) if k not in (i, j)) + letters[i]


def _sum_letters(x: Tracer, letters: str, keep: set) -> Tuple[Tracer, str]:
    from .reductions import sum as _sum
    drop = [i for i, c in enumerate(letters) if c not in keep]
    if not drop:
        return x, letters
    x = _sum(x, axis=tuple(drop), dtype=x.dtype)
    return x, "".join(c for i, c in enumerate(letters) if i not in drop)


@api_function
def einsum(subscripts, *operands, optimize="auto", precision=None, preferred_element_type=None) -> Tracer:
    """Einstein summation over ``subscripts`` (e.g. ``"bij,bjk->bik"``; ``...`` and implicit
    output supported). Operands are contracted pairwise from left to right."""
    if not isinstance(subscripts, str):
        raise UnsupportedError("einsum: the interleaved (operand, sublist) form is not supported; "
                               "use a subscripts string")
    if not operands:
        raise ValueError("einsum needs at least one operand")
    ts, dt, weak = promote("einsum", *operands, broadcast=False)
    ins, out = _parse_einsum(subscripts, [t.shape for t in ts])
    sizes: Dict[str, int] = {}
    for t, letters in zip(ts, ins):
        for c, d in zip(letters, t.shape):
            if c in sizes and sizes[c] != d and 1 not in (sizes[c], d):
                raise ShapeError(f"einsum {subscripts!r}: index {c!r} has size {sizes[c]} in one operand "
                                 f"and {d} in another (operand shapes "
                                 f"{', '.join(str(u.shape) for u in ts)})")
            sizes[c] = builtins.max(sizes.get(c, d), d)
    work = []
    for t, letters in zip(ts, ins):
        t, letters = _diag_letters(t, letters)
        target = [sizes[c] for c in letters]
        if list(t.shape) != target:
            t = broadcast_to_shape(t, target, "einsum")
        work.append((t, letters))
    # sum out letters used by a single operand only
    for k in range(len(work)):
        others = set(out).union(*[set(l) for j, (_, l) in enumerate(work) if j != k])
        work[k] = _sum_letters(work[k][0], work[k][1], others)
    acc, la = work[0]
    for k in range(1, len(work)):
        b, lb = work[k]
        rest = set(out).union(*[set(l) for _, l in work[k + 1:]])
        common = [c for c in la if c in lb]
        batch = [c for c in common if c in rest]
        contract = [c for c in common if c not in rest]
        dn = ((tuple(la.index(c) for c in contract), tuple(lb.index(c) for c in contract)),
              (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)))
        res = _dot_general("einsum", acc, b, dn[0], dn[1], preferred_element_type)
        la = "".join(batch) + "".join(c for c in la if c not in common) + "".join(c for c in lb if c not in common)
        acc = res
        acc, la = _sum_letters(acc, la, rest)
    acc, la = _sum_letters(acc, la, set(out))
    if la != out:
        acc = ls.transpose(acc, [la.index(c) for c in out])
    return with_weak(acc, weak)
