// runtime/rt_train.c — the training API: introspection of optimizer state and hyper-parameters,
// the train_step entry point, and safetensors checkpoints.
//
// Hyper-parameters and step scalars live in the session's hyper buffer (a STATE buffer of
// DLRT_HP_COUNT doubles, runtime/dlrt_format.h) that the compiled step reads and writes; the
// plan's hparam table names the entries this API exposes. The loss seed buffer (present with
// loss scaling) must always hold (float)loss_scale: whoever changes the scale outside a step
// (a checkpoint load) rewrites it. Loading a checkpoint is all-or-nothing: the whole file is
// validated and staged in memory before the session is touched.
//
// Step state beyond tensors travels as safetensors metadata: the hyper buffer's STATE scalars
// (step, loss scale, growth tracker, and with gradient accumulation the micro-step count; the
// accumulators themselves are STATE tensors "PARAM.grad_accum") and the int64 RNG counter of
// the training-mode Dropouts (its own STATE buffer, hdr->counter_buffer), "dlcc.rng_counter".
//
// Buffers live in the session's device memory: the hyper buffer is read and written whole
// through the device's copies (rt__buf_read / rt__buf_write, 256 bytes), checkpoints are written
// from the buffers in place where the device has host memory, else from host copies.
#include "dl_base.h"
#include "dl_safetensors.h"
#include "rt_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dlrt_model_has_train_step(const dlrt_model *m) {
    return m && m->hdr->entry_count[DLRT_ENTRY_TRAIN_STEP] > 0;
}

size_t dlrt_model_num_state(const dlrt_model *m) {
    return m ? m->n_states : 0;
}

size_t dlrt_model_num_hparams(const dlrt_model *m) {
    return m ? m->hdr->n_hparams : 0;
}

const char *dlrt_model_hparam_name(const dlrt_model *m, size_t i) {
    return m && i < m->hdr->n_hparams ? m->hparam_names[i] : NULL;
}

// The hyper buffer's DLRT_HP_COUNT doubles, to and from host memory (a train step only).
static dlrt_status hyper_read(dlrt_session *s, double h[DLRT_HP_COUNT]) {
    return rt__buf_read(s, s->model->hdr->hyper_buffer, h);
}

static dlrt_status hyper_write(dlrt_session *s, const double h[DLRT_HP_COUNT]) {
    return rt__buf_write(s, s->model->hdr->hyper_buffer, h);
}

static long find_hparam(const dlrt_model *m, const char *name) {
    for (uint32_t i = 0; i < m->hdr->n_hparams; i++) {
        if (strcmp(m->hparam_names[i], name) == 0) {
            return (long)i;
        }
    }
    return -1;
}

static dlrt_status unknown_hparam(const dlrt_model *m, const char *name) {
    char list[512];
    size_t at = 0;
    list[0] = 0;
    for (uint32_t i = 0; i < m->hdr->n_hparams && at < sizeof list; i++) {
        int w = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", m->hparam_names[i]);
        at += w > 0 ? (size_t)w : 0;
    }
    return rt__fail(DLRT_ERR_INVALID_ARG, "model '%s' has no hyper-parameter '%s' (it has: %s)",
                    m->name, name, m->hdr->n_hparams ? list : "none, no train step");
}

dlrt_status dlrt_session_get_hparam(dlrt_session *s, const char *name, double *out) {
    if (!s || !name || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_get_hparam: NULL argument");
    }
    long i = find_hparam(s->model, name);
    if (i < 0) {
        return unknown_hparam(s->model, name);
    }
    double h[DLRT_HP_COUNT];
    dlrt_status st = hyper_read(s, h);
    if (st == DLRT_OK) {
        *out = h[s->model->hparams[i].index];
    }
    return st;
}

