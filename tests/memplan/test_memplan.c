// tests/memplan/test_memplan.c — the memory plan (passes/memplan.c) checked from the outside, on
// the plan bytes of compiled artifacts (runtime/dlrt_format.h), for every sample (with its train
// step) and for randomised graphs of elementwise / MatMul / reduce / Concat / Reshape chains,
// with and without train blocks.
//
// The checker recomputes liveness independently of the compiler: per entry point a buffer is live
// from the first kernel touching it to the last (outputs and the train loss to the entry's end,
// and from its start when the entry never touches them). It then asserts
//   - every buffer lies inside the arena at an aligned offset (so every kernel argument does);
//   - INPUT / PARAM / CONST / STATE buffers overlap no other buffer;
//   - no two buffers live at the same time in some entry overlap in memory, except an in-place
//     pair: same offset and size, live ranges meeting at exactly one kernel that reads the
//     earlier and writes the later;
//   - the kernel dependencies order (transitively) every pair of kernels of an entry that touch
//     overlapping memory where one of them writes, and stay inside their entry.
// Compiled results: each random forward graph is also run against the reference evaluator
// (tests/codegen/cg_check.c), and sessions are created with DLRT_DEBUG_POISON (intermediates
// start as 0xff bytes) so a kernel relying on zeroed memory would show.
#include "../runtime/artifact_seal.h"
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"
#include "dlcc.h"
#include "dlrt.h"
#include "dlrt_format.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SAMPLES_DIR
#    error "SAMPLES_DIR must be defined"
#endif

typedef struct plan {
    uint8_t *p; // OWNED copy (8-byte aligned)
    const dlrt_plan_hdr *h;
    const dlrt_plan_buffer *bufs;
    const dlrt_plan_tensor *tens;
    const dlrt_plan_kernel *ks;
    const uint32_t *args, *entry, *deps;
} plan;

typedef struct check_stats {
    uint64_t in_place_pairs; // buffer pairs sharing memory through an in-place kernel
    uint64_t shared_pairs;   // buffer pairs sharing memory at different times
} check_stats;

static bool plan_from_artifact(const uint8_t *a, size_t n, plan *out) {
    memset(out, 0, sizeof *out);
    long at = -1;
    for (size_t i = 0; i + sizeof(dlrt_plan_hdr) <= n; i++) {
        if (memcmp(a + i, DLRT_PLAN_MAGIC, 8) == 0) {
            if (at >= 0) {
                fprintf(stderr, "two plan magics in the artifact\n");
                return false;
            }
            at = (long)i;
        }
    }
    if (at < 0) {
        fprintf(stderr, "no plan in the artifact\n");
        return false;
    }
    dlrt_plan_hdr h;
    memcpy(&h, a + at, sizeof h);
    if (h.version != DLRT_FORMAT_VERSION || h.total_size > n - (size_t)at) {
        fprintf(stderr, "plan version %u / size %llu\n", h.version,
                (unsigned long long)h.total_size);
        return false;
    }
    out->p = malloc((size_t)h.total_size);
    if (!out->p) {
        return false;
    }
    memcpy(out->p, a + at, (size_t)h.total_size);
    out->h = (const dlrt_plan_hdr *)out->p;
    out->bufs = (const dlrt_plan_buffer *)(out->p + h.off_buffers);
    out->tens = (const dlrt_plan_tensor *)(out->p + h.off_tensors);
    out->ks = (const dlrt_plan_kernel *)(out->p + h.off_kernels);
    out->args = (const uint32_t *)(out->p + h.off_args);
    out->entry = (const uint32_t *)(out->p + h.off_entry_kernels);
    out->deps = (const uint32_t *)(out->p + h.off_deps);
    return true;
}

static bool mem_overlap(const plan *pl, uint32_t a, uint32_t b) {
    if (a == b) {
        return true;
    }
    const dlrt_plan_buffer *x = &pl->bufs[a], *y = &pl->bufs[b];
    return x->size > 0 && y->size > 0 && x->offset < y->offset + y->size &&
           y->offset < x->offset + x->size;
}

static bool touches(const plan *pl, uint32_t k, uint32_t b, bool *is_write) {
    const dlrt_plan_kernel *r = &pl->ks[k];
    bool hit = false;
    *is_write = false;
    for (uint32_t a = 0; a < r->n_args; a++) {
        if (pl->args[r->first_arg + a] == b) {
            hit = true;
            *is_write = *is_write || a < r->n_out;
        }
    }
    return hit;
}

