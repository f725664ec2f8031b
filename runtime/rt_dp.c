// runtime/rt_dp.c — data-parallel train steps: a session bound to a communicator
// (dlrt_session_bind_comm) all-reduces its gradients at the plan's all-reduce point (format 6:
// dlrt_plan_hdr.comm_at, the dlrt_plan_grad table) between backward and the step kernels; a
// session of N chunks (dlrt_session_set_chunks, no communicator) does the same float operations
// in one process, so it gives N ranks' params bit for bit.
//
// Structure (rt_dp, made at binding, nothing allocated per step). The reduced buffers are each
// trained param's gradient (or accumulator) and the float32 loss, so every rank reports the same
// loss and its non-finite guard takes the same decision. They are ordered by readiness (the plan
// position of the last train kernel before comm_at that touches each one) and packed into
// buckets of at most bucket_bytes; a bucket of one buffer is reduced in place, a larger one
// through a staging buffer that the communicator's thread gathers and scatters.
// Per bucket, `pending` counts the kernels before comm_at that touch its buffers; the
// executor's done hook (rt_exec.c, schedule RT_SCHED_TRAIN_A) decrements it, and at zero the
// bucket is ready. Buckets are started strictly in bucket order (every rank must issue the same
// operations in the same order, and kernels finish in a different order on every rank and run),
// as soon as they and every earlier bucket are ready, so communication overlaps the rest of
// backward. After the first phase the step waits for every bucket, then runs the rest (global
// norm, clipping, finite check, update), which therefore sees the reduced gradients on every
// rank. With accumulation, boundary calls reduce their accumulators (after train.accum) and the
// loss; the other calls reduce the loss alone.
// Chunks: the first phase runs once per chunk (every input bound with N batches, chunk r at
// byte r * its size); after chunk r the buffers are added into `sum` (chunk 0 copied, then
// sum += chunk r, element by element), and at the end sum * (float)(1 / N) goes back into them:
// the plugin's reduction (rt_comm.h: the sum in rank order 0..N-1, then the scale). With
// accumulation each chunk keeps its own accumulators, as each rank does: between calls the
// accumulator buffers hold chunk 0's and `saved` chunks 1..N-1's; chunk r > 0 loads its copy
// into the buffers before its first phase and stores it back after. A boundary call sums them
// (with the loss) as above, and every copy is zeroed after the rest (which zeroes the buffers);
// another call sums the loss alone and puts chunk 0's accumulators (kept in `sum`) back, so the
// rest sees what rank 0 sees.
//
// Collectives inside the step (format 7, the train block's sync_batchnorm): a first-phase kernel
// flagged DLRT_KERNEL_F_ALLREDUCE_MEAN (an AllReduceMean: BatchNorm statistics in forward, their
// adjoint sums in backward) is followed, in the done hook and so before any kernel that waits for
// it, by a blocking all-reduce of its output (the mean over ranks). The plan chains those kernels
// (each waits for the one before), and with any of them the buckets start only after the first
// phase (no overlap), so every rank issues the same operations in the same order. A session of
// chunks refuses such a plan: chunk r's forward would need every chunk's statistics first.
//
// Invariants: a gradient's buffer is not touched by any kernel of the first phase after the
// last one counted for it (the memory plan keeps it live until train.gradsq, after comm_at), so
// the communicator may read and write it from then on; `next` and `ready` are guarded by `mu`.
#include "dl_base.h"
#include "rt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUCKET_BYTES ((size_t)25 << 20) // PyTorch DDP's bucket_cap_mb = 25

typedef struct rt_dp_bucket {
    uint32_t first_piece, n_pieces;
    size_t n;         // floats
    float *stage;     // OWNED when n_pieces > 1, else NULL (reduced in place)
    uint32_t n_touch; // first-phase kernels touching its gradients
    atomic_uint pending;
    uint64_t ticket;
    double comm_ms; // the last step's time on the communicator's thread
    bool ready;     // guarded by mu
    bool started;   // guarded by mu
} rt_dp_bucket;

