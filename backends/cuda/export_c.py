"""Export a compiled CUDA program as a C library: ``lib<name>.so`` and ``<name>.h``, the host
side of a call written in C and compiled by the system's ``cc`` (no Python, no CUDA toolkit at
build or run time).

The library embeds the program's PTX, its cubins and its constants, and opens the driver with
``dlopen("libcuda.so.1")`` when a context is made, so it loads on a machine without a GPU and
says so there (``HLO_ERR_NO_GPU``). A context (device ordinal, the caller's ``CUstream`` or a
stream of its own) retains the device's primary context, loads the module (the cubin for the
device's architecture, else the PTX, which the driver compiles), uploads the constants and
allocates the arena. ``<name>_run`` queues the step tree (``hlo.runtime.steps``) on the stream
as straight C: kernel launches (``cuLaunchKernel``, parameters = the buffers' device pointers
then the scalars), device copies, loops (a known trip count runs the body that many times;
otherwise the condition's predicate is read back, as ``runtime/cuda/launch.py`` does) and
switches. Inputs and outputs are device pointers the caller owns.

Matrix products (``LibraryCall("cublaslt", "matmul")``) open cuBLASLt with ``dlopen``
(``libcublasLt.so.13``, then ``.so.12``, through the loader's search: ``LD_LIBRARY_PATH``, the
loader cache) when a context of a program that has them is made, and plan each product as
``runtime/cuda/cublaslt.py`` does: the matmul descriptor (compute and scale types, transposes,
epilogue, bias type), the four column-major layouts (batched strided), a preference with the
32 MiB workspace and the operands' alignment, and the heuristic's first algorithm; a plan for
256-byte-aligned operands is made with the context, one for other alignments when a call
needs it. Not there yet: CUDA-graph replay (a call is the step walk) and the autotuning of
``HLO_CUBLASLT_AUTOTUNE``.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from typing import List

from hlo.backends.cpu.export_c import Exported, find_cc
from hlo.backends.cpu.export_c.header import _arg_line, _comment, signature_queries, status_enum
from hlo.backends.cpu.export_c.runtime_c import (
    C_API_VERSION,
    MAGIC,
    _array,
    _c_string,
    context_check,
    run_checks,
    signature_functions,
    signature_tables,
    status_function,
)
from hlo.backends.cpu.export_c.spec import ExportError, LibrarySpec, _arg, check_name
from hlo.runtime.steps import (
    BufRef,
    Copy,
    HostCall,
    KernelCall,
    Launch,
    LibraryCall,
    Switch,
    While,
    walk_steps,
)

# driver functions the library calls (dlsym names; the _v2 ones are the current ABI)
DRIVER = (
    ("cuInit", "CUresult (*)(unsigned)"),
    ("cuGetErrorName", "CUresult (*)(CUresult, const char **)"),
    ("cuDeviceGetCount", "CUresult (*)(int *)"),
    ("cuDeviceGet", "CUresult (*)(CUdevice *, int)"),
    ("cuDeviceGetAttribute", "CUresult (*)(int *, int, CUdevice)"),
    ("cuDevicePrimaryCtxRetain", "CUresult (*)(CUcontext *, CUdevice)"),
    ("cuDevicePrimaryCtxRelease_v2", "CUresult (*)(CUdevice)"),
    ("cuCtxSetCurrent", "CUresult (*)(CUcontext)"),
    ("cuModuleLoadData", "CUresult (*)(CUmodule *, const void *)"),
    ("cuModuleUnload", "CUresult (*)(CUmodule)"),
    ("cuModuleGetFunction", "CUresult (*)(CUfunction *, CUmodule, const char *)"),
    ("cuFuncSetAttribute", "CUresult (*)(CUfunction, int, int)"),
    ("cuMemAlloc_v2", "CUresult (*)(CUdeviceptr *, size_t)"),
    ("cuMemFree_v2", "CUresult (*)(CUdeviceptr)"),
    ("cuMemcpyHtoD_v2", "CUresult (*)(CUdeviceptr, const void *, size_t)"),
    ("cuMemcpyDtoDAsync_v2", "CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream)"),
    ("cuMemcpyDtoHAsync_v2", "CUresult (*)(void *, CUdeviceptr, size_t, CUstream)"),
    ("cuStreamCreate", "CUresult (*)(CUstream *, unsigned)"),
    ("cuStreamDestroy_v2", "CUresult (*)(CUstream)"),
    ("cuStreamSynchronize", "CUresult (*)(CUstream)"),
    ("cuLaunchKernel", "CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, "
                       "unsigned, unsigned, CUstream, void **, void **)"),
)
# cuBLASLt functions (dlsym names)
CUBLASLT = (
    ("cublasLtCreate", "int (*)(void **)"),
    ("cublasLtDestroy", "int (*)(void *)"),
    ("cublasLtMatmulDescCreate", "int (*)(void **, int, int)"),
    ("cublasLtMatmulDescDestroy", "int (*)(void *)"),
    ("cublasLtMatmulDescSetAttribute", "int (*)(void *, int, const void *, size_t)"),
    ("cublasLtMatrixLayoutCreate", "int (*)(void **, int, uint64_t, uint64_t, int64_t)"),
    ("cublasLtMatrixLayoutDestroy", "int (*)(void *)"),
    ("cublasLtMatrixLayoutSetAttribute", "int (*)(void *, int, const void *, size_t)"),
    ("cublasLtMatmulPreferenceCreate", "int (*)(void **)"),
    ("cublasLtMatmulPreferenceDestroy", "int (*)(void *)"),
    ("cublasLtMatmulPreferenceSetAttribute", "int (*)(void *, int, const void *, size_t)"),
    ("cublasLtMatmulAlgoGetHeuristic", "int (*)(void *, void *, void *, void *, void *, void *, void *, int, "
                                       "void *, int *)"),
    ("cublasLtMatmul", "int (*)(void *, void *, const void *, const void *, void *, const void *, void *, "
                       "const void *, const void *, void *, void *, void *, const void *, void *, size_t, CUstream)"),
)
CUBLASLT_SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12")
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_STREAM_NON_BLOCKING = 1
SCALAR_C = {"i32": "int32_t", "i64": "int64_t", "f32": "float"}
# cuBLASLt's enum values, as runtime/cuda/cublaslt.py has them (a GPU test there checks them
# against the installed header)
CUDA_DATA_TYPES = {"f16": 2, "bf16": 14, "f32": 0, "f64": 1}
COMPUTE = {"32F": 68, "32F_FAST_TF32": 77, "32F_FAST_16BF": 75, "32F_FAST_16F": 74, "64F": 70}
EPILOGUE = {"DEFAULT": 1, "RELU": 2, "BIAS": 4, "RELU_BIAS": 6, "GELU": 32, "GELU_BIAS": 36}
WORKSPACE_BYTES = 32 << 20


def check_exportable(prog) -> None:
    """``ExportError`` for what the CUDA export cannot carry: a library call other than
    cuBLASLt's matmul, host callbacks, CPU steps."""
    for st in walk_steps(prog.steps):
        if isinstance(st, LibraryCall) and (st.library, st.fn) != ("cublaslt", "matmul"):
            raise ExportError(f"this program calls {st.library}.{st.fn}: the CUDA export has only "
                              "cublaslt.matmul")
        if isinstance(st, (HostCall, KernelCall)):
            raise ExportError(f"a {type(st).__name__} step cannot be exported for target 'cuda'")


