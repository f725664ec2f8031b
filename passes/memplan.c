// passes/memplan.c — the memory plan: every buffer of the plan gets a fixed byte offset in one
// arena per session, intermediates sharing memory by liveness. LLVM-free and free of codegen: it
// works on a neutral description (dl_pass_mem_desc in dl_pass.h: buffers with kind, size and IR
// type; kernels with their argument buffers, outputs first, and an in-place-candidate flag; the
// kernel sequence of each entry point).
//
// Who calls it (STYLE.md 3.1): kernels and some buffers (the train step's scratch) exist only once
// codegen has lowered the module, so the description can only be built there. Codegen's plan
// builder fills it and calls this public entry point, dl_pass_memplan (dl_pass.h), as it uses any
// public header of a module it depends on ("passes <- codegen"); passes never sees codegen, and
// codegen never sees this file's internals. The pipeline (pipeline.c) names this pass `memplan`
// and reaches it through its back-end hook.
//
// Regions, in arena order:
//   1. exclusive buffers, never shared: PARAM buffers in param order (the order the train step's
//      multi-tensor kernels walk them, so the trained params form one contiguous run), STATE
//      buffers in buffer order (the optimizer slots param by param, slot by slot, as the update
//      kernel visits them; then the hyper buffer), INPUT and CONST buffers, and any TEMP buffer
//      that some entry reads before writing (its contents must survive between calls);
//   2. TEMP buffers (intermediates, gradients, scratch) placed by liveness.
// Liveness comes from each entry point's kernel sequence (infer, train_step): in an entry a buffer
// is live from the first kernel touching it to the last, inclusive. The model's outputs and the
// train loss stay readable after any call: in every entry they are live from their first touch
// (or the entry's start when the entry never touches them) to the entry's end. Two TEMP buffers
// may share memory only when, in EVERY entry, their live ranges are disjoint.
//
// In-place reuse: a kernel flagged as a candidate by whoever lowered it (one output, and it reads
// each input only at the element it writes: codegen's elementwise kernels, lower_elem.c's
// emit_map with an unbroadcast input of the output's dims; UnaryGrad's flat loop) whose output has
// the byte size and element size of one of its inputs (and, unless flagged FLAT, its dims), may
// write its output over that input when the input's live range ends at that kernel in every
// entry running it. The two are merged into one group (same offset, the union of their live
// ranges); any other entry must see the group members disjoint in time. Chains merge repeatedly.
//
// Placement: groups by size descending (ties: lowest buffer id first), each at the lowest
// desc->align-aligned (64 bytes in artifacts) offset of the TEMP region that avoids every
// already placed group whose live
// range overlaps its own in some entry (first fit). Everything is derived from the ordered
// kernel and buffer tables, so the plan is byte-identical across compiles.
//
// The schedule (codegen/plan.c's compute_deps) then orders kernels by the arena bytes they touch
// (not by buffer id), so a threaded executor that follows the dependency DAG instead of plan order
// can never race on reused memory.
#include "dl_pass.h"

#include <stdlib.h>
#include <string.h>

enum { N_ENTRIES = DL_PASS_MEM_ENTRIES };

typedef struct mp_ctx {
    const dl_pass_mem_desc *dd;
    dl_pass_mem_buffer *bufs;
    uint64_t align;
    size_t n_buf;
    const uint32_t *seq[N_ENTRIES];
    size_t n_seq[N_ENTRIES];
    int32_t *pos[N_ENTRIES];                // kernel record -> position in the entry, -1 if absent
    int32_t *lo[N_ENTRIES], *hi[N_ENTRIES]; // per buffer, then per group root; empty: hi < lo
    // Per buffer: kernels reading it (and not writing it) since its last write, the last of them.
    int32_t *n_rd[N_ENTRIES], *rd_at[N_ENTRIES];
    uint32_t *parent;   // union-find over buffers (in-place groups)
    uint8_t *exclusive; // never shared (non-TEMP, or read before written)
    uint8_t *pinned;    // outputs and the loss: live to the end of entries
} mp_ctx;

static uint64_t align_up(const mp_ctx *x, uint64_t n) {
    return (n + x->align - 1) / x->align * x->align;
}

static uint32_t find_root(mp_ctx *x, uint32_t b) {
    while (x->parent[b] != b) {
        x->parent[b] = x->parent[x->parent[b]];
        b = x->parent[b];
    }
    return b;
}

