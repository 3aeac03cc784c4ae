"""``hlo.jit`` and ``hlo.make_ir``.

``hlo.jit(fun, static_argnums=(), static_argnames=(), donate_argnums=(), target=None)`` returns a
``JitFunction``. Calling it flattens the arguments (pytrees of arrays and Python scalars), looks
up the compiled executable for their abstract signature — shapes, dtypes, weak types, the pytree
structure, the values of static arguments and the target — and traces, lowers and compiles on a
miss. When a function that was already compiled misses, and ``hlo.config.log_recompiles`` is on
(or ``HLO_LOG=recompiles``), the logger ``hlo.recompiles`` says which argument changed and how.

Inside another trace, a JitFunction is inlined (its body is traced into the caller).

The fast path (what makes a cache hit cost about as much as the executable itself): a call
with positional arguments only, each an exact ``numpy.ndarray``, a numpy scalar or a Python
``bool``/``int``/``float``, is looked up by a key made in one ``map`` over the arguments —
``(type, shape, dtype, strides)`` per array, the type per Python number — plus the target, in a
table that maps it straight to the executable's runner and the result's unflattening. An entry
is added only after the full path (``_call``: flattening, abstract signature, cache) has
handled a call with that key, so the fast path never decides anything the full path has not:
keyword arguments, calls that pass static arguments, pytrees, other array types (jax arrays,
``__array__``/DLPack objects, ndarray subclasses, lists) and every error case take the full
path. On target cuda, GPU arrays (hlo's ``DeviceArray``, torch / cupy / jax arrays in CUDA
memory) take the fast path too, keyed the same way (torch tensors, which have no numpy
``strides``, by type, shape and dtype: the CUDA runtime checks their strides each call); results
are ``DeviceArray``\\ s, returned before the GPU has computed them. Inside a trace every call
takes the full path (and is inlined)."""
from __future__ import annotations

import functools
import inspect
import itertools
import logging
import operator
import os
import threading
import types
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from hlo.ir.targets import info
from hlo.runtime.cpu import pycall
from hlo.runtime.cuda.interop import gpu_array_type

from .. import config
from ..base import gc_pause
from ..base.boundary import api_boundary, native_first
from ..base.source_info import function_location, function_name, user_location
from ..config import check_target_name
from ..errors import ArgumentTypeError
from ..tracing.abstract import ShapedArray, array_key, c_strides, concrete_arg
from ..tracing.api_util import set_eager_compiler, static_key
from ..tracing.tracer import _state as _trace_state  # its ``stack`` is non-empty while tracing
from ..tracing.tracer import abstractify, is_tracing, trace_function
from ..tree_util import (
    PyTreeDef,
    SequenceKey,
    describe_difference,
    keystr,
    positional_treedef,
    tree_flatten_with_path,
    tree_unflatten,
    unflattener,
)
from . import progress
from .stages import Compiled, Lowered
from .targets import default_target, resolve_target

log = logging.getLogger("hlo.recompiles")

# The fast path keys an argument by ``array_key`` (type, shape, dtype, strides) or, for a Python
# number (no ``shape``), by its type (``_mixed_key``).
_ARRAY_KEY = array_key
_PY_NUMBERS = frozenset((bool, int, float))
_FAST_TABLE_LIMIT = 256  # fast entries per function (a strided view makes a key of its own)
_NATIVE_SWITCH = 64  # Python-path hits of another signature before the native entry may move


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    entries: int


class _Signature:
    """The abstract signature of one call, and its dynamic leaves."""

    __slots__ = ("leaves", "in_tree", "avals", "names", "params", "static_pos", "static_kw",
                 "statics", "target", "donated", "key")

    def __init__(self, leaves, in_tree, avals, names, params, static_pos, static_kw, statics,
                 target, donated):
        self.leaves = leaves
        self.in_tree: PyTreeDef = in_tree
        self.avals: Tuple[ShapedArray, ...] = avals
        self.names: Tuple[str, ...] = names  # a readable name per leaf: x, params['w'], args[2]
        self.params: Tuple[str, ...] = params  # the top-level parameter name per leaf
        self.static_pos: Tuple[Tuple[int, Any], ...] = static_pos  # (position, value), ascending
        self.static_kw: Tuple[Tuple[str, Any], ...] = static_kw
        self.statics: Tuple[Tuple[str, Any], ...] = statics  # (parameter name, value), for messages
        self.target = target
        self.donated = donated
        # the settings that change the generated code (hlo.config: matmul_precision on cuda)
        code = config.resolved_matmul_precision() if info(target).matmul_precision else None
        self.key = (in_tree, avals, tuple((n, static_key(v)) for n, v in statics), target, code)


