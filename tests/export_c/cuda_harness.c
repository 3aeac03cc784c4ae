/* Runs an hlo library exported for target cuda, through dlopen (one build serves every library):
 *
 *     cuda_harness LIB NAME INPUTS OUTPUTS
 *
 * Makes a context on device 0; where that fails prints "create: <status> | <load error>" and
 * exits 3 (a machine without a GPU: status 10, HLO_ERR_NO_GPU). Otherwise copies the inputs
 * (raw bytes, in order) to device buffers it allocates through the driver (libcuda.so.1, also
 * by dlopen), runs, synchronizes, checks a few error paths, copies the outputs back and writes
 * them to OUTPUTS. Exit 0 when all of that worked.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long dptr;
static void *sym(void *h, const char *prefix, const char *fn) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, fn);
    void *p = dlsym(h, full);
    if (!p) { fprintf(stderr, "missing %s\n", full); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: cuda_harness LIB NAME INPUTS OUTPUTS\n"); return 1; }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror()); return 1; }
    char p[200];
    snprintf(p, sizeof p, "%s_", argv[2]);
    int (*create)(int, void *, void **) = sym(h, p, "create");
    const char *(*load_error)(void) = sym(h, p, "load_error");
    int (*run)(void *, const void *const *, void *const *) = sym(h, p, "run");
    int (*run_counted)(void *, size_t, const void *const *, size_t, void *const *) = sym(h, p, "run_counted");
    int (*sync)(void *) = sym(h, p, "synchronize");
    void (*destroy)(void *) = sym(h, p, "destroy");
    const char *(*message)(const void *) = sym(h, p, "error_message");
    int (*nin_f)(void) = sym(h, p, "num_inputs");
    int (*nout_f)(void) = sym(h, p, "num_outputs");
    size_t (*in_bytes)(int) = sym(h, p, "input_bytes");
    size_t (*out_bytes)(int) = sym(h, p, "output_bytes");

    printf("create_null_out: %d\n", create(0, NULL, NULL));
    void *ctx = NULL;
    int st = create(0, NULL, &ctx);
    if (st) {
        printf("create: %d | %s\n", st, load_error());
        printf("context_after_failure: %s\n", ctx ? "set" : "NULL");
        return 3;
    }
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*alloc)(dptr *, size_t) = sym(cu, "", "cuMemAlloc_v2");
    int (*htod)(dptr, const void *, size_t) = sym(cu, "", "cuMemcpyHtoD_v2");
    int (*dtoh)(void *, dptr, size_t) = sym(cu, "", "cuMemcpyDtoH_v2");
    int nin = nin_f(), nout = nout_f();
    const void **in = calloc(nin + 1, sizeof *in);
    void **out = calloc(nout + 1, sizeof *out);
    FILE *f = fopen(argv[3], "rb");
    for (int i = 0; i < nin; i++) {
        size_t n = in_bytes(i);
        void *host = malloc(n + 1);
        if (fread(host, 1, n, f) != n) { fprintf(stderr, "short input\n"); return 1; }
        dptr d = 0;
        if (alloc(&d, n ? n : 1) || htod(d, host, n)) { fprintf(stderr, "upload failed\n"); return 1; }
        in[i] = (const void *)(uintptr_t)d;
        free(host);
    }
    fclose(f);
    for (int o = 0; o < nout; o++) {
        dptr d = 0;
        if (alloc(&d, out_bytes(o) ? out_bytes(o) : 1)) return 1;
        out[o] = (void *)(uintptr_t)d;
    }
    printf("run_counted_wrong: %d\n", run_counted(ctx, nin + 1, in, nout, out));
    const void *saved = in[0];
    in[0] = NULL;
    printf("run_null_input0: %d\n", nin && in_bytes(0) ? run(ctx, in, out) : 1);
    in[0] = saved;
    st = run(ctx, in, out);
    if (st || (st = sync(ctx))) { printf("run: %d | %s\n", st, message(ctx)); return 1; }
    printf("run: 0\n");
    FILE *g = fopen(argv[4], "wb");
    for (int o = 0; o < nout; o++) {
        size_t n = out_bytes(o);
        void *host = malloc(n + 1);
        if (dtoh(host, (dptr)(uintptr_t)out[o], n)) return 1;
        fwrite(host, 1, n, g);
        free(host);
    }
    fclose(g);
    destroy(ctx);
    return 0;
}
