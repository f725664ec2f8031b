// passes/autodiff.c — reverse-mode automatic differentiation as an IR pass (dl_pass_autodiff).
//
// Walks the forward nodes the train loss depends on in reverse statement order and, for each
// node with an output gradient, appends the nodes computing its inputs' gradients. Rules are
// composed from ordinary ops where that is exact and cheap (elementwise, MatMul/Gemm, reductions,
// Softmax, shape ops) and use the internal gradient ops of ir_ops.def otherwise (UnaryGrad,
// ConvGradWeight, MaxPoolGrad, LayerNormalizationGrad, the loss grads, ...). Conventions follow
// PyTorch's derivative definitions (e.g. Max splits a tie evenly, Relu's gradient at 0 is 0).
//
// State: grad[v] is the gradient accumulated so far for value id v (NULL: none); needs[v] says
// whether v depends on a trained param (only those get gradients). Several uses of a value add
// their contributions with Add, in reverse statement order (deterministic). A gradient flowing
// into an input that was broadcast is summed back to the input's shape ("sum to shape": a
// ReduceSum over the broadcast axes and a Reshape).
//
// Every added node is shape-inferred as it is created (dl_pass__shape_node), so rules can read
// the types of what they built. New values are named "ad.N" (skipping names the model uses) and
// carry the location of the forward node they differentiate.
#include "dl_pass.h"
#include "shape_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ad {
    dl_ir_module *m;
    dl_diags *d;
    size_t n_vals;       // values that existed before the pass (grad/needs are indexed by them)
    dl_ir_value **grad;  // [n_vals]
    bool *needs;         // [n_vals]
    uint32_t counter;    // for "ad.N" names
    const dl_ir_node *n; // forward node being differentiated
    dl_status st;
} ad;

// ---------------------------------------------------------------------------------------------
// Building blocks

static dl_ir_attr attr_int(const char *name, int64_t v) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_INT, .i = v, .i_sym = -1};
}

static dl_ir_attr attr_float(const char *name, double v) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_FLOAT, .f = v, .i_sym = -1};
}

static dl_ir_attr attr_str(const char *name, const char *s) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_STRING, .s = s, .i_sym = -1};
}

// `v` must live until the node is added (attributes are deep-copied then).
static dl_ir_attr attr_ints(const char *name, int64_t *v, size_t n) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_INTS, .ints = v, .n = n, .i_sym = -1};
}

static void fail(ad *a, dl_status st) {
    if (a->st == DL_OK) {
        a->st = st;
    }
}

static void ad_error(ad *a, const char *fmt, ...) DL_PRINTF(2, 3);
static void ad_error(ad *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (a->n) {
        dl_ir_node_vdiag(a->d, DL_SEV_ERROR, a->n, DL_NO_LOC, "autodiff: ", fmt, ap);
    } else {
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        dl_diag(a->d, DL_SEV_ERROR, DL_NO_LOC, "autodiff: %s", msg);
    }
    va_end(ap);
    fail(a, DL_ERR_UNSUPPORTED);
}

static void fresh_name(ad *a, char *buf, size_t size) {
    do {
        snprintf(buf, size, "ad.%u", a->counter++);
    } while (dl_ir_module_find(a->m, buf));
}

static dl_src_loc cur_loc(const ad *a) {
    return a->n ? a->n->loc : DL_NO_LOC;
}

// Adds a node with n_out outputs (all named fresh) and infers its types. Outputs go to outs[].
static bool node_n(ad *a, dl_ir_op op, dl_ir_value *const *ins, size_t n_in,
                   const dl_ir_attr *attrs, size_t n_attrs, size_t n_out, dl_ir_value **outs) {
    if (a->st != DL_OK) {
        return false;
    }
    char names[64][32];
    const char *np[64];
    if (n_out > 64) {
        ad_error(a, "too many outputs (%zu)", n_out);
        return false;
    }
    for (size_t i = 0; i < n_out; i++) {
        fresh_name(a, names[i], sizeof names[i]);
        np[i] = names[i];
    }
    dl_ir_node *n = NULL;
    dl_status st =
        dl_ir_module_add_node(a->m, op, ins, n_in, np, NULL, n_out, attrs, n_attrs, cur_loc(a), &n);
    if (st != DL_OK) {
        fail(a, st);
        return false;
    }
    if (!dl_pass__shape_node(a->m, n, a->d)) {
        if (a->n) {
            dl_diag(a->d, DL_SEV_NOTE, a->n->loc, "in the gradient of %s '%s'",
                    dl_ir_op_get_info(a->n->op)->name, a->n->outputs[0]->name);
        }
        fail(a, DL_ERR_SHAPE);
        return false;
    }
    for (size_t i = 0; i < n_out; i++) {
        outs[i] = n->outputs[i];
    }
    return true;
}

static dl_ir_value *node1(ad *a, dl_ir_op op, dl_ir_value *const *ins, size_t n_in,
                          const dl_ir_attr *attrs, size_t n_attrs) {
    dl_ir_value *out = NULL;
    return node_n(a, op, ins, n_in, attrs, n_attrs, 1, &out) ? out : NULL;
}

#define N1(a, op, ...)                                                                             \
    node1((a), (op), (dl_ir_value *[]){__VA_ARGS__},                                               \
          sizeof((dl_ir_value *[]){__VA_ARGS__}) / sizeof(dl_ir_value *), NULL, 0)
#define N1A(a, op, attrs, n_attrs, ...)                                                            \
    node1((a), (op), (dl_ir_value *[]){__VA_ARGS__},                                               \
          sizeof((dl_ir_value *[]){__VA_ARGS__}) / sizeof(dl_ir_value *), (attrs), (n_attrs))

// A scalar constant of dtype `dt` (float, or an integer / bool value for those dtypes).
static dl_ir_value *cscalar(ad *a, double v, dl_dtype dt) {
    if (a->st != DL_OK) {
        return NULL;
    }
    char name[32];
    fresh_name(a, name, sizeof name);
    dl_ir_type t = {.dtype = dt, .rank = 0};
    dl_ir_literal *lit = dl_ir_module_new_literal(a->m, dt, 1);
    if (!lit) {
        fail(a, DL_ERR_NOMEM);
        return NULL;
    }
    lit->is_splat = true;
    if (lit->f) {
        lit->f[0] = v;
    } else {
        lit->i[0] = (int64_t)v;
    }
    dl_ir_value *out = NULL;
    dl_status st = dl_ir_module_add_const(a->m, name, &t, lit, cur_loc(a), &out);
    if (st != DL_OK) {
        fail(a, st);
        return NULL;
    }
    return out;
}

static void type_dims(const dl_ir_type *t, int64_t *dims) {
    for (int32_t i = 0; i < t->rank; i++) {
        dims[i] = t->dims[i].value;
    }
}

static dl_ir_value *reshape_to(ad *a, dl_ir_value *g, const dl_ir_type *t) {
    if (!g || dl_ir_type_equal(&g->type, t)) {
        return g;
    }
    int64_t dims[DL_MAX_RANK];
    type_dims(t, dims);
    dl_ir_attr at = attr_ints("shape", dims, (size_t)t->rank);
    return N1A(a, DL_IR_OP_RESHAPE, &at, 1, g);
}

