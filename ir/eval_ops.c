// ir/eval_ops.c — reference kernels for elementwise ops, reductions and shape ops, plus the
// dispatch over every op (dl_ir__eval_node). Written for obviousness: every kernel walks the
// output element by element and computes the input coordinates it reads (numpy broadcasting,
// ONNX opset 17 semantics). Kernels compute in double; the driver rounds to the output dtype.
#include "eval_internal.h"

#include <math.h>
#include <string.h>

#define ERR(...) dl_ir__node_err(cx, __VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// Elementwise

// IEEE 754-2019 maximum / minimum (llvm.maximum / llvm.minimum, what compiled code uses): a NaN
// operand gives NaN, and -0 < +0.
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

// int64 results live in double; the one integer overflow that the ops below can produce with
// exact operands is 2^63 (-INT64_MIN, |INT64_MIN|, INT64_MIN / -1), which wraps to INT64_MIN as
// in two's complement (what compiled code computes). The driver saturates anything else out of
// range; int32 results wrap in the driver.
static double wrap_i64(double r) {
    return r == 9223372036854775808.0 ? -r : r;
}

// A real result converted to an integer type saturates at the type's range (compiled code's
// llvm.fptosi.sat; the driver's rounding would wrap an int32 instead). Other types pass.
static double saturate_int(dl_dtype dt, double v) {
    if (dt == DL_DT_INT32 && !isnan(v)) {
        return v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0 : v;
    }
    return v; // int64 saturates in the driver; NaN becomes 0 there
}

// Integer division as compiled code does it, defined for every operand pair (no trap, no data
// error): truncation toward zero, x / 0 = 0, and INT_MIN / -1 wraps to INT_MIN (int32 wraps in
// the driver's rounding; int64's 2^63 is wrapped here). docs/graph-format.md, "Integer
// arithmetic".
static double int_div(double a, double b) {
    if (b == 0) {
        return 0;
    }
    return wrap_i64(trunc(a / b));
}

// Scalar functions: the `scalar` column of ir_ops.def. fn(p, v, n) is the output element for
// operand elements v[0..n) (n = the node's inputs; only Max / Min take more than their arity);
// deriv(p, x), where present, is f'(x) for UnaryGrad (dx = dy * f'(x)), with PyTorch's
// conventions at the kinks (Relu'(0) = 0, LeakyRelu'(0) = alpha, Abs'(0) = 0) and at NaN: Relu
// passes dy (torch masks where relu(x) <= 0, which a NaN is not), LeakyRelu scales it by alpha
// (x > 0 is false), Abs gives 0 (sgn(NaN) = 0); the smooth functions give NaN.
typedef double (*scalar_fn)(dl_ir__sp *p, const double *v, size_t n);
typedef double (*deriv_fn)(const dl_ir__sp *p, double x);
typedef struct ev_scalar {
    scalar_fn fn;
    deriv_fn deriv;
} ev_scalar;
#define SCALAR(name, fn, deriv) static const ev_scalar sc_##name = {fn, deriv};

#define PI 3.14159265358979323846

static double add(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] + v[1];
}
SCALAR(add, add, NULL)

static double sub(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] - v[1];
}
SCALAR(sub, sub, NULL)

static double mul(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] * v[1];
}
SCALAR(mul, mul, NULL)

static double div_(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return p->is_int ? int_div(v[0], v[1]) : v[0] / v[1];
}
SCALAR(div, div_, NULL)

// ONNX integer Pow: computed as the real power then truncated to the base's type, saturating.
static double pow_(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return saturate_int(p->out_dt, pow(v[0], v[1]));
}
SCALAR(pow, pow_, NULL)

// Variadic Max / Min, folded left to right.
static double max_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p;
    double acc = v[0];
    for (size_t k = 1; k < n; k++) {
        acc = fmax_nan(acc, v[k]);
    }
    return acc;
}
SCALAR(max, max_, NULL)

static double min_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p;
    double acc = v[0];
    for (size_t k = 1; k < n; k++) {
        acc = fmin_nan(acc, v[k]);
    }
    return acc;
}
SCALAR(min, min_, NULL)

static double equal(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] == v[1];
}
SCALAR(equal, equal, NULL)

static double less(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] < v[1];
}
SCALAR(less, less, NULL)

