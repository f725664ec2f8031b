// codegen/lower_train.c — the sync-free train step: the `train_step` entry point and its
// multi-tensor step kernels, built from m->train and m->grads after every node is lowered.
//
// The entry runs, in order: the kernels of every forward node the training roots (train_loss,
// each grad, each assign's value) depend on (the same LLVM functions as infer, but records of
// their own, so each entry's dependencies stay inside it), every training-graph node, then
//   train.gradsq    one double partial sum of squares per chunk of the gradients
//   train.prologue  range 1: norm, finite check, clip coefficient, step count, bias
//                   corrections, dynamic loss-scale update, the loss, the next step's seed
//   train.update.*  the masked optimizer update of every trained param and its slots
//   train.assign    param := value (BatchNormalization running statistics), only by a step that
//                   is not skipped (with accumulation: restored at a skipped boundary)
// Multi-tensor kernels: the trained params form one virtual concatenation (param order) cut into
// chunks of TRAIN_CHUNK elements; a kernel's range is the chunk count and its body visits the
// part of each param inside the chunks it is given (params unrolled at compile time, each with
// its own dtype), so any partition of the range gives the same bytes. Every hyper-parameter is
// read from the hyper buffer (runtime/dlrt_format.h DLRT_HP_*) when the kernel runs; only
// structural choices (optimizer, nesterov, amsgrad, centered, whether momentum is used, whether
// clipping and loss scaling exist) are compiled in. Float math follows PyTorch's float32 kernels
// (scalars rounded to float, the same operation order); scalars of the prologue are doubles, as
// PyTorch's Python floats.
//
// Gradient accumulation (accumulate = k > 1): each trained param gets a STATE accumulator
// "PARAM.grad_accum" (its dtype). train.accum adds the call's gradient into it, train.gradsq sums
// the squares of the new accumulator; the prologue counts micro-steps (DLRT_HP_ACCUM_COUNT) and
// marks the k-th call a boundary (DLRT_HP_BOUNDARY). Only at a boundary do the finite check, the
// step count, the loss-scale update and the update kernel act, on the mean gradient accum / k; the
// update kernel then zeroes the accumulators (also when the step is skipped as non-finite). Off
// a boundary grad_norm reports the norm of the running mean accum / (micro-steps so far).
//
// The RNG counter (m->step_counter, fed to the training-mode Dropouts): its buffer is STATE and
// the prologue adds 1 at every call, skipped or not, so call n (0-based) draws with counter n.
#include "cg_geometry.h"
#include "cg_internal.h"
#include "dl_cg_train.h"
#include "dl_optim_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TRAIN_CHUNK = 4096 };

_Static_assert(DLRT_OPTIM_SGD == (int)DL_IR_OPTIM_SGD && DLRT_OPTIM_ADAM == (int)DL_IR_OPTIM_ADAM &&
                   DLRT_OPTIM_ADAMW == (int)DL_IR_OPTIM_ADAMW &&
                   DLRT_OPTIM_RMSPROP == (int)DL_IR_OPTIM_RMSPROP,
               "optimizer codes of the plan equal dl_ir_optim");

// A trained param: its gradient, its place in the virtual concatenation and its slot buffers.
typedef struct trained {
    const dl_ir_value *p, *g;
    int64_t n, off;
    uint32_t slot[DL_OPTIM_REF_MAX_SLOTS];
    uint32_t accum; // the "PARAM.grad_accum" buffer (accumulation only)
} trained;

typedef struct train_ctx {
    cg *c;
    const dl_ir_train *t;
    dl_optim_ref_hparams hp;
    dl_optim_ref_loss_scale ls;
    const char *slot_names[DL_OPTIM_REF_MAX_SLOTS];
    size_t n_slots;
    trained *tp;
    size_t n_tp;
    int64_t total, n_chunks;
    uint32_t partial_buf;
    bool acc; // accumulate > 1
    double hyper[DLRT_HP_COUNT];
} train_ctx;

static dl_status add_hparam(train_ctx *x, const char *name, uint32_t index, uint32_t flags) {
    dlrt_plan_hparam h = {0, 0, index, flags, x->hyper[index]};
    if (!DL_VEC_PUSH(&x->c->hparams, h) || !DL_VEC_PUSH(&x->c->hparam_names, name)) {
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

static bool is_frozen(const dl_ir_train *t, const dl_ir_value *p) {
    for (size_t i = 0; i < t->n_freeze; i++) {
        if (t->freeze[i] == p) {
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// IR helpers

static LLVMValueRef f64c(cg *c, double v) {
    return LLVMConstReal(c->t_f64, v);
}

static LLVMValueRef hp_ptr(cg *c, LLVMValueRef hyper, int idx) {
    LLVMValueRef i = cg_i64(c, idx);
    return LLVMBuildInBoundsGEP2(c->b, c->t_f64, hyper, &i, 1, "");
}

static LLVMValueRef hp_load(cg *c, LLVMValueRef hyper, int idx) {
    return LLVMBuildLoad2(c->b, c->t_f64, hp_ptr(c, hyper, idx), "");
}

static void hp_store(cg *c, LLVMValueRef hyper, int idx, LLVMValueRef v) {
    LLVMBuildStore(c->b, v, hp_ptr(c, hyper, idx));
}

// A double scalar rounded to float, as PyTorch passes Python floats to float32 kernels.
static LLVMValueRef hp_f32(cg *c, LLVMValueRef hyper, int idx) {
    return LLVMBuildFPTrunc(c->b, hp_load(c, hyper, idx), c->t_f32, "");
}

static LLVMValueRef to_f32(cg *c, LLVMValueRef d) {
    return LLVMBuildFPTrunc(c->b, d, c->t_f32, "");
}

static LLVMValueRef is_finite64(cg *c, LLVMValueRef v) {
    LLVMValueRef a = cg_intrinsic1(c, "llvm.fabs", c->t_f64, v);
    return LLVMBuildFCmp(c->b, LLVMRealOLT, a, f64c(c, INFINITY), "");
}

static LLVMValueRef smax(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, a, b, ""), a, b, "");
}

static LLVMValueRef smin(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, a, b, ""), a, b, "");
}

// Visits the elements [elo, ehi) of the virtual concatenation: for each trained param j, the
// part of it inside, calling body(x, j, ptrs, local index) in a loop. ptrs[] are the kernel
// arguments `arg_of(j, s)` loaded once per param.
typedef void (*elem_body)(train_ctx *x, void *u, size_t j, LLVMValueRef local);

// The local indices [*lo, *hi) of param j inside the elements [elo, ehi) (empty: *hi <= *lo).
static void param_part(train_ctx *x, size_t j, LLVMValueRef elo, LLVMValueRef ehi, LLVMValueRef *lo,
                       LLVMValueRef *hi) {
    cg *c = x->c;
    const trained *tp = &x->tp[j];
    *lo = LLVMBuildSub(c->b, smax(c, elo, cg_i64(c, tp->off)), cg_i64(c, tp->off), "");
    *hi = LLVMBuildSub(c->b, smin(c, ehi, cg_i64(c, tp->off + tp->n)), cg_i64(c, tp->off), "");
}

static void for_each_elem(train_ctx *x, LLVMValueRef elo, LLVMValueRef ehi, elem_body body,
                          void *u) {
    cg *c = x->c;
    for (size_t j = 0; j < x->n_tp; j++) {
        LLVMValueRef lo, hi;
        param_part(x, j, elo, ehi, &lo, &hi);
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, lo, hi, "e");
        body(x, u, j, i);
        cg_for_end(c, &l);
    }
}

// ---------------------------------------------------------------------------------------------
// train.accum (accumulation only): accum += g, as stored (rounded to the param's dtype), chunk
// by chunk. A kernel of its own (not folded into train.gradsq) so that data-parallel training
// can all-reduce the accumulators between the two (the plan's comm_at).
// args: accumulators | grads of the trained params

