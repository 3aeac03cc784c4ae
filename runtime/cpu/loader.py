"""Links object code into this process and resolves its symbols.

The CPU backend always goes through here: it emits object code, then loads it exactly as a
saved executable would be loaded later, so "save object code + manifest, load without
recompiling" is the path every executable takes. Libraries the code calls (libc, libm,
pthreads, BLAS) are made visible to the linker before the object is added.
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Iterable, Optional, Tuple

import llvmlite.binding as llvm

_lock = threading.Lock()
_loaded_libs = set()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def load_library(path: str) -> None:
    """Make a shared library's symbols visible to code linked by ``LoadedObject``."""
    with _lock:
        if path not in _loaded_libs:
            llvm.load_library_permanently(path)
            _loaded_libs.add(path)


# Where an object's sections go. LLVM's default memory manager maps code, read-only data and
# read-write data separately; in a long-lived process with a fragmented address space
# (hundreds of executables next to jax, torch and big arrays) they can land more than 2 GiB
# apart, and a 32-bit PC-relative relocation from code to its constants or its GOT then cannot
# be resolved: LLVM aborts the process in finalize_object (RuntimeDyldELF: Assertion
# `isInt<32>(RealOffset)'). llvmlite's memory manager reserves one block for all sections of an
# object, so they stay within reach; but it sizes the read-write part without the GOT entries
# that stubs for calls to external functions take, and aborts when they do not fit in the
# page-rounding slack (or when the object has no read-write section at all). ``one_block_fits``
# checks that from the object's ELF headers; objects that fail it (none that hlo emits now: every
# executable has a small writable global) get the default memory manager.

# x86-64 relocations that may take a GOT entry: PLT32 (a stub per external callee, through the
# GOT), GOTPCREL, GOTPCRELX, REX_GOTPCRELX.
_GOT_RELOCS = frozenset({4, 9, 41, 42})
_PAGE = 4096


def one_block_fits(obj: bytes) -> bool:
    """Whether llvmlite's one-block memory manager can hold ``obj`` (an x86-64 ELF relocatable
    object): its read-write reservation must leave room for the GOT entries of call stubs."""
    import struct

    from . import elf
    try:
        if elf.machine(obj) != elf.EM_X86_64:
            return False  # only x86-64 little-endian ELF64 is understood here
        rw_sizes, rw_align, got_entries = [], 1, 0
        for h in elf.sections(obj):
            if h.type == elf.SHT_RELA and h.entsize:
                for r in range(h.size // h.entsize):  # Elf64_Rela: offset, info, addend
                    info, = struct.unpack_from("<Q", obj, h.offset + r * h.entsize + 8)
                    got_entries += (info & 0xFFFFFFFF) in _GOT_RELOCS
            elif h.flags & elf.SHF_ALLOC and h.flags & elf.SHF_WRITE and not h.flags & (elf.SHF_EXECINSTR | elf.SHF_TLS):
                rw_sizes.append(max(h.size, 1))
                rw_align = max(rw_align, h.align or 1)
    except (struct.error, IndexError):
        return False
    if not got_entries:
        return True
    if not rw_sizes:
        return False
    a = max(rw_align, 8)
    used = sum((s + a - 1) // a * a for s in rw_sizes)
    reserved = ((used + a - 1) // a * a + a + _PAGE - 1) // _PAGE * _PAGE
    # every allocation asks for one alignment unit more than it takes; the GOT comes last
    return reserved - used - a >= 8 * got_entries + 8


class LoadedObject:
    """Object code linked in-process; ``address(name)`` gives a function's entry point.

    Keep this object alive as long as any of its functions may run.
    """

    def __init__(self, obj: bytes, symbols: Iterable[str]):
        from .target import host, new_target_machine
        tm = new_target_machine()
        empty = llvm.parse_assembly("")
        empty.triple = host().triple
        self._engine = llvm.create_mcjit_compiler(empty, tm, use_lmm=one_block_fits(obj))
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
        self._engine.finalize_object()
        self.addresses: Dict[str, int] = {}
        for s in symbols:
            a = self._engine.get_function_address(s)
            if not a:
                raise RuntimeError(f"symbol {s!r} is missing from the object code")
            self.addresses[s] = a

    def address(self, name: str) -> int:
        return self.addresses[name]

    def global_address(self, name: str) -> int:
        """Address of a global variable of the object (0 if it has none by that name)."""
        try:
            return self._engine.get_global_value_address(name)
        except Exception:
            return 0


# Library code that programs call (the GEMM's shared bodies, ``hlo.backends.cpu.gemm_library``):
# each object is linked once per process and its symbols made visible to every later program,
# like a shared library's. Symbols carry a digest of their code, so two objects never define one.
_libraries: Dict[str, Tuple["LoadedObject", bytes]] = {}
link_counts: Dict[str, int] = {}  # symbol -> times an object defining it was linked (tests)


def link_library(symbol: str, obj: Optional[bytes]) -> int:
    """Link ``obj`` (which defines the function ``symbol``) into the process unless an object
    defining ``symbol`` is linked already (``obj`` may then be None), and make ``symbol``
    resolvable by objects linked after it. Returns its address."""
    with _lock:
        lib = _libraries.get(symbol)
        if lib is None:
            if obj is None:
                raise ValueError(f"the library code {symbol} that the executable calls is "
                                 "missing (and not linked in this process)")
            lib = _libraries[symbol] = (LoadedObject(obj, [symbol]), bytes(obj))
            llvm.add_symbol(symbol, lib[0].address(symbol))
            link_counts[symbol] = link_counts.get(symbol, 0) + 1
        return lib[0].address(symbol)


def library_object(symbol: str) -> Optional[bytes]:
    """The object code linked in this process that defines ``symbol`` (None if none is)."""
    lib = _libraries.get(symbol)
    return None if lib is None else lib[1]
