// passes/shape_internal.h — shared by the shape-inference files (shape.c: driver, diagnostics,
// broadcasting; shape_elem.c: elementwise, reductions, linear algebra; shape_nn.c: conv, pools,
// norms, softmax, dropout, losses; shape_tensor.c: reshape-like ops).
//
// One dl_pass__sh context describes the node being inferred. A per-op rule reads its input types
// with sh_in(), writes every output type through sh_out() and returns true; on a broken rule it
// reports through dl_pass__sh_fail() (which prefixes "OP 'out': ") and returns false, and the
// driver then resets every output to unknown. Rules never allocate.
#ifndef DL_PASS_SHAPE_INTERNAL_H
#define DL_PASS_SHAPE_INTERNAL_H

#include "dl_ir.h"
#include "dl_pass.h"

#define DL_SH_NBUF 6

typedef struct dl_pass__sh {
    const dl_ir_module *m;
    dl_diags *d;
    const dl_ir_node *n;
    // Rotating buffers for shape text, so one message can show several shapes.
    char bufs[DL_SH_NBUF][256];
    unsigned buf_i;
} dl_pass__sh;

// Input i's type, or NULL when the input is omitted (or i is past the node's inputs).
static inline const dl_ir_type *sh_in(const dl_pass__sh *c, size_t i) {
    if (i >= c->n->n_inputs || !c->n->inputs[i]) {
        return NULL;
    }
    return &c->n->inputs[i]->type;
}

static inline size_t sh_n_in(const dl_pass__sh *c) {
    return c->n->n_inputs;
}

static inline size_t sh_n_out(const dl_pass__sh *c) {
    return c->n->n_outputs;
}

// Output i's type (NULL if the node has no such output).
static inline dl_ir_type *sh_out(const dl_pass__sh *c, size_t i) {
    if (i >= c->n->n_outputs || !c->n->outputs[i]) {
        return NULL;
    }
    return &c->n->outputs[i]->type;
}

// Reports "OP 'out': MESSAGE" at the node and returns false.
bool dl_pass__sh_fail(dl_pass__sh *c, const char *fmt, ...) DL_PRINTF(2, 3);
// The same at `loc` (an attribute's location) when it is known, else at the node.
bool dl_pass__sh_fail_at(dl_pass__sh *c, dl_src_loc loc, const char *fmt, ...) DL_PRINTF(3, 4);
// "[2, 3]" for t (in a rotating buffer of c, valid for the next DL_SH_NBUF - 1 calls).
const char *dl_pass__sh_shape(dl_pass__sh *c, const dl_ir_type *t);
const char *dl_pass__sh_ints(dl_pass__sh *c, const int64_t *v, size_t n);
// Reads INTS attribute `name` of the node, which must have `n` entries (else an error), or fills
// `def` when it is absent (shape_nn.c).
bool dl_pass__sh_ints_n(dl_pass__sh *c, const char *name, size_t n, int64_t def, int64_t *out);
// Kernel, strides, dilations >= 1 and pads (2 * n_sp entries) >= 0, else an error naming them
// (the frontend and the verifier check the attributes too; modules built in code may not).
bool dl_pass__sh_geometry_ok(dl_pass__sh *c, const int64_t *k, const int64_t *s, const int64_t *d,
                             const int64_t *p, size_t n_sp);
// MaxPool / AveragePool (and their gradients): explicit pads (auto_pad NOTSET) must be smaller
// than the kernel k (onnxruntime's rule), so no window lies wholly in the padding.
bool dl_pass__sh_pool_pads_ok(dl_pass__sh *c, const int64_t *k, size_t n_sp);
// Float attribute `name` of the node (default when absent) must be finite and >= 0 (epsilon).
bool dl_pass__sh_nonneg_float_attr(dl_pass__sh *c, const char *name);
// Output spatial sizes of a convolution or pool over x ([N, C, spatial...]) with kernel k and the
// node's strides, dilations, pads and auto_pad (shape_nn.c; its header gives the rule).
bool dl_pass__sh_spatial_out(dl_pass__sh *c, const dl_ir_type *x, const int64_t *k, bool ceil_mode,
                             int64_t *out);

// Normalises `axis` into [0, rank) (or [0, rank] when allow_end) or reports
// "axis A is out of range for rank R".
bool dl_pass__sh_axis(dl_pass__sh *c, int64_t axis, int32_t rank, bool allow_end, int32_t *out);
// Dtype checks; `what` names the input in the message ("input", "B", ...).
bool dl_pass__sh_need_float(dl_pass__sh *c, const dl_ir_type *t, const char *what);
bool dl_pass__sh_need_numeric(dl_pass__sh *c, const dl_ir_type *t, const char *what);
bool dl_pass__sh_need_int_index(dl_pass__sh *c, const dl_ir_type *t, const char *what);
bool dl_pass__sh_same_dtype(dl_pass__sh *c, const dl_ir_type *a, const dl_ir_type *b);
// Multidirectional broadcast of ts[0..n) into *out (dtype left to the caller). Reports
// "shapes are not broadcastable: A and B" on failure.
bool dl_pass__sh_broadcast(dl_pass__sh *c, const dl_ir_type *const *ts, size_t n, dl_ir_type *out);
// INTS attribute of the node (NULL / 0 when absent).
const int64_t *dl_pass__sh_attr_ints(const dl_pass__sh *c, const char *name, size_t *n_out,
                                     const int32_t **syms);

static inline dl_ir_dim sh_dim(int64_t value, int32_t sym) {
    return (dl_ir_dim){value, sym};
}

