// passes/dl_pass.h — passes over the IR: shape and type inference, reverse-mode autodiff,
// mixed precision, simplify/CSE/DCE, and the pipeline that runs them in order (pipeline.c);
// the memory planner over a neutral description of kernels and buffers (memplan.c).
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
// The same rules for one node whose inputs have known types (the ONNX importer's shape hook,
// dl_fe_shape_fn): fills in its output types; false (outputs unknown) with a diagnostic in `d`
// when a rule fails, false without one when an input's type is unknown.
bool dl_pass_shape_node(const dl_ir_module *m, const dl_ir_node *n, dl_diags *d);

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

// ---------------------------------------------------------------------------------------------
// The pipeline (passes/pipeline.c). Its array of passes is the architecture in one place:
//   shapes -> autodiff -> precision -> simplify -> fusion -> memplan -> schedule
// Every IR pass is followed by dl_ir_verify in builds without NDEBUG, and in every build when
// verify_each is set. memplan and schedule work on lowered kernels, so they run inside the back
// end (opts->backend, which lowers the module and calls dl_pass_memplan); the IR they leave is the
// IR the back end was given.

typedef enum dl_pass_id {
    DL_PASS_SHAPES,
    DL_PASS_AUTODIFF,
    DL_PASS_PRECISION,
    DL_PASS_SIMPLIFY,
    DL_PASS_FUSION,
    DL_PASS_MEMPLAN,
    DL_PASS_SCHEDULE,
    DL_PASS_COUNT
} dl_pass_id;

// "shapes", "autodiff", ... as --dump-after spells them (the pipeline array's names).
const char *dl_pass_name(dl_pass_id p);
// The pass named `name`; false when there is none.
bool dl_pass_from_name(const char *name, dl_pass_id *out);
// The pass names joined by ", " in pipeline order, for usage messages (a static string).
const char *dl_pass_names(void);

// Receives the IR after pass `pass` as .dlg text (dl_ir_print, headed by one comment line naming
// the pass). `text` is borrowed for the call.
typedef void (*dl_pass_dump_fn)(void *ctx, dl_pass_id pass, const char *text);
// The back end: lowers `m` and plans, schedules and packages it (the driver's dl_cg_compile).
typedef dl_status (*dl_pass_backend_fn)(void *ctx, dl_ir_module *m, dl_diags *d);

typedef struct dl_pass_pipeline_opts {
    bool verify_each;     // dl_ir_verify after every pass (always without NDEBUG)
    bool dump_all;        // dump after every pass that runs
    int dump_after;       // a dl_pass_id to dump after, or -1 (ignored when dump_all)
    dl_pass_dump_fn dump; // NULL: no dumps
    void *dump_ctx;
    dl_pass_backend_fn backend; // NULL: the pipeline stops before memplan ("as far as it goes")
    void *backend_ctx;
    bool no_fusion; // the fusion pass changes nothing (tests compare fused with unfused code)
} dl_pass_pipeline_opts;

// Defaults: no verify_each beyond the build's, no dumps, no back end.
void dl_pass_pipeline_opts_init(dl_pass_pipeline_opts *o);

// Runs the passes first..last (inclusive, pipeline order) on `m`. Passes that do not apply are
// no-ops (autodiff and precision without a train block, precision at float). The caller runs
// `shapes` alone first when it needs a point in between (the driver's cache key), then the rest
// from `autodiff`. Errors are the passes' own, with their diagnostics; a failed verify is a bug
// of the pass before it and is reported as "internal error: after PASS: ...".
DL_NODISCARD dl_status dl_pass_pipeline_run(dl_ir_module *m, dl_pass_id first, dl_pass_id last,
                                            const dl_pass_pipeline_opts *o, dl_diags *d);

// Simplification of the derived graph (passes/simplify.c): Identity forwarding, common
// subexpression elimination of pure nodes and dead node elimination, each exact in IEEE float32
// (the rules and why each is exact: the file's comment and docs/passes.md). Keeps outputs, the
// train loss, gradients and assigns; node locations are kept. *out_n_removed (may be NULL)
// receives the number of nodes removed. DL_ERR_NOMEM with a diagnostic.
DL_NODISCARD dl_status dl_pass_simplify(dl_ir_module *m, dl_diags *d, size_t *out_n_removed);

