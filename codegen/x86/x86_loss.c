// codegen/x86/x86_loss.c — lowering of: SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss
// MeanSquaredError.
//
// NLL / SCE: x: [N, C, d...] viewed as [N, C, D], labels: [N, D], weights?: [C]. One kernel
// computes, per target (n, d), l = -logp[n, t, d] * w[t] with
//   NLL: logp = x;   SCE: logp = (x - m) - log(sum_c exp(x - m)), m = max_c x (per (n, d)).
// reduction "none" stores l into y[N, D] and parallelises over N (one outer iteration per n);
// "sum" / "mean" is a single-iteration kernel (range 1) accumulating sum(l) and sum(w) in f32;
// mean = sum(l) / sum(w of counted targets) (without weights: their count; 0/0 = NaN as the
// evaluator). Positions over D are processed in chunks of up to LANES contiguous lanes so the
// per-class loops (max, sum of exp) vectorise: over C when D == 1, over the lanes otherwise.
// SCE's optional log_prob output is a LogSoftmax along axis 1 (dl_cg__emit_softmax); when it is
// float32 the loss kernel reads it as NLL does instead of recomputing the softmax.
//
// ignore_index is honoured only when the attribute is present on the node. A label outside
// [0, C) that is not ignored is a data error in the evaluator; here it CONTRIBUTES 0: loss 0 and
// weight 0 (not counted by mean), and nothing is read out of bounds (the class index used for
// the loads is clamped to 0 first).
//
// MeanSquaredError (a, b of one shape): "none" is a flat map (a - b)^2; "sum" / "mean" is a
// single-iteration kernel with an f32 sum.
#include "cg_internal.h"

#include <math.h>
#include <string.h>

#define LANES 64

// ---------------------------------------------------------------------------------------------
// Helpers (as in x86_reduce.c)

// An array of n elements of type t on the kernel's stack, in the entry block (promotable).
static LLVMValueRef arr_get(cg *c, LLVMValueRef arr, LLVMValueRef j) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f32, arr, &j, 1, "");
    return LLVMBuildLoad2(c->b, c->t_f32, p, "");
}

static void arr_set(cg *c, LLVMValueRef arr, LLVMValueRef j, LLVMValueRef v) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f32, arr, &j, 1, "");
    LLVMBuildStore(c->b, v, p);
}

// a + b with reassociation allowed (lets LLVM vectorise an f32 sum; the order depends only on
// static shapes).
static LLVMValueRef mul_i64(cg *c, LLVMValueRef a, int64_t b) {
    return b == 1 ? a : LLVMBuildMul(c->b, a, cg_i64(c, b), "");
}

static LLVMValueRef add3(cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef d) {
    return LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, a, b, ""), d, "");
}

// ---------------------------------------------------------------------------------------------
// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss

typedef struct nll_args {
    dl_ir_value *y, *x, *labels, *weights; // weights may be NULL
    bool from_scores;                      // x holds scores (SCE) rather than log-probs
} nll_args;

static dl_status emit_nll(cg *c, const nll_args *a) {
    const dl_ir_node *n = c->node;
    const dl_ir_type *xt = &a->x->type;
    dl_dtype dt = xt->dtype, lt = a->labels->type.dtype, yt = a->y->type.dtype;
    if (!dl_dtype_is_float(dt) || !dl_dtype_is_float(yt) ||
        (lt != DL_DT_INT32 && lt != DL_DT_INT64) || xt->rank < 2) {
        cg_error(c, "unsupported types");
        return DL_ERR_UNSUPPORTED;
    }
    // x: [N, C, D], labels: [N, D]
    int64_t N = xt->dims[0].value, C = xt->dims[1].value, D = 1;
    for (int32_t i = 2; i < xt->rank; i++) {
        D *= xt->dims[i].value;
    }
    const char *red = dl_ir_node_attr_string(n, "reduction");
    bool none = strcmp(red, "none") == 0, is_sum = strcmp(red, "sum") == 0;
    if (none && N * D == 0) {
        return DL_OK;
    }
    const dl_ir_attr *ig = dl_ir_node_attr(n, "ignore_index");
    // An empty [N, D] leaves no targets: the n loop runs 0 times (sum 0, mean NaN).
    int64_t n_loop = N * D == 0 ? 0 : N;
    int64_t T = D < 1 ? 1 : D < LANES ? D : LANES, chunks = (D + T - 1) / T;
    dl_ir_value *vals[4] = {a->y, a->x, a->labels, a->weights};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, a->weights ? 4 : 3, none ? N : 1, &k));
    k.n_out = 1; // only y is written (x may be this node's own log_prob output, read back)
    LLVMValueRef py = k.ptr[0], px = k.ptr[1], pl = k.ptr[2], pw = a->weights ? k.ptr[3] : NULL;
    LLVMTypeRef t = c->t_f32;
    LLVMValueRef am = NULL, as = NULL, acc = NULL;
    if (a->from_scores) {
        am = cg_entry_alloca(c, &k, t, T);
        as = cg_entry_alloca(c, &k, t, T);
    }
    if (!none) {
        acc = cg_entry_alloca(c, &k, t, 2); // [sum of l, sum of w]
    }
    cg_loop lo, ln, lch, lj, lc;
    LLVMValueRef o = cg_for_begin(c, &lo, k.begin, k.end, "o");
    LLVMValueRef nv = o;
    if (!none) {
        arr_set(c, acc, cg_i64(c, 0), cg_f32(c, 0));
        arr_set(c, acc, cg_i64(c, 1), cg_f32(c, 0));
        nv = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, n_loop), "n");
    }
    // Chunks of D: lanes d = d0 + j, j < nj.
    LLVMValueRef d0 = cg_i64(c, 0), nj = cg_i64(c, T);
    if (chunks > 1) {
        LLVMValueRef ch = cg_for_begin(c, &lch, cg_i64(c, 0), cg_i64(c, chunks), "ch");
        d0 = mul_i64(c, ch, T);
        if (D % T != 0) {
            LLVMValueRef rest = LLVMBuildSub(c->b, cg_i64(c, D), d0, "");
            nj = cg_intrinsic2(c, "llvm.smin", c->t_i64, rest, cg_i64(c, T));
        }
    }
