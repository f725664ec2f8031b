// driver/driver.c — compile-or-fetch (driver/dlcc.h): front end (parse, -D binds, the pipeline's
// shapes pass, verify), the cache key, and the compilation cache around the rest of the pass
// pipeline (passes/pipeline.c: autodiff .. schedule, whose back-end passes run in dl_cg_compile).
//
// The key is XXH3-128 over a versioned, length-prefixed encoding (KEY_MAGIC): the tag, then
// each component as (u32 name length, name, u64 byte length, bytes), in the fixed order of
// part_names. Each component's own hash (over the same framed bytes) is reported in parts[] for
// `dlcc-cache explain`. Changing any encoding below means bumping KEY_VERSION.
//
// Invariants: the warm path (a cache hit) never initialises LLVM targets: the key needs only the
// triple, the host CPU name and the exact feature string codegen will use (the target's key
// part, dl_cg_target_key: cheap cpuid queries). Cache problems never fail a
// compile: each becomes ONE warning in the caller's sink and the compile goes on without the cache.
#include "dl_build_id.h"
#include "dl_cache.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dlcc.h"
#include "dlrt_format.h"
#include "driver_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DL_VERSION
#    define DL_VERSION "0.0.0"
#endif
#ifndef DL_GIT_REV
#    define DL_GIT_REV "unknown"
#endif

#define KEY_MAGIC   "dlcc-key"
#define KEY_VERSION 4u // 4: the target part comes from the target (dl_cg_target_key)

static const char *const part_names[DLCC_KEY_PARTS] = {"ir",     "dims",   "options",
                                                       "target", "format", "compiler"};

void dlcc_options_init(dlcc_options *o) {
    memset(o, 0, sizeof *o);
    dl_cg_options_init(&o->cg);
    o->use_cache = true;
    o->dump_after = -1;
}

static void pipeline_opts(const dlcc_options *o, dl_pass_pipeline_opts *po) {
    dl_pass_pipeline_opts_init(po);
    po->verify_each = o->verify_each;
    po->dump_all = o->dump_all;
    po->dump_after = o->dump_after;
    po->dump = o->dump;
    po->dump_ctx = o->dump_ctx;
    po->no_fusion = o->no_fusion;
}

// The version string is computed once: it is constant for the life of the process, and the
// contract returns a static string. pthread_once makes the one write race-free (the only
// process-wide state in this file; it never changes after initialisation).
static char version_buf[128];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void version_init(void) {
    snprintf(version_buf, sizeof version_buf, "dlcc %s (%s, build %s) LLVM %s", DL_VERSION,
             DL_GIT_REV, DL_BUILD_ID, dl_cg_llvm_version());
}

const char *dlcc_version_string(void) {
    pthread_once(&version_once, version_init);
    return version_buf;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

// An error about a whole file (no line): renders as "PATH: error: MSG".
static void file_diag(dl_diags *d, const char *path, const char *fmt, ...) DL_PRINTF(3, 4);
static void file_diag(dl_diags *d, const char *path, const char *fmt, ...) {
    uint32_t id = 0;
    dl_src_loc loc = DL_NO_LOC;
    if (dl_diags_add_file(d, path, "", 0, &id) == DL_OK) {
        loc.file = id;
    }
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(d, DL_SEV_ERROR, loc, fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------------------------------------
// Front end

// Applies -D binds, infers shapes and verifies a freshly parsed module. On failure destroys it.
static dl_status prepare_module(const char *path, dl_ir_module *m, const dlcc_options *o,
                                dl_diags *d, dl_ir_module **out) {
    dl_status st = DL_OK;
    for (size_t i = 0; i < o->n_binds; i++) {
        const dlcc_bind *b = &o->binds[i];
        if (dl_ir_module_find_dim(m, b->name) < 0) {
            // Said here rather than by dl_ir_module_bind_dim so the message can list the dims.
            dl_strbuf names = {0};
            for (size_t k = 0; k < m->dims.len; k++) {
                dl_strbuf_printf(&names, "%s%s", k ? ", " : "", m->dims.data[k].name);
            }
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "-D %s: model '%s' has no dim named '%s' (%s%s)",
                    b->name, m->name, b->name, m->dims.len ? "dims: " : "it has no dims",
                    names.data ? names.data : "");
            dl_strbuf_fini(&names);
            st = DL_ERR_INVALID_ARG;
            continue;
        }
        dl_status bs = dl_ir_module_bind_dim(m, b->name, b->value, d);
        if (bs != DL_OK) {
            st = bs;
        }
    }
    if (st == DL_OK && o->sync_bn) {
        if (!m->train) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--sync-bn: model '%s' has no train block (%s): there is no train step to "
                    "synchronise",
                    m->name, path);
            st = DL_ERR_INVALID_ARG;
        } else {
            m->train->sync_bn = true;
        }
    }
    if (st == DL_OK) {
        dl_pass_pipeline_opts po;
        pipeline_opts(o, &po);
        st = dl_pass_pipeline_run(m, DL_PASS_SHAPES, DL_PASS_SHAPES, &po, d);
    }
    if (st == DL_OK) {
        st = dl_ir_verify(m, d); // the user's model: always, whatever the build
    }
    if (st != DL_OK) {
        if (dl_diags_error_count(d) == 0) {
            file_diag(d, path, "model rejected (%s)", dl_status_str(st));
        }
        dl_ir_module_destroy(m);
        return st;
    }
    *out = m;
    return DL_OK;
}

