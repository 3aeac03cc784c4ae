"""GPU kernels: ``ptx_kernel`` functions of an ``nvptx64-nvidia-cuda`` module, each one
``Launch`` step.

Every kernel is ``void name(ptr p0, ..., ptr pK)``: its buffers (device pointers, global
memory), deduplicated; sizes are compile-time constants. A parameter that overlaps no other
buffer of the launch gets ``noalias`` (and LLVM then reads the unwritten ones through the
non-coherent cache, ``ld.global.nc``).

Kinds here (the lowering in ``lower.py`` picks one per op or fusion):

* ``emit_loop_kernel``: one thread per output element, grid-stride over the output's physical
  (row-major in its layout) positions, so consecutive threads touch consecutive addresses.
  Fused producers are computed in place by the elemental emitter; ops whose element needs a loop
  (reduce over major dimensions, i.e. column reductions; reduce_window, convolution, a generated
  dot) run that loop per output element.
* ``emit_reduce_kernel``: a reduction that reduces the physically minor dimension (row
  reduction, full reduction): a group of threads (a warp, or the whole block for long rows) per
  output element, each thread folding a strided part of the row, then a ``shfl.sync``
  butterfly within the warp and, for a block, one partial a warp through shared memory.
* ``emit_row_kernel``: a region that reduces trailing dimensions and reads the results back per
  row (softmax, layer norm): a group per row computes each reduction cooperatively (every thread
  ends with the row's value) and then the row's outputs, strided over the group.

Launch shapes are a function of the device (``device.py``: SM count): grids are capped at
as many blocks as the multiprocessors hold at once and grid-stride loops cover the rest.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import llvmlite.ir as ir

from hlo.ir.core import Value
from hlo.ir.types import TensorType
from hlo.runtime.steps import BufRef, Launch
from .. import llvm_util as U, nvptx
from ..elemental import BufferSource, ElementalEmitter
from ..kernel_emitter import kernel_buffers, root_values
from ..llvm_util import I1, I32, I64, PTR, VOID, ModuleContext, for_range, i64

BLOCK = 256  # threads a block
WARP = 32
THREADS_PER_SM = 2048  # resident threads a multiprocessor (sm_80, sm_90)
# A row of at most this many elements is reduced by one warp, longer ones by a whole block.
WARP_ROW_MAX = 1024
# Loop kernels: elements a thread takes per iteration of its grid-stride loop (independent
# loads in flight)
UNROLL = 4
# Row kernels keep a thread's part of the row in registers (read once) when it has at most this
# many elements; a group of up to MAX_BLOCK threads shares a row.
ROW_REGS = 16
MAX_BLOCK = 1024
FULL_MASK = ir.Constant(I32, -1)


def i32(n: int) -> ir.Constant:
    return ir.Constant(I32, int(n))


class GpuCodegen:
    """State shared by all kernels of one executable."""

    def __init__(self, ctx: ModuleContext, device):
        self.ctx = ctx
        self.device = device  # device.LaunchDevice: target, sm_count
        self.kernels: Dict[str, ir.Function] = {}
        self.constants: Dict[int, np.ndarray] = {}
        self._shared = 0

    def const_ref(self, arr: np.ndarray) -> BufRef:
        k = len(self.constants)
        self.constants[k] = np.ascontiguousarray(arr)
        return BufRef("const", k, 0, int(arr.nbytes))

    def grid(self, items: int, per_block: int = BLOCK, block: int = BLOCK) -> int:
        """Blocks of ``block`` threads for ``items`` work items of ``per_block`` a block: enough
        to cover them, at most as many as fill every multiprocessor (``THREADS_PER_SM`` resident
        threads; grid-stride loops do the rest)."""
        need = max(1, -(-int(items) // per_block))
        return max(1, min(need, self.device.sm_count * max(1, THREADS_PER_SM // block)))

    def shared_array(self, ty: ir.Type, count: int) -> ir.GlobalVariable:
        """A static shared-memory array of ``count`` elements of ``ty`` (one per call site)."""
        arr = ir.ArrayType(ty, count)
        g = ir.GlobalVariable(self.ctx.module, arr, self.ctx.unique(f"shared.{self._shared}"), addrspace=3)
        self._shared += 1
        g.initializer = ir.Constant(arr, ir.Undefined)
        g.linkage = "internal"
        g.align = 16
        g.type = ir.PointerType(addrspace=3)  # llvmlite types it as a typed pointer otherwise
        return g


class GpuKernel:
    """Builds one kernel function over a deduplicated list of buffers."""

    def __init__(self, cg: GpuCodegen, base_name: str, refs: Sequence[BufRef], writes: Sequence[bool]):
        self.cg = cg
        self.name = cg.ctx.unique("k_" + base_name.replace(".", "_")).replace(".", "__")
        uniq, self.writes, alone = kernel_buffers(refs, writes)
        self.refs = uniq
        fn = nvptx.kernel(cg.ctx, self.name, [PTR] * len(uniq))
        for a, ok in zip(fn.args, alone):
            if ok:
                a.add_attribute("noalias")
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self._sreg: Dict[str, ir.Value] = {}

    def ptr(self, ref: BufRef) -> ir.Value:
        return self.fn.args[self.refs.index(ref)]

    def sreg(self, name: str) -> ir.Value:
        """A special register (``tid.x``, ``ctaid.x``, ``ntid.x``, ``nctaid.x``) as i64, read
        once at the kernel's entry."""
        v = self._sreg.get(name)
        if v is None:
            reg, axis = name.split(".")
            with self.b.goto_entry_block():
                v = self.b.zext(nvptx.thread_index(self.cg.ctx, self.b, reg, axis), I64)
            self._sreg[name] = v
        return v

    def thread_range(self, block: int = BLOCK):
        """(this thread's first global index, the grid's thread count) for grid-stride loops."""
        b = self.b
        start = b.add(b.mul(self.sreg("ctaid.x"), i64(block)), self.sreg("tid.x"))
        return start, b.mul(self.sreg("nctaid.x"), i64(block))

    def finish(self, grid: int, block: int, what: str, shared_bytes: int = 0) -> Launch:
        self.b.ret_void()
        self.cg.kernels[self.name] = self.fn
        return Launch(self.name, list(self.refs), list(self.writes), (int(grid), 1, 1),
                      (int(block), 1, 1), int(shared_bytes), [], what)


