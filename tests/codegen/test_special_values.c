// tests/codegen/test_special_values.c — NaN, signed zeros and integer edge cases through both
// backends, against PyTorch's values (not just backend against backend, which cannot notice
// both being wrong). Checked with torch 2.x on the CPU while writing, never at test time:
//   relu(nan) = nan, relu(-0) = -0; leaky_relu(nan) = nan; clamp(nan) = nan, clamp with a NaN
//   tensor bound = nan, a tie keeps x (clamp(-0, 0, 1) = -0); maximum/minimum/amax/amin
//   propagate NaN; argmax returns the first NaN; max_pool2d returns NaN for any window holding
//   one and routes its gradient to the first NaN; relu's gradient at NaN passes dy (it masks
//   relu(x) <= 0), leaky_relu's scales dy by alpha, abs's is 0 (sgn(nan) = 0); dropout
//   computes x * mask * scale, so a dropped NaN or inf is NaN.
// Integers: x / 0 = 0 and INT_MIN / -1 = INT_MIN (wrapping), -INT64_MIN = |INT64_MIN| =
// INT64_MIN, in both backends, without SIGFPE (docs/graph-format.md, "Integer arithmetic").
//
// NaNs sit at the first and last element, inside the vector body and in the vector tail
// (37 = 32 + 5 and 133 = 128 + 5 elements for 8- and 16-lane vectors), and at the first and
// last tap of reduction and pooling windows.
#include "cg_check.h"
#include "dl_base.h"
#include "dl_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TEXT_MAX 16384

// "[v0, v1, ...]" in the .dlg literal syntax (nan, inf, -inf, -0.0 spelled out).
static void fmt_list(char *buf, size_t size, const double *v, int64_t n) {
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int64_t i = 0; i < n && used < size; i++) {
        const char *sep = i ? ", " : "";
        int k;
        if (isnan(v[i])) {
            k = snprintf(buf + used, size - used, "%snan", sep);
        } else if (isinf(v[i])) {
            k = snprintf(buf + used, size - used, "%s%sinf", sep, v[i] < 0 ? "-" : "");
        } else if (v[i] == 0) {
            k = snprintf(buf + used, size - used, "%s%s", sep, signbit(v[i]) ? "-0.0" : "0");
        } else {
            k = snprintf(buf + used, size - used, "%s%.9g", sep, v[i]);
        }
        used += k > 0 ? (size_t)k : 0;
    }
    if (used < size) {
        snprintf(buf + used, size - used, "]");
    }
}

// Deterministic data: values in [-2, 2) that are exact in float32 (multiples of 1/8), signed
// zeros and infinities sprinkled in, NaN at the given positions.
static void fill(double *v, int64_t n, uint64_t seed, const int64_t *nan_at, size_t n_nan) {
    for (int64_t i = 0; i < n; i++) {
        v[i] = floor(dl_rng_uniform(seed, (uint64_t)i) * 32.0) / 8.0 - 2.0;
        if (i % 11 == 3) {
            v[i] = -0.0;
        } else if (i % 11 == 7) {
            v[i] = 0.0;
        } else if (i % 29 == 13) {
            v[i] = (i & 1) ? INFINITY : -INFINITY;
        }
    }
    for (size_t k = 0; k < n_nan; k++) {
        v[nan_at[k]] = NAN;
    }
}

// IEEE maximum / minimum: NaN propagates, -0 < +0 (torch.maximum on NaN; its signed-zero ties
// differ between its own code paths, ours follow llvm.maximum in both backends).
static double fmax_nan(double a, double b) {
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    return (a > b || (a == b && signbit(b))) ? a : b;
}

static double fmin_nan(double a, double b) {
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    return (a < b || (a == b && signbit(a))) ? a : b;
}

static double relu(double x) {
    return x < 0 ? 0.0 : x; // NaN and -0 pass through
}

static double clip(double x, double lo, double hi) {
    x = (x < lo || isnan(lo)) ? lo : x;
    return (x > hi || isnan(hi)) ? hi : x;
}

// ---------------------------------------------------------------------------------------------
// Elementwise

static const int64_t NAN37[] = {0, 5, 17, 31, 33, 36};
static const int64_t NAN133[] = {0, 1, 63, 64, 127, 128, 131, 132};

