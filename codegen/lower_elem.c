// codegen/lower_elem.c — elementwise ops: every output element is a function of the elements of
// the inputs at the same (broadcast) position.
//
// One generic emitter, emit_map, builds the loop nest: the output's dims with each operand's
// broadcast strides (0 on broadcast dims), adjacent dims merged where every operand is
// contiguous across them, so the common cases become one flat loop that LLVM vectorises. The
// outer (merged) dim is the kernel's parallel range. Each op contributes only its scalar
// function on compute-type values.
//
// Where the reference evaluator reports a data error, compiled code must still not hit LLVM
// undefined behaviour: integer division by zero gives 0 and INT_MIN / -1 wraps.
#include "cg_internal.h"

#include <string.h>

DL_CG_FAMILY_SWITCHES_ARE_PARTIAL

#define MAX_OPS 16 // outputs + inputs of one map

typedef struct map_args {
    const dl_ir_node *n;
    dl_dtype in_dt[MAX_OPS]; // dtypes of the inputs (compute types follow)
    size_t n_in;
    dl_dtype out_dt;
    const void *user; // per-op data passed through emit_map_ex
} map_args;

typedef LLVMValueRef (*scalar_fn)(cg *c, const map_args *a, LLVMValueRef *in);

// out[...] = f(in[0][...], ..., in[n_in-1][...]) over out's shape. `ins` may contain values of
// any shape broadcastable to out's.
static dl_status emit_map_ex(cg *c, dl_ir_value *out, dl_ir_value *const *ins, size_t n_in,
                             scalar_fn f, const void *user) {
    DL_ASSERT(n_in + 1 <= MAX_OPS);
    const dl_ir_type *ot = &out->type;
    if (dl_ir_type_numel(ot) == 0) {
        return DL_OK; // an empty output: nothing to compute (and no kernel with an empty range)
    }
    int32_t r = ot->rank;
    int64_t dims[DL_MAX_RANK];
    int64_t st[MAX_OPS][DL_MAX_RANK];
    size_t n_ops = n_in + 1;
    cg_strides(ot, st[0]);
    for (size_t k = 0; k < n_in; k++) {
        cg_broadcast_strides(&ins[k]->type, ot, st[k + 1]);
    }
    // Merge dims: drop size-1 dims, then fuse neighbours that are contiguous for every operand.
    int32_t R = 0;
    int64_t mst[MAX_OPS][DL_MAX_RANK];
    for (int32_t j = 0; j < r; j++) {
        int64_t d = ot->dims[j].value;
        if (d == 1) {
            continue;
        }
        bool fuse = R > 0;
        for (size_t k = 0; fuse && k < n_ops; k++) {
            fuse = mst[k][R - 1] == st[k][j] * d;
        }
        if (fuse) {
            dims[R - 1] *= d;
            for (size_t k = 0; k < n_ops; k++) {
                mst[k][R - 1] = st[k][j];
            }
        } else {
            dims[R] = d;
            for (size_t k = 0; k < n_ops; k++) {
                mst[k][R] = st[k][j];
            }
            R++;
        }
    }
    int64_t numel = dl_ir_type_numel(ot);
    if (R == 0) { // a scalar, or all dims 1 (or an empty tensor)
        dims[0] = numel == 0 ? 0 : 1;
        for (size_t k = 0; k < n_ops; k++) {
            mst[k][0] = 0;
        }
        R = 1;
    }
    dl_ir_value *vals[MAX_OPS];
    vals[0] = out;
    for (size_t k = 0; k < n_in; k++) {
        vals[k + 1] = ins[k];
    }
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, n_ops, dims[0], &k));
    map_args a = {c->node, {0}, n_in, out->type.dtype, user};
    for (size_t i = 0; i < n_in; i++) {
        a.in_dt[i] = ins[i]->type.dtype;
    }
    cg_loop loops[DL_MAX_RANK];
    LLVMValueRef off[MAX_OPS];
    for (size_t q = 0; q < n_ops; q++) {
        off[q] = cg_i64(c, 0);
    }
    for (int32_t j = 0; j < R; j++) {
        LLVMValueRef lo = j == 0 ? k.begin : cg_i64(c, 0);
        LLVMValueRef hi = j == 0 ? k.end : cg_i64(c, dims[j]);
        LLVMValueRef iv = cg_for_begin(c, &loops[j], lo, hi, "i");
        for (size_t q = 0; q < n_ops; q++) {
            if (mst[q][j] != 0) {
                LLVMValueRef t = LLVMBuildMul(c->b, iv, cg_i64(c, mst[q][j]), "");
                off[q] = LLVMBuildAdd(c->b, off[q], t, "");
            }
        }
    }
    LLVMValueRef in[MAX_OPS];
    for (size_t q = 0; q < n_in; q++) {
        in[q] = cg_load(c, k.ptr[q + 1], ins[q]->type.dtype, off[q + 1]);
    }
    LLVMValueRef v = f(c, &a, in);
    cg_store(c, k.ptr[0], out->type.dtype, off[0], v);
    for (int32_t j = R - 1; j >= 0; j--) {
        cg_for_end(c, &loops[j]);
    }
    return cg_kernel_end(c, &k);
}

