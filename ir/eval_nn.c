// ir/eval_nn.c — reference kernels for linear algebra (MatMul, Gemm), 1-D and 2-D convolution
// (1-D inputs are lifted to 2-D with a height of 1), N-D pooling (an odometer over output and
// kernel positions), normalisation, softmax, Dropout and the losses. Naive loops in double; ONNX
// opset 17 semantics. Output shapes come from the inferred types; each kernel checks the few dims
// it relies on so an inconsistent type is a diagnostic instead of an out-of-bounds read.
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) dl_ir__node_err(cx, __VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// Linear algebra

// MatMul with numpy semantics: 1-D a is [1, K] (row dropped after), 1-D b is [K, 1] (column
// dropped after), leading batch dims broadcast. y: [batch..., M, N] (minus the dropped dims,
// which does not change the element order).
static dl_status matmul(dl_ir__ectx *cx, const dl_ir__et *a, const dl_ir__et *b, dl_ir__et *y) {
    if (a->rank < 1 || b->rank < 1) {
        return ERR("inputs must have rank >= 1");
    }
    int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
    int64_t K = a->dims[a->rank - 1];
    int64_t Kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
    int64_t N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (K != Kb) {
        return ERR("inner dimensions differ (%lld vs %lld)", (long long)K, (long long)Kb);
    }
    // Batch views of a and b (dims without the two matrix dims) and the broadcast batch shape.
    dl_ir__et ab = {0}, bb = {0};
    ab.rank = a->rank > 2 ? a->rank - 2 : 0;
    bb.rank = b->rank > 2 ? b->rank - 2 : 0;
    memcpy(ab.dims, a->dims, sizeof(int64_t) * (size_t)ab.rank);
    memcpy(bb.dims, b->dims, sizeof(int64_t) * (size_t)bb.rank);
    int32_t br = ab.rank > bb.rank ? ab.rank : bb.rank;
    int64_t bd[DL_MAX_RANK], nb = 1;
    for (int32_t i = 0; i < br; i++) {
        int32_t ia = i - (br - ab.rank), ib = i - (br - bb.rank);
        int64_t da = ia >= 0 ? ab.dims[ia] : 1, db = ib >= 0 ? bb.dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return ERR("batch dimensions do not broadcast (%lld vs %lld)", (long long)da,
                       (long long)db);
        }
        bd[i] = da == 1 ? db : da;
        nb *= bd[i];
    }
    if (nb * M * N != y->n) {
        return ERR("output has %lld elements, expected %lld", (long long)y->n,
                   (long long)(nb * M * N));
    }
    int64_t bc[DL_MAX_RANK];
    for (int64_t t = 0; t < nb; t++) {
        dl_ir__unravel(t, bd, br, bc);
        const double *pa = a->d + dl_ir__bcast_index(&ab, bc, br) * M * K;
        const double *pb = b->d + dl_ir__bcast_index(&bb, bc, br) * K * N;
        double *py = y->d + t * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    s += pa[i * K + k] * pb[k * N + j];
                }
                py[i * N + j] = s;
            }
        }
    }
    return DL_OK;
}

// Gemm: y[M, N] = alpha * A' @ B' + beta * C, A' = transA ? A^T : A, C broadcasts to [M, N].
static dl_status gemm(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    const dl_ir__et *A = in[0], *B = in[1], *C = n_in > 2 ? in[2] : NULL;
    if (A->rank != 2 || B->rank != 2 || y->rank != 2) {
        return ERR("A, B and the output must have rank 2");
    }
    bool ta = dl_ir_node_attr_int(n, "transA") != 0, tb = dl_ir_node_attr_int(n, "transB") != 0;
    double alpha = dl_ir_node_attr_float(n, "alpha"), beta = dl_ir_node_attr_float(n, "beta");
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t Kb = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
    if (K != Kb || y->dims[0] != M || y->dims[1] != N) {
        return ERR("shapes do not agree (K %lld vs %lld, output [%lld, %lld])", (long long)K,
                   (long long)Kb, (long long)y->dims[0], (long long)y->dims[1]);
    }
    if (C && !dl_ir__bcast_ok(C, y->dims, 2)) {
        return ERR("C does not broadcast to [%lld, %lld]", (long long)M, (long long)N);
    }
    int64_t oc[2];
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                double av = ta ? A->d[k * M + i] : A->d[i * K + k];
                double bv = tb ? B->d[j * K + k] : B->d[k * N + j];
                s += av * bv;
            }
            s *= alpha;
            if (C) {
                oc[0] = i;
                oc[1] = j;
                s += beta * C->d[dl_ir__bcast_index(C, oc, 2)];
            }
            y->d[i * N + j] = s;
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Convolution geometry. Everything is lifted to 2 spatial dims: a 1-D input
// [N, C, W] is viewed as [N, C, 1, W] with kernel 1, stride 1, dilation 1 and no padding on H.

