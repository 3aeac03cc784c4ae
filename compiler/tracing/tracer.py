"""The tracer: records Python array code as hlo IR.

How it works. A ``Trace`` records ops into one IR ``Region`` (a function body, or the body of a
reduce, a sort comparator, a loop...). Traces nest: the innermost active one is *current*, and
every op emitted goes there. A ``Tracer`` stands for one IR ``Value`` of one trace; it knows its
abstract value (shape, dtype, weak type) and has numpy-style operators and methods (installed by
``hlo.numpy``). Each op carries the user's file:line (the first stack frame outside hlo).

The internal API that library code (hlo.numpy, hlo.lax, hlo.nn, control flow, random) builds on:

``emit(name, operands, attrs=None, *, result_types=None, regions=(), weak_type=False)``
    Append one op named as in the op table (``hlo.ir.ops``) to the current trace and return its
    results as a list of Tracers. ``operands`` are Tracers (or constants, which are lifted).
    ``result_types`` (IR ``TensorType`` list) is needed only for ops whose type the table does
    not infer (convert, reshape, broadcast_in_dim, iota) or to pick a dot/conv result dtype.
    ``regions`` are ``Region`` objects from ``trace_region``. ``emit1`` returns the one result.

``trace_region(fn, in_avals, *, name="body", in_tree=None, description=...) -> TracedRegion``
    Trace a Python callable into a new ``Region`` whose arguments have the abstract values
    ``in_avals`` (a list of ``ShapedArray``). ``fn`` is called with one Tracer per aval (or, with
    ``in_tree``, the treedef of the whole ``*args`` tuple, with the pytree rebuilt from them); it
    may return any pytree of arrays. The result holds the region (ready to attach to an op),
    ``out_tree``, ``out_avals``, and ``captured``: Tracers of enclosing traces that the region
    reads directly (the IR lets regions read enclosing values; a loop lowering that wants
    isolated regions can pass them in explicitly instead).

``lift(x, dtype=None)``
    A Tracer for ``x`` in the current trace: Tracers pass through (checked for leaks), numpy
    arrays and Python/numpy scalars become ``constant`` ops (deduplicated per trace).

``current_trace()``, ``is_tracing()``, ``source_info.ir_location()`` (the user's line as an IR
``Location``), ``source_info.user_location()`` (as a ``SourceLocation`` for messages).

Errors: Python control flow on a Tracer raises ``TracerBoolConversionError`` (and friends)
naming the value, the argument it depends on and the user's line; a Tracer used after its trace
ended raises ``TracerLeakError``.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from hlo.ir import Builder, Function, Module, Region, TensorType, Value, VerifyError, nesting
from hlo.runtime.cpu import pycall

from .. import dtypes
from ..base import source_info
from ..errors import (
    ArgumentTypeError,
    ConcretizationError,
    DTypeError,
    ShapeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    TracerLeakError,
)
from ..tree_util import PyTreeDef, keystr, tree_flatten_with_path, tree_unflatten
from .abstract import (
    ShapedArray,
    ShapeDtypeStruct,
    aval_of_type,
    from_foreign_struct,
    gpu_array_type,
    to_numpy,
)


class Trace:
    """One region being recorded (a function body or a nested region).

    ``arg_names`` name the region's arguments in messages (``x``, ``params['w']``);
    ``arg_params`` give, for a top-level function, the Python parameter each argument belongs to
    (for "mark it static" hints)."""

    def __init__(self, region: Region, parent: Optional["Trace"], description: str,
                 arg_names: Optional[Sequence[str]] = None, arg_params: Optional[Sequence[str]] = None):
        self.region = region
        self.parent = parent
        self.builder = Builder(region)
        self.active = True
        self.description = description
        self.arg_names = list(arg_names) if arg_names is not None else None
        self.arg_params = list(arg_params) if arg_params is not None else None
        self.captured: List["Tracer"] = []
        self._captured_values: set = set()
        self._consts: Dict[Any, Tuple[Any, "Tracer"]] = {}

    def arg_label(self, i: int) -> str:
        if self.arg_names is not None and i < len(self.arg_names):
            return f"argument {self.arg_names[i]}"
        return f"argument #{i} of {self.description}"

    def encloses(self, other: "Trace") -> bool:
        """True if ``self`` is ``other`` or one of its ancestors."""
        t = other
        while t is not None:
            if t is self:
                return True
            t = t.parent
        return False

    def __repr__(self):
        return f"<Trace of {self.description}{'' if self.active else ' (finished)'}>"


_state = threading.local()


def _stack() -> List[Trace]:
    s = getattr(_state, "stack", None)
    if s is None:
        s = _state.stack = []
    return s


def current_trace() -> Optional[Trace]:
    s = _stack()
    return s[-1] if s else None


def is_tracing() -> bool:
    return bool(_stack())


class _Pushed:
    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        _stack().append(self.trace)
        pycall.trace_started()  # native jit entries fall back to Python (which inlines) meanwhile
        return self.trace

    def __exit__(self, *exc):
        s = _stack()
        assert s and s[-1] is self.trace, "trace stack corrupted"
        s.pop()
        pycall.trace_ended()
        self.trace.active = False
        return False


# --------------------------------------------------------------------------------------------
# Tracers
# --------------------------------------------------------------------------------------------

class Tracer:
    """A traced array: one IR value of one trace, with its abstract value.

    Operators, array methods (``sum``, ``reshape``, ``astype``, ...), indexing and ``.at[]`` are
    installed by ``hlo.numpy.array_methods``. Conversions to Python values (``bool``, ``int``,
    ``float``, ``numpy.asarray``) raise errors that say which value and how to restructure.
    """

    __slots__ = ("_trace", "_value", "aval", "__weakref__")
    __array_priority__ = 1000
    __hash__ = None  # like numpy arrays: == is elementwise
    astype: Callable[..., "Tracer"]   # (installed by hlo.numpy.array_methods, as the others)

    def __init__(self, trace: Trace, value: Value, aval: ShapedArray):
        self._trace = trace
        self._value = value
        self.aval = aval

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>"

    __str__ = __repr__

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return iter([self[i] for i in range(self.shape[0])])

    # --- conversions that need a concrete value -------------------------------------------
    def __bool__(self):
        raise TracerBoolConversionError(concretization_message(
            self, "Python `if`, `while`, `and`, `or`, `not` or bool()",
            "Use hlo.numpy.where(cond, a, b) (or hlo.lax.cond) for a choice that depends on values "
            "computed by the function"))

    def __int__(self):
        raise TracerIntegerConversionError(concretization_message(
            self, "int()", "Shapes, axes, loop bounds and Python indices must be known when the "
            "function is traced"))

    def __index__(self):
        raise TracerIntegerConversionError(concretization_message(
            self, "using it as a Python integer (range(), a list index, a shape)",
            "Shapes, axes, loop bounds and Python indices must be known when the function is traced; "
            "to index an array with a traced integer, index an hlo array (x[i] works)"))

    def __float__(self):
        raise ConcretizationError(concretization_message(
            self, "float()", "Keep it an array inside the function (return it, and convert the "
            "result outside)"))

    def __complex__(self):
        raise ConcretizationError(concretization_message(
            self, "complex()", "hlo has no complex numbers; keep it a real array"))

    def item(self, *args):
        raise ConcretizationError(concretization_message(
            self, ".item()", "Return the array from the function and call .item() on the result"))

    def tolist(self):
        raise ConcretizationError(concretization_message(
            self, ".tolist()", "Return the array from the function and call .tolist() on the result"))

    def __array__(self, dtype=None, copy=None):
        raise TracerArrayConversionError(concretization_message(
            self, "numpy.asarray() (or a numpy function)",
            "numpy cannot compute with values that exist only in the compiled program; use the "
            "hlo.numpy function of the same name"))

    def __reduce__(self):
        raise ConcretizationError(concretization_message(self, "pickling", "return the value from the function instead"))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


# --------------------------------------------------------------------------------------------
# Describing tracers in messages
# --------------------------------------------------------------------------------------------

def _arg_owner(v: Value, hint: Optional[Trace] = None) -> Optional[Trace]:
    t = hint
    while t is not None:
        if v.owner is t.region:
            return t
        t = t.parent
    for tr in _stack():
        if v.owner is tr.region:
            return tr
    return None


def _arg_sources(t: "Tracer", limit: int = 20000) -> List[Tuple[Trace, int]]:
    """The traced arguments (trace, index) a value depends on, in argument order."""
    seen, todo, args = set(), [t._value], set()
    while todo and len(seen) < limit:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        if x.is_arg:
            owner = _arg_owner(x, t._trace)
            if owner is not None:
                args.add((id(owner), x.index, owner))
            continue
        todo.extend(x.owner.operands)
        for r in x.owner.regions:
            for op in r.walk():
                todo.extend(op.operands)
    return [(tr, i) for _, i, tr in sorted(args, key=lambda a: (a[0], a[1]))]


def describe_tracer(t: "Tracer") -> str:
    """"the traced f32[] computed by 'compare' at model.py:5, which depends on argument x"."""
    v = t._value
    if v.is_arg:
        owner = _arg_owner(v, t._trace)
        label = owner.arg_label(v.index) if owner is not None else "argument"
        return f"the traced {t.aval.str_short()} {label}"
    op = v.owner
    where = f" at {op.loc}" if op.loc is not None else ""
    deps = [tr.arg_label(i) for tr, i in _arg_sources(t)]
    src = f", which depends on {_join(deps)}" if deps else ""
    return f"the traced {t.aval.str_short()} computed by '{op.name}'{where}{src}"


def _join(labels: List[str], limit: int = 4) -> str:
    """"argument x", "arguments x and n", "arguments a, b, c and 2 more"."""
    if all(l.startswith("argument ") for l in labels) and len(labels) > 1:
        names = [l[len("argument "):] for l in labels]
        shown = names[:limit]
        more = f" and {len(names) - limit} more" if len(names) > limit else ""
        if more:
            return "arguments " + ", ".join(shown) + more
        return "arguments " + ", ".join(shown[:-1]) + " and " + shown[-1]
    return ", ".join(labels[:limit]) + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def concretization_message(t: "Tracer", what: str, advice: str) -> str:
    desc = describe_tracer(t)
    params = []  # scalar parameters the value depends on: candidates for static_argnames
    for tr, i in _arg_sources(t):
        if (tr.arg_params is not None and i < len(tr.arg_params) and tr.region.args[i].type.rank == 0
                and tr.arg_params[i] not in params):
            params.append(tr.arg_params[i])
    if params:
        names = ", ".join(repr(n) for n in params)
        tup = f"({names},)" if len(params) == 1 else f"({names})"
        static_hint = (f"; or, if {names} {'is' if len(params) == 1 else 'are'} known at compile "
                       f"time, mark {'it' if len(params) == 1 else 'them'} static: "
                       f"hlo.jit(f, static_argnames={tup})")
    else:
        static_hint = ("; Python values known at compile time can be passed as static arguments "
                       "(hlo.jit(f, static_argnums=...) or static_argnames=...)")
    trace = t._trace
    during = f" while tracing {trace.description}" if trace.active else ""
    return (f"{what} needs a concrete value, but got {desc}{during}. Its value is not known until "
            f"the compiled function runs. {advice}{static_hint}.")


# --------------------------------------------------------------------------------------------
# Emitting ops
# --------------------------------------------------------------------------------------------

def _check_tracer(t: Tracer, trace: Trace) -> Value:
    """The IR value of ``t`` for use in ``trace``: same trace or an enclosing active one."""
    owner = t._trace
    if owner is trace:
        return t._value
    if not owner.active:
        raise TracerLeakError(
            f"a traced value ({t.aval.str_short()}{_made_at(t)}) from {owner.description} is used "
            "after that trace finished. Values computed inside hlo.jit exist only while the "
            "function is traced; return them from the function instead of keeping them in a "
            "global, an attribute or a closure")
    if owner.encloses(trace):
        if t._value not in trace._captured_values:
            trace._captured_values.add(t._value)
            trace.captured.append(t)
        return t._value
    raise TracerLeakError(
        f"a traced value ({t.aval.str_short()}{_made_at(t)}) from {owner.description} is used "
        f"inside {trace.description}, which cannot see it; pass it in as an argument instead")


def leaked_tracer_error(t: "Tracer") -> TracerLeakError:
    """The error for a Tracer met outside of any trace (kept from a finished one)."""
    return TracerLeakError(
        f"a traced value ({t.aval.str_short()}{_made_at(t)}) from {t._trace.description} is used "
        "after that trace finished, outside of any hlo.jit. Values computed inside hlo.jit exist "
        "only while the function is traced; return them from the function instead of keeping "
        "them in a global, an attribute or a closure")


def _made_at(t: Tracer) -> str:
    v = t._value
    if v.is_arg:
        return ", an argument"
    return f", made at {v.owner.loc}" if v.owner.loc is not None else ""


def _need_trace() -> Trace:
    tr = current_trace()
    if tr is None:
        raise RuntimeError("hlo internal error: an op was emitted outside of any trace")
    return tr


def emit(name: str, operands: Sequence[Any] = (), attrs: Optional[Dict[str, Any]] = None, *,
         result_types: Optional[Sequence[TensorType]] = None, regions: Sequence[Region] = (),
         weak_type=False) -> List[Tracer]:
    """Append op ``name`` to the current trace; return its results as Tracers.

    ``weak_type`` is one flag for all results or a list with one per result."""
    trace = _need_trace()
    vals = [(_check_tracer(o, trace) if isinstance(o, Tracer) else lift(o)._value) for o in operands]
    loc = source_info.ir_location()
    try:
        op = trace.builder.op(name, vals, attrs, result_types=result_types, regions=regions, loc=loc)
    except VerifyError as e:
        msg = str(e)
        cls = DTypeError if ("element type" in msg or "dtype" in msg) else ShapeError
        raise cls(msg.split(f" at {loc}: ", 1)[-1] if loc is not None else msg,
                  location=source_info.user_location()) from None
    weaks = weak_type if isinstance(weak_type, (list, tuple)) else [weak_type] * len(op.results)
    return [Tracer(trace, v, aval_of_type(v.type, bool(w) and not v.type.dtype.is_pred))
            for v, w in zip(op.results, weaks)]


def build_with(fn, operands: Sequence[Any], **kw) -> Tracer:
    """``fn(builder, *values, **kw)`` (an IR-level construction such as ``hlo.ir.decompositions``)
    appending to the current trace at the user's line, on the operands' IR values; its one
    result Value comes back as a (strongly typed) Tracer."""
    trace = _need_trace()
    vals = [(_check_tracer(o, trace) if isinstance(o, Tracer) else lift(o)._value) for o in operands]
    b = Builder(trace.region, loc=source_info.ir_location())
    v = fn(b, *vals, **kw)
    return Tracer(trace, v, aval_of_type(v.type, False))


def emit1(name: str, operands: Sequence[Any] = (), attrs=None, **kw) -> Tracer:
    """``emit`` for a single-result op."""
    (r,) = emit(name, operands, attrs, **kw)
    return r


def constant(value, dtype=None, weak_type: bool = False) -> Tracer:
    """A ``constant`` op in the current trace holding ``value`` (converted to ``dtype``)."""
    _need_trace()
    arr = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    dt = dtypes.canonicalize(arr.dtype, "constant dtype")
    if arr.dtype != dt:
        arr = arr.astype(dt)
    (t,) = emit("constant", [], {"value": arr}, weak_type=weak_type)
    return t


def lift(x, dtype=None) -> Tracer:
    """``x`` as a Tracer of the current trace.

    Tracers pass through (leak-checked; ``dtype`` must then match or be None). Python scalars
    become weakly typed constants (of ``dtype`` when given, after an overflow check); numpy
    arrays and scalars and other array-likes become constants of their own dtype (or
    ``dtype``). Constants are shared within a trace."""
    trace = _need_trace()
    if isinstance(x, Tracer):
        _check_tracer(x, trace)
        if dtype is not None and x.dtype != np.dtype(dtype):
            raise DTypeError(f"expected {dtypes.dtype_name(np.dtype(dtype))}, got {x.aval.str_short()}")
        return x
    if dtypes.is_python_scalar(x):
        dt, weak = dtypes.scalar_type(x)
        if dtype is not None:
            dt = np.dtype(dtype)
        dtypes.check_scalar_fits(x, dt)
        key = (type(x), repr(x), dt)
        hit = trace._consts.get(key)
        if hit is not None:
            return hit[1]
        t = constant(np.asarray(x, dtype=dt), weak_type=weak)
        trace._consts[key] = (x, t)
        return t
    from .abstract import is_arraylike, to_numpy
    if isinstance(x, (np.ndarray, np.generic)) or is_arraylike(x):
        key = (id(x), None if dtype is None else np.dtype(dtype))
        hit = trace._consts.get(key)
        if hit is not None and hit[0] is x:
            return hit[1]
        arr = to_numpy(x, "constant")
        try:
            dtypes.canonicalize(arr.dtype)
        except DTypeError:
            raise DTypeError(f"cannot use an array of dtype {arr.dtype} (hlo does not support it)") from None
        t = constant(arr, dtype=dtype)
        trace._consts[key] = (x, t)
        return t
    raise ArgumentTypeError(f"expected an array or a number, got {type(x).__name__}: {x!r:.80}")


def abstractify(x, what: str = "argument", allow_struct: bool = False) -> ShapedArray:
    """The abstract value of one argument leaf. Raises ArgumentTypeError naming ``what`` for
    anything that is not an array or a number."""
    if isinstance(x, Tracer):
        if not is_tracing():
            raise leaked_tracer_error(x)
        return x.aval
    if isinstance(x, np.ndarray):
        return ShapedArray(x.shape, _dtype_of(x.dtype, what), False)
    if dtypes.is_python_scalar(x) or isinstance(x, np.generic):
        if isinstance(x, np.generic):
            return ShapedArray((), _dtype_of(x.dtype, what), False)
        dt, weak = dtypes.scalar_type(x)
        dtypes.check_scalar_fits(x, dt, what)
        return ShapedArray((), dt, weak)
    if not isinstance(x, ShapeDtypeStruct):
        x = from_foreign_struct(x) or x  # jax.ShapeDtypeStruct stands in as hlo's does
    if isinstance(x, ShapeDtypeStruct):
        if not allow_struct:
            raise ArgumentTypeError(
                f"{what} is a ShapeDtypeStruct, which stands in for an array only in f.lower(...); "
                "call the function with a real array")
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    if isinstance(x, complex):
        raise ArgumentTypeError(f"{what} is a complex number; hlo has no complex dtypes")
    gpu = gpu_array_type(x)
    if gpu is not None:  # a GPU array: described without a copy
        return ShapedArray(gpu[0], _dtype_of(gpu[1], what), False)
    if hasattr(x, "__dlpack__") or hasattr(x, "__array__"):
        a = to_numpy(x, what)
        return ShapedArray(a.shape, _dtype_of(a.dtype, what), False)
    raise ArgumentTypeError(
        f"{what} has type {type(x).__name__}, which is not an array, a number or a container of "
        "them; pass it as a static argument (static_argnums / static_argnames) if it is a "
        "compile-time constant, or register its class as a pytree node "
        "(hlo.tree_util.register_pytree_node)")


def _dtype_of(dt, what) -> np.dtype:
    try:
        return dtypes.canonicalize(dt)
    except DTypeError:
        raise ArgumentTypeError(f"{what} has dtype {dt}, which hlo does not support (supported: "
                                + ", ".join(dtypes.dtype_name(d) for d in dtypes.SUPPORTED) + ")") from None


# --------------------------------------------------------------------------------------------
# Tracing callables
# --------------------------------------------------------------------------------------------

class TracedRegion:
    """What ``trace_region`` returns: the region and its output structure."""

    def __init__(self, region: Region, out_tree: PyTreeDef, out_avals: List[ShapedArray],
                 captured: List[Tracer]):
        self.region = region
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.captured = captured

    def __iter__(self):  # region, out_tree = trace_region(...)
        return iter((self.region, self.out_tree))


# Nested control flow traces one region inside another: the user's function, then hlo's
# tracing of the op that holds the region, a dozen Python frames per level. From _DEEP_TRACE
# levels on, every _DEEP_TRACE-th nested trace makes sure the recursion limit leaves
# _TRACE_HEADROOM frames above the stack in use (raised for the duration of that trace, then
# restored), so a 300- or 3,000-deep nest of cond traces (jax's depth is ~300 at the default
# limit), up to _TRACE_MAX_FRAMES, past which Python's RecursionError stands. Measuring the
# stack walks it (O(depth)): every _DEEP_TRACE-th level keeps that linear in practice.
_DEEP_TRACE = 8
_TRACE_HEADROOM = 2000
_TRACE_MAX_FRAMES = 60_000


def _trace_into(region: Region, fn: Callable, in_avals: Sequence[ShapedArray], in_tree, description,
                arg_names, output_what: str, arg_params=None):
    depth = len(_stack())
    if depth < _DEEP_TRACE or depth % _DEEP_TRACE:
        return _trace_into_now(region, fn, in_avals, in_tree, description, arg_names, output_what,
                               arg_params)
    nesting.raise_limit(min(_TRACE_MAX_FRAMES, nesting.frames_in_use() + _TRACE_HEADROOM))
    try:
        return _trace_into_now(region, fn, in_avals, in_tree, description, arg_names, output_what,
                               arg_params)
    finally:
        nesting.restore_limit()


def _trace_into_now(region: Region, fn: Callable, in_avals: Sequence[ShapedArray], in_tree,
                    description, arg_names, output_what: str, arg_params=None):
    parent = current_trace()
    trace = Trace(region, parent, description, arg_names, arg_params)
    with _Pushed(trace):
        tracers = [Tracer(trace, v, a) for v, a in zip(region.args, in_avals)]
        args = tree_unflatten(in_tree, tracers) if in_tree is not None else tracers
        out = fn(*args)
        leaves_with_path, out_tree = tree_flatten_with_path(out)
        outs = []
        for path, leaf in leaves_with_path:
            outs.append(_lift_output(leaf, path, output_what))
        region.outputs = [t._value for t in outs]
        region.output_loc = source_info.ir_location()
    return trace, out_tree, [t.aval for t in outs]


def _lift_output(leaf, path, what) -> Tracer:
    if isinstance(leaf, Tracer) or dtypes.is_python_scalar(leaf) or isinstance(leaf, (np.ndarray, np.generic)):
        return lift(leaf)
    from .abstract import is_arraylike
    if is_arraylike(leaf):
        return lift(leaf)
    where = f" at {what}{keystr(path)}" if path else f" as {what}"
    raise ArgumentTypeError(f"the function returned a {type(leaf).__name__}{where}; only arrays, "
                            "numbers and containers of them (tuples, lists, dicts, None, registered "
                            "pytree nodes) can be returned")


def trace_region(fn: Callable, in_avals: Sequence[ShapedArray], *, name: str = "body",
                 in_tree: Optional[PyTreeDef] = None, description: Optional[str] = None,
                 arg_names: Optional[Sequence[str]] = None) -> TracedRegion:
    """Trace ``fn`` into a new region with arguments of abstract values ``in_avals``.

    See the module docstring. The current trace (if any) is the new trace's parent, so ``fn`` may
    read Tracers of enclosing traces (they are listed in ``captured``)."""
    region = Region([a.ir_type() for a in in_avals], name=name)
    desc = description or f"the region '{name}' of {getattr(fn, '__name__', 'a function')}"
    trace, out_tree, out_avals = _trace_into(region, fn, in_avals, in_tree, desc, arg_names,
                                             "output")
    return TracedRegion(region, out_tree, out_avals, list(trace.captured))


class TracedFunction:
    """A traced top-level function: a one-function module plus its output structure."""

    def __init__(self, module: Module, out_tree: PyTreeDef, out_avals: List[ShapedArray]):
        self.module = module
        self.out_tree = out_tree
        self.out_avals = out_avals


def trace_function(fn: Callable, in_avals: Sequence[ShapedArray], in_tree: Optional[PyTreeDef],
                   *, description: str, arg_names: Sequence[str],
                   arg_params: Optional[Sequence[str]] = None, module_name: str = "main",
                   fn_loc=None) -> TracedFunction:
    """Trace ``fn`` into ``module @module_name { func @main(...) }``; the traced function must
    not read Tracers of any enclosing trace (jit inside jit is inlined before it gets here)."""
    module = Module(_sanitize(module_name))
    func = Function("main", [a.ir_type() for a in in_avals], loc=fn_loc)
    module.add(func)
    saved = _stack()[:]
    _state.stack = []  # a fresh top-level trace sees no enclosing trace
    try:
        trace, out_tree, out_avals = _trace_into(func.body, fn, in_avals, in_tree, description,
                                                 arg_names, "output", arg_params)
    finally:
        _state.stack = saved
    return TracedFunction(module, out_tree, out_avals)


def _sanitize(name: str) -> str:
    out = "".join(c if (c.isalnum() or c in "_.$-") else "_" for c in name)
    return out if out and (out[0].isalpha() or out[0] == "_") else "m_" + out
