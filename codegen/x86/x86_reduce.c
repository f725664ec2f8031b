// codegen/x86/x86_reduce.c — lowering of: ReduceSum ReduceMean ReduceMax ReduceMin ArgMax Softmax
// LogSoftmax.
//
// Every op here reduces along some axes. The input is viewed (without moving data) as
// (kept dims) x (reduced dims): size-1 dims are dropped and neighbours of the same kind merged,
// which leaves alternating groups such as [K0, R0, K1, R1]. One outer parallel iteration owns
// whole reductions, so any split of the range gives the same bytes:
//   - last group reduced: one iteration per output element; the innermost loop runs over the
//     contiguous reduced elements (a vectorisable f32 / integer reduction);
//   - last group kept (size L): one iteration per (other kept index, chunk of up to LANES
//     elements of L); per-lane accumulators live in a small stack array and the innermost
//     loop runs over the contiguous lanes, so it vectorises across output elements.
// ArgMax, Softmax and LogSoftmax use the same frame with x viewed as [outer, len, inner].
//
// Float sums accumulate in f32 (reassociation allowed on the accumulating add only, which
// lets LLVM vectorise; the order depends only on static shapes, never on the range split).
// Max/Min propagate NaN like the evaluator. Empty reductions give sum 0, mean NaN (int: 0),
// max -inf / min +inf (int: the type's min / max, where the evaluator would saturate or wrap).
// ArgMax compares exactly as the evaluator (v > best, or v == best with select_last_index;
// NaN is the maximum, as in torch.argmax: the first NaN wins, the last one with
// select_last_index); an empty axis gives index 0 where the evaluator errors.
#include "cg_internal.h"

#include <math.h>
#include <string.h>

// Lanes (output elements) handled by one outer iteration when the kept innermost dim is
// contiguous: 64 f32 accumulators = 256 bytes of stack, four AVX-512 vectors.
#define LANES 64

// ---------------------------------------------------------------------------------------------
// Helpers

// An array of n elements of type t on the kernel's stack (in the entry block, so that SROA /
// mem2reg can promote it).
static LLVMValueRef arr_ptr(cg *c, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef j) {
    return LLVMBuildInBoundsGEP2(c->b, t, arr, &j, 1, "");
}

static LLVMValueRef arr_get(cg *c, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef j) {
    return LLVMBuildLoad2(c->b, t, arr_ptr(c, t, arr, j), "");
}

static void arr_set(cg *c, LLVMTypeRef t, LLVMValueRef arr, LLVMValueRef j, LLVMValueRef v) {
    LLVMBuildStore(c->b, v, arr_ptr(c, t, arr, j));
}

// a + b, with reassociation allowed so that LLVM may vectorise a float sum.
static LLVMValueRef mul_i64(cg *c, LLVMValueRef a, int64_t b) {
    return b == 1 ? a : LLVMBuildMul(c->b, a, cg_i64(c, b), "");
}

// ---------------------------------------------------------------------------------------------
// The frame: a kernel over `rows` x ceil(L / T) outer iterations. Iteration o owns row
// o / chunks and lanes [j0, j0 + nj) of a contiguous dim of extent L. With T == 1 (no lane
// dim) j0 and the lane index are the constant 0 and no lane loop is emitted.

typedef struct frame {
    cg_kernel k;
    int64_t rows, L, T, chunks;
    cg_loop outer;
    LLVMValueRef row, j0, nj; // i64
} frame;

