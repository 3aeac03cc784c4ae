"""The CPU's native form of the run-time program: ``EntryEmitter`` turns a step tree
(``hlo.runtime.steps``: buffers, kernel calls, copies, while / if / case) into the single native
entry point ``hlo_run(inputs, outputs, arena, nthreads)`` that runs the whole schedule, so one
call from Python runs everything. A ``HostCall`` calls the runtime's dispatcher through the
global ``HOST_CALL_PTR`` with the site number and the site's buffers; when it returns nonzero
(the Python callback raised), ``hlo_run`` returns at once and the runtime raises the error.

A profiled build (``EntryEmitter(..., profile=True)``, ``compile(profile=True)``) reads the
monotonic clock (``clock_gettime(CLOCK_MONOTONIC)``, libc's, through the vDSO: ~20 ns) before and
after every timed step (kernel call, pool dispatch included; copy; host call) and adds the
nanoseconds and one call to the step's slot of the global ``abi.PROFILE`` (``i64[slots][2]``:
nanoseconds, calls; slot i is the i-th timed step of ``profile_steps``' order, the last slot the
whole ``hlo_run``), with atomic adds, so concurrent calls count correctly. ``abi.PROFILE_SLOTS``
holds the slot count, which the runtime checks against the manifest. It also appends each timed
span to the event buffer ``abi.TRACE`` (``i64[TRACE_EVENTS][4]``: slot, start and end
nanoseconds, the thread (``pthread_self``); ``abi.TRACE_NEXT`` counts the events, past
``abi.TRACE_CAP`` they are dropped and only counted), and a parallel kernel's task runs
through a wrapper that appends one span per chunk on the worker that ran it (slot tagged with
``TRACE_CHUNK``): the timeline ``hlo.runtime.cpu.trace`` exports. Without ``profile`` the
emitted code is exactly the unprofiled one.
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from hlo.runtime.cpu import abi
from hlo.runtime.cpu.abi import (
    ENTRY,
    HOST_CALL_PTR,
    NP_ARRAY_DATA,
    POOL_PTR,
    PROFILE,
    PROFILE_SLOTS,
    PY_ENTRY,
    PY_TUPLE_ITEMS,
    RW_ANCHOR,
    TRACE,
    TRACE_CAP,
    TRACE_CHUNK,
    TRACE_NEXT,
)
from hlo.runtime.steps import BufRef, Copy, HostCall, KernelCall, Switch, While

from .. import llvm_util as U
from ..llvm_util import I8, I32, I64, PTR, VOID, ModuleContext, glue, i64

TASK_FN = ir.FunctionType(VOID, [PTR, I64, I64])


# ------------------------------------------------------------------------------------------
# The entry point
# ------------------------------------------------------------------------------------------

POOL_FN = ir.FunctionType(I32, [TASK_FN.as_pointer(), PTR, I64, I64])
HOST_FN = ir.FunctionType(I32, [I64, PTR])  # the runtime's dispatcher: (site, buffers) -> status


TIMED_STEPS = (KernelCall, Copy, HostCall)
CLOCK_MONOTONIC = 1  # Linux's clockid_t
TRACE_EVENTS = 16384  # spans a profiled build keeps (512 KiB of zeroed memory): the first ones


def timed_steps(steps, where: str = "") -> list:
    """``(step, where)`` for the steps a profiled build times, in the order of their counter
    slots (``walk_steps``' order: depth first, a loop's condition before its body). ``where``
    is the control flow around the step: '' at the top level, else a path such as
    ``while0.body`` or ``while0.body/switch1.branch0`` (loops and switches numbered in that
    order at each level)."""
    out, n = [], 0
    for s in steps:
        if isinstance(s, TIMED_STEPS):
            out.append((s, where))
        elif isinstance(s, (While, Switch)):
            pre = f"{where}/" if where else ""
            if isinstance(s, While):
                out += timed_steps(s.cond, f"{pre}while{n}.cond")
                out += timed_steps(s.body, f"{pre}while{n}.body")
            else:
                for i, br in enumerate(s.branches):
                    out += timed_steps(br, f"{pre}switch{n}.branch{i}")
            n += 1
    return out


class EntryEmitter:
    def __init__(self, ctx: ModuleContext, kernels: dict, tasks: dict, constants: dict,
                 profile: bool = False):
        self.ctx = ctx
        self.kernels = kernels  # name -> ir.Function(ptr..., lo, hi)
        self.tasks = tasks  # name -> ir.Function(ptr args, lo, hi)
        self.constants = constants  # const id -> np.ndarray
        self.profile = profile

    def emit(self, steps) -> ir.Function:
        fn = glue(ir.Function(self.ctx.module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64]), name=ENTRY))
        self.fn = fn
        self.inputs, self.outputs, self.arena, self.nthreads = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = b
        if self.profile:
            self._profile_setup(len(timed_steps(steps)) + 1)
            t0 = self._now()
        self._steps(steps)
        if self.profile:
            self._count(self._slots - 1, t0)
        b.ret_void()
        # A writable section in every object: the loader's one-block memory manager keeps the
        # GOT of external calls there (runtime/loader.py, one_block_fits).
        if RW_ANCHOR not in self.ctx.module.globals:
            g = ir.GlobalVariable(self.ctx.module, I64, name=RW_ANCHOR)
            g.initializer = ir.Constant(I64, 0)
        return fn

    def ptr(self, ref: BufRef) -> ir.Value:
        b = self.b
        if ref.kind == "input" or ref.kind == "output":
            arr = self.inputs if ref.kind == "input" else self.outputs
            p = b.load(b.gep(arr, [i64(ref.index)], source_etype=PTR), typ=PTR)
        elif ref.kind == "arena":
            p = self.arena
        elif ref.kind == "const":
            p = self.ctx.constant_global(self.constants[ref.index])
        else:
            raise AssertionError(ref.kind)
        if ref.offset:
            p = b.gep(p, [i64(ref.offset)], source_etype=I8)
        return p

    def _steps(self, steps):
        for s in steps:
            if self.profile and isinstance(s, TIMED_STEPS):
                slot = self._next_slot
                self._next_slot += 1
                self._slot = slot
                t0 = self._now()
                getattr(self, "_" + type(s).__name__)(s)
                self._count(slot, t0)
            else:
                getattr(self, "_" + type(s).__name__)(s)

    # -- the profiled build's counters ---------------------------------------------------

    def _profile_setup(self, slots: int) -> None:
        m = self.ctx.module
        ty = ir.ArrayType(I64, 2 * slots)
        g = ir.GlobalVariable(m, ty, name=PROFILE)
        g.initializer = ir.Constant(ty, None)
        g.align = 64
        n = ir.GlobalVariable(m, I64, name=PROFILE_SLOTS)
        n.initializer = ir.Constant(I64, slots)
        n.global_constant = True
        self._counters, self._slots, self._next_slot = g, slots, 0
        self._clock = self.ctx.declare("clock_gettime", I32, [I32, PTR])
        self._thread = self.ctx.declare("pthread_self", I64, [])
        ty = ir.ArrayType(I64, 4 * TRACE_EVENTS)
        self._trace = ir.GlobalVariable(m, ty, name=TRACE)
        self._trace.initializer = ir.Constant(ty, None)
        self._trace.align = 64
        self._trace_next = ir.GlobalVariable(m, I64, name=TRACE_NEXT)
        self._trace_next.initializer = ir.Constant(I64, 0)
        self._trace_next.align = 64
        cap = ir.GlobalVariable(m, I64, name=TRACE_CAP)
        cap.initializer = ir.Constant(I64, TRACE_EVENTS)
        cap.global_constant = True
        self._timed_tasks: dict = {}
        with self.b.goto_entry_block():
            self._timespec = self.b.alloca(I64, size=i64(2))

    def _now(self, b: ir.IRBuilder = None, timespec: ir.Value = None) -> ir.Value:
        """Nanoseconds of the monotonic clock."""
        b = b or self.b
        timespec = timespec or self._timespec
        b.call(self._clock, [ir.Constant(I32, CLOCK_MONOTONIC), timespec])
        sec = b.load(timespec, typ=I64)
        nsec = b.load(b.gep(timespec, [i64(1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, i64(1_000_000_000)), nsec)

    def _count(self, slot: int, t0: ir.Value) -> None:
        b = self.b
        t1 = self._now()
        dt = b.sub(t1, t0)
        ns = b.gep(self._counters, [i64(0), i64(2 * slot)], source_etype=self._counters.value_type)
        calls = b.gep(self._counters, [i64(0), i64(2 * slot + 1)], source_etype=self._counters.value_type)
        b.atomic_rmw("add", ns, dt, "monotonic")
        b.atomic_rmw("add", calls, i64(1), "monotonic")
        self._record(b, i64(slot), t0, t1)

    def _record(self, b: ir.IRBuilder, tag: ir.Value, t0: ir.Value, t1: ir.Value) -> None:
        """Append the span (tag, t0, t1, this thread) to the event buffer while it has room."""
        k = b.atomic_rmw("add", self._trace_next, i64(1), "monotonic")
        with b.if_then(b.icmp_unsigned("<", k, i64(TRACE_EVENTS))):
            base = b.mul(k, i64(4))
            events = b.inttoptr(b.ptrtoint(self._trace, I64), PTR)  # (an untyped pointer)
            for j, v in enumerate((tag, t0, t1, b.call(self._thread, []))):
                b.store(v, b.gep(events, [b.add(base, i64(j))], source_etype=I64))

    def _timed_task(self, task: ir.Function, slot: int) -> ir.Function:
        """``task`` wrapped to append one span per chunk it runs, on the thread that runs it
        (a worker of the pool, or the caller), tagged ``slot | TRACE_CHUNK``."""
        key = (task.name, slot)
        w = self._timed_tasks.get(key)
        if w is None:
            w = glue(ir.Function(self.ctx.module, TASK_FN, name=f"{task.name}.timed{slot}"))
            b = ir.IRBuilder(w.append_basic_block("entry"))
            ts = b.alloca(I64, size=i64(2))
            t0 = self._now(b, ts)
            b.call(task, list(w.args))
            self._record(b, i64(slot | TRACE_CHUNK), t0, self._now(b, ts))
            b.ret_void()
            self._timed_tasks[key] = w
        return w

    def _KernelCall(self, s: KernelCall):
        b = self.b
        ptrs = [self.ptr(r) for r in s.refs]
        if s.parallel and s.extent > 1:
            # The process-wide pool (runtime/thread_pool.py) runs the items; while it is busy
            # with another caller's job (or unset), this call runs them all on its own thread:
            # the other job already has the cores.
            with b.goto_entry_block():
                arr = b.alloca(PTR, size=i64(max(1, len(ptrs))))
            for k, p in enumerate(ptrs):
                b.store(p, b.gep(arr, [i64(k)], source_etype=PTR))
            task = self.tasks[s.name]
            if self.profile:
                task = self._timed_task(task, self._slot)
            pp = b.load(self._address_global(), typ=I64)
            pooled = self.fn.append_basic_block("pool")
            serial = self.fn.append_basic_block("serial")
            done = self.fn.append_basic_block("done")
            b.cbranch(b.icmp_unsigned("!=", pp, i64(0)), pooled, serial)
            b.position_at_end(pooled)
            r = b.call(b.inttoptr(pp, POOL_FN.as_pointer()), [task, arr, i64(s.extent), self.nthreads])
            b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, 0)), serial, done)
            b.position_at_end(serial)
            b.call(task, [arr, i64(0), i64(s.extent)])
            b.branch(done)
            b.position_at_end(done)
        else:
            b.call(self.kernels[s.name], ptrs + [i64(0), i64(s.extent)])

    def _address_global(self, name=POOL_PTR):
        g = self.ctx.module.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(self.ctx.module, I64, name=name)
            g.initializer = ir.Constant(I64, 0)
            g.align = 8
        return g

    def _HostCall(self, s: HostCall):
        b = self.b
        with b.goto_entry_block():
            arr = b.alloca(PTR, size=i64(max(1, len(s.refs))))
        for k, r in enumerate(s.refs):
            b.store(self.ptr(r), b.gep(arr, [i64(k)], source_etype=PTR))
        fp = b.load(self._address_global(HOST_CALL_PTR), typ=I64)
        status = b.call(b.inttoptr(fp, HOST_FN.as_pointer()), [i64(s.site), arr])
        ok = self.fn.append_basic_block("host_call.ok")
        failed = self.fn.append_basic_block("host_call.failed")
        b.cbranch(b.icmp_signed("==", status, ir.Constant(I32, 0)), ok, failed)
        b.position_at_end(failed)
        b.ret_void()  # the callback raised: stop here, the runtime raises its exception
        b.position_at_end(ok)

    def _Copy(self, s: Copy):
        if s.nbytes:
            U.memmove(self.ctx, self.b, self.ptr(s.dst), self.ptr(s.src), s.nbytes)

    def _load_selector(self, ref: BufRef, is_pred: bool) -> ir.Value:
        p = self.ptr(ref)
        if is_pred:
            v = self.b.load(p, typ=I8)
            return self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return self.b.load(p, typ=I32)

    def _While(self, s: While):
        b = self.b
        head = self.fn.append_basic_block("while.cond")
        body = self.fn.append_basic_block("while.body")
        done = self.fn.append_basic_block("while.end")
        b.branch(head)
        b.position_at_end(head)
        self._steps(s.cond)
        c = self._load_selector(s.cond_ref, True)
        b.cbranch(c, body, done)
        b.position_at_end(body)
        self._steps(s.body)
        b.branch(head)
        b.position_at_end(done)

    def _Switch(self, s: Switch):
        b = self.b
        sel = self._load_selector(s.selector, s.is_pred)
        done = self.fn.append_basic_block("switch.end")
        blocks = [self.fn.append_basic_block(f"branch{i}") for i in range(len(s.branches))]
        if s.is_pred:
            b.cbranch(sel, blocks[0], blocks[1])
        else:
            sw = b.switch(sel, blocks[-1])  # out of range -> last branch
            for i, blk in enumerate(blocks[:-1]):
                sw.add_case(ir.Constant(I32, i), blk)
        for blk, steps in zip(blocks, s.branches):
            b.position_at_end(blk)
            self._steps(steps)
            b.branch(done)
        b.position_at_end(done)


def emit_py_entry(ctx: ModuleContext, run_fn: ir.Function, nin: int, nout: int) -> ir.Function:
    """``hlo_run_py(tuple inputs, tuple outputs, arena, nthreads)``: reads the arrays' data
    pointers straight from the Python objects (no per-argument ctypes conversions), then runs
    ``hlo_run``. The caller holds references to every object for the duration of the call."""
    fn = glue(ir.Function(ctx.module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64]), name=PY_ENTRY))
    tin, tout, arena, nth = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ins = b.alloca(PTR, size=i64(max(1, nin)))
    outs = b.alloca(PTR, size=i64(max(1, nout)))
    for arr, tup, n in ((ins, tin, nin), (outs, tout, nout)):
        for k in range(n):
            obj = b.load(b.gep(tup, [i64(PY_TUPLE_ITEMS + 8 * k)], source_etype=I8), typ=PTR)
            data = b.load(b.gep(obj, [i64(NP_ARRAY_DATA)], source_etype=I8), typ=PTR)
            b.store(data, b.gep(arr, [i64(k)], source_etype=PTR))
    b.call(run_fn, [ins, outs, arena, nth])
    b.ret_void()
    return fn


# A program holds the GIL through ``hlo_call_py`` when it is this small: no loop, no parallel
# kernel, no host call, at most this many bytes of inputs, outputs and scratch (a few
# microseconds at most; releasing and taking the GIL again costs more than running it).
TINY_BYTES = 1 << 15


def is_tiny(steps, nbytes: int) -> bool:
    """Whether a program is small enough to run holding the GIL (``TINY_BYTES``)."""
    def small(ss):
        for s in ss:
            if isinstance(s, (While, HostCall)) or isinstance(s, KernelCall) and s.parallel and s.extent > 1:
                return False
            if isinstance(s, Switch) and not all(small(b) for b in s.branches):
                return False
        return True
    return nbytes <= TINY_BYTES and small(steps)


def emit_call_entry(ctx: ModuleContext, run_fn: ir.Function, in_shapes, out_shapes,
                    hold_gil: bool, in_nbytes=(), written=(), aliases=None) -> ir.Function:
    """``hlo_call_py(self, args, nargs)``: the CPython ``METH_FASTCALL`` entry described in
    ``hlo.runtime.cpu.abi`` (``CALL_ENTRY``). ``in_shapes`` / ``out_shapes``: the row-major
    shapes of the inputs and outputs; ``written``: the inputs the program writes (donated:
    each must be writable memory numpy or hlo's output pool owns, disjoint from the other
    inputs, else the call falls back), ``in_nbytes`` their sizes; ``aliases``: output -> the
    donated input it is (returned as that object, a new reference; the types must be equal).

    The inputs are checked, and the outputs allocated, by loops over tables of their shapes
    (read-only globals), so the entry's code is the same size for any number of them: unrolled,
    a program of 2,000 outputs had made a function of 12,000 blocks, on which LLVM's code
    generator took time growing faster than its size. (LLVM unrolls the loops of a few.)"""
    nin, nout = len(in_shapes), len(out_shapes)
    aliases = dict(aliases or {})
    fn = glue(ir.Function(ctx.module, ir.FunctionType(PTR, [PTR, PTR, I64]), name=abi.CALL_ENTRY))
    me, args, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fallback_bb = fn.append_basic_block("fallback")

    def at(p, off, typ=PTR):
        return b.load(b.gep(p, [i64(off)] if isinstance(off, int) else [off], source_etype=I8), typ=typ)

    def slot(k, typ=I64):
        return b.load(b.gep(cx, [i64(k) if isinstance(k, int) else k], source_etype=I64), typ=typ)

    def entry_of(p, k, typ=PTR):  # element k (a value) of an array of 8-byte entries
        return b.load(b.gep(p, [k], source_etype=typ if typ is I64 else PTR), typ=typ)

    def check(cond):  # continue where cond holds, else fall back
        ok = fn.append_basic_block("ok")
        b.cbranch(cond, ok, fallback_bb)
        b.position_at_end(ok)

    def call(k, ret, argtys, vals):
        return b.call(b.inttoptr(slot(k), ir.FunctionType(ret, argtys).as_pointer()), vals)

    def table(values):  # a read-only i64 table
        return ctx.constant_global(np.asarray(list(values) or [0], np.int64))

    def loop(count, name, body):
        """``for k in range(count): body(k)`` (count: an i64 value); ``body`` may add blocks."""
        pre = b.block
        head = fn.append_basic_block(f"{name}_next")
        step = fn.append_basic_block(f"{name}_step")
        done = fn.append_basic_block(f"{name}_done")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(i64(0), pre)
        b.cbranch(b.icmp_signed("<", k, count), step, done)
        b.position_at_end(step)
        body(k)
        k.add_incoming(b.add(k, i64(1)), b.block)
        b.branch(head)
        b.position_at_end(done)

    def shape_tables(shapes):
        offs, flat = [], []
        for s in shapes:
            offs.append(len(flat))
            flat.extend(int(n) for n in s)
        return table(len(s) for s in shapes), table(offs), table(flat)

    item = lambda tup, k: at(tup, PY_TUPLE_ITEMS + 8 * k)
    cx = at(item(me, abi.SELF_CTX), NP_ARRAY_DATA)
    check(b.icmp_signed("==", nargs, i64(nin)))
    guard = slot(abi.CTX_GUARD, PTR)
    check(b.icmp_signed("==", b.load(guard, typ=I64), slot(abi.CTX_EPOCH)))
    check(b.icmp_signed("==", b.load(b.gep(guard, [i64(1)], source_etype=I64), typ=I64), i64(0)))
    ins = b.alloca(PTR, size=i64(max(1, nin)))
    outs = b.alloca(PTR, size=i64(max(1, nout)))
    ndarray = slot(abi.CTX_NDARRAY, PTR)
    in_ndim, in_off, in_dims = shape_tables(in_shapes)

    def check_input(k):
        a = entry_of(args, k)
        check(b.icmp_unsigned("==", at(a, abi.PY_TYPE), ndarray))
        check(b.icmp_unsigned("==", at(a, abi.NP_ARRAY_DESCR), slot(b.add(k, i64(abi.CTX_DESCRS)), PTR)))
        ndim = entry_of(in_ndim, k, I64)
        check(b.icmp_signed("==", at(a, abi.NP_ARRAY_NDIM, I32), b.trunc(ndim, I32)))
        flags = b.and_(at(a, abi.NP_ARRAY_FLAGS, I32), ir.Constant(I32, abi.NPY_C_CONTIGUOUS_ALIGNED))
        check(b.icmp_signed("==", flags, ir.Constant(I32, abi.NPY_C_CONTIGUOUS_ALIGNED)))
        dims, first = at(a, abi.NP_ARRAY_DIMS), entry_of(in_off, k, I64)
        loop(ndim, "in_dim", lambda d: check(b.icmp_signed(
            "==", entry_of(dims, d, I64), entry_of(in_dims, b.add(first, d), I64))))
        b.store(at(a, NP_ARRAY_DATA), b.gep(ins, [k], source_etype=PTR))
    if nin:
        loop(i64(nin), "input", check_input)
    for k in written:  # donated: writable, and numpy's own memory or hlo's output pool's
        fl = at(entry_of(args, i64(k)), abi.NP_ARRAY_FLAGS, I32)
        check(b.icmp_signed("!=", b.and_(fl, ir.Constant(I32, abi.NPY_WRITEABLE)), ir.Constant(I32, 0)))
        owner_ok = fn.append_basic_block("owner_ok")
        not_own = fn.append_basic_block("not_own")
        b.cbranch(b.icmp_signed("!=", b.and_(fl, ir.Constant(I32, abi.NPY_OWNDATA)), ir.Constant(I32, 0)),
                  owner_ok, not_own)
        b.position_at_end(not_own)
        base = at(entry_of(args, i64(k)), abi.NP_ARRAY_BASE)
        check(b.icmp_unsigned("!=", base, ir.Constant(PTR, None)))
        block_type = slot(abi.CTX_DESCRS + nin + 2 * nout, PTR)
        b.cbranch(b.icmp_unsigned("==", at(base, abi.PY_TYPE), block_type), owner_ok, fallback_bb)
        b.position_at_end(owner_ok)
    # donated inputs overlap no other input (their byte ranges; every input is contiguous)
    for k in written:
        if not in_nbytes[k]:
            continue
        dk = b.ptrtoint(b.load(b.gep(ins, [i64(k)], source_etype=PTR), typ=PTR), I64)
        for j in range(nin):
            if j == k or not in_nbytes[j]:
                continue
            dj = b.ptrtoint(b.load(b.gep(ins, [i64(j)], source_etype=PTR), typ=PTR), I64)
            apart = b.or_(b.icmp_unsigned(">=", dk, b.add(dj, i64(in_nbytes[j]))),
                          b.icmp_unsigned(">=", dj, b.add(dk, i64(in_nbytes[k]))))
            check(apart)
    # the arena: this callable's own, unless another thread's call is using it
    arena = slot(abi.CTX_ARENA, PTR)
    busy = b.gep(cx, [i64(abi.CTX_ARENA_BUSY)], source_etype=I64)
    has_arena = b.icmp_unsigned("!=", arena, ir.Constant(PTR, None))
    check(b.not_(b.and_(has_arena, b.icmp_signed("!=", b.load(busy, typ=I64), i64(0)))))
    b.store(b.zext(has_arena, I64), busy)

    def release_arena():
        b.store(i64(0), busy)

    decref = lambda o: call(abi.CTX_DECREF, VOID, [PTR], [o])
    incref = lambda o: call(abi.CTX_INCREF, VOID, [PTR], [o])
    new_fty = [PTR, PTR, I32, PTR, PTR, PTR, I32, PTR]
    vec_fty = [PTR, PTR, I64, PTR]
    null = ir.Constant(PTR, None)
    # An allocation that fails drops the outputs made so far (``made``: the first ``nmade``)
    # and frees the arena, in one loop that every failure branches to.
    made = b.alloca(PTR, size=i64(max(1, nout)))
    nmade = b.alloca(I64)
    drop_then_fallback = fn.append_basic_block("drop_made_fallback")
    drop_then_fail = fn.append_basic_block("drop_made_fail")
    drop_all_fail = fn.append_basic_block("drop_all_fail")  # (the arena is released already)
    out_ndim, out_off, out_dims = shape_tables(out_shapes)
    alias_of = table(aliases.get(j, -1) for j in range(nout)) if aliases else None

    def make_output(j):
        output_made = None
        if alias_of is not None:  # an output that is a donated input: that object, a new reference
            aliased = fn.append_basic_block("aliased")
            allocate = fn.append_basic_block("allocate")
            output_made = fn.append_basic_block("output_made")
            src = entry_of(alias_of, j, I64)
            b.cbranch(b.icmp_signed(">=", src, i64(0)), aliased, allocate)
            b.position_at_end(aliased)
            ao = entry_of(args, src)
            incref(ao)
            b.store(ao, b.gep(made, [j], source_etype=PTR))
            b.store(at(ao, NP_ARRAY_DATA), b.gep(outs, [j], source_etype=PTR))
            b.branch(output_made)
            b.position_at_end(allocate)
        # an output of the recycled-output pool's size: its allocator (a callable of no
        # arguments); any other: numpy's PyArray_NewFromDescr
        alloc = slot(b.add(j, i64(abi.CTX_DESCRS + nin + nout)), PTR)
        pooled = fn.append_basic_block("pooled")
        plain = fn.append_basic_block("plain")
        made_bb = fn.append_basic_block("allocated")
        failed = fn.append_basic_block("alloc_failed")
        b.cbranch(b.icmp_unsigned("!=", alloc, null), pooled, plain)
        b.position_at_end(pooled)
        po = call(abi.CTX_VECTORCALL, PTR, vec_fty, [alloc, null, i64(0), null])
        called = fn.append_basic_block("pool_returned")
        b.cbranch(b.icmp_unsigned("==", po, null), failed, called)
        b.position_at_end(called)
        not_array = fn.append_basic_block("pool_not_array")
        b.cbranch(b.icmp_unsigned("==", at(po, abi.PY_TYPE), ndarray), made_bb, not_array)
        b.position_at_end(not_array)  # not what the entry writes into: the Python path decides
        b.store(po, b.gep(made, [j], source_etype=PTR))
        b.store(b.add(j, i64(1)), nmade)
        b.branch(drop_then_fallback)
        b.position_at_end(plain)
        descr = slot(b.add(j, i64(abi.CTX_DESCRS + nin)), PTR)
        incref(descr)  # PyArray_NewFromDescr steals a reference
        ndim = b.trunc(entry_of(out_ndim, j, I64), I32)
        dims = b.gep(out_dims, [entry_of(out_off, j, I64)], source_etype=I64)  # (read only)
        no = call(abi.CTX_NEW_FROM_DESCR, PTR, new_fty,
                  [ndarray, descr, ndim, dims, null, null, ir.Constant(I32, 0), null])
        plain_end = b.block
        b.cbranch(b.icmp_unsigned("==", no, null), failed, made_bb)
        b.position_at_end(failed)  # the exception (MemoryError, the allocator's) is set
        b.store(j, nmade)
        b.branch(drop_then_fail)
        b.position_at_end(made_bb)
        o = b.phi(PTR)
        o.add_incoming(po, called)
        o.add_incoming(no, plain_end)
        b.store(o, b.gep(made, [j], source_etype=PTR))
        b.store(at(o, NP_ARRAY_DATA), b.gep(outs, [j], source_etype=PTR))
        if output_made is not None:
            b.branch(output_made)
            b.position_at_end(output_made)
    if nout:
        loop(i64(nout), "output", make_output)
    for block, to_fallback, release in ((drop_then_fallback, True, True), (drop_then_fail, False, True),
                                        (drop_all_fail, False, False)):
        after = b.block
        b.position_at_end(block)
        loop(b.load(nmade, typ=I64), "drop", lambda k: decref(entry_of(made, k)))
        if release:
            release_arena()
        if to_fallback:
            b.branch(fallback_bb)
        else:
            b.ret(null)
        b.position_at_end(after)
    nth = slot(abi.CTX_NTHREADS)
    if hold_gil:
        b.call(run_fn, [ins, outs, arena, nth])
    else:
        ts = call(abi.CTX_SAVE_THREAD, PTR, [], [])
        b.call(run_fn, [ins, outs, arena, nth])
        call(abi.CTX_RESTORE_THREAD, VOID, [PTR], [ts])
    release_arena()
    hits = b.gep(cx, [i64(abi.CTX_HITS)], source_etype=I64)
    b.store(b.add(b.load(hits, typ=I64), i64(1)), hits)
    if nout == 1:
        single = fn.append_basic_block("single")
        multi = fn.append_basic_block("multi")
        b.cbranch(b.icmp_signed("==", slot(abi.CTX_OUT_MODE), i64(abi.OUT_SINGLE)), single, multi)
        b.position_at_end(single)
        b.ret(b.load(made, typ=PTR))
        b.position_at_end(multi)
    tup = call(abi.CTX_TUPLE_NEW, PTR, [I64], [i64(nout)])
    tup_fail = fn.append_basic_block("tuple_failed")
    tup_ok = fn.append_basic_block("tuple_ok")
    b.cbranch(b.icmp_unsigned("==", tup, null), tup_fail, tup_ok)
    b.position_at_end(tup_fail)
    b.store(i64(nout), nmade)
    b.branch(drop_all_fail)
    b.position_at_end(tup_ok)
    items = b.gep(tup, [i64(PY_TUPLE_ITEMS)], source_etype=I8)
    if nout:  # the tuple takes the references
        loop(i64(nout), "tuple_item", lambda j: b.store(entry_of(made, j), b.gep(items, [j], source_etype=PTR)))
    as_tuple = fn.append_basic_block("as_tuple")
    finish = fn.append_basic_block("finish")
    b.cbranch(b.icmp_signed("==", slot(abi.CTX_OUT_MODE), i64(abi.OUT_TUPLE)), as_tuple, finish)
    b.position_at_end(as_tuple)
    b.ret(tup)
    b.position_at_end(finish)
    one = b.alloca(PTR)
    b.store(tup, one)
    r = call(abi.CTX_VECTORCALL, PTR, vec_fty, [item(me, abi.SELF_FINISH), one, i64(1), null])
    decref(tup)
    b.ret(r)
    # anything unexpected: the Python path, with the same arguments
    b.position_at_end(fallback_bb)
    r = call(abi.CTX_VECTORCALL, PTR, vec_fty, [item(me, abi.SELF_FALLBACK), args, nargs, null])
    b.ret(r)
    return fn
