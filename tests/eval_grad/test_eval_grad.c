// tests/eval_grad/test_eval_grad.c — the evaluator kernels of the internal gradient ops of
// family A (ir/eval_grad.c) against central finite differences of the forward ops they
// differentiate, all through the reference evaluator in double.
//
// Each case is a .dlg text with a scalar `loss` built from the forward op (usually
// loss = sum(dy * F(x)), so d loss / dx = Grad(dy, x)) and the gradient node(s) under test. The
// test parses it, runs the shape pass, and evaluates the nodes itself through dl_ir__eval_node
// on double tensors (the public dl_ir_eval hands back float32, too coarse for h = 1e-6). For
// every element of the input differentiated, (loss(x + h) - loss(x - h)) / 2h must match the
// gradient within 1e-6 + 1e-5 |fd|. Inputs are deterministic pseudo-random: floats in [-2, 2),
// or [0.1, 2.1) for names starting with pos_; ints in [0, int_hi).
#include "dl_base.h"
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_pass.h"
#include "dl_test.h"
#include "eval_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H    1e-6
#define FD_ATOL 1e-6
#define FD_RTOL 1e-5

typedef struct fd_model {
    dl_ir_module *m;
    dl_diags *d;
    dl_ir__et *vals; // by value id; inputs filled once, node outputs per evaluation
    bool quiet;      // keep evaluation errors in the sink instead of printing them
} fd_model;

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static void fd_free_nodes(fd_model *fm) {
    for (size_t i = 0; i < fm->m->nodes.len; i++) {
        const dl_ir_node *n = fm->m->nodes.data[i];
        for (size_t k = 0; k < n->n_outputs; k++) {
            free(fm->vals[n->outputs[k]->id].d);
            fm->vals[n->outputs[k]->id].d = NULL;
        }
    }
}

static void fd_fini(fd_model *fm) {
    if (fm->vals) {
        for (size_t i = 0; i < fm->m->values.len; i++) {
            free(fm->vals[i].d);
        }
        free(fm->vals);
    }
    dl_ir_module_destroy(fm->m);
    dl_diags_destroy(fm->d);
}

static bool et_init(dl_ir__et *t, const dl_ir_type *ty) {
    t->dtype = ty->dtype;
    t->rank = ty->rank;
    t->n = 1;
    for (int32_t i = 0; i < ty->rank; i++) {
        t->dims[i] = ty->dims[i].value;
        t->n *= t->dims[i];
    }
    t->d = calloc((size_t)(t->n ? t->n : 1), sizeof(double));
    return t->d != NULL;
}

// Parses, infers shapes and fills the inputs.
static bool fd_init(fd_model *fm, const char *text, int64_t int_hi) {
    memset(fm, 0, sizeof *fm);
    if (dl_diags_create(&fm->d) != DL_OK) {
        return false;
    }
    if (dl_fe_parse("fd.dlg", text, strlen(text), fm->d, &fm->m) != DL_OK ||
        dl_pass_shape(fm->m, fm->d) != DL_OK) {
        fprintf(stderr, "fd: model does not check:\n%s\n", text);
        print_diags(fm->d);
        return false;
    }
    fm->vals = calloc(fm->m->values.len, sizeof(dl_ir__et));
    if (!fm->vals) {
        return false;
    }
    for (size_t i = 0; i < fm->m->inputs.len; i++) {
        const dl_ir_value *v = fm->m->inputs.data[i];
        dl_ir__et *t = &fm->vals[v->id];
        if (!et_init(t, &v->type)) {
            return false;
        }
        bool pos = strncmp(v->name, "pos_", 4) == 0;
        for (int64_t k = 0; k < t->n; k++) {
            double u = dl_rng_uniform(1000 + i, (uint64_t)k);
            if (dl_dtype_is_float(t->dtype)) {
                t->d[k] = pos ? 0.1 + 2.0 * u : -2.0 + 4.0 * u;
            } else {
                t->d[k] = floor(u * (double)int_hi);
            }
        }
    }
    for (size_t i = 0; i < fm->m->consts.len; i++) {
        const dl_ir_value *v = fm->m->consts.data[i];
        dl_ir__et *t = &fm->vals[v->id];
        if (!et_init(t, &v->type)) {
            return false;
        }
        const dl_ir_literal *l = v->lit;
        for (int64_t k = 0; k < t->n; k++) {
            int64_t j = l->is_splat ? 0 : k;
            t->d[k] = l->f ? l->f[j] : (double)l->i[j];
        }
    }
    return true;
}

