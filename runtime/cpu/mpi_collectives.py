"""Collectives between processes over MPI (mpi4py over the system's MPI library): the CPU
transport of a multi-process run.

``world()`` is the communicator of every process of the run (MPI is initialized at its first
call; ``hlo.distributed.initialize()`` makes it); ``MpiTransport.group(ranks)`` one of some of
them. Each collective takes numpy arrays (or any C-contiguous array over the arena's memory:
``buffer_at`` makes one from an address) and passes their memory to MPI as it is, without a
copy: data movement as bytes (every dtype, bfloat16 and float8 included), reductions with MPI's
own operations for the dtypes MPI has (bool, signed and unsigned integers of 8 to 64 bits,
float32/64, complex64/128) and, for the others (float16, bfloat16, float8), an all-gather and
the same numpy reduction in rank order on every process (the same result everywhere).

The collectives (``send`` is read, ``recv`` written; ``recv=None`` allocates it; ``recv`` may
be ``send`` for the in-place forms where MPI has one):

=====================================  ==========================================================
``all_reduce(send, recv, op)``         ``recv`` = ``op`` over every process's ``send``
``all_gather(send, recv)``             ``recv`` = every process's ``send``, in rank order
``reduce_scatter(send, recv, op)``     ``send`` holds ``size`` blocks; process r gets block r
                                       reduced over every process
``all_to_all(send, recv)``             block j of ``send`` goes to process j; block i of
                                       ``recv`` comes from process i
``permute(send, recv, pairs)``         ``(source, target)`` pairs; a process no pair targets
                                       gets zeros (StableHLO's collective_permute)
``broadcast(buf, root)``               ``buf`` of ``root``, in place everywhere
``barrier()``
=====================================  ==========================================================

``op`` is ``"sum"``, ``"prod"``, ``"min"``, ``"max"`` (or StableHLO's names for them: ``"add"``,
``"multiply"``, ``"minimum"``, ``"maximum"``), or for bool and integers ``"and"``, ``"or"``,
``"xor"`` (for bool, sum and max are or, prod and min are and, as XLA's add and multiply of
PRED). MPI may combine the processes' values in any order (a tree); ``ordered=True`` gathers
them and folds them in rank order instead, on every process, so that the result is bit for bit
a fold in rank order (what the in-process collectives compute). A "block" is ``1/size`` of the buffer's
elements in C order (concatenation along axis 0 when the caller's shapes are so). Each has a
non-blocking form (``iall_reduce``, ``iall_gather``, ``ireduce_scatter``, ``iall_to_all``,
``ipermute``, ``ibroadcast``, ``ibarrier``) that returns a ``Request``; ``wait()`` gives the
result, ``test()`` says whether it is done. The buffers belong to the request until it is.

With ``HLO_DISTRIBUTED_CHECK`` on (the default), the processes of a group first compare what
each calls (collective, dtype, element count, reduction, root or pairs: one small all-gather),
so that a program that differs across processes is an error naming each side, not a crash in
MPI (whose collectives do not check: an all-reduce of 65,536 elements against one of 16 wrote
past the smaller buffer) or a wrong result; with it on, a non-blocking collective starts once
every process of its group has called it. ``HLO_DISTRIBUTED_CHECK=0`` (on every process)
leaves the comparison out.

Every wait is bounded by ``HLO_DISTRIBUTED_TIMEOUT`` (``hlo.runtime.processes``): a collective
that a peer never joins (it died, hangs, or runs a different program) raises
``DistributedTimeoutError`` naming the collective, the group and this process; MPI's own errors
raise ``DistributedError``. Either marks the transport broken: later collectives fail at once,
and the process aborts the MPI job when it exits (``MPI_Abort``), so that the launcher ends
every other process with it rather than leaving them waiting.
"""
from __future__ import annotations

import atexit
import sys
import threading
import time
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from hlo.runtime.processes import (
    DistributedError,
    DistributedTimeoutError,
    check_collectives,
    timeout_seconds,
)

