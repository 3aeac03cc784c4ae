"""The public autodiff API: ``grad``, ``value_and_grad``, ``vjp``, ``jvp`` and ``stop_gradient``.

All of them work inside ``hlo.jit`` (the derivative is traced into the same program) and
outside it (the call is compiled on its own for the default target, cached per signature, like
an ``hlo.numpy`` call outside jit). Arguments and results are pytrees of arrays, as in jax.

``jvp`` is the transpose of ``vjp``: the VJP function is linear in its cotangent, so the VJP
of *that* function, applied to the tangents, is the Jacobian-vector product. It needs no
forward-mode rules of its own, and the simplification passes remove the zeros it starts from.
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes
from ..base.boundary import api_boundary
from ..base.source_info import function_name
from ..errors import ArgumentTypeError, DTypeError, ShapeError, TracerLeakError
from ..tracing.abstract import ShapedArray, is_arraylike
from ..tracing.api_util import static_key
from ..tracing.tracer import Tracer, current_trace, is_tracing, lift
from ..tree_util import (
    PyTreeDef,
    SequenceKey,
    keystr,
    tree_flatten,
    tree_flatten_with_path,
    tree_map,
    tree_unflatten,
    treedef_is_leaf,
)
from . import prims as P
from .backprop import STOP_GRADIENT_OPS, Linearized, linearize

# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------

def _argnums(api: str, argnums) -> Tuple[Tuple[int, ...], bool]:
    """(positions, single): ``single`` when ``argnums`` is one int (the gradient is not a tuple)."""
    if isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool):
        return (int(argnums),), True
    try:
        nums = tuple(argnums)
    except TypeError:
        raise TypeError(f"{api}: argnums must be an int or a tuple of ints, got {argnums!r}") from None
    if not nums or any(not isinstance(i, (int, np.integer)) or isinstance(i, bool) for i in nums):
        raise TypeError(f"{api}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    if len(set(nums)) != len(nums):
        raise ValueError(f"{api}: argnums {argnums!r} repeats a position")
    return tuple(int(i) for i in nums), False


def _resolve_argnums(api: str, nums: Tuple[int, ...], nargs: int) -> Tuple[int, ...]:
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise ArgumentTypeError(
                f"{api}: argnums {i} is out of range: the function was called with {nargs} "
                "positional argument(s) (differentiated arguments must be passed positionally)")
        out.append(i % nargs)
    return tuple(out)


def _primal(api: str, leaf, name: str, allow_int: bool, need_float: bool) -> Tracer:
    """One differentiated leaf as a Tracer of the current trace, its dtype checked."""
    try:
        t = lift(leaf)
    except (ArgumentTypeError, DTypeError):
        raise ArgumentTypeError(f"{api}: argument {name} is a {type(leaf).__name__}, not an array "
                                "or a number, so it cannot be differentiated") from None
    if need_float and not dtypes.is_float(t.dtype) and not dtypes.is_complex(t.dtype) and not allow_int:
        raise DTypeError(
            f"{api} requires real-valued (floating-point) inputs, but argument {name} is "
            f"{t.aval.str_short()}. Differentiate with respect to floating-point arrays only "
            "(move integer arguments out of argnums), or pass allow_int=True to get zero "
            "gradients for them")
    return t


def _zero_cotangent(t: Tracer) -> Tracer:
    return P.zeros(t.shape, t.dtype)


def _with_aval(t: Tracer, aval: ShapedArray) -> Tracer:
    return t if t.aval == aval else Tracer(t._trace, t._value, aval)


def _split_aux(api: str, out, has_aux: bool):
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"a {type(out).__name__} of length {len(out)}" if isinstance(out, (tuple, list)) \
            else f"a {type(out).__name__}"
        raise ArgumentTypeError(f"{api} with has_aux=True: the function must return a pair "
                                f"(output, auxiliary data), but it returned {got}")
    return out[0], out[1]


# --------------------------------------------------------------------------------------------
# Running outside a trace
# --------------------------------------------------------------------------------------------

class _EagerCache:
    """``hlo.jit`` functions that run a derivative outside a trace, one per call structure.

    Differentiated arguments and array leaves are parameters of the compiled function; other
    leaves (Python numbers in non-differentiated positions, strings...) are static."""

    def __init__(self, traced: Callable, name: str):
        self.traced = traced
        self.name = name
        self.lock = threading.Lock()
        self.jits: Dict[Any, Callable] = {}

    def __call__(self, args, kwargs, dynamic_args: Sequence[int]):
        from ..staging.jit import jit
        leaves_paths, tree = tree_flatten_with_path((tuple(args), dict(kwargs)))
        dyn = []
        statics = []
        for i, (path, leaf) in enumerate(leaves_paths):
            in_diff = path[0] == SequenceKey(0) and path[1].idx in dynamic_args
            if in_diff or is_arraylike(leaf):
                dyn.append(i)
                statics.append(None)
            else:
                statics.append(leaf)
        leaves = [leaf for _, leaf in leaves_paths]
        key = (tree, tuple(dyn), tuple(static_key(s) for s in statics))
        try:
            hash(key)
        except TypeError:
            raise ArgumentTypeError(f"{self.name}: a non-array argument is not hashable; pass "
                                    "arrays, numbers and hashable values") from None
        with self.lock:
            fn = self.jits.get(key)
            if fn is None:
                def run(*dyn_leaves, _statics=tuple(statics), _dyn=tuple(dyn), _tree=tree):
                    full = list(_statics)
                    for i, x in zip(_dyn, dyn_leaves):
                        full[i] = x
                    a, k = tree_unflatten(_tree, full)
                    return self.traced(*a, **k)
                run.__name__ = run.__qualname__ = self.name
                fn = self.jits[key] = jit(run, _eager=True)
        return fn(*[leaves[i] for i in dyn])


# --------------------------------------------------------------------------------------------
# grad and value_and_grad
# --------------------------------------------------------------------------------------------

def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, allow_int: bool = False) -> Callable:
    """A function that returns ``(fun(*args), gradient)`` (``((value, aux), gradient)`` with
    ``has_aux``). ``fun`` must return a floating-point scalar; the gradient has the structure
    of ``args[argnums]`` (a tuple of them when ``argnums`` is a tuple)."""
    return _make_value_and_grad(fun, argnums, has_aux, allow_int, "hlo.value_and_grad", True)


def grad(fun: Callable, argnums=0, has_aux: bool = False, allow_int: bool = False) -> Callable:
    """The gradient of scalar-valued ``fun`` with respect to ``args[argnums]`` (see
    ``value_and_grad``); with ``has_aux`` it returns ``(gradient, aux)``."""
    return _make_value_and_grad(fun, argnums, has_aux, allow_int, "hlo.grad", False)


def _make_value_and_grad(fun, argnums, has_aux, allow_int, api_name, with_value):
    if not callable(fun):
        raise TypeError(f"{api_name} expects a callable, got {type(fun).__name__}")
    name = function_name(fun)
    api = f"{api_name}({name})"
    nums, single = _argnums(api_name, argnums)

    def traced(*args, **kwargs):
        pos = _resolve_argnums(api, nums, len(args))
        primals, trees = diff_primals(api, fun, args, pos, allow_int)
        aux_tree: List[PyTreeDef] = []

        def flat(*xs):
            new_args = list(args)
            k = 0
            for i, tree in zip(pos, trees):
                n = tree.num_leaves
                new_args[i] = tree_unflatten(tree, xs[k:k + n])
                k += n
            out, aux = _split_aux(api, fun(*new_args, **kwargs), has_aux)
            _check_scalar_output(api, out)
            aux_leaves, tree = tree_flatten(aux)
            aux_tree.append(tree)
            return [out] + aux_leaves

        lin = linearize(flat, primals, f"{api}")
        outs = lin.outputs()
        value = outs[0]
        cts = lin.backward([P.full((), 1, value.dtype)] + [None] * (len(outs) - 1))
        grads = []
        for p, ct in zip(primals, cts):
            g = ct if ct is not None else _zero_cotangent(p)
            grads.append(_with_aval(g, p.aval))
        per_arg, k = [], 0
        for tree in trees:
            per_arg.append(tree_unflatten(tree, grads[k:k + tree.num_leaves]))
            k += tree.num_leaves
        g = per_arg[0] if single else tuple(per_arg)
        result = value
        if has_aux:
            result = (value, tree_unflatten(aux_tree[0], outs[1:]))
        if with_value:
            return result, g
        return (g, result[1]) if has_aux else g

    return argnums_wrapper(fun, traced, api, api_name, nums)


def diff_primals(api: str, fun, args, pos, allow_int: bool):
    """The differentiated leaves of ``args[pos]`` as checked Tracers, and each argument's tree."""
    primals, trees = [], []
    for i in pos:
        leaves_paths, tree = tree_flatten_with_path(args[i])
        trees.append(tree)
        for path, leaf in leaves_paths:
            primals.append(_primal(api, leaf, _arg_name(fun, i, path), allow_int, True))
    return primals, trees


