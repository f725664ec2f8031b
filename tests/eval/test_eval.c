// tests/eval/test_eval.c — the reference evaluator against hand-computed values (checked with
// numpy while writing, never at test time). Each test builds a one-node module with the builder
// API, sets the node's output types by hand (so these tests do not depend on the shape pass),
// evaluates it and compares every output element. One pooling test runs the real shape pass
// instead, to show that its output sizes and the evaluator's windows agree.
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// One-op harness

// A tensor argument: dtype, shape and values (NULL values = zeros); absent = omitted input.
typedef struct arg {
    dl_dtype dt;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    const double *v;
    bool absent;
} arg;

#define NDIMS(...) ((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define V(...)     ((const double[]){__VA_ARGS__})
// A(dtype, values, dims...) ; S(dtype, value) scalar ; O(dtype, dims...) output type ; SO scalar
#define A(dt, vals, ...) ((arg){dt, NDIMS(__VA_ARGS__), {__VA_ARGS__}, vals, false})
#define S(dt, val)       ((arg){dt, 0, {0}, V(val), false})
#define O(dt, ...)       ((arg){dt, NDIMS(__VA_ARGS__), {__VA_ARGS__}, NULL, false})
#define SO(dt)           ((arg){dt, 0, {0}, NULL, false})
#define ABSENT           ((arg){DL_DT_FLOAT, 0, {0}, NULL, true})
#define F                DL_DT_FLOAT
#define I64              DL_DT_INT64
#define I32              DL_DT_INT32
#define B                DL_DT_BOOL

static dl_ir_attr ai(const char *name, int64_t v) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_INT, .i = v, .i_sym = -1};
}
static dl_ir_attr af(const char *name, double v) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_FLOAT, .f = v, .i_sym = -1};
}
static dl_ir_attr as(const char *name, const char *s) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_STRING, .s = s, .i_sym = -1};
}
static dl_ir_attr ails(const char *name, const int64_t *v, size_t n) {
    return (dl_ir_attr){.name = name,
                        .kind = DL_IR_ATTR_INTS,
                        .ints = (int64_t *)(uintptr_t)v,
                        .n = n,
                        .i_sym = -1};
}
#define AINTS(name, ...) ails(name, (const int64_t[]){__VA_ARGS__}, (size_t)NDIMS(__VA_ARGS__))

static dl_ir_type to_type(const arg *a) {
    dl_ir_type t = {a->dt, a->rank, {{0, 0}}};
    for (int32_t i = 0; i < a->rank; i++) {
        t.dims[i].value = a->dims[i];
        t.dims[i].sym = -1;
    }
    return t;
}

typedef struct run {
    dl_status st;
    dl_tensor out[4];
    size_t n_out;
    char msg[512]; // first diagnostic
} run;

static void run_fini(run *r) {
    for (size_t i = 0; i < r->n_out; i++) {
        dl_tensor_free(&r->out[i]);
    }
}

// Builds `y0.. = op<attrs>(x0..)`, evaluates it and keeps outputs + the first diagnostic.
static run run_op_x(dl_ir_op op, const arg *ins, size_t n_in, const dl_ir_attr *attrs,
                    size_t n_attrs, const arg *outs, size_t n_out, bool training) {
    run r = {0};
    r.n_out = 0;
    dl_ir_module *m = NULL;
    dl_diags *d = NULL;
    dl_tensor tin[8] = {0};
    dl_ir_value *vin[8] = {0};
    size_t n_tin = 0;
    if (dl_ir_module_create("t", &m) != DL_OK || dl_diags_create(&d) != DL_OK) {
        r.st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_in; i++) {
        if (ins[i].absent) {
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "x%zu", i);
        dl_ir_type t = to_type(&ins[i]);
        if (dl_ir_module_add_input(m, name, &t, DL_NO_LOC, &vin[i]) != DL_OK ||
            dl_tensor_alloc(&tin[n_tin], ins[i].dt, ins[i].rank, ins[i].dims) != DL_OK) {
            r.st = DL_ERR_NOMEM;
            goto out;
        }
        for (int64_t k = 0; ins[i].v && k < dl_tensor_numel(&tin[n_tin]); k++) {
            dl_tensor_set(&tin[n_tin], k, ins[i].v[k]);
        }
        n_tin++;
    }
    const char *names[4] = {"y0", "y1", "y2", "y3"};
    dl_ir_node *nd;
    dl_src_loc loc = {0, 3, 5, 4};
    if (dl_ir_module_add_node(m, op, vin, n_in, names, NULL, n_out, attrs, n_attrs, loc, &nd) !=
        DL_OK) {
        r.st = DL_ERR_INVALID_ARG;
        goto out;
    }
    for (size_t k = 0; k < n_out; k++) {
        nd->outputs[k]->type = to_type(&outs[k]);
        if (dl_ir_module_add_output(m, nd->outputs[k], DL_NO_LOC) != DL_OK) {
            r.st = DL_ERR_NOMEM;
            goto out;
        }
    }
    dl_ir_eval_opts opts = {NULL, 0, training};
    r.st = dl_ir_eval(m, &opts, tin, r.out, d);
    if (r.st == DL_OK) {
        r.n_out = n_out;
    }
    if (dl_diags_count(d) > 0) {
        snprintf(r.msg, sizeof r.msg, "%s", dl_diags_get(d, 0)->msg);
    }
out:
    for (size_t i = 0; i < n_tin; i++) {
        dl_tensor_free(&tin[i]);
    }
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
    return r;
}

#define INS(...) ((const arg[]){__VA_ARGS__}), DL_ARRAY_LEN(((const arg[]){__VA_ARGS__}))
#define ATTRS(...)                                                                                 \
    ((const dl_ir_attr[]){__VA_ARGS__}), DL_ARRAY_LEN(((const dl_ir_attr[]){__VA_ARGS__}))
#define NOATTR    NULL, 0
#define OUTS(...) ((const arg[]){__VA_ARGS__}), DL_ARRAY_LEN(((const arg[]){__VA_ARGS__}))

// Compares output k's shape and values (|got - want| <= 1e-6 + 1e-6 |want|); prints the first
// mismatches. Returns false on any difference.
static bool check_out(const run *r, size_t k, const arg *want, const double *vals, double tol) {
    if (r->st != DL_OK) {
        fprintf(stderr, "  eval failed: %s (%s)\n", dl_status_str(r->st), r->msg);
        return false;
    }
    const dl_tensor *t = &r->out[k];
    if (t->dtype != want->dt || t->rank != want->rank) {
        fprintf(stderr, "  output %zu: dtype/rank %d/%d, want %d/%d\n", k, (int)t->dtype,
                (int)t->rank, (int)want->dt, (int)want->rank);
        return false;
    }
    int64_t n = dl_tensor_numel(t);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = dl_tensor_get(t, i), w = vals[i];
        bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol + tol * fabs(w);
        if (!ok && bad++ < 5) {
            fprintf(stderr, "  output %zu[%lld]: got %.9g want %.9g\n", k, (long long)i, g, w);
        }
    }
    return bad == 0;
}

#define CHECK_OUT_TOL(r, k, want, vals, tol)                                                       \
    do {                                                                                           \
        arg w_ = want;                                                                             \
        DL_CHECK(check_out(&(r), k, &w_, vals, tol));                                              \
    } while (0)
#define CHECK_OUT(r, k, want, vals) CHECK_OUT_TOL(r, k, want, vals, 1e-6)