struct rt_dp {
    dlrt_comm *comm; // BORROWED; NULL for chunks
    float scale;     // 1 / ranks (or chunks)
    int chunks;      // > 1: a session of chunks (no communicator), else 0
    float *sum;      // OWNED (chunks): the pieces' floats, concatenated
    size_t n_sum;
    float *saved; // OWNED (chunks, accumulation): chunks 1..N-1's accumulators, n_acc floats each
    size_t n_acc; // the accumulators' floats (the pieces but the loss)
    uint8_t *in_chunked; // OWNED (chunks): per input (model order), bound with `chunks` batches
    float *loss;         // the float32 loss buffer (a piece), NULL when it is not reduced
    uint32_t n_pieces;
    bool overlap; // start buckets from the done hook (else all after the first phase)
    rt_comm_piece *pieces;
    rt_dp_bucket *b;
    uint32_t n_b;
    uint32_t *k_first, *k_n, *k_list; // per first-phase kernel: the buckets it counts for
    float **coll;      // OWNED: per first-phase kernel, the AllReduceMean output (else NULL)
    size_t *coll_n;    // OWNED: its floats
    size_t coll_bytes; // all of them, per step
    atomic_bool coll_failed;
    _Atomic int64_t coll_ns; // the last step's time in those all-reduces
    pthread_mutex_t mu;
    bool mu_made;
    uint32_t next;   // guarded by mu: the next bucket to start
    bool start_fail; // guarded by mu: a start failed (the communicator is broken)
    uint64_t bytes;
    double wait_ms, comm_ms;
    int last_buckets;
};

void rt__dp_destroy(dlrt_session *s) {
    struct rt_dp *d = s ? s->dp : NULL;
    if (!d) {
        return;
    }
    if (s->exec) {
        rt__exec_set_done_hook(s, RT_SCHED_TRAIN_A, NULL, NULL);
    }
    for (uint32_t i = 0; i < d->n_b; i++) {
        free(d->b[i].stage);
    }
    if (d->mu_made) {
        pthread_mutex_destroy(&d->mu);
    }
    free(d->pieces);
    free(d->sum);
    free(d->saved);
    free(d->in_chunked);
    free(d->b);
    free(d->k_first);
    free(d->k_n);
    free(d->k_list);
    free(d->coll);
    free(d->coll_n);
    free(d);
    s->dp = NULL;
}

// Starts every ready bucket from `next` on, in order. Caller holds mu.
static void start_ready(struct rt_dp *d) {
    while (d->next < d->n_b && d->b[d->next].ready) {
        rt_dp_bucket *b = &d->b[d->next++];
        float *stage = b->stage ? b->stage : d->pieces[b->first_piece].data;
        const rt_comm_piece *pieces = b->stage ? d->pieces + b->first_piece : NULL;
        if (d->start_fail || rt__comm_allreduce_pieces(d->comm, stage, b->n, d->scale, pieces,
                                                       pieces ? b->n_pieces : 0, &b->comm_ms,
                                                       &b->ticket) != DLRT_OK) {
            d->start_fail = true; // reported by the step on its own thread
        } else {
            b->started = true;
        }
    }
}

static void mark_ready(struct rt_dp *d, uint32_t bi) {
    pthread_mutex_lock(&d->mu);
    d->b[bi].ready = true;
    start_ready(d);
    pthread_mutex_unlock(&d->mu);
}

