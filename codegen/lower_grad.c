// codegen/lower_grad.c — lowering of the internal gradient ops of family A:
// SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad, LayerNormalizationGrad,
// GatherGrad, SliceGrad and PadGrad (semantics: ir/eval_grad.c, the oracle).
//
// The kernel rule (cg_internal.h): a kernel computes outer iterations [begin, end) of its
// range and any partition must give the same bytes. So every output element is written by
// exactly one outer iteration, and sums run in an order fixed by the static shapes:
//  - Loss grads: range = rows n of x ([N, C, D]) or, for "mean", chunks of rows; the mean's
//    divisor (sum of the target weights over the whole batch) is recomputed by every iteration
//    (a cheap pass over the labels) instead of being shared through a scratch buffer.
//  - LayerNormalizationGrad: dx over rows (range = leading elements); dscale / dbias in a
//    second kernel whose range is chunks of LN_CB normalised columns: each iteration walks
//    every row in order (recomputing that row's mean and rstd) and sums its own columns.
//  - GatherGrad (a scatter-add): range = (dims before axis) x (chunks of the dims after it);
//    an iteration zeroes its slab of dx and adds dy into it, indices in ascending order.
//  - SliceGrad and constant PadGrad: a gather over dx: per dim an affine map from the dx
//    coordinate to the dy coordinate (or none: 0).
//  - PadGrad edge / reflect / wrap: a gather over dx through per-dim tables (constant globals)
//    listing, for every x coordinate, the dy coordinates whose source it is (ascending), so
//    each dx element sums its dy elements in dy's C order, like the evaluator.
// Sums are f32 (like the forward losses and norms), except GatherGrad's, which accumulate in
// dx itself (for a float16 / bfloat16 dx every addition rounds to that type). Where the evaluator
// reports a data error (a label or a gather index out of range), compiled code contributes 0 for
// that element and never reads or writes out of bounds.
#include "cg_geometry.h"
#include "cg_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LN_CB   256 // normalised columns per dscale/dbias iteration
#define GG_BC   256 // inner elements per GatherGrad iteration
#define LOSS_CH 32  // most iterations of a "mean" loss grad kernel

// ---------------------------------------------------------------------------------------------
// Small IR helpers (iadd and the `if` builder: cg_geometry.h)

// a * k, or a itself when k == 1 (cg_geometry.h's imul always multiplies).
static LLVMValueRef imul1(cg *c, LLVMValueRef a, int64_t k) {
    return k == 1 ? a : LLVMBuildMul(c->b, a, cg_i64(c, k), "");
}

static LLVMValueRef fmul(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFMul(c->b, a, b, "");
}

static LLVMValueRef fsub(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFSub(c->b, a, b, "");
}

static LLVMValueRef arr_get(cg *c, LLVMValueRef arr, LLVMValueRef j) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f32, arr, &j, 1, "");
    return LLVMBuildLoad2(c->b, c->t_f32, p, "");
}

static void arr_set(cg *c, LLVMValueRef arr, LLVMValueRef j, LLVMValueRef v) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f32, arr, &j, 1, "");
    LLVMBuildStore(c->b, v, p);
}

// One f32 scalar slot on the kernel's stack (promoted to a register by mem2reg).
static LLVMValueRef slot_get(cg *c, LLVMValueRef s) {
    return arr_get(c, s, cg_i64(c, 0));
}

static void slot_set(cg *c, LLVMValueRef s, LLVMValueRef v) {
    arr_set(c, s, cg_i64(c, 0), v);
}

static bool need_float(cg *c, const dl_ir_value *v, const char *what) {
    if (!dl_dtype_is_float(v->type.dtype)) {
        cg_error(c, "%s must be a float type, got %s", what, dl_dtype_name(v->type.dtype));
        return false;
    }
    return true;
}

// A private constant global array of i64, for index tables.
static LLVMValueRef const_table(cg *c, const int64_t *v, size_t n) {
    LLVMValueRef *elems = dl_mem_alloc(sizeof(LLVMValueRef) * (n ? n : 1));
    if (!elems) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        elems[i] = cg_i64(c, v[i]);
    }
    LLVMTypeRef at = LLVMArrayType2(c->t_i64, (uint64_t)n);
    LLVMValueRef g = LLVMAddGlobal(c->mod, at, "grad_tab");
    LLVMSetInitializer(g, LLVMConstArray2(c->t_i64, elems, (uint64_t)n));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    free(elems);
    return g;
}

static LLVMValueRef table_get(cg *c, LLVMValueRef tab, LLVMValueRef i) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_i64, tab, &i, 1, "");
    return LLVMBuildLoad2(c->b, c->t_i64, p, "");
}

// ---------------------------------------------------------------------------------------------
// SoftmaxCrossEntropyLossGrad / NegativeLogLikelihoodLossGrad.
// dloss: scalar or [N, D]; x, dx: [N, C, D]; labels: [N, D]; weights?: [C].

