// runtime/rt_loader.c — the data loader (dlrt.h, "Data loader"): P producer threads fill a ring
// of K preallocated batch slots that the trainer borrows in place.
//
// Structure: a source (an in-memory array read at creation from IDX or .npy, or a user callback)
// plus int64 labels, or N named arrays (rt_array: any dtype, each with its own ring and
// normalisation); a ring of K slots, each holding B samples of x (float32) and B labels (or B rows
// of every array); one mutex with two condition variables (slot freed / slot filled) that guard
// every slot state.
//
// Invariants (ORDER LOADER):
//   - batches form one sequence seq = start_batch, start_batch + 1, ... (epoch = seq / bpe,
//     index = seq % bpe); batch seq lives in slot seq % K. slot.seq is the batch the slot holds or
//     will hold next: it starts at the first seq >= start_batch of its residue and grows by K when
//     its batch is released, so a producer that claimed seq waits for state FREE with slot.seq ==
//     seq, and the consumer for READY with slot.seq == seq.
//   - producers claim seq under the mutex in increasing order and fill outside it; the consumer
//     takes seq in increasing order. A batch's bytes are a pure function of (options, seed, seq):
//     the sample order is a keyed Feistel permutation per epoch and crop/flip draw from
//     dl_rng_bits keyed on (seed, epoch, sample index), so results do not depend on P or timing.
//   - with shards (shard_count W > 1), position p of rank r's epoch is position (p * W + r) mod n
//     of the epoch-wide order (DistributedSampler: every W-th sample, the last W - 1 positions
//     wrapping round to the start), so the W shards of an epoch cover every sample;
//   - with every shard at once (shard_index DLRT_LOADER_ALL_SHARDS), row j of batch b (position
//     b * B + j) is row j mod (B / W) of shard j / (B / W)'s batch b (of B / W rows);
//   - nothing is allocated after creation: slots and per-producer scratch rows are made once.
#include "dl_base.h"
#include "dl_idx.h"
#include "dl_tensor_io.h"
#include "dlrt.h"
#include "rt_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Element types of an in-memory source.
typedef enum src_type { SRC_U8, SRC_I8, SRC_I16, SRC_I32, SRC_I64, SRC_F32, SRC_F64 } src_type;

typedef enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD } slot_state;

// A named array of dlrt_loader_create_arrays: row i of the file is sample i (ORDER LOADER).
typedef struct rt_array {
    char *name, *path;   // OWNED copies
    const uint8_t *data; // the rows: n * numel elements of `type` (in npy_buf or idx)
    src_type type;
    char *npy_buf; // OWNED (.npy)
    dl_idx idx;    // OWNED (IDX)
    int32_t rank;  // per-sample shape (0 for a [S] file)
    int64_t dims[DLRT_MAX_DIMS];
    int64_t numel;
    dlrt_dtype dtype; // of the batch: DLRT_FLOAT32, DLRT_INT32 or DLRT_INT64
    size_t esz;       // its element size
    int64_t n_classes;
    int n_ch;          // normalisation channels (0: none)
    float *mean, *std; // OWNED: n_ch each
    uint8_t *ring;     // OWNED: K * B * numel * esz bytes, slot s at s * B * numel * esz
} rt_array;

typedef struct rt_slot {
    slot_state state;
    int64_t seq;     // batch held or to be held next (ORDER LOADER)
    int64_t n_valid; // of the batch in it, once READY
} rt_slot;

struct dlrt_loader {
    dlrt_loader_options o;
    int64_t n, numel, bpe, total; // samples, floats per sample, batches per epoch, seq limit
    int64_t epoch_n; // positions per epoch of this shard (n without shards; every shard's
                     // together with DLRT_LOADER_ALL_SHARDS)
    int32_t rank;
    int64_t dims[DLRT_MAX_DIMS];
    int64_t img_c, img_h, img_w; // image view of a sample (rank 2 or 3), else 0
    int n_ch;                    // normalisation channels
    float mean[DLRT_LOADER_MAX_CHANNELS], std[DLRT_LOADER_MAX_CHANNELS];
    int half_bits; // Feistel half width: the permutation domain is 2^(2 * half_bits) >= n

    // Source: `data` (type `type`, n * numel elements) or the callback.
    const uint8_t *data;
    src_type type;
    dl_idx idx;    // OWNED when read from IDX (data points into it)
    char *npy_buf; // OWNED when read from .npy (data points into it)
    dlrt_loader_sample_fn fn;
    void *user;                  // BORROWED
    int64_t *labels;             // OWNED: n labels, or NULL when there are none
    rt_array *arr;               // OWNED: the named arrays (dlrt_loader_create_arrays), or NULL
    size_t n_arr;                // their count; 0 for the other sources (x and labels)
    const char *x_path, *y_path; // BORROWED, during creation only: the files, for messages

    // Ring.
    rt_slot *slots;   // OWNED: K
    float *x;         // OWNED: K * B * numel, slot s at s * B * numel
    int64_t *y64;     // OWNED: K * B (labels int64) or NULL
    int32_t *y32;     // OWNED: K * B (labels int32) or NULL
    float *scratch;   // OWNED: P * numel, one raw sample per producer
    pthread_t *thr;   // OWNED: P
    int n_started;    // threads running
    bool sync_made;   // mutex and condition variables initialised
    atomic_bool stop; // set by destroy; producers also read it between samples
    pthread_mutex_t mu;
    pthread_cond_t freed, filled;
    int64_t next_claim, next_take; // guarded by mu
    dlrt_status fail_st;           // DLRT_OK, or the first producer failure (sticky), under mu
    char fail_msg[512];

    // Statistics, under mu.
    int64_t n_batches;
    double first_wait_ms, sum_wait_ms, max_wait_ms;
};

// Returns from the enclosing function when `expr` is not DLRT_OK (the message is already set).
#define TRY_RT(expr)                                                                               \
    do {                                                                                           \
        dlrt_status st_ = (expr);                                                                  \
        if (st_ != DLRT_OK) {                                                                      \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct producer_arg {
    dlrt_loader *l;
    int id;
} producer_arg;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static size_t src_size(src_type t) {
    switch (t) {
    case SRC_U8:
    case SRC_I8:
        return 1;
    case SRC_I16:
        return 2;
    case SRC_I32:
    case SRC_F32:
        return 4;
    case SRC_I64:
    case SRC_F64:
        return 8;
    }
    return 0;
}

static bool src_is_int(src_type t) {
    return t != SRC_F32 && t != SRC_F64;
}

// Element i of `p` (type t) as a double. memcpy: .npy data need not be aligned.
static double src_get(const uint8_t *p, src_type t, int64_t i) {
    switch (t) {
    case SRC_U8:
        return (double)p[i];
    case SRC_I8:
        return (double)(int8_t)p[i];
    case SRC_I16: {
        int16_t v;
        memcpy(&v, p + 2 * i, 2);
        return (double)v;
    }
    case SRC_I32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return (double)v;
    }
    case SRC_I64: {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        return (double)v;
    }
    case SRC_F32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return (double)v;
    }
    case SRC_F64: {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    }
    return 0.0;
}

// ---------------------------------------------------------------------------------------------
// Sample order and augmentation draws

static uint64_t epoch_key(const dlrt_loader *l, int64_t epoch, int which) {
    return dl_rng_bits(l->o.seed, 2 * (uint64_t)epoch + (uint64_t)which);
}

// A keyed bijection on [0, 2^(2h)): six Feistel rounds over the two h-bit halves.
static uint64_t feistel(uint64_t key, int h, uint64_t x) {
    uint64_t mask = (1ull << h) - 1, lo = x & mask, hi = x >> h;
    for (uint64_t r = 0; r < 6; r++) {
        uint64_t t = hi ^ (dl_rng_bits(key + r, lo) & mask);
        hi = lo;
        lo = t;
    }
    return (hi << h) | lo;
}

// The data-set index of position `pos` of an epoch. Cycle walking restricts the bijection on
// the power-of-four domain to [0, n): the domain is < 4n, so a walk is short on average.
// `shard`: the shard `pos` is a position of (ignored without shards).
static int64_t sample_at(const dlrt_loader *l, uint64_t key, int64_t pos, int64_t shard) {
    if (l->o.shard_count > 1) { // the shard's position -> the epoch's (ORDER LOADER)
        pos = (pos * l->o.shard_count + shard) % l->n;
    }
    if (!l->o.shuffle) {
        return pos;
    }
    uint64_t x = (uint64_t)pos;
    do {
        x = feistel(key, l->half_bits, x);
    } while (x >= (uint64_t)l->n);
    return (int64_t)x;
}

// The data-set index of row j of batch b of an epoch (ORDER LOADER).
static int64_t row_sample(const dlrt_loader *l, uint64_t key, int64_t b, int64_t j) {
    int64_t B = l->o.batch_size;
    if (l->o.shard_index == DLRT_LOADER_ALL_SHARDS) {
        int64_t bs = B / l->o.shard_count;
        return sample_at(l, key, b * bs + j % bs, j / bs);
    }
    return sample_at(l, key, b * B + j, l->o.shard_index);
}

// ---------------------------------------------------------------------------------------------
// Producing

// The first non-finite value of x[0 .. n), or -1.
static int64_t first_nonfinite(const float *x, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        if (!isfinite(x[k])) {
            return k;
        }
    }
    return -1;
}

