// tests/precision/test_precision.c — the mixed-precision pass (passes/precision.c): the rewritten
// module's structure (every product on P inputs, a Cast back per result, valid order, the forward
// region closed), the reference evaluator of the rewritten module against its compiled
// artifact, and compiled bfloat16 train steps against the float32 ones.
#include "dl_base.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dl_test.h"
#include "dlrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Gemm with a bias, a plain MatMul, both trained: forward and backward products.
#define MLP_MODEL                                                                                  \
    "model mlp\n"                                                                                  \
    "input x : float[16, 20]\n"                                                                    \
    "input y : int64[16]\n"                                                                        \
    "param w1 : float[20, 32] = glorot_uniform(seed = 1)\n"                                        \
    "param b1 : float[32] = uniform(-0.1, 0.1, seed = 5)\n"                                        \
    "param w2 : float[32, 5] = glorot_uniform(seed = 2)\n"                                         \
    "param b2 : float[5] = zeros\n"                                                                \
    "h = Gemm (x, w1, b1)\n"                                                                       \
    "a = Relu (h)\n"                                                                               \
    "z = MatMul (a, w2)\n"                                                                         \
    "logits = Add (z, b2)\n"                                                                       \
    "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (logits, y)\n"                          \
    "output logits\n"                                                                              \
    "output loss\n"                                                                                \
    "train loss {\n"                                                                               \
    "  optimizer = adam <lr = 0.001>\n"                                                            \
    "  precision = "

// Two convolutions: the second one's input gradient is a ConvTranspose, both weight gradients
// are ConvGradWeight.
#define CNN_MODEL                                                                                  \
    "model cnn\n"                                                                                  \
    "input x : float[2, 3, 8, 8]\n"                                                                \
    "input y : int64[2]\n"                                                                         \
    "param k1 : float[4, 3, 3, 3] = he_normal(seed = 1)\n"                                         \
    "param c1 : float[4] = uniform(-0.1, 0.1, seed = 3)\n"                                         \
    "param k2 : float[4, 4, 3, 3] = he_normal(seed = 2)\n"                                         \
    "param w : float[64, 5] = glorot_uniform(seed = 4)\n"                                          \
    "t1 = Conv (x, k1, c1)\n"                                                                      \
    "r1 = Relu (t1)\n"                                                                             \
    "t2 = Conv <pads = [0, 0, 0, 0]> (r1, k2)\n"                                                   \
    "f = Reshape <shape = [2, 64]> (t2)\n"                                                         \
    "logits = Gemm (f, w)\n"                                                                       \
    "loss = SoftmaxCrossEntropyLoss (logits, y)\n"                                                 \
    "output logits\n"                                                                              \
    "output loss\n"                                                                                \
    "train loss {\n"                                                                               \
    "  optimizer = sgd <lr = 0.01, momentum = 0.9>\n"                                              \
    "  precision = "

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static bool is_product(dl_ir_op op) {
    return op == DL_IR_OP_MATMUL || op == DL_IR_OP_GEMM || op == DL_IR_OP_CONV ||
           op == DL_IR_OP_CONV_TRANSPOSE || op == DL_IR_OP_CONV_GRAD_WEIGHT;
}

// Parses `head` + the precision name + the end of the train block, infers shapes, runs autodiff and
// the precision pass as the driver does (the pass with the train block's precision), verifying in
// between. *out_n_ops gets the number of rewritten ops. NULL on failure (diagnostics printed).
static dl_ir_module *load(const char *head, const char *precision, size_t *out_n_ops) {
    char text[4096];
    snprintf(text, sizeof text, "%s%s\n}\n", head, precision);
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    dl_ir_module *m = NULL;
    size_t n_ops = 0;
    bool ok = dl_fe_parse("t.dlg", text, strlen(text), d, &m) == DL_OK &&
              dl_pass_shape(m, d) == DL_OK && dl_ir_verify(m, d) == DL_OK &&
              dl_pass_autodiff(m, d) == DL_OK && dl_ir_verify(m, d) == DL_OK &&
              dl_pass_precision(m, m->train->precision, d, &n_ops) == DL_OK &&
              dl_ir_verify(m, d) == DL_OK;
    print_diags(d);
    dl_diags_destroy(d);
    if (!ok) {
        fprintf(stderr, "cannot prepare the model:\n%s\n", text);
        dl_ir_module_destroy(m);
        return NULL;
    }
    if (out_n_ops) {
        *out_n_ops = n_ops;
    }
    return m;
}

