// codegen/x86/x86_conv.h — the convolution geometry shared by the direct kernel (x86_nn.c) and
// the Winograd kernel (x86_winograd.c). Private to codegen/x86.
#ifndef CG_X86_CONV_H
#define CG_X86_CONV_H

#include "cg_geometry.h"
#include "cg_internal.h"

#define CONV_MAX_EPI 64 // nodes of a fused group with the convolution
#define CONV_MAX_EXT 11 // values its members read besides the group's (passes/fusion.c)

// Geometry of a 2-D (de)convolution as a gather: output position o of spatial dim i (0 = H,
// 1 = W) and tap k read input position (o*a + b + k*cc) / d when that is exact and in range.
typedef struct conv_geo {
    int64_t N, C, H, W, M, OH, OW, G, Cg, Mg, kH, kW;
    int64_t a[2], b[2], cc[2], d[2];
    int64_t wsg, wsm, wsc; // weight strides of the group, local out channel, local in channel
    dl_dtype dt;           // of x, w, b and y (the shape pass makes them equal)
    bool has_bias;
    // Conv: a tap in the padding multiplies a zero (ONNX's zero padding: an infinite weight
    // there gives NaN, as in the evaluator and the implicit GEMM), so no tap row is skipped.
    // ConvTranspose: taps between or past the input's elements do not exist and are skipped.
    bool pad_zero;
    // Conv heading a fusion group (dl_cg__lower_conv_fused): members epi[1 .. n_epi) applied to
    // each element before it is stored in y, the group's output. epi NULL: y is the node's.
    const dl_ir_node *const *epi;
    size_t n_epi;
    dl_ir_value *y;
    // Values the members read besides the group's: float32 of y's dims, each read at the
    // stored element's own index (a residual Add), or per channel (kind[e]: a scale); the
    // kernel's arguments after the bias.
    dl_ir_value *ext[CONV_MAX_EXT];
    dl_cg__conv_ext kind[CONV_MAX_EXT];
    size_t n_ext;
    // The group ends with a 2 x 2 / stride 2 MaxPool (passes/fusion.c, is_pool_tail): y is
    // [N, M, OH / 2, OW / 2], the max of each window of the values the convolution would store.
    bool pool;
} conv_geo;

// Per-output-row state of the conv kernel.
typedef struct conv_row {
    const conv_geo *g;
    cg_kernel *k;
    LLVMValueRef oh, xbase, ybase, wbase, bbase; // xbase: x[n, g*Cg], ybase: y[n, g*Mg, oh]
    // Pooled (g->pool): the tile stores go to ybuf[j][dr][0 .. OW) (j: the channel in the
    // block, dr: the row of the pooling window) instead of y.
    LLVMValueRef ybuf;
    int64_t dr;
} conv_row;

// The values of channel mj (local to the group) of a tile before they are stored: the sums v
// (tw lanes), plus the bias, through the fused members; yi: y's index of lane 0 (ext values are
// read there, nl lanes of them), NULL when the tile is pooled (no ext value is then read).
LLVMValueRef dl_cg__conv_epi(cg *c, const conv_row *r, LLVMValueRef mj, LLVMValueRef v, unsigned tw,
                             LLVMValueRef yi, unsigned nl);

// Whether the Winograd kernel takes the convolution (x86_winograd.c).
bool dl_cg__wino_ok(cg *c, const conv_geo *g);
// The Winograd kernels of g over vals (emit_conv's: y, x, w, b?, then the epilogue's values).
DL_NODISCARD dl_status dl_cg__emit_wino(cg *c, dl_ir_value *const *vals, size_t n_vals,
                                        const conv_geo *g);

// The weight gradient dw: [M, C, 3, 3] of a convolution of geometry g (Conv's, one group)
// from dy: [N, M, OH, OW] and x: [N, C, H, W] as Winograd's F(3 x 3, 2 x 2), where
// dl_cg__wino_grad_ok takes it (x86_winograd.c).
bool dl_cg__wino_grad_ok(cg *c, const conv_geo *g);
DL_NODISCARD dl_status dl_cg__emit_wino_grad(cg *c, dl_ir_value *dw, dl_ir_value *dy,
                                             dl_ir_value *x, const conv_geo *g);

#endif
