"""Structured control flow for hlo.lax: ``cond``, ``switch``, ``while_loop``, ``fori_loop``,
``scan`` and ``map``, with jax.lax's signatures and semantics.

Each traces the user's functions into IR regions (``hlo.tracing.tracer.trace_region``) and emits one
control-flow op of the IR:

- ``cond(pred, true_fun, false_fun, *operands)`` -> ``if`` (regions ``true_branch`` and
  ``false_branch``, no arguments). The operands are lifted into the enclosing trace and the
  branches read them from there, as the IR allows. A numeric ``pred`` means ``pred != 0``.
- ``switch(index, branches, *operands)`` -> ``case`` (regions ``branch0..N-1``). The index is
  converted to int32 and clamped to ``[0, N-1]`` as jax does (the IR's ``case`` itself would
  send every out-of-range index to the last branch). One branch is simply called.
- ``while_loop(cond_fun, body_fun, init_val)`` -> ``while`` (regions ``cond`` and ``body``
  taking the flattened carry). The carry is any pytree of arrays; its structure, shapes and
  dtypes must not change. As in jax, a weakly typed initial leaf (a Python scalar) whose dtype
  the body changes is promoted to the body's dtype and the loop is traced again.
- ``fori_loop(lower, upper, body_fun, init_val)`` -> a ``while`` whose carry is ``(i, *val)``
  and whose condition reads ``upper`` from the enclosing scope. Index dtype rules are jax's:
  Python ints (and concrete bounds) give a weakly typed int32 index.
- ``scan(f, init, xs=None, length=None, reverse=False)`` -> a ``while`` over
  ``(i, *carry, *ys)``: each step reads ``xs[i]`` with ``dynamic_slice`` (xs come from the
  enclosing scope) and writes the step's ``y`` into zero-initialized stacked outputs with
  ``dynamic_update_slice``. With ``reverse=True`` step ``i`` uses position ``length-1-i``.
  A zero-length scan traces ``f`` (to type-check it and learn ``y``'s type) and returns
  ``init`` and empty stacked outputs without a loop.
- ``map(f, xs)`` is ``scan`` without a carry.

jax's ``unroll`` (of ``scan``/``fori_loop``) and ``batch_size`` (of ``map``) are performance
hints that these functions do not take (Python's TypeError names the unexpected argument);
loops always lower to one ``while``.

Errors name the op, the two types that disagree (with the pytree path of the leaf) and the
user's line that called the control-flow function; they also say where the offending
function is defined.

Called outside ``hlo.jit`` (on concrete arrays), every function here is compiled on its own
through ``api_function`` (array arguments become parameters, functions and Python values are
static) and runs on the default target: the same semantics and checks as under ``hlo.jit``.
"""
from __future__ import annotations

import functools
import inspect
import numbers
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes
from ..base.source_info import function_location, function_name
from ..errors import ArgumentTypeError, DTypeError, HloError, ShapeError
from ..tracing.abstract import ShapedArray
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer, current_trace, emit, is_tracing, lift, trace_region
from ..tree_util import (
    PyTreeDef,
    describe_difference,
    keystr,
    tree_flatten_with_path,
    tree_unflatten,
    treedef_tuple,
)
from .common import aval_of, convert, full, reshape
from .elementwise import add, clamp, lt, ne, sub
from .structural import dynamic_slice, dynamic_update_slice

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# --------------------------------------------------------------------------------------------
# Helpers: describing functions and leaves, lifting operands, comparing types
# --------------------------------------------------------------------------------------------

def _fun_desc(fn: Callable) -> str:
    """``step, defined at model.py:12``: a user's function, as messages name it (in
    parentheses after its role: ``body_fun (step, defined at model.py:12)``)."""
    name = getattr(fn, "__name__", None) or function_name(fn)
    loc = function_location(fn)
    return f"{name}, defined at {loc.short()}" if loc is not None else name


def _check_callable(what: str, name: str, fn) -> None:
    if not callable(fn):
        raise ArgumentTypeError(f"{what}: {name} must be callable, got {type(fn).__name__}: {fn!r:.60}")


