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

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPS 16 // outputs + inputs of one map

typedef struct map_args {
    const dl_ir_node *n;
    dl_dtype in_dt[MAX_OPS]; // dtypes of the inputs (compute types follow)
    size_t n_in;
    dl_dtype out_dt;
    const void *user; // per-op data passed through emit_map_ex
} map_args;

typedef LLVMValueRef (*scalar_fn)(cg *c, const map_args *a, LLVMValueRef *in);

// In-place versions. The memory plan may give an elementwise kernel's output the memory of an
// input of the same elements (passes/memplan.c), which the kernel reads at the element it
// writes. The loop vectoriser guards its vector loop with a runtime check that the store and
// each load pointer are far enough apart; equal pointers fail it and the whole loop runs
// scalar (for erf or tanh, slower than libm). So the loop nest is emitted once per input the
// output may share, storing through that input's own pointer (no check to fail), and once for
// separate memory; the kernel picks its version by comparing pointers. inplace_dispatch emits
// the comparisons and returns the entry block of each version (blocks[n_cand]: separate) and
// the block after them; the caller fills each version and branches to `done`.
static void inplace_dispatch(cg *c, const cg_kernel *k, const size_t *cand, size_t n_cand,
                             LLVMBasicBlockRef *blocks, LLVMBasicBlockRef *done) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    for (size_t v = 0; v <= n_cand; v++) {
        blocks[v] = LLVMAppendBasicBlockInContext(c->ctx, fn, v < n_cand ? "inplace" : "sep");
    }
    *done = LLVMAppendBasicBlockInContext(c->ctx, fn, "versions.done");
    for (size_t v = 0; v < n_cand; v++) {
        LLVMBasicBlockRef next =
            v + 1 < n_cand ? LLVMAppendBasicBlockInContext(c->ctx, fn, "") : blocks[n_cand];
        LLVMValueRef same = LLVMBuildICmp(c->b, LLVMIntEQ, k->ptr[0], k->ptr[cand[v]], "");
        LLVMBuildCondBr(c->b, same, blocks[v], next);
        LLVMPositionBuilderAtEnd(c->b, next);
    }
    if (n_cand == 0) {
        LLVMBuildBr(c->b, blocks[0]);
    }
}

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
    // The inputs the output may share: those of its dims and element size (memplan's rule).
    size_t cand[MAX_OPS], n_cand = 0;
    for (size_t q = 0; q < n_in; q++) {
        if (ins[q]->type.rank == ot->rank &&
            dl_dtype_size(ins[q]->type.dtype) == dl_dtype_size(out->type.dtype)) {
            bool same = true;
            for (int32_t j = 0; j < ot->rank; j++) {
                same = same && ins[q]->type.dims[j].value == ot->dims[j].value;
            }
            cand[n_cand] = q + 1;
            n_cand += same;
        }
    }
    LLVMBasicBlockRef blocks[MAX_OPS + 1], done;
    inplace_dispatch(c, &k, cand, n_cand, blocks, &done);
    for (size_t ver = 0; ver <= n_cand; ver++) {
        LLVMPositionBuilderAtEnd(c->b, blocks[ver]);
        LLVMValueRef out_ptr = k.ptr[ver < n_cand ? cand[ver] : 0];
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
        cg_store(c, out_ptr, out->type.dtype, off[0], v);
        for (int32_t j = R - 1; j >= 0; j--) {
            cg_for_end(c, &loops[j]);
        }
        cg_loop_interleave_long(c, &loops[R - 1]);
        LLVMBuildBr(c->b, done);
    }
    LLVMPositionBuilderAtEnd(c->b, done);
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

// dx = dy * f'(x) for UnaryGrad node n (whose attributes the derivative reads), f32 compute.
typedef LLVMValueRef (*deriv_fn)(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x);
// Each scalar of ir_ops.def: its emitter and, for ops whose gradient is UnaryGrad, the
// derivative (beside it, so both change together; conventions: ir/eval_ops.c).
// `vec`: f, given float32 inputs, builds nothing that depends on their being scalars (no scalar
// constant, no scalar intrinsic type), so it also computes a vector of lanes at once
// (dl_cg__fused_values_vec).
typedef struct cg_scalar {
    scalar_fn f;
    deriv_fn df;
    bool vec;
} cg_scalar;
#define SCALAR(name, f, df)   static const cg_scalar s_##name = {f, df, false};
#define SCALAR_V(name, f, df) static const cg_scalar s_##name = {f, df, true};

// The float32 constant v as a value of x's type: a scalar, or a vector of v.
static LLVMValueRef f32_like(cg *c, LLVMValueRef x, double v) {
    LLVMTypeRef t = LLVMTypeOf(x);
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) {
        return cg_f32(c, v);
    }
    LLVMValueRef e[CG_MAX_LANES];
    unsigned n = LLVMGetVectorSize(t);
    DL_ASSERT(n <= CG_MAX_LANES);
    for (unsigned l = 0; l < n; l++) {
        e[l] = cg_f32(c, v);
    }
    return LLVMConstVector(e, n);
}

static LLVMValueRef fmul(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFMul(c->b, a, b, "");
}

static LLVMValueRef fsub(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFSub(c->b, a, b, "");
}

static LLVMValueRef fgt0(cg *c, LLVMValueRef x) {
    return LLVMBuildFCmp(c->b, LLVMRealOGT, x, cg_f32(c, 0), "");
}

static LLVMValueRef f_copy(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)c;
    (void)a;
    return in[0];
}
SCALAR(copy, f_copy, NULL)

static LLVMValueRef f_cast(cg *c, const map_args *a, LLVMValueRef *in) {
    return cg_convert(c, in[0], a->in_dt[0], a->out_dt);
}
SCALAR(cast, f_cast, NULL)

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