// Checks one entry point; see the file comment.
static bool check_entry(const plan *pl, int e, check_stats *stats) {
    const dlrt_plan_hdr *h = pl->h;
    uint32_t first = h->entry_first[e], nk = h->entry_count[e], nb = h->n_buffers;
    if (nk == 0) {
        return true;
    }
    int64_t *lo = malloc(nb * sizeof *lo), *hi = malloc(nb * sizeof *hi);
    size_t words = (nk + 63) / 64;
    uint64_t *reach = calloc((size_t)nk * words, sizeof(uint64_t));
    bool ok = lo && hi && reach;
    for (uint32_t b = 0; ok && b < nb; b++) {
        lo[b] = INT64_MAX;
        hi[b] = -1;
    }
    for (uint32_t p = 0; ok && p < nk; p++) {
        const dlrt_plan_kernel *r = &pl->ks[pl->entry[first + p]];
        for (uint32_t a = 0; a < r->n_args; a++) {
            uint32_t b = pl->args[r->first_arg + a];
            if (b >= nb) {
                fprintf(stderr, "kernel argument %u names no buffer\n", b);
                ok = false;
                break;
            }
            lo[b] = lo[b] < p ? lo[b] : p;
            hi[b] = p;
        }
    }
    for (uint32_t t = 0; ok && t < h->n_tensors; t++) {
        if (pl->tens[t].role == DLRT_ROLE_OUTPUT) {
            uint32_t b = pl->tens[t].buffer;
            lo[b] = hi[b] < 0 ? 0 : lo[b];
            hi[b] = nk - 1;
        }
    }
    if (ok && h->loss_buffer != UINT32_MAX) {
        uint32_t b = h->loss_buffer;
        lo[b] = hi[b] < 0 ? 0 : lo[b];
        hi[b] = nk - 1;
    }
    // Simultaneously live buffers never overlap (in-place pairs aside).
    for (uint32_t a = 0; ok && a < nb; a++) {
        for (uint32_t b = a + 1; ok && b < nb; b++) {
            if (hi[a] < 0 || hi[b] < 0 || !mem_overlap(pl, a, b)) {
                continue;
            }
            if (hi[a] < lo[b] || hi[b] < lo[a]) {
                stats->shared_pairs++;
                continue;
            }
            // In place: one kernel p where the earlier ends and the later starts.
            uint32_t early = lo[a] <= lo[b] ? a : b, late = early == a ? b : a;
            int64_t p = hi[early];
            bool w_early, w_late;
            bool in_place =
                pl->bufs[a].offset == pl->bufs[b].offset && pl->bufs[a].size == pl->bufs[b].size &&
                p == lo[late] && lo[early] < p &&
                touches(pl, pl->entry[first + (uint32_t)p], early, &w_early) && !w_early &&
                touches(pl, pl->entry[first + (uint32_t)p], late, &w_late) && w_late;
            if (!in_place) {
                fprintf(
                    stderr,
                    "entry %d: buffers %u [%lld, %lld] and %u [%lld, %lld] are live together "
                    "and overlap (offsets %llu+%llu, %llu+%llu)\n",
                    e, a, (long long)lo[a], (long long)hi[a], b, (long long)lo[b], (long long)hi[b],
                    (unsigned long long)pl->bufs[a].offset, (unsigned long long)pl->bufs[a].size,
                    (unsigned long long)pl->bufs[b].offset, (unsigned long long)pl->bufs[b].size);
                ok = false;
            } else {
                stats->in_place_pairs++;
            }
        }
    }
    // Dependencies: inside the entry, earlier, and transitively ordering every conflicting pair.
    for (uint32_t p = 0; ok && p < nk; p++) {
        uint32_t k = pl->entry[first + p];
        if (k != first + p) {
            fprintf(stderr, "entry %d: kernel list is not the plan records in order\n", e);
            ok = false;
            break;
        }
        const dlrt_plan_kernel *r = &pl->ks[k];
        uint64_t *rp = reach + (size_t)p * words;
        for (uint32_t j = 0; j < r->n_deps; j++) {
            uint32_t d = pl->deps[r->first_dep + j];
            if (d < first || d >= k) {
                fprintf(stderr, "entry %d: kernel %u depends on %u outside [%u, %u)\n", e, k, d,
                        first, k);
                ok = false;
                break;
            }
            uint32_t q = d - first;
            const uint64_t *rq = reach + (size_t)q * words;
            for (size_t w = 0; w < words; w++) {
                rp[w] |= rq[w];
            }
            rp[q / 64] |= UINT64_C(1) << (q % 64);
        }
    }
    for (uint32_t j = 0; ok && j < nk; j++) {
        const dlrt_plan_kernel *rj = &pl->ks[first + j];
        const uint64_t *rp = reach + (size_t)j * words;
        for (uint32_t i = 0; ok && i < j; i++) {
            if (rp[i / 64] >> (i % 64) & 1) {
                continue;
            }
            const dlrt_plan_kernel *ri = &pl->ks[first + i];
            for (uint32_t x = 0; ok && x < ri->n_args; x++) {
                for (uint32_t y = 0; ok && y < rj->n_args; y++) {
                    bool wr = x < ri->n_out || y < rj->n_out;
                    uint32_t bx = pl->args[ri->first_arg + x], by = pl->args[rj->first_arg + y];
                    if (wr && mem_overlap(pl, bx, by)) {
                        fprintf(stderr,
                                "entry %d: kernels %u and %u touch overlapping buffers %u and %u "
                                "(one writing) but are not ordered\n",
                                e, first + i, first + j, bx, by);
                        ok = false;
                    }
                }
            }
        }
    }
    free(lo);
    free(hi);
    free(reach);
    return ok;
}

