// tests/exec/test_exec.c — the threaded executor (runtime/rt_exec.c) and the profiler
// (runtime/rt_profile.c) through the public API.
//
// Bit-identity: the same train steps at different thread counts must give byte-identical params,
// optimizer state and infer outputs (memcmp, not a tolerance). The stress test runs 1000 steps of
// a small MLP at 1, 2 and 8 threads with every kernel split across the threads
// (DLRT_SPLIT_BYTES=0), the samples (CNN, transformer block) 20 steps at 1 vs 3 threads, the
// small MLP 40 steps at 1 vs 2 threads through the small-step probe. Also:
// thread-count errors, dlrt_session_threads, the profiler's API (trace and summary written,
// errors while off), and flush-to-zero (the session option flush_denormals).
#include "dl_base.h"
#include "dl_test.h"
#include "dlcc.h"
#include "dlrt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#    include <xmmintrin.h>
#endif

#define SMALL_MLP                                                                                  \
    "model smlp\n"                                                                                 \
    "input x : float[24, 20]\n"                                                                    \
    "input y : int64[24]\n"                                                                        \
    "param w1 : float[20, 40] = glorot_uniform(seed = 1)\n"                                        \
    "param b1 : float[40] = zeros\n"                                                               \
    "param w2 : float[40, 5] = glorot_uniform(seed = 2)\n"                                         \
    "param b2 : float[5] = zeros\n"                                                                \
    "h = Gemm (x, w1, b1)\n"                                                                       \
    "a = Relu (h)\n"                                                                               \
    "logits = Gemm (a, w2, b2)\n"                                                                  \
    "probs = Softmax <axis = -1> (logits)\n"                                                       \
    "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (logits, y)\n"                          \
    "output probs\n"                                                                               \
    "output loss\n"                                                                                \
    "train loss {\n"                                                                               \
    "  optimizer = adam <lr = 0.01>\n"                                                             \
    "  clip_norm = 1.0\n"                                                                          \
    "}\n"

static dlrt_model *compile_text(const char *name, const char *text) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    dlcc_options o;
    dlcc_options_init(&o);
    dlcc_result r;
    memset(&r, 0, sizeof r);
    dlrt_model *m = NULL;
    if (dlcc_compile_source(name, text, strlen(text), &o, d, &r) != DL_OK) {
        char *s = NULL;
        if (dl_diags_render(d, &s) == DL_OK && s) {
            fputs(s, stderr);
        }
        free(s);
    } else if (dlrt_model_load_memory(r.artifact, r.artifact_len, &m) != DLRT_OK) {
        fprintf(stderr, "load: %s\n", dlrt_last_error());
        m = NULL;
    }
    free(r.artifact);
    dl_diags_destroy(d);
    return m;
}

static dlrt_model *compile_sample(const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/samples/%s", DL_SOURCE_DIR, file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return compile_text(file, text);
}

static dlrt_session *open_session(dlrt_model *m, int threads) {
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = threads;
    dlrt_session *s = NULL;
    if (dlrt_session_create_ex(m, &o, &s) != DLRT_OK) {
        fprintf(stderr, "session: %s\n", dlrt_last_error());
        return NULL;
    }
    return s;
}

// Deterministic inputs for step `step`: floats in [-1, 1), integer labels in [0, classes).
static bool feed(dlrt_model *m, dlrt_session *s, uint64_t step, int64_t classes) {
    static uint8_t buf[1 << 22];
    for (size_t i = 0; i < dlrt_model_num_inputs(m); i++) {
        dlrt_tensor_desc td;
        if (dlrt_model_input(m, i, &td) != DLRT_OK || td.nbytes > sizeof buf) {
            return false;
        }
        size_t n = td.dtype == DLRT_INT64 ? td.nbytes / 8 : td.nbytes / 4;
        for (size_t j = 0; j < n; j++) {
            double u = dl_rng_uniform(1000 + step * 7 + i, j);
            if (td.dtype == DLRT_INT64) {
                ((int64_t *)buf)[j] = (int64_t)(u * (double)classes) % classes;
            } else if (td.dtype == DLRT_FLOAT32) {
                ((float *)buf)[j] = (float)(2 * u - 1);
            } else {
                return false;
            }
        }
        if (dlrt_session_set_input(s, td.name, buf, td.nbytes) != DLRT_OK) {
            return false;
        }
    }
    return true;
}

