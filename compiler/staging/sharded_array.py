"""A global array laid out over the devices of a mesh: what ``hlo.shard_map`` returns and
``hlo.device_put(x, NamedSharding(...))`` makes, like a jax.Array with a NamedSharding.

``.sharding``, ``.shape``, ``.dtype``, ``.addressable_shards`` (one ``Shard`` per device:
``device``, ``index`` (its block of the global array, slices), ``data``, a numpy array) and
``np.asarray(a)`` that gathers the blocks (where an axis is replicated, every device holds the
same block; the first device's is read). The blocks live in this process's memory (the CPU
devices'), one numpy array each.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from ..errors import ArgumentTypeError
from ..sharding import NamedSharding


class Shard:
    __slots__ = ("device", "index", "data")

    def __init__(self, device, index, data):
        self.device, self.index, self.data = device, index, data

    def __repr__(self):
        return f"Shard(device={self.device!r}, index={self.index}, data={self.data.dtype}{list(self.data.shape)})"


class ShardedArray:
    """A global array whose blocks live on the devices of ``sharding.mesh``."""

    def __init__(self, blocks: Sequence[np.ndarray], shape, sharding: NamedSharding):
        self.sharding = sharding
        self.shape = tuple(int(s) for s in shape)
        mesh = sharding.mesh
        if len(blocks) != mesh.size:
            raise ArgumentTypeError(f"a sharded array over {mesh.size} devices needs {mesh.size} "
                                    f"blocks, got {len(blocks)}")
        want = sharding.shard_shape(self.shape)
        for b in blocks:
            if b is not None and tuple(b.shape) != want:
                raise ArgumentTypeError(f"a block of shape {tuple(b.shape)}; {sharding} of a "
                                        f"{self.shape} array has blocks of {want}")
        # None: a block another process holds (a run of several processes, hlo.distributed)
        self._blocks = [None if b is None else np.asarray(b) for b in blocks]
        mine = [b for b in self._blocks if b is not None]
        if not mine:
            raise ArgumentTypeError(f"a sharded array over {mesh.size} devices with no block in "
                                    f"this process")
        self.dtype = mine[0].dtype

    @classmethod
    def from_global(cls, x: np.ndarray, sharding: NamedSharding, what: str = "hlo.device_put"):
        x = np.asarray(x)
        sharding.check_shape(x.shape, what)
        blocks = [np.ascontiguousarray(x[sharding.index(i, x.shape)])
                  for i in range(sharding.mesh.size)]
        return cls(blocks, x.shape, sharding)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def blocks(self) -> List[np.ndarray]:
        """Partition ``i``'s block, for every ``i`` (row-major over the mesh)."""
        return list(self._blocks)

    @property
    def addressable_shards(self) -> List[Shard]:
        mesh = self.sharding.mesh
        return [Shard(d, self.sharding.index(i, self.shape), self._blocks[i])
                for i, d in enumerate(mesh.devices.flat) if self._blocks[i] is not None]

    @property
    def is_fully_addressable(self) -> bool:
        return all(b is not None for b in self._blocks)

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.shape, self.dtype)
        done = set()
        missing = []
        for i, b in enumerate(self._blocks):
            idx = self.sharding.index(i, self.shape)
            key = tuple((s.start, s.stop) for s in idx)
            if b is None:
                missing.append((i, key))
            elif key not in done:
                out[idx] = b
                done.add(key)
        lost = [i for i, key in missing if key not in done]
        if lost:
            raise ArgumentTypeError(
                f"{self!r}: the blocks of partitions {lost} are held by other processes (a run "
                f"of several processes, hlo.distributed): read this process's blocks from "
                f"addressable_shards, or lay the result out replicated (out_specs P())")
        return out if dtype is None else out.astype(dtype)

    def __repr__(self):
        return (f"ShardedArray({self.dtype}{list(self.shape)}, {self.sharding!r})")
