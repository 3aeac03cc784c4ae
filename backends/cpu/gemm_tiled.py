"""The generated floating-point GEMM: register tiles over a packed panel of B, epilogue per block.

C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] for f32/f64 operands given as strided views
(``gemm_view.MatrixView``). C's columns must be contiguous; A and B may have any strides. For
each panel of NV vectors' worth of B's columns, the kernel copies B[0:K, panel] into a
contiguous stack buffer (gathering a vector at a time when B's columns are not contiguous,
e.g. attention's k^T), then runs every row tile of the block over it; when B's rows are a page
or more apart, a few panels are packed at once, row by row of B. When B's columns are
contiguous and its rows less than a page apart, no separate copy runs: the panel's first tile
(a whole one; the rows left after the whole tiles run last) reads B, prefetching a few rows ahead,
and fills the panel as it computes, so the copy overlaps the arithmetic (with 32 rows, the
copy had cost a fifth of the time: 32 x 512 x 256 on 2 threads 135 -> 143 GFLOP/s,
32 x 1024 x 512 125 -> 136, 13 x 512 x 256 99 -> 109; filling from rows a page apart was
slower than the grouped copy, 131 -> 120). The micro-kernel keeps
an MR x NV-vector tile of C in registers for the whole K loop: per k, NV vector loads of the
panel, MR broadcasts of A, MR*NV fused multiply-adds. The tile follows the target's vector
width (``register_tile``): 6 x 4 zmm on AVX-512 (24 accumulators of the 32 registers), 6 x 2
ymm on AVX2 (12 of 16). Row tails run in tiles of the powers of two in their count; the columns left after the
whole panels run as one narrower panel whose last vector is masked (``llvm.masked.load`` /
``store``; N = 10 products went 10-13 -> 70-74 GFLOP/s on one thread), with taller tiles of as
many accumulators (``tile_rows``: 24 x 1 zmm), read from B in place when B is no wider than a
panel (one thread, AVX-512 Xeon: 128 x 512 x 10 79 -> 93 GFLOP/s, 512 x 128 x 10 with A
transposed 71 -> 99; numpy's OpenBLAS with no OPENBLAS_* variables 83 and 104).

Blocking (cache sizes from ``hlo.runtime.cpu.target.cache_bytes``): the contraction runs in
equal blocks of KC rows so that the panel (KC x NV vectors) stays in L1, each block after the
first adding to C; an item's rows run in chunks of MC so that the chunk's rows of A (and of C,
when the contraction is blocked) stay in half of L2 while the panels pass over them. One
thread of an AVX-512 Xeon (2 MiB L2), GFLOP/s before -> after: 1024 x 512 x 512 152 -> 178,
1024 x 2048 x 512 71 -> 168, 16384 x 512 x 512 27 -> 148 (numpy's OpenBLAS with no
OPENBLAS_* variables: 152, 148, 147). A is never packed: its rows stream through L1 and L2.
The panel lives on the stack of the product's kernel (KC x NV vectors, a few panels when grouped).

Compile time: the tiles of every product with the same dtype and the same access to B
(contiguous, gathered, bf16 pairs) and C (contiguous or strided columns) are one shared body
(``_Core``) with strides, offsets and the block's extent as run-time arguments (whether its
panels are filled or packed, whether a column tail reads B in place, whether a block adds to C,
too). The body holds every tile a product can need, so that it does not depend on the program:
it is library code (``gemm_library``), built once per machine and hlo version (read from the
library folder, ``hlo.runtime.cpu.code_library``) and linked into every program that calls it. Before, each module emitted a body with only
its products' tiles (the transformer layer's eight products: eight ~70 KB kernels of LLVM IR
before any sharing, two bodies of ~2,300 lines after), and every compile paid ~170-216 ms of
LLVM time for them. To keep the generic body small, row tails run in tiles of the powers of two
in their count and a column tail's last vector is masked at run time (the f32 body with B
contiguous: ~7,700 lines of LLVM IR, ~0.35 s to compile once).
"""
from __future__ import annotations

from typing import List, Tuple

import llvmlite.ir as ir

from hlo.runtime.cpu import target as _target
from hlo.runtime.cpu.target import cache_bytes

from .. import llvm_util as U
from ..llvm_util import F32, F64, I64, for_range, i64
from .gemm_library import CORE_FNTY, core_spec, request
from .gemm_view import MatrixView, block_item
from .kernels import KernelBuilder, collect_reads, make_emitter, vector_bits_for

# Register tiles (rows x vectors) by vector width. With 32 zmm registers (AVX-512) a 6 x 4 tile
# keeps 24 accumulators, 4 panel vectors and a broadcast in registers: per k, 10 loads for 24
# FMAs instead of 8 for 12 (6 x 2, the 16-register AVX2 tile). Measured on one thread (AVX-512
# Xeon, GFLOP/s, 1024 x 512 x 512 / 1024 x 2048 x 512 / 32 x 512 x 1024): 6x2 161/147/115,
# 8x3 172/139/124, 6x4 178/160/119, 12x2 167/114/116, 14x2 162/112/118.
TILES = {512: (6, 4), 256: (6, 2), 128: (6, 2)}
# A panel of B (K rows of the tile's columns) past PANEL_BLOCK_L2_FRACTION of L2 makes the
# contraction run in blocks of KC rows whose panel fits in L1, each adding to C (1024 x 2048 x
# 512 on one thread 101 -> 160-169 GFLOP/s). Smaller panels are read from L2 at the same
# speed, and blocking costs compile time (the tiles' loads of C: linear_relu's kernel 50 -> 66 ms).
PANEL_BLOCK_L2_FRACTION = 1 / 8
# Products of at most SMALL_ITEM_TILES register tiles of rows (simple_mlp's and linear_relu's 32
# rows) block their contraction so the panel stays in L1 whatever its size, and fill their
# panels as they compute even from B's rows a page apart. One thread, GFLOP/s of CPU time,
# before -> after: 32 x 1024 x 512 139 -> 160-165, 32 x 512 x 1024 136 -> 164, 32 x 512 x 256
# 162 -> 171. Not for taller products: 128 x 784 x 512 gained 181 -> 195, but its blocked tiles
# (loads of C) in a second shared body nearly doubled the train step's backend compile time
# (348 -> 628 ms); ffn1 (1024 x 512 x 2048, one thread) would re-copy B per chunk: 187 -> 161.
# Their whole row tiles, which read the panel from L1, also prefetch the next panel's rows of B
# into L2, a line of each row per tile (the last panel of a call: the first panel's rows of the
# next block of the contraction): the panel-filling tile otherwise waited on B from L3
# (simple_mlp's two 2 MiB weights do not stay in the two cores' L2). Product kernels in the
# program, 2 threads, both built in one process and timed in alternation: simple_mlp 230 -> 241
# GFLOP/s; linear_relu the same (its B stays in L2); one thread, 32 x 512 x 1024 231-240 ->
# 220-224 us. With a block per panel (``dot._blocks``) every call has one panel: its tiles
# prefetch the next block of the contraction (without, simple_mlp fell 243 -> 221), and those
# of an item's last block the next item's first panel (simple_mlp 245 -> 263). For every
# filled panel (128 x 784 x 512 too): no better.
SMALL_ITEM_TILES = 8
# A chunk's rows of A (MC x KC) and, when the contraction is blocked, its rows of C (MC x
# columns) stay in L2 while the panels pass over them: at most L2_FRACTION of the core's L2.
L2_FRACTION = 0.5


