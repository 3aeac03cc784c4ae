"""What a compile is doing, as it does it: stage names and times for the log, and a progress line
on stderr for compiles that run long.

A compile (``hlo.jit``'s first call for a signature, ``f.lower(...)``, ``Lowered.compile()``,
``hlo.aot.compile``) runs inside ``compiling(what)``; its stages announce themselves with
``stage(name)`` (``targets.report_progress``, which also tells ``hlo compile``'s listener):
``trace``, ``cache``, ``passes``, ``codegen``, and the backend's own, announced through
``hlo.passes.stage_hook`` (``llvm``, ``load`` on cpu; ``ptx``, ``ptxas`` on cuda). A nested ``compiling`` (a compile started by a compile, or ``lower`` inside
``hlo.jit``'s call) joins the outer one.

- The log: logger ``hlo.compile`` at INFO, one line as each stage ends (``hlo.jit(f): passes
  0.81 s``) and one when the compile ends, with the breakdown. ``HLO_LOG=compile`` (or
  ``hlo.config.update("log_compiles", True)``) turns it on and, when nothing handles the logger,
  prints it to stderr; otherwise Python's ``logging`` decides (``logging.getLogger("hlo")``).
- The progress line: a compile still running after ``PROGRESS_AFTER_S`` seconds writes
  ``hlo: compiling hlo.jit(f): passes... 4.0 s`` to stderr, rewritten in place (``\\r``) every
  ``TICK_S``, and ends it with the total. Only when stderr is a terminal and neither
  ``HLO_LOG=compile`` (the log says it already) nor ``HLO_LOG=noprogress`` is set;
  ``hlo.config.update("compile_progress", True / False)`` forces it on or off. A timer thread
  writes it, started only where the line is on.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import time
from typing import Callable, Iterator, List, Optional, Tuple

from hlo.passes import stage_hook

from .. import config

log = logging.getLogger("hlo.compile")

PROGRESS_AFTER_S = 3.0
TICK_S = 0.5

_local = threading.local()

# ``hlo compile``'s stage printer (``targets.report_progress`` calls it; ``targets._progress``)
listener: "contextvars.ContextVar[Optional[Callable[[str], None]]]" = contextvars.ContextVar(
    "hlo_compile_progress", default=None)
_handler_lock = threading.Lock()
_handler: Optional[logging.Handler] = None


class CompileRun:
    """One compile in progress: its stages so far, with their times."""

    def __init__(self, what: str, logging_on: bool, line_stream, verb: str = "compiled"):
        self.what, self.verb = what, verb
        self.t_start = time.perf_counter()
        self.stage: Optional[str] = None
        self.t_stage = self.t_start
        self.times: List[Tuple[str, float]] = []
        self.logging_on = logging_on
        self._stream = line_stream
        self._lock = threading.Lock()
        self._line_shown = False
        self._done = False
        self._timer: Optional[threading.Timer] = None
        if line_stream is not None:
            self._schedule(PROGRESS_AFTER_S)

    # --- stages ----------------------------------------------------------------------------
    def begin(self, name: str) -> None:
        self._end_stage()
        self.stage, self.t_stage = name, time.perf_counter()

    def _end_stage(self) -> None:
        if self.stage is None:
            return
        dt = time.perf_counter() - self.t_stage
        self.times.append((self.stage, dt))
        if self.logging_on:
            log.info("%s: %s %.3f s", self.what, self.stage, dt)
        self.stage = None

    def finish(self, failed: bool) -> None:
        self._end_stage()
        total = time.perf_counter() - self.t_start
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._line_shown:
                end = "failed" if failed else self.verb
                self._write(f"\rhlo: {self.what} {end} in {total:.1f} s ({self.breakdown()})\033[K\n")
        if self.logging_on:
            log.info("%s: %s in %.3f s (%s)", self.what, "failed" if failed else self.verb,
                     total, self.breakdown())

    def breakdown(self) -> str:
        merged: dict = {}
        for name, dt in self.times:
            merged[name] = merged.get(name, 0.0) + dt
        return ", ".join(f"{n} {dt:.2f} s" for n, dt in merged.items())

    # --- the progress line -------------------------------------------------------------------
    def _schedule(self, after: float) -> None:
        t = threading.Timer(after, self._tick)
        t.daemon = True
        self._timer = t
        t.start()

    def _tick(self) -> None:
        with self._lock:
            if self._done:
                return
            elapsed = time.perf_counter() - self.t_start
            stage = f"{self.stage}..." if self.stage else "..."
            self._write(f"\rhlo: compiling {self.what}: {stage} {elapsed:.1f} s\033[K")
            self._line_shown = True
            self._schedule(TICK_S)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed stderr stops the line, not the compile
            self._done = True


def _log_flags() -> set:
    return config._env_log_flags()


def _logging_on() -> bool:
    if config.read("log_compiles"):
        _ensure_handler()
        return True
    return log.isEnabledFor(logging.INFO)


def _ensure_handler() -> None:
    """``HLO_LOG=compile`` prints even where the program configured no logging: a stderr handler
    on ``hlo.compile``, added once, only when no handler would take its INFO records."""
    global _handler
    with _handler_lock:
        if _handler is not None:
            return
        if log.getEffectiveLevel() > logging.INFO or log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
        lg, handled = log, False
        while lg is not None:
            if any(h.level <= logging.INFO for h in lg.handlers):
                handled = True
                break
            lg = lg.parent if lg.propagate else None
        if not handled:
            _handler = logging.StreamHandler(sys.stderr)
            _handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            log.addHandler(_handler)
        else:
            _handler = logging.NullHandler()  # (a marker: checked once)


def _line_stream():
    """stderr where the progress line is on (see the module docstring), else None."""
    setting = config.read("compile_progress")
    if setting is False:
        return None
    if listener.get() is not None:  # ``hlo compile`` prints its own stages
        return None
    if setting is None:
        flags = _log_flags()
        if "compile" in flags or "noprogress" in flags or config.read("log_compiles"):
            return None
        try:
            if not sys.stderr.isatty():
                return None
        except (AttributeError, ValueError):
            return None
    return sys.stderr


def current() -> Optional[CompileRun]:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def compiling(what: str, verb: str = "compiled") -> Iterator[CompileRun]:
    """Run a compile of ``what`` (``hlo.jit(f)``) as one ``CompileRun``; inside another, join
    it. ``verb`` says what was done at the end (``lower`` alone: "traced")."""
    outer = current()
    if outer is not None:
        yield outer
        return
    run = CompileRun(what, _logging_on(), _line_stream(), verb)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(run)
    failed = True
    try:
        yield run
        failed = False
    finally:
        stack.pop()
        run.finish(failed)


def stage(name: str) -> None:
    """The current compile (if any) begins stage ``name``."""
    run = current()
    if run is not None:
        run.begin(name)


stage_hook.listen(stage)  # the backends' stages (llvm, load; ptx, ptxas)
