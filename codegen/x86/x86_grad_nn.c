// codegen/x86_grad_nn.c — lowering of the internal gradient ops of the NN family (see
// cg_internal.h): ConvGradWeight, MaxPoolGrad, AveragePoolGrad, BatchNormalizationGrad.
// Semantics as ir/eval_grad_nn.c (the oracle); pool geometry, window count and the max rule are
// lower_nn.c's own (shared through cg_geometry.h).
//
// ConvGradWeight: Winograd's F(3 x 3, 2 x 2) where dl_cg__wino_grad_ok takes it (3 x 3, stride
// 1, one group: x86_winograd.c). Else an implicit GEMM per group where dl_cg__conv_gemm_ok takes
// it (dw = dy x
// im2col(x)^T with K = N*OH*OW in ascending order, x86_linalg.c). Else, for stride 1 with output
// rows as wide as the input's (cgw_lanes_ok: the CNN's one-channel first layer, groups of fewer
// than 8 outputs), the lanes-over-positions kernel below (cgw_lanes). Otherwise the direct kernel:
// outer range M * C/group, iteration (m, c) owns dw[m, c, :, :] and reduces over
// n, oh, ow entirely inside itself (fixed order: n, oh, column tiles, then the edge columns),
// so any split of the range gives the same bytes. The kernel taps are handled in blocks of IB
// tap rows: a block keeps IB * kW vector accumulators (TW lanes over output columns) in
// registers, and each dy vector dy[n, m, oh, ow0 .. ow0+TW) is loaded once and multiplied by the
// matching x vector of every tap of the block. Columns whose taps all lie inside the input
// (compile-time range) use unchecked vector loads; a remainder narrower than TW is one more tile
// ending at the last interior column with its already-counted leading lanes zeroed (dy and x, so
// an inf in x cannot make 0 * inf); the few edge columns use a scalar path that leaves out the
// taps in the padding (as the evaluator does: a non-finite dy there must not meet a zero).
// Output rows whose tap rows are all inside the input skip the per-row check. No divisions in
// the hot loops; lane sums and scalar edge sums are added in the epilogue.
//
// MaxPoolGrad / AveragePoolGrad: outer range N * C, one [n, c] plane per iteration: dx plane =
// 0, then the output windows in order, each scattering into its own plane only (the forward's
// argmax by lower_pool's rule, or dy / count over the in-image taps). MaxPoolGrad over windows
// that tile the input exactly may head a fusion group (dl_cg__lower_pool_grad_fused): the
// members after it (the gradient of the activation before the pooling) apply to each dx value
// before its one store, so dx itself is never written.
//
// BatchNormalizationGrad: outer range C; a channel's statistics, sums and dx are all inside its
// iteration (f32 sums with 16-lane partials per contiguous run, runs added in batch order).
#include "cg_geometry.h"
#include "cg_internal.h"
#include "x86_conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Small helpers (the ones shared with lower_nn.c: cg_geometry.h)

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// ---------------------------------------------------------------------------------------------
// ConvGradWeight

#define CGW_MAX_ACC 64 // accumulators of one tap block (IB * kW), register-sized blocks are <= 12

typedef struct cgw_geo {
    int64_t N, C, H, W, M, OH, OW, Cg, Mg, kH, kW;
    int64_t s[2], dil[2], pb[2];
    dl_dtype dt;
    int64_t in_lo, in_hi; // interior columns: every tap of every column inside the input
    unsigned tw;          // vector tile width (0: every column on the scalar path)
} cgw_geo;

// State of one tap block inside the kernel.
typedef struct cgw_blk {
    const cgw_geo *g;
    const cg_kernel *k;
    int64_t i0, ib;                        // tap rows [i0, i0 + ib)
    LLVMValueRef vacc[CGW_MAX_ACC];        // [r * kW + j]: lanes over columns
    LLVMValueRef sacc[CGW_MAX_ACC];        // scalar sums of the edge columns
    LLVMValueRef dyrow, xrow[CGW_MAX_ACC]; // per output row: dy row start, x row start per r
    LLVMValueRef valid[CGW_MAX_ACC];       // per r: tap row inside the input (NULL: known)
} cgw_blk;

// x[xrow + ow0*sw - pl + j*dil .. step sw] for `tw` lanes (every lane inside the row).
static LLVMValueRef cgw_xvec(cg *c, const cgw_blk *b, LLVMValueRef xrow, LLVMValueRef ow0,
                             int64_t j) {
    const cgw_geo *g = b->g;
    unsigned tw = g->tw;
    int64_t sw = g->s[1];
    LLVMValueRef p0 = iaddk(c, iadd(c, xrow, imul(c, ow0, sw)), -g->pb[1] + j * g->dil[1]);
    if (sw == 1) {
        return dl_cg__vload(c, b->k->ptr[2], g->dt, p0, tw);
    }
    if (sw <= 4) { // one wide load, every sw-th lane (the interior keeps it inside the row)
        LLVMValueRef wide = dl_cg__vload(c, b->k->ptr[2], g->dt, p0, tw * (unsigned)sw);
        LLVMValueRef mask[16];
        for (unsigned l = 0; l < tw; l++) {
            mask[l] = cg_i32(c, (int32_t)(l * (unsigned)sw));
        }
        return LLVMBuildShuffleVector(c->b, wide, LLVMGetUndef(LLVMTypeOf(wide)),
                                      LLVMConstVector(mask, tw), "");
    }
    LLVMValueRef v = LLVMGetUndef(vty(c, tw));
    for (unsigned l = 0; l < tw; l++) {
        LLVMValueRef e = cg_load(c, b->k->ptr[2], g->dt, iaddk(c, p0, (int64_t)l * sw));
        v = LLVMBuildInsertElement(c->b, v, e, cg_i32(c, (int32_t)l), "");
    }
    return v;
}

// One vector tile at column ow0; the first `skip` lanes are zeroed (the remainder tile).
static void cgw_tile(cg *c, const cgw_blk *b, LLVMValueRef ow0, unsigned skip) {
    const cgw_geo *g = b->g;
    unsigned tw = g->tw;
    LLVMTypeRef vt = vty(c, tw);
    LLVMValueRef keep = NULL;
    if (skip > 0) {
        LLVMValueRef bits[16];
        for (unsigned l = 0; l < tw; l++) {
            bits[l] = LLVMConstInt(c->t_i1, l >= skip, 0);
        }
        keep = LLVMConstVector(bits, tw);
    }
    LLVMValueRef dyv = dl_cg__vload(c, b->k->ptr[1], g->dt, iadd(c, b->dyrow, ow0), tw);
    if (keep) {
        dyv = LLVMBuildSelect(c->b, keep, dyv, LLVMConstNull(vt), "");
    }
    for (int64_t r = 0; r < b->ib; r++) {
        dl_cg__if f;
        if (b->valid[r]) {
            dl_cg__if_begin(c, &f, b->valid[r]);
        }
        for (int64_t j = 0; j < g->kW; j++) {
            LLVMValueRef xv = cgw_xvec(c, b, b->xrow[r], ow0, j);
            if (keep) {
                xv = LLVMBuildSelect(c->b, keep, xv, LLVMConstNull(vt), "");
            }
            LLVMValueRef acc = b->vacc[r * g->kW + j];
            st(c, dl_cg__fmuladd(c, dyv, xv, ld(c, vt, acc)), acc);
        }
        if (b->valid[r]) {
            dl_cg__if_end(c, &f);
        }
    }
}

// Scalar columns [lo, hi), every tap checked against the row.
static void cgw_edge(cg *c, const cgw_blk *b, int64_t lo, int64_t hi) {
    const cgw_geo *g = b->g;
    if (lo >= hi) {
        return;
    }
    cg_loop l;
    LLVMValueRef ow = cg_for_begin(c, &l, cg_i64(c, lo), cg_i64(c, hi), "ow");
    LLVMValueRef dyv = cg_load(c, b->k->ptr[1], g->dt, iadd(c, b->dyrow, ow));
    LLVMValueRef base = iaddk(c, imul(c, ow, g->s[1]), -g->pb[1]);
    for (int64_t r = 0; r < b->ib; r++) {
        dl_cg__if f;
        if (b->valid[r]) {
            dl_cg__if_begin(c, &f, b->valid[r]);
        }
        for (int64_t j = 0; j < g->kW; j++) {
            LLVMValueRef iw = iaddk(c, base, j * g->dil[1]);
            // a tap in the padding adds nothing (not dy * 0: a non-finite dy stays out of it)
            dl_cg__if fo;
            dl_cg__if_begin(c, &fo, in_range(c, iw, 0, g->W));
            LLVMValueRef xv = cg_load(c, b->k->ptr[2], g->dt, iadd(c, b->xrow[r], iw));
            LLVMValueRef acc = b->sacc[r * g->kW + j];
            st(c, dl_cg__fmuladd(c, dyv, xv, ld(c, c->t_f32, acc)), acc);
            dl_cg__if_end(c, &fo);
        }
        if (b->valid[r]) {
            dl_cg__if_end(c, &f);
        }
    }
    cg_for_end(c, &l);
}

