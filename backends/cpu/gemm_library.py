"""The GEMM's shared bodies as library code: generated, compiled once, linked into programs.

Every program with matrix products calls register-tiled bodies (``gemm_tiled._Core``) that
depend only on the dtype, B's access mode and C's access, and on the target: not on the
program. Compiling them inside every program cost ~170-216 ms of LLVM time per compile (the
transformer layer's two f32 bodies are ~2,300 lines of LLVM IR; its own kernels call them from
48-109-line drivers). So, like XLA:CPU's calls into precompiled Eigen kernels, each body is
emitted into a module of its own (``core_spec``), compiled once per process (``object_code``;
also kept in the persistent compilation cache when a store is given), and a program only
declares it. The loader links the program's object against the core's
(``hlo.runtime.cpu.loader.link_library``); a saved executable carries the core objects as
code sections of their own (``hlo.compiler.saved_executable``).

The symbol of a body is ``hlo.gemm_core.<dtype>.<mode>[.cstrided][.astrided].<digest>``: the digest (sha256,
16 hex digits) covers what decides its code: the generator's sources (``GENERATOR_SOURCES``) and
settings (``gemm_tiled.core_knobs``), the target (triple, CPU, features), LLVM's version, hlo's
and ``CORE_ABI``. So a change to the generator or the target never reuses a stale object, two
different bodies never share a name, and a process finds a body's object in the persistent
cache without emitting its IR. The body is a separate unit for LLVM: nothing is inlined
across it (it was ``noinline`` inside the program before, too).
"""
from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import llvmlite.ir as ir

# The bodies' symbols start with CORE_PREFIX; their calling convention: pointers to C, A, B and
# the panel buffer, then 64-bit integers (``gemm_tiled._Core`` says what each means). CORE_ABI
# is bumped when it changes meaning.
CORE_PREFIX = "hlo.gemm_core"
CORE_ARGS = ("C", "A", "B", "panel", "oa", "ob", "oc", "m0", "m1", "n0", "n1", "kc", "acc",
             "pstride", "G", "rsA", "csA", "ldb", "csB", "ldc", "fill", "csC")
CORE_FNTY = ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 4 + [ir.IntType(64)] * (len(CORE_ARGS) - 4))
CORE_ABI = 1


# The modules whose code decides a body's LLVM IR (with ``gemm_tiled.core_knobs()`` and the
# target): their bytes are part of its digest, so that a process can name a body, and find its
# object in the persistent cache, without emitting it (emitting the f32 bodies takes ~0.2 s).
GENERATOR_SOURCES = ("gemm_tiled.py", "gemm_library.py", "../llvm_util.py", "../../ir/types.py")


@dataclass(frozen=True)
class CoreSpec:
    """One shared body: its symbol and the digest in it (its IR: ``ir_text()``)."""
    symbol: str
    key: Tuple[str, str, bool, bool]  # (dtype, mode, C's columns strided, A's adjacent)
    digest: str
    target: object  # the ``CpuTarget`` it is emitted for
    emit: Callable  # ``gemm_tiled.emit_core``: (ctx, comp, fn, mode, c_strided, a_unit) -> None

    def ir_text(self) -> str:
        """The LLVM IR of the body's module (emitted on first use in this process)."""
        with _lock:
            text = _ir.get(self.symbol)
            if text is None:
                text = _ir[self.symbol] = _emit(self)
            return text


_lock = threading.RLock()
_specs: Dict[tuple, CoreSpec] = {}
_ir: Dict[str, str] = {}
_objects: Dict[str, bytes] = {}
# How many times this process compiled each body (by symbol), and how many it read from a store:
# what tests check ("two programs share one compiled body").
compiles: "collections.Counter[str]" = collections.Counter()
store_hits: "collections.Counter[str]" = collections.Counter()


def _llvm_version() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"


@functools.lru_cache(maxsize=1)
def _hlo_version() -> str:
    """hlo's version, from its installed metadata (the backend does not import the frontend)."""
    import importlib.metadata
    try:
        return importlib.metadata.version("hlo")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def _generator_digest() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for rel in GENERATOR_SOURCES:
        with open(os.path.normpath(os.path.join(here, rel)), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def core_spec(dtype: str, mode: str, c_strided: bool, a_unit: bool, knobs: tuple,
              emit: Callable) -> CoreSpec:
    """The body for products of ``dtype`` with B's access ``mode`` ("contig", "gather", "bf16"),
    C's columns strided or not and A's columns adjacent (``a_unit``) or not, on this process's
    host target, as the generator's settings ``knobs`` make it (``gemm_tiled.library_body``
    asks; ``emit`` emits it)."""
    from hlo.runtime.cpu.target import host
    h = host()
    key = (h, knobs, dtype, mode, bool(c_strided), bool(a_unit))
    with _lock:
        spec = _specs.get(key)
        if spec is None:
            base = (f"{CORE_PREFIX}.{dtype}.{mode}{'.cstrided' if c_strided else ''}"
                    f"{'' if a_unit else '.astrided'}")
            digest = hashlib.sha256(json.dumps({
                "body": base, "generator": _generator_digest(), "knobs": repr(knobs),
                "target": h.manifest_entry(), "llvm": _llvm_version(), "hlo": _hlo_version(),
                "abi": CORE_ABI}, sort_keys=True).encode()).hexdigest()
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


def object_code(spec: CoreSpec, store=None) -> bytes:
    """The body's object code: compiled on the first request of this process, else the one
    compiled before. ``store`` (``get(name) -> bytes | None``, ``put(name, bytes)``; the
    persistent compilation cache's, or None) is asked before compiling and given the result."""
    with _lock:
        obj = _objects.get(spec.symbol)
        if obj is not None:
            return obj
        name = f"{spec.symbol}-{spec.digest}"
        obj = store.get(name) if store is not None else None
        if obj is not None and _defines(obj, spec.symbol):
            store_hits[spec.symbol] += 1
        else:
            from .target import compile_ir
            with _for_target(spec.target):
                obj, _, _ = compile_ir(spec.ir_text())
            compiles[spec.symbol] += 1
            if store is not None:
                store.put(name, obj)
        _objects[spec.symbol] = obj
        return obj


def _defines(obj: bytes, symbol: str) -> bool:
    """Whether ``obj`` (from a store) is an object that defines ``symbol``."""
    import struct
    from hlo.runtime.cpu import elf
    try:
        syms = elf.symbols(obj)
    except (struct.error, IndexError, ValueError):
        return False
    return syms is not None and symbol in syms[0]


def describe(symbol: str, where: Optional[str] = None) -> str:
    """The comment that IR dumps of a program put beside a body's declaration."""
    return (f"; {symbol}: library code, declared here and defined in a module of its own "
            f"(hlo.backends.cpu.gemm_library), compiled once per process and linked at load"
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
