// ir/ir_ops.c — per-op metadata generated from ir_ops.def, plus each op's attribute specs
// (ONNX opset 17 names, kinds and defaults) and the optimizer / loss-scale specs of the train
// block (PyTorch's defaults).
//
// Where the graph format takes an ONNX shape-like *input* as an attribute (Reshape shape, Slice
// starts/ends/axes/steps, Squeeze/Unsqueeze/Reduce* axes, Expand shape, Pad pads, Split split),
// the spec below lists it as an INTS attribute. Clip (min/max) and Dropout (ratio) also accept
// their older-opset attributes as a convenience for hand-written models; giving both the
// attribute and the input is an error reported by the frontend.
#include "dl_ir.h"

#include <string.h>

#define A_INT(n, d)           {n, DL_IR_ATTR_INT, false, d, 0, NULL, false, 0, NULL}
#define A_INT_MIN(n, d, lo)   {n, DL_IR_ATTR_INT, false, d, 0, NULL, true, lo, NULL}
#define A_INT_REQ(n)          {n, DL_IR_ATTR_INT, true, 0, 0, NULL, false, 0, NULL}
#define A_BOOL(n, d)          {n, DL_IR_ATTR_INT, false, d, 0, NULL, true, 0, NULL}
#define A_FLOAT(n, d)         {n, DL_IR_ATTR_FLOAT, false, 0, d, NULL, false, 0, NULL}
#define A_STR(n, d, ch)       {n, DL_IR_ATTR_STRING, false, 0, 0, d, false, 0, ch}
#define A_INTS(n)             {n, DL_IR_ATTR_INTS, false, 0, 0, NULL, false, 0, NULL}
#define A_INTS_MIN(n, lo)     {n, DL_IR_ATTR_INTS, false, 0, 0, NULL, true, lo, NULL}
#define A_INTS_REQ(n)         {n, DL_IR_ATTR_INTS, true, 0, 0, NULL, false, 0, NULL}
#define A_INTS_REQ_MIN(n, lo) {n, DL_IR_ATTR_INTS, true, 0, 0, NULL, true, lo, NULL}

#define AUTO_PAD  A_STR("auto_pad", "NOTSET", "NOTSET|SAME_UPPER|SAME_LOWER|VALID")
#define REDUCTION A_STR("reduction", "mean", "mean|sum|none")
#define DTYPES    "float|float16|bfloat16|int32|int64|bool"

static const dl_ir_attr_spec leaky_relu_a[] = {A_FLOAT("alpha", 0.01)};
static const dl_ir_attr_spec gelu_a[] = {A_STR("approximate", "none", "none|tanh")};
static const dl_ir_attr_spec clip_a[] = {A_FLOAT("max", 0), A_FLOAT("min", 0)};
static const dl_ir_attr_spec cast_a[] = {
    {"to", DL_IR_ATTR_STRING, true, 0, 0, NULL, false, 0, DTYPES},
    A_BOOL("saturate", 1),
};
static const dl_ir_attr_spec reduce_a[] = {A_INTS("axes"), A_BOOL("keepdims", 1),
                                           A_BOOL("noop_with_empty_axes", 0)};
static const dl_ir_attr_spec argmax_a[] = {A_INT("axis", 0), A_BOOL("keepdims", 1),
                                           A_BOOL("select_last_index", 0)};
static const dl_ir_attr_spec gemm_a[] = {A_FLOAT("alpha", 1.0), A_FLOAT("beta", 1.0),
                                         A_BOOL("transA", 0), A_BOOL("transB", 0)};
static const dl_ir_attr_spec conv_a[] = {
    AUTO_PAD,
    A_INTS_MIN("dilations", 1),
    A_INT_MIN("group", 1, 1),
    A_INTS_MIN("kernel_shape", 1),
    A_INTS_MIN("pads", 0),
    A_INTS_MIN("strides", 1),
};
static const dl_ir_attr_spec conv_transpose_a[] = {
    AUTO_PAD,
    A_INTS_MIN("dilations", 1),
    A_INT_MIN("group", 1, 1),
    A_INTS_MIN("kernel_shape", 1),
    A_INTS_MIN("output_padding", 0),
    A_INTS_MIN("output_shape", 1),
    A_INTS_MIN("pads", 0),
    A_INTS_MIN("strides", 1),
};
static const dl_ir_attr_spec max_pool_a[] = {
    AUTO_PAD,
    A_BOOL("ceil_mode", 0),
    A_INTS_MIN("dilations", 1),
    A_INTS_REQ_MIN("kernel_shape", 1),
    A_INTS_MIN("pads", 0),
    A_BOOL("storage_order", 0),
    A_INTS_MIN("strides", 1),
};
static const dl_ir_attr_spec average_pool_a[] = {
    AUTO_PAD,
    A_BOOL("ceil_mode", 0),
    A_BOOL("count_include_pad", 0),
    A_INTS_MIN("dilations", 1),
    A_INTS_REQ_MIN("kernel_shape", 1),
    A_INTS_MIN("pads", 0),
    A_INTS_MIN("strides", 1),
};
static const dl_ir_attr_spec batch_norm_a[] = {A_FLOAT("epsilon", 1e-5), A_FLOAT("momentum", 0.9),
                                               A_BOOL("training_mode", 0)};
