// codegen/x86/x86_winograd.c — 3 x 3 stride-1 convolutions (Conv, and ConvTranspose with stride
// 1: a Conv with the kernel flipped) as Winograd's F(2 x 2, 3 x 3) on wide-vector targets (Lavin
// and Gray, 2016; NNPACK's and XNNPACK's transforms): each 2 x 2 block of outputs ("tile") of a
// channel from 16 products per input channel instead of 36,
//   y[tile] = A^T [ sum over c of (G g[m, c] G^T) .* (B^T d[c, tile] B) ] A
// (d: the tile's 4 x 4 input patch, zero outside the image; B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], A^T = [1 1 1 0; 0 1 -1 -1]).
// Two kernels: the weights' transform into a temp buffer (emit_wino_weights), then the
// convolution over blocks of tile rows of one image (dl_cg__emit_wino): input transform on the
// stack, the 16 products in register tiles, output transform with the fused epilogue. An
// iteration that sees a non-finite input or weight, or one of magnitude 2^48 or more, computes
// its block by the direct definition (the transforms would spread Inf - Inf over the tile, or
// overflow where the direct sums do not: finite_acc). The sum over c runs in a fixed order
// and no iteration reads what another writes: any split of the range gives the same bytes.
#include "cg_geometry.h"
#include "cg_internal.h"
#include "x86_conv.h"

#include <string.h>

#define WINO_V_BYTES (256 * 1024) // the input transform of one iteration's block, at most
#define WINO_P_BYTES (256 * 1024) // the products of one channel group (or of one block, if more)
#define WINO_MAX_TWC 8            // vectors of tiles along one tile row, at most
#define WINO_MAX_MR  12
#define WINO_MAX_NV  8
// Tiles (N * TH * TW) below which the transforms do not pay. A tile saves 20 multiply-adds per
// channel pair, the weights' transform costs ~40 operations per pair once per call: a few tiles
// pay for it; 32 keeps the tiny convolutions (a thread's work in microseconds) off the
// two-kernel path. The inference CNN's second layer at batch 1 (49 tiles, weights prepacked):
// 0.104 -> 0.069 ms on Zen 3.
#define WINO_MIN_TILE   32
#define WINO_FMA_CHAINS 8 // independent multiply-adds the FMA pipes need in flight

typedef struct wino_plan {
    unsigned vw;         // lanes: tiles of a vector
    int64_t TH, TW, TWc; // tile rows, tiles per row, vectors per tile row
    int64_t rpb, TRB;    // tile rows per block, blocks per image
    int64_t NT;          // tile lanes of a block: rpb * TWc * vw
    int64_t mr, nv, MBk; // register tile: mr channels x nv vectors; channel blocks
    int64_t GM;          // channels of a group: the products of all 16 points in P
    int64_t off[2];      // input row / column of tap 0 of output 0
    bool flip[2];        // the weight's taps run backwards (ConvTranspose)
} wino_plan;

// Registers of the target's vector file (16 ymm with AVX2, 32 zmm with AVX-512).
static int64_t wino_regs(unsigned vw) {
    return vw >= 16 ? 32 : 16;
}

// The register tile over `ntv` vectors of tiles: nv vectors (groups of nv, the last one
// shorter) x mr channels: mr * nv accumulators, the nv vectors of V and one broadcast of U in
// registers (LLVM loads each vector once for its mr uses: with 2 x 7 on AVX2's 16 registers it
// spilled 9 of them, 0.5 of the FMA peak). Cost per input channel and group, in half cycles:
// the largest of its multiply-adds and its loads (mr broadcasts, nv vectors: two of each per
// cycle) and of the FMA pipes' depth (two pipes of latency 4: fewer accumulators than 8 wait on
// their chains), summed over the groups and the channel blocks. AVX2's CNN layers (7 vectors):
// 6 x 2 (three groups, then one of 6 chains), not 2 x 4 (3.77 -> 3.53 ms per step).
static void wino_tile(int64_t ntv, int64_t M, unsigned vw, int64_t *out_mr, int64_t *out_nv) {
    int64_t best = -1, bmr = 1, bnv = 1, regs = wino_regs(vw);
    int64_t mr_cap = vw >= 16 ? WINO_MAX_MR : 6;
    for (int64_t nv = 1; nv <= WINO_MAX_NV && nv <= ntv; nv++) {
        int64_t mr = (regs - 1 - nv) / nv < mr_cap ? (regs - 1 - nv) / nv : mr_cap;
        if (mr < 1) {
            break;
        }
        int64_t cost = 0;
        for (int64_t g0 = 0; g0 < ntv; g0 += nv) {
            int64_t n = ntv - g0 < nv ? ntv - g0 : nv;
            int64_t fma = mr * n, lds = mr + n, t = fma > lds ? fma : lds;
            cost += t > WINO_FMA_CHAINS ? t : WINO_FMA_CHAINS;
        }
        cost *= (M + mr - 1) / mr;
        if (best < 0 || cost < best) {
            best = cost;
            bmr = mr;
            bnv = nv;
        }
    }
    *out_mr = bmr;
    *out_nv = bnv;
}

// The plan of g into *out, or false when the Winograd kernel does not take g (docs/codegen.md,
// "3 x 3 stride-1 convolutions").
static bool wino_plan_of(cg *c, const conv_geo *g, wino_plan *out) {
    wino_plan *p = out;
    memset(p, 0, sizeof *p);
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    if (vw < 8 || g->dt != DL_DT_FLOAT || (g->y && g->y->type.dtype != DL_DT_FLOAT)) {
        return false;
    }
    if (g->G != 1 || g->kH != 3 || g->kW != 3 || g->C < 8 || g->M < 8) {
        return false;
    }
    for (int i = 0; i < 2; i++) {
        if (g->a[i] != 1 || g->d[i] != 1 || (g->cc[i] != 1 && g->cc[i] != -1)) {
            return false;
        }
        // tap u (0..2) reads input o + off + u: Conv o - pad + u, ConvTranspose o + pad - kh
        p->flip[i] = g->cc[i] < 0;
        p->off[i] = g->b[i] + (p->flip[i] ? -2 : 0);
    }
    p->vw = (unsigned)vw;
    p->TH = (g->OH + 1) / 2;
    p->TW = (g->OW + 1) / 2;
    p->TWc = (p->TW + vw - 1) / vw;
    // Tiles along a row fill the vectors' lanes at least 3/4 (a narrower image wastes them);
    // enough tiles to pay for the transforms. Nothing here depends on how the weights come (a
    // param's transform is prepacked for infer): --no-prepack must give the same bytes.
    if (p->TW * 4 < p->TWc * vw * 3 || p->TWc > WINO_MAX_TWC ||
        g->N * p->TH * p->TW < WINO_MIN_TILE) {
        return false;
    }
    int64_t row_bytes = 16 * g->C * p->TWc * vw * 4;
    int64_t rpb = WINO_V_BYTES / row_bytes;
    if (rpb < 1) {
        return false;
    }
    rpb = rpb < p->TH ? rpb : p->TH;
    // At least 4 iterations where the batch is smaller (two threads and their balance).
    if (g->N < 4) {
        int64_t want = (4 + g->N - 1) / g->N;
        int64_t r2 = (p->TH + want - 1) / want;
        rpb = r2 < rpb ? r2 : rpb;
    }
    p->TRB = (p->TH + rpb - 1) / rpb;
    p->rpb = (p->TH + p->TRB - 1) / p->TRB; // the same blocks, as even as they go
    p->NT = p->rpb * p->TWc * vw;
    wino_tile(p->rpb * p->TWc, g->M, p->vw, &p->mr, &p->nv);
    p->MBk = (g->M + p->mr - 1) / p->mr;
    int64_t gb = WINO_P_BYTES / (16 * p->mr * p->NT * 4); // blocks of a group
    gb = gb < 1 ? 1 : gb > p->MBk ? p->MBk : gb;
    p->GM = gb * p->mr;
    return true;
}

bool dl_cg__wino_ok(cg *c, const conv_geo *g) {
    wino_plan p;
    return wino_plan_of(c, g, &p);
}

// ---------------------------------------------------------------------------------------------
// Small builders

static LLVMValueRef fadd(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFAdd(c->b, a, b, "");
}

static LLVMValueRef fsub(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFSub(c->b, a, b, "");
}

