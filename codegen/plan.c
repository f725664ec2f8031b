// codegen/plan.c — the plan builder: the artifact's plan blob (runtime/dlrt_format.h) from the
// kernel records the lowering made. Buffers (one per IR value, then the extra buffers), their
// kinds and initial data; the memory plan's offsets; tensors (inputs, outputs, params with their
// initialisers, state); kernel records per entry point with the dependencies their memory
// accesses imply; hyper-parameters; then the string and data sections.
//
// LLVM-free (cg_plan.h): it reads what codegen recorded, never LLVM objects, so it can be read
// and tested without LLVM. Determinism: the plan is written field by field in a fixed order and
// dependency lists are sorted; nothing depends on addresses.
#include "cg_plan.h"
#include "dl_tensor_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(DLRT_DT_FLOAT == (int)DL_DT_FLOAT && DLRT_DT_FLOAT16 == (int)DL_DT_FLOAT16 &&
                   DLRT_DT_BFLOAT16 == (int)DL_DT_BFLOAT16 && DLRT_DT_INT32 == (int)DL_DT_INT32 &&
                   DLRT_DT_INT64 == (int)DL_DT_INT64 && DLRT_DT_BOOL == (int)DL_DT_BOOL,
               "dtype codes of the plan equal dl_dtype");

typedef struct blob {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} blob;

static size_t blob_put(blob *b, const void *data, size_t n) {
    size_t at = b->len;
    if (n == 0) {  // an empty constant (ConstantOfShape of shape [0]): nothing to copy, and the
        return at; // blob may still have no storage
    }
    if (b->oom || !dl__vec_reserve((void **)&b->p, &b->cap, b->len + n, 1)) {
        b->oom = true;
        return at;
    }
    if (data) {
        memcpy(b->p + b->len, data, n);
    } else {
        memset(b->p + b->len, 0, n);
    }
    b->len += n;
    return at;
}

static void blob_align(blob *b, size_t a) {
    // (An out-of-memory blob never grows: stop rather than spin.)
    while (b->len % a && !b->oom) {
        blob_put(b, NULL, 1);
    }
}

// Strings and data are gathered separately and appended at the end.
typedef struct plan_ctx {
    blob strings, data;
} plan_ctx;

static uint32_t put_string(plan_ctx *pc, const char *s, uint32_t *len) {
    *len = (uint32_t)strlen(s);
    return (uint32_t)blob_put(&pc->strings, s, *len);
}

// Appends a tensor's bytes to the data blob (64-byte aligned), returns the offset.
static uint64_t put_data(plan_ctx *pc, const void *p, size_t n) {
    blob_align(&pc->data, DLRT_BUFFER_ALIGN);
    return (uint64_t)blob_put(&pc->data, p, n);
}

static void type_dims64(const dl_ir_type *t, int64_t *dims) {
    for (int32_t i = 0; i < t->rank; i++) {
        dims[i] = t->dims[i].value;
    }
}

static dl_status const_bytes(const cg_plan_in *c, const dl_ir_value *v, plan_ctx *pc,
                             uint64_t *off) {
    int64_t dims[DL_MAX_RANK];
    type_dims64(&v->type, dims);
    dl_tensor t;
    DL_TRY(dl_tensor_alloc(&t, v->type.dtype, v->type.rank, dims));
    int64_t n = dl_tensor_numel(&t);
    const dl_ir_literal *l = v->lit;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = l->is_splat ? 0 : i;
        if (k >= l->n) {
            dl_tensor_free(&t);
            dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                    "codegen: const '%s' has %lld values for %lld elements", v->name,
                    (long long)l->n, (long long)n);
            return DL_ERR_INVALID_ARG;
        }
        dl_tensor_set(&t, i, l->f ? l->f[k] : (double)l->i[k]);
    }
    *off = put_data(pc, t.data, dl_tensor_nbytes(&t));
    dl_tensor_free(&t);
    return DL_OK;
}

