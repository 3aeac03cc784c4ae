"""GPU kernels: ``ptx_kernel`` functions of an ``nvptx64-nvidia-cuda`` module, each one
``Launch`` step.

Every kernel is ``void name(ptr p0, ..., ptr pK)``: its buffers (device pointers, global
memory), deduplicated; sizes are compile-time constants. A parameter that overlaps no other
buffer of the launch gets ``noalias`` (and LLVM then reads the unwritten ones through the
non-coherent cache, ``ld.global.nc``).

Kinds here (the lowering in ``lower.py`` picks one per op or fusion):

* ``emit_loop_kernel``: a thread per output element, or per vector of consecutive elements
  (16 bytes: ``Lanes``, ``LaneSource``), grid-stride over the output's physical (row-major in
  its layout) positions, so consecutive threads touch consecutive addresses. Fused producers
  are computed in place by the elemental emitter; ops whose element needs a loop (reduce over
  major dimensions, i.e. column reductions; reduce_window, convolution, a generated dot) run
  that loop per output element.
* ``emit_reduce_kernel``: a reduction that reduces the physically minor dimension (row
  reduction, full reduction): a group of threads (a warp, or the whole block for long rows) per
  output element, each thread folding a strided part of the row, then a ``shfl.sync``
  butterfly within the warp and, for a block, one partial a warp through shared memory.
* ``emit_row_kernel``: a region that reduces trailing dimensions and reads the results back per
  row (softmax, layer norm): a group per row computes each reduction cooperatively (every thread
  ends with the row's value) and then the row's outputs, strided over the group; the row in
  registers, moved in vectors.

Vectorized kernels test their pointers' alignment at run time and keep a scalar path for
misaligned ones. Grids cover the work once (``GpuCodegen.grid``; grid-stride loops take what
is past ``MAX_GRID``); some kernels' unrolling depends on the device's SM count (``device.py``).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import llvmlite.ir as ir
import numpy as np

from hlo.ir.core import Value
from hlo.ir.types import TensorType
from hlo.runtime.steps import BufRef, Launch

from .. import index_trace, nvptx
from .. import llvm_util as U
from ..elemental import BufferSource, ElementalEmitter, float_sum_types
from ..kernel_emitter import fused_reads, kernel_buffers, root_values
from ..llvm_util import I1, I32, I64, PTR, VOID, ModuleContext, for_range, i64

BLOCK = 256  # threads a block
WARP = 32
# A row of at most this many elements is reduced by one warp, longer ones by a whole block.
WARP_ROW_MAX = 1024
# Loop kernels: elements a scalar thread takes per iteration of its grid-stride loop, and
# vectors a vectorized one takes (independent loads in flight, all issued before any use)
UNROLL = 4
LOOP_VECTORS = 2
# ... where the work fills the device this many times over (smaller kernels are short, and the
# unrolled copies of the element's code only cost compile time)
BIG_WAVES = 8
# The widest global access of a thread (``ld.global.v4.f32``, ``.v2.f64``, 8 halves as v4.b32)
# and the most elements a vector holds
VEC_BYTES = 16
MAX_VEC = 8
# Row kernels keep a thread's part of the row in registers (read once) when it has at most this
# many elements; a group of up to MAX_BLOCK threads shares a row.
ROW_REGS = 32
MAX_BLOCK = 1024
# Grids cover their work once (a block's share ends, the hardware starts the next block), so a
# kernel whose registers allow fewer resident blocks than the device's maximum loses no
# partial wave; grid-stride loops take what is past this many blocks.
MAX_GRID = 1 << 22
FULL_MASK = ir.Constant(I32, -1)
# A float sum that one thread computes element by element (a column reduction's loop kernel)
# adds at most this many values in f32 before its f64 total takes them (``elemental.SUM_BLOCK``:
# a thread adds one at a time, where the CPU's vector lanes share a block)
THREAD_SUM_BLOCK = 256


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
        self._kernel_code: Dict[str, str] = {}  # a kernel's LLVM IR (name aside) -> its name

    def const_ref(self, arr: np.ndarray) -> BufRef:
        k = len(self.constants)
        self.constants[k] = np.ascontiguousarray(arr)
        return BufRef("const", k, 0, int(arr.nbytes))

    def grid(self, items: int, per_block: int = BLOCK) -> int:
        """Blocks for ``items`` work items of ``per_block`` a block: enough to cover them once
        (at most ``MAX_GRID``; grid-stride loops do the rest). Not capped at what the
        multiprocessors hold at once: that depends on the registers ptxas gives the kernel, and a
        grid-stride grid of more blocks than are resident runs a second, mostly idle wave."""
        need = max(1, -(-int(items) // per_block))
        return min(need, MAX_GRID)

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
        name = self._twin()
        if name is None:
            self.cg.kernels[self.name] = self.fn
            name = self.name
        return Launch(name, list(self.refs), list(self.writes), (int(grid), 1, 1),
                      (int(block), 1, 1), int(shared_bytes), [], what)

    def _twin(self) -> Optional[str]:
        """An earlier kernel of this module with the same code (its LLVM IR, the name aside):
        then this one is dropped and the launch calls that one. An unrolled loop's steps, or
        the same fusion at several places, build one kernel, not one each (16 steps of an RNN
        cell: 16 epilogue kernels' LLVM and ptxas time, ~250 ms of a 400 ms compile)."""
        text = str(self.fn).replace(f'@"{self.name}"', "@kernel", 1)
        seen = self.cg._kernel_code
        name = seen.get(text)
        if name is None:
            seen[text] = self.name
            return None
        del self.cg.ctx.module.globals[self.name]
        return name


def make_emitter(kb: GpuKernel, reads: Sequence[Value], env: Dict[Value, BufRef],
                 lanes: Optional["Lanes"] = None) -> ElementalEmitter:
    sources = {v: LaneSource(kb.ptr(env[v]), v.type, lanes) for v in reads}
    em = ElementalEmitter(kb.cg.ctx, kb.b, sources)
    em.sum_block = THREAD_SUM_BLOCK
    return em


# ------------------------------------------------------------------------------------------
# Vector accesses: groups of consecutive elements read and written 16 bytes at a time
# ------------------------------------------------------------------------------------------

def vector_dtype_ok(et) -> bool:
    """Whether elements of ``et`` can be moved as an LLVM vector (not complex: a struct)."""
    return not et.is_complex and isinstance(U.mem_type(et), (ir.IntType, ir.FloatType, ir.HalfType,
                                                               ir.DoubleType))


def minor_dim(t: TensorType) -> Optional[int]:
    """The physically minor dimension of ``t`` that has more than one element (None: none)."""
    return next((d for d in t.minor_to_major if t.shape[d] != 1), None)


class Lanes:
    """Index values of groups of ``vec`` consecutive elements along one dimension: a kernel
    splits a group's index into one per element (``split``) and the buffers it reads
    (``LaneSource``) recognize those values, so the group's elements of a buffer whose minor
    dimension they run along come from one vector load."""

    def __init__(self, vec: int):
        self.vec = vec
        self._lane: Dict[int, Tuple[ir.Value, int]] = {}  # id(index value) -> (lane 0's, lane)
        self._keep: List[ir.Value] = []  # keeps the values alive so their ids stay unique

    def split(self, b: ir.IRBuilder, idx: Sequence[ir.Value], dim: int) -> List[tuple]:
        """The ``vec`` indices of the group whose first element is at ``idx`` (``idx[dim]`` a
        multiple of ``vec``)."""
        out, first = [], None
        for t in range(self.vec):
            v = b.add(idx[dim], i64(t))  # a fresh value each (lane 0's too), never reused
            if first is None:
                first = v
            self._lane[id(v)] = (first, t)
            self._keep.append(v)
            out.append(tuple(idx[:dim]) + (v,) + tuple(idx[dim + 1:]))
        return out

    def lane(self, v: ir.Value) -> Optional[Tuple[ir.Value, int]]:
        return self._lane.get(id(v))


def vector_type(et, vec: int) -> ir.VectorType:
    return ir.VectorType(U.mem_type(et), vec)


def vector_align(et, vec: int) -> int:
    return vec * U.storage_align(et)


class LaneSource(BufferSource):
    """A buffer that the elemental emitter reads; where the index is a lane of a ``Lanes``
    group along the buffer's physically minor dimension (and no other index is a lane), the
    group's elements are one vector load (cached in the emitter's frame) and each read takes
    its element. Anywhere else (and always without ``lanes``), one element is loaded."""

    def __init__(self, ptr: ir.Value, ttype: TensorType, lanes: Optional[Lanes]):
        super().__init__(ptr, ttype)
        self.lanes = lanes
        self.dim = minor_dim(ttype)
        self.vectorized = (lanes is not None and self.dim is not None and vector_dtype_ok(ttype.dtype)
                           and ttype.shape[self.dim] % lanes.vec == 0)

    def read(self, em: ElementalEmitter, idx) -> ir.Value:
        hit = self.lanes.lane(idx[self.dim]) if self.vectorized else None
        if hit is None or any(self.lanes.lane(i) for k, i in enumerate(idx) if k != self.dim):
            return super().read(em, idx)
        first, t = hit
        key = ("vector", id(self), id(first)) + tuple(
            ("c", i.constant) if isinstance(i, ir.Constant) else id(i)
            for k, i in enumerate(idx) if k != self.dim and self.type.shape[k] != 1)
        vec = em._lookup(key)
        if vec is None:
            base = tuple(first if k == self.dim else i for k, i in enumerate(idx))
            vec = load_vector(em.b, self.ptr, self.type, base, self.lanes.vec)
            em._keep.append(tuple(idx))
            em.frames[-1][key] = vec
        return U.from_storage(em.b, em.b.extract_element(vec, i32(t)), self.type.dtype)


def load_vector(b: ir.IRBuilder, ptr: ir.Value, t: TensorType, idx, vec: int) -> ir.Value:
    """The ``vec`` elements (storage form) of ``t`` from ``idx`` on along its minor dimension."""
    p = U.elem_ptr(b, ptr, t.dtype, U.linear_offset(b, idx, U.strides_of(t)))
    return b.load(p, typ=vector_type(t.dtype, vec), align=vector_align(t.dtype, vec))


def store_vector(b: ir.IRBuilder, ptr: ir.Value, t: TensorType, idx, vals: Sequence[ir.Value]) -> None:
    """Register-form ``vals`` to ``t`` from ``idx`` on along its minor dimension, one store."""
    vt = vector_type(t.dtype, len(vals))
    v = ir.Constant(vt, ir.Undefined)
    for k, x in enumerate(vals):
        v = b.insert_element(v, U.to_storage(b, x, t.dtype), i32(k))
    p = U.elem_ptr(b, ptr, t.dtype, U.linear_offset(b, idx, U.strides_of(t)))
    b.store(v, p, align=vector_align(t.dtype, len(vals)))


def aligned_for(kb: "GpuKernel", buffers: Sequence[Tuple[ir.Value, TensorType]], vec: int) -> ir.Value:
    """i1: every pointer is aligned for vectors of ``vec`` of its elements (a buffer from
    another library may start anywhere: then the kernel takes its scalar path). Tested as
    ``llvm.ptrmask(p, align - 1) == null``, which LLVM does not count as the pointer escaping
    (a ``ptrtoint`` would: it then no longer infers the buffer read-only, and its loads lose
    ``ld.global.nc``)."""
    b = kb.b
    mask = kb.cg.ctx.declare("llvm.ptrmask.p0.i64", PTR, [PTR, I64])
    ok = ir.Constant(I1, 1)
    for p, t in buffers:
        low = b.call(mask, [p, i64(vector_align(t.dtype, vec) - 1)])
        ok = b.and_(ok, b.icmp_unsigned("==", low, ir.Constant(PTR, None)))
    return ok


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


from hlo.ir.types import f32 as _ANY_DTYPE


def store(b: ir.IRBuilder, ptr: ir.Value, t: TensorType, idx, val) -> None:
    off = U.linear_offset(b, idx, U.strides_of(t))
    U.store_reg(b, val, U.elem_ptr(b, ptr, t.dtype, off), t.dtype)


# ------------------------------------------------------------------------------------------
# Loop kernels
# ------------------------------------------------------------------------------------------

def emit_loop_kernel(cg: GpuCodegen, roots, env: Dict[Value, BufRef], name: str = "loop",
                     what: str = "") -> Launch:
    """Every element of the roots' common index space (``Root``s of the lowering), in the
    destination's physical order so that consecutive threads touch consecutive addresses.

    Where the elements are plain numbers, the destination's minor dimension divides into
    vectors (``loop_vector_width``) and the cone of fused producers has no inner loops, a thread
    takes ``LOOP_VECTORS`` groups of ``vec`` consecutive elements per iteration: the operands read
    at the destination's own index are loaded as vectors first (``ld.global.nc.v4.f32`` for
    f32), then every element is computed and each root stored as one vector. Pointers are
    checked at run time: a misaligned one (a view from another library) takes the scalar path,
    ``UNROLL`` elements a thread, loads first too."""
    t: TensorType = roots[0].dest_type
    reads = fused_reads([r.value for r in roots], env)
    refs = [r.dest for r in roots] + [env[v] for v in reads]
    kb = GpuKernel(cg, name, refs, [True] * len(roots) + [False] * len(reads))
    b = kb.b
    n = t.size
    vec = loop_vector_width(roots, reads)
    lanes = Lanes(vec) if vec > 1 else None
    em = make_emitter(kb, reads, env, lanes)
    # operands every root reads only at its own index: loaded before anything is computed
    stop = set(reads)
    early = [v for v in reads if v.type.shape == t.shape and
             tuple(v.type.minor_to_major) == tuple(t.minor_to_major) and
             all(r.index_fn is None and index_trace.reads_at_identity(v, r.value, stop) for r in roots)]
    big = n >= UNROLL * BLOCK * cg.device.sm_count
    if vec == 1:
        _loop_body(kb, em, roots, t, early, 1, None, UNROLL if big else 1)
        return kb.finish(cg.grid(n, BLOCK * (UNROLL if big else 1)), BLOCK, what)
    vstores = [vector_dtype_ok(r.dest_type.dtype) and minor_dim(r.dest_type) == minor_dim(t) for r in roots]
    checked = [(kb.ptr(r.dest), r.dest_type) for r, ok in zip(roots, vstores) if ok]
    checked += [(src.ptr, src.type) for src in em.sources.values() if src.vectorized]
    groups = n // vec
    per = LOOP_VECTORS if groups >= LOOP_VECTORS * BLOCK * cg.device.sm_count * BIG_WAVES else 1
    with b.if_else(aligned_for(kb, checked, vec)) as (vector_path, scalar_path):
        with vector_path:
            _loop_body(kb, em, roots, t, early, vec, lanes, per, vstores)
        with scalar_path:  # not unrolled: rare, and its code costs compile time
            _loop_body(kb, em, roots, t, early, 1, None, 1)
    return kb.finish(cg.grid(groups, BLOCK * per), BLOCK, what)


def loop_vector_width(roots, reads: Sequence[Value]) -> int:
    """Elements a loop kernel's thread moves as one vector: ``VEC_BYTES`` of the widest
    element among the roots and the operands of the index space's shape, halved until it
    divides the minor dimension; 1 where a root is complex or the cone computes an op with an
    inner loop (a reduction, window or product per element: its loads would not be the
    group's)."""
    from hlo.ir import ops as op_table
    t = roots[0].dest_type
    d = minor_dim(t)
    if d is None or not all(vector_dtype_ok(r.dest_type.dtype) for r in roots):
        return 1
    inner = op_table.with_trait(op_table.INNER_LOOP, op_table.WHOLE_ARRAY)
    read_set, seen, stack = set(reads), set(), [r.value for r in roots]
    while stack:
        v = stack.pop()
        if v in seen or v in read_set or v.op is None:
            continue
        seen.add(v)
        if v.op.regions or v.op.name in inner:
            return 1
        stack.extend(v.op.operands)
    widest = max([r.dest_type.dtype.itemsize for r in roots] +
                 [v.type.dtype.itemsize for v in reads if v.type.shape == t.shape and vector_dtype_ok(v.type.dtype)])
    vec = min(MAX_VEC, VEC_BYTES // max(1, widest))
    while vec > 1 and t.shape[d] % vec:
        vec //= 2
    return max(1, vec)


def _loop_body(kb: GpuKernel, em: ElementalEmitter, roots, t: TensorType, early: Sequence[Value],
               vec: int, lanes: Optional[Lanes], per: int, vstores: Sequence[bool] = ()) -> None:
    """The grid-stride loop over groups of ``vec`` elements (``vec`` 1: single elements), ``per``
    groups a thread an iteration (``BLOCK`` apart, so a warp's accesses are contiguous): full
    iterations unguarded, then one guarded partial iteration."""
    cg, b = kb.cg, kb.b
    d = minor_dim(t)
    groups = t.size // vec
    step = b.mul(kb.sreg("nctaid.x"), i64(BLOCK * per))
    start = b.add(b.mul(kb.sreg("ctaid.x"), i64(BLOCK * per)), kb.sreg("tid.x"))

    def run(firsts):
        em.push()
        elems = []  # per group: the index of each of its elements
        for g in firsts:
            idx = physical_index(b, b.mul(g, i64(vec)) if vec > 1 else g, t)
            elems.append(lanes.split(b, idx, d) if vec > 1 else [idx])
        for lane_idx in elems:  # every load of the iteration first
            for v in early:
                em.at(v, lane_idx[0])
        for lane_idx in elems:
            vals = [root_values(cg.ctx, b, em, roots, ix) for ix in lane_idx]
            for k, r in enumerate(roots):
                if vec > 1 and vstores[k]:
                    store_vector(b, kb.ptr(r.dest), r.dest_type, lane_idx[0], [v[k] for v in vals])
                else:
                    for ix, v in zip(lane_idx, vals):
                        store(b, kb.ptr(r.dest), r.dest_type, ix, v[k])
        em.pop()

    full_end = groups - (per - 1) * BLOCK
    rest = start
    if full_end > 0:
        with for_range(b, start, full_end, "g", step=step) as g:
            run([b.add(g, i64(k * BLOCK)) if k else g for k in range(per)])
        rest = g  # the loop's exit value: where the partial iteration starts
    if per > 1:
        for k in range(per):
            g = b.add(rest, i64(k * BLOCK))
            with b.if_then(b.icmp_signed("<", g, i64(groups))):
                run([g])


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


def wide_sum(op) -> bool:
    """A float sum that a thread's partial accumulates in f64 (``_Partial``'s ``wide``): a
    thread folds up to thousands of a long row's or column's elements, and a float32 running
    sum's error grows with what it adds. f64 sums stay in f64."""
    t = float_sum_types(op)
    return t is not None and op.operands[0].dtype.bits < 64


class _Partial:
    """A thread's partial result of a reduction: accumulator slots plus a flag saying whether
    it holds anything yet (the init value is applied once, at the end, as the spec's
    ``body(init, ...)``). ``wide``: a float sum (``wide_sum``) kept in f64: ``fold`` widens the
    elements and adds them (``fold_wide`` adds partials that are f64 already), and
    ``finish`` adds the init value and rounds once."""

    def __init__(self, b: ir.IRBuilder, inits: Sequence[ir.Value], wide: Optional[object] = None):
        self.b = b
        self.wide = wide  # the element type of a wide sum, else None
        self.types = [ir.DoubleType()] * len(inits) if wide else [v.type for v in inits]
        self.slots = [U.entry_alloca(b, t) for t in self.types]
        self.valid = U.entry_alloca(b, I1)
        for s, v, t in zip(self.slots, inits, self.types):  # never read while invalid; stored so nothing is undef
            b.store(v if v.type == t else ir.Constant(t, 0.0), s)
        b.store(ir.Constant(I1, 0), self.valid)

    def load(self):
        return [self.b.load(s, typ=t) for s, t in zip(self.slots, self.types)], \
            self.b.load(self.valid, typ=I1)

    def widen(self, xs):
        """Elements (registers of the reduce's type: f32 for the narrow floats) in the partial's type."""
        b = self.b
        return [b.fpext(x, t) if self.wide and x.type != t else x for x, t in zip(xs, self.types)]

    def finish(self, em: ElementalEmitter, body, init_vals, cur):
        """body(init, cur): for a wide sum, init + cur in f64 rounded once to the type."""
        b = self.b
        if not self.wide:
            return em.scalar_region(body, list(init_vals) + list(cur))
        from hlo.ir.types import f64

        from ..scalar_ops import convert
        return [convert(em.ctx, b, b.fadd(convert(em.ctx, b, iv, self.wide, f64), c), f64, self.wide)
                for iv, c in zip(init_vals, cur)]

    def fold(self, em: ElementalEmitter, body, xs, xvalid: Optional[ir.Value] = None) -> None:
        """self = valid ? body(self, xs) : xs (where ``xvalid``, default true)."""
        self.fold_wide(em, body, self.widen(xs), xvalid)

    def fold_wide(self, em: ElementalEmitter, body, xs, xvalid: Optional[ir.Value] = None) -> None:
        """``fold`` of values already in the partial's type."""
        b = self.b
        cur, valid = self.load()
        if self.wide:
            new = [b.fadd(c, x) for c, x in zip(cur, xs)]
        else:
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
        part.fold_wide(em, body, other, ov)
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
        return cg.grid(groups, self.per_block)


def group_size(k: int) -> int:
    return WARP if k <= WARP_ROW_MAX else BLOCK


def coop_reduce(kb: GpuKernel, em: ElementalEmitter, g: Group, rop, kept_idx,
                positions: Optional[Sequence[Tuple[tuple, ir.Value]]] = None,
                span: Optional[Tuple[ir.Value, ir.Value]] = None, partial: bool = False):
    """The results of reduce op ``rop`` at result index ``kept_idx``, computed by the group
    (every thread of the group gets them). The reduced positions are visited in the input's
    physical order, the group's threads taking consecutive ones (those of ``span``, a range of
    them, when given); or, with ``positions``, this thread folds exactly those (full input
    index, in range) pairs, unrolled (the row kernel's registers: the same index objects later
    read the same cached elements). ``partial``: the group's fold without the init value, as
    ``(values, valid)`` (a split reduction's first stage)."""
    b = kb.b
    n = len(rop.operands) // 2
    inputs, inits = rop.operands[:n], rop.operands[n:]
    dims = list(rop.attrs["dimensions"])
    in_t = inputs[0].type
    body = rop.regions[0]
    init_vals = [em.at(v, ()) for v in inits]
    # a row in registers (at most 2 * ROW_REGS elements a thread) stays in its own type
    part = _Partial(b, init_vals, in_t.dtype if positions is None and wide_sum(rop) else None)
    if positions is not None:
        for full, ok in positions:
            xs = [em.at(v, tuple(full)) for v in inputs]
            em.push()
            part.fold(em, body, xs, ok)
            em.pop()
    else:
        red_t = _reduced_type(in_t, dims)
        lo, hi = span if span is not None else (i64(0), i64(red_t.size))
        with for_range(b, b.add(lo, g.lane), hi, "r", step=g.size) as r:
            em.push()
            full = _full_index(b, in_t, dims, kept_idx, r, red_t)
            part.fold(em, body, [em.at(v, full) for v in inputs])
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
    if partial:
        return cur, valid
    em.push()
    fin = part.finish(em, body, init_vals, cur)
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
    res = [r for r in op.results]
    reads = fused_reads(list(op.operands), env)
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


# A reduction of few results over many elements each (a loss or a norm: one result over a whole
# array) had one block per result: one multiprocessor read all of the array. H200, a call, one
# block -> split (jax.jit): max |x| over 2048 x 2048 719 -> 33 us (36), a sum of 2^20 182 -> 44
# us (41), 4 means of 2^20 185 -> 31 us (48); a while loop stopping on that max, 57 steps of
# tanh on 2048 x 2048, 14.7 -> 1.8 ms (1.9). Where the results are fewer than the multiprocessors
# and each reduces at least SPLIT_MIN_ELEMENTS (below, one block reads them in about the time of
# the second kernel's launch), the first kernel folds each result's elements in
# ``parts`` slices, a block each (SPLIT_WAVES blocks a multiprocessor in all, at least
# SPLIT_MIN_PER_THREAD elements a thread), into partials in scratch; the second folds each
# result's partials, in order, with a warp, and applies the init value once. Deterministic: the
# slices and the order of their partials do not depend on the run.
SPLIT_MIN_ELEMENTS = 1 << 17
SPLIT_WAVES = 4
SPLIT_MIN_PER_THREAD = 16


def split_parts(cg: GpuCodegen, op) -> int:
    """Blocks per result of a split reduction's first stage (1: not split)."""
    in_t, out_t = op.operands[0].type, op.results[0].type
    K = int(np.prod([in_t.shape[d] for d in op.attrs["dimensions"]])) if op.attrs["dimensions"] else 1
    M = out_t.size
    if K < SPLIT_MIN_ELEMENTS or M >= cg.device.sm_count or any(r.dtype.is_complex for r in op.results):
        return 1
    return max(1, min(SPLIT_WAVES * cg.device.sm_count // M, K // (BLOCK * SPLIT_MIN_PER_THREAD)))


def emit_split_reduce(cg: GpuCodegen, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                      parts: int, what: str = "") -> List[Launch]:
    """The two kernels of a split reduction (see ``SPLIT_MIN_ELEMENTS``): partial ``(o, p)`` at
    ``o * parts + p``."""
    res = list(op.results)
    in_t, out_t = op.operands[0].type, res[0].type
    K = int(np.prod([in_t.shape[d] for d in op.attrs["dimensions"]]))
    M, P = out_t.size, parts
    chunk = -(-K // P)
    slots, flags = _partial_buffers(lw, res, M * P, wide_sum(op))
    reads = fused_reads(list(op.operands), env)
    kb = GpuKernel(cg, "reduce_part", slots + [flags] + [env[v] for v in reads],
                   [True] * (len(res) + 1) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    g = Group(kb, BLOCK)
    with for_range(b, g.index, M * P, "q", step=g.stride) as q:
        em.push()
        o, p = b.udiv(q, i64(P)), b.urem(q, i64(P))
        lo, hi = _slice_bounds(b, p, chunk, K)
        cur, valid = coop_reduce(kb, em, g, op, physical_index(b, o, out_t), span=(lo, hi), partial=True)
        with b.if_then(b.icmp_unsigned("==", g.lane, i64(0))):
            _store_partial(kb, res, slots, flags, q, cur, valid, wide_sum(op))
        em.pop()
    first = kb.finish(g.grid(cg, M * P), g.block, f"{what} (part 1 of 2: {P} slices a result)")
    return [first, _total_kernel(cg, op, dests, env, slots, flags, P, lambda b, o, p: b.add(b.mul(o, i64(P)), p),
                                 f"{what} (part 2 of 2: the {P} partials of each result)")]


# A reduction over a physically major dimension (a column reduction: a bias gradient, a mean over
# the batch) had a thread per result, each folding its whole column: 8 threads for the 8 sums of
# a [2^20, 8] array. H200, sum over axis 0, a call, before -> after (jax.jit): [2^20, 8] 18.5 ms
# -> 18 us (61), [65536, 64] 772 -> 19 us (42), [4096, 4096] 144 -> 27 us (53), [8192, 1024]
# 191 -> 11 us (49). Where the results are few, the first kernel
# gives each result ``parts`` runs of its column, a thread each (COLUMN_SPLIT_THREADS a
# multiprocessor in all, at least COLUMN_MIN_ROWS elements a thread, at most COLUMN_MAX_PARTS),
# consecutive threads on consecutive results (coalesced); the second is the split reduction's.
# Below COLUMN_MIN_ELEMENTS in all (a train step's bias gradient, 128 x 512) one kernel is enough.
COLUMN_SPLIT_THREADS = 1024
COLUMN_MIN_ROWS = 32
COLUMN_MAX_PARTS = 4096
COLUMN_MIN_ELEMENTS = 1 << 18


def column_parts(cg: GpuCodegen, op) -> int:
    """Runs per result of a split column reduction's first stage (1: a thread per result)."""
    in_t, out_t = op.operands[0].type, op.results[0].type
    K = int(np.prod([in_t.shape[d] for d in op.attrs["dimensions"]])) if op.attrs["dimensions"] else 1
    M = max(1, out_t.size)
    if K * M < COLUMN_MIN_ELEMENTS or any(r.dtype.is_complex for r in op.results):
        return 1
    parts = min(cg.device.sm_count * COLUMN_SPLIT_THREADS // M, K // COLUMN_MIN_ROWS, COLUMN_MAX_PARTS)
    return parts if parts >= 4 else 1


def emit_split_column_reduce(cg: GpuCodegen, lw, op, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                             parts: int, what: str = "") -> List[Launch]:
    """The two kernels of a split column reduction (see ``COLUMN_SPLIT_THREADS``): partial
    ``(o, p)`` at ``p * results + o``."""
    res = list(op.results)
    n = len(res)
    in_t, out_t = op.operands[0].type, res[0].type
    dims = list(op.attrs["dimensions"])
    red_t = _reduced_type(in_t, dims)
    K, M, P = red_t.size, out_t.size, parts
    chunk = -(-K // P)
    wide = wide_sum(op)
    slots, flags = _partial_buffers(lw, res, M * P, wide)
    reads = fused_reads(list(op.operands), env)
    kb = GpuKernel(cg, "column_part", slots + [flags] + [env[v] for v in reads],
                   [True] * (n + 1) + [False] * len(reads))
    em = make_emitter(kb, reads, env)
    b = kb.b
    body = op.regions[0]
    start, step = kb.thread_range()
    with for_range(b, start, M * P, "q", step=step) as q:
        em.push()
        o, p = b.urem(q, i64(M)), b.udiv(q, i64(M))
        kidx = physical_index(b, o, out_t)
        lo, hi = _slice_bounds(b, p, chunk, K)
        part = _Partial(b, [em.at(v, ()) for v in op.operands[n:]], in_t.dtype if wide else None)
        with for_range(b, lo, hi, "r") as r:
            em.push()
            full = _full_index(b, in_t, dims, kidx, r, red_t)
            part.fold(em, body, [em.at(v, full) for v in op.operands[:n]])
            em.pop()
        cur, valid = part.load()
        _store_partial(kb, res, slots, flags, q, cur, valid, wide)
        em.pop()
    first = kb.finish(cg.grid(M * P), BLOCK, f"{what} (part 1 of 2: {P} runs of each column, a thread each)")
    return [first, _total_kernel(cg, op, dests, env, slots, flags, P, lambda b, o, p: b.add(b.mul(p, i64(M)), o),
                                 f"{what} (part 2 of 2: the {P} partials of each result)")]


def _reduced_type(in_t: TensorType, dims) -> TensorType:
    """The reduced dimensions of ``in_t`` as a type of their own, in the input's physical order
    (a linear position in it walks the input's reduced elements in memory order)."""
    return TensorType(tuple(in_t.shape[d] for d in dims), in_t.dtype,
                      tuple(dims.index(d) for d in in_t.minor_to_major if d in dims))


def _full_index(b, in_t: TensorType, dims, kept_idx, r, red_t: TensorType) -> tuple:
    """The input index of reduced position ``r`` (linear in ``red_t``) of the result at
    ``kept_idx``."""
    ridx = physical_index(b, r, red_t)
    kept = [d for d in range(in_t.rank) if d not in dims]
    full: List[Optional[ir.Value]] = [None] * in_t.rank
    for k, d in enumerate(kept):
        full[d] = kept_idx[k]
    for k, d in enumerate(dims):
        full[d] = ridx[k]
    return tuple(full)


def _slice_bounds(b, p, chunk: int, K: int):
    """``[p * chunk, min(K, (p + 1) * chunk))``: slice ``p`` of a split reduction."""
    lo = b.mul(p, i64(chunk))
    end = b.add(lo, i64(chunk))
    return lo, b.select(b.icmp_signed("<", end, i64(K)), end, i64(K))


def _partial_buffers(lw, res, count: int, wide: bool = False):
    """Scratch for ``count`` partials of each result of a split reduction (f64 for a wide
    sum), and their flags."""
    return [lw.scratch(max(1, count * (8 if wide else r.dtype.itemsize))) for r in res], \
        lw.scratch(max(1, count))


def _partial_type(r, wide: bool):
    from hlo.ir.types import f64
    return f64 if wide else r.dtype


def _store_partial(kb: GpuKernel, res, slots, flags, q, cur, valid, wide: bool = False) -> None:
    b = kb.b
    u8 = ir.IntType(8)
    for r, ref, v in zip(res, slots, cur):
        et = _partial_type(r, wide)
        U.store_reg(b, v, U.elem_ptr(b, kb.ptr(ref), et, q), et)
    b.store(b.zext(valid, u8), b.gep(kb.ptr(flags), [q], source_etype=u8))


def _total_kernel(cg: GpuCodegen, op, dests, env, slots, flags, P: int, at, what: str) -> Launch:
    """A split reduction's second kernel: a warp per result folds its ``P`` partials (partial
    ``(o, p)`` at index ``at(b, o, p)``) in order, then applies the init value once."""
    res = list(op.results)
    n = len(res)
    out_t = res[0].type
    M = out_t.size
    u8 = ir.IntType(8)
    inits = list(op.operands[n:])
    reads = fused_reads(inits, env)
    kb = GpuKernel(cg, "reduce_total", list(dests) + slots + [flags] + [env[v] for v in reads],
                   [True] * n + [False] * (n + 1 + len(reads)))
    em = make_emitter(kb, reads, env)
    b = kb.b
    body = op.regions[0]
    g = Group(kb, WARP)
    wide = wide_sum(op)
    with for_range(b, g.index, M, "o", step=g.stride) as o:
        em.push()
        init_vals = [em.at(v, ()) for v in inits]
        part = _Partial(b, init_vals, res[0].dtype if wide else None)
        with for_range(b, g.lane, i64(P), "p", step=WARP) as p:
            q = at(b, o, p)
            xs = [U.load_reg(b, U.elem_ptr(b, kb.ptr(ref), _partial_type(r, wide), q), _partial_type(r, wide))
                  for r, ref in zip(res, slots)]
            fl = b.load(b.gep(kb.ptr(flags), [q], source_etype=u8), typ=u8)
            em.push()
            part.fold_wide(em, body, xs, b.icmp_unsigned("!=", fl, ir.Constant(u8, 0)))
            em.pop()
        _warp_combine(kb, em, body, part)
        cur, valid = part.load()
        em.push()
        fin = part.finish(em, body, init_vals, cur)
        em.pop()
        idx = physical_index(b, o, out_t)
        with b.if_then(b.icmp_unsigned("==", g.lane, i64(0))):
            for r, d, f, iv in zip(res, dests, fin, init_vals):
                store(b, kb.ptr(d), r.type, idx, b.select(valid, f, iv))
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
    (``row_group``), each thread's elements are unrolled and every value of the row, the
    input's elements and intermediates such as softmax's exponentials, is computed once into
    registers and read back by the later reductions and the outputs: one read and one write of
    the row. There a thread takes vectors of ``vec`` consecutive elements (``row_vector_width``;
    group ``lane + j * size`` of the row), loaded before the first reduction; a misaligned
    pointer takes the same kernel's scalar path, which streams the row (reads it once a
    reduction and once for the outputs) in less code."""
    reads = fused_reads([v for v, _ in outputs], env)
    refs = [r for _, r in outputs] + [env[v] for v in reads]
    kb = GpuKernel(cg, name, refs, [True] * len(outputs) + [False] * len(reads))
    b = kb.b
    O, I = tuple(in_shape[:k]), tuple(in_shape[k:])
    rows = int(np.prod(O)) if O else 1
    inner = int(np.prod(I)) if I else 1
    size, block, in_regs = row_group(inner)
    vec = row_vector_width(in_shape, k, reads, [v for v, _ in outputs]) if in_regs else 1
    lanes = Lanes(vec) if vec > 1 else None
    em = make_emitter(kb, reads, env, lanes)
    g = Group(kb, size, block)
    body = (kb, em, g, reduces, outputs, tuple(in_shape), k, in_regs)
    if vec == 1:
        _row_body(*body, 1, None)
    else:
        early = [v for v in reads if v.type.shape == tuple(in_shape) and em.sources[v].vectorized]
        vstores = [v.type.shape == tuple(in_shape) and vector_dtype_ok(v.type.dtype)
                   and minor_dim(v.type) == len(in_shape) - 1 for v, _ in outputs]
        checked = [(kb.ptr(r), v.type) for (v, r), ok in zip(outputs, vstores) if ok]
        checked += [(src.ptr, src.type) for src in em.sources.values() if src.vectorized]
        with b.if_else(aligned_for(kb, checked, vec)) as (vector_path, scalar_path):
            with vector_path:
                _row_body(*body, vec, lanes, early, vstores)
            with scalar_path:  # rare: the compact streaming form (the row read per pass)
                _row_body(*body[:-1], False, 1, None)
    return kb.finish(g.grid(cg, rows), g.block, what)


def row_vector_width(in_shape, k: int, reads: Sequence[Value], outs: Sequence[Value]) -> int:
    """Elements a row kernel's thread moves as one vector: ``VEC_BYTES`` of the widest element
    among the row-shaped operands and outputs, halved until it divides the row's minor
    dimension; 1 where the row has no dimension of its own or a value is complex."""
    in_shape = tuple(in_shape)
    if k >= len(in_shape):
        return 1
    full = [v for v in list(reads) + list(outs) if v.type.shape == in_shape]
    if any(not vector_dtype_ok(v.type.dtype) for v in full):
        return 1
    widest = max([v.type.dtype.itemsize for v in full] or [4])
    vec = min(MAX_VEC, VEC_BYTES // max(1, widest))
    while vec > 1 and in_shape[-1] % vec:
        vec //= 2
    return max(1, vec)


def _row_body(kb: GpuKernel, em: ElementalEmitter, g: Group, reduces, outputs, in_shape, k: int,
              in_regs: bool, vec: int, lanes: Optional[Lanes], early: Sequence[Value] = (),
              vstores: Sequence[bool] = ()) -> None:
    b = kb.b
    O, I = tuple(in_shape[:k]), tuple(in_shape[k:])
    rows = int(np.prod(O)) if O else 1
    inner = int(np.prod(I)) if I else 1
    size = g.size
    with for_range(b, g.index, rows, "row", step=g.stride) as f:
        em.push()
        ridx = row_major_index(b, f, O)
        positions = None  # (full index, in range) of each element this thread holds
        groups = []  # (the indices of a group's elements, in range)
        if in_regs:
            positions = []
            nv = inner // vec
            for j in range(-(-nv // size)):
                e = b.add(g.lane, i64(j * size))
                if (j + 1) * size <= nv:
                    ok = ir.Constant(I1, 1)  # every lane's group exists
                    ec = e
                else:
                    ok = b.icmp_unsigned("<", e, i64(nv))
                    ec = b.select(ok, e, i64(nv - 1))  # read a valid group, drop it
                full = ridx + row_major_index(b, b.mul(ec, i64(vec)) if vec > 1 else ec, I)
                elems = lanes.split(b, full, len(in_shape) - 1) if vec > 1 else [full]
                groups.append((elems, ok))
                positions.extend((x, ok) for x in elems)
            for elems, _ in groups:  # the row's loads, before the first reduction needs them
                for v in early:
                    em.at(v, elems[0])
        for r in reduces:  # each reduction once per row, in region order; all threads get it
            rop = r.op
            vals = coop_reduce(kb, em, g, rop, ridx, positions)
            for res, v in zip(rop.results, vals):
                em._remember(res, ridx, v)
        for (v, ref), vstore in zip(outputs, list(vstores) or [False] * len(outputs)):
            if v.type.shape == O:
                val = em.at(v, ridx)
                with b.if_then(b.icmp_unsigned("==", g.lane, i64(0))):
                    store(b, kb.ptr(ref), v.type, ridx, val)
                continue
            if in_regs:
                for elems, ok in groups:
                    vals = [em.at(v, x) for x in elems]
                    with b.if_then(ok):
                        if vstore:
                            store_vector(b, kb.ptr(ref), v.type, elems[0], vals)
                        else:
                            for x, val in zip(elems, vals):
                                store(b, kb.ptr(ref), v.type, x, val)
                continue
            with for_range(b, g.lane, inner, "c", step=size) as c:
                em.push()
                full = ridx + row_major_index(b, c, I)
                store(b, kb.ptr(ref), v.type, full, em.at(v, full))
                em.pop()
        em.pop()