// Output rows [lo, hi) of batch item n (dyplane, xplane: starts of dy[n, m] and x[n, g*Cg+c]);
// `checked`: some tap row of the block may fall outside the input.
static void cgw_rows(cg *c, cgw_blk *b, LLVMValueRef dyplane, LLVMValueRef xplane, int64_t lo,
                     int64_t hi, bool checked) {
    const cgw_geo *g = b->g;
    if (lo >= hi) {
        return;
    }
    cg_loop l;
    LLVMValueRef oh = cg_for_begin(c, &l, cg_i64(c, lo), cg_i64(c, hi), "oh");
    b->dyrow = iadd(c, dyplane, imul(c, oh, g->OW));
    LLVMValueRef ih0 = iaddk(c, imul(c, oh, g->s[0]), -g->pb[0]);
    for (int64_t r = 0; r < b->ib; r++) {
        LLVMValueRef ih = iaddk(c, ih0, (b->i0 + r) * g->dil[0]);
        b->valid[r] = checked ? in_range(c, ih, 0, g->H) : NULL;
        // a row outside the input is never read (every use sits under valid[r])
        b->xrow[r] = iadd(c, xplane, imul(c, ih, g->W));
    }
    if (g->tw > 0) {
        int64_t width = g->in_hi - g->in_lo, n_full = width / (int64_t)g->tw;
        int64_t rem = width % (int64_t)g->tw;
        cg_loop lt;
        LLVMValueRef t = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, n_full), "tile");
        cgw_tile(c, b, iaddk(c, imul(c, t, (int64_t)g->tw), g->in_lo), 0);
        cg_for_end(c, &lt);
        if (rem > 0) {
            cgw_tile(c, b, cg_i64(c, g->in_hi - (int64_t)g->tw), g->tw - (unsigned)rem);
        }
        cgw_edge(c, b, 0, g->in_lo);
        cgw_edge(c, b, g->in_hi, g->OW);
    } else {
        cgw_edge(c, b, 0, g->OW);
    }
    cg_for_end(c, &l);
}

// The lanes-over-positions kernel (cgw_lanes_ok): stride 1, dilation 1, output rows as wide as
// the input's (OW == W), kernels 2 to 4 taps wide, float32, wide vectors. Positions p = oh*OW + ow
// of one image are then consecutive in dy and, shifted by a tap's (kh - ph)*W + kw - pw, in x:
// dw[m, ci, kh, kw] = sum over n and p of dy[n, m, p] * x[n, ci, p + shift], lanes over p, with
// no packing and no transposes (the implicit GEMM's B panel needs both: its k runs along the
// positions, its lanes along the taps). A constant table holds, per vector of positions and tap,
// the lanes whose tap lies inside the image (zero padding, the row ends, the last vector's lanes
// past OH*OW): x is read by masked loads, which never touch a masked-off lane, so the shifted
// reads before the first and past the last element of x are safe. The register tile is R output
// channels by the kW taps of one (ci, kh): R dy vectors and kW x vectors per R*kW fused
// multiply-adds (AVX2: 4 x 3, AVX-512: 8 x 3).
//
// Outer range: groups x channel blocks of CB inputs x blocks of R outputs. An iteration owns
// dw[its R outputs, its CB inputs, :, :]: it keeps every lane sum of them in an alloca (<= 32
// KiB), adds image by image (n ascending, then ci, kh, and the vectors of positions in order),
// and stores the ordered lane sums at the end; any split of the range gives the same bytes.
//
// Measured on Zen 3 (AVX2, bench/kernel_times.py over the CNN's train step): the one-channel first
// layer's gradient 0.95 -> 0.77 ms (the direct kernel's before; it reads dy's 6.4 MB once and is
// bound by memory). On the second layer (32 -> 64 channels, 14 x 14) it took 8.2 ms against the
// implicit GEMM's 7.3: its loop issues 10 loads per 12 multiply-adds (3 masks, 3 masked x, 4 dy),
// the GEMM's microkernel 8, so the implicit GEMM keeps every shape it takes.
#define CGW_LANES_ACC  32768  // bytes of lane sums an iteration keeps (L1)
#define CGW_LANES_MASK 131072 // bytes of the mask table at most

typedef struct cgw_lanes {
    const cgw_geo *g;
    const cg_kernel *k;
    unsigned vw;                  // lanes
    int64_t R, CB, P, nv;         // tile rows, input channels per iteration, positions, vectors
    LLVMValueRef table, acc;      // mask table, lane sums [R][CB][kH][kW] vectors
    LLVMValueRef ar[CGW_MAX_ACC]; // the tile's accumulators (allocas promoted to registers)
} cgw_lanes;

// Output channels per register tile: 12 accumulators with AVX2's 16 registers, 24 with
// AVX-512's 32, kW of them per output.
static int64_t cgw_lanes_rows(int64_t vw, int64_t kW) {
    return (vw >= 16 ? 24 : 12) / kW;
}

static bool cgw_lanes_ok(cg *c, const cgw_geo *g) {
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    if (g->dt != DL_DT_FLOAT || vw < 8 || vw > 16 || g->s[0] != 1 || g->s[1] != 1 ||
        g->dil[0] != 1 || g->dil[1] != 1 || g->OW != g->W || g->kW < 2 || g->kW > 4 || g->Mg < 4 ||
        g->OH * g->OW < vw) {
        return false;
    }
    // one input channel's lane sums fit the alloca (tall kernels: the direct kernel), and the
    // mask table its budget
    int64_t R = cgw_lanes_rows(vw, g->kW), nv = (g->OH * g->OW + vw - 1) / vw;
    return R * g->kH * g->kW * vw * 4 <= CGW_LANES_ACC &&
           nv * g->kH * g->kW * vw * 4 <= CGW_LANES_MASK;
}

// The mask table: [v][kh][kw] of vw i32 lanes, -1 where position v*vw + l exists and its tap
// (kh, kw) lies inside the image.
static LLVMValueRef cgw_lanes_table(cg *c, const cgw_geo *g, int64_t vw, int64_t nv) {
    int64_t n = nv * g->kH * g->kW * vw, P = g->OH * g->OW;
    LLVMValueRef *e = malloc((size_t)n * sizeof *e);
    if (!e) {
        return NULL;
    }
    int64_t i = 0;
    for (int64_t v = 0; v < nv; v++) {
        for (int64_t kh = 0; kh < g->kH; kh++) {
            for (int64_t kw = 0; kw < g->kW; kw++) {
                for (int64_t l = 0; l < vw; l++) {
                    int64_t p = v * vw + l, ih = p / g->OW + kh - g->pb[0];
                    int64_t iw = p % g->OW + kw - g->pb[1];
                    bool in = p < P && ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;
                    e[i++] = cg_i32(c, in ? -1 : 0);
                }
            }
        }
    }
    LLVMTypeRef at = LLVMArrayType2(c->t_i32, (uint64_t)n);
    LLVMValueRef t = LLVMAddGlobal(c->mod, at, "cgw.mask");
    LLVMSetInitializer(t, LLVMConstArray2(c->t_i32, e, (uint64_t)n));
    free(e);
    LLVMSetGlobalConstant(t, 1);
    LLVMSetLinkage(t, LLVMPrivateLinkage);
    LLVMSetAlignment(t, 64);
    return t;
}

// One vector of positions v (i64) for the tile's `rows` outputs: x vectors of the kW taps of
// row kh through the table's masks, dy vectors (`tail`: the last, partial vector) into the
// accumulators.
static void cgw_lanes_vec(cg *c, const cgw_lanes *L, int64_t rows, LLVMValueRef v, LLVMValueRef kh,
                          LLVMValueRef xoff, LLVMValueRef dyoff, bool tail) {
    const cgw_geo *g = L->g;
    unsigned n = L->vw;
    LLVMTypeRef vt = vty(c, n), it = LLVMVectorType(c->t_i32, n);
    LLVMValueRef pos = imul(c, v, (int64_t)n), xs[4];
    LLVMValueRef trow = imul(c, iadd(c, imul(c, v, g->kH), kh), g->kW * (int64_t)n);
    for (int64_t t = 0; t < g->kW; t++) {
        LLVMValueRef ti = iaddk(c, trow, t * (int64_t)n);
        LLVMValueRef mp = LLVMBuildInBoundsGEP2(c->b, c->t_i32, L->table, &ti, 1, "");
        LLVMValueRef mv = LLVMBuildLoad2(c->b, it, mp, "");
        LLVMSetAlignment(mv, n * 4);
        LLVMValueRef m = LLVMBuildICmp(c->b, LLVMIntSLT, mv, LLVMConstNull(it), "");
        // not inbounds: a masked-off lane's address may lie before x
        LLVMValueRef xi = iaddk(c, iadd(c, xoff, pos), t);
        LLVMValueRef xp = LLVMBuildGEP2(c->b, c->t_f32, L->k->ptr[2], &xi, 1, "");
        xs[t] = cg_masked_load(c, vt, xp, m);
    }
    LLVMValueRef dmask = tail ? cg_lane_mask_rt(c, cg_i64(c, L->P - (L->nv - 1) * n), n) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        LLVMValueRef di = iadd(c, iaddk(c, dyoff, r * L->P), pos);
        LLVMValueRef dp = LLVMBuildInBoundsGEP2(c->b, c->t_f32, L->k->ptr[1], &di, 1, "");
        LLVMValueRef d = cg_masked_load(c, vt, dp, dmask);
        for (int64_t t = 0; t < g->kW; t++) {
            LLVMValueRef a = L->ar[r * g->kW + t];
            st(c, dl_cg__fmuladd(c, d, xs[t], ld(c, vt, a)), a);
        }
    }
}