// The executor's done hook for first-phase kernel i: an AllReduceMean's all-reduce (before the
// executor releases the kernels waiting for it), then the bucket counts.
static void kernel_done(void *u, uint32_t i) {
    struct rt_dp *d = u;
    if (d->coll && d->coll[i]) {
        int64_t t0 = rt__now_ns();
        // After a failure the communicator is broken and fails at once: the step reports it.
        if (dlrt_comm_allreduce(d->comm, d->coll[i], d->coll_n[i], d->scale) != DLRT_OK) {
            atomic_store_explicit(&d->coll_failed, true, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&d->coll_ns, rt__now_ns() - t0, memory_order_relaxed);
    }
    if (!d->overlap) {
        return;
    }
    for (uint32_t j = 0; j < d->k_n[i]; j++) {
        uint32_t bi = d->k_list[d->k_first[i] + j];
        // ordering: acq_rel, so the finisher that reaches zero sees every touching kernel's writes
        // (the communicator's thread then reads the gradient after the mutex hand-off).
        if (atomic_fetch_sub_explicit(&d->b[bi].pending, 1, memory_order_acq_rel) == 1) {
            mark_ready(d, bi);
        }
    }
}

// The step's verdict on its AllReduceMean all-reduces (run on worker threads): the
// communicator's sticky error, reported again on this thread.
static dlrt_status coll_status(struct rt_dp *d) {
    if (!atomic_exchange_explicit(&d->coll_failed, false, memory_order_relaxed)) {
        return DLRT_OK;
    }
    dlrt_status st = dlrt_comm_wait(d->comm, 0);
    return st != DLRT_OK ? st
                         : rt__fail(DLRT_ERR_IO, "an all-reduce of BatchNorm statistics failed");
}

// Whether this call communicates: always without accumulation; with accumulate = k only the
// k-th call of a cycle (the hyper buffer's micro-step count is that of the calls before it).
static dlrt_status is_boundary(dlrt_session *s, bool *out) {
    double h[DLRT_HP_COUNT];
    dlrt_status st = rt__buf_read(s, s->model->hdr->hyper_buffer, h);
    if (st == DLRT_OK) {
        *out =
            h[DLRT_HP_ACCUMULATE] <= 1.0 || h[DLRT_HP_ACCUM_COUNT] + 1.0 >= h[DLRT_HP_ACCUMULATE];
    }
    return st;
}

// Chunk r's saved accumulators (r >= 1) into the accumulator buffers (is_load), or back.
static void chunk_accums(struct rt_dp *d, int r, bool is_load) {
    float *c = d->saved + (size_t)(r - 1) * d->n_acc;
    for (uint32_t p = 0; p < d->n_pieces; p++) {
        float *g = d->pieces[p].data;
        size_t n = d->pieces[p].n;
        if (g != d->loss) {
            memcpy(is_load ? g : c, is_load ? c : g, n * sizeof *g);
            c += n;
        }
    }
}

// A session of chunks: the first phase once per chunk, the pieces summed in chunk order and
// scaled as the plugin's all-reduce does (rt_comm_mpi.c, op_allreduce_f32), then the rest. With
// accumulation, chunk r's first phase adds into its own accumulators, and a call that is no
// boundary reduces the loss alone, as rt__dp_train_step does.
static dlrt_status chunk_step(dlrt_session *s, struct rt_dp *d) {
    const dlrt_model *m = s->model;
    bool boundary = true;
    dlrt_status st = is_boundary(s, &boundary);
    if (st != DLRT_OK) {
        return st;
    }
    for (size_t i = 0; i < m->n_inputs; i++) {
        if (s->input_given && s->input_given[i] && !d->in_chunked[i]) {
            const dlrt_plan_tensor *t = &m->tensors[m->first_input + i];
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "input '%s' holds one batch: a session of %d chunks takes every input "
                            "through dlrt_session_bind_input with %d batches (%llu bytes)",
                            m->tensor_names[m->first_input + i], d->chunks, d->chunks,
                            (unsigned long long)m->buffers[t->buffer].size * (unsigned)d->chunks);
        }
    }
    int64_t t0 = rt__now_ns();
    for (int r = 0; r < d->chunks; r++) {
        for (size_t i = 0; i < m->n_inputs && r > 0; i++) {
            if (d->in_chunked[i]) { // chunk r of every input; chunk 0 is where it was bound
                uint32_t b = m->tensors[m->first_input + i].buffer;
                size_t size = (size_t)m->buffers[b].size;
                rt__session_point_input(s, b, (uint8_t *)s->buf_ptr[b] + size);
            }
        }
        if (d->saved && r > 0) {
            chunk_accums(d, r, true);
        }
        rt__run_sched(s, RT_SCHED_TRAIN_A);
        float *acc = d->sum;
        for (uint32_t p = 0; p < d->n_pieces; p++) {
            const float *g = d->pieces[p].data;
            size_t n = d->pieces[p].n;
            if (r == 0) { // off a boundary: chunk 0's accumulators, kept for the rest
                memcpy(acc, g, n * sizeof *g);
            } else if (boundary || g == d->loss) {
                for (size_t i = 0; i < n; i++) {
                    acc[i] += g[i];
                }
            }
            acc += n;
        }
        if (d->saved && r > 0) {
            chunk_accums(d, r, false);
        }
    }
    for (size_t i = 0; i < m->n_inputs; i++) { // back to chunk 0
        if (d->in_chunked[i]) {
            uint32_t b = m->tensors[m->first_input + i].buffer;
            size_t size = (size_t)m->buffers[b].size;
            rt__session_point_input(s, b,
                                    (uint8_t *)s->buf_ptr[b] - size * (size_t)(d->chunks - 1));
        }
    }
    const float *acc = d->sum;
    for (uint32_t p = 0; p < d->n_pieces; p++) {
        float *g = d->pieces[p].data;
        bool reduced = boundary || g == d->loss;
        for (size_t i = 0; i < d->pieces[p].n; i++) {
            g[i] = reduced && d->scale != 1.0f ? acc[i] * d->scale : acc[i];
        }
        acc += d->pieces[p].n;
    }
    rt__run_sched(s, RT_SCHED_TRAIN_B);
    if (boundary && d->saved) { // the rest zeroed the buffers (skipped or not): the others too
        memset(d->saved, 0, (size_t)(d->chunks - 1) * d->n_acc * sizeof *d->saved);
    }
    if (s->prof) {
        rt__prof_step(s, DLRT_ENTRY_TRAIN_STEP, t0, rt__now_ns());
    }
    return DLRT_OK;
}