static bool check_plan(const plan *pl, check_stats *stats) {
    const dlrt_plan_hdr *h = pl->h;
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        const dlrt_plan_buffer *b = &pl->bufs[i];
        if (b->offset % DLRT_BUFFER_ALIGN != 0 || b->offset + b->size > h->arena_size) {
            fprintf(stderr, "buffer %u at %llu+%llu outside the arena (%llu) or misaligned\n", i,
                    (unsigned long long)b->offset, (unsigned long long)b->size,
                    (unsigned long long)h->arena_size);
            return false;
        }
    }
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        if (pl->bufs[i].kind == DLRT_BUF_TEMP) {
            continue;
        }
        for (uint32_t j = 0; j < h->n_buffers; j++) {
            if (j != i && mem_overlap(pl, i, j)) {
                fprintf(stderr, "exclusive buffer %u (kind %u) overlaps buffer %u\n", i,
                        pl->bufs[i].kind, j);
                return false;
            }
        }
    }
    // Params contiguous, in param order (the multi-tensor update walks them so).
    uint64_t next = UINT64_MAX;
    for (uint32_t t = 0; t < h->n_tensors; t++) {
        if (pl->tens[t].role != DLRT_ROLE_PARAM) {
            continue;
        }
        const dlrt_plan_buffer *b = &pl->bufs[pl->tens[t].buffer];
        if (next != UINT64_MAX && b->size > 0 && b->offset != next) {
            fprintf(stderr, "param %u not right after the previous param\n", t);
            return false;
        }
        if (b->size > 0) {
            next = b->offset +
                   (b->size + DLRT_BUFFER_ALIGN - 1) / DLRT_BUFFER_ALIGN * DLRT_BUFFER_ALIGN;
        }
    }
    for (int e = 0; e < DLRT_ENTRY_COUNT; e++) {
        if (!check_entry(pl, e, stats)) {
            return false;
        }
    }
    return true;
}

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static bool compile_ex(const char *name, const char *text, int opt, bool fuse, uint8_t **art,
                       size_t *len) {
    dlcc_options o;
    dlcc_options_init(&o);
    o.use_cache = false;
    o.no_fusion = !fuse;
    o.cg.opt_level = opt;
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    dlcc_result r;
    memset(&r, 0, sizeof r);
    bool ok = dlcc_compile_source(name, text, strlen(text), &o, d, &r) == DL_OK;
    if (!ok) {
        print_diags(d);
        fprintf(stderr, "%s\n", text);
    }
    dl_diags_destroy(d);
    *art = r.artifact;
    *len = r.artifact_len;
    return ok;
}

static bool compile(const char *name, const char *text, int opt, uint8_t **art, size_t *len) {
    return compile_ex(name, text, opt, true, art, len);
}

// Loads the artifact, creates a poisoned session, runs infer and (when present) two train steps
// on all-zero inputs; the loss must be finite.
static bool run_poisoned(const uint8_t *art, size_t len, uint64_t *arena, uint64_t *sum) {
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    bool ok = false;
    if (dlrt_model_load_memory(art, len, &m) != DLRT_OK) {
        fprintf(stderr, "load: %s\n", dlrt_last_error());
        return false;
    }
    dlrt_model_memory(m, arena, sum);
    setenv("DLRT_DEBUG_POISON", "1", 1);
    dlrt_status st = dlrt_session_create(m, &s);
    unsetenv("DLRT_DEBUG_POISON");
    if (st != DLRT_OK) {
        fprintf(stderr, "session: %s\n", dlrt_last_error());
        goto out;
    }
    for (size_t i = 0; i < dlrt_model_num_inputs(m); i++) {
        dlrt_tensor_desc dsc;
        if (dlrt_model_input(m, i, &dsc) != DLRT_OK) {
            goto out;
        }
        void *z = calloc(1, dsc.nbytes ? dsc.nbytes : 1);
        st = z ? dlrt_session_set_input(s, dsc.name, z, dsc.nbytes) : DLRT_ERR_NOMEM;
        free(z);
        if (st != DLRT_OK) {
            goto out;
        }
    }
    if (dlrt_session_infer(s) != DLRT_OK) {
        goto out;
    }
    if (dlrt_model_has_train_step(m)) {
        for (int k = 0; k < 2; k++) {
            dlrt_step_info info;
            if (dlrt_session_train_step(s, &info) != DLRT_OK || !isfinite(info.loss)) {
                fprintf(stderr, "train step %d: loss %g %s\n", k, info.loss, dlrt_last_error());
                goto out;
            }
        }
    }
    ok = true;
out:
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    return ok;
}

