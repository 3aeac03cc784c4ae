"""LLVM IR -> PTX for one architecture (temporary: replaced by the shared NVPTX helper)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from typing import Optional

import llvmlite.binding as llvm

TRIPLE = "nvptx64-nvidia-cuda"


@functools.lru_cache(maxsize=None)
def target_machine(arch: str):
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    t = llvm.Target.from_triple(TRIPLE)
    return t.create_target_machine(cpu=arch, opt=3)


def data_layout(arch: str) -> str:
    return str(target_machine(arch).target_data)


def libdevice_path() -> Optional[str]:
    cand = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "nvvm", "libdevice", "libdevice.10.bc")
    return cand if os.path.exists(cand) else None


def compile_ptx(ir_text: str, arch: str) -> str:
    tm = target_machine(arch)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    if "__nv_" in ir_text:
        path = libdevice_path()
        if path is None:
            raise RuntimeError("the program calls libdevice math functions, and libdevice.10.bc "
                               "was not found (set CUDA_HOME)")
        with open(path, "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        lib.triple = mod.triple
        lib.data_layout = mod.data_layout
        mod.link_in(lib)
        for fn in mod.functions:
            if not fn.is_declaration and fn.name.startswith("__nv_"):
                fn.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    return tm.emit_assembly(mod)


def ptxas_path() -> Optional[str]:
    p = shutil.which("ptxas")
    if p:
        return p
    cand = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    return cand if os.path.exists(cand) else None


def assemble(ptx: str, arch: str) -> Optional[bytes]:
    exe = ptxas_path()
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", src, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"ptxas -arch={arch} rejected the generated PTX: {r.stderr.strip()[:2000]}")
        with open(out, "rb") as f:
            return f.read()