dlrt_status rt__dp_train_step(dlrt_session *s) {
    struct rt_dp *d = s->dp;
    if (d->chunks > 1) {
        return chunk_step(s, d);
    }
    bool boundary = true;
    dlrt_status st = is_boundary(s, &boundary);
    if (st != DLRT_OK) {
        return st;
    }
    d->wait_ms = d->comm_ms = 0;
    d->last_buckets = 0;
    if (d->n_b == 0) {
        return rt__session_run(s, DLRT_ENTRY_TRAIN_STEP);
    }
    int64_t t0 = rt__now_ns();
    atomic_store_explicit(&d->coll_ns, 0, memory_order_relaxed);
    if (!boundary) { // the loss alone (nothing else is due): every rank's guard sees the same
        rt__run_sched(s, RT_SCHED_TRAIN_A);
        st = coll_status(d);
        if (d->loss && st == DLRT_OK) {
            int64_t tw = rt__now_ns();
            st = dlrt_comm_allreduce(d->comm, d->loss, 1, d->scale);
            d->wait_ms = (double)(rt__now_ns() - tw) * 1e-6;
        }
        if (st != DLRT_OK) {
            return st;
        }
        rt__run_sched(s, RT_SCHED_TRAIN_B);
        if (s->prof) {
            rt__prof_step(s, DLRT_ENTRY_TRAIN_STEP, t0, rt__now_ns());
        }
        return DLRT_OK;
    }
    d->next = 0;
    d->start_fail = false;
    for (uint32_t i = 0; i < d->n_b; i++) {
        atomic_store_explicit(&d->b[i].pending, d->b[i].n_touch, memory_order_relaxed);
        d->b[i].ready = d->b[i].n_touch == 0;
        d->b[i].started = false;
        d->b[i].comm_ms = 0;
    }
    if (d->overlap) {
        pthread_mutex_lock(&d->mu);
        start_ready(d); // buckets no first-phase kernel touches
        pthread_mutex_unlock(&d->mu);
    }
    rt__run_sched(s, RT_SCHED_TRAIN_A);
    if ((st = coll_status(d)) != DLRT_OK) {
        return st;
    }
    pthread_mutex_lock(&d->mu);
    for (uint32_t i = 0; i < d->n_b; i++) {
        d->b[i].ready = true; // every first-phase kernel has finished
    }
    start_ready(d);
    bool failed = d->start_fail;
    pthread_mutex_unlock(&d->mu);
    int64_t tw = rt__now_ns();
    for (uint32_t i = 0; i < d->n_b && st == DLRT_OK; i++) {
        st = d->b[i].started ? dlrt_comm_wait(d->comm, d->b[i].ticket) : DLRT_OK;
    }
    if (st == DLRT_OK && failed) {
        st = dlrt_comm_wait(d->comm, 0); // the communicator's error, on this thread
    }
    d->wait_ms = (double)(rt__now_ns() - tw) * 1e-6;
    if (st != DLRT_OK) {
        return st;
    }
    for (uint32_t i = 0; i < d->n_b; i++) {
        d->comm_ms += d->b[i].comm_ms;
    }
    d->comm_ms += (double)atomic_load_explicit(&d->coll_ns, memory_order_relaxed) * 1e-6;
    d->last_buckets = (int)d->n_b;
    rt__run_sched(s, RT_SCHED_TRAIN_B);
    if (s->prof) {
        rt__prof_step(s, DLRT_ENTRY_TRAIN_STEP, t0, rt__now_ns());
    }
    return DLRT_OK;
}