// One-output op, checked; frees the run.
#define EXPECT1(op, ins, attrs, outspec, vals)                                                     \
    do {                                                                                           \
        arg o_ = outspec;                                                                          \
        run r_ = run_op_x(op, ins, attrs, &o_, 1, false);                                          \
        bool ok_ = check_out(&r_, 0, &o_, vals, 1e-6);                                             \
        run_fini(&r_);                                                                             \
        DL_CHECK(ok_);                                                                             \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Elementwise

DL_TEST(add_broadcast) {
    EXPECT1(DL_IR_OP_ADD, INS(A(F, V(1, 2, 3, 4, 5, 6), 2, 3), A(F, V(10, 20, 30), 3)), NOATTR,
            O(F, 2, 3), V(11, 22, 33, 14, 25, 36));
    // [2,1] + [1,3] -> [2,3]
    EXPECT1(DL_IR_OP_ADD, INS(A(F, V(1, 2), 2, 1), A(F, V(10, 20, 30), 1, 3)), NOATTR, O(F, 2, 3),
            V(11, 21, 31, 12, 22, 32));
    // scalar + [2]
    EXPECT1(DL_IR_OP_SUB, INS(S(F, 5), A(F, V(1, 7), 2)), NOATTR, O(F, 2), V(4, -2));
    EXPECT1(DL_IR_OP_MUL, INS(A(F, V(1, 2, 3, 4), 2, 1, 2), A(F, V(2, 3), 2, 1)), NOATTR,
            O(F, 2, 2, 2), V(2, 4, 3, 6, 6, 8, 9, 12));
}

DL_TEST(div_int_truncates_toward_zero) {
    EXPECT1(DL_IR_OP_DIV, INS(A(I32, V(7, -7, 7, -7), 4), A(I32, V(2, 2, -2, -2), 4)), NOATTR,
            O(I32, 4), V(3, -3, -3, 3));
    EXPECT1(DL_IR_OP_DIV, INS(A(F, V(7, -7), 2), S(F, 2)), NOATTR, O(F, 2), V(3.5, -3.5));
}

// Integer division is defined for every pair, as compiled code computes it (no data error, no
// trap): x / 0 = 0, INT_MIN / -1 wraps to INT_MIN; -INT64_MIN and |INT64_MIN| wrap likewise.
// Before, x / 0 was an error here (and 0 in compiled code) and INT64_MIN / -1 saturated to
// INT64_MAX here (INT64_MIN in compiled code).
DL_TEST(div_int_by_zero_and_min_by_minus_one) {
    const double m64 = -9223372036854775808.0, m32 = -2147483648.0;
    EXPECT1(DL_IR_OP_DIV,
            INS(A(I64, V(1, -7, 0, m64, m64, m64), 6), A(I64, V(0, 0, 0, -1, 1, 2), 6)), NOATTR,
            O(I64, 6), V(0, 0, 0, m64, m64, -4611686018427387904.0));
    EXPECT1(DL_IR_OP_DIV, INS(A(I32, V(1, -7, m32, m32), 4), A(I32, V(0, 0, -1, 2), 4)), NOATTR,
            O(I32, 4), V(0, 0, m32, -1073741824.0));
    EXPECT1(DL_IR_OP_NEG, INS(A(I64, V(m64, -5, 0), 3)), NOATTR, O(I64, 3), V(m64, 5, 0));
    EXPECT1(DL_IR_OP_ABS, INS(A(I64, V(m64, -5, 0), 3)), NOATTR, O(I64, 3), V(m64, 5, 0));
    EXPECT1(DL_IR_OP_NEG, INS(A(I32, V(m32, 3), 2)), NOATTR, O(I32, 2), V(m32, -3));
}

DL_TEST(int32_wraps) {
    EXPECT1(DL_IR_OP_ADD, INS(A(I32, V(2147483647), 1), A(I32, V(1), 1)), NOATTR, O(I32, 1),
            V(-2147483648.0));
    EXPECT1(DL_IR_OP_MUL, INS(A(I32, V(65536), 1), A(I32, V(65537), 1)), NOATTR, O(I32, 1),
            V(65536));
}

DL_TEST(pow) {
    EXPECT1(DL_IR_OP_POW, INS(A(F, V(2, 3, 4), 3), S(F, 2)), NOATTR, O(F, 3), V(4, 9, 16));
    EXPECT1(DL_IR_OP_POW, INS(A(F, V(4, 9), 2), A(F, V(0.5, -1), 2)), NOATTR, O(F, 2),
            V(2, 1.0 / 9));
    EXPECT1(DL_IR_OP_POW, INS(A(I64, V(2, 3, -2), 3), A(I64, V(3, 2, 3), 3)), NOATTR, O(I64, 3),
            V(8, 9, -8));
}

DL_TEST(unary_math) {
    const double x[] = {-2, -0.5, 0, 0.5, 2};
    EXPECT1(DL_IR_OP_NEG, INS(A(F, x, 5)), NOATTR, O(F, 5), V(2, 0.5, 0, -0.5, -2));
    EXPECT1(DL_IR_OP_ABS, INS(A(F, x, 5)), NOATTR, O(F, 5), V(2, 0.5, 0, 0.5, 2));
    EXPECT1(DL_IR_OP_EXP, INS(A(F, x, 5)), NOATTR, O(F, 5),
            V(exp(-2), exp(-0.5), 1, exp(0.5), exp(2)));
    EXPECT1(DL_IR_OP_LOG, INS(A(F, V(1, exp(1.0), 0), 3)), NOATTR, O(F, 3), V(0, 1, -INFINITY));
    EXPECT1(DL_IR_OP_SQRT, INS(A(F, V(4, 2, -1), 3)), NOATTR, O(F, 3), V(2, sqrt(2), NAN));
    EXPECT1(DL_IR_OP_RECIPROCAL, INS(A(F, V(4, -0.5), 2)), NOATTR, O(F, 2), V(0.25, -2));
    EXPECT1(DL_IR_OP_RELU, INS(A(F, x, 5)), NOATTR, O(F, 5), V(0, 0, 0, 0.5, 2));
    EXPECT1(DL_IR_OP_LEAKY_RELU, INS(A(F, x, 5)), NOATTR, O(F, 5), V(-0.02, -0.005, 0, 0.5, 2));
    EXPECT1(DL_IR_OP_LEAKY_RELU, INS(A(F, x, 5)), ATTRS(af("alpha", 0.5)), O(F, 5),
            V(-1, -0.25, 0, 0.5, 2));
    EXPECT1(DL_IR_OP_SIGMOID, INS(A(F, V(0, 2, -800), 3)), NOATTR, O(F, 3),
            V(0.5, 1 / (1 + exp(-2)), 0));
    EXPECT1(DL_IR_OP_TANH, INS(A(F, x, 5)), NOATTR, O(F, 5),
            V(tanh(-2), tanh(-0.5), 0, tanh(0.5), tanh(2)));
    EXPECT1(DL_IR_OP_ERF, INS(A(F, x, 5)), NOATTR, O(F, 5),
            V(erf(-2), erf(-0.5), 0, erf(0.5), erf(2)));
    EXPECT1(DL_IR_OP_SOFTPLUS, INS(A(F, V(0, 1, -1, 1000), 4)), NOATTR, O(F, 4),
            V(log(2), log(1 + exp(1)), log(1 + exp(-1)), 1000));
}

DL_TEST(gelu) {
    // numpy: 0.5*x*(1+erf(x/sqrt(2))) and the tanh form
    EXPECT1(DL_IR_OP_GELU, INS(A(F, V(-1, 0, 1, 2), 4)), NOATTR, O(F, 4),
            V(-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416));
    EXPECT1(DL_IR_OP_GELU, INS(A(F, V(-1, 0, 1, 2), 4)), ATTRS(as("approximate", "tanh")), O(F, 4),
            V(-0.15880800939172324, 0, 0.8411919906082768, 1.9545976940871754));
}

// HardSwish (PyTorch's formula x * min(max(x + 3, 0), 6) / 6) and its UnaryGrad derivative
// (torch's hardswish_backward: 0 below -3, x / 3 + 1/2 up to 3 inclusive, 1 above; NaN passes dy).
DL_TEST(hard_swish) {
    const double x[8] = {-4, -3, -1, 0, 1.5, 3, 4, NAN};
    const double dy[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    EXPECT1(DL_IR_OP_HARD_SWISH, INS(A(F, x, 8)), NOATTR, O(F, 8),
            V(0, 0, -1.0 / 3, 0, 1.125, 3, 4, NAN));
    EXPECT1(DL_IR_OP_UNARY_GRAD, INS(A(F, dy, 8), A(F, x, 8)), ATTRS(as("op", "HardSwish")),
            O(F, 8), V(0, -1.5, 0.5, 1.5, 3, 4.5, 3, 3));
}

DL_TEST(clip) {
    const double x[] = {-3, -1, 0, 1, 3};
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5)), NOATTR, O(F, 5), x); // unbounded
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5), S(F, -1), S(F, 2)), NOATTR, O(F, 5), V(-1, -1, 0, 1, 2));
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5), ABSENT, S(F, 0.5)), NOATTR, O(F, 5),
            V(-3, -1, 0, 0.5, 0.5));
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5)), ATTRS(af("min", 0)), O(F, 5), V(0, 0, 0, 1, 3));
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5)), ATTRS(af("min", -2), af("max", 2)), O(F, 5),
            V(-2, -1, 0, 1, 2));
    // min > max: everything becomes max
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, x, 5), S(F, 2), S(F, 1)), NOATTR, O(F, 5), V(1, 1, 1, 1, 1));
}

DL_TEST(max_min_variadic) {
    EXPECT1(DL_IR_OP_MAX, INS(A(F, V(1, 5, 3), 3), A(F, V(4, 2, 6), 3), S(F, 3.5)), NOATTR, O(F, 3),
            V(4, 5, 6));
    EXPECT1(DL_IR_OP_MIN, INS(A(F, V(1, 5, 3), 3), A(F, V(4, 2), 2, 1)), NOATTR, O(F, 2, 3),
            V(1, 4, 3, 1, 2, 2));
    EXPECT1(DL_IR_OP_MAX, INS(A(F, V(1, 2), 2)), NOATTR, O(F, 2), V(1, 2));
}

DL_TEST(compare_logic_where) {
    EXPECT1(DL_IR_OP_EQUAL, INS(A(F, V(1, 2, 3), 3), S(F, 2)), NOATTR, O(B, 3), V(0, 1, 0));
    EXPECT1(DL_IR_OP_LESS, INS(A(I64, V(1, 2, 3), 3), S(I64, 2)), NOATTR, O(B, 3), V(1, 0, 0));
    EXPECT1(DL_IR_OP_GREATER, INS(A(F, V(1, 2, 3), 3), A(F, V(0, 3), 2, 1)), NOATTR, O(B, 2, 3),
            V(1, 1, 1, 0, 0, 0));
    EXPECT1(DL_IR_OP_NOT, INS(A(B, V(1, 0), 2)), NOATTR, O(B, 2), V(0, 1));
    EXPECT1(DL_IR_OP_AND, INS(A(B, V(1, 1, 0, 0), 4), A(B, V(1, 0, 1, 0), 4)), NOATTR, O(B, 4),
            V(1, 0, 0, 0));
    EXPECT1(DL_IR_OP_OR, INS(A(B, V(1, 1, 0, 0), 4), A(B, V(1, 0, 1, 0), 4)), NOATTR, O(B, 4),
            V(1, 1, 1, 0));
    EXPECT1(DL_IR_OP_WHERE, INS(A(B, V(1, 0), 2, 1), A(F, V(1, 2, 3), 3), S(F, -1)), NOATTR,
            O(F, 2, 3), V(1, 2, 3, -1, -1, -1));
}

DL_TEST(cast) {
    const double x[] = {-2.7, -0.5, 0, 1.9, 3.5};
    EXPECT1(DL_IR_OP_CAST, INS(A(F, x, 5)), ATTRS(as("to", "int32")), O(I32, 5), V(-2, 0, 0, 1, 3));
    EXPECT1(DL_IR_OP_CAST, INS(A(F, x, 5)), ATTRS(as("to", "int64")), O(I64, 5), V(-2, 0, 0, 1, 3));
    EXPECT1(DL_IR_OP_CAST, INS(A(F, x, 5)), ATTRS(as("to", "bool")), O(B, 5), V(1, 1, 0, 1, 1));
    // float16: 1/3 rounds to 0.333251953125; 65520 overflows to inf; bfloat16 of 1/3
    EXPECT1(DL_IR_OP_CAST, INS(A(F, V(1.0 / 3, 65520, 1e-8), 3)), ATTRS(as("to", "float16")),
            O(DL_DT_FLOAT16, 3), V(0.333251953125, INFINITY, 0));
    EXPECT1(DL_IR_OP_CAST, INS(A(F, V(1.0 / 3, 1.00390625), 2)), ATTRS(as("to", "bfloat16")),
            O(DL_DT_BFLOAT16, 2), V(0.333984375, 1.0));
    EXPECT1(DL_IR_OP_CAST, INS(A(I64, V(3, -4), 2)), ATTRS(as("to", "float")), O(F, 2), V(3, -4));
    EXPECT1(DL_IR_OP_CAST, INS(A(B, V(1, 0), 2)), ATTRS(as("to", "float")), O(F, 2), V(1, 0));
}

// float -> int saturates at the type's range, NaN -> 0 (as compiled code's llvm.fptosi.sat);
// int32 used to wrap here. Integer Pow saturates the same way.
DL_TEST(cast_and_int_pow_saturate) {
    EXPECT1(DL_IR_OP_CAST, INS(A(F, V(3e9, -3e9, 1e20, NAN, INFINITY, -INFINITY), 6)),
            ATTRS(as("to", "int32")), O(I32, 6),
            V(2147483647, -2147483648.0, 2147483647, 0, 2147483647, -2147483648.0));
    EXPECT1(DL_IR_OP_POW, INS(A(I32, V(2, -2, 2), 3), A(I32, V(40, 33, 10), 3)), NOATTR, O(I32, 3),
            V(2147483647, -2147483648.0, 1024));
    // int -> int32 still wraps (two's complement truncation)
    EXPECT1(DL_IR_OP_CAST, INS(A(I64, V(4294967297.0), 1)), ATTRS(as("to", "int32")), O(I32, 1),
            V(1));
}

DL_TEST(float16_rounds_at_each_node) {
    // 1 + 2^-11 is not a float16: the sum rounds to 1 (ties to even), so y = x + e - 1 is 0
    // when rounding happens at the Add.
    EXPECT1(DL_IR_OP_ADD, INS(A(DL_DT_FLOAT16, V(1), 1), A(DL_DT_FLOAT16, V(0.00048828125), 1)),
            NOATTR, O(DL_DT_FLOAT16, 1), V(1));
}

DL_TEST(identity) {
    EXPECT1(DL_IR_OP_IDENTITY, INS(A(I64, V(1, 2), 2)), NOATTR, O(I64, 2), V(1, 2));
}

// ---------------------------------------------------------------------------------------------
// NaN and signed zeros: PyTorch's results (torch 2.x, CPU; the same values as
// tests/codegen/test_special_values.c, which holds both backends to them).

// Output k's element i must be a zero with the sign bit `neg`.
static bool zero_sign_is(const run *r, size_t k, int64_t i, bool neg) {
    if (r->st != DL_OK) {
        return false;
    }
    double g = dl_tensor_get(&r->out[k], i);
    if (g != 0 || (signbit(g) != 0) != neg) {
        fprintf(stderr, "  output %zu[%lld]: got %g, want %s0\n", k, (long long)i, g,
                neg ? "-" : "+");
        return false;
    }
    return true;
}

