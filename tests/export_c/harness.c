/* The error paths of an exported library, through dlopen (one build serves every library).
 *
 *     harness LIB_A NAME_A LIB_B NAME_B INPUTS_A OUTPUTS_A THREADS [CALLS]
 *
 * Loads B, then A, both RTLD_GLOBAL (so a symbol either exports beyond NAME_* would clash),
 * prints one line "check: status" per error case (tests/export_c/test_export_c.py compares
 * them with the documented codes), then runs A on INPUTS_A with THREADS threads CALLS times
 * (default 1) and writes the last outputs to OUTPUTS_A, and runs two threads, each on a
 * context of its own, with the same inputs. Exit 0 when everything ran, 1 on a setup error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(int, void **);
typedef int (*create_ws_fn)(int, void *, size_t, void **);
typedef void (*destroy_fn)(void *);
typedef int (*run_fn)(void *, const void *const *, void *const *);
typedef int (*run_counted_fn)(void *, size_t, const void *const *, size_t, void *const *);
typedef const char *(*msg_fn)(const void *);
typedef const char *(*status_fn)(int);
typedef int (*count_fn)(void);
typedef size_t (*bytes_fn)(int);
typedef size_t (*ws_fn)(void);
typedef int (*threads_fn)(const void *);

typedef struct {
    create_fn create; create_ws_fn create_ws; destroy_fn destroy; run_fn run;
    run_counted_fn run_counted; msg_fn message; status_fn status_string; count_fn nin, nout;
    bytes_fn in_bytes, out_bytes; ws_fn workspace; threads_fn num_threads;
} lib_t;

static void *sym(void *h, const char *name, const char *fn) {
    char full[256];
    snprintf(full, sizeof full, "%s_%s", name, fn);
    void *p = dlsym(h, full);
    if (!p) { fprintf(stderr, "missing %s\n", full); exit(1); }
    return p;
}

static lib_t load(const char *path, const char *name) {
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) { fprintf(stderr, "dlopen %s: %s\n", path, dlerror()); exit(1); }
    lib_t l;
    l.create = (create_fn)sym(h, name, "create");
    l.create_ws = (create_ws_fn)sym(h, name, "create_with_workspace");
    l.destroy = (destroy_fn)sym(h, name, "destroy");
    l.run = (run_fn)sym(h, name, "run");
    l.run_counted = (run_counted_fn)sym(h, name, "run_counted");
    l.message = (msg_fn)sym(h, name, "error_message");
    l.status_string = (status_fn)sym(h, name, "status_string");
    l.nin = (count_fn)sym(h, name, "num_inputs");
    l.nout = (count_fn)sym(h, name, "num_outputs");
    l.in_bytes = (bytes_fn)sym(h, name, "input_bytes");
    l.out_bytes = (bytes_fn)sym(h, name, "output_bytes");
    l.workspace = (ws_fn)sym(h, name, "workspace_size");
    l.num_threads = (threads_fn)sym(h, name, "num_threads");
    return l;
}

static void *aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n + 64)) exit(1);
    memset(p, 0, n + 64);
    return p;
}

static void report(const char *check, int status, const lib_t *l, const void *ctx) {
    printf("%s: %d", check, status);
    if (ctx) printf(" | %s", l->message(ctx));
    printf("\n");
}

typedef struct { lib_t *l; const void **in; int threads; size_t out_total; int result; } job_t;

static void *thread_main(void *arg) {
    job_t *j = arg;
    void *ctx;
    j->result = j->l->create(j->threads, &ctx);
    int nout = j->l->nout();
    void **out = calloc(nout + 1, sizeof *out);
    for (int o = 0; o < nout; o++) out[o] = aligned(j->l->out_bytes(o));
    for (int r = 0; r < 200 && j->result == 0; r++) j->result = j->l->run(ctx, j->in, out);
    for (int o = 0; o < nout; o++) free(out[o]);
    free(out);
    j->l->destroy(ctx);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: harness LIB_A NAME_A LIB_B NAME_B IN OUT THREADS [CALLS]\n"); return 1; }
    lib_t b = load(argv[3], argv[4]);
    lib_t a = load(argv[1], argv[2]);
    int threads = atoi(argv[7]);
    long calls = argc > 8 ? atol(argv[8]) : 1;
    int nin = a.nin(), nout = a.nout();

    const void **in = calloc(nin + 1, sizeof *in);
    void **out = calloc(nout + 1, sizeof *out);
    FILE *f = fopen(argv[5], "rb");
    if (!f) { perror(argv[5]); return 1; }
    for (int i = 0; i < nin; i++) {
        void *p = aligned(a.in_bytes(i));
        if (fread(p, 1, a.in_bytes(i), f) != a.in_bytes(i)) { fprintf(stderr, "short input\n"); return 1; }
        in[i] = p;
    }
    fclose(f);
    for (int o = 0; o < nout; o++) out[o] = aligned(a.out_bytes(o));

    void *ctx = NULL, *ctx_b = NULL;
    report("create_null_out", a.create(1, NULL), &a, NULL);
    report("create_negative_threads", a.create(-1, &ctx), &a, NULL);
    report("create_too_many_threads", a.create(1 << 20, &ctx), &a, NULL);
    void *raw = aligned(a.workspace() + 64);
    report("create_workspace_misaligned", a.workspace() ? a.create_ws(1, (char *)raw + 1, a.workspace(), &ctx) : 7, &a, NULL);
    report("create_workspace_small", a.workspace() ? a.create_ws(1, raw, a.workspace() - 1, &ctx) : 7, &a, NULL);
    int st = a.create(threads, &ctx);
    report("create", st, &a, NULL);
    if (st) return 1;
    printf("threads: %d\n", a.num_threads(ctx));
    report("run_null_context", a.run(NULL, in, out), &a, NULL);
    report("run_null_inputs", nin ? a.run(ctx, NULL, (void *const *)out) : 1, &a, ctx);
    report("run_null_outputs", a.run(ctx, in, NULL), &a, ctx);
    const void *saved = in[0];
    in[0] = NULL;
    report("run_null_input0", a.in_bytes(0) ? a.run(ctx, in, out) : 1, &a, ctx);
    in[0] = saved;
    void *saved_out = out[0];
    out[0] = NULL;
    report("run_null_output0", a.run(ctx, in, out), &a, ctx);
    out[0] = (char *)saved_out + 1;
    report("run_misaligned_output0", a.run(ctx, in, out), &a, ctx);
    out[0] = (void *)in[0];
    report("run_output_overlaps_input", a.run(ctx, in, out), &a, ctx);
    out[0] = saved_out;
    report("run_counted_inputs", a.run_counted(ctx, nin + 1, in, nout, out), &a, ctx);
    report("run_counted_outputs", a.run_counted(ctx, nin, in, nout - 1, out), &a, ctx);
    report("run_counted_ok", a.run_counted(ctx, nin, in, nout, out), &a, ctx);
    st = b.create(1, &ctx_b);
    if (st) return 1;
    report("run_foreign_context", b.run(ctx, in, out), &b, ctx);
    report("run_counted_foreign_context", b.run_counted(ctx, nin, in, nout, out), &b, ctx);
    b.destroy(ctx);  /* a foreign context: nothing happens */
    report("threads_foreign_context", b.num_threads(ctx), &a, NULL);
    void *junk = aligned(1024);
    report("run_not_a_context", a.run(junk, in, out), &a, NULL);
    report("status_unknown_is_text", a.status_string(12345) != NULL && *a.status_string(12345), &a, NULL);
    for (int s = 0; s <= 9; s++) printf("status_string %d: %s\n", s, a.status_string(s));

    void *ctx_ws = NULL;
    if (a.workspace()) {
        report("create_caller_workspace", a.create_ws(threads, raw, a.workspace(), &ctx_ws), &a, NULL);
        report("run_caller_workspace", a.run(ctx_ws, in, out), &a, ctx_ws);
        a.destroy(ctx_ws);
    }
    for (long r = 0; r < calls; r++)
        if ((st = a.run(ctx, in, out))) { report("run", st, &a, ctx); return 1; }
    report("run", 0, &a, ctx);
    FILE *g = fopen(argv[6], "wb");
    for (int o = 0; o < nout; o++) fwrite(out[o], 1, a.out_bytes(o), g);
    fclose(g);

    /* two threads, a context each */
    pthread_t t[2];
    job_t jobs[2] = {{&a, in, threads, 0, -1}, {&a, in, threads, 0, -1}};
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, thread_main, &jobs[k]);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    report("two_threads", jobs[0].result | jobs[1].result, &a, NULL);

    a.destroy(ctx);
    b.destroy(ctx_b);
    for (int i = 0; i < nin; i++) free((void *)in[i]);
    for (int o = 0; o < nout; o++) free(out[o]);
    free(in); free(out); free(raw); free(junk);
    return 0;
}