static dl_status lower_loss_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dx = n->outputs[0], *dl = n->inputs[0], *x = n->inputs[1], *lab = n->inputs[2];
    dl_ir_value *w = n->n_inputs > 3 ? n->inputs[3] : NULL;
    const dl_ir_type *xt = &x->type;
    dl_dtype lt = lab->type.dtype;
    if (!need_float(c, x, "scores") || !need_float(c, dl, "dloss") || !need_float(c, dx, "dx") ||
        (lt != DL_DT_INT32 && lt != DL_DT_INT64) || xt->rank < 2) {
        cg_error(c, "unsupported types");
        return DL_ERR_UNSUPPORTED;
    }
    bool is_sce = n->op == DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD;
    int64_t N = xt->dims[0].value, C = xt->dims[1].value, D = 1;
    for (int32_t i = 2; i < xt->rank; i++) {
        D *= xt->dims[i].value;
    }
    if (N * C * D == 0) {
        return DL_OK;
    }
    const char *red = dl_ir_node_attr_string(n, "reduction");
    bool none = strcmp(red, "none") == 0, is_mean = strcmp(red, "mean") == 0;
    const dl_ir_attr *ig = dl_ir_node_attr(n, "ignore_index");
    // Rows per iteration: 1, or for "mean" enough that at most LOSS_CH iterations each
    // recompute the divisor.
    int64_t rb = is_mean ? (N + LOSS_CH - 1) / LOSS_CH : 1;
    int64_t range = (N + rb - 1) / rb;
    dl_ir_value *vals[5] = {dx, dl, x, lab, w};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, w ? 5 : 4, range, &k));
    LLVMValueRef pdx = k.ptr[0], pdl = k.ptr[1], px = k.ptr[2], pl = k.ptr[3];
    LLVMValueRef pw = w ? k.ptr[4] : NULL;
    dl_dtype dt = xt->dtype;
    LLVMValueRef s_ws = cg_entry_alloca(c, &k, c->t_f32, 1);
    LLVMValueRef s_m = cg_entry_alloca(c, &k, c->t_f32, 1);
    LLVMValueRef s_s = cg_entry_alloca(c, &k, c->t_f32, 1);
    // valid(t): 0 <= t < C (one unsigned compare) and t != ignore_index when present.
