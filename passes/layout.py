"""Layout assignment: every top-level tensor of ``main`` (rank 1 and up) gets a physical layout,
its minor-to-major dimension order, shown in the text form (``f32[4,8]{0,1}``).

- Parameters and results of ``main`` are row-major: that is the calling convention.
- A ``transpose`` becomes free (a bitcast: its result is its operand's bytes, read with other
  dimension names) when its operand's producer can write the permuted layout: the producer's
  kernel writes its result in that order and the transpose costs nothing. Producers that can
  write any layout are kernels we generate (elementwise and movement ops, reductions, dots);
  parameters, constants and opaque ops (sort, scatter, while, ...) keep row-major.
- Otherwise a transpose whose readers can take any layout is made free by giving its result
  the permuted layout; a ``dot_general`` reader takes a layout when the operand's batch
  dimensions are its most major ones, in order (the dot kernel walks batches as contiguous
  matrices; the two matrix dimensions may be in either order, which is the transposed-operand
  flag of a GEMM).
- A ``reshape`` between row-major layouts is a bitcast (row-major order is preserved).

``bitcast_result_type(op, t)`` is the result type that makes a transpose or reshape of an
operand stored as ``t`` a bitcast (kernels use it to read a chain of them straight from the
operand's buffer). ``is_bitcast(op)`` says whether a reshape, transpose, broadcast or bitcast_convert moves no
data under the layouts of its operand and result. Such ops launch no kernel; their result
shares the operand's buffer (buffer assignment aliases them). Every kernel reads and writes
top-level values in their stated layouts; values inside fused regions have none.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from hlo.ir import ops
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.types import TensorType

from .base import MainPass, register_pass
from .util import ELEMENTWISE, LOOP_FUSIBLE, top_users

MAY_BITCAST = ops.with_trait(ops.MAY_BITCAST)
# Ops whose readers this pass can give a permuted layout: the loop-fusible ops (from traits),
# plus reduce and dot_general, whose layout handling is this pass's own per-op code (not a
# category of the op table).
LAYOUT_FLEXIBLE = (LOOP_FUSIBLE | {"reduce", "dot_general"}) - {"constant"}


def _physical(t: TensorType) -> List[int]:
    """Dimensions from most major to most minor, leaving out unit dimensions."""
    return [d for d in reversed(t.minor_to_major) if t.shape[d] != 1]


def is_bitcast(op: Operation) -> bool:
    """The op moves no data: its result is its operand's bytes under the assigned layouts."""
    if op.name not in MAY_BITCAST or len(op.operands) != 1:
        return False
    a, r = op.operands[0].type, op.results[0].type
    if op.name == "bitcast_convert":
        return a.shape == r.shape and a.dtype.bits == r.dtype.bits and a.minor_to_major == r.minor_to_major
    if a.size != r.size or a.dtype != r.dtype:
        return False
    if op.name == "transpose":
        perm = op.attrs["permutation"]
        phys_r = [perm[d] for d in _physical(r)]
        return phys_r == _physical(a)
    if op.name == "broadcast_in_dim":
        dims = list(op.attrs["broadcast_dimensions"])
        # Only unit dimensions are added: map operand dims to result dims and compare orders.
        phys_a = [dims[d] for d in _physical(a)]
        return phys_a == _physical(r)
    # reshape: both physical orders must be row-major (after dropping unit dimensions).
    return _physical(a) == [d for d in range(a.rank) if a.shape[d] != 1] and \
        _physical(r) == [d for d in range(r.rank) if r.shape[d] != 1]


def _with_layout(t: TensorType, layout) -> TensorType:
    if t.rank == 0:
        return t.without_layout()
    return t.with_layout(tuple(layout))


def _permuted_operand_layout(perm: Sequence[int], result_m2m: Sequence[int]) -> Tuple[int, ...]:
    """The operand layout that makes ``transpose(perm)`` a bitcast with the given result layout."""
    return tuple(perm[d] for d in result_m2m)


def _result_layout_for(perm: Sequence[int], operand_m2m: Sequence[int]) -> Tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv[d] for d in operand_m2m)


def bitcast_result_type(op: Operation, operand_type: TensorType):
    """The type (with layout) under which ``op``'s result is a bitcast of its operand stored in
    ``operand_type``: a transpose is one in the permuted layout, a reshape when both sides are
    row-major. None for other ops, or a reshape of a non-row-major operand."""
    r = op.results[0].type
    if op.name == "transpose":
        return _with_layout(r, _result_layout_for(op.attrs["permutation"], operand_type.minor_to_major))
    if op.name == "reshape" and operand_type.dtype == r.dtype \
            and _physical(operand_type) == [d for d in range(operand_type.rank) if operand_type.shape[d] != 1]:
        return _with_layout(r, r.default_layout)
    return None


def dot_accepts(dot: Operation, operand_index: int, layout: Sequence[int]) -> bool:
    """Whether a dot kernel reads operand ``operand_index`` in ``layout``: batch dimensions
    most major, in order."""
    batch = list(dot.attrs.get("lhs_batching_dimensions" if operand_index == 0 else
                               "rhs_batching_dimensions", ()))
    major_to_minor = list(reversed(layout))
    return major_to_minor[:len(batch)] == batch


@register_pass("layout-assignment", "physical layouts; free transposes and reshapes; dot operand layouts")
class LayoutAssignment(MainPass):
    name = "layout-assignment"

    def run_main(self, module: Module) -> bool:
        region = module.main.body
        before = [str(v.type) for v in self._values(region)]
        # Start from row-major everywhere: the calling convention and the default.
        for v in self._values(region):
            v.type = _with_layout(v.type, v.type.default_layout)
        users = top_users(region)
        returned = set(region.outputs)
        fixed = set(region.args) | returned
        for op in reversed(region.ops):
            if op.name == "transpose":
                self._free_transpose(op, users, returned, fixed)
        after = [str(v.type) for v in self._values(region)]
        return before != after

    @staticmethod
    def _values(region: Region) -> List[Value]:
        vals = [a for a in region.args if a.type.rank > 0]
        for op in region.ops:
            vals.extend(r for r in op.results if r.type.rank > 0)
        return vals

    def _free_transpose(self, t: Operation, users, returned, fixed) -> None:
        x, y = t.operands[0], t.results[0]
        perm = list(t.attrs["permutation"])
        if is_bitcast(t):
            return
        p = x.op
        # 1. The producer writes the permuted layout.
        if p is not None and x not in fixed and users.get(x, []) == [t] \
                and p.name in LAYOUT_FLEXIBLE and not is_bitcast(p):
            x.type = _with_layout(x.type, _permuted_operand_layout(perm, y.type.minor_to_major))
            self.lines.append(f"layout: {p.name} writes {x.type} so that transpose "
                              f"{list(perm)} is a bitcast")
            return
        # 2. The readers take the permuted layout.
        if y in fixed:
            return
        lay = _result_layout_for(perm, x.type.minor_to_major)
        readers = users.get(y, [])
        for u in readers:
            if u.name == "dot_general":
                for i, v in enumerate(u.operands[:2]):
                    if v is y and not dot_accepts(u, i, lay):
                        return
            elif not (u.name in ELEMENTWISE or u.name == "reduce"):
                return  # movement ops and opaque ops keep reading row-major
        y.type = _with_layout(y.type, lay)
        self.lines.append(f"layout: transpose {list(perm)} of {x.type} is a bitcast to {y.type}; "
                          "its readers take that layout")
