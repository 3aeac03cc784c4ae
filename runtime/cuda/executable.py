"""``CudaExecutable``: GPU code + manifest, callable from Python.

``CudaExecutable(code, manifest, device=0)``: ``code`` is PTX text (str or bytes; the driver
JIT-compiles it for the GPU) or a cubin. ``manifest`` is a JSON-able dict (``parse_manifest``
checks it; what a saved executable stores):

    format       1
    target       {"name": "cuda", "arch": "sm_90"}: the GPU the code was built for
    inputs       [{"dtype": "f32", "shape": [2, 3], "layout": [1, 0]}]  (layout: minor-to-major,
                 optional, default row-major) -- what a call takes
    outputs      the same for the results
    arena_size   bytes of scratch the steps use (``BufRef("arena", 0, offset, size)``)
    constants    [base64 text, ...]: uploaded once at load; ``BufRef("const", i)`` is entry i
    kernels      names of the kernels the code defines (each launch's name must be one)
    steps        ``hlo.runtime.steps.steps_to_json`` of the step tree
    aliases      [[output, input], ...] (optional): output ``o`` IS the donated input ``i``'s
                 buffer (the steps write it in place; they must not copy one to the other);
                 the two have the same size (their shapes, dtypes and layouts may differ)
    inputs_written (optional) the inputs the steps write (donated arguments); read from the
                 steps themselves, so a manifest without it is the same program
    name         (optional) what errors call the executable

A call (``exe(*args)`` / ``exe.run(args)``) is asynchronous, like jax's: it checks the
arguments (count, shape, dtype: ``ArgumentError``, the CPU runtime's class), brings them to
the device (numpy arrays are copied; ``DeviceArray``\\ s and GPU arrays of torch, jax or cupy
-- through ``interop.reader_for``'s reader of their type, or DLPack / ``__cuda_array_interface__``
for other producers -- are read in place, the executable's stream ordered once per call after
each distinct producer stream they name), allocates the results (stream-ordered, from the
device's memory pool), queues the steps on the executable's one stream and returns
``DeviceArray``\\ s at once.

The buffer plan's arena is allocated once and reused; concurrent callers (threads) each take
an arena from a pool (a "slot", which also owns the pre-built launch records of
``launch.py`` and their CUDA graphs). Running out of device memory raises
``CudaOutOfMemoryError`` naming the sizes; what the call had allocated is released and the
executable stays usable.

CUDA graphs (``graph.py``): every run of at least ``graphs`` consecutive kernel launches,
copies and cuBLASLt products (default 1; ``HLO_CUDA_GRAPHS``; 0 turns graphs off) is replayed
as one CUDA graph, built on a slot's first call and patched per call where argument / result
addresses changed. While and Switch read their predicate on the host (a While with a known
trip count does not: its body is queued that many times): they split the steps into segments
(their bodies are segments of their own) rather than falling back to the step walk. Results
are identical to the step walk's: the same kernels on the same addresses.

What one call does on the host, and no more: make the context current
(``Context.ensure_current``); check the arguments against pre-computed descriptors; take each
result's memory from the executable's ``BufferPool`` (dropped results come back to it; a
driver allocation only when it is empty); patch and launch the records / graphs; share one
``Completion`` among the calls queued since an event was last needed (the event itself is
recorded only when another stream or library orders itself after a result).
"""
from __future__ import annotations

import base64
import collections
import os
import threading
from typing import Any, List, Optional, Sequence

import numpy as np

from hlo.runtime.donation import DonationStats, declined_ranges, warn_declined
from hlo.runtime.signature import ArgumentError, Signature, _type_str
from hlo.runtime.signature import _Sig as _CpuSig
from hlo.runtime.steps import Launch, calls_library, steps_from_json, walk_steps, written_inputs

from . import driver, graph, interop, launch
from .array import BufferPool, Completion, DeviceArray, DeviceBuffer, layout_strides, strides_match
from .errors import CudaError, CudaOutOfMemoryError, CudaUnavailableError
from .target import arch_runs_on, split_arch