static const dl_ir_attr_spec layer_norm_a[] = {A_INT("axis", -1), A_FLOAT("epsilon", 1e-5),
                                               A_INT("stash_type", 1)};
static const dl_ir_attr_spec softmax_a[] = {A_INT("axis", -1)};
static const dl_ir_attr_spec dropout_a[] = {A_FLOAT("ratio", 0.5), A_INT("seed", 0)};
static const dl_ir_attr_spec reshape_a[] = {A_BOOL("allowzero", 0), A_INTS_REQ("shape")};
static const dl_ir_attr_spec transpose_a[] = {A_INTS_MIN("perm", 0)};
static const dl_ir_attr_spec flatten_a[] = {A_INT("axis", 1)};
static const dl_ir_attr_spec concat_a[] = {A_INT_REQ("axis")};
static const dl_ir_attr_spec split_a[] = {A_INT("axis", 0), A_INT_MIN("num_outputs", 1, 1),
                                          A_INTS_MIN("split", 0)};
static const dl_ir_attr_spec slice_a[] = {A_INTS("axes"), A_INTS_REQ("ends"), A_INTS_REQ("starts"),
                                          A_INTS("steps")};
static const dl_ir_attr_spec gather_a[] = {A_INT("axis", 0)};
static const dl_ir_attr_spec squeeze_a[] = {A_INTS("axes")};
static const dl_ir_attr_spec unsqueeze_a[] = {A_INTS_REQ("axes")};
static const dl_ir_attr_spec expand_a[] = {A_INTS_REQ_MIN("shape", 0)};
static const dl_ir_attr_spec pad_a[] = {A_STR("mode", "constant", "constant|reflect|edge|wrap"),
                                        A_INTS_REQ("pads"), A_FLOAT("value", 0.0)};
static const dl_ir_attr_spec sce_a[] = {A_INT("ignore_index", 0), REDUCTION};
static const dl_ir_attr_spec mse_a[] = {REDUCTION};
// Internal gradient ops.
// The `op` choices are the ops whose grad hook is `unary`, filled in from the table by
// init_infos (so adding such an op needs no edit here).
static dl_ir_attr_spec unary_grad_a[] = {
    A_FLOAT("alpha", 0.01),
    A_STR("approximate", "none", "none|tanh"),
    {"op", DL_IR_ATTR_STRING, true, 0, 0, NULL, false, 0, NULL},
};
#define UNARY_GRAD_OP_SPEC 2 // index of "op" in unary_grad_a
static const dl_ir_attr_spec norm_grad_a[] = {A_INT("axis", -1), A_FLOAT("epsilon", 1e-5)};
static const dl_ir_attr_spec conv_grad_weight_a[] = {
    AUTO_PAD,
    A_INTS_MIN("dilations", 1),
    A_INT_MIN("group", 1, 1),
    A_INTS_REQ_MIN("kernel_shape", 1),
    A_INTS_MIN("pads", 0),
    A_INTS_MIN("strides", 1),
};

typedef struct op_attrs {
    const dl_ir_attr_spec *attrs;
    size_t n;
} op_attrs;

#define ATTRS(a) {a, DL_ARRAY_LEN(a)}
#define NOATTRS  {NULL, 0}