OPS = ("sum", "prod", "min", "max", "and", "or", "xor")
# the names of StableHLO's reduction bodies (hlo.runtime.cpu.collectives' computations) for them
ALIASES = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max"}


class MpiUnavailableError(DistributedError):
    """mpi4py or the MPI library it needs is not installed."""


def _import_mpi():
    try:
        import mpi4py
        if "mpi4py.MPI" not in sys.modules:
            # MPI is initialized by world(), not by the import: asking whether MPI is here
            # (unavailable_reason, a test's skip) must not make this process an MPI singleton
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = False
        from mpi4py import MPI
    except ImportError as e:
        raise MpiUnavailableError(
            f"MPI is not available: {e}. CPU collectives across processes need mpi4py and an MPI "
            f"library: apt-get install openmpi-bin libopenmpi-dev, then pip install 'hlo[mpi]'") from None
    except RuntimeError as e:  # mpi4py without a libmpi it can load
        raise MpiUnavailableError(f"mpi4py cannot load an MPI library: {e} (apt-get install "
                                  f"openmpi-bin libopenmpi-dev)") from None
    return MPI


def unavailable_reason() -> Optional[str]:
    """None where MPI can be used here, else why not (for tests' skip reasons)."""
    try:
        _import_mpi()
    except MpiUnavailableError as e:
        return str(e)
    return None


def buffer_at(address: int, shape: Sequence[int], dtype) -> np.ndarray:
    """A writable numpy array over ``prod(shape)`` elements of ``dtype`` at ``address`` (the
    arena's memory): what the collectives take, no copy."""
    import ctypes
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = (ctypes.c_char * n).from_address(int(address))
    return np.frombuffer(raw, dtype=dt).reshape(tuple(shape))


# -------------------------------------------------------------------------------------------
# dtypes and operations

_TYPES: Dict[str, object] = {}


def _mpi_type(MPI, dt: np.dtype):
    """MPI's datatype for reductions over ``dt``, or None where MPI has none."""
    if not _TYPES:
        _TYPES.update({
            "bool": MPI.C_BOOL, "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
            "int64": MPI.INT64_T, "uint8": MPI.UINT8_T, "uint16": MPI.UINT16_T, "uint32": MPI.UINT32_T,
            "uint64": MPI.UINT64_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE,
            "complex64": MPI.C_FLOAT_COMPLEX, "complex128": MPI.C_DOUBLE_COMPLEX,
        })
    return _TYPES.get(dt.name) if dt.kind in "biufc" else None


def _op_name(op: str, dt: np.dtype) -> str:
    """``op`` checked against ``dt``, aliases resolved."""
    name = ALIASES.get(op, op)
    if name not in OPS:
        raise DistributedError(f"reduction {op!r} is not one of {', '.join(OPS)} "
                               f"({', '.join(ALIASES)} are their StableHLO names)")
    if dt.kind == "c" and name not in ("sum", "prod"):
        raise DistributedError(f"{name} of complex values ({dt.name}) is not defined")
    if name in ("and", "or", "xor") and dt.kind not in "biu":
        raise DistributedError(f"{name} of {dt.name} values is not defined (bool and integers only)")
    return name


_OPS: Dict[bool, Dict[str, object]] = {}


def _mpi_op(MPI, op: str, dt: np.dtype):
    if not _OPS:
        _OPS[True] = {"sum": MPI.LOR, "max": MPI.LOR, "or": MPI.LOR, "prod": MPI.LAND, "min": MPI.LAND,
                      "and": MPI.LAND, "xor": MPI.LXOR}
        _OPS[False] = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX, "and": MPI.BAND,
                       "or": MPI.BOR, "xor": MPI.BXOR}
    return _OPS[dt.kind == "b"][op]


