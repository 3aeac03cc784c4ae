"""Library code built ahead: native objects that programs link against but no program owns.

Some CPU code is the same for every program: the GEMM's register-tiled bodies
(``hlo.backends.cpu.gemm_library``, ~8,000 lines of LLVM IR and ~0.4 s of LLVM each) and the
worker pool (``thread_pool``). Like jaxlib's precompiled XLA runtime kernels or torch's ATen,
they are built once per machine and hlo version and read by every process: from a folder of
their own, separate from the compilation cache of programs (which the benchmark, tests and
users may point at a fresh folder, or turn off), written whenever a process compiles one,
like Python's ``__pycache__``. ``python -m hlo.backends.cpu.build_library`` builds every
object this machine can need ahead (the Makefile's set-up runs it).

Where: ``HLO_LIBRARY_DIR``, else ``$XDG_CACHE_HOME/hlo-library``, else ``~/.cache/hlo-library``.
``HLO_LIBRARY=0`` turns it off: nothing is read or written, and every process compiles the
library code it uses (to measure a cold compile, or to debug the generator). ``HLO_CACHE``
does not affect it: the library is part of the installation, not a cache of the user's programs.

Layout: ``<dir>/<build>/<name>.o``, the object with its sha256 appended (one that fails it is
deleted and built again). ``<build>`` (``build_id()``) is a digest of hlo's version, LLVM's and
the sources that generate library code (``SOURCES``), so an edited generator or another hlo
writes a new build folder and never reads a stale object; a name carries a digest of the rest
of what decides its code (the target CPU and features, the generator's settings), which the
callers make. Size bound: the ``KEEP_BUILDS`` most recently used build folders are kept
(each holds a few dozen objects of 20-60 KB per CPU it was used for); creating a new one deletes
the others. Trust: the objects are native code that runs in the process, so the folders are
created private to the user (0700) and one that another user owns or others can write to is not
used (``hlox.private_folder``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
from typing import Callable, Optional, Tuple

log = logging.getLogger("hlo.library")

# The files (relative to the package root) whose code decides library objects: the generators,
# the LLVM pipeline that compiles them (its options) and this module (the layout).
SOURCES = ("backends/cpu/gemm_tiled.py", "backends/cpu/gemm_library.py", "backends/llvm_util.py",
           "backends/cpu/llvm_pipeline.py", "backends/cpu/streaming.py", "ir/types.py",
           "runtime/cpu/thread_pool.py", "runtime/cpu/code_library.py")
KEEP_BUILDS = 4
SUFFIX = ".o"
_BUILD_NAME = re.compile(r"[0-9a-f]{16}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


def enabled() -> bool:
    return os.environ.get("HLO_LIBRARY", "1").strip().lower() not in ("0", "false", "off", "no", "")


def library_dir() -> str:
    """The library's root folder (``HLO_LIBRARY_DIR``, ``$XDG_CACHE_HOME/hlo-library``,
    ``~/.cache/hlo-library``)."""
    v = os.environ.get("HLO_LIBRARY_DIR")
    if not v:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        v = os.path.join(base, "hlo-library")
    return v


def llvm_version() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"


@functools.lru_cache(maxsize=1)
def hlo_version() -> str:
    """hlo's version, from its installed metadata (the runtime does not import the frontend)."""
    import importlib.metadata
    try:
        return importlib.metadata.version("hlo")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """sha256 (hex) of what every library object depends on besides its own name: hlo's and
    LLVM's versions and the bytes of ``SOURCES``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    h = hashlib.sha256(json.dumps({"hlo": hlo_version(), "llvm": llvm_version()}).encode())
    for rel in SOURCES:
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    return h.hexdigest()


_warned: set = set()
_touched: set = set()


def _build_folder(create: bool) -> Optional[str]:
    """This build's folder (None when the library is off, or its folder unsafe or, unless
    ``create``, absent)."""
    if not enabled():
        return None
    from hlo.runtime.hlox import refuses_folder
    root = library_dir()
    folder = os.path.join(root, build_id()[:16])
    if not create and not os.path.isdir(folder):
        return None
    new = create and not os.path.isdir(folder)
    if refuses_folder(log, "the library folder", "HLO_LIBRARY_DIR moves it", root, folder):
        return None
    if new:
        _prune(root, keep=folder)
    elif folder not in _touched:  # most recently used = newest modification time
        _touched.add(folder)
        try:
            os.utime(folder)
        except OSError:
            pass
    return folder


def _prune(root: str, keep: str) -> None:
    """Delete the build folders past the ``KEEP_BUILDS`` most recently used (``keep`` counted)."""
    try:
        others = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)
                  and _BUILD_NAME.fullmatch(e.name) and e.path != keep]
        others.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    except OSError:
        return
    for e in others[KEEP_BUILDS - 1:]:
        log.info("hlo.library: deleting %s (a build not among the %d most recently used)", e.path, KEEP_BUILDS)
        shutil.rmtree(e.path, ignore_errors=True)


def _path(folder: str, name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad library object name {name!r}")
    return os.path.join(folder, name + SUFFIX)


def get(name: str) -> Optional[bytes]:
    """The object kept under ``name`` for this build, or None (absent, damaged: then deleted,
    or the library off)."""
    folder = _build_folder(create=False)
    if folder is None:
        return None
    path = _path(folder, name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    body, digest = data[:-32], data[-32:]
    if len(data) < 32 or hashlib.sha256(body).digest() != digest:
        discard(name, "checksum mismatch")
        return None
    return body


def discard(name: str, why: str) -> None:
    """Delete the object kept under ``name`` (one that failed a check: it will be built again)."""
    folder = _build_folder(create=False)
    if folder is None:
        return
    path = _path(folder, name)
    log.warning("hlo.library: ignoring the damaged library object %s (%s); it will be built again", path, why)
    try:
        os.unlink(path)
    except OSError:
        pass


def put(name: str, data: bytes) -> None:
    """Keep ``data`` under ``name`` for this build (a no-op when the library is off; a folder
    that cannot be written to is logged, never an error)."""
    folder = _build_folder(create=True)
    if folder is None:
        return
    from hlo.runtime import hlox
    try:
        hlox.atomic_write(_path(folder, name), bytes(data) + hashlib.sha256(data).digest())
    except OSError as e:
        if folder not in _warned:
            _warned.add(folder)
            log.warning("hlo.library: cannot keep library code in %s: %s", folder, e)


def contents() -> list:
    """(name, bytes) of every object of this build's folder, sorted ([] when none)."""
    folder = _build_folder(create=False)
    if folder is None:
        return []
    out = []
    for e in sorted(os.scandir(folder), key=lambda e: e.name):
        if e.name.endswith(SUFFIX) and not e.name.startswith("."):
            out.append((e.name[:-len(SUFFIX)], e.stat().st_size))
    return out


def defines(obj: bytes, symbol: str) -> bool:
    """Whether ``obj`` (read from the folder or a file) is an ELF object defining ``symbol``."""
    import struct

    from . import elf
    try:
        syms = elf.symbols(obj)
    except (struct.error, IndexError, ValueError):
        return False
    return syms is not None and symbol in syms[0]


def fetch(name: str, symbol: str, build: Callable[[], bytes]) -> Tuple[bytes, bool]:
    """(object, whether it was read): the object kept under ``name``, which must define
    ``symbol`` (one that does not is discarded), else ``build()``'s, then kept."""
    obj = get(name)
    if obj is not None:
        if defines(obj, symbol):
            return obj, True
        discard(name, f"it does not define {symbol}")
    obj = build()
    put(name, obj)
    return obj, False