static dl_status frame_begin(cg *c, frame *f, dl_ir_value *const *vals, size_t n_vals, int64_t rows,
                             int64_t L) {
    f->rows = rows;
    f->L = L;
    f->T = L <= 1 ? 1 : (L < LANES ? L : LANES);
    f->chunks = L <= 1 ? 1 : (L + f->T - 1) / f->T;
    DL_TRY(cg_kernel_begin(c, vals, n_vals, rows * f->chunks, &f->k));
    LLVMValueRef o = cg_for_begin(c, &f->outer, f->k.begin, f->k.end, "o");
    if (f->chunks == 1) {
        f->row = o;
        f->j0 = cg_i64(c, 0);
    } else {
        LLVMValueRef ch = cg_i64(c, f->chunks);
        f->row = LLVMBuildSDiv(c->b, o, ch, "row");
        f->j0 = mul_i64(c, LLVMBuildSRem(c->b, o, ch, ""), f->T);
    }
    if (f->T == 1 || f->L % f->T == 0) {
        f->nj = cg_i64(c, f->T);
    } else {
        LLVMValueRef rest = LLVMBuildSub(c->b, cg_i64(c, f->L), f->j0, "");
        f->nj = cg_intrinsic2(c, "llvm.smin", c->t_i64, rest, cg_i64(c, f->T));
    }
    return DL_OK;
}

static dl_status frame_end(cg *c, frame *f) {
    cg_for_end(c, &f->outer);
    return cg_kernel_end(c, &f->k);
}

// Opens the lane loop (j in [0, nj)); returns j. No loop when T == 1.
static LLVMValueRef lanes_begin(cg *c, const frame *f, cg_loop *l) {
    if (f->T == 1) {
        return cg_i64(c, 0);
    }
    return cg_for_begin(c, l, cg_i64(c, 0), f->nj, "j");
}

static void lanes_end(cg *c, const frame *f, cg_loop *l) {
    if (f->T > 1) {
        cg_for_end(c, l);
    }
}

// ---------------------------------------------------------------------------------------------
// Reduce{Sum,Mean,Max,Min}

typedef enum rkind { RK_SUM, RK_MAX, RK_MIN } rkind;

static LLVMValueRef red_init(cg *c, rkind rk, dl_dtype dt) {
    bool fl = dl_dtype_is_float(dt);
    if (rk == RK_SUM) {
        return cg_const(c, dt, 0);
    }
    if (fl) {
        return cg_f32(c, rk == RK_MAX ? -INFINITY : INFINITY);
    }
    if (dt == DL_DT_INT32) {
        return cg_i32(c, rk == RK_MAX ? INT32_MIN : INT32_MAX);
    }
    return cg_i64(c, rk == RK_MAX ? INT64_MIN : INT64_MAX);
}

static LLVMValueRef red_combine(cg *c, rkind rk, dl_dtype dt, LLVMValueRef acc, LLVMValueRef v) {
    bool fl = dl_dtype_is_float(dt);
    LLVMTypeRef t = LLVMTypeOf(acc);
    switch (rk) {
    case RK_SUM:
        return fl ? cg_fadd_reassoc(c, acc, v) : LLVMBuildAdd(c->b, acc, v, "");
    case RK_MAX: // NaN-propagating for floats, as the evaluator
        return cg_intrinsic2(c, fl ? "llvm.maximum" : "llvm.smax", t, acc, v);
    case RK_MIN:
        return cg_intrinsic2(c, fl ? "llvm.minimum" : "llvm.smin", t, acc, v);
    }
    DL_UNREACHABLE();
}

// Mean: sum / count (float: 0/0 = NaN for an empty reduction; int: truncating, 0 if empty).
static LLVMValueRef red_finish(cg *c, const dl_ir_node *n, dl_dtype dt, int64_t count,
                               LLVMValueRef acc) {
    if (n->op != DL_IR_OP_REDUCE_MEAN) {
        return acc;
    }
    if (dl_dtype_is_float(dt)) {
        return LLVMBuildFDiv(c->b, acc, cg_f32(c, (double)count), "");
    }
    if (count == 0) {
        return cg_const(c, dt, 0);
    }
    return LLVMBuildSDiv(c->b, acc, cg_const(c, dt, (double)count), "");
}

// A copy (noop_with_empty_axes with no axes).
static dl_status emit_copy(cg *c, dl_ir_value *y, dl_ir_value *x) {
    int64_t numel = dl_ir_type_numel(&x->type);
    if (numel == 0) {
        return DL_OK;
    }
    dl_ir_value *vals[2] = {y, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 2, numel, &k));
    cg_loop l;
    LLVMValueRef i = cg_for_begin(c, &l, k.begin, k.end, "i");
    cg_store(c, k.ptr[0], y->type.dtype, i, cg_load(c, k.ptr[1], x->type.dtype, i));
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

