"""The C half of an exported library: the context (thread count, workspace), the checks of a
call (counts, null pointers, alignment, overlapping buffers, a context of another library or in
use by another thread), the call into the program's native entry ``hlo_run``, the outputs that
are donated inputs' memory, the CPU check and the version / target / signature queries.

It is C text made per library (``source(spec)``), compiled by the system's ``cc`` at export time
and linked with the LLVM objects (the program, the GEMM bodies, the worker pool). Everything the
native entry needs is here or in those objects: no Python, numpy or llvmlite at run time.

Symbols: the library exports only ``<name>_*`` (a version script hides the rest), so two exported
libraries in one process never resolve each other's ``hlo_run`` or worker pool.
"""
from __future__ import annotations

from typing import List, Sequence

from .spec import LibrarySpec

C_API_VERSION = 1
MAGIC = 0x31305854434F4C48  # "HLOCTX01" little-endian: the first 8 bytes of every context
MAX_THREADS = 1024

# x86-64 features the CPU check knows, in the order it names a missing one (vector ISA
# first, as ``CpuTarget.check_loadable`` does): (LLVM name, cpuid leaf, subleaf, register,
# bit, OS state needed: "avx" = XMM+YMM, "avx512" = XMM+YMM+opmask+ZMM).
X86_FEATURES = (
    ("avx512f", 7, 0, "ebx", 16, "avx512"),
    ("avx512bw", 7, 0, "ebx", 30, "avx512"),
    ("avx512dq", 7, 0, "ebx", 17, "avx512"),
    ("avx512vl", 7, 0, "ebx", 31, "avx512"),
    ("avx512cd", 7, 0, "ebx", 28, "avx512"),
    ("avx512ifma", 7, 0, "ebx", 21, "avx512"),
    ("avx512vbmi", 7, 0, "ecx", 1, "avx512"),
    ("avx512vbmi2", 7, 0, "ecx", 6, "avx512"),
    ("avx512vnni", 7, 0, "ecx", 11, "avx512"),
    ("avx512bitalg", 7, 0, "ecx", 12, "avx512"),
    ("avx512vpopcntdq", 7, 0, "ecx", 14, "avx512"),
    ("avx512fp16", 7, 0, "edx", 23, "avx512"),
    ("avx512bf16", 7, 1, "eax", 5, "avx512"),
    ("avx2", 7, 0, "ebx", 5, "avx"),
    ("avx", 1, 0, "ecx", 28, "avx"),
    ("fma", 1, 0, "ecx", 12, "avx"),
    ("f16c", 1, 0, "ecx", 29, "avx"),
    ("bmi", 7, 0, "ebx", 3, ""),
    ("bmi2", 7, 0, "ebx", 8, ""),
    ("popcnt", 1, 0, "ecx", 23, ""),
    ("sse4.2", 1, 0, "ecx", 20, ""),
    ("sse4.1", 1, 0, "ecx", 19, ""),
    ("ssse3", 1, 0, "ecx", 9, ""),
    ("sse3", 1, 0, "ecx", 0, ""),
)


def _c_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("".join(f"\\{b:03o}" for b in ch.encode("utf-8")))
    return '"' + "".join(out) + '"'


def _array(ctype: str, name: str, values: Sequence[str]) -> str:
    vals = list(values) or ["0"]  # C has no empty arrays
    return f"static const {ctype} {name}[{len(vals)}] = {{{', '.join(vals)}}};"


