// codegen/lower.c — dispatches each IR node to its lowering hook: the lower column of
// ir/ir_ops.def (ORDER IR_OPS), hook `x` being dl_cg__lower_x (cg_internal.h). The table has one
// entry per op by construction; the assertion pins its size to the op count.
#include "cg_internal.h"

typedef dl_status (*lower_hook)(cg *c, const dl_ir_node *n);
static const lower_hook lower_hooks[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ev, gr, lo, ...)                                                                     \
    [DL_IR_OP_##e] = dl_cg__lower_##lo,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(lower_hooks) == DL_IR_OP_COUNT, "one lowering hook per op");

dl_status dl_cg__lower_node(cg *c, const dl_ir_node *n) {
    DL_ASSERT((unsigned)n->op < DL_IR_OP_COUNT);
    // The op's required inputs (min_inputs in the op table) must be present.
    size_t n_req = (size_t)dl_ir_op_get_info(n->op)->min_inputs;
    for (size_t i = 0; i < n_req; i++) {
        if (n->n_inputs <= i || !n->inputs[i]) {
            cg_error(c, "input %zu is missing", i);
            return DL_ERR_UNSUPPORTED;
        }
    }
    return lower_hooks[n->op](c, n);
}