static dl_status emit_map(cg *c, dl_ir_value *out, dl_ir_value *const *ins, size_t n_in,
                          scalar_fn f) {
    return emit_map_ex(c, out, ins, n_in, f, NULL);
}

// ---------------------------------------------------------------------------------------------
// Scalar functions

static bool is_f(dl_dtype t) {
    return dl_dtype_is_float(t);
}

static LLVMValueRef f_copy(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)c;
    (void)a;
    return in[0];
}

static LLVMValueRef f_cast(cg *c, const map_args *a, LLVMValueRef *in) {
    return cg_convert(c, in[0], a->in_dt[0], a->out_dt);
}

// Integer division without undefined behaviour: x / 0 = 0, INT_MIN / -1 wraps to INT_MIN.
static LLVMValueRef int_div(cg *c, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0);
    LLVMValueRef one = LLVMConstInt(t, 1, 0);
    LLVMValueRef m1 = LLVMConstAllOnes(t);
    LLVMValueRef y0 = LLVMBuildICmp(c->b, LLVMIntEQ, y, zero, "");
    LLVMValueRef ym1 = LLVMBuildICmp(c->b, LLVMIntEQ, y, m1, "");
    LLVMValueRef safe = LLVMBuildSelect(c->b, LLVMBuildOr(c->b, y0, ym1, ""), one, y, "");
    LLVMValueRef q = LLVMBuildSDiv(c->b, x, safe, "");
    LLVMValueRef neg = LLVMBuildSub(c->b, zero, x, ""); // wraps for INT_MIN
    q = LLVMBuildSelect(c->b, ym1, neg, q, "");
    return LLVMBuildSelect(c->b, y0, zero, q, "");
}

static LLVMValueRef f_binary(cg *c, const map_args *a, LLVMValueRef *in) {
    bool fl = is_f(a->in_dt[0]);
    LLVMValueRef x = in[0], y = in[1];
    switch (a->n->op) {
    case DL_IR_OP_ADD:
        return fl ? LLVMBuildFAdd(c->b, x, y, "") : LLVMBuildAdd(c->b, x, y, "");
    case DL_IR_OP_SUB:
        return fl ? LLVMBuildFSub(c->b, x, y, "") : LLVMBuildSub(c->b, x, y, "");
    case DL_IR_OP_MUL:
        return fl ? LLVMBuildFMul(c->b, x, y, "") : LLVMBuildMul(c->b, x, y, "");
    case DL_IR_OP_DIV:
        return fl ? LLVMBuildFDiv(c->b, x, y, "") : int_div(c, x, y);
    default:
        DL_UNREACHABLE();
    }
}

// Float results: powf. Integer results: pow in double (exact for every result below 2^53, as
// the evaluator computes it), then truncated and saturated to the integer type.
static LLVMValueRef to_f64(cg *c, LLVMValueRef v, dl_dtype t) {
    if (is_f(t)) {
        return LLVMBuildFPExt(c->b, v, c->t_f64, "");
    }
    if (t == DL_DT_BOOL) {
        return LLVMBuildUIToFP(c->b, v, c->t_f64, "");
    }
    return LLVMBuildSIToFP(c->b, v, c->t_f64, "");
}

