"""Binding symbolic dimensions to sizes, and specializing a module to them.

A module's symbols are global to it: ``b`` in ``@main``'s argument types and ``b`` in a private
function's types are the same size. ``bind_symbols(types, shapes)`` reads the symbols' values
from concrete argument shapes (a dimension that is a symbol, or a linear ``k*b+c`` of one
symbol, binds it; every other dimension is then checked) and raises ``DimBindingError`` naming
the argument, the dimension and the expression when the shapes contradict the types.
``specialize_module(module, env)`` is a copy of the module with every type's symbols replaced
by their values: a static module, which every pass, target and the interpreter handle as before.
Running a symbolic module by specializing it at the call is what the interpreter does; it is
not one compile serving a range of sizes (docs/ARCHITECTURE.md, "Symbolic dimensions").
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Tuple

from .clone import clone_module
from .core import Module
from .dim_expr import DimExpr, evaluate, substitute
from .types import TensorType


class DimBindingError(ValueError):
    """Argument shapes that do not fit a module's symbolic types (or leave a symbol unbound)."""


def _linear(e: DimExpr) -> Optional[Tuple[str, int, int]]:
    """(symbol, k, c) when ``e`` is ``k*symbol + c``."""
    sym, k, c = None, 0, 0
    for m, coeff in e.terms:
        if not m:
            c = coeff
        elif len(m) == 1 and isinstance(m[0][0], str) and m[0][1] == 1 and sym is None:
            sym, k = m[0][0], coeff
        else:
            return None
    return (sym, k, c) if sym is not None else None


def bind_symbols(types: Sequence[TensorType], shapes: Sequence[Sequence[int]],
                 names: Optional[Sequence[str]] = None,
                 env: Optional[Mapping[str, int]] = None,
                 env_from: Optional[Mapping[str, str]] = None) -> Dict[str, int]:
    """The symbols' values that make ``types`` have ``shapes`` (ranks already checked equal);
    ``names`` names the arguments in errors (default ``argument #i``); ``env`` holds values
    already known (``env_from`` says where each came from, for errors)."""
    out: Dict[str, int] = dict(env or {})
    where: Dict[str, str] = {s: (env_from or {}).get(s, "given") for s in out}
    label = (lambda i: names[i]) if names is not None else (lambda i: f"argument #{i}")
    for i, (t, shape) in enumerate(zip(types, shapes)):
        for j, d in enumerate(t.shape):
            if not isinstance(d, DimExpr):
                continue
            lin = _linear(d)
            if lin is None or lin[0] in out:
                continue
            sym, k, c = lin
            n = int(shape[j])
            q, r = divmod(n - c, k)
            if r != 0 or q < 1:
                raise DimBindingError(
                    f"{label(i)} dimension {j} is {n}, which '{d}' cannot be for a size "
                    f"{sym} >= 1 (type {t.without_layout()}, shape {tuple(shape)})")
            out[sym] = q
            where[sym] = f"{label(i)} dimension {j}"
    for i, (t, shape) in enumerate(zip(types, shapes)):
        for j, d in enumerate(t.shape):
            if not isinstance(d, DimExpr):
                continue
            missing = sorted(d.symbols() - out.keys())
            if missing:
                raise DimBindingError(
                    f"{label(i)} dimension {j} is '{d}': symbol {missing[0]} is not set by any "
                    f"argument dimension that is the symbol alone (or k*{missing[0]}+c)")
            want = evaluate(d, out)
            if want != int(shape[j]):
                syms = ", ".join(f"{s}={out[s]} (from {where[s]})" for s in sorted(d.symbols()))
                raise DimBindingError(
                    f"{label(i)} dimension {j} is {int(shape[j])} but its type says '{d}' = "
                    f"{want} with {syms}")
    return out


def dim_arg_values(fn, args) -> Tuple[Dict[str, int], Dict[str, str]]:
    """The symbols that ``fn``'s dimension arguments (``Function.dim_args``) set, from the
    argument values ``args``, and where each came from."""
    env: Dict[str, int] = {}
    where: Dict[str, str] = {}
    for i, sym in fn.dim_args.items():
        v = int(args[i])
        if sym in env and env[sym] != v:
            raise DimBindingError(f"dimension argument #{i} is {v} but {sym} = {env[sym]} "
                                  f"from {where[sym]}")
        if v < 0:
            raise DimBindingError(f"dimension argument #{i} ({sym}) is {v}, a negative size")
        env[sym] = v
        where[sym] = f"the value of argument #{i}"
    return env, where


def specialize_type(t: TensorType, env: Mapping[str, int]) -> TensorType:
    if t.is_static:
        return t
    shape = tuple(substitute(d, env) for d in t.shape)
    return TensorType(shape, t.dtype, t.layout)


def module_is_static(module: Module) -> bool:
    for fn in module.functions.values():
        if any(not t.is_static for t in fn.arg_types):
            return False
        for op in fn.walk():
            if any(not r.type.is_static for r in op.results):
                return False
            for reg in op.regions:
                if any(not a.type.is_static for a in reg.args):
                    return False
    return True


def module_symbols(module: Module) -> frozenset:
    out: set = set()
    for fn in module.functions.values():
        for t in fn.arg_types:
            for d in t.shape:
                if isinstance(d, DimExpr):
                    out |= d.symbols()
        for op in fn.walk():
            for r in op.results:
                for d in r.type.shape:
                    if isinstance(d, DimExpr):
                        out |= d.symbols()
    return frozenset(out)


def specialize_module(module: Module, env: Mapping[str, int]) -> Module:
    """A copy of ``module`` whose types have ``env``'s values for their symbols (symbols not in
    ``env`` stay)."""
    out = clone_module(module)
    for fn in out.functions.values():
        for a in fn.args:
            a.type = specialize_type(a.type, env)
        for op in fn.walk():
            for r in op.results:
                r.type = specialize_type(r.type, env)
            for reg in op.regions:
                for a in reg.args:
                    a.type = specialize_type(a.type, env)
            for k, v in op.attrs.items():
                if isinstance(v, (list, tuple)) and any(isinstance(x, DimExpr) for x in v):
                    op.attrs[k] = tuple(substitute(x, env) for x in v)
    return out