dl_status dlcc_load_module(const char *path, const dlcc_options *o, dl_diags *d,
                           dl_ir_module **out) {
    *out = NULL;
    dl_ir_module *m = NULL;
    dl_status st = dl_fe_parse_file(path, d, &m);
    if (st != DL_OK) {
        if (dl_diags_error_count(d) == 0) {
            file_diag(d, path, "cannot load model (%s)", dl_status_str(st));
        }
        return st;
    }
    return prepare_module(path, m, o, d, out);
}

dl_status dlcc_check_module(dl_ir_module *m, const dlcc_options *o, dl_diags *d) {
    dl_pass_pipeline_opts po;
    pipeline_opts(o, &po);
    return dl_pass_pipeline_run(m, DL_PASS_AUTODIFF, DL_PASS_FUSION, &po, d);
}

// ---------------------------------------------------------------------------------------------
// Key

static void put_u32(dl_strbuf *b, uint32_t v) {
    uint8_t le[4];
    for (int i = 0; i < 4; i++) {
        le[i] = (uint8_t)(v >> (8 * i));
    }
    dl_strbuf_append(b, (const char *)le, sizeof le);
}

static void put_u64(dl_strbuf *b, uint64_t v) {
    uint8_t le[8];
    for (int i = 0; i < 8; i++) {
        le[i] = (uint8_t)(v >> (8 * i));
    }
    dl_strbuf_append(b, (const char *)le, sizeof le);
}

// A length-prefixed string (NULL encodes as the empty string: NULL and "" mean the same to
// codegen everywhere they are used below).
static void put_str(dl_strbuf *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    put_u32(b, (uint32_t)n);
    dl_strbuf_append(b, s ? s : "", n);
}

// Encodes component `idx` of the key into `b` (its bytes only; framing is done by the caller).
static dl_status encode_part(size_t idx, const dl_ir_module *m, const dlcc_options *o, dl_strbuf *b,
                             size_t *out_canon_len) {
    switch (idx) {
    case 0: { // ir: canonical text without the train block's hyper-parameter values (they are
              // session values, written into the artifact by dlcc__set_train_values)
        char *text = NULL;
        size_t len = 0;
        DL_TRY(dl_ir_canonical(m, DL_IR_CANON_NO_HYPERPARAMS, &text, &len));
        dl_strbuf_append(b, text, len);
        free(text);
        if (out_canon_len) {
            *out_canon_len = len;
        }
        return DL_OK;
    }
    case 1: // dims: every dim's name and bound value, in declaration order
        put_u32(b, (uint32_t)m->dims.len);
        for (size_t i = 0; i < m->dims.len; i++) {
            put_str(b, m->dims.data[i].name);
            put_u64(b, (uint64_t)m->dims.data[i].value);
        }
        return DL_OK;
    case 2: { // options that change code: opt level, prepacking, and the linker when chosen
              // explicitly
        // (--linker, else $DLCC_LD, as codegen picks it): another linker lays the shared object
        // out differently, and a broken one must fail rather than be skipped by a hit.
        put_u32(b, (uint32_t)o->cg.opt_level);
        put_u32(b, o->cg.no_prepack ? 1u : 0u);
        const char *ld = o->cg.linker && o->cg.linker[0] ? o->cg.linker : getenv("DLCC_LD");
        put_str(b, ld && ld[0] ? ld : NULL);
        return DL_OK;
    }
    case 3: { // target: the target's own part (dl_cg_target_key: its name, triple/CPU as
        // codegen resolves it, the user's strings, the exact features codegen will use)
        char *tk = dl_cg_target_key(&o->cg);
        if (!tk) {
            return DL_ERR_NOMEM;
        }
        put_str(b, tk);
        free(tk);
        return DL_OK;
    }
    case 4: // format: the artifact format version
        put_u32(b, DLRT_FORMAT_VERSION);
        return DL_OK;
    case 5: // compiler: project version, git revision, LLVM version
        put_str(b, dlcc_version_string());
        return DL_OK;
    default:
        DL_UNREACHABLE();
    }
}

