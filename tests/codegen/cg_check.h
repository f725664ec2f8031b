// tests/codegen/cg_check.h — compiled-vs-reference checking for the cpu backend.
//
// cg_check(text, tol) parses a .dlg text, infers shapes, fills every input with deterministic
// pseudo-random data (floats uniform in [-2, 2) unless the input's name starts with "pos_"
// (then [0.1, 2.1)); ints in [0, int_hi) where int_hi is cg_tol.int_hi, default 3; bools
// random), evaluates the model with the reference evaluator, compiles it with dl_cg_compile,
// loads the artifact with libdlrt from memory, runs infer and compares every output:
// |got - ref| <= atol + rtol * |ref| (NaN matches NaN; ints and bools exactly). On failure it
// prints the model, the output and the first 5 mismatches and returns false.
#ifndef CG_CHECK_H
#define CG_CHECK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cg_tol {
    double atol, rtol;
    int64_t int_hi; // ints are drawn from [0, int_hi); 0 means 3
    uint64_t seed;  // input data seed; 0 means 1
} cg_tol;

// Tolerances per op class (documented in docs/codegen.md):
#define CG_TOL_EXACT ((cg_tol){0, 0, 0, 0})       // copies, comparisons, integer ops
#define CG_TOL_ARITH ((cg_tol){1e-6, 1e-5, 0, 0}) // + - * /, casts, min/max, where
#define CG_TOL_MATH  ((cg_tol){1e-5, 1e-4, 0, 0}) // exp log tanh erf gelu softmax norms losses
#define CG_TOL_REDUCE                                                                              \
    ((cg_tol){1e-5, 1e-4, 0, 0}) // sums and means, matmul, conv (float32 accumulation)

bool cg_check(const char *dlg_text, cg_tol tol);

#define CG_CHECK(text, tol) DL_CHECK(cg_check((text), (tol)))

#endif