// The block's gradients again by the definition, when one it stored is not finite: the lanes
// multiply the zeros they read for taps in the padding by dy, where the evaluator leaves those
// taps out, so a non-finite dy[n, m] would make NaN of every gradient of output m. Such a dy
// makes each of them Inf or NaN (every position meets every tap, in the image or in the
// padding), so a block whose stored values are all finite saw none. The definition's sums go
// (n, oh, ow) ascending over the taps inside the image, scalar: this is the rare path.
static void cgw_lanes_fix(cg *c, const cgw_lanes *L, int64_t rows, LLVMValueRef co,
                          LLVMValueRef xch0, LLVMValueRef cis, LLVMValueRef dwbase) {
    const cgw_geo *g = L->g;
    const cg_kernel *k = L->k;
    int64_t kk = g->kH * g->kW;
    LLVMValueRef mx = dl_cg__entry_alloca(c, c->t_i32);
    st(c, cg_i32(c, 0), mx);
    cg_loop lr, le;
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, rows), "fr");
    LLVMValueRef e = cg_for_begin(c, &le, cg_i64(c, 0), imul(c, cis, kk), "fe");
    LLVMValueRef wi = iadd(c, iadd(c, dwbase, imul(c, r, g->Cg * kk)), e);
    cg_abs_bits_max(c, mx, k->ptr[0], wi);
    cg_for_end(c, &le);
    cg_for_end(c, &lr);
    dl_cg__if bad;
    dl_cg__if_begin(c, &bad, cg_bits_not_finite(c, mx));
    LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
    cg_loop lm, lc, lt, ln, lh, lw;
    LLVMValueRef m = cg_for_begin(c, &lm, cg_i64(c, 0), cg_i64(c, rows), "dm");
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cis, "dc");
    LLVMValueRef t = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, kk), "dt");
    LLVMValueRef kh = LLVMBuildUDiv(c->b, t, cg_i64(c, g->kW), "");
    LLVMValueRef kw = LLVMBuildURem(c->b, t, cg_i64(c, g->kW), "");
    st(c, cg_f32(c, 0), acc);
    LLVMValueRef nn = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, g->N), "dn");
    LLVMValueRef dyp = imul(c, iadd(c, imul(c, nn, g->M), iadd(c, co, m)), g->OH * g->OW);
    LLVMValueRef xp = imul(c, iadd(c, imul(c, nn, g->C), iadd(c, xch0, ci)), g->H * g->W);
    LLVMValueRef oh = cg_for_begin(c, &lh, cg_i64(c, 0), cg_i64(c, g->OH), "doh");
    LLVMValueRef ih = iaddk(c, iadd(c, oh, kh), -g->pb[0]); // stride and dilation 1
    dl_cg__if fh;
    dl_cg__if_begin(c, &fh, in_range(c, ih, 0, g->H));
    LLVMValueRef ow = cg_for_begin(c, &lw, cg_i64(c, 0), cg_i64(c, g->OW), "dow");
    LLVMValueRef iw = iaddk(c, iadd(c, ow, kw), -g->pb[1]);
    dl_cg__if fw;
    dl_cg__if_begin(c, &fw, in_range(c, iw, 0, g->W));
    LLVMValueRef dv =
        cg_load(c, k->ptr[1], DL_DT_FLOAT, iadd(c, dyp, iadd(c, imul(c, oh, g->OW), ow)));
    LLVMValueRef xv =
        cg_load(c, k->ptr[2], DL_DT_FLOAT, iadd(c, xp, iadd(c, imul(c, ih, g->W), iw)));
    st(c, dl_cg__fmuladd(c, dv, xv, ld(c, c->t_f32, acc)), acc);
    dl_cg__if_end(c, &fw);
    cg_for_end(c, &lw);
    dl_cg__if_end(c, &fh);
    cg_for_end(c, &lh);
    cg_for_end(c, &ln);
    cg_store(c, k->ptr[0], DL_DT_FLOAT,
             iadd(c, iadd(c, dwbase, imul(c, m, g->Cg * kk)), iadd(c, imul(c, ci, kk), t)),
             ld(c, c->t_f32, acc));
    cg_for_end(c, &lt);
    cg_for_end(c, &lc);
    cg_for_end(c, &lm);
    dl_cg__if_end(c, &bad);
}

// One iteration's body for `rows` (<= R) outputs from channel co (i64, the group's first
// output channel of the block is co - grp*Mg), inputs [ci0, ci0 + cis) of group grp.
static void cgw_lanes_block(cg *c, const cgw_lanes *L, int64_t rows, LLVMValueRef co,
                            LLVMValueRef xch0, LLVMValueRef cis, LLVMValueRef dwbase) {
    const cgw_geo *g = L->g;
    unsigned n = L->vw;
    LLVMTypeRef vt = vty(c, n);
    int64_t kk = g->kH * g->kW;
    // lane sums of (r, ci, kh, kw) at acc[((r*CB + ci)*kH + kh)*kW + kw]
    cg_loop lz;
    LLVMValueRef z = cg_for_begin(c, &lz, cg_i64(c, 0), cg_i64(c, rows * L->CB * kk), "z");
    st(c, LLVMConstNull(vt), LLVMBuildInBoundsGEP2(c->b, vt, L->acc, &z, 1, ""));
    cg_for_end(c, &lz);
    int64_t nvf = L->P / (int64_t)n;
    cg_loop ln, lc, lh;
    LLVMValueRef nb = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, g->N), "n");
    LLVMValueRef dyoff = imul(c, iadd(c, imul(c, nb, g->M), co), L->P);
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cis, "ci");
    LLVMValueRef xbase = imul(c, iadd(c, imul(c, nb, g->C), iadd(c, xch0, ci)), g->H * g->W);
    LLVMValueRef kh = cg_for_begin(c, &lh, cg_i64(c, 0), cg_i64(c, g->kH), "kh");
    LLVMValueRef xoff = iadd(c, xbase, iaddk(c, imul(c, kh, g->W), -g->pb[0] * g->W - g->pb[1]));
    LLVMValueRef slot[CGW_MAX_ACC];
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t t = 0; t < g->kW; t++) {
            LLVMValueRef ai = iaddk(
                c, imul(c, iadd(c, imul(c, iadd(c, cg_i64(c, r * L->CB), ci), g->kH), kh), g->kW),
                t);
            slot[r * g->kW + t] = LLVMBuildInBoundsGEP2(c->b, vt, L->acc, &ai, 1, "");
            st(c, ld(c, vt, slot[r * g->kW + t]), L->ar[r * g->kW + t]);
        }
    }
    if (nvf > 0) {
        cg_loop lv;
        LLVMValueRef v = cg_for_begin(c, &lv, cg_i64(c, 0), cg_i64(c, nvf), "v");
        cgw_lanes_vec(c, L, rows, v, kh, xoff, dyoff, false);
        cg_for_end(c, &lv);
    }
    if (nvf < L->nv) {
        cgw_lanes_vec(c, L, rows, cg_i64(c, nvf), kh, xoff, dyoff, true);
    }
    for (int64_t a = 0; a < rows * g->kW; a++) {
        st(c, ld(c, vt, L->ar[a]), slot[a]);
    }
    cg_for_end(c, &lh);
    cg_for_end(c, &lc);
    cg_for_end(c, &ln);
    // dw[co + r, ci0 + ci, kh, kw] = the ordered lane sum
    LLVMValueRef ci2 = cg_for_begin(c, &lc, cg_i64(c, 0), cis, "ci");
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < kk; j++) {
            LLVMValueRef ai = iaddk(c, imul(c, iaddk(c, ci2, r * L->CB), kk), j);
            LLVMValueRef s = ld(c, vt, LLVMBuildInBoundsGEP2(c->b, vt, L->acc, &ai, 1, ""));
            LLVMValueRef wi = iaddk(c, iadd(c, dwbase, imul(c, ci2, kk)), r * g->Cg * kk + j);
            cg_store(c, L->k->ptr[0], DL_DT_FLOAT, wi, dl_cg__hsum(c, s, n));
        }
    }
    cg_for_end(c, &lc);
    cgw_lanes_fix(c, L, rows, co, xch0, cis, dwbase);
}

