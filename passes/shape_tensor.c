// passes/shape_tensor.c — shape rules for the data-movement ops: Reshape, Transpose, Flatten,
// Concat, Split, Slice, Gather, Squeeze, Unsqueeze, Expand, Pad. All accept every dtype
// (Gather's indices excepted) and take their shape-like operands as INTS attributes.
//
// Dims copied unchanged from the input keep their symbol; a dim written in an attribute as a dim
// name (Reshape / Expand shape) gets that name's symbol; every computed dim gets -1.
#include "shape_internal.h"

#include <string.h>

static bool rank_fits(dl_pass__sh *c, int64_t rank) {
    if (rank > DL_MAX_RANK) {
        return dl_pass__sh_fail(c, "result rank %lld exceeds the maximum rank %d", (long long)rank,
                                DL_MAX_RANK);
    }
    return true;
}

// Reshape <shape, allowzero> (x): 0 copies the input dim (unless allowzero), one -1 is inferred.
bool dl_pass__sh_reshape(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    size_t n;
    const int32_t *syms;
    const int64_t *shape = dl_pass__sh_attr_ints(c, "shape", &n, &syms);
    bool allowzero = dl_ir_node_attr_int(c->n, "allowzero") != 0;
    if (!rank_fits(c, (int64_t)n)) {
        return false;
    }
    dl_ir_type o = {.dtype = x->dtype, .rank = (int32_t)n};
    int32_t infer = -1;
    int64_t known = 1;
    bool has_zero = false;
    for (size_t i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == -1) {
            if (infer >= 0) {
                return dl_pass__sh_fail(c, "shape %s has more than one -1",
                                        dl_pass__sh_ints(c, shape, n));
            }
            infer = (int32_t)i;
            continue;
        }
        if (v < -1) {
            return dl_pass__sh_fail(c, "shape %s has the invalid entry %lld",
                                    dl_pass__sh_ints(c, shape, n), (long long)v);
        }
        if (v == 0 && !allowzero) {
            if ((int32_t)i >= x->rank) {
                return dl_pass__sh_fail(c, "shape %s copies dim %zu, but the input %s has rank %d",
                                        dl_pass__sh_ints(c, shape, n), i, dl_pass__sh_shape(c, x),
                                        (int)x->rank);
            }
            o.dims[i] = x->dims[i];
        } else {
            has_zero |= v == 0;
            o.dims[i] = sh_dim(v, syms ? syms[i] : -1);
        }
        if (__builtin_mul_overflow(known, o.dims[i].value, &known)) {
            return dl_pass__sh_fail(c, "shape %s has too many elements",
                                    dl_pass__sh_ints(c, shape, n));
        }
    }
    if (allowzero && has_zero && infer >= 0) {
        return dl_pass__sh_fail(c, "shape %s has both 0 and -1 with allowzero",
                                dl_pass__sh_ints(c, shape, n));
    }
    int64_t numel = dl_ir_type_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            return dl_pass__sh_fail(c, "cannot reshape %s into %s", dl_pass__sh_shape(c, x),
                                    dl_pass__sh_ints(c, shape, n));
        }
        o.dims[infer] = sh_dim(numel / known, -1);
    } else if (known != numel) {
        return dl_pass__sh_fail(c, "cannot reshape %s (%lld elements) into %s (%lld elements)",
                                dl_pass__sh_shape(c, x), (long long)numel,
                                dl_pass__sh_ints(c, shape, n), (long long)known);
    }
    *sh_out(c, 0) = o;
    return true;
}

// Transpose <perm> (x): out[i] = x[perm[i]]; perm defaults to the reversed axes.
bool dl_pass__sh_transpose(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    size_t n;
    const int64_t *perm = dl_pass__sh_attr_ints(c, "perm", &n, NULL);
    dl_ir_type o = {.dtype = x->dtype, .rank = x->rank};
    if (!perm) {
        for (int32_t i = 0; i < x->rank; i++) {
            o.dims[i] = x->dims[x->rank - 1 - i];
        }
        *sh_out(c, 0) = o;
        return true;
    }
    bool seen[DL_MAX_RANK] = {0}, ok = n == (size_t)x->rank;
    for (size_t i = 0; ok && i < n; i++) {
        ok = perm[i] >= 0 && perm[i] < x->rank && !seen[perm[i]];
        if (ok) {
            seen[perm[i]] = true;
            o.dims[i] = x->dims[perm[i]];
        }
    }
    if (!ok) {
        return dl_pass__sh_fail(c, "perm %s is not a permutation of the %d axes of %s",
                                dl_pass__sh_ints(c, perm, n), (int)x->rank,
                                dl_pass__sh_shape(c, x));
    }
    *sh_out(c, 0) = o;
    return true;
}

