"""SPMD programs across processes: after ``hlo.distributed.initialize()`` under ``mpirun -n N``,
every process is one CPU device of one mesh, and a program's collectives whose process group
spans processes go over the MPI transport (``hlo.runtime.cpu.mpi_collectives``).

- Devices: process ``p`` holds the CPU device of id ``p`` (``global_devices()``: one per
  process, in process order; ``local_devices()``: this process's). A device's
  ``process_index`` is its id. Several CPU devices per process (``HLO_CPU_DEVICES`` > 1) in a
  run of several processes are not supported yet: an error says so.
- Running: each process runs its own partition (the mesh position of its device) of the SPMD
  program (``run_local``), with a ``ProcessPartition`` as the calling thread's process; the
  CPU collectives (``hlo.runtime.cpu.collectives``) ask it to run each collective
  (``run_collective``). An ``all_reduce`` whose computation MPI's transport knows (add,
  multiply, minimum, maximum, and, or, xor) is the transport's ``all_reduce`` with
  ``ordered=True``: a fold in group order, the bits of the one-process run; every other
  collective gathers every member's operands with the transport's ``all_gather`` and applies
  the interpreter's semantics (``hlo.ir.interp.collectives``) to them, so that all of them
  mean what they mean in one process. A group of this process alone exchanges nothing.
- Failure: the transport bounds every wait (``HLO_DISTRIBUTED_TIMEOUT``) and compares what the
  processes call (``HLO_DISTRIBUTED_CHECK``); a peer that dies ends the run under ``mpirun``.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from hlo.ir.interp.collectives import CollectiveError, Process, my_group
from hlo.runtime import processes
from hlo.runtime.processes import DistributedError, ProcessInfo

# The all-reduce computations the MPI transport reduces itself (StableHLO's names).
_TRANSPORT_OPS = ("add", "multiply", "minimum", "maximum", "and", "or", "xor")


def multi_process() -> Optional[ProcessInfo]:
    """This run's ``ProcessInfo`` when ``hlo.distributed.initialize()`` joined several
    processes, else None."""
    info = processes.current()
    return info if info is not None and info.num_processes > 1 else None


def _check_supported(info: ProcessInfo) -> None:
    from .devices import ENV, device_count
    if info.transport != "mpi":
        raise DistributedError(f"hlo.distributed: SPMD programs across processes run their CPU "
                               f"collectives over MPI; this run was launched torchrun-style "
                               f"({info.source}): launch it with `mpirun -n {info.num_processes} "
                               f"python ...` (the TCP rendezvous carries no collectives)")
    if device_count() != 1:
        raise DistributedError(f"hlo.distributed: a run of {info.num_processes} processes with "
                               f"{device_count()} CPU devices each ({ENV}) is not supported yet: "
                               f"one CPU device per process (leave {ENV} unset)")


def global_devices() -> list:
    """Every process's CPU device (device ``p`` is process ``p``'s)."""
    from .devices import CpuDevice, devices
    info = multi_process()
    if info is None:
        return list(devices())
    _check_supported(info)
    return [CpuDevice(p) for p in range(info.num_processes)]


def local_devices() -> list:
    from .devices import CpuDevice, devices
    info = multi_process()
    if info is None:
        return list(devices())
    _check_supported(info)
    return [CpuDevice(info.process_id)]


class ProcessPartition(Process):
    """This process's partition of an SPMD program run across processes: partition
    ``partition_id`` of ``num_partitions`` (one replica); ``ranks[p]`` is the MPI rank (process)
    that runs partition ``p``."""

    def __init__(self, partition_id: int, ranks: Sequence[int]):
        super().__init__(None, 0, partition_id)
        self.ranks = tuple(ranks)

    @property
    def num_replicas(self) -> int:
        return 1

    @property
    def num_partitions(self) -> int:
        return len(self.ranks)

    def _transport(self, group):
        from .mpi_collectives import world
        return world().group([self.ranks[p] for _, p in group])

    def exchange(self, group, value, what: str) -> list:
        """Every member's ``value`` (an array or a list of arrays), in group order."""
        group = tuple(group)
        if group == (self.id,):
            return [value]
        t = self._transport(group)
        arrays = value if isinstance(value, list) else [value]
        per_member: List[list] = [[] for _ in group]
        for a in arrays:
            a = np.ascontiguousarray(a)
            got = t.all_gather(a.reshape(-1)).reshape((len(group),) + a.shape)
            for m in range(len(group)):
                per_member[m].append(got[m])
        return per_member if isinstance(value, list) else [v[0] for v in per_member]

    def run_collective(self, site, args: List[np.ndarray]) -> List[np.ndarray]:
        try:
            return self._run(site, args)
        except DistributedError as e:  # name the program's op (and its source line) too
            raise type(e)(f"{e} [the program's {site.view.what}, partition {self.partition_id}]") from None

    def _run(self, site, args: List[np.ndarray]) -> List[np.ndarray]:
        view = site.view
        if view.name == "all_reduce" and site.computation in _TRANSPORT_OPS:
            group = my_group(view, self)
            if tuple(group) == (self.id,):
                return [np.array(x, copy=True) for x in args]
            t = self._transport(group)
            return [t.all_reduce(np.ascontiguousarray(x).reshape(-1), None, site.computation,
                                 ordered=True).reshape(np.shape(x)) for x in args]
        return site.fn(self, view, args, site.combine)


def partitions_of(mesh_devices: Sequence, info: ProcessInfo) -> Dict[int, int]:
    """``{partition: process}`` for a mesh's devices (row-major), checked: this process has a
    device in it."""
    owner = {}
    for i, d in enumerate(mesh_devices):
        if not 0 <= d.id < info.num_processes:
            raise DistributedError(f"hlo.distributed: the mesh names CPU device {d.id}; a run of "
                                   f"{info.num_processes} processes has devices 0..{info.num_processes - 1} "
                                   f"(hlo.devices())")
        owner[i] = d.id
    if info.process_id not in owner.values():
        raise DistributedError(f"hlo.distributed: {info.describe()} has no device in the mesh "
                               f"(devices {[d.id for d in mesh_devices]}); every process runs a "
                               f"partition of the program: build the mesh of hlo.devices()")
    return owner


def run_local(call: Callable[[int, Sequence], list], mesh_devices: Sequence,
              args_of: Callable[[int], Sequence]) -> Dict[int, list]:
    """Run this process's partitions of an SPMD program over a mesh of ``mesh_devices``:
    ``call(i, args_of(i))`` for each partition ``i`` this process holds; ``{i: results}``."""
    from .devices import run_as
    info = multi_process()
    assert info is not None
    _check_supported(info)
    owner = partitions_of(mesh_devices, info)
    ranks = [owner[i] for i in range(len(mesh_devices))]
    out = {}
    for i in [i for i in range(len(ranks)) if ranks[i] == info.process_id]:
        try:
            out[i] = run_as(ProcessPartition(i, ranks), lambda: call(i, args_of(i)))
        except CollectiveError as e:
            raise CollectiveError(f"{info.describe()}, partition {i}: {e}") from e
    return out