static dl_ir_value *expand_to(ad *a, dl_ir_value *g, const dl_ir_type *t) {
    if (!g || dl_ir_type_equal(&g->type, t)) {
        return g;
    }
    int64_t dims[DL_MAX_RANK];
    type_dims(t, dims);
    dl_ir_attr at = attr_ints("shape", dims, (size_t)t->rank);
    return N1A(a, DL_IR_OP_EXPAND, &at, 1, g);
}

// Sums a gradient of a broadcast result back to the shape of the operand `t`.
static dl_ir_value *sum_to(ad *a, dl_ir_value *g, const dl_ir_type *t) {
    if (!g || a->st != DL_OK) {
        return NULL;
    }
    if (dl_ir_type_equal(&g->type, t)) {
        return g;
    }
    int32_t gr = g->type.rank, tr = t->rank;
    int64_t axes[DL_MAX_RANK];
    size_t n_axes = 0;
    for (int32_t i = 0; i < gr; i++) {
        int32_t ti = i - (gr - tr);
        if (ti < 0 || (t->dims[ti].value == 1 && g->type.dims[i].value != 1)) {
            axes[n_axes++] = i;
        }
    }
    dl_ir_value *s = g;
    if (n_axes) {
        dl_ir_attr at[2] = {attr_ints("axes", axes, n_axes), attr_int("keepdims", 1)};
        s = N1A(a, DL_IR_OP_REDUCE_SUM, at, 2, g);
    }
    return reshape_to(a, s, t);
}

static dl_ir_value *add(ad *a, dl_ir_value *x, dl_ir_value *y) {
    return N1(a, DL_IR_OP_ADD, x, y);
}

static dl_ir_value *mul(ad *a, dl_ir_value *x, dl_ir_value *y) {
    return N1(a, DL_IR_OP_MUL, x, y);
}

static dl_ir_value *mul_c(ad *a, dl_ir_value *x, double c) {
    if (c == 1.0 || !x) {
        return x;
    }
    return mul(a, x, cscalar(a, c, x->type.dtype));
}

static dl_ir_value *neg(ad *a, dl_ir_value *x) {
    return N1(a, DL_IR_OP_NEG, x);
}

static dl_ir_value *cast_float(ad *a, dl_ir_value *x, dl_dtype dt) {
    dl_ir_attr at = attr_str("to", dl_dtype_name(dt));
    return N1A(a, DL_IR_OP_CAST, &at, 1, x);
}

// Adds gradient contribution g to value v (ignored when v needs no gradient).
static void accumulate(ad *a, dl_ir_value *v, dl_ir_value *g) {
    if (!v || !g || a->st != DL_OK || v->id >= a->n_vals || !a->needs[v->id]) {
        return;
    }
    if (!dl_ir_type_equal(&g->type, &v->type)) {
        char gs[128], vs[128];
        dl_ir_type_format(a->m, &g->type, gs, sizeof gs);
        dl_ir_type_format(a->m, &v->type, vs, sizeof vs);
        ad_error(a, "internal error: gradient of '%s' has type %s, expected %s", v->name, gs, vs);
        return;
    }
    dl_ir_value *prev = a->grad[v->id];
    a->grad[v->id] = prev ? add(a, prev, g) : g;
}

static bool wants(const ad *a, const dl_ir_value *v) {
    return v && v->id < a->n_vals && a->needs[v->id];
}

// ---------------------------------------------------------------------------------------------
// Rules

static void rule_matmul(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *w = n->inputs[1];
    // Lift rank-1 operands to matrices: x [K] -> [1, K], w [K] -> [K, 1].
    dl_ir_type xt = x->type, wt = w->type;
    if (xt.rank == 1) {
        xt.rank = 2;
        xt.dims[1] = xt.dims[0];
        xt.dims[0] = (dl_ir_dim){1, -1};
    }
    if (wt.rank == 1) {
        wt.rank = 2;
        wt.dims[1] = (dl_ir_dim){1, -1};
    }
    dl_ir_value *x2 = reshape_to(a, x, &xt), *w2 = reshape_to(a, w, &wt);
    // y2: batch dims broadcast, then [M, N].
    dl_ir_type yt = {.dtype = dy->type.dtype};
    int32_t br = (xt.rank > wt.rank ? xt.rank : wt.rank) - 2;
    yt.rank = br + 2;
    for (int32_t i = 0; i < br; i++) {
        int32_t xi = i - (br - (xt.rank - 2)), wi = i - (br - (wt.rank - 2));
        int64_t xd = xi >= 0 ? xt.dims[xi].value : 1, wd = wi >= 0 ? wt.dims[wi].value : 1;
        yt.dims[i] = (dl_ir_dim){xd > wd ? xd : wd, -1};
        if (xd == 0 || wd == 0) {
            yt.dims[i].value = 0;
        }
    }
    yt.dims[br] = xt.dims[xt.rank - 2];
    yt.dims[br + 1] = wt.dims[wt.rank - 1];
    dl_ir_value *dy2 = reshape_to(a, dy, &yt);
    if (wants(a, x)) {
        int64_t perm[DL_MAX_RANK];
        for (int32_t i = 0; i < wt.rank; i++) {
            perm[i] = i;
        }
        perm[wt.rank - 2] = wt.rank - 1;
        perm[wt.rank - 1] = wt.rank - 2;
        dl_ir_attr at = attr_ints("perm", perm, (size_t)wt.rank);
        dl_ir_value *wT = N1A(a, DL_IR_OP_TRANSPOSE, &at, 1, w2);
        dl_ir_value *dx = sum_to(a, N1(a, DL_IR_OP_MATMUL, dy2, wT), &xt);
        accumulate(a, x, reshape_to(a, dx, &x->type));
    }
    if (wants(a, w)) {
        int64_t perm[DL_MAX_RANK];
        for (int32_t i = 0; i < xt.rank; i++) {
            perm[i] = i;
        }
        perm[xt.rank - 2] = xt.rank - 1;
        perm[xt.rank - 1] = xt.rank - 2;
        dl_ir_attr at = attr_ints("perm", perm, (size_t)xt.rank);
        dl_ir_value *xT = N1A(a, DL_IR_OP_TRANSPOSE, &at, 1, x2);
        dl_ir_value *dw = sum_to(a, N1(a, DL_IR_OP_MATMUL, xT, dy2), &wt);
        accumulate(a, w, reshape_to(a, dw, &w->type));
    }
}

// A convolution's bias gradient: dy summed over the batch and the spatial dims. The backward rules
// emit each bias gradient (Gemm's C too) first, ahead of the products that read the same dy, so
// that its reduction reads dy while it is still in cache (its producer has just written it; the
// transformer's 4 MB dy of Gelu's gradient: 0.37 -> 0.21 ms), and so that data-parallel
// training finds the small bias gradients ready early, in fewer buckets.
static void conv_bias_grad(ad *a, dl_ir_value *b, dl_ir_value *dy) {
    if (wants(a, b)) {
        int64_t axes[3] = {0, 2, 3};
        dl_ir_attr at[2] = {attr_ints("axes", axes, 3), attr_int("keepdims", 0)};
        accumulate(a, b, N1A(a, DL_IR_OP_REDUCE_SUM, at, 2, dy));
    }
}