def _cpu_check(features: List[str]) -> str:
    """C for ``static int cpu_missing(void)``: the index into ``feature_names`` of the first
    feature the code needs that this CPU (or its OS) lacks, or -1."""
    wanted = [f for f in X86_FEATURES if f[0] in features]
    lines = [_array("char *const", "feature_names", [_c_string(f[0].upper()) for f in wanted]),
             "static int cpu_missing(void) {",
             "#if defined(__x86_64__)",
             "    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0, a7 = 0, b7 = 0, c7 = 0, d7 = 0;",
             "    unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;",
             "    unsigned max = __get_cpuid_max(0, 0);",
             "    if (max >= 1) __cpuid_count(1, 0, a1, b1, c1, d1);",
             "    if (max >= 7) { __cpuid_count(7, 0, a7, b7, c7, d7); __cpuid_count(7, 1, a71, b71, c71, d71); }",
             "    unsigned long long xcr0 = 0;",
             "    if (c1 & (1u << 27)) { unsigned lo, hi; __asm__ volatile(\"xgetbv\" : \"=a\"(lo), \"=d\"(hi) : \"c\"(0));"
             " xcr0 = ((unsigned long long)hi << 32) | lo; }",
             "    int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6;",
             "    (void)os_avx; (void)os_avx512; (void)a1; (void)b1; (void)d1; (void)a7; (void)b71; (void)c71; (void)d71;"]
    for k, (_, leaf, sub, reg, bit, state) in enumerate(wanted):
        var = f"{reg[1]}{leaf}{'1' if sub else ''}"
        cond = f"({var} & (1u << {bit}))"
        if state:
            cond += f" && os_{state}"
        lines.append(f"    if (!({cond})) return {k};")
    lines += ["#endif", "    return -1;", "}"]
    return "\n".join(lines)


# what ``<name>_status_string`` says, per status code (the header's enum, ``header.STATUS``)
STATUS_TEXT = (
    ("HLO_OK", "ok"),
    ("HLO_ERR_NULL_ARGUMENT", "a required pointer is NULL"),
    ("HLO_ERR_ARGUMENT_COUNT", "wrong number of input or output buffers"),
    ("HLO_ERR_FOREIGN_CONTEXT", "the context was not made by this library (or was destroyed)"),
    ("HLO_ERR_CONTEXT_BUSY", "the context is in use by another call (one context per thread)"),
    ("HLO_ERR_OUT_OF_MEMORY", "out of memory"),
    ("HLO_ERR_UNSUPPORTED_CPU", "this CPU lacks an instruction set the library was compiled for"),
    ("HLO_ERR_INVALID_ARGUMENT", "invalid argument"),
    ("HLO_ERR_MISALIGNED", "a buffer is not aligned to its element type"),
    ("HLO_ERR_OVERLAP", "an output buffer overlaps another buffer"),
    ("HLO_ERR_NO_GPU", "no NVIDIA driver or no such CUDA device"),
    ("HLO_ERR_CUDA", "a CUDA driver call failed"),
    ("HLO_ERR_UNSUPPORTED_GPU", "the GPU cannot run this code (its architecture)"),
)


def status_function(p: str) -> str:
    """C for ``const char *<p>_status_string(int status)``."""
    cases = "\n".join(f"    case {n}: return {_c_string(t)};" for n, t in STATUS_TEXT)
    return (f"const char *{p}_status_string(int status) {{\n    switch (status) {{\n{cases}\n"
            f"    default: return \"unknown status\";\n    }}\n}}")


