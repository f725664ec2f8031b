// runtime/rt_session.c — sessions: the device the model was compiled for (rt_device.h), one
// 64-byte aligned arena of its memory holding every buffer of the plan (inputs, params,
// constants, intermediates), params initialised from the plan's recipes, and the kernel argument
// arrays resolved once at creation, so a step is only kernel launches. Every access to buffer
// bytes goes through the device (copies), except where the device has host memory
// (RT_DEVCAP_HOST_MEMORY: borrowed outputs, zero-copy input binding, params initialised in
// place). The CPU device's executor (threads, schedules) lives in rt_exec.c, the profiler in
// rt_profile.c.
//
// Param initialisation reproduces the compiler's reference evaluator bit for bit: element i of
// a seeded param is computed in double from dl_rng (base/) and rounded once to its dtype.
#include "dl_base.h"
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

const rt_device_ops *rt__device_ops_for(uint32_t kind) {
    switch (kind) {
    case DLRT_PLAN_DEVICE_CPU:
        return &rt__device_cpu;
    case DLRT_PLAN_DEVICE_CUDA:
        return &rt__device_cuda;
    default:
        return NULL;
    }
}

const char *dlrt_device_name(dlrt_device_kind kind) {
    switch (kind) {
    case DLRT_DEVICE_CPU:
        return "cpu";
    case DLRT_DEVICE_CUDA:
        return "cuda";
    }
    return "unknown";
}

dlrt_device_kind dlrt_session_device(const dlrt_session *s) {
    return s ? s->dev.ops->kind : DLRT_DEVICE_CPU;
}

static bool host_memory(const dlrt_session *s) {
    return (s->dev.ops->caps & RT_DEVCAP_HOST_MEMORY) != 0;
}

dlrt_status rt__buf_read(dlrt_session *s, uint32_t b, void *dst) {
    return s->dev.ops->copy_out(&s->dev, dst, s->buf_ptr[b], (size_t)s->model->buffers[b].size);
}

dlrt_status rt__buf_write(dlrt_session *s, uint32_t b, const void *src) {
    return s->dev.ops->copy_in(&s->dev, s->buf_ptr[b], src, (size_t)s->model->buffers[b].size);
}

dlrt_status rt__session_run(dlrt_session *s, int entry) {
    dlrt_status st = s->dev.ops->run(&s->dev, entry);
    if (st == DLRT_OK && (s->dev.ops->caps & RT_DEVCAP_ASYNC)) {
        st = s->dev.ops->sync(&s->dev);
    }
    return st;
}

static size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

static void store_elem(void *buf, uint32_t dtype, uint64_t i, double v) {
    dl_tensor t = {(dl_dtype)dtype, 1, {(int64_t)i + 1}, buf};
    dl_tensor_set(&t, (int64_t)i, v);
}

static void init_param(const dlrt_model *m, const dlrt_plan_tensor *t, uint8_t *dst) {
    uint64_t size = m->buffers[t->buffer].size;
    size_t es = rt__dtype_size(t->dtype);
    uint64_t n = es ? size / es : 0;
    switch (t->init) {
    case DLRT_INIT_DATA:
        memcpy(dst, m->data + t->data_off, (size_t)size);
        return;
    case DLRT_INIT_FILL:
        for (uint64_t i = 0; i < n; i++) {
            store_elem(dst, t->dtype, i, t->a);
        }
        return;
    case DLRT_INIT_UNIFORM:
        for (uint64_t i = 0; i < n; i++) {
            store_elem(dst, t->dtype, i, t->a + (t->b - t->a) * dl_rng_uniform(t->seed, i));
        }
        return;
    case DLRT_INIT_NORMAL:
        for (uint64_t i = 0; i < n; i++) {
            store_elem(dst, t->dtype, i, t->a + t->b * dl_rng_normal(t->seed, i));
        }
        return;
    default:
        return; // validated on load
    }
}