typedef struct win2 {
    int64_t k[2], s[2], dil[2], pb[2], pe[2]; // kernel, stride, dilation, pad begin / end
} win2;

// Views `t` (rank 3 or 4) as [d0, d1, H, W].
static bool lift4(const dl_ir__et *t, int64_t d4[4]) {
    if (t->rank == 4) {
        memcpy(d4, t->dims, 4 * sizeof(int64_t));
        return true;
    }
    if (t->rank == 3) {
        d4[0] = t->dims[0];
        d4[1] = t->dims[1];
        d4[2] = 1;
        d4[3] = t->dims[2];
        return true;
    }
    return false;
}

// Reads INTS attribute `name` with nsp (1 or 2) entries per group (`groups` = 2 for pads) into
// out2 lifted to 2 spatial dims (the missing H entry gets `fill`). Absent: every entry `def`.
static dl_status ints2(dl_ir__ectx *cx, const char *name, int32_t nsp, int groups, int64_t def,
                       int64_t fill, int64_t *out2) {
    const dl_ir_attr *a = dl_ir_node_attr(cx->node, name);
    if (a && a->n > 0 && (int32_t)a->n != nsp * groups) {
        return ERR("%s has %zu entries, expected %d", name, a->n, nsp * groups);
    }
    for (int g = 0; g < groups; g++) {
        for (int32_t i = 0; i < 2; i++) {
            int32_t src = i - (2 - nsp);
            out2[g * 2 + i] = src < 0 ? fill : (a && a->n > 0 ? a->ints[g * nsp + src] : def);
        }
    }
    return DL_OK;
}

// Fills strides, dilations and pads for Conv. kernel must be set; x4/y4 are the lifted
// input and output shapes. auto_pad SAME_*: total = max(0, (out-1)*s + (k-1)*d + 1 - in),
// SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning.
static dl_status geometry(dl_ir__ectx *cx, int32_t nsp, const int64_t x4[4], const int64_t y4[4],
                          win2 *w) {
    int64_t pads[4];
    DL_TRY(ints2(cx, "strides", nsp, 1, 1, 1, w->s));
    DL_TRY(ints2(cx, "dilations", nsp, 1, 1, 1, w->dil));
    DL_TRY(ints2(cx, "pads", nsp, 2, 0, 0, pads));
    const char *ap = dl_ir_node_attr_string(cx->node, "auto_pad");
    for (int i = 0; i < 2; i++) {
        if (w->s[i] < 1 || w->dil[i] < 1 || w->k[i] < 1) {
            return ERR("strides, dilations and kernel must be positive");
        }
        dl_ir_conv_pads(ap, x4[2 + i], y4[2 + i], w->k[i], w->s[i], w->dil[i], pads[i], pads[2 + i],
                        &w->pb[i], &w->pe[i]);
    }
    return DL_OK;
}