static LLVMValueRef f_add(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFAdd(c->b, in[0], in[1], "")
                             : LLVMBuildAdd(c->b, in[0], in[1], "");
}
SCALAR_V(add, f_add, NULL)

static LLVMValueRef f_sub(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFSub(c->b, in[0], in[1], "")
                             : LLVMBuildSub(c->b, in[0], in[1], "");
}
SCALAR_V(sub, f_sub, NULL)

static LLVMValueRef f_mul(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFMul(c->b, in[0], in[1], "")
                             : LLVMBuildMul(c->b, in[0], in[1], "");
}
SCALAR_V(mul, f_mul, NULL)

static LLVMValueRef f_div(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFDiv(c->b, in[0], in[1], "") : int_div(c, in[0], in[1]);
}
SCALAR_V(div, f_div, NULL)

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
SCALAR(pow, f_pow, NULL)

static LLVMValueRef fsel_neg(cg *c, LLVMValueRef x, LLVMValueRef if_neg) {
    LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, f32_like(c, x, 0), "");
    return LLVMBuildSelect(c->b, neg, if_neg, x, "");
}

static LLVMValueRef sigmoid(cg *c, LLVMValueRef x) {
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(c->b, x, ""));
    return LLVMBuildFDiv(c->b, cg_f32(c, 1), LLVMBuildFAdd(c->b, cg_f32(c, 1), e, ""), "");
}

static LLVMValueRef f_neg(cg *c, const map_args *a, LLVMValueRef *in) {
    LLVMValueRef x = in[0];
    return is_f(a->in_dt[0]) ? LLVMBuildFNeg(c->b, x, "")
                             : LLVMBuildSub(c->b, LLVMConstInt(LLVMTypeOf(x), 0, 0), x, "");
}
SCALAR_V(neg, f_neg, NULL)

static LLVMValueRef f_abs(cg *c, const map_args *a, LLVMValueRef *in) {
    LLVMValueRef x = in[0];
    LLVMTypeRef t = LLVMTypeOf(x);
    return is_f(a->in_dt[0]) ? cg_intrinsic1(c, "llvm.fabs", t, x)
                             : cg_intrinsic2(c, "llvm.abs", t, x, LLVMConstInt(c->t_i1, 0, 0));
}

static LLVMValueRef df_abs(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n; // sgn(x) dy with sgn(0) = sgn(NaN) = 0 (PyTorch)
    LLVMValueRef zero = cg_f32(c, 0);
    LLVMValueRef neg = LLVMBuildFCmp(c->b, LLVMRealOLT, x, zero, "");
    LLVMValueRef s = LLVMBuildSelect(c->b, neg, cg_f32(c, -1), zero, "");
    s = LLVMBuildSelect(c->b, fgt0(c, x), cg_f32(c, 1), s, "");
    return fmul(c, dy, s);
}
SCALAR(abs, f_abs, df_abs)

static LLVMValueRef f_exp(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return dl_cg__exp_f32(c, in[0]);
}

static LLVMValueRef df_exp(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    return fmul(c, dy, dl_cg__exp_f32(c, x));
}
SCALAR(exp, f_exp, df_exp)

static LLVMValueRef f_log(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return dl_cg__log_f32(c, in[0]);
}

static LLVMValueRef df_log(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    return LLVMBuildFDiv(c->b, dy, x, "");
}
SCALAR(log, f_log, df_log)

static LLVMValueRef f_sqrt(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return cg_intrinsic1(c, "llvm.sqrt", LLVMTypeOf(in[0]), in[0]);
}

static LLVMValueRef df_sqrt(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    LLVMValueRef s = cg_intrinsic1(c, "llvm.sqrt", c->t_f32, x);
    return LLVMBuildFDiv(c->b, dy, fmul(c, s, cg_f32(c, 2)), "");
}
SCALAR(sqrt, f_sqrt, df_sqrt)

static LLVMValueRef f_reciprocal(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return LLVMBuildFDiv(c->b, cg_f32(c, 1), in[0], "");
}

static LLVMValueRef df_reciprocal(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    return LLVMBuildFDiv(c->b, LLVMBuildFNeg(c->b, dy, ""), fmul(c, x, x), "");
}
SCALAR(reciprocal, f_reciprocal, df_reciprocal)

static LLVMValueRef f_relu(cg *c, const map_args *a, LLVMValueRef *in) {
    LLVMValueRef x = in[0];
    LLVMTypeRef t = LLVMTypeOf(x);
    if (is_f(a->in_dt[0])) { // x < 0 ? +0 : x, as PyTorch: NaN stays NaN, -0 stays -0
        LLVMValueRef zero = f32_like(c, x, 0);
        return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, x, zero, ""), zero, x, "");
    }
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, LLVMConstInt(t, 0, 0), ""),
                           LLVMConstInt(t, 0, 0), x, "");
}

static LLVMValueRef df_relu(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n; // x <= 0 ? 0 : dy: a NaN x passes dy (PyTorch)
    LLVMValueRef le0 = LLVMBuildFCmp(c->b, LLVMRealOLE, x, cg_f32(c, 0), "");
    return LLVMBuildSelect(c->b, le0, cg_f32(c, 0), dy, "");
}
SCALAR_V(relu, f_relu, df_relu)

static LLVMValueRef f_leaky_relu(cg *c, const map_args *a, LLVMValueRef *in) {
    double alpha = dl_ir_node_attr_float(a->n, "alpha");
    return fsel_neg(c, in[0], LLVMBuildFMul(c->b, in[0], f32_like(c, in[0], alpha), ""));
}

static LLVMValueRef df_leaky_relu(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    double alpha = dl_ir_node_attr_float(n, "alpha");
    return LLVMBuildSelect(c->b, fgt0(c, x), dy, fmul(c, dy, cg_f32(c, alpha)), "");
}
SCALAR_V(leaky_relu, f_leaky_relu, df_leaky_relu)

static LLVMValueRef f_sigmoid(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return sigmoid(c, in[0]);
}