// Raw sample `idx` times scale into raw[0 .. numel). Returns the callback's nonzero result.
static int decode(const dlrt_loader *l, int64_t idx, float *raw, int64_t *label) {
    *label = l->labels ? l->labels[idx] : 0;
    if (l->fn) {
        int rc = l->fn(l->user, idx, raw, label);
        if (rc != 0) {
            return rc;
        }
        if (l->o.scale != 1.0f) {
            for (int64_t i = 0; i < l->numel; i++) {
                raw[i] *= l->o.scale;
            }
        }
        return 0;
    }
    const uint8_t *p = l->data + (size_t)idx * (size_t)l->numel * src_size(l->type);
    if (l->type == SRC_U8) { // the common case (IDX images), without the switch per element
        float sc = l->o.u8_to_unit ? l->o.scale / 255.0f : l->o.scale;
        for (int64_t i = 0; i < l->numel; i++) {
            raw[i] = (float)p[i] * sc;
        }
        return 0;
    }
    for (int64_t i = 0; i < l->numel; i++) {
        raw[i] = (float)src_get(p, l->type, i) * l->o.scale;
    }
    return 0;
}

// raw -> out: crop and flip (images only), then normalisation. `draw` holds the sample's random
// bits: crop offsets from bits 0.. and 21.., the flip from bit 63.
static void transform(const dlrt_loader *l, const float *raw, uint64_t draw, float *out) {
    int64_t C = l->img_c, H = l->img_h, W = l->img_w, p = l->o.crop_pad;
    bool image = (p > 0 || l->o.hflip) && H > 0;
    int64_t per_ch = l->n_ch > 1 ? l->numel / l->n_ch : l->numel; // elements per norm channel
    if (!image) {
        for (int64_t i = 0; i < l->numel; i++) {
            int c = l->n_ch > 1 ? (int)(i / per_ch) : 0;
            out[i] = (raw[i] - l->mean[c]) / l->std[c];
        }
        return;
    }
    int64_t dy = p, dx = p; // no crop: offsets that cancel the (absent) padding
    if (p > 0) {
        uint64_t span = (uint64_t)(2 * p + 1);
        dy = (int64_t)(draw % span);
        dx = (int64_t)((draw >> 21) % span);
    }
    bool flip = l->o.hflip && (draw >> 63) != 0;
    // raw: [C, H, W]; out(c, y, x) = padded(c, y + dy, x' + dx) with x' = W-1-x when flipped,
    // where padded(c, u, v) = raw(c, u - p, v - p) inside the image and 0 outside.
    for (int64_t c = 0; c < C; c++) {
        int nc = l->n_ch > 1 ? (int)c : 0;
        float mean = l->mean[nc], sd = l->std[nc];
        for (int64_t y = 0; y < H; y++) {
            int64_t sy = y + dy - p;
            float *o = out + (c * H + y) * W;
            for (int64_t x = 0; x < W; x++) {
                int64_t sx = (flip ? W - 1 - x : x) + dx - p;
                float v = 0.0f;
                if (sy >= 0 && sy < H && sx >= 0 && sx < W) {
                    v = raw[(c * H + sy) * W + sx];
                }
                o[x] = (v - mean) / sd;
            }
        }
    }
}

// Row `idx` of array a, converted to its dtype (and normalised), into dst: [numel].
static void array_row(const rt_array *a, int64_t idx, uint8_t *dst) {
    size_t sz = src_size(a->type);
    const uint8_t *p = a->data + (size_t)idx * (size_t)a->numel * sz;
    if (a->dtype == DLRT_FLOAT32) {
        float *o = (float *)(void *)dst;
        if (a->type == SRC_F32 && a->n_ch == 0) {
            memcpy(o, p, (size_t)a->numel * sizeof(float));
            return;
        }
        int64_t per = a->n_ch ? a->numel / a->n_ch : a->numel;
        for (int64_t i = 0; i < a->numel; i++) {
            float v = (float)src_get(p, a->type, i);
            if (a->n_ch) {
                int c = (int)(i / per);
                v = (v - a->mean[c]) / a->std[c];
            }
            o[i] = v;
        }
        return;
    }
    if (a->dtype == DLRT_INT64 && a->type == SRC_I64) {
        memcpy(dst, p, (size_t)a->numel * 8);
        return;
    }
    for (int64_t i = 0; i < a->numel; i++) { // integers: exact in a double (checked to fit)
        int64_t v = (int64_t)src_get(p, a->type, i);
        if (a->dtype == DLRT_INT64) {
            memcpy(dst + 8 * i, &v, 8);
        } else {
            int32_t w = (int32_t)v;
            memcpy(dst + 4 * i, &w, 4);
        }
    }
}

// fill for a named-array loader: every array's rows of batch seq into its ring slot s, padding
// rows zero. The files were checked at creation, so only a stop can fail it.
static dlrt_status fill_arrays(dlrt_loader *l, int64_t seq, int s, int64_t *n_valid) {
    int64_t B = l->o.batch_size, epoch = seq / l->bpe, b = seq % l->bpe;
    uint64_t perm_key = epoch_key(l, epoch, 0);
    int64_t nv = l->epoch_n - b * B < B ? l->epoch_n - b * B : B;
    for (int64_t j = 0; j < B; j++) {
        // ordering: relaxed — as in fill.
        if (atomic_load_explicit(&l->stop, memory_order_relaxed)) {
            return DLRT_ERR_INVALID_ARG;
        }
        int64_t idx = j < nv ? row_sample(l, perm_key, b, j) : -1;
        for (size_t k = 0; k < l->n_arr; k++) {
            const rt_array *a = &l->arr[k];
            size_t row = (size_t)a->numel * a->esz;
            uint8_t *dst = a->ring + ((size_t)s * (size_t)B + (size_t)j) * row;
            if (idx >= 0) {
                array_row(a, idx, dst);
            } else {
                memset(dst, 0, row);
            }
        }
    }
    *n_valid = nv;
    return DLRT_OK;
}

// Fills slot s with batch seq. Returns DLRT_OK, DLRT_ERR_IO (callback failure, message in
// l->fail_msg — written under the mutex by the caller) or DLRT_ERR_INVALID_ARG when stopped.
static dlrt_status fill(dlrt_loader *l, int64_t seq, int s, float *raw, int64_t *n_valid,
                        int *cb_rc, int64_t *cb_idx, int64_t *cb_label, int64_t *cb_elem) {
    if (l->n_arr > 0) {
        return fill_arrays(l, seq, s, n_valid);
    }
    int64_t B = l->o.batch_size, epoch = seq / l->bpe, b = seq % l->bpe;
    uint64_t perm_key = epoch_key(l, epoch, 0), aug_key = epoch_key(l, epoch, 1);
    float *xs = l->x + (size_t)s * (size_t)B * (size_t)l->numel;
    int64_t nv = l->epoch_n - b * B < B ? l->epoch_n - b * B : B;
    for (int64_t j = 0; j < B; j++) {
        // ordering: relaxed — stop only makes a producer give up early; the mutex orders the rest.
        if (atomic_load_explicit(&l->stop, memory_order_relaxed)) {
            return DLRT_ERR_INVALID_ARG;
        }
        float *xo = xs + (size_t)j * (size_t)l->numel;
        int64_t label = l->o.pad_label;
        if (j < nv) {
            int64_t idx = row_sample(l, perm_key, b, j);
            int rc = decode(l, idx, raw, &label);
            // Files are checked at creation, a callback's samples as they are made.
            *cb_elem = rc == 0 && l->fn ? first_nonfinite(raw, l->numel) : -1;
            if (rc != 0 || *cb_elem >= 0 ||
                (l->fn && l->o.n_classes > 0 && (label < 0 || label >= l->o.n_classes))) {
                *cb_rc = rc;
                *cb_idx = idx;
                *cb_label = label;
                return DLRT_ERR_IO;
            }
            transform(l, raw, dl_rng_bits(aug_key, (uint64_t)idx), xo);
        } else {
            memset(xo, 0, (size_t)l->numel * sizeof(float));
        }
        if (l->y64) {
            l->y64[(size_t)s * (size_t)B + (size_t)j] = label;
        } else if (l->y32) {
            l->y32[(size_t)s * (size_t)B + (size_t)j] = (int32_t)label;
        }
    }
    *n_valid = nv;
    return DLRT_OK;
}

