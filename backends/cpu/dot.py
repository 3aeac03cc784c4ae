"""dot_general on the CPU.

Every dot_general is seen as the batched product C[b, m, n] = sum_k A[b, m, k] B[b, k, n]
(batch, free and contracting dimension groups). Each of A, B and C is a strided view
(``gemm_view.py``): an operand that is a buffer in any layout, or a chain of reshapes,
transposes and slices of one inside a fusion (attention's head split, a window of a weight), is
read where it is, with one stride per batch dimension and a leading dimension per matrix; only
what the kernel cannot read that way (fused elementwise producers, f16/bf16 needing f32, groups
that do not flatten to one stride) is first written to a canonical scratch copy by a loop
kernel. A result the
kernel cannot write in place (another dtype, a layout that interleaves the groups) goes to
scratch and is laid out by one more loop kernel; a column-major result is computed as
C^T = B^T A^T instead. An A that a row prologue computes (a fused layer norm) runs in chunks of
rows where it is large (``dot_chunks.py``; ``chunk_rows``), its temporary one chunk, not A.

Floats run the generated register-tiled GEMM (``gemm_tiled.py``), split over our thread pool
by (batch, row block, column block) items, with an output fusion's epilogue applied to each
block right after it is computed; a narrow product whose A has contiguous rows runs as
C^T = B^T A^T (``_computed_transposed``). Every seed workload product alone, one thread, GFLOP/s
of CPU time, generated / numpy's OpenBLAS with this machine's OPENBLAS_CORETYPE=Haswell
OPENBLAS_L2_SIZE=512 / without them (AVX-512 Xeon, shared and loaded, ``bench/gemm_shapes.py``):
1024x512x512 159/108/167, ffn1 1024x512x2048 166/111/171, ffn2 1024x2048x512 153/111/157,
attention 128 x 64x64x64 156/85/162, 32x512x1024 160/93/101, 32x1024x512 151/94/109,
32x512x256 157/95/119, 128x784x512 181/114/149, 128x512x10 91/55/77, 512x128x10 (A^T)
122/64/125, 128x10x512 (B^T) 111/70/81, 784x128x512 (A^T) 192/114/167, 16384x512x512
174/109/160: ahead of OpenBLAS as the machine sets it everywhere, within a few percent of its
best (unset) on the large square products. ``blas`` (``blas.py``: the optional scipy-openblas32,
one ?gemm call per item, BLAS kept to one thread inside each) runs only when
``HLO_CPU_GEMM=blas`` asks for it.

``HLO_CPU_GEMM=generated`` (the default, also ``auto``) selects the generated kernel and
``HLO_CPU_GEMM=blas`` the optional BLAS (an error naming the package where it is not
installed; ``python -m hlo.backends.cpu.gemm_profile`` times a workload's kernels next to
numpy's own BLAS). Integers and pred use a generated i-k-j loop
kernel over canonical copies.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import llvmlite.ir as ir
import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Region, Value
from hlo.ir.types import TensorType
from hlo.ir.types import bf16 as BF16_T
from hlo.ir.types import f32 as F32_T
from hlo.ir.types import f64 as F64_T
from hlo.runtime.cpu import target as _target
from hlo.runtime.steps import BufRef

from .. import llvm_util as U
from .. import scalar_ops
from ..elemental import SUM_BLOCK
from ..kernel_emitter import physical_order
from ..llvm_util import F32, F64, I32, PTR, for_range, i64
from . import dot_chunks
from .blas import BLAS_PACKAGE, find_blas, gemm_mode
from .gemm_tiled import L2_FRACTION, SMALL_ITEM_TILES, emit_tiled_gemm, register_tile, vector_lanes
from .gemm_tiled import supports as tiled_supports
from .gemm_view import MatrixView, block_item, canonical_view, matrix_view
from .kernels import Codegen, KernelBuilder, Root, collect_reads, emit_loop_kernel, make_emitter

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112
_ELEMENTWISE = op_table.with_trait(op_table.ELEMENTWISE)
# Products under this many flops run on one thread, as one item per matrix: ~5-10 us of work
# at the single-core rate, a few times what handing half of it to a pool thread costs now that
# idle workers watch for the next job before sleeping (it was 1 << 22 before: the train step's
# N=10 products, 1.3 MFLOP each, went 34-37 -> 22 us, the whole step 1.54 -> 1.50 ms).
GEMM_PARALLEL_MIN_FLOPS = 1 << 19
# A product of at most STORE_BOUND_K multiply-adds per element of C is bound by writing C: its
# grid keeps C's rows whole (``_blocks``'s ``whole``), as a product whose epilogue reads C back
# does. 128 x 10 x 512 (the train step's backward g @ w2^T), 2 threads of an AVX-512 Xeon:
# 21.9 us as 1 x 4 blocks (two threads writing halves of the same rows), 9.8 as 4 x 1; one
# thread 11.0.
STORE_BOUND_K = 32


def chunk_rows(M: int, K: int, itemsize: int, threads: int) -> Optional[int]:
    """Rows of A per chunk (whole register tiles for each thread), or None where the product
    does not have two chunks (``dot_chunks.py``)."""
    MR, _ = register_tile()
    T = max(1, threads)
    row = K * itemsize
    budget = dot_chunks.CHUNK_BYTES
    if budget is None:   # each thread's share of the chunk in its L2, as the GEMM's own row chunks
        budget = int(T * _target.cache_bytes(2, 1 << 20) * L2_FRACTION)
    unit = T * MR
    rows = max(unit, budget // max(1, row) // unit * unit)
    return rows if M >= 2 * rows else None


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


def _group_index_fn(groups: Sequence[Sequence[Tuple[int, int]]], rank: int):
    """index_fn mapping a canonical index (one entry per group) to the original index; each
    group lists (original dim, size) in row-major order."""

    def fn(b, cidx):
        out = [None] * rank
        for g, ci in zip(groups, cidx):
            rem = ci
            for k in range(len(g) - 1, -1, -1):
                d, n = g[k]
                if k == 0:
                    out[d] = rem
                else:
                    out[d] = b.urem(rem, i64(n))
                    rem = b.udiv(rem, i64(n))
        for d in range(rank):
            if out[d] is None:
                out[d] = i64(0)
        return tuple(out)

    return fn


def _canon_value(t: TensorType) -> Value:
    """A stand-in value for a canonical scratch buffer (read by loop kernels)."""
    return Region([t], name="canonical").args[0]


def lower_dot(lw, op, dest: BufRef, env: Dict[Value, BufRef], epilogue: Optional[Value] = None) -> bool:
    """Append the steps computing ``op`` into ``dest``. With ``epilogue`` (an output fusion's
    root that reads the dot only at its own index, to be stored in ``dest`` as well), the
    epilogue is applied to each block right after the BLAS call that produced it, while the
    block is in cache; returns True if it was (else the caller runs it as its own kernel)."""
    cg: Codegen = lw.cg
    lhs, rhs = op.operands
    out = op.results[0]
    a = op.attrs
    lb, rb = list(a.get("lhs_batching_dimensions", ())), list(a.get("rhs_batching_dimensions", ()))
    lc, rc = list(a.get("lhs_contracting_dimensions", ())), list(a.get("rhs_contracting_dimensions", ()))
    lfree = [d for d in range(lhs.type.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.type.rank) if d not in rb and d not in rc]
    Bn = _prod(lhs.shape[d] for d in lb)
    M = _prod(lhs.shape[d] for d in lfree)
    K = _prod(lhs.shape[d] for d in lc)
    N = _prod(rhs.shape[d] for d in rfree)
    bsizes = [lhs.shape[d] for d in lb]
    et = lhs.dtype
    # the BLAS is looked up (and its library opened) only where a product may call it: opening
    # OpenBLAS starts its threads, which spin for ~0.1 s and took the second core from the
    # first calls of every program (32 x 512 x 1024 ran at 230-300 us a call for its first
    # ~0.1 s, against 120-130 after)
    blas = find_blas() if et.is_float and gemm_mode() == "blas" else None
    if et.is_float:
        comp = F64_T if et.name == "f64" else F32_T
        kind = choose_gemm(blas, Bn, M, N, K)
    else:
        comp = out.dtype
        kind = "loop"
    # bf16 x bf16 on a CPU with vdpbf16ps: operands stay bf16, pairs of k per instruction
    pairs = kind == "tiled" and et.name == "bf16" and rhs.dtype.name == "bf16" and bf16_pairs()
    in_comp = BF16_T if pairs else comp
    what = f"dot_general [{Bn}x{M}x{K}] x [{Bn}x{K}x{N}] {et}->{out.dtype} ({kind}{', bf16 pairs' if pairs else ''})"
    if out.type.size == 0:
        return False
    if K == 0 or Bn * M * N == 0:
        zero = np.zeros(out.type.shape, out.dtype.np_dtype)
        lw.steps.append(lw.copy_step(dest, cg.const_ref(zero), out.type.nbytes))
        return False
    if et.is_float and M == 1 and N == 1 and K >= SUM_BLOCK and kind != "blas":
        # dot products (a batch of them): a reduction in all but name. Computed element by
        # element, the contraction sums in blocks with f64 totals (``elemental.SUM_BLOCK``);
        # the GEMM's one-element tile added K / kc block totals into C in f32 (a 4 x 2^18
        # batch of dots of values near 1: 8.6e-4 relative error -> 3e-8)
        lw.steps.append(emit_loop_kernel(cg, [Root(out, dest, out.type)], env, name="dot_products",
                                         what=what.replace(f"({kind}", "(blocked sums")))
        return False

    def canonical(v: Value, groups_plain, canon_shape) -> MatrixView:
        """A row-major [B, R, C] copy of an operand (in the compute type)."""
        t = v.type
        ct = TensorType(canon_shape, in_comp)
        ref = lw.scratch(ct.nbytes)
        groups = [[(d, t.shape[d]) for d in g] for g in groups_plain]
        root = Root(v, ref, ct, _group_index_fn(groups, t.rank))
        if v.op is not None and v.op.name == "concatenate" and [d for g in groups_plain for d in g] == list(range(t.rank)):
            # already in the product's order (a convolution's im2col, passes/conv_gemm.py): written
            # at its own index, so that its rows go operand by operand (concat_rows.py)
            root = Root(v, ref, TensorType(t.shape, in_comp))
        lw.steps.append(emit_loop_kernel(cg, [root], env, name="dot_operand", what=f"canonical {ct} for dot operand"))
        return canonical_view(ref, bsizes, *canon_shape[1:])

    def operand(v: Value, groups, canon_shape, role) -> MatrixView:
        """The operand read in place when it is a strided view of a buffer a GEMM can read,
        else a canonical copy."""
        if kind != "loop" and v.dtype == in_comp:
            mv = matrix_view(v, env, *groups)
            if mv is not None and _readable(kind, mv, role) and not (pairs and mv.cs not in (1, None)):
                return mv
        if (role == "a" and kind == "tiled" and not pairs and _narrow(comp, M, N)
                and groups[1] and _minor_dimension(v, env) == groups[1][-1]):
            # copied as A^T ([B, K, M]), so that the product runs transposed (see there), where
            # that copy reads A's rows as they lie (A's physically minor dimension is a row
            # dimension: the backward pass's relu(h)^T); transposing a row-major A on the way
            # cost more than the transposed product saves (the train step's relu(h) @ w2,
            # 128 x 512 x 10, one thread: 66 us this way, 20 us as it lies)
            return canonical(v, [groups[0], groups[2], groups[1]],
                             (canon_shape[0], canon_shape[2], canon_shape[1])).transposed()
        return canonical(v, groups, canon_shape)

    # A computed row by row (a fused layer norm): in chunks of rows where it is large
    # (``dot_chunks.py``), else whole into a scratch of its own, as a row prologue
    ro = lw.row_operands.pop(lhs, None) if getattr(lw, "row_operands", None) else None
    rows = None
    if ro is not None:
        if kind == "tiled" and not pairs and lhs.dtype == in_comp and lhs is not rhs:
            rows = chunk_rows(M, K, lhs.dtype.itemsize, cg.threads)
        if rows is not None:
            env[lhs] = BufRef("arena", 0, 0, rows * K * lhs.dtype.itemsize)   # to look at the view
            mv = matrix_view(lhs, env, lb, lfree, lc)
            if mv is None or mv.rs != K or mv.cs not in (1, None) or _computed_transposed(comp, mv, M, N):
                rows = None
            del env[lhs]
        if rows is None:
            ro.whole(lw, lhs, env)
        else:
            env[lhs] = lw.scratch(rows * K * lhs.dtype.itemsize)
            what += f", A by rows in chunks of {rows}"
    A = operand(lhs, [lb, lfree, lc], (Bn, M, K), "a")
    Bv = operand(rhs, [rb, rc, rfree], (Bn, K, N), "b")
    nb = len(lb)
    ogroups = [list(range(nb)), list(range(nb, nb + len(lfree))),
               list(range(nb + len(lfree), out.type.rank))]
    C = None
    if out.dtype == comp and not any(dest == r or dest.overlaps(r) for r in (A.ref, Bv.ref)):
        C = matrix_view(out, {out: dest}, *ogroups)
        if kind == "loop" and C is not None and C != canonical_view(dest, bsizes, M, N):
            C = None
        if C is not None and not _readable(kind, C, "c"):
            C = None
    direct = C is not None
    c_t = TensorType((Bn, M, N), comp)
    if not direct:
        C = canonical_view(lw.scratch(c_t.nbytes), bsizes, M, N)
    fused = False
    if kind != "loop":
        epi = None
        if epilogue is not None and direct:
            env2 = dict(env)
            env2[out] = dest
            epi = (epilogue, env2, [len(lb), len(lfree), len(rfree)])
            fused = True
        if kind == "blas":
            lw.steps.append(_blas_kernel(cg, blas, comp, C, A, Bv, Bn, M, N, K, what, epi))
        elif not pairs and _computed_transposed(comp, A, M, N):
            lw.steps.append(emit_tiled_gemm(
                cg, comp, C.transposed(), Bv.transposed(), A.transposed(), Bn, N, M, K,
                _blocks(cg, Bn, N, M, K, _whole(epi, K, True)), what + ", as C^T = B^T A^T", epi,
                lambda kb, em, e, c, bi, m0, rows, n0, cols:
                    _block_epilogue(kb, em, e, c, bi, n0, cols, m0, rows)))
        elif rows is not None:
            dot_chunks.emit_chunks(lw, ro, lhs, env, rows, M, lambda m, first: emit_tiled_gemm(
                cg, comp, C, A, Bv, Bn, m, N, K, _blocks(cg, Bn, m, N, K, _whole(epi, K, False)),
                what, epi, _block_epilogue, first_row=first))
        else:
            lw.steps.append(emit_tiled_gemm(cg, comp, C, A, Bv, Bn, M, N, K,
                                            _blocks(cg, Bn, M, N, K, _whole(epi, K, False)), what,
                                            epi, _block_epilogue, pairs=pairs))
    else:
        lw.steps.append(_loop_gemm_kernel(cg, comp, C.ref, A.ref, Bv.ref, Bn, M, N, K, what))
    if not direct:
        cv = _canon_value(c_t)
        groups = [[(d, out.shape[d]) for d in g] for g in ogroups]

        def out_to_canon(b, idx):
            res = []
            for g in groups:
                lin = i64(0)
                for d, n in g:
                    lin = b.add(b.mul(lin, i64(n)), idx[d])
                res.append(lin)
            return tuple(res)

        env2 = dict(env)
        env2[cv] = C.ref
        lw.steps.append(emit_loop_kernel(cg, [Root(cv, dest, out.type, out_to_canon)], env2,
                                         name="dot_result", what=f"dot result -> {out.type}"))
    return fused


# A narrow product (N under a panel, its vectors at most this full) whose A has its rows
# contiguous (A^T in memory, as in the backward pass's h^T @ dlogits, or A copied so when it
# needs a copy anyway, e.g. a fused ReLU mask) is computed as
# C^T = B^T A^T: vectors along M, every lane used, B^T's few rows as the register tile's rows,
# A^T's rows filling the panels in place; C is written by columns (scatter). One thread, AVX-512
# Xeon, 512 x 128 x 10: 83 -> 111-121 GFLOP/s of CPU time (numpy's OpenBLAS with no OPENBLAS_*
# variables: 96-136 across runs; with them 64).
TRANSPOSE_MAX_LANE_USE = 0.75


def _narrow(comp, M: int, N: int) -> bool:
    """Whether a product would rather run as C^T = B^T A^T, given A's rows contiguous."""
    _, nv = register_tile()
    w = vector_lanes(comp)
    use = N / (-(-N // w) * w)
    return N < nv * w and use <= TRANSPOSE_MAX_LANE_USE and M >= nv * w


def _minor_dimension(v: Value, env) -> Optional[int]:
    """The dimension of ``v`` along which computing it elementally reads its buffers' physically
    minor dimension: ``v``'s own for a buffer, followed back through transposes and elementwise
    ops (the first operand that resolves; constants and broadcasts do not); None where unknown."""
    if v in env:
        return physical_order(v.type)[-1] if v.type.rank else None
    op = v.op
    if op is None:
        return None
    if op.name == "transpose":
        d = _minor_dimension(op.operands[0], env)
        perm = list(op.attrs["permutation"])
        return perm.index(d) if d is not None else None
    if op.name in _ELEMENTWISE:
        for x in op.operands:
            if x.type.shape == v.type.shape:
                d = _minor_dimension(x, env)
                if d is not None:
                    return d
    return None


def _computed_transposed(comp, A: MatrixView, M: int, N: int) -> bool:
    return _narrow(comp, M, N) and A.rs == 1 and A.cs is not None


def choose_gemm(blas, Bn: int, M: int, N: int, K: int) -> str:
    """Which kernel runs a floating-point product: the generated "tiled" GEMM (see the module
    docstring), unless ``HLO_CPU_GEMM=blas`` asks for the optional BLAS (``blas.py``)."""
    if gemm_mode() != "blas":
        return "tiled"
    if blas is None:
        raise RuntimeError(
            f"HLO_CPU_GEMM=blas, but no BLAS is installed: the BLAS path needs the optional "
            f"dependency {BLAS_PACKAGE} (pip install 'hlo[blas]'); numpy's bundled OpenBLAS is "
            f"not used. Unset HLO_CPU_GEMM to run the generated GEMM.")
    return "blas"


# CPUs (LLVM names, by prefix) whose vdpbf16ps multiplies bf16 pairs faster than widening to
# f32 and using FMAs: AMD Zen 4 / Zen 5 run it at the FMA's instruction rate, twice its
# flops. Not Intel's: on this project's AVX-512 Xeon (Sapphire Rapids class) one vdpbf16ps
# took ~5 FMAs' time, and 1024 x 512 x 512 ran at 59 GFLOP/s in pairs against 158 widened.
BF16_PAIRS_CPUS = ("znver",)


def bf16_pairs() -> bool:
    """Whether bf16 x bf16 products run on vdpbf16ps (AVX-512 BF16, 512-bit vectors, a CPU of
    ``BF16_PAIRS_CPUS``); elsewhere their operands are widened to f32 copies first."""
    h = _target.host()
    return (h.vector_bits == 512 and h.has("avx512bf16")
            and h.cpu.startswith(BF16_PAIRS_CPUS))


def _readable(kind: str, v: MatrixView, role: str) -> bool:
    """Whether a kernel of ``kind`` reads operand ``role`` ("a", "b") or writes the result
    ("c") in place: BLAS needs one contiguous dimension in each; the tiled kernel needs C's
    columns contiguous and reads A and B with any strides."""
    if kind == "blas":
        return v.blas_form() is not None
    return role != "c" or tiled_supports(v, v, v)


def _whole(epi, K: int, transposed: bool) -> str:
    """``_blocks``'s ``whole`` for a product with epilogue ``epi`` (or None) and contraction
    ``K``, computed transposed or not: C's rows (its columns, when transposed) are kept whole
    where an epilogue reads C back or the product is bound by writing C (``STORE_BOUND_K``)."""
    if epi is None and K > STORE_BOUND_K:
        return ""
    return "cols" if transposed else "rows"


def _blocks(cg: Codegen, Bn: int, M: int, N: int, K: int = 0, whole: str = "",
            panels: bool = True):
    """(rows, cols) per parallel item. A batch with enough matrices to keep every thread busy
    takes whole matrices. Otherwise each matrix is cut into a grid of blocks, one per thread,
    shaped to pack the least: every ?gemm call packs its block of A (rows x K) and of B (K x cols), so a
    grid of mb x nb blocks packs nb*M*K + mb*K*N elements. (The earlier fixed split, 8 row
    blocks of a tall product, packed B 8 times; this grid measured 8% faster on
    ln_linear_gelu_res' 16384 x 512 x 512, 2 threads of an AVX-512 Xeon, and the same on
    1024 x 512 x 512.) Of grids that pack the same, the one with fewer column blocks (rows as
    wide as the product) wins: each item then reads its rows of A once, not once per column
    block; the FFN's 1024 x 2048 x 512 (a blocked contraction) as 4 x 1 blocks ran at 165-169
    GFLOP/s of one thread's CPU time, as 2 x 2 at 151-158 (1024 x 512 x 512 as 4 x 1 and
    1024 x 512 x 2048 as 2 x 2: the same as before within noise). One block per thread, not
    two (a spare each, for a thread slowed by other work): when the pool still handed blocks
    out through one atomic counter, with two each a thread got other blocks from call to call
    and read their B from the other core's L2 or from L3. Product kernels in the program, 2
    threads of an AVX-512 Xeon, both grids built in one process and timed in alternation:
    simple_mlp 246 -> 253 GFLOP/s, linear_relu 256 -> 264, mlp_train_step 291 -> 296; the
    transformer layer and ln_linear_gelu_res the same.

    On the generated GEMM (``panels``), a product of a few row tiles (at most
    ``gemm_tiled.SMALL_ITEM_TILES``, whose contraction is blocked to keep each panel in L1) is
    cut into a block per panel of columns instead, its
    rows whole: a thread then runs every block of the contraction on one panel while that
    panel's C stays in L1, where a block of several panels had read its C back from L2 for
    each. The pool gives every thread the same contiguous range of blocks from call to call.
    linear_relu's products in the program, 2 threads, one process in alternation: 263 -> 293
    GFLOP/s; simple_mlp and the train step the same.

    ``whole`` ("rows" or "cols"): for a product whose epilogue reads its C block back
    (``_block_epilogue``), or whose C takes few multiply-adds an element (``STORE_BOUND_K``),
    and whose rows (columns, when it is computed transposed) lie contiguous in memory, a grid
    that divides them costs M * N / 2 elements more. Where two
    threads write the two halves of each row at once, the epilogue's pass over a block meets
    lines that the other core holds modified (the hardware prefetchers read ahead across the
    block's edge): the train step's 784 x 128 x 512 with the SGD update fused, 2 threads of an
    AVX-512 Xeon, took 0.48 ms as 2 x 2 blocks and 0.38 as 4 x 1 (the product alone 0.32 and
    0.33; with a plain scale epilogue 0.48 and 0.33), about 0.25 ns per element of C where a
    packed element costs about 0.5. (Measured with 4 blocks; its forward 128 x 784 x 512, bias
    and relu, kept column blocks: as 4 x 1 it packed B's 784 x 512 four times, 0.37 -> 0.50
    ms.)"""
    T = cg.threads
    if T <= 1 or Bn >= 2 * T or 2 * Bn * M * N * max(K, 1) < GEMM_PARALLEL_MIN_FLOPS:
        return M, N
    want = -(-T // Bn)
    mr, nv = register_tile()
    panel = nv * vector_lanes(F32_T)
    if panels and M <= SMALL_ITEM_TILES * mr and N >= T * panel and whole != "cols":
        return M, panel   # a product of a few row tiles: a block per panel (see above)
    grids = []   # (cost, -row blocks, rows, cols)
    for mb in range(1, want + 1):
        if want % mb:
            continue
        nb = want // mb
        rows = -(-M // mb)
        cols = -(-N // nb)
        rows = -(-rows // mr) * mr if mb > 1 else M    # whole register tiles
        cols = -(-cols // panel) * panel if nb > 1 else N
        if rows * (mb - 1) >= M or cols * (nb - 1) >= N:
            continue                                  # fewer blocks than asked for: skip
        cost = nb * M * max(K, 1) + mb * max(K, 1) * N
        if (whole == "rows" and nb > 1) or (whole == "cols" and mb > 1):
            cost += M * N // 2   # the epilogue's pass over C meets the other core's lines
        # a tie in cost: the fewer column blocks (see above), so the later grid
        grids.append((cost, -mb, rows, cols))
    if not grids:
        return M, N
    return min(grids)[2:]


def _blas_kernel(cg, blas, comp, C: MatrixView, A: MatrixView, Bv: MatrixView, Bn, M, N, K, what, epi=None):
    """One kernel calling ?gemm per (batch, block) item: C[b] = A[b] x B[b], each operand a
    strided view. A result whose rows are contiguous (a column-major C) is computed as
    C^T = B^T A^T."""
    cg.uses_blas = True
    swapped = C.blas_form()[0]
    if swapped:
        A, Bv, C = Bv.transposed(), A.transposed(), C.transposed()
        M, N = N, M
    ta, lda = A.blas_form()
    tb, ldb = Bv.blas_form()
    _, ldc = C.blas_form()
    rsA = (A.rs or 0) if not ta else 1   # element step of one row of A
    csB = (Bv.cs or 0) if tb else 1     # element step of one column of B
    rsC = C.rs or 0
    ity = ir.IntType(blas.int_bits)
    fty = F64 if comp.name == "f64" else F32
    es = comp.itemsize
    gemm = cg.ctx.declare(blas.dgemm if comp.name == "f64" else blas.sgemm, U.VOID,
                          [I32, I32, I32, ity, ity, ity, fty, PTR, ity, PTR, ity, fty, PTR, ity])
    refs, writes = [C.ref, A.ref, Bv.ref], [True, False, False]
    if epi is not None:
        root, env2, _ = epi
        ereads, _ = collect_reads([root], env2)
        refs += [env2[v] for v in ereads]
        writes += [False] * len(ereads)
    kb = KernelBuilder(cg, "gemm", refs, writes)
    b = kb.b
    Cp, Ap, Bp = kb.ptr(C.ref), kb.ptr(A.ref), kb.ptr(Bv.ref)
    em = make_emitter(kb, ereads, env2) if epi is not None else None
    assert len(A.batch) == len(Bv.batch) == len(C.batch)
    batch_dims = [(n, sa, sb, sc) for (n, sa), (_, sb), (_, sc) in zip(A.batch, Bv.batch, C.batch)]
    MB, NB = _blocks(cg, Bn, M, N, K, _whole(epi, K, swapped), panels=False)
    mblocks, nblocks = -(-M // MB), -(-N // NB)
    per_batch = mblocks * nblocks
    n_ = lambda v: b.trunc(v, ity) if blas.int_bits < 64 else v
    with for_range(b, kb.lo, kb.hi, "item") as t:
        bi, oa, ob, oc, m0, n0, rows, cols = block_item(b, t, per_batch, nblocks, MB, NB, M, N, batch_dims)
        ptr_at = lambda base, off: b.gep(base, [b.mul(off, i64(es))], source_etype=U.I8)
        ap = ptr_at(Ap, b.add(oa, b.mul(m0, i64(rsA))))
        bp = ptr_at(Bp, b.add(ob, b.mul(n0, i64(csB))))
        cp = ptr_at(Cp, b.add(oc, b.add(b.mul(m0, i64(rsC)), n0)))
        b.call(gemm, [ir.Constant(I32, CBLAS_ROW_MAJOR),
                      ir.Constant(I32, CBLAS_TRANS if ta else CBLAS_NO_TRANS),
                      ir.Constant(I32, CBLAS_TRANS if tb else CBLAS_NO_TRANS),
                      n_(rows), n_(cols), ir.Constant(ity, K), ir.Constant(fty, 1.0),
                      ap, ir.Constant(ity, lda), bp, ir.Constant(ity, ldb), ir.Constant(fty, 0.0),
                      cp, ir.Constant(ity, ldc)])
        if epi is not None:
            if swapped:
                _block_epilogue(kb, em, epi, C.ref, bi, n0, cols, m0, rows)
            else:
                _block_epilogue(kb, em, epi, C.ref, bi, m0, rows, n0, cols)
    flops = 2 * Bn * M * N * K
    return kb.finish(Bn * per_batch, flops >= GEMM_PARALLEL_MIN_FLOPS, what)


def _block_epilogue(kb, em, epi, c_ref, bi, m0, rows, n0, cols):
    """The output fusion's root over one C block (rows m0.., cols n0.. of batch bi), in place."""
    from .kernels import _store, interleave_for
    root, env2, (nb, nl, nr) = epi
    _, nops = collect_reads([root], env2)
    b = kb.b
    shape = root.type.shape
    groups = [list(range(nb)), list(range(nb, nb + nl)), list(range(nb + nl, nb + nl + nr))]

    def split(v, dims):
        out = []
        for k in range(len(dims) - 1, -1, -1):
            n = shape[dims[k]]
            if k == 0:
                out.append(v)
            else:
                out.append(b.urem(v, i64(n)))
                v = b.udiv(v, i64(n))
        return list(reversed(out))

    bidx = split(bi, groups[0])
    with for_range(b, m0, b.add(m0, rows), "em") as m:
        em.push()
        midx = split(m, groups[1])
        with for_range(b, n0, b.add(n0, cols), "en", interleave=interleave_for(nops)) as n:
            em.push()
            idx = tuple(bidx + midx + split(n, groups[2]))
            _store(b, em, kb.ptr(c_ref), root.type, idx, em.at(root, idx))
            em.pop()
        em.pop()


def _loop_gemm_kernel(cg, comp, c_ref, a_ref, b_ref, Bn, M, N, K, what):
    """C[b,m,:] = sum_k A[b,m,k] * B[b,k,:], vectorized over the contiguous N."""
    kb = KernelBuilder(cg, "gemm_loop", [c_ref, a_ref, b_ref], [True, False, False])
    b = kb.b
    C, A, Bp = kb.ptr(c_ref), kb.ptr(a_ref), kb.ptr(b_ref)
    zero = U.reg_constant(comp, 0)
    with for_range(b, kb.lo, kb.hi, "row") as t:
        bi = b.udiv(t, i64(M))
        crow = b.mul(t, i64(N))
        with for_range(b, 0, N, "n0") as n:
            U.store_reg(b, zero, U.elem_ptr(b, C, comp, b.add(crow, n)), comp)
        with for_range(b, 0, K, "k") as k:
            av = U.load_reg(b, U.elem_ptr(b, A, comp, b.add(b.mul(t, i64(K)), k)), comp)
            brow = b.add(b.mul(bi, i64(K * N)), b.mul(k, i64(N)))
            with for_range(b, 0, N, "n") as n:
                cp = U.elem_ptr(b, C, comp, b.add(crow, n))
                bv = U.load_reg(b, U.elem_ptr(b, Bp, comp, b.add(brow, n)), comp)
                cv = U.load_reg(b, cp, comp)
                if comp.is_complex:
                    s = scalar_ops.binary(cg.ctx, b, "add", comp, cv,
                                          scalar_ops.binary(cg.ctx, b, "multiply", comp, av, bv))
                elif comp.is_float:
                    prod = b.fmul(av, bv, flags=("contract",))
                    s = b.fadd(cv, prod, flags=("contract",))
                elif comp.is_pred:
                    s = b.or_(cv, b.and_(av, bv))
                else:
                    s = b.add(cv, b.mul(av, bv))
                U.store_reg(b, s, cp, comp)
    flops = 2 * Bn * M * N * K
    return kb.finish(Bn * M, flops >= GEMM_PARALLEL_MIN_FLOPS, what)
