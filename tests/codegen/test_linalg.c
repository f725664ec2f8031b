// tests/codegen/test_linalg.c — compiled MatMul and Gemm against the reference evaluator.
//
// Shapes are chosen around the blocking of codegen/x86/x86_linalg.c (MR x NR = 6 x 16 on AVX2,
// 12 x 32 on AVX-512, row blocks of 8 MR, K blocks of 4096 / NR): odd sizes below one tile,
// sizes with remainders in M, N and K past one block, and batch broadcasting. Float sums
// accumulate in f32 (the reference in double), so tolerances are CG_TOL_REDUCE, widened with K
// where K is large: the rounding error of a K-term f32 dot product of values in [-2, 2) grows
// like sqrt(K) * 4 * 2^-24 * |terms|, i.e. ~1e-4 absolute at K = 600.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"
#include "dlrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Looser absolute tolerance for long float32 dot products (see the file comment).
#define TOL_LONG_K ((cg_tol){5e-4, 1e-4, 0, 0})

static bool mm(const char *dt, const char *ashape, const char *bshape, cg_tol tol) {
    char text[512];
    snprintf(text, sizeof text,
             "model m\ninput a : %s[%s]\ninput b : %s[%s]\nc = MatMul (a, b)\noutput c\n", dt,
             ashape, dt, bshape);
    return cg_check(text, tol);
}

DL_TEST(matmul_2d) {
    DL_CHECK(mm("float", "3, 4", "4, 5", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "1, 1", "1, 1", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "6, 16", "16, 16", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "7, 13", "13, 5", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "65, 33", "33, 17", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "2, 40", "40, 3", CG_TOL_REDUCE));
}

DL_TEST(matmul_1d) {
    DL_CHECK(mm("float", "13", "13, 5", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "7, 13", "13", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "9", "9", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "3, 17", "17", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "17", "2, 17, 33", CG_TOL_REDUCE)); // 1-D a against a batch
    DL_CHECK(mm("float", "2, 5, 17", "17", CG_TOL_REDUCE));  // batch against 1-D b
}

DL_TEST(matmul_batched) {
    DL_CHECK(mm("float", "2, 3, 4", "2, 4, 5", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "2, 3, 7, 9", "9, 11", CG_TOL_REDUCE));       // b broadcast
    DL_CHECK(mm("float", "7, 9", "4, 9, 18", CG_TOL_REDUCE));          // a broadcast
    DL_CHECK(mm("float", "3, 1, 5, 6", "1, 2, 6, 20", CG_TOL_REDUCE)); // both broadcast
    DL_CHECK(mm("float", "1, 13, 7", "3, 7, 19", CG_TOL_REDUCE));
}

// Larger than every block with remainders in each dim: M past two row blocks of 48 (AVX2) and
// one of 96 (AVX-512), N not a multiple of 16 or 32, K past one block of 256 / 128.
DL_TEST(matmul_large) {
    DL_CHECK(mm("float", "103, 300", "300, 77", TOL_LONG_K));
    DL_CHECK(mm("float", "200, 600", "600, 50", TOL_LONG_K));
    DL_CHECK(mm("float", "2, 53, 270", "270, 40", TOL_LONG_K));
    DL_CHECK(mm("float", "64, 64", "64, 64", CG_TOL_REDUCE));
}

DL_TEST(matmul_int) {
    cg_tol t = {0, 0, 7, 0};
    DL_CHECK(mm("int32", "7, 13", "13, 5", t));
    DL_CHECK(mm("int64", "7, 13", "13, 5", t));
    DL_CHECK(mm("int64", "2, 3, 4", "4", t));
    DL_CHECK(mm("int32", "13", "3, 13, 2", t));
    DL_CHECK(mm("int32", "40, 70", "70, 33", t));
}

DL_TEST(matmul_half) {
    // float16 / bfloat16 round the result once; their own precision bounds the error.
    cg_tol t16 = {2e-3, 2e-3, 0, 0};
    cg_tol tbf = {2e-2, 1e-2, 0, 0};
    DL_CHECK(mm("float16", "7, 13", "13, 5", t16));
    DL_CHECK(mm("float16", "65, 33", "33, 17", t16));
    DL_CHECK(mm("float16", "2, 9", "9", t16));
    DL_CHECK(mm("bfloat16", "65, 33", "33, 17", tbf));
}

static bool gemm(const char *attrs, const char *ashape, const char *bshape, const char *cshape,
                 cg_tol tol) {
    char text[640];
    if (cshape) {
        snprintf(text, sizeof text,
                 "model m\ninput a : float[%s]\ninput b : float[%s]\ninput c : float[%s]\n"
                 "y = Gemm %s (a, b, c)\noutput y\n",
                 ashape, bshape, cshape, attrs);
    } else {
        snprintf(text, sizeof text,
                 "model m\ninput a : float[%s]\ninput b : float[%s]\n"
                 "y = Gemm %s (a, b)\noutput y\n",
                 ashape, bshape, attrs);
    }
    return cg_check(text, tol);
}

