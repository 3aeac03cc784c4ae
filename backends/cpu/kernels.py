"""Kernel functions: loop nests over an output's index space.

Every kernel is ``void name(ptr p0, ..., ptr pK, i64 lo, i64 hi)``: its buffers, then the range
of its outer (parallel) loop; a ``name.task(ptr args, i64 lo, i64 hi)`` wrapper lets the
parallel runtime call it with the pointers packed in an array. Buffers that overlap no other
buffer of the call get ``noalias`` (inputs are only read; outputs and arena slices the kernel
writes are checked against every other buffer), which lets LLVM vectorize without run-time
alias checks.

Kinds of loop nests here:

* ``emit_loop_kernel``: one or more roots with the same index space; the innermost loop runs
  over the physically minor dimension (LLVM vectorizes it at the host's width); rows (all
  outer dimensions flattened) are the parallel range. Reductions computed elementally inside
  (row reductions) get vectorized accumulators because their bodies are marked reassociable.
* ``emit_row_kernel``: a region that reduces trailing dimensions and uses the results per row
  (softmax, layer norm): per row, each reduction is computed once into registers, then the
  row's outputs; rows are the parallel range.
* ``emit_column_reduce``: a reduction that keeps the minor dimension: accumulators live in the
  output row and the inner loop runs over the kept minor dimension (vectorized); a float sum
  accumulates in stack rows instead, blocks of rows in f32 and their totals in f64
  (``COLUMN_SUM_COLUMNS``).
* ``emit_split_reduce``: a big reduction to a few values (a full sum): partial results over
  chunks of the outermost reduced dimension in parallel, then one combine (a float sum's
  partials are f64, each summed in blocks: ``elemental.SUM_BLOCK``).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import llvmlite.ir as ir
import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Value
from hlo.ir.types import TensorType
from hlo.runtime.steps import BufRef, KernelCall

from .. import llvm_util as U
from ..elemental import BufferSource, ElementalEmitter, block_sum_hooks, blocked_loops, float_sum_types
from ..kernel_emitter import Root, fused_ops, is_column_reduce, kernel_buffers, physical_order, root_values
from ..llvm_util import I64, PTR, SCALAR_LOOP, VOID, ModuleContext, for_range, i64, prefer_vector_width
from . import column_partials
from .concat_rows import concat_root, emit_concat_rows
from .entry import TASK_FN

# Work (elements x ops) below which a kernel stays on one thread: starting a thread costs
# tens of microseconds.
PARALLEL_MIN_WORK = 1 << 17
ROW_CHUNK = 4096  # elements per parallel item for rank-1 loops
# Inner loops whose element takes at least INTERLEAVE_MIN_OPS fused ops ask the loop vectorizer
# for INTERLEAVE vector iterations at once. LLVM's cost model picks 1 for long bodies (register
# pressure), which leaves a long serial chain per element (exp, tanh, divisions: ~200 cycles of
# latency) to the out-of-order window alone; 4 independent chains measured 1.8x faster on
# tinyops (Zen 3, AVX2) and 1.2x on softmax's exp-sum pass. Elementwise chains of
# LONG_CHAIN_OPS..LONG_CHAIN_MAX_OPS ops get 8 (another 8% on tinyops, for ~40% more LLVM time
# on that kernel; past the upper bound the copies' register spills cost more than they hide).
INTERLEAVE = 4
INTERLEAVE_MIN_OPS = 4
LONG_CHAIN_INTERLEAVE = 8
LONG_CHAIN_OPS = 8
LONG_CHAIN_MAX_OPS = 40


def interleave_for(nops: int) -> Optional[int]:
    """The interleave hint for an elementwise inner loop computing ``nops`` fused ops per
    element (None: LLVM's cost model decides)."""
    if not INTERLEAVE:
        return None
    if LONG_CHAIN_OPS <= nops <= LONG_CHAIN_MAX_OPS:
        return max(INTERLEAVE, LONG_CHAIN_INTERLEAVE)
    return INTERLEAVE if nops >= INTERLEAVE_MIN_OPS else None


class Codegen:
    """State shared by all kernels of one executable."""

    def __init__(self, ctx: ModuleContext, threads: int):
        self.ctx = ctx
        self.threads = threads
        self.kernels: Dict[str, ir.Function] = {}
        self.tasks: Dict[str, ir.Function] = {}
        self.constants: Dict[int, np.ndarray] = {}
        self.uses_blas = False
        # library code the kernels call (the GEMM's shared bodies, ``gemm_library.CoreSpec``),
        # by symbol: compiled apart and linked with the program's object
        self.cores: Dict[str, object] = {}

    def const_ref(self, arr: np.ndarray) -> BufRef:
        k = len(self.constants)
        self.constants[k] = np.ascontiguousarray(arr)
        return BufRef("const", k, 0, int(arr.nbytes))


class KernelBuilder:
    """Builds one kernel function over a deduplicated list of buffers."""

    def __init__(self, cg: Codegen, base_name: str, refs: Sequence[BufRef], writes: Sequence[bool],
                 vector_bits: Optional[int] = None):
        self.cg = cg
        self.vector_bits = vector_bits
        self.name = cg.ctx.unique("k." + base_name)
        uniq, self.writes, alone = kernel_buffers(refs, writes)
        self.refs = uniq
        fnty = ir.FunctionType(VOID, [PTR] * len(uniq) + [I64, I64])
        fn = ir.Function(cg.ctx.module, fnty, name=self.name)
        fn.linkage = "internal"
        # Kernels are called from the entry point and from their task wrapper: keep one copy
        # (inlining would duplicate every loop nest and double LLVM's work).
        fn.attributes.add("noinline")
        if vector_bits:
            prefer_vector_width(fn, vector_bits)
        for a, ok in zip(fn.args, alone):
            if ok:
                a.add_attribute("noalias")
        self.fn = fn
        self.lo, self.hi = fn.args[-2], fn.args[-1]
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    def ptr(self, ref: BufRef) -> ir.Value:
        return self.fn.args[self.refs.index(ref)]

    def finish(self, extent: int, parallel: bool, what: str) -> KernelCall:
        self.b.ret_void()
        parallel = parallel and extent > 1 and self.cg.threads > 1
        self.cg.kernels[self.name] = self.fn
        if not parallel:
            return KernelCall(self.name, list(self.refs), list(self.writes), extent, False, what)
        task = U.glue(ir.Function(self.cg.ctx.module, TASK_FN, name=self.name + ".task"))
        task.linkage = "internal"
        tb = ir.IRBuilder(task.append_basic_block())
        args, lo, hi = task.args
        ptrs = [tb.load(tb.gep(args, [i64(k)], source_etype=PTR), typ=PTR) for k in range(len(self.refs))]
        tb.call(self.fn, ptrs + [lo, hi])
        tb.ret_void()
        self.cg.tasks[self.name] = task
        return KernelCall(self.name, list(self.refs), list(self.writes), extent, True, what)


def collect_reads(roots: Sequence[Value], env: Dict[Value, BufRef]) -> Tuple[List[Value], int]:
    """Values with a buffer (in ``env``) that computing ``roots`` reads, and the number of fused
    ops on the way (a cost estimate)."""
    reads, ops, inner_ops = fused_ops(roots, env)
    return reads, sum(_inner_work(op) for op in ops) + inner_ops


def vector_bits_for(roots: Sequence[Value], env: Dict[Value, BufRef]) -> Optional[int]:
    """The widest vectors a kernel computing ``roots`` should use, where that is wider than
    LLVM's choice for the CPU (None: LLVM's). LLVM tunes its Intel AVX-512 CPUs (Ice Lake to
    Sapphire Rapids; "rocketlake" here) to prefer 256-bit vectors. 512 bits pay where the
    vector ALUs bound the kernel, as the polynomial chains of exp/tanh/log do: one thread,
    Sapphire Rapids, tinyops 11.4 -> 9.9 ms, softmax 7.9 -> 7.0 ms. Without a math routine a
    kernel is bound by memory or by the divider (whose throughput per element is the same at
    both widths): layernorm ran 2.5% slower at 512 bits, so such kernels keep LLVM's width."""
    from hlo.runtime.cpu.target import host
    bits = host().vector_bits
    if bits <= 256:
        return None
    _, ops, _ = fused_ops(roots, env)
    heavy = any(op.name in MATH_ROUTINES or op.name in LONG_MATH_ROUTINES for op in ops)
    return bits if heavy else None


# Ops emitted as a polynomial chain (backends/mathlib.py or libm) count as this many ops: a lone
# exp or tanh is a ~20-instruction serial chain, and interleaving four of them measured 1.7x
# (exp, 6.9 -> 4.1 ms) and 3x (tanh, 12.6 -> 4.2 ms) faster on f32[4096,4096] than leaving it to
# the cost model; logistic (exp, a reciprocal and a select) counts double, which gets it 8
# copies (11.5 -> 6.3 ms).
TRANSCENDENTAL_WORK = 4
LONG_MATH_ROUTINES = op_table.with_trait(op_table.LONG_MATH_ROUTINE)
MATH_ROUTINES = op_table.with_trait(op_table.MATH_ROUTINE) - LONG_MATH_ROUTINES


def _inner_work(op) -> int:
    """Work per output element of an op computed elementally: 1, or the size of the loop it
    runs per element (reductions, windows, contractions)."""
    name = op.name
    if name == "reduce":
        t = op.operands[0].type
        out = max(1, op.results[0].type.size)
        return max(1, t.size // out)
    if name == "reduce_window":
        return max(1, int(np.prod(op.attrs["window_dimensions"])))
    if name == "dot_general":
        lhs = op.operands[0]
        return max(1, int(np.prod([lhs.shape[d] for d in op.attrs.get("lhs_contracting_dimensions", ())])))
    if name == "convolution":
        rhs = op.operands[1]
        return max(1, rhs.type.size // max(1, rhs.shape[op.attrs["kernel_output_feature_dimension"]]))
    if name in MATH_ROUTINES:
        return TRANSCENDENTAL_WORK
    return 2 * TRANSCENDENTAL_WORK if name in LONG_MATH_ROUTINES else 1


def make_emitter(kb: KernelBuilder, reads: Sequence[Value], env: Dict[Value, BufRef]) -> ElementalEmitter:
    sources = {v: BufferSource(kb.ptr(env[v]), v.type) for v in reads}
    return ElementalEmitter(kb.cg.ctx, kb.b, sources)


def _store(b, em: ElementalEmitter, ptr, ttype: TensorType, idx, val, tag=None):
    off = U.linear_offset(b, idx, U.strides_of(ttype))
    st = U.store_reg(b, val, U.elem_ptr(b, ptr, ttype.dtype, off), ttype.dtype)
    if tag is not None:
        st.set_metadata("tbaa", tag)


def _minor_extent(t: TensorType) -> int:
    """Elements of one run of the innermost loop of ``emit_nest`` over ``t``."""
    if t.rank == 0:
        return 1
    if t.rank == 1:
        return ROW_CHUNK
    return t.shape[physical_order(t)[-1]]


class Streaming:
    """Which outputs of a kernel are written with non-temporal stores (``streaming.py``).

    An output streams when it is at least ``NT_MIN_BYTES`` (a program output) or
    ``NT_MIN_TEMP_BYTES`` (an arena temporary), lives in memory this runtime allocates 64-byte
    aligned (at a 64-byte offset; never an input buffer reused in place), and every run of the
    innermost loop starts at a multiple of the vector size (``row_elems`` elements per run).
    Such a kernel gets a twin function,
    ``<kernel>.stream``, whose streaming pointer parameters are declared aligned (so LLVM
    proves its vector stores aligned) and whose stores to them carry the streaming tag; the
    kernel calls the twin when the pointers really are aligned at run time and otherwise runs
    its own plain loops."""

    def __init__(self, cg: Codegen, kb: KernelBuilder, dests, row_elems: int):
        from hlo.runtime.cpu.target import host

        from .streaming import NT_MIN_BYTES, NT_MIN_TEMP_BYTES, stream_tag
        self.vbytes = max(16, host().vector_bits // 8)
        self.refs: List[BufRef] = []
        if not host().triple.startswith(("x86_64", "i686", "i386")):
            dests = []  # the hints and the fence below are x86's
        for ref, t in dests:
            least = {"output": NT_MIN_BYTES, "arena": NT_MIN_TEMP_BYTES}.get(ref.kind)
            if (least is not None and ref.offset % 64 == 0 and t.nbytes >= least
                    and (row_elems * max(1, t.dtype.itemsize)) % self.vbytes == 0
                    and ref in kb.refs and ref not in self.refs):
                self.refs.append(ref)
        self.tag = stream_tag(cg.ctx.module) if self.refs else None

    def tag_for(self, ref: BufRef):
        return self.tag if ref in self.refs else None

    def is_fallback(self, stream: Optional["Streaming"]) -> bool:
        """Whether ``loops`` is emitting the unaligned fallback of a streaming kernel. Outputs
        come 64-byte aligned from the runtime's output pool, so the fallback runs only for
        buffers the runtime did not allocate; its loops stay scalar (``SCALAR_LOOP``: correct,
        small, and cheap for LLVM): layernorm's compile 75 -> 63 ms, softmax's 93 -> 75 (where
        leaving them to LLVM's own interleave choice had already taken tinyops 99 -> 80), and
        the kernel holding them is not optimized at all (``emit``)."""
        return bool(self.refs) and stream is None

    def emit(self, cg: Codegen, kb: KernelBuilder, loops: Callable[[KernelBuilder, "Streaming"], None]) -> None:
        """Emit ``loops(kb, streaming)`` into ``kb`` (with ``streaming=None``), preceded, when
        something streams, by the aligned test and the call of the streaming twin."""
        if not self.refs:
            loops(kb, None)
            return
        from .streaming import sfence
        twin = KernelBuilder(cg, kb.name[2:] + ".stream", kb.refs, kb.writes, kb.vector_bits)
        for ref in self.refs:
            twin.fn.args[twin.refs.index(ref)].attributes.align = self.vbytes
        loops(twin, self)
        sfence(twin.b)  # order the streaming stores before whatever runs next
        twin.b.ret_void()
        b = kb.b
        ok = ir.Constant(ir.IntType(1), 1)
        for ref in self.refs:
            a = b.ptrtoint(kb.ptr(ref), I64)
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(a, i64(self.vbytes - 1)), i64(0)))
        with b.if_then(ok):
            b.call(twin.fn, list(kb.fn.args))
            b.ret_void()
        loops(kb, None)
        # the plain loops are the fallback for buffers the runtime did not make (every output
        # it makes at NT_MIN_BYTES or more comes 64-byte aligned from the output pool, on the
        # native entry and the Python path alike): LLVM does not optimize them, which took
        # layernorm's compile 49 -> 45 ms and softmax's 55 -> 47
        kb.fn.attributes.add("optnone")


# ------------------------------------------------------------------------------------------
# Loop nests
# ------------------------------------------------------------------------------------------

def loop_extent(t: TensorType) -> int:
    """How many parallel items a loop nest over ``t`` has."""
    if t.rank == 0:
        return 1
    if t.rank == 1:
        return max(1, -(-t.shape[0] // ROW_CHUNK))
    order = physical_order(t)
    p = 1
    for d in order[:-1]:
        p *= t.shape[d]
    return p


def emit_nest(kb: KernelBuilder, em: ElementalEmitter, t: TensorType,
              body: Callable[[Tuple[ir.Value, ...]], None], interleave: Optional[int] = None) -> None:
    """Loops over the index space of ``t`` restricted to parallel items [lo, hi); the innermost
    loop gets the vectorizer's ``interleave`` hint."""
    b = kb.b

    def inner_loop(lo, hi, make_idx):
        with for_range(b, lo, hi, "i", interleave=interleave) as i:
            em.push()
            body(make_idx(i))
            em.pop()

    if t.size == 0:
        return
    if t.rank == 0:
        body(())
        return
    if t.rank == 1:
        n = t.shape[0]
        start = b.mul(kb.lo, i64(ROW_CHUNK))
        end = b.mul(kb.hi, i64(ROW_CHUNK))
        end = b.select(b.icmp_signed("<", end, i64(n)), end, i64(n))
        inner_loop(start, end, lambda i: (i,))
        return
    order = physical_order(t)
    outer, inner = order[:-1], order[-1]
    with for_range(b, kb.lo, kb.hi, "row") as f:
        em.push()
        idx = [None] * t.rank
        rem = f
        for d in reversed(outer):
            n = t.shape[d]
            if d == outer[0]:
                idx[d] = rem
            else:
                idx[d] = b.urem(rem, i64(n))
                rem = b.udiv(rem, i64(n))
        def full(i):
            idx[inner] = i
            return tuple(idx)
        inner_loop(i64(0), i64(t.shape[inner]), full)
        em.pop()


def emit_loop_kernel(cg: Codegen, roots: Sequence[Root], env: Dict[Value, BufRef],
                     name: str = "loop", what: str = "") -> KernelCall:
    t = roots[0].dest_type
    reads, nops = collect_reads([r.value for r in roots], env)
    refs = [r.dest for r in roots] + [env[v] for v in reads]
    writes = [True] * len(roots) + [False] * len(reads)
    kb = KernelBuilder(cg, name, refs, writes, vector_bits_for([r.value for r in roots], env))
    st = Streaming(cg, kb, [(r.dest, r.dest_type) for r in roots], row_elems=_minor_extent(t))

    def loops(kb: KernelBuilder, stream: Optional[Streaming]) -> None:
        em = make_emitter(kb, reads, env)
        b = kb.b
        interleave = SCALAR_LOOP if st.is_fallback(stream) else interleave_for(nops)
        cat = concat_root(roots)
        if cat is not None:   # each row in one operand: a branch a row, not a select an element
            emit_concat_rows(kb, em, roots[0], cat, interleave, stream.tag_for(roots[0].dest) if stream else None)
            return

        def body(idx):
            vals = root_values(cg.ctx, b, em, roots, idx)
            for r, val in zip(roots, vals):
                _store(b, em, kb.ptr(r.dest), r.dest_type, idx, val,
                       stream.tag_for(r.dest) if stream else None)

        emit_nest(kb, em, t, body, interleave=interleave)

    st.emit(cg, kb, loops)
    work = t.size * max(1, nops)
    return kb.finish(loop_extent(t), work >= PARALLEL_MIN_WORK, what)


def emit_row_kernel(cg: Codegen, k: int, reduces: Sequence[Value], outputs: Sequence[Tuple[Value, BufRef]],
                    env: Dict[Value, BufRef], in_shape, name: str = "rows", what: str = "",
                    first_row: Optional[BufRef] = None) -> KernelCall:
    """Row-by-row kernel: rows are the first ``k`` dimensions of ``in_shape``. With
    ``first_row`` (a buffer holding one i64, r0: ``dot_chunks.py``) the kernel's items are rows
    r0, r0+1, ... of the whole, each output (row-major, rows leading) a buffer that holds only
    those rows, from its start; its stores are plain, so that the rows stay in cache for the
    product that reads them next."""
    reads, nops = collect_reads([v for v, _ in outputs], env)
    refs = [r for _, r in outputs] + [env[v] for v in reads] + ([first_row] if first_row else [])
    writes = [True] * len(outputs) + [False] * (len(refs) - len(outputs))
    kb = KernelBuilder(cg, name, refs, writes, vector_bits_for([v for v, _ in outputs], env))
    O, I = tuple(in_shape[:k]), tuple(in_shape[k:])
    rows = int(np.prod(O)) if O else 1
    st = Streaming(cg, kb, [(ref, v.type) for v, ref in outputs if v.type.shape != O and first_row is None],
                   row_elems=I[-1] if I else 1)

    def loops(kb: KernelBuilder, stream: Optional[Streaming]) -> None:
        em = make_emitter(kb, reads, env)
        # the row passes (reductions, outputs) are inner loops
        em.inner_interleave = SCALAR_LOOP if st.is_fallback(stream) else (INTERLEAVE or None)
        b = kb.b
        caches = _row_caches(b, em, k, reduces, [v for v, _ in outputs], env, I)
        for v, c in caches.items():
            em.reduce_input_sinks[v] = lambda full, x, c=c: c.write(b, full, x)
        if rows == 0:
            return
        carry = _NextRowCarry.plan(reduces, reads, env, in_shape, k) if caches and first_row is None else None
        if carry:
            carry.reset(b)
        lo, hi, optr = kb.lo, kb.hi, {ref: kb.ptr(ref) for _, ref in outputs}
        if first_row is not None:
            r0 = b.load(kb.ptr(first_row), typ=I64)
            lo, hi = b.add(lo, r0), b.add(hi, r0)
            for v, ref in outputs:   # row r of the whole at row r - r0 of the buffer
                assert v.type.shape[:k] == O and physical_order(v.type) == list(range(v.type.rank))
                back = b.mul(r0, i64(-int(np.prod(v.type.shape[k:])) * v.type.dtype.itemsize))
                optr[ref] = b.gep(kb.ptr(ref), [back], source_etype=U.I8)
        with for_range(b, lo, hi, "row") as f:
            em.push()
            ridx = _row_index(b, f, O)
            if not caches:  # rows with cached transcendentals are compute-bound (see below)
                _prefetch_next_row(kb, f, reads, env, in_shape, k)
            for r in reduces:  # each reduction once per row, in region order
                if carry and r is carry.first:
                    carry.emit_first(b, em, ridx)
                elif carry and r is carry.second:
                    carry.emit_second(b, em, kb, f, ridx, O)
                else:
                    em.at(r, ridx)
                for v in r.op.operands[:len(r.op.operands) // 2]:
                    if v in caches:  # the row's outputs read this input back from the cache
                        em.reduce_input_sinks.pop(v, None)
                        em.sources[v] = caches[v]
            for v, ref in outputs:
                tag = stream.tag_for(ref) if stream else None
                if v.type.shape == O:
                    _store(b, em, optr[ref], v.type, ridx, em.at(v, ridx))
                    continue

                def inner(iidx, v=v, ref=ref, tag=tag):
                    full = ridx + tuple(iidx)
                    _store(b, em, optr[ref], v.type, full, em.at(v, full), tag)
                _inner_loops(b, em, I, inner)
            em.pop()

    st.emit(cg, kb, loops)
    work = int(np.prod(in_shape)) * max(1, nops)
    return kb.finish(max(rows, 1), work >= PARALLEL_MIN_WORK, what)


def _row_index(b, f: ir.Value, O) -> tuple:
    """The index over dims ``O`` of row-major linear position ``f`` (a row kernel's row)."""
    ridx = []
    rem = f
    for d in range(len(O) - 1, -1, -1):
        if d == 0:
            ridx.append(rem)
        else:
            ridx.append(b.urem(rem, i64(O[d])))
            rem = b.udiv(rem, i64(O[d]))
    return tuple(reversed(ridx))


# Fold the next row's first reduction into this row's second pass (0 disables): softmax's max
# of row r+1 is taken in row r's exp-sum loop, whose exp keeps the cores busy while the next
# row streams in, instead of a max pass of its own that waits on DRAM: softmax f32[4096,4096]
# 7.5 -> 6.2 ms, bit-identical. False disables.
CARRY_NEXT_ROW = True


class _NextRowCarry:
    """A row kernel's first reduction (a float max/min straight over an input buffer, as in
    softmax) computed one row ahead inside the second reduction's loop. Max/min are
    order-independent up to the sign of a zero, so the carried value equals the row's own pass
    except for a zero result, which (like the vectorized pass itself) is recomputed exactly. A
    thread's chunk of rows starts with the ordinary pass (no row before it carried the max); its
    last row's loop reads the row after it (or itself, at the end of the array) and drops the
    value."""

    def __init__(self, first: Value, second: Value, src: Value, minmax: str, k: int):
        self.first, self.second, self.src, self.minmax, self.k = first, second, src, minmax, k

    @classmethod
    def plan(cls, reduces, reads, env, in_shape, k) -> Optional["_NextRowCarry"]:
        from ..elemental import _float_minmax_body
        if not CARRY_NEXT_ROW or len(reduces) < 2 or len(in_shape) <= k:
            return None
        first, second = reduces[0], reduces[1]
        inner = list(range(k, len(in_shape)))
        for r in (first, second):
            if r.op.name != "reduce" or list(r.op.attrs["dimensions"]) != inner:
                return None
            if any(tuple(v.type.shape) != tuple(in_shape)
                   for v in r.op.operands[:len(r.op.operands) // 2]):
                return None
        if first.op is second.op:
            return None
        minmax = _float_minmax_body(first.op)
        src = first.op.operands[0]
        if minmax is None or src not in env or src not in reads:
            return None
        if physical_order(src.type) != list(range(src.type.rank)):
            return None  # the next row's elements would not be contiguous
        return cls(first, second, src, minmax, k)

    def reset(self, b) -> None:
        ty = U.reg_type(self.first.dtype)
        self.acc = U.entry_alloca(b, ty)
        self.slot = U.entry_alloca(b, ty)
        self.have = U.entry_alloca(b, U.I1)
        b.store(ir.Constant(U.I1, 0), self.have)

    def emit_first(self, b, em, ridx) -> None:
        ty = U.reg_type(self.first.dtype)
        carried = b.load(self.acc, typ=ty)
        nonzero = b.fcmp_ordered("!=", carried, ir.Constant(ty, 0.0))  # NaN: recomputed too
        use = b.and_(b.load(self.have, typ=U.I1), nonzero)
        with b.if_else(use, likely=True) as (then, otherwise):
            with then:
                b.store(carried, self.slot)
            with otherwise:
                em.push()
                b.store(em.at(self.first, ridx), self.slot)
                em.pop()
        em._remember(self.first, ridx, b.load(self.slot, typ=ty))

    def emit_second(self, b, em, kb, f, ridx, O) -> None:
        ty = U.reg_type(self.first.dtype)
        rows = int(np.prod(O))
        b.store(em.at(self.first.op.operands[1], ()), self.acc)
        nxt = b.add(f, i64(1))
        nidx = _row_index(b, b.select(b.icmp_signed("<", nxt, i64(rows)), nxt, f), O)
        fn = em.ctx.intrinsic(self.minmax, ty, 2)
        ran = []

        def side(full):
            x = em.at(self.src, nidx + tuple(full[self.k:]))
            cur = b.load(self.acc, typ=ty)
            b.store(b.call(fn, [cur, x], fastmath=("nsz", "reassoc")), self.acc)
            ran.append(True)

        em.reduce_sides[self.second.op] = side
        try:
            em.at(self.second, ridx)
        finally:
            del em.reduce_sides[self.second.op]
        valid = b.icmp_signed("<", nxt, kb.hi) if ran else ir.Constant(U.I1, 0)
        b.store(valid, self.have)


# Rows of at least PREFETCH_MIN_ROW_BYTES of a row-major input are prefetched one row ahead (a
# cache line per prefetch, at most PREFETCH_MAX_BYTES) when the row starts, so the next row's
# first pass (layernorm's mean) reads from L2 instead of waiting on DRAM: layernorm
# f32[8192,1024] 2.0 -> 1.64 ms. Only for rows without a row cache: those compute a
# transcendental or division per element and are compute-bound, and there the prefetches only
# took issue slots (softmax f32[4096,4096] 7.7 -> 8.1 ms, also when issued after the max pass
# or into L2 only). 0 disables.
PREFETCH_MIN_ROW_BYTES = 2048
PREFETCH_MAX_BYTES = 64 << 10


def _prefetch_next_row(kb: KernelBuilder, row: ir.Value, reads: Sequence[Value],
                       env: Dict[Value, BufRef], in_shape, k: int) -> None:
    """Prefetch row ``row + 1`` of every read buffer laid out row-major with ``in_shape``."""
    if not PREFETCH_MIN_ROW_BYTES:
        return
    b = kb.b
    inner = int(np.prod(in_shape[k:])) if len(in_shape) > k else 1
    rows = int(np.prod(in_shape[:k])) if k else 1
    for v in reads:
        t = v.type
        if not isinstance(t, TensorType) or tuple(t.shape) != tuple(in_shape):
            continue
        if physical_order(t) != list(range(t.rank)):
            continue
        row_bytes = inner * max(1, t.dtype.bits // 8)
        if row_bytes < PREFETCH_MIN_ROW_BYTES:
            continue
        nxt = b.add(row, i64(1))
        ok = b.icmp_signed("<", nxt, i64(rows))
        with b.if_then(ok, likely=True):
            base = b.gep(kb.ptr(env[v]), [b.mul(nxt, i64(row_bytes))], inbounds=True,
                         source_etype=U.I8)
            pf = kb.cg.ctx.declare("llvm.prefetch.p0", VOID, [PTR, U.I32, U.I32, U.I32])
            read, keep, data = (ir.Constant(U.I32, c) for c in (0, 3, 1))  # into L1, data cache
            with for_range(b, 0, min(row_bytes, PREFETCH_MAX_BYTES) // 64, "pf") as j:
                addr = b.gep(base, [b.mul(j, i64(64))], inbounds=True, source_etype=U.I8)
                b.call(pf, [addr, read, keep, data])


# Row caches: at most this many bytes of stack per row kernel (rows of softmax over 4096
# floats: 16 KiB, in L1 while the row's output pass reads them back).
ROW_CACHE_MAX_BYTES = 64 << 10


def _row_caches(b, em: ElementalEmitter, k: int, reduces: Sequence[Value], outputs: Sequence[Value],
                env: Dict[Value, BufRef], inner_shape) -> Dict[Value, object]:
    """Reduce inputs worth keeping for the current row: computed with a transcendental or a
    division (recomputing them in the output pass would cost more than a load from L1), read
    again by the outputs, and only ever at the current row. Returns value -> RowCacheSource
    (a stack buffer of one row, allocated in the kernel's entry block)."""
    from hlo.passes.util import EXPENSIVE

    from ..elemental import RowCacheSource
    from ..index_trace import trace_reads
    from ..llvm_util import reg_type
    inputs = []
    for r in reduces:
        for v in r.op.operands[:len(r.op.operands) // 2]:
            if v not in env and v.op is not None and v not in inputs and not v.dtype.is_pred:
                inputs.append(v)
    if not inputs:
        return {}
    stop = set(env) | {r for r in reduces}
    rows = tuple(f"r{i}" for i in range(k))
    inner = tuple(f"i{i}" for i in range(len(inner_shape)))
    starts = [(o, rows + inner if o.type.rank > k else rows) for o in outputs]
    found = trace_reads(starts, set(inputs), stop)
    n = int(np.prod(inner_shape)) if inner_shape else 1
    out, used = {}, 0
    for v in inputs:
        idxs = found.get(v) or set()
        if not idxs or any(tuple(i[:k]) != rows for i in idxs):
            continue  # not read again, or read at another row (or an index the tracer lost)
        if not _computes_expensive(v, env, EXPENSIVE):
            continue
        ty = reg_type(v.dtype)  # f16/bf16 are kept as their (exact) f32 register values
        nbytes = n * (8 if v.dtype.bits == 64 else 4 if v.dtype.is_float else v.dtype.bits // 8)
        if used + nbytes > ROW_CACHE_MAX_BYTES:
            continue
        used += nbytes
        with b.goto_entry_block():
            ptr = b.bitcast(b.alloca(ty, size=n), PTR)
        out[v] = RowCacheSource(ptr, inner_shape, ty)
    return out


_INNER_LOOP = op_table.with_trait(op_table.INNER_LOOP)


def _computes_expensive(v: Value, env, expensive) -> bool:
    """Does computing ``v`` elementally involve an op of ``expensive`` (stopping at buffers)?"""
    seen, stack = set(), [v]
    while stack:
        x = stack.pop()
        if x in seen or x in env or x.op is None:
            continue
        seen.add(x)
        if x.op.name in expensive:
            return True
        if x.op.name in _INNER_LOOP:
            continue  # materialized before the kernel's loops
        stack.extend(x.op.operands)
    return False


def _inner_loops(b, em, shape, body):
    if any(s == 0 for s in shape):
        return
    ivs = []

    def rec(d):
        if d == len(shape):
            body(tuple(ivs))
            return
        with for_range(b, 0, shape[d], f"j{d}",
                       interleave=em.inner_interleave if d == len(shape) - 1 else None) as i:
            em.push()
            ivs.append(i)
            rec(d + 1)
            ivs.pop()
            em.pop()

    rec(0)


# Column sums (``float_sum_types``) run over COLUMN_SUM_COLUMNS columns an item with two stack
# rows: a block row (COLUMN_SUM_ROWS input rows summed into it in the block type, from -0.0),
# added after each block into a wide row (f64, from the init value), which is rounded once into
# the output. Each output adds at most COLUMN_SUM_ROWS values in the narrow type, so the error
# does not grow with the column's length. Other column reductions fold into the output row.
COLUMN_SUM_COLUMNS = 512
COLUMN_SUM_ROWS = 128
COLUMN_CHUNK = 256  # columns an item of a column reduction with no kept outer dimension


def column_items(op) -> int:
    """How many parallel items ``emit_column_reduce`` splits ``op`` into."""
    in_t = op.operands[0].type
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    nminor = in_t.shape[order[-1]]
    outer = int(np.prod([in_t.shape[d] for d in order[:-1] if d not in dims]))
    if float_sum_types(op) is not None:
        return outer * -(-nminor // min(nminor, COLUMN_SUM_COLUMNS))
    return outer if len([d for d in order[:-1] if d not in dims]) else -(-nminor // COLUMN_CHUNK)


def emit_column_reduce(cg: Codegen, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                       what: str = "") -> KernelCall:
    """out[kept] = init; for each input element in physical order: out = body(out, x)."""
    if float_sum_types(op) is not None:
        return _emit_column_sum(cg, op, dests, env, what)
    n = len(op.operands) // 2
    inputs, inits = op.operands[:n], op.operands[n:]
    in_t = inputs[0].type
    dims = set(op.attrs["dimensions"])
    reads, nops = collect_reads(list(op.operands), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "colreduce", refs, [True] * n + [False] * len(reads),
                       vector_bits_for(list(op.operands), env))
    em = make_emitter(kb, reads, env)
    b = kb.b
    order = physical_order(in_t)
    minor = order[-1]
    kept_outer = [d for d in order[:-1] if d not in dims]
    reduced = [d for d in order if d in dims]
    kept = [d for d in range(in_t.rank) if d not in dims]
    out_types = [r.type for r in op.results]
    nminor = in_t.shape[minor]
    # Parallel items: the flattened outer kept dims, or chunks of the minor dim if none.
    chunk = COLUMN_CHUNK
    if kept_outer:
        extent = int(np.prod([in_t.shape[d] for d in kept_outer]))
    else:
        extent = -(-nminor // chunk)
    init_vals = [em.at(v, ()) for v in inits]

    with for_range(b, kb.lo, kb.hi, "item") as f:
        em.push()
        full = [None] * in_t.rank
        if kept_outer:
            rem = f
            for d in reversed(kept_outer):
                if d == kept_outer[0]:
                    full[d] = rem
                else:
                    full[d] = b.urem(rem, i64(in_t.shape[d]))
                    rem = b.udiv(rem, i64(in_t.shape[d]))
            j0, j1 = i64(0), i64(nminor)
        else:
            j0 = b.mul(f, i64(chunk))
            j1 = b.add(j0, i64(chunk))
            j1 = b.select(b.icmp_signed("<", j1, i64(nminor)), j1, i64(nminor))

        def out_idx(jv):
            full[minor] = jv
            return tuple(full[d] for d in kept)

        with for_range(b, j0, j1, "init") as j:
            oi = out_idx(j)
            for k in range(n):
                _store(b, em, kb.ptr(dests[k]), out_types[k], oi, init_vals[k])

        def rec(level):
            if level == len(reduced):
                with for_range(b, j0, j1, "j") as j:
                    em.push()
                    oi = out_idx(j)
                    ptrs = []
                    cur = []
                    for k in range(n):
                        off = U.linear_offset(b, oi, U.strides_of(out_types[k]))
                        p = U.elem_ptr(b, kb.ptr(dests[k]), out_types[k].dtype, off)
                        ptrs.append(p)
                        cur.append(U.load_reg(b, p, out_types[k].dtype))
                    full[minor] = j
                    xs = [em.at(v, tuple(full)) for v in inputs]
                    new = em.scalar_region(op.regions[0], cur + xs)
                    for k in range(n):
                        U.store_reg(b, new[k], ptrs[k], out_types[k].dtype)
                    em.pop()
                return
            d = reduced[level]
            with for_range(b, 0, in_t.shape[d], f"r{d}") as i:
                em.push()
                full[d] = i
                rec(level + 1)
                em.pop()

        rec(0)
        em.pop()
    work = in_t.size * max(1, nops)
    return kb.finish(extent, work >= PARALLEL_MIN_WORK, what)


def _emit_column_sum(cg: Codegen, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                     what: str = "") -> KernelCall:
    """A column float sum (see ``COLUMN_SUM_COLUMNS``)."""
    inp, init = op.operands
    in_t = inp.type
    et = in_t.dtype
    blk_et, wide_et = float_sum_types(op)
    blk_ty, wide_ty = U.reg_type(blk_et), U.reg_type(wide_et)
    dims = set(op.attrs["dimensions"])
    reads, nops = collect_reads(list(op.operands), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = KernelBuilder(cg, "colsum", refs, [True] + [False] * len(reads),
                       vector_bits_for(list(op.operands), env))
    em = make_emitter(kb, reads, env)
    b = kb.b
    order = physical_order(in_t)
    minor = order[-1]
    kept_outer = [d for d in order[:-1] if d not in dims]
    reduced = [d for d in order if d in dims]
    kept = [d for d in range(in_t.rank) if d not in dims]
    out_t = op.results[0].type
    nminor = in_t.shape[minor]
    width = min(nminor, COLUMN_SUM_COLUMNS)
    nchunks = -(-nminor // width)
    extent = int(np.prod([in_t.shape[d] for d in kept_outer])) * nchunks
    from ..scalar_ops import convert
    wide_init = convert(cg.ctx, b, em.at(init, ()), et, wide_et)
    with b.goto_entry_block():
        blk = b.alloca(blk_ty, size=width)
        wide = b.alloca(wide_ty, size=width)

    with for_range(b, kb.lo, kb.hi, "item") as f:
        em.push()
        full = [None] * in_t.rank
        rem = b.udiv(f, i64(nchunks))
        for d in reversed(kept_outer):
            if d == kept_outer[0]:
                full[d] = rem
            else:
                full[d] = b.urem(rem, i64(in_t.shape[d]))
                rem = b.udiv(rem, i64(in_t.shape[d]))
        j0 = b.mul(b.urem(f, i64(nchunks)), i64(width))
        j1 = b.add(j0, i64(width))
        j1 = b.select(b.icmp_signed("<", j1, i64(nminor)), j1, i64(nminor))
        cols = b.sub(j1, j0)

        def row(arr, ty, j):
            return b.gep(arr, [j], inbounds=True, source_etype=ty)

        with for_range(b, 0, cols, "init") as j:
            b.store(wide_init, row(wide, wide_ty, j))

        def start_block():
            with for_range(b, 0, cols, "zero") as j:
                b.store(ir.Constant(blk_ty, -0.0), row(blk, blk_ty, j))

        def element(ivs):
            for d in reduced:
                full[d] = ivs[d]
            with for_range(b, j0, j1, "j") as j:
                em.push()
                full[minor] = j
                x = em.at(inp, tuple(full))
                x = b.fpext(x, blk_ty) if x.type != blk_ty else x
                p = row(blk, blk_ty, b.sub(j, j0))
                b.store(b.fadd(b.load(p, typ=blk_ty), x), p)
                em.pop()

        def end_block():
            with for_range(b, 0, cols, "add") as j:
                p = row(wide, wide_ty, j)
                t = b.load(row(blk, blk_ty, j), typ=blk_ty)
                t = b.fpext(t, wide_ty) if blk_ty != wide_ty else t
                b.store(b.fadd(b.load(p, typ=wide_ty), t), p)

        levels = [(d, 0, in_t.shape[d], in_t.shape[d]) for d in reduced]
        blocked_loops(b, levels, COLUMN_SUM_ROWS, start_block, end_block, element)
        with for_range(b, j0, j1, "out") as j:
            full[minor] = j
            oi = tuple(full[d] for d in kept)
            t = b.load(row(wide, wide_ty, b.sub(j, j0)), typ=wide_ty)
            _store(b, em, kb.ptr(dests[0]), out_t, oi, convert(cg.ctx, b, t, wide_et, et))
        em.pop()
    work = in_t.size * max(1, nops)
    return kb.finish(extent, work >= PARALLEL_MIN_WORK, what)


# ------------------------------------------------------------------------------------------
# Reductions to a few values, split over threads
# ------------------------------------------------------------------------------------------

SPLIT_MIN_ELEMENTS = 1 << 18


def _init_is_idempotent(op) -> bool:
    """True if applying the reduction's body to its init value any number of extra times
    changes nothing (init (+) init == init): max/min/and/or with any init, add/xor with 0,
    multiply with 1. Then partial reductions may each start from the init value and the result
    equals the one-init result exactly (as the interpreter computes it)."""
    if len(op.operands) != 2:
        return False
    body = op.regions[0]
    if len(body.ops) != 1 or len(body.outputs) != 1:
        return False
    bop = body.ops[0]
    if body.outputs[0] is not bop.results[0] or set(bop.operands) != set(body.args):
        return False
    if op_table.get(bop.name).has(op_table.IDEMPOTENT):
        return True
    init = op.operands[1]
    if init.op is None or init.op.name != "constant":
        return False
    v = init.op.attrs["value"]
    want = op_table.identity(bop.name, init.type.dtype)
    return want is not None and bool(np.all(v.astype(np.float64) == want))


def wants_split_reduce(op, threads: int) -> bool:
    """A big reduction with too few outputs to keep every thread busy (a full sum, a mean over
    the batch...): worth splitting its outermost reduced dimension into partial results."""
    if threads < 2 or not _init_is_idempotent(op):
        return False
    t = op.operands[0].type
    out = op.results[0].type.size
    if t.size < SPLIT_MIN_ELEMENTS or out == 0:
        return False
    order = physical_order(t)
    kept_outer = [d for d in order if d not in op.attrs["dimensions"]]
    r0 = [d for d in order if d in op.attrs["dimensions"]][0]
    # rows available to a row-style loop nest: the kept dims outside the reduced ones
    rows = int(np.prod([t.shape[d] for d in kept_outer[:-1]])) if len(kept_outer) > 1 else 1
    if is_column_reduce(op) and column_items(op) >= 2 * threads:
        # the column kernel's items (runs of columns) keep the threads busy and read the rows
        # in memory order; the partial sums below would walk each column down its stride
        return False
    return rows < 2 * threads and t.shape[r0] >= 2 * threads


def emit_split_reduce(cg: Codegen, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                      what: str = "") -> list:
    """Partial reductions over chunks of the outermost reduced dimension (in parallel), then
    one combine of the partials. Each chunk starts from the init value, which
    ``wants_split_reduce`` only allows when that changes nothing (an idempotent init). A float
    sum's chunks sum in blocks (``SUM_BLOCK``) into f64 partials, combined in f64 with the init
    value and rounded once."""
    if float_sum_types(op) is not None:
        return _emit_split_sum(cg, lw, op, dests, env, what)
    n = len(op.operands) // 2
    inputs, inits = op.operands[:n], op.operands[n:]
    in_t = inputs[0].type
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    reduced = [d for d in order if d in dims]
    r0 = reduced[0]
    kept = [d for d in range(in_t.rank) if d not in dims]
    kept_order = [d for d in order if d not in dims]
    n0 = in_t.shape[r0]
    P = min(n0, 8 * cg.threads)
    chunk = -(-n0 // P)
    P = -(-n0 // chunk)
    out_types = [r.type for r in op.results]
    osize = out_types[0].size
    parts = [lw.scratch(P * osize * t.dtype.itemsize) for t in out_types]
    part_t = [TensorType((P, osize), t.dtype) for t in out_types]

    # Kernel A: partial[p, o] over r0 in chunk p.
    reads, nops = collect_reads(list(op.operands), env)
    kb = KernelBuilder(cg, "reduce_partial", parts + [env[v] for v in reads], [True] * n + [False] * len(reads),
                       vector_bits_for(list(op.operands), env))
    em = make_emitter(kb, reads, env)
    b = kb.b
    init_vals = [em.at(v, ()) for v in inits]
    accs = [U.entry_alloca(b, v.type) for v in init_vals]
    with for_range(b, kb.lo, kb.hi, "part") as p:
        em.push()
        full = [None] * in_t.rank
        lo = b.mul(p, i64(chunk))
        hi = b.add(lo, i64(chunk))
        hi = b.select(b.icmp_signed("<", hi, i64(n0)), hi, i64(n0))

        def over_kept(level):
            if level == len(kept_order):
                for a, v in zip(accs, init_vals):
                    b.store(v, a)

                def over_reduced(k):
                    if k == len(reduced):
                        em.push()
                        xs = [em.at(v, tuple(full)) for v in inputs]
                        cur = [b.load(a, typ=v.type) for a, v in zip(accs, init_vals)]
                        new = em.scalar_region(op.regions[0], cur + xs, reassoc=True)
                        for a, v in zip(accs, new):
                            b.store(v, a)
                        em.pop()
                        return
                    d = reduced[k]
                    start, end = (lo, hi) if k == 0 else (0, in_t.shape[d])
                    with for_range(b, start, end, f"r{d}") as i:
                        full[d] = i
                        over_reduced(k + 1)

                over_reduced(0)
                oidx = tuple(full[d] for d in kept)
                lin = U.linear_offset(b, oidx, U.strides_of(out_types[0].with_layout(None)))
                for k in range(n):
                    pt = part_t[k]
                    off = b.add(b.mul(p, i64(osize)), lin)
                    U.store_reg(b, b.load(accs[k], typ=init_vals[k].type),
                                U.elem_ptr(b, kb.ptr(parts[k]), pt.dtype, off), pt.dtype)
                return
            d = kept_order[level]
            with for_range(b, 0, in_t.shape[d], f"k{d}") as i:
                em.push()
                full[d] = i
                over_kept(level + 1)
                em.pop()

        over_kept(0)
        em.pop()
    steps = [kb.finish(P, True, f"{what} (partial sums over {P} chunks)")]

    # Kernel B: out[o] = body(... body(init, partial[0, o]) ..., partial[P-1, o]).
    kb = KernelBuilder(cg, "reduce_combine", list(dests) + parts + [env[v] for v in reads
                                                                  if v in inits],
                       [True] * n + [False] * (n + len([v for v in reads if v in inits])))
    em = make_emitter(kb, [v for v in reads if v in inits], env)
    b = kb.b
    init_vals = [em.at(v, ()) for v in inits]
    accs = [U.entry_alloca(b, v.type) for v in init_vals]
    with for_range(b, kb.lo, kb.hi, "once"):
        with for_range(b, 0, osize, "o") as o:
            em.push()
            for a, v in zip(accs, init_vals):
                b.store(v, a)
            with for_range(b, 0, P, "p") as p:
                em.push()
                off = b.add(b.mul(p, i64(osize)), o)
                xs = [U.load_reg(b, U.elem_ptr(b, kb.ptr(parts[k]), part_t[k].dtype, off), part_t[k].dtype)
                      for k in range(n)]
                cur = [b.load(a, typ=v.type) for a, v in zip(accs, init_vals)]
                new = em.scalar_region(op.regions[0], cur + xs)
                for a, v in zip(accs, new):
                    b.store(v, a)
                em.pop()
            # o is the row-major linear index of the output; store in the output's layout
            idx = _row_index(b, o, out_types[0].shape)
            for k in range(n):
                _store(b, em, kb.ptr(dests[k]), out_types[k], idx, b.load(accs[k], typ=init_vals[k].type))
            em.pop()
    steps.append(kb.finish(1, False, f"{what} (combine)"))
    return steps


def _split_shape(cg: Codegen, op):
    in_t = op.operands[0].type
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    reduced = [d for d in order if d in dims]
    n0 = in_t.shape[reduced[0]]
    P = min(n0, 8 * cg.threads)
    chunk = -(-n0 // P)
    return reduced, n0, -(-n0 // chunk), chunk


def _emit_split_sum(cg: Codegen, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                    what: str = "") -> list:
    """``emit_split_reduce`` of a float sum: f64 partials over chunks of the outermost reduced
    dimension, each summed in blocks; then init + the partials in f64, rounded once."""
    from ..elemental import SUM_BLOCK
    inp, init = op.operands
    in_t = inp.type
    blk_et, wide_et = float_sum_types(op)
    blk_ty, wide_ty = U.reg_type(blk_et), U.reg_type(wide_et)
    dims = set(op.attrs["dimensions"])
    order = physical_order(in_t)
    reduced, n0, P, chunk = _split_shape(cg, op)
    kept = [d for d in range(in_t.rank) if d not in dims]
    kept_order = [d for d in order if d not in dims]
    out_t = op.results[0].type
    osize = out_t.size
    part = lw.scratch(P * osize * 8)

    # Kernel A: part[p, o] = the sum of chunk p of output o's elements.
    reads, nops = collect_reads([inp], env)
    kb = KernelBuilder(cg, "sum_partial", [part] + [env[v] for v in reads], [True] + [False] * len(reads),
                       vector_bits_for([inp], env))
    em = make_emitter(kb, reads, env)
    b = kb.b
    if column_partials.applies(op):   # kept dimensions inner: a chunk read once, by rows
        column_partials.emit_column_partials(cg, kb, em, op, part, n0, chunk)
        return [column_partials.finish(kb, P, what)] + _split_sum_combine(cg, op, dests, env, part, P, what)
    blk = U.entry_alloca(b, blk_ty)
    wide = U.entry_alloca(b, wide_ty)
    with for_range(b, kb.lo, kb.hi, "part") as p:
        em.push()
        full = [None] * in_t.rank
        lo = b.mul(p, i64(chunk))
        hi = b.add(lo, i64(chunk))
        hi = b.select(b.icmp_signed("<", hi, i64(n0)), hi, i64(n0))

        def element(ivs):
            for d in reduced:
                full[d] = ivs[d]
            em.push()
            x = em.at(inp, tuple(full))
            x = b.fpext(x, blk_ty) if x.type != blk_ty else x
            b.store(b.fadd(b.load(blk, typ=blk_ty), x, flags=("reassoc",)), blk)
            em.pop()

        start_block, end_block = block_sum_hooks(b, blk, blk_ty, wide, wide_ty)

        def over_kept(level):
            if level == len(kept_order):
                b.store(ir.Constant(wide_ty, -0.0), wide)
                levels = [(d, lo, hi, chunk) if k == 0 else (d, 0, in_t.shape[d], in_t.shape[d])
                          for k, d in enumerate(reduced)]
                blocked_loops(b, levels, SUM_BLOCK, start_block, end_block, element)
                oidx = tuple(full[d] for d in kept)
                lin = U.linear_offset(b, oidx, U.strides_of(out_t.with_layout(None)))
                off = b.add(b.mul(p, i64(osize)), lin) if lin is not None else b.mul(p, i64(osize))
                U.store_reg(b, b.load(wide, typ=wide_ty), U.elem_ptr(b, kb.ptr(part), wide_et, off), wide_et)
                return
            d = kept_order[level]
            with for_range(b, 0, in_t.shape[d], f"k{d}") as i:
                em.push()
                full[d] = i
                over_kept(level + 1)
                em.pop()

        over_kept(0)
        em.pop()
    return [kb.finish(P, True, f"{what} (partial sums over {P} chunks)")] + \
        _split_sum_combine(cg, op, dests, env, part, P, what)


def _split_sum_combine(cg: Codegen, op, dests: Sequence[BufRef], env: Dict[Value, BufRef], part: BufRef,
                       P: int, what: str) -> list:
    """Kernel B of ``_emit_split_sum``: out[o] = round(init + part[0, o] + ... + part[P-1, o]) (in f64)."""
    from ..scalar_ops import convert
    init = op.operands[1]
    et = op.operands[0].type.dtype
    wide_et = float_sum_types(op)[1]
    wide_ty = U.reg_type(wide_et)
    out_t = op.results[0].type
    osize = out_t.size
    steps: list = []
    ireads = [v for v in collect_reads([init], env)[0]]
    kb = KernelBuilder(cg, "sum_combine", list(dests) + [part] + [env[v] for v in ireads],
                       [True] + [False] * (1 + len(ireads)))
    em = make_emitter(kb, ireads, env)
    b = kb.b
    iw = convert(cg.ctx, b, em.at(init, ()), et, wide_et)
    acc = U.entry_alloca(b, wide_ty)
    with for_range(b, kb.lo, kb.hi, "once"):
        with for_range(b, 0, osize, "o") as o:
            b.store(iw, acc)
            with for_range(b, 0, P, "p") as p:
                off = b.add(b.mul(p, i64(osize)), o)
                x = U.load_reg(b, U.elem_ptr(b, kb.ptr(part), wide_et, off), wide_et)
                b.store(b.fadd(b.load(acc, typ=wide_ty), x), acc)
            idx = _row_index(b, o, out_t.shape)
            _store(b, em, kb.ptr(dests[0]), out_t, idx,
                   convert(cg.ctx, b, b.load(acc, typ=wide_ty), wide_et, et))
    steps.append(kb.finish(1, False, f"{what} (combine)"))
    return steps
