"""The CPU's native form of the run-time program: ``EntryEmitter`` turns a step tree
(``hlo.runtime.steps``: buffers, kernel calls, copies, while / if / case) into the single native
entry point ``hlo_run(inputs, outputs, arena, nthreads)`` that runs the whole schedule, so one
call from Python runs everything. A ``HostCall`` calls the runtime's dispatcher through the
global ``HOST_CALL_PTR`` with the site number and the site's buffers; when it returns nonzero
(the Python callback raised), ``hlo_run`` returns at once and the runtime raises the error.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .. import llvm_util as U
from ..llvm_util import I8, I32, I64, PTR, VOID, ModuleContext, i64
from hlo.runtime.cpu.abi import (ENTRY, HOST_CALL_PTR, NP_ARRAY_DATA, POOL_PTR, PY_ENTRY,  # noqa: F401
                                  PY_TUPLE_ITEMS, RW_ANCHOR)
from hlo.runtime.steps import (BufRef, Copy, HostCall, KernelCall, Switch, While,  # noqa: F401
                               describe_steps)  # noqa: F401 (re-exported)


TASK_FN = ir.FunctionType(VOID, [PTR, I64, I64])


# ------------------------------------------------------------------------------------------
# The entry point
# ------------------------------------------------------------------------------------------

POOL_FN = ir.FunctionType(I32, [TASK_FN.as_pointer(), PTR, I64, I64])
HOST_FN = ir.FunctionType(I32, [I64, PTR])  # the runtime's dispatcher: (site, buffers) -> status


class EntryEmitter:
    def __init__(self, ctx: ModuleContext, kernels: dict, tasks: dict, constants: dict):
        self.ctx = ctx
        self.kernels = kernels  # name -> ir.Function(ptr..., lo, hi)
        self.tasks = tasks  # name -> ir.Function(ptr args, lo, hi)
        self.constants = constants  # const id -> np.ndarray

    def emit(self, steps) -> ir.Function:
        fn = ir.Function(self.ctx.module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64]), name=ENTRY)
        self.fn = fn
        self.inputs, self.outputs, self.arena, self.nthreads = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.b = b
        self._steps(steps)
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
            getattr(self, "_" + type(s).__name__)(s)

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
    fn = ir.Function(ctx.module, ir.FunctionType(VOID, [PTR, PTR, PTR, I64]), name=PY_ENTRY)
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