static dl_status cgw_lanes_emit(cg *c, const cgw_geo *g, dl_ir_value *dw, dl_ir_value *dy,
                                dl_ir_value *x) {
    cgw_lanes L;
    memset(&L, 0, sizeof L);
    L.g = g;
    L.vw = (unsigned)c->target->vector_width(c, DL_DT_FLOAT);
    L.R = min64(cgw_lanes_rows(L.vw, g->kW), g->Mg);
    L.P = g->OH * g->OW;
    L.nv = (L.P + L.vw - 1) / L.vw;
    int64_t per_ci = L.R * g->kH * g->kW * L.vw * 4;
    L.CB = max64(1, min64(g->Cg, CGW_LANES_ACC / per_ci));
    int64_t nrb = (g->Mg + L.R - 1) / L.R, ncb = (g->Cg + L.CB - 1) / L.CB;
    int64_t G = g->M / g->Mg;
    L.table = cgw_lanes_table(c, g, L.vw, L.nv);
    if (!L.table) {
        return DL_ERR_NOMEM;
    }
    dl_ir_value *vals[3] = {dw, dy, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, G * ncb * nrb, &k));
    L.k = &k;
    LLVMTypeRef vt = vty(c, L.vw);
    L.acc = dl_cg__entry_alloca(c, LLVMArrayType2(vt, (uint64_t)(L.R * L.CB * g->kH * g->kW)));
    LLVMSetAlignment(L.acc, 64);
    for (int64_t a = 0; a < L.R * g->kW; a++) {
        L.ar[a] = dl_cg__entry_alloca(c, vt);
    }
    cg_loop lit;
    LLVMValueRef it = cg_for_begin(c, &lit, k.begin, k.end, "it");
    // it = (grp*ncb + cb)*nrb + rb
    LLVMValueRef rb = LLVMBuildURem(c->b, it, cg_i64(c, nrb), "rb");
    LLVMValueRef gc = LLVMBuildUDiv(c->b, it, cg_i64(c, nrb), "");
    LLVMValueRef cb = LLVMBuildURem(c->b, gc, cg_i64(c, ncb), "cb");
    LLVMValueRef grp = LLVMBuildUDiv(c->b, gc, cg_i64(c, ncb), "grp");
    LLVMValueRef co = iadd(c, imul(c, grp, g->Mg), imul(c, rb, L.R)); // dy / dw channel
    LLVMValueRef ci0 = imul(c, cb, L.CB);
    LLVMValueRef cis = LLVMBuildSub(c->b, cg_i64(c, g->Cg), ci0, "");
    cis = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, cis, cg_i64(c, L.CB), ""), cis,
                          cg_i64(c, L.CB), "");
    LLVMValueRef xch0 = iadd(c, imul(c, grp, g->Cg), ci0);
    LLVMValueRef dwbase = imul(c, iadd(c, imul(c, co, g->Cg), ci0), g->kH * g->kW);
    int64_t last = g->Mg - (nrb - 1) * L.R;
    if (last == L.R) {
        cgw_lanes_block(c, &L, L.R, co, xch0, cis, dwbase);
    } else { // the group's last block has `last` outputs
        dl_cg__if full, part;
        dl_cg__if_begin(c, &full, LLVMBuildICmp(c->b, LLVMIntULT, rb, cg_i64(c, nrb - 1), ""));
        cgw_lanes_block(c, &L, L.R, co, xch0, cis, dwbase);
        dl_cg__if_end(c, &full);
        dl_cg__if_begin(c, &part, LLVMBuildICmp(c->b, LLVMIntEQ, rb, cg_i64(c, nrb - 1), ""));
        cgw_lanes_block(c, &L, last, co, xch0, cis, dwbase);
        dl_cg__if_end(c, &part);
    }
    cg_for_end(c, &lit);
    return cg_kernel_end(c, &k);
}

