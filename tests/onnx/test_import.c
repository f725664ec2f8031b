// tests/onnx/test_import.c — unit tests of the ONNX importer (frontend/onnx_import.c): the module
// it builds from real node-test models (Debian's libonnx-testdata; those tests pass vacuously
// when it is not installed) and from the hand-made models in tests/onnx/data (make_models.py),
// the .pb tensor reader, and its diagnostics on unsupported or malformed input.
#include "dl_test.h"
#include "fe_onnx.h"

#include <unistd.h>

#define NODE_DIR DL_ONNX_NODE_DIR
#define DATA_DIR DL_ONNX_DATA_DIR

static bool have_node_data(const char *test) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/model.onnx", NODE_DIR, test);
    if (access(p, R_OK) != 0) {
        fprintf(stderr, "note: %s missing, test skipped\n", p);
        return false;
    }
    return true;
}

static dl_status import_node(const char *test, dl_diags *d, dl_ir_module **m,
                             dl_fe_onnx_info *info) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/model.onnx", NODE_DIR, test);
    return dl_fe__import_onnx_ex(p, NULL, NULL, 0, false, NULL, d, m, info);
}

static bool diags_mention(const dl_diags *d, const char *needle) {
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        if (strstr(dl_diags_get(d, i)->msg, needle)) {
            return true;
        }
    }
    return false;
}

