// tests/ir/test_ir.c — unit tests of the IR printer (exact text), the canonical serialisation
// (invariance and sensitivity) and the verifier (catches hand-broken modules). Modules are built
// with the builder API only, so these tests do not depend on the frontend.
#include "dl_ir.h"
#include "dl_test.h"

static dl_ir_attr attr_int(const char *name, int64_t v) {
    dl_ir_attr a = {0};
    a.name = name;
    a.kind = DL_IR_ATTR_INT;
    a.i = v;
    a.i_sym = -1;
    return a;
}

static dl_ir_attr attr_float(const char *name, double v) {
    dl_ir_attr a = {0};
    a.name = name;
    a.kind = DL_IR_ATTR_FLOAT;
    a.f = v;
    a.i_sym = -1;
    return a;
}

static dl_ir_attr attr_str(const char *name, const char *s) {
    dl_ir_attr a = {0};
    a.name = name;
    a.kind = DL_IR_ATTR_STRING;
    a.s = s;
    a.i_sym = -1;
    return a;
}

static dl_ir_attr attr_ints(const char *name, int64_t *v, int32_t *syms, size_t n) {
    dl_ir_attr a = {0};
    a.name = name;
    a.kind = DL_IR_ATTR_INTS;
    a.ints = v;
    a.int_syms = syms;
    a.n = n;
    a.i_sym = -1;
    return a;
}

static dl_ir_type type2(dl_dtype dt, int64_t d0, int32_t s0, int64_t d1, int32_t s1) {
    dl_ir_type t = {0};
    t.dtype = dt;
    t.rank = 2;
    t.dims[0] = (dl_ir_dim){d0, s0};
    t.dims[1] = (dl_ir_dim){d1, s1};
    return t;
}

static dl_ir_type type1(dl_dtype dt, int64_t d0, int32_t s0) {
    dl_ir_type t = {0};
    t.dtype = dt;
    t.rank = 1;
    t.dims[0] = (dl_ir_dim){d0, s0};
    return t;
}

// Variations of one small MLP; the zero value of each field means "as in the reference".
typedef struct mlp_opts {
    const char *hidden;      // name of the intermediate Gemm output ("h")
    const char *x_name;      // name of the input ("x")
    bool comments;           // add comments and blank lines
    bool explicit_default;   // Softmax <axis = -1> instead of Softmax
    bool softmax_axis0;      // Softmax <axis = 0>
    bool int_alpha;          // Gemm <alpha = 1> (int) instead of <alpha = 1.0>
    bool x_f16;              // input dtype float16
    int64_t n;               // bound value of N (128)
    uint64_t seed1;          // seed of w1 (1)
    double lr;               // adam lr (1e-3)
    bool train_sgd_momentum; // sgd with momentum instead of adam
    double momentum;
} mlp_opts;