def _leaf_paths(tree: PyTreeDef) -> List[str]:
    """``keystr`` of every leaf of ``tree`` (``[0]``, ``['w']``...), in leaf order."""
    try:
        rebuilt = tree_unflatten(tree, range(tree.num_leaves))
        return [keystr(p) for p, _ in tree_flatten_with_path(rebuilt)[0]]
    except Exception:  # a registered node whose unflatten rejects placeholders
        return [f"<leaf {i}>" for i in range(tree.num_leaves)]


def _lift_tree(what: str, tree_value, label: str) -> Tuple[List[Tracer], PyTreeDef]:
    """The leaves of a pytree of arrays as Tracers of the current trace (Python scalars become
    weakly typed constants), and its structure. A leaf that is not an array names its path."""
    leaves, tree = tree_flatten_with_path(tree_value)
    out = []
    for path, leaf in leaves:
        try:
            out.append(lift(leaf))
        except HloError as e:
            raise type(e)(f"{what}: {label}{keystr(path)}: {e.message}") from None
    return out, tree


def _differs(a: ShapedArray, b: ShapedArray) -> bool:
    return a.shape != b.shape or a.dtype != b.dtype


def _mismatch_error(message: str, a: ShapedArray, b: ShapedArray) -> HloError:
    """A ShapeError when the shapes differ, else a DTypeError."""
    if a.shape != b.shape:
        what = "shapes" if a.dtype == b.dtype else "shapes and dtypes"
        return ShapeError(f"{message} (the {what} differ)")
    return DTypeError(f"{message} (the dtypes differ)")


def _join_weak(avals: Sequence[ShapedArray]) -> bool:
    """A result is weakly typed only when every branch's is (jax's lattice join)."""
    return all(a.weak_type for a in avals)


# --------------------------------------------------------------------------------------------
# cond and switch
# --------------------------------------------------------------------------------------------

def _trace_branches(what: str, names: Sequence[str], funs: Sequence[Callable],
                    region_names: Sequence[str], operands: tuple):
    """Trace each branch on the lifted operands; check they agree; return (regions, out_tree,
    out_weak_flags)."""
    ops, op_tree = _lift_tree(what, operands, "operands")
    traced = []
    for name, fn, rname in zip(names, funs, region_names):
        traced.append(trace_region(
            lambda fn=fn: fn(*tree_unflatten(op_tree, ops)), [], name=rname,
            description=f"{name} of {what} ({_fun_desc(fn)})"))
    first = traced[0]
    for name, fn, t in zip(names[1:], funs[1:], traced[1:]):
        if t.out_tree != first.out_tree:
            diff = describe_difference(first.out_tree, t.out_tree)
            raise ArgumentTypeError(
                f"{what}: the branches must return the same structure, but {names[0]} "
                f"({_fun_desc(funs[0])}) returns {first.out_tree} and {name} ({_fun_desc(fn)}) "
                f"returns {t.out_tree} ({diff})")
        paths = _leaf_paths(first.out_tree)
        for p, a, b in zip(paths, first.out_avals, t.out_avals):
            if _differs(a, b):
                at = f"output{p}" if p else "output"
                raise _mismatch_error(
                    f"{what}: the branches must return the same types, but the {at} of "
                    f"{names[0]} ({_fun_desc(funs[0])}) is {a.strip_weak()} and that of {name} "
                    f"({_fun_desc(fn)}) is {b.strip_weak()}", a, b)
    weak = [_join_weak(col) for col in zip(*(t.out_avals for t in traced))]
    return [t.region for t in traced], first.out_tree, weak


def _predicate(pred) -> Tracer:
    """``pred`` as a bool scalar Tracer: numbers mean ``pred != 0`` (as in jax)."""
    if pred is None:
        raise ArgumentTypeError("hlo.lax.cond: pred is None; it must be a boolean scalar")
    a = aval_of(pred, "hlo.lax.cond: pred")
    if a.shape != ():
        raise ShapeError(f"hlo.lax.cond: pred must be a scalar, got {a.str_short()}; to choose "
                         "elementwise, use hlo.lax.select or hlo.numpy.where")
    p = lift(pred)
    if dtypes.is_bool(p.dtype):
        return p
    return ne(p, 0)


