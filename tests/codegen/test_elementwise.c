// tests/codegen/test_elementwise.c — compiled elementwise ops against the reference evaluator.
// This file also holds the executable's main: the harness's (DL_TEST_MAIN, renamed) after
// cg_isa_setup has chosen the ISA level (cg_check.h) or skipped it.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_ir.h"
#include "dl_test.h"

#include <math.h>

int cg_harness_main(int argc, char **argv);
#define main cg_harness_main
DL_TEST_MAIN()
#undef main

int main(int argc, char **argv) {
    int st = cg_isa_setup();
    return st != 0 ? st : cg_harness_main(argc, argv);
}

DL_TEST(binary_broadcast) {
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div"};
    for (size_t i = 0; i < 4; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model m\ninput a : float[4, 3, 5]\ninput b : float[3, 1]\n"
                 "c = %s (a, b)\noutput c\n",
                 ops[i]);
        CG_CHECK(text, CG_TOL_ARITH);
        snprintf(text, sizeof text,
                 "model m\ninput a : float[]\ninput b : float[2, 7]\nc = %s (a, b)\noutput c\n",
                 ops[i]);
        CG_CHECK(text, CG_TOL_ARITH);
    }
}

DL_TEST(integer_arithmetic) {
    CG_CHECK("model m\ninput a : int64[6]\ninput b : int64[6]\nc = Add (a, b)\nd = Mul (c, a)\n"
             "e = Sub (d, b)\noutput e\n",
             CG_TOL_EXACT);
    CG_CHECK("model m\ninput a : int32[2, 5]\ninput pos_b : int32[5]\nc = Div (a, pos_b)\n"
             "output c\n",
             ((cg_tol){0, 0, 7, 3}));
}

// Ops whose reference is only real on positive inputs (the pos_ prefix draws those).
static bool positive_domain(const char *op) {
    return strcmp(op, "Log") == 0 || strcmp(op, "Sqrt") == 0 || strcmp(op, "Reciprocal") == 0;
}

// Every one-input elementwise op of the op table that takes a float (its shape rule says so)
// and is lowered through its scalar emitter, with default attributes: a new op is covered here
// as soon as its row exists.
DL_TEST(unary_math) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        const dl_ir_op_info *o = dl_ir_op_get_info((dl_ir_op)i);
        bool float_in = strcmp(o->shape_hook, "unary_float") == 0 ||
                        strcmp(o->shape_hook, "unary_numeric") == 0 ||
                        strcmp(o->shape_hook, "unary_any") == 0;
        if (!float_in || strcmp(o->lower_hook, "map") != 0 || o->max_inputs != 1) {
            continue;
        }
        const char *a = positive_domain(o->name) ? "pos_a" : "a";
        char text[512];
        snprintf(text, sizeof text, "model m\ninput %s : float[3, 17]\nb = %s (%s)\noutput b\n", a,
                 o->name, a);
        CG_CHECK(text, CG_TOL_MATH);
    }
    CG_CHECK("model m\ninput pos_a : float[33]\nb = Log (pos_a)\nc = Sqrt (pos_a)\n"
             "d = Reciprocal (pos_a)\ne = Pow (pos_a, pos_a)\noutput b\noutput c\noutput d\n"
             "output e\n",
             CG_TOL_MATH);
    CG_CHECK("model m\ninput a : float[40]\nb = Gelu <approximate = \"tanh\"> (a)\n"
             "c = LeakyRelu <alpha = 0.2> (a)\noutput b\noutput c\n",
             CG_TOL_MATH);
}

DL_TEST(compare_logic_where) {
    CG_CHECK("model m\ninput a : float[4, 6]\ninput b : float[6]\nc = Less (a, b)\n"
             "d = Greater (a, b)\ne = Equal (c, d)\nf = Not (e)\ng = And (c, f)\nh = Or (g, d)\n"
             "w = Where (h, a, b)\noutput h\noutput w\n",
             CG_TOL_EXACT);
    CG_CHECK("model m\ninput a : int64[10]\ninput b : int64[10]\nc = Equal (a, b)\noutput c\n",
             CG_TOL_EXACT);
}

DL_TEST(clip_max_min_cast) {
    CG_CHECK("model m\ninput a : float[5, 5]\nb = Clip <min = -0.5, max = 0.7> (a)\noutput b\n",
             CG_TOL_ARITH);
    CG_CHECK("model m\ninput a : float[5, 5]\ninput lo : float[]\nb = Clip (a, lo)\noutput b\n",
             CG_TOL_ARITH);
    CG_CHECK("model m\ninput a : float[2, 3]\ninput b : float[3]\ninput c : float[2, 1]\n"
             "x = Max (a, b, c)\ny = Min (a, b, c)\noutput x\noutput y\n",
             CG_TOL_ARITH);
    static const char *const to[] = {"float16", "bfloat16", "int32", "int64", "bool"};
    for (size_t i = 0; i < DL_ARRAY_LEN(to); i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model m\ninput a : float[64]\nb = Cast <to = \"%s\"> (a)\noutput b\n", to[i]);
        CG_CHECK(text, CG_TOL_EXACT);
    }
    CG_CHECK("model m\ninput a : int64[9]\nb = Cast <to = \"float\"> (a)\n"
             "c = Cast <to = \"int32\"> (a)\noutput b\noutput c\n",
             CG_TOL_EXACT);
}