def spec_of(prog, name: str, arg_names=None, function: str = "", hlo_version: str = "") -> LibrarySpec:
    check_name(name)
    m = prog.manifest
    nin, nout = len(m["inputs"]), len(m["outputs"])
    names = list(arg_names) if arg_names is not None else [f"arg{i}" for i in range(nin)]
    out_names = ["result"] if nout == 1 else [f"result{i}" for i in range(nout)]
    tgt = m.get("target") or {}
    return LibrarySpec(
        name=name, function=function or name,
        inputs=[_arg(d, n, "argument") for d, n in zip(m["inputs"], names)],
        outputs=[_arg(d, n, "result") for d, n in zip(m["outputs"], out_names)],
        aliases={int(o): int(i) for o, i in (m.get("aliases") or [])},
        written=tuple(int(i) for i in (m.get("inputs_written") or [])),
        arena_size=int(m.get("arena_size", 0)), triple=str(tgt.get("triple", "nvptx64-nvidia-cuda")),
        cpu=str(tgt.get("arch", "")), features=str(tgt.get("ptx", "")), hlo_version=hlo_version,
        uses_pool=False)


def _sm(arch: str):
    """(SM number, suffix) of ``sm_90`` / ``sm_90a`` / ``sm_100f``."""
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return int(digits), arch[3 + len(digits):]