// ORDER IR_OPS: one entry per op of ir_ops.def, in the same order.
static const op_attrs op_attr_table[DL_IR_OP_COUNT] = {
    [DL_IR_OP_LEAKY_RELU] = ATTRS(leaky_relu_a),
    [DL_IR_OP_GELU] = ATTRS(gelu_a),
    [DL_IR_OP_CLIP] = ATTRS(clip_a),
    [DL_IR_OP_CAST] = ATTRS(cast_a),
    [DL_IR_OP_REDUCE_SUM] = ATTRS(reduce_a),
    [DL_IR_OP_REDUCE_MEAN] = ATTRS(reduce_a),
    [DL_IR_OP_REDUCE_MAX] = ATTRS(reduce_a),
    [DL_IR_OP_REDUCE_MIN] = ATTRS(reduce_a),
    [DL_IR_OP_ARG_MAX] = ATTRS(argmax_a),
    [DL_IR_OP_GEMM] = ATTRS(gemm_a),
    [DL_IR_OP_CONV] = ATTRS(conv_a),
    [DL_IR_OP_CONV_TRANSPOSE] = ATTRS(conv_transpose_a),
    [DL_IR_OP_MAX_POOL] = ATTRS(max_pool_a),
    [DL_IR_OP_AVERAGE_POOL] = ATTRS(average_pool_a),
    [DL_IR_OP_BATCH_NORMALIZATION] = ATTRS(batch_norm_a),
    [DL_IR_OP_LAYER_NORMALIZATION] = ATTRS(layer_norm_a),
    [DL_IR_OP_SOFTMAX] = ATTRS(softmax_a),
    [DL_IR_OP_LOG_SOFTMAX] = ATTRS(softmax_a),
    [DL_IR_OP_DROPOUT] = ATTRS(dropout_a),
    [DL_IR_OP_RESHAPE] = ATTRS(reshape_a),
    [DL_IR_OP_TRANSPOSE] = ATTRS(transpose_a),
    [DL_IR_OP_FLATTEN] = ATTRS(flatten_a),
    [DL_IR_OP_CONCAT] = ATTRS(concat_a),
    [DL_IR_OP_SPLIT] = ATTRS(split_a),
    [DL_IR_OP_SLICE] = ATTRS(slice_a),
    [DL_IR_OP_GATHER] = ATTRS(gather_a),
    [DL_IR_OP_SQUEEZE] = ATTRS(squeeze_a),
    [DL_IR_OP_UNSQUEEZE] = ATTRS(unsqueeze_a),
    [DL_IR_OP_EXPAND] = ATTRS(expand_a),
    [DL_IR_OP_PAD] = ATTRS(pad_a),
    [DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = ATTRS(sce_a),
    [DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS] = ATTRS(sce_a),
    [DL_IR_OP_MEAN_SQUARED_ERROR] = ATTRS(mse_a),
    [DL_IR_OP_UNARY_GRAD] = ATTRS(unary_grad_a),
    [DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD] = ATTRS(sce_a),
    [DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS_GRAD] = ATTRS(sce_a),
    [DL_IR_OP_LAYER_NORMALIZATION_GRAD] = ATTRS(norm_grad_a),
    [DL_IR_OP_BATCH_NORMALIZATION_GRAD] = ATTRS(norm_grad_a),
    [DL_IR_OP_CONV_GRAD_WEIGHT] = ATTRS(conv_grad_weight_a),
    [DL_IR_OP_MAX_POOL_GRAD] = ATTRS(max_pool_a),
    [DL_IR_OP_AVERAGE_POOL_GRAD] = ATTRS(average_pool_a),
    [DL_IR_OP_GATHER_GRAD] = ATTRS(gather_a),
    [DL_IR_OP_SLICE_GRAD] = ATTRS(slice_a),
    [DL_IR_OP_PAD_GRAD] = ATTRS(pad_a),
};

typedef struct op_row {
    const char *name;
    int32_t min_in, max_in, min_out, max_out;
    bool diff;
    dl_ir_kind kind;
    bool elem;
    dl_ir_inplace inplace;
    dl_ir_fuse fuse;
    dl_ir_nan nan;
    const char *shape, *eval, *grad, *lower, *scalar;
} op_row;

static const op_row op_rows[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, gr, lo, sc)                                                                      \
    [DL_IR_OP_##e] = {name,                                                                        \
                      min_in,                                                                      \
                      max_in,                                                                      \
                      min_out,                                                                     \
                      max_out,                                                                     \
                      diff,                                                                        \
                      DL_IR_KIND_##kind,                                                           \
                      elem,                                                                        \
                      DL_IR_INPLACE_##inplace,                                                     \
                      DL_IR_FUSE_##fuse,                                                           \
                      DL_IR_NAN_##nan,                                                             \
                      #sh,                                                                         \
                      #ev,                                                                         \
                      #gr,                                                                         \
                      #lo,                                                                         \
                      #sc},
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(op_rows) == DL_IR_OP_COUNT, "ir_ops.def: one row per op");

static dl_ir_op_info op_infos[DL_IR_OP_COUNT];
static bool op_infos_ready;
// "Relu|LeakyRelu|...": UnaryGrad's `op` choices, in table order.
static char unary_grad_choices[DL_IR_OP_COUNT * 32];

static bool row_has_unary_grad(const op_row *r) {
    return strcmp(r->grad, "unary") == 0;
}

// The table is filled on first use from constant tables; filling it twice concurrently writes
// identical bytes, so no lock is needed beyond the final flag store.
static void init_infos(void) {
    if (op_infos_ready) {
        return;
    }
    size_t used = 0;
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        const op_row *r = &op_rows[i];
        op_infos[i] = (dl_ir_op_info){
            .op = (dl_ir_op)i,
            .name = r->name,
            .min_inputs = r->min_in,
            .max_inputs = r->max_in,
            .min_outputs = r->min_out,
            .max_outputs = r->max_out,
            .differentiable = r->diff,
            .attrs = op_attr_table[i].attrs,
            .n_attrs = op_attr_table[i].n,
            .kind = r->kind,
            .is_elementwise = r->elem,
            .inplace = r->inplace,
            .fuse = r->fuse,
            .nan = r->nan,
            .shape_hook = r->shape,
            .eval_hook = r->eval,
            .grad_hook = r->grad,
            .lower_hook = r->lower,
            .scalar_hook = r->scalar,
        };
        if (row_has_unary_grad(r)) {
            size_t len = strlen(r->name);
            DL_ASSERT(used + len + 2 <= sizeof unary_grad_choices);
            if (used > 0) {
                unary_grad_choices[used++] = '|';
            }
            memcpy(unary_grad_choices + used, r->name, len + 1);
            used += len;
        }
    }
    unary_grad_a[UNARY_GRAD_OP_SPEC].choices = unary_grad_choices;
    op_infos_ready = true;
}