static bool empty_in(const mp_ctx *x, int e, uint32_t g) {
    return x->hi[e][g] < x->lo[e][g];
}

// Live ranges per entry, exclusivity (a TEMP buffer read before it is written in some entry keeps
// its contents across calls) and the pinned outputs.
static void liveness(mp_ctx *x) {
    const dl_pass_mem_desc *dd = x->dd;
    uint8_t *written = dl_mem_calloc(x->n_buf ? x->n_buf : 1, 1);
    for (int e = 0; e < N_ENTRIES; e++) {
        for (size_t b = 0; b < x->n_buf; b++) {
            x->lo[e][b] = INT32_MAX;
            x->hi[e][b] = -1;
            x->n_rd[e][b] = 0;
            x->rd_at[e][b] = -1;
        }
        if (written) {
            memset(written, 0, x->n_buf ? x->n_buf : 1);
        }
        for (size_t p = 0; p < x->n_seq[e]; p++) {
            const dl_pass_mem_kernel *r = &dd->kernels[x->seq[e][p]];
            // Writes first: a kernel that writes a buffer and also reads it (its own output)
            // initialises it before reading.
            for (uint32_t a = 0; a < r->n_out && written; a++) {
                written[r->args[a]] = 1;
            }
            for (uint32_t a = 0; a < r->n_args; a++) {
                uint32_t b = r->args[a];
                if (x->lo[e][b] > (int32_t)p) {
                    x->lo[e][b] = (int32_t)p;
                }
                x->hi[e][b] = (int32_t)p;
                if (written && !written[b]) {
                    x->exclusive[b] = 1; // read before any write in this entry
                }
                if (a < r->n_out) {
                    x->n_rd[e][b] = 0;
                    x->rd_at[e][b] = (int32_t)p;
                } else if (x->rd_at[e][b] != (int32_t)p) {
                    x->n_rd[e][b]++;
                    x->rd_at[e][b] = (int32_t)p;
                }
            }
        }
        if (!written) { // out of memory for the scratch: share nothing (still a valid plan)
            memset(x->exclusive, 1, x->n_buf);
        }
    }
    free(written);
    for (size_t b = 0; b < x->n_buf; b++) {
        if (x->bufs[b].kind != DL_PASS_MEM_TEMP || x->bufs[b].size == 0) {
            x->exclusive[b] = 1;
        }
        x->pinned[b] = x->bufs[b].is_pinned;
    }
    for (size_t b = 0; b < x->n_buf; b++) {
        for (int e = 0; x->pinned[b] && e < N_ENTRIES; e++) {
            if (x->n_seq[e] == 0) {
                continue;
            }
            if (empty_in(x, e, (uint32_t)b)) {
                x->lo[e][b] = 0;
            }
            x->hi[e][b] = (int32_t)x->n_seq[e] - 1;
        }
    }
}

// Whether groups ga (holding input buffer ib) and go (holding the output) of in-place kernel
// record `kr` may become one: in every entry their ranges are disjoint, or they meet exactly at
// the kernel (the input group's last use, the output group's first) and the kernel is the only
// reader of ib since ib was written. That last condition keeps the executor's parallelism: the
// kernel already waits for ib's writer, and no other reader has to finish before it overwrites
// ib (in a diamond a -> (b, c) neither b nor c writes over a, so they may run concurrently).
static bool can_merge(const mp_ctx *x, uint32_t ib, uint32_t ga, uint32_t go, uint32_t kr) {
    for (int e = 0; e < N_ENTRIES; e++) {
        if (empty_in(x, e, ga) || empty_in(x, e, go)) {
            continue;
        }
        int32_t p = x->pos[e][kr];
        if (p >= 0 && x->hi[e][ga] == p && x->lo[e][go] == p && x->hi[e][ib] == p &&
            x->n_rd[e][ib] == 1) {
            continue;
        }
        if (x->hi[e][ga] < x->lo[e][go] || x->hi[e][go] < x->lo[e][ga]) {
            continue;
        }
        return false;
    }
    return true;
}

static void merge(mp_ctx *x, uint32_t ga, uint32_t go) {
    // The lower id becomes the root (determinism does not depend on it, but it reads well).
    uint32_t root = ga < go ? ga : go, other = ga < go ? go : ga;
    x->parent[other] = root;
    for (int e = 0; e < N_ENTRIES; e++) {
        if (x->lo[e][other] < x->lo[e][root]) {
            x->lo[e][root] = x->lo[e][other];
        }
        if (x->hi[e][other] > x->hi[e][root]) {
            x->hi[e][root] = x->hi[e][other];
        }
    }
}