#define EXPECT1_SIGNS(op, ins, attrs, outspec, vals, ...)                                          \
    do {                                                                                           \
        arg o_ = outspec;                                                                          \
        run r_ = run_op_x(op, ins, attrs, &o_, 1, false);                                          \
        bool ok_ = check_out(&r_, 0, &o_, vals, 1e-6);                                             \
        const int64_t zs_[][2] = {__VA_ARGS__};                                                    \
        for (size_t z_ = 0; ok_ && z_ < DL_ARRAY_LEN(zs_); z_++) {                                 \
            ok_ = zero_sign_is(&r_, 0, zs_[z_][0], zs_[z_][1] != 0);                               \
        }                                                                                          \
        run_fini(&r_);                                                                             \
        DL_CHECK(ok_);                                                                             \
    } while (0)

static const double xnan[8] = {NAN, -1, 2, NAN, -0.0, 0, -INFINITY, INFINITY};

DL_TEST(nan_relu_leaky_clip) {
    // relu(nan) = nan (was 0), relu(-0) = -0 (was +0)
    EXPECT1_SIGNS(DL_IR_OP_RELU, INS(A(F, xnan, 8)), NOATTR, O(F, 8),
                  V(NAN, 0, 2, NAN, 0, 0, 0, INFINITY), {1, 0}, {4, 1}, {5, 0}, {6, 0});
    EXPECT1_SIGNS(DL_IR_OP_LEAKY_RELU, INS(A(F, xnan, 8)), ATTRS(af("alpha", 0.5)), O(F, 8),
                  V(NAN, -0.5, 2, NAN, 0, 0, -INFINITY, INFINITY), {4, 1}, {5, 0});
    // a tie keeps x: clamp(-0, 0, inf) = -0
    EXPECT1_SIGNS(DL_IR_OP_CLIP, INS(A(F, xnan, 8)), ATTRS(af("min", 0)), O(F, 8),
                  V(NAN, 0, 2, NAN, 0, 0, 0, INFINITY), {4, 1}, {5, 0});
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, xnan, 8), S(F, -1), S(F, 1)), NOATTR, O(F, 8),
            V(NAN, -1, 1, NAN, 0, 0, -1, 1));
    // a NaN bound makes everything NaN (was ignored)
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, xnan, 8), S(F, NAN), S(F, 1)), NOATTR, O(F, 8),
            V(NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN));
    EXPECT1(DL_IR_OP_CLIP, INS(A(F, xnan, 8), ABSENT, S(F, NAN)), NOATTR, O(F, 8),
            V(NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN));
}

DL_TEST(nan_max_min_reduce_argmax) {
    EXPECT1_SIGNS(DL_IR_OP_MAX, INS(A(F, V(NAN, 1, 2, -0.0, 0), 5), A(F, V(1, NAN, 3, 0, -0.0), 5)),
                  NOATTR, O(F, 5), V(NAN, NAN, 3, 0, 0), {3, 0}, {4, 0});
    EXPECT1_SIGNS(DL_IR_OP_MIN, INS(A(F, V(NAN, 1, 2, -0.0, 0), 5), A(F, V(1, NAN, 3, 0, -0.0), 5)),
                  NOATTR, O(F, 5), V(NAN, NAN, 2, 0, 0), {3, 1}, {4, 1});
    // rows: NaN first, NaN last, two NaNs, none
    const double x[] = {NAN, 1, 2, 3, 1, 2, 3, NAN, 1, NAN, 2, NAN, 1, 5, 2, 0};
    EXPECT1(DL_IR_OP_REDUCE_MAX, INS(A(F, x, 4, 4)), ATTRS(AINTS("axes", 1), ai("keepdims", 0)),
            O(F, 4), V(NAN, NAN, NAN, 5));
    EXPECT1(DL_IR_OP_REDUCE_MIN, INS(A(F, x, 4, 4)), ATTRS(AINTS("axes", 1), ai("keepdims", 0)),
            O(F, 4), V(NAN, NAN, NAN, 0));
    EXPECT1(DL_IR_OP_REDUCE_MAX, INS(A(F, x, 4, 4)), ATTRS(AINTS("axes", 0), ai("keepdims", 0)),
            O(F, 4), V(NAN, NAN, 3, NAN));
    // argmax: the first NaN (torch.argmax), the last one with select_last_index
    EXPECT1(DL_IR_OP_ARG_MAX, INS(A(F, x, 4, 4)), ATTRS(ai("axis", 1), ai("keepdims", 0)),
            O(I64, 4), V(0, 3, 1, 1));
    EXPECT1(DL_IR_OP_ARG_MAX, INS(A(F, x, 4, 4)),
            ATTRS(ai("axis", 1), ai("keepdims", 0), ai("select_last_index", 1)), O(I64, 4),
            V(0, 3, 3, 1));
}

DL_TEST(nan_max_pool_and_grad) {
    // 4x4, 2x2 windows: NaN at the first tap of window (0, 0), inside window (0, 1) and at the
    // last tap of window (1, 1); window (1, 0) has none.
    const double x[16] = {NAN, 1, 2, 3, 4, 5, NAN, 7, 8, 9, 10, 11, 12, 13, 14, NAN};
    arg o = O(F, 1, 1, 2, 2), oi = O(I64, 1, 1, 2, 2);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x, 1, 1, 4, 4)),
                     ATTRS(AINTS("kernel_shape", 2, 2), AINTS("strides", 2, 2)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(NAN, NAN, 13, NAN));
    CHECK_OUT(r, 1, oi, V(0, 6, 13, 15));
    run_fini(&r);
    // the gradient goes to the NaN tap (torch: max_pool2d's backward follows its indices)
    EXPECT1(DL_IR_OP_MAX_POOL_GRAD, INS(A(F, V(1, 2, 3, 4), 1, 1, 2, 2), A(F, x, 1, 1, 4, 4)),
            ATTRS(AINTS("kernel_shape", 2, 2), AINTS("strides", 2, 2)), O(F, 1, 1, 4, 4),
            V(1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4));
}

// Training-mode Dropout: a dropped element is x * 0 (PyTorch's x * mask * scale), so NaN and inf
// stay NaN where they are dropped (they became 0 before), negatives give -0.
DL_TEST(nan_dropout) {
    double x[64], want[64];
    int dropped_nan = 0;
    for (int i = 0; i < 64; i++) {
        x[i] = i % 4 == 0 ? NAN : i % 4 == 1 ? INFINITY : i % 4 == 2 ? -1.5 : 2.0;
        bool keep = dl_rng_uniform(3, (uint64_t)i) >= 0.5;
        want[i] = keep ? x[i] * 2.0 : x[i] * 0.0;
        dropped_nan += !keep && i % 4 < 2;
    }
    DL_CHECK(dropped_nan > 4); // the seed drops some NaN and inf elements
    arg oy = O(F, 64);
    run r = run_op_x(DL_IR_OP_DROPOUT, INS(A(F, x, 64)), ATTRS(af("ratio", 0.5), ai("seed", 3)),
                     &oy, 1, true);
    bool ok = check_out(&r, 0, &oy, want, 0);
    for (int i = 2; ok && i < 64; i += 4) {
        ok = want[i] != 0 || zero_sign_is(&r, 0, i, true);
    }
    run_fini(&r);
    DL_CHECK(ok);
}

DL_TEST(nan_unary_grad) {
    const double dy[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    // relu: x <= 0 ? 0 : dy, so NaN passes dy (was 0)
    EXPECT1(DL_IR_OP_UNARY_GRAD, INS(A(F, dy, 8), A(F, xnan, 8)), ATTRS(as("op", "Relu")), O(F, 8),
            V(3, 0, 3, 3, 0, 0, 0, 3));
    // leaky: x > 0 ? dy : alpha dy
    EXPECT1(DL_IR_OP_UNARY_GRAD, INS(A(F, dy, 8), A(F, xnan, 8)),
            ATTRS(as("op", "LeakyRelu"), af("alpha", 0.5)), O(F, 8),
            V(1.5, 1.5, 3, 1.5, 1.5, 1.5, 1.5, 3));
    // abs: sgn(x) dy with sgn(NaN) = 0 (was NaN)
    EXPECT1(DL_IR_OP_UNARY_GRAD, INS(A(F, dy, 8), A(F, xnan, 8)), ATTRS(as("op", "Abs")), O(F, 8),
            V(0, -3, 3, 0, 0, 0, -3, 3));
}

// ---------------------------------------------------------------------------------------------
// Reductions

static const double r234[24] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};

DL_TEST(reduce_sum_mean) {
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, r234, 2, 3, 4)), NOATTR, O(F, 1, 1, 1), V(276));
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, r234, 2, 3, 4)), ATTRS(ai("keepdims", 0)), SO(F), V(276));
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, r234, 2, 3, 4)), ATTRS(AINTS("axes", 1)), O(F, 2, 1, 4),
            V(12, 15, 18, 21, 48, 51, 54, 57));
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, r234, 2, 3, 4)),
            ATTRS(AINTS("axes", 0, -1), ai("keepdims", 0)), O(F, 3), V(60, 92, 124));
    EXPECT1(DL_IR_OP_REDUCE_MEAN, INS(A(F, r234, 2, 3, 4)), ATTRS(AINTS("axes", -1)), O(F, 2, 3, 1),
            V(1.5, 5.5, 9.5, 13.5, 17.5, 21.5));
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, r234, 2, 3, 4)), ATTRS(ai("noop_with_empty_axes", 1)),
            O(F, 2, 3, 4), r234);
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(I64, V(1, 2, 3, 4), 2, 2)),
            ATTRS(AINTS("axes", 0), ai("keepdims", 0)), O(I64, 2), V(4, 6));
}

DL_TEST(reduce_max_min) {
    const double x[] = {3, -1, 7, 2, 9, 0};
    EXPECT1(DL_IR_OP_REDUCE_MAX, INS(A(F, x, 2, 3)), ATTRS(AINTS("axes", 1), ai("keepdims", 0)),
            O(F, 2), V(7, 9));
    EXPECT1(DL_IR_OP_REDUCE_MIN, INS(A(F, x, 2, 3)), ATTRS(AINTS("axes", 0)), O(F, 1, 3),
            V(2, -1, 0));
    EXPECT1(DL_IR_OP_REDUCE_MIN, INS(A(F, x, 2, 3)), NOATTR, O(F, 1, 1), V(-1));
    // empty reductions: max of nothing is -inf, min +inf, sum 0
    EXPECT1(DL_IR_OP_REDUCE_MAX, INS(A(F, NULL, 2, 0)), ATTRS(AINTS("axes", 1)), O(F, 2, 1),
            V(-INFINITY, -INFINITY));
    EXPECT1(DL_IR_OP_REDUCE_MIN, INS(A(F, NULL, 2, 0)), ATTRS(AINTS("axes", 1)), O(F, 2, 1),
            V(INFINITY, INFINITY));
    EXPECT1(DL_IR_OP_REDUCE_SUM, INS(A(F, NULL, 2, 0)), ATTRS(AINTS("axes", 1)), O(F, 2, 1),
            V(0, 0));
}