typedef struct gradsq_u {
    LLVMValueRef *g;  // per param: the values summed (grads, or accumulators)
    LLVMValueRef *ac; // per param, accumulators (train.accum only)
    LLVMValueRef acc; // train.gradsq: the scalar double sum (an alloca)
    LLVMValueRef vac; // train.gradsq: GRADSQ_LANES double lanes (an alloca of a vector)
} gradsq_u;

// train.gradsq's lanes: 16 doubles, two AVX-512 registers.
enum { GRADSQ_LANES = 16 };

static void accum_body(train_ctx *x, void *u_, size_t j, LLVMValueRef i) {
    cg *c = x->c;
    gradsq_u *u = u_;
    dl_dtype pt = x->tp[j].p->type.dtype;
    LLVMValueRef g = cg_load(c, u->g[j], x->tp[j].g->type.dtype, i);
    g = cg_convert(c, g, x->tp[j].g->type.dtype, pt);
    cg_store(c, u->ac[j], pt, i, LLVMBuildFAdd(c->b, cg_load(c, u->ac[j], pt, i), g, ""));
}

// train.gradsq: partial[ci] = the chunk's sum of (double)v^2, where v is the gradient, or with
// accumulation the accumulator after train.accum, in a fixed shape that vectorises: each
// param's part of the chunk is taken in blocks of GRADSQ_LANES elements added lane by lane into
// GRADSQ_LANES double lanes (IEEE adds per lane, no reassociation), the part's last
// (< GRADSQ_LANES) elements into a scalar in element order; at the chunk's end the lanes are
// combined by a fixed pairwise tree and the scalar added last. The shape depends only on the
// chunk and the param sizes: the bytes are the same for any partition of the range, thread
// count and ISA (a sequential sum ran at one element per add latency: 5-9 % of an MLP step).
// args: partials | grads (or accumulators) of the trained params
static void gradsq_body(train_ctx *x, void *u_, size_t j, LLVMValueRef i) {
    cg *c = x->c;
    gradsq_u *u = u_;
    dl_dtype t = x->acc ? x->tp[j].p->type.dtype : x->tp[j].g->type.dtype;
    LLVMValueRef d = LLVMBuildFPExt(c->b, cg_load(c, u->g[j], t, i), c->t_f64, "");
    LLVMValueRef a = LLVMBuildLoad2(c->b, c->t_f64, u->acc, "");
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, a, LLVMBuildFMul(c->b, d, d, ""), ""), u->acc);
}

// Param j's part [lo, hi) of the chunk: whole blocks into the lanes, the rest into the scalar.
static void gradsq_part(train_ctx *x, gradsq_u *u, size_t j, LLVMValueRef lo, LLVMValueRef hi) {
    cg *c = x->c;
    dl_dtype t = x->acc ? x->tp[j].p->type.dtype : x->tp[j].g->type.dtype;
    LLVMValueRef n = smax(c, LLVMBuildSub(c->b, hi, lo, ""), cg_i64(c, 0));
    LLVMValueRef mid = lo;
    if (t == DL_DT_FLOAT || t == DL_DT_FLOAT16 || t == DL_DT_BFLOAT16) { // dl_cg__vload's dtypes
        LLVMValueRef nb = LLVMBuildUDiv(c->b, n, cg_i64(c, GRADSQ_LANES), "blocks");
        LLVMTypeRef vt = LLVMVectorType(c->t_f64, GRADSQ_LANES);
        cg_loop l;
        LLVMValueRef b = cg_for_begin(c, &l, cg_i64(c, 0), nb, "block");
        LLVMValueRef at =
            LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, b, cg_i64(c, GRADSQ_LANES), ""), "");
        LLVMValueRef d =
            LLVMBuildFPExt(c->b, dl_cg__vload(c, u->g[j], t, at, GRADSQ_LANES), vt, "");
        LLVMValueRef a = LLVMBuildLoad2(c->b, vt, u->vac, "");
        LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, a, LLVMBuildFMul(c->b, d, d, ""), ""), u->vac);
        cg_for_end(c, &l);
        mid = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, nb, cg_i64(c, GRADSQ_LANES), ""), "");
    }
    cg_loop l;
    LLVMValueRef i = cg_for_begin(c, &l, mid, hi, "e");
    gradsq_body(x, u, j, i);
    cg_for_end(c, &l);
}

// The chunk's partial: the lanes by a pairwise tree (lane k + lane k + half, halving), then the
// scalar.
static LLVMValueRef gradsq_total(cg *c, const gradsq_u *u) {
    LLVMValueRef v = LLVMBuildLoad2(c->b, LLVMVectorType(c->t_f64, GRADSQ_LANES), u->vac, "");
    LLVMValueRef e[GRADSQ_LANES];
    for (int k = 0; k < GRADSQ_LANES; k++) {
        e[k] = LLVMBuildExtractElement(c->b, v, cg_i32(c, k), "");
    }
    for (int h = GRADSQ_LANES / 2; h >= 1; h /= 2) {
        for (int k = 0; k < h; k++) {
            e[k] = LLVMBuildFAdd(c->b, e[k], e[k + h], "");
        }
    }
    return LLVMBuildFAdd(c->b, e[0], LLVMBuildLoad2(c->b, c->t_f64, u->acc, ""), "");
}

// The chunk loop of train.accum (is_accum) or train.gradsq over the trained params.
static dl_status emit_chunked(train_ctx *x, bool is_accum) {
    cg *c = x->c;
    size_t n_out = is_accum ? x->n_tp : 1, n_args = n_out + x->n_tp;
    uint32_t *bufs = dl_mem_calloc(n_args ? n_args : 1, sizeof *bufs);
    LLVMValueRef *g = dl_mem_calloc(x->n_tp ? 2 * x->n_tp : 1, sizeof *g);
    if (!bufs || !g) {
        free(bufs);
        free(g);
        return DL_ERR_NOMEM;
    }
    if (!is_accum) {
        bufs[0] = x->partial_buf;
    }
    for (size_t j = 0; j < x->n_tp; j++) {
        if (is_accum) {
            bufs[j] = x->tp[j].accum;
        }
        bufs[n_out + j] = x->acc && !is_accum ? x->tp[j].accum : c->value_buf[x->tp[j].g->id];
    }
    cg_kernel k;
    dl_status st = cg_kernel_begin_bufs(c, bufs, n_args, n_out, x->n_chunks,
                                        is_accum ? "train.accum" : "train.gradsq", &k);
    if (st == DL_OK) {
        for (size_t j = 0; j < x->n_tp; j++) {
            g[j] = cg_kernel_arg(c, &k, n_out + j);
            if (is_accum) {
                g[x->n_tp + j] = cg_kernel_arg(c, &k, j);
            }
        }
        LLVMValueRef part = is_accum ? NULL : cg_kernel_arg(c, &k, 0);
        LLVMTypeRef vt = LLVMVectorType(c->t_f64, GRADSQ_LANES);
        gradsq_u u = {g, g + x->n_tp, is_accum ? NULL : cg_entry_alloca(c, &k, c->t_f64, 1),
                      is_accum ? NULL : cg_entry_alloca(c, &k, vt, 1)};
        cg_loop l;
        LLVMValueRef ci = cg_for_begin(c, &l, k.begin, k.end, "chunk");
        if (!is_accum) {
            LLVMBuildStore(c->b, f64c(c, 0.0), u.acc);
            LLVMBuildStore(c->b, LLVMConstNull(vt), u.vac);
        }
        LLVMValueRef elo = LLVMBuildMul(c->b, ci, cg_i64(c, TRAIN_CHUNK), "");
        LLVMValueRef ehi =
            smin(c, LLVMBuildAdd(c->b, elo, cg_i64(c, TRAIN_CHUNK), ""), cg_i64(c, x->total));
        if (is_accum) {
            for_each_elem(x, elo, ehi, accum_body, &u);
        } else {
            for (size_t j = 0; j < x->n_tp; j++) {
                LLVMValueRef lo, hi;
                param_part(x, j, elo, ehi, &lo, &hi);
                gradsq_part(x, &u, j, lo, hi);
            }
            LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f64, part, &ci, 1, "");
            LLVMBuildStore(c->b, gradsq_total(c, &u), p);
        }
        cg_for_end(c, &l);
        st = cg_kernel_end(c, &k);
    }
    free(bufs);
    free(g);
    return st;
}