const dl_ir_op_info *dl_ir_op_get_info(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    init_infos();
    return &op_infos[op];
}

dl_ir_kind dl_ir_op_kind(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return op_rows[op].kind;
}

bool dl_ir_op_is_elementwise(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return op_rows[op].elem;
}

dl_ir_inplace dl_ir_op_inplace(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return op_rows[op].inplace;
}

bool dl_ir_op_inplace_ok(dl_ir_op op) {
    return dl_ir_op_inplace(op) != DL_IR_INPLACE_NO;
}

dl_ir_fuse dl_ir_op_fuse_class(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return op_rows[op].fuse;
}

dl_ir_nan dl_ir_op_nan(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return op_rows[op].nan;
}

bool dl_ir_op_has_unary_grad(dl_ir_op op) {
    DL_ASSERT((unsigned)op < DL_IR_OP_COUNT);
    return row_has_unary_grad(&op_rows[op]);
}

dl_ir_op dl_ir_node_unary_grad_op(const dl_ir_node *n) {
    dl_ir_op op;
    if (n->op != DL_IR_OP_UNARY_GRAD) {
        return DL_IR_OP_COUNT;
    }
    const dl_ir_attr *a = dl_ir_node_attr(n, "op");
    if (!a || a->kind != DL_IR_ATTR_STRING || !a->s || !dl_ir_op_from_name(a->s, &op) ||
        !dl_ir_op_has_unary_grad(op)) {
        return DL_IR_OP_COUNT;
    }
    return op;
}

bool dl_ir_op_from_name(const char *name, dl_ir_op *out) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        if (strcmp(op_rows[i].name, name) == 0) {
            *out = (dl_ir_op)i;
            return true;
        }
    }
    return false;
}

static const dl_ir_attr_spec *find_spec(const dl_ir_attr_spec *s, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].name, name) == 0) {
            return &s[i];
        }
    }
    return NULL;
}

const dl_ir_attr_spec *dl_ir_op_find_attr_spec(dl_ir_op op, const char *attr_name) {
    const dl_ir_op_info *info = dl_ir_op_get_info(op);
    return find_spec(info->attrs, info->n_attrs, attr_name);
}