DL_TEST(argmax) {
    const double x[] = {1, 5, 5, 2, 7, 7, 0, 1};
    EXPECT1(DL_IR_OP_ARG_MAX, INS(A(F, x, 2, 4)), ATTRS(ai("axis", 1)), O(I64, 2, 1), V(1, 0));
    EXPECT1(DL_IR_OP_ARG_MAX, INS(A(F, x, 2, 4)),
            ATTRS(ai("axis", -1), ai("select_last_index", 1), ai("keepdims", 0)), O(I64, 2),
            V(2, 1));
    EXPECT1(DL_IR_OP_ARG_MAX, INS(A(F, x, 2, 4)), NOATTR, O(I64, 1, 4), V(1, 1, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

DL_TEST(matmul_2d_and_1d) {
    const double a[] = {1, 2, 3, 4, 5, 6}; // [2, 3]
    const double b[] = {1, 0, 0, 1, 1, 1}; // [3, 2]
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, a, 2, 3), A(F, b, 3, 2)), NOATTR, O(F, 2, 2),
            V(4, 5, 10, 11));
    // [3] @ [3, 2] -> [2]; [2, 3] @ [3] -> [2]; [3] @ [3] -> []
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, V(1, 2, 3), 3), A(F, b, 3, 2)), NOATTR, O(F, 2), V(4, 5));
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, a, 2, 3), A(F, V(1, 1, 1), 3)), NOATTR, O(F, 2), V(6, 15));
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, V(1, 2, 3), 3), A(F, V(4, 5, 6), 3)), NOATTR, SO(F), V(32));
}

DL_TEST(matmul_batch_broadcast) {
    // a: [2, 1, 2, 2], b: [3, 2, 2] -> [2, 3, 2, 2]
    const double a[] = {1, 2, 3, 4, 0, 1, 1, 0};
    const double b[] = {1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0};
    const double want[] = {1, 2, 3, 4, 2, 4, 6, 8, 2, 1, 4, 3, 0, 1, 1, 0, 0, 2, 2, 0, 1, 0, 0, 1};
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, a, 2, 1, 2, 2), A(F, b, 3, 2, 2)), NOATTR, O(F, 2, 3, 2, 2),
            want);
    // batched a with a 2-D b
    EXPECT1(DL_IR_OP_MATMUL, INS(A(F, a, 2, 2, 2), A(F, V(1, 1, 0, 1), 2, 2)), NOATTR,
            O(F, 2, 2, 2), V(1, 3, 3, 7, 0, 1, 1, 1));
}

DL_TEST(gemm) {
    const double a[] = {1, 2, 3, 4, 5, 6}; // [2, 3]
    const double b[] = {1, 2, 3, 4, 5, 6}; // [3, 2]
    EXPECT1(DL_IR_OP_GEMM, INS(A(F, a, 2, 3), A(F, b, 3, 2)), NOATTR, O(F, 2, 2),
            V(22, 28, 49, 64));
    EXPECT1(DL_IR_OP_GEMM, INS(A(F, a, 2, 3), A(F, b, 3, 2), A(F, V(1, -1), 2)),
            ATTRS(af("alpha", 0.5), af("beta", 2)), O(F, 2, 2), V(13, 12, 26.5, 30));
    // transA: A is [3, 2] used as [2, 3]; transB: B is [2, 3] used as [3, 2]
    EXPECT1(DL_IR_OP_GEMM, INS(A(F, a, 3, 2), A(F, b, 2, 3), S(F, 1)),
            ATTRS(ai("transA", 1), ai("transB", 1)), O(F, 2, 2), V(23, 50, 29, 65));
    EXPECT1(DL_IR_OP_GEMM, INS(A(F, a, 2, 3), A(F, b, 3, 2), A(F, V(1, 2), 2, 1)), NOATTR,
            O(F, 2, 2), V(23, 29, 51, 66));
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling (expected values: a direct numpy loop, and ONNX's own examples)

static const double x16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const double ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

DL_TEST(conv_basic_bias_stride_pads_dilation) {
    EXPECT1(DL_IR_OP_CONV,
            INS(A(F, x16, 1, 1, 4, 4), A(F, V(1, 0, 0, -1), 1, 1, 2, 2), A(F, V(0.5), 1)), NOATTR,
            O(F, 1, 1, 3, 3), V(-4.5, -4.5, -4.5, -4.5, -4.5, -4.5, -4.5, -4.5, -4.5));
    EXPECT1(DL_IR_OP_CONV, INS(A(F, x16, 1, 1, 4, 4), A(F, ones9, 1, 1, 3, 3)),
            ATTRS(AINTS("strides", 2, 2), AINTS("pads", 1, 1, 1, 1)), O(F, 1, 1, 2, 2),
            V(10, 24, 51, 90));
    EXPECT1(DL_IR_OP_CONV, INS(A(F, x16, 1, 1, 4, 4), A(F, V(1, 0, 0, -1), 1, 1, 2, 2)),
            ATTRS(AINTS("dilations", 2, 2)), O(F, 1, 1, 2, 2), V(-10, -10, -10, -10));
}

DL_TEST(conv_padding_multiplies_zeros) {
    // ONNX pads the input with zeros: a tap in the padding multiplies its weight by 0, so an
    // infinite weight makes every output whose tap lands in the padding NaN (0 * Inf), and the
    // one whose tap reads x[1, 1] = 5 infinite.
    const double w9[9] = {INFINITY, 1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT1(DL_IR_OP_CONV, INS(A(F, x16, 1, 1, 4, 4), A(F, w9, 1, 1, 3, 3)),
            ATTRS(AINTS("strides", 2, 2), AINTS("pads", 1, 1, 1, 1)), O(F, 1, 1, 2, 2),
            V(NAN, NAN, NAN, INFINITY));
}

DL_TEST(conv_group_and_auto_pad) {
    const double x18[18] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    EXPECT1(
        DL_IR_OP_CONV,
        INS(A(F, x18, 1, 2, 3, 3), A(F, V(1, 2, 3, 4, -1, 0, 0, 1), 2, 1, 2, 2), A(F, V(0, 10), 2)),
        ATTRS(ai("group", 2)), O(F, 1, 2, 2, 2), V(27, 37, 57, 67, 14, 14, 14, 14));
    EXPECT1(DL_IR_OP_CONV, INS(A(F, x16, 1, 1, 4, 4), A(F, ones9, 1, 1, 3, 3)),
            ATTRS(as("auto_pad", "SAME_UPPER"), AINTS("strides", 2, 2)), O(F, 1, 1, 2, 2),
            V(45, 39, 66, 50));
    EXPECT1(DL_IR_OP_CONV, INS(A(F, x16, 1, 1, 4, 4), A(F, ones9, 1, 1, 3, 3)),
            ATTRS(as("auto_pad", "SAME_LOWER"), AINTS("strides", 2, 2)), O(F, 1, 1, 2, 2),
            V(10, 24, 51, 90));
    // 1-D conv: [1, 1, 5] * [1, 1, 2], stride 2, pad 1 at the start
    EXPECT1(DL_IR_OP_CONV, INS(A(F, V(1, 2, 3, 4, 5), 1, 1, 5), A(F, V(1, 10), 1, 1, 2)),
            ATTRS(AINTS("strides", 2), AINTS("pads", 1, 0)), O(F, 1, 1, 3), V(10, 32, 54));
}

static const double ct_x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const double ct_w[18] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

DL_TEST(conv_transpose_onnx_examples) {
    const double plane[25] = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
    double want[50];
    memcpy(want, plane, sizeof plane);
    memcpy(want + 25, plane, sizeof plane);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE, INS(A(F, ct_x, 1, 1, 3, 3), A(F, ct_w, 1, 2, 3, 3)), NOATTR,
            O(F, 1, 2, 5, 5), want);
    const double pp[21] = {1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4, 9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
    double want2[42];
    memcpy(want2, pp, sizeof pp);
    memcpy(want2 + 21, pp, sizeof pp);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE, INS(A(F, ct_x, 1, 1, 3, 3), A(F, ct_w, 1, 2, 3, 3)),
            ATTRS(AINTS("strides", 3, 2), AINTS("pads", 1, 2, 1, 2)), O(F, 1, 2, 7, 3), want2);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE,
            INS(A(F, V(3, 8, 1, 9, 5, 7, 3, 2, 6), 1, 1, 3, 3), A(F, V(7, 2, 1, 9), 1, 1, 2, 2)),
            ATTRS(AINTS("dilations", 2, 2)), O(F, 1, 1, 5, 5),
            V(21, 56, 13, 16, 2, 63, 35, 67, 10, 14, 24, 22, 76, 76, 21, 9, 5, 88, 45, 63, 3, 2, 33,
              18, 54));
    const double sp[36] = {0, 0, 1, 1, 3, 2, 0, 0, 1,  1,  3,  2,  3, 3, 8,  5, 12, 7,
                           3, 3, 7, 4, 9, 5, 9, 9, 20, 11, 24, 13, 6, 6, 13, 7, 15, 8};
    double want3[72];
    memcpy(want3, sp, sizeof sp);
    memcpy(want3 + 36, sp, sizeof sp);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE, INS(A(F, ct_x, 1, 1, 3, 3), A(F, ct_w, 1, 2, 3, 3)),
            ATTRS(as("auto_pad", "SAME_UPPER"), AINTS("strides", 2, 2)), O(F, 1, 2, 6, 6), want3);
}

DL_TEST(conv_transpose_output_shape) {
    // ONNX's test_convtranspose_output_shape: output_shape [10, 8] is one row and one column
    // larger than the full output, so the extra row/column is at the end (zeros).
    const double p[80] = {0,  0, 1, 1, 3, 2, 2,  0, 0,  0, 1,  1, 3,  2, 2, 0, 0, 0, 1,  1,
                          3,  2, 2, 0, 3, 3, 7,  4, 9,  5, 5,  0, 3,  3, 7, 4, 9, 5, 5,  0,
                          3,  3, 7, 4, 9, 5, 5,  0, 6,  6, 13, 7, 15, 8, 8, 0, 6, 6, 13, 7,
                          15, 8, 8, 0, 6, 6, 13, 7, 15, 8, 8,  0, 0,  0, 0, 0, 0, 0, 0,  0};
    double want[160];
    memcpy(want, p, sizeof p);
    memcpy(want + 80, p, sizeof p);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE, INS(A(F, ct_x, 1, 1, 3, 3), A(F, ct_w, 1, 2, 3, 3)),
            ATTRS(AINTS("strides", 3, 2), AINTS("output_shape", 10, 8)), O(F, 1, 2, 10, 8), want);
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE, INS(A(F, ct_x, 1, 1, 3, 3), A(F, ct_w, 1, 2, 3, 3)),
            ATTRS(AINTS("strides", 3, 2), AINTS("output_padding", 1, 1)), O(F, 1, 2, 10, 8), want);
}

DL_TEST(conv_transpose_bias_output_padding) {
    // 1 x 2 input, 1 x 1 kernel (3), stride 2 along W, output_padding 1: x lands on columns
    // 0 and 2, column 3 is the extra output_padding column (bias only).
    EXPECT1(DL_IR_OP_CONV_TRANSPOSE,
            INS(A(F, V(1, 2), 1, 1, 1, 2), A(F, V(3), 1, 1, 1, 1), A(F, V(0.5), 1)),
            ATTRS(AINTS("strides", 1, 2), AINTS("output_padding", 0, 1)), O(F, 1, 1, 1, 4),
            V(3.5, 0.5, 6.5, 0.5));
}