// The data-parallel all-reduce point (format 6): what is reduced (each trained param's gradient,
// or its accumulator) and where in the train entry (before train.gradsq, after train.accum).
// `first_step`: the first step kernel's record (they join the train entry after the node kernels).
static dl_status plan_comm(train_ctx *x, size_t first_step) {
    cg *c = x->c;
    c->comm_at = (uint32_t)(c->train_kernels.len + (c->kernels.len - first_step));
    for (size_t j = 0; j < x->n_tp; j++) {
        const trained *tp = &x->tp[j];
        dlrt_plan_grad g = {0};
        g.buffer = x->acc ? tp->accum : c->value_buf[tp->g->id];
        g.dtype = (uint32_t)(x->acc ? tp->p->type.dtype : tp->g->type.dtype);
        g.numel = (uint64_t)tp->n;
        for (size_t i = 0; i < c->m->params.len; i++) {
            if (c->m->params.data[i] == tp->p) {
                g.param = (uint32_t)i;
            }
        }
        if (!DL_VEC_PUSH(&c->comm_grads, g)) {
            return DL_ERR_NOMEM;
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// train.prologue (range 1). args: hyper, [seed], [rng counter] | partials, loss

static dl_status emit_prologue(train_ctx *x) {
    cg *c = x->c;
    bool has_seed = c->seed_init != NULL, has_counter = c->counter_buf != UINT32_MAX;
    uint32_t bufs[5];
    size_t n = 0;
    bufs[n++] = c->hyper_buf;
    if (has_seed) {
        bufs[n++] = c->seed_buf;
    }
    size_t i_counter = n;
    if (has_counter) {
        bufs[n++] = c->counter_buf;
    }
    size_t n_out = n;
    bufs[n++] = x->partial_buf;
    bufs[n++] = c->loss_buf;
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, n, n_out, 1, "train.prologue", &k));
    LLVMValueRef hyper = cg_kernel_arg(c, &k, 0);
    LLVMValueRef seed = has_seed ? cg_kernel_arg(c, &k, 1) : NULL;
    LLVMValueRef part = cg_kernel_arg(c, &k, n_out);
    LLVMValueRef lossp = cg_kernel_arg(c, &k, n_out + 1);
    // total = sum of the partials in chunk order (a fixed order: deterministic).
    LLVMValueRef acc = cg_entry_alloca(c, &k, c->t_f64, 1);
    LLVMBuildStore(c->b, f64c(c, 0.0), acc);
    cg_loop l;
    LLVMValueRef ci = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, x->n_chunks), "chunk");
    LLVMValueRef pv =
        LLVMBuildLoad2(c->b, c->t_f64, LLVMBuildInBoundsGEP2(c->b, c->t_f64, part, &ci, 1, ""), "");
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, c->t_f64, acc, ""), pv, ""), acc);
    cg_for_end(c, &l);
    LLVMValueRef total = LLVMBuildLoad2(c->b, c->t_f64, acc, "total");
    LLVMValueRef finite = is_finite64(c, total);
    // GradScaler.unscale_: inv_scale = (float)(1 / scale); the norm is that of the unscaled grads.
    LLVMValueRef scale = hp_load(c, hyper, DLRT_HP_LOSS_SCALE);
    LLVMValueRef inv = LLVMBuildFPExt(c->b, to_f32(c, LLVMBuildFDiv(c->b, f64c(c, 1.0), scale, "")),
                                      c->t_f64, "inv_scale");
    LLVMValueRef norm =
        LLVMBuildFMul(c->b, cg_intrinsic1(c, "llvm.sqrt", c->t_f64, total), inv, "norm");
    // Accumulation: this call is micro-step `count` of the cycle; the k-th is the boundary. The
    // norm is that of the running mean accum / count (at the boundary, the mean gradient's).
    LLVMValueRef boundary = NULL;
    if (x->acc) {
        LLVMValueRef count =
            LLVMBuildFAdd(c->b, hp_load(c, hyper, DLRT_HP_ACCUM_COUNT), f64c(c, 1.0), "count");
        boundary = LLVMBuildFCmp(c->b, LLVMRealOGE, count, hp_load(c, hyper, DLRT_HP_ACCUMULATE),
                                 "boundary");
        norm = LLVMBuildFDiv(c->b, norm, count, "norm");
        hp_store(c, hyper, DLRT_HP_ACCUM_COUNT,
                 LLVMBuildSelect(c->b, boundary, f64c(c, 0.0), count, ""));
        hp_store(c, hyper, DLRT_HP_BOUNDARY, LLVMBuildUIToFP(c->b, boundary, c->t_f64, ""));
    } else {
        hp_store(c, hyper, DLRT_HP_BOUNDARY, f64c(c, 1.0));
    }
    LLVMValueRef coef = f64c(c, 1.0);
    if (x->t->has_clip_norm) { // clip_grad_norm_: clamp(max_norm / (norm + 1e-6), max=1)
        LLVMValueRef mx = hp_load(c, hyper, DLRT_HP_CLIP_NORM);
        LLVMValueRef cc = LLVMBuildFDiv(c->b, mx, LLVMBuildFAdd(c->b, norm, f64c(c, 1e-6), ""), "");
        LLVMValueRef lt = LLVMBuildFCmp(c->b, LLVMRealULT, cc, f64c(c, 1.0), "");
        coef = LLVMBuildSelect(c->b, lt, cc, f64c(c, 1.0), "coef");
    }
    LLVMValueRef apply_b = boundary ? LLVMBuildAnd(c->b, boundary, finite, "") : finite;
    LLVMValueRef apply = LLVMBuildUIToFP(c->b, apply_b, c->t_f64, "apply");
    LLVMValueRef step = LLVMBuildFAdd(c->b, hp_load(c, hyper, DLRT_HP_STEP), apply, "step");
    hp_store(c, hyper, DLRT_HP_STEP, step);
    hp_store(c, hyper, DLRT_HP_APPLY, apply);
    LLVMValueRef skipped = LLVMBuildNot(c->b, finite, "");
    if (boundary) { // off a boundary nothing is skipped (nothing was due)
        skipped = LLVMBuildAnd(c->b, boundary, skipped, "");
    }
    hp_store(c, hyper, DLRT_HP_SKIPPED, LLVMBuildUIToFP(c->b, skipped, c->t_f64, ""));
    hp_store(c, hyper, DLRT_HP_GRAD_NORM, norm);
    hp_store(c, hyper, DLRT_HP_GRAD_MULT, inv);
    hp_store(c, hyper, DLRT_HP_CLIP_COEF, coef);
    if (x->t->optimizer == DL_IR_OPTIM_ADAM || x->t->optimizer == DL_IR_OPTIM_ADAMW) {
        // Python floats in _single_tensor_adam: bias_correction1 = 1 - beta1 ** step, ...
        LLVMValueRef b1 = hp_load(c, hyper, DLRT_HP_BETA1), b2 = hp_load(c, hyper, DLRT_HP_BETA2);
        LLVMValueRef bc1 =
            LLVMBuildFSub(c->b, f64c(c, 1.0), cg_intrinsic2(c, "llvm.pow", c->t_f64, b1, step), "");
        LLVMValueRef bc2 =
            LLVMBuildFSub(c->b, f64c(c, 1.0), cg_intrinsic2(c, "llvm.pow", c->t_f64, b2, step), "");
        hp_store(c, hyper, DLRT_HP_STEP_SIZE,
                 LLVMBuildFDiv(c->b, hp_load(c, hyper, DLRT_HP_LR), bc1, ""));
        hp_store(c, hyper, DLRT_HP_BC2_SQRT, cg_intrinsic1(c, "llvm.sqrt", c->t_f64, bc2));
    }
    LLVMValueRef loss = cg_load(c, lossp, c->m->train_loss->type.dtype, cg_i64(c, 0));
    hp_store(c, hyper, DLRT_HP_LOSS, LLVMBuildFPExt(c->b, loss, c->t_f64, ""));
    if (x->t->loss_scale == DL_IR_LS_DYNAMIC) {
        // dl_optim_ref_loss_scale_update (GradScaler._amp_update_scale_).
        LLVMValueRef tr = hp_load(c, hyper, DLRT_HP_GROWTH_TRACKER);
        LLVMValueRef succ = LLVMBuildFAdd(c->b, tr, f64c(c, 1.0), "");
        LLVMValueRef at_int =
            LLVMBuildFCmp(c->b, LLVMRealOEQ, succ, hp_load(c, hyper, DLRT_HP_INTERVAL), "");
        LLVMValueRef grown = LLVMBuildFMul(c->b, scale, hp_load(c, hyper, DLRT_HP_GROWTH), "");
        LLVMValueRef grown_ok =
            is_finite64(c, LLVMBuildFPExt(c->b, to_f32(c, grown), c->t_f64, ""));
        LLVMValueRef fin_scale = LLVMBuildSelect(
            c->b, at_int, LLVMBuildSelect(c->b, grown_ok, grown, scale, ""), scale, "");
        LLVMValueRef fin_tr = LLVMBuildSelect(c->b, at_int, f64c(c, 0.0), succ, "");
        LLVMValueRef back = LLVMBuildFMul(c->b, scale, hp_load(c, hyper, DLRT_HP_BACKOFF), "");
        LLVMValueRef new_scale = LLVMBuildSelect(c->b, finite, fin_scale, back, "new_scale");
        LLVMValueRef new_tr = LLVMBuildSelect(c->b, finite, fin_tr, f64c(c, 0.0), "");
        if (boundary) { // the scaler updates once per optimizer step
            new_scale = LLVMBuildSelect(c->b, boundary, new_scale, scale, "");
            new_tr = LLVMBuildSelect(c->b, boundary, new_tr, tr, "");
        }
        hp_store(c, hyper, DLRT_HP_LOSS_SCALE, new_scale);
        hp_store(c, hyper, DLRT_HP_GROWTH_TRACKER, new_tr);
        scale = new_scale;
    }
    if (has_seed) { // the next step's backward starts from d(loss * scale)/d(loss) = scale
        cg_store(c, seed, c->m->grad_seed->type.dtype, cg_i64(c, 0), to_f32(c, scale));
    }
    if (has_counter) { // the next call's Dropout masks draw with counter + 1
        LLVMValueRef cp = cg_kernel_arg(c, &k, i_counter);
        LLVMValueRef v = cg_load(c, cp, DL_DT_INT64, cg_i64(c, 0));
        cg_store(c, cp, DL_DT_INT64, cg_i64(c, 0), LLVMBuildAdd(c->b, v, cg_i64(c, 1), ""));
    }
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// train.update.*: args: params, slots (param-major) | grads, hyper