// dw: [M, C/group, kH, kW] from dy: [N, M, OH, OW], x: [N, C, H, W]; outer range M * C/group.
static dl_status lower_conv_grad_weight(cg *c, const dl_ir_node *n) {
    dl_ir_value *dy = n->inputs[0], *x = n->inputs[1], *dw = n->outputs[0];
    const dl_ir_type *xt = &x->type, *yt = &dy->type, *wt = &dw->type;
    if (xt->rank != 4 || yt->rank != 4 || wt->rank != 4) {
        cg_error(c, "only 2-D convolutions (rank-4 tensors) are supported");
        return DL_ERR_UNSUPPORTED;
    }
    cgw_geo g;
    memset(&g, 0, sizeof g);
    g.N = xt->dims[0].value;
    g.C = xt->dims[1].value;
    g.H = xt->dims[2].value;
    g.W = xt->dims[3].value;
    g.M = yt->dims[1].value;
    g.OH = yt->dims[2].value;
    g.OW = yt->dims[3].value;
    g.kH = wt->dims[2].value;
    g.kW = wt->dims[3].value;
    g.dt = xt->dtype;
    int64_t G = dl_ir_node_attr_int(n, "group");
    if (G < 1 || g.C % G != 0 || g.M % G != 0) {
        cg_error(c, "group %lld does not divide the channels", (long long)G);
        return DL_ERR_UNSUPPORTED;
    }
    g.Cg = g.C / G;
    g.Mg = g.M / G;
    int64_t pads[4];
    if (!dl_cg__attr_ints(c, "strides", 2, 1, g.s) ||
        !dl_cg__attr_ints(c, "dilations", 2, 1, g.dil) ||
        !dl_cg__attr_ints(c, "pads", 4, 0, pads)) {
        return DL_ERR_UNSUPPORTED;
    }
    const char *ap = dl_ir_node_attr_string(n, "auto_pad");
    int64_t in[2] = {g.H, g.W}, out[2] = {g.OH, g.OW}, kk[2] = {g.kH, g.kW};
    for (int i = 0; i < 2; i++) {
        int64_t pe;
        dl_ir_conv_pads(ap, in[i], out[i], kk[i], g.s[i], g.dil[i], pads[i], pads[2 + i], &g.pb[i],
                        &pe);
    }
    int64_t n_dw = g.M * g.Cg * g.kH * g.kW;
    if (n_dw == 0) {
        return DL_OK;
    }
    // Interior columns: ow*sw - pl >= 0 and ow*sw - pl + (kW-1)*dil (+ sw-1 for the wide
    // strided loads) <= W - 1.
    int64_t offmax = -g.pb[1] + (g.kW - 1) * g.dil[1];
    if (g.s[1] > 1 && g.s[1] <= 4) {
        offmax += g.s[1] - 1;
    }
    g.in_lo = max64(0, ceil_div(g.pb[1], g.s[1]));
    g.in_hi = min64(g.OW, floor_div(g.W - 1 - offmax, g.s[1]) + 1);
    int64_t width = g.in_hi > g.in_lo ? g.in_hi - g.in_lo : 0;
    g.tw = width >= 8 ? 8 : width >= 4 ? 4 : 0;
    // Interior rows of a tap block [i0, i0 + ib): every tap row inside the input.
    int64_t IB = max64(1, 12 / g.kW);
    if (IB * g.kW > CGW_MAX_ACC) {
        IB = 1;
    }
    if (g.kW > CGW_MAX_ACC) {
        cg_error(c, "kernel width %lld is too large", (long long)g.kW);
        return DL_ERR_UNSUPPORTED;
    }

    // Winograd's F(3 x 3, 2 x 2) for 3 x 3 stride-1 kernels of one group (x86_winograd.c).
    conv_geo wg;
    memset(&wg, 0, sizeof wg);
    wg.N = g.N;
    wg.C = g.C;
    wg.H = g.H;
    wg.W = g.W;
    wg.M = g.M;
    wg.OH = g.OH;
    wg.OW = g.OW;
    wg.G = G;
    wg.Cg = g.Cg;
    wg.Mg = g.Mg;
    wg.kH = g.kH;
    wg.kW = g.kW;
    for (int i = 0; i < 2; i++) {
        wg.a[i] = g.s[i];
        wg.b[i] = -g.pb[i];
        wg.cc[i] = g.dil[i];
        wg.d[i] = 1;
    }
    wg.dt = g.dt;
    wg.pad_zero = true;
    if (dw->type.dtype == DL_DT_FLOAT && dy->type.dtype == DL_DT_FLOAT &&
        dl_cg__wino_grad_ok(c, &wg)) {
        return dl_cg__emit_wino_grad(c, dw, dy, x, &wg);
    }
    // The implicit GEMM: per group, dw[m, (ci, kh, kw)] = sum over k = (n, oh, ow) of
    // dy[n, grp*Mg + m, oh, ow] * x[n, grp*Cg + ci, oh*s - pb + kh*dil, ow*s - pb + kw*dil]
    // (k ascending: the same order for any split of the range).
    dl_cg__conv_gemm cgp;
    memset(&cgp, 0, sizeof cgp);
    int64_t ohw = g.OH * g.OW;
    cgp.y = dw;
    cgp.a = dy;
    cgp.x = x;
    cgp.M = g.Mg;
    cgp.N = g.Cg * g.kH * g.kW;
    cgp.K = g.N * ohw;
    cgp.sa_m = ohw;
    cgp.ka_in = ohw;
    cgp.sa_k = g.M * ohw;
    cgp.sa_k2 = 1;
    cgp.br = 1;
    cgp.bd[0] = G;
    cgp.abs_[0] = g.Mg * ohw;
    cgp.xbs[0] = g.Cg * g.H * g.W;
    cgp.im = (dl_cg__im2col){DL_CG__IM2COL_POS_BY_TAPS,
                             g.H,
                             g.W,
                             g.OH,
                             g.OW,
                             g.kH,
                             g.kW,
                             {g.s[0], g.s[1]},
                             {-g.pb[0], -g.pb[1]},
                             {g.dil[0], g.dil[1]},
                             {1, 1},
                             g.H * g.W,
                             g.C * g.H * g.W};
    // The implicit GEMM multiplies the zeros it gathers for taps in the padding by dy, where
    // the evaluator leaves those taps out: a non-finite dy would make NaN of gradients it never
    // reaches. Such a dy makes every gradient of its output channel Inf or NaN (every position
    // meets every tap, in the image or in the padding), so where the padding has taps, a
    // FiniteCheck of the gradients the GEMM wrote (M x C/group x kH x kW floats: a few
    // microseconds, where one of dy read megabytes) decides whether the direct kernel below,
    // which skips those taps, sums them again.
    if (dl_cg__conv_gemm_ok(c, &cgp)) {
        int64_t b[2] = {-g.pb[0], -g.pb[1]}, one[2] = {1, 1};
        if (!dl_cg__taps_absent(in, out, kk, g.s, b, g.dil, one)) {
            return dl_cg__emit_conv_gemm(c, &cgp);
        }
        DL_TRY(dl_cg__emit_conv_gemm(c, &cgp));
        DL_TRY(cg_finite_check(c, dw, &c->guard));
        c->guard.finite = false;
    } else if (cgw_lanes_ok(c, &g)) { // which checks its own sums (cgw_lanes_fix)
        return cgw_lanes_emit(c, &g, dw, dy, x);
    }

    dl_ir_value *vals[3] = {dw, dy, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, g.M * g.Cg, &k));
    DL_TRY(cg_guard_open(c, &k));
    cg_loop lit;
    LLVMValueRef it = cg_for_begin(c, &lit, k.begin, k.end, "it");
    // it = m * Cg + ci; group grp = m / Mg
    LLVMValueRef m = LLVMBuildSDiv(c->b, it, cg_i64(c, g.Cg), "m");
    LLVMValueRef ci = LLVMBuildSRem(c->b, it, cg_i64(c, g.Cg), "ci");
    LLVMValueRef grp = LLVMBuildSDiv(c->b, m, cg_i64(c, g.Mg), "grp");
    LLVMValueRef xch = iadd(c, imul(c, grp, g.Cg), ci); // input channel
    LLVMTypeRef vt = vty(c, g.tw ? g.tw : 1);
    for (int64_t i0 = 0; i0 < g.kH; i0 += IB) {
        cgw_blk b;
        memset(&b, 0, sizeof b);
        b.g = &g;
        b.k = &k;
        b.i0 = i0;
        b.ib = min64(IB, g.kH - i0);
        for (int64_t a = 0; a < b.ib * g.kW; a++) {
            if (g.tw) {
                b.vacc[a] = dl_cg__entry_alloca(c, vt);
                st(c, LLVMConstNull(vt), b.vacc[a]);
            }
            b.sacc[a] = dl_cg__entry_alloca(c, c->t_f32);
            st(c, cg_f32(c, 0), b.sacc[a]);
        }
        // Rows oh in [r_lo, r_hi) have all tap rows i0 .. i0+ib-1 inside [0, H).
        int64_t r_lo = max64(0, ceil_div(g.pb[0] - i0 * g.dil[0], g.s[0]));
        int64_t r_hi =
            min64(g.OH, floor_div(g.H - 1 + g.pb[0] - (i0 + b.ib - 1) * g.dil[0], g.s[0]) + 1);
        if (r_hi < r_lo) {
            r_lo = r_hi = g.OH;
        }
        if (g.N > 0) {
            cg_loop ln;
            LLVMValueRef nb = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, g.N), "n");
            LLVMValueRef dyplane = imul(c, iadd(c, imul(c, nb, g.M), m), g.OH * g.OW);
            LLVMValueRef xplane = imul(c, iadd(c, imul(c, nb, g.C), xch), g.H * g.W);
            cgw_rows(c, &b, dyplane, xplane, 0, min64(r_lo, g.OH), true);
            cgw_rows(c, &b, dyplane, xplane, r_lo, r_hi, false);
            cgw_rows(c, &b, dyplane, xplane, max64(r_hi, r_lo), g.OH, true);
            cg_for_end(c, &ln);
        }
        // Epilogue: dw[m, ci, i0 + r, j] = lane sum + edge sum.
        LLVMValueRef wbase = imul(c, it, g.kH * g.kW);
        for (int64_t r = 0; r < b.ib; r++) {
            for (int64_t j = 0; j < g.kW; j++) {
                int64_t a = r * g.kW + j;
                LLVMValueRef s = ld(c, c->t_f32, b.sacc[a]);
                if (g.tw) {
                    s = LLVMBuildFAdd(c->b, dl_cg__hsum(c, ld(c, vt, b.vacc[a]), g.tw), s, "");
                }
                cg_store(c, k.ptr[0], g.dt, iaddk(c, wbase, (i0 + r) * g.kW + j), s);
            }
        }
    }
    cg_for_end(c, &lit);
    dl_status st = cg_kernel_end(c, &k);
    c->guard = (cg_guard){0};
    return st;
}

// ---------------------------------------------------------------------------------------------
// MaxPoolGrad / AveragePoolGrad

// dy: [N, C, o1..ok], x: [N, C, d1..dk] -> dx like x; outer range N*C (one plane each).
// MaxPoolGrad fast path: 2-D, no padding, dilation 1, non-overlapping windows (strides equal
// the kernel) all inside the input. Every input element then belongs to at most one window, so
// dx is written directly, without zeroing and scattering: per window, the tap the forward
// selects (the first maximum in window order, NaN beating numbers) gets dy, the other taps 0,
// and rows/columns no window covers get 0. Outer range N*C*OH: iteration (nc, oh) owns input
// rows [oh*k0, oh*k0 + k0) — and the uncovered bottom rows when oh is the last output row.
// float32 windows 1 or 2 columns wide go a vector of windows at a time (pool_bwd_chunk).
static bool max_pool_grad_fast_ok(const dl_cg__pool_geo *g) {
    if (g->nsp != 2 || g->k[0] * g->k[1] > 16) {
        return false;
    }
    if (g->yd[1] > 4096) { // the per-row stack buffer of selected taps
        return false;
    }
    for (int32_t i = 0; i < 2; i++) {
        if (g->pb[i] != 0 || g->dil[i] != 1 || g->s[i] != g->k[i] ||
            g->yd[i] * g->k[i] > g->xd[i] || g->yd[i] < 1) {
            return false;
        }
    }
    return true;
}

static void zero_rows(cg *c, const cg_kernel *kr, dl_dtype dt, LLVMValueRef start, int64_t n) {
    cg_loop lz;
    LLVMValueRef zi = cg_for_begin(c, &lz, cg_i64(c, 0), cg_i64(c, n), "z");
    cg_store(c, kr->ptr[0], dt, iadd(c, start, zi), cg_f32(c, 0));
    cg_for_end(c, &lz);
}

// A MaxPoolGrad kernel, fast path, and the fusion group it may head (passes/fusion.c: the
// elementwise members after it, e.g. the gradient of the Relu before the pooling): members
// grp[1 .. n_grp) are applied to every dx element before the store, their other inputs ext[e]
// (dx's dims, kernel argument 3 + e) read at the element's own flat index.
#define POOL_MAX_EPI 64
#define POOL_MAX_EXT 10
typedef struct pool_bwd {
    dl_cg__pool_row row;
    const dl_ir_node *const *grp; // NULL: MaxPoolGrad alone
    size_t n_grp;
    dl_ir_value *ext[POOL_MAX_EXT];
    size_t n_ext;
} pool_bwd;