#define LABEL_AT(pos, t_out, valid_out)                                                            \
    do {                                                                                           \
        t_out = cg_convert(c, cg_load(c, pl, lt, (pos)), lt, DL_DT_INT64);                         \
        valid_out = LLVMBuildICmp(c->b, LLVMIntULT, t_out, cg_i64(c, C), "");                      \
        if (ig) {                                                                                  \
            valid_out = LLVMBuildAnd(                                                              \
                c->b, valid_out, LLVMBuildICmp(c->b, LLVMIntNE, t_out, cg_i64(c, ig->i), ""), ""); \
        }                                                                                          \
        t_out = LLVMBuildSelect(c->b, valid_out, t_out, cg_i64(c, 0), "");                         \
    } while (0)
    cg_loop lo, lp, ln, ld, lc;
    LLVMValueRef it = cg_for_begin(c, &lo, k.begin, k.end, "it");
    LLVMValueRef g0 = NULL;
    if (!none) {
        g0 = cg_load(c, pdl, dl->type.dtype, cg_i64(c, 0));
    }
    if (is_mean) {
        // The divisor: sum of w[t] over every counted position of the batch.
        slot_set(c, s_ws, cg_f32(c, 0));
        LLVMValueRef p = cg_for_begin(c, &lp, cg_i64(c, 0), cg_i64(c, N * D), "p");
        LLVMValueRef t, valid;
        LABEL_AT(p, t, valid);
        LLVMValueRef wv = pw ? cg_load(c, pw, w->type.dtype, t) : cg_f32(c, 1);
        wv = LLVMBuildSelect(c->b, valid, wv, cg_f32(c, 0), "");
        slot_set(c, s_ws, cg_fadd_reassoc(c, slot_get(c, s_ws), wv));
        cg_for_end(c, &lp);
        g0 = LLVMBuildFDiv(c->b, g0, slot_get(c, s_ws), "");
    }
    LLVMValueRef n_lo = imul1(c, it, rb);
    LLVMValueRef n_hi = rb == 1 ? iadd(c, n_lo, cg_i64(c, 1))
                                : cg_intrinsic2(c, "llvm.smin", c->t_i64,
                                                iadd(c, n_lo, cg_i64(c, rb)), cg_i64(c, N));
    LLVMValueRef nv = cg_for_begin(c, &ln, n_lo, n_hi, "n");
    LLVMValueRef dv = cg_for_begin(c, &ld, cg_i64(c, 0), cg_i64(c, D), "d");
    LLVMValueRef pos = iadd(c, imul1(c, nv, D), dv);      // labels / dloss index
    LLVMValueRef xrow = iadd(c, imul1(c, nv, C * D), dv); // x[n, 0, d]
    LLVMValueRef t, valid;
    LABEL_AT(pos, t, valid);
    LLVMValueRef g = none ? cg_load(c, pdl, dl->type.dtype, pos) : g0;
    LLVMValueRef coef = pw ? fmul(c, g, cg_load(c, pw, w->type.dtype, t)) : g;
    if (is_sce) {
        // m = max_c x, s = sum_c e^(x - m); p = e^(x - m) / s
        slot_set(c, s_m, cg_f32(c, -INFINITY));
        slot_set(c, s_s, cg_f32(c, 0));
        LLVMValueRef cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        LLVMValueRef v = cg_load(c, px, dt, iadd(c, xrow, imul1(c, cv, D)));
        slot_set(c, s_m, cg_intrinsic2(c, "llvm.maximum", c->t_f32, slot_get(c, s_m), v));
        cg_for_end(c, &lc);
        LLVMValueRef m = slot_get(c, s_m);
        cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        v = cg_load(c, px, dt, iadd(c, xrow, imul1(c, cv, D)));
        slot_set(c, s_s, cg_fadd_reassoc(c, slot_get(c, s_s), dl_cg__exp_f32(c, fsub(c, v, m))));
        cg_for_end(c, &lc);
        LLVMValueRef inv = LLVMBuildFDiv(c->b, cg_f32(c, 1), slot_get(c, s_s), "");
        cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        LLVMValueRef xi = iadd(c, xrow, imul1(c, cv, D));
        v = cg_load(c, px, dt, xi);
        LLVMValueRef p = fmul(c, dl_cg__exp_f32(c, fsub(c, v, m)), inv);
        LLVMValueRef is_t = LLVMBuildICmp(c->b, LLVMIntEQ, cv, t, "");
        p = fsub(c, p, LLVMBuildSelect(c->b, is_t, cg_f32(c, 1), cg_f32(c, 0), ""));
        LLVMValueRef r = LLVMBuildSelect(c->b, valid, fmul(c, coef, p), cg_f32(c, 0), "");
        cg_store(c, pdx, dx->type.dtype, xi, r);
        cg_for_end(c, &lc);
    } else {
        LLVMValueRef cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        LLVMValueRef xi = iadd(c, xrow, imul1(c, cv, D));
        LLVMValueRef hit = LLVMBuildAnd(c->b, valid, LLVMBuildICmp(c->b, LLVMIntEQ, cv, t, ""), "");
        LLVMValueRef r =
            LLVMBuildSelect(c->b, hit, LLVMBuildFNeg(c->b, coef, ""), cg_f32(c, 0), "");
        cg_store(c, pdx, dx->type.dtype, xi, r);
        cg_for_end(c, &lc);
    }
#undef LABEL_AT
    cg_for_end(c, &ld);
    cg_for_end(c, &ln);
    cg_for_end(c, &lo);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// LayerNormalizationGrad. dy, x, dx: [R, M] (R rows = dims before axis); scale, dscale, dbias:
// [M].

// Emits mean and rstd of row `xo` (element offset of the row) into the slots.
static void emit_row_stats(cg *c, LLVMValueRef px, dl_dtype dt, LLVMValueRef xo, int64_t M,
                           double eps, LLVMValueRef s_acc, LLVMValueRef *mean, LLVMValueRef *rstd) {
    cg_loop l;
    LLVMValueRef fm = cg_f32(c, (double)M);
    slot_set(c, s_acc, cg_f32(c, 0));
    LLVMValueRef j = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, M), "j");
    slot_set(c, s_acc, cg_fadd_reassoc(c, slot_get(c, s_acc), cg_load(c, px, dt, iadd(c, xo, j))));
    cg_for_end(c, &l);
    *mean = LLVMBuildFDiv(c->b, slot_get(c, s_acc), fm, "mean");
    slot_set(c, s_acc, cg_f32(c, 0));
    j = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, M), "j");
    LLVMValueRef dv = fsub(c, cg_load(c, px, dt, iadd(c, xo, j)), *mean);
    slot_set(c, s_acc, cg_fadd_reassoc(c, slot_get(c, s_acc), fmul(c, dv, dv)));
    cg_for_end(c, &l);
    LLVMValueRef var = LLVMBuildFDiv(c->b, slot_get(c, s_acc), fm, "var");
    LLVMValueRef sd =
        cg_intrinsic1(c, "llvm.sqrt", c->t_f32, LLVMBuildFAdd(c->b, var, cg_f32(c, eps), ""));
    *rstd = LLVMBuildFDiv(c->b, cg_f32(c, 1), sd, "rstd");
}