static dl_ir_module *build_mlp(const mlp_opts *o) {
    dl_ir_module *m = NULL;
    if (dl_ir_module_create("mlp", &m) != DL_OK) {
        return NULL;
    }
    int64_t n = o->n ? o->n : 128;
    const char *xn = o->x_name ? o->x_name : "x";
    const char *hn = o->hidden ? o->hidden : "h";
    int32_t dn;
    dl_ir_value *x, *y, *w1, *b1, *h, *a, *probs, *loss;
    dl_ir_node *nd;
    if (dl_ir_module_add_dim(m, "N", n, DL_NO_LOC, &dn) != DL_OK) {
        goto fail;
    }
    dl_ir_type tx = type2(o->x_f16 ? DL_DT_FLOAT16 : DL_DT_FLOAT, n, dn, 784, -1);
    dl_ir_type ty = type1(DL_DT_INT64, n, dn);
    dl_ir_type tw = type2(DL_DT_FLOAT, 784, -1, 10, -1);
    dl_ir_type tb = type1(DL_DT_FLOAT, 10, -1);
    if (dl_ir_module_add_input(m, xn, &tx, DL_NO_LOC, &x) != DL_OK ||
        dl_ir_module_add_input(m, "labels", &ty, DL_NO_LOC, &y) != DL_OK) {
        goto fail;
    }
    dl_ir_init *i1 = dl_ir_module_new_init(m, DL_IR_INIT_GLOROT_UNIFORM);
    i1->seed = o->seed1 ? o->seed1 : 1;
    i1->has_seed = true;
    dl_ir_init *i2 = dl_ir_module_new_init(m, DL_IR_INIT_ZEROS);
    if (dl_ir_module_add_param(m, "w1", &tw, i1, DL_NO_LOC, &w1) != DL_OK ||
        dl_ir_module_add_param(m, "b1", &tb, i2, DL_NO_LOC, &b1) != DL_OK) {
        goto fail;
    }
    dl_ir_value *gin[] = {x, w1, b1};
    dl_ir_attr galpha = o->int_alpha ? attr_int("alpha", 1) : attr_float("alpha", 1.0);
    if (dl_ir_module_add_node(m, DL_IR_OP_GEMM, gin, 3, &hn, NULL, 1, &galpha, 1, DL_NO_LOC, &nd) !=
        DL_OK) {
        goto fail;
    }
    h = nd->outputs[0];
    const char *an = "a";
    if (dl_ir_module_add_node(m, DL_IR_OP_RELU, &h, 1, &an, NULL, 1, NULL, 0, DL_NO_LOC, &nd) !=
        DL_OK) {
        goto fail;
    }
    a = nd->outputs[0];
    const char *pn = "probs";
    dl_ir_attr ax = attr_int("axis", o->softmax_axis0 ? 0 : -1);
    bool with_axis = o->explicit_default || o->softmax_axis0;
    if (dl_ir_module_add_node(m, DL_IR_OP_SOFTMAX, &a, 1, &pn, NULL, 1, with_axis ? &ax : NULL,
                              with_axis ? 1 : 0, DL_NO_LOC, &nd) != DL_OK) {
        goto fail;
    }
    probs = nd->outputs[0];
    const char *ln = "loss";
    dl_ir_value *lin[] = {a, y};
    dl_ir_attr red = attr_str("reduction", "mean");
    if (dl_ir_module_add_node(m, DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, lin, 2, &ln, NULL, 1, &red, 1,
                              DL_NO_LOC, &nd) != DL_OK) {
        goto fail;
    }
    loss = nd->outputs[0];
    if (dl_ir_module_add_output(m, probs, DL_NO_LOC) != DL_OK ||
        dl_ir_module_add_output(m, loss, DL_NO_LOC) != DL_OK) {
        goto fail;
    }
    dl_ir_train *t = DL_ARENA_NEW(&m->arena, dl_ir_train);
    t->loss = loss;
    dl_ir_attr *oa = DL_ARENA_NEWN(&m->arena, dl_ir_attr, 1);
    if (o->train_sgd_momentum) {
        t->optimizer = DL_IR_OPTIM_SGD;
        oa[0] = attr_float("momentum", o->momentum);
        oa[0].name = "momentum";
    } else {
        t->optimizer = DL_IR_OPTIM_ADAM;
        oa[0] = attr_float("lr", o->lr != 0.0 ? o->lr : 1e-3);
    }
    t->opt_attrs = oa;
    t->n_opt_attrs = 1;
    t->has_clip_norm = true;
    t->clip_norm = 5.0;
    if (dl_ir_module_set_train(m, t) != DL_OK) {
        goto fail;
    }
    if (o->comments) {
        m->comment_header = "# a header\n# of two lines";
        m->comment_trailer = "# the end";
        for (size_t i = 0; i < m->stmts.len; i++) {
            dl_ir_stmt *s = &m->stmts.data[i];
            s->blank_before = s->kind != m->stmts.data[i ? i - 1 : 0].kind;
        }
        m->stmts.data[3].comment_before = "# weights";
        m->stmts.data[5].comment_after = "# hidden";
    }
    return m;
fail:
    dl_ir_module_destroy(m);
    return NULL;
}