// v (lanes floats of dx from flat index xo; lanes 1: a scalar) through the group's members.
static LLVMValueRef pool_bwd_epilogue(cg *c, const pool_bwd *b, LLVMValueRef v, LLVMValueRef xo,
                                      unsigned lanes, LLVMValueRef mask) {
    if (!b->grp) {
        return v;
    }
    LLVMValueRef xv[POOL_MAX_EXT], val[POOL_MAX_EPI], xin[POOL_MAX_EXT];
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, lanes);
    for (size_t e = 0; e < b->n_ext; e++) {
        LLVMValueRef pe = b->row.k->ptr[3 + e];
        xv[e] = lanes == 1
                    ? cg_load(c, pe, DL_DT_FLOAT, xo)
                    : cg_masked_load(c, vt, LLVMBuildGEP2(c->b, c->t_f32, pe, &xo, 1, ""), mask);
    }
    for (unsigned l = 0; l < lanes; l++) {
        LLVMValueRef lane = cg_i32(c, (int32_t)l);
        for (size_t e = 0; e < b->n_ext; e++) {
            xin[e] = lanes == 1 ? xv[e] : LLVMBuildExtractElement(c->b, xv[e], lane, "");
        }
        val[0] = lanes == 1 ? v : LLVMBuildExtractElement(c->b, v, lane, "");
        LLVMValueRef r = dl_cg__fused_values(c, b->grp, b->n_grp, 1, val, b->ext, xin, b->n_ext);
        v = lanes == 1 ? r : LLVMBuildInsertElement(c->b, v, r, lane, "");
    }
    return v;
}

// The vector form of the two column loops (dl_cg__pool_vec_ok; k[1] = s[1] is 1 or 2): per chunk
// of V windows the selected taps (dl_cg__pool_max_vec), then per tap row the dy lanes where
// selected and 0 elsewhere, the k[1] columns interleaved into one store.
static void pool_bwd_chunk(cg *c, void *ctx, LLVMValueRef ow0, LLVMValueRef nvalid) {
    const pool_bwd *pb = ctx;
    const dl_cg__pool_row *b = &pb->row;
    const dl_cg__pool_geo *g = b->g;
    unsigned V = b->V, k1 = (unsigned)g->k[1];
    LLVMValueRef xb = iadd(c, b->xrow, imul(c, ow0, k1));
    LLVMValueRef idx;
    (void)dl_cg__pool_max_vec(c, b->k->ptr[2], xb, g, V, nvalid, &idx);
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, V), it = LLVMVectorType(c->t_i32, V);
    LLVMValueRef yo = iadd(c, b->yrow, ow0);
    LLVMValueRef gy = cg_masked_load(c, vt, LLVMBuildGEP2(c->b, c->t_f32, b->k->ptr[1], &yo, 1, ""),
                                     cg_lane_mask_rt(c, nvalid, V));
    LLVMValueRef m[2 * CG_MAX_LANES / 2];
    for (unsigned l = 0; l < V; l++) { // interleave: column 0 of window l, then column 1
        m[2 * l] = cg_i32(c, (int32_t)l);
        m[2 * l + 1] = cg_i32(c, (int32_t)(V + l));
    }
    for (int64_t i = 0; i < g->k[0]; i++) {
        LLVMValueRef col[2];
        for (unsigned j = 0; j < k1; j++) {
            LLVMValueRef t = LLVMBuildInsertElement(
                c->b, LLVMGetUndef(it), cg_i32(c, (int32_t)(i * k1 + j)), cg_i32(c, 0), "");
            t = LLVMBuildShuffleVector(c->b, t, LLVMGetUndef(it), LLVMConstNull(it), "");
            LLVMValueRef hit = LLVMBuildICmp(c->b, LLVMIntEQ, idx, t, "");
            col[j] = LLVMBuildSelect(c->b, hit, gy, LLVMConstNull(vt), "");
        }
        LLVMValueRef row =
            k1 == 1 ? col[0]
                    : LLVMBuildShuffleVector(c->b, col[0], col[1], LLVMConstVector(m, 2 * V), "");
        LLVMValueRef xo = iadd(c, xb, cg_i64(c, i * g->xd[1]));
        LLVMValueRef mask = cg_lane_mask_rt(c, imul(c, nvalid, k1), k1 * V);
        row = pool_bwd_epilogue(c, pb, row, xo, k1 * V, mask);
        cg_masked_store(c, row, LLVMBuildGEP2(c->b, c->t_f32, b->k->ptr[0], &xo, 1, ""), mask);
    }
}

// dx elements of iteration (nc, oh) that no window covers: the columns past OW k1 of its rows,
// and, for the last output row, the rows past OH k0.
static void zero_uncovered(cg *c, const cg_kernel *kr, dl_dtype dt, const dl_cg__pool_geo *g,
                           LLVMValueRef nc, LLVMValueRef oh, LLVMValueRef xrow) {
    int64_t H = g->xd[0], W = g->xd[1], OH = g->yd[0], OW = g->yd[1], k0 = g->k[0], k1 = g->k[1];
    if (W > OW * k1) {
        cg_loop lr;
        LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, k0), "r");
        zero_rows(c, kr, dt, iaddk(c, iadd(c, xrow, imul(c, r, W)), OW * k1), W - OW * k1);
        cg_for_end(c, &lr);
    }
    if (H > OH * k0) {
        dl_cg__if last;
        dl_cg__if_begin(c, &last, LLVMBuildICmp(c->b, LLVMIntEQ, oh, cg_i64(c, OH - 1), ""));
        zero_rows(c, kr, dt, iadd(c, imul(c, nc, g->in_sp), cg_i64(c, OH * k0 * W)),
                  (H - OH * k0) * W);
        dl_cg__if_end(c, &last);
    }
}

// pb: the fusion group (pb->grp, pb->ext) or none; the group's root value is written (dx).
static dl_status lower_max_pool_grad_2d(cg *c, dl_ir_value *dx, dl_ir_value *dy, dl_ir_value *x,
                                        const dl_cg__pool_geo *g, pool_bwd *pb) {
    // x, dx: [N, C, H, W]; dy: [N, C, OH, OW]
    dl_dtype dt = x->type.dtype;
    int64_t NC = x->type.dims[0].value * x->type.dims[1].value;
    int64_t W = g->xd[1], OH = g->yd[0], OW = g->yd[1], k0 = g->k[0], k1 = g->k[1];
    dl_ir_value *vals[3 + POOL_MAX_EXT] = {dx, dy, x};
    for (size_t e = 0; e < pb->n_ext; e++) {
        vals[3 + e] = pb->ext[e];
    }
    cg_kernel kr;
    DL_TRY(cg_kernel_begin(c, vals, 3 + pb->n_ext, NC * OH, &kr));
    cg_loop lit, low;
    LLVMValueRef it = cg_for_begin(c, &lit, kr.begin, kr.end, "it");
    LLVMValueRef oh = LLVMBuildSRem(c->b, it, cg_i64(c, OH), "oh");
    LLVMValueRef nc = LLVMBuildSDiv(c->b, it, cg_i64(c, OH), "nc");
    LLVMValueRef xrow = iadd(c, imul(c, nc, g->in_sp), imul(c, oh, k0 * W));
    LLVMValueRef yrow = imul(c, it, OW);
    pb->row =
        (dl_cg__pool_row){g, &kr, xrow, yrow, (unsigned)c->target->vector_width(c, DL_DT_FLOAT)};
    if (dl_cg__pool_vec_ok(c, g, dt) && k1 <= 2) {
        dl_cg__pool_row_chunks(c, OW, pb->row.V, pool_bwd_chunk, pb);
        zero_uncovered(c, &kr, dt, g, nc, oh, xrow);
        cg_for_end(c, &lit);
        return cg_kernel_end(c, &kr);
    }
    // Two loops over the output columns, each simple enough to vectorise: the first finds
    // every window's selected tap (as an i32 into a stack row), the second writes dx.
    LLVMValueRef sel = cg_entry_alloca(c, &kr, c->t_i32, OW);
    LLVMValueRef ow = cg_for_begin(c, &low, cg_i64(c, 0), cg_i64(c, OW), "ow");
    LLVMValueRef xb = iadd(c, xrow, imul(c, ow, k1));
    LLVMValueRef acc = NULL, idx = NULL;
    for (int64_t t = 0; t < k0 * k1; t++) {
        LLVMValueRef v = cg_load(c, kr.ptr[2], dt, iaddk(c, xb, (t / k1) * W + t % k1));
        if (!acc) {
            acc = v;
            idx = cg_i32(c, 0);
            continue;
        }
        LLVMValueRef upd = dl_cg__max_takes(c, v, acc);
        acc = LLVMBuildSelect(c->b, upd, v, acc, "");
        idx = LLVMBuildSelect(c->b, upd, cg_i32(c, (int32_t)t), idx, "");
    }
    LLVMBuildStore(c->b, idx, LLVMBuildInBoundsGEP2(c->b, c->t_i32, sel, &ow, 1, ""));
    cg_for_end(c, &low);
    cg_loop low2;
    LLVMValueRef ow2 = cg_for_begin(c, &low2, cg_i64(c, 0), cg_i64(c, OW), "ow");
    LLVMValueRef xb2 = iadd(c, xrow, imul(c, ow2, k1));
    LLVMValueRef id2 =
        LLVMBuildLoad2(c->b, c->t_i32, LLVMBuildInBoundsGEP2(c->b, c->t_i32, sel, &ow2, 1, ""), "");
    LLVMValueRef gy = cg_load(c, kr.ptr[1], dt, iadd(c, yrow, ow2));
    LLVMValueRef zero = cg_f32(c, 0);
    for (int64_t t = 0; t < k0 * k1; t++) {
        LLVMValueRef hit = LLVMBuildICmp(c->b, LLVMIntEQ, id2, cg_i32(c, (int32_t)t), "");
        LLVMValueRef xo = iaddk(c, xb2, (t / k1) * W + t % k1);
        cg_store(c, kr.ptr[0], dt, xo,
                 pool_bwd_epilogue(c, pb, LLVMBuildSelect(c->b, hit, gy, zero, ""), xo, 1, NULL));
    }
    cg_for_end(c, &low2);
    zero_uncovered(c, &kr, dt, g, nc, oh, xrow);
    cg_for_end(c, &lit);
    return cg_kernel_end(c, &kr);
}

