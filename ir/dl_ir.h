// ir/dl_ir.h — the graph IR: types, SSA values, nodes, attributes, params, inputs, outputs and the
// train config; the op table; builder, verifier, printer, canonical serialisation and the
// reference evaluator. Used by frontend/, passes/, codegen/ and tools/. Not by runtime/ or cache/.
//
// Design note (a deliberate departure from "handles are opaque", STYLE.md 3.2): the IR structs
// below are plain data with public fields. Every pass, the printer, the evaluator and codegen
// walk them constantly; accessor functions for each field would add noise and no safety. What
// stays behind the API is *allocation*: everything is created through dl_ir_module_* builders,
// lives in the module's arena and dies with dl_ir_module_destroy. Passes may rewrite fields
// (e.g. shape inference fills value types) but never free anything.
//
// Invariants (checked by dl_ir_verify):
//  - every value is defined once, before its uses, in statement order;
//  - m->values[i]->id == i; m->nodes[i]->id == i;
//  - a NODE value is outputs[def_out] of its def node;
//  - node input count and output count are within the op table's bounds.
#ifndef DL_IR_H
#define DL_IR_H

#include "dl_base.h"

// ---------------------------------------------------------------------------------------------
// The op table

typedef enum dl_ir_op {
#define DL_OP(e, ...) DL_IR_OP_##e,
#include "ir_ops.def"
#undef DL_OP
    DL_IR_OP_COUNT
} dl_ir_op;

// Op properties: the columns of ir_ops.def (whose header defines each value). Passes, the
// evaluator, codegen and the memory plan ask these instead of listing ops.
typedef enum dl_ir_kind {
    DL_IR_KIND_UNARY,
    DL_IR_KIND_BINARY,
    DL_IR_KIND_COMPARE,
    DL_IR_KIND_LOGICAL,
    DL_IR_KIND_SELECT,
    DL_IR_KIND_ACTIVATION,
    DL_IR_KIND_REDUCE,
    DL_IR_KIND_CONTRACTION,
    DL_IR_KIND_CONVOLUTION,
    DL_IR_KIND_POOL,
    DL_IR_KIND_NORMALISATION,
    DL_IR_KIND_RANDOM,
    DL_IR_KIND_MOVEMENT,
    DL_IR_KIND_LOSS,
    DL_IR_KIND_COLLECTIVE, // across data-parallel ranks (AllReduceMean)
    DL_IR_KIND_GRADIENT,
} dl_ir_kind;

typedef enum dl_ir_inplace {
    DL_IR_INPLACE_NO,
    DL_IR_INPLACE_ELEMENT, // reads an input of the output's dims only at the element it writes
    DL_IR_INPLACE_FLAT,    // the same by flat index: any dims with the output's element count
} dl_ir_inplace;

typedef enum dl_ir_fuse {
    DL_IR_FUSE_NONE,
    DL_IR_FUSE_ELEMENTWISE,
    DL_IR_FUSE_REDUCTION,
    DL_IR_FUSE_CONTRACTION, // GEMM / convolution: takes an elementwise epilogue
    DL_IR_FUSE_MOVEMENT,
    DL_IR_FUSE_ELEMENTWISE_CHEAP, // elementwise, a few arithmetic or select instructions: it may
                                  // also join a product's epilogue
} dl_ir_fuse;

typedef enum dl_ir_nan {
    DL_IR_NAN_NA,        // no float math (bool, indices, data movement)
    DL_IR_NAN_ARITH,     // IEEE arithmetic: a NaN operand gives NaN
    DL_IR_NAN_PROPAGATE, // select / max / min that keeps NaN (never maxnum / minnum)
    DL_IR_NAN_CMP_FALSE, // ordered comparison: NaN compares false
    DL_IR_NAN_IS_MAX,    // NaN counts as the largest value (ArgMax, MaxPool)
} dl_ir_nan;

// Ops from here on are internal (created by autodiff; see ir_ops.def).
#define DL_IR_OP_FIRST_INTERNAL DL_IR_OP_UNARY_GRAD
static inline bool dl_ir_op_is_internal(dl_ir_op op) {
    return op >= DL_IR_OP_FIRST_INTERNAL;
}