@api_function
def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one ``if`` op.

    Both branches are traced; they must return the same pytree structure, shapes and dtypes.
    ``pred`` is a scalar bool (or a number, meaning ``pred != 0``). See the module docstring."""
    what = "hlo.lax.cond"
    _check_callable(what, "true_fun", true_fun)
    _check_callable(what, "false_fun", false_fun)
    p = _predicate(pred)
    regions, out_tree, weak = _trace_branches(
        what, ("true_fun", "false_fun"), (true_fun, false_fun), ("true_branch", "false_branch"),
        operands)
    outs = emit("if", [p], regions=regions, weak_type=weak)
    return tree_unflatten(out_tree, outs)


@api_function
def switch(index, branches: Sequence[Callable], *operands):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``, as one ``case`` op.

    ``index`` is an integer scalar; all branches are traced and must agree on their output
    types. See the module docstring."""
    what = "hlo.lax.switch"
    try:
        branches = tuple(branches)
    except TypeError:
        raise ArgumentTypeError(f"{what}: branches must be a sequence of callables, got "
                                f"{type(branches).__name__}") from None
    if not branches:
        raise ValueError(f"{what}: branches is empty; give at least one function")
    for i, b in enumerate(branches):
        _check_callable(what, f"branches[{i}]", b)
    a = aval_of(index, f"{what}: index")
    if a.shape != ():
        raise ShapeError(f"{what}: index must be a scalar, got {a.str_short()}")
    if not dtypes.is_int(a.dtype):
        raise DTypeError(f"{what}: index must be an integer, got {a.str_short()}")
    if len(branches) == 1:
        return branches[0](*operands)
    idx = convert(lift(index), dtypes.int32)
    idx = clamp(np.int32(0), idx, np.int32(len(branches) - 1))
    names = [f"branches[{i}]" for i in range(len(branches))]
    regions, out_tree, weak = _trace_branches(
        what, names, branches, [f"branch{i}" for i in range(len(branches))], operands)
    outs = emit("case", [idx], regions=regions, weak_type=weak)
    return tree_unflatten(out_tree, outs)


# --------------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------------