DL_TEST(nan_relu_leaky_clip_elementwise) {
    static const int64_t lens[] = {37, 133};
    for (size_t li = 0; li < DL_ARRAY_LEN(lens); li++) {
        int64_t n = lens[li];
        const int64_t *at = n == 37 ? NAN37 : NAN133;
        size_t n_at = n == 37 ? DL_ARRAY_LEN(NAN37) : DL_ARRAY_LEN(NAN133);
        double x[133], r[133], c1[133], c2[133], c3[133], c4[133], lk[133];
        fill(x, n, 7 + (uint64_t)n, at, n_at);
        for (int64_t i = 0; i < n; i++) {
            r[i] = relu(x[i]);
            c1[i] = clip(x[i], -1, 1);
            c2[i] = clip(x[i], 0, INFINITY); // Clip <min = 0>: Relu's twin
            c3[i] = clip(x[i], NAN, 1);      // a NaN bound input: everything NaN
            c4[i] = clip(x[i], 1.5, -0.5);   // min > max: max everywhere, NaN stays NaN
            lk[i] = x[i] >= 0 || isnan(x[i]) ? x[i] : 0.125 * x[i]; // exact in float32
        }
        char list[4096], text[TEXT_MAX];
        fmt_list(list, sizeof list, x, n);
        snprintf(text, sizeof text,
                 "model m\nconst x : float[%lld] = %s\nconst nanb : float[] = nan\n"
                 "const one : float[] = 1\nconst hi : float[] = -0.5\nconst lo : float[] = 1.5\n"
                 "r = Relu (x)\nc1 = Clip <min = -1.0, max = 1.0> (x)\nc2 = Clip <min = 0> (x)\n"
                 "c3 = Clip (x, nanb, one)\nc4 = Clip (x, lo, hi)\n"
                 "lk = LeakyRelu <alpha = 0.125> (x)\n"
                 "output r\noutput c1\noutput c2\noutput c3\noutput c4\noutput lk\n",
                 (long long)n, list);
        const cg_want want[] = {{"r", r, n},   {"c1", c1, n}, {"c2", c2, n},
                                {"c3", c3, n}, {"c4", c4, n}, {"lk", lk, n}};
        DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
    }
}

DL_TEST(nan_max_min_elementwise) {
    // a and b hold NaNs at different positions; c is a broadcast row with a NaN.
    static const int64_t at_a[] = {0, 9, 36}, at_b[] = {1, 9, 32};
    double a[37], b[37], c[37], mx[37], mn[37], m3[37];
    fill(a, 37, 11, at_a, DL_ARRAY_LEN(at_a));
    fill(b, 37, 12, at_b, DL_ARRAY_LEN(at_b));
    for (int64_t i = 0; i < 37; i++) {
        c[i] = i == 20 ? NAN : 0.5;
        mx[i] = fmax_nan(a[i], b[i]);
        mn[i] = fmin_nan(a[i], b[i]);
        m3[i] = fmax_nan(fmax_nan(a[i], b[i]), c[i]);
    }
    char la[1024], lb[1024], lc[1024], text[TEXT_MAX];
    fmt_list(la, sizeof la, a, 37);
    fmt_list(lb, sizeof lb, b, 37);
    fmt_list(lc, sizeof lc, c, 37);
    snprintf(text, sizeof text,
             "model m\nconst a : float[37] = %s\nconst b : float[37] = %s\n"
             "const c : float[37] = %s\n"
             "mx = Max (a, b)\nmn = Min (a, b)\nm3 = Max (a, b, c)\n"
             "output mx\noutput mn\noutput m3\n",
             la, lb, lc);
    const cg_want want[] = {{"mx", mx, 37}, {"mn", mn, 37}, {"m3", m3, 37}};
    DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}

// ---------------------------------------------------------------------------------------------
// Reductions and ArgMax: rows of 37 with the NaN first, last, inside, twice, nowhere, everywhere.

#define ROWS 6
#define COLS 37