_live: "weakref.WeakSet[JitFunction]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Another thread of the parent may have held a function's lock at the fork (its look-ups
    and cache updates are short, compiles are not under it; fork_safety.py)."""
    for f in list(_live):
        f._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class JitFunction:
    """A function compiled per abstract signature. See the module docstring."""

    def __init__(self, fun: Callable, static_argnums=(), static_argnames=(), donate_argnums=(),
                 target: Optional[str] = None, *, _eager: bool = False):
        if not callable(fun):
            raise TypeError(f"hlo.jit expects a callable, got {type(fun).__name__}")
        if target is not None:
            check_target_name(target)
        self.fun = fun
        self.target = target
        self._eager = _eager
        self._name = function_name(fun)
        self._loc = function_location(fun)
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        # computed once: the full path names every argument leaf on every call
        self._pos_params = [] if self._sig is None else [
            p for p in self._sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._static_argnums, self._static_argnames = self._resolve_static(
            _as_tuple(static_argnums, "static_argnums", int), _as_tuple(static_argnames, "static_argnames", str))
        self._donate_argnums = _as_tuple(donate_argnums, "donate_argnums", int)
        self._lock = threading.RLock()
        _live.add(self)  # its lock is made fresh in a forked child (_after_fork_in_child)
        # signature key -> (compiled, signature), least recently used first (config.jit_cache_size)
        self._cache: "OrderedDict[Any, Tuple[Compiled, _Signature]]" = OrderedDict()
        # (target, fast key) -> (run, finish, signature key)
        self._fast: Dict[Any, Tuple[Callable, Callable, Any]] = {}
        self._fast_of: Dict[Any, List[Any]] = {}  # signature key -> its fast keys (to evict)
        self._fast_generation = config.generation  # a code setting changed since: entries stale
        self._hit_counter = itertools.count()  # next() is one atomic C call: no lock per hit
        self._fast_limit = _FAST_TABLE_LIMIT  # 0 turns the fast path off (the tests compare both)
        self._numbers_keyed = False  # True once a fast entry takes a Python number
        self._misses = 0
        # The native entry (module docstring): a builtin function serving one signature
        self._native: Optional[Callable] = None
        self._native_sig = None  # the signature key it runs
        self._native_epoch = -1  # pycall.epoch() when it was made
        self._native_seen = 0  # its hit count when the LRU order last caught up with it
        self._native_hits = 0  # hits of the native entries dropped since clear_cache
        self._others = 0  # Python-path hits of other native-capable signatures since _native_mark
        self._native_mark = 0  # the native entry's hit count then
        functools.update_wrapper(self, fun, updated=())

    # --- static arguments ----------------------------------------------------------------
    def _positional_params(self) -> List[inspect.Parameter]:
        return self._pos_params

    def _has_varargs(self) -> bool:
        return self._sig is None or any(p.kind == p.VAR_POSITIONAL for p in self._sig.parameters.values())

    def _resolve_static(self, nums: Tuple[int, ...], names: Tuple[str, ...]):
        pos = self._positional_params()
        npos = len(pos)
        out_nums = []
        for i in nums:
            if not self._has_varargs() and not -npos <= i < npos:
                raise ValueError(f"hlo.jit({self._name}): static_argnums {i} is out of range for a "
                                 f"function with {npos} positional parameters")
            out_nums.append(i + npos if i < 0 and not self._has_varargs() else i)
        out_names = list(names)
        if self._sig is not None:
            params = self._sig.parameters
            has_kwargs = any(p.kind == p.VAR_KEYWORD for p in params.values())
            for n in names:
                if n not in params and not has_kwargs:
                    raise ValueError(f"hlo.jit({self._name}): static_argnames {n!r} is not a parameter "
                                     f"(parameters: {', '.join(params)})")
                p = params.get(n)
                if p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    idx = pos.index(p)
                    if idx not in out_nums:
                        out_nums.append(idx)
            for i in list(out_nums):
                if 0 <= i < npos and pos[i].kind == pos[i].POSITIONAL_OR_KEYWORD and pos[i].name not in out_names:
                    out_names.append(pos[i].name)
        return tuple(sorted(set(out_nums))), tuple(out_names)

    def _param_name(self, i: int) -> str:
        pos = self._positional_params()
        if i < len(pos):
            return pos[i].name
        var = None
        if self._sig is not None:
            var = next((p.name for p in self._sig.parameters.values() if p.kind == p.VAR_POSITIONAL), None)
        return f"{var or 'args'}[{i - len(pos)}]"

    # --- signatures -----------------------------------------------------------------------
    def _signature(self, args, kwargs, allow_struct: bool) -> _Signature:
        n = len(args)
        static_pos = {(i + n if i < 0 else i) for i in self._static_argnums}
        statics, dyn_args, dyn_pos, s_pos, s_kw = [], [], [], [], []
        for i, a in enumerate(args):
            if i in static_pos:
                statics.append((self._param_name(i), a))
                s_pos.append((i, a))
            else:
                dyn_args.append(a)
                dyn_pos.append(i)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self._static_argnames:
                statics.append((k, v))
                s_kw.append((k, v))
            else:
                dyn_kwargs[k] = v
        for name, v in statics:
            try:
                hash(v)
            except TypeError:
                raise ArgumentTypeError(
                    f"static argument {name} of hlo.jit({self._name}) must be hashable, got a "
                    f"{type(v).__name__}; use a tuple instead of a list, or make it a regular "
                    "(traced) argument") from None
        leaves_paths, tree = tree_flatten_with_path((tuple(dyn_args), dyn_kwargs))
        names, params, avals, leaves = [], [], [], []
        for path, leaf in leaves_paths:
            top, rest = path[1], path[2:]
            param = self._param_name(dyn_pos[top.idx]) if path[0] == SequenceKey(0) else top.key
            name = f"{param}{keystr(rest)}"
            names.append(name)
            params.append(param)
            avals.append(abstractify(leaf, f"argument {name}", allow_struct=allow_struct))
            leaves.append(leaf)
        donated = []
        for d in self._donate_argnums:
            d = d + n if d < 0 else d
            if d in static_pos:
                raise ArgumentTypeError(f"hlo.jit({self._name}): argument {self._param_name(d)} is "
                                        "both static and donated")
            if d in dyn_pos:
                k = dyn_pos.index(d)
                donated.extend(j for j, (p, _) in enumerate(leaves_paths)
                               if p[0] == SequenceKey(0) and p[1].idx == k)
        target = resolve_target(self.target)
        return _Signature(leaves, tree, tuple(avals), tuple(names), tuple(params), tuple(s_pos),
                          tuple(s_kw), tuple(statics), target, tuple(donated))

    def _flat_fun(self, sig: _Signature) -> Callable:
        """The function of the flat dynamic leaves that ``fun`` is for this signature."""
        def flat(*leaves):
            dyn_args, dyn_kwargs = tree_unflatten(sig.in_tree, leaves)
            args = list(dyn_args)
            for pos, v in sig.static_pos:  # ascending positions: each lands at its index
                args.insert(pos, v)
            kwargs = dict(dyn_kwargs)
            kwargs.update(sig.static_kw)
            return self.fun(*args, **kwargs)
        return flat

    # --- lowering and calling -------------------------------------------------------------
    def _lower(self, sig: _Signature) -> Lowered:
        from ..numpy import array_methods  # noqa: F401  (loads hlo.numpy: Tracer's operators)
        desc = f"hlo.jit({self._name})"
        fn_loc = self._loc.ir() if self._loc is not None else None
        with progress.compiling(desc, "traced"), gc_pause.paused():
            progress.stage("trace")  # (hlo compile prints its own "tracing")
            traced = trace_function(self._flat_fun(sig), sig.avals, None, description=desc,
                                    arg_names=sig.names, arg_params=sig.params,
                                    module_name=f"jit_{self._name}", fn_loc=fn_loc)
        return Lowered(traced.module, in_tree=sig.in_tree, out_tree=traced.out_tree,
                       in_avals=sig.avals, out_avals=traced.out_avals, arg_names=sig.names,
                       donated=sig.donated, target=sig.target, fun_name=self._name)

    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace for these arguments (arrays or ``hlo.ShapeDtypeStruct``) and return the IR."""
        low = self._lower(self._signature(args, kwargs, allow_struct=True))
        from .specializing import declared_ranges
        low.dim_ranges = declared_ranges((args, kwargs))
        return low

    @native_first  # self._native(*args) when there is one and no kwargs, else:
    def __call__(self, args, kwargs):
        __tracebackhide__ = True
        if self._native is not None and self._native_epoch != pycall.epoch():
            self._drop_native()  # a setting changed: made again on a fast hit below
        if not kwargs and not getattr(_trace_state, "stack", None):
            # The fast path (module docstring): one key, one lookup, the executable.
            if self._numbers_keyed:  # some entry takes Python numbers: no AttributeError to pay
                key = _mixed_key(args)
            else:
                try:
                    key = tuple(map(_ARRAY_KEY, args))
                except Exception:  # a Python number (no .shape) or an odd object
                    key = None
            if self._fast_generation != config.generation:  # e.g. matmul_precision was changed
                with self._lock:
                    self._fast.clear()
                    self._fast_of.clear()
                    self._fast_generation = config.generation
            try:
                entry = self._fast.get((self.target or default_target(), key))
            except Exception:  # an unhashable attribute, a bad HLO_TARGET: the full path says
                entry = None
            if entry is not None:
                run, finish, sig_key, native_ok = entry
                try:
                    outs = run(args)
                except _NotFast:
                    return self._call(args, kwargs)
                next(self._hit_counter)
                if native_ok and sig_key != self._native_sig:
                    self._python_hit(sig_key)
                try:
                    self._cache.move_to_end(sig_key)  # one C call: recency for the LRU bound
                except KeyError:  # evicted by another thread meanwhile
                    pass
                return finish(outs)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        """The full path: flatten, check, look up (or compile), run, unflatten."""
        if is_tracing():
            return self.fun(*args, **kwargs)  # jit inside jit: trace the body inline
        sig = self._signature(args, kwargs, allow_struct=False)
        with self._lock:
            hit = self._cache.get(sig.key)
            if hit is not None:
                self._cache.move_to_end(sig.key)
        if hit is None:
            compiled = self._compile_miss(sig)
        else:
            next(self._hit_counter)
            compiled = hit[0]
        device = info(sig.target).device_arrays  # GPU arrays go to the CUDA runtime as they are
        flat = [concrete_arg(x, a, n, device) for x, a, n in zip(sig.leaves, sig.avals, sig.names)]
        outs = compiled.run_flat(flat)
        if not kwargs:
            self._add_fast_entry(args, sig, compiled)
        return tree_unflatten(compiled.lowered.out_tree, outs)

    def _add_fast_entry(self, args: tuple, sig: _Signature, compiled: Compiled) -> None:
        """Let later calls whose fast key equals this call's skip ``_call`` (if they can)."""
        if sig.static_pos or sig.static_kw or len(sig.leaves) != len(args) \
                or len(self._fast) >= self._fast_limit:
            return
        convert, contiguous = [], True
        for i, (a, aval) in enumerate(zip(args, sig.avals)):
            t = type(a)
            if t is np.ndarray:
                contiguous = contiguous and a.strides == c_strides(a.shape, a.dtype)
            elif t in _PY_NUMBERS or isinstance(a, np.generic):
                convert.append((i, aval.dtype))
            elif not (info(sig.target).device_arrays and gpu_array_type(a) is not None):
                return  # (the CUDA runtime reads GPU arrays in place and checks them itself)
        if sig.in_tree != positional_treedef(len(args)):
            return  # e.g. a registered pytree class among the arguments
        key = _mixed_key(args)
        if key is None:
            return
        run, run_unchecked = compiled.runners()
        if contiguous and run_unchecked is not None:
            run = run_unchecked  # converted numbers are exact, contiguous arrays too
        if convert:
            run = _converting_runner(run, tuple(convert))
        with self._lock:
            if sig.key not in self._cache:
                return  # evicted meanwhile: a fast entry would keep its executable alive
            if any(k in _PY_NUMBERS or len(k) == 3 for k in key):
                self._numbers_keyed = True  # (or some array has no numpy ``strides``: torch)
            native_ok = (contiguous and not convert and info(sig.target).native_entry
                         and run is run_unchecked)
            self._fast[(sig.target, key)] = (run, unflattener(compiled.lowered.out_tree), sig.key, native_ok)
            self._fast_of.setdefault(sig.key, []).append((sig.target, key))
        if native_ok and self._native is None:
            self._make_native(sig.key)

    # --- the native entry ------------------------------------------------------------------
    def _make_native(self, sig_key) -> None:
        """Serve ``sig_key``'s calls through its executable's native entry (``Executable.
        native_call``): exact arrays of the signature run without Python; any other call (other
        signatures, Python numbers, views, tracers, a trace in progress, a changed setting) goes
        to the Python path (``__call__.__wrapped__``) through its fallback."""
        ref = weakref.ref(self)  # the entry must not keep this function alive (no cycle)

        @api_boundary
        def fallback(*args):
            __tracebackhide__ = True
            return JitFunction.__call__.__wrapped__(ref(), args, {})

        with self._lock:
            hit = self._cache.get(sig_key)
            if self._native is not None or hit is None:
                return
            compiled = hit[0]
            epoch = pycall.epoch()
            native = compiled.native_call(fallback)
            if native is None:  # no entry for this executable (e.g. a large output, a BLAS):
                for fk in self._fast_of.get(sig_key, ()):  # its fast hits stop asking for one
                    e = self._fast.get(fk)
                    if e is not None:
                        self._fast[fk] = e[:3] + (False,)
                return
            self._native, self._native_sig, self._native_epoch = native, sig_key, epoch
            self._native_seen = self._native_mark = self._others = 0

    def _python_hit(self, sig_key) -> None:
        """A fast hit of a signature the native entry could serve but does not: make it when
        there is none; switch it to the busier signature when, over the last
        ``_NATIVE_SWITCH`` such hits, it served fewer calls than the Python path did."""
        if self._native is None:
            self._make_native(sig_key)
            return
        self._others += 1
        if self._others >= _NATIVE_SWITCH:
            served = pycall.hits(self._native) - self._native_mark
            if served < self._others:
                self._drop_native()
                self._make_native(sig_key)
            else:
                self._others, self._native_mark = 0, pycall.hits(self._native)

    def _native_recency(self) -> None:
        """Bring the LRU order up to date with the native entry's hits (call holding the lock)."""
        if self._native is not None:
            n = pycall.hits(self._native)
            if n != self._native_seen and self._native_sig in self._cache:
                self._cache.move_to_end(self._native_sig)
            self._native_seen = n

    def _drop_native(self) -> None:
        with self._lock:
            if self._native is not None:
                self._native_hits += pycall.hits(self._native)
                self._native = self._native_sig = None

    def _compile_miss(self, sig: _Signature) -> Compiled:
        with self._lock:
            previous = [s for _, s in self._cache.values()]
            self._misses += 1
        if previous and not self._eager and config.read("log_recompiles"):
            log.warning(self._explain_miss(sig, previous))
        with progress.compiling(f"hlo.jit({self._name})"):  # one log / progress line for both
            compiled = self._lower(sig).compile()  # both stages hold the collector off
        limit = config.read("jit_cache_size")
        with self._lock:
            self._native_recency()
            self._cache[sig.key] = (compiled, _strip(sig))
            while len(self._cache) > limit:  # drop the least recently used, and its fast entries
                old, _ = self._cache.popitem(last=False)
                for fast_key in self._fast_of.pop(old, ()):
                    self._fast.pop(fast_key, None)
                if old == self._native_sig:
                    self._drop_native()
        return compiled

    def _explain_miss(self, sig: _Signature, previous: List[_Signature]) -> str:
        best = min(previous, key=lambda p: len(_differences(p, sig)))
        diffs = _differences(best, sig)
        where = f" (defined at {self._loc})" if self._loc is not None else ""
        call = user_location()
        at = f"; called at {call}" if call is not None else ""
        shown = "; ".join(diffs[:6]) + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")
        return (f"hlo.jit({self._name}){where} is compiling again (cache: {len(previous)} "
                f"entries) because {shown or 'the signature changed'}{at}")

    def cache_info(self) -> CacheInfo:
        with self._lock:
            self._native_recency()
            native = self._native_hits + (pycall.hits(self._native) if self._native is not None else 0)
            return CacheInfo(_count_value(self._hit_counter) + native, self._misses, len(self._cache))

    def clear_cache(self) -> None:
        with self._lock:
            self._native = self._native_sig = None
            self._native_hits = 0
            self._fast.clear()
            self._fast_of.clear()
            self._numbers_keyed = False
            self._cache.clear()
            self._hit_counter = itertools.count()
            self._misses = 0

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self):
        return f"<hlo.jit({self._name})>"


