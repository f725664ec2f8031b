// codegen/cg_internal.h — shared state and helpers of the lowering code. Private to codegen/.
//
// One dl_cg compile = one LLVM context and module. Every IR value gets one buffer id; the memory
// plan (passes/memplan.c) gives each buffer its offset in the session arena, intermediates sharing
// memory by liveness. Each node lowers to one or more kernels with the uniform ABI of
// runtime/dlrt_format.h: void k(ptr args, i64 begin, i64 end); the target (c->target,
// cg_target.h) says how a kernel covers its range (a host loop, a GPU grid). Lowering code builds
// LLVM IR through the helpers below: a kernel is opened with cg_kernel_begin (which loads the
// argument pointers), loops are cg_for_begin/cg_for_end pairs, elements move through
// cg_load/cg_store (which convert between a dtype's storage and its compute type), and
// cg_kernel_end records the kernel in the plan.
//
// Compute types: float, float16 and bfloat16 compute in f32; int32 in i32; int64 in i64; bool in
// i1. Stores round back to the storage type (float16: fptrunc, round to nearest even; bfloat16:
// round to nearest even with NaN kept quiet, as dl_f32_to_bf16).
#ifndef CG_INTERNAL_H
#define CG_INTERNAL_H

#include "cg_plan.h"
#include "cg_target.h"
#include "dl_cg.h"
#include "dlrt_format.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

// The flags a cg_finite_check kernel leaves in TEMP buffer `buf` (n of them, one per chunk of
// the value it scanned), and which side of them a guarded kernel runs on: finite (every value
// finite) or not. n == 0: no guard.
typedef struct cg_guard {
    uint32_t buf;
    int64_t n;
    bool finite;
} cg_guard;

typedef struct cg {
    const dl_ir_module *m;
    dl_diags *d;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const cg_target *target; // what is target-specific (cg_target.h)
    LLVMTargetMachineRef tm;
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_f32, t_f64, t_ptr, t_kernel;
    uint32_t *value_buf;      // buffer id of each IR value (by value id)
    DL_VEC(LLVMValueRef) fns; // kernel table
    DL_VEC(cg_kernel_rec) kernels;
    DL_VEC(uint32_t) args;
    // Entry points: indices into `kernels` in execution order. A kernel record may appear in
    // both (a forward node the train step needs); the plan gives each appearance its own record.
    DL_VEC(uint32_t) infer_kernels;
    DL_VEC(uint32_t) train_kernels;
    bool has_train;                         // a train_step entry is built
    uint32_t *node_k0, *node_k1;            // kernels [k0, k1) of node id (after lowering)
    DL_VEC(cg_extra_buf) extra;             // buffer id = values.len + index
    DL_VEC(cg_state_tensor) states;         // plan tensors of role STATE
    DL_VEC(dlrt_plan_hparam) hparams;       // name_off holds an index into hparam_names
    DL_VEC(const char *) hparam_names;      // static strings
    uint32_t optimizer;                     // DLRT_OPTIM_*
    uint32_t hyper_buf, loss_buf, seed_buf; // UINT32_MAX when absent
    double *seed_init;                      // NULL or the seed buffer's initial value
    // The train step's RNG counter (m->step_counter's buffer): a STATE int64 scalar starting at
    // the const's value that the prologue increments per call; UINT32_MAX when absent.
    uint32_t counter_buf;
    // Format 6: what a data-parallel step all-reduces and where (lower_train.c's plan_comm).
    DL_VEC(dlrt_plan_grad) comm_grads;
    uint32_t comm_at;          // position in train_kernels
    const dl_ir_node *node;    // node being lowered (for diagnostics and names)
    const char *node_ops;      // with a fused group being lowered: its ops joined by '+', else NULL
    bool node_ops_elementwise; // that group has only elementwise ops
    const dl_ir_node *node_first; // and its first node (the kernel's source line), else NULL
    DL_VEC(char *) strs;          // strings the kernel records point at (owned)
    uint32_t isa;                 // DLRT_ISA_* enabled by the target features
    uint32_t isa_used;            // DLRT_ISA_ON_USE bits a kernel used (the artifact records them)
    // Per node id: nonzero for a Transpose read through strides by the products that consume it
    // (dl_cg__transpose_folds); it gets no kernel. 2 once a product's kernel is named with it
    // (cg_compile.c). NULL: none.
    uint8_t *tr_fold;
    // Per node id: nonzero for a forward Cast of a float32 param or constant to bfloat16 whose
    // every forward reader is a product that prepacks it (dl_cg__cast_prepacks): the infer
    // entry runs no kernel of it (1: the train step's forward still runs it; 2: there is no
    // train step, it gets no kernel). NULL: none.
    uint8_t *cast_pp;
    // Lowering a forward node whose products may read prepacked weights (dl_cg_options.prepack:
    // an infer-only kernel packs a param B once per change, docs/codegen.md "Prepacked weights").
    bool prepack;
    // A batch-1 product's epilogue left to the kernel of the product that reads its output
    // (x86_linalg.c, "Chained matrix-vector products"): owned; NULL when none is pending.
    struct cg_gv_defer *gv_defer;
    // While n > 0, every kernel emitted is guarded (cg_guard_open) by cg_finite_check's flags.
    cg_guard guard;
} cg;