// Product of dims [lo, hi) of x as one dim; keeps the sym when it is exactly one input dim.
// x is within DL_IR_MAX_TENSOR_BYTES (the driver checks inputs first), which bounds every
// product of its dims; the multiplication saturates anyway rather than trusting that.
static dl_ir_dim dims_product(const dl_ir_type *x, int32_t lo, int32_t hi) {
    if (hi - lo == 1) {
        return x->dims[lo];
    }
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++) {
        if (__builtin_mul_overflow(p, x->dims[i].value, &p)) {
            p = INT64_MAX; // then refused by the driver's size check of the result
            break;
        }
    }
    return sh_dim(p, -1);
}

// Flatten <axis> (x) -> [prod(x[:axis]), prod(x[axis:])], axis in [-r, r].
bool dl_pass__sh_flatten(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    int32_t axis;
    if (!dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, true, &axis)) {
        return false;
    }
    dl_ir_type *o = sh_out(c, 0);
    *o = (dl_ir_type){.dtype = x->dtype, .rank = 2};
    o->dims[0] = dims_product(x, 0, axis);
    o->dims[1] = dims_product(x, axis, x->rank);
    return true;
}

// Concat <axis> (xs...): same dtype and rank, equal dims off the axis; the axis dims add up.
bool dl_pass__sh_concat(dl_pass__sh *c) {
    const dl_ir_type *x0 = NULL;
    for (size_t i = 0; i < sh_n_in(c) && !x0; i++) {
        x0 = sh_in(c, i);
    }
    if (!x0) {
        return dl_pass__sh_fail(c, "needs at least one input");
    }
    int32_t axis;
    if (!dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x0->rank, false, &axis)) {
        return false;
    }
    dl_ir_type o = *x0;
    int64_t total = 0;
    size_t n_present = 0;
    for (size_t i = 0; i < sh_n_in(c); i++) {
        const dl_ir_type *t = sh_in(c, i);
        if (!t) {
            continue;
        }
        n_present++;
        if (!dl_pass__sh_same_dtype(c, x0, t)) {
            return false;
        }
        bool ok = t->rank == x0->rank;
        for (int32_t j = 0; ok && j < t->rank; j++) {
            ok = j == axis || t->dims[j].value == x0->dims[j].value;
            if (ok && j != axis && o.dims[j].sym < 0) {
                o.dims[j].sym = t->dims[j].sym;
            }
        }
        if (!ok) {
            return dl_pass__sh_fail(c, "input shapes differ outside axis %d: %s and %s", (int)axis,
                                    dl_pass__sh_shape(c, x0), dl_pass__sh_shape(c, t));
        }
        // Many inputs (or one input many times) can add up past int64.
        if (__builtin_add_overflow(total, t->dims[axis].value, &total)) {
            return dl_pass__sh_fail(c, "the %zu inputs' sizes along axis %d overflow int64",
                                    sh_n_in(c), (int)axis);
        }
    }
    if (n_present > 1) {
        o.dims[axis] = sh_dim(total, -1);
    }
    *sh_out(c, 0) = o;
    return true;
}

