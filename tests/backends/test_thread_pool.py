"""The worker pool (runtime/thread_pool.py) run directly: every item of every job runs exactly
once, for jobs that follow each other closely (workers still watching for the next job) and
with the watching off, and a second caller gets 0 while a job runs."""
import ctypes
import threading

import numpy as np
import pytest

from hlo.runtime.cpu import thread_pool as tp

TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
POOL = ctypes.CFUNCTYPE(ctypes.c_int32, TASK, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_KEEP = []  # a pool's workers live as long as the process: its code must too


def _own_pool(monkeypatch, spin: int):
    monkeypatch.setattr(tp, "SPIN_ROUNDS", spin)
    pool = tp._Pool()  # a pool of its own (its globals are private to its object)
    _KEEP.append(pool)
    return pool, POOL(pool.address)


@pytest.mark.parametrize("spin", [0, 4096])
def test_every_item_runs_once_per_job(monkeypatch, spin):
    pool, parallel_for = _own_pool(monkeypatch, spin)
    n = 37
    counts = np.zeros(n, np.int64)
    threads = set()

    def task(args, lo, hi):
        counts[lo:hi] += 1
        threads.add(threading.get_ident())

    fn = TASK(task)
    for job in range(300):
        assert parallel_for(fn, None, n, 2) == 1
        assert (counts == job + 1).all(), f"job {job}: {counts}"
    assert len(threads) >= 1


def test_a_second_caller_gets_zero_while_a_job_runs(monkeypatch):
    pool, parallel_for = _own_pool(monkeypatch, 4096)
    started, release = threading.Event(), threading.Event()
    got = []

    def slow(args, lo, hi):
        started.set()
        release.wait(10)

    def quick(args, lo, hi):
        pass

    fslow, fquick = TASK(slow), TASK(quick)
    t = threading.Thread(target=lambda: got.append(parallel_for(fslow, None, 1, 2)))
    t.start()
    assert started.wait(10)
    assert parallel_for(fquick, None, 4, 2) == 0  # busy: the caller runs its loop itself
    release.set()
    t.join(10)
    assert got == [1]
    assert parallel_for(fquick, None, 4, 2) == 1


def test_each_thread_takes_its_own_range_first(monkeypatch):
    """The chunks are cut into one range per thread: the caller takes the first range's chunks
    in order from chunk 0, a worker starts in its own range (the second), and only then does
    either take what is left of the other's; every item still runs once."""
    import time
    pool, parallel_for = _own_pool(monkeypatch, 4096)
    n = 40
    nch = min(n, 2 * tp.CHUNKS_PER_THREAD)
    chunk = -(-n // nch)
    nch = -(-n // chunk)
    second = (nch // 2) * chunk        # the first item of the second thread's range
    main = threading.get_ident()
    worker_joined = 0
    for job in range(30):
        order = []

        def task(args, lo, hi):
            order.append((threading.get_ident(), lo, hi))
            time.sleep(0.0005)   # lets the other thread take chunks meanwhile

        fn = TASK(task)
        assert parallel_for(fn, None, n, 2) == 1
        seen = sorted(i for _, lo, hi in order for i in range(lo, hi))
        assert seen == list(range(n))
        mine = [lo for t, lo, _ in order if t == main]
        theirs = [lo for t, lo, _ in order if t != main]
        assert mine and mine[0] == 0
        own = [lo for lo in mine if lo < second]
        assert own == sorted(own) and mine[:len(own)] == own   # its range first, in order
        if theirs:
            worker_joined += 1
            assert theirs[0] >= second, (job, order)   # the worker starts in its own range
    assert worker_joined > 0
