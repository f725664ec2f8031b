// tests/codegen/test_fusion.c — the fusion pass (passes/fusion.c) and fused kernels
// (codegen/lower_elem.c, dl_cg__lower_fused): which nodes group, and every fused model against
// the reference evaluator and, byte for byte, against the same model compiled unfused (cg_check
// does both for any model the pass groups).
#include "cg_check.h"
#include "dl_base.h"
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"

#include <string.h>

// Parses and shape-checks `text`, runs the fusion pass and compares its counts.
static bool groups_are(const char *text, size_t groups, size_t fused_nodes) {
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    dl_pass_fusion_stats st = {0};
    bool ok = dl_diags_create(&d) == DL_OK &&
              dl_fe_parse("fusion.dlg", text, strlen(text), d, &m) == DL_OK &&
              dl_pass_shape(m, d) == DL_OK && dl_pass_fusion(m, d, &st) == DL_OK;
    if (ok && (st.groups != groups || st.fused_nodes != fused_nodes)) {
        fprintf(stderr, "fusion: %zu groups of %zu nodes, want %zu of %zu:\n%s\n", st.groups,
                st.fused_nodes, groups, fused_nodes, text);
        ok = false;
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

#define FUSES(text, g, n, tol)                                                                     \
    do {                                                                                           \
        DL_CHECK(groups_are((text), (g), (n)));                                                    \
        CG_CHECK((text), (tol));                                                                   \
    } while (0)

DL_TEST(chain_with_broadcast_inputs) {
    // Five ops in one kernel; b broadcasts along rows, s is a scalar, c along columns.
    FUSES("model m\ninput a : float[6, 33]\ninput b : float[33]\ninput c : float[6, 1]\n"
          "const s : float[] = 0.5\n"
          "t1 = Add (a, b)\nt2 = Mul (t1, s)\nt3 = Relu (t2)\nt4 = Sub (t3, c)\nt5 = Tanh (t4)\n"
          "output t5\n",
          1, 5, CG_TOL_MATH);
}

DL_TEST(tree_and_repeated_input) {
    // Two chains meet in a Div (a tree); Mul (p, p) reads the member twice.
    FUSES("model m\ninput a : float[4, 5, 7]\ninput pos_b : float[4, 5, 7]\n"
          "p = Sigmoid (a)\nq = Mul (p, p)\nr = Sqrt (pos_b)\nu = Exp (r)\nv = Div (q, u)\n"
          "output v\n",
          1, 5, CG_TOL_MATH);
}

DL_TEST(escaping_values_are_not_fused) {
    // t1 is an output and t2 has two consumers (t3, t5), so both stay apart; t3 and t4 each have
    // one consumer: the one group is {t3, t4, t5}.
    FUSES("model m\ninput a : float[8, 9]\n"
          "t1 = Abs (a)\nt2 = Neg (t1)\nt3 = Exp (t2)\nt4 = Neg (t3)\nt5 = Add (t2, t4)\n"
          "output t1\noutput t5\n",
          1, 3, CG_TOL_MATH);
}

DL_TEST(integer_and_bool_chains) {
    // Compare, logic and Where over ints and bools: exact.
    FUSES("model m\ninput a : int64[5, 6]\ninput b : int64[6]\n"
          "c = Less (a, b)\nd = Not (c)\ne = Mul (a, b)\nf = Where (d, e, a)\ng = Add (f, b)\n"
          "output g\n",
          1, 5, CG_TOL_EXACT);
    FUSES("model m\ninput a : int32[17]\ninput b : int32[17]\n"
          "c = Sub (a, b)\nd = Max (c, a, b)\ne = Cast <to = \"float\"> (d)\nf = Neg (e)\n"
          "output f\n",
          1, 4, CG_TOL_EXACT);
}

DL_TEST(shape_changes_and_half_precision_stop_a_group) {
    // t1 broadcasts up to t2's dims (different dims: not fused); the float16 value would round
    // on a store, so it is not kept in a register.
    FUSES("model m\ninput a : float[7]\ninput b : float[3, 7]\n"
          "t1 = Exp (a)\nt2 = Add (t1, b)\nt3 = Relu (t2)\noutput t3\n",
          1, 2, CG_TOL_MATH);
    FUSES("model m\ninput a : float[4, 4]\n"
          "h = Cast <to = \"float16\"> (a)\nk = Cast <to = \"float\"> (h)\nl = Neg (k)\noutput l\n",
          1, 2, CG_TOL_ARITH);
}

DL_TEST(too_many_inputs_split_the_group) {
    // 17 distinct inputs cannot share one kernel (15 at most): the chain splits in two.
    char text[2048];
    size_t at = (size_t)snprintf(text, sizeof text, "model m\n");
    for (int i = 0; i < 17; i++) {
        at += (size_t)snprintf(text + at, sizeof text - at, "input x%d : float[3, 4]\n", i);
    }
    at += (size_t)snprintf(text + at, sizeof text - at, "s1 = Add (x0, x1)\n");
    for (int i = 2; i < 17; i++) {
        at += (size_t)snprintf(text + at, sizeof text - at, "s%d = Add (s%d, x%d)\n", i, i - 1, i);
    }
    snprintf(text + at, sizeof text - at, "output s16\n");
    FUSES(text, 2, 16, CG_TOL_ARITH);
}

DL_TEST(unary_grad_in_a_group) {
    // A backward chain as autodiff writes it: the derivative of Gelu times a scale, then Relu's.
    FUSES("model m\ninput dy : float[16, 40]\ninput x : float[16, 40]\ninput z : float[16, 40]\n"
          "g = UnaryGrad <op = \"Gelu\", approximate = \"none\"> (dy, x)\n"
          "h = Mul (g, z)\nk = UnaryGrad <op = \"Relu\"> (h, z)\noutput k\n",
          1, 3, CG_TOL_MATH);
}

DL_TEST(single_nodes_are_left_alone) {
    DL_CHECK(groups_are("model m\ninput a : float[3]\nb = Exp (a)\noutput b\n", 0, 0));
    // A reduction over a leading axis joins no map.
    DL_CHECK(groups_are("model m\ninput a : float[3, 4]\nb = Exp (a)\n"
                        "c = ReduceSum <axes = [0], keepdims = 1> (b)\nd = Log (c)\noutput d\n",
                        0, 0));
}

// A row reduction (ReduceSum / ReduceMean over the last axis, keepdims) with the maps that make
// its input and those that read its result broadcast along the row: one kernel, two passes per
// row (codegen/lower_elem.c, lower_row_fused).
DL_TEST(row_reductions) {
    // autodiff's Softmax gradient, dx = y * (dy - sum(dy * y)): four nodes, one kernel
    FUSES("model m\ninput dy : float[6, 4, 37]\ninput y : float[6, 4, 37]\n"
          "p = Mul (dy, y)\ns = ReduceSum <axes = [-1], keepdims = 1> (p)\nd = Sub (dy, s)\n"
          "dx = Mul (y, d)\noutput dx\n",
          1, 4, CG_TOL_REDUCE);
    // LogSoftmax's, dx = dy - exp(y) * sum(dy): the reduction reads an input
    FUSES("model m\ninput dy : float[17, 130]\ninput y : float[17, 130]\n"
          "s = ReduceSum <axes = [1], keepdims = 1> (dy)\ne = Exp (y)\nm = Mul (e, s)\n"
          "dx = Sub (dy, m)\noutput dx\n",
          1, 4, CG_TOL_MATH);
    // the reduction as the root (a mean of squares), and with the producer of its input only
    FUSES("model m\ninput a : float[19, 50]\ninput b : float[19, 50]\n"
          "t = Sub (a, b)\nq = Mul (t, t)\nv = ReduceMean <axes = [1], keepdims = 1> (q)\n"
          "output v\n",
          1, 3, CG_TOL_REDUCE);
    DL_CHECK(groups_are("model m\ninput a : float[16, 4]\nb = Exp (a)\n"
                        "c = ReduceSum <axes = [1], keepdims = 1> (b)\nd = Log (c)\noutput d\n",
                        1, 2));
    // inputs broadcast along the row (w), across rows (c) and a scalar, rank 3, a row of 1
    FUSES("model m\ninput a : float[6, 3, 20]\ninput w : float[20]\ninput c : float[6, 1, 1]\n"
          "const h : float[] = 0.5\n"
          "p = Mul (a, w)\ns = ReduceSum <axes = [2], keepdims = 1> (p)\nd = Sub (a, s)\n"
          "e = Mul (d, c)\nf = Mul (e, h)\noutput f\n",
          1, 5, CG_TOL_REDUCE);
    FUSES("model m\ninput a : float[40, 1]\ninput b : float[40, 1]\n"
          "p = Mul (a, b)\ns = ReduceSum <axes = [-1], keepdims = 1> (p)\nd = Sub (a, s)\n"
          "output d\n",
          1, 3, CG_TOL_REDUCE);
    // Two reductions (a normalisation written by hand): one per group. t has two uses, so it
    // ends the first group; the second gathers Mul (t, t), its sum and the Div.
    FUSES("model m\ninput a : float[17, 33]\n"
          "s1 = ReduceMean <axes = [-1], keepdims = 1> (a)\nt = Sub (a, s1)\nq = Mul (t, t)\n"
          "s2 = ReduceSum <axes = [-1], keepdims = 1> (q)\nu = Div (t, s2)\noutput u\n",
          2, 5, CG_TOL_REDUCE);
    // Not a row group: fewer than 16 rows (the separate maps split every element across the
    // threads), keepdims 0, a product's epilogue (Gemm + Relu group; the sum stays apart), a sum
    // whose result is also an output.
    DL_CHECK(groups_are("model m\ninput a : float[15, 64]\nb = Exp (a)\n"
                        "c = ReduceSum <axes = [1], keepdims = 1> (b)\nd = Sub (a, c)\noutput d\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput a : float[16, 4]\nb = Exp (a)\n"
                        "c = ReduceSum <axes = [1], keepdims = 0> (b)\noutput c\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput x : float[20, 8]\ninput w : float[8, 5]\n"
                        "h = Gemm (x, w)\nr = Relu (h)\n"
                        "s = ReduceSum <axes = [1], keepdims = 1> (r)\noutput s\n",
                        1, 2));
    DL_CHECK(groups_are("model m\ninput a : float[16, 4]\n"
                        "s = ReduceSum <axes = [1], keepdims = 1> (a)\nd = Sub (a, s)\n"
                        "output s\noutput d\n",
                        0, 0));
}

// Softmax, LogSoftmax and LayerNormalization over the last axis are row nodes too: the maps
// that make their input X and those that read their output join them, one kernel of three
// passes per row (codegen/lower_elem.c, lower_row_fused).
DL_TEST(row_operations) {
    // attention's scaled, masked scores: Softmax (s * h + mask), its producers; a scalar and a
    // mask broadcast across the batch and heads
    FUSES("model m\ninput s : float[2, 3, 8, 40]\ninput mask : float[8, 40]\n"
          "const h : float[] = 0.125\n"
          "t = Mul (s, h)\nu = Add (t, mask)\np = Softmax <axis = -1> (u)\noutput p\n",
          1, 3, CG_TOL_MATH);
    // a consumer too (Dropout-like scaling), and Softmax with no producer
    FUSES("model m\ninput a : float[17, 130]\ninput k : float[17, 130]\n"
          "p = Softmax <axis = 1> (a)\nq = Mul (p, k)\nr = Sqrt (q)\noutput r\n",
          1, 3, CG_TOL_MATH);
    // LogSoftmax between a producer and a consumer; a row of 1
    FUSES("model m\ninput a : float[24, 33]\ninput b : float[33]\n"
          "t = Sub (a, b)\nl = LogSoftmax <axis = -1> (t)\nn = Neg (l)\noutput n\n",
          1, 3, CG_TOL_MATH);
    FUSES("model m\ninput a : float[20, 1]\ninput b : float[20, 1]\n"
          "t = Add (a, b)\nl = LogSoftmax <axis = 1> (t)\noutput l\n",
          1, 2, CG_TOL_MATH);
    // LayerNormalization of a residual sum, with and without a bias, then a Relu; rank 3
    FUSES("model m\ninput x : float[4, 6, 64]\ninput y : float[4, 6, 64]\n"
          "input g : float[64]\ninput b : float[64]\n"
          "r = Add (x, y)\nn = LayerNormalization <axis = -1, epsilon = 1e-5> (r, g, b)\n"
          "o = Relu (n)\noutput o\n",
          1, 3, CG_TOL_MATH);
    // a scale that also scales the producer; a scale and bias of one element; dims of 1
    FUSES("model m\ninput x : float[16, 50]\ninput g : float[50]\n"
          "t = Mul (x, g)\nn = LayerNormalization <axis = 1> (t, g)\noutput n\n",
          1, 2, CG_TOL_MATH);
    FUSES("model m\ninput x : float[1, 18, 1, 24]\ninput y : float[1, 18, 1, 24]\n"
          "input g : float[1]\ninput b : float[1]\n"
          "t = Sub (x, y)\nn = LayerNormalization <axis = -1> (t, g, b)\noutput n\n",
          1, 2, CG_TOL_MATH);
    // rows masked with -inf (Log of a 0/1 mask, folded to a constant): a whole row of them gives
    // NaN, as the evaluator's; and a bool root (no exponentials kept in the output row)
    FUSES("model m\ninput s : float[16, 4]\n"
          "const k : float[16, 4] = [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0],\n"
          "  [1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1],\n"
          "  [1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]\n"
          "lk = Log (k)\nt = Add (s, lk)\np = Softmax <axis = -1> (t)\noutput p\n",
          1, 2, CG_TOL_MATH);
    FUSES("model m\ninput a : float[20, 30]\nconst h : float[] = 0.05\n"
          "p = Softmax <axis = -1> (a)\nq = Greater (p, h)\noutput q\n",
          1, 2, CG_TOL_MATH);
    // the output in the memory of an input the group reads in every pass (e: its own kernel,
    // two readers, the last of them the group): the in-place versions recompute exp(x - m)
    FUSES("model m\ninput a : float[32, 72]\ninput b : float[72]\n"
          "e = Exp (a)\nt = Add (e, b)\np = Softmax <axis = -1> (t)\nq = Mul (p, e)\noutput q\n",
          1, 3, CG_TOL_MATH);
    FUSES("model m\ninput a : float[32, 72]\ninput g : float[72]\n"
          "e = Exp (a)\nt = Neg (e)\nn = LayerNormalization <axis = -1> (t, g)\n"
          "l = LogSoftmax <axis = -1> (e)\nq = Mul (n, e)\nr = Add (q, l)\noutput r\n",
          2, 5, CG_TOL_MATH);
    // in place on the row operation's own input (Softmax, no producer) and on its producer's
    // (LayerNormalization): e has a reader before the group, which is its last
    FUSES("model m\ninput a : float[24, 40]\n"
          "e = Exp (a)\nu = Abs (e)\np = Softmax <axis = -1> (e)\nq = Mul (p, p)\n"
          "s = ReduceSum <axes = [0], keepdims = 1> (q)\noutput u\noutput s\n",
          1, 2, CG_TOL_MATH);
    FUSES("model m\ninput a : float[24, 40]\ninput g : float[40]\n"
          "e = Exp (a)\nu = Abs (e)\nt = Neg (e)\nn = LayerNormalization <axis = -1> (t, g)\n"
          "q = Relu (n)\ns = ReduceSum <axes = [0], keepdims = 1> (q)\noutput u\noutput s\n",
          1, 3, CG_TOL_MATH);
    // Not row nodes: fewer than 16 rows, an axis that is not the last, LayerNormalization's
    // Mean output asked for, a producer that is also the scale (read along the row), and a
    // second row node (the first one's value ends its group: Softmax of a Softmax)
    DL_CHECK(groups_are("model m\ninput a : float[15, 8]\nb = Exp (a)\n"
                        "p = Softmax <axis = -1> (b)\noutput p\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput a : float[16, 8, 4]\nb = Exp (a)\n"
                        "p = Softmax <axis = 1> (b)\noutput p\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput x : float[16, 8]\ninput g : float[8]\n"
                        "t = Exp (x)\nn, mu = LayerNormalization <axis = -1> (t, g)\n"
                        "output n\noutput mu\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput x : float[16, 8]\ninput g : float[8]\n"
                        "s = Exp (g)\nn = LayerNormalization <axis = -1> (x, s)\noutput n\n",
                        0, 0));
    // a producer that is not cheap (recomputed in each pass: it stays a kernel of its own)
    DL_CHECK(groups_are("model m\ninput x : float[16, 50]\ninput g : float[50]\n"
                        "t = Tanh (x)\nn = LayerNormalization <axis = 1> (t, g)\noutput n\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput x : float[16, 50]\ninput y : float[16, 50]\n"
                        "t = Exp (x)\nu = Add (t, y)\np = Softmax <axis = 1> (u)\noutput p\n",
                        1, 2));
    FUSES("model m\ninput a : float[16, 24]\ninput b : float[16, 24]\n"
          "t = Add (a, b)\np = Softmax <axis = -1> (t)\nq = Softmax <axis = -1> (p)\n"
          "r = Neg (q)\noutput r\n",
          2, 4, CG_TOL_MATH);
}

// A product (Gemm, MatMul) heads a group: its elementwise consumers become its epilogue, on
// every GEMM path (matrix-vector, small, blocked) and with broadcast epilogue inputs.
DL_TEST(product_epilogues) {
    static const char *const shapes[][3] = {
        {"1, 40", "40, 300", "300"},    // one row: the matrix-vector kernel
        {"5, 7", "7, 9", "9"},          // small
        {"70, 150", "150, 130", "130"}, // blocked, ragged tiles
    };
    for (size_t s = 0; s < 3; s++) {
        char text[1024];
        // bias, then Relu: the Linear layer's forward
        snprintf(text, sizeof text,
                 "model m\ninput x : float[%s]\ninput w : float[%s]\ninput b : float[%s]\n"
                 "h = Gemm (x, w, b)\na = Relu (h)\noutput a\n",
                 shapes[s][0], shapes[s][1], shapes[s][2]);
        FUSES(text, 1, 2, CG_TOL_REDUCE);
        // a chain reading a row vector, a column vector and a scalar: all broadcast over [M, N]
        snprintf(text, sizeof text,
                 "model m\ninput x : float[%s]\ninput w : float[%s]\ninput r : float[%s]\n"
                 "input c : float[%s]\nconst s : float[] = 0.75\n"
                 "h = MatMul (x, w)\nt1 = Add (h, r)\nt2 = Mul (t1, s)\nt3 = Sub (t2, c)\n"
                 "t4 = LeakyRelu <alpha = 0.1> (t3)\noutput t4\n",
                 shapes[s][0], shapes[s][1], shapes[s][2], s == 0 ? "1, 1" : "1");
        FUSES(text, 1, 5, CG_TOL_REDUCE);
    }
    // transposed weights at one row, with the backward's activation gradient as the epilogue
    FUSES("model m\ninput dy : float[1, 50]\ninput w : float[64, 50]\ninput y : float[1, 64]\n"
          "dx = Gemm <transB = 1> (dy, w)\ng = UnaryGrad <op = \"Relu\"> (dx, y)\noutput g\n",
          1, 2, CG_TOL_REDUCE);
    // ... and at the small MLP's last layer (32 x 256 x 8: the small tiled kernel copies B to rows)
    FUSES("model m\ninput dy : float[32, 8]\ninput w : float[256, 8]\ninput y : float[32, 256]\n"
          "dx = Gemm <transB = 1> (dy, w)\ng = UnaryGrad <op = \"Relu\"> (dx, y)\noutput g\n",
          1, 2, CG_TOL_REDUCE);
    // a residual add reading a same-dims input, alpha and beta with a [M, 1] C
    FUSES("model m\ninput x : float[33, 20]\ninput w : float[20, 17]\ninput c : float[33, 1]\n"
          "input res : float[33, 17]\n"
          "h = Gemm <alpha = 0.5, beta = 2.0> (x, w, c)\nr = Add (res, h)\noutput r\n",
          1, 2, CG_TOL_REDUCE);
    // the blocked kernel's vector pass over its scratch: a same-dims residual and an activation
    // read as rows (the last panel 2 columns wide: masked), a value per row ([M, 1]) and the
    // activation gradient, beside the same epilogue at one row and in the small kernel
    static const char *const rows[][2] = {
        {"70, 150", "150, 130"}, {"1, 40", "40, 300"}, {"5, 7", "7, 9"}};
    for (size_t s = 0; s < 3; s++) {
        char text[1024];
        const char *m = s == 0   ? "70"
                        : s == 1 ? "1"
                                 : "5",
                   *n = s == 0   ? "130"
                        : s == 1 ? "300"
                                 : "9";
        snprintf(text, sizeof text,
                 "model m\ninput x : float[%s]\ninput w : float[%s]\ninput res : float[%s, %s]\n"
                 "input col : float[%s, 1]\ninput y : float[%s, %s]\n"
                 "h = MatMul (x, w)\nt1 = Add (h, res)\nt2 = Mul (t1, col)\n"
                 "g = UnaryGrad <op = \"Relu\"> (t2, y)\noutput g\n",
                 rows[s][0], rows[s][1], m, n, m, m, n);
        FUSES(text, 1, 4, CG_TOL_REDUCE);
    }
    // a member made before the product in node order: the group is lowered product first
    FUSES("model m\ninput a : float[40, 30]\ninput w : float[30, 50]\ninput c : float[40, 50]\n"
          "q = Neg (c)\nv = MatMul (a, w)\ns = Add (v, q)\noutput s\n",
          1, 3, CG_TOL_REDUCE);
}

DL_TEST(products_that_stay_alone) {
    // Two products meet in one Add: only one of them heads the group.
    FUSES("model m\ninput x : float[6, 8]\ninput w : float[8, 5]\ninput v : float[8, 5]\n"
          "p = MatMul (x, w)\nq = MatMul (x, v)\nr = Add (p, q)\noutput r\n",
          1, 2, CG_TOL_REDUCE);
    // A transcendental stays out of a product's epilogue (its own vectorised map is faster):
    // the Add joins the product, the Tanh after it does not.
    DL_CHECK(groups_are("model m\ninput x : float[6, 8]\ninput w : float[8, 5]\n"
                        "input r : float[6, 5]\n"
                        "p = MatMul (x, w)\nq = Add (p, r)\nt = Tanh (q)\noutput t\n",
                        1, 2));
    DL_CHECK(groups_are("model m\ninput dy : float[6, 8]\ninput w : float[5, 8]\n"
                        "input x : float[6, 5]\ndx = Gemm <transB = 1> (dy, w)\n"
                        "g = UnaryGrad <op = \"Gelu\", approximate = \"none\"> (dx, x)\noutput g\n",
                        0, 0));
    // A product whose value has a second use, an integer product and a float16 product head
    // nothing.
    DL_CHECK(groups_are("model m\ninput x : float[6, 8]\ninput w : float[8, 5]\n"
                        "p = MatMul (x, w)\nr = Relu (p)\ns = Add (p, r)\noutput s\n",
                        1, 2)); // r and s only
    DL_CHECK(groups_are("model m\ninput x : int32[6, 8]\ninput w : int32[8, 5]\n"
                        "p = MatMul (x, w)\nr = Neg (p)\noutput r\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput x : float16[6, 8]\ninput w : float16[8, 5]\n"
                        "p = MatMul (x, w)\nr = Relu (p)\noutput r\n",
                        0, 0));
}

// A batched MatMul heads a group whose members read only the group's values and
// single-element values (its epilogue knows the row and column in a batch, not the batch):
// attention's scaled scores, on every GEMM path, with broadcast and transposed operands.
DL_TEST(batched_product_epilogues) {
    FUSES("model m\ninput x : float[2, 6, 8]\ninput w : float[8, 5]\n"
          "p = MatMul (x, w)\nr = Relu (p)\noutput r\n",
          1, 2, CG_TOL_REDUCE);
    FUSES("model m\ninput q : float[2, 3, 70, 40]\ninput k : float[2, 3, 130, 40]\n"
          "const s : float[] = 0.15811388\n"
          "kt = Transpose <perm = [0, 1, 3, 2]> (k)\nt = MatMul (q, kt)\nu = Mul (t, s)\n"
          "v = LeakyRelu <alpha = 0.1> (u)\noutput v\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput a : float[4, 1, 40]\ninput b : float[4, 40, 300]\n"
          "input d : float[1]\np = MatMul (a, b)\nr = Div (p, d)\noutput r\n",
          1, 2, CG_TOL_REDUCE);
    FUSES("model m\ninput a : float[3, 5, 7]\ninput b : float[3, 7, 9]\n"
          "const h : float[1, 1, 1] = [[[0.5]]]\np = MatMul (a, b)\nr = Mul (h, p)\nn = Neg (r)\n"
          "output n\n",
          1, 3, CG_TOL_REDUCE);
    // Not fused: a member reading a tensor (a mask over the scores) or a non-cheap member.
    DL_CHECK(groups_are("model m\ninput q : float[2, 4, 8]\ninput k : float[2, 8, 4]\n"
                        "input mask : float[4, 4]\np = MatMul (q, k)\nr = Add (p, mask)\n"
                        "output r\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput q : float[2, 4, 8]\ninput k : float[2, 8, 4]\n"
                        "p = MatMul (q, k)\nr = Exp (p)\noutput r\n",
                        0, 0));
}

DL_TEST(pooling_gradient_epilogues) {
    // MaxPoolGrad over 2 x 2 windows that tile x, then the gradient of the Relu before the
    // pooling (reading r at dx's index): one kernel. The vector path (two chunks of windows per
    // row and a masked last one), then 2 x 3 windows (the scalar path), and a longer chain with
    // a Mul reading the pooling's input x itself.
    FUSES("model m\ninput dy : float[2, 3, 4, 21]\ninput x : float[2, 3, 8, 42]\n"
          "input r : float[2, 3, 8, 42]\n"
          "g = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, x)\n"
          "y = UnaryGrad <op = \"Relu\"> (g, r)\noutput y\n",
          1, 2, CG_TOL_EXACT);
    FUSES("model m\ninput dy : float[1, 2, 3, 4]\ninput x : float[1, 2, 6, 12]\n"
          "input r : float[1, 2, 6, 12]\n"
          "g = MaxPoolGrad <kernel_shape = [2, 3], strides = [2, 3]> (dy, x)\n"
          "y = UnaryGrad <op = \"Relu\"> (g, r)\noutput y\n",
          1, 2, CG_TOL_EXACT);
    FUSES("model m\ninput dy : float[2, 2, 3, 5]\ninput x : float[2, 2, 6, 10]\n"
          "g = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, x)\n"
          "h = Mul (g, x)\nk = Neg (h)\ny = UnaryGrad <op = \"Relu\"> (k, x)\noutput y\n",
          1, 4, CG_TOL_ARITH);
    // Not fused: windows that leave a bottom row uncovered, overlapping windows, a member
    // reading a value of other dims (broadcast), a MaxPoolGrad whose dx is also an output.
    DL_CHECK(groups_are("model m\ninput dy : float[1, 2, 4, 5]\ninput x : float[1, 2, 9, 10]\n"
                        "input r : float[1, 2, 9, 10]\n"
                        "g = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, x)\n"
                        "y = UnaryGrad <op = \"Relu\"> (g, r)\noutput y\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput dy : float[1, 2, 7, 9]\ninput x : float[1, 2, 8, 10]\n"
                        "input r : float[1, 2, 8, 10]\n"
                        "g = MaxPoolGrad <kernel_shape = [2, 2]> (dy, x)\n"
                        "y = UnaryGrad <op = \"Relu\"> (g, r)\noutput y\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput dy : float[1, 2, 4, 5]\ninput x : float[1, 2, 8, 10]\n"
                        "input s : float[10]\n"
                        "g = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, x)\n"
                        "y = Mul (g, s)\noutput y\n",
                        0, 0));
    DL_CHECK(groups_are("model m\ninput dy : float[1, 2, 4, 5]\ninput x : float[1, 2, 8, 10]\n"
                        "g = MaxPoolGrad <kernel_shape = [2, 2], strides = [2, 2]> (dy, x)\n"
                        "y = Neg (g)\noutput g\noutput y\n",
                        0, 0));
}

DL_TEST(convolution_epilogues) {
    // Conv + Relu (implicit GEMM: 16 channels x 64 positions x 72 taps) and Conv + LeakyRelu +
    // Mul (a member reading a member twice; the direct kernel: one input channel) are one kernel.
    FUSES("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[16, 8, 3, 3]\n"
          "input b : float[16]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ny = Relu (v)\n"
          "output y\n",
          1, 2, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 1, 9, 9]\ninput w : float[4, 1, 3, 3]\n"
          "v = Conv (x, w)\nu = LeakyRelu <alpha = 0.2> (v)\ny = Mul (u, u)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    // Residual Adds: a value of the convolution's dims joins its epilogue, loaded at the
    // element stored (the implicit GEMM: 8 channels; the direct kernel: one input channel, and
    // NVPTX's for every case), also when it is one of the convolution's own inputs. A value
    // broadcast along other dims than the channels keeps its node out
    // (convolution_channel_values).
    FUSES("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w)\ns = Add (v, x)\nr = Relu (s)\noutput r\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[1, 4, 5, 5]\ninput w : float[4, 4, 1, 1]\n"
          "input b : float[4]\nv = Conv (x, w, b)\nr = Relu (v)\ns = Add (r, x)\noutput s\n",
          1, 3, CG_TOL_REDUCE);
    // ResNet's second convolution of a block (32 channels, 14 x 14 images: Winograd's tiles
    // on AVX2, a 196-column panel group with a partial last panel on AVX-512's implicit GEMM)
    // with its bias, the residual and a scaled shortcut.
    FUSES("model m\ninput x : float[2, 32, 14, 14]\ninput w : float[32, 32, 3, 3]\n"
          "input b : float[32]\ninput h : float[2, 32, 14, 14]\ninput k : float[2, 32, 14, 14]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w, b)\ns = Add (v, h)\nt = Mul (k, s)\n"
          "r = Relu (t)\noutput r\n",
          1, 4, CG_TOL_WINO);
    // The direct kernel (one input channel), 29 columns (a partial last tile, its ext lanes
    // masked), a residual and a LeakyRelu; then Abs, which goes lane by lane.
    FUSES("model m\ninput x : float[2, 1, 7, 29]\ninput w : float[5, 1, 3, 3]\n"
          "input h : float[2, 5, 7, 29]\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
          "s = Add (h, v)\nr = LeakyRelu <alpha = 0.1> (s)\noutput r\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 1, 7, 29]\ninput w : float[5, 1, 3, 3]\n"
          "input h : float[2, 5, 7, 29]\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
          "s = Sub (v, h)\nr = Abs (s)\noutput r\n",
          1, 3, CG_TOL_REDUCE);
    // A member made before the convolution in node order (the residual's Neg): the group is
    // lowered head first. Grouped convolutions (groups = 2) read the residual at their group's
    // channels: the implicit GEMM (16 channels a group) and the direct kernel (1 input channel
    // a group).
    FUSES("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
          "input h : float[2, 8, 8, 8]\nq = Neg (h)\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
          "s = Add (v, q)\nr = Relu (s)\noutput r\n",
          1, 4, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 32, 10, 10]\ninput w : float[32, 16, 3, 3]\n"
          "input h : float[2, 32, 10, 10]\n"
          "v = Conv <pads = [1, 1, 1, 1], group = 2> (x, w)\ns = Add (v, h)\noutput s\n",
          1, 2, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 2, 9, 21]\ninput w : float[6, 1, 3, 3]\n"
          "input h : float[2, 6, 9, 21]\n"
          "v = Conv <pads = [1, 1, 1, 1], group = 2> (x, w)\ns = Add (v, h)\noutput s\n",
          1, 2, CG_TOL_REDUCE);
    // A group that reads a residual stores its full value: a MaxPool after it stays apart.
    DL_CHECK(groups_are("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
                        "v = Conv <pads = [1, 1, 1, 1]> (x, w)\ns = Add (v, x)\nr = Relu (s)\n"
                        "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
                        1, 3));
}