static void *producer_main(void *arg) {
    producer_arg *pa = arg;
    dlrt_loader *l = pa->l;
    float *raw = l->scratch + (size_t)pa->id * (size_t)l->numel;
    free(pa);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (atomic_load_explicit(&l->stop, memory_order_relaxed) || l->fail_st != DLRT_OK ||
            l->next_claim >= l->total) {
            break;
        }
        int64_t seq = l->next_claim++;
        int s = (int)(seq % l->o.slots);
        while (!(l->slots[s].state == SLOT_FREE && l->slots[s].seq == seq) &&
               !atomic_load_explicit(&l->stop, memory_order_relaxed) && l->fail_st == DLRT_OK) {
            pthread_cond_wait(&l->freed, &l->mu);
        }
        if (atomic_load_explicit(&l->stop, memory_order_relaxed) || l->fail_st != DLRT_OK) {
            break;
        }
        l->slots[s].state = SLOT_FILLING;
        pthread_mutex_unlock(&l->mu);
        int64_t nv = 0, cb_idx = 0, cb_label = 0, cb_elem = -1;
        int cb_rc = 0;
        dlrt_status st = fill(l, seq, s, raw, &nv, &cb_rc, &cb_idx, &cb_label, &cb_elem);
        pthread_mutex_lock(&l->mu);
        if (st == DLRT_ERR_IO && l->fail_st == DLRT_OK && cb_elem >= 0) {
            l->fail_st = st;
            snprintf(l->fail_msg, sizeof l->fail_msg,
                     "data loader: the sample callback gave sample %lld a non-finite value (at "
                     "element %lld of %lld); the data must be finite",
                     (long long)cb_idx, (long long)cb_elem, (long long)l->numel);
        } else if (st == DLRT_ERR_IO && l->fail_st == DLRT_OK && cb_rc != 0) {
            l->fail_st = st;
            snprintf(l->fail_msg, sizeof l->fail_msg,
                     "data loader: the sample callback returned %d for sample %lld", cb_rc,
                     (long long)cb_idx);
        } else if (st == DLRT_ERR_IO && l->fail_st == DLRT_OK) {
            l->fail_st = st;
            snprintf(l->fail_msg, sizeof l->fail_msg,
                     "data loader: label %lld of sample %lld is outside [0, %lld)",
                     (long long)cb_label, (long long)cb_idx, (long long)l->o.n_classes);
        }
        if (st != DLRT_OK) {
            pthread_cond_broadcast(&l->filled); // wake a consumer to see the failure
            break;
        }
        l->slots[s].state = SLOT_READY;
        l->slots[s].n_valid = nv;
        pthread_cond_broadcast(&l->filled);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// Creation

void dlrt_loader_options_init(dlrt_loader_options *o) {
    if (!o) {
        return;
    }
    memset(o, 0, sizeof *o);
    o->batch_size = 32;
    o->producers = 1;
    o->slots = 4;
    o->shuffle = 1;
    o->last = DLRT_LOADER_DROP_LAST;
    o->pad_label = -1;
    o->scale = 1.0f;
    o->norm = DLRT_LOADER_NORM_NONE;
    o->labels = DLRT_INT64;
    o->shard_count = 1;
    for (int c = 0; c < DLRT_LOADER_MAX_CHANNELS; c++) {
        o->std[c] = 1.0f;
    }
}

// Checks the options that do not depend on the data.
static dlrt_status check_options(const dlrt_loader_options *o) {
    if (o->batch_size < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: batch_size must be >= 1 (got %lld)",
                        (long long)o->batch_size);
    }
    if (o->producers < 1 || o->producers > DLRT_LOADER_MAX_PRODUCERS) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: producers must be in 1..%d (got %d)",
                        DLRT_LOADER_MAX_PRODUCERS, o->producers);
    }
    if (o->slots < 1 || o->slots > DLRT_LOADER_MAX_SLOTS) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: slots must be in 1..%d (got %d)",
                        DLRT_LOADER_MAX_SLOTS, o->slots);
    }
    if (o->last != DLRT_LOADER_DROP_LAST && o->last != DLRT_LOADER_PAD_LAST) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: unknown last-batch mode %d",
                        (int)o->last);
    }
    if (o->epochs < 0) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: epochs must be >= 0 (got %lld)",
                        (long long)o->epochs);
    }
    if (o->start_batch < 0) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: start_batch must be >= 0 (got %lld)",
                        (long long)o->start_batch);
    }
    if (o->limit < 0 || o->n_classes < 0) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: %s must be >= 0 (got %lld)",
                        o->limit < 0 ? "limit" : "n_classes",
                        (long long)(o->limit < 0 ? o->limit : o->n_classes));
    }
    bool all = o->shard_index == DLRT_LOADER_ALL_SHARDS && o->shard_count > 1;
    if (o->shard_count < 1 || (!all && (o->shard_index < 0 || o->shard_index >= o->shard_count))) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: shard_index %lld must lie in 0..shard_count-1 (or be "
                        "DLRT_LOADER_ALL_SHARDS with shard_count > 1) and shard_count (%lld) must "
                        "be >= 1",
                        (long long)o->shard_index, (long long)o->shard_count);
    }
    if (all && (o->batch_size % o->shard_count != 0 || o->last != DLRT_LOADER_DROP_LAST)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: every shard at once needs a batch_size (%lld) that is a "
                        "multiple of shard_count (%lld) and the partial batch dropped",
                        (long long)o->batch_size, (long long)o->shard_count);
    }
    if (!isfinite(o->scale)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: scale must be finite");
    }
    if (o->crop_pad < 0 || o->crop_pad > 65536) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: crop_pad must be in 0..65536 (got %d)",
                        o->crop_pad);
    }
    if (o->labels != DLRT_INT64 && o->labels != DLRT_INT32) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: labels must be DLRT_INT64 or DLRT_INT32 (got %d)",
                        (int)o->labels);
    }
    if (o->labels == DLRT_INT32 && (o->pad_label < INT32_MIN || o->pad_label > INT32_MAX)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: pad_label %lld does not fit int32",
                        (long long)o->pad_label);
    }
    switch (o->norm) {
    case DLRT_LOADER_NORM_NONE:
    case DLRT_LOADER_NORM_COMPUTE:
        break;
    case DLRT_LOADER_NORM_GIVEN:
        if (o->n_norm < 1 || o->n_norm > DLRT_LOADER_MAX_CHANNELS) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: n_norm must be in 1..%d (got %d)",
                            DLRT_LOADER_MAX_CHANNELS, o->n_norm);
        }
        for (int c = 0; c < o->n_norm; c++) {
            if (!isfinite(o->mean[c]) || !(o->std[c] > 0.0f) || !isfinite(o->std[c])) {
                return rt__fail(DLRT_ERR_INVALID_ARG,
                                "data loader: normalisation channel %d needs a finite mean and a "
                                "finite std > 0 (got mean %g, std %g)",
                                c, (double)o->mean[c], (double)o->std[c]);
            }
        }
        break;
    default:
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: unknown normalisation mode %d",
                        (int)o->norm);
    }
    return DLRT_OK;
}

// The common start of every create call: the options checked (NULL: the defaults), then a
// loader holding them, not yet started.
static dlrt_status loader_new(const dlrt_loader_options *opts, dlrt_loader **out) {
    if (opts) {
        TRY_RT(check_options(opts));
    }
    dlrt_loader *l = dl_mem_calloc(1, sizeof *l);
    if (!l) {
        return rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
    }
    if (opts) {
        l->o = *opts;
    } else {
        dlrt_loader_options_init(&l->o);
    }
    atomic_init(&l->stop, false);
    for (int c = 0; c < DLRT_LOADER_MAX_CHANNELS; c++) {
        l->std[c] = 1.0f;
    }
    *out = l;
    return DLRT_OK;
}

