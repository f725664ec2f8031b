// tests/codegen/test_shape.c — compiled data-movement ops (Reshape Flatten Squeeze Unsqueeze
// Transpose Concat Split Slice Gather Expand Pad) against the reference evaluator. Copies are
// exact (CG_TOL_EXACT) for every dtype: elements move as raw storage.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <stdio.h>

#define HDR "model m\n"

DL_TEST(shape_reshape_family) {
    CG_CHECK(HDR "input a : float[4, 6]\nb = Reshape <shape = [3, -1]> (a)\n"
                 "c = Reshape <shape = [0, 2, -1]> (b)\noutput b\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float[2, 3, 5]\nb = Flatten (a)\nc = Flatten <axis = 0> (a)\n"
                 "d = Flatten <axis = -1> (a)\noutput b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int64[1, 7, 1]\nb = Squeeze (a)\nc = Squeeze <axes = [-1]> (a)\n"
                 "d = Unsqueeze <axes = [0, -1]> (b)\noutput b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[3, 1, 5]\nb = Squeeze <axes = [1]> (a)\n"
                 "c = Unsqueeze <axes = [1]> (b)\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bool[17]\nb = Reshape <shape = [17, 1]> (a)\noutput b\n", CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bfloat16[]\nb = Unsqueeze <axes = [0]> (a)\noutput b\n", CG_TOL_EXACT);
}

DL_TEST(shape_transpose) {
    // 2-D (tiled), 3-D / 4-D permutations, default perm, merged adjacent dims
    CG_CHECK(HDR "input a : float[67, 45]\nb = Transpose (a)\noutput b\n", CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float[3, 4, 5]\nb = Transpose <perm = [2, 0, 1]> (a)\n"
                 "c = Transpose <perm = [1, 0, 2]> (a)\nd = Transpose (a)\n"
                 "e = Transpose <perm = [0, 1, 2]> (a)\noutput b\noutput c\noutput d\noutput e\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR
             "input a : float[2, 3, 4, 5]\nb = Transpose <perm = [0, 2, 3, 1]> (a)\n"
             "c = Transpose <perm = [0, 3, 1, 2]> (b)\nd = Transpose <perm = [2, 3, 0, 1]> (a)\n"
             "output b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float[2, 40, 1, 33]\nb = Transpose <perm = [0, 3, 2, 1]> (a)\n"
                 "output b\n",
             CG_TOL_EXACT);
    static const char *const dts[] = {"bool", "int64", "float16", "bfloat16", "int32"};
    for (size_t i = 0; i < DL_ARRAY_LEN(dts); i++) {
        char text[512];
        snprintf(text, sizeof text,
                 HDR "input a : %s[5, 7, 3]\nb = Transpose <perm = [2, 0, 1]> (a)\n"
                     "c = Transpose (a)\noutput b\noutput c\n",
                 dts[i]);
        CG_CHECK(text, CG_TOL_EXACT);
    }
}

DL_TEST(shape_concat) {
    // three inputs on every axis, negative axes
    static const char *const axes[] = {"0", "1", "2", "-1", "-3"};
    for (size_t i = 0; i < DL_ARRAY_LEN(axes); i++) {
        int ax = axes[i][0] == '-' ? 3 + (axes[i][1] - '0') * -1 : axes[i][0] - '0';
        int da[3] = {2, 3, 4}, db[3] = {2, 3, 4}, dc[3] = {2, 3, 4};
        da[ax] = 1;
        db[ax] = 5;
        dc[ax] = 2;
        char text[512];
        snprintf(text, sizeof text,
                 HDR "input a : float[%d, %d, %d]\ninput b : float[%d, %d, %d]\n"
                     "input c : float[%d, %d, %d]\nd = Concat <axis = %s> (a, b, c)\noutput d\n",
                 da[0], da[1], da[2], db[0], db[1], db[2], dc[0], dc[1], dc[2], axes[i]);
        CG_CHECK(text, CG_TOL_EXACT);
    }
    CG_CHECK(HDR "input a : bool[3, 2]\ninput b : bool[3, 5]\nc = Concat <axis = 1> (a, b, a)\n"
                 "output c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int64[4]\ninput b : int64[9]\nc = Concat <axis = 0> (a, b)\n"
                 "output c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[2, 3]\ninput b : float16[1, 3]\n"
                 "c = Concat <axis = -2> (b, a, b)\noutput c\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_split) {
    CG_CHECK(HDR "input a : float[6, 10]\nb, c = Split (a)\nd, e, f = Split <axis = 1, split = "
                 "[2, 3, 5]> (a)\noutput b\noutput c\noutput d\noutput e\noutput f\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int32[3, 7, 2]\nb, c, d = Split <axis = -2, num_outputs = 3> (a)\n"
                 "output b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[5, 4]\nb, c = Split <axis = -1, split = [1, 3]> (a)\n"
                 "output b\noutput c\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_slice) {
    CG_CHECK(HDR "input a : float[10, 20]\nb = Slice <starts = [2], ends = [7]> (a)\n"
                 "c = Slice <starts = [0, 1], ends = [10, 20], steps = [1, 3]> (a)\n"
                 "d = Slice <starts = [-3], ends = [100], axes = [1]> (a)\n"
                 "e = Slice <starts = [-100], ends = [-2], axes = [-1]> (a)\n"
                 "output b\noutput c\noutput d\noutput e\n",
             CG_TOL_EXACT);
    // negative steps, clamped starts and ends
    CG_CHECK(HDR "input a : float[10, 20]\nb = Slice <starts = [-1], ends = [-100], steps = [-1]> "
                 "(a)\nc = Slice <starts = [8], ends = [1], steps = [-2]> (a)\n"
                 "d = Slice <starts = [100, 50], ends = [-100, 0], steps = [-3, -7]> (a)\n"
                 "e = Slice <starts = [-1, 3], ends = [0, 1000], axes = [1, 0], steps = [-1, 2]> "
                 "(a)\noutput b\noutput c\noutput d\noutput e\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int64[4, 5, 6]\nb = Slice <starts = [1, -4], ends = [3, -1], axes = "
                 "[0, 2]> (a)\noutput b\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bool[9]\nb = Slice <starts = [7], ends = [-10], steps = [-2]> (a)\n"
                 "output b\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_slice_empty) {
    // an empty result writes nothing (no kernel); its neighbours still run
    CG_CHECK(HDR "input a : float[10, 20]\nb = Slice <starts = [5], ends = [2]> (a)\n"
                 "c = Slice <starts = [0], ends = [3]> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_gather) {
    // indices from an input in range [0, dim)
    CG_CHECK(HDR "input a : float[5, 4]\ninput idx : int64[3, 2]\n"
                 "b = Gather (a, idx)\noutput b\n",
             ((cg_tol){0, 0, 5, 0}));
    CG_CHECK(HDR "input a : float[3, 4, 6]\ninput idx : int32[7]\n"
                 "b = Gather <axis = 1> (a, idx)\nc = Gather <axis = -2> (a, idx)\noutput b\n"
                 "output c\n",
             ((cg_tol){0, 0, 4, 0}));
    CG_CHECK(HDR "input a : int64[6, 3]\ninput idx : int64[]\nb = Gather <axis = 0> (a, idx)\n"
                 "c = Gather <axis = 1> (a, idx)\noutput b\noutput c\n",
             ((cg_tol){0, 0, 3, 0}));
    // negative indices from consts
    CG_CHECK(HDR "input a : float[5, 4]\nconst idx : int64[3] = [-1, 0, 2]\n"
                 "const jdx : int32[2, 2] = [[-4, 3], [-2, 0]]\n"
                 "b = Gather (a, idx)\nc = Gather <axis = 1> (a, jdx)\nd = Gather <axis = -1> (a, "
                 "idx)\noutput b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[8, 3]\nconst idx : int64[4] = [-8, 7, -1, 3]\n"
                 "b = Gather (a, idx)\noutput b\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bool[4, 9]\nconst idx : int64[2] = [-9, 8]\n"
                 "b = Gather <axis = 1> (a, idx)\noutput b\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_expand) {
    CG_CHECK(HDR "input a : float[3, 1]\nb = Expand <shape = [2, 3, 5]> (a)\n"
                 "c = Expand <shape = [1, 1]> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int64[]\nb = Expand <shape = [4, 3]> (a)\noutput b\n", CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bool[1, 5, 1]\nb = Expand <shape = [3, 5, 2]> (a)\noutput b\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[7]\nb = Expand <shape = [2, 1, 7]> (a)\noutput b\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_pad) {
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    for (size_t i = 0; i < DL_ARRAY_LEN(modes); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 HDR "input a : float[3, 4]\ninput v : float[2, 3, 5]\ninput w : float[6]\n"
                     "b = Pad <mode = \"%s\", pads = [1, 2, 2, 3]> (a)\n"
                     "c = Pad <mode = \"%s\", pads = [0, -1, 2, 1, 0, -2]> (v)\n"
                     "d = Pad <mode = \"%s\", pads = [-2, 3]> (w)\n"
                     "e = Pad <mode = \"%s\", pads = [2, 0, 0, 0]> (a)\n"
                     "f = Pad <mode = \"%s\", pads = [-1, -1, 0, -2]> (a)\n"
                     "output b\noutput c\noutput d\noutput e\noutput f\n",
                 modes[i], modes[i], modes[i], modes[i], modes[i]);
        CG_CHECK(text, CG_TOL_EXACT);
    }
    // reflect/wrap pads larger than the dim; edge on a size-1 dim
    CG_CHECK(HDR "input a : float[2, 3]\nb = Pad <mode = \"wrap\", pads = [3, 7, 4, 5]> (a)\n"
                 "c = Pad <mode = \"reflect\", pads = [1, 4, 1, 4]> (a)\n"
                 "output b\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float[1, 1]\nb = Pad <mode = \"edge\", pads = [2, 1, 0, 3]> (a)\n"
                 "c = Pad <mode = \"reflect\", pads = [2, 1, 0, 3]> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
    // constant value: attribute, input (wins over the attribute), dtypes
    CG_CHECK(HDR "input a : float[3, 4]\ninput cv : float[]\n"
                 "b = Pad <pads = [1, 1, 1, 1], value = 2.5> (a)\n"
                 "c = Pad <pads = [1, 1, 1, 1], value = 2.5> (a, cv)\n"
                 "d = Pad <pads = [0, 1, 2, 0]> (a, cv)\noutput b\noutput c\noutput d\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : int64[3, 4]\nb = Pad <pads = [1, 0, 1, 2], value = 7> (a)\n"
                 "output b\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : bool[3, 4]\nb = Pad <pads = [1, 0, 1, 2], value = 1> (a)\n"
                 "c = Pad <mode = \"reflect\", pads = [1, 2, 1, 2]> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR "input a : float16[3, 4]\nb = Pad <pads = [1, 0, 1, 2], value = 0.1> (a)\n"
                 "c = Pad <pads = [0, 0, 0, 0]> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
    CG_CHECK(HDR
             "input a : bfloat16[2, 2, 3]\nb = Pad <mode = \"edge\", pads = [0, 1, 1, 1, 0, 2]> "
             "(a)\noutput b\n",
             CG_TOL_EXACT);
}

DL_TEST(shape_chain) {
    // data movement feeding elementwise ops and each other
    CG_CHECK(HDR "input a : float[4, 6]\nb = Transpose (a)\nc = Reshape <shape = [2, 12]> (b)\n"
                 "d, e = Split <axis = 1> (c)\nf = Concat <axis = 0> (e, d)\n"
                 "g = Slice <starts = [-1], ends = [-1000], axes = [0], steps = [-1]> (f)\n"
                 "h = Add (g, f)\noutput h\n",
             CG_TOL_ARITH);
}
