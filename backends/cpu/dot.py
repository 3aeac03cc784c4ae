"""dot_general on the CPU.

Every dot_general is brought to the canonical batched form C[B,M,N] = A[B,M,K] x B[B,K,N]
(batch, free and contracting dimension groups flattened). Operands already laid out that way
in memory (or as the transposed [B,K,M] / [B,N,K]) are used in place; anything else (fused
producers, other layouts, f16/bf16 needing f32) is first written to a scratch buffer in
canonical form by a loop kernel.

Floats then call a BLAS sgemm/dgemm (see ``blas.py``), split over our threads by blocks of
rows (BLAS itself kept to one thread inside each call). Integers, pred and the
``HLO_CPU_GEMM=generated`` setting use a generated i-k-j loop kernel vectorized over N.
Measured on the development machine, BLAS beats the generated kernel for f32 by a wide
margin (see bench/cpu_kernels.py), so it is the default where available.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import llvmlite.ir as ir

from hlo.ir.core import Region, Value
from hlo.ir.types import TensorType, f32 as F32_T, f64 as F64_T
from .. import llvm_util as U
from ..llvm_util import F32, F64, I32, I64, PTR, for_range, i64
from .blas import find_blas
from .kernels import (Codegen, KernelBuilder, Root, collect_reads, emit_loop_kernel,
                      make_emitter, physical_order, PARALLEL_MIN_WORK)
from .program import BufRef

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112


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
    et = lhs.dtype
    blas = find_blas()
    if et.is_float and blas is not None:
        comp = F64_T if et.name == "f64" else F32_T
        kind = "blas"
    else:
        comp = out.dtype if not et.is_pred else out.dtype
        kind = "loop"
        if et.is_float:
            comp = F64_T if et.name == "f64" else F32_T
    what = f"dot_general [{Bn}x{M}x{K}] x [{Bn}x{K}x{N}] {et}->{out.dtype} ({kind})"
    if out.type.size == 0:
        return False
    if K == 0 or Bn * M * N == 0:
        zero = np.zeros(out.type.shape, out.dtype.np_dtype)
        lw.steps.append(lw.copy_step(dest, cg.const_ref(zero), out.type.nbytes))
        return False

    def operand(v: Value, groups_plain, groups_trans, canon_shape, allow_trans):
        """(ref, transposed) for an operand, materializing a canonical copy if needed."""
        t = v.type
        if v in env and t.dtype == comp:
            order = physical_order(t)
            flat = lambda gs: [d for g in gs for d in g]
            if order == flat(groups_plain):
                return env[v], False
            if allow_trans and order == flat(groups_trans):
                return env[v], True
        ct = TensorType(canon_shape, comp)
        ref = lw.scratch(ct.nbytes)
        groups = [[(d, t.shape[d]) for d in g] for g in groups_plain]
        lw.steps.append(emit_loop_kernel(cg, [Root(v, ref, ct, _group_index_fn(groups, t.rank))], env,
                                         name="dot_operand", what=f"canonical {ct} for dot operand"))
        return ref, False

    allow_t = kind == "blas"
    a_ref, ta = operand(lhs, [lb, lfree, lc], [lb, lc, lfree], (Bn, M, K), allow_t)
    b_ref, tb = operand(rhs, [rb, rc, rfree], [rb, rfree, rc], (Bn, K, N), allow_t)
    out_default = physical_order(out.type) == list(range(out.type.rank))
    direct = out.dtype == comp and out_default and not any(
        dest == r or dest.overlaps(r) for r in (a_ref, b_ref))
    c_t = TensorType((Bn, M, N), comp)
    c_ref = dest if direct else lw.scratch(c_t.nbytes)
    fused = False
    if kind == "blas":
        epi = None
        if epilogue is not None and direct:
            env2 = dict(env)
            env2[out] = dest
            epi = (epilogue, env2, [len(lb), len(lfree), len(rfree)])
            fused = True
        lw.steps.append(_blas_kernel(cg, blas, comp, c_ref, a_ref, ta, b_ref, tb, Bn, M, N, K, what, epi))
    else:
        lw.steps.append(_loop_gemm_kernel(cg, comp, c_ref, a_ref, b_ref, Bn, M, N, K, what))
    if not direct:
        cv = _canon_value(c_t)
        nb = len(lb)
        groups = [[(d, out.shape[d]) for d in range(nb)],
                  [(nb + k, out.shape[nb + k]) for k in range(len(lfree))],
                  [(nb + len(lfree) + k, out.shape[nb + len(lfree) + k]) for k in range(len(rfree))]]

        def out_to_canon(b, idx):
            res = []
            for g in groups:
                lin = i64(0)
                for d, n in g:
                    lin = b.add(b.mul(lin, i64(n)), idx[d])
                res.append(lin)
            return tuple(res)

        env2 = dict(env)
        env2[cv] = c_ref
        lw.steps.append(emit_loop_kernel(cg, [Root(cv, dest, out.type, out_to_canon)], env2,
                                         name="dot_result", what=f"dot result -> {out.type}"))
    return fused


def _blocks(cg: Codegen, Bn: int, M: int, N: int):
    """(rows, cols) per parallel item: enough items to keep every thread busy. Small-M products
    (a batch of rows times a weight matrix) split columns, so each thread packs only its part
    of the weights; tall ones split rows."""
    want = 4 * cg.threads
    if Bn >= want:
        return M, N
    per = -(-want // Bn)
    if M >= N or N < 128:
        if M <= 16:
            return M, N
        blocks = min(-(-M // 16), per)
        mb = -(-M // blocks)
        return -(-mb // 8) * 8, N
    blocks = min(-(-N // 64), per)
    nb = -(-N // blocks)
    return M, -(-nb // 16) * 16


def _blas_kernel(cg, blas, comp, c_ref, a_ref, ta, b_ref, tb, Bn, M, N, K, what, epi=None):
    cg.uses_blas = True
    ity = ir.IntType(blas.int_bits)
    fty = F64 if comp.name == "f64" else F32
    es = comp.itemsize
    gemm = cg.ctx.declare(blas.dgemm if comp.name == "f64" else blas.sgemm, U.VOID,
                          [I32, I32, I32, ity, ity, ity, fty, PTR, ity, PTR, ity, fty, PTR, ity])
    refs, writes = [c_ref, a_ref, b_ref], [True, False, False]
    if epi is not None:
        root, env2, _ = epi
        ereads, _ = collect_reads([root], env2)
        refs += [env2[v] for v in ereads]
        writes += [False] * len(ereads)
    kb = KernelBuilder(cg, "gemm", refs, writes)
    b = kb.b
    C, A, Bp = kb.ptr(c_ref), kb.ptr(a_ref), kb.ptr(b_ref)
    em = make_emitter(kb, ereads, env2) if epi is not None else None
    MB, NB = _blocks(cg, Bn, M, N)
    mblocks, nblocks = -(-M // MB), -(-N // NB)
    per_batch = mblocks * nblocks
    old = None
    if blas.set_threads_local:
        stl = cg.ctx.declare(blas.set_threads_local, I32, [I32])
        old = b.call(stl, [ir.Constant(I32, 1)])
    n_ = lambda v: b.trunc(v, ity) if blas.int_bits < 64 else v
    clip = lambda start, size, total: b.select(b.icmp_signed("<", b.sub(i64(total), start), i64(size)),
                                               b.sub(i64(total), start), i64(size))
    with for_range(b, kb.lo, kb.hi, "item") as t:
        bi = b.udiv(t, i64(per_batch))
        r = b.urem(t, i64(per_batch))
        m0 = b.mul(b.udiv(r, i64(nblocks)), i64(MB))
        n0 = b.mul(b.urem(r, i64(nblocks)), i64(NB))
        rows = clip(m0, MB, M)
        cols = clip(n0, NB, N)
        a_off = b.add(b.mul(bi, i64(M * K)), m0 if ta else b.mul(m0, i64(K)))
        ap = b.gep(A, [b.mul(a_off, i64(es))], source_etype=U.I8)
        b_off = b.add(b.mul(bi, i64(K * N)), b.mul(n0, i64(K)) if tb else n0)
        bp = b.gep(Bp, [b.mul(b_off, i64(es))], source_etype=U.I8)
        c_off = b.add(b.add(b.mul(bi, i64(M * N)), b.mul(m0, i64(N))), n0)
        cp = b.gep(C, [b.mul(c_off, i64(es))], source_etype=U.I8)
        lda = M if ta else K
        ldb = K if tb else N
        b.call(gemm, [ir.Constant(I32, CBLAS_ROW_MAJOR),
                      ir.Constant(I32, CBLAS_TRANS if ta else CBLAS_NO_TRANS),
                      ir.Constant(I32, CBLAS_TRANS if tb else CBLAS_NO_TRANS),
                      n_(rows), n_(cols), ir.Constant(ity, K), ir.Constant(fty, 1.0),
                      ap, ir.Constant(ity, lda), bp, ir.Constant(ity, ldb), ir.Constant(fty, 0.0),
                      cp, ir.Constant(ity, N)])
        if epi is not None:
            _block_epilogue(kb, em, epi, c_ref, bi, m0, rows, n0, cols)
    if old is not None:
        b.call(stl, [old])
    flops = 2 * Bn * M * N * K
    return kb.finish(Bn * per_batch, flops >= 8 * PARALLEL_MIN_WORK, what)


def _block_epilogue(kb, em, epi, c_ref, bi, m0, rows, n0, cols):
    """The output fusion's root over one C block (rows m0.., cols n0.. of batch bi), in place."""
    from .kernels import _store
    root, env2, (nb, nl, nr) = epi
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
        with for_range(b, n0, b.add(n0, cols), "en") as n:
            em.push()
            idx = tuple(bidx + midx + split(n, groups[2]))
            _store(b, em, kb.ptr(c_ref), root.type, idx, em.at(root, idx))
            em.pop()
        em.pop()


def _loop_gemm_kernel(cg, comp, c_ref, a_ref, b_ref, Bn, M, N, K, what):
    """C[b,m,:] = sum_k A[b,m,k] * B[b,k,:], vectorized over the contiguous N."""
    from ..scalar_ops import binary
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
                if comp.is_float:
                    prod = b.fmul(av, bv, flags=("contract",))
                    s = b.fadd(cv, prod, flags=("contract",))
                elif comp.is_pred:
                    s = b.or_(cv, b.and_(av, bv))
                else:
                    s = b.add(cv, b.mul(av, bv))
                U.store_reg(b, s, cp, comp)
    flops = 2 * Bn * M * N * K
    return kb.finish(Bn * M, flops >= 8 * PARALLEL_MIN_WORK, what)