def _param_name(fn: Callable, k: int, default: str) -> str:
    """The name of ``fn``'s ``k``-th parameter (how jax names carry components), or
    ``default``."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return default
    return params[k] if len(params) > k else default


class _Carry:
    """A loop's user-visible carry: its leaves (Tracers of the enclosing trace), structure and
    readable leaf names (``val[1]``, ``state['h']``: the body's parameter name plus the path)."""

    def __init__(self, what: str, init, label: str, fn: Callable, param_index: int):
        self.leaves, self.tree = _lift_tree(what, init, label)
        self.name = _param_name(fn, param_index, label)
        self.paths = _leaf_paths(self.tree)

    @property
    def avals(self) -> List[ShapedArray]:
        return [t.aval for t in self.leaves]

    def promote_weak(self, out_avals: Sequence[ShapedArray]) -> bool:
        """jax's rule: a weakly typed initial leaf (a Python scalar) whose dtype the body
        changes (same shape) starts as the promoted dtype instead. True if any leaf changed,
        in which case the body must be traced again."""
        changed = False
        for i, (t, o) in enumerate(zip(self.leaves, out_avals)):
            if t.weak_type and t.shape == o.shape and t.dtype != o.dtype:
                dt, _ = dtypes.result_type_of([(t.dtype, True), (o.dtype, o.weak_type)])
                if dt != t.dtype:
                    self.leaves[i] = convert(t, dt)
                    changed = True
        return changed

    def check_tree(self, what: str, role: str, fn: Callable, out_tree: PyTreeDef) -> None:
        if out_tree != self.tree:
            diff = describe_difference(self.tree, out_tree)
            raise ArgumentTypeError(
                f"{what}: {role} ({_fun_desc(fn)}) must return a carry with the structure of "
                f"its input carry {self.tree}, but returns {out_tree} ({diff})")

    def check_types(self, what: str, role: str, fn: Callable,
                    out_avals: Sequence[ShapedArray]) -> None:
        for i, (a, b) in enumerate(zip(self.avals, out_avals)):
            if _differs(a, b):
                raise _mismatch_error(
                    f"{what}: the loop carry must keep its type, but {self.name}{self.paths[i]} "
                    f"is {a.strip_weak()} on input and {b.strip_weak()} on output of {role} "
                    f"({_fun_desc(fn)})", a, b)

    def out_weak(self, out_avals: Sequence[ShapedArray]) -> List[bool]:
        return [a.weak_type and b.weak_type for a, b in zip(self.avals, out_avals)]


def _trace_body(what: str, role: str, fn: Callable, carry: _Carry,
                make_body: Callable[[dict], Callable], internal: Sequence[ShapedArray] = (),
                extra: Sequence[ShapedArray] = ()):
    """Trace a loop body over ``internal + carry + extra`` avals, checking the carry it returns.

    ``make_body(rec)`` returns the flat body function; it stores the structure of the user's
    output carry in ``rec["tree"]`` and returns the internal outputs, then the carry leaves,
    then anything else. A weak-type promotion of the carry (see ``_Carry.promote_weak``)
    traces again. Returns ``(traced_region, rec, carry_out_avals)``."""
    k, n = len(internal), len(carry.leaves)
    for attempt in range(2):
        rec: dict = {}
        traced = trace_region(make_body(rec), list(internal) + carry.avals + list(extra),
                              name="body", description=f"{role} of {what} ({_fun_desc(fn)})")
        out = traced.out_avals[k:k + n]
        carry.check_tree(what, role, fn, rec["tree"])
        if attempt == 0 and carry.promote_weak(out):
            continue
        break
    carry.check_types(what, role, fn, out)
    return traced, rec, out


def _check_predicate_output(what: str, fn: Callable, traced) -> None:
    avals = traced.out_avals
    if len(avals) != 1 or traced.out_tree.children:
        raise ArgumentTypeError(f"{what}: cond_fun ({_fun_desc(fn)}) must return a boolean "
                                f"scalar, but returns {traced.out_tree}")
    a = avals[0]
    if a.shape != () or not dtypes.is_bool(a.dtype):
        err = ShapeError if a.shape != () else DTypeError
        raise err(f"{what}: cond_fun ({_fun_desc(fn)}) must return a boolean scalar (pred[]), "
                  f"but returns {a.strip_weak()}")


@api_function
def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val); return val`` as one
    ``while`` op. ``val`` is any pytree of arrays; the body must keep its structure, shapes
    and dtypes. See the module docstring."""
    what = "hlo.lax.while_loop"
    _check_callable(what, "cond_fun", cond_fun)
    _check_callable(what, "body_fun", body_fun)
    carry = _Carry(what, init_val, "init_val", body_fun, 0)

    def make_body(rec):
        def body(*leaves):
            out = body_fun(tree_unflatten(carry.tree, leaves))
            flat, rec["tree"] = _lift_tree(what, out, "the value body_fun returns")
            return tuple(flat)
        return body

    traced, _, out = _trace_body(what, "body_fun", body_fun, carry, make_body)
    cnd = trace_region(cond_fun, carry.avals, name="cond", in_tree=treedef_tuple([carry.tree]),
                       description=f"cond_fun of {what} ({_fun_desc(cond_fun)})")
    _check_predicate_output(what, cond_fun, cnd)
    outs = emit("while", carry.leaves, regions=[cnd.region, traced.region],
                weak_type=carry.out_weak(out))
    return tree_unflatten(carry.tree, outs)


def _is_concrete_int(x) -> bool:
    if isinstance(x, Tracer) or isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, numbers.Integral):
        return True
    return isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu"


def _index_dtype(what: str, lower, upper) -> Tuple[np.dtype, bool]:
    """jax's rule for a traced fori_loop index: the bounds' common dtype, where a weak
    (Python) int may adopt the other bound's signed integer dtype."""
    la, ua = aval_of(lower, f"{what}: lower"), aval_of(upper, f"{what}: upper")
    for a, n in ((la, "lower"), (ua, "upper")):
        if a.shape != ():
            raise ShapeError(f"{what}: {n} must be a scalar, got {a.str_short()}")
        if not dtypes.is_int(a.dtype):
            raise DTypeError(f"{what}: {n} must be an integer, got {a.str_short()}")
    if la.dtype == ua.dtype:
        return la.dtype, la.weak_type and ua.weak_type
    if dtypes.is_signed(la.dtype) and dtypes.is_signed(ua.dtype) and la.weak_type != ua.weak_type:
        return (ua.dtype if la.weak_type else la.dtype), False
    raise DTypeError(f"{what}: lower and upper must have the same dtype, got "
                     f"{la.str_short()} and {ua.str_short()}")


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val); return val``
    as one ``while`` op (static bounds too). Concrete bounds (Python or numpy integers) give a
    weakly typed int32 index, as jax's do; traced bounds give their own dtype."""
    if not is_tracing() and _is_concrete_int(lower) and _is_concrete_int(upper):
        # concrete bounds stay static in the eager compile too (not parameters of it)
        lower, upper = int(lower), int(upper)
    return _fori_loop(lower, upper, body_fun, init_val)