def signature_tables(spec: LibrarySpec) -> str:
    """C tables of the signature (sizes, alignment, names, dtypes, shapes, aliases)."""
    nin, nout = len(spec.inputs), len(spec.outputs)
    dims_decls = []
    for kind, args in (("in", spec.inputs), ("out", spec.outputs)):
        for i, a in enumerate(args):
            dims_decls.append(_array("int64_t", f"{kind}_dims{i}", [str(d) for d in a.shape]))
    return "\n".join([
        _array("size_t", "in_bytes", [f"{a.nbytes}u" for a in spec.inputs]),
        _array("size_t", "in_align", [str(a.align) for a in spec.inputs]),
        _array("char *const", "in_names", [_c_string(a.name) for a in spec.inputs]),
        _array("char *const", "in_dtypes", [_c_string(a.dtype) for a in spec.inputs]),
        _array("int", "in_rank", [str(len(a.shape)) for a in spec.inputs]),
        _array("size_t", "out_bytes", [f"{a.nbytes}u" for a in spec.outputs]),
        _array("size_t", "out_align", [str(a.align) for a in spec.outputs]),
        _array("char *const", "out_names", [_c_string(a.name) for a in spec.outputs]),
        _array("char *const", "out_dtypes", [_c_string(a.dtype) for a in spec.outputs]),
        _array("int", "out_rank", [str(len(a.shape)) for a in spec.outputs]),
        # per output, the donated input whose memory the program writes it into (-1: none)
        _array("int", "out_alias", [str(spec.aliases.get(o, -1)) for o in range(nout)]),
        *dims_decls,
        _array("int64_t *const", "in_dims", [f"in_dims{i}" for i in range(nin)]),
        _array("int64_t *const", "out_dims", [f"out_dims{i}" for i in range(nout)]),
    ])


def signature_functions(p: str) -> str:
    """C of the signature's query functions (over ``signature_tables``)."""
    return f"""int {p}_num_inputs(void) {{ return NIN; }}
int {p}_num_outputs(void) {{ return NOUT; }}
const char *{p}_input_name(int i) {{ return i >= 0 && i < NIN ? in_names[i] : NULL; }}
const char *{p}_input_dtype(int i) {{ return i >= 0 && i < NIN ? in_dtypes[i] : NULL; }}
int {p}_input_rank(int i) {{ return i >= 0 && i < NIN ? in_rank[i] : -1; }}
const int64_t *{p}_input_shape(int i) {{ return i >= 0 && i < NIN ? in_dims[i] : NULL; }}
size_t {p}_input_bytes(int i) {{ return i >= 0 && i < NIN ? in_bytes[i] : 0; }}
const char *{p}_output_name(int i) {{ return i >= 0 && i < NOUT ? out_names[i] : NULL; }}
const char *{p}_output_dtype(int i) {{ return i >= 0 && i < NOUT ? out_dtypes[i] : NULL; }}
int {p}_output_rank(int i) {{ return i >= 0 && i < NOUT ? out_rank[i] : -1; }}
const int64_t *{p}_output_shape(int i) {{ return i >= 0 && i < NOUT ? out_dims[i] : NULL; }}
size_t {p}_output_bytes(int i) {{ return i >= 0 && i < NOUT ? out_bytes[i] : 0; }}"""


def context_check(p: str) -> str:
    """The C function both targets' entry points begin with: 1 if ``ctx`` is a live context of
    this library (its magic, and this library's tag as owner), else 0 with the status set and,
    where the context is another library's, the message."""
    return f"""/* 1 if ctx is a live context of this library; else fills the message where it can. */
static int check_context(struct {p}_context *ctx, int *status) {{
    if (!ctx) {{ *status = HLO_ERR_NULL_ARGUMENT; return 0; }}
    if (ctx->magic != MAGIC) {{ *status = HLO_ERR_FOREIGN_CONTEXT; return 0; }}
    if (ctx->owner != &library_tag) {{
        *status = fail(ctx, HLO_ERR_FOREIGN_CONTEXT,
                       "{p}: the context was made by another exported library; make one with {p}_create");
        return 0;
    }}
    return 1;
}}
"""


