// ir/eval_grad.c — reference kernels of the internal gradient ops of family A: UnaryGrad,
// SoftmaxCrossEntropyLossGrad, NegativeLogLikelihoodLossGrad, LayerNormalizationGrad,
// GatherGrad, SliceGrad and PadGrad (semantics: docs/training.md and the comments below).
//
// Each kernel is the adjoint of the forward kernel in eval_ops.c / eval_nn.c and mirrors its
// index normalisation exactly (Slice's clamping, Pad's source coordinates, Gather's negative
// indices, the losses' ignore_index / weights / mean divisor), so that central finite
// differences of the forward op match these results (tests/eval_grad). Like the forward ops,
// data errors (a label or index out of range) are diagnostics. Scatter-adds (GatherGrad,
// PadGrad) accumulate in a fixed order: the output is zeroed, then dy is walked in C order.
// Everything is computed in double; the driver rounds to the output dtype.
#include "eval_internal.h"

#include <math.h>
#include <string.h>

#define ERR(...) dl_ir__node_err(cx, __VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// UnaryGrad: dx = dy * f'(x), f' being the derivative next to the sub-op's scalar function in
// eval_ops.c (conventions at kinks and NaN there).

static dl_status unary_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    const dl_ir__et *dy = in[0], *x = in[1];
    if (!dl_ir__same_shape(dy, x) || y->n != x->n) {
        return ERR("dy, x and dx must have one shape");
    }
    dl_ir_op op = dl_ir_node_unary_grad_op(n);
    if (op == DL_IR_OP_COUNT) {
        return ERR("op '%s' has no UnaryGrad rule", dl_ir_node_attr_string(n, "op"));
    }
    dl_ir__sp sp;
    dl_ir__scalar_params(n, x->dtype, y->dtype, &sp);
    for (int64_t i = 0; i < x->n; i++) {
        double d;
        if (!dl_ir__unary_deriv(op, &sp, x->d[i], &d)) {
            return ERR("%s has no derivative in the evaluator", dl_ir_op_get_info(op)->name);
        }
        y->d[i] = dy->d[i] * d;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Loss gradients. x: [N, C, d...] viewed as [N, C, D]; labels: [N, D]; weights?: [C].
// Per position (n, d) with target t (not ignored, in range): coefficient g * w[t], where g is
// dloss (sum), dloss / wsum (mean; wsum as the forward: the sum of w[t] over the counted
// positions, 0 / 0 giving a non-finite g that only counted positions see) or dloss[n, d]
// (none). Then SCE: dx[n, c, d] = (g w[t]) (softmax(x)[n, c, d] - [c == t]);
// NLL: dx[n, t, d] = -(g w[t]), 0 elsewhere. Ignored positions get 0.

static dl_status loss_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *dl = in[0], *x = in[1], *lab = in[2];
    const dl_ir__et *w = n_in > 3 ? in[3] : NULL;
    bool is_sce = nd->op == DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD;
    if (x->rank < 2) {
        return ERR("scores must have rank >= 2, got %d", x->rank);
    }
    int64_t N = x->dims[0], C = x->dims[1], D = 1;
    for (int32_t i = 2; i < x->rank; i++) {
        D *= x->dims[i];
    }
    if (lab->n != N * D || lab->rank != x->rank - 1) {
        return ERR("labels must be [N, d...] with %lld elements", (long long)(N * D));
    }
    if (w && w->n != C) {
        return ERR("weights must have %lld elements", (long long)C);
    }
    if (y->n != x->n) {
        return ERR("dx must have the scores' shape");
    }
    const dl_ir_attr *ig = dl_ir_node_attr(nd, "ignore_index");
    const char *red = dl_ir_node_attr_string(nd, "reduction");
    bool none = strcmp(red, "none") == 0, is_mean = strcmp(red, "mean") == 0;
    if (none ? dl->n != N * D : dl->n != 1) {
        return ERR("dloss has %lld elements for reduction '%s'", (long long)dl->n, red);
    }
    // Validate every label first (the forward reports the first bad one) and sum the weights.
    double wsum = 0;
    for (int64_t p = 0; p < N * D; p++) {
        int64_t t = (int64_t)lab->d[p];
        if (ig && t == ig->i) {
            continue;
        }
        if (t < 0 || t >= C) {
            return ERR("label %lld is out of range for %lld classes", (long long)t, (long long)C);
        }
        wsum += w ? w->d[t] : 1.0;
    }
    memset(y->d, 0, sizeof(double) * (size_t)y->n);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t d = 0; d < D; d++) {
            int64_t t = (int64_t)lab->d[n * D + d];
            if (ig && t == ig->i) {
                continue;
            }
            double g = none ? dl->d[n * D + d] : (is_mean ? dl->d[0] / wsum : dl->d[0]);
            double coef = g * (w ? w->d[t] : 1.0);
            if (!is_sce) {
                y->d[(n * C + t) * D + d] = -coef;
                continue;
            }
            double mx = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) {
                double v = x->d[(n * C + c) * D + d];
                mx = v > mx ? v : mx;
            }
            for (int64_t c = 0; c < C; c++) {
                s += exp(x->d[(n * C + c) * D + d] - mx);
            }
            for (int64_t c = 0; c < C; c++) {
                int64_t i = (n * C + c) * D + d;
                double p = exp(x->d[i] - mx) / s;
                y->d[i] = coef * (p - (c == t ? 1.0 : 0.0));
            }
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// LayerNormalizationGrad (dy, x, scale) -> dx, dscale?, dbias?. Rows: x viewed as
// [outer, M] with M = prod(x.shape[axis:]); scale: [M]. Per row (biased variance, as the
// forward): xhat = (x - mean) rstd, rstd = 1 / sqrt(var + eps), g = dy * scale,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dscale = sum_rows dy xhat; dbias = sum_rows dy.

