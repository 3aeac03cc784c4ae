"""A small ctypes binding to NCCL: the GPU collectives of multi-process and multi-GPU runs.

The library is found as cuBLASLt is (``cublaslt._open_library``): the copy in an NVIDIA wheel
beside this interpreter's packages (``nvidia/nccl/lib/libnccl.so.2``: torch's
``nvidia-nccl-cu12``/``-cu13``), the soname through the dynamic loader (LD_LIBRARY_PATH, a copy
already loaded), then ``cuda.pathfinder.load_nvidia_dynamic_lib("nccl")``. ``version()`` and
``unique_id()`` need no GPU.

A communicator (``Communicator``) is made one of two ways, as JAX has them:

- one process per GPU: process 0 makes the unique id (``unique_id()``), every process gets it
  (``bootstrap_unique_id(rank, via)``: over the run's MPI transport,
  ``hlo.runtime.cpu.mpi_collectives``, or its torchrun-style TCP store,
  ``hlo.runtime.rendezvous.TcpStore``) and calls ``Communicator.init_rank(nranks, uid, rank,
  device)``;
- one process driving every local GPU: ``Communicator.init_all(devices)``, one communicator a
  device; the calls for several devices go between ``group_start()`` and ``group_end()``
  (``with group():``).

Collectives take device pointers (ints), element counts and a dtype name (numpy's: ``float32``,
``bfloat16``, ``int64``, ...), and queue on a stream (a ``driver.Stream`` or a raw CUstream
handle): ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``send``/``recv``,
and, made of grouped sends and receives (NCCL before 2.28 has no all-to-all), ``all_to_all`` and
``permute`` (StableHLO's collective_permute: a device no pair targets gets zeros). Data movement
takes any dtype (as bytes where NCCL has no type); reductions take the types NCCL reduces (bool
as uint8 with max/min for sum/prod, complex sums as float sums of the parts).

Failure: ``Communicator.wait(stream)`` waits for the stream while polling
``ncclCommGetAsyncError``; a communicator error, or no completion within
``HLO_DISTRIBUTED_TIMEOUT`` seconds (a peer died, hangs, or runs a different program), aborts
the communicator (``ncclCommAbort``: its kernels return) and raises ``NcclError`` /
``DistributedTimeoutError`` naming the collective and the rank.

Enum values are ``nccl.h``'s (NCCL 2.x); ``HEADER_ENUMS`` lists each with its header name, and
a test checks them against the header installed beside the library.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from typing import List, Optional, Sequence, Tuple

from hlo.runtime.processes import DistributedError, DistributedTimeoutError, timeout_seconds

from .errors import CudaError, CudaUnavailableError

# ncclResult_t
RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
           4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
           8: "ncclTimeout"}
ncclSuccess, ncclInProgress = 0, 7
# ncclRedOp_t
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
# ncclDataType_t, by numpy's dtype names
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3fn": 10, "float8_e5m2": 11}
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
            "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
            "float8_e4m3fn": 1, "float8_e5m2": 1, "complex64": 8, "complex128": 16}
UNIQUE_ID_BYTES = 128

HEADER_ENUMS = {
    **{name: code for code, name in RESULTS.items()},
    "ncclSum": 0, "ncclProd": 1, "ncclMax": 2, "ncclMin": 3, "ncclAvg": 4,
    "ncclInt8": 0, "ncclUint8": 1, "ncclInt32": 2, "ncclUint32": 3, "ncclInt64": 4, "ncclUint64": 5,
    "ncclFloat16": 6, "ncclFloat32": 7, "ncclFloat64": 8, "ncclBfloat16": 9, "ncclFloat8e4m3": 10,
    "ncclFloat8e5m2": 11, "NCCL_UNIQUE_ID_BYTES": UNIQUE_ID_BYTES,
}


class NcclError(CudaError):
    """An NCCL call failed, or a communicator reported an asynchronous error."""


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_lib = None
_lib_lock = threading.Lock()


def _open_library() -> ctypes.CDLL:
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
    except (ImportError, ValueError):
        roots = []
    for root in roots:
        for folder in ("nccl", "cu13", "cu12"):
            path = os.path.join(root, folder, "lib", "libnccl.so.2")
            if os.path.exists(path):
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    pass
    try:
        return ctypes.CDLL("libnccl.so.2")
    except OSError:
        pass
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        path = load_nvidia_dynamic_lib("nccl").abs_path
    except ImportError as e:
        raise CudaUnavailableError(f"NCCL (libnccl.so.2) was not found, and cuda-pathfinder, which looks "
                                   f"further, is not installed (pip install 'hlo[cuda]' nvidia-nccl-cu13): "
                                   f"{e}") from None
    except Exception as e:
        raise CudaUnavailableError(f"NCCL (libnccl.so.2) was not found: {e} (pip install "
                                   f"nvidia-nccl-cu13, or the cu12 wheel for a CUDA 12 driver)") from None
    return ctypes.CDLL(path)


def library() -> ctypes.CDLL:
    """libnccl with the signatures used here (opened once)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = _open_library()
        P, I, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        sigs = {
            "ncclGetVersion": [P], "ncclGetUniqueId": [P],
            "ncclCommInitRank": [P, I, UniqueId, I], "ncclCommInitAll": [P, I, P],
            "ncclCommDestroy": [P], "ncclCommAbort": [P], "ncclCommGetAsyncError": [P, P],
            "ncclCommCount": [P, P], "ncclCommCuDevice": [P, P], "ncclCommUserRank": [P, P],
            "ncclAllReduce": [P, P, SZ, I, I, P, P], "ncclBroadcast": [P, P, SZ, I, I, P, P],
            "ncclReduceScatter": [P, P, SZ, I, I, P, P], "ncclAllGather": [P, P, SZ, I, P, P],
            "ncclSend": [P, SZ, I, I, P, P], "ncclRecv": [P, SZ, I, I, P, P],
            "ncclGroupStart": [], "ncclGroupEnd": [],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        lib.ncclGetErrorString.argtypes = [I]
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        if hasattr(lib, "ncclGetLastError"):
            lib.ncclGetLastError.argtypes = [P]
            lib.ncclGetLastError.restype = ctypes.c_char_p
        _lib = lib
        return lib


def library_path() -> str:
    """Where the loaded libnccl lies (the dynamic loader's map of this process)."""
    lib = library()
    name = getattr(lib, "_name", "") or ""
    if name.startswith("/"):
        return name
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/libnccl.so" in path:
                    return path
    except OSError:
        pass
    return name


def unavailable_reason() -> Optional[str]:
    """None where NCCL loads here, else why not (for tests' skip reasons)."""
    try:
        library()
    except CudaUnavailableError as e:
        return str(e)
    return None


def _check(status: int, call: str, what: str = "", comm=None) -> None:
    if status == ncclSuccess:
        return
    lib = library()
    name = RESULTS.get(status, f"ncclResult {status}")
    text = lib.ncclGetErrorString(status)
    detail = ""
    if comm is not None and hasattr(lib, "ncclGetLastError"):
        last = lib.ncclGetLastError(comm)
        detail = f"; {last.decode(errors='replace')}" if last else ""
    raise NcclError(f"{call} failed: {name} ({text.decode(errors='replace') if text else ''}{detail})"
                    + (f" while {what}" if what else ""), call, name)


def version() -> int:
    """NCCL's version code (major*10000 + minor*100 + patch since 2.9; e.g. 23203)."""
    v = ctypes.c_int()
    _check(library().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value


def version_string() -> str:
    v = version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def unique_id() -> bytes:
    """A new unique id (128 bytes): process 0 makes it, every process of the communicator
    passes it to ``Communicator.init_rank``."""
    uid = UniqueId()
    _check(library().ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    return bytes(uid)  # all 128 bytes (the field's value would stop at the first zero byte)


def bootstrap_unique_id(rank: int, via, key: str = "hlo/nccl/world", nranks: Optional[int] = None) -> bytes:
    """The unique id of a communicator, made by rank 0 and sent to every process ``via`` the
    run's MPI transport (``MpiTransport``: a broadcast) or its TCP store (``TcpStore``: rank 0
    sets ``key``, the others wait for it; with ``nranks``, all of them then meet at a barrier).
    Either way every rank has arrived when it returns, or it fails within
    ``HLO_DISTRIBUTED_TIMEOUT``: ``ncclCommInitRank``, which waits for the ranks without a
    bound, is then only left waiting for a rank that dies between the two. Each communicator of
    a run needs its own ``key``."""
    import numpy as np
    if hasattr(via, "broadcast") and hasattr(via, "comm"):  # an MpiTransport
        buf = np.zeros(UNIQUE_ID_BYTES, np.uint8)
        if via.rank == 0:
            buf[:] = np.frombuffer(unique_id(), np.uint8)
        via.broadcast(buf, 0)  # bounded: every process has come here once it returns
        return buf.tobytes()
    if hasattr(via, "get") and hasattr(via, "set") and hasattr(via, "barrier"):  # a TcpStore
        if rank == 0:
            uid = unique_id()
            via.set(key, uid)
        else:
            uid = via.get(key)
            if len(uid) != UNIQUE_ID_BYTES:
                raise DistributedError(f"the rendezvous's {key!r} holds {len(uid)} bytes, not an NCCL unique id")
        if nranks is not None:
            # ncclCommInitRank waits for every rank without a bound: meet here first, bounded
            via.barrier(f"{key}/ready", nranks)
        return uid
    raise DistributedError(f"bootstrap_unique_id needs an MpiTransport or a TcpStore, got {type(via).__name__}")


def _stream_handle(stream) -> int:
    if stream is None:
        return 0
    if hasattr(stream, "ptr"):
        return int(stream.ptr)
    return int(stream)


def _typed(dtype: str, count: int, op: Optional[str]) -> Tuple[int, int, Optional[int]]:
    """(NCCL type, element count in that type, NCCL op) for ``count`` elements of ``dtype``."""
    name = str(dtype)
    if name not in ITEMSIZE:
        raise DistributedError(f"NCCL collectives do not take {name} data")
    if op is None:  # data movement: any dtype, as bytes where NCCL has no type of its own
        if name in DTYPES:
            return DTYPES[name], count, None
        return DTYPES["uint8"], count * ITEMSIZE[name], None
    if op not in ("sum", "prod", "min", "max"):
        raise DistributedError(f"reduction {op!r} is not one of sum, prod, min, max")
    if name == "bool":  # XLA's add and multiply of PRED: or, and
        return DTYPES["uint8"], count, OPS["max" if op in ("sum", "max") else "min"]
    if name in ("complex64", "complex128"):
        if op != "sum":
            raise DistributedError(f"{op} of complex values ({name}) is not an NCCL reduction")
        return DTYPES["float32" if name == "complex64" else "float64"], 2 * count, OPS["sum"]
    if name not in DTYPES:
        raise DistributedError(f"NCCL cannot reduce {name} data (its types: {', '.join(DTYPES)})")
    if name.startswith("float8") and version() < 21900:
        raise DistributedError(f"NCCL {version_string()} cannot reduce {name} (2.19 and later can)")
    return DTYPES[name], count, OPS[op]




def group_start() -> None:
    _check(library().ncclGroupStart(), "ncclGroupStart")


def group_end() -> None:
    _check(library().ncclGroupEnd(), "ncclGroupEnd")


@contextlib.contextmanager
def group():
    """The calls inside are one NCCL group (one launch; required where one thread drives
    several devices' communicators, and for matched sends and receives)."""
    group_start()
    try:
        yield
    finally:
        group_end()


class Communicator:
    """One rank of an NCCL communicator (``comm``: the ncclComm_t handle)."""

    def __init__(self, handle: ctypes.c_void_p):
        self.handle = handle
        lib = library()
        n, r, d = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        _check(lib.ncclCommCount(handle, ctypes.byref(n)), "ncclCommCount", comm=handle)
        _check(lib.ncclCommUserRank(handle, ctypes.byref(r)), "ncclCommUserRank", comm=handle)
        _check(lib.ncclCommCuDevice(handle, ctypes.byref(d)), "ncclCommCuDevice", comm=handle)
        self.size, self.rank, self.device = n.value, r.value, d.value
        self.timeout = timeout_seconds()
        self.aborted = False

    def __repr__(self):
        return f"Communicator(rank {self.rank} of {self.size}, GPU {self.device})"

    @classmethod
    def init_rank(cls, nranks: int, uid: bytes, rank: int, device: int = 0) -> "Communicator":
        """This process's rank of ``nranks`` (one process per GPU), on ``device``; every rank
        calls it with the same ``uid`` (blocks until they all have)."""
        if len(uid) != UNIQUE_ID_BYTES:
            raise DistributedError(f"an NCCL unique id is {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
        if not 0 <= rank < nranks:
            raise DistributedError(f"rank {rank} is not in 0..{nranks - 1}")
        from . import driver
        driver.get_context(device).make_current()  # NCCL works on the current device
        u = UniqueId.from_buffer_copy(uid)
        h = ctypes.c_void_p()
        _check(library().ncclCommInitRank(ctypes.byref(h), int(nranks), u, int(rank)), "ncclCommInitRank",
               f"joining as rank {rank} of {nranks} on GPU {device}")
        return cls(h)

    @classmethod
    def init_all(cls, devices: Sequence[int]) -> List["Communicator"]:
        """One communicator for each of ``devices`` of this process (one process driving
        every local GPU), rank i on ``devices[i]``."""
        devs = [int(d) for d in devices]
        if not devs or len(set(devs)) != len(devs):
            raise DistributedError(f"init_all needs distinct devices, got {devs}")
        from . import driver
        for d in devs:
            driver.get_context(d)
        handles = (ctypes.c_void_p * len(devs))()
        arr = (ctypes.c_int * len(devs))(*devs)
        _check(library().ncclCommInitAll(handles, len(devs), arr), "ncclCommInitAll", f"on GPUs {devs}")
        return [cls(ctypes.c_void_p(h)) for h in handles]

    # --- failure ---------------------------------------------------------------------------

    def async_error(self) -> Optional[str]:
        """None while the communicator is healthy, else the name of its asynchronous error."""
        res = ctypes.c_int()
        _check(library().ncclCommGetAsyncError(self.handle, ctypes.byref(res)), "ncclCommGetAsyncError",
               comm=self.handle)
        return None if res.value in (ncclSuccess, ncclInProgress) else RESULTS.get(res.value, str(res.value))

    def abort(self) -> None:
        """Abort the communicator: its pending kernels return, it cannot be used again."""
        if not self.aborted and self.handle:
            self.aborted = True
            library().ncclCommAbort(self.handle)

    def destroy(self) -> None:
        if not self.aborted and self.handle:
            _check(library().ncclCommDestroy(self.handle), "ncclCommDestroy", comm=self.handle)
            self.handle = ctypes.c_void_p()

    def wait(self, stream, what: str = "the collectives", timeout: Optional[float] = None) -> None:
        """Wait for ``stream`` (a ``driver.Stream``), checking the communicator's asynchronous
        error; an error or no completion within the timeout aborts the communicator and raises."""
        limit = self.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        deadline, spin_until = start + limit, start + 0.01
        pause = 0.0
        while not stream.query():
            err = self.async_error()
            if err is not None:
                self.abort()
                raise NcclError(f"hlo.distributed: NCCL reported {err} on rank {self.rank} of {self.size} "
                                f"(GPU {self.device}) during {what}: a peer failed; the communicator "
                                f"was aborted", "ncclCommGetAsyncError", err)
            if time.monotonic() > deadline:
                self.abort()
                raise DistributedTimeoutError(
                    f"hlo.distributed: {what} on NCCL rank {self.rank} of {self.size} (GPU {self.device}) "
                    f"did not complete within {limit:g} s (HLO_DISTRIBUTED_TIMEOUT): a peer process died, "
                    f"hangs, or runs a different program; the communicator was aborted")
            if time.monotonic() > spin_until:  # poll without sleeping for 10 ms, then back off to 1 ms
                time.sleep(pause)
                pause = min(1e-3, pause * 2 if pause else 2e-5)

    # --- collectives (queued on ``stream``; pointers are device addresses) -------------------

    def _live(self, what: str) -> None:
        if self.aborted or not self.handle:
            raise DistributedError(f"{what} on an NCCL communicator that was aborted or destroyed")

    def all_reduce(self, send: int, recv: int, count: int, dtype: str, op: str = "sum", stream=None) -> None:
        self._live("all_reduce")
        t, n, o = _typed(dtype, count, op)
        _check(library().ncclAllReduce(send, recv, n, t, o, self.handle, _stream_handle(stream)),
               "ncclAllReduce", f"all_reduce({op}, {dtype}[{count}])", self.handle)

    def all_gather(self, send: int, recv: int, sendcount: int, dtype: str, stream=None) -> None:
        """``recv`` holds ``size`` blocks of ``sendcount`` elements, in rank order."""
        self._live("all_gather")
        t, n, _ = _typed(dtype, sendcount, None)
        _check(library().ncclAllGather(send, recv, n, t, self.handle, _stream_handle(stream)),
               "ncclAllGather", f"all_gather({dtype}[{sendcount}])", self.handle)

    def reduce_scatter(self, send: int, recv: int, recvcount: int, dtype: str, op: str = "sum",
                       stream=None) -> None:
        """``send`` holds ``size`` blocks of ``recvcount``; rank r gets block r, reduced."""
        self._live("reduce_scatter")
        t, n, o = _typed(dtype, recvcount, op)
        _check(library().ncclReduceScatter(send, recv, n, t, o, self.handle, _stream_handle(stream)),
               "ncclReduceScatter", f"reduce_scatter({op}, {dtype}[{recvcount}] a rank)", self.handle)

    def broadcast(self, send: int, recv: int, count: int, dtype: str, root: int = 0, stream=None) -> None:
        self._live("broadcast")
        if not 0 <= root < self.size:
            raise DistributedError(f"broadcast root {root} is not a rank of 0..{self.size - 1}")
        t, n, _ = _typed(dtype, count, None)
        _check(library().ncclBroadcast(send, recv, n, t, int(root), self.handle, _stream_handle(stream)),
               "ncclBroadcast", f"broadcast({dtype}[{count}], root {root})", self.handle)

    def send(self, buf: int, count: int, dtype: str, peer: int, stream=None) -> None:
        self._live("send")
        t, n, _ = _typed(dtype, count, None)
        _check(library().ncclSend(buf, n, t, int(peer), self.handle, _stream_handle(stream)),
               "ncclSend", f"sending {dtype}[{count}] to rank {peer}", self.handle)

    def recv(self, buf: int, count: int, dtype: str, peer: int, stream=None) -> None:
        self._live("recv")
        t, n, _ = _typed(dtype, count, None)
        _check(library().ncclRecv(buf, n, t, int(peer), self.handle, _stream_handle(stream)),
               "ncclRecv", f"receiving {dtype}[{count}] from rank {peer}", self.handle)

    def all_to_all(self, send: int, recv: int, count: int, dtype: str, stream=None) -> None:
        """Block j (``count`` elements) of ``send`` to rank j; block i of ``recv`` from rank i:
        grouped sends and receives."""
        nbytes = count * ITEMSIZE[str(dtype)]
        with group():
            for peer in range(self.size):
                self.send(send + peer * nbytes, count, dtype, peer, stream)
                self.recv(recv + peer * nbytes, count, dtype, peer, stream)

    def permute(self, send: int, recv: int, count: int, dtype: str, pairs: Sequence[Tuple[int, int]],
                stream=None) -> None:
        """StableHLO's collective_permute over ``(source, target)`` ranks: a rank no pair
        targets gets zeros."""
        pairs = [(int(s), int(t)) for s, t in pairs]
        srcs, dsts = [s for s, _ in pairs], [t for _, t in pairs]
        if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
            raise DistributedError(f"permute {pairs}: each rank may be the source of one pair and the "
                                   f"target of one pair")
        me = self.rank
        to = [t for s, t in pairs if s == me]
        frm = [s for s, t in pairs if t == me]
        nbytes = count * ITEMSIZE[str(dtype)]
        if not frm:
            _memset0(recv, nbytes, stream)
        elif frm == [me]:
            _memcpy(recv, send, nbytes, stream)
        with group():
            if to and to[0] != me:
                self.send(send, count, dtype, to[0], stream)
            if frm and frm[0] != me:
                self.recv(recv, count, dtype, frm[0], stream)


def _driver_stream(stream):
    """The stream as cuda-bindings takes it: a ``driver.Stream``'s CUstream, else the handle."""
    from . import driver
    cu = driver.bindings()
    if hasattr(stream, "handle"):
        return stream.handle
    return cu.CUstream(_stream_handle(stream))


def _memset0(ptr: int, nbytes: int, stream) -> None:
    from . import driver
    cu = driver.bindings()
    if nbytes:
        driver.check(cu.cuMemsetD8Async(ptr, 0, nbytes, _driver_stream(stream)), "cuMemsetD8Async")


def _memcpy(dst: int, src: int, nbytes: int, stream) -> None:
    from . import driver
    cu = driver.bindings()
    if nbytes and dst != src:
        driver.check(cu.cuMemcpyDtoDAsync(dst, src, nbytes, _driver_stream(stream)), "cuMemcpyDtoDAsync")


