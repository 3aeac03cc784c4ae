"""The kernel-emitter interface: what a target implements so that the shared lowering
(``backends/lower.py``) can turn a module into its step tree (``hlo.runtime.steps``).

The lowering decides *which* kernels a program needs (which values are computed together,
which get scratch buffers, how control flow nests); a target's ``KernelEmitter`` decides *how*
each kernel runs: the CPU (``backends/cpu/codegen.py``) emits loop nests called as
``KernelCall`` steps (spread over its thread pool) and its own GEMM or a BLAS; a GPU backend
emits kernels launched as ``Launch`` steps (grid/block) and matrix products as
``LibraryCall("cublaslt", "matmul", ...)``. Every method that takes ``lw`` (the ``Lowering``)
appends its steps to ``lw.steps`` and may take scratch buffers with ``lw.scratch(nbytes)``;
the others return the one step they emit.

Kernel families the lowering asks for (``env`` maps every materialized value to its buffer;
values not in it are computed element by element by ``elemental.ElementalEmitter``):

* ``loop_kernel(roots, env, name, what)``: each ``Root`` (a value, its destination buffer and
  type, optionally a destination-to-value index map) computed over the destination's index
  space; all roots share one index space;
* ``row_kernel(k, reduces, outputs, env, in_shape, name, what)``: reductions over the last
  ``k`` dimensions of ``in_shape`` (``reduces``, their result values) and the ``outputs``
  (value, buffer) pairs that read them only at the current row (``index_trace.row_fusable``):
  softmax, layer norm;
* ``column_reduce(op, dests, env, what)``: a reduce that keeps the physically minor dimension
  (``is_column_reduce``);
* ``big_reduce(lw, op, dests, env, what) -> bool``: a target's own strategy for a reduction
  (the CPU splits a big reduction to few values over its threads); False: not taken, the
  lowering goes on with ``column_reduce`` or a loop kernel;
* ``dot(lw, op, dest, env, epilogue=None) -> bool``: a dot_general into ``dest``; with an
  ``epilogue`` (the output fusion's root, which reads the product only at its own index:
  ``index_trace.reads_at_identity``), the epilogue is applied too when the method returns True;
* ``sort(lw, op, dests, env)``, ``scatter(lw, op, dests, env)``;
* ``update_in_place(op, dest, env, name, what)``: a dynamic_update_slice over its operand's
  buffer, only the update written (None: not taken, a loop kernel rewrites the array);
* ``const_ref(array) -> BufRef``: a constant buffer.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from hlo.ir import ops as _op_table
from hlo.ir.core import Operation, Value
from hlo.ir.types import TensorType
from hlo.runtime.steps import BufRef

# Targets without devices to talk to decline the collectives with this reason; the CPU lowers
# them (collective_steps.py) and declines only run_parallel (RUN_PARALLEL_DECLINED).
COLLECTIVES_DECLINED: Dict[str, str] = {
    name: f"'{name}' (a collective) runs on targets 'cpu' and 'interpreter' only so far"
    for name in sorted(_op_table.with_trait(_op_table.COLLECTIVE))}
RUN_PARALLEL_DECLINED = {
    "run_parallel": "run_parallel (a grid of programs, the test vectors' interpreter.run_parallel) "
                    "runs in the interpreter; on a compiled target each program is compiled by "
                    "itself and run on the devices (hlo.runtime.cpu.devices.run_spmd, as the "
                    "conformance runner does)"}


@dataclass
class Root:
    """A value to compute into a buffer. ``dest_type`` gives the buffer's shape/dtype/layout;
    ``index_fn`` maps a destination index to the value's index (default: the same index)."""

    value: Value
    dest: BufRef
    dest_type: TensorType
    index_fn: Optional[Callable] = None


def root_values(ctx, b, em, roots: Sequence[Root], idx) -> list:
    """Every root's element at destination index ``idx`` (converted to the destination's element
    type), all computed before any is stored: an output the buffer plan put over an operand (in
    place) must not change what the others read."""
    from .scalar_ops import convert
    vals = []
    for r in roots:
        val = em.at(r.value, r.index_fn(b, idx) if r.index_fn else idx)
        if r.dest_type.dtype != r.value.dtype:
            val = convert(ctx, b, val, r.value.dtype, r.dest_type.dtype)
        vals.append(val)
    return vals


def kernel_buffers(refs: Sequence[BufRef], writes: Sequence[bool]) -> Tuple[List[BufRef], List[bool], List[bool]]:
    """A kernel's parameters: its buffers without repeats (``writes`` merged), and for each
    whether it may be ``noalias`` (it overlaps no other buffer that either of them writes)."""
    uniq: List[BufRef] = []
    wr: List[bool] = []
    for r, w in zip(refs, writes):
        if r in uniq:
            wr[uniq.index(r)] |= w
        else:
            uniq.append(r)
            wr.append(w)
    alone = [not any(r.overlaps(o) for j, o in enumerate(uniq) if j != k and (wr[k] or wr[j]))
             for k, r in enumerate(uniq)]
    return uniq, wr, alone