DL_TEST(convolution_channel_values) {
    // Values per channel ([C, 1, 1], [1, C, 1, 1]) and single elements join a convolution's
    // epilogue, each loaded at the stored element's channel: an inference BatchNorm written as
    // Mul and Add, then Relu (the implicit GEMM, 16 channels, and its vector epilogue); with a
    // residual and groups = 2 (each group reads its own channels: bias_off); the direct kernel
    // (one input channel, 29 columns: a partial last tile) with a single element, and Abs, which
    // goes lane by lane; the direct kernel's groups.
    FUSES("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[16, 8, 3, 3]\n"
          "input s : float[16, 1, 1]\ninput t : float[16, 1, 1]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nu = Mul (v, s)\nh = Add (u, t)\n"
          "r = Relu (h)\noutput r\n",
          1, 4, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 32, 10, 10]\ninput w : float[32, 16, 3, 3]\n"
          "input b : float[32]\ninput s : float[1, 32, 1, 1]\ninput h : float[2, 32, 10, 10]\n"
          "v = Conv <pads = [1, 1, 1, 1], group = 2> (x, w, b)\nu = Mul (s, v)\n"
          "a = Add (u, h)\nr = Relu (a)\noutput r\n",
          1, 4, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 1, 7, 29]\ninput w : float[5, 1, 3, 3]\n"
          "input s : float[5, 1, 1]\nconst k : float[1] = 0.5\ninput h : float[2, 5, 7, 29]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nu = Sub (v, s)\nq = Mul (u, k)\n"
          "a = Add (q, h)\nr = Abs (a)\noutput r\n",
          1, 5, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 2, 9, 21]\ninput w : float[6, 1, 3, 3]\n"
          "input t : float[6, 1, 1]\n"
          "v = Conv <pads = [1, 1, 1, 1], group = 2> (x, w)\ns = Add (v, t)\n"
          "r = LeakyRelu <alpha = 0.1> (s)\noutput r\n",
          1, 3, CG_TOL_REDUCE);
    // Broadcast along the columns ([8]) or the rows ([8, 1]): the Add stays apart. A group
    // that reads a value per channel stores its full value: a MaxPool after it stays apart.
    DL_CHECK(groups_are("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
                        "input c : float[8]\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                        "s = Add (v, c)\nr = Relu (s)\noutput r\n",
                        1, 2));
    DL_CHECK(groups_are("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
                        "input c : float[8, 1]\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                        "s = Add (v, c)\nr = Relu (s)\noutput r\n",
                        1, 2));
    DL_CHECK(groups_are("model m\ninput x : float[2, 8, 8, 8]\ninput w : float[8, 8, 3, 3]\n"
                        "input c : float[8, 1, 1]\nv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                        "s = Mul (v, c)\nr = Relu (s)\n"
                        "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
                        1, 3));
}