// Initialises a param in the session's memory: in place on a device with host memory, else in a
// host staging buffer copied in.
static dlrt_status session_init_param(dlrt_session *s, const dlrt_plan_tensor *t) {
    const dlrt_model *m = s->model;
    if (host_memory(s)) {
        init_param(m, t, s->buf_ptr[t->buffer]);
        return DLRT_OK;
    }
    size_t size = (size_t)m->buffers[t->buffer].size;
    uint8_t *stage = dl_mem_alloc(size ? size : 1);
    if (!stage) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    init_param(m, t, stage);
    dlrt_status st = rt__buf_write(s, t->buffer, stage);
    free(stage);
    return st;
}

void dlrt_session_options_init(dlrt_session_options *opts) {
    if (opts) {
        memset(opts, 0, sizeof *opts);
    }
}

dlrt_status dlrt_session_create(dlrt_model *m, dlrt_session **out) {
    return dlrt_session_create_ex(m, NULL, out);
}

static char *str_dup(const char *p) {
    size_t n = strlen(p) + 1;
    char *d = dl_mem_alloc(n);
    return d ? memcpy(d, p, n) : NULL;
}

// The device's execution state (CPU: threads) and profiling, once the buffers exist (the
// session is complete but for these).
static dlrt_status session_exec_init(dlrt_session *s, const dlrt_session_options *opts) {
    s->dev_open = true;
    dlrt_status st = s->dev.ops->open(&s->dev, opts);
    if (st != DLRT_OK) {
        return st;
    }
    const char *src = opts && opts->source_name ? opts->source_name : s->model->name;
    const char *path = opts && opts->profile_path ? opts->profile_path : getenv("DLRT_PROFILE");
    s->source_name = str_dup(src);
    s->prof_path = path && *path ? str_dup(path) : NULL;
    if (!s->source_name || (path && *path && !s->prof_path)) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    return s->prof_path ? dlrt_session_profile_begin(s) : DLRT_OK;
}

dlrt_status dlrt_session_create_ex(dlrt_model *m, const dlrt_session_options *opts,
                                   dlrt_session **out) {
    if (!m || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_create: NULL argument");
    }
    *out = NULL;
    const dlrt_plan_hdr *h = m->hdr;
    const rt_device_ops *dev = rt__device_ops_for(h->device);
    if (!dev) {
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "model '%s' was compiled for %s (a %s device); this libdlrt has no %s "
                        "device: recompile it for the CPU (dlcc compile --target)",
                        m->name, m->target, dlrt_device_name((dlrt_device_kind)h->device),
                        dlrt_device_name((dlrt_device_kind)h->device));
    }
    dlrt_session *s = dl_mem_calloc(1, sizeof *s);
    if (!s) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    s->dev.ops = dev;
    s->dev.s = s;
    s->packed_stale = true; // nothing is packed yet: the first infer runs the prepack kernels
    dlrt_model_retain(m);   // released by dlrt_session_destroy, also on the failures below
    s->model = m;
    s->buf_ptr = dl_mem_calloc(h->n_buffers ? h->n_buffers : 1, sizeof(void *));
    s->kargs = dl_mem_calloc(h->n_args ? h->n_args : 1, sizeof(void *));
    if (!s->buf_ptr || !s->kargs) {
        dlrt_session_destroy(s);
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    // The arena: the plan's memory plan (format 3) gives its size and every buffer's offset
    // (validated on load: inside the arena, aligned, exclusive kinds overlapping nothing).
    // The device commits every page now (the CPU: rt_arena.c), so a memory limit is hit here,
    // with a message, not by an OOM kill in the middle of a step.
    size_t total = (size_t)h->arena_size;
    s->arena_size = total ? align_up(total, DLRT_BUFFER_ALIGN) : DLRT_BUFFER_ALIGN;
    void *arena = NULL;
    dlrt_status ast = dev->dev_alloc(&s->dev, s->arena_size, &arena);
    s->arena = arena;
    if (ast != DLRT_OK) {
        dlrt_session_destroy(s);
        return ast;
    }
    // A testing aid: DLRT_DEBUG_POISON=1 fills intermediates with 0xff bytes (NaN, -1) instead of
    // zeros, so a kernel relying on fresh memory being zero (wrong once buffers share memory)
    // shows up in results.
    const char *poison = getenv("DLRT_DEBUG_POISON");
    bool is_poison = poison && poison[0] && strcmp(poison, "0") != 0;
    dlrt_status ist = DLRT_OK;
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        s->buf_ptr[i] = s->arena + m->buffers[i].offset;
        if (is_poison && m->buffers[i].kind == DLRT_BUF_TEMP && ist == DLRT_OK) {
            ist = dev->fill(&s->dev, s->buf_ptr[i], 0xff, (size_t)m->buffers[i].size);
        }
    }
    for (uint32_t i = 0; i < h->n_buffers && ist == DLRT_OK; i++) {
        const dlrt_plan_buffer *b = &m->buffers[i];
        if (b->kind == DLRT_BUF_CONST || (b->flags & DLRT_BUF_F_INIT_DATA)) {
            ist = rt__buf_write(s, i, m->data + b->data_off);
        }
    }
    for (uint32_t i = 0; i < h->n_args; i++) {
        s->kargs[i] = s->buf_ptr[m->args[i]];
    }
    for (size_t i = 0; i < m->n_params && ist == DLRT_OK; i++) {
        ist = session_init_param(s, &m->tensors[m->first_param + i]);
    }
    if (ist != DLRT_OK) {
        dlrt_session_destroy(s);
        return ist;
    }
    // A testing aid: any partition of a kernel's range must give the same bytes (the contract of
    // the kernel ABI that the threaded executor relies on); DLRT_DEBUG_SPLIT=K exercises it.
    const char *split = getenv("DLRT_DEBUG_SPLIT");
    s->debug_split = split ? atoi(split) : 0;
    dlrt_status est = session_exec_init(s, opts);
    if (est != DLRT_OK) {
        dlrt_session_destroy(s);
        return est;
    }
    *out = s;
    return DLRT_OK;
}