# Which materialized values does a fused computation read? (Every backend's kernels ask.)

def fused_ops(roots: Sequence[Value], env: Dict[Value, BufRef]) -> Tuple[List[Value], list, int]:
    """What computing ``roots`` elementally involves: the values with a buffer (in ``env``) that
    it reads, the ops computed on the way, and the number of ops inside their regions."""
    seen = set()
    reads: List[Value] = []
    ops = []
    inner_ops = 0
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in env:
            reads.append(v)
            continue
        op = v.op
        if op is None:
            continue  # a scalar-region argument bound at emission time
        ops.append(op)
        stack.extend(op.operands)
        if op.regions:
            inner = op.defined_inside()
            for r in op.regions:
                for o in r.walk():
                    inner_ops += 1
                    stack.extend(x for x in o.operands if x not in inner)
                stack.extend(x for x in r.outputs if x not in inner)
    return reads, ops, inner_ops


def fused_reads(roots: Sequence[Value], env: Dict[Value, BufRef]) -> List[Value]:
    """The values with a buffer (in ``env``) that computing ``roots`` elementally reads."""
    return fused_ops(roots, env)[0]


def physical_order(t: TensorType) -> List[int]:
    """Logical dimensions from the physically major to the minor one."""
    return list(reversed(t.minor_to_major))


def is_column_reduce(op) -> bool:
    """A reduce that keeps the input's physically minor dimension."""
    t = op.operands[0].type
    return t.rank >= 2 and t.minor_to_major[0] not in op.attrs["dimensions"] and t.size > 0


class KernelEmitter(abc.ABC):
    """A target's kernels (see the module docstring). ``threads``: how many workers a kernel
    may spread over (1 for targets that do not split work themselves)."""

    threads: int = 1

    # Ops of the op table that the shared lowering lowers but this target cannot run, with the
    # reason: ``lowered_ops`` leaves them out, compiling a program holding one is an error
    # naming its line (the lowering, and ``hlo.staging.targets`` before the passes run).
    DECLINED: Dict[str, str] = {
        "host_callback": "this target cannot call back into the Python host (hlo.debug.print, "
                         "hlo.pure_callback); run the program on target 'cpu' or 'interpreter'",
        **COLLECTIVES_DECLINED,
    }

    @classmethod
    def declined_ops(cls) -> Dict[str, str]:
        return dict(cls.DECLINED)

    @abc.abstractmethod
    def const_ref(self, arr: np.ndarray) -> BufRef:
        ...

    @abc.abstractmethod
    def loop_kernel(self, roots: Sequence[Root], env: Dict[Value, BufRef], name: str, what: str):
        ...

    @abc.abstractmethod
    def row_kernel(self, k: int, reduces: Sequence[Value], outputs: Sequence[Tuple[Value, BufRef]],
                   env: Dict[Value, BufRef], in_shape, name: str, what: str):
        ...

    def defer_row_operand(self, dot: Operation, v: Value, k: int, reduces: Sequence[Value], in_shape,
                          name: str, what: str):
        """Where dot operand ``v`` (a row prologue: rows the first ``k`` dimensions) is left for
        the product to compute as it goes (the CPU's ``dot_chunks.py``), what it needs for that
        (``lower`` keeps it in ``row_operands``); None: the row kernel computes it whole now."""
        return None

    def row_kernel_fits(self, in_shape, k: int) -> bool:
        """Whether a row-fused fusion over ``in_shape`` (rows: its first ``k`` dimensions) runs
        as one row kernel; else its reductions and outputs run as kernels of their own."""
        return True

    @abc.abstractmethod
    def column_reduce(self, op, dests: Sequence[BufRef], env: Dict[Value, BufRef], what: str):
        ...

    def big_reduce(self, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef], what: str) -> bool:
        return False

    def update_in_place(self, op, dest: BufRef, env: Dict[Value, BufRef], name: str, what: str):
        """The step of a dynamic_update_slice whose ``dest`` is its operand's own buffer, writing
        only the update; None (the default): the lowering emits the elemental loop kernel, which
        rewrites every element (correct in place too: it reads the operand at the index it
        writes)."""
        return None

    @abc.abstractmethod
    def dot(self, lw, op, dest: BufRef, env: Dict[Value, BufRef], epilogue: Optional[Value] = None) -> bool:
        ...

    @abc.abstractmethod
    def sort(self, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        ...

    @abc.abstractmethod
    def scatter(self, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        ...