typedef enum dl_ir_attr_kind {
    DL_IR_ATTR_INT,
    DL_IR_ATTR_FLOAT,
    DL_IR_ATTR_STRING,
    DL_IR_ATTR_INTS,
    DL_IR_ATTR_FLOATS,
    DL_IR_ATTR_STRINGS,
} dl_ir_attr_kind;

const char *dl_ir_attr_kind_name(dl_ir_attr_kind k); // "int", "float", "string", "ints", ...

// What an op accepts for one attribute. Range checks that need no shapes live here; those that
// do (axis within rank) are the shape pass's.
typedef struct dl_ir_attr_spec {
    const char *name;
    dl_ir_attr_kind kind;
    bool required;
    // Defaults (for INT / FLOAT / STRING kinds; list kinds default to absent).
    int64_t def_i;
    double def_f;
    const char *def_s;
    // Validation: for INT/INTS, values must be >= min_i when has_min; for STRING(S), the value
    // must be one of the '|'-separated `choices` when non-NULL.
    bool has_min;
    int64_t min_i;
    const char *choices;
} dl_ir_attr_spec;

typedef struct dl_ir_op_info {
    dl_ir_op op;
    const char *name;               // ONNX name, e.g. "MatMul"
    int32_t min_inputs, max_inputs; // max -1 = variadic
    int32_t min_outputs, max_outputs;
    bool differentiable;
    const dl_ir_attr_spec *attrs; // array of n_attrs, sorted by name
    size_t n_attrs;
    dl_ir_kind kind;
    bool is_elementwise;
    dl_ir_inplace inplace;
    dl_ir_fuse fuse;
    dl_ir_nan nan;
    // Hook names as written in ir_ops.def (each module maps them to its own functions); "none"
    // where the op has none.
    const char *shape_hook, *eval_hook, *grad_hook, *lower_hook, *scalar_hook;
} dl_ir_op_info;

const dl_ir_op_info *dl_ir_op_get_info(dl_ir_op op); // never NULL for a valid op
// Looks an op up by its exact (case-sensitive) ONNX name. Returns false if unknown.
bool dl_ir_op_from_name(const char *name, dl_ir_op *out);
const dl_ir_attr_spec *dl_ir_op_find_attr_spec(dl_ir_op op, const char *attr_name);

// Column accessors (constant time, no initialisation; op must be valid).
dl_ir_kind dl_ir_op_kind(dl_ir_op op);
bool dl_ir_op_is_elementwise(dl_ir_op op);
dl_ir_inplace dl_ir_op_inplace(dl_ir_op op);
bool dl_ir_op_inplace_ok(dl_ir_op op); // dl_ir_op_inplace(op) != DL_IR_INPLACE_NO
dl_ir_fuse dl_ir_op_fuse_class(dl_ir_op op);
dl_ir_nan dl_ir_op_nan(dl_ir_op op);
// True when op's gradient goes through UnaryGrad (its grad hook is `unary`): op is then a valid
// UnaryGrad sub-op, named by its ONNX name in UnaryGrad's `op` attribute.
bool dl_ir_op_has_unary_grad(dl_ir_op op);

// ---------------------------------------------------------------------------------------------
// Types

// One dimension: its value, and the module dim it came from (sym >= 0) or -1 for a literal.
typedef struct dl_ir_dim {
    int64_t value;
    int32_t sym;
} dl_ir_dim;

typedef struct dl_ir_type {
    dl_dtype dtype;
    int32_t rank; // -1: not yet inferred; 0: scalar
    dl_ir_dim dims[DL_MAX_RANK];
} dl_ir_type;