static LLVMValueRef fhalf(cg *c, LLVMValueRef a) {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef h = cg_f32(c, 0.5);
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
        LLVMValueRef e[CG_MAX_LANES];
        unsigned n = LLVMGetVectorSize(t);
        for (unsigned l = 0; l < n; l++) {
            e[l] = h;
        }
        h = LLVMConstVector(e, n);
    }
    return LLVMBuildFMul(c->b, a, h, "");
}

static LLVMValueRef vsplat(cg *c, LLVMValueRef s, unsigned w) {
    LLVMTypeRef vt = vty(c, w);
    LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), s, cg_i32(c, 0), "");
    return LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(vt),
                                  LLVMConstNull(LLVMVectorType(c->t_i32, w)), "");
}

// Lanes first, first + step, ... (n of them) of v.
static LLVMValueRef lanes(cg *c, LLVMValueRef v, unsigned first, unsigned step, unsigned n) {
    LLVMValueRef m[CG_MAX_LANES];
    for (unsigned l = 0; l < n; l++) {
        m[l] = cg_i32(c, (int32_t)(first + l * step));
    }
    return LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(m, n), "");
}

// a0 b0 a1 b1 ... of two n-lane vectors.
static LLVMValueRef interleave(cg *c, LLVMValueRef a, LLVMValueRef b, unsigned n) {
    LLVMValueRef m[CG_MAX_LANES];
    for (unsigned l = 0; l < n; l++) {
        m[2 * l] = cg_i32(c, (int32_t)l);
        m[2 * l + 1] = cg_i32(c, (int32_t)(n + l));
    }
    return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(m, 2 * n), "");
}

// Constant mask: lanes l < n live of w.
static LLVMValueRef live_mask(cg *c, unsigned w, int64_t n) {
    LLVMValueRef m[CG_MAX_LANES];
    for (unsigned l = 0; l < w; l++) {
        m[l] = LLVMConstInt(c->t_i1, (int64_t)l < n, 0);
    }
    return LLVMConstVector(m, w);
}

static LLVMValueRef fptr(cg *c, LLVMValueRef base, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(c->b, c->t_f32, base, &idx, 1, "");
}

static LLVMValueRef vld(cg *c, LLVMValueRef base, LLVMValueRef idx, unsigned w) {
    LLVMValueRef v = ld(c, vty(c, w), fptr(c, base, idx));
    LLVMSetAlignment(v, 4);
    return v;
}

static void vst(cg *c, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v) {
    LLVMValueRef s = LLVMBuildStore(c->b, v, fptr(c, base, idx));
    LLVMSetAlignment(s, 4);
}

// NaN-sticky: acc + (s - s) for s = v * 2^80, NaN when v (or acc) is not finite or |v| >= 2^48
// (s overflows; the scaling by a power of 2 is exact). Under that bound the transforms cannot
// overflow where the direct sums do not: the forward's input transform is at most 4 max|x|, the
// weights' 2.25 max|w|, each output at most 81 C 2^96 < 2^128 (C, bounded by the stack buffers,
// stays far below 2^25); the weight gradient's at most 64 T 2^96 over T tiles (wgrad_plan keeps
// T below 2^26). Values past it take the direct definition, like non-finite ones.
static LLVMValueRef finite_acc(cg *c, LLVMValueRef acc, LLVMValueRef v) {
    LLVMTypeRef t = LLVMTypeOf(v);
    LLVMValueRef k = cg_f32(c, 0x1p80f);
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
        k = vsplat(c, k, LLVMGetVectorSize(t));
    }
    LLVMValueRef sv = LLVMBuildFMul(c->b, v, k, "");
    return fadd(c, acc, fsub(c, sv, sv));
}

// The first maximum of a 2 x 2 window in the order (0, 0), (0, 1), (1, 0), (1, 1), NaN winning
// (as MaxPool's: the pairs first, then the rows, as the direct kernel's pool2_lanes).
static LLVMValueRef pool4(cg *c, LLVMValueRef y00, LLVMValueRef y01, LLVMValueRef y10,
                          LLVMValueRef y11) {
    LLVMValueRef h0 = LLVMBuildSelect(c->b, dl_cg__max_takes(c, y01, y00), y01, y00, "");
    LLVMValueRef h1 = LLVMBuildSelect(c->b, dl_cg__max_takes(c, y11, y10), y11, y10, "");
    return LLVMBuildSelect(c->b, dl_cg__max_takes(c, h1, h0), h1, h0, "");
}

// w[m, c, tap (u, v)] with the taps flipped where the geometry says (ConvTranspose).
static LLVMValueRef w_index(cg *c, const conv_geo *g, const wino_plan *p, LLVMValueRef m,
                            LLVMValueRef ci, int u, int v) {
    int64_t kh = p->flip[0] ? 2 - u : u, kw = p->flip[1] ? 2 - v : v;
    return iaddk(c, iadd(c, imul(c, m, g->wsm), imul(c, ci, g->wsc)), kh * 3 + kw);
}

// ---------------------------------------------------------------------------------------------
// The weights' transform: U = G g G^T per (m, c) (the 16 points xi = 4 i + j), one output
// channel per iteration, laid out for the products' register tiles:
// U[((xi * MBk + m / mr) * C + c) * mr + m % mr] (MBk blocks of mr channels, the last one
// padded and its padding never read), then one float per channel: finite_acc's sum over its
// weights, NaN when one of them is not finite or too large.

static dl_status emit_wino_weights(cg *c, const conv_geo *g, const wino_plan *p, uint32_t ubuf,
                                   dl_ir_value *w, uint8_t only) {
    uint32_t bufs[2] = {ubuf, c->value_buf[w->id]};
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, 2, 1, g->M, "conv.winograd.weights", &k));
    k.ops = "WinogradWeights";
    k.only = only;
    k.flags = only == CG_ENTRY_INFER ? DLRT_KERNEL_F_PREPACK : 0;
    LLVMValueRef up = cg_kernel_arg(c, &k, 0), wp = cg_kernel_arg(c, &k, 1);
    LLVMValueRef fin = dl_cg__entry_alloca(c, c->t_f32);
    cg_loop lm, lc;
    LLVMValueRef m = cg_for_begin(c, &lm, k.begin, k.end, "m");
    st(c, cg_f32(c, 0), fin);
    LLVMValueRef mb = LLVMBuildUDiv(c->b, m, cg_i64(c, p->mr), "");
    LLVMValueRef mr = LLVMBuildURem(c->b, m, cg_i64(c, p->mr), "");
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C), "c");
    LLVMValueRef gv[3][3], t[4][3];
    LLVMValueRef f = ld(c, c->t_f32, fin);
    for (int u = 0; u < 3; u++) {
        for (int v = 0; v < 3; v++) {
            gv[u][v] = cg_load(c, wp, DL_DT_FLOAT, w_index(c, g, p, m, ci, u, v));
            f = finite_acc(c, f, gv[u][v]);
        }
    }
    st(c, f, fin);
    for (int v = 0; v < 3; v++) { // t = G g
        LLVMValueRef s = fadd(c, gv[0][v], gv[2][v]);
        t[0][v] = gv[0][v];
        t[1][v] = fhalf(c, fadd(c, s, gv[1][v]));
        t[2][v] = fhalf(c, fsub(c, s, gv[1][v]));
        t[3][v] = gv[2][v];
    }
    for (int i = 0; i < 4; i++) { // U = t G^T
        LLVMValueRef s = fadd(c, t[i][0], t[i][2]);
        LLVMValueRef row[4] = {t[i][0], fhalf(c, fadd(c, s, t[i][1])),
                               fhalf(c, fsub(c, s, t[i][1])), t[i][2]};
        for (int j = 0; j < 4; j++) {
            // ((xi * MBk + mb) * C + c) * MR + mr
            LLVMValueRef at = iaddk(c, iadd(c, imul(c, mb, g->C), ci), (i * 4 + j) * p->MBk * g->C);
            at = iadd(c, imul(c, at, p->mr), mr);
            cg_store(c, up, DL_DT_FLOAT, at, row[j]);
        }
    }
    cg_for_end(c, &lc);
    cg_store(c, up, DL_DT_FLOAT, iaddk(c, m, 16 * p->MBk * g->C * p->mr), ld(c, c->t_f32, fin));
    cg_for_end(c, &lm);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// The convolution kernel. Per iteration (a block of rpb tile rows of one image): the input
