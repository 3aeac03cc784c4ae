"""The CUDA driver API, through ``cuda-bindings`` (``from cuda.bindings import driver``).

Imported only when the cuda target is used (``import hlo`` never imports it); the bindings
themselves are imported on the first ``get_context()``, so this module imports anywhere.

- ``get_context(device)``: the device's primary context (one per device, retained once and
  shared with torch / jax / cupy, which use it too), with its compute capability, name and
  memory; ``Context.make_current()`` makes it current in the calling thread.
  ``start_context(device)`` begins creating it in a background thread (``hlo.load`` does), so
  that the driver's ~0.2 s of set-up overlaps loading; ``get_context`` then waits for it.
- ``check(ret, call)``: every driver call's result goes through it (or through the inline
  ``is not OK`` test on hot paths, which then calls ``fail``): a failure raises a ``CudaError``
  naming the call and the CUresult's name and text, never a bare code.
- memory: ``Context.alloc`` / ``free`` (stream-ordered when given a stream, from the device's
  default memory pool), ``host_alloc`` (pinned), copies; running out raises
  ``CudaOutOfMemoryError`` with the size asked for and the free / total memory.
- ``Stream`` and ``Event`` wrappers that destroy their handles when dropped.

No bindings, no driver library, no device, a GPU older than the code's arch or a driver too
old for its PTX raise ``CudaUnavailableError``.
"""
from __future__ import annotations

import ctypes
import threading
from typing import NoReturn, Optional, Tuple

from .errors import CudaError, CudaOutOfMemoryError, CudaUnavailableError

cu = None  # cuda.bindings.driver, once loaded
OK = None  # CUresult.CUDA_SUCCESS

_lock = threading.Lock()
_contexts = {}
_starting = {}  # device -> the thread start_context began

# PTX ISA version -> the CUDA release that introduced it (driver needed to JIT it).
PTX_ISA_CUDA = {
    (7, 0): "11.0", (7, 1): "11.1", (7, 2): "11.2", (7, 3): "11.3", (7, 4): "11.4",
    (7, 5): "11.5", (7, 6): "11.6", (7, 7): "11.7", (7, 8): "11.8", (8, 0): "12.0",
    (8, 1): "12.1", (8, 2): "12.2", (8, 3): "12.3", (8, 4): "12.4", (8, 5): "12.5",
    (8, 6): "12.7", (8, 7): "12.8", (8, 8): "12.9", (9, 0): "13.0",
}


def bindings():
    """The ``cuda.bindings.driver`` module; ``CudaUnavailableError`` if it is not installed."""
    global cu, OK
    if cu is None:
        try:
            from cuda.bindings import driver
        except ImportError as e:
            raise CudaUnavailableError(
                "the CUDA target needs the cuda-bindings package (pip install 'hlo[cuda]'): "
                f"{e}") from None
        OK = driver.CUresult.CUDA_SUCCESS
        cu = driver
    return cu


def result_name(res) -> Tuple[str, str]:
    """``(name, text)`` of a CUresult, e.g. ``("CUDA_ERROR_INVALID_VALUE", "invalid argument")``."""
    name = getattr(res, "name", None) or f"CUresult {int(res)}"
    text = ""
    try:
        err, s = cu.cuGetErrorString(res)
        if err == OK and s:
            text = s.decode() if isinstance(s, bytes) else str(s)
    except Exception:  # no driver to ask
        pass
    return name, text


def fail(res, call: str, what: str = "", cls=CudaError) -> NoReturn:
    """Raise the error for a failed driver call ``call`` (``what``: what it was doing)."""
    name, text = result_name(res)
    if name == "CUDA_ERROR_OUT_OF_MEMORY" and cls is CudaError:
        cls = CudaOutOfMemoryError
    msg = f"{call} failed: {name}" + (f" ({text})" if text else "") + (f" while {what}" if what else "")
    raise cls(msg, call, name)


def check(ret, call: str, what: str = ""):
    """The value(s) of a driver call's result tuple ``(CUresult, *values)``; raises on failure."""
    res = ret[0]
    if res is not OK and int(res) != 0:
        fail(res, call, what)
    if len(ret) == 1:
        return None
    if len(ret) == 2:
        return ret[1]
    return ret[1:]


_libcuda_handle = None


