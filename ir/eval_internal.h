// ir/eval_internal.h — private interface between the reference evaluator's driver (eval.c) and
// its kernels (eval_ops.c: elementwise, reductions, shape ops; eval_nn.c: linear algebra,
// convolution, pooling, normalisation, losses).
//
// Every tensor inside the evaluator is an array of double plus dtype and shape (dl_ir__et).
// Kernels compute in double and never round: the driver rounds each node output to its dtype
// afterwards (float stays double, float16/bfloat16 round, integers truncate and wrap, bool is
// != 0). Output tensors arrive allocated with the shape of the node's inferred output type.
#ifndef DL_IR_EVAL_INTERNAL_H
#define DL_IR_EVAL_INTERNAL_H

#include "dl_ir.h"

typedef struct dl_ir__et {
    dl_dtype dtype;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    int64_t n; // number of elements
    double *d; // OWNED (heap), n elements (at least one allocated)
} dl_ir__et;

typedef struct dl_ir__ectx {
    const dl_ir_module *m;
    const dl_ir_node *node; // the node being evaluated (for diagnostics)
    dl_diags *d;
    bool training;
} dl_ir__ectx;

// Reports an error at the current node's location, prefixed "Op 'out': ", and returns
// DL_ERR_INVALID_ARG (data errors: bad index, bad label, ...).
dl_status dl_ir__node_err(dl_ir__ectx *cx, const char *fmt, ...) DL_PRINTF(2, 3);

// Evaluates one node: in[i] is NULL for an omitted optional input; out[k] are pre-allocated.
DL_NODISCARD dl_status dl_ir__eval_node(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                        dl_ir__et *out, size_t n_out);

// Parameters of an elementwise scalar function (eval_ops.c), read from the node once per kernel:
// the operand and result dtypes, the op's `alpha` and `approximate` attributes when its spec has
// them. A scalar that meets a data error sets div0 (integer Reciprocal of 0).
typedef struct dl_ir__sp {
    bool is_int; // the first input's dtype is not a float type
    dl_dtype out_dt;
    double alpha;
    bool tanh_approx;
    bool div0;
} dl_ir__sp;
#define DL_IR__MAX_MAP 16 // most inputs of one elementwise map (variadic Max / Min)
void dl_ir__scalar_params(const dl_ir_node *n, dl_dtype in_dt, dl_dtype out_dt, dl_ir__sp *out);
// f'(x) of op's scalar function (UnaryGrad's sub-op); false when op's scalar has no derivative.
bool dl_ir__unary_deriv(dl_ir_op op, const dl_ir__sp *p, double x, double *out);

// The evaluator's hooks: the eval column of ir/ir_ops.def, hook `x` being dl_ir__ev_x. Each takes
// the node's inputs (in[i] NULL for an omitted optional one; dl_ir__eval_node has checked the
// required ones, min_inputs in the op table) and its pre-allocated outputs.
typedef dl_status (*dl_ir__eval_hook)(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,
                                      dl_ir__et *out, size_t n_out);
#define DL_IR__EV_HOOK(x)                                                                          \
    DL_NODISCARD dl_status dl_ir__ev_##x(dl_ir__ectx *cx, dl_ir__et *const *in, size_t n_in,       \
                                         dl_ir__et *out, size_t n_out)