int dlrt_session_threads(const dlrt_session *s) {
    return s ? s->n_threads : 0;
}

void dlrt_session_destroy(dlrt_session *s) {
    if (!s) {
        return;
    }
    rt__dp_destroy(s);
    if (s->dev_open) {
        s->dev.ops->close(&s->dev); // the CPU: joins the workers first
    }
    if (s->prof && s->prof_path) {
        // DLRT_PROFILE / options.profile_path: nothing can report an error here (destroy is
        // void); callers who need one write explicitly with dlrt_session_profile_write.
        (void)dlrt_session_profile_write(s, s->prof_path);
    }
    rt__prof_destroy(s);
    free(s->prof_path);
    free(s->source_name);
    if (s->arena) {
        s->dev.ops->dev_free(&s->dev, s->arena, s->arena_size);
    }
    if (s->dev.ops->release) {
        s->dev.ops->release(&s->dev);
    }
    free(s->buf_ptr);
    free(s->kargs);
    free(s->input_given);
    dlrt_model_release(s->model);
    free(s);
}

// Finds the tensor named `name` among [first, first + n); -1 if none.
static long find_tensor(const dlrt_model *m, size_t first, size_t n, const char *name) {
    for (size_t i = first; i < first + n; i++) {
        if (strcmp(m->tensor_names[i], name) == 0) {
            return (long)i;
        }
    }
    return -1;
}

long rt__find_param_or_state(const dlrt_model *m, const char *name) {
    return find_tensor(m, m->first_param, m->n_params + m->n_states, name);
}

dlrt_status rt__state_reset(dlrt_session *s, uint32_t b) {
    const dlrt_plan_buffer *pb = &s->model->buffers[b];
    if (pb->flags & DLRT_BUF_F_INIT_DATA) {
        return rt__buf_write(s, b, s->model->data + pb->data_off);
    }
    return s->dev.ops->fill(&s->dev, s->buf_ptr[b], 0, (size_t)pb->size);
}

void rt__session_point_input(dlrt_session *s, uint32_t b, void *p) {
    if (s->buf_ptr[b] == p) {
        return;
    }
    s->buf_ptr[b] = p;
    const dlrt_model *m = s->model;
    for (uint32_t i = 0; i < m->hdr->n_args; i++) {
        if (m->args[i] == b) {
            s->kargs[i] = p;
        }
    }
}