DL_TEST(max_pool) {
    arg o = O(F, 1, 1, 2, 2), oi = O(I64, 1, 1, 2, 2);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x16, 1, 1, 4, 4)),
                     ATTRS(AINTS("kernel_shape", 2, 2), AINTS("strides", 2, 2)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(5, 7, 13, 15));
    CHECK_OUT(r, 1, oi, V(5, 7, 13, 15));
    run_fini(&r);
    // pads: padding never wins; indices point into the input
    arg o3 = O(F, 1, 1, 3, 3), oi3 = O(I64, 1, 1, 3, 3);
    const arg outs3[2] = {o3, oi3};
    const double xm[9] = {-5, -4, -3, -2, -1, -6, -7, -8, -9};
    r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, xm, 1, 1, 3, 3)),
                 ATTRS(AINTS("kernel_shape", 3, 3), AINTS("pads", 1, 1, 1, 1)), outs3, 2, false);
    CHECK_OUT(r, 0, o3, V(-1, -1, -1, -1, -1, -1, -1, -1, -1));
    CHECK_OUT(r, 1, oi3, V(4, 4, 4, 4, 4, 4, 4, 4, 4));
    run_fini(&r);
    // ceil_mode: 4 -> ceil((4-3)/2)+1 = 2; the last window is clipped
    EXPECT1(DL_IR_OP_MAX_POOL, INS(A(F, x16, 1, 1, 4, 4)),
            ATTRS(AINTS("kernel_shape", 3, 3), AINTS("strides", 2, 2), ai("ceil_mode", 1)),
            O(F, 1, 1, 2, 2), V(10, 11, 14, 15));
    // dilations 2: window {0, 2} x {0, 2}
    EXPECT1(DL_IR_OP_MAX_POOL, INS(A(F, x16, 1, 1, 4, 4)),
            ATTRS(AINTS("kernel_shape", 2, 2), AINTS("dilations", 2, 2)), O(F, 1, 1, 2, 2),
            V(10, 11, 14, 15));
    // channel offset in indices: second channel
    arg o2 = O(F, 1, 2, 1, 1), oi2 = O(I64, 1, 2, 1, 1);
    const arg outs2[2] = {o2, oi2};
    r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, V(1, 3, 2, 0, 9, 8, 7, 6), 1, 2, 2, 2)),
                 ATTRS(AINTS("kernel_shape", 2, 2)), outs2, 2, false);
    CHECK_OUT(r, 0, o2, V(3, 9));
    CHECK_OUT(r, 1, oi2, V(1, 4));
    run_fini(&r);
}

DL_TEST(average_pool) {
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, ct_x, 1, 1, 3, 3)),
            ATTRS(AINTS("kernel_shape", 3, 3), AINTS("pads", 1, 1, 1, 1)), O(F, 1, 1, 3, 3),
            V(2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6));
    EXPECT1(
        DL_IR_OP_AVERAGE_POOL, INS(A(F, ct_x, 1, 1, 3, 3)),
        ATTRS(AINTS("kernel_shape", 3, 3), AINTS("pads", 1, 1, 1, 1), ai("count_include_pad", 1)),
        O(F, 1, 1, 3, 3),
        V(8.0 / 9, 15.0 / 9, 12.0 / 9, 21.0 / 9, 4, 27.0 / 9, 20.0 / 9, 33.0 / 9, 24.0 / 9));
    // ceil_mode: the clipped window averages only real positions even with count_include_pad
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, x16, 1, 1, 4, 4)),
            ATTRS(AINTS("kernel_shape", 3, 3), AINTS("strides", 2, 2), ai("ceil_mode", 1),
                  ai("count_include_pad", 1)),
            O(F, 1, 1, 2, 2), V(5, 6.5, 11, 12.5));
    EXPECT1(DL_IR_OP_GLOBAL_AVERAGE_POOL, INS(A(F, V(1, 2, 3, 4, 5, 6, 7, 8), 1, 2, 2, 2)), NOATTR,
            O(F, 1, 2, 1, 1), V(2.5, 6.5));
}

DL_TEST(pool_1d) {
    arg o = O(F, 1, 1, 4), oi = O(I64, 1, 1, 4);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, V(1, 3, 2, 5, 4), 1, 1, 5)),
                     ATTRS(AINTS("kernel_shape", 2)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(3, 3, 5, 5));
    CHECK_OUT(r, 1, oi, V(1, 1, 3, 3));
    run_fini(&r);
    // pads [1, 1]: the edge windows average the 2 real positions
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, V(1, 3, 2, 5, 4), 1, 1, 5)),
            ATTRS(AINTS("kernel_shape", 3), AINTS("pads", 1, 1)), O(F, 1, 1, 5),
            V(2, 2, 10.0 / 3, 11.0 / 3, 4.5));
}

DL_TEST(pool_3d) {
    // x = 0..11 as [1, 1, 2, 2, 3], a 2x2x2 window at w = 0 and w = 1
    double x12[12];
    for (int i = 0; i < 12; i++) {
        x12[i] = i;
    }
    arg o = O(F, 1, 1, 1, 1, 2), oi = O(I64, 1, 1, 1, 1, 2);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x12, 1, 1, 2, 2, 3)),
                     ATTRS(AINTS("kernel_shape", 2, 2, 2)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(10, 11));
    CHECK_OUT(r, 1, oi, V(10, 11));
    run_fini(&r);
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, x12, 1, 1, 2, 2, 3)),
            ATTRS(AINTS("kernel_shape", 2, 2, 2)), O(F, 1, 1, 1, 1, 2), V(5, 6));
    // two channels (the second negated), strides, begin pads on two dims, ceil_mode on W
    // (ceil((4 + 1 - 2) / 2) + 1 = 3, the last window starts inside the input)
    double x48[48];
    for (int i = 0; i < 48; i++) {
        x48[i] = i < 24 ? i : -i;
    }
    arg o2 = O(F, 1, 2, 2, 2, 3), oi2 = O(I64, 1, 2, 2, 2, 3);
    const arg outs2[2] = {o2, oi2};
    r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x48, 1, 2, 2, 3, 4)),
                 ATTRS(AINTS("kernel_shape", 1, 2, 2), AINTS("strides", 1, 2, 2),
                       AINTS("pads", 0, 1, 1, 0, 0, 0), ai("ceil_mode", 1)),
                 outs2, 2, false);
    CHECK_OUT(r, 0, o2,
              V(0, 2, 3, 8, 10, 11, 12, 14, 15, 20, 22, 23, -24, -25, -27, -28, -29, -31, -36, -37,
                -39, -40, -41, -43));
    CHECK_OUT(r, 1, oi2,
              V(0, 2, 3, 8, 10, 11, 12, 14, 15, 20, 22, 23, 24, 25, 27, 28, 29, 31, 36, 37, 39, 40,
                41, 43));
    run_fini(&r);
}

DL_TEST(pool_storage_order_column_major) {
    // [2, 3] plane; maxima at (1, 1) and (1, 2): row major 4, 5; column major 1*2+1, 2*2+1
    arg o = O(F, 1, 1, 1, 2), oi = O(I64, 1, 1, 1, 2);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, V(1, 2, 3, 4, 5, 9), 1, 1, 2, 3)),
                     ATTRS(AINTS("kernel_shape", 2, 2), ai("storage_order", 1)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(5, 9));
    CHECK_OUT(r, 1, oi, V(3, 5));
    run_fini(&r);
}

DL_TEST(pool_ceil_mode_past_the_end_pad) {
    // 1-D, x = 1..6, kernel 3, stride 2, pads [1, 1], ceil_mode: ceil((6 + 2 - 3) / 2) + 1 = 4
    // windows start at -1, 1, 3, 5; the last one is {5, 6 (end pad), 7 (past the padded end)}
    const double *x6 = V(1, 2, 3, 4, 5, 6);
#define CEIL_ATTRS                                                                                 \
    AINTS("kernel_shape", 3), AINTS("strides", 2), AINTS("pads", 1, 1), ai("ceil_mode", 1)
    // count_include_pad = 1 counts the end pad but not the position past it: 6 / 2
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, x6, 1, 1, 6)),
            ATTRS(CEIL_ATTRS, ai("count_include_pad", 1)), O(F, 1, 1, 4), V(1, 3, 5, 3));
    // count_include_pad = 0 counts real positions only
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, x6, 1, 1, 6)), ATTRS(CEIL_ATTRS), O(F, 1, 1, 4),
            V(1.5, 3, 5, 6));
    arg o = O(F, 1, 1, 4), oi = O(I64, 1, 1, 4);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x6, 1, 1, 6)), ATTRS(CEIL_ATTRS), outs, 2, false);
#undef CEIL_ATTRS
    CHECK_OUT(r, 0, o, V(2, 4, 6, 6));
    CHECK_OUT(r, 1, oi, V(1, 3, 5, 5));
    run_fini(&r);
}

DL_TEST(pool_dilated_1d) {
    // kernel 3, dilation 2: windows {0, 2, 4}, {1, 3, 5}, {2, 4, 6}
    const double *x7 = V(1, 9, 2, 8, 3, 7, 4);
    arg o = O(F, 1, 1, 3), oi = O(I64, 1, 1, 3);
    const arg outs[2] = {o, oi};
    run r = run_op_x(DL_IR_OP_MAX_POOL, INS(A(F, x7, 1, 1, 7)),
                     ATTRS(AINTS("kernel_shape", 3), AINTS("dilations", 2)), outs, 2, false);
    CHECK_OUT(r, 0, o, V(3, 9, 4));
    CHECK_OUT(r, 1, oi, V(4, 1, 6));
    run_fini(&r);
    // kernel 2, dilation 3, stride 2, pads [1, 1], count_include_pad: {-1, 2}, {1, 4}, {3, 6}
    EXPECT1(DL_IR_OP_AVERAGE_POOL, INS(A(F, x7, 1, 1, 7)),
            ATTRS(AINTS("kernel_shape", 2), AINTS("dilations", 3), AINTS("strides", 2),
                  AINTS("pads", 1, 1), ai("count_include_pad", 1)),
            O(F, 1, 1, 3), V(1, 6, 6));
}

// The shape pass and the evaluator agree: the output shape comes from dl_pass_shape (not set by
// hand), including the ceil_mode rule that drops a last window starting in the end padding.
// x: [1, 1, 5, 4] = 0..19, kernel [3, 2], strides [2, 2], pads [1, 0, 0, 1] (H begins with 1,
// W ends with 1), ceil_mode. H: ceil((5 + 1 - 3) / 2) + 1 = 3, windows start at -1, 1, 3 (the
// last reaches row 5, past the input with no end pad). W: ceil((4 + 1 - 2) / 2) + 1 = 3, but the
// third window would start at 4, inside the end pad, so it is dropped: 2.
DL_TEST(pool_shape_pass_and_eval_agree) {
    for (int is_max = 0; is_max < 2; is_max++) {
        dl_ir_module *m = NULL;
        dl_diags *d = NULL;
        DL_CHECK(dl_ir_module_create("t", &m) == DL_OK);
        DL_CHECK(dl_diags_create(&d) == DL_OK);
        arg xa = A(F, NULL, 1, 1, 5, 4);
        dl_ir_type xt = to_type(&xa);
        dl_ir_value *xv = NULL;
        DL_CHECK(dl_ir_module_add_input(m, "x", &xt, DL_NO_LOC, &xv) == DL_OK);
        const dl_ir_attr at[5] = {AINTS("kernel_shape", 3, 2), AINTS("strides", 2, 2),
                                  AINTS("pads", 1, 0, 0, 1), ai("ceil_mode", 1),
                                  ai("count_include_pad", 1)};
        const char *names[1] = {"y"};
        dl_ir_node *nd = NULL;
        dl_ir_op op = is_max ? DL_IR_OP_MAX_POOL : DL_IR_OP_AVERAGE_POOL;
        DL_CHECK(dl_ir_module_add_node(m, op, &xv, 1, names, NULL, 1, at, is_max ? 4 : 5, DL_NO_LOC,
                                       &nd) == DL_OK);
        DL_CHECK(dl_ir_module_add_output(m, nd->outputs[0], DL_NO_LOC) == DL_OK);
        DL_CHECK(dl_pass_shape(m, d) == DL_OK);
        const dl_ir_type *yt = &nd->outputs[0]->type;
        DL_CHECK_EQ_I64(yt->rank, 4);
        DL_CHECK_EQ_I64(yt->dims[2].value, 3);
        DL_CHECK_EQ_I64(yt->dims[3].value, 2);
        dl_tensor x = {0}, y = {0};
        DL_CHECK(dl_tensor_alloc(&x, F, 4, xa.dims) == DL_OK);
        for (int64_t i = 0; i < 20; i++) {
            dl_tensor_set(&x, i, (double)i);
        }
        dl_ir_eval_opts opts = {NULL, 0, false};
        DL_CHECK(dl_ir_eval(m, &opts, &x, &y, d) == DL_OK);
        // count_include_pad: the first row of windows counts the begin pad row (divisor 6), the
        // last one stops at the input's end (divisor 4)
        const double *want =
            is_max ? V(5, 7, 13, 15, 17, 19) : V(10.0 / 6, 3, 8.5, 10.5, 14.5, 16.5);
        arg yo = O(F, 1, 1, 3, 2);
        run r = {.st = DL_OK, .out = {y}, .n_out = 1};
        DL_CHECK(check_out(&r, 0, &yo, want, 1e-6));
        dl_tensor_free(&x);
        dl_tensor_free(&y);
        dl_diags_destroy(d);
        dl_ir_module_destroy(m);
    }
}