static void reduction_data(double *x) {
    fill(x, ROWS * COLS, 21, NULL, 0);
    x[0 * COLS + 0] = NAN;  // first
    x[1 * COLS + 36] = NAN; // last (vector tail)
    x[2 * COLS + 5] = NAN;  // twice
    x[2 * COLS + 20] = NAN;
    x[3 * COLS + 16] = NAN; // at a vector boundary
    // row 4: no NaN
    for (int64_t j = 0; j < COLS; j++) {
        x[5 * COLS + j] = NAN; // all NaN
    }
}

DL_TEST(nan_reduce_max_min_argmax_rows) {
    double x[ROWS * COLS], rmax[ROWS], rmin[ROWS], amax[ROWS], alast[ROWS];
    reduction_data(x);
    for (int r = 0; r < ROWS; r++) {
        double mx = -INFINITY, mn = INFINITY, best = x[r * COLS];
        int64_t first = 0, last = 0;
        for (int64_t j = 0; j < COLS; j++) {
            double v = x[r * COLS + j];
            mx = fmax_nan(mx, v);
            mn = fmin_nan(mn, v);
            if (j > 0 && (v > best || (isnan(v) && !isnan(best)))) {
                best = v;
                first = j;
            }
        }
        best = x[r * COLS];
        for (int64_t j = 1; j < COLS; j++) {
            double v = x[r * COLS + j];
            if (v > best || v == best || isnan(v)) {
                best = v;
                last = j;
            }
        }
        rmax[r] = mx;
        rmin[r] = mn;
        amax[r] = (double)first;
        alast[r] = (double)last;
    }
    // PyTorch's own answers for the rows with NaN: argmax is the first NaN.
    DL_CHECK(amax[0] == 0 && amax[1] == 36 && amax[2] == 5 && amax[3] == 16 && amax[5] == 0);
    DL_CHECK(alast[2] == 20 && alast[5] == 36);
    static char list[ROWS * COLS * 16], text[ROWS * COLS * 16 + 1024];
    fmt_list(list, sizeof list, x, ROWS * COLS);
    snprintf(text, sizeof text,
             "model m\nconst xf : float[%d] = %s\nx = Reshape <shape = [%d, %d]> (xf)\n"
             "mx = ReduceMax <axes = [1], keepdims = 0> (x)\n"
             "mn = ReduceMin <axes = [1], keepdims = 0> (x)\n"
             "am = ArgMax <axis = 1, keepdims = 0> (x)\n"
             "al = ArgMax <axis = 1, keepdims = 0, select_last_index = 1> (x)\n"
             "output mx\noutput mn\noutput am\noutput al\n",
             ROWS * COLS, list, ROWS, COLS);
    const cg_want want[] = {
        {"mx", rmax, ROWS}, {"mn", rmin, ROWS}, {"am", amax, ROWS}, {"al", alast, ROWS}};
    DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}

DL_TEST(nan_reduce_max_min_argmax_columns) {
    // The same data transposed and reduced over axis 0: the strided (lane) path.
    double x[ROWS * COLS], xt[COLS * ROWS], rmax[ROWS], rmin[ROWS], amax[ROWS];
    reduction_data(x);
    for (int r = 0; r < ROWS; r++) {
        for (int64_t j = 0; j < COLS; j++) {
            xt[j * ROWS + r] = x[r * COLS + j];
        }
    }
    for (int r = 0; r < ROWS; r++) {
        double mx = -INFINITY, mn = INFINITY, best = x[r * COLS];
        int64_t first = 0;
        for (int64_t j = 0; j < COLS; j++) {
            double v = x[r * COLS + j];
            mx = fmax_nan(mx, v);
            mn = fmin_nan(mn, v);
            if (j > 0 && (v > best || (isnan(v) && !isnan(best)))) {
                best = v;
                first = j;
            }
        }
        rmax[r] = mx;
        rmin[r] = mn;
        amax[r] = (double)first;
    }
    static char list[ROWS * COLS * 16], text[ROWS * COLS * 16 + 1024];
    fmt_list(list, sizeof list, xt, ROWS * COLS);
    snprintf(text, sizeof text,
             "model m\nconst xf : float[%d] = %s\nx = Reshape <shape = [%d, %d]> (xf)\n"
             "mx = ReduceMax <axes = [0], keepdims = 0> (x)\n"
             "mn = ReduceMin <axes = [0], keepdims = 0> (x)\n"
             "am = ArgMax <axis = 0, keepdims = 0> (x)\n"
             "output mx\noutput mn\noutput am\n",
             ROWS * COLS, list, COLS, ROWS);
    const cg_want want[] = {{"mx", rmax, ROWS}, {"mn", rmin, ROWS}, {"am", amax, ROWS}};
    DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}