typedef struct update_u {
    LLVMValueRef *p, *g, *s; // per param; s: n_slots per param
    LLVMValueRef *ac;        // per param, accumulators (accumulation only; then g is unused)
    LLVMValueRef kf;         // (float)k: the mean gradient is accum / k
    // float scalars
    LLVMValueRef mult, coef, lr_neg, wd, wd_nz, mom, one_m_damp, is_first, b1w, b2, one_m_b2, eps,
        bc2s, neg_step, decay, alpha, one_m_alpha;
} update_u;

// torch.lerp for a float weight: w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w).
static LLVMValueRef lerp(cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef w) {
    LLVMValueRef d = LLVMBuildFSub(c->b, b, a, "");
    LLVMValueRef lo = LLVMBuildFAdd(c->b, a, LLVMBuildFMul(c->b, w, d, ""), "");
    LLVMValueRef hi = LLVMBuildFSub(
        c->b, b, LLVMBuildFMul(c->b, d, LLVMBuildFSub(c->b, cg_f32(c, 1.0), w, ""), ""), "");
    return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, w, cg_f32(c, 0.5), ""), lo, hi,
                           "");
}

static LLVMValueRef fadd(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFAdd(c->b, a, b, "");
}

static LLVMValueRef fmul(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFMul(c->b, a, b, "");
}

static LLVMValueRef fdiv(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFDiv(c->b, a, b, "");
}

// Stores v into a slot and gives it back as stored (rounded for a narrow dtype).
static LLVMValueRef slot_set(cg *c, LLVMValueRef s, dl_dtype t, LLVMValueRef i, LLVMValueRef v) {
    cg_store(c, s, t, i, v);
    return t == DL_DT_FLOAT ? v : cg_load(c, s, t, i);
}