// ---------------------------------------------------------------------------------------------
// Normalisation, softmax, dropout

DL_TEST(batch_norm_inference) {
    EXPECT1(DL_IR_OP_BATCH_NORMALIZATION,
            INS(A(F, V(1, 2, 3, 4), 1, 2, 1, 2), A(F, V(1, 2), 2), A(F, V(0, 1), 2),
                A(F, V(1, 3), 2), A(F, V(4, 1), 2)),
            ATTRS(af("epsilon", 0)), O(F, 1, 2, 1, 2), V(0, 0.5, 1, 3));
}

DL_TEST(batch_norm_training) {
    arg oy = O(F, 2, 1, 1, 2), om = O(F, 1), ov = O(F, 1);
    const arg outs[3] = {oy, om, ov};
    const arg ins[5] = {A(F, V(1, 2, 3, 4), 2, 1, 1, 2), A(F, V(1), 1), A(F, V(0), 1),
                        A(F, V(0), 1), A(F, V(1), 1)};
    double s = 1 / sqrt(1.25);
    for (int mode = 0; mode < 2; mode++) {
        // mode 0: training_mode attribute; mode 1: opts->training
        dl_ir_attr at[2] = {af("epsilon", 0), ai("training_mode", 1)};
        run r = run_op_x(DL_IR_OP_BATCH_NORMALIZATION, ins, 5, at, mode == 0 ? 2 : 1, outs, 3,
                         mode == 1);
        CHECK_OUT(r, 0, oy, V(-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s));
        CHECK_OUT(r, 1, om, V(0.25));
        CHECK_OUT(r, 2, ov, V(1.025)); // 1*0.9 + 1.25 (biased) * 0.1
        run_fini(&r);
    }
}

DL_TEST(layer_norm) {
    double a = sqrt(1.5), b = sqrt(3.0 / 8);
    arg oy = O(F, 2, 3), om = O(F, 2, 1), oi = O(F, 2, 1);
    const arg outs[3] = {oy, om, oi};
    run r = run_op_x(DL_IR_OP_LAYER_NORMALIZATION,
                     INS(A(F, V(1, 2, 3, 2, 4, 6), 2, 3), A(F, V(1, 1, 2), 3), A(F, V(0, 0, 1), 3)),
                     ATTRS(af("epsilon", 0)), outs, 3, false);
    CHECK_OUT(r, 0, oy, V(-a, 0, 2 * a + 1, -2 * b, 0, 4 * b + 1));
    CHECK_OUT(r, 1, om, V(2, 4));
    CHECK_OUT(r, 2, oi, V(a, b));
    run_fini(&r);
    // axis 0 normalises everything; no bias
    EXPECT1(DL_IR_OP_LAYER_NORMALIZATION, INS(A(F, V(1, 3, 1, 3), 2, 2), A(F, V(2), 1)),
            ATTRS(ai("axis", 0), af("epsilon", 0)), O(F, 2, 2), V(-2, 2, -2, 2));
}

DL_TEST(softmax_and_log_softmax) {
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), s = e1 + e2 + e3;
    EXPECT1(DL_IR_OP_SOFTMAX, INS(A(F, V(1, 2, 3, 0, 0, 0), 2, 3)), NOATTR, O(F, 2, 3),
            V(e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3));
    EXPECT1(DL_IR_OP_SOFTMAX, INS(A(F, V(1, 2, 3, 4), 2, 2)), ATTRS(ai("axis", 0)), O(F, 2, 2),
            V(1 / (1 + e2), 1 / (1 + e2), e2 / (1 + e2), e2 / (1 + e2)));
    EXPECT1(DL_IR_OP_LOG_SOFTMAX, INS(A(F, V(1, 2, 3, 1000, 1000, 1000), 2, 3)), NOATTR, O(F, 2, 3),
            V(1 - log(s), 2 - log(s), 3 - log(s), -log(3), -log(3), -log(3)));
}

DL_TEST(dropout) {
    double x[64], want[64], mask[64];
    for (int i = 0; i < 64; i++) {
        x[i] = i + 1;
        mask[i] = dl_rng_uniform(7, (uint64_t)i) >= 0.25;
        want[i] = mask[i] != 0.0 ? x[i] / 0.75 : 0;
    }
    arg oy = O(F, 64), om = O(B, 64);
    const arg outs[2] = {oy, om};
    double ones[64];
    for (int i = 0; i < 64; i++) {
        ones[i] = 1;
    }
    // not training: identity, mask all true
    run r = run_op_x(DL_IR_OP_DROPOUT, INS(A(F, x, 64)), ATTRS(af("ratio", 0.25), ai("seed", 7)),
                     outs, 2, false);
    CHECK_OUT(r, 0, oy, x);
    CHECK_OUT(r, 1, om, ones);
    run_fini(&r);
    // opts->training
    r = run_op_x(DL_IR_OP_DROPOUT, INS(A(F, x, 64)), ATTRS(af("ratio", 0.25), ai("seed", 7)), outs,
                 2, true);
    CHECK_OUT(r, 0, oy, want);
    CHECK_OUT(r, 1, om, mask);
    run_fini(&r);
    // ratio and training_mode as inputs
    r = run_op_x(DL_IR_OP_DROPOUT, INS(A(F, x, 64), S(F, 0.25), S(B, 1)), ATTRS(ai("seed", 7)),
                 outs, 2, false);
    CHECK_OUT(r, 0, oy, want);
    run_fini(&r);
    int kept = 0;
    for (int i = 0; i < 64; i++) {
        kept += mask[i] != 0;
    }
    DL_CHECK(kept > 32 && kept < 64); // about 48 of 64
}

// ---------------------------------------------------------------------------------------------
// Shape ops

DL_TEST(reshape_flatten_squeeze_unsqueeze) {
    const double x[] = {1, 2, 3, 4, 5, 6};
    EXPECT1(DL_IR_OP_RESHAPE, INS(A(F, x, 2, 3)), ATTRS(AINTS("shape", 3, -1)), O(F, 3, 2), x);
    EXPECT1(DL_IR_OP_FLATTEN, INS(A(F, x, 1, 2, 3)), NOATTR, O(F, 1, 6), x);
    EXPECT1(DL_IR_OP_SQUEEZE, INS(A(F, x, 1, 6, 1)), NOATTR, O(F, 6), x);
    EXPECT1(DL_IR_OP_UNSQUEEZE, INS(A(I64, x, 6)), ATTRS(AINTS("axes", 0)), O(I64, 1, 6), x);
    run r = run_op_x(DL_IR_OP_RESHAPE, INS(A(F, x, 2, 3)), ATTRS(AINTS("shape", 4, 2)),
                     OUTS(O(F, 4, 2)), false);
    DL_CHECK_EQ_I64(r.st, DL_ERR_INVALID_ARG);
    run_fini(&r);
}

DL_TEST(transpose) {
    EXPECT1(DL_IR_OP_TRANSPOSE, INS(A(F, V(1, 2, 3, 4, 5, 6), 2, 3)), NOATTR, O(F, 3, 2),
            V(1, 4, 2, 5, 3, 6));
    EXPECT1(
        DL_IR_OP_TRANSPOSE, INS(A(F, r234, 2, 3, 4)), ATTRS(AINTS("perm", 1, 0, 2)), O(F, 3, 2, 4),
        V(0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23));
}

DL_TEST(concat_split) {
    EXPECT1(DL_IR_OP_CONCAT, INS(A(F, V(1, 2), 2, 1), A(F, V(3, 4, 5, 6), 2, 2)),
            ATTRS(ai("axis", -1)), O(F, 2, 3), V(1, 3, 4, 2, 5, 6));
    EXPECT1(DL_IR_OP_CONCAT, INS(A(F, V(1, 2), 1, 2), A(F, V(3, 4, 5, 6), 2, 2)),
            ATTRS(ai("axis", 0)), O(F, 3, 2), V(1, 2, 3, 4, 5, 6));
    arg o1 = O(F, 2, 1), o2 = O(F, 2, 3);
    const arg outs[2] = {o1, o2};
    run r = run_op_x(DL_IR_OP_SPLIT, INS(A(F, V(1, 2, 3, 4, 5, 6, 7, 8), 2, 4)),
                     ATTRS(ai("axis", 1), AINTS("split", 1, 3)), outs, 2, false);
    CHECK_OUT(r, 0, o1, V(1, 5));
    CHECK_OUT(r, 1, o2, V(2, 3, 4, 6, 7, 8));
    run_fini(&r);
}

