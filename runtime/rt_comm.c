// runtime/rt_comm.c — the communicator of data-parallel training (dlrt_comm, runtime/dlrt.h): a
// transport plugin loaded with dlopen on first use (rt_comm.h; libdlrt_mpi.so for MPI, so libdlrt
// itself never links MPI) and one thread of its own that runs every operation in order.
//
// Structure. Operations (all-reduces of float32 buffers, optionally gathered from several pieces
// into a staging buffer; broadcasts; all-gathers) are queued in a ring of RING_OPS records and
// numbered by a ticket (1, 2, ...). The communicator's thread takes them in ticket order and runs
// each through the plugin, blocking (the plugin polls with a deadline); `done` counts finished
// tickets, so waiting for ticket t waits for every earlier operation too. Operations are matched
// across ranks by order, which is why one thread runs them all in the order they were started.
//
// Failure is sticky: the first operation that fails (a peer silent past the timeout, an MPI
// error) marks the communicator broken with its message; every queued and later operation fails
// at once with the same message, and close does not finalise the transport.
//
// Invariants: `head` (tickets issued) and `done` (tickets finished) only grow, done <= head,
// head - done <= RING_OPS; both, `broken`, the message and the ring are guarded by `mu`.
#define _GNU_SOURCE // dladdr
#include "rt_comm.h"

#include "dl_base.h"
#include "rt_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RING_OPS          256
#define DEFAULT_TIMEOUT_S 300.0
#define PLUGIN_FILE       "libdlrt_mpi.so"

typedef enum op_kind { OP_ALLREDUCE, OP_ALLGATHER, OP_BCAST } op_kind;

typedef struct comm_op {
    op_kind kind;
    float *buf; // all-reduce: the reduced floats (the stage when pieces are gathered)
    size_t n;   // floats (all-reduce) or bytes
    float scale;
    const rt_comm_piece *pieces; // non-NULL: gather pieces into buf, reduce, scatter back
    size_t n_pieces;
    void *bytes; // all-gather: mine; broadcast: buf
    void *all;   // all-gather: the result
    int root;
    double *out_ms; // non-NULL: receives the operation's time on the communicator's thread
} comm_op;

struct dlrt_comm {
    const rt_comm_plugin *pl;
    void *dl;  // dlopen handle of the plugin
    void *ctx; // the plugin's context
    int rank, size;
    double timeout_s;
    float *scratch; // OWNED: rt_comm_scratch_floats(scratch_n, size) floats
    size_t scratch_n;
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    // Guarded by mu:
    comm_op ring[RING_OPS];
    uint64_t head, done;
    bool stop, broken;
    char err[512];
};

void dlrt_comm_options_init(dlrt_comm_options *opts) {
    if (opts) {
        memset(opts, 0, sizeof *opts);
    }
}

int dlrt_comm_rank(const dlrt_comm *c) {
    return c ? c->rank : 0;
}

int dlrt_comm_size(const dlrt_comm *c) {
    return c ? c->size : 1;
}

// Runs one operation through the plugin (on the communicator's thread, mu not held).
static int run_op(dlrt_comm *c, const comm_op *op, char *err, size_t n_err) {
    int64_t t0 = rt__now_ns();
    int rc = 0;
    switch (op->kind) {
    case OP_ALLREDUCE:
        if (op->pieces) {
            size_t at = 0;
            for (size_t i = 0; i < op->n_pieces; i++) {
                memcpy(op->buf + at, op->pieces[i].data, op->pieces[i].n * sizeof(float));
                at += op->pieces[i].n;
            }
        }
        rc = c->pl->allreduce_f32(c->ctx, op->buf, op->n, op->scale, c->scratch, c->timeout_s, err,
                                  n_err);
        if (rc == 0 && op->pieces) {
            size_t at = 0;
            for (size_t i = 0; i < op->n_pieces; i++) {
                memcpy(op->pieces[i].data, op->buf + at, op->pieces[i].n * sizeof(float));
                at += op->pieces[i].n;
            }
        }
        break;
    case OP_ALLGATHER:
        rc = c->pl->allgather(c->ctx, op->bytes, op->all, op->n, c->timeout_s, err, n_err);
        break;
    case OP_BCAST:
        rc = c->pl->bcast(c->ctx, op->bytes, op->n, op->root, c->timeout_s, err, n_err);
        break;
    }
    if (op->out_ms) {
        *op->out_ms = (double)(rt__now_ns() - t0) * 1e-6;
    }
    return rc;
}

