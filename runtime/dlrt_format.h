// runtime/dlrt_format.h — the on-disk layout of a dlcc artifact's plan. Header-only and free of
// dependencies: codegen writes it, the runtime validates and reads it (STYLE.md 3.1).
//
// An artifact is an ELF shared object followed by a dlrt_artifact_trailer: a checksum of every
// byte before it, checked before the object is handed to the dynamic loader, so an accidentally
// damaged file is refused cleanly instead of crashing ld.so or a kernel. The ELF part exports
// one symbol, `dlcc_artifact_v1`, a dlrt_artifact_desc that points at
//   - the plan: a little-endian byte blob laid out as below, and
//   - the kernel table: for a CPU plan, kernel function pointers indexed by dlrt_plan_kernel.fn
//     (a device plan has no host code: the table may be absent and kernels are found by name).
// The checksum guards against accidents only (XXH3 is unkeyed: anyone can recompute it); a forged
// or buggy plan is caught by the runtime's validation of the plan, which must make every kernel
// stay inside the session arena whatever the plan says (see dlrt_plan_fn).
//
// Format 5 makes the plan device-neutral: the header names the device kind the code
// was compiled for (DLRT_PLAN_DEVICE_*); every kernel-table entry carries its kernel's symbol name
// (what a CUDA device looks up with cuModuleGetFunction in the device image; the CPU keeps its
// function-pointer table, entry i being the function named by entry i) and its launch data; the
// plan carries a device image section (a cubin or PTX module, empty for the CPU); and kernel
// records name their IR ops as a string ("MatMul+Add+Relu" for a fused kernel), so the runtime
// never needs the IR's op numbering. A runtime refuses every other version (DLRT_ERR_UNSUPPORTED,
// "recompile it"); the driver's cache key includes DLRT_FORMAT_VERSION, so old cache entries are
// never served.
//
// Format 6 adds what synchronous data-parallel training needs (runtime/rt_comm.c): the buffers a
// train step all-reduces across processes (each trained param's gradient, or with accumulation
// its accumulator) and the point of the step's kernel list where they are final and nothing has
// read them yet (dlrt_plan_hdr.comm_at).
//
// Format 7 gives kernel records flags (dlrt_plan_kernel.flags, zero before): a kernel flagged
// DLRT_KERNEL_F_ALLREDUCE_MEAN (an IR AllReduceMean, made by the train block's
// sync_batchnorm = true) copies its input to its float32 output, and a session bound to a
// communicator then replaces the output with its mean over ranks before any kernel that waits
// for it runs (runtime/rt_dp.c). Every flagged kernel of an entry waits for the flagged kernel
// before it, so every rank issues those all-reduces in the same order; unbound, the copy is all.
//
// Format 8 adds prepacked weights: a DLRT_BUF_PACKED buffer holds a param (or constant) in the
// layout a product's kernel reads it in (the CPU GEMM's packed B panels), and the kernels that
// fill them are flagged DLRT_KERNEL_F_PREPACK. They appear only in the infer entry, write only
// PACKED buffers and read only PARAM and CONST buffers; a PACKED buffer is written by exactly one
// of them and touched by no train kernel. A session runs them in the first infer and in the
// first infer after anything that may have changed a param (dlrt_session_set_param, a checkpoint
// load, a train step, a data-parallel broadcast); any other infer runs the entry without them,
// its other kernels reading the PACKED buffers as the last run left them (a dependency on a
// skipped kernel counts as satisfied). Weights are thus packed once per change, not once per
// call, as ONNX Runtime's MLAS prepacks constant initialisers.
//
// Kernel ABI, CPU (every kernel): void k(void *const *args, int64_t begin, int64_t end)
//   args:  one pointer per argument buffer of the kernel (dlrt_plan_kernel.first_arg ...),
//          outputs first, then inputs, in the order codegen chose;
//   [begin, end): the sub-range of the kernel's outer parallel dimension to compute, a subset of
//          [0, range). Any partition of [0, range) across threads gives the same bytes, so the
//          executor may split a kernel without recompiling.
// Kernel ABI, CUDA (format 5 reserves it; the GPU issue implements it): a kernel takes one
// device pointer per argument, in the same order, and is launched once on the grid and block of
// its dlrt_plan_fn with shared_bytes of dynamic shared memory; its code covers [0, range).
//
// Plan blob (all offsets are from the start of the blob, all integers little-endian, every
// table 8-byte aligned):
//   dlrt_plan_hdr
//   dlrt_plan_buffer[n_buffers]   every tensor-sized region a session owns, each at a fixed
//                                 offset in the session's arena (format 3: the memory plan)
//   dlrt_plan_tensor[n_tensors]   named interface tensors: inputs, outputs, params
//   dlrt_plan_kernel[n_kernels]
//   dlrt_plan_hparam[n_hparams]   named scalars of the train step's hyper buffer (format 2)
//   dlrt_plan_fn[n_fns]           what each compiled kernel is and touches (format 4; names and
//                                 launch data: format 5)
//   uint64_t fn_extents[n_fn_extents]  per kernel-table entry, per argument: bytes it touches
//   uint32_t args[n_args]         buffer ids, referenced by kernels
//   uint32_t entry_kernels[n_entry_kernels]  kernel ids in execution order per entry point
//                                 (strictly increasing within an entry point)
//   uint32_t deps[n_deps]         per kernel, the earlier kernels it must wait for (sorted)
//   char strings[size_strings]    names (not NUL-terminated; offset + length; no NUL inside)
//   uint8_t data[size_data]       constant and literal-initialiser bytes
//   uint8_t image[size_image]     format 5: the device image (DLRT_IMAGE_*; empty for the CPU)
//   dlrt_plan_grad[n_grads]       format 6: what data-parallel training all-reduces, and when
// The runtime treats the plan as untrusted: every id, offset and size is bounds-checked on load.
#ifndef DLRT_FORMAT_H
#define DLRT_FORMAT_H

