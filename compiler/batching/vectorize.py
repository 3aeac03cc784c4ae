"""hlo.numpy.vectorize and hlo.numpy.apply_along_axis: numpy's looping helpers written with
``hlo.vmap`` (as jax.numpy's are), so the function is traced once and batched, not called per
element. They live in the batching layer (they need vmap); ``hlo.numpy`` loads them on first
use."""
from __future__ import annotations

import functools
import re
from typing import List, Optional, Tuple

import numpy as np

from ..errors import ShapeError
from ..numpy.creation import asarray
from ..numpy.shapes import broadcast_to
from .api import vmap

_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"


def _parse_signature(signature: str) -> Tuple[List[Tuple[str, ...]], List[Tuple[str, ...]]]:
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = sig.split("->")

    def cores(s):
        return [tuple(d for d in c.split(",") if d) for c in re.findall(_CORE, s)]
    return cores(ins), cores(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature: Optional[str] = None):
    """A function that applies ``pyfunc`` elementwise (or, with a gufunc ``signature`` such
    as ``"(n),(n)->()"``, to the trailing core dimensions) over broadcast arguments, by vmap.
    ``excluded`` positional indices (and all keyword arguments) are passed through as is."""
    if any(not isinstance(e, int) for e in excluded):
        raise TypeError("vectorize: excluded must hold positional argument indices (keyword arguments "
                        "are never vectorized)")
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        vec_idx = [i for i in range(len(args)) if i not in excluded]
        arrays = [asarray(args[i]) for i in vec_idx]
        cores = in_core if in_core is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"vectorize: the signature {signature!r} takes {len(cores)} array arguments, got "
                            f"{len(arrays)}")
        sizes: dict = {}
        loop_shapes = []
        for a, core in zip(arrays, cores):
            if a.ndim < len(core):
                raise ValueError(f"vectorize: an input with core dimensions {core} has only {a.ndim} dimensions")
            for name, n in zip(core, a.shape[a.ndim - len(core):]):
                if sizes.setdefault(name, n) != n:
                    raise ShapeError(f"vectorize: inconsistent size for core dimension {name!r}: {sizes[name]} "
                                     f"and {n}")
            loop_shapes.append(a.shape[:a.ndim - len(core)])
        loop = tuple(np.broadcast_shapes(*loop_shapes)) if loop_shapes else ()
        arrays = [broadcast_to(a, loop + a.shape[a.ndim - len(c):]) for a, c in zip(arrays, cores)]

        def call(*xs):
            full = list(args)
            for i, x in zip(vec_idx, xs):
                full[i] = x
            return pyfunc(*full, **kwargs)
        f = call
        for _ in loop:
            f = vmap(f)
        out = f(*arrays)
        if out_core is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) != len(out_core):
                raise ValueError(f"vectorize: the function returned {len(outs)} outputs, the signature "
                                 f"{signature!r} has {len(out_core)}")
        return out
    return wrapped


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``func1d`` applied to each 1-D slice of ``arr`` along ``axis`` (by vmap over the other
    axes); its result's dimensions take the place of ``axis``."""
    a = asarray(arr)
    nd = a.ndim
    if not -nd <= axis < nd:
        raise ValueError(f"apply_along_axis: axis {axis} is out of bounds for an array of dimension {nd}")
    axis = axis % nd

    def func(x):
        return func1d(x, *args, **kwargs)
    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(a)
