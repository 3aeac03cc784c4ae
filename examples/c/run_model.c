/* run_model: load an hlo-exported library, run it on inputs from a file, print the outputs.
 *
 * Built against one exported library by the Makefile (MODEL=layer: liblayer.so, layer.h):
 *     make -C examples/c EXPORT_DIR=$PWD/build MODEL=layer      ->  build/run_layer
 *     build/run_layer inputs.bin                                  (print the outputs)
 *     build/run_layer inputs.bin --output out.bin --threads 2 --repeat 1000
 *
 * inputs.bin holds the inputs one after the other, in argument order, each as its raw bytes
 * (row-major, little-endian: what numpy's a.tobytes() writes), exactly the sizes layer.h lists;
 * examples/c/write_inputs.py makes one. --output writes the outputs the same way. --repeat N
 * runs N more calls and prints the time per call and how the process's anonymous resident
 * memory (heap and stacks: what a leak would grow) changed.
 *
 * The functions are <MODEL>_create, <MODEL>_run, ...: F(run) below spells layer_run for
 * MODEL=layer, so this one file builds against any exported library.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(fn) CAT(MODEL, CAT(_, fn))
typedef F(context) context;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static long rss_kib(void) {  /* anonymous resident memory (heap, stacks; Linux), 0 where unknown */
    char line[256];
    long kib = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static float half_to_float(unsigned h, int bf16) {
    if (bf16) {
        unsigned u = h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? m / 1024.0f / 16384.0f : e == 31 ? (m ? 0.0f / 0.0f : 1.0f / 0.0f)
                                                        : (1 + m / 1024.0f) * (float)(1 << e) / 32768.0f;
    return s ? -v : v;
}

/* element i of a buffer of dtype as a double (1 if the dtype is printable so, else 0) */
static int element(const char *dtype, const void *p, size_t i, double *v) {
    if (!strcmp(dtype, "f32")) *v = ((const float *)p)[i];
    else if (!strcmp(dtype, "f64")) *v = ((const double *)p)[i];
    else if (!strcmp(dtype, "s32")) *v = ((const int *)p)[i];
    else if (!strcmp(dtype, "bf16") || !strcmp(dtype, "f16"))
        *v = half_to_float(((const unsigned short *)p)[i], dtype[0] == 'b');
    else if (!strcmp(dtype, "pred") || !strcmp(dtype, "u8")) *v = ((const unsigned char *)p)[i];
    else return 0;
    return 1;
}

static void print_output(int o, const void *p) {
    const char *dtype = F(output_dtype)(o);
    const int64_t *shape = F(output_shape)(o);
    size_t n = 1;
    printf("output %d (%s): %s[", o, F(output_name)(o), dtype);
    for (int d = 0; d < F(output_rank)(o); d++) {
        printf("%s%lld", d ? "," : "", (long long)shape[d]);
        n *= (size_t)shape[d];
    }
    printf("]");
    double v, sum = 0;
    if (!element(dtype, p, 0, &v) || n == 0) {
        printf(" (%zu bytes)\n", F(output_bytes)(o));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        element(dtype, p, i, &v);
        sum += v;
    }
    printf(" sum %.6g:", sum);
    for (size_t i = 0; i < n && i < 6; i++) {
        element(dtype, p, i, &v);
        printf(" %.6g", v);
    }
    printf("%s\n", n > 6 ? " ..." : "");
}

static void *aligned(size_t bytes) {  /* 64-byte aligned, at least one byte */
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

int main(int argc, char **argv) {
    double t0 = now();
    const char *in_path = NULL, *out_path = NULL;
    int threads = 0, quiet = 0;
    long repeat = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--output") && a + 1 < argc) out_path = argv[++a];
        else if (!strcmp(argv[a], "--repeat") && a + 1 < argc) repeat = atol(argv[++a]);
        else if (!strcmp(argv[a], "--quiet")) quiet = 1;
        else if (argv[a][0] != '-' && !in_path) in_path = argv[a];
        else {
            fprintf(stderr, "usage: %s INPUTS.bin [--threads N] [--output OUT.bin] [--repeat N] [--quiet]\n", argv[0]);
            return 2;
        }
    }
    if (!in_path) {
        fprintf(stderr, "usage: %s INPUTS.bin [--threads N] [--output OUT.bin] [--repeat N] [--quiet]\n", argv[0]);
        return 2;
    }
    int nin = F(num_inputs)(), nout = F(num_outputs)();

    /* the inputs, read from the file into aligned buffers */
    FILE *f = fopen(in_path, "rb");
    if (!f) {
        perror(in_path);
        return 1;
    }
    const void **inputs = calloc(nin ? nin : 1, sizeof *inputs);
    void **outputs = calloc(nout ? nout : 1, sizeof *outputs);
    size_t total = 0;
    for (int i = 0; i < nin; i++) {
        size_t bytes = F(input_bytes)(i);
        void *p = aligned(bytes);
        if (!p || fread(p, 1, bytes, f) != bytes) {
            fprintf(stderr, "%s: too short: input %d (%s, %s) needs %zu bytes at offset %zu\n",
                    in_path, i, F(input_name)(i), F(input_dtype)(i), bytes, total);
            return 1;
        }
        inputs[i] = p;
        total += bytes;
    }
    if (fgetc(f) != EOF) {
        fprintf(stderr, "%s: longer than the %zu bytes of the %d inputs\n", in_path, total, nin);
        return 1;
    }
    fclose(f);
    for (int o = 0; o < nout; o++)
        if (!(outputs[o] = aligned(F(output_bytes)(o)))) return 1;

    context *ctx;
    int status = F(create)(threads, &ctx);
    if (status != HLO_OK) {
        fprintf(stderr, "create: %s\n", F(status_string)(status));
        return 1;
    }
    status = F(run)(ctx, inputs, outputs);
    double t1 = now();
    if (status != HLO_OK) {
        fprintf(stderr, "run: %s\n", F(error_message)(ctx));
        return 1;
    }
    if (!quiet) {
        printf("%s on %s, %d thread(s)\n", F(version)(), F(target)(), F(num_threads)(ctx));
        for (int o = 0; o < nout; o++) print_output(o, outputs[o]);
        printf("start to first result: %.3f ms\n", (t1 - t0) * 1e3);
    }
    if (repeat > 0) {
        long rss0 = rss_kib();
        double t2 = now();
        for (long r = 0; r < repeat; r++)
            if ((status = F(run)(ctx, inputs, outputs)) != HLO_OK) {
                fprintf(stderr, "run %ld: %s\n", r, F(error_message)(ctx));
                return 1;
            }
        double t3 = now();
        printf("%ld calls: %.3f us per call, anonymous memory %+ld KiB\n", repeat,
               (t3 - t2) / repeat * 1e6, rss_kib() - rss0);
    }
    if (out_path) {
        FILE *g = fopen(out_path, "wb");
        for (int o = 0; g && o < nout; o++)
            if (fwrite(outputs[o], 1, F(output_bytes)(o), g) != F(output_bytes)(o)) {
                fclose(g);
                g = NULL;
            }
        if (!g || fclose(g) != 0) {
            perror(out_path);
            return 1;
        }
    }
    F(destroy)(ctx);
    for (int i = 0; i < nin; i++) free((void *)inputs[i]);
    for (int o = 0; o < nout; o++) free(outputs[o]);
    free(inputs);
    free(outputs);
    return 0;
}
