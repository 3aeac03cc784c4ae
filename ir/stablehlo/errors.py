"""Errors of the StableHLO bridge.

``UnsupportedError`` means the input is valid StableHLO that hlo cannot represent: an element
type outside hlo's list (complex, f8, i2/i4, quantized), a token, a dynamic shape, or an op outside
the op table (fft, cholesky, collectives...). ``what`` names the op or type, so callers such as the
conformance runner can tally the reasons. ``StableHLOError`` means the input is not acceptable
StableHLO at all (it does not parse or verify), or exported text that jaxlib rejects.
"""
from __future__ import annotations

from typing import Optional

from ..core import Location
from ..errors import IRError


def shorten(s: str, keep: int = 80) -> str:
    """``s``, or when longer than ``keep`` characters its start and its length: user text quoted
    in an error (a name, a path, a token MLIR echoes) stays one readable line."""
    return s if len(s) <= keep else f"{s[:keep]}... ({len(s)} characters)"


def _where(loc: Optional[Location]) -> str:
    return f" at {loc}" if loc is not None else ""


class StableHLOError(IRError):
    """StableHLO text that does not parse or verify, with MLIR's own diagnostic."""


class UnsupportedError(IRError):
    """Valid StableHLO that hlo cannot represent. ``what`` is the op or type named."""

    def __init__(self, what: str, reason: str = "", loc: Optional[Location] = None):
        self.what = what
        self.reason = reason
        self.loc = loc
        msg = f"unsupported: {what}"
        if reason:
            msg += f" ({reason})"
        super().__init__(msg + _where(loc))