// transform V[xi][c][t] of the block's tiles (vectors of vw tiles along a tile row: each lane's
// 4 x 4 patch from two masked loads of 2 vw columns per row, deinterleaved) on the stack; per
// group of output channels, for each point xi the products P[xi][m][t] = sum over c of
// U[xi][m][c] V[xi][c][t] in register tiles of mr channels x nv vectors; then the output
// transform of P with the bias, the fused members and a fused 2 x 2 MaxPool (a tile is a
// pooling window) applied on the vectors, stored to y.

typedef struct wino_ctx {
    const conv_geo *g;
    const wino_plan *p;
    cg_kernel *k;
    conv_row r;          // for dl_cg__conv_epi (g, k, bbase 0)
    LLVMValueRef up;     // U
    LLVMValueRef vbuf;   // V[xi][c][NT]
    LLVMValueRef pbuf;   // P[xi][GM][NT] of the channel group
    LLVMValueRef n, ty0; // the iteration's image and first tile row
    LLVMValueRef xbase;  // x[n, 0]
} wino_ctx;

// The input transform of the 4 x 4 patches of vw tiles along a tile row into v[xi] (lanes over
// the tiles q * vw + l of tile row ty of image plane `plane` (x's element index of its first
// element, xp x's pointer): patch rows 2 ty + off[0] + r, columns 2 (q vw + l) + off[1] + j, zero
// outside the image.
static void wino_input_tf(cg *c, const conv_geo *g, const wino_plan *p, LLVMValueRef xp,
                          LLVMValueRef plane, LLVMValueRef ty, int64_t q, LLVMValueRef *v) {
    unsigned n = p->vw, n2 = 2 * p->vw;
    LLVMTypeRef vt2 = vty(c, n2);
    // Columns col0 + l (first load) and col0 + 2 + l (second) for l < 2 vw, live inside the row.
    int64_t col0 = 2 * q * (int64_t)n + p->off[1];
    LLVMValueRef cm[2];
    for (int s = 0; s < 2; s++) {
        LLVMValueRef m[CG_MAX_LANES];
        for (unsigned l = 0; l < n2; l++) {
            int64_t col = col0 + 2 * s + (int64_t)l;
            m[l] = LLVMConstInt(c->t_i1, col >= 0 && col < g->W, 0);
        }
        cm[s] = LLVMConstVector(m, n2);
    }
    LLVMValueRef cv[4][4]; // cv[r][j]: row r of the patch after the column transform
    LLVMValueRef h0 = iaddk(c, imul(c, ty, 2), p->off[0]);
    for (int r = 0; r < 4; r++) {
        LLVMValueRef h = iaddk(c, h0, r);
        LLVMValueRef ok = in_range(c, h, 0, g->H);
        LLVMValueRef hs = LLVMBuildSelect(c->b, ok, h, cg_i64(c, 0), "");
        LLVMValueRef e[4];
        for (int s = 0; s < 2; s++) {
            // plain GEP: the masked lanes' addresses may lie before the buffer
            LLVMValueRef idx = iaddk(c, iadd(c, plane, imul(c, hs, g->W)), col0 + 2 * s);
            LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, xp, &idx, 1, "");
            LLVMValueRef mask =
                LLVMBuildSelect(c->b, ok, cm[s], LLVMConstNull(LLVMTypeOf(cm[s])), "");
            LLVMValueRef ld2 = cg_masked_load(c, vt2, ptr, mask);
            e[2 * s] = lanes(c, ld2, 0, 2, n);
            e[2 * s + 1] = lanes(c, ld2, 1, 2, n);
        }
        // B^T along the columns: d0 - d2, d1 + d2, d2 - d1, d1 - d3
        cv[r][0] = fsub(c, e[0], e[2]);
        cv[r][1] = fadd(c, e[1], e[2]);
        cv[r][2] = fsub(c, e[2], e[1]);
        cv[r][3] = fsub(c, e[1], e[3]);
    }
    for (int j = 0; j < 4; j++) { // B^T along the rows
        v[0 * 4 + j] = fsub(c, cv[0][j], cv[2][j]);
        v[1 * 4 + j] = fadd(c, cv[1][j], cv[2][j]);
        v[2 * 4 + j] = fsub(c, cv[2][j], cv[1][j]);
        v[3 * 4 + j] = fsub(c, cv[1][j], cv[3][j]);
    }
}

// Input transform of channel ci, tile row tyl of the block, vector q of the row:
// V[xi][ci][(tyl * TWc + q) * vw + l] for the tile (ty0 + tyl, q * vw + l).
static void wino_input_vec(cg *c, const wino_ctx *w, LLVMValueRef ci, LLVMValueRef tyl, int64_t q) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    LLVMValueRef v[16];
    LLVMValueRef plane = iadd(c, w->xbase, imul(c, ci, g->H * g->W));
    wino_input_tf(c, g, p, w->k->ptr[1], plane, iadd(c, w->ty0, tyl), q, v);
    LLVMValueRef t = iaddk(c, imul(c, tyl, p->TWc * (int64_t)p->vw), q * (int64_t)p->vw);
    LLVMValueRef at = iadd(c, imul(c, ci, p->NT), t);
    for (int xi = 0; xi < 16; xi++) {
        vst(c, w->vbuf, iaddk(c, at, (int64_t)xi * g->C * p->NT), v[xi]);
    }
}

// P[xi][jb + j][t] = sum over c of U[xi][mb][c][j] * V[xi][c][t] for channel block mb's
// channels j < mlive (jb: the block's first channel in its group) and nv vectors of tiles from
// vector v0: one register tile.
static void wino_product_tile(cg *c, const wino_ctx *w, LLVMValueRef xi, LLVMValueRef mb,
                              LLVMValueRef jb, int64_t mlive, int64_t v0, int64_t nv) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    unsigned n = p->vw;
    LLVMTypeRef vt = vty(c, n);
    int64_t mr = p->mr;
    LLVMValueRef acc[WINO_MAX_MR][WINO_MAX_NV];
    for (int64_t j = 0; j < mlive; j++) {
        for (int64_t v = 0; v < nv; v++) {
            acc[j][v] = dl_cg__entry_alloca(c, vt);
            st(c, LLVMConstNull(vt), acc[j][v]);
        }
    }
    // U row of (xi, mb): ((xi * MBk + mb) * C) * MR; V row of xi: xi * C * NT
    LLVMValueRef ub = imul(c, iadd(c, imul(c, xi, p->MBk), mb), g->C * mr);
    LLVMValueRef vb = iaddk(c, imul(c, xi, g->C * p->NT), v0 * (int64_t)n);
    cg_loop lc;
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C), "c");
    LLVMValueRef xv[WINO_MAX_NV];
    LLVMValueRef vi = iadd(c, vb, imul(c, ci, p->NT));
    for (int64_t v = 0; v < nv; v++) {
        xv[v] = vld(c, w->vbuf, iaddk(c, vi, v * (int64_t)n), n);
    }
    LLVMValueRef ui = iadd(c, ub, imul(c, ci, mr));
    for (int64_t j = 0; j < mlive; j++) {
        LLVMValueRef u = vsplat(c, cg_load(c, w->up, DL_DT_FLOAT, iaddk(c, ui, j)), n);
        for (int64_t v = 0; v < nv; v++) {
            st(c, dl_cg__fmuladd(c, u, xv[v], ld(c, vt, acc[j][v])), acc[j][v]);
        }
    }
    cg_for_end(c, &lc);
    cg_loop_no_unroll(c, &lc);
    for (int64_t j = 0; j < mlive; j++) {
        LLVMValueRef pb = imul(c, iaddk(c, iadd(c, imul(c, xi, p->GM), jb), j), p->NT);
        pb = iaddk(c, pb, v0 * (int64_t)n);
        for (int64_t v = 0; v < nv; v++) {
            vst(c, w->pbuf, iaddk(c, pb, v * (int64_t)n), ld(c, vt, acc[j][v]));
        }
    }
}

