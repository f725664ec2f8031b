// passes/fusion.c — operator fusion: elementwise nodes grouped so that codegen computes a whole
// group in one kernel, its inner values living in registers instead of the arena.
//
// A group is a tree of elementwise nodes (the op table's fusibility class ELEMENTWISE lowered by
// the generic map, and UnaryGrad) whose root is its last node in topological order, possibly
// headed by one product (Gemm or MatMul of float32 rank-2 operands, a batched float32 MatMul
// whose other members then read only single-element values from outside, or a float32 2-D
// Conv) whose value feeds it: the product's kernel then applies the group as its epilogue before
// storing (a Linear layer's or a convolution's Relu, a residual Add, the backward's activation
// gradient after dX = dY W^T), or by a MaxPoolGrad whose windows tile its input (the gradient of
// the activation before the pooling, applied where dx is stored). Such a group's values are all
// float32, its other members are cheap (a few arithmetic or select instructions: no transcendental
// in a GEMM's store loop), it reads at most 11 values and has at most 63 nodes; a convolution's
// and a MaxPoolGrad's members read nothing but float32 values of the group's dims (read at the
// element's index: a ResNet block's residual Add joins its second convolution) and, a
// convolution's, float32 values per channel (dl_ir_type_per_channel_of: a [C, 1, 1] scale or
// shift, read at the element's channel: an inference BatchNorm written as Mul and Add). A
// convolution's
// group that reads no value from outside and whose value only a 2 x 2 / stride 2 MaxPool reads ends
// with that pooling (is_pool_tail): the group's output is then the pooled value (an inference
// CNN's Conv+Relu+MaxPool; in training the pooling's gradient reads the activation, so it stays
// apart). A node joins the group of its consumer when: its one output's every use is an
// input of that one consumer (Mul(a, a) counts), the value is no root of the module (output, train
// loss, gradient, assign value), both have the output dims of the group, both are on the same side
// of the forward / training split (the infer entry runs only forward nodes), the value's dtype
// computes in its storage type (float, int32, int64, bool: no rounding on a store is skipped, so
// the fused kernel gives the bytes the separate ones gave), and the merged group reads at most
// DL_FUSION_MAX_INPUTS distinct values. External inputs may broadcast to the group's dims
// (UnaryGrad's must have them: it is a flat loop).
//
// A row reduction (is_row_reduce: ReduceSum or ReduceMean of a float32 value over its last axis
// only, keeping it) joins groups too, one per group and never with a product: the members whose
// values it reduces (the producers: they join it as they would an elementwise consumer, at its
// input's dims) and the members that read its result, broadcast along the reduced axis (the
// consumers: it joins its one consumer when that has its input's dims). Codegen computes such a
// group per row in two passes over the row (dl_cg__lower_fused): the producers and the sum, then
// the consumers; autodiff's Softmax gradient y * (dy - sum(dy * y)) and LogSoftmax's
// dy - exp(y) * sum(dy) each become one kernel instead of three. A row operation (is_row_op:
// Softmax, LogSoftmax or LayerNormalization of float32 over the last axis, one output) takes
// the place of the reduction the same way: the cheap maps that make its input X join it
// (codegen recomputes them in each of its three passes per row), and it joins its one
// consumer, which reads its output at the consumer's own element (a masked, scaled Softmax; the
// LayerNormalization of a residual sum).
// Its sum's order is the fused loop's own (fixed by the static shapes, never by the thread
// count), so its bytes may differ from those of the unfused kernels in the last bits.
//
// Result: dl_ir_node.fuse_root of every non-root member points at its group's root; nothing else
// in the module changes (dumps parse back; a module that is not lowered is unaffected).
// Codegen (codegen/lower_elem.c, dl_cg__lower_fused) emits one loop nest over the group's dims
// that loads each external input once and applies each member's scalar function in order; for
// a product head, codegen/x86/x86_linalg.c's kernels call the same per-element code in their
// epilogue (dl_cg__lower_product_fused).
#include "dl_pass.h"

#include <stdlib.h>
#include <string.h>