static LLVMValueRef f_pow(cg *c, const map_args *a, LLVMValueRef *in) {
    if (!is_f(a->out_dt)) {
        LLVMValueRef x = to_f64(c, in[0], a->in_dt[0]);
        LLVMValueRef y = to_f64(c, in[1], a->in_dt[1]);
        LLVMValueRef r = cg_intrinsic2(c, "llvm.pow", c->t_f64, x, y);
        return cg_intrinsic1(c, "llvm.fptosi.sat", cg_compute_type(c, a->out_dt), r);
    }
    LLVMValueRef x = cg_convert(c, in[0], a->in_dt[0], DL_DT_FLOAT);
    LLVMValueRef y = cg_convert(c, in[1], a->in_dt[1], DL_DT_FLOAT);
    return cg_intrinsic2(c, "llvm.pow", c->t_f32, x, y);
}

static LLVMValueRef fsel_neg(cg *c, LLVMValueRef x, LLVMValueRef if_neg) {
    LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, cg_f32(c, 0), "");
    return LLVMBuildSelect(c->b, neg, if_neg, x, "");
}

static LLVMValueRef sigmoid(cg *c, LLVMValueRef x) {
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(c->b, x, ""));
    return LLVMBuildFDiv(c->b, cg_f32(c, 1), LLVMBuildFAdd(c->b, cg_f32(c, 1), e, ""), "");
}

static LLVMValueRef f_unary(cg *c, const map_args *a, LLVMValueRef *in) {
    LLVMValueRef x = in[0];
    bool fl = is_f(a->in_dt[0]);
    LLVMTypeRef t = LLVMTypeOf(x);
    switch (a->n->op) {
    case DL_IR_OP_NEG:
        return fl ? LLVMBuildFNeg(c->b, x, "") : LLVMBuildSub(c->b, LLVMConstInt(t, 0, 0), x, "");
    case DL_IR_OP_ABS:
        return fl ? cg_intrinsic1(c, "llvm.fabs", t, x)
                  : cg_intrinsic2(c, "llvm.abs", t, x, LLVMConstInt(c->t_i1, 0, 0));
    case DL_IR_OP_EXP:
        return dl_cg__exp_f32(c, x);
    case DL_IR_OP_LOG:
        return cg_intrinsic1(c, "llvm.log", t, x);
    case DL_IR_OP_SQRT:
        return cg_intrinsic1(c, "llvm.sqrt", t, x);
    case DL_IR_OP_RECIPROCAL:
        return LLVMBuildFDiv(c->b, cg_f32(c, 1), x, "");
    case DL_IR_OP_RELU:
        if (fl) { // x < 0 ? +0 : x, as PyTorch: NaN stays NaN, -0 stays -0 (one maxps(0, x))
            LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, cg_f32(c, 0), "");
            return LLVMBuildSelect(c->b, neg, cg_f32(c, 0), x, "");
        }
        return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), ""),
                               LLVMConstInt(t, 0, 0), x, "");
    case DL_IR_OP_LEAKY_RELU: {
        double alpha = dl_ir_node_attr_float(a->n, "alpha");
        return fsel_neg(c, x, LLVMBuildFMul(c->b, x, cg_f32(c, alpha), ""));
    }
    case DL_IR_OP_SIGMOID:
        return sigmoid(c, x);
    case DL_IR_OP_TANH:
        return cg_libm1(c, "tanhf", x);
    case DL_IR_OP_ERF:
        return cg_libm1(c, "erff", x);
    case DL_IR_OP_GELU: {
        LLVMValueRef half_x = LLVMBuildFMul(c->b, x, cg_f32(c, 0.5), "");
        LLVMValueRef inner;
        if (strcmp(dl_ir_node_attr_string(a->n, "approximate"), "tanh") == 0) {
            // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            LLVMValueRef x3 = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, x, x, ""), x, "");
            LLVMValueRef s =
                LLVMBuildFAdd(c->b, x, LLVMBuildFMul(c->b, x3, cg_f32(c, 0.044715), ""), "");
            s = LLVMBuildFMul(c->b, s, cg_f32(c, 0.79788456080286535588), "");
            inner = cg_libm1(c, "tanhf", s);
        } else {
            // 0.5 x (1 + erf(x / sqrt 2))
            inner =
                cg_libm1(c, "erff", LLVMBuildFMul(c->b, x, cg_f32(c, 0.70710678118654752440), ""));
        }
        return LLVMBuildFMul(c->b, half_x, LLVMBuildFAdd(c->b, cg_f32(c, 1), inner, ""), "");
    }
    case DL_IR_OP_SOFTPLUS: {
        // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
        LLVMValueRef ax = cg_intrinsic1(c, "llvm.fabs", t, x);
        LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(c->b, ax, ""));
        LLVMValueRef l = cg_libm1(c, "log1pf", e);
        LLVMValueRef mx = cg_intrinsic2(c, "llvm.maxnum", t, x, cg_f32(c, 0));
        return LLVMBuildFAdd(c->b, mx, l, "");
    }
    case DL_IR_OP_NOT:
        return LLVMBuildNot(c->b, x, "");
    default:
        DL_UNREACHABLE();
    }
}