static LLVMValueRef df_sigmoid(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    LLVMValueRef s = sigmoid(c, x);
    return fmul(c, dy, fmul(c, s, fsub(c, cg_f32(c, 1), s)));
}
SCALAR(sigmoid, f_sigmoid, df_sigmoid)

static LLVMValueRef f_tanh(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return dl_cg__tanh_f32(c, in[0]);
}

static LLVMValueRef df_tanh(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    LLVMValueRef t = dl_cg__tanh_f32(c, x);
    return fmul(c, dy, fsub(c, cg_f32(c, 1), fmul(c, t, t)));
}
SCALAR(tanh, f_tanh, df_tanh)

static LLVMValueRef f_erf(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return dl_cg__erf_f32(c, in[0]);
}

static LLVMValueRef df_erf(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n; // 2/sqrt(pi) e^(-x^2)
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(c->b, fmul(c, x, x), ""));
    return fmul(c, dy, fmul(c, e, cg_f32(c, 1.12837916709551257390)));
}
SCALAR(erf, f_erf, df_erf)

static LLVMValueRef f_gelu(cg *c, const map_args *a, LLVMValueRef *in) {
    LLVMValueRef x = in[0];
    LLVMValueRef half_x = LLVMBuildFMul(c->b, x, cg_f32(c, 0.5), "");
    LLVMValueRef inner;
    if (strcmp(dl_ir_node_attr_string(a->n, "approximate"), "tanh") == 0) {
        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        LLVMValueRef x3 = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, x, x, ""), x, "");
        LLVMValueRef s =
            LLVMBuildFAdd(c->b, x, LLVMBuildFMul(c->b, x3, cg_f32(c, 0.044715), ""), "");
        s = LLVMBuildFMul(c->b, s, cg_f32(c, 0.79788456080286535588), "");
        inner = dl_cg__tanh_f32(c, s);
    } else {
        // 0.5 x (1 + erf(x / sqrt 2))
        inner = dl_cg__erf_f32(c, LLVMBuildFMul(c->b, x, cg_f32(c, 0.70710678118654752440), ""));
    }
    return LLVMBuildFMul(c->b, half_x, LLVMBuildFAdd(c->b, cg_f32(c, 1), inner, ""), "");
}

static LLVMValueRef df_gelu(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    LLVMValueRef one = cg_f32(c, 1), x2 = fmul(c, x, x), d;
    if (strcmp(dl_ir_node_attr_string(n, "approximate"), "tanh") == 0) {
        // k = sqrt(2/pi), t = tanh(k (x + 0.044715 x^3)):
        // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
        LLVMValueRef k = cg_f32(c, 0.79788456080286535588);
        LLVMValueRef in =
            fmul(c, k, LLVMBuildFAdd(c->b, x, fmul(c, fmul(c, x2, x), cg_f32(c, 0.044715)), ""));
        LLVMValueRef t = dl_cg__tanh_f32(c, in);
        LLVMValueRef a = fmul(c, cg_f32(c, 0.5), LLVMBuildFAdd(c->b, one, t, ""));
        LLVMValueRef b = fmul(c, fmul(c, cg_f32(c, 0.5), x), fsub(c, one, fmul(c, t, t)));
        b = fmul(c, b, k);
        b = fmul(c, b, LLVMBuildFAdd(c->b, one, fmul(c, x2, cg_f32(c, 3.0 * 0.044715)), ""));
        d = LLVMBuildFAdd(c->b, a, b, "");
    } else {
        // Phi(x) + x phi(x), Phi = 0.5 (1 + erf(x / sqrt 2)), phi = e^(-x^2/2) / sqrt(2 pi)
        LLVMValueRef e = dl_cg__erf_f32(c, fmul(c, x, cg_f32(c, 0.70710678118654752440)));
        LLVMValueRef cdf = fmul(c, cg_f32(c, 0.5), LLVMBuildFAdd(c->b, one, e, ""));
        LLVMValueRef pdf = dl_cg__exp_f32(c, fmul(c, x2, cg_f32(c, -0.5)));
        pdf = fmul(c, pdf, cg_f32(c, 0.39894228040143267794));
        d = LLVMBuildFAdd(c->b, cdf, fmul(c, x, pdf), "");
    }
    return fmul(c, dy, d);
}
SCALAR(gelu, f_gelu, df_gelu)

static LLVMValueRef f_softplus(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|.
    LLVMValueRef x = in[0];
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef ax = cg_intrinsic1(c, "llvm.fabs", t, x);
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(c->b, ax, ""));
    LLVMValueRef l = dl_cg__log1p_f32(c, e);
    LLVMValueRef mx = cg_intrinsic2(c, "llvm.maxnum", t, x, cg_f32(c, 0));
    return LLVMBuildFAdd(c->b, mx, l, "");
}

static LLVMValueRef df_softplus(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    return fmul(c, dy, sigmoid(c, x));
}
SCALAR(softplus, f_softplus, df_softplus)

// HardSwish: x * min(max(x + 3, 0), 6) / 6 with ordered compares, so a NaN x stays NaN; the
// derivative selects 0 / (x / 3 + 1/2) dy / dy (a NaN x passes dy). ir/eval_ops.c has the rule.
static LLVMValueRef f_hard_swish(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    LLVMValueRef x = in[0], zero = cg_f32(c, 0), six = cg_f32(c, 6);
    LLVMValueRef r = LLVMBuildFAdd(c->b, x, cg_f32(c, 3), "");
    r = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, r, zero, ""), zero, r, "");
    r = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, r, six, ""), six, r, "");
    return LLVMBuildFDiv(c->b, fmul(c, x, r), six, "");
}
static LLVMValueRef df_hard_swish(cg *c, const dl_ir_node *n, LLVMValueRef dy, LLVMValueRef x) {
    (void)n;
    LLVMValueRef mid =
        LLVMBuildFAdd(c->b, LLVMBuildFDiv(c->b, x, cg_f32(c, 3), ""), cg_f32(c, 0.5), "");
    LLVMValueRef g = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLE, x, cg_f32(c, 3), ""),
                                     fmul(c, dy, mid), dy, "");
    return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, x, cg_f32(c, -3), ""),
                           cg_f32(c, 0), g, "");
}
SCALAR(hard_swish, f_hard_swish, df_hard_swish)

