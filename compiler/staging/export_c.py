"""``Compiled.export_c`` / ``LoadedExecutable.export_c`` / ``hlo export-c``: a compiled program as
a C library (``lib<name>.so`` + ``<name>.h``) that runs without Python. The work is the
backends' (``hlo.backends.cpu.export_c``, ``hlo.backends.cuda.export_c``); this module picks
the executable, the names and the target."""
from __future__ import annotations

import re
from typing import Optional

from ..base.signature import plain_name
from ..errors import UnsupportedError


def default_name(fun_name: str) -> str:
    """A C identifier from a function's name: ``layer`` for ``layer``, ``f_1`` for ``f-1``."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", fun_name or "") or "model"
    if name[0].isdigit() or name.startswith("hlo_"):
        name = "m_" + name
    return name[:64]


def export_c(executable_owner, folder: str, name: Optional[str] = None):
    """Write ``lib<name>.so`` and ``<name>.h`` for a ``Compiled`` or ``LoadedExecutable`` into
    ``folder``; returns ``hlo.backends.cpu.export_c.Exported`` (the two paths). ``name``
    defaults to the function's name. Raises ``ExportError`` (a ValueError) for a program the
    C API cannot carry, ``UnsupportedError`` for a
    target without native code (the interpreter)."""
    target = executable_owner.target
    if target not in ("cpu", "cuda"):
        raise UnsupportedError(f"export_c: target {target!r} has no native code to export; "
                               "compile for target='cpu'")
    exe = executable_owner._runtime_executable()
    recompiled = getattr(executable_owner, "_recompiled", None)  # hlo.load(..., recompile=True)
    if exe is None and recompiled is not None:
        exe = recompiled._runtime_executable()
    if exe is None:
        raise UnsupportedError("export_c: this executable's native code was not loaded "
                               "(hlo.aot.describe); load it with hlo.load")
    low = getattr(executable_owner, "lowered", executable_owner)
    fun_name = str(getattr(low, "fun_name", "") or "")
    name = name if name is not None else default_name(fun_name)
    arg_names = [plain_name(n) for n in low.arg_names]
    function = low.signature_text() if hasattr(low, "signature_text") else fun_name
    if target == "cuda":
        from hlo.backends.cpu.export_c import hlo_version
        from hlo.backends.cuda.export_c import export as export_cuda
        return export_cuda(exe, str(folder), name, arg_names, function, hlo_version())
    from hlo.backends.cpu.export_c import export
    return export(exe, str(folder), name, arg_names=arg_names, function=function)