// ---------------------------------------------------------------------------------------------
// MaxPool and MaxPoolGrad: 2-D, x [1, 2, H, W], NaN at the first and last tap of windows.

#define PH 6
#define PW 37

// A plain 2-D max pool of one plane (stride s, kernel k, symmetric pad p) with PyTorch's NaN
// rule: the first NaN of a window (row-major tap order) is its max and receives its gradient.
static void pool_ref(const double *x, int k, int s, int p, double *y, int64_t *arg, int *oh,
                     int *ow) {
    *oh = (PH + 2 * p - k) / s + 1;
    *ow = (PW + 2 * p - k) / s + 1;
    for (int i = 0; i < *oh; i++) {
        for (int j = 0; j < *ow; j++) {
            double best = -INFINITY;
            int64_t where = -1;
            for (int a = 0; a < k; a++) {
                for (int b = 0; b < k; b++) {
                    int r = i * s - p + a, cidx = j * s - p + b;
                    if (r < 0 || r >= PH || cidx < 0 || cidx >= PW) {
                        continue;
                    }
                    double v = x[r * PW + cidx];
                    if (where < 0 || v > best || (isnan(v) && !isnan(best))) {
                        best = v;
                        where = r * PW + cidx;
                    }
                }
            }
            y[i * *ow + j] = best;
            arg[i * *ow + j] = where;
        }
    }
}

static void pool_data(double *x) {
    fill(x, 2 * PH * PW, 31, NULL, 0);
    // plane 0, 2x2 stride-2 windows: first tap of window (0, 0); last tap of window (1, 1)
    // = (3, 3); first tap of the last full window column (0, 17) = (0, 34); a lone NaN in the
    // column the floor mode drops (36) must not leak anywhere.
    x[0 * PW + 0] = NAN;
    x[3 * PW + 3] = NAN;
    x[0 * PW + 34] = NAN;
    x[5 * PW + 36] = NAN;
    // plane 1: two NaNs in one window (the first one wins the gradient) and one at the
    // bottom-right corner.
    double *x1 = x + PH * PW;
    x1[2 * PW + 9] = NAN;
    x1[3 * PW + 8] = NAN;
    x1[5 * PW + 35] = NAN;
}

DL_TEST(nan_max_pool_and_grad) {
    static double x[2 * PH * PW], dy[2 * PH * PW];
    pool_data(x);
    static const struct {
        int k, s, p;
        const char *attrs;
    } cases[] = {
        {2, 2, 0, "kernel_shape = [2, 2], strides = [2, 2]"},    // fast path
        {3, 1, 1, "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"}, // general path
        {3, 2, 0, "kernel_shape = [3, 3], strides = [2, 2]"},    // fast, overlap
    };
    for (size_t ci = 0; ci < DL_ARRAY_LEN(cases); ci++) {
        int k = cases[ci].k, s = cases[ci].s, p = cases[ci].p, oh = 0, ow = 0;
        static double y[2 * PH * PW], dx[2 * PH * PW];
        static int64_t arg[2 * PH * PW];
        for (int pl = 0; pl < 2; pl++) {
            pool_ref(x + pl * PH * PW, k, s, p, y + pl * PH * PW, arg + pl * PH * PW, &oh, &ow);
        }
        // The same oh, ow for both planes; compact y's second plane.
        memmove(y + oh * ow, y + PH * PW, sizeof(double) * (size_t)(oh * ow));
        memmove(arg + oh * ow, arg + PH * PW, sizeof(int64_t) * (size_t)(oh * ow));
        int64_t ny = 2 * oh * ow;
        for (int64_t i = 0; i < ny; i++) {
            dy[i] = (double)(i % 7) - 2.5; // no zero: every routed gradient shows
        }
        memset(dx, 0, sizeof dx);
        for (int64_t i = 0; i < ny; i++) {
            int64_t plane = i / (oh * ow);
            dx[plane * PH * PW + arg[i]] += dy[i];
        }
        static char lx[2 * PH * PW * 16], ldy[2 * PH * PW * 16], text[4 * PH * PW * 16 + 2048];
        fmt_list(lx, sizeof lx, x, 2 * PH * PW);
        fmt_list(ldy, sizeof ldy, dy, ny);
        snprintf(text, sizeof text,
                 "model m\nconst xf : float[%d] = %s\nconst dyf : float[%lld] = %s\n"
                 "x = Reshape <shape = [1, 2, %d, %d]> (xf)\n"
                 "dy = Reshape <shape = [1, 2, %d, %d]> (dyf)\n"
                 "y = MaxPool <%s> (x)\ndx = MaxPoolGrad <%s> (dy, x)\noutput y\noutput dx\n",
                 2 * PH * PW, lx, (long long)ny, ldy, PH, PW, oh, ow, cases[ci].attrs,
                 cases[ci].attrs);
        const cg_want want[] = {{"y", y, ny}, {"dx", dx, 2 * PH * PW}};
        DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
    }
}

