// bench/loader_bench.c — how long a trainer waits for libdlrt's data loader (dlrt.h, "Data
// loader") when making a batch is slower than using one.
//
// usage: loader_bench [PRODUCE_S STEP_S BATCHES SLOTS]   (default 0.5 0.1 40 16)
// A callback source sleeps PRODUCE_S per batch (spread over its 10 samples) and writes a
// 28x28 sample; the "step" sleeps STEP_S per batch. Runs P = 1 and P = 8 producers with SLOTS
// slots and prints, side by side, the mean wait per batch after the first (the steady state),
// the longest such wait, and on its own line the first batch's latency (producer start-up).
// Exit status 1 when a loader call fails.
#include "dlrt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCH  10
#define PIXELS 784

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One sample: PRODUCE_S / BATCH of "decoding", then deterministic pixels.
static int make_sample(void *user, int64_t index, float *x, int64_t *y) {
    sleep_s(*(const double *)user / BATCH);
    for (int k = 0; k < PIXELS; k++) {
        x[k] = (float)((index * 31 + k) % 256);
    }
    *y = index % 10;
    return 0;
}

typedef struct result {
    dlrt_loader_stats st;
    double total_s;
} result;

static int run(int producers, int slots, double produce_s, double step_s, int batches, result *r) {
    dlrt_loader_options o;
    dlrt_loader_options_init(&o);
    o.batch_size = BATCH;
    o.producers = producers;
    o.slots = slots;
    o.seed = 1;
    o.scale = 1.0f / 255.0f;
    int64_t dims[2] = {28, 28};
    dlrt_loader *l = NULL;
    double t0 = now_s();
    if (dlrt_loader_create_callback(100000, dims, 2, make_sample, &produce_s, &o, &l) != DLRT_OK) {
        fprintf(stderr, "loader_bench: %s\n", dlrt_last_error());
        return 1;
    }
    double check = 0.0;
    for (int b = 0; b < batches; b++) {
        dlrt_loader_batch bt;
        if (dlrt_loader_next(l, &bt) != DLRT_OK) {
            fprintf(stderr, "loader_bench: %s\n", dlrt_last_error());
            dlrt_loader_destroy(l);
            return 1;
        }
        check += (double)bt.x[0] + (double)bt.y[0];
        sleep_s(step_s); // the training step, using the batch in place
        if (dlrt_loader_release(l, &bt) != DLRT_OK) {
            fprintf(stderr, "loader_bench: %s\n", dlrt_last_error());
            dlrt_loader_destroy(l);
            return 1;
        }
    }
    r->total_s = now_s() - t0;
    dlrt_loader_stats_get(l, &r->st);
    dlrt_loader_destroy(l);
    return check >= 0.0 ? 0 : 1;
}

int main(int argc, char **argv) {
    double produce_s = argc > 1 ? atof(argv[1]) : 0.5;
    double step_s = argc > 2 ? atof(argv[2]) : 0.1;
    int batches = argc > 3 ? atoi(argv[3]) : 40;
    int slots = argc > 4 ? atoi(argv[4]) : 16;
    if (produce_s < 0 || step_s < 0 || batches < 2 || slots < 1) {
        fprintf(stderr, "usage: loader_bench [PRODUCE_S STEP_S BATCHES>=2 SLOTS>=1]\n");
        return 2;
    }
    const int ps[2] = {1, 8};
    result r[2];
    for (int i = 0; i < 2; i++) {
        if (run(ps[i], slots, produce_s, step_s, batches, &r[i]) != 0) {
            return 1;
        }
    }
    printf("data loader: producer %.3f s/batch, step %.3f s, K = %d slots, %d batches of %d\n",
           produce_s, step_s, slots, batches, BATCH);
    printf("%-36s %12s %12s\n", "", "P = 1", "P = 8");
    printf("%-36s %12.4f %12.4f\n", "steady-state mean wait/batch (ms)", r[0].st.mean_wait_ms,
           r[1].st.mean_wait_ms);
    printf("%-36s %12.4f %12.4f\n", "max wait after the first batch (ms)", r[0].st.max_wait_ms,
           r[1].st.max_wait_ms);
    printf("%-36s %12.1f %12.1f\n", "first-batch latency (ms)", r[0].st.first_wait_ms,
           r[1].st.first_wait_ms);
    printf("%-36s %12.2f %12.2f\n", "total time (s)", r[0].total_s, r[1].total_s);
    return 0;
}