// Split <axis, split | num_outputs> (x) -> one tensor per output. Without either attribute the
// axis splits evenly over the outputs; with num_outputs (ONNX 18) the chunks are
// ceil(dim / num_outputs) and the last one takes the rest.
bool dl_pass__sh_split(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    int32_t axis;
    if (!dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis)) {
        return false;
    }
    size_t n_out = sh_n_out(c), n_split;
    const int64_t *split = dl_pass__sh_attr_ints(c, "split", &n_split, NULL);
    const dl_ir_attr *num = dl_ir_node_attr(c->n, "num_outputs");
    int64_t dim = x->dims[axis].value;
    if (split && num) {
        return dl_pass__sh_fail(c, "split and num_outputs cannot both be given");
    }
    if (split) {
        if (n_split != n_out) {
            return dl_pass__sh_fail(c, "split %s has %zu entries for %zu outputs",
                                    dl_pass__sh_ints(c, split, n_split), n_split, n_out);
        }
        int64_t sum = 0;
        bool ovf = false;
        for (size_t i = 0; i < n_split; i++) {
            if (split[i] < 0) {
                return dl_pass__sh_fail(c, "split %s has the negative entry %lld",
                                        dl_pass__sh_ints(c, split, n_split), (long long)split[i]);
            }
            ovf |= __builtin_add_overflow(sum, split[i], &sum);
        }
        if (ovf) {
            return dl_pass__sh_fail(c,
                                    "split %s sums to more than int64 holds, but axis %d of %s "
                                    "has size %lld",
                                    dl_pass__sh_ints(c, split, n_split), (int)axis,
                                    dl_pass__sh_shape(c, x), (long long)dim);
        }
        if (sum != dim) {
            return dl_pass__sh_fail(c, "split %s sums to %lld, but axis %d of %s has size %lld",
                                    dl_pass__sh_ints(c, split, n_split), (long long)sum, (int)axis,
                                    dl_pass__sh_shape(c, x), (long long)dim);
        }
    } else if (num) {
        int64_t k = dl_ir_node_attr_int(c->n, "num_outputs");
        if ((size_t)k != n_out) {
            return dl_pass__sh_fail(c, "num_outputs is %lld, but the node has %zu outputs",
                                    (long long)k, n_out);
        }
    }
    int64_t chunk = split ? 0 : (dim + (int64_t)n_out - 1) / (int64_t)n_out;
    if (!split && !num && dim % (int64_t)n_out != 0) {
        return dl_pass__sh_fail(c,
                                "axis %d of %s (size %lld) does not split evenly into %zu "
                                "outputs",
                                (int)axis, dl_pass__sh_shape(c, x), (long long)dim, n_out);
    }
    if (!split && chunk * ((int64_t)n_out - 1) >= dim && n_out > 1) {
        return dl_pass__sh_fail(c, "axis %d of %s (size %lld) is too small for %zu outputs",
                                (int)axis, dl_pass__sh_shape(c, x), (long long)dim, n_out);
    }
    for (size_t i = 0; i < n_out; i++) {
        dl_ir_type *o = sh_out(c, i);
        if (!o) {
            continue;
        }
        int64_t len = split ? split[i] : (i + 1 < n_out ? chunk : dim - chunk * (int64_t)i);
        *o = *x;
        o->dims[axis] = sh_dim(len, n_out == 1 ? x->dims[axis].sym : -1);
    }
    return true;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// Slice <starts, ends, axes?, steps?> (x), ONNX clamping: negative starts/ends count from the
// end; starts clamp to [0, dim] ([0, dim - 1] for negative steps) and ends to [0, dim]
// ([-1, dim - 1] for negative steps). Shared with SliceGrad (shape_grad.c) through
// shape_internal.h.
bool dl_pass__sh_slice_shape(dl_pass__sh *c, const dl_ir_type *x, bool keep_sym, dl_ir_type *out) {
    size_t ns, ne, na, nst;
    const int64_t *starts = dl_pass__sh_attr_ints(c, "starts", &ns, NULL);
    const int64_t *ends = dl_pass__sh_attr_ints(c, "ends", &ne, NULL);
    const int64_t *axes = dl_pass__sh_attr_ints(c, "axes", &na, NULL);
    const int64_t *steps = dl_pass__sh_attr_ints(c, "steps", &nst, NULL);
    if (ne != ns || (axes && na != ns) || (steps && nst != ns)) {
        return dl_pass__sh_fail(c,
                                "starts, ends, axes and steps must have the same length, got "
                                "%zu, %zu, %zu and %zu",
                                ns, ne, axes ? na : ns, steps ? nst : ns);
    }
    dl_ir_type o = *x;
    bool seen[DL_MAX_RANK] = {0};
    for (size_t i = 0; i < ns; i++) {
        int32_t a;
        if (!dl_pass__sh_axis(c, axes ? axes[i] : (int64_t)i, x->rank, false, &a)) {
            return false;
        }
        if (seen[a]) {
            return dl_pass__sh_fail(c, "axis %lld is repeated in axes %s",
                                    (long long)(axes ? axes[i] : (int64_t)i),
                                    dl_pass__sh_ints(c, axes, na));
        }
        seen[a] = true;
        int64_t step = steps ? steps[i] : 1, dim = x->dims[a].value;
        if (step == 0) {
            return dl_pass__sh_fail(c, "steps must not be 0: %s", dl_pass__sh_ints(c, steps, nst));
        }
        int64_t s = starts[i], e = ends[i], len;
        s = s < 0 ? s + dim : s;
        e = e < 0 ? e + dim : e;
        if (step > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            len = e > s ? 1 + (e - s - 1) / step : 0; // ceil((e - s) / step) without overflow
        } else {
            s = clamp64(s, 0, dim - 1);
            e = clamp64(e, -1, dim - 1);
            len = s > e ? 1 - (s - e - 1) / step : 0; // also safe for step == INT64_MIN
        }
        bool whole = step == 1 && s == 0 && len == dim;
        o.dims[a] = sh_dim(len, keep_sym && whole ? x->dims[a].sym : -1);
    }
    *out = o;
    return true;
}

