// passes/shape_elem.c — shape rules for elementwise ops, reductions, ArgMax, MatMul and Gemm.
//
// Dtype policy (ONNX opset 17 restricted to our six dtypes): transcendental and activation ops
// take float types only; arithmetic takes float types and int32/int64; logical ops take bool;
// the operands of a binary op share one dtype (Pow's exponent excepted, as in ONNX).
#include "shape_internal.h"

#include <string.h>

// Unary op: out = in (shape and syms), checking the dtype class.
bool dl_pass__sh_unary(dl_pass__sh *c, dl_pass__sh_kind k) {
    const dl_ir_type *x = sh_in(c, 0);
    switch (k) {
    case DL_SH_FLOAT:
        if (!dl_pass__sh_need_float(c, x, "input")) {
            return false;
        }
        break;
    case DL_SH_NUMERIC:
        if (!dl_pass__sh_need_numeric(c, x, "input")) {
            return false;
        }
        break;
    case DL_SH_BOOL:
        if (x->dtype != DL_DT_BOOL) {
            return dl_pass__sh_fail(c, "input must be bool, got %s", dl_dtype_name(x->dtype));
        }
        break;
    case DL_SH_ANY:
        break;
    }
    *sh_out(c, 0) = *x;
    return true;
}

bool dl_pass__sh_nary(dl_pass__sh *c, dl_pass__sh_kind k, int out_dt) {
    const dl_ir_type *ts[16];
    size_t n = 0;
    if (sh_n_in(c) > DL_ARRAY_LEN(ts)) {
        return dl_pass__sh_fail(c, "at most %zu inputs are supported, got %zu", DL_ARRAY_LEN(ts),
                                sh_n_in(c));
    }
    for (size_t i = 0; i < sh_n_in(c) && n < DL_ARRAY_LEN(ts); i++) {
        if (sh_in(c, i)) {
            ts[n++] = sh_in(c, i);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (k == DL_SH_NUMERIC && !dl_pass__sh_need_numeric(c, ts[i], "input")) {
            return false;
        }
        if (k == DL_SH_FLOAT && !dl_pass__sh_need_float(c, ts[i], "input")) {
            return false;
        }
        if (k == DL_SH_BOOL && ts[i]->dtype != DL_DT_BOOL) {
            return dl_pass__sh_fail(c, "inputs must be bool, got %s", dl_dtype_name(ts[i]->dtype));
        }
        if (i > 0 && !dl_pass__sh_same_dtype(c, ts[0], ts[i])) {
            return false;
        }
    }
    dl_ir_type *o = sh_out(c, 0);
    if (!dl_pass__sh_broadcast(c, ts, n, o)) {
        return false;
    }
    o->dtype = out_dt < 0 ? ts[0]->dtype : (dl_dtype)out_dt;
    return true;
}

bool dl_pass__sh_unary_numeric(dl_pass__sh *c) {
    return dl_pass__sh_unary(c, DL_SH_NUMERIC);
}

bool dl_pass__sh_unary_float(dl_pass__sh *c) {
    return dl_pass__sh_unary(c, DL_SH_FLOAT);
}

bool dl_pass__sh_unary_bool(dl_pass__sh *c) {
    return dl_pass__sh_unary(c, DL_SH_BOOL);
}

bool dl_pass__sh_unary_any(dl_pass__sh *c) {
    return dl_pass__sh_unary(c, DL_SH_ANY);
}

bool dl_pass__sh_nary_numeric(dl_pass__sh *c) {
    return dl_pass__sh_nary(c, DL_SH_NUMERIC, -1);
}

bool dl_pass__sh_compare_any(dl_pass__sh *c) {
    return dl_pass__sh_nary(c, DL_SH_ANY, DL_DT_BOOL);
}

bool dl_pass__sh_compare_numeric(dl_pass__sh *c) {
    return dl_pass__sh_nary(c, DL_SH_NUMERIC, DL_DT_BOOL);
}

bool dl_pass__sh_logical(dl_pass__sh *c) {
    return dl_pass__sh_nary(c, DL_SH_BOOL, DL_DT_BOOL);
}

bool dl_pass__sh_pow(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *y = sh_in(c, 1);
    if (!dl_pass__sh_need_numeric(c, x, "base") || !dl_pass__sh_need_numeric(c, y, "exponent")) {
        return false;
    }
    const dl_ir_type *ts[2] = {x, y};
    dl_ir_type *o = sh_out(c, 0);
    if (!dl_pass__sh_broadcast(c, ts, 2, o)) {
        return false;
    }
    o->dtype = x->dtype;
    return true;
}

// Clip (x, min?, max?): bounds are scalars of x's dtype.
bool dl_pass__sh_clip(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_numeric(c, x, "input")) {
        return false;
    }
    static const char *const names[] = {"", "min", "max"};
    for (size_t i = 1; i < 3; i++) {
        const dl_ir_type *b = sh_in(c, i);
        if (!b) {
            continue;
        }
        if (b->dtype != x->dtype) {
            return dl_pass__sh_fail(c, "%s must have the input's type %s, got %s", names[i],
                                    dl_dtype_name(x->dtype), dl_dtype_name(b->dtype));
        }
        if (dl_ir_type_numel(b) != 1 || b->rank > 1) {
            return dl_pass__sh_fail(c, "%s must be a scalar, got shape %s", names[i],
                                    dl_pass__sh_shape(c, b));
        }
    }
    *sh_out(c, 0) = *x;
    return true;
}

