"""The header of an exported library, ``<name>.h``: the C API, each argument's and result's
dtype, shape and size, and the status codes (shared by every exported library, so two headers
go in one file)."""
from __future__ import annotations

from .runtime_c import C_API_VERSION, MAX_THREADS
from .spec import ArgSpec, LibrarySpec

# Codes every exported library returns; the header defines them once per translation unit.
STATUS = (
    ("HLO_OK", 0, "success"),
    ("HLO_ERR_NULL_ARGUMENT", 1, "a required pointer is NULL: the context, the inputs or outputs "
     "array, or the buffer of an argument / result of at least one byte"),
    ("HLO_ERR_ARGUMENT_COUNT", 2, "<name>_run_counted: the buffer counts are not the program's"),
    ("HLO_ERR_FOREIGN_CONTEXT", 3, "the context was made by another exported library, or was "
     "destroyed (a destroyed context's memory is freed: do not rely on this code for it)"),
    ("HLO_ERR_CONTEXT_BUSY", 4, "another thread is running a call on this context right now "
     "(use one context per thread); nothing was run"),
    ("HLO_ERR_OUT_OF_MEMORY", 5, "the context or its workspace could not be allocated"),
    ("HLO_ERR_UNSUPPORTED_CPU", 6, "this CPU (or its OS) lacks an instruction set the code was "
     "compiled for (<name>_missing_cpu_feature() names it)"),
    ("HLO_ERR_INVALID_ARGUMENT", 7, "a thread count outside 0..MAX, or a caller's workspace that is "
     "too small or not 64-byte aligned"),
    ("HLO_ERR_MISALIGNED", 8, "a buffer is not aligned to its element type's size"),
    ("HLO_ERR_OVERLAP", 9, "an output buffer overlaps an input or another output (except a "
     "donated input passed as its own result)"),
    ("HLO_ERR_NO_GPU", 10, "CUDA libraries: no NVIDIA driver (libcuda.so.1) or no such device"),
    ("HLO_ERR_CUDA", 11, "CUDA libraries: a driver call failed (the message names it and its error)"),
    ("HLO_ERR_UNSUPPORTED_GPU", 12, "CUDA libraries: the GPU's architecture cannot run the code"),
)


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def _arg_line(i: int, a: ArgSpec, written: bool = False, alias: int = -1) -> str:
    line = f" *   [{i}] {_comment(a.name)}: {a.type_text}, {a.element_text}, {a.nbytes} bytes"
    if written:
        line += "\n *       DONATED: the call overwrites this buffer"
    if alias >= 0:
        line += (f"\n *       is input [{alias}]'s memory: pass inputs[{alias}] here to skip a copy "
                 "(any other buffer gets a copy)")
    return line


def status_enum() -> str:
    """The shared status codes, defined once per translation unit."""
    status = "\n".join(f"    {n} = {v},{' ' * max(1, 28 - len(n) - len(str(v)))}/* {_comment(d)} */"
                       for n, v, d in STATUS)
    return (f"#ifndef HLO_EXPORT_C_API\n#define HLO_EXPORT_C_API {C_API_VERSION}\n"
            f"/* Status codes (every exported library's): */\nenum {{\n{status}\n}};\n#endif")


def signature_queries(p: str) -> str:
    return f"""/* The signature above, for programs that read it at run time (i outside the range: NULL / -1 / 0).
   dtype names are hlo's: f32, f64, f16, bf16, s32, u8, pred, c64, ... */
int {p}_num_inputs(void);
int {p}_num_outputs(void);
const char *{p}_input_name(int i);
const char *{p}_input_dtype(int i);
int {p}_input_rank(int i);
const int64_t *{p}_input_shape(int i);
size_t {p}_input_bytes(int i);
const char *{p}_output_name(int i);
const char *{p}_output_dtype(int i);
int {p}_output_rank(int i);
const int64_t *{p}_output_shape(int i);
size_t {p}_output_bytes(int i);"""


