"""Prefix scans (pass ``window-scan``): a ``reduce_window`` whose window along one axis is the
whole axis, padded by n-1 before (after, for a reverse scan) and with stride 1, is a running
reduction: what jax emits for ``cumsum``, ``cumprod``, ``cummax``, ``cummin`` and
``cumlogsumexp`` (``lax.cumsum(x, axis, reverse)``: window n along ``axis``, 1 elsewhere, padding
(n-1, 0), or (0, n-1) reversed). Computed as written it is a window per output, O(n^2) work
(cumsum of 4x100000 on the CPU: seconds). It becomes the associative scan of
``hlo.ir.prefix_scan`` (the construction ``hlo.lax``'s own running reductions use), as XLA
rewrites it for CPU and GPU: log2(n) levels, O(n) work.

    %r = reduce_window(%x, %zero) {padding = [[0, 0], [n-1, 0]], window_dimensions = [1, n]}
           ^body(%a, %b): %s = add(%a, %b); return(%s)
 -> slices of %x at even and odd positions, their sum, the scan of that, interleaved ...

A reduce_window is rewritten when (each refusal goes to the decision log with its reason):
- it has one operand and one init value (a variadic one, e.g. an argmax window, is left alone);
- strides and dilations are 1, and exactly one axis has a window longer than one element, that
  window spanning the axis with padding (n-1, 0) or (0, n-1) (other axes: window 1, no padding);
- the axis has more than ``SCAN_MIN`` elements (shorter ones stay a window per output: fewer,
  simpler kernels, as ``hlo.lax`` keeps them);
- its body is a known associative and commutative operation of its two arguments (``BODIES``:
  add, multiply, maximum, minimum, and, or, and jax's logaddexp), for which the element type
  is one the operation is associative on (add and multiply on floats are taken as associative,
  as XLA and jax take them: the sum's rounding differs from the window's left fold);
- the init value is a constant equal to that operation's identity (0, 1, -inf / the least
  integer, ...): otherwise each window's padding would count it again.

The body's ops are applied to whole arrays (compare, select and all), so the combining step is
exactly the body. Runs in the simplify group: after inlining (jax's ``@cumsum`` functions) and
constant folding (jax's init value is a ``broadcast_in_dim`` of a constant).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from hlo.ir.builder import Builder
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.prefix_scan import ScanOps, scan

from .base import MainPass, register_pass
from .util import control_bodies, erase_ops, replace_values

SCAN_MIN = 16   # as hlo.lax.reductions.SCAN_MIN

# jax's cumlogsumexp body (``lax.logaddexp`` on the accumulator a and the element b), written
# as the expression of ``_expr``; a and b may be swapped throughout.
_LOGADDEXP = ("select(compare[NE](subtract(a,b),subtract(a,b)),add(a,b),"
              "add(maximum(a,b),log_plus_one(exponential(negate(abs(subtract(a,b)))))))")


def _identity(kind: str, et) -> Optional[np.ndarray]:
    """The identity of ``kind`` on element type ``et``; None where ``kind`` is not an associative
    operation of that type."""
    dt = et.np_dtype
    if et.is_complex:
        return None
    if et.is_pred:
        return {"and": np.array(True), "or": np.array(False), "maximum": np.array(False),
                "minimum": np.array(True), "add": None, "multiply": None}.get(kind)
    if kind in ("and", "or"):
        return np.array(-1 if kind == "and" else 0, dt) if et.is_int else None
    if kind == "add":
        return np.zeros((), dt)
    if kind == "multiply":
        return np.ones((), dt)
    if kind in ("maximum", "minimum", "logaddexp"):
        if et.is_float:
            return np.array(-np.inf if kind != "minimum" else np.inf, dt)
        if kind == "logaddexp":
            return None
        info = np.iinfo(dt)
        return np.array(info.min if kind == "maximum" else info.max, dt)
    return None


BODIES = {"add(a,b)": "add", "multiply(a,b)": "multiply", "maximum(a,b)": "maximum",
          "minimum(a,b)": "minimum", "and(a,b)": "and", "or(a,b)": "or", _LOGADDEXP: "logaddexp"}


def _expr(region: Region, first: str = "a", second: str = "b") -> Optional[str]:
    """The body's result as an expression of its arguments (named ``first`` and ``second``; ops
    by name, compare with its direction); None for a body of several results or with constants
    or other attributes."""
    if len(region.args) != 2 or len(region.outputs) != 1:
        return None
    names: Dict[Value, str] = {region.args[0]: first, region.args[1]: second}
    for op in region.ops:
        if len(op.results) != 1 or op.regions or not op.operands:
            return None
        attrs = dict(op.attrs)
        tag = op.name
        if op.name == "compare":
            tag += f"[{attrs.pop('comparison_direction')}]"
            attrs.pop("compare_type", None)
        if attrs or any(v not in names for v in op.operands):
            return None
        names[op.results[0]] = f"{tag}({','.join(names[v] for v in op.operands)})"
    return names.get(region.outputs[0])


def body_kind(region: Region) -> Optional[str]:
    """Which of ``BODIES`` the region computes (its arguments in either order), or None."""
    return BODIES.get(_expr(region, "a", "b")) or BODIES.get(_expr(region, "b", "a"))


def prefix_axis(op: Operation) -> Tuple[Optional[Tuple[int, bool]], str]:
    """(axis, reverse) of a reduce_window that is a running reduction, or (None, why not)."""
    a = op.attrs
    t = op.operands[0].type
    r = t.rank
    wd = list(a.get("window_dimensions", [1] * r))
    for k in ("window_strides", "base_dilations", "window_dilations"):
        if any(s != 1 for s in a.get(k, [1] * r)):
            return None, f"its {k.replace('_', ' ')} are not all 1"
    pads = [tuple(p) for p in a.get("padding", [(0, 0)] * r)]
    axes = [d for d in range(r) if wd[d] != 1]
    if len(axes) != 1:
        return None, (f"its window spans {len(axes)} axes" if axes else "its windows have one element")
    ax = axes[0]
    if any(pads[d] != (0, 0) for d in range(r) if d != ax):
        return None, "it pads an axis its window does not run along"
    n = t.shape[ax]
    if wd[ax] != n:
        return None, f"a sliding window of {wd[ax]} of the {n} elements of axis {ax}"
    if pads[ax] == (n - 1, 0):
        return (ax, False), ""
    if pads[ax] == (0, n - 1):
        return (ax, True), ""
    return None, f"its padding {list(pads[ax])} of axis {ax} is not a prefix's ({n - 1}, 0) or (0, {n - 1})"


class _IrScanOps(ScanOps):
    def __init__(self, b: Builder):
        self.b = b

    def shape(self, v):
        return v.type.shape

    def is_bool(self, v):
        return v.type.dtype.is_pred

    def emit(self, name, operands, attrs):
        return self.b.value(name, list(operands), attrs=attrs)

    def zero(self, like):
        return self.b.value("constant", attrs={"value": np.zeros((), like.type.dtype.np_dtype)})


@register_pass("window-scan", "a reduce_window that is a running reduction (cumsum & co.) becomes an associative scan")
class WindowScan(MainPass):
    name = "window-scan"
    decision_prefix = "window-scan"

    def run_main(self, module: Module) -> bool:
        changed = False
        for region in list(control_bodies(module.main.body)):
            for op in [o for o in region.ops if o.name == "reduce_window"]:
                plan, why = self._plan(op)
                where = f"reduce_window at {op.loc}" if op.loc is not None else "reduce_window"
                t = op.operands[0].type
                if plan is None:
                    self._say(f"kept {where} ({t}): {why}")
                    continue
                ax, reverse, kind = plan
                self._rewrite(region, op, ax, reverse)
                self._say(f"scan of {where} ({t}): running {kind} along axis {ax}"
                          + (" from the end" if reverse else ""))
                changed = True
        return changed

    def _plan(self, op: Operation):
        if len(op.operands) != 2:
            return None, f"it reduces {len(op.operands) // 2} arrays together"
        (ax_rev, why) = prefix_axis(op)
        if ax_rev is None:
            return None, why
        ax, reverse = ax_rev
        n = op.operands[0].type.shape[ax]
        if n <= SCAN_MIN:
            return None, f"{n} elements along axis {ax}, at most {SCAN_MIN}: a window per output costs less than the scan's levels"
        kind = body_kind(op.regions[0])
        if kind is None:
            return None, "its body is not one the pass knows to be associative (add, multiply, maximum, minimum, and, or, logaddexp)"
        et = op.operands[0].type.dtype
        ident = _identity(kind, et)
        if ident is None:
            return None, f"{kind} on {et.name} is not a scan the pass does"
        init = op.operands[1]
        if init.op is None or init.op.name != "constant":
            return None, "its init value is not a constant"
        value = np.asarray(init.op.attrs["value"])
        if value.shape != () or value != ident:   # (for add, 0.0 and -0.0 both)
            return None, f"its init value {value} is not the identity {ident} of {kind}"
        return (ax, reverse, kind), ""

    def _rewrite(self, region: Region, op: Operation, ax: int, reverse: bool) -> None:
        b = Builder(region, op.loc, index=region.ops.index(op))
        body = op.regions[0]

        def combine(x: Value, y: Value) -> Value:
            vals: Dict[Value, Value] = {body.args[0]: x, body.args[1]: y}
            for bop in body.ops:
                vals[bop.results[0]] = b.value(bop.name, [vals[v] for v in bop.operands], attrs=dict(bop.attrs))
            return vals[body.outputs[0]]

        y = scan(_IrScanOps(b), combine, op.operands[0], ax, reverse)
        replace_values(region, {op.results[0]: y})
        erase_ops(region, [op])

    def _say(self, line: str) -> None:
        """Log ``line`` unless an earlier round of the simplify group has."""
        if f"{self.decision_prefix}: {line}" not in self.config.decisions:
            self.log(line)