def make_emitter(kb: GpuKernel, reads: Sequence[Value], env: Dict[Value, BufRef]) -> ElementalEmitter:
    sources = {v: BufferSource(kb.ptr(env[v]), v.type) for v in reads}
    return ElementalEmitter(kb.cg.ctx, kb.b, sources)


def physical_index(b: ir.IRBuilder, lin: ir.Value, t: TensorType) -> Tuple[ir.Value, ...]:
    """The logical index of physical (layout-order) position ``lin`` of ``t``."""
    idx: List[Optional[ir.Value]] = [None] * t.rank
    rem = lin
    order = list(t.minor_to_major)  # minor first
    for k, d in enumerate(order):
        if k == len(order) - 1:
            idx[d] = rem
        elif t.shape[d] == 1:
            idx[d] = i64(0)
        else:
            idx[d] = b.urem(rem, i64(t.shape[d]))
            rem = b.udiv(rem, i64(t.shape[d]))
    return tuple(idx)


def row_major_index(b: ir.IRBuilder, lin: ir.Value, shape: Sequence[int]) -> Tuple[ir.Value, ...]:
    return physical_index(b, lin, TensorType(tuple(shape), _ANY_DTYPE))


from hlo.ir.types import f32 as _ANY_DTYPE  # noqa: E402  (only the shape matters above)


def store(b: ir.IRBuilder, ptr: ir.Value, t: TensorType, idx, val) -> None:
    off = U.linear_offset(b, idx, U.strides_of(t))
    U.store_reg(b, val, U.elem_ptr(b, ptr, t.dtype, off), t.dtype)


# ------------------------------------------------------------------------------------------
# Loop kernels
# ------------------------------------------------------------------------------------------