static double greater(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] > v[1];
}
SCALAR(greater, greater, NULL)

static double and_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return (v[0] != 0) && (v[1] != 0);
}
SCALAR(and, and_, NULL)

static double or_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return (v[0] != 0) || (v[1] != 0);
}
SCALAR(or, or_, NULL)

static double not_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] != 0 ? 0 : 1;
}
SCALAR(not, not_, NULL)

static double where_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0] != 0 ? v[1] : v[2];
}
SCALAR(where, where_, NULL)

static double neg(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return p->is_int ? wrap_i64(-v[0]) : -v[0];
}
SCALAR(neg, neg, NULL)

static double abs_(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return p->is_int ? wrap_i64(fabs(v[0])) : fabs(v[0]);
}
static double d_abs(const dl_ir__sp *p, double x) {
    (void)p;
    return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
}
SCALAR(abs, abs_, d_abs)

static double exp_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return exp(v[0]);
}
static double d_exp(const dl_ir__sp *p, double x) {
    (void)p;
    return exp(x);
}
SCALAR(exp, exp_, d_exp)

static double log_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return log(v[0]);
}
static double d_log(const dl_ir__sp *p, double x) {
    (void)p;
    return 1.0 / x;
}
SCALAR(log, log_, d_log)

static double sqrt_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return sqrt(v[0]);
}
static double d_sqrt(const dl_ir__sp *p, double x) {
    (void)p;
    return 0.5 / sqrt(x);
}
SCALAR(sqrt, sqrt_, d_sqrt)

static double reciprocal(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    if (p->is_int && v[0] == 0) {
        p->div0 = true;
        return 0;
    }
    return 1.0 / v[0];
}
static double d_reciprocal(const dl_ir__sp *p, double x) {
    (void)p;
    return -1.0 / (x * x);
}
SCALAR(reciprocal, reciprocal, d_reciprocal)

static double relu(dl_ir__sp *p, const double *v, size_t n) { // PyTorch's: NaN stays, -0 stays
    (void)p, (void)n;
    return v[0] < 0 ? 0 : v[0];
}
static double d_relu(const dl_ir__sp *p, double x) {
    (void)p;
    return x <= 0 ? 0.0 : 1.0;
}
SCALAR(relu, relu, d_relu)

static double leaky_relu(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return v[0] >= 0 ? v[0] : p->alpha * v[0];
}
static double d_leaky_relu(const dl_ir__sp *p, double x) {
    return x > 0 ? 1.0 : p->alpha;
}
SCALAR(leaky_relu, leaky_relu, d_leaky_relu)

static double sigmoid1(double x) {
    if (x >= 0) {
        return 1.0 / (1.0 + exp(-x));
    }
    double e = exp(x);
    return e / (1.0 + e);
}
static double sigmoid(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return sigmoid1(v[0]);
}
static double d_sigmoid(const dl_ir__sp *p, double x) {
    (void)p;
    double s = sigmoid1(x);
    return s * (1.0 - s);
}
SCALAR(sigmoid, sigmoid, d_sigmoid)

static double tanh_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return tanh(v[0]);
}
static double d_tanh(const dl_ir__sp *p, double x) {
    (void)p;
    double t = tanh(x);
    return 1.0 - t * t;
}
SCALAR(tanh, tanh_, d_tanh)

static double erf_(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return erf(v[0]);
}
static double d_erf(const dl_ir__sp *p, double x) {
    (void)p;
    return 2.0 / sqrt(PI) * exp(-x * x);
}
SCALAR(erf, erf_, d_erf)

