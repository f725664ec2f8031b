// tests/autodiff/test_grad_fd.c — gradient checks for every differentiable op of the spec.
//
// Each case is a small .dlg whose params feed the op under test; the loss is
// ReduceSum(Mul(op output, r)) with a random input r (or the op itself when it is a loss).
// dl_pass_autodiff builds the backward graph, the reference evaluator computes the gradients,
// and they are compared with central finite differences of the loss, also through the
// evaluator (which keeps float values in double between nodes).
//
// Data: every float is (k + 0.5) / 1024 for a random integer k (so never 0 and never on a kink
// of Relu/Abs/Clip at multiples of 1/1024), in [-2, 2), or [0.25, 2) for names starting with
// "pos_". The step h = 2^-12 keeps x +- h exact in float32 (the params' storage), so the only
// error is the O(h^2) truncation of the central difference.
#include "dl_base.h"
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H (1.0 / 4096.0)

static uint64_t rng_state;

static uint64_t next_u64(void) {
    rng_state += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng_state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rand_value(const char *name) {
    bool pos = strncmp(name, "pos_", 4) == 0;
    int64_t k = pos ? 256 + (int64_t)(next_u64() % 1792) : (int64_t)(next_u64() % 4096) - 2048;
    return ((double)k + 0.5) / 1024.0;
}

static void fill(const dl_ir_value *v, dl_tensor *t) {
    int64_t n = dl_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dl_dtype_is_float(v->type.dtype)) {
            dl_tensor_set(t, i, rand_value(v->name));
        } else if (v->type.dtype == DL_DT_BOOL) {
            dl_tensor_set(t, i, (double)(next_u64() & 1));
        } else {
            dl_tensor_set(t, i, (double)(next_u64() % 3)); // labels / indices in [0, 3)
        }
    }
}

static dl_status alloc_like(const dl_ir_value *v, dl_tensor *t) {
    int64_t dims[DL_MAX_RANK];
    for (int32_t i = 0; i < v->type.rank; i++) {
        dims[i] = v->type.dims[i].value;
    }
    return dl_tensor_alloc(t, v->type.dtype, v->type.rank, dims);
}

static void print_diags(const dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fprintf(stderr, "%s", s);
    }
    free(s);
}

// Parses, infers shapes and differentiates `text`. NULL (diagnostics printed) on failure.
static dl_ir_module *build(const char *text, dl_diags *d) {
    dl_ir_module *m = NULL;
    if (dl_fe_parse("t.dlg", text, strlen(text), d, &m) != DL_OK || dl_pass_shape(m, d) != DL_OK ||
        dl_pass_autodiff(m, d) != DL_OK) {
        dl_ir_module_destroy(m);
        return NULL;
    }
    return m;
}

static void free_vals(const dl_ir_module *m, double **vals) {
    if (vals) {
        for (size_t i = 0; i < m->values.len; i++) {
            free(vals[i]);
        }
        free(vals);
    }
}

static bool eval_loss(const dl_ir_module *m, const dl_ir_eval_opts *o, const dl_tensor *ins,
                      dl_diags *d, double *loss, double ***vals_out) {
    double **vals = NULL;
    if (dl_ir_eval_all_f64(m, o, ins, &vals, d) != DL_OK) {
        print_diags(d);
        return false;
    }
    *loss = vals[m->train_loss->id][0];
    if (vals_out) {
        *vals_out = vals;
    } else {
        free_vals(m, vals);
    }
    return true;
}