DL_TEST(onnx_gemm_attrs) {
    if (!have_node_data("test_gemm_all_attributes")) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    dl_status st = import_node("test_gemm_all_attributes", d, &m, NULL);
    DL_CHECK_EQ_I64(st, DL_OK);
    DL_CHECK_EQ_I64(m->inputs.len, 3);
    DL_CHECK_STR_EQ(m->inputs.data[0]->name, "a");
    DL_CHECK_EQ_I64(m->inputs.data[0]->type.dtype, DL_DT_FLOAT);
    DL_CHECK_EQ_I64(m->inputs.data[0]->type.rank, 2);
    DL_CHECK_EQ_I64(m->inputs.data[0]->type.dims[0].value, 4);
    DL_CHECK_EQ_I64(m->inputs.data[0]->type.dims[1].value, 3);
    DL_CHECK_STR_EQ(m->inputs.data[2]->name, "c");
    DL_CHECK_EQ_I64(m->nodes.len, 1);
    const dl_ir_node *n = m->nodes.data[0];
    DL_CHECK_EQ_I64(n->op, DL_IR_OP_GEMM);
    DL_CHECK_EQ_I64(n->n_inputs, 3);
    DL_CHECK(n->inputs[1] == m->inputs.data[1]);
    DL_CHECK_EQ_I64(n->n_attrs, 4);
    DL_CHECK_NEAR(dl_ir_node_attr_float(n, "alpha"), 0.25, 0, 0);
    // 0.35f reads back as the tidy decimal, not 0.3499999940395355
    DL_CHECK_NEAR(dl_ir_node_attr_float(n, "beta"), 0.35, 0, 0);
    DL_CHECK_EQ_I64(dl_ir_node_attr_int(n, "transA"), 1);
    DL_CHECK_EQ_I64(dl_ir_node_attr(n, "transB")->kind, DL_IR_ATTR_INT);
    DL_CHECK_EQ_I64(m->outputs.len, 1);
    DL_CHECK_STR_EQ(m->outputs.data[0]->name, "y");
    DL_CHECK(m->outputs.data[0] == n->outputs[0]);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST(onnx_cast_to_is_dtype_name) {
    if (!have_node_data("test_cast_FLOAT_to_FLOAT16")) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(import_node("test_cast_FLOAT_to_FLOAT16", d, &m, NULL), DL_OK);
    const dl_ir_attr *to = dl_ir_node_attr(m->nodes.data[0], "to");
    DL_CHECK(to != NULL);
    DL_CHECK_EQ_I64(to->kind, DL_IR_ATTR_STRING);
    DL_CHECK_STR_EQ(to->s, "float16");
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// A Reshape fed by a graph input: the first import names the input that must be bound; the
// second, with input_1.pb bound, turns it into the `shape` attribute and drops the input.
DL_TEST(onnx_reshape_binds_shape_input) {
    const char *t = "test_reshape_reordered_all_dims";
    if (!have_node_data(t)) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    dl_fe_onnx_info info;
    DL_CHECK_EQ_I64(import_node(t, d, &m, &info), DL_ERR_UNSUPPORTED);
    DL_CHECK(m == NULL);
    DL_CHECK(diags_mention(d, "must be constant"));
    DL_CHECK(diags_mention(d, "Reshape"));
    DL_CHECK_EQ_I64(info.n_graph_inputs, 2);
    DL_CHECK_EQ_I64(info.n_need_const, 1);
    DL_CHECK_EQ_I64(info.need_const[0], 1);
    DL_CHECK_STR_EQ(info.need_const_names[0], "shape");
    dl_fe__onnx_info_fini(&info);

    char p[512], nm[64];
    snprintf(p, sizeof p, "%s/%s/test_data_set_0/input_1.pb", NODE_DIR, t);
    dl_tensor shape;
    DL_CHECK_EQ_I64(dl_fe__onnx_read_tensor_pb(p, &shape, nm, sizeof nm, d), DL_OK);
    DL_CHECK_STR_EQ(nm, "shape");
    DL_CHECK_EQ_I64(shape.dtype, DL_DT_INT64);
    DL_CHECK_EQ_I64(shape.rank, 1);
    DL_CHECK_EQ_I64(shape.dims[0], 3);
    const char *names[] = {"shape"};
    snprintf(p, sizeof p, "%s/%s/model.onnx", NODE_DIR, t);
    dl_diags_clear(d);
    dl_status st = dl_fe__import_onnx_ex(p, names, &shape, 1, false, NULL, d, &m, &info);
    DL_CHECK_EQ_I64(st, DL_OK);
    DL_CHECK_EQ_I64(m->inputs.len, 1);
    DL_CHECK_EQ_I64(info.n_input_src, 1);
    DL_CHECK_EQ_I64(info.input_src[0], 0);
    const dl_ir_node *n = m->nodes.data[0];
    DL_CHECK_EQ_I64(n->op, DL_IR_OP_RESHAPE);
    DL_CHECK_EQ_I64(n->n_inputs, 1);
    const dl_ir_attr *a = dl_ir_node_attr(n, "shape");
    DL_CHECK(a != NULL && a->kind == DL_IR_ATTR_INTS);
    DL_CHECK_EQ_I64(a->n, 3);
    DL_CHECK_EQ_I64(a->ints[0], ((int64_t *)shape.data)[0]);
    DL_CHECK_EQ_I64(a->ints[2], ((int64_t *)shape.data)[2]);
    dl_fe__onnx_info_fini(&info);
    dl_tensor_free(&shape);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// Pad: `pads` becomes an attribute, constant_value stays an input (now input 1).
DL_TEST(onnx_pad_keeps_constant_value_input) {
    const char *t = "test_constant_pad";
    if (!have_node_data(t)) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    char p[512];
    snprintf(p, sizeof p, "%s/%s/test_data_set_0/input_1.pb", NODE_DIR, t);
    dl_tensor pads;
    DL_CHECK_EQ_I64(dl_fe__onnx_read_tensor_pb(p, &pads, NULL, 0, d), DL_OK);
    const char *names[] = {"pads"};
    snprintf(p, sizeof p, "%s/%s/model.onnx", NODE_DIR, t);
    dl_ir_module *m = NULL;
    dl_fe_onnx_info info;
    DL_CHECK_EQ_I64(dl_fe__import_onnx_ex(p, names, &pads, 1, false, NULL, d, &m, &info), DL_OK);
    DL_CHECK_EQ_I64(m->inputs.len, 2);
    DL_CHECK_STR_EQ(m->inputs.data[1]->name, "value");
    DL_CHECK_EQ_I64(m->inputs.data[1]->type.rank, 0);
    DL_CHECK_EQ_I64(info.input_src[1], 2);
    const dl_ir_node *n = m->nodes.data[0];
    DL_CHECK_EQ_I64(n->n_inputs, 2);
    DL_CHECK(n->inputs[1] == m->inputs.data[1]);
    DL_CHECK_EQ_I64(dl_ir_node_attr(n, "pads")->n, 8);
    DL_CHECK_STR_EQ(dl_ir_node_attr_string(n, "mode"), "constant");
    dl_fe__onnx_info_fini(&info);
    dl_tensor_free(&pads);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST(onnx_maxpool_two_outputs) {
    const char *t = "test_maxpool_with_argmax_2d_precomputed_pads";
    if (!have_node_data(t)) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(import_node(t, d, &m, NULL), DL_OK);
    const dl_ir_node *n = m->nodes.data[0];
    DL_CHECK_EQ_I64(n->n_outputs, 2);
    DL_CHECK_STR_EQ(n->outputs[1]->name, "z");
    DL_CHECK_EQ_I64(m->outputs.len, 2);
    const dl_ir_attr *ks = dl_ir_node_attr(n, "kernel_shape");
    DL_CHECK(ks && ks->n == 2 && ks->ints[0] == 5);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST(onnx_unsupported_op_and_dtype) {
    if (!have_node_data("test_acos") || !have_node_data("test_cast_FLOAT_to_DOUBLE")) {
        return;
    }
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(import_node("test_acos", d, &m, NULL), DL_ERR_UNSUPPORTED);
    DL_CHECK(m == NULL);
    DL_CHECK(diags_mention(d, "op 'Acos' is not supported"));
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(import_node("test_cast_FLOAT_to_DOUBLE", d, &m, NULL), DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "double"));
    char why[256], p[512];
    snprintf(p, sizeof p, "%s/test_acos/model.onnx", NODE_DIR);
    DL_CHECK_EQ_I64(dl_fe__onnx_probe(p, why, sizeof why), DL_ERR_UNSUPPORTED);
    DL_CHECK(strstr(why, "Acos") != NULL);
    snprintf(p, sizeof p, "%s/test_relu/model.onnx", NODE_DIR);
    DL_CHECK_EQ_I64(dl_fe__onnx_probe(p, why, sizeof why), DL_OK);
    // Unsqueeze at opset 11 took `axes` as an attribute: imported like opset 13's input.
    snprintf(p, sizeof p, "%s/test_unsqueeze_axis_3/model.onnx", NODE_DIR);
    DL_CHECK_EQ_I64(dl_fe__onnx_probe(p, why, sizeof why), DL_OK);
    // And at opset 7 is the definition opset 17 still uses.
    snprintf(p, sizeof p, "%s/test_and2d/model.onnx", NODE_DIR);
    DL_CHECK_EQ_I64(dl_fe__onnx_probe(p, why, sizeof why), DL_OK);
    dl_diags_destroy(d);
}

// Hand-made model: names that need mangling, initializers, Constant nodes.
DL_TEST(onnx_names_initializers_constants) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    dl_status st = dl_fe_import_onnx(DATA_DIR "/names.onnx", false, d, &m);
    DL_CHECK_EQ_I64(st, DL_OK);
    DL_CHECK_STR_EQ(m->name, "names_test");
    DL_CHECK_EQ_I64(m->inputs.len, 2);
    DL_CHECK_STR_EQ(m->inputs.data[0]->name, "v1x");
    DL_CHECK_STR_EQ(m->inputs.data[1]->name, "a_b");
    // `shp` is only a Reshape shape: it becomes an attribute and no param.
    DL_CHECK_EQ_I64(m->params.len, 1);
    const dl_ir_value *w = m->params.data[0];
    DL_CHECK_STR_EQ(w->name, "w");
    DL_CHECK_EQ_I64(w->init->kind, DL_IR_INIT_LITERAL);
    DL_CHECK_EQ_I64(w->init->lit->n, 6);
    DL_CHECK_NEAR(w->init->lit->f[5], 5.0, 0, 0);
    // Constant `cshape` feeds only a shape: dropped; `two` feeds Div: a const.
    DL_CHECK_EQ_I64(m->consts.len, 1);
    DL_CHECK_STR_EQ(m->consts.data[0]->name, "two");
    DL_CHECK_EQ_I64(m->consts.data[0]->type.rank, 0);
    DL_CHECK_NEAR(m->consts.data[0]->lit->f[0], 2.0, 0, 0);
    DL_CHECK_EQ_I64(m->nodes.len, 7);
    // ONNX "a_b" clashes with the mangled input "a:b".
    DL_CHECK_STR_EQ(m->nodes.data[0]->outputs[0]->name, "a_b_1");
    DL_CHECK(m->nodes.data[1]->inputs[0] == m->nodes.data[0]->outputs[0]);
    const dl_ir_attr *shape = dl_ir_node_attr(m->nodes.data[2], "shape");
    DL_CHECK(shape && shape->n == 2 && shape->ints[0] == 3 && shape->ints[1] == 2);
    DL_CHECK_EQ_I64(m->nodes.data[2]->n_inputs, 1);
    DL_CHECK_STR_EQ(m->nodes.data[3]->outputs[0]->name, "out_0");
    DL_CHECK_STR_EQ(dl_ir_node_attr_string(m->nodes.data[4], "to"), "float16");
    DL_CHECK_NEAR(dl_ir_node_attr_float(m->nodes.data[6], "alpha"), 0.1, 0, 0);
    DL_CHECK_EQ_I64(m->outputs.len, 3);
    DL_CHECK_STR_EQ(m->outputs.data[0]->name, "out_0");
    DL_CHECK_STR_EQ(m->outputs.data[2]->name, "lr");
    dl_ir_module_destroy(m);

    // initializers_as_consts: `w` is a const.
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/names.onnx", true, d, &m), DL_OK);
    DL_CHECK_EQ_I64(m->params.len, 0);
    DL_CHECK_EQ_I64(m->consts.len, 2);
    DL_CHECK_STR_EQ(m->consts.data[0]->name, "w");
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

DL_TEST(onnx_rejects_bad_models) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/computed_shape.onnx", false, d, &m),
                    DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "computed by node 0"));
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/opset18.onnx", false, d, &m), DL_OK);
    dl_ir_module_destroy(m);
    m = NULL;
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/opset22.onnx", false, d, &m), DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "opset 22 is not supported (opsets 1-21"));
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/domain.onnx", false, d, &m), DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "com.example"));
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/no_such.onnx", false, d, &m), DL_ERR_IO);
    dl_diags_clear(d);
    // Garbage bytes and every truncation of a real model: an error, never a crash.
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/make_models.py", false, d, &m), DL_ERR_PARSE);
    char *buf;
    size_t len;
    DL_CHECK(dl_read_file(DATA_DIR "/names.onnx", &buf, &len) == DL_OK);
    char tmp[] = "/tmp/dl_onnx_trunc_XXXXXX";
    int fd = mkstemp(tmp);
    DL_CHECK(fd >= 0);
    close(fd);
    for (size_t cut = 0; cut < len; cut += 7) {
        FILE *f = fopen(tmp, "wb");
        DL_CHECK(f != NULL);
        fwrite(buf, 1, cut, f);
        fclose(f);
        dl_status st = dl_fe_import_onnx(tmp, false, d, &m);
        if (st == DL_OK) {
            dl_ir_module_destroy(m); // a prefix can be a smaller valid message
        } else {
            DL_CHECK(m == NULL);
        }
        dl_diags_clear(d);
    }
    unlink(tmp);
    free(buf);
    dl_diags_destroy(d);
}

// ---------------------------------------------------------------------------------------------
// Aliased initializers

static size_t count_notes(const dl_diags *d) {
    size_t n = 0;
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        n += dl_diags_get(d, i)->sev == DL_SEV_NOTE;
    }
    return n;
}

static const dl_ir_node *find_op(const dl_ir_module *m, dl_ir_op op, size_t nth) {
    for (size_t i = 0; i < m->nodes.len; i++) {
        if (m->nodes.data[i]->op == op && nth-- == 0) {
            return m->nodes.data[i];
        }
    }
    return NULL;
}

// torch.onnx.export's merge of equal initializers: running_var = Identity(weight). Each
// statistic must be a param of its own (training updates it), not the weight.
DL_TEST(onnx_identity_alias_becomes_own_param) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_OK(dl_fe_import_onnx(DATA_DIR "/bn_alias.onnx", false, d, &m));
    DL_CHECK(find_op(m, DL_IR_OP_IDENTITY, 0) == NULL);
    const dl_ir_node *bn = find_op(m, DL_IR_OP_BATCH_NORMALIZATION, 0);
    DL_CHECK(bn != NULL);
    DL_CHECK_EQ_I64(m->params.len, 4);
    for (size_t k = 1; k <= 4; k++) {
        DL_CHECK(bn->inputs[k]->kind == DL_IR_VAL_PARAM);
        for (size_t j = 1; j < k; j++) {
            DL_CHECK(bn->inputs[k] != bn->inputs[j]);
        }
    }
    DL_CHECK_STR_EQ(bn->inputs[3]->name, "bn.running_mean");
    DL_CHECK_STR_EQ(bn->inputs[4]->name, "bn.running_var");
    // The copies hold the values (ones for the variance, zeros for the mean).
    DL_CHECK(bn->inputs[4]->init->kind == DL_IR_INIT_LITERAL);
    DL_CHECK(bn->inputs[4]->init->lit->f[2] == 1.0);
    DL_CHECK(bn->inputs[3]->init->lit->f[0] == 0.0);
    DL_CHECK_EQ_I64(count_notes(d), 2);
    DL_CHECK(diags_mention(d, "alias of initializer 'bn.weight'"));
    dl_ir_module_destroy(m);
    // With --consts nothing is trained: the Identity stays.
    dl_diags_clear(d);
    DL_CHECK_OK(dl_fe_import_onnx(DATA_DIR "/bn_alias.onnx", true, d, &m));
    DL_CHECK(find_op(m, DL_IR_OP_IDENTITY, 0) != NULL);
    DL_CHECK_EQ_I64(count_notes(d), 0);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// One initializer named as weight and as running_var; statistics shared by two BatchNorms.
DL_TEST(onnx_shared_stat_initializer_is_copied) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_OK(dl_fe_import_onnx(DATA_DIR "/bn_shared.onnx", false, d, &m));
    const dl_ir_node *b1 = find_op(m, DL_IR_OP_BATCH_NORMALIZATION, 0);
    const dl_ir_node *b2 = find_op(m, DL_IR_OP_BATCH_NORMALIZATION, 1);
    const dl_ir_node *b3 = find_op(m, DL_IR_OP_BATCH_NORMALIZATION, 2);
    DL_CHECK(b1 && b2 && b3);
    // bn1: weight and bias keep the originals, the statistics are copies named after the node.
    DL_CHECK_STR_EQ(b1->inputs[1]->name, "bn.weight");
    DL_CHECK_STR_EQ(b1->inputs[2]->name, "bn.bias");
    DL_CHECK_STR_EQ(b1->inputs[3]->name, "bn1.running_mean");
    DL_CHECK_STR_EQ(b1->inputs[4]->name, "bn1.running_var");
    DL_CHECK(b1->inputs[4]->kind == DL_IR_VAL_PARAM);
    // Tied scale and bias stay shared between the BatchNorms (weights may be tied) ...
    DL_CHECK(b2->inputs[1] == b1->inputs[1] && b3->inputs[2] == b1->inputs[2]);
    // ... but the second and third never share statistics: the first keeps rm/rv.
    DL_CHECK_STR_EQ(b2->inputs[3]->name, "rm");
    DL_CHECK_STR_EQ(b2->inputs[4]->name, "rv");
    DL_CHECK(b3->inputs[3] != b2->inputs[3] && b3->inputs[4] != b2->inputs[4]);
    DL_CHECK(b3->inputs[3]->kind == DL_IR_VAL_PARAM && b3->inputs[4]->kind == DL_IR_VAL_PARAM);
    DL_CHECK_EQ_I64(count_notes(d), 4);
    DL_CHECK(diags_mention(d, "running_var operand 'bn.weight' is also used elsewhere"));
    dl_ir_module_destroy(m);
    // Tied weights of two MatMuls: one param, no note.
    dl_diags_clear(d);
    DL_CHECK_OK(dl_fe_import_onnx(DATA_DIR "/tied_weights.onnx", false, d, &m));
    DL_CHECK_EQ_I64(m->params.len, 1);
    DL_CHECK(find_op(m, DL_IR_OP_MATMUL, 0)->inputs[1] ==
             find_op(m, DL_IR_OP_MATMUL, 1)->inputs[1]);
    DL_CHECK_EQ_I64(count_notes(d), 0);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// 841 ONNX names that all sanitize to "y__": each gets the smallest free "_<n>" suffix, in graph
// order (the suffix search resumes where it stopped, so this costs O(n), not O(n^2)).
DL_TEST(onnx_clashing_names) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_OK(dl_fe_import_onnx(DATA_DIR "/clash.onnx", false, d, &m));
    DL_CHECK_EQ_I64(m->nodes.len, 841);
    DL_CHECK_STR_EQ(m->nodes.data[0]->outputs[0]->name, "y__");
    DL_CHECK_STR_EQ(m->nodes.data[1]->outputs[0]->name, "y___1");
    DL_CHECK_STR_EQ(m->nodes.data[840]->outputs[0]->name, "y___840");
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
}

