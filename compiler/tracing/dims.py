"""``hlo.Dim``: a named symbolic dimension with a declared range (issue 38).

``hlo.ShapeDtypeStruct((hlo.Dim("b", min=1, max=4096), 512), "float32")``, or the string forms
``ShapeDtypeStruct(("b", 512), ...)`` and ``ShapeDtypeStruct("b, 512", ...)``, make ``f.lower``
trace ``f`` with a symbolic first dimension: the IR types read ``f32[b,512]``, and shapes
derived from it are expressions (``2*b``, ``b-1``: ``hlo.ir.dim_expr``). A symbol named in
several arguments is one size (equal dimensions across inputs); a dimension ``2*b`` must be
even at the call; a ``Dim``'s range is checked at the call. The range of a ``Dim`` counts where
the ``Dim`` itself is a dimension (``2*Dim("b")`` is an expression without a range).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from hlo.ir.dim_expr import DimExpr

Range = Tuple[int, Optional[int]]


class Dim(DimExpr):
    """A symbol ``name`` whose size lies in ``[min, max]`` (``max=None``: unbounded)."""

    __slots__ = ("name", "min", "max")

    def __init__(self, name: str, *, min: int = 1, max: Optional[int] = None):
        sym = DimExpr.symbol(name)
        super().__init__(sym.terms)
        if isinstance(min, bool) or not isinstance(min, int) or min < 1:
            raise ValueError(f"Dim({name!r}): min must be an int of at least 1 (a symbolic size "
                             f"is never 0), got {min!r}")
        if max is not None and (isinstance(max, bool) or not isinstance(max, int) or max < min):
            raise ValueError(f"Dim({name!r}): max must be None or an int of at least min={min}, "
                             f"got {max!r}")
        self.name, self.min, self.max = name, min, max

    def __repr__(self):
        hi = "" if self.max is None else f", max={self.max}"
        return f"Dim({self.name!r}, min={self.min}{hi})"


def ranges_of(shape) -> Dict[str, Range]:
    """The declared ranges of the ``Dim``s that are dimensions of ``shape``."""
    out: Dict[str, Range] = {}
    for d in shape:
        if isinstance(d, Dim):
            merge_range(out, d.name, (d.min, d.max))
    return out


def merge_range(into: Dict[str, Range], name: str, r: Range) -> None:
    old = into.get(name)
    if old is not None and old != r:
        raise ValueError(f"dimension {name} is declared with two ranges: [{old[0]}, "
                         f"{old[1] if old[1] is not None else 'inf'}] and [{r[0]}, "
                         f"{r[1] if r[1] is not None else 'inf'}]")
    into[name] = r


def parse_shape_text(text: str) -> tuple:
    """``"b, 512"`` (or ``"(b, 2*b)"``) as a shape of ints and DimExprs."""
    from hlo.ir.dim_expr import parse
    s = text.strip()
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += 1 if ch == "(" else -1 if ch == ")" else 0
        cur += ch
    if cur.strip():
        parts.append(cur)
    return tuple(parse(p) for p in parts)
