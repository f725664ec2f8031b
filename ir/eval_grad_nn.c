// ir/eval_grad_nn.c — reference kernels of the internal gradient ops of the NN family (see
// eval_internal.h): ConvGradWeight, MaxPoolGrad, AveragePoolGrad, BatchNormalizationGrad.
//
// Each kernel is the exact adjoint of its forward kernel in eval_nn.c and walks the same loops:
// the window geometry comes from the same attributes through dl_ir_conv_pads with dy's spatial
// sizes as the forward output sizes, MaxPoolGrad picks the element pool() picks (first maximum
// in window scan order, padding never, a NaN beats numbers), AveragePoolGrad divides by the
// count pool() divides by. Naive loops in double; the driver rounds the outputs.
//   ConvGradWeight (dy: [N, M, OH, OW], x: [N, C, H, W]) -> dw: [M, C/group, kH, kW]
//     dw[m, c, i, j] = sum_{n, oh, ow} dy[n, m, oh, ow] * x[n, g*Cg + c, oh*sh - pt + i*dh,
//                                                          ow*sw - pl + j*dw],  g = m / Mg
//   BatchNormalizationGrad (dy, x: [N, C, d...], scale: [C]) -> dx, dscale?, dbias?, training
//     mode with batch statistics (biased variance); per channel, over M = N * prod(d):
//     dbias = sum dy, dscale = sum dy * xhat, dx = scale * rstd / M * (M dy - dbias - xhat dscale)
#include "eval_internal.h"

#include <math.h>
#include <string.h>

#define ERR(...) dl_ir__node_err(cx, __VA_ARGS__)

// Reads INTS attribute `name` with `n` entries into out; absent or empty: every entry `def`.
static dl_status ints_n(dl_ir__ectx *cx, const char *name, int32_t n, int64_t def, int64_t *out) {
    const dl_ir_attr *a = dl_ir_node_attr(cx->node, name);
    if (a && a->n > 0 && (int32_t)a->n != n) {
        return ERR("%s has %zu entries, expected %d", name, a->n, n);
    }
    for (int32_t i = 0; i < n; i++) {
        out[i] = (a && a->n > 0) ? a->ints[i] : def;
    }
    return DL_OK;
}

// Window geometry of a conv or pool with nsp spatial dims over input dims xd and forward
// output dims yd: kernel, strides, dilations and effective begin/end pads.
typedef struct win {
    int64_t k[DL_MAX_RANK], s[DL_MAX_RANK], dil[DL_MAX_RANK], pb[DL_MAX_RANK], pe[DL_MAX_RANK];
} win;

static dl_status window(dl_ir__ectx *cx, int32_t nsp, const int64_t *xd, const int64_t *yd,
                        win *w) {
    int64_t pads[2 * DL_MAX_RANK];
    DL_TRY(ints_n(cx, "kernel_shape", nsp, 1, w->k));
    DL_TRY(ints_n(cx, "strides", nsp, 1, w->s));
    DL_TRY(ints_n(cx, "dilations", nsp, 1, w->dil));
    DL_TRY(ints_n(cx, "pads", 2 * nsp, 0, pads));
    const char *ap = dl_ir_node_attr_string(cx->node, "auto_pad");
    for (int32_t i = 0; i < nsp; i++) {
        if (w->s[i] < 1 || w->dil[i] < 1 || w->k[i] < 1) {
            return ERR("strides, dilations and kernel_shape must be positive");
        }
        dl_ir_conv_pads(ap, xd[i], yd[i], w->k[i], w->s[i], w->dil[i], pads[i], pads[nsp + i],
                        &w->pb[i], &w->pe[i]);
    }
    return DL_OK;
}

