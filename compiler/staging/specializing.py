"""Running a module with symbolic dimensions (issue 38) by specializing it at the call.

``Lowered(module).compile(target)`` of a module whose types have symbols (``f32[d0,4]``, what
``hlo.load_stablehlo`` makes of ``tensor<?x4xf32>``) returns a ``SpecializingCompiled``. Each
call binds the symbols from the arguments (``hlo.ir.specialize``: a dimension that is a symbol,
``k*b+c``, or a dimension argument's value; every other dimension is checked), compiles the
module specialized to those sizes for the target the first time they are seen, keeps that
executable (the ``MAX_SIZES`` most recently used sizes), and runs it.

This is not one compile serving a range of sizes, which is issue 38's goal for the CPU (kernels
that take their extents at run time): each distinct size is its own compile, with the same cost
as a static compile of that size. ``as_text()`` and ``repr`` say so.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

import numpy as np

from hlo.ir import Module, print_module
from hlo.ir.dim_expr import DimExpr
from hlo.ir.specialize import DimBindingError, bind_symbols, dim_arg_values, module_symbols, specialize_module

from ..base.boundary import api_boundary
from ..base.signature import flatten_inputs
from ..errors import SignatureMismatchError
from ..tree_util import tree_unflatten

MAX_SIZES = 32


def is_symbolic(module: Module) -> bool:
    main = module.main
    return bool(main.dim_args) or any(not t.is_static for t in main.arg_types) \
        or any(not t.is_static for t in main.result_types)


class SymbolicAval:
    """A symbolic argument's or result's type where a ``ShapedArray`` stands for a static one."""

    __slots__ = ("type",)

    def __init__(self, t):
        self.type = t

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.np_dtype

    @property
    def ndim(self) -> int:
        return self.type.rank

    def str_short(self) -> str:
        return str(self.type.without_layout())

    def strip_weak(self) -> "SymbolicAval":
        return self

    def __repr__(self):
        return f"SymbolicAval({self.str_short()})"


def declared_ranges(tree) -> Dict[str, Tuple[int, Optional[int]]]:
    """The ``hlo.Dim`` ranges of the ``ShapeDtypeStruct``s in a pytree of arguments."""
    from ..tracing.abstract import ShapeDtypeStruct
    from ..tracing.dims import merge_range
    from ..tree_util import tree_leaves
    out: Dict[str, Tuple[int, Optional[int]]] = {}
    for leaf in tree_leaves(tree):
        if isinstance(leaf, ShapeDtypeStruct):
            for name, r in leaf.dim_ranges.items():
                merge_range(out, name, r)
    return out


def symbolic_avals(module: Module) -> Tuple[List[SymbolicAval], List[SymbolicAval]]:
    main = module.main
    return [SymbolicAval(t) for t in main.arg_types], [SymbolicAval(t) for t in main.result_types]


class SpecializingCompiled:
    """A symbolic module for one target, compiled per distinct size at the call."""

    def __init__(self, lowered, target: str, dump_dir: Optional[str] = None, profile: bool = False):
        self.lowered = lowered
        self.target = target
        self._dump_dir = dump_dir
        self._profile = profile
        self._by_size: "OrderedDict[Tuple, object]" = OrderedDict()
        self.compiles = 0  # how many specializations were compiled (a cache miss each)

    @property
    def symbols(self) -> List[str]:
        return sorted(module_symbols(self.lowered.ir) | set(self.lowered.ir.main.dim_args.values()))

    @property
    def sizes_compiled(self) -> List[Dict[str, int]]:
        """The symbol values of the executables kept, least recently used first."""
        return [dict(k) for k in self._by_size]

    def bind(self, args) -> Dict[str, int]:
        """The symbols' values for these arguments; SignatureMismatchError naming the argument,
        the dimension and its expression when they do not fit."""
        main = self.lowered.ir.main
        names = self.lowered.arg_names
        sig = self.lowered.signature_text()
        if len(args) != len(main.arg_types):
            raise SignatureMismatchError(f"{sig} takes {len(main.arg_types)} arguments, got {len(args)}")
        shapes = []
        for i, (a, t) in enumerate(zip(args, main.arg_types)):
            s = np.shape(a)
            dt = getattr(a, "dtype", None)
            if len(s) != t.rank or (dt is not None and np.dtype(dt) != t.np_dtype):
                got = f"{np.dtype(dt).name if dt is not None else type(a).__name__}{list(s)}"
                raise SignatureMismatchError(f"{sig}: {names[i]} must be {t.without_layout()}, got {got}")
            shapes.append(s)
        try:
            given, where = dim_arg_values(main, args)
            env = bind_symbols(main.arg_types, shapes, names=names, env=given, env_from=where)
        except DimBindingError as e:
            raise SignatureMismatchError(f"{sig}: {e}") from None
        for sym, (lo, hi) in sorted(self.lowered.dim_ranges.items()):
            v = env.get(sym)
            if v is not None and (v < lo or (hi is not None and v > hi)):
                at = next((f"{names[i]} dimension {j}" for i, t in enumerate(main.arg_types)
                           for j, d in enumerate(t.shape) if d == DimExpr.symbol(sym)), "the arguments")
                raise SignatureMismatchError(
                    f"{sig}: dimension {sym} is {v} ({at}), outside its declared range "
                    f"[{lo}, {hi if hi is not None else 'inf'}] (hlo.Dim({sym!r}, min={lo}, max={hi}))")
        return env

    def executable_for(self, env: Dict[str, int]):
        """The executable of the module specialized to ``env`` (compiled on first use)."""
        key = tuple(sorted(env.items()))
        hit = self._by_size.get(key)
        if hit is not None:
            self._by_size.move_to_end(key)
            return hit
        static = specialize_module(self.lowered.ir, env)
        static.main.dim_args = {}  # their values were checked by the binding
        exe = type(self.lowered)(static, arg_names=self.lowered.arg_names, fun_name=self.lowered.fun_name).compile(
            self.target, dump_dir=self._dump_dir, profile=self._profile)
        self.compiles += 1
        self._by_size[key] = exe
        while len(self._by_size) > MAX_SIZES:
            self._by_size.popitem(last=False)
        return exe

    @api_boundary
    def __call__(self, *args, **kwargs):
        low = self.lowered
        arrays = flatten_inputs(args, kwargs, in_tree=low.in_tree, n_inputs=len(low.in_avals),
                                signature=low.signature_text(), error=SignatureMismatchError,
                                check_leaf=lambda i, leaf: (np.asarray(leaf), None))
        env = self.bind(arrays)
        outs = self.executable_for(env)(*arrays)
        if low.out_tree is None:
            return outs
        return tree_unflatten(low.out_tree, list(outs) if isinstance(outs, (list, tuple)) else [outs])

    def as_text(self, dialect: str = "hlo") -> str:
        if dialect != "hlo":
            raise ValueError(f"{self!r}: as_text({dialect!r}) needs one size's executable: "
                             "executable_for({...}).as_text(...)")
        sizes = "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in self.sizes_compiled) or "none yet"
        return (f"// symbolic dimensions {', '.join(self.symbols)}: specialized at the call, one "
                f"compile per distinct size (not one compile for the range); sizes compiled: "
                f"{sizes}\n" + print_module(self.lowered.ir))

    def save(self, path) -> None:
        raise NotImplementedError(
            f"{self!r} has symbolic dimensions ({', '.join(self.symbols)}) and is compiled per "
            "size at the call; a .hlox holds one compile: save executable_for({...}) of one size")

    def __repr__(self):
        return (f"<SpecializingCompiled {self.lowered.signature_text()} for {self.target}: "
                f"compiled per size at the call, {len(self._by_size)} size(s) kept>")
