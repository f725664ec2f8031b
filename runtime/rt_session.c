// runtime/rt_session.c — sessions: one 64-byte aligned arena holding every buffer of the plan
// (inputs, params, constants, intermediates), params initialised from the plan's recipes, and
// the kernel argument arrays resolved once at creation, so a step is only kernel calls.
//
// Param initialisation reproduces the compiler's reference evaluator bit for bit: element i of
// a seeded param is computed in double from dl_rng (base/) and rounded once to its dtype.
#include "dl_base.h"
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

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

dlrt_status dlrt_session_create(dlrt_model *m, dlrt_session **out) {
    if (!m || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_create: NULL argument");
    }
    *out = NULL;
    const dlrt_plan_hdr *h = m->hdr;
    dlrt_session *s = calloc(1, sizeof *s);
    if (!s) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    s->buf_ptr = calloc(h->n_buffers ? h->n_buffers : 1, sizeof(void *));
    s->kargs = calloc(h->n_args ? h->n_args : 1, sizeof(void *));
    size_t *offs = calloc(h->n_buffers ? h->n_buffers : 1, sizeof(size_t));
    if (!s->buf_ptr || !s->kargs || !offs) {
        free(offs);
        dlrt_session_destroy(s);
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    size_t total = 0;
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        offs[i] = total;
        size_t sz = align_up((size_t)m->buffers[i].size, DLRT_BUFFER_ALIGN);
        if (sz > ((size_t)1 << 48) - total) { // a forged plan: the sum must not wrap
            free(offs);
            dlrt_session_destroy(s);
            return rt__fail(DLRT_ERR_CORRUPT, "corrupt artifact: buffers exceed 2^48 bytes");
        }
        total += sz;
    }
    s->arena_size = total ? total : DLRT_BUFFER_ALIGN;
    s->arena = aligned_alloc(DLRT_BUFFER_ALIGN, s->arena_size);
    if (!s->arena) {
        free(offs);
        dlrt_session_destroy(s);
        return rt__fail(DLRT_ERR_NOMEM, "out of memory (session needs %zu bytes)", total);
    }
    memset(s->arena, 0, s->arena_size);
    for (uint32_t i = 0; i < h->n_buffers; i++) {
        s->buf_ptr[i] = s->arena + offs[i];
        const dlrt_plan_buffer *b = &m->buffers[i];
        if (b->kind == DLRT_BUF_CONST || (b->flags & DLRT_BUF_F_INIT_DATA)) {
            memcpy(s->buf_ptr[i], m->data + b->data_off, (size_t)b->size);
        }
    }
    free(offs);
    for (uint32_t i = 0; i < h->n_args; i++) {
        s->kargs[i] = s->buf_ptr[m->args[i]];
    }
    for (size_t i = 0; i < m->n_params; i++) {
        const dlrt_plan_tensor *t = &m->tensors[m->first_param + i];
        init_param(m, t, s->buf_ptr[t->buffer]);
    }
    // A testing aid: any partition of a kernel's range must give the same bytes (the contract of
    // the kernel ABI that the threaded executor relies on); DLRT_DEBUG_SPLIT=K exercises it.
    const char *split = getenv("DLRT_DEBUG_SPLIT");
    s->debug_split = split ? atoi(split) : 0;
    dlrt_model_retain(m);
    s->model = m;
    *out = s;
    return DLRT_OK;
}

void dlrt_session_destroy(dlrt_session *s) {
    if (!s) {
        return;
    }
    free(s->arena);
    free(s->buf_ptr);
    free(s->kargs);
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

void rt__state_reset(dlrt_session *s, uint32_t b) {
    const dlrt_plan_buffer *pb = &s->model->buffers[b];
    if (pb->flags & DLRT_BUF_F_INIT_DATA) {
        memcpy(s->buf_ptr[b], s->model->data + pb->data_off, (size_t)pb->size);
    } else {
        memset(s->buf_ptr[b], 0, (size_t)pb->size);
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

dlrt_status dlrt_session_set_input(dlrt_session *s, const char *name, const void *data,
                                   size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_INPUT, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "input '%s': data is NULL", name);
    }
    if (st == DLRT_OK && size) {
        memcpy(s->buf_ptr[t->buffer], data, size);
    }
    return st;
}

// Runs [0, range) as `parts` uneven chunks (chunk j has about j+1 shares), last chunk first.
static void run_split(dlrt_kernel_fn fn, void *const *args, int64_t range, int parts) {
    int64_t shares = (int64_t)parts * (parts + 1) / 2;
    int64_t bounds[65];
    if (parts > 64) {
        parts = 64;
        shares = 64 * 65 / 2;
    }
    int64_t acc = 0;
    bounds[0] = 0;
    for (int j = 0; j < parts; j++) {
        acc += j + 1;
        bounds[j + 1] = range / shares * acc + range % shares * acc / shares; // no overflow
    }
    for (int j = parts - 1; j >= 0; j--) {
        if (bounds[j + 1] > bounds[j]) {
            fn(args, bounds[j], bounds[j + 1]);
        }
    }
}

dlrt_status dlrt_session_infer(dlrt_session *s) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_infer: session is NULL");
    }
    rt__run_entry(s, DLRT_ENTRY_INFER);
    return DLRT_OK;
}

void rt__run_entry(dlrt_session *s, int entry) {
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    uint32_t first = h->entry_first[entry], n = h->entry_count[entry];
    for (uint32_t i = 0; i < n; i++) {
        const dlrt_plan_kernel *k = &m->kernels[m->entry_kernels[first + i]];
        dlrt_kernel_fn fn = m->desc->fns[k->fn];
        if (s->debug_split > 1 && k->range > 1) {
            run_split(fn, s->kargs + k->first_arg, k->range, s->debug_split);
        } else {
            fn(s->kargs + k->first_arg, 0, k->range);
        }
    }
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
        dlrt_model_output(s->model, i - s->model->first_output, desc);
    }
    return DLRT_OK;
}

dlrt_status dlrt_session_get_param(dlrt_session *s, const char *name, void *data, size_t size) {
    const dlrt_plan_tensor *t;
    dlrt_status st = lookup(s, name, DLRT_ROLE_PARAM, size, true, &t);
    if (st == DLRT_OK && size && !data) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "param '%s': data is NULL", name);
    }
    if (st == DLRT_OK && size) {
        memcpy(data, s->buf_ptr[t->buffer], size);
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
        memcpy(s->buf_ptr[t->buffer], data, size);
    }
    return st;
}
