// runtime/rt_internal.h — the runtime's private structures: a loaded model (the dlopen handle
// and the validated plan) and a session (one arena holding every buffer, the resolved kernel
// argument arrays).
#ifndef RT_INTERNAL_H
#define RT_INTERNAL_H

#include "dlrt.h"
#include "dlrt_format.h"

#include <stdatomic.h>
#include <stdbool.h>

struct dlrt_model {
    atomic_int refs;
    void *handle; // dlopen handle; closed when the last reference goes
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
    size_t n_inputs, n_outputs, n_params;
    size_t first_input, first_output, first_param; // tensor index ranges by role
};

struct dlrt_session {
    dlrt_model *model; // retained
    uint8_t *arena;    // OWNED: every buffer, 64-byte aligned
    size_t arena_size;
    void **buf_ptr;  // OWNED: buffer id -> address in the arena
    void **kargs;    // OWNED: all kernel argument arrays, back to back (plan.args order)
    int debug_split; // DLRT_DEBUG_SPLIT=K: run every kernel as K uneven chunks, last first
};

// Sets the thread's last error message (printf-style) and returns `st`.
dlrt_status rt__fail(dlrt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t rt__dtype_size(uint32_t dtype);

#endif