void dlrt_session_comm_stats(const dlrt_session *s, double *out_wait_ms, double *out_comm_ms,
                             uint64_t *out_bytes, int *out_buckets) {
    const struct rt_dp *d = s ? s->dp : NULL;
    if (out_wait_ms) {
        *out_wait_ms = d ? d->wait_ms : 0;
    }
    if (out_comm_ms) {
        *out_comm_ms = d ? d->comm_ms : 0;
    }
    if (out_bytes) {
        *out_bytes = d && d->last_buckets ? d->bytes + d->coll_bytes : 0;
    }
    if (out_buckets) {
        *out_buckets = d ? d->last_buckets : 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Binding

// What every rank must agree on: the plan (kernels, memory plan, target) and the params.
typedef struct dp_identity {
    uint64_t plan_lo, plan_hi;
    uint64_t shapes_lo, shapes_hi;
    uint64_t n_params, n_grads;
} dp_identity;

static dlrt_status identity_of(const dlrt_model *m, dp_identity *out) {
    memset(out, 0, sizeof *out);
    dl_hash128 p = dl_hash128_of(m->plan, (size_t)m->hdr->total_size);
    out->plan_lo = p.lo;
    out->plan_hi = p.hi;
    // Param names, dtypes and shapes, as text: "name:dtype:d0,d1;".
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        cap += strlen(m->tensor_names[m->first_param + i]) + 32 + 21 * DLRT_MAX_RANK;
    }
    char *txt = dl_mem_alloc(cap);
    if (!txt) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < m->n_params; i++) {
        const dlrt_plan_tensor *t = &m->tensors[m->first_param + i];
        int w =
            snprintf(txt + len, cap - len, "%s:%u:", m->tensor_names[m->first_param + i], t->dtype);
        len += w > 0 ? (size_t)w : 0;
        for (uint32_t k = 0; k < t->rank; k++) {
            w = snprintf(txt + len, cap - len, "%lld,", (long long)t->dims[k]);
            len += w > 0 ? (size_t)w : 0;
        }
        txt[len++] = ';';
    }
    dl_hash128 sh = dl_hash128_of(txt, len);
    free(txt);
    out->shapes_lo = sh.lo;
    out->shapes_hi = sh.hi;
    out->n_params = m->n_params;
    out->n_grads = m->hdr->n_grads;
    return DLRT_OK;
}

// Every rank gathers every rank's identity and compares it with rank 0's, so all ranks reach the
// same verdict (and all fail, naming the same rank, when one differs).
static dlrt_status check_identity(dlrt_session *s, dlrt_comm *c) {
    dp_identity mine;
    dlrt_status st = identity_of(s->model, &mine);
    if (st != DLRT_OK) {
        return st;
    }
    int n = dlrt_comm_size(c);
    dp_identity *all = dl_mem_calloc((size_t)n, sizeof *all);
    if (!all) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    st = rt__comm_allgather(c, &mine, all, sizeof mine);
    for (int r = 1; r < n && st == DLRT_OK; r++) {
        const dp_identity *a = &all[0], *b = &all[r];
        if (a->shapes_lo != b->shapes_lo || a->shapes_hi != b->shapes_hi ||
            a->n_params != b->n_params) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data-parallel start-up check: rank %d's model differs from rank 0's "
                          "(%llu params vs %llu, names, dtypes and shapes compared): every rank "
                          "must train the same model",
                          r, (unsigned long long)b->n_params, (unsigned long long)a->n_params);
        } else if (a->plan_lo != b->plan_lo || a->plan_hi != b->plan_hi ||
                   a->n_grads != b->n_grads) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data-parallel start-up check: rank %d runs a different artifact than "
                          "rank 0 (plan digest %016llx%016llx vs %016llx%016llx): compile the "
                          "same model with the same dlcc, options and target on every rank",
                          r, (unsigned long long)b->plan_hi, (unsigned long long)b->plan_lo,
                          (unsigned long long)a->plan_hi, (unsigned long long)a->plan_lo);
        }
    }
    free(all);
    return st;
}

// Rank 0's params, optimizer state and step state, to every rank (DDP's initial broadcast).
// PACKED buffers are not sent (each rank makes its own from the params it receives): the
// broadcast marks them stale instead.
static dlrt_status broadcast_state(dlrt_session *s, dlrt_comm *c) {
    const dlrt_model *m = s->model;
    s->packed_stale = true;
    for (uint32_t i = 0; i < m->hdr->n_buffers; i++) {
        const dlrt_plan_buffer *b = &m->buffers[i];
        if ((b->kind != DLRT_BUF_PARAM && b->kind != DLRT_BUF_STATE) || b->size == 0) {
            continue;
        }
        dlrt_status st = dlrt_comm_broadcast(c, s->buf_ptr[i], (size_t)b->size, 0);
        if (st != DLRT_OK) {
            return st;
        }
    }
    return DLRT_OK;
}

// A reduced buffer: a gradient (or accumulator), or the loss.
typedef struct dp_item {
    uint32_t buffer;
    size_t numel;
} dp_item;

// The buffers reduced: each dlrt_plan_grad buffer, then the loss when it is a float32 scalar (a
// float16 or bfloat16 loss stays per rank). *out is OWNED by the caller.
static dlrt_status reduced_items(dlrt_session *s, dp_item **out, uint32_t *out_n) {
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t ng = h->n_grads;
    bool has_loss =
        ng > 0 && h->loss_buffer < h->n_buffers && m->buffers[h->loss_buffer].size == sizeof(float);
    dp_item *it = dl_mem_calloc((size_t)ng + 1, sizeof *it);
    if (!it) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t g = 0; g < ng; g++) {
        it[g] = (dp_item){m->grads[g].buffer, (size_t)m->grads[g].numel};
    }
    if (has_loss) {
        it[ng] = (dp_item){h->loss_buffer, 1};
        s->dp->loss = (float *)s->buf_ptr[h->loss_buffer];
    }
    *out = it;
    *out_n = ng + has_loss;
    return DLRT_OK;
}

