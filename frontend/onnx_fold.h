// frontend/onnx_fold.h — constant folding of ONNX shape computations at import (onnx_fold.c),
// used by the importer (onnx_import.c). Private to the frontend.
#ifndef DL_FE_ONNX_FOLD_H
#define DL_FE_ONNX_FOLD_H

#include "dl_fe.h"
#include "onnx.pb-c.h"

// What an element of a folded integer tensor means with respect to the module's named dims:
// dim >= 0: coef * (the value of named dim `dim`); DL_FE_SYM_LIT: the literal value;
// DL_FE_SYM_OPAQUE: it depends on some named dim in a way we do not track (a sum of two dims,
// a comparison, a float; coef then holds the index of a dim it depends on, or -1). The tensor's
// data always holds the value at the dims' current values.
#define DL_FE_SYM_LIT    (-1)
#define DL_FE_SYM_OPAQUE (-2)
typedef struct dl_fe_symel {
    int32_t dim;
    int64_t coef;
} dl_fe_symel;

// A value known at import: a tensor and, per element, its dependence on named dims (se NULL:
// every element is literal).
typedef struct dl_fe_cv {
    const dl_tensor *t;
    const dl_fe_symel *se;
} dl_fe_cv;

// Folds ONNX node `nd` (op `opn`, default domain, opset `opset`) whose inputs are all constants
// (`ins[k].t` NULL for an omitted optional input) into output 0: *out gets a new tensor (caller
// frees with dl_tensor_free) and *out_se per-element dims (heap, caller frees; NULL when all
// literal). Ops: Identity, Cast, Neg, Add, Sub, Mul, Div, Max, Min, Equal, Less, Greater, Not,
// Where, Gather, Unsqueeze, Squeeze, Concat, Slice, Reshape, Expand, Range, ConstantOfShape,
// Size. Arithmetic is on integer and bool tensors only. DL_ERR_UNSUPPORTED (reason in `why`)
// when it cannot, DL_ERR_NOMEM.
DL_NODISCARD dl_status dl_fe__onnx_fold(const Onnx__NodeProto *nd, const char *opn, int64_t opset,
                                        const dl_fe_cv *ins, size_t n_in, dl_tensor *out,
                                        dl_fe_symel **out_se, char *why, size_t why_size);

// Whether dl_fe__onnx_fold knows `opn`.
bool dl_fe__onnx_foldable(const char *opn);

// The dtype of an ONNX TensorProto.DataType code; false for types we do not support.
bool dl_fe__dtype_from_onnx(int32_t code, dl_dtype *out);

// Integer attribute `name` of `nd`, or `def` when absent or of another kind.
int64_t dl_fe__onnx_int_attr(const Onnx__NodeProto *nd, const char *name, int64_t def);

#endif