def _libcuda() -> ctypes.CDLL:
    """The driver library itself (the one cuda-bindings loaded), for the two calls whose
    ``void *`` value the bindings type per attribute."""
    global _libcuda_handle
    if _libcuda_handle is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuMemPoolSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.cuMemPoolTrimTo.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemPoolSetAttribute.restype = lib.cuMemPoolTrimTo.restype = ctypes.c_int
        _libcuda_handle = lib
    return _libcuda_handle


def _init() -> int:
    """cuInit and the device count; every way of failing is a ``CudaUnavailableError``."""
    b = bindings()
    try:
        ret = b.cuInit(0)
    except Exception as e:  # cuda.pathfinder could not find libcuda
        raise CudaUnavailableError(f"no NVIDIA driver found (libcuda could not be loaded): {e}") from None
    if ret[0] is not OK and int(ret[0]) != 0:
        name, text = result_name(ret[0])
        if name == "CUDA_ERROR_NO_DEVICE":
            raise CudaUnavailableError("no CUDA device: the NVIDIA driver is loaded but sees no GPU")
        raise CudaUnavailableError(f"the CUDA driver could not initialize: cuInit failed: {name}"
                                   + (f" ({text})" if text else ""), "cuInit", name)
    return check(b.cuDeviceGetCount(), "cuDeviceGetCount")


def driver_version() -> Tuple[int, int]:
    """The driver's CUDA version, e.g. ``(13, 0)``."""
    _init()
    v = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
    return v // 1000, (v % 1000) // 10


def device_count() -> int:
    return _init()


