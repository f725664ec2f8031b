// bench/gemm_bench.c — times dlcc's compiled MatMul / Gemm against OpenBLAS's cblas_sgemm.
//
// usage: gemm_bench SIZE ARTIFACT.so | M N K TA TB ARTIFACT.so                (bench/gemm.sh)
//        gemm_bench M N K TA TB THREADS dlcc|openblas ARTIFACT.so [BLOCKS]     (bench/compare.py)
// First form: `c = MatMul (a, b)` over float[SIZE, SIZE] (or, with M N K TA TB, the Gemm of the
// second form's shapes), both sides on one thread, timed in the
// calling thread's CPU time (the shared machine's neighbours do not count), best repetition;
// prints size, dlcc GFLOP/s, OpenBLAS GFLOP/s, ratio. Second form: one side per process (the
// caller alternates them), C[M, N] = op(A) op(B) (TA: A stored [K, M]; TB: B stored [N, K]; the
// artifact `c = Gemm <transA, transB> (a, b)` of those shapes) on THREADS threads (the session's,
// or openblas_set_num_threads), wall time: calls in blocks of >= ~2e7 flop, BLOCKS blocks
// (default 15) after 3 warm-up blocks, the median block; prints `ms_per_call T gflops G reps R`.
// Both forms check dlcc's result against cblas_sgemm (relative error <= 1e-3), so a fast wrong
// kernel cannot pass unnoticed.
#include "dlrt.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill(float *x, size_t n, unsigned s) {
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static int one_side(int argc, char **argv);

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
    if (argc == 9 || argc == 10) {
        return one_side(argc, argv);
    }
    if (argc != 3 && argc != 7) {
        fprintf(stderr, "usage: gemm_bench SIZE ARTIFACT.so\n"
                        "       gemm_bench M N K TA TB ARTIFACT.so\n"
                        "       gemm_bench M N K TA TB THREADS dlcc|openblas ARTIFACT.so "
                        "[BLOCKS]\n");
        return 2;
    }
    int m, n, k, ta = 0, tb = 0;
    if (argc == 3) {
        m = n = k = atoi(argv[1]);
    } else {
        m = atoi(argv[1]);
        n = atoi(argv[2]);
        k = atoi(argv[3]);
        ta = atoi(argv[4]);
        tb = atoi(argv[5]);
    }
    const char *artifact = argv[argc - 1];
    if (m < 1 || n < 1 || k < 1) {
        fprintf(stderr, "gemm_bench: bad shape\n");
        return 2;
    }
    size_t na = (size_t)m * (size_t)k, nb = (size_t)k * (size_t)n, nc = (size_t)m * (size_t)n;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    if (!a || !b || !c) {
        return 1;
    }
    fill(a, na, 12345u);
    fill(b, nb, 54321u);
    int lda = ta ? m : k, ldb = tb ? k : n;
    double flop = 2.0 * (double)m * (double)n * (double)k;
    // Enough repetitions for ~0.2 s per side at 50 GFLOP/s, at least 10.
    int reps = (int)(1e10 / flop);
    reps = reps < 10 ? 10 : reps > 200 ? 200 : reps;
    dlrt_model *md;
    dlrt_session *se;
    dlrt_status st;
    if ((st = dlrt_model_load_file(artifact, &md)) != DLRT_OK) {
        return die("load", st);
    }
    if ((st = dlrt_session_create(md, &se)) != DLRT_OK) {
        return die("session", st);
    }
    if ((st = dlrt_session_set_input(se, "a", a, na * sizeof *a)) != DLRT_OK ||
        (st = dlrt_session_set_input(se, "b", b, nb * sizeof *b)) != DLRT_OK) {
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
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
        double t = now() - t0;
        if (r >= 0 && t < best_bl) {
            best_bl = t;
        }
    }
    const float *got = out;
    double max_err = 0;
    for (size_t i = 0; i < nc; i++) {
        double e = fabs((double)got[i] - (double)c[i]) / (1.0 + fabs((double)c[i]));
        max_err = e > max_err ? e : max_err;
    }
    double g_dl = flop / best_dl * 1e-9, g_bl = flop / best_bl * 1e-9;
    char shape[96];
    if (argc == 3) {
        snprintf(shape, sizeof shape, "%d", n);
    } else {
        snprintf(shape, sizeof shape, "%dx%dx%d%s%s", m, n, k, ta ? " tA" : "", tb ? " tB" : "");
    }
    printf("%18s  %10.1f  %12.1f  %6.2f   (max rel err %.1e, %d reps)\n", shape, g_dl, g_bl,
           g_dl / g_bl, max_err, reps);
    dlrt_session_destroy(se);
    dlrt_model_release(md);
    free(a);
    free(b);
    free(c);
    return max_err < 1e-3 ? 0 : 1;
}
static int one_side(int argc, char **argv) {
    int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
    int ta = atoi(argv[4]), tb = atoi(argv[5]), threads = atoi(argv[6]);
    int is_dlcc = strcmp(argv[7], "dlcc") == 0;
    if (m < 1 || n < 1 || k < 1 || threads < 1) {
        fprintf(stderr, "gemm_bench: bad shape or thread count\n");
        return 2;
    }
    size_t na = (size_t)m * (size_t)k, nb = (size_t)k * (size_t)n, nc = (size_t)m * (size_t)n;
    float *a = aligned_alloc(64, (na * 4 + 63) / 64 * 64);
    float *b = aligned_alloc(64, (nb * 4 + 63) / 64 * 64);
    float *c = aligned_alloc(64, (nc * 4 + 63) / 64 * 64);
    if (!a || !b || !c) {
        return 1;
    }
    fill(a, na, 12345u);
    fill(b, nb, 54321u);
    openblas_set_num_threads(threads);
    int lda = ta ? m : k, ldb = tb ? k : n;
    // The reference (and the OpenBLAS side's work).
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    dlrt_model *md = NULL;
    dlrt_session *se = NULL;
    dlrt_status st;
    if (is_dlcc) {
        dlrt_session_options o;
        dlrt_session_options_init(&o);
        o.threads = threads;
        if ((st = dlrt_model_load_file(argv[8], &md)) != DLRT_OK) {
            return die("load", st);
        }
        if ((st = dlrt_session_create_ex(md, &o, &se)) != DLRT_OK) {
            return die("session", st);
        }
        if ((st = dlrt_session_bind_input(se, "a", a, na * 4)) != DLRT_OK ||
            (st = dlrt_session_bind_input(se, "b", b, nb * 4)) != DLRT_OK) {
            return die("bind", st);
        }
        if ((st = dlrt_session_infer(se)) != DLRT_OK) {
            return die("infer", st);
        }
        const void *out;
        if ((st = dlrt_session_output(se, "c", &out, NULL)) != DLRT_OK) {
            return die("output", st);
        }
        const float *got = out;
        double max_err = 0;
        for (size_t i = 0; i < nc; i++) {
            double e = fabs((double)got[i] - (double)c[i]) / (1.0 + fabs((double)c[i]));
            max_err = e > max_err ? e : max_err;
        }
        if (max_err > 1e-3) {
            fprintf(stderr, "gemm_bench: dlcc's result differs from OpenBLAS's: %.2e\n", max_err);
            return 1;
        }
    }
    double flop = 2.0 * m * n * (double)k;
    int inner = (int)(2e7 / flop) + 1, blocks = argc == 10 ? atoi(argv[9]) : 15;
    double times[64];
    if (blocks < 1 || blocks > 64) {
        fprintf(stderr, "gemm_bench: BLOCKS 1..64\n");
        return 2;
    }
    for (int r = -3; r < blocks; r++) {
        double t0 = wall();
        for (int i = 0; i < inner; i++) {
            if (is_dlcc) {
                if ((st = dlrt_session_infer(se)) != DLRT_OK) {
                    return die("infer", st);
                }
            } else {
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c,
                            n);
            }
        }
        if (r >= 0) {
            times[r] = (wall() - t0) / inner;
        }
    }
    qsort(times, (size_t)blocks, sizeof *times, cmp_double);
    double t = times[blocks / 2];
    printf("ms_per_call %.6f gflops %.3f reps %d\n", t * 1e3, flop / t * 1e-9, inner * blocks);
    dlrt_session_destroy(se);
    dlrt_model_release(md);
    free(a);
    free(b);
    free(c);
    return 0;
}