def argnums_wrapper(fun, traced, api: str, api_name: str, nums) -> Callable:
    """The public function of a transformation with ``argnums``: ``traced`` inside a trace,
    compiled per signature outside one."""
    eager = _EagerCache(traced, f"{api_name.split('.')[-1]}_{function_name(fun)}")

    @api_boundary
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True
        if is_tracing():
            return traced(*args, **kwargs)
        return eager(args, kwargs, _resolve_argnums(api, nums, len(args)))

    wrapper.__wrapped__ = fun  # type: ignore[attr-defined]  # (a function's attribute)
    return wrapper


def _arg_name(fun, i: int, path) -> str:
    try:
        params = [p for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        base = params[i].name if i < len(params) else f"args[{i}]"
    except (TypeError, ValueError):
        base = f"args[{i}]"
    return base + keystr(path)


def _check_scalar_output(api: str, out) -> None:
    leaves, tree = tree_flatten(out)
    if len(leaves) != 1 or not treedef_is_leaf(tree):
        raise ArgumentTypeError(
            f"{api}: the function must return a single scalar array, but it returned {tree} "
            f"with {len(leaves)} array(s). Use hlo.vjp for functions with several or non-scalar "
            "outputs (or has_aux=True to return extra data)")
    x = leaves[0]
    t = x if isinstance(x, Tracer) else lift(x)
    if t.shape != ():
        raise ShapeError(
            f"{api}: the function must return a scalar, but it returned an array of shape "
            f"{t.shape} ({t.aval.str_short()}). Reduce it to a scalar (e.g. .sum()), or use "
            "hlo.vjp for a non-scalar output")
    if not dtypes.is_float(t.dtype):
        raise DTypeError(
            f"{api} requires a real-valued (floating-point) output, but the function returned "
            f"{t.aval.str_short()}")


# --------------------------------------------------------------------------------------------
# vjp
# --------------------------------------------------------------------------------------------

@api_boundary
def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), vjp_fn)`` (and ``aux`` last with ``has_aux``): ``vjp_fn(cotangent)``
    takes a cotangent with the structure, shapes and dtypes of the output and returns a tuple
    with one cotangent per primal. Integer and boolean primals get zero cotangents of their own
    dtype."""
    __tracebackhide__ = True
    if not callable(fun):
        raise TypeError(f"hlo.vjp expects a callable, got {type(fun).__name__}")
    api = f"hlo.vjp({function_name(fun)})"
    if is_tracing():
        return _vjp_traced(fun, api, primals, has_aux)
    return _vjp_eager(fun, api, primals, has_aux)



def _vjp_traced(fun, api, primals, has_aux):
    leaves_paths, in_tree = tree_flatten_with_path(tuple(primals))
    tracers = [_primal(api, leaf, f"primals{keystr(path)}", True, False)
               for path, leaf in leaves_paths]
    trees: Dict[str, PyTreeDef] = {}

    def flat(*xs):
        out, aux = _split_aux(api, fun(*tree_unflatten(in_tree, xs)), has_aux)
        out_leaves, trees["out"] = tree_flatten(out)
        aux_leaves, trees["aux"] = tree_flatten(aux)
        return out_leaves + aux_leaves

    lin = linearize(flat, tracers, api)
    outs = lin.outputs()
    n_out = trees["out"].num_leaves
    out = tree_unflatten(trees["out"], outs[:n_out])
    fn = _VJPFunction(api, lin, tracers, in_tree, trees["out"], outs[:n_out], len(outs) - n_out)
    if has_aux:
        return out, fn, tree_unflatten(trees["aux"], outs[n_out:])
    return out, fn


class _VJPFunction:
    """The ``vjp_fn`` of a traced ``vjp``: emits the backward pass each time it is called."""

    def __init__(self, api, lin: Linearized, primals, in_tree, out_tree, outs, n_aux):
        self.api = api
        self.lin = lin
        self.primals = primals
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.outs = outs
        self.n_aux = n_aux

    @api_boundary
    def __call__(self, cotangent):
        __tracebackhide__ = True
        tr = current_trace()
        if tr is None or not self.lin.trace.active or not self.lin.trace.encloses(tr):
            raise TracerLeakError(
                f"the vjp function of {self.api} was called outside the hlo.jit trace that made "
                "it; call it inside the same traced function")
        ct_leaves, tree = tree_flatten(cotangent)
        if tree != self.out_tree:
            raise ArgumentTypeError(f"{self.api}: the cotangent must have the output's structure "
                                    f"{self.out_tree}, got {tree}")
        cts = []
        for i, (c, o) in enumerate(zip(ct_leaves, self.outs)):
            cts.append(_cotangent(self.api, c, o, f"cotangent leaf {i}"))
        in_cts = self.lin.backward(cts + [None] * self.n_aux)
        res = [ct if ct is not None else _zero_cotangent(p) for p, ct in zip(self.primals, in_cts)]
        return tree_unflatten(self.in_tree, res)


def _cotangent(api: str, c, like: Tracer, what: str) -> Optional[Tracer]:
    """A user's cotangent (or tangent) leaf, checked against the value it belongs to; None for a
    non-float value (which has no cotangent)."""
    if dtypes.is_python_scalar(c):
        t = lift(np.asarray(c, dtype=like.dtype))
    else:
        try:
            t = lift(c)
        except (ArgumentTypeError, DTypeError):
            raise ArgumentTypeError(f"{api}: {what} is a {type(c).__name__}, not an array") from None
    if t.shape != like.shape or t.dtype != like.dtype:
        raise ShapeError(f"{api}: {what} must be {like.aval.strip_weak().str_short()} like the value "
                         f"it belongs to, got {t.aval.str_short()}")
    if not (dtypes.is_float(t.dtype) or dtypes.is_complex(t.dtype)):
        return None
    return t


def _vjp_eager(fun, api, primals, has_aux):
    from ..staging.jit import jit
    name = function_name(fun)

    def forward(*ps):
        out, aux = _split_aux(api, fun(*ps), has_aux)
        return (out, aux)

    forward.__name__ = forward.__qualname__ = f"vjp_forward_{name}"
    out, aux = jit(forward, _eager=True)(*primals)

    def backward(ps, ct):
        _, fn = _vjp_traced(lambda *a: _split_aux(api, fun(*a), has_aux)[0], api, ps, False)
        return fn(ct)

    backward.__name__ = backward.__qualname__ = f"vjp_backward_{name}"
    back = jit(backward, _eager=True)
    saved = tuple(primals)

    @api_boundary
    def vjp_fn(cotangent):
        __tracebackhide__ = True
        if is_tracing():
            return backward(saved, cotangent)
        return back(saved, cotangent)

    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn


# --------------------------------------------------------------------------------------------
# jvp
# --------------------------------------------------------------------------------------------

@api_boundary
def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """``(fun(*primals), tangent_out)`` (and ``aux`` last with ``has_aux``): the output and its
    directional derivative along ``tangents`` (one per primal, same structures and dtypes)."""
    __tracebackhide__ = True
    if not callable(fun):
        raise TypeError(f"hlo.jvp expects a callable, got {type(fun).__name__}")
    api = f"hlo.jvp({function_name(fun)})"
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentTypeError(f"{api}: primals and tangents must be tuples or lists (one entry "
                                "per positional argument)")
    if len(primals) != len(tangents):
        raise ArgumentTypeError(f"{api}: {len(primals)} primals but {len(tangents)} tangents")
    if is_tracing():
        return _jvp_traced(fun, api, tuple(primals), tuple(tangents), has_aux)
    from ..staging.jit import jit

    def run(ps, ts):
        return _jvp_traced(fun, api, tuple(ps), tuple(ts), has_aux)

    run.__name__ = run.__qualname__ = f"jvp_{function_name(fun)}"
    return jit(run, _eager=True)(tuple(primals), tuple(tangents))



def _jvp_traced(fun, api, primals, tangents, has_aux):
    p_leaves, p_tree = tree_flatten(primals)
    t_leaves, t_tree = tree_flatten(tangents)
    if p_tree != t_tree:
        raise ArgumentTypeError(f"{api}: tangents must have the structure of primals ({p_tree}), "
                                f"got {t_tree}")
    res = _vjp_traced(fun, api, primals, has_aux)
    out, fn = res[0], res[1]
    out_leaves, out_tree = tree_flatten(out)
    p_tracers = fn.primals
    tans = [_cotangent(api, t, p, f"tangent leaf {i}") for i, (t, p) in enumerate(zip(t_leaves, p_tracers))]
    # vjp_fn is linear in the cotangent; its own vjp maps tangents to output tangents.
    u0 = [P.zeros(o.shape, o.dtype) for o in fn.outs]
    _, fn2 = _vjp_traced(lambda *u: fn(tree_unflatten(out_tree, list(u))), api, tuple(u0), False)
    ct_in = [t if t is not None else P.zeros(p.shape, p.dtype) for t, p in zip(tans, p_tracers)]
    t_out = fn2(tree_unflatten(p_tree, ct_in))
    t_out = [t if dtypes.is_float(o.dtype) or dtypes.is_complex(o.dtype) else P.zeros(o.shape, o.dtype)
             for t, o in zip(t_out, fn.outs)]
    result = (out, tree_unflatten(out_tree, t_out))
    if has_aux:
        return result + (res[2],)
    return result


# --------------------------------------------------------------------------------------------
# stop_gradient
# --------------------------------------------------------------------------------------------

@api_boundary
def stop_gradient(x):
    """``x`` (a pytree of arrays) unchanged, but no gradient flows back through it."""
    if not is_tracing():
        return tree_map(lambda v: v, x)

    def stop(v):
        t = lift(v)
        if not (dtypes.is_float(t.dtype) or dtypes.is_complex(t.dtype)):
            return t
        # A copy (a same-type convert, which simplification removes) marked as a gradient stop.
        r = P.emit1("convert", [t], result_types=[t.aval.ir_type()])
        STOP_GRADIENT_OPS.add(r._value.op)
        return _with_aval(r, t.aval)
    return tree_map(stop, x)
