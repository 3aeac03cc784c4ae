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
holds the slot count, which the runtime checks against the manifest. Without ``profile`` the
emitted code is exactly the unprofiled one.
"""
from __future__ import annotations

import llvmlite.ir as ir

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
        with self.b.goto_entry_block():
            self._timespec = self.b.alloca(I64, size=i64(2))

    def _now(self) -> ir.Value:
        """Nanoseconds of the monotonic clock."""
        b = self.b
        b.call(self._clock, [ir.Constant(I32, CLOCK_MONOTONIC), self._timespec])
        sec = b.load(self._timespec, typ=I64)
        nsec = b.load(b.gep(self._timespec, [i64(1)], source_etype=I64), typ=I64)
        return b.add(b.mul(sec, i64(1_000_000_000)), nsec)

    def _count(self, slot: int, t0: ir.Value) -> None:
        b = self.b
        dt = b.sub(self._now(), t0)
        ns = b.gep(self._counters, [i64(0), i64(2 * slot)], source_etype=self._counters.value_type)
        calls = b.gep(self._counters, [i64(0), i64(2 * slot + 1)], source_etype=self._counters.value_type)
        b.atomic_rmw("add", ns, dt, "monotonic")
        b.atomic_rmw("add", calls, i64(1), "monotonic")

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
                    hold_gil: bool) -> ir.Function:
    """``hlo_call_py(self, args, nargs)``: the CPython ``METH_FASTCALL`` entry described in
    ``hlo.runtime.cpu.abi`` (``CALL_ENTRY``). ``in_shapes`` / ``out_shapes``: the row-major
    shapes of the inputs and outputs. Anything it does not expect (a wrong argument, a stale
    guard, a busy arena, an allocator that returns no array) goes to the Python path."""
    e = _CallEntry(ctx, len(in_shapes), len(out_shapes))
    e.check_call()
    ins, outs = e.pointer_arrays()
    e.check_inputs(in_shapes, ins)
    arena = e.take_arena()
    out_objs = e.make_outputs(out_shapes, outs)
    e.run(run_fn, ins, outs, arena, hold_gil)
    e.return_outputs(out_objs)
    e.fall_back()
    return e.fn


class _CallEntry:
    """The builder of ``hlo_call_py`` (``emit_call_entry`` calls its steps in order): reads of
    the Python objects and of the callable's context (``cx``: ``abi.CTX_*`` slots), checks that
    go to the fallback block, and calls through the context's function pointers."""

    def __init__(self, ctx: ModuleContext, nin: int, nout: int):
        self.nin, self.nout = nin, nout
        self.fn = fn = glue(ir.Function(ctx.module, ir.FunctionType(PTR, [PTR, PTR, I64]), name=abi.CALL_ENTRY))
        self.me, self.args, self.nargs = fn.args
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.fallback_bb = fn.append_basic_block("fallback")
        self.null = ir.Constant(PTR, None)
        self.vec_fty = [PTR, PTR, I64, PTR]   # vectorcall(callable, args, nargs, kwnames)
        self.cx = self.at(self.item(self.me, abi.SELF_CTX), NP_ARRAY_DATA)

    # ---- helpers
    def at(self, p, off, typ=PTR):
        """The ``typ`` at byte ``off`` of object ``p``."""
        b = self.b
        return b.load(b.gep(p, [i64(off)], source_etype=I8), typ=typ)

    def item(self, tup, k):
        """Item ``k`` of tuple ``tup``."""
        return self.at(tup, PY_TUPLE_ITEMS + 8 * k)

    def slot(self, k, typ=I64):
        """Slot ``k`` of the context."""
        b = self.b
        return b.load(b.gep(self.cx, [i64(k)], source_etype=I64), typ=typ)

    def check(self, cond):
        """Continue where ``cond`` holds, else fall back."""
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(cond, ok, self.fallback_bb)
        self.b.position_at_end(ok)

    def call(self, k, ret, argtys, vals):
        """Call the function whose pointer is in slot ``k``."""
        b = self.b
        return b.call(b.inttoptr(self.slot(k), ir.FunctionType(ret, argtys).as_pointer()), vals)

    def incref(self, o):
        return self.call(abi.CTX_INCREF, VOID, [PTR], [o])

    def decref(self, o):
        return self.call(abi.CTX_DECREF, VOID, [PTR], [o])

    def release_arena(self):
        self.b.store(i64(0), self.busy)

    # ---- the steps
    def check_call(self):
        """The argument count, and the guard: the context's epoch is the guard's and nothing
        invalidated it."""
        b = self.b
        self.check(b.icmp_signed("==", self.nargs, i64(self.nin)))
        guard = self.slot(abi.CTX_GUARD, PTR)
        self.check(b.icmp_signed("==", b.load(guard, typ=I64), self.slot(abi.CTX_EPOCH)))
        self.check(b.icmp_signed("==", b.load(b.gep(guard, [i64(1)], source_etype=I64), typ=I64), i64(0)))

    def pointer_arrays(self):
        """(ins, outs): the arrays of the inputs' and outputs' data pointers that ``hlo_run`` takes."""
        b = self.b
        return b.alloca(PTR, size=i64(max(1, self.nin))), b.alloca(PTR, size=i64(max(1, self.nout)))

    def check_inputs(self, in_shapes, ins):
        """Each argument a numpy array of the compiled dtype and shape, C-contiguous and
        aligned; its data pointer into ``ins``."""
        b = self.b
        self.ndarray = ndarray = self.slot(abi.CTX_NDARRAY, PTR)
        for k, shape in enumerate(in_shapes):
            a = b.load(b.gep(self.args, [i64(k)], source_etype=PTR), typ=PTR)
            self.check(b.icmp_unsigned("==", self.at(a, abi.PY_TYPE), ndarray))
            self.check(b.icmp_unsigned("==", self.at(a, abi.NP_ARRAY_DESCR), self.slot(abi.CTX_DESCRS + k, PTR)))
            self.check(b.icmp_signed("==", self.at(a, abi.NP_ARRAY_NDIM, I32), ir.Constant(I32, len(shape))))
            flags = b.and_(self.at(a, abi.NP_ARRAY_FLAGS, I32), ir.Constant(I32, abi.NPY_C_CONTIGUOUS_ALIGNED))
            self.check(b.icmp_signed("==", flags, ir.Constant(I32, abi.NPY_C_CONTIGUOUS_ALIGNED)))
            if shape:
                dims = self.at(a, abi.NP_ARRAY_DIMS)
                for d, n in enumerate(shape):
                    self.check(b.icmp_signed("==", b.load(b.gep(dims, [i64(d)], source_etype=I64), typ=I64),
                                             i64(n)))
            b.store(self.at(a, NP_ARRAY_DATA), b.gep(ins, [i64(k)], source_etype=PTR))

    def take_arena(self):
        """The arena: this callable's own, marked busy, unless another thread's call is using it
        (then the Python path)."""
        b = self.b
        arena = self.slot(abi.CTX_ARENA, PTR)
        self.busy = b.gep(self.cx, [i64(abi.CTX_ARENA_BUSY)], source_etype=I64)
        has_arena = b.icmp_unsigned("!=", arena, self.null)
        self.check(b.not_(b.and_(has_arena, b.icmp_signed("!=", b.load(self.busy, typ=I64), i64(0)))))
        b.store(b.zext(has_arena, I64), self.busy)
        return arena

    def make_outputs(self, out_shapes, outs):
        """The output arrays (new references), their data pointers into ``outs``. An output of
        the recycled-output pool's size comes from its allocator (a callable of no arguments);
        any other from numpy's PyArray_NewFromDescr. Where an allocation fails, the outputs made
        are dropped and the arena released: the entry returns NULL (the exception is set), or
        takes the Python path where the allocator returned something other than an array."""
        b = self.b
        dims_buf = b.alloca(I64, size=i64(max(1, max((len(s) for s in out_shapes), default=1))))
        out_objs = []
        for j, shape in enumerate(out_shapes):
            o = self._make_output(j, shape, dims_buf, out_objs)
            out_objs.append(o)
            b.store(self.at(o, NP_ARRAY_DATA), b.gep(outs, [i64(j)], source_etype=PTR))
        return out_objs

    def _make_output(self, j, shape, dims_buf, made):
        b, fn, null, ndarray = self.b, self.fn, self.null, self.ndarray

        def drop_made(extra=None):  # an allocation failed: drop the outputs made, free the arena
            for prev in made + ([extra] if extra is not None else []):
                self.decref(prev)
            self.release_arena()

        alloc = self.slot(abi.CTX_DESCRS + self.nin + self.nout + j, PTR)
        pooled = fn.append_basic_block("pooled")
        plain = fn.append_basic_block("plain")
        allocated = fn.append_basic_block("allocated")
        failed = fn.append_basic_block("alloc_failed")
        b.cbranch(b.icmp_unsigned("!=", alloc, null), pooled, plain)
        b.position_at_end(pooled)
        po = self.call(abi.CTX_VECTORCALL, PTR, self.vec_fty, [alloc, null, i64(0), null])
        called = fn.append_basic_block("pool_returned")
        b.cbranch(b.icmp_unsigned("==", po, null), failed, called)
        b.position_at_end(called)
        not_array = fn.append_basic_block("pool_not_array")
        b.cbranch(b.icmp_unsigned("==", self.at(po, abi.PY_TYPE), ndarray), allocated, not_array)
        b.position_at_end(not_array)  # not what the entry writes into: the Python path decides
        drop_made(po)
        b.branch(self.fallback_bb)
        b.position_at_end(plain)
        descr = self.slot(abi.CTX_DESCRS + self.nin + j, PTR)
        self.incref(descr)  # PyArray_NewFromDescr steals a reference
        for d, n in enumerate(shape):
            b.store(i64(n), b.gep(dims_buf, [i64(d)], source_etype=I64))
        no = self.call(abi.CTX_NEW_FROM_DESCR, PTR, [PTR, PTR, I32, PTR, PTR, PTR, I32, PTR],
                       [ndarray, descr, ir.Constant(I32, len(shape)), dims_buf, null, null,
                        ir.Constant(I32, 0), null])
        plain_end = b.block
        b.cbranch(b.icmp_unsigned("==", no, null), failed, allocated)
        b.position_at_end(failed)  # the exception (MemoryError, the allocator's) is set
        drop_made()
        b.ret(null)
        b.position_at_end(allocated)
        o = b.phi(PTR)
        o.add_incoming(po, called)
        o.add_incoming(no, plain_end)
        return o

    def run(self, run_fn, ins, outs, arena, hold_gil: bool):
        """``hlo_run`` (without the GIL unless ``hold_gil``), then the arena released and the
        context's hit count bumped."""
        b = self.b
        nth = self.slot(abi.CTX_NTHREADS)
        if hold_gil:
            b.call(run_fn, [ins, outs, arena, nth])
        else:
            ts = self.call(abi.CTX_SAVE_THREAD, PTR, [], [])
            b.call(run_fn, [ins, outs, arena, nth])
            self.call(abi.CTX_RESTORE_THREAD, VOID, [PTR], [ts])
        self.release_arena()
        hits = b.gep(self.cx, [i64(abi.CTX_HITS)], source_etype=I64)
        b.store(b.add(b.load(hits, typ=I64), i64(1)), hits)

    def return_outputs(self, out_objs):
        """The result as the context's output mode says: the single output, the tuple of
        outputs, or the tuple passed to the callable's finishing function (the pytree's
        unflattening)."""
        b, fn, null = self.b, self.fn, self.null
        if self.nout == 1:
            single = fn.append_basic_block("single")
            multi = fn.append_basic_block("multi")
            b.cbranch(b.icmp_signed("==", self.slot(abi.CTX_OUT_MODE), i64(abi.OUT_SINGLE)), single, multi)
            b.position_at_end(single)
            b.ret(out_objs[0])
            b.position_at_end(multi)
        tup = self.call(abi.CTX_TUPLE_NEW, PTR, [I64], [i64(self.nout)])
        tup_fail = fn.append_basic_block("tuple_failed")
        tup_ok = fn.append_basic_block("tuple_ok")
        b.cbranch(b.icmp_unsigned("==", tup, null), tup_fail, tup_ok)
        b.position_at_end(tup_fail)
        for o in out_objs:
            self.decref(o)
        b.ret(null)
        b.position_at_end(tup_ok)
        for j, o in enumerate(out_objs):  # the tuple takes the references
            b.store(o, b.gep(tup, [i64(PY_TUPLE_ITEMS + 8 * j)], source_etype=I8))
        as_tuple = fn.append_basic_block("as_tuple")
        finish = fn.append_basic_block("finish")
        b.cbranch(b.icmp_signed("==", self.slot(abi.CTX_OUT_MODE), i64(abi.OUT_TUPLE)), as_tuple, finish)
        b.position_at_end(as_tuple)
        b.ret(tup)
        b.position_at_end(finish)
        one = b.alloca(PTR)
        b.store(tup, one)
        r = self.call(abi.CTX_VECTORCALL, PTR, self.vec_fty, [self.item(self.me, abi.SELF_FINISH), one, i64(1), null])
        self.decref(tup)
        b.ret(r)

    def fall_back(self):
        """The fallback block: anything unexpected takes the Python path, with the same arguments."""
        b = self.b
        b.position_at_end(self.fallback_bb)
        r = self.call(abi.CTX_VECTORCALL, PTR, self.vec_fty,
                      [self.item(self.me, abi.SELF_FALLBACK), self.args, self.nargs, self.null])
        b.ret(r)