// Merges the n values v[0 .. n) into running statistics (*cnt, *mean, *m2): reduced on their
// own (two passes over a few values), then merged (Chan, Golub and LeVeque), so the variance
// never cancels.
static void stats_merge(const float *v, int64_t n, double *cnt, double *mean, double *m2) {
    double sum = 0, q = 0;
    for (int64_t k = 0; k < n; k++) {
        sum += (double)v[k];
    }
    double ms = sum / (double)n;
    for (int64_t k = 0; k < n; k++) {
        double dv = (double)v[k] - ms;
        q += dv * dv;
    }
    double tot = *cnt + (double)n, delta = ms - *mean;
    *mean += delta * ((double)n / tot);
    *m2 += q + delta * delta * (*cnt * (double)n / tot);
    *cnt = tot;
}

// The mean and population std of merged statistics; a zero std (constant data) is taken as 1.
static void stats_final(double cnt, double mean, double m2, float *out_mean, float *out_std) {
    double sd = sqrt(m2 / cnt);
    *out_mean = (float)mean;
    *out_std = sd > 0.0 && isfinite((float)sd) ? (float)sd : 1.0f;
}

// One pass over the samples used, decoded and scaled as a producer makes them: every value of a
// file source must be finite (one NaN would poison each batch it joins, and the normalisation),
// and DLRT_LOADER_NORM_COMPUTE's per-channel mean and population std come from the same pass.
// Each sample's channel is reduced on its own (two passes over a few values), then merged into
// the running statistics (Chan, Golub and LeVeque), so the variance never cancels.
static dlrt_status scan_samples(dlrt_loader *l) {
    bool norm = l->o.norm == DLRT_LOADER_NORM_COMPUTE;
    if (l->fn && !norm) {
        return DLRT_OK; // a callback's samples are checked as they are made
    }
    double cnt[DLRT_LOADER_MAX_CHANNELS] = {0}, mean[DLRT_LOADER_MAX_CHANNELS] = {0},
           m2[DLRT_LOADER_MAX_CHANNELS] = {0};
    int64_t per_ch = l->numel / l->n_ch;
    float *raw = l->scratch;
    for (int64_t i = 0; i < l->n; i++) {
        int64_t label;
        int rc = decode(l, i, raw, &label);
        if (rc != 0) {
            return rt__fail(DLRT_ERR_IO,
                            "data loader: the sample callback returned %d for sample %lld while "
                            "computing the normalisation",
                            rc, (long long)i);
        }
        int64_t bad = first_nonfinite(raw, l->numel);
        if (bad >= 0) {
            float v = raw[bad];
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "data loader: %s: sample %lld holds a non-finite value (%s at element "
                            "%lld of %lld); the data must be finite",
                            l->fn ? "the sample callback" : l->x_path, (long long)i,
                            isnan(v) ? "nan"
                            : v > 0  ? "inf"
                                     : "-inf",
                            (long long)bad, (long long)l->numel);
        }
        for (int c = 0; norm && c < l->n_ch; c++) {
            stats_merge(raw + c * per_ch, per_ch, &cnt[c], &mean[c], &m2[c]);
        }
    }
    for (int c = 0; norm && c < l->n_ch; c++) {
        stats_final(cnt[c], mean[c], m2[c], &l->mean[c], &l->std[c]);
    }
    return DLRT_OK;
}

static const char *src_name(src_type t) {
    static const char *const names[] = {"uint8", "int8",    "int16",  "int32",
                                        "int64", "float32", "float64"};
    return names[t];
}

// The named arrays' checks and statistics, over the n samples used: finite float values;
// integers that fit the dtype and lie in [0, n_classes); each COMPUTE normalisation's mean and
// population std (per channel: the first per-sample dim).
static dlrt_status scan_arrays(dlrt_loader *l) {
    for (size_t k = 0; k < l->n_arr; k++) {
        rt_array *a = &l->arr[k];
        bool compute = a->n_ch > 0 && a->mean[0] != a->mean[0]; // NaN marks "to compute"
        int64_t per = a->n_ch ? a->numel / a->n_ch : a->numel;
        double *acc = compute ? dl_mem_calloc(3 * (size_t)a->n_ch, sizeof(double)) : NULL;
        float *row = compute ? dl_mem_alloc((size_t)a->numel * sizeof(float)) : NULL;
        if (compute && (!acc || !row)) {
            free(acc);
            free(row);
            return rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
        }
        for (int64_t i = 0; i < l->n; i++) {
            const uint8_t *p = a->data + (size_t)i * (size_t)a->numel * src_size(a->type);
            for (int64_t e = 0; e < a->numel; e++) {
                double v = src_get(p, a->type, e);
                const char *why = NULL;
                if (a->dtype == DLRT_FLOAT32 && !isfinite((float)v)) { // float64 overflow too
                    why = "a non-finite value: the data must be finite";
                } else if (a->dtype == DLRT_INT32 && (v < INT32_MIN || v > INT32_MAX)) {
                    why = "a value that does not fit int32";
                } else if (a->dtype != DLRT_FLOAT32 && a->n_classes > 0 &&
                           (v < 0 || v >= (double)a->n_classes)) {
                    free(acc);
                    free(row);
                    return rt__fail(DLRT_ERR_INVALID_ARG,
                                    "data loader: %s (input '%s'): value %.0f of sample %lld is "
                                    "outside [0, %lld) (the model's classes)",
                                    a->path, a->name, v, (long long)i, (long long)a->n_classes);
                }
                if (why) {
                    free(acc);
                    free(row);
                    return rt__fail(DLRT_ERR_INVALID_ARG,
                                    "data loader: %s (input '%s'): sample %lld holds %s (%g at "
                                    "element %lld of %lld)",
                                    a->path, a->name, (long long)i, why, v, (long long)e,
                                    (long long)a->numel);
                }
                if (compute) {
                    row[e] = (float)v;
                }
            }
            for (int c = 0; compute && c < a->n_ch; c++) {
                stats_merge(row + c * per, per, &acc[c], &acc[a->n_ch + c], &acc[2 * a->n_ch + c]);
            }
        }
        for (int c = 0; compute && c < a->n_ch; c++) {
            stats_final(acc[c], acc[a->n_ch + c], acc[2 * a->n_ch + c], &a->mean[c], &a->std[c]);
        }
        free(acc);
        free(row);
    }
    return DLRT_OK;
}