static dlrt_model *compile(const dl_ir_module *m) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    uint8_t *art = NULL;
    size_t len = 0;
    dlrt_model *rm = NULL;
    if (dl_cg_compile(m, NULL, d, &art, &len) != DL_OK) {
        fprintf(stderr, "compile failed\n");
    } else if (dlrt_model_load_memory(art, len, &rm) != DLRT_OK) {
        fprintf(stderr, "load failed: %s\n", dlrt_last_error());
    }
    print_diags(d);
    dl_diags_destroy(d);
    free(art);
    return rm;
}

// Deterministic inputs in m->inputs order: floats uniform in [-1, 1), int64 labels in [0, 5).
static bool make_inputs(const dl_ir_module *m, uint64_t seed, dl_tensor *ins) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_type *t = &m->inputs.data[i]->type;
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < t->rank; k++) {
            dims[k] = t->dims[k].value;
        }
        if (dl_tensor_alloc(&ins[i], t->dtype, t->rank, dims) != DL_OK) {
            return false;
        }
        for (int64_t e = 0; e < dl_tensor_numel(&ins[i]); e++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(s >> 11) / 9007199254740992.0;
            dl_tensor_set(&ins[i], e, t->dtype == DL_DT_INT64 ? floor(u * 5) : 2 * u - 1);
        }
    }
    return true;
}

static void free_tensors(dl_tensor *ts, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dl_tensor_free(&ts[i]);
    }
}