static dl_status param_init(const cg_plan_in *c, const dl_ir_value *p, plan_ctx *pc,
                            dlrt_plan_tensor *t) {
    const dl_ir_init *in = p->init;
    double fan_in, fan_out;
    dl_ir_type_fans(&p->type, &fan_in, &fan_out);
    t->seed = dl_ir_init_seed(p);
    switch (in->kind) {
    case DL_IR_INIT_ZEROS:
        t->init = DLRT_INIT_FILL;
        t->a = 0;
        return DL_OK;
    case DL_IR_INIT_ONES:
        t->init = DLRT_INIT_FILL;
        t->a = 1;
        return DL_OK;
    case DL_IR_INIT_CONSTANT:
        t->init = DLRT_INIT_FILL;
        t->a = in->a;
        return DL_OK;
    case DL_IR_INIT_UNIFORM:
        t->init = DLRT_INIT_UNIFORM;
        t->a = in->a;
        t->b = in->b;
        return DL_OK;
    case DL_IR_INIT_NORMAL:
        t->init = DLRT_INIT_NORMAL;
        t->a = in->a;
        t->b = in->b;
        return DL_OK;
    case DL_IR_INIT_GLOROT_UNIFORM: {
        // -l + 2l*u computes exactly as a + (b - a)*u with a = -l, b = l.
        double l = sqrt(6.0 / (fan_in + fan_out));
        t->init = DLRT_INIT_UNIFORM;
        t->a = -l;
        t->b = l;
        return DL_OK;
    }
    case DL_IR_INIT_HE_NORMAL:
        t->init = DLRT_INIT_NORMAL;
        t->a = 0;
        t->b = sqrt(2.0 / fan_in);
        return DL_OK;
    case DL_IR_INIT_LITERAL:
    case DL_IR_INIT_FILE: {
        dl_tensor v = {0};
        DL_TRY(dl_ir_param_materialize(c->m, p, &v, c->d));
        t->init = DLRT_INIT_DATA;
        t->data_size = dl_tensor_nbytes(&v);
        t->data_off = put_data(pc, v.data, (size_t)t->data_size);
        dl_tensor_free(&v);
        return DL_OK;
    }
    }
    DL_UNREACHABLE();
}

static dl_status fill_tensor(const cg_plan_in *c, const dl_ir_value *v, uint32_t role, plan_ctx *pc,
                             dlrt_plan_tensor *t) {
    memset(t, 0, sizeof *t);
    t->name_off = put_string(pc, v->name, &t->name_len);
    t->role = role;
    t->dtype = (uint32_t)v->type.dtype;
    t->rank = (uint32_t)v->type.rank;
    type_dims64(&v->type, t->dims);
    t->buffer = c->value_buf[v->id];
    if (role == DLRT_ROLE_PARAM) {
        return param_init(c, v, pc, t);
    }
    return DL_OK;
}

typedef DL_VEC(uint32_t) u32_vec;

