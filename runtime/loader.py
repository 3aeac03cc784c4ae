"""Links object code into this process and resolves its symbols.

The CPU backend always goes through here: it emits object code, then loads it exactly as a
saved executable would be loaded later, so "save object code + manifest, load without
recompiling" is the path every executable takes. Libraries the code calls (libc, libm,
pthreads, BLAS) are made visible to the linker before the object is added.
"""
from __future__ import annotations

import threading
from typing import Dict, Iterable

import llvmlite.binding as llvm

_lock = threading.Lock()
_loaded_libs = set()


def load_library(path: str) -> None:
    """Make a shared library's symbols visible to code linked by ``LoadedObject``."""
    with _lock:
        if path not in _loaded_libs:
            llvm.load_library_permanently(path)
            _loaded_libs.add(path)


class LoadedObject:
    """Object code linked in-process; ``address(name)`` gives a function's entry point.

    Keep this object alive as long as any of its functions may run.
    """

    def __init__(self, obj: bytes, symbols: Iterable[str]):
        from hlo.backends.cpu.target import new_target_machine, host
        tm = new_target_machine()
        empty = llvm.parse_assembly("")
        empty.triple = host().triple
        self._engine = llvm.create_mcjit_compiler(empty, tm)
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
