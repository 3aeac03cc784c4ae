"""hlo's settings: ``hlo.config.update(name, value)``, ``hlo.config.<name>``, and
``with hlo.config.override(name=value): ...``.

Settings and the environment variables that seed them:

- ``log_recompiles`` (bool; ``HLO_LOG=recompiles``): when an ``hlo.jit`` function compiles again
  for a new signature, log (logger ``hlo.recompiles``, level WARNING) which argument changed and
  how.
- ``log_compiles`` (bool; ``HLO_LOG=compile``): log each compile's stages (trace, cache, passes,
  codegen, and the backend's: llvm, load on cpu) and their times as they end, and the total
  (logger ``hlo.compile``, level INFO; printed to stderr when nothing else handles it). Without
  it the logger still logs when Python's ``logging`` enables INFO for ``hlo``.
- ``compile_progress`` (bool or None): the progress line on stderr for a compile running longer
  than a few seconds (``hlo.staging.progress``). None means: on when stderr is a terminal,
  unless ``HLO_LOG`` has ``compile`` or ``noprogress``.
- ``target`` (str or None; ``HLO_TARGET``): the target used when ``hlo.jit`` is not given one,
  and by hlo.numpy functions called outside ``hlo.jit``. None means: "cuda" when the CUDA backend
  exists and a usable NVIDIA GPU is present, else "cpu".
- ``traceback_filtering`` (bool; ``HLO_TRACEBACK=full`` (or ``off``) sets it False, default
  True): hide hlo's own frames from the tracebacks of exceptions leaving hlo's API (``hlo.jit``
  calls and ``lower``, ``grad``, ``vmap``, ...), hlo's errors and plain Python ones raised while
  tracing the user's function alike, so the user's lines are what remains.
- ``cache`` (bool or None; ``HLO_CACHE``, ``0`` turns it off): the persistent compilation cache
  (``hlo.staging.cache``). None means: on unless ``HLO_CACHE`` says 0/false/off.
- ``cache_dir`` (str or None; ``HLO_CACHE_DIR``): where the persistent cache lives. None means:
  ``HLO_CACHE_DIR``, else ``$XDG_CACHE_HOME/hlo``, else ``~/.cache/hlo``.
- ``cache_max_bytes`` (int or None; ``HLO_CACHE_MAX_BYTES``): the cache's size bound; the least
  recently used entries are evicted past it. None means: the variable, else 1 GiB.

- ``matmul_precision`` (str or None; ``HLO_MATMUL_PRECISION``): how float32 matrix products
  (``dot_general``, ``matmul``, ``einsum`` contractions) are computed on the cuda target:
  ``"highest"`` (the default: full float32, like numpy and torch) or ``"tf32"`` (TensorFloat-32
  tensor cores: float32 data and accumulation, products of 10-bit-mantissa operands; about 8x
  faster on an H100, relative error near 3e-4), like jax's ``jax_default_matmul_precision``.
  None means: ``HLO_MATMUL_PRECISION``, else "highest". It is part of the compile key (a
  changed setting compiles again, in ``hlo.jit``'s cache and the persistent one); bf16 / f16
  / f64 products are not affected; the cpu target ignores it (its f32 products are always
  full float32), and so does the interpreter.
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

from hlo.ir.targets import TARGETS  # the target names (public: hlo.config.TARGETS, hlo.TARGETS)

_lock = threading.Lock()

def _after_fork_in_child() -> None:
    """A thread of the parent may have held the lock at the fork (base/fork_safety.py)."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)



def check_target_name(target: str) -> str:
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return target



def _env_log_flags() -> set:
    return {w.strip().lower() for w in os.environ.get("HLO_LOG", "").replace(";", ",").split(",") if w.strip()}


_DEFAULTS: Dict[str, Any] = {
    "log_recompiles": "recompiles" in _env_log_flags(),
    "log_compiles": "compile" in _env_log_flags(),
    "compile_progress": None,
    "target": os.environ.get("HLO_TARGET") or None,
    "traceback_filtering": os.environ.get("HLO_TRACEBACK", "").strip().lower() not in ("full", "off", "0", "none"),
    "cache": None,
    "cache_dir": None,
    "cache_max_bytes": None,
    "matmul_precision": None,
    "jit_cache_size": 128,
}

_CHECKS = {
    "log_recompiles": lambda v: isinstance(v, bool),
    "log_compiles": lambda v: isinstance(v, bool),
    "compile_progress": lambda v: v is None or isinstance(v, bool),
    "target": lambda v: v is None or isinstance(v, str),
    "traceback_filtering": lambda v: isinstance(v, bool),
    "cache": lambda v: v is None or isinstance(v, bool),
    "cache_dir": lambda v: v is None or isinstance(v, (str, os.PathLike)),
    "cache_max_bytes": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0),
    "matmul_precision": lambda v: v is None or isinstance(v, str),
    "jit_cache_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
}

# Settings that change the code a compile generates: updating one bumps ``generation``, which
# makes ``hlo.jit``'s per-function caches look again (their keys name these settings).
_CODE_SETTINGS = frozenset({"matmul_precision"})
generation = 0

_values: Dict[str, Any] = dict(_DEFAULTS)


def _check_precision(value: str, where: str) -> str:
    # the values live with the pipeline's options (imported here, not at import: loading a
    # saved executable imports no pass)
    from hlo.passes.options import MATMUL_PRECISIONS
    if value not in MATMUL_PRECISIONS:
        raise ValueError(f"unknown matmul precision {value!r} in {where} (expected "
                         f"{' or '.join(repr(p) for p in MATMUL_PRECISIONS)})")
    return value


def resolved_matmul_precision() -> str:
    """The ``matmul_precision`` in effect: the setting, else ``HLO_MATMUL_PRECISION``, else
    "highest"."""
    v = _values["matmul_precision"]
    if v is not None:
        return v
    env = os.environ.get("HLO_MATMUL_PRECISION", "").strip().lower()
    return _check_precision(env, "HLO_MATMUL_PRECISION") if env else "highest"


def update(name: str, value: Any) -> None:
    """Set one setting, e.g. ``hlo.config.update("log_recompiles", True)``."""
    if name not in _values:
        raise KeyError(f"unknown hlo setting {name!r} (known: {', '.join(sorted(_values))})")
    if not _CHECKS[name](value):
        raise TypeError(f"bad value {value!r} for hlo setting {name!r}")
    if name == "target" and value is not None:
        check_target_name(value)
    if name == "matmul_precision" and value is not None:
        _check_precision(value, 'hlo.config.update("matmul_precision", ...)')
    _set({name: value})


def _set(values: Dict[str, Any]) -> None:
    global generation
    from hlo.runtime.cpu import pycall
    with _lock:
        _values.update(values)
        if _CODE_SETTINGS.intersection(values):
            generation += 1
        pycall.bump_epoch()  # hlo.jit's native entries hand their calls to Python, which looks again


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
        _set(old)


def __getattr__(name: str) -> Any:  # hlo.config.log_recompiles
    if name in _values:
        return _values[name]
    raise AttributeError(f"module 'hlo.config' has no attribute {name!r}")