// Evaluates every node (in double, no rounding: the tests use float and int64 only).
static bool fd_eval(fd_model *fm) {
    fd_free_nodes(fm);
    for (size_t i = 0; i < fm->m->nodes.len; i++) {
        const dl_ir_node *n = fm->m->nodes.data[i];
        dl_ir__et *ins[8] = {0};
        dl_ir__et outs[4];
        memset(outs, 0, sizeof outs);
        for (size_t k = 0; k < n->n_inputs; k++) {
            ins[k] = n->inputs[k] ? &fm->vals[n->inputs[k]->id] : NULL;
        }
        for (size_t k = 0; k < n->n_outputs; k++) {
            if (!et_init(&outs[k], &n->outputs[k]->type)) {
                return false;
            }
        }
        dl_ir__ectx cx = {fm->m, n, fm->d, false};
        dl_status st = dl_ir__eval_node(&cx, ins, n->n_inputs, outs, n->n_outputs);
        for (size_t k = 0; k < n->n_outputs; k++) {
            fm->vals[n->outputs[k]->id] = outs[k];
        }
        if (st != DL_OK) {
            if (!fm->quiet) {
                print_diags(fm->d);
            }
            return false;
        }
    }
    return true;
}

static dl_ir__et *fd_val(fd_model *fm, const char *name) {
    dl_ir_value *v = dl_ir_module_find(fm->m, name);
    return v ? &fm->vals[v->id] : NULL;
}

// Checks d loss / d `wrt` (an input) against the values of `grad` for every element.
static bool fd_check_one(fd_model *fm, const char *text, const char *wrt, const char *grad) {
    if (!fd_eval(fm)) {
        return false;
    }
    dl_ir__et *x = fd_val(fm, wrt), *g = fd_val(fm, grad), *loss = fd_val(fm, "loss");
    if (!x || !g || !loss || loss->n != 1 || g->n != x->n) {
        fprintf(stderr, "fd: bad names or shapes (%s, %s, loss)\n%s\n", wrt, grad, text);
        return false;
    }
    double *gv = malloc(sizeof(double) * (size_t)(g->n ? g->n : 1));
    if (!gv) {
        return false;
    }
    memcpy(gv, g->d, sizeof(double) * (size_t)g->n);
    int bad = 0;
    for (int64_t i = 0; i < x->n; i++) {
        double x0 = x->d[i];
        x->d[i] = x0 + FD_H;
        bool ok = fd_eval(fm);
        double lp = ok ? fd_val(fm, "loss")->d[0] : NAN;
        x->d[i] = x0 - FD_H;
        ok = ok && fd_eval(fm);
        double lm = ok ? fd_val(fm, "loss")->d[0] : NAN;
        x->d[i] = x0;
        double fd = (lp - lm) / (2 * FD_H);
        if (!(fabs(gv[i] - fd) <= FD_ATOL + FD_RTOL * fabs(fd))) {
            if (bad == 0) {
                fprintf(stderr, "fd: d loss / d %s differs from %s:\n%s\n", wrt, grad, text);
            }
            if (bad < 5) {
                fprintf(stderr, "  [%lld] grad %.12g, finite difference %.12g\n", (long long)i,
                        gv[i], fd);
            }
            bad++;
        }
    }
    free(gv);
    return bad == 0;
}

// `pairs`: "wrt:grad" entries separated by spaces.
static bool fd_check(const char *text, const char *pairs, int64_t int_hi) {
    fd_model fm;
    bool ok = fd_init(&fm, text, int_hi);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", pairs);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); ok && tok;
         tok = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) {
            ok = false;
            break;
        }
        *colon = 0;
        ok = fd_check_one(&fm, text, tok, colon + 1);
    }
    fd_fini(&fm);
    return ok;
}

// ---------------------------------------------------------------------------------------------
// UnaryGrad

// F<attrs>(x) and UnaryGrad<op = "F", grad_attrs>(dy, x); x named `xname` of shape `shape`.
static bool check_unary(const char *op, const char *attrs, const char *gattrs, const char *xname,
                        const char *shape) {
    char text[1024];
    snprintf(text, sizeof text,
             "model m\ninput %s : float%s\ninput dy : float%s\n"
             "y = %s%s (%s)\np = Mul (dy, y)\nloss = ReduceSum <keepdims = 0> (p)\n"
             "g = UnaryGrad <op = \"%s\"%s> (dy, %s)\noutput loss\noutput g\n",
             xname, shape, shape, op, attrs, xname, op, gattrs, xname);
    char pairs[64];
    snprintf(pairs, sizeof pairs, "%s:g", xname);
    return fd_check(text, pairs, 3);
}