const char *dl_ir_attr_kind_name(dl_ir_attr_kind k) {
    switch (k) {
    case DL_IR_ATTR_INT:
        return "int";
    case DL_IR_ATTR_FLOAT:
        return "float";
    case DL_IR_ATTR_STRING:
        return "string";
    case DL_IR_ATTR_INTS:
        return "list of ints";
    case DL_IR_ATTR_FLOATS:
        return "list of floats";
    case DL_IR_ATTR_STRINGS:
        return "list of strings";
    }
    return "?";
}

// ---------------------------------------------------------------------------------------------
// Optimizers: PyTorch's names and defaults (torch.optim, 2.x). `beta1`/`beta2` stand for the
// `betas` tuple. SGD's lr default follows PyTorch 2.x (1e-3).

static const dl_ir_attr_spec sgd_a[] = {
    A_FLOAT("dampening", 0.0), A_FLOAT("lr", 1e-3),          A_FLOAT("momentum", 0.0),
    A_BOOL("nesterov", 0),     A_FLOAT("weight_decay", 0.0),
};
static const dl_ir_attr_spec adam_a[] = {
    A_BOOL("amsgrad", 0), A_FLOAT("beta1", 0.9), A_FLOAT("beta2", 0.999),
    A_FLOAT("eps", 1e-8), A_FLOAT("lr", 1e-3),   A_FLOAT("weight_decay", 0.0),
};
static const dl_ir_attr_spec adamw_a[] = {
    A_BOOL("amsgrad", 0), A_FLOAT("beta1", 0.9), A_FLOAT("beta2", 0.999),
    A_FLOAT("eps", 1e-8), A_FLOAT("lr", 1e-3),   A_FLOAT("weight_decay", 1e-2),
};
static const dl_ir_attr_spec rmsprop_a[] = {
    A_FLOAT("alpha", 0.99), A_BOOL("centered", 0),    A_FLOAT("eps", 1e-8),
    A_FLOAT("lr", 1e-2),    A_FLOAT("momentum", 0.0), A_FLOAT("weight_decay", 0.0),
};
static const dl_ir_attr_spec loss_scale_a[] = {
    A_FLOAT("backoff", 0.5),
    A_FLOAT("growth", 2.0),
    A_FLOAT("init", 65536.0),
    A_INT_MIN("interval", 2000, 1),
};

static const char *const optim_names[] = {"sgd", "adam", "adamw", "rmsprop"};

const char *dl_ir_optim_name(dl_ir_optim o) {
    return (unsigned)o < DL_ARRAY_LEN(optim_names) ? optim_names[o] : "?";
}

bool dl_ir_optim_from_name(const char *name, dl_ir_optim *out) {
    for (size_t i = 0; i < DL_ARRAY_LEN(optim_names); i++) {
        if (strcmp(optim_names[i], name) == 0) {
            *out = (dl_ir_optim)i;
            return true;
        }
    }
    return false;
}

const dl_ir_attr_spec *dl_ir_optim_attr_specs(dl_ir_optim o, size_t *n) {
    switch (o) {
    case DL_IR_OPTIM_SGD:
        *n = DL_ARRAY_LEN(sgd_a);
        return sgd_a;
    case DL_IR_OPTIM_ADAM:
        *n = DL_ARRAY_LEN(adam_a);
        return adam_a;
    case DL_IR_OPTIM_ADAMW:
        *n = DL_ARRAY_LEN(adamw_a);
        return adamw_a;
    case DL_IR_OPTIM_RMSPROP:
        *n = DL_ARRAY_LEN(rmsprop_a);
        return rmsprop_a;
    }
    *n = 0;
    return NULL;
}

const dl_ir_attr_spec *dl_ir_loss_scale_attr_specs(size_t *n) {
    *n = DL_ARRAY_LEN(loss_scale_a);
    return loss_scale_a;
}

double dl_ir_train_opt_value(const dl_ir_train *t, const char *name) {
    for (size_t i = 0; i < t->n_opt_attrs; i++) {
        const dl_ir_attr *a = &t->opt_attrs[i];
        if (strcmp(a->name, name) == 0) {
            return a->kind == DL_IR_ATTR_INT ? (double)a->i : a->f;
        }
    }
    size_t n;
    const dl_ir_attr_spec *s = dl_ir_optim_attr_specs(t->optimizer, &n);
    const dl_ir_attr_spec *sp = find_spec(s, n, name);
    DL_ASSERT(sp != NULL);
    return sp->kind == DL_IR_ATTR_INT ? (double)sp->def_i : sp->def_f;
}