// 1 for scalars; INT64_MAX when the product overflows (types that passed dl_pass_shape never do:
// see DL_IR_MAX_TENSOR_BYTES).
int64_t dl_ir_type_numel(const dl_ir_type *t);
bool dl_ir_type_equal(const dl_ir_type *a, const dl_ir_type *b);     // dtype + dim values
bool dl_ir_type_same_dims(const dl_ir_type *a, const dl_ir_type *b); // dim values only
// Whether v broadcasts along t ([N, C, ...], rank >= 2) to one value per channel: v's dims,
// aligned to t's last, are all 1 but the one against t's channels, which is 1 or C ([C, 1, 1],
// [1, C, 1, 1], one element). Dims only, not dtypes.
bool dl_ir_type_per_channel_of(const dl_ir_type *v, const dl_ir_type *t);
// "float[N, 784]" (symbolic names where present, when m is non-NULL) into buf.
typedef struct dl_ir_module dl_ir_module;
void dl_ir_type_format(const dl_ir_module *m, const dl_ir_type *t, char *buf, size_t size);
// "[128, 784]" (values only).
void dl_ir_type_format_shape(const dl_ir_type *t, char *buf, size_t size);

// Size limits (docs/graph-format.md, "Limits"). Every tensor a model declares or computes holds
// at most DL_IR_MAX_TENSOR_BYTES bytes, and so that no shape arithmetic can overflow int64 the
// same bound applies with each 0 dim counted as 1 (so every dim, and every product of dims, is
// at most 2^40). A const is materialised by the compiler (the artifact holds its data, splat or
// not), so it gets the smaller DL_IR_MAX_CONST_BYTES.
#define DL_IR_MAX_TENSOR_BYTES (INT64_C(1) << 40)   // 1 TiB
#define DL_IR_MAX_CONST_BYTES  (INT64_C(256) << 20) // 256 MiB
// Checked element count and byte size of t (rank >= 0). False when either overflows int64.
bool dl_ir_type_size(const dl_ir_type *t, int64_t *numel, int64_t *nbytes);
// True when t (rank >= 0) is within max_bytes as described above. Otherwise false, with why
// (NUL-terminated, truncated to why_size) saying what is wrong, e.g. "float[100000, 100000,
// 1000] is 40000000000000 bytes, more than the limit of 1099511627776 bytes (1 TiB) for a
// tensor"; `what` names the limit ("a tensor", "a constant").
bool dl_ir_type_check_limit(const dl_ir_type *t, int64_t max_bytes, const char *what, char *why,
                            size_t why_size);

// ---------------------------------------------------------------------------------------------
// Attributes

typedef struct dl_ir_attr {
    const char *name;
    dl_ir_attr_kind kind;
    dl_src_loc loc;    // of the attribute name
    int64_t i;         // INT
    int32_t i_sym;     // INT: module dim index if written as a dim name, else -1
    double f;          // FLOAT
    const char *s;     // STRING
    size_t n;          // list length for INTS / FLOATS / STRINGS
    int64_t *ints;     // INTS
    int32_t *int_syms; // INTS: per element dim index or -1 (may be NULL: all literal)
    double *floats;    // FLOATS
    const char **strs; // STRINGS
} dl_ir_attr;

// ---------------------------------------------------------------------------------------------
// Literals and initialisers

// A constant's data: n == 1 and is_splat means "broadcast this one number to the whole shape".
// Float dtypes use `f`, integer and bool dtypes use `i` (the other pointer is NULL).
typedef struct dl_ir_literal {
    int64_t n;
    bool is_splat;
    double *f;
    int64_t *i;
} dl_ir_literal;

typedef enum dl_ir_init_kind {
    DL_IR_INIT_ZEROS,
    DL_IR_INIT_ONES,
    DL_IR_INIT_CONSTANT,       // constant(a)
    DL_IR_INIT_UNIFORM,        // uniform(a = lo, b = hi, seed)
    DL_IR_INIT_NORMAL,         // normal(a = mean, b = std, seed)
    DL_IR_INIT_GLOROT_UNIFORM, // glorot_uniform(seed)
    DL_IR_INIT_HE_NORMAL,      // he_normal(seed)
    DL_IR_INIT_LITERAL,        // lit
    DL_IR_INIT_FILE,           // file(path, tensor)
} dl_ir_init_kind;

