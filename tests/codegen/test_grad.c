// tests/codegen/test_grad.c — compiled internal gradient ops of family A against the reference
// evaluator: UnaryGrad (every op, both Gelu variants, LeakyRelu's alpha), the loss gradients
// (every reduction, weights, ignore_index incl. an ignored label outside [0, C), [N, C] and
// [N, C, d...], int32 labels), LayerNormalizationGrad (1 to 3 outputs, axes, column chunks with
// a remainder), GatherGrad (repeated and negative indices, inner chunks), SliceGrad (negative
// steps, clamping) and PadGrad (every mode, crops). The codegen_ops_split test runs the same
// cases with every kernel split into uneven chunks.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_ir.h"
#include "dl_test.h"

#include <stdio.h>
#include <string.h>

#define TOL_HALF ((cg_tol){3e-3, 3e-3, 0, 0})

// ---------------------------------------------------------------------------------------------
// UnaryGrad

static bool check_unary(const char *dt, const char *op, const char *attrs, const char *xname,
                        const char *shape, cg_tol tol) {
    char text[512];
    snprintf(text, sizeof text,
             "model m\ninput %s : %s%s\ninput dy : %s%s\n"
             "g = UnaryGrad <op = \"%s\"%s> (dy, %s)\noutput g\n",
             xname, dt, shape, dt, shape, op, attrs, xname);
    return cg_check(text, tol);
}

// Ops whose derivative is only real on positive inputs (the pos_ prefix draws those).
static bool positive_domain(const char *op) {
    return strcmp(op, "Log") == 0 || strcmp(op, "Sqrt") == 0 || strcmp(op, "Reciprocal") == 0;
}

// Every UnaryGrad sub-op of the op table (dl_ir_op_has_unary_grad), so a new one is covered as
// soon as its row exists.
DL_TEST(grad_unary) {
    static const char *const shapes[] = {"[7]", "[3, 5, 2]", "[2, 3, 4, 5]", "[]"};
    size_t n_ops = 0;
    for (size_t s = 0; s < DL_ARRAY_LEN(shapes); s++) {
        for (int i = 0; i < DL_IR_OP_COUNT; i++) {
            if (!dl_ir_op_has_unary_grad((dl_ir_op)i)) {
                continue;
            }
            const char *op = dl_ir_op_get_info((dl_ir_op)i)->name;
            const char *x = positive_domain(op) ? "pos_x" : "x";
            DL_CHECK(check_unary("float", op, "", x, shapes[s], CG_TOL_MATH));
            n_ops += s == 0;
        }
    }
    DL_CHECK(n_ops >= 12);
    DL_CHECK(check_unary("float", "LeakyRelu", ", alpha = 0.25", "x", "[33]", CG_TOL_MATH));
    DL_CHECK(check_unary("float", "Gelu", ", approximate = \"tanh\"", "x", "[5, 13]", CG_TOL_MATH));
    DL_CHECK(check_unary("float", "Gelu", ", approximate = \"none\"", "x", "[130]", CG_TOL_MATH));
    // Half types round once at the store.
    DL_CHECK(check_unary("float16", "Tanh", "", "x", "[9, 4]", TOL_HALF));
    DL_CHECK(check_unary("bfloat16", "Sigmoid", "", "x", "[9, 4]", (cg_tol){2e-2, 2e-2, 0, 0}));
    // Empty tensors lower to no kernel.
    DL_CHECK(check_unary("float", "Relu", "", "x", "[0, 3]", CG_TOL_MATH));
}

// ---------------------------------------------------------------------------------------------
// Loss gradients

static const char *const reductions[] = {"none", "sum", "mean"};

// op<attrs>(dl, x, lab[, pos_w]); dl's shape follows the reduction.
static bool check_loss(const char *op, const char *red, const char *extra, const char *xshape,
                       const char *ltype, const char *lshape, const char *wshape, int64_t int_hi) {
    char text[1024], win[96] = "", warg[16] = "";
    if (wshape) {
        snprintf(win, sizeof win, "input pos_w : float%s\n", wshape);
        snprintf(warg, sizeof warg, ", pos_w");
    }
    bool none = red[0] == 'n';
    snprintf(text, sizeof text,
             "model m\ninput x : float%s\ninput lab : %s%s\n%sinput dl : float%s\n"
             "g = %sGrad <reduction = \"%s\"%s> (dl, x, lab%s)\noutput g\n",
             xshape, ltype, lshape, win, none ? lshape : "[]", op, red, extra, warg);
    cg_tol tol = CG_TOL_MATH;
    tol.int_hi = int_hi;
    return cg_check(text, tol);
}

