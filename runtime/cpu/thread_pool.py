"""The process-wide worker pool that compiled kernels spread their loops over.

Written in LLVM IR (pthreads from libc; no C compiler needed): library code, built once per
machine and hlo version and kept in the library folder (``code_library``), linked once per process.
Executables call it through a function pointer that the loader stores into their
``hlo_pool_ptr`` global; an executable whose pointer is unset (or a pool that is busy with
another caller's job) runs the loop on the calling thread alone, so nothing depends on the
pool for correctness (and a concurrent caller does not crowd the cores the other job uses).

``parallel_for(fn, args, n, nthreads)`` runs ``fn(args, lo, hi)`` over [0, n) in chunks: the
chunks are cut into one contiguous range per thread (the calling thread's first, then each
worker's), each range with an atomic counter. A thread takes the chunks of its own range in
order, then those left in the others' ranges, so a core that is slow (or shared with another
process) simply takes fewer, and a worker that never joins has its range taken by the others.
A thread gets the same range from call to call (before, one counter handed every chunk to
whichever thread asked first, so a GEMM's blocks and an elementwise kernel's rows moved
between the cores' L2 caches from call to call): product kernels in the program, 2 threads of
an AVX-512 Xeon, alternating processes, linear_relu 249-264 -> 268-299 GFLOP/s, simple_mlp
203-234 -> 239-262; softmax 4.31-4.63 -> 4.17-4.20 ms; the others the same.
Workers join a job when they wake up; the caller never waits for one that has not joined (it
closes the job once no chunk is left in any range), so a descheduled worker costs nothing. The
workers persist (a BLAS called inside a kernel keeps its per-thread buffers) and sleep on a
condition variable between jobs. One job runs at a time; a concurrent caller gets 0 back
(try-lock failed) and runs its loop itself.

Counters, one add per thread per job: jobs run, calls that found the pool busy, and the chunks
each thread took (callers together, then each worker); ``pool_stats()`` reads them, so a test
can see that the workers really take part. A forked child has none of the parent's workers
(and may have inherited a lock a worker held): ``after_fork_in_child`` resets the pool there,
so its first parallel loop starts fresh workers instead of running alone (or blocking).
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from typing import Optional, Tuple

import llvmlite.ir as ir

from hlo.backends.llvm_util import I8, I32, I64, PTR, VOID, ModuleContext, for_range, i64

MAX_WORKERS = 63
CHUNKS_PER_THREAD = 8
COUNTER_STRIDE = 8   # i64s between two ranges' chunk counters (a cache line)
# Rounds of ``pause`` (about 20-40 ns each) that a worker watches for the next job, and that
# the caller watches for its helpers to finish, before sleeping on a condition variable: a
# sleeping thread takes tens of microseconds to wake. On 2 threads (Zen 3): tanh over 64K f32
# 30 -> 16 us, 32x512x256 matmul 71 -> 56 us. 0 disables.
SPIN_ROUNDS = 4096
TASK_FN = ir.FunctionType(VOID, [PTR, I64, I64])
POOL_FN = ir.FunctionType(I32, [TASK_FN.as_pointer(), PTR, I64, I64])
SYMBOL = "hlo_pool_parallel_for"
STATS_SYMBOL = "hlo_pool_stats"  # (i64* out, i64 n) -> i64 written: see PoolStats
RESET_SYMBOL = "hlo_pool_after_fork"  # () -> void: forget the workers and locks (in a child)


def _global(ctx, name, ty, init=None):
    g = ir.GlobalVariable(ctx.module, ty, name=name)
    g.initializer = init if init is not None else ir.Constant(ty, None)
    g.linkage = "internal"
    g.align = 64
    return g


def _is_x86() -> bool:
    from .target import host
    return host().triple.startswith(("x86_64", "i686", "i386"))


def _watch(b: ir.IRBuilder, pause, waiting) -> None:
    """Emit a loop of up to SPIN_ROUNDS rounds (a ``pause`` each, where the target has one)
    that runs while ``waiting()`` (emitted anew each round) is true; the builder ends after it."""
    fn = b.function
    spin = fn.append_basic_block("spin")
    spun = fn.append_basic_block("spun")
    pre = b.block
    b.branch(spin)
    b.position_at_end(spin)
    i = b.phi(I64)
    i.add_incoming(i64(0), pre)
    if pause is not None:
        b.call(pause, [])
    still = waiting()
    nxt = b.add(i, i64(1))
    i.add_incoming(nxt, spin)
    b.cbranch(b.and_(still, b.icmp_signed("<", nxt, i64(SPIN_ROUNDS))), spin, spun)
    b.position_at_end(spun)


class _PoolData:
    """The pool's state: internal globals of the module (one copy per process), zero-initialized."""

    def __init__(self, ctx: ModuleContext):
        # pthread_mutex_t / pthread_cond_t fit in 64 bytes; zero = default-initialized
        self.blob = blob = ir.ArrayType(I8, 64)
        self.submit_mu = _global(ctx, "pool.submit_mu", blob)  # held by the caller whose job runs
        self.mu = _global(ctx, "pool.mu", blob)
        self.cv_start = _global(ctx, "pool.cv_start", blob)
        self.cv_done = _global(ctx, "pool.cv_done", blob)
        self.gen = _global(ctx, "pool.gen", I64)  # counts jobs: a worker sees a new one by it
        # the job: fn(args, lo, hi) over [0, n) in nchunks chunks of ``chunk``
        self.job_fn = _global(ctx, "pool.fn", I64)
        self.job_args = _global(ctx, "pool.args", I64)
        self.job_n = _global(ctx, "pool.n", I64)
        self.job_chunk = _global(ctx, "pool.chunk", I64)
        self.job_nchunks = _global(ctx, "pool.nchunks", I64)
        # one chunk counter per thread's range, a cache line apart
        self.next_chunk = _global(ctx, "pool.next", ir.ArrayType(I64, (MAX_WORKERS + 1) * COUNTER_STRIDE))
        self.job_threads = _global(ctx, "pool.threads", I64)  # threads whose ranges the chunks are in
        self.active = _global(ctx, "pool.active", I64)
        self.wanted = _global(ctx, "pool.wanted", I64)  # workers that may join the current job
        self.is_open = _global(ctx, "pool.open", I64)  # 1 while the caller still accepts helpers
        self.nworkers = _global(ctx, "pool.nworkers", I64)
        self.jobs = _global(ctx, "pool.jobs", I64)  # jobs the pool ran
        self.busy_calls = _global(ctx, "pool.busy", I64)  # calls that found it busy (ran alone)
        self.slots = ir.ArrayType(I64, MAX_WORKERS + 1)
        # chunks taken: [0] callers, [1 + w] worker w
        self.chunks_by = _global(ctx, "pool.chunks", self.slots)

    def counter(self, b: ir.IRBuilder, t) -> ir.Value:
        """The chunk counter of thread ``t``'s range."""
        return b.gep(self.next_chunk, [i64(0), b.mul(t, i64(COUNTER_STRIDE))], inbounds=True)

    def count_chunks(self, b: ir.IRBuilder, slot, n) -> None:
        """Add ``n`` to the chunks taken by thread ``slot`` (only that thread writes it)."""
        p = b.gep(self.chunks_by, [i64(0), slot], inbounds=True)
        b.store(b.add(b.load(p, typ=I64), n), p)


