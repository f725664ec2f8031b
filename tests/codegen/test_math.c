// tests/codegen/test_math.c — the emitted transcendental functions (codegen/cg_math.c: erf,
// tanh, exp) through the compiled ops that use them (Erf, Tanh, Gelu exact and tanh-approximate,
// and their UnaryGrad), in ulps against libm in double, over a sweep of the whole float range:
// every 8191st float bit pattern of either sign (every binade, denormals included), a dense
// linear sweep of [-10, 10] where the functions bend, and the special values (+-0, +-inf, NaN,
// the smallest denormal, FLT_MIN, FLT_MAX, the region boundaries of cg_math.c and their
// neighbours). Each case also runs cg_check's comparison with the reference evaluator.
//
// The tolerance is in ulps of float32 at a scale per op (why, beside each op below): for Erf and
// Tanh the result itself; for the composite ops the largest term the float formula adds, since
// a sum of float terms is only as exact as its largest term (0.5 x (1 + erf) near x = -5
// cancels to a value far below the rounding of 1 + erf, the same with libm's erff: the scale
// keeps the check about the math functions, not about the formula, which PyTorch shares).
// Zeros are checked with their sign (erf(-0) = tanh(-0) = Gelu(-0) = -0), NaN as NaN.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQRT1_2 0.70710678118654752440
#define GELU_K  0.79788456080286535588 // sqrt(2 / pi)
#define GELU_C  0.044715

// The ulp of float32 at magnitude |v|: 2^(e - 23) for v in [2^e, 2^(e+1)), the denormal
// spacing 2^-149 below FLT_MIN.
static double ulp32(double v) {
    v = fabs(v);
    if (v < FLT_MIN) {
        return ldexp(1.0, -149);
    }
    if (v > FLT_MAX) {
        v = FLT_MAX;
    }
    int e;
    frexp(v, &e); // v = m 2^e, m in [0.5, 1)
    return ldexp(1.0, e - 24);
}

static double f32_of_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

// The sweep (module comment). Returns the count; v holds room for MAX_SWEEP values.
#define BITS_STEP 8191u
#define LIN_N     20001
#define MAX_SWEEP (2 * (0x7f800000u / BITS_STEP + 1) + LIN_N + 128)

static int64_t make_sweep(double *v) {
    int64_t n = 0;
    for (uint32_t b = 0; b < 0x7f800000u; b += BITS_STEP) { // finite, either sign
        double x = f32_of_bits(b);
        v[n++] = x;
        v[n++] = -x;
    }
    for (int64_t i = 0; i < LIN_N; i++) {
        v[n++] = (float)(-10.0 + 20.0 * (double)i / (LIN_N - 1));
    }
    static const double special[] = {
        0.0,     -0.0,     INFINITY, -INFINITY, NAN,     0x1p-149, -0x1p-149, FLT_MIN, -FLT_MIN,
        FLT_MAX, -FLT_MAX, 1e-30,    1e-8,      0x1p-12, 0.625,    0.921875,  4.0,     3.92,
        9.0,     44.4,     88.8,     1e13,      1e19,    0.6174,   1.0};
    for (size_t i = 0; i < DL_ARRAY_LEN(special); i++) {
        v[n++] = (float)special[i]; // the input is float: the reference takes the same x
        if (isfinite(special[i]) && special[i] != 0) { // the float neighbours of a boundary
            v[n++] = nextafterf((float)special[i], 0.0f);
            v[n++] = -nextafterf((float)special[i], INFINITY);
        }
    }
    DL_ASSERT(n <= (int64_t)MAX_SWEEP);
    return n;
}

// One op over the sweep: its reference value and the scale of its error at x (double libm).
typedef struct math_case {
    const char *name, *expr; // the op (dy is 1)
    double max_ulp;
    double (*ref)(double x);
    double (*scale)(double x, double ref);
    double skip_above; // |x| beyond which the case is not swept (0: none)
} math_case;

static double scale_self(double x, double r) {
    (void)x;
    return r;
}

static double ref_erf(double x) {
    return erf(x);
}

static double ref_exp(double x) {
    return exp(x);
}

static double ref_log(double x) {
    return log(x);
}

static double ref_softplus(double x) {
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double ref_tanh(double x) {
    return tanh(x);
}

static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + erf(x * SQRT1_2));
}

static double tanh_in(double x) {
    return tanh(GELU_K * (x + GELU_C * x * x * x));
}

static double ref_gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh_in(x));
}

// Gelu: 0.5 x + 0.5 x erf(..): the terms are at most 0.5 |x| (and the result).
static double scale_gelu(double x, double r) {
    return fmax(fabs(r), 0.5 * fabs(x));
}

static double ref_dgelu(double x) {
    return 0.5 * (1.0 + erf(x * SQRT1_2)) + x * exp(-0.5 * x * x) * 0.39894228040143267794;
}

// Phi(x) + x phi(x): Phi = 0.5 + 0.5 erf is a sum of terms up to 0.5.
static double scale_dgelu(double x, double r) {
    return fmax(fmax(fabs(r), 0.5), fabs(x * exp(-0.5 * x * x) * 0.39894228040143267794));
}

