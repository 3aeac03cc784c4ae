"""The associative (prefix) scan as ops of hlo's table, shared by ``hlo.lax``'s running reductions
(``lax.cumsum`` & co., on tracers) and the ``window-scan`` pass (a ``reduce_window`` that is a
prefix scan, on IR values).

An inclusive prefix ``op`` along ``ax`` (``op`` associative) is built work-efficiently, as jax's
``associative_scan`` does: the scan of the pairs (``op`` of the elements at even and odd
positions) gives the odd positions; one more ``op`` each (the previous odd result with the
next even element) gives the even ones; the two are interleaved. log2(n) levels of strided
slices, O(n) work. Each level's pairs and its interleaved result go through an
``optimization_barrier``: a level reads its input at two strided positions, so fused into its
readers every level doubled the work of the one below (one kernel of O(n^2) work: a 2^16 scan
did not finish compiling).

The construction is written against ``ScanOps``: how to emit an op on the caller's values
(tracers or IR values) and read a value's shape and dtype.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence


class ScanOps:
    """What the scan needs from its caller; subclasses emit ops on their kind of values."""

    def shape(self, v) -> Sequence[int]:
        raise NotImplementedError

    def is_bool(self, v) -> bool:
        raise NotImplementedError

    def emit(self, name: str, operands: Sequence[Any], attrs: dict) -> Any:
        """One op of hlo's table with one result, its type inferred."""
        raise NotImplementedError

    def zero(self, like) -> Any:
        """A rank-0 zero (False for bool) of ``like``'s dtype."""
        raise NotImplementedError


def _slice_axis(E: ScanOps, x, ax: int, start: int, limit: int, stride: int = 1):
    shape = list(E.shape(x))
    st, li, sd = [0] * len(shape), shape, [1] * len(shape)
    st[ax], li[ax], sd[ax] = start, limit, stride
    attrs = {"start_indices": st, "limit_indices": li}
    if stride != 1:
        attrs["strides"] = sd
    return E.emit("slice", [x], attrs)


def _interleave(E: ScanOps, even, odd, ax: int):
    """even[0], odd[0], even[1], odd[1], ... along ``ax`` (``even`` as long as ``odd`` or one
    longer): each padded with zeros between its elements, then added (or-ed for bool): exact,
    the other term being zero (but for the sign of a zero sum)."""
    same = E.shape(even)[ax] == E.shape(odd)[ax]
    zero = E.zero(even)
    rank = len(E.shape(even))

    def spread(t, lo, hi):
        cfg = [[0, 0, 0] for _ in range(rank)]
        cfg[ax] = [lo, hi, 1]
        return E.emit("pad", [t, zero], {"edge_padding_low": [c[0] for c in cfg],
                                         "edge_padding_high": [c[1] for c in cfg],
                                         "interior_padding": [c[2] for c in cfg]})
    a, b = spread(even, 0, 1 if same else 0), spread(odd, 1, 0 if same else 1)
    return E.emit("or" if E.is_bool(even) else "add", [a, b], {})


def _kept(E: ScanOps, t):
    return E.emit("optimization_barrier", [t], {})


def associative_scan(E: ScanOps, op: Callable[[Any, Any], Any], x, ax: int):
    """Inclusive prefix ``op`` along ``ax`` of ``x`` (``op(a, b)`` elementwise, associative, ``a``
    the earlier elements): see the module docstring."""
    n = E.shape(x)[ax]
    if n < 2:
        return x
    pairs = _kept(E, op(_slice_axis(E, x, ax, 0, n - 1, 2), _slice_axis(E, x, ax, 1, n, 2)))
    odd = associative_scan(E, op, pairs, ax)
    m = E.shape(odd)[ax]
    first = _slice_axis(E, x, ax, 0, 1)
    if n > 2:
        rest = _slice_axis(E, x, ax, 2, n, 2)
        even = op(_slice_axis(E, odd, ax, 0, m - 1) if n % 2 == 0 else odd, rest)
        even = E.emit("concatenate", [first, even], {"dimension": ax})
    else:
        even = first
    return _kept(E, _interleave(E, even, odd, ax))


def scan(E: ScanOps, op: Callable[[Any, Any], Any], x, ax: int, reverse: bool = False):
    """``associative_scan``; with ``reverse``, from the end of ``ax`` (the scan of the reversed
    array, reversed: ``op``'s first argument then holds the later elements)."""
    if not reverse:
        return associative_scan(E, op, x, ax)
    flip = lambda t: E.emit("reverse", [t], {"dimensions": [ax]})
    return flip(associative_scan(E, op, flip(x), ax))
