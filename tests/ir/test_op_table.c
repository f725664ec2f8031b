// tests/ir/test_op_table.c — consistency of the op table (ir/ir_ops.def) through the accessors of
// ir/dl_ir.h: what each column promises is what the other columns and the hooks can deliver.
// (Each module's dispatch table is generated from the same rows and sized by a _Static_assert,
// so "every op has a hook" holds by construction; these checks cover the columns' meaning.)
#include "dl_ir.h"
#include "dl_test.h"

#include <string.h>

static bool is(const char *hook, const char *name) {
    return strcmp(hook, name) == 0;
}

static bool starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

DL_TEST(names_and_arity) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        const dl_ir_op_info *o = dl_ir_op_get_info((dl_ir_op)i);
        dl_ir_op back;
        DL_CHECK(o->name && o->name[0]);
        DL_CHECK(dl_ir_op_from_name(o->name, &back) && back == (dl_ir_op)i);
        DL_CHECK(o->min_inputs >= 1 && (o->max_inputs == -1 || o->max_inputs >= o->min_inputs));
        DL_CHECK(o->min_outputs >= 1 && (o->max_outputs == -1 || o->max_outputs >= o->min_outputs));
        // Internal ops are exactly the gradient kind, and are never differentiated again.
        DL_CHECK_EQ_I64(dl_ir_op_is_internal((dl_ir_op)i), o->kind == DL_IR_KIND_GRADIENT);
        DL_CHECK(!dl_ir_op_is_internal((dl_ir_op)i) || is(o->grad_hook, "internal"));
    }
}

DL_TEST(elementwise_and_inplace) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        dl_ir_op op = (dl_ir_op)i;
        const dl_ir_op_info *o = dl_ir_op_get_info(op);
        DL_CHECK_EQ_I64(o->is_elementwise, dl_ir_op_is_elementwise(op));
        DL_CHECK_EQ_I64(o->inplace, dl_ir_op_inplace(op));
        DL_CHECK_EQ_I64(dl_ir_op_inplace_ok(op), o->inplace != DL_IR_INPLACE_NO);
        // In-place implies one output, and elementwise or a flat copy (Reshape and the like:
        // element i of the output is element i of the input).
        if (dl_ir_op_inplace_ok(op)) {
            DL_CHECK(dl_ir_op_is_elementwise(op) ||
                     (o->inplace == DL_IR_INPLACE_FLAT && is(o->lower_hook, "copy")));
            DL_CHECK_EQ_I64(o->max_outputs, 1);
        }
        // Every op lowered by the generic map has a scalar (emitter and evaluator), every op with
        // a scalar is elementwise and mapped by both, and only elementwise ops are mapped.
        bool scalar = !is(o->scalar_hook, "none");
        DL_CHECK_EQ_I64(is(o->lower_hook, "map"), scalar);
        DL_CHECK_EQ_I64(is(o->eval_hook, "map"), scalar);
        DL_CHECK(!scalar || o->is_elementwise);
        // Elementwise ops fuse as elementwise unless they are kept apart (Dropout: an RNG stream
        // keyed by the flat index, and a second output).
        // The cheap ones (a GEMM epilogue may take them) are mapped ops without a transcendental.
        bool is_elem_class =
            o->fuse == DL_IR_FUSE_ELEMENTWISE || o->fuse == DL_IR_FUSE_ELEMENTWISE_CHEAP;
        if (o->is_elementwise) {
            DL_CHECK(is_elem_class || (o->fuse == DL_IR_FUSE_NONE && o->kind == DL_IR_KIND_RANDOM));
        } else {
            DL_CHECK(!is_elem_class);
        }
        if (o->fuse == DL_IR_FUSE_ELEMENTWISE_CHEAP) {
            DL_CHECK(scalar);
            DL_CHECK(o->kind != DL_IR_KIND_COMPARE && o->kind != DL_IR_KIND_LOGICAL);
            DL_CHECK(!is(o->scalar_hook, "exp") && !is(o->scalar_hook, "log") &&
                     !is(o->scalar_hook, "gelu") && !is(o->scalar_hook, "tanh") &&
                     !is(o->scalar_hook, "erf") && !is(o->scalar_hook, "sigmoid"));
        }
    }
}

