// driver/libdlcc.c — libdlcc.so's flat C API (driver/libdlcc.h) over driver/dlcc.h: the same
// compile-or-fetch as `dlcc compile`, with the options as plain arguments and the diagnostics
// rendered to text. Built only into the shared library (excluded from dl_driver), so the static
// tools do not carry it.
#include "libdlcc.h"

#include "dlcc.h"

#include <stdlib.h>
#include <string.h>

// The diagnostics of `d` as one malloc'd text (NULL when there are none or on OOM).
static char *render(dl_diags *d) {
    char *text = NULL;
    if (dl_diags_count(d) == 0 || dl_diags_render(d, &text) != DL_OK) {
        return NULL;
    }
    return text;
}

int dlcc_lib_compile(const char *path, const char *const *dim_names, const int64_t *dim_values,
                     size_t n_dims, const char *cache_dir, int use_cache, int opt_level,
                     void **artifact, size_t *artifact_len, int *cache_hit, char **messages) {
    if (messages) {
        *messages = NULL;
    }
    if (!artifact || !artifact_len || !path || (n_dims && (!dim_names || !dim_values))) {
        return DL_ERR_INVALID_ARG;
    }
    *artifact = NULL;
    *artifact_len = 0;
    if (cache_hit) {
        *cache_hit = 0;
    }
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return DL_ERR_NOMEM;
    }
    dlcc_bind *binds = n_dims ? dl_mem_calloc(n_dims, sizeof *binds) : NULL;
    dl_status st = n_dims && !binds ? DL_ERR_NOMEM : DL_OK;
    for (size_t i = 0; st == DL_OK && i < n_dims; i++) {
        if (!dim_names[i] || !dim_names[i][0]) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "dim %zu has no name", i);
            st = DL_ERR_INVALID_ARG;
        }
        binds[i] = (dlcc_bind){dim_names[i], dim_values[i]};
    }
    dlcc_options o;
    dlcc_options_init(&o);
    o.binds = binds;
    o.n_binds = n_dims;
    o.use_cache = use_cache != 0;
    o.cache_dir = cache_dir;
    if (opt_level >= 0) {
        o.cg.opt_level = opt_level;
    }
    char err[512];
    if (st == DL_OK && (st = dl_cg_options_check(&o.cg, err, sizeof err)) != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", err);
    }
    dlcc_result r;
    memset(&r, 0, sizeof r);
    if (st == DL_OK && (st = dlcc_compile_file(path, &o, d, &r)) == DL_OK) {
        *artifact = r.artifact;
        *artifact_len = r.artifact_len;
        if (cache_hit) {
            *cache_hit = r.cache_hit;
        }
    }
    if (messages) {
        *messages = render(d);
    }
    free(binds);
    dl_diags_destroy(d);
    return (int)st;
}

void dlcc_lib_free(void *p) {
    free(p);
}

const char *dlcc_lib_version(void) {
    return dlcc_version_string();
}