// Ops whose derivative is only real on positive inputs (the pos_ prefix draws those).
static bool positive_domain(const char *op) {
    return strcmp(op, "Log") == 0 || strcmp(op, "Sqrt") == 0 || strcmp(op, "Reciprocal") == 0;
}

// Every UnaryGrad sub-op of the op table, so a new one is checked as soon as its row exists.
DL_TEST(grad_fd_unary) {
    size_t n_ops = 0;
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        if (!dl_ir_op_has_unary_grad((dl_ir_op)i)) {
            continue;
        }
        const char *op = dl_ir_op_get_info((dl_ir_op)i)->name;
        if (positive_domain(op)) {
            DL_CHECK(check_unary(op, "", "", "pos_x", "[2, 3, 2]"));
        } else {
            DL_CHECK(check_unary(op, "", "", "x", "[3, 5]"));
        }
        n_ops++;
    }
    DL_CHECK(n_ops >= 12);
    DL_CHECK(check_unary("LeakyRelu", "", "", "x", "[7]"));
    DL_CHECK(check_unary("LeakyRelu", " <alpha = 0.3>", ", alpha = 0.3", "x", "[4, 3]"));
    DL_CHECK(check_unary("Gelu", " <approximate = \"tanh\">", ", approximate = \"tanh\"", "x",
                         "[4, 5]"));
    DL_CHECK(
        check_unary("Gelu", " <approximate = \"none\">", ", approximate = \"none\"", "x", "[11]"));
}

// ---------------------------------------------------------------------------------------------
// Loss gradients

// op<attrs>(x, lab[, pos_w]) -> l; loss = sum(dl * l) (dl : `dlshape`); grad wrt x.
static bool check_loss(const char *op, const char *attrs, const char *xshape, const char *lshape,
                       const char *wshape, const char *dlshape, int64_t int_hi) {
    char text[1024], win[96] = "", warg[16] = "";
    if (wshape) {
        snprintf(win, sizeof win, "input pos_w : float%s\n", wshape);
        snprintf(warg, sizeof warg, ", pos_w");
    }
    snprintf(text, sizeof text,
             "model m\ninput x : float%s\ninput lab : int64%s\n%sinput dl : float%s\n"
             "l = %s%s (x, lab%s)\np = Mul (dl, l)\nloss = ReduceSum <keepdims = 0> (p)\n"
             "g = %sGrad%s (dl, x, lab%s)\noutput loss\noutput g\n",
             xshape, lshape, win, dlshape, op, attrs, warg, op, attrs, warg);
    return fd_check(text, "x:g", int_hi);
}

DL_TEST(grad_fd_losses) {
    static const char *const ops[] = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};
    for (size_t o = 0; o < 2; o++) {
        DL_CHECK(check_loss(ops[o], " <reduction = \"mean\">", "[5, 4]", "[5]", NULL, "[]", 4));
        DL_CHECK(check_loss(ops[o], " <reduction = \"sum\">", "[5, 4]", "[5]", "[4]", "[]", 4));
        DL_CHECK(check_loss(ops[o], " <reduction = \"none\">", "[3, 4, 2]", "[3, 2]", "[4]",
                            "[3, 2]", 4));
        // Weighted mean with ignore_index (the divisor counts only non-ignored weights).
        DL_CHECK(check_loss(ops[o], " <reduction = \"mean\", ignore_index = 1>", "[4, 3, 3]",
                            "[4, 3]", "[3]", "[]", 3));
        DL_CHECK(check_loss(ops[o], " <reduction = \"none\", ignore_index = 0>", "[6, 3]", "[6]",
                            NULL, "[6]", 3));
        // Default reduction (mean), rank 4.
        DL_CHECK(check_loss(ops[o], "", "[2, 3, 2, 2]", "[2, 2, 2]", NULL, "[]", 3));
    }
}

// ---------------------------------------------------------------------------------------------
// LayerNormalizationGrad

