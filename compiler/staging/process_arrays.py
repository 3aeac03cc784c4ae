"""``hlo.make_array_from_process_local_data(sharding, local_data, global_shape=None)``: a global
array from the block each process holds, as jax's.

In a run of several processes (``hlo.distributed``, one CPU device per process), each process
passes the rows (the blocks) its devices hold -- its part of the batch, say -- and gets a
``ShardedArray`` of the global shape whose other blocks are the other processes' (absent
here): ``hlo.shard_map`` takes it as it is. ``global_shape`` defaults to the local shape times
the number of blocks along each split dimension. In one process the local data is the whole
array.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import ArgumentTypeError, ShapeError
from ..sharding import NamedSharding
from .sharded_array import ShardedArray


def make_array_from_process_local_data(sharding: NamedSharding, local_data,
                                       global_shape: Optional[Sequence[int]] = None) -> ShardedArray:
    from hlo.runtime.cpu.process_spmd import multi_process
    if not isinstance(sharding, NamedSharding):
        raise ArgumentTypeError(f"hlo.make_array_from_process_local_data: expected a "
                                f"NamedSharding, got {type(sharding).__name__}")
    local = np.asarray(local_data)
    if local.dtype == object:
        raise ArgumentTypeError(f"hlo.make_array_from_process_local_data: local_data is not an "
                                f"array ({type(local_data).__name__})")
    info = multi_process()
    what = "hlo.make_array_from_process_local_data"
    if info is None:
        if global_shape is not None and tuple(global_shape) != local.shape:
            raise ShapeError(f"{what}: global_shape {tuple(global_shape)} in a run of one process, "
                             f"whose local data (shape {local.shape}) is the whole array")
        return ShardedArray.from_global(local, sharding, what)
    mesh = sharding.mesh
    if len(sharding.spec) > local.ndim:
        raise ShapeError(f"{what}: {sharding.spec} for local data of rank {local.ndim}")
    shape = (tuple(d * sharding.parts(k) for k, d in enumerate(local.shape))
             if global_shape is None else tuple(int(n) for n in global_shape))
    sharding.check_shape(shape, what)
    want = sharding.shard_shape(shape)
    if local.shape != want:
        raise ShapeError(f"{what}: {info.describe()} holds one block of {sharding.spec} over "
                         f"{mesh!r} of a {shape} array: shape {want}, got local data of shape "
                         f"{local.shape}")
    mine = [i for i, d in enumerate(mesh.devices.flat) if d.id == info.process_id]
    if not mine:
        raise ShapeError(f"{what}: {info.describe()} has no device in {mesh!r}")
    block = np.ascontiguousarray(local)
    return ShardedArray([block if i in mine else None for i in range(mesh.size)], shape, sharding)
