"""Collectives over named mesh axes, as jax.lax's: ``psum``, ``pmean``, ``pmax``, ``pmin``,
``all_gather``, ``psum_scatter``, ``all_to_all``, ``ppermute``, ``axis_index``.

They are traced inside ``hlo.shard_map``, whose mesh names the axes (``axis_env``): every
device of the mesh is a partition of one SPMD program (process ``i`` is the device at row-major
position ``i`` of ``mesh.devices``), so an op over axes ``A`` talks to the devices that differ
only in their coordinates along ``A`` (flattened ids, ``use_global_device_ids``; each op gets a
channel id of its own). Outside a ``shard_map`` an axis name is unknown: a ``NameError``-like
``ShapeError`` naming it, as jax's "unbound axis name".
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import dtypes
from ..errors import ArgumentTypeError, ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, emit1
from ..tree_util import tree_map
from . import elementwise as ew
from .common import as_tracer, ir_type
from .reductions import _scalar_body

AxisName = Union[str, Tuple[str, ...]]


class AxisEnv:
    """The mesh axes in scope: names and sizes, in the mesh's (row-major) order."""

    def __init__(self, names: Sequence[str], sizes: Sequence[int]):
        self.names = tuple(names)
        self.sizes = tuple(int(s) for s in sizes)
        self.ids = np.arange(int(np.prod(self.sizes, dtype=np.int64))).reshape(self.sizes)
        self.channels = itertools.count(1)

    def axes(self, axis_name: AxisName, what: str) -> Tuple[int, ...]:
        names = axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)
        out = []
        for n in names:
            if n not in self.names:
                raise ShapeError(f"{what}: unbound axis name {n!r} (the mesh's axes: "
                                 f"{', '.join(map(repr, self.names))})")
            out.append(self.names.index(n))
        if len(set(out)) != len(out):
            raise ShapeError(f"{what}: axis {axis_name!r} names an axis twice")
        return tuple(out)

    def size(self, axes: Sequence[int]) -> int:
        return int(np.prod([self.sizes[a] for a in axes], dtype=np.int64))

    def groups(self, axes: Sequence[int]) -> List[List[int]]:
        """The devices (flattened ids) that differ only along ``axes``, one group each, in the
        row-major order of those axes."""
        rest = [a for a in range(len(self.sizes)) if a not in axes]
        moved = np.transpose(self.ids, rest + list(axes))
        return moved.reshape(-1, self.size(axes)).tolist()


_ENV: List[AxisEnv] = []


@contextlib.contextmanager
def axis_env(names: Sequence[str], sizes: Sequence[int]) -> Iterator[AxisEnv]:
    """Make the mesh axes ``names`` (of ``sizes``) known to the collectives traced inside."""
    env = AxisEnv(names, sizes)
    _ENV.append(env)
    try:
        yield env
    finally:
        _ENV.pop()


def _env(what: str, axis_name) -> AxisEnv:
    if not _ENV:
        raise ShapeError(f"{what}: unbound axis name {axis_name!r}: collectives over mesh axes "
                         "run inside hlo.shard_map(f, mesh, in_specs, out_specs)")
    return _ENV[-1]


def _attrs(env: AxisEnv, axes) -> Dict:
    return {"replica_groups": env.groups(axes), "channel_id": next(env.channels),
            "use_global_device_ids": True}


def _reduce(x, axis_name, op, what: str):
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)

    def one(leaf):
        t = as_tracer(leaf, what=what)
        if not axes:
            return t
        body = _scalar_body(what, op, [t.dtype], False, name="computation")
        return emit1("all_reduce", [t], _attrs(env, axes), regions=[body])
    return tree_map(one, x)


@api_function
def psum(x, axis_name: AxisName):
    """The sum of ``x`` (a pytree of arrays) over the devices along ``axis_name``."""
    return _reduce(x, axis_name, ew.add, "lax.psum")


@api_function
def pmax(x, axis_name: AxisName):
    return _reduce(x, axis_name, ew.max, "lax.pmax")


@api_function
def pmin(x, axis_name: AxisName):
    return _reduce(x, axis_name, ew.min, "lax.pmin")


