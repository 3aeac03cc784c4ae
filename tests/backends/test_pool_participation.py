"""Do the worker pool's workers really take part in compiled programs' parallel loops? A run
once had the transformer at one-thread speed for a whole process (a worker that never woke
was suspected). The pool counts the chunks each thread takes (``thread_pool.pool_stats``); these
tests run many calls in many fresh processes, and in a forked child, and require that in every
process the workers took chunks. A worker may miss a job on a busy machine (the caller never
waits for one that has not joined), so each process calls until the workers have taken part
or a deadline passes; a worker that never joins, which is what a whole process at one-thread
speed would be, fails the test.

Found this way: a child forked after the pool had started inherited its worker count but
none of its threads, so every parallel loop in the child ran on the calling thread alone (and
a lock that a worker held at the fork would have blocked it); the pool now resets itself in a
forked child (``os.register_at_fork``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hlo.runtime.cpu import thread_pool as tp
from hlo.runtime.cpu.target import default_threads

pytestmark = pytest.mark.skipif(default_threads() < 2, reason="one core: the pool has no workers")

# One process: compile (or take from the shared cache) a program whose kernels run on the pool,
# call it, and print the pool's counters: calls made, calls in which workers took chunks, and
# the chunks of every thread. argv: calls, deadline (s), workload ("tanh" or "transformer").
CHILD = r"""
import json, sys, time
import numpy as np
import hlo, hlo.numpy as hnp
from hlo.runtime.cpu.thread_pool import pool_stats
calls, deadline, which = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
if which == "transformer":
    sys.path.insert(0, sys.argv[4])
    from bench.workloads import BY_ID, Ops
    w = BY_ID["transformer_layer"]
    args = w.make_inputs(rng, w.dims["cpu"], np.dtype(np.float32))
    ops = Ops(hnp)
    f = hlo.jit(lambda *a: w.fn(ops, *a))
else:
    args = [rng.standard_normal((1024, 1024)).astype(np.float32)]
    f = hlo.jit(lambda x: hnp.tanh(x) * 2.0 + 1.0)
f(*args)
before = pool_stats()
joined = made = 0
end = time.monotonic() + deadline
while made < calls or (joined == 0 and time.monotonic() < end):
    a = pool_stats().worker_chunks
    f(*args)
    joined += pool_stats().worker_chunks > a
    made += 1
s = pool_stats()
print(json.dumps({"calls": made, "joined": joined, "jobs": s.jobs - before.jobs, "busy": s.busy,
                  "workers": s.workers, "chunks": s.chunks}))
"""


def _processes(n, calls, deadline, which, tmp_path):
    env = dict(os.environ, HLO_CACHE_DIR=str(tmp_path / "cache"))  # compiled once, then cache hits
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = []
    for _ in range(n):
        p = subprocess.run([sys.executable, "-c", CHILD, str(calls), str(deadline), which, repo],
                           capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return out


def _check(runs):
    for r in runs:
        assert r["workers"] >= 1 and r["jobs"] >= r["calls"], r
        assert r["joined"] >= 1 and sum(r["chunks"][1:]) > 0, f"the workers never took part: {r}"


def test_workers_take_part_in_fresh_processes(tmp_path):
    _check(_processes(3, 20, 10.0, "tanh", tmp_path))


@pytest.mark.slow
def test_workers_take_part_in_many_fresh_processes_running_the_transformer(tmp_path):
    runs = _processes(20, 40, 20.0, "transformer", tmp_path)
    _check(runs)
    # a worker that sleeps through most jobs would show as few calls joined
    share = sum(r["joined"] for r in runs) / sum(r["calls"] for r in runs)
    assert share >= 0.5, f"workers joined only {share:.0%} of the calls: {runs}"


def _call_until_workers_join(exe, x, deadline_s=10.0):
    """Calls ``exe`` until the pool's workers have taken chunks (or the deadline passes);
    returns (calls made, chunks the workers took meanwhile, the pool's counters)."""
    import time
    before = tp.pool_stats().worker_chunks
    end = time.monotonic() + deadline_s
    calls = 0
    while calls < 5 or (tp.pool_stats().worker_chunks == before and time.monotonic() < end):
        exe.run([x])
        calls += 1
    s = tp.pool_stats()
    return calls, s.worker_chunks - before, s


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_workers_take_part_in_a_forked_child():
    """A child forked after the pool ran: its parallel loops start workers of its own (before,
    it kept the parent's worker count without the threads and ran every loop alone)."""
    from cpu_helpers import compile_text, unary_src
    exe = compile_text(unary_src("tanh", "f32[1024,1024]"), threads=2)
    x = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    _, took, s = _call_until_workers_join(exe, x)
    assert s.workers >= 1 and took > 0, s
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running pytest's teardown
        try:
            calls, took, s = _call_until_workers_join(exe, x)
            ok = np.allclose(exe.run([x])[0], np.tanh(x), rtol=1e-6, atol=1e-6)
            msg = json.dumps({"calls": calls, "worker_chunks": took, "workers": s.workers,
                              "jobs": s.jobs, "chunks": s.chunks, "ok": bool(ok)})
        except BaseException as e:  # reported to the parent
            msg = json.dumps({"error": repr(e)})
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read())
    os.waitpid(pid, 0)
    assert "error" not in got, got
    assert got["ok"], got
    # the child's counters start at the fork; its own worker took chunks
    assert got["worker_chunks"] > 0, f"the forked child ran every parallel loop alone: {got}"
    assert got["jobs"] == got["calls"] and got["workers"] >= 1, got


def test_counters_add_up_for_a_pool_of_its_own():
    """Every chunk of every job is counted once, by the thread that ran it; a call that finds
    the pool busy is counted as such."""
    import ctypes
    import threading
    TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    POOL = ctypes.CFUNCTYPE(ctypes.c_int32, TASK, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    pool = tp._Pool()
    test_counters_add_up_for_a_pool_of_its_own.keep = pool  # its workers outlive the test
    parallel_for = POOL(pool.address)
    fn = TASK(lambda args, lo, hi: None)
    n, jobs = 37, 50
    for _ in range(jobs):
        assert parallel_for(fn, None, n, 2) == 1
    s = pool.stats()
    # 2 threads x 8 chunks each, capped by n: chunks of ceil(37 / 16) = 3 items, 13 chunks a job
    assert (s.workers, s.jobs, s.busy) == (1, jobs, 0)
    assert sum(s.chunks) == jobs * 13 and len(s.chunks) == 2
    started, release = threading.Event(), threading.Event()
    slow = TASK(lambda args, lo, hi: (started.set(), release.wait(10)))
    t = threading.Thread(target=lambda: parallel_for(slow, None, 1, 2))
    t.start()
    assert started.wait(10)
    assert parallel_for(fn, None, 4, 2) == 0
    release.set()
    t.join(10)
    assert pool.stats().busy == 1