// ---------------------------------------------------------------------------------------------
// Hostile input

// Size bombs: the declared size is checked against the data present before any allocation.
DL_TEST(onnx_initializer_size_bomb) {
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/size_bomb.onnx", false, d, &m),
                    DL_ERR_UNSUPPORTED);
    DL_CHECK(m == NULL);
    DL_CHECK(diags_mention(d, "initializer 'big' holds 0 values, its shape [100000, 100000] "
                              "needs 10000000000"));
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/neg_dim.onnx", false, d, &m), DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "initializer 'big' has negative dimension -1"));
    dl_diags_destroy(d);
}

// A tiny protobuf writer that builds messages back to front, so that deeply nested messages
// cost linear time: each wrapper is prepended around everything written so far.
typedef struct rbuf {
    uint8_t *data;
    size_t cap, pos; // bytes live in [pos, cap)
} rbuf;

static void rb_bytes(rbuf *b, const void *p, size_t n) {
    DL_ASSERT(n <= b->pos);
    b->pos -= n;
    memcpy(b->data + b->pos, p, n);
}

static void rb_varint(rbuf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) {
            tmp[n] |= 0x80;
        }
        n++;
    } while (v);
    rb_bytes(b, tmp, n);
}

// Wraps everything from pos to `end` as length-delimited field `field`.
static void rb_wrap(rbuf *b, uint32_t field, size_t end) {
    rb_varint(b, end - b->pos);
    rb_varint(b, (uint64_t)field << 3 | 2);
}