def run_checks(p: str) -> str:
    """The C function both targets' ``<p>_run`` begin with: the buffers' pointers (NULL,
    alignment, overlaps other than a donated input's own result) against the signature's
    tables, then the context marked busy (one call at a time on a context); a status, or
    HLO_OK with the context held."""
    return f"""static int check_buffers_and_hold({p}_context *ctx, const void *const *inputs, void *const *outputs) {{
    if ((NIN && !inputs) || (NOUT && !outputs))
        return fail(ctx, HLO_ERR_NULL_ARGUMENT, "{p}_run: the %s array is NULL", !inputs && NIN ? "inputs" : "outputs");
    for (int i = 0; i < NIN; i++) {{
        if (!in_bytes[i]) continue;
        if (!inputs[i])
            return fail(ctx, HLO_ERR_NULL_ARGUMENT, "{p}_run: input %d (%s, %s) is NULL", i, in_names[i], in_dtypes[i]);
        if ((uintptr_t)inputs[i] % in_align[i])
            return fail(ctx, HLO_ERR_MISALIGNED, "{p}_run: input %d (%s) is not aligned to %zu bytes", i, in_names[i], in_align[i]);
    }}
    for (int o = 0; o < NOUT; o++) {{
        if (!out_bytes[o]) continue;
        if (!outputs[o])
            return fail(ctx, HLO_ERR_NULL_ARGUMENT, "{p}_run: output %d (%s, %s) is NULL", o, out_names[o], out_dtypes[o]);
        if ((uintptr_t)outputs[o] % out_align[o])
            return fail(ctx, HLO_ERR_MISALIGNED, "{p}_run: output %d is not aligned to %zu bytes", o, out_align[o]);
        for (int i = 0; i < NIN; i++)
            if (overlaps(outputs[o], out_bytes[o], inputs[i], in_bytes[i]) && !(out_alias[o] == i && outputs[o] == inputs[i]))
                return fail(ctx, HLO_ERR_OVERLAP, "{p}_run: output %d overlaps input %d (%s)", o, i, in_names[i]);
        for (int q = 0; q < o; q++)
            if (overlaps(outputs[o], out_bytes[o], outputs[q], out_bytes[q]))
                return fail(ctx, HLO_ERR_OVERLAP, "{p}_run: outputs %d and %d overlap", q, o);
    }}
    if (atomic_exchange_explicit(&ctx->busy, 1, memory_order_acquire))
        return fail(ctx, HLO_ERR_CONTEXT_BUSY, "{p}_run: the context is in use by another thread's call (make one context per thread)");
    return HLO_OK;
}}
"""


