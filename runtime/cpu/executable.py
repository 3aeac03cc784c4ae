"""``Executable``: compiled kernels + buffer plan + call sequence, callable from Python.

The native side is one entry point, ``hlo_run(void** inputs, void** outputs, void* arena,
int64 nthreads)``, which runs the whole schedule. A call from Python validates the arguments,
passes their data pointers (inputs are used in place — no copies — when C-contiguous),
allocates the outputs as numpy arrays and makes one native call (ctypes releases the GIL).

Arenas (scratch memory from the buffer plan) come from a pool: a call takes one, or allocates a
fresh one if all are in use by other threads, and returns it afterwards, so concurrent calls
from several Python threads are safe and never share scratch memory.

Host calls (``hlo.debug.print``, ``hlo.pure_callback``): the native code calls one dispatcher
per executable (a ctypes callback, which takes the GIL) with a call site and its buffers; the
site's callback (``hlo.ir.callbacks``) gets copies of the operands and its results are written
into the result buffers. An exception in the callback makes the native entry return at once and
is raised from the call (the dispatcher keeps it per thread).

``native_call(fallback, finish)`` wraps the executable's CPython entry (``hlo_call_py``,
``cpu/abi.py``; ``cpu/pycall.py``) into a builtin function: exact numpy arguments run with no
Python at all, any other call goes to ``fallback``. ``hlo.jit`` calls it first.

Everything needed to run again without compiling is in ``object_code`` (native object bytes),
``manifest`` (a JSON-able dict) and ``core_objects`` (library code the object calls: the GEMM's
shared bodies, by symbol; the manifest's ``cores`` lists them with their sha256):
``Executable.from_object(object_code, manifest, cores=...)`` links the library code (once per
process, ``loader.link_library``), then the object, and is the path every executable takes,
fresh or loaded.
"""
from __future__ import annotations

import ctypes
import functools
import json
import operator
import threading
from typing import Callable, List, Optional, Sequence

import numpy as np

from .. import output_pool
from ..donation import DonationStats, prepare_host
from ..signature import ArgumentError, Signature, _Sig, _type_str
from . import blas_threads
from .loader import LoadedObject, load_library

FORMAT_VERSION = 1
_RUN_SIG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


_may_share = np.may_share_memory

# ``(type, shape, dtype, strides)`` of an array: what ``run`` compares against the signature.
_ARRAY_KEY = operator.attrgetter("__class__", "shape", "dtype", "strides")


def c_strides(shape, dtype) -> tuple:
    """The strides of a C-contiguous array of ``shape`` and ``dtype``."""
    out, step = [], np.dtype(dtype).itemsize
    for d in reversed(tuple(shape)):
        out.append(step)
        step *= d
    return tuple(reversed(out))


def _layout_probe() -> bool:
    """True if this interpreter's tuple and numpy array layouts are the ones the fast entry
    reads (CPython 64-bit with the GIL; checked, never assumed)."""
    from .abi import NP_ARRAY_DATA, PY_TUPLE_ITEMS
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    try:
        a = np.zeros(3, np.float32)
        t = (a, a)
        item = ctypes.c_void_p.from_address(id(t) + PY_TUPLE_ITEMS).value
        data = ctypes.c_void_p.from_address(id(a) + NP_ARRAY_DATA).value
        return item == id(a) and data == a.ctypes.data
    except Exception:
        return False


_FAST_OK: Optional[bool] = None
_HOST_SIG = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))


class _HostSite:
    """One host call site: reads its operands out of the native buffers (copies, in each
    buffer's layout), calls the callback, writes the checked results into the result buffers."""

    def __init__(self, d):
        from hlo.ir.types import BY_NAME, TensorType
        self.callback_id = int(d["callback_id"])
        self.n_in = int(d["operands"])
        self.where = str(d.get("where", ""))
        self.sigs = [_Sig(t) for t in d["types"]]
        self.result_types = [TensorType(s.shape, BY_NAME[s.name]) for s in self.sigs[self.n_in:]]
        self.collective = None
        if d.get("collective"):  # a collective, run in memory by the devices' runtime
            from .collectives import CollectiveSite
            self.collective = CollectiveSite(d["collective"])

    @staticmethod
    def _view(addr, s: "_Sig") -> np.ndarray:
        if s.nbytes == 0:
            return np.empty(s.phys_shape, s.dtype)
        raw = (ctypes.c_char * s.nbytes).from_address(addr)
        return np.frombuffer(raw, s.dtype).reshape(s.phys_shape)

    def run(self, buffers) -> None:
        from hlo.ir.callbacks import invoke
        args = []
        for k, s in enumerate(self.sigs[:self.n_in]):
            a = self._view(buffers[k], s)
            args.append(np.array(a if s.perm is None else a.transpose(np.argsort(s.perm))))
        if self.collective is not None:
            outs = self.collective.run(args)
        else:
            outs = invoke(self.callback_id, args, self.result_types, self.where)
        for k, (o, s) in enumerate(zip(outs, self.sigs[self.n_in:])):
            if s.nbytes:
                dst = self._view(buffers[self.n_in + k], s)
                dst[...] = o if s.perm is None else o.transpose(s.perm)