#define LANES_BEGIN() (T == 1 ? cg_i64(c, 0) : cg_for_begin(c, &lj, cg_i64(c, 0), nj, "j"))
#define LANES_END()                                                                                \
    do {                                                                                           \
        if (T != 1) {                                                                              \
            cg_for_end(c, &lj);                                                                    \
        }                                                                                          \
    } while (0)
    LLVMValueRef xrow = LLVMBuildAdd(c->b, mul_i64(c, nv, C * D), d0, ""); // x[n, 0, d0]
    LLVMValueRef j, v;
    if (a->from_scores) {
        // m[j] = max_c x[n, c, d0 + j]; s[j] = log(sum_c exp(x - m[j]))
        j = LANES_BEGIN();
        arr_set(c, am, j, cg_f32(c, -INFINITY));
        arr_set(c, as, j, cg_f32(c, 0));
        LANES_END();
        LLVMValueRef cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        LLVMValueRef coff = LLVMBuildAdd(c->b, xrow, mul_i64(c, cv, D), "");
        j = LANES_BEGIN();
        v = cg_load(c, px, dt, LLVMBuildAdd(c->b, coff, j, ""));
        arr_set(c, am, j, cg_intrinsic2(c, "llvm.maximum", t, arr_get(c, am, j), v));
        LANES_END();
        cg_for_end(c, &lc);
        cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, C), "c");
        coff = LLVMBuildAdd(c->b, xrow, mul_i64(c, cv, D), "");
        j = LANES_BEGIN();
        v = cg_load(c, px, dt, LLVMBuildAdd(c->b, coff, j, ""));
        LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFSub(c->b, v, arr_get(c, am, j), ""));
        arr_set(c, as, j, cg_fadd_reassoc(c, arr_get(c, as, j), e));
        LANES_END();
        cg_for_end(c, &lc);
        j = LANES_BEGIN();
        arr_set(c, as, j, cg_intrinsic1(c, "llvm.log", t, arr_get(c, as, j)));
        LANES_END();
    }
    // Per lane: the target's loss and weight.
    j = LANES_BEGIN();
    LLVMValueRef pos = add3(c, mul_i64(c, nv, D), d0, j); // labels / y index n * D + d
    LLVMValueRef lab = cg_convert(c, cg_load(c, pl, lt, pos), lt, DL_DT_INT64);
    // 0 <= t < C as one unsigned compare.
    LLVMValueRef valid = LLVMBuildICmp(c->b, LLVMIntULT, lab, cg_i64(c, C), "");
    if (ig) {
        LLVMValueRef keep = LLVMBuildICmp(c->b, LLVMIntNE, lab, cg_i64(c, ig->i), "");
        valid = LLVMBuildAnd(c->b, valid, keep, "");
    }
    LLVMValueRef tc = LLVMBuildSelect(c->b, valid, lab, cg_i64(c, 0), "");
    // With C == 0 no label is valid and x / weights are empty: load nothing.
    LLVMValueRef w = pw && C > 0 ? cg_load(c, pw, a->weights->type.dtype, tc) : cg_f32(c, 1);
    LLVMValueRef lp =
        C > 0 ? cg_load(c, px, dt, add3(c, xrow, mul_i64(c, tc, D), j)) : cg_f32(c, 0);
    if (a->from_scores) {
        lp = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, lp, arr_get(c, am, j), ""), arr_get(c, as, j),
                           "");
    }
    LLVMValueRef l = LLVMBuildFMul(c->b, LLVMBuildFNeg(c->b, lp, ""), w, "");
    l = LLVMBuildSelect(c->b, valid, l, cg_f32(c, 0), "");
    if (none) {
        cg_store(c, py, yt, pos, l);
    } else {
        LLVMValueRef wv = LLVMBuildSelect(c->b, valid, w, cg_f32(c, 0), "");
        arr_set(c, acc, cg_i64(c, 0), cg_fadd_reassoc(c, arr_get(c, acc, cg_i64(c, 0)), l));
        arr_set(c, acc, cg_i64(c, 1), cg_fadd_reassoc(c, arr_get(c, acc, cg_i64(c, 1)), wv));
    }
    LANES_END();