static void rb_string(rbuf *b, uint32_t field, const char *s) {
    size_t end = b->pos;
    rb_bytes(b, s, strlen(s));
    rb_wrap(b, field, end);
}

static void rb_int(rbuf *b, uint32_t field, uint64_t v) {
    rb_varint(b, v);
    rb_varint(b, (uint64_t)field << 3);
}

// ModelProto{ir_version 8, opset_import {"" 17}, graph = everything written so far}.
static void rb_model(rbuf *b) {
    rb_wrap(b, 7, b->cap);
    size_t end = b->pos;
    rb_int(b, 2, 17);
    rb_wrap(b, 8, end);
    rb_int(b, 1, 8);
}

// `levels` If nodes, each the then_branch of the previous one's.
static void deep_if(rbuf *b, size_t levels) {
    for (size_t i = 0; i < levels; i++) {
        rb_wrap(b, 6, b->cap);          // AttributeProto.g
        rb_int(b, 20, 5);               // AttributeProto.type = GRAPH
        rb_string(b, 1, "then_branch"); // AttributeProto.name
        rb_wrap(b, 5, b->cap);          // NodeProto.attribute
        rb_string(b, 4, "If");          // NodeProto.op_type
        rb_wrap(b, 1, b->cap);          // GraphProto.node
    }
}