static dl_status lower_pool_grad(cg *c, const dl_ir_node *n) {
    bool is_max = n->op == DL_IR_OP_MAX_POOL_GRAD;
    dl_ir_value *dy = n->inputs[0], *x = n->inputs[1], *dx = n->outputs[0];
    const dl_ir_type *xt = &x->type, *yt = &dy->type;
    if (xt->rank < 3 || yt->rank != xt->rank) {
        cg_error(c, "pooling gradients need x of rank >= 3 and dy of the same rank");
        return DL_ERR_UNSUPPORTED;
    }
    dl_cg__pool_geo geo;
    if (!dl_cg__pool_geometry(c, xt, yt, &geo)) {
        return DL_ERR_UNSUPPORTED;
    }
    if (is_max && max_pool_grad_fast_ok(&geo) && dl_ir_type_numel(xt) > 0) {
        pool_bwd pb = {0};
        return lower_max_pool_grad_2d(c, dx, dy, x, &geo, &pb);
    }
    int32_t nsp = geo.nsp;
    const int64_t *k = geo.k, *s = geo.s, *dil = geo.dil, *pb = geo.pb;
    const int64_t *xd = geo.xd, *yd = geo.yd, *xs = geo.xs, *ys = geo.ys;
    int64_t in_sp = geo.in_sp, out_sp = geo.out_sp;
    bool incl = !is_max && dl_ir_node_attr_int(n, "count_include_pad") != 0;
    int64_t NC = xt->dims[0].value * xt->dims[1].value;
    if (NC * in_sp == 0) {
        return DL_OK;
    }
    dl_dtype dt = xt->dtype;
    dl_ir_value *vals[3] = {dx, dy, x};
    cg_kernel kr;
    DL_TRY(cg_kernel_begin(c, vals, is_max ? 3 : 2, NC, &kr));
    cg_loop lnc, lz, lo[DL_MAX_RANK], lk[DL_MAX_RANK];
    LLVMValueRef nc = cg_for_begin(c, &lnc, kr.begin, kr.end, "nc");
    LLVMValueRef xb = imul(c, nc, in_sp);
    // dx plane = 0
    LLVMValueRef zi = cg_for_begin(c, &lz, cg_i64(c, 0), cg_i64(c, in_sp), "z");
    cg_store(c, kr.ptr[0], dt, iadd(c, xb, zi), cg_f32(c, 0));
    cg_for_end(c, &lz);
    if (out_sp > 0) {
        LLVMValueRef oc[DL_MAX_RANK], wst[DL_MAX_RANK];
        LLVMValueRef yoff = imul(c, nc, out_sp);
        for (int32_t i = 0; i < nsp; i++) {
            oc[i] = cg_for_begin(c, &lo[i], cg_i64(c, 0), cg_i64(c, yd[i]), "o");
            yoff = iadd(c, yoff, imul(c, oc[i], ys[i]));
            wst[i] = iaddk(c, imul(c, oc[i], s[i]), -pb[i]);
        }
        LLVMValueRef gy = cg_load(c, kr.ptr[1], dt, yoff);
        LLVMValueRef share = NULL, acc = NULL, arg = NULL;
        if (is_max) {
            acc = dl_cg__entry_alloca(c, c->t_f32);
            arg = dl_cg__entry_alloca(c, c->t_i64);
            st(c, cg_f32(c, -(double)INFINITY), acc);
            st(c, cg_i64(c, -1), arg);
        } else { // the forward's divisor
            LLVMValueRef cnt = dl_cg__pool_count(c, &geo, wst, incl);
            share = LLVMBuildFDiv(c->b, gy, LLVMBuildSIToFP(c->b, cnt, c->t_f32, ""), "");
        }
        dl_cg__if fk[DL_MAX_RANK];
        LLVMValueRef xoff = xb;
        for (int32_t i = 0; i < nsp; i++) {
            LLVMValueRef j = cg_for_begin(c, &lk[i], cg_i64(c, 0), cg_i64(c, k[i]), "kj");
            LLVMValueRef p = iadd(c, wst[i], imul(c, j, dil[i]));
            dl_cg__if_begin(c, &fk[i], in_range(c, p, 0, xd[i]));
            xoff = iadd(c, xoff, imul(c, p, xs[i]));
        }
        if (is_max) { // lower_pool's rule: first in-image tap, a larger value, or NaN over a number
            dl_cg__pool_max_update(c, cg_load(c, kr.ptr[2], dt, xoff), xoff, acc, arg);
        } else {
            LLVMValueRef d = cg_load(c, kr.ptr[0], dt, xoff);
            cg_store(c, kr.ptr[0], dt, xoff, LLVMBuildFAdd(c->b, d, share, ""));
        }
        for (int32_t i = nsp - 1; i >= 0; i--) {
            dl_cg__if_end(c, &fk[i]);
            cg_for_end(c, &lk[i]);
        }
        if (is_max) {
            LLVMValueRef a = ld(c, c->t_i64, arg);
            dl_cg__if fa;
            dl_cg__if_begin(c, &fa, LLVMBuildICmp(c->b, LLVMIntSGE, a, cg_i64(c, 0), ""));
            LLVMValueRef d = cg_load(c, kr.ptr[0], dt, a);
            cg_store(c, kr.ptr[0], dt, a, LLVMBuildFAdd(c->b, d, gy, ""));
            dl_cg__if_end(c, &fa);
        }
        for (int32_t i = nsp - 1; i >= 0; i--) {
            cg_for_end(c, &lo[i]);
        }
    }
    cg_for_end(c, &lnc);
    return cg_kernel_end(c, &kr);
}

// ---------------------------------------------------------------------------------------------
// BatchNormalizationGrad

typedef enum bn_red {
    BN_SUM, // sum a
    BN_SQ,  // sum (a - mean)^2
    BN_DOT, // sum b * (a - mean)
} bn_red;