typedef struct grad_order {
    uint32_t grad, last; // item index; position of the last first-phase kernel touching it
} grad_order;

static int cmp_order(const void *a, const void *b) {
    const grad_order *p = a, *q = b;
    if (p->last != q->last) {
        return p->last < q->last ? -1 : 1;
    }
    return p->grad < q->grad ? -1 : p->grad > q->grad;
}

static size_t bucket_setting(size_t requested) {
    if (requested > 0) {
        return requested;
    }
    const char *env = getenv("DLRT_BUCKET_BYTES");
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end && v > 0) {
            return (size_t)v;
        }
    }
    return DEFAULT_BUCKET_BYTES;
}

// Buckets and the touch lists (which first-phase kernel counts for which bucket).
static dlrt_status build_buckets(dlrt_session *s, struct rt_dp *d, size_t bucket_bytes) {
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t ng = 0, at = h->comm_at, first = h->entry_first[DLRT_ENTRY_TRAIN_STEP];
    dp_item *it = NULL;
    dlrt_status st = reduced_items(s, &it, &ng);
    if (st != DLRT_OK) {
        return st;
    }
    grad_order *ord = dl_mem_calloc(ng ? ng : 1, sizeof *ord);
    uint32_t *bucket_of = dl_mem_calloc(ng ? ng : 1, sizeof *bucket_of);
    d->pieces = dl_mem_calloc(ng ? ng : 1, sizeof *d->pieces);
    d->b = dl_mem_calloc(ng ? ng : 1, sizeof *d->b);
    d->k_first = dl_mem_calloc(at ? at : 1, sizeof *d->k_first);
    d->k_n = dl_mem_calloc(at ? at : 1, sizeof *d->k_n);
    if (!ord || !bucket_of || !d->pieces || !d->b || !d->k_first || !d->k_n) {
        st = rt__fail(DLRT_ERR_NOMEM, "out of memory");
        goto out;
    }
    // Readiness: the last first-phase kernel with an argument in the gradient's buffer.
    for (uint32_t g = 0; g < ng; g++) {
        ord[g].grad = g;
        ord[g].last = 0;
        for (uint32_t i = 0; i < at; i++) {
            const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
            for (uint32_t a = 0; a < k->n_args; a++) {
                if (m->args[k->first_arg + a] == it[g].buffer) {
                    ord[g].last = i + 1;
                }
            }
        }
    }
    qsort(ord, ng, sizeof *ord, cmp_order);
    // Buckets in order of readiness, at most bucket_bytes each (a larger gradient alone).
    size_t bytes = 0;
    for (uint32_t j = 0; j < ng; j++) {
        const dp_item *g = &it[ord[j].grad];
        size_t gb = g->numel * sizeof(float);
        if (d->n_b == 0 || bytes + gb > bucket_bytes) {
            d->b[d->n_b].first_piece = j;
            d->n_b++;
            bytes = 0;
        }
        rt_dp_bucket *b = &d->b[d->n_b - 1];
        b->n_pieces++;
        b->n += g->numel;
        bytes += gb;
        d->pieces[j] = (rt_comm_piece){(float *)s->buf_ptr[g->buffer], g->numel};
        bucket_of[ord[j].grad] = d->n_b - 1;
        d->bytes += gb;
    }
    size_t largest = 0;
    for (uint32_t i = 0; i < d->n_b; i++) {
        rt_dp_bucket *b = &d->b[i];
        largest = b->n > largest ? b->n : largest;
        if (b->n_pieces > 1) {
            b->stage = dl_mem_alloc(b->n ? b->n * sizeof(float) : 1);
            if (!b->stage) {
                st = rt__fail(DLRT_ERR_NOMEM, "out of memory (gradient buckets)");
                goto out;
            }
        }
    }
    if ((st = rt__comm_reserve(d->comm, largest)) != DLRT_OK) {
        goto out;
    }
    // Touch lists: kernel i counts once for each bucket it touches a gradient of.
    size_t n_list = 0;
    for (int pass = 0; pass < 2; pass++) {
        n_list = 0;
        for (uint32_t i = 0; i < at; i++) {
            const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
            d->k_first[i] = (uint32_t)n_list;
            d->k_n[i] = 0;
            for (uint32_t a = 0; a < k->n_args; a++) {
                for (uint32_t g = 0; g < ng; g++) {
                    if (m->args[k->first_arg + a] != it[g].buffer) {
                        continue;
                    }
                    uint32_t bi = bucket_of[g];
                    bool seen = false;
                    for (uint32_t q = 0; q < d->k_n[i] && pass == 1; q++) {
                        seen |= d->k_list[d->k_first[i] + q] == bi;
                    }
                    if (pass == 1 && !seen) {
                        d->k_list[n_list] = bi;
                        d->b[bi].n_touch++;
                    }
                    if (!seen) {
                        d->k_n[i]++;
                        n_list++;
                    }
                }
            }
        }
        if (pass == 0) {
            d->k_list = dl_mem_calloc(n_list ? n_list : 1, sizeof *d->k_list);
            if (!d->k_list) {
                st = rt__fail(DLRT_ERR_NOMEM, "out of memory");
                goto out;
            }
        }
    }
out:
    free(it);
    free(ord);
    free(bucket_of);
    return st;
}

