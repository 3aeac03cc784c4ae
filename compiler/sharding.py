"""``hlo.sharding``: meshes of devices and how arrays are laid out over them, as jax.sharding's.

- ``Mesh(devices, axis_names)``: an n-d array of devices (``hlo.devices("cpu")``), one name per
  dimension. Device ``mesh.devices[c]`` is the SPMD program's partition of row-major position
  ``c`` (``hlo.lax.axis_index`` counts along the axes).
- ``PartitionSpec(*entries)`` (``P``): per array dimension, the mesh axis (or tuple of axes)
  it is split over, or None (not split); dimensions past the spec are not split.
- ``NamedSharding(mesh, spec)``: an array split by ``spec`` over ``mesh``; along the mesh axes
  the spec does not name, every device holds the same block (replicated).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from .errors import ArgumentTypeError, ShapeError


class PartitionSpec(tuple):
    """Per dimension: a mesh axis name, a tuple of them, or None."""

    def __new__(cls, *entries):
        for e in entries:
            if not (e is None or isinstance(e, str)
                    or isinstance(e, tuple) and all(isinstance(n, str) for n in e)):
                raise ArgumentTypeError(f"PartitionSpec: an entry is a mesh axis name, a tuple of "
                                        f"them or None, got {e!r}")
        return super().__new__(cls, entries)

    def __repr__(self):
        return "PartitionSpec(" + ", ".join(map(repr, self)) + ")"

    def axes_of(self, dim: int) -> Tuple[str, ...]:
        e = self[dim] if dim < len(self) else None
        return () if e is None else (e,) if isinstance(e, str) else tuple(e)


P = PartitionSpec


class Mesh:
    """An n-d array of devices with named axes."""

    def __init__(self, devices, axis_names: Sequence[str]):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        arr = np.empty(len(devices) if not isinstance(devices, np.ndarray) else devices.shape,
                       dtype=object)
        if isinstance(devices, np.ndarray):
            arr[...] = devices
        else:
            for i, d in enumerate(devices):
                arr[i] = d
        names = tuple(axis_names)
        if arr.ndim != len(names):
            raise ShapeError(f"Mesh: {len(names)} axis names for a {arr.ndim}-d array of devices "
                             f"(shape {arr.shape}); reshape the devices, e.g. "
                             f"np.array(hlo.devices('cpu')[:4]).reshape(2, 2)")
        if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ArgumentTypeError(f"Mesh: axis names must be distinct strings, got {names}")
        flat = list(arr.flat)
        if not flat:
            raise ShapeError("Mesh: no devices")
        if len({(d.platform, d.id) for d in flat}) != len(flat):
            raise ArgumentTypeError("Mesh: a device appears twice")
        if {d.platform for d in flat} != {"cpu"}:
            raise ArgumentTypeError("Mesh: SPMD runs on CPU devices (hlo.devices('cpu')) so far")
        self.devices = arr
        self.axis_names = names

    @property
    def shape(self) -> Dict[str, int]:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return int(self.devices.size)

    def __eq__(self, other):
        return (isinstance(other, Mesh) and other.axis_names == self.axis_names
                and other.devices.shape == self.devices.shape
                and all(a == b for a, b in zip(other.devices.flat, self.devices.flat)))

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape, tuple(d.id for d in self.devices.flat)))

    def __repr__(self):
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape.items())})"

    def coords(self, i: int) -> Tuple[int, ...]:
        """The mesh coordinates of partition ``i`` (row-major)."""
        return tuple(int(c) for c in np.unravel_index(i, self.devices.shape))


class NamedSharding:
    """An array laid out over ``mesh`` by ``spec``."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec):
        if not isinstance(mesh, Mesh):
            raise ArgumentTypeError(f"NamedSharding: expected a Mesh, got {type(mesh).__name__}")
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec) if isinstance(spec, (tuple, list)) else spec
            if not isinstance(spec, PartitionSpec):
                raise ArgumentTypeError(f"NamedSharding: expected a PartitionSpec, got {spec!r}")
        used: List[str] = []
        for d in range(len(spec)):
            for a in spec.axes_of(d):
                if a not in mesh.axis_names:
                    raise ShapeError(f"NamedSharding: {spec} names axis {a!r}; the mesh's axes are "
                                     f"{', '.join(map(repr, mesh.axis_names))}")
                if a in used:
                    raise ShapeError(f"NamedSharding: {spec} splits over axis {a!r} twice")
                used.append(a)
        self.mesh, self.spec = mesh, spec

    def _key(self) -> tuple:
        """The spec without trailing whole dimensions (``P("x")`` is ``P("x", None)``)."""
        entries = [tuple(self.spec.axes_of(d)) for d in range(len(self.spec))]
        while entries and not entries[-1]:
            entries.pop()
        return tuple(entries)

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and other.mesh == self.mesh and \
            other._key() == self._key()

    def __hash__(self):
        return hash((self.mesh, self._key()))

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"

    def check_shape(self, shape: Sequence[int], what: str) -> None:
        if len(self.spec) > len(shape):
            raise ShapeError(f"{what}: {self.spec} has {len(self.spec)} entries for an array of "
                             f"rank {len(shape)}")
        for d, n in enumerate(shape):
            k = self.parts(d)
            if n % k:
                raise ShapeError(f"{what}: dimension {d} ({n}) of shape {tuple(shape)} does not "
                                 f"split into {k} blocks ({self.spec} over {self.mesh!r})")

    def parts(self, dim: int) -> int:
        """Into how many blocks dimension ``dim`` is split."""
        return int(np.prod([self.mesh.shape[a] for a in self.spec.axes_of(dim)], dtype=np.int64))

    def shard_shape(self, shape: Sequence[int]) -> Tuple[int, ...]:
        return tuple(n // self.parts(d) for d, n in enumerate(shape))

    def index(self, i: int, shape: Sequence[int]) -> Tuple[slice, ...]:
        """The block of a ``shape`` array that partition ``i`` holds."""
        coords = dict(zip(self.mesh.axis_names, self.mesh.coords(i)))
        out = []
        for d, n in enumerate(shape):
            b = 0
            for a in self.spec.axes_of(d):  # major to minor, as jax
                b = b * self.mesh.shape[a] + coords[a]
            size = n // self.parts(d)
            out.append(slice(b * size, (b + 1) * size))
        return tuple(out)
