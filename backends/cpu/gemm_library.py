"""The GEMM's shared bodies as library code: generated, built ahead or once, linked into programs.

Every program with matrix products calls register-tiled bodies (``gemm_tiled._Core``) that
depend only on the dtype, B's access mode and C's and A's access, and on the target: not on the
program. Compiling them inside every program cost ~170-216 ms of LLVM time per compile (the
transformer layer's two f32 bodies are ~2,300 lines of LLVM IR; its own kernels call them from
48-109-line drivers). So, like XLA:CPU's calls into precompiled Eigen kernels, each body is
emitted into a module of its own (``core_spec``) and kept in the library folder
(``hlo.runtime.cpu.code_library``: read by every process, separate from the compilation cache
of programs); ``python -m hlo.backends.cpu.build_library`` builds every body this machine can
need ahead. A program only declares the bodies it calls; the loader links its object against
theirs (``hlo.runtime.cpu.loader.link_library``); a saved executable carries their objects as
code sections of their own (``hlo.compiler.saved_executable``).

A body the folder lacks is compiled by this process, in a thread of its own that starts when
the program's lowering names it (``request``), so that its LLVM work overlaps the program's own
Python work (lowering, emitting) instead of following it; llvmlite lets one thread at a time
into LLVM (a process-wide lock around every call), so two bodies never compile at once.

The symbol of a body is ``hlo.gemm_core.<dtype>.<mode>[.cstrided][.astrided].<digest>``: the
digest (sha256, 16 hex digits) covers what decides its code: the library's build
(``code_library.build_id``: the generator's sources, LLVM's and hlo's versions), the
generator's settings (``gemm_tiled.core_knobs``), the target (triple, CPU, features) and
``CORE_ABI``. So a change to the generator or the target never reuses a stale object, two
different bodies never share a name, and a process finds a body's object without emitting its
IR. The body is a separate unit for LLVM: nothing is inlined across it (it was ``noinline``
inside the program before, too).
"""
from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import llvmlite.ir as ir

# The bodies' symbols start with CORE_PREFIX; their calling convention: pointers to C, A, B and
# the panel buffer, then 64-bit integers (``gemm_tiled._Core`` says what each means). CORE_ABI
# is bumped when it changes meaning.
CORE_PREFIX = "hlo.gemm_core"
CORE_ARGS = ("C", "A", "B", "panel", "oa", "ob", "oc", "m0", "m1", "n0", "n1", "kc", "acc",
             "pstride", "G", "rsA", "csA", "ldb", "csB", "ldc", "fill", "csC", "nxt")
CORE_FNTY = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 4 + [ir.IntType(64)] * (len(CORE_ARGS) - 4))
CORE_ABI = 2


@dataclass(frozen=True)
class CoreSpec:
    """One shared body: its symbol and the digest in it (its IR: ``ir_text()``)."""
    symbol: str
    key: Tuple[str, str, bool, bool]  # (dtype, mode, C's columns strided, A's adjacent)
    digest: str
    target: Any  # the ``CpuTarget`` it is emitted for (hlo.runtime.cpu.target: imported late)
    emit: Callable  # ``gemm_tiled.emit_core``: (ctx, comp, fn, mode, c_strided, a_unit) -> None

    def ir_text(self) -> str:
        """The LLVM IR of the body's module (emitted on first use in this process; not under
        the module's lock, which ``request`` takes while the library thread emits)."""
        text = _ir.get(self.symbol)
        if text is None:
            text = _emit(self)
            with _lock:
                text = _ir.setdefault(self.symbol, text)
        return text


_lock = threading.RLock()
_specs: Dict[tuple, CoreSpec] = {}
_ir: Dict[str, str] = {}
_objects: Dict[str, bytes] = {}
_pending: Dict[str, "concurrent.futures.Future"] = {}
_worker: Optional[concurrent.futures.ThreadPoolExecutor] = None
# How many times this process compiled each body (by symbol), and how many it read from the
# library folder: what tests check ("two programs share one compiled body").
compiles: "collections.Counter[str]" = collections.Counter()
library_hits: "collections.Counter[str]" = collections.Counter()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: fresh locks, no library thread, and
    the bodies it was producing forgotten (the child produces them again if it needs them)."""
    global _lock, _worker
    _lock = threading.RLock()
    _worker = None
    _pending.clear()


def _before_fork() -> None:
    """Let the library thread finish what it started: a child forked while it is inside LLVM
    would inherit llvmlite's lock held, and hang on its first call into LLVM."""
    with _lock:
        pending = list(_pending.values())
    concurrent.futures.wait(pending)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def core_spec(dtype: str, mode: str, c_strided: bool, a_unit: bool, knobs: tuple,
              emit: Callable) -> CoreSpec:
    """The body for products of ``dtype`` with B's access ``mode`` ("contig", "gather", "bf16"),
    C's columns strided or not and A's columns adjacent (``a_unit``) or not, on this process's
    host target, as the generator's settings ``knobs`` make it (``gemm_tiled.library_body``
    asks; ``emit`` emits it)."""
    from hlo.runtime.cpu.code_library import build_id
    from hlo.runtime.cpu.target import host
    h = host()
    key = (h, knobs, dtype, mode, bool(c_strided), bool(a_unit))
    with _lock:
        spec = _specs.get(key)
        if spec is None:
            base = (f"{CORE_PREFIX}.{dtype}.{mode}{'.cstrided' if c_strided else ''}"
                    f"{'' if a_unit else '.astrided'}")
            digest = hashlib.sha256(json.dumps({
                "body": base, "build": build_id(), "knobs": repr(knobs),
                "target": h.manifest_entry(), "abi": CORE_ABI}, sort_keys=True).encode()).hexdigest()
            spec = _specs[key] = CoreSpec(f"{base}.{digest[:16]}",
                                          (dtype, mode, bool(c_strided), bool(a_unit)), digest, h, emit)
        return spec


