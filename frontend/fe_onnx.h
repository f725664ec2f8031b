// frontend/fe_onnx.h — internal entry points of the ONNX importer (frontend/onnx_import.c) for
// the ONNX node-conformance runner and tests. Not a public header: names carry the dl_fe__
// prefix and may change with the runner.
#ifndef DL_FE_ONNX_H
#define DL_FE_ONNX_H

#include "dl_fe.h"

// What an import learnt about the ONNX graph's interface, for callers that feed test data.
// All arrays are heap memory OWNED by the struct (dl_fe__onnx_info_fini frees them).
typedef struct dl_fe_onnx_info {
    // Graph inputs that are not initializers, in ONNX order ("input_<k>.pb" is position k).
    size_t n_graph_inputs;
    // For module input i (m->inputs order): its position among the graph inputs.
    int32_t *input_src;
    size_t n_input_src;
    // Graph inputs that feed an operand which must be constant (Reshape `shape`, ...), found
    // during a failed import: their positions and ONNX names. Binding them (see below) and
    // importing again is how the node tests feed shape-like operands.
    int32_t *need_const;
    char **need_const_names;
    size_t n_need_const;
} dl_fe_onnx_info;

void dl_fe__onnx_info_fini(dl_fe_onnx_info *info); // NULL is a no-op; leaves it zeroed

// dl_fe_import_onnx with extras: the graph inputs named in `const_input_names` (ONNX names) are
// bound to the given values (BORROWED for the call) and become constants: shape-like operands
// fed by them turn into attributes, other uses into `const` statements. `info` may be NULL; when
// given it is filled (zeroed first) even when the import fails.
DL_NODISCARD dl_status dl_fe__import_onnx_ex(const char *path, const char *const *const_input_names,
                                             const dl_tensor *const_input_values, size_t n_const,
                                             bool initializers_as_consts, dl_fe_shape_fn shape,
                                             dl_diags *d, dl_ir_module **out,
                                             dl_fe_onnx_info *info);

// dl_fe_import_onnx from an in-memory .onnx image (`data`, BORROWED for the call); `name`
// stands for the file in messages. For the fuzz target and tests.
DL_NODISCARD dl_status dl_fe__import_onnx_mem(const char *name, const void *data, size_t len,
                                              bool initializers_as_consts, dl_diags *d,
                                              dl_ir_module **out);

// Decides whether a model is within our spec without building anything: opset (default domain
// 13-21; an older opset only where every op it uses means the same since then), node domains, op
// names and the dtypes of graph inputs, outputs, initializers, Constant values and Cast targets.
// DL_OK when applicable; DL_ERR_UNSUPPORTED with a one-line reason in `why` when not;
// DL_ERR_IO / DL_ERR_PARSE (reason in `why`) when the file cannot be read or decoded.
DL_NODISCARD dl_status dl_fe__onnx_probe(const char *path, char *why, size_t why_size);

// Reads a serialized TensorProto (a node test's input_<k>.pb / output_<k>.pb) into *out
// (caller frees with dl_tensor_free). Handles raw_data and the typed repeated fields for float,
// float16, bfloat16, int32, int64 and bool. A UINT16 tensor is read as bfloat16 bit patterns
// (ONNX's test generator stores bfloat16 data that way, numpy having no bfloat16). `name`, when
// non-NULL, receives the tensor's name (truncated to name_size). Errors go to `d`: DL_ERR_IO,
// DL_ERR_PARSE, DL_ERR_UNSUPPORTED.
DL_NODISCARD dl_status dl_fe__onnx_read_tensor_pb(const char *path, dl_tensor *out, char *name,
                                                  size_t name_size, dl_diags *d);

#endif