// Dtype classes of elementwise ops.
typedef enum dl_pass__sh_kind {
    DL_SH_FLOAT,   // float types only
    DL_SH_NUMERIC, // float types, int32, int64
    DL_SH_ANY,     // every dtype
    DL_SH_BOOL,    // bool only
} dl_pass__sh_kind;

// Per-op rules: the shape hooks of ir/ir_ops.def (shape.c's table maps hook `x` to
// dl_pass__sh_x).
bool dl_pass__sh_unary(dl_pass__sh *c, dl_pass__sh_kind k);
// The elementwise hooks: dl_pass__sh_unary / dl_pass__sh_nary with the dtype class (and result
// dtype) the hook names.
bool dl_pass__sh_unary_numeric(dl_pass__sh *c);
bool dl_pass__sh_unary_float(dl_pass__sh *c);
bool dl_pass__sh_unary_bool(dl_pass__sh *c);
bool dl_pass__sh_unary_any(dl_pass__sh *c);
bool dl_pass__sh_nary_numeric(dl_pass__sh *c);
bool dl_pass__sh_compare_any(dl_pass__sh *c);
bool dl_pass__sh_compare_numeric(dl_pass__sh *c);
bool dl_pass__sh_logical(dl_pass__sh *c);
// Broadcasting op over all present inputs of one dtype; result dtype out_dt (< 0: the inputs').
bool dl_pass__sh_nary(dl_pass__sh *c, dl_pass__sh_kind k, int out_dt);
bool dl_pass__sh_pow(dl_pass__sh *c);
bool dl_pass__sh_clip(dl_pass__sh *c);
bool dl_pass__sh_where(dl_pass__sh *c);
bool dl_pass__sh_cast(dl_pass__sh *c);
bool dl_pass__sh_reduce(dl_pass__sh *c);
bool dl_pass__sh_argmax(dl_pass__sh *c);
bool dl_pass__sh_matmul(dl_pass__sh *c);
bool dl_pass__sh_gemm(dl_pass__sh *c);

bool dl_pass__sh_conv(dl_pass__sh *c);
bool dl_pass__sh_conv_transpose(dl_pass__sh *c);
bool dl_pass__sh_pool(dl_pass__sh *c);
bool dl_pass__sh_global_pool(dl_pass__sh *c);
bool dl_pass__sh_batch_norm(dl_pass__sh *c);
bool dl_pass__sh_layer_norm(dl_pass__sh *c);
bool dl_pass__sh_softmax(dl_pass__sh *c);
bool dl_pass__sh_dropout(dl_pass__sh *c);
bool dl_pass__sh_loss(dl_pass__sh *c);
bool dl_pass__sh_mse(dl_pass__sh *c);

bool dl_pass__sh_reshape(dl_pass__sh *c);
bool dl_pass__sh_transpose(dl_pass__sh *c);
bool dl_pass__sh_flatten(dl_pass__sh *c);
bool dl_pass__sh_concat(dl_pass__sh *c);
bool dl_pass__sh_split(dl_pass__sh *c);
bool dl_pass__sh_slice(dl_pass__sh *c);
bool dl_pass__sh_gather(dl_pass__sh *c);
bool dl_pass__sh_squeeze(dl_pass__sh *c);
bool dl_pass__sh_unsqueeze(dl_pass__sh *c);
bool dl_pass__sh_expand(dl_pass__sh *c);
bool dl_pass__sh_pad(dl_pass__sh *c);
// Shape arithmetic shared by a forward rule and its gradient's rule (shape_grad.c), which
// checks dy against the forward output shape computed here. Slice: *out = x with the sliced
// axes' lengths (ONNX clamping), keep_sym keeping an axis's symbol when it is taken whole; false
// (after a diagnostic) on malformed starts / ends / axes / steps. Pad: *out = x.shape + pads
// (2 * rank entries, checked by the caller; a non-constant mode must not pad an empty axis);
// for_grad: PadGrad's rule (no symbols kept). Gather: *out = data[:axis] + indices.shape +
// data[axis+1:] (the rank checked by the caller).
bool dl_pass__sh_slice_shape(dl_pass__sh *c, const dl_ir_type *x, bool keep_sym, dl_ir_type *out);
void dl_pass__sh_gather_dims(const dl_ir_type *x, const dl_ir_type *idx, int32_t axis,
                             dl_ir_type *out);
bool dl_pass__sh_pad_dims(dl_pass__sh *c, const dl_ir_type *x, const int64_t *pads, size_t n,
                          bool for_grad, dl_ir_type *out);

// Infers the output types of one node whose inputs are typed (for passes that add nodes, like
// autodiff). False, with a diagnostic, if a rule is broken.
bool dl_pass__shape_node(const dl_ir_module *m, const dl_ir_node *n, dl_diags *d);

// Internal gradient ops: shape_grad.c (UnaryGrad, loss grads, LayerNormalizationGrad,
// GatherGrad, SliceGrad, PadGrad) and shape_grad_nn.c (ConvGradWeight, MaxPoolGrad,
// AveragePoolGrad, BatchNormalizationGrad).
bool dl_pass__sh_unary_grad(dl_pass__sh *c);
bool dl_pass__sh_loss_grad(dl_pass__sh *c);
bool dl_pass__sh_layer_norm_grad(dl_pass__sh *c);
bool dl_pass__sh_gather_grad(dl_pass__sh *c);
bool dl_pass__sh_slice_grad(dl_pass__sh *c);
bool dl_pass__sh_pad_grad(dl_pass__sh *c);
bool dl_pass__sh_batch_norm_grad(dl_pass__sh *c);
bool dl_pass__sh_conv_grad_weight(dl_pass__sh *c);
bool dl_pass__sh_pool_grad(dl_pass__sh *c);

#endif