typedef struct dl_ir_init {
    dl_ir_init_kind kind;
    dl_src_loc loc;
    double a, b;
    uint64_t seed;
    bool has_seed; // false: the seed is derived from the param's name (see dl_ir_init_seed)
    dl_ir_literal *lit;
    const char *path;   // FILE: as written (relative paths are relative to the .dlg's directory)
    const char *tensor; // FILE: tensor name inside the safetensors file
} dl_ir_init;

// ---------------------------------------------------------------------------------------------
// Values and nodes

typedef enum dl_ir_value_kind {
    DL_IR_VAL_INPUT,
    DL_IR_VAL_PARAM,
    DL_IR_VAL_CONST,
    DL_IR_VAL_NODE, // output of a node
} dl_ir_value_kind;

typedef struct dl_ir_node dl_ir_node;

typedef struct dl_ir_value {
    uint32_t id;
    const char *name;
    dl_ir_value_kind kind;
    dl_ir_type type;
    dl_src_loc loc;     // of the name where it is defined
    dl_ir_node *def;    // NODE: producing node
    uint32_t def_out;   // NODE: output index in def
    dl_ir_init *init;   // PARAM
    dl_ir_literal *lit; // CONST
    bool is_output;     // listed by an `output` statement
} dl_ir_value;

struct dl_ir_node {
    uint32_t id;
    dl_ir_op op;
    dl_src_loc loc; // of the op name
    size_t n_inputs;
    dl_ir_value **inputs; // an entry is NULL for an omitted optional input
    size_t n_outputs;
    dl_ir_value **outputs;
    size_t n_attrs;
    dl_ir_attr *attrs; // in source order
    // Set by the fusion pass (passes/fusion.c), NULL otherwise: this node is computed inside the
    // kernel of `fuse_root`, a later node of the same fusion group, and gets no kernel of its
    // own. Not part of the text form (a dump shows the groups as comments).
    dl_ir_node *fuse_root;
};

// Attribute lookup on a node (NULL if absent; defaults are *not* filled in).
const dl_ir_attr *dl_ir_node_attr(const dl_ir_node *n, const char *name);
// Typed getters that apply the op table's default when the attribute is absent.
int64_t dl_ir_node_attr_int(const dl_ir_node *n, const char *name);
double dl_ir_node_attr_float(const dl_ir_node *n, const char *name);
const char *dl_ir_node_attr_string(const dl_ir_node *n, const char *name);
// UnaryGrad's sub-op, typed: the forward op (dl_ir_op_has_unary_grad) named by its `op`
// attribute, resolved here once so no pass compares the string. DL_IR_OP_COUNT when n is no
// UnaryGrad or the name is no such op (the verifier rejects both).
dl_ir_op dl_ir_node_unary_grad_op(const dl_ir_node *n);

// ---------------------------------------------------------------------------------------------
// Train config (the `train LOSS { ... }` block)

typedef enum dl_ir_optim {
    DL_IR_OPTIM_SGD,
    DL_IR_OPTIM_ADAM,
    DL_IR_OPTIM_ADAMW,
    DL_IR_OPTIM_RMSPROP,
} dl_ir_optim;

typedef enum dl_ir_loss_scale { DL_IR_LS_NONE, DL_IR_LS_STATIC, DL_IR_LS_DYNAMIC } dl_ir_loss_scale;

typedef struct dl_ir_train {
    dl_src_loc loc; // of the `train` keyword
    dl_ir_value *loss;
    dl_ir_optim optimizer;
    dl_src_loc optimizer_loc;
    size_t n_opt_attrs; // as written: lr, momentum, nesterov, beta1, beta2, eps, alpha, ...
    dl_ir_attr *opt_attrs;
    bool has_clip_norm;
    double clip_norm;
    bool has_precision;
    dl_dtype precision; // float (default), bfloat16, float16
    dl_ir_loss_scale loss_scale;
    double loss_scale_value; // STATIC
    size_t n_ls_attrs;       // DYNAMIC: init, growth, backoff, interval as written
    dl_ir_attr *ls_attrs;
    size_t n_freeze;
    dl_ir_value **freeze;
    bool has_accumulate;
    int64_t accumulate; // >= 1
    // BatchNormalization in the train step normalises with the statistics of the global batch
    // across data-parallel ranks (AllReduceMean, passes/autodiff.c); printed only when true.
    bool sync_bn;
} dl_ir_train;