static bool check_layer_norm(const char *xshape, const char *sshape, int axis, int n_out) {
    char text[1024];
    const char *outs = n_out == 1 ? "gx" : n_out == 2 ? "gx, gs" : "gx, gs, gb";
    snprintf(text, sizeof text,
             "model m\ninput x : float%s\ninput s : float%s\ninput b : float%s\n"
             "input dy : float%s\n"
             "y = LayerNormalization <axis = %d, epsilon = 0.001> (x, s, b)\n"
             "p = Mul (dy, y)\nloss = ReduceSum <keepdims = 0> (p)\n"
             "%s = LayerNormalizationGrad <axis = %d, epsilon = 0.001> (dy, x, s)\n"
             "output loss\noutput gx\n",
             xshape, sshape, sshape, xshape, axis, outs, axis);
    const char *pairs = n_out == 1 ? "x:gx" : n_out == 2 ? "x:gx s:gs" : "x:gx s:gs b:gb";
    return fd_check(text, pairs, 3);
}

DL_TEST(grad_fd_layer_norm) {
    DL_CHECK(check_layer_norm("[3, 5]", "[5]", -1, 3));
    DL_CHECK(check_layer_norm("[2, 3, 4]", "[3, 4]", 1, 3));
    DL_CHECK(check_layer_norm("[2, 2, 3]", "[3]", 2, 2));
    DL_CHECK(check_layer_norm("[4, 6]", "[6]", -1, 1));
    DL_CHECK(check_layer_norm("[2, 3]", "[2, 3]", 0, 3));
}

// ---------------------------------------------------------------------------------------------
// GatherGrad, SliceGrad, PadGrad

DL_TEST(grad_fd_gather) {
    // Repeated and negative indices, axes 0, 1 and -1, 2-D indices.
    static const char *const cases[][4] = {
        {"[5, 3]", "int64[4] = [0, -1, 2, 0]", "0", "[4, 3]"},
        {"[2, 4, 3]", "int64[2, 2] = [[3, 1], [-4, 3]]", "1", "[2, 2, 2, 3]"},
        {"[3, 4]", "int64[3] = [1, 1, -1]", "-1", "[3, 3]"},
        {"[6]", "int64[] = 2", "0", "[]"},
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "model m\ninput x : float%s\nconst idx : %s\ninput dy : float%s\n"
                 "y = Gather <axis = %s> (x, idx)\np = Mul (dy, y)\n"
                 "loss = ReduceSum <keepdims = 0> (p)\n"
                 "g = GatherGrad <axis = %s> (dy, idx, x)\noutput loss\noutput g\n",
                 cases[i][0], cases[i][1], cases[i][3], cases[i][2], cases[i][2]);
        DL_CHECK(fd_check(text, "x:g", 3));
    }
}

DL_TEST(grad_fd_slice) {
    static const char *const cases[][2] = {
        {"[6, 5]", "starts = [1, 0], ends = [5, 5], steps = [2, 1]"},
        {"[6, 5]", "starts = [-1], ends = [-7], axes = [0], steps = [-2]"},
        {"[3, 4, 5]", "starts = [4, 1], ends = [0, 100], axes = [-1, 1], steps = [-1, 2]"},
        {"[2, 3, 2, 3]", "starts = [1], ends = [3], axes = [1]"},
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "model m\ninput x : float%s\n"
                 "y = Slice <%s> (x)\ndy = Exp (y)\np = Mul (dy, y)\n"
                 "loss = ReduceSum <keepdims = 0> (p)\n"
                 "g = SliceGrad <%s> (dy, x)\noutput loss\noutput g\n",
                 cases[i][0], cases[i][1], cases[i][1]);
        // loss = sum(y e^y) is not linear, so dy must be a separate input: rebuild with one.
        fd_model fm;
        bool ok = fd_init(&fm, text, 3);
        char yshape[64] = "";
        if (ok) {
            dl_ir_type_format_shape(&dl_ir_module_find(fm.m, "y")->type, yshape, sizeof yshape);
        }
        fd_fini(&fm);
        DL_CHECK(ok);
        snprintf(text, sizeof text,
                 "model m\ninput x : float%s\ninput dy : float%s\n"
                 "y = Slice <%s> (x)\np = Mul (dy, y)\nloss = ReduceSum <keepdims = 0> (p)\n"
                 "g = SliceGrad <%s> (dy, x)\noutput loss\noutput g\n",
                 cases[i][0], yshape, cases[i][1], cases[i][1]);
        DL_CHECK(fd_check(text, "x:g", 3));
    }
}