static dl_status lower_layer_norm_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dy = n->inputs[0], *x = n->inputs[1], *sc = n->inputs[2];
    dl_ir_value *dx = n->outputs[0];
    dl_ir_value *ds = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *db = n->n_outputs > 2 ? n->outputs[2] : NULL;
    const dl_ir_type *xt = &x->type;
    int64_t axis = dl_ir_node_attr_int(n, "axis");
    axis += axis < 0 ? xt->rank : 0;
    if (axis < 0 || axis >= xt->rank) {
        cg_error(c, "axis %lld is out of range for rank %d", (long long)axis, xt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    if (!need_float(c, x, "X") || !need_float(c, dy, "dy") || !need_float(c, sc, "Scale")) {
        return DL_ERR_UNSUPPORTED;
    }
    int64_t R = 1;
    for (int32_t i = 0; i < (int32_t)axis; i++) {
        R *= xt->dims[i].value;
    }
    int64_t numel = dl_ir_type_numel(xt);
    int64_t M = R ? numel / R : 1;
    for (int32_t i = (int32_t)axis; R == 0 && i < xt->rank; i++) {
        M *= xt->dims[i].value;
    }
    if (dl_ir_type_numel(&sc->type) != M) {
        cg_error(c, "Scale must have the %lld normalised elements", (long long)M);
        return DL_ERR_UNSUPPORTED;
    }
    double eps = dl_ir_node_attr_float(n, "epsilon");
    dl_dtype dt = xt->dtype;
    if (numel > 0) {
        // dx: per row, g = dy * scale, xhat = (x - mean) rstd, a = mean(g), b = mean(g xhat);
        // dx = rstd (g - a - xhat b).
        dl_ir_value *vals[4] = {dx, dy, x, sc};
        cg_kernel k;
        DL_TRY(cg_kernel_begin(c, vals, 4, R, &k));
        LLVMValueRef s_acc = cg_entry_alloca(c, &k, c->t_f32, 1);
        LLVMValueRef s_a = cg_entry_alloca(c, &k, c->t_f32, 1);
        LLVMValueRef s_b = cg_entry_alloca(c, &k, c->t_f32, 1);
        cg_loop lo, l;
        LLVMValueRef o = cg_for_begin(c, &lo, k.begin, k.end, "o");
        LLVMValueRef xo = imul1(c, o, M), mean, rstd;
        emit_row_stats(c, k.ptr[2], dt, xo, M, eps, s_acc, &mean, &rstd);
        slot_set(c, s_a, cg_f32(c, 0));
        slot_set(c, s_b, cg_f32(c, 0));
        LLVMValueRef j = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, M), "j");
        LLVMValueRef idx = iadd(c, xo, j);
        LLVMValueRef g = fmul(c, cg_load(c, k.ptr[1], dy->type.dtype, idx),
                              cg_load(c, k.ptr[3], sc->type.dtype, j));
        LLVMValueRef xh = fmul(c, fsub(c, cg_load(c, k.ptr[2], dt, idx), mean), rstd);
        slot_set(c, s_a, cg_fadd_reassoc(c, slot_get(c, s_a), g));
        slot_set(c, s_b, cg_fadd_reassoc(c, slot_get(c, s_b), fmul(c, g, xh)));
        cg_for_end(c, &l);
        LLVMValueRef fm = cg_f32(c, (double)M);
        LLVMValueRef a = LLVMBuildFDiv(c->b, slot_get(c, s_a), fm, "");
        LLVMValueRef b = LLVMBuildFDiv(c->b, slot_get(c, s_b), fm, "");
        j = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, M), "j");
        idx = iadd(c, xo, j);
        g = fmul(c, cg_load(c, k.ptr[1], dy->type.dtype, idx),
                 cg_load(c, k.ptr[3], sc->type.dtype, j));
        xh = fmul(c, fsub(c, cg_load(c, k.ptr[2], dt, idx), mean), rstd);
        LLVMValueRef r = fmul(c, rstd, fsub(c, fsub(c, g, a), fmul(c, xh, b)));
        cg_store(c, k.ptr[0], dx->type.dtype, idx, r);
        cg_for_end(c, &l);
        cg_for_end(c, &lo);
        DL_TRY(cg_kernel_end(c, &k));
    }
    if (!ds || M == 0) {
        return DL_OK;
    }
    // dscale[j] = sum_rows dy xhat, dbias[j] = sum_rows dy; iteration = columns [j0, j0 + nj).
    int64_t cb = M < LN_CB ? M : LN_CB, chunks = (M + cb - 1) / cb;
    dl_ir_value *vals[4];
    size_t nv = 0;
    vals[nv++] = ds;
    if (db) {
        vals[nv++] = db;
    }
    size_t a_dy = nv++, a_x = nv++;
    vals[a_dy] = dy;
    vals[a_x] = x;
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, chunks, &k));
    LLVMValueRef s_acc = cg_entry_alloca(c, &k, c->t_f32, 1);
    LLVMValueRef acs = cg_entry_alloca(c, &k, c->t_f32, cb);
    LLVMValueRef acb = db ? cg_entry_alloca(c, &k, c->t_f32, cb) : NULL;
    cg_loop lch, lr, lj;
    LLVMValueRef ch = cg_for_begin(c, &lch, k.begin, k.end, "ch");
    LLVMValueRef j0 = imul1(c, ch, cb);
    LLVMValueRef nj = cg_i64(c, cb);
    if (M % cb != 0) {
        nj = cg_intrinsic2(c, "llvm.smin", c->t_i64, LLVMBuildSub(c->b, cg_i64(c, M), j0, ""),
                           cg_i64(c, cb));
    }
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), nj, "j");
    arr_set(c, acs, j, cg_f32(c, 0));
    if (db) {
        arr_set(c, acb, j, cg_f32(c, 0));
    }
    cg_for_end(c, &lj);
    LLVMValueRef o = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, R), "o");
    LLVMValueRef xo = imul1(c, o, M), mean, rstd;
    emit_row_stats(c, k.ptr[a_x], dt, xo, M, eps, s_acc, &mean, &rstd);
    j = cg_for_begin(c, &lj, cg_i64(c, 0), nj, "j");
    LLVMValueRef idx = iadd(c, iadd(c, xo, j0), j);
    LLVMValueRef vdy = cg_load(c, k.ptr[a_dy], dy->type.dtype, idx);
    LLVMValueRef xh = fmul(c, fsub(c, cg_load(c, k.ptr[a_x], dt, idx), mean), rstd);
    arr_set(c, acs, j, LLVMBuildFAdd(c->b, arr_get(c, acs, j), fmul(c, vdy, xh), ""));
    if (db) {
        arr_set(c, acb, j, LLVMBuildFAdd(c->b, arr_get(c, acb, j), vdy, ""));
    }
    cg_for_end(c, &lj);
    cg_for_end(c, &lr);
    j = cg_for_begin(c, &lj, cg_i64(c, 0), nj, "j");
    cg_store(c, k.ptr[0], ds->type.dtype, iadd(c, j0, j), arr_get(c, acs, j));
    if (db) {
        cg_store(c, k.ptr[1], db->type.dtype, iadd(c, j0, j), arr_get(c, acb, j));
    }
    cg_for_end(c, &lj);
    cg_for_end(c, &lch);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// GatherGrad. x, dx: [A, Dx, B]; indices: [J] (flattened); dy: [A, J, B].