const char *dl_ir_optim_name(dl_ir_optim o); // "sgd", "adam", "adamw", "rmsprop"
bool dl_ir_optim_from_name(const char *name, dl_ir_optim *out);
// Attribute specs accepted by an optimizer (PyTorch's defaults) and by `loss_scale = dynamic`.
const dl_ir_attr_spec *dl_ir_optim_attr_specs(dl_ir_optim o, size_t *n);
const dl_ir_attr_spec *dl_ir_loss_scale_attr_specs(size_t *n);
// Value of an optimizer hyper-parameter with the default applied.
double dl_ir_train_opt_value(const dl_ir_train *t, const char *name);

// ---------------------------------------------------------------------------------------------
// Module

typedef struct dl_ir_dim_def {
    const char *name;
    int64_t default_value; // as written
    int64_t value;         // bound value (== default unless dl_ir_module_bind_dim changed it)
    dl_src_loc loc;
} dl_ir_dim_def;

typedef enum dl_ir_stmt_kind {
    DL_IR_STMT_DIM,
    DL_IR_STMT_INPUT,
    DL_IR_STMT_PARAM,
    DL_IR_STMT_CONST,
    DL_IR_STMT_NODE,
    DL_IR_STMT_OUTPUT,
    DL_IR_STMT_TRAIN,
} dl_ir_stmt_kind;

// Statement order as written, with comments, so `dlcc fmt` keeps the author's layout.
typedef struct dl_ir_stmt {
    dl_ir_stmt_kind kind;
    uint32_t index; // DIM: dims index; INPUT/PARAM/CONST/OUTPUT: value id; NODE: node id
    const char *comment_before; // full comment lines before the statement ("# ..." lines joined
                                // by '\n', without the final newline), or NULL
    const char *comment_after;  // trailing "# ..." on the statement's last line, or NULL
    bool blank_before;          // a blank line preceded it (kept once by the printer)
} dl_ir_stmt;

typedef struct dl_ir_name_map dl_ir_name_map;

// A value copied into a param at the end of the train step (BatchNormalization running stats).
typedef struct dl_ir_assign {
    dl_ir_value *param;
    dl_ir_value *value; // same type as param
} dl_ir_assign;

struct dl_ir_module {
    dl_arena arena;
    const char *name;
    dl_src_loc name_loc;
    const char *comment_header;  // comment lines before `model`, or NULL
    const char *comment_trailer; // comment lines after the last statement, or NULL
    const char *source_dir;      // directory of the source file, for file() initialisers
    DL_VEC(dl_ir_dim_def) dims;
    DL_VEC(dl_ir_value *) values; // all values by id
    DL_VEC(dl_ir_value *) inputs; // in declaration order
    DL_VEC(dl_ir_value *) params;
    DL_VEC(dl_ir_value *) consts;
    DL_VEC(dl_ir_value *) outputs; // in `output` statement order
    DL_VEC(dl_ir_node *) nodes;    // in statement order (a topological order)
    DL_VEC(dl_ir_stmt) stmts;
    dl_ir_train *train;    // NULL without a train block
    dl_ir_name_map *names; // name -> value index

    // Set by dl_pass_autodiff (passes/autodiff.c); has_backward false before.
    // nodes[0, n_fwd_nodes) are the forward graph (the `infer` entry point); nodes after it are
    // the training graph: training-mode clones of forward nodes (BatchNormalization, Dropout and
    // what depends on them) and the backward nodes. The `train_step` entry point runs every
    // forward node its roots (train_loss, each grad, each assign's value) depend on, then those.
    bool has_backward;
    size_t n_fwd_nodes;
    dl_ir_value *train_loss; // the loss as the training graph computes it (a float scalar)
    dl_ir_value *grad_seed;  // float scalar const 1.0 seeding the backward pass: codegen
                             // gives it the session's loss scale when loss scaling is on
    DL_VEC(dl_ir_value *)
    grads; // parallel to params: d train_loss / d param, NULL when frozen
           // or when the loss does not depend on the param
    DL_VEC(dl_ir_assign) assigns;
    // int64 scalar const 0 feeding the training-mode Dropout clones as their 4th input (the RNG
    // counter base), or NULL when there is none: codegen makes it session state that every
    // train_step call increments, so each step draws a fresh mask.
    dl_ir_value *step_counter;
};