// Operator fusion (passes/fusion.c): groups of elementwise nodes that codegen lowers as one
// kernel, recorded in dl_ir_node.fuse_root (every other field of the module is unchanged, so
// the text form is too). A group is a tree of elementwise nodes (the op table's `map` ops and
// UnaryGrad) of one output shape (a row reduction's root excepted) whose inner values have no use
// outside the group and are no root (output, loss, gradient, assign), possibly headed by one Gemm /
// MatMul whose epilogue it becomes, or gathered around one row reduction
// (dl_pass_fusion_is_row_reduce) with the maps that make its input and those that read its result.
// Clears any earlier grouping first.
typedef struct dl_pass_fusion_stats {
    size_t groups;      // groups of two or more nodes
    size_t fused_nodes; // nodes in those groups (each group saves fused_nodes - 1 kernels)
} dl_pass_fusion_stats;
DL_NODISCARD dl_status dl_pass_fusion(dl_ir_module *m, dl_diags *d, dl_pass_fusion_stats *out);
// Writes one comment line per fusion group of `m` to `b`: "# fusion: ROOT = OP a, OP b, ...".
void dl_pass_fusion_describe(const dl_ir_module *m, dl_strbuf *b);
// Whether n is a reduction that may join a fusion group (ReduceSum / ReduceMean of float32 over
// exactly its last axis, keepdims, at least 16 rows): codegen computes such a group per row.
bool dl_pass_fusion_is_row_reduce(const dl_ir_node *n);
// Whether n is a row node of a fusion group: such a reduction, or Softmax / LogSoftmax /
// LayerNormalization (one output) of float32 over the last axis with at least 16 rows, which
// codegen computes per row with the producers of its input and the consumers of its output.
bool dl_pass_fusion_is_row_node(const dl_ir_node *n);

// ---------------------------------------------------------------------------------------------
// The memory plan (passes/memplan.c): a neutral description of lowered kernels and their buffers,
// built by the back end that lowered them (codegen's plan builder), and the planner that gives
// every buffer its offset in one session arena (liveness per entry point, in-place reuse; the
// rules are in memplan.c's comment). No LLVM, no codegen types.

enum { DL_PASS_MEM_ENTRIES = 2 }; // entry points: infer, train_step

// Buffer kinds, in the order of the arena's exclusive region (ORDER MEM_KINDS).
typedef enum dl_pass_mem_kind {
    DL_PASS_MEM_PARAM, // trainable params
    DL_PASS_MEM_STATE, // session state (optimizer slots, the hyper buffer, RNG counter, ...)
    DL_PASS_MEM_INPUT, // fed by the caller
    DL_PASS_MEM_CONST, // filled once from the artifact's data
    DL_PASS_MEM_TEMP,  // written by kernels: shared by liveness
} dl_pass_mem_kind;

typedef struct dl_pass_mem_buffer {
    uint64_t size; // bytes
    dl_pass_mem_kind kind;
    const dl_ir_type
        *type;       // the IR value's type; NULL for a buffer that is no value (never in place)
    bool is_pinned;  // the model's outputs and the train loss: readable after every call
    uint64_t offset; // OUT: the byte offset in the arena
} dl_pass_mem_buffer;

// Whether a kernel may write its output over one of its inputs (the lowering knows: it reads each
// input only at the element it writes, as an elementwise loop over unbroadcast inputs does).
typedef enum dl_pass_mem_inplace {
    DL_PASS_INPLACE_NO,
    DL_PASS_INPLACE_SAME_DIMS, // over an input of the output's dims and element size
    DL_PASS_INPLACE_FLAT,      // over an input of the output's byte and element size (flat loop)
} dl_pass_mem_inplace;

typedef struct dl_pass_mem_kernel {
    const uint32_t *args; // buffer ids, the n_out written ones first
    uint32_t n_args, n_out;
    dl_pass_mem_inplace inplace; // only for the sole kernel of its node with one output
} dl_pass_mem_kernel;

typedef struct dl_pass_mem_desc {
    dl_pass_mem_buffer *bufs; // buffer id = index
    size_t n_bufs;
    const dl_pass_mem_kernel *kernels;
    size_t n_kernels;
    const uint32_t *param_bufs; // PARAM buffers in param order: placed first, in this order
    size_t n_param_bufs;
    const uint32_t *entry[DL_PASS_MEM_ENTRIES]; // kernel indices in execution order, per entry
    size_t n_entry[DL_PASS_MEM_ENTRIES];
    uint64_t align; // every offset is a multiple of it (a power of two)
} dl_pass_mem_desc;

// Sets desc->bufs[i].offset for every buffer and *out_arena_size (a multiple of align).
// Deterministic: a function of the description's order and contents only. DL_ERR_NOMEM (no
// diagnostic: the caller reports) leaves offsets unspecified and *out_arena_size 0.
DL_NODISCARD dl_status dl_pass_memplan(dl_pass_mem_desc *desc, uint64_t *out_arena_size);

#endif