// Every transA / transB combination, M = 7, K = 13, N = 5 and a blocked size.
DL_TEST(gemm_transpose) {
    DL_CHECK(gemm("", "7, 13", "13, 5", "7, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1>", "13, 7", "13, 5", "7, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transB = 1>", "7, 13", "5, 13", "7, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1, transB = 1>", "13, 7", "5, 13", "7, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1>", "300, 61", "300, 37", "37", TOL_LONG_K));
    DL_CHECK(gemm("<transB = 1>", "61, 300", "37, 300", "37", TOL_LONG_K));
    DL_CHECK(gemm("<transA = 1, transB = 1>", "300, 61", "37, 300", "61, 37", TOL_LONG_K));
}

// Small products with a transposed B (the last layer's dX = dy W^T, K its few outputs): B copied
// to rows by each call of the small tiled kernel, up to 16 Ki floats of it; past that (K = 65
// below: one row of the copy more), the small kernel reads B in place; a few rows with N past
// 1024 keep the blocked kernel.
DL_TEST(gemm_small_transposed_b) {
    DL_CHECK(gemm("<transB = 1>", "32, 8", "256, 8", NULL, CG_TOL_REDUCE)); // the small MLP's dX
    DL_CHECK(gemm("<transB = 1>", "32, 8", "256, 8", "256", CG_TOL_REDUCE));
    DL_CHECK(
        gemm("<alpha = 0.5, beta = 2.0, transB = 1>", "13, 5", "37, 5", "13, 37", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1, transB = 1>", "5, 13", "37, 5", "13, 1", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transB = 1>", "4, 300", "50, 300", NULL, TOL_LONG_K));    // few rows, long K
    DL_CHECK(gemm("<transB = 1>", "8, 16", "600, 16", NULL, CG_TOL_REDUCE));  // column groups
    DL_CHECK(gemm("<transB = 1>", "16, 64", "256, 64", NULL, CG_TOL_REDUCE)); // 16 Ki floats
    DL_CHECK(gemm("<transB = 1>", "15, 65", "256, 65", NULL, CG_TOL_REDUCE)); // K one more
    DL_CHECK(gemm("<transB = 1>", "3, 7", "1, 7", NULL, CG_TOL_REDUCE));      // N = 1
    DL_CHECK(gemm("<transB = 1>", "4, 8", "2048, 8", NULL, CG_TOL_REDUCE));   // blocked
    // B a param: the result equals the --no-prepack compile's, before and after set_param
    CG_CHECK("model m\ninput x : float[6, 12]\nparam w : float[40, 12] = uniform(-1, 1, seed = 3)\n"
             "y = Gemm <transB = 1> (x, w)\noutput y\n",
             CG_TOL_REDUCE);
}