// Completes a loader whose source (data or fn, n, rank, dims, labels) is set: checks the options
// against the data, allocates the ring and starts the producers. Destroys l on failure.
static dlrt_status finish(dlrt_loader *l, dlrt_loader **out) {
    const dlrt_loader_options *o = &l->o;
    dlrt_status st = DLRT_OK;
    int64_t B = o->batch_size;
    if (o->limit > 0 && o->limit < l->n) {
        l->n = o->limit;
    }
    for (int64_t i = 0; l->labels && o->n_classes > 0 && i < l->n; i++) {
        if (l->labels[i] < 0 || l->labels[i] >= o->n_classes) {
            st =
                rt__fail(DLRT_ERR_INVALID_ARG,
                         "data loader: %s: label %lld of sample %lld is outside [0, %lld)",
                         l->y_path, (long long)l->labels[i], (long long)i, (long long)o->n_classes);
            goto out;
        }
    }
    // Shards (ORDER LOADER): every rank gets ceil(n / W) positions, the last ones wrapping.
    l->epoch_n = o->shard_count > 1 ? l->n / o->shard_count + (l->n % o->shard_count != 0) : l->n;
    if (o->shard_index == DLRT_LOADER_ALL_SHARDS) { // every shard's (whole batches: B / W each)
        l->epoch_n *= o->shard_count;
    }
    l->numel = 1;
    for (int32_t d = 0; d < l->rank; d++) {
        if (l->dims[d] < 1 || l->numel > INT64_MAX / 4 / l->dims[d]) {
            st = rt__fail(DLRT_ERR_INVALID_ARG, "data loader: bad sample dim %d (%lld)", (int)d,
                          (long long)l->dims[d]);
            goto out;
        }
        l->numel *= l->dims[d];
    }
    if (l->rank == 2 || l->rank == 3) {
        l->img_c = l->rank == 3 ? l->dims[0] : 1;
        l->img_h = l->dims[l->rank - 2];
        l->img_w = l->dims[l->rank - 1];
    }
    if ((o->crop_pad > 0 || o->hflip) && l->img_h == 0) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "data loader: random crop and flip need [H, W] or [C, H, W] samples (the "
                      "samples have rank %d)",
                      (int)l->rank);
        goto out;
    }
    l->n_ch = 1;
    if (o->norm == DLRT_LOADER_NORM_COMPUTE && l->rank == 3) {
        if (l->dims[0] > DLRT_LOADER_MAX_CHANNELS) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data loader: %lld channels, more than the %d normalisation supports",
                          (long long)l->dims[0], DLRT_LOADER_MAX_CHANNELS);
            goto out;
        }
        l->n_ch = (int)l->dims[0];
    }
    if (o->norm == DLRT_LOADER_NORM_GIVEN) {
        if (o->n_norm > 1 && !(l->rank == 3 && l->dims[0] == o->n_norm)) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data loader: %d normalisation channels need [%d, H, W] samples",
                          o->n_norm, o->n_norm);
            goto out;
        }
        l->n_ch = o->n_norm;
        memcpy(l->mean, o->mean, sizeof l->mean);
        memcpy(l->std, o->std, sizeof l->std);
    }
    l->bpe = o->last == DLRT_LOADER_DROP_LAST ? l->epoch_n / B : (l->epoch_n + B - 1) / B;
    if (l->bpe == 0) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "data loader: %lld samples%s make no full batch of %lld (the partial batch "
                      "is dropped: pad it, or use a smaller batch)",
                      (long long)l->epoch_n, o->shard_count > 1 ? " per shard" : "", (long long)B);
        goto out;
    }
    l->total = INT64_MAX;
    if (o->epochs > 0) {
        if (o->epochs > INT64_MAX / l->bpe) {
            st = rt__fail(DLRT_ERR_INVALID_ARG, "data loader: too many epochs (%lld)",
                          (long long)o->epochs);
            goto out;
        }
        l->total = o->epochs * l->bpe;
    }
    if (o->start_batch > l->total) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "data loader: start_batch %lld is past the %lld batches of %lld epochs",
                      (long long)o->start_batch, (long long)l->total, (long long)o->epochs);
        goto out;
    }
    l->half_bits = 1;
    while (l->half_bits < 32 && (1ll << (2 * l->half_bits)) < l->n) {
        l->half_bits++;
    }
    // Sizes: K * B * numel floats must fit size_t and an int64_t.
    size_t K = (size_t)o->slots;
    if ((uint64_t)B > (uint64_t)INT64_MAX / 4 / K / (uint64_t)l->numel) {
        st = rt__fail(DLRT_ERR_NOMEM, "data loader: %d slots of %lld x %lld floats are too large",
                      o->slots, (long long)B, (long long)l->numel);
        goto out;
    }
    // A named-array loader keeps its batches in the arrays' rings: x is a 64-byte marker.
    size_t xbytes = l->n_arr ? 0 : K * (size_t)B * (size_t)l->numel * sizeof(float);
    void *xmem = NULL;
    if (posix_memalign(&xmem, 64, xbytes ? xbytes : 64) != 0) {
        xmem = NULL;
    }
    l->x = xmem;
    l->slots = dl_mem_calloc(K, sizeof *l->slots);
    l->scratch = dl_mem_alloc((size_t)o->producers * (size_t)l->numel * sizeof(float));
    l->thr = dl_mem_calloc((size_t)o->producers, sizeof *l->thr);
    bool has_labels = l->labels || l->fn; // a callback always gives labels
    if (has_labels && o->labels == DLRT_INT64) {
        l->y64 = dl_mem_calloc(K * (size_t)B, sizeof(int64_t));
    } else if (has_labels) {
        l->y32 = dl_mem_calloc(K * (size_t)B, sizeof(int32_t));
    }
    if (!l->x || !l->slots || !l->scratch || !l->thr || (has_labels && !l->y64 && !l->y32)) {
        st = rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory for %d slots", o->slots);
        goto out;
    }
    if (o->labels == DLRT_INT32 && l->labels) {
        for (int64_t i = 0; i < l->n; i++) {
            if (l->labels[i] < INT32_MIN || l->labels[i] > INT32_MAX) {
                st = rt__fail(DLRT_ERR_INVALID_ARG,
                              "data loader: %s: label %lld of sample %lld does not fit int32",
                              l->y_path, (long long)l->labels[i], (long long)i);
                goto out;
            }
        }
    }
    for (size_t k = 0; k < l->n_arr; k++) {
        rt_array *a = &l->arr[k];
        if ((uint64_t)B > (uint64_t)INT64_MAX / 8 / K / (uint64_t)a->numel) {
            st = rt__fail(DLRT_ERR_NOMEM,
                          "data loader: %d slots of %lld x %lld values are too large", o->slots,
                          (long long)B, (long long)a->numel);
            goto out;
        }
        void *mem = NULL;
        if (posix_memalign(&mem, 64, K * (size_t)B * (size_t)a->numel * a->esz) != 0) {
            st = rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory for %d slots", o->slots);
            goto out;
        }
        a->ring = mem;
    }
    st = l->n_arr ? scan_arrays(l) : scan_samples(l);
    if (st != DLRT_OK) {
        goto out;
    }
    // Slot s holds the batches seq = s mod K: the first of them at or after start_batch.
    int64_t start = o->start_batch;
    for (size_t s = 0; s < K; s++) {
        l->slots[s].state = SLOT_FREE;
        l->slots[s].seq = start + (((int64_t)s - start) % (int64_t)K + (int64_t)K) % (int64_t)K;
    }
    l->next_claim = l->next_take = start;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        st = rt__fail(DLRT_ERR_NOMEM, "data loader: cannot create a mutex");
        goto out;
    }
    if (pthread_cond_init(&l->freed, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        st = rt__fail(DLRT_ERR_NOMEM, "data loader: cannot create a condition variable");
        goto out;
    }
    if (pthread_cond_init(&l->filled, NULL) != 0) {
        pthread_cond_destroy(&l->freed);
        pthread_mutex_destroy(&l->mu);
        st = rt__fail(DLRT_ERR_NOMEM, "data loader: cannot create a condition variable");
        goto out;
    }
    l->sync_made = true;
    for (int p = 0; p < o->producers; p++) {
        producer_arg *pa = dl_mem_alloc(sizeof *pa);
        if (!pa) {
            st = rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
            goto out;
        }
        pa->l = l;
        pa->id = p;
        int rc = pthread_create(&l->thr[p], NULL, producer_main, pa);
        if (rc != 0) {
            free(pa);
            st = rt__fail(DLRT_ERR_NOMEM, "data loader: cannot start producer thread %d: %s", p,
                          strerror(rc));
            goto out;
        }
        l->n_started++;
    }
out:
    if (st != DLRT_OK) {
        dlrt_loader_destroy(l);
        return st;
    }
    *out = l;
    return DLRT_OK;
}

// Sets the sample shape from a [N, ...] array; rank-1 arrays give one-element samples.
static dlrt_status set_shape(dlrt_loader *l, const int64_t *dims, int32_t rank, const char *what,
                             const char *path) {
    if (rank < 1 || rank > DLRT_MAX_DIMS) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: %s: the %s have rank %d, expected 1..%d", path, what,
                        (int)rank, DLRT_MAX_DIMS);
    }
    l->n = dims[0];
    if (l->n < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: %s: the %s hold no samples", path,
                        what);
    }
    l->rank = rank - 1;
    for (int32_t d = 1; d < rank; d++) {
        l->dims[d - 1] = dims[d];
    }
    if (l->rank == 0) {
        l->rank = 1;
        l->dims[0] = 1;
    }
    return DLRT_OK;
}

// Checks that `path` holds one label per sample and allocates l->labels for them.
static dlrt_status labels_alloc(dlrt_loader *l, int64_t n_labels, const char *path) {
    if (n_labels != l->n) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: %s: %lld labels for the %lld samples of %s (one per sample)",
                        path, (long long)n_labels, (long long)l->n, l->x_path);
    }
    l->labels = dl_mem_alloc((size_t)l->n * sizeof(int64_t) + 1);
    return l->labels ? DLRT_OK : rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
}