FORMAT_VERSION = 1
_UNSEEN = object()


class _Sig(_CpuSig):
    """An input or output: the CPU runtime's descriptor plus the byte strides of its layout."""

    __slots__ = ("strides", "row_major")
    strides: tuple   # byte strides of the layout
    row_major: bool


class Manifest:
    """A checked manifest (see the module's docstring). Pure Python: no GPU needed."""

    def __init__(self, m: dict):
        if not isinstance(m, dict):
            raise ValueError("a CUDA executable's manifest must be a dict")
        if m.get("format") != FORMAT_VERSION:
            raise ValueError(f"CUDA executable format {m.get('format')!r} is not supported (this hlo "
                             f"reads format {FORMAT_VERSION})")
        t = m.get("target") or {}
        if t.get("name", "cuda") != "cuda":
            raise ValueError(f"the manifest is for target {t.get('name')!r}, not cuda")
        self.arch = str(t.get("arch", "sm_90"))
        try:
            split_arch(self.arch)
        except ValueError:
            raise ValueError(f"malformed GPU arch {self.arch!r} (expected e.g. 'sm_90')") from None
        self.name = str(m.get("name", "a CUDA executable"))
        try:
            self.inputs = [_Sig(d) for d in m["inputs"]]
            self.outputs = [_Sig(d) for d in m["outputs"]]
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed input / output descriptor in the manifest: {e}") from None
        for s, d in zip(self.inputs + self.outputs, list(m["inputs"]) + list(m["outputs"])):
            lay = d.get("layout")
            if lay is not None and sorted(lay) != list(range(len(s.shape))):
                raise ValueError(f"layout {lay} is not a permutation of the dimensions of "
                                 f"{_type_str(s.name, s.shape)}")
            s.strides = layout_strides(s.shape, lay, s.dtype.itemsize)
            s.row_major = s.strides == layout_strides(s.shape, None, s.dtype.itemsize)
        self.arena_size = int(m.get("arena_size", 0))
        if self.arena_size < 0:
            raise ValueError("negative arena_size")
        try:
            self.constants = [base64.b64decode(c, validate=True) for c in m.get("constants", [])]
        except (TypeError, ValueError) as e:
            raise ValueError(f"malformed constant in the manifest (base64 text expected): {e}") from None
        self.kernels = [str(k) for k in m.get("kernels", [])]
        self.steps = steps_from_json(m.get("steps", []))
        self.aliases = {}
        for pair in m.get("aliases", []):
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise ValueError(f"malformed alias {pair!r} (expected [output, input])")
            o, i = int(pair[0]), int(pair[1])
            if not (0 <= o < len(self.outputs) and 0 <= i < len(self.inputs)):
                raise ValueError(f"alias [{o}, {i}] names an output or input that does not exist")
            if self.outputs[o].nbytes != self.inputs[i].nbytes:
                raise ValueError(f"alias [{o}, {i}]: output {o} "
                                 f"({_type_str(self.outputs[o].name, self.outputs[o].shape)}) and input {i} "
                                 f"({_type_str(self.inputs[i].name, self.inputs[i].shape)}) differ in size")
            if i in self.aliases.values():
                raise ValueError(f"input {i} is aliased to two outputs")
            self.aliases[o] = i
        known = set(self.kernels)
        for st in walk_steps(self.steps):
            if isinstance(st, Launch) and known and st.name not in known:
                raise ValueError(f"step launches {st.name!r}, which is not among the kernels "
                                 f"{sorted(known)}")
        self.uses_cublaslt = calls_library(self.steps, "cublaslt")
        # the inputs the steps write: donated arguments (``hlo.runtime.donation``)
        self.written = tuple(sorted(set(written_inputs(self.steps)) | set(self.aliases.values())))
        self.raw = m