// Distinct values a fused kernel may read: codegen's map emitter takes 16 operands, one of them
// the output. A group headed by a product reads at most 11 (its A, B and C among them), and
// has at most 63 nodes (codegen/x86/x86_linalg.c's epilogue).
#define DL_FUSION_MAX_INPUTS      15
#define DL_FUSION_MAX_HEAD_INPUTS 11
#define DL_FUSION_MAX_HEAD_NODES  63
// Rows a row reduction's group needs: its kernel's parallel range is the rows, where the
// separate maps split every element, so with fewer rows than threads the fused maps would run on
// fewer threads.
#define DL_FUSION_MIN_ROWS 16

// Computes in the storage type (cg_internal.h: float16 and bfloat16 compute in f32).
static bool exact_dtype(dl_dtype t) {
    switch (t) {
    case DL_DT_FLOAT:
    case DL_DT_INT32:
    case DL_DT_INT64:
    case DL_DT_BOOL:
        return true;
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16:
    case DL_DT_COUNT:
        return false;
    }
    return false;
}

// A node codegen can compute inside a fused loop: one output, every input present; a map op, or
// a float32 UnaryGrad whose inputs have its dims.
static bool fusible(const dl_ir_node *n) {
    if (n->n_outputs != 1 || dl_ir_type_numel(&n->outputs[0]->type) <= 0) {
        return false;
    }
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i]) {
            return false;
        }
    }
    if (n->op == DL_IR_OP_UNARY_GRAD) {
        const dl_ir_type *t = &n->outputs[0]->type;
        return n->n_inputs == 2 && t->dtype == DL_DT_FLOAT &&
               n->inputs[0]->type.dtype == DL_DT_FLOAT && n->inputs[1]->type.dtype == DL_DT_FLOAT &&
               dl_ir_type_same_dims(&n->inputs[0]->type, t) &&
               dl_ir_type_same_dims(&n->inputs[1]->type, t);
    }
    const dl_ir_op_info *info = dl_ir_op_get_info(n->op);
    return (info->fuse == DL_IR_FUSE_ELEMENTWISE || info->fuse == DL_IR_FUSE_ELEMENTWISE_CHEAP) &&
           strcmp(info->lower_hook, "map") == 0 && strcmp(info->scalar_hook, "none") != 0;
}

// A 2-D convolution that can head a group: float32 x, w, bias and y of rank 4. Its epilogue
// reads the group's own values, float32 values of its dims (a residual, which the kernels load
// at the element they store) and float32 values per channel (loaded at its channel).
static bool is_conv_head(const dl_ir_node *n) {
    if (n->op != DL_IR_OP_CONV || n->n_outputs != 1 || n->n_inputs < 2 || !n->inputs[0] ||
        !n->inputs[1]) {
        return false;
    }
    const dl_ir_type *y = &n->outputs[0]->type, *x = &n->inputs[0]->type, *w = &n->inputs[1]->type;
    bool bias_ok = n->n_inputs < 3 || !n->inputs[2] || n->inputs[2]->type.dtype == DL_DT_FLOAT;
    return y->dtype == DL_DT_FLOAT && y->rank == 4 && x->dtype == DL_DT_FLOAT && x->rank == 4 &&
           w->dtype == DL_DT_FLOAT && bias_ok && dl_ir_type_numel(y) > 0;
}

// A reduction that can join a group: ReduceSum or ReduceMean of float32 over exactly the last axis
// of a non-empty value of rank >= 1 with at least DL_FUSION_MIN_ROWS rows, keepdims (its result
// broadcasts back over the row).
bool dl_pass_fusion_is_row_reduce(const dl_ir_node *n) {
    if ((n->op != DL_IR_OP_REDUCE_SUM && n->op != DL_IR_OP_REDUCE_MEAN) || n->n_outputs != 1 ||
        n->n_inputs != 1 || !n->inputs[0]) {
        return false;
    }
    const dl_ir_type *x = &n->inputs[0]->type, *y = &n->outputs[0]->type;
    const dl_ir_attr *ax = dl_ir_node_attr(n, "axes");
    if (x->dtype != DL_DT_FLOAT || y->dtype != DL_DT_FLOAT || x->rank < 1 || y->rank != x->rank ||
        dl_ir_type_numel(x) <= 0 || dl_ir_node_attr_int(n, "keepdims") != 1 || !ax ||
        ax->kind != DL_IR_ATTR_INTS || ax->n != 1) {
        return false;
    }
    int64_t a = ax->ints[0] < 0 ? ax->ints[0] + x->rank : ax->ints[0];
    int64_t rows = dl_ir_type_numel(x) / x->dims[x->rank - 1].value;
    return a == x->rank - 1 && rows >= DL_FUSION_MIN_ROWS;
}