static dl_status conv_grad_weight(dl_ir__ectx *cx, const dl_ir__et *dy, const dl_ir__et *x,
                                  dl_ir__et *dw) {
    if (x->rank != 4 || dy->rank != 4 || dw->rank != 4) {
        return ERR("only 2-D convolutions are supported (x rank %d)", x->rank);
    }
    int64_t group = dl_ir_node_attr_int(cx->node, "group");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t M = dy->dims[1], OH = dy->dims[2], OW = dy->dims[3];
    if (group < 1 || C % group || M % group || dy->dims[0] != N || dw->dims[0] != M ||
        dw->dims[1] != C / group) {
        return ERR("channels do not agree (x %lld, dy %lld, group %lld)", (long long)C,
                   (long long)M, (long long)group);
    }
    win g;
    DL_TRY(window(cx, 2, x->dims + 2, dy->dims + 2, &g));
    if (dw->dims[2] != g.k[0] || dw->dims[3] != g.k[1]) {
        return ERR("output does not match kernel_shape");
    }
    int64_t Cg = C / group, Mg = M / group;
    for (int64_t m = 0; m < M; m++) {
        int64_t gi = m / Mg;
        for (int64_t c = 0; c < Cg; c++) {
            for (int64_t i = 0; i < g.k[0]; i++) {
                for (int64_t j = 0; j < g.k[1]; j++) {
                    double s = 0;
                    for (int64_t n = 0; n < N; n++) {
                        const double *px = x->d + (n * C + gi * Cg + c) * H * W;
                        const double *pdy = dy->d + (n * M + m) * OH * OW;
                        for (int64_t oh = 0; oh < OH; oh++) {
                            int64_t ih = oh * g.s[0] - g.pb[0] + i * g.dil[0];
                            if (ih < 0 || ih >= H) {
                                continue;
                            }
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t iw = ow * g.s[1] - g.pb[1] + j * g.dil[1];
                                if (iw >= 0 && iw < W) {
                                    s += pdy[oh * OW + ow] * px[ih * W + iw];
                                }
                            }
                        }
                    }
                    dw->d[((m * Cg + c) * g.k[0] + i) * g.k[1] + j] = s;
                }
            }
        }
    }
    return DL_OK;
}

// MaxPoolGrad / AveragePoolGrad: dx = 0, then each output window of each [n, c] plane sends
// its dy to the element the forward max selects, or dy / count to every in-image element.
static dl_status pool_grad(dl_ir__ectx *cx, const dl_ir__et *dy, const dl_ir__et *x,
                           dl_ir__et *dx) {
    bool is_max = cx->node->op == DL_IR_OP_MAX_POOL_GRAD;
    if (x->rank < 3 || dy->rank != x->rank || dx->n != x->n) {
        return ERR("pooling gradients need x of rank >= 3 and dy of the same rank (got %d and %d)",
                   x->rank, dy->rank);
    }
    if (dy->dims[0] != x->dims[0] || dy->dims[1] != x->dims[1]) {
        return ERR("dy does not match x's batch and channels");
    }
    int32_t nsp = x->rank - 2;
    const int64_t *xd = x->dims + 2, *yd = dy->dims + 2;
    win g;
    DL_TRY(window(cx, nsp, xd, yd, &g));
    int64_t in_sp = 1, out_sp = 1, k_n = 1;
    for (int32_t i = 0; i < nsp; i++) {
        in_sp *= xd[i];
        out_sp *= yd[i];
        k_n *= g.k[i];
    }
    bool incl = !is_max && dl_ir_node_attr_int(cx->node, "count_include_pad") != 0;
    memset(dx->d, 0, sizeof(double) * (size_t)dx->n);
    int64_t oc[DL_MAX_RANK], kc[DL_MAX_RANK], ic[DL_MAX_RANK];
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        const double *px = x->d + nc * in_sp;
        double *pdx = dx->d + nc * in_sp;
        for (int64_t o = 0; o < out_sp; o++) {
            dl_ir__unravel(o, yd, nsp, oc);
            double g_o = dy->d[nc * out_sp + o];
            double acc = -INFINITY;
            int64_t arg = -1, cnt = 0;
            // Max: find the forward's argmax. Average: count the window (one pass), then
            // spread (second pass below).
            for (int64_t kf = 0; kf < k_n; kf++) {
                dl_ir__unravel(kf, g.k, nsp, kc);
                bool inside = true, in_padded = true;
                for (int32_t i = 0; i < nsp; i++) {
                    ic[i] = oc[i] * g.s[i] - g.pb[i] + kc[i] * g.dil[i];
                    inside = inside && ic[i] >= 0 && ic[i] < xd[i];
                    in_padded = in_padded && ic[i] >= -g.pb[i] && ic[i] < xd[i] + g.pe[i];
                }
                if (incl ? in_padded : inside) {
                    cnt++;
                }
                if (!inside || !is_max) {
                    continue;
                }
                int64_t off = dl_ir__ravel(ic, xd, nsp);
                double v = px[off];
                if (arg < 0 || v > acc || (isnan(v) && !isnan(acc))) {
                    acc = v;
                    arg = off;
                }
            }
            if (is_max) {
                if (arg >= 0) {
                    pdx[arg] += g_o;
                }
                continue;
            }
            double share = cnt ? g_o / (double)cnt : NAN;
            for (int64_t kf = 0; kf < k_n; kf++) {
                dl_ir__unravel(kf, g.k, nsp, kc);
                bool inside = true;
                for (int32_t i = 0; i < nsp; i++) {
                    ic[i] = oc[i] * g.s[i] - g.pb[i] + kc[i] * g.dil[i];
                    inside = inside && ic[i] >= 0 && ic[i] < xd[i];
                }
                if (inside) {
                    pdx[dl_ir__ravel(ic, xd, nsp)] += share;
                }
            }
        }
    }
    return DL_OK;
}