bool dl_pass__sh_slice(dl_pass__sh *c) {
    return dl_pass__sh_slice_shape(c, sh_in(c, 0), true, sh_out(c, 0));
}

// Gather's output type data[:axis] + indices.shape + data[axis+1:] (rank checked by the caller).
// Shared with GatherGrad (shape_grad.c) through shape_internal.h.
void dl_pass__sh_gather_dims(const dl_ir_type *x, const dl_ir_type *idx, int32_t axis,
                             dl_ir_type *out) {
    dl_ir_type o = {.dtype = x->dtype, .rank = 0};
    for (int32_t i = 0; i < axis; i++) {
        o.dims[o.rank++] = x->dims[i];
    }
    for (int32_t i = 0; i < idx->rank; i++) {
        o.dims[o.rank++] = idx->dims[i];
    }
    for (int32_t i = axis + 1; i < x->rank; i++) {
        o.dims[o.rank++] = x->dims[i];
    }
    *out = o;
}

// Gather <axis> (data, indices) -> data[:axis] + indices.shape + data[axis+1:]
bool dl_pass__sh_gather(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *idx = sh_in(c, 1);
    int32_t axis;
    if (!dl_pass__sh_need_int_index(c, idx, "indices") ||
        !dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis) ||
        !rank_fits(c, (int64_t)x->rank - 1 + idx->rank)) {
        return false;
    }
    // No index is valid on an empty axis (the evaluator and codegen refuse it too).
    if (x->dims[axis].value == 0 && dl_ir_type_numel(idx) > 0) {
        return dl_pass__sh_fail(c, "cannot gather %s indices from the empty axis %d of %s",
                                dl_pass__sh_shape(c, idx), (int)axis, dl_pass__sh_shape(c, x));
    }
    dl_pass__sh_gather_dims(x, idx, axis, sh_out(c, 0));
    return true;
}

// Squeeze <axes?> (x): drops the listed dims (each must be 1), or every 1 without axes.
bool dl_pass__sh_squeeze(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    size_t n;
    const int64_t *axes = dl_pass__sh_attr_ints(c, "axes", &n, NULL);
    bool drop[DL_MAX_RANK] = {0};
    if (!axes) {
        for (int32_t i = 0; i < x->rank; i++) {
            drop[i] = x->dims[i].value == 1;
        }
    }
    for (size_t i = 0; axes && i < n; i++) {
        int32_t a;
        if (!dl_pass__sh_axis(c, axes[i], x->rank, false, &a)) {
            return false;
        }
        if (drop[a]) {
            return dl_pass__sh_fail(c, "axis %lld is repeated in axes %s", (long long)axes[i],
                                    dl_pass__sh_ints(c, axes, n));
        }
        if (x->dims[a].value != 1) {
            return dl_pass__sh_fail(c, "cannot squeeze axis %lld of size %lld: %s",
                                    (long long)axes[i], (long long)x->dims[a].value,
                                    dl_pass__sh_shape(c, x));
        }
        drop[a] = true;
    }
    dl_ir_type o = {.dtype = x->dtype, .rank = 0};
    for (int32_t i = 0; i < x->rank; i++) {
        if (!drop[i]) {
            o.dims[o.rank++] = x->dims[i];
        }
    }
    *sh_out(c, 0) = o;
    return true;
}

