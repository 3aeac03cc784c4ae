"""Calling Python from compiled code: ``hlo.pure_callback`` and the callback behind
``hlo.debug.print`` (``debug.py``).

A call traces to one ``host_callback`` op (``hlo.ir.ops``) naming a ``HostFunction`` registered
in ``hlo.ir.callbacks``: flat numpy arrays in, flat results out, checked against the declared
result shapes and dtypes (an error naming the user's line of the call otherwise). The
interpreter and the CPU runtime call it when the program reaches the op, with the run-time
values, in program order; other targets refuse such a program at compile time. Outside a trace
the callback runs at once.

Transformations (as jax's): ``hlo.vmap`` makes a new ``HostFunction`` by ``vmap_method``
(``sequential``: once per example, results stacked; ``expand_dims``: once, unbatched arguments
with a leading axis of size 1; ``broadcast_all``: once, unbatched arguments broadcast to the
batch; ``None``: an error); a debug print is always sequential (one line per example).
``hlo.grad`` through a pure callback's result is an error (``autodiff/vjp_control.py``); a
debug print prints the primal values of the forward pass.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from hlo.ir import callbacks as registry
from hlo.ir.types import TensorType, element_type

from .. import dtypes
from ..base.source_info import SourceLocation, user_location
from ..errors import CallbackError, UnsupportedError
from ..tracing.tracer import Tracer, emit, is_tracing
from ..tree_util import tree_flatten, tree_unflatten

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_NOT_IMPLEMENTED_METHODS = ("legacy_vectorized",)

Aval = Tuple[Tuple[int, ...], np.dtype]


class HostFunction:
    """A registered host callable: ``fn(flat arrays) -> flat results`` and what they must be.

    ``what`` names the API for messages (``hlo.pure_callback``, ``hlo.debug.print``); ``where``
    is the user's line of the call."""

    def __init__(self, fn: Callable[[List[np.ndarray]], Sequence], result_avals: Sequence[Aval],
                 what: str, where: Optional[SourceLocation], vmap_method: Optional[str]):
        self.fn = fn
        self.result_avals = [(tuple(s), np.dtype(d)) for s, d in result_avals]
        self.what = what
        self.where = where
        self.vmap_method = vmap_method

    def __call__(self, args: List[np.ndarray]) -> List[np.ndarray]:
        outs = list(self.fn(args))
        if len(outs) != len(self.result_avals):
            raise CallbackError(f"the callback of {self.what} returned {len(outs)} array(s), "
                                f"expected {len(self.result_avals)} (its result_shape_dtypes)",
                                location=self.where)
        checked = []
        for k, (o, (shape, dt)) in enumerate(zip(outs, self.result_avals)):
            o = np.asarray(o)
            if o.shape != shape or not np.can_cast(o.dtype, dt, "same_kind"):
                raise CallbackError(
                    f"the callback of {self.what} returned {_aval_str(o.shape, o.dtype)} for "
                    f"result {k}, expected {_aval_str(shape, dt)} (its result_shape_dtypes)",
                    location=self.where)
            with np.errstate(over="ignore", invalid="ignore"):  # checked right below
                c = np.asarray(o, dtype=dt, order="C")
            if not np.can_cast(o.dtype, dt, "safe"):
                bad = _lost(o, c)
                if bad is not None:
                    raise CallbackError(
                        f"the callback of {self.what} returned {_aval_str(o.shape, o.dtype)} for "
                        f"result {k}, whose value {o.flat[bad].item()!r} (element {bad}) "
                        f"{dt} cannot hold (expected {_aval_str(shape, dt)}: a result is cast "
                        "only where its values survive)", location=self.where)
            checked.append(c)
        return checked

    def batched(self, size: int, batched: Sequence[bool]) -> "HostFunction":
        """The callback of the op batched by ``hlo.vmap`` over a leading axis of ``size``;
        ``batched`` flags each argument that has that axis."""
        method = self.vmap_method
        if method is None or method in _NOT_IMPLEMENTED_METHODS:
            why = (f"vmap_method={method!r} is not implemented" if method is not None
                   else "it needs vmap_method=")
            raise UnsupportedError(
                f"hlo.vmap of {self.what}: {why}; pass vmap_method= one of "
                f"{', '.join(repr(m) for m in VMAP_METHODS)}", location=self.where)
        out_avals = [((size,) + s, d) for s, d in self.result_avals]
        if method in ("sequential", "sequential_unrolled"):
            def fn(args):
                per = [self([a[i] if b else a for a, b in zip(args, batched)]) for i in range(size)]
                return [np.stack([p[k] for p in per]) if per else np.empty(s, d)
                        for k, (s, d) in enumerate(out_avals)]
        elif method == "expand_dims":
            def fn(args):
                return self.fn([a if b else a[None] for a, b in zip(args, batched)])
        else:  # broadcast_all
            def fn(args):
                return self.fn([a if b else np.broadcast_to(a, (size,) + a.shape)
                                for a, b in zip(args, batched)])
        return HostFunction(fn, out_avals, self.what, self.where, method)