DL_TEST(grad_loss) {
    static const char *const ops[] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
    for (size_t o = 0; o < 2; o++) {
        for (size_t r = 0; r < 3; r++) {
            const char *red = reductions[r];
            DL_CHECK(check_loss(ops[o], red, "", "[5, 7]", "int64", "[5]", NULL, 7));
            DL_CHECK(check_loss(ops[o], red, "", "[6, 100]", "int32", "[6]", "[100]", 100));
            DL_CHECK(check_loss(ops[o], red, "", "[3, 4, 5]", "int64", "[3, 5]", "[4]", 4));
            DL_CHECK(check_loss(ops[o], red, "", "[2, 3, 2, 3]", "int32", "[2, 2, 3]", NULL, 3));
            DL_CHECK(
                check_loss(ops[o], red, ", ignore_index = 1", "[9, 3]", "int64", "[9]", NULL, 3));
            DL_CHECK(check_loss(ops[o], red, ", ignore_index = 2", "[4, 3, 5]", "int64", "[4, 5]",
                                "[3]", 3));
            // Label 4 is outside [0, 4) but ignored: contributes 0 and is never read.
            DL_CHECK(check_loss(ops[o], red, ", ignore_index = 4", "[12, 4]", "int64", "[12]",
                                "[4]", 5));
            // Enough rows for several "mean" chunks (N = 70: 3 rows per iteration).
            DL_CHECK(check_loss(ops[o], red, ", ignore_index = 0", "[70, 6]", "int64", "[70]",
                                "[6]", 6));
            // Every label ignored: "mean" divides by 0, yet no position contributes: all 0.
            DL_CHECK(
                check_loss(ops[o], red, ", ignore_index = 0", "[3, 4]", "int64", "[3]", NULL, 1));
            // ignore_index not on the node: label 0 is a target.
            DL_CHECK(check_loss(ops[o], red, "", "[1, 1]", "int64", "[1]", NULL, 1));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// LayerNormalizationGrad

static bool check_layer_norm(const char *dt, const char *xshape, const char *sshape, int axis,
                             int n_out, cg_tol tol) {
    char text[1024];
    static const char *const outs[] = {"gx", "gx, gs", "gx, gs, gb"};
    static const char *const outl[] = {"output gx\n", "output gx\noutput gs\n",
                                       "output gx\noutput gs\noutput gb\n"};
    snprintf(text, sizeof text,
             "model m\ninput x : %s%s\ninput s : %s%s\ninput dy : %s%s\n"
             "%s = LayerNormalizationGrad <axis = %d, epsilon = 0.001> (dy, x, s)\n%s",
             dt, xshape, dt, sshape, dt, xshape, outs[n_out - 1], axis, outl[n_out - 1]);
    return cg_check(text, tol);
}

DL_TEST(grad_layer_norm) {
    for (int k = 1; k <= 3; k++) {
        DL_CHECK(check_layer_norm("float", "[4, 7]", "[7]", -1, k, CG_TOL_REDUCE));
        DL_CHECK(check_layer_norm("float", "[2, 3, 5]", "[3, 5]", 1, k, CG_TOL_REDUCE));
        DL_CHECK(check_layer_norm("float", "[3, 2, 3, 4]", "[4]", -1, k, CG_TOL_REDUCE));
    }
    // M = 600: dscale / dbias in 3 column chunks (256, 256, 88); rows = 5.
    DL_CHECK(check_layer_norm("float", "[5, 600]", "[600]", 1, 3, CG_TOL_REDUCE));
    // axis 0: one row.
    DL_CHECK(check_layer_norm("float", "[3, 4]", "[3, 4]", 0, 3, CG_TOL_REDUCE));
    DL_CHECK(check_layer_norm("float16", "[6, 8]", "[8]", -1, 3, (cg_tol){1e-2, 1e-2, 0, 0}));
}

// ---------------------------------------------------------------------------------------------
// GatherGrad

static bool check_gather(const char *xshape, const char *idx, const char *dyshape, int axis) {
    char text[1024];
    snprintf(text, sizeof text,
             "model m\ninput x : float%s\nconst idx : %s\ninput dy : float%s\n"
             "g = GatherGrad <axis = %d> (dy, idx, x)\noutput g\n",
             xshape, idx, dyshape, axis);
    return cg_check(text, CG_TOL_REDUCE);
}

DL_TEST(grad_gather) {
    // Embedding-like: axis 0, repeated and negative indices, 2-D indices.
    DL_CHECK(check_gather("[6, 5]", "int64[2, 3] = [[0, 5, -1], [2, 0, 0]]", "[2, 3, 5]", 0));
    // B = 300: inner chunks of 256 + 44.
    DL_CHECK(check_gather("[4, 300]", "int32[5] = [3, 3, -4, 1, 3]", "[5, 300]", 0));
    DL_CHECK(check_gather("[2, 4, 3]", "int64[3] = [3, -1, 0]", "[2, 3, 3]", 1));
    DL_CHECK(check_gather("[3, 2, 5]", "int64[4] = [4, 4, -5, 2]", "[3, 2, 4]", -1));
    DL_CHECK(check_gather("[5, 3]", "int64[] = 2", "[3]", 0));
    DL_CHECK(check_gather("[2, 3, 2, 2]", "int64[2] = [0, 2]", "[2, 2, 2, 2]", 1));
}

// ---------------------------------------------------------------------------------------------
// SliceGrad

static bool check_slice(const char *xshape, const char *dyshape, const char *attrs) {
    char text[1024];
    snprintf(text, sizeof text,
             "model m\ninput x : float%s\ninput dy : float%s\n"
             "g = SliceGrad <%s> (dy, x)\noutput g\n",
             xshape, dyshape, attrs);
    return cg_check(text, CG_TOL_EXACT);
}

DL_TEST(grad_slice) {
    DL_CHECK(check_slice("[6, 5]", "[2, 5]", "starts = [1, 0], ends = [5, 5], steps = [2, 1]"));
    DL_CHECK(
        check_slice("[6, 5]", "[3, 5]", "starts = [-1], ends = [-7], axes = [0], steps = [-2]"));
    DL_CHECK(check_slice("[3, 4, 5]", "[3, 2, 4]",
                         "starts = [4, 1], ends = [0, 100], axes = [-1, 1], steps = [-1, 2]"));
    DL_CHECK(check_slice("[2, 3, 2, 7]", "[2, 2, 2, 3]",
                         "starts = [1, 0], ends = [3, 7], axes = [1, 3], steps = [1, 3]"));
    DL_CHECK(check_slice("[9]", "[3]", "starts = [8], ends = [-100], steps = [-3]"));
    // An empty slice: dx is all zeros.
    DL_CHECK(check_slice("[4, 3]", "[0, 3]", "starts = [3], ends = [1]"));
}

// ---------------------------------------------------------------------------------------------
// PadGrad

DL_TEST(grad_pad) {
    static const char *const modes[] = {"constant", "edge", "reflect", "wrap"};
    // x shape, pads (begin..., end...), padded shape.
    static const char *const cases[][3] = {
        {"[3, 4]", "[1, 2, 2, 3]", "[6, 9]"},
        {"[2, 3, 4]", "[0, 1, 2, 1, 0, 3]", "[3, 4, 9]"},
        {"[4, 5]", "[-1, 2, 1, -2]", "[4, 5]"},
        {"[1, 3]", "[2, 0, 1, 5]", "[4, 8]"},
        {"[2, 2, 3, 3]", "[0, 0, 2, 2, 0, 0, 2, 2]", "[2, 2, 7, 7]"},
        {"[5]", "[0, 0]", "[5]"},
    };
    for (size_t m = 0; m < DL_ARRAY_LEN(modes); m++) {
        for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
            char text[1024];
            snprintf(text, sizeof text,
                     "model m\ninput x : float%s\ninput dy : float%s\n"
                     "g = PadGrad <mode = \"%s\", pads = %s> (dy, x)\noutput g\n",
                     cases[i][0], cases[i][2], modes[m], cases[i][1]);
            DL_CHECK(cg_check(text, CG_TOL_REDUCE));
        }
    }
}