// Iteration (a, chunk): dx[a, :, b0 .. b0 + nb) = 0, then for j ascending with a valid index
// t: dx[a, t, b0 ..] += dy[a, j, b0 ..].

static dl_status lower_gather_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dx = n->outputs[0], *dy = n->inputs[0], *idx = n->inputs[1], *x = n->inputs[2];
    const dl_ir_type *xt = &x->type;
    dl_dtype it = idx->type.dtype;
    if (!need_float(c, dx, "dx") || !need_float(c, dy, "dy") ||
        (it != DL_DT_INT32 && it != DL_DT_INT64)) {
        cg_error(c, "unsupported types");
        return DL_ERR_UNSUPPORTED;
    }
    int64_t axis = dl_ir_node_attr_int(n, "axis");
    axis += axis < 0 ? xt->rank : 0;
    if (axis < 0 || axis >= xt->rank) {
        cg_error(c, "axis %lld is out of range for rank %d", (long long)axis, xt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    int64_t A = 1, B = 1, Dx = xt->dims[axis].value, J = dl_ir_type_numel(&idx->type);
    for (int32_t i = 0; i < (int32_t)axis; i++) {
        A *= xt->dims[i].value;
    }
    for (int32_t i = (int32_t)axis + 1; i < xt->rank; i++) {
        B *= xt->dims[i].value;
    }
    if (A * Dx * B == 0) {
        return DL_OK;
    }
    int64_t bc = B < GG_BC ? B : GG_BC, nbc = (B + bc - 1) / bc;
    dl_ir_value *vals[3] = {dx, dy, idx};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, J > 0 ? 3 : 1, A * nbc, &k));
    dl_dtype xdt = dx->type.dtype, ydt = dy->type.dtype;
    cg_loop lo, lr, lb, lj;
    LLVMValueRef itv = cg_for_begin(c, &lo, k.begin, k.end, "it");
    LLVMValueRef a = nbc == 1 ? itv : LLVMBuildSDiv(c->b, itv, cg_i64(c, nbc), "");
    LLVMValueRef b0 =
        nbc == 1 ? cg_i64(c, 0) : imul1(c, LLVMBuildSRem(c->b, itv, cg_i64(c, nbc), ""), bc);
    LLVMValueRef nb = cg_i64(c, bc);
    if (B % bc != 0) {
        nb = cg_intrinsic2(c, "llvm.smin", c->t_i64, LLVMBuildSub(c->b, cg_i64(c, B), b0, ""),
                           cg_i64(c, bc));
    }
    LLVMValueRef xa = iadd(c, imul1(c, a, Dx * B), b0); // dx[a, 0, b0]
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, Dx), "r");
    LLVMValueRef b = cg_for_begin(c, &lb, cg_i64(c, 0), nb, "b");
    cg_store(c, k.ptr[0], xdt, iadd(c, iadd(c, xa, imul1(c, r, B)), b), cg_const(c, xdt, 0));
    cg_for_end(c, &lb);
    cg_for_end(c, &lr);
    if (J > 0) {
        LLVMValueRef jv = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, J), "j");
        LLVMValueRef t = cg_convert(c, cg_load(c, k.ptr[2], it, jv), it, DL_DT_INT64);
        LLVMValueRef negt = LLVMBuildICmp(c->b, LLVMIntSLT, t, cg_i64(c, 0), "");
        t = LLVMBuildSelect(c->b, negt, iadd(c, t, cg_i64(c, Dx)), t, "");
        dl_cg__if f;
        dl_cg__if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntULT, t, cg_i64(c, Dx), ""));
        LLVMValueRef xrow = iadd(c, xa, imul1(c, t, B));
        LLVMValueRef yrow = iadd(c, iadd(c, imul1(c, a, J * B), imul1(c, jv, B)), b0);
        b = cg_for_begin(c, &lb, cg_i64(c, 0), nb, "b");
        LLVMValueRef xi = iadd(c, xrow, b);
        LLVMValueRef v = LLVMBuildFAdd(c->b, cg_load(c, k.ptr[0], xdt, xi),
                                       cg_load(c, k.ptr[1], ydt, iadd(c, yrow, b)), "");
        cg_store(c, k.ptr[0], xdt, xi, v);
        cg_for_end(c, &lb);
        dl_cg__if_end(c, &f);
        cg_for_end(c, &lj);
    }
    cg_for_end(c, &lo);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// SliceGrad and constant PadGrad: per dim k, dx coordinate i maps to dy coordinate
