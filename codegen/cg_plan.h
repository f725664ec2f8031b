// codegen/cg_plan.h — the plan builder's input (plan.c). Private to codegen/. LLVM-free: the plan
// is data about kernels (records, argument buffer ids, entry sequences, extra buffers, state
// tensors, hyper-parameters), not code, so this header and plan.c never include llvm-c.
#ifndef CG_PLAN_H
#define CG_PLAN_H

#include "dl_ir.h"
#include "dlrt_format.h"

// One compiled kernel (or one kernel of the plan: a record appears once per entry that runs it).
typedef struct cg_kernel_rec {
    uint32_t fn;
    uint32_t first_arg, n_args;
    uint32_t n_out; // leading args written by the kernel
    uint32_t node;  // IR node id (UINT32_MAX: none)
    uint32_t op;
    int64_t range;
    uint32_t src_line;
    const char *name;
    const char *ops;      // a fused kernel's ops joined by '+' (c->strs owns it); NULL: op's name
    bool ops_elementwise; // with ops: every op of the kernel is elementwise
    uint32_t flags;       // DLRT_KERNEL_F_* besides the all-reduce (from the op)
    uint8_t only;         // CG_ENTRY_*: the entry points that run it
} cg_kernel_rec;

// A buffer that is no IR value (ids after the values'): the train step's hyper buffer, its
// optimizer slots and its norm partials.
typedef struct cg_extra_buf {
    uint64_t size;  // bytes
    uint32_t kind;  // DLRT_BUF_*
    uint32_t flags; // DLRT_BUF_F_*
    uint8_t *init;  // OWNED: `size` bytes of initial contents (DLRT_BUF_F_INIT_DATA), or NULL
} cg_extra_buf;

// A STATE tensor of the plan (an optimizer slot or gradient accumulator "PARAM.SLOT").
typedef struct cg_state_tensor {
    char *name; // OWNED
    const dl_ir_value *param;
    uint32_t buf;
} cg_state_tensor;

// A borrowed read-only view of an array (the .data/.len shape of DL_VEC, so code reads both
// alike).
#define CG_SPAN(T)                                                                                 \
    struct {                                                                                       \
        const T *data;                                                                             \
        size_t len;                                                                                \
    }

typedef const char *cg_cstr;

// Threads per block of a CUDA kernel (the grid index model: one thread per index of its range).
#define CG_GPU_BLOCK 256

// The memory plan, as the plan builder calls it: sets every buffer's arena offset (sizes and
// kinds are filled) and gives the arena size.
typedef dl_status (*cg_memplan_fn)(void *ctx, dlrt_plan_buffer *bufs, size_t n_buf,
                                   uint64_t *out_arena_size);

// Everything the plan is built from; every pointer is BORROWED for the call.
typedef struct cg_plan_in {
    const dl_ir_module *m;
    dl_diags *d;
    const char *target;        // the target description the plan records
    uint32_t device;           // DLRT_PLAN_DEVICE_* the kernels run on
    const uint32_t *value_buf; // buffer id of each IR value (by value id)
    size_t n_fns;              // kernel table size (kernel record i is table entry i)
    CG_SPAN(cg_cstr) fn_names; // n_fns kernel symbol names (the functions' names in the module)
    CG_SPAN(cg_kernel_rec) kernels;
    CG_SPAN(uint32_t) args;
    CG_SPAN(uint32_t) infer_kernels; // indices into kernels, in execution order
    CG_SPAN(uint32_t) train_kernels;
    CG_SPAN(cg_extra_buf) extra; // buffer id = values.len + index
    CG_SPAN(cg_state_tensor) states;
    CG_SPAN(dlrt_plan_hparam) hparams; // name_off holds an index into hparam_names
    CG_SPAN(cg_cstr) hparam_names;
    bool has_train;
    uint32_t optimizer;                                  // DLRT_OPTIM_*
    uint32_t hyper_buf, loss_buf, seed_buf, counter_buf; // UINT32_MAX when absent
    const double *seed_init;                             // NULL or the seed's initial value
    CG_SPAN(dlrt_plan_grad) comm_grads; // format 6: the buffers a data-parallel step reduces
    uint32_t comm_at;                   // ... between train kernels [0, comm_at) and the rest
    uint32_t isa;                       // DLRT_ISA_* the kernels need
    cg_memplan_fn memplan;
    void *memplan_ctx;
} cg_plan_in;

// Builds the plan blob (runtime/dlrt_format.h): the buffer table, the memory plan, tensors,
// kernels with their dependencies, hyper-parameters, strings and data. On DL_OK *out (malloc'd,
// caller frees) holds *out_len bytes. Errors (a const with too few values, out of memory) go to
// in->d.
DL_NODISCARD dl_status dl_cg__plan_build(const cg_plan_in *in, uint8_t **out, size_t *out_len);

#endif