# A panel narrower than NV vectors (a product's last columns, all of a narrow product such as
# N = 10) runs taller tiles with the same number of accumulators: rows = MR * NV // nv, at most
# NARROW_MAX_ROWS. With 6 rows of one vector, the 6 FMA chains per k (4-cycle latency, 2 FMA
# pipes) left a quarter of the FMA slots empty.
NARROW_MAX_ROWS = 24


def register_tile(target=None):
    """(MR, NV): the register tile of the target's vector width."""
    bits = (target or _target.host()).vector_bits
    return TILES.get(bits, TILES[128])


def tile_rows(nv: int, target=None) -> int:
    """Rows of the register tile of a panel of ``nv`` vectors (``nv`` <= NV)."""
    MR, NV = register_tile(target)
    return max(MR, min(NARROW_MAX_ROWS, MR * NV // max(1, nv)))


def k_block(K: int, NV: int, W: int, itemsize: int, in_l1: bool = False) -> Tuple[int, int]:
    """(KC, number of blocks): the contraction in equal blocks whose panels fit in L1 (one
    block while the whole panel takes at most ``PANEL_BLOCK_L2_FRACTION`` of L2, unless
    ``in_l1``)."""
    row = NV * W * itemsize
    if K * row <= cache_bytes(2, 1 << 20) * PANEL_BLOCK_L2_FRACTION and not in_l1:
        return K, 1
    nk = max(1, -(-K * row // cache_bytes(1, 32 << 10)))
    return -(-K // nk), nk


def chunk_rows(MR: int, KC: int, cols: int, nk: int, itemsize: int, rows: int = 0) -> int:
    """Rows per chunk: A's MC x KC (and C's MC x cols when the contraction is blocked) in L2;
    the ``rows`` of a block in chunks of equal height (whole register tiles), not full chunks
    and a sliver of a few rows (1024 rows in 510 + 510 + 4: the last chunk packed B again for
    4 rows' work)."""
    per_row = (KC + (cols if nk > 1 else 0)) * itemsize
    budget = int(cache_bytes(2, 1 << 20) * L2_FRACTION)
    mc = max(MR, budget // max(1, per_row) // MR * MR)
    if rows > mc:
        n = -(-rows // mc)
        mc = -(-(-(-rows // n)) // MR) * MR
    return mc


# When B's rows are PANEL_GROUP_MIN_STRIDE bytes apart or more (a page: N >= 1024 f32), each
# row of a panel sits on its own page, and packing one panel at a time walks K pages per panel.
# Then up to PANEL_GROUP panels (at most PANEL_GROUP_BYTES of stack) are packed together, row
# by row of B: 32 x 512 x 1024 59 -> 74 GFLOP/s on one thread, 111 -> 139 on two (Zen 3; 8 panels: 130).
# Below that stride the group only moves the panel from L1 to L2 (192 x 512 x 256: 168 -> 152).
PANEL_GROUP = 4
PANEL_GROUP_BYTES = 256 << 10
PANEL_GROUP_MIN_STRIDE = 4096
# Rows of B ahead that a panel-filling tile prefetches (16 measured best of 16/32/64; 0: copy
# every panel up front instead).
FILL_PREFETCH_ROWS = 16


def vector_lanes(comp) -> int:
    return max(1, _target.host().vector_bits // (8 * comp.itemsize))


def supports(A: MatrixView, Bv: MatrixView, C: MatrixView) -> bool:
    """The kernel writes C's rows as vectors (contiguous columns; ``dot.lower_dot`` also has it
    write a transposed product's C by scattered columns); it reads B's rows as vectors when
    B's columns are contiguous, else (a transposed B, e.g. attention's k^T) it gathers them
    into the packed panel."""
    return C.cs in (1, None)


def _k_loop(b: ir.IRBuilder, K, init: List[ir.Value], step) -> List[ir.Value]:
    """``for k in [0, K): accs = step(k, accs)`` with the accumulators as loop phis."""
    fn = b.function
    pre = b.block
    head = fn.append_basic_block("k.head")
    body = fn.append_basic_block("k.body")
    done = fn.append_basic_block("k.done")
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, name="k")
    k.add_incoming(i64(0), pre)
    phis = []
    for v in init:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    b.cbranch(b.icmp_signed("<", k, K if isinstance(K, ir.Value) else i64(K)), body, done)
    b.position_at_end(body)
    new = step(k, phis)
    k1 = b.add(k, i64(1), flags=U.NSW)
    latch = b.block
    for p, v in zip(phis, new):
        p.add_incoming(v, latch)
    k.add_incoming(k1, latch)
    b.branch(head)
    b.position_at_end(done)
    return phis


# Every product with the same (dtype, B's access mode, C's access) calls one shared body
# (``_Core``): strides, offsets and the block's extent are its run-time arguments (its calling
# convention: ``gemm_library.CORE_ARGS``), and it holds the tiles of every row and column count.
# The body is library code (``gemm_library``): emitted into a module of its own, built once (kept
# in the library folder, ``hlo.runtime.cpu.code_library``), and linked into every program that calls it.


def core_knobs() -> tuple:
    """The settings of this module that the bodies' code depends on (besides the target): part
    of the key under which ``gemm_library`` names and keeps a body."""
    return register_tile(), NARROW_MAX_ROWS, FILL_PREFETCH_ROWS


def library_body(dtype: str, mode: str, c_strided: bool, a_unit: bool = True):
    """The ``gemm_library.CoreSpec`` of the body for ``dtype``, ``mode``, C's access and A's
    (``a_unit``: A's columns adjacent, its ``csA`` argument taken as 1), on the host target, with
    this module's settings (emitted by ``emit_core`` when compiled)."""
    return core_spec(dtype, mode, c_strided, a_unit, core_knobs(), emit_core)


def core_modes(comp, mode: str) -> Tuple[set, set]:
    """(fills, directs): the values of the ``fill`` argument's bits 0 and 1 that products of
    this dtype and mode can pass (``emit_tiled_gemm``); the body has code for those alone."""
    contig = mode == "contig" and FILL_PREFETCH_ROWS > 0
    return ({0, 1} if contig else {0}), ({0, 1} if mode == "contig" else {0})


class _BFloat(ir.types.Type):
    """LLVM's ``bfloat`` (llvmlite has no such type): the element of vdpbf16ps's operands."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloat)

    def __hash__(self):
        return hash("bfloat")


BFLOAT = _BFloat()


class _Core:
    """A program's declaration of a shared register-tiled body (the body itself is emitted by
    ``emit_core`` into a library module, ``gemm_library``): C[m0:m1, n0:n1] (+)= A[m0:m1, 0:kc]
    x B[0:kc, n0:n1] (offsets oa, ob, oc into A, B, C; strides as arguments), B's panels in
    ``panel`` (room for ``G`` panels of ``pstride`` vectors). ``mode``: "contig" (B's columns
    contiguous; bit 0 of argument ``fill``, for B's rows less than a page apart: the first
    tile of each panel copies it as it computes, else up to G panels are copied row by row of
    B first; bit 1, for B's rows no longer than a panel: the column-tail panel reads B in
    place; bit 2, for a small product: the whole tiles prefetch the next panel's rows into
    L2, the last panel's tiles the rows that the next call starts at, element ``nxt`` of B,
    none where it is -1), "gather" (B's columns strided: copied a vector gather at a time) or
    "bf16". ``acc`` != 0: add to C (a later block of a blocked contraction)."""

    def __init__(self, cg, comp, mode: str, c_strided: bool = False, a_unit: bool = True):
        spec = library_body(comp.name, mode, c_strided, a_unit)
        self.fn = cg.ctx.declare(spec.symbol, CORE_FNTY.return_type, CORE_FNTY.args)
        for a in self.fn.args[:4]:
            a.add_attribute("noalias")   # C is never A's or B's buffer (dot.lower_dot)
        cg.cores[spec.symbol] = spec
        request(spec)   # its object is read or compiled meanwhile, in the library's thread

    def call(self, b, *args):
        b.call(self.fn, [a if isinstance(a, ir.Value) else i64(a) for a in args])


def emit_tiled_gemm(cg, comp, C: MatrixView, A: MatrixView, Bv: MatrixView, Bn: int, M: int, N: int,
                    K: int, blocks: Tuple[int, int], what: str, epi=None, epilogue_fn=None,
                    pairs: bool = False, first_row=None):
    """A kernel over (batch, row block, column block) items: each chunk of an item's rows runs
    the shared body (``_Core``), a block of the contraction at a time, then ``epilogue_fn``
    (``dot._block_epilogue``) on the chunk while it is in cache. With ``first_row`` (a buffer
    holding one i64, r0; ``dot_chunks.py``) the kernel computes rows r0 .. r0+M-1 of a taller
    product (one batch), C and the epilogue at those rows, A a buffer of those rows alone."""
    W = vector_lanes(comp)
    MR, NV = register_tile()
    vty = ir.VectorType(F64 if comp.name == "f64" else F32, W)
    refs, writes = [C.ref, A.ref, Bv.ref], [True, False, False]
    ereads = []
    if epi is not None:
        root, env2, _ = epi
        ereads, _ = collect_reads([root], env2)
        refs += [env2[v] for v in ereads]
        writes += [False] * len(ereads)
    if first_row is not None:
        assert Bn == 1, "a product computed by rows from r0 has one batch"
        refs.append(first_row)
        writes.append(False)
    # an epilogue with a math routine (tanh-GELU) runs at the widest vectors, as elementwise
    # kernels do (``kernels.vector_bits_for``); the tiles are the shared body's, not affected
    kb = KernelBuilder(cg, "gemm_tiled", refs, writes,
                       vector_bits_for([epi[0]], epi[1]) if epi is not None else None)
    b = kb.b
    Cp, Ap, Bp = kb.ptr(C.ref), kb.ptr(A.ref), kb.ptr(Bv.ref)
    em = make_emitter(kb, ereads, epi[1]) if epi is not None else None
    rsA, csA = A.rs or 0, A.cs or 0
    ldb, ldc = Bv.rs or 0, C.rs or 0
    csB = Bv.cs or 0
    b_contig = Bv.cs in (1, None)
    batch_dims = [(n, sa, sb, sc) for (n, sa), (_, sb), (_, sc) in zip(A.batch, Bv.batch, C.batch)]
    MB, NB = blocks
    mblocks, nblocks = -(-M // MB), -(-N // NB)
    per_batch = mblocks * nblocks
    G, small = 1, False
    if pairs:   # bf16 operands: panels of k pairs, one vdpbf16ps per pair (see _emit_core)
        assert b_contig and A.cs in (1, None), "bf16 pairs read A's and B's rows as runs"
        KC, NK = k_block(K, NV, W, 2)
        KC += KC % 2 if NK > 1 else 0   # blocks of whole pairs
        NK = -(-K // KC)
        mode, fill = "bf16", 0
    else:
        KC, NK = k_block(K, NV, W, comp.itemsize)
        # a product of a few row tiles: its panels are blocked to stay in L1 (and filled as
        # they compute), where otherwise each of its few tiles streams them from L2
        if NK == 1 and M <= SMALL_ITEM_TILES * MR:
            kc1, nk1 = k_block(K, NV, W, comp.itemsize, in_l1=True)
            small = nk1 > 1
            if small:
                KC, NK = kc1, nk1
        mode = "contig" if b_contig else "gather"
        fill = int(b_contig and FILL_PREFETCH_ROWS > 0 and
                   (ldb * comp.itemsize < PANEL_GROUP_MIN_STRIDE or small))
        if b_contig and not fill and ldb * comp.itemsize >= PANEL_GROUP_MIN_STRIDE:
            G = max(1, min(PANEL_GROUP, PANEL_GROUP_BYTES // (KC * NV * W * comp.itemsize)))
    # A's columns adjacent (its rows read as runs: nearly every product) get a body of their
    # own, whose A loads step by a constant: with csA a run-time argument the transformer's
    # 1024 x 512 x 512 products ran ~5% slower on one thread (158-167 vs 171-180 GFLOP/s; a
    # body inside the program had had the constant propagated into it by LLVM)
    core = _Core(cg, comp, mode, C.cs not in (1, None), pairs or A.cs in (1, None))
    MC = chunk_rows(MR, KC, NB, NK, comp.itemsize, MB)
    # B's rows no longer than a whole panel: the column-tail panel reads B in place
    direct = int(b_contig and ldb <= NV * W and not pairs)
    # a small product's whole tiles prefetch the next panel's rows into L2 (bit 2 of ``fill``)
    ahead = int(b_contig and not pairs and small)
    with b.goto_entry_block():
        bpanel = b.alloca(vty, size=i64(KC * NV * G), name="bpanel")
        bpanel.align = 64
    r0 = b.load(kb.ptr(first_row), typ=I64) if first_row is not None else None

    with for_range(b, kb.lo, kb.hi, "item") as t:
        bi, oa, ob, oc, mb0, n0, brows, cols = block_item(b, t, per_batch, nblocks, MB, NB, M, N, batch_dims)
        if r0 is not None:   # rows of the whole product; A holds rows r0.. from its start
            mb0 = b.add(mb0, r0)
            oa = b.sub(oa, b.mul(r0, i64(rsA)))
        n1 = b.add(n0, cols)
        # the block's rows in chunks of MC, so that the chunk's rows of A stay in L2 while
        # every panel of B passes over them
        with for_range(b, i64(0), b.udiv(b.add(brows, i64(MC - 1)), i64(MC)), "mc") as mc:
            m0 = b.add(mb0, b.mul(mc, i64(MC)))
            left = b.sub(b.add(mb0, brows), m0)
            rows = b.select(b.icmp_signed("<", left, i64(MC)), left, i64(MC))
            m1 = b.add(m0, rows)
            strides = (KC * NV, G, rsA, csA, ldb, csB, ldc, fill | direct << 1 | ahead << 2, C.cs or 0)
            if NK == 1:
                core.call(b, Cp, Ap, Bp, bpanel, oa, ob, oc, m0, m1, n0, n1, K, 0, *strides, -1)
            else:
                with for_range(b, i64(0), i64(NK), "kb") as kk:
                    k0 = b.mul(kk, i64(KC))
                    left_k = b.sub(i64(K), k0)
                    kc = b.select(b.icmp_signed("<", left_k, i64(KC)), left_k, i64(KC))
                    nxt = i64(-1)
                    if ahead:
                        # where the next call starts: this item's next block of the contraction,
                        # after its last block the next item's first panel (none after the last)
                        last_k = b.icmp_unsigned("==", kk, i64(NK - 1))
                        next_block = b.add(b.add(ob, b.mul(b.add(k0, i64(KC)), i64(ldb))), n0)
                        next_item = b.select(b.icmp_unsigned("<", n1, i64(N)), b.add(ob, n1), i64(-1))
                        nxt = b.select(last_k, next_item, next_block)
                    core.call(b, Cp, Ap, Bp, bpanel, b.add(oa, b.mul(k0, i64(csA))),
                              b.add(ob, b.mul(k0, i64(ldb))), oc, m0, m1, n0, n1, kc,
                              b.zext(b.icmp_unsigned("!=", kk, i64(0)), I64), *strides, nxt)
            if epi is not None:
                epilogue_fn(kb, em, epi, C.ref, bi, m0, rows, n0, cols)

    flops = 2 * Bn * M * N * K
    from .dot import GEMM_PARALLEL_MIN_FLOPS
    return kb.finish(Bn * per_batch, flops >= GEMM_PARALLEL_MIN_FLOPS, what)


def _transpose(b: ir.IRBuilder, rows: List[ir.Value]) -> List[ir.Value]:
    """The transpose of a W x W block held as W vectors of W lanes (W a power of two): for
    d = W/2 .. 1, the off-diagonal d x d blocks of every 2d x 2d block swap places (row bit
    d <-> lane bit d), one two-input shuffle per output vector and stage."""
    W = len(rows)
    rows = list(rows)
    mask = lambda idx: ir.Constant(ir.VectorType(ir.IntType(32), W), [ir.Constant(ir.IntType(32), x) for x in idx])
    d = W // 2
    while d:
        lo = mask([p if not p & d else W + p - d for p in range(W)])
        hi = mask([p + d if not p & d else W + p for p in range(W)])
        for i in range(W):
            if not i & d:
                x, y = rows[i], rows[i + d]
                rows[i], rows[i + d] = b.shuffle_vector(x, y, lo), b.shuffle_vector(x, y, hi)
        d //= 2
    return rows


def emit_core(ctx, comp, fn: ir.Function, mode: str, c_strided: bool = False, a_unit: bool = False):
    """The body of a ``_Core`` (see there) into ``fn`` of the module of ``ctx`` (a
    ``ModuleContext``): tiles for every row count, whole panels and a column tail of each
    width (its last vector masked at run time), the code for each ``fill`` that products of
    ``mode`` can pass (``core_modes``), and adding to C. ``a_unit``: A's columns are adjacent
    (the ``csA`` argument is taken as 1). ``_CoreBody`` emits it, from the top: the columns'
    whole panels, each packed or filled and run over every row (``columns``, ``row_tiles``),
    then the column tail (``tail_panel``); the register tiles (``_Tile``); the copies of B into
    the panel (``pack``); the helpers for vectors, masks and pointers last."""
    body = _CoreBody(ctx, comp, fn, mode, c_strided, a_unit)
    body.columns()
    body.b.ret_void()


class _CoreBody:
    """What the emitters of a body share: its arguments (``gemm_library.CORE_ARGS``: the names
    are theirs), the types and tile sizes of its dtype and the target, the intrinsics it calls,
    and the run-time modes read from ``fill`` (each a Python constant where every product of
    the body passes the same, else an i1)."""

    def __init__(self, ctx, comp, fn: ir.Function, mode: str, c_strided: bool, a_unit: bool):
        self.ctx, self.comp, self.mode, self.c_strided = ctx, comp, mode, c_strided
        self._types(comp, mode)
        self._declare_intrinsics(ctx)
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        (self.Cp, self.Ap, self.Bp, self.bpanel, self.oa, self.ob, self.oc, self.m0, self.m1,
         self.n0, self.n1, self.kc, acc, self.pstride, self.G, self.rsA, self.csA, self.ldb,
         self.csB, self.ldc, self.fill, self.csC, self.nxt) = fn.args
        if a_unit:
            self.csA = i64(1)
        self._run_time_modes(acc)
        self.cur_panel = i64(0)  # which panel of the packed group the row tiles read

    def _types(self, comp, mode: str) -> None:
        self.fills, self.directs = core_modes(comp, mode)
        self.fty = fty = F64 if comp.name == "f64" else F32
        self.W = W = vector_lanes(comp)
        self.MR, self.NV = register_tile()
        self.vty = vty = ir.VectorType(fty, W)
        self.pairs = pairs = mode == "bf16"   # A and B bf16 (i16 bits), C and the accumulators f32
        self.b_contig = mode in ("contig", "bf16")
        self.ety = U.I16 if pairs else fty   # A's and B's elements
        if pairs:
            self.ivty = ir.VectorType(U.I32, W)    # a panel vector: W columns x a pair of k (2 bf16 each)
            self.bf_ty = ir.VectorType(BFLOAT, 2 * W)
        self.line_elems = max(1, 64 // comp.itemsize)            # a cache line of B's elements
        self.ahead_lines = max(1, self.NV * W // self.line_elems)  # lines in a row of a panel
        self.zero_v = ir.Constant(vty, [ir.Constant(fty, 0.0)] * W)
        self.shuf0 = ir.Constant(ir.VectorType(ir.IntType(32), W), [ir.Constant(ir.IntType(32), 0)] * W)
        self.undef_v = ir.Constant(vty, ir.Undefined)
        self.ivec = ivec = ir.VectorType(I64, W)
        self.lane_iota = ir.Constant(ivec, [i64(lane) for lane in range(W)])
        self.col_iota = [ir.Constant(ivec, [i64(v * W + lane) for lane in range(W)]) for v in range(self.NV)]

    def _declare_intrinsics(self, ctx) -> None:
        vty, W = self.vty, self.W
        self.fma_v = ctx.intrinsic("fma", vty, 3)
        if self.pairs:
            self.dot2 = ctx.declare(f"llvm.x86.avx512bf16.dpbf16ps.{32 * W}", vty, [vty, self.bf_ty, self.bf_ty])
        if self.b_contig:
            self.prefetch = ctx.declare("llvm.prefetch.p0", U.VOID, [U.PTR, U.I32, U.I32, U.I32])
            self.prefetch_args = [ir.Constant(U.I32, c) for c in (0, 3, 1)]  # read, keep (L1), data
            self.prefetch_l2_args = [ir.Constant(U.I32, c) for c in (0, 2, 1)]  # read, L2, data

    def _run_time_modes(self, acc) -> None:
        b, fill, fills = self.b, self.fill, self.fills
        # whether the first tile of each whole panel copies it from B (else the panel is packed
        # first): known when every product of this core does the same, else the argument says
        self.filling = (True if fills == {1} else False if fills == {0}
                        else b.icmp_unsigned("!=", b.and_(fill, i64(1)), i64(0)))
        # bit 2 of ``fill``: the whole tiles of a panel prefetch the next panel's rows of B into L2
        self.prefetching = (False if self.mode != "contig" else
                            b.icmp_unsigned("!=", b.and_(fill, i64(4)), i64(0)))
        self.accumulate = b.icmp_unsigned("!=", acc, i64(0))  # i1: add to C (a later block of K)

    # ---- the columns: whole panels, then the tail

    def columns(self) -> None:
        """C[m0:m1, n0:n1]: whole panels of NV vectors in groups of up to G (each group packed
        first unless its panels are filled by their first tiles), then the columns left as one
        narrower panel of nv vectors, its last vector masked to the 1..W columns there."""
        b, W, NV, G, filling = self.b, self.W, self.NV, self.G, self.filling
        n0, n1 = self.n0, self.n1
        cols = b.sub(n1, n0)
        panel = NV * W
        rem = b.urem(cols, i64(panel))
        n_panels_end = b.sub(n1, rem)
        npan = b.udiv(b.sub(n_panels_end, n0), i64(panel))
        with for_range(b, i64(0), b.udiv(b.add(npan, b.sub(G, i64(1))), G), "jg") as jg:
            first = b.mul(jg, G)
            left = b.sub(npan, first)
            count = b.select(b.icmp_signed("<", left, G), left, G)
            g0 = b.add(n0, b.mul(first, i64(panel)))
            if filling is not True:
                with b.if_then(b.not_(filling) if filling not in (None, False) else ir.Constant(ir.IntType(1), 1)):
                    self.pack(g0, NV, count)
            with for_range(b, i64(0), count, "jp") as jp:
                self.cur_panel = jp
                j0 = b.add(g0, b.mul(jp, i64(panel)))
                self.row_tiles(j0, NV, True, filling, ahead=self._next_panel_lines(j0, n_panels_end))
                self.cur_panel = i64(0)
        nvs = b.udiv(b.add(rem, i64(W - 1)), i64(W))
        lanes = b.sub(rem, b.mul(b.sub(nvs, i64(1)), i64(W)))
        self.by_height(nvs, list(range(1, NV + 1)), "ctail",
                       lambda nv: self.tail_panel(n_panels_end, nv, lanes))

    def _next_panel_lines(self, j0, n_panels_end):
        """What the whole tiles of the panel at j0 prefetch into L2 while they run from the
        panel in L1, a line per tile: (start, row stride) of the next whole panel's rows of B;
        the last panel's tiles prefetch where the next call starts (``nxt``); with nothing to
        fetch, the panel's own rows (in L1). None where the body never prefetches."""
        if self.prefetching is False:
            return None
        b, panel = self.b, self.NV * self.W
        nxt_panel = b.add(j0, i64(panel))
        last = b.icmp_unsigned(">", b.add(nxt_panel, i64(panel)), n_panels_end)
        tgt = b.select(last, self.nxt, b.add(self.ob, nxt_panel))
        on = b.and_(self.prefetching, b.icmp_signed(">=", tgt, i64(0)))
        return (b.select(on, self.elem_in(self.Bp, tgt), self.bpanel),
                b.select(on, self.ldb, i64(panel)))

    def tail_panel(self, j0, nv, lanes) -> None:
        """The columns after the whole panels: one narrower panel of ``nv`` vectors (the last
        one's first ``lanes`` lanes) with taller tiles (``tile_rows``), read from B in place when
        B's rows are contiguous and no longer than a whole panel (B is then already one dense
        panel), else copied to the panel first."""
        b, directs = self.b, self.directs
        mr = tile_rows(nv)
        direct = (True if directs == {1} else False if directs <= {0}
                  else b.icmp_unsigned("!=", b.and_(self.fill, i64(2)), i64(0)))
        if direct is True:
            self.row_tiles(j0, nv, False, lanes=lanes, mr=mr)
            return
        if direct is False:
            self.pack(j0, nv, lanes=lanes)
            self.row_tiles(j0, nv, True, lanes=lanes, mr=mr)
            return
        with b.if_then(b.not_(direct)):
            self.pack(j0, nv, lanes=lanes)
        # one set of tiles for both: they read B's rows in place or the panel's, from a start
        # and a row stride (elements) chosen at run time
        bsrc = (b.select(direct, self.elem_in(self.Bp, b.add(self.ob, j0)), self.bpanel),
                b.select(direct, self.ldb, i64(self.NV * self.W)))
        self.row_tiles(j0, nv, False, lanes=lanes, mr=mr, bsrc=bsrc)

    # ---- the rows of a panel

    def row_tiles(self, j0, nv, packed=False, filling=None, lanes=0, mr=None, bsrc=None, ahead=None):
        """Row tiles of ``mr`` (default MR) for the column panel at j0, then the 1..mr-1 rows
        left in tiles of the powers of two in their count, largest first (tiles of several rows
        keep independent accumulation chains, where one latency-bound chain per row would not;
        the powers of two keep the body, which has code for every count, small: a tile per
        remainder made the f32 body 37,000 lines of LLVM IR and 1.8 s of compile).
        ``filling`` (an i1, run time): the panel is still to be copied; then a first whole tile
        (or all the rows, fewer than a tile) copies it as it computes, and the rows left after
        the whole tiles run last, from the panel. (The rows left had copied it: a tile of 2 rows
        has too few multiply-adds per row of B to hide the copy's loads and stores; one thread
        of an AVX-512 Xeon, 32 x 512 x 256 52.7 -> 48.1 us, 32 x 512 x 1024 236 -> 225,
        128 x 784 x 512 639 -> 609; two threads the same within noise.)
        ``ahead``: (start, row stride) of the rows whose lines the whole tiles prefetch."""
        b, MR, m0, m1 = self.b, self.MR, self.m0, self.m1
        mr = MR if mr is None else mr
        start = m0
        if filling not in (None, False):
            rows = b.sub(m1, m0)
            first = b.select(b.icmp_unsigned("<", rows, i64(MR)), rows, i64(MR))

            def fill_tile(h):
                self.tile(m0, j0, h, nv, fill=True)
            fill_heights = list(range(1, MR + 1))
            if filling is True:
                self.by_height(first, fill_heights, "fill", fill_tile)
                start = b.add(m0, first)
            else:
                with b.if_then(filling):
                    self.by_height(first, fill_heights, "fill", fill_tile)
                start = b.select(filling, b.add(m0, first), m0)
        tail = b.urem(b.sub(m1, start), i64(mr))
        full_end = b.sub(m1, tail)
        with for_range(b, i64(0), b.udiv(b.sub(full_end, start), i64(mr)), "it") as it:
            tile_ahead = None
            if ahead is not None:   # whole tile ``it`` prefetches line it % LINES of each row
                line = b.mul(b.urem(it, i64(self.ahead_lines)), i64(self.line_elems))
                tile_ahead = (b.gep(ahead[0], [line], source_etype=self.ety), ahead[1])
            self.tile(b.add(start, b.mul(it, i64(mr))), j0, mr, nv, packed, lanes=lanes, bsrc=bsrc,
                      ahead=tile_ahead)
        at = full_end
        for h in reversed([1 << e for e in range((mr - 1).bit_length()) if 1 << e < mr]):
            with b.if_then(b.icmp_unsigned("!=", b.and_(tail, i64(h)), i64(0))):
                self.tile(at, j0, h, nv, packed, lanes=lanes, bsrc=bsrc)
            at = b.add(at, b.and_(tail, i64(h)))

    def by_height(self, height, heights, name, emit) -> None:
        """``emit(h)`` for the one of ``heights`` (compile-time tile heights) that ``height``
        (run time) equals: a tile specialized per height that can occur."""
        if not heights:
            return
        b = self.b
        fn = b.function
        done = fn.append_basic_block(name + ".done")
        sw = b.switch(height, done)
        for h in heights:
            blk = fn.append_basic_block(f"{name}{h}")
            sw.add_case(ir.Constant(I64, h), blk)
            b.position_at_end(blk)
            emit(h)
            b.branch(done)
        b.position_at_end(done)

    def tile(self, i0, j0, mr: int, nv: int, packed: bool = False, fill: bool = False,
             lanes=0, bsrc=None, ahead=None) -> None:
        """One register tile (``_Tile``, where the arguments are described)."""
        _Tile(self, i0, j0, mr, nv, packed, fill, lanes, bsrc, ahead).emit()

    # ---- copies of B into the panel

    def pack(self, j0, nv, npanels=None, lanes=0) -> None:
        """Copy B[0:K, j0:j0+nv*W] (``npanels`` consecutive panels of it) into the panel buffer
        (sequential reads for every row tile); gathered (one masked gather per vector) when B's columns
        are not contiguous. A group of panels is copied row by row of B, so each row of B is
        read as one run of G panels (one page walk, not G). ``lanes``: the last vector holds
        only that many columns (zeros after them)."""
        if self.pairs:
            return self.pack_pairs(j0, nv, lanes)
        b, W, ldb, kc = self.b, self.W, self.ldb, self.kc
        k_start = i64(0)
        if not self.b_contig:
            # B's columns strided but its rows contiguous (ldb == 1: a transposed operand, as
            # attention's k^T): whole W x W blocks are read as vectors and transposed in
            # registers; the element-by-element copy below takes only the rows left
            by_rows = b.icmp_unsigned("==", ldb, i64(1))
            whole = b.mul(b.udiv(kc, i64(W)), i64(W))
            k_start = b.select(by_rows, whole, i64(0))
            with b.if_then(by_rows):
                self.pack_transposed(j0, nv, npanels, lanes, whole)
        with for_range(b, k_start, kc, "pk") as k:
            src = b.add(self.ob, b.mul(k, ldb))
            if npanels is None:
                self._pack_row(k, src, i64(0), j0, nv, lanes)
            else:
                with for_range(b, i64(0), npanels, "pg") as p:
                    self._pack_row(k, src, p, b.add(j0, b.mul(p, i64(nv * W))), nv, lanes)

    def _pack_row(self, k, src, p, jp0, nv, lanes) -> None:
        """Row k of panel ``p`` (B's columns from jp0; the row starts at element ``src`` of B)."""
        b, W, Bp, comp = self.b, self.W, self.Bp, self.comp
        for v in range(nv):
            part = isinstance(lanes, ir.Value) and v == nv - 1   # the masked last vector
            if self.b_contig and part:
                x = self.masked("load", self.elem_in(Bp, b.add(b.add(src, jp0), i64(v * W))), lanes)
            elif self.b_contig:
                x = b.load(self.elem_in(Bp, b.add(b.add(src, jp0), i64(v * W))), typ=self.vty,
                           align=comp.itemsize)
            else:   # B's columns csB apart (the first ``lanes`` of them): one gather
                splat_i = self.splat_i
                cols = b.add(b.mul(b.add(splat_i(jp0), self.col_iota[v]), splat_i(self.csB)), splat_i(src))
                ptrs = b.gep(Bp, [cols], source_etype=self.fty)
                ptrs.type = ir.VectorType(U.PTR, W)   # llvmlite types a vector GEP as scalar
                x = self.strided("gather", ptrs, lanes if part else W)
            b.store(x, self.panel_at(k, v, p))

    def pack_transposed(self, j0, nv, npanels, lanes, whole) -> None:
        """B's rows 0..whole (a multiple of W) of the panels at j0, B's columns being runs in
        memory (column c at ob + c * csB): per W x W block, W vector loads (one per column;
        in a column tail's last vector, masked off past ``lanes``, an i64), a transpose in
        registers and W stores to the panel's rows, in place of W gathers of W lanes (a third
        of attention's q k^T time as scalar loads and inserts)."""
        b, W = self.b, self.W
        part = isinstance(lanes, ir.Value)
        with for_range(b, i64(0), b.udiv(whole, i64(W)), "pt") as kblk:
            k0 = b.mul(kblk, i64(W))

            def one(p, jp0):
                # the whole vectors in a loop (one copy of the block's code), then a masked one
                full = nv - 1 if part else nv
                if full:
                    with for_range(b, i64(0), i64(full), "pv", interleave=U.SCALAR_LOOP) as v:
                        self._transposed_block(k0, p, jp0, v, False, lanes)
                if part:
                    self._transposed_block(k0, p, jp0, i64(nv - 1), True, lanes)
            if npanels is None:
                one(i64(0), j0)
            else:
                with for_range(b, i64(0), npanels, "pg") as p:
                    one(p, b.add(j0, b.mul(p, i64(nv * W))))

    def _transposed_block(self, k0, p, jp0, v, tail, lanes) -> None:
        """The W x W block at B's row k0 of panel vector ``v`` (an i64) of panel ``p``;
        ``tail``: its columns past ``lanes`` read as 0."""
        b, W, Bp = self.b, self.W, self.Bp
        c0 = b.add(jp0, b.mul(v, i64(W)))
        cols = []
        for lane in range(W):
            at = self.elem_in(Bp, b.add(b.add(self.ob, b.mul(b.add(c0, i64(lane)), self.csB)), k0))
            if tail:   # all W rows of column ``lane``, or none
                n = b.select(b.icmp_unsigned("<", i64(lane), lanes), i64(W), i64(0))
                cols.append(self.masked("load", at, n))
            else:
                cols.append(b.load(at, typ=self.vty, align=self.comp.itemsize))
        for i, row in enumerate(_transpose(b, cols)):
            b.store(row, self.panel_at(b.add(k0, i64(i)), v, p))

    def pack_pairs(self, j0, nv, lanes) -> None:
        """bf16: panel row p holds B's rows 2p and 2p+1 interleaved, column by column (a pair
        per i32 lane: what vdpbf16ps multiplies by A's broadcast pair); a last single row is
        paired with zeros."""
        b, W, kc = self.b, self.W, self.kc
        half = ir.VectorType(U.I16, W)
        inter = ir.Constant(ir.VectorType(U.I32, 2 * W),
                            [ir.Constant(U.I32, i // 2 + (W if i % 2 else 0)) for i in range(2 * W)])
        zero_h = ir.Constant(half, [ir.Constant(U.I16, 0)] * W)
        with for_range(b, i64(0), b.lshr(b.add(kc, i64(1)), i64(1)), "pk") as p:
            k0 = b.mul(p, i64(2))
            has1 = b.icmp_signed("<", b.add(k0, i64(1)), kc)
            k1 = b.select(has1, b.add(k0, i64(1)), k0)     # a row that exists (zeroed below)
            for v in range(nv):
                part = isinstance(lanes, ir.Value) and v == nv - 1   # the masked last vector
                rows = []
                for k in (k0, k1):
                    ptr = self.elem_in(self.Bp, b.add(b.add(b.add(self.ob, b.mul(k, self.ldb)), j0), i64(v * W)))
                    if part:
                        mask = self.lane_mask(lanes)
                        ml = self.ctx.declare(f"llvm.masked.load.v{W}i16.p0", half,
                                              [U.PTR, U.I32, mask.type, half])
                        rows.append(b.call(ml, [ptr, ir.Constant(U.I32, 2), mask, zero_h]))
                    else:
                        rows.append(b.load(ptr, typ=half, align=2))
                hi = b.select(has1, rows[1], zero_h)
                b.store(b.bitcast(b.shuffle_vector(rows[0], hi, inter), self.ivty), self.panel_at(p, v))

    # ---- vectors, masks and pointers

    def elem(self, base, off):
        """An element of C (or of the accumulators' type)."""
        return self.b.gep(base, [off], source_etype=self.fty)

    def elem_in(self, base, off):
        """An element of A or B."""
        return self.b.gep(base, [off], source_etype=self.ety)

    def panel_at(self, k, v, p=None):
        """Vector ``v`` of row ``k`` of panel ``p`` (default: the one the row tiles read)."""
        b = self.b
        base = b.mul(p if p is not None else self.cur_panel, self.pstride)
        v = v if isinstance(v, ir.Value) else i64(v)
        return b.gep(self.bpanel, [b.add(base, b.add(b.mul(k, i64(self.NV)), v))], source_etype=self.vty)

    def splat_i(self, x):
        """A vector of W copies of the i64 ``x``."""
        b, ivec = self.b, self.ivec
        return b.shuffle_vector(b.insert_element(ir.Constant(ivec, ir.Undefined), x, ir.Constant(U.I32, 0)),
                                ir.Constant(ivec, ir.Undefined), self.shuf0)

    def lane_mask(self, lanes):
        """The first ``lanes`` lanes (an int, or an i64 known at run time only)."""
        W = self.W
        if isinstance(lanes, int):
            return ir.Constant(ir.VectorType(ir.IntType(1), W),
                               [ir.Constant(ir.IntType(1), int(lane < lanes)) for lane in range(W)])
        return self.b.icmp_unsigned("<", self.lane_iota, self.splat_i(lanes))

    def masked(self, op, ptr, lanes, value=None):
        """``llvm.masked.load`` / ``.store`` of the first ``lanes`` lanes of a vector at ``ptr``."""
        b, W, vty, ctx = self.b, self.W, self.vty, self.ctx
        mask = self.lane_mask(lanes)
        align = ir.Constant(U.I32, self.comp.itemsize)
        sfx = f"v{W}{'f64' if self.fty == F64 else 'f32'}.p0"
        if op == "load":
            fn = ctx.declare(f"llvm.masked.load.{sfx}", vty, [U.PTR, U.I32, mask.type, vty])
            return b.call(fn, [ptr, align, mask, self.zero_v])
        fn = ctx.declare(f"llvm.masked.store.{sfx}", U.VOID, [vty, U.PTR, U.I32, mask.type])
        return b.call(fn, [value, ptr, align, mask])

    def strided(self, op, ptrs, lanes, value=None):
        """``llvm.masked.gather`` / ``.scatter`` of the first ``lanes`` lanes (C's columns
        strided: a product computed transposed, see ``dot.lower_dot``; B's gathered columns
        in a column tail)."""
        b, W, vty, ctx = self.b, self.W, self.vty, self.ctx
        mask = self.lane_mask(lanes)
        align = ir.Constant(U.I32, self.comp.itemsize)
        sfx = f"v{W}{'f64' if self.fty == F64 else 'f32'}.v{W}p0"
        if op == "gather":
            fn = ctx.declare(f"llvm.masked.gather.{sfx}", vty, [ptrs.type, U.I32, mask.type, vty])
            return b.call(fn, [ptrs, align, mask, self.zero_v])
        fn = ctx.declare(f"llvm.masked.scatter.{sfx}", U.VOID, [vty, ptrs.type, U.I32, mask.type])
        return b.call(fn, [value, ptrs, align, mask])


class _Tile:
    """One register tile of a body: C[i0:i0+mr, j0:j0+nv*W] (+)= A[i0:i0+mr, 0:kc] x the
    panel's (or B's) rows 0:kc, its accumulators loop phis of the contraction loop. ``lanes``
    (an i64, 1..W, or 0: whole vectors): only that many lanes of the last vector (a column
    tail: masked loads and stores of C; its panel holds zeros past them); ``bsrc``: (start, row
    stride) of B's rows when they are read from B in place or from the panel, chosen at run
    time; ``packed``: B's columns j0.. were copied to the contiguous panel (row k at vectors
    k*NV ..); ``fill``: this tile reads them from B and copies them to the panel as it goes
    (prefetching ``FILL_PREFETCH_ROWS`` rows of B ahead); ``ahead``: (start, row stride) of the
    rows of which it prefetches a line each into L2."""

    def __init__(self, core: _CoreBody, i0, j0, mr: int, nv: int, packed: bool, fill: bool, lanes,
                 bsrc, ahead):
        self.core, self.i0, self.j0, self.mr, self.nv = core, i0, j0, mr, nv
        self.packed, self.fill, self.lanes, self.bsrc, self.ahead = packed, fill, lanes, bsrc, ahead

    def emit(self) -> None:
        """Start from zero (or from C, where the body adds to it), run the contraction, store C."""
        c, b, mr, nv = self.core, self.core.b, self.mr, self.nv
        self.arow = [b.add(c.oa, b.mul(b.add(self.i0, i64(r)), c.rsA)) for r in range(mr)]
        accs = self._k_loop(self._initial(c.zero_v, mr * nv))
        for acc, (p, n) in zip(accs, self.c_ptrs()):
            self.c_store(p, n, acc)

    def _initial(self, zero_v, count):
        """The accumulators' first values: zeros, or C's, where ``acc`` says to add to it."""
        c, b = self.core, self.core.b
        init = [zero_v] * count
        pre = b.block
        load_c = b.function.append_basic_block("cload")
        start = b.function.append_basic_block("cstart")
        b.cbranch(c.accumulate, load_c, start)
        b.position_at_end(load_c)
        loaded = [self.c_load(p, n) for p, n in self.c_ptrs()]
        b.branch(start)
        b.position_at_end(start)
        phis = []
        for z, ld in zip(init, loaded):
            ph = b.phi(z.type)
            ph.add_incoming(z, pre)
            ph.add_incoming(ld, load_c)
            phis.append(ph)
        return phis

    def _k_loop(self, init):
        """The contraction loop over the accumulators: a k at a time, or for bf16 a pair of k at
        a time and a last single k where kc is odd."""
        c, b, kc = self.core, self.core.b, self.core.kc
        if not c.pairs:
            return _k_loop(b, kc, init, self.step)
        accs = _k_loop(b, b.lshr(kc, i64(1)), init, self.pair_step)
        pre = b.block
        with b.if_then(b.trunc(kc, ir.IntType(1))):   # an odd contraction
            odd_block_accs = self.pair_step(b.lshr(kc, i64(1)), accs, odd=True)
            odd_end = b.block
        merged = []
        for x, y in zip(accs, odd_block_accs):
            ph = b.phi(c.vty)
            ph.add_incoming(x, pre)
            ph.add_incoming(y, odd_end)
            merged.append(ph)
        return merged

    def step(self, k, accs):
        """One k: the tile's nv vectors of B's row k, then per row of the tile A's element
        broadcast and nv multiply-adds."""
        c, b, nv = self.core, self.core.b, self.nv
        ak = b.mul(k, c.csA)
        brow = b.add(b.add(c.ob, b.mul(k, c.ldb)), self.j0)
        bvs = self._b_row(k, brow)
        out = []
        for r in range(self.mr):
            a = b.load(c.elem_in(c.Ap, b.add(self.arow[r], ak)), typ=c.fty)
            a = b.shuffle_vector(b.insert_element(c.undef_v, a, ir.Constant(ir.IntType(32), 0)),
                                 c.undef_v, c.shuf0)
            for v in range(nv):
                out.append(b.call(c.fma_v, [a, bvs[v], accs[r * nv + v]]))
        return out

    def _b_row(self, k, brow):
        """The nv vectors of B's row k (``brow``: its element j0 in B) that the tile multiplies
        by: read from B (and copied to the panel, when filling), from the panel, or from the
        run-time source ``bsrc``."""
        c, b, nv, W, lanes = self.core, self.core.b, self.nv, self.core.W, self.lanes
        vty, align = c.vty, c.comp.itemsize
        if self.fill:
            bvs = [b.load(c.elem_in(c.Bp, b.add(brow, i64(v * W))), typ=vty, align=align) for v in range(nv)]
            for v in range(nv):
                b.store(bvs[v], c.panel_at(k, v))
            k_ahead = b.add(k, i64(FILL_PREFETCH_ROWS))
            last = b.sub(c.kc, i64(1))
            k_ahead = b.select(b.icmp_signed("<", k_ahead, c.kc), k_ahead, last)
            src = c.elem_in(c.Bp, b.add(b.add(c.ob, b.mul(k_ahead, c.ldb)), self.j0))
            span = nv * W * align
            for off in sorted({0, span - 1}):  # the first and last line of the row's run
                b.call(c.prefetch, [b.gep(src, [i64(off)], source_etype=U.I8)] + c.prefetch_args)
            return bvs
        if self.packed:
            bvs = [b.load(c.panel_at(k, v), typ=vty) for v in range(nv)]
            if self.ahead is not None:   # a line of row k of the next panel, into L2
                b.call(c.prefetch, [b.gep(self.ahead[0], [b.mul(k, self.ahead[1])], source_etype=c.ety)]
                       + c.prefetch_l2_args)
            return bvs
        if self.bsrc is not None:   # row k at bsrc[0] + k * bsrc[1] (elements)
            row = b.gep(self.bsrc[0], [b.mul(k, self.bsrc[1])], source_etype=c.ety)

            def at(v):
                return c.elem_in(row, i64(v * W))
        else:
            def at(v):
                return c.elem_in(c.Bp, b.add(brow, i64(v * W)))
        return [c.masked("load", at(v), lanes) if isinstance(lanes, ir.Value) and v == nv - 1 else
                b.load(at(v), typ=vty, align=align)
                for v in range(nv)]

    def pair_step(self, k, accs, odd=False):
        """One pair of k (B's rows 2k, 2k+1 interleaved in panel row k): per row of the
        tile, A's two elements broadcast as one i32; ``odd``: the contraction's last,
        single k (A's second element taken as zero, the panel's is zero)."""
        c, b, nv = self.core, self.core.b, self.nv
        bvs = [b.bitcast(b.load(c.panel_at(k, v), typ=c.ivty), c.bf_ty) for v in range(nv)]
        out = []
        for r in range(self.mr):
            at = c.elem_in(c.Ap, b.add(self.arow[r], b.mul(k, i64(2))))
            a = b.zext(b.load(at, typ=U.I16), U.I32) if odd else b.load(at, typ=U.I32, align=2)
            a = b.shuffle_vector(b.insert_element(ir.Constant(c.ivty, ir.Undefined), a, ir.Constant(U.I32, 0)),
                                 ir.Constant(c.ivty, ir.Undefined), c.shuf0)
            a = b.bitcast(a, c.bf_ty)
            for v in range(nv):
                out.append(b.call(c.dot2, [accs[r * nv + v], a, bvs[v]]))
        return out

    # ---- C's pointers, loads and stores

    def c_ptrs(self):
        """(pointer, lanes) of each of the tile's vectors of C, row by row: a pointer, or where
        C's columns are strided a vector of W element pointers; lanes 0 (whole) or the tail's."""
        c, b, nv, W, lanes = self.core, self.core.b, self.nv, self.core.W, self.lanes
        out = []
        # C's columns csC apart: per vector, its columns' offsets from the row's start
        colv = [b.mul(b.add(c.splat_i(self.j0), c.col_iota[v]), c.splat_i(c.csC)) for v in range(nv)] \
            if c.c_strided else None
        for r in range(self.mr):
            row = b.add(c.oc, b.mul(b.add(self.i0, i64(r)), c.ldc))
            for v in range(nv):
                n = lanes if v == nv - 1 and isinstance(lanes, ir.Value) else 0
                if c.c_strided:   # a vector of W element pointers
                    ptrs = b.gep(c.elem(c.Cp, row), [colv[v]], source_etype=c.fty)
                    ptrs.type = ir.VectorType(U.PTR, W)   # llvmlite types a vector GEP as scalar
                    out.append((ptrs, n))
                else:
                    out.append((c.elem(c.Cp, b.add(b.add(row, self.j0), i64(v * W))), n))
        return out

    def c_load(self, p, n):
        c = self.core
        if c.c_strided:
            return c.strided("gather", p, n or c.W)
        return c.masked("load", p, n) if isinstance(n, ir.Value) else c.b.load(p, typ=c.vty, align=c.comp.itemsize)

    def c_store(self, p, n, value):
        c = self.core
        if c.c_strided:
            c.strided("scatter", p, n or c.W, value)
        elif isinstance(n, ir.Value):
            c.masked("store", p, n, value)
        else:
            c.b.store(value, p, align=c.comp.itemsize)
