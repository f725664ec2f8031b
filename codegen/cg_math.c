// codegen/cg_math.c — float32 transcendental functions emitted as straight-line LLVM IR: exp,
// erf, tanh, log, log1p. A libm call (or llvm.exp / llvm.tanh, which LLVM lowers to one) stops the
// loop vectoriser, so an elementwise kernel holding one runs one element at a time; these use only
// arithmetic, compares, selects and intrinsics that have vector forms (fabs, copysign, rint,
// fmuladd), so a loop holding them vectorises on x86-64 and stays plain scalar code on NVPTX.
//
// Every function is branch-free: each region of the input is computed for every lane and the
// right one selected, and the special values (NaN, +-inf, +-0, denormals) come out of the same
// arithmetic, checked by tests/codegen/test_math.c against libm in double over the whole float
// range. Polynomial coefficients are minimax (Remez) fits of our own, on the intervals named
// beside them, evaluated by Horner's rule with llvm.fmuladd (fused where the target has FMA).
// Accuracy against the exact value (double libm), AVX-512 with FMA: over every float of
// [2^-20, 16] erf is within 1.04 ulp and tanh within 1.34 ulp (outside, the results are x plus
// a vanishing term or +-1), measured before exp's polynomial took fused steps; on test_math.c's
// sweep of the whole range, after it: erf 0.92, tanh 1.15, exp 0.97 ulp.
#include "cg_geometry.h"
#include "cg_internal.h"

#include <math.h>

// c[0] + t (c[1] + t (c[2] + ...)): the polynomial of n coefficients at t.
static LLVMValueRef horner(cg *c, LLVMValueRef t, const double *coef, size_t n) {
    LLVMValueRef p = cg_f32(c, coef[n - 1]);
    for (size_t i = n - 1; i-- > 0;) {
        p = dl_cg__fmuladd(c, p, t, cg_f32(c, coef[i]));
    }
    return p;
}

// The same with coefficients chosen per lane: lo[i] where `is_lo`, else hi[i] (one polynomial
// evaluation for two regions; a select of two constants is one blend).
static LLVMValueRef horner2(cg *c, LLVMValueRef is_lo, LLVMValueRef t, const double *lo,
                            const double *hi, size_t n) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef p = LLVMBuildSelect(b, is_lo, cg_f32(c, lo[n - 1]), cg_f32(c, hi[n - 1]), "");
    for (size_t i = n - 1; i-- > 0;) {
        LLVMValueRef ci = LLVMBuildSelect(b, is_lo, cg_f32(c, lo[i]), cg_f32(c, hi[i]), "");
        p = dl_cg__fmuladd(c, p, t, ci);
    }
    return p;
}

static LLVMValueRef fabs_f32(cg *c, LLVMValueRef x) {
    return cg_intrinsic1(c, "llvm.fabs", c->t_f32, x);
}

// ---------------------------------------------------------------------------------------------
// exp