static char *canon_of(const mlp_opts *o, unsigned flags) {
    dl_ir_module *m = build_mlp(o);
    char *text = NULL;
    size_t len = 0;
    if (m && dl_ir_canonical(m, flags, &text, &len) != DL_OK) {
        text = NULL;
    }
    if (text && strlen(text) != len) {
        free(text);
        text = NULL;
    }
    dl_ir_module_destroy(m);
    return text;
}

// ---------------------------------------------------------------------------------------------
// Printer

DL_TEST(print_mlp_exact) {
    mlp_opts o = {0};
    dl_ir_module *m = build_mlp(&o);
    DL_CHECK(m != NULL);
    char *text = NULL;
    DL_CHECK_OK(dl_ir_print(m, &text));
    DL_CHECK_STR_EQ(text, "model mlp\n"
                          "dim N = 128\n"
                          "input  x      : float[N, 784]\n"
                          "input  labels : int64[N]\n"
                          "param  w1     : float[784, 10] = glorot_uniform(seed = 1)\n"
                          "param  b1     : float[10]      = zeros\n"
                          "h     = Gemm <alpha = 1.0> (x, w1, b1)\n"
                          "a     = Relu (h)\n"
                          "probs = Softmax (a)\n"
                          "loss  = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (a, labels)\n"
                          "output probs\n"
                          "output loss\n"
                          "train loss {\n"
                          "  optimizer = adam <lr = 0.001>\n"
                          "  clip_norm = 5.0\n"
                          "}\n");
    free(text);
    dl_ir_module_destroy(m);
}

DL_TEST(print_comments_and_blank_lines) {
    mlp_opts o = {.comments = true};
    dl_ir_module *m = build_mlp(&o);
    DL_CHECK(m != NULL);
    char *text = NULL;
    DL_CHECK_OK(dl_ir_print(m, &text));
    DL_CHECK_STR_EQ(text, "# a header\n"
                          "# of two lines\n"
                          "model mlp\n"
                          "dim N = 128\n"
                          "\n"
                          "input  x      : float[N, 784]\n"
                          "input  labels : int64[N]\n"
                          "\n"
                          "# weights\n"
                          "param  w1 : float[784, 10] = glorot_uniform(seed = 1)\n"
                          "param  b1 : float[10]      = zeros\n"
                          "\n"
                          "h     = Gemm <alpha = 1.0> (x, w1, b1)  # hidden\n"
                          "a     = Relu (h)\n"
                          "probs = Softmax (a)\n"
                          "loss  = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (a, labels)\n"
                          "\n"
                          "output probs\n"
                          "output loss\n"
                          "\n"
                          "train loss {\n"
                          "  optimizer = adam <lr = 0.001>\n"
                          "  clip_norm = 5.0\n"
                          "}\n"
                          "# the end\n");
    free(text);
    dl_ir_module_destroy(m);
}