// A row operation that can join a group as a row reduction does: Softmax or LogSoftmax over the
// last axis, or LayerNormalization over the last axis with its one output Y (no Mean or
// InvStdDev), of float32 values (scale and bias too), at least DL_FUSION_MIN_ROWS rows. Its
// producers make its input X (never its scale or bias); its consumers read Y at their own
// element, as any map's.
static bool is_row_op(const dl_ir_node *n) {
    bool ln = n->op == DL_IR_OP_LAYER_NORMALIZATION;
    if ((n->op != DL_IR_OP_SOFTMAX && n->op != DL_IR_OP_LOG_SOFTMAX && !ln) || n->n_outputs < 1 ||
        !n->outputs[0] || n->n_inputs < 1 || !n->inputs[0]) {
        return false;
    }
    for (size_t o = 1; o < n->n_outputs; o++) {
        if (n->outputs[o]) {
            return false;
        }
    }
    for (size_t i = 0; i < n->n_inputs; i++) {
        const dl_ir_value *v = n->inputs[i];
        if (v ? v->type.dtype != DL_DT_FLOAT : i < (ln ? 2u : 1u)) {
            return false;
        }
    }
    const dl_ir_type *x = &n->inputs[0]->type, *y = &n->outputs[0]->type;
    if (y->dtype != DL_DT_FLOAT || x->rank < 1 || !dl_ir_type_same_dims(x, y) ||
        dl_ir_type_numel(x) <= 0) {
        return false;
    }
    int64_t a = dl_ir_node_attr_int(n, "axis");
    int64_t rows = dl_ir_type_numel(x) / x->dims[x->rank - 1].value;
    return (a == -1 || a == x->rank - 1) && rows >= DL_FUSION_MIN_ROWS;
}

bool dl_pass_fusion_is_row_node(const dl_ir_node *n) {
    return dl_pass_fusion_is_row_reduce(n) || is_row_op(n);
}

// Whether value v is the row node r's input X and no other input of it (a LayerNormalization's
// scale or bias is read along the row, not made at its element).
static bool feeds_only_x(const dl_ir_node *r, const dl_ir_value *v) {
    for (size_t i = 1; i < r->n_inputs; i++) {
        if (r->inputs[i] == v) {
            return false;
        }
    }
    return r->inputs[0] == v;
}

// Whether attribute `name` of n is absent or every entry equals want[i] (want NULL: v).
static bool ints_are(const dl_ir_node *n, const char *name, const int64_t *want, int64_t v,
                     size_t len) {
    const dl_ir_attr *a = dl_ir_node_attr(n, name);
    if (!a) {
        return true;
    }
    if (a->n != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (a->ints[i] != (want ? want[i] : v)) {
            return false;
        }
    }
    return true;
}