// Every param and optimizer state tensor, then every infer output, back to back.
static uint8_t *snapshot(dlrt_model *m, dlrt_session *s, size_t *out_len) {
    size_t total = 0;
    size_t np = dlrt_model_num_params(m), ns = dlrt_model_num_state(m);
    size_t no = dlrt_model_num_outputs(m);
    dlrt_tensor_desc td;
    for (size_t i = 0; i < np; i++) {
        (void)dlrt_model_param(m, i, &td);
        total += td.nbytes;
    }
    for (size_t i = 0; i < ns; i++) {
        (void)dlrt_model_state(m, i, &td);
        total += td.nbytes;
    }
    for (size_t i = 0; i < no; i++) {
        (void)dlrt_model_output(m, i, &td);
        total += td.nbytes;
    }
    uint8_t *buf = malloc(total ? total : 1), *p = buf;
    if (!buf) {
        return NULL;
    }
    bool ok = true;
    for (size_t i = 0; i < np; i++) {
        (void)dlrt_model_param(m, i, &td);
        ok = ok && dlrt_session_get_param(s, td.name, p, td.nbytes) == DLRT_OK;
        p += td.nbytes;
    }
    for (size_t i = 0; i < ns; i++) {
        (void)dlrt_model_state(m, i, &td);
        ok = ok && dlrt_session_get_param(s, td.name, p, td.nbytes) == DLRT_OK;
        p += td.nbytes;
    }
    ok = ok && dlrt_session_infer(s) == DLRT_OK;
    for (size_t i = 0; i < no; i++) {
        (void)dlrt_model_output(m, i, &td);
        const void *data = NULL;
        ok = ok && dlrt_session_output(s, td.name, &data, NULL) == DLRT_OK;
        if (ok) {
            memcpy(p, data, td.nbytes);
        }
        p += td.nbytes;
    }
    if (!ok) {
        free(buf);
        return NULL;
    }
    *out_len = total;
    return buf;
}

// `steps` train steps at `threads` threads; the snapshot afterwards and the sum of the losses.
static uint8_t *train_run(dlrt_model *m, int threads, int steps, int64_t classes, size_t *len,
                          double *loss_sum) {
    dlrt_session *s = open_session(m, threads);
    if (!s || dlrt_session_threads(s) != threads) {
        dlrt_session_destroy(s);
        return NULL;
    }
    *loss_sum = 0;
    for (int i = 0; i < steps; i++) {
        dlrt_step_info info;
        if (!feed(m, s, (uint64_t)i, classes) || dlrt_session_train_step(s, &info) != DLRT_OK) {
            dlrt_session_destroy(s);
            return NULL;
        }
        *loss_sum += info.loss;
    }
    uint8_t *snap = snapshot(m, s, len);
    dlrt_session_destroy(s);
    return snap;
}

// Trains at every thread count in `threads` and compares each result with the first, bytewise.
// A DL_CHECK helper: failures set *dl_test_failed_ and return.
static void check_identical(bool *dl_test_failed_, dlrt_model *m, const int *threads, size_t n,
                            int steps, int64_t classes) {
    DL_CHECK(m != NULL);
    if (!m) {
        return;
    }
    size_t len0 = 0;
    double loss0 = 0;
    uint8_t *ref = train_run(m, threads[0], steps, classes, &len0, &loss0);
    DL_CHECK(ref != NULL);
    DL_CHECK(loss0 == loss0); // not NaN
    for (size_t i = 1; ref && i < n; i++) {
        size_t len = 0;
        double loss = 0;
        uint8_t *got = train_run(m, threads[i], steps, classes, &len, &loss);
        DL_CHECK(got != NULL);
        if (got) {
            DL_CHECK_EQ_I64((int64_t)len, (int64_t)len0);
            DL_CHECK(memcmp(got, ref, len0) == 0);
            DL_CHECK(loss == loss0);
            if (memcmp(got, ref, len0) != 0) {
                fprintf(stderr, "%s: %d threads differ from %d\n", dlrt_model_name(m), threads[i],
                        threads[0]);
            }
        }
        free(got);
    }
    free(ref);
}

DL_TEST(stress_mlp_1000_steps_1_2_8_threads) {
    setenv("DLRT_SPLIT_BYTES", "0", 1); // split every kernel with range > 1
    dlrt_model *m = compile_text("smlp.dlg", SMALL_MLP);
    int threads[] = {1, 2, 8};
    check_identical(dl_test_failed_, m, threads, 3, 1000, 5);
    unsetenv("DLRT_SPLIT_BYTES");
    dlrt_model_release(m);
}

// With DLRT_PROBE=1 the session probes its small steps (runtime/rt_exec.c: pooled and
// alone in turn, then the faster way): the same bytes through the probe and after its decision.
DL_TEST(small_steps_probed_1_vs_2_threads) {
    setenv("DLRT_PROBE", "1", 1);
    dlrt_model *m = compile_text("smlp.dlg", SMALL_MLP);
    int threads[] = {1, 2};
    check_identical(dl_test_failed_, m, threads, 2, 40, 5);
    unsetenv("DLRT_PROBE");
    dlrt_model_release(m);
}