class _Libc:
    """The pthread functions the pool calls, and the spin loop's ``pause`` (x86 only)."""

    def __init__(self, ctx: ModuleContext):
        self.pause = ctx.declare("llvm.x86.sse2.pause", VOID, []) if _is_x86() else None
        self.lock = ctx.declare("pthread_mutex_lock", I32, [PTR])
        self.trylock = ctx.declare("pthread_mutex_trylock", I32, [PTR])
        self.unlock = ctx.declare("pthread_mutex_unlock", I32, [PTR])
        self.wait = ctx.declare("pthread_cond_wait", I32, [PTR, PTR])
        self.broadcast = ctx.declare("pthread_cond_broadcast", I32, [PTR])
        self.create = ctx.declare("pthread_create", I32, [PTR, PTR, PTR, PTR])
        self.detach = ctx.declare("pthread_detach", I32, [I64])


def build_pool_module() -> str:
    """The LLVM IR of the worker pool's module (the module docstring says how it works): its
    state as internal globals, then ``pool.run_chunks`` (one thread's share of a job), the
    workers' loop ``pool.worker``, and the three functions it exports: ``parallel_for``
    (``SYMBOL``), the counters' reader (``STATS_SYMBOL``) and the reset after a fork
    (``RESET_SYMBOL``). ``library_object`` compiles it."""
    ctx = ModuleContext("hlo_thread_pool")
    pool = _PoolData(ctx)
    libc = _Libc(ctx)
    run_chunks = _emit_run_chunks(ctx.module, pool)
    worker = _emit_worker(ctx.module, pool, libc, run_chunks)
    _emit_parallel_for(ctx.module, pool, libc, run_chunks, worker)
    _emit_stats(ctx.module, pool)
    _emit_after_fork(ctx.module, pool)
    return str(ctx.module)