DL_TEST(gemm_alpha_beta_c) {
    const char *ab = "<alpha = 0.5, beta = -1.5>";
    DL_CHECK(gemm(ab, "7, 13", "13, 5", "7, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm(ab, "7, 13", "13, 5", "5", CG_TOL_REDUCE));    // C: [N]
    DL_CHECK(gemm(ab, "7, 13", "13, 5", "7, 1", CG_TOL_REDUCE)); // C: [M, 1]
    DL_CHECK(gemm(ab, "7, 13", "13, 5", "", CG_TOL_REDUCE));     // C: []
    DL_CHECK(gemm(ab, "7, 13", "13, 5", "1, 5", CG_TOL_REDUCE));
    DL_CHECK(gemm(ab, "7, 13", "13, 5", NULL, CG_TOL_REDUCE)); // C absent
    DL_CHECK(gemm("<alpha = 2.0>", "50, 20", "20, 33", NULL, CG_TOL_REDUCE));
    DL_CHECK(gemm("<beta = 0.0>", "50, 20", "20, 33", "50, 1", CG_TOL_REDUCE));
    DL_CHECK(gemm("<alpha = 0.25, beta = 3.0, transB = 1>", "100, 70", "49, 70", "100, 49",
                  CG_TOL_REDUCE));
    // The blocked kernel's vector epilogue (a ragged last panel through a lane mask) with every
    // broadcast of C: [N], [M, 1], [] and absent.
    DL_CHECK(gemm(ab, "90, 80", "80, 70", "70", CG_TOL_REDUCE));
    DL_CHECK(gemm(ab, "90, 80", "80, 70", "90, 1", CG_TOL_REDUCE));
    DL_CHECK(gemm(ab, "90, 80", "80, 70", "", CG_TOL_REDUCE));
    DL_CHECK(gemm(ab, "90, 80", "80, 70", NULL, CG_TOL_REDUCE));
}

DL_TEST(gemm_int_half) {
    CG_CHECK("model m\ninput a : int32[5, 6]\ninput b : int32[6, 4]\ninput c : int32[4]\n"
             "y = Gemm (a, b, c)\noutput y\n",
             ((cg_tol){0, 0, 7, 0}));
    CG_CHECK("model m\ninput a : int64[6, 5]\ninput b : int64[4, 6]\ninput c : int64[5, 1]\n"
             "y = Gemm <alpha = 2.0, beta = 0.5, transA = 1, transB = 1> (a, b, c)\noutput y\n",
             ((cg_tol){0, 0, 7, 0}));
    CG_CHECK("model m\ninput a : float16[9, 20]\ninput b : float16[20, 11]\n"
             "input c : float16[11]\ny = Gemm <alpha = 0.5> (a, b, c)\noutput y\n",
             ((cg_tol){2e-3, 2e-3, 0, 0}));
}

DL_TEST(matmul_empty_k) {
    // K = 0: every output element is an empty sum (0), plus beta * C for Gemm.
    DL_CHECK(mm("float", "3, 0", "0, 4", CG_TOL_EXACT));
    DL_CHECK(gemm("<beta = 2.0>", "3, 0", "0, 4", "4", CG_TOL_ARITH));
    DL_CHECK(gemm("<beta = 2.0, transB = 1>", "3, 0", "4, 0", "4", CG_TOL_ARITH)); // B copied: none
    // The blocked kernel (N > 1024, M past one tile): one empty K block, stored through the
    // epilogue (DLRT_DEBUG_POISON=1 shows an output it never writes), also with B a param.
    DL_CHECK(mm("float", "64, 0", "0, 2048", CG_TOL_EXACT));
    DL_CHECK(gemm("<beta = 2.0>", "64, 0", "0, 2048", "2048", CG_TOL_ARITH));
    CG_CHECK("model m\ninput x : float[64, 0]\nparam w : float[0, 2048] = uniform(-1, 1, "
             "seed = 1)\nparam b : float[2048] = uniform(-1, 1, seed = 2)\n"
             "h = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             CG_TOL_ARITH);
}

DL_TEST(matrix_vector_products) {
    // One row of A against [K, N] weights: the matrix-vector kernels (codegen/x86/x86_linalg.c,
    // blocks of 256 columns, a chunk of them in spans of at most 4096, K in steps of 4). N past
    // one block with a ragged last block, N past one span, K with
    // a remainder of 1..3 and none, a bias broadcast from [N], [1, N], [] and [1, 1], alpha and
    // beta, a transposed A ([K, 1]), a 1-D A, and a model of Linear layers at batch 1. From 256
    // KiB of B the rows go in 2-8 slices of their own (partial sums added in slice order by the
    // product's kernel): slices with a remainder of rows (784 = 8 x 98, 1000 = 8 x 125, 302 = 4
    // slices of 75-76), alpha and beta, a transposed and a 1-D A, a fused bias and Relu.
    DL_CHECK(gemm("", "1, 784", "784, 600", "600", TOL_LONG_K));
    DL_CHECK(gemm("", "1, 13", "13, 257", "1, 257", CG_TOL_REDUCE));
    DL_CHECK(gemm("", "1, 9", "9, 8500", "8500", CG_TOL_REDUCE));
    DL_CHECK(gemm("<alpha = 0.5, beta = -1.5>", "1, 6", "6, 40", "", CG_TOL_REDUCE));
    DL_CHECK(gemm("<alpha = 2.0>", "1, 7", "7, 512", "1, 1", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1>", "301, 1", "301, 100", NULL, TOL_LONG_K));
    DL_CHECK(gemm("", "1, 1", "1, 33", "33", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "302", "302, 1000", TOL_LONG_K));
    DL_CHECK(mm("float", "1, 64", "64, 48", CG_TOL_REDUCE));
    DL_CHECK(gemm("<alpha = 0.5, beta = -1.5>", "1, 1000", "1000, 70", "70", TOL_LONG_K));
    DL_CHECK(gemm("<transA = 1>", "2000, 1", "2000, 40", NULL, TOL_LONG_K));
    DL_CHECK(mm("float", "1500", "1500, 64", TOL_LONG_K));
    CG_CHECK("model m\ninput x : float[1, 3136]\ninput w : float[3136, 128]\n"
             "input b : float[128]\nh = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             TOL_LONG_K);
    // Weights stored [N, K] (transB, PyTorch's and ONNX's Linear): dot products of 4 rows at a
    // time, K in vector chunks plus a remainder, N with a ragged last group of rows.
    DL_CHECK(gemm("<transB = 1>", "1, 784", "1023, 784", "1023", TOL_LONG_K));
    DL_CHECK(gemm("<transB = 1>", "1, 37", "6, 37", "1, 6", CG_TOL_REDUCE));
    DL_CHECK(gemm("<alpha = 0.5, beta = 2.0, transB = 1>", "1, 64", "5, 64", "", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1, transB = 1>", "50, 1", "9, 50", NULL, CG_TOL_REDUCE));
    DL_CHECK(gemm("<transB = 1>", "1, 5", "40, 5", "40", CG_TOL_REDUCE)); // K below one vector
    CG_CHECK("model m\ninput x : float[1, 100]\ninput w1 : float[100, 300]\ninput b1 : float[300]\n"
             "input w2 : float[300, 50]\ninput b2 : float[50]\n"
             "h = Gemm (x, w1, b1)\na = Relu (h)\ny = Gemm (a, w2, b2)\noutput y\n",
             TOL_LONG_K);
    // Chained sliced products: a layer whose output only the next sliced product reads leaves
    // its slices' sum and epilogue to that product's slices kernel, each slice finishing its own
    // rows of A (x86_linalg.c, "Chained matrix-vector products"). A bias and Relu; alpha, beta
    // and an epilogue reading a row; slices with ragged rows (700 = 8 x 87.5,
    // 600, 520 rows); a plain MatMul as the next producer, whose epilogue stays a kernel of its
    // own before the 10-wide last layer. Then 1-D MatMuls with no epilogue (300 rows: 4 slices),
    // and a producer whose output is also the model's, which keeps its own kernel.
    CG_CHECK("model m\ninput x : float[1, 700]\ninput w1 : float[700, 600]\ninput b1 : float[600]\n"
             "input w2 : float[600, 520]\ninput b2 : float[520]\ninput s : float[1, 520]\n"
             "input w3 : float[520, 400]\ninput w4 : float[400, 10]\n"
             "h1 = Gemm <alpha = 0.05> (x, w1, b1)\na1 = Relu (h1)\n"
             "h2 = Gemm <alpha = 0.05, beta = -1.5> (a1, w2, b2)\nm2 = Mul (h2, s)\n"
             "a2 = Relu (m2)\nh3 = MatMul (a2, w3)\na3 = Relu (h3)\ny = MatMul (a3, w4)\n"
             "output y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float[640]\ninput w1 : float[640, 300]\n"
             "input w2 : float[300, 1000]\nh = MatMul (x, w1)\ny = MatMul (h, w2)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK(
        "model m\ninput x : float[1, 640]\ninput w1 : float[640, 300]\n"
        "input w2 : float[300, 1000]\nh = MatMul (x, w1)\ny = MatMul (h, w2)\noutput h\noutput y\n",
        TOL_LONG_K);
}

// The small products' register-tiled kernel (float32 B read along its rows: tiles of up to 24
// vector accumulators, column chunks of 4 vectors with a masked last one) and the products of
// at most 12 rows of any size that it takes too (a classifier layer's weight gradient, M = 10):
// ragged rows and columns, a transposed A, C with alpha and beta, batches, a fused epilogue.
DL_TEST(matmul_small_tiled) {
    DL_CHECK(mm("float", "10, 128", "128, 512", TOL_LONG_K));
    DL_CHECK(mm("float", "12, 700", "700, 100", TOL_LONG_K));
    DL_CHECK(mm("float", "5, 40", "40, 300", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "3, 9, 50", "50, 70", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "31, 17", "17, 33", CG_TOL_REDUCE));
    DL_CHECK(mm("float", "64, 64", "64, 100", CG_TOL_REDUCE));
    DL_CHECK(gemm("<transA = 1>", "128, 10", "128, 512", NULL, TOL_LONG_K));
    DL_CHECK(gemm("<alpha = 0.5, beta = -1.5, transA = 1>", "60, 11", "60, 90", "11, 90",
                  CG_TOL_REDUCE));
    CG_CHECK("model m\ninput x : float[9, 200]\ninput w : float[200, 130]\ninput b : float[130]\n"
             "input r : float[9, 130]\nh = Gemm (x, w, b)\ns = Add (h, r)\ny = Relu (s)\n"
             "output y\n",
             TOL_LONG_K);
}

// Blocked products whose row blocks share one packed B (all of K for a column group fits), in
// several column groups of 8 or 4 panels.
DL_TEST(matmul_shared_b) {
    DL_CHECK(mm("float", "300, 200", "200, 600", TOL_LONG_K));
    DL_CHECK(gemm("<transB = 1>", "250, 300", "530, 300", NULL, TOL_LONG_K));
    DL_CHECK(gemm("<transA = 1>", "140, 290", "140, 260", "260", TOL_LONG_K));
}

// Products of several row blocks whose packed B (all of K, a column group wide) would not fit the
// kernel's stack budget (K past 1024 with groups of 256 columns, or of N rounded up to a panel
// when narrower): B packed at every call by a kernel of its own into a temporary buffer that the
// product reads as it reads prepacked weights (x86_linalg.c, pack_per_call). B read along its
// rows, in three column groups and in five with a last panel at most half full (AVX-512: 8 of 32
// lanes); B^T through the register transposes, with alpha and a bias; a batched A over one B
// (every batch reads the same panels); a fused epilogue; float16 (converted when packed) and
// bfloat16 (AMX's and vdpbf16ps's layouts where the CPU has them); a short last K block and
// partial last panels throughout. A B narrower than a group that fits (N = 40) keeps the
// product's own pack.
DL_TEST(matmul_b_packed_per_call) {
    DL_CHECK(mm("float", "400, 1100", "1100, 600", TOL_LONG_K));
    DL_CHECK(mm("float", "200, 1100", "1100, 520", TOL_LONG_K));
    DL_CHECK(gemm("<transB = 1, alpha = 0.5>", "130, 1030", "300, 1030", "300", TOL_LONG_K));
    DL_CHECK(mm("float", "2, 100, 1300", "1300, 260", TOL_LONG_K));
    DL_CHECK(mm("float", "100, 1300", "1300, 40", TOL_LONG_K));
    CG_CHECK("model m\ninput x : float[100, 1100]\ninput w : float[1100, 250]\n"
             "input b : float[250]\nh = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             TOL_LONG_K);
    DL_CHECK(mm("float16", "100, 1100", "1100, 260", ((cg_tol){5e-2, 2e-3, 0, 0})));
    DL_CHECK(mm("bfloat16", "140, 1100", "1100, 270", ((cg_tol){2e-1, 1e-2, 0, 0})));
    // From 512 rows (PPC_ROWS), a B group past 256 KiB that would fit the stack is packed per
    // call too: B's rows (K = 300 in two K blocks, N = 500 with a partial last panel), and B^T's
    // columns with a bias and Relu; 500 rows keep packing B in the product's kernel.
    DL_CHECK(mm("float", "600, 300", "300, 500", TOL_LONG_K));
    CG_CHECK("model m\ninput a : float[520, 200]\ninput b : float[300, 200]\ninput c : float[300]\n"
             "y = Gemm <transB = 1> (a, b, c)\nr = Relu (y)\noutput r\n",
             TOL_LONG_K);
    DL_CHECK(mm("float", "500, 300", "300, 500", TOL_LONG_K));
}

// One row block of one batch, its columns in one group at most: two column groups, merged into
// one when one thread runs both (the CNN's fc1, 64 x 128 x 3136 with its Relu; N = 70 leaves a
// partial last panel in the second group; AVX2's 6 x 16 tiles make other splits).
DL_TEST(matmul_one_row_block_two_groups) {
    CG_CHECK("model m\ninput x : float[64, 3136]\ninput w : float[3136, 128]\n"
             "input b : float[128]\nh = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             TOL_LONG_K);
    DL_CHECK(mm("float", "20, 300", "300, 70", TOL_LONG_K));
    DL_CHECK(gemm("<transB = 1>", "30, 200", "250, 200", NULL, TOL_LONG_K));
}

// Packing A whole K blocks at a time (K = 512: two blocks of 256 with the AVX2 tiles, four of
// 128 with AVX-512's), several tiles and row blocks, a ragged last tile: where a tile's packed
// rows are stored in pieces (AVX2: 6 lanes as 4 + 2), nothing may spill into the next k or the
// next tile (the last k of a tile sits just before the next tile's first).
DL_TEST(matmul_pack_a_whole_k_blocks) {
    DL_CHECK(gemm("<transA = 1>", "512, 100", "512, 40", NULL, TOL_LONG_K));
    DL_CHECK(mm("float", "101, 512", "512, 40", TOL_LONG_K));
    DL_CHECK(gemm("<transA = 1, transB = 1>", "256, 203", "70, 256", NULL, TOL_LONG_K));
}

// A blocked product whose last panel is at most half full runs it at half width (the
// microkernel and the vector epilogue): N = 70 (6 of 32 lanes), 196 (4), 48 (16, exactly half),
// with a fused Relu reading nothing else, batches, C broadcasts (gemm_alpha_beta_c has more).
DL_TEST(matmul_half_panel) {
    DL_CHECK(mm("float", "100, 90", "90, 196", TOL_LONG_K));
    DL_CHECK(mm("float", "2, 70, 150", "150, 48", TOL_LONG_K));
    DL_CHECK(gemm("<alpha = 0.5, beta = 2.0>", "130, 70", "70, 33", "130, 1", CG_TOL_REDUCE));
    CG_CHECK("model m\ninput x : float[90, 80]\ninput w : float[80, 70]\ninput b : float[70]\n"
             "h = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             TOL_LONG_K);
}

// bfloat16 products of the blocked kernel (vdpbf16ps on a target with AVX512-BF16, k in pairs
// with an odd last K block; the float32 path elsewhere). The result is rounded to bfloat16 once,
// which bounds the error (2^-8 relative); the f32 sum of exact bf16 products adds far less.
DL_TEST(matmul_bf16_blocked) {
    cg_tol tbf = {2e-2, 1e-2, 0, 0};
    DL_CHECK(mm("bfloat16", "103, 301", "301, 77", tbf));
    DL_CHECK(mm("bfloat16", "200, 256", "256, 50", tbf));
    DL_CHECK(mm("bfloat16", "2, 53, 131", "131, 40", tbf));
    CG_CHECK("model m\ninput a : bfloat16[133, 100]\ninput b : bfloat16[70, 133]\n"
             "input c : bfloat16[70]\ny = Gemm <alpha = 0.5, transA = 1, transB = 1> (a, b, c)\n"
             "output y\n",
             tbf);
    CG_CHECK("model m\ninput a : bfloat16[100, 133]\ninput b : bfloat16[70, 133]\n"
             "y = Gemm <transB = 1> (a, b)\noutput y\n",
             tbf);
}

// The bfloat16 tile kernel's edges (AMX where the level has it: 32 x 32 blocks of four 16 x 16
// tiles, 32 k a step, K blocks of 256; packs zero-padded past K and past the last rows): K past
// several blocks with a ragged last step, K inside one step (odd), exactly one step, a last row
// tile of 1 row and of 2 rows past 48, a last panel of 13 columns, transposed A (the register
// transpose pack) and B (likewise), batches, Gemm's C and alpha/beta, a fused epilogue. Each
// shape is above the small-product kernels' size, so the blocked kernel runs it.
DL_TEST(matmul_bf16_tiles) {
    cg_tol tbf = {2e-2, 1e-2, 0, 0};
    DL_CHECK(mm("bfloat16", "33, 1000", "1000, 17", tbf));
    DL_CHECK(mm("bfloat16", "300, 17", "17, 100", tbf));
    DL_CHECK(mm("bfloat16", "96, 32", "32, 96", tbf));
    DL_CHECK(mm("bfloat16", "3, 40, 170", "170, 48", tbf));
    DL_CHECK(mm("bfloat16", "2, 50, 90", "2, 90, 77", tbf));
    CG_CHECK("model m\ninput a : bfloat16[75, 50]\ninput b : bfloat16[75, 90]\n"
             "y = Gemm <transA = 1> (a, b)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput a : bfloat16[40, 257]\ninput b : bfloat16[45, 257]\n"
             "y = Gemm <transB = 1> (a, b)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput a : bfloat16[300, 70]\ninput b : bfloat16[61, 300]\n"
             "input c : bfloat16[70, 61]\n"
             "y = Gemm <alpha = 0.5, beta = 2.0, transA = 1, transB = 1> (a, b, c)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput x : bfloat16[90, 280]\ninput w : bfloat16[280, 70]\n"
             "input b : bfloat16[70]\nh = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             tbf);
}

// Mixed precision's weight Casts folded into the prepack kernels (dl_cg__cast_prepacks): where
// the level has AMX or AVX512-BF16, a float32 param's Cast to bfloat16 read only as B by blocked
// products gets no infer kernel; the prepack kernel rounds the weight as the Cast would, so
// infer gives the bytes of the --no-prepack build (cg_check compares them) and the evaluator's.
// Row-major B, transposed B (AMX's transposing pack), a MatMul, one Cast read by two products,
// a K past one AMX block with an odd tail; a Cast also read as A keeps its kernel.
DL_TEST(matmul_bf16_weight_cast_prepacked) {
    cg_tol tbf = {2e-2, 1e-2, 0, 0};
    CG_CHECK("model m\ninput x : float[96, 280]\nparam w : float[280, 70] = glorot_uniform(seed "
             "= 1)\nparam b : float[70] = zeros\nxb = Cast <to = \"bfloat16\"> (x)\n"
             "wb = Cast <to = \"bfloat16\"> (w)\nbb = Cast <to = \"bfloat16\"> (b)\n"
             "h = Gemm (xb, wb, bb)\ny = Cast <to = \"float\"> (h)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput x : float[64, 301]\nparam w : float[45, 301] = glorot_uniform(seed "
             "= 2)\nxb = Cast <to = \"bfloat16\"> (x)\nwb = Cast <to = \"bfloat16\"> (w)\n"
             "h = Gemm <transB = 1> (xb, wb)\ny = Cast <to = \"float\"> (h)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput x : float[2, 40, 170]\ninput z : float[50, 170]\n"
             "param w : float[170, 48] = glorot_uniform(seed = 3)\n"
             "xb = Cast <to = \"bfloat16\"> (x)\nzb = Cast <to = \"bfloat16\"> (z)\n"
             "wb = Cast <to = \"bfloat16\"> (w)\nh = MatMul (xb, wb)\ng = MatMul (zb, wb)\n"
             "y = Cast <to = \"float\"> (h)\nu = Cast <to = \"float\"> (g)\n"
             "output y\noutput u\n",
             tbf);
    CG_CHECK("model m\nparam w : float[100, 100] = glorot_uniform(seed = 4)\n"
             "wb = Cast <to = \"bfloat16\"> (w)\nh = MatMul (wb, wb)\n"
             "y = Cast <to = \"float\"> (h)\noutput y\n",
             tbf);
}

// ---------------------------------------------------------------------------------------------
// Transposes read through strides (dl_cg__transpose_folds): a Transpose whose every reader is a
// float32 MatMul operand (directly or through another such Transpose) gets no kernel; the
// MatMul reads its input with the permuted strides.

// Each case against the reference evaluator, and its kernel count: `kernels` of them.
static bool folds(const char *text, long kernels, cg_tol tol) {
    long n = cg_infer_kernels(text);
    if (n != kernels) {
        fprintf(stderr, "transpose folds: %ld kernels, want %ld:\n%s\n", n, kernels, text);
        return false;
    }
    return cg_check(text, tol);
}

DL_TEST(matmul_reads_transposes) {
    // Attention's heads: q, k and v [B, T, H, D] viewed as [B, H, T, D] and K^T as [B, H, D, T]:
    // two products, no copies. Small (the register-tiled kernels) and past one block (T = 130:
    // the blocked kernel, K^T read along k, V along rows with a stride of H * D).
    DL_CHECK(folds("model m\ninput q : float[2, 7, 3, 8]\ninput k : float[2, 7, 3, 8]\n"
                   "input v : float[2, 7, 3, 8]\n"
                   "qh = Transpose <perm = [0, 2, 1, 3]> (q)\n"
                   "kh = Transpose <perm = [0, 2, 3, 1]> (k)\n"
                   "vh = Transpose <perm = [0, 2, 1, 3]> (v)\n"
                   "s = MatMul (qh, kh)\nc = MatMul (s, vh)\noutput c\n",
                   2, CG_TOL_REDUCE));
    DL_CHECK(folds("model m\ninput q : float[1, 130, 2, 64]\ninput k : float[1, 130, 2, 64]\n"
                   "input v : float[1, 130, 2, 64]\n"
                   "qh = Transpose <perm = [0, 2, 1, 3]> (q)\n"
                   "kh = Transpose <perm = [0, 2, 3, 1]> (k)\n"
                   "vh = Transpose <perm = [0, 2, 1, 3]> (v)\n"
                   "s = MatMul (qh, kh)\nc = MatMul (s, vh)\noutput c\n",
                   2, TOL_LONG_K));
    // A transposed A in the blocked kernel (its rows are the stored columns: sa_m = 1), with a
    // batch dim that moved: a [300, 2, 50] read as [2, 50, 300].
    DL_CHECK(folds("model m\ninput a : float[300, 2, 50]\ninput b : float[300, 40]\n"
                   "t = Transpose <perm = [1, 2, 0]> (a)\ny = MatMul (t, b)\noutput y\n",
                   1, TOL_LONG_K));
    // Two Transposes in a chain compose; the default perm (reversed axes).
    DL_CHECK(folds("model m\ninput a : float[5, 3, 2]\ninput b : float[3, 5, 6]\n"
                   "t1 = Transpose <perm = [0, 2, 1]> (a)\nt2 = Transpose <perm = [2, 1, 0]> (t1)\n"
                   "y = MatMul (t2, b)\noutput y\n",
                   1, CG_TOL_REDUCE));
    DL_CHECK(folds("model m\ninput a : float[9, 4]\ninput b : float[7, 9]\n"
                   "t = Transpose (a)\nu = Transpose (b)\ny = MatMul (t, u)\noutput y\n",
                   1, CG_TOL_REDUCE));
    // Broadcast batch dims; a matrix-vector product (one row of A); the same view read twice.
    DL_CHECK(
        folds("model m\ninput a : float[3, 1, 6, 5]\ninput b : float[1, 2, 4, 6]\n"
              "t = Transpose <perm = [0, 1, 3, 2]> (a)\nu = Transpose <perm = [0, 1, 3, 2]> (b)\n"
              "y = MatMul (t, u)\noutput y\n",
              1, CG_TOL_REDUCE));
    DL_CHECK(folds("model m\ninput x : float[64, 1]\ninput w : float[48, 64]\n"
                   "t = Transpose (x)\nu = Transpose (w)\ny = MatMul (t, u)\noutput y\n",
                   1, CG_TOL_REDUCE));
    DL_CHECK(
        folds("model m\ninput a : float[6, 6]\nt = Transpose (a)\ny = MatMul (t, t)\noutput y\n", 1,
              CG_TOL_REDUCE));
    // Kept: a Transpose another op reads (Relu), one that is an output, one of int64 (MatMul's
    // integer kernel is not taught the strides), and a chain whose first link another op reads.
    DL_CHECK(folds("model m\ninput a : float[4, 6]\ninput b : float[4, 3]\n"
                   "t = Transpose (a)\ny = MatMul (t, b)\nr = Relu (t)\noutput y\noutput r\n",
                   3, CG_TOL_REDUCE));
    DL_CHECK(folds("model m\ninput a : float[4, 6]\ninput b : float[4, 3]\n"
                   "t = Transpose (a)\ny = MatMul (t, b)\noutput y\noutput t\n",
                   2, CG_TOL_REDUCE));
    DL_CHECK(folds("model m\ninput a : int64[4, 6]\ninput b : int64[4, 3]\n"
                   "t = Transpose (a)\ny = MatMul (t, b)\noutput y\n",
                   2, CG_TOL_EXACT));
    DL_CHECK(folds("model m\ninput a : float[4, 6, 2]\ninput b : float[2, 6, 5]\n"
                   "t1 = Transpose <perm = [2, 1, 0]> (a)\nt2 = Transpose <perm = [0, 2, 1]> (t1)\n"
                   "y = MatMul (t2, b)\nr = Neg (t1)\noutput y\noutput r\n",
                   3, CG_TOL_REDUCE));
}

// Prepacked weights (artifact format 8): a blocked product whose B is a param reads, in infer,
// the panels an infer-only prepack kernel packed once. cg_check compares each case with the
// reference and, byte for byte, with the same model compiled --no-prepack, before and after
// every param is set to new values (the packs must be redone). Shapes around the blocking: a
// short last K block, a partial last panel (N = 70: 6 lanes of 32, 6 of 16 on AVX2), several row
// blocks, several column groups, one row block whose groups merge, transB (packed through
// register transposes), a transposed param read through strides, float16 weights (converted
// when packed), a fused epilogue, one param read by two products (one of them batched: every
// batch reads the same panels), a batched param B (not prepacked) and a constant B.
DL_TEST(matmul_prepacked_weights) {
    CG_CHECK("model m\ninput x : float[200, 300]\nparam w : float[300, 70] = uniform(-2, 2, "
             "seed = 1)\ny = MatMul (x, w)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float[300, 200]\nparam w : float[200, 600] = uniform(-2, 2, "
             "seed = 2)\ny = MatMul (x, w)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float[64, 300]\nparam w : float[300, 600] = uniform(-2, 2, "
             "seed = 3)\nparam b : float[600] = uniform(-1, 1, seed = 4)\n"
             "h = Gemm (x, w, b)\ny = Relu (h)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float[130, 260]\nparam w : float[45, 260] = uniform(-2, 2, "
             "seed = 5)\nparam c : float[45] = uniform(-1, 1, seed = 6)\n"
             "y = Gemm <transB = 1, alpha = 0.5> (x, w, c)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float[100, 90]\nparam w : float[196, 90] = uniform(-2, 2, "
             "seed = 7)\nt = Transpose (w)\ny = MatMul (x, t)\noutput y\n",
             TOL_LONG_K);
    CG_CHECK("model m\ninput x : float16[70, 140]\nparam w : float16[140, 40] = uniform(-1, 1, "
             "seed = 8)\ny = MatMul (x, w)\noutput y\n",
             ((cg_tol){2e-2, 2e-3, 0, 0}));
    CG_CHECK("model m\ninput x : float[120, 150]\ninput z : float[2, 120, 150]\n"
             "param w : float[150, 100] = uniform(-2, 2, seed = 9)\n"
             "param v : float[2, 150, 100] = uniform(-2, 2, seed = 10)\n"
             "y = MatMul (x, w)\nu = MatMul (z, w)\nr = MatMul (z, v)\noutput y\noutput u\n"
             "output r\n",
             TOL_LONG_K);
    // A constant B (a literal of distinct values, so that a misplaced panel shows), transB.
    {
        size_t cap = 64 * 1024, at = 0;
        char *text = malloc(cap);
        DL_CHECK(text != NULL);
        at += (size_t)snprintf(text + at, cap - at,
                               "model m\ninput x : float[100, 20]\n"
                               "const w : float[200, 20] = [");
        for (int n = 0; n < 200; n++) {
            at += (size_t)snprintf(text + at, cap - at, "%s[", n ? ", " : "");
            for (int k = 0; k < 20; k++) {
                at += (size_t)snprintf(text + at, cap - at, "%s%g", k ? ", " : "",
                                       ((n * 7 + k * 3) % 11 - 5) / 4.0);
            }
            at += (size_t)snprintf(text + at, cap - at, "]");
        }
        snprintf(text + at, cap - at, "]\ny = Gemm <transB = 1> (x, w)\noutput y\n");
        bool ok = cg_check(text, CG_TOL_REDUCE);
        free(text);
        DL_CHECK(ok);
    }
    // bfloat16 weights: AMX tiles or vdpbf16ps k pairs where the target has them (their own
    // panel layouts), float32 elsewhere; a K past AMX's 1024-deep block, an odd K, transB.
    cg_tol tbf = {2e-2, 1e-2, 0, 0};
    CG_CHECK("model m\ninput x : bfloat16[100, 301]\nparam w : bfloat16[301, 77] = "
             "uniform(-1, 1, seed = 13)\ny = MatMul (x, w)\noutput y\n",
             tbf);
    CG_CHECK("model m\ninput x : bfloat16[40, 1100]\nparam w : bfloat16[1100, 70] = "
             "uniform(-1, 1, seed = 14)\ny = MatMul (x, w)\noutput y\n",
             ((cg_tol){6e-2, 1e-2, 0, 0}));
    CG_CHECK("model m\ninput x : bfloat16[70, 96]\nparam w : bfloat16[130, 96] = "
             "uniform(-1, 1, seed = 15)\ny = Gemm <transB = 1> (x, w)\noutput y\n",
             tbf);
    // K shorter than a K block: one block of K rounded up to 16 (K = 40: 48), also transB.
    CG_CHECK("model m\ninput x : float[150, 40]\nparam w : float[40, 100] = uniform(-2, 2, "
             "seed = 11)\ny = MatMul (x, w)\noutput y\n",
             CG_TOL_REDUCE);
    CG_CHECK("model m\ninput x : float[130, 40]\nparam w : float[70, 40] = uniform(-2, 2, "
             "seed = 12)\ny = Gemm <transB = 1> (x, w)\noutput y\n",
             CG_TOL_REDUCE);
}
