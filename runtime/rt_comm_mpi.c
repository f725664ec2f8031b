// runtime/rt_comm_mpi.c — the MPI transport plugin of libdlrt's communicator (built as
// libdlrt_mpi.so when CMake finds MPI; libdlrt dlopens it, rt_comm.c). Exports one symbol,
// dlrt_comm_plugin_v1, returning the rt_comm_plugin table of rt_comm.h.
//
// Every operation is point-to-point with non-blocking requests polled against a deadline, so a
// peer that died or hangs is reported by rank ("no answer from rank 1 within 5 s") instead of
// blocking forever, and a reduction's order never depends on message arrival:
//   all-reduce  reduce-scatter (rank s receives every rank's segment s, sums the contributions
//               in rank order 0..N-1, scales), then all-gather of the reduced segments;
//   all-gather  every rank sends its bytes to every other;
//   broadcast   the root sends to every other rank.
// MPI's own collectives (MPI_Allreduce's order is unspecified, blocking calls have no timeout)
// are deliberately not used. Calls come from one thread at a time (the communicator's thread),
// so MPI_THREAD_SERIALIZED suffices. Messages between two ranks on one communicator do not
// overtake each other, and every rank issues the same operations in the same order, so fixed
// tags per phase are enough; the context holds a duplicate of the caller's communicator so no
// message of the application can match ours.
#include "rt_comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))

enum { TAG_RS = 7101, TAG_AG = 7102, TAG_GATHER = 7103, TAG_BCAST = 7104 };

typedef struct mpi_ctx {
    MPI_Comm comm; // our duplicate, errors returned (MPI_ERRORS_RETURN)
    int rank, size;
    int we_init; // MPI_Init_thread was called by open: close finalises
    // Per-operation request arrays, sized 2 * size at open (no allocation per operation).
    MPI_Request *reqs;
    int *peer;
    int *idx;
} mpi_ctx;

static int fail(char *err, size_t n_err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n_err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n_err, fmt, ap);
    va_end(ap);
    return -1;
}

static int mpi_fail(char *err, size_t n_err, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) {
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    }
    return fail(err, n_err, "%s: %s", what, msg);
}

#define SLEEP_MIN_NS 10000L  // the first sleep of a wait, after the spin
#define SLEEP_MAX_NS 100000L // the longest

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Waits for requests [0, n) (request i exchanges with rank peer[i]) until all complete, an MPI
// error, or timeout_s seconds without completion. Polls with MPI_Testsome: a short spin, then
// sleeps growing from SLEEP_MIN_NS to SLEEP_MAX_NS (the communicator's thread should not steal a
// core from the kernels while a slow peer computes, but each sleep may delay this rank's side of
// the exchange by as much: with a 1 ms cap, the 4 small all-reduces a synchronised BatchNorm
// makes per step cost 2.5 ms each on 2 processes of this 2-core machine). On failure, pending
// requests are cancelled and freed.
static int wait_all(mpi_ctx *x, int n, double timeout_s, const char *what, char *err,
                    size_t n_err) {
    double deadline = now_s() + timeout_s;
    long sleep_ns = SLEEP_MIN_NS;
    int left = 0;
    for (int i = 0; i < n; i++) {
        left += x->reqs[i] != MPI_REQUEST_NULL;
    }
    for (int polls = 0; left > 0; polls++) {
        int done = 0;
        int rc = MPI_Testsome(n, x->reqs, &done, x->idx, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            char op[160];
            snprintf(op, sizeof op, "rank %d: %s failed", x->rank, what);
            mpi_fail(err, n_err, rc, op);
            goto cancel;
        }
        if (done != MPI_UNDEFINED && done > 0) {
            left -= done;
            sleep_ns = SLEEP_MIN_NS;
            continue;
        }
        if (now_s() > deadline) {
            char peers[128];
            size_t at = 0;
            int shown = 0;
            peers[0] = 0;
            for (int i = 0; i < n && shown < 4; i++) {
                if (x->reqs[i] == MPI_REQUEST_NULL) {
                    continue;
                }
                int dup = 0;
                for (int j = 0; j < i; j++) {
                    dup |= x->reqs[j] != MPI_REQUEST_NULL && x->peer[j] == x->peer[i];
                }
                if (!dup && at < sizeof peers) {
                    int w = snprintf(peers + at, sizeof peers - at, "%s%d", shown ? ", " : "",
                                     x->peer[i]);
                    at += w > 0 ? (size_t)w : 0;
                    shown++;
                }
            }
            fail(err, n_err,
                 "rank %d: no answer from rank%s %s within %g s (%s): that rank died, hangs or "
                 "is far behind",
                 x->rank, shown > 1 ? "s" : "", peers, timeout_s, what);
            goto cancel;
        }
        if (polls > 200) {
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL);
            sleep_ns = sleep_ns * 2 > SLEEP_MAX_NS ? SLEEP_MAX_NS : sleep_ns * 2;
        }
    }
    return 0;
