// codegen/cg_geometry.h — helpers shared by the forward NN lowering (x86/x86_nn.c) and the
// gradient lowerings (x86/x86_grad_nn.c, lower_grad.c), so that a forward op and its gradient
// agree on geometry (pads, windows, the max-pool argmax rule) by construction, not by copy.
//
// The one-line IR builders (iadd, imul, ...) are static inline here so the dense emitters stay
// readable; everything with a body of its own is a dl_cg__ function defined in x86/x86_nn.c.
// Private to codegen/: include after cg_internal.h.
#ifndef DL_CG_GEOMETRY_H
#define DL_CG_GEOMETRY_H

#include "cg_internal.h"

// ---------------------------------------------------------------------------------------------
// One-line IR and integer helpers

static inline LLVMValueRef iadd(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildAdd(c->b, a, b, "");
}

static inline LLVMValueRef imul(cg *c, LLVMValueRef a, int64_t k) {
    return LLVMBuildMul(c->b, a, cg_i64(c, k), "");
}

static inline LLVMValueRef iaddk(cg *c, LLVMValueRef a, int64_t k) {
    return LLVMBuildAdd(c->b, a, cg_i64(c, k), "");
}

static inline LLVMValueRef ld(cg *c, LLVMTypeRef ty, LLVMValueRef p) {
    return LLVMBuildLoad2(c->b, ty, p, "");
}

static inline void st(cg *c, LLVMValueRef v, LLVMValueRef p) {
    LLVMBuildStore(c->b, v, p);
}

// f32 vector of `w` lanes (w == 1: plain f32).
static inline LLVMTypeRef vty(cg *c, unsigned w) {
    return w == 1 ? c->t_f32 : LLVMVectorType(c->t_f32, w);
}

// lo <= v < hi for i64 values (bounds constants).
static inline LLVMValueRef in_range(cg *c, LLVMValueRef v, int64_t lo, int64_t hi) {
    LLVMValueRef a = LLVMBuildICmp(c->b, LLVMIntSGE, v, cg_i64(c, lo), "");
    LLVMValueRef b = LLVMBuildICmp(c->b, LLVMIntSLT, v, cg_i64(c, hi), "");
    return LLVMBuildAnd(c->b, a, b, "");
}

