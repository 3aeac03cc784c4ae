"""A process pool with a time limit per task, for the conformance runner.

``multiprocessing.Pool`` cannot stop one hung task. Here each worker process has its own pipe,
the parent knows which task each worker runs and since when, and a worker that runs past the
limit (or dies: a crash inside native code) is killed and replaced; its task gets a result made
by ``on_timeout`` or ``on_crash``. Results arrive in completion order.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple


def _fork_is_safe() -> bool:
    """fork keeps the parent's imports (numpy, hlo) warm, but a forked child gets only the thread
    that forked: a library whose threads hold locks or wait on queues then blocks the child
    forever. MLIR's thread pool does (jaxlib's MLIR context starts it: ``hlo.load_stablehlo``, a
    jax lowering), so once jaxlib's MLIR is loaded, workers are fresh interpreters instead."""
    return hasattr(os, "fork") and not mlir_loaded()


def mlir_loaded() -> bool:
    """Whether this process has loaded jaxlib's MLIR bindings (whose context starts threads)."""
    return any(name == "jaxlib.mlir" or name.startswith("jaxlib.mlir.") for name in sys.modules)


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


class _Duplex:
    """Two one-way pipe ends used as one connection (``wait`` watches the reading end)."""

    def __init__(self, reader: Connection, writer: Connection):
        self.reader, self.writer = reader, writer

    def recv(self):
        return self.reader.recv()

    def send(self, obj) -> None:
        self.writer.send(obj)

    def fileno(self) -> int:
        return self.reader.fileno()

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def serve_fds(task_fd: int, result_fd: int) -> None:
    """A spawned worker's main: its first messages are the parent's ``sys.path`` and the task
    function (unpickled once the path is set), then tasks as in ``_serve``."""
    conn = _Duplex(Connection(task_fd, writable=False), Connection(result_fd, readable=False))
    sys.path[:] = conn.recv()
    _serve(conn, conn.recv())


class _Forked:
    """A worker forked from this process."""

    def __init__(self, fn):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, fn), daemon=True)
        self.proc.start()
        child.close()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        self.proc.kill()

    def join(self, timeout: float) -> Optional[int]:
        self.proc.join(timeout)
        return self.proc.exitcode


class _Spawned:
    """A worker started as a fresh interpreter (``python -c``, not multiprocessing's spawn, which
    would run the caller's ``__main__`` again), talking over two pipes passed by number."""

    def __init__(self, fn):
        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        code = "import sys; from hlo.tools.conformance_pool import serve_fds; serve_fds(*map(int, sys.argv[1:]))"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(task_r), str(result_w)],
                                         pass_fds=(task_r, result_w), stdin=subprocess.DEVNULL)
        finally:
            os.close(task_r)
            os.close(result_w)
        self.conn = _Duplex(Connection(result_r, writable=False), Connection(task_w, readable=False))
        self.conn.send(list(sys.path))
        self.conn.send(fn)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()

    def join(self, timeout: float) -> Optional[int]:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class _Worker:
    def __init__(self, fn, fork: bool = True):
        self.child = _Forked(fn) if fork and _fork_is_safe() else _Spawned(fn)
        self.conn = self.child.conn
        self.task: Optional[Tuple[int, Any]] = None
        self.started = 0.0

    def give(self, key: int, arg: Any) -> None:
        self.task = (key, arg)
        self.started = time.monotonic()
        self.conn.send((key, arg))

    def exit_code(self) -> Optional[int]:
        return self.child.join(5)

    def kill(self) -> None:
        if self.child.alive():
            self.child.kill()
        self.child.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.child.join(2)
        if self.child.alive():
            self.kill()
        else:
            self.conn.close()


def run_tasks(fn: Callable[[Any], Any], args: Sequence[Any], jobs: int, timeout: float,
              on_timeout: Callable[[Any, float], Any], on_crash: Callable[[Any, Optional[int]], Any],
              fork: bool = True) -> Iterator[Tuple[int, Any]]:
    """Yield ``(index, fn(args[index]))`` for every task, in completion order. ``fork=False``:
    fresh interpreters even where forking is safe for Python (a parent that initialized the
    CUDA driver, target cuda: a forked child cannot use CUDA)."""
    pending = list(range(len(args)))[::-1]
    workers: List[_Worker] = [_Worker(fn, fork) for _ in range(max(1, min(jobs, len(args))))]
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
                        code = w.exit_code()
                        w.kill()
                        workers[workers.index(w)] = _Worker(fn, fork)
                        done += 1
                        yield key, on_crash(arg, code)
                        continue
                    w.task = None
                    done += 1
                    yield got_key, result
                elif now - w.started > timeout:
                    w.kill()
                    workers[workers.index(w)] = _Worker(fn, fork)
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