// Which entry points may run a kernel of a node lowering (cg_kernel.only): both (the default),
// or only one of them: a product whose infer kernel reads prepacked weights has a second kernel
// for the train step, which packs them itself (its params change every step).
enum { CG_ENTRY_BOTH = 0, CG_ENTRY_INFER = 1, CG_ENTRY_TRAIN = 2 };

// A kernel under construction.
typedef struct cg_kernel {
    LLVMValueRef fn;
    LLVMValueRef begin, end; // i64 parameters
    LLVMValueRef ptr[64];    // argument pointers, in the order given to cg_kernel_begin
    size_t n_args;
    size_t n_out; // leading args written by the kernel: the node's outputs among the leading
                  // values (a lowering that reads back one of its node's outputs sets it)
    int64_t range;
    uint32_t first_arg;
    LLVMValueRef args; // the kernel's args parameter (cg_kernel_arg loads from it)
    const char *name;  // record name for a kernel of no node ("train.update.adam"), else NULL
    uint32_t flags;    // DLRT_KERNEL_F_* the plan gives it (set before cg_kernel_end)
    uint8_t only;      // CG_ENTRY_* (set before cg_kernel_end)
    const char *ops;   // ops string of a kernel of no node (NULL: "TrainStep")
    LLVMBasicBlockRef guard_exit; // cg_guard_open's skip target, else NULL
} cg_kernel;

// Opens a kernel over `vals` (outputs first, then inputs; NULL entries are not allowed) whose
// outer parallel dimension has `range` iterations (>= 1). Positions the builder in the body.
DL_NODISCARD dl_status cg_kernel_begin(cg *c, dl_ir_value *const *vals, size_t n_vals,
                                       int64_t range, cg_kernel *k);
// Opens a kernel of no node over buffer ids (the first n_out written), for kernels with more
// arguments than cg_kernel.ptr holds (the train step's multi-tensor kernels): pointers are not
// loaded up front; cg_kernel_arg loads argument i where it is needed. `name` names the kernel
// in the plan (profilers show it) and must be a static string.
DL_NODISCARD dl_status cg_kernel_begin_bufs(cg *c, const uint32_t *bufs, size_t n_bufs,
                                            size_t n_out, int64_t range, const char *name,
                                            cg_kernel *k);
LLVMValueRef cg_kernel_arg(cg *c, const cg_kernel *k, size_t i);
// Appends buffer `buf` (no IR value: an extra buffer, read only) as the kernel's next argument
// and loads its pointer into k->ptr; call it right after cg_kernel_begin.
DL_NODISCARD dl_status cg_kernel_add_buf(cg *c, cg_kernel *k, uint32_t buf);
// A buffer that is no IR value (cg_extra_buf), of `size` bytes and plan kind `kind`, holding a
// copy of `init` at session creation (DLRT_BUF_F_INIT_DATA) or, with init NULL, zeros or what its
// kernels write; its id into *id.
DL_NODISCARD dl_status cg_extra_buffer(cg *c, uint64_t size, uint32_t kind, const void *init,
                                       uint32_t *id);
