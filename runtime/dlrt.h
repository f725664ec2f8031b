// runtime/dlrt.h — the dlcc runtime (libdlrt): loads compiled artifacts and runs them. It links
// neither LLVM nor the compiler's IR; trainers include only this header.
//
// Lifecycle: load a model (file or memory), create a session (params initialised), set inputs,
// run infer (or train_step), read outputs. Errors are returned as dlrt_status, never printed; the
// message is available from dlrt_last_error().
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

// Describes a named tensor of a model. `name` is BORROWED from the model and lives as long as it.
typedef struct dlrt_tensor_desc {
    const char *name;
    dlrt_dtype dtype;
    int32_t rank;
    int64_t dims[DLRT_MAX_DIMS];
    size_t nbytes; // element count * element size
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
// Interface tensors, in declaration order. Index out of range gives DLRT_ERR_INVALID_ARG.
DLRT_API size_t dlrt_model_num_inputs(const dlrt_model *m);
DLRT_API size_t dlrt_model_num_outputs(const dlrt_model *m);
DLRT_API size_t dlrt_model_num_params(const dlrt_model *m);
DLRT_API dlrt_status dlrt_model_input(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
DLRT_API dlrt_status dlrt_model_output(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);
DLRT_API dlrt_status dlrt_model_param(const dlrt_model *m, size_t i, dlrt_tensor_desc *out);

// Creates a session: allocates its memory and initialises every param from the artifact's
// initialisers (deterministic: the same values on every machine and run). Retains `m`.
// Thread-safe with respect to other sessions of the same model.
DLRT_API dlrt_status dlrt_session_create(dlrt_model *m, dlrt_session **out);
DLRT_API void dlrt_session_destroy(dlrt_session *s); // NULL is a no-op; releases the model

// Copies `size` bytes (exactly the input's nbytes) into input `name`.
DLRT_API dlrt_status dlrt_session_set_input(dlrt_session *s, const char *name, const void *data,
                                            size_t size);
// Runs the `infer` entry point on the current inputs and params.
DLRT_API dlrt_status dlrt_session_infer(dlrt_session *s);
// Gives a BORROWED pointer to output `name` (valid until the next step or destroy) and, when
// `desc` is non-NULL, its description.
DLRT_API dlrt_status dlrt_session_output(dlrt_session *s, const char *name, const void **data,
                                         dlrt_tensor_desc *desc);
// Reads / writes param `name` (exactly nbytes).
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
// loss scale with loss scaling, as PyTorch's .grad before GradScaler.unscale_).
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
// the model has no train step.
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
// current values; an unknown tensor name is an error. On error the session is unchanged.
DLRT_API dlrt_status dlrt_session_save(dlrt_session *s, const char *path);
DLRT_API dlrt_status dlrt_session_load(dlrt_session *s, const char *path);

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
                 // $DLRT_THREADS if set, else the number of cores this process may run on
    const char *profile_path; // non-NULL: profile from creation on and write the Chrome trace
                              // here at dlrt_session_destroy (NULL, the default: $DLRT_PROFILE
                              // if set, else no profiling). Copied.
    const char *source_name;  // the .dlg file name the profiler shows with line numbers
                              // (NULL, the default: the model's name). Copied.
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
// kernel chunk named "OP NODE" (e.g. "MatMul h1") with args {op, node, source, line, kernel,
// begin, end, range}, and one "step" event per step on worker 0's row. DLRT_ERR_INVALID_ARG
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
// Memory

// The memory plan of `m`: *arena_bytes is the size of the one arena a session allocates for
// every buffer (params, optimizer state, inputs, constants and intermediates, the intermediates
// sharing memory by liveness); *buffers_bytes the sum of all buffer sizes, what the session would
// need if no two buffers shared memory (without alignment padding). Either pointer may be NULL;
// a NULL model gives 0 and 0. Thread-safe.
DLRT_API void dlrt_model_memory(const dlrt_model *m, uint64_t *arena_bytes,
                                uint64_t *buffers_bytes);

#ifdef __cplusplus
}
#endif
#endif