@api_function
def _fori_loop(lower, upper, body_fun: Callable, init_val):
    what = "hlo.lax.fori_loop"
    _check_callable(what, "body_fun", body_fun)
    if _is_concrete_int(lower) and _is_concrete_int(upper):
        i0, bound = lift(int(lower)), lift(int(upper))
    else:
        dt, weak = _index_dtype(what, lower, upper)
        i0 = convert(lift(lower), dt, weak_type=weak)
        bound = convert(lift(upper), dt, weak_type=weak)
    carry = _Carry(what, init_val, "init_val", body_fun, 1)

    def make_body(rec):
        def body(i, *leaves):
            out = body_fun(i, tree_unflatten(carry.tree, leaves))
            flat, rec["tree"] = _lift_tree(what, out, "the value body_fun returns")
            return (add(i, 1), *flat)
        return body

    traced, _, out = _trace_body(what, "body_fun", body_fun, carry, make_body, internal=[i0.aval])
    cnd = trace_region(lambda i, *rest: lt(i, bound), [i0.aval] + carry.avals, name="cond",
                       description=f"the bound check of {what}")
    outs = emit("while", [i0] + carry.leaves, regions=[cnd.region, traced.region],
                weak_type=[i0.weak_type] + carry.out_weak(out))
    return tree_unflatten(carry.tree, outs[1:])


# --------------------------------------------------------------------------------------------
# scan and map
# --------------------------------------------------------------------------------------------

def _scan_length(what: str, xs: List[Tracer], paths: List[str], length) -> int:
    sizes = []
    for t, p in zip(xs, paths):
        if t.ndim == 0:
            raise ShapeError(f"{what}: xs{p} is a scalar ({t.aval.strip_weak()}); every array in "
                             "xs needs a leading axis to scan over")
        sizes.append(t.shape[0])
    if length is not None:
        if isinstance(length, Tracer) or not isinstance(length, numbers.Integral) \
                or isinstance(length, (bool, np.bool_)):
            raise ArgumentTypeError(f"{what}: length must be a static Python int, got {length!r:.60}")
        length = int(length)
        if length < 0:
            raise ValueError(f"{what}: length must be non-negative, got {length}")
    if len(set(sizes)) > 1:
        listed = ", ".join(f"xs{p}: {n}" for p, n in zip(paths, sizes))
        raise ShapeError(f"{what}: the arrays in xs must have the same leading axis size, got {listed}")
    if sizes and length is not None and sizes[0] != length:
        raise ShapeError(f"{what}: length={length} does not match the leading axis size "
                         f"{sizes[0]} of xs")
    if not sizes and length is None:
        raise ValueError(f"{what}: xs has no arrays to scan over, so length must be given")
    return sizes[0] if sizes else length


def _split_pair(what: str, fn: Callable, out):
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ArgumentTypeError(f"{what}: f ({_fun_desc(fn)}) must return a pair (carry, y), "
                                f"got {type(out).__name__}"
                                + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""))
    return out


def _scan_step(what: str, f: Callable, carry: _Carry, leaves, xs_tree: PyTreeDef, x_leaves, rec):
    """One application of ``f``: returns (new carry leaves, y Tracers); records the carry's
    structure and y's structure and avals in ``rec``."""
    out = f(tree_unflatten(carry.tree, leaves), tree_unflatten(xs_tree, x_leaves))
    new_carry, y = _split_pair(what, f, out)
    flat, rec["tree"] = _lift_tree(what, new_carry, "the carry f returns")
    ys, rec["y_tree"] = _lift_tree(what, y, "the y f returns")
    rec["y_avals"] = [t.aval for t in ys]
    return flat, ys


def _stacked(n: int, a: ShapedArray) -> ShapedArray:
    return ShapedArray((n,) + a.shape, a.dtype, a.weak_type)