// Creates an empty module named `name`. Caller owns *out (dl_ir_module_destroy).
DL_NODISCARD dl_status dl_ir_module_create(const char *name, dl_ir_module **out);
void dl_ir_module_destroy(dl_ir_module *m); // NULL is a no-op

// Builders. Names are copied into the arena. Each returns DL_ERR_INVALID_ARG if the name is
// already defined (callers that want a located diagnostic check dl_ir_module_find first) and
// appends a statement record. Types of node outputs start unknown (rank -1).
DL_NODISCARD dl_status dl_ir_module_add_dim(dl_ir_module *m, const char *name, int64_t value,
                                            dl_src_loc loc, int32_t *out_index);
int32_t dl_ir_module_find_dim(const dl_ir_module *m, const char *name); // -1 if none
DL_NODISCARD dl_status dl_ir_module_add_input(dl_ir_module *m, const char *name,
                                              const dl_ir_type *type, dl_src_loc loc,
                                              dl_ir_value **out);
// `init` must have been allocated in m's arena (dl_ir_module_new_init).
DL_NODISCARD dl_status dl_ir_module_add_param(dl_ir_module *m, const char *name,
                                              const dl_ir_type *type, dl_ir_init *init,
                                              dl_src_loc loc, dl_ir_value **out);
// `lit` must have been allocated in m's arena (dl_ir_module_new_literal).
DL_NODISCARD dl_status dl_ir_module_add_const(dl_ir_module *m, const char *name,
                                              const dl_ir_type *type, dl_ir_literal *lit,
                                              dl_src_loc loc, dl_ir_value **out);
// Adds a node; `inputs` may contain NULL for omitted optional inputs; `out_names` gives one name
// per output; `out_locs` may be NULL. Attributes are deep-copied into the arena.
DL_NODISCARD dl_status dl_ir_module_add_node(dl_ir_module *m, dl_ir_op op,
                                             dl_ir_value *const *inputs, size_t n_inputs,
                                             const char *const *out_names,
                                             const dl_src_loc *out_locs, size_t n_outputs,
                                             const dl_ir_attr *attrs, size_t n_attrs,
                                             dl_src_loc loc, dl_ir_node **out);
// Marks `v` as an output (DL_ERR_INVALID_ARG if it already is).
DL_NODISCARD dl_status dl_ir_module_add_output(dl_ir_module *m, dl_ir_value *v, dl_src_loc loc);
// `t` must have been allocated in m's arena (DL_ARENA_NEW(&m->arena, dl_ir_train)).
DL_NODISCARD dl_status dl_ir_module_set_train(dl_ir_module *m, dl_ir_train *t);
dl_ir_value *dl_ir_module_find(const dl_ir_module *m, const char *name); // NULL if none

// Removes every node n with dead[n->id] != 0 and the values it defines (passes/simplify.c's
// dead node elimination). Nothing left may use them: no kept node's input, no output, train
// loss, gradient or assign. Node and value ids are renumbered in order, statements referring to
// removed nodes go (a comment above one moves to the next statement), n_fwd_nodes follows, the
// name table is rebuilt. DL_ERR_NOMEM leaves the module unchanged.
DL_NODISCARD dl_status dl_ir_module_remove_nodes(dl_ir_module *m, const uint8_t *dead);

// Marks in live[v->id] (m->values.len bytes, zeroed by the caller) every value that `roots`
// depend on, the roots included: the inputs, params, consts and node results the nodes that
// compute them read, transitively. Which inputs an output needs is live[input->id].
void dl_ir_module_mark_deps(const dl_ir_module *m, const dl_ir_value *const *roots, size_t n_roots,
                            uint8_t *live);