def _emit_run_chunks(m: ir.Module, pool: _PoolData) -> ir.Function:
    """``pool.run_chunks(me) -> chunks taken``. Thread ``me`` (0: the caller, 1 + w: worker w)
    first takes the chunks of its own range, in order, then those left in the other threads'
    ranges, in the same order (each range has one counter, so a chunk is taken once)."""
    rc = ir.Function(m, ir.FunctionType(I64, [I64]), name="pool.run_chunks")
    rc.linkage = "internal"
    me = rc.args[0]
    b = ir.IRBuilder(rc.append_basic_block("entry"))
    taken = b.alloca(I64)
    b.store(i64(0), taken)
    fn = b.inttoptr(b.load(pool.job_fn, typ=I64), TASK_FN.as_pointer())
    args = b.inttoptr(b.load(pool.job_args, typ=I64), PTR)
    n = b.load(pool.job_n, typ=I64)
    chunk = b.load(pool.job_chunk, typ=I64)
    nch = b.load(pool.job_nchunks, typ=I64)
    nthr = b.load(pool.job_threads, typ=I64)
    with for_range(b, i64(0), nthr, "range") as r:
        t = b.urem(b.add(me, r), nthr)              # own range first, then the next ones
        first = b.udiv(b.mul(t, nch), nthr)
        end = b.udiv(b.mul(b.add(t, i64(1)), nch), nthr)
        counter = pool.counter(b, t)
        head = rc.append_basic_block("take")
        body = rc.append_basic_block("run")
        done = rc.append_basic_block("range.done")
        b.branch(head)
        b.position_at_end(head)
        k = b.add(first, b.atomic_rmw("add", counter, i64(1), "seq_cst"))
        b.cbranch(b.icmp_signed("<", k, end), body, done)
        b.position_at_end(body)
        lo = b.mul(k, chunk)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, n), hi, n)
        b.call(fn, [args, lo, hi])
        b.store(b.add(b.load(taken, typ=I64), i64(1)), taken)
        b.branch(head)
        b.position_at_end(done)
    b.ret(b.load(taken, typ=I64))
    return rc