static void *comm_main(void *arg) {
    dlrt_comm *c = arg;
    char err[sizeof c->err];
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->done == c->head && !c->stop) {
            pthread_cond_wait(&c->cv_work, &c->mu);
        }
        if (c->done == c->head) {
            break; // stopping, nothing left
        }
        comm_op op = c->ring[c->done % RING_OPS];
        bool broken = c->broken;
        pthread_mutex_unlock(&c->mu);
        int rc = broken ? -1 : run_op(c, &op, err, sizeof err);
        pthread_mutex_lock(&c->mu);
        if (rc != 0 && !c->broken) {
            c->broken = true;
            snprintf(c->err, sizeof c->err, "%s", err);
        }
        c->done++;
        pthread_cond_broadcast(&c->cv_done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static dlrt_status broken_error(dlrt_comm *c) {
    return rt__fail(DLRT_ERR_IO, "data-parallel communication failed: %s", c->err);
}

static dlrt_status start_op(dlrt_comm *c, const comm_op *op, uint64_t *out_ticket) {
    pthread_mutex_lock(&c->mu);
    while (c->head - c->done >= RING_OPS && !c->broken) {
        pthread_cond_wait(&c->cv_done, &c->mu);
    }
    if (c->broken) {
        pthread_mutex_unlock(&c->mu);
        return broken_error(c);
    }
    c->ring[c->head % RING_OPS] = *op;
    *out_ticket = ++c->head;
    pthread_cond_signal(&c->cv_work);
    pthread_mutex_unlock(&c->mu);
    return DLRT_OK;
}

dlrt_status rt__comm_allreduce_pieces(dlrt_comm *c, float *stage, size_t n, float scale,
                                      const rt_comm_piece *pieces, size_t n_pieces, double *out_ms,
                                      uint64_t *out_ticket) {
    comm_op op = {.kind = OP_ALLREDUCE,
                  .buf = stage,
                  .n = n,
                  .scale = scale,
                  .pieces = pieces,
                  .n_pieces = n_pieces,
                  .out_ms = out_ms};
    return start_op(c, &op, out_ticket);
}

dlrt_status dlrt_comm_wait(dlrt_comm *c, uint64_t ticket) {
    if (!c) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_wait: communicator is NULL");
    }
    pthread_mutex_lock(&c->mu);
    if (ticket > c->head) {
        pthread_mutex_unlock(&c->mu);
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_wait: ticket %llu was never issued",
                        (unsigned long long)ticket);
    }
    while (c->done < ticket && !c->broken) {
        pthread_cond_wait(&c->cv_done, &c->mu);
    }
    dlrt_status st = c->broken ? broken_error(c) : DLRT_OK;
    pthread_mutex_unlock(&c->mu);
    return st;
}

// Waits until the queue is empty, then grows the all-reduce scratch for n floats (outside
// steps: a bound session reserves its largest bucket at binding).
dlrt_status rt__comm_reserve(dlrt_comm *c, size_t n) {
    if (n <= c->scratch_n) {
        return DLRT_OK;
    }
    pthread_mutex_lock(&c->mu);
    while (c->done < c->head && !c->broken) {
        pthread_cond_wait(&c->cv_done, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    size_t floats = rt_comm_scratch_floats(n, c->size);
    if (floats > SIZE_MAX / sizeof(float)) {
        return rt__fail(DLRT_ERR_NOMEM, "all-reduce of %zu floats: too large", n);
    }
    float *p = dl_mem_alloc(floats * sizeof(float));
    if (!p) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory (%zu bytes of all-reduce scratch)",
                        floats * sizeof(float));
    }
    free(c->scratch);
    c->scratch = p;
    c->scratch_n = n;
    return DLRT_OK;
}