static dl_status key_compute(const dl_ir_module *m, const dlcc_options *o, dl_hash128 *out,
                             dlcc_key_part parts[DLCC_KEY_PARTS], size_t *out_canon_len) {
    dl_hash128_state *hs = NULL;
    DL_TRY(dl_hash128_begin(&hs));
    dl_strbuf tag = {0};
    dl_strbuf_append(&tag, KEY_MAGIC, sizeof KEY_MAGIC); // with its NUL
    put_u32(&tag, KEY_VERSION);
    dl_status st = tag.oom ? DL_ERR_NOMEM : DL_OK;
    if (st == DL_OK) {
        dl_hash128_update(hs, tag.data, tag.len);
    }
    dl_strbuf_fini(&tag);
    for (size_t i = 0; st == DL_OK && i < DLCC_KEY_PARTS; i++) {
        dl_strbuf body = {0}, framed = {0};
        st = encode_part(i, m, o, &body, out_canon_len);
        if (st == DL_OK) {
            put_str(&framed, part_names[i]);
            put_u64(&framed, (uint64_t)body.len);
            dl_strbuf_append(&framed, body.data ? body.data : "", body.len);
            st = body.oom || framed.oom ? DL_ERR_NOMEM : DL_OK;
        }
        if (st == DL_OK) {
            dl_hash128_update(hs, framed.data, framed.len);
            if (parts) {
                parts[i].name = part_names[i];
                parts[i].hash = dl_hash128_of(framed.data, framed.len);
            }
        }
        dl_strbuf_fini(&body);
        dl_strbuf_fini(&framed);
    }
    dl_hash128 h = dl_hash128_end(hs);
    if (st == DL_OK) {
        *out = h;
    }
    return st;
}

dl_status dlcc_key(const dl_ir_module *m, const dlcc_options *o, dl_hash128 *out,
                   dlcc_key_part parts[DLCC_KEY_PARTS]) {
    return key_compute(m, o, out, parts, NULL);
}

// ---------------------------------------------------------------------------------------------
// Compile or fetch

// Moves the messages of `from` (the store's own warnings) into one line "A; B" in `b`.
static void join_messages(const dl_diags *from, dl_strbuf *b) {
    for (size_t i = 0; i < dl_diags_count(from); i++) {
        dl_strbuf_printf(b, "%s%s", i ? "; " : "", dl_diags_get(from, i)->msg);
    }
}

// Adds one warning "PREFIX (STORE MESSAGES or STATUS)SUFFIX" to `d` and clears `scratch`.
static void cache_warning(dl_diags *d, dl_diags *scratch, dl_status st, const char *prefix,
                          const char *suffix) {
    dl_strbuf why = {0};
    if (scratch) {
        join_messages(scratch, &why);
        dl_diags_clear(scratch);
    }
    dl_diag(d, DL_SEV_WARNING, DL_NO_LOC, "%s (%s)%s", prefix,
            why.data && why.len ? why.data : dl_status_str(st), suffix);
    dl_strbuf_fini(&why);
}

// The pipeline's back end: lowering, then the memory plan and the schedule over the kernels.
typedef struct backend_ctx {
    const dlcc_options *o;
    dlcc_result *r;
} backend_ctx;

static dl_status run_backend(void *ctx, dl_ir_module *m, dl_diags *d) {
    backend_ctx *b = ctx;
    return dl_cg_compile(m, &b->o->cg, d, &b->r->artifact, &b->r->artifact_len);
}

// "N=64,C=10": the bound dims, as `dlcc-cache ls` shows an entry's (the key's dims part).
static void dims_describe(const dl_ir_module *m, dl_strbuf *b) {
    for (size_t i = 0; i < m->dims.len; i++) {
        dl_strbuf_printf(b, "%s%s=%lld", i ? "," : "", m->dims.data[i].name,
                         (long long)m->dims.data[i].value);
    }
}