static inline int64_t floor_div(int64_t a, int64_t b) { // b > 0
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static inline int64_t ceil_div(int64_t a, int64_t b) { // b > 0
    return -floor_div(-a, b);
}

// ---------------------------------------------------------------------------------------------
// Builders (x86/x86_nn.c)

// An alloca in the entry block of the current function (so mem2reg/SROA promote it).
LLVMValueRef dl_cg__entry_alloca(cg *c, LLVMTypeRef ty);

// `if (cond) { ... }`: dl_cg__if_begin positions the builder in the body, dl_cg__if_end after
// it.
typedef struct dl_cg__if {
    LLVMBasicBlockRef then, merge;
} dl_cg__if;
void dl_cg__if_begin(cg *c, dl_cg__if *f, LLVMValueRef cond);
void dl_cg__if_end(cg *c, dl_cg__if *f);

// acc + a * b (llvm.fmuladd: fused where the target has FMA).
LLVMValueRef dl_cg__fmuladd(cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc);

// Loads `w` contiguous elements of a float-typed buffer from element idx as an f32 vector.
LLVMValueRef dl_cg__vload(cg *c, LLVMValueRef base, dl_dtype dt, LLVMValueRef idx, unsigned w);

// Horizontal sum of an f32 vector (ordered over its lanes).
LLVMValueRef dl_cg__hsum(cg *c, LLVMValueRef v, unsigned w);
// Transposes n vectors of n floats in registers (n a power of two, <= 32): afterwards x[k] lane r
// holds what x[r] lane k held (x86_linalg.c).
void dl_cg__transpose_sq(cg *c, LLVMValueRef *x, unsigned n);

// Kernel arguments of a node with outputs [0, 1?, 2?] (BatchNormalization in training mode and
// its gradient): vals = output 0, then outputs 1 and 2 where present (*a1, *a2: their argument
// indices, 0 when absent). Returns the number written.
size_t dl_cg__out_args3(const dl_ir_node *n, dl_ir_value **vals, size_t *a1, size_t *a2);

// Reads INTS attribute `name` of the current node into out[n] (absent or empty: every entry
// `def`). Returns false (after a diagnostic) when it has the wrong length.
bool dl_cg__attr_ints(cg *c, const char *name, int32_t n, int64_t def, int64_t *out);

// ---------------------------------------------------------------------------------------------
// Convolution as an implicit GEMM (x86/x86_linalg.c runs it; x86/x86_nn.c and x86_grad_nn.c
// describe Conv, ConvTranspose and ConvGradWeight with it)

// How the GEMM's B[k, j] is read from an image x: [N, C, H, W] (no im2col buffer: the GEMM's
// B packing gathers it, zero outside the image). A "position" (oh, ow) and a "tap" (ci, kh,
// kw) read x[n, ci, ih, iw] with ih = (oh*a0 + b0 + kh*cc0) / d0 when that division is exact and
// lands in [0, H) (the same for columns), else 0: Conv has a = stride, b = -pad, cc = dilation,
// d = 1; ConvTranspose (as a gather) a = 1, b = pad, cc = -dilation, d = stride.
typedef enum dl_cg__im2col_kind {
    DL_CG__IM2COL_TAPS_BY_POS, // k = (ci*kH + kh)*kW + kw, j = oh*OW + ow (forward, input grad)
    DL_CG__IM2COL_POS_BY_TAPS, // k = (n*OH + oh)*OW + ow, j = (ci*kH + kh)*kW + kw (weight grad)
} dl_cg__im2col_kind;

// Whether some tap of a 2-D gather does not exist: output o and tap t of dim i read input
// (o*a + b + t*cc) / d of in[i] when that is exact and inside the input, and some (o, t) reads
// outside it (padding) or between its elements (a strided ConvTranspose). Conservative: true
// when unsure.
static inline bool dl_cg__taps_absent(const int64_t in[2], const int64_t out[2], const int64_t k[2],
                                      const int64_t a[2], const int64_t b[2], const int64_t cc[2],
                                      const int64_t d[2]) {
    for (int i = 0; i < 2; i++) {
        int64_t os = out[i] > 1 ? (out[i] - 1) * a[i] : 0, ts = k[i] > 1 ? (k[i] - 1) * cc[i] : 0;
        int64_t lo = b[i] + (os < 0 ? os : 0) + (ts < 0 ? ts : 0);
        int64_t hi = b[i] + (os > 0 ? os : 0) + (ts > 0 ? ts : 0);
        if (lo < 0 || hi >= in[i] * d[i]) {
            return true;
        }
        if (d[i] > 1 && (a[i] % d[i] != 0 || b[i] % d[i] != 0 || cc[i] % d[i] != 0)) {
            return true;
        }
    }
    return false;
}

typedef struct dl_cg__im2col {
    dl_cg__im2col_kind kind;
    int64_t H, W, OH, OW, kH, kW;
    int64_t a[2], b[2], cc[2], d[2];
    int64_t cs; // element stride of the tap's channel ci in x (H*W)
    int64_t ns; // POS_BY_TAPS: element stride of k's image n in x (C*H*W)
} dl_cg__im2col;

// How a convolution's fused epilogue reads value `ext` (float32) at an element of its output
// `y` ([N, M, OH, OW]): at the element's own index (ext has y's dims), at its channel (ext's
// dims, aligned to y's last, are 1 but M against y's channels: [M, 1, 1]), or its one element.
typedef enum dl_cg__conv_ext {
    DL_CG__CONV_EXT_ELEM,
    DL_CG__CONV_EXT_CHANNEL,
    DL_CG__CONV_EXT_ONE,
    DL_CG__CONV_EXT_NONE, // none of these (passes/fusion.c never groups it)
} dl_cg__conv_ext;
dl_cg__conv_ext dl_cg__conv_ext_kind(const dl_ir_value *ext, const dl_ir_value *y);

// y[bt, i, j] = sum_k A[bt, i, k] * B[bt, k, j] (+ bias[bt, i]) with y contiguous
// [batch..., M, N], A[i, k] at a_off(bt) + i*sa_m + (k / ka_in)*sa_k + (k % ka_in)*sa_k2 and B
// gathered by `im` from b_off(bt); the batch offsets come from up to two batch dims bd with
// per-dim element strides (0: broadcast) of A, the image and the bias.
typedef struct dl_cg__conv_gemm {
    dl_ir_value *y, *a, *x, *bias; // bias: NULL when absent
    int64_t M, N, K;
    int64_t sa_m, sa_k, ka_in, sa_k2;
    int32_t br;
    int64_t bd[2], abs_[2], xbs[2], bis[2];
    dl_cg__im2col im;
    // A fusion group's members epi[1 .. n_epi) applied to each element before it is stored in
    // y (the group's output; epi[0] is the convolution), reading ext[0 .. n_ext): float32
    // values of y's dims, each read at the element's own index (a residual Add), or per channel
    // (dl_cg__conv_ext_kind). NULL: none.
    const dl_ir_node *const *epi;
    size_t n_epi;
    dl_ir_value *const *ext;
    const dl_cg__conv_ext *ext_kind; // per ext, how it is read (never DL_CG__CONV_EXT_NONE)
    size_t n_ext;
    // The group ends with a 2 x 2 / stride 2 MaxPool: y is [batch, M, OH / 2, OW / 2] (Conv's
    // TAPS_BY_POS only, im.OH x im.OW positions).
    bool pool;
} dl_cg__conv_gemm;

// The static selection rule: true when the implicit GEMM is the kernel to use for this
// problem on this target (float32, a target with >= 8 float lanes, a product large enough for
// packing to pay, an image indexable in 32 bits); else the direct kernels run.
bool dl_cg__conv_gemm_ok(cg *c, const dl_cg__conv_gemm *p);
// Emits the kernel of `p` (outer range: batch x row blocks x column groups, as MatMul's).
DL_NODISCARD dl_status dl_cg__emit_conv_gemm(cg *c, const dl_cg__conv_gemm *p);

// ---------------------------------------------------------------------------------------------
// Pooling geometry (MaxPool / AveragePool and their gradients)

// Spatial geometry of a pool over x: [N, C, xd...] with output (or dy) [N, C, yd...]: the
// node's kernel_shape, strides, dilations and (auto_pad-resolved) begin/end pads, the spatial
// sizes and their row-major strides inside one [n, c] plane.
typedef struct dl_cg__pool_geo {
    int32_t nsp; // spatial dims
    int64_t k[DL_MAX_RANK], s[DL_MAX_RANK], dil[DL_MAX_RANK];
    int64_t pb[DL_MAX_RANK], pe[DL_MAX_RANK];
    int64_t xd[DL_MAX_RANK], yd[DL_MAX_RANK];
    int64_t xs[DL_MAX_RANK], ys[DL_MAX_RANK];
    int64_t in_sp, out_sp; // elements of one x plane, one y plane
} dl_cg__pool_geo;

// Fills *g from the current node (x: rank >= 3, y of the same rank: checked by the caller).
// Returns false (after a diagnostic) on a malformed attribute.
bool dl_cg__pool_geometry(cg *c, const dl_ir_type *xt, const dl_ir_type *yt, dl_cg__pool_geo *g);

// AveragePool's divisor for the window starting at wst[i] (= o_i * s_i - pb_i) as an i64: the
// product over dims of the taps inside [0, xd) (or [-pb, xd + pe) with count_include_pad).
LLVMValueRef dl_cg__pool_count(cg *c, const dl_cg__pool_geo *g, const LLVMValueRef *wst, bool incl);

// MaxPool's running-max rule for one in-image tap v at flat position pos: take it when it is
// the first tap (arg < 0), larger, or NaN over a number; acc (f32) and arg (i64) are allocas.
void dl_cg__pool_max_update(cg *c, LLVMValueRef v, LLVMValueRef pos, LLVMValueRef acc,
                            LLVMValueRef arg);

// Vector 2-D max pooling (x86_nn.c), for float32 with a column stride of 1 or 2 on a target of
// >= 8 float lanes (dl_cg__pool_vec_ok): V = vector-width windows of a row at a time, window l
// starting at element xb + s[1] l, rows xd[1] apart; lanes >= nvalid read nothing. Returns the
// max by dl_cg__pool_max_update's rule and, in *idx when non-NULL, the selected tap (i32 lanes).
bool dl_cg__pool_vec_ok(cg *c, const dl_cg__pool_geo *g, dl_dtype dt);
LLVMValueRef dl_cg__pool_max_vec(cg *c, LLVMValueRef xp, LLVMValueRef xb, const dl_cg__pool_geo *g,
                                 unsigned V, LLVMValueRef nvalid, LLVMValueRef *idx);
// MaxPool's rule for a tap v against the running max acc (scalars or vectors): take v when it
// is larger, or NaN over a number.
LLVMValueRef dl_cg__max_takes(cg *c, LLVMValueRef v, LLVMValueRef acc);
// One output row of a vector pool kernel: its windows' first input element (xrow) and its first
// output (yrow), in the kernel's x (ptr[1] forward, ptr[2] backward) and y; V lanes.
typedef struct dl_cg__pool_row {
    const dl_cg__pool_geo *g;
    const cg_kernel *k;
    LLVMValueRef xrow, yrow;
    unsigned V;
} dl_cg__pool_row;
// body(ow0, nvalid) over a row of OW outputs in chunks of V (the last one partial).
// One pooled row of a 2 x 2 / stride 2 max pooling by MaxPool's rule (dl_cg__max_takes, taps in
// row-major order): yp[yo + pw] = the max of the float32 window src[xb + 2 pw + {0, 1}] and
// src[xb + rs + 2 pw + {0, 1}] for pw < PW (yp float32). Vectors of the target's width (>= 8),
// else one window at a time.
void dl_cg__pool2_row(cg *c, LLVMValueRef src, LLVMValueRef xb, int64_t rs, LLVMValueRef yp,
                      LLVMValueRef yo, int64_t PW);
typedef void (*dl_cg__pool_chunk_fn)(cg *c, void *ctx, LLVMValueRef ow0, LLVMValueRef nvalid);
void dl_cg__pool_row_chunks(cg *c, int64_t OW, unsigned V, dl_cg__pool_chunk_fn body, void *ctx);

#endif