@api_function
def pmean(x, axis_name: AxisName):
    """``psum(x) / n`` over the ``n`` devices along ``axis_name`` (floating-point leaves)."""
    env = _env("lax.pmean", axis_name)
    n = env.size(env.axes(axis_name, "lax.pmean"))

    def one(leaf):
        t = as_tracer(leaf, what="lax.pmean")
        if not dtypes.is_float(t.dtype):
            raise ArgumentTypeError(f"lax.pmean: a {dtypes.dtype_name(t.dtype)} operand; pmean "
                                    "takes floating-point arrays")
        s = _reduce(t, axis_name, ew.add, "lax.pmean")
        return ew.div(s, as_tracer(np.asarray(n, dtype=t.dtype)))
    return tree_map(one, x)


@api_function
def all_gather(x, axis_name: AxisName, *, axis: int = 0, tiled: bool = False):
    """Every device's ``x`` along ``axis_name``, stacked on a new dimension ``axis`` (or, with
    ``tiled``, concatenated along ``axis``)."""
    what = "lax.all_gather"
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)
    n = env.size(axes)

    def one(leaf):
        t = as_tracer(leaf, what=what)
        nd = t.ndim if tiled else t.ndim + 1
        a = _axis(axis, nd if not tiled else max(t.ndim, 1), what)
        if not tiled:
            shape = t.shape[:a] + (1,) + t.shape[a:]
            t = emit1("reshape", [t], result_types=[ir_type(shape, t.dtype)])
        elif t.ndim == 0:
            raise ShapeError(f"{what}: tiled gathering needs an operand of rank 1 or more")
        out = list(t.shape)
        out[a] *= n
        return emit1("all_gather", [t], dict(_attrs(env, axes), all_gather_dim=a),
                     result_types=[ir_type(out, t.dtype)])
    return tree_map(one, x)


@api_function
def psum_scatter(x, axis_name: AxisName, *, scatter_dimension: int = 0, tiled: bool = False):
    """``psum`` over ``axis_name``, of which each device keeps its block of
    ``scatter_dimension`` (with ``tiled``: a 1/n slice; otherwise that dimension must be n and
    is removed), as jax's."""
    what = "lax.psum_scatter"
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)
    n = env.size(axes)

    def one(leaf):
        t = as_tracer(leaf, what=what)
        d = _axis(scatter_dimension, t.ndim, what)
        if t.shape[d] % n or (not tiled and t.shape[d] != n):
            raise ShapeError(f"{what}: dimension {d} of a {t.aval.str_short()} operand "
                             f"{'does not split into' if tiled else 'must be'} {n} (the devices along "
                             f"{axis_name!r})")
        out = list(t.shape)
        out[d] //= n
        body = _scalar_body(what, ew.add, [t.dtype], False, name="computation")
        r = emit1("reduce_scatter", [t], dict(_attrs(env, axes), scatter_dimension=d),
                  result_types=[ir_type(out, t.dtype)], regions=[body])
        if not tiled:
            r = emit1("reshape", [r], result_types=[ir_type(out[:d] + out[d + 1:], t.dtype)])
        return r
    return tree_map(one, x)


@api_function
def all_to_all(x, axis_name: AxisName, split_axis: int, concat_axis: int, *, tiled: bool = False):
    """Device ``j`` of the group gets block ``j`` of every device's ``split_axis``, concatenated
    along ``concat_axis`` (``tiled``), or (untiled, as jax's) with ``split_axis`` of size n
    removed and the devices' blocks stacked on a new dimension at ``concat_axis``."""
    what = "lax.all_to_all"
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)
    n = env.size(axes)
    t = as_tracer(x, what=what)
    s = _axis(split_axis, t.ndim, what)
    if t.shape[s] % n or (not tiled and t.shape[s] != n):
        raise ShapeError(f"{what}: split_axis {s} of a {t.aval.str_short()} operand "
                         f"{'does not split into' if tiled else 'must be'} {n}")
    if tiled:
        c = _axis(concat_axis, t.ndim, what)
        out = list(t.shape)
        out[s] //= n
        out[c] *= n
        ga = _attrs(env, axes)
        return emit1("all_to_all", [t], {"replica_groups": ga["replica_groups"],
                                         "channel_id": ga["channel_id"], "split_dimension": s,
                                         "concat_dimension": c, "split_count": n},
                     result_types=[ir_type(out, t.dtype)])
    c = _axis(concat_axis, t.ndim, what)  # in the result (rank t.ndim)
    # stack: a unit dimension at c (in the operand's terms), exchanged, then split_axis dropped
    shape = t.shape[:c] + (1,) + t.shape[c:]
    y = emit1("reshape", [t], result_types=[ir_type(shape, t.dtype)])
    s2 = s + 1 if s >= c else s
    z = all_to_all(y, axis_name, s2, c, tiled=True)
    final = [d for i, d in enumerate(z.shape) if i != s2]
    return emit1("reshape", [z], result_types=[ir_type(final, t.dtype)])