#include <stdint.h>

#define DLRT_PLAN_MAGIC      "DLRTPLAN"
#define DLRT_FORMAT_VERSION  8u
#define DLRT_ARTIFACT_SYMBOL "dlcc_artifact_v1"
#define DLRT_MAX_RANK        8
#define DLRT_BUFFER_ALIGN    64u

// Element types; the values equal base/dl_base.h's dl_dtype (checked in codegen).
enum {
    DLRT_DT_FLOAT = 0,
    DLRT_DT_FLOAT16 = 1,
    DLRT_DT_BFLOAT16 = 2,
    DLRT_DT_INT32 = 3,
    DLRT_DT_INT64 = 4,
    DLRT_DT_BOOL = 5,
    DLRT_DT_COUNT = 6,
};

// What a buffer holds.
enum {
    DLRT_BUF_INPUT = 0,  // fed by the caller before a step
    DLRT_BUF_PARAM = 1,  // trainable state, initialised at session creation
    DLRT_BUF_CONST = 2,  // filled from data[data_off, data_off + size) at session creation
    DLRT_BUF_TEMP = 3,   // written by kernels
    DLRT_BUF_STATE = 4,  // persistent training state (optimizer slots, the hyper buffer, the loss
                         // seed): initialised at session creation from data[data_off, +size) when
                         // flags has DLRT_BUF_F_INIT_DATA, else zeros; then only kernels and the
                         // checkpoint / hparam API change it
    DLRT_BUF_PACKED = 5, // format 8: a param or constant in a kernel's layout (prepacked
                         // weights), persistent like STATE but never saved, broadcast or set: only
                         // its DLRT_KERNEL_F_PREPACK kernel writes it (undefined until it has run)
};

// dlrt_plan_buffer.flags
enum { DLRT_BUF_F_INIT_DATA = 1u };