def _new_region_arg(aval: ShapedArray) -> Tracer:
    """Append an argument to the region being traced now (scan's stacked outputs, whose types
    are only known once ``f`` has been traced) and return its Tracer."""
    trace = current_trace()
    return Tracer(trace, trace.region.add_arg(aval.ir_type()), aval)


@api_function
def scan(f: Callable, init, xs=None, length: Optional[int] = None, reverse: bool = False):
    """``carry = init; for x in xs: carry, y = f(carry, x); ys.append(y)``; returns
    ``(carry, stacked ys)``, as one ``while`` op. ``xs`` is a pytree of arrays sharing their
    leading axis (or None with ``length``). See the module docstring."""
    return _scan("hlo.lax.scan", f, init, xs, length, reverse)


def _scan(what: str, f: Callable, init, xs, length, reverse: bool):
    _check_callable(what, "f", f)
    if not isinstance(reverse, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what}: reverse must be a bool, got {reverse!r:.60}")
    xs_leaves, xs_tree = _lift_tree(what, xs, "xs")
    n = _scan_length(what, xs_leaves, _leaf_paths(xs_tree), length)
    carry = _Carry(what, init, "init", f, 0)
    x_avals = [ShapedArray(t.shape[1:], t.dtype, t.weak_type) for t in xs_leaves]
    nc = len(carry.leaves)
    if n == 0:
        return _empty_scan(what, f, carry, xs_tree, x_avals)
    i_aval = ShapedArray((), dtypes.int32)

    def make_body(rec):
        def body(i, *leaves):
            pos = sub(np.int32(n - 1), i) if reverse else i
            xs_i = [reshape(dynamic_slice(x, [pos] + [0] * (x.ndim - 1), (1,) + x.shape[1:],
                                          allow_negative_indices=False), x.shape[1:])
                    for x in xs_leaves]
            flat, ys = _scan_step(what, f, carry, leaves, xs_tree, xs_i, rec)
            new_bufs = []
            for y in ys:
                buf = _new_region_arg(_stacked(n, y.aval))
                new_bufs.append(dynamic_update_slice(buf, reshape(y, (1,) + y.shape),
                                                     [pos] + [0] * y.ndim,
                                                     allow_negative_indices=False))
            return (add(i, 1), *flat, *new_bufs)
        return body

    traced, rec, out = _trace_body(what, "f", f, carry, make_body, internal=[i_aval])
    y_avals = rec["y_avals"]
    all_avals = [i_aval] + carry.avals + [_stacked(n, a) for a in y_avals]
    cnd = trace_region(lambda i, *rest: lt(i, np.int32(n)), all_avals, name="cond",
                       description=f"the trip count check of {what}")
    bufs = [full((n,) + a.shape, 0, a.dtype) for a in y_avals]
    outs = emit("while", [lift(np.int32(0))] + carry.leaves + bufs,
                regions=[cnd.region, traced.region],
                weak_type=[False] + carry.out_weak(out) + [a.weak_type for a in y_avals])
    return (tree_unflatten(carry.tree, outs[1:1 + nc]),
            tree_unflatten(rec["y_tree"], outs[1 + nc:]))


def _empty_scan(what: str, f: Callable, carry: _Carry, xs_tree: PyTreeDef,
                x_avals: List[ShapedArray]):
    """A zero-length scan: ``f`` is traced (to check it and learn y's type) into a region that
    is then dropped; the result is ``init`` and empty stacked outputs."""
    nc = len(carry.leaves)

    def make_body(rec):
        def body(*leaves):
            flat, ys = _scan_step(what, f, carry, leaves[:nc], xs_tree, leaves[nc:], rec)
            return (*flat, *ys)
        return body

    _, rec, _ = _trace_body(what, "f", f, carry, make_body, extra=x_avals)
    ys = [full((0,) + a.shape, 0, a.dtype, weak_type=a.weak_type) for a in rec["y_avals"]]
    return tree_unflatten(carry.tree, carry.leaves), tree_unflatten(rec["y_tree"], ys)


@api_function
def map(f: Callable, xs):
    """``stack([f(x) for x in xs])`` over the leading axis of a pytree of arrays, as one
    ``while`` op (``scan`` without a carry)."""
    what = "hlo.lax.map"
    _check_callable(what, "f", f)

    @functools.wraps(f)  # messages name f and its line
    def step(carry, x):
        return carry, f(x)
    _, ys = _scan(what, step, None, xs, None, False)
    return ys
