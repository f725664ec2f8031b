// tests/eval_grad_nn/test_eval_grad_nn.c — the reference evaluator's ConvGradWeight,
// MaxPoolGrad, AveragePoolGrad and BatchNormalizationGrad against central finite differences
// of their forward ops, all through the evaluator (parse + dl_pass_shape + dl_ir_eval).
//
// For a forward loss L(v) = ReduceSum(Mul(F(v, ...), r)) with fixed r, the gradient op fed
// dy = r must give dL/dv. The finite difference is computed inside one module, so the
// evaluator keeps everything in double: v_a = v + h*dir, v_b = v - h*dir (dir one-hot, h a
// power of two), D = L(v_a) - L(v_b), and only D is rounded to float on output. Every input
// holds distinct, non-zero values on a power-of-two grid (a shuffled ramp of step >= 2^-10 for
// the sizes used), so MaxPool has no ties and h (2^-12) is below half the gap between values:
// the argmax never moves. Conv, pools are linear in v (the
// difference is exact up to rounding); BatchNormalization is smooth (O(h^2) error).
#include "dl_base.h"
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 0.000244140625 // 2^-12

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static dl_ir_module *build(const char *text, dl_diags *d) {
    dl_ir_module *m = NULL;
    if (dl_fe_parse("fd.dlg", text, strlen(text), d, &m) != DL_OK || dl_pass_shape(m, d) != DL_OK) {
        fprintf(stderr, "model does not check:\n%s\n", text);
        print_diags(d);
        dl_ir_module_destroy(m);
        return NULL;
    }
    return m;
}

// Allocates m's inputs; each one but "dir" (left zero) gets a shuffled ramp of its size
// (seeded by its position).
static bool alloc_inputs(const dl_ir_module *m, dl_tensor *ins) {
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < v->type.rank; k++) {
            dims[k] = v->type.dims[k].value;
        }
        if (dl_tensor_alloc(&ins[i], v->type.dtype, v->type.rank, dims) != DL_OK) {
            return false;
        }
        if (strcmp(v->name, "dir") == 0) {
            continue;
        }
        int64_t n = dl_tensor_numel(&ins[i]);
        // shuffled ramp: (perm(e) - n/2) / 256 with a seeded Fisher-Yates
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!perm) {
            return false;
        }
        for (int64_t e = 0; e < n; e++) {
            perm[e] = e;
        }
        for (int64_t e = n - 1; e > 0; e--) {
            int64_t j = (int64_t)(dl_rng_uniform(77 + i, (uint64_t)e) * (double)(e + 1));
            j = j > e ? e : j;
            int64_t t = perm[e];
            perm[e] = perm[j];
            perm[j] = t;
        }
        // step: a power of two with n * step about 4 (so values stay O(1) and exact)
        double step = 1.0;
        while ((double)n * step > 4.0) {
            step /= 2;
        }
        for (int64_t e = 0; e < n; e++) {
            dl_tensor_set(&ins[i], e, ((double)(perm[e] - n / 2) + 0.5) * step);
        }
        free(perm);
    }
    return true;
}

static void free_tensors(dl_tensor *t, size_t n) {
    for (size_t i = 0; t && i < n; i++) {
        dl_tensor_free(&t[i]);
    }
    free(t);
}

// Index of input `name` in m (or -1).
static long input_index(const dl_ir_module *m, const char *name) {
    for (size_t i = 0; i < m->inputs.len; i++) {
        if (strcmp(m->inputs.data[i]->name, name) == 0) {
            return (long)i;
        }
    }
    return -1;
}

