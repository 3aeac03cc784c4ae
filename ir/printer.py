"""The text form of the IR, used by every dump, test and error message.

    module @name

    func @main(%arg0: f32[4,8], %arg1: f32[8]) -> (f32[4]) {
      %0 = broadcast_in_dim(%arg1) {broadcast_dimensions = [1]} : f32[4,8] loc("model.py":3)
      %1 = add(%arg0, %0) : f32[4,8] loc("model.py":3)
      %2 = constant dense<0.0> : f32[]
      %3 = reduce(%1, %2) {dimensions = [1]} : f32[4] {
        ^body(%4: f32[], %5: f32[]):
          %6 = add(%4, %5) : f32[]
          return(%6)
      }
      return(%3)
    }

Values are renumbered per function on every print, so ``parse(print(m))`` prints identically.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from .core import Function, Module, Operation, Region, Value
from .dim_expr import DimExpr
from .nesting import call_with_stack_for
from .types import ElementType, TensorType, element_type

INDENT = "  "
HEX_THRESHOLD = 256  # constants with more elements print as a hex blob of raw bytes


def _canonical_nan_bits(et: ElementType) -> int:
    return int(np.array(np.nan, dtype=et.np_dtype).view(f"u{et.itemsize}"))


def format_scalar(v, et: ElementType) -> str:
    """One element of a constant, exactly: re-parsing gives the same bits."""
    if et.is_pred:
        return "true" if bool(v) else "false"
    if et.is_int:
        return str(int(v))
    if et.is_complex:  # (re, im), each part exactly as its float type prints
        z = np.array(v, dtype=et.np_dtype)
        c = et.component
        return f"({format_scalar(z.real, c)}, {format_scalar(z.imag, c)})"
    x = np.array(v, dtype=et.np_dtype)
    if np.isnan(x):
        bits = int(x.view(f"u{et.itemsize}"))
        if bits == _canonical_nan_bits(et):
            return "nan"
        return f"0x{bits:0{et.itemsize * 2}X}"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    if et.name == "f64":
        return repr(float(x))
    if et.name == "bf16":
        s = str(np.float32(x))
    else:
        s = str(x[()])
    if "." not in s and "e" not in s:
        s += ".0"
    return s


def format_dense(value: np.ndarray, et: ElementType) -> str:
    """``dense<...>`` body for an array: a splat, nested lists, or raw bytes in hex."""
    flat = value.reshape(-1)
    if flat.size > 1:
        bits = flat.view(np.uint8).reshape(flat.size, -1) if et.itemsize else flat
        if (bits == bits[0]).all():
            return f"dense<{format_scalar(flat[0], et)}>"
    elif flat.size == 1 and value.ndim == 0:
        return f"dense<{format_scalar(flat[0], et)}>"
    if flat.size > HEX_THRESHOLD:
        raw = np.ascontiguousarray(value).astype(et.np_dtype, copy=False)
        if et.is_pred:
            raw = raw.astype(np.uint8)
        return f'dense<"0x{raw.tobytes().hex().upper()}">'
    return f"dense<{_nested(value, et)}>"


def _nested(a: np.ndarray, et: ElementType) -> str:
    if a.ndim == 0:
        return format_scalar(a[()], et)
    return "[" + ", ".join(_nested(a[i], et) for i in range(a.shape[0])) + "]"


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def format_attr_value(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, DimExpr):  # a symbolic size in an attribute: (d0-1)
        return f"({v})"
    if isinstance(v, (float, np.floating)):
        return format_scalar(v, element_type("f64"))
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, np.ndarray):
        et = element_type(v.dtype)
        return f"{format_dense(v, et)} : {TensorType(v.shape, et)}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr_value(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


class _Namer:
    def __init__(self):
        self.names: Dict[Value, str] = {}
        self.counter = 0

    def define(self, v: Value, name: str = None) -> str:
        if name is None:
            name = f"%{self.counter}"
            self.counter += 1
        self.names[v] = name
        return name

    def __getitem__(self, v: Value) -> str:
        try:
            return self.names[v]
        except KeyError:
            return f"%<undefined {v.type}>"


def _types(ts: List[TensorType]) -> str:
    return ", ".join(str(t) for t in ts) if ts else "()"


def _print_op(op: Operation, namer: _Namer, depth: int, lines: List[str]) -> None:
    ind = INDENT * depth
    lhs = ""
    if op.results:
        lhs = ", ".join(namer.define(r) for r in op.results) + " = "
    loc = f" {op.loc.text()}" if op.loc is not None else ""
    if op.name == "constant" and set(op.attrs) == {"value"}:
        v = op.attrs["value"]
        body = f"constant {format_dense(v, op.results[0].dtype)}"
    else:
        args = ", ".join(namer[v] for v in op.operands)
        body = f"{op.name}({args})"
        if op.attrs:
            body += " {" + ", ".join(f"{k} = {format_attr_value(op.attrs[k])}" for k in sorted(op.attrs)) + "}"
    line = f"{ind}{lhs}{body} : {_types(op.result_types)}{loc}"
    if not op.regions:
        lines.append(line)
        return
    lines.append(line + " {")
    for r in op.regions:
        _print_region(r, namer, depth + 1, lines, label=True)
    lines.append(ind + "}")


def _print_region(r: Region, namer: _Namer, depth: int, lines: List[str], label: bool) -> None:
    ind = INDENT * depth
    body_depth = depth
    if label:
        args = ", ".join(f"{namer.define(a)}: {a.type}" for a in r.args)
        lines.append(f"{ind}^{r.name}({args}):")
        body_depth = depth + 1
    for op in r.ops:
        _print_op(op, namer, body_depth, lines)
    outs = ", ".join(namer[v] for v in r.outputs)
    lines.append(f"{INDENT * body_depth}return({outs})")


def _arg_attrs(fn: Function, i: int) -> str:
    attrs = []
    if i in fn.dim_args:
        attrs.append(f"dim = {fn.dim_args[i]}")
    if i in fn.arg_shardings:
        attrs.append(f"sharding = {_quote(fn.arg_shardings[i].text())}")
    return f" {{{', '.join(attrs)}}}" if attrs else ""


def print_function(fn: Function) -> str:
    namer = _Namer()
    args = ", ".join(f"{namer.define(a, f'%arg{i}')}: {a.type}" + _arg_attrs(fn, i)
                     for i, a in enumerate(fn.args))
    results = ", ".join(str(t) + (f" {{sharding = {_quote(fn.result_shardings[i].text())}}}"
                                  if i in fn.result_shardings else "")
                        for i, t in enumerate(fn.result_types))
    vis = "private " if fn.visibility == "private" else ""
    loc = f" {fn.loc.text()}" if fn.loc is not None else ""
    lines = [f"func {vis}@{fn.name}({args}) -> ({results}){loc} {{"]
    _print_region(fn.body, namer, 1, lines, label=False)
    lines.append("}")
    return "\n".join(lines)


def print_module(m: Module) -> str:
    """The module's text (on a thread with the stack a deep control-flow nest needs)."""
    return call_with_stack_for(m, _print_module, m)