dlrt_status dlrt_comm_allreduce_start(dlrt_comm *c, float *buf, size_t n, float scale,
                                      uint64_t *out_ticket) {
    if (!c || (!buf && n) || !out_ticket) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_allreduce_start: NULL argument");
    }
    if (!isfinite(scale)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_allreduce_start: scale %g", scale);
    }
    dlrt_status st = rt__comm_reserve(c, n);
    if (st != DLRT_OK) {
        return st;
    }
    comm_op op = {.kind = OP_ALLREDUCE, .buf = buf, .n = n, .scale = scale};
    return start_op(c, &op, out_ticket);
}

dlrt_status dlrt_comm_allreduce(dlrt_comm *c, float *buf, size_t n, float scale) {
    uint64_t t = 0;
    dlrt_status st = dlrt_comm_allreduce_start(c, buf, n, scale, &t);
    return st == DLRT_OK ? dlrt_comm_wait(c, t) : st;
}

dlrt_status dlrt_comm_broadcast(dlrt_comm *c, void *buf, size_t size, int root) {
    if (!c || (!buf && size)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_broadcast: NULL argument");
    }
    if (root < 0 || root >= c->size) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_broadcast: root %d is not a rank (0..%d)",
                        root, c->size - 1);
    }
    comm_op op = {.kind = OP_BCAST, .bytes = buf, .n = size, .root = root};
    uint64_t t = 0;
    dlrt_status st = start_op(c, &op, &t);
    return st == DLRT_OK ? dlrt_comm_wait(c, t) : st;
}

dlrt_status rt__comm_allgather(dlrt_comm *c, const void *mine, void *all, size_t size) {
    comm_op op = {.kind = OP_ALLGATHER, .bytes = (void *)(uintptr_t)mine, .all = all, .n = size};
    uint64_t t = 0;
    dlrt_status st = start_op(c, &op, &t);
    return st == DLRT_OK ? dlrt_comm_wait(c, t) : st;
}

dlrt_status dlrt_comm_barrier(dlrt_comm *c) {
    if (!c) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_barrier: communicator is NULL");
    }
    uint8_t mine = 1, *all = dl_mem_calloc((size_t)c->size, 1);
    if (!all) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    dlrt_status st = rt__comm_allgather(c, &mine, all, 1);
    free(all);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Opening

static dlrt_status timeout_setting(const dlrt_comm_options *o, double *out) {
    double t = o ? o->timeout_s : 0.0;
    if (!(t >= 0.0) || !isfinite(t)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "dlrt_comm_options.timeout_s = %g: expected > 0 "
                        "seconds (0: the default)",
                        t);
    }
    if (t == 0.0) {
        t = DEFAULT_TIMEOUT_S;
        const char *env = getenv("DLRT_COMM_TIMEOUT");
        if (env && *env) {
            char *end = NULL;
            errno = 0;
            double v = strtod(env, &end);
            if (*end || errno == ERANGE || !(v > 0.0) || !isfinite(v)) {
                return rt__fail(DLRT_ERR_INVALID_ARG,
                                "DLRT_COMM_TIMEOUT='%s': expected a number of seconds > 0", env);
            }
            t = v;
        }
    }
    *out = t;
    return DLRT_OK;
}

