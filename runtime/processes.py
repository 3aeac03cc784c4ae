"""The processes of a multi-process run: who this process is (``ProcessInfo``), read from the
launcher's environment, and the settings every cross-process transport shares.

``hlo.distributed.initialize()`` (the frontend) fills the one ``ProcessInfo`` of this process
(``set_current``); the transports (``hlo.runtime.cpu.mpi_collectives``,
``hlo.runtime.cuda.nccl``) and the SPMD runtime read it with ``current()``.

Launchers, in the order ``from_environment`` looks for them:

- MPI (``mpirun``/``mpiexec``/``srun --mpi``): Open MPI's ``OMPI_COMM_WORLD_{RANK,SIZE,
  LOCAL_RANK,LOCAL_SIZE}``, MPICH/Hydra's ``PMI_RANK``/``PMI_SIZE`` (and ``MPI_LOCALRANKID``/
  ``MPI_LOCALNRANKS``), PMIx's ``PMIX_RANK`` (the size then comes from MPI itself). A run that
  an MPI launcher started talks over MPI (``transport == "mpi"``).
- torchrun-style: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (``LOCAL_WORLD_SIZE``),
  ``MASTER_ADDR``/``MASTER_PORT``: the processes meet at a TCP store on the coordinator
  (``hlo.runtime.rendezvous``; ``transport == "tcp"``).

``timeout_seconds()`` is the one bound on how long any cross-process wait may take
(``HLO_DISTRIBUTED_TIMEOUT``, seconds, default ``DEFAULT_TIMEOUT``): a collective or a
rendezvous that has not completed by then fails with ``DistributedTimeoutError``, naming the
operation and this process, instead of hanging.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Mapping, Optional

TIMEOUT_ENV = "HLO_DISTRIBUTED_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
CHECK_ENV = "HLO_DISTRIBUTED_CHECK"


class DistributedError(RuntimeError):
    """A multi-process run cannot start or continue: a missing or contradictory launcher
    environment, MPI or NCCL absent, a peer that failed."""


class DistributedTimeoutError(DistributedError):
    """A cross-process operation did not complete within ``HLO_DISTRIBUTED_TIMEOUT`` seconds:
    a peer process died, hangs, or runs a different program."""


@dataclass(frozen=True)
class ProcessInfo:
    """This process's place in the run: ``process_id`` of ``num_processes``, ``local_process_id``
    of ``local_num_processes`` on its host, the ``coordinator_address`` (``host:port``, or None
    where MPI connects the processes) and the ``transport`` the processes talk over (``"mpi"``,
    ``"tcp"``, or ``"none"`` for a run of one process). ``source`` names where each came from
    (the launcher's variables or the arguments), for error messages."""
    process_id: int
    num_processes: int
    local_process_id: int = 0
    local_num_processes: int = 1
    coordinator_address: Optional[str] = None
    transport: str = "none"
    source: str = "arguments"

    def __post_init__(self):
        if self.num_processes < 1:
            raise DistributedError(f"num_processes must be at least 1, got {self.num_processes} "
                                   f"({self.source})")
        if not 0 <= self.process_id < self.num_processes:
            raise DistributedError(f"process_id {self.process_id} is not in 0..{self.num_processes - 1} "
                                   f"({self.source})")
        if not 0 <= self.local_process_id < max(self.local_num_processes, 1):
            raise DistributedError(f"local process id {self.local_process_id} is not in "
                                   f"0..{self.local_num_processes - 1} ({self.source})")
        if self.transport not in ("mpi", "tcp", "none"):
            raise DistributedError(f"unknown transport {self.transport!r}: 'mpi', 'tcp' or 'none'")

    def describe(self) -> str:
        return f"process {self.process_id} of {self.num_processes}"


def _int(env: Mapping[str, str], name: str) -> Optional[int]:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise DistributedError(f"the launcher's {name}={raw!r} is not a whole number") from None


# (variables that mark the launcher, rank, size, local rank, local size) per MPI launcher
_MPI_LAUNCHERS = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI (MPICH/Hydra)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("PMIx", "PMIX_RANK", None, None, None),
)
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def mpi_launcher(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The name of the MPI launcher that started this process, or None."""
    env = os.environ if env is None else env
    for name, rank_var, *_ in _MPI_LAUNCHERS:
        if rank_var in env:
            return name
    return None


@dataclass(frozen=True)
class LaunchEnv:
    """What a launcher's variables say: its name (``source``), the rank and size (``None``
    where it does not say: PMIx leaves the size to MPI), the local rank and size, the
    coordinator (torchrun-style) and the transport its processes talk over."""
    source: str
    process_id: int
    num_processes: Optional[int]
    local_process_id: int
    local_num_processes: Optional[int]
    coordinator_address: Optional[str]
    transport: str


def from_environment(env: Optional[Mapping[str, str]] = None) -> Optional[LaunchEnv]:
    """What this process's launcher's variables say, or None where no launcher's variables are
    set. Variables that are set but incomplete or not numbers are an error naming them."""
    env = os.environ if env is None else env
    for name, rank_var, size_var, lrank_var, lsize_var in _MPI_LAUNCHERS:
        if rank_var not in env:
            continue
        lrank = _int(env, lrank_var) if lrank_var else None
        return LaunchEnv(f"{name}'s environment ({rank_var})", _int(env, rank_var),
                         _int(env, size_var) if size_var else None, lrank or 0,
                         _int(env, lsize_var) if lsize_var else None, None, "mpi")
    present = [v for v in TORCHRUN_VARS if v in env]
    if not present or present == ["LOCAL_RANK"]:
        return None
    missing = [v for v in ("RANK", "WORLD_SIZE") if v not in env]
    if missing:
        raise DistributedError(f"a torchrun-style launch sets RANK, WORLD_SIZE, MASTER_ADDR and "
                               f"MASTER_PORT; {', '.join(present)} set but {', '.join(missing)} missing")
    rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is None or size is None:
        raise DistributedError("RANK and WORLD_SIZE are set but empty")
    coordinator = None
    if size > 1:
        missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not env.get(v)]
        if missing:
            raise DistributedError(f"WORLD_SIZE={size} needs the coordinator's address: "
                                   f"{' and '.join(missing)} not set")
        coordinator = f"{env['MASTER_ADDR']}:{_int(env, 'MASTER_PORT')}"
    return LaunchEnv("RANK/WORLD_SIZE (torchrun-style)", rank, size, _int(env, "LOCAL_RANK") or 0,
                     _int(env, "LOCAL_WORLD_SIZE"), coordinator, "tcp" if size > 1 else "none")


def timeout_seconds(env: Optional[Mapping[str, str]] = None) -> float:
    """``HLO_DISTRIBUTED_TIMEOUT`` in seconds (default ``DEFAULT_TIMEOUT``): how long a
    cross-process wait may last before it fails."""
    env = os.environ if env is None else env
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        t = float(raw)
    except ValueError:
        t = -1.0
    if not t > 0 or t != t or t == float("inf"):
        raise DistributedError(f"{TIMEOUT_ENV}={raw!r} is not a timeout: a positive number of seconds")
    return t


def check_collectives(env: Optional[Mapping[str, str]] = None) -> bool:
    """``HLO_DISTRIBUTED_CHECK`` (default on; ``0`` turns it off, on every process alike):
    before each collective, the processes of its group compare what each calls (the
    collective, dtype, element count, reduction, root or pairs), so that a mismatched program
    is an error naming both sides instead of a hang, a crash in MPI, or a wrong result."""
    env = os.environ if env is None else env
    raw = env.get(CHECK_ENV, "1").strip().lower()
    if raw in ("1", "true", "yes", "on", ""):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise DistributedError(f"{CHECK_ENV}={raw!r}: 1 (check, the default) or 0")


_current: Optional[ProcessInfo] = None
_lock = threading.Lock()


def current() -> Optional[ProcessInfo]:
    """This process's ``ProcessInfo`` once ``hlo.distributed.initialize()`` ran, else None."""
    return _current


def set_current(info: Optional[ProcessInfo]) -> None:
    global _current
    with _lock:
        _current = info