DL_TEST(print_optional_inputs_literals_inits_train) {
    dl_ir_module *m = NULL;
    DL_CHECK_OK(dl_ir_module_create("misc", &m));
    int32_t db;
    DL_CHECK_OK(dl_ir_module_add_dim(m, "B", 4, DL_NO_LOC, &db));
    dl_ir_type t23 = type2(DL_DT_FLOAT, 2, -1, 3, -1);
    dl_ir_type ti = type1(DL_DT_INT32, 3, -1);
    dl_ir_type tbool = type1(DL_DT_BOOL, 2, -1);
    dl_ir_type tscalar = {DL_DT_FLOAT, 0, {{0, 0}}};
    dl_ir_value *x, *lo, *ci, *cb, *p1, *p2, *p3, *p4, *p5, *p6;
    DL_CHECK_OK(dl_ir_module_add_input(m, "x", &t23, DL_NO_LOC, &x));
    dl_ir_literal *l = dl_ir_module_new_literal(m, DL_DT_FLOAT, 1);
    l->f[0] = -0.5;
    l->is_splat = true;
    DL_CHECK_OK(dl_ir_module_add_const(m, "lo", &tscalar, l, DL_NO_LOC, &lo));
    l = dl_ir_module_new_literal(m, DL_DT_INT32, 3);
    l->i[0] = 1;
    l->i[1] = -2;
    l->i[2] = 3;
    DL_CHECK_OK(dl_ir_module_add_const(m, "ci", &ti, l, DL_NO_LOC, &ci));
    l = dl_ir_module_new_literal(m, DL_DT_BOOL, 2);
    l->i[0] = 1;
    l->i[1] = 0;
    DL_CHECK_OK(dl_ir_module_add_const(m, "cb", &tbool, l, DL_NO_LOC, &cb));
    dl_ir_init *in = dl_ir_module_new_init(m, DL_IR_INIT_UNIFORM);
    in->a = -1;
    in->b = 1;
    in->seed = 9;
    in->has_seed = true;
    DL_CHECK_OK(dl_ir_module_add_param(m, "p1", &t23, in, DL_NO_LOC, &p1));
    in = dl_ir_module_new_init(m, DL_IR_INIT_NORMAL);
    in->a = 0;
    in->b = 0.02;
    DL_CHECK_OK(dl_ir_module_add_param(m, "p2", &t23, in, DL_NO_LOC, &p2));
    in = dl_ir_module_new_init(m, DL_IR_INIT_HE_NORMAL);
    DL_CHECK_OK(dl_ir_module_add_param(m, "p3", &t23, in, DL_NO_LOC, &p3));
    in = dl_ir_module_new_init(m, DL_IR_INIT_FILE);
    in->path = "w \"q\".safetensors";
    in->tensor = "a\\b";
    DL_CHECK_OK(dl_ir_module_add_param(m, "p4", &t23, in, DL_NO_LOC, &p4));
    in = dl_ir_module_new_init(m, DL_IR_INIT_LITERAL);
    in->lit = dl_ir_module_new_literal(m, DL_DT_FLOAT, 6);
    for (int i = 0; i < 6; i++) {
        in->lit->f[i] = i * 0.5;
    }
    DL_CHECK_OK(dl_ir_module_add_param(m, "p5", &t23, in, DL_NO_LOC, &p5));
    in = dl_ir_module_new_init(m, DL_IR_INIT_CONSTANT);
    in->a = 2;
    DL_CHECK_OK(dl_ir_module_add_param(m, "p6", &t23, in, DL_NO_LOC, &p6));
    dl_ir_node *nd;
    const char *cn = "c";
    dl_ir_value *cin[] = {x, NULL, lo};
    DL_CHECK_OK(
        dl_ir_module_add_node(m, DL_IR_OP_CLIP, cin, 3, &cn, NULL, 1, NULL, 0, DL_NO_LOC, &nd));
    const char *dn[] = {"d", "mask"};
    dl_ir_value *din[] = {nd->outputs[0], NULL, NULL};
    dl_ir_attr seed = attr_int("seed", 3);
    DL_CHECK_OK(
        dl_ir_module_add_node(m, DL_IR_OP_DROPOUT, din, 3, dn, NULL, 2, &seed, 1, DL_NO_LOC, &nd));
    int64_t shp[] = {4, -1};
    int32_t syms[] = {db, -1};
    dl_ir_attr rs = attr_ints("shape", shp, syms, 2);
    const char *rn = "r";
    DL_CHECK_OK(dl_ir_module_add_node(m, DL_IR_OP_RESHAPE, &nd->outputs[0], 1, &rn, NULL, 1, &rs, 1,
                                      DL_NO_LOC, &nd));
    DL_CHECK_OK(dl_ir_module_add_output(m, nd->outputs[0], DL_NO_LOC));
    dl_ir_train *t = DL_ARENA_NEW(&m->arena, dl_ir_train);
    t->loss = nd->outputs[0];
    t->optimizer = DL_IR_OPTIM_SGD;
    t->has_precision = true;
    t->precision = DL_DT_BFLOAT16;
    t->loss_scale = DL_IR_LS_DYNAMIC;
    t->ls_attrs = DL_ARENA_NEWN(&m->arena, dl_ir_attr, 1);
    t->ls_attrs[0] = attr_int("interval", 100);
    t->n_ls_attrs = 1;
    t->freeze = DL_ARENA_NEWN(&m->arena, dl_ir_value *, 2);
    t->freeze[0] = p2;
    t->freeze[1] = p1;
    t->n_freeze = 2;
    t->has_accumulate = true;
    t->accumulate = 4;
    DL_CHECK_OK(dl_ir_module_set_train(m, t));

    char *text = NULL;
    DL_CHECK_OK(dl_ir_print(m, &text));
    DL_CHECK_STR_EQ(text,
                    "model misc\n"
                    "dim B = 4\n"
                    "input  x  : float[2, 3]\n"
                    "const  lo : float[]     = -0.5\n"
                    "const  ci : int32[3]    = [1, -2, 3]\n"
                    "const  cb : bool[2]     = [1, 0]\n"
                    "param  p1 : float[2, 3] = uniform(-1.0, 1.0, seed = 9)\n"
                    "param  p2 : float[2, 3] = normal(0.0, 0.02)\n"
                    "param  p3 : float[2, 3] = he_normal()\n"
                    "param  p4 : float[2, 3] = file(\"w \\\"q\\\".safetensors\", \"a\\\\b\")\n"
                    "param  p5 : float[2, 3] = [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]\n"
                    "param  p6 : float[2, 3] = constant(2.0)\n"
                    "c       = Clip (x, , lo)\n"
                    "d, mask = Dropout <seed = 3> (c)\n"
                    "r       = Reshape <shape = [B, -1]> (d)\n"
                    "output r\n"
                    "train r {\n"
                    "  optimizer = sgd\n"
                    "  precision = bfloat16\n"
                    "  loss_scale = dynamic <interval = 100>\n"
                    "  freeze = [p2, p1]\n"
                    "  accumulate = 4\n"
                    "}\n");
    free(text);
    // The verifier accepts it.
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_OK(dl_ir_verify(m, d));
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(print_after_bind_dim_and_stray_sym) {
    mlp_opts o = {0};
    dl_ir_module *m = build_mlp(&o);
    DL_CHECK(m != NULL);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_OK(dl_ir_module_bind_dim(m, "N", 64, d));
    // A literal int whose sym was left at 0 (not -1) by a careless builder: printed as a number.
    m->nodes.data[0]->attrs[0] = attr_int("transA", 0);
    m->nodes.data[0]->attrs[0].i_sym = 0;
    char *text = NULL;
    DL_CHECK_OK(dl_ir_print(m, &text));
    DL_CHECK(strstr(text, "dim N = 64\n") != NULL);
    DL_CHECK(strstr(text, "input  x      : float[N, 784]\n") != NULL);
    DL_CHECK(strstr(text, "h     = Gemm <transA = 0> (x, w1, b1)\n") != NULL);
    free(text);
    // The verifier points the stray sym out.
    DL_CHECK(dl_ir_verify(m, d) != DL_OK);
    DL_CHECK(dl_diags_count(d) == 1 &&
             strstr(dl_diags_get(d, 0)->msg, "verify: Gemm: attribute 'transA' is 0 but dim N"));
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(print_is_deterministic) {
    mlp_opts o = {.comments = true};
    dl_ir_module *m1 = build_mlp(&o), *m2 = build_mlp(&o);
    DL_CHECK(m1 && m2);
    char *t1 = NULL, *t2 = NULL;
    DL_CHECK_OK(dl_ir_print(m1, &t1));
    DL_CHECK_OK(dl_ir_print(m2, &t2));
    DL_CHECK_STR_EQ(t1, t2);
    free(t1);
    free(t2);
    dl_ir_module_destroy(m1);
    dl_ir_module_destroy(m2);
}

// ---------------------------------------------------------------------------------------------
// Canonical form

DL_TEST(canon_starts_with_version_and_renumbers) {
    mlp_opts o = {0};
    char *c = canon_of(&o, 0);
    DL_CHECK(c != NULL);
    DL_CHECK(strncmp(c, "dlcc-canon 1\n", 13) == 0);
    DL_CHECK(strstr(c, " %0 ") != NULL);     // h is renumbered
    DL_CHECK(strstr(c, "1:h") == NULL);      // and its name is gone
    DL_CHECK(strstr(c, " 5:probs") != NULL); // outputs keep their names
    DL_CHECK(strstr(c, " 1:x") != NULL);     // inputs too
    free(c);
}

DL_TEST(canon_invariance) {
    mlp_opts ref = {0};
    char *c0 = canon_of(&ref, 0);
    DL_CHECK(c0 != NULL);
    mlp_opts same[] = {
        {.hidden = "hidden_layer_output"}, // intermediate renamed
        {.comments = true},                // comments and blank lines
        {.explicit_default = true},        // Softmax <axis = -1>
        {.int_alpha = true},               // alpha = 1 vs 1.0
        {.lr = 1e-3},                      // lr written explicitly at its value
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(same); i++) {
        char *c = canon_of(&same[i], 0);
        DL_CHECK(c != NULL);
        bool eq = strcmp(c, c0) == 0;
        if (!eq) {
            fprintf(stderr, "variant %zu differs:\n%s\n--- vs\n%s\n", i, c, c0);
        }
        free(c);
        DL_CHECK(eq);
    }
    free(c0);
}

DL_TEST(canon_sensitivity) {
    mlp_opts ref = {0};
    char *c0 = canon_of(&ref, 0);
    DL_CHECK(c0 != NULL);
    mlp_opts diff[] = {
        {.softmax_axis0 = true}, // attribute value
        {.x_f16 = true},         // dtype
        {.n = 64},               // dim value
        {.seed1 = 2},            // param seed
        {.x_name = "img"},       // input name
        {.lr = 0.01},            // optimizer attribute
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(diff); i++) {
        char *c = canon_of(&diff[i], 0);
        DL_CHECK(c != NULL);
        bool ne = strcmp(c, c0) != 0;
        if (!ne) {
            fprintf(stderr, "variant %zu serialises the same\n", i);
        }
        free(c);
        DL_CHECK(ne);
    }
    free(c0);
}

// A tiny module: y = Dropout (x[, NULL...]) then z = Gemm with two attributes in either order.
static char *canon_tiny(size_t n_dropout_inputs, bool swap_attrs) {
    dl_ir_module *m = NULL;
    if (dl_ir_module_create("tiny", &m) != DL_OK) {
        return NULL;
    }
    dl_ir_type t = type2(DL_DT_FLOAT, 2, -1, 2, -1);
    dl_ir_value *x;
    dl_ir_node *nd;
    char *text = NULL;
    size_t len;
    const char *yn = "y", *zn = "z";
    dl_ir_value *din[] = {NULL, NULL, NULL};
    dl_ir_attr ga[] = {attr_int("transB", 1), attr_float("alpha", 0.5)};
    if (swap_attrs) {
        dl_ir_attr tmp = ga[0];
        ga[0] = ga[1];
        ga[1] = tmp;
    }
    if (dl_ir_module_add_input(m, "x", &t, DL_NO_LOC, &x) != DL_OK) {
        goto out;
    }
    din[0] = x;
    if (dl_ir_module_add_node(m, DL_IR_OP_DROPOUT, din, n_dropout_inputs, &yn, NULL, 1, NULL, 0,
                              DL_NO_LOC, &nd) != DL_OK) {
        goto out;
    }
    dl_ir_value *gin[] = {nd->outputs[0], x};
    if (dl_ir_module_add_node(m, DL_IR_OP_GEMM, gin, 2, &zn, NULL, 1, ga, 2, DL_NO_LOC, &nd) !=
            DL_OK ||
        dl_ir_module_add_output(m, nd->outputs[0], DL_NO_LOC) != DL_OK) {
        goto out;
    }
    if (dl_ir_canonical(m, 0, &text, &len) != DL_OK) {
        text = NULL;
    }
out:
    dl_ir_module_destroy(m);
    return text;
}

DL_TEST(canon_trailing_omitted_inputs_and_attr_order) {
    char *a = canon_tiny(1, false), *b = canon_tiny(3, false), *c = canon_tiny(1, true);
    DL_CHECK(a && b && c);
    DL_CHECK_STR_EQ(a, b);
    DL_CHECK_STR_EQ(a, c);
    DL_CHECK(strstr(a, "notrain") != NULL);
    free(a);
    free(b);
    free(c);
}

DL_TEST(canon_hyperparams) {
    mlp_opts a = {.lr = 1e-3}, b = {.lr = 0.1};
    char *ca = canon_of(&a, 0), *cb = canon_of(&b, 0);
    char *ha = canon_of(&a, DL_IR_CANON_NO_HYPERPARAMS),
         *hb = canon_of(&b, DL_IR_CANON_NO_HYPERPARAMS);
    DL_CHECK(ca && cb && ha && hb);
    DL_CHECK(strcmp(ca, cb) != 0);
    DL_CHECK_STR_EQ(ha, hb);
    DL_CHECK(strcmp(ha, ca) != 0);
    free(ca);
    free(cb);
    free(ha);
    free(hb);
    // SGD momentum 0.9 vs 0.5: same without hyper-parameters; 0 vs 0.9 differs (state slots).
    mlp_opts m0 = {.train_sgd_momentum = true, .momentum = 0.0};
    mlp_opts m5 = {.train_sgd_momentum = true, .momentum = 0.5};
    mlp_opts m9 = {.train_sgd_momentum = true, .momentum = 0.9};
    char *h0 = canon_of(&m0, DL_IR_CANON_NO_HYPERPARAMS);
    char *h5 = canon_of(&m5, DL_IR_CANON_NO_HYPERPARAMS);
    char *h9 = canon_of(&m9, DL_IR_CANON_NO_HYPERPARAMS);
    char *f5 = canon_of(&m5, 0), *f9 = canon_of(&m9, 0);
    DL_CHECK(h0 && h5 && h9 && f5 && f9);
    DL_CHECK_STR_EQ(h5, h9);
    DL_CHECK(strcmp(h0, h5) != 0);
    DL_CHECK(strcmp(f5, f9) != 0);
    free(h0);
    free(h5);
    free(h9);
    free(f5);
    free(f9);
}

// ---------------------------------------------------------------------------------------------
// Verifier

static size_t verify_errors(const dl_ir_module *m, const char *want_substr, bool *found) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return 0;
    }
    dl_status st = dl_ir_verify(m, d);
    size_t n = dl_diags_error_count(d);
    *found = false;
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        const char *msg = dl_diags_get(d, i)->msg;
        if (strncmp(msg, "verify: ", 8) != 0) {
            n = 0; // every message must carry the prefix
            break;
        }
        if (strstr(msg, want_substr)) {
            *found = true;
        }
    }
    if ((st == DL_OK) != (n == 0)) {
        n = 0;
    }
    dl_diags_destroy(d);
    return n;
}