static void rule_gemm(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *A = n->inputs[0], *B = n->inputs[1], *C = n->n_inputs > 2 ? n->inputs[2] : NULL;
    double alpha = dl_ir_node_attr_float(n, "alpha"), beta = dl_ir_node_attr_float(n, "beta");
    int64_t ta = dl_ir_node_attr_int(n, "transA"), tb = dl_ir_node_attr_int(n, "transB");
    if (wants(a, C)) { // first, as conv_bias_grad's
        accumulate(a, C, sum_to(a, mul_c(a, dy, beta), &C->type));
    }
    if (wants(a, A)) {
        dl_ir_value *dA;
        if (!ta) { // dA = alpha * dy @ B'^T
            dl_ir_attr at[2] = {attr_float("alpha", alpha), attr_int("transB", !tb)};
            dA = N1A(a, DL_IR_OP_GEMM, at, 2, dy, B);
        } else { // dA = alpha * B' @ dy^T
            dl_ir_attr at[3] = {attr_float("alpha", alpha), attr_int("transA", tb),
                                attr_int("transB", 1)};
            dA = N1A(a, DL_IR_OP_GEMM, at, 3, B, dy);
        }
        accumulate(a, A, dA);
    }
    if (wants(a, B)) {
        dl_ir_value *dB;
        if (!tb) { // dB = alpha * A'^T @ dy
            dl_ir_attr at[2] = {attr_float("alpha", alpha), attr_int("transA", !ta)};
            dB = N1A(a, DL_IR_OP_GEMM, at, 2, A, dy);
        } else { // dB = alpha * dy^T @ A'
            dl_ir_attr at[3] = {attr_float("alpha", alpha), attr_int("transA", 1),
                                attr_int("transB", ta)};
            dB = N1A(a, DL_IR_OP_GEMM, at, 3, dy, A);
        }
        accumulate(a, B, dB);
    }
}

// Effective (begin, end) pads of a Conv / ConvTranspose-like node for spatial dim i.
static void conv_geometry(const dl_ir_node *n, const dl_ir_type *x, const dl_ir_type *y,
                          const int64_t *k, int32_t nsp, int64_t *strides, int64_t *dils,
                          int64_t *pads) {
    const dl_ir_attr *as = dl_ir_node_attr(n, "strides"), *ad_ = dl_ir_node_attr(n, "dilations"),
                     *ap = dl_ir_node_attr(n, "pads");
    const char *auto_pad = dl_ir_node_attr_string(n, "auto_pad");
    for (int32_t i = 0; i < nsp; i++) {
        strides[i] = as ? as->ints[i] : 1;
        dils[i] = ad_ ? ad_->ints[i] : 1;
        int64_t pb = ap ? ap->ints[i] : 0, pe = ap ? ap->ints[i + nsp] : 0;
        dl_ir_conv_pads(auto_pad, x->dims[2 + i].value, y->dims[2 + i].value, k[i], strides[i],
                        dils[i], pb, pe, &pads[i], &pads[i + nsp]);
    }
}

static void rule_conv(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
    int32_t nsp = x->type.rank - 2;
    if (nsp != 2) {
        ad_error(a, "gradients of %d-D convolutions are not supported (2-D only)", nsp);
        return;
    }
    int64_t k[2] = {w->type.dims[2].value, w->type.dims[3].value};
    int64_t strides[2], dils[2], pads[4];
    conv_geometry(n, &x->type, &n->outputs[0]->type, k, nsp, strides, dils, pads);
    int64_t group = dl_ir_node_attr_int(n, "group");
    conv_bias_grad(a, b, dy);
    if (wants(a, x)) {
        // dx = ConvTranspose(dy, w): its output is (o-1)*s - pb - pe + (k-1)*d + 1 + opad.
        int64_t opad[2];
        for (int32_t i = 0; i < 2; i++) {
            int64_t o = dy->type.dims[2 + i].value;
            int64_t full = (o - 1) * strides[i] - pads[i] - pads[i + 2] + (k[i] - 1) * dils[i] + 1;
            opad[i] = x->type.dims[2 + i].value - full;
        }
        dl_ir_attr at[6] = {attr_ints("strides", strides, 2),     attr_ints("dilations", dils, 2),
                            attr_ints("pads", pads, 4),           attr_ints("kernel_shape", k, 2),
                            attr_ints("output_padding", opad, 2), attr_int("group", group)};
        accumulate(a, x, N1A(a, DL_IR_OP_CONV_TRANSPOSE, at, 6, dy, w));
    }
    if (wants(a, w)) {
        dl_ir_attr at[5] = {attr_ints("strides", strides, 2), attr_ints("dilations", dils, 2),
                            attr_ints("pads", pads, 4), attr_ints("kernel_shape", k, 2),
                            attr_int("group", group)};
        accumulate(a, w, N1A(a, DL_IR_OP_CONV_GRAD_WEIGHT, at, 5, dy, x));
    }
}

static void rule_conv_transpose(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
    int32_t nsp = x->type.rank - 2;
    int64_t group = dl_ir_node_attr_int(n, "group");
    if (nsp != 2 || dl_ir_node_attr(n, "output_shape") ||
        strcmp(dl_ir_node_attr_string(n, "auto_pad"), "NOTSET") != 0) {
        ad_error(a, "gradients of ConvTranspose are supported for 2-D with explicit pads only");
        return;
    }
    int64_t k[2] = {w->type.dims[2].value, w->type.dims[3].value};
    int64_t strides[2], dils[2], pads[4];
    const dl_ir_attr *as = dl_ir_node_attr(n, "strides"), *adl = dl_ir_node_attr(n, "dilations"),
                     *ap = dl_ir_node_attr(n, "pads");
    for (int32_t i = 0; i < 2; i++) {
        strides[i] = as ? as->ints[i] : 1;
        dils[i] = adl ? adl->ints[i] : 1;
        pads[i] = ap ? ap->ints[i] : 0;
        pads[i + 2] = ap ? ap->ints[i + 2] : 0;
    }
    conv_bias_grad(a, b, dy);
    if (wants(a, x)) {
        dl_ir_attr at[5] = {attr_ints("strides", strides, 2), attr_ints("dilations", dils, 2),
                            attr_ints("pads", pads, 4), attr_ints("kernel_shape", k, 2),
                            attr_int("group", group)};
        accumulate(a, x, N1A(a, DL_IR_OP_CONV, at, 5, dy, w));
    }
    if (wants(a, w)) {
        if (group != 1) {
            ad_error(a, "the weight gradient of a grouped ConvTranspose is not supported");
            return;
        }
        // dw[ci, co, i, j] = sum x[n, ci, h, w] * dy[n, co, h*s - p + i*d, ...]: ConvGradWeight
        // with the roles of "output gradient" and "input" swapped.
        dl_ir_attr at[5] = {attr_ints("strides", strides, 2), attr_ints("dilations", dils, 2),
                            attr_ints("pads", pads, 4), attr_ints("kernel_shape", k, 2),
                            attr_int("group", 1)};
        accumulate(a, w, N1A(a, DL_IR_OP_CONV_GRAD_WEIGHT, at, 5, x, dy));
    }
}