def _mixed_key(args) -> Optional[tuple]:
    """The fast key of arguments that include Python numbers (keyed by their type) or arrays
    without numpy's ``strides`` (torch tensors, jax arrays: keyed by type, shape and dtype; the
    CUDA runtime checks their strides on every call), or None when some argument is neither a
    number nor has array attributes. Each argument's key function is looked up by its type
    (``_KEY_OF``, learnt from the first object of a type): no exception is raised and caught
    per argument and call (which cost ~1 us a torch tensor)."""
    key_of = _KEY_OF
    try:
        return tuple([(key_of.get(type(a)) or _learn_key(a))(a) for a in args])
    except Exception:
        return None


_SHAPE_DTYPE_KEY = operator.attrgetter("__class__", "shape", "dtype")
_KEY_OF = {t: type for t in _PY_NUMBERS}  # type -> the fast key of its objects
_KEY_OF[np.ndarray] = _ARRAY_KEY


def _learn_key(a) -> Callable:
    """The key function of ``type(a)``'s objects: numpy's four attributes where they have
    them, else type, shape and dtype (raises AttributeError for an object with neither)."""
    try:
        _ARRAY_KEY(a)
        f = _ARRAY_KEY
    except AttributeError:
        _SHAPE_DTYPE_KEY(a)
        f = _SHAPE_DTYPE_KEY
    if len(_KEY_OF) < 1024:
        _KEY_OF[type(a)] = f
    return f


