"""``DeviceArray``: an array in GPU memory, what a CUDA executable returns.

Results come back before the GPU has computed them (calls are asynchronous, like jax's):
``block_until_ready()`` waits, ``numpy.asarray(x)`` / ``x.__array__()`` copies to the host
(waiting first). ``__cuda_array_interface__`` (v3, naming the stream that produces it) and
``__dlpack__`` / ``__dlpack_device__`` hand the memory to torch, jax, cupy or another hlo
executable without a copy; a DeviceArray passed to an hlo executable is read in place.

An array's memory is a ``DeviceBuffer``: memory hlo allocated (given back to its stream's
``BufferPool`` for reuse, or freed stream-ordered, when the last array or DLPack consumer using
it is dropped) or memory another library owns (kept
alive through ``owner``). A donated argument's buffer moves into the result that reuses it and
the donated array is marked deleted (using it raises).
"""
from __future__ import annotations

import math

import numpy as np

from . import driver, interop
from .errors import CudaError


class DeviceBuffer:
    """Device memory at ``ptr`` of ``nbytes``. With ``owner`` None, hlo allocated it on
    ``stream`` and, when dropped, gives it back to ``pool`` (a ``BufferPool`` of that stream)
    or frees it there; else ``owner`` (a foreign array) owns it."""

    __slots__ = ("ptr", "nbytes", "ctx", "stream", "owner", "pool")

    def __init__(self, ptr: int, nbytes: int, ctx, stream, owner=None, pool=None):
        self.ptr, self.nbytes, self.ctx, self.stream, self.owner, self.pool = ptr, nbytes, ctx, stream, owner, pool

    def __del__(self):
        if self.owner is None and self.ptr:
            pool = self.pool
            if pool is not None and pool.give(self.ptr, self.nbytes):
                return
            _free(self.ptr, self.stream)


def _free(ptr: int, stream) -> None:
    try:
        h = stream.handle
        if h is not None:
            driver.cu.cuMemFreeAsync(ptr, h)
        else:  # the stream went first (both in one garbage cycle): free synchronously
            driver.cu.cuMemFree(ptr)
    except Exception:  # interpreter shutdown
        pass


class BufferPool:
    """Device buffers of one stream kept for reuse: a dropped result's memory comes back here
    and a later call on the same stream takes it with no driver call (stream order makes the
    reuse safe, exactly as the driver's stream-ordered allocator would). At most ``per_size``
    buffers of one size and about ``max_bytes`` in all are kept; ``clear`` frees them (on the
    executable's release, and before an allocation that ran out of memory is retried)."""

    __slots__ = ("stream", "free", "held", "per_size", "max_bytes", "closed")

    def __init__(self, stream, per_size: int = 8, max_bytes: int = 256 << 20):
        self.stream = stream
        self.free = {}  # nbytes -> [ptr, ...]
        self.held = 0
        self.per_size, self.max_bytes = per_size, max_bytes
        self.closed = False

    def take(self, nbytes: int) -> int:
        """A kept buffer of ``nbytes``, or 0."""
        lst = self.free.get(nbytes)
        if lst:
            try:
                ptr = lst.pop()
            except IndexError:  # another thread took the last one
                return 0
            self.held -= nbytes
            return ptr
        return 0

    def give(self, ptr: int, nbytes: int) -> bool:
        """Keep ``ptr`` for reuse; False when the pool is full or closed (the caller frees it)."""
        if self.closed or self.held + nbytes > self.max_bytes:
            return False
        lst = self.free.get(nbytes)
        if lst is None:
            lst = self.free.setdefault(nbytes, [])
        if len(lst) >= self.per_size:
            return False
        lst.append(ptr)
        self.held += nbytes
        return True

    def clear(self, close: bool = False) -> None:
        """Free every kept buffer (stream-ordered); ``close``: keep none from now on."""
        self.closed = self.closed or close
        for lst in list(self.free.values()):
            while lst:
                try:
                    ptr = lst.pop()
                except IndexError:
                    break
                _free(ptr, self.stream)
        self.free = {}
        self.held = 0


class Completion:
    """The end of the work queued on ``stream`` up to a call. Its event is recorded only when
    something needs it (another stream orders itself after the call, through
    ``CudaExecutable`` or DLPack); until then the completion stands for the stream's tail, and
    the executable hands the same one to the calls it queues next. Recorded late, the event may
    also cover calls queued after this one: an order that is never too early, only
    conservative. ``ready`` / ``wait`` without an event query / synchronize the stream."""

    __slots__ = ("_event", "stream", "what", "_pool")

    def __init__(self, stream, what: str, pool: list):
        self._event, self.stream, self.what, self._pool = None, stream, what, pool

    @property
    def recorded(self) -> bool:
        return self._event is not None

    @property
    def event(self) -> "driver.Event":
        ev = self._event
        if ev is None:
            try:
                ev = self._pool.pop()
            except IndexError:
                ev = driver.Event()
            ev.record(self.stream.handle)
            self._event = ev
        return ev

    def ready(self) -> bool:
        ev = self._event
        return ev.query() if ev is not None else self.stream.query()

    def wait(self) -> None:
        try:
            ev = self._event
            if ev is not None:
                ev.synchronize(f"waiting for {self.what}")
            else:
                self.stream.synchronize(f"waiting for {self.what}")
        except CudaError as e:
            raise type(e)(f"{e} (the GPU reported the error at the end of {self.what}; set "
                          "HLO_CUDA_SYNC=1 to find the kernel that failed)", e.call, e.code) from None

    def __del__(self):
        try:
            if self._event is not None:
                self._pool.append(self._event)
        except Exception:
            pass