// The back half of dlcc_compile_*: `m` is verified and shape-inferred; consumes nothing.
// `source` names the model (a file's absolute path, or the name given) for the entry's metadata.
static dl_status compile_module(dl_ir_module *m, const char *source, const dlcc_options *o,
                                dl_diags *d, double t_start, double front_ms, dlcc_result *r) {
    size_t canon_len = 0;
    dl_diags *scratch = NULL; // the store's messages, folded into one warning each
    dl_cache *c = NULL;
    snprintf(r->model, sizeof r->model, "%s", m->name ? m->name : "");
    dl_status st = key_compute(m, o, &r->key, NULL, &canon_len);
    if (st != DL_OK) {
        return st;
    }
    bool dumps = o->dump && (o->dump_all || o->dump_after >= 0);
    bool use_cache = o->use_cache && !o->no_fusion;
    if (use_cache && dl_cache_env_disabled()) {
        use_cache = false;
        snprintf(r->cache_note, sizeof r->cache_note, "disabled by DLCC_CACHE=%s",
                 getenv("DLCC_CACHE"));
    }
    if (use_cache) {
        st = dl_diags_create(&scratch);
        if (st != DL_OK) {
            return st;
        }
        dl_status cs = dl_cache_open(o->cache_dir, scratch, &c);
        if (cs != DL_OK) {
            cache_warning(d, scratch, cs, "cache unavailable", "; compiling without it");
            c = NULL;
        } else {
            const char *ro = dl_cache_readonly_reason(c);
            if (ro) { // lookups serve hits; a miss is compiled and not stored
                snprintf(r->cache_note, sizeof r->cache_note, "read-only (%s)", ro);
            }
            // Warnings the store gives on success (e.g. a repaired file) pass through as they are.
            for (size_t i = 0; i < dl_diags_count(scratch); i++) {
                const dl_diag_entry *e = dl_diags_get(scratch, i);
                dl_diag(d, e->sev == DL_SEV_ERROR ? DL_SEV_WARNING : e->sev, DL_NO_LOC, "%s",
                        e->msg);
            }
            dl_diags_clear(scratch);
        }
    }
    if (c && !dumps) {
        uint8_t *blob = NULL;
        size_t len = 0;
        dl_status gs = dl_cache_get(c, r->key, &blob, &len, NULL, scratch);
        if (gs != DL_OK) {
            cache_warning(d, scratch, gs, "cache lookup failed", "; compiling without the cache");
            dl_cache_close(c);
            c = NULL;
        } else {
            // A damaged entry was dropped by the store: say so, then compile as on a miss.
            for (size_t i = 0; i < dl_diags_count(scratch); i++) {
                dl_diag(d, DL_SEV_WARNING, DL_NO_LOC, "%s", dl_diags_get(scratch, i)->msg);
            }
            dl_diags_clear(scratch);
            r->cache_used = true;
            // The entry may come from a .dlg with other hyper-parameter values (they are not in
            // the key): this model's values are written into the bytes handed out. An entry
            // that cannot take them is no artifact of this model: compiled again (and replaced).
            char why[256];
            if (blob && m->train &&
                dlcc__set_train_values(blob, len, m->train, why, sizeof why) != DL_OK) {
                char key[33];
                dl_hash128_hex(r->key, key);
                dl_diag(d, DL_SEV_WARNING, DL_NO_LOC,
                        "cache entry %s cannot take this model's train-step values (%s); "
                        "compiling it again",
                        key, why);
                free(blob);
                blob = NULL;
            }
            if (blob) {
                r->artifact = blob;
                r->artifact_len = len;
                r->cache_hit = true;
                r->compile_ms = 0;
                goto out;
            }
        }
    }
    double t_cg = now_ms();
    // The rest of the pipeline runs after the key (which covers the forward graph and the train
    // block the training graph is derived from), so a cache hit skips it: autodiff, precision,
    // simplify, fusion, then the back end (lowering, memory plan, schedule).
    dl_pass_pipeline_opts po;
    pipeline_opts(o, &po);
    backend_ctx bc = {o, r};
    po.backend = run_backend;
    po.backend_ctx = &bc;
    st = dl_pass_pipeline_run(m, DL_PASS_AUTODIFF, DL_PASS_SCHEDULE, &po, d);
    if (st == DL_OK && m->train) {
        // A fresh artifact carries the module's values already; rewriting them checks, on every
        // compile, that a later cache hit can be given another .dlg's values.
        char why[256];
        if (dlcc__set_train_values(r->artifact, r->artifact_len, m->train, why, sizeof why) !=
            DL_OK) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "internal error: the artifact's train values "
                    "cannot be located (%s)",
                    why);
            st = DL_ERR_BACKEND;
        }
    }
    if (st != DL_OK) {
        if (dl_diags_error_count(d) == 0) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "compilation failed (%s)", dl_status_str(st));
        }
        free(r->artifact); // a pass after the back end (a dump) may fail too
        r->artifact = NULL;
        r->artifact_len = 0;
        goto out;
    }
    r->compile_ms = front_ms + (now_ms() - t_cg);
    if (c && !dl_cache_readonly_reason(c)) {
        char target[256];
        dl_strbuf dims = {0};
        dims_describe(m, &dims);
        dl_cg_target_describe(&o->cg, target, sizeof target);
        dl_cache_entry meta;
        memset(&meta, 0, sizeof meta);
        meta.model = (char *)(uintptr_t)r->model; // put copies; never written through
        meta.target = target;
        meta.compiler_version = (char *)(uintptr_t)dlcc_version_string();
        meta.compile_ms = r->compile_ms;
        meta.source_size = (uint64_t)canon_len;
        meta.source = (char *)(uintptr_t)(source ? source : "");
        meta.dims = dims.oom ? NULL : dims.data;
        dl_status ps = dl_cache_put(c, r->key, r->artifact, r->artifact_len, &meta, scratch);
        dl_strbuf_fini(&dims);
        if (ps != DL_OK) {
            cache_warning(d, scratch, ps, "cannot store the artifact in the cache", "");
        } else {
            for (size_t i = 0; i < dl_diags_count(scratch); i++) {
                dl_diag(d, DL_SEV_WARNING, DL_NO_LOC, "%s", dl_diags_get(scratch, i)->msg);
            }
        }
    }
