// passes/shape_grad_nn.c — shape rules of the internal gradient ops of the NN family
// (see shape_internal.h): ConvGradWeight, MaxPoolGrad, AveragePoolGrad, BatchNormalizationGrad.
//
// Each gradient op repeats the geometry check of its forward op: dy must be exactly the shape
// the forward op (Conv, MaxPool, AveragePool with the same attributes) gives for x, so a
// mismatch between the autodiff pass and the forward is reported here instead of becoming an
// out-of-bounds access in a kernel. The output sizes come from shape_nn.c's
// dl_pass__sh_spatial_out, the forward ops' own rule. All outputs take x's dtype.
//   ConvGradWeight         (dy: [N, M, OH, OW], x: [N, C, H, W]) -> dw: [M, C/group, kH, kW]
//   MaxPoolGrad            (dy: [N, C, o...], x: [N, C, d...])  -> dx: like x
//   AveragePoolGrad        (dy: [N, C, o...], x: [N, C, d...])  -> dx: like x
//   BatchNormalizationGrad (dy: like x, x: [N, C, ...], scale: [C]) -> dx, dscale?, dbias?: [C]
#include "shape_internal.h"

#include <string.h>

// dy must be [N, ch, o...] for x [N, ...]: the forward's output shape.
// The op's required inputs (its min_inputs in the op table) must be present.
static bool need_inputs(dl_pass__sh *c) {
    size_t n_req = (size_t)dl_ir_op_get_info(c->n->op)->min_inputs;
    for (size_t i = 0; i < n_req; i++) {
        if (!sh_in(c, i)) {
            return dl_pass__sh_fail(c, "input %zu is required", i);
        }
    }
    return true;
}

static bool check_dy(dl_pass__sh *c, const dl_ir_type *dy, const dl_ir_type *x, int64_t ch,
                     const int64_t *o, const char *fwd) {
    bool ok =
        dy->rank == x->rank && dy->dims[0].value == x->dims[0].value && dy->dims[1].value == ch;
    for (int32_t i = 2; ok && i < x->rank; i++) {
        ok = dy->dims[i].value == o[i - 2];
    }
    if (!ok) {
        dl_ir_type want = {.dtype = x->dtype, .rank = x->rank};
        want.dims[0] = x->dims[0];
        want.dims[1] = sh_dim(ch, -1);
        for (int32_t i = 2; i < x->rank; i++) {
            want.dims[i] = sh_dim(o[i - 2], -1);
        }
        return dl_pass__sh_fail(c, "dy must have the %s output shape %s for x %s, got %s", fwd,
                                dl_pass__sh_shape(c, &want), dl_pass__sh_shape(c, x),
                                dl_pass__sh_shape(c, dy));
    }
    return true;
}

// ConvGradWeight (dy: [N, M, OH, OW], x: [N, C, H, W]) -> dw: [M, C/group, kH, kW]
bool dl_pass__sh_conv_grad_weight(dl_pass__sh *c) {
    if (!need_inputs(c)) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, x, dy)) {
        return false;
    }
    if (x->rank != 4 || dy->rank != 4) {
        return dl_pass__sh_fail(c, "dy and x must have rank 4 (N, C, H, W), got dy %s, x %s",
                                dl_pass__sh_shape(c, dy), dl_pass__sh_shape(c, x));
    }
    int64_t group = dl_ir_node_attr_int(c->n, "group");
    int64_t ch = x->dims[1].value, m = dy->dims[1].value;
    if (ch % group != 0 || m % group != 0) {
        return dl_pass__sh_fail(c, "group %lld does not divide the channels: dy %s, x %s",
                                (long long)group, dl_pass__sh_shape(c, dy),
                                dl_pass__sh_shape(c, x));
    }
    if (!dl_ir_node_attr(c->n, "kernel_shape")) {
        return dl_pass__sh_fail(c, "kernel_shape is required");
    }
    int64_t k[2], o[2];
    if (!dl_pass__sh_ints_n(c, "kernel_shape", 2, 1, k) ||
        !dl_pass__sh_spatial_out(c, x, k, false, o) || !check_dy(c, dy, x, m, o, "Conv")) {
        return false;
    }
    dl_ir_type *w = sh_out(c, 0);
    *w = (dl_ir_type){.dtype = x->dtype, .rank = 4};
    w->dims[0] = dy->dims[1];
    w->dims[1] = sh_dim(ch / group, group == 1 ? x->dims[1].sym : -1);
    w->dims[2] = sh_dim(k[0], -1);
    w->dims[3] = sh_dim(k[1], -1);
    return true;
}