// The direct kernel's pooled rows in registers (both window rows in one tile, pooled on the
// vectors, x86_nn.c's conv_tile_pooled), against the evaluator bit for bit where it matters:
// a NaN pixel (every window it reaches is NaN), a channel of zero weights and a -0 bias (every
// tap ties at -0, LeakyRelu keeps the sign), 29 columns (a 13-column last tile whose odd column
// pools nothing) and 13 channels (a register block of 12 and one of 1). LeakyRelu and Relu go
// through the vector epilogue, Abs lane by lane.
DL_TEST(convolution_pooling_in_registers) {
    double x[6 * 29], w[13 * 9], b[13];
    for (int i = 0; i < 6 * 29; i++) {
        x[i] = ((i * 37) % 23 - 11) / 7.0;
    }
    x[2 * 29 + 5] = NAN;
    for (int i = 0; i < 13 * 9; i++) {
        w[i] = i < 9 ? 0.0 : ((i * 11) % 17 - 8) / 9.0;
    }
    for (int i = 0; i < 13; i++) {
        b[i] = i == 0 ? -0.0 : (i % 5 - 2) / 4.0;
    }
    const cg_data given[] = {{"x", x, 6 * 29}, {"w", w, 13 * 9}, {"b", b, 13}};
    static const char *const acts[] = {"LeakyRelu <alpha = 0.1>", "Relu", "Abs"};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model m\ninput x : float[1, 1, 6, 29]\ninput w : float[13, 1, 3, 3]\n"
                 "input b : float[13]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = %s (v)\n"
                 "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
                 acts[a]);
        DL_CHECK(groups_are(text, 1, 3));
        DL_CHECK(cg_check_io(text, CG_TOL_REDUCE, NULL, 0, given, 3, NULL));
    }
}