// Roles of interface tensors.
// STATE tensors are optimizer slots named "PARAM.SLOT" (PyTorch's state_dict names) and, with
// gradient accumulation, the accumulators "PARAM.grad_accum", in STATE buffers; they come after
// the params.
enum { DLRT_ROLE_INPUT = 0, DLRT_ROLE_OUTPUT = 1, DLRT_ROLE_PARAM = 2, DLRT_ROLE_STATE = 3 };

// How a param is initialised. Seeded kinds reproduce base/dl_base.h's dl_rng exactly:
// element i (C order) = a + (b - a) * dl_rng_uniform(seed, i)   (UNIFORM, computed in double)
//                     = a + b * dl_rng_normal(seed, i)           (NORMAL, computed in double)
// then rounded to the param's dtype. Codegen folds glorot_uniform / he_normal into these with
// the fan values of docs/graph-format.md.
enum {
    DLRT_INIT_FILL = 0,    // every element = a
    DLRT_INIT_UNIFORM = 1, // U(a, b)
    DLRT_INIT_NORMAL = 2,  // N(mean a, std b)
    DLRT_INIT_DATA = 3,    // raw bytes data[data_off, +data_size) in the param's dtype
};

// Instruction-set extensions an artifact's code may use (from the target features it was compiled
// with). A runtime on a CPU without one of them refuses the artifact instead of faulting.
enum {
    DLRT_ISA_AVX = 1u << 0,
    DLRT_ISA_AVX2 = 1u << 1,
    DLRT_ISA_FMA = 1u << 2,
    DLRT_ISA_F16C = 1u << 3,
    DLRT_ISA_AVX512F = 1u << 4,
    DLRT_ISA_AVX512BW = 1u << 5,
    DLRT_ISA_AVX512DQ = 1u << 6,
    DLRT_ISA_AVX512VL = 1u << 7,
    DLRT_ISA_BMI2 = 1u << 8,
    DLRT_ISA_AVX512BF16 = 1u << 9, // vdpbf16ps: bfloat16 products (x86_linalg.c)
    DLRT_ISA_AMXTILE = 1u << 10,   // AMX tile registers (x86_linalg.c's bfloat16 tile kernel)
    DLRT_ISA_AMXBF16 = 1u << 11,   // tdpbf16ps
    DLRT_ISA_KNOWN = (1u << 12) - 1,
    // Bits an artifact records only when one of its kernels uses them (AMX: a CPU that has it
    // runs every other kernel of an artifact compiled for it; the runtime asks the OS for the
    // tile state only for those that use it).
    DLRT_ISA_ON_USE = DLRT_ISA_AMXTILE | DLRT_ISA_AMXBF16,
};

// Format 5: the kind of device an artifact's code runs on (dlrt_plan_hdr.device). The values
// equal runtime/dlrt.h's dlrt_device_kind.
enum {
    DLRT_PLAN_DEVICE_CPU = 0,  // host code in the ELF object; kernels called through `fns`
    DLRT_PLAN_DEVICE_CUDA = 1, // device code in the image; kernels looked up by name
    DLRT_PLAN_DEVICE_COUNT = 2,
};

// Format 5: what the device image section holds (dlrt_plan_hdr.image_kind).
enum {
    DLRT_IMAGE_NONE = 0,  // no image (size_image == 0): the CPU
    DLRT_IMAGE_CUBIN = 1, // a CUDA ELF module (cuModuleLoadData)
    DLRT_IMAGE_PTX = 2,   // NUL-terminated PTX text (cuModuleLoadData JIT-compiles it)
};

// Entry points.
enum { DLRT_ENTRY_INFER = 0, DLRT_ENTRY_TRAIN_STEP = 1, DLRT_ENTRY_COUNT = 2 };

