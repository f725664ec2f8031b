// codegen/lower.c — dispatches each IR node to the lowering of its op family. The switch is
// checked by -Wswitch-enum against ir/ir_ops.def (ORDER IR_OPS).
#include "cg_internal.h"

dl_status dl_cg__lower_node(cg *c, const dl_ir_node *n) {
    switch (n->op) {
    case DL_IR_OP_ADD:
    case DL_IR_OP_SUB:
    case DL_IR_OP_MUL:
    case DL_IR_OP_DIV:
    case DL_IR_OP_NEG:
    case DL_IR_OP_ABS:
    case DL_IR_OP_EXP:
    case DL_IR_OP_LOG:
    case DL_IR_OP_SQRT:
    case DL_IR_OP_RECIPROCAL:
    case DL_IR_OP_POW:
    case DL_IR_OP_RELU:
    case DL_IR_OP_LEAKY_RELU:
    case DL_IR_OP_SIGMOID:
    case DL_IR_OP_TANH:
    case DL_IR_OP_ERF:
    case DL_IR_OP_GELU:
    case DL_IR_OP_SOFTPLUS:
    case DL_IR_OP_CLIP:
    case DL_IR_OP_MAX:
    case DL_IR_OP_MIN:
    case DL_IR_OP_WHERE:
    case DL_IR_OP_EQUAL:
    case DL_IR_OP_LESS:
    case DL_IR_OP_GREATER:
    case DL_IR_OP_NOT:
    case DL_IR_OP_AND:
    case DL_IR_OP_OR:
    case DL_IR_OP_CAST:
    case DL_IR_OP_IDENTITY:
    case DL_IR_OP_DROPOUT:
        return dl_cg__lower_elementwise(c, n);
    case DL_IR_OP_REDUCE_SUM:
    case DL_IR_OP_REDUCE_MEAN:
    case DL_IR_OP_REDUCE_MAX:
    case DL_IR_OP_REDUCE_MIN:
    case DL_IR_OP_ARG_MAX:
    case DL_IR_OP_SOFTMAX:
    case DL_IR_OP_LOG_SOFTMAX:
        return dl_cg__lower_reduce(c, n);
    case DL_IR_OP_MATMUL:
    case DL_IR_OP_GEMM:
        return dl_cg__lower_linalg(c, n);
    case DL_IR_OP_CONV:
    case DL_IR_OP_CONV_TRANSPOSE:
    case DL_IR_OP_MAX_POOL:
    case DL_IR_OP_AVERAGE_POOL:
    case DL_IR_OP_GLOBAL_AVERAGE_POOL:
    case DL_IR_OP_BATCH_NORMALIZATION:
    case DL_IR_OP_LAYER_NORMALIZATION:
        return dl_cg__lower_nn(c, n);
    case DL_IR_OP_RESHAPE:
    case DL_IR_OP_TRANSPOSE:
    case DL_IR_OP_FLATTEN:
    case DL_IR_OP_CONCAT:
    case DL_IR_OP_SPLIT:
    case DL_IR_OP_SLICE:
    case DL_IR_OP_GATHER:
    case DL_IR_OP_SQUEEZE:
    case DL_IR_OP_UNSQUEEZE:
    case DL_IR_OP_EXPAND:
    case DL_IR_OP_PAD:
        return dl_cg__lower_shape(c, n);
    case DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    case DL_IR_OP_MEAN_SQUARED_ERROR:
        return dl_cg__lower_loss(c, n);
    case DL_IR_OP_UNARY_GRAD:
    case DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD:
    case DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS_GRAD:
    case DL_IR_OP_LAYER_NORMALIZATION_GRAD:
    case DL_IR_OP_GATHER_GRAD:
    case DL_IR_OP_SLICE_GRAD:
    case DL_IR_OP_PAD_GRAD:
        return dl_cg__lower_grad(c, n);
    case DL_IR_OP_BATCH_NORMALIZATION_GRAD:
    case DL_IR_OP_CONV_GRAD_WEIGHT:
    case DL_IR_OP_MAX_POOL_GRAD:
    case DL_IR_OP_AVERAGE_POOL_GRAD:
        return dl_cg__lower_grad_nn(c, n);
    case DL_IR_OP_COUNT:
        break;
    }
    DL_UNREACHABLE();
}
