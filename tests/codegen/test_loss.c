// tests/codegen/test_loss.c — compiled SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
// MeanSquaredError against the reference evaluator: [N, C] and [N, C, d...] inputs (lane chunks
// with a remainder), every reduction, weights, ignore_index (including an ignored label outside
// [0, C), which must not be read), int32/int64 labels, the log_prob output and float16.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <stdio.h>

#define TOL_HALF ((cg_tol){3e-3, 3e-3, 0, 0})

static const char *const reductions[] = {"none", "sum", "mean"};

// op over x : float<xshape>, labels `lab` : <ltype><lshape> in [0, int_hi), optional weights
// `pos_w` : float[C] (positive, so that mean's divisor stays away from 0).
static bool check_loss(const char *op, const char *xdt, const char *xshape, const char *ltype,
                       const char *lshape, const char *wshape, const char *attrs, int64_t int_hi,
                       cg_tol tol) {
    char text[1024];
    char winput[128] = "", warg[16] = "";
    if (wshape) {
        snprintf(winput, sizeof winput, "input pos_w : %s%s\n", xdt, wshape);
        snprintf(warg, sizeof warg, ", pos_w");
    }
    snprintf(text, sizeof text,
             "model m\ninput x : %s%s\ninput lab : %s%s\n%sl = %s%s (x, lab%s)\noutput l\n", xdt,
             xshape, ltype, lshape, winput, op, attrs, warg);
    tol.int_hi = int_hi;
    return cg_check(text, tol);
}

DL_TEST(loss_nll_sce_2d) {
    static const char *const ops[] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
    for (size_t o = 0; o < 2; o++) {
        for (size_t r = 0; r < 3; r++) {
            char attrs[128];
            snprintf(attrs, sizeof attrs, " <reduction = \"%s\">", reductions[r]);
            DL_CHECK(
                check_loss(ops[o], "float", "[5, 7]", "int64", "[5]", NULL, attrs, 7, CG_TOL_MATH));
            DL_CHECK(check_loss(ops[o], "float", "[6, 100]", "int32", "[6]", "[100]", attrs, 100,
                                CG_TOL_MATH));
            snprintf(attrs, sizeof attrs, " <reduction = \"%s\", ignore_index = 1>", reductions[r]);
            DL_CHECK(
                check_loss(ops[o], "float", "[9, 3]", "int64", "[9]", NULL, attrs, 3, CG_TOL_MATH));
            DL_CHECK(check_loss(ops[o], "float", "[9, 3]", "int32", "[9]", "[3]", attrs, 3,
                                CG_TOL_MATH));
            // Label 4 is outside [0, 4) but ignored: never read.
            snprintf(attrs, sizeof attrs, " <reduction = \"%s\", ignore_index = 4>", reductions[r]);
            DL_CHECK(check_loss(ops[o], "float", "[12, 4]", "int64", "[12]", "[4]", attrs, 5,
                                CG_TOL_MATH));
        }
        // Default reduction (mean), ignore_index not on the node: label 0 is a target.
        DL_CHECK(check_loss(ops[o], "float", "[4, 3]", "int64", "[4]", NULL, "", 3, CG_TOL_MATH));
        DL_CHECK(check_loss(ops[o], "float", "[1, 1]", "int64", "[1]", NULL, "", 1, CG_TOL_MATH));
    }
}

DL_TEST(loss_nll_sce_spatial) {
    static const char *const ops[] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
    for (size_t o = 0; o < 2; o++) {
        for (size_t r = 0; r < 3; r++) {
            char attrs[128];
            snprintf(attrs, sizeof attrs, " <reduction = \"%s\">", reductions[r]);
            DL_CHECK(check_loss(ops[o], "float", "[3, 4, 5]", "int64", "[3, 5]", NULL, attrs, 4,
                                CG_TOL_MATH));
            // D = 280: four chunks of 64 lanes and one of 24.
            DL_CHECK(check_loss(ops[o], "float", "[2, 3, 4, 70]", "int32", "[2, 4, 70]", "[3]",
                                attrs, 3, CG_TOL_MATH));
            // D = 128: exact chunks.
            snprintf(attrs, sizeof attrs, " <reduction = \"%s\", ignore_index = 2>", reductions[r]);
            DL_CHECK(check_loss(ops[o], "float", "[2, 5, 128]", "int64", "[2, 128]", "[5]", attrs,
                                5, CG_TOL_MATH));
        }
    }
}

DL_TEST(loss_sce_log_prob_half) {
    // log_prob output: float32 (the loss reads it back) and float16 (recomputed).
    CG_CHECK("model m\ninput x : float[6, 10]\ninput lab : int64[6]\n"
             "l, lp = SoftmaxCrossEntropyLoss <reduction = \"sum\"> (x, lab)\noutput l\n"
             "output lp\n",
             ((cg_tol){1e-5, 1e-4, 10, 0}));
    CG_CHECK("model m\ninput x : float[2, 3, 9]\ninput lab : int64[2, 9]\ninput pos_w : float[3]\n"
             "l, lp = SoftmaxCrossEntropyLoss <reduction = \"none\", ignore_index = 0> "
             "(x, lab, pos_w)\noutput l\noutput lp\n",
             CG_TOL_MATH);
    CG_CHECK("model m\ninput x : float16[6, 10]\ninput lab : int64[6]\n"
             "l, lp = SoftmaxCrossEntropyLoss (x, lab)\noutput l\noutput lp\n",
             ((cg_tol){3e-3, 3e-3, 10, 0}));
    for (size_t r = 0; r < 3; r++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, " <reduction = \"%s\">", reductions[r]);
        DL_CHECK(check_loss("SoftmaxCrossEntropyLoss", "float16", "[4, 3, 5]", "int64", "[4, 5]",
                            "[3]", attrs, 3, TOL_HALF));
        DL_CHECK(check_loss("NegativeLogLikelihoodLoss", "float16", "[8, 5]", "int32", "[8]", NULL,
                            attrs, 5, TOL_HALF));
    }
}

DL_TEST(loss_mse) {
    static const char *const shapes[] = {"[7, 13]", "[1000]", "[]", "[2, 3, 4]"};
    for (size_t s = 0; s < DL_ARRAY_LEN(shapes); s++) {
        for (size_t r = 0; r < 3; r++) {
            char text[512];
            snprintf(text, sizeof text,
                     "model m\ninput a : float%s\ninput b : float%s\n"
                     "l = MeanSquaredError <reduction = \"%s\"> (a, b)\noutput l\n",
                     shapes[s], shapes[s], reductions[r]);
            CG_CHECK(text, CG_TOL_MATH);
        }
    }
    CG_CHECK("model m\ninput a : float16[5, 9]\ninput b : float16[5, 9]\n"
             "l = MeanSquaredError (a, b)\nm = MeanSquaredError <reduction = \"none\"> (a, b)\n"
             "output l\noutput m\n",
             TOL_HALF);
}