// Checks gradient output `grad_out` of `grad_text` (inputs named as in the forward) against
// finite differences of the loss of `fwd_body` with respect to input `var` (declared as
// `var_decl`). fwd_body uses `$` as a per-copy suffix: its loss is `L$` and it reads the
// perturbed variable as `<var>$`. `decls` declares every other input, shared by both modules.
static bool fd_check(const char *decls, const char *var, const char *var_type, const char *fwd_body,
                     const char *grad_text, size_t grad_out) {
    bool ok = false;
    dl_diags *d = NULL;
    dl_ir_module *mf = NULL, *mg = NULL;
    dl_tensor *fin = NULL, *gin = NULL, *gout = NULL;
    char *fwd = malloc(16384);
    if (!fwd || dl_diags_create(&d) != DL_OK) {
        free(fwd);
        return false;
    }
    // The finite-difference module: two copies of the body, suffixes _a (+h) and _b (-h).
    int len = snprintf(fwd, 16384,
                       "model fd\n%sinput %s : float%s\ninput dir : float%s\n"
                       "const h : float[] = %.17g\nhd = Mul (dir, h)\n%s_a = Add (%s, hd)\n"
                       "%s_b = Sub (%s, hd)\n",
                       decls, var, var_type, var_type, FD_H, var, var, var, var);
    for (int copy = 0; copy < 2; copy++) {
        for (const char *p = fwd_body; *p && len < 16000; p++) {
            if (*p == '$') {
                len += snprintf(fwd + len, 16384 - (size_t)len, "%s", copy ? "_b" : "_a");
            } else {
                fwd[len++] = *p;
            }
        }
    }
    snprintf(fwd + len, 16384 - (size_t)len, "D = Sub (L_a, L_b)\noutput D\n");
    char gtext[4096];
    snprintf(gtext, sizeof gtext, "model g\n%sinput %s : float%s\n%s", decls, var, var_type,
             grad_text);
    mf = build(fwd, d);
    mg = build(gtext, d);
    if (!mf || !mg) {
        goto out;
    }
    fin = calloc(mf->inputs.len, sizeof *fin);
    gin = calloc(mg->inputs.len, sizeof *gin);
    gout = calloc(mg->outputs.len, sizeof *gout);
    if (!fin || !gin || !gout || !alloc_inputs(mf, fin) || !alloc_inputs(mg, gin)) {
        goto out;
    }
    // Same data in both modules: inputs are matched by name (the ramp is seeded by position,
    // so copy the forward's values over).
    for (size_t i = 0; i < mg->inputs.len; i++) {
        long j = input_index(mf, mg->inputs.data[i]->name);
        if (j < 0) {
            fprintf(stderr, "grad input %s is not in the forward\n", mg->inputs.data[i]->name);
            goto out;
        }
        memcpy(gin[i].data, fin[j].data, dl_tensor_nbytes(&gin[i]));
    }
    dl_ir_eval_opts opts = {NULL, 0, false};
    if (dl_ir_eval(mg, &opts, gin, gout, d) != DL_OK || grad_out >= mg->outputs.len) {
        print_diags(d);
        goto out;
    }
    const dl_tensor *g = &gout[grad_out];
    long di = input_index(mf, "dir");
    int64_t n = dl_tensor_numel(&fin[di]);
    if (dl_tensor_numel(g) != n) {
        fprintf(stderr, "gradient has %lld elements, variable %lld\n",
                (long long)dl_tensor_numel(g), (long long)n);
        goto out;
    }
    ok = true;
    int bad = 0;
    double max_abs = 0;
    for (int64_t e = 0; e < n; e++) {
        dl_tensor_set(&fin[di], e, 1.0);
        dl_tensor D = {0};
        if (dl_ir_eval(mf, &opts, fin, &D, d) != DL_OK) {
            print_diags(d);
            ok = false;
            break;
        }
        double fd = dl_tensor_get(&D, 0) / (2 * FD_H), got = dl_tensor_get(g, e);
        dl_tensor_free(&D);
        dl_tensor_set(&fin[di], e, 0.0);
        max_abs = fmax(max_abs, fabs(fd));
        if (!(fabs(got - fd) <= 1e-5 + 1e-5 * fabs(fd))) {
            if (bad++ < 5) {
                fprintf(stderr, "  d/d%s[%lld]: op %.9g, finite difference %.9g\n", var,
                        (long long)e, got, fd);
            }
            ok = false;
        }
    }
    if (!ok) {
        fprintf(stderr, "%d of %lld gradients differ for\n%s", bad, (long long)n, gtext);
    } else if (max_abs == 0) {
        fprintf(stderr, "every gradient is zero: the check proves nothing\n%s", gtext);
        ok = false;
    }
out:
    if (mf) {
        free_tensors(fin, mf->inputs.len);
    }
    if (mg) {
        free_tensors(gin, mg->inputs.len);
        free_tensors(gout, mg->outputs.len);
    }
    dl_ir_module_destroy(mf);
    dl_ir_module_destroy(mg);
    dl_diags_destroy(d);
    free(fwd);
    return ok;
}

