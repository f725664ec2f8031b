// runtime/rt_internal.h — the runtime's private structures: a loaded model (the dlopen handle
// and the validated plan) and a session (its device, one arena of device memory holding every
// buffer, the resolved kernel argument arrays).
#ifndef RT_INTERNAL_H
#define RT_INTERNAL_H

#include "dl_base.h"
#include "dlrt.h"
#include "dlrt_format.h"
#include "rt_device.h"

#include <stdatomic.h>
#include <stdbool.h>

struct dlrt_model {
    atomic_int refs;
    void *handle; // dlopen handle; closed when the last reference goes
    int memfd;    // loaded from memory: the fd number its dlopen name used, held (on /dev/null)
                  // until the model is released so no other artifact gets the name (0: none)
    const dlrt_artifact_desc *desc;
    const uint8_t *plan; // inside the loaded object
    const dlrt_plan_hdr *hdr;
    const dlrt_plan_buffer *buffers;
    const dlrt_plan_tensor *tensors;
    const dlrt_plan_kernel *kernels;
    const uint32_t *args;
    const uint32_t *entry_kernels;
    const char *strings;
    const uint8_t *data;
    char *name, *target; // NUL-terminated copies (OWNED)
    char **tensor_names; // NUL-terminated copies per tensor (OWNED)
    size_t n_inputs, n_outputs, n_params, n_states;
    size_t first_input, first_output, first_param, first_state; // tensor index ranges by role
    const dlrt_plan_hparam *hparams;                            // n = hdr->n_hparams
    const dlrt_plan_grad *grads;                                // n = hdr->n_grads (format 6)
    char **hparam_names;                                        // NUL-terminated copies (OWNED)
    uint32_t n_prepack; // format 8: kernels flagged DLRT_KERNEL_F_PREPACK (all in the infer entry)
};

struct dlrt_session {
    dlrt_model *model; // retained
    rt_device dev;     // the device the model's code runs on (dev.ops NULL until chosen)
    bool dev_open;     // dev.ops->open was called (close is due)
    uint8_t *arena;    // OWNED (device memory, from dev.ops->dev_alloc): every buffer, 64-byte
                       // aligned; the host may dereference it only with RT_DEVCAP_HOST_MEMORY
    size_t arena_size;
    void **buf_ptr;  // OWNED: buffer id -> device address (in the arena, or bound caller memory)
    void **kargs;    // OWNED: all kernel argument arrays, back to back (plan.args order)
    int debug_split; // DLRT_DEBUG_SPLIT=K: run every kernel as K uneven chunks, last first
    // Threads and profiling (rt_exec.c, rt_profile.c)
    int n_threads;        // workers including the calling thread (>= 1)
    struct rt_exec *exec; // OWNED: the pool and per-entry schedules (rt_exec.c)
    struct rt_prof *prof; // OWNED: NULL while profiling is off (rt_profile.c)
    char *prof_path;      // OWNED: trace written at destroy (options / DLRT_PROFILE), or NULL
    char *source_name;    // OWNED: the .dlg name printed with kernel lines (never NULL once made)
    uint8_t *input_given; // OWNED: per input (model order), 1 once set or bound; NULL until the
                          // first set / bind (rt_session.c's input functions)
    struct rt_dp *dp;     // OWNED: the data-parallel state while a communicator is bound
                          // (rt_dp.c), else NULL
    // Format 8: the PACKED buffers may no longer match the params (true at creation). The
    // contract: whatever writes the bytes of a PARAM buffer, or may have, sets it first
    // (dlrt_session_set_param, checkpoint loads, every train step, the data-parallel broadcast);
    // the CPU executor's infer then runs the entry's DLRT_KERNEL_F_PREPACK kernels and clears it,
    // and any infer while it is clear runs the entry without them (rt__run_entry). A path that
    // changes a param without setting it makes infer compute with the old weights, silently.
    bool packed_stale;
};

// The largest kernel range a plan may give (a kernel's outer dimension; far above any tensor).
#define RT_MAX_RANGE (INT64_C(1) << 48)

