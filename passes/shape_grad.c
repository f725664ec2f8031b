// passes/shape_grad.c — shape rules of the internal gradient ops of family A (see
// shape_internal.h): UnaryGrad, SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad,
// LayerNormalizationGrad, GatherGrad, SliceGrad and PadGrad.
//
// Every op here returns the gradient of one "x-like" input, so its first output has exactly that
// input's type (dtype and shape, symbolic dims kept). The incoming gradient (dy / dloss) must
// have exactly the shape the forward op's output would have: the rules recompute that shape
// (with the forward ops' own normalisation of axes, starts/ends/steps and pads) and compare, so
// a graph that autodiff did not build consistently fails here with both shapes in the message
// rather than as an out-of-bounds access later. Float dtypes only.
#include "shape_internal.h"

#include <string.h>

// t must have exactly the dims of `want` (values); `what` names t in the message.
static bool need_shape(dl_pass__sh *c, const dl_ir_type *t, const dl_ir_type *want,
                       const char *what) {
    bool ok = t->rank == want->rank;
    for (int32_t i = 0; ok && i < t->rank; i++) {
        ok = t->dims[i].value == want->dims[i].value;
    }
    if (!ok) {
        return dl_pass__sh_fail(c, "%s must have shape %s, got %s", what,
                                dl_pass__sh_shape(c, want), dl_pass__sh_shape(c, t));
    }
    return true;
}

static bool need_input(dl_pass__sh *c, size_t i, const char *what) {
    if (!sh_in(c, i)) {
        return dl_pass__sh_fail(c, "input %s is missing", what);
    }
    return true;
}

// UnaryGrad <op, alpha, approximate> (dy, x) -> dx: x's type; dy has x's dtype and shape.
bool dl_pass__sh_unary_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dy") || !need_input(c, 1, "x")) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, dy, x) ||
        !need_shape(c, dy, x, "dy")) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}

// {SoftmaxCrossEntropy,NegativeLogLikelihood}LossGrad <reduction, ignore_index>
//   (dloss, x: [N, C, d...], labels: [N, d...] int, weights?: [C]) -> dx: x's type.
// dloss: a float scalar for mean / sum, [N, d...] for none (the forward loss's output).
bool dl_pass__sh_loss_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dloss") || !need_input(c, 1, "scores") || !need_input(c, 2, "labels")) {
        return false;
    }
    const dl_ir_type *dl = sh_in(c, 0), *x = sh_in(c, 1), *lab = sh_in(c, 2), *w = sh_in(c, 3);
    if (!dl_pass__sh_need_float(c, x, "scores") || !dl_pass__sh_need_float(c, dl, "dloss") ||
        !dl_pass__sh_need_int_index(c, lab, "labels")) {
        return false;
    }
    if (x->rank < 2) {
        return dl_pass__sh_fail(c, "scores must have rank >= 2 (N, C, ...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    dl_ir_type per = {.dtype = lab->dtype, .rank = x->rank - 1};
    per.dims[0] = x->dims[0];
    for (int32_t i = 2; i < x->rank; i++) {
        per.dims[i - 1] = x->dims[i];
    }
    if (!need_shape(c, lab, &per, "labels")) {
        return false;
    }
    if (w) {
        if (!dl_pass__sh_same_dtype(c, x, w)) {
            return false;
        }
        if (w->rank != 1 || w->dims[0].value != x->dims[1].value) {
            return dl_pass__sh_fail(c, "weights must have shape [%lld] (the classes of %s), got %s",
                                    (long long)x->dims[1].value, dl_pass__sh_shape(c, x),
                                    dl_pass__sh_shape(c, w));
        }
    }
    const char *red = dl_ir_node_attr_string(c->n, "reduction");
    if (strcmp(red, "none") == 0) {
        if (!need_shape(c, dl, &per, "dloss (reduction 'none')")) {
            return false;
        }
    } else if (dl->rank != 0) {
        return dl_pass__sh_fail(c, "dloss must be a scalar for reduction '%s', got %s", red,
                                dl_pass__sh_shape(c, dl));
    }
    *sh_out(c, 0) = *x;
    return true;
}

// LayerNormalizationGrad <axis, epsilon> (dy, x, scale) -> dx, dscale?, dbias?
// dy has x's type; scale (x's dtype) must be exactly x.shape[axis:] (the broadcasting forms
// the forward op accepts are not supported here); dscale and dbias have scale's type.
bool dl_pass__sh_layer_norm_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dy") || !need_input(c, 1, "X") || !need_input(c, 2, "Scale")) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1), *sc = sh_in(c, 2);
    int32_t axis;
    if (!dl_pass__sh_need_float(c, x, "X") ||
        !dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis) ||
        !dl_pass__sh_same_dtype(c, dy, x) || !dl_pass__sh_same_dtype(c, sc, x) ||
        !need_shape(c, dy, x, "dy") || !dl_pass__sh_nonneg_float_attr(c, "epsilon")) {
        return false;
    }
    dl_ir_type norm = {.dtype = x->dtype, .rank = x->rank - axis};
    memcpy(norm.dims, x->dims + axis, sizeof(dl_ir_dim) * (size_t)norm.rank);
    bool ok = sc->rank == norm.rank;
    for (int32_t i = 0; ok && i < norm.rank; i++) {
        ok = sc->dims[i].value == norm.dims[i].value;
    }
    if (!ok) {
        return dl_pass__sh_fail(c,
                                "Scale %s must have exactly the normalised shape %s (broadcast "
                                "scales are not supported)",
                                dl_pass__sh_shape(c, sc), dl_pass__sh_shape(c, &norm));
    }
    *sh_out(c, 0) = *x;
    for (size_t i = 1; i < 3; i++) {
        dl_ir_type *t = sh_out(c, i);
        if (t) {
            *t = *sc;
        }
    }
    return true;
}