// Closes the kernel (ret void) and adds it to the kernel table. The compile driver assigns the
// kernels made while lowering a node (cg_kernel_begin_bufs ones too: a product's pack or slices
// kernel) to that node's entry points, as cg_kernel.only allows; the train step's own kernels
// (dl_cg__lower_train) go to the train step.
DL_NODISCARD dl_status cg_kernel_end(cg *c, cg_kernel *k);

// Guarded kernels: a fast kernel that would give a wrong answer for non-finite values of one
// input (an implicit GEMM multiplying the zeros it gathers for taps that do not exist by an
// infinite weight) runs only when that input is all finite, and a kernel that gives the
// definition's answer runs only when it is not. cg_finite_check emits a kernel (parallel over
// chunks of v, float32) that leaves in a TEMP buffer whether each chunk holds a non-finite value,
// and returns in *g the guard that runs on the finite side (set g->finite = false for the
// other). The lowering sets c->guard to it around the kernels it guards; each of them calls
// cg_guard_open once its arguments are added (its body then runs only on the guard's side;
// cg_kernel_end closes it, and asserts that a kernel emitted under a guard opened it).
DL_NODISCARD dl_status cg_finite_check(cg *c, dl_ir_value *v, cg_guard *g);
DL_NODISCARD dl_status cg_guard_open(cg *c, cg_kernel *k);
// The finite scan's step: *acc (an i32 alloca, start it at 0) = max(*acc, |bits of f32 p[i]|)
// (an integer max: a loop of them vectorises without reassociating floats). cg_bits_not_finite
// then tests the max: a value is not finite when its exponent bits are all ones.
void cg_abs_bits_max(cg *c, LLVMValueRef acc, LLVMValueRef p, LLVMValueRef i);
LLVMValueRef cg_bits_not_finite(cg *c, LLVMValueRef acc);

// Counted loop `for (iv = lo; iv < hi; iv++)` over i64 values. cg_for_begin positions the
// builder in the body and returns iv; cg_for_end closes the innermost open loop and positions
// the builder after it. Loops nest; they must be closed in reverse order.
typedef struct cg_loop {
    LLVMBasicBlockRef header, body, exit;
    LLVMValueRef iv;
    LLVMValueRef backedge; // the latch's branch (set by cg_for_end)
} cg_loop;
LLVMValueRef cg_for_begin(cg *c, cg_loop *l, LLVMValueRef lo, LLVMValueRef hi, const char *name);
void cg_for_end(cg *c, cg_loop *l);
// Asks LLVM's loop vectoriser to interleave the closed loop `l` `count` times (llvm.loop
// metadata on its back edge): independent vector iterations in flight for a body that is one
// long dependency chain.
void cg_loop_interleave(cg *c, const cg_loop *l, unsigned count);
// Keeps LLVM's loop unroller off the closed loop `l`: a register tile whose accumulators fill
// the vector registers spills when two iterations' loads are scheduled together.
void cg_loop_no_unroll(cg *c, const cg_loop *l);
// cg_loop_interleave with the target's count when the closed innermost loop `l` has a long
// body (an exp or erf per element); nothing otherwise, and nothing on targets without vectors.
void cg_loop_interleave_long(cg *c, const cg_loop *l);

// Constants.
LLVMValueRef cg_i64(cg *c, int64_t v);
LLVMValueRef cg_i32(cg *c, int32_t v);
LLVMValueRef cg_f32(cg *c, double v);
// The compute type of a dtype, and a constant of it.
LLVMTypeRef cg_compute_type(cg *c, dl_dtype t);
LLVMValueRef cg_const(cg *c, dl_dtype t, double v);