def layout_strides(shape, layout, itemsize: int):
    """Byte strides of each logical dimension of a dense array stored in ``layout``
    (minor-to-major; None means row-major)."""
    nd = len(shape)
    if layout is None:
        layout = range(nd - 1, -1, -1)
    strides = [0] * nd
    step = itemsize
    for d in layout:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def strides_match(shape, strides, expected, itemsize: int) -> bool:
    """``strides`` (bytes, None = C-contiguous) address the same elements as ``expected``:
    dimensions of size 1 may have any stride, and an empty array matches anything."""
    if strides is None:
        strides = layout_strides(shape, None, itemsize)
    if any(d == 0 for d in shape):
        return True
    return all(d == 1 or s == e for d, s, e in zip(shape, strides, expected))


class DeviceArray:
    """An array in GPU memory (see the module's docstring)."""

    __slots__ = ("_buf", "shape", "dtype", "_strides", "_done", "_deleted", "__weakref__")

    def __init__(self, buf: DeviceBuffer, shape, dtype, strides=None, done: "Completion" = None):
        self._buf = buf
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._strides = None if strides is None or strides == layout_strides(self.shape, None, self.dtype.itemsize) \
            else tuple(strides)
        self._done = done
        self._deleted = False

    @classmethod
    def _result(cls, buf: DeviceBuffer, shape: tuple, dtype: np.dtype, strides, done) -> "DeviceArray":
        """A call's result, built without re-deriving anything (``strides`` None: row-major)."""
        a = object.__new__(cls)
        a._buf, a.shape, a.dtype, a._strides, a._done, a._deleted = buf, shape, dtype, strides, done, False
        return a

    # -- description ------------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        """Byte strides (the layout the executable wrote; row-major unless it said otherwise)."""
        return self._strides if self._strides is not None else layout_strides(self.shape, None, self.dtype.itemsize)

    @property
    def device_ptr(self) -> int:
        self._check_live()
        return self._buf.ptr

    @property
    def device(self) -> int:
        return self._buf.ctx.device

    def is_deleted(self) -> bool:
        return self._deleted

    def _check_live(self) -> None:
        if self._deleted:
            raise RuntimeError("this array was donated to a call (donate_argnums) and its memory now "
                               "belongs to that call's result; it can no longer be used")

    def _take_buffer(self) -> DeviceBuffer:
        """Move the memory out (donation): this array is deleted afterwards."""
        self._check_live()
        self._deleted = True
        return self._buf

    # -- waiting and copying ----------------------------------------------------------------

    def block_until_ready(self) -> "DeviceArray":
        self._check_live()
        if self._done is not None:
            self._done.wait()
        return self

    def is_ready(self) -> bool:
        return self._done is None or self._done.ready()

    def __array__(self, dtype=None, copy=None):
        self._check_live()
        self._buf.ctx.make_current()
        stream = self._done.stream if self._done is not None else self._buf.stream
        span = _span_bytes(self.shape, self.strides, self.dtype.itemsize)
        host = np.empty(max(span, 1), np.uint8)
        try:
            driver.memcpy_dtoh(host.ctypes.data, self._buf.ptr, span, stream)
        except CudaError as e:
            what = self._done.what if self._done is not None else "the array"
            raise type(e)(f"{e} (copying the result of {what} to the host; set HLO_CUDA_SYNC=1 to "
                          "find the kernel that failed)", e.call, e.code) from None
        out = np.ndarray(self.shape, self.dtype, buffer=host, strides=self.strides) if span else \
            np.empty(self.shape, self.dtype)
        out = np.ascontiguousarray(out)
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype)
        return out

    def to_numpy(self) -> np.ndarray:
        return self.__array__()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        if self._deleted:
            return f"DeviceArray(<donated>, shape={self.shape}, dtype={self.dtype})"
        if self.size > 10000:
            return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device})"
        body = np.array2string(self.__array__(), separator=", ", prefix="DeviceArray(")
        return f"DeviceArray({body}, dtype={self.dtype})"

    # -- zero-copy exchange -----------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict:
        self._check_live()
        stream = self._done.stream.ptr if self._done is not None else None
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._buf.ptr, False),
                "version": 3, "strides": self._strides, "stream": stream}

    def __dlpack_device__(self):
        return (interop.KDL_CUDA, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule. ``stream``: the consumer's stream (None or 1: the legacy default
        stream, 2: per-thread default, -1: no ordering); it waits for this array's producer."""
        self._check_live()
        if copy:
            raise BufferError("hlo DeviceArray.__dlpack__ does not copy (copy=True asked)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"hlo DeviceArray lives on cuda:{self.device}, not {dl_device}")
        if self._done is not None and stream != -1:
            s = 1 if stream is None else int(stream)
            if s != self._done.stream.ptr:
                self._buf.ctx.make_current()
                driver.check(driver.cu.cuStreamWaitEvent(driver.cu.CUstream(s), self._done.event.handle, 0),
                             "cuStreamWaitEvent", "ordering a DLPack consumer's stream after hlo's")
        return interop.export_capsule(self._buf.ptr, self.shape, self._strides, self.dtype, self.device, self)


def _span_bytes(shape, strides, itemsize: int) -> int:
    """Bytes from the first to one past the last element (dense layouts: the array's size)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * s for d, s in zip(shape, strides)) + itemsize
