// tests/runtime_inputs/test_runtime_inputs.c — a session runs an entry point only when every input
// that entry point reads was given (dlrt_session_set_input or dlrt_session_bind_input) since the
// session was made. Before this check infer / train_step on a fresh session quietly read the
// arena's zeros (a loss of 0.0 from the Python binding). An input the entry point does not read
// may stay unset.
#include "dl_base.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dl_test.h"
#include "dlrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DL_TEST_MAIN()

// The train step reads x and y (the loss); so does infer, which runs every forward node.
static const char model_text[] =
    "model ri\n"
    "dim N = 2\n"
    "input x : float[N, 3]\n"
    "input y : int64[N]\n"
    "param w : float[3, 4] = glorot_uniform(seed = 1)\n"
    "logits = MatMul (x, w)\n"
    "probs = Softmax <axis = -1> (logits)\n"
    "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (logits, y)\n"
    "output probs\n"
    "train loss {\n"
    "  optimizer = sgd <lr = 0.1>\n"
    "}\n";

// Parses, infers shapes (and with `train` differentiates), compiles and loads `text`.
static dlrt_model *compile_text(const char *name, const char *text, bool train) {
    dlrt_model *m = NULL;
    dl_diags *d = NULL;
    dl_ir_module *im = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    if (dl_fe_parse(name, text, strlen(text), d, &im) == DL_OK && dl_pass_shape(im, d) == DL_OK &&
        (!train || dl_pass_autodiff(im, d) == DL_OK) &&
        dl_cg_compile(im, NULL, d, &art, &len) == DL_OK &&
        dlrt_model_load_memory(art, len, &m) != DLRT_OK) {
        fprintf(stderr, "load: %s\n", dlrt_last_error());
        m = NULL;
    }
    char *msgs = NULL;
    if (!m && dl_diags_render(d, &msgs) == DL_OK && msgs) {
        fputs(msgs, stderr);
    }
    free(msgs);
    free(art);
    dl_ir_module_destroy(im);
    dl_diags_destroy(d);
    return m;
}

// The train model, compiled once.
static dlrt_model *model(void) {
    static dlrt_model *m;
    static bool tried;
    if (!tried) {
        tried = true;
        m = compile_text("ri.dlg", model_text, true);
    }
    return m;
}

static const float xs[6] = {0.5f, -1, 2, 1, 0.25f, -0.5f};
static const int64_t ys[2] = {1, 3};

static bool error_names(const char *input) {
    const char *e = dlrt_last_error();
    char want[64];
    snprintf(want, sizeof want, "input '%s'", input);
    bool ok = strstr(e, want) && strstr(e, "never set");
    if (!ok) {
        fprintf(stderr, "last error: %s\n", e);
    }
    return ok;
}

DL_TEST(infer_on_a_fresh_session_names_the_unset_input) {
    dlrt_model *m = model();
    DL_CHECK(m != NULL);
    dlrt_session *s = NULL;
    DL_CHECK(dlrt_session_create(m, &s) == DLRT_OK);
    dlrt_status st = dlrt_session_infer(s);
    bool named = error_names("x");
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(st, DLRT_ERR_INVALID_ARG);
    DL_CHECK(named);
}

DL_TEST(train_step_on_a_fresh_session_fails_and_changes_nothing) {
    dlrt_model *m = model();
    DL_CHECK(m != NULL);
    dlrt_session *s = NULL;
    DL_CHECK(dlrt_session_create(m, &s) == DLRT_OK);
    float w0[12], w1[12];
    DL_CHECK(dlrt_session_get_param(s, "w", w0, sizeof w0) == DLRT_OK);
    dlrt_step_info info;
    memset(&info, 0x5a, sizeof info);
    dlrt_status st = dlrt_session_train_step(s, &info);
    bool named = error_names("x");
    // Only x given: the step still reads y.
    dlrt_status st_x = dlrt_session_set_input(s, "x", xs, sizeof xs);
    dlrt_status st2 = dlrt_session_train_step(s, &info);
    bool named_y = error_names("y");
    double step = -1;
    dlrt_status st_h = dlrt_session_get_hparam(s, "step", &step);
    dlrt_status st_w = dlrt_session_get_param(s, "w", w1, sizeof w1);
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(st, DLRT_ERR_INVALID_ARG);
    DL_CHECK(named);
    DL_CHECK_EQ_I64(st_x, DLRT_OK);
    DL_CHECK_EQ_I64(st2, DLRT_ERR_INVALID_ARG);
    DL_CHECK(named_y);
    DL_CHECK_EQ_I64(st_h, DLRT_OK);
    DL_CHECK_EQ_I64(st_w, DLRT_OK);
    DL_CHECK(step == 0);                      // no step ran
    DL_CHECK(memcmp(w0, w1, sizeof w0) == 0); // params untouched
}