// Cephes expf: x = n ln2 + r (Cody-Waite; the products are exact since n has <= 8 bits), e^r by
// a degree-7 polynomial on |r| <= ln2 / 2, then the scale 2^n applied in two halves so that
// results down to the denormals and up to FLT_MAX come out right. x is clamped to at most 88.8
// first (e^88.8 rounds to +inf) by a compare that keeps a NaN: NaN gives NaN (its scale is 1),
// +inf gives +inf. Below -104 (e^-104 rounds to 0; -inf too) the result is 0, selected after
// computing e^0 for those lanes: scaling down to 0 would underflow, and on Intel every
// underflowing multiply without flush-to-zero costs a microcode assist of ~100 cycles (a causal
// attention mask of -1e9 or -inf made half of a Softmax's exponentials that slow: 3x the
// kernel's time). The bytes are those of computing from -104, which rounds to 0.
LLVMValueRef dl_cg__exp_f32(cg *c, LLVMValueRef x) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef hi = cg_f32(c, 88.8), zero = cg_f32(c, 0);
    LLVMValueRef tiny = LLVMBuildFCmp(b, LLVMRealOLT, x, cg_f32(c, -104.0), "");
    x = LLVMBuildSelect(b, tiny, zero, x, "");
    x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, hi, ""), hi, x, "");
    LLVMValueRef xl = LLVMBuildFMul(b, x, cg_f32(c, 1.44269504088896341), "");
    LLVMValueRef kn = cg_intrinsic1(c, "llvm.rint", c->t_f32, xl);
    LLVMValueRef r = dl_cg__fmuladd(c, kn, cg_f32(c, -0.693359375), x);
    r = dl_cg__fmuladd(c, kn, cg_f32(c, 2.12194440e-4), r);
    static const double p[] = {5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2,
                               8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4};
    // y r^2 + r + 1, the polynomial by Horner's rule in fused steps (a chain of 4-cycle FMAs
    // instead of 8-cycle multiply-adds: exp is the latency of the Gelu and Softmax kernels)
    LLVMValueRef y = horner(c, r, p, DL_ARRAY_LEN(p));
    y = dl_cg__fmuladd(c, y, LLVMBuildFMul(b, r, r, ""), r);
    y = LLVMBuildFAdd(b, y, cg_f32(c, 1), "");
    // 2^n = 2^n1 2^n2 with n1 = n >> 1, n2 = n - n1: both in the normal exponent range.
    // kn is integral in [-150, 128] or NaN; a NaN (whose y is NaN anyway) becomes 0 so that the
    // plain (vectorisable) fptosi never sees it.
    LLVMValueRef kn0 =
        LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, kn, kn, ""), cg_f32(c, 0), kn, "");
    LLVMValueRef n = LLVMBuildFPToSI(b, kn0, c->t_i32, "");
    LLVMValueRef n1 = LLVMBuildAShr(b, n, cg_i32(c, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(b, n, n1, "");
    LLVMValueRef e1 = LLVMBuildShl(b, LLVMBuildAdd(b, n1, cg_i32(c, 127), ""), cg_i32(c, 23), "");
    LLVMValueRef e2 = LLVMBuildShl(b, LLVMBuildAdd(b, n2, cg_i32(c, 127), ""), cg_i32(c, 23), "");
    y = LLVMBuildFMul(b, y, LLVMBuildBitCast(b, e1, c->t_f32, ""), "");
    y = LLVMBuildFMul(b, y, LLVMBuildBitCast(b, e2, c->t_f32, ""), "");
    return LLVMBuildSelect(b, tiny, zero, y, "");
}

// ---------------------------------------------------------------------------------------------
// erf

// erf is odd: computed on a = |x| and the sign copied back. Two regions share one polynomial
// evaluation (the scheme of Arm's optimized-routines vector erff):
//   a < 0.921875:  erf(a) = a + a P(a^2), P of degree 6 fitted to (erf(a) - a) / a on
//                  [0, 0.921875^2] (relative error of erf 4e-10);
//   a >= 0.921875: erf(a) = 1 - e^-(a + a Q(a)), Q of degree 6 fitted to -log(erfc(a)) / a - 1
//                  on [0.921875, 4] with the error weighted by erfc(a) (absolute error of erf
//                  7e-10): erfc is at most 0.19 there, so exp's error and the rounding of the
//                  exponent move the result by well under an ulp of erf;
//   a > 4:         1 (erfc(4) = 1.5e-8 is below half an ulp of 1).
// Tiny a: a + a P = a (1 + 0.128...) rounds like erf; denormals included. -0 gives -0, +-inf
// +-1 (the a > 4 select), NaN NaN (every compare on it is false).
LLVMValueRef dl_cg__erf_f32(cg *c, LLVMValueRef x) {
    static const double lo[] = {1.2837916663740970e-1, -3.7612633735045329e-1,
                                1.1283695493628831e-1, -2.6859398255559088e-2,
                                5.2010322907209936e-3, -8.1427043612835158e-4,
                                8.3701008463475369e-5};
    static const double hi[] = {1.2865321520992534e-1, 6.3513165656708012e-1,
                                1.0627015200552495e-1, -2.3791354357366852e-2,
                                3.6565917134776760e-3, -3.2634512974162245e-4,
                                1.1591181676279155e-5};
    _Static_assert(DL_ARRAY_LEN(lo) == DL_ARRAY_LEN(hi), "one evaluation for both regions");
    LLVMBuilderRef b = c->b;
    LLVMValueRef a = fabs_f32(c, x);
    LLVMValueRef is_lo = LLVMBuildFCmp(b, LLVMRealOLT, a, cg_f32(c, 0.921875), "");
    LLVMValueRef t = LLVMBuildSelect(b, is_lo, LLVMBuildFMul(b, a, a, ""), a, "");
    LLVMValueRef r = dl_cg__fmuladd(c, a, horner2(c, is_lo, t, lo, hi, DL_ARRAY_LEN(lo)), a);
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFNeg(b, r, ""));
    LLVMValueRef y = LLVMBuildSelect(b, is_lo, r, LLVMBuildFSub(b, cg_f32(c, 1), e, ""), "");
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, a, cg_f32(c, 4), "");
    y = LLVMBuildSelect(b, big, cg_f32(c, 1), y, "");
    return cg_intrinsic2(c, "llvm.copysign", c->t_f32, y, x);
}