// Output transform of channel j of the block (global channel mj), tile row tyl, vector q.
static void wino_output_vec(cg *c, const wino_ctx *w, LLVMValueRef j, LLVMValueRef mj,
                            LLVMValueRef tyl, int64_t q) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    unsigned n = p->vw;
    LLVMValueRef t = iaddk(c, imul(c, tyl, p->TWc * (int64_t)n), q * (int64_t)n);
    LLVMValueRef base = iadd(c, imul(c, j, p->NT), t);
    LLVMValueRef m[4][4], r[2][4];
    for (int xi = 0; xi < 16; xi++) {
        m[xi / 4][xi % 4] = vld(c, w->pbuf, iaddk(c, base, (int64_t)xi * p->GM * p->NT), n);
    }
    for (int jj = 0; jj < 4; jj++) { // A^T along the rows
        r[0][jj] = fadd(c, fadd(c, m[0][jj], m[1][jj]), m[2][jj]);
        r[1][jj] = fsub(c, fsub(c, m[1][jj], m[2][jj]), m[3][jj]);
    }
    LLVMValueRef y[2][2];
    for (int i = 0; i < 2; i++) { // and along the columns
        y[i][0] = fadd(c, fadd(c, r[i][0], r[i][1]), r[i][2]);
        y[i][1] = fsub(c, fsub(c, r[i][1], r[i][2]), r[i][3]);
    }
    LLVMValueRef ty = iadd(c, w->ty0, tyl);
    LLVMValueRef ych = iadd(c, imul(c, w->n, g->M), mj); // y's channel plane n * M + mj
    if (g->pool) { // the tile is the pooling window: pooled row ty, columns q * vw + l
        int64_t PH = g->OH / 2, PW = g->OW / 2, np = PW - q * (int64_t)n;
        if (np <= 0) {
            return;
        }
        dl_cg__if f;
        dl_cg__if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, ty, cg_i64(c, PH), ""));
        LLVMValueRef e[2][2];
        for (int i = 0; i < 2; i++) {
            for (int k = 0; k < 2; k++) {
                e[i][k] = dl_cg__conv_epi(c, &w->r, mj, y[i][k], n, NULL, n);
            }
        }
        LLVMValueRef pv = pool4(c, e[0][0], e[0][1], e[1][0], e[1][1]);
        LLVMValueRef yi = iaddk(c, iadd(c, imul(c, ych, PH * PW), imul(c, ty, PW)), q * n);
        if (np >= (int64_t)n) {
            vst(c, w->k->ptr[0], yi, pv);
        } else {
            cg_masked_store(c, pv, fptr(c, w->k->ptr[0], yi), live_mask(c, n, np));
        }
        dl_cg__if_end(c, &f);
        return;
    }
    int64_t nl = g->OW - 2 * q * (int64_t)n; // live columns of the row vector
    if (nl <= 0) {
        return;
    }
    unsigned n2 = 2 * n;
    nl = nl < (int64_t)n2 ? nl : (int64_t)n2;
    for (int i = 0; i < 2; i++) {
        LLVMValueRef oh = iaddk(c, imul(c, ty, 2), i);
        dl_cg__if f;
        dl_cg__if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, oh, cg_i64(c, g->OH), ""));
        LLVMValueRef yi =
            iaddk(c, iadd(c, imul(c, ych, g->OH * g->OW), imul(c, oh, g->OW)), 2 * q * n);
        LLVMValueRef v = interleave(c, y[i][0], y[i][1], n);
        v = dl_cg__conv_epi(c, &w->r, mj, v, n2, yi, (unsigned)nl);
        if (nl == (int64_t)n2) {
            vst(c, w->k->ptr[0], yi, v);
        } else {
            cg_masked_store(c, v, fptr(c, w->k->ptr[0], yi), live_mask(c, n2, nl));
        }
        dl_cg__if_end(c, &f);
    }
}

// The channel group from block mb0 (nb full blocks, then a block of `tail` channels): for each
// of the 16 points the products of every block (the point's V stays in L1 for all of them; a
// block-major order read the whole V from L2 once per block, 2 channels with AVX2: 50 % of the
// FMA peak), then the output transform of the group's channels.
static void wino_channel_group(cg *c, const wino_ctx *w, LLVMValueRef mb0, int64_t nb,
                               int64_t tail) {
    const wino_plan *p = w->p;
    int64_t ntv = p->rpb * p->TWc;
    cg_loop lx, lb, lj, lt;
    LLVMValueRef xi = cg_for_begin(c, &lx, cg_i64(c, 0), cg_i64(c, 16), "xi");
    for (int part = 0; part < 2; part++) {
        int64_t mlive = part == 0 ? p->mr : tail;
        if ((part == 0 && nb == 0) || mlive == 0) {
            continue;
        }
        LLVMValueRef b =
            part == 0 ? cg_for_begin(c, &lb, cg_i64(c, 0), cg_i64(c, nb), "mb") : cg_i64(c, nb);
        LLVMValueRef mb = iadd(c, mb0, b), jb = imul(c, b, p->mr);
        for (int64_t v0 = 0; v0 < ntv; v0 += p->nv) {
            wino_product_tile(c, w, xi, mb, jb, mlive, v0, ntv - v0 < p->nv ? ntv - v0 : p->nv);
        }
        if (part == 0) {
            cg_for_end(c, &lb);
        }
    }
    cg_for_end(c, &lx);
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, nb * p->mr + tail), "j");
    LLVMValueRef mj = iadd(c, imul(c, mb0, p->mr), j);
    LLVMValueRef tyl = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, p->rpb), "tyl");
    for (int64_t q = 0; q < p->TWc; q++) {
        wino_output_vec(c, w, j, mj, tyl, q);
    }
    cg_for_end(c, &lt);
    cg_for_end(c, &lj);
}

// The direct definition of output (oh, ow) of channel m (scalar): for the iterations whose
// image or weights are not finite or too large (finite_acc).
static LLVMValueRef direct_value(cg *c, const wino_ctx *w, LLVMValueRef m, LLVMValueRef oh,
                                 LLVMValueRef ow) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
    st(c, cg_f32(c, 0), acc);
    cg_loop lc;
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C), "c");
    LLVMValueRef plane = iadd(c, w->xbase, imul(c, ci, g->H * g->W));
    for (int u = 0; u < 3; u++) {
        LLVMValueRef h = iaddk(c, oh, p->off[0] + u);
        LLVMValueRef hok = in_range(c, h, 0, g->H);
        for (int v = 0; v < 3; v++) {
            LLVMValueRef col = iaddk(c, ow, p->off[1] + v);
            LLVMValueRef ok = LLVMBuildAnd(c->b, hok, in_range(c, col, 0, g->W), "");
            LLVMValueRef at = iadd(c, plane, iadd(c, imul(c, h, g->W), col));
            at = LLVMBuildSelect(c->b, ok, at, plane, "");
            LLVMValueRef xv = LLVMBuildSelect(c->b, ok, cg_load(c, w->k->ptr[1], DL_DT_FLOAT, at),
                                              cg_f32(c, 0), "");
            LLVMValueRef wv = cg_load(c, w->k->ptr[2], DL_DT_FLOAT, w_index(c, g, p, m, ci, u, v));
            if (!g->pad_zero) { // ConvTranspose: a tap outside the input does not exist
                wv = LLVMBuildSelect(c->b, ok, wv, cg_f32(c, 0), "");
            }
            st(c, dl_cg__fmuladd(c, xv, wv, ld(c, c->t_f32, acc)), acc);
        }
    }
    cg_for_end(c, &lc);
    return ld(c, c->t_f32, acc);
}

// The block's outputs by the direct definition, with the epilogue (and pooling) as the
// Winograd path's.
static void wino_direct_block(cg *c, const wino_ctx *w) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    cg_loop lm, lt, lo;
    LLVMValueRef m = cg_for_begin(c, &lm, cg_i64(c, 0), cg_i64(c, g->M), "m");
    LLVMValueRef ych = iadd(c, imul(c, w->n, g->M), m);
    LLVMValueRef tyl = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, p->rpb), "tyl");
    LLVMValueRef ty = iadd(c, w->ty0, tyl);
    if (g->pool) {
        int64_t PH = g->OH / 2, PW = g->OW / 2;
        dl_cg__if f;
        dl_cg__if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, ty, cg_i64(c, PH), ""));
        LLVMValueRef pw = cg_for_begin(c, &lo, cg_i64(c, 0), cg_i64(c, PW), "pw");
        LLVMValueRef e[2][2];
        for (int i = 0; i < 2; i++) {
            for (int k = 0; k < 2; k++) {
                LLVMValueRef v =
                    direct_value(c, w, m, iaddk(c, imul(c, ty, 2), i), iaddk(c, imul(c, pw, 2), k));
                e[i][k] = dl_cg__conv_epi(c, &w->r, m, v, 1, NULL, 1);
            }
        }
        LLVMValueRef yi = iadd(c, iadd(c, imul(c, ych, PH * PW), imul(c, ty, PW)), pw);
        cg_store(c, w->k->ptr[0], DL_DT_FLOAT, yi, pool4(c, e[0][0], e[0][1], e[1][0], e[1][1]));
        cg_for_end(c, &lo);
        dl_cg__if_end(c, &f);
    } else {
        for (int i = 0; i < 2; i++) {
            LLVMValueRef oh = iaddk(c, imul(c, ty, 2), i);
            dl_cg__if f;
            dl_cg__if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, oh, cg_i64(c, g->OH), ""));
            LLVMValueRef ow = cg_for_begin(c, &lo, cg_i64(c, 0), cg_i64(c, g->OW), "ow");
            LLVMValueRef yi = iadd(c, iadd(c, imul(c, ych, g->OH * g->OW), imul(c, oh, g->OW)), ow);
            LLVMValueRef v = direct_value(c, w, m, oh, ow);
            cg_store(c, w->k->ptr[0], DL_DT_FLOAT, yi, dl_cg__conv_epi(c, &w->r, m, v, 1, yi, 1));
            cg_for_end(c, &lo);
            dl_cg__if_end(c, &f);
        }
    }
    cg_for_end(c, &lt);
    cg_for_end(c, &lm);
}