dlrt_status dlrt_loader_create_idx(const char *images_path, const char *labels_path,
                                   const dlrt_loader_options *opts, dlrt_loader **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_idx: NULL out");
    }
    *out = NULL;
    if (!images_path) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_idx: NULL images path");
    }
    dlrt_loader *l = NULL;
    TRY_RT(loader_new(opts, &l));
    char err[256] = "";
    dlrt_status st;
    dl_idx lab = {0};
    l->x_path = images_path;
    l->y_path = labels_path;
    dl_status ds = dl_idx_read(images_path, &l->idx, err, sizeof err);
    if (ds != DL_OK) {
        st = rt__fail(rt__status_from_dl(ds), "data loader: %s: cannot read the images: %s",
                      images_path, err);
        goto fail;
    }
    st = set_shape(l, l->idx.dims, l->idx.rank, "images", images_path);
    if (st != DLRT_OK) {
        goto fail;
    }
    switch (l->idx.type) {
    case DL_IDX_U8:
        l->type = SRC_U8;
        break;
    case DL_IDX_I8:
        l->type = SRC_I8;
        break;
    case DL_IDX_I16:
        l->type = SRC_I16;
        break;
    case DL_IDX_I32:
        l->type = SRC_I32;
        break;
    case DL_IDX_F32:
        l->type = SRC_F32;
        break;
    case DL_IDX_F64:
        l->type = SRC_F64;
        break;
    }
    l->data = l->idx.data;
    if (labels_path) {
        ds = dl_idx_read(labels_path, &lab, err, sizeof err);
        if (ds != DL_OK) {
            st = rt__fail(rt__status_from_dl(ds), "data loader: %s: cannot read the labels: %s",
                          labels_path, err);
            goto fail;
        }
        if (lab.rank != 1) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data loader: %s: labels need rank 1 ([N]), got rank %d", labels_path,
                          (int)lab.rank);
            goto fail;
        }
        st = labels_alloc(l, lab.dims[0], labels_path);
        if (st != DLRT_OK) {
            goto fail;
        }
        ds = dl_idx_labels_to_i64(&lab, l->labels, 0, err, sizeof err);
        if (ds != DL_OK) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data loader: %s: labels must be of an integer type, got %s", labels_path,
                          dl_idx_type_name(lab.type));
            goto fail;
        }
        dl_idx_free(&lab);
    }
    return finish(l, out);
fail:
    dl_idx_free(&lab);
    dlrt_loader_destroy(l);
    return st;
}

// ---------------------------------------------------------------------------------------------
// .npy (base's view parser: header, element type and size checks, no copy)

_Static_assert(DL_MAX_RANK == DLRT_MAX_DIMS, "the .npy view's dims fit the loader's");

typedef struct npy_view {
    const uint8_t *data;
    src_type type;
    int32_t rank;
    int64_t dims[DLRT_MAX_DIMS];
} npy_view;

#define NPY_LOADER_ELEMS                                                                           \
    ((1u << DL_NPY_F32) | (1u << DL_NPY_F64) | (1u << DL_NPY_U8) | (1u << DL_NPY_I8) |             \
     (1u << DL_NPY_I16) | (1u << DL_NPY_I32) | (1u << DL_NPY_I64))

static dlrt_status npy_load(const char *path, const char *what, char **buf, npy_view *v) {
    size_t len = 0;
    dl_status ds = dl_read_file(path, buf, &len);
    if (ds != DL_OK) {
        int e = errno;
        return rt__fail(rt__status_from_dl(ds), "data loader: %s: cannot read the %s: %s", path,
                        what, ds == DL_ERR_IO ? strerror(e) : "out of memory");
    }
    dl_npy_view nv;
    char err[512];
    ds = dl_npy_view_parse(*buf, len, NPY_LOADER_ELEMS, &nv, err, sizeof err);
    if (ds == DL_ERR_UNSUPPORTED) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: %s: %s", path, err);
    }
    if (ds != DL_OK) {
        return rt__fail(DLRT_ERR_CORRUPT, "data loader: %s: %s", path, err);
    }
    static const src_type of_elem[DL_NPY_ELEM_COUNT] = {
        [DL_NPY_F32] = SRC_F32, [DL_NPY_F64] = SRC_F64, [DL_NPY_U8] = SRC_U8,
        [DL_NPY_I8] = SRC_I8,   [DL_NPY_I16] = SRC_I16, [DL_NPY_I32] = SRC_I32,
        [DL_NPY_I64] = SRC_I64,
    };
    v->data = nv.data;
    v->type = of_elem[nv.elem];
    v->rank = nv.rank;
    memcpy(v->dims, nv.dims, sizeof v->dims);
    return DLRT_OK;
}

dlrt_status dlrt_loader_create_npy(const char *x_path, const char *y_path,
                                   const dlrt_loader_options *opts, dlrt_loader **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_npy: NULL out");
    }
    *out = NULL;
    if (!x_path) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_npy: NULL x path");
    }
    dlrt_loader *l = NULL;
    TRY_RT(loader_new(opts, &l));
    char *ybuf = NULL;
    npy_view xv, yv;
    l->x_path = x_path;
    l->y_path = y_path;
    dlrt_status st = npy_load(x_path, "samples", &l->npy_buf, &xv);
    if (st != DLRT_OK) {
        goto fail;
    }
    st = set_shape(l, xv.dims, xv.rank, "samples", x_path);
    if (st != DLRT_OK) {
        goto fail;
    }
    l->data = xv.data;
    l->type = xv.type;
    if (y_path) {
        st = npy_load(y_path, "labels", &ybuf, &yv);
        if (st != DLRT_OK) {
            goto fail;
        }
        if (yv.rank != 1 || !src_is_int(yv.type)) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "data loader: %s: labels must be a rank-1 integer array ([N]), got "
                          "%s of rank %d",
                          y_path, src_is_int(yv.type) ? "integers" : "floats", (int)yv.rank);
            goto fail;
        }
        st = labels_alloc(l, yv.dims[0], y_path);
        if (st != DLRT_OK) {
            goto fail;
        }
        for (int64_t i = 0; i < l->n; i++) {
            if (yv.type == SRC_I64) {
                memcpy(&l->labels[i], yv.data + 8 * i, 8);
            } else {
                l->labels[i] = (int64_t)src_get(yv.data, yv.type, i);
            }
        }
        free(ybuf);
        ybuf = NULL;
    }
    return finish(l, out);
fail:
    free(ybuf);
    dlrt_loader_destroy(l);
    return st;
}

void dlrt_loader_array_init(dlrt_loader_array *a) {
    if (a) {
        memset(a, 0, sizeof *a);
        a->dtype = DLRT_FLOAT32;
        a->norm = DLRT_LOADER_NORM_NONE;
    }
}

// "[a, b, c]" of dims[0 .. rank) into buf.
static const char *dims_str(const int64_t *dims, int32_t rank, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int32_t d = 0; d < rank && n < size; d++) {
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    }
    if (n < size) {
        snprintf(buf + n, size - n, "]");
    }
    return buf;
}