static double gelu(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    double x = v[0];
    if (p->tanh_approx) {
        double c = sqrt(2.0 / PI);
        return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double d_gelu(const dl_ir__sp *p, double x) {
    if (p->tanh_approx) {
        double k = sqrt(2.0 / PI), x2 = x * x;
        double t = tanh(k * (x + 0.044715 * x2 * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x2);
    }
    double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
    double pdf = exp(-0.5 * x * x) / sqrt(2.0 * PI);
    return cdf + x * pdf;
}
SCALAR(gelu, gelu, d_gelu)

static double softplus(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    double x = v[0];
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static double d_softplus(const dl_ir__sp *p, double x) {
    (void)p;
    return sigmoid1(x);
}
SCALAR(softplus, softplus, d_softplus)

// HardSwish (ONNX opset 14; torch.nn.Hardswish's formula): x * min(max(x + 3, 0), 6) / 6, a NaN x
// staying NaN. Derivative (torch's hardswish_backward): 0 below -3, x / 3 + 1/2 up to 3, then 1;
// a NaN x passes dy (both tests are false).
static double hard_swish(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    double x = v[0], r = x + 3;
    r = r < 0 ? 0 : r;
    r = r > 6 ? 6 : r;
    return x * r / 6;
}
static double d_hard_swish(const dl_ir__sp *p, double x) {
    (void)p;
    return x < -3 ? 0.0 : (x <= 3 ? x / 3 + 0.5 : 1.0);
}
SCALAR(hard_swish, hard_swish, d_hard_swish)

// Cast: the driver's rounding to the output dtype is the conversion (float -> int truncates
// toward zero, saturating, NaN -> 0; -> bool is != 0; -> float16/bfloat16 rounds to nearest
// even).
static double cast(dl_ir__sp *p, const double *v, size_t n) {
    (void)n;
    return p->is_int ? v[0] : saturate_int(p->out_dt, v[0]);
}
SCALAR(cast, cast, NULL)

static double copy(dl_ir__sp *p, const double *v, size_t n) {
    (void)p, (void)n;
    return v[0];
}
SCALAR(copy, copy, NULL)

static const ev_scalar sc_none = {NULL, NULL};

static const ev_scalar *const scalars[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, gr, lo, sc)                                                                      \
    [DL_IR_OP_##e] = &sc_##sc,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(scalars) == DL_IR_OP_COUNT, "one scalar entry per op");

void dl_ir__scalar_params(const dl_ir_node *n, dl_dtype in_dt, dl_dtype out_dt, dl_ir__sp *out) {
    *out = (dl_ir__sp){.is_int = !dl_dtype_is_float(in_dt), .out_dt = out_dt};
    if (dl_ir_op_find_attr_spec(n->op, "alpha")) {
        out->alpha = dl_ir_node_attr_float(n, "alpha");
    }
    if (dl_ir_op_find_attr_spec(n->op, "approximate")) {
        out->tanh_approx = strcmp(dl_ir_node_attr_string(n, "approximate"), "tanh") == 0;
    }
}

bool dl_ir__unary_deriv(dl_ir_op op, const dl_ir__sp *p, double x, double *out) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    if (!scalars[op]->deriv) {
        return false;
    }
    *out = scalars[op]->deriv(p, x);
    return true;
}

bool dl_ir__same_shape(const dl_ir__et *a, const dl_ir__et *b) {
    if (a->rank != b->rank) {
        return false;
    }
    for (int32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) {
            return false;
        }
    }
    return true;
}

// Every elementwise op lowered by `map`: out[i] = scalar(in[0][i'], ..., in[n-1][i']) with i'
// the broadcast position of i in each input.
dl_status dl_ir__ev_map(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                        size_t n_out) {
    (void)n_out;
    const dl_ir_node *n = cx->node;
    dl_ir__et *y = &out[0];
    scalar_fn fn = scalars[n->op]->fn;
    DL_ASSERT(fn != NULL); // checked by tests/ir's table test
    bool flat = true;
    for (size_t k = 0; k < n_in; k++) {
        if (!in[k] || !dl_ir__bcast_ok(in[k], y->dims, y->rank)) {
            return ERR("input %zu does not broadcast to the output shape", k);
        }
        flat = flat && dl_ir__same_shape(in[k], y);
    }
    dl_ir__sp sp;
    dl_ir__scalar_params(n, in[0]->dtype, y->dtype, &sp);
    double v[DL_IR__MAX_MAP];
    if (n_in > DL_IR__MAX_MAP) {
        return ERR("at most %d inputs are supported, got %zu", DL_IR__MAX_MAP, n_in);
    }
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < y->n; i++) {
        if (!flat) {
            dl_ir__unravel(i, y->dims, y->rank, oc);
        }
        for (size_t k = 0; k < n_in; k++) {
            v[k] = in[k]->d[flat ? i : dl_ir__bcast_index(in[k], oc, y->rank)];
        }
        y->d[i] = fn(&sp, v, n_in);
        if (sp.div0) {
            return ERR("integer division by zero");
        }
    }
    return DL_OK;
}

// Clip: bounds from inputs 1/2 (scalars) or from the min/max attributes; absent = unbounded.
// min > max gives max everywhere (ONNX). NaN propagates (torch.clamp with tensor bounds, numpy's
// clip): a NaN x stays NaN, a NaN bound makes every element NaN. On a tie x is kept, so
// Clip(-0, 0, 1) = -0 as in PyTorch.
static dl_status clip(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    double lo = -INFINITY, hi = INFINITY;
    const dl_ir_attr *a;
    if (n_in > 1 && in[1]) {
        if (in[1]->n != 1) {
            return ERR("min must be a scalar, got %lld elements", (long long)in[1]->n);
        }
        lo = in[1]->d[0];
    } else if ((a = dl_ir_node_attr(n, "min")) != NULL) {
        lo = a->kind == DL_IR_ATTR_INT ? (double)a->i : a->f;
    }
    if (n_in > 2 && in[2]) {
        if (in[2]->n != 1) {
            return ERR("max must be a scalar, got %lld elements", (long long)in[2]->n);
        }
        hi = in[2]->d[0];
    } else if ((a = dl_ir_node_attr(n, "max")) != NULL) {
        hi = a->kind == DL_IR_ATTR_INT ? (double)a->i : a->f;
    }
    if (in[0]->n != y->n) {
        return ERR("input has %lld elements, output %lld", (long long)in[0]->n, (long long)y->n);
    }
    for (int64_t i = 0; i < y->n; i++) {
        double v = in[0]->d[i];
        v = (v < lo || isnan(lo)) ? lo : v;
        y->d[i] = (v > hi || isnan(hi)) ? hi : v;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Reductions

// Marks the reduced axes. Returns false (no reduction: identity) for empty axes with
// noop_with_empty_axes; empty or absent axes otherwise reduce everything.
static dl_status reduce_axes(dl_ir__ectx *cx, int32_t rank, bool *red, bool *is_noop) {
    const dl_ir_node *n = cx->node;
    const dl_ir_attr *a = dl_ir_node_attr(n, "axes");
    *is_noop = false;
    for (int32_t i = 0; i < rank; i++) {
        red[i] = false;
    }
    if (!a || a->n == 0) {
        if (dl_ir_node_attr_int(n, "noop_with_empty_axes")) {
            *is_noop = true;
            return DL_OK;
        }
        for (int32_t i = 0; i < rank; i++) {
            red[i] = true;
        }
        return DL_OK;
    }
    for (size_t k = 0; k < a->n; k++) {
        int32_t ax;
        if (!dl_ir__axis(a->ints[k], rank, &ax)) {
            return ERR("axis %lld is out of range for rank %d", (long long)a->ints[k], rank);
        }
        red[ax] = true;
    }
    return DL_OK;
}

// Reduce{Sum,Mean,Max,Min}. Empty reductions give 0 / NaN / -inf / +inf.
static dl_status reduce(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    dl_ir_op op = cx->node->op;
    bool red[DL_MAX_RANK], noop;
    DL_TRY(reduce_axes(cx, x->rank, red, &noop));
    if (noop) {
        if (x->n != y->n) {
            return ERR("output shape does not match the input");
        }
        memcpy(y->d, x->d, (size_t)x->n * sizeof(double));
        return DL_OK;
    }
    // kdims: the output shape with keepdims=1 (same element order as either output layout).
    int64_t kdims[DL_MAX_RANK], count = 1, kn = 1;
    for (int32_t i = 0; i < x->rank; i++) {
        kdims[i] = red[i] ? 1 : x->dims[i];
        count *= red[i] ? x->dims[i] : 1;
        kn *= kdims[i];
    }
    if (kn != y->n) {
        return ERR("output has %lld elements, expected %lld", (long long)y->n, (long long)kn);
    }
    double init = op == DL_IR_OP_REDUCE_MAX ? -INFINITY : op == DL_IR_OP_REDUCE_MIN ? INFINITY : 0;
    for (int64_t i = 0; i < y->n; i++) {
        y->d[i] = init;
    }
    int64_t c[DL_MAX_RANK];
    for (int64_t i = 0; i < x->n; i++) {
        dl_ir__unravel(i, x->dims, x->rank, c);
        for (int32_t a = 0; a < x->rank; a++) {
            if (red[a]) {
                c[a] = 0;
            }
        }
        int64_t o = dl_ir__ravel(c, kdims, x->rank);
        double v = x->d[i];
        if (op == DL_IR_OP_REDUCE_MAX) {
            y->d[o] = fmax_nan(y->d[o], v);
        } else if (op == DL_IR_OP_REDUCE_MIN) {
            y->d[o] = fmin_nan(y->d[o], v);
        } else { // ReduceSum, ReduceMean
            y->d[o] += v;
        }
    }
    if (op == DL_IR_OP_REDUCE_MEAN) {
        for (int64_t i = 0; i < y->n; i++) {
            y->d[i] /= (double)count; // count 0: 0/0 = NaN
        }
    }
    return DL_OK;
}

static dl_status arg_max(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(n, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    bool last = dl_ir_node_attr_int(n, "select_last_index") != 0;
    int64_t outer = 1, inner = 1, len = x->dims[ax];
    for (int32_t i = 0; i < ax; i++) {
        outer *= x->dims[i];
    }
    for (int32_t i = ax + 1; i < x->rank; i++) {
        inner *= x->dims[i];
    }
    if (outer * inner != y->n) {
        return ERR("output has %lld elements, expected %lld", (long long)y->n,
                   (long long)(outer * inner));
    }
    if (len == 0 && y->n > 0) {
        return ERR("cannot take the ArgMax of an empty axis");
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t best = 0;
            double bv = x->d[o * len * inner + in];
            for (int64_t k = 1; k < len; k++) {
                double v = x->d[(o * len + k) * inner + in];
                // NaN is the maximum (torch.argmax): the first NaN wins, or the last one with
                // select_last_index.
                bool nan_wins = isnan(v) && (last || !isnan(bv));
                if (v > bv || (last && v == bv) || nan_wins) {
                    bv = v;
                    best = k;
                }
            }
            y->d[o * inner + in] = (double)best;
        }
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Shape ops

static dl_status same_numel_copy(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    if (x->n != y->n) {
        return ERR("cannot reshape %lld elements into %lld", (long long)x->n, (long long)y->n);
    }
    memcpy(y->d, x->d, (size_t)x->n * sizeof(double));
    return DL_OK;
}

static dl_status transpose(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    const dl_ir_attr *a = dl_ir_node_attr(cx->node, "perm");
    int32_t perm[DL_MAX_RANK];
    for (int32_t i = 0; i < x->rank; i++) {
        perm[i] = x->rank - 1 - i; // default: reverse the axes
    }
    if (a && a->n > 0) {
        if ((int32_t)a->n != x->rank) {
            return ERR("perm has %zu entries for rank %d", a->n, x->rank);
        }
        for (int32_t i = 0; i < x->rank; i++) {
            if (!dl_ir__axis(a->ints[i], x->rank, &perm[i])) {
                return ERR("perm entry %lld is out of range", (long long)a->ints[i]);
            }
        }
    }
    if (y->rank != x->rank || x->n != y->n) {
        return ERR("output shape does not match the permuted input");
    }
    // y[o] = x[c] with c[perm[i]] = o[i]
    int64_t oc[DL_MAX_RANK], ic[DL_MAX_RANK];
    for (int64_t i = 0; i < y->n; i++) {
        dl_ir__unravel(i, y->dims, y->rank, oc);
        for (int32_t k = 0; k < y->rank; k++) {
            ic[perm[k]] = oc[k];
        }
        y->d[i] = x->d[dl_ir__ravel(ic, x->dims, x->rank)];
    }
    return DL_OK;
}

static dl_status concat(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(cx->node, "axis"), y->rank, &ax)) {
        return ERR("axis is out of range for rank %d", y->rank);
    }
    int64_t outer = 1, inner = 1;
    for (int32_t i = 0; i < ax; i++) {
        outer *= y->dims[i];
    }
    for (int32_t i = ax + 1; i < y->rank; i++) {
        inner *= y->dims[i];
    }
    int64_t total = 0;
    for (size_t k = 0; k < n_in; k++) {
        if (!in[k] || in[k]->rank != y->rank) {
            return ERR("input %zu has a different rank", k);
        }
        total += in[k]->dims[ax];
    }
    if (total != y->dims[ax]) {
        return ERR("inputs add up to %lld along axis %d, output has %lld", (long long)total, ax,
                   (long long)y->dims[ax]);
    }
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (size_t k = 0; k < n_in; k++) {
            int64_t chunk = in[k]->dims[ax] * inner;
            for (int64_t j = 0; j < chunk; j++) {
                y->d[o * y->dims[ax] * inner + off + j] = in[k]->d[o * chunk + j];
            }
            off += chunk;
        }
    }
    return DL_OK;
}

// Split: output sizes along the axis come from the outputs' inferred types.
static dl_status split(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *out, size_t n_out) {
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(cx->node, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    int64_t outer = 1, inner = 1, total = 0;
    for (int32_t i = 0; i < ax; i++) {
        outer *= x->dims[i];
    }
    for (int32_t i = ax + 1; i < x->rank; i++) {
        inner *= x->dims[i];
    }
    for (size_t k = 0; k < n_out; k++) {
        if (out[k].rank != x->rank) {
            return ERR("output %zu has a different rank", k);
        }
        total += out[k].dims[ax];
    }
    if (total != x->dims[ax]) {
        return ERR("outputs add up to %lld along axis %d, input has %lld", (long long)total, ax,
                   (long long)x->dims[ax]);
    }
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = 0;
        for (size_t k = 0; k < n_out; k++) {
            int64_t chunk = out[k].dims[ax] * inner;
            for (int64_t j = 0; j < chunk; j++) {
                out[k].d[o * chunk + j] = x->d[o * x->dims[ax] * inner + off + j];
            }
            off += chunk;
        }
    }
    return DL_OK;
}

// Slice (ONNX clamping): starts/ends are made non-negative by adding the dim, then clamped to
// [0, dim] for positive steps and to [0, dim-1] / [-1, dim-1] for negative steps. Shared with
// SliceGrad (eval_grad.c), which scatters through the same start / step / len.
dl_status dl_ir__slice_params(dl_ir__ectx *cx, const dl_ir__et *x, int64_t *start, int64_t *step,
                              int64_t *len) {
    const dl_ir_node *n = cx->node;
    const dl_ir_attr *st = dl_ir_node_attr(n, "starts"), *en = dl_ir_node_attr(n, "ends");
    const dl_ir_attr *ax = dl_ir_node_attr(n, "axes"), *sp = dl_ir_node_attr(n, "steps");
    for (int32_t i = 0; i < x->rank; i++) {
        start[i] = 0;
        step[i] = 1;
        len[i] = x->dims[i];
    }
    if (!st || !en || st->n != en->n || (ax && ax->n && ax->n != st->n) ||
        (sp && sp->n && sp->n != st->n)) {
        return ERR("starts, ends, axes and steps must have the same length");
    }
    for (size_t k = 0; k < st->n; k++) {
        int32_t a;
        int64_t axis = (ax && ax->n) ? ax->ints[k] : (int64_t)k;
        if (!dl_ir__axis(axis, x->rank, &a)) {
            return ERR("axis %lld is out of range for rank %d", (long long)axis, x->rank);
        }
        int64_t d = x->dims[a], s = st->ints[k], e = en->ints[k];
        int64_t p = (sp && sp->n) ? sp->ints[k] : 1;
        if (p == 0) {
            return ERR("step must not be 0");
        }
        s = s < 0 ? s + d : s;
        e = e < 0 ? e + d : e;
        if (p > 0) {
            s = s < 0 ? 0 : (s > d ? d : s);
            e = e < 0 ? 0 : (e > d ? d : e);
            len[a] = e > s ? (e - s + p - 1) / p : 0;
        } else {
            s = s < 0 ? 0 : (s > d - 1 ? d - 1 : s);
            e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
            len[a] = s > e ? (s - e + (-p) - 1) / (-p) : 0;
        }
        start[a] = s;
        step[a] = p;
    }
    return DL_OK;
}

static dl_status slice(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    int64_t start[DL_MAX_RANK], step[DL_MAX_RANK], len[DL_MAX_RANK];
    DL_TRY(dl_ir__slice_params(cx, x, start, step, len));
    if (y->rank != x->rank) {
        return ERR("output rank %d differs from input rank %d", y->rank, x->rank);
    }
    for (int32_t i = 0; i < x->rank; i++) {
        if (len[i] != y->dims[i]) {
            return ERR("output dim %d is %lld, the slice gives %lld", i, (long long)y->dims[i],
                       (long long)len[i]);
        }
    }
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < y->n; i++) {
        dl_ir__unravel(i, y->dims, y->rank, oc);
        for (int32_t k = 0; k < y->rank; k++) {
            oc[k] = start[k] + oc[k] * step[k];
        }
        y->d[i] = x->d[dl_ir__ravel(oc, x->dims, x->rank)];
    }
    return DL_OK;
}

// Gather's geometry, shared with GatherGrad (eval_grad.c). axis_split: x viewed as
// [outer, dims[ax], inner]. gather_check_indices: every index in [-d, d).
void dl_ir__axis_split(const dl_ir__et *x, int32_t ax, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int32_t i = 0; i < ax; i++) {
        *outer *= x->dims[i];
    }
    for (int32_t i = ax + 1; i < x->rank; i++) {
        *inner *= x->dims[i];
    }
}

dl_status dl_ir__gather_check_indices(dl_ir__ectx *cx, const dl_ir__et *idx, int32_t ax,
                                      int64_t d) {
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t j = (int64_t)idx->d[k];
        if (j < -d || j >= d) {
            return ERR("index %lld is out of range for axis %d of size %lld", (long long)j, ax,
                       (long long)d);
        }
    }
    return DL_OK;
}