static dlrt_status lookup(dlrt_session *s, const char *name, int role, size_t size, bool check_size,
                          const dlrt_plan_tensor **out) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "session is NULL");
    }
    const dlrt_model *m = s->model;
    size_t first = role == DLRT_ROLE_INPUT    ? m->first_input
                   : role == DLRT_ROLE_OUTPUT ? m->first_output
                                              : m->first_param;
    // Params and optimizer state ("PARAM.SLOT") share get_param / set_param.
    size_t n = role == DLRT_ROLE_INPUT    ? m->n_inputs
               : role == DLRT_ROLE_OUTPUT ? m->n_outputs
                                          : m->n_params + m->n_states;
    const char *what = role == DLRT_ROLE_INPUT    ? "input"
                       : role == DLRT_ROLE_OUTPUT ? "output"
                                                  : "param";
    if (!name) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "%s name is NULL", what);
    }
    long t = find_tensor(m, first, n, name);
    if (t < 0) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "model '%s' has no %s named '%s'", m->name, what,
                        name);
    }
    const dlrt_plan_tensor *pt = &m->tensors[t];
    uint64_t want = m->buffers[pt->buffer].size;
    if (check_size && size != want) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "%s '%s' has %llu bytes, got %zu", what, name,
                        (unsigned long long)want, size);
    }
    *out = pt;
    return DLRT_OK;
}

// Records that input tensor `t` was given (set or bound). The flags are made at the first call
// (not at creation): DLRT_ERR_NOMEM then, and nothing is changed.
static dlrt_status mark_given(dlrt_session *s, const dlrt_plan_tensor *t) {
    const dlrt_model *m = s->model;
    if (!s->input_given) {
        s->input_given = dl_mem_calloc(m->n_inputs ? m->n_inputs : 1, 1);
        if (!s->input_given) {
            return rt__fail(DLRT_ERR_NOMEM, "out of memory");
        }
    }
    s->input_given[(size_t)(t - m->tensors) - m->first_input] = 1;
    return DLRT_OK;
}

// True when a kernel of entry point `entry` takes buffer `b` as an argument.
static bool entry_reads(const dlrt_model *m, int entry, uint32_t b) {
    uint32_t first = m->hdr->entry_first[entry], n = m->hdr->entry_count[entry];
    for (uint32_t i = 0; i < n; i++) {
        const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
        for (uint32_t a = 0; a < k->n_args; a++) {
            if (m->args[k->first_arg + a] == b) {
                return true;
            }
        }
    }
    return false;
}

int dlrt_model_infer_reads_input(const dlrt_model *m, size_t i) {
    if (!m || i >= m->n_inputs) {
        return 0;
    }
    return entry_reads(m, DLRT_ENTRY_INFER, m->tensors[m->first_input + i].buffer);
}

dlrt_status rt__check_inputs(dlrt_session *s, int entry, const char *what) {
    const dlrt_model *m = s->model;
    for (size_t i = 0; i < m->n_inputs; i++) {
        if (s->input_given && s->input_given[i]) {
            continue;
        }
        const dlrt_plan_tensor *t = &m->tensors[m->first_input + i];
        // An input the entry point never reads (e.g. labels only the train step uses) may stay
        // unset; the scan runs only for inputs that were never given.
        if (entry_reads(m, entry, t->buffer)) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "%s: input '%s' of model '%s' was never set (give it with "
                            "dlrt_session_set_input or dlrt_session_bind_input first)",
                            what, m->tensor_names[m->first_input + i], m->name);
        }
    }
    return DLRT_OK;
}

dlrt_status dlrt_session_set_input(dlrt_session *s, const char *name, const void *data,
                                   size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_INPUT, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "input '%s': data is NULL", name);
    }
    if (st == DLRT_OK) {
        st = mark_given(s, t);
    }
    if (st == DLRT_OK) {
        rt__session_point_input(s, t->buffer, s->arena + s->model->buffers[t->buffer].offset);
        rt__dp_input_bound(s, (size_t)(t - s->model->tensors) - s->model->first_input, false);
    }
    if (st == DLRT_OK && size) {
        st = rt__buf_write(s, t->buffer, data);
    }
    return st;
}