def _print_module(m: Module) -> str:
    parts = [f"module @{m.name}"]
    for fn in m.functions.values():
        parts.append(print_function(fn))
    return "\n\n".join(parts) + "\n"


def print_op(op: Operation) -> str:
    """One op (with its regions) on its own, operands named by position; for error messages."""
    namer = _Namer()
    for i, v in enumerate(op.operands):
        namer.names.setdefault(v, f"%in{i}")
    lines: List[str] = []
    _print_op(op, namer, 0, lines)
    return "\n".join(lines)


def value_names(fn) -> Dict[Value, str]:
    """The names ``print_function(fn)`` gives ``fn``'s values (``%arg0``, ``%3``, nested regions
    included; ``fn`` a Function or its body Region), without printing: what decision logs and the buffer plan call values, so that
    they read against the IR text. Iterative (any depth of nesting), numbering as the printer
    does: an op's results, then each of its regions in turn (its arguments, then its ops)."""
    body = fn.body if isinstance(fn, Function) else fn
    names: Dict[Value, str] = {a: f"%arg{i}" for i, a in enumerate(body.args)}
    n = 0
    stack: List = [iter(body.ops)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        if isinstance(item, Region):
            for a in item.args:
                names[a] = f"%{n}"
                n += 1
            stack.append(iter(item.ops))
            continue
        for r in item.results:
            names[r] = f"%{n}"
            n += 1
        if item.regions:
            stack.append(iter(item.regions))
    return names
