"""``hlo.distributed``: runs of several processes, as ``jax.distributed``.

    import hlo
    hlo.distributed.initialize()          # under mpirun -n N, or torchrun-style variables
    hlo.distributed.process_index(), hlo.distributed.process_count()

``initialize()`` reads this process's place in the run from its launcher
(``hlo.runtime.processes.from_environment``): ``mpirun``/``mpiexec`` (Open MPI's
``OMPI_COMM_WORLD_*``, PMI's ``PMI_RANK``/``PMI_SIZE``, PMIx's ``PMIX_RANK``) or torchrun-style
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``; explicit arguments
override the torchrun-style variables and must agree with MPI's ranks (MPI fixes them). Under
an MPI launcher it initializes MPI (``hlo.runtime.cpu.mpi_collectives.world()``: the CPU
collectives' transport); torchrun-style, the processes meet at a TCP store that process 0
serves at the coordinator's address (``hlo.runtime.rendezvous``: what NCCL's unique id
travels through). Either way every process has arrived when it returns, or it fails within
``initialization_timeout`` seconds (default ``HLO_DISTRIBUTED_TIMEOUT``) naming what is missing.
"""
from __future__ import annotations

import threading
import time
from typing import Optional

from hlo.runtime import processes
from hlo.runtime.processes import (
    DistributedError,
    DistributedTimeoutError,
    LaunchEnv,
    ProcessInfo,
    timeout_seconds,
)

__all__ = ["initialize", "shutdown", "is_initialized", "process_index", "process_count",
           "local_process_index", "local_process_count", "DistributedError",
           "DistributedTimeoutError", "cpu_transport", "rendezvous"]

_lock = threading.Lock()
_args: Optional[tuple] = None     # the arguments the run was initialized with
_store = None                     # the torchrun-style rendezvous (a TcpStore), if any
_finalized_mpi = False


def _launch_help() -> str:
    return ("launch it with `mpirun -n N python prog.py` or torchrun-style (RANK, WORLD_SIZE, "
            "MASTER_ADDR, MASTER_PORT set), or pass coordinator_address, num_processes and process_id")


def _resolve(env: Optional[LaunchEnv], coordinator_address, num_processes, process_id,
             local_process_id) -> ProcessInfo:
    if env is not None and env.transport == "mpi":
        for name, given, theirs in (("process_id", process_id, env.process_id),
                                    ("num_processes", num_processes, env.num_processes)):
            if given is not None and theirs is not None and int(given) != theirs:
                raise DistributedError(f"initialize({name}={given}) contradicts the MPI launcher, which "
                                       f"started this process with {name} {theirs} ({env.source}): MPI "
                                       f"fixes the ranks; leave {name} out")
        if coordinator_address is not None:
            raise DistributedError(f"initialize(coordinator_address={coordinator_address!r}): this process "
                                   f"was started by an MPI launcher ({env.source}), and MPI connects the "
                                   f"processes itself; leave coordinator_address out")
        from hlo.runtime.cpu import mpi_collectives
        w = mpi_collectives.world()
        size = env.num_processes if env.num_processes is not None else w.size
        if (w.size, w.rank) != (size, env.process_id):
            raise DistributedError(
                f"MPI says this is process {w.rank} of {w.size}, the launcher's environment process "
                f"{env.process_id} of {size} ({env.source}): mpi4py was built for another MPI library "
                f"than the one whose mpirun started it ({mpi_collectives.library_version()})")
        lsize = env.local_num_processes if env.local_num_processes is not None else env.local_process_id + 1
        return ProcessInfo(w.rank, w.size, env.local_process_id, lsize, None, "mpi", env.source)
    source = "arguments" if env is None else f"{env.source}, overridden by arguments"
    if env is None and num_processes is None and process_id is None:
        raise DistributedError(f"hlo.distributed.initialize(): no launcher's variables are set; "
                               f"{_launch_help()}")
    n = num_processes if num_processes is not None else (env.num_processes if env else None)
    pid = process_id if process_id is not None else (env.process_id if env else None)
    if n is None or pid is None:
        missing = "num_processes" if n is None else "process_id"
        raise DistributedError(f"hlo.distributed.initialize(): {missing} is missing; {_launch_help()}")
    coord = coordinator_address if coordinator_address is not None else (env.coordinator_address if env else None)
    if int(n) > 1 and coord is None:
        raise DistributedError(f"hlo.distributed.initialize(): {n} processes need a coordinator_address "
                               f"(host:port that process 0 serves; MASTER_ADDR/MASTER_PORT)")
    lpid = local_process_id if local_process_id is not None else (env.local_process_id if env else 0)
    lsize = env.local_num_processes if env is not None and env.local_num_processes else int(lpid) + 1
    if coord is not None:
        from hlo.runtime.rendezvous import parse_address
        parse_address(coord)
    return ProcessInfo(int(pid), int(n), int(lpid), max(int(lsize), int(lpid) + 1), coord,
                       "tcp" if int(n) > 1 else "none", source)