static double ref_dgelu_tanh(double x) {
    double t = tanh_in(x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
}

// 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2): 1 - t^2 is a difference of terms up to 1, so
// its rounding is scaled by the factor 0.5 |x| k (1 + 3c x^2) beside it.
static double scale_dgelu_tanh(double x, double r) {
    return fmax(fmax(fabs(r), 0.5), 0.5 * fabs(x) * GELU_K * (1.0 + 3.0 * GELU_C * x * x));
}

static double ref_dtanh(double x) {
    double t = tanh(x);
    return 1.0 - t * t;
}

// 1 - t^2: terms up to 1.
static double scale_one(double x, double r) {
    (void)x;
    return fmax(fabs(r), 1.0);
}

// Tolerances: cg_math.c's erf and tanh measure within 1.04 and 1.34 ulp over every float of
// [2^-20, 16] (glibc's own tanhf reaches 2.06 ulp), exp within 0.97 on this sweep; 2 leaves
// room for targets without FMA, where the polynomials are evaluated unfused. A composite op adds a
// few roundings at its scale: 3 ulps. The tanh-approximate gradient computes x^2 in float and is
// NaN once it overflows (|x| > 1.8e19), as PyTorch's float kernel is (the double evaluator
// gives 1): that range is not swept.
static const math_case cases[] = {
    {"Erf", "y = Erf (x)", 2, ref_erf, scale_self, 0},
    {"Tanh", "y = Tanh (x)", 2, ref_tanh, scale_self, 0},
    {"Exp", "y = Exp (x)", 2, ref_exp, scale_self, 0},
    {"Log", "y = Log (x)", 2, ref_log, scale_self, 0},
    // max(x, 0) + log1p(e^-|x|): the terms are the result's size or smaller.
    {"Softplus", "y = Softplus (x)", 3, ref_softplus, scale_self, 0},
    {"Gelu", "y = Gelu (x)", 3, ref_gelu, scale_gelu, 0},
    {"Gelu tanh", "y = Gelu <approximate = \"tanh\"> (x)", 3, ref_gelu_tanh, scale_gelu, 0},
    {"Gelu grad", "y = UnaryGrad <op = \"Gelu\"> (dy, x)", 3, ref_dgelu, scale_dgelu, 0},
    {"Gelu tanh grad", "y = UnaryGrad <op = \"Gelu\", approximate = \"tanh\"> (dy, x)", 3,
     ref_dgelu_tanh, scale_dgelu_tanh, 1e19},
    {"Tanh grad", "y = UnaryGrad <op = \"Tanh\"> (dy, x)", 3, ref_dtanh, scale_one, 0},
};

// got against the reference in ulps at the case's scale; prints the worst element. Zeros of
// the reference at x = +-0 must keep their sign.
static bool check_ulps(const math_case *mc, const double *x, const double *got, int64_t n) {
    double worst = 0;
    int64_t at = -1, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double r = mc->ref(x[i]), g = got[i];
        double e;
        if (isnan(r) || isnan(g)) {
            e = isnan(r) && isnan(g) ? 0 : INFINITY;
        } else if (isinf((float)r)) { // the float result overflows (or is infinite)
            e = g == (float)r ? 0 : INFINITY;
        } else if (x[i] == 0 && r == 0) {
            e = g == 0 && signbit(g) == signbit(r) ? 0 : INFINITY;
        } else if (g == r) {
            e = 0;
        } else {
            e = fabs(g - r) / ulp32(mc->scale(x[i], r));
        }
        if (!(e <= mc->max_ulp)) {
            if (bad < 5) {
                fprintf(stderr, "%s: x = %.9g (%a): got %.9g, want %.9g (%.3g ulp, at most %g)\n",
                        mc->name, x[i], x[i], g, r, e, mc->max_ulp);
            }
            bad++;
        }
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    printf("  %-15s %lld values, worst %.3f ulp%s%.9g\n", mc->name, (long long)n, worst,
           at >= 0 ? " at x = " : "", at >= 0 ? x[at] : 0.0);
    return bad == 0;
}

DL_TEST(math_erf_tanh_ulp_sweep) {
    double *sweep = malloc(MAX_SWEEP * sizeof *sweep);
    double *x = malloc(MAX_SWEEP * sizeof *x), *dy = malloc(MAX_SWEEP * sizeof *dy);
    double *got = malloc(MAX_SWEEP * sizeof *got);
    DL_CHECK(sweep && x && dy && got);
    if (!(sweep && x && dy && got)) {
        goto out;
    }
    int64_t n_all = make_sweep(sweep);
    for (size_t k = 0; k < DL_ARRAY_LEN(cases); k++) {
        const math_case *mc = &cases[k];
        int64_t n = 0;
        for (int64_t i = 0; i < n_all; i++) {
            if (!(mc->skip_above > 0 && fabs(sweep[i]) > mc->skip_above)) {
                x[n] = sweep[i];
                dy[n++] = 1.0;
            }
        }
        bool has_dy = strstr(mc->expr, "dy") != NULL;
        char text[512], dy_decl[64] = "";
        if (has_dy) {
            snprintf(dy_decl, sizeof dy_decl, "input dy : float[%lld]\n", (long long)n);
        }
        snprintf(text, sizeof text, "model m\ninput x : float[%lld]\n%s%s\noutput y\n",
                 (long long)n, dy_decl, mc->expr);
        for (int64_t i = 0; i < n; i++) {
            got[i] = NAN;
        }
        const cg_data given[] = {{"x", x, n}, {"dy", dy, n}};
        double *const outs[] = {got};
        // The evaluator comparison, ten times tighter than CG_TOL_MATH (the ulp check below
        // is the finer one; its absolute part covers the composite formulas' cancellation).
        DL_CHECK(
            cg_check_io(text, (cg_tol){1e-6, 1e-5, 0, 0}, NULL, 0, given, has_dy ? 2 : 1, outs));
        if (cg_runs_code()) {
            DL_CHECK(check_ulps(mc, x, got, n));
        }
    }
out:
    free(sweep);
    free(x);
    free(dy);
    free(got);
}