def emit_loop_kernel(cg: GpuCodegen, roots, env: Dict[Value, BufRef], name: str = "loop",
                     what: str = "") -> Launch:
    """One thread per element of the roots' common index space (``Root``s of the lowering)."""
    from hlo.backends.cpu.kernels import collect_reads
    t: TensorType = roots[0].dest_type
    reads, _ = collect_reads([r.value for r in roots], env)
    refs = [r.dest for r in roots] + [env[v] for v in reads]
    kb = GpuKernel(cg, name, refs, [True] * len(roots) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    n = t.size
    start, step = kb.thread_range()

    def element(lin):
        em.push()
        idx = physical_index(b, lin, t)
        for r, val in zip(roots, root_values(cg.ctx, b, em, roots, idx)):
            store(b, kb.ptr(r.dest), r.dest_type, idx, val)
        em.pop()

    unroll = UNROLL if n >= UNROLL * BLOCK * cg.device.sm_count else 1
    if unroll > 1:
        # whole groups of ``unroll`` elements (a grid-stride apart) while they all exist, then
        # one at a time
        last = b.sub(i64(n), b.mul(step, i64(unroll - 1)))
        with for_range(b, start, last, "e4", step=b.mul(step, i64(unroll))) as lin:
            for k in range(unroll):
                element(b.add(lin, b.mul(step, i64(k))) if k else lin)
        start = lin  # the loop's exit value: where the single steps go on
    with for_range(b, start, n, "e", step=step) as lin:
        element(lin)
    return kb.finish(cg.grid(n), BLOCK, what)


# ------------------------------------------------------------------------------------------
# Cooperative reductions (a warp or a block per output element)
# ------------------------------------------------------------------------------------------

def _shfl(kb: GpuKernel, v: ir.Value, lane_arg: ir.Value, mode: str) -> ir.Value:
    """``shfl.sync.<mode>`` of a register value of any width (split into 32-bit words)."""
    b = kb.b
    f = kb.cg.ctx.declare(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
    clamp = i32(31 if mode in ("bfly", "idx") else 0)
    ty = v.type
    if isinstance(ty, ir.LiteralStructType):  # a complex value: part by part
        out = ir.Constant(ty, ir.Undefined)
        for k in range(len(ty.elements)):
            out = b.insert_value(out, _shfl(kb, b.extract_value(v, k), lane_arg, mode), k)
        return out
    if isinstance(ty, (ir.FloatType, ir.DoubleType)):
        ity = ir.IntType(32 if isinstance(ty, ir.FloatType) else 64)
        return b.bitcast(_shfl(kb, b.bitcast(v, ity), lane_arg, mode), ty)
    w = ty.width
    if w < 32:
        return b.trunc(b.call(f, [FULL_MASK, b.zext(v, I32), lane_arg, clamp]), ty)
    if w == 32:
        return b.call(f, [FULL_MASK, v, lane_arg, clamp])
    lo = b.call(f, [FULL_MASK, b.trunc(v, I32), lane_arg, clamp])
    hi = b.call(f, [FULL_MASK, b.trunc(b.lshr(v, ir.Constant(ty, 32)), I32), lane_arg, clamp])
    return b.or_(b.zext(lo, ty), b.shl(b.zext(hi, ty), ir.Constant(ty, 32)))


def _barrier(kb: GpuKernel) -> None:
    kb.b.call(kb.cg.ctx.declare("llvm.nvvm.barrier0", VOID, []), [])


class _Partial:
    """A thread's partial result of a reduction: accumulator slots plus a flag saying whether
    it holds anything yet (the init value is applied once, at the end, as the spec's
    ``body(init, ...)``)."""

    def __init__(self, b: ir.IRBuilder, inits: Sequence[ir.Value]):
        self.b = b
        self.types = [v.type for v in inits]
        self.slots = [U.entry_alloca(b, t) for t in self.types]
        self.valid = U.entry_alloca(b, I1)
        for s, v in zip(self.slots, inits):  # never read while invalid; stored so nothing is undef
            b.store(v, s)
        b.store(ir.Constant(I1, 0), self.valid)

    def load(self):
        return [self.b.load(s, typ=t) for s, t in zip(self.slots, self.types)], \
            self.b.load(self.valid, typ=I1)

    def fold(self, em: ElementalEmitter, body, xs, xvalid: Optional[ir.Value] = None) -> None:
        """self = valid ? body(self, xs) : xs (where ``xvalid``, default true)."""
        b = self.b
        cur, valid = self.load()
        new = em.scalar_region(body, cur + list(xs))
        out = [b.select(valid, n, x) for n, x in zip(new, xs)]
        if xvalid is not None:
            out = [b.select(xvalid, o, c) for o, c in zip(out, cur)]
            valid_new = b.or_(valid, xvalid)
        else:
            valid_new = ir.Constant(I1, 1)
        for s, o in zip(self.slots, out):
            b.store(o, s)
        b.store(valid_new, self.valid)


def _warp_combine(kb: GpuKernel, em: ElementalEmitter, body, part: _Partial) -> None:
    """Butterfly over the warp; afterwards every lane holds lane 0's total."""
    b = kb.b
    for off in (16, 8, 4, 2, 1):
        cur, valid = part.load()
        other = [_shfl(kb, v, i32(off), "bfly") for v in cur]
        ov = _shfl(kb, valid, i32(off), "bfly")
        em.push()
        part.fold(em, body, other, ov)
        em.pop()
    cur, valid = part.load()
    for s, v in zip(part.slots, cur):
        b.store(_shfl(kb, v, i32(0), "idx"), s)
    b.store(_shfl(kb, valid, i32(0), "idx"), part.valid)


class Group:
    """The threads that cooperate on one output element or row: a warp (``size`` 32, several
    groups a block) or a whole block (``size == block``). ``lane``: the thread's position in the
    group; ``index``: the group's number in the grid; ``stride``: groups in the grid."""

    def __init__(self, kb: GpuKernel, size: int, block: int = BLOCK):
        b = kb.b
        assert size == WARP or size == block, (size, block)
        self.kb, self.size, self.block = kb, size, block
        tid = kb.sreg("tid.x")
        per_block = block // size
        if size == block:
            self.lane = tid
            self.index = kb.sreg("ctaid.x")
        else:
            self.lane = b.urem(tid, i64(size))
            self.index = b.add(b.mul(kb.sreg("ctaid.x"), i64(per_block)), b.udiv(tid, i64(size)))
        self.stride = b.mul(kb.sreg("nctaid.x"), i64(per_block))
        self.per_block = per_block
        self.warp = b.udiv(tid, i64(WARP))
        self.lane_in_warp = b.urem(tid, i64(WARP))

    def grid(self, cg: "GpuCodegen", groups: int) -> int:
        return cg.grid(groups, self.per_block, self.block)


def group_size(k: int) -> int:
    return WARP if k <= WARP_ROW_MAX else BLOCK


def coop_reduce(kb: GpuKernel, em: ElementalEmitter, g: Group, rop, kept_idx,
                positions: Optional[Sequence[Tuple[tuple, ir.Value]]] = None) -> List[ir.Value]:
    """The results of reduce op ``rop`` at result index ``kept_idx``, computed by the group
    (every thread of the group gets them). The reduced positions are visited in the input's
    physical order, the group's threads taking consecutive ones; or, with ``positions``, this
    thread folds exactly those (full input index, in range) pairs, unrolled (the row kernel's
    registers: the same index objects later read the same cached elements)."""
    b = kb.b
    n = len(rop.operands) // 2
    inputs, inits = rop.operands[:n], rop.operands[n:]
    dims = list(rop.attrs["dimensions"])
    in_t = inputs[0].type
    body = rop.regions[0]
    init_vals = [em.at(v, ()) for v in inits]
    part = _Partial(b, init_vals)
    if positions is not None:
        for full, ok in positions:
            xs = [em.at(v, tuple(full)) for v in inputs]
            em.push()
            part.fold(em, body, xs, ok)
            em.pop()
    else:
        kept = [d for d in range(in_t.rank) if d not in dims]
        red_t = TensorType(tuple(in_t.shape[d] for d in dims),
                           in_t.dtype, tuple(dims.index(d) for d in in_t.minor_to_major if d in dims))
        with for_range(b, g.lane, red_t.size, "r", step=g.size) as r:
            em.push()
            ridx = physical_index(b, r, red_t)
            full: List[Optional[ir.Value]] = [None] * in_t.rank
            for k, d in enumerate(kept):
                full[d] = kept_idx[k]
            for k, d in enumerate(dims):
                full[d] = ridx[k]
            xs = [em.at(v, tuple(full)) for v in inputs]
            part.fold(em, body, xs)
            em.pop()
    _warp_combine(kb, em, body, part)
    if g.size > WARP:
        nw = g.size // WARP
        shared = [kb.cg.shared_array(_shared_ty(t), nw) for t in part.types]
        sflag = kb.cg.shared_array(ir.IntType(8), nw)
        cur, valid = part.load()
        with b.if_then(b.icmp_unsigned("==", g.lane_in_warp, i64(0))):
            for s_, v in zip(shared, cur):
                b.store(_to_shared(b, v), b.gep(s_, [g.warp], source_etype=_shared_ty(v.type)))
            b.store(b.zext(valid, ir.IntType(8)), b.gep(sflag, [g.warp], source_etype=ir.IntType(8)))
        _barrier(kb)
        # every warp folds the nw partials (each lane < nw reads one) and ends with the total
        has = b.icmp_unsigned("<", g.lane_in_warp, i64(nw))
        li = b.select(has, g.lane_in_warp, i64(0))
        vals = [_from_shared(b, b.load(b.gep(s_, [li], source_etype=_shared_ty(t)), typ=_shared_ty(t)), t)
                for s_, t in zip(shared, part.types)]
        fl = b.load(b.gep(sflag, [li], source_etype=ir.IntType(8)), typ=ir.IntType(8))
        fv = b.and_(has, b.icmp_unsigned("!=", fl, ir.Constant(ir.IntType(8), 0)))
        for s_, v in zip(part.slots, vals):
            b.store(v, s_)
        b.store(fv, part.valid)
        _warp_combine(kb, em, body, part)
        _barrier(kb)  # the shared slots are reused by the group's next element
    cur, valid = part.load()
    em.push()
    fin = em.scalar_region(body, list(init_vals) + cur)
    em.pop()
    return [b.select(valid, f, iv) for f, iv in zip(fin, init_vals)]


def _shared_ty(t: ir.Type) -> ir.Type:
    return ir.IntType(8) if isinstance(t, ir.IntType) and t.width == 1 else t


def _to_shared(b, v):
    return b.zext(v, ir.IntType(8)) if isinstance(v.type, ir.IntType) and v.type.width == 1 else v


def _from_shared(b, v, t):
    return b.trunc(v, I1) if isinstance(t, ir.IntType) and t.width == 1 else v


def emit_reduce_kernel(cg: GpuCodegen, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                       what: str = "") -> Launch:
    """A reduce op (its inputs possibly fused producers) with a group per output element."""
    from hlo.backends.cpu.kernels import collect_reads
    res = [r for r in op.results]
    reads, _ = collect_reads(list(op.operands), env)
    refs = list(dests) + [env[v] for v in reads]
    kb = GpuKernel(cg, "reduce", refs, [True] * len(dests) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    in_t = op.operands[0].type
    out_t = res[0].type
    K = int(np.prod([in_t.shape[d] for d in op.attrs["dimensions"]])) if op.attrs["dimensions"] else 1
    g = Group(kb, group_size(K))
    M = out_t.size
    with for_range(b, g.index, M, "o", step=g.stride) as o:
        em.push()
        idx = physical_index(b, o, out_t)
        vals = coop_reduce(kb, em, g, op, idx)
        with b.if_then(b.icmp_unsigned("==", g.lane, i64(0))):
            for r, d, v in zip(res, dests, vals):
                store(b, kb.ptr(d), r.type, idx, v)
        em.pop()
    return kb.finish(g.grid(cg, M), g.block, what)


def is_row_reduce(op) -> bool:
    """Whether a reduce op reduces its input's physically minor dimension (or everything)."""
    in_t = op.operands[0].type
    dims = set(op.attrs["dimensions"])
    if not dims or in_t.size == 0:
        return False
    minor = [d for d in in_t.minor_to_major if in_t.shape[d] != 1]
    return not minor or minor[0] in dims or op.results[0].type.size == 1


# ------------------------------------------------------------------------------------------
# Row kernels (softmax, layer norm)
# ------------------------------------------------------------------------------------------

def row_group(inner: int) -> Tuple[int, int, bool]:
    """(group size, block size, row in registers) of a row kernel over rows of ``inner``
    elements: a warp (8 rows a block) while each lane holds at most ``ROW_REGS`` of them, else a
    block of up to ``MAX_BLOCK`` threads sized so that each holds at most ``ROW_REGS``; rows
    longer than ``MAX_BLOCK * 2 * ROW_REGS`` are streamed (read once per pass) by a full block."""
    if inner <= WARP * ROW_REGS:
        return WARP, BLOCK, True
    need = -(-inner // ROW_REGS)
    size = min(MAX_BLOCK, -(-need // WARP) * WARP)
    size = 1 << (size - 1).bit_length()  # a power of two: the shared partials' fold is a butterfly
    size = min(size, MAX_BLOCK)
    return size, size, -(-inner // size) <= 2 * ROW_REGS


def emit_row_kernel(cg: GpuCodegen, k: int, reduces: Sequence[Value], outputs, env: Dict[Value, BufRef],
                    in_shape, name: str = "rows", what: str = "") -> Launch:
    """Rows are the first ``k`` dimensions of ``in_shape``; a group per row. Where the row fits
    (``row_group``), each thread's elements (``lane + j * group``) are unrolled: every value
    of the row, the input's elements and intermediates such as softmax's exponentials, is
    computed once into registers and read back by the later reductions and the outputs."""
    from hlo.backends.cpu.kernels import collect_reads
    reads, _ = collect_reads([v for v, _ in outputs], env)
    refs = [r for _, r in outputs] + [env[v] for v in reads]
    kb = GpuKernel(cg, name, refs, [True] * len(outputs) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    O, I = tuple(in_shape[:k]), tuple(in_shape[k:])
    rows = int(np.prod(O)) if O else 1
    inner = int(np.prod(I)) if I else 1
    size, block, in_regs = row_group(inner)
    g = Group(kb, size, block)
    with for_range(b, g.index, rows, "row", step=g.stride) as f:
        em.push()
        ridx = row_major_index(b, f, O)
        positions = None
        if in_regs:
            positions = []
            for j in range(-(-inner // size)):
                e = b.add(g.lane, i64(j * size))
                ok = b.icmp_unsigned("<", e, i64(inner))
                if (j + 1) * size <= inner:
                    ok = ir.Constant(I1, 1)  # every lane's element exists
                    ec = e
                else:
                    ec = b.select(ok, e, i64(inner - 1))  # read a valid element, drop it
                positions.append((ridx + row_major_index(b, ec, I), ok))
        for r in reduces:  # each reduction once per row, in region order; all threads get it
            rop = r.op
            vals = coop_reduce(kb, em, g, rop, ridx, positions)
            for res, v in zip(rop.results, vals):
                em._remember(res, ridx, v)
        for v, ref in outputs:
            if v.type.shape == O:
                val = em.at(v, ridx)
                with b.if_then(b.icmp_unsigned("==", g.lane, i64(0))):
                    store(b, kb.ptr(ref), v.type, ridx, val)
                continue
            if positions is not None:
                for full, ok in positions:
                    val = em.at(v, full)
                    with b.if_then(ok):
                        store(b, kb.ptr(ref), v.type, full, val)
                continue
            with for_range(b, g.lane, inner, "c", step=g.size) as c:
                em.push()
                full = ridx + row_major_index(b, c, I)
                store(b, kb.ptr(ref), v.type, full, em.at(v, full))
                em.pop()
        em.pop()
    return kb.finish(g.grid(cg, rows), g.block, what)