cancel:
    for (int i = 0; i < n; i++) {
        if (x->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&x->reqs[i]);
            MPI_Request_free(&x->reqs[i]);
        }
    }
    return -1;
}

static int count_ok(size_t n, const char *what, char *err, size_t n_err) {
    if (n > (size_t)INT_MAX) {
        return fail(err, n_err, "%s: %zu elements in one message (MPI's limit is %d)", what, n,
                    INT_MAX);
    }
    return 0;
}

static int op_open(const void *comm, void **out_ctx, int *out_rank, int *out_size, char *err,
                   size_t n_err) {
    int inited = 0, finalized = 0, prov = 0, rc;
    MPI_Finalized(&finalized);
    if (finalized) {
        return fail(err, n_err, "MPI was already finalised");
    }
    MPI_Initialized(&inited);
    mpi_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        return fail(err, n_err, "out of memory");
    }
    if (!inited) {
        if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov)) != MPI_SUCCESS) {
            free(x);
            return mpi_fail(err, n_err, rc, "MPI_Init_thread");
        }
        x->we_init = 1;
    }
    MPI_Query_thread(&prov);
    if (prov < MPI_THREAD_SERIALIZED) {
        if (x->we_init) {
            MPI_Finalize();
        }
        free(x);
        return fail(err, n_err,
                    "MPI was initialised with thread support level %d; the communicator needs "
                    "MPI_THREAD_SERIALIZED (%d) or more (its own thread makes the MPI calls)",
                    prov, MPI_THREAD_SERIALIZED);
    }
    MPI_Comm base = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    if ((rc = MPI_Comm_dup(base, &x->comm)) != MPI_SUCCESS) {
        if (x->we_init) {
            MPI_Finalize();
        }
        free(x);
        return mpi_fail(err, n_err, rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(x->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(x->comm, &x->rank);
    MPI_Comm_size(x->comm, &x->size);
    x->reqs = calloc(2 * (size_t)x->size, sizeof *x->reqs);
    x->peer = calloc(2 * (size_t)x->size, sizeof *x->peer);
    x->idx = calloc(2 * (size_t)x->size, sizeof *x->idx);
    if (!x->reqs || !x->peer || !x->idx) {
        free(x->reqs);
        free(x->peer);
        free(x->idx);
        MPI_Comm_free(&x->comm);
        if (x->we_init) {
            MPI_Finalize();
        }
        free(x);
        return fail(err, n_err, "out of memory");
    }
    *out_ctx = x;
    *out_rank = x->rank;
    *out_size = x->size;
    return 0;
}

static void op_close(void *ctx, int is_broken) {
    mpi_ctx *x = ctx;
    if (!x) {
        return;
    }
    // After MPI_Finalize (an mpi4py program at exit, before its communicators are collected)
    // no MPI call is allowed: the duplicate went with MPI.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!is_broken && !finalized) {
        MPI_Comm_free(&x->comm);
        if (x->we_init) {
            MPI_Finalize();
        }
    }
    free(x->reqs);
    free(x->peer);
    free(x->idx);
    free(x);
}

// Posts a receive (is_recv) or send of `count` items of `type` with rank `p` as request *n.
static int post(mpi_ctx *x, int *n, int is_recv, void *buf, size_t count, MPI_Datatype type, int p,
                int tag, char *err, size_t n_err) {
    int rc = is_recv ? MPI_Irecv(buf, (int)count, type, p, tag, x->comm, &x->reqs[*n])
                     : MPI_Isend(buf, (int)count, type, p, tag, x->comm, &x->reqs[*n]);
    if (rc != MPI_SUCCESS) {
        char op[96];
        snprintf(op, sizeof op, "rank %d: %s rank %d", x->rank,
                 is_recv ? "receive from" : "send to", p);
        return mpi_fail(err, n_err, rc, op);
    }
    x->peer[(*n)++] = p;
    return 0;
}

static int op_allreduce_f32(void *ctx, float *buf, size_t n, float scale, float *scratch,
                            double timeout_s, char *err, size_t n_err) {
    mpi_ctx *x = ctx;
    int W = x->size, me = x->rank, nr = 0;
    size_t seg = (n + (size_t)W - 1) / (size_t)W;
    size_t lo = rt_comm_seg_lo(n, W, me), len = rt_comm_seg_lo(n, W, me + 1) - lo;
    if (count_ok(seg, "all-reduce", err, n_err) != 0) {
        return -1;
    }
    // Reduce-scatter: my segment's contribution of every rank into scratch[r * seg, + len).
    for (int p = 0; p < W; p++) {
        if (p == me) {
            continue;
        }
        size_t plo = rt_comm_seg_lo(n, W, p), plen = rt_comm_seg_lo(n, W, p + 1) - plo;
        if (post(x, &nr, 1, scratch + (size_t)p * seg, len, MPI_FLOAT, p, TAG_RS, err, n_err) ||
            post(x, &nr, 0, buf + plo, plen, MPI_FLOAT, p, TAG_RS, err, n_err)) {
            wait_all(x, nr, 0.0, "all-reduce", NULL, 0);
            return -1;
        }
    }
    if (wait_all(x, nr, timeout_s, "all-reduce, reduce-scatter", err, n_err) != 0) {
        return -1;
    }
    // The sum in rank order 0..W-1, element by element, then the scale: the same operations on
    // every rank and in every run, whatever order the messages came in.
    float *dst = buf + lo;
    memcpy(scratch + (size_t)me * seg, dst, len * sizeof *dst);
    memcpy(dst, scratch, len * sizeof *dst);
    for (int r = 1; r < W; r++) {
        const float *c = scratch + (size_t)r * seg;
        for (size_t i = 0; i < len; i++) {
            dst[i] += c[i];
        }
    }
    if (scale != 1.0f) {
        for (size_t i = 0; i < len; i++) {
            dst[i] *= scale;
        }
    }
    // All-gather: every rank's reduced segment into its place in buf.
    nr = 0;
    for (int p = 0; p < W; p++) {
        if (p == me) {
            continue;
        }
        size_t plo = rt_comm_seg_lo(n, W, p), plen = rt_comm_seg_lo(n, W, p + 1) - plo;
        if (post(x, &nr, 1, buf + plo, plen, MPI_FLOAT, p, TAG_AG, err, n_err) ||
            post(x, &nr, 0, dst, len, MPI_FLOAT, p, TAG_AG, err, n_err)) {
            wait_all(x, nr, 0.0, "all-reduce", NULL, 0);
            return -1;
        }
    }
    return wait_all(x, nr, timeout_s, "all-reduce, all-gather", err, n_err);
}

static int op_allgather(void *ctx, const void *mine, void *all, size_t size, double timeout_s,
                        char *err, size_t n_err) {
    mpi_ctx *x = ctx;
    int nr = 0;
    if (count_ok(size, "all-gather", err, n_err) != 0) {
        return -1;
    }
    memcpy((char *)all + (size_t)x->rank * size, mine, size);
    for (int p = 0; p < x->size; p++) {
        if (p == x->rank) {
            continue;
        }
        if (post(x, &nr, 1, (char *)all + (size_t)p * size, size, MPI_BYTE, p, TAG_GATHER, err,
                 n_err) ||
            post(x, &nr, 0, (void *)(uintptr_t)mine, size, MPI_BYTE, p, TAG_GATHER, err, n_err)) {
            wait_all(x, nr, 0.0, "all-gather", NULL, 0);
            return -1;
        }
    }
    return wait_all(x, nr, timeout_s, "all-gather", err, n_err);
}

static int op_bcast(void *ctx, void *buf, size_t size, int root, double timeout_s, char *err,
                    size_t n_err) {
    mpi_ctx *x = ctx;
    int nr = 0;
    if (count_ok(size, "broadcast", err, n_err) != 0) {
        return -1;
    }
    if (root < 0 || root >= x->size) {
        return fail(err, n_err, "broadcast: root %d is not a rank (0..%d)", root, x->size - 1);
    }
    for (int p = 0; p < x->size; p++) {
        if (p == x->rank || (x->rank != root && p != root)) {
            continue;
        }
        if (post(x, &nr, x->rank != root, buf, size, MPI_BYTE, p, TAG_BCAST, err, n_err)) {
            wait_all(x, nr, 0.0, "broadcast", NULL, 0);
            return -1;
        }
    }
    return wait_all(x, nr, timeout_s, "broadcast", err, n_err);
}

static const rt_comm_plugin plugin = {
    .abi = RT_COMM_PLUGIN_ABI,
    .name = "mpi",
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
