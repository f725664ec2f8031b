// tests/memplan/test_memplan_pass.c — the memory planner (passes/memplan.c) on hand-made neutral
// descriptions (dl_pass_mem_desc), without codegen or LLVM: liveness sharing, in-place chains,
// the rules that stop sharing (a second reader, an input, a pinned output, a buffer read before
// it is written, overlap in another entry), param order, alignment and determinism. The
// compiled side (every sample and random graphs, checked on the artifacts' plan bytes) is
// test_memplan.c.
#include "dl_pass.h"
#include "dl_test.h"

#include <string.h>

enum { MAXB = 16, MAXK = 16, MAXA = 64 };

// A description under construction: buffers of one float[4, 4] type unless given another.
typedef struct mdesc {
    dl_pass_mem_buffer bufs[MAXB];
    dl_pass_mem_kernel ks[MAXK];
    uint32_t args[MAXA];
    uint32_t seq[DL_PASS_MEM_ENTRIES][MAXK];
    uint32_t params[MAXB];
    size_t nb, nk, na, nseq[DL_PASS_MEM_ENTRIES], np;
    dl_ir_type type;
    dl_pass_mem_desc d;
} mdesc;

static void init(mdesc *m) {
    memset(m, 0, sizeof *m);
    m->type.dtype = DL_DT_FLOAT;
    m->type.rank = 2;
    m->type.dims[0].value = 4;
    m->type.dims[1].value = 4;
    m->type.dims[0].sym = m->type.dims[1].sym = -1;
}

static uint32_t buf(mdesc *m, dl_pass_mem_kind kind, bool pinned) {
    m->bufs[m->nb] =
        (dl_pass_mem_buffer){.size = 64, .kind = kind, .type = &m->type, .is_pinned = pinned};
    return (uint32_t)m->nb++;
}

// A kernel writing `out` from `in0` (and `in1` unless UINT32_MAX), run by entry `e`.
static uint32_t kern(mdesc *m, int e, dl_pass_mem_inplace ip, uint32_t out, uint32_t in0,
                     uint32_t in1) {
    dl_pass_mem_kernel *k = &m->ks[m->nk];
    k->args = &m->args[m->na];
    m->args[m->na++] = out;
    m->args[m->na++] = in0;
    k->n_args = 2;
    if (in1 != UINT32_MAX) {
        m->args[m->na++] = in1;
        k->n_args = 3;
    }
    k->n_out = 1;
    k->inplace = ip;
    m->seq[e][m->nseq[e]++] = (uint32_t)m->nk;
    return (uint32_t)m->nk++;
}

// Runs the same kernel again in entry e (a forward kernel the train step runs too).
static void rerun(mdesc *m, int e, uint32_t k) {
    m->seq[e][m->nseq[e]++] = k;
}

static uint64_t plan(mdesc *m) {
    m->d = (dl_pass_mem_desc){.bufs = m->bufs,
                              .n_bufs = m->nb,
                              .kernels = m->ks,
                              .n_kernels = m->nk,
                              .param_bufs = m->params,
                              .n_param_bufs = m->np,
                              .entry = {m->seq[0], m->seq[1]},
                              .n_entry = {m->nseq[0], m->nseq[1]},
                              .align = 64};
    uint64_t arena = 0;
    DL_ASSERT(dl_pass_memplan(&m->d, &arena) == DL_OK);
    return arena;
}

#define OFF(b) ((int64_t)m.bufs[b].offset)
#define NO     UINT32_MAX

DL_TEST(chain_without_in_place_shares_by_liveness) {
    mdesc m;
    init(&m);
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t t1 = buf(&m, DL_PASS_MEM_TEMP, false), t2 = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t t3 = buf(&m, DL_PASS_MEM_TEMP, true);
    kern(&m, 0, DL_PASS_INPLACE_NO, t1, x, NO);
    kern(&m, 0, DL_PASS_INPLACE_NO, t2, t1, NO);
    kern(&m, 0, DL_PASS_INPLACE_NO, t3, t2, NO);
    uint64_t arena = plan(&m);
    DL_CHECK_EQ_I64(OFF(x), 0);
    DL_CHECK(OFF(t1) != OFF(t2) && OFF(t2) != OFF(t3));
    DL_CHECK_EQ_I64(OFF(t1), OFF(t3)); // t1 is dead once t2 exists
    DL_CHECK_EQ_I64((int64_t)arena, 3 * 64);
}

DL_TEST(in_place_chain_is_one_buffer_but_never_over_an_input) {
    mdesc m;
    init(&m);
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t t1 = buf(&m, DL_PASS_MEM_TEMP, false), t2 = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t t3 = buf(&m, DL_PASS_MEM_TEMP, true);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, t1, x, NO);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, t2, t1, NO);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, t3, t2, NO);
    uint64_t arena = plan(&m);
    DL_CHECK(OFF(t1) != OFF(x));
    DL_CHECK_EQ_I64(OFF(t1), OFF(t2));
    DL_CHECK_EQ_I64(OFF(t2), OFF(t3));
    DL_CHECK_EQ_I64((int64_t)arena, 2 * 64);
}