// Reads array k's file and checks it against its spec (shape, dtype, normalisation values).
static dlrt_status array_load(dlrt_loader *l, size_t k, const dlrt_loader_array *sp) {
    rt_array *a = &l->arr[k];
    a->name = dl_mem_alloc(strlen(sp->name) + 1);
    a->path = dl_mem_alloc(strlen(sp->path) + 1);
    if (!a->name || !a->path) {
        return rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
    }
    strcpy(a->name, sp->name);
    strcpy(a->path, sp->path);
    size_t plen = strlen(sp->path);
    int32_t rank = 0;
    const int64_t *dims = NULL;
    char what[300];
    snprintf(what, sizeof what, "array of input '%s'", sp->name);
    if (plen >= 4 && strcmp(sp->path + plen - 4, ".npy") == 0) {
        npy_view v;
        TRY_RT(npy_load(sp->path, what, &a->npy_buf, &v));
        a->data = v.data;
        a->type = v.type;
        rank = v.rank;
        memcpy(a->dims, v.dims + 1, sizeof(int64_t) * (DLRT_MAX_DIMS - 1));
        l->dims[0] = v.dims[0]; // scratch: the sample count
        dims = l->dims;
    } else {
        char err[256] = "";
        dl_status ds = dl_idx_read(sp->path, &a->idx, err, sizeof err);
        if (ds != DL_OK) {
            return rt__fail(rt__status_from_dl(ds), "data loader: %s: cannot read the %s: %s",
                            sp->path, what, err);
        }
        static const src_type of_idx[] = {
            [DL_IDX_U8] = SRC_U8,   [DL_IDX_I8] = SRC_I8,   [DL_IDX_I16] = SRC_I16,
            [DL_IDX_I32] = SRC_I32, [DL_IDX_F32] = SRC_F32, [DL_IDX_F64] = SRC_F64};
        a->data = a->idx.data;
        a->type = of_idx[a->idx.type];
        rank = a->idx.rank;
        memcpy(a->dims, a->idx.dims + 1, sizeof(int64_t) * (DLRT_MAX_DIMS - 1));
        l->dims[0] = a->idx.dims[0];
        dims = l->dims;
    }
    if (rank < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: %s (input '%s'): a scalar; expected [samples, ...]", sp->path,
                        sp->name);
    }
    int64_t n = dims[0];
    a->rank = rank - 1;
    a->numel = 1;
    for (int32_t d = 0; d < a->rank; d++) {
        a->numel *= a->dims[d];
    }
    if (n < 1 || a->numel < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: %s (input '%s') holds no values",
                        sp->path, sp->name);
    }
    if (k == 0) {
        l->n = n;
    } else if (n != l->n) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: %s (input '%s') holds %lld samples, %s (input '%s') %lld: "
                        "every array needs one row per sample",
                        sp->path, sp->name, (long long)n, l->arr[0].path, l->arr[0].name,
                        (long long)l->n);
    }
    char got[160], want[160];
    if (sp->sample_rank > 0) {
        int64_t en = 1;
        for (int32_t d = 0; d < sp->sample_rank && d < DLRT_MAX_DIMS; d++) {
            en *= sp->sample_dims[d];
        }
        if (en != a->numel) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "data loader: %s (input '%s'): samples of %s (%lld values), expected "
                            "%s (%lld values) per sample",
                            sp->path, sp->name, dims_str(a->dims, a->rank, got, sizeof got),
                            (long long)a->numel,
                            dims_str(sp->sample_dims, sp->sample_rank, want, sizeof want),
                            (long long)en);
        }
    }
    a->dtype = sp->dtype;
    a->esz = sp->dtype == DLRT_INT64 ? 8 : 4;
    a->n_classes = sp->n_classes;
    if (sp->dtype != DLRT_FLOAT32 && sp->dtype != DLRT_INT32 && sp->dtype != DLRT_INT64) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: input '%s': arrays load as float32, int32 or int64 (dtype "
                        "%d)",
                        sp->name, (int)sp->dtype);
    }
    if (sp->dtype != DLRT_FLOAT32 && !src_is_int(a->type)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: %s (input '%s'): %s values for an %s input: expected an "
                        "integer dtype",
                        sp->path, sp->name, src_name(a->type),
                        sp->dtype == DLRT_INT64 ? "int64" : "int32");
    }
    if (sp->norm != DLRT_LOADER_NORM_NONE && sp->dtype != DLRT_FLOAT32) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: input '%s': only float inputs are normalised", sp->name);
    }
    int64_t ch = a->rank > 0 ? a->dims[0] : 1;
    switch (sp->norm) {
    case DLRT_LOADER_NORM_NONE:
        return DLRT_OK;
    case DLRT_LOADER_NORM_COMPUTE:
        a->n_ch = sp->per_channel ? (int)(ch < INT32_MAX ? ch : 1) : 1;
        break;
    case DLRT_LOADER_NORM_GIVEN:
        if (!sp->mean || !sp->std || (sp->n_norm != 1 && sp->n_norm != ch)) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "data loader: %s (input '%s'): %d normalisation values for samples "
                            "of %s: expected 1 or %lld (one per channel)",
                            sp->path, sp->name, sp->n_norm,
                            dims_str(a->dims, a->rank, got, sizeof got), (long long)ch);
        }
        a->n_ch = sp->n_norm;
        break;
    default:
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: unknown normalisation mode %d",
                        (int)sp->norm);
    }
    a->mean = dl_mem_alloc((size_t)a->n_ch * sizeof(float));
    a->std = dl_mem_alloc((size_t)a->n_ch * sizeof(float));
    if (!a->mean || !a->std) {
        return rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
    }
    for (int c = 0; c < a->n_ch; c++) {
        a->mean[c] = sp->norm == DLRT_LOADER_NORM_GIVEN ? sp->mean[c] : NAN; // NaN: computed
        a->std[c] = sp->norm == DLRT_LOADER_NORM_GIVEN ? sp->std[c] : 1.0f;
        if (sp->norm == DLRT_LOADER_NORM_GIVEN &&
            (!isfinite(a->mean[c]) || !(a->std[c] > 0.0f) || !isfinite(a->std[c]))) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "data loader: input '%s': normalisation channel %d needs a finite "
                            "mean and a finite std > 0 (got mean %g, std %g)",
                            sp->name, c, (double)a->mean[c], (double)a->std[c]);
        }
    }
    return DLRT_OK;
}

dlrt_status dlrt_loader_create_arrays(const dlrt_loader_array *arrays, size_t n_arrays,
                                      const dlrt_loader_options *opts, dlrt_loader **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_arrays: NULL out");
    }
    *out = NULL;
    if (!arrays || n_arrays < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_arrays: no arrays");
    }
    for (size_t k = 0; k < n_arrays; k++) {
        if (!arrays[k].name || !arrays[k].path) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_arrays: array %zu has no %s",
                            k, arrays[k].name ? "path" : "name");
        }
        for (size_t j = 0; j < k; j++) {
            if (strcmp(arrays[j].name, arrays[k].name) == 0) {
                return rt__fail(DLRT_ERR_INVALID_ARG,
                                "data loader: input '%s' is given twice (%s and %s)",
                                arrays[k].name, arrays[j].path, arrays[k].path);
            }
        }
    }
    if (opts && (opts->scale != 1.0f || opts->norm != DLRT_LOADER_NORM_NONE || opts->crop_pad ||
                 opts->hflip || opts->u8_to_unit || opts->n_classes)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: named arrays take their normalisation and class count per "
                        "array (dlrt_loader_array); the options' scale, norm, crop_pad, hflip, "
                        "u8_to_unit and n_classes must keep their defaults");
    }
    dlrt_loader *l = NULL;
    TRY_RT(loader_new(opts, &l));
    dlrt_status st = DLRT_OK;
    l->arr = dl_mem_calloc(n_arrays, sizeof *l->arr);
    if (!l->arr) {
        dlrt_loader_destroy(l);
        return rt__fail(DLRT_ERR_NOMEM, "data loader: out of memory");
    }
    l->n_arr = n_arrays;
    for (size_t k = 0; k < n_arrays && st == DLRT_OK; k++) {
        st = array_load(l, k, &arrays[k]);
    }
    if (st != DLRT_OK) {
        dlrt_loader_destroy(l);
        return st;
    }
    // The loader's own shape (dlrt_loader_info) is array 0's sample shape.
    l->x_path = l->arr[0].path;
    l->rank = l->arr[0].rank > 0 ? l->arr[0].rank : 1;
    memcpy(l->dims, l->arr[0].dims, sizeof l->dims);
    if (l->arr[0].rank == 0) {
        l->dims[0] = 1;
    }
    return finish(l, out);
}

size_t dlrt_loader_num_arrays(const dlrt_loader *l) {
    return l ? l->n_arr : 0;
}

dlrt_status dlrt_loader_array_info_get(const dlrt_loader *l, size_t i,
                                       dlrt_loader_array_info *out) {
    if (!l || !out || i >= l->n_arr) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_array_info_get: no array %zu", i);
    }
    const rt_array *a = &l->arr[i];
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->path = a->path;
    out->dtype = a->dtype;
    out->sample_rank = a->rank;
    memcpy(out->sample_dims, a->dims, sizeof out->sample_dims);
    out->sample_numel = a->numel;
    out->batch_bytes = (size_t)l->o.batch_size * (size_t)a->numel * a->esz;
    out->norm = a->n_ch ? DLRT_LOADER_NORM_GIVEN : DLRT_LOADER_NORM_NONE;
    out->n_channels = a->n_ch;
    out->mean = a->n_ch ? a->mean : NULL;
    out->std = a->n_ch ? a->std : NULL;
    return DLRT_OK;
}

dlrt_status dlrt_loader_batch_array(const dlrt_loader *l, const dlrt_loader_batch *b, size_t i,
                                    const void **out_data, size_t *out_nbytes) {
    if (!l || !b || !out_data || i >= l->n_arr || !b->x || b->slot_ < 0 || b->slot_ >= l->o.slots) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "dlrt_loader_batch_array: no array %zu of a held batch", i);
    }
    const rt_array *a = &l->arr[i];
    size_t bytes = (size_t)l->o.batch_size * (size_t)a->numel * a->esz;
    *out_data = a->ring + (size_t)b->slot_ * bytes;
    if (out_nbytes) {
        *out_nbytes = bytes;
    }
    return DLRT_OK;
}