static dl_status layer_norm_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *out,
                                 size_t n_out) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *dy = in[0], *x = in[1], *sc = in[2];
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(nd, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    int64_t outer = 1;
    for (int32_t i = 0; i < ax; i++) {
        outer *= x->dims[i];
    }
    int64_t M = outer ? x->n / outer : 0;
    if (!dl_ir__same_shape(dy, x) || out[0].n != x->n || sc->n != M) {
        return ERR("dy must have X's shape and Scale its normalised shape");
    }
    for (size_t k = 1; k < n_out; k++) {
        if (out[k].n != M) {
            return ERR("output %zu must have %lld elements", k, (long long)M);
        }
        memset(out[k].d, 0, sizeof(double) * (size_t)out[k].n);
    }
    double eps = dl_ir_node_attr_float(nd, "epsilon");
    for (int64_t o = 0; o < outer; o++) {
        const double *px = x->d + o * M, *pdy = dy->d + o * M;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < M; k++) {
            mean += px[k];
        }
        mean /= (double)M;
        for (int64_t k = 0; k < M; k++) {
            var += (px[k] - mean) * (px[k] - mean);
        }
        var /= (double)M;
        double rstd = 1.0 / sqrt(var + eps);
        double sg = 0, sgx = 0;
        for (int64_t k = 0; k < M; k++) {
            double g = pdy[k] * sc->d[k], xh = (px[k] - mean) * rstd;
            sg += g;
            sgx += g * xh;
        }
        sg /= (double)M;
        sgx /= (double)M;
        for (int64_t k = 0; k < M; k++) {
            double g = pdy[k] * sc->d[k], xh = (px[k] - mean) * rstd;
            out[0].d[o * M + k] = rstd * (g - sg - xh * sgx);
            if (n_out > 1) {
                out[1].d[k] += pdy[k] * xh;
            }
            if (n_out > 2) {
                out[2].d[k] += pdy[k];
            }
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// GatherGrad (dy, indices, x) -> dx: x: [A, Dx, B], dy: [A, J, B] (J = numel(indices));
// dx = 0, then dx[a, idx[j], b] += dy[a, j, b] (negative indices add Dx, as Gather).

static dl_status gather_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *y) {
    const dl_ir__et *dy = in[0], *idx = in[1], *x = in[2];
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(cx->node, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    int64_t A, B, Dx = x->dims[ax];
    dl_ir__axis_split(x, ax, &A, &B);
    if (dy->n != A * idx->n * B || y->n != x->n) {
        return ERR("dy has %lld elements, expected %lld", (long long)dy->n,
                   (long long)(A * idx->n * B));
    }
    DL_TRY(dl_ir__gather_check_indices(cx, idx, ax, Dx));
    memset(y->d, 0, sizeof(double) * (size_t)y->n);
    for (int64_t a = 0; a < A; a++) {
        for (int64_t k = 0; k < idx->n; k++) {
            int64_t j = (int64_t)idx->d[k];
            j = j < 0 ? j + Dx : j;
            for (int64_t b = 0; b < B; b++) {
                y->d[(a * Dx + j) * B + b] += dy->d[(a * idx->n + k) * B + b];
            }
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// SliceGrad (dy, x) -> dx = 0 with dx[start + i * step] = dy[i] per axis (Slice's clamping).

static dl_status slice_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *y) {
    const dl_ir__et *dy = in[0], *x = in[1];
    int64_t start[DL_MAX_RANK], step[DL_MAX_RANK], len[DL_MAX_RANK];
    DL_TRY(dl_ir__slice_params(cx, x, start, step, len));
    if (dy->rank != x->rank || y->n != x->n) {
        return ERR("dy rank %d differs from x rank %d", dy->rank, x->rank);
    }
    for (int32_t i = 0; i < x->rank; i++) {
        if (len[i] != dy->dims[i]) {
            return ERR("dy dim %d is %lld, the slice gives %lld", i, (long long)dy->dims[i],
                       (long long)len[i]);
        }
    }
    memset(y->d, 0, sizeof(double) * (size_t)y->n);
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < dy->n; i++) {
        dl_ir__unravel(i, dy->dims, dy->rank, oc);
        for (int32_t k = 0; k < dy->rank; k++) {
            oc[k] = start[k] + oc[k] * step[k];
        }
        y->d[dl_ir__ravel(oc, x->dims, x->rank)] = dy->d[i];
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// PadGrad (dy, x) -> dx: dx = 0, then every dy element adds into the x element the forward
// pad() reads for it (constant mode: none outside the interior; edge: the clamped coordinate;
// wrap / reflect: the wrapped / reflected one). Cropped x elements (negative pads) stay 0.

static dl_status pad_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    const dl_ir__et *dy = in[0], *x = in[1];
    const dl_ir_attr *p = dl_ir_node_attr(n, "pads");
    if (!p || (int32_t)p->n != 2 * x->rank) {
        return ERR("pads must have %d entries", 2 * x->rank);
    }
    const char *mode = dl_ir_node_attr_string(n, "mode");
    if (dy->rank != x->rank || y->n != x->n) {
        return ERR("dy rank differs from the x rank");
    }
    DL_TRY(dl_ir__pad_check_dims(cx, x, p->ints, mode, dy, "dy"));
    memset(y->d, 0, sizeof(double) * (size_t)y->n);
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < dy->n; i++) {
        dl_ir__unravel(i, dy->dims, dy->rank, oc);
        if (dl_ir__pad_source(x, p->ints, mode, oc)) {
            y->d[dl_ir__ravel(oc, x->dims, x->rank)] += dy->d[i];
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------

// Hooks of the evaluator's table (eval_ops.c); dl_ir__eval_node checked the required inputs.

dl_status dl_ir__ev_unary_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                               size_t n_out) {
    (void)n_in, (void)n_out;
    return unary_grad(cx, in, &out[0]);
}

dl_status dl_ir__ev_loss_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                              size_t n_out) {
    (void)n_out;
    return loss_grad(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_layer_norm_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                    dl_ir__et *out, size_t n_out) {
    (void)n_in;
    return layer_norm_grad(cx, in, out, n_out);
}

dl_status dl_ir__ev_gather_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                                size_t n_out) {
    (void)n_in, (void)n_out;
    return gather_grad(cx, in, &out[0]);
}

dl_status dl_ir__ev_slice_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                               size_t n_out) {
    (void)n_in, (void)n_out;
    return slice_grad(cx, in, &out[0]);
}

dl_status dl_ir__ev_pad_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                             size_t n_out) {
    (void)n_in, (void)n_out;
    return pad_grad(cx, in, &out[0]);
}
