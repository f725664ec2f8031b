// passes/dl_pass.h — passes over the IR: shape and type inference, reverse-mode autodiff,
// mixed precision.
#ifndef DL_PASS_H
#define DL_PASS_H

#include "dl_ir.h"

// Shape and type inference for every op of the spec, with ONNX (multidirectional numpy-style)
// broadcasting. Fills in the type of every node output (overwriting previous results, so it can
// be rerun after dl_ir_module_bind_dim). Also checks input dtypes and shape-dependent attribute
// ranges (axis within rank, kernel fits, ...). Each error names the op, the node's first output
// name, the input shapes and the rule broken, at the node's location, e.g.
//   mlp.dlg:3:5: error: MatMul 'y': inner dimensions differ: [128, 768] x [512, 10]
// Continues past errors where it can (outputs of a failed node stay unknown and nodes that
// depend on them are skipped silently). Returns DL_ERR_SHAPE if any error was reported.
DL_NODISCARD dl_status dl_pass_shape(dl_ir_module *m, dl_diags *d);

// Reverse-mode automatic differentiation of m->train->loss with respect to every param not
// frozen by the train block (passes/autodiff.c). Requires a verified, shape-inferred module with
// a train block whose loss is a float scalar. Appends the training graph after the forward
// nodes and fills the autodiff fields of dl_ir_module (has_backward, n_fwd_nodes, train_loss,
// grad_seed, grads, assigns); the added nodes have inferred types. Running it twice is an
// error. Errors (a non-scalar loss, an op without a gradient rule on the path from a param to
// the loss) go to `d` at the node's location; the module is then unusable.
DL_NODISCARD dl_status dl_pass_autodiff(dl_ir_module *m, dl_diags *d);

// Autocast (docs/precision.md): every MatMul, Gemm, Conv, ConvTranspose and ConvGradWeight node
// whose inputs and output are all float32 computes in `precision` (bfloat16 or float16): each
// input goes through a `Cast <to = "P">` (one per value, shared by its later users) and the op's
// result through a `Cast <to = "float">`, which takes over the op's original output value, so
// every consumer (nodes, outputs, train_loss, grads, assigns) reads float32 as before. Params
// and optimizer state stay float32. Run after dl_pass_autodiff (the backward products are
// rewritten too) on a shape-inferred module; the module stays valid for dl_ir_verify (node ids,
// statement order, n_fwd_nodes are rebuilt). `precision` == DL_DT_FLOAT is a no-op; running it
// twice changes nothing more (rewritten ops no longer have float32 inputs). *out_n_ops (may be
// NULL) receives the number of ops rewritten. Errors: DL_ERR_INVALID_ARG for another dtype,
// DL_ERR_NOMEM, or a shape error on a rewritten node (a bug), each with a diagnostic.
DL_NODISCARD dl_status dl_pass_precision(dl_ir_module *m, dl_dtype precision, dl_diags *d,
                                         size_t *out_n_ops);

#endif