bool dl_pass__sh_where(dl_pass__sh *c) {
    const dl_ir_type *cond = sh_in(c, 0), *x = sh_in(c, 1), *y = sh_in(c, 2);
    if (cond->dtype != DL_DT_BOOL) {
        return dl_pass__sh_fail(c, "condition must be bool, got %s", dl_dtype_name(cond->dtype));
    }
    if (!dl_pass__sh_same_dtype(c, x, y)) {
        return false;
    }
    const dl_ir_type *ts[3] = {cond, x, y};
    dl_ir_type *o = sh_out(c, 0);
    if (!dl_pass__sh_broadcast(c, ts, 3, o)) {
        return false;
    }
    o->dtype = x->dtype;
    return true;
}

bool dl_pass__sh_cast(dl_pass__sh *c) {
    const char *to = dl_ir_node_attr_string(c->n, "to");
    dl_dtype dt;
    if (!to || !dl_dtype_from_name(to, &dt)) {
        return dl_pass__sh_fail(c, "unknown target type '%s'", to ? to : "");
    }
    dl_ir_type *o = sh_out(c, 0);
    *o = *sh_in(c, 0);
    o->dtype = dt;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Reductions

// Marks the reduced axes of `axes` (normalised, no duplicates) in `red`.
static bool reduce_axes(dl_pass__sh *c, const int64_t *axes, size_t n_axes, int32_t rank,
                        bool red[DL_MAX_RANK]) {
    memset(red, 0, sizeof(bool) * DL_MAX_RANK);
    for (size_t i = 0; i < n_axes; i++) {
        int32_t a;
        if (!dl_pass__sh_axis(c, axes[i], rank, false, &a)) {
            return false;
        }
        if (red[a]) {
            return dl_pass__sh_fail(c, "axis %lld is repeated in axes %s", (long long)axes[i],
                                    dl_pass__sh_ints(c, axes, n_axes));
        }
        red[a] = true;
    }
    return true;
}

static void reduce_out(const dl_ir_type *x, const bool red[DL_MAX_RANK], bool keepdims, dl_dtype dt,
                       dl_ir_type *o) {
    dl_ir_type r = {.dtype = dt, .rank = 0};
    for (int32_t i = 0; i < x->rank; i++) {
        if (!red[i]) {
            r.dims[r.rank++] = x->dims[i];
        } else if (keepdims) {
            r.dims[r.rank++] = sh_dim(1, -1);
        }
    }
    *o = r;
}

bool dl_pass__sh_reduce(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_numeric(c, x, "input")) {
        return false;
    }
    size_t n_axes;
    const int64_t *axes = dl_pass__sh_attr_ints(c, "axes", &n_axes, NULL);
    bool keepdims = dl_ir_node_attr_int(c->n, "keepdims") != 0;
    bool red[DL_MAX_RANK];
    if (n_axes == 0) {
        if (dl_ir_node_attr_int(c->n, "noop_with_empty_axes") != 0) {
            *sh_out(c, 0) = *x;
            return true;
        }
        for (int32_t i = 0; i < DL_MAX_RANK; i++) {
            red[i] = true;
        }
    } else if (!reduce_axes(c, axes, n_axes, x->rank, red)) {
        return false;
    }
    reduce_out(x, red, keepdims, x->dtype, sh_out(c, 0));
    return true;
}

bool dl_pass__sh_argmax(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    if (!dl_pass__sh_need_numeric(c, x, "input")) {
        return false;
    }
    int32_t a;
    if (!dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &a)) {
        return false;
    }
    bool red[DL_MAX_RANK] = {0};
    red[a] = true;
    reduce_out(x, red, dl_ir_node_attr_int(c->n, "keepdims") != 0, DL_DT_INT64, sh_out(c, 0));
    return true;
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

