// bench/gemm_bench.c — times dlcc's compiled MatMul against OpenBLAS's cblas_sgemm.
//
// usage: gemm_bench SIZE ARTIFACT.so
// The artifact is a compiled `c = MatMul (a, b)` over float[SIZE, SIZE] inputs (bench/gemm.sh
// writes and compiles it). Both sides run single-threaded on the same random inputs; each is
// warmed up, then timed over several repetitions, and the best repetition counts. Time is the
// calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time, so that other processes
// competing for the cores do not count: both sides run entirely on the calling thread
// (libdlrt runs kernels on its caller; OpenBLAS is limited to one thread). The dlcc
// result is checked against OpenBLAS's (max relative error printed) so a fast wrong kernel
// cannot pass unnoticed. Prints one line: size, dlcc GFLOP/s, OpenBLAS GFLOP/s, ratio.
#include "dlrt.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *what, dlrt_status st) {
    fprintf(stderr, "gemm_bench: %s: %s (%s)\n", what, dlrt_status_str(st), dlrt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gemm_bench SIZE ARTIFACT.so\n");
        return 2;
    }
    int n = atoi(argv[1]);
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        return 1;
    }
    unsigned s = 12345;
    for (size_t i = 0; i < nn; i++) {
        s = s * 1103515245u + 12345u;
        a[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
        s = s * 1103515245u + 12345u;
        b[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    double flop = 2.0 * (double)n * (double)n * (double)n;
    // Enough repetitions for ~0.2 s per side at 50 GFLOP/s, at least 10.
    int reps = (int)(1e10 / flop);
    reps = reps < 10 ? 10 : reps > 200 ? 200 : reps;

    dlrt_model *m;
    dlrt_session *se;
    dlrt_status st;
    if ((st = dlrt_model_load_file(argv[2], &m)) != DLRT_OK) {
        return die("load", st);
    }
    if ((st = dlrt_session_create(m, &se)) != DLRT_OK) {
        return die("session", st);
    }
    if ((st = dlrt_session_set_input(se, "a", a, nn * sizeof *a)) != DLRT_OK ||
        (st = dlrt_session_set_input(se, "b", b, nn * sizeof *b)) != DLRT_OK) {
        return die("set_input", st);
    }
    double best_dl = 1e30;
    for (int r = -2; r < reps; r++) {
        double t0 = now();
        if ((st = dlrt_session_infer(se)) != DLRT_OK) {
            return die("infer", st);
        }
        double t = now() - t0;
        if (r >= 0 && t < best_dl) {
            best_dl = t;
        }
    }
    const void *out;
    if ((st = dlrt_session_output(se, "c", &out, NULL)) != DLRT_OK) {
        return die("output", st);
    }

    openblas_set_num_threads(1);
    double best_bl = 1e30;
    for (int r = -2; r < reps; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double t = now() - t0;
        if (r >= 0 && t < best_bl) {
            best_bl = t;
        }
    }
    const float *got = out;
    double max_err = 0;
    for (size_t i = 0; i < nn; i++) {
        double e = fabs((double)got[i] - (double)c[i]) / (1.0 + fabs((double)c[i]));
        max_err = e > max_err ? e : max_err;
    }
    double g_dl = flop / best_dl * 1e-9, g_bl = flop / best_bl * 1e-9;
    printf("%6d  %10.1f  %12.1f  %6.2f   (max rel err %.1e, %d reps)\n", n, g_dl, g_bl, g_dl / g_bl,
           max_err, reps);
    dlrt_session_destroy(se);
    dlrt_model_release(m);
    free(a);
    free(b);
    free(c);
    return max_err < 1e-3 ? 0 : 1;
}
