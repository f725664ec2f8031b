// runtime/rt_cache.c — dlrt_model_load_cached: loads an artifact by its cache key straight from
// the compilation cache (cache/dl_cache.h, linked statically: base + SQLite, no LLVM).
//
// The cache is opened read-only for the one call and closed again; nothing is cached in the
// runtime. The store's diagnostics (a dl_diags sink) are folded into the thread's last error.
#include "dl_cache.h"
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

// Joins the messages of `d` as "A; B" into buf (or `fallback` when there are none).
static void diags_text(const dl_diags *d, const char *fallback, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; d && i < dl_diags_count(d) && used + 1 < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? "; " : "", dl_diags_get(d, i)->msg);
        if (n < 0) {
            break;
        }
        used += (size_t)n < size - used ? (size_t)n : size - used - 1;
    }
    if (!buf[0]) {
        snprintf(buf, size, "%s", fallback);
    }
}

dlrt_status dlrt_model_load_cached(const char *cache_dir, const char *key_hex, dlrt_model **out) {
    if (!out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "dlrt_model_load_cached: out is NULL");
    }
    *out = NULL;
    dl_hash128 key;
    if (!key_hex || !dl_hash128_parse(key_hex, &key)) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "'%s' is not a cache key (32 hex digits)",
                        key_hex ? key_hex : "(null)");
    }
    dl_diags *d = NULL;
    dl_cache *c = NULL;
    uint8_t *blob = NULL;
    size_t len = 0;
    char why[512];
    dlrt_status rs = DLRT_OK;
    if (dl_diags_create(&d) != DL_OK) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    dl_status st = dl_cache_open_readonly(cache_dir, d, &c);
    if (st != DL_OK) {
        diags_text(d, dl_status_str(st), why, sizeof why);
        rs = st == DL_ERR_NOMEM
                 ? rt__fail(DLRT_ERR_NOMEM, "out of memory")
                 : rt__fail(DLRT_ERR_IO, "cannot open the compilation cache: %s", why);
        goto out;
    }
    st = dl_cache_get(c, key, &blob, &len, NULL, d);
    if (st != DL_OK) {
        diags_text(d, dl_status_str(st), why, sizeof why);
        rs = st == DL_ERR_NOMEM
                 ? rt__fail(DLRT_ERR_NOMEM, "out of memory")
                 : rt__fail(DLRT_ERR_IO, "cannot read the compilation cache in %s: %s",
                            dl_cache_dir(c), why);
        goto out;
    }
    if (!blob) {
        char hex[33];
        dl_hash128_hex(key, hex);
        if (dl_diags_count(d) > 0) { // the store found the entry damaged (and dropped it)
            diags_text(d, "damaged entry", why, sizeof why);
            rs = rt__fail(DLRT_ERR_CORRUPT, "artifact %s in %s: %s", hex, dl_cache_dir(c), why);
        } else {
            rs = rt__fail(DLRT_ERR_INVALID_ARG, "no artifact with key %s in %s", hex,
                          dl_cache_dir(c));
        }
        goto out;
    }
    rs = dlrt_model_load_memory(blob, len, out);
out:
    free(blob);
    dl_cache_close(c);
    dl_diags_destroy(d);
    return rs;
}