// Checks every trained param's gradient of the model in `text` (up to 24 elements each).
static bool fd_check(const char *text, double tol) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    rng_state = 12345;
    bool ok = true;
    dl_ir_module *m = build(text, d);
    if (!m) {
        print_diags(d);
        dl_diags_destroy(d);
        return false;
    }
    size_t ni = m->inputs.len, np = m->params.len;
    dl_tensor *ins = calloc(ni + 1, sizeof *ins), *ps = calloc(np + 1, sizeof *ps);
    for (size_t i = 0; i < ni; i++) {
        if (alloc_like(m->inputs.data[i], &ins[i]) != DL_OK) {
            ok = false;
        } else {
            fill(m->inputs.data[i], &ins[i]);
        }
    }
    for (size_t i = 0; i < np; i++) {
        if (alloc_like(m->params.data[i], &ps[i]) != DL_OK) {
            ok = false;
        } else {
            fill(m->params.data[i], &ps[i]);
        }
    }
    dl_ir_eval_opts o = {.params = ps, .n_params = np, .training = true};
    double **vals = NULL;
    double loss0 = 0;
    size_t n_checked = 0;
    if (ok && !eval_loss(m, &o, ins, d, &loss0, &vals)) {
        ok = false;
    }
    for (size_t p = 0; ok && p < np; p++) {
        const dl_ir_value *g = m->grads.data[p];
        if (!g) {
            continue;
        }
        int64_t n = dl_tensor_numel(&ps[p]);
        int64_t stride = n > 24 ? n / 24 : 1;
        for (int64_t j = 0; j < n && ok; j += stride) {
            double x = dl_tensor_get(&ps[p], j);
            double lp = 0, lm = 0;
            dl_tensor_set(&ps[p], j, x + FD_H);
            ok &= eval_loss(m, &o, ins, d, &lp, NULL);
            dl_tensor_set(&ps[p], j, x - FD_H);
            ok &= eval_loss(m, &o, ins, d, &lm, NULL);
            dl_tensor_set(&ps[p], j, x);
            double fd = (lp - lm) / (2 * FD_H);
            double an = vals[g->id][j];
            double err = fabs(fd - an);
            if (!(err <= tol * (1.0 + fabs(fd)))) {
                fprintf(stderr, "  d loss / d %s[%lld]: autodiff %.9g, finite differences %.9g\n",
                        m->params.data[p]->name, (long long)j, an, fd);
                ok = false;
            }
            n_checked++;
        }
    }
    if (ok && n_checked == 0) {
        fprintf(stderr, "  no gradient was checked\n");
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "model:\n%s\n", text);
    }
    free_vals(m, vals);
    for (size_t i = 0; i < ni; i++) {
        dl_tensor_free(&ins[i]);
    }
    for (size_t i = 0; i < np; i++) {
        dl_tensor_free(&ps[i]);
    }
    free(ins);
    free(ps);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

// The standard harness: params a (and b) of the given types feed `expr` (one node line
// producing y); loss = sum(y * r).
static bool fd_op(const char *decls, const char *expr, const char *yshape) {
    char text[4096];
    snprintf(text, sizeof text,
             "model t\n%s\ninput r : float[%s]\n%s\nyr = Mul (y, r)\nloss = ReduceSum <keepdims = "
             "0> (yr)\ntrain loss { optimizer = sgd <lr = 0.1> }\n",
             decls, yshape, expr);
    return fd_check(text, 1e-5);
}

#define FD_OP(decls, expr, yshape) DL_CHECK(fd_op((decls), (expr), (yshape)))

DL_TEST(fd_binary_broadcast) {
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[4] = zeros", "y = Add (a, b)", "3, 4");
    FD_OP("param a : float[2, 3, 4] = zeros\nparam b : float[3, 1] = zeros", "y = Sub (a, b)",
          "2, 3, 4");
    FD_OP("param a : float[3, 1] = zeros\nparam b : float[1, 4] = zeros", "y = Mul (a, b)", "3, 4");
    FD_OP("param a : float[3, 4] = zeros\nparam pos_b : float[4] = zeros", "y = Div (a, pos_b)",
          "3, 4");
    FD_OP("param pos_a : float[3, 4] = zeros\nparam b : float[4] = zeros", "y = Pow (pos_a, b)",
          "3, 4");
}

// Ops whose derivative is only real on positive inputs (the pos_ prefix draws those).
static bool positive_domain(const char *op) {
    return strcmp(op, "Log") == 0 || strcmp(op, "Sqrt") == 0 || strcmp(op, "Reciprocal") == 0;
}