// Optimizers (dlrt_plan_hdr.optimizer; the values equal ir/dl_ir.h's dl_ir_optim).
enum {
    DLRT_OPTIM_SGD = 0,
    DLRT_OPTIM_ADAM = 1,
    DLRT_OPTIM_ADAMW = 2,
    DLRT_OPTIM_RMSPROP = 3,
};
#define DLRT_OPTIM_NONE 0xffffffffu // no train step

// The hyper buffer: a STATE buffer of DLRT_HP_COUNT doubles read and written by the train step's
// kernels (never folded into code, so a learning-rate schedule needs no recompile). Fixed
// indices; the hparam table names those the runtime exposes.
// Gradient accumulation (accumulate = k > 1): every call adds its gradients into STATE
// accumulators "PARAM.grad_accum"; the k-th call (the boundary) uses their mean (accum / k) for
// the norm, clipping, the finite check, the update and the loss-scale update, then zeroes them.
enum {
    // optimizer hyper-parameters (PyTorch's names; flags are 0/1)
    DLRT_HP_LR = 0,
    DLRT_HP_MOMENTUM = 1,
    DLRT_HP_DAMPENING = 2,
    DLRT_HP_NESTEROV = 3,
    DLRT_HP_BETA1 = 4,
    DLRT_HP_BETA2 = 5,
    DLRT_HP_EPS = 6,
    DLRT_HP_WEIGHT_DECAY = 7,
    DLRT_HP_ALPHA = 8,
    DLRT_HP_CENTERED = 9,
    DLRT_HP_AMSGRAD = 10,
    DLRT_HP_CLIP_NORM = 11, // 0 when the model clips nothing
    // step state (saved in checkpoints)
    DLRT_HP_STEP = 12,           // optimizer steps applied (skipped steps do not count)
    DLRT_HP_LOSS_SCALE = 13,     // the scale the next step's backward uses (1 without scaling)
    DLRT_HP_GROWTH = 14,         // GradScaler growth_factor
    DLRT_HP_BACKOFF = 15,        // GradScaler backoff_factor
    DLRT_HP_INTERVAL = 16,       // GradScaler growth_interval
    DLRT_HP_GROWTH_TRACKER = 17, // consecutive finite steps
    DLRT_HP_ACCUM_COUNT = 18,    // micro-steps accumulated since the last boundary (< accumulate)
    DLRT_HP_ACCUMULATE = 19,     // the accumulate setting k (1: every call is a boundary)
    // outputs of the last step
    DLRT_HP_GRAD_NORM = 20, // global L2 norm of the unscaled gradients, before clipping
    DLRT_HP_SKIPPED = 21,   // 1: non-finite gradient, nothing but the loss scale changed
    DLRT_HP_LOSS = 22,      // the loss of the step's batch
    // scratch written by the prologue kernel for the update kernel
    DLRT_HP_APPLY = 23,     // 1: apply the update
    DLRT_HP_GRAD_MULT = 24, // (float)(1 / loss_scale): PyTorch's GradScaler.unscale_ factor
    DLRT_HP_STEP_SIZE = 25, // adam: lr / (1 - beta1^step)
    DLRT_HP_BC2_SQRT = 26,  // adam: sqrt(1 - beta2^step)
    DLRT_HP_CLIP_COEF = 27, // min(clip_norm / (grad_norm + 1e-6), 1); 1 without clipping
    DLRT_HP_BOUNDARY = 28,  // 1: this call is an accumulation boundary (always 1 when k = 1)
    DLRT_HP_COUNT = 32,
};

// dlrt_plan_hparam.flags
enum {
    DLRT_HPF_SETTABLE = 1u, // dlrt_session_set_hparam may change it
    DLRT_HPF_STATE = 2u,    // step state: saved in checkpoints, reset when a checkpoint lacks it
    DLRT_HPF_OUTPUT = 4u,   // written by every step
};