// One element of one param: ir/optim_ref.c's formulas in PyTorch's float32 operation order.
static void update_body(train_ctx *x, void *u_, size_t j, LLVMValueRef i) {
    cg *c = x->c;
    update_u *u = u_;
    const trained *tp = &x->tp[j];
    dl_dtype pt = tp->p->type.dtype;
    LLVMValueRef *s = u->s + j * x->n_slots;
    LLVMValueRef p = cg_load(c, u->p[j], pt, i);
    LLVMValueRef g;
    if (x->acc) { // the mean gradient accum / k; the accumulator restarts at 0
        g = fdiv(c, cg_load(c, u->ac[j], pt, i), u->kf);
        cg_store(c, u->ac[j], pt, i, cg_f32(c, 0.0));
    } else {
        g = cg_load(c, u->g[j], tp->g->type.dtype, i);
    }
    g = fmul(c, g, u->mult); // GradScaler.unscale_
    g = fmul(c, g, u->coef); // clip_grad_norm_
    const dl_optim_ref_hparams *hp = &x->hp;
    dl_ir_optim kind = x->t->optimizer;
    if (kind != DL_IR_OPTIM_ADAMW) { // if weight_decay != 0: grad = grad.add(param, alpha=wd)
        g = LLVMBuildSelect(c->b, u->wd_nz, fadd(c, g, fmul(c, u->wd, p)), g, "");
    }
    switch (kind) {
    case DL_IR_OPTIM_SGD:
        if (x->n_slots > 0) {
            // buf.mul_(momentum).add_(grad, alpha=1 - dampening); torch.clone(grad) at step 1
            LLVMValueRef b = cg_load(c, s[0], pt, i);
            LLVMValueRef nb = fadd(c, fmul(c, b, u->mom), fmul(c, u->one_m_damp, g));
            nb = slot_set(c, s[0], pt, i, LLVMBuildSelect(c->b, u->is_first, g, nb, ""));
            g = hp->nesterov ? fadd(c, g, fmul(c, u->mom, nb)) : nb;
        }
        p = fadd(c, p, fmul(c, u->lr_neg, g)); // param.add_(grad, alpha=-lr)
        break;
    case DL_IR_OPTIM_ADAM:
    case DL_IR_OPTIM_ADAMW: {
        if (kind == DL_IR_OPTIM_ADAMW) {
            p = fmul(c, p, u->decay); // param.mul_(1 - lr * weight_decay)
        }
        // exp_avg.lerp_(grad, 1 - beta1); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
        LLVMValueRef m = slot_set(c, s[0], pt, i, lerp(c, cg_load(c, s[0], pt, i), g, u->b1w));
        LLVMValueRef v =
            fadd(c, fmul(c, cg_load(c, s[1], pt, i), u->b2), fmul(c, fmul(c, u->one_m_b2, g), g));
        v = slot_set(c, s[1], pt, i, v);
        if (hp->amsgrad) { // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
            LLVMValueRef vm = cg_load(c, s[2], pt, i);
            LLVMValueRef gt = LLVMBuildFCmp(c->b, LLVMRealOGT, v, vm, "");
            v = slot_set(c, s[2], pt, i, LLVMBuildSelect(c->b, gt, v, vm, ""));
        }
        // denom = (v.sqrt() / bias_correction2_sqrt).add_(eps); param.addcdiv_(m, denom, -ss)
        LLVMValueRef denom =
            fadd(c, fdiv(c, cg_intrinsic1(c, "llvm.sqrt", c->t_f32, v), u->bc2s), u->eps);
        p = fadd(c, p, fdiv(c, fmul(c, u->neg_step, m), denom));
        break;
    }
    case DL_IR_OPTIM_RMSPROP: {
        size_t k = 0;
        LLVMValueRef sq_p = s[k++];
        LLVMValueRef buf_p = hp->momentum > 0.0 ? s[k++] : NULL;
        LLVMValueRef gavg_p = hp->centered ? s[k++] : NULL;
        // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        LLVMValueRef sq = fadd(c, fmul(c, cg_load(c, sq_p, pt, i), u->alpha),
                               fmul(c, fmul(c, u->one_m_alpha, g), g));
        sq = slot_set(c, sq_p, pt, i, sq);
        LLVMValueRef avg;
        if (gavg_p) { // grad_avg.lerp_(grad, 1 - alpha); addcmul(square_avg, ga, ga, value=-1)
            LLVMValueRef ga =
                slot_set(c, gavg_p, pt, i, lerp(c, cg_load(c, gavg_p, pt, i), g, u->one_m_alpha));
            avg = fadd(c, sq, fmul(c, fmul(c, cg_f32(c, -1.0), ga), ga));
        } else {
            avg = sq;
        }
        avg = fadd(c, cg_intrinsic1(c, "llvm.sqrt", c->t_f32, avg), u->eps);
        if (buf_p) { // buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr)
            LLVMValueRef b = fadd(c, fmul(c, cg_load(c, buf_p, pt, i), u->mom), fdiv(c, g, avg));
            b = slot_set(c, buf_p, pt, i, b);
            p = fadd(c, p, fmul(c, u->lr_neg, b));
        } else { // param.addcdiv_(grad, avg, value=-lr)
            p = fadd(c, p, fdiv(c, fmul(c, u->lr_neg, g), avg));
        }
        break;
    }
    }
    cg_store(c, u->p[j], pt, i, p);
}

static const char *update_name(dl_ir_optim o) {
    switch (o) {
    case DL_IR_OPTIM_SGD:
        return "train.update.sgd";
    case DL_IR_OPTIM_ADAM:
        return "train.update.adam";
    case DL_IR_OPTIM_ADAMW:
        return "train.update.adamw";
    case DL_IR_OPTIM_RMSPROP:
        return "train.update.rmsprop";
    }
    DL_UNREACHABLE();
}

// Accumulation, a skipped boundary: the accumulators restart at 0 (PyTorch's zero_grad).
static void zero_body(train_ctx *x, void *u_, size_t j, LLVMValueRef i) {
    update_u *u = u_;
    cg_store(x->c, u->ac[j], x->tp[j].p->type.dtype, i, cg_f32(x->c, 0.0));
}

// args: params, slots (param-major), [accumulators] | grads (without accumulation), hyper
static dl_status emit_update(train_ctx *x) {
    cg *c = x->c;
    size_t ns = x->n_slots, np = x->n_tp;
    size_t n_out = np * (1 + ns + (x->acc ? 1 : 0)), n_g = x->acc ? 0 : np;
    size_t n_args = n_out + n_g + 1;
    uint32_t *bufs = dl_mem_calloc(n_args, sizeof *bufs);
    LLVMValueRef *ptrs = dl_mem_calloc(n_args, sizeof *ptrs);
    if (!bufs || !ptrs) {
        free(bufs);
        free(ptrs);
        return DL_ERR_NOMEM;
    }
    for (size_t j = 0; j < np; j++) {
        bufs[j] = c->value_buf[x->tp[j].p->id];
        for (size_t q = 0; q < ns; q++) {
            bufs[np + j * ns + q] = x->tp[j].slot[q];
        }
        if (x->acc) {
            bufs[np * (1 + ns) + j] = x->tp[j].accum;
        } else {
            bufs[n_out + j] = c->value_buf[x->tp[j].g->id];
        }
    }
    bufs[n_out + n_g] = c->hyper_buf;
    cg_kernel k;
    dl_status st =
        cg_kernel_begin_bufs(c, bufs, n_args, n_out, x->n_chunks, update_name(x->t->optimizer), &k);
    if (st == DL_OK) {
        LLVMValueRef hyper = cg_kernel_arg(c, &k, n_out + n_g);
        for (size_t a = 0; a < n_out + n_g; a++) {
            ptrs[a] = cg_kernel_arg(c, &k, a);
        }
        update_u u;
        memset(&u, 0, sizeof u);
        u.p = ptrs;
        u.s = ptrs + np;
        u.g = ptrs + n_out;
        u.ac = ptrs + np * (1 + ns);
        LLVMValueRef elo = LLVMBuildMul(c->b, k.begin, cg_i64(c, TRAIN_CHUNK), "");
        LLVMValueRef ehi =
            smin(c, LLVMBuildMul(c->b, k.end, cg_i64(c, TRAIN_CHUNK), ""), cg_i64(c, x->total));
        // A skipped step (non-finite gradient) changes nothing: return before any store. With
        // accumulation, a call that is no boundary returns too, and a skipped boundary only
        // zeroes the accumulators.
        LLVMValueRef apply = hp_load(c, hyper, DLRT_HP_APPLY);
        LLVMValueRef boundary = hp_load(c, hyper, DLRT_HP_BOUNDARY);
        LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "apply");
        LLVMBasicBlockRef skip = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "skip");
        LLVMBuildCondBr(c->b, LLVMBuildFCmp(c->b, LLVMRealUNE, apply, f64c(c, 0.0), ""), run, skip);
        LLVMPositionBuilderAtEnd(c->b, skip);
        if (x->acc) {
            LLVMBasicBlockRef zero = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "zero");
            LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "out");
            LLVMBuildCondBr(c->b, LLVMBuildFCmp(c->b, LLVMRealUNE, boundary, f64c(c, 0.0), ""),
                            zero, out);
            LLVMPositionBuilderAtEnd(c->b, zero);
            for_each_elem(x, elo, ehi, zero_body, &u);
            LLVMBuildBr(c->b, out);
            LLVMPositionBuilderAtEnd(c->b, out);
        }
        LLVMBuildRetVoid(c->b);
        LLVMPositionBuilderAtEnd(c->b, run);
        u.kf = hp_f32(c, hyper, DLRT_HP_ACCUMULATE);
        u.mult = hp_f32(c, hyper, DLRT_HP_GRAD_MULT);
        u.coef = hp_f32(c, hyper, DLRT_HP_CLIP_COEF);
        LLVMValueRef lr = hp_load(c, hyper, DLRT_HP_LR);
        LLVMValueRef wd = hp_load(c, hyper, DLRT_HP_WEIGHT_DECAY);
        u.lr_neg = to_f32(c, LLVMBuildFNeg(c->b, lr, ""));
        u.wd = to_f32(c, wd);
        u.wd_nz = LLVMBuildFCmp(c->b, LLVMRealUNE, wd, f64c(c, 0.0), "");
        u.mom = hp_f32(c, hyper, DLRT_HP_MOMENTUM);
        u.one_m_damp =
            to_f32(c, LLVMBuildFSub(c->b, f64c(c, 1.0), hp_load(c, hyper, DLRT_HP_DAMPENING), ""));
        u.is_first =
            LLVMBuildFCmp(c->b, LLVMRealOEQ, hp_load(c, hyper, DLRT_HP_STEP), f64c(c, 1.0), "");
        u.b1w = to_f32(c, LLVMBuildFSub(c->b, f64c(c, 1.0), hp_load(c, hyper, DLRT_HP_BETA1), ""));
        u.b2 = hp_f32(c, hyper, DLRT_HP_BETA2);
        u.one_m_b2 =
            to_f32(c, LLVMBuildFSub(c->b, f64c(c, 1.0), hp_load(c, hyper, DLRT_HP_BETA2), ""));
        u.eps = hp_f32(c, hyper, DLRT_HP_EPS);
        u.bc2s = hp_f32(c, hyper, DLRT_HP_BC2_SQRT);
        u.neg_step = to_f32(c, LLVMBuildFNeg(c->b, hp_load(c, hyper, DLRT_HP_STEP_SIZE), ""));
        u.decay = to_f32(c, LLVMBuildFSub(c->b, f64c(c, 1.0), LLVMBuildFMul(c->b, lr, wd, ""), ""));
        u.alpha = hp_f32(c, hyper, DLRT_HP_ALPHA);
        u.one_m_alpha =
            to_f32(c, LLVMBuildFSub(c->b, f64c(c, 1.0), hp_load(c, hyper, DLRT_HP_ALPHA), ""));
        for_each_elem(x, elo, ehi, update_body, &u);
        st = cg_kernel_end(c, &k);
    }
    free(bufs);
    free(ptrs);
    return st;
}