def source(spec: LibrarySpec) -> str:
    """The C source of the library's runtime for ``spec``."""
    p = spec.name
    nin, nout = len(spec.inputs), len(spec.outputs)
    feats = [f[1:] for f in spec.features.split(",") if f.startswith("+")]
    tables = signature_tables(spec)
    pool = spec.uses_pool
    pool_decls = ("extern int64_t hlo_pool_ptr;\n"
                  "extern int32_t hlo_pool_parallel_for(void *, void *, int64_t, int64_t);\n"
                  "extern void hlo_pool_after_fork(void);\n") if pool else ""
    pool_init = ("    hlo_pool_ptr = (int64_t)(intptr_t)&hlo_pool_parallel_for;\n"
                 "    pthread_atfork(NULL, NULL, hlo_pool_after_fork);\n") if pool else ""
    return f"""/* The runtime of lib{p}.so, generated by hlo export-c (hlo {spec.hlo_version}).
   The program itself (its kernels and the call sequence, hlo_run) is LLVM object code linked
   beside this file, with the GEMM bodies and the worker pool. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "{p}.h"

#define NIN {nin}
#define NOUT {nout}
#define MAGIC 0x{MAGIC:016X}ULL
#define MAX_THREADS {MAX_THREADS}
#define WORKSPACE_ALIGN 64
static const size_t WORKSPACE_BYTES = {spec.arena_size}u;  /* a variable: no "always false" warnings */

extern void hlo_run(const void *const *inputs, void *const *outputs, void *arena, int64_t nthreads);
{pool_decls}
{tables}

{_cpu_check(feats)}

/* Its address tells this library's contexts from those of another exported library. */
static const char library_tag = 0;

struct {p}_context {{
    uint64_t magic;         /* MAGIC while alive (same in every exported library) */
    const void *owner;      /* &library_tag of the library that made it */
    int64_t threads;
    void *workspace;
    void *workspace_raw;    /* what free() takes (NULL: the caller's) */
    atomic_int busy;        /* 1 while a call runs */
    char message[512];
}};

__attribute__((constructor)) static void {p}_init_library(void) {{
{pool_init}}}

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

{status_function(p)}

int {p}_api_version(void) {{ return {C_API_VERSION}; }}
const char *{p}_version(void) {{ return {_c_string(f"hlo {spec.hlo_version}, C API {C_API_VERSION}")}; }}
const char *{p}_target(void) {{ return {_c_string(spec.target_text)}; }}
size_t {p}_workspace_size(void) {{ return WORKSPACE_BYTES; }}
{signature_functions(p)}

static int64_t cpus_available(void) {{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}}

int {p}_create_with_workspace(int num_threads, void *workspace, size_t workspace_bytes,
                              {p}_context **out) {{
    if (!out) return HLO_ERR_NULL_ARGUMENT;
    *out = NULL;
    if (num_threads < 0 || num_threads > MAX_THREADS) return HLO_ERR_INVALID_ARGUMENT;
    if (cpu_missing() >= 0) return HLO_ERR_UNSUPPORTED_CPU;
    if (workspace) {{
        if (workspace_bytes < WORKSPACE_BYTES || ((uintptr_t)workspace % WORKSPACE_ALIGN) != 0)
            return HLO_ERR_INVALID_ARGUMENT;
    }}
    struct {p}_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return HLO_ERR_OUT_OF_MEMORY;
    if (!workspace && WORKSPACE_BYTES) {{
        if (posix_memalign(&ctx->workspace_raw, WORKSPACE_ALIGN, WORKSPACE_BYTES) != 0) {{
            free(ctx);
            return HLO_ERR_OUT_OF_MEMORY;
        }}
        workspace = ctx->workspace_raw;
    }}
    ctx->workspace = workspace;
    ctx->threads = num_threads ? num_threads : cpus_available();
    ctx->owner = &library_tag;
    atomic_init(&ctx->busy, 0);
    ctx->magic = MAGIC;
    *out = ctx;
    return HLO_OK;
}}

int {p}_create(int num_threads, {p}_context **out) {{
    return {p}_create_with_workspace(num_threads, NULL, 0, out);
}}

const char *{p}_missing_cpu_feature(void) {{
    int k = cpu_missing();
    return k >= 0 ? feature_names[k] : NULL;
}}

{context_check(p)}
void {p}_destroy({p}_context *ctx) {{
    int status;
    if (!check_context(ctx, &status)) return;
    ctx->magic = 0;
    free(ctx->workspace_raw);
    free(ctx);
}}

int {p}_num_threads(const {p}_context *ctx) {{
    int status;
    return check_context(({p}_context *)ctx, &status) ? (int)ctx->threads : -1;
}}

const char *{p}_error_message(const {p}_context *ctx) {{
    if (!ctx) return "{p}: the context is NULL";
    if (ctx->magic != MAGIC) return "{p}: not a live context of an exported library";
    return ctx->message;
}}

static int overlaps(const void *a, size_t na, const void *b, size_t nb) {{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}}

{run_checks(p)}
int {p}_run({p}_context *ctx, const void *const *inputs, void *const *outputs) {{
    int status;
    if (!check_context(ctx, &status)) return status;
    ctx->message[0] = 0;
    if ((status = check_buffers_and_hold(ctx, inputs, outputs)) != HLO_OK) return status;
    hlo_run(inputs, outputs, ctx->workspace, ctx->threads);
    for (int o = 0; o < NOUT; o++)  /* an output that is a donated input's memory */
        if (out_alias[o] >= 0 && outputs[o] != inputs[out_alias[o]])
            memcpy(outputs[o], inputs[out_alias[o]], out_bytes[o]);
    atomic_store_explicit(&ctx->busy, 0, memory_order_release);
    return HLO_OK;
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