static void in_place(mp_ctx *x) {
    const dl_pass_mem_desc *dd = x->dd;
    for (size_t kr = 0; kr < dd->n_kernels; kr++) {
        const dl_pass_mem_kernel *r = &dd->kernels[kr];
        if (r->inplace == DL_PASS_INPLACE_NO || r->n_out != 1) {
            continue;
        }
        bool is_flat = r->inplace == DL_PASS_INPLACE_FLAT;
        uint32_t ob = r->args[0];
        if (!x->bufs[ob].type || x->exclusive[ob]) {
            continue;
        }
        const dl_ir_type *ot = x->bufs[ob].type;
        for (uint32_t a = r->n_out; a < r->n_args; a++) {
            uint32_t ib = r->args[a];
            if (!x->bufs[ib].type || ib == ob || x->exclusive[ib] || x->pinned[ib] ||
                x->bufs[ib].size != x->bufs[ob].size) {
                continue;
            }
            const dl_ir_type *it = x->bufs[ib].type;
            if (dl_dtype_size(it->dtype) != dl_dtype_size(ot->dtype) ||
                (!is_flat && !dl_ir_type_same_dims(it, ot))) {
                continue;
            }
            // The same input twice (Add(x, x)) is fine: both reads are of element i.
            uint32_t ga = find_root(x, ib), go = find_root(x, ob);
            if (ga != go && can_merge(x, ib, ga, go, (uint32_t)kr)) {
                merge(x, ga, go);
                break;
            }
        }
    }
}

static bool groups_conflict(const mp_ctx *x, uint32_t g, uint32_t h) {
    for (int e = 0; e < N_ENTRIES; e++) {
        if (!empty_in(x, e, g) && !empty_in(x, e, h) && x->lo[e][g] <= x->hi[e][h] &&
            x->lo[e][h] <= x->hi[e][g]) {
            return true;
        }
    }
    return false;
}

typedef struct span {
    uint64_t off, end;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *p = a, *q = b;
    return p->off < q->off ? -1 : p->off > q->off ? 1 : (p->end > q->end) - (p->end < q->end);
}

// A sort key: groups by size descending then id, buffers by offset then id (total orders, so
// the plan never depends on qsort's stability).
typedef struct key {
    uint64_t k;
    uint32_t id;
} key;

static int cmp_key(const void *a, const void *b) {
    const key *p = a, *q = b;
    if (p->k != q->k) {
        return p->k < q->k ? -1 : 1;
    }
    return (p->id > q->id) - (p->id < q->id);
}