// Conv: y[n, m, oh, ow] = b[m] + sum_{c in group(m), kh, kw} x[n, c, ih, iw] * w[m, c', kh, kw]
// with ih = oh*s - pb + kh*dil. x: [N, C, H, W], w: [M, C/group, kH, kW], b: [M].
static dl_status conv(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir__et *x = in[0], *wt = in[1], *b = n_in > 2 ? in[2] : NULL;
    int64_t x4[4], w4[4], y4[4];
    if (!lift4(x, x4) || !lift4(wt, w4) || !lift4(y, y4) || x->rank != wt->rank ||
        x->rank != y->rank) {
        return ERR("only 1-D and 2-D convolutions are supported (input rank %d)", x->rank);
    }
    int64_t group = dl_ir_node_attr_int(cx->node, "group");
    int64_t N = x4[0], C = x4[1], H = x4[2], W = x4[3], M = w4[0];
    if (group < 1 || C % group || M % group || w4[1] != C / group || y4[1] != M || y4[0] != N ||
        (b && b->n != M)) {
        return ERR("channels do not agree (input %lld, weight [%lld, %lld], group %lld)",
                   (long long)C, (long long)M, (long long)w4[1], (long long)group);
    }
    win2 g = {{w4[2], w4[3]}, {0}, {0}, {0}, {0}};
    DL_TRY(geometry(cx, x->rank - 2, x4, y4, &g));
    int64_t Cg = C / group, Mg = M / group;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++) {
            int64_t gi = m / Mg;
            for (int64_t oh = 0; oh < y4[2]; oh++) {
                for (int64_t ow = 0; ow < y4[3]; ow++) {
                    double s = b ? b->d[m] : 0;
                    // A tap in the padding multiplies a zero (ONNX pads the input with
                    // zeros): an Inf or NaN weight makes the sum NaN there, as in the
                    // compiled kernels and PyTorch.
                    for (int64_t c = 0; c < Cg; c++) {
                        for (int64_t kh = 0; kh < g.k[0]; kh++) {
                            int64_t ih = oh * g.s[0] - g.pb[0] + kh * g.dil[0];
                            bool in_h = ih >= 0 && ih < H;
                            for (int64_t kw = 0; kw < g.k[1]; kw++) {
                                int64_t iw = ow * g.s[1] - g.pb[1] + kw * g.dil[1];
                                double xv = in_h && iw >= 0 && iw < W
                                                ? x->d[((n * C + gi * Cg + c) * H + ih) * W + iw]
                                                : 0.0;
                                double wv = wt->d[((m * Cg + c) * g.k[0] + kh) * g.k[1] + kw];
                                s += xv * wv;
                            }
                        }
                    }
                    y->d[((n * M + m) * y4[2] + oh) * y4[3] + ow] = s;
                }
            }
        }
    }
    return DL_OK;
}

// ConvTranspose: scatter form. x: [N, C, H, W], w: [C, M/group, kH, kW], y: [N, M, oH, oW];
// x[n, c, ih, iw] * w[c, m', kh, kw] lands on y[n, g*M/group + m', ih*s - pb + kh*dil, ...].
// Pads: the `pads` attribute, or (output_shape given or auto_pad SAME_*) from
//   total = s*(in-1) + output_padding + (k-1)*dil + 1 - out,
//   SAME_UPPER: begin = floor(total/2); otherwise begin = total - floor(total/2) (ONNX's text).
static dl_status conv_transpose(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *x = in[0], *wt = in[1], *b = n_in > 2 ? in[2] : NULL;
    int64_t x4[4], w4[4], y4[4];
    if (!lift4(x, x4) || !lift4(wt, w4) || !lift4(y, y4) || x->rank != wt->rank ||
        x->rank != y->rank) {
        return ERR("only 1-D and 2-D transposed convolutions are supported (input rank %d)",
                   x->rank);
    }
    int32_t nsp = x->rank - 2;
    int64_t group = dl_ir_node_attr_int(nd, "group");
    int64_t N = x4[0], C = x4[1], H = x4[2], W = x4[3];
    int64_t Mg = w4[1], M = Mg * group;
    if (group < 1 || C % group || w4[0] != C || y4[1] != M || y4[0] != N || (b && b->n != M)) {
        return ERR("channels do not agree (input %lld, weight [%lld, %lld], group %lld)",
                   (long long)C, (long long)w4[0], (long long)w4[1], (long long)group);
    }
    win2 g = {{w4[2], w4[3]}, {0}, {0}, {0}, {0}};
    int64_t pads[4], outpad[2];
    DL_TRY(ints2(cx, "strides", nsp, 1, 1, 1, g.s));
    DL_TRY(ints2(cx, "dilations", nsp, 1, 1, 1, g.dil));
    DL_TRY(ints2(cx, "pads", nsp, 2, 0, 0, pads));
    DL_TRY(ints2(cx, "output_padding", nsp, 1, 0, 0, outpad));
    const char *ap = dl_ir_node_attr_string(nd, "auto_pad");
    const dl_ir_attr *os = dl_ir_node_attr(nd, "output_shape");
    for (int i = 0; i < 2; i++) {
        g.pb[i] = pads[i];
        bool lifted_h = nsp == 1 && i == 0;
        if (lifted_h) {
            g.pb[i] = 0;
        } else if (strcmp(ap, "VALID") == 0) {
            g.pb[i] = 0;
        } else if ((os && os->n > 0) || strncmp(ap, "SAME", 4) == 0) {
            int64_t in_sz = i == 0 ? H : W;
            int64_t target = y4[2 + i]; // == output_shape, or in*s for SAME (shape pass)
            int64_t total = g.s[i] * (in_sz - 1) + outpad[i] + (g.k[i] - 1) * g.dil[i] + 1 - target;
            // floor division: total is negative when output_shape asks for extra rows at
            // the end (ONNX's own example: output_shape 10 from a 9-row full output)
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            g.pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? half : total - half;
        }
    }
    for (int64_t i = 0; i < y->n; i++) {
        y->d[i] = b ? b->d[(i / (y4[2] * y4[3])) % M] : 0;
    }
    int64_t Cg = C / group;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t gi = c / Cg;
            for (int64_t ih = 0; ih < H; ih++) {
                for (int64_t iw = 0; iw < W; iw++) {
                    double xv = x->d[((n * C + c) * H + ih) * W + iw];
                    for (int64_t m = 0; m < Mg; m++) {
                        for (int64_t kh = 0; kh < g.k[0]; kh++) {
                            int64_t oh = ih * g.s[0] - g.pb[0] + kh * g.dil[0];
                            if (oh < 0 || oh >= y4[2]) {
                                continue;
                            }
                            for (int64_t kw = 0; kw < g.k[1]; kw++) {
                                int64_t ow = iw * g.s[1] - g.pb[1] + kw * g.dil[1];
                                if (ow < 0 || ow >= y4[3]) {
                                    continue;
                                }
                                double wv = wt->d[((c * Mg + m) * g.k[0] + kh) * g.k[1] + kw];
                                int64_t oc = gi * Mg + m;
                                y->d[((n * M + oc) * y4[2] + oh) * y4[3] + ow] += xv * wv;
                            }
                        }
                    }
                }
            }
        }
    }
    return DL_OK;
}