// The checks torch.optim's constructors make (and ir/optim_ref.c's dl_optim_ref_hparams_check),
// plus what the compiled step cannot change: whether momentum is used (it decides the slots).
// Every value must be finite. The .dlg parser refuses the same ranges at compile time
// (frontend/parser.c, check_train_values): keep the two in step.
static dlrt_status check_hparam(dlrt_session *s, const dlrt_plan_hparam *p, const char *name,
                                const double *h, double v) {
    const dlrt_model *m = s->model;
    if (!isfinite(v)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "invalid %s value: %g (must be finite)", name, v);
    }
    switch (p->index) {
    case DLRT_HP_LR:
    case DLRT_HP_EPS:
    case DLRT_HP_WEIGHT_DECAY:
    case DLRT_HP_ALPHA:
        if (!(v >= 0.0)) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "invalid %s value: %g (must be >= 0)", name, v);
        }
        return DLRT_OK;
    case DLRT_HP_CLIP_NORM: // as `clip_norm = V` in the .dlg: a norm of 0 would stop all updates
        if (!(v > 0.0)) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "invalid %s value: %g (must be > 0)", name, v);
        }
        return DLRT_OK;
    case DLRT_HP_BETA1:
    case DLRT_HP_BETA2:
        if (!(v >= 0.0 && v < 1.0)) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "invalid %s value: %g (must be in [0, 1))", name,
                            v);
        }
        return DLRT_OK;
    case DLRT_HP_MOMENTUM:
        if (!(v >= 0.0)) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "invalid momentum value: %g (must be >= 0)", v);
        }
        if ((p->init != 0.0) != (v != 0.0)) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "momentum %g: the model was compiled with momentum %g, and whether "
                            "momentum is used (its momentum_buffer) needs a recompile",
                            v, p->init);
        }
        if (m->hdr->optimizer == DLRT_OPTIM_SGD && h[DLRT_HP_NESTEROV] != 0.0 && v <= 0.0) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "nesterov momentum requires a momentum > 0");
        }
        return DLRT_OK;
    case DLRT_HP_DAMPENING:
        if (h[DLRT_HP_NESTEROV] != 0.0 && v != 0.0) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "nesterov momentum requires zero dampening");
        }
        return DLRT_OK;
    default:
        return DLRT_OK;
    }
}

dlrt_status dlrt_session_set_hparam(dlrt_session *s, const char *name, double value) {
    if (!s || !name) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_set_hparam: NULL argument");
    }
    long i = find_hparam(s->model, name);
    if (i < 0) {
        return unknown_hparam(s->model, name);
    }
    const dlrt_plan_hparam *p = &s->model->hparams[i];
    if (!(p->flags & DLRT_HPF_SETTABLE)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "hyper-parameter '%s' cannot be set (it is %s)", name,
                        p->flags & DLRT_HPF_OUTPUT  ? "an output of the step"
                        : p->flags & DLRT_HPF_STATE ? "step state, restored from checkpoints"
                                                    : "compiled into the step");
    }
    double h[DLRT_HP_COUNT];
    dlrt_status st = hyper_read(s, h);
    if (st == DLRT_OK) {
        st = check_hparam(s, p, name, h, value);
    }
    if (st == DLRT_OK) {
        h[p->index] = value;
        st = hyper_write(s, h);
    }
    return st;
}

