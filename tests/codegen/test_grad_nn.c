// tests/codegen/test_grad_nn.c — compiled ConvGradWeight, MaxPoolGrad, AveragePoolGrad and
// BatchNormalizationGrad against the reference evaluator: strides 1 and 2, pads, dilations,
// groups, auto_pad, ceil_mode, count_include_pad, widths below / at / above the vector tile with
// remainders, 1-D, 2-D and 3-D pools, the optional BN outputs. The evaluator's own correctness
// (finite differences of the forward ops) is in tests/eval_grad_nn/.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <math.h>
#include <stdio.h>

// One node `node` over `decls`, output `outs`, checked with `tol`.
static bool check1(const char *decls, const char *node, const char *outs, cg_tol tol) {
    char text[2048];
    snprintf(text, sizeof text, "model m\n%s%s\n%s", decls, node, outs);
    return cg_check(text, tol);
}

#define CHECK1(decls, node, tol) DL_CHECK(check1((decls), (node), "output y\n", (tol)))

// dy has the Conv output shape [n, m, oh, ow] for x [n, c, h, w]. The absolute tolerance comes
// from the sum's length: K = n*oh*ow products of two inputs uniform in [-2, 2), zero-mean with
// sigma = 4/3, so a running sum drifts like a random walk (~sigma sqrt(K)) and each of K roundings
// errs by up to u times it (u = 2^-24): one by one, the error's spread is ~0.5 u K sigma; we allow
// 4 u K sigma (blocked and lane-wise orders err less), at least CG_TOL_REDUCE's. The terms cancel
// (values ~sqrt(K) from terms ~1), so a fixed atol would pass or fail by the kernel's order of
// the sum (which differs between AVX2 and AVX-512 lanes), not by its correctness; a dropped or
// misplaced term (~1) still fails.
// `factor` u K sigma: 4 for the direct sums.
static bool cgw_tol(int n, int c, int h, int w, int m, int oh, int ow, const char *attrs,
                    double factor) {
    char d[512], node[512];
    snprintf(d, sizeof d, "input dy : float[%d, %d, %d, %d]\ninput x : float[%d, %d, %d, %d]\n", n,
             m, oh, ow, n, c, h, w);
    snprintf(node, sizeof node, "y = ConvGradWeight <%s> (dy, x)", attrs);
    cg_tol tol = CG_TOL_REDUCE;
    double k_atol = factor * 0x1p-24 * n * oh * ow * 4.0 / 3.0;
    tol.atol = k_atol > tol.atol ? k_atol : tol.atol;
    return check1(d, node, "output y\n", tol);
}

static bool cgw(int n, int c, int h, int w, int m, int oh, int ow, const char *attrs) {
    return cgw_tol(n, c, h, w, m, oh, ow, attrs, 4);
}

DL_TEST(grad_nn_conv_weight_basic) {
    // 3x3, no padding: 9x21 -> 7x19 (interior 19 wide: two 8-lane tiles + remainder 3)
    DL_CHECK(cgw(2, 3, 9, 21, 5, 7, 19, "kernel_shape = [3, 3]"));
    DL_CHECK(cgw(2, 3, 9, 21, 5, 9, 21, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 3, 9, 21, 5, 9, 21, "kernel_shape = [3, 3], auto_pad = \"SAME_UPPER\""));
    DL_CHECK(cgw(1, 2, 8, 16, 3, 8, 16, "kernel_shape = [2, 2], auto_pad = \"SAME_UPPER\""));
    DL_CHECK(cgw(1, 2, 8, 16, 3, 8, 16, "kernel_shape = [2, 4], auto_pad = \"SAME_LOWER\""));
    // strides 2 (wide strided loads), asymmetric pads
    DL_CHECK(cgw(2, 3, 11, 29, 4, 6, 15,
                 "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 3, 11, 29, 4, 5, 15,
                 "kernel_shape = [3, 3], strides = [2, 2], pads = [0, 1, "
                 "0, 1]"));
    DL_CHECK(cgw(1, 2, 10, 40, 3, 5, 8,
                 "kernel_shape = [3, 5], strides = [2, 5], pads = [1, 2, 0, "
                 "0]")); // stride 5: lane-by-lane loads
    // dilations
    DL_CHECK(cgw(2, 2, 12, 30, 3, 10, 26,
                 "kernel_shape = [3, 3], dilations = [2, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(1, 3, 9, 17, 2, 9, 17,
                 "kernel_shape = [3, 3], dilations = [2, 2], auto_pad = \"SAME_UPPER\""));
    // 1x1 kernels
    DL_CHECK(cgw(2, 8, 6, 17, 6, 6, 17, "kernel_shape = [1, 1]"));
    DL_CHECK(cgw(1, 4, 7, 7, 5, 4, 4, "kernel_shape = [1, 1], strides = [2, 2]"));
}