// Neg, Identity, AllReduceMean (one process) and every op differentiated through UnaryGrad (from
// the op table, so a new one is checked as soon as its row exists), with default attributes.
DL_TEST(fd_unary) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        dl_ir_op op = (dl_ir_op)i;
        if (!dl_ir_op_has_unary_grad(op) && op != DL_IR_OP_NEG && op != DL_IR_OP_IDENTITY &&
            op != DL_IR_OP_ALL_REDUCE_MEAN) {
            continue;
        }
        const char *name = dl_ir_op_get_info(op)->name;
        char e[128];
        if (positive_domain(name)) {
            snprintf(e, sizeof e, "y = %s (pos_a)", name);
            FD_OP("param pos_a : float[3, 5] = zeros", e, "3, 5");
        } else {
            snprintf(e, sizeof e, "y = %s (a)", name);
            FD_OP("param a : float[3, 5] = zeros", e, "3, 5");
        }
    }
    FD_OP("param a : float[3, 5] = zeros", "y = LeakyRelu <alpha = 0.2> (a)", "3, 5");
    FD_OP("param a : float[3, 5] = zeros", "y = Gelu (a)", "3, 5");
    FD_OP("param a : float[3, 5] = zeros", "y = Gelu <approximate = \"tanh\"> (a)", "3, 5");
    FD_OP("param a : float[3, 5] = zeros", "y = Clip <min = -1.0, max = 0.5> (a)", "3, 5");
    FD_OP("param a : float[3, 5] = zeros", "y = Cast <to = \"float\"> (a)", "3, 5");
}

DL_TEST(fd_minmax_where) {
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[4] = zeros", "y = Max (a, b)", "3, 4");
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[3, 4] = zeros\nparam c : float[1] = "
          "zeros",
          "y = Min (a, b, c)", "3, 4");
    FD_OP("input cond : bool[3, 4]\nparam a : float[3, 4] = zeros\nparam b : float[4] = zeros",
          "y = Where (cond, a, b)", "3, 4");
}

DL_TEST(fd_reductions) {
    FD_OP("param a : float[3, 4, 5] = zeros", "y = ReduceSum <axes = [1], keepdims = 0> (a)",
          "3, 5");
    FD_OP("param a : float[3, 4, 5] = zeros", "y = ReduceMean <axes = [0, 2]> (a)", "1, 4, 1");
    FD_OP("param a : float[3, 4, 5] = zeros", "y = ReduceMax <axes = [-1], keepdims = 0> (a)",
          "3, 4");
    FD_OP("param a : float[3, 4, 5] = zeros", "y = ReduceMin <keepdims = 0> (a)", "");
    FD_OP("param a : float[3, 4] = zeros", "y = ReduceSum (a)", "1, 1");
}

DL_TEST(fd_linalg) {
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[4, 5] = zeros", "y = MatMul (a, b)",
          "3, 5");
    FD_OP("param a : float[2, 3, 4] = zeros\nparam b : float[4, 5] = zeros", "y = MatMul (a, b)",
          "2, 3, 5");
    FD_OP("param a : float[2, 1, 3, 4] = zeros\nparam b : float[3, 4, 2] = zeros",
          "y = MatMul (a, b)", "2, 3, 3, 2");
    FD_OP("param a : float[4] = zeros\nparam b : float[2, 4, 5] = zeros", "y = MatMul (a, b)",
          "2, 5");
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[4] = zeros", "y = MatMul (a, b)", "3");
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[4, 5] = zeros\nparam c : float[5] = "
          "zeros",
          "y = Gemm (a, b, c)", "3, 5");
    FD_OP("param a : float[4, 3] = zeros\nparam b : float[5, 4] = zeros\nparam c : float[3, 1] = "
          "zeros",
          "y = Gemm <alpha = 0.5, beta = 2.0, transA = 1, transB = 1> (a, b, c)", "3, 5");
    FD_OP("param a : float[4, 3] = zeros\nparam b : float[4, 5] = zeros",
          "y = Gemm <transA = 1> (a, b)", "3, 5");
    FD_OP("param a : float[3, 4] = zeros\nparam b : float[5, 4] = zeros",
          "y = Gemm <transB = 1> (a, b)", "3, 5");
}

