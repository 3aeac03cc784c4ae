"""SASS, the GPU's machine code, of a CUDA program (``Compiled.as_text("sass")``): its cubins
(made by ptxas when it was compiled, else assembled now from its PTX) disassembled by the
CUDA toolkit's ``nvdisasm`` or, failing that, ``cuobjdump -sass``. Neither is needed to
compile or run; without them ``as_text("sass")`` says so and points at ``as_text("ptx")``."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Optional, Tuple

from .. import nvptx

TOOLS = ("nvdisasm", "cuobjdump")
# where the toolkit's binaries are looked for after PATH (the roots' bin/ folders)
ROOTS = ("CUDA_HOME", "CUDA_PATH")
DEFAULT_ROOT = "/usr/local/cuda"


def find_disassembler() -> Optional[Tuple[str, str]]:
    """(tool name, path) of the first of ``TOOLS`` on PATH or in a toolkit's ``bin``
    (``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``); None where there is neither."""
    roots = [os.environ.get(r) for r in ROOTS] + [DEFAULT_ROOT]
    for tool in TOOLS:
        p = shutil.which(tool)
        if p:
            return tool, p
        for root in roots:
            if root and os.path.isfile(os.path.join(root, "bin", tool)):
                return tool, os.path.join(root, "bin", tool)
    return None


def sass(program) -> str:
    """The SASS of ``program`` (a ``CudaProgram``: ``ptx``, ``cubins`` by architecture,
    ``arch``), one listing per cubin. ``FileNotFoundError`` naming what is missing where the
    toolkit's disassembler (or, for a program without a cubin, ptxas) is not installed."""
    tool = find_disassembler()
    if tool is None:
        raise FileNotFoundError(
            "as_text('sass') disassembles the program's cubin with nvdisasm or cuobjdump from the "
            "CUDA toolkit, and neither was found (PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, "
            f"{DEFAULT_ROOT}/bin); as_text('ptx') shows the PTX")
    cubins = dict(getattr(program, "cubins", None) or {})
    if not cubins:
        if not getattr(program, "kernels", True):
            return "// the program launches no kernels: there is no SASS\n"
        if nvptx.find_ptxas() is None:
            raise FileNotFoundError(
                "as_text('sass'): the program has no cubin (ptxas was absent when it was "
                "compiled) and ptxas is not here to assemble its PTX; as_text('ptx') shows the PTX")
        cubins = {program.arch: nvptx.assemble(program.ptx, program.arch)}
    name, path = tool
    out = []
    with tempfile.TemporaryDirectory() as d:
        for arch, cubin in sorted(cubins.items()):
            f = os.path.join(d, f"{arch}.cubin")
            with open(f, "wb") as fh:
                fh.write(cubin)
            cmd = [path, "-c", f] if name == "nvdisasm" else [path, "-sass", f]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{name} could not disassemble the {arch} cubin:\n{r.stderr.strip()}")
            out.append(f"// SASS for {arch} ({name})\n{r.stdout}")
    return "\n".join(out)