_PY_SIG = ctypes.CFUNCTYPE(None, ctypes.py_object, ctypes.py_object, ctypes.c_void_p, ctypes.c_int64)


class Executable(Signature):
    """A compiled program for the host CPU."""

    compile_times: dict   # seconds per compile phase (set by the backend that built it)
    llvm_opt_level: int   # the LLVM pipeline it was built with (as_text("llvm"/"asm") runs it again)

    def __init__(self, object_code: bytes, manifest: dict, ir_text: str = "", steps_text: str = "",
                 threads: Optional[int] = None, cores: Optional[dict] = None,
                 donated: Sequence[int] = ()):
        global _FAST_OK
        if manifest.get("format") != FORMAT_VERSION:
            raise ValueError(f"executable format {manifest.get('format')!r} is not supported "
                             f"(this hlo reads format {FORMAT_VERSION})")
        from .target import host
        host().check_loadable(manifest.get("target") or {}, "the executable")
        self.object_code = bytes(object_code)
        self.manifest = manifest
        self.ir_text = ir_text
        self.steps_text = steps_text
        for lib in manifest.get("libraries", []):
            load_library(_resolve_library(lib))
        self._blas = "blas" in manifest.get("libraries", [])
        self.core_objects = _link_cores(manifest.get("cores") or [], cores or {})
        syms = [manifest["entry"]] + [manifest[k] for k in ("py_entry", "call_entry") if manifest.get(k)]
        self._obj = LoadedObject(self.object_code, syms)
        self._fn = _RUN_SIG(self._obj.address(manifest["entry"]))
        self._connect_pool()
        self._host_errors = self._connect_host_calls()
        self._counters = self._connect_profile()
        self._trace = self._connect_trace() if self._counters is not None else None
        if _FAST_OK is None:
            _FAST_OK = _layout_probe()
        self._pyfn = _PY_SIG(self._obj.address(manifest["py_entry"])) \
            if manifest.get("py_entry") and _FAST_OK else None
        self._in = [_Sig(d) for d in manifest["inputs"]]
        self._out = [_Sig(d) for d in manifest["outputs"]]
        self._arena_size = int(manifest["arena_size"])
        self._arenas: List[int] = []  # free arena addresses (a pool: one per concurrent call)
        self._arena_mem = {}
        self._nin = len(self._in)
        self._nout = len(self._out)
        self._out_specs = [(s.phys_shape, s.dtype) for s in self._out]
        # large outputs, or several medium ones, come from recycled memory (no page faults on
        # every call: ``output_pool.call_threshold``)
        pool_min = output_pool.call_threshold([s.nbytes for s in self._out])
        # per output: the pool's allocator, or None (a plain ``np.empty``)
        self._pooled = [output_pool.allocator(sh, dt, pool_min) for sh, dt in self._out_specs]
        # per output, a function of no arguments that makes it
        self._makers = tuple(take or functools.partial(np.empty, sh, dt)
                             for take, (sh, dt) in zip(self._pooled, self._out_specs))
        self._simple = all(s.perm is None for s in self._in + self._out)
        # What ``run`` accepts without normalizing: per input, ``_ARRAY_KEY`` of an exact,
        # C-contiguous numpy array of the right shape and dtype (one tuple compare per call).
        self._expected = tuple((np.ndarray, s.shape, s.dtype, c_strides(s.shape, s.dtype)) for s in self._in) \
            if self._simple else None
        self._make0 = self._makers[0] if self._nout == 1 else None
        self._init_donation(manifest, donated)
        if threads is None:
            from .target import default_threads
            threads = default_threads()
        self.threads = int(threads)

    def _init_donation(self, manifest: dict, donated: Sequence[int]) -> None:
        """The inputs the code writes (manifest ``inputs_written``; a manifest from before that
        key: ``donated``, the signature's donated arguments, all assumed written) and the outputs
        that are donated inputs' memory (``aliases``: ``[[output, input], ...]``); see
        ``hlo.runtime.donation``."""
        written = manifest.get("inputs_written")
        self._legacy_donation = written is None and bool(donated)
        written = set(int(i) for i in (donated if written is None else written))
        if any(not 0 <= i < self._nin for i in written):
            raise ValueError(f"inputs_written {sorted(written)} names an input that does not exist")
        alias_of: List[Optional[int]] = [None] * self._nout
        for pair in manifest.get("aliases") or []:
            o, i = (int(x) for x in pair)
            if not (0 <= o < self._nout and 0 <= i < self._nin) or alias_of[o] is not None \
                    or i in alias_of or self._out[o].nbytes != self._in[i].nbytes:
                raise ValueError(f"alias {list(pair)}: not an output and a distinct input of its size")
            alias_of[o] = i
            written.add(i)
        self._written = tuple(sorted(written))
        self._nwritten = len(self._written)
        # per written input, the other inputs of at least a byte it must not overlap
        self._overlap_pairs = tuple((k, tuple(j for j in range(self._nin) if j != k and self._in[j].nbytes))
                                    for k in self._written if self._in[k].nbytes)
        self._lone_written = self._written[0] if self._nwritten == 1 and not any(
            others for _, others in self._overlap_pairs) else None
        self.input_names: Optional[Sequence[str]] = None  # what warnings call the inputs
        self._type_strs = [_type_str(s.name, s.shape) for s in self._in]
        # per aliased output: (output, input, same type, physical shape, dtype)
        self._aliased = tuple((o, i, (self._out[o].phys_shape, self._out[o].dtype) ==
                               (self._in[i].phys_shape, self._in[i].dtype),
                               self._out[o].phys_shape, self._out[o].dtype)
                              for o, i in enumerate(alias_of) if i is not None)
        self._alias_bytes = sum(self._out[o].nbytes for o, *_ in self._aliased)
        aliased = {o for o, *_ in self._aliased}
        self._alias_makers = tuple(None if o in aliased else m for o, m in enumerate(self._makers))
        self._alias0 = self._aliased[0][1] if self._nout == 1 and self._aliased and self._aliased[0][2] else None
        if self._aliased:
            self._make0 = None
        self._donation = DonationStats()
        self._native_ctx: list = []  # the native entries' ctx arrays (their hit counts)

    @property
    def aliases(self) -> dict:
        """Output -> the donated input whose memory it is."""
        return {o: i for o, i, *_ in self._aliased}

    @property
    def inputs_written(self) -> tuple:
        return self._written

    def donation_stats(self) -> dict:
        """What donation did on this executable's calls (``hlo.runtime.donation.DonationStats``):
        arguments used in place / declined, bytes of results that were donated memory, the
        reasons of the last call that declined one. Calls served by the native entry used every
        donation (it hands any other call to the Python path)."""
        from .abi import CTX_HITS
        d = self._donation.as_dict()
        native = sum(int(c[CTX_HITS]) for c in self._native_ctx)
        d["used"] += native * len(self._written)
        d["aliased_bytes"] += native * self._alias_bytes
        return d

    def _connect_pool(self) -> None:
        """Point the executable at the process-wide worker pool (if it has parallel kernels)."""
        from .abi import POOL_PTR
        addr = self._obj.global_address(POOL_PTR)
        if addr:
            from .thread_pool import pool_address
            ctypes.c_int64.from_address(addr).value = pool_address()

    def _connect_host_calls(self) -> Optional[threading.local]:
        """Point the executable's host calls at a dispatcher of its own; returns the per-thread
        slot where a callback's exception waits for the call to raise it (None: no host calls)."""
        sites = self.manifest.get("host_calls") or []
        if not sites:
            return None
        from .abi import HOST_CALL_PTR
        errors = threading.local()
        run_site = [_HostSite(d).run for d in sites]

        def dispatch(site, buffers):  # keeps no reference to the executable (no cycle)
            try:
                run_site[site](buffers)
                return 0
            except BaseException as e:  # raised by the call (_run_native), not lost in ctypes
                errors.pending = e
                return 1

        self._dispatch = _HOST_SIG(dispatch)  # alive as long as the code that calls it
        addr = self._obj.global_address(HOST_CALL_PTR)
        ctypes.c_void_p.from_address(addr).value = ctypes.cast(self._dispatch, ctypes.c_void_p).value
        return errors

    def _connect_profile(self) -> Optional[np.ndarray]:
        """The counters of a profiled build (manifest ``profile``: the global's symbol and one
        record per timed step) as an int64 array of (nanoseconds, calls) rows, the last row the
        whole call's; None for an unprofiled build."""
        prof = self.manifest.get("profile")
        if not prof:
            return None
        from .abi import PROFILE_SLOTS
        addr = self._obj.global_address(prof["symbol"])
        slots_at = self._obj.global_address(PROFILE_SLOTS)
        slots = len(prof["steps"]) + 1
        if not addr or not slots_at or ctypes.c_int64.from_address(slots_at).value != slots:
            raise ValueError(f"the executable's profile counters do not match its manifest's "
                             f"{slots - 1} timed steps")
        return np.ctypeslib.as_array((ctypes.c_int64 * (2 * slots)).from_address(addr)).reshape(slots, 2)

    def _connect_trace(self):
        """A profiled build's event buffer (``abi.TRACE``: an int64 array of (tag, start ns,
        end ns, thread) rows), its count of appended events (an int64 array of one) and its
        capacity; None for a build that has none (a profiled build saved before it had one)."""
        from .abi import TRACE, TRACE_CAP, TRACE_NEXT
        at, next_at, cap_at = (self._obj.global_address(n) for n in (TRACE, TRACE_NEXT, TRACE_CAP))
        if not (at and next_at and cap_at):
            return None
        cap = ctypes.c_int64.from_address(cap_at).value
        events = np.ctypeslib.as_array((ctypes.c_int64 * (4 * cap)).from_address(at)).reshape(cap, 4)
        return events, np.ctypeslib.as_array((ctypes.c_int64 * 1).from_address(next_at)), cap

    def trace_events(self):
        """The spans recorded since the build was loaded or its profile last reset: an int64
        array of (tag, start ns, end ns, thread) rows in the order they were appended, and the
        number dropped once the buffer was full (``hlo.runtime.cpu.trace`` reads them)."""
        from .profile import NOT_PROFILED, NotProfiledError
        if self._counters is None:
            raise NotProfiledError(NOT_PROFILED)
        if self._trace is None:
            raise NotProfiledError("this profiled executable was built before profiled builds "
                                   "recorded a timeline; compile it again with profile=True")
        events, nxt, cap = self._trace
        n = int(nxt[0])
        return events[:min(n, cap)].copy(), max(0, n - cap)

    @property
    def profiled(self) -> bool:
        """True for a profiled build (``compile(..., profile=True)``)."""
        return self._counters is not None

    def profile(self):
        """The in-program profile since the build was loaded or last reset
        (``hlo.runtime.cpu.profile.Profile``); ``NotProfiledError`` for an unprofiled build."""
        from .profile import NOT_PROFILED, NotProfiledError, Profile
        if self._counters is None:
            raise NotProfiledError(NOT_PROFILED)
        events, dropped = self.trace_events() if self._trace is not None else (None, 0)
        return Profile.from_counters(self.manifest["profile"]["steps"], self._counters.copy(),
                                     events, dropped)

    def reset_profile(self) -> None:
        """Zero a profiled build's counters (calls running meanwhile may be half counted)."""
        if self._counters is None:
            from .profile import NOT_PROFILED, NotProfiledError
            raise NotProfiledError(NOT_PROFILED)
        self._counters[...] = 0
        if self._trace is not None:
            self._trace[1][0] = 0

    def _raise_host_error(self) -> None:
        e = getattr(self._host_errors, "pending", None)
        if e is not None:
            self._host_errors.pending = None
            raise e

    # -- info -----------------------------------------------------------------------------

    @property
    def row_major(self) -> bool:
        """True if every input and output is row-major, so ``run_unchecked`` takes the user's
        arrays and returns the results as they are."""
        return self._simple

    def manifest_json(self) -> str:
        return json.dumps(self.manifest, sort_keys=True)

    @classmethod
    def from_object(cls, object_code: bytes, manifest: dict, **kw) -> "Executable":
        return cls(object_code, manifest, **kw)

    # -- calling ---------------------------------------------------------------------------

    def _take_arena(self) -> Optional[int]:
        if not self._arena_size:
            return None
        try:
            return self._arenas.pop()
        except IndexError:
            raw = np.empty(self._arena_size + 64, np.uint8)
            addr = raw.ctypes.data
            addr += (-addr) % 64
            self._arena_mem[addr] = raw
            return addr

    def _bad_args(self, args) -> "ArgumentError":
        if len(args) != self._nin:
            return ArgumentError(f"expected {self._nin} argument(s) ({', '.join(self.input_types)}), "
                                 f"got {len(args)}")
        for i, (a, s) in enumerate(zip(args, self._in)):
            a = np.asarray(a)
            if a.dtype != s.dtype or a.shape != s.shape:
                return ArgumentError(f"argument {i}: expected {_type_str(s.name, s.shape)}, got "
                                     f"{a.dtype}[{','.join(str(d) for d in a.shape)}]")
        return ArgumentError("invalid arguments")

    def _normalize(self, args) -> tuple:
        """Arguments as C-contiguous arrays in each input's physical layout (copies only where
        needed), or raise ArgumentError."""
        out = []
        for i, (a, s) in enumerate(zip(args, self._in)):
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.dtype != s.dtype or a.shape != s.shape:
                raise self._bad_args(args)
            if s.perm is not None:
                a = np.ascontiguousarray(a.transpose(s.perm))
            elif not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            out.append(a)
        return tuple(out)

    def run(self, args: Sequence) -> List[np.ndarray]:
        """Run on ``args`` (numpy arrays or array-likes); returns a list of new numpy arrays.
        Inputs are read in place; nothing is copied unless an input is not C-contiguous."""
        if len(args) != self._nin:
            raise self._bad_args(args)
        try:
            ok = tuple(map(_ARRAY_KEY, args)) == self._expected
        except Exception:  # not arrays (Python numbers, lists, ...): normalized below
            ok = False
        if ok:
            return list(self.run_unchecked(tuple(args)))
        ins = self._normalize(args)
        if self._written:
            # arrays the normalization copied (a strided view, another layout): declined
            copied = [k for k in self._written if isinstance(args[k], np.ndarray) and ins[k] is not args[k]
                      and not np.may_share_memory(ins[k], args[k])]
            ins = prepare_host(ins, self._written, self.input_names, self._donation, self._type_strs,
                               copied)
        outs = self._run_prepared(ins)
        if self._simple:
            return list(outs)
        return [o if s.perm is None else o.transpose(np.argsort(s.perm)) for o, s in zip(outs, self._out)]

    def run_unchecked(self, ins: tuple) -> tuple:
        """The native call alone: ``ins`` must be a tuple of exact, C-contiguous ``np.ndarray``
        inputs in each input's physical layout, of the right shapes and dtypes (``run`` checks
        that; ``hlo.jit``'s fast path knows it from its cache key). Returns the tuple of new
        outputs in their physical layouts. Nothing is checked here: a wrong argument is memory
        corruption, not an error. A donated input whose memory may not be written in place
        (``hlo.runtime.donation``) is replaced by a copy, with a warning."""
        if self._written:
            # the common case in a few attribute reads: writable, owning arrays apart from the
            # other inputs (``donation.prepare_host`` decides the rest, and warns)
            if self._lone_written is not None:  # one written input, the only one of any size
                fl = ins[self._lone_written].flags
                if fl.writeable and fl.owndata:
                    self._donation.used += 1
                    return self._run_prepared(ins)
            for k in self._written:
                fl = ins[k].flags
                if not (fl.writeable and fl.owndata):
                    break
            else:
                for k, others in self._overlap_pairs:
                    a = ins[k]
                    for j in others:
                        if _may_share(a, ins[j]):
                            break
                    else:
                        continue
                    break
                else:
                    self._donation.used += self._nwritten
                    return self._run_prepared(ins)
            ins = prepare_host(ins, self._written, self.input_names, self._donation, self._type_strs)
        return self._run_prepared(ins)

    def _run_prepared(self, ins: tuple) -> tuple:
        if self._blas:
            blas_threads.enter()
            try:
                return self._run_native(ins)
            finally:
                blas_threads.leave()
        return self._run_native(ins)

    def _run_native(self, ins: tuple) -> tuple:
        if self._make0 is not None:
            outs = (self._make0(),)
        elif self._alias0 is not None:  # the one output is donated input _alias0 itself
            outs = (ins[self._alias0],)
            self._donation.aliased_bytes += self._alias_bytes
        elif self._aliased:  # outputs that are donated inputs: that memory, no allocation
            made = [None if make is None else make() for make in self._alias_makers]
            for o, i, same, shape, dtype in self._aliased:
                made[o] = ins[i] if same else ins[i].reshape(-1).view(dtype).reshape(shape)
            outs = tuple(made)
            self._donation.aliased_bytes += self._alias_bytes
        else:
            outs = tuple([make() for make in self._makers])
        if not self._arena_size:
            if self._pyfn is not None:
                self._pyfn(ins, outs, None, self.threads)
            else:
                self._call_pointers(ins, outs, None)
        else:
            arena = self._take_arena()
            try:
                if self._pyfn is not None:
                    self._pyfn(ins, outs, arena, self.threads)
                else:
                    self._call_pointers(ins, outs, arena)
            finally:
                self._arenas.append(arena)
        if self._host_errors is not None:
            self._raise_host_error()
        return outs

    def _call_pointers(self, ins, outs, arena) -> None:
        """``hlo_run`` through pointer arrays built here (when the fast entry is unusable)."""
        ip = (ctypes.c_void_p * max(1, self._nin))(*[a.ctypes.data for a in ins])
        op = (ctypes.c_void_p * max(1, self._nout))(*[o.ctypes.data for o in outs])
        self._fn(ip, op, arena, self.threads)

    def __call__(self, *args) -> List[np.ndarray]:
        return self.run(args)

    def native_call(self, fallback: Callable, finish) -> Optional[Callable]:
        """A builtin function that runs this executable on exact, C-contiguous, aligned numpy
        arrays of the signature's shapes and dtypes entirely in native code (``pycall``, the
        ``hlo_call_py`` entry of ``hlo.runtime.cpu.abi``) and hands every other call, with the
        same arguments, to ``fallback``. ``finish``: "single" (return the one output), "tuple"
        (the tuple of outputs) or a function of that tuple. None where the executable has no
        such entry or may not use it: host calls, BLAS (its thread setting), a non-row-major
        layout, or an interpreter whose object layout is not the one the entry reads. Outputs
        of the recycled-output pool's size come from the pool there too (the entry calls their
        ``output_pool.allocator``, as the Python path does), so they go back to it when the
        caller drops them."""
        from .abi import CALL_ENTRY
        entry = self.manifest.get("call_entry")
        if entry != CALL_ENTRY or self._blas or self._host_errors is not None or not self._simple:
            return None
        if self._legacy_donation or any(not same for _, _, same, _, _ in self._aliased):
            return None  # an entry made before it checked donations; an output that views one
        if finish == "single" and self._nout != 1:
            raise ValueError(f"native_call: finish='single' for {self._nout} outputs")
        from . import pycall
        fn = pycall.make(self._obj.address(entry), self, [s.dtype for s in self._in + self._out],
                         self._arena_size, self.threads, fallback, finish, self._pooled)
        if fn is not None and self._written:
            from .abi import SELF_CTX
            # a builtin method: its __self__ is the context tuple
            self._native_ctx.append(fn.__self__[SELF_CTX])  # type: ignore[attr-defined]
        return fn