// Sets mark[v->id] = 1 (m->values.len bytes) for every value the module itself reads or hands
// out, which a pass may not fold away or keep only in registers: the outputs, the train loss,
// the gradient seed, the step counter, the gradients and the assigns' values and params.
void dl_ir_module_mark_roots(const dl_ir_module *m, uint8_t *mark);
// Keeps only the outputs whose values are `keep` (each must be an output of m) and what they
// need: the other outputs stop being outputs, the train block goes (the module becomes an
// inference model), and every node none of the kept outputs depends on is removed
// (dl_ir_module_remove_nodes). Inputs and params stay declared even when nothing reads them
// (the interface keeps its names). For `dlcc run` of a model with inputs left unbound, e.g.
// the labels of a model whose infer also computes its loss. Before autodiff only
// (DL_ERR_INVALID_ARG after it, or for a value that is not an output); DL_ERR_NOMEM leaves the
// module unchanged.
DL_NODISCARD dl_status dl_ir_module_keep_outputs(dl_ir_module *m, dl_ir_value *const *keep,
                                                 size_t n_keep);

// Arena helpers for builders.
dl_ir_init *dl_ir_module_new_init(dl_ir_module *m, dl_ir_init_kind kind);
dl_ir_literal *dl_ir_module_new_literal(dl_ir_module *m, dl_dtype dtype, int64_t n);

// Rebinds dim `name` to `value` (1 .. 2^40, see DL_IR_MAX_TENSOR_BYTES) and updates every type and
// attribute that refers to it. Output types of nodes are reset to unknown: run shape inference
// again afterwards. DL_ERR_INVALID_ARG with a diagnostic if the dim does not exist or value is out
// of range.
DL_NODISCARD dl_status dl_ir_module_bind_dim(dl_ir_module *m, const char *name, int64_t value,
                                             dl_diags *d);

// fan_in / fan_out of a param type for glorot_uniform / he_normal (docs/graph-format.md): rank 0:
// 1, 1; rank 1 [n]: n, n; rank 2 [in, out]: in, out; rank >= 3, a conv kernel
// [out, in/group, k...]: in/group * prod(k), out * prod(k). Shared by the evaluator and codegen
// so both initialise params identically.
void dl_ir_type_fans(const dl_ir_type *t, double *fan_in, double *fan_out);

// Effective begin/end padding of one spatial dim of Conv or a pool: `pad_begin`/`pad_end` from
// the pads attribute, unless auto_pad is VALID (0, 0) or SAME_UPPER / SAME_LOWER (the total
// max(0, (out - 1) * stride + (k - 1) * dil + 1 - in), the odd pixel at the end for SAME_UPPER and
// at the beginning for SAME_LOWER). `out` is the inferred output size.
void dl_ir_conv_pads(const char *auto_pad, int64_t in, int64_t out, int64_t k, int64_t stride,
                     int64_t dil, int64_t pad_begin, int64_t pad_end, int64_t *pb, int64_t *pe);

// The seed a seeded initialiser uses: its own, or FNV-1a 64 of the param name when omitted.
uint64_t dl_ir_init_seed(const dl_ir_value *param);

// ---------------------------------------------------------------------------------------------
// Verifier, printer, canonical form

// Structural checks (the invariants above, attribute kinds against the op table, train config
// references). Reports problems to `d` and returns DL_ERR_INVALID_ARG if any.
DL_NODISCARD dl_status dl_ir_verify(const dl_ir_module *m, dl_diags *d);

// Writes the module as .dlg text (the `dlcc fmt` layout: statements in source order, comments
// kept, one space around '=' and after ',', columns of consecutive declarations aligned).
// parse(print(m)) gives back an identical module. *out is a heap string the caller frees.
DL_NODISCARD dl_status dl_ir_print(const dl_ir_module *m, char **out);

// Canonical serialisation: the cache-key input. Independent of comments, whitespace, statement
// layout and the names of intermediate values (renumbered %0, %1, ... in definition order);
// dependent on everything that affects results (ops, attributes with defaults applied, dtypes,
// bound dim values, initialisers, constants, train config) and on the names of inputs, params
// and outputs (the artifact's interface). With DL_IR_CANON_NO_HYPERPARAMS (the cache key) the
// train block's hyper-parameter values are left out — the optimizer's values, the clip norm, the
// loss scale's numbers — since they are runtime values of a session; its structure stays.
enum { DL_IR_CANON_NO_HYPERPARAMS = 1 };
DL_NODISCARD dl_status dl_ir_canonical(const dl_ir_module *m, unsigned flags, char **out,
                                       size_t *out_len);

