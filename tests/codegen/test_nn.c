// tests/codegen/test_nn.c — compiled Conv, ConvTranspose, pools and norms against the reference
// evaluator: pads, strides, dilations, groups, auto_pad, edge tiles (widths and channel counts
// that are not multiples of the vector tile or the channel block), optional inputs and outputs.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

// One node `y = <op> (<args>)` over the given declarations, checked with `tol`.
static bool check1(const char *decls, const char *node, const char *outs, cg_tol tol) {
    char text[2048];
    snprintf(text, sizeof text, "model m\n%s%s\n%s", decls, node, outs);
    return cg_check(text, tol);
}

#define CHECK1(decls, node, tol) DL_CHECK(check1((decls), (node), "output y\n", (tol)))

DL_TEST(nn_conv_basic) {
    const char *d = "input x : float[2, 3, 9, 21]\ninput w : float[5, 3, 3, 3]\n"
                    "input b : float[5]\n";
    CHECK1(d, "y = Conv (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv (x, w)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <pads = [0, 2, 1, 0], strides = [2, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <strides = [2, 3], pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <dilations = [2, 3], pads = [2, 1, 0, 3]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <auto_pad = \"SAME_UPPER\"> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <auto_pad = \"SAME_LOWER\", strides = [2, 2]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = Conv <auto_pad = \"VALID\", strides = [1, 2]> (x, w)", CG_TOL_REDUCE);
}