#undef LANES_BEGIN
#undef LANES_END
    if (chunks > 1) {
        cg_for_end(c, &lch);
    }
    if (!none) {
        cg_for_end(c, &ln);
        LLVMValueRef s = arr_get(c, acc, cg_i64(c, 0));
        if (!is_sum) {
            s = LLVMBuildFDiv(c->b, s, arr_get(c, acc, cg_i64(c, 1)), "");
        }
        cg_store(c, py, yt, cg_i64(c, 0), s);
    }
    cg_for_end(c, &lo);
    return cg_kernel_end(c, &k);
}

static dl_status lower_nll_sce(cg *c, const dl_ir_node *n) {
    nll_args a = {n->outputs[0], n->inputs[0], n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : NULL,
                  false};
    if (n->op == DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS) {
        a.from_scores = true;
        dl_ir_value *lp = n->n_outputs > 1 ? n->outputs[1] : NULL;
        if (lp) {
            DL_TRY(dl_cg__emit_softmax(c, lp, a.x, 1, true));
            if (lp->type.dtype == DL_DT_FLOAT) { // exact: read it back instead of recomputing
                a.x = lp;
                a.from_scores = false;
            }
        }
    }
    return emit_nll(c, &a);
}

// ---------------------------------------------------------------------------------------------
// MeanSquaredError

static dl_status lower_mse(cg *c, const dl_ir_node *n) {
    dl_ir_value *y = n->outputs[0], *a = n->inputs[0], *b = n->inputs[1];
    dl_dtype dt = a->type.dtype, yt = y->type.dtype;
    if (!dl_dtype_is_float(dt) || b->type.dtype != dt || !dl_dtype_is_float(yt) ||
        dl_ir_type_numel(&b->type) != dl_ir_type_numel(&a->type)) {
        cg_error(c, "unsupported types");
        return DL_ERR_UNSUPPORTED;
    }
    // a, b: [numel] (same shape)
    int64_t numel = dl_ir_type_numel(&a->type);
    const char *red = dl_ir_node_attr_string(n, "reduction");
    bool none = strcmp(red, "none") == 0, is_sum = strcmp(red, "sum") == 0;
    if (none && numel == 0) {
        return DL_OK;
    }
    dl_ir_value *vals[3] = {y, a, b};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, none ? numel : 1, &k));
    LLVMValueRef acc = none ? NULL : cg_entry_alloca(c, &k, c->t_f32, 1);
    cg_loop lo, li;
    LLVMValueRef i = cg_for_begin(c, &lo, k.begin, k.end, "o");
    if (!none) {
        arr_set(c, acc, cg_i64(c, 0), cg_f32(c, 0));
        i = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, numel), "i");
    }
    LLVMValueRef d =
        LLVMBuildFSub(c->b, cg_load(c, k.ptr[1], dt, i), cg_load(c, k.ptr[2], dt, i), "");
    LLVMValueRef sq = LLVMBuildFMul(c->b, d, d, "");
    if (none) {
        cg_store(c, k.ptr[0], yt, i, sq);
    } else {
        arr_set(c, acc, cg_i64(c, 0), cg_fadd_reassoc(c, arr_get(c, acc, cg_i64(c, 0)), sq));
        cg_for_end(c, &li);
        LLVMValueRef s = arr_get(c, acc, cg_i64(c, 0));
        if (!is_sum) { // numel 0: 0/0 = NaN, as the evaluator
            s = LLVMBuildFDiv(c->b, s, cg_f32(c, (double)numel), "");
        }
        cg_store(c, k.ptr[0], yt, cg_i64(c, 0), s);
    }
    cg_for_end(c, &lo);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table.

dl_status dl_cg__lower_loss(cg *c, const dl_ir_node *n) {
    return lower_nll_sce(c, n);
}

dl_status dl_cg__lower_mse(cg *c, const dl_ir_node *n) {
    return lower_mse(c, n);
}