// ---------------------------------------------------------------------------------------------
// tanh

// tanh is odd: computed on a = |x| and the sign copied back.
//   a < 0.625:  tanh(a) = a + a P(a^2), P(0) = 0, P of degree 5 fitted to (tanh(a) - a) / a on
//               [0, 0.625^2] (relative error 4.4e-9);
//   a >= 0.625: tanh(a) = 1 - 2 / (e^2a + 1): 2 / (e^2a + 1) <= 0.45 there, so exp's error
//               reaches the result scaled down; e^2a overflows to +inf from a = 44.4 on, which
//               gives exactly 1 (and +-inf gives +-1).
// Tiny a: a^2 underflows and the result is a itself, as tanh's; -0 gives -0; NaN gives NaN.
LLVMValueRef dl_cg__tanh_f32(cg *c, LLVMValueRef x) {
    static const double p[] = {0,
                               -3.3333281942030425e-1,
                               1.3331442198575929e-1,
                               -5.3739715119499001e-2,
                               2.0639087360768861e-2,
                               -5.7049871295782533e-3};
    LLVMBuilderRef b = c->b;
    LLVMValueRef a = fabs_f32(c, x);
    LLVMValueRef small =
        dl_cg__fmuladd(c, a, horner(c, LLVMBuildFMul(b, a, a, ""), p, DL_ARRAY_LEN(p)), a);
    LLVMValueRef e = dl_cg__exp_f32(c, LLVMBuildFAdd(b, a, a, ""));
    LLVMValueRef q = LLVMBuildFDiv(b, cg_f32(c, 2), LLVMBuildFAdd(b, e, cg_f32(c, 1), ""), "");
    LLVMValueRef large = LLVMBuildFSub(b, cg_f32(c, 1), q, "");
    LLVMValueRef is_small = LLVMBuildFCmp(b, LLVMRealOLT, a, cg_f32(c, 0.625), "");
    LLVMValueRef y = LLVMBuildSelect(b, is_small, small, large, "");
    return cg_intrinsic2(c, "llvm.copysign", c->t_f32, y, x);
}

// ---------------------------------------------------------------------------------------------
// log, log1p