// Makes a model of the plan [plan, plan + size) for a kernel table of n_fns entries (fns: their
// addresses, or NULL when there is no code: the plan fuzzer) after validating all of it
// (rt_model.c). The model borrows `plan`; handle and desc are left NULL for the caller to set. On
// failure *out is NULL and the last error says why (DLRT_ERR_CORRUPT, _UNSUPPORTED or _NOMEM).
dlrt_status rt__model_from_plan(const uint8_t *plan, uint64_t size, uint32_t n_fns,
                                const dlrt_kernel_fn *fns, dlrt_model **out)
    __attribute__((warn_unused_result));
// The session arena (rt_arena.c): `size` bytes, 64-byte aligned, zeroed and committed (every
// page backed by memory now, so a memory limit is hit at session creation, not during a step).
// DLRT_ERR_NOMEM with a message naming the size (and a memory cgroup's limit when that is what
// does not leave room). rt__arena_free accepts NULL.
dlrt_status rt__arena_alloc(size_t size, uint8_t **out) __attribute__((warn_unused_result));
void rt__arena_free(uint8_t *p, size_t size);

// Device-neutral access to whole buffers of a session (rt_session.c): buffer `b`'s bytes to host
// memory `dst`, or host `src` into it (through the device's copies; exactly the buffer's size).
dlrt_status rt__buf_read(dlrt_session *s, uint32_t b, void *dst)
    __attribute__((warn_unused_result));
dlrt_status rt__buf_write(dlrt_session *s, uint32_t b, const void *src)
    __attribute__((warn_unused_result));
// Runs entry point `entry` on the session's device and waits for it (rt_session.c).
dlrt_status rt__session_run(dlrt_session *s, int entry) __attribute__((warn_unused_result));