# Objects that calls keep alive until their work is done (arguments whose memory another
# stream or library frees) are let go once this many calls hold some: a query per call would
# cost more than the references do.
_INFLIGHT_POLL = 8

GRAPH_MIN_DEFAULT = 1  # a one-node graph launches faster than cuLaunchKernel from Python


def graph_min_records(graphs: Optional[int] = None) -> int:
    """The shortest run of steps a call replays as one CUDA graph; 0: none (every step is its
    own driver call, the "step walk"). ``graphs`` when given, else ``HLO_CUDA_GRAPHS`` (a
    number; 0 / off turns graphs off), else 1. ``HLO_CUDA_SYNC=1`` (a synchronization after
    every kernel, to find the one that fails) turns them off too."""
    if launch.SYNC:
        return 0
    if graphs is None:
        env = os.environ.get("HLO_CUDA_GRAPHS", "").strip().lower()
        if env in ("", "on", "true", "yes"):
            return GRAPH_MIN_DEFAULT
        if env in ("off", "false", "no"):
            return 0
        try:
            graphs = int(env)
        except ValueError:
            raise ValueError(f"HLO_CUDA_GRAPHS={env!r}: expected a number of steps (0 turns CUDA "
                             "graphs off)") from None
    if isinstance(graphs, bool) or not isinstance(graphs, int) or graphs < 0:
        raise ValueError(f"graphs={graphs!r}: expected the shortest run of steps to replay as a CUDA "
                         "graph (an int >= 0; 0 turns graphs off)")
    return graphs


def encode_constants(blobs: Sequence[bytes]) -> List[str]:
    """The manifest's ``constants`` entry for raw constant bytes."""
    return [base64.b64encode(bytes(b)).decode("ascii") for b in blobs]


class _Slot:
    """What one in-flight call owns: an arena, pinned bytes for predicates, and the records."""

    __slots__ = ("arena", "host", "records", "env")
    arena: Any
    host: Any
    records: list
    env: Any