// finite_acc's NaN-sticky sum over `count` floats of xp from element `base` (both i64 values).
static LLVMValueRef finite_run(cg *c, LLVMValueRef xp, LLVMValueRef base, LLVMValueRef count,
                               unsigned vw) {
    LLVMTypeRef vt = vty(c, vw);
    LLVMValueRef acc = dl_cg__entry_alloca(c, vt);
    st(c, LLVMConstNull(vt), acc);
    LLVMValueRef full = LLVMBuildUDiv(c->b, count, cg_i64(c, vw), "");
    cg_loop l;
    LLVMValueRef i = cg_for_begin(c, &l, cg_i64(c, 0), full, "fr");
    st(c, finite_acc(c, ld(c, vt, acc), vld(c, xp, iadd(c, base, imul(c, i, vw)), vw)), acc);
    cg_for_end(c, &l);
    LLVMValueRef rest = LLVMBuildURem(c->b, count, cg_i64(c, vw), "");
    LLVMValueRef lane[CG_MAX_LANES];
    for (unsigned k = 0; k < vw; k++) {
        lane[k] = LLVMConstInt(c->t_i64, k, 0);
    }
    LLVMValueRef rv = LLVMBuildInsertElement(c->b, LLVMGetUndef(LLVMVectorType(c->t_i64, vw)), rest,
                                             cg_i32(c, 0), "");
    rv = LLVMBuildShuffleVector(c->b, rv, LLVMGetUndef(LLVMTypeOf(rv)),
                                LLVMConstNull(LLVMVectorType(c->t_i32, vw)), "");
    LLVMValueRef mask = LLVMBuildICmp(c->b, LLVMIntULT, LLVMConstVector(lane, vw), rv, "");
    LLVMValueRef at = iadd(c, base, imul(c, full, vw));
    LLVMValueRef tail = cg_masked_load(c, vt, LLVMBuildGEP2(c->b, c->t_f32, xp, &at, 1, ""), mask);
    return dl_cg__hsum(c, finite_acc(c, ld(c, vt, acc), tail), vw);
}

// NaN when the image's values or the weights are not all finite or too large (finite_acc): the
// image (finite_run), then each channel's sum from the weights' transform. The transforms add
// and subtract (exactly, at factors 0, +-1 and +-1/2), so an infinite or NaN value would make
// its whole tile NaN where the direct sum gives Inf at the outputs that read it, and a finite
// |x| near 1e38 would overflow; such an iteration takes wino_direct_block (the evaluator's
// semantics).
static LLVMValueRef wino_finite_sum(cg *c, const wino_ctx *w) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    LLVMValueRef f = finite_run(c, w->k->ptr[1], w->xbase, cg_i64(c, g->C * g->H * g->W), p->vw);
    cg_loop l;
    LLVMValueRef sc = dl_cg__entry_alloca(c, c->t_f32);
    st(c, f, sc);
    LLVMValueRef m = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, g->M), "fw");
    LLVMValueRef u = cg_load(c, w->up, DL_DT_FLOAT, iaddk(c, m, 16 * p->MBk * g->C * p->mr));
    st(c, fadd(c, ld(c, c->t_f32, sc), u), sc);
    cg_for_end(c, &l);
    return ld(c, c->t_f32, sc);
}

// The convolution kernel of entry points `only`, reading the weights' transform in ubuf.
static dl_status emit_wino_conv(cg *c, dl_ir_value *const *vals, size_t n_vals, const conv_geo *g,
                                const wino_plan *p, uint32_t ubuf, uint8_t only) {
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, n_vals, g->N * p->TRB, &k));
    k.only = only;
    DL_TRY(cg_kernel_add_buf(c, &k, ubuf));
    wino_ctx w;
    memset(&w, 0, sizeof w);
    w.g = g;
    w.p = p;
    w.k = &k;
    w.up = k.ptr[k.n_args - 1];
    w.vbuf = dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(16 * g->C * p->NT)));
    w.pbuf = dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(16 * p->GM * p->NT)));
    w.r.g = g;
    w.r.k = &k;
    w.r.bbase = cg_i64(c, 0);
    w.r.wbase = cg_i64(c, 0);
    cg_loop lit;
    LLVMValueRef it = cg_for_begin(c, &lit, k.begin, k.end, "it");
    w.n = LLVMBuildUDiv(c->b, it, cg_i64(c, p->TRB), "n");
    w.ty0 = imul(c, LLVMBuildURem(c->b, it, cg_i64(c, p->TRB), ""), p->rpb);
    w.xbase = imul(c, w.n, g->C * g->H * g->W);
    LLVMValueRef fin = wino_finite_sum(c, &w);
    LLVMValueRef bad = LLVMBuildFCmp(c->b, LLVMRealUNO, fin, fin, "");
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef bb_direct = LLVMAppendBasicBlockInContext(c->ctx, fn, "wino.direct");
    LLVMBasicBlockRef bb_fast = LLVMAppendBasicBlockInContext(c->ctx, fn, "wino.fast");
    LLVMBasicBlockRef bb_done = LLVMAppendBasicBlockInContext(c->ctx, fn, "wino.done");
    LLVMBuildCondBr(c->b, bad, bb_direct, bb_fast);
    LLVMPositionBuilderAtEnd(c->b, bb_direct);
    wino_direct_block(c, &w);
    LLVMBuildBr(c->b, bb_done);
    LLVMPositionBuilderAtEnd(c->b, bb_fast);
    // The input transform of the block's tiles (rows past the image read zeros).
    cg_loop lc, lt, lm;
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C), "c");
    LLVMValueRef tyl = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, p->rpb), "tyl");
    for (int64_t q = 0; q < p->TWc; q++) {
        wino_input_vec(c, &w, ci, tyl, q);
    }
    cg_for_end(c, &lt);
    cg_for_end(c, &lc);
    // Channel groups of GM channels (GM / mr blocks), the last one with what is left.
    int64_t gblocks = p->GM / p->mr, full = g->M / p->GM, left = g->M - full * p->GM;
    if (full > 0) {
        LLVMValueRef gi = cg_for_begin(c, &lm, cg_i64(c, 0), cg_i64(c, full), "mg");
        wino_channel_group(c, &w, imul(c, gi, gblocks), gblocks, 0);
        cg_for_end(c, &lm);
    }
    if (left > 0) {
        wino_channel_group(c, &w, cg_i64(c, full * gblocks), left / p->mr, left % p->mr);
    }
    LLVMBuildBr(c->b, bb_done);
    LLVMPositionBuilderAtEnd(c->b, bb_done);
    cg_for_end(c, &lit);
    return cg_kernel_end(c, &k);
}

// Whether w's transform is made once per change of the weights (a PACKED buffer, the infer
// entry's prepack kernels) rather than per call: a param or constant, prepacking on.
static bool wino_prepacked(const cg *c, const dl_ir_value *w) {
    return c->prepack && (w->kind == DL_IR_VAL_PARAM || w->kind == DL_IR_VAL_CONST);
}