// Reads INTS attribute `name` with `n` entries (n = number of spatial dims, twice that for pads)
// into out; absent or empty: every entry `def`.
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

// MaxPool / AveragePool over x: [N, C, d1, ..., dk] (k >= 1), y: [N, C, o1, ..., ok] where the
// o_i come from the inferred output type (the shape pass owns the ceil_mode rule: a last window
// that would start inside the end padding is already dropped there). Per spatial dim i, output
// position o reads input positions o*s - pb + j*dil for j in [0, kernel). pads are k begins then
// k ends; auto_pad VALID zeroes them, SAME_* derives them as geometry() does.
// Padding never contributes to a max. AveragePool divides by the number of window positions
// inside the input (count_include_pad = 0) or inside the explicitly padded input, i.e. every
// dim in [-pb, d + pe) (count_include_pad = 1; positions that ceil_mode pushes past the end
// pad are not counted: PyTorch's rule and the ONNX reference's loop implementation). An empty
// window (possible only with exotic pads) averages to NaN.
// MaxPool's optional Indices output is the flattened index into the whole input: storage_order
// 0 is row major ((n*C + c)*D + ravel(position)); storage_order 1 is column major within each
// spatial block (for 2-D: nc*H*W + w*H + h, as ONNX defines; N-D generalises by reversing the
// dim order). The first maximum in window order wins; a NaN wins over numbers.
static dl_status pool(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *out, size_t n_out) {
    const dl_ir_node *nd = cx->node;
    bool is_max = nd->op == DL_IR_OP_MAX_POOL;
    dl_ir__et *y = &out[0], *yi = (is_max && n_out > 1) ? &out[1] : NULL;
    if (x->rank < 3 || x->rank != y->rank) {
        return ERR("pooling needs an input of rank >= 3 [N, C, spatial...] and an output of the "
                   "same rank (got %d and %d)",
                   x->rank, y->rank);
    }
    if (y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] || (yi && yi->n != y->n)) {
        return ERR("output shape does not match the input's batch and channels");
    }
    int32_t nsp = x->rank - 2;
    const int64_t *xd = x->dims + 2, *yd = y->dims + 2;
    int64_t k[DL_MAX_RANK], s[DL_MAX_RANK], dil[DL_MAX_RANK], pads[2 * DL_MAX_RANK];
    int64_t pb[DL_MAX_RANK], pe[DL_MAX_RANK];
    DL_TRY(ints_n(cx, "kernel_shape", nsp, 1, k));
    DL_TRY(ints_n(cx, "strides", nsp, 1, s));
    DL_TRY(ints_n(cx, "dilations", nsp, 1, dil));
    DL_TRY(ints_n(cx, "pads", 2 * nsp, 0, pads));
    const char *ap = dl_ir_node_attr_string(nd, "auto_pad");
    int64_t in_sp = 1, out_sp = 1, k_n = 1; // spatial block sizes and window size
    for (int32_t i = 0; i < nsp; i++) {
        if (s[i] < 1 || dil[i] < 1 || k[i] < 1) {
            return ERR("strides, dilations and kernel_shape must be positive");
        }
        dl_ir_conv_pads(ap, xd[i], yd[i], k[i], s[i], dil[i], pads[i], pads[nsp + i], &pb[i],
                        &pe[i]);
        in_sp *= xd[i];
        out_sp *= yd[i];
        k_n *= k[i];
    }
    bool incl = !is_max && dl_ir_node_attr_int(nd, "count_include_pad") != 0;
    bool col_major = is_max && dl_ir_node_attr_int(nd, "storage_order") != 0;
    int64_t oc[DL_MAX_RANK], kc[DL_MAX_RANK], ic[DL_MAX_RANK];
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        for (int64_t o = 0; o < out_sp; o++) {
            dl_ir__unravel(o, yd, nsp, oc);
            double acc = is_max ? -INFINITY : 0;
            int64_t arg = -1, cnt = 0;
            for (int64_t kf = 0; kf < k_n; kf++) {
                dl_ir__unravel(kf, k, nsp, kc);
                bool inside = true, in_padded = true;
                for (int32_t i = 0; i < nsp; i++) {
                    ic[i] = oc[i] * s[i] - pb[i] + kc[i] * dil[i];
                    inside = inside && ic[i] >= 0 && ic[i] < xd[i];
                    in_padded = in_padded && ic[i] >= -pb[i] && ic[i] < xd[i] + pe[i];
                }
                if (incl ? in_padded : inside) {
                    cnt++;
                }
                if (!inside) {
                    continue;
                }
                int64_t off = dl_ir__ravel(ic, xd, nsp);
                double v = x->d[nc * in_sp + off];
                if (!is_max) {
                    acc += v;
                } else if (arg < 0 || v > acc || (isnan(v) && !isnan(acc))) {
                    acc = v;
                    if (col_major) {
                        off = 0;
                        for (int32_t i = nsp - 1; i >= 0; i--) {
                            off = off * xd[i] + ic[i];
                        }
                    }
                    arg = nc * in_sp + off;
                }
            }
            y->d[nc * out_sp + o] = is_max ? acc : (cnt ? acc / (double)cnt : NAN);
            if (yi) {
                yi->d[nc * out_sp + o] = (double)(arg < 0 ? 0 : arg);
            }
        }
    }
    return DL_OK;
}

