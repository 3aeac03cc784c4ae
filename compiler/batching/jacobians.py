"""``jacfwd``, ``jacrev`` and ``hessian``, defined as jax defines them: ``jacrev`` maps the VJP
over the standard basis of the output (``vmap`` of the pullback), ``jacfwd`` maps the JVP over
the standard basis of the inputs, ``hessian = jacfwd(jacrev(f))``. The Jacobian of an output
leaf of shape ``S`` with respect to an input leaf of shape ``T`` has shape ``S + T``; outputs
are the outer structure, inputs (a tuple of them for a tuple ``argnums``) the inner one."""
from __future__ import annotations

from typing import Callable, List

import numpy as np

from .. import dtypes
from ..autodiff import prims as P
from ..autodiff.api import _argnums, _resolve_argnums, argnums_wrapper, diff_primals, jvp, vjp
from ..base.source_info import function_name
from ..errors import DTypeError
from ..tracing.tracer import Tracer, lift
from ..tree_util import tree_flatten, tree_unflatten
from .api import vmap


def _basis(leaves: List[Tracer], dtype) -> List[Tracer]:
    """The standard basis of the flattened ``leaves``: one ``[n, *leaf.shape]`` array per leaf
    (``n`` the total size), rows of the identity split along the leaves."""
    n = sum(int(np.prod(x.shape)) for x in leaves)
    eye = P.emit1("compare", [P.iota((n, n), 0, np.int32), P.iota((n, n), 1, np.int32)],
                  {"comparison_direction": "EQ"})
    eye = P.convert(eye, dtype)
    out, k = [], 0
    for x in leaves:
        m = int(np.prod(x.shape))
        part = P.slice(eye, [0, k], [n, k + m]) if leaves[1:] else eye
        out.append(P.reshape(P.convert(part, x.dtype), (n,) + tuple(x.shape)))
        k += m
    return out


def _common_float(api: str, leaves: List[Tracer], what: str):
    for x in leaves:
        if not dtypes.is_float(x.dtype):
            raise DTypeError(f"{api} requires real-valued {what}, but got {x.aval.str_short()}; "
                             "differentiate with respect to floating-point values only")
    return np.result_type(*[x.dtype for x in leaves]) if leaves else np.float32


def _make(fun: Callable, argnums, has_aux: bool, api_name: str, body: Callable) -> Callable:
    if not callable(fun):
        raise TypeError(f"{api_name} expects a callable, got {type(fun).__name__}")
    api = f"{api_name}({function_name(fun)})"
    nums, single = _argnums(api_name, argnums)

    def traced(*args, **kwargs):
        pos = _resolve_argnums(api, nums, len(args))
        primals, trees = diff_primals(api, fun, args, pos, False)
        dyn, k = [], 0
        for tree in trees:
            dyn.append(tree_unflatten(tree, primals[k:k + tree.num_leaves]))
            k += tree.num_leaves

        def g(*d):
            new = list(args)
            for i, x in zip(pos, d):
                new[i] = x
            return fun(*new, **kwargs)

        return body(api, g, tuple(dyn), single, has_aux)

    return argnums_wrapper(fun, traced, api, api_name, nums)


def _nest(y_leaves, y_tree, dyn, single, block):
    """Outputs outside, inputs inside: ``block(i, j, x_leaf)`` for output leaf i, input leaf j."""
    x_leaves, x_tree = tree_flatten(dyn)
    per_out = []
    for i in range(len(y_leaves)):
        inner = tree_unflatten(x_tree, [block(i, j, x) for j, x in enumerate(x_leaves)])
        per_out.append(inner[0] if single else inner)
    return tree_unflatten(y_tree, per_out)


def _jacrev(api, g, dyn, single, has_aux):
    res = vjp(g, *dyn, has_aux=has_aux)
    y, pullback = res[0], res[1]
    y_leaves, y_tree = tree_flatten(y)
    y_leaves = [lift(v) for v in y_leaves]
    dt = _common_float(api, y_leaves, "outputs")
    basis = _basis(y_leaves, dt)
    cts = vmap(pullback)(tree_unflatten(y_tree, basis))  # tuple over dyn, each [n, *x.shape]
    ct_leaves = tree_flatten(cts)[0]
    offsets = np.cumsum([0] + [int(np.prod(v.shape)) for v in y_leaves])

    def block(i, j, x):
        rows = P.slice(ct_leaves[j], [offsets[i]] + [0] * x.ndim,
                       [offsets[i + 1]] + list(x.shape)) if len(y_leaves) > 1 else ct_leaves[j]
        return P.reshape(rows, tuple(y_leaves[i].shape) + tuple(x.shape))

    jac = _nest(y_leaves, y_tree, dyn, single, block)
    return (jac, res[2]) if has_aux else jac


def _jacfwd(api, g, dyn, single, has_aux):
    x_leaves, x_tree = tree_flatten(dyn)
    dt = _common_float(api, x_leaves, "inputs")
    basis = tree_unflatten(x_tree, _basis(x_leaves, dt))

    def pushfwd(tangents):
        r = jvp(g, dyn, tangents, has_aux=has_aux)
        return (r[0], r[1], r[2]) if has_aux else (r[0], r[1])

    out_axes = (None, -1, None) if has_aux else (None, -1)
    r = vmap(pushfwd, out_axes=out_axes)(basis)
    y, jt = r[0], r[1]
    y_leaves, y_tree = tree_flatten(y)
    j_leaves = tree_flatten(jt)[0]
    offsets = np.cumsum([0] + [int(np.prod(x.shape)) for x in x_leaves])

    def block(i, j, x):
        t = j_leaves[i]
        cols = P.slice(t, [0] * (t.ndim - 1) + [offsets[j]],
                       list(t.shape[:-1]) + [offsets[j + 1]]) if len(x_leaves) > 1 else t
        return P.reshape(cols, tuple(t.shape[:-1]) + tuple(x.shape))

    jac = _nest(y_leaves, y_tree, dyn, single, block)
    return (jac, r[2]) if has_aux else jac


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """The Jacobian of ``fun`` by reverse mode (jax.jacrev)."""
    if holomorphic:
        raise NotImplementedError("hlo.jacrev: hlo has no complex numbers (holomorphic=True)")
    return _make(fun, argnums, has_aux, "hlo.jacrev", _jacrev)


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The Jacobian of ``fun`` by forward mode (jax.jacfwd)."""
    if holomorphic:
        raise NotImplementedError("hlo.jacfwd: hlo has no complex numbers (holomorphic=True)")
    return _make(fun, argnums, has_aux, "hlo.jacfwd", _jacfwd)


def hessian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """``jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)`` (jax.hessian)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)