static LLVMValueRef f_not(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return LLVMBuildNot(c->b, in[0], "");
}
SCALAR(not, f_not, NULL)

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

static LLVMValueRef fold_minmax(cg *c, const map_args *a, LLVMValueRef *in, bool is_max) {
    LLVMValueRef v = in[0];
    for (size_t i = 1; i < a->n_in; i++) {
        v = fmax2(c, is_f(a->in_dt[0]), is_max, v, in[i]);
    }
    return v;
}

static LLVMValueRef f_max(cg *c, const map_args *a, LLVMValueRef *in) {
    return fold_minmax(c, a, in, true);
}
SCALAR(max, f_max, NULL)

static LLVMValueRef f_min(cg *c, const map_args *a, LLVMValueRef *in) {
    return fold_minmax(c, a, in, false);
}
SCALAR(min, f_min, NULL)

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
SCALAR(where, f_where, NULL)

static LLVMValueRef f_equal(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFCmp(c->b, LLVMRealOEQ, in[0], in[1], "")
                             : LLVMBuildICmp(c->b, LLVMIntEQ, in[0], in[1], "");
}
SCALAR(equal, f_equal, NULL)

static LLVMValueRef f_less(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFCmp(c->b, LLVMRealOLT, in[0], in[1], "")
                             : LLVMBuildICmp(c->b, LLVMIntSLT, in[0], in[1], "");
}
SCALAR(less, f_less, NULL)

static LLVMValueRef f_greater(cg *c, const map_args *a, LLVMValueRef *in) {
    return is_f(a->in_dt[0]) ? LLVMBuildFCmp(c->b, LLVMRealOGT, in[0], in[1], "")
                             : LLVMBuildICmp(c->b, LLVMIntSGT, in[0], in[1], "");
}
SCALAR(greater, f_greater, NULL)

static LLVMValueRef f_and(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return LLVMBuildAnd(c->b, in[0], in[1], "");
}
SCALAR(and, f_and, NULL)

static LLVMValueRef f_or(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    return LLVMBuildOr(c->b, in[0], in[1], "");
}
SCALAR(or, f_or, NULL)

static LLVMValueRef f_true(cg *c, const map_args *a, LLVMValueRef *in) {
    (void)a;
    (void)in;
    return LLVMConstInt(c->t_i1, 1, 0);
}

// ---------------------------------------------------------------------------------------------

dl_status dl_cg__lower_clip(cg *c, const dl_ir_node *n) {
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

dl_status dl_cg__lower_dropout(cg *c, const dl_ir_node *n) {
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

// ---------------------------------------------------------------------------------------------
// The scalar column of ir/ir_ops.def: f_<scalar> for each op lowered by dl_cg__lower_map.

static const cg_scalar s_none = {NULL, NULL, false};
static const cg_scalar *const scalars[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, gr, lo, sc)                                                                      \
    [DL_IR_OP_##e] = &s_##sc,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(scalars) == DL_IR_OP_COUNT, "one scalar entry per op");

dl_status dl_cg__lower_map(cg *c, const dl_ir_node *n) {
    scalar_fn f = scalars[n->op]->f;
    DL_ASSERT(f != NULL); // tests/ir checks that every `map` op has a scalar
    if (n->n_inputs + 1 > MAX_OPS) {
        cg_error(c, "at most %d inputs are supported, got %zu", MAX_OPS - 1, n->n_inputs);
        return DL_ERR_UNSUPPORTED;
    }
    return emit_map(c, n->outputs[0], n->inputs, n->n_inputs, f);
}

// UnaryGrad <op> (dy, x) -> dx, all [numel] (one element count), flat: dx = dy * op'(x) with the
// derivative beside op's scalar above.
static bool need_float(cg *c, const dl_ir_value *v, const char *what) {
    if (!dl_dtype_is_float(v->type.dtype)) {
        cg_error(c, "%s must be a float type, got %s", what, dl_dtype_name(v->type.dtype));
        return false;
    }
    return true;
}

dl_status dl_cg__lower_unary_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dx = n->outputs[0], *dy = n->inputs[0], *x = n->inputs[1];
    if (!need_float(c, x, "x") || !need_float(c, dy, "dy") || !need_float(c, dx, "dx") ||
        dl_ir_type_numel(&dy->type) != dl_ir_type_numel(&x->type)) {
        return DL_ERR_UNSUPPORTED;
    }
    dl_ir_op op = dl_ir_node_unary_grad_op(n);
    deriv_fn df = op < DL_IR_OP_COUNT ? scalars[op]->df : NULL;
    if (!df) {
        cg_error(c, "UnaryGrad of %s is not supported", dl_ir_node_attr_string(n, "op"));
        return DL_ERR_UNSUPPORTED;
    }
    int64_t numel = dl_ir_type_numel(&x->type);
    if (numel == 0) {
        return DL_OK;
    }
    dl_ir_value *vals[3] = {dx, dy, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, numel, &k));
    // dx may take the memory of dy or x (a flat in-place candidate of the same element size).
    size_t cand[2], n_cand = 0;
    for (size_t q = 1; q <= 2; q++) {
        cand[n_cand] = q;
        n_cand += dl_dtype_size(vals[q]->type.dtype) == dl_dtype_size(dx->type.dtype);
    }
    LLVMBasicBlockRef blocks[3], done;
    inplace_dispatch(c, &k, cand, n_cand, blocks, &done);
    for (size_t ver = 0; ver <= n_cand; ver++) {
        LLVMPositionBuilderAtEnd(c->b, blocks[ver]);
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, k.begin, k.end, "i");
        LLVMValueRef vdy = cg_load(c, k.ptr[1], dy->type.dtype, i);
        LLVMValueRef vx = cg_load(c, k.ptr[2], x->type.dtype, i);
        LLVMValueRef out_ptr = k.ptr[ver < n_cand ? cand[ver] : 0];
        cg_store(c, out_ptr, dx->type.dtype, i, df(c, n, vdy, vx));
        cg_for_end(c, &l);
        cg_loop_interleave_long(c, &l);
        LLVMBuildBr(c->b, done);
    }
    LLVMPositionBuilderAtEnd(c->b, done);
    return cg_kernel_end(c, &k);
}