static LLVMValueRef fmax2(cg *c, bool fl, bool is_max, LLVMValueRef x, LLVMValueRef y) {
    LLVMTypeRef t = LLVMTypeOf(x);
    if (fl) { // NaN-propagating, as numpy's maximum/minimum and the evaluator
        return cg_intrinsic2(c, is_max ? "llvm.maximum" : "llvm.minimum", t, x, y);
    }
    if (t == c->t_i1) {
        return is_max ? LLVMBuildOr(c->b, x, y, "") : LLVMBuildAnd(c->b, x, y, "");
    }
    return cg_intrinsic2(c, is_max ? "llvm.smax" : "llvm.smin", t, x, y);
}

static LLVMValueRef f_minmax(cg *c, const map_args *a, LLVMValueRef *in) {
    bool is_max = a->n->op == DL_IR_OP_MAX;
    LLVMValueRef v = in[0];
    for (size_t i = 1; i < a->n_in; i++) {
        v = fmax2(c, is_f(a->in_dt[0]), is_max, v, in[i]);
    }
    return v;
}

// Clip: inputs are x, then whichever of min/max are present as tensors; attribute bounds are
// folded in as constants. `a->n_in` counts only the tensors given to emit_map.
typedef struct clip_info {
    bool has_lo_in, has_hi_in, has_lo_attr, has_hi_attr;
    double lo_attr, hi_attr;
} clip_info;

// (v PRED bound) or bound is NaN.
static LLVMValueRef fcmp_or_nan(cg *c, LLVMRealPredicate pred, LLVMValueRef v, LLVMValueRef bound) {
    LLVMValueRef cmp = LLVMBuildFCmp(c->b, pred, v, bound, "");
    LLVMValueRef bnan = LLVMBuildFCmp(c->b, LLVMRealUNO, bound, bound, "");
    return LLVMBuildOr(c->b, cmp, bnan, "");
}

static LLVMValueRef f_clip(cg *c, const map_args *a, LLVMValueRef *in) {
    const clip_info *ci = a->user;
    bool fl = is_f(a->in_dt[0]);
    LLVMValueRef v = in[0];
    size_t k = 1;
    LLVMValueRef lo = NULL, hi = NULL;
    if (ci->has_lo_in) {
        lo = in[k++];
    } else if (ci->has_lo_attr) {
        lo = cg_const(c, a->in_dt[0], ci->lo_attr);
    }
    if (ci->has_hi_in) {
        hi = in[k++];
    } else if (ci->has_hi_attr) {
        hi = cg_const(c, a->in_dt[0], ci->hi_attr);
    }
    // ONNX: y = min(max(x, lo), hi); with lo > hi every element becomes hi. As the evaluator,
    // (x < lo or lo is NaN) ? lo : x, then the same with hi: a NaN input stays NaN, a NaN bound
    // makes NaN (torch.clamp with tensor bounds), a tie keeps x (-0 stays -0). A constant
    // bound's NaN test folds away.
    if (lo) {
        v = fl ? LLVMBuildSelect(c->b, fcmp_or_nan(c, LLVMRealOLT, v, lo), lo, v, "")
               : cg_intrinsic2(c, "llvm.smax", LLVMTypeOf(v), v, lo);
    }
    if (hi) {
        v = fl ? LLVMBuildSelect(c->b, fcmp_or_nan(c, LLVMRealOGT, v, hi), hi, v, "")
               : cg_intrinsic2(c, "llvm.smin", LLVMTypeOf(v), v, hi);
    }
    return v;
}

