"""A process pool with a time limit per task, for the conformance runner.

``multiprocessing.Pool`` cannot stop one hung task. Here each worker process has its own pipe,
the parent knows which task each worker runs and since when, and a worker that runs past the
limit (or dies: a crash inside native code) is killed and replaced; its task gets a result made
by ``on_timeout`` or ``on_crash``. Results arrive in completion order.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple


def _context(fork: bool = True):
    # fork keeps the parent's imports (numpy, hlo) warm; the parent never touches MLIR, so no
    # native threads are forked. A parent that initialized the CUDA driver (target cuda) must
    # spawn: a forked child cannot use CUDA.
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if fork and "fork" in methods else "spawn")


def _serve(conn, fn: Callable[[Any], Any]) -> None:
    while True:
        try:
            task = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if task is None:
            return
        key, arg = task
        try:
            result = fn(arg)
        except BaseException as e:  # the task function reports its own errors; this is a backstop
            result = ("error", f"{type(e).__name__}: {e}")
        conn.send((key, result))


class _Worker:
    def __init__(self, ctx, fn):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, fn), daemon=True)
        self.proc.start()
        child.close()
        self.task: Optional[Tuple[int, Any]] = None
        self.started = 0.0

    def give(self, key: int, arg: Any) -> None:
        self.task = (key, arg)
        self.started = time.monotonic()
        self.conn.send((key, arg))

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.kill()


def run_tasks(fn: Callable[[Any], Any], args: Sequence[Any], jobs: int, timeout: float,
              on_timeout: Callable[[Any, float], Any], on_crash: Callable[[Any, Optional[int]], Any],
              fork: bool = True) -> Iterator[Tuple[int, Any]]:
    """Yield ``(index, fn(args[index]))`` for every task, in completion order (``fork=False``:
    workers are spawned)."""
    ctx = _context(fork)
    pending = list(range(len(args)))[::-1]
    workers: List[_Worker] = [_Worker(ctx, fn) for _ in range(max(1, min(jobs, len(args))))]
    done = 0
    try:
        while done < len(args):
            for w in workers:
                if w.task is None and pending:
                    i = pending.pop()
                    w.give(i, args[i])
            busy = [w for w in workers if w.task is not None]
            ready = wait([w.conn for w in busy], timeout=0.5)
            now = time.monotonic()
            for w in list(workers):
                if w.task is None:
                    continue
                key, arg = w.task
                if w.conn in ready:
                    try:
                        got_key, result = w.conn.recv()
                    except (EOFError, OSError):
                        w.proc.join(5)
                        code = w.proc.exitcode
                        w.kill()
                        workers[workers.index(w)] = _Worker(ctx, fn)
                        done += 1
                        yield key, on_crash(arg, code)
                        continue
                    w.task = None
                    done += 1
                    yield got_key, result
                elif now - w.started > timeout:
                    w.kill()
                    workers[workers.index(w)] = _Worker(ctx, fn)
                    done += 1
                    yield key, on_timeout(arg, timeout)
    finally:
        for w in workers:
            w.stop()


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