DL_TEST(slice) {
    const double x[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    EXPECT1(DL_IR_OP_SLICE, INS(A(F, x, 10)),
            ATTRS(AINTS("starts", 1), AINTS("ends", 8), AINTS("steps", 3)), O(F, 3), V(1, 4, 7));
    EXPECT1(DL_IR_OP_SLICE, INS(A(F, x, 10)),
            ATTRS(AINTS("starts", -1), AINTS("ends", -100), AINTS("steps", -2)), O(F, 5),
            V(9, 7, 5, 3, 1));
    EXPECT1(DL_IR_OP_SLICE, INS(A(F, x, 2, 5)),
            ATTRS(AINTS("starts", 1), AINTS("ends", 1000), AINTS("axes", -1)), O(F, 2, 4),
            V(1, 2, 3, 4, 6, 7, 8, 9));
    EXPECT1(DL_IR_OP_SLICE, INS(A(F, x, 2, 5)),
            ATTRS(AINTS("starts", 1, 0), AINTS("ends", 2, 2), AINTS("axes", 0, 1)), O(F, 1, 2),
            V(5, 6));
}

DL_TEST(gather) {
    EXPECT1(DL_IR_OP_GATHER, INS(A(F, V(1, 2, 3, 4, 5, 6), 3, 2), A(I64, V(2, -3), 2)), NOATTR,
            O(F, 2, 2), V(5, 6, 1, 2));
    EXPECT1(DL_IR_OP_GATHER, INS(A(F, V(1, 2, 3, 4, 5, 6), 2, 3), A(I32, V(0, 2, 1, 1), 2, 2)),
            ATTRS(ai("axis", 1)), O(F, 2, 2, 2), V(1, 3, 2, 2, 4, 6, 5, 5));
    EXPECT1(DL_IR_OP_GATHER, INS(A(F, V(1, 2, 3), 3), S(I64, 1)), NOATTR, SO(F), V(2));
    run r = run_op_x(DL_IR_OP_GATHER, INS(A(F, V(1, 2, 3), 3), A(I64, V(3), 1)), NOATTR,
                     OUTS(O(F, 1)), false);
    DL_CHECK_EQ_I64(r.st, DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(r.msg, "Gather 'y0': index 3 is out of range for axis 0 of size 3");
    run_fini(&r);
}

DL_TEST(expand) {
    EXPECT1(DL_IR_OP_EXPAND, INS(A(F, V(1, 2, 3), 3, 1)), ATTRS(AINTS("shape", 2, 1, 2)),
            O(F, 2, 3, 2), V(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3));
}

DL_TEST(pad_modes) {
    const double x[] = {1, 2, 3};
    EXPECT1(DL_IR_OP_PAD, INS(A(F, V(1, 2, 3, 4, 5, 6), 2, 3)),
            ATTRS(AINTS("pads", 0, 1, 0, 1), af("value", 9)), O(F, 2, 5),
            V(9, 1, 2, 3, 9, 9, 4, 5, 6, 9));
    EXPECT1(DL_IR_OP_PAD, INS(A(F, x, 3)), ATTRS(AINTS("pads", 2, 2), as("mode", "reflect")),
            O(F, 7), V(3, 2, 1, 2, 3, 2, 1));
    EXPECT1(DL_IR_OP_PAD, INS(A(F, x, 3)), ATTRS(AINTS("pads", 2, 2), as("mode", "edge")), O(F, 7),
            V(1, 1, 1, 2, 3, 3, 3));
    EXPECT1(DL_IR_OP_PAD, INS(A(F, x, 3)), ATTRS(AINTS("pads", 2, 2), as("mode", "wrap")), O(F, 7),
            V(2, 3, 1, 2, 3, 1, 2));
    EXPECT1(DL_IR_OP_PAD, INS(A(F, x, 3)), ATTRS(AINTS("pads", -1, 1)), O(F, 3), V(2, 3, 0));
    EXPECT1(DL_IR_OP_PAD, INS(A(F, x, 3), S(F, -1)), ATTRS(AINTS("pads", 1, 0)), O(F, 4),
            V(-1, 1, 2, 3));
}

// ---------------------------------------------------------------------------------------------
// Losses

static const double l0 = 0.40760596444438013, l1 = 1.0986122886681098; // see sce test

DL_TEST(softmax_cross_entropy) {
    const arg sc = A(F, V(1, 2, 3, 1, 1, 1), 2, 3), lab = A(I64, V(2, 0), 2);
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab), NOATTR, SO(F), V((l0 + l1) / 2));
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab), ATTRS(as("reduction", "sum")), SO(F),
            V(l0 + l1));
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab), ATTRS(as("reduction", "none")),
            O(F, 2), V(l0, l1));
    // ignore_index present: the label-0 row is dropped from sum and count
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab), ATTRS(ai("ignore_index", 0)), SO(F),
            V(l0));
    // weights: mean divides by the sum of the targets' weights
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab, A(F, V(1, 2, 3), 3)), NOATTR, SO(F),
            V((3 * l0 + l1) / 4));
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, A(I64, V(2, 5), 2), A(F, V(1, 2, 3), 3)),
            ATTRS(ai("ignore_index", 5)), SO(F), V(l0));
    // log_prob output
    arg ol = SO(F), olp = O(F, 2, 3);
    const arg outs[2] = {ol, olp};
    run r = run_op_x(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, lab), NOATTR, outs, 2, false);
    CHECK_OUT(r, 1, olp,
              V(-2.40760596444438, -1.4076059644443801, -0.40760596444438013, -l1, -l1, -l1));
    run_fini(&r);
    // extra dims: scores [1, 3, 2] (class axis 1), labels [1, 2]
    EXPECT1(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS,
            INS(A(F, V(1, 1, 2, 1, 3, 1), 1, 3, 2), A(I64, V(2, 1), 1, 2)),
            ATTRS(as("reduction", "none")), O(F, 1, 2), V(l0, l1));
    // a label out of range is a data error
    r = run_op_x(DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, INS(sc, A(I64, V(3, 0), 2)), NOATTR,
                 OUTS(SO(F)), false);
    DL_CHECK_EQ_I64(r.st, DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(r.msg, "label 3 is out of range") != NULL);
    run_fini(&r);
}

DL_TEST(nll_loss) {
    const arg x = A(F, V(-1, -2, -3, -4, -5, -6), 2, 3);
    EXPECT1(DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS, INS(x, A(I64, V(1, 2), 2)), NOATTR, SO(F), V(4));
    // label 0 counts when ignore_index is absent (its default 0 is not applied)
    EXPECT1(DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS, INS(x, A(I64, V(0, 2), 2)), NOATTR, SO(F),
            V(3.5));
    EXPECT1(DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS,
            INS(x, A(I64, V(0, 2), 2), A(F, V(2, 1, 0.5), 3)), ATTRS(as("reduction", "none")),
            O(F, 2), V(2, 3));
    EXPECT1(DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS,
            INS(x, A(I64, V(0, 2), 2), A(F, V(2, 1, 0.5), 3)), NOATTR, SO(F), V(5.0 / 2.5));
    EXPECT1(DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS, INS(x, A(I64, V(0, 2), 2)),
            ATTRS(ai("ignore_index", 2), as("reduction", "sum")), SO(F), V(1));
}

DL_TEST(mean_squared_error) {
    const arg a = A(F, V(1, 2, 3, 4), 2, 2), b = A(F, V(1, 0, 0, 4), 2, 2);
    EXPECT1(DL_IR_OP_MEAN_SQUARED_ERROR, INS(a, b), NOATTR, SO(F), V(13.0 / 4));
    EXPECT1(DL_IR_OP_MEAN_SQUARED_ERROR, INS(a, b), ATTRS(as("reduction", "sum")), SO(F), V(13));
    EXPECT1(DL_IR_OP_MEAN_SQUARED_ERROR, INS(a, b), ATTRS(as("reduction", "none")), O(F, 2, 2),
            V(0, 4, 9, 0));
}

// ---------------------------------------------------------------------------------------------
// Initialisers

static dl_ir_value *add_param(dl_ir_module *m, const char *name, arg shape, dl_ir_init_kind k,
                              double a, double b, int64_t seed) {
    dl_ir_init *in = dl_ir_module_new_init(m, k);
    in->a = a;
    in->b = b;
    if (seed >= 0) {
        in->seed = (uint64_t)seed;
        in->has_seed = true;
    }
    dl_ir_type t = to_type(&shape);
    dl_ir_value *v = NULL;
    if (dl_ir_module_add_param(m, name, &t, in, DL_NO_LOC, &v) != DL_OK) {
        return NULL;
    }
    return v;
}

static bool same_tensor(const dl_tensor *x, const dl_tensor *y) {
    return x->dtype == y->dtype && dl_tensor_nbytes(x) == dl_tensor_nbytes(y) &&
           memcmp(x->data, y->data, dl_tensor_nbytes(x)) == 0;
}

DL_TEST(init_simple_kinds) {
    dl_ir_module *m;
    dl_diags *d;
    DL_CHECK_OK(dl_ir_module_create("t", &m));
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_value *z = add_param(m, "z", O(F, 2, 2), DL_IR_INIT_ZEROS, 0, 0, -1);
    dl_ir_value *o = add_param(m, "o", O(I64, 3), DL_IR_INIT_ONES, 0, 0, -1);
    dl_ir_value *c = add_param(m, "c", O(DL_DT_FLOAT16, 2), DL_IR_INIT_CONSTANT, 0.1, 0, -1);
    dl_ir_value *u = add_param(m, "u", O(F, 8), DL_IR_INIT_UNIFORM, -2, 3, 5);
    dl_ir_value *nm = add_param(m, "n", O(F, 8), DL_IR_INIT_NORMAL, 1, 0.5, 5);
    dl_tensor t;
    DL_CHECK_OK(dl_ir_param_materialize(m, z, &t, d));
    DL_CHECK(dl_tensor_get(&t, 3) == 0);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_ir_param_materialize(m, o, &t, d));
    DL_CHECK(t.dtype == I64 && dl_tensor_get(&t, 2) == 1);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_ir_param_materialize(m, c, &t, d));
    DL_CHECK(dl_tensor_get(&t, 1) == (double)dl_f16_to_f32(dl_f32_to_f16(0.1f)));
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_ir_param_materialize(m, u, &t, d));
    for (int64_t i = 0; i < 8; i++) {
        DL_CHECK_NEAR(dl_tensor_get(&t, i), -2 + 5 * dl_rng_uniform(5, (uint64_t)i), 1e-6, 1e-6);
    }
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_ir_param_materialize(m, nm, &t, d));
    for (int64_t i = 0; i < 8; i++) {
        DL_CHECK_NEAR(dl_tensor_get(&t, i), 1 + 0.5 * dl_rng_normal(5, (uint64_t)i), 1e-6, 1e-6);
    }
    dl_tensor_free(&t);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(init_seeds_deterministic) {
    dl_ir_module *m;
    dl_diags *d;
    DL_CHECK_OK(dl_ir_module_create("t", &m));
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_value *a = add_param(m, "a", O(F, 16, 8), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, 1);
    dl_ir_value *b = add_param(m, "b", O(F, 16, 8), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, 1);
    dl_ir_value *c = add_param(m, "c", O(F, 16, 8), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, 2);
    dl_ir_value *n1 = add_param(m, "n1", O(F, 16, 8), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, -1);
    dl_ir_value *n2 = add_param(m, "n2", O(F, 16, 8), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, -1);
    dl_tensor ta, tb, tc, t1, t1b, t2;
    DL_CHECK_OK(dl_ir_param_materialize(m, a, &ta, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, b, &tb, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, c, &tc, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, n1, &t1, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, n1, &t1b, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, n2, &t2, d));
    bool ab = same_tensor(&ta, &tb), ac = same_tensor(&ta, &tc);
    bool n11 = same_tensor(&t1, &t1b), n12 = same_tensor(&t1, &t2);
    double l = sqrt(6.0 / (16 + 8)), mx = 0;
    for (int64_t i = 0; i < 128; i++) {
        mx = fmax(mx, fabs(dl_tensor_get(&ta, i)));
    }
    dl_tensor *all[] = {&ta, &tb, &tc, &t1, &t1b, &t2};
    for (size_t i = 0; i < DL_ARRAY_LEN(all); i++) {
        dl_tensor_free(all[i]);
    }
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
    DL_CHECK(ab);   // same seed, same values
    DL_CHECK(!ac);  // different seeds differ
    DL_CHECK(n11);  // name-derived seed is stable
    DL_CHECK(!n12); // and differs between names
    DL_CHECK(mx <= l && mx > 0.8 * l);
}