// Computes members g[first..n) of a fusion group at one element, in order, into val[]: an input
// made in the group is its val[] entry (val[0 .. first) given by the caller: a product whose
// epilogue the group is), any other is its entry of xin (parallel to ext). Returns val[n - 1].
LLVMValueRef dl_cg__fused_values(cg *c, const dl_ir_node *const *g, size_t n, size_t first,
                                 LLVMValueRef *val, dl_ir_value *const *ext,
                                 const LLVMValueRef *xin, size_t n_ext) {
    for (size_t i = first; i < n; i++) {
        const dl_ir_node *x = g[i];
        map_args a = {x, {0}, x->n_inputs, x->outputs[0]->type.dtype, NULL};
        LLVMValueRef in[MAX_OPS];
        DL_ASSERT(x->n_inputs <= MAX_OPS);
        for (size_t q = 0; q < x->n_inputs; q++) {
            dl_ir_value *v = x->inputs[q];
            a.in_dt[q] = v->type.dtype;
            size_t gi = 0;
            while (gi < n && v->def != g[gi]) {
                gi++;
            }
            if (gi < n) {
                in[q] = val[gi];
                continue;
            }
            for (size_t e = 0; e < n_ext; e++) {
                if (ext[e] == v) {
                    in[q] = xin[e];
                }
            }
        }
        if (x->op == DL_IR_OP_UNARY_GRAD) {
            dl_ir_op op = dl_ir_node_unary_grad_op(x);
            val[i] = scalars[op]->df(c, x, in[0], in[1]);
        } else {
            val[i] = scalars[x->op]->f(c, &a, in);
        }
    }
    return val[n - 1];
}

#define FUSED_VEC_MAX_EXT 16
// dl_cg__fused_values on vectors: val[0 .. first) are float32 vectors of one type, xin vectors
// of that type or scalars (each broadcast to every lane). NULL, having built nothing, unless every
// member computes float32 from float32 through a `vec` emitter; then the same values lane by lane
// as the scalar members would give (the same operations, in the same order).
LLVMValueRef dl_cg__fused_values_vec(cg *c, const dl_ir_node *const *g, size_t n, size_t first,
                                     LLVMValueRef *val, dl_ir_value *const *ext,
                                     const LLVMValueRef *xin, size_t n_ext) {
    for (size_t i = first; i < n; i++) {
        const dl_ir_node *x = g[i];
        if (x->op == DL_IR_OP_UNARY_GRAD || !scalars[x->op]->vec || x->n_inputs > MAX_OPS ||
            x->outputs[0]->type.dtype != DL_DT_FLOAT) {
            return NULL;
        }
        for (size_t q = 0; q < x->n_inputs; q++) {
            if (x->inputs[q]->type.dtype != DL_DT_FLOAT) {
                return NULL;
            }
        }
    }
    LLVMValueRef xv[FUSED_VEC_MAX_EXT];
    if (n_ext > FUSED_VEC_MAX_EXT) {
        return NULL;
    }
    for (size_t e = 0; e < n_ext; e++) {
        LLVMTypeRef vt = LLVMTypeOf(val[0]);
        if (LLVMGetTypeKind(LLVMTypeOf(xin[e])) == LLVMVectorTypeKind) {
            xv[e] = xin[e]; // already one value per lane
            continue;
        }
        LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), xin[e], cg_i32(c, 0), "");
        xv[e] = LLVMBuildShuffleVector(
            c->b, v, LLVMGetUndef(vt),
            LLVMConstNull(LLVMVectorType(c->t_i32, LLVMGetVectorSize(vt))), "");
    }
    return dl_cg__fused_values(c, g, n, first, val, ext, xv, n_ext);
}

// Whether fusion-group member x (not a product) can be computed by dl_cg__fused_values; if
// not, an error naming it.
bool dl_cg__fusible_member(cg *c, const dl_ir_node *x) {
    bool ok = x->op == DL_IR_OP_UNARY_GRAD ? dl_ir_node_unary_grad_op(x) < DL_IR_OP_COUNT &&
                                                 scalars[dl_ir_node_unary_grad_op(x)]->df
                                           : scalars[x->op]->f != NULL;
    if (!ok || x->n_inputs > MAX_OPS) {
        cg_error(c, "%s '%s' cannot be computed in a fused kernel", dl_ir_op_get_info(x->op)->name,
                 x->outputs[0]->name);
        return false;
    }
    return true;
}

// Adds the values v[0 .. nv) not yet in ext[0 .. *n_ext) (at most `max` in all).
static dl_status ext_merge(cg *c, dl_ir_value **ext, size_t *n_ext, size_t max,
                           dl_ir_value *const *v, size_t nv) {
    for (size_t i = 0; i < nv; i++) {
        bool seen = false;
        for (size_t e = 0; e < *n_ext && !seen; e++) {
            seen = ext[e] == v[i];
        }
        if (seen) {
            continue;
        }
        if (*n_ext >= max) {
            cg_error(c, "a fused kernel reads at most %zu values", max);
            return DL_ERR_UNSUPPORTED;
        }
        ext[(*n_ext)++] = v[i];
    }
    return DL_OK;
}