// (i - s) / p when that is exact and in [0, len) (p > 0), or (s - i) / -p (p < 0); otherwise
// the element is 0. dx: x's shape; dy: [len_0, ...].

typedef struct affine_dim {
    int64_t start, step, len;
} affine_dim;

static dl_status emit_affine_gather(cg *c, dl_ir_value *dx, dl_ir_value *dy, const affine_dim *ad) {
    const dl_ir_type *xt = &dx->type;
    int64_t numel = dl_ir_type_numel(xt);
    if (numel == 0) {
        return DL_OK;
    }
    bool dy_empty = dl_ir_type_numel(&dy->type) == 0;
    int32_t r = xt->rank;
    int64_t sx[DL_MAX_RANK], sy[DL_MAX_RANK], dims[DL_MAX_RANK];
    affine_dim a[DL_MAX_RANK];
    cg_strides(xt, sx);
    cg_strides(&dy->type, sy);
    for (int32_t i = 0; i < r; i++) {
        dims[i] = xt->dims[i].value;
        a[i] = ad[i];
    }
    if (r == 0) { // a scalar: one virtual dim of size 1
        r = 1;
        dims[0] = 1;
        sx[0] = sy[0] = 0;
        a[0] = (affine_dim){0, 1, 1};
    }
    dl_ir_value *vals[2] = {dx, dy};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, dy_empty ? 1 : 2, dims[0], &k));
    cg_loop loops[DL_MAX_RANK];
    LLVMValueRef ox = cg_i64(c, 0), oy = cg_i64(c, 0), valid = LLVMConstInt(c->t_i1, 1, 0);
    for (int32_t j = 0; j < r; j++) {
        LLVMValueRef lo = j == 0 ? k.begin : cg_i64(c, 0);
        LLVMValueRef hi = j == 0 ? k.end : cg_i64(c, dims[j]);
        LLVMValueRef iv = cg_for_begin(c, &loops[j], lo, hi, "i");
        ox = iadd(c, ox, imul1(c, iv, sx[j]));
        int64_t ap = a[j].step > 0 ? a[j].step : -a[j].step;
        LLVMValueRef dv = a[j].step > 0 ? LLVMBuildSub(c->b, iv, cg_i64(c, a[j].start), "")
                                        : LLVMBuildSub(c->b, cg_i64(c, a[j].start), iv, "");
        // 0 <= d < len * |p| as one unsigned compare; then exactness.
        LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntULT, dv, cg_i64(c, a[j].len * ap), "");
        LLVMValueRef q = dv;
        if (ap != 1) {
            LLVMValueRef rem = LLVMBuildSRem(c->b, dv, cg_i64(c, ap), "");
            ok = LLVMBuildAnd(c->b, ok, LLVMBuildICmp(c->b, LLVMIntEQ, rem, cg_i64(c, 0), ""), "");
            q = LLVMBuildSDiv(c->b, dv, cg_i64(c, ap), "");
        }
        valid = LLVMBuildAnd(c->b, valid, ok, "");
        oy = iadd(c, oy, imul1(c, q, sy[j]));
    }
    dl_dtype xdt = dx->type.dtype;
    LLVMValueRef v = cg_const(c, xdt, 0);
    if (!dy_empty) {
        LLVMValueRef safe = LLVMBuildSelect(c->b, valid, oy, cg_i64(c, 0), "");
        LLVMValueRef ld = cg_load(c, k.ptr[1], dy->type.dtype, safe);
        v = LLVMBuildSelect(c->b, valid, ld, v, "");
    }
    cg_store(c, k.ptr[0], xdt, ox, v);
    for (int32_t j = r - 1; j >= 0; j--) {
        cg_for_end(c, &loops[j]);
    }
    return cg_kernel_end(c, &k);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

