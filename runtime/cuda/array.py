"""``DeviceArray``: an array in GPU memory, what a CUDA executable returns.

Results come back before the GPU has computed them (calls are asynchronous, like jax's):
``block_until_ready()`` waits, ``numpy.asarray(x)`` / ``x.__array__()`` copies to the host
(waiting first). ``__cuda_array_interface__`` (v3, naming the stream that produces it) and
``__dlpack__`` / ``__dlpack_device__`` hand the memory to torch, jax, cupy or another hlo
executable without a copy; a DeviceArray passed to an hlo executable is read in place.
It describes itself (``shape``, ``dtype``, ``ndim``, ``size``, ``nbytes``, ``len``, a ``repr``
with values) and converts to host values (``item``, ``tolist``, ``float``, ``int``, ``bool``:
each waits and copies) but computes nothing: operators, indexing, numpy ufuncs and array
methods raise errors pointing to ``numpy.asarray(x)`` or an ``hlo.jit`` function.

An array's memory is a ``DeviceBuffer``: memory hlo allocated (given back to its stream's
``BufferPool`` for reuse, or freed stream-ordered, when the last array or DLPack consumer using
it is dropped) or memory another library owns (kept
alive through ``owner``). A donated argument's buffer moves into the result that reuses it and
the donated array is marked deleted (using it raises).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from . import driver, interop
from .errors import CudaError


def _free(ptr: int, stream) -> None:
    try:
        h = stream.handle
        if h is not None:
            driver.cu.cuMemFreeAsync(ptr, h)
        else:  # the stream went first (both in one garbage cycle): free synchronously
            driver.cu.cuMemFree(ptr)
    except Exception:  # interpreter shutdown
        pass


class DeviceBuffer:
    """Device memory at ``ptr`` of ``nbytes``. With ``owner`` None, hlo allocated it on
    ``stream`` and, when dropped, gives it back to ``pool`` (a ``BufferPool`` of that stream)
    or frees it there; else ``owner`` (a foreign array) owns it."""

    __slots__ = ("ptr", "nbytes", "ctx", "stream", "owner", "pool")

    def __init__(self, ptr: int, nbytes: int, ctx, stream, owner=None, pool=None):
        self.ptr, self.nbytes, self.ctx, self.stream, self.owner, self.pool = ptr, nbytes, ctx, stream, owner, pool

    def __del__(self, _free=_free):
        # ``_free`` is bound here: a buffer dropped at interpreter shutdown, after the module's
        # globals were cleared, still frees (before, each printed "Exception ignored ... 'NoneType'
        # object is not callable" at the exit of a script holding device arrays)
        if self.owner is None and self.ptr:
            pool = self.pool
            if pool is not None and pool.give(self.ptr, self.nbytes):
                return
            _free(self.ptr, self.stream)


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

    __slots__ = ("_event", "stream", "what", "_pool", "complete", "waits")

    def __init__(self, stream, what: str, pool: list):
        self._event, self.stream, self.what, self._pool = None, stream, what, pool
        self.complete = False  # known finished (``ready`` said so): nothing waits on it again
        self.waits = 0  # times another stream was ordered after it (``order_after``)

    @property
    def recorded(self) -> bool:
        return self._event is not None

    @property
    def event(self) -> "driver.Event":
        ev = self._event
        if ev is None:
            ev = _pooled_event(self._pool)
            ev.record(self.stream.handle)
            self._event = ev
        return ev

    def ready(self) -> bool:
        if self.complete:
            return True
        ev = self._event
        done = ev.query() if ev is not None else self.stream.query()
        if done:
            self.complete = True
        return done

    def order_after(self, stream) -> None:
        """Make ``stream``'s later work wait for this completion (a no-op once it is known
        finished). The first time, ``cuStreamWaitEvent`` alone; from the second on, one query
        first: an input produced once and read by many calls costs one query, then nothing."""
        if self.complete:
            return
        self.waits += 1
        if self.waits > 1 and self.ready():
            return
        stream.wait(self.event)

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
            if self._event is not None and self._event.handle is not None:
                self._pool.append(self._event)
        except Exception:
            pass


def _pooled_event(pool: list) -> "driver.Event":
    """A free event from ``pool`` (skipping any finalized since it was put there), else new."""
    while pool:
        ev = pool.pop()
        if ev.handle is not None:
            return ev
    return driver.Event()


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

    __slots__ = ("_buf", "shape", "dtype", "_strides", "_bstrides", "_done", "_deleted", "__weakref__")

    def __init__(self, buf: DeviceBuffer, shape, dtype, strides=None, done: "Completion" = None):
        self._buf = buf
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        row_major = layout_strides(self.shape, None, self.dtype.itemsize)
        self._strides = None if strides is None or tuple(strides) == row_major else tuple(strides)
        self._bstrides = row_major if self._strides is None else self._strides
        self._done = done
        self._deleted = False

    @classmethod
    def _result(cls, buf: DeviceBuffer, shape: tuple, dtype: np.dtype, strides, bstrides, done) -> "DeviceArray":
        """A call's result, built without re-deriving anything (``strides`` None: row-major;
        ``bstrides``: the byte strides either way)."""
        a = object.__new__(cls)
        a._buf, a.shape, a.dtype, a._strides, a._bstrides, a._done, a._deleted = \
            buf, shape, dtype, strides, bstrides, done, False
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
        return self._bstrides

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
        """A host copy (after the GPU has computed the array); rank-0 arrays stay rank 0."""
        self._check_live()
        if copy is False:
            raise ValueError("an hlo DeviceArray lives in GPU memory: numpy.asarray(x, copy=False) "
                             "cannot give a view of it; copy it (numpy.asarray(x))")
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
        if not span:
            out = np.empty(self.shape, self.dtype)
        else:
            out = np.ndarray(self.shape, self.dtype, buffer=host, strides=self.strides)
            if self._strides is not None:  # another layout: a row-major copy (keeps rank 0)
                out = np.array(out, order="C")
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype)
        return out

    def to_numpy(self) -> np.ndarray:
        return self.__array__()

    # -- host conversions (each waits for the GPU and copies, like a jax array's) -----------

    def item(self, *index):
        return self.__array__().item(*index)

    def tolist(self):
        return self.__array__().tolist()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(f"only integer arrays can be used as an index; this one is {self.dtype}")
        return int(self._scalar("an index"))

    def __bool__(self) -> bool:
        return bool(self._scalar("bool"))

    def _scalar(self, what: str):
        if self.size != 1:
            raise TypeError(f"only an array of one element converts to {what}; this one is "
                            f"{self.dtype}{list(self.shape)}")
        return self.__array__().reshape(()).item()

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

    __str__ = __repr__

    # -- what is not here: computing. An hlo DeviceArray has no arithmetic, indexing or array
    # methods (they would have to run on the GPU through hlo); numpy's ufuncs refuse it rather
    # than compute on a host copy behind the user's back.
    __array_ufunc__ = None
    __hash__ = None  # an array, not a value (like numpy's and jax's)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in DeviceArray.__slots__:
            raise AttributeError(name)
        raise AttributeError(
            f"'DeviceArray' object has no attribute {name!r}: an hlo DeviceArray (a result in GPU "
            f"memory) does not compute by itself. Compute inside an hlo.jit function (which takes "
            f"DeviceArrays without a copy), or copy it to the host with numpy.asarray(x) first")

    # -- zero-copy exchange    # -- zero-copy exchange -----------------------------------------------------------------

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


def _no_operator(op: str):
    def refuse(self, *args):
        raise TypeError(
            f"an hlo DeviceArray has no {op!r} operator: it does not compute by itself. Compute "
            "inside an hlo.jit function (which takes DeviceArrays without a copy), or copy it to "
            "the host with numpy.asarray(x) first")
    refuse.__name__ = f"__{op}__"
    return refuse


for _op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
            "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand", "or",
            "ror", "xor", "rxor", "lshift", "rlshift", "rshift", "rrshift", "lt", "le", "eq", "ne",
            "gt", "ge", "neg", "pos", "abs", "invert", "getitem", "setitem"):
    setattr(DeviceArray, f"__{_op}__", _no_operator(_op))
del _op


def _span_bytes(shape, strides, itemsize: int) -> int:
    """Bytes from the first to one past the last element (dense layouts: the array's size)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * s for d, s in zip(shape, strides)) + itemsize


_transfer_streams = {}  # device -> the stream device_put copies on
_transfer_events: list = []  # free events of device_put's completions
_transfer_lock = threading.Lock()


def device_put(host: np.ndarray, device: int = 0) -> DeviceArray:
    """A ``DeviceArray`` on ``device`` holding a copy of ``host`` (queued on a stream of the
    device's own; like a call's result, it is ready when ``block_until_ready`` returns, and an
    executable that reads it orders itself after the copy). ``CudaUnavailableError`` without a
    GPU."""
    ctx = driver.get_context(device)
    stream = _transfer_streams.get(device)
    if stream is None:
        with _transfer_lock:
            stream = _transfer_streams.get(device)
            if stream is None:
                stream = _transfer_streams[device] = ctx.create_stream()
    a = np.asarray(host)
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")  # (np.ascontiguousarray would make a rank-0 array rank 1)
    n = a.nbytes
    ptr = ctx.alloc(n, stream, what=f"hlo.device_put of a {a.dtype}{list(a.shape)} array")
    try:
        driver.memcpy_htod(ptr, a.ctypes.data, n, stream)
    except BaseException:
        ctx.free(ptr, stream)
        raise
    done = Completion(stream, "hlo.device_put", _transfer_events)
    return DeviceArray(DeviceBuffer(ptr, n, ctx, stream), a.shape, a.dtype, done=done)