// ---------------------------------------------------------------------------------------------
// UnaryGrad at NaN (x holds NaN; dy is finite and non-zero).

DL_TEST(nan_unary_grad_relu_leaky_abs) {
    double x[37], dy[37], gr[37], gl[37], ga[37];
    fill(x, 37, 41, NAN37, DL_ARRAY_LEN(NAN37));
    for (int64_t i = 0; i < 37; i++) {
        dy[i] = (double)(i % 5) + 0.5;
        gr[i] = x[i] <= 0 ? 0.0 : dy[i];                    // NaN passes dy
        gl[i] = x[i] > 0 ? dy[i] : 0.25 * dy[i];            // NaN: alpha dy
        ga[i] = x[i] > 0 ? dy[i] : x[i] < 0 ? -dy[i] : 0.0; // sgn(NaN) = sgn(+-0) = 0
    }
    char lx[2048], ldy[2048], text[TEXT_MAX];
    fmt_list(lx, sizeof lx, x, 37);
    fmt_list(ldy, sizeof ldy, dy, 37);
    snprintf(text, sizeof text,
             "model m\nconst x : float[37] = %s\nconst dy : float[37] = %s\n"
             "gr = UnaryGrad <op = \"Relu\"> (dy, x)\n"
             "gl = UnaryGrad <op = \"LeakyRelu\", alpha = 0.25> (dy, x)\n"
             "ga = UnaryGrad <op = \"Abs\"> (dy, x)\noutput gr\noutput gl\noutput ga\n",
             lx, ldy);
    const cg_want want[] = {{"gr", gr, 37}, {"gl", gl, 37}, {"ga", ga, 37}};
    DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}

// ---------------------------------------------------------------------------------------------
// Training-mode Dropout: a dropped element is x * 0 as in PyTorch (NaN and inf stay NaN,
// negatives give -0), the kept ones x / (1 - ratio).