static LLVMValueRef f_where(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return LLVMBuildSelect(c->b, in[0], in[1], in[2], "");
}

static LLVMValueRef f_compare(cg *c, const map_args *a, LLVMValueRef *in) {
    bool fl = is_f(a->in_dt[0]);
    switch (a->n->op) {
    case DL_IR_OP_EQUAL:
        return fl ? LLVMBuildFCmp(c->b, LLVMRealOEQ, in[0], in[1], "")
                  : LLVMBuildICmp(c->b, LLVMIntEQ, in[0], in[1], "");
    case DL_IR_OP_LESS:
        return fl ? LLVMBuildFCmp(c->b, LLVMRealOLT, in[0], in[1], "")
                  : LLVMBuildICmp(c->b, LLVMIntSLT, in[0], in[1], "");
    case DL_IR_OP_GREATER:
        return fl ? LLVMBuildFCmp(c->b, LLVMRealOGT, in[0], in[1], "")
                  : LLVMBuildICmp(c->b, LLVMIntSGT, in[0], in[1], "");
    case DL_IR_OP_AND:
        return LLVMBuildAnd(c->b, in[0], in[1], "");
    case DL_IR_OP_OR:
        return LLVMBuildOr(c->b, in[0], in[1], "");
    default:
        DL_UNREACHABLE();
    }
}

static LLVMValueRef f_true(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    (void)in;
    return LLVMConstInt(c->t_i1, 1, 0);
}

// ---------------------------------------------------------------------------------------------

static dl_status lower_clip(cg *c, const dl_ir_node *n) {
    dl_ir_value *ins[3] = {n->inputs[0], NULL, NULL};
    size_t k = 1;
    clip_info ci;
    memset(&ci, 0, sizeof ci);
    const dl_ir_attr *amin = dl_ir_node_attr(n, "min"), *amax = dl_ir_node_attr(n, "max");
    if (n->n_inputs > 1 && n->inputs[1]) {
        ci.has_lo_in = true;
        ins[k++] = n->inputs[1];
    } else if (amin) {
        ci.has_lo_attr = true;
        ci.lo_attr = amin->kind == DL_IR_ATTR_INT ? (double)amin->i : amin->f;
    }
    if (n->n_inputs > 2 && n->inputs[2]) {
        ci.has_hi_in = true;
        ins[k++] = n->inputs[2];
    } else if (amax) {
        ci.has_hi_attr = true;
        ci.hi_attr = amax->kind == DL_IR_ATTR_INT ? (double)amax->i : amax->f;
    }
    return emit_map_ex(c, n->outputs[0], ins, k, f_clip, &ci);
}

// ---------------------------------------------------------------------------------------------
// Dropout (x, ratio?, training_mode?, counter?) -> y, mask?
//
// Without a training_mode input, or with a const false one, Dropout is the identity and its mask
// is all true (the infer entry point). With a const true one (the training-mode clones autodiff
// makes for the train step), or a bool input read when the kernel runs, element i of the
// C-order flat index is kept when u >= ratio, where u = dl_rng_uniform(seed, counter * numel + i)
// (base/base.c) replicated bit for bit: splitmix64's finaliser, whose first application to the
// seed is folded here at compile time, the counter mix and the top 53 bits as a double. y is
// x / (1 - ratio) computed in double (as ir/eval_nn.c does) or x * 0; counter comes from the 4th
// input's int64 buffer (the train step's RNG counter, session state), 0 when absent.