static bool check_artifact(const uint8_t *art, size_t len, check_stats *stats) {
    plan pl;
    if (!plan_from_artifact(art, len, &pl)) {
        return false;
    }
    bool ok = check_plan(&pl, stats);
    free(pl.p);
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Samples

DL_TEST(memplan_samples_are_safe_and_smaller) {
    static const char *const names[] = {"mlp_fmnist", "cnn_fmnist", "transformer_block"};
    check_stats stats = {0};
    for (size_t i = 0; i < DL_ARRAY_LEN(names); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.dlg", SAMPLES_DIR, names[i]);
        char *text = NULL;
        size_t tl = 0;
        DL_CHECK(dl_read_file(path, &text, &tl) == DL_OK);
        if (!text) {
            continue;
        }
        uint8_t *art = NULL;
        size_t len = 0;
        bool ok = compile(path, text, 2, &art, &len);
        DL_CHECK(ok);
        if (ok) {
            DL_CHECK(check_artifact(art, len, &stats));
            uint64_t arena = 0, sum = 0;
            DL_CHECK(run_poisoned(art, len, &arena, &sum));
            printf("  %-18s arena %10llu bytes, sum of buffers %10llu bytes (%.1f%%)\n", names[i],
                   (unsigned long long)arena, (unsigned long long)sum,
                   sum ? 100.0 * (double)arena / (double)sum : 0.0);
            DL_CHECK(arena > 0 && arena < sum);
        }
        free(art);
        free(text);
    }
    printf("  samples: %llu buffer pairs share memory at different times, %llu in place\n",
           (unsigned long long)stats.shared_pairs, (unsigned long long)stats.in_place_pairs);
    DL_CHECK(stats.shared_pairs > 0);
}

// ---------------------------------------------------------------------------------------------
// Randomised graphs

typedef struct gen {
    uint64_t seed, ctr;
    char *text;
    size_t len, cap;
    int n_vals;
    struct gval {
        char name[16];
        int64_t r, c; // rank 2 [r, c]; c == 0: rank 1 [r]
    } v[64];
    int n_params;
} gen;

static uint64_t rnd(gen *g, uint64_t n) {
    return (uint64_t)(dl_rng_uniform(g->seed, g->ctr++) * (double)n) % n;
}

static void emit(gen *g, const char *fmt, ...) DL_PRINTF(2, 3);
static void emit(gen *g, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if (g->len + (size_t)n + 1 > g->cap) {
        size_t cap = (g->cap + (size_t)n + 1) * 2;
        char *t = realloc(g->text, cap);
        if (!t) {
            return;
        }
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, line, (size_t)n + 1);
    g->len += (size_t)n;
}

static int add_val(gen *g, int64_t r, int64_t c) {
    int i = g->n_vals++;
    snprintf(g->v[i].name, sizeof g->v[i].name, "v%d", i);
    g->v[i].r = r;
    g->v[i].c = c;
    return i;
}

static void shape_str(const struct gval *v, char *buf, size_t n) {
    if (v->c) {
        snprintf(buf, n, "[%lld, %lld]", (long long)v->r, (long long)v->c);
    } else {
        snprintf(buf, n, "[%lld]", (long long)v->r);
    }
}

// A random rank-2 value (or -1).
static int pick2(gen *g) {
    int cands[64], n = 0;
    for (int i = 0; i < g->n_vals; i++) {
        if (g->v[i].c) {
            cands[n++] = i;
        }
    }
    // Prefer recent values so chains get long.
    return n ? cands[n - 1 - (int)rnd(g, (uint64_t)(n < 3 ? n : 3))] : -1;
}

static const int64_t dims[] = {3, 4, 8, 16};

static void gen_model(gen *g, bool train) {
    g->len = 0;
    g->n_vals = 0;
    g->n_params = 0;
    emit(g, "model rnd%llu\n", (unsigned long long)g->seed);
    int n_in = 1 + (int)rnd(g, 2);
    int64_t rows = dims[rnd(g, 4)];
    for (int i = 0; i < n_in; i++) {
        int v = add_val(g, rows, dims[rnd(g, 4)]);
        char s[64];
        shape_str(&g->v[v], s, sizeof s);
        emit(g, "input %s : float%s\n", g->v[v].name, s);
    }
    int n_ops = 6 + (int)rnd(g, 14);
    static const char *const unary[] = {"Relu", "Neg", "Tanh", "Sigmoid", "Abs", "Identity"};
    static const char *const binary[] = {"Add", "Sub", "Mul", "Max"};
    for (int k = 0; k < n_ops && g->n_vals < 60; k++) {
        int a = pick2(g);
        struct gval va = g->v[a];
        int kind = (int)rnd(g, 9);
        char s[64];
        if (kind <= 1) {
            int o = add_val(g, va.r, va.c);
            emit(g, "%s = %s (%s)\n", g->v[o].name, unary[rnd(g, 6)], va.name);
        } else if (kind == 2) { // same-shape binary with another value or itself
            int b = a;
            for (int i = 0; i < g->n_vals; i++) {
                if (i != a && g->v[i].r == va.r && g->v[i].c == va.c && rnd(g, 2)) {
                    b = i;
                }
            }
            int o = add_val(g, va.r, va.c);
            emit(g, "%s = %s (%s, %s)\n", g->v[o].name, binary[rnd(g, 4)], va.name, g->v[b].name);
        } else if (kind == 3) { // broadcast bias (a param)
            char pn[16];
            snprintf(pn, sizeof pn, "p%d", g->n_params++);
            emit(g, "param %s : float[%lld] = uniform(-1, 1, seed = %d)\n", pn, (long long)va.c,
                 g->n_params);
            int o = add_val(g, va.r, va.c);
            emit(g, "%s = Add (%s, %s)\n", g->v[o].name, va.name, pn);
        } else if (kind == 4) { // MatMul with a param
            char pn[16];
            int64_t c2 = dims[rnd(g, 4)];
            snprintf(pn, sizeof pn, "p%d", g->n_params++);
            emit(g, "param %s : float[%lld, %lld] = uniform(-0.5, 0.5, seed = %d)\n", pn,
                 (long long)va.c, (long long)c2, g->n_params);
            int o = add_val(g, va.r, c2);
            emit(g, "%s = MatMul (%s, %s)\n", g->v[o].name, va.name, pn);
        } else if (kind == 5) { // reduce over columns, keepdims, then broadcast back
            int o = add_val(g, va.r, 1);
            emit(g, "%s = ReduceSum <axes = [1], keepdims = 1> (%s)\n", g->v[o].name, va.name);
            int o2 = add_val(g, va.r, va.c);
            emit(g, "%s = Mul (%s, %s)\n", g->v[o2].name, va.name, g->v[o].name);
        } else if (kind == 6) { // concat with a value of the same row count
            int b = a;
            for (int i = 0; i < g->n_vals; i++) {
                if (g->v[i].c && g->v[i].r == va.r && rnd(g, 2)) {
                    b = i;
                }
            }
            int o = add_val(g, va.r, va.c + g->v[b].c);
            emit(g, "%s = Concat <axis = 1> (%s, %s)\n", g->v[o].name, va.name, g->v[b].name);
        } else if (kind == 7) { // reshape to rank 1, an op, and back
            int o = add_val(g, va.r * va.c, 0);
            emit(g, "%s = Reshape <shape = [%lld]> (%s)\n", g->v[o].name, (long long)(va.r * va.c),
                 va.name);
            int o2 = add_val(g, va.r * va.c, 0);
            emit(g, "%s = %s (%s)\n", g->v[o2].name, unary[rnd(g, 6)], g->v[o].name);
            int o3 = add_val(g, va.r, va.c);
            emit(g, "%s = Reshape <shape = [%lld, %lld]> (%s)\n", g->v[o3].name, (long long)va.r,
                 (long long)va.c, g->v[o2].name);
        } else { // transpose
            int o = add_val(g, va.c, va.r);
            emit(g, "%s = Transpose <perm = [1, 0]> (%s)\n", g->v[o].name, va.name);
        }
        (void)s;
    }
    int last = pick2(g);
    emit(g, "output %s\n", g->v[last].name);
    int other = (int)rnd(g, (uint64_t)g->n_vals);
    if (other != last && other >= n_in) {
        emit(g, "output %s\n", g->v[other].name);
    }
    if (train) {
        if (g->n_params == 0) { // something to train
            emit(g, "param pz : float[%lld] = uniform(-1, 1, seed = 99)\n",
                 (long long)g->v[last].c);
            emit(g, "vz = Mul (%s, pz)\n", g->v[last].name);
            emit(g, "sq = Mul (vz, vz)\n");
        } else {
            emit(g, "sq = Mul (%s, %s)\n", g->v[last].name, g->v[last].name);
        }
        emit(g, "loss = ReduceMean <keepdims = 0> (sq)\n");
        static const char *const opts[] = {"sgd <lr = 0.01, momentum = 0.9>", "adam <lr = 0.001>",
                                           "rmsprop <lr = 0.001>"};
        emit(g, "train loss {\n  optimizer = %s\n%s}\n", opts[rnd(g, 3)],
             rnd(g, 2) ? "  clip_norm = 1.0\n" : "");
    }
}

DL_TEST(memplan_random_graphs) {
    gen g;
    memset(&g, 0, sizeof g);
    check_stats stats = {0};
    int n_ok = 0, n_cases = 60;
    uint64_t arena_total = 0, sum_total = 0;
    for (int i = 0; i < n_cases; i++) {
        g.seed = 0x6d656d70ull + (uint64_t)i;
        g.ctr = 0;
        bool train = i % 2 == 1;
        gen_model(&g, train);
        if (!g.text) {
            DL_CHECK(false);
            break;
        }
        uint8_t *art = NULL;
        size_t len = 0;
        bool ok = compile("rnd.dlg", g.text, 1, &art, &len);
        ok = ok && check_artifact(art, len, &stats);
        uint64_t arena = 0, sum = 0;
        ok = ok && run_poisoned(art, len, &arena, &sum);
        arena_total += arena;
        sum_total += sum;
        // The compiled forward graph against the reference evaluator.
        ok = ok && (train || cg_check(g.text, CG_TOL_REDUCE));
        if (!ok) {
            fprintf(stderr, "random graph %d failed:\n%s\n", i, g.text);
        }
        n_ok += ok;
        free(art);
    }
    printf("  %d/%d random graphs; arena %llu of %llu bytes; %llu pairs shared, %llu in place\n",
           n_ok, n_cases, (unsigned long long)arena_total, (unsigned long long)sum_total,
           (unsigned long long)stats.shared_pairs, (unsigned long long)stats.in_place_pairs);
    DL_CHECK_EQ_I64(n_ok, n_cases);
    DL_CHECK(stats.in_place_pairs > 0);
    DL_CHECK(stats.shared_pairs > 0);
    DL_CHECK(arena_total < sum_total);
    free(g.text);
}

// Compiling twice gives the same bytes (placement is deterministic).
DL_TEST(memplan_is_deterministic) {
    gen g;
    memset(&g, 0, sizeof g);
    g.seed = 77;
    gen_model(&g, true);
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    DL_CHECK(compile("rnd.dlg", g.text, 1, &a, &la));
    DL_CHECK(compile("rnd.dlg", g.text, 1, &b, &lb));
    DL_CHECK(la == lb && a && b && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    free(g.text);
}

// The checker and the runtime's validation are not vacuous: forged memory plans are caught.
DL_TEST(memplan_forged_plans_are_caught) {
    gen g;
    memset(&g, 0, sizeof g);
    g.seed = 5;
    gen_model(&g, true);
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(compile("rnd.dlg", g.text, 1, &art, &len));
    plan pl;
    DL_CHECK(art && plan_from_artifact(art, len, &pl));
    if (!art || !pl.p) {
        free(art);
        free(g.text);
        return;
    }
    check_stats st = {0};
    DL_CHECK(check_plan(&pl, &st));
    uint32_t nb = pl.h->n_buffers;
    dlrt_plan_buffer *bufs = (dlrt_plan_buffer *)(pl.p + pl.h->off_buffers);
    // Every TEMP buffer at one offset: live buffers overlap.
    uint64_t *saved = calloc(nb, sizeof *saved);
    uint64_t temp_at = UINT64_MAX;
    for (uint32_t i = 0; saved && i < nb; i++) {
        saved[i] = bufs[i].offset;
        if (bufs[i].kind == DLRT_BUF_TEMP) {
            temp_at = temp_at == UINT64_MAX ? bufs[i].offset : temp_at;
            bufs[i].offset = temp_at;
        }
    }
    fprintf(stderr, "  (a failure message is expected here)\n");
    DL_CHECK(!check_plan(&pl, &st));
    for (uint32_t i = 0; saved && i < nb; i++) {
        bufs[i].offset = saved[i];
    }
    // No dependencies at all: kernels on shared memory are unordered.
    dlrt_plan_kernel *ks = (dlrt_plan_kernel *)(pl.p + pl.h->off_kernels);
    for (uint32_t k = 0; k < pl.h->n_kernels; k++) {
        ks[k].n_deps = 0;
    }
    fprintf(stderr, "  (a failure message is expected here)\n");
    DL_CHECK(!check_plan(&pl, &st));
    // The runtime refuses a param overlapping another buffer, a buffer past the arena and a
    // misaligned offset.
    long at = -1;
    for (size_t i = 0; i + 8 <= len && at < 0; i++) {
        if (memcmp(art + i, DLRT_PLAN_MAGIC, 8) == 0) {
            at = (long)i;
        }
    }
    uint32_t param = UINT32_MAX, temp = UINT32_MAX;
    for (uint32_t i = 0; i < nb; i++) {
        if (bufs[i].kind == DLRT_BUF_PARAM && bufs[i].size > 0 && param == UINT32_MAX) {
            param = i;
        }
        if (bufs[i].kind == DLRT_BUF_TEMP && bufs[i].size > 0 && temp == UINT32_MAX) {
            temp = i;
        }
    }
    DL_CHECK(at >= 0 && param != UINT32_MAX && temp != UINT32_MAX);
    struct {
        uint32_t buf;
        uint64_t offset;
    } forged[3] = {{temp, saved ? saved[param] : 0},
                   {temp, pl.h->arena_size},
                   {temp, saved ? saved[temp] + 8 : 8}};
    for (size_t f = 0; at >= 0 && param != UINT32_MAX && temp != UINT32_MAX && f < 3; f++) {
        uint8_t *copy = malloc(len);
        if (!copy) {
            break;
        }
        memcpy(copy, art, len);
        size_t off = (size_t)at + pl.h->off_buffers + forged[f].buf * sizeof(dlrt_plan_buffer) +
                     offsetof(dlrt_plan_buffer, offset);
        memcpy(copy + off, &forged[f].offset, 8);
        DL_CHECK(dl_test_artifact_reseal(copy, len)); // past the checksum, to the validation
        dlrt_model *m = NULL;
        DL_CHECK_EQ_I64(dlrt_model_load_memory(copy, len, &m), DLRT_ERR_CORRUPT);
        dlrt_model_release(m);
        free(copy);
    }
    free(saved);
    free(pl.p);
    free(art);
    free(g.text);
}

// ---------------------------------------------------------------------------------------------
// Compile cost: the plan stays linear in the graph

// A chain of 4000 Relu nodes (compiled unfused: fused, it is one kernel) runs in place on one
// buffer: every kernel overlaps every other in memory. Dependencies listing every earlier kernel
// touching overlapping memory made the plan quadratic (7,998,000 dependencies, a 33 MB artifact);
// the nearest conflicting access per arena segment suffices (the checker still proves every
// conflicting pair ordered, by reachability). Then the chain runs on 4 threads with every kernel
// split, against max(x, 0).
DL_TEST(memplan_chain_dependencies_are_linear) {
    enum { N = 4000, W = 4096 };
    dl_strbuf b = {0};
    dl_strbuf_printf(&b, "model chain\ninput x : float[%d]\nh0 = Relu (x)\n", W);
    for (int i = 1; i < N; i++) {
        dl_strbuf_printf(&b, "h%d = Relu (h%d)\n", i, i - 1);
    }
    dl_strbuf_printf(&b, "output h%d\n", N - 1);
    char *text = dl_strbuf_take(&b);
    DL_CHECK(text != NULL);
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(text && compile_ex("chain.dlg", text, 1, false, &art, &len));
    plan pl;
    DL_CHECK(art && plan_from_artifact(art, len, &pl));
    if (!art || !pl.p) {
        free(art);
        free(text);
        return;
    }
    DL_CHECK_EQ_I64(pl.h->n_kernels, N);
    uint32_t max_deps = 0;
    for (uint32_t k = 0; k < pl.h->n_kernels; k++) {
        max_deps = pl.ks[k].n_deps > max_deps ? pl.ks[k].n_deps : max_deps;
    }
    printf("  %u kernels, %u dependencies (at most %u per kernel), artifact %zu bytes\n",
           pl.h->n_kernels, pl.h->n_deps, max_deps, len);
    DL_CHECK(pl.h->n_deps <= 2u * N);
    DL_CHECK(max_deps <= 2);
    check_stats st = {0};
    DL_CHECK(check_plan(&pl, &st));
    DL_CHECK_EQ_I64(st.in_place_pairs > 0, 1);
    // Threaded and split: the dependencies alone keep the in-place chain in order.
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_memory(art, len, &m), DLRT_OK);
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = 4;
    setenv("DLRT_SPLIT_BYTES", "0", 1);
    DL_CHECK_EQ_I64(dlrt_session_create_ex(m, &o, &s), DLRT_OK);
    unsetenv("DLRT_SPLIT_BYTES");
    float *x = malloc(W * sizeof *x);
    DL_CHECK(x != NULL && s != NULL);
    for (int i = 0; x && s && i < W; i++) {
        x[i] = (float)((i * 37) % 101 - 50) / 8.0f;
    }
    if (x && s) {
        DL_CHECK_EQ_I64(dlrt_session_set_input(s, "x", x, W * sizeof *x), DLRT_OK);
        for (int rep = 0; rep < 3; rep++) {
            DL_CHECK_EQ_I64(dlrt_session_infer(s), DLRT_OK);
            const void *out = NULL;
            dlrt_tensor_desc dsc;
            char name[16];
            snprintf(name, sizeof name, "h%d", N - 1);
            DL_CHECK_EQ_I64(dlrt_session_output(s, name, &out, &dsc), DLRT_OK);
            DL_CHECK_EQ_I64(dsc.nbytes, W * sizeof(float));
            int wrong = 0;
            for (int i = 0; out && i < W; i++) {
                float want = x[i] > 0 ? x[i] : 0.0f;
                wrong += ((const float *)out)[i] != want;
            }
            DL_CHECK_EQ_I64(wrong, 0);
        }
    }
    free(x);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    free(pl.p);
    free(art);
    free(text);
}

// The kernel of node `name` (its first output): whether its first output and first input share
// their offset. -1: no such kernel.
static int out_over_in(const plan *pl, const char *name) {
    const char *strs = (const char *)pl->p + pl->h->off_strings;
    for (uint32_t k = 0; k < pl->h->n_kernels; k++) {
        const dlrt_plan_kernel *r = &pl->ks[k];
        if (r->name_len == strlen(name) && memcmp(strs + r->name_off, name, r->name_len) == 0 &&
            r->n_args >= 2) {
            uint32_t o = pl->args[r->first_arg], i = pl->args[r->first_arg + r->n_out];
            return pl->bufs[o].offset == pl->bufs[i].offset;
        }
    }
    return -1;
}

// Reshape, Flatten, Squeeze and Unsqueeze of a value whose last reader they are take its memory
// (the op table's FLAT in-place column; their kernel then copies nothing); a reshape of a value
// read later, or of a model input, copies. Both against the reference evaluator, the plan
// checked for overlaps, and the arena poisoned.
DL_TEST(memplan_reshapes_are_views) {
    static const char *const views = "model v\ninput x : float[64, 64]\na = Relu (x)\n"
                                     "b = Reshape <shape = [4096]> (a)\n"
                                     "c = Unsqueeze <axes = [0]> (b)\nd = Squeeze (c)\n"
                                     "f = Reshape <shape = [64, 8, 8]> (d)\ng = Flatten (f)\n"
                                     "e = Neg (g)\noutput e\n";
    static const char *const copies = "model c\ninput x : float[64, 64]\na = Relu (x)\n"
                                      "b = Reshape <shape = [4096]> (a)\nc = Neg (b)\n"
                                      "d = Reshape <shape = [64, 64]> (c)\ne = Add (d, a)\n"
                                      "r = Reshape <shape = [4096]> (x)\noutput e\noutput r\n";
    const char *texts[2] = {views, copies};
    for (int t = 0; t < 2; t++) {
        uint8_t *art = NULL;
        size_t len = 0;
        plan pl = {0};
        check_stats st = {0};
        uint64_t arena = 0, sum = 0;
        DL_CHECK(compile("views.dlg", texts[t], 1, &art, &len));
        DL_CHECK(art && plan_from_artifact(art, len, &pl));
        if (!art || !pl.p) {
            free(art);
            continue;
        }
        DL_CHECK(check_plan(&pl, &st));
        DL_CHECK(run_poisoned(art, len, &arena, &sum));
        DL_CHECK(cg_check(texts[t], CG_TOL_EXACT));
        if (t == 0) {
            static const char *const viewed[] = {"b", "c", "d", "f", "g", "e"};
            for (size_t i = 0; i < sizeof viewed / sizeof viewed[0]; i++) {
                DL_CHECK_EQ_I64(out_over_in(&pl, viewed[i]), 1);
            }
            DL_CHECK_EQ_I64(out_over_in(&pl, "a"), 0); // x is the caller's
        } else {
            DL_CHECK_EQ_I64(out_over_in(&pl, "b"), 0); // a is read again by e
            DL_CHECK_EQ_I64(out_over_in(&pl, "d"), 1);
            DL_CHECK_EQ_I64(out_over_in(&pl, "r"), 0); // a model input
        }
        free(pl.p);
        free(art);
    }
}

DL_TEST_MAIN()