DL_TEST(fd_conv) {
    FD_OP("param x : float[2, 3, 6, 6] = zeros\nparam w : float[4, 3, 3, 3] = zeros\nparam b : "
          "float[4] = zeros",
          "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", "2, 4, 6, 6");
    FD_OP("param x : float[1, 4, 7, 7] = zeros\nparam w : float[4, 2, 3, 3] = zeros",
          "y = Conv <strides = [2, 2], pads = [1, 0, 1, 0], group = 2> (x, w)", "1, 4, 4, 3");
    FD_OP("param x : float[1, 2, 7, 7] = zeros\nparam w : float[3, 2, 2, 2] = zeros",
          "y = Conv <dilations = [2, 2]> (x, w)", "1, 3, 5, 5");
    FD_OP("param x : float[1, 2, 3, 3] = zeros\nparam w : float[2, 3, 3, 3] = zeros\nparam b : "
          "float[3] = zeros",
          "y = ConvTranspose <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w, b)", "1, 3, 5, 5");
}

DL_TEST(fd_pool) {
    FD_OP("param x : float[2, 3, 6, 6] = zeros",
          "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)", "2, 3, 3, 3");
    FD_OP("param x : float[1, 2, 5, 5] = zeros",
          "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)",
          "1, 2, 3, 3");
    FD_OP("param x : float[1, 2, 5, 5] = zeros",
          "y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)",
          "1, 2, 3, 3");
    FD_OP("param x : float[1, 2, 5, 5] = zeros",
          "y = AveragePool <kernel_shape = [2, 2], count_include_pad = 1, pads = [1, 1, 1, 1]> (x)",
          "1, 2, 6, 6");
    FD_OP("param x : float[2, 3, 4, 5] = zeros", "y = GlobalAveragePool (x)", "2, 3, 1, 1");
}

DL_TEST(fd_norm_softmax) {
    FD_OP("param x : float[3, 4, 6] = zeros\nparam g : float[6] = zeros\nparam b : float[6] = "
          "zeros",
          "y = LayerNormalization (x, g, b)", "3, 4, 6");
    FD_OP("param x : float[3, 4, 6] = zeros\nparam g : float[4, 6] = zeros",
          "y = LayerNormalization <axis = 1, epsilon = 0.001> (x, g)", "3, 4, 6");
    FD_OP("param x : float[3, 4, 5] = zeros", "y = Softmax <axis = 1> (x)", "3, 4, 5");
    FD_OP("param x : float[3, 5] = zeros", "y = LogSoftmax (x)", "3, 5");
}