// GlobalAveragePool: mean over every dim after the first two. y: [N, C, 1, ...].
static dl_status global_avg_pool(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    if (x->rank < 2 || y->n != x->dims[0] * x->dims[1]) {
        return ERR("output must be [N, C, 1, ...] for an input of rank %d", x->rank);
    }
    int64_t sp = x->n / (y->n ? y->n : 1);
    for (int64_t i = 0; i < y->n; i++) {
        double s = 0;
        for (int64_t k = 0; k < sp; k++) {
            s += x->d[i * sp + k];
        }
        y->d[i] = s / (double)sp;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Normalisation and softmax

// BatchNormalization over x: [N, C, ...] with per-channel scale, B, mean, var: [C].
// Inference: y = scale * (x - mean) / sqrt(var + eps) + B.
// Training (training_mode = 1 or opts->training): the batch's mean and biased variance replace
// mean/var, and outputs 1/2 are running_mean = mean*momentum + batch_mean*(1-momentum), same
// for var with the *biased* batch variance (ONNX's reference; PyTorch uses the unbiased one).
// Outside training, the optional outputs pass mean and var through unchanged.
static dl_status batch_norm(dl_ir__ectx *cx, dl_ir__et *const *in, dl_ir__et *out, size_t n_out) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *x = in[0], *sc = in[1], *bi = in[2], *mu = in[3], *va = in[4];
    if (x->rank < 2 || !sc || !bi || !mu || !va) {
        return ERR("needs X of rank >= 2 and all four channel inputs");
    }
    int64_t N = x->dims[0], C = x->dims[1], S = (N * C) != 0 ? x->n / (N * C) : 1;
    if (sc->n != C || bi->n != C || mu->n != C || va->n != C || out[0].n != x->n) {
        return ERR("channel inputs must have %lld elements", (long long)C);
    }
    for (size_t k = 1; k < n_out; k++) {
        if (out[k].n != C) {
            return ERR("output %zu must have %lld elements", k, (long long)C);
        }
    }
    double eps = dl_ir_node_attr_float(nd, "epsilon"), mom = dl_ir_node_attr_float(nd, "momentum");
    bool train = cx->training || dl_ir_node_attr_int(nd, "training_mode") != 0;
    for (int64_t c = 0; c < C; c++) {
        double m = mu->d[c], v = va->d[c];
        if (train) {
            double s = 0, ss = 0, cnt = (double)(N * S);
            for (int64_t n = 0; n < N; n++) {
                for (int64_t k = 0; k < S; k++) {
                    s += x->d[(n * C + c) * S + k];
                }
            }
            m = s / cnt;
            for (int64_t n = 0; n < N; n++) {
                for (int64_t k = 0; k < S; k++) {
                    double dv = x->d[(n * C + c) * S + k] - m;
                    ss += dv * dv;
                }
            }
            v = ss / cnt;
        }
        double inv = 1.0 / sqrt(v + eps);
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (n * C + c) * S + k;
                out[0].d[i] = sc->d[c] * (x->d[i] - m) * inv + bi->d[c];
            }
        }
        if (n_out > 1) {
            out[1].d[c] = train ? mu->d[c] * mom + m * (1 - mom) : mu->d[c];
        }
        if (n_out > 2) {
            out[2].d[c] = train ? va->d[c] * mom + v * (1 - mom) : va->d[c];
        }
    }
    return DL_OK;
}