// ---------------------------------------------------------------------------------------------
// train.assign: param := value (BatchNormalization's running statistics), one kernel per assign,
// committed only by a step that changes state (a skipped step leaves every param as it was).
//   accumulate = 1: args param | value, hyper. Nothing is written unless APPLY.
//   accumulate > 1: args param, start | value, hyper. The statistics follow every micro-batch as
//   PyTorch's do (each forward updates them, chained through the param); `start` (the STATE
//   tensor "PARAM.cycle_start") keeps the param as it was when the cycle began, so a skipped
//   boundary puts it back: a skipped optimizer step discards the whole cycle's statistics, as it
//   discards the cycle's gradients. Every boundary zeroes `start` again.

static dl_status emit_assign(train_ctx *x, const dl_ir_assign *a, uint32_t start_buf) {
    cg *c = x->c;
    int64_t n = dl_ir_type_numel(&a->param->type);
    int64_t chunks = n > 0 ? (n + TRAIN_CHUNK - 1) / TRAIN_CHUNK : 1;
    dl_dtype pt = a->param->type.dtype, vt = a->value->type.dtype;
    uint32_t bufs[4];
    size_t nb = 0;
    bufs[nb++] = c->value_buf[a->param->id];
    if (x->acc) {
        bufs[nb++] = start_buf;
    }
    size_t n_out = nb;
    bufs[nb++] = c->value_buf[a->value->id];
    bufs[nb++] = c->hyper_buf;
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, nb, n_out, chunks, "train.assign", &k));
    LLVMValueRef dst = cg_kernel_arg(c, &k, 0);
    LLVMValueRef start = x->acc ? cg_kernel_arg(c, &k, 1) : NULL;
    LLVMValueRef src = cg_kernel_arg(c, &k, n_out);
    LLVMValueRef hyper = cg_kernel_arg(c, &k, n_out + 1);
    LLVMValueRef apply =
        LLVMBuildFCmp(c->b, LLVMRealUNE, hp_load(c, hyper, DLRT_HP_APPLY), f64c(c, 0.0), "");
    LLVMValueRef first = NULL, restore = NULL, boundary = NULL;
    if (x->acc) {
        // After the prologue the count is this call's micro-step (1 for the cycle's first call,
        // 0 at the boundary since k > 1).
        first = LLVMBuildFCmp(c->b, LLVMRealOEQ, hp_load(c, hyper, DLRT_HP_ACCUM_COUNT),
                              f64c(c, 1.0), "first");
        boundary =
            LLVMBuildFCmp(c->b, LLVMRealUNE, hp_load(c, hyper, DLRT_HP_BOUNDARY), f64c(c, 0.0), "");
        restore = LLVMBuildAnd(c->b, boundary, LLVMBuildNot(c->b, apply, ""), "restore");
    } else { // a skipped step: return before any store
        LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "apply");
        LLVMBasicBlockRef skip = LLVMAppendBasicBlockInContext(c->ctx, k.fn, "skip");
        LLVMBuildCondBr(c->b, apply, run, skip);
        LLVMPositionBuilderAtEnd(c->b, skip);
        LLVMBuildRetVoid(c->b);
        LLVMPositionBuilderAtEnd(c->b, run);
    }
    LLVMValueRef lo = LLVMBuildMul(c->b, k.begin, cg_i64(c, TRAIN_CHUNK), "");
    LLVMValueRef hi = smin(c, LLVMBuildMul(c->b, k.end, cg_i64(c, TRAIN_CHUNK), ""), cg_i64(c, n));
    cg_loop l;
    LLVMValueRef i = cg_for_begin(c, &l, lo, hi, "e");
    LLVMValueRef v = cg_convert(c, cg_load(c, src, vt, i), vt, pt);
    if (x->acc) {
        LLVMValueRef old = cg_load(c, dst, pt, i);
        LLVMValueRef s0 = LLVMBuildSelect(c->b, first, old, cg_load(c, start, pt, i), "");
        v = LLVMBuildSelect(c->b, restore, s0, v, "");
        // Between cycles the start is 0 (like the accumulators), so a skipped cycle leaves
        // every state tensor as it found it.
        cg_store(c, start, pt, i, LLVMBuildSelect(c->b, boundary, cg_const(c, pt, 0.0), s0, ""));
    }
    cg_store(c, dst, pt, i, v);
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// The "PARAM.cycle_start" STATE tensors of the assigned params (accumulation only), into
// starts[i] for assign i.
static dl_status plan_assign_state(train_ctx *x, uint32_t *starts) {
    cg *c = x->c;
    const dl_ir_module *m = c->m;
    for (size_t i = 0; i < m->assigns.len; i++) {
        const dl_ir_value *p = m->assigns.data[i].param;
        uint64_t bytes = (uint64_t)dl_ir_type_numel(&p->type) * dl_dtype_size(p->type.dtype);
        DL_TRY(cg_extra_buffer(c, bytes, DLRT_BUF_STATE, NULL, &starts[i]));
        size_t len = strlen(p->name) + sizeof ".cycle_start";
        cg_state_tensor sv = {dl_mem_alloc(len), p, starts[i]};
        if (!sv.name) {
            return DL_ERR_NOMEM;
        }
        snprintf(sv.name, len, "%s.cycle_start", p->name);
        if (!DL_VEC_PUSH(&c->states, sv)) {
            free(sv.name);
            return DL_ERR_NOMEM;
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// The driver

// Checks what the step needs of the module; a problem is the user's (a hand-built or future
// module), so it is a diagnostic, never an assert.
static dl_status check_module(cg *c) {
    const dl_ir_module *m = c->m;
    const dl_ir_train *t = m->train;
    const dl_ir_value *loss = m->train_loss;
    if (!loss || !dl_dtype_is_float(loss->type.dtype) || dl_ir_type_numel(&loss->type) != 1) {
        cg_error(c, "train step: the loss must be a float scalar");
        return DL_ERR_INVALID_ARG;
    }
    if (m->grads.len != m->params.len) {
        cg_error(c, "train step: %zu gradients for %zu params", m->grads.len, m->params.len);
        return DL_ERR_INVALID_ARG;
    }
    if (t->has_accumulate && t->accumulate < 1) {
        cg_error(c, "train step: accumulate = %lld must be >= 1", (long long)t->accumulate);
        return DL_ERR_INVALID_ARG;
    }
    // The parser checks every value where it is written; a module built another way gets the
    // same ranges here (the runtime's set_hparam enforces them too).
    dl_optim_ref_hparams hp;
    dl_optim_ref_hparams_from_train(t, &hp);
    dl_optim_ref_loss_scale ls;
    dl_optim_ref_loss_scale_init_from_train(&ls, t);
    bool dyn = t->loss_scale == DL_IR_LS_DYNAMIC;
    if (dl_optim_ref_hparams_check(t->optimizer, &hp) != DL_OK ||
        (t->has_clip_norm && !(t->clip_norm > 0.0 && isfinite(t->clip_norm))) ||
        !(ls.scale > 0.0 && isfinite(ls.scale)) ||
        (dyn && !(ls.growth > 1.0 && isfinite(ls.growth) && ls.backoff > 0.0 && ls.backoff < 1.0 &&
                  ls.interval >= 1))) {
        cg_error(c,
                 "train step: a hyper-parameter of the %s optimizer or of the loss scale is out "
                 "of its range (docs/training.md)",
                 dl_ir_optim_name(t->optimizer));
        return DL_ERR_INVALID_ARG;
    }
    const dl_ir_value *sc = m->step_counter;
    if (sc && (sc->kind != DL_IR_VAL_CONST || sc->type.dtype != DL_DT_INT64 || sc->type.rank != 0 ||
               !sc->lit)) {
        cg_error(c, "train step: the RNG step counter must be an int64 scalar const");
        return DL_ERR_INVALID_ARG;
    }
    if (m->grad_seed &&
        (m->grad_seed->kind != DL_IR_VAL_CONST || m->grad_seed->type.dtype != DL_DT_FLOAT ||
         dl_ir_type_numel(&m->grad_seed->type) != 1)) {
        cg_error(c, "train step: the gradient seed must be a float scalar const");
        return DL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < m->params.len; i++) {
        const dl_ir_value *p = m->params.data[i], *g = m->grads.data[i];
        if (!g) {
            continue;
        }
        if (!dl_dtype_is_float(p->type.dtype) || !dl_dtype_is_float(g->type.dtype) ||
            dl_ir_type_numel(&p->type) != dl_ir_type_numel(&g->type)) {
            cg_error(c,
                     "train step: param '%s' and its gradient '%s' differ in size or are "
                     "not float",
                     p->name, g->name);
            return DL_ERR_INVALID_ARG;
        }
    }
    for (size_t i = 0; i < m->assigns.len; i++) {
        const dl_ir_assign *a = &m->assigns.data[i];
        if (dl_ir_type_numel(&a->param->type) != dl_ir_type_numel(&a->value->type)) {
            cg_error(c, "train step: assign to '%s' changes its size", a->param->name);
            return DL_ERR_INVALID_ARG;
        }
    }
    return DL_OK;
}

// The train entry's node kernels: forward nodes the roots need (marked backwards through the
// topological order), then every training-graph node.
static dl_status collect_node_kernels(cg *c) {
    const dl_ir_module *m = c->m;
    size_t nn = m->nodes.len;
    uint8_t *need = dl_mem_calloc(nn ? nn : 1, 1);
    if (!need) {
        return DL_ERR_NOMEM;
    }
#define MARK(v)                                                                                    \
    do {                                                                                           \
        const dl_ir_value *v_ = (v);                                                               \
        if (v_ && v_->def) {                                                                       \
            need[v_->def->id] = 1;                                                                 \
        }                                                                                          \
    } while (0)
    MARK(m->train_loss);
    for (size_t i = 0; i < m->grads.len; i++) {
        MARK(m->grads.data[i]);
    }
    for (size_t i = 0; i < m->assigns.len; i++) {
        MARK(m->assigns.data[i].value);
    }
    for (size_t i = nn; i-- > 0;) {
        const dl_ir_node *n = m->nodes.data[i];
        if (i >= m->n_fwd_nodes) {
            need[i] = 1;
        }
        for (size_t a = 0; need[i] && a < n->n_inputs; a++) {
            MARK(n->inputs[a]);
        }
    }
#undef MARK
    dl_status st = DL_OK;
    for (size_t i = 0; i < nn && st == DL_OK; i++) {
        for (uint32_t k = c->node_k0[i]; need[i] && k < c->node_k1[i]; k++) {
            if (c->kernels.data[k].only != CG_ENTRY_INFER && !DL_VEC_PUSH(&c->train_kernels, k)) {
                st = DL_ERR_NOMEM;
                break;
            }
        }
    }
    free(need);
    return st;
}

void dl_cg_train_hyper_init(const dl_ir_train *t, double out[DLRT_HP_COUNT]) {
    dl_optim_ref_hparams hp;
    dl_optim_ref_loss_scale ls;
    dl_optim_ref_hparams_from_train(t, &hp);
    dl_optim_ref_loss_scale_init_from_train(&ls, t);
    double *h = out;
    memset(h, 0, DLRT_HP_COUNT * sizeof *h);
    h[DLRT_HP_LR] = hp.lr;
    h[DLRT_HP_MOMENTUM] = hp.momentum;
    h[DLRT_HP_DAMPENING] = hp.dampening;
    h[DLRT_HP_NESTEROV] = hp.nesterov;
    h[DLRT_HP_BETA1] = hp.beta1;
    h[DLRT_HP_BETA2] = hp.beta2;
    h[DLRT_HP_EPS] = hp.eps;
    h[DLRT_HP_WEIGHT_DECAY] = hp.weight_decay;
    h[DLRT_HP_ALPHA] = hp.alpha;
    h[DLRT_HP_CENTERED] = hp.centered;
    h[DLRT_HP_AMSGRAD] = hp.amsgrad;
    h[DLRT_HP_CLIP_NORM] = t->has_clip_norm ? t->clip_norm : 0.0;
    h[DLRT_HP_LOSS_SCALE] = ls.scale;
    h[DLRT_HP_GROWTH] = ls.growth;
    h[DLRT_HP_BACKOFF] = ls.backoff;
    h[DLRT_HP_INTERVAL] = (double)ls.interval;
    h[DLRT_HP_ACCUMULATE] = t->has_accumulate && t->accumulate > 1 ? (double)t->accumulate : 1.0;
    h[DLRT_HP_ACCUM_COUNT] = 0.0;
    h[DLRT_HP_BOUNDARY] = 1.0;
    h[DLRT_HP_GRAD_MULT] = 1.0;
    h[DLRT_HP_CLIP_COEF] = 1.0;
}

static dl_status add_hparams(train_ctx *x) {
    const uint32_t S = DLRT_HPF_SETTABLE;
    DL_TRY(add_hparam(x, "lr", DLRT_HP_LR, S));
    switch (x->t->optimizer) {
    case DL_IR_OPTIM_SGD:
        DL_TRY(add_hparam(x, "momentum", DLRT_HP_MOMENTUM, S));
        DL_TRY(add_hparam(x, "dampening", DLRT_HP_DAMPENING, S));
        DL_TRY(add_hparam(x, "nesterov", DLRT_HP_NESTEROV, 0));
        break;
    case DL_IR_OPTIM_ADAM:
    case DL_IR_OPTIM_ADAMW:
        DL_TRY(add_hparam(x, "beta1", DLRT_HP_BETA1, S));
        DL_TRY(add_hparam(x, "beta2", DLRT_HP_BETA2, S));
        DL_TRY(add_hparam(x, "eps", DLRT_HP_EPS, S));
        DL_TRY(add_hparam(x, "amsgrad", DLRT_HP_AMSGRAD, 0));
        break;
    case DL_IR_OPTIM_RMSPROP:
        DL_TRY(add_hparam(x, "alpha", DLRT_HP_ALPHA, S));
        DL_TRY(add_hparam(x, "eps", DLRT_HP_EPS, S));
        DL_TRY(add_hparam(x, "momentum", DLRT_HP_MOMENTUM, S));
        DL_TRY(add_hparam(x, "centered", DLRT_HP_CENTERED, 0));
        break;
    }
    DL_TRY(add_hparam(x, "weight_decay", DLRT_HP_WEIGHT_DECAY, S));
    if (x->t->has_clip_norm) {
        DL_TRY(add_hparam(x, "clip_norm", DLRT_HP_CLIP_NORM, S));
    }
    DL_TRY(add_hparam(x, "step", DLRT_HP_STEP, DLRT_HPF_STATE));
    DL_TRY(add_hparam(x, "loss_scale", DLRT_HP_LOSS_SCALE, DLRT_HPF_STATE));
    DL_TRY(add_hparam(x, "growth_tracker", DLRT_HP_GROWTH_TRACKER, DLRT_HPF_STATE));
    if (x->acc) {
        DL_TRY(add_hparam(x, "accumulate", DLRT_HP_ACCUMULATE, 0));
        DL_TRY(add_hparam(x, "accum_count", DLRT_HP_ACCUM_COUNT, DLRT_HPF_STATE));
    }
    if (x->t->loss_scale == DL_IR_LS_DYNAMIC) {
        DL_TRY(add_hparam(x, "growth", DLRT_HP_GROWTH, 0));
        DL_TRY(add_hparam(x, "backoff", DLRT_HP_BACKOFF, 0));
        DL_TRY(add_hparam(x, "interval", DLRT_HP_INTERVAL, 0));
    }
    DL_TRY(add_hparam(x, "loss", DLRT_HP_LOSS, DLRT_HPF_OUTPUT));
    DL_TRY(add_hparam(x, "grad_norm", DLRT_HP_GRAD_NORM, DLRT_HPF_OUTPUT));
    DL_TRY(add_hparam(x, "skipped", DLRT_HP_SKIPPED, DLRT_HPF_OUTPUT));
    return DL_OK;
}

// Trained params, their slots (STATE buffers and "PARAM.SLOT" tensors) and the buffers.
static dl_status plan_state(train_ctx *x) {
    cg *c = x->c;
    const dl_ir_module *m = c->m;
    x->tp = dl_mem_calloc(m->params.len ? m->params.len : 1, sizeof *x->tp);
    if (!x->tp) {
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->params.len; i++) {
        const dl_ir_value *p = m->params.data[i], *g = m->grads.data[i];
        if (!g || is_frozen(x->t, p)) {
            continue;
        }
        trained *tp = &x->tp[x->n_tp++];
        tp->p = p;
        tp->g = g;
        tp->n = dl_ir_type_numel(&p->type);
        tp->off = x->total;
        x->total += tp->n;
        uint64_t bytes = (uint64_t)tp->n * dl_dtype_size(p->type.dtype);
        size_t n_st = x->n_slots + (x->acc ? 1 : 0);
        for (size_t q = 0; q < n_st; q++) {
            bool is_acc = q == x->n_slots;
            uint32_t *buf = is_acc ? &tp->accum : &tp->slot[q];
            const char *slot = is_acc ? "grad_accum" : x->slot_names[q];
            DL_TRY(cg_extra_buffer(c, bytes, DLRT_BUF_STATE, NULL, buf));
            size_t len = strlen(p->name) + strlen(slot) + 2;
            cg_state_tensor sv = {dl_mem_alloc(len), p, *buf};
            if (!sv.name) {
                return DL_ERR_NOMEM;
            }
            snprintf(sv.name, len, "%s.%s", p->name, slot);
            if (!DL_VEC_PUSH(&c->states, sv)) {
                free(sv.name);
                return DL_ERR_NOMEM;
            }
        }
    }
    x->n_chunks = x->total > 0 ? (x->total + TRAIN_CHUNK - 1) / TRAIN_CHUNK : 1;
    DL_TRY(cg_extra_buffer(c, (uint64_t)x->n_chunks * sizeof(double), DLRT_BUF_TEMP, NULL,
                           &x->partial_buf));
    return cg_extra_buffer(c, sizeof x->hyper, DLRT_BUF_STATE, x->hyper, &c->hyper_buf);
}

dl_status dl_cg__lower_train(cg *c) {
    const dl_ir_module *m = c->m;
    train_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.t = m->train;
    x.acc = x.t->has_accumulate && x.t->accumulate > 1;
    c->node = NULL;
    dl_status st = check_module(c);
    if (st != DL_OK) {
        return st;
    }
    if (m->step_counter) {
        c->counter_buf = c->value_buf[m->step_counter->id];
    }
    dl_optim_ref_hparams_from_train(x.t, &x.hp);
    dl_optim_ref_loss_scale_init_from_train(&x.ls, x.t);
    dl_optim_ref_slots(x.t->optimizer, &x.hp, x.slot_names, &x.n_slots);
    dl_cg_train_hyper_init(x.t, x.hyper);
    c->has_train = true;
    c->optimizer = (uint32_t)x.t->optimizer;
    c->loss_buf = c->value_buf[m->train_loss->id];
    if (x.t->loss_scale != DL_IR_LS_NONE && m->grad_seed) {
        c->seed_buf = c->value_buf[m->grad_seed->id];
        c->seed_init = dl_mem_alloc(sizeof(double));
        if (!c->seed_init) {
            return DL_ERR_NOMEM;
        }
        *c->seed_init = x.ls.scale;
    }
    size_t first_step = 0;
    uint32_t *starts = NULL;
    if (x.acc && m->assigns.len > 0) {
        starts = dl_mem_calloc(m->assigns.len, sizeof *starts);
        if (!starts) {
            return DL_ERR_NOMEM;
        }
    }
    if ((st = collect_node_kernels(c)) == DL_OK && (st = add_hparams(&x)) == DL_OK &&
        (st = plan_state(&x)) == DL_OK &&
        (!starts || (st = plan_assign_state(&x, starts)) == DL_OK)) {
        // The step kernels, created in execution order after every node kernel.
        first_step = c->kernels.len;
        if (x.acc) {
            st = emit_chunked(&x, true);
        }
        if (st == DL_OK && (st = plan_comm(&x, first_step)) == DL_OK &&
            (st = emit_chunked(&x, false)) == DL_OK && (st = emit_prologue(&x)) == DL_OK) {
            st = emit_update(&x);
        }
        for (size_t i = 0; i < m->assigns.len && st == DL_OK; i++) {
            st = emit_assign(&x, &m->assigns.data[i], starts ? starts[i] : UINT32_MAX);
        }
        for (size_t k = first_step; k < c->kernels.len && st == DL_OK; k++) {
            if (!DL_VEC_PUSH(&c->train_kernels, (uint32_t)k)) {
                st = DL_ERR_NOMEM;
            }
        }
    }
    free(starts);
    free(x.tp);
    return st;
}