// The values members g[first..n) of a fusion group read that no group node makes, each once,
// into ext[0 .. *n_ext) (at most `max`); every member checked by dl_cg__fusible_member.
dl_status dl_cg__fused_inputs(cg *c, const dl_ir_node *const *g, size_t n, size_t first,
                              dl_ir_value **ext, size_t max, size_t *n_ext) {
    *n_ext = 0;
    for (size_t i = first; i < n; i++) {
        if (!dl_cg__fusible_member(c, g[i])) {
            return DL_ERR_UNSUPPORTED;
        }
        for (size_t a = 0; a < g[i]->n_inputs; a++) {
            dl_ir_value *v = g[i]->inputs[a];
            bool made = false;
            for (size_t q = 0; q < n && !made; q++) {
                made = v->def == g[q];
            }
            if (!made) {
                DL_TRY(ext_merge(c, ext, n_ext, max, &v, 1));
            }
        }
    }
    return DL_OK;
}

// A fusion group (passes/fusion.c): g[0..n) in topological order, g[n - 1] the root, every
// member's one output of the root's dims and used only inside the group. One map nest over the
// root's output: each external input is loaded once at its (broadcast) offset, each member's
// scalar function (or UnaryGrad's derivative) is applied in order to values held in registers,
// and only the root's output is stored. Member values compute in their storage type (the pass
// fuses no float16 / bfloat16 value), so the bytes are those of the unfused kernels.
//
// The scalar function of a fused map: `in` holds the group's outside values (fused_map.ext's
// order), the result is the root's value.
typedef struct fused_map {
    const dl_ir_node *const *g;
    size_t n;
    dl_ir_value *const *ext;
    size_t n_ext;
    LLVMValueRef *val; // n entries
} fused_map;

static LLVMValueRef f_fused(cg *c, const map_args *a, LLVMValueRef *in) {
    const fused_map *fm = a->user;
    return dl_cg__fused_values(c, fm->g, fm->n, 0, fm->val, fm->ext, in, fm->n_ext);
}

// The row node of a row group (passes/fusion.c, dl_pass_fusion_is_row_node).
typedef enum row_kind { ROW_NONE, ROW_SUM, ROW_SOFTMAX, ROW_LOG_SOFTMAX, ROW_LAYER_NORM } row_kind;

static row_kind row_kind_of(const dl_ir_node *n) {
    return n->op == DL_IR_OP_REDUCE_SUM || n->op == DL_IR_OP_REDUCE_MEAN ? ROW_SUM
           : n->op == DL_IR_OP_SOFTMAX                                   ? ROW_SOFTMAX
           : n->op == DL_IR_OP_LOG_SOFTMAX                               ? ROW_LOG_SOFTMAX
           : n->op == DL_IR_OP_LAYER_NORMALIZATION                       ? ROW_LAYER_NORM
                                                                         : ROW_NONE;
}

// Index of v in ext[0..n) (n when absent).
static size_t ext_index(dl_ir_value *const *ext, size_t n, const dl_ir_value *v) {
    size_t i = 0;
    while (i < n && ext[i] != v) {
        i++;
    }
    return i;
}

