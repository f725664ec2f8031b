// bench/conv_grad_weight_bench.c — times dlcc's compiled ConvGradWeight (the weight gradient of
// a 2-D convolution, in every CNN training step).
//
// usage: conv_grad_weight_bench ARTIFACT.so N C H W M KH KW PAD [THREADS]
// The artifact is a compiled `dw = ConvGradWeight <kernel_shape = [KH, KW], pads = [PAD x4]>
// (dy, x)` with dy: float[N, M, H, W] and x: float[N, C, H, W] (stride 1, "same" size; bench/
// conv_grad_weight.sh writes and compiles it). Runs dlrt_session_infer on THREADS threads
// (default 1: the calling thread alone; libdlrt's own default would be every CPU), 2 warm-up
// runs, then best of 5 wall-clock (CLOCK_MONOTONIC) runs. The
// result is checked against a naive double-precision loop so a fast wrong kernel cannot pass.
#include "dlrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *what, dlrt_status st) {
    fprintf(stderr, "conv_grad_weight_bench: %s: %s (%s)\n", what, dlrt_status_str(st),
            dlrt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 10 && argc != 11) {
        fprintf(stderr,
                "usage: conv_grad_weight_bench ARTIFACT.so N C H W M KH KW PAD [THREADS]\n");
        return 2;
    }
    int threads = argc == 11 ? atoi(argv[10]) : 1;
    long N = atol(argv[2]), C = atol(argv[3]), H = atol(argv[4]), W = atol(argv[5]);
    long M = atol(argv[6]), KH = atol(argv[7]), KW = atol(argv[8]), P = atol(argv[9]);
    size_t nx = (size_t)(N * C * H * W), ny = (size_t)(N * M * H * W),
           nw = (size_t)(M * C * KH * KW);
    float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy);
    double *ref = calloc(nw, sizeof *ref);
    if (!x || !dy || !ref) {
        return 1;
    }
    unsigned s = 12345;
    for (size_t i = 0; i < nx; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    for (size_t i = 0; i < ny; i++) {
        s = s * 1103515245u + 12345u;
        dy[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    dlrt_model *m;
    dlrt_session *se;
    dlrt_status st;
    if ((st = dlrt_model_load_file(argv[1], &m)) != DLRT_OK) {
        return die("load", st);
    }
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = threads;
    if ((st = dlrt_session_create_ex(m, &o, &se)) != DLRT_OK) {
        return die("session", st);
    }
    if ((st = dlrt_session_set_input(se, "dy", dy, ny * sizeof *dy)) != DLRT_OK ||
        (st = dlrt_session_set_input(se, "x", x, nx * sizeof *x)) != DLRT_OK) {
        return die("set_input", st);
    }
    double best = 1e30;
    for (int r = -2; r < 5; r++) {
        double t0 = now();
        if ((st = dlrt_session_infer(se)) != DLRT_OK) {
            return die("infer", st);
        }
        double t = now() - t0;
        if (r >= 0 && t < best) {
            best = t;
        }
    }
    const void *out;
    if ((st = dlrt_session_output(se, "dw", &out, NULL)) != DLRT_OK) {
        return die("output", st);
    }
    // naive reference (stride 1, dilation 1, group 1)
    for (long mm = 0; mm < M; mm++) {
        for (long c = 0; c < C; c++) {
            for (long i = 0; i < KH; i++) {
                for (long j = 0; j < KW; j++) {
                    double acc = 0;
                    for (long n = 0; n < N; n++) {
                        for (long oh = 0; oh < H; oh++) {
                            long ih = oh - P + i;
                            if (ih < 0 || ih >= H) {
                                continue;
                            }
                            for (long ow = 0; ow < W; ow++) {
                                long iw = ow - P + j;
                                if (iw >= 0 && iw < W) {
                                    acc += (double)dy[((n * M + mm) * H + oh) * W + ow] *
                                           (double)x[((n * C + c) * H + ih) * W + iw];
                                }
                            }
                        }
                    }
                    ref[((mm * C + c) * KH + i) * KW + j] = acc;
                }
            }
        }
    }
    const float *got = out;
    double max_err = 0;
    for (size_t i = 0; i < nw; i++) {
        double e = fabs((double)got[i] - ref[i]) / (1.0 + fabs(ref[i]));
        max_err = e > max_err ? e : max_err;
    }
    double gflop =
        2.0 * (double)N * (double)M * (double)C * (double)H * (double)W * (double)(KH * KW) * 1e-9;
    printf("dy [%ld, %ld, %ld, %ld], x [%ld, %ld, %ld, %ld], %ldx%ld pads %ld: best of 5 %.3f ms "
           "(%.1f GFLOP/s, max rel err %.1e)\n",
           N, M, H, W, N, C, H, W, KH, KW, P, best * 1e3, gflop / best, max_err);
    dlrt_session_destroy(se);
    dlrt_model_release(m);
    free(x);
    free(dy);
    free(ref);
    return max_err < 1e-3 ? 0 : 1;
}
