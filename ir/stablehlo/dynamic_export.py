"""Writing symbolic hlo types back as shape-polymorphic StableHLO (issue 38).

A symbolic dimension prints ``?`` (``typemap.tensor_to_mlir_text``). Its value, where an op
needs it as data, is computed in the function from what holds it: a dimension argument
(``Function.dim_args``: the scalar itself) or an argument's dimension that is the symbol alone
(``stablehlo.get_dimension_size``), then the polynomial with ``constant``, ``multiply``,
``add``, ``subtract``, ``divide`` / ``remainder`` (floordiv / mod of sizes, which are never
negative) on ``tensor<i64>``. The ops whose StableHLO form needs a static result become the
dynamic ops: ``broadcast_in_dim`` -> ``dynamic_broadcast_in_dim``, ``iota`` -> ``dynamic_iota``,
``reshape`` -> ``dynamic_reshape``, a ``slice`` with symbolic bounds -> ``real_dynamic_slice``.
A ``dynamic_slice`` with symbolic sizes (its starts clamp, ``real_dynamic_slice``'s do not) and
a symbol that no argument holds are UnsupportedErrors.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from ..core import Function, Operation
from ..dim_expr import DimExpr
from .errors import UnsupportedError

I64 = "tensor<i64>"


class SymbolSources:
    """Where each symbol of one function comes from, and the text that computes a size."""

    def __init__(self, fn: Function, names: Dict, tensor_text):
        self.fn = fn
        self.names = names  # the writer's value -> SSA name map (arguments are defined first)
        self.tensor_text = tensor_text
        self.src: Dict[str, Tuple] = {}
        for i, sym in fn.dim_args.items():
            self.src.setdefault(sym, ("arg", i))
        for i, a in enumerate(fn.args):
            for j, d in enumerate(a.type.shape):
                if isinstance(d, DimExpr) and len(d.terms) == 1:
                    m, c = d.terms[0]
                    if c == 1 and len(m) == 1 and isinstance(m[0][0], str) and m[0][1] == 1:
                        self.src.setdefault(m[0][0], ("dim", i, j))
        self.counter = 0

    def _tmp(self) -> str:
        self.counter += 1
        return f"%dim{self.counter}"

    def value(self, d, lines: List[str], ind: str) -> str:
        """SSA name of a ``tensor<i64>`` holding size ``d``; ops appended to ``lines``."""
        def const(k: int) -> str:
            n = self._tmp()
            lines.append(f'{ind}{n} = "stablehlo.constant"() <{{value = dense<{int(k)}> : {I64}}}> : () -> {I64}')
            return n

        def binop(op: str, a: str, b: str) -> str:
            n = self._tmp()
            lines.append(f'{ind}{n} = "stablehlo.{op}"({a}, {b}) : ({I64}, {I64}) -> {I64}')
            return n

        def sym(name: str) -> str:
            s = self.src.get(name)
            if s is None:
                raise UnsupportedError(f"export of symbolic dimension {name}",
                                       f"no argument of @{self.fn.name} holds it", self.fn.loc)
            a = self.fn.args[s[1]]
            n = self._tmp()
            if s[0] == "arg":
                t = self.tensor_text(a.type)
                lines.append(f'{ind}{n} = "stablehlo.convert"({self.names[a]}) : ({t}) -> {I64}')
                return n
            t = self.tensor_text(a.type)
            lines.append(f'{ind}{n} = "stablehlo.get_dimension_size"({self.names[a]}) '
                         f'<{{dimension = {s[2]} : i64}}> : ({t}) -> tensor<i32>')
            m = self._tmp()
            lines.append(f'{ind}{m} = "stablehlo.convert"({n}) : (tensor<i32>) -> {I64}')
            return m

        def expr(e) -> str:
            if not isinstance(e, DimExpr):
                return const(int(e))
            total = None
            for mono, c in e.terms:
                t = None
                for f, p in mono:
                    fv = sym(f) if isinstance(f, str) else binop(
                        "divide" if f[0] == "floordiv" else "remainder", expr(f[1]), expr(f[2]))
                    for _ in range(p):
                        t = fv if t is None else binop("multiply", t, fv)
                if t is None:
                    t = const(c)
                elif c != 1:
                    t = binop("multiply", const(c), t)
                total = t if total is None else binop("add", total, t)
            return total

        return expr(d)

    def shape(self, dims, lines: List[str], ind: str) -> str:
        """SSA name of a ``tensor<Nxi64>`` holding the sizes ``dims``."""
        parts = []
        for d in dims:
            v = self.value(d, lines, ind)
            n = self._tmp()
            lines.append(f'{ind}{n} = "stablehlo.reshape"({v}) : ({I64}) -> tensor<1xi64>')
            parts.append(n)
        out = self._tmp()
        if not parts:
            lines.append(f'{ind}{out} = "stablehlo.constant"() <{{value = dense<> : tensor<0xi64>}}> : () -> tensor<0xi64>')
            return out
        ins = ", ".join("tensor<1xi64>" for _ in parts)
        lines.append(f'{ind}{out} = "stablehlo.concatenate"({", ".join(parts)}) <{{dimension = 0 : i64}}> '
                     f': ({ins}) -> tensor<{len(parts)}xi64>')
        return out


def needs_dynamic_form(op: Operation) -> bool:
    if op.name in ("broadcast_in_dim", "iota", "reshape"):
        return not op.results[0].type.is_static
    if op.name == "slice":
        return any(isinstance(v, DimExpr) for k in ("start_indices", "limit_indices", "strides")
                   for v in (op.attrs.get(k) or ()))
    if op.name == "dynamic_slice":
        return any(isinstance(v, DimExpr) for v in op.attrs["slice_sizes"])
    return False


def write_dynamic_op(op: Operation, src: SymbolSources, use, define, types, tensor_text, loc_text,
                     lines: List[str], ind: str) -> None:
    """The dynamic StableHLO op for ``op`` (``needs_dynamic_form``), shape operands first."""
    rt = op.results[0].type
    rtext = tensor_text(rt)
    if op.name == "broadcast_in_dim":
        shape = src.shape(rt.shape, lines, ind)
        dims = ", ".join(str(int(d)) for d in op.attrs["broadcast_dimensions"])
        x = op.operands[0]
        lines.append(f'{ind}{define(op.results[0])} = "stablehlo.dynamic_broadcast_in_dim"({use(x)}, {shape}) '
                     f'<{{broadcast_dimensions = array<i64{": " + dims if dims else ""}>}}> : '
                     f'({tensor_text(x.type)}, tensor<{rt.rank}xi64>) -> {rtext} {loc_text}')
    elif op.name == "iota":
        shape = src.shape(rt.shape, lines, ind)
        lines.append(f'{ind}{define(op.results[0])} = "stablehlo.dynamic_iota"({shape}) '
                     f'<{{iota_dimension = {int(op.attrs["iota_dimension"])} : i64}}> : '
                     f'(tensor<{rt.rank}xi64>) -> {rtext} {loc_text}')
    elif op.name == "reshape":
        shape = src.shape(rt.shape, lines, ind)
        x = op.operands[0]
        lines.append(f'{ind}{define(op.results[0])} = "stablehlo.dynamic_reshape"({use(x)}, {shape}) : '
                     f'({tensor_text(x.type)}, tensor<{rt.rank}xi64>) -> {rtext} {loc_text}')
    elif op.name == "slice":
        x = op.operands[0]
        r = x.type.rank
        st = src.shape(op.attrs["start_indices"], lines, ind)
        li = src.shape(op.attrs["limit_indices"], lines, ind)
        sd = src.shape(op.attrs.get("strides") or (1,) * r, lines, ind)
        sh = f"tensor<{r}xi64>"
        lines.append(f'{ind}{define(op.results[0])} = "stablehlo.real_dynamic_slice"({use(x)}, {st}, {li}, {sd}) : '
                     f'({tensor_text(x.type)}, {sh}, {sh}, {sh}) -> {rtext} {loc_text}')
    else:
        raise UnsupportedError(f"export of '{op.name}' with symbolic sizes",
                               "its clamped starts have no dynamic StableHLO form", op.loc)