def _for_target(target):
    """A context in which ``host()`` is ``target`` (the body's, which a test standing in for
    another CPU may have named it for)."""
    import contextlib

    from hlo.runtime.cpu.target import host, standing_in
    return contextlib.nullcontext() if host() == target else standing_in(target)


def _emit(spec: CoreSpec) -> str:
    from hlo.ir.types import BY_NAME

    from ..llvm_util import ModuleContext
    dtype, mode, c_strided, a_unit = spec.key
    with _for_target(spec.target):
        ctx = ModuleContext(spec.symbol, spec.target.triple)
        fn = ir.Function(ctx.module, CORE_FNTY, name=spec.symbol)
        for a in fn.args[:4]:
            a.add_attribute("noalias")   # C is never A's or B's buffer (dot.lower_dot)
        spec.emit(ctx, BY_NAME[dtype], fn, mode, c_strided, a_unit)   # C's element (f32 for bf16)
        return str(ctx.module)


def request(spec: CoreSpec) -> None:
    """Start producing the body's object (from the library folder, else compiled) in the
    library thread, unless this process has it or is producing it (``gemm_tiled._Core`` asks as
    the program's lowering names the body)."""
    global _worker
    with _lock:
        if spec.symbol in _objects or spec.symbol in _pending:
            return
        if _worker is None:
            _worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hlo-library")
        _pending[spec.symbol] = _worker.submit(_produce, spec)


def object_code(spec: CoreSpec) -> bytes:
    """The body's object code: this process's, else read from the library folder, else
    compiled (and kept there)."""
    while True:
        request(spec)
        with _lock:
            obj = _objects.get(spec.symbol)
            pending = _pending.get(spec.symbol)
        if obj is not None:
            return obj
        if pending is not None:
            break
        # a compile that failed between the two locks was forgotten: ask again
    try:
        obj = pending.result()
    except BaseException:  # a failed compile is not remembered: a later request tries again
        with _lock:
            if _pending.get(spec.symbol) is pending:
                del _pending[spec.symbol]
        raise
    with _lock:   # the object is kept before its pending entry goes: never neither
        obj = _objects.setdefault(spec.symbol, obj)
        if _pending.get(spec.symbol) is pending:
            del _pending[spec.symbol]
    return obj


def _produce(spec: CoreSpec) -> bytes:
    from hlo.runtime.cpu import code_library

    def build() -> bytes:
        from .llvm_pipeline import compile_ir
        with _for_target(spec.target):
            obj, _, _ = compile_ir(spec.ir_text())
        with _lock:
            compiles[spec.symbol] += 1
        return obj
    obj, read = code_library.fetch(spec.symbol, spec.symbol, build)
    if read:
        with _lock:
            library_hits[spec.symbol] += 1
    return obj


def describe(symbol: str, where: Optional[str] = None) -> str:
    """The comment that IR dumps of a program put beside a body's declaration."""
    return (f"; {symbol}: library code, declared here and defined in a module of its own "
            f"(hlo.backends.cpu.gemm_library), built once (the library folder) and linked at load"
            + (f"; {where}" if where else ""))


def core_ir(symbol: str) -> str:
    """The LLVM IR of the body named ``symbol`` (one this process named)."""
    with _lock:
        for spec in _specs.values():
            if spec.symbol == symbol:
                return spec.ir_text()
    raise KeyError(f"{symbol} was not named by this process")


def core_calls(ir_text: str) -> List[Dict[str, str]]:
    """The arguments (by ``CORE_ARGS`` name, as IR text) of every call to a body in a
    program's LLVM IR: the products' run-time modes (``fill``, ``acc``, strides) are these."""
    import re
    calls = []
    for m in re.finditer(r'call void @"' + re.escape(CORE_PREFIX) + r'[^"]*"\((.*)\)', ir_text):
        args = [a.strip().split(" ", 1)[1] for a in m.group(1).split(",")]
        calls.append(dict(zip(CORE_ARGS, args)))
    return calls