dlrt_status dlrt_session_train_step(dlrt_session *s, dlrt_step_info *info) {
    if (!s) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_train_step: session is NULL");
    }
    if (!dlrt_model_has_train_step(s->model)) {
        return rt__fail(DLRT_ERR_UNSUPPORTED, "model '%s' has no train step (no train block)",
                        s->model->name);
    }
    dlrt_status st = rt__check_inputs(s, DLRT_ENTRY_TRAIN_STEP, "train_step");
    if (st != DLRT_OK) {
        return st;
    }
    // Every train step (data-parallel or not, the training loop's too) comes through here and
    // may update the params: the next infer makes the packs again (failed steps too: a step that
    // fails part way may have updated some).
    s->packed_stale = true;
    st = s->dp ? rt__dp_train_step(s) : rt__session_run(s, DLRT_ENTRY_TRAIN_STEP);
    if (st == DLRT_OK && info) {
        double h[DLRT_HP_COUNT];
        if ((st = hyper_read(s, h)) != DLRT_OK) {
            return st;
        }
        info->loss = h[DLRT_HP_LOSS];
        info->skipped = h[DLRT_HP_SKIPPED] != 0.0;
        info->grad_norm = h[DLRT_HP_GRAD_NORM];
        info->loss_scale = h[DLRT_HP_LOSS_SCALE];
        info->step = (int64_t)h[DLRT_HP_STEP];
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

// Tensor t of the session as a host dl_tensor: its buffer in place when the device has host
// memory, else a host copy made here (*copy, OWNED by the caller; NULL when in place).
static dlrt_status tensor_of(dlrt_session *s, size_t t, dl_tensor *out, void **copy) {
    const dlrt_plan_tensor *pt = &s->model->tensors[t];
    memset(out, 0, sizeof *out);
    out->dtype = (dl_dtype)pt->dtype;
    out->rank = (int32_t)pt->rank;
    for (uint32_t d = 0; d < pt->rank; d++) {
        out->dims[d] = pt->dims[d];
    }
    *copy = NULL;
    if (s->dev.ops->caps & RT_DEVCAP_HOST_MEMORY) {
        out->data = s->buf_ptr[pt->buffer];
        return DLRT_OK;
    }
    size_t size = (size_t)s->model->buffers[pt->buffer].size;
    *copy = dl_mem_alloc(size ? size : 1);
    if (!*copy) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    out->data = *copy;
    return rt__buf_read(s, pt->buffer, *copy);
}

enum { META_ACCUM_COUNT = 3, META_COUNT = 4 }; // meta_keys[] indices

// Metadata of the hyper buffer's step state. `always`: written for every train step; else only
// when the model exposes the hparam (accum_count exists with accumulate > 1).
static const struct {
    const char *key;
    int index;
    bool is_int, always;
} meta_keys[META_COUNT] = {{"dlcc.step", DLRT_HP_STEP, true, true},
                           {"dlcc.loss_scale", DLRT_HP_LOSS_SCALE, false, true},
                           {"dlcc.growth_tracker", DLRT_HP_GROWTH_TRACKER, true, true},
                           {"dlcc.accum_count", DLRT_HP_ACCUM_COUNT, true, false}};

static bool has_hparam_index(const dlrt_model *m, uint32_t index) {
    for (uint32_t i = 0; i < m->hdr->n_hparams; i++) {
        if (m->hparams[i].index == index) {
            return true;
        }
    }
    return false;
}

#define RNG_COUNTER_KEY "dlcc.rng_counter"

dlrt_status dlrt_session_save(dlrt_session *s, const char *path) {
    return dlrt_session_save_meta(s, path, NULL, 0);
}

dlrt_status dlrt_session_save_meta(dlrt_session *s, const char *path, const dlrt_meta_pair *extra,
                                   size_t n_extra) {
    if (!s || !path || (n_extra && !extra)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_save: NULL argument");
    }
    for (size_t i = 0; i < n_extra; i++) {
        bool own = !extra[i].key || !extra[i].value || !strcmp(extra[i].key, "dlcc.model") ||
                   !strcmp(extra[i].key, RNG_COUNTER_KEY);
        for (size_t k = 0; !own && k < DL_ARRAY_LEN(meta_keys); k++) {
            own = !strcmp(extra[i].key, meta_keys[k].key);
        }
        if (own) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "dlrt_session_save: metadata key '%s' is NULL or the runtime's own",
                            extra[i].key ? extra[i].key : "(null)");
        }
    }
    const dlrt_model *m = s->model;
    size_t n_ten = m->n_params + m->n_states;
    // Host copies of the tensors (a device without host memory); the writer reads them at
    // dl_st_write_file.
    void **copies = dl_mem_calloc(n_ten ? n_ten : 1, sizeof *copies);
    if (!copies) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    dl_st_writer *w = NULL;
    dl_status st = dl_st_writer_create(&w);
    dlrt_status rst = DLRT_OK;
    double h[DLRT_HP_COUNT];
    for (size_t i = 0; st == DL_OK && rst == DLRT_OK && i < n_ten; i++) {
        dl_tensor t;
        rst = tensor_of(s, m->first_param + i, &t, &copies[i]);
        if (rst == DLRT_OK) {
            st = dl_st_writer_add(w, m->tensor_names[m->first_param + i], &t);
        }
    }
    if (st == DL_OK && rst == DLRT_OK && dlrt_model_has_train_step(m)) {
        rst = hyper_read(s, h);
    }
    if (st == DL_OK && rst == DLRT_OK && dlrt_model_has_train_step(m)) {
        char v[64];
        for (size_t i = 0; st == DL_OK && i < DL_ARRAY_LEN(meta_keys); i++) {
            if (!meta_keys[i].always && !has_hparam_index(m, (uint32_t)meta_keys[i].index)) {
                continue;
            }
            double x = h[meta_keys[i].index];
            if (meta_keys[i].is_int) {
                snprintf(v, sizeof v, "%lld", (long long)x);
            } else {
                snprintf(v, sizeof v, "%.17g", x);
            }
            st = dl_st_writer_set_metadata(w, meta_keys[i].key, v);
        }
        if (st == DL_OK && m->hdr->counter_buffer != UINT32_MAX) {
            int64_t ctr = 0;
            rst = rt__buf_read(s, m->hdr->counter_buffer, &ctr);
            snprintf(v, sizeof v, "%lld", (long long)ctr);
            st = rst == DLRT_OK ? dl_st_writer_set_metadata(w, RNG_COUNTER_KEY, v) : DL_OK;
        }
    }
    if (st == DL_OK && rst == DLRT_OK) {
        st = dl_st_writer_set_metadata(w, "dlcc.model", m->name);
    }
    for (size_t i = 0; st == DL_OK && rst == DLRT_OK && i < n_extra; i++) {
        st = dl_st_writer_set_metadata(w, extra[i].key, extra[i].value);
    }
    int write_errno = 0;
    bool write_failed = false;
    if (st == DL_OK && rst == DLRT_OK) {
        st = dl_st_write_file(w, path);
        write_errno = errno;
        write_failed = st != DL_OK;
    }
    dl_st_writer_destroy(w);
    for (size_t i = 0; i < n_ten; i++) {
        free(copies[i]);
    }
    free(copies);
    if (rst != DLRT_OK) {
        return rst;
    }
    if (write_failed) {
        return rt__fail(rt__status_from_dl(st), "cannot write checkpoint %s: %s", path,
                        strerror(write_errno));
    }
    if (st != DL_OK) {
        return rt__fail(rt__status_from_dl(st), "cannot write checkpoint %s: %s", path,
                        st == DL_ERR_NOMEM ? "out of memory" : "invalid tensor, name or metadata");
    }
    return DLRT_OK;
}