// The arena cut into segments for compute_deps: the distinct offsets and ends of every non-empty
// buffer, sorted; buffer b covers segments [seg_first[b], seg_end[b]). An empty buffer touches
// no memory but still gets a segment of its own (its accesses stay ordered like any buffer's).
typedef struct seg_map {
    uint32_t *seg_first, *seg_end; // per buffer
    size_t n_seg;
} seg_map;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t lower_bound_u64(const uint64_t *v, size_t n, uint64_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static dl_status seg_map_build(const dlrt_plan_buffer *bufs, size_t n_buf, seg_map *sm) {
    memset(sm, 0, sizeof *sm);
    uint64_t *cut = dl_mem_alloc((2 * n_buf + 1) * sizeof *cut);
    sm->seg_first = dl_mem_alloc((n_buf ? n_buf : 1) * sizeof(uint32_t));
    sm->seg_end = dl_mem_alloc((n_buf ? n_buf : 1) * sizeof(uint32_t));
    if (!cut || !sm->seg_first || !sm->seg_end) {
        free(cut);
        return DL_ERR_NOMEM;
    }
    size_t nc = 0;
    for (size_t b = 0; b < n_buf; b++) {
        if (bufs[b].size > 0) {
            cut[nc++] = bufs[b].offset;
            cut[nc++] = bufs[b].offset + bufs[b].size;
        }
    }
    qsort(cut, nc, sizeof *cut, cmp_u64);
    size_t nu = 0;
    for (size_t i = 0; i < nc; i++) {
        if (nu == 0 || cut[nu - 1] != cut[i]) {
            cut[nu++] = cut[i];
        }
    }
    size_t n_seg = nu ? nu - 1 : 0; // segment i = [cut[i], cut[i + 1])
    for (size_t b = 0; b < n_buf; b++) {
        if (bufs[b].size > 0) {
            sm->seg_first[b] = (uint32_t)lower_bound_u64(cut, nu, bufs[b].offset);
            sm->seg_end[b] = (uint32_t)lower_bound_u64(cut, nu, bufs[b].offset + bufs[b].size);
        } else {
            sm->seg_first[b] = (uint32_t)n_seg;
            sm->seg_end[b] = (uint32_t)++n_seg;
        }
    }
    sm->n_seg = n_seg;
    free(cut);
    return DL_OK;
}

static void seg_map_fini(seg_map *sm) {
    free(sm->seg_first);
    free(sm->seg_end);
    memset(sm, 0, sizeof *sm);
}

// Kernel dependencies from memory accesses, over one entry point's kernel sequence `seq`
// (indices into c->kernels) whose plan records are base, base + 1, ...: accesses are tracked per
// arena segment (sm), so buffers sharing memory through the memory plan count as the same memory.
// A kernel waits for the last writer of every segment it touches (read-after-write,
// write-after-write), for every reader since that write of each segment it writes
// (write-after-read), for the previous kernel of its node, and an AllReduceMean kernel for the
// entry's previous one (format 7: every rank issues the all-reduces in one order). Earlier accesses
// of a segment are ordered before those through the chain of writers, so only the nearest ones are
// listed: the lists stay linear in the graph (a chain of in-place kernels on one segment gets one
// dependency each). Kernels never depend on another entry's kernels. Lists are appended to *all
// (each sorted and unique); first/count are indexed by plan record.
static dl_status compute_deps(const cg_plan_in *c, const seg_map *sm, const uint32_t *seq,
                              size_t nk, uint32_t base, u32_vec *all, uint32_t *first,
                              uint32_t *count) {
    size_t ns = sm->n_seg ? sm->n_seg : 1;
    int64_t *last_writer = dl_mem_alloc(ns * sizeof(int64_t));
    u32_vec *readers = dl_mem_calloc(ns, sizeof *readers);
    uint8_t *mark = dl_mem_calloc(nk ? nk : 1, 1);
    dl_status st = DL_OK;
    if (!last_writer || !readers || !mark) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t q = 0; q < sm->n_seg; q++) {
        last_writer[q] = -1;
    }
    int64_t last_coll = -1; // the entry's latest AllReduceMean kernel
    for (size_t k = 0; k < nk && st == DL_OK; k++) {
        const cg_kernel_rec *r = &c->kernels.data[seq[k]];
        size_t start = all->len;
        first[base + k] = (uint32_t)start;
#define ADD_DEP(j)                                                                                 \
    do {                                                                                           \
        uint32_t j_ = (uint32_t)(j);                                                               \
        if (j_ != k && !mark[j_]) {                                                                \
            mark[j_] = 1;                                                                          \
            if (!DL_VEC_PUSH(all, j_)) {                                                           \
                st = DL_ERR_NOMEM;                                                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)
        if (k > 0 && r->node != UINT32_MAX && c->kernels.data[seq[k - 1]].node == r->node) {
            ADD_DEP(k - 1);
        }
        if (r->op == DL_IR_OP_ALL_REDUCE_MEAN) { // collectives in one order on every rank
            if (last_coll >= 0) {
                ADD_DEP(last_coll);
            }
            last_coll = (int64_t)k;
        }
        for (uint32_t a = 0; a < r->n_args; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b]; q++) {
                if (last_writer[q] >= 0) {
                    ADD_DEP(last_writer[q]);
                }
                for (size_t i = 0; a < r->n_out && i < readers[q].len; i++) {
                    ADD_DEP(readers[q].data[i]);
                }
            }
        }
#undef ADD_DEP
        // Update the access history after the kernel's own dependencies are known: writes
        // first (a segment the kernel writes needs no reader entry for it too).
        for (uint32_t a = 0; a < r->n_out; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b]; q++) {
                last_writer[q] = (int64_t)k;
                readers[q].len = 0;
            }
        }
        for (uint32_t a = r->n_out; a < r->n_args && st == DL_OK; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b] && st == DL_OK; q++) {
                if (last_writer[q] == (int64_t)k ||
                    (readers[q].len > 0 && readers[q].data[readers[q].len - 1] == (uint32_t)k)) {
                    continue;
                }
                if (!DL_VEC_PUSH(&readers[q], (uint32_t)k)) {
                    st = DL_ERR_NOMEM;
                }
            }
        }
        for (size_t q = start; q < all->len; q++) {
            mark[all->data[q]] = 0;
            all->data[q] += base; // positions in the sequence -> plan records
        }
        // Sorted lists make the plan independent of discovery order (and easy to read).
        for (size_t i = start + 1; i < all->len; i++) {
            uint32_t v = all->data[i];
            size_t j = i;
            while (j > start && all->data[j - 1] > v) {
                all->data[j] = all->data[j - 1];
                j--;
            }
            all->data[j] = v;
        }
        count[base + k] = (uint32_t)(all->len - start);
    }