class Context:
    """A device's primary context and what is known about the device."""

    def __init__(self, device: int):
        n = _init()
        if not 0 <= device < n:
            raise CudaUnavailableError(f"no CUDA device {device}: this machine has {n}")
        b = cu
        self.device = device
        self.dev = check(b.cuDeviceGet(device), "cuDeviceGet")
        self.handle = check(b.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.make_current()
        A = b.CUdevice_attribute
        major = check(b.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev),
                      "cuDeviceGetAttribute")
        minor = check(b.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev),
                      "cuDeviceGetAttribute")
        self.cc = (int(major), int(minor))
        self.sm_count = int(check(b.cuDeviceGetAttribute(
            A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.dev), "cuDeviceGetAttribute"))
        name = check(b.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        self.name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        self.total_memory = int(check(b.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem"))
        self.multi = n > 1  # other devices' contexts may be made current in a thread
        self.mempool = None
        self.keeps_freed_memory = self._keep_freed_memory()

    def _keep_freed_memory(self) -> bool:
        """Let the device's default memory pool (where stream-ordered allocations come from)
        keep what is freed across synchronizations. Its default release threshold, 0, hands
        freed memory back to the OS at every synchronization, so a result too big for the
        executable's own ``BufferPool`` is mapped again on every call; cuda.core, CuPy and
        RMM raise the threshold the same way. Out of memory trims it (``trim_pool``). False
        where the driver refuses (the pool then behaves as before)."""
        try:
            pool = check(cu.cuDeviceGetDefaultMemPool(self.dev), "cuDeviceGetDefaultMemPool")
            attr = int(cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
            lib = _libcuda()
            keep = ctypes.c_uint64(2 ** 64 - 1)  # cuuint64_t, as cuda.h says for this attribute
            if lib.cuMemPoolSetAttribute(ctypes.c_void_p(int(pool)), attr, ctypes.byref(keep)) != 0:
                return False
        except (CudaError, OSError, AttributeError):
            return False
        self.mempool = pool
        return True

    def trim_pool(self) -> None:
        """Hand the memory the default pool keeps (freed, no longer in use) back to the OS."""
        if self.mempool is not None:
            _libcuda().cuMemPoolTrimTo(ctypes.c_void_p(int(self.mempool)), ctypes.c_size_t(0))

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def make_current(self) -> None:
        ret = cu.cuCtxSetCurrent(self.handle)
        if ret[0] is not OK:
            check(ret, "cuCtxSetCurrent")

    def ensure_current(self) -> None:
        """Make this context current in the calling thread, every time: another library in
        the process (a peer's compiler, a profiler) may set the thread's current context to
        one of its own and destroy it later, so what hlo set last is no proof of what is
        current now (the bench saw CUDA_ERROR_CONTEXT_IS_DESTROYED after torch.compile and jax
        ran between two hlo calls). One ``cuCtxSetCurrent`` costs about what asking would."""
        self.make_current()

    def mem_info(self) -> Tuple[int, int]:
        """``(free, total)`` device memory in bytes."""
        free, total = check(cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    # -- memory ----------------------------------------------------------------------------

    def alloc(self, nbytes: int, stream: Optional["Stream"] = None, what: str = "") -> int:
        """A device allocation of ``nbytes`` (at least 1), stream-ordered when ``stream`` is
        given. Out of memory raises ``CudaOutOfMemoryError`` naming the sizes."""
        n = max(int(nbytes), 1)
        ret = cu.cuMemAllocAsync(n, stream.handle) if stream is not None else cu.cuMemAlloc(n)
        if ret[0] is not OK and int(ret[0]) != 0:
            name, text = result_name(ret[0])
            if name == "CUDA_ERROR_OUT_OF_MEMORY":
                raise self.oom_error(n, what)
            fail(ret[0], "cuMemAllocAsync" if stream is not None else "cuMemAlloc",
                 f"allocating {n} bytes" + (f" for {what}" if what else ""))
        return int(ret[1])

    def oom_error(self, nbytes: int, what: str = "") -> CudaOutOfMemoryError:
        try:
            free, total = self.mem_info()
            have = f"; {fmt_bytes(free)} free of {fmt_bytes(total)} on {self.name} (device {self.device})"
        except CudaError:
            have = ""
        return CudaOutOfMemoryError(
            f"out of device memory: could not allocate {fmt_bytes(nbytes)}"
            + (f" for {what}" if what else "") + have, "cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY")

    def free(self, ptr: int, stream: Optional["Stream"] = None) -> None:
        if not ptr:
            return
        if stream is not None:
            check(cu.cuMemFreeAsync(ptr, stream.handle), "cuMemFreeAsync")
        else:
            check(cu.cuMemFree(ptr), "cuMemFree")

    def host_alloc(self, nbytes: int) -> int:
        """Pinned host memory (for the few bytes a while / switch reads back)."""
        return int(check(cu.cuMemHostAlloc(max(int(nbytes), 1), 0), "cuMemHostAlloc"))

    def host_free(self, ptr: int) -> None:
        check(cu.cuMemFreeHost(ptr), "cuMemFreeHost")

    def create_stream(self) -> "Stream":
        return Stream(self)


def fmt_bytes(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.2f} {unit} ({n} bytes)"
    return f"{n} bytes"


def get_context(device: int = 0) -> Context:
    """The primary context of ``device`` (created once per process), current in this thread.
    While ``start_context`` is creating it in the background, this waits for that; where the
    background attempt failed, this makes its own and raises the error itself."""
    ctx = _contexts.get(device)
    if ctx is None:
        ctx = _create_context(device)
    ctx.make_current()
    return ctx


def _create_context(device: int) -> Context:
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = _contexts[device] = Context(device)
        return ctx


def in_background(fn, *args, name: str) -> threading.Thread:
    """Run ``fn(*args)`` in a thread of its own, started now, whose failure is dropped: it only
    does early what a later call does anyway (and waits for, through the same lock), and that
    call, where the work failed, does it again and raises the error in its caller's thread.
    Not a daemon: an exiting interpreter waits for it rather than cutting a driver call short."""
    def run():
        try:
            fn(*args)
        except BaseException:  # the later call raises it (see above)
            pass
    t = threading.Thread(target=run, name=name)
    t.start()
    return t


def start_context(device: int = 0) -> Optional[threading.Thread]:
    """Begin creating ``device``'s context in the background (importing the bindings, cuInit,
    retaining the primary context: about 0.2 s on an H200, spent in the driver without the GIL),
    so that a first ``get_context`` finds it made or waits for the rest. None if it exists."""
    if device in _contexts:
        return None
    t = _starting.get(device)
    if t is None or not t.is_alive():
        t = _starting[device] = in_background(_create_context, device, name=f"hlo-cuda-context-{device}")
    return t


def _done(res, call: str) -> bool:
    """A query's result: True (finished), False (CUDA_ERROR_NOT_READY), else the error."""
    if res is OK:
        return True
    if res == cu.CUresult.CUDA_ERROR_NOT_READY:
        return False
    fail(res, call)


class Stream:
    """A non-blocking stream (it does not wait for the legacy default stream: work handed to
    or from other libraries is ordered through events, see ``wait_foreign``)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.handle = check(cu.cuStreamCreate(int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)),
                            "cuStreamCreate")
        self.ptr = int(self.handle)

    def synchronize(self, what: str = "") -> None:
        if self.handle is None:
            return
        ret = cu.cuStreamSynchronize(self.handle)
        if ret[0] is not OK:
            check(ret, "cuStreamSynchronize", what)

    def query(self) -> bool:
        """True once every call queued on the stream has finished."""
        return _done(cu.cuStreamQuery(self.handle)[0], "cuStreamQuery")

    def wait(self, event: "Event") -> None:
        ret = cu.cuStreamWaitEvent(self.handle, event.handle, 0)
        if ret[0] is not OK:
            check(ret, "cuStreamWaitEvent")

    def __del__(self):
        # Buffers freed after this (in the same garbage cycle) see handle None and free
        # synchronously instead of queueing on a destroyed stream.
        h, self.handle = self.handle, None
        try:
            if cu is not None and h is not None:
                cu.cuStreamDestroy(h)
        except Exception:  # interpreter shutdown
            pass


class Event:
    """A CUDA event without timing (cheapest to record and wait on)."""

    def __init__(self):
        self.handle = check(cu.cuEventCreate(int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")

    def record(self, stream_handle) -> None:
        ret = cu.cuEventRecord(self.handle, stream_handle)
        if ret[0] is not OK:
            check(ret, "cuEventRecord")

    def query(self) -> bool:
        """True once the work before the last ``record`` has finished."""
        return _done(cu.cuEventQuery(self.handle)[0], "cuEventQuery")

    def synchronize(self, what: str = "") -> None:
        ret = cu.cuEventSynchronize(self.handle)
        if ret[0] is not OK:
            check(ret, "cuEventSynchronize", what)

    def __del__(self):
        # An event can be finalized while a pool still lists it (a garbage-collected cycle
        # runs every finalizer, and a ``Completion``'s hands its event back to a pool): the
        # handle is cleared, and pools skip events without one.
        try:
            h, self.handle = self.handle, None
            if cu is not None and h is not None:
                cu.cuEventDestroy(h)
        except Exception:
            pass


def wait_foreign(stream: Stream, foreign_stream: int, event: Event) -> None:
    """Order ``stream`` after the work queued so far on a stream another library owns
    (``foreign_stream`` a raw handle; 1 and 2 are the legacy and per-thread default streams)."""
    event.record(cu.CUstream(foreign_stream))
    stream.wait(event)


_foreign_streams = {}  # raw handle -> CUstream (made once per handle)


def order_after_foreign(stream: Stream, foreign_stream: int, event: Event) -> bool:
    """Order ``stream`` after the work queued so far on another library's stream (a raw handle;
    0 and 1 are the legacy default stream, 2 the per-thread one): nothing when a query says that
    work has finished (no wait is needed, and a query is one driver call where an event record
    and a wait are two), else ``wait_foreign``. True when it queued a wait. Never waits on the
    host."""
    s = _foreign_streams.get(foreign_stream)
    if s is None:
        s = _foreign_streams[foreign_stream] = cu.CUstream(foreign_stream)
    if _done(cu.cuStreamQuery(s)[0], "cuStreamQuery"):
        return False
    event.record(s)
    stream.wait(event)
    return True


def memcpy_htod(dst: int, src_addr: int, nbytes: int, stream: Stream) -> None:
    if nbytes:
        ret = cu.cuMemcpyHtoDAsync(dst, src_addr, nbytes, stream.handle)
        if ret[0] is not OK:
            check(ret, "cuMemcpyHtoDAsync", f"copying {nbytes} bytes to the device")


def memcpy_dtoh(dst_addr: int, src: int, nbytes: int, stream: Stream) -> None:
    """Copy to host memory; returns once the copy (and all work before it) is done."""
    if nbytes:
        ret = cu.cuMemcpyDtoHAsync(dst_addr, src, nbytes, stream.handle)
        if ret[0] is not OK:
            check(ret, "cuMemcpyDtoHAsync", f"copying {nbytes} bytes to the host")
    stream.synchronize("copying to the host")


def memcpy_dtod(dst: int, src: int, nbytes: int, stream: Stream) -> None:
    if nbytes and dst != src:
        ret = cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream.handle)
        if ret[0] is not OK:
            check(ret, "cuMemcpyDtoDAsync", f"copying {nbytes} bytes on the device")