static uint64_t rng_mix64(uint64_t z) { // ORDER DL_RNG: base/base.c mix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static LLVMValueRef emit_mix64(cg *c, LLVMValueRef z) {
    LLVMTypeRef t = c->t_i64;
    z = LLVMBuildXor(c->b, z, LLVMBuildLShr(c->b, z, LLVMConstInt(t, 30, 0), ""), "");
    z = LLVMBuildMul(c->b, z, LLVMConstInt(t, 0xbf58476d1ce4e5b9ull, 0), "");
    z = LLVMBuildXor(c->b, z, LLVMBuildLShr(c->b, z, LLVMConstInt(t, 27, 0), ""), "");
    z = LLVMBuildMul(c->b, z, LLVMConstInt(t, 0x94d049bb133111ebull, 0), "");
    return LLVMBuildXor(c->b, z, LLVMBuildLShr(c->b, z, LLVMConstInt(t, 31, 0), ""), "");
}

// A const scalar's truth (bool / int / float literal), or -1 when v is no const.
static int const_truth(const dl_ir_value *v) {
    if (!v || v->kind != DL_IR_VAL_CONST || !v->lit || v->lit->n < 1) {
        return -1;
    }
    return (v->lit->i ? v->lit->i[0] != 0 : v->lit->f ? v->lit->f[0] != 0 : 0) ? 1 : 0;
}

static dl_status lower_dropout(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    dl_ir_value *mask = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *ratio_in = n->n_inputs > 1 ? n->inputs[1] : NULL;
    dl_ir_value *tm = n->n_inputs > 2 ? n->inputs[2] : NULL;
    dl_ir_value *cnt = n->n_inputs > 3 ? n->inputs[3] : NULL;
    int truth = tm ? const_truth(tm) : 0;
    if (truth == 0) { // identity; mask all true
        DL_TRY(emit_map(c, y, n->inputs, 1, f_copy));
        return mask ? emit_map(c, mask, NULL, 0, f_true) : DL_OK;
    }
    int64_t numel = dl_ir_type_numel(&x->type);
    if (numel == 0) {
        return DL_OK;
    }
    // x: [numel] flat (y, mask: the same shape); ratio, training_mode, counter: scalars.
    dl_ir_value *vals[6];
    size_t nv = 0;
    vals[nv++] = y;
    if (mask) {
        vals[nv++] = mask;
    }
    size_t ix = nv;
    vals[nv++] = x;
    size_t iratio = ratio_in ? nv : 0;
    if (ratio_in) {
        vals[nv++] = ratio_in;
    }
    size_t itm = truth < 0 ? nv : 0;
    if (truth < 0) {
        vals[nv++] = tm;
    }
    size_t icnt = cnt ? nv : 0;
    if (cnt) {
        vals[nv++] = cnt;
    }
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, numel, &k));
    LLVMValueRef zero64 = cg_i64(c, 0);
    LLVMValueRef ratio =
        ratio_in ? LLVMBuildFPExt(c->b, cg_load(c, k.ptr[iratio], ratio_in->type.dtype, zero64),
                                  c->t_f64, "ratio")
                 : LLVMConstReal(c->t_f64, dl_ir_node_attr_float(n, "ratio"));
    LLVMValueRef train = truth < 0 ? cg_load(c, k.ptr[itm], tm->type.dtype, zero64) : NULL;
    if (train && tm->type.dtype != DL_DT_BOOL) {
        train = cg_convert(c, train, tm->type.dtype, DL_DT_BOOL);
    }
    LLVMValueRef counter = cnt ? cg_load(c, k.ptr[icnt], DL_DT_INT64, zero64) : zero64;
    LLVMValueRef base = LLVMBuildMul(c->b, counter, cg_i64(c, numel), "rng_base");
    LLVMValueRef scale = LLVMBuildFSub(c->b, LLVMConstReal(c->t_f64, 1.0), ratio, "");
    uint64_t seed = (uint64_t)dl_ir_node_attr_int(n, "seed");
    LLVMValueRef seed_mix = LLVMConstInt(c->t_i64, rng_mix64(seed + 0x9e3779b97f4a7c15ull), 0);
    cg_loop l;
    LLVMValueRef i = cg_for_begin(c, &l, k.begin, k.end, "i");
    // dl_rng_bits(seed, base + i) >> 11, times 2^-53.
    LLVMValueRef ctr = LLVMBuildAdd(c->b, base, i, "");
    LLVMValueRef z = LLVMBuildAdd(
        c->b, LLVMBuildMul(c->b, ctr, LLVMConstInt(c->t_i64, 0xd1b54a32d192ed03ull, 0), ""),
        LLVMConstInt(c->t_i64, 0x8cb92ba72f3d8dd7ull, 0), "");
    z = emit_mix64(c, LLVMBuildXor(c->b, seed_mix, z, ""));
    z = LLVMBuildLShr(c->b, z, LLVMConstInt(c->t_i64, 11, 0), "");
    LLVMValueRef u = LLVMBuildFMul(c->b, LLVMBuildUIToFP(c->b, z, c->t_f64, ""),
                                   LLVMConstReal(c->t_f64, 0x1.0p-53), "u");
    LLVMValueRef keep = LLVMBuildFCmp(c->b, LLVMRealOGE, u, ratio, "keep");
    LLVMValueRef xv = cg_load(c, k.ptr[ix], x->type.dtype, i);
    LLVMValueRef xd = LLVMBuildFPExt(c->b, xv, c->t_f64, "");
    // dropped: x * 0 (NaN for NaN and inf, as PyTorch's x * mask * scale)
    LLVMValueRef yd =
        LLVMBuildSelect(c->b, keep, LLVMBuildFDiv(c->b, xd, scale, ""),
                        LLVMBuildFMul(c->b, xd, LLVMConstReal(c->t_f64, 0.0), ""), "");
    if (train) { // not training: identity, mask true
        yd = LLVMBuildSelect(c->b, train, yd, xd, "");
        keep = LLVMBuildOr(c->b, keep, LLVMBuildNot(c->b, train, ""), "");
    }
    cg_store(c, k.ptr[0], y->type.dtype, i,
             LLVMBuildFPTrunc(c->b, yd, cg_compute_type(c, y->type.dtype), ""));
    if (mask) {
        cg_store(c, k.ptr[1], DL_DT_BOOL, i, keep);
    }
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