def _emit_worker(m: ir.Module, pool: _PoolData, libc: _Libc, run_chunks: ir.Function) -> ir.Function:
    """``pool.worker(arg)``, the loop of worker ``arg`` (its index): sleeps until a new job it
    may join is open; joins by counting itself in ``active`` (under the lock), takes chunks,
    and signals when it was the last."""
    wk = ir.Function(m, ir.FunctionType(PTR, [PTR]), name="pool.worker")
    wk.linkage = "internal"
    b = ir.IRBuilder(wk.append_basic_block("entry"))
    my_index = b.ptrtoint(wk.args[0], I64)
    seen = b.alloca(I64)
    b.store(i64(0), seen)
    loop = wk.append_basic_block("loop")
    waitb = wk.append_basic_block("wait")
    check = wk.append_basic_block("check")
    work = wk.append_basic_block("work")
    b.branch(loop)
    b.position_at_end(loop)
    b.call(libc.lock, [pool.mu])
    b.branch(check)
    b.position_at_end(check)
    g = b.load(pool.gen, typ=I64)
    fresh = b.icmp_unsigned("!=", g, b.load(seen, typ=I64))
    joined = b.icmp_signed("<", my_index, b.load(pool.wanted, typ=I64))
    opened = b.icmp_unsigned("!=", b.load(pool.is_open, typ=I64), i64(0))
    b.cbranch(b.and_(b.and_(fresh, joined), opened), work, waitb)
    b.position_at_end(waitb)
    b.store(g, seen)  # a job this worker did not join is over for it
    if SPIN_ROUNDS:
        # watch ``gen`` for a while before sleeping: a program's next parallel kernel usually
        # starts within microseconds, and a sleeping worker takes ~10-50 us to wake
        sleep = wk.append_basic_block("sleep")
        b.call(libc.unlock, [pool.mu])
        _watch(b, libc.pause, lambda: b.icmp_unsigned("==", b.load_atomic(pool.gen, "acquire", 8, typ=I64), g))
        b.call(libc.lock, [pool.mu])
        b.cbranch(b.icmp_unsigned("!=", b.load(pool.gen, typ=I64), g), check, sleep)
        b.position_at_end(sleep)
    b.call(libc.wait, [pool.cv_start, pool.mu])
    b.branch(check)
    b.position_at_end(work)
    b.store(g, seen)
    b.atomic_rmw("add", pool.active, i64(1), "seq_cst")
    b.call(libc.unlock, [pool.mu])
    pool.count_chunks(b, b.add(my_index, i64(1)), b.call(run_chunks, [b.add(my_index, i64(1))]))
    left = b.atomic_rmw("sub", pool.active, i64(1), "seq_cst")
    last = b.icmp_signed("==", left, i64(1))
    with b.if_then(last):
        b.call(libc.lock, [pool.mu])
        b.call(libc.broadcast, [pool.cv_done])
        b.call(libc.unlock, [pool.mu])
    b.branch(loop)
    return wk


def _emit_parallel_for(m: ir.Module, pool: _PoolData, libc: _Libc, run_chunks: ir.Function,
                       worker: ir.Function) -> None:
    """``parallel_for(fn, args, n, nthreads) -> 1 if run here, 0 if the pool was busy``: starts
    the workers missing, opens the job, takes chunks itself, closes the job and waits for the
    workers that joined it."""
    pf = ir.Function(m, POOL_FN, name=SYMBOL)
    fn_, args_, n_, nth_ = pf.args
    b = ir.IRBuilder(pf.append_basic_block("entry"))
    busy = pf.append_basic_block("busy")
    go = pf.append_basic_block("go")
    got = b.call(libc.trylock, [pool.submit_mu])
    b.cbranch(b.icmp_signed("!=", got, ir.Constant(I32, 0)), busy, go)
    b.position_at_end(busy)
    b.atomic_rmw("add", pool.busy_calls, i64(1), "monotonic")
    b.ret(ir.Constant(I32, 0))
    b.position_at_end(go)
    want = b.sub(nth_, i64(1))
    want = b.select(b.icmp_signed(">", want, i64(MAX_WORKERS)), i64(MAX_WORKERS), want)
    workers = _spawn_workers(b, pool, libc, worker, want)
    _open_job(b, pool, libc, fn_, args_, n_, workers)
    pool.count_chunks(b, i64(0), b.call(run_chunks, [i64(0)]))
    b.store(b.add(b.load(pool.jobs, typ=I64), i64(1)), pool.jobs)  # under submit_mu
    _close_job(b, pool, libc)
    b.call(libc.unlock, [pool.submit_mu])
    b.ret(ir.Constant(I32, 1))


def _spawn_workers(b: ir.IRBuilder, pool: _PoolData, libc: _Libc, worker: ir.Function, want) -> ir.Value:
    """Start the workers missing of the ``want`` a job asks for; the number that may join it
    (those that exist, at most ``want``)."""
    have = b.load(pool.nworkers, typ=I64)
    tid = b.alloca(I64)
    with for_range(b, have, want, "spawn") as w:
        # only spawn worker w if workers 0..w-1 exist (a failed create stops the spawning)
        with b.if_then(b.icmp_signed("==", b.load(pool.nworkers, typ=I64), w)):
            r = b.call(libc.create, [tid, ir.Constant(PTR, None), worker, b.inttoptr(w, PTR)])
            with b.if_then(b.icmp_signed("==", r, ir.Constant(I32, 0))):
                b.call(libc.detach, [b.load(tid, typ=I64)])
                b.store(b.add(w, i64(1)), pool.nworkers)
    workers = b.load(pool.nworkers, typ=I64)
    return b.select(b.icmp_signed("<", workers, want), workers, want)