class _Emitter:
    """The step tree as C statements inside ``run_steps``."""

    def __init__(self, kernels: List[str]):
        self.kernels = kernels
        self.lines: List[str] = []
        self.n = 0
        self.products: list = []  # MatmulParams of each cuBLASLt product, in emission order

    def addr(self, ref: BufRef) -> str:
        off = f" + {ref.offset}u" if ref.offset else ""
        if ref.kind == "input":
            return f"((CUdeviceptr)(uintptr_t)inputs[{ref.index}]{off})"
        if ref.kind == "output":
            return f"((CUdeviceptr)(uintptr_t)outputs[{ref.index}]{off})"
        if ref.kind == "arena":
            return f"(ctx->arena{off})"
        if ref.kind == "const":
            return f"(ctx->consts[{ref.index}]{off})"
        raise ExportError(f"a buffer of kind {ref.kind!r} in a CUDA step")

    def scalar(self, t: str, v) -> str:
        if t == "f32":
            v = float(v)
            if math.isnan(v):
                return "NAN"
            if math.isinf(v):
                return "INFINITY" if v > 0 else "-INFINITY"
            return f"{v.hex()}f"  # exact; C rounds it to float once, as ctypes' c_float does
        return f"(int64_t){int(v)}LL" if t == "i64" else f"(int32_t){int(v)}"

    def emit(self, steps, depth: int = 1) -> None:
        pad = "    " * depth
        for st in steps:
            self.n += 1
            if isinstance(st, Launch):
                if st.name not in self.kernels:
                    raise ExportError(f"launch of {st.name}: not a kernel of the module")
                for t, _ in st.scalars:
                    if t not in SCALAR_C:
                        raise ExportError(f"launch of {st.name}: scalar type {t!r}")
                k = self.kernels.index(st.name)
                ptrs = ", ".join(self.addr(r) for r in st.refs) or "0"
                scal = "".join(f" {SCALAR_C[t]} s{j} = {self.scalar(t, v)};" for j, (t, v) in enumerate(st.scalars))
                args = ", ".join([f"&p[{j}]" for j in range(len(st.refs))] +
                                 [f"&s{j}" for j in range(len(st.scalars))]) or "NULL"
                gx, gy, gz = (int(x) for x in st.grid)
                bx, by, bz = (int(x) for x in st.block)
                what = _c_string(f"{st.name}" + (f" ({st.what})" if st.what else ""))
                self.lines.append(
                    f"{pad}{{ CUdeviceptr p[{max(1, len(st.refs))}] = {{{ptrs}}};{scal}\n"
                    f"{pad}  void *args[] = {{{args}}};\n"
                    f"{pad}  CHECK(cu.cuLaunchKernel(ctx->fn[{k}], {gx}u, {gy}u, {gz}u, {bx}u, {by}u, {bz}u, "
                    f"{int(st.shared_bytes)}u, ctx->stream, args, NULL), \"cuLaunchKernel\", {what}); }}")
            elif isinstance(st, LibraryCall):
                from hlo.runtime.cuda.matmul_params import MatmulParams
                try:
                    prm = MatmulParams.from_json(st.params)
                except (KeyError, TypeError, ValueError) as e:
                    raise ExportError(f"cublaslt.matmul: malformed params ({e})") from None
                names = list(prm.inputs)
                if len(st.refs) != len(names) + 1 or not {"a", "b"} <= set(names) \
                        or not set(names) <= {"a", "b", "c", "bias"} or ("bias" in names) != prm.has_bias:
                    raise ExportError(f"cublaslt.matmul: refs {list(map(str, st.refs))} do not match "
                                      f"params inputs {names} + the result")
                for m in (prm.a, prm.b, prm.d) + ((prm.c,) if prm.c is not None else ()):
                    if m.dtype not in CUDA_DATA_TYPES:
                        raise ExportError(f"cublaslt.matmul: a {m.dtype} matrix")
                if prm.compute not in COMPUTE or prm.scale not in ("f32", "f64") or prm.epilogue not in EPILOGUE:
                    raise ExportError(f"cublaslt.matmul: unsupported parameters {prm.describe()}")
                k = len(self.products)
                self.products.append(prm)
                at = {n: self.addr(r) for n, r in zip(names, st.refs)}
                d = self.addr(st.refs[-1])
                what = _c_string(st.what or prm.describe())
                self.lines.append(f"{pad}{{ int st_ = matmul(ctx, {k}, {at['a']}, {at['b']}, {at.get('c', d)}, "
                                  f"{at.get('bias', '0')}, {d}, {what}); if (st_) return st_; }}")
            elif isinstance(st, Copy):
                self.lines.append(f"{pad}CHECK(cu.cuMemcpyDtoDAsync_v2({self.addr(st.dst)}, {self.addr(st.src)}, "
                                  f"{int(st.nbytes)}u, ctx->stream), \"cuMemcpyDtoDAsync\", \"a copy\");")
            elif isinstance(st, While):
                if st.trip_count is not None:
                    self.lines.append(f"{pad}for (long t{self.n} = 0; t{self.n} < {int(st.trip_count)}L; t{self.n}++) {{")
                    self.emit(st.body, depth + 1)
                    self.lines.append(f"{pad}}}")
                else:
                    self.lines.append(f"{pad}for (;;) {{")
                    self.emit(st.cond, depth + 1)
                    self.lines.append(f"{pad}    uint8_t pred = 0;\n"
                                      f"{pad}    CHECK(read_back(ctx, &pred, {self.addr(st.cond_ref)}, 1), "
                                      f"\"cuMemcpyDtoHAsync\", \"a loop's condition\");\n"
                                      f"{pad}    if (!pred) break;")
                    self.emit(st.body, depth + 1)
                    self.lines.append(f"{pad}}}")
            elif isinstance(st, Switch):
                if not st.branches:
                    raise ExportError("a switch step has no branches")
                nb = len(st.branches)
                if st.is_pred:
                    self.lines.append(f"{pad}{{ uint8_t sel = 0;\n"
                                      f"{pad}  CHECK(read_back(ctx, &sel, {self.addr(st.selector)}, 1), "
                                      f"\"cuMemcpyDtoHAsync\", \"a condition\");\n"
                                      f"{pad}  int branch = sel ? 0 : 1;")
                else:
                    self.lines.append(f"{pad}{{ int32_t sel = 0;\n"
                                      f"{pad}  CHECK(read_back(ctx, &sel, {self.addr(st.selector)}, 4), "
                                      f"\"cuMemcpyDtoHAsync\", \"a case selector\");\n"
                                      f"{pad}  int branch = sel >= 0 && sel < {nb} ? (int)sel : {nb - 1};")
                for b, steps in enumerate(st.branches):
                    self.lines.append(f"{pad}  if (branch == {b}) {{")
                    self.emit(steps, depth + 1)
                    self.lines.append(f"{pad}  }}")
                self.lines.append(f"{pad}}}")
            else:
                raise ExportError(f"a {type(st).__name__} step cannot be exported for target 'cuda'")


def _mm_c(prm) -> str:
    """One product's ``mm_params_t`` initializer (matrices a, b, c, d; c = d without a C operand)."""
    mats = [prm.a, prm.b, prm.c if prm.c is not None else prm.d, prm.d]
    return ("{" + f"{COMPUTE[prm.compute]}, {CUDA_DATA_TYPES[prm.scale]}, {int(prm.trans_a)}, {int(prm.trans_b)}, "
            f"{EPILOGUE[prm.epilogue]}, {int(prm.has_bias)}, "
            f"{CUDA_DATA_TYPES.get(prm.bias_type, 0) if prm.has_bias else 0}, {int(prm.batch)}, "
            f"{int(prm.c is not None)}, "
            "{" + ", ".join(str(CUDA_DATA_TYPES[m.dtype]) for m in mats) + "}, "
            "{" + ", ".join(f"{m.rows}u" for m in mats) + "}, "
            "{" + ", ".join(f"{m.cols}u" for m in mats) + "}, "
            "{" + ", ".join(f"{m.ld}" for m in mats) + "}, "
            "{" + ", ".join(f"{m.batch_stride}" for m in mats) + "}, "
            f"{float(prm.alpha).hex()}, {float(prm.beta).hex()}" + "}")


def _bytes_array(name: str, data: bytes) -> str:
    body = ",".join(str(b) for b in data) or "0"
    return f"static const unsigned char {name}[{max(1, len(data))}] __attribute__((aligned(256))) = {{{body}}};"