DL_TEST(convolution_pooling) {
    // Conv (+ Relu) + a 2 x 2 / stride 2 MaxPool: one kernel that stores only the pooled value.
    // The implicit GEMM (one column group per image; odd rows and columns: floor, the last
    // ones dropped), the direct kernel (one input channel, the CNN benchmark's first layer:
    // 28 columns in padded tiles), a lone Conv, and images larger than one column group
    // (groups of whole row pairs, 240 + 240 + 96 columns; 13 columns: groups of 234 + 104,
    // each ending in a partial panel). One image whose every row pair fits one group is cut
    // into two groups of half its row pairs (9 rows: 2 + 2 pairs and the odd row; 24 rows: 6 + 6).
    FUSES("model m\ninput x : float[2, 8, 10, 12]\ninput w : float[16, 8, 3, 3]\n"
          "input b : float[16]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[1, 8, 9, 11]\ninput w : float[12, 8, 3, 3]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[2, 1, 28, 28]\ninput w : float[32, 1, 3, 3]\n"
          "input b : float[32]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[1, 1, 7, 13]\ninput w : float[5, 1, 2, 2]\n"
          "v = Conv (x, w)\ny = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (v)\n"
          "output y\n",
          1, 2, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[1, 8, 26, 13]\ninput w : float[10, 8, 3, 3]\n"
          "input b : float[10]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    // 33-column rows: with AVX2 groups of 198 and 33 columns, partial panels of 6 and 1 (LLVM
    // 19's store-forwarding pass aborted on this kernel's masked accesses: it is off).
    FUSES("model m\ninput x : float[1, 4, 7, 33]\ninput w : float[13, 4, 3, 3]\n"
          "v = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (v)\noutput y\n",
          1, 2, CG_TOL_REDUCE);
    // 14 x 14 images (the CNN's conv2): each 196-column group ends in a 4-column panel, run at
    // half width, as do the 12- and 11-column ones of the 9 x 11 image above.
    FUSES("model m\ninput x : float[2, 16, 14, 14]\ninput w : float[20, 16, 3, 3]\n"
          "input b : float[20]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    FUSES("model m\ninput x : float[1, 16, 24, 24]\ninput w : float[8, 16, 3, 3]\n"
          "input b : float[8]\nv = Conv <pads = [1, 1, 1, 1]> (x, w, b)\nr = Relu (v)\n"
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\noutput y\n",
          1, 3, CG_TOL_REDUCE);
    // Not pooled in the kernel: the activation is also an output (a training step's MaxPoolGrad
    // reads it the same way), overlapping windows, stride 1, padding, ceil_mode, Indices.
    static const char *const pools[] = {
        "kernel_shape = [3, 3], strides = [2, 2]",
        "kernel_shape = [2, 2]",
        "kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1]",
        "kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1",
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(pools); i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model m\ninput x : float[1, 4, 9, 9]\ninput w : float[8, 4, 3, 3]\n"
                 "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nr = Relu (v)\n"
                 "y = MaxPool <%s> (r)\noutput y\n",
                 pools[i]);
        DL_CHECK(groups_are(text, 1, 2));
    }
    DL_CHECK(groups_are("model m\ninput x : float[1, 4, 8, 8]\ninput w : float[8, 4, 3, 3]\n"
                        "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nr = Relu (v)\n"
                        "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\n"
                        "output r\noutput y\n",
                        1, 2));
    DL_CHECK(groups_are("model m\ninput x : float[1, 4, 8, 8]\ninput w : float[8, 4, 3, 3]\n"
                        "v = Conv <pads = [1, 1, 1, 1]> (x, w)\nr = Relu (v)\n"
                        "y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\n"
                        "output y\noutput i\n",
                        1, 2));
}