class CudaExecutable(Signature):
    """A compiled program for an NVIDIA GPU (see the module's docstring)."""

    def __init__(self, code, manifest: dict, device: int = 0, graphs: Optional[int] = None):
        self.manifest = manifest
        self._m = m = Manifest(manifest)
        self._graph_min = graph_min_records(graphs)
        # a profiled build (``compile(profile=True)``): events around every step, no graphs
        prof = manifest.get("profile")
        self._profile_kernels = dict(prof.get("kernels") or {}) if isinstance(prof, dict) else None
        self._timer = None
        if self._profile_kernels is not None:
            self._graph_min = 0
        self.ctx = ctx = driver.get_context(device)
        if not arch_runs_on(m.arch, ctx.cc[0] * 10 + ctx.cc[1]):
            raise CudaUnavailableError(f"{m.name} was compiled for {m.arch}; this GPU ({ctx.name}) is "
                                       f"{ctx.arch}: recompile it for this GPU")
        from .module import Module
        self.code = code
        self.module = Module(ctx, code)
        for k in m.kernels:
            self.module.function(k)  # every kernel the manifest names is there
        self._stream = ctx.create_stream()
        self._in, self._out = m.inputs, m.outputs
        self._nin, self._nout = len(m.inputs), len(m.outputs)
        self._aliases = m.aliases
        self._written = m.written
        self.input_names: Optional[Sequence[str]] = None  # what a declined donation's warning says
        self._donation = DonationStats()
        # per result: (shape, dtype, strides or None for row-major, bytes, byte strides)
        self._out_info = [(tuple(o.shape), o.dtype, None if o.row_major else o.strides, o.nbytes, o.strides)
                          for o in m.outputs]
        # Where the driver's pool keeps freed memory anyway (``Context.keeps_freed_memory``),
        # results of up to 1/16 of the device's memory (a 1 GiB softmax on the H100) come back
        # here too: reusing one costs no cuMemAllocAsync / cuMemFreeAsync pair per call.
        self._pool = BufferPool(self._stream, max_bytes=max(256 << 20, ctx.total_memory // 16)) \
            if ctx.keeps_freed_memory else BufferPool(self._stream)
        self._tail: Optional[Completion] = None  # the completion the next call shares, unrecorded
        self._lt = None
        self._workspace = 0
        self._const_ptrs: List[int] = []
        self._allocs: List[int] = []  # device memory owned for the executable's life
        self._events: list = []  # free events (a pool)
        self._wait_event = driver.Event()
        self._readers = {}  # argument type -> its reader (``interop.reader_for``)
        self._inflight = collections.deque()  # (completion, objects to keep alive until then)
        self._slots: List[_Slot] = []
        self._lock = threading.Lock()
        try:
            for i, blob in enumerate(m.constants):
                p = ctx.alloc(len(blob), what=f"constant {i} of {m.name}")
                self._allocs.append(p)
                driver.memcpy_htod(p, _host_address(blob), len(blob), self._stream)
                self._const_ptrs.append(p)
            if m.uses_cublaslt:
                from . import cublaslt
                self._lt = cublaslt.Lt(ctx)
                self._workspace = ctx.alloc(cublaslt.WORKSPACE_BYTES, what=f"the cuBLASLt workspace of {m.name}")
                self._allocs.append(self._workspace)
            self._stream.synchronize("uploading constants")
            self._slots.append(self._new_slot())  # the first arena; more only for concurrent calls
        except BaseException:
            self._release()
            raise

    # -- info -------------------------------------------------------------------------------

    @property
    def device(self) -> int:
        return self.ctx.device

    @property
    def stream(self) -> int:
        """The raw handle of the executable's stream."""
        return self._stream.ptr

    def synchronize(self) -> None:
        """Wait for every call queued so far."""
        self.ctx.make_current()
        dq = self._inflight
        n = len(dq)  # the calls queued before this point are done after the synchronize
        self._stream.synchronize(f"waiting for {self._m.name}")
        for _ in range(n):
            dq.popleft()

    # -- the profile of a profiled build ---------------------------------------------------

    @property
    def profiled(self) -> bool:
        return self._profile_kernels is not None

    def profile(self):
        """The GPU time of every step of the calls since the executable was made or its profile
        reset (``hlo.runtime.cpu.profile.Profile``, with the spans for ``export_trace``); waits
        for the calls queued so far. ``NotProfiledError`` for an unprofiled build."""
        from hlo.runtime.cpu.profile import NOT_PROFILED, NotProfiledError
        if self._timer is None:
            raise NotProfiledError(NOT_PROFILED)
        self.ctx.make_current()
        return self._timer.profile(self._stream.handle)

    def reset_profile(self) -> None:
        from hlo.runtime.cpu.profile import NOT_PROFILED, NotProfiledError
        if self._timer is None:
            raise NotProfiledError(NOT_PROFILED)
        self.ctx.make_current()
        self._timer.reset(self._stream.handle)

    # -- slots --------------------------------------------------------------------------------

    def _new_slot(self) -> _Slot:
        m, ctx = self._m, self.ctx
        s = _Slot()
        s.arena = ctx.alloc(m.arena_size, what=f"the arena of {m.name}") if m.arena_size else 0
        try:
            s.host = ctx.host_alloc(8)
        except BaseException:
            ctx.free(s.arena)
            raise
        s.env = launch.Env(self.module, self._stream, self._const_ptrs, [len(c) for c in m.constants],
                            s.arena, m.arena_size, [x.nbytes for x in self._in], [x.nbytes for x in self._out],
                            self._lt, self._workspace, s.host)
        try:
            s.records = launch.build(m.steps, s.env)
            if self._profile_kernels is not None:
                from .profile import EventTimer, timed_records
                descs: list = []
                s.records = timed_records(s.records, descs, self._profile_kernels)
                if self._timer is None:  # (every slot's records are the same tree)
                    self._timer = EventTimer(descs, driver)
                s.env.timer = self._timer
            if self._graph_min:
                s.records = graph.graphify(s.records, s.env, self._graph_min)
        except BaseException:
            ctx.free(s.arena)
            ctx.host_free(s.host)
            raise
        return s

    def _take_slot(self) -> _Slot:
        try:
            return self._slots.pop()
        except IndexError:
            return self._new_slot()

    # -- calling ------------------------------------------------------------------------------

    def __call__(self, *args) -> List[DeviceArray]:
        return self.run(args)

    def run(self, args: Sequence) -> List[DeviceArray]:
        """Queue one call on ``args``; returns the results as ``DeviceArray``\\ s at once."""
        if len(args) != self._nin:
            raise ArgumentError(f"expected {self._nin} argument(s) ({', '.join(self.input_types)}), "
                                f"got {len(args)}")
        ctx, stream, pool = self.ctx, self._stream, self._pool
        ctx.ensure_current()
        dq = self._inflight
        if len(dq) >= _INFLIGHT_POLL:  # amortized: one query per few calls, not one per call
            while dq and dq[0][0].ready():
                dq.popleft()
        ins = [0] * self._nin
        outs = [0] * self._nout
        temps = {}  # input index -> staging allocation (numpy arguments)
        keep = []
        donated = {}  # input index -> DeviceArray used in place (a result takes its buffer over)
        taken = []  # the DeviceArrays this call marked deleted (undone if it fails)
        out_bufs: List[Optional[DeviceBuffer]] = [None] * self._nout
        streams = {}  # the other libraries' streams the arguments came from (``interop``)
        try:
            for i, a in enumerate(args):
                ins[i] = self._bring(i, a, temps, keep, streams)
            if streams:  # once per producer stream, not once per argument
                self._order_foreign(streams)
            if self._written:
                self._donate(args, ins, temps, keep, donated)
            for o, (shape, dtype, strides, nbytes, _) in enumerate(self._out_info):
                i = self._aliases.get(o)
                if i is not None:
                    if i in donated:  # the donated array's own memory
                        taken.append(donated[i])
                        buf = donated.pop(i)._take_buffer()
                        buf.stream = stream  # freed after this call's work, not the producer's
                    else:  # a private copy (a numpy argument's upload, a declined donation)
                        buf = DeviceBuffer(temps.pop(i), nbytes, ctx, stream, None, pool)
                    self._donation.aliased_bytes += nbytes
                else:
                    buf = DeviceBuffer(pool.take(nbytes) or self._alloc(nbytes, o, True), nbytes, ctx,
                                       stream, None, pool)
                out_bufs[o] = buf
                outs[o] = buf.ptr
            for a in donated.values():  # written as scratch, not returned: used up
                taken.append(a)
                buf = a._take_buffer()
                buf.stream = stream  # freed (with the array) after this call's work
                keep.append(buf)
            slot = self._take_slot()
            try:
                timer = self._timer
                if timer is None:
                    launch.run(slot.records, (ins, outs), slot.env)
                else:  # a profiled build: the whole call between two events too
                    e = timer.start(stream.handle)
                    launch.run(slot.records, (ins, outs), slot.env)
                    timer.stop_call(e, stream.handle)
            finally:
                self._slots.append(slot)
        except BaseException:
            for i, p in temps.items():
                if not pool.give(p, self._in[i].nbytes):
                    ctx.free(p, stream)
            for a in taken:
                a._deleted = False  # the call did not happen: the donated array stays usable
            del out_bufs  # gives back what this call allocated (stream-ordered)
            raise
        for i, p in temps.items():  # the stream reads them before any later use
            if not pool.give(p, self._in[i].nbytes):
                ctx.free(p, stream)
        done = self._tail
        if done is None or done.recorded:  # one unrecorded completion serves the calls until then
            done = self._tail = Completion(stream, self._m.name, self._events)
        if keep:
            dq.append((done, keep))
        return [DeviceArray._result(b, shape, dtype, strides, bstrides, done)
                for b, (shape, dtype, strides, _, bstrides) in zip(out_bufs, self._out_info)]

    def _alloc(self, nbytes: int, index: int, result: bool) -> int:
        """New device memory for result / argument ``index`` (stream-ordered); on running out,
        the pool's kept buffers and the memory the driver's pool keeps are freed and the
        allocation tried once more."""
        s = (self._out if result else self._in)[index]
        what = f"{'result' if result else 'argument'} {index} ({_type_str(s.name, s.shape)}) of {self._m.name}"
        try:
            return self.ctx.alloc(nbytes, self._stream, what=what)
        except CudaOutOfMemoryError:
            if not self._pool.held and self.ctx.mempool is None:
                raise
            self._pool.clear()
            if self.ctx.mempool is not None:  # what the driver's pool keeps goes back too
                self._stream.synchronize("freeing memory kept for reuse")
                self.ctx.trim_pool()
            return self.ctx.alloc(nbytes, self._stream, what=what)

    def _donate(self, args, ins: list, temps: dict, keep: list, donated: dict) -> None:
        """Decide each written (donated) input: a ``DeviceArray`` of hlo's own memory that
        overlaps no other argument is used in place (``donated``: its buffer becomes the
        aliased result, or is used up); any other (a foreign GPU array, memory shared with
        another argument) is copied on the device first, with a warning
        (``hlo.runtime.donation``). numpy arguments were uploaded to private copies already."""
        written = self._written
        ranges = [None if i in temps else (p, s.nbytes) for i, (p, s) in enumerate(zip(ins, self._in))]
        owned = [type(a) is DeviceArray and a._buf.owner is None for a in args]
        declined = declined_ranges(ranges, written, owned, self.input_names)
        for k in written:
            if k in temps:
                continue
            why = declined.get(k)
            if why is None:
                donated[k] = args[k]
                self._donation.used += 1
                continue
            s = self._in[k]
            p = self._pool.take(s.nbytes) or self._alloc(s.nbytes, k, False)
            temps[k] = p
            if s.nbytes:
                driver.memcpy_dtod(p, ins[k], s.nbytes, self._stream)
            ins[k] = p
            self._donation.declined += 1
            name = self.input_names[k] if self.input_names is not None and k < len(self.input_names) else str(k)
            self._donation.last_declined = {name: why}
            warn_declined(name, _type_str(s.name, s.shape), why)

    def donation_stats(self) -> dict:
        """What donation did on this executable's calls (``hlo.runtime.donation.DonationStats``)."""
        return self._donation.as_dict()

    def _bring(self, i: int, a, temps: dict, keep: list, streams: dict) -> int:
        """The device address of argument ``i`` (copied to the device if it is host data)."""
        s = self._in[i]
        if type(a) is DeviceArray:
            if a.shape != s.shape or a.dtype != s.dtype:
                raise self._bad(i, s, a.dtype, a.shape)
            if (a._strides is not None or not s.row_major) and \
                    not strides_match(a.shape, a._strides, s.strides, s.dtype.itemsize):
                raise ArgumentError(f"argument {i}: a device array with strides {a.strides}; this "
                                    f"executable reads {_type_str(s.name, s.shape)} with strides {s.strides}")
            if a._deleted:
                a._check_live()
            buf = a._buf
            if buf.ctx is not self.ctx:
                raise ArgumentError(f"argument {i} lives on cuda:{a.device}; this executable runs on "
                                    f"cuda:{self.ctx.device}")
            stream = self._stream
            done = a._done
            if done is not None and done.stream is not stream:
                done.order_after(stream)
            if buf.stream is not stream or buf.owner is not None:
                keep.append(a)  # memory freed on another stream (or owned elsewhere): held until done
            return buf.ptr
        if not isinstance(a, np.ndarray):
            read = self._readers.get(type(a), _UNSEEN)
            if read is _UNSEEN:
                read = self._readers[type(a)] = interop.reader_for(type(a)) or self._read_general
            try:
                f = read(a, streams, self._stream.ptr, keep)
            except (TypeError, ValueError, BufferError) as e:
                raise ArgumentError(f"argument {i}: {e}") from None
            if f is not None:
                ptr, shape, dtype, strides, device_id = f
                if dtype != s.dtype or shape != s.shape:
                    raise self._bad(i, s, dtype, shape)
                if device_id is not None and device_id != self.ctx.device:
                    raise ArgumentError(f"argument {i} lives on cuda:{device_id}; this executable runs "
                                        f"on cuda:{self.ctx.device}")
                if (strides != s.strides if strides is not None else not s.row_major) and \
                        not strides_match(shape, strides, s.strides, s.dtype.itemsize):
                    raise ArgumentError(
                        f"argument {i}: a GPU array with strides {strides or 'C-contiguous'} (bytes); "
                        f"this executable reads {_type_str(s.name, s.shape)} with strides {s.strides}: "
                        "pass a contiguous array (e.g. torch's .contiguous())")
                return ptr
            a = np.asarray(a)
        if a.dtype != s.dtype or a.shape != s.shape:
            raise self._bad(i, s, a.dtype, a.shape)
        a = np.ascontiguousarray(a.transpose(s.perm) if s.perm is not None else a)
        p = self._pool.take(s.nbytes) or self._alloc(s.nbytes, i, False)
        temps[i] = p
        driver.memcpy_htod(p, a.ctypes.data, s.nbytes, self._stream)
        return p

    @staticmethod
    def _read_general(a, streams: dict, stream_handle: int, keep: list):
        """A GPU array of a producer without a fast reader: DLPack, else the CUDA array
        interface (``interop.import_array``); the streams it names are ordered once per call."""
        f = interop.import_array(a, stream_handle, lambda h: streams.__setitem__(h, h))
        if f is None:
            return None
        keep.append(f.keep)
        return f.ptr, f.shape, f.dtype, f.strides, f.device_id

    def _order_foreign(self, streams: dict) -> None:
        """Order the executable's stream after each producer stream the arguments named (a
        raw handle, or a callable returning one: read once per call)."""
        for v in streams.values():
            h = v() if callable(v) else v
            if h is not None:
                driver.order_after_foreign(self._stream, int(h), self._wait_event)

    @staticmethod
    def _bad(i, s, dtype, shape) -> ArgumentError:
        return ArgumentError(f"argument {i}: expected {_type_str(s.name, s.shape)}, got "
                             f"{np.dtype(dtype)}[{','.join(str(d) for d in shape)}]")

    # -- teardown -----------------------------------------------------------------------------

    def _release(self) -> None:
        ctx = self.ctx
        try:
            ctx.make_current()
            self._stream.synchronize()
        except Exception:
            pass
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.clear(close=True)
        for s in getattr(self, "_slots", []):
            s.records = None  # CUDA graphs go (an in-flight launch completes first)
            for fn, p in ((ctx.free, s.arena), (ctx.host_free, s.host)):
                try:
                    if p:
                        fn(p)
                except Exception:
                    pass
        self._slots = []
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.release()
            self._timer = None
        for p in getattr(self, "_allocs", []):
            try:
                ctx.free(p)
            except Exception:
                pass
        self._allocs = []

    def __del__(self):
        # at interpreter exit the module's globals may already be None
        if getattr(driver, "cu", None) is not None and hasattr(self, "ctx"):
            self._release()


def _host_address(blob: bytes) -> int:
    return np.frombuffer(blob, np.uint8).ctypes.data if blob else 0


__all__ = ["CudaExecutable", "Manifest", "encode_constants", "CudaError", "ArgumentError"]