DL_TEST(in_place_needs_the_only_reader_and_same_dims) {
    mdesc m;
    init(&m);
    dl_ir_type flat = m.type;
    flat.rank = 1;
    flat.dims[0].value = 16;
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t a = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t b = buf(&m, DL_PASS_MEM_TEMP, false), c = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t s = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t r = buf(&m, DL_PASS_MEM_TEMP, true);
    m.bufs[r].type = &flat; // same bytes, other dims
    kern(&m, 0, DL_PASS_INPLACE_NO, a, x, NO);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, b, a, NO); // a diamond: b and c both read a
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, c, a, NO);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, s, b, c);
    kern(&m, 0, DL_PASS_INPLACE_SAME_DIMS, r, s, NO);
    (void)plan(&m);
    DL_CHECK(OFF(b) != OFF(a) && OFF(c) != OFF(a)); // two readers: nobody writes over a
    DL_CHECK(OFF(s) == OFF(b) || OFF(s) == OFF(c)); // s takes over one of its inputs
    DL_CHECK(OFF(r) != OFF(s));                     // other dims: not in place
    // Flat kernels (UnaryGrad's loop) only need the sizes to agree.
    mdesc n;
    init(&n);
    uint32_t y = buf(&n, DL_PASS_MEM_INPUT, false), u = buf(&n, DL_PASS_MEM_TEMP, false);
    uint32_t v = buf(&n, DL_PASS_MEM_TEMP, true);
    n.bufs[v].type = &flat;
    kern(&n, 0, DL_PASS_INPLACE_NO, u, y, NO);
    kern(&n, 0, DL_PASS_INPLACE_FLAT, v, u, NO);
    (void)plan(&n);
    DL_CHECK_EQ_I64((int64_t)n.bufs[v].offset, (int64_t)n.bufs[u].offset);
}

DL_TEST(pinned_outputs_and_read_before_written_are_kept_apart) {
    mdesc m;
    init(&m);
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t o = buf(&m, DL_PASS_MEM_TEMP, true); // an output, written first
    uint32_t t = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t acc = buf(&m, DL_PASS_MEM_TEMP, false); // read before written: keeps its contents
    uint32_t u = buf(&m, DL_PASS_MEM_TEMP, false);
    kern(&m, 0, DL_PASS_INPLACE_NO, o, x, NO);
    kern(&m, 0, DL_PASS_INPLACE_NO, t, x, acc);
    kern(&m, 0, DL_PASS_INPLACE_NO, acc, t, NO);
    kern(&m, 0, DL_PASS_INPLACE_NO, u, x, NO);
    (void)plan(&m);
    // o is live to the end of the entry, acc across calls: neither shares with t or u.
    uint32_t all[] = {x, o, t, acc, u};
    for (size_t i = 0; i < 5; i++) {
        for (size_t j = i + 1; j < 5; j++) {
            bool may_share = (all[i] == t && all[j] == u);
            if (!may_share) {
                DL_CHECK(OFF(all[i]) != OFF(all[j]));
            }
        }
    }
    DL_CHECK_EQ_I64(OFF(t), OFF(u)); // t is dead before u
}

DL_TEST(sharing_must_hold_in_every_entry) {
    mdesc m;
    init(&m);
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t a = buf(&m, DL_PASS_MEM_TEMP, false), b = buf(&m, DL_PASS_MEM_TEMP, false);
    uint32_t c = buf(&m, DL_PASS_MEM_TEMP, true);
    uint32_t ka = kern(&m, 0, DL_PASS_INPLACE_NO, a, x, NO);
    uint32_t kb = kern(&m, 0, DL_PASS_INPLACE_NO, b, a, NO);
    uint32_t kc = kern(&m, 0, DL_PASS_INPLACE_NO, c, b, NO);
    (void)plan(&m);
    DL_CHECK_EQ_I64(OFF(a), OFF(c)); // infer alone: a is dead when c is written
    // The train step runs the same kernels but reads a after c is written.
    mdesc n = m;
    uint32_t d = buf(&n, DL_PASS_MEM_TEMP, false);
    for (size_t k = 0; k < n.nk; k++) {
        n.ks[k].args = &n.args[m.ks[k].args - m.args];
    }
    rerun(&n, 1, ka);
    rerun(&n, 1, kb);
    rerun(&n, 1, kc);
    kern(&n, 1, DL_PASS_INPLACE_NO, d, a, c);
    (void)plan(&n);
    DL_CHECK(n.bufs[a].offset != n.bufs[c].offset);
}

DL_TEST(params_first_in_param_order_and_aligned) {
    mdesc m;
    init(&m);
    uint32_t p0 = buf(&m, DL_PASS_MEM_PARAM, false), p1 = buf(&m, DL_PASS_MEM_PARAM, false);
    uint32_t st = buf(&m, DL_PASS_MEM_STATE, false);
    uint32_t x = buf(&m, DL_PASS_MEM_INPUT, false);
    uint32_t t = buf(&m, DL_PASS_MEM_TEMP, true);
    m.bufs[x].size = 10; // odd sizes still give aligned offsets
    m.params[m.np++] = p1;
    m.params[m.np++] = p0;
    kern(&m, 0, DL_PASS_INPLACE_NO, t, x, p0);
    kern(&m, 1, DL_PASS_INPLACE_NO, st, p1, NO);
    uint64_t arena = plan(&m);
    DL_CHECK_EQ_I64(OFF(p1), 0);
    DL_CHECK_EQ_I64(OFF(p0), 64);
    DL_CHECK_EQ_I64(OFF(st), 128);
    DL_CHECK_EQ_I64(OFF(x), 192);
    DL_CHECK_EQ_I64(OFF(t), 256);
    DL_CHECK_EQ_I64((int64_t)arena, 320);
    mdesc again = m;
    DL_CHECK_EQ_I64((int64_t)plan(&again), (int64_t)arena); // deterministic
    for (size_t b = 0; b < m.nb; b++) {
        DL_CHECK_EQ_I64((int64_t)again.bufs[b].offset, OFF(b));
    }
}

DL_TEST_MAIN()