DL_TEST(nn_conv_channels_groups) {
    // 11 output channels: not a multiple of the channel block (4 or 8); widths 3 (scalar
    // only), 7 (4-lane tiles), 13 (8-lane tiles + overlap), 37 (16-lane tiles + overlap).
    static const int widths[] = {3, 7, 13, 37};
    for (size_t i = 0; i < DL_ARRAY_LEN(widths); i++) {
        char d[512];
        snprintf(d, sizeof d,
                 "input x : float[1, 6, 5, %d]\ninput w : float[11, 6, 3, 3]\n"
                 "input b : float[11]\n",
                 widths[i]);
        CHECK1(d, "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
        CHECK1(d, "y = Conv (x, w, b)", CG_TOL_REDUCE);
        CHECK1(d, "y = Conv <strides = [1, 2], pads = [1, 2, 1, 2]> (x, w, b)", CG_TOL_REDUCE);
    }
    // groups: 2 groups of 3 -> 4 channels each
    CHECK1("input x : float[2, 6, 8, 19]\ninput w : float[8, 3, 3, 3]\ninput b : float[8]\n",
           "y = Conv <group = 2, pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    // depthwise
    CHECK1("input x : float[2, 7, 10, 23]\ninput w : float[7, 1, 3, 3]\ninput b : float[7]\n",
           "y = Conv <group = 7, pads = [1, 1, 1, 1], strides = [2, 2]> (x, w, b)", CG_TOL_REDUCE);
    // depthwise with a channel multiplier of 2
    CHECK1("input x : float[1, 4, 9, 18]\ninput w : float[8, 1, 5, 5]\n",
           "y = Conv <group = 4, auto_pad = \"SAME_UPPER\"> (x, w)", CG_TOL_REDUCE);
    // 1x1 kernels, many channels
    CHECK1("input x : float[2, 32, 6, 17]\ninput w : float[24, 32, 1, 1]\ninput b : float[24]\n",
           "y = Conv (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 16, 7, 7]\ninput w : float[9, 16, 1, 1]\n",
           "y = Conv <strides = [2, 2]> (x, w)", CG_TOL_REDUCE);
    // kernel wider than the interior: everything on the masked path
    CHECK1("input x : float[1, 2, 4, 6]\ninput w : float[3, 2, 2, 5]\n",
           "y = Conv <pads = [1, 3, 0, 3]> (x, w)", CG_TOL_REDUCE);
    // odd sizes, big channel count with a tail of 1
    CHECK1("input x : float[3, 5, 11, 29]\ninput w : float[17, 5, 3, 2]\ninput b : float[17]\n",
           "y = Conv <dilations = [2, 1], pads = [2, 0, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
}

DL_TEST(nn_conv_padded_rows) {
    // The direct kernel's padded tap rows (float32, unit column stride): the CNN benchmark's
    // first layer (1 channel, 28 columns: a tile of 16 and a masked one of 12) alone and with
    // its fused ReLU, a row narrower than a tile, dilated columns reaching past both pads, and
    // ConvTranspose with stride 1 (its taps step left).
    CHECK1("input x : float[3, 1, 28, 28]\ninput w : float[32, 1, 3, 3]\ninput b : float[32]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 1, 28, 28]\ninput w : float[32, 1, 3, 3]\ninput b : float[32]\n",
           "v = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ny = Relu (v)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 1, 9, 5]\ninput w : float[7, 1, 3, 3]\n",
           "y = Conv <pads = [1, 2, 1, 2]> (x, w)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 2, 12, 40]\ninput w : float[3, 2, 3, 3]\ninput b : float[3]\n",
           "y = Conv <dilations = [1, 4], pads = [1, 3, 1, 5]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 1, 10, 19]\ninput w : float[1, 6, 3, 4]\n",
           "y = ConvTranspose <pads = [1, 1, 1, 2]> (x, w)", CG_TOL_REDUCE);
}

// A tap in the padding multiplies a zero: an infinite or NaN weight makes the outputs whose
// taps reach the padding NaN, in every kernel as in the evaluator (ONNX's zero padding; the
// evaluator skipped such taps before, and so did the direct kernel's tiles for tap rows in the
// padding): the direct kernel's padded rows (one input channel), the implicit GEMM, a small
// direct convolution, a grouped one, and strided columns (the direct kernel's tiles, no padded
// rows: conv_tile; NVPTX's for every model).
DL_TEST(nn_conv_padding_nonfinite_weights) {
    static const char *const models[] = {
        "model m\ninput x : float[2, 1, 9, 29]\ninput w : float[5, 1, 3, 3]\n"
        "y = Conv <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
        "model m\ninput x : float[2, 8, 8, 8]\ninput w : float[16, 8, 3, 3]\n"
        "y = Conv <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
        "model m\ninput x : float[1, 3, 6, 6]\ninput w : float[4, 3, 3, 3]\n"
        "y = Conv <pads = [2, 1, 0, 1], strides = [2, 1]> (x, w)\noutput y\n",
        "model m\ninput x : float[1, 4, 5, 7]\ninput w : float[4, 2, 3, 3]\n"
        "y = Conv <pads = [1, 1, 1, 1], group = 2> (x, w)\noutput y\n",
        "model m\ninput x : float[1, 3, 9, 9]\ninput w : float[4, 3, 3, 3]\n"
        "y = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (x, w)\noutput y\n",
    };
    static const int64_t wn[] = {5 * 9, 16 * 8 * 9, 4 * 3 * 9, 4 * 2 * 9, 4 * 3 * 9};
    double w[16 * 8 * 9];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        for (int64_t j = 0; j < wn[i]; j++) {
            w[j] = (double)((j * 7) % 11 - 5) / 8.0;
        }
        w[0] = INFINITY;    // the first channel's top-left tap
        w[wn[i] - 1] = NAN; // the last channel's bottom-right tap
        const cg_data given[] = {{"w", w, wn[i]}};
        DL_CHECK(cg_check_io(models[i], CG_TOL_REDUCE, NULL, 0, given, 1, NULL));
    }
}

// ConvTranspose sums only the taps that exist (the evaluator's scatter form): an infinite or
// NaN weight reaches only the outputs one of its taps lands on, every other output stays a
// number. The implicit GEMM multiplies the zeros it gathers for absent taps by the weights, so
// with a non-finite weight it hands the convolution to the direct kernel: strided, with a bias
// and a Relu after it (a kernel of its own: ConvTranspose heads no fusion group), padded and
// with output padding, grouped, and stride 1 with pads below the kernel's reach (its edge taps
// lie past the input); and the finite control through the same shapes.
DL_TEST(nn_conv_transpose_nonfinite_weights) {
    static const char *const models[] = {
        "model m\ninput x : float[2, 8, 5, 7]\ninput w : float[8, 16, 3, 3]\n"
        "y = ConvTranspose <strides = [2, 2]> (x, w)\noutput y\n",
        "model m\ninput x : float[2, 8, 5, 7]\ninput w : float[8, 16, 3, 3]\n"
        "input b : float[16]\n"
        "v = ConvTranspose <strides = [2, 2], pads = [1, 0, 1, 1]> (x, w, b)\ny = Relu (v)\n"
        "output y\n",
        "model m\ninput x : float[1, 8, 6, 6]\ninput w : float[8, 12, 2, 3]\n"
        "y = ConvTranspose <strides = [2, 3], output_padding = [1, 2]> (x, w)\noutput y\n",
        "model m\ninput x : float[1, 16, 5, 5]\ninput w : float[16, 8, 3, 3]\n"
        "y = ConvTranspose <strides = [2, 2], group = 2> (x, w)\noutput y\n",
        "model m\ninput x : float[2, 8, 9, 9]\ninput w : float[8, 16, 3, 3]\n"
        "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
    };
    static const int64_t wn[] = {8 * 16 * 9, 8 * 16 * 9, 8 * 12 * 6, 16 * 8 * 9, 8 * 16 * 9};
    double w[8 * 16 * 9];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        for (int nf = 0; nf < 2; nf++) {
            for (int64_t j = 0; j < wn[i]; j++) {
                w[j] = (double)((j * 7) % 11 - 5) / 8.0;
            }
            if (nf) {
                w[0] = INFINITY;    // the first output channel's top-left tap
                w[wn[i] - 1] = NAN; // the last one's bottom-right tap
            }
            const cg_data given[] = {{"w", w, wn[i]}};
            DL_CHECK(cg_check_io(models[i], CG_TOL_REDUCE, NULL, 0, given, 1, NULL));
        }
    }
    // The strided one and the stride-1 one run as the finite check, the guarded implicit GEMM
    // and the direct kernel (on this machine's x86 target, whatever DLCC_TEST_CPU says).
    DL_CHECK(cg_infer_kernels(models[0]) == 3);
    DL_CHECK(cg_infer_kernels(models[4]) == 3);
}

DL_TEST(nn_conv_lowp) {
    CHECK1("input x : float16[1, 3, 6, 20]\ninput w : float16[5, 3, 3, 3]\n"
           "input b : float16[5]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", ((cg_tol){2e-2, 2e-2, 0, 0}));
    CHECK1("input x : bfloat16[1, 3, 6, 20]\ninput w : bfloat16[5, 3, 3, 3]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w)", ((cg_tol){5e-2, 2e-2, 0, 0}));
}

DL_TEST(nn_conv_transpose) {
    const char *d = "input x : float[2, 4, 5, 7]\ninput w : float[4, 3, 3, 3]\n"
                    "input b : float[3]\n";
    CHECK1(d, "y = ConvTranspose (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose (x, w)", CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <strides = [2, 2]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <strides = [2, 3], pads = [1, 1, 1, 2]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <strides = [2, 2], output_padding = [1, 1]> (x, w, b)",
           CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <dilations = [2, 2], pads = [1, 0, 0, 1]> (x, w, b)",
           CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <strides = [3, 2], output_shape = [15, 14]> (x, w, b)",
           CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <auto_pad = \"SAME_UPPER\", strides = [2, 2]> (x, w, b)",
           CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <auto_pad = \"SAME_LOWER\", strides = [2, 2]> (x, w, b)",
           CG_TOL_REDUCE);
    CHECK1("input x : float[2, 4, 5, 7]\ninput w : float[4, 3, 3, 3]\ninput b : float[6]\n",
           "y = ConvTranspose <group = 2> (x, w, b)", CG_TOL_REDUCE);
    CHECK1(d, "y = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)",
           CG_TOL_REDUCE);
    // wide rows: stride-1 columns take the vector path
    CHECK1("input x : float[1, 6, 4, 40]\ninput w : float[6, 9, 2, 3]\ninput b : float[9]\n",
           "y = ConvTranspose <pads = [0, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
}

DL_TEST(nn_pools_2d) {
    const char *d = "input x : float[2, 3, 11, 13]\n";
    static const char *const ops[] = {"MaxPool", "AveragePool"};
    for (size_t i = 0; i < 2; i++) {
        char node[512];
        static const char *const attrs[] = {
            "kernel_shape = [2, 2], strides = [2, 2]",
            "kernel_shape = [3, 3]",
            "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1",
            "kernel_shape = [3, 2], strides = [2, 2], pads = [1, 1, 1, 0]",
            "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1",
            "kernel_shape = [2, 3], dilations = [2, 2], strides = [1, 2]",
            "kernel_shape = [5, 5], auto_pad = \"SAME_UPPER\", strides = [3, 3]",
            "kernel_shape = [4, 4], auto_pad = \"SAME_LOWER\", strides = [2, 3]",
            "kernel_shape = [5, 5], auto_pad = \"VALID\", strides = [3, 3]",
        };
        for (size_t j = 0; j < DL_ARRAY_LEN(attrs); j++) {
            snprintf(node, sizeof node, "y = %s <%s> (x)", ops[i], attrs[j]);
            CHECK1(d, node, CG_TOL_REDUCE);
        }
    }
    CHECK1(d,
           "y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
           "count_include_pad = 1> (x)",
           CG_TOL_REDUCE);
    // NaN beats numbers (Log of the negative half of the data), on the unpadded fast path and
    // on the general one.
    CG_CHECK("model m\ninput x : float[2, 3, 8, 10]\nt = Log (x)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (t)\n"
             "z = MaxPool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (t)\noutput y\noutput z\n",
             CG_TOL_EXACT);
    CHECK1(d,
           "y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
           "count_include_pad = 1, ceil_mode = 1> (x)",
           CG_TOL_REDUCE);
    CHECK1("input x : float16[1, 2, 9, 9]\n",
           "y = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x)",
           ((cg_tol){2e-3, 2e-3, 0, 0}));
}

DL_TEST(nn_pools_nd_indices) {
    // 1-D and 3-D
    CHECK1("input x : float[2, 3, 17]\n",
           "y = MaxPool <kernel_shape = [3], strides = [2], pads = [1, 1], ceil_mode = 1> (x)",
           CG_TOL_EXACT);
    CHECK1("input x : float[2, 3, 17]\n",
           "y = AveragePool <kernel_shape = [4], strides = [3], dilations = [2]> (x)",
           CG_TOL_REDUCE);
    CHECK1("input x : float[1, 2, 5, 6, 7]\n",
           "y = MaxPool <kernel_shape = [2, 3, 2], strides = [2, 2, 2], pads = [0, 1, 1, 1, 1, "
           "0], ceil_mode = 1> (x)",
           CG_TOL_EXACT);
    CHECK1("input x : float[1, 2, 5, 6, 7]\n",
           "y = AveragePool <kernel_shape = [3, 3, 3], strides = [2, 1, 2], pads = [1, 1, 1, 1, "
           "1, 1], count_include_pad = 1> (x)",
           CG_TOL_REDUCE);
    // Indices, row and column major
    DL_CHECK(check1("input x : float[2, 3, 9, 10]\n",
                    "y, i = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, "
                    "1]> (x)",
                    "output y\noutput i\n", CG_TOL_EXACT));
    DL_CHECK(check1("input x : float[2, 3, 9, 10]\n",
                    "y, i = MaxPool <kernel_shape = [2, 3], strides = [2, 2], storage_order = 1, "
                    "ceil_mode = 1> (x)",
                    "output y\noutput i\n", CG_TOL_EXACT));
    DL_CHECK(check1("input x : float[1, 2, 4, 5, 6]\n",
                    "y, i = MaxPool <kernel_shape = [2, 2, 2], dilations = [1, 2, 1]> (x)",
                    "output y\noutput i\n", CG_TOL_EXACT));
    DL_CHECK(check1("input x : float[1, 2, 12]\n",
                    "y, i = MaxPool <kernel_shape = [3], strides = [3]> (x)",
                    "output y\noutput i\n", CG_TOL_EXACT));
}

DL_TEST(nn_global_avg_pool) {
    CHECK1("input x : float[2, 3, 7, 9]\n", "y = GlobalAveragePool (x)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 5, 3]\n", "y = GlobalAveragePool (x)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 4, 16]\n", "y = GlobalAveragePool (x)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 2, 3, 4, 5]\n", "y = GlobalAveragePool (x)", CG_TOL_REDUCE);
    CHECK1("input x : bfloat16[1, 3, 6, 6]\n", "y = GlobalAveragePool (x)",
           ((cg_tol){1e-2, 1e-2, 0, 0}));
}

DL_TEST(nn_batch_norm) {
    const char *d = "input x : float[2, 3, 5, 7]\ninput s : float[3]\ninput b : float[3]\n"
                    "input m : float[3]\ninput pos_v : float[3]\n";
    CHECK1(d, "y = BatchNormalization (x, s, b, m, pos_v)", CG_TOL_MATH);
    CHECK1(d, "y = BatchNormalization <epsilon = 0.01> (x, s, b, m, pos_v)", CG_TOL_MATH);
    DL_CHECK(check1(d, "y, rm, rv = BatchNormalization (x, s, b, m, pos_v)",
                    "output y\noutput rm\noutput rv\n", CG_TOL_MATH));
    CHECK1("input x : float[4, 6]\ninput s : float[6]\ninput b : float[6]\n"
           "input m : float[6]\ninput pos_v : float[6]\n",
           "y = BatchNormalization (x, s, b, m, pos_v)", CG_TOL_MATH);
    CHECK1("input x : float[2, 3, 4, 3, 5]\ninput s : float[3]\ninput b : float[3]\n"
           "input m : float[3]\ninput pos_v : float[3]\n",
           "y = BatchNormalization (x, s, b, m, pos_v)", CG_TOL_MATH);
    CHECK1("input x : float16[2, 3, 5, 7]\ninput s : float16[3]\ninput b : float16[3]\n"
           "input m : float16[3]\ninput pos_v : float16[3]\n",
           "y = BatchNormalization (x, s, b, m, pos_v)", ((cg_tol){1e-2, 1e-2, 0, 0}));
}

// training_mode = 1: batch statistics over N and the spatial dims, optional running stats.
static bool check_bn_train(const char *dt, const char *xshape, int64_t C, const char *attrs,
                           int n_out, cg_tol tol) {
    char d[512], node[256];
    snprintf(d, sizeof d,
             "input x : %s%s\ninput s : %s[%lld]\ninput b : %s[%lld]\ninput m : %s[%lld]\n"
             "input pos_v : %s[%lld]\n",
             dt, xshape, dt, (long long)C, dt, (long long)C, dt, (long long)C, dt, (long long)C);
    static const char *const lhs[] = {"y", "y, rm", "y, rm, rv"};
    static const char *const outs[] = {"output y\n", "output y\noutput rm\n",
                                       "output y\noutput rm\noutput rv\n"};
    snprintf(node, sizeof node, "%s = BatchNormalization <training_mode = 1%s> (x, s, b, m, pos_v)",
             lhs[n_out - 1], attrs);
    return check1(d, node, outs[n_out - 1], tol);
}

DL_TEST(nn_batch_norm_training) {
    static const struct {
        const char *shape;
        int64_t C;
    } shapes[] = {
        {"[2, 3, 5, 7]", 3}, {"[4, 6]", 6},          {"[1, 1]", 1},
        {"[7, 5]", 5},       {"[2, 3, 4, 3, 5]", 3}, {"[1, 5, 37]", 5},
        {"[3, 2, 1]", 2},    {"[2, 4, 16]", 4},      {"[3, 7, 2, 3, 2, 2]", 7},
    };
    const cg_tol f16 = {1e-2, 1e-2, 0, 0};
    for (size_t i = 0; i < DL_ARRAY_LEN(shapes); i++) {
        for (int o = 1; o <= 3; o++) {
            DL_CHECK(check_bn_train("float", shapes[i].shape, shapes[i].C, "", o, CG_TOL_MATH));
        }
        DL_CHECK(check_bn_train("float", shapes[i].shape, shapes[i].C,
                                ", epsilon = 0.01, momentum = 0.75", 3, CG_TOL_MATH));
        DL_CHECK(check_bn_train("float16", shapes[i].shape, shapes[i].C, "", 3, f16));
    }
    DL_CHECK(check_bn_train("float16", "[2, 3, 5, 7]", 3, ", momentum = 0.5", 2, f16));
    DL_CHECK(check_bn_train("float16", "[4, 6]", 6, "", 1, f16));
    DL_CHECK(check_bn_train("float", "[64, 3, 8, 8]", 3, ", momentum = 0.1", 3, CG_TOL_MATH));
    // float16 data with float scale, B and statistics (T, T1, T2 differ)
    DL_CHECK(check1("input x : float16[3, 4, 9]\ninput s : float[4]\ninput b : float[4]\n"
                    "input m : float[4]\ninput pos_v : float[4]\n",
                    "y, rm, rv = BatchNormalization <training_mode = 1> (x, s, b, m, pos_v)",
                    "output y\noutput rm\noutput rv\n", f16));
    // bfloat16 data, scale, B and statistics
    DL_CHECK(check_bn_train("bfloat16", "[2, 3, 5, 7]", 3, "", 3, f16));
}

DL_TEST(nn_layer_norm) {
    CHECK1("input x : float[4, 10]\ninput s : float[10]\ninput b : float[10]\n",
           "y = LayerNormalization (x, s, b)", CG_TOL_MATH);
    CHECK1("input x : float[2, 3, 37]\ninput s : float[37]\n",
           "y = LayerNormalization <axis = -1, epsilon = 0.001> (x, s)", CG_TOL_MATH);
    CHECK1("input x : float[2, 3, 4, 5]\ninput s : float[3, 4, 5]\ninput b : float[3, 4, 5]\n",
           "y = LayerNormalization <axis = 1> (x, s, b)", CG_TOL_MATH);
    // scale broadcasts over the normalised dims
    CHECK1("input x : float[2, 3, 4, 5]\ninput s : float[4, 1]\ninput b : float[5]\n",
           "y = LayerNormalization <axis = -2> (x, s, b)", CG_TOL_MATH);
    CHECK1("input x : float[2, 3, 4, 5]\ninput s : float[3, 1, 5]\n",
           "y = LayerNormalization <axis = 1> (x, s)", CG_TOL_MATH);
    DL_CHECK(check1("input x : float[3, 50]\ninput s : float[50]\ninput b : float[50]\n",
                    "y, mu, inv = LayerNormalization (x, s, b)",
                    "output y\noutput mu\noutput inv\n", CG_TOL_MATH));
    DL_CHECK(check1("input x : float[2, 3, 4, 5]\ninput s : float[3, 4, 5]\n",
                    "y, mu, inv = LayerNormalization <axis = 1> (x, s)",
                    "output y\noutput mu\noutput inv\n", CG_TOL_MATH));
    DL_CHECK(check1("input x : float[2, 3, 4, 5]\ninput s : float[4, 5]\n",
                    "y, mu = LayerNormalization <axis = -2> (x, s)", "output y\noutput mu\n",
                    CG_TOL_MATH));
    CHECK1("input x : bfloat16[4, 33]\ninput s : bfloat16[33]\ninput b : bfloat16[33]\n",
           "y = LayerNormalization (x, s, b)", ((cg_tol){3e-2, 2e-2, 0, 0}));
}

DL_TEST(nn_conv_strided_rows) {
    // Wide rows so strided columns take the vector tiles: strides 2-4 use wide loads and a
    // shuffle, 5 goes lane by lane; the row end is left to the masked path.
    static const char *const attrs[] = {
        "strides = [1, 2]",
        "strides = [2, 3], pads = [1, 1, 1, 1]",
        "strides = [1, 4], pads = [0, 2, 0, 1]",
        "strides = [1, 5], dilations = [1, 2]",
        "strides = [1, 2], auto_pad = \"SAME_UPPER\"",
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(attrs); i++) {
        char node[256];
        snprintf(node, sizeof node, "y = Conv <%s> (x, w, b)", attrs[i]);
        CHECK1("input x : float[2, 3, 5, 83]\ninput w : float[7, 3, 3, 3]\ninput b : float[7]\n",
               node, CG_TOL_REDUCE);
    }
}

DL_TEST(nn_conv_implicit_gemm) {
    // Shapes the implicit GEMM takes on wide-vector targets (float32, >= 8 output channels per
    // group, >= 16 output positions, >= 16 taps x channels; elsewhere the direct kernel): the
    // CNN benchmark's second layer (stride 1, "same" pads: contiguous masked rows; 64 channels =
    // 5 full 12-row tiles + 4, 196 positions = 6 full 32-lane panels + 4), strides 2 and
    // dilations (gathered rows), groups, 1x1, a K of several KC blocks, more rows than one
    // row block, many column groups.
    CHECK1("input x : float[2, 32, 14, 14]\ninput w : float[64, 32, 3, 3]\ninput b : float[64]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 16, 11, 13]\ninput w : float[20, 16, 3, 3]\ninput b : float[20]\n",
           "y = Conv <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 16, 9, 10]\ninput w : float[24, 8, 3, 3]\ninput b : float[24]\n",
           "y = Conv <group = 2, pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 8, 11, 17]\ninput w : float[9, 8, 3, 2]\n",
           "y = Conv <dilations = [2, 1], pads = [2, 0, 1, 1]> (x, w)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 40, 7, 9]\ninput w : float[30, 40, 1, 1]\ninput b : float[30]\n",
           "y = Conv (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 40, 8, 8]\ninput w : float[16, 40, 3, 3]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 16, 6, 7]\ninput w : float[100, 16, 3, 3]\ninput b : float[100]\n",
           "y = Conv <pads = [0, 1, 2, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 8, 30, 31]\ninput w : float[13, 8, 3, 3]\ninput b : float[13]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[2, 8, 12, 20]\ninput w : float[10, 8, 3, 3]\n",
           "y = Conv <strides = [1, 2], auto_pad = \"SAME_UPPER\"> (x, w)", CG_TOL_REDUCE);
    // ConvTranspose (the input gradient autodiff emits): the CNN's second layer, strides 2
    // with output padding (3 of 4 gathered taps zero), groups, dilations.
    // (K = 576: float32 sums of that length, tolerance as test_linalg's long-K products)
    CHECK1("input x : float[2, 64, 14, 14]\ninput w : float[64, 32, 3, 3]\n",
           "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)", ((cg_tol){5e-4, 1e-4, 0, 0}));
    CHECK1("input x : float[2, 16, 7, 8]\ninput w : float[16, 12, 3, 3]\ninput b : float[12]\n",
           "y = ConvTranspose <strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]> "
           "(x, w, b)",
           CG_TOL_REDUCE);
    CHECK1("input x : float[2, 16, 6, 7]\ninput w : float[16, 10, 3, 3]\ninput b : float[20]\n",
           "y = ConvTranspose <group = 2, pads = [1, 1, 1, 1]> (x, w, b)", CG_TOL_REDUCE);
    CHECK1("input x : float[1, 12, 9, 11]\ninput w : float[12, 9, 3, 3]\n",
           "y = ConvTranspose <dilations = [2, 2], pads = [1, 0, 0, 1], strides = [1, 2]> (x, w)",
           CG_TOL_REDUCE);
}

// Shapes the Winograd kernel takes on AVX2 (float32, 3 x 3, stride 1, dilation 1, one group,
// >= 8 channels in and out, tile rows that fill 3/4 of a vector, >= 32 tiles: docs/codegen.md,
// "3 x 3 stride-1 convolutions"): the CNN benchmark's second layer at batch 6 (64 channels:
// blocks of 6 with a tail of 4), odd output sizes (a last tile row and column half outside), no
// padding, asymmetric pads, a row of two tile vectors with one image split into blocks of tile
// rows (the last one past the image), more channels than one group of products holds,
// ConvTranspose (its kernel flipped) with pads and without. The cases 23-32 columns wide take
// it with AVX-512 too (12-16 tiles of its 16 lanes). Tolerance: F(2 x 2, 3 x 3)'s transforms sum
// up to 4 inputs and 9 weights with factors 1/2 before the products (Lavin's error bound grows
// ~4x over the direct sum's, float32 sums over K = 9 C); inputs in [-2, 2).
DL_TEST(nn_conv_winograd) {
    const cg_tol tol = CG_TOL_WINO;
    CHECK1("input x : float[6, 32, 14, 14]\ninput w : float[64, 32, 3, 3]\ninput b : float[64]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", tol);
    CHECK1("input x : float[3, 8, 13, 15]\ninput w : float[11, 8, 3, 3]\ninput b : float[11]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", tol);
    CHECK1("input x : float[4, 9, 18, 18]\ninput w : float[10, 9, 3, 3]\n", "y = Conv (x, w)", tol);
    CHECK1("input x : float[2, 8, 20, 16]\ninput w : float[9, 8, 3, 3]\ninput b : float[9]\n",
           "y = Conv <pads = [0, 2, 1, 0]> (x, w, b)", tol);
    CHECK1("input x : float[1, 8, 30, 30]\ninput w : float[13, 8, 3, 3]\n",
           "y = Conv <auto_pad = \"SAME_UPPER\"> (x, w)", tol);
    CHECK1("input x : float[4, 32, 28, 28]\ninput w : float[96, 32, 3, 3]\ninput b : float[96]\n",
           "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", tol);
    CHECK1("input x : float[3, 64, 14, 14]\ninput w : float[64, 32, 3, 3]\n",
           "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)", tol);
    CHECK1("input x : float[2, 24, 28, 28]\ninput w : float[24, 16, 3, 3]\n",
           "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)", tol);
    CHECK1("input x : float[3, 8, 12, 12]\ninput w : float[8, 10, 3, 3]\ninput b : float[10]\n",
           "y = ConvTranspose (x, w, b)", tol);
    CHECK1("input x : float[3, 12, 15, 14]\ninput w : float[12, 9, 3, 3]\n",
           "y = ConvTranspose <pads = [1, 0, 2, 1]> (x, w)", tol);
    // Fused: ReLU and a residual Add read at the stored element (masked row ends), a per-channel
    // scale, and the inference CNN's ReLU + 2 x 2 MaxPool (a tile is a window; 28 columns: 14
    // tiles of AVX-512's 16 lanes; an odd output leaves the last tile row and column unpooled).
    CG_CHECK("model m\ninput x : float[6, 32, 14, 14]\ninput w : float[64, 32, 3, 3]\n"
             "input b : float[64]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ny = Relu (v)\n"
             "output y\n",
             tol);
    CG_CHECK("model m\ninput x : float[3, 8, 13, 15]\ninput w : float[11, 8, 3, 3]\n"
             "input r : float[3, 11, 13, 15]\ninput s : float[1, 11, 1, 1]\n"
             "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nu = Add (v, r)\ny = Mul (u, s)\n"
             "output y\n",
             tol);
    CG_CHECK("model m\ninput x : float[1, 8, 26, 27]\ninput w : float[11, 8, 3, 3]\n"
             "input r : float[1, 11, 26, 27]\ninput s : float[1, 11, 1, 1]\n"
             "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nu = Add (v, r)\ny = Mul (u, s)\n"
             "output y\n",
             tol);
    CG_CHECK("model m\ninput x : float[4, 32, 14, 14]\ninput w : float[64, 32, 3, 3]\n"
             "input b : float[64]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nu = Relu (v)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (u)\noutput y\n",
             tol);
    CG_CHECK("model m\ninput x : float[2, 16, 28, 28]\ninput w : float[24, 16, 3, 3]\n"
             "input b : float[24]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nu = Relu (v)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (u)\noutput y\n",
             tol);
    CG_CHECK("model m\ninput x : float[3, 8, 13, 13]\ninput w : float[10, 8, 3, 3]\n"
             "v = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (v)\noutput y\n",
             tol);
    // Weights that are a param: the infer entry's prepack kernel transforms them once (cg_check
    // compares with the per-call transform, --no-prepack, byte for byte): the inference CNN's
    // second layer at batch 1 (49 tiles: 4 blocks of 2 tile rows, the last one past the image).
    CG_CHECK("model m\ninput x : float[1, 32, 14, 14]\n"
             "param w : float[64, 32, 3, 3] = he_normal(seed = 2)\nparam b : float[64] = zeros\n"
             "v = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nu = Relu (v)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (u)\noutput y\n",
             tol);
    // The kernel did run: two kernels for one Conv (the weights' transform and the convolution;
    // the implicit GEMM and the direct kernel make one), on any x86-64 host of this project
    // (AVX2 or AVX-512: 28 columns).
    DL_CHECK(cg_infer_kernels("model m\ninput x : float[2, 16, 28, 28]\n"
                              "input w : float[24, 16, 3, 3]\n"
                              "y = Conv <pads = [1, 1, 1, 1]> (x, w)\noutput y\n") == 2);
    DL_CHECK(cg_infer_kernels("model m\ninput x : float[2, 16, 28, 28]\n"
                              "input w : float[24, 16, 3, 3]\n"
                              "y = Conv <pads = [1, 1, 1, 1], strides = [1, 2]> (x, w)\n"
                              "output y\n") == 1);
}

// An infinite or NaN input or weight: the Winograd kernel's iterations that see one compute
// their outputs by the direct definition (the transforms would spread it over the tile as NaN),
// so the outputs match the evaluator's: Inf where the direct sum gives Inf, NaN where it gives
// NaN; fused poolings and ConvTranspose's skipped taps included (the last model 26 columns
// wide: AVX-512's lanes too).
DL_TEST(nn_conv_winograd_nonfinite) {
    static const char *const models[] = {
        "model m\ninput x : float[3, 8, 13, 15]\ninput w : float[11, 8, 3, 3]\n"
        "input b : float[11]\ny = Conv <pads = [1, 1, 1, 1]> (x, w, b)\noutput y\n",
        "model m\ninput x : float[4, 8, 14, 14]\ninput w : float[16, 8, 3, 3]\n"
        "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nu = Relu (v)\n"
        "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (u)\noutput y\n",
        "model m\ninput x : float[4, 8, 12, 12]\ninput w : float[8, 10, 3, 3]\n"
        "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
        "model m\ninput x : float[3, 8, 26, 26]\ninput w : float[9, 8, 3, 3]\n"
        "v = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
        "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (v)\noutput y\n",
    };
    static const int64_t xn[] = {3 * 8 * 13 * 15, 4 * 8 * 14 * 14, 4 * 8 * 12 * 12,
                                 3 * 8 * 26 * 26};
    static const int64_t wn[] = {11 * 8 * 9, 16 * 8 * 9, 8 * 10 * 9, 9 * 8 * 9};
    static double x[3 * 8 * 26 * 26], w[16 * 8 * 9];
    const cg_tol tol = CG_TOL_WINO;
    for (size_t i = 0; i < DL_ARRAY_LEN(models); i++) {
        for (int64_t j = 0; j < xn[i]; j++) {
            x[j] = (double)((j * 5) % 13 - 6) / 4.0;
        }
        for (int64_t j = 0; j < wn[i]; j++) {
            w[j] = (double)((j * 7) % 11 - 5) / 8.0;
        }
        // an infinite input in the second image (the first stays on the fast path), a NaN one
        // in the last image's last plane
        x[xn[i] / 3 + 40] = INFINITY;
        x[xn[i] - 7] = NAN;
        const cg_data given[] = {{"x", x, xn[i]}, {"w", w, wn[i]}};
        DL_CHECK(cg_check_io(models[i], tol, NULL, 0, given, 2, NULL));
        // and a non-finite weight: every iteration on the direct path
        w[3] = -INFINITY;
        x[xn[i] / 3 + 40] = 1.0;
        x[xn[i] - 7] = 0.5;
        DL_CHECK(cg_check_io(models[i], tol, NULL, 0, given, 2, NULL));
    }
}

// Finite inputs so large that Winograd's transforms would overflow where the direct sums do
// not: a 2 x 2 patch of one channel at 1.5e38 (the tile that holds it at positions 1-2 adds all
// 4 in one transformed value, 6e38; each output's direct sum meets at most 4, times weights
// of at most 11/256). The iterations that see
// a value of magnitude 2^48 or more (or weights that large) take the direct path, which gives
// the evaluator's sums (the rest stay on Winograd's).
DL_TEST(nn_conv_winograd_large_values) {
    static const char *const models[] = {
        "model m\ninput x : float[2, 8, 14, 14]\ninput w : float[16, 8, 3, 3]\n"
        "y = Conv <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
        "model m\ninput x : float[2, 8, 12, 12]\ninput w : float[8, 10, 3, 3]\n"
        "y = ConvTranspose <pads = [1, 1, 1, 1]> (x, w)\noutput y\n",
    };
    static const int64_t xn[] = {2 * 8 * 14 * 14, 2 * 8 * 12 * 12};
    static const int64_t wn[] = {16 * 8 * 9, 8 * 10 * 9};
    static double x[2 * 8 * 14 * 14], w[16 * 8 * 9];
    for (size_t i = 0; i < DL_ARRAY_LEN(models); i++) {
        int64_t hw = i == 0 ? 14 : 12;
        for (int64_t j = 0; j < xn[i]; j++) {
            x[j] = (double)((j * 5) % 13 - 6) / 4.0;
        }
        for (int64_t j = 0; j < wn[i]; j++) {
            w[j] = (double)((j * 7) % 11 + 1) / 256.0;
        }
        // image 1, channel 3, rows 4-5, columns 4-5: 1.5e38, positions 1-2 of one tile (the
        // rows of B^T that add two positions add those; rows 5-6 would meet one value per
        // row of the transform and stay below FLT_MAX). The weights are positive, so the
        // outputs that meet the patch are ~1e37 with no cancellation (a float32 sum of terms
        // ~1e37 that cancel to ~0.1 is off by ~1e30 in any order: no test of the kernels).
        int64_t at = (8 + 3) * hw * hw + 4 * hw + 4;
        x[at] = 1.5e38;
        x[at + 1] = 1.5e38;
        x[at + hw] = 1.5e38;
        x[at + hw + 1] = 1.5e38;
        const cg_data given[] = {{"x", x, xn[i]}, {"w", w, wn[i]}};
        DL_CHECK(cg_check_io(models[i], CG_TOL_WINO, NULL, 0, given, 2, NULL));
        // and weights of 1e30 with small inputs: every iteration on the direct path
        for (int64_t j = 0; j < xn[i]; j++) {
            x[j] = (double)((j * 5) % 13 - 6) / 4e8;
        }
        w[5] = 1e30;
        DL_CHECK(cg_check_io(models[i], CG_TOL_WINO, NULL, 0, given, 2, NULL));
    }
}

// A convolution heading a fusion group (passes/fusion.c): Relu, LeakyRelu and a Clip-free
// chain applied where the kernel stores y, through the implicit GEMM (64 channels) and the
// direct kernel (one input channel: K = 9, and a strided one), with and without bias, grouped;
// cg_check also compares the fused kernels with the unfused ones byte for byte.
DL_TEST(nn_conv_fused_epilogue) {
    CG_CHECK("model m\ninput x : float[2, 32, 14, 14]\ninput w : float[64, 32, 3, 3]\n"
             "input b : float[64]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ny = Relu (v)\n"
             "output y\n",
             CG_TOL_REDUCE);
    CG_CHECK("model m\ninput x : float[3, 1, 28, 28]\ninput w : float[32, 1, 3, 3]\n"
             "input b : float[32]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ny = Relu (v)\n"
             "output y\n",
             CG_TOL_REDUCE);
    CG_CHECK("model m\ninput x : float[2, 3, 9, 21]\ninput w : float[5, 3, 3, 3]\n"
             "v = Conv <strides = [2, 1]> (x, w)\nu = LeakyRelu <alpha = 0.1> (v)\n"
             "y = Mul (u, u)\noutput y\n",
             CG_TOL_REDUCE);
    CG_CHECK("model m\ninput x : float[2, 16, 9, 10]\ninput w : float[24, 8, 3, 3]\n"
             "input b : float[24]\nv = Conv <group = 2, pads = [1, 1, 1, 1]> (x, w, b)\n"
             "y = Relu (v)\noutput y\n",
             CG_TOL_REDUCE);
}

// The vector MaxPool (float32, column stride 1 or 2: chunks of the vector width along a row with
// a masked last one) on rows of several chunks, the window order's first maximum, and NaN
// beating numbers lane by lane.
DL_TEST(nn_max_pool_vector_rows) {
    const char *d = "input x : float[2, 3, 9, 70]\n";
    CHECK1(d, "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)", CG_TOL_EXACT);
    CHECK1(d, "y = MaxPool <kernel_shape = [3, 3]> (x)", CG_TOL_EXACT);
    CHECK1(d, "y = MaxPool <kernel_shape = [2, 3], strides = [1, 2]> (x)", CG_TOL_EXACT);
    CHECK1(d, "y = MaxPool <kernel_shape = [3, 1], strides = [3, 1]> (x)", CG_TOL_EXACT);
    CG_CHECK("model m\ninput x : float[1, 2, 6, 40]\nt = Log (x)\n"
             "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (t)\n"
             "z = MaxPool <kernel_shape = [3, 3]> (t)\noutput y\noutput z\n",
             CG_TOL_EXACT);
}
