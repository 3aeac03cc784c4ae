"""``custom_vjp`` and ``custom_jvp``: functions with user-given derivative rules (jax's API,
semantics and error messages).

A call inside a trace emits the primal function as a marked one-branch ``case`` (see
``marks``); the mark keeps the rules. The backward pass of ``custom_vjp`` runs ``fwd`` on the
primal arguments and ``bwd`` on its residuals and the output cotangent; that of ``custom_jvp``
transposes the rule's tangent output (linear in the tangents) by reverse mode. Under ``vmap``
the rules are themselves vmapped (``hlo.batching.rules_custom``). ``nondiff_argnums`` arguments are static
Python values passed first to the rules, as in jax.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, List, Sequence, Tuple

import numpy as np

from .. import dtypes
from ..base.boundary import api_boundary
from ..base.source_info import function_name
from ..errors import ArgumentTypeError
from ..tracing.tracer import Tracer, emit, is_tracing, lift, trace_region
from ..tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten
from . import prims as P
from .marks import MARKS, Mark


class CustomRuleError(ArgumentTypeError):
    """A custom rule returned the wrong structure, shape or dtype."""


def _resolve_args(fun: Callable, args, kwargs) -> Tuple:
    if not kwargs:
        return tuple(args)
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentTypeError(f"{function_name(fun)}: {e}") from None
    ba.apply_defaults()
    return tuple(ba.args) + tuple(ba.kwargs.values())


class _Custom:
    """What custom_vjp and custom_jvp share: the call, which traces the primal function into a
    marked one-branch ``case``."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(int(i) for i in nondiff_argnums)
        self._eager = {}

    def _split(self, args):
        nondiff = tuple(args[i] for i in self.nondiff_argnums)
        diff = tuple(a for i, a in enumerate(args) if i not in self.nondiff_argnums)
        return nondiff, diff

    def _merge(self, nondiff, diff):
        return _interleave(self.nondiff_argnums, nondiff, diff)

    @api_boundary
    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        self._check_defined()
        args = _resolve_args(self.fun, args, kwargs)
        if not is_tracing():
            from ..staging.jit import jit
            nondiff, diff = self._split(args)
            key = tuple(repr(a) for a in nondiff)
            fn = self._eager.get(key)
            if fn is None:
                def run(*d, _nd=nondiff):
                    return self(*self._merge(_nd, d))
                run.__name__ = run.__qualname__ = function_name(self.fun)
                fn = self._eager[key] = jit(run, _eager=True)
            return fn(*diff)
        nondiff, diff = self._split(args)
        leaves, in_tree = tree_flatten(diff)
        leaves = [lift(x) for x in leaves]
        diff = tree_unflatten(in_tree, leaves)
        tr = trace_region(lambda: self.fun(*self._merge(nondiff, diff)), [], name="branch0",
                          description=f"the custom function {function_name(self.fun)}")
        outs = emit("case", [np.int32(0)], regions=[tr.region])
        MARKS[outs[0]._value.owner] = self._mark([t._value for t in leaves], nondiff, in_tree,
                                                 tr.out_tree)
        outs = [Tracer(t._trace, t._value, a) for t, a in zip(outs, tr.out_avals)]
        return tree_unflatten(tr.out_tree, outs)


# --------------------------------------------------------------------------------------------
# custom_vjp
# --------------------------------------------------------------------------------------------

class custom_vjp(_Custom):
    """``f = custom_vjp(f); f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` and
    ``bwd(*nondiff_args, residuals, out_cotangent) -> tuple of input cotangents``."""

    fwd = bwd = None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False):
        if symbolic_zeros:
            raise NotImplementedError("hlo.custom_vjp: symbolic_zeros=True is not supported yet")
        self.fwd, self.bwd = fwd, bwd
        return self

    def _check_defined(self):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {function_name(self.fun)} "
                                 "using defvjp.")

    def _mark(self, args, nondiff, in_tree, out_tree):
        return CustomVJPMark(args, self.fun, self.fwd, self.bwd, nondiff, self.nondiff_argnums,
                             in_tree, out_tree)