static dl_status lower_slice_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dx = n->outputs[0], *dy = n->inputs[0];
    const dl_ir_type *xt = &dx->type;
    if (!need_float(c, dx, "dx") || !need_float(c, dy, "dy")) {
        return DL_ERR_UNSUPPORTED;
    }
    const dl_ir_attr *st = dl_ir_node_attr(n, "starts"), *en = dl_ir_node_attr(n, "ends");
    const dl_ir_attr *ax = dl_ir_node_attr(n, "axes"), *sp = dl_ir_node_attr(n, "steps");
    affine_dim ad[DL_MAX_RANK];
    for (int32_t i = 0; i < xt->rank; i++) {
        ad[i] = (affine_dim){0, 1, xt->dims[i].value};
    }
    if (!st || !en || st->n != en->n) {
        cg_error(c, "starts and ends must have the same length");
        return DL_ERR_UNSUPPORTED;
    }
    for (size_t q = 0; q < st->n; q++) {
        int64_t axis = (ax && ax->n) ? ax->ints[q] : (int64_t)q;
        axis += axis < 0 ? xt->rank : 0;
        int64_t p = (sp && sp->n) ? sp->ints[q] : 1;
        if (axis < 0 || axis >= xt->rank || p == 0) {
            cg_error(c, "bad axis or step");
            return DL_ERR_UNSUPPORTED;
        }
        int64_t d = xt->dims[axis].value, s = st->ints[q], e = en->ints[q], len;
        s = s < 0 ? s + d : s;
        e = e < 0 ? e + d : e;
        if (p > 0) {
            s = clamp64(s, 0, d);
            e = clamp64(e, 0, d);
            len = e > s ? 1 + (e - s - 1) / p : 0;
        } else {
            s = clamp64(s, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            len = s > e ? 1 - (s - e - 1) / p : 0;
        }
        ad[axis] = (affine_dim){s, p, len};
    }
    return emit_affine_gather(c, dx, dy, ad);
}