// d/dw of ReduceSum(Conv(x, w) * r) == ConvGradWeight(r, x).
static bool conv_case(const char *x_t, const char *w_t, const char *r_t, const char *attrs,
                      const char *cgw_attrs) {
    char decls[512], body[1024], grad[1024];
    snprintf(decls, sizeof decls, "input x : float%s\ninput r : float%s\n", x_t, r_t);
    snprintf(body, sizeof body, "y$ = Conv <%s> (x, w$)\nm$ = Mul (y$, r)\nL$ = ReduceSum (m$)\n",
             attrs);
    snprintf(grad, sizeof grad, "dw = ConvGradWeight <%s> (r, x)\noutput dw\n", cgw_attrs);
    return fd_check(decls, "w", w_t, body, grad, 0);
}

DL_TEST(eval_grad_nn_conv_weight) {
    DL_CHECK(conv_case("[2, 3, 6, 7]", "[4, 3, 3, 3]", "[2, 4, 4, 5]", "group = 1",
                       "kernel_shape = [3, 3]"));
    DL_CHECK(conv_case("[2, 3, 6, 7]", "[4, 3, 3, 3]", "[2, 4, 6, 7]", "pads = [1, 1, 1, 1]",
                       "kernel_shape = [3, 3], pads = [1, 1, 1, 1]"));
    DL_CHECK(conv_case("[1, 2, 7, 9]", "[3, 2, 3, 2]", "[1, 3, 3, 5]",
                       "strides = [2, 2], pads = [1, 0, 0, 1]",
                       "kernel_shape = [3, 2], strides = [2, 2], pads = [1, 0, 0, 1]"));
    DL_CHECK(conv_case("[1, 2, 8, 9]", "[2, 2, 3, 3]", "[1, 2, 4, 5]", "dilations = [2, 2]",
                       "kernel_shape = [3, 3], dilations = [2, 2]"));
    DL_CHECK(conv_case("[2, 4, 5, 6]", "[6, 2, 3, 3]", "[2, 6, 5, 6]",
                       "group = 2, auto_pad = \"SAME_UPPER\"",
                       "kernel_shape = [3, 3], group = 2, auto_pad = \"SAME_UPPER\""));
    DL_CHECK(conv_case("[1, 2, 7, 8]", "[2, 2, 2, 4]", "[1, 2, 4, 4]",
                       "auto_pad = \"SAME_LOWER\", strides = [2, 2]",
                       "kernel_shape = [2, 4], auto_pad = \"SAME_LOWER\", strides = [2, 2]"));
}

// d/dx of ReduceSum(Pool(x) * r) == PoolGrad(r, x).
static bool pool_case(const char *op, const char *x_t, const char *r_t, const char *attrs) {
    char decls[512], body[1024], grad[1024];
    snprintf(decls, sizeof decls, "input r : float%s\n", r_t);
    snprintf(body, sizeof body, "y$ = %s <%s> (x$)\nm$ = Mul (y$, r)\nL$ = ReduceSum (m$)\n", op,
             attrs);
    snprintf(grad, sizeof grad, "dx = %sGrad <%s> (r, x)\noutput dx\n", op, attrs);
    return fd_check(decls, "x", x_t, body, grad, 0);
}

