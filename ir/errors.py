"""Errors raised by the IR layer. Each names where the problem is: a source location for
verification errors, a line and column of the text for parse errors."""
from __future__ import annotations


class IRError(Exception):
    """Base class of every error about IR."""


class VerifyError(IRError):
    """An operation, function or module breaks a rule of the IR. The message names the op, its
    operand types and its source location; ``op`` is the offending operation when there is one."""

    def __init__(self, message: str, op=None):
        super().__init__(message)
        self.op = op


class ParseError(IRError):
    """IR text that does not parse. ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.line, self.column, self.source_line = line, column, source_line
        text = f"{line}:{column}: error: {message}"
        if source_line:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)


class DonationWarning(UserWarning):
    """A donated argument is not reused: at compile time, no output could be written into it
    (``hlo.passes.buffer_assignment``); at call time, its memory may not be written in place
    (read-only, not numpy's own, shared with another argument: ``hlo.runtime.donation``), so
    the call works on a copy of it."""