// PadGrad, edge / reflect / wrap: per dim, tab_start[i] .. tab_start[i + 1] index the dy
// coordinates (ascending, in tab_list) whose forward source is x coordinate i.
static dl_status lower_pad_grad_tables(cg *c, dl_ir_value *dx, dl_ir_value *dy, const char *mode,
                                       const int64_t *pads) {
    const dl_ir_type *xt = &dx->type, *yt = &dy->type;
    int32_t r = xt->rank;
    int64_t sx[DL_MAX_RANK], sy[DL_MAX_RANK];
    cg_strides(xt, sx);
    cg_strides(yt, sy);
    LLVMValueRef tstart[DL_MAX_RANK], tlist[DL_MAX_RANK];
    for (int32_t k = 0; k < r; k++) {
        int64_t d = xt->dims[k].value, Y = yt->dims[k].value;
        int64_t *src = dl_mem_alloc(sizeof(int64_t) * (size_t)(Y + 1));
        int64_t *start = dl_mem_calloc((size_t)(d + 2), sizeof(int64_t));
        int64_t *list = dl_mem_alloc(sizeof(int64_t) * (size_t)(Y + 1));
        if (!src || !start || !list) {
            free(src);
            free(start);
            free(list);
            return DL_ERR_NOMEM;
        }
        // The forward pad()'s source coordinate of every dy coordinate o (d > 0 here).
        for (int64_t o = 0; o < Y; o++) {
            int64_t cc = o - pads[k];
            if (cc < 0 || cc >= d) {
                if (strcmp(mode, "edge") == 0) {
                    cc = cc < 0 ? 0 : d - 1;
                } else if (strcmp(mode, "wrap") == 0) {
                    cc = ((cc % d) + d) % d;
                } else if (d == 1) {
                    cc = 0;
                } else { // reflect
                    int64_t per = 2 * (d - 1);
                    cc = ((cc % per) + per) % per;
                    cc = cc >= d ? per - cc : cc;
                }
            }
            src[o] = cc;
            start[cc + 1]++;
        }
        for (int64_t i = 0; i < d; i++) {
            start[i + 1] += start[i];
        }
        int64_t *fill = dl_mem_calloc((size_t)(d + 1), sizeof(int64_t));
        if (!fill) {
            free(src);
            free(start);
            free(list);
            return DL_ERR_NOMEM;
        }
        for (int64_t o = 0; o < Y; o++) { // ascending o: each list is sorted
            list[start[src[o]] + fill[src[o]]++] = o;
        }
        tstart[k] = const_table(c, start, (size_t)(d + 1));
        tlist[k] = const_table(c, list, (size_t)(Y > 0 ? Y : 1));
        free(fill);
        free(src);
        free(start);
        free(list);
        if (!tstart[k] || !tlist[k]) {
            return DL_ERR_NOMEM;
        }
    }
    dl_ir_value *vals[2] = {dx, dy};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 2, xt->dims[0].value, &k));
    LLVMValueRef acc = cg_entry_alloca(c, &k, c->t_f32, 1);
    cg_loop li[DL_MAX_RANK], lp[DL_MAX_RANK];
    LLVMValueRef ox = cg_i64(c, 0), iv[DL_MAX_RANK];
    for (int32_t j = 0; j < r; j++) {
        LLVMValueRef lo = j == 0 ? k.begin : cg_i64(c, 0);
        LLVMValueRef hi = j == 0 ? k.end : cg_i64(c, xt->dims[j].value);
        iv[j] = cg_for_begin(c, &li[j], lo, hi, "i");
        ox = iadd(c, ox, imul1(c, iv[j], sx[j]));
    }
    slot_set(c, acc, cg_f32(c, 0));
    LLVMValueRef oy = cg_i64(c, 0);
    for (int32_t j = 0; j < r; j++) {
        LLVMValueRef lo = table_get(c, tstart[j], iv[j]);
        LLVMValueRef hi = table_get(c, tstart[j], iadd(c, iv[j], cg_i64(c, 1)));
        LLVMValueRef p = cg_for_begin(c, &lp[j], lo, hi, "p");
        oy = iadd(c, oy, imul1(c, table_get(c, tlist[j], p), sy[j]));
    }
    slot_set(c, acc,
             LLVMBuildFAdd(c->b, slot_get(c, acc), cg_load(c, k.ptr[1], dy->type.dtype, oy), ""));
    for (int32_t j = r - 1; j >= 0; j--) {
        cg_for_end(c, &lp[j]);
    }
    cg_store(c, k.ptr[0], dx->type.dtype, ox, slot_get(c, acc));
    for (int32_t j = r - 1; j >= 0; j--) {
        cg_for_end(c, &li[j]);
    }
    return cg_kernel_end(c, &k);
}

static dl_status lower_pad_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dx = n->outputs[0], *dy = n->inputs[0];
    const dl_ir_type *xt = &dx->type;
    if (!need_float(c, dx, "dx") || !need_float(c, dy, "dy")) {
        return DL_ERR_UNSUPPORTED;
    }
    const dl_ir_attr *pa = dl_ir_node_attr(n, "pads");
    if (!pa || pa->n != 2 * (size_t)xt->rank) {
        cg_error(c, "pads must have %d entries", 2 * xt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    const char *mode = dl_ir_node_attr_string(n, "mode");
    if (strcmp(mode, "constant") != 0 && dl_ir_type_numel(xt) > 0 && xt->rank > 0) {
        return lower_pad_grad_tables(c, dx, dy, mode, pa->ints);
    }
    // Constant mode (and degenerate shapes): dx[i] = dy[i + pad_begin] inside dy, else 0.
    affine_dim ad[DL_MAX_RANK];
    for (int32_t i = 0; i < xt->rank; i++) {
        ad[i] = (affine_dim){-pa->ints[i], 1, dy->type.dims[i].value};
    }
    return emit_affine_gather(c, dx, dy, ad);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table.

dl_status dl_cg__lower_loss_grad(cg *c, const dl_ir_node *n) {
    return lower_loss_grad(c, n);
}

dl_status dl_cg__lower_layer_norm_grad(cg *c, const dl_ir_node *n) {
    return lower_layer_norm_grad(c, n);
}

dl_status dl_cg__lower_gather_grad(cg *c, const dl_ir_node *n) {
    return lower_gather_grad(c, n);
}

dl_status dl_cg__lower_slice_grad(cg *c, const dl_ir_node *n) {
    return lower_slice_grad(c, n);
}

dl_status dl_cg__lower_pad_grad(cg *c, const dl_ir_node *n) {
    return lower_pad_grad(c, n);
}