typedef struct dlrt_plan_hdr {
    char magic[8];       // DLRT_PLAN_MAGIC
    uint32_t version;    // DLRT_FORMAT_VERSION
    uint32_t hdr_size;   // sizeof(dlrt_plan_hdr)
    uint64_t total_size; // size of the whole blob
    uint32_t n_buffers, n_tensors, n_kernels, n_args;
    uint32_t n_entry_kernels, n_fns; // n_fns: entries in the kernel table
    uint64_t off_buffers, off_tensors, off_kernels, off_args, off_entry_kernels;
    uint64_t off_strings, size_strings, off_data, size_data;
    uint32_t entry_first[DLRT_ENTRY_COUNT];  // index into entry_kernels
    uint32_t entry_count[DLRT_ENTRY_COUNT];  // 0 = entry point absent
    uint32_t model_name_off, model_name_len; // in strings
    uint32_t target_off, target_len;         // target triple + CPU, in strings
    uint32_t n_deps;
    uint32_t isa; // DLRT_ISA_* the kernels may use; the runtime refuses CPUs that lack one
    uint64_t off_deps;
    // Format 2: the train step. All buffer ids are UINT32_MAX when there is no train step.
    uint32_t optimizer;    // DLRT_OPTIM_*
    uint32_t hyper_buffer; // STATE buffer of DLRT_HP_COUNT doubles
    uint32_t loss_buffer;  // the train loss (a float, float16 or bfloat16 scalar)
    uint32_t seed_buffer;  // STATE float scalar seeding backward (= loss scale), or UINT32_MAX
    uint32_t n_hparams;
    // STATE int64 scalar: the RNG counter of the training-mode Dropouts (the train step's
    // prologue adds 1 per call; checkpoints save it as "dlcc.rng_counter"), or UINT32_MAX.
    uint32_t counter_buffer;
    uint64_t off_hparams;
    // Format 3: the memory plan. A session allocates one arena of arena_size bytes and buffer i
    // lives at arena + dlrt_plan_buffer.offset. INPUT, PARAM, CONST and STATE buffers overlap
    // nothing; TEMP buffers may share memory when the compiler proved that no entry point uses
    // them at the same time (the kernel dependencies then order every pair of kernels touching
    // overlapping memory, so a threaded executor cannot race on reused memory).
    uint64_t arena_size;
    // Format 4: the kernel table's signatures (n_fns records at off_fns) and their argument
    // extents (n_fn_extents uint64_t at off_fn_extents).
    uint64_t off_fns, off_fn_extents;
    uint32_t n_fn_extents;
    // Format 5: the device kind (DLRT_PLAN_DEVICE_*) the kernels were compiled for; target_off /
    // target_len name the exact target ("x86_64-pc-linux-gnu skylake-avx512", "cuda:sm_90").
    uint32_t device;
    uint32_t image_kind; // DLRT_IMAGE_* (DLRT_IMAGE_NONE for the CPU)
    uint32_t n_grads;    // format 6: dlrt_plan_grad records at off_grads (0 without a train step)
    // The device image: bytes [off_image, off_image + size_image) of the plan, 64-byte aligned
    // (both 0 for the CPU).
    uint64_t off_image, size_image;
    // Format 6: the all-reduce point of the train step. The train entry's kernels
    // [0, comm_at) (positions in its kernel list) compute every dlrt_plan_grad buffer and leave
    // it final; kernels from comm_at on read them (the global norm first). A data-parallel
    // session reduces them in between. 0 without a train step.
    uint32_t comm_at;
    uint32_t reserved6; // 0
    uint64_t off_grads;
} dlrt_plan_hdr;
_Static_assert(sizeof(dlrt_plan_hdr) == 272, "abi: dlrt_plan_hdr");