DL_TEST(cnn_sample_1_vs_3_threads) {
    dlrt_model *m = compile_sample("cnn_fmnist.dlg");
    int threads[] = {1, 3};
    check_identical(dl_test_failed_, m, threads, 2, 20, 10);
    setenv("DLRT_SPLIT_BYTES", "0", 1);
    check_identical(dl_test_failed_, m, threads, 2, 5, 10);
    unsetenv("DLRT_SPLIT_BYTES");
    dlrt_model_release(m);
}

DL_TEST(transformer_sample_1_vs_3_threads) {
    dlrt_model *m = compile_sample("transformer_block.dlg");
    int threads[] = {1, 3};
    check_identical(dl_test_failed_, m, threads, 2, 20, 10);
    setenv("DLRT_SPLIT_BYTES", "0", 1);
    check_identical(dl_test_failed_, m, threads, 2, 5, 10);
    unsetenv("DLRT_SPLIT_BYTES");
    dlrt_model_release(m);
}

DL_TEST(thread_count_errors) {
    dlrt_model *m = compile_text("smlp.dlg", SMALL_MLP);
    DL_CHECK(m != NULL);
    if (!m) {
        return;
    }
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    DL_CHECK_EQ_I64(o.threads, 0);
    dlrt_session *s = NULL;
    int bad[] = {-1, -1000, DLRT_MAX_THREADS + 1, 1 << 30};
    for (size_t i = 0; i < DL_ARRAY_LEN(bad); i++) {
        o.threads = bad[i];
        DL_CHECK_EQ_I64(dlrt_session_create_ex(m, &o, &s), DLRT_ERR_INVALID_ARG);
        DL_CHECK(s == NULL);
        char want[128];
        snprintf(want, sizeof want, "threads must be 0 (automatic) or 1..%d, got %d",
                 DLRT_MAX_THREADS, bad[i]);
        DL_CHECK_STR_EQ(dlrt_last_error(), want);
    }
    // 0: $DLRT_THREADS, else the cores.
    const char *bad_env[] = {"0", "-2", "abc", "3x", "100000"};
    o.threads = 0;
    for (size_t i = 0; i < DL_ARRAY_LEN(bad_env); i++) {
        setenv("DLRT_THREADS", bad_env[i], 1);
        DL_CHECK_EQ_I64(dlrt_session_create_ex(m, &o, &s), DLRT_ERR_INVALID_ARG);
        char want[128];
        snprintf(want, sizeof want, "DLRT_THREADS='%s': expected an integer 1..%d", bad_env[i],
                 DLRT_MAX_THREADS);
        DL_CHECK_STR_EQ(dlrt_last_error(), want);
    }
    setenv("DLRT_THREADS", "3", 1);
    DL_CHECK_OK(dlrt_session_create_ex(m, &o, &s));
    DL_CHECK_EQ_I64(dlrt_session_threads(s), 3);
    dlrt_session_destroy(s);
    o.threads = 2; // the option wins over the environment
    DL_CHECK_OK(dlrt_session_create_ex(m, &o, &s));
    DL_CHECK_EQ_I64(dlrt_session_threads(s), 2);
    dlrt_session_destroy(s);
    unsetenv("DLRT_THREADS");
    DL_CHECK_OK(dlrt_session_create(m, &s));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    DL_CHECK(dlrt_session_threads(s) >= 1 && dlrt_session_threads(s) <= cores);
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(dlrt_session_threads(NULL), 0);
    dlrt_model_release(m);
}

