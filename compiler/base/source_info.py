"""Where the user is: the first stack frame outside hlo, as a file:line.

Every op the tracer records carries the user's line (``loc("model.py":12)`` in the IR), and every
frontend error names it. "Outside hlo" means outside the folders of the ``hlo`` package and its
sub-packages (compiler/, ir/, passes/, backends/, runtime/ in a source checkout, or hlo/ in an
installed wheel). This module also trims hlo's own frames from tracebacks of hlo errors, so a
user sees their code and the message, not the tracer's internals.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:  # the IR is imported where a Location is made: loading a saved program needs none
    from hlo.ir.core import Location


def _package_dirs() -> Tuple[str, ...]:
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # hlo's (compiler/), not base/
    for name in ("hlo.ir", "hlo.passes", "hlo.backends", "hlo.runtime"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            dirs.update(os.path.abspath(p) for p in spec.submodule_search_locations)
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


_INTERNAL_DIRS = _package_dirs()
_internal_cache: Dict[str, bool] = {}


def is_internal_file(filename: str) -> bool:
    """True for source files of hlo itself (whose frames are never "the user's line")."""
    r = _internal_cache.get(filename)
    if r is None:
        path = os.path.abspath(filename)
        r = path.startswith(_INTERNAL_DIRS)
        _internal_cache[filename] = r
    return r


@dataclass(frozen=True)
class SourceLocation:
    """A user's source position: full file path, line and enclosing function name."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def short(self) -> str:
        """``model.py:12``: the form the IR text carries."""
        return f"{os.path.basename(self.file)}:{self.line}"

    def ir(self) -> Location:
        from hlo.ir.core import Location
        return Location(os.path.basename(self.file), self.line)


def user_frame(start: Optional[types.FrameType] = None) -> Optional[types.FrameType]:
    """The innermost frame (from ``start``, default the caller) whose code is not hlo's."""
    f = start if start is not None else sys._getframe(1)
    while f is not None and is_internal_file(f.f_code.co_filename):
        f = f.f_back
    return f


def user_location_in(tb: Optional[types.TracebackType]) -> Optional[SourceLocation]:
    """The user's file:line where an exception with traceback ``tb`` was raised: the innermost
    of its frames whose code is not hlo's (a traced function's line), or None."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not is_internal_file(code.co_filename):
            found = SourceLocation(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def user_location() -> Optional[SourceLocation]:
    """The user's file:line for the code running now, or None if only hlo frames are on the
    stack (e.g. when hlo runs a callable it built itself)."""
    f = user_frame(sys._getframe(1))
    if f is None:
        return None
    return SourceLocation(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


def ir_location() -> Optional[Location]:
    """The user's line as an IR ``Location`` (file base name and line)."""
    f = user_frame(sys._getframe(1))
    if f is None:
        return None
    from hlo.ir.core import Location
    return Location(os.path.basename(f.f_code.co_filename), f.f_lineno)


def function_location(fn) -> Optional[SourceLocation]:
    """Where a Python function is defined (for messages such as "hlo.jit(f) at model.py:10")."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is None:
        code = getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None:
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)


def function_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__name__
    return name


def filter_traceback(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """A copy of ``tb`` without hlo's own frames (the user's frames, in order)."""
    frames = []
    while tb is not None:
        if not is_internal_file(tb.tb_frame.f_code.co_filename):
            frames.append((tb.tb_frame, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    out = None
    for frame, lasti, lineno in reversed(frames):
        out = types.TracebackType(out, frame, lasti, lineno)
    return out


_NOTE_PREFIX = "(hlo removed "


def note_filtered(exc: BaseException, tb: Optional[types.TracebackType]) -> None:
    """Say on ``exc`` (a note, printed under its message) how many of hlo's frames
    ``filter_traceback`` took out of ``tb``, and how to keep them; once per exception (nested
    API boundaries filter again, and the first count stays: later boundaries see fewer frames)."""
    n = 0
    while tb is not None:
        n += is_internal_file(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    if n == 0 or not hasattr(exc, "add_note"):
        return
    if any(str(x).startswith(_NOTE_PREFIX) for x in getattr(exc, "__notes__", ())):
        return
    exc.add_note(f"{_NOTE_PREFIX}{n} of its own frames from this traceback; "
                 "HLO_TRACEBACK=full or hlo.config.update('traceback_filtering', False) keeps them)")