def source(spec: LibrarySpec, prog) -> str:
    """The C source of a CUDA library for ``spec`` and the ``CudaProgram`` ``prog``."""
    import numpy as np
    p = spec.name
    kernels = list(prog.kernels)
    em = _Emitter(kernels)
    em.emit(prog.steps)
    shared = {}
    for st in walk_steps(prog.steps):
        if isinstance(st, Launch) and st.shared_bytes > 48 * 1024:
            shared[kernels.index(st.name)] = max(shared.get(kernels.index(st.name), 0), int(st.shared_bytes))
    consts = [np.ascontiguousarray(c).tobytes() for c in prog.constants]
    nmm = len(em.products)
    lt_types = "\n".join(f"    {sig.replace('(*)', f'(*{fn})')};" for fn, sig in CUBLASLT)
    lt_lookups = "\n".join(f'    if (!(lt.{fn} = dlsym(h, "{fn}"))) return fail_lt("{fn} is missing from cuBLASLt");'
                            for fn, _ in CUBLASLT)
    lt_sonames = " ".join(f'"{n}",' for n in CUBLASLT_SONAMES)
    cubins = sorted(prog.cubins.items())
    code_sm, code_suffix = _sm(spec.cpu)
    runs_on = {"a": "sm == CODE_SM", "f": "sm / 10 == CODE_SM / 10 && sm >= CODE_SM"}.get(code_suffix, "sm >= CODE_SM")
    typedefs = "\n".join(f"    {sig.replace('(*)', f'(*{fn})')};" for fn, sig in DRIVER)
    lookups = "\n".join(f'    if (!(cu.{fn} = dlsym(h, "{fn}"))) return fail_load("{fn} is missing from libcuda.so.1");'
                        for fn, _ in DRIVER)
    cubin_decls = "\n".join(_bytes_array(f"cubin{i}", code) for i, (_, code) in enumerate(cubins))
    cubin_pick = "\n".join(f'    if (!strcmp(arch, {_c_string(a)})) return cubin{i};' for i, (a, _) in enumerate(cubins))
    const_decls = "\n".join(_bytes_array(f"const{i}", c) for i, c in enumerate(consts))
    nconst = len(consts)
    return f"""/* The runtime of lib{p}.so (target cuda, {spec.cpu}), generated by hlo export-c (hlo {spec.hlo_version}):
   the host side of a call in C; the driver is opened with dlopen at the first context. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "{p}.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

#define NIN {len(spec.inputs)}
#define NOUT {len(spec.outputs)}
#define NKERNELS {len(kernels)}
#define NCONSTS {nconst}
#define MAGIC 0x{MAGIC:016X}ULL
#define CODE_SM {code_sm}
static const size_t ARENA_BYTES = {spec.arena_size}u;

{signature_tables(spec)}
{_array("char *const", "kernel_names", [_c_string(k) for k in kernels])}
{_array("int", "kernel_shared", [str(shared.get(k, 0)) for k in range(len(kernels))])}
static const char ptx[] = {_c_string(prog.ptx)};
{cubin_decls}
{const_decls}
{_array("unsigned char *const", "const_data", [f"const{i}" for i in range(nconst)])}
{_array("size_t", "const_bytes", [f"{len(c)}u" for c in consts])}

static struct {{
{typedefs}
}} cu;

/* cuBLASLt (programs with matrix products): opened at the first context of such a program */
#define NMM {nmm}
static struct {{
{lt_types}
}} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_status = HLO_OK;
static char lt_message[512];
typedef struct {{
    int compute, scale, transa, transb, epilogue, has_bias, bias_type, batch, has_c;
    int dt[4];            /* a, b, c, d: cudaDataType */
    uint64_t rows[4], cols[4];
    int64_t ld[4], stride[4];
    double alpha, beta;
}} mm_params_t;
{_array("mm_params_t", "mm_params", [_mm_c(prm) for prm in em.products])}
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = HLO_OK;
static char load_message[512];

static int fail_load(const char *what) {{
    snprintf(load_message, sizeof load_message, "{p}: %s", what);
    return HLO_ERR_NO_GPU;
}}

static int load_driver_once(void) {{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {{
        snprintf(load_message, sizeof load_message,
                 "{p}: the NVIDIA driver's libcuda.so.1 cannot be loaded (%s): no CUDA GPU here", dlerror());
        return HLO_ERR_NO_GPU;
    }}
{lookups}
    CUresult r = cu.cuInit(0);
    if (r) {{
        const char *name = "?";
        cu.cuGetErrorName(r, &name);
        snprintf(load_message, sizeof load_message, "{p}: cuInit failed: %s (no usable CUDA device)", name);
        return HLO_ERR_NO_GPU;
    }}
    return HLO_OK;
}}

static void load_driver(void) {{ load_status = load_driver_once(); }}

static const char library_tag = 0;

struct {p}_context {{
    uint64_t magic;
    const void *owner;
    int device_ordinal;
    CUdevice device;
    CUcontext cuctx;
    CUstream stream;
    int own_stream;
    CUmodule module;
    CUfunction fn[NKERNELS > 0 ? NKERNELS : 1];
    CUdeviceptr arena;
    CUdeviceptr consts[NCONSTS > 0 ? NCONSTS : 1];
    void *lt_handle;
    CUdeviceptr lt_workspace;
    struct mm_plan {{
        void *desc, *lay[4], *pref;
        unsigned char algo[64];
        size_t workspace;
        uint32_t align[5];
        CUdeviceptr bias;
        int ready;
    }} plans[NMM > 0 ? NMM : 1][2];   /* [0]: operands 256-byte aligned; [1]: the last other alignment */
    atomic_int busy;
    char message[512];
}};

static int fail(struct {p}_context *ctx, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct {p}_context *ctx, int status, const char *fmt, ...) {{
    if (ctx) {{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
        va_end(ap);
    }}
    return status;
}}

static int cuda_fail(struct {p}_context *ctx, CUresult r, const char *call, const char *what) {{
    const char *name = "?";
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
    return fail(ctx, r == 2 ? HLO_ERR_OUT_OF_MEMORY : HLO_ERR_CUDA, "{p}: %s (%s) failed: %s", call, what, name);
}}

#define CHECK(expr, call, what) do {{ CUresult r_ = (expr); if (r_) return cuda_fail(ctx, r_, call, what); }} while (0)

static const void *code_for(const char *arch) {{
{cubin_pick}
    (void)arch;
    return ptx;
}}

static CUresult read_back(struct {p}_context *ctx, void *host, CUdeviceptr src, size_t n) {{
    CUresult r = cu.cuMemcpyDtoHAsync_v2(host, src, n, ctx->stream);
    return r ? r : cu.cuStreamSynchronize(ctx->stream);
}}

static int fail_lt(const char *what) {{
    snprintf(lt_message, sizeof lt_message, "{p}: %s", what);
    return HLO_ERR_NO_GPU;
}}

static int load_cublaslt_once(void) {{
    static const char *const names[] = {{{lt_sonames}}};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return fail_lt("the program's matrix products need cuBLASLt (libcublasLt.so.13 or .so.12), which the "
                       "dynamic loader does not find: install NVIDIA's cuBLAS or add its folder to LD_LIBRARY_PATH");
{lt_lookups}
    return HLO_OK;
}}

static void load_cublaslt(void) {{ lt_status = load_cublaslt_once(); }}

static void mm_release(struct mm_plan *pl) {{
    if (pl->pref) lt.cublasLtMatmulPreferenceDestroy(pl->pref);
    for (int i = 0; i < 4; i++)
        if (pl->lay[i]) lt.cublasLtMatrixLayoutDestroy(pl->lay[i]);
    if (pl->desc) lt.cublasLtMatmulDescDestroy(pl->desc);
    memset(pl, 0, sizeof *pl);
}}

static int lt_fail(struct {p}_context *ctx, int st, const char *call, const char *what) {{
    return fail(ctx, HLO_ERR_CUDA, "{p}: %s (%s) failed: cublasStatus %d", call, what, st);
}}

#define LT(expr, call) do {{ int s_ = (expr); if (s_) {{ mm_release(pl); return lt_fail(ctx, s_, call, what); }} }} while (0)

/* the descriptors and algorithm of product k for operands of these alignments (a, b, c, d, bias) */
static int mm_plan(struct {p}_context *ctx, int k, const uint32_t align[5], struct mm_plan *pl, const char *what) {{
    const mm_params_t *q = &mm_params[k];
    mm_release(pl);
    LT(lt.cublasLtMatmulDescCreate(&pl->desc, q->compute, q->scale), "cublasLtMatmulDescCreate");
    int32_t ta = q->transa, tb = q->transb;
    LT(lt.cublasLtMatmulDescSetAttribute(pl->desc, {3}, &ta, sizeof ta), "cublasLtMatmulDescSetAttribute");
    LT(lt.cublasLtMatmulDescSetAttribute(pl->desc, {4}, &tb, sizeof tb), "cublasLtMatmulDescSetAttribute");
    if (q->epilogue != {EPILOGUE["DEFAULT"]}) {{
        uint32_t e = (uint32_t)q->epilogue;
        LT(lt.cublasLtMatmulDescSetAttribute(pl->desc, {7}, &e, sizeof e), "cublasLtMatmulDescSetAttribute");
    }}
    if (q->has_bias) {{
        int32_t bt = q->bias_type;
        /* a pointer of the real one's alignment, for the heuristic; the real one is set per call */
        CUdeviceptr fake = align[4];
        LT(lt.cublasLtMatmulDescSetAttribute(pl->desc, {26}, &bt, sizeof bt), "cublasLtMatmulDescSetAttribute");
        LT(lt.cublasLtMatmulDescSetAttribute(pl->desc, {8}, &fake, sizeof fake), "cublasLtMatmulDescSetAttribute");
        pl->bias = fake;
    }}
    for (int i = 0; i < 4; i++) {{
        if (i == 2 && !q->has_c) continue;
        LT(lt.cublasLtMatrixLayoutCreate(&pl->lay[i], q->dt[i], q->rows[i], q->cols[i], q->ld[i]),
           "cublasLtMatrixLayoutCreate");
        if (q->batch > 1) {{
            int32_t b = q->batch;
            int64_t st = q->stride[i];
            LT(lt.cublasLtMatrixLayoutSetAttribute(pl->lay[i], {5}, &b, sizeof b), "cublasLtMatrixLayoutSetAttribute");
            LT(lt.cublasLtMatrixLayoutSetAttribute(pl->lay[i], {6}, &st, sizeof st), "cublasLtMatrixLayoutSetAttribute");
        }}
    }}
    LT(lt.cublasLtMatmulPreferenceCreate(&pl->pref), "cublasLtMatmulPreferenceCreate");
    uint64_t ws = {WORKSPACE_BYTES}u;
    LT(lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, {1}, &ws, sizeof ws), "cublasLtMatmulPreferenceSetAttribute");
    for (int i = 0; i < 4; i++) {{
        uint32_t a = align[i];
        LT(lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, {5} + i, &a, sizeof a), "cublasLtMatmulPreferenceSetAttribute");
    }}
    unsigned char result[96];  /* cublasLtMatmulHeuristicResult_t: algo[64], workspaceSize, state, ... */
    int found = 0;
    void *c_lay = q->has_c ? pl->lay[2] : pl->lay[3];
    int st = lt.cublasLtMatmulAlgoGetHeuristic(ctx->lt_handle, pl->desc, pl->lay[0], pl->lay[1], c_lay, pl->lay[3],
                                               pl->pref, 1, result, &found);
    int state = 0;
    memcpy(&state, result + 72, sizeof state);
    if (st || found < 1 || state) {{
        mm_release(pl);
        return fail(ctx, HLO_ERR_CUDA, "{p}: cuBLASLt has no algorithm for %s (cublasStatus %d, %d found)", what, st, found);
    }}
    memcpy(pl->algo, result, 64);
    memcpy(&pl->workspace, result + 64, sizeof pl->workspace);
    memcpy(pl->align, align, sizeof pl->align);
    pl->ready = 1;
    return HLO_OK;
}}
#undef LT

static uint32_t alignment_of(CUdeviceptr a) {{
    if (!a || a % 256 == 0) return 256;
    return (uint32_t)(a & (~a + 1));
}}

/* one cublasLtMatmul: D = alpha op(A) op(B) + beta C, then the epilogue (c is d without a C operand) */
static int matmul(struct {p}_context *ctx, int k, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
                  CUdeviceptr d, const char *what) {{
    const mm_params_t *q = &mm_params[k];
    uint32_t align[5] = {{alignment_of(a), alignment_of(b), alignment_of(c), alignment_of(d), alignment_of(bias)}};
    struct mm_plan *pl = &ctx->plans[k][0];
    if (memcmp(align, pl->align, sizeof align)) {{
        pl = &ctx->plans[k][1];
        if (!pl->ready || memcmp(align, pl->align, sizeof align)) {{
            int st = mm_plan(ctx, k, align, pl, what);
            if (st) return st;
        }}
    }}
    if (q->has_bias && bias != pl->bias) {{
        int st = lt.cublasLtMatmulDescSetAttribute(pl->desc, {8}, &bias, sizeof bias);
        if (st) return lt_fail(ctx, st, "cublasLtMatmulDescSetAttribute", what);
        pl->bias = bias;
    }}
    float af = (float)q->alpha, bf = (float)q->beta;
    double ad = q->alpha, bd = q->beta;
    const void *alpha = q->scale == {CUDA_DATA_TYPES["f64"]} ? (const void *)&ad : (const void *)&af;
    const void *beta = q->scale == {CUDA_DATA_TYPES["f64"]} ? (const void *)&bd : (const void *)&bf;
    void *c_lay = q->has_c ? pl->lay[2] : pl->lay[3];
    int st = lt.cublasLtMatmul(ctx->lt_handle, pl->desc, alpha, (const void *)(uintptr_t)a, pl->lay[0],
                               (const void *)(uintptr_t)b, pl->lay[1], beta, (const void *)(uintptr_t)c, c_lay,
                               (void *)(uintptr_t)d, pl->lay[3], pl->algo, (void *)(uintptr_t)ctx->lt_workspace,
                               pl->workspace, ctx->stream);
    return st ? lt_fail(ctx, st, "cublasLtMatmul", what) : HLO_OK;
}}

{status_function(p)}

int {p}_api_version(void) {{ return {C_API_VERSION}; }}
const char *{p}_version(void) {{ return {_c_string(f"hlo {spec.hlo_version}, C API {C_API_VERSION}")}; }}
const char *{p}_target(void) {{ return {_c_string(f"cuda {spec.cpu} (PTX {spec.features})")}; }}
size_t {p}_workspace_size(void) {{ return ARENA_BYTES; }}
{signature_functions(p)}

static void release(struct {p}_context *ctx) {{
    if (ctx->cuctx) cu.cuCtxSetCurrent(ctx->cuctx);
    for (int k = 0; k < NMM; k++)
        for (int j = 0; j < 2; j++)
            if (ctx->plans[k][j].ready) mm_release(&ctx->plans[k][j]);
    if (ctx->lt_handle) lt.cublasLtDestroy(ctx->lt_handle);
    if (ctx->lt_workspace) cu.cuMemFree_v2(ctx->lt_workspace);
    if (ctx->arena) cu.cuMemFree_v2(ctx->arena);
    for (int i = 0; i < NCONSTS; i++)
        if (ctx->consts[i]) cu.cuMemFree_v2(ctx->consts[i]);
    if (ctx->module) cu.cuModuleUnload(ctx->module);
    if (ctx->own_stream && ctx->stream) cu.cuStreamDestroy_v2(ctx->stream);
    if (ctx->cuctx) cu.cuDevicePrimaryCtxRelease_v2(ctx->device);
    ctx->magic = 0;
    free(ctx);
}}

const char *{p}_load_error(void) {{ return load_message; }}

int {p}_create(int device_ordinal, void *stream, {p}_context **out) {{
    if (!out) return HLO_ERR_NULL_ARGUMENT;
    *out = NULL;
    pthread_once(&load_once, load_driver);
    if (load_status != HLO_OK) return load_status;
    int count = 0;
    if (cu.cuDeviceGetCount(&count) || count == 0) {{
        snprintf(load_message, sizeof load_message, "{p}: no CUDA device is present");
        return HLO_ERR_NO_GPU;
    }}
    if (device_ordinal < 0 || device_ordinal >= count) {{
        snprintf(load_message, sizeof load_message, "{p}: no CUDA device %d (there are %d)", device_ordinal, count);
        return HLO_ERR_NO_GPU;
    }}
    struct {p}_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return HLO_ERR_OUT_OF_MEMORY;
    ctx->device_ordinal = device_ordinal;
    int st = HLO_OK, major = 0, minor = 0;
    CUresult r;
#define STEP(expr, call, what) do {{ if ((r = (expr))) {{ st = cuda_fail(ctx, r, call, what); goto failed; }} }} while (0)
    STEP(cu.cuDeviceGet(&ctx->device, device_ordinal), "cuDeviceGet", "the device");
    STEP(cu.cuDeviceGetAttribute(&major, {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR}, ctx->device), "cuDeviceGetAttribute", "its architecture");
    STEP(cu.cuDeviceGetAttribute(&minor, {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR}, ctx->device), "cuDeviceGetAttribute", "its architecture");
    int sm = major * 10 + minor;
    if (!({runs_on})) {{
        snprintf(load_message, sizeof load_message, "{p}: the code is for {spec.cpu}, device %d is sm_%d", device_ordinal, sm);
        free(ctx);
        return HLO_ERR_UNSUPPORTED_GPU;
    }}
    STEP(cu.cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->device), "cuDevicePrimaryCtxRetain", "the device's context");
    STEP(cu.cuCtxSetCurrent(ctx->cuctx), "cuCtxSetCurrent", "the device's context");
    if (stream) ctx->stream = stream;
    else {{
        STEP(cu.cuStreamCreate(&ctx->stream, {CU_STREAM_NON_BLOCKING}u), "cuStreamCreate", "the context's stream");
        ctx->own_stream = 1;
    }}
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d", sm);
    STEP(cu.cuModuleLoadData(&ctx->module, code_for(arch)), "cuModuleLoadData", "the program's module");
    for (int k = 0; k < NKERNELS; k++) {{
        STEP(cu.cuModuleGetFunction(&ctx->fn[k], ctx->module, kernel_names[k]), "cuModuleGetFunction", kernel_names[k]);
        if (kernel_shared[k])
            STEP(cu.cuFuncSetAttribute(ctx->fn[k], {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES}, kernel_shared[k]),
                 "cuFuncSetAttribute", kernel_names[k]);
    }}
    if (ARENA_BYTES) STEP(cu.cuMemAlloc_v2(&ctx->arena, ARENA_BYTES), "cuMemAlloc", "the arena");
    for (int i = 0; i < NCONSTS; i++) {{
        STEP(cu.cuMemAlloc_v2(&ctx->consts[i], const_bytes[i] ? const_bytes[i] : 1), "cuMemAlloc", "a constant");
        if (const_bytes[i]) STEP(cu.cuMemcpyHtoD_v2(ctx->consts[i], const_data[i], const_bytes[i]), "cuMemcpyHtoD", "a constant");
    }}
    if (NMM) {{
        pthread_once(&lt_once, load_cublaslt);
        if (lt_status != HLO_OK) {{
            snprintf(ctx->message, sizeof ctx->message, "%s", lt_message);
            st = lt_status;
            goto failed;
        }}
        int s = lt.cublasLtCreate(&ctx->lt_handle);
        if (s) {{ st = lt_fail(ctx, s, "cublasLtCreate", "the context's handle"); goto failed; }}
        STEP(cu.cuMemAlloc_v2(&ctx->lt_workspace, {WORKSPACE_BYTES}u), "cuMemAlloc", "cuBLASLt's workspace");
        static const uint32_t aligned[5] = {{256, 256, 256, 256, 256}};
        for (int k = 0; k < NMM; k++)  /* the heuristic runs here, not in a call */
            if ((st = mm_plan(ctx, k, aligned, &ctx->plans[k][0], "a matrix product"))) goto failed;
    }}
#undef STEP
    ctx->owner = &library_tag;
    atomic_init(&ctx->busy, 0);
    ctx->magic = MAGIC;
    *out = ctx;
    return HLO_OK;
failed:
    snprintf(load_message, sizeof load_message, "%s", ctx->message);
    release(ctx);
    return st;
}}

{context_check(p)}
void {p}_destroy({p}_context *ctx) {{
    int status;
    if (check_context(ctx, &status)) release(ctx);
}}

const char *{p}_error_message(const {p}_context *ctx) {{
    if (!ctx) return "{p}: the context is NULL";
    if (ctx->magic != MAGIC) return "{p}: not a live context of an exported library";
    return ctx->message;
}}

void *{p}_stream(const {p}_context *ctx) {{
    int status;
    return check_context(({p}_context *)ctx, &status) ? ctx->stream : NULL;
}}

int {p}_synchronize({p}_context *ctx) {{
    int status;
    if (!check_context(ctx, &status)) return status;
    CHECK(cu.cuStreamSynchronize(ctx->stream), "cuStreamSynchronize", "the context's stream");
    return HLO_OK;
}}

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}}

static int run_steps(struct {p}_context *ctx, const void *const *inputs, void *const *outputs) {{
    (void)inputs; (void)outputs;
{chr(10).join(em.lines)}
    for (int o = 0; o < NOUT; o++)  /* an output that is a donated input's memory */
        if (out_alias[o] >= 0 && outputs[o] != inputs[out_alias[o]])
            CHECK(cu.cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)outputs[o], (CUdeviceptr)(uintptr_t)inputs[out_alias[o]],
                                          out_bytes[o], ctx->stream), "cuMemcpyDtoDAsync", "a donated result");
    return HLO_OK;
}}

{run_checks(p)}
int {p}_run({p}_context *ctx, const void *const *inputs, void *const *outputs) {{
    int status;
    if (!check_context(ctx, &status)) return status;
    ctx->message[0] = 0;
    if ((status = check_buffers_and_hold(ctx, inputs, outputs)) != HLO_OK) return status;
    CUresult r = cu.cuCtxSetCurrent(ctx->cuctx);
    status = r ? cuda_fail(ctx, r, "cuCtxSetCurrent", "the device's context") : run_steps(ctx, inputs, outputs);
    atomic_store_explicit(&ctx->busy, 0, memory_order_release);
    return status;
}}

int {p}_run_counted({p}_context *ctx, size_t num_inputs, const void *const *inputs,
                    size_t num_outputs, void *const *outputs) {{
    int status;
    if (!check_context(ctx, &status)) return status;
    if (num_inputs != NIN || num_outputs != NOUT)
        return fail(ctx, HLO_ERR_ARGUMENT_COUNT, "{p}_run_counted: expected %d input(s) and %d output(s), got %zu and %zu",
                    NIN, NOUT, num_inputs, num_outputs);
    return {p}_run(ctx, inputs, outputs);
}}
"""


