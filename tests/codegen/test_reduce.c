// tests/codegen/test_reduce.c — compiled ReduceSum/Mean/Max/Min, ArgMax, Softmax and LogSoftmax
// against the reference evaluator: several shapes (odd sizes, lane chunks with a remainder,
// innermost and non-innermost axes, all axes), keepdims 0/1, negative axes, integer and
// float16/bfloat16 inputs.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <stdio.h>

// Loose enough for float16 storage of the result (11-bit mantissa) and f32 accumulation.
#define TOL_HALF ((cg_tol){2e-3, 2e-3, 0, 0})

static const char *const reduce_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};

static bool check_reduce(const char *op, const char *dtype, const char *shape, const char *attrs,
                         cg_tol tol) {
    char text[512];
    snprintf(text, sizeof text, "model m\ninput a : %s%s\nb = %s%s (a)\noutput b\n", dtype, shape,
             op, attrs);
    return cg_check(text, tol);
}

DL_TEST(reduce_axes_keepdims) {
    static const struct {
        const char *shape, *attrs;
    } cases[] = {
        {"[4, 37]", " <axes = [1]>"},                       // innermost, odd length
        {"[4, 37]", " <axes = [-1], keepdims = 0>"},        // negative axis
        {"[37, 5]", " <axes = [0]>"},                       // non-innermost: lanes of 5
        {"[9, 200]", " <axes = [0], keepdims = 0>"},        // lanes: chunks of 64 + remainder
        {"[3, 128]", " <axes = [-2]>"},                     // lanes: exact chunks
        {"[2, 3, 4, 5]", " <axes = [1, 3]>"},               // alternating groups
        {"[2, 3, 4, 5]", " <axes = [0, 2], keepdims = 0>"}, // lane dim last
        {"[2, 3, 4, 5]", " <axes = [1, 2]>"},               // merged reduced middle
        {"[2, 3, 4, 5]", ""},                               // all axes
        {"[2, 3, 4, 5]", " <keepdims = 0>"},                // all axes, scalar out
        {"[6, 1, 7]", " <axes = [1]>"},                     // size-1 reduced axis
        {"[6, 1, 7]", " <axes = [-3, 1]>"},
        {"[1000]", ""},                            // long vectorised sum
        {"[]", ""},                                // scalar
        {"[5, 6]", " <noop_with_empty_axes = 1>"}, // identity
    };
    for (size_t o = 0; o < DL_ARRAY_LEN(reduce_ops); o++) {
        for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
            DL_CHECK(check_reduce(reduce_ops[o], "float", cases[i].shape, cases[i].attrs,
                                  CG_TOL_REDUCE));
        }
    }
}

DL_TEST(reduce_integer) {
    for (size_t o = 0; o < DL_ARRAY_LEN(reduce_ops); o++) {
        cg_tol t = {0, 0, 100, 3};
        DL_CHECK(check_reduce(reduce_ops[o], "int64", "[5, 7]", " <axes = [1]>", t));
        DL_CHECK(check_reduce(reduce_ops[o], "int32", "[5, 7]", " <axes = [0]>", t));
        DL_CHECK(check_reduce(reduce_ops[o], "int32", "[2, 3, 4]", " <keepdims = 0>", t));
    }
}

DL_TEST(reduce_half) {
    for (size_t o = 0; o < DL_ARRAY_LEN(reduce_ops); o++) {
        DL_CHECK(check_reduce(reduce_ops[o], "float16", "[3, 70]", " <axes = [1]>", TOL_HALF));
        DL_CHECK(check_reduce(reduce_ops[o], "float16", "[6, 70]", " <axes = [0]>", TOL_HALF));
        DL_CHECK(check_reduce(reduce_ops[o], "bfloat16", "[4, 9]", " <axes = [-1]>",
                              ((cg_tol){2e-2, 1e-2, 0, 0})));
    }
}

DL_TEST(argmax) {
    static const struct {
        const char *dtype, *shape, *attrs;
    } cases[] = {
        {"float", "[4, 37]", " <axis = 1>"},
        {"float", "[4, 37]", " <axis = -1, keepdims = 0>"},
        {"float", "[37, 70]", ""}, // axis 0: lanes with remainder
        {"float", "[2, 3, 5]", " <axis = 1, keepdims = 0>"},
        {"float", "[2, 3, 5]", " <axis = -3>"},
        {"float", "[7]", " <keepdims = 0>"},
        {"float16", "[3, 17]", " <axis = 1>"},
        {"float", "[2, 1, 5]", " <axis = 1>"}, // length-1 axis: all zeros
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        char text[512];
        snprintf(text, sizeof text, "model m\ninput a : %s%s\nb = ArgMax%s (a)\noutput b\n",
                 cases[i].dtype, cases[i].shape, cases[i].attrs);
        CG_CHECK(text, CG_TOL_EXACT);
    }
    // Ties: small integers repeat, so first vs last index matters.
    CG_CHECK("model m\ninput a : int64[6, 9]\nb = ArgMax <axis = 1> (a)\n"
             "c = ArgMax <axis = 1, select_last_index = 1> (a)\n"
             "d = ArgMax <axis = 0, select_last_index = 1, keepdims = 0> (a)\n"
             "output b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK("model m\ninput a : int32[4, 3, 10]\nb = ArgMax <axis = 2> (a)\n"
             "c = ArgMax <axis = 1, select_last_index = 1> (a)\noutput b\noutput c\n",
             ((cg_tol){0, 0, 2, 5}));
}

DL_TEST(softmax) {
    static const struct {
        const char *dtype, *shape, *attrs;
    } cases[] = {
        {"float", "[4, 37]", ""},
        {"float", "[4, 37]", " <axis = 0>"},
        {"float", "[2, 3, 70]", " <axis = 1>"},
        {"float", "[2, 3, 70]", " <axis = -2>"},
        {"float", "[2, 130, 3]", " <axis = 2>"},
        {"float", "[1000]", ""},
        {"float", "[3, 1]", ""},
        {"float16", "[3, 40]", ""},
        {"float16", "[5, 3, 8]", " <axis = 1>"},
        {"bfloat16", "[2, 9]", ""},
    };
    static const char *const ops[] = {"Softmax", "LogSoftmax"};
    for (size_t o = 0; o < 2; o++) {
        for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
            char text[512];
            snprintf(text, sizeof text, "model m\ninput a : %s%s\nb = %s%s (a)\noutput b\n",
                     cases[i].dtype, cases[i].shape, ops[o], cases[i].attrs);
            cg_tol t = CG_TOL_MATH;
            if (cases[i].dtype[0] == 'b') {
                t = (cg_tol){2e-2, 1e-2, 0, 0};
            } else if (cases[i].dtype[0] == 'f' && cases[i].dtype[5] == '1') {
                t = TOL_HALF;
            }
            CG_CHECK(text, t);
        }
    }
    // Large magnitudes: the max must be subtracted.
    CG_CHECK("model m\ninput a : float[2, 5]\nconst k : float[] = 1000\nb = Mul (a, k)\nc = "
             "Softmax (b)\n"
             "d = LogSoftmax <axis = 0> (b)\noutput c\noutput d\n",
             CG_TOL_MATH);
}