// Gather: y[a..., i..., b...] = x[a..., idx[i...], b...]; negative indices count from the end.
static dl_status gather(dl_ir__ectx *cx, const dl_ir__et *x, const dl_ir__et *idx, dl_ir__et *y) {
    int32_t ax;
    if (!dl_ir__axis(dl_ir_node_attr_int(cx->node, "axis"), x->rank, &ax)) {
        return ERR("axis is out of range for rank %d", x->rank);
    }
    if (y->rank != x->rank - 1 + idx->rank) {
        return ERR("output rank %d, expected %d", y->rank, x->rank - 1 + idx->rank);
    }
    int64_t outer, inner, d = x->dims[ax];
    dl_ir__axis_split(x, ax, &outer, &inner);
    if (outer * idx->n * inner != y->n) {
        return ERR("output has %lld elements, expected %lld", (long long)y->n,
                   (long long)(outer * idx->n * inner));
    }
    DL_TRY(dl_ir__gather_check_indices(cx, idx, ax, d));
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < idx->n; k++) {
            int64_t j = (int64_t)idx->d[k];
            j = j < 0 ? j + d : j;
            for (int64_t in = 0; in < inner; in++) {
                y->d[(o * idx->n + k) * inner + in] = x->d[(o * d + j) * inner + in];
            }
        }
    }
    return DL_OK;
}

