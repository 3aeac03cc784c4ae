"""hlo's settings: ``hlo.config.update(name, value)``, ``hlo.config.<name>``, and
``with hlo.config.override(name=value): ...``.

Settings and the environment variables that seed them:

- ``log_recompiles`` (bool; ``HLO_LOG=recompiles``): when an ``hlo.jit`` function compiles again
  for a new signature, log (logger ``hlo.recompiles``, level WARNING) which argument changed and
  how.
- ``target`` (str or None; ``HLO_TARGET``): the target used when ``hlo.jit`` is not given one,
  and by hlo.numpy functions called outside ``hlo.jit``. None means: "cuda" when the CUDA backend
  exists and a usable NVIDIA GPU is present, else "cpu".
- ``traceback_filtering`` (bool, default True): hide hlo's own frames from the tracebacks of hlo
  errors, so the user's lines are what remains.
- ``cache`` (bool or None; ``HLO_CACHE``, ``0`` turns it off): the persistent compilation cache
  (``hlo.compile_cache``). None means: on unless ``HLO_CACHE`` says 0/false/off.
- ``cache_dir`` (str or None; ``HLO_CACHE_DIR``): where the persistent cache lives. None means:
  ``HLO_CACHE_DIR``, else ``$XDG_CACHE_HOME/hlo``, else ``~/.cache/hlo``.
- ``cache_max_bytes`` (int or None; ``HLO_CACHE_MAX_BYTES``): the cache's size bound; the least
  recently used entries are evicted past it. None means: the variable, else 1 GiB.

- ``jit_cache_size`` (int, default 128): how many compiled signatures each ``hlo.jit`` function
  keeps in memory; past it the least recently used one is dropped (a later call with that
  signature compiles again, or loads it from the persistent cache).

The three cache settings are read when a compile happens (not at import), so setting the
environment variables at any time before the first compile works.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict

_lock = threading.Lock()

TARGETS = ("cpu", "cuda", "interpreter")


def check_target_name(target: str) -> str:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return target



def _env_log_flags() -> set:
    return {w.strip().lower() for w in os.environ.get("HLO_LOG", "").replace(";", ",").split(",") if w.strip()}


_DEFAULTS: Dict[str, Any] = {
    "log_recompiles": "recompiles" in _env_log_flags(),
    "target": os.environ.get("HLO_TARGET") or None,
    "traceback_filtering": True,
    "cache": None,
    "cache_dir": None,
    "cache_max_bytes": None,
    "jit_cache_size": 128,
}

_CHECKS = {
    "log_recompiles": lambda v: isinstance(v, bool),
    "target": lambda v: v is None or isinstance(v, str),
    "traceback_filtering": lambda v: isinstance(v, bool),
    "cache": lambda v: v is None or isinstance(v, bool),
    "cache_dir": lambda v: v is None or isinstance(v, (str, os.PathLike)),
    "cache_max_bytes": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0),
    "jit_cache_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
}

_values: Dict[str, Any] = dict(_DEFAULTS)


def update(name: str, value: Any) -> None:
    """Set one setting, e.g. ``hlo.config.update("log_recompiles", True)``."""
    if name not in _values:
        raise KeyError(f"unknown hlo setting {name!r} (known: {', '.join(sorted(_values))})")
    if not _CHECKS[name](value):
        raise TypeError(f"bad value {value!r} for hlo setting {name!r}")
    if name == "target" and value is not None:
        check_target_name(value)
    with _lock:
        _values[name] = value


def read(name: str) -> Any:
    try:
        return _values[name]
    except KeyError:
        raise KeyError(f"unknown hlo setting {name!r} (known: {', '.join(sorted(_values))})") from None


@contextlib.contextmanager
def override(**settings):
    """Temporarily change settings: ``with hlo.config.override(target="interpreter"): ...``."""
    old = {k: read(k) for k in settings}
    try:
        for k, v in settings.items():
            update(k, v)
        yield
    finally:
        with _lock:
            _values.update(old)


def __getattr__(name: str) -> Any:  # hlo.config.log_recompiles
    if name in _values:
        return _values[name]
    raise AttributeError(f"module 'hlo.config' has no attribute {name!r}")