// A model with an input no node reads (u): infer runs without it.
static const char unread_text[] = "model ru\n"
                                  "input x : float[2]\n"
                                  "input u : float[3]\n"
                                  "y = Relu (x)\n"
                                  "output y\n";

DL_TEST(an_input_the_entry_does_not_read_may_stay_unset) {
    dlrt_model *m = compile_text("ru.dlg", unread_text, false);
    DL_CHECK(m != NULL);
    dlrt_session *s = NULL;
    dlrt_status st_c = dlrt_session_create(m, &s);
    dlrt_model_release(m);
    DL_CHECK_EQ_I64(st_c, DLRT_OK);
    dlrt_status st0 = dlrt_session_infer(s); // x is read and unset
    bool named = error_names("x");
    const float x[2] = {-1.5f, 2.5f};
    dlrt_status st_x = dlrt_session_set_input(s, "x", x, sizeof x);
    dlrt_status st = dlrt_session_infer(s);
    const void *p = NULL;
    dlrt_status st_o = dlrt_session_output(s, "y", &p, NULL);
    float y1 = st_o == DLRT_OK ? ((const float *)p)[1] : 0;
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(st0, DLRT_ERR_INVALID_ARG);
    DL_CHECK(named);
    DL_CHECK_EQ_I64(st_x, DLRT_OK);
    DL_CHECK_EQ_I64(st, DLRT_OK);
    DL_CHECK_EQ_I64(st_o, DLRT_OK);
    DL_CHECK(y1 == 2.5f);
}

DL_TEST(bound_inputs_count_as_given) {
    dlrt_model *m = model();
    DL_CHECK(m != NULL);
    dlrt_session *s = NULL;
    DL_CHECK(dlrt_session_create(m, &s) == DLRT_OK);
    dlrt_step_info info;
    memset(&info, 0, sizeof info);
    dlrt_status a = dlrt_session_bind_input(s, "x", xs, sizeof xs);
    dlrt_status b = dlrt_session_set_input(s, "y", ys, sizeof ys);
    dlrt_status st = dlrt_session_train_step(s, &info);
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(a, DLRT_OK);
    DL_CHECK_EQ_I64(b, DLRT_OK);
    DL_CHECK_EQ_I64(st, DLRT_OK);
    DL_CHECK_EQ_I64(info.step, 1);
    DL_CHECK(info.loss > 0 && info.loss < 10); // a real cross-entropy of 4 classes, not 0
}

DL_TEST(a_refused_set_or_bind_does_not_count) {
    dlrt_model *m = model();
    DL_CHECK(m != NULL);
    dlrt_session *s = NULL;
    DL_CHECK(dlrt_session_create(m, &s) == DLRT_OK);
    dlrt_status a = dlrt_session_set_input(s, "x", xs, sizeof xs - 4); // wrong size
    dlrt_status b = dlrt_session_bind_input(s, "x", NULL, sizeof xs);  // NULL data
    dlrt_status c = dlrt_session_set_input(s, "nope", xs, sizeof xs);  // unknown name
    dlrt_status st = dlrt_session_infer(s);
    bool named = error_names("x");
    dlrt_session_destroy(s);
    DL_CHECK_EQ_I64(a, DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(b, DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(c, DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(st, DLRT_ERR_INVALID_ARG);
    DL_CHECK(named);
}

DL_TEST(each_session_tracks_its_own_inputs) {
    dlrt_model *m = model();
    DL_CHECK(m != NULL);
    dlrt_session *s1 = NULL, *s2 = NULL;
    DL_CHECK(dlrt_session_create(m, &s1) == DLRT_OK);
    DL_CHECK(dlrt_session_create(m, &s2) == DLRT_OK);
    dlrt_status a = dlrt_session_set_input(s1, "x", xs, sizeof xs);
    dlrt_status b = dlrt_session_set_input(s1, "y", ys, sizeof ys);
    dlrt_status st1 = dlrt_session_infer(s1);
    dlrt_status st2 = dlrt_session_infer(s2);
    dlrt_session_destroy(s1);
    dlrt_session_destroy(s2);
    DL_CHECK_EQ_I64(a, DLRT_OK);
    DL_CHECK_EQ_I64(b, DLRT_OK);
    DL_CHECK_EQ_I64(st1, DLRT_OK);
    DL_CHECK_EQ_I64(st2, DLRT_ERR_INVALID_ARG);
}