// Reduction axes of a Reduce* node as a keepdims shape of x; false for "no reduction".
static bool reduce_keep_type(const dl_ir_node *n, dl_ir_type *keep, double *count) {
    const dl_ir_value *x = n->inputs[0];
    const dl_ir_attr *axes = dl_ir_node_attr(n, "axes");
    *keep = x->type;
    *count = 1;
    bool red[DL_MAX_RANK] = {false};
    if (!axes || axes->n == 0) {
        if (dl_ir_node_attr_int(n, "noop_with_empty_axes")) {
            return false;
        }
        for (int32_t i = 0; i < x->type.rank; i++) {
            red[i] = true;
        }
    } else {
        for (size_t i = 0; i < axes->n; i++) {
            int64_t ax = axes->ints[i] < 0 ? axes->ints[i] + x->type.rank : axes->ints[i];
            red[ax] = true;
        }
    }
    for (int32_t i = 0; i < x->type.rank; i++) {
        if (red[i]) {
            *count *= (double)x->type.dims[i].value;
            keep->dims[i] = (dl_ir_dim){1, -1};
        }
    }
    keep->dtype = n->outputs[0]->type.dtype;
    return true;
}

static void rule_reduce(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    dl_ir_type keep;
    double count;
    if (!reduce_keep_type(n, &keep, &count)) {
        accumulate(a, x, dy);
        return;
    }
    dl_ir_value *dyk = reshape_to(a, dy, &keep);
    if (n->op == DL_IR_OP_REDUCE_SUM) {
        accumulate(a, x, expand_to(a, dyk, &x->type));
    } else if (n->op == DL_IR_OP_REDUCE_MEAN) {
        accumulate(a, x, expand_to(a, mul_c(a, dyk, count > 0 ? 1.0 / count : 0.0), &x->type));
    } else { // ReduceMax / ReduceMin: ties share the gradient evenly (PyTorch's amax/amin)
        dl_ir_value *yk = reshape_to(a, y, &keep);
        dl_ir_value *mask = cast_float(a, N1(a, DL_IR_OP_EQUAL, x, yk), x->type.dtype);
        const dl_ir_attr *axes = dl_ir_node_attr(n, "axes");
        dl_ir_attr at[2] = {attr_int("keepdims", 1), {0}};
        size_t na = 1;
        if (axes && axes->n) { // else every axis, ReduceSum's default
            at[na++] = *axes;
        }
        dl_ir_value *cnt = N1A(a, DL_IR_OP_REDUCE_SUM, at, na, mask);
        dl_ir_value *g = N1(a, DL_IR_OP_DIV, mul(a, mask, dyk), cnt);
        accumulate(a, x, g);
    }
}

static void rule_softmax(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    int64_t axis = dl_ir_node_attr_int(n, "axis");
    dl_ir_attr at[2] = {attr_ints("axes", &axis, 1), attr_int("keepdims", 1)};
    if (n->op == DL_IR_OP_SOFTMAX) { // dx = y * (dy - sum(dy * y))
        dl_ir_value *s = N1A(a, DL_IR_OP_REDUCE_SUM, at, 2, mul(a, dy, y));
        accumulate(a, x, mul(a, y, N1(a, DL_IR_OP_SUB, dy, s)));
    } else { // dx = dy - exp(y) * sum(dy)
        dl_ir_value *s = N1A(a, DL_IR_OP_REDUCE_SUM, at, 2, dy);
        dl_ir_value *e = N1(a, DL_IR_OP_EXP, y);
        accumulate(a, x, N1(a, DL_IR_OP_SUB, dy, mul(a, e, s)));
    }
}

// dx = UnaryGrad<op = the forward op's name>(dy, x), passing the attributes its derivative reads.
static void rule_unary(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_attr at[3];
    size_t na = 0;
    at[na++] = attr_str("op", dl_ir_op_get_info(n->op)->name);
    if (dl_ir_op_find_attr_spec(n->op, "alpha")) {
        at[na++] = attr_float("alpha", dl_ir_node_attr_float(n, "alpha"));
    }
    if (dl_ir_op_find_attr_spec(n->op, "approximate")) {
        at[na++] = attr_str("approximate", dl_ir_node_attr_string(n, "approximate"));
    }
    // Relu's derivative reads its output instead of its input (as PyTorch's threshold_backward):
    // relu(x) <= 0 exactly when x <= 0 (-0 included), and a NaN x gives a NaN output, so the
    // gradient is the same bits, and the input need not stay alive for the backward pass (it
    // can then live only in the registers of a fused GEMM epilogue: passes/fusion.c).
    dl_ir_value *at_x = n->op == DL_IR_OP_RELU ? n->outputs[0] : n->inputs[0];
    accumulate(a, n->inputs[0], N1A(a, DL_IR_OP_UNARY_GRAD, at, na, dy, at_x));
}

// Clip: the gradient passes where min <= x <= max (PyTorch's clamp backward).
static void rule_clip(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0];
    dl_ir_value *lo = n->n_inputs > 1 ? n->inputs[1] : NULL;
    dl_ir_value *hi = n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (!lo && dl_ir_node_attr(n, "min")) {
        lo = cscalar(a, dl_ir_node_attr_float(n, "min"), x->type.dtype);
    }
    if (!hi && dl_ir_node_attr(n, "max")) {
        hi = cscalar(a, dl_ir_node_attr_float(n, "max"), x->type.dtype);
    }
    dl_ir_value *out = N1(a, DL_IR_OP_LESS, x, lo ? lo : x); // all false when no bound
    if (hi) {
        out = N1(a, DL_IR_OP_OR, out, N1(a, DL_IR_OP_GREATER, x, hi));
    }
    dl_ir_value *zero = cscalar(a, 0, dy->type.dtype);
    accumulate(a, x, N1(a, DL_IR_OP_WHERE, out, zero, dy));
    if (lo && lo->id < a->n_vals && wants(a, lo)) {
        ad_error(a, "gradients with respect to Clip's bounds are not supported");
    }
}

static void rule_minmax(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *y = n->outputs[0];
    if (n->n_inputs == 1) {
        accumulate(a, n->inputs[0], dy);
        return;
    }
    // Every input equal to the result shares the gradient evenly.
    dl_ir_value *eq[64];
    dl_ir_value *cnt = NULL;
    for (size_t i = 0; i < n->n_inputs && i < 64; i++) {
        eq[i] = cast_float(a, N1(a, DL_IR_OP_EQUAL, n->inputs[i], y), y->type.dtype);
        cnt = cnt ? add(a, cnt, eq[i]) : eq[i];
    }
    dl_ir_value *share = N1(a, DL_IR_OP_DIV, dy, cnt);
    for (size_t i = 0; i < n->n_inputs && i < 64; i++) {
        if (wants(a, n->inputs[i])) {
            accumulate(a, n->inputs[i], sum_to(a, mul(a, share, eq[i]), &n->inputs[i]->type));
        }
    }
}