// Loads element `idx` (i64) of a buffer of dtype `t`, converted to the compute type.
LLVMValueRef cg_load(cg *c, LLVMValueRef base, dl_dtype t, LLVMValueRef idx);
// Vector memory access through a lane mask (`mask` NULL: every lane), element alignment 4:
// masked-off lanes are not read (they load as 0) and not written. cg_lane_mask_rt: <n x i1>
// with lane l set when l < rem (an i64, unsigned compare; n <= CG_MAX_LANES).
#define CG_MAX_LANES 64
LLVMValueRef cg_masked_load(cg *c, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask);
// The same for elements aligned to `align` bytes only (bfloat16 / float16: 2).
LLVMValueRef cg_masked_load_align(cg *c, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask,
                                  unsigned align);
void cg_masked_store(cg *c, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask);
LLVMValueRef cg_lane_mask_rt(cg *c, LLVMValueRef rem, int64_t n);
// A read prefetch of the cache line holding `p` into the second-level cache (llvm.prefetch,
// locality 2): a hint, never a fault.
void cg_prefetch(cg *c, LLVMValueRef p);
// Stores a compute-type value as element `idx` of a buffer of dtype `t`.
void cg_store(cg *c, LLVMValueRef base, dl_dtype t, LLVMValueRef idx, LLVMValueRef v);
// Converts a compute value of dtype `from` to the compute type of `to` (Cast semantics:
// float->int truncates toward zero, saturating; ->bool is != 0; bool->x is 0/1).
LLVMValueRef cg_convert(cg *c, LLVMValueRef v, dl_dtype from, dl_dtype to);
// f32 (or <n x float>) -> bfloat16 bits (i16 or <n x i16>): round to nearest even, NaN quiet.
LLVMValueRef cg_f32_to_bf16(cg *c, LLVMValueRef v);

// Calls an LLVM intrinsic overloaded on one type (e.g. "llvm.exp", f32).
LLVMValueRef cg_intrinsic1(cg *c, const char *name, LLVMTypeRef ty, LLVMValueRef a);
LLVMValueRef cg_intrinsic2(cg *c, const char *name, LLVMTypeRef ty, LLVMValueRef a, LLVMValueRef b);
// Calls the float function of the C math library named `name` ("erff") through the target
// (libm on x86-64, libdevice on NVPTX).
LLVMValueRef cg_libm1(cg *c, const char *name, LLVMValueRef a);
// Calls `float symbol(float[, float])` (n = 1 or 2 args), declaring it on first use: how the
// targets reach their math library (libm on x86, libdevice on NVPTX).
LLVMValueRef cg_call_f32(cg *c, const char *symbol, LLVMValueRef *args, unsigned n);
LLVMValueRef cg_libm2(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b);

// An array of n values of type t, allocated in the kernel's entry block (so it is one stack
// slot however deep the loop that asks), 64-byte aligned. The builder position is kept.
LLVMValueRef cg_entry_alloca(cg *c, const cg_kernel *k, LLVMTypeRef t, int64_t n);
// a + b on floats with reassociation allowed, so LLVM may vectorise a reduction. The summation
// order then depends only on the static shapes (results are still deterministic).
LLVMValueRef cg_fadd_reassoc(cg *c, LLVMValueRef a, LLVMValueRef b);
// e^x, erf, tanh, log and log1p of an f32 value as plain arithmetic without a libm call, so
// loops containing them vectorise; within 2 ulp of the exact result over the whole float
// range, special values included (cg_math.c).
LLVMValueRef dl_cg__exp_f32(cg *c, LLVMValueRef x);
LLVMValueRef dl_cg__erf_f32(cg *c, LLVMValueRef x);
LLVMValueRef dl_cg__tanh_f32(cg *c, LLVMValueRef x);
LLVMValueRef dl_cg__log_f32(cg *c, LLVMValueRef x);
LLVMValueRef dl_cg__log1p_f32(cg *c, LLVMValueRef x);
// Softmax / LogSoftmax of x along `axis` into y (same shape) (x86/x86_reduce.c).
DL_NODISCARD dl_status dl_cg__emit_softmax(cg *c, dl_ir_value *y, dl_ir_value *x, int32_t axis,
                                           bool is_log);