// Parses a metadata number: an integer >= 0 (is_int) or a finite double > 0.
static bool parse_meta(const char *v, bool is_int, double *out) {
    if (!v || !*v) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    if (is_int) {
        long long x = strtoll(v, &end, 10);
        if (*end || errno || x < 0) {
            return false;
        }
        *out = (double)x;
        return true;
    }
    double x = strtod(v, &end);
    if (*end || errno || !isfinite(x) || !(x > 0.0)) {
        return false;
    }
    *out = x;
    return true;
}

void dlrt_load_options_init(dlrt_load_options *o) {
    if (o) {
        memset(o, 0, sizeof *o);
    }
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static dlrt_status check_rules(const dlrt_load_options *o) {
    for (size_t i = 0; o && i < o->n_rules; i++) {
        const dlrt_load_rule *r = &o->rules[i];
        if (!r->from || !r->to || !r->from[0] || !r->to[0]) {
            return rt__fail(DLRT_ERR_INVALID_ARG, "load rule %zu: an empty or NULL name", i + 1);
        }
        if (ends_with(r->from, "*") != ends_with(r->to, "*")) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "load rule %zu ('%s' -> '%s'): a prefix rule ends in '*' on both sides",
                            i + 1, r->from, r->to);
        }
    }
    return DLRT_OK;
}

static void notice(const dlrt_load_options *o, const char *name, const char *what) {
    if (o && o->notice) {
        o->notice(o->user, name, what);
    }
}

dlrt_status dlrt_session_load(dlrt_session *s, const char *path) {
    return dlrt_session_load_with(s, path, NULL);
}