// MaxPoolGrad / AveragePoolGrad (dy: [N, C, o...], x: [N, C, d...]) -> dx: like x
bool dl_pass__sh_pool_grad(dl_pass__sh *c) {
    if (!need_inputs(c)) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, x, dy)) {
        return false;
    }
    if (x->rank < 3) {
        return dl_pass__sh_fail(c, "x must have rank >= 3 (N, C, spatial...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    if (!dl_ir_node_attr(c->n, "kernel_shape")) {
        return dl_pass__sh_fail(c, "kernel_shape is required");
    }
    size_t n_sp = (size_t)x->rank - 2;
    int64_t k[DL_MAX_RANK], o[DL_MAX_RANK];
    bool is_max = c->n->op == DL_IR_OP_MAX_POOL_GRAD;
    if (!dl_pass__sh_ints_n(c, "kernel_shape", n_sp, 1, k) ||
        !dl_pass__sh_spatial_out(c, x, k, dl_ir_node_attr_int(c->n, "ceil_mode") != 0, o) ||
        !dl_pass__sh_pool_pads_ok(c, k, n_sp) ||
        !check_dy(c, dy, x, x->dims[1].value, o, is_max ? "MaxPool" : "AveragePool")) {
        return false;
    }
    *sh_out(c, 0) = *x;
    return true;
}

// BatchNormalizationGrad (dy: like x, x: [N, C, ...], scale: [C]) -> dx like x, dscale and
// dbias: [C]
bool dl_pass__sh_batch_norm_grad(dl_pass__sh *c) {
    if (!need_inputs(c)) {
        return false;
    }
    const dl_ir_type *dy = sh_in(c, 0), *x = sh_in(c, 1), *sc = sh_in(c, 2);
    if (!dl_pass__sh_need_float(c, x, "x") || !dl_pass__sh_same_dtype(c, x, dy) ||
        !dl_pass__sh_same_dtype(c, x, sc) || !dl_pass__sh_nonneg_float_attr(c, "epsilon")) {
        return false;
    }
    if (x->rank < 2) {
        return dl_pass__sh_fail(c, "x must have rank >= 2 (N, C, ...), got %s",
                                dl_pass__sh_shape(c, x));
    }
    bool same = dy->rank == x->rank;
    for (int32_t i = 0; same && i < x->rank; i++) {
        same = dy->dims[i].value == x->dims[i].value;
    }
    if (!same) {
        return dl_pass__sh_fail(c, "dy must have the shape of x %s, got %s",
                                dl_pass__sh_shape(c, x), dl_pass__sh_shape(c, dy));
    }
    if (sc->rank != 1 || sc->dims[0].value != x->dims[1].value) {
        return dl_pass__sh_fail(c, "scale must have shape [%lld] (the channels of x %s), got %s",
                                (long long)x->dims[1].value, dl_pass__sh_shape(c, x),
                                dl_pass__sh_shape(c, sc));
    }
    *sh_out(c, 0) = *x;
    for (size_t i = 1; i < 3; i++) {
        dl_ir_type *t = sh_out(c, i);
        if (t) {
            *t = (dl_ir_type){.dtype = x->dtype, .rank = 1};
            t->dims[0] = x->dims[1];
        }
    }
    return true;
}