// Whether the train step has AllReduceMean kernels (format 7), and that they all lie in its
// first phase (before comm_at) when *out_n is given: their count.
static dlrt_status count_collectives(const dlrt_session *s, uint32_t *out_n) {
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t first = h->entry_first[DLRT_ENTRY_TRAIN_STEP], n = 0;
    for (uint32_t i = 0; i < h->entry_count[DLRT_ENTRY_TRAIN_STEP]; i++) {
        const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
        if (!(k->flags & DLRT_KERNEL_F_ALLREDUCE_MEAN)) {
            continue;
        }
        if (h->n_grads == 0 || i >= h->comm_at) {
            return rt__fail(DLRT_ERR_CORRUPT,
                            "the train step has an all-reduce kernel after its all-reduce point");
        }
        n++;
    }
    *out_n = n;
    return DLRT_OK;
}

// The AllReduceMean outputs of the first phase, per kernel (NULL when it has none).
static dlrt_status build_collectives(dlrt_session *s, struct rt_dp *d) {
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t n = 0, at = h->comm_at, first = h->entry_first[DLRT_ENTRY_TRAIN_STEP];
    dlrt_status st = count_collectives(s, &n);
    if (st != DLRT_OK || n == 0) {
        return st;
    }
    d->coll = dl_mem_calloc(at, sizeof *d->coll);
    d->coll_n = dl_mem_calloc(at, sizeof *d->coll_n);
    if (!d->coll || !d->coll_n) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < at; i++) {
        const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
        if (k->flags & DLRT_KERNEL_F_ALLREDUCE_MEAN) {
            uint32_t b = m->args[k->first_arg];
            d->coll[i] = (float *)s->buf_ptr[b];
            d->coll_n[i] = (size_t)m->buffers[b].size / sizeof(float);
            d->coll_bytes += (size_t)m->buffers[b].size;
        }
    }
    d->overlap = false; // one order of operations on every rank (see the file's comment)
    return DLRT_OK;
}

// What data-parallel steps (a communicator or chunks) need of the session.
static dlrt_status check_parallel(const dlrt_session *s) {
    const dlrt_model *m = s->model;
    if (!dlrt_model_has_train_step(m)) {
        return rt__fail(DLRT_ERR_UNSUPPORTED, "model '%s' has no train step to run in parallel",
                        m->name);
    }
    if (!(s->dev.ops->caps & RT_DEVCAP_HOST_MEMORY)) {
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "data-parallel training runs on CPU sessions only (this one is on %s)",
                        s->dev.ops->name);
    }
    for (uint32_t g = 0; g < m->hdr->n_grads; g++) {
        if (m->grads[g].dtype != DLRT_DT_FLOAT) {
            return rt__fail(DLRT_ERR_UNSUPPORTED,
                            "data-parallel training reduces float32 gradients; param '%s' has "
                            "a gradient of another type",
                            m->tensor_names[m->first_param + m->grads[g].param]);
        }
    }
    return DLRT_OK;
}

// s->dp for `ways` ranks or chunks: the scale 1 / ways the mean over them needs.
static dlrt_status dp_new(dlrt_session *s, int ways, struct rt_dp **out) {
    struct rt_dp *d = dl_mem_calloc(1, sizeof *d);
    if (!d) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    d->scale = (float)(1.0 / (double)ways);
    s->dp = d;
    *out = d;
    return DLRT_OK;
}

int dlrt_session_chunks(const dlrt_session *s) {
    return s && s->dp && s->dp->chunks > 1 ? s->dp->chunks : 1;
}

void rt__dp_input_bound(dlrt_session *s, size_t input, bool is_chunked) {
    if (s->dp && s->dp->chunks > 1) {
        s->dp->in_chunked[input] = is_chunked;
    }
}

