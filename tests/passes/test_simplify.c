// tests/passes/test_simplify.c — unit tests of dl_pass_simplify (passes/simplify.c) and of the
// pipeline's table (passes/pipeline.c): each rule fires where it is exact and stays away where it
// is not, node locations survive, and the training graph keeps its loss, gradients and assigns.
//
// Each case parses a small .dlg, infers shapes, simplifies, and reads the result back through
// dl_ir_print: the text is what the pass left (statement order, kept names, removed nodes).
#include "dl_fe.h"
#include "dl_pass.h"
#include "dl_test.h"

#include <stdlib.h>
#include <string.h>

typedef struct simplified {
    dl_ir_module *m;
    char *text;       // dl_ir_print after the pass
    size_t n_removed; // dl_pass_simplify's count
    size_t n_before;  // nodes before the pass
} simplified;

// Parses `src`, infers shapes (and derives the training graph when `train`), simplifies.
static simplified run(const char *src, bool train) {
    simplified r = {0};
    dl_diags *d = NULL;
    DL_ASSERT(dl_diags_create(&d) == DL_OK);
    dl_status st = dl_fe_parse("t.dlg", src, strlen(src), d, &r.m);
    if (st == DL_OK) {
        st = dl_pass_shape(r.m, d);
    }
    if (st == DL_OK && train) {
        st = dl_pass_autodiff(r.m, d);
    }
    if (st == DL_OK) {
        r.n_before = r.m->nodes.len;
        st = dl_pass_simplify(r.m, d, &r.n_removed);
    }
    if (st == DL_OK) {
        st = dl_ir_verify(r.m, d);
    }
    if (st == DL_OK) {
        st = dl_ir_print(r.m, &r.text);
    }
    if (st != DL_OK) {
        for (size_t i = 0; i < dl_diags_count(d); i++) {
            fprintf(stderr, "  diag: %s\n", dl_diags_get(d, i)->msg);
        }
    }
    dl_diags_destroy(d);
    DL_ASSERT(st == DL_OK);
    return r;
}

static void done(simplified *r) {
    dl_ir_module_destroy(r->m);
    free(r->text);
}

static bool has(const simplified *r, const char *s) {
    return strstr(r->text, s) != NULL;
}

#define HEAD                                                                                       \
    "model t\n"                                                                                    \
    "input x : float[4, 4]\n"

DL_TEST(identity_is_forwarded_but_kept_when_an_output) {
    simplified r = run(HEAD "y = Identity (x)\n"
                            "z = Relu (y)\n"
                            "o = Identity (z)\n"
                            "output o\n",
                       false);
    DL_CHECK(has(&r, "z = Relu (x)"));     // y forwarded: z reads x
    DL_CHECK(has(&r, "o = Identity (z)")); // o is an output: its name is the interface
    DL_CHECK(!has(&r, "y = Identity"));    // y no longer used: removed
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 1);
    done(&r);
}

DL_TEST(cast_and_reshapes_forwarded_only_when_exact) {
    simplified r = run(HEAD "a = Cast <to = \"float\"> (x)\n"   // same dtype: exact
                            "b = Cast <to = \"float16\"> (x)\n" // rounds: kept
                            "c = Reshape <shape = [4, 4]> (a)\n"
                            "e = Reshape <shape = [16]> (a)\n"    // other shape: kept
                            "t = Transpose <perm = [1, 0]> (c)\n" // same type, moves elements
                            "output b\n"
                            "output e\n"
                            "output t\n",
                       false);
    DL_CHECK(has(&r, "e = Reshape <shape = [16]> (x)"));
    DL_CHECK(has(&r, "t = Transpose <perm = [1, 0]> (x)"));
    DL_CHECK(has(&r, "b = Cast <to = \"float16\"> (x)"));
    DL_CHECK(!has(&r, "a = Cast") && !has(&r, "c = Reshape"));
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 2);
    done(&r);
}

DL_TEST(inexact_algebra_is_left_alone) {
    // x * 1 (a signalling NaN comes out quiet), x + 0 (-0 + 0 is +0), x - x (Inf - Inf is NaN):
    // none of them is rewritten.
    simplified r = run(HEAD "const one : float[] = 1\n"
                            "const zero : float[] = 0\n"
                            "a = Mul (x, one)\n"
                            "b = Add (a, zero)\n"
                            "c = Sub (b, b)\n"
                            "output c\n",
                       false);
    DL_CHECK(has(&r, "a = Mul (x, one)"));
    DL_CHECK(has(&r, "b = Add (a, zero)"));
    DL_CHECK(has(&r, "c = Sub (b, b)"));
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 0);
    done(&r);
}

DL_TEST(cse_merges_identical_pure_nodes_only) {
    simplified r = run(HEAD "a = Relu (x)\n"
                            "b = Relu (x)\n" // same as a
                            "c = Softmax <axis = 0> (x)\n"
                            "d = Softmax <axis = 1> (x)\n" // other attribute: kept
                            "e = Softmax <axis = 0> (x)\n" // same as c
                            "s = Add (a, b)\n"
                            "s2 = Add (s, c)\n"
                            "s3 = Add (s2, d)\n"
                            "s4 = Add (s3, e)\n"
                            "output s4\n",
                       false);
    DL_CHECK(has(&r, "Add (a, a)"));
    DL_CHECK(has(&r, "(s3, c)"));
    DL_CHECK(has(&r, "d  = Softmax <axis = 1> (x)") || has(&r, "d = Softmax <axis = 1> (x)"));
    DL_CHECK(!has(&r, "b = Relu") && !has(&r, "b  = Relu"));
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 2);
    done(&r);
}