// A MaxPoolGrad that can head a group (codegen/x86/x86_grad_nn.c, its fast path): float32, 2-D,
// windows of at most 16 taps with strides equal to the kernel, no padding, no dilation, that
// tile the input exactly, so that every dx element is written once, where the group's members
// apply to it (the gradient of the Relu before a 2 x 2 pooling); OW <= 4096.
static bool is_pool_grad_head(const dl_ir_node *n) {
    if (n->op != DL_IR_OP_MAX_POOL_GRAD || n->n_outputs != 1 || n->n_inputs != 2 || !n->inputs[0] ||
        !n->inputs[1]) {
        return false;
    }
    const dl_ir_type *dx = &n->outputs[0]->type, *dy = &n->inputs[0]->type;
    const dl_ir_attr *k = dl_ir_node_attr(n, "kernel_shape");
    const char *pad = dl_ir_node_attr_string(n, "auto_pad");
    if (dx->dtype != DL_DT_FLOAT || dy->dtype != DL_DT_FLOAT || dx->rank != 4 || dy->rank != 4 ||
        dl_ir_type_numel(dx) <= 0 || !k || k->n != 2 || k->ints[0] * k->ints[1] > 16 ||
        (pad && strcmp(pad, "NOTSET") != 0 && strcmp(pad, "VALID") != 0) ||
        !ints_are(n, "strides", k->ints, 0, 2) || !ints_are(n, "pads", NULL, 0, 4) ||
        !ints_are(n, "dilations", NULL, 1, 2)) {
        return false;
    }
    return dy->dims[3].value <= 4096 && dy->dims[2].value * k->ints[0] == dx->dims[2].value &&
           dy->dims[3].value * k->ints[1] == dx->dims[3].value;
}

// A MaxPool that can end a convolution's group (codegen pools where the convolution's kernel
// stores, so the convolution's full-size value is never written): float32, 2-D, 2 x 2 windows
// with strides 2, no padding, no dilation, floor rounding, no Indices output, an input at most
// 128 columns wide (a row pair fits the implicit GEMM's column group of 256).
static bool is_pool_tail(const dl_ir_node *n) {
    static const int64_t two[2] = {2, 2};
    if (n->op != DL_IR_OP_MAX_POOL || n->n_inputs != 1 || !n->inputs[0] || n->n_outputs < 1 ||
        !n->outputs[0] || (n->n_outputs > 1 && n->outputs[1])) {
        return false;
    }
    const dl_ir_type *x = &n->inputs[0]->type, *y = &n->outputs[0]->type;
    const dl_ir_attr *k = dl_ir_node_attr(n, "kernel_shape");
    const dl_ir_attr *st = dl_ir_node_attr(n, "strides");
    const char *pad = dl_ir_node_attr_string(n, "auto_pad");
    return x->dtype == DL_DT_FLOAT && y->dtype == DL_DT_FLOAT && x->rank == 4 && y->rank == 4 &&
           dl_ir_type_numel(y) > 0 && x->dims[3].value <= 128 && k && st &&
           ints_are(n, "kernel_shape", two, 0, 2) && ints_are(n, "strides", two, 0, 2) &&
           (!pad || strcmp(pad, "NOTSET") == 0 || strcmp(pad, "VALID") == 0) &&
           ints_are(n, "pads", NULL, 0, 4) && ints_are(n, "dilations", NULL, 1, 2) &&
           dl_ir_node_attr_int(n, "ceil_mode") == 0 && y->dims[2].value == x->dims[2].value / 2 &&
           y->dims[3].value == x->dims[3].value / 2;
}

// A batched MatMul that can head a group: float32 operands and a float32 output of rank >= 3
// (attention's scores and their gradients). Its kernels' epilogue knows an element's row and
// column in its batch, not the batch, so the group's other members read nothing from outside
// but single-element values (a scale: the scores' 1 / sqrt(d)).
static bool is_batched_head(const dl_ir_node *n) {
    if (n->op != DL_IR_OP_MATMUL || n->n_outputs != 1 || n->n_inputs != 2 || !n->inputs[0] ||
        !n->inputs[1]) {
        return false;
    }
    const dl_ir_type *y = &n->outputs[0]->type, *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
    return y->dtype == DL_DT_FLOAT && y->rank >= 3 && a->dtype == DL_DT_FLOAT && a->rank >= 2 &&
           b->dtype == DL_DT_FLOAT && b->rank >= 2 && dl_ir_type_numel(y) > 0;
}

// A product that can head a group, its elementwise epilogue after it: Gemm or MatMul of
// float32 rank-2 operands (one [M, N] product), a batched MatMul (is_batched_head), or a 2-D
// convolution (is_conv_head).
static bool can_head(const dl_ir_node *n) {
    if (is_conv_head(n) || is_pool_grad_head(n) || is_batched_head(n)) {
        return true;
    }
    if ((n->op != DL_IR_OP_GEMM && n->op != DL_IR_OP_MATMUL) || n->n_outputs != 1 ||
        n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1]) {
        return false;
    }
    const dl_ir_type *y = &n->outputs[0]->type, *a = &n->inputs[0]->type, *b = &n->inputs[1]->type;
    return y->dtype == DL_DT_FLOAT && y->rank == 2 && a->dtype == DL_DT_FLOAT && a->rank == 2 &&
           b->dtype == DL_DT_FLOAT && b->rank == 2 && dl_ir_type_numel(y) > 0;
}

