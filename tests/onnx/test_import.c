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
    return dl_fe__import_onnx_ex(p, NULL, NULL, 0, false, d, m, info);
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
    dl_status st = dl_fe__import_onnx_ex(p, names, &shape, 1, false, d, &m, &info);
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
    DL_CHECK_EQ_I64(dl_fe__import_onnx_ex(p, names, &pads, 1, false, d, &m, &info), DL_OK);
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
    // Unsqueeze at opset 11 took `axes` as an attribute: a different definition, not accepted.
    snprintf(p, sizeof p, "%s/test_unsqueeze_axis_3/model.onnx", NODE_DIR);
    DL_CHECK_EQ_I64(dl_fe__onnx_probe(p, why, sizeof why), DL_ERR_UNSUPPORTED);
    DL_CHECK(strstr(why, "opset 11") != NULL);
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
    DL_CHECK_EQ_I64(dl_fe_import_onnx(DATA_DIR "/opset18.onnx", false, d, &m), DL_ERR_UNSUPPORTED);
    DL_CHECK(diags_mention(d, "opset 18"));
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

DL_TEST_MAIN()