def _count_value(counter: "itertools.count") -> int:
    """How many times ``next`` was called on a fresh ``itertools.count()`` (read, not consumed)."""
    return int(repr(counter)[len("count("):-1])


class _NotFast(Exception):
    """Raised by a fast entry for arguments it cannot take after all (the full path then
    handles the call)."""


def _converting_runner(run: Callable, convert: tuple) -> Callable:
    """``run`` after turning the numbers at ``convert``'s positions into arrays of their
    dtypes, as ``concrete_arg`` does; a Python int out of its dtype's range goes back to the
    full path, which raises the error that names it."""
    asarray = np.asarray

    def run_converted(args):
        flat = list(args)
        try:
            for i, dt in convert:
                flat[i] = asarray(flat[i], dt)
        except OverflowError:
            raise _NotFast from None
        return run(tuple(flat))
    return run_converted


def _strip(sig: _Signature) -> _Signature:
    """The signature without references to the call's arrays (kept for recompile messages)."""
    return _Signature(None, sig.in_tree, sig.avals, sig.names, sig.params, sig.static_pos,
                      sig.static_kw, sig.statics, sig.target, sig.donated)


def _differences(old: _Signature, new: _Signature) -> List[str]:
    out = []
    if old.target != new.target:
        out.append(f"the target changed from {old.target} to {new.target}")
    olds, news = dict(old.statics), dict(new.statics)
    for k in sorted(set(olds) | set(news)):
        if k not in olds:
            out.append(f"static argument {k} is now passed ({news[k]!r})")
        elif k not in news:
            out.append(f"static argument {k} is no longer passed")
        elif static_key(olds[k]) != static_key(news[k]):
            out.append(f"static argument {k} changed from {olds[k]!r} to {news[k]!r}")
    if old.in_tree != new.in_tree:
        d = describe_difference(old.in_tree, new.in_tree) or "changed"
        out.append(f"the argument structure changed ({_name_path(d, new)})")
        return out
    for name, a, b in zip(new.names, old.avals, new.avals):
        if a == b:
            continue
        parts = []
        if a.shape != b.shape:
            parts.append("shape")
        if a.dtype != b.dtype:
            parts.append("dtype")
        if a.weak_type != b.weak_type:
            parts.append("weak type (Python scalar vs. array)")
        out.append(f"argument {name} changed {' and '.join(parts)} from {a.str_short()} to {b.str_short()}")
    return out