// Sets the thread's last error message (printf-style) and returns `st`.
dlrt_status rt__fail(dlrt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t rt__dtype_size(uint32_t dtype);
// The CPU device's executor (rt_exec.c). Runs entry point `entry` (DLRT_ENTRY_*): sequentially
// with one thread, else on the pool by dependency counting; the infer entry of a plan with
// prepack kernels without them unless s->packed_stale (which it clears). Allocates nothing.
void rt__run_entry(dlrt_session *s, int entry);
// The executor's schedules: one per entry point (DLRT_ENTRY_*), then the train step's two phases
// around its all-reduce point (the plan's comm_at; empty when the plan has none), then the infer
// entry without its prepack kernels (format 8; empty when the plan has none: see packed_stale).
enum {
    RT_SCHED_TRAIN_A = DLRT_ENTRY_COUNT,
    RT_SCHED_TRAIN_B,
    RT_SCHED_INFER_PACKED,
    RT_SCHED_COUNT
};
// Runs schedule `sched` (RT_SCHED_*) like rt__run_entry, without a profiler step event.
void rt__run_sched(dlrt_session *s, int sched);
// The kernels of schedule `sched`, and a hook called once per step when its kernel i (0-based in
// the schedule) has finished, from the thread that finished it, with no lock held (NULL: none).
uint32_t rt__sched_size(const dlrt_session *s, int sched);
void rt__exec_set_done_hook(dlrt_session *s, int sched, void (*done)(void *u, uint32_t i), void *u);
// Builds the per-entry schedules and starts n_threads - 1 workers (rt_exec.c).
dlrt_status rt__exec_create(dlrt_session *s, int n_threads, bool is_ftz);
void rt__exec_destroy(dlrt_session *s); // joins the workers; NULL exec is a no-op
// Profiler hooks (rt_profile.c). rt__now_ns is CLOCK_MONOTONIC in nanoseconds; the others are
// called only while s->prof is non-NULL, from worker `w` (0 = the calling thread).
int64_t rt__now_ns(void);
void rt__prof_chunk(dlrt_session *s, int w, uint32_t kernel, int64_t begin, int64_t end, int64_t t0,
                    int64_t t1);
void rt__prof_step(dlrt_session *s, int entry, int64_t t0, int64_t t1);
void rt__prof_destroy(dlrt_session *s); // frees s->prof (NULL is a no-op)
// DLRT_ERR_INVALID_ARG naming the first input that entry point `entry` (DLRT_ENTRY_*) reads but
// that was never set or bound since the session was created; `what` prefixes the message
// (rt_session.c).
dlrt_status rt__check_inputs(dlrt_session *s, int entry, const char *what);
// Resets STATE buffer `b` to its initial contents (plan data or zeros) (rt_session.c).
dlrt_status rt__state_reset(dlrt_session *s, uint32_t b) __attribute__((warn_unused_result));
// The tensor named `name` among params and optimizer state (-1 if none) (rt_session.c).
long rt__find_param_or_state(const dlrt_model *m, const char *name);

// The communicator (rt_comm.c) as data-parallel sessions use it (rt_dp.c).
typedef struct rt_comm_piece {
    float *data;
    size_t n; // floats
} rt_comm_piece;
// Queues an all-reduce (as dlrt_comm_allreduce_start) of stage[0, n); with pieces, the
// communicator's thread first gathers pieces[0, n_pieces) (n floats in all) into stage and
// afterwards scatters the result back to them. pieces and stage stay the caller's until the
// wait. *out_ms (if non-NULL) receives the operation's time. The scratch must have been
// reserved for n floats (rt__comm_reserve). Thread-safe.
dlrt_status rt__comm_allreduce_pieces(dlrt_comm *c, float *stage, size_t n, float scale,
                                      const rt_comm_piece *pieces, size_t n_pieces, double *out_ms,
                                      uint64_t *out_ticket) __attribute__((warn_unused_result));
// Makes the communicator's all-reduce scratch hold n floats (waits for queued operations).
dlrt_status rt__comm_reserve(dlrt_comm *c, size_t n) __attribute__((warn_unused_result));
// Blocking all-gather of `size` bytes per rank into all[size * ranks].
dlrt_status rt__comm_allgather(dlrt_comm *c, const void *mine, void *all, size_t size)
    __attribute__((warn_unused_result));

// Data-parallel sessions (rt_dp.c): the train step of a session with s->dp, and freeing s->dp
// (NULL is a no-op; before the executor is destroyed).
dlrt_status rt__dp_train_step(dlrt_session *s) __attribute__((warn_unused_result));
void rt__dp_destroy(dlrt_session *s);
// Records how input `input` (model order) was given to a session of chunks: bound with every
// chunk's batch (is_chunked), or not; a no-op for other sessions.
void rt__dp_input_bound(dlrt_session *s, size_t input, bool is_chunked);
// Points input buffer `b` at `p` (the arena or caller memory): the buffer table and every
// kernel argument that names it (rt_session.c).
void rt__session_point_input(dlrt_session *s, uint32_t b, void *p);

// THE mapping of a base status (dl_status, from base/'s readers and the cache) to the runtime's
// public status; every runtime file converts through it. Parse and integrity failures of
// untrusted input are DLRT_ERR_CORRUPT; what the runtime cannot do is DLRT_ERR_UNSUPPORTED.
static inline dlrt_status rt__status_from_dl(dl_status st) {
    switch (st) {
    case DL_OK:
        return DLRT_OK;
    case DL_ERR_NOMEM:
        return DLRT_ERR_NOMEM;
    case DL_ERR_IO:
        return DLRT_ERR_IO;
    case DL_ERR_UNSUPPORTED:
        return DLRT_ERR_UNSUPPORTED;
    case DL_ERR_PARSE:
    case DL_ERR_CORRUPT:
        return DLRT_ERR_CORRUPT;
    case DL_ERR_INVALID_ARG:
    case DL_ERR_SHAPE:
    case DL_ERR_BACKEND:
    case DL_ERR_CACHE:
        break;
    }
    return DLRT_ERR_INVALID_ARG;
}

#endif