def _open_job(b: ir.IRBuilder, pool: _PoolData, libc: _Libc, fn_, args_, n_, workers) -> None:
    """Cut [0, n_) into chunks (``CHUNKS_PER_THREAD`` per thread, at most one per element),
    publish the job for the caller and ``workers`` helpers, and wake the workers."""
    T = b.add(workers, i64(1))
    nch = b.mul(T, i64(CHUNKS_PER_THREAD))
    nch = b.select(b.icmp_signed("<", n_, nch), n_, nch)
    chunk = b.sdiv(b.add(n_, b.sub(nch, i64(1))), nch)
    nch = b.sdiv(b.add(n_, b.sub(chunk, i64(1))), chunk)
    b.call(libc.lock, [pool.mu])
    b.store(b.ptrtoint(fn_, I64), pool.job_fn)
    b.store(b.ptrtoint(args_, I64), pool.job_args)
    b.store(n_, pool.job_n)
    b.store(chunk, pool.job_chunk)
    b.store(nch, pool.job_nchunks)
    b.store(T, pool.job_threads)
    with for_range(b, i64(0), T, "reset") as t:
        b.store(i64(0), pool.counter(b, t))
    b.store(i64(0), pool.active)
    b.store(i64(1), pool.is_open)
    b.store(workers, pool.wanted)
    b.store_atomic(b.add(b.load(pool.gen, typ=I64), i64(1)), pool.gen, "release", 8)  # spinning workers read it
    b.call(libc.broadcast, [pool.cv_start])
    b.call(libc.unlock, [pool.mu])


def _close_job(b: ir.IRBuilder, pool: _PoolData, libc: _Libc) -> None:
    """Close the job to late helpers, then wait for the ones that joined (never for a worker
    that is still asleep: on a busy machine it may not run for a while)."""
    pf = b.function
    wl = pf.append_basic_block("wait")
    wb = pf.append_basic_block("sleep")
    wd = pf.append_basic_block("done")
    b.call(libc.lock, [pool.mu])
    b.store(i64(0), pool.is_open)
    if SPIN_ROUNDS:
        # helpers that joined usually finish within microseconds of the caller: watch
        # ``active`` for a while before sleeping on the condition variable
        b.call(libc.unlock, [pool.mu])
        _watch(b, libc.pause, lambda: b.icmp_signed(">", b.load_atomic(pool.active, "acquire", 8, typ=I64), i64(0)))
        b.call(libc.lock, [pool.mu])
    b.branch(wl)
    b.position_at_end(wl)
    a = b.atomic_rmw("add", pool.active, i64(0), "seq_cst")
    b.cbranch(b.icmp_signed(">", a, i64(0)), wb, wd)
    b.position_at_end(wb)
    b.call(libc.wait, [pool.cv_done, pool.mu])
    b.branch(wl)
    b.position_at_end(wd)
    b.call(libc.unlock, [pool.mu])


def _emit_stats(m: ir.Module, pool: _PoolData) -> None:
    """``stats(out, n) -> entries written``: [workers, jobs, busy, chunks[0], ...,
    chunks[workers]], at most ``n`` of them (``PoolStats``)."""
    st = ir.Function(m, ir.FunctionType(I64, [PTR, I64]), name=STATS_SYMBOL)
    out, cap = st.args
    b = ir.IRBuilder(st.append_basic_block("entry"))
    nw = b.load(pool.nworkers, typ=I64)
    vals = [nw, b.load_atomic(pool.jobs, "monotonic", 8, typ=I64),
            b.load_atomic(pool.busy_calls, "monotonic", 8, typ=I64)]
    total = b.add(nw, i64(len(vals) + 1))
    total = b.select(b.icmp_signed("<", total, cap), total, cap)
    for k, v in enumerate(vals):
        with b.if_then(b.icmp_signed("<", i64(k), total)):
            b.store(v, b.gep(out, [i64(k)], source_etype=I64))
    with for_range(b, i64(len(vals)), total, "slot") as k:
        v = b.load(b.gep(pool.chunks_by, [i64(0), b.sub(k, i64(len(vals)))], inbounds=True), typ=I64)
        b.store(v, b.gep(out, [k], source_etype=I64))
    b.ret(total)