DL_TEST(grad_fd_pad) {
    static const char *const modes[] = {"constant", "edge", "reflect", "wrap"};
    // x shape, pads (begin..., end...), padded shape.
    static const char *const cases[][3] = {
        {"[3, 4]", "[1, 2, 2, 3]", "[6, 9]"},
        {"[2, 3, 4]", "[0, 1, 2, 1, 0, 3]", "[3, 4, 9]"},
        {"[4, 5]", "[-1, 2, 1, -2]", "[4, 5]"},
        {"[1, 3]", "[2, 0, 1, 5]", "[4, 8]"},
    };
    for (size_t m = 0; m < DL_ARRAY_LEN(modes); m++) {
        for (size_t i = 0; i < DL_ARRAY_LEN(cases); i++) {
            char text[1024];
            snprintf(text, sizeof text,
                     "model m\ninput x : float%s\ninput dy : float%s\n"
                     "y = Pad <mode = \"%s\", pads = %s, value = 0.5> (x)\np = Mul (dy, y)\n"
                     "loss = ReduceSum <keepdims = 0> (p)\n"
                     "g = PadGrad <mode = \"%s\", pads = %s, value = 0.5> (dy, x)\n"
                     "output loss\noutput g\n",
                     cases[i][0], cases[i][2], modes[m], cases[i][1], modes[m], cases[i][1]);
            DL_CHECK(fd_check(text, "x:g", 3));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Data errors and shape-rule messages

// Returns the first diagnostic of parsing + shape inference + evaluation ("" if none).
static void first_error(const char *text, char *msg, size_t size) {
    fd_model fm;
    msg[0] = 0;
    memset(&fm, 0, sizeof fm);
    if (dl_diags_create(&fm.d) != DL_OK) {
        return;
    }
    bool ok = dl_fe_parse("e.dlg", text, strlen(text), fm.d, &fm.m) == DL_OK &&
              dl_pass_shape(fm.m, fm.d) == DL_OK;
    if (ok) {
        dl_diags_destroy(fm.d);
        dl_ir_module_destroy(fm.m);
        ok = fd_init(&fm, text, 9);
        fm.quiet = true;
        ok = ok && fd_eval(&fm);
    }
    char *s = NULL;
    if (dl_diags_render(fm.d, &s) == DL_OK && s) {
        snprintf(msg, size, "%s", s);
    }
    free(s);
    fd_fini(&fm);
}

DL_TEST(grad_errors) {
    char msg[1024];
    // Shape rules.
    first_error("model m\ninput x : float[3]\ninput dy : float[4]\n"
                "g = UnaryGrad <op = \"Relu\"> (dy, x)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "dy must have shape [3], got [4]") != NULL);
    first_error("model m\ninput x : int64[3]\ninput dy : int64[3]\n"
                "g = UnaryGrad <op = \"Relu\"> (dy, x)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "x must be a float type") != NULL);
    first_error("model m\ninput x : float[2, 3]\ninput s : float[1, 3]\ninput dy : float[2, 3]\n"
                "g = LayerNormalizationGrad (dy, x, s)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "broadcast scales are not supported") != NULL);
    first_error("model m\ninput x : float[2, 3]\ninput lab : int64[2]\ninput dl : float[2]\n"
                "g = SoftmaxCrossEntropyLossGrad (dl, x, lab)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "dloss must be a scalar for reduction 'mean'") != NULL);
    first_error("model m\ninput x : float[5, 3]\ninput dy : float[2, 3]\n"
                "g = SliceGrad <starts = [1], ends = [4]> (dy, x)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "dy must have shape [3, 3], got [2, 3]") != NULL);
    first_error("model m\ninput x : float[2]\ninput dy : float[5]\n"
                "g = PadGrad <pads = [1, 1]> (dy, x)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "dy must have shape [4], got [5]") != NULL);
    // Data errors: a label / an index out of range, as the forward ops report them.
    first_error("model m\ninput x : float[4, 3]\ninput lab : int64[4]\ninput dl : float[]\n"
                "g = NegativeLogLikelihoodLossGrad (dl, x, lab)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "out of range for 3 classes") != NULL);
    first_error("model m\ninput x : float[3, 2]\nconst idx : int64[2] = [0, 3]\n"
                "input dy : float[2, 2]\ng = GatherGrad (dy, idx, x)\noutput g\n",
                msg, sizeof msg);
    DL_CHECK(strstr(msg, "index 3 is out of range for axis 0 of size 3") != NULL);
}

DL_TEST_MAIN()