DL_TEST(nan_dropout_training) {
    double x[133], y[133], mask[133];
    fill(x, 133, 51, NAN133, DL_ARRAY_LEN(NAN133));
    int dropped_special = 0;
    for (int64_t i = 0; i < 133; i++) {
        bool keep = dl_rng_uniform(9, 4 * 133 + (uint64_t)i) >= 0.5; // counter 4
        y[i] = keep ? x[i] * 2.0 : x[i] * 0.0;
        mask[i] = keep;
        dropped_special += !keep && !isfinite(x[i]);
    }
    DL_CHECK(dropped_special >= 3);
    char lx[4096], text[TEXT_MAX];
    fmt_list(lx, sizeof lx, x, 133);
    snprintf(text, sizeof text,
             "model m\nconst x : float[133] = %s\nconst t : bool[] = 1\n"
             "const cnt : int64[] = 4\n"
             "y, mask = Dropout <ratio = 0.5, seed = 9> (x, , t, cnt)\noutput y\noutput mask\n",
             lx);
    const cg_want want[] = {{"y", y, 133}, {"mask", mask, 133}};
    DL_CHECK(cg_check_want(text, CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}

// ---------------------------------------------------------------------------------------------
// Integer division, negation and absolute value at the edges: no trap, both backends agree.

DL_TEST(int_div_min_by_minus_one_and_by_zero) {
    const double m64 = -9223372036854775808.0, m32 = -2147483648.0;
    const double q64[] = {m64, m64, 0, 0, -5, -4611686018427387904.0, 0, 3, -3};
    const double q32[] = {m32, m32, 0, 0, -5, -1073741824.0, 0, 3, -3};
    const double neg64[] = {m64, 5, -7, 0};
    const double abs64[] = {m64, 9, 7, 0};
    const cg_want want[] = {{"q64", q64, 9}, {"q32", q32, 9}, {"n64", neg64, 4}, {"a64", abs64, 4}};
    DL_CHECK(cg_check_want(
        "model m\n"
        "const a : int64[9] = [-9223372036854775808, -9223372036854775808, 7, -7, 5, "
        "-9223372036854775808, 0, 7, -7]\n"
        "const b : int64[9] = [-1, 1, 0, 0, -1, 2, 0, 2, 2]\n"
        "const c : int32[9] = [-2147483648, -2147483648, 7, -7, 5, -2147483648, 0, 7, -7]\n"
        "const d : int32[9] = [-1, 1, 0, 0, -1, 2, 0, 2, 2]\n"
        "const e : int64[4] = [-9223372036854775808, -5, 7, 0]\n"
        "const f : int64[4] = [-9223372036854775808, 9, -7, 0]\n"
        "q64 = Div (a, b)\nq32 = Div (c, d)\nn64 = Neg (e)\na64 = Abs (f)\n"
        "output q64\noutput q32\noutput n64\noutput a64\n",
        CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
    // Random divisors with zeros among them (ints drawn from [0, 3)), broadcast both ways.
    CG_CHECK("model m\ninput a : int64[5, 37]\ninput b : int64[37]\nq = Div (a, b)\n"
             "r = Div (b, a)\noutput q\noutput r\n",
             CG_TOL_EXACT);
    CG_CHECK("model m\ninput a : int32[133]\ninput b : int32[133]\nq = Div (a, b)\noutput q\n",
             ((cg_tol){0, 0, 3, 5}));
}

// Float-to-int Cast and integer Pow saturate at the type's range (NaN casts to 0) in both
// backends; the evaluator used to wrap int32 results (Cast 3e9 -> -1294967296, and 0 for 1e20)
// where compiled code saturates. int32 Add/Mul/Sub wrap in both.
DL_TEST(float_to_int_and_int_pow_saturate) {
    const double i32max = 2147483647.0, i32min = -2147483648.0;
    const double i64max = 9223372036854775807.0, i64min = -9223372036854775808.0;
    const double c32[] = {i32max, i32min, i32max, i32min, 0, 2147483520, -2, i32max, i32min};
    const double c64[] = {3e9, -3e9, i64max, i64min, 0, 2147483520, -2, i64max, i64min};
    const double p32[] = {i32max, i32max, i32min, 1024, -8};
    const double p64[] = {i64max, 847288609443.0, -8589934592.0, 1024, -8};
    const double w32[] = {i32min, i32max, 131072}, v32[] = {i32max, i32min, 0};
    const cg_want want[] = {{"a", c32, 9}, {"b", c64, 9}, {"r", p32, 5},
                            {"s", p64, 5}, {"w", w32, 3}, {"v", v32, 3}};
    DL_CHECK(cg_check_want(
        "model m\nconst x : float[9] = [3e9, -3e9, 1e20, -1e20, nan, 2147483520, -2.5, inf, -inf]\n"
        "a = Cast <to = \"int32\"> (x)\nb = Cast <to = \"int64\"> (x)\n"
        "const p : int32[5] = [2, 3, -2, 2, -2]\nconst q : int32[5] = [40, 25, 33, 10, 3]\n"
        "const p8 : int64[5] = [2, 3, -2, 2, -2]\nconst q8 : int64[5] = [70, 25, 33, 10, 3]\n"
        "r = Pow (p, q)\ns = Pow (p8, q8)\n"
        "const m : int32[3] = [2147483647, -2147483648, 65536]\nconst k : int32[3] = [1, -1, "
        "65536]\n"
        "w = Add (m, k)\nv = Mul (m, k)\n"
        "output a\noutput b\noutput r\noutput s\noutput w\noutput v\n",
        CG_TOL_EXACT, want, DL_ARRAY_LEN(want)));
}