DL_TEST(init_he_normal_and_conv_fans) {
    dl_ir_module *m;
    dl_diags *d;
    DL_CHECK_OK(dl_ir_module_create("t", &m));
    DL_CHECK_OK(dl_diags_create(&d));
    // conv kernel [64, 8, 3, 3]: fan_in = 8*9 = 72
    dl_ir_value *k = add_param(m, "k", O(F, 64, 8, 3, 3), DL_IR_INIT_HE_NORMAL, 0, 0, 3);
    dl_ir_value *w = add_param(m, "w", O(F, 256, 128), DL_IR_INIT_HE_NORMAL, 0, 0, 4);
    dl_ir_value *g = add_param(m, "g", O(F, 64, 8, 3, 3), DL_IR_INIT_GLOROT_UNIFORM, 0, 0, 3);
    dl_tensor tk, tw, tg;
    DL_CHECK_OK(dl_ir_param_materialize(m, k, &tk, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, w, &tw, d));
    DL_CHECK_OK(dl_ir_param_materialize(m, g, &tg, d));
    double sk = 0, sk2 = 0, sw = 0, sw2 = 0, gmax = 0;
    int64_t nk = dl_tensor_numel(&tk), nw = dl_tensor_numel(&tw);
    for (int64_t i = 0; i < nk; i++) {
        double v = dl_tensor_get(&tk, i);
        sk += v;
        sk2 += v * v;
        gmax = fmax(gmax, fabs(dl_tensor_get(&tg, i)));
    }
    for (int64_t i = 0; i < nw; i++) {
        double v = dl_tensor_get(&tw, i);
        sw += v;
        sw2 += v * v;
    }
    dl_tensor_free(&tk);
    dl_tensor_free(&tw);
    dl_tensor_free(&tg);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
    double stdk = sqrt(sk2 / (double)nk), stdw = sqrt(sw2 / (double)nw);
    DL_CHECK_NEAR(sk / (double)nk, 0, 0.01, 0);
    DL_CHECK_NEAR(stdk, sqrt(2.0 / 72), 0, 0.03);
    DL_CHECK_NEAR(sw / (double)nw, 0, 0.002, 0);
    DL_CHECK_NEAR(stdw, sqrt(2.0 / 256), 0, 0.01);
    double lg = sqrt(6.0 / (72 + 64 * 9));
    DL_CHECK(gmax <= lg && gmax > 0.9 * lg);
}

DL_TEST(init_literal) {
    dl_ir_module *m;
    dl_diags *d;
    DL_CHECK_OK(dl_ir_module_create("t", &m));
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_value *s = add_param(m, "s", O(F, 3), DL_IR_INIT_LITERAL, 0, 0, -1);
    s->init->lit = dl_ir_module_new_literal(m, F, 1);
    s->init->lit->is_splat = true;
    s->init->lit->f[0] = 2.5;
    dl_ir_value *f = add_param(m, "f", O(I32, 3), DL_IR_INIT_LITERAL, 0, 0, -1);
    f->init->lit = dl_ir_module_new_literal(m, I32, 3);
    f->init->lit->i[0] = 4;
    f->init->lit->i[1] = -5;
    f->init->lit->i[2] = 6;
    dl_ir_value *bad = add_param(m, "bad", O(F, 4), DL_IR_INIT_LITERAL, 0, 0, -1);
    bad->init->lit = dl_ir_module_new_literal(m, F, 2);
    dl_tensor t;
    DL_CHECK_OK(dl_ir_param_materialize(m, s, &t, d));
    DL_CHECK(dl_tensor_get(&t, 2) == 2.5);
    dl_tensor_free(&t);
    DL_CHECK_OK(dl_ir_param_materialize(m, f, &t, d));
    DL_CHECK(dl_tensor_get(&t, 1) == -5 && dl_tensor_get(&t, 2) == 6);
    dl_tensor_free(&t);
    DL_CHECK_EQ_I64(dl_ir_param_materialize(m, bad, &t, d), DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(dl_diags_get(d, 0)->msg, "param 'bad': literal has 2 values, the type needs 4");
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

// Writes a safetensors file holding F32 tensor "w" of shape [2, 2] = {1, 2, 3, 4}.
static bool write_safetensors(const char *path) {
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    uint64_t n = strlen(hdr);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) {
        len[i] = (unsigned char)(n >> (8 * i));
    }
    float v[4] = {1, 2, 3, 4};
    FILE *f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    bool ok = fwrite(len, 1, 8, f) == 8 && fwrite(hdr, 1, n, f) == n &&
              fwrite(v, sizeof(float), 4, f) == 4; // little-endian host assumed (x86/arm64)
    return fclose(f) == 0 && ok;
}

DL_TEST(init_file) {
    char dir[] = "/tmp/dl_eval_XXXXXX";
    DL_CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    DL_CHECK(write_safetensors(path));
    dl_ir_module *m;
    dl_diags *d;
    DL_CHECK_OK(dl_ir_module_create("t", &m));
    DL_CHECK_OK(dl_diags_create(&d));
    m->source_dir = dir;
    dl_ir_value *rel = add_param(m, "rel", O(F, 2, 2), DL_IR_INIT_FILE, 0, 0, -1);
    rel->init->path = "w.safetensors";
    rel->init->tensor = "w";
    dl_ir_value *absp = add_param(m, "abs", O(F, 2, 2), DL_IR_INIT_FILE, 0, 0, -1);
    absp->init->path = path;
    absp->init->tensor = "w";
    dl_ir_value *wrong = add_param(m, "wrong", O(F, 4), DL_IR_INIT_FILE, 0, 0, -1);
    wrong->init->path = "w.safetensors";
    wrong->init->tensor = "w";
    dl_ir_value *missing = add_param(m, "missing", O(F, 2, 2), DL_IR_INIT_FILE, 0, 0, -1);
    missing->init->path = "w.safetensors";
    missing->init->tensor = "nope";
    dl_tensor t;
    dl_status s1 = dl_ir_param_materialize(m, rel, &t, d);
    bool v1 = s1 == DL_OK && dl_tensor_get(&t, 3) == 4;
    if (s1 == DL_OK) {
        dl_tensor_free(&t);
    }
    dl_status s2 = dl_ir_param_materialize(m, absp, &t, d);
    if (s2 == DL_OK) {
        dl_tensor_free(&t);
    }
    dl_status s3 = dl_ir_param_materialize(m, wrong, &t, d);
    char msg3[512] = "";
    if (dl_diags_count(d)) {
        snprintf(msg3, sizeof msg3, "%s", dl_diags_get(d, dl_diags_count(d) - 1)->msg);
    }
    dl_status s4 = dl_ir_param_materialize(m, missing, &t, d);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
    remove(path);
    rmdir(dir);
    DL_CHECK_OK(s1);
    DL_CHECK(v1);
    DL_CHECK_OK(s2);
    DL_CHECK_EQ_I64(s3, DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(msg3, "is float[2, 2] but the param is declared float[4]") != NULL);
    DL_CHECK(s4 != DL_OK);
}

// ---------------------------------------------------------------------------------------------
// Whole-module behaviour: input checks, params, eval_all

// x: float[2, 3]; w: param float[3, 2] = ones; y = MatMul(x, w)
static dl_ir_module *mlp(dl_ir_value **out_y) {
    dl_ir_module *m;
    if (dl_ir_module_create("mlp", &m) != DL_OK) {
        return NULL;
    }
    arg ax = O(F, 2, 3);
    dl_ir_type tx = to_type(&ax);
    dl_ir_value *x, *w;
    dl_ir_node *n;
    const char *yn = "y";
    if (dl_ir_module_add_input(m, "x", &tx, DL_NO_LOC, &x) != DL_OK) {
        return NULL;
    }
    w = add_param(m, "w", O(F, 3, 2), DL_IR_INIT_ONES, 0, 0, -1);
    dl_ir_value *ins[2] = {x, w};
    if (!w ||
        dl_ir_module_add_node(m, DL_IR_OP_MATMUL, ins, 2, &yn, NULL, 1, NULL, 0, DL_NO_LOC, &n) !=
            DL_OK ||
        dl_ir_module_add_output(m, n->outputs[0], DL_NO_LOC) != DL_OK) {
        return NULL;
    }
    *out_y = n->outputs[0];
    return m;
}

DL_TEST(input_mismatch_message) {
    dl_ir_value *y;
    dl_ir_module *m = mlp(&y);
    DL_CHECK(m != NULL);
    arg ay = O(F, 2, 2);
    y->type = to_type(&ay);
    dl_diags *d;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_tensor x, out;
    int64_t dims[2] = {3, 3};
    DL_CHECK_OK(dl_tensor_alloc(&x, F, 2, dims));
    dl_status st = dl_ir_eval(m, NULL, &x, &out, d);
    dl_tensor_free(&x);
    DL_CHECK_EQ_I64(st, DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(dl_diags_get(d, 0)->msg, "input 'x': expected float[2, 3], got float[3, 3]");
    dl_diags_clear(d);
    int64_t dims2[2] = {2, 3};
    DL_CHECK_OK(dl_tensor_alloc(&x, I64, 2, dims2));
    st = dl_ir_eval(m, NULL, &x, &out, d);
    dl_tensor_free(&x);
    DL_CHECK_EQ_I64(st, DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(dl_diags_get(d, 0)->msg, "input 'x': expected float[2, 3], got int64[2, 3]");
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(unknown_output_type_is_an_error) {
    dl_ir_value *y;
    dl_ir_module *m = mlp(&y);
    DL_CHECK(m != NULL);
    dl_diags *d;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_tensor x, out;
    int64_t dims[2] = {2, 3};
    DL_CHECK_OK(dl_tensor_alloc(&x, F, 2, dims));
    dl_status st = dl_ir_eval(m, NULL, &x, &out, d);
    dl_tensor_free(&x);
    DL_CHECK_EQ_I64(st, DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(dl_diags_get(d, 0)->msg, "type of output 'y' is unknown") != NULL);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(params_override_and_eval_all) {
    dl_ir_value *y;
    dl_ir_module *m = mlp(&y);
    DL_CHECK(m != NULL);
    arg ay = O(F, 2, 2);
    y->type = to_type(&ay);
    dl_diags *d;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_tensor x, w, out;
    int64_t dx[2] = {2, 3}, dw[2] = {3, 2};
    DL_CHECK_OK(dl_tensor_alloc(&x, F, 2, dx));
    DL_CHECK_OK(dl_tensor_alloc(&w, F, 2, dw));
    for (int64_t i = 0; i < 6; i++) {
        dl_tensor_set(&x, i, (double)(i + 1));
        dl_tensor_set(&w, i, i % 2 ? 0 : 1); // w = [[1, 0], [1, 0], [1, 0]]
    }
    // materialised ones: row sums
    DL_CHECK_OK(dl_ir_eval(m, NULL, &x, &out, d));
    double o0 = dl_tensor_get(&out, 0), o3 = dl_tensor_get(&out, 3);
    dl_tensor_free(&out);
    dl_ir_eval_opts opts = {&w, 1, false};
    DL_CHECK_OK(dl_ir_eval(m, &opts, &x, &out, d));
    double p0 = dl_tensor_get(&out, 0), p1 = dl_tensor_get(&out, 1);
    dl_tensor_free(&out);
    dl_tensor *all = NULL;
    DL_CHECK_OK(dl_ir_eval_all(m, &opts, &x, &all, d));
    double a_w = dl_tensor_get(&all[1], 2), a_y = dl_tensor_get(&all[2], 2);
    for (size_t i = 0; i < m->values.len; i++) {
        dl_tensor_free(&all[i]);
    }
    free(all);
    dl_tensor_free(&x);
    dl_tensor_free(&w);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
    DL_CHECK(o0 == 6 && o3 == 15);
    DL_CHECK(p0 == 6 && p1 == 0);
    DL_CHECK(a_w == 1 && a_y == 15);
}

DL_TEST_MAIN()