// One reduction over `len` contiguous elements from element off of a (and b): f32, 16-lane
// partial sums, then the tail in order.
static LLVMValueRef bn_sum(cg *c, bn_red kind, LLVMValueRef pa, LLVMValueRef pb, dl_dtype dt,
                           LLVMValueRef off, int64_t len, LLVMValueRef mean) {
    enum { SW = 16 };
    int64_t nv = len / SW;
    LLVMValueRef total = cg_f32(c, 0);
    for (int vec = 1; vec >= 0; vec--) {
        unsigned w = vec ? SW : 1;
        int64_t lo = vec ? 0 : nv * SW, hi = vec ? nv : len; // vec: vector index
        if (lo >= hi) {
            continue;
        }
        LLVMTypeRef vt = vty(c, w);
        LLVMValueRef acc = dl_cg__entry_alloca(c, vt);
        st(c, vec ? LLVMConstNull(vt) : total, acc);
        LLVMValueRef vm = NULL;
        if (kind != BN_SUM) {
            vm = mean;
            if (vec) {
                LLVMValueRef v0 =
                    LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), mean, cg_i32(c, 0), "");
                vm = LLVMBuildShuffleVector(c->b, v0, LLVMGetUndef(vt),
                                            LLVMConstNull(LLVMVectorType(c->t_i32, w)), "");
            }
        }
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, cg_i64(c, lo), cg_i64(c, hi), "r");
        LLVMValueRef idx = iadd(c, off, vec ? imul(c, i, SW) : i);
        LLVMValueRef v = dl_cg__vload(c, pa, dt, idx, w);
        LLVMValueRef cur = ld(c, vt, acc), r;
        if (kind == BN_SUM) {
            r = LLVMBuildFAdd(c->b, cur, v, "");
        } else {
            LLVMValueRef d = LLVMBuildFSub(c->b, v, vm, "");
            LLVMValueRef f = kind == BN_SQ ? d : dl_cg__vload(c, pb, dt, idx, w);
            r = dl_cg__fmuladd(c, d, f, cur);
        }
        st(c, r, acc);
        cg_for_end(c, &l);
        total = vec ? dl_cg__hsum(c, ld(c, vt, acc), w) : ld(c, vt, acc);
    }
    return total;
}

// dy, x: [N, C, S...], scale: [C] -> dx like x, dscale?, dbias?: [C]; outer range C.
static dl_status lower_batch_norm_grad(cg *c, const dl_ir_node *n) {
    dl_ir_value *dy = n->inputs[0], *x = n->inputs[1], *sc = n->inputs[2];
    const dl_ir_type *xt = &x->type;
    if (xt->rank < 2) {
        cg_error(c, "needs x of rank >= 2");
        return DL_ERR_UNSUPPORTED;
    }
    int64_t N = xt->dims[0].value, C = xt->dims[1].value;
    if (C == 0) {
        return DL_OK;
    }
    int64_t S = N != 0 ? dl_ir_type_numel(xt) / (N * C) : 0;
    double eps = dl_ir_node_attr_float(n, "epsilon");
    dl_ir_value *ods = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *odb = n->n_outputs > 2 ? n->outputs[2] : NULL;
    // args: dx, [dscale], [dbias], dy, x, scale
    dl_ir_value *vals[6];
    size_t a_ds, a_db;
    size_t nv = dl_cg__out_args3(n, vals, &a_ds, &a_db);
    size_t a_dy = nv;
    vals[nv++] = dy;
    vals[nv++] = x;
    vals[nv++] = sc;
    dl_dtype dt = xt->dtype;
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, C, &k));
    LLVMValueRef pdy = k.ptr[a_dy], px = k.ptr[a_dy + 1];
    cg_loop l, ln;
    LLVMValueRef ch = cg_for_begin(c, &l, k.begin, k.end, "c");
    LLVMValueRef cnt = cg_f32(c, (double)(N * S));
    bool empty = N * S == 0;
    // sums[0]: x, [1]: (x - mean)^2, [2]: dy, [3]: dy * (x - mean); batch item b's run starts
    // at (b*C + c)*S.
    static const bn_red kinds[4] = {BN_SUM, BN_SQ, BN_SUM, BN_DOT};
    LLVMValueRef sums[4], mean = NULL;
    for (int q = 0; q < 4; q++) {
        LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
        st(c, cg_f32(c, 0), acc);
        if (!empty) {
            LLVMValueRef b = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, N), "b");
            LLVMValueRef off = imul(c, iadd(c, imul(c, b, C), ch), S);
            LLVMValueRef pa = q == 2 ? pdy : px;
            LLVMValueRef part = bn_sum(c, kinds[q], pa, pdy, dt, off, S, mean);
            st(c, LLVMBuildFAdd(c->b, ld(c, c->t_f32, acc), part, ""), acc);
            cg_for_end(c, &ln);
        }
        sums[q] = ld(c, c->t_f32, acc);
        if (q == 0) {
            mean = LLVMBuildFDiv(c->b, sums[0], cnt, "mean");
        }
    }
    LLVMValueRef var = LLVMBuildFDiv(c->b, sums[1], cnt, "var");
    LLVMValueRef sd =
        cg_intrinsic1(c, "llvm.sqrt", c->t_f32, LLVMBuildFAdd(c->b, var, cg_f32(c, eps), ""));
    LLVMValueRef rstd = LLVMBuildFDiv(c->b, cg_f32(c, 1), sd, "rstd");
    LLVMValueRef db = sums[2];
    // dscale = sum dy * xhat = rstd * sum dy * (x - mean); an empty batch sums nothing (0)
    LLVMValueRef ds = empty ? cg_f32(c, 0) : LLVMBuildFMul(c->b, sums[3], rstd, "dscale");
    if (!empty) {
        // dx = a * (cnt*dy - db - xhat*ds), a = scale * rstd / cnt
        LLVMValueRef scv = cg_load(c, k.ptr[a_dy + 2], sc->type.dtype, ch);
        LLVMValueRef a = LLVMBuildFDiv(c->b, LLVMBuildFMul(c->b, scv, rstd, ""), cnt, "");
        LLVMValueRef rds = LLVMBuildFMul(c->b, rstd, ds, ""); // xhat * ds = (x - mean) * rds
        cg_loop li;
        LLVMValueRef b = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, N), "b");
        LLVMValueRef off = imul(c, iadd(c, imul(c, b, C), ch), S);
        LLVMValueRef i = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, S), "s");
        LLVMValueRef idx = iadd(c, off, i);
        LLVMValueRef xv = cg_load(c, px, dt, idx), gv = cg_load(c, pdy, dt, idx);
        LLVMValueRef t = LLVMBuildFSub(c->b, LLVMBuildFMul(c->b, cnt, gv, ""), db, "");
        t = LLVMBuildFSub(c->b, t, LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, xv, mean, ""), rds, ""),
                          "");
        cg_store(c, k.ptr[0], n->outputs[0]->type.dtype, idx, LLVMBuildFMul(c->b, a, t, ""));
        cg_for_end(c, &li);
        cg_for_end(c, &ln);
    }
    if (ods) {
        cg_store(c, k.ptr[a_ds], ods->type.dtype, ch, ds);
    }
    if (odb) {
        cg_store(c, k.ptr[a_db], odb->type.dtype, ch, db);
    }
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table (which checked the required inputs).

dl_status dl_cg__lower_conv_grad_weight(cg *c, const dl_ir_node *n) {
    return lower_conv_grad_weight(c, n);
}

dl_status dl_cg__lower_pool_grad(cg *c, const dl_ir_node *n) {
    return lower_pool_grad(c, n);
}

dl_status dl_cg__lower_pool_grad_fused(cg *c, const dl_ir_node *const *g, size_t n) {
    const dl_ir_node *h = g[0];
    dl_ir_value *dy = h->inputs[0], *x = h->inputs[1], *out = g[n - 1]->outputs[0];
    const dl_ir_type *xt = &x->type;
    dl_cg__pool_geo geo;
    const dl_ir_node *root = c->node;
    c->node = h; // the geometry reads the pooling's attributes from c->node
    bool geo_ok = dl_cg__pool_geometry(c, xt, &dy->type, &geo);
    c->node = root;
    bool ok = h->op == DL_IR_OP_MAX_POOL_GRAD && n <= POOL_MAX_EPI && xt->rank == 4 &&
              xt->dtype == DL_DT_FLOAT && out->type.dtype == DL_DT_FLOAT &&
              dl_ir_type_same_dims(&out->type, xt) && dl_ir_type_numel(xt) > 0 && geo_ok &&
              max_pool_grad_fast_ok(&geo) && geo.yd[0] * geo.k[0] == geo.xd[0] &&
              geo.yd[1] * geo.k[1] == geo.xd[1];
    if (!ok) {
        cg_error(c,
                 "a fused MaxPoolGrad is float32, 2-D, with at most %d members, and its "
                 "windows tile the input",
                 POOL_MAX_EPI - 1);
        return DL_ERR_UNSUPPORTED;
    }
    pool_bwd pb = {.grp = g, .n_grp = n};
    DL_TRY(dl_cg__fused_inputs(c, g, n, 1, pb.ext, POOL_MAX_EXT, &pb.n_ext));
    for (size_t e = 0; e < pb.n_ext; e++) {
        if (pb.ext[e]->type.dtype != DL_DT_FLOAT || !dl_ir_type_same_dims(&pb.ext[e]->type, xt)) {
            cg_error(c,
                     "a fused MaxPoolGrad's members read float32 values of its dims ('%s' is "
                     "not one)",
                     pb.ext[e]->name);
            return DL_ERR_UNSUPPORTED;
        }
    }
    return lower_max_pool_grad_2d(c, out, dy, x, &geo, &pb);
}

dl_status dl_cg__lower_batch_norm_grad(cg *c, const dl_ir_node *n) {
    return lower_batch_norm_grad(c, n);
}