// y: [N, M, OH, OW] (or the fused group's, pooled: [N, M, OH / 2, OW / 2]) from x: [N, C, H, W]
// and w: [M, C, 3, 3] (ConvTranspose: [C, M, 3, 3]), b?: [M]. With prepacked weights, the
// infer entry's kernels read the transform its prepack kernel made, and a model with a train
// step gets the per-call pair as well (its weights change every step).
dl_status dl_cg__emit_wino(cg *c, dl_ir_value *const *vals, size_t n_vals, const conv_geo *g) {
    wino_plan p;
    bool ok = wino_plan_of(c, g, &p);
    DL_ASSERT(ok); // the caller asked dl_cg__wino_ok
    (void)ok;
    uint64_t bytes = (uint64_t)(16 * p.MBk * g->C * p.mr + g->M) * sizeof(float);
    uint8_t rest = CG_ENTRY_BOTH; // the entries left to the kernels below
    uint32_t ubuf;
    if (wino_prepacked(c, vals[2])) {
        DL_TRY(cg_extra_buffer(c, bytes, DLRT_BUF_PACKED, NULL, &ubuf));
        DL_TRY(emit_wino_weights(c, g, &p, ubuf, vals[2], CG_ENTRY_INFER));
        DL_TRY(emit_wino_conv(c, vals, n_vals, g, &p, ubuf, CG_ENTRY_INFER));
        if (!(c->m->has_backward && c->m->train)) {
            return DL_OK;
        }
        rest = CG_ENTRY_TRAIN;
    }
    DL_TRY(cg_extra_buffer(c, bytes, DLRT_BUF_TEMP, NULL, &ubuf));
    DL_TRY(emit_wino_weights(c, g, &p, ubuf, vals[2], rest));
    return emit_wino_conv(c, vals, n_vals, g, &p, ubuf, rest);
}

// ---------------------------------------------------------------------------------------------
// The weight gradient of a stride-1 3 x 3 Conv as F(3 x 3, 2 x 2) (the transposed algorithm:
// the 2 x 2 tile of dy is the "kernel", the 3 x 3 weight gradient the "output"):
//   dw[m, c] = G^T [ sum over tiles of (A dy[m, tile] A^T) .* (B^T d[c, tile] B) ] G
// (A = (A^T)^T and G of F(2 x 2, 3 x 3); d the tile's 4 x 4 input patch as the forward's). The
// sum over the tiles is a product per point: S[xi][m][c] = sum over t of DY[xi][m][t] X[xi][t][c].
// Two kernels: NCH chunks of images, each summing its images' products into its own S (or, when
// one of its values is not finite or too large, its part of dw by the direct definition into
// D); then per output channel the chunks' sums in chunk order, the output transform and D. The
// chunks are fixed at compile time: the same bytes for any thread count.

#define WGRAD_T_BYTES    (384 * 1024) // X and DY transforms of one block of tile rows, at most
#define WGRAD_MAX_CHUNKS 8

typedef struct wgrad {
    const conv_geo *g;
    const wino_plan *p;
    cg_kernel *k;
    int64_t rpb, TRB, NT, NCH, mr, cbw; // cbw: channels of a c block (2 vectors)
    LLVMValueRef xt, dyt;               // stack: XT[16][NT][C], DYT[16][M][NT]
    LLVMValueRef sp;                    // the chunk's S: [16][M][C]
    LLVMValueRef n, ty0;
} wgrad;

static bool wgrad_plan(cg *c, const conv_geo *g, wino_plan *p, int64_t *out_rpb, int64_t *out_trb) {
    if (!wino_plan_of(c, g, p) || !g->pad_zero || p->flip[0] || p->flip[1] ||
        g->C % (2 * (int64_t)p->vw) != 0 ||
        g->N * ((g->OH + 1) / 2) * ((g->OW + 1) / 2) >= ((int64_t)1 << 26)) {
        return false; // (the tiles' bound: finite_acc)
    }
    int64_t row = 16 * (g->C + g->M) * p->TWc * p->vw * 4;
    int64_t r = WGRAD_T_BYTES / row;
    if (r < 1) {
        return false;
    }
    r = r < p->TH ? r : p->TH;
    *out_trb = (p->TH + r - 1) / r;
    *out_rpb = (p->TH + *out_trb - 1) / *out_trb;
    return true;
}

bool dl_cg__wino_grad_ok(cg *c, const conv_geo *g) {
    wino_plan p;
    int64_t rpb, trb;
    return wgrad_plan(c, g, &p, &rpb, &trb);
}

// DY[xi][m][t] of channel m, tile row tyl, vector q: A dy A^T of the tile's 2 x 2 outputs (zero
// past the output).
static void wgrad_dy_vec(cg *c, const wgrad *w, LLVMValueRef m, LLVMValueRef tyl, int64_t q) {
    const conv_geo *g = w->g;
    unsigned n = w->p->vw, n2 = 2 * n;
    int64_t col0 = 2 * q * (int64_t)n;
    LLVMValueRef cm = live_mask(c, n2, g->OW - col0);
    LLVMValueRef plane = imul(c, iadd(c, imul(c, w->n, g->M), m), g->OH * g->OW);
    LLVMValueRef ty = iadd(c, w->ty0, tyl);
    LLVMValueRef cv[2][4];
    for (int a = 0; a < 2; a++) {
        LLVMValueRef oh = iaddk(c, imul(c, ty, 2), a);
        LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntSLT, oh, cg_i64(c, g->OH), "");
        LLVMValueRef hs = LLVMBuildSelect(c->b, ok, oh, cg_i64(c, 0), "");
        LLVMValueRef idx = iaddk(c, iadd(c, plane, imul(c, hs, g->OW)), col0);
        LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, w->k->ptr[1], &idx, 1, "");
        LLVMValueRef mask = LLVMBuildSelect(c->b, ok, cm, LLVMConstNull(LLVMTypeOf(cm)), "");
        LLVMValueRef v = cg_masked_load(c, vty(c, n2), ptr, mask);
        LLVMValueRef e0 = lanes(c, v, 0, 2, n), e1 = lanes(c, v, 1, 2, n);
        // A along the columns: g0, g0 + g1, g0 - g1, -g1
        cv[a][0] = e0;
        cv[a][1] = fadd(c, e0, e1);
        cv[a][2] = fsub(c, e0, e1);
        cv[a][3] = LLVMBuildFNeg(c->b, e1, "");
    }
    LLVMValueRef t = iaddk(c, imul(c, tyl, w->p->TWc * (int64_t)n), q * (int64_t)n);
    for (int j = 0; j < 4; j++) { // and along the rows
        LLVMValueRef v[4] = {cv[0][j], fadd(c, cv[0][j], cv[1][j]), fsub(c, cv[0][j], cv[1][j]),
                             LLVMBuildFNeg(c->b, cv[1][j], "")};
        for (int i = 0; i < 4; i++) {
            LLVMValueRef at = iadd(c, imul(c, iaddk(c, m, (int64_t)(i * 4 + j) * g->M), w->NT), t);
            vst(c, w->dyt, at, v[i]);
        }
    }
}

// X[xi][t][c0 + ..] of channels c0 .. c0 + vw, tile row tyl, vector q: the forward's input
// transform of vw channels, each point's vw vectors transposed in registers (lanes over the
// channels: the products' vectors run along them). Scalar stores of each lane took 28 % of the
// kernel.
static void wgrad_x_vec(cg *c, const wgrad *w, LLVMValueRef c0, LLVMValueRef tyl, int64_t q) {
    const conv_geo *g = w->g;
    unsigned n = w->p->vw;
    LLVMValueRef v[CG_MAX_LANES / 2][16];
    for (unsigned j = 0; j < n; j++) {
        LLVMValueRef plane = imul(c, iaddk(c, iadd(c, imul(c, w->n, g->C), c0), j), g->H * g->W);
        wino_input_tf(c, g, w->p, w->k->ptr[2], plane, iadd(c, w->ty0, tyl), q, v[j]);
    }
    LLVMValueRef t = iaddk(c, imul(c, tyl, w->p->TWc * (int64_t)n), q * (int64_t)n);
    for (int xi = 0; xi < 16; xi++) {
        LLVMValueRef x[CG_MAX_LANES / 2];
        for (unsigned j = 0; j < n; j++) {
            x[j] = v[j][xi];
        }
        dl_cg__transpose_sq(c, x, n);
        LLVMValueRef row = iadd(c, imul(c, iadd(c, imul(c, cg_i64(c, xi), w->NT), t), g->C), c0);
        for (unsigned l = 0; l < n; l++) {
            vst(c, w->xt, iaddk(c, row, (int64_t)l * g->C), x[l]);
        }
    }
}