def _emit_after_fork(m: ir.Module, pool: _PoolData) -> None:
    """``after_fork()``: in a forked child, which has none of the workers: no workers, fresh
    locks and condition variables (zero is their default initialization), counters from zero."""
    af = ir.Function(m, ir.FunctionType(VOID, []), name=RESET_SYMBOL)
    b = ir.IRBuilder(af.append_basic_block("entry"))
    for g in (pool.submit_mu, pool.mu, pool.cv_start, pool.cv_done):
        b.store(ir.Constant(pool.blob, None), g)
    for g in (pool.nworkers, pool.active, pool.wanted, pool.is_open, pool.jobs, pool.busy_calls):
        b.store(i64(0), g)
    b.store(ir.Constant(pool.slots, None), pool.chunks_by)
    b.ret_void()


class _Pool:
    def __init__(self, object_code=None):
        from .loader import LoadedObject
        if object_code is None:
            object_code = library_object()[0]
        self.object_code = bytes(object_code)
        self.obj = LoadedObject(self.object_code, [SYMBOL])
        self.address = self.obj.address(SYMBOL)
        # absent from the pool code that files saved by older versions carry
        self._stats = self._optional(STATS_SYMBOL, ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64))
        self._reset = self._optional(RESET_SYMBOL, ctypes.CFUNCTYPE(None))

    def _optional(self, name, proto):
        addr = self.obj.global_address(name)  # 0 where the code has no such symbol
        return proto(addr) if addr else None

    def stats(self) -> Optional["PoolStats"]:
        if self._stats is None:
            return None
        buf = (ctypes.c_int64 * (MAX_WORKERS + 4))()
        n = self._stats(ctypes.addressof(buf), len(buf))
        v = list(buf[:n])
        return PoolStats(v[0], v[1], v[2], tuple(v[3:]))

    def after_fork_in_child(self) -> None:
        if self._reset is not None:
            self._reset()


def library_name() -> str:
    """The pool's name in the library folder: its code depends on this module's source (in the
    library's build id) and the CPU."""
    import hashlib
    import json

    from . import code_library
    from .target import host
    digest = hashlib.sha256(json.dumps({"build": code_library.build_id(), "target": host().manifest_entry()},
                                       sort_keys=True).encode()).hexdigest()
    return f"hlo_pool.{digest[:16]}"


def library_object() -> Tuple[bytes, bool]:
    """(object code, whether it was read): the pool's object for this CPU from the library
    folder (``code_library``; built ahead with the GEMM's bodies), else compiled (~40 ms) and
    kept there."""
    from . import code_library

    def build() -> bytes:
        from hlo.backends.cpu.llvm_pipeline import compile_ir
        obj, _, _ = compile_ir(build_pool_module(), opt_level=2)
        return obj
    return code_library.fetch(library_name(), SYMBOL, build)


@dataclass(frozen=True)
class PoolStats:
    """The pool's counters since it started (in a forked child: since the fork)."""
    workers: int  # worker threads started
    jobs: int  # parallel loops the pool ran
    busy: int  # parallel loops that found the pool busy and ran on their caller alone
    chunks: Tuple[int, ...]  # chunks taken: [0] by calling threads, [1 + w] by worker w

    @property
    def worker_chunks(self) -> int:
        return sum(self.chunks[1:])


_lock = threading.Lock()
_pool = None


def pool_address(object_code=None) -> int:
    """The address of the process-wide ``parallel_for`` (compiled on first use). A saved
    executable passes the pool's ``object_code`` it carries, so that loading it links the pool
    instead of compiling it (``hlo.aot``)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = _Pool(object_code)
        return _pool.address


def pool_stats() -> Optional[PoolStats]:
    """The process-wide pool's counters (None before it exists, or for the pool code of a file
    saved by an hlo without them)."""
    return _pool.stats() if _pool is not None else None


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    if _pool is not None:
        _pool.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pool_object_code() -> bytes:
    """The pool's object code (what ``hlo.aot`` stores beside an executable's own)."""
    pool_address()
    return _pool.object_code