static dl_status lower_reduce_op(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    const dl_ir_type *xt = &x->type;
    dl_dtype dt = xt->dtype;
    if (dt == DL_DT_BOOL || y->type.dtype != dt) {
        cg_error(c, "unsupported dtype %s", dl_dtype_name(dt));
        return DL_ERR_UNSUPPORTED;
    }
    rkind rk = n->op == DL_IR_OP_REDUCE_MAX   ? RK_MAX
               : n->op == DL_IR_OP_REDUCE_MIN ? RK_MIN
                                              : RK_SUM;
    // Reduced axes (the evaluator's rules: absent/empty axes = all, unless noop_with_empty_axes).
    bool red[DL_MAX_RANK] = {0};
    const dl_ir_attr *axes = dl_ir_node_attr(n, "axes");
    if (!axes || axes->n == 0) {
        if (dl_ir_node_attr_int(n, "noop_with_empty_axes")) {
            return emit_copy(c, y, x);
        }
        for (int32_t i = 0; i < xt->rank; i++) {
            red[i] = true;
        }
    } else {
        for (size_t i = 0; i < axes->n; i++) {
            int64_t a = axes->ints[i] < 0 ? axes->ints[i] + xt->rank : axes->ints[i];
            if (a < 0 || a >= xt->rank) {
                cg_error(c, "axis %lld is out of range for rank %d", (long long)axes->ints[i],
                         xt->rank);
                return DL_ERR_SHAPE;
            }
            red[a] = true;
        }
    }
    // Groups: size-1 dims dropped, same-kind neighbours merged. x: [g0, g1, ..., g(G-1)].
    int32_t G = 0;
    int64_t gsize[DL_MAX_RANK];
    bool gred[DL_MAX_RANK];
    int64_t M = 1, count = 1;
    for (int32_t i = 0; i < xt->rank; i++) {
        int64_t d = xt->dims[i].value;
        if (red[i]) {
            count *= d;
        } else {
            M *= d;
        }
        if (d == 1) {
            continue;
        }
        if (G > 0 && gred[G - 1] == red[i]) {
            gsize[G - 1] *= d;
        } else {
            gsize[G] = d;
            gred[G] = red[i];
            G++;
        }
    }
    if (M == 0) {
        return DL_OK; // empty output
    }
    int64_t gstride[DL_MAX_RANK], s = 1;
    for (int32_t g = G - 1; g >= 0; g--) {
        gstride[g] = s;
        s *= gsize[g];
    }
    // The lane dim: the last group when it is kept (contiguous in x and in y).
    bool has_lane = G > 0 && !gred[G - 1];
    int64_t L = has_lane ? gsize[G - 1] : 1;
    int32_t G_rows = has_lane ? G - 1 : G; // groups indexed by the row (kept) or looped (reduced)

    // x: [groups], y: [M] = [rows, L]
    dl_ir_value *vals[2] = {y, x};
    frame f;
    DL_TRY(frame_begin(c, &f, vals, 2, M / L, L));
    LLVMTypeRef ct = cg_compute_type(c, dt);
    LLVMValueRef acc = cg_entry_alloca(c, &f.k, ct, f.T);
    // Row -> x offset of its kept groups (the lane group excluded), innermost first.
    LLVMValueRef base = f.j0, r = f.row;
    for (int32_t g = G_rows - 1; g >= 0; g--) {
        if (gred[g]) {
            continue;
        }
        LLVMValueRef idx = LLVMBuildSRem(c->b, r, cg_i64(c, gsize[g]), "");
        r = LLVMBuildSDiv(c->b, r, cg_i64(c, gsize[g]), "");
        base = LLVMBuildAdd(c->b, base, mul_i64(c, idx, gstride[g]), "");
    }
    cg_loop lj;
    LLVMValueRef j = lanes_begin(c, &f, &lj);
    arr_set(c, ct, acc, j, red_init(c, rk, dt));
    lanes_end(c, &f, &lj);
    // Reduced groups, outermost first; the innermost has stride 1 when there is no lane dim.
    cg_loop lr[DL_MAX_RANK];
    int32_t n_lr = 0;
    LLVMValueRef off = base;
    for (int32_t g = 0; g < G_rows; g++) {
        if (!gred[g]) {
            continue;
        }
        LLVMValueRef iv = cg_for_begin(c, &lr[n_lr++], cg_i64(c, 0), cg_i64(c, gsize[g]), "r");
        off = LLVMBuildAdd(c->b, off, mul_i64(c, iv, gstride[g]), "");
    }
    j = lanes_begin(c, &f, &lj);
    LLVMValueRef v = cg_load(c, f.k.ptr[1], dt, LLVMBuildAdd(c->b, off, j, ""));
    arr_set(c, ct, acc, j, red_combine(c, rk, dt, arr_get(c, ct, acc, j), v));
    lanes_end(c, &f, &lj);
    for (int32_t i = n_lr - 1; i >= 0; i--) {
        cg_for_end(c, &lr[i]);
    }
    // y[row * L + j0 + j] = finish(acc[j])
    LLVMValueRef ybase = LLVMBuildAdd(c->b, mul_i64(c, f.row, L), f.j0, "");
    j = lanes_begin(c, &f, &lj);
    LLVMValueRef res = red_finish(c, n, dt, count, arr_get(c, ct, acc, j));
    cg_store(c, f.k.ptr[0], dt, LLVMBuildAdd(c->b, ybase, j, ""), res);
    lanes_end(c, &f, &lj);
    return frame_end(c, &f);
}

