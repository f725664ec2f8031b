// frontend/dl_fe.h — the .dlg text frontend (lexer, parser, attribute validation) and the ONNX
// importer. Both build a dl_ir_module; errors are diagnostics in a dl_diags sink, never prints.
#ifndef DL_FE_H
#define DL_FE_H

#include "dl_ir.h"

// Parses .dlg source text into a new module. `file_name` is used in diagnostics (the text is
// registered in `d` with dl_diags_add_file). On success returns DL_OK and *out (caller owns).
// On any error returns DL_ERR_PARSE with every error recorded in `d` (the parser recovers at the
// next statement and stops after 20 errors) and *out == NULL. Does not infer shapes.
// Thread-safety: independent calls may run concurrently.
DL_NODISCARD dl_status dl_fe_parse(const char *file_name, const char *text, size_t len, dl_diags *d,
                                   dl_ir_module **out);
// Reads `path` and parses it; sets the module's source_dir to the file's directory. DL_ERR_IO
// with a diagnostic naming the path if it cannot be read.
DL_NODISCARD dl_status dl_fe_parse_file(const char *path, dl_diags *d, dl_ir_module **out);

// Imports an ONNX model (opsets 1-21) from `path`: constant shape-like inputs become attributes,
// initializers become params (or consts when `initializers_as_consts`). Unsupported ops, dtypes
// or non-constant shape operands are reported to `d` (DL_ERR_UNSUPPORTED). *out caller owns.
DL_NODISCARD dl_status dl_fe_import_onnx(const char *path, bool initializers_as_consts, dl_diags *d,
                                         dl_ir_module **out);

// Shape inference of one node whose inputs have known types (dl_pass_shape_node): fills in the
// node's output types, false when it cannot. The importer does not depend on the passes; a
// caller that gives it this hook lets it fold shape computations (`Shape` of a computed value,
// PyTorch's Shape -> Gather -> Concat -> Reshape chains) at import.
typedef bool (*dl_fe_shape_fn)(const dl_ir_module *m, const dl_ir_node *n, dl_diags *d);

// dl_fe_import_onnx with shape inference (`shape` may be NULL: then only `Shape` of graph
// inputs, initializers and folded values folds). A shape computation that depends on a named
// dim (ONNX dim_param) in a way the text format cannot say is an error naming the dim.
DL_NODISCARD dl_status dl_fe_import_onnx_shaped(const char *path, bool initializers_as_consts,
                                                dl_fe_shape_fn shape, dl_diags *d,
                                                dl_ir_module **out);

#endif
