// tests/codegen/cg_check.h — compiled-vs-reference checking for the cpu backend.
//
// ISA levels. THE CONVENTION for every test that compiles kernels (other suites may read it):
//   DLCC_TEST_CPU=<level>   which code the cases are compiled to:
//       unset, "" or "native"  the host CPU and its features (dlcc's default);
//       "x86-64-v3"            AVX2, FMA, F16C, BMI1/2 (codegen's AVX2 tiles, 256-bit vectors);
//       "x86-64-v4"            v3 plus AVX-512 F/BW/CD/DQ/VL (codegen's AVX-512 tiles);
//       "x86-64-v4-bf16"       v4 plus AVX512-BF16 (bfloat16 products with vdpbf16ps);
//       "x86-64-v4-amx"        v4-bf16 plus AMX-TILE and AMX-BF16 (bfloat16 products on tiles;
//                              an artifact records AMX only when a kernel uses it).
//     A forced level passes the CPU name AND the level's explicit feature list to dl_cg_compile:
//     codegen reads the feature string (GEMM tiles, the artifact's ISA bits), and a bare CPU
//     name would leave it empty.
//   DLCC_TEST_COMPILE_ONLY=1   compile every case for the level and check the artifact (an
//     x86-64 ELF shared object that the runtime loads when the host has the level and refuses
//     with DLRT_ERR_UNSUPPORTED when it lacks it) but do not run it. So the AVX-512 code is
//     generated and verified by LLVM on every machine, including AVX2-only ones.
//   DLCC_TEST_OPT=<0..3>   LLVM's optimisation level for the x86 artifacts (default 3, what dlcc
//     compiles with). The sanitizer build runs its cases at 1: the sanitizers watch dlcc's own
//     code (the lowering, the runtime, the evaluator), which runs the same at any level, and
//     LLVM's -O3 pipeline was ~40 % of the suite's time there; the gcc build checks -O3's code.
//   DLCC_TEST_CPU=cuda:sm_XX   the NVPTX target: every case emitted as PTX and assembled by
//     ptxas for that GPU (compile only; the summary line counts modules and kernels); with
//     DLCC_TEST_GPU=1 compiled for --target cuda:sm_XX and run on the GPU through libdlrt's CUDA
//     device, against the reference like the CPU (tools/gpu-check.sh).
// cg_isa_setup() reads both at the start of main. When the host cannot run the level (and
// compile-only is off) it prints why and returns 77, ctest's SKIP_RETURN_CODE. ctest runs the
// codegen cases once per level: codegen_ops (host), codegen_ops_v3, codegen_ops_v4 and
// codegen_ops_v4_compile, and the bfloat16 cases once more per bf16 level
// (tests/codegen/tests.cmake).
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
#include <stddef.h>
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
// 3 x 3 stride-1 convolutions on Winograd's F(2 x 2, 3 x 3) (x86_winograd.c): the transforms sum
// up to 4 inputs and 9 weights (factors 1 and 1/2) before the products, ~4x the direct sum's error
// bound; inputs in [-2, 2), K = 9 C up to 576.
#define CG_TOL_WINO ((cg_tol){2e-4, 2e-4, 0, 0})

// Reads DLCC_TEST_CPU / DLCC_TEST_COMPILE_ONLY (above). Returns 0 to run the cases, 77 when the
// host cannot run the level (printed), 2 for an unknown level (printed).
int cg_isa_setup(void);

bool cg_check(const char *dlg_text, cg_tol tol);

// Whether the cases' compiled code runs at this level (false when it is only compiled and
// checked: DLCC_TEST_COMPILE_ONLY=1, PTX for ptxas).
bool cg_runs_code(void);

// Known values an output must have, in both backends: the reference evaluator's result and the
// compiled one. NaN matches only NaN; with an exact tolerance a zero matches only a zero of the
// same sign; other values within the case's tolerance. For values that must match PyTorch (NaN
// propagation), where comparing the two backends with each other would not notice both wrong.
typedef struct cg_want {
    const char *output;
    const double *v;
    int64_t n;
} cg_want;

// cg_check plus the wants (each names an output of the model; n must be its element count).
bool cg_check_want(const char *dlg_text, cg_tol tol, const cg_want *want, size_t n_want);

// Input values the test chooses (special values, a sweep): `name` names an input of the model,
// n must be its element count; each value is converted to the input's dtype.
typedef struct cg_data {
    const char *name;
    const double *v;
    int64_t n;
} cg_data;

// cg_check_want with the `given` inputs taking the given values (the others the random fill),
// and the compiled values handed back for the test's own finer check: when the case runs (not
// compile-only, not PTX) and got[j] is non-NULL, got[j] (caller-owned, as many elements as
// output j of the model, in the model's output order) receives output j's compiled values.
// got may be NULL. Outputs the case does not run leave got untouched.
bool cg_check_io(const char *dlg_text, cg_tol tol, const cg_want *want, size_t n_want,
                 const cg_data *given, size_t n_given, double *const *got);

// The infer entry's kernel count of `text` compiled for this machine (the default target,
// whatever DLCC_TEST_CPU says); -1 when it does not compile.
long cg_infer_kernels(const char *text);

#define CG_CHECK(text, tol) DL_CHECK(cg_check((text), (tol)))

#endif