typedef struct dlrt_plan_buffer {
    uint64_t size;     // bytes (0 allowed for empty tensors)
    uint32_t kind;     // DLRT_BUF_*
    uint32_t flags;    // DLRT_BUF_F_* (STATE only)
    uint64_t data_off; // CONST, STATE with DLRT_BUF_F_INIT_DATA: bytes in data
    uint64_t offset;   // format 3: byte offset in the session arena (DLRT_BUFFER_ALIGN-aligned;
                       // offset + size <= dlrt_plan_hdr.arena_size)
} dlrt_plan_buffer;
_Static_assert(sizeof(dlrt_plan_buffer) == 32, "abi: dlrt_plan_buffer");

typedef struct dlrt_plan_tensor {
    uint32_t name_off, name_len; // in strings
    uint32_t role;               // DLRT_ROLE_*
    uint32_t dtype;              // DLRT_DT_*
    uint32_t rank;
    uint32_t buffer; // buffer id
    int64_t dims[DLRT_MAX_RANK];
    // PARAM only:
    uint32_t init; // DLRT_INIT_*
    uint32_t reserved;
    double a, b;
    uint64_t seed;
    uint64_t data_off, data_size; // DLRT_INIT_DATA
} dlrt_plan_tensor;
_Static_assert(sizeof(dlrt_plan_tensor) == 136, "abi: dlrt_plan_tensor");

// Dependencies: kernel k may start once every kernel in deps[first_dep, first_dep + n_deps) has
// finished; they are all earlier in the plan (so the graph is acyclic). Through reachability
// (not necessarily directly) they order every pair of kernels of an entry point touching
// overlapping memory where one writes, and the kernels of one node among themselves. Format 4
// lists only the nearest conflicting accesses (per arena byte range: the last writer, and for a
// writer the readers since), so the list is linear in the graph, not quadratic.
// Format 5: ops_off / ops_len name the IR ops the kernel computes, as a string: one op name
// ("MatMul"), or for a fused kernel the names in execution order joined by '+'
// ("MatMul+Add+Relu"); "TrainStep" for the train step's own kernels, which come from no node. The
// runtime only shows it (profiler, diagnostics): it never parses it into op ids.
#define DLRT_OPS_SEPARATOR '+'
typedef struct dlrt_plan_kernel {
    uint32_t fn;        // index into the kernel table (its name, signature and launch data)
    uint32_t first_arg; // into args
    uint32_t n_args;
    uint32_t n_out;              // the first n_out arguments are written, the rest only read
    int64_t range;               // size of the outer parallel dimension (>= 1)
    uint32_t ops_off, ops_len;   // op names, in strings (may be empty)
    uint32_t src_line;           // .dlg line of the (first) node (0 = none)
    uint32_t flags;              // format 7: DLRT_KERNEL_F_* (0: none)
    uint32_t name_off, name_len; // node name (first output), in strings
    uint32_t first_dep, n_deps;  // into deps
} dlrt_plan_kernel;
_Static_assert(sizeof(dlrt_plan_kernel) == 56, "abi: dlrt_plan_kernel");
// dlrt_plan_kernel.flags (format 7).
enum {
    // An all-reduce follows the kernel: its first argument (a float32 buffer it writes) becomes
    // the mean over data-parallel ranks (the sum in rank order times 1/ranks) before any kernel
    // that depends on it runs. The kernel has n_out == 1 and a range of 1.. (its copy).
    DLRT_KERNEL_F_ALLREDUCE_MEAN = 1u,
    // Format 8: the kernel fills PACKED buffers from params (see the header comment): infer
    // entry only, outputs all PACKED, inputs all PARAM or CONST; the session skips it while the
    // params are unchanged since its last run.
    DLRT_KERNEL_F_PREPACK = 2u,
};
#define DLRT_KERNEL_F_ALL 3u