// Places the exclusive region and the TEMP groups; returns the arena size.
static dl_status place(mp_ctx *x, uint64_t *arena) {
    const dl_pass_mem_desc *dd = x->dd;
    uint64_t at = 0;
    uint8_t *done = dl_mem_calloc(x->n_buf ? x->n_buf : 1, 1);
    key *groups = dl_mem_calloc(x->n_buf ? x->n_buf : 1, sizeof *groups);
    uint32_t *placed = dl_mem_calloc(x->n_buf ? x->n_buf : 1, sizeof *placed);
    span *sp = dl_mem_calloc(x->n_buf ? x->n_buf : 1, sizeof *sp);
    dl_status st = DL_OK;
    if (!done || !groups || !placed || !sp) {
        st = DL_ERR_NOMEM;
        goto out;
    }
#define PUT(b)                                                                                     \
    do {                                                                                           \
        uint32_t b_ = (b);                                                                         \
        if (!done[b_]) {                                                                           \
            done[b_] = 1;                                                                          \
            x->bufs[b_].offset = x->bufs[b_].size ? at : 0;                                        \
            at += align_up(x, x->bufs[b_].size);                                                   \
        }                                                                                          \
    } while (0)
    for (size_t i = 0; i < dd->n_param_bufs; i++) {
        PUT(dd->param_bufs[i]);
    }
    // dl_pass_mem_kind is in region order: PARAM, STATE, INPUT, CONST, then exclusive TEMP.
    for (int o = DL_PASS_MEM_PARAM; o <= DL_PASS_MEM_TEMP; o++) {
        for (size_t b = 0; b < x->n_buf; b++) {
            if ((int)x->bufs[b].kind == o && x->exclusive[b]) {
                PUT((uint32_t)b);
            }
        }
    }
#undef PUT
    uint64_t base = at, top = at;
    size_t ng = 0;
    for (size_t b = 0; b < x->n_buf; b++) {
        if (!done[b] && find_root(x, (uint32_t)b) == b) {
            groups[ng++] = (key){UINT64_MAX - x->bufs[b].size, (uint32_t)b};
        }
    }
    qsort(groups, ng, sizeof *groups, cmp_key);
    size_t n_placed = 0;
    for (size_t i = 0; i < ng; i++) {
        uint32_t g = groups[i].id;
        uint64_t size = x->bufs[g].size; // the members of a group have one size
        size_t n_sp = 0;
        for (size_t j = 0; j < n_placed; j++) {
            uint32_t h = placed[j];
            if (groups_conflict(x, g, h)) {
                sp[n_sp++] = (span){x->bufs[h].offset, x->bufs[h].offset + x->bufs[h].size};
            }
        }
        qsort(sp, n_sp, sizeof *sp, cmp_span);
        uint64_t cand = base;
        for (size_t j = 0; j < n_sp; j++) {
            if (cand + size <= sp[j].off) {
                break;
            }
            if (sp[j].end > cand) {
                cand = align_up(x, sp[j].end);
            }
        }
        x->bufs[g].offset = cand;
        placed[n_placed++] = g;
        if (cand + size > top) {
            top = cand + size;
        }
    }
    for (size_t b = 0; b < x->n_buf; b++) {
        if (!done[b]) {
            x->bufs[b].offset = x->bufs[find_root(x, (uint32_t)b)].offset;
        }
    }
    *arena = align_up(x, top);
out:
    free(done);
    free(groups);
    free(placed);
    free(sp);
    return st;
}

dl_status dl_pass_memplan(dl_pass_mem_desc *desc, uint64_t *out_arena_size) {
    *out_arena_size = 0;
    mp_ctx x;
    memset(&x, 0, sizeof x);
    x.dd = desc;
    x.bufs = desc->bufs;
    x.n_buf = desc->n_bufs;
    x.align = desc->align ? desc->align : 1;
    size_t n_buf = desc->n_bufs;
    for (int e = 0; e < N_ENTRIES; e++) {
        x.seq[e] = desc->entry[e];
        x.n_seq[e] = desc->n_entry[e];
    }
    size_t nb = n_buf ? n_buf : 1, nk = desc->n_kernels ? desc->n_kernels : 1;
    dl_status st = DL_OK;
    x.parent = dl_mem_calloc(nb, sizeof *x.parent);
    x.exclusive = dl_mem_calloc(nb, 1);
    x.pinned = dl_mem_calloc(nb, 1);
    bool ok = x.parent && x.exclusive && x.pinned;
    for (int e = 0; e < N_ENTRIES; e++) {
        x.pos[e] = dl_mem_alloc(nk * sizeof(int32_t));
        x.lo[e] = dl_mem_alloc(nb * sizeof(int32_t));
        x.hi[e] = dl_mem_alloc(nb * sizeof(int32_t));
        x.n_rd[e] = dl_mem_alloc(nb * sizeof(int32_t));
        x.rd_at[e] = dl_mem_alloc(nb * sizeof(int32_t));
        ok = ok && x.pos[e] && x.lo[e] && x.hi[e] && x.n_rd[e] && x.rd_at[e];
    }
    if (!ok) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (int e = 0; e < N_ENTRIES; e++) {
        for (size_t k = 0; k < desc->n_kernels; k++) {
            x.pos[e][k] = -1;
        }
        for (size_t p = 0; p < x.n_seq[e]; p++) {
            x.pos[e][x.seq[e][p]] = (int32_t)p;
        }
    }
    for (size_t b = 0; b < n_buf; b++) {
        x.parent[b] = (uint32_t)b;
        desc->bufs[b].offset = 0;
    }
    liveness(&x);
    in_place(&x);
    st = place(&x, out_arena_size);
out:
    free(x.parent);
    free(x.exclusive);
    free(x.pinned);
    for (int e = 0; e < N_ENTRIES; e++) {
        free(x.pos[e]);
        free(x.lo[e]);
        free(x.hi[e]);
        free(x.n_rd[e]);
        free(x.rd_at[e]);
    }
    if (st != DL_OK) {
        *out_arena_size = 0;
    }
    return st;
}