// ---------------------------------------------------------------------------------------------
// ArgMax / Softmax / LogSoftmax: x viewed as [outer, len, inner] around `axis`.

static void axis_split(const dl_ir_type *t, int32_t ax, int64_t *outer, int64_t *len,
                       int64_t *inner) {
    *outer = 1;
    *inner = 1;
    *len = t->dims[ax].value;
    for (int32_t i = 0; i < ax; i++) {
        *outer *= t->dims[i].value;
    }
    for (int32_t i = ax + 1; i < t->rank; i++) {
        *inner *= t->dims[i].value;
    }
}

static bool norm_axis(cg *c, int64_t axis, int32_t rank, int32_t *out) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
        cg_error(c, "axis %lld is out of range for rank %d", (long long)axis, rank);
        return false;
    }
    *out = (int32_t)a;
    return true;
}

// y[o, i] = index of the max of x[o, :, i] (int64). x: [outer, len, inner], y: [outer, inner].
static dl_status lower_argmax(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    dl_dtype dt = x->type.dtype;
    int32_t ax;
    if (!norm_axis(c, dl_ir_node_attr_int(n, "axis"), x->type.rank, &ax)) {
        return DL_ERR_SHAPE;
    }
    if (dt == DL_DT_BOOL) {
        cg_error(c, "unsupported dtype %s", dl_dtype_name(dt));
        return DL_ERR_UNSUPPORTED;
    }
    bool last = dl_ir_node_attr_int(n, "select_last_index") != 0;
    int64_t outer, len, inner;
    axis_split(&x->type, ax, &outer, &len, &inner);
    if (outer * inner == 0) {
        return DL_OK;
    }
    bool fl = dl_dtype_is_float(dt);
    dl_ir_value *vals[2] = {y, x};
    frame f;
    DL_TRY(frame_begin(c, &f, vals, 2, outer, inner));
    LLVMTypeRef ct = cg_compute_type(c, dt);
    LLVMValueRef bv = cg_entry_alloca(c, &f.k, ct, f.T);
    LLVMValueRef bi = cg_entry_alloca(c, &f.k, c->t_i64, f.T);
    // x offset of (row, 0, j0)
    LLVMValueRef base = LLVMBuildAdd(c->b, mul_i64(c, f.row, len * inner), f.j0, "");
    cg_loop lj, lk;
    LLVMValueRef j = lanes_begin(c, &f, &lj);
    arr_set(c, c->t_i64, bi, j, cg_i64(c, 0));
    if (len > 0) {
        arr_set(c, ct, bv, j, cg_load(c, f.k.ptr[1], dt, LLVMBuildAdd(c->b, base, j, "")));
    }
    lanes_end(c, &f, &lj);
    if (len > 1) {
        LLVMValueRef k = cg_for_begin(c, &lk, cg_i64(c, 1), cg_i64(c, len), "k");
        LLVMValueRef koff = LLVMBuildAdd(c->b, base, mul_i64(c, k, inner), "");
        j = lanes_begin(c, &f, &lj);
        LLVMValueRef v = cg_load(c, f.k.ptr[1], dt, LLVMBuildAdd(c->b, koff, j, ""));
        LLVMValueRef b = arr_get(c, ct, bv, j);
        LLVMValueRef take = fl ? LLVMBuildFCmp(c->b, LLVMRealOGT, v, b, "")
                               : LLVMBuildICmp(c->b, LLVMIntSGT, v, b, "");
        if (last) {
            LLVMValueRef eq = fl ? LLVMBuildFCmp(c->b, LLVMRealOEQ, v, b, "")
                                 : LLVMBuildICmp(c->b, LLVMIntEQ, v, b, "");
            take = LLVMBuildOr(c->b, take, eq, "");
        }
        if (fl) { // NaN is the maximum (torch.argmax): the first NaN wins, the last with `last`
            LLVMValueRef vnan = LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, "");
            if (!last) {
                LLVMValueRef bnum = LLVMBuildFCmp(c->b, LLVMRealORD, b, b, "");
                vnan = LLVMBuildAnd(c->b, vnan, bnum, "");
            }
            take = LLVMBuildOr(c->b, take, vnan, "");
        }
        arr_set(c, ct, bv, j, LLVMBuildSelect(c->b, take, v, b, ""));
        LLVMValueRef bk = arr_get(c, c->t_i64, bi, j);
        arr_set(c, c->t_i64, bi, j, LLVMBuildSelect(c->b, take, k, bk, ""));
        lanes_end(c, &f, &lj);
        cg_for_end(c, &lk);
    }
    LLVMValueRef ybase = LLVMBuildAdd(c->b, mul_i64(c, f.row, inner), f.j0, "");
    j = lanes_begin(c, &f, &lj);
    cg_store(c, f.k.ptr[0], DL_DT_INT64, LLVMBuildAdd(c->b, ybase, j, ""),
             arr_get(c, c->t_i64, bi, j));
    lanes_end(c, &f, &lj);
    return frame_end(c, &f);
}