dlrt_status dlrt_session_load_with(dlrt_session *s, const char *path, const dlrt_load_options *o) {
    if (!s || !path) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_session_load: NULL argument");
    }
    dlrt_status rst = check_rules(o);
    if (rst != DLRT_OK) {
        return rst;
    }
    const dlrt_model *m = s->model;
    size_t n_ten = m->n_params + m->n_states;
    char err[256];
    dl_st_file *f = NULL;
    dl_status dst = dl_st_open(path, &f, err, sizeof err);
    if (dst != DL_OK) {
        return rt__fail(rt__status_from_dl(dst), "cannot load checkpoint %s: %s", path, err);
    }
    // staged[t]: the file's bytes for plan tensor first_param + t, or NULL when absent.
    void **staged = dl_mem_calloc(n_ten ? n_ten : 1, sizeof *staged);
    size_t n_rules = o ? o->n_rules : 0;
    dl_st_rule *rules = dl_mem_alloc((n_rules ? n_rules : 1) * sizeof *rules); // the name rules
    for (size_t i = 0; rules && i < n_rules; i++) {
        rules[i] = (dl_st_rule){o->rules[i].from, o->rules[i].to};
    }
    dlrt_status st = staged && rules ? DLRT_OK : rt__fail(DLRT_ERR_NOMEM, "out of memory");
    size_t n_file = dl_st_count(f);
    for (size_t i = 0; st == DLRT_OK && i < n_file; i++) {
        dl_st_tensor_info info;
        if (dl_st_info(f, i, &info) != DL_OK) {
            st = rt__fail(DLRT_ERR_CORRUPT, "checkpoint %s: cannot list tensor %zu", path, i);
            break;
        }
        if (ends_with(info.name, ".num_batches_tracked") ||
            !strcmp(info.name, "num_batches_tracked")) {
            notice(o, info.name, "skipped: a PyTorch-only buffer (BatchNorm's step counter)");
            continue;
        }
        char mapped[512];
        if (!dl_st_rule_apply(rules, n_rules, info.name, mapped, sizeof mapped)) {
            st = rt__fail(DLRT_ERR_INVALID_ARG, "checkpoint %s: '%s' maps to a name too long", path,
                          info.name);
            break;
        }
        long t = rt__find_param_or_state(m, mapped);
        if (t < 0 && o && o->ignore_unknown) {
            notice(o, info.name, "skipped: the model has no param or optimizer state of that name");
            continue;
        }
        if (t < 0) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "checkpoint %s: model '%s' has no param or optimizer state named '%s'%s "
                          "(rename with load rules, e.g. dlcc's --map, or skip unknown names)",
                          path, m->name, mapped, strcmp(mapped, info.name) ? " (mapped)" : "");
            break;
        }
        const dlrt_plan_tensor *pt = &m->tensors[t];
        if (staged[(size_t)t - m->first_param]) {
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "checkpoint %s: '%s' is the second tensor of the file that lands on "
                          "the model's '%s'",
                          path, info.name, mapped);
            break;
        }
        bool same = (uint32_t)info.dtype == pt->dtype && (uint32_t)info.rank == pt->rank;
        for (uint32_t d = 0; same && d < pt->rank; d++) {
            same = info.dims[d] == pt->dims[d];
        }
        if (!same) {
            char fs[200], ms[200];
            dl_shape_format(info.dims, (int32_t)info.rank, fs, sizeof fs);
            dl_shape_format(pt->dims, (int32_t)pt->rank, ms, sizeof ms);
            st = rt__fail(DLRT_ERR_INVALID_ARG,
                          "checkpoint %s: tensor '%s' is %s%s but the model's '%s' is %s%s", path,
                          info.name, dl_dtype_name((dl_dtype)info.dtype), fs, mapped,
                          dl_dtype_name((dl_dtype)pt->dtype), ms);
            break;
        }
        size_t k = (size_t)t - m->first_param, size = (size_t)m->buffers[pt->buffer].size;
        staged[k] = dl_mem_alloc(size ? size : 1);
        if (!staged[k]) {
            st = rt__fail(DLRT_ERR_NOMEM, "out of memory");
        } else if ((dst = dl_st_read_into(f, i, staged[k], size, err, sizeof err)) != DL_OK) {
            st = rt__fail(rt__status_from_dl(dst), "checkpoint %s: %s", path, err);
        }
    }
    for (size_t k = 0; st == DLRT_OK && k < m->n_params; k++) {
        const dlrt_plan_tensor *pt = &m->tensors[m->first_param + k];
        if (!staged[k] && pt->role != DLRT_ROLE_STATE) {
            notice(o, m->tensor_names[m->first_param + k],
                   "not in the checkpoint: keeps its current value");
        }
    }
    bool train = dlrt_model_has_train_step(m);
    double meta[DL_ARRAY_LEN(meta_keys)];
    bool has_meta[DL_ARRAY_LEN(meta_keys)] = {false};
    for (size_t i = 0; st == DLRT_OK && train && i < DL_ARRAY_LEN(meta_keys); i++) {
        if (!meta_keys[i].always && !has_hparam_index(m, (uint32_t)meta_keys[i].index)) {
            continue; // not this model's state (e.g. accum_count without accumulation)
        }
        const char *v = dl_st_metadata(f, meta_keys[i].key);
        if (v && !parse_meta(v, meta_keys[i].is_int, &meta[i])) {
            st = rt__fail(DLRT_ERR_INVALID_ARG, "checkpoint %s: bad %s value '%s'", path,
                          meta_keys[i].key, v);
        }
        has_meta[i] = v != NULL;
    }
    // The micro-step count must lie inside a cycle of the model's accumulate setting.
    double h[DLRT_HP_COUNT];
    if (st == DLRT_OK && train) {
        st = hyper_read(s, h);
    }
    if (st == DLRT_OK && train && has_meta[META_ACCUM_COUNT] &&
        meta[META_ACCUM_COUNT] >= h[DLRT_HP_ACCUMULATE]) {
        st = rt__fail(DLRT_ERR_INVALID_ARG,
                      "checkpoint %s: dlcc.accum_count %.0f is not below the model's accumulate "
                      "%.0f",
                      path, meta[META_ACCUM_COUNT], h[DLRT_HP_ACCUMULATE]);
    }
    bool has_ctr = false;
    int64_t ctr = 0;
    if (st == DLRT_OK && train && m->hdr->counter_buffer != UINT32_MAX) {
        const char *v = dl_st_metadata(f, RNG_COUNTER_KEY);
        double x = 0;
        if (v && (!parse_meta(v, true, &x) || x > 9007199254740992.0)) {
            st = rt__fail(DLRT_ERR_INVALID_ARG, "checkpoint %s: bad %s value '%s'", path,
                          RNG_COUNTER_KEY, v);
        }
        has_ctr = v != NULL;
        ctr = (int64_t)x;
    }
    if (st == DLRT_OK) {
        // Commit: nothing below fails but the device's copies (never on the CPU; a device error
        // on a GPU leaves the session unusable anyway). The params change: the packs with them.
        s->packed_stale = true;
        for (size_t k = 0; k < n_ten && st == DLRT_OK; k++) {
            const dlrt_plan_tensor *pt = &m->tensors[m->first_param + k];
            if (staged[k]) {
                st = rt__buf_write(s, pt->buffer, staged[k]);
            } else if (pt->role == DLRT_ROLE_STATE) {
                st = rt__state_reset(s, pt->buffer);
            }
        }
        if (train && st == DLRT_OK) {
            for (uint32_t i = 0; i < m->hdr->n_hparams; i++) {
                if (m->hparams[i].flags & DLRT_HPF_STATE) {
                    h[m->hparams[i].index] = m->hparams[i].init;
                }
            }
            for (size_t i = 0; i < DL_ARRAY_LEN(meta_keys); i++) {
                if (has_meta[i]) {
                    h[meta_keys[i].index] = meta[i];
                }
            }
            st = hyper_write(s, h);
            if (st == DLRT_OK && m->hdr->seed_buffer != UINT32_MAX) {
                float seed = (float)h[DLRT_HP_LOSS_SCALE];
                st = rt__buf_write(s, m->hdr->seed_buffer, &seed);
            }
            if (st == DLRT_OK && m->hdr->counter_buffer != UINT32_MAX) {
                st = has_ctr ? rt__buf_write(s, m->hdr->counter_buffer, &ctr)
                             : rt__state_reset(s, m->hdr->counter_buffer);
            }
        }
    }
    for (size_t k = 0; staged && k < n_ten; k++) {
        free(staged[k]);
    }
    free(staged);
    free(rules);
    dl_st_close(f);
    return st;
}