// S[xi][m0 + j][cb * cbw + ..] += sum over t of DY[xi][m0 + j][t] X[xi][t][cb * cbw + ..] for
// j < mlive: mlive x 2 vectors of accumulators.
static void wgrad_tile(cg *c, const wgrad *w, LLVMValueRef xi, LLVMValueRef cb, LLVMValueRef m0,
                       int64_t mlive) {
    const conv_geo *g = w->g;
    unsigned n = w->p->vw;
    LLVMTypeRef vt = vty(c, n);
    LLVMValueRef acc[WINO_MAX_MR][2];
    LLVMValueRef c0 = imul(c, cb, w->cbw);
    for (int64_t j = 0; j < mlive; j++) {
        LLVMValueRef at = iadd(c, imul(c, iadd(c, imul(c, xi, g->M), iaddk(c, m0, j)), g->C), c0);
        for (int v = 0; v < 2; v++) {
            acc[j][v] = dl_cg__entry_alloca(c, vt);
            st(c, vld(c, w->sp, iaddk(c, at, v * (int64_t)n), n), acc[j][v]);
        }
    }
    cg_loop lt;
    LLVMValueRef t = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, w->NT), "t");
    LLVMValueRef xrow = iadd(c, imul(c, iadd(c, imul(c, xi, w->NT), t), g->C), c0);
    LLVMValueRef xv[2] = {vld(c, w->xt, xrow, n), vld(c, w->xt, iaddk(c, xrow, n), n)};
    for (int64_t j = 0; j < mlive; j++) {
        LLVMValueRef at = iadd(c, imul(c, iadd(c, imul(c, xi, g->M), iaddk(c, m0, j)), w->NT), t);
        LLVMValueRef u = vsplat(c, cg_load(c, w->dyt, DL_DT_FLOAT, at), n);
        for (int v = 0; v < 2; v++) {
            st(c, dl_cg__fmuladd(c, u, xv[v], ld(c, vt, acc[j][v])), acc[j][v]);
        }
    }
    cg_for_end(c, &lt);
    cg_loop_no_unroll(c, &lt);
    for (int64_t j = 0; j < mlive; j++) {
        LLVMValueRef at = iadd(c, imul(c, iadd(c, imul(c, xi, g->M), iaddk(c, m0, j)), g->C), c0);
        for (int v = 0; v < 2; v++) {
            vst(c, w->sp, iaddk(c, at, v * (int64_t)n), ld(c, vt, acc[j][v]));
        }
    }
}

// One block of tile rows of image n: both transforms, then the products into S.
static void wgrad_block(cg *c, const wgrad *w) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    cg_loop l1, l2, l3;
    LLVMValueRef cv = cg_for_begin(c, &l1, cg_i64(c, 0), cg_i64(c, g->C / p->vw), "cv");
    LLVMValueRef tyl = cg_for_begin(c, &l2, cg_i64(c, 0), cg_i64(c, w->rpb), "tyl");
    for (int64_t q = 0; q < p->TWc; q++) {
        wgrad_x_vec(c, w, imul(c, cv, p->vw), tyl, q);
    }
    cg_for_end(c, &l2);
    cg_for_end(c, &l1);
    LLVMValueRef m = cg_for_begin(c, &l1, cg_i64(c, 0), cg_i64(c, g->M), "m");
    tyl = cg_for_begin(c, &l2, cg_i64(c, 0), cg_i64(c, w->rpb), "tyl");
    for (int64_t q = 0; q < p->TWc; q++) {
        wgrad_dy_vec(c, w, m, tyl, q);
    }
    cg_for_end(c, &l2);
    cg_for_end(c, &l1);
    LLVMValueRef xi = cg_for_begin(c, &l1, cg_i64(c, 0), cg_i64(c, 16), "xi");
    LLVMValueRef cb = cg_for_begin(c, &l2, cg_i64(c, 0), cg_i64(c, g->C / w->cbw), "cb");
    int64_t full = g->M / w->mr, tail = g->M % w->mr;
    if (full > 0) {
        LLVMValueRef mb = cg_for_begin(c, &l3, cg_i64(c, 0), cg_i64(c, full), "mb");
        wgrad_tile(c, w, xi, cb, imul(c, mb, w->mr), w->mr);
        cg_for_end(c, &l3);
    }
    if (tail > 0) {
        wgrad_tile(c, w, xi, cb, cg_i64(c, full * w->mr), tail);
    }
    cg_for_end(c, &l2);
    cg_for_end(c, &l1);
}

// The chunk's images [n0, n1) by the direct definition: D[m][k][ci] = sum over its images and
// output positions of dy * x at tap k, the taps in the padding left out (as in the evaluator:
// a non-finite dy next to the padding does not make the edge taps' gradient NaN).
static void wgrad_direct(cg *c, const wgrad *w, LLVMValueRef dp, LLVMValueRef n0, LLVMValueRef n1) {
    const conv_geo *g = w->g;
    const wino_plan *p = w->p;
    cg_loop lm, lc, lk, ln, lh, lw;
    LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
    LLVMValueRef m = cg_for_begin(c, &lm, cg_i64(c, 0), cg_i64(c, g->M), "m");
    LLVMValueRef ci = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C), "c");
    LLVMValueRef k = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, 9), "k");
    LLVMValueRef u = LLVMBuildUDiv(c->b, k, cg_i64(c, 3), ""),
                 v = LLVMBuildURem(c->b, k, cg_i64(c, 3), "");
    st(c, cg_f32(c, 0), acc);
    LLVMValueRef nn = cg_for_begin(c, &ln, n0, n1, "n");
    LLVMValueRef yplane = imul(c, iadd(c, imul(c, nn, g->M), m), g->OH * g->OW);
    LLVMValueRef xplane = imul(c, iadd(c, imul(c, nn, g->C), ci), g->H * g->W);
    LLVMValueRef oh = cg_for_begin(c, &lh, cg_i64(c, 0), cg_i64(c, g->OH), "oh");
    LLVMValueRef h = iadd(c, iaddk(c, oh, p->off[0]), u);
    LLVMValueRef hok = in_range(c, h, 0, g->H);
    LLVMValueRef ow = cg_for_begin(c, &lw, cg_i64(c, 0), cg_i64(c, g->OW), "ow");
    LLVMValueRef col = iadd(c, iaddk(c, ow, p->off[1]), v);
    LLVMValueRef ok = LLVMBuildAnd(c->b, hok, in_range(c, col, 0, g->W), "");
    LLVMValueRef at =
        LLVMBuildSelect(c->b, ok, iadd(c, xplane, iadd(c, imul(c, h, g->W), col)), xplane, "");
    LLVMValueRef xv =
        LLVMBuildSelect(c->b, ok, cg_load(c, w->k->ptr[2], DL_DT_FLOAT, at), cg_f32(c, 0), "");
    LLVMValueRef dv =
        cg_load(c, w->k->ptr[1], DL_DT_FLOAT, iadd(c, yplane, iadd(c, imul(c, oh, g->OW), ow)));
    dv = LLVMBuildSelect(c->b, ok, dv, cg_f32(c, 0), ""); // a tap in the padding: no term
    st(c, dl_cg__fmuladd(c, dv, xv, ld(c, c->t_f32, acc)), acc);
    cg_for_end(c, &lw);
    cg_for_end(c, &lh);
    cg_for_end(c, &ln);
    LLVMValueRef di = iadd(c, imul(c, iadd(c, imul(c, m, 9), k), g->C), ci);
    cg_store(c, dp, DL_DT_FLOAT, di, ld(c, c->t_f32, acc));
    cg_for_end(c, &lk);
    cg_for_end(c, &lc);
    cg_for_end(c, &lm);
}