// A graph input whose type is `levels` nested sequence types.
static void deep_type(rbuf *b, size_t levels) {
    for (size_t i = 0; i < levels; i++) {
        rb_wrap(b, 1, b->cap); // Sequence.elem_type
        rb_wrap(b, 4, b->cap); // TypeProto.sequence_type
    }
    rb_wrap(b, 2, b->cap);  // ValueInfoProto.type
    rb_string(b, 1, "x");   // ValueInfoProto.name
    rb_wrap(b, 11, b->cap); // GraphProto.input
}

// 100000 nested If subgraphs overflowed the stack inside protobuf-c's unpack (SIGSEGV); now the
// nesting is measured before unpacking and refused.
DL_TEST(onnx_deep_nesting_is_refused) {
    rbuf b = {NULL, (size_t)8 << 20, (size_t)8 << 20};
    b.data = malloc(b.cap);
    DL_CHECK(b.data != NULL);
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    deep_if(&b, 100000);
    rb_model(&b);
    DL_CHECK_EQ_I64(
        dl_fe__import_onnx_mem("deep.onnx", b.data + b.pos, b.cap - b.pos, false, d, &m),
        DL_ERR_PARSE);
    DL_CHECK(m == NULL);
    DL_CHECK(diags_mention(d, "deep.onnx: not a valid ONNX model (messages nested more than 100"));
    // TypeProto nests too (sequence of sequence of ...).
    dl_diags_clear(d);
    b.pos = b.cap;
    deep_type(&b, 200000);
    rb_model(&b);
    DL_CHECK_EQ_I64(
        dl_fe__import_onnx_mem("deep.onnx", b.data + b.pos, b.cap - b.pos, false, d, &m),
        DL_ERR_PARSE);
    DL_CHECK(diags_mention(d, "nested more than 100"));
    // A nesting within the limit decodes (and is refused for what it is: If is not supported).
    dl_diags_clear(d);
    b.pos = b.cap;
    deep_if(&b, 20);
    rb_model(&b);
    DL_CHECK_EQ_I64(dl_fe__import_onnx_mem("ok.onnx", b.data + b.pos, b.cap - b.pos, false, d, &m),
                    DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "op 'If' is not supported"));
    // Malformed framing: a length running past the end, an unknown wire type.
    static const uint8_t bad_len[] = {0x3a, 0x7f, 0x0a};
    static const uint8_t bad_wire[] = {0x0f, 0x00};
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_fe__import_onnx_mem("b.onnx", bad_len, sizeof bad_len, false, d, &m),
                    DL_ERR_PARSE);
    DL_CHECK(diags_mention(d, "bad length"));
    DL_CHECK_EQ_I64(dl_fe__import_onnx_mem("b.onnx", bad_wire, sizeof bad_wire, false, d, &m),
                    DL_ERR_PARSE);
    DL_CHECK(diags_mention(d, "wire type 7"));
    DL_CHECK_EQ_I64(dl_fe__import_onnx_mem("e.onnx", "", 0, false, d, &m), DL_ERR_PARSE);
    free(b.data);
    dl_diags_destroy(d);
}