// Format 4: the signature of kernel-table entry i, as compiled. The kernel's code reaches at
// most extents[first_extent + a] bytes from argument pointer a and iterates over [0, range), so a
// plan kernel record using it must agree (same n_args, n_out and range) and give every argument
// a buffer at least that large: then no plan, forged or buggy, makes a kernel touch memory
// outside its buffers. The first n_out arguments are written.
// Format 5: the kernel's symbol name (non-empty, unique in the table: the LLVM function name; a
// CUDA device resolves it in the device image with cuModuleGetFunction, the CPU uses fns[i]) and
// its launch data. CPU kernels split [0, range) across threads and carry zeros; a CUDA kernel is
// launched once on grid x block threads (every component >= 1) with shared_bytes of dynamic
// shared memory.
typedef struct dlrt_plan_fn {
    int64_t range;
    uint32_t n_args, n_out;
    uint32_t first_extent;       // into fn_extents
    uint32_t name_off, name_len; // kernel symbol name, in strings
    uint32_t grid[3];            // CUDA: blocks per dimension (x, y, z); CPU: 0
    uint32_t block[3];           // CUDA: threads per block (x, y, z); CPU: 0
    uint32_t shared_bytes;       // CUDA: dynamic shared memory per block; CPU: 0
} dlrt_plan_fn;
_Static_assert(sizeof(dlrt_plan_fn) == 56, "abi: dlrt_plan_fn");

// A named scalar of the hyper buffer.
typedef struct dlrt_plan_hparam {
    uint32_t name_off, name_len; // in strings
    uint32_t index;              // DLRT_HP_* (< DLRT_HP_COUNT)
    uint32_t flags;              // DLRT_HPF_*
    double init;                 // initial value (also in the hyper buffer's init data)
} dlrt_plan_hparam;
_Static_assert(sizeof(dlrt_plan_hparam) == 24, "abi: dlrt_plan_hparam");

// Format 6: a buffer the train step all-reduces in data-parallel training, one per trained param
// in param order: its gradient (a TEMP buffer written by the backward kernels before comm_at),
// or with gradient accumulation (accumulate = k > 1) its accumulator "PARAM.grad_accum" (a
// STATE buffer; reduced at boundary calls only). size of the buffer == numel * size of dtype.
typedef struct dlrt_plan_grad {
    uint32_t buffer; // buffer id
    uint32_t param;  // the param's index among the params (0 .. number of params)
    uint32_t dtype;  // DLRT_DT_* of its elements
    uint32_t reserved;
    uint64_t numel;
} dlrt_plan_grad;
_Static_assert(sizeof(dlrt_plan_grad) == 24, "abi: dlrt_plan_grad");

// Format 4 and later: the last bytes of the artifact file, after the ELF object. hash = XXH3-128
// (base's dl_hash128_of) of the file's first `size - 16` bytes, i.e. everything but the hash
// itself; a reader checks magic, version and size, then the hash, before it maps the object.
#define DLRT_TRAILER_MAGIC "DLRTSUM\x01"
typedef struct dlrt_artifact_trailer {
    char magic[8];    // DLRT_TRAILER_MAGIC
    uint32_t version; // DLRT_FORMAT_VERSION
    uint32_t reserved;
    uint64_t size;             // of the whole file, trailer included
    uint64_t hash_lo, hash_hi; // dl_hash128 of bytes [0, size - 16)
} dlrt_artifact_trailer;
_Static_assert(sizeof(dlrt_artifact_trailer) == 40, "abi: dlrt_artifact_trailer");

typedef void (*dlrt_kernel_fn)(void *const *args, int64_t begin, int64_t end);

// The one exported symbol of an artifact.
typedef struct dlrt_artifact_desc {
    uint32_t version; // DLRT_FORMAT_VERSION
    uint32_t n_fns;   // == dlrt_plan_hdr.n_fns
    const uint8_t *plan;
    uint64_t plan_size;
    const dlrt_kernel_fn *fns; // CPU: n_fns host functions (entry i is named by dlrt_plan_fn i);
                               // other devices: NULL (kernels live in the device image)
} dlrt_artifact_desc;
_Static_assert(sizeof(dlrt_artifact_desc) == 32, "abi: dlrt_artifact_desc");

#endif