static dl_status expand(dl_ir__ectx *cx, const dl_ir__et *x, dl_ir__et *y) {
    if (!dl_ir__bcast_ok(x, y->dims, y->rank)) {
        return ERR("input does not broadcast to the output shape");
    }
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < y->n; i++) {
        dl_ir__unravel(i, y->dims, y->rank, oc);
        y->d[i] = x->d[dl_ir__bcast_index(x, oc, y->rank)];
    }
    return DL_OK;
}

// Pad's geometry, shared with PadGrad (eval_grad.c). pad_check_dims: `padded` (named `what`)
// has x's dims plus both pads, and only mode "constant" pads an empty axis.
dl_status dl_ir__pad_check_dims(dl_ir__ectx *cx, const dl_ir__et *x, const int64_t *pads,
                                const char *mode, const dl_ir__et *padded, const char *what) {
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t want = x->dims[i] + pads[i] + pads[i + x->rank];
        if (want != padded->dims[i]) {
            return ERR("%s dim %d is %lld, padding gives %lld", what, i, (long long)padded->dims[i],
                       (long long)want);
        }
        if (x->dims[i] == 0 && padded->dims[i] > 0 && strcmp(mode, "constant") != 0) {
            return ERR("%s padding of an empty axis", mode);
        }
    }
    return DL_OK;
}