static bool set_inputs(const dl_ir_module *m, dlrt_session *s, const dl_tensor *ins) {
    for (size_t i = 0; i < m->inputs.len; i++) {
        if (dlrt_session_set_input(s, m->inputs.data[i]->name, ins[i].data,
                                   dl_tensor_nbytes(&ins[i])) != DLRT_OK) {
            fprintf(stderr, "set_input: %s\n", dlrt_last_error());
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Structure

// Checks the rewritten module; counts products per region into n_fwd_prod / n_bwd_prod and
// ConvTranspose / ConvGradWeight nodes into n_convt / n_cgw.
static bool check_structure(const dl_ir_module *m, dl_dtype p, size_t *n_fwd_prod,
                            size_t *n_bwd_prod, size_t *n_convt, size_t *n_cgw) {
    bool ok = true;
    *n_fwd_prod = *n_bwd_prod = *n_convt = *n_cgw = 0;
    for (size_t k = 0; k < m->nodes.len; k++) {
        const dl_ir_node *n = m->nodes.data[k];
        // The forward region is closed: it reads nothing the training region defines.
        for (size_t i = 0; k < m->n_fwd_nodes && i < n->n_inputs; i++) {
            const dl_ir_value *v = n->inputs[i];
            if (v && v->kind == DL_IR_VAL_NODE && v->def->id >= m->n_fwd_nodes) {
                fprintf(stderr, "forward node %zu reads training value '%s'\n", k, v->name);
                ok = false;
            }
        }
        if (!is_product(n->op)) {
            continue;
        }
        *(k < m->n_fwd_nodes ? n_fwd_prod : n_bwd_prod) += 1;
        *n_convt += n->op == DL_IR_OP_CONV_TRANSPOSE;
        *n_cgw += n->op == DL_IR_OP_CONV_GRAD_WEIGHT;
        for (size_t i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i] && n->inputs[i]->type.dtype != p) {
                fprintf(stderr, "%s node %zu: input %zu '%s' is %s\n",
                        dl_ir_op_get_info(n->op)->name, k, i, n->inputs[i]->name,
                        dl_dtype_name(n->inputs[i]->type.dtype));
                ok = false;
            }
        }
        const dl_ir_value *y = n->outputs[0];
        if (y->type.dtype != p || y->is_output) {
            fprintf(stderr, "node %zu: result '%s' is %s\n", k, y->name,
                    dl_dtype_name(y->type.dtype));
            ok = false;
        }
        // Its only reader is the next node, a Cast back to float.
        size_t n_users = 0;
        for (size_t j = 0; j < m->nodes.len; j++) {
            const dl_ir_node *u = m->nodes.data[j];
            for (size_t i = 0; i < u->n_inputs; i++) {
                n_users += u->inputs[i] == y;
            }
        }
        const dl_ir_node *c = k + 1 < m->nodes.len ? m->nodes.data[k + 1] : NULL;
        if (n_users != 1 || !c || c->op != DL_IR_OP_CAST || c->inputs[0] != y ||
            strcmp(dl_ir_node_attr_string(c, "to"), "float") != 0 ||
            c->outputs[0]->type.dtype != DL_DT_FLOAT) {
            fprintf(stderr, "node %zu: result '%s' is not cast back right after it\n", k, y->name);
            ok = false;
        }
    }
    // Params, grads, the loss and the outputs stay float32.
    for (size_t i = 0; i < m->params.len; i++) {
        const dl_ir_value *g = m->grads.data[i];
        if (m->params.data[i]->type.dtype != DL_DT_FLOAT || (g && g->type.dtype != DL_DT_FLOAT)) {
            fprintf(stderr, "param %s or its gradient is not float\n", m->params.data[i]->name);
            ok = false;
        }
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        ok &= m->outputs.data[i]->type.dtype == DL_DT_FLOAT;
    }
    ok &= m->train_loss && m->train_loss->type.dtype == DL_DT_FLOAT;
    return ok;
}

DL_TEST(precision_mlp_structure) {
    const char *names[] = {"bfloat16", "float16"};
    dl_dtype dts[] = {DL_DT_BFLOAT16, DL_DT_FLOAT16};
    for (size_t t = 0; t < 2; t++) {
        size_t n_ops = 0;
        dl_ir_module *m = load(MLP_MODEL, names[t], &n_ops);
        DL_CHECK(m != NULL);
        if (!m) {
            return;
        }
        size_t nf, nb, nct, ncg;
        DL_CHECK(check_structure(m, dts[t], &nf, &nb, &nct, &ncg));
        DL_CHECK_EQ_I64((int64_t)nf, 2); // Gemm, MatMul
        DL_CHECK(nb >= 3);               // the weight and input gradients
        DL_CHECK_EQ_I64((int64_t)n_ops, (int64_t)(nf + nb));
        // The outputs keep their names (the artifact's interface).
        DL_CHECK_STR_EQ(m->outputs.data[0]->name, "logits");
        DL_CHECK_STR_EQ(m->outputs.data[1]->name, "loss");
        DL_CHECK(m->train_loss == m->train->loss);
        // Idempotent: nothing is left with float32 operands.
        dl_diags *d = NULL;
        DL_CHECK(dl_diags_create(&d) == DL_OK);
        size_t len = m->nodes.len, again = 99;
        DL_CHECK(dl_pass_precision(m, dts[t], d, &again) == DL_OK);
        DL_CHECK_EQ_I64((int64_t)again, 0);
        DL_CHECK_EQ_I64((int64_t)m->nodes.len, (int64_t)len);
        // The printer writes every statement (the casts next to their ops).
        char *text = NULL;
        DL_CHECK(dl_ir_print(m, &text) == DL_OK);
        DL_CHECK(text && strstr(text, "Cast <to = \"float\">"));
        free(text);
        dl_diags_destroy(d);
        dl_ir_module_destroy(m);
    }
}

DL_TEST(precision_cnn_structure) {
    size_t n_ops = 0;
    dl_ir_module *m = load(CNN_MODEL, "bfloat16", &n_ops);
    DL_CHECK(m != NULL);
    if (!m) {
        return;
    }
    size_t nf, nb, nct, ncg;
    DL_CHECK(check_structure(m, DL_DT_BFLOAT16, &nf, &nb, &nct, &ncg));
    DL_CHECK_EQ_I64((int64_t)nf, 3); // two Convs and the Gemm
    DL_CHECK_EQ_I64((int64_t)nct, 1);
    DL_CHECK_EQ_I64((int64_t)ncg, 2);
    DL_CHECK_EQ_I64((int64_t)n_ops, (int64_t)(nf + nb));
    dl_ir_module_destroy(m);
}

DL_TEST(precision_float_is_a_no_op) {
    size_t n_ops = 99;
    dl_ir_module *m = load(MLP_MODEL, "float", &n_ops);
    DL_CHECK(m != NULL);
    DL_CHECK_EQ_I64((int64_t)n_ops, 0);
    for (size_t k = 0; m && k < m->nodes.len; k++) {
        DL_CHECK(m->nodes.data[k]->op != DL_IR_OP_CAST);
    }
    dl_ir_module_destroy(m);
    // Any other dtype is refused.
    dl_diags *d = NULL;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    m = load(MLP_MODEL, "bfloat16", NULL);
    DL_CHECK(m != NULL);
    if (m) {
        DL_CHECK(dl_pass_precision(m, DL_DT_INT32, d, NULL) == DL_ERR_INVALID_ARG);
        DL_CHECK(dl_diags_error_count(d) == 1);
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// ---------------------------------------------------------------------------------------------
// Evaluator of the rewritten module vs its compiled artifact

// For helpers (DL_CHECK works in test bodies only): report, clear `ok`, go to the cleanup.
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            ok = false;                                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

// Runs infer of `rm` on `ins`; copies output i (float) into out[i] (numel each).
static bool run_infer(const dl_ir_module *m, dlrt_model *rm, const dl_tensor *ins, float **out) {
    dlrt_session *s = NULL;
    bool ok = dlrt_session_create(rm, &s) == DLRT_OK && set_inputs(m, s, ins) &&
              dlrt_session_infer(s) == DLRT_OK;
    for (size_t i = 0; ok && i < m->outputs.len; i++) {
        const void *data = NULL;
        dlrt_tensor_desc desc;
        ok = dlrt_session_output(s, m->outputs.data[i]->name, &data, &desc) == DLRT_OK &&
             desc.dtype == DLRT_FLOAT32 && (out[i] = malloc(desc.nbytes ? desc.nbytes : 1));
        if (ok) {
            memcpy(out[i], data, desc.nbytes);
        }
    }
    if (!ok) {
        fprintf(stderr, "infer failed: %s\n", dlrt_last_error());
    }
    dlrt_session_destroy(s);
    return ok;
}

// The evaluator and the artifact of the rewritten module agree within a few bf16/f16 ulps; the
// float32 artifact gives different (but close) outputs, so the casts are live.
static bool eval_vs_compiled(const char *fmt, const char *precision) {
    bool ok = true;
    dl_tensor ins[2] = {0}, ref[2] = {0};
    float *got[2] = {0}, *got32[2] = {0};
    dlrt_model *rm = NULL, *rm32 = NULL;
    dl_diags *d = NULL;
    dl_ir_module *m = load(fmt, precision, NULL);
    dl_ir_module *m32 = load(fmt, "float", NULL);
    REQUIRE(m && m32);
    REQUIRE((rm = compile(m)) && (rm32 = compile(m32)));
    REQUIRE(dl_diags_create(&d) == DL_OK);
    REQUIRE(m->inputs.len == 2 && m->outputs.len == 2 && make_inputs(m, 7, ins));
    REQUIRE(dl_ir_eval(m, NULL, ins, ref, d) == DL_OK);
    REQUIRE(run_infer(m, rm, ins, got));
    REQUIRE(run_infer(m32, rm32, ins, got32));
    for (size_t o = 0; o < 2; o++) {
        double max_err = 0, max_dev = 0, ref_max = 0;
        for (int64_t e = 0; e < dl_tensor_numel(&ref[o]); e++) {
            double r = dl_tensor_get(&ref[o], e);
            double err = fabs(got[o][e] - r) / (2e-2 + 2e-2 * fabs(r));
            max_err = err > max_err ? err : max_err;
            double dev = fabs((double)got[o][e] - (double)got32[o][e]);
            max_dev = dev > max_dev ? dev : max_dev;
            ref_max = fabs(r) > ref_max ? fabs(r) : ref_max;
        }
        if (max_err > 1) {
            fprintf(stderr, "%s %s output %s: compiled vs evaluator off by %g of tolerance\n",
                    m->name, precision, m->outputs.data[o]->name, max_err);
        }
        REQUIRE(max_err <= 1);
        // Reduced precision shows (a float32 product would be bit-exact here only by chance)
        // but stays within a few percent of the float32 result.
        REQUIRE(max_dev > 0);
        REQUIRE(max_dev <= 5e-2 * (1 + ref_max));
    }
out:
    for (size_t o = 0; o < 2; o++) {
        free(got[o]);
        free(got32[o]);
    }
    free_tensors(ins, 2);
    free_tensors(ref, 2);
    print_diags(d);
    dl_diags_destroy(d);
    dlrt_model_release(rm);
    dlrt_model_release(rm32);
    dl_ir_module_destroy(m);
    dl_ir_module_destroy(m32);
    return ok;
}

DL_TEST(precision_eval_vs_compiled_mlp_bf16) {
    DL_CHECK(eval_vs_compiled(MLP_MODEL, "bfloat16"));
}

DL_TEST(precision_eval_vs_compiled_mlp_f16) {
    DL_CHECK(eval_vs_compiled(MLP_MODEL, "float16"));
}

DL_TEST(precision_eval_vs_compiled_cnn_bf16) {
    DL_CHECK(eval_vs_compiled(CNN_MODEL, "bfloat16"));
}

DL_TEST(precision_eval_vs_compiled_cnn_f16) {
    DL_CHECK(eval_vs_compiled(CNN_MODEL, "float16"));
}

// ---------------------------------------------------------------------------------------------
// Train steps: bfloat16 against float32

enum { N_STEPS = 5 };

// Runs N_STEPS train steps (on one batch, so the loss must fall) and reads back every param
// (malloc'd, in m->params order) and the losses.
static bool train(const dl_ir_module *m, dlrt_model *rm, double *losses, float **params) {
    dlrt_session *s = NULL;
    bool ok = dlrt_session_create(rm, &s) == DLRT_OK;
    for (int step = 0; ok && step < N_STEPS; step++) {
        dl_tensor ins[2] = {0};
        dlrt_step_info info;
        ok = m->inputs.len == 2 && make_inputs(m, 100, ins) && set_inputs(m, s, ins) &&
             dlrt_session_train_step(s, &info) == DLRT_OK && !info.skipped;
        losses[step] = info.loss;
        free_tensors(ins, 2);
    }
    for (size_t i = 0; ok && i < m->params.len; i++) {
        size_t nb = (size_t)dl_ir_type_numel(&m->params.data[i]->type) * sizeof(float);
        ok = (params[i] = malloc(nb)) &&
             dlrt_session_get_param(s, m->params.data[i]->name, params[i], nb) == DLRT_OK;
    }
    if (!ok) {
        fprintf(stderr, "train failed: %s\n", dlrt_last_error());
    }
    dlrt_session_destroy(s);
    return ok;
}

static bool train_vs_float32(const char *fmt) {
    bool ok = true;
    double loss[N_STEPS] = {0}, loss32[N_STEPS] = {0};
    float *p[8] = {0}, *p32[8] = {0};
    dlrt_model *rm = NULL, *rm32 = NULL;
    dl_ir_module *m = load(fmt, "bfloat16", NULL);
    dl_ir_module *m32 = load(fmt, "float", NULL);
    REQUIRE(m && m32 && m->params.len <= 8);
    REQUIRE((rm = compile(m)) && (rm32 = compile(m32)));
    REQUIRE(train(m, rm, loss, p));
    REQUIRE(train(m32, rm32, loss32, p32));
    double max_loss_rel = 0;
    bool any_diff = false;
    for (int i = 0; i < N_STEPS; i++) {
        double rel = fabs(loss[i] - loss32[i]) / fabs(loss32[i]);
        max_loss_rel = rel > max_loss_rel ? rel : max_loss_rel;
        any_diff |= loss[i] != loss32[i];
    }
    for (int i = 0; i < N_STEPS; i++) {
        fprintf(stderr, "  step %d: loss %.6f (float32 %.6f)\n", i, loss[i], loss32[i]);
    }
    REQUIRE(max_loss_rel <= 1e-2);
    REQUIRE(loss32[N_STEPS - 1] < loss32[0]); // it trains
    REQUIRE(loss[N_STEPS - 1] < loss[0]);
    double max_param_rel = 0;
    for (size_t i = 0; i < m->params.len && p[i] && p32[i]; i++) {
        int64_t n = dl_ir_type_numel(&m->params.data[i]->type);
        double dd = 0, nn = 0;
        for (int64_t e = 0; e < n; e++) {
            dd += ((double)p[i][e] - p32[i][e]) * ((double)p[i][e] - p32[i][e]);
            nn += (double)p32[i][e] * p32[i][e];
            any_diff |= p[i][e] != p32[i][e];
        }
        double rel = sqrt(dd) / (sqrt(nn) + 1e-12);
        max_param_rel = rel > max_param_rel ? rel : max_param_rel;
    }
    fprintf(stderr, "%s: %d steps, loss %.6f vs %.6f (max rel %.2e), params max rel %.2e\n",
            m->name, N_STEPS, loss[N_STEPS - 1], loss32[N_STEPS - 1], max_loss_rel, max_param_rel);
    REQUIRE(max_param_rel <= 1e-2);
    REQUIRE(any_diff); // the casts are active
out:
    for (size_t i = 0; i < 8; i++) {
        free(p[i]);
        free(p32[i]);
    }
    dlrt_model_release(rm);
    dlrt_model_release(rm32);
    dl_ir_module_destroy(m);
    dl_ir_module_destroy(m32);
    return ok;
}

DL_TEST(precision_train_mlp_bf16_vs_float32) {
    DL_CHECK(train_vs_float32(MLP_MODEL));
}

DL_TEST(precision_train_cnn_bf16_vs_float32) {
    DL_CHECK(train_vs_float32(CNN_MODEL));
}

DL_TEST_MAIN()