def _check_cotangents(what: str, got, primals: List[Tracer], in_tree) -> List:
    """The cotangent leaves a rule returned, checked against the primal inputs (None = zero)."""
    if not isinstance(got, (tuple, list)):
        raise CustomRuleError(
            f"{what} must produce a tuple of length equal to the number of (non-static) primal "
            f"inputs to the custom_vjp-decorated function, but got {type(got).__name__}")
    got = tuple(got)
    n_args = len(tree_unflatten(in_tree, primals))
    if len(got) != n_args:
        raise CustomRuleError(
            f"{what} must produce an output with the same container (pytree) structure as the "
            f"args tuple of the primal function, and in particular must produce a tuple of length "
            f"equal to the number of arguments to the primal function, but got bwd output of "
            f"length {len(got)} for {n_args} primal argument(s)")
    args = tree_unflatten(in_tree, primals)
    out = []
    for i, (g, a) in enumerate(zip(got, args)):
        a_leaves, a_tree = tree_flatten(a)
        if g is None:
            out += [None] * len(a_leaves)
            continue
        g_paths, g_tree = tree_flatten_with_path(g)
        if g_tree != a_tree:
            raise CustomRuleError(
                f"{what} must produce an output with the same container (pytree) structure as the "
                f"args tuple of the primal function, but at output[{i}] the bwd rule produced "
                f"structure {g_tree} corresponding to an input of structure {a_tree}")
        for (path, c), p in zip(g_paths, a_leaves):
            if c is None:
                out.append(None)
                continue
            c = lift(np.asarray(c, p.dtype)) if dtypes.is_python_scalar(c) else lift(c)
            if c.shape != p.shape or (dtypes.is_float(p.dtype) and c.dtype != p.dtype):
                raise CustomRuleError(
                    f"{what} must produce an output with the same shape/dtypes as the args tuple "
                    f"of the primal function, but at output[{i}]{keystr(path)} the bwd rule "
                    f"produced an output of shape/dtype {c.aval.strip_weak().str_short()} "
                    f"corresponding to an input of shape/dtype {p.aval.strip_weak().str_short()}")
            out.append(c if dtypes.is_float(p.dtype) else None)
    return out


def _output_cotangents(e, out_tree):
    cts = [ct if ct is not None else P.zeros(o.shape, o.dtype) for ct, o in zip(e.cts, e.outs)]
    return tree_unflatten(out_tree, cts[:out_tree.num_leaves])


def _set_free_cts(e, values, cts):
    for v, ct in zip(values, cts):
        if ct is not None and v in e.active:
            e.free_cts[v] = P.add_any(e.free_cts.get(v), ct)


class CustomVJPMark(Mark):
    def __init__(self, args, fun, fwd, bwd, nondiff, nondiff_pos, in_tree, out_tree):
        super().__init__(args)
        self.fun, self.fwd, self.bwd = fun, fwd, bwd
        self.nondiff, self.nondiff_pos = tuple(nondiff), tuple(nondiff_pos)
        self.in_tree, self.out_tree = in_tree, out_tree
        self.name = function_name(fun)

    def vjp(self, e):
        primals = [e.primal_of(v) for v in self.args]
        diff = tree_unflatten(self.in_tree, primals)
        res = self.fwd(*_interleave(self.nondiff_pos, self.nondiff, diff))
        fwd_name = function_name(self.fwd)
        if not isinstance(res, (tuple, list)) or len(res) != 2:
            raise CustomRuleError(
                f"Custom VJP fwd rule {fwd_name} for function {self.name} must produce a pair "
                "(list or tuple of length two) representing primal outputs and residuals (values "
                "stored from the forward pass for use on the backward pass), got "
                f"{type(res).__name__}")
        out_tree = tree_flatten(res[0])[1]
        if out_tree != self.out_tree:
            raise CustomRuleError(
                f"Custom VJP fwd rule {fwd_name} for function {self.name} must produce a pair (list "
                "or tuple of length two) where the first element represents the primal output "
                f"(equal in value to the output of the custom_vjp-decorated function {self.name}, "
                "and in particular of the same container/pytree structure), but instead the fwd "
                f"rule output's first element had container/pytree structure: {out_tree} while "
                f"the custom_vjp-decorated function {self.name} had output container/pytree "
                f"structure: {self.out_tree}.")
        got = self.bwd(*self.nondiff, res[1], _output_cotangents(e, self.out_tree))
        cts = _check_cotangents(f"Custom VJP bwd rule {function_name(self.bwd)} of {self.name}",
                                got, primals, self.in_tree)
        _set_free_cts(e, self.args, cts)
        return [None]