DL_TEST(eval_grad_nn_max_pool) {
    const char *mp = "MaxPool";
    DL_CHECK(pool_case(mp, "[2, 2, 6, 6]", "[2, 2, 3, 3]",
                       "kernel_shape = [2, 2], strides = [2, "
                       "2]"));
    DL_CHECK(pool_case(mp, "[1, 2, 7, 8]", "[1, 2, 5, 6]", "kernel_shape = [3, 3]"));
    DL_CHECK(pool_case(mp, "[1, 2, 7, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(pool_case(mp, "[1, 2, 7, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 2], strides = [2, 2], auto_pad = \"SAME_UPPER\""));
    DL_CHECK(pool_case(mp, "[1, 2, 8, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1"));
    DL_CHECK(pool_case(mp, "[1, 2, 9, 9]", "[1, 2, 3, 3]",
                       "kernel_shape = [2, 2], strides = [3, 3], dilations = [2, 2]"));
    DL_CHECK(pool_case(mp, "[2, 2, 11]", "[2, 2, 6]",
                       "kernel_shape = [3], strides = [2], pads = [1, 1]"));
    DL_CHECK(pool_case(mp, "[1, 2, 4, 4, 5]", "[1, 2, 2, 2, 2]",
                       "kernel_shape = [2, 2, 3], strides = [2, 2, 2]"));
}