// GatherGrad <axis> (dy, indices, x) -> dx: x's type (x only gives the shape); dy must have the
// shape Gather(x, indices) has: x[:axis] + indices.shape + x[axis+1:].
bool dl_pass__sh_gather_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dy") || !need_input(c, 1, "indices") || !need_input(c, 2, "x")) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *idx = sh_in(c, 1), *x = sh_in(c, 2);
    int32_t axis;
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, dy, x) ||
        !dl_pass__sh_need_int_index(c, idx, "indices") ||
        !dl_pass__sh_axis(c, dl_ir_node_attr_int(c->n, "axis"), x->rank, false, &axis)) {
        return false;
    }
    if ((int64_t)x->rank - 1 + idx->rank > DL_MAX_RANK) {
        return dl_pass__sh_fail(c, "the gathered rank %d exceeds the maximum %d",
                                (int)(x->rank - 1 + idx->rank), DL_MAX_RANK);
    }
    dl_ir_type want;
    dl_pass__sh_gather_dims(x, idx, axis, &want);
    if (!need_shape(c, dy, &want, "dy")) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}

// SliceGrad <starts, ends, axes?, steps?> (dy, x) -> dx: x's type; dy has Slice(x)'s shape
// (the forward rule's normalisation: negative starts/ends add the dim, then clamp).
bool dl_pass__sh_slice_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dy") || !need_input(c, 1, "x")) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, dy, x)) {
        return false;
    }
    dl_ir_type want;
    if (!dl_pass__sh_slice_shape(c, x, false, &want)) {
        return false;
    }
    if (!need_shape(c, dy, &want, "dy")) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}

// PadGrad <mode, pads, value> (dy, x) -> dx: x's type; dy has Pad(x)'s shape
// (x.shape + begin pads + end pads; negative pads crop).
bool dl_pass__sh_pad_grad(dl_pass__sh *c) {
    if (!need_input(c, 0, "dy") || !need_input(c, 1, "x")) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, dy, x)) {
        return false;
    }
    size_t n;
    const int64_t *pads = dl_pass__sh_attr_ints(c, "pads", &n, NULL);
    if (n != 2 * (size_t)x->rank) {
        return dl_pass__sh_fail(c, "pads %s must have %d entries for rank %d",
                                dl_pass__sh_ints(c, pads, n), (int)(2 * x->rank), (int)x->rank);
    }
    dl_ir_type want;
    if (!dl_pass__sh_pad_dims(c, x, pads, n, true, &want)) {
        return false;
    }
    if (!need_shape(c, dy, &want, "dy")) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}