out:
    for (size_t q = 0; readers && q < sm->n_seg; q++) {
        free(readers[q].data);
    }
    free(readers);
    free(last_writer);
    free(mark);
    return st;
}

static dl_status build_plan(const cg_plan_in *c, blob *out) {
    const dl_ir_module *m = c->m;
    plan_ctx pc = {0};
    dl_status st = DL_OK;
    size_t n_val = m->values.len;
    size_t n_buf = n_val + c->extra.len;
    size_t n_ten = m->inputs.len + m->outputs.len + m->params.len + c->states.len;
    size_t n_inf = c->infer_kernels.len, n_tr = c->train_kernels.len, nk = n_inf + n_tr;
    dlrt_plan_buffer *bufs = dl_mem_calloc(n_buf ? n_buf : 1, sizeof *bufs);
    dlrt_plan_tensor *tens = dl_mem_calloc(n_ten ? n_ten : 1, sizeof *tens);
    dlrt_plan_kernel *ks = dl_mem_calloc(nk ? nk : 1, sizeof *ks);
    uint32_t *dep_first = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    uint32_t *dep_count = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    uint32_t *seq = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    dlrt_plan_hparam *hps = dl_mem_calloc(c->hparams.len ? c->hparams.len : 1, sizeof *hps);
    u32_vec deps = {0};
    uint64_t arena_size = 0;
    seg_map sm = {0};
    dlrt_plan_fn *fsig = dl_mem_calloc(c->n_fns ? c->n_fns : 1, sizeof *fsig);
    DL_VEC(uint64_t) fext = {0};
    if (!bufs || !tens || !ks || !dep_first || !dep_count || !seq || !hps || !fsig) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_inf; i++) {
        seq[i] = c->infer_kernels.data[i];
    }
    for (size_t i = 0; i < n_tr; i++) {
        seq[n_inf + i] = c->train_kernels.data[i];
    }
    for (size_t i = 0; i < n_val; i++) {
        const dl_ir_value *v = m->values.data[i];
        bufs[i].size = (uint64_t)dl_ir_type_numel(&v->type) * dl_dtype_size(v->type.dtype);
        if (i == c->seed_buf && c->seed_init) {
            // The loss seed of a train step with loss scaling: session state that starts at
            // the initial scale and that the prologue kernel rewrites each step.
            float f = (float)*c->seed_init;
            bufs[i].kind = DLRT_BUF_STATE;
            bufs[i].flags = DLRT_BUF_F_INIT_DATA;
            bufs[i].data_off = put_data(&pc, &f, sizeof f);
            continue;
        }
        if (i == c->counter_buf) {
            // The train step's RNG counter: session state starting at the const's value (0),
            // incremented by the prologue kernel at every call.
            bufs[i].kind = DLRT_BUF_STATE;
            bufs[i].flags = DLRT_BUF_F_INIT_DATA;
            if ((st = const_bytes(c, v, &pc, &bufs[i].data_off)) != DL_OK) {
                goto out;
            }
            continue;
        }
        switch (v->kind) {
        case DL_IR_VAL_INPUT:
            bufs[i].kind = DLRT_BUF_INPUT;
            break;
        case DL_IR_VAL_PARAM:
            bufs[i].kind = DLRT_BUF_PARAM;
            break;
        case DL_IR_VAL_CONST:
            bufs[i].kind = DLRT_BUF_CONST;
            if ((st = const_bytes(c, v, &pc, &bufs[i].data_off)) != DL_OK) {
                goto out;
            }
            break;
        case DL_IR_VAL_NODE:
            bufs[i].kind = DLRT_BUF_TEMP;
            break;
        }
    }
    for (size_t i = 0; i < c->extra.len; i++) {
        const cg_extra_buf *e = &c->extra.data[i];
        bufs[n_val + i].size = e->size;
        bufs[n_val + i].kind = e->kind;
        bufs[n_val + i].flags = e->flags;
        if (e->init) {
            bufs[n_val + i].data_off = put_data(&pc, e->init, (size_t)e->size);
        }
    }
    // The memory plan, then the dependencies it makes necessary (overlapping buffers are one
    // memory).
    if ((st = c->memplan(c->memplan_ctx, bufs, n_buf, &arena_size)) != DL_OK ||
        (st = seg_map_build(bufs, n_buf, &sm)) != DL_OK ||
        (st = compute_deps(c, &sm, c->infer_kernels.data, n_inf, 0, &deps, dep_first, dep_count)) !=
            DL_OK ||
        (st = compute_deps(c, &sm, c->train_kernels.data, n_tr, (uint32_t)n_inf, &deps, dep_first,
                           dep_count)) != DL_OK) {
        goto out;
    }
    // The kernel table's signatures: what each compiled kernel iterates over and touches (the
    // sizes its arguments had when it was compiled), so the runtime can check any plan against
    // them. Kernel table entry i is kernel record i.
    for (size_t i = 0; i < c->n_fns; i++) {
        const cg_kernel_rec *r = &c->kernels.data[i];
        DL_ASSERT(r->fn == i);
        // Format 5: the kernel's symbol name, what a device looks kernels up by. CPU kernels carry
        // no launch data (the executor splits their range); a CUDA kernel (the grid index model,
        // codegen/nvptx/) is one thread per index of its range, CG_GPU_BLOCK threads a block.
        fsig[i] = (dlrt_plan_fn){.range = r->range,
                                 .n_args = r->n_args,
                                 .n_out = r->n_out,
                                 .first_extent = (uint32_t)fext.len};
        if (c->device == DLRT_PLAN_DEVICE_CUDA) {
            int64_t blocks = (r->range + CG_GPU_BLOCK - 1) / CG_GPU_BLOCK;
            if (blocks > INT32_MAX) {
                dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                        "codegen: kernel %s has %lld threads, beyond one CUDA grid",
                        c->fn_names.data[i], (long long)r->range);
                st = DL_ERR_UNSUPPORTED;
                goto out;
            }
            fsig[i].grid[0] = (uint32_t)blocks;
            fsig[i].grid[1] = fsig[i].grid[2] = 1;
            fsig[i].block[0] = CG_GPU_BLOCK;
            fsig[i].block[1] = fsig[i].block[2] = 1;
        }
        fsig[i].name_off = put_string(&pc, c->fn_names.data[i], &fsig[i].name_len);
        for (uint32_t a = 0; a < r->n_args; a++) {
            if (!DL_VEC_PUSH(&fext, bufs[c->args.data[r->first_arg + a]].size)) {
                st = DL_ERR_NOMEM;
                goto out;
            }
        }
    }
    size_t t = 0;
    for (size_t i = 0; i < m->inputs.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->inputs.data[i], DLRT_ROLE_INPUT, &pc, &tens[t++]);
    }
    for (size_t i = 0; i < m->outputs.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->outputs.data[i], DLRT_ROLE_OUTPUT, &pc, &tens[t++]);
    }
    for (size_t i = 0; i < m->params.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->params.data[i], DLRT_ROLE_PARAM, &pc, &tens[t++]);
    }
    if (st != DL_OK) {
        goto out;
    }
    for (size_t i = 0; i < c->states.len; i++) {
        const cg_state_tensor *sv = &c->states.data[i];
        dlrt_plan_tensor *pt = &tens[t++];
        memset(pt, 0, sizeof *pt);
        pt->name_off = put_string(&pc, sv->name, &pt->name_len);
        pt->role = DLRT_ROLE_STATE;
        pt->dtype = (uint32_t)sv->param->type.dtype;
        pt->rank = (uint32_t)sv->param->type.rank;
        type_dims64(&sv->param->type, pt->dims);
        pt->buffer = sv->buf;
    }
    for (size_t i = 0; i < c->hparams.len; i++) {
        hps[i] = c->hparams.data[i];
        hps[i].name_off = put_string(&pc, c->hparam_names.data[i], &hps[i].name_len);
    }
    for (size_t i = 0; i < nk; i++) {
        const cg_kernel_rec *r = &c->kernels.data[seq[i]];
        ks[i] = (dlrt_plan_kernel){
            .fn = r->fn,
            .first_arg = r->first_arg,
            .n_args = r->n_args,
            .n_out = r->n_out,
            .range = r->range,
            .src_line = r->src_line,
            .flags =
                r->flags | (r->op == DL_IR_OP_ALL_REDUCE_MEAN ? DLRT_KERNEL_F_ALLREDUCE_MEAN : 0),
            .first_dep = dep_first[i],
            .n_deps = dep_count[i]};
        ks[i].name_off = put_string(&pc, r->name, &ks[i].name_len);
        // Format 5: the op names as a string (the runtime never sees IR op ids); the train
        // step's own kernels come from no node.
        ks[i].ops_off = put_string(&pc,
                                   r->ops                ? r->ops
                                   : r->op == UINT32_MAX ? "TrainStep"
                                                         : dl_ir_op_get_info((dl_ir_op)r->op)->name,
                                   &ks[i].ops_len);
        seq[i] = (uint32_t)i; // now the entry lists: plan records in order
    }
    dlrt_plan_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, DLRT_PLAN_MAGIC, 8);
    h.version = DLRT_FORMAT_VERSION;
    h.hdr_size = sizeof h;
    h.n_buffers = (uint32_t)n_buf;
    h.n_tensors = (uint32_t)n_ten;
    h.n_kernels = (uint32_t)nk;
    h.n_args = (uint32_t)c->args.len;
    h.n_entry_kernels = (uint32_t)nk;
    h.n_fns = (uint32_t)c->n_fns;
    h.entry_first[DLRT_ENTRY_INFER] = 0;
    h.entry_count[DLRT_ENTRY_INFER] = (uint32_t)n_inf;
    h.entry_first[DLRT_ENTRY_TRAIN_STEP] = (uint32_t)n_inf;
    h.entry_count[DLRT_ENTRY_TRAIN_STEP] = (uint32_t)n_tr;
    h.model_name_off = put_string(&pc, m->name, &h.model_name_len);
    h.target_off = put_string(&pc, c->target, &h.target_len);
    h.device = c->device;
    h.image_kind = DLRT_IMAGE_NONE; // no device image in the plan yet (off_image = size_image = 0)
    h.optimizer = c->has_train ? c->optimizer : DLRT_OPTIM_NONE;
    h.hyper_buffer = c->has_train ? c->hyper_buf : UINT32_MAX;
    h.loss_buffer = c->has_train ? c->loss_buf : UINT32_MAX;
    h.seed_buffer = c->has_train && c->seed_init ? c->seed_buf : UINT32_MAX;
    h.n_hparams = (uint32_t)c->hparams.len;
    h.counter_buffer = c->has_train ? c->counter_buf : UINT32_MAX;
    h.arena_size = arena_size;

    blob_put(out, NULL, sizeof h);
    blob_align(out, 8);
    h.off_buffers = blob_put(out, bufs, n_buf * sizeof *bufs);
    blob_align(out, 8);
    h.off_tensors = blob_put(out, tens, n_ten * sizeof *tens);
    blob_align(out, 8);
    h.off_kernels = blob_put(out, ks, nk * sizeof *ks);
    blob_align(out, 8);
    h.off_hparams = blob_put(out, hps, c->hparams.len * sizeof *hps);
    blob_align(out, 8);
    h.off_fns = blob_put(out, fsig, c->n_fns * sizeof *fsig);
    blob_align(out, 8);
    h.n_fn_extents = (uint32_t)fext.len;
    h.off_fn_extents = blob_put(out, fext.data, fext.len * sizeof(uint64_t));
    blob_align(out, 8);
    h.off_args = blob_put(out, c->args.data, c->args.len * sizeof(uint32_t));
    blob_align(out, 8);
    h.off_entry_kernels = blob_put(out, seq, nk * sizeof(uint32_t));
    blob_align(out, 8);
    h.n_deps = (uint32_t)deps.len;
    h.isa = c->isa;
    h.off_deps = blob_put(out, deps.data, deps.len * sizeof(uint32_t));
    blob_align(out, 8);
    h.off_strings = blob_put(out, pc.strings.p, pc.strings.len);
    h.size_strings = pc.strings.len;
    blob_align(out, DLRT_BUFFER_ALIGN);
    h.off_data = blob_put(out, pc.data.p, pc.data.len);
    h.size_data = pc.data.len;
    // Format 6: the data-parallel all-reduce point.
    blob_align(out, 8);
    h.n_grads = c->has_train ? (uint32_t)c->comm_grads.len : 0;
    h.comm_at = c->has_train ? c->comm_at : 0;
    h.off_grads = blob_put(out, c->comm_grads.data, h.n_grads * sizeof(dlrt_plan_grad));
    h.total_size = out->len;
    if (pc.strings.oom || pc.data.oom || out->oom) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    memcpy(out->p, &h, sizeof h);
out:
    free(bufs);
    free(tens);
    free(ks);
    free(dep_first);
    free(dep_count);
    free(seq);
    free(hps);
    free(deps.data);
    free(fsig);
    free(fext.data);
    seg_map_fini(&sm);
    free(pc.strings.p);
    free(pc.data.p);
    return st;
}

dl_status dl_cg__plan_build(const cg_plan_in *in, uint8_t **out, size_t *out_len) {
    blob b = {0};
    dl_status st = build_plan(in, &b);
    if (st != DL_OK) {
        free(b.p);
        b.p = NULL;
        b.len = 0;
    }
    *out = b.p;
    *out_len = b.len;
    return st;
}