// A member cheap enough for a product's epilogue: an op of the table's ELEMENTWISE_CHEAP class (a
// few arithmetic or select instructions), or its UnaryGrad. The epilogue runs in the GEMM kernels'
// store loops, which LLVM vectorises only partly; a transcendental there (Gelu's gradient: an erf
// and an exp per element) costs more than the memory pass it saves (measured: the transformer's dX
// GEMM with Gelu's gradient fused took 26 ms against 7 + 1.6 ms apart), so those stay in their own
// vectorised map.
static bool cheap(const dl_ir_node *n) {
    dl_ir_op op = n->op == DL_IR_OP_UNARY_GRAD ? dl_ir_node_unary_grad_op(n) : n->op;
    return dl_ir_op_fuse_class(op) == DL_IR_FUSE_ELEMENTWISE_CHEAP;
}

static size_t find(size_t *root, size_t i) {
    while (root[i] != i) {
        root[i] = root[root[i]];
        i = root[i];
    }
    return i;
}

// Distinct values read from outside the union of groups ga and gb (group ids = root node ids).
static size_t external_inputs(const dl_ir_module *m, size_t *root, size_t ga, size_t gb) {
    const dl_ir_value *seen[DL_FUSION_MAX_INPUTS + 1];
    size_t n = 0;
    for (size_t i = 0; i < m->nodes.len && n <= DL_FUSION_MAX_INPUTS; i++) {
        size_t g = find(root, i);
        if (g != ga && g != gb) {
            continue;
        }
        const dl_ir_node *x = m->nodes.data[i];
        for (size_t a = 0; a < x->n_inputs && n <= DL_FUSION_MAX_INPUTS; a++) {
            const dl_ir_value *v = x->inputs[a];
            if (v->def) {
                size_t gd = find(root, v->def->id);
                if (gd == ga || gd == gb) {
                    continue;
                }
            }
            bool dup = false;
            for (size_t k = 0; k < n && !dup; k++) {
                dup = seen[k] == v;
            }
            if (!dup) {
                seen[n++] = v;
            }
        }
    }
    return n;
}

// Whether every member of groups ga and gb together but its head (a convolution, a MaxPoolGrad
// or a batched MatMul) reads only values made in the union (t NULL: a convolution's kernels have
// no index to load another value at), single-element values when `scalars` (a batched
// product's epilogue loads them at offset 0) or, from outside it, float32 values of t's dims
// (the pooling gradient's kernel loads them at its own element's index) and, when `chan` (a
// convolution's epilogue, which knows each element's channel), float32 values per channel of t.
static bool members_read_ok(const dl_ir_module *m, size_t *root, size_t ga, size_t gb,
                            const dl_ir_type *t, bool scalars, bool chan) {
    for (size_t i = 0; i < m->nodes.len; i++) {
        size_t g = find(root, i);
        const dl_ir_node *x = m->nodes.data[i];
        if ((g != ga && g != gb) || is_conv_head(x) || is_pool_grad_head(x) || is_batched_head(x)) {
            continue;
        }
        for (size_t a = 0; a < x->n_inputs; a++) {
            const dl_ir_value *v = x->inputs[a];
            size_t gd = v->def ? find(root, v->def->id) : SIZE_MAX;
            if (gd != ga && gd != gb && !(scalars && dl_ir_type_numel(&v->type) == 1) &&
                (!t || v->type.dtype != DL_DT_FLOAT || !dl_ir_type_same_dims(&v->type, t)) &&
                !(t && chan && v->type.dtype == DL_DT_FLOAT &&
                  dl_ir_type_per_channel_of(&v->type, t))) {
                return false;
            }
        }
    }
    return true;
}