def header(spec: LibrarySpec, products: int = 0) -> str:
    p, P = spec.name, spec.name.upper()
    lt_text = (f"\n * Its {products} matrix product(s) run on cuBLASLt, opened the same way (libcublasLt.so.13, else\n"
               " * .so.12, where the dynamic loader finds it) at the first context: missing, HLO_ERR_NO_GPU.\n"
               " * A context holds a cuBLASLt handle, a 32 MiB workspace and each product's plan.") \
        if products else ""
    ins = "\n".join(_arg_line(i, a, i in spec.written) for i, a in enumerate(spec.inputs)) or " *   (none)"
    outs = "\n".join(_arg_line(o, a, alias=spec.aliases.get(o, -1)) for o, a in enumerate(spec.outputs)) \
        or " *   (none)"
    return f"""/* {p}.h: the C API of lib{p}.so, exported by hlo {spec.hlo_version} from {_comment(spec.function)}.
 *
 * Target: cuda {spec.cpu} (PTX {spec.features}; a cubin where the export had one). The library
 * opens the NVIDIA driver (libcuda.so.1) with dlopen when the first context is made: it loads
 * on a machine without a GPU, where {p}_create returns HLO_ERR_NO_GPU and {p}_load_error()
 * says why. It needs no CUDA toolkit. The library is native code: load only a library you
 * built or trust, as you would any other shared library.{lt_text}
 *
 * Inputs (inputs[i]: DEVICE pointers on the context's device, row-major / C order, aligned to
 * the element size; read only unless marked DONATED):
{ins}
 * Outputs (outputs[i]: device pointers the caller owns; no buffer may overlap another):
{outs}
 *
 * Use:
 *     {p}_context *ctx;
 *     if ({p}_create(0, NULL, &ctx) != HLO_OK) ...   (device 0, a stream of the library's own)
 *     int status = {p}_run(ctx, inputs, outputs);    (queued on the stream: asynchronous)
 *     {p}_synchronize(ctx);                          (or wait on your own stream)
 *     {p}_destroy(ctx);
 *
 * A call queues its kernels on the context's stream and returns; a loop whose trip count is
 * not known before it runs, and an if / case, read their predicate back (the only waits).
 * One context per thread; a context holds the device's primary context (retained), the
 * loaded module, the constants and its arena ({p}_workspace_size() bytes of device memory).
 */
#ifndef HLO_EXPORT_{P}_H
#define HLO_EXPORT_{P}_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

{status_enum()}

#define {P}_NUM_INPUTS {len(spec.inputs)}
#define {P}_NUM_OUTPUTS {len(spec.outputs)}
#define {P}_WORKSPACE_BYTES {spec.arena_size}u

typedef struct {p}_context {p}_context;

/* Make a context on CUDA device device_ordinal whose calls go on stream (a CUstream; NULL: the
   context makes a non-blocking stream of its own). *out is NULL on failure. Returns a status:
   HLO_ERR_NO_GPU without a driver or device, HLO_ERR_UNSUPPORTED_GPU for a device too old
   for the code, HLO_ERR_CUDA / HLO_ERR_OUT_OF_MEMORY where a driver call failed. */
int {p}_create(int device_ordinal, void *stream, {p}_context **out);
/* Why the last {p}_create failed ("" if none did). Never NULL. */
const char *{p}_load_error(void);
/* Free a context (after its calls finished: {p}_synchronize). */
void {p}_destroy({p}_context *ctx);
/* Queue the program: inputs[{P}_NUM_INPUTS], outputs[{P}_NUM_OUTPUTS], device pointers. */
int {p}_run({p}_context *ctx, const void *const *inputs, void *const *outputs);
int {p}_run_counted({p}_context *ctx, size_t num_inputs, const void *const *inputs,
                    size_t num_outputs, void *const *outputs);
/* Wait for the context's stream; the stream itself (a CUstream). */
int {p}_synchronize({p}_context *ctx);
void *{p}_stream(const {p}_context *ctx);

const char *{p}_error_message(const {p}_context *ctx);
const char *{p}_status_string(int status);
size_t {p}_workspace_size(void);
const char *{p}_version(void);
int {p}_api_version(void);
/* "cuda <arch> (PTX <version>)" */
const char *{p}_target(void);

{signature_queries(p)}

#ifdef __cplusplus
}}
#endif
#endif
"""