static void rule_pow(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *p = n->inputs[1], *y = n->outputs[0];
    if (wants(a, x)) { // dy * p * x^(p-1)
        dl_ir_value *pm1 = N1(a, DL_IR_OP_SUB, p, cscalar(a, 1, p->type.dtype));
        dl_ir_value *g = mul(a, mul(a, dy, p), N1(a, DL_IR_OP_POW, x, pm1));
        accumulate(a, x, sum_to(a, g, &x->type));
    }
    if (wants(a, p)) { // dy * y * log(x), 0 where x == 0
        dl_ir_value *g = mul(a, mul(a, dy, y), N1(a, DL_IR_OP_LOG, x));
        dl_ir_value *z = cscalar(a, 0, x->type.dtype);
        g = N1(a, DL_IR_OP_WHERE, N1(a, DL_IR_OP_EQUAL, x, z), z, g);
        accumulate(a, p, sum_to(a, g, &p->type));
    }
}

static void rule_layer_norm(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *scale = n->inputs[1];
    dl_ir_value *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    dl_ir_attr at[2] = {attr_int("axis", dl_ir_node_attr_int(n, "axis")),
                        attr_float("epsilon", dl_ir_node_attr_float(n, "epsilon"))};
    dl_ir_value *outs[3] = {NULL, NULL, NULL};
    size_t n_out = bias ? 3 : 2;
    if (!node_n(a, DL_IR_OP_LAYER_NORMALIZATION_GRAD, (dl_ir_value *[]){dy, x, scale}, 3, at, 2,
                n_out, outs)) {
        return;
    }
    accumulate(a, x, outs[0]);
    accumulate(a, scale, outs[1]);
    if (bias) {
        accumulate(a, bias, outs[2]);
    }
}

static void rule_mse(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *t = n->inputs[1];
    const char *red = dl_ir_node_attr_string(n, "reduction");
    dl_ir_value *diff = N1(a, DL_IR_OP_SUB, x, t);
    double c = 2.0;
    if (strcmp(red, "mean") == 0 && diff) {
        int64_t cnt = dl_ir_type_numel(&diff->type);
        c = cnt > 0 ? 2.0 / (double)cnt : 0.0;
    }
    dl_ir_value *g = mul(a, mul_c(a, diff, c), dy);
    accumulate(a, x, sum_to(a, g, &x->type));
    if (wants(a, t)) {
        accumulate(a, t, sum_to(a, neg(a, g), &t->type));
    }
}

// Copies the node's attributes (at most cap).
static size_t copy_attrs(const dl_ir_node *n, dl_ir_attr *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n->n_attrs && k < cap; i++) {
        out[k++] = n->attrs[i];
    }
    return k;
}

static void rule_shape_like(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0];
    dl_ir_op op = n->op;
    if (op == DL_IR_OP_TRANSPOSE) {
        const dl_ir_attr *p = dl_ir_node_attr(n, "perm");
        int64_t inv[DL_MAX_RANK];
        int32_t r = x->type.rank;
        for (int32_t i = 0; i < r; i++) {
            int64_t pi = p && p->n ? p->ints[i] : r - 1 - i;
            inv[pi] = i;
        }
        dl_ir_attr at = attr_ints("perm", inv, (size_t)r);
        accumulate(a, x, N1A(a, DL_IR_OP_TRANSPOSE, &at, 1, dy));
    } else if (op == DL_IR_OP_EXPAND) {
        accumulate(a, x, sum_to(a, dy, &x->type));
    } else if (op == DL_IR_OP_SLICE || op == DL_IR_OP_PAD) {
        dl_ir_attr at[8];
        size_t na = copy_attrs(n, at, 8);
        accumulate(
            a, x,
            N1A(a, op == DL_IR_OP_SLICE ? DL_IR_OP_SLICE_GRAD : DL_IR_OP_PAD_GRAD, at, na, dy, x));
        if (op == DL_IR_OP_PAD && n->n_inputs > 1 && wants(a, n->inputs[1])) {
            ad_error(a, "gradients with respect to Pad's constant value are not supported");
        }
    } else if (op == DL_IR_OP_GATHER) {
        dl_ir_attr at[2];
        size_t na = copy_attrs(n, at, 2);
        accumulate(a, x, N1A(a, DL_IR_OP_GATHER_GRAD, at, na, dy, n->inputs[1], x));
    } else { // Reshape, Flatten, Squeeze, Unsqueeze
        accumulate(a, x, reshape_to(a, dy, &x->type));
    }
}

static void rule_concat(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    int32_t r = dy->type.rank;
    int64_t axis = dl_ir_node_attr_int(n, "axis");
    if (axis < 0) {
        axis += r;
    }
    int64_t off = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        dl_ir_value *x = n->inputs[i];
        int64_t len = x->type.dims[axis].value;
        if (wants(a, x)) {
            int64_t st = off, en = off + len;
            dl_ir_attr at[3] = {attr_ints("starts", &st, 1), attr_ints("ends", &en, 1),
                                attr_ints("axes", &axis, 1)};
            accumulate(a, x, N1A(a, DL_IR_OP_SLICE, at, 3, dy));
        }
        off += len;
    }
}

// Split: the input's gradient is the concatenation of the outputs' (zeros for outputs that have
// none).
static void rule_split(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    (void)dy; // each output's gradient is read below (some may be absent)
    dl_ir_value *parts[64];
    size_t k = 0;
    for (size_t i = 0; i < n->n_outputs && i < 64; i++) {
        dl_ir_value *o = n->outputs[i];
        dl_ir_value *g = o->id < a->n_vals ? a->grad[o->id] : NULL;
        if (!g) {
            g = expand_to(a, cscalar(a, 0, o->type.dtype), &o->type);
        }
        parts[k++] = g;
    }
    dl_ir_attr at = attr_int("axis", dl_ir_node_attr_int(n, "axis"));
    accumulate(a, n->inputs[0], node1(a, DL_IR_OP_CONCAT, parts, k, &at, 1));
}

static void rule_loss(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    if (n->n_outputs > 1 && n->outputs[1]->id < a->n_vals && a->grad[n->outputs[1]->id]) {
        ad_error(a, "gradients through the log_prob output are not supported");
        return;
    }
    dl_ir_value *ins[4] = {dy, n->inputs[0], n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : NULL};
    size_t n_in = ins[3] ? 4 : 3;
    dl_ir_attr at[4];
    size_t na = copy_attrs(n, at, 4);
    dl_ir_op op = n->op == DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS
                      ? DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD
                      : DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS_GRAD;
    accumulate(a, n->inputs[0], node1(a, op, ins, n_in, at, na));
    if (n->n_inputs > 2 && wants(a, n->inputs[2])) {
        ad_error(a, "gradients with respect to class weights are not supported");
    }
}

