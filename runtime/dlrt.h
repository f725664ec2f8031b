// runtime/dlrt.h — the dlcc runtime (libdlrt): loads compiled artifacts and runs them. It links
// neither LLVM nor the compiler's IR; trainers include only this header.
//
// Lifecycle: load a model (file, memory or the compilation cache), create a session (params
// initialised, a thread pool), set or bind inputs (dlrt_session_bind_input: zero-copy), run
// infer or train_step, read outputs and params, save / load checkpoints; a data loader makes
// batches ahead of the steps; a profiler records every kernel. samples/train_fmnist.c is a
// complete trainer in one file. Errors are returned as dlrt_status, never printed; the
// message is available from dlrt_last_error().
//
// Devices: a model runs on the device it was compiled for (dlrt_model_device), and a session's
// tensors live in that device's memory (dlrt_tensor_desc.device). The copy functions
// (dlrt_session_set_input, dlrt_session_input_copy, dlrt_session_output_copy,
// dlrt_session_get_param, dlrt_session_set_param, checkpoints) work on every device; the
// zero-copy ones (dlrt_session_output's pointer, dlrt_session_bind_input) give or take memory of
// the device, which is host memory on the CPU. This libdlrt has the CPU device and the CUDA one
// (artifacts of `dlcc compile --target cuda:sm_XX`; the driver is opened only then): a session of
// a CUDA artifact is DLRT_ERR_NO_DEVICE where there is no CUDA driver or no GPU (the message
// gives the driver's reason).
#ifndef DLRT_H
#define DLRT_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DLRT_BUILDING)
#    define DLRT_API __attribute__((visibility("default")))
#else
#    define DLRT_API
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Status codes returned by every fallible runtime call. On failure a message describing the
// problem is available from dlrt_last_error() on the same thread.
typedef enum dlrt_status {
    DLRT_OK = 0,
    DLRT_ERR_INVALID_ARG, // bad argument: unknown name, wrong size, NULL where not allowed
    DLRT_ERR_NOMEM,
    DLRT_ERR_IO,          // the artifact file cannot be read or loaded
    DLRT_ERR_CORRUPT,     // an artifact failed validation (untrusted input, never an assert)
    DLRT_ERR_UNSUPPORTED, // a valid artifact this runtime cannot run (e.g. a newer format)
    DLRT_ERR_NO_DEVICE,   // the artifact's device is absent: no CUDA driver, or no GPU
} dlrt_status;

// Element types (the values of runtime/dlrt_format.h's DLRT_DT_*).
typedef enum dlrt_dtype {
    DLRT_FLOAT32 = 0,
    DLRT_FLOAT16 = 1,  // IEEE binary16, 2 bytes
    DLRT_BFLOAT16 = 2, // 2 bytes
    DLRT_INT32 = 3,
    DLRT_INT64 = 4,
    DLRT_BOOL = 5, // 1 byte, 0 or 1
} dlrt_dtype;

#define DLRT_MAX_DIMS 8

// Where a model's code runs and a session's tensors live (the values of runtime/dlrt_format.h's
// DLRT_PLAN_DEVICE_*).
typedef enum dlrt_device_kind {
    DLRT_DEVICE_CPU = 0,  // host memory: pointers the runtime gives are plain host pointers
    DLRT_DEVICE_CUDA = 1, // an NVIDIA GPU's memory: pointers the runtime gives are CUDA device
                          // pointers (CUdeviceptr values), not to be dereferenced by the host
} dlrt_device_kind;

// Describes a named tensor of a model. `name` is BORROWED from the model and lives as long as it.
typedef struct dlrt_tensor_desc {
    const char *name;
    dlrt_dtype dtype;
    int32_t rank;
    int64_t dims[DLRT_MAX_DIMS];
    size_t nbytes;           // element count * element size
    dlrt_device_kind device; // where the tensor lives in a session of the model
} dlrt_tensor_desc;

// A loaded artifact: immutable, shared by sessions, reference counted.
typedef struct dlrt_model dlrt_model;
// Per-run state of a model: params and every buffer. Used by one thread at a time.
typedef struct dlrt_session dlrt_session;

// The runtime's version as "MAJOR.MINOR.PATCH". Static string; never NULL. Thread-safe.
DLRT_API const char *dlrt_version(void);
// A static English description of `s` ("ok", "invalid argument", ...). Never NULL. Thread-safe.
DLRT_API const char *dlrt_status_str(dlrt_status s);
// The message of the last failed call on this thread ("" if none). Valid until the next runtime
// call on this thread. Thread-safe (the message is thread-local).
DLRT_API const char *dlrt_last_error(void);

// Loads an artifact (.so written by `dlcc compile`) from a file. On DLRT_OK *out holds a model
// with one reference (release with dlrt_model_release). Validates the artifact's plan: a
// malformed one gives DLRT_ERR_CORRUPT. Thread-safe.
DLRT_API dlrt_status dlrt_model_load_file(const char *path, dlrt_model **out);
// Loads an artifact from memory (the bytes are copied into an anonymous memory file; nothing is
// written to disk). `data` stays the caller's. Otherwise as dlrt_model_load_file.
DLRT_API dlrt_status dlrt_model_load_memory(const void *data, size_t size, dlrt_model **out);
// Loads the artifact stored under `key_hex` (32 hex digits, as `dlcc compile -v` and
// `dlcc-cache list` print it) in the compilation cache in `cache_dir` (NULL: the default,
// $DLCC_CACHE_DIR, else $XDG_CACHE_HOME/dlcc, else ~/.cache/dlcc). The cache is opened
// read-only and never created; the stored bytes are checked against their hash before loading.
// Errors: DLRT_ERR_INVALID_ARG for a malformed key or one with no artifact in the cache,
// DLRT_ERR_IO when the cache cannot be opened or read (the message says why), then as
// dlrt_model_load_memory. On DLRT_OK *out holds one reference. Thread-safe.
DLRT_API dlrt_status dlrt_model_load_cached(const char *cache_dir, const char *key_hex,
                                            dlrt_model **out);
// Reference counting. Thread-safe (atomic). Releasing the last reference unloads the artifact;
// every session holds a reference of its own.
DLRT_API void dlrt_model_retain(dlrt_model *m);
DLRT_API void dlrt_model_release(dlrt_model *m); // NULL is a no-op