// Softmax / LogSoftmax of x along `axis`, numerically stable:
//   m = max_k x[k]; s = sum_k exp(x[k] - m)
//   softmax: y = exp(x - m) * (1 / s)      log-softmax: y = (x - m) - log(s)
// x, y: [outer, len, inner]. With an f32 output the exponentials are stored in the second pass
// and rescaled in the third; other output types recompute them (storing would round).
dl_status dl_cg__emit_softmax(cg *c, dl_ir_value *y, dl_ir_value *x, int32_t axis, bool is_log) {
    dl_dtype dt = x->type.dtype, yt = y->type.dtype;
    if (!dl_dtype_is_float(dt) || !dl_dtype_is_float(yt)) {
        cg_error(c, "unsupported dtype %s", dl_dtype_name(dt));
        return DL_ERR_UNSUPPORTED;
    }
    int64_t outer, len, inner;
    axis_split(&x->type, axis, &outer, &len, &inner);
    if (outer * inner * len == 0) {
        return DL_OK;
    }
    bool keep_e = !is_log && yt == DL_DT_FLOAT;
    dl_ir_value *vals[2] = {y, x};
    frame f;
    DL_TRY(frame_begin(c, &f, vals, 2, outer, inner));
    LLVMTypeRef t = c->t_f32;
    LLVMValueRef am = cg_entry_alloca(c, &f.k, t, f.T);
    LLVMValueRef as = cg_entry_alloca(c, &f.k, t, f.T);
    LLVMValueRef base = LLVMBuildAdd(c->b, mul_i64(c, f.row, len * inner), f.j0, "");
    cg_loop lj, lk;
    LLVMValueRef j = lanes_begin(c, &f, &lj);
    arr_set(c, t, am, j, cg_f32(c, -INFINITY));
    arr_set(c, t, as, j, cg_f32(c, 0));
    lanes_end(c, &f, &lj);
    // Pass 1: m. llvm.maximum (NaN-propagating) vectorises where maxnum does not; the evaluator's
    // max skips a NaN but then s is NaN, so either way the whole row comes out NaN.
    LLVMValueRef k = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, len), "k");
    LLVMValueRef koff = LLVMBuildAdd(c->b, base, mul_i64(c, k, inner), "");
    j = lanes_begin(c, &f, &lj);
    LLVMValueRef v = cg_load(c, f.k.ptr[1], dt, LLVMBuildAdd(c->b, koff, j, ""));
    arr_set(c, t, am, j, cg_intrinsic2(c, "llvm.maximum", t, arr_get(c, t, am, j), v));
    lanes_end(c, &f, &lj);
    cg_for_end(c, &lk);
    // Pass 2: s (and e into y when it is f32).
    k = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, len), "k");
    koff = LLVMBuildAdd(c->b, base, mul_i64(c, k, inner), "");
    j = lanes_begin(c, &f, &lj);
    LLVMValueRef idx = LLVMBuildAdd(c->b, koff, j, "");
    v = cg_load(c, f.k.ptr[1], dt, idx);
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFSub(c->b, v, arr_get(c, t, am, j), ""));
    if (keep_e) {
        cg_store(c, f.k.ptr[0], DL_DT_FLOAT, idx, e);
    }
    arr_set(c, t, as, j, cg_fadd_reassoc(c, arr_get(c, t, as, j), e));
    lanes_end(c, &f, &lj);
    cg_for_end(c, &lk);
    // as[j] := 1 / s (softmax) or log(s) (log-softmax)
    j = lanes_begin(c, &f, &lj);
    LLVMValueRef s = arr_get(c, t, as, j);
    s = is_log ? cg_intrinsic1(c, "llvm.log", t, s) : LLVMBuildFDiv(c->b, cg_f32(c, 1), s, "");
    arr_set(c, t, as, j, s);
    lanes_end(c, &f, &lj);
    // Pass 3: y.
    k = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, len), "k");
    koff = LLVMBuildAdd(c->b, base, mul_i64(c, k, inner), "");
    j = lanes_begin(c, &f, &lj);
    idx = LLVMBuildAdd(c->b, koff, j, "");
    LLVMValueRef r;
    if (keep_e) {
        r = LLVMBuildFMul(c->b, cg_load(c, f.k.ptr[0], DL_DT_FLOAT, idx), arr_get(c, t, as, j), "");
    } else {
        v = cg_load(c, f.k.ptr[1], dt, idx);
        LLVMValueRef xm = LLVMBuildFSub(c->b, v, arr_get(c, t, am, j), "");
        if (is_log) {
            r = LLVMBuildFSub(c->b, xm, arr_get(c, t, as, j), "");
        } else {
            r = LLVMBuildFMul(c->b, dl_cg__exp_f32(c, xm), arr_get(c, t, as, j), "");
        }
    }
    cg_store(c, f.k.ptr[0], yt, idx, r);
    lanes_end(c, &f, &lj);
    cg_for_end(c, &lk);
    return frame_end(c, &f);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table.

dl_status dl_cg__lower_reduce(cg *c, const dl_ir_node *n) {
    return lower_reduce_op(c, n);
}

dl_status dl_cg__lower_arg_max(cg *c, const dl_ir_node *n) {
    return lower_argmax(c, n);
}

dl_status dl_cg__lower_softmax(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0];
    int32_t ax;
    if (!norm_axis(c, dl_ir_node_attr_int(n, "axis"), x->type.rank, &ax)) {
        return DL_ERR_SHAPE;
    }
    return dl_cg__emit_softmax(c, n->outputs[0], x, ax, n->op == DL_IR_OP_LOG_SOFTMAX);
}