# numpy's add and multiply of bools are or and and, as XLA's of PRED
_NUMPY_REDUCE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
                 "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _contiguous(a, what: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
    if not a.flags.c_contiguous:
        raise DistributedError(f"{what} must be C-contiguous (a collective passes its memory to MPI "
                               f"as it is), got strides {a.strides} for shape {a.shape}")
    return a


def _bytes(a: np.ndarray) -> np.ndarray:
    """The array's memory as uint8, a view (every dtype: bfloat16's has no buffer format)."""
    return a.reshape(-1).view(np.uint8)


def _writable(a: np.ndarray, what: str) -> np.ndarray:
    if not a.flags.writeable:
        raise DistributedError(f"{what} is read-only")
    return a


# -------------------------------------------------------------------------------------------
# requests


class Request:
    """A collective in flight. ``wait()`` returns its result (bounded by the transport's
    timeout), ``test()`` whether it is done; ``then`` runs once it is (the reductions MPI has
    no operation for)."""

    def __init__(self, transport: "MpiTransport", reqs: list, result, what: str,
                 then: Optional[Callable[[], None]] = None, keep: tuple = ()):
        self.transport, self._reqs, self._result, self.what = transport, reqs, result, what
        self._then, self._keep, self._done = then, keep, False

    def test(self) -> bool:
        if self._done:
            return True
        t = self.transport
        if t._world._broken is not None:
            t._check()
        try:
            reqs = self._reqs
            done = reqs[0].Test() if len(reqs) == 1 else all([r.Test() for r in reqs])
        except Exception as e:
            raise t._fail(DistributedError(f"{self.what} failed in MPI on {t.describe()}: {e}")) from None
        if done:
            self._finish()
        return done

    def _finish(self):
        self._done, self._keep, self._reqs = True, (), []
        if self._then is not None:
            then, self._then = self._then, None
            then()

    def wait(self, timeout: Optional[float] = None):
        """The result once every process has joined; ``DistributedTimeoutError`` after
        ``timeout`` (default: the transport's, ``HLO_DISTRIBUTED_TIMEOUT``) seconds."""
        limit = self.transport.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        deadline, spin_until = start + limit, start + SPIN_SECONDS
        pause = 0.0
        while not self.test():
            now = time.monotonic()
            if now > deadline:
                raise self.transport._fail(DistributedTimeoutError(
                    f"hlo.distributed: {self.what} on {self.transport.describe()} did not complete "
                    f"within {limit:g} s (HLO_DISTRIBUTED_TIMEOUT): a peer process died, hangs, or runs "
                    f"a different program"))
            # MPI progresses a non-blocking collective inside Test: spin first, as MPI's own
            # blocking wait does (a sleep here would stall the peers too: 4 KiB all-reduces took
            # 280 us with a backoff from the start, 8 us spinning), then back off to 1 ms so that
            # a peer that is still computing does not cost a core
            if now > spin_until:
                time.sleep(pause)
                pause = min(1e-3, pause * 2 if pause else 2e-5)
        return self._result


# -------------------------------------------------------------------------------------------
# the transport