// eval_ops.c: elementwise (map: through the op's scalar function), reductions, shape ops.
DL_IR__EV_HOOK(map);
DL_IR__EV_HOOK(clip);
DL_IR__EV_HOOK(reduce);
DL_IR__EV_HOOK(arg_max);
DL_IR__EV_HOOK(copy);
DL_IR__EV_HOOK(transpose);
DL_IR__EV_HOOK(concat);
DL_IR__EV_HOOK(split);
DL_IR__EV_HOOK(slice);
DL_IR__EV_HOOK(gather);
DL_IR__EV_HOOK(expand);
DL_IR__EV_HOOK(pad);
// eval_nn.c: linear algebra, convolution, pooling, normalisation, softmax, dropout, losses.
DL_IR__EV_HOOK(matmul);
DL_IR__EV_HOOK(gemm);
DL_IR__EV_HOOK(conv);
DL_IR__EV_HOOK(conv_transpose);
DL_IR__EV_HOOK(pool);
DL_IR__EV_HOOK(global_pool);
DL_IR__EV_HOOK(batch_norm);
DL_IR__EV_HOOK(layer_norm);
DL_IR__EV_HOOK(softmax);
DL_IR__EV_HOOK(dropout);
DL_IR__EV_HOOK(sce);
DL_IR__EV_HOOK(nll);
DL_IR__EV_HOOK(mse);
// eval_grad.c and eval_grad_nn.c: the internal gradient ops.
DL_IR__EV_HOOK(unary_grad);
DL_IR__EV_HOOK(loss_grad);
DL_IR__EV_HOOK(layer_norm_grad);
DL_IR__EV_HOOK(gather_grad);
DL_IR__EV_HOOK(slice_grad);
DL_IR__EV_HOOK(pad_grad);
DL_IR__EV_HOOK(conv_grad_weight);
DL_IR__EV_HOOK(pool_grad);
DL_IR__EV_HOOK(batch_norm_grad);

// Index normalisation shared by a forward op (eval_ops.c) and its gradient (eval_grad.c), so
// the adjoint reads exactly the elements the forward wrote.
// Slice: the current node's starts / ends / axes? / steps? for input x, ONNX-clamped, as per
// axis the first index, the step and the length (untouched axes: 0, 1, dim); errors on
// malformed attributes.
DL_NODISCARD dl_status dl_ir__slice_params(dl_ir__ectx *cx, const dl_ir__et *x, int64_t *start,
                                           int64_t *step, int64_t *len);
// Pad (pads = [b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]): `padded` (Pad's output or PadGrad's dy,
// named `what` in the message) must have x's dims plus both pads, and only mode "constant" may
// pad an empty axis.
DL_NODISCARD dl_status dl_ir__pad_check_dims(dl_ir__ectx *cx, const dl_ir__et *x,
                                             const int64_t *pads, const char *mode,
                                             const dl_ir__et *padded, const char *what);
// Pad: maps padded coordinate oc (in place) to the x coordinate Pad reads for it (edge: clamped,
// wrap / reflect: wrapped / reflected); false when it reads none (constant mode, outside x).
bool dl_ir__pad_source(const dl_ir__et *x, const int64_t *pads, const char *mode, int64_t *oc);

// Gather: x viewed as [outer, x.dims[ax], inner]; every index of idx in [-d, d) (else an error
// naming axis ax).
void dl_ir__axis_split(const dl_ir__et *x, int32_t ax, int64_t *outer, int64_t *inner);
DL_NODISCARD dl_status dl_ir__gather_check_indices(dl_ir__ectx *cx, const dl_ir__et *idx,
                                                   int32_t ax, int64_t d);

// Index helpers. unravel: flat C-order index -> coordinates; ravel: the inverse.
void dl_ir__unravel(int64_t flat, const int64_t *dims, int32_t rank, int64_t *coord);
int64_t dl_ir__ravel(const int64_t *coord, const int64_t *dims, int32_t rank);
// Flat index into `t` of the element that broadcasts (numpy rules, right-aligned, size-1 dims
// repeat) to coordinate `oc` of a tensor of rank `orank`.
int64_t dl_ir__bcast_index(const dl_ir__et *t, const int64_t *oc, int32_t orank);
// True when a and b have the same rank and dims.
bool dl_ir__same_shape(const dl_ir__et *a, const dl_ir__et *b);
// True when `t` broadcasts to `dims` (rank `rank`).
bool dl_ir__bcast_ok(const dl_ir__et *t, const int64_t *dims, int32_t rank);
// Normalises a possibly negative axis; false if out of [-rank, rank).
bool dl_ir__axis(int64_t axis, int32_t rank, int32_t *out);

#endif
