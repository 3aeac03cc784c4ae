"""A product whose A is computed row by row (a fused layer norm or softmax: the row prologue,
``lower._row_prologues``), run in chunks of rows.

Written whole, such an A is a temporary as large as A (ln_linear_gelu_res' 16384 x 512 f32:
32 MiB, where XLA:CPU computes the normalization inside its GEMM's operand and needs none),
streamed out to memory and read back by the GEMM. In chunks, one scratch of ``rows`` rows is
reused: for each chunk the row kernel computes rows r0 .. r0+rows-1 into it, then the tiled
GEMM computes those rows of C (its epilogue at them too), while the chunk is still in the
caches it was written to. Both kernels are built once (a shorter last chunk gets a GEMM of its
own) and called once a chunk, r0 read from a one-element constant (``first_row`` of
``kernels.emit_row_kernel`` / ``gemm_tiled.emit_tiled_gemm``).

The chunk: each thread's share of it (the GEMM splits the chunk's rows between the threads as it
splits any product's, ``dot._blocks``) fills ``L2_FRACTION`` of its L2, as the GEMM's own
row chunks do (``gemm_tiled.chunk_rows``); so the product packs B no more often than whole
(it packs it once a row chunk anyway). A product of fewer than two such chunks is not split.
``CHUNK_BYTES`` (None: from the machine, as above) sets the chunk's size instead.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from hlo.ir.core import Value

from ..kernel_emitter import physical_order
from .kernels import emit_row_kernel

# Bytes of A a chunk holds; None: each thread's share at gemm_tiled.L2_FRACTION of its L2 (see
# above; ``dot.chunk_rows``).
CHUNK_BYTES: Optional[int] = None


@dataclasses.dataclass
class RowOperand:
    """A dot operand that a row kernel computes (deferred by ``lower._row_prologues``)."""
    k: int              # rows: the first k dimensions of in_shape
    reduces: list       # the row kernel's reductions
    in_shape: tuple
    name: str
    what: str

    def whole(self, lw, v: Value, env) -> None:
        """Compute the operand whole into a scratch of its size (as unchunked)."""
        ref = lw.scratch(v.type.nbytes)
        lw.steps.append(emit_row_kernel(lw.cg, self.k, self.reduces, [(v, ref)], env, self.in_shape,
                                        name=self.name, what=self.what))
        env[v] = ref


def row_operand(dot, v: Value, k: int, in_shape, reduces, name: str, what: str) -> Optional[RowOperand]:
    """``v`` (a row kernel's output: rows its first k dimensions) as a RowOperand, where it is
    the A of product ``dot`` with those rows as A's rows (no batch, free dimensions the
    leading k, contraction the rest, row-major, a float type); else None (computed whole, as
    before). Whether it is large enough to split is ``dot.chunk_rows``'s to say."""
    a = dot.attrs
    lhs, rhs = dot.operands
    t = v.type
    if lhs is not v or rhs is v or not t.dtype.is_float or t.dtype.name not in ("f32", "f64"):
        return None
    lb, lc = list(a.get("lhs_batching_dimensions", ())), list(a.get("lhs_contracting_dimensions", ()))
    lfree = [d for d in range(t.rank) if d not in lb and d not in lc]
    if (lb or lfree != list(range(k)) or sorted(lc) != lc or lc != list(range(k, t.rank))
            or tuple(t.shape[:k]) != tuple(in_shape[:k]) or physical_order(t) != list(range(t.rank))):
        return None
    return RowOperand(k, reduces, tuple(in_shape), name, what)


def emit_chunks(lw, ro: RowOperand, v: Value, env, rows: int, M: int, emit_gemm) -> None:
    """The chunks' steps: the row kernel (rows r0.. into one scratch of ``rows`` rows) and the
    GEMM on them, once a chunk. ``emit_gemm(m, first_row)`` builds the GEMM for ``m`` rows from
    the row that ``first_row`` holds (A: ``env[v]``, the chunk's scratch, allocated by the
    caller)."""
    cg = lw.cg
    row_bytes = v.type.nbytes // M
    starts = list(range(0, M, rows))
    firsts = [cg.const_ref(np.array([r0], np.int64)) for r0 in starts]
    why = ("each thread's share in half its L2" if CHUNK_BYTES is None
           else f"dot_chunks.CHUNK_BYTES = {CHUNK_BYTES}")
    what = f"{ro.what}, in {len(starts)} chunks of {rows} rows ({rows * row_bytes} bytes: {why}), not A whole"
    ref = env.pop(v)   # (computed from its fusion's values, not read)
    rk = emit_row_kernel(cg, ro.k, ro.reduces, [(v, ref)], env, ro.in_shape,
                         name=ro.name, what=what, first_row=firsts[0])
    env[v] = ref
    gemms = {}
    for r0, first in zip(starts, firsts):
        m = min(rows, M - r0)
        lw.steps.append(_again(rk, firsts[0], first, m))
        if m not in gemms:
            gemms[m] = (emit_gemm(m, first), first)
        g, f0 = gemms[m]
        lw.steps.append(_again(g, f0, first, g.extent))


def _again(call, old, new, extent):
    """``call`` (a KernelCall) on another first row and extent."""
    return dataclasses.replace(call, refs=[new if r == old else r for r in call.refs], extent=extent)