// Empty submessages unpack to ~100 bytes each: decoding has a memory budget proportional to the
// input, and allocation failures inside protobuf-c are reported as such.
DL_TEST(onnx_decode_budget_and_oom) {
    size_t n = (size_t)6 << 20; // 3M empty nodes in 6 MiB: ~400 MB unpacked
    rbuf b = {NULL, n + 64, n + 64};
    b.data = malloc(b.cap);
    DL_CHECK(b.data != NULL);
    b.pos -= n;
    for (size_t i = 0; i < n; i += 2) {
        b.data[b.pos + i] = 0x0a; // GraphProto.node, length 0
        b.data[b.pos + i + 1] = 0x00;
    }
    rb_model(&b);
    dl_diags *d;
    DL_CHECK(dl_diags_create(&d) == DL_OK);
    dl_ir_module *m = NULL;
    DL_CHECK_EQ_I64(
        dl_fe__import_onnx_mem("bomb.onnx", b.data + b.pos, b.cap - b.pos, false, d, &m),
        DL_ERR_PARSE);
    DL_CHECK(diags_mention(d, "decoding would take more than"));
    free(b.data);
    // Every allocation of an import failing in turn: DL_ERR_NOMEM, never a crash or a leak.
    static const char *const models[] = {DATA_DIR "/names.onnx", DATA_DIR "/bn_alias.onnx",
                                         DATA_DIR "/bn_shared.onnx"};
    for (size_t mi = 0; mi < DL_ARRAY_LEN(models); mi++) {
        char *buf;
        size_t len;
        DL_CHECK(dl_read_file(models[mi], &buf, &len) == DL_OK);
        bool done = false;
        for (long k = 0; k < 100000 && !done; k++) {
            dl_diags_clear(d);
            dl_test_fail_alloc_after(k);
            dl_status st = dl_fe__import_onnx_mem("names.onnx", buf, len, false, d, &m);
            bool failed = dl_test_alloc_failed();
            dl_test_fail_alloc_after(-1);
            if (st == DL_OK) {
                DL_CHECK(!failed);
                dl_ir_module_destroy(m);
                done = true;
            } else {
                if (st != DL_ERR_NOMEM) {
                    fprintf(stderr, "allocation %ld failing: %s\n", k,
                            dl_diags_count(d) ? dl_diags_get(d, 0)->msg : "(no diagnostic)");
                }
                DL_CHECK_EQ_I64(st, DL_ERR_NOMEM);
                DL_CHECK(m == NULL);
            }
        }
        DL_CHECK(done);
        free(buf);
    }
    dl_diags_destroy(d);
}

DL_TEST_MAIN()