// A diagnostic at the node being lowered.
void cg_error(cg *c, const char *fmt, ...) DL_PRINTF(2, 3);

// Strides (in elements) of a C-order tensor of type `t` broadcast to an output of rank
// `out_rank` (numpy alignment: trailing dims match; a size-1 or missing dim gets stride 0).
void cg_broadcast_strides(const dl_ir_type *t, const dl_ir_type *out, int64_t *strides);
// C-order strides of a type.
void cg_strides(const dl_ir_type *t, int64_t *strides);

// Lowering hooks: the lower column of ir/ir_ops.def (lower.c's table maps hook `x` to
// dl_cg__lower_x). lower_elem.c: map (every elementwise op with a scalar emitter), clip, dropout,
// unary_grad (UnaryGrad, through the derivative beside its sub-op's scalar).
DL_NODISCARD dl_status dl_cg__lower_map(cg *c, const dl_ir_node *n);
DL_NODISCARD dl_status dl_cg__lower_unary_grad(cg *c, const dl_ir_node *n);
// Fusion groups (passes/fusion.c): g[0..n) in order, g[n - 1] the root (c->node).
// An elementwise group as one kernel (lower_elem.c):
DL_NODISCARD dl_status dl_cg__lower_fused(cg *c, const dl_ir_node *const *g, size_t n);
// A product g[0] (Gemm, MatMul) with the rest as its epilogue (x86/x86_linalg.c):
DL_NODISCARD dl_status dl_cg__lower_product_fused(cg *c, const dl_ir_node *const *g, size_t n);
// A convolution g[0] with the rest as its epilogue, reading nothing else (x86/x86_nn.c):
DL_NODISCARD dl_status dl_cg__lower_conv_fused(cg *c, const dl_ir_node *const *g, size_t n);
// A MaxPoolGrad g[0] whose windows tile its input, the rest applied to each dx value; members
// read other values of dx's dims at the same index (x86/x86_grad_nn.c):
DL_NODISCARD dl_status dl_cg__lower_pool_grad_fused(cg *c, const dl_ir_node *const *g, size_t n);
// Pieces for a lowering that computes a group's elementwise members itself (lower_elem.c):
// whether member x can be; the values members g[first..n) read from outside the group; their
// values at one element, in order, into val[] (val[0 .. first) given: the product's value).
bool dl_cg__fusible_member(cg *c, const dl_ir_node *x);
DL_NODISCARD dl_status dl_cg__fused_inputs(cg *c, const dl_ir_node *const *g, size_t n,
                                           size_t first, dl_ir_value **ext, size_t max,
                                           size_t *n_ext);
LLVMValueRef dl_cg__fused_values(cg *c, const dl_ir_node *const *g, size_t n, size_t first,
                                 LLVMValueRef *val, dl_ir_value *const *ext,
                                 const LLVMValueRef *xin, size_t n_ext);
LLVMValueRef dl_cg__fused_values_vec(cg *c, const dl_ir_node *const *g, size_t n, size_t first,
                                     LLVMValueRef *val, dl_ir_value *const *ext,
                                     const LLVMValueRef *xin, size_t n_ext);