// log(x) = k ln2 + log1p(f): x = 2^k m with m in [sqrt(1/2), sqrt(2)) read from the bits
// (denormals scaled by 2^23 first), f = m - 1 exact, log1p(f) = f - f^2/2 + f^3 Q(f) with Q of
// degree 7 fitted to (log1p(f) - f + f^2/2) / f^3 on [sqrt(1/2) - 1, sqrt(2) - 1] (relative
// error of log1p(f) 6e-9), and ln2 split in two so that k ln2_hi is exact (Cody-Waite).
// +0 and -0 give -inf, x < 0 NaN, +inf +inf, NaN NaN.
LLVMValueRef dl_cg__log_f32(cg *c, LLVMValueRef x) {
    static const double q[] = {3.3333331707836742e-1, -2.5000821032067393e-1,
                               2.0001226862979289e-1, -1.6623357410258687e-1,
                               1.4201758352169614e-1, -1.3160182162950033e-1,
                               1.2761574549582455e-1, -7.6344939863126775e-2};
    LLVMBuilderRef b = c->b;
    LLVMValueRef is_den = LLVMBuildFCmp(b, LLVMRealOLT, x, cg_f32(c, 0x1p-126), "");
    LLVMValueRef xs = LLVMBuildSelect(b, is_den, LLVMBuildFMul(b, x, cg_f32(c, 0x1p23), ""), x, "");
    // ix = bits - bits(sqrt(1/2)): its exponent field is k, its mantissa that of m.
    LLVMValueRef ix =
        LLVMBuildSub(b, LLVMBuildBitCast(b, xs, c->t_i32, ""), cg_i32(c, 0x3f3504f3), "");
    LLVMValueRef k = LLVMBuildAShr(b, ix, cg_i32(c, 23), "");
    k = LLVMBuildSub(b, k, LLVMBuildSelect(b, is_den, cg_i32(c, 23), cg_i32(c, 0), ""), "");
    LLVMValueRef mb =
        LLVMBuildAdd(b, LLVMBuildAnd(b, ix, cg_i32(c, 0x7fffff), ""), cg_i32(c, 0x3f3504f3), "");
    LLVMValueRef f = LLVMBuildFSub(b, LLVMBuildBitCast(b, mb, c->t_f32, ""), cg_f32(c, 1), "");
    LLVMValueRef kf = LLVMBuildSIToFP(b, k, c->t_f32, "");
    LLVMValueRef f2 = LLVMBuildFMul(b, f, f, "");
    // f^3 Q + k ln2_lo - f^2 / 2 + f, then + k ln2_hi
    LLVMValueRef r = LLVMBuildFMul(b, kf, cg_f32(c, -2.12194440e-4), "");
    r = dl_cg__fmuladd(c, LLVMBuildFMul(b, f2, f, ""), horner(c, f, q, DL_ARRAY_LEN(q)), r);
    r = dl_cg__fmuladd(c, f2, cg_f32(c, -0.5), r);
    r = LLVMBuildFAdd(b, f, r, "");
    LLVMValueRef y = dl_cg__fmuladd(c, kf, cg_f32(c, 0.693359375), r);
    LLVMValueRef inf = cg_f32(c, INFINITY);
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, inf, ""), inf, y, "");
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, cg_f32(c, 0), ""), cg_f32(c, -INFINITY),
                        y, "");
    // x < 0 or NaN: NaN
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGE, x, cg_f32(c, 0), ""), y, cg_f32(c, NAN),
                           "");
}

// log1p(u) = log(w) + (u - (w - 1)) / w with w = 1 + u rounded: the quotient puts back what
// rounding w lost (w - 1 is exact where it matters, w in [1/2, 2]). w = 1 gives u itself
// (tiny u, -0 included), u = -1 -inf, u = +inf +inf, u < -1 NaN, NaN NaN.
LLVMValueRef dl_cg__log1p_f32(cg *c, LLVMValueRef u) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef one = cg_f32(c, 1);
    LLVMValueRef w = LLVMBuildFAdd(b, one, u, "");
    LLVMValueRef lost = LLVMBuildFSub(b, u, LLVMBuildFSub(b, w, one, ""), "");
    LLVMValueRef y = LLVMBuildFAdd(b, dl_cg__log_f32(c, w), LLVMBuildFDiv(b, lost, w, ""), "");
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, w, one, ""), u, y, "");
    LLVMValueRef inf = cg_f32(c, INFINITY);
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, u, inf, ""), inf, y, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, w, cg_f32(c, 0), ""),
                           cg_f32(c, -INFINITY), y, "");
}