// The model's name and the target it was compiled for ("x86_64-pc-linux-gnu/znver3"); BORROWED.
DLRT_API const char *dlrt_model_name(const dlrt_model *m);
DLRT_API const char *dlrt_model_target(const dlrt_model *m);
// The kind of device the model's code runs on (DLRT_DEVICE_CPU for a NULL model). Thread-safe.
DLRT_API dlrt_device_kind dlrt_model_device(const dlrt_model *m);
// "cpu", "cuda" (static strings; "unknown" for other values). Thread-safe.
DLRT_API const char *dlrt_device_name(dlrt_device_kind kind);
// Interface tensors, in declaration order. Index out of range gives DLRT_ERR_INVALID_ARG.
DLRT_API size_t dlrt_model_num_inputs(const dlrt_model *m);
DLRT_API size_t dlrt_model_num_outputs(const dlrt_model *m);
DLRT_API size_t dlrt_model_num_params(const dlrt_model *m);
DLRT_API dlrt_status dlrt_model_input(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
DLRT_API dlrt_status dlrt_model_output(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
DLRT_API dlrt_status dlrt_model_param(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
// 1 when the infer entry point reads input i, 0 when it never does (e.g. labels only the train
// step uses: they may stay unset for dlrt_session_infer) or i is out of range.
DLRT_API int dlrt_model_infer_reads_input(const dlrt_model *m, size_t i);

// Creates a session on the model's device: allocates its memory and initialises every param
// from the artifact's initialisers (deterministic: the same values on every machine and run).
// Retains `m`. DLRT_ERR_NO_DEVICE when the model's device is absent (a CUDA artifact without a
// CUDA driver or GPU; $DLRT_CUDA_DEVICE picks the GPU, default 0), DLRT_ERR_UNSUPPORTED when
// this runtime has no device of its kind or the driver cannot load the model's PTX.
// Thread-safe with respect to other sessions of the same model.
DLRT_API dlrt_status dlrt_session_create(dlrt_model *m, dlrt_session **out);
DLRT_API void dlrt_session_destroy(dlrt_session *s); // NULL is a no-op; releases the model
// The device the session's tensors live on (that of its model).
DLRT_API dlrt_device_kind dlrt_session_device(const dlrt_session *s);

// Copies `size` bytes (exactly the input's nbytes) of host memory into input `name`, in the
// session's own memory (ending a dlrt_session_bind_input of that input). Any device.
DLRT_API dlrt_status dlrt_session_set_input(dlrt_session *s, const char *name, const void *data,
                                            size_t size);
// Zero-copy input: the following steps read input `name` directly from `data` (`size` bytes,
// exactly the input's nbytes, aligned to its element size; C order), e.g. a loader batch or a
// NumPy array. `data` is BORROWED: it must stay valid and unchanged while a step runs and until
// the input is bound again, set with dlrt_session_set_input (which returns the input to the
// session's memory) or the session is destroyed. Kernels only read inputs, so the same memory
// may back several inputs or sessions, but it must not overlap an output or param of the
// session. Costs a few pointer stores, never a copy. DLRT_ERR_INVALID_ARG for an unknown name,
// a wrong size, NULL data or a misaligned pointer. CPU sessions only (`data` is host memory);
// DLRT_ERR_UNSUPPORTED on a device whose kernels cannot read host memory (use set_input).
DLRT_API dlrt_status dlrt_session_bind_input(dlrt_session *s, const char *name, const void *data,
                                             size_t size);
// Runs the `infer` entry point on the current inputs and params. DLRT_ERR_INVALID_ARG (naming
// it) when an input the entry point reads was never set or bound since the session was made
// (it would otherwise read zeros). dlrt_session_train_step checks its inputs the same way.
// Weights the artifact prepacks (format 8: a GEMM's packed layout) are packed by the first call
// and by the first after anything that changed a param (dlrt_session_set_param, a checkpoint
// load, a train step), which take that much longer; the other calls reuse them.
DLRT_API dlrt_status dlrt_session_infer(dlrt_session *s);
// Gives a BORROWED pointer to output `name` in the session's memory and, when `desc` is
// non-NULL, its description (desc->device says where the pointer points), valid and holding
// the last step's values until the next step or destroy, as on every device. On the CPU it is a
// host pointer, read in place. On a CUDA device it is a device pointer (CUdeviceptr) for CUDA code
// on the session's stream, never for the host to dereference: dlrt_session_output_copy is the
// portable way to read an output.
DLRT_API dlrt_status dlrt_session_output(dlrt_session *s, const char *name, const void **data,
                                         dlrt_tensor_desc *desc);
// Copies output `name` (exactly its nbytes, `size`) into host memory `data`, on any device.
// DLRT_ERR_INVALID_ARG for an unknown name, a wrong size or NULL data.
DLRT_API dlrt_status dlrt_session_output_copy(dlrt_session *s, const char *name, void *data,
                                              size_t size);
// Copies the current contents of input `name` (as set or bound; zeros if never given) into host
// memory `data` (exactly its nbytes), on any device. Errors as dlrt_session_output_copy.
DLRT_API dlrt_status dlrt_session_input_copy(dlrt_session *s, const char *name, void *data,
                                             size_t size);
// Reads / writes param `name` (exactly nbytes) from / to host memory, on any device.
DLRT_API dlrt_status dlrt_session_get_param(dlrt_session *s, const char *name, void *data,
                                            size_t size);
DLRT_API dlrt_status dlrt_session_set_param(dlrt_session *s, const char *name, const void *data,
                                            size_t size);

// ---------------------------------------------------------------------------------------------
// Training (models compiled from a .dlg with a `train` block)

// True when the model has a `train_step` entry point.
DLRT_API int dlrt_model_has_train_step(const dlrt_model *m);
// Optimizer state tensors ("PARAM.SLOT", e.g. "w1.exp_avg"; slot names as PyTorch's
// state_dict), in plan order, and with gradient accumulation each param's accumulator
// "PARAM.grad_accum" (the sum of the gradients of the current cycle's micro-batches, times the
// loss scale with loss scaling, as PyTorch's .grad before GradScaler.unscale_), and each
// running statistic's "PARAM.cycle_start" (its value when the cycle began, 0 between cycles: a
// skipped boundary puts it back, docs/training.md).
// dlrt_session_get_param / set_param accept these names too.
DLRT_API size_t dlrt_model_num_state(const dlrt_model *m);
DLRT_API dlrt_status dlrt_model_state(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
// Hyper-parameters and step scalars of the train step, by name: settable ones ("lr",
// "momentum", "dampening", "beta1", "beta2", "eps", "weight_decay", "alpha", "clip_norm" — those
// of the model's optimizer) and the session's step state ("step", "loss_scale",
// "growth_tracker", and with accumulate = k > 1 "accum_count", the micro-steps of the current
// cycle in [0, k), next to the read-only "accumulate" = k). Values are doubles. The name is
// BORROWED from the model.
DLRT_API size_t dlrt_model_num_hparams(const dlrt_model *m);
DLRT_API const char *dlrt_model_hparam_name(const dlrt_model *m, size_t i); // NULL if i too big
DLRT_API dlrt_status dlrt_session_get_hparam(dlrt_session *s, const char *name, double *out);
// Sets a hyper-parameter for the following steps (a learning-rate schedule writes "lr" before
// each step; nothing is recompiled). DLRT_ERR_INVALID_ARG for an unknown name or a value
// PyTorch's optimizer would refuse (negative lr, beta outside [0, 1), ...).
DLRT_API dlrt_status dlrt_session_set_hparam(dlrt_session *s, const char *name, double value);

// What one train step did.
typedef struct dlrt_step_info {
    double loss;       // the loss of this call's batch (as computed, before the update)
    int skipped;       // 1: a non-finite gradient; params and optimizer state are unchanged
                       // (always 0 on a call that is no accumulation boundary)
    double grad_norm;  // global L2 norm of the (unscaled) gradients, before clipping; with
                       // accumulation, of the running mean accum / (micro-steps so far in the
                       // cycle, this call included), so at a boundary of the mean gradient
    double loss_scale; // the loss scale the next call will use (1 without loss scaling)
    int64_t step;      // optimizer steps applied so far (skipped steps do not count)
} dlrt_step_info;

// Runs the `train_step` entry point on the current inputs: forward, backward, global norm,
// non-finite check, loss-scale update and the masked optimizer update of every param, all in
// compiled kernels with no read-back in between. `info` may be NULL. DLRT_ERR_UNSUPPORTED if
// the model has no train step; DLRT_ERR_INVALID_ARG (nothing run) when an input the step reads
// was never set or bound since the session was made.
//
// Gradient accumulation (`accumulate = k` in the train block, k > 1): every call runs forward
// and backward on its batch and adds the gradients into the accumulators "PARAM.grad_accum".
// Every k-th call (the boundary) uses their MEAN, accum / k (as PyTorch's usual loss / k
// accumulation), for the global norm, clipping, the non-finite check, the optimizer update and
// the loss-scale update, then zeroes the accumulators; a non-finite mean skips the update
// (skipped = 1) and still zeroes them, as zero_grad would. Other calls change nothing but the
// accumulators and the micro-step count ("accum_count"): skipped = 0, step unchanged. The loss
// scale only changes at boundaries, so every micro-batch of a cycle uses the same one.
//
// Dropout: the training-mode Dropouts draw their masks from a counter-based RNG keyed by the
// op's seed and the session's RNG counter, which starts at 0 and grows by 1 at every call
// (skipped or not, boundary or not): call n (0-based) keeps element i when
// dl_rng_uniform(seed, n * numel + i) >= ratio, the same masks as the reference evaluator.
DLRT_API dlrt_status dlrt_session_train_step(dlrt_session *s, dlrt_step_info *info);

// Checkpoints in safetensors format: every param by name, every optimizer slot and accumulator
// as "PARAM.SLOT", and __metadata__ {"dlcc.step", "dlcc.loss_scale", "dlcc.growth_tracker",
// "dlcc.model"}, plus "dlcc.accum_count" with accumulation and "dlcc.rng_counter" with
// training-mode Dropout, so a run saved mid-cycle resumes bit-identically. Saving is atomic (a
// temporary file renamed into place). Loading accepts a file with a subset of the tensors (e.g.
// params only, as exported from PyTorch): tensors present are loaded (dtype and shape must match),
// absent optimizer slots and step state are reset to their initial values, absent params keep their
// current values; an unknown tensor name is an error (see dlrt_session_load_with for renaming and
// skipping). On error the session is unchanged.
// PyTorch-only buffers ("*.num_batches_tracked", BatchNorm's step counter, which no dlcc model
// holds) are skipped by every load.
DLRT_API dlrt_status dlrt_session_save(dlrt_session *s, const char *path);
// dlrt_session_save with extra __metadata__ pairs (keys and values copied into the file; e.g. a
// training loop's position, docs/training.md). A key the runtime writes itself ("dlcc.step",
// ...), a duplicate or text that is not UTF-8 is DLRT_ERR_INVALID_ARG and nothing is written.
typedef struct dlrt_meta_pair {
    const char *key, *value;
} dlrt_meta_pair;
DLRT_API dlrt_status dlrt_session_save_meta(dlrt_session *s, const char *path,
                                            const dlrt_meta_pair *extra, size_t n_extra);
DLRT_API dlrt_status dlrt_session_load(dlrt_session *s, const char *path);

// Loading a checkpoint whose names are not the model's, e.g. a PyTorch state_dict saved with
// safetensors.torch.save_file. A rule maps a file name to a model name: exact ("fc1.weight" ->
// "w1"), or a prefix rule when both sides end in '*' ("encoder.*" -> "enc.*" renames every name
// starting with "encoder."); the first rule that matches wins, names no rule matches stay as they
// are. Two file tensors that land on one model tensor are an error.
typedef struct dlrt_load_rule {
    const char *from, *to;
} dlrt_load_rule;

// What a load tells its caller besides its status: `name` (the file's name) was skipped
// (a PyTorch-only buffer, or unknown to the model with ignore_unknown), or, for a model param
// the file lacks, `name` keeps its current value. `what` says which, in words.
typedef void (*dlrt_load_notice_fn)(void *user, const char *name, const char *what);

typedef struct dlrt_load_options {
    const dlrt_load_rule *rules; // BORROWED, n_rules of them (default none)
    size_t n_rules;
    int ignore_unknown;         // nonzero: a tensor the model lacks is skipped, not an error
    dlrt_load_notice_fn notice; // NULL (default): no notices
    void *user;                 // passed to notice
} dlrt_load_options;

// Sets every option to its default (no rules, unknown names are errors, no notices).
DLRT_API void dlrt_load_options_init(dlrt_load_options *o);
// dlrt_session_load with name rules and notices (`o` NULL: the defaults, i.e. dlrt_session_load).
// All-or-nothing as dlrt_session_load; notices come before the session changes, so a caller may
// collect them and still see the load fail. DLRT_ERR_INVALID_ARG for a rule with a NULL side
// or a '*' on one side only.
DLRT_API dlrt_status dlrt_session_load_with(dlrt_session *s, const char *path,
                                            const dlrt_load_options *o);

// ---------------------------------------------------------------------------------------------
// Threads and profiling
//
// A session runs its steps on a pool of threads created with it (the thread that calls a step
// is one of them; the others sleep between steps) and joined by dlrt_session_destroy. Kernels
// run as soon as the kernels they depend on have finished, and large kernels are split across
// threads. Results are bit-identical for every thread count. A step allocates nothing and
// creates no thread.

#define DLRT_MAX_THREADS 256

// Options of dlrt_session_create_ex. Initialise with dlrt_session_options_init, then set fields.
typedef struct dlrt_session_options {
    int threads; // threads including the caller: 1..DLRT_MAX_THREADS, or 0 (the default):
                 // $DLRT_THREADS if set, else the number of cores this process may run on.
                 // When it is that number, each worker is pinned to one of those cores other
                 // than the creating thread's ($DLRT_AFFINITY=0: none is; docs/runtime.md)
    const char *profile_path; // non-NULL: profile from creation on and write the Chrome trace
                              // here at dlrt_session_destroy (NULL, the default: $DLRT_PROFILE
                              // if set, else no profiling). Copied.
    const char *source_name;  // the .dlg file name the profiler shows with line numbers
                              // (NULL, the default: the model's name). Copied.
    int flush_denormals; // nonzero: every step runs with denormal float results flushed to zero
                         // and denormal inputs read as zero (x86: MXCSR FTZ and DAZ) on all its
                         // threads; the calling thread's own mode is restored when the step
                         // returns, the session's worker threads keep it. Faster where training
                         // drifts into denormals, not IEEE-exact there. 0 (the default): IEEE
                         // gradual underflow. DLRT_ERR_UNSUPPORTED on a CPU without such a mode.
} dlrt_session_options;

// Sets every option to its default. Thread-safe.
DLRT_API void dlrt_session_options_init(dlrt_session_options *opts);
// dlrt_session_create with options (`opts` NULL: the defaults; dlrt_session_create is
// dlrt_session_create_ex(m, NULL, out)). DLRT_ERR_INVALID_ARG for a thread count outside
// 0..DLRT_MAX_THREADS or a malformed $DLRT_THREADS (the message names the value);
// DLRT_ERR_NOMEM when a thread or the profiler's buffers cannot be made.
DLRT_API dlrt_status dlrt_session_create_ex(dlrt_model *m, const dlrt_session_options *opts,
                                            dlrt_session **out);
// The number of threads the session's steps run on (>= 1).
DLRT_API int dlrt_session_threads(const dlrt_session *s);

// Starts profiling (or restarts it, discarding what was recorded): from now on every step
// records one event per kernel chunk (worker, start, duration, kernel) into buffers allocated
// here, once; events beyond their capacity (2^18 per thread) are dropped and counted, the
// per-kernel totals are always complete. Profiling stays on until the session is destroyed.
// With profiling off a step pays one branch per kernel chunk.
DLRT_API dlrt_status dlrt_session_profile_begin(dlrt_session *s);
// Writes what was recorded since dlrt_session_profile_begin as Chrome trace-event JSON
// (chrome://tracing, ui.perfetto.dev), atomically: one row (tid) per worker, one "X" event per
// kernel chunk named "OPS NODE" (e.g. "MatMul h1"; a fused kernel's ops joined by '+',
// "MatMul+Add+Relu h1") with args {op (that string), ops (its list), symbol (the kernel's
// function name), node, source, line, kernel, begin, end, range}, and one "step" event per step
// on worker 0's row. DLRT_ERR_INVALID_ARG
// when profiling is off, DLRT_ERR_IO when the file cannot be written.
DLRT_API dlrt_status dlrt_session_profile_write(dlrt_session *s, const char *path);
// Writes to `f`, per entry point that ran, a header line (steps, mean step time, threads, kernel
// time per step) and the `top` kernels by total time, one per line:
//   "  31.2%  4.120 ms  MaxPoolGrad p (cnn_fmnist.dlg:11)"
// the kernel's share of the entry's kernel time (the sum over all threads, which is the step
// time with one thread), its mean time per step, op, node, and source line when known.
// DLRT_ERR_INVALID_ARG when profiling is off.
DLRT_API dlrt_status dlrt_session_profile_summary(dlrt_session *s, FILE *f, size_t top);

// ---------------------------------------------------------------------------------------------
// Data parallelism (rt_comm.c, rt_dp.c)
//
// Synchronous data-parallel training across processes: every process (rank) runs a session of
// the same artifact on its own share of each global batch, and the train step all-reduces the
// gradients between backward and the optimizer, so every rank applies the same update and
// params stay identical. The transport is MPI, in a plugin (libdlrt_mpi.so, installed next to
// libdlrt) that libdlrt loads with dlopen only when a communicator is opened: a trainer that
// never calls dlrt_comm_open_* needs no MPI. The reduction order is fixed (each rank sums its
// segment's contributions in rank order 0..N-1), so a run is bit-identical from launch to
// launch for a given world size. A rank that dies or hangs makes the others fail with
// DLRT_ERR_IO naming it after the timeout, never wait forever.

typedef struct dlrt_comm dlrt_comm;

// Options of dlrt_comm_open_mpi. Initialise with dlrt_comm_options_init, then set fields.
typedef struct dlrt_comm_options {
    double timeout_s;        // longest wait for another rank in one operation (default 300; 0: the
                             // default, or $DLRT_COMM_TIMEOUT seconds when set)
    const char *plugin_path; // the MPI plugin (NULL, the default: $DLRT_MPI_PLUGIN if set, else
                             // libdlrt_mpi.so next to libdlrt, else the dynamic loader's path)
} dlrt_comm_options;

// Sets every option to its default. Thread-safe.
DLRT_API void dlrt_comm_options_init(dlrt_comm_options *opts);
// Opens a communicator over MPI. `mpi_comm` NULL: MPI_COMM_WORLD, initialising MPI (with
// MPI_THREAD_SERIALIZED) unless the program already did, and finalising it at destroy if this
// call initialised it; else the address of an MPI_Comm of the caller's (e.g. mpi4py's
// Comm handle), duplicated (MPI must be initialised with at least MPI_THREAD_SERIALIZED). The
// communicator runs one thread of its own that makes every MPI call after opening. Errors:
// DLRT_ERR_UNSUPPORTED when the plugin or MPI cannot be loaded (the message says which file),
// DLRT_ERR_IO when MPI fails, DLRT_ERR_INVALID_ARG for bad options. Collective: every rank calls
// it. On DLRT_OK *out is owned by the caller (dlrt_comm_destroy).
DLRT_API dlrt_status dlrt_comm_open_mpi(const void *mpi_comm, const dlrt_comm_options *opts,
                                        dlrt_comm **out);
// Stops the communicator's thread and frees it (finalising MPI if dlrt_comm_open_mpi initialised
// it and no operation failed: after a failure the peers may be gone, and MPI_Finalize could
// wait for them forever). Sessions bound to it must be unbound or destroyed first. NULL is a
// no-op.
DLRT_API void dlrt_comm_destroy(dlrt_comm *c);
// This process's rank in [0, size) and the number of ranks. Thread-safe.
DLRT_API int dlrt_comm_rank(const dlrt_comm *c);
DLRT_API int dlrt_comm_size(const dlrt_comm *c);
// Deterministic all-reduce: afterwards every rank's buf[0, n) holds scale * (the sum over ranks
// r = 0..N-1, in that order, of rank r's buf), the same bits on every rank. Blocking.
// Operations are matched across ranks by order: every rank must issue the same operations
// (all-reduce, broadcast, barrier; a bound session's steps) in the same order. DLRT_ERR_IO when
// a rank did not take part within the timeout (the message names it) or MPI failed; after such
// an error the communicator is broken and every later operation fails at once with the same
// message.
DLRT_API dlrt_status dlrt_comm_allreduce(dlrt_comm *c, float *buf, size_t n, float scale);
// The same, non-blocking: queues the operation and returns at once with a ticket for
// dlrt_comm_wait. buf must stay valid and untouched until the wait returns. Thread-safe with
// other starts (operations run in the order they were started, on the communicator's thread).
DLRT_API dlrt_status dlrt_comm_allreduce_start(dlrt_comm *c, float *buf, size_t n, float scale,
                                               uint64_t *out_ticket);
// Waits until the operation of `ticket` (and every earlier one) has finished. Errors as
// dlrt_comm_allreduce.
DLRT_API dlrt_status dlrt_comm_wait(dlrt_comm *c, uint64_t ticket);
// Copies root's buf[0, size) into every other rank's buf. Blocking; errors as above.
DLRT_API dlrt_status dlrt_comm_broadcast(dlrt_comm *c, void *buf, size_t size, int root);
// Returns once every rank has called it. Errors as above.
DLRT_API dlrt_status dlrt_comm_barrier(dlrt_comm *c);

// Binds a communicator to a session (BORROWED: it must outlive the binding): from now on
// dlrt_session_train_step all-reduces the gradients after backward (the mean over ranks: the sum
// in rank order times 1/size, so with a mean-reduced loss each rank's step uses the gradient of
// the global batch), then the global norm, clipping, the non-finite check, loss scaling and the
// update see the reduced gradients, and every rank takes the same decisions. The float32 loss is
// reduced with them (the mean over ranks), so dlrt_step_info.loss is the global batch's loss on
// every rank and a loss that is non-finite on one rank is non-finite on all. With accumulate = k
// only the k-th call of each cycle reduces gradients (its accumulators); the other calls reduce
// the loss alone (4 bytes). Gradients are packed into
// buckets of at most bucket_bytes (0: the default, 25 MiB, or $DLRT_BUCKET_BYTES) in the order
// backward finishes them, and each bucket's all-reduce starts as soon as the kernels touching
// its gradients are done, overlapping the rest of backward. Collective: every rank binds, in
// the same order. At binding every rank checks that all ranks run the same artifact (a digest
// of its plan and of its param shapes): DLRT_ERR_INVALID_ARG naming the first rank that
// differs from rank 0, before any step; then rank 0's params, optimizer state and step state
// are broadcast to all (as DDP does at construction), so a checkpoint loaded on rank 0 alone is
// enough. BatchNorm running statistics stay per rank between bindings. An artifact with
// AllReduceMean kernels (format 7, the train block's sync_batchnorm = true) all-reduces their
// outputs inside the step, in plan order, and then starts the buckets after backward (no
// overlap) so that every rank's operations come in one order. CPU sessions with float32
// gradients only (else DLRT_ERR_UNSUPPORTED). `c` NULL unbinds (no collective call).
DLRT_API dlrt_status dlrt_session_bind_comm(dlrt_session *s, dlrt_comm *c, size_t bucket_bytes);
// What the last train step of a bound session spent on communication: *out_wait_ms the time the
// step waited for all-reduces after backward, *out_comm_ms the time they took on the
// communicator's thread, *out_bytes the bytes reduced per rank, *out_buckets their count (any
// may be NULL). Zeros for an unbound session or before the first step.
DLRT_API void dlrt_session_comm_stats(const dlrt_session *s, double *out_wait_ms,
                                      double *out_comm_ms, uint64_t *out_bytes, int *out_buckets);

#define DLRT_MAX_CHUNKS 4096
// Deterministic data parallelism in one process: with n_chunks = N > 1 every train step takes N
// batches of the artifact's batch at once and gives the params, optimizer state and loss that N
// ranks of dlrt_session_bind_comm give bit for bit when rank r is given chunk r (the same
// artifact on every rank). Every input must be bound with dlrt_session_bind_input holding N
// batches back to back (chunk r at byte r x the input's size; dlrt_session_set_input's one
// batch is refused at the step); a step runs forward and backward once per chunk, sums the
// chunks' gradients and losses element by element in chunk order 0..N-1 and multiplies by
// (float)(1 / N), exactly the all-reduce's operations, then clips, checks and updates once. A
// data loader with shard_index DLRT_LOADER_ALL_SHARDS gives such batches. With gradient
// accumulation (accumulate = k > 1) each chunk keeps its own accumulators, as each rank does:
// chunk r's backward adds into chunk r's, a boundary call sums the N accumulator sets (and the
// losses) as above, and other calls sum the losses alone; between calls the session's
// "PARAM.grad_accum" tensors hold chunk 0's (rank 0's), chunks 1..N-1's are kept inside the
// session (start at zero; zeroed at every boundary; lost by set_chunks and by a checkpoint, so
// change chunks and save to resume at a cycle boundary: accum_count 0). Not with a
// communicator, nor with an artifact that all-reduces inside the step (sync_batchnorm:
// DLRT_ERR_UNSUPPORTED); CPU sessions with float32 gradients only. Inference reads chunk 0.
// BatchNorm running statistics come from chunk N-1 (rank 0's are its own chunk's). n_chunks = 1
// turns it off (the inputs must then be given again). Allocates the gradients' size once (with
// accumulation N times).
DLRT_API dlrt_status dlrt_session_set_chunks(dlrt_session *s, int n_chunks);
// The session's chunks (1 when off). Thread-safe with other readers.
DLRT_API int dlrt_session_chunks(const dlrt_session *s);

// ---------------------------------------------------------------------------------------------
// Memory

// The kernels of entry point `train_step` (non-zero) or `infer` (zero) of `m`: *n_kernels how
// many run per call (0 when the entry point is absent), *n_fused how many of them are fused
// kernels (several IR ops in one: their ops string, as the profiler shows it, joins them with
// '+'), *n_ops how many IR ops they compute together (the train step's own kernels, which come
// from no op, count one each). Any pointer may be NULL; a NULL model gives zeros. Thread-safe.
// The prepack kernels of infer (dlrt_model_prepack) are not counted: they do not run per call.
DLRT_API void dlrt_model_kernels(const dlrt_model *m, int train_step, uint32_t *n_kernels,
                                 uint32_t *n_fused, uint32_t *n_ops);

// Prepacked weights (artifact format 8): how many kernels of infer pack weights into the GEMM's
// layout (they run in the first infer and in the first after a param may have changed), and the
// bytes of the buffers they fill (*packed_bytes, part of the session's arena; may be NULL). A NULL
// model gives 0. Thread-safe.
DLRT_API uint32_t dlrt_model_prepack(const dlrt_model *m, uint64_t *packed_bytes);

// The memory plan of `m`: *arena_bytes is the size of the one arena a session allocates for
// every buffer (params, optimizer state, inputs, constants and intermediates, the intermediates
// sharing memory by liveness); *buffers_bytes the sum of all buffer sizes, what the session would
// need if no two buffers shared memory (without alignment padding). Either pointer may be NULL;
// a NULL model gives 0 and 0. Thread-safe.
DLRT_API void dlrt_model_memory(const dlrt_model *m, uint64_t *arena_bytes,
                                uint64_t *buffers_bytes);

// ---------------------------------------------------------------------------------------------
// Data loader
//
// P producer threads read, decode and transform samples into a ring of K batch slots allocated
// at creation; the trainer borrows one slot at a time (zero-copy) and gives it back. Samples
// come from an IDX pair (MNIST / Fashion-MNIST, plain or gzip), a .npy pair, or a user callback.
// The whole data set is read into memory at creation; after that nothing is allocated.
//
// Batches form one endless sequence, epoch after epoch (or `epochs` epochs, then an end): batch
// b of epoch e holds the samples perm_e[b*B .. b*B+B) of a seeded pseudo-random permutation
// perm_e (a keyed Feistel network with cycle walking, a fresh key per epoch), and every random
// augmentation of a sample is drawn from a counter-based generator keyed on (seed, epoch, sample
// index). So the bytes of every batch depend on the seed and the options only, never on the
// number of producers or on timing. Producers claim batch numbers in order and fill slot
// (number mod K); dlrt_loader_next hands batches out in number order.
//
// With shards (shard_count W > 1, data-parallel training: one loader per rank, the same seed
// everywhere), shard r's epoch is positions r, r + W, r + 2W, ... of the epoch-wide order,
// ceil(N / W) of them, the last wrapping round to the start (as PyTorch's DistributedSampler);
// batches are then made of the shard's positions as above. With shard_index
// DLRT_LOADER_ALL_SHARDS the loader gives every shard at once: each batch is W chunks of
// batch_size / W rows, chunk r holding shard r's batch (what W loaders of batch_size / W give,
// one per rank); a session of W chunks (dlrt_session_set_chunks) then trains exactly as W
// ranks. batch_size must be a multiple of W and the partial batch dropped.
//
// Every value a file source gives (after scale) must be finite: dlrt_loader_create_* checks the
// samples used and names the first non-finite one; a callback's samples are checked as they are
// made (DLRT_ERR_IO from dlrt_loader_next).
//
// Per sample the producer computes, in this order: raw value * scale (uint8 / int / float
// sources alike; uint8 values first divided by 255 with u8_to_unit), random crop (zero padding
// of crop_pad pixels on each side, then an H x W window at a random offset) and horizontal flip
// (probability 1/2) for [H, W] and [C, H, W] samples, and normalisation (x - mean[c]) / std[c] per
// channel c (the first dim of a [C, H, W] sample; one channel otherwise).

typedef struct dlrt_loader dlrt_loader;

#define DLRT_LOADER_MAX_PRODUCERS 256
#define DLRT_LOADER_MAX_SLOTS     1024
#define DLRT_LOADER_MAX_CHANNELS  16
#define DLRT_LOADER_ALL_SHARDS    (-1) // dlrt_loader_options.shard_index: every shard at once

// What happens to the last batch of an epoch when the sample count is not a multiple of the
// batch size.
typedef enum dlrt_loader_last {
    DLRT_LOADER_DROP_LAST = 0, // leave those samples out of this epoch (they reappear shuffled)
    DLRT_LOADER_PAD_LAST = 1,  // a final batch with n_valid < batch_size; the rest of its x is
                               // 0 and the rest of its labels pad_label
} dlrt_loader_last;

typedef enum dlrt_loader_norm {
    DLRT_LOADER_NORM_NONE = 0,    // no normalisation
    DLRT_LOADER_NORM_GIVEN = 1,   // mean[] / std[] as given (n_norm values)
    DLRT_LOADER_NORM_COMPUTE = 2, // per-channel mean and population std of the scaled data
                                  // (every sample used, whatever the shard), computed once at
                                  // creation (a callback source is called once per sample
                                  // for it); a zero std is taken as 1
} dlrt_loader_norm;

// Options of the dlrt_loader_create_* calls. Initialise with dlrt_loader_options_init, then set
// fields.
typedef struct dlrt_loader_options {
    int64_t batch_size;    // samples per batch B >= 1 (default 32)
    int producers;         // producer threads P, 1..DLRT_LOADER_MAX_PRODUCERS (default 1)
    int slots;             // batch slots K, 1..DLRT_LOADER_MAX_SLOTS (default 4)
    uint64_t seed;         // shuffle and augmentation seed (default 0)
    int shuffle;           // nonzero: a new permutation every epoch (default 1); 0: file order
    dlrt_loader_last last; // partial final batch (default DLRT_LOADER_DROP_LAST)
    int64_t pad_label;     // label of padding rows (default -1)
    int64_t epochs;        // 0 (default): endless; else dlrt_loader_next ends after this many
    float scale;           // raw value multiplier, e.g. 1/255 for uint8 pixels (default 1)
    dlrt_loader_norm norm; // default DLRT_LOADER_NORM_NONE
    int n_norm;            // DLRT_LOADER_NORM_GIVEN: 1 (all channels) or the channel count
    float mean[DLRT_LOADER_MAX_CHANNELS];
    float std[DLRT_LOADER_MAX_CHANNELS]; // each > 0
    int crop_pad;        // > 0: random crop with this zero padding, [H, W] / [C, H, W] samples only
    int hflip;           // nonzero: random horizontal flip, [H, W] / [C, H, W] samples only
    dlrt_dtype labels;   // DLRT_INT64 (default) or DLRT_INT32: the label type of a batch
    int64_t limit;       // > 0: use only the first `limit` samples of the source (default 0: all)
    int64_t n_classes;   // > 0: every label must lie in [0, n_classes): checked at creation for
                         // files (DLRT_ERR_INVALID_ARG naming the first bad sample), as the
                         // samples are made for a callback (DLRT_ERR_IO from dlrt_loader_next)
                         // (default 0: labels unchecked)
    int64_t shard_count; // W >= 1 (default 1): the data is split into W shards (see above)
    int64_t shard_index; // the shard this loader gives, 0..W-1 (default 0): the rank; or
                         // DLRT_LOADER_ALL_SHARDS (W > 1): every shard, as chunks (see above)
    int u8_to_unit;      // nonzero: uint8 sources are pixels, divided by 255 (into [0, 1]) before
                         // scale applies; other element types only get scale (default 0)
    int64_t start_batch; // >= 0 (default 0): the first batch handed out is batch number
                         // start_batch (epoch start_batch / batches_per_epoch): resuming a run,
                         // the same bytes an uninterrupted loader gives at that number; at most
                         // epochs * batches_per_epoch when epochs > 0
} dlrt_loader_options;

// A borrowed batch: x and y point into a slot of the loader's ring and stay valid (and
// unchanged) until the batch is passed to dlrt_loader_release or the loader is destroyed.
typedef struct dlrt_loader_batch {
    const float *x;       // [batch_size, sample dims...] float32, C order; NULL at the end
    const int64_t *y;     // [batch_size] labels when options.labels is DLRT_INT64, else NULL
    const int32_t *y_i32; // [batch_size] labels when options.labels is DLRT_INT32, else NULL
    int64_t n_valid;      // real samples (the first n_valid rows); 0 at the end
    int64_t epoch;        // 0-based
    int64_t index;        // batch index within the epoch
    int64_t seq;          // batch number since creation (epoch * batches_per_epoch + index)
    double wait_ms;       // how long dlrt_loader_next waited for this batch
    int slot_;            // private: the slot this batch occupies
} dlrt_loader_batch;

// Waiting statistics since creation. The first batch is counted apart: it includes the
// producers' start-up, whereas the others measure whether the ring keeps up with the trainer.
typedef struct dlrt_loader_stats {
    int64_t batches;      // batches handed out by dlrt_loader_next
    double first_wait_ms; // how long the first dlrt_loader_next waited
    double mean_wait_ms;  // mean wait of batches 2.. (0 with fewer than two batches)
    double max_wait_ms;   // longest wait of batches 2..
} dlrt_loader_stats;

// Shape and normalisation of a loader's data (mean/std are the values applied, also when
// computed from the data; 0 and 1 without normalisation).
typedef struct dlrt_loader_info {
    int64_t n_samples;         // in the source (after limit)
    int64_t batches_per_epoch; // of this loader's shard
    int32_t sample_rank;       // 1..DLRT_MAX_DIMS - 1
    int64_t sample_dims[DLRT_MAX_DIMS];
    int64_t sample_numel; // floats per sample; a batch's x holds batch_size * sample_numel
    int n_channels;       // normalisation channels: 1 without normalisation, C for computed
                          // normalisation of [C, H, W] samples, n_norm when given
    float mean[DLRT_LOADER_MAX_CHANNELS], std[DLRT_LOADER_MAX_CHANNELS];
    int64_t epoch_samples; // positions of an epoch in this shard (n_samples without shards;
                           // W * ceil(n_samples / W) with DLRT_LOADER_ALL_SHARDS)
} dlrt_loader_info;

// Fills one sample: writes sample_numel floats (before scale and transforms) to x_out and its
// label to *y_out (preset to 0). Called from the producer threads, several at once: it must be
// thread-safe. Returns 0 on success; anything else fails the loader (dlrt_loader_next then
// returns DLRT_ERR_IO naming the sample and the value).
typedef int (*dlrt_loader_sample_fn)(void *user, int64_t index, float *x_out, int64_t *y_out);

// Sets every option to its default (see dlrt_loader_options). Thread-safe.
DLRT_API void dlrt_loader_options_init(dlrt_loader_options *opts);

// A loader over an IDX image file ([N, ...] of any IDX element type, one sample per first-dim
// entry) and an IDX label file ([N], an integer type), e.g. Fashion-MNIST's t10k-images-idx3-ubyte
// and t10k-labels-idx1-ubyte (gzip or plain). `labels_path` may be NULL: no labels (y NULL).
// `opts` NULL: the defaults. Starts the producers. On DLRT_OK *out is owned by the caller
// (dlrt_loader_destroy); on failure *out is NULL and dlrt_last_error() says why: DLRT_ERR_IO
// (a file cannot be read), DLRT_ERR_CORRUPT (a file is not valid IDX), DLRT_ERR_INVALID_ARG
// (bad options, counts that differ, non-integer labels, an epoch without one batch),
// DLRT_ERR_NOMEM. Thread-safe.
DLRT_API dlrt_status dlrt_loader_create_idx(const char *images_path, const char *labels_path,
                                            const dlrt_loader_options *opts, dlrt_loader **out);
// The same over .npy files (version 1-3, C order, little-endian): x of dtype float32, float64,
// uint8, int8, int16, int32 or int64 with shape [N, ...]; y (may be NULL) an integer dtype
// with shape [N]. Errors as for dlrt_loader_create_idx.
DLRT_API dlrt_status dlrt_loader_create_npy(const char *x_path, const char *y_path,
                                            const dlrt_loader_options *opts, dlrt_loader **out);
// The same over a callback: n_samples >= 1 samples of shape sample_dims[0 .. sample_rank)
// (rank 1..DLRT_MAX_DIMS - 1); `user` is passed back to fn and BORROWED until destroy.
// Labels are always present. Errors as above (DLRT_ERR_IO when fn fails while computing the
// normalisation at creation).
DLRT_API dlrt_status dlrt_loader_create_callback(int64_t n_samples, const int64_t *sample_dims,
                                                 int32_t sample_rank, dlrt_loader_sample_fn fn,
                                                 void *user, const dlrt_loader_options *opts,
                                                 dlrt_loader **out);

// ---- Named arrays: any number of inputs of any dtype (dlrt_loader_create_arrays)
//
// A loader over N arrays, each a .npy file [S, ...] (IDX files are read too, by a name that does
// not end in .npy) feeding the model input of its name: data, float regression targets, integer
// labels, masks, several inputs. Every array's leading dim is the sample count S, the same for
// all; row i of every array is sample i, shuffled, batched, sharded and resumed together (the same
// order as dlrt_loader_create_npy's). A batch holds each array converted to its dtype (C order,
// [batch_size, sample dims...]), read with dlrt_loader_batch_array; batch.x is only a non-NULL
// marker there (NULL at the end, as for every loader) and batch.y / y_i32 are NULL. Padding rows
// (DLRT_LOADER_PAD_LAST) are zero in every array. Options that apply: batch_size, producers,
// slots, seed, shuffle, last, epochs, limit, shard_count, shard_index, start_batch; the
// options' scale, norm, crop_pad, hflip, u8_to_unit, labels and n_classes must keep their
// defaults (each array has its own below).

// One array of dlrt_loader_create_arrays. Initialise with dlrt_loader_array_init.
typedef struct dlrt_loader_array {
    const char *name;    // the model input it feeds (named in messages; copied)
    const char *path;    // the file (named in messages; copied)
    dlrt_dtype dtype;    // a batch's element type: DLRT_FLOAT32 (from any .npy dtype), DLRT_INT32
                         // or DLRT_INT64 (from an integer dtype only; int32 values must fit)
    int32_t sample_rank; // > 0: the per-sample shape the input declares, sample_dims[0 ..
                         // sample_rank); the file's per-sample shape must equal it or hold as
                         // many elements (a [S, 784] file for a [28, 28] input); 0: any shape
    int64_t sample_dims[DLRT_MAX_DIMS];
    int64_t n_classes;       // > 0 (integer dtypes): every value must lie in [0, n_classes)
    dlrt_loader_norm norm;   // DLRT_FLOAT32 only: NONE (default), GIVEN (n_norm, mean, std) or
                             // COMPUTE (from this array's samples after limit, every shard)
    int per_channel;         // COMPUTE: nonzero: one mean/std per channel, the first per-sample dim
                             // (C of [C, H, W], F of [F]); 0: one for the whole array
    int n_norm;              // GIVEN: 1 (every element) or the first per-sample dim
    const float *mean, *std; // GIVEN: n_norm values each (std > 0); BORROWED during create
} dlrt_loader_array;

// What a named-array loader applies to array i (dlrt_loader_array_info_get).
typedef struct dlrt_loader_array_info {
    const char *name, *path; // BORROWED: valid while the loader lives
    dlrt_dtype dtype;
    int32_t sample_rank; // the file's per-sample shape
    int64_t sample_dims[DLRT_MAX_DIMS];
    int64_t sample_numel;
    size_t batch_bytes;      // one batch of it: batch_size * sample_numel * element size
    dlrt_loader_norm norm;   // NONE, or GIVEN (also after COMPUTE: the values computed)
    int n_channels;          // 0 without normalisation
    const float *mean, *std; // n_channels values each, BORROWED (NULL without normalisation)
} dlrt_loader_array_info;

// Sets a's fields to their defaults (float32, no shape check, no normalisation). Thread-safe.
DLRT_API void dlrt_loader_array_init(dlrt_loader_array *a);
// A loader over n_arrays >= 1 named arrays (names distinct). Reads every file, checks it (shape
// against sample_dims, dtype convertible, leading dims equal, finite float values, n_classes),
// computes the normalisations and starts the producers. Errors as for dlrt_loader_create_npy;
// messages name the file and the input and say what was expected. `opts` NULL: the defaults.
DLRT_API dlrt_status dlrt_loader_create_arrays(const dlrt_loader_array *arrays, size_t n_arrays,
                                               const dlrt_loader_options *opts, dlrt_loader **out);
// The arrays of a loader: 0 for the IDX / .npy pair and callback loaders. Thread-safe.
DLRT_API size_t dlrt_loader_num_arrays(const dlrt_loader *l);
// Array i's name, file, shape and normalisation into *out. DLRT_ERR_INVALID_ARG for i out of
// range. Thread-safe.
DLRT_API dlrt_status dlrt_loader_array_info_get(const dlrt_loader *l, size_t i,
                                                dlrt_loader_array_info *out);
// Array i of held batch b: *out_data (BORROWED, valid until b is released) and *out_nbytes
// (batch_bytes). DLRT_ERR_INVALID_ARG for i out of range or a batch not held. Thread-safe.
DLRT_API dlrt_status dlrt_loader_batch_array(const dlrt_loader *l, const dlrt_loader_batch *b,
                                             size_t i, const void **out_data, size_t *out_nbytes);

// Borrows the next batch (in batch-number order), waiting until a producer has filled it; the
// wait is recorded in out->wait_ms and the stats. After the last batch of an epoch comes batch 0
// of the next, reshuffled. With options.epochs > 0 and every epoch handed out, returns DLRT_OK
// with out->x NULL and n_valid 0 (and keeps doing so). Errors (out zeroed): DLRT_ERR_INVALID_ARG
// when the slot the next batch needs is still held (K batches held, or batch seq - K not
// released: release before asking), DLRT_ERR_IO when a producer failed (sticky; the message
// names the sample). Call from one thread at a time.
DLRT_API dlrt_status dlrt_loader_next(dlrt_loader *l, dlrt_loader_batch *out);
// Gives a batch's slot back to the producers and clears b->x, y, y_i32. DLRT_ERR_INVALID_ARG
// for a batch that is not currently held (released twice, from another loader, the end marker
// or a copy of an already released batch). Thread-safe.
DLRT_API dlrt_status dlrt_loader_release(dlrt_loader *l, dlrt_loader_batch *b);
// The data-set index of the sample at position `pos` (0 <= pos < epoch_samples) of epoch `epoch`'s
// order (row j of batch b holds position b * batch_size + j), into *out: what a batch holds,
// without producing it. DLRT_ERR_INVALID_ARG for a negative epoch or pos out of range.
// Thread-safe.
DLRT_API dlrt_status dlrt_loader_sample_index(const dlrt_loader *l, int64_t epoch, int64_t pos,
                                              int64_t *out);
// Waiting statistics so far. Thread-safe.
DLRT_API void dlrt_loader_stats_get(dlrt_loader *l, dlrt_loader_stats *out);
// The data's shape, batch count and normalisation. Thread-safe.
DLRT_API void dlrt_loader_info_get(const dlrt_loader *l, dlrt_loader_info *out);
// Stops and joins the producers (a producer finishes the sample it is making first) and frees
// every slot; batches still held become invalid. NULL is a no-op.
DLRT_API void dlrt_loader_destroy(dlrt_loader *l);

// ---------------------------------------------------------------------------------------------
// Training loop (rt_trainloop.c): what every trainer does with a session and a loader — the
// learning-rate schedule, the epochs of train steps with the non-finite guard, and the test
// accuracy — shared by `dlcc train`, samples/train_fmnist.c and the Python binding. It never
// prints: progress reaches the caller through a callback.

typedef enum dlrt_lr_schedule {
    DLRT_LR_CONSTANT = 0,      // lr
    DLRT_LR_STEP = 1,          // lr, x0.1 from 50% of the steps, x0.01 from 75%
    DLRT_LR_COSINE = 2,        // lr/2 (1 + cos(pi t / T))
    DLRT_LR_WARMUP_COSINE = 3, // lr (t+1) / W for the first W steps, then cosine over T - W
    DLRT_LR_ONE_CYCLE = 4,     // PyTorch's OneCycleLR with its defaults, lr its max_lr: cosine
                               // from lr/25 up to lr by step 0.3 T - 1, then cosine down to
                               // lr/25/1e4 at step T - 1
} dlrt_lr_schedule;

// The learning rate of step t (0-based) of `total` from base rate `lr` (warmup: W, used by
// DLRT_LR_WARMUP_COSINE only). Pure; thread-safe.
DLRT_API double dlrt_lr_schedule_at(dlrt_lr_schedule k, double lr, int64_t t, int64_t total,
                                    int64_t warmup);
// "constant", "step", "cosine", "warmup-cosine", "one-cycle"; NULL for a value outside the enum.
DLRT_API const char *dlrt_lr_schedule_name(dlrt_lr_schedule k);
// The schedule named `name` (as above). DLRT_ERR_INVALID_ARG for another name.
DLRT_API dlrt_status dlrt_lr_schedule_parse(const char *name, dlrt_lr_schedule *out);

// The non-finite guard. A step is non-finite when its update was skipped (a non-finite
// gradient) or its loss is not finite; with dynamic loss scaling a skipped step with a finite
// loss whose scale was above 1 and went down is the scaler backing off and does not count.
// Training should stop once N = max non-finite steps form a streak: N in a row, or N with
// fewer than N finite steps between any two (blown-up params alternate non-finite steps with
// huge finite ones; only N finite steps in a row end a streak). Plain data in the caller's storage
// (flags are 0/1 ints, as everywhere in this header).
typedef struct dlrt_nonfinite_guard {
    int64_t max;       // N (0: never stop)
    double scale;      // the loss scale the next step runs with
    int64_t run;       // non-finite steps of the current streak
    int64_t good;      // finite steps in a row since the last non-finite one
    int64_t run_start; // the step (1-based) that began the current streak
    int64_t total;     // non-finite steps so far
    int first;         // set by each step: it was the first non-finite step of the run
    int stop;          // set by each step: the streak reached max
} dlrt_nonfinite_guard;

// Starts a guard; `loss_scale` is the scale the first step runs with (1 without scaling).
DLRT_API void dlrt_nonfinite_guard_init(dlrt_nonfinite_guard *g, int64_t max, double loss_scale);
// Counts step `step` (1-based) that returned `info`; 1 when it was non-finite, else 0.
DLRT_API int dlrt_nonfinite_guard_step(dlrt_nonfinite_guard *g, const dlrt_step_info *info,
                                       int64_t step);

typedef enum dlrt_train_event_kind {
    DLRT_TRAIN_EVENT_BATCH = 0, // a batch is bound and "lr" set; the step has not run yet
    DLRT_TRAIN_EVENT_STEP = 1,  // the step ran (info, nonfinite, guard); the batch is still held
    DLRT_TRAIN_EVENT_EPOCH = 2, // an epoch ended (its totals)
} dlrt_train_event_kind;

// What the callback sees. Pointers are BORROWED for the duration of the call.
typedef struct dlrt_train_event {
    dlrt_train_event_kind kind;
    int64_t epoch;           // 0-based
    int64_t batch;           // 0-based within the epoch (EPOCH: steps_per_epoch)
    int64_t step;            // 0-based over the run (EPOCH: the steps run so far)
    int64_t steps_per_epoch; // full batches per epoch (the partial one is dropped)
    int64_t total_steps;     // steps_per_epoch * epochs
    int64_t batch_size;
    double lr;                     // BATCH, STEP: this step's learning rate
    const dlrt_loader_batch *data; // BATCH, STEP: the batch (held by the loop)
    dlrt_step_info info;           // STEP
    double loss_scale_used;        // STEP: the loss scale the step ran with
    int nonfinite;                 // STEP: the guard counted it (see guard->first, ->stop)
    const dlrt_nonfinite_guard *guard;
    double loss_sum; // STEP, EPOCH: the epoch's losses so far
    int64_t skipped; // STEP, EPOCH: the epoch's skipped updates so far
    double wait_ms;  // STEP, EPOCH: the epoch's waits for data so far
    double epoch_s;  // seconds since the epoch began
    double run_s;    // seconds since the run began
} dlrt_train_event;

// Called for every event; a non-zero return stops the run (dlrt_train_run then returns DLRT_OK
// with out->stopped set). The batch of a STEP event is released after the call returns.
typedef int (*dlrt_train_callback)(void *user, const dlrt_train_event *ev);

typedef struct dlrt_train_options {
    const char *data_input;       // the model's float data input, bound to each batch's x
    const char *label_input;      // its label input, bound to the batch's y or y_i32
                                  // (a named-array loader binds each array to the input of its
                                  // name instead: both may be NULL)
    int64_t epochs;               // default 1; the loader must hand out at least that many
    dlrt_lr_schedule schedule;    // default DLRT_LR_CONSTANT
    double lr;                    // base rate; NaN (the default): the session's "lr"
    int64_t warmup;               // DLRT_LR_WARMUP_COSINE's W; -1 (default): 5% of the steps
    int64_t max_skipped;          // the guard's N (default 10; 0: never stop)
    dlrt_train_callback callback; // may be NULL
    void *user;
    // Resuming (default 0 / NULL: a fresh run). The run begins at step start_step (0-based, at
    // most the run's total steps), which the loader's next batch must be (its start_batch);
    // start_loss_sum / start_skipped are what that step's epoch had before it (its epoch line
    // counts them), start_guard the guard as it was after step start_step - 1 (its scale is
    // the session's). What the STEP / EPOCH events of the interrupted run said: see
    // dlrt_train_event.
    int64_t start_step;
    double start_loss_sum;
    int64_t start_skipped;
    const dlrt_nonfinite_guard *start_guard;
} dlrt_train_options;

typedef struct dlrt_train_result {
    int64_t steps;     // steps run
    int64_t nonfinite; // of them non-finite
    int diverged;      // the guard stopped the run (after that step's STEP event)
    int stopped;       // the callback stopped it
    double base_lr;    // the base rate used
} dlrt_train_result;

DLRT_API void dlrt_train_options_init(dlrt_train_options *o);
// The run's step count (*out_total) and warm-up steps (*out_warmup, 0 unless warmup-cosine)
// for a loader of `steps_per_epoch` batches. DLRT_ERR_INVALID_ARG when steps_per_epoch < 1 or
// epochs < 1, or warm-up would take every step (then *out_total and *out_warmup say how many).
DLRT_API dlrt_status dlrt_train_plan(const dlrt_train_options *o, int64_t steps_per_epoch,
                                     int64_t *out_total, int64_t *out_warmup);
// Runs o->epochs epochs of the loader's batches through dlrt_session_train_step: each batch is
// bound in place (zero-copy) as the inputs and "lr" set from the schedule before its step; the
// guard watches every step. Errors (a loader, bind, hparam or step failure; bad options) return
// the failing call's status with dlrt_last_error() set; out is filled as far as the run got.
// Afterwards the two inputs stay bound to the loader's memory (valid while the loader lives):
// bind or set them again before another infer or step. Not thread-safe with other calls on the
// same session or loader.
DLRT_API dlrt_status dlrt_train_run(dlrt_session *s, dlrt_loader *train,
                                    const dlrt_train_options *o, dlrt_train_result *out);
// Test accuracy with the infer entry point over every batch the loader has left (one epoch of
// a DLRT_LOADER_PAD_LAST loader: padding rows are not counted): argmax over the C columns of
// the float [batch, C] output `scores_output` against the labels. *out_correct of *out_total.
// The inputs stay bound to the loader's memory, as after dlrt_train_run.
DLRT_API dlrt_status dlrt_evaluate_accuracy(dlrt_session *s, dlrt_loader *test,
                                            const char *data_input, const char *label_input,
                                            const char *scores_output, int64_t *out_correct,
                                            int64_t *out_total);

// What dlrt_evaluate measured.
typedef struct dlrt_eval_result {
    int64_t correct, total; // with a scores output: argmax hits among the real rows
    double loss;            // with a loss output: the mean of its value over the full batches,
                            // each weighted by its rows (NaN when there is none)
    int64_t loss_samples;   // the rows those batches hold (a padded batch's loss counts its
                            // padding rows too, so it is left out of the loss)
} dlrt_eval_result;
// dlrt_evaluate_accuracy, and the mean of the scalar float output `loss_output` (may be NULL:
// none; `scores_output` may be NULL too). With a named-array loader every array is bound to the
// input of its name, data_input is unused and label_input names the integer [batch] array the
// scores are compared with (needed only with scores_output). Same errors; DLRT_ERR_INVALID_ARG when
// loss_output is no float scalar output.
DLRT_API dlrt_status dlrt_evaluate(dlrt_session *s, dlrt_loader *test, const char *data_input,
                                   const char *label_input, const char *scores_output,
                                   const char *loss_output, dlrt_eval_result *out);

#ifdef __cplusplus
}
#endif
#endif