// LayerNormalization: normalise over dims [axis, rank) with biased variance;
// y = (x - mean) * inv_std * scale + B (scale and B broadcast against x's trailing dims).
// Optional outputs Mean and InvStdDev: [d0, ..., d_{axis-1}, 1, ..., 1].
static dl_status layer_norm(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                            size_t n_out) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *x = in[0], *sc = in[1], *bi = n_in > 2 ? in[2] : NULL;
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(nd, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    if (!sc || !dl_ir__bcast_ok(sc, x->dims, x->rank) ||
        (bi && !dl_ir__bcast_ok(bi, x->dims, x->rank)) || out[0].n != x->n) {
        return ERR("Scale and B must broadcast to the input");
    }
    int64_t outer = 1;
    for (int32_t i = 0; i < ax; i++) {
        outer *= x->dims[i];
    }
    int64_t inner = x->n / (outer ? outer : 1);
    for (size_t k = 1; k < n_out; k++) {
        if (out[k].n != outer) {
            return ERR("output %zu must have %lld elements", k, (long long)outer);
        }
    }
    double eps = dl_ir_node_attr_float(nd, "epsilon");
    int64_t c[DL_MAX_RANK];
    for (int64_t o = 0; o < outer; o++) {
        const double *px = x->d + o * inner;
        double m = 0, v = 0;
        for (int64_t k = 0; k < inner; k++) {
            m += px[k];
        }
        m /= (double)inner;
        for (int64_t k = 0; k < inner; k++) {
            v += (px[k] - m) * (px[k] - m);
        }
        v /= (double)inner;
        double inv = 1.0 / sqrt(v + eps);
        for (int64_t k = 0; k < inner; k++) {
            int64_t i = o * inner + k;
            dl_ir__unravel(i, x->dims, x->rank, c);
            double r = (px[k] - m) * inv * sc->d[dl_ir__bcast_index(sc, c, x->rank)];
            out[0].d[i] = r + (bi ? bi->d[dl_ir__bcast_index(bi, c, x->rank)] : 0);
        }
        if (n_out > 1) {
            out[1].d[o] = m;
        }
        if (n_out > 2) {
            out[2].d[o] = inv;
        }
    }
    return DL_OK;
}

// Softmax / LogSoftmax along one axis (opset 13+), with the max subtracted first.
static void softmax_axis(const double *x, double *y, const int64_t *dims, int32_t rank, int32_t ax,
                         bool is_log) {
    int64_t outer = 1, inner = 1, len = dims[ax];
    for (int32_t i = 0; i < ax; i++) {
        outer *= dims[i];
    }
    for (int32_t i = ax + 1; i < rank; i++) {
        inner *= dims[i];
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            double mx = -INFINITY, s = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = x[(o * len + k) * inner + in];
                mx = v > mx ? v : mx;
            }
            for (int64_t k = 0; k < len; k++) {
                s += exp(x[(o * len + k) * inner + in] - mx);
            }
            for (int64_t k = 0; k < len; k++) {
                int64_t i = (o * len + k) * inner + in;
                y[i] = is_log ? x[i] - mx - log(s) : exp(x[i] - mx) / s;
            }
        }
    }
}