bool dl_ir__pad_source(const dl_ir__et *x, const int64_t *pads, const char *mode, int64_t *oc) {
    bool outside = false;
    for (int32_t k = 0; k < x->rank; k++) {
        int64_t d = x->dims[k], c = oc[k] - pads[k];
        if (c >= 0 && c < d) {
            oc[k] = c;
            continue;
        }
        if (strcmp(mode, "edge") == 0) {
            c = c < 0 ? 0 : d - 1;
        } else if (strcmp(mode, "wrap") == 0) {
            c = ((c % d) + d) % d;
        } else if (strcmp(mode, "reflect") == 0) {
            if (d == 1) {
                c = 0;
            } else {
                int64_t per = 2 * (d - 1);
                c = ((c % per) + per) % per;
                c = c >= d ? per - c : c;
            }
        } else {
            outside = true;
        }
        oc[k] = c;
    }
    return !outside;
}

// Pad: pads = [b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]; negative pads crop. The constant comes
// from input 1 when given, else the `value` attribute.
static dl_status pad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *y) {
    const dl_ir_node *n = cx->node;
    const dl_ir__et *x = in[0];
    const dl_ir_attr *p = dl_ir_node_attr(n, "pads");
    if (!p || (int32_t)p->n != 2 * x->rank) {
        return ERR("pads must have %d entries", 2 * x->rank);
    }
    const char *mode = dl_ir_node_attr_string(n, "mode");
    double value = dl_ir_node_attr_float(n, "value");
    if (n_in > 1 && in[1]) {
        if (in[1]->n != 1) {
            return ERR("constant_value must be a scalar");
        }
        value = in[1]->d[0];
    }
    if (y->rank != x->rank) {
        return ERR("output rank differs from the input rank");
    }
    DL_TRY(dl_ir__pad_check_dims(cx, x, p->ints, mode, y, "output"));
    int64_t oc[DL_MAX_RANK];
    for (int64_t i = 0; i < y->n; i++) {
        dl_ir__unravel(i, y->dims, y->rank, oc);
        bool inside = dl_ir__pad_source(x, p->ints, mode, oc);
        y->d[i] = inside ? x->d[dl_ir__ravel(oc, x->dims, x->rank)] : value;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Dispatch: one hook per op, from the eval column of ir_ops.def. Every hook takes the node's
// inputs (in[i] NULL for an omitted optional input) and its pre-allocated outputs.

dl_status dl_ir__ev_clip(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    (void)n_out;
    return clip(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_reduce(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    (void)n_in, (void)n_out;
    return reduce(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_arg_max(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                            size_t n_out) {
    (void)n_in, (void)n_out;
    return arg_max(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_copy(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                         size_t n_out) {
    (void)n_in, (void)n_out;
    return same_numel_copy(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_transpose(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                              size_t n_out) {
    (void)n_in, (void)n_out;
    return transpose(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_concat(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    (void)n_out;
    return concat(cx, in, n_in, &out[0]);
}

dl_status dl_ir__ev_split(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                          size_t n_out) {
    (void)n_in;
    return split(cx, in[0], out, n_out);
}

dl_status dl_ir__ev_slice(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                          size_t n_out) {
    (void)n_in, (void)n_out;
    return slice(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_gather(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    (void)n_in, (void)n_out;
    return gather(cx, in[0], in[1], &out[0]);
}

dl_status dl_ir__ev_expand(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    (void)n_in, (void)n_out;
    return expand(cx, in[0], &out[0]);
}

dl_status dl_ir__ev_pad(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                        size_t n_out) {
    (void)n_out;
    return pad(cx, in, n_in, &out[0]);
}

static const dl_ir__eval_hook eval_hooks[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, ...)                                                                             \
    [DL_IR_OP_##e] = dl_ir__ev_##ev,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(eval_hooks) == DL_IR_OP_COUNT, "one evaluator hook per op");

dl_status dl_ir__eval_node(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in, dl_ir__et *out,
                           size_t n_out) {
    const dl_ir_node *n = cx->node;
    // The op's required inputs (min_inputs in the op table) must be present.
    size_t n_req = (size_t)dl_ir_op_get_info(n->op)->min_inputs;
    for (size_t i = 0; i < n_req || i == 0; i++) {
        if (i >= n_in || !in[i]) {
            return ERR("input %zu is missing", i);
        }
    }
    return eval_hooks[n->op](cx, in, n_in, out, n_out);
}