// dlopens the plugin: the path given, else $DLRT_MPI_PLUGIN, else PLUGIN_FILE in the directory
// libdlrt was loaded from, else PLUGIN_FILE through the dynamic loader's search path.
static dlrt_status load_plugin(const dlrt_comm_options *o, void **out_dl,
                               const rt_comm_plugin **out) {
    const char *path = o && o->plugin_path ? o->plugin_path : getenv("DLRT_MPI_PLUGIN");
    char here[4096];
    void *dl = NULL;
    const char *tried = path;
    if (path && *path) {
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    } else {
        Dl_info info;
        if (dladdr((void *)(uintptr_t)&dlrt_comm_open_mpi, &info) && info.dli_fname) {
            const char *slash = strrchr(info.dli_fname, '/');
            size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
            if (dir + sizeof PLUGIN_FILE <= sizeof here) {
                memcpy(here, info.dli_fname, dir);
                memcpy(here + dir, PLUGIN_FILE, sizeof PLUGIN_FILE);
                tried = here;
                dl = dlopen(here, RTLD_NOW | RTLD_LOCAL);
            }
        }
        if (!dl) {
            tried = PLUGIN_FILE;
            dl = dlopen(PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!dl) {
        const char *why = dlerror();
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "cannot load the MPI plugin %s: %s (data-parallel training needs "
                        "libdlrt_mpi.so, built when MPI is installed: libopenmpi-dev)",
                        tried ? tried : PLUGIN_FILE, why ? why : "not found");
    }
    rt_comm_plugin_fn fn = (rt_comm_plugin_fn)(uintptr_t)dlsym(dl, RT_COMM_PLUGIN_SYMBOL);
    const rt_comm_plugin *pl = fn ? fn() : NULL;
    if (!pl || pl->abi != RT_COMM_PLUGIN_ABI) {
        dlclose(dl);
        return rt__fail(DLRT_ERR_UNSUPPORTED, "%s is no dlrt communication plugin of ABI %u", tried,
                        RT_COMM_PLUGIN_ABI);
    }
    *out_dl = dl;
    *out = pl;
    return DLRT_OK;
}

dlrt_status dlrt_comm_open_mpi(const void *mpi_comm, const dlrt_comm_options *opts,
                               dlrt_comm **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_comm_open_mpi: out is NULL");
    }
    *out = NULL;
    double timeout = 0;
    dlrt_status st = timeout_setting(opts, &timeout);
    if (st != DLRT_OK) {
        return st;
    }
    dlrt_comm *c = dl_mem_calloc(1, sizeof *c);
    if (!c) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    c->timeout_s = timeout;
    if ((st = load_plugin(opts, &c->dl, &c->pl)) != DLRT_OK) {
        free(c);
        return st;
    }
    char err[512];
    if (c->pl->open(mpi_comm, &c->ctx, &c->rank, &c->size, err, sizeof err) != 0) {
        dlclose(c->dl);
        free(c);
        return rt__fail(DLRT_ERR_IO, "cannot open the MPI communicator: %s", err);
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0 || pthread_cond_init(&c->cv_work, NULL) != 0 ||
        pthread_cond_init(&c->cv_done, NULL) != 0) {
        c->pl->close(c->ctx, 0);
        dlclose(c->dl);
        free(c);
        return rt__fail(DLRT_ERR_NOMEM, "cannot create the communicator's mutex");
    }
    int rc = pthread_create(&c->th, NULL, comm_main, c);
    if (rc != 0) {
        dlrt_comm_destroy(c); // closes the context
        return rt__fail(DLRT_ERR_NOMEM, "cannot start the communicator's thread: %s", strerror(rc));
    }
    c->th_started = true;
    *out = c;
    return DLRT_OK;
}

void dlrt_comm_destroy(dlrt_comm *c) {
    if (!c) {
        return;
    }
    if (c->th_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_broadcast(&c->cv_work);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->th, NULL);
    }
    pthread_cond_destroy(&c->cv_done);
    pthread_cond_destroy(&c->cv_work);
    pthread_mutex_destroy(&c->mu);
    c->pl->close(c->ctx, c->broken);
    // The plugin stays loaded: MPI libraries register atexit handlers and threads that must
    // not lose their code (unloading Open MPI is not supported).
    (void)c->dl;
    free(c->scratch);
    free(c);
}