// A bool / int scalar const that is true (non-zero).
static bool const_true(const dl_ir_value *v) {
    return v && v->kind == DL_IR_VAL_CONST && v->lit && v->lit->n >= 1 &&
           (v->lit->i ? v->lit->i[0] != 0 : v->lit->f[0] != 0);
}

// Dropout: the training-mode clone (training_mode a true const) scales the kept elements,
// dx = dy * mask / (1 - ratio); the infer-mode op is the identity.
static void rule_dropout(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0];
    bool training = n->n_inputs > 2 && const_true(n->inputs[2]);
    if (!training) {
        accumulate(a, x, dy);
        return;
    }
    if (n->n_outputs < 2) {
        ad_error(a, "internal error: a training-mode Dropout without its mask output");
        return;
    }
    dl_ir_value *mask = cast_float(a, n->outputs[1], dy->type.dtype);
    dl_ir_value *g = mul(a, dy, mask);
    dl_ir_value *ratio = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (ratio) { // dx = dy * mask / (1 - ratio); 0 when ratio == 1 (every element dropped)
        dl_ir_value *keep = N1(a, DL_IR_OP_SUB, cscalar(a, 1, ratio->type.dtype), ratio);
        dl_ir_value *z = cscalar(a, 0, dy->type.dtype);
        dl_ir_value *all = N1(a, DL_IR_OP_EQUAL, keep, z);
        dl_ir_value *safe = N1(a, DL_IR_OP_WHERE, all, cscalar(a, 1, ratio->type.dtype), keep);
        g = N1(a, DL_IR_OP_DIV, g, cast_float(a, safe, dy->type.dtype));
        g = N1(a, DL_IR_OP_WHERE, all, z, g);
    } else {
        double r = dl_ir_node_attr_float(n, "ratio");
        g = mul_c(a, g, r < 1 ? 1.0 / (1.0 - r) : 0.0);
    }
    accumulate(a, x, g);
}

// BatchNormalization in training mode (the clone autodiff made): batch statistics, so the
// gradient reaches x, scale and B; the running statistics get none.
static void rule_batch_norm(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    if (dl_ir_node_attr_int(n, "training_mode") == 0) {
        ad_error(a, "internal error: an inference-mode BatchNormalization in the train step");
        return;
    }
    dl_ir_value *x = n->inputs[0], *scale = n->inputs[1], *bias = n->inputs[2];
    dl_ir_attr at = attr_float("epsilon", dl_ir_node_attr_float(n, "epsilon"));
    dl_ir_value *outs[3] = {NULL, NULL, NULL};
    if (!node_n(a, DL_IR_OP_BATCH_NORMALIZATION_GRAD, (dl_ir_value *[]){dy, x, scale}, 3, &at, 1, 3,
                outs)) {
        return;
    }
    accumulate(a, x, outs[0]);
    accumulate(a, scale, outs[1]);
    accumulate(a, bias, outs[2]);
}

static void rule_add(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    accumulate(a, n->inputs[0], sum_to(a, dy, &n->inputs[0]->type));
    accumulate(a, n->inputs[1], sum_to(a, dy, &n->inputs[1]->type));
}

static void rule_sub(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    accumulate(a, n->inputs[0], sum_to(a, dy, &n->inputs[0]->type));
    if (wants(a, n->inputs[1])) {
        accumulate(a, n->inputs[1], sum_to(a, neg(a, dy), &n->inputs[1]->type));
    }
}

static void rule_mul(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    if (wants(a, n->inputs[0])) {
        accumulate(a, n->inputs[0], sum_to(a, mul(a, dy, n->inputs[1]), &n->inputs[0]->type));
    }
    if (wants(a, n->inputs[1])) {
        accumulate(a, n->inputs[1], sum_to(a, mul(a, dy, n->inputs[0]), &n->inputs[1]->type));
    }
}

static void rule_div(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0], *w = n->inputs[1];
    if (wants(a, x)) {
        accumulate(a, x, sum_to(a, N1(a, DL_IR_OP_DIV, dy, w), &x->type));
    }
    if (wants(a, w)) { // -dy * y / w
        dl_ir_value *g = neg(a, N1(a, DL_IR_OP_DIV, mul(a, dy, n->outputs[0]), w));
        accumulate(a, w, sum_to(a, g, &w->type));
    }
}

static void rule_neg(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    accumulate(a, n->inputs[0], neg(a, dy));
}

static void rule_identity(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    accumulate(a, n->inputs[0], dy);
}

// AllReduceMean is linear and the same map on every rank (y = (1/R) sum_r x_r), so its adjoint is
// itself: each rank's x_r receives the mean over ranks of the dy the ranks computed.
static void rule_all_reduce_mean(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    accumulate(a, n->inputs[0], N1(a, DL_IR_OP_ALL_REDUCE_MEAN, dy));
}

static void rule_cast(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    if (dl_dtype_is_float(n->inputs[0]->type.dtype)) {
        accumulate(a, n->inputs[0],
                   n->inputs[0]->type.dtype == dy->type.dtype
                       ? dy
                       : cast_float(a, dy, n->inputs[0]->type.dtype));
    }
}

static void rule_where(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *c = n->inputs[0];
    dl_ir_value *z = cscalar(a, 0, dy->type.dtype);
    if (wants(a, n->inputs[1])) {
        accumulate(a, n->inputs[1],
                   sum_to(a, N1(a, DL_IR_OP_WHERE, c, dy, z), &n->inputs[1]->type));
    }
    if (wants(a, n->inputs[2])) {
        accumulate(a, n->inputs[2],
                   sum_to(a, N1(a, DL_IR_OP_WHERE, c, z, dy), &n->inputs[2]->type));
    }
}

// MaxPool / AveragePool: MaxPoolGrad / AveragePoolGrad with the forward's attributes.
static void rule_pool(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_attr at[8];
    size_t na = copy_attrs(n, at, 8);
    dl_ir_op g = n->op == DL_IR_OP_MAX_POOL ? DL_IR_OP_MAX_POOL_GRAD : DL_IR_OP_AVERAGE_POOL_GRAD;
    accumulate(a, n->inputs[0], N1A(a, g, at, na, dy, n->inputs[0]));
}

static void rule_global_pool(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    dl_ir_value *x = n->inputs[0];
    double cnt = 1;
    for (int32_t i = 2; i < x->type.rank; i++) {
        cnt *= (double)x->type.dims[i].value;
    }
    accumulate(a, x, expand_to(a, mul_c(a, dy, cnt > 0 ? 1.0 / cnt : 0.0), &x->type));
}

// Integer / bool results (comparisons, logic, ArgMax) carry no gradient.
static void rule_none(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    (void)a, (void)n, (void)dy;
}

static void rule_internal(ad *a, const dl_ir_node *n, dl_ir_value *dy) {
    (void)n, (void)dy;
    ad_error(a, "internal gradient ops have no second derivative");
}