dlrt_status dlrt_session_bind_input(dlrt_session *s, const char *name, const void *data,
                                    size_t size) {
    const dlrt_plan_tensor *t;
    int chunks = dlrt_session_chunks(s); // a session of chunks takes every chunk's batch
    dlrt_status st = lookup(s, name, DLRT_ROLE_INPUT, size, chunks == 1, &t);
    if (st != DLRT_OK) {
        return st;
    }
    uint64_t want = s->model->buffers[t->buffer].size * (uint64_t)chunks;
    if (size != want) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "input '%s' has %llu bytes (%d chunks of %llu), got %zu", name,
                        (unsigned long long)want, chunks,
                        (unsigned long long)s->model->buffers[t->buffer].size, size);
    }
    if (!data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "input '%s': data is NULL", name);
    }
    if (!host_memory(s)) {
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "input '%s': a %s session cannot read host memory in place; copy the "
                        "input in with dlrt_session_set_input",
                        name, s->dev.ops->name);
    }
    size_t es = rt__dtype_size(t->dtype);
    if (es > 1 && (uintptr_t)data % es != 0) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "input '%s': data at %p is not aligned to its %zu-byte elements", name,
                        data, es);
    }
    if ((st = mark_given(s, t)) != DLRT_OK) {
        return st;
    }
    // Kernels only read inputs (the memory plan never reuses an input buffer in place), so the
    // const is kept in spirit: no kernel writes through this pointer.
    rt__session_point_input(s, t->buffer, (void *)(uintptr_t)data);
    rt__dp_input_bound(s, (size_t)(t - s->model->tensors) - s->model->first_input, chunks > 1);
    return DLRT_OK;
}

dlrt_status dlrt_session_infer(dlrt_session *s) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_infer: session is NULL");
    }
    dlrt_status st = rt__check_inputs(s, DLRT_ENTRY_INFER, "infer");
    if (st != DLRT_OK) {
        return st;
    }
    return rt__session_run(s, DLRT_ENTRY_INFER);
}

dlrt_status dlrt_session_output(dlrt_session *s, const char *name, const void **data,
                                dlrt_tensor_desc *desc) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_OUTPUT, 0, false, &t);
    if (st != DLRT_OK) {
        return st;
    }
    if (data) {
        *data = s->buf_ptr[t->buffer];
    }
    if (desc) {
        size_t i = (size_t)(t - s->model->tensors);
        (void)dlrt_model_output(s->model, i - s->model->first_output, desc);
    }
    return DLRT_OK;
}

// Copies the current bytes of tensor `name` of role `role` to host memory (any device).
static dlrt_status copy_tensor_out(dlrt_session *s, const char *name, int role, void *data,
                                   size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, role, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "%s '%s': data is NULL",
                        role == DLRT_ROLE_INPUT ? "input" : "output", name);
    }
    if (st == DLRT_OK && size) {
        st = rt__buf_read(s, t->buffer, data);
    }
    return st;
}

dlrt_status dlrt_session_output_copy(dlrt_session *s, const char *name, void *data, size_t size) {
    return copy_tensor_out(s, name, DLRT_ROLE_OUTPUT, data, size);
}

dlrt_status dlrt_session_input_copy(dlrt_session *s, const char *name, void *data, size_t size) {
    return copy_tensor_out(s, name, DLRT_ROLE_INPUT, data, size);
}

dlrt_status dlrt_session_get_param(dlrt_session *s, const char *name, void *data, size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_PARAM, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "param '%s': data is NULL", name);
    }
    if (st == DLRT_OK && size) {
        st = rt__buf_read(s, t->buffer, data);
    }
    return st;
}

dlrt_status dlrt_session_set_param(dlrt_session *s, const char *name, const void *data,
                                   size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_PARAM, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "param '%s': data is NULL", name);
    }
    if (st == DLRT_OK && size) {
        // A param (or an optimizer slot: harmless) changes: the packs must be made again.
        s->packed_stale = true;
        st = rt__buf_write(s, t->buffer, data);
    }
    return st;
}