// dw: [M, C, 3, 3] from dy: [N, M, OH, OW] and x: [N, C, H, W] (g: the forward's geometry).
dl_status dl_cg__emit_wino_grad(cg *c, dl_ir_value *dw, dl_ir_value *dy, dl_ir_value *x,
                                const conv_geo *g) {
    wino_plan p;
    wgrad w;
    memset(&w, 0, sizeof w);
    bool ok = wgrad_plan(c, g, &p, &w.rpb, &w.TRB);
    DL_ASSERT(ok); // the caller asked dl_cg__wino_grad_ok
    (void)ok;
    w.g = g;
    w.p = &p;
    w.NT = w.rpb * p.TWc * p.vw;
    w.NCH = g->N < WGRAD_MAX_CHUNKS ? g->N : WGRAD_MAX_CHUNKS;
    w.mr = p.vw >= 16 ? 12 : 6;
    w.cbw = 2 * (int64_t)p.vw;
    int64_t s_floats = 16 * g->M * g->C, d_floats = 9 * g->M * g->C;
    int64_t d_off = w.NCH * s_floats, f_off = d_off + w.NCH * d_floats;
    uint32_t buf;
    DL_TRY(
        cg_extra_buffer(c, (uint64_t)(f_off + w.NCH) * sizeof(float), DLRT_BUF_TEMP, NULL, &buf));

    // Kernel 1: per chunk of images, S (or D) and its flag.
    dl_ir_value *vals[3] = {dw, dy, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, w.NCH, &k));
    DL_TRY(cg_kernel_add_buf(c, &k, buf));
    w.k = &k;
    LLVMValueRef bp = k.ptr[k.n_args - 1];
    w.xt = dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(16 * w.NT * g->C)));
    w.dyt = dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(16 * g->M * w.NT)));
    cg_loop lch, ln, lb, lz;
    LLVMValueRef ch = cg_for_begin(c, &lch, k.begin, k.end, "ch");
    LLVMValueRef n0 = LLVMBuildUDiv(c->b, imul(c, ch, g->N), cg_i64(c, w.NCH), "");
    LLVMValueRef n1 = LLVMBuildUDiv(c->b, imul(c, iaddk(c, ch, 1), g->N), cg_i64(c, w.NCH), "");
    LLVMValueRef cnt = LLVMBuildSub(c->b, n1, n0, "");
    LLVMValueRef fin = fadd(c,
                            finite_run(c, k.ptr[2], imul(c, n0, g->C * g->H * g->W),
                                       imul(c, cnt, g->C * g->H * g->W), p.vw),
                            finite_run(c, k.ptr[1], imul(c, n0, g->M * g->OH * g->OW),
                                       imul(c, cnt, g->M * g->OH * g->OW), p.vw));
    LLVMValueRef bad = LLVMBuildFCmp(c->b, LLVMRealUNO, fin, fin, "");
    cg_store(c, bp, DL_DT_FLOAT, iaddk(c, ch, f_off),
             LLVMBuildSelect(c->b, bad, cg_f32(c, 1), cg_f32(c, 0), ""));
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef bb_direct = LLVMAppendBasicBlockInContext(c->ctx, fn, "wgrad.direct");
    LLVMBasicBlockRef bb_fast = LLVMAppendBasicBlockInContext(c->ctx, fn, "wgrad.fast");
    LLVMBasicBlockRef bb_done = LLVMAppendBasicBlockInContext(c->ctx, fn, "wgrad.done");
    LLVMBuildCondBr(c->b, bad, bb_direct, bb_fast);
    LLVMPositionBuilderAtEnd(c->b, bb_direct);
    LLVMValueRef di = iadd(c, imul(c, ch, d_floats), cg_i64(c, d_off));
    wgrad_direct(c, &w, LLVMBuildGEP2(c->b, c->t_f32, bp, &di, 1, ""), n0, n1);
    LLVMBuildBr(c->b, bb_done);
    LLVMPositionBuilderAtEnd(c->b, bb_fast);
    LLVMValueRef si = imul(c, ch, s_floats);
    w.sp = LLVMBuildInBoundsGEP2(c->b, c->t_f32, bp, &si, 1, "");
    LLVMTypeRef vt = vty(c, p.vw);
    LLVMValueRef z = cg_for_begin(c, &lz, cg_i64(c, 0), cg_i64(c, s_floats / p.vw), "z");
    vst(c, w.sp, imul(c, z, p.vw), LLVMConstNull(vt));
    cg_for_end(c, &lz);
    w.n = cg_for_begin(c, &ln, n0, n1, "n");
    LLVMValueRef blk = cg_for_begin(c, &lb, cg_i64(c, 0), cg_i64(c, w.TRB), "blk");
    w.ty0 = imul(c, blk, w.rpb);
    wgrad_block(c, &w);
    cg_for_end(c, &lb);
    cg_for_end(c, &ln);
    LLVMBuildBr(c->b, bb_done);
    LLVMPositionBuilderAtEnd(c->b, bb_done);
    cg_for_end(c, &lch);
    DL_TRY(cg_kernel_end(c, &k));

    // Kernel 2: per output channel, vectors of vw input channels: the chunks' S in chunk order
    // (a direct chunk's skipped), G^T S G, plus the direct chunks' D.
    cg_kernel k2;
    DL_TRY(cg_kernel_begin(c, vals, 1, g->M, &k2));
    DL_TRY(cg_kernel_add_buf(c, &k2, buf));
    LLVMValueRef b2 = k2.ptr[k2.n_args - 1];
    cg_loop lm, lc, lq;
    LLVMValueRef m = cg_for_begin(c, &lm, k2.begin, k2.end, "m");
    LLVMValueRef cv = cg_for_begin(c, &lc, cg_i64(c, 0), cg_i64(c, g->C / p.vw), "cv");
    LLVMValueRef c0 = imul(c, cv, p.vw);
    LLVMValueRef sacc[16], dacc[9];
    for (int i = 0; i < 16; i++) {
        sacc[i] = dl_cg__entry_alloca(c, vt);
        st(c, LLVMConstNull(vt), sacc[i]);
    }
    for (int i = 0; i < 9; i++) {
        dacc[i] = dl_cg__entry_alloca(c, vt);
        st(c, LLVMConstNull(vt), dacc[i]);
    }
    LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), cg_i64(c, w.NCH), "q");
    LLVMValueRef direct = LLVMBuildFCmp(
        c->b, LLVMRealONE, cg_load(c, b2, DL_DT_FLOAT, iaddk(c, q, f_off)), cg_f32(c, 0), "");
    LLVMValueRef dz = LLVMConstNull(vt);
    for (int i = 0; i < 16; i++) {
        LLVMValueRef at = iadd(
            c, iadd(c, imul(c, q, s_floats), imul(c, iaddk(c, m, (int64_t)i * g->M), g->C)), c0);
        LLVMValueRef sv = vld(c, b2, at, p.vw);
        st(c, fadd(c, ld(c, vt, sacc[i]), LLVMBuildSelect(c->b, direct, dz, sv, "")), sacc[i]);
    }
    for (int i = 0; i < 9; i++) {
        LLVMValueRef at = iadd(c, iaddk(c, imul(c, q, d_floats), d_off),
                               iadd(c, imul(c, iaddk(c, imul(c, m, 9), i), g->C), c0));
        LLVMValueRef dv = vld(c, b2, at, p.vw);
        st(c, fadd(c, ld(c, vt, dacc[i]), LLVMBuildSelect(c->b, direct, dv, dz, "")), dacc[i]);
    }
    cg_for_end(c, &lq);
    // G^T M G: rows then columns (u: M0 + (M1 + M2) / 2, (M1 - M2) / 2, (M1 + M2) / 2 + M3)
    LLVMValueRef mm[4][4], r[3][4];
    for (int i = 0; i < 16; i++) {
        mm[i / 4][i % 4] = ld(c, vt, sacc[i]);
    }
    for (int j = 0; j < 4; j++) {
        LLVMValueRef s12 = fhalf(c, fadd(c, mm[1][j], mm[2][j]));
        r[0][j] = fadd(c, mm[0][j], s12);
        r[1][j] = fhalf(c, fsub(c, mm[1][j], mm[2][j]));
        r[2][j] = fadd(c, s12, mm[3][j]);
    }
    for (int u = 0; u < 3; u++) {
        LLVMValueRef s12 = fhalf(c, fadd(c, r[u][1], r[u][2]));
        LLVMValueRef o[3] = {fadd(c, r[u][0], s12), fhalf(c, fsub(c, r[u][1], r[u][2])),
                             fadd(c, s12, r[u][3])};
        for (int v = 0; v < 3; v++) {
            LLVMValueRef val = fadd(c, o[v], ld(c, vt, dacc[u * 3 + v]));
            LLVMValueRef base = iaddk(c, imul(c, iadd(c, imul(c, m, g->C), c0), 9), u * 3 + v);
            for (unsigned l = 0; l < p.vw; l++) {
                LLVMValueRef e = LLVMBuildExtractElement(c->b, val, cg_i32(c, (int32_t)l), "");
                cg_store(c, k2.ptr[0], DL_DT_FLOAT, iaddk(c, base, (int64_t)l * 9), e);
            }
        }
    }
    cg_for_end(c, &lc);
    cg_for_end(c, &lm);
    return cg_kernel_end(c, &k2);
}
