"""Several CPU devices in one process, as XLA's host platform device count gives them.

``HLO_CPU_DEVICES=N`` (default 1, read once, at the first use) makes the CPU target show ``N``
devices (``devices()``: ``CpuDevice`` 0..N-1). A device is a worker thread of its own; an SPMD
run (``run_spmd``) calls one compiled program on every device of a ``num_replicas x
num_partitions`` grid at once, each with its own arguments, and the program's collectives
(``hlo.runtime.cpu.collectives``) meet in memory: the processes exchange whole numpy arrays
at a rendezvous (``hlo.ir.interp.collectives.ParallelRun``, the interpreter's), no element
passes through Python on its own. The threads share the process's worker pool (a device whose
kernel finds it busy runs its loop on its own thread) and the executable (each call takes an
arena of its own).

A process that fails fails the run, with its error, after every other process has stopped;
processes that deadlock (a collective some process never reaches) are an error naming them.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence

from hlo.ir.interp.collectives import ParallelRun, Process

ENV = "HLO_CPU_DEVICES"
MAX_DEVICES = 1024


class CpuDevice:
    """One CPU device (a worker thread of this process)."""

    __slots__ = ("id",)
    platform = "cpu"
    device_kind = "cpu"

    def __init__(self, id: int):
        self.id = id

    def __eq__(self, other):
        return isinstance(other, CpuDevice) and other.id == self.id

    def __hash__(self):
        return hash(("cpu", self.id))

    @property
    def process_index(self) -> int:
        """The process that holds this device (0 but in a run of several processes:
        ``hlo.runtime.cpu.process_spmd``)."""
        from hlo.runtime import processes
        info = processes.current()
        return self.id if info is not None and info.num_processes > 1 else 0

    def __repr__(self):
        return f"CpuDevice(id={self.id})"


class DeviceCountError(ValueError):
    """``HLO_CPU_DEVICES`` is not a device count, or a run needs more devices than there are."""


_count: Optional[int] = None
_lock = threading.Lock()
_workers: Optional[ThreadPoolExecutor] = None
_local = threading.local()


def reset() -> None:
    """Forget the device count (read ``HLO_CPU_DEVICES`` again at the next use) and the
    workers: for tests, and in a forked child (which has none of the parent's threads)."""
    global _count, _workers, _lock, _run_lock
    old = _workers
    _count, _workers = None, None
    _lock, _run_lock = threading.Lock(), threading.Lock()
    if old is not None and os.getpid() == _pid:
        old.shutdown(wait=False)


_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _pid, _workers
    _pid, _workers = os.getpid(), None
    reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def device_count() -> int:
    """The number of CPU devices: ``HLO_CPU_DEVICES`` (default 1), read at the first call."""
    global _count
    if _count is None:
        raw = os.environ.get(ENV, "").strip()
        if not raw:
            n = 1
        else:
            try:
                n = int(raw)
            except ValueError:
                n = 0
            if not 1 <= n <= MAX_DEVICES:
                raise DeviceCountError(f"{ENV}={raw!r} is not a device count (a whole number from 1 "
                                       f"to {MAX_DEVICES})")
        _count = n
    return _count


def devices() -> List[CpuDevice]:
    return [CpuDevice(i) for i in range(device_count())]


def current_process() -> Optional[Process]:
    """The process of the SPMD run this thread executes (None outside a run)."""
    return getattr(_local, "process", None)


def run_as(process: Process, call: Callable[[], list]) -> list:
    """``call()`` on this thread as ``process`` of an SPMD run (its collectives ask it how to
    meet the other processes: ``hlo.runtime.cpu.process_spmd``)."""
    _local.process = process
    try:
        return list(call())
    finally:
        _local.process = None


def _pool() -> ThreadPoolExecutor:
    """One worker thread per device, started at the first multi-device run."""
    global _workers
    with _lock:
        if _workers is None:
            _workers = ThreadPoolExecutor(max_workers=device_count(),
                                          thread_name_prefix="hlo-cpu-device")
        return _workers


# One SPMD run at a time holds the devices (a second caller waits), so every process of a run
# has a worker of its own.
_run_lock = threading.Lock()


def run_spmd(call: Callable[[int, Sequence], list], args: Sequence[Sequence],
             num_replicas: int = 1, num_partitions: int = 1) -> List[list]:
    """``call(i, args[i])`` on device ``i`` for every process ``i`` of the grid (replica-major:
    replica ``i // num_partitions``, partition ``i % num_partitions``), all at once; each
    process's results. Needs ``num_replicas * num_partitions`` devices."""
    n = num_replicas * num_partitions
    if num_replicas < 1 or num_partitions < 1:
        raise DeviceCountError(f"a run needs at least one replica and one partition, got "
                               f"{num_replicas} x {num_partitions}")
    if n > device_count():
        raise DeviceCountError(f"this program runs on {num_replicas} x {num_partitions} = {n} CPU "
                               f"devices, and there are {device_count()} ({ENV}="
                               f"{os.environ.get(ENV, '')!r}; set {ENV}={n} or more before the "
                               f"first use of hlo's devices)")
    if len(args) != n:
        raise DeviceCountError(f"{n} processes need {n} argument lists, got {len(args)}")
    if n == 1:
        _local.process = Process(None, 0, 0)
        try:
            return [list(call(0, args[0]))]
        finally:
            _local.process = None
    run = ParallelRun(num_replicas, num_partitions)
    procs = [Process(run, i // num_partitions, i % num_partitions) for i in range(n)]

    def work(i: int):
        _local.process = procs[i]
        try:
            out = list(call(i, args[i]))
        except BaseException:
            run.finish(procs[i].id, failed=True)
            raise
        finally:
            _local.process = None
        run.finish(procs[i].id, failed=False)
        return out

    pool = _pool()
    results, errors = [], []
    with _run_lock:
        futures = [pool.submit(work, i) for i in range(n)]
        for f in futures:
            try:
                results.append(f.result())
            except BaseException as e:
                results.append(None)
                errors.append(e)
    if errors:
        from hlo.ir.interp.collectives import _Failed
        real = [e for e in errors if not isinstance(e, _Failed)]
        raise (real or errors)[0]
    return results