// One rule per op, from the grad column of ir/ir_ops.def.
typedef void (*grad_rule)(ad *a, const dl_ir_node *n, dl_ir_value *dy);
static const grad_rule grad_rules[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, gr, ...)                                                                         \
    [DL_IR_OP_##e] = rule_##gr,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(grad_rules) == DL_IR_OP_COUNT, "one gradient rule per op");

static void differentiate(ad *a, const dl_ir_node *n) {
    grad_rule rule = grad_rules[n->op];
    // Split reads each output's gradient itself (some may be absent); every other rule needs
    // the first output's.
    dl_ir_value *dy = a->grad[n->outputs[0]->id];
    if (!dy && rule != rule_split) {
        return;
    }
    rule(a, n, dy);
}

// ---------------------------------------------------------------------------------------------
// Driver

static bool is_frozen(const dl_ir_train *t, const dl_ir_value *p) {
    for (size_t i = 0; i < t->n_freeze; i++) {
        if (t->freeze[i] == p) {
            return true;
        }
    }
    return false;
}

// Ops that behave differently in the train step: BatchNormalization in inference mode (the
// train step uses batch statistics and updates the running ones) and an active Dropout.
static bool mode_dependent(const dl_ir_node *n) {
    if (n->op == DL_IR_OP_BATCH_NORMALIZATION) {
        return dl_ir_node_attr_int(n, "training_mode") == 0;
    }
    if (n->op == DL_IR_OP_DROPOUT) {
        bool has_ratio = n->n_inputs > 1 && n->inputs[1];
        bool train = n->n_inputs > 2 && const_true(n->inputs[2]);
        return !train && (has_ratio || dl_ir_node_attr_float(n, "ratio") > 0);
    }
    return false;
}

// A BatchNormalization the train step computes with statistics synchronised across data-parallel
// ranks (the train block's sync_batchnorm = true), whatever its training_mode.
static bool sync_bn(const dl_ir_module *m, const dl_ir_node *n) {
    return n->op == DL_IR_OP_BATCH_NORMALIZATION && m->train && m->train->sync_bn;
}

// The training clone of BatchNormalization with synchronised statistics (sync_batchnorm = true),
// as the ops PyTorch's SyncBatchNorm computes, each rank on its own batch of the same size:
//   mean = AllReduceMean(ReduceMean(x))            over every axis but the channel (axis 1)
//   var  = AllReduceMean(ReduceMean((x - mean)^2)) the global batch's biased variance
//   y    = (x - mean) * (scale / sqrt(var + eps)) + B
// so every rank normalises with the global batch's statistics (the mean of equal-sized ranks'
// means is the global mean; likewise the variance about the global mean). Autodiff then derives
// the backward through the same ops: AllReduceMean's adjoint is itself, so the backward
// reduces the per-channel sums of dy and dy * (x - mean) across ranks, as SyncBatchNorm's does.
// In one process AllReduceMean is the identity and this is BatchNormalization's math. The running
// statistics become mean*(1-momentum) + running*momentum (biased variance, as the fused op).
static bool clone_sync_bn(ad *a, const dl_ir_node *n, dl_ir_value **ins, dl_ir_value **outs) {
    dl_ir_value *x = ins[0], *scale = ins[1], *bias = ins[2];
    const dl_ir_type *xt = &x->type;
    if (xt->rank < 2 || !dl_dtype_is_float(xt->dtype)) {
        ad_error(a, "sync_batchnorm needs a float input of rank >= 2 (got rank %d)", (int)xt->rank);
        return false;
    }
    int64_t axes[DL_MAX_RANK], cdims[DL_MAX_RANK];
    size_t n_axes = 0;
    for (int32_t i = 0; i < xt->rank; i++) {
        cdims[i] = i == 1 ? xt->dims[1].value : 1;
        if (i != 1) {
            axes[n_axes++] = i;
        }
    }
    dl_ir_attr red[2] = {attr_ints("axes", axes, n_axes), attr_int("keepdims", 1)};
    dl_ir_attr shp = attr_ints("shape", cdims, (size_t)xt->rank);
    double eps = dl_ir_node_attr_float(n, "epsilon"), mom = dl_ir_node_attr_float(n, "momentum");
    dl_ir_value *mean = N1(a, DL_IR_OP_ALL_REDUCE_MEAN, N1A(a, DL_IR_OP_REDUCE_MEAN, red, 2, x));
    dl_ir_value *d = N1(a, DL_IR_OP_SUB, x, mean);
    dl_ir_value *var =
        N1(a, DL_IR_OP_ALL_REDUCE_MEAN, N1A(a, DL_IR_OP_REDUCE_MEAN, red, 2, mul(a, d, d)));
    dl_ir_value *inv =
        N1(a, DL_IR_OP_RECIPROCAL, N1(a, DL_IR_OP_SQRT, add(a, var, cscalar(a, eps, xt->dtype))));
    dl_ir_value *g = mul(a, inv, N1A(a, DL_IR_OP_RESHAPE, &shp, 1, scale));
    outs[0] = add(a, mul(a, d, g), N1A(a, DL_IR_OP_RESHAPE, &shp, 1, bias));
    dl_ir_value *stats[2] = {mean, var};
    for (int k = 0; k < 2 && a->st == DL_OK; k++) {
        dl_ir_value *p = n->inputs[3 + k];
        if (!p || p->kind != DL_IR_VAL_PARAM) {
            continue;
        }
        dl_ir_value *now = reshape_to(a, stats[k], &ins[3 + k]->type);
        dl_ir_value *run = add(a, mul_c(a, ins[3 + k], mom), mul_c(a, now, 1.0 - mom));
        if (run && !DL_VEC_PUSH(&a->m->assigns, ((dl_ir_assign){p, run}))) {
            fail(a, DL_ERR_NOMEM);
        }
    }
    return a->st == DL_OK && outs[0];
}

// The int64 step counter the training-mode Dropout clones share (created on first use).
static dl_ir_value *step_counter(ad *a) {
    if (!a->m->step_counter) {
        a->m->step_counter = cscalar(a, 0, DL_DT_INT64);
    }
    return a->m->step_counter;
}

// Appends the training-mode clone of forward node n (inputs already mapped in `ins`). Returns
// the clone's outputs in outs[] (n->n_outputs of them, in n's order).
static bool clone_for_training(ad *a, const dl_ir_node *n, dl_ir_value **ins, dl_ir_value **outs) {
    dl_ir_attr at[16];
    size_t na = 0;
    for (size_t i = 0; i < n->n_attrs && na < 15; i++) {
        if (strcmp(n->attrs[i].name, "training_mode") != 0) {
            at[na++] = n->attrs[i];
        }
    }
    if (sync_bn(a->m, n)) {
        return clone_sync_bn(a, n, ins, outs);
    }
    if (n->op == DL_IR_OP_BATCH_NORMALIZATION && mode_dependent(n)) {
        at[na++] = attr_int("training_mode", 1);
        dl_ir_value *o3[3];
        if (!node_n(a, n->op, ins, n->n_inputs, at, na, 3, o3)) {
            return false;
        }
        outs[0] = o3[0];
        // The running statistics become the params' new values at the end of the step.
        for (int k = 1; k <= 2; k++) {
            dl_ir_value *p = n->inputs[2 + k];
            if (p && p->kind == DL_IR_VAL_PARAM &&
                !DL_VEC_PUSH(&a->m->assigns, ((dl_ir_assign){p, o3[k]}))) {
                fail(a, DL_ERR_NOMEM);
                return false;
            }
        }
        return true;
    }
    if (n->op == DL_IR_OP_DROPOUT && mode_dependent(n)) {
        dl_ir_value *train = cscalar(a, 1, DL_DT_BOOL); // named before the counter, always
        dl_ir_value *counter = step_counter(a);
        dl_ir_value *din[4] = {ins[0], n->n_inputs > 1 ? ins[1] : NULL, train, counter};
        dl_ir_value *o2[2];
        if (!node_n(a, n->op, din, 4, at, na, 2, o2)) {
            return false;
        }
        outs[0] = o2[0];
        if (n->n_outputs > 1) {
            outs[1] = o2[1];
        }
        return true;
    }
    return node_n(a, n->op, ins, n->n_inputs, at, na, n->n_outputs, outs);
}

dl_status dl_pass_autodiff(dl_ir_module *m, dl_diags *d) {
    if (m->has_backward) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "autodiff: the module already has a backward pass");
        return DL_ERR_INVALID_ARG;
    }
    const dl_ir_train *t = m->train;
    if (!t || !t->loss) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "autodiff: the model has no train block");
        return DL_ERR_INVALID_ARG;
    }
    dl_ir_value *loss = t->loss;
    if (loss->type.rank != 0 || !dl_dtype_is_float(loss->type.dtype)) {
        char ty[128];
        dl_ir_type_format(m, &loss->type, ty, sizeof ty);
        dl_diag(d, DL_SEV_ERROR, t->loc, "train: the loss '%s' must be a float scalar, got %s",
                loss->name, ty);
        return DL_ERR_SHAPE;
    }
    ad a = {.m = m, .d = d};
    size_t n_fwd = m->nodes.len, nv0 = m->values.len;
    bool *on_path = dl_mem_calloc(nv0 ? nv0 : 1, sizeof *on_path);
    dl_ir_value **tmap = dl_mem_calloc(nv0 ? nv0 : 1, sizeof *tmap);
    DL_VEC(const dl_ir_node *) seq = {0};
    if (!on_path || !tmap) {
        free(on_path);
        free(tmap);
        return DL_ERR_NOMEM;
    }
    // Backward reachability from the loss: the forward nodes the loss depends on.
    on_path[loss->id] = true;
    for (size_t i = n_fwd; i-- > 0;) {
        const dl_ir_node *n = m->nodes.data[i];
        bool used = false;
        for (size_t k = 0; k < n->n_outputs; k++) {
            used |= on_path[n->outputs[k]->id];
        }
        for (size_t k = 0; used && k < n->n_inputs; k++) {
            if (n->inputs[k]) {
                on_path[n->inputs[k]->id] = true;
            }
        }
    }
    // The training graph's forward part: the nodes on the path in order, with training-mode
    // clones of mode-dependent nodes and of every node downstream of one.
    for (size_t i = 0; i < n_fwd && a.st == DL_OK; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        bool used = false;
        for (size_t k = 0; k < n->n_outputs; k++) {
            used |= on_path[n->outputs[k]->id];
        }
        if (!used) {
            continue;
        }
        bool clone = mode_dependent(n) || sync_bn(m, n);
        dl_ir_value *ins[64];
        for (size_t k = 0; k < n->n_inputs && k < 64; k++) {
            dl_ir_value *v = n->inputs[k];
            ins[k] = v && v->id < nv0 && tmap[v->id] ? tmap[v->id] : v;
            clone |= ins[k] != v;
        }
        if (!clone) {
            if (!DL_VEC_PUSH(&seq, n)) {
                fail(&a, DL_ERR_NOMEM);
            }
            continue;
        }
        dl_ir_value *outs[64] = {NULL};
        a.n = n;
        size_t made = m->nodes.len;
        if (n->n_inputs > 64 || n->n_outputs > 64 || !clone_for_training(&a, n, ins, outs)) {
            fail(&a, DL_ERR_UNSUPPORTED);
            break;
        }
        for (size_t k = 0; k < n->n_outputs; k++) {
            tmap[n->outputs[k]->id] = outs[k];
        }
        // Every node the clone made (one, or the ops of a synchronised BatchNormalization).
        for (size_t j = made; j < m->nodes.len && a.st == DL_OK; j++) {
            if (!DL_VEC_PUSH(&seq, m->nodes.data[j])) {
                fail(&a, DL_ERR_NOMEM);
            }
        }
    }
    a.n = NULL;
    dl_ir_value *tloss = tmap[loss->id] ? tmap[loss->id] : loss;
    a.n_vals = m->values.len;
    a.grad = dl_mem_calloc(a.n_vals ? a.n_vals : 1, sizeof *a.grad);
    a.needs = dl_mem_calloc(a.n_vals ? a.n_vals : 1, sizeof *a.needs);
    if (!a.grad || !a.needs) {
        fail(&a, DL_ERR_NOMEM);
    }
    if (a.st == DL_OK) {
        // Which values depend on a trained param (float values only).
        for (size_t i = 0; i < m->params.len; i++) {
            dl_ir_value *p = m->params.data[i];
            a.needs[p->id] = dl_dtype_is_float(p->type.dtype) && !is_frozen(t, p);
        }
        for (size_t i = 0; i < seq.len; i++) {
            const dl_ir_node *n = seq.data[i];
            bool any = false;
            for (size_t k = 0; k < n->n_inputs; k++) {
                any |= n->inputs[k] && a.needs[n->inputs[k]->id];
            }
            for (size_t k = 0; k < n->n_outputs; k++) {
                a.needs[n->outputs[k]->id] = any && dl_dtype_is_float(n->outputs[k]->type.dtype);
            }
        }
        m->grad_seed = cscalar(&a, 1.0, loss->type.dtype);
        a.grad[tloss->id] = m->grad_seed;
        for (size_t i = seq.len; i-- > 0 && a.st == DL_OK;) {
            const dl_ir_node *n = seq.data[i];
            bool any = false;
            for (size_t k = 0; k < n->n_outputs; k++) {
                any |= n->outputs[k]->id < a.n_vals && a.grad[n->outputs[k]->id] != NULL;
            }
            if (!any) {
                continue;
            }
            a.n = n;
            differentiate(&a, n);
        }
        a.n = NULL;
    }
    dl_status st = a.st;
    if (st == DL_OK) {
        m->grads.len = 0;
        for (size_t i = 0; i < m->params.len && st == DL_OK; i++) {
            dl_ir_value *p = m->params.data[i];
            dl_ir_value *g = a.needs[p->id] ? a.grad[p->id] : NULL;
            if (!DL_VEC_PUSH(&m->grads, g)) {
                st = DL_ERR_NOMEM;
            }
        }
    }
    if (st == DL_OK) {
        m->has_backward = true;
        m->n_fwd_nodes = n_fwd;
        m->train_loss = tloss;
    }
    free(a.grad);
    free(a.needs);
    free(on_path);
    free(tmap);
    free(seq.data);
    return st;
}