def header(spec: LibrarySpec) -> str:
    p, P = spec.name, spec.name.upper()
    ins = "\n".join(_arg_line(i, a, i in spec.written) for i, a in enumerate(spec.inputs)) or " *   (none)"
    outs = "\n".join(_arg_line(o, a, alias=spec.aliases.get(o, -1)) for o, a in enumerate(spec.outputs)) \
        or " *   (none)"
    sizes = "\n".join([f"#define {P}_INPUT_{i}_BYTES {a.nbytes}u" for i, a in enumerate(spec.inputs)]
                      + [f"#define {P}_OUTPUT_{i}_BYTES {a.nbytes}u" for i, a in enumerate(spec.outputs)])
    return f"""/* {p}.h: the C API of lib{p}.so, exported by hlo {spec.hlo_version} from {_comment(spec.function)}.
 *
 * Target: {_comment(spec.target_text)} (x86-64 code for this CPU's instruction sets;
 * {p}_create refuses a CPU that lacks one). The library is native code: load only a library you
 * built or trust, as you would any other shared library. It needs only libc (and libpthread).
 *
 * Inputs (inputs[i]: row-major / C order, each aligned to its element size; read only unless
 * marked DONATED):
{ins}
 * Outputs (outputs[i]: row-major, caller-owned, written by the call; no buffer may overlap another):
{outs}
 *
 * Use:
 *     {p}_context *ctx;
 *     if ({p}_create(0, &ctx) != HLO_OK) ...         (0 threads: every CPU this process may use)
 *     const void *inputs[{P}_NUM_INPUTS] = {{...}};  void *outputs[{P}_NUM_OUTPUTS] = {{...}};
 *     int status = {p}_run(ctx, inputs, outputs);   (HLO_OK, or a code + {p}_error_message(ctx))
 *     {p}_destroy(ctx);
 *
 * Threads: a context is used by one thread at a time (a concurrent call on the same context
 * returns HLO_ERR_CONTEXT_BUSY); make one context per thread. A context owns its workspace
 * (scratch memory, {p}_workspace_size() bytes) and its thread count. The library keeps one
 * process-wide pool of worker threads, started on the first call that splits work (at most
 * the largest thread count asked for, minus one), shared by its contexts: while one context's
 * call uses it, another context's call runs its parallel loops on its own thread. That pool
 * (reset in a child after fork) and the read-only signature tables are the library's only
 * global state. The library stays loaded once loaded (dlclose does not unmap it: its workers
 * may be waiting).
 *
 * Results: bit for bit those of hlo.jit in Python for the same thread count; a different
 * thread count may change how float sums are split, within float rounding.
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
#define {P}_MAX_THREADS {MAX_THREADS}
{sizes}

typedef struct {p}_context {p}_context;

/* Make a context for num_threads threads (0: as many as CPUs this process may run on,
   sched_getaffinity), with its own workspace. *out is NULL on failure. Returns a status. */
int {p}_create(int num_threads, {p}_context **out);
/* The same on a workspace the caller owns (at least {p}_workspace_size() bytes, 64-byte
   aligned, used by one context only, alive until it is destroyed); NULL: allocate one. */
int {p}_create_with_workspace(int num_threads, void *workspace, size_t workspace_bytes, {p}_context **out);
/* Free a context (NULL or a foreign context: nothing happens). Not while a call runs on it. */
void {p}_destroy({p}_context *ctx);

/* Run the program: inputs[{P}_NUM_INPUTS], outputs[{P}_NUM_OUTPUTS], host pointers the caller
   owns (a buffer of zero bytes may be NULL). Returns HLO_OK or a status; on an error nothing was
   written and {p}_error_message(ctx) says which buffer and why. */
int {p}_run({p}_context *ctx, const void *const *inputs, void *const *outputs);
/* {p}_run, with the caller's buffer counts checked first (HLO_ERR_ARGUMENT_COUNT). */
int {p}_run_counted({p}_context *ctx, size_t num_inputs, const void *const *inputs,
                    size_t num_outputs, void *const *outputs);

/* The last error of this context's calls ("" after a call that succeeded). Never NULL. */
const char *{p}_error_message(const {p}_context *ctx);
/* What a status code means. Never NULL. */
const char *{p}_status_string(int status);
/* The feature this CPU lacks (as in HLO_ERR_UNSUPPORTED_CPU), or NULL when it has them all. */
const char *{p}_missing_cpu_feature(void);
/* The thread count of a context (-1: not a context of this library). */
int {p}_num_threads(const {p}_context *ctx);

/* Bytes of workspace each context holds. */
size_t {p}_workspace_size(void);
/* hlo's version and the C API's ("hlo 0.1.0, C API 1"); the C API version alone. */
const char *{p}_version(void);
int {p}_api_version(void);
/* The target the code was compiled for: "cpu <triple> <cpu name>". */
const char *{p}_target(void);

{signature_queries(p)}

#ifdef __cplusplus
}}
#endif
#endif
"""