DL_TEST(kinds_and_classes) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        dl_ir_op op = (dl_ir_op)i;
        const dl_ir_op_info *o = dl_ir_op_get_info(op);
        DL_CHECK_EQ_I64(o->kind, dl_ir_op_kind(op));
        DL_CHECK_EQ_I64(o->fuse, dl_ir_op_fuse_class(op));
        DL_CHECK_EQ_I64(o->nan, dl_ir_op_nan(op));
        switch (o->kind) {
        case DL_IR_KIND_COMPARE: // bool results: no gradient, NaN compares false
            DL_CHECK(!o->differentiable && is(o->grad_hook, "none"));
            DL_CHECK(starts(o->shape_hook, "compare_"));
            DL_CHECK_EQ_I64(o->nan, DL_IR_NAN_CMP_FALSE);
            DL_CHECK(o->is_elementwise);
            break;
        case DL_IR_KIND_LOGICAL: // bool in, bool out
            DL_CHECK(!o->differentiable && is(o->grad_hook, "none"));
            DL_CHECK(is(o->shape_hook, "logical") || is(o->shape_hook, "unary_bool"));
            DL_CHECK_EQ_I64(o->nan, DL_IR_NAN_NA);
            break;
        case DL_IR_KIND_REDUCE:
            DL_CHECK_EQ_I64(o->fuse, DL_IR_FUSE_REDUCTION);
            break;
        case DL_IR_KIND_CONTRACTION:
        case DL_IR_KIND_CONVOLUTION:
            DL_CHECK_EQ_I64(o->fuse, DL_IR_FUSE_CONTRACTION);
            break;
        case DL_IR_KIND_MOVEMENT: // data movement: no float math
            DL_CHECK_EQ_I64(o->fuse, DL_IR_FUSE_MOVEMENT);
            DL_CHECK_EQ_I64(o->nan, DL_IR_NAN_NA);
            break;
        case DL_IR_KIND_UNARY:
        case DL_IR_KIND_BINARY:
        case DL_IR_KIND_SELECT:
        case DL_IR_KIND_ACTIVATION:
            DL_CHECK(o->is_elementwise);
            break;
        case DL_IR_KIND_COLLECTIVE: // a kernel of its own (the runtime's all-reduce follows it)
            DL_CHECK_EQ_I64(o->fuse, DL_IR_FUSE_NONE);
            DL_CHECK(!o->is_elementwise && o->inplace == DL_IR_INPLACE_NO);
            break;
        case DL_IR_KIND_POOL:
        case DL_IR_KIND_NORMALISATION:
        case DL_IR_KIND_RANDOM:
        case DL_IR_KIND_LOSS:
        case DL_IR_KIND_GRADIENT:
            break;
        }
        // Only contractions take an epilogue; only movement ops are movement-fusible.
        if (o->fuse == DL_IR_FUSE_CONTRACTION) {
            DL_CHECK(o->kind == DL_IR_KIND_CONTRACTION || o->kind == DL_IR_KIND_CONVOLUTION);
        }
        if (o->fuse == DL_IR_FUSE_MOVEMENT) {
            DL_CHECK_EQ_I64(o->kind, DL_IR_KIND_MOVEMENT);
        }
    }
}

DL_TEST(gradients) {
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        dl_ir_op op = (dl_ir_op)i;
        const dl_ir_op_info *o = dl_ir_op_get_info(op);
        // Every differentiable op has a gradient rule; a non-differentiable one has none (or is
        // an internal op, which refuses a second derivative).
        bool has_rule = !is(o->grad_hook, "none") && !is(o->grad_hook, "internal");
        DL_CHECK_EQ_I64(o->differentiable, has_rule);
        // Ops differentiated through UnaryGrad are one-input elementwise ops with a scalar (whose
        // derivative sits beside it in ir/eval_ops.c and codegen/lower_elem.c).
        DL_CHECK_EQ_I64(dl_ir_op_has_unary_grad(op), is(o->grad_hook, "unary"));
        if (dl_ir_op_has_unary_grad(op)) {
            DL_CHECK(o->is_elementwise && !is(o->scalar_hook, "none"));
            DL_CHECK(o->min_inputs == 1 && o->max_inputs == 1);
            DL_CHECK(o->kind == DL_IR_KIND_UNARY || o->kind == DL_IR_KIND_ACTIVATION);
        }
    }
}

// UnaryGrad's `op` attribute admits exactly the ops with a UnaryGrad rule, in table order.
DL_TEST(unary_grad_choices) {
    const dl_ir_attr_spec *s = dl_ir_op_find_attr_spec(DL_IR_OP_UNARY_GRAD, "op");
    DL_CHECK(s != NULL && s->choices != NULL);
    if (!s || !s->choices) {
        return;
    }
    char want[1024] = "";
    size_t n = 0;
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        if (dl_ir_op_has_unary_grad((dl_ir_op)i)) {
            if (want[0]) {
                strcat(want, "|");
            }
            strcat(want, dl_ir_op_get_info((dl_ir_op)i)->name);
            n++;
        }
    }
    DL_CHECK_STR_EQ(s->choices, want);
    DL_CHECK(n >= 12); // Relu ... Softplus at least
    DL_CHECK(strstr(s->choices, "Relu") && strstr(s->choices, "Gelu"));
}

DL_TEST_MAIN()
