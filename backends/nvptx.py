"""NVPTX modules through llvmlite, shared by GPU backends: the target machine for
``nvptx64-nvidia-cuda`` at an SM architecture, a ``ModuleContext`` with its data layout and the
libdevice math policy, kernel functions (calling convention ``ptx_kernel``), libdevice linked in
when the module calls it, PTX emission and ``ptxas`` (a check, or the cubin).

    target = CudaTarget.for_arch("sm_90")          # hlo.runtime.cuda.target
    ctx = module_context("m", target)
    fn = kernel(ctx, "k", [PTR, PTR])               # void k(ptr, ptr), a PTX entry
    ...                                             # the shared emitter, ctx.math: libdevice
    ptx = compile_ptx(str(ctx.module), target)      # O3, libdevice linked if __nv_* is called
    ptxas_check(ptx, target.arch)                   # ptxas accepts it (or PtxasError)

Libdevice is linked only when a module declares a ``__nv_*`` function: its bitcode is parsed,
given the module's triple and data layout, linked in; every function but the kernels gets
internal linkage; the module flag ``nvvm-reflect-ftz`` = 0 (denormals kept, as on the CPU) is
set for NVVMReflect, and the O3 pipeline then drops what the module does not use.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from typing import Dict, Iterable, Optional, Sequence, Tuple

import llvmlite.binding as llvm
import llvmlite.ir as ir

from hlo.runtime.cuda.target import TRIPLE, CudaTarget

from .llvm_util import I32, VOID, ModuleContext
from .mathlib import LIBDEVICE_MATH

KERNEL_CC = "ptx_kernel"


class LibdeviceNotFound(RuntimeError):
    """No libdevice bitcode on this machine (needed by a module that calls ``__nv_*``)."""


class PtxasError(RuntimeError):
    """``ptxas`` refused the PTX."""


@functools.lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@functools.lru_cache(maxsize=None)
def target_machine(target: CudaTarget):
    _init()
    t = llvm.Target.from_triple(TRIPLE)
    return t.create_target_machine(cpu=target.arch, features=target.features, opt=3)


def data_layout(target: CudaTarget) -> str:
    return str(target_machine(target).target_data)


def module_context(name: str, target: CudaTarget) -> ModuleContext:
    """A module for ``target`` whose math calls libdevice where hlo has no polynomial."""
    ctx = ModuleContext(name, TRIPLE, data_layout(target), math=LIBDEVICE_MATH)
    m = ctx.module
    # !llvm.module.flags = !{!{i32 4, !"nvvm-reflect-ftz", i32 0}}: libdevice keeps denormals
    m.add_named_metadata("llvm.module.flags",
                         [ir.Constant(I32, 4), ir.MetaDataString(m, "nvvm-reflect-ftz"), ir.Constant(I32, 0)])
    return ctx


def kernel(ctx: ModuleContext, name: str, params: Sequence[ir.Type]) -> ir.Function:
    """A ``void`` kernel entry (``ptx_kernel``) taking ``params``."""
    fn = ir.Function(ctx.module, ir.FunctionType(VOID, list(params)), name=name)
    fn.calling_convention = KERNEL_CC
    return fn


def thread_index(ctx: ModuleContext, b: ir.IRBuilder, reg: str, axis: str = "x") -> ir.Value:
    """``%tid`` / ``%ctaid`` / ``%ntid`` / ``%nctaid`` along ``axis`` (i32)."""
    f = ctx.declare(f"llvm.nvvm.read.ptx.sreg.{reg}.{axis}", I32, [])
    return b.call(f, [])


def find_libdevice() -> Optional[str]:
    """The path of ``libdevice.10.bc``: cuda.pathfinder when installed, else under
    ``CUDA_HOME`` / ``CUDA_PATH`` or /usr/local/cuda; None when there is none."""
    try:
        from cuda import pathfinder
        for fn in ("find_bitcode_lib", "locate_bitcode_lib"):
            f = getattr(pathfinder, fn, None)
            if f is not None:
                try:
                    got = f("device")
                except Exception:
                    continue
                path = getattr(got, "abs_path", got)
                if isinstance(path, str) and os.path.isfile(path):
                    return path
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            p = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
            if os.path.isfile(p):
                return p
    return None


@functools.lru_cache(maxsize=4)
def _libdevice_bitcode(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _calls_libdevice(mod) -> bool:
    return any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions)


def link_libdevice(mod, target: CudaTarget, kernels: Iterable[str]) -> None:
    """Link libdevice into ``mod`` (a parsed module) and internalize everything but the kernels."""
    path = find_libdevice()
    if path is None:
        raise LibdeviceNotFound("this module calls libdevice (__nv_*), but libdevice.10.bc was not "
                                "found (install the CUDA toolkit or cuda-pathfinder, or set CUDA_HOME)")
    lib = llvm.parse_bitcode(_libdevice_bitcode(path))
    lib.triple = mod.triple
    lib.data_layout = mod.data_layout
    mod.link_in(lib)
    keep = set(kernels)
    for f in mod.functions:
        if not f.is_declaration and f.name not in keep:
            f.linkage = llvm.Linkage.internal


def kernel_names(mod) -> list:
    """The kernels of a parsed module (functions with the ``ptx_kernel`` calling convention)."""
    return [f.name for f in mod.functions if not f.is_declaration and f" {KERNEL_CC} " in f" {str(f).split('(')[0]} "]


def compile_ptx(ir_text: str, target: CudaTarget, opt_level: int = 3) -> Tuple[str, Dict[str, float]]:
    """LLVM IR text -> PTX text (verified, libdevice linked when called, optimized)."""
    _init()
    times = {}
    t0 = time.perf_counter()
    mod = llvm.parse_assembly(ir_text)
    mod.triple = TRIPLE
    mod.data_layout = data_layout(target)
    mod.verify()
    times["llvm_parse"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if _calls_libdevice(mod):
        link_libdevice(mod, target, kernel_names(mod))
    times["link_libdevice"] = time.perf_counter() - t0
    tm = target_machine(target)
    t0 = time.perf_counter()
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    times["llvm_opt"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ptx = tm.emit_assembly(mod)
    times["llvm_codegen"] = time.perf_counter() - t0
    return ptx, times


def find_ptxas() -> Optional[str]:
    p = shutil.which("ptxas")
    if p:
        return p
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "ptxas")):
            return os.path.join(root, "bin", "ptxas")
    return None


def assemble(ptx: str, arch: str, ptxas: Optional[str] = None) -> bytes:
    """The cubin ptxas makes of ``ptx`` for ``arch``; ``PtxasError`` with its messages when it
    refuses, ``FileNotFoundError`` when there is no ptxas."""
    exe = ptxas or find_ptxas()
    if exe is None:
        raise FileNotFoundError("ptxas was not found (install the CUDA toolkit or set CUDA_HOME)")
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", src, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            raise PtxasError(f"ptxas -arch={arch} failed:\n{r.stderr.strip()}")
        with open(out, "rb") as f:
            return f.read()


def ptxas_check(ptx: str, arch: str, ptxas: Optional[str] = None) -> None:
    """Assemble ``ptx`` for ``arch`` with ptxas (output discarded); ``PtxasError`` with its
    messages when it refuses."""
    assemble(ptx, arch, ptxas)


def unresolved_calls(ptx: str) -> list:
    """Functions the PTX declares ``.extern`` (calls nothing in the module defines)."""
    import re
    return sorted(set(re.findall(r"\.extern\s+\.func\s*(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", ptx)))