DL_TEST(profile_api) {
    dlrt_model *m = compile_text("smlp.dlg", SMALL_MLP);
    DL_CHECK(m != NULL);
    if (!m) {
        return;
    }
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = 2;
    o.source_name = "smlp.dlg";
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_session_create_ex(m, &o, &s));
    char path[] = "/tmp/dlrt_profile_XXXXXX";
    int fd = mkstemp(path);
    DL_CHECK(fd >= 0);
    close(fd);
    // Off: writing and summarising are errors.
    DL_CHECK_EQ_I64(dlrt_session_profile_write(s, path), DLRT_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(dlrt_last_error(), "profiling is off (call dlrt_session_profile_begin first)");
    DL_CHECK_EQ_I64(dlrt_session_profile_summary(s, stderr, 5), DLRT_ERR_INVALID_ARG);
    DL_CHECK_OK(dlrt_session_profile_begin(s));
    for (int i = 0; i < 3; i++) {
        DL_CHECK(feed(m, s, (uint64_t)i, 5));
        DL_CHECK_OK(dlrt_session_train_step(s, NULL));
    }
    DL_CHECK_OK(dlrt_session_profile_write(s, path));
    FILE *f = fopen(path, "rb");
    DL_CHECK(f != NULL);
    static char text[1 << 20];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    text[n] = 0;
    DL_CHECK(strstr(text, "\"traceEvents\"") != NULL);
    DL_CHECK(strstr(text, "\"name\":\"train_step\",\"cat\":\"step\"") != NULL);
    DL_CHECK(strstr(text, "\"op\":\"Gemm\"") != NULL);
    DL_CHECK(strstr(text, "\"source\":\"smlp.dlg\",\"line\":8,") != NULL); // h = Gemm
    DL_CHECK(strstr(text, "\"tid\":1") != NULL);
    // The summary: a header per entry that ran, then one line per kernel.
    FILE *sf = tmpfile();
    DL_CHECK(sf != NULL);
    if (sf) {
        DL_CHECK_OK(dlrt_session_profile_summary(s, sf, 3));
        rewind(sf);
        char line[512];
        int n_lines = 0;
        while (fgets(line, sizeof line, sf)) {
            if (n_lines == 0) {
                DL_CHECK(strncmp(line, "profile: train_step, 3 steps, ", 30) == 0);
            } else {
                double share = -1, ms = -1;
                DL_CHECK(sscanf(line, " %lf%% %lf ms", &share, &ms) == 2);
                DL_CHECK(share >= 0 && share <= 100 && ms >= 0);
            }
            n_lines++;
        }
        DL_CHECK_EQ_I64(n_lines, 4);
        fclose(sf);
    }
    // Restarting discards what was recorded.
    DL_CHECK_OK(dlrt_session_profile_begin(s));
    DL_CHECK_OK(dlrt_session_profile_write(s, path));
    f = fopen(path, "rb");
    n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    text[n] = 0;
    DL_CHECK(strstr(text, "\"cat\":\"kernel\"") == NULL);
    DL_CHECK_EQ_I64(dlrt_session_profile_write(s, "/nonexistent-dir/x.json"), DLRT_ERR_IO);
    remove(path);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
}

// The session option flush_denormals: 1e-20 * 1e-20 is a float32 denormal (1e-40) without it
// and 0 with it, on every thread of a split kernel (2^16 elements: each argument is 256 KiB, so
// the Mul is cut into chunks at 2 threads); the calling thread's MXCSR is restored after the step.
DL_TEST(flush_denormals) {
#if defined(__x86_64__) || defined(__i386__)
    enum { N = 1 << 16 };
    dlrt_model *m = compile_text("denormal.dlg", "model denormal\n"
                                                 "input x : float[65536]\n"
                                                 "input s : float[65536]\n"
                                                 "y = Mul (x, s)\n"
                                                 "output y\n");
    DL_CHECK(m != NULL);
    if (!m) {
        return;
    }
    static float x[N], sc[N];
    for (int i = 0; i < N; i++) {
        x[i] = 1e-20f;
        sc[i] = i % 2 ? 1e-20f : 3e-20f;
    }
    for (int ftz = 0; ftz <= 1; ftz++) {
        for (int threads = 1; threads <= 2; threads++) {
            dlrt_session_options o;
            dlrt_session_options_init(&o);
            o.threads = threads;
            o.flush_denormals = ftz;
            dlrt_session *s = NULL;
            DL_CHECK_OK(dlrt_session_create_ex(m, &o, &s));
            if (!s) {
                continue;
            }
            DL_CHECK_OK(dlrt_session_bind_input(s, "x", x, sizeof x));
            DL_CHECK_OK(dlrt_session_bind_input(s, "s", sc, sizeof sc));
            unsigned csr = _mm_getcsr();
            DL_CHECK_OK(dlrt_session_infer(s));
            DL_CHECK_EQ_I64(_mm_getcsr(), csr);
            const void *yp = NULL;
            DL_CHECK_OK(dlrt_session_output(s, "y", &yp, NULL));
            const float *y = yp;
            int64_t n_zero = 0, n_denormal = 0;
            for (int i = 0; y && i < N; i++) {
                n_zero += y[i] == 0.0f;
                n_denormal += y[i] != 0.0f && fabsf(y[i]) < FLT_MIN;
            }
            DL_CHECK_EQ_I64(n_zero, ftz ? N : 0);
            DL_CHECK_EQ_I64(n_denormal, ftz ? 0 : N);
            if (!ftz && y) { // the exact product, rounded to a denormal (IEEE gradual underflow)
                DL_CHECK(y[0] == 1e-20f * 3e-20f && y[1] == 1e-20f * 1e-20f);
            }
            dlrt_session_destroy(s);
        }
    }
    dlrt_model_release(m);
#endif
}

DL_TEST_MAIN()