def export(prog, folder: str, name: str, arg_names=None, function: str = "", hlo_version: str = "") -> Exported:
    """Write ``lib<name>.so`` and ``<name>.h`` for ``prog`` (a ``CudaProgram``) into ``folder``."""
    check_exportable(prog)
    spec = spec_of(prog, name, arg_names, function, hlo_version)
    src = source(spec, prog)
    products = sum(isinstance(st, LibraryCall) for st in walk_steps(prog.steps))
    cc = find_cc()
    os.makedirs(folder, exist_ok=True)
    lib_path = os.path.join(folder, f"lib{name}.so")
    h_path = os.path.join(folder, f"{name}.h")
    with tempfile.TemporaryDirectory(prefix="hlo-export-") as tmp:
        with open(os.path.join(tmp, f"{name}.h"), "w") as f:
            f.write(header(spec, products))
        with open(os.path.join(tmp, "runtime.c"), "w") as f:
            f.write(src)
        with open(os.path.join(tmp, "exports.map"), "w") as f:
            f.write(f"{{ global: {name}_*; local: *; }};\n")
        out = os.path.join(tmp, f"lib{name}.so")
        cmd = cc.split() + ["-shared", "-fPIC", "-O2", "-std=c11", "-o", out, "runtime.c",
                            "-Wl,--version-script=exports.map", "-Wl,-Bsymbolic", "-Wl,-z,defs",
                            "-Wl,-z,noexecstack", "-ldl", "-lpthread", "-lm"]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            raise ExportError(f"building lib{name}.so failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
        for s, dst in ((os.path.join(tmp, f"{name}.h"), h_path), (out, lib_path)):
            part = dst + ".part"
            shutil.copyfile(s, part)
            os.replace(part, dst)
    return Exported(library=lib_path, header=h_path, name=name)