DL_TEST(cse_never_merges_dropout_or_an_output) {
    simplified r = run(HEAD "a = Dropout <ratio = 0.5> (x)\n"
                            "b = Dropout <ratio = 0.5> (x)\n"
                            "c = Relu (x)\n"
                            "e = Relu (x)\n" // an output: keeps its own node
                            "s = Add (a, b)\n"
                            "output s\n"
                            "output c\n"
                            "output e\n",
                       false);
    DL_CHECK(has(&r, "(a, b)"));
    DL_CHECK(has(&r, "e = Relu (x)"));
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 0);
    done(&r);
}

DL_TEST(dce_removes_what_reaches_no_root_and_keeps_locations) {
    simplified r = run(HEAD "u = Exp (x)\n"  // line 3: dead
                            "v = Log (u)\n"  // line 4: dead
                            "k = Tanh (x)\n" // line 5: kept
                            "output k\n",
                       false);
    DL_CHECK(!has(&r, "Exp") && !has(&r, "Log"));
    DL_CHECK_EQ_I64((int64_t)r.m->nodes.len, 1);
    DL_CHECK_EQ_I64((int64_t)r.m->nodes.data[0]->loc.line, 5);
    DL_CHECK_EQ_I64((int64_t)r.m->values.len, 2); // x and k
    DL_CHECK(dl_ir_module_find(r.m, "k") == r.m->nodes.data[0]->outputs[0]);
    DL_CHECK(dl_ir_module_find(r.m, "u") == NULL);
    DL_CHECK_EQ_I64((int64_t)r.n_removed, 2);
    done(&r);
}

DL_TEST(training_graph_keeps_loss_grads_and_assigns) {
    simplified r = run("model t\n"
                       "input x : float[8, 4]\n"
                       "input y : float[8, 2]\n"
                       "param w : float[4, 2] = glorot_uniform(seed = 1)\n"
                       "h = MatMul (x, w)\n"
                       "i = Identity (h)\n"
                       "loss = MeanSquaredError (i, y)\n"
                       "unused = Exp (h)\n"
                       "output loss\n"
                       "train loss {\n  optimizer = sgd <lr = 0.1>\n}\n",
                       true);
    dl_ir_module *m = r.m;
    DL_CHECK(m->has_backward);
    DL_CHECK(m->train_loss && m->values.data[m->train_loss->id] == m->train_loss);
    DL_CHECK(m->grads.len == 1 && m->grads.data[0]);
    DL_CHECK(m->values.data[m->grads.data[0]->id] == m->grads.data[0]);
    DL_CHECK(!has(&r, "unused"));
    DL_CHECK(has(&r, "MeanSquaredError (h, y)"));
    DL_CHECK(m->n_fwd_nodes <= m->nodes.len);
    for (size_t i = 0; i < m->n_fwd_nodes; i++) {
        DL_CHECK(m->nodes.data[i]->op != DL_IR_OP_UNARY_GRAD);
    }
    DL_CHECK(r.n_removed >= 2);
    done(&r);
}

DL_TEST(pipeline_names_round_trip) {
    for (int p = 0; p < DL_PASS_COUNT; p++) {
        dl_pass_id q;
        DL_CHECK(dl_pass_from_name(dl_pass_name((dl_pass_id)p), &q));
        DL_CHECK_EQ_I64((int64_t)q, p);
        DL_CHECK(strstr(dl_pass_names(), dl_pass_name((dl_pass_id)p)) != NULL);
    }
    dl_pass_id q;
    DL_CHECK(!dl_pass_from_name("all", &q));
    DL_CHECK_STR_EQ(dl_pass_name(DL_PASS_FUSION), "fusion");
}

// A pass that leaves IR that does not verify is named (verify after each pass is on in debug
// builds and with verify_each): here the module handed to simplify is already broken (a value
// flagged as an output that the module does not list), which simplify neither needs nor repairs.
DL_TEST(pipeline_names_the_pass_after_which_the_ir_does_not_verify) {
    const char *src = "model m\n"
                      "input x : float[2, 3]\n"
                      "t = Relu(x)\n"
                      "y = Neg(t)\n"
                      "output y\n";
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    DL_ASSERT(dl_diags_create(&d) == DL_OK);
    DL_ASSERT(dl_fe_parse("t.dlg", src, strlen(src), d, &m) == DL_OK);
    dl_pass_pipeline_opts o;
    dl_pass_pipeline_opts_init(&o);
    o.verify_each = true;
    DL_CHECK_EQ_I64(dl_pass_pipeline_run(m, DL_PASS_SHAPES, DL_PASS_FUSION, &o, d), DL_OK);
    m->nodes.data[0]->outputs[0]->is_output = true; // 't'
    DL_CHECK_EQ_I64(dl_pass_pipeline_run(m, DL_PASS_SIMPLIFY, DL_PASS_SIMPLIFY, &o, d),
                    DL_ERR_BACKEND);
    bool named = false, why = false;
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        const char *msg = dl_diags_get(d, i)->msg;
        named =
            named || strstr(msg, "internal error: the IR after pass 'simplify' does not verify");
        why = why || strstr(msg, "verify: 't' is marked as an output but is not in the module's");
    }
    DL_CHECK(named && why);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST_MAIN()