DL_TEST(grad_nn_conv_weight_shapes) {
    // widths 3 (scalar only), 5 (4-lane tile + remainder), 8 (one tile), 37
    static const int widths[] = {3, 5, 8, 10, 37};
    for (size_t i = 0; i < DL_ARRAY_LEN(widths); i++) {
        int w = widths[i];
        DL_CHECK(cgw(2, 3, 5, w, 4, 5, w, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
        // 3 outputs: the direct kernel (4 take the lanes kernel where a vector of positions fits)
        DL_CHECK(cgw(2, 3, 5, w, 3, 5, w, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
        if (w >= 3) {
            DL_CHECK(cgw(1, 2, 6, w, 3, 4, w - 2, "kernel_shape = [3, 3]"));
        }
    }
    // groups: 2 groups (C 6 -> 3 per group, M 8 -> 4 per group)
    DL_CHECK(cgw(2, 6, 8, 19, 8, 8, 19, "kernel_shape = [3, 3], group = 2, pads = [1, 1, 1, 1]"));
    // depthwise, strides 2
    DL_CHECK(cgw(2, 7, 10, 23, 7, 5, 12,
                 "kernel_shape = [3, 3], group = 7, pads = [1, 1, 1, 1], strides = [2, 2]"));
    // channel multiplier 2 with a 5x5 SAME kernel (IB = 2 tap rows per block)
    DL_CHECK(cgw(1, 4, 9, 18, 8, 9, 18,
                 "kernel_shape = [5, 5], group = 4, auto_pad = "
                 "\"SAME_UPPER\""));
    // 7x7 stride 2 pad 3 (ResNet stem; 7 taps per row: 1 tap row per block)
    DL_CHECK(cgw(1, 3, 20, 20, 4, 10, 10,
                 "kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3]"));
    // kernel wider than the interior: everything on the scalar path
    DL_CHECK(cgw(1, 2, 4, 6, 3, 4, 8, "kernel_shape = [2, 5], pads = [1, 3, 0, 3]"));
    // odd sizes
    DL_CHECK(cgw(3, 5, 11, 29, 17, 10, 29,
                 "kernel_shape = [3, 2], dilations = [2, 1], pads = [2, 0, 1, 1]"));
    // MNIST-like first layer (one input channel)
    DL_CHECK(cgw(4, 1, 28, 28, 8, 28, 28, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
}

DL_TEST(grad_nn_conv_weight_implicit_gemm) {
    // Shapes the implicit GEMM takes (>= 8 output channels per group, >= 16 taps x channels):
    // the CNN benchmark's second layer (64 rows = 5 full tiles + 4; 288 columns = 2 full column
    // groups + 32; K = 2 * 196 positions over 4 KC blocks), strides 2, groups, dilations,
    // asymmetric pads, a ragged column panel.
    DL_CHECK(cgw(2, 32, 14, 14, 64, 14, 14, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 8, 11, 13, 12, 6, 7,
                 "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 16, 9, 10, 24, 9, 10, "kernel_shape = [3, 3], group = 2, pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 6, 12, 15, 10, 12, 15,
                 "kernel_shape = [3, 3], dilations = [2, 2], pads = [2, 2, 2, 2]"));
    DL_CHECK(cgw(3, 7, 10, 9, 9, 10, 9, "kernel_shape = [3, 2], pads = [1, 0, 1, 1]"));
    // "Same" rows (OW == W) pack B by contiguous loads: 49 positions per image, so vectors of
    // positions cross into the next image at changing lanes, over 7 KC blocks and a short one;
    // a 1-row image (every vector crosses several images: the gathered pack's path).
    DL_CHECK(cgw(19, 16, 7, 7, 16, 7, 7, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(40, 8, 1, 5, 8, 1, 5, "kernel_shape = [1, 3], pads = [0, 1, 0, 1]"));
}

// cgw with the Winograd weight gradient's tolerance: its transforms add up to 4 inputs and 4
// output gradients (factors 1 and 1/2 back to the weights) before the products, which grows the
// error bound about 4x over the direct sum's (tests/codegen/test_nn.c's forward cases).
static bool cgw_wino(int n, int c, int h, int w, int m, int oh, int ow, const char *attrs) {
    return cgw_tol(n, c, h, w, m, oh, ow, attrs, 16);
}

// Shapes the Winograd weight gradient takes on AVX2 (3 x 3, stride 1, one group, input channels
// a multiple of 2 vectors, the forward's tile rules: docs/codegen.md): the CNN's second layer
// over 9 images (8 chunks of 1-2 images), odd output sizes, no padding, asymmetric pads, 10
// outputs (a block of 6 and a tail of 4), one image, rows of two tile vectors split into blocks
// (32 input channels: AVX-512's too), and that it ran (3 kernels: the forward's Winograd 2).
DL_TEST(grad_nn_conv_weight_winograd) {
    const char *pad1 = "kernel_shape = [3, 3], pads = [1, 1, 1, 1]";
    DL_CHECK(cgw_wino(9, 32, 14, 14, 64, 14, 14, pad1));
    DL_CHECK(cgw_wino(3, 16, 13, 15, 10, 13, 15, pad1));
    DL_CHECK(cgw_wino(2, 16, 16, 16, 12, 14, 14, "kernel_shape = [3, 3]"));
    DL_CHECK(cgw_wino(2, 16, 20, 16, 9, 19, 16, "kernel_shape = [3, 3], pads = [0, 2, 1, 0]"));
    DL_CHECK(cgw_wino(1, 16, 14, 14, 8, 14, 14, pad1));
    DL_CHECK(cgw_wino(2, 32, 28, 28, 20, 28, 28, pad1));
    DL_CHECK(cg_infer_kernels("model m\ninput dy : float[2, 64, 14, 14]\n"
                              "input x : float[2, 32, 14, 14]\n"
                              "y = ConvGradWeight <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> "
                              "(dy, x)\noutput y\n") == 2);
}

// The Winograd weight gradient's shape for the special values below: 4 images of 16 -> 10
// channels, 13 x 15, x in [-1.5, 1.5], dy = ((j * 7) % 11 + dy_lo) / dy_div.
#define WGV_TEXT                                                                                   \
    "model m\ninput dy : float[4, 10, 13, 15]\ninput x : float[4, 16, 13, 15]\n"                   \
    "y = ConvGradWeight <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (dy, x)\noutput y\n"
#define WGV_XN (4 * 16 * 13 * 15)
#define WGV_YN (4 * 10 * 13 * 15)

static void wgv_fill(double *x, double *dy, int dy_lo, double dy_div) {
    for (int64_t j = 0; j < WGV_XN; j++) {
        x[j] = (double)((j * 5) % 13 - 6) / 4.0;
    }
    for (int64_t j = 0; j < WGV_YN; j++) {
        dy[j] = (double)((j * 7) % 11 + dy_lo) / dy_div;
    }
}

static bool wgv_check(const double *x, const double *dy) {
    const cg_data given[] = {{"x", x, WGV_XN}, {"dy", dy, WGV_YN}};
    cg_tol tol = CG_TOL_REDUCE;
    tol.atol = 16 * 0x1p-24 * 4 * 13 * 15 * 4.0 / 3.0;
    return cg_check_io(WGV_TEXT, tol, NULL, 0, given, 2, NULL);
}

// An infinite or NaN input or output gradient: the chunk of images holding it sums its part of
// the gradient by the direct definition, the others by Winograd, and the outputs match the
// evaluator's (Inf where it is Inf, NaN where NaN).
DL_TEST(grad_nn_conv_weight_winograd_nonfinite) {
    static double x[WGV_XN], dy[WGV_YN];
    wgv_fill(x, dy, -5, 8.0);
    x[WGV_XN / 4 + 100] = INFINITY; // image 1
    dy[WGV_YN - 3] = NAN;           // image 3
    DL_CHECK(wgv_check(x, dy));
}

// Finite values so large that Winograd's transforms would overflow: a 2 x 2 patch of x at
// 1.5e38 in image 1 (a tile's transform adds up to 4 such values; the direct sums at most 4,
// times dy below 0.05): that chunk of images sums its part by the direct definition. dy is
// positive: no cancellation (test_nn.c).
DL_TEST(grad_nn_conv_weight_winograd_large_values) {
    static double x[WGV_XN], dy[WGV_YN];
    wgv_fill(x, dy, 1, 256.0);
    // image 1, channel 2, rows 6-7, columns 6-7: one tile's transform adds all four
    int64_t at = (16 + 2) * 13 * 15 + 6 * 15 + 6;
    x[at] = x[at + 1] = x[at + 15] = x[at + 16] = 1.5e38;
    DL_CHECK(wgv_check(x, dy));
}

// A non-finite output gradient next to the padding: the evaluator leaves the taps in the padding
// out, so only the taps that read the image see it. The implicit GEMM (strided) and the
// lanes-over-positions kernel multiply the zeros they read for the padding by dy: with a
// non-finite dy the implicit GEMM hands the gradient to the direct kernel, and the lanes kernel
// sums the blocks it reached by the definition. The finite control through the same shapes, and
// the direct kernel itself.
DL_TEST(grad_nn_conv_weight_nonfinite_dy) {
    static const struct {
        int n, c, h, w, m, oh, ow;
        const char *attrs;
    } s[] = {
        {2, 8, 11, 13, 16, 6, 7, "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"},
        {2, 4, 9, 9, 8, 5, 5, "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"},
        {2, 1, 7, 11, 13, 7, 11, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"},
        {1, 1, 64, 64, 4, 64, 64, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"},
    };
    static double x[2 * 8 * 64 * 64], dy[2 * 16 * 64 * 64];
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model m\ninput dy : float[%d, %d, %d, %d]\ninput x : float[%d, %d, %d, %d]\n"
                 "y = ConvGradWeight <%s> (dy, x)\noutput y\n",
                 s[i].n, s[i].m, s[i].oh, s[i].ow, s[i].n, s[i].c, s[i].h, s[i].w, s[i].attrs);
        int64_t xn = (int64_t)s[i].n * s[i].c * s[i].h * s[i].w;
        int64_t yn = (int64_t)s[i].n * s[i].m * s[i].oh * s[i].ow;
        for (int nf = 0; nf < 2; nf++) {
            for (int64_t j = 0; j < xn; j++) {
                x[j] = (double)((j * 5) % 13 - 6) / 4.0;
            }
            for (int64_t j = 0; j < yn; j++) {
                dy[j] = (double)((j * 7) % 11 - 5) / 8.0;
            }
            if (nf) {
                dy[0] = INFINITY; // image 0, the first channel's top-left output
                dy[yn - 1] = NAN; // the last image's last channel, bottom-right
            }
            const cg_data given[] = {{"x", x, xn}, {"dy", dy, yn}};
            DL_CHECK(cg_check_io(text, CG_TOL_REDUCE, NULL, 0, given, 2, NULL));
        }
        // the finite check, the guarded implicit GEMM and the direct kernel; the lanes kernel
        // (which checks its own sums) and the direct kernel alone
        DL_CHECK(cg_infer_kernels(text) == (i < 2 ? 3 : 1));
    }
}

DL_TEST(grad_nn_conv_weight_lanes) {
    // Shapes the implicit GEMM leaves (one input channel per group, or fewer than 8 outputs per
    // group) that the lanes-over-positions kernel takes (stride 1, OW == W, 2 to 4 taps wide):
    // the CNN's first layer, output blocks with a remainder row, vectors of positions with a
    // partial last one (5 x 13 = 65), channel blocks with a remainder (31 inputs), 2- and
    // 4-wide kernels, asymmetric pads with OH = H - 1, groups of one input channel, one image.
    DL_CHECK(cgw(3, 1, 28, 28, 32, 28, 28, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 1, 5, 13, 7, 5, 13, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 31, 6, 9, 5, 6, 9, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(2, 1, 7, 11, 13, 7, 11, "kernel_shape = [2, 2], auto_pad = \"SAME_UPPER\""));
    DL_CHECK(cgw(2, 1, 7, 11, 7, 7, 11, "kernel_shape = [3, 4], auto_pad = \"SAME_LOWER\""));
    DL_CHECK(cgw(2, 1, 9, 10, 9, 8, 10, "kernel_shape = [3, 3], pads = [1, 1, 0, 1]"));
    DL_CHECK(cgw(2, 3, 8, 12, 12, 8, 12, "kernel_shape = [3, 3], group = 3, pads = [1, 1, 1, 1]"));
    // groups of several output blocks and a remainder (9 outputs a group)
    DL_CHECK(cgw(2, 2, 6, 9, 18, 6, 9, "kernel_shape = [3, 3], group = 2, pads = [1, 1, 1, 1]"));
    // a mask table past its budget (64 x 64 positions): the direct kernel
    DL_CHECK(cgw(1, 1, 64, 64, 4, 64, 64, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(cgw(1, 2, 4, 4, 4, 4, 4, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    // a kernel too tall for one input channel's lane sums (32 KiB): the direct kernel
    DL_CHECK(cgw(1, 1, 90, 9, 4, 1, 9, "kernel_shape = [90, 3], pads = [0, 1, 0, 1]"));
}

DL_TEST(grad_nn_conv_weight_lowp) {
    DL_CHECK(check1("input dy : float16[1, 4, 6, 20]\ninput x : float16[1, 3, 6, 20]\n",
                    "y = ConvGradWeight <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (dy, x)",
                    "output y\n", ((cg_tol){5e-2, 2e-2, 0, 0})));
    DL_CHECK(check1("input dy : bfloat16[1, 4, 6, 20]\ninput x : bfloat16[1, 3, 6, 20]\n",
                    "y = ConvGradWeight <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (dy, x)",
                    "output y\n", ((cg_tol){2e-1, 2e-2, 0, 0})));
}

// A pool gradient: dy [n, c, o...], x [n, c, d...] given as shape texts.
static bool pg(const char *op, const char *dys, const char *xs, const char *attrs) {
    char d[512], node[512];
    snprintf(d, sizeof d, "input dy : float%s\ninput x : float%s\n", dys, xs);
    snprintf(node, sizeof node, "y = %s <%s> (dy, x)", op, attrs);
    return check1(d, node, "output y\n", CG_TOL_ARITH);
}

DL_TEST(grad_nn_max_pool) {
    const char *mp = "MaxPoolGrad";
    DL_CHECK(pg(mp, "[2, 3, 4, 5]", "[2, 3, 8, 10]", "kernel_shape = [2, 2], strides = [2, 2]"));
    // non-overlapping windows that leave a bottom row / right columns uncovered (the fast path
    // writes their zeros), and a non-square window
    DL_CHECK(pg(mp, "[2, 3, 4, 5]", "[2, 3, 9, 11]", "kernel_shape = [2, 2], strides = [2, 2]"));
    DL_CHECK(pg(mp, "[1, 2, 3, 3]", "[1, 2, 10, 7]", "kernel_shape = [3, 2], strides = [3, 2]"));
    // NaN inputs: the NaN tap wins its window, as in the forward
    DL_CHECK(
        check1("input dy : float[2, 3, 4, 5]\ninput x : float[2, 3, 9, 11]\n",
               "t = Log (x)\ny = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, t)",
               "output y\n", CG_TOL_ARITH));
    // the vector path (column windows of 1 or 2, V windows per chunk): rows of several chunks
    // and a masked last one, with uncovered right columns and bottom rows, NaN winning lanes
    DL_CHECK(pg(mp, "[2, 3, 4, 35]", "[2, 3, 9, 71]", "kernel_shape = [2, 2], strides = [2, 2]"));
    DL_CHECK(pg(mp, "[1, 2, 3, 40]", "[1, 2, 10, 40]", "kernel_shape = [3, 1], strides = [3, 1]"));
    DL_CHECK(
        check1("input dy : float[1, 3, 3, 20]\ninput x : float[1, 3, 6, 41]\n",
               "t = Log (x)\ny = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, t)",
               "output y\n", CG_TOL_ARITH));
    // overlapping windows (an element can win several windows)
    DL_CHECK(pg(mp, "[2, 3, 7, 9]", "[2, 3, 9, 11]", "kernel_shape = [3, 3]"));
    DL_CHECK(pg(mp, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(pg(mp, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_UPPER\""));
    // ceil_mode: 8 -> ceil((8 - 3) / 2) + 1 = 4, 10 -> 5 (the last window overhangs the end)
    DL_CHECK(pg(mp, "[1, 2, 4, 5]", "[1, 2, 8, 10]",
                "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1"));
    DL_CHECK(pg(mp, "[1, 2, 3, 4]", "[1, 2, 9, 11]",
                "kernel_shape = [2, 3], strides = [3, 3], dilations = [2, 1], ceil_mode = 1"));
    // 1-D and 3-D
    DL_CHECK(pg(mp, "[2, 3, 6]", "[2, 3, 13]", "kernel_shape = [3], strides = [2], pads = [1, 0]"));
    DL_CHECK(pg(mp, "[1, 2, 2, 3, 3]", "[1, 2, 4, 6, 7]",
                "kernel_shape = [2, 2, 3], strides = [2, 2, 2], pads = [0, 0, 0, 0, 0, 1]"));
}

DL_TEST(grad_nn_average_pool) {
    const char *ap = "AveragePoolGrad";
    DL_CHECK(pg(ap, "[2, 3, 4, 5]", "[2, 3, 8, 10]", "kernel_shape = [2, 2], strides = [2, 2]"));
    DL_CHECK(pg(ap, "[2, 3, 7, 9]", "[2, 3, 9, 11]", "kernel_shape = [3, 3]"));
    DL_CHECK(pg(ap, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(pg(ap, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
                "count_include_pad = 1"));
    DL_CHECK(pg(ap, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_UPPER\""));
    DL_CHECK(pg(ap, "[1, 2, 5, 6]", "[1, 2, 9, 11]",
                "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_LOWER\", "
                "count_include_pad = 1"));
    // ceil_mode with and without count_include_pad (clipped last windows)
    DL_CHECK(pg(ap, "[1, 2, 4, 5]", "[1, 2, 8, 10]",
                "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1"));
    DL_CHECK(pg(ap, "[1, 2, 5, 6]", "[1, 2, 8, 10]",
                "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1, "
                "count_include_pad = 1"));
    DL_CHECK(pg(ap, "[2, 3, 6]", "[2, 3, 13]",
                "kernel_shape = [3], strides = [2], pads = [1, 0], count_include_pad = 1"));
    DL_CHECK(pg(ap, "[1, 2, 2, 3, 3]", "[1, 2, 4, 6, 7]",
                "kernel_shape = [2, 2, 3], strides = [2, 2, 2], pads = [0, 0, 0, 0, 0, 1]"));
}

DL_TEST(grad_nn_batch_norm) {
    static const char *const shapes[] = {"[4, 3, 5, 7]", "[2, 5]", "[3, 2, 37]", "[2, 3, 4, 5, 6]",
                                         "[1, 4, 1, 1]"};
    for (size_t i = 0; i < DL_ARRAY_LEN(shapes); i++) {
        char d[512];
        const char *s = shapes[i];
        int ch = s[4] - '0'; // every shape above has a one-digit C
        snprintf(d, sizeof d, "input dy : float%s\ninput x : float%s\ninput sc : float[%d]\n", s, s,
                 ch);
        DL_CHECK(check1(d, "y = BatchNormalizationGrad (dy, x, sc)", "output y\n", CG_TOL_MATH));
        DL_CHECK(check1(d, "y, ds, db = BatchNormalizationGrad <epsilon = 0.01> (dy, x, sc)",
                        "output y\noutput ds\noutput db\n", CG_TOL_MATH));
        DL_CHECK(check1(d, "y, ds = BatchNormalizationGrad (dy, x, sc)", "output y\noutput ds\n",
                        CG_TOL_MATH));
    }
}