dlrt_status dlrt_session_set_chunks(dlrt_session *s, int n_chunks) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_set_chunks: session is NULL");
    }
    if (n_chunks < 1 || n_chunks > DLRT_MAX_CHUNKS) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_set_chunks: %d chunks (1..%d)",
                        n_chunks, DLRT_MAX_CHUNKS);
    }
    if (s->dp && s->dp->comm) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "dlrt_session_set_chunks: the session is bound to a communicator (its "
                        "ranks are the chunks)");
    }
    rt__dp_destroy(s);
    if (n_chunks == 1) {
        return DLRT_OK;
    }
    struct rt_dp *d = NULL;
    uint32_t n_coll = 0;
    dlrt_status st = check_parallel(s);
    if (st == DLRT_OK && (st = count_collectives(s, &n_coll)) == DLRT_OK && n_coll > 0) {
        st = rt__fail(DLRT_ERR_UNSUPPORTED,
                      "dlrt_session_set_chunks: model '%s' synchronises BatchNorm statistics "
                      "across ranks (sync_batchnorm: %u all-reduces inside the step), which a "
                      "session of chunks run one after another cannot reproduce",
                      s->model->name, n_coll);
    }
    if (st == DLRT_OK) {
        st = dp_new(s, n_chunks, &d);
    }
    if (st != DLRT_OK) {
        return st;
    }
    d->chunks = n_chunks;
    dp_item *it = NULL;
    st = reduced_items(s, &it, &d->n_pieces);
    if (st == DLRT_OK) {
        d->pieces = dl_mem_calloc(d->n_pieces ? d->n_pieces : 1, sizeof *d->pieces);
        d->in_chunked = dl_mem_calloc(s->model->n_inputs ? s->model->n_inputs : 1, 1);
        for (uint32_t p = 0; d->pieces && p < d->n_pieces; p++) {
            d->pieces[p] = (rt_comm_piece){(float *)s->buf_ptr[it[p].buffer], it[p].numel};
            d->n_sum += it[p].numel;
        }
        d->sum = dl_mem_alloc(d->n_sum ? d->n_sum * sizeof(float) : 1);
        if (!d->pieces || !d->in_chunked || !d->sum) {
            st = rt__fail(DLRT_ERR_NOMEM, "out of memory (%zu floats of chunk sums)", d->n_sum);
        }
    }
    double h[DLRT_HP_COUNT];
    if (st == DLRT_OK && (st = rt__buf_read(s, s->model->hdr->hyper_buffer, h)) == DLRT_OK &&
        h[DLRT_HP_ACCUMULATE] > 1.0) { // every chunk but 0 keeps its accumulators here
        d->n_acc = d->n_sum - (d->loss ? 1 : 0);
        size_t n = (size_t)(n_chunks - 1) * d->n_acc;
        d->saved = dl_mem_calloc(n ? n : 1, sizeof *d->saved);
        if (!d->saved) {
            st = rt__fail(DLRT_ERR_NOMEM, "out of memory (%zu floats of chunk accumulators)", n);
        }
    }
    free(it);
    if (st != DLRT_OK) {
        rt__dp_destroy(s);
    }
    return st;
}

dlrt_status dlrt_session_bind_comm(dlrt_session *s, dlrt_comm *c, size_t bucket_bytes) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_bind_comm: session is NULL");
    }
    if (c && s->dp && s->dp->chunks > 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "dlrt_session_bind_comm: the session runs %d chunks (set 1 first)",
                        s->dp->chunks);
    }
    rt__dp_destroy(s);
    if (!c) {
        return DLRT_OK;
    }
    dlrt_status st = check_parallel(s);
    if (st == DLRT_OK) {
        st = check_identity(s, c);
    }
    if (st == DLRT_OK) {
        st = broadcast_state(s, c);
    }
    struct rt_dp *d = NULL;
    if (st == DLRT_OK) {
        st = dp_new(s, dlrt_comm_size(c), &d);
    }
    if (st != DLRT_OK) {
        return st;
    }
    d->comm = c;
    const char *ov = getenv("DLRT_COMM_OVERLAP");
    d->overlap = !(ov && strcmp(ov, "0") == 0);
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        rt__dp_destroy(s);
        return rt__fail(DLRT_ERR_NOMEM, "cannot create a mutex");
    }
    d->mu_made = true;
    if ((st = build_buckets(s, d, bucket_setting(bucket_bytes))) != DLRT_OK ||
        (st = build_collectives(s, d)) != DLRT_OK) {
        rt__dp_destroy(s);
        return st;
    }
    if (d->overlap || d->coll) {
        rt__exec_set_done_hook(s, RT_SCHED_TRAIN_A, kernel_done, d);
    }
    return DLRT_OK;
}