def _link_cores(entries, objects: dict) -> dict:
    """Link the library code the manifest lists (``cores``: symbol and sha256 of each object)
    from ``objects`` (symbol -> bytes; one already linked in this process may be left out);
    returns the objects by symbol. ValueError when one is missing or its bytes are not the ones
    the manifest names."""
    import hashlib

    from .loader import library_object, link_library
    out = {}
    for e in entries:
        sym = e["symbol"]
        obj = objects.get(sym)
        if obj is not None and hashlib.sha256(obj).hexdigest() != e["sha256"]:
            raise ValueError(f"the library code {sym} is not the object the executable was "
                             "linked with (sha256 differs)")
        link_library(sym, obj)
        out[sym] = library_object(sym)
    extra = sorted(set(objects) - set(out))
    if extra:
        raise ValueError(f"library code {', '.join(extra)} is given but the executable does not list it")
    return out


def _resolve_library(name: str) -> str:
    """The path of a library the code calls, by its name in the fixed list (``blas``): a
    manifest never names a path."""
    if name == "blas":
        from hlo.backends.cpu.blas import find_blas
        b = find_blas()
        if b is None:
            from hlo.backends.cpu.blas import BLAS_PACKAGE
            raise RuntimeError(f"this executable calls a BLAS (compiled with HLO_CPU_GEMM=blas), but "
                               f"none is installed here (the optional {BLAS_PACKAGE}: pip install "
                               f"'hlo[blas]'); or recompile it without HLO_CPU_GEMM=blas")
        return b.path
    raise ValueError(f"the executable names the library {name!r}; hlo links only: blas")