DL_TEST(half_precision_storage) {
    CG_CHECK("model m\ninput a : float16[8, 8]\ninput b : float16[8]\nc = Add (a, b)\n"
             "output c\n",
             CG_TOL_EXACT);
    CG_CHECK("model m\ninput a : bfloat16[8, 8]\ninput b : bfloat16[8]\nc = Mul (a, b)\n"
             "output c\n",
             CG_TOL_EXACT);
}

DL_TEST(identity_dropout_consts) {
    CG_CHECK("model m\ninput a : float[3, 4]\nconst k : float[4] = [1, 2, 3, 4]\n"
             "b = Identity (a)\nc, mask = Dropout <ratio = 0.3> (b)\nd = Mul (c, k)\n"
             "output d\noutput mask\n",
             CG_TOL_ARITH);
}

// Training-mode Dropout: the compiled mask must be the evaluator's bit for bit (the counter-based
// RNG replicated in LLVM IR), with the ratio as attribute or input, the counter as a const or an
// input, training_mode as a const or a bool input; odd sizes split across threads.
DL_TEST(dropout_training_mode_masks) {
    static const char *const ratios[] = {"0.1", "0.5", "0.9375", "0.0"}; // ratio < 1 (shape)
    for (size_t i = 0; i < DL_ARRAY_LEN(ratios); i++) {
        char text[768];
        snprintf(text, sizeof text,
                 "model m\ninput a : float[7, 37]\nconst t : bool[] = 1\n"
                 "const cnt : int64[] = 5\n"
                 "y, mask = Dropout <ratio = %s, seed = 42> (a, , t, cnt)\n"
                 "output y\noutput mask\n",
                 ratios[i]);
        CG_CHECK(text, CG_TOL_EXACT);
        // ratio as an input, counter as an input (ints drawn from [0, 1000)), no counter.
        snprintf(text, sizeof text,
                 "model m\ninput a : float[3, 5, 11]\nconst r : float[] = %s\n"
                 "const t : bool[] = 1\ninput cnt : int64[]\n"
                 "y, mask = Dropout <seed = 7> (a, r, t, cnt)\n"
                 "z, m2 = Dropout <ratio = %s> (a, , t)\n"
                 "output y\noutput mask\noutput z\noutput m2\n",
                 ratios[i], ratios[i]);
        CG_CHECK(text, ((cg_tol){0, 0, 1000, 3}));
    }
    // training_mode as a bool input (either value), half-precision data, const false (identity).
    for (uint64_t seed = 1; seed <= 4; seed++) {
        CG_CHECK("model m\ninput a : float16[129]\ninput t : bool[]\n"
                 "y, mask = Dropout <ratio = 0.3, seed = 9> (a, , t)\noutput y\noutput mask\n",
                 ((cg_tol){1e-3, 1e-3, 0, seed}));
    }
    CG_CHECK("model m\ninput a : float[13]\nconst t : bool[] = 0\nconst cnt : int64[] = 3\n"
             "y, mask = Dropout <ratio = 0.5> (a, , t, cnt)\noutput y\noutput mask\n",
             CG_TOL_EXACT);
}

// Regressions found in review: NaN and -0 through Relu/Clip as the evaluator, exact integer
// Pow, and an empty elementwise output next to another buffer (it must not write anything).
DL_TEST(relu_clip_nan_and_negative_zero) {
    CG_CHECK("model m\ninput a : float[4]\nconst k : float[4] = [nan, -0.0, 2, -1]\n"
             "b = Add (a, k)\nr = Relu (b)\nc = Clip <min = -1.0, max = 1.0> (b)\n"
             "r2 = Relu (k)\nc2 = Clip <min = -1.0, max = 1.0> (k)\n"
             "output r\noutput c\noutput r2\noutput c2\n",
             CG_TOL_EXACT);
}

DL_TEST(integer_pow_is_exact) {
    CG_CHECK("model m\ninput a : int64[4]\nconst p : int64[4] = [3, 7, -5, 2]\n"
             "const q : int64[4] = [16, 9, 9, 5]\nr = Pow (p, q)\ns = Add (r, a)\noutput s\n",
             CG_TOL_EXACT);
}

DL_TEST(empty_elementwise_output_writes_nothing) {
    CG_CHECK("model m\ninput a : float[0, 4]\ninput b : float[4]\ny = Relu (a)\n"
             "z = Identity (b)\noutput y\noutput z\n",
             CG_TOL_EXACT);
}