// numpy matmul: 1-D operands are promoted ([K] -> [1, K] on the left, [K, 1] on the right) and
// the promoted dim is dropped from the result; leading dims broadcast.
bool dl_pass__sh_matmul(dl_pass__sh *c) {
    const dl_ir_type *a = sh_in(c, 0), *b = sh_in(c, 1);
    if (!dl_pass__sh_need_numeric(c, a, "A") || !dl_pass__sh_need_numeric(c, b, "B") ||
        !dl_pass__sh_same_dtype(c, a, b)) {
        return false;
    }
    if (a->rank < 1 || b->rank < 1) {
        return dl_pass__sh_fail(c, "inputs must have rank >= 1: %s x %s", dl_pass__sh_shape(c, a),
                                dl_pass__sh_shape(c, b));
    }
    dl_ir_dim ka = a->dims[a->rank - 1];
    dl_ir_dim kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    if (ka.value != kb.value) {
        return dl_pass__sh_fail(c, "inner dimensions differ: %s x %s", dl_pass__sh_shape(c, a),
                                dl_pass__sh_shape(c, b));
    }
    // Batch dims: everything but the last two of each (after promotion).
    dl_ir_type ba = {.dtype = a->dtype, .rank = a->rank >= 2 ? a->rank - 2 : 0};
    dl_ir_type bb = {.dtype = b->dtype, .rank = b->rank >= 2 ? b->rank - 2 : 0};
    memcpy(ba.dims, a->dims, sizeof(dl_ir_dim) * (size_t)ba.rank);
    memcpy(bb.dims, b->dims, sizeof(dl_ir_dim) * (size_t)bb.rank);
    dl_ir_type o = {.dtype = a->dtype};
    const dl_ir_type *ts[2] = {&ba, &bb};
    // Broadcast quietly first so the message can show the full operand shapes.
    bool ok = true;
    int32_t r = ba.rank > bb.rank ? ba.rank : bb.rank;
    for (int32_t i = 0; i < r && ok; i++) {
        int32_t ia = i - (r - ba.rank), ib = i - (r - bb.rank);
        int64_t va = ia >= 0 ? ba.dims[ia].value : 1, vb = ib >= 0 ? bb.dims[ib].value : 1;
        ok = va == vb || va == 1 || vb == 1;
    }
    if (!ok) {
        return dl_pass__sh_fail(c, "batch dimensions are not broadcastable: %s x %s",
                                dl_pass__sh_shape(c, a), dl_pass__sh_shape(c, b));
    }
    if (!dl_pass__sh_broadcast(c, ts, 2, &o)) {
        return false;
    }
    if (a->rank >= 2) {
        o.dims[o.rank++] = a->dims[a->rank - 2];
    }
    if (b->rank >= 2) {
        o.dims[o.rank++] = b->dims[b->rank - 1];
    }
    o.dtype = a->dtype;
    *sh_out(c, 0) = o;
    return true;
}

bool dl_pass__sh_gemm(dl_pass__sh *c) {
    const dl_ir_type *a = sh_in(c, 0), *b = sh_in(c, 1), *cc = sh_in(c, 2);
    if (!dl_pass__sh_need_numeric(c, a, "A") || !dl_pass__sh_need_numeric(c, b, "B") ||
        !dl_pass__sh_same_dtype(c, a, b) || (cc && !dl_pass__sh_same_dtype(c, a, cc))) {
        return false;
    }
    if (a->rank != 2 || b->rank != 2) {
        return dl_pass__sh_fail(c, "A and B must have rank 2: %s x %s", dl_pass__sh_shape(c, a),
                                dl_pass__sh_shape(c, b));
    }
    bool ta = dl_ir_node_attr_int(c->n, "transA") != 0;
    bool tb = dl_ir_node_attr_int(c->n, "transB") != 0;
    dl_ir_dim m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1];
    dl_ir_dim kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
    if (ka.value != kb.value) {
        return dl_pass__sh_fail(c, "inner dimensions differ: %s%s x %s%s", dl_pass__sh_shape(c, a),
                                ta ? "^T" : "", dl_pass__sh_shape(c, b), tb ? "^T" : "");
    }
    dl_ir_type *o = sh_out(c, 0);
    *o = (dl_ir_type){.dtype = a->dtype, .rank = 2};
    o->dims[0] = m;
    o->dims[1] = n;
    if (cc) {
        // C broadcasts one way only: to [M, N].
        bool ok = cc->rank <= 2;
        for (int32_t i = 0; ok && i < cc->rank; i++) {
            int64_t want = o->dims[2 - cc->rank + i].value, got = cc->dims[i].value;
            ok = got == want || got == 1;
        }
        if (!ok) {
            return dl_pass__sh_fail(c, "C is not broadcastable to [%lld, %lld]: %s",
                                    (long long)m.value, (long long)n.value,
                                    dl_pass__sh_shape(c, cc));
        }
    }
    return true;
}