// Unsqueeze <axes> (x): inserts 1s at the listed positions of the output (rank r + len(axes)).
bool dl_pass__sh_unsqueeze(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    size_t n;
    const int64_t *axes = dl_pass__sh_attr_ints(c, "axes", &n, NULL);
    int64_t r = (int64_t)x->rank + (int64_t)n;
    if (!rank_fits(c, r)) {
        return false;
    }
    bool ins[DL_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        int32_t a;
        if (!dl_pass__sh_axis(c, axes[i], (int32_t)r, false, &a)) {
            return false;
        }
        if (ins[a]) {
            return dl_pass__sh_fail(c, "axis %lld is repeated in axes %s", (long long)axes[i],
                                    dl_pass__sh_ints(c, axes, n));
        }
        ins[a] = true;
    }
    dl_ir_type o = {.dtype = x->dtype, .rank = (int32_t)r};
    int32_t k = 0;
    for (int32_t i = 0; i < o.rank; i++) {
        o.dims[i] = ins[i] ? sh_dim(1, -1) : x->dims[k++];
    }
    *sh_out(c, 0) = o;
    return true;
}

// Expand <shape> (x): bidirectional broadcast of x's shape with `shape`.
bool dl_pass__sh_expand(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0);
    size_t n;
    const int32_t *syms;
    const int64_t *shape = dl_pass__sh_attr_ints(c, "shape", &n, &syms);
    if (!rank_fits(c, (int64_t)n)) {
        return false;
    }
    dl_ir_type s = {.dtype = x->dtype, .rank = (int32_t)n};
    for (size_t i = 0; i < n; i++) {
        s.dims[i] = sh_dim(shape[i], syms ? syms[i] : -1);
    }
    const dl_ir_type *ts[2] = {x, &s};
    dl_ir_type *o = sh_out(c, 0);
    if (!dl_pass__sh_broadcast(c, ts, 2, o)) {
        return false;
    }
    o->dtype = x->dtype;
    return true;
}

// Pad's output dims x.shape + begin pads + end pads (negative pads crop; pads: 2 * rank
// entries, checked by the caller). Shared with PadGrad (shape_grad.c) through shape_internal.h.
bool dl_pass__sh_pad_dims(dl_pass__sh *c, const dl_ir_type *x, const int64_t *pads, size_t n,
                          bool for_grad, dl_ir_type *out) {
    // reflect / edge / wrap read the axis's own elements: an empty axis has none to pad with
    // (the evaluator and codegen refuse it too; this makes it a check-time error).
    bool is_const = strcmp(dl_ir_node_attr_string(c->n, "mode"), "constant") == 0;
    dl_ir_type o = *x;
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t b = pads[i], e = pads[i + x->rank];
        int64_t len;
        if (__builtin_add_overflow(x->dims[i].value, b, &len) ||
            __builtin_add_overflow(len, e, &len)) {
            return dl_pass__sh_fail(c, "pads %s overflow int64 on axis %d of %s",
                                    dl_pass__sh_ints(c, pads, n), (int)i, dl_pass__sh_shape(c, x));
        }
        if (len < 0) {
            return dl_pass__sh_fail(c,
                                    "pads %s remove more than the %lld elements of axis %d of %s",
                                    dl_pass__sh_ints(c, pads, n), (long long)x->dims[i].value,
                                    (int)i, dl_pass__sh_shape(c, x));
        }
        if (!is_const && x->dims[i].value == 0 && len > 0) {
            return dl_pass__sh_fail(c, "%s padding of the empty axis %d of %s",
                                    dl_ir_node_attr_string(c->n, "mode"), (int)i,
                                    dl_pass__sh_shape(c, x));
        }
        o.dims[i] = sh_dim(len, !for_grad && b == 0 && e == 0 ? x->dims[i].sym : -1);
    }
    *out = o;
    return true;
}

// Pad <pads, mode, value> (data, constant_value?): pads = [b_1..b_r, e_1..e_r], may be negative.
bool dl_pass__sh_pad(dl_pass__sh *c) {
    const dl_ir_type *x = sh_in(c, 0), *cv = sh_in(c, 1);
    size_t n;
    const int64_t *pads = dl_pass__sh_attr_ints(c, "pads", &n, NULL);
    if (n != 2 * (size_t)x->rank) {
        return dl_pass__sh_fail(c, "pads %s must have %d entries for rank %d",
                                dl_pass__sh_ints(c, pads, n), (int)(2 * x->rank), (int)x->rank);
    }
    if (cv && (cv->dtype != x->dtype || dl_ir_type_numel(cv) != 1 || cv->rank > 1)) {
        return dl_pass__sh_fail(
            c, "constant_value must be a scalar of the data's type %s, got %s%s",
            dl_dtype_name(x->dtype), dl_dtype_name(cv->dtype), dl_pass__sh_shape(c, cv));
    }
    return dl_pass__sh_pad_dims(c, x, pads, n, false, sh_out(c, 0));
}