static dl_status softmax(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(cx->node, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    if (y->n != x->n) {
        return ERR("output shape differs from the input");
    }
    softmax_axis(x->d, y->d, x->dims, x->rank, ax, cx->node->op == DL_IR_OP_LOG_SOFTMAX);
    return DL_OK;
}

// Dropout: identity unless training (opts->training, or a true training_mode input). Then
// element i is kept when dl_rng_uniform(seed, counter * numel + i) >= ratio, with counter the
// optional 4th input (an int64 scalar, the train step's RNG counter; 0 when absent), and
// y = keep ? x / (1 - ratio) : x * 0, mask = keep; ratio from input 1, else the attribute. With
// ratio == 1 nothing is kept (u < 1 always), so y = x * 0 and there is no division by zero. The
// optional mask output is all true when not training. codegen/lower_elem.c replicates this
// draw bit for bit (the uint64 index arithmetic wraps the same way).
static dl_status dropout(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    const dl_ir_node *nd = cx->node;
    const dl_ir__et *x = in[0];
    double ratio = dl_ir_node_attr_float(nd, "ratio");
    if (n_in > 1 && in[1]) {
        ratio = in[1]->d[0];
    }
    bool train = cx->training || (n_in > 2 && in[2] && in[2]->d[0] != 0);
    if (ratio < 0 || ratio > 1) {
        return ERR("ratio %g is outside [0, 1]", ratio);
    }
    if (out[0].n != x->n || (n_out > 1 && out[1].n != x->n)) {
        return ERR("outputs must have the input's shape");
    }
    uint64_t counter = 0;
    if (n_in > 3 && in[3]) {
        if (in[3]->n != 1) {
            return ERR("counter must be a scalar");
        }
        counter = (uint64_t)(int64_t)in[3]->d[0];
    }
    uint64_t seed = (uint64_t)dl_ir_node_attr_int(nd, "seed");
    uint64_t base = counter * (uint64_t)x->n;
    for (int64_t i = 0; i < x->n; i++) {
        bool keep = !train || dl_rng_uniform(seed, base + (uint64_t)i) >= ratio;
        // A dropped element is x * 0, as PyTorch's x * mask * scale: NaN and inf give NaN.
        out[0].d[i] = !train ? x->d[i] : (keep ? x->d[i] / (1.0 - ratio) : x->d[i] * 0.0);
        if (n_out > 1) {
            out[1].d[i] = keep ? 1 : 0;
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Losses

// Shared by SoftmaxCrossEntropyLoss (on log-softmax scores) and NegativeLogLikelihoodLoss.
// logp: [N, C, d...] (dims/rank), labels: [N, d...], weights: [C] or NULL. ignore_index is
// active only when the attribute is present. reduction: none -> y[N, d...]; sum; mean = sum /
// (sum of the weights of non-ignored targets, or their count without weights).
static dl_status nll(dl_ir__ectx *cx, const double *logp, const int64_t *dims, int32_t rank,
                     const dl_ir__et *labels, const dl_ir__et *weights, dl_ir__et *y) {
    const dl_ir_node *nd = cx->node;
    if (rank < 2) {
        return ERR("input must have rank >= 2, got %d", rank);
    }
    int64_t N = dims[0], C = dims[1], D = 1;
    for (int32_t i = 2; i < rank; i++) {
        D *= dims[i];
    }
    if (labels->n != N * D || labels->rank != rank - 1) {
        return ERR("labels must be [N, d...] with %lld elements", (long long)(N * D));
    }
    if (weights && weights->n != C) {
        return ERR("weights must have %lld elements", (long long)C);
    }
    const dl_ir_attr *ig = dl_ir_node_attr(nd, "ignore_index");
    const char *red = dl_ir_node_attr_string(nd, "reduction");
    bool none = strcmp(red, "none") == 0;
    if (none ? y->n != N * D : y->n != 1) {
        return ERR("output has %lld elements for reduction '%s'", (long long)y->n, red);
    }
    double sum = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t d = 0; d < D; d++) {
            int64_t t = (int64_t)labels->d[n * D + d];
            double l = 0, w = 0;
            if (!(ig && t == ig->i)) {
                if (t < 0 || t >= C) {
                    return ERR("label %lld is out of range for %lld classes", (long long)t,
                               (long long)C);
                }
                w = weights ? weights->d[t] : 1.0;
                l = -logp[(n * C + t) * D + d] * w;
            }
            if (none) {
                y->d[n * D + d] = l;
            }
            sum += l;
            wsum += w;
        }
    }
    if (!none) {
        y->d[0] = strcmp(red, "sum") == 0 ? sum : sum / wsum;
    }
    return DL_OK;
}

// SoftmaxCrossEntropyLoss: log_prob = LogSoftmax(scores, axis 1) (optional output 1), then NLL.
static dl_status sce(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                     size_t n_out) {
    const dl_ir__et *x = in[0];
    if (x->rank < 2) {
        return ERR("scores must have rank >= 2, got %d", x->rank);
    }
    if (n_out > 1 && out[1].n != x->n) {
        return ERR("log_prob must have the scores' shape");
    }
    dl_ir__et lp = {0};
    double *buf = n_out > 1 ? out[1].d : dl_mem_calloc((size_t)(x->n ? x->n : 1), sizeof(double));
    if (!buf) {
        return DL_ERR_NOMEM;
    }
    lp.d = buf;
    softmax_axis(x->d, lp.d, x->dims, x->rank, 1, true);
    dl_status st = nll(cx, lp.d, x->dims, x->rank, in[1], n_in > 2 ? in[2] : NULL, &out[0]);
    if (n_out <= 1) {
        free(buf);
    }
    return st;
}

// MeanSquaredError (not ONNX): (a - b)^2 elementwise with broadcasting, then mean | sum | none.
static dl_status mse(dl_ir__ectx *cx, const dl_ir__et *a, const dl_ir__et *b, dl_ir__et *y) {
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    int64_t bd[DL_MAX_RANK], nb = 1;
    for (int32_t i = 0; i < r; i++) {
        int32_t ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return ERR("inputs do not broadcast (%lld vs %lld)", (long long)da, (long long)db);
        }
        bd[i] = da == 1 ? db : da;
        nb *= bd[i];
    }
    const char *red = dl_ir_node_attr_string(cx->node, "reduction");
    bool none = strcmp(red, "none") == 0;
    if (none ? y->n != nb : y->n != 1) {
        return ERR("output has %lld elements for reduction '%s'", (long long)y->n, red);
    }
    double sum = 0;
    int64_t c[DL_MAX_RANK];
    for (int64_t i = 0; i < nb; i++) {
        dl_ir__unravel(i, bd, r, c);
        double dv = a->d[dl_ir__bcast_index(a, c, r)] - b->d[dl_ir__bcast_index(b, c, r)];
        if (none) {
            y->d[i] = dv * dv;
        }
        sum += dv * dv;
    }
    if (!none) {
        y->d[0] = strcmp(red, "sum") == 0 ? sum : sum / (double)nb;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------

// Hooks of the evaluator's table (eval_ops.c); dl_ir__eval_node checked the required inputs.

dl_status dl_ir__ev_matmul(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    (void)n_in, (void)n_out;
    return matmul(cx, in[0], in[1], &out[0]);
}

dl_status dl_ir__ev_gemm(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    (void)n_out;
    return gemm(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_conv(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    (void)n_out;
    return conv(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_conv_transpose(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                   dl_ir__et *out, size_t n_out) {
    (void)n_out;
    return conv_transpose(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_pool(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    (void)n_in;
    return pool(cx, in[0], out, n_out);
}

dl_status dl_ir__ev_global_pool(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                                size_t n_out) {
    (void)n_in, (void)n_out;
    return global_avg_pool(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_batch_norm(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                               size_t n_out) {
    (void)n_in;
    return batch_norm(cx, in, out, n_out);
}

dl_status dl_ir__ev_layer_norm(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                               size_t n_out) {
    return layer_norm(cx, in, n_in, out, n_out);
}

dl_status dl_ir__ev_softmax(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                            size_t n_out) {
    (void)n_in, (void)n_out;
    return softmax(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_dropout(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                            size_t n_out) {
    return dropout(cx, in, n_in, out, n_out);
}

dl_status dl_ir__ev_sce(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                        size_t n_out) {
    return sce(cx, in, n_in, out, n_out);
}

dl_status dl_ir__ev_nll(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                        size_t n_out) {
    (void)n_out;
    return nll(cx, in[0]->d, in[0]->dims, in[0]->rank, in[1], n_in > 2 ? in[2] : NULL, &out[0]);
}

dl_status dl_ir__ev_mse(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                        size_t n_out) {
    (void)n_in, (void)n_out;
    return mse(cx, in[0], in[1], &out[0]);
}