def _lost(o: np.ndarray, c: np.ndarray) -> Optional[int]:
    """The first element (flat index) whose value the narrowing cast ``o`` -> ``c`` lost, or
    None. Integers and booleans must come back exactly (numpy's ``same_value``); a float or
    complex result may round to the nearer value of a narrower type, but a finite value must
    not become infinite, nor an integer lose its value in a float."""
    if c.dtype.kind in "iub" or o.dtype.kind in "iub":
        with np.errstate(all="ignore"):
            back = c.astype(o.dtype)
        diff = (back != o).ravel()
    else:
        diff = (np.isfinite(o) & ~np.isfinite(c)).ravel()
    idx = np.flatnonzero(diff)
    return int(idx[0]) if idx.size else None


def _aval_str(shape, dt) -> str:
    return f"{np.dtype(dt).name}[{','.join(str(d) for d in shape)}]"


def call_host(host: HostFunction, leaves: Sequence) -> List:
    """Emit the ``host_callback`` op of ``host`` on ``leaves`` (traced or concrete values) in
    the current trace, or, outside a trace, call it now. Returns its flat results."""
    if not is_tracing() and not any(isinstance(x, Tracer) for x in leaves):
        return host([np.asarray(x) for x in leaves])
    cid = registry.register(host)
    rtypes = [TensorType(s, element_type(d)) for s, d in host.result_avals]
    return emit(registry.OP_NAME, list(leaves), {"callback_id": cid, "what": host.what},
                result_types=rtypes)


def check_vmap_method(vmap_method) -> Optional[str]:
    if vmap_method is not None and vmap_method not in VMAP_METHODS + _NOT_IMPLEMENTED_METHODS:
        raise ValueError(f"{user_location()}: vmap_method must be one of "
                         f"{', '.join(repr(m) for m in VMAP_METHODS)} or None, got {vmap_method!r}")
    return vmap_method


def pure_callback(callback: Callable, result_shape_dtypes, *args, sharding=None,
                  vmap_method: Optional[str] = None, **kwargs):
    """Call the Python function ``callback(*args, **kwargs)`` from compiled code (jax's
    ``pure_callback``): the arguments (any pytree of arrays) arrive as numpy arrays, and
    ``callback`` returns a pytree of arrays matching ``result_shape_dtypes`` (objects with
    ``.shape`` and ``.dtype``, such as ``hlo.ShapeDtypeStruct``). It runs when the compiled
    program reaches it, in program order; ``vmap_method`` says how ``hlo.vmap`` calls it. It
    has no derivative. Supported on the cpu and interpreter targets."""
    if not callable(callback):
        raise TypeError(f"{user_location()}: hlo.pure_callback needs a callable, got "
                        f"{type(callback).__name__}")
    if sharding is not None:
        raise UnsupportedError("hlo.pure_callback: sharding= is not supported (hlo has no "
                               "sharding)")
    vmap_method = check_vmap_method(vmap_method)
    res_leaves, res_tree = tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in res_leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{user_location()}: hlo.pure_callback's result_shape_dtypes must be "
                            f"a pytree of objects with .shape and .dtype (hlo.ShapeDtypeStruct), "
                            f"got {type(leaf).__name__}")
        avals.append((tuple(int(d) for d in leaf.shape), dtypes.canonicalize(leaf.dtype)))
    leaves, in_tree = tree_flatten((args, kwargs))
    where = user_location()

    def flat_fn(arrays):
        a, kw = tree_unflatten(in_tree, arrays)
        out = callback(*a, **kw)
        got_leaves, got_tree = tree_flatten(out)
        if got_tree != res_tree:
            raise CallbackError(f"the callback of hlo.pure_callback returned a value of structure "
                                f"{got_tree}, expected {res_tree} (its result_shape_dtypes)",
                                location=where)
        return got_leaves

    host = HostFunction(flat_fn, avals, "hlo.pure_callback", where, vmap_method)
    return tree_unflatten(res_tree, call_host(host, leaves))


__all__ = ["pure_callback", "HostFunction", "call_host", "VMAP_METHODS"]