def _interleave(positions, nondiff, diff):
    if not positions:
        return tuple(diff)
    out, nd, d = [], iter(nondiff), iter(diff)
    for i in range(len(nondiff) + len(diff)):
        out.append(next(nd) if i in positions else next(d))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# custom_jvp
# --------------------------------------------------------------------------------------------

class custom_jvp(_Custom):
    """``f = custom_jvp(f); f.defjvp(rule)`` with ``rule(*nondiff_args, primals, tangents) ->
    (primal_out, tangent_out)`` (tangent_out linear in the tangents), or ``f.defjvps(*fns)``
    with one ``fn(tangent, primal_out, *primals)`` per argument."""

    jvp = None

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False):
        if symbolic_zeros:
            raise NotImplementedError("hlo.custom_jvp: symbolic_zeros=True is not supported yet")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable):
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def rule(primals, tangents):
            out = self(*primals)
            parts = [fn(t, out, *primals) for fn, t in zip(jvps, tangents) if fn is not None]
            tan = parts[0]
            for p in parts[1:]:
                tan = tree_map(lambda a, b: a + b, tan, p)
            return out, tan

        rule.__name__ = f"defjvps_{function_name(self.fun)}"
        self.defjvp(rule)

    def _check_defined(self):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {function_name(self.fun)} "
                                 "using defjvp.")

    def _mark(self, args, nondiff, in_tree, out_tree):
        return CustomJVPMark(args, self.fun, self.jvp, nondiff, in_tree, out_tree)


class CustomJVPMark(Mark):
    def __init__(self, args, fun, rule, nondiff, in_tree, out_tree):
        super().__init__(args)
        self.fun, self.rule, self.nondiff = fun, rule, tuple(nondiff)
        self.in_tree, self.out_tree = in_tree, out_tree
        self.name = function_name(fun)

    def _tangent_out(self, primals, tangents):
        rule_name = function_name(self.rule)
        res = self.rule(*self.nondiff, primals, tangents)
        if not isinstance(res, (tuple, list)) or len(res) != 2:
            raise CustomRuleError(
                f"Custom JVP rule {rule_name} for function {self.name} must produce a pair (list or "
                "tuple of length two) representing primal and tangent outputs, but got "
                f"{type(res).__name__}.")
        p_tree, t_tree = tree_flatten(res[0])[1], tree_flatten(res[1])[1]
        if p_tree != t_tree:
            raise CustomRuleError(
                f"Custom JVP rule {rule_name} for function {self.name} must produce primal and "
                f"tangent outputs with equal container (pytree) structures, but got {p_tree} and "
                f"{t_tree} respectively.")
        if p_tree != self.out_tree:
            raise CustomRuleError(
                f"Custom JVP rule {rule_name} for function {self.name} must produce a primal output "
                f"with the structure of the function's output {self.out_tree}, but got {p_tree}.")
        for p, t in zip(tree_flatten(res[0])[0], tree_flatten(res[1])[0]):
            p, t = lift(p), lift(t)
            if p.shape != t.shape:
                raise CustomRuleError(
                    f"Custom JVP rule {rule_name} for function {self.name} must produce primal and "
                    f"tangent outputs with equal shapes, but got {p.aval.str_short()} and "
                    f"{t.aval.str_short()}.")
        return tree_map(lambda t, p: P.convert(lift(t), lift(p).dtype), res[1], res[0])

    def vjp(self, e):
        from .api import _vjp_traced
        primals = [e.primal_of(v) for v in self.args]
        p = tuple(tree_unflatten(self.in_tree, primals))
        zeros = tuple(tree_unflatten(self.in_tree, [P.zeros_like(x) for x in primals]))
        _, pull = _vjp_traced(lambda *t: self._tangent_out(p, t), f"custom_jvp({self.name})",
                              zeros, False)
        cts = tree_flatten(pull(_output_cotangents(e, self.out_tree)))[0]
        _set_free_cts(e, self.args, [c if dtypes.is_float(c.dtype) else None for c in cts])
        return [None]
