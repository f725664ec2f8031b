// passes/dl_pass.h — passes over the IR. For now: shape and type inference.
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

#endif