DL_TEST(fd_shape_ops) {
    FD_OP("param x : float[3, 4, 2] = zeros", "y = Reshape <shape = [4, -1]> (x)", "4, 6");
    FD_OP("param x : float[2, 3, 4] = zeros", "y = Transpose <perm = [2, 0, 1]> (x)", "4, 2, 3");
    FD_OP("param x : float[2, 3, 4] = zeros", "y = Transpose (x)", "4, 3, 2");
    FD_OP("param x : float[2, 3, 4] = zeros", "y = Flatten <axis = 2> (x)", "6, 4");
    FD_OP("param a : float[2, 3] = zeros\nparam b : float[2, 5] = zeros",
          "y = Concat <axis = -1> (a, b)", "2, 8");
    FD_OP("param x : float[3, 4, 5] = zeros",
          "y = Slice <starts = [1, 4], ends = [3, 0], axes = [0, 2], steps = [1, -2]> (x)",
          "2, 4, 2");
    FD_OP("param x : float[4, 5] = zeros\ninput idx : int64[2, 3]",
          "y = Gather <axis = 1> (x, idx)", "4, 2, 3");
    FD_OP("param x : float[3, 1, 4] = zeros", "y = Squeeze <axes = [1]> (x)", "3, 4");
    FD_OP("param x : float[3, 4] = zeros", "y = Unsqueeze <axes = [0, 2]> (x)", "1, 3, 1, 4");
    FD_OP("param x : float[3, 1] = zeros", "y = Expand <shape = [2, 3, 4]> (x)", "2, 3, 4");
    FD_OP("param x : float[3, 4] = zeros", "y = Pad <pads = [1, 0, 2, 1]> (x)", "6, 5");
    FD_OP("param x : float[3, 4] = zeros", "y = Pad <mode = \"reflect\", pads = [1, 2, 1, 2]> (x)",
          "5, 8");
    FD_OP("param x : float[3, 4] = zeros", "y = Pad <mode = \"edge\", pads = [2, 1, 0, 3]> (x)",
          "5, 8");
    // Split: both outputs used, one with a weight of its own.
    DL_CHECK(fd_check("model t\nparam x : float[4, 6] = zeros\ninput r : float[4, 2]\n"
                      "p, q = Split <axis = 1, split = [2, 4]> (x)\npr = Mul (p, r)\n"
                      "s1 = ReduceSum <keepdims = 0> (pr)\ns2 = ReduceMean <keepdims = 0> (q)\n"
                      "loss = Add (s1, s2)\ntrain loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    // Split with an unused output.
    DL_CHECK(fd_check("model t\nparam x : float[4, 6] = zeros\n"
                      "p, q, u = Split <axis = 1, num_outputs = 3> (x)\npq = Mul (p, q)\n"
                      "loss = ReduceSum <keepdims = 0> (pq)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
}

DL_TEST(fd_losses) {
    DL_CHECK(fd_check("model t\nparam x : float[5, 4] = zeros\ninput lbl : int64[5]\n"
                      "loss = SoftmaxCrossEntropyLoss (x, lbl)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam x : float[3, 4, 2] = zeros\ninput lbl : int64[3, 2]\n"
                      "param pos_w : float[4] = zeros\n"
                      "loss = SoftmaxCrossEntropyLoss <reduction = \"sum\", ignore_index = 1> "
                      "(x, lbl, pos_w)\ntrain loss { optimizer = sgd <lr = 0.1>\n freeze = "
                      "[pos_w] }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam x : float[5, 4] = zeros\ninput lbl : int64[5]\n"
                      "input r : float[5]\n"
                      "l = SoftmaxCrossEntropyLoss <reduction = \"none\"> (x, lbl)\n"
                      "lr = Mul (l, r)\nloss = ReduceSum <keepdims = 0> (lr)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam x : float[5, 4] = zeros\ninput lbl : int64[5]\n"
                      "lp = LogSoftmax (x)\nloss = NegativeLogLikelihoodLoss (lp, lbl)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam x : float[5, 4] = zeros\ninput lbl : int64[5]\n"
                      "param pos_w : float[4] = zeros\n"
                      "loss = NegativeLogLikelihoodLoss <ignore_index = 2> (x, lbl, pos_w)\n"
                      "train loss { optimizer = sgd <lr = 0.1>\n freeze = [pos_w] }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam a : float[3, 4] = zeros\ninput b : float[3, 4]\n"
                      "loss = MeanSquaredError (a, b)\ntrain loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    DL_CHECK(fd_check("model t\nparam a : float[3, 4] = zeros\nparam b : float[3, 4] = zeros\n"
                      "loss = MeanSquaredError <reduction = \"sum\"> (a, b)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
}

// The train step runs BatchNormalization with batch statistics (a training-mode clone whose
// running statistics are assigned to the params) and Dropout with its mask.
DL_TEST(fd_training_mode_ops) {
    static const char *bn =
        "model t\nparam x : float[4, 3, 2, 2] = zeros\nparam g : float[3] = zeros\n"
        "param b : float[3] = zeros\nparam rm : float[3] = zeros\nparam pos_rv : float[3] = "
        "zeros\ninput r : float[4, 3, 2, 2]\n"
        "y = BatchNormalization <epsilon = 0.001> (x, g, b, rm, pos_rv)\nyr = Mul (y, r)\n"
        "loss = ReduceSum <keepdims = 0> (yr)\ntrain loss { optimizer = sgd <lr = 0.1> }\n";
    DL_CHECK(fd_check(bn, 1e-5));
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_module *m = build(bn, d);
    DL_CHECK(m != NULL);
    if (m) {
        DL_CHECK_EQ_I64((int64_t)m->assigns.len, 2);
        DL_CHECK(m->assigns.len == 2 && strcmp(m->assigns.data[0].param->name, "rm") == 0 &&
                 strcmp(m->assigns.data[1].param->name, "pos_rv") == 0);
        DL_CHECK(m->train_loss != m->train->loss); // the loss of the training-mode clone
        DL_CHECK(m->grads.data[3] == NULL && m->grads.data[4] == NULL);
        DL_CHECK(m->step_counter == NULL);
        DL_CHECK(dl_ir_verify(m, d) == DL_OK);
    }
    dl_ir_module_destroy(m);
    // sync_batchnorm = true: the same BatchNormalization as ops around AllReduceMean (the
    // identity in one process), so the same gradients, and the same running-statistic assigns;
    // 2-D (rank 4) and 1-D (rank 2) inputs.
    static const char *sbn =
        "model t\nparam x : float[4, 3, 2, 2] = zeros\nparam g : float[3] = zeros\n"
        "param b : float[3] = zeros\nparam rm : float[3] = zeros\nparam pos_rv : float[3] = "
        "zeros\ninput r : float[4, 3, 2, 2]\nparam h : float[5, 3] = zeros\n"
        "y = BatchNormalization <epsilon = 0.001> (x, g, b, rm, pos_rv)\nyr = Mul (y, r)\n"
        "z = BatchNormalization (h, g, b, rm, pos_rv)\nzt = Tanh (z)\n"
        "l1 = ReduceSum <keepdims = 0> (yr)\nl2 = ReduceSum <keepdims = 0> (zt)\n"
        "loss = Add (l1, l2)\ntrain loss { optimizer = sgd <lr = 0.1>\n sync_batchnorm = true }\n";
    DL_CHECK(fd_check(sbn, 1e-5));
    m = build(sbn, d);
    DL_CHECK(m != NULL);
    if (m) {
        size_t n_ar = 0, n_bn = 0;
        for (size_t i = m->n_fwd_nodes; i < m->nodes.len; i++) {
            n_ar += m->nodes.data[i]->op == DL_IR_OP_ALL_REDUCE_MEAN;
            n_bn += m->nodes.data[i]->op == DL_IR_OP_BATCH_NORMALIZATION ||
                    m->nodes.data[i]->op == DL_IR_OP_BATCH_NORMALIZATION_GRAD;
        }
        DL_CHECK_EQ_I64((int64_t)n_ar, 8); // mean and variance per BN, and their adjoints
        DL_CHECK_EQ_I64((int64_t)n_bn, 0);
        DL_CHECK_EQ_I64((int64_t)m->assigns.len, 4);
        DL_CHECK(dl_ir_verify(m, d) == DL_OK);
    }
    dl_ir_module_destroy(m);
    static const char *drop =
        "model t\nparam a : float[4, 6] = zeros\ninput r : float[4, 6]\n"
        "y = Dropout <ratio = 0.3, seed = 5> (a)\nt = Tanh (y)\nyr = Mul (t, r)\n"
        "loss = ReduceSum <keepdims = 0> (yr)\ntrain loss { optimizer = sgd <lr = 0.1> }\n";
    DL_CHECK(fd_check(drop, 1e-5));
    m = build(drop, d);
    DL_CHECK(m != NULL);
    if (m) {
        DL_CHECK(m->step_counter != NULL && m->step_counter->type.dtype == DL_DT_INT64);
        DL_CHECK(m->train_loss != m->train->loss);
        DL_CHECK(dl_ir_verify(m, d) == DL_OK);
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    DL_CHECK(fd_check("model t\nparam a : float[4, 6] = zeros\ninput r : float[4, 6]\n"
                      "const p : float[] = 0.25\ny, mk = Dropout <seed = 9> (a, p)\n"
                      "yr = Mul (y, r)\nloss = ReduceSum <keepdims = 0> (yr)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
}

// A value used several times accumulates its contributions; the samples' graphs differentiate.
DL_TEST(fd_graphs) {
    DL_CHECK(fd_check("model t\nparam a : float[3, 4] = zeros\nb = Mul (a, a)\nc = Tanh (a)\n"
                      "d = Add (b, c)\ne = Mul (d, a)\nloss = ReduceMean <keepdims = 0> (e)\n"
                      "train loss { optimizer = sgd <lr = 0.1> }\n",
                      1e-5));
    DL_CHECK(fd_check("model mlp\ninput x : float[4, 6]\ninput y : int64[4]\n"
                      "param w1 : float[6, 5] = zeros\nparam b1 : float[5] = zeros\n"
                      "param w2 : float[5, 3] = zeros\nparam b2 : float[3] = zeros\n"
                      "h = Gemm (x, w1, b1)\na = Relu (h)\nlogits = Gemm (a, w2, b2)\n"
                      "loss = SoftmaxCrossEntropyLoss (logits, y)\n"
                      "train loss { optimizer = adam <lr = 0.001> }\n",
                      1e-5));
}

static bool expect_error(const char *text, const char *needle) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    dl_ir_module *m = build(text, d);
    char *s = NULL;
    bool ok = !m && dl_diags_render(d, &s) == DL_OK && s && strstr(s, needle);
    if (!ok) {
        fprintf(stderr, "expected an error containing '%s', got:\n%s\n", needle, s ? s : "");
    }
    free(s);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

DL_TEST(autodiff_errors_and_structure) {
    DL_CHECK(expect_error("model t\nparam a : float[3] = zeros\nloss = Relu (a)\n"
                          "train loss { optimizer = sgd <lr = 0.1> }\n",
                          "must be a float scalar"));
    DL_CHECK(expect_error("model t\nparam a : float[3, 4] = zeros\ninput i : int64[2]\n"
                          "g = Gather (a, i)\nb = ArgMax (g)\nc = Cast <to = \"float\"> (b)\n"
                          "e = Mul (c, a)\nf = UnaryGrad <op = \"Relu\"> (e, e)\n"
                          "loss = ReduceSum <keepdims = 0> (f)\n"
                          "train loss { optimizer = sgd <lr = 0.1> }\n",
                          "internal gradient ops have no second derivative"));
    // Frozen params and params the loss does not reach get no gradient.
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_module *m = build("model t\nparam a : float[3] = zeros\nparam b : float[3] = zeros\n"
                            "param c : float[3] = zeros\nab = Mul (a, b)\n"
                            "loss = ReduceSum <keepdims = 0> (ab)\nunused = Relu (c)\n"
                            "train loss { optimizer = sgd <lr = 0.1>\n freeze = [b] }\n",
                            d);
    DL_CHECK(m != NULL);
    if (m) {
        DL_CHECK(m->has_backward);
        DL_CHECK_EQ_I64((int64_t)m->grads.len, 3);
        DL_CHECK(m->grads.data[0] != NULL);
        DL_CHECK(m->grads.data[1] == NULL);
        DL_CHECK(m->grads.data[2] == NULL);
        DL_CHECK(m->n_fwd_nodes == 3);
        DL_CHECK(m->grad_seed && m->grad_seed->kind == DL_IR_VAL_CONST);
        DL_CHECK(dl_ir_verify(m, d) == DL_OK);
        DL_CHECK(dl_pass_autodiff(m, d) != DL_OK); // twice is an error
        // The training graph prints and parses back.
        char *text = NULL;
        DL_CHECK_OK(dl_ir_print(m, &text));
        dl_ir_module *m2 = NULL;
        DL_CHECK_OK(dl_fe_parse("p.dlg", text, strlen(text), d, &m2));
        free(text);
        dl_ir_module_destroy(m2);
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST_MAIN()