dl_status dl_cg__lower_elementwise(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0];
    switch (n->op) {
    case DL_IR_OP_ADD:
    case DL_IR_OP_SUB:
    case DL_IR_OP_MUL:
    case DL_IR_OP_DIV:
        return emit_map(c, out, n->inputs, 2, f_binary);
    case DL_IR_OP_POW:
        return emit_map(c, out, n->inputs, 2, f_pow);
    case DL_IR_OP_NEG:
    case DL_IR_OP_ABS:
    case DL_IR_OP_EXP:
    case DL_IR_OP_LOG:
    case DL_IR_OP_SQRT:
    case DL_IR_OP_RECIPROCAL:
    case DL_IR_OP_RELU:
    case DL_IR_OP_LEAKY_RELU:
    case DL_IR_OP_SIGMOID:
    case DL_IR_OP_TANH:
    case DL_IR_OP_ERF:
    case DL_IR_OP_GELU:
    case DL_IR_OP_SOFTPLUS:
    case DL_IR_OP_NOT:
        return emit_map(c, out, n->inputs, 1, f_unary);
    case DL_IR_OP_CLIP:
        return lower_clip(c, n);
    case DL_IR_OP_MAX:
    case DL_IR_OP_MIN:
        if (n->n_inputs + 1 > MAX_OPS) {
            cg_error(c, "at most %d inputs are supported, got %zu", MAX_OPS - 1, n->n_inputs);
            return DL_ERR_UNSUPPORTED;
        }
        return emit_map(c, out, n->inputs, n->n_inputs, f_minmax);
    case DL_IR_OP_WHERE:
        return emit_map(c, out, n->inputs, 3, f_where);
    case DL_IR_OP_EQUAL:
    case DL_IR_OP_LESS:
    case DL_IR_OP_GREATER:
    case DL_IR_OP_AND:
    case DL_IR_OP_OR:
        return emit_map(c, out, n->inputs, 2, f_compare);
    case DL_IR_OP_CAST:
        return emit_map(c, out, n->inputs, 1, f_cast);
    case DL_IR_OP_IDENTITY:
        return emit_map(c, out, n->inputs, 1, f_copy);
    case DL_IR_OP_DROPOUT:
        return lower_dropout(c, n);
    default:
        break;
    }
    DL_UNREACHABLE();
}