def initialize(coordinator_address: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None, local_process_id: Optional[int] = None, *,
               initialization_timeout: Optional[float] = None) -> None:
    """Join the run: learn this process's place from the launcher (or the arguments), connect
    to the others, and return once every process has joined. A second call with the same
    arguments does nothing; with others it is an error."""
    global _args, _store
    args = (coordinator_address, num_processes, process_id, local_process_id)
    with _lock:
        if _args is not None:
            if args != _args:
                raise DistributedError(f"hlo.distributed.initialize() was called before with other "
                                       f"arguments {_describe(_args)}; now {_describe(args)}; call "
                                       f"hlo.distributed.shutdown() first")
            return
        timeout = timeout_seconds() if initialization_timeout is None else float(initialization_timeout)
        if not timeout > 0:
            raise DistributedError(f"initialization_timeout must be a positive number of seconds, "
                                   f"got {initialization_timeout!r}")
        if _finalized_mpi:
            env = processes.from_environment()
            if env is not None and env.transport == "mpi":
                raise DistributedError("MPI cannot be initialized again after "
                                       "hlo.distributed.shutdown() (MPI_Finalize is final)")
        info = _resolve(processes.from_environment(), *args)
        if info.transport == "tcp":
            from hlo.runtime.rendezvous import TcpStore
            store = TcpStore(info.coordinator_address, is_server=info.process_id == 0, timeout=timeout)
            try:
                _join(store, info, timeout)
            except BaseException:
                store.close()
                raise
            _store = store
        elif info.transport == "mpi":
            from hlo.runtime.cpu import mpi_collectives
            w = mpi_collectives.world()
            w.ibarrier().wait(timeout)
        processes.set_current(info)
        _args = args


def _join(store, info: ProcessInfo, timeout: float) -> None:
    """Every process announces itself at the store; two with one process id, or processes
    that disagree on the count, are errors."""
    claimed = store.add(f"hlo/init/claim/{info.process_id}", 1)
    if claimed > 1:
        raise DistributedError(f"two processes started as process {info.process_id} of "
                               f"{info.num_processes} (coordinator {info.coordinator_address}): "
                               f"every process needs its own RANK / process_id")
    store.set(f"hlo/init/count/{info.process_id}", str(info.num_processes).encode())
    try:
        store.barrier("hlo/init", info.num_processes, timeout)
    except DistributedTimeoutError as e:
        raise DistributedTimeoutError(f"hlo.distributed.initialize() on {info.describe()}: {e}") from None
    if info.process_id == 0:
        for i in range(1, info.num_processes):
            theirs = int(store.get(f"hlo/init/count/{i}", timeout))
            if theirs != info.num_processes:
                raise DistributedError(f"process {i} was started for {theirs} processes, process 0 "
                                       f"for {info.num_processes}: every process needs the same "
                                       f"WORLD_SIZE / num_processes")


def _describe(args) -> str:
    names = ("coordinator_address", "num_processes", "process_id", "local_process_id")
    given = [f"{n}={v!r}" for n, v in zip(names, args) if v is not None]
    return f"({', '.join(given)})"


def shutdown() -> None:
    """Leave the run: waits (at most the timeout) until every process has come here, then
    closes the rendezvous or finalizes MPI. Nothing to do where the run was not initialized."""
    global _args, _store, _finalized_mpi
    with _lock:
        info = processes.current()
        if _args is None or info is None:
            return
        try:
            if info.transport == "tcp" and _store is not None:
                _store.barrier("hlo/shutdown", info.num_processes)
                _leave(_store, info)
            elif info.transport == "mpi":
                from hlo.runtime.cpu import mpi_collectives
                mpi_collectives.world().barrier()
                mpi_collectives.finalize()
                _finalized_mpi = True
        finally:
            if _store is not None:
                _store.close()
            _store, _args = None, None
            processes.set_current(None)


def _leave(store, info: ProcessInfo) -> None:
    """Process 0 serves the store, so it closes it last: once every other process has said it
    leaves (the last reply to a leaving process may then be cut off: it ignores that)."""
    key = "hlo/shutdown/left"
    if info.process_id != 0:
        try:
            store.add(key, 1)
        except DistributedError:
            pass
        return
    deadline = time.monotonic() + store.timeout
    while store.add(key, 0) < info.num_processes - 1:
        if time.monotonic() > deadline:
            raise DistributedTimeoutError(f"hlo.distributed.shutdown() on process 0: not every process "
                                          f"left the rendezvous within {store.timeout:g} s")
        time.sleep(0.005)


def is_initialized() -> bool:
    return _args is not None


def process_index() -> int:
    """This process's index in the run (0 where the run was not initialized: one process)."""
    info = processes.current()
    return 0 if info is None else info.process_id


def process_count() -> int:
    """How many processes the run has (1 where it was not initialized)."""
    info = processes.current()
    return 1 if info is None else info.num_processes


def local_process_index() -> int:
    """This process's index among those on its host (its GPU, one process per GPU)."""
    info = processes.current()
    return 0 if info is None else info.local_process_id


def local_process_count() -> int:
    info = processes.current()
    return 1 if info is None else info.local_num_processes


def cpu_transport():
    """The MPI transport of this run (``hlo.runtime.cpu.mpi_collectives.MpiTransport`` over
    every process): what CPU collectives between processes go over."""
    info = processes.current()
    if info is None:
        raise DistributedError("hlo.distributed.initialize() has not been called")
    if info.transport != "mpi":
        raise DistributedError(f"CPU collectives between processes go over MPI; this run's processes "
                               f"meet over {info.transport!r} ({info.source}): launch it with "
                               f"`mpirun -n {info.num_processes} python ...`")
    from hlo.runtime.cpu import mpi_collectives
    return mpi_collectives.world()


def rendezvous():
    """The torchrun-style run's store (``hlo.runtime.rendezvous.TcpStore``), or None."""
    return _store
