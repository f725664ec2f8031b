// tests/dp/loop_plugin.c — a one-rank transport plugin for libdlrt's communicator (the
// rt_comm_plugin table of runtime/rt_comm.h), built as a module for tests/dp/test_dp_loop.sh.
// It needs no MPI, so the communicator, the bucketed data-parallel step (rt_dp.c) and their
// failure paths run under every sanitizer, LeakSanitizer included (Open MPI's own allocations
// keep LSan off in the MPI tests).
//
// A world of one: rank 0 of 1. All-reduce: buf := scale * buf (the sum over one rank, then the
// scale, as op_allreduce_f32 does); all-gather: a copy; broadcast: nothing to do. Fault
// injection: with $DLRT_LOOP_FAIL_AT = K (1-based), the K-th operation of a context fails with
// "rank 0: injected failure of operation K (KIND)", so a test can check that the error reaches
// the step, names the rank and stays (the communicator is then broken).
#include "rt_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef struct loop_ctx {
    unsigned long ops, fail_at; // operations so far; the one that fails (0: none)
} loop_ctx;

static int injected(loop_ctx *x, const char *kind, char *err, size_t n_err) {
    if (++x->ops != x->fail_at) {
        return 0;
    }
    snprintf(err, n_err, "rank 0: injected failure of operation %lu (%s)", x->ops, kind);
    return -1;
}

static int op_open(const void *comm, void **out_ctx, int *out_rank, int *out_size, char *err,
                   size_t n_err) {
    (void)comm;
    loop_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, n_err, "out of memory");
        return -1;
    }
    const char *at = getenv("DLRT_LOOP_FAIL_AT");
    x->fail_at = at ? strtoul(at, NULL, 10) : 0;
    *out_ctx = x;
    *out_rank = 0;
    *out_size = 1;
    return 0;
}

static void op_close(void *ctx, int is_broken) {
    (void)is_broken;
    free(ctx);
}

static int op_allreduce_f32(void *ctx, float *buf, size_t n, float scale, float *scratch,
                            double timeout_s, char *err, size_t n_err) {
    (void)scratch;
    (void)timeout_s;
    if (injected(ctx, "all-reduce", err, n_err) != 0) {
        return -1;
    }
    if (scale != 1.0f) {
        for (size_t i = 0; i < n; i++) {
            buf[i] *= scale;
        }
    }
    return 0;
}

static int op_allgather(void *ctx, const void *mine, void *all, size_t size, double timeout_s,
                        char *err, size_t n_err) {
    (void)timeout_s;
    if (injected(ctx, "all-gather", err, n_err) != 0) {
        return -1;
    }
    memcpy(all, mine, size);
    return 0;
}

static int op_bcast(void *ctx, void *buf, size_t size, int root, double timeout_s, char *err,
                    size_t n_err) {
    (void)buf;
    (void)size;
    (void)timeout_s;
    if (root != 0) {
        snprintf(err, n_err, "broadcast: root %d is not a rank (0..0)", root);
        return -1;
    }
    return injected(ctx, "broadcast", err, n_err);
}

static const rt_comm_plugin plugin = {
    .abi = RT_COMM_PLUGIN_ABI,
    .name = "loop",
    .open = op_open,
    .close = op_close,
    .allreduce_f32 = op_allreduce_f32,
    .allgather = op_allgather,
    .bcast = op_bcast,
};

API const rt_comm_plugin *dlrt_comm_plugin_v1(void);
API const rt_comm_plugin *dlrt_comm_plugin_v1(void) {
    return &plugin;
}
