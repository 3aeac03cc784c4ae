"""``hlo.vmap``: jax.vmap's signature and semantics, as a transformation of the traced program.

The function is traced once per example (``trace_region`` with the mapped arguments' per-example
shapes; unmapped arguments are passed as they are), then the batching interpreter replays that
region into the current trace with every mapped value carrying a leading batch dimension. The
result is ordinary traced IR of batched ops, so ``vmap`` composes with ``jit``, ``grad`` and
itself in any order. Outside a trace the call is compiled on its own, cached per signature.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional

from ..autodiff.api import _arg_name, _EagerCache
from ..base.boundary import api_boundary
from ..base.source_info import function_name, user_location
from ..errors import ArgumentTypeError, ShapeError
from ..tracing.abstract import ShapedArray
from ..tracing.tracer import Tracer, is_tracing, lift, trace_region
from ..tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten
from . import (
    rules_collectives,
    rules_control,
    rules_elementwise,
    rules_host,
    rules_indexing,
    rules_reduce,
    rules_shape,
)
from .interpreter import Env, batch_ops
from .table import batched, move_axis


def _is_axis(a) -> bool:
    return a is None or (isinstance(a, int) and not isinstance(a, bool))


def _check_spec(api: str, what: str, spec) -> None:
    leaves, _ = tree_flatten(spec, is_leaf=lambda x: x is None)
    for a in leaves:
        if not _is_axis(a):
            raise ArgumentTypeError(f"{api}: {what} must be an int, None, or a (nested) tuple/list/"
                                    f"dict of them, got {a!r} of type {type(a).__name__}",
                                    location=user_location())


def broadcast_prefix(api: str, what: str, spec, tree, tree_label: str) -> List[Optional[int]]:
    """One axis per leaf of ``tree``: ``spec`` is an axis or a tree prefix of ``tree``."""
    _check_spec(api, what, spec)
    leaves = tree_flatten_with_path(tree)[0]
    if _is_axis(spec):
        return [spec] * len(leaves)
    spec_leaves = tree_flatten_with_path(spec, is_leaf=lambda x: x is None)[0]
    out = []
    for path, _ in leaves:
        hit = [a for p, a in spec_leaves if tuple(path[:len(p)]) == tuple(p)]
        if len(hit) != 1:
            raise ArgumentTypeError(
                f"{api}: {what} specification must be a tree prefix of the corresponding value, "
                f"got specification {spec!r} for value tree {tree_flatten(tree)[1]} ({tree_label}"
                f"{keystr(path)} has no axis in it)", location=user_location())
        out.append(hit[0])
    return out


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: Optional[int] = None,
         axis_name=None, spmd_axis_name=None) -> Callable:
    """Vectorize ``fun`` over the axes ``in_axes`` of its positional arguments (jax.vmap)."""
    if not callable(fun):
        raise TypeError(f"vmap expects a callable, got {type(fun).__name__}")
    if axis_name is not None or spmd_axis_name is not None:
        raise NotImplementedError("hlo.vmap: axis_name (collectives over the mapped axis) is not "
                                  "supported by hlo yet")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if axis_size is not None and (not isinstance(axis_size, int) or axis_size < 0):
        raise TypeError(f"hlo.vmap: axis_size must be a non-negative int, got {axis_size!r}")
    name = function_name(fun)
    api = f"hlo.vmap({name})"
    _check_spec(api, "in_axes", in_axes)
    _check_spec(api, "out_axes", out_axes)
    if not isinstance(in_axes, (int, tuple)) and in_axes is not None:
        raise TypeError(f"{api}: in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, got {in_axes!r}")

    def traced(*args, **kwargs):
        return _vmap_traced(fun, api, in_axes, out_axes, axis_size, args, kwargs)

    eager = _EagerCache(traced, f"vmap_{name}")

    @api_boundary
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ArgumentTypeError(
                f"{api}: in_axes is a tuple of length {len(in_axes)}, but the function was called "
                f"with {len(args)} positional argument(s); in_axes needs one entry per argument",
                location=user_location())
        if is_tracing():
            return traced(*args, **kwargs)
        return eager(args, kwargs, range(len(args)))

    wrapper.__wrapped__ = fun  # type: ignore[attr-defined]  # (a function's attribute)
    return wrapper


def _vmap_traced(fun, api, in_axes, out_axes, axis_size, args, kwargs):
    axes = broadcast_prefix(api, "in_axes", in_axes, tuple(args), "args")
    axes += [0] * len(tree_flatten(kwargs)[0])  # keyword arguments are mapped over axis 0
    leaves_paths, in_tree = tree_flatten_with_path((tuple(args), dict(kwargs)))
    sizes, mapped = [], []
    for (path, leaf), ax in zip(leaves_paths, axes):
        if ax is None:
            continue
        label = _arg_name(fun, path[1].idx, path[2:]) if path[0].idx == 0 else f"kwargs{keystr(path[1:])}"
        try:
            t = lift(leaf)
        except Exception:
            raise ArgumentTypeError(f"{api}: argument {label} is mapped (in_axes {ax}) but is a "
                                    f"{type(leaf).__name__}, not an array", location=user_location()) from None
        if not -t.ndim <= ax < max(t.ndim, 1) or t.ndim == 0:
            raise ShapeError(
                f"{api} was requested to map its argument {label} along axis {ax}, which implies "
                f"that its rank should be at least {ax + 1 if ax >= 0 else -ax}, but is only "
                f"{t.ndim} (its shape is {t.shape})", location=user_location())
        ax %= t.ndim
        sizes.append((t.shape[ax], label, ax, t))
        mapped.append((t, ax))
    if not sizes and axis_size is None:
        raise ArgumentTypeError(f"{api}: vmap must have at least one non-None value in in_axes "
                                "(or an axis_size)", location=user_location())
    size = axis_size if axis_size is not None else sizes[0][0]
    if any(s != size for s, *_ in sizes):
        lines = [f"  * one axis had size {s}: axis {ax} of argument {label} of type "
                 f"{t.aval.str_short()}" for s, label, ax, t in sizes]
        if axis_size is not None:
            lines.insert(0, f"  * axis_size was given as {axis_size}")
        raise ShapeError(f"{api} got inconsistent sizes for array axes to be mapped:\n"
                         + ";\n".join(lines), location=user_location())
    moved = [move_axis(t, ax, 0) for t, ax in mapped]
    avals = [ShapedArray(t.shape[1:], t.dtype, t.weak_type) for t in moved]
    mapped_pos = [i for i, ax in enumerate(axes) if ax is not None]
    leaves = [leaf for _, leaf in leaves_paths]

    def per_example(*xs):
        full = list(leaves)
        for i, x in zip(mapped_pos, xs):
            full[i] = x
        a, k = tree_unflatten(in_tree, full)
        return fun(*a, **k)

    tr = trace_region(per_example, avals, name="vmap", description=f"{api}")
    region = tr.region
    env = Env()
    for a, t in zip(region.args, moved):
        env.set(a, t, True)
    batch_ops(region.ops, env, size)
    outs = [env.get(v) for v in region.outputs]
    out_leaves = tree_unflatten(tr.out_tree, list(range(len(outs))))
    o_axes = broadcast_prefix(api, "out_axes", out_axes, out_leaves, "output")
    result = []
    for k, ((t, b), ax, aval) in enumerate(zip(outs, o_axes, tr.out_avals)):
        if ax is None:
            if b:
                raise ShapeError(
                    f"{api}: vmap has mapped output but out_axes is None (output leaf {k}, "
                    f"{t.aval.str_short()}, depends on the mapped inputs)", location=user_location())
            result.append(Tracer(t._trace, t._value, aval) if t.aval != aval else t)
            continue
        t = batched(t, b, size)
        if not -t.ndim <= ax < t.ndim:
            raise ShapeError(f"{api}: out_axes {ax} is out of range for output leaf {k} of "
                             f"per-example rank {t.ndim - 1}", location=user_location())
        t = move_axis(t, 0, ax)
        want = aval.update(shape=t.shape)
        result.append(Tracer(t._trace, t._value, want) if t.aval != want else t)
    return tree_unflatten(tr.out_tree, result)