def _name_path(diff: str, sig: _Signature) -> str:
    return diff.replace("at [0]", "in the positional arguments ").replace("at [1]", "in the keyword arguments ")


def _as_tuple(x, what: str, typ) -> tuple:
    if x is None:
        return ()
    if isinstance(x, typ) and not isinstance(x, bool):
        return (x,)
    try:
        out = tuple(x)
    except TypeError:
        raise TypeError(f"{what} must be a {typ.__name__} or a sequence of them, got {x!r}") from None
    for v in out:
        if not isinstance(v, typ) or isinstance(v, bool):
            raise TypeError(f"{what} must contain only {typ.__name__}s, got {v!r}")
    return out


def jit(fun: Optional[Callable] = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        target: Optional[str] = None, _eager: bool = False, in_shardings=None, out_shardings=None):
    """Compile ``fun`` per abstract signature (see the module docstring). Usable as
    ``@hlo.jit`` or ``@hlo.jit(static_argnames=("n",))``. With ``in_shardings`` (and
    ``out_shardings``): one SPMD program over a mesh of CPU devices (``staging/sharded_jit.py``)."""
    if in_shardings is not None or out_shardings is not None:
        from .sharded_jit import sharded_jit
        if in_shardings is None:
            raise TypeError("hlo.jit: out_shardings needs in_shardings (the mesh and the inputs' layout)")
        if fun is None:
            return lambda f: sharded_jit(f, in_shardings, out_shardings)
        return sharded_jit(fun, in_shardings, out_shardings)
    if fun is None:
        return lambda f: JitFunction(f, static_argnums, static_argnames, donate_argnums, target, _eager=_eager)
    return JitFunction(fun, static_argnums, static_argnames, donate_argnums, target, _eager=_eager)


def make_ir(fun: Callable, *, static_argnums=(), static_argnames=()):
    """``hlo.make_ir(f)(*args)`` returns the traced IR Module (like ``jax.make_jaxpr``); args may
    be arrays or ``hlo.ShapeDtypeStruct``."""
    if isinstance(fun, JitFunction):
        jf = fun
    else:
        jf = JitFunction(fun, static_argnums, static_argnames)

    @api_boundary
    def make(*args, **kwargs):
        return jf.lower(*args, **kwargs).ir
    return make



set_eager_compiler(jit)  # hlo.numpy / hlo.lax / hlo.nn functions called outside a trace

def explain_cache_miss(f: Callable, *args, **kwargs) -> str:
    """Why ``f(*args, **kwargs)`` would (not) be served by the persistent cache: ``f`` is an
    ``hlo.jit`` function (or a plain function, jitted with defaults); arrays or
    ``hlo.ShapeDtypeStruct``s. Returns the explanation (it does not compile)."""
    from .cache import explain
    from .targets import compile_options
    jf = f if isinstance(f, JitFunction) else jit(f)
    lowered = jf.lower(*args, **kwargs)
    target = resolve_target(lowered.target)
    return explain(lowered.ir, target, compile_options(lowered.donated, target=target))
