"""Where a compile is: the backends (and the pipeline) announce their stages here (``stage("llvm")``),
and the frontend's ``hlo.staging.progress`` listens (``listen``), for the ``hlo.compile`` log and the
progress line. Lives below the backends so that they can call it without importing the frontend."""
from __future__ import annotations

from typing import Callable, Optional

_listener: Optional[Callable[[str], None]] = None


def listen(fn: Optional[Callable[[str], None]]) -> None:
    """Set the one listener (``hlo.staging.progress`` sets it when imported)."""
    global _listener
    _listener = fn


def stage(name: str) -> None:
    """The compile running in this thread begins stage ``name``."""
    fn = _listener
    if fn is not None:
        fn(name)
