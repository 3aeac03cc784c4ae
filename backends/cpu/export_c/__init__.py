"""Export a compiled CPU program as a C library: ``lib<name>.so`` and ``<name>.h``, which a C
program loads and runs without Python, numpy, llvmlite or hlo.

The library is linked by the system's C compiler (``cc``, or ``$CC``) from:

- the program's own object code, exactly the one the Python path runs (LLVM, position
  independent): its kernels and its whole call sequence, ``hlo_run(inputs, outputs, arena,
  nthreads)`` (``backends/cpu/entry.py``);
- the library code it calls (``runtime/cpu/code_library.py``): the GEMM bodies it names
  (``cores``) and, when it has parallel kernels, the worker pool (``runtime/cpu/thread_pool.py``);
- the runtime in C (``runtime_c.py``): contexts, workspace, the checks of a call, the CPU check
  and the queries; with the header (``header.py``) the C API.

A version script exports only ``<name>_*``: every other symbol (``hlo_run``, the pool, the GEMM
bodies) binds inside the library, so several exported libraries live in one process.
``export(exe, folder, name, ...)`` is the entry; ``hlo.Compiled.export_c`` and ``hlo export-c``
call it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Optional, Sequence

from .header import header
from .runtime_c import source
from .spec import ExportError, LibrarySpec, check_name, from_executable

__all__ = ["ExportError", "Exported", "export", "find_cc", "LibrarySpec", "check_name"]


@dataclass(frozen=True)
class Exported:
    """What an export wrote."""
    library: str   # path of lib<name>.so
    header: str    # path of <name>.h
    name: str


def find_cc() -> str:
    """The C compiler that links the library: ``$CC`` or ``cc`` on the PATH."""
    cc = os.environ.get("CC") or "cc"
    path = shutil.which(cc.split()[0]) if cc.strip() else None
    if path is None:
        raise ExportError(f"export to C needs a C compiler to link the library, and {cc!r} is not "
                          "on the PATH (install gcc or clang, or set CC)")
    return cc


def _objects(exe, spec: LibrarySpec) -> dict:
    """file name -> object code: the program, the GEMM bodies it calls, the worker pool if it
    has parallel kernels."""
    from hlo.runtime.cpu import elf
    from hlo.runtime.cpu.abi import POOL_PTR
    objs = {"program.o": bytes(exe.object_code)}
    for i, entry in enumerate(exe.manifest.get("cores") or []):
        code = exe.core_objects.get(entry["symbol"])
        if code is None:
            raise ExportError(f"the GEMM body {entry['symbol']} that the program calls is not "
                              "linked in this process")
        objs[f"core{i}.o"] = bytes(code)
    syms = elf.symbols(exe.object_code)
    spec.uses_pool = syms is None or POOL_PTR in syms[0]
    if spec.uses_pool:
        from hlo.runtime.cpu.thread_pool import pool_object_code
        objs["pool.o"] = pool_object_code()
    return objs


def export(exe, folder: str, name: str, arg_names: Optional[Sequence[str]] = None,
           function: str = "", sanitize: bool = False) -> Exported:
    """Write ``lib<name>.so`` and ``<name>.h`` for ``exe`` (a CPU ``Executable``) into
    ``folder`` (created if missing). ``arg_names``: the arguments' names for the header.
    ``sanitize``: compile the C runtime with AddressSanitizer (tests; the program's LLVM code
    is not instrumented). ``ExportError`` for a program the C API cannot carry or a link that
    fails."""
    import hlo.runtime.cpu.executable as cpu_exe
    if not isinstance(exe, cpu_exe.Executable):
        raise ExportError(f"export to C takes a CPU executable, not {type(exe).__name__}")
    spec = from_executable(exe, name, arg_names, function, hlo_version())
    objs = _objects(exe, spec)
    cc = find_cc()
    os.makedirs(folder, exist_ok=True)
    lib_path = os.path.join(folder, f"lib{name}.so")
    h_path = os.path.join(folder, f"{name}.h")
    with tempfile.TemporaryDirectory(prefix="hlo-export-") as tmp:
        for fname, code in objs.items():
            with open(os.path.join(tmp, fname), "wb") as f:
                f.write(code)
        with open(os.path.join(tmp, f"{name}.h"), "w") as f:
            f.write(header(spec))
        with open(os.path.join(tmp, "runtime.c"), "w") as f:
            f.write(source(spec))
        with open(os.path.join(tmp, "exports.map"), "w") as f:
            f.write(f"{{ global: {name}_*; local: *; }};\n")
        out = os.path.join(tmp, f"lib{name}.so")
        cmd = cc.split() + ["-shared", "-fPIC", "-O2", "-std=c11",
                            "-o", out, "runtime.c", *sorted(o for o in objs),
                            "-Wl,--version-script=exports.map", "-Wl,-Bsymbolic", "-Wl,-z,nodelete", "-Wl,-z,defs",
                            "-Wl,-z,noexecstack", "-lpthread", "-lm"]
        if sanitize:
            cmd[1:1] = ["-fsanitize=address", "-fno-omit-frame-pointer"]
            cmd.remove("-Wl,-z,defs")  # the sanitizer's runtime comes from the loading program
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            raise ExportError(f"linking lib{name}.so failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
        # the header and library appear together, each complete (written, then renamed)
        for src, dst in ((os.path.join(tmp, f"{name}.h"), h_path), (out, lib_path)):
            part = dst + ".part"
            shutil.copyfile(src, part)
            os.replace(part, dst)
    return Exported(library=lib_path, header=h_path, name=name)


def hlo_version() -> str:
    try:
        from importlib.metadata import version
        return version("hlo")
    except Exception:
        return "unknown"