dlrt_status dlrt_loader_create_callback(int64_t n_samples, const int64_t *sample_dims,
                                        int32_t sample_rank, dlrt_loader_sample_fn fn, void *user,
                                        const dlrt_loader_options *opts, dlrt_loader **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_callback: NULL out");
    }
    *out = NULL;
    if (!fn || !sample_dims) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_create_callback: NULL %s",
                        fn ? "sample_dims" : "callback");
    }
    if (n_samples < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: n_samples must be >= 1 (got %lld)",
                        (long long)n_samples);
    }
    if (sample_rank < 1 || sample_rank > DLRT_MAX_DIMS - 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "data loader: sample_rank must be in 1..%d (got %d)",
                        DLRT_MAX_DIMS - 1, (int)sample_rank);
    }
    dlrt_loader *l = NULL;
    TRY_RT(loader_new(opts, &l));
    l->n = n_samples;
    l->rank = sample_rank;
    memcpy(l->dims, sample_dims, (size_t)sample_rank * sizeof(int64_t));
    l->fn = fn;
    l->user = user;
    return finish(l, out);
}

dlrt_status dlrt_loader_sample_index(const dlrt_loader *l, int64_t epoch, int64_t pos,
                                     int64_t *out) {
    if (!l || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_sample_index: NULL argument");
    }
    if (epoch < 0 || pos < 0 || pos >= l->epoch_n) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "data loader: no position %lld of epoch %lld (positions 0..%lld, epochs "
                        ">= 0)",
                        (long long)pos, (long long)epoch, (long long)l->epoch_n - 1);
    }
    uint64_t key = epoch_key(l, epoch, 0);
    int64_t B = l->o.batch_size, W = l->o.shard_count;
    if (l->o.shard_index == DLRT_LOADER_ALL_SHARDS && pos >= l->bpe * B) {
        // The dropped tail: each shard's positions after its last whole batch, shard by shard.
        int64_t q = pos - l->bpe * B, tail = l->epoch_n / W - l->bpe * (B / W);
        *out = sample_at(l, key, l->bpe * (B / W) + q % tail, q / tail);
    } else {
        *out = row_sample(l, key, pos / B, pos % B);
    }
    return DLRT_OK;
}

// ---------------------------------------------------------------------------------------------
// Consuming

dlrt_status dlrt_loader_next(dlrt_loader *l, dlrt_loader_batch *out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_next: NULL batch");
    }
    memset(out, 0, sizeof *out);
    out->slot_ = -1;
    if (!l) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_next: NULL loader");
    }
    double t0 = now_ms();
    dlrt_status st = DLRT_OK;
    pthread_mutex_lock(&l->mu);
    int64_t seq = l->next_take;
    if (seq >= l->total) {
        goto out; // every epoch handed out: the end marker
    }
    int s = (int)(seq % l->o.slots);
    rt_slot *sl = &l->slots[s];
    if (sl->state == SLOT_HELD) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "dlrt_loader_next: batch %lld needs slot %d, still held by batch %lld "
                      "(%d slots): release it first",
                      (long long)seq, s, (long long)sl->seq, l->o.slots);
        goto out;
    }
    while (!(sl->state == SLOT_READY && sl->seq == seq) && l->fail_st == DLRT_OK) {
        pthread_cond_wait(&l->filled, &l->mu);
    }
    if (l->fail_st != DLRT_OK) {
        st = rt__fail(l->fail_st, "%s", l->fail_msg);
        goto out;
    }
    sl->state = SLOT_HELD;
    l->next_take++;
    size_t B = (size_t)l->o.batch_size;
    out->x = l->n_arr ? l->x : l->x + (size_t)s * B * (size_t)l->numel; // arrays: a marker
    out->y = l->y64 ? l->y64 + (size_t)s * B : NULL;
    out->y_i32 = l->y32 ? l->y32 + (size_t)s * B : NULL;
    out->n_valid = sl->n_valid;
    out->epoch = seq / l->bpe;
    out->index = seq % l->bpe;
    out->seq = seq;
    out->slot_ = s;
    out->wait_ms = now_ms() - t0;
    if (l->n_batches == 0) {
        l->first_wait_ms = out->wait_ms;
    } else {
        l->sum_wait_ms += out->wait_ms;
        if (out->wait_ms > l->max_wait_ms) {
            l->max_wait_ms = out->wait_ms;
        }
    }
    l->n_batches++;
out:
    pthread_mutex_unlock(&l->mu);
    return st;
}

dlrt_status dlrt_loader_release(dlrt_loader *l, dlrt_loader_batch *b) {
    if (!l || !b) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_loader_release: NULL %s",
                        l ? "batch" : "loader");
    }
    dlrt_status st = DLRT_OK;
    pthread_mutex_lock(&l->mu);
    int s = b->slot_;
    if (s < 0 || s >= l->o.slots || l->slots[s].state != SLOT_HELD || l->slots[s].seq != b->seq ||
        b->x != (l->n_arr ? l->x : l->x + (size_t)s * (size_t)l->o.batch_size * (size_t)l->numel)) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "dlrt_loader_release: batch %lld is not held by this loader (released "
                      "twice, or not from dlrt_loader_next)",
                      (long long)b->seq);
        goto out;
    }
    l->slots[s].state = SLOT_FREE;
    l->slots[s].seq += l->o.slots;
    pthread_cond_broadcast(&l->freed);
    b->x = NULL;
    b->y = NULL;
    b->y_i32 = NULL;
    b->slot_ = -1;
out:
    pthread_mutex_unlock(&l->mu);
    return st;
}

void dlrt_loader_stats_get(dlrt_loader *l, dlrt_loader_stats *out) {
    if (!out) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (!l) {
        return;
    }
    pthread_mutex_lock(&l->mu);
    out->batches = l->n_batches;
    out->first_wait_ms = l->first_wait_ms;
    out->mean_wait_ms = l->n_batches > 1 ? l->sum_wait_ms / (double)(l->n_batches - 1) : 0.0;
    out->max_wait_ms = l->max_wait_ms;
    pthread_mutex_unlock(&l->mu);
}

void dlrt_loader_info_get(const dlrt_loader *l, dlrt_loader_info *out) {
    if (!out) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (!l) {
        return;
    }
    out->n_samples = l->n;
    out->epoch_samples = l->epoch_n;
    out->batches_per_epoch = l->bpe;
    out->sample_rank = l->rank;
    memcpy(out->sample_dims, l->dims, sizeof out->sample_dims);
    out->sample_numel = l->numel;
    out->n_channels = l->n_ch;
    for (int c = 0; c < DLRT_LOADER_MAX_CHANNELS; c++) {
        out->mean[c] = c < l->n_ch ? l->mean[c] : 0.0f;
        out->std[c] = c < l->n_ch ? l->std[c] : 1.0f;
    }
}

void dlrt_loader_destroy(dlrt_loader *l) {
    if (!l) {
        return;
    }
    if (l->sync_made) {
        pthread_mutex_lock(&l->mu);
        // ordering: relaxed — the mutex release below publishes it to waiting producers.
        atomic_store_explicit(&l->stop, true, memory_order_relaxed);
        pthread_cond_broadcast(&l->freed);
        pthread_cond_broadcast(&l->filled);
        pthread_mutex_unlock(&l->mu);
        for (int p = 0; p < l->n_started; p++) {
            pthread_join(l->thr[p], NULL);
        }
        pthread_cond_destroy(&l->filled);
        pthread_cond_destroy(&l->freed);
        pthread_mutex_destroy(&l->mu);
    }
    free(l->thr);
    free(l->scratch);
    free(l->y32);
    free(l->y64);
    free(l->x);
    free(l->slots);
    free(l->labels);
    for (size_t k = 0; l->arr && k < l->n_arr; k++) {
        rt_array *a = &l->arr[k];
        free(a->name);
        free(a->path);
        free(a->npy_buf);
        dl_idx_free(&a->idx);
        free(a->mean);
        free(a->std);
        free(a->ring);
    }
    free(l->arr);
    free(l->npy_buf);
    dl_idx_free(&l->idx);
    free(l);
}