class MpiTransport:
    """Collectives over one MPI communicator: ``rank`` of ``size`` processes, ``ranks`` their
    ranks in the world communicator."""

    def __init__(self, comm, ranks: Tuple[int, ...], timeout: float, parent: Optional["MpiTransport"] = None):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.ranks = ranks
        self.timeout = timeout
        self._world: MpiTransport = parent._world if parent is not None else self
        self._groups: Dict[Tuple[int, ...], "MpiTransport"] = {}
        self._lock = threading.Lock()
        self._broken: Optional[BaseException] = None
        self.MPI = _import_mpi()
        self.check: bool = parent.check if parent is not None else check_collectives()

    def describe(self) -> str:
        w = self._world
        where = f"process {w.rank} of {w.size}"
        return where if self is w else f"{where} (group of processes {list(self.ranks)})"

    # failure state lives on the world transport: one broken communicator breaks the run
    def _check(self):
        b = self._world._broken
        if b is not None:
            raise DistributedError(f"the distributed run failed earlier ({b}); no collective can run "
                                   f"after that")

    def _fail(self, err: BaseException) -> BaseException:
        w = self._world
        if w._broken is None:
            w._broken = err
            print(f"{err}\nhlo.distributed: {w.describe()} will abort the MPI job when it exits",
                  file=sys.stderr, flush=True)
            atexit.register(_abort_at_exit, w)
        return err

    def group(self, ranks: Iterable[int]) -> "MpiTransport":
        """The transport of the processes ``ranks`` (world ranks, in the order that gives their
        ranks in the group), made once; collective over those processes only."""
        key = tuple(int(r) for r in ranks)
        if self is not self._world:
            return self._world.group(key)
        if sorted(set(key)) != sorted(key) or not all(0 <= r < self.size for r in key):
            raise DistributedError(f"a process group lists distinct ranks of 0..{self.size - 1}, got {list(key)}")
        if self.rank not in key:
            raise DistributedError(f"process {self.rank} is not in the group {list(key)} it asks for")
        with self._lock:
            g = self._groups.get(key)
            if g is None:
                if key == tuple(range(self.size)):
                    g = self
                else:
                    self._check()
                    comm = self.comm.Create_group(self.comm.Get_group().Incl(list(key)))
                    g = MpiTransport(comm, key, self.timeout, self)
                self._groups[key] = g
        return g

    # --- the non-blocking collectives (each blocking one is its i-form's wait) ---------------

    def _agree(self, what: str, kind: str, dtype=None, count: int = 0, op: Optional[str] = None,
               extra: int = 0) -> None:
        """With ``HLO_DISTRIBUTED_CHECK`` on (the default): every process of the group says
        what it calls (one small all-gather) and a difference is an error naming each side,
        before MPI touches a buffer."""
        if not self.check or self.size == 1:
            return
        self._check()
        rec = np.zeros(_SIG_WORDS, np.int64)
        rec[0], rec[1], rec[2], rec[3] = _KINDS.index(kind), OPS.index(op) if op else -1, count, extra
        rec[4:6] = np.frombuffer((dtype.name if dtype is not None else "").encode()[:16].ljust(16, b"\0"), np.int64)
        every = np.empty((self.size, _SIG_WORDS), np.int64)
        t = self.MPI.INT64_T
        r = self._start(kind, self.comm.Iallgather, [rec, _SIG_WORDS, t], [every, _SIG_WORDS, t])
        Request(self, [r], every, what, keep=(rec, every)).wait()  # a timeout here names the collective
        if (every != rec).any():
            sides = "; ".join(f"process {self.ranks[i]} calls {_describe_sig(row)}" for i, row in enumerate(every))
            raise self._fail(DistributedError(
                f"hlo.distributed: the processes {list(self.ranks)} call different collectives (seen on "
                f"{self._world.describe()}): {sides}. Every process of a group must call the same collectives in the same order, "
                f"with the same dtypes and sizes (HLO_DISTRIBUTED_CHECK compared them)"))

    def _start(self, what: str, fn, *args):
        self._check()
        try:
            return fn(*args)
        except DistributedError:
            raise
        except Exception as e:
            raise self._fail(DistributedError(f"{what} could not start in MPI on {self.describe()}: {e}")) from None

    def _pair(self, send, recv, n_recv: int, what: str, recv_shape=None) -> Tuple[np.ndarray, np.ndarray]:
        send = _contiguous(send, f"{what}'s send buffer")
        if recv is None:
            recv = np.empty(recv_shape if recv_shape is not None else send.shape, send.dtype)
        recv = _writable(_contiguous(recv, f"{what}'s receive buffer"), f"{what}'s receive buffer")
        if recv.dtype != send.dtype:
            raise DistributedError(f"{what}: the receive buffer is {recv.dtype}, the send buffer {send.dtype}")
        if recv.size != n_recv:
            raise DistributedError(f"{what} over {self.size} processes: the receive buffer holds "
                                   f"{recv.size} elements, it needs {n_recv} (send: {send.size})")
        return send, recv

    def _blocks(self, a: np.ndarray, what: str) -> int:
        if a.size % self.size:
            raise DistributedError(f"{what}: {a.size} elements do not split into {self.size} equal blocks")
        return a.size // self.size

    def iall_reduce(self, send, recv=None, op: str = "sum", ordered: bool = False) -> Request:
        what = f"all_reduce({op})"
        send = _contiguous(send, f"{what}'s send buffer")
        op = _op_name(op, send.dtype)
        send, recv = self._pair(send, recv, send.size, what)
        what = f"all_reduce({op}, {send.dtype.name}[{send.size}])"
        MPI = self.MPI
        t = _mpi_type(MPI, send.dtype)
        self._agree(what, "all_reduce", send.dtype, send.size, op, int(ordered))
        if t is None or ordered:
            return self._gather_reduce(send, recv, op, what, scatter=False)
        mop = _mpi_op(MPI, op, send.dtype)
        src = MPI.IN_PLACE if send is recv else [_bytes(send), send.size, t]
        r = self._start(what, self.comm.Iallreduce, src, [_bytes(recv), recv.size, t], mop)
        return Request(self, [r], recv, what, keep=(send, recv))

    def iall_gather(self, send, recv=None) -> Request:
        send = _contiguous(send, "all_gather's send buffer")
        what = f"all_gather({send.dtype.name}[{send.size}])"
        send, recv = self._pair(send, recv, send.size * self.size, what,
                                (send.shape[0] * self.size,) + send.shape[1:] if send.ndim else (self.size,))
        self._agree(what, "all_gather", send.dtype, send.size)
        B = self.MPI.BYTE
        r = self._start(what, self.comm.Iallgather, [_bytes(send), send.nbytes, B], [_bytes(recv), send.nbytes, B])
        return Request(self, [r], recv, what, keep=(send, recv))

    def ireduce_scatter(self, send, recv=None, op: str = "sum", ordered: bool = False) -> Request:
        send = _contiguous(send, "reduce_scatter's send buffer")
        op = _op_name(op, send.dtype)
        what = f"reduce_scatter({op}, {send.dtype.name}[{send.size}])"
        n = self._blocks(send, what)
        shape = (send.shape[0] // self.size,) + send.shape[1:] if send.ndim and send.shape[0] % self.size == 0 else (n,)
        send, recv = self._pair(send, recv, n, what, shape)
        MPI = self.MPI
        t = _mpi_type(MPI, send.dtype)
        self._agree(what, "reduce_scatter", send.dtype, send.size, op, int(ordered))
        if t is None or ordered:
            return self._gather_reduce(send, recv, op, what, scatter=True)
        mop = _mpi_op(MPI, op, send.dtype)
        r = self._start(what, self.comm.Ireduce_scatter_block, [_bytes(send), n, t], [_bytes(recv), n, t], mop)
        return Request(self, [r], recv, what, keep=(send, recv))

    def iall_to_all(self, send, recv=None) -> Request:
        send = _contiguous(send, "all_to_all's send buffer")
        what = f"all_to_all({send.dtype.name}[{send.size}])"
        self._blocks(send, what)
        send, recv = self._pair(send, recv, send.size, what)
        if send is recv:
            raise DistributedError(f"{what}: the receive buffer must not be the send buffer")
        self._agree(what, "all_to_all", send.dtype, send.size)
        B, nb = self.MPI.BYTE, send.nbytes // self.size
        r = self._start(what, self.comm.Ialltoall, [_bytes(send), nb, B], [_bytes(recv), nb, B])
        return Request(self, [r], recv, what, keep=(send, recv))

    def ipermute(self, send, recv=None, pairs: Sequence[Tuple[int, int]] = ()) -> Request:
        send = _contiguous(send, "permute's send buffer")
        pairs = [(int(s), int(t)) for s, t in pairs]
        what = f"permute({send.dtype.name}[{send.size}], pairs {pairs})"
        for s, t in pairs:
            if not (0 <= s < self.size and 0 <= t < self.size):
                raise DistributedError(f"{what}: a pair names a process outside 0..{self.size - 1}")
        srcs, dsts = [s for s, _ in pairs], [t for _, t in pairs]
        if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
            raise DistributedError(f"{what}: each process may be the source of one pair and the "
                                   f"target of one pair")
        send, recv = self._pair(send, recv, send.size, what)
        me = self.rank
        to = [t for s, t in pairs if s == me]
        frm = [s for s, t in pairs if t == me]
        if send is recv and (to or frm) and not (to == [me] and frm == [me]):
            raise DistributedError(f"{what}: the receive buffer must not be the send buffer")
        self._agree(what, "permute", send.dtype, send.size, extra=zlib.crc32(repr(sorted(pairs)).encode()))
        reqs = []
        B = self.MPI.BYTE
        if frm and frm[0] == me:
            if recv is not send:
                np.copyto(recv, send)
        elif frm:
            reqs.append(self._start(what, self.comm.Irecv, [_bytes(recv), recv.nbytes, B], frm[0], _PERMUTE_TAG))
        else:
            recv[...] = 0
        if to and to[0] != me:
            reqs.append(self._start(what, self.comm.Isend, [_bytes(send), send.nbytes, B], to[0], _PERMUTE_TAG))
        return Request(self, reqs, recv, what, keep=(send, recv))

    def ibroadcast(self, buf, root: int = 0) -> Request:
        buf = _contiguous(buf, "broadcast's buffer")
        what = f"broadcast({buf.dtype.name}[{buf.size}], root {root})"
        if not 0 <= int(root) < self.size:
            raise DistributedError(f"{what}: root is not one of the processes 0..{self.size - 1}")
        if self.rank != root:
            _writable(buf, f"{what}'s buffer")
        self._agree(what, "broadcast", buf.dtype, buf.size, extra=int(root))
        r = self._start(what, self.comm.Ibcast, [_bytes(buf), buf.nbytes, self.MPI.BYTE], int(root))
        return Request(self, [r], buf, what, keep=(buf,))

    def ibarrier(self) -> Request:
        self._agree("barrier", "barrier")
        return Request(self, [self._start("barrier", self.comm.Ibarrier)], None, "barrier")

    def _gather_reduce(self, send, recv, op, what, scatter: bool) -> Request:
        """A reduction MPI has no operation for: every process gathers every ``send`` and
        reduces them in rank order with numpy (the same arithmetic everywhere)."""
        ufunc = _NUMPY_REDUCE[op]
        flat = send.reshape(-1)
        if not scatter:
            gathered = np.empty((self.size, flat.size), send.dtype)
        else:
            flat = flat.reshape(self.size, -1)
            gathered = np.empty((self.size, flat.shape[1]), send.dtype)
        B, nb = self.MPI.BYTE, (flat.nbytes if not scatter else flat.nbytes // self.size)
        if scatter:  # every process needs only its block from each: an all-to-all
            r = self._start(what, self.comm.Ialltoall, [_bytes(send), nb, B], [_bytes(gathered), nb, B])
        else:
            r = self._start(what, self.comm.Iallgather, [_bytes(send), nb, B], [_bytes(gathered), nb, B])
        out = recv.reshape(-1)

        def reduce():
            acc = gathered[0].copy()
            for i in range(1, self.size):
                acc = ufunc(acc, gathered[i]).astype(send.dtype)
            out[...] = acc

        return Request(self, [r], recv, what, then=reduce, keep=(send, recv, gathered))

    # --- blocking forms ----------------------------------------------------------------------

    def all_reduce(self, send, recv=None, op: str = "sum", ordered: bool = False):
        return self.iall_reduce(send, recv, op, ordered).wait()

    def all_gather(self, send, recv=None):
        return self.iall_gather(send, recv).wait()

    def reduce_scatter(self, send, recv=None, op: str = "sum", ordered: bool = False):
        return self.ireduce_scatter(send, recv, op, ordered).wait()

    def all_to_all(self, send, recv=None):
        return self.iall_to_all(send, recv).wait()

    def permute(self, send, recv=None, pairs: Sequence[Tuple[int, int]] = ()):
        return self.ipermute(send, recv, pairs).wait()

    def broadcast(self, buf, root: int = 0):
        return self.ibroadcast(buf, root).wait()

    def barrier(self) -> None:
        self.ibarrier().wait()


_PERMUTE_TAG = 0x4C0
_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "permute", "broadcast", "barrier")
_SIG_WORDS = 6  # kind, op, element count, extra (ordered / root / pairs' crc32), dtype name (16 bytes)


def _describe_sig(row) -> str:
    kind = _KINDS[row[0]] if 0 <= row[0] < len(_KINDS) else f"collective #{row[0]}"
    if kind == "barrier":
        return "barrier()"
    dtype = row[4:6].astype(np.int64).tobytes().rstrip(b"\0").decode(errors="replace")
    parts = [f"{dtype}[{row[2]}]"]
    if row[1] >= 0:
        parts.insert(0, OPS[row[1]])
    if kind in ("all_reduce", "reduce_scatter") and row[3]:
        parts.append("ordered")
    if kind == "broadcast":
        parts.append(f"root {row[3]}")
    if kind == "permute":
        parts.append(f"pairs #{row[3]:08x}")
    return f"{kind}({', '.join(parts)})"
SPIN_SECONDS = 0.01  # how long a wait polls without sleeping


def wait_all(requests: Sequence[Request]) -> List:
    """Every request's result, in order."""
    return [r.wait() for r in requests]


# -------------------------------------------------------------------------------------------
# the world communicator

_world: Optional[MpiTransport] = None
_world_lock = threading.Lock()


def world(timeout: Optional[float] = None) -> MpiTransport:
    """The transport over every process of the run (MPI initialized at the first call, with
    MPI_THREAD_MULTIPLE: several devices' threads may call at once)."""
    global _world
    with _world_lock:
        if _world is None:
            MPI = _import_mpi()
            if not MPI.Is_initialized():
                MPI.Init_thread(MPI.THREAD_MULTIPLE)
                # under mpirun, a process that ends without MPI_Finalize fails the job
                atexit.register(_finalize_at_exit)
            comm = MPI.COMM_WORLD
            comm.Set_errhandler(MPI.ERRORS_RETURN)
            n = comm.Get_size()
            _world = MpiTransport(comm, tuple(range(n)), timeout_seconds() if timeout is None else timeout)
        elif timeout is not None:
            _world.timeout = float(timeout)
        return _world


def initialized() -> bool:
    return _world is not None


def library_version() -> str:
    """The MPI library mpi4py runs on (its first line)."""
    return _import_mpi().Get_library_version().splitlines()[0].strip()


def thread_level() -> str:
    MPI = _import_mpi()
    names = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    return names.get(MPI.Query_thread(), "?")


def finalize() -> None:
    """Finalize MPI (``hlo.distributed.shutdown()``); after a failure, abort the job instead
    (a finalize would wait for the peers that failed)."""
    global _world
    with _world_lock:
        w, _world = _world, None
    if w is None:
        return
    if w._broken is not None:
        _abort_at_exit(w)
        return
    MPI = w.MPI
    if MPI.Is_initialized() and not MPI.Is_finalized():
        for g in set(w._groups.values()):
            if g is not w:
                g.comm.Free()
        MPI.Finalize()


def _finalize_at_exit() -> None:
    w = _world
    if w is not None and w._broken is None:
        finalize()


def _abort_at_exit(w: MpiTransport) -> None:
    try:
        sys.stderr.flush()
        sys.stdout.flush()
    finally:
        w.MPI.COMM_WORLD.Abort(1)