DL_TEST(eval_grad_nn_average_pool) {
    const char *ap = "AveragePool";
    DL_CHECK(pool_case(ap, "[2, 2, 6, 6]", "[2, 2, 3, 3]",
                       "kernel_shape = [2, 2], strides = [2, "
                       "2]"));
    DL_CHECK(pool_case(ap, "[1, 2, 7, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
    DL_CHECK(pool_case(ap, "[1, 2, 7, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
                       "count_include_pad = 1"));
    DL_CHECK(pool_case(ap, "[1, 2, 7, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 2], strides = [2, 2], auto_pad = \"SAME_LOWER\", "
                       "count_include_pad = 1"));
    DL_CHECK(pool_case(ap, "[1, 2, 8, 8]", "[1, 2, 4, 4]",
                       "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1"));
    DL_CHECK(pool_case(ap, "[1, 2, 8, 8]", "[1, 2, 5, 5]",
                       "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
                       "ceil_mode = 1, count_include_pad = 1"));
    DL_CHECK(pool_case(ap, "[2, 2, 11]", "[2, 2, 6]",
                       "kernel_shape = [3], strides = [2], pads = [1, 1], count_include_pad = 1"));
    DL_CHECK(pool_case(ap, "[1, 2, 4, 4, 5]", "[1, 2, 2, 2, 3]",
                       "kernel_shape = [2, 2, 3], strides = [2, 2, 2], pads = [0, 0, 1, 0, 0, "
                       "1]"));
}

// BatchNormalization in training mode: d/dx, d/dscale, d/dB of ReduceSum(BN(x) * r) against
// BatchNormalizationGrad(r, x, scale) outputs 0, 1, 2.
static bool bn_case(const char *x_t, int ch, const char *var, size_t out) {
    char decls[512], body[1024], grad[1024], ct[32];
    snprintf(ct, sizeof ct, "[%d]", ch);
    const char *names[3] = {"x", "s", "b"};
    char vx[8], vs[8], vb[8];
    snprintf(vx, sizeof vx, "x%s", strcmp(var, "x") == 0 ? "$" : "");
    snprintf(vs, sizeof vs, "s%s", strcmp(var, "s") == 0 ? "$" : "");
    snprintf(vb, sizeof vb, "b%s", strcmp(var, "b") == 0 ? "$" : "");
    int n = snprintf(decls, sizeof decls,
                     "input r : float%s\ninput m : float%s\ninput v : float%s\n", x_t, ct, ct);
    for (int i = 0; i < 3; i++) {
        if (strcmp(var, names[i]) != 0) {
            n += snprintf(decls + n, sizeof decls - (size_t)n, "input %s : float%s\n", names[i],
                          i == 0 ? x_t : ct);
        }
    }
    snprintf(body, sizeof body,
             "y$ = BatchNormalization <training_mode = 1, epsilon = 0.01> (%s, %s, %s, m, v)\n"
             "p$ = Mul (y$, r)\nL$ = ReduceSum (p$)\n",
             vx, vs, vb);
    snprintf(grad, sizeof grad,
             "dx, ds, db = BatchNormalizationGrad <epsilon = 0.01> (r, x, s)\n"
             "output dx\noutput ds\noutput db\n");
    const char *vt = strcmp(var, "x") == 0 ? x_t : ct;
    return fd_check(decls, var, vt, body, grad, out);
}

DL_TEST(eval_grad_nn_batch_norm) {
    // The grad module needs every one of x, s, b declared: b only in the forward, so the
    // gradient text declares its inputs through decls (b is unused by the grad op).
    static const struct {
        const char *x_t;
        int ch;
    } cases[] = {{"[3, 2, 4]", 2}, {"[2, 3, 2, 3]", 3}, {"[5, 2]", 2}};
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        DL_CHECK(bn_case(cases[i].x_t, cases[i].ch, "x", 0));
        DL_CHECK(bn_case(cases[i].x_t, cases[i].ch, "s", 1));
        DL_CHECK(bn_case(cases[i].x_t, cases[i].ch, "b", 2));
    }
}

// The shape rules reject a dy that is not the forward's output shape, naming the shapes.
DL_TEST(eval_grad_nn_shape_errors) {
    static const char *const bad[] = {
        "model e\ninput dy : float[1, 2, 5, 5]\ninput x : float[1, 3, 5, 5]\n"
        "w = ConvGradWeight <kernel_shape = [3, 3]> (dy, x)\noutput w\n",
        "model e\ninput dy : float[1, 3, 2, 2]\ninput x : float[1, 3, 5, 5]\n"
        "w = MaxPoolGrad <kernel_shape = [2, 2]> (dy, x)\noutput w\n",
        "model e\ninput dy : float[1, 3, 5, 5]\ninput x : float[1, 3, 5, 5]\ninput s : float[2]\n"
        "w = BatchNormalizationGrad (dy, x, s)\noutput w\n",
        "model e\ninput dy : float[1, 4, 5, 5]\ninput x : float[1, 3, 5, 5]\n"
        "w = ConvGradWeight <kernel_shape = [3, 3], group = 2> (dy, x)\noutput w\n",
    };
    static const char *const want[] = {"dy must have the Conv output shape [1, 2, 3, 3]",
                                       "dy must have the MaxPool output shape [1, 3, 4, 4]",
                                       "scale must have shape [3]", "group 2 does not divide"};
    for (size_t i = 0; i < DL_ARRAY_LEN(bad); i++) {
        dl_diags *d = NULL;
        dl_ir_module *m = NULL;
        DL_CHECK_OK(dl_diags_create(&d));
        DL_CHECK_OK(dl_fe_parse("e.dlg", bad[i], strlen(bad[i]), d, &m));
        dl_status st = dl_pass_shape(m, d);
        char *txt = NULL;
        DL_CHECK_OK(dl_diags_render(d, &txt));
        bool found = txt && strstr(txt, want[i]) != NULL;
        if (!found) {
            fprintf(stderr, "expected '%s' in:\n%s\n", want[i], txt ? txt : "");
        }
        free(txt);
        dl_ir_module_destroy(m);
        dl_diags_destroy(d);
        DL_CHECK(st != DL_OK);
        DL_CHECK(found);
    }
}

DL_TEST_MAIN()