// ---------------------------------------------------------------------------------------------
// Reference evaluator (the oracle). Naive loops, float math in double. Node outputs of dtype
// float are kept in double between nodes; float16/bfloat16 results are rounded to their type at
// each node (their precision is part of their meaning); integers wrap to their width.

typedef struct dl_ir_eval_opts {
    // Optional param values in m->params order (NULL: materialise from initialisers).
    const dl_tensor *params;
    size_t n_params;
    bool training; // Dropout active, BatchNormalization uses batch statistics
} dl_ir_eval_opts;

// Materialises a param's initial value as a tensor of its declared dtype (caller frees with
// dl_tensor_free). Errors (unreadable file, missing tensor, wrong shape) go to `d`.
DL_NODISCARD dl_status dl_ir_param_materialize(const dl_ir_module *m, const dl_ir_value *param,
                                               dl_tensor *out, dl_diags *d);

// Evaluates the `infer` entry point. Requires inferred types (run dl_pass_shape first).
// `inputs` follow m->inputs order and must match their declared dtype and shape. On DL_OK,
// out_outputs[i] (m->outputs order, caller-provided array of m->outputs.len) holds a tensor of
// the output's dtype, owned by the caller. Runtime problems (e.g. out-of-range Gather index) are
// reported to `d` with the node's location.
DL_NODISCARD dl_status dl_ir_eval(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                                  const dl_tensor *inputs, dl_tensor *out_outputs, dl_diags *d);

// Evaluates every value of the module and hands them all back (values[i] for value id i; inputs,
// params and consts included). For tests and debugging. Caller frees each with dl_tensor_free
// and the array with free().
DL_NODISCARD dl_status dl_ir_eval_all(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                                      const dl_tensor *inputs, dl_tensor **out_values, dl_diags *d);

// As dl_ir_eval_all, but every value as the evaluator holds it: doubles (float values not
// rounded to float32), values[i] a malloc'd array of numel(i) elements (NULL for a value without
// one). For gradient checks and oracles that need more than float32. Caller frees each array
// and the outer one.
DL_NODISCARD dl_status dl_ir_eval_all_f64(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                                          const dl_tensor *inputs, double ***out_values,
                                          dl_diags *d);

// ---------------------------------------------------------------------------------------------
// IR diff (ir_diff.c): where two modules differ, in the terms of their canonical form (so of
// the "ir" part of the cache key), for `dlcc explain`. Both modules need inferred types.

typedef struct dl_ir_diff {
    bool has_first;          // a node differs, or only one module has node node_index
    size_t node_index;       // the first node that differs (definition order)
    uint32_t line_a, line_b; // its .dlg line in each module (0: that module has no such node)
    char *first_what;        // what differs about it, one line (OWNED)
    DL_VEC(char *) diffs;    // every other difference (interface, train block), one line each
} dl_ir_diff;

// Compares a with b (neither is changed) into *out, which the caller finalises with
// dl_ir_diff_fini (also after an error). DL_ERR_NOMEM is the only error.
DL_NODISCARD dl_status dl_ir_diff_modules(const dl_ir_module *a, const dl_ir_module *b,
                                          dl_ir_diff *out);
void dl_ir_diff_fini(dl_ir_diff *d);

// An error (or warning) about node n, in the compiler's one format for them:
// "[PREFIX]OP 'FIRST OUTPUT': MESSAGE" at `loc` when it names a file, else at the node's own
// location. For shape inference, autodiff, the evaluator and codegen (ir_diag.c).
void dl_ir_node_vdiag(dl_diags *d, dl_severity sev, const dl_ir_node *n, dl_src_loc loc,
                      const char *prefix, const char *fmt, va_list ap) DL_PRINTF(6, 0);

#endif