@api_function
def ppermute(x, axis_name: AxisName, perm: Sequence[Tuple[int, int]]):
    """Device ``src`` (its index along ``axis_name``) sends ``x`` to device ``dst`` for every
    ``(src, dst)`` of ``perm``; a device that receives nothing gets zeros."""
    what = "lax.ppermute"
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)
    n = env.size(axes)
    pairs = [(int(s), int(d)) for s, d in perm]
    for s, d in pairs:
        if not (0 <= s < n and 0 <= d < n):
            raise ShapeError(f"{what}: pair {(s, d)} is outside the {n} devices along {axis_name!r}")
    if len({s for s, _ in pairs}) != len(pairs) or len({d for _, d in pairs}) != len(pairs):
        raise ShapeError(f"{what}: perm {pairs} sends from or to one device twice")
    flat = [(g[s], g[d]) for g in env.groups(axes) for s, d in pairs]
    channel = next(env.channels)
    return tree_map(lambda leaf: emit1("collective_permute", [as_tracer(leaf, what=what)],
                                       {"source_target_pairs": flat, "channel_id": channel}), x)


@api_function
def axis_index(axis_name: AxisName) -> Tracer:
    """This device's index along ``axis_name`` (int32; row-major over several axes)."""
    what = "lax.axis_index"
    env = _env(what, axis_name)
    axes = env.axes(axis_name, what)
    pid = emit1("partition_id", [])
    pid = ew.convert_element_type(pid, np.int32)
    idx: Optional[Tracer] = None
    for a in axes:
        stride = int(np.prod(env.sizes[a + 1:], dtype=np.int64))
        coord = ew.rem(ew.div(pid, as_tracer(np.int32(stride))), as_tracer(np.int32(env.sizes[a])))
        idx = coord if idx is None else ew.add(ew.mul(idx, as_tracer(np.int32(env.sizes[a]))), coord)
    return idx if idx is not None else as_tracer(np.int32(0))


def axis_size(axis_name: AxisName) -> int:
    """The number of devices along ``axis_name`` (a Python int)."""
    env = _env("lax.axis_size", axis_name)
    return env.size(env.axes(axis_name, "lax.axis_size"))


# The sharding constraints of the program being traced for hlo.jit(in_shardings=...): traced
# value (its IR Value) -> NamedSharding; None outside such a trace.
_CONSTRAINTS: List[Optional[Dict]] = [None]


@contextlib.contextmanager
def constraint_scope() -> Iterator[Dict]:
    """Collect the ``with_sharding_constraint``s of the trace inside (``staging/sharded_jit``)."""
    found: Dict = {}
    _CONSTRAINTS.append(found)
    try:
        yield found
    finally:
        _CONSTRAINTS.pop()


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree), with each array laid out by ``shardings`` (a ``NamedSharding``, or a
    pytree of them) at this point of a program run by ``hlo.jit(..., in_shardings=...)``: the
    partitioner reshards it there (``spmd_partitioner``). Elsewhere (one device) it is ``x``.
    A constraint inside a function the program calls (a ``checkpoint``, a ``custom_vjp``) is
    not seen by the partitioner yet."""
    from ..sharding import NamedSharding
    from ..tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(x)
    if isinstance(shardings, NamedSharding):
        shs = [shardings] * len(leaves)
    else:
        shs, _ = tree_flatten(shardings, is_leaf=lambda s: isinstance(s, NamedSharding))
        if len(shs) != len(leaves) or not all(isinstance(s, NamedSharding) for s in shs):
            raise ArgumentTypeError("lax.with_sharding_constraint: shardings must be a NamedSharding "
                                    "or a pytree of them matching x")
    scope = _CONSTRAINTS[-1]
    out = []
    for leaf, sh in zip(leaves, shs):
        if isinstance(leaf, Tracer):
            sh.check_shape(leaf.shape, "lax.with_sharding_constraint")
            if scope is not None:
                scope[leaf._value] = sh
        out.append(leaf)
    return tree_unflatten(tree, out)


def _axis(a: int, ndim: int, what: str) -> int:
    if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
        raise ArgumentTypeError(f"{what}: an axis must be an int, got {a!r}")
    if not -ndim <= a < ndim:
        raise ShapeError(f"{what}: axis {a} is out of range for rank {ndim}")
    return int(a) % ndim