static dl_status batch_norm_grad(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *out,
                                 size_t n_out) {
    const dl_ir__et *dy = in[0], *x = in[1], *sc = in[2];
    if (x->rank < 2 || dy->n != x->n || out[0].n != x->n) {
        return ERR("dy, x and dx must have one shape of rank >= 2");
    }
    int64_t N = x->dims[0], C = x->dims[1], S = (N * C) != 0 ? x->n / (N * C) : 1;
    if (sc->n != C) {
        return ERR("scale must have %lld elements", (long long)C);
    }
    for (size_t k = 1; k < n_out; k++) {
        if (out[k].n != C) {
            return ERR("output %zu must have %lld elements", k, (long long)C);
        }
    }
    double eps = dl_ir_node_attr_float(cx->node, "epsilon");
    double cnt = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < S; k++) {
                s += x->d[(n * C + c) * S + k];
            }
        }
        double mean = s / cnt;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < S; k++) {
                double dv = x->d[(n * C + c) * S + k] - mean;
                ss += dv * dv;
            }
        }
        double rstd = 1.0 / sqrt(ss / cnt + eps);
        double db = 0, ds = 0;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (n * C + c) * S + k;
                db += dy->d[i];
                ds += dy->d[i] * (x->d[i] - mean) * rstd;
            }
        }
        double a = sc->d[c] * rstd / cnt;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (n * C + c) * S + k;
                double xhat = (x->d[i] - mean) * rstd;
                out[0].d[i] = a * (cnt * dy->d[i] - db - xhat * ds);
            }
        }
        if (n_out > 1) {
            out[1].d[c] = ds;
        }
        if (n_out > 2) {
            out[2].d[c] = db;
        }
    }
    return DL_OK;
}

// Hooks of the evaluator's table (eval_ops.c); dl_ir__eval_node checked the required inputs.

dl_status dl_ir__ev_conv_grad_weight(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                     dl_ir__et *out, size_t n_out) {
    (void)n_in, (void)n_out;
    return conv_grad_weight(cx, in[0], in[1], &out[0]);
}

dl_status dl_ir__ev_pool_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                              size_t n_out) {
    (void)n_in, (void)n_out;
    return pool_grad(cx, in[0], in[1], &out[0]);
}

dl_status dl_ir__ev_batch_norm_grad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                    dl_ir__et *out, size_t n_out) {
    (void)n_in;
    return batch_norm_grad(cx, in, out, n_out);
}