// Nodes of groups ga and gb together, and whether every one has a float32 output and is cheap
// or a product.
static size_t union_nodes(const dl_ir_module *m, size_t *root, size_t ga, size_t gb,
                          bool *all_float_cheap) {
    size_t n = 0;
    *all_float_cheap = true;
    for (size_t i = 0; i < m->nodes.len; i++) {
        size_t g = find(root, i);
        if (g == ga || g == gb) {
            const dl_ir_node *x = m->nodes.data[i];
            n++;
            *all_float_cheap = *all_float_cheap && x->outputs[0]->type.dtype == DL_DT_FLOAT &&
                               (cheap(x) || can_head(x));
        }
    }
    return n;
}

dl_status dl_pass_fusion(dl_ir_module *m, dl_diags *d, dl_pass_fusion_stats *out) {
    (void)d;
    if (out) {
        memset(out, 0, sizeof *out);
    }
    size_t nn = m->nodes.len, nv = m->values.len;
    for (size_t i = 0; i < nn; i++) {
        m->nodes.data[i]->fuse_root = NULL;
    }
    // Per value: its one consumer node (NULL with none), whether another node or a root uses it.
    const dl_ir_node **consumer = calloc(nv ? nv : 1, sizeof *consumer);
    uint8_t *pinned = calloc(nv ? nv : 1, sizeof *pinned);
    size_t *root = malloc((nn ? nn : 1) * sizeof *root);
    bool *headed = calloc(nn ? nn : 1, sizeof *headed); // per group root: it has a product
    size_t *size = calloc(nn ? nn : 1, sizeof *size);   // per group root: its node count
    bool *conv = calloc(nn ? nn : 1, sizeof *conv);     // per group root: a convolution heads it
    bool *pool = calloc(nn ? nn : 1, sizeof *pool);     // per group root: a MaxPoolGrad heads it
    bool *red = calloc(nn ? nn : 1, sizeof *red);       // per group root: a row reduction in it
    bool *bat = calloc(nn ? nn : 1, sizeof *bat);       // per group root: a batched MatMul heads it
    if (!consumer || !pinned || !root || !headed || !size || !conv || !pool || !red || !bat) {
        free(bat);
        free(red);
        free(pool);
        free(consumer);
        free(pinned);
        free(root);
        free(headed);
        free(size);
        free(conv);
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < nn; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        root[i] = i;
        conv[i] = is_conv_head(n);
        pool[i] = is_pool_grad_head(n);
        red[i] = dl_pass_fusion_is_row_node(n);
        bat[i] = is_batched_head(n);
        for (size_t a = 0; a < n->n_inputs; a++) {
            const dl_ir_value *v = n->inputs[a];
            if (!v) {
                continue;
            }
            if (consumer[v->id] && consumer[v->id] != n) {
                pinned[v->id] = true; // two consumers
            }
            consumer[v->id] = n;
        }
    }
    dl_ir_module_mark_roots(m, pinned);
    size_t n_fwd = m->has_backward ? m->n_fwd_nodes : nn;
    // In topological order a node's own group is complete when it is reached: it joins its
    // consumer's group (a later node) or stays a root.
    for (size_t i = 0; i < nn; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        bool head = can_head(n), rr = dl_pass_fusion_is_row_node(n);
        if (!fusible(n) && !head && !rr) {
            continue;
        }
        const dl_ir_value *v = n->outputs[0];
        const dl_ir_node *c = consumer[v->id];
        // The dims both compute at: a row node's input dims (its producers' and consumers')
        bool into_rr = c && dl_pass_fusion_is_row_node(c);
        if (!c || pinned[v->id] || v->is_output || !(fusible(c) || into_rr) ||
            (into_rr && !feeds_only_x(c, v)) || !exact_dtype(v->type.dtype) ||
            !dl_ir_type_same_dims(rr ? &n->inputs[0]->type : &v->type,
                                  into_rr ? &c->inputs[0]->type : &c->outputs[0]->type) ||
            (i < n_fwd) != (c->id < n_fwd)) {
            continue;
        }
        size_t gn = find(root, i), gc = find(root, c->id);
        headed[gn] = headed[gn] || head;
        if ((headed[gn] && headed[gc]) || (red[gn] && red[gc]) ||
            ((headed[gn] || headed[gc]) && (red[gn] || red[gc]))) {
            continue; // one product or one reduction per group, never both
        }
        bool all_float = false; // and cheap
        // A row operation recomputes its producers in each of its three passes over the row:
        // only cheap ones join it (LayerNormalization (Tanh (x)) would evaluate Tanh three times).
        bool p_cheap = true;
        if (into_rr && is_row_op(c) && union_nodes(m, root, gn, gn, &p_cheap) > 0 && !p_cheap) {
            continue;
        }
        size_t nodes = union_nodes(m, root, gn, gc, &all_float);
        size_t inputs = external_inputs(m, root, gn, gc);
        bool headed_union = headed[gn] || headed[gc];
        bool conv_union = conv[gn] || conv[gc], pool_union = pool[gn] || pool[gc];
        bool bat_union = bat[gn] || bat[gc];
        if (headed_union ? !all_float || inputs > DL_FUSION_MAX_HEAD_INPUTS ||
                               nodes > DL_FUSION_MAX_HEAD_NODES ||
                               ((conv_union || pool_union) &&
                                !members_read_ok(m, root, gn, gc, &v->type, false, conv_union)) ||
                               (bat_union && !members_read_ok(m, root, gn, gc, NULL, true, false))
                         : inputs > DL_FUSION_MAX_INPUTS) {
            continue;
        }
        headed[gc] = headed_union;
        bat[gc] = bat_union;
        red[gc] = red[gn] || red[gc];
        conv[gc] = conv_union;
        pool[gc] = pool_union;
        root[gn] = gc; // gc is c's group, whose root is c or a later node
    }
    // A convolution's group (or a lone convolution) whose value only a 2 x 2 MaxPool reads
    // takes the pooling as its root: the pooled value is the group's output.
    for (size_t i = 0; i < nn; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        if (!is_pool_tail(n)) {
            continue;
        }
        const dl_ir_value *v = n->inputs[0];
        if (!v->def || pinned[v->id] || v->is_output || consumer[v->id] != n ||
            (v->def->id < n_fwd) != (i < n_fwd)) {
            continue;
        }
        size_t gv = find(root, v->def->id);
        bool all_float = false;
        if (gv != v->def->id || !conv[gv] ||
            !members_read_ok(m, root, gv, gv, NULL, false, false) ||
            union_nodes(m, root, gv, i, &all_float) > DL_FUSION_MAX_HEAD_NODES) {
            continue;
        }
        headed[i] = conv[i] = true;
        root[gv] = i;
    }
    for (size_t i = 0; i < nn; i++) {
        size_t g = find(root, i);
        size[g]++;
        if (g != i) {
            m->nodes.data[i]->fuse_root = m->nodes.data[g];
        }
    }
    for (size_t i = 0; out && i < nn; i++) {
        if (size[i] > 1) {
            out->groups++;
            out->fused_nodes += size[i];
        }
    }
    free(bat);
    free(red);
    free(size);
    free(consumer);
    free(pinned);
    free(root);
    free(headed);
    free(conv);
    free(pool);
    return DL_OK;
}

void dl_pass_fusion_describe(const dl_ir_module *m, dl_strbuf *b) {
    for (size_t r = 0; r < m->nodes.len; r++) {
        const dl_ir_node *root = m->nodes.data[r];
        if (root->fuse_root) {
            continue;
        }
        bool any = false;
        for (size_t i = 0; i < r && !any; i++) {
            any = m->nodes.data[i]->fuse_root == root;
        }
        if (!any) {
            continue;
        }
        dl_strbuf_printf(b, "# fusion: %s = one kernel:", root->outputs[0]->name);
        for (size_t i = 0; i <= r; i++) {
            const dl_ir_node *x = m->nodes.data[i];
            if (x == root || x->fuse_root == root) {
                dl_strbuf_printf(b, " %s %s%s", dl_ir_op_get_info(x->op)->name, x->outputs[0]->name,
                                 x == root ? "\n" : ",");
            }
        }
    }
}