// A fusion group around a row node g[ri] (passes/fusion.c, dl_pass_fusion_is_row_node: ReduceSum
// or ReduceMean over the last axis, keepdims; Softmax, LogSoftmax or LayerNormalization over the
// last axis; float32, dims D = [rows, L] flattened). The members it depends on (P) compute at its
// input's elements; the others (Q) read its result: a reduction's broadcast along the row, a row
// operation's at their own element. One kernel over the rows (its parallel range); per row, the
// passes over the row's L elements recompute P at each element (from L1 or L2 after the first):
//   reduction: pass 1 sums P's value in f32 (reassociation allowed on that add only, as
//     codegen's ReduceSum: a vectorised sum whose order depends on L alone, so any split of the
//     rows gives the same bytes), ReduceMean divides by L; pass 2 computes Q with that result
//     and stores the root (a root that is the reduction stores the result after pass 1);
//   Softmax / LogSoftmax (the standalone kernel's formulas, x86_reduce.c): pass 1 the max m,
//     pass 2 s = sum exp(x - m), pass 3 y = exp(x - m) * (1 / s) or (x - m) - log(s), then Q;
//     Softmax's pass 2 keeps exp(x - m) in the output row when the output is float32 and shares
//     no input's memory, and pass 3 rescales it;
//   LayerNormalization (x86_nn.c's formulas): pass 1 the mean, pass 2 the biased variance of
//     x - mean, pass 3 y = (x - mean) * (1 / sqrt(var + epsilon)) * scale + bias, then Q.
// The sums' order is the fused loop's own, so the bytes may differ in the last bits from the
// unfused kernels'. The output may share the memory of an input of its dims (the memory plan's
// elementwise rule: only the last pass writes, and it reads each element where it writes it);
// as emit_map_ex, one version of the loops per such input.
static dl_status lower_row_fused(cg *c, const dl_ir_node *const *g, size_t n, size_t ri) {
    const dl_ir_node *rr = g[ri];
    row_kind kind = row_kind_of(rr);
    const dl_ir_type *dt = &rr->inputs[0]->type;
    int32_t rank = dt->rank;
    int64_t L = dt->dims[rank - 1].value, rows = dl_ir_type_numel(dt) / L;
    dl_ir_value *out = g[n - 1]->outputs[0];
    bool root_rr = kind == ROW_SUM && ri == n - 1; // the group stores the reduction's result
    const dl_ir_node **pl = dl_mem_calloc(2 * n + 1, sizeof *pl);
    bool *isp = dl_mem_calloc(n, sizeof *isp);
    LLVMValueRef *pv = dl_mem_calloc(2 * n + 1, sizeof *pv);
    if (!pl || !isp || !pv) {
        free(pl);
        free(isp);
        free(pv);
        return DL_ERR_NOMEM;
    }
    const dl_ir_node **ql = pl + n; // P's members, then the row node and Q's
    LLVMValueRef *qv = pv + n;      // their values at one element
    // P: the members whose value the row node reads, directly or through other P members.
    for (size_t i = ri; i-- > 0;) {
        for (size_t j = i + 1; j <= ri && !isp[i]; j++) {
            for (size_t a = 0; (j == ri || isp[j]) && a < g[j]->n_inputs; a++) {
                isp[i] = isp[i] || g[j]->inputs[a] == g[i]->outputs[0];
            }
        }
    }
    size_t np = 0, nq = 1;
    ql[0] = rr;
    for (size_t i = 0; i < n; i++) {
        if (isp[i]) {
            pl[np++] = g[i];
        } else if (i != ri) {
            ql[nq++] = g[i];
        }
    }
    // The values read from outside: the P members', the row node's input when no P member
    // makes it, a LayerNormalization's scale and bias, the Q members'.
    dl_ir_value *ext[MAX_OPS], *part[MAX_OPS];
    size_t n_ext = 0, n_part = 0;
    size_t max = MAX_OPS - 1;
    dl_status st = dl_cg__fused_inputs(c, pl, np, 0, ext, max, &n_ext);
    if (st == DL_OK && np == 0) {
        st = ext_merge(c, ext, &n_ext, max, &rr->inputs[0], 1);
    }
    if (st == DL_OK && kind == ROW_LAYER_NORM) {
        st = ext_merge(c, ext, &n_ext, max, &rr->inputs[1],
                       rr->n_inputs > 2 && rr->inputs[2] ? 2 : 1);
    }
    if (st == DL_OK) {
        st = dl_cg__fused_inputs(c, ql, nq, 1, part, max, &n_part);
    }
    if (st == DL_OK) {
        st = ext_merge(c, ext, &n_ext, max, part, n_part);
    }
    if (st != DL_OK) {
        free(pl);
        free(isp);
        free(pv);
        return st;
    }
    size_t r_in = ext_index(ext, n_ext, rr->inputs[0]); // without P, the row node's input
    DL_ASSERT(np > 0 || r_in < n_ext);
    size_t r_sc = n_ext, r_bi = n_ext; // a LayerNormalization's scale and bias
    if (kind == ROW_LAYER_NORM) {
        r_sc = ext_index(ext, n_ext, rr->inputs[1]);
        r_bi = rr->n_inputs > 2 && rr->inputs[2] ? ext_index(ext, n_ext, rr->inputs[2]) : n_ext;
    }
    // Element strides over D (0 on broadcast dims).
    int64_t est[MAX_OPS][DL_MAX_RANK];
    for (size_t e = 0; e < n_ext; e++) {
        cg_broadcast_strides(&ext[e]->type, dt, est[e]);
    }
    dl_ir_value *vals[MAX_OPS];
    vals[0] = out;
    memcpy(vals + 1, ext, n_ext * sizeof *ext);
    cg_kernel k;
    st = cg_kernel_begin(c, vals, n_ext + 1, rows, &k);
    if (st != DL_OK) {
        free(pl);
        free(isp);
        free(pv);
        return st;
    }
    LLVMTypeRef f32 = c->t_f32;
    LLVMValueRef acc = cg_entry_alloca(c, &k, f32, 1);
    size_t cand[MAX_OPS], n_cand = 0;
    for (size_t e = 0; !root_rr && e < n_ext; e++) {
        cand[n_cand] = e + 1;
        n_cand += dl_ir_type_same_dims(&ext[e]->type, &out->type) &&
                  dl_dtype_size(ext[e]->type.dtype) == dl_dtype_size(out->type.dtype);
    }
    int passes = kind == ROW_SUM ? (root_rr ? 1 : 2) : 3;
    LLVMBasicBlockRef blocks[MAX_OPS + 1], done;
    inplace_dispatch(c, &k, cand, n_cand, blocks, &done);
    for (size_t ver = 0; ver <= n_cand; ver++) {
        LLVMPositionBuilderAtEnd(c->b, blocks[ver]);
        LLVMValueRef out_ptr = k.ptr[ver < n_cand ? cand[ver] : 0];
        // Softmax keeps exp(x - m) in its float32 output row, unless the row is an input's.
        bool keep_e = kind == ROW_SOFTMAX && ver == n_cand && out->type.dtype == DL_DT_FLOAT;
        cg_loop lr, lj;
        LLVMValueRef r = cg_for_begin(c, &lr, k.begin, k.end, "row");
        // Each input's offset of the row's first element: r's index over D's leading dims.
        LLVMValueRef base[MAX_OPS], rem = r;
        for (size_t e = 0; e < n_ext; e++) {
            base[e] = cg_i64(c, 0);
        }
        for (int32_t d = rank - 2; d >= 0; d--) {
            int64_t ext_d = dt->dims[d].value;
            if (ext_d == 1) {
                continue;
            }
            LLVMValueRef idx = LLVMBuildURem(c->b, rem, cg_i64(c, ext_d), "");
            rem = LLVMBuildUDiv(c->b, rem, cg_i64(c, ext_d), "");
            for (size_t e = 0; e < n_ext; e++) {
                if (est[e][d] != 0) {
                    base[e] = LLVMBuildAdd(c->b, base[e],
                                           LLVMBuildMul(c->b, idx, cg_i64(c, est[e][d]), ""), "");
                }
            }
        }
        // s1: the row's first statistic (sum, mean or max), s2: the second (1 / s, log(s) or
        // 1 / sqrt(var + epsilon)).
        LLVMValueRef s1 = NULL, s2 = NULL;
        for (int pass = 0; pass < passes; pass++) {
            bool last = pass == passes - 1;
            LLVMBuildStore(c->b,
                           cg_f32(c, kind == ROW_SOFTMAX || kind == ROW_LOG_SOFTMAX
                                         ? (pass == 0 ? -INFINITY : 0.0)
                                         : 0.0),
                           acc);
            LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, L), "j");
            LLVMValueRef xin[MAX_OPS];
            for (size_t e = 0; e < n_ext; e++) {
                int64_t sl = est[e][rank - 1];
                LLVMValueRef off =
                    sl == 0
                        ? base[e]
                        : LLVMBuildAdd(c->b, base[e],
                                       sl == 1 ? j : LLVMBuildMul(c->b, j, cg_i64(c, sl), ""), "");
                xin[e] = cg_load(c, k.ptr[e + 1], ext[e]->type.dtype, off);
            }
            LLVMValueRef idx = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, r, cg_i64(c, L), ""), j, "");
            // P's last member is the one the row node reads (P is a tree below it); with no P
            // the row node reads an input. Unused in Softmax's rescaling pass (and dropped).
            LLVMValueRef x =
                np ? dl_cg__fused_values(c, pl, np, 0, pv, ext, xin, n_ext) : xin[r_in];
            LLVMValueRef a = LLVMBuildLoad2(c->b, f32, acc, "");
            if (pass == 0) { // a sum or the max (a reduction as the root: its only pass)
                bool is_max = kind == ROW_SOFTMAX || kind == ROW_LOG_SOFTMAX;
                LLVMBuildStore(c->b,
                               is_max ? cg_intrinsic2(c, "llvm.maximum", f32, a, x)
                                      : cg_fadd_reassoc(c, a, x),
                               acc);
            } else if (!last) {
                LLVMValueRef d = LLVMBuildFSub(c->b, x, s1, "");
                LLVMValueRef t =
                    kind == ROW_LAYER_NORM ? LLVMBuildFMul(c->b, d, d, "") : dl_cg__exp_f32(c, d);
                if (keep_e) {
                    cg_store(c, out_ptr, DL_DT_FLOAT, idx, t);
                }
                LLVMBuildStore(c->b, cg_fadd_reassoc(c, a, t), acc);
            } else {
                LLVMValueRef y = s1; // the reduction's result
                if (kind == ROW_SOFTMAX) {
                    LLVMValueRef e = keep_e ? cg_load(c, out_ptr, DL_DT_FLOAT, idx)
                                            : dl_cg__exp_f32(c, LLVMBuildFSub(c->b, x, s1, ""));
                    y = LLVMBuildFMul(c->b, e, s2, "");
                } else if (kind == ROW_LOG_SOFTMAX) {
                    y = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, x, s1, ""), s2, "");
                } else if (kind == ROW_LAYER_NORM) {
                    y = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, x, s1, ""), s2, "");
                    y = LLVMBuildFMul(c->b, y, xin[r_sc], "");
                    if (r_bi < n_ext) {
                        y = LLVMBuildFAdd(c->b, y, xin[r_bi], "");
                    }
                }
                qv[0] = y;
                cg_store(c, out_ptr, out->type.dtype, idx,
                         dl_cg__fused_values(c, ql, nq, 1, qv, ext, xin, n_ext));
            }
            cg_for_end(c, &lj);
            LLVMValueRef a_row = LLVMBuildLoad2(c->b, f32, acc, "");
            LLVMValueRef fl = cg_f32(c, (double)L);
            if (pass == 0) {
                s1 = a_row;
                if (rr->op == DL_IR_OP_REDUCE_MEAN || kind == ROW_LAYER_NORM) {
                    s1 = LLVMBuildFDiv(c->b, s1, fl, "");
                }
                if (root_rr) {
                    cg_store(c, out_ptr, DL_DT_FLOAT, r, s1);
                }
            } else if (!last) {
                if (kind == ROW_SOFTMAX) {
                    s2 = LLVMBuildFDiv(c->b, cg_f32(c, 1), a_row, "");
                } else if (kind == ROW_LOG_SOFTMAX) {
                    s2 = cg_intrinsic1(c, "llvm.log", f32, a_row);
                } else {
                    LLVMValueRef var = LLVMBuildFDiv(c->b, a_row, fl, "");
                    LLVMValueRef eps = cg_f32(c, dl_ir_node_attr_float(rr, "epsilon"));
                    LLVMValueRef sd =
                        cg_intrinsic1(c, "llvm.sqrt", f32, LLVMBuildFAdd(c->b, var, eps, ""));
                    s2 = LLVMBuildFDiv(c->b, cg_f32(c, 1), sd, "");
                }
            }
        }
        cg_for_end(c, &lr);
        LLVMBuildBr(c->b, done);
    }
    LLVMPositionBuilderAtEnd(c->b, done);
    free(pl);
    free(isp);
    free(pv);
    return cg_kernel_end(c, &k);
}

dl_status dl_cg__lower_fused(cg *c, const dl_ir_node *const *g, size_t n) {
    DL_ASSERT(n >= 2);
    for (size_t i = 0; i < n; i++) {
        if (row_kind_of(g[i]) != ROW_NONE) { // the pass admits only row nodes of its rules
            return lower_row_fused(c, g, n, i);
        }
    }
    dl_ir_value *out = g[n - 1]->outputs[0];
    dl_ir_value *ext[MAX_OPS];
    size_t n_ext = 0;
    DL_TRY(dl_cg__fused_inputs(c, g, n, 0, ext, MAX_OPS - 1, &n_ext));
    LLVMValueRef *val = dl_mem_calloc(n, sizeof *val); // member i's result
    if (!val) {
        return DL_ERR_NOMEM;
    }
    // One map over the root's output whose scalar function is the whole group (emitted once per
    // in-place version of the loop nest).
    fused_map fm = {g, n, ext, n_ext, val};
    dl_status st = emit_map_ex(c, out, ext, n_ext, f_fused, &fm);
    free(val);
    return st;
}