out:
    dl_cache_close(c);
    dl_diags_destroy(scratch);
    r->total_ms = now_ms() - t_start;
    return st;
}

static void result_reset(dlcc_result *r) {
    memset(r, 0, sizeof *r);
}

static dl_status check_options(const dlcc_options *o, dl_diags *d) {
    char err[256];
    dl_status st = dl_cg_options_check(&o->cg, err, sizeof err);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", err);
    }
    return st;
}

dl_status dlcc_compile_source(const char *name, const char *text, size_t len, const dlcc_options *o,
                              dl_diags *d, dlcc_result *r) {
    result_reset(r);
    double t0 = now_ms();
    DL_TRY(check_options(o, d));
    dl_ir_module *m = NULL;
    dl_status st = dl_fe_parse(name, text, len, d, &m);
    if (st != DL_OK) {
        if (dl_diags_error_count(d) == 0) {
            file_diag(d, name, "cannot load model (%s)", dl_status_str(st));
        }
        return st;
    }
    DL_TRY(prepare_module(name, m, o, d, &m));
    st = compile_module(m, name, o, d, t0, now_ms() - t0, r);
    dl_ir_module_destroy(m);
    return st;
}

// The absolute form of `path` in `abs` (the path itself when absolute or when the working
// directory is unknown), for the cache entry's source.
static const char *source_path(const char *path, dl_strbuf *abs) {
    char cwd[4096];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) {
        dl_strbuf_printf(abs, "%s/%s", cwd, strncmp(path, "./", 2) == 0 ? path + 2 : path);
    }
    return abs->data && !abs->oom ? abs->data : path;
}

dl_status dlcc_compile_module(dl_ir_module *m, const char *source, const dlcc_options *o,
                              dl_diags *d, dlcc_result *r) {
    result_reset(r);
    double t0 = now_ms();
    DL_TRY(check_options(o, d));
    DL_TRY(dl_ir_verify(m, d));
    dl_strbuf abs = {0};
    dl_status st = compile_module(m, source_path(source, &abs), o, d, t0, now_ms() - t0, r);
    dl_strbuf_fini(&abs);
    return st;
}

dl_status dlcc_compile_file(const char *path, const dlcc_options *o, dl_diags *d, dlcc_result *r) {
    result_reset(r);
    double t0 = now_ms();
    DL_TRY(check_options(o, d));
    dl_ir_module *m = NULL;
    DL_TRY(dlcc_load_module(path, o, d, &m));
    // The entry records the file by its absolute path, so `dlcc-cache ls` names it wherever it
    // is run from (the path as given when it cannot be resolved).
    dl_strbuf abs = {0};
    dl_status st = compile_module(m, source_path(path, &abs), o, d, t0, now_ms() - t0, r);
    dl_strbuf_fini(&abs);
    dl_ir_module_destroy(m);
    return st;
}