DL_TEST(verify_accepts_built_module) {
    mlp_opts o = {.comments = true};
    dl_ir_module *m = build_mlp(&o);
    DL_CHECK(m != NULL);
    bool found;
    DL_CHECK_EQ_I64(verify_errors(m, "", &found), 0);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_OK(dl_ir_verify(m, d));
    dl_diags_destroy(d);
    dl_ir_module_destroy(m);
}

DL_TEST(verify_catches_broken_modules) {
    mlp_opts o = {0};
    bool found;
    dl_ir_module *m;
    // Node 0 (Gemm) uses the output of node 1 (Relu): use before definition.
    m = build_mlp(&o);
    DL_CHECK(m != NULL);
    m->nodes.data[0]->inputs[0] = m->nodes.data[1]->outputs[0];
    DL_CHECK(verify_errors(m, "before its definition", &found) > 0 && found);
    dl_ir_module_destroy(m);
    // Unknown attribute and wrong attribute kind.
    m = build_mlp(&o);
    m->nodes.data[0]->attrs[0].name = "gamma";
    DL_CHECK(verify_errors(m, "unknown attribute 'gamma'", &found) > 0 && found);
    m->nodes.data[0]->attrs[0] = attr_str("alpha", "one");
    DL_CHECK(verify_errors(m, "attribute 'alpha' must be float", &found) > 0 && found);
    dl_ir_module_destroy(m);
    // Arity outside the op table's bounds, and a missing required input.
    m = build_mlp(&o);
    m->nodes.data[1]->n_inputs = 2;
    m->nodes.data[1]->inputs = m->nodes.data[0]->inputs;
    DL_CHECK(verify_errors(m, "Relu: 2 inputs, expected 1 to 1", &found) > 0 && found);
    dl_ir_module_destroy(m);
    m = build_mlp(&o);
    m->nodes.data[0]->inputs[1] = NULL;
    DL_CHECK(verify_errors(m, "required input 1 is missing", &found) > 0 && found);
    dl_ir_module_destroy(m);
    // is_output without being listed; ids out of place.
    m = build_mlp(&o);
    m->nodes.data[1]->outputs[0]->is_output = true;
    DL_CHECK(verify_errors(m, "marked as an output", &found) > 0 && found);
    m->nodes.data[1]->outputs[0]->is_output = false;
    m->nodes.data[2]->id = 7;
    DL_CHECK(verify_errors(m, "has id 7", &found) > 0 && found);
    dl_ir_module_destroy(m);
    // Train: freeze of a non-param, loss from another module.
    m = build_mlp(&o);
    dl_ir_module *other = build_mlp(&o);
    DL_CHECK(m && other);
    m->train->freeze = &m->inputs.data[0];
    m->train->n_freeze = 1;
    DL_CHECK(verify_errors(m, "freeze entry 'x' is not a param", &found) > 0 && found);
    m->train->n_freeze = 0;
    m->train->loss = other->nodes.data[3]->outputs[0];
    DL_CHECK(verify_errors(m, "train loss 'loss' is not a value of the module", &found) > 0 &&
             found);
    dl_ir_module_destroy(other);
    dl_ir_module_destroy(m);
    // Missing required attribute (Reshape shape) and unknown optimizer attribute.
    m = build_mlp(&o);
    m->nodes.data[1]->op = DL_IR_OP_RESHAPE;
    DL_CHECK(verify_errors(m, "Reshape: required attribute 'shape' is missing", &found) > 0 &&
             found);
    m->nodes.data[1]->op = DL_IR_OP_RELU;
    m->train->opt_attrs[0].name = "momentum";
    DL_CHECK(verify_errors(m, "optimizer adam: unknown attribute 'momentum'", &found) > 0 && found);
    dl_ir_module_destroy(m);
}

DL_TEST_MAIN()