DL_NODISCARD dl_status dl_cg__lower_clip(cg *c, const dl_ir_node *n);
DL_NODISCARD dl_status dl_cg__lower_dropout(cg *c, const dl_ir_node *n);
#define DL_CG__LOWER_HOOK(x) DL_NODISCARD dl_status dl_cg__lower_##x(cg *c, const dl_ir_node *n)
// x86/x86_reduce.c
DL_CG__LOWER_HOOK(reduce);
DL_CG__LOWER_HOOK(arg_max);
DL_CG__LOWER_HOOK(softmax);
// x86/x86_linalg.c
DL_CG__LOWER_HOOK(matmul);
// Decides c->tr_fold before lowering: a float32 Transpose of rank >= 2 whose output is no root
// of the module and whose every use is a float32 MatMul operand, directly or through other such
// Transposes, is never materialised: the MatMul reads the first materialised value before it
// with the composed permutation's strides (attention's K^T and V, the backward's B^T).
DL_NODISCARD dl_status dl_cg__transpose_folds(cg *c);
// Decides c->cast_pp before lowering (after dl_cg__transpose_folds; forward nodes [0, n_fwd)):
// with mixed precision a weight's Cast to bfloat16 runs once per infer call, though its readers'
// prepack kernels could round it themselves when the params change.
DL_NODISCARD dl_status dl_cg__cast_prepacks(cg *c, size_t n_fwd);
// The Transpose's permutation, perm[i] = the input dim of output dim i (default: reversed);
// false when the attribute is no permutation of the input's axes.
bool dl_cg__transpose_perm(const dl_ir_node *n, int32_t *perm);
DL_CG__LOWER_HOOK(gemm);
// x86/x86_nn.c
DL_CG__LOWER_HOOK(conv);
DL_CG__LOWER_HOOK(conv_transpose);
DL_CG__LOWER_HOOK(pool);
DL_CG__LOWER_HOOK(global_pool);
DL_CG__LOWER_HOOK(batch_norm);
DL_CG__LOWER_HOOK(layer_norm);
// lower_shape.c
DL_CG__LOWER_HOOK(copy);
DL_CG__LOWER_HOOK(transpose);
DL_CG__LOWER_HOOK(concat);
DL_CG__LOWER_HOOK(split);
DL_CG__LOWER_HOOK(slice);
DL_CG__LOWER_HOOK(gather);
DL_CG__LOWER_HOOK(expand);
DL_CG__LOWER_HOOK(pad);
// x86/x86_loss.c
DL_CG__LOWER_HOOK(loss);
DL_CG__LOWER_HOOK(mse);
// Internal gradient ops: lower_grad.c and x86/x86_grad_nn.c.
DL_CG__LOWER_HOOK(loss_grad);
DL_CG__LOWER_HOOK(layer_norm_grad);
DL_CG__LOWER_HOOK(gather_grad);
DL_CG__LOWER_HOOK(slice_grad);
DL_CG__LOWER_HOOK(pad_grad);
DL_CG__LOWER_HOOK(conv_grad_weight);
DL_CG__LOWER_HOOK(pool_grad);
DL_CG__LOWER_HOOK(batch_norm_grad);
// The train step (lower_train.c): after every node is lowered, builds the train_step entry (the
// forward kernels the training roots need, every training-graph kernel, then the multi-tensor
// step kernels: grad norm, prologue, optimizer update, assigns) from m->train and m->grads.
DL_NODISCARD dl_status dl_cg__lower_train(cg *c);
// The memory plan (cg_memplan.c, running the pass dl_pass_memplan of passes/memplan.c): given the
// plan's buffer table (sizes and kinds filled, ids as c->value_buf and c->extra), sets every
// buffer's arena offset by liveness over the entry points' kernel sequences (with in-place reuse
// for elementwise kernels) and gives the arena size.
typedef struct dl_cg_memplan {
    uint64_t arena_size;
} dl_cg_memplan;
DL_NODISCARD dl_status dl_cg__memplan(cg *c, dlrt_plan_buffer *bufs, size_t n_buf,
                                      dl_cg_memplan *out);
void dl_cg__memplan_fini(dl_cg_memplan *p);
// A file whose switches are partial on purpose (over its own ops or dtypes) includes
// DL_CG_FAMILY_SWITCHES_ARE_PARTIAL (x86/x86_nn.c: dtypes).
#define DL_CG_FAMILY_SWITCHES_ARE_PARTIAL _Pragma("GCC diagnostic ignored \"-Wswitch-enum\"")
// Dispatches a node to its lowering hook (lower.c).
DL_NODISCARD dl_status dl_cg__lower_node(cg *c, const dl_ir_node *n);

#endif
