// cache/cache_internal.h — the dl_cache handle and helpers shared by the store's files
// (store.c: open, trust checks, get/put, eviction, maintenance; export.c: export/import files).
#ifndef DL_CACHE_INTERNAL_H
#define DL_CACHE_INTERNAL_H

#include "dl_cache.h"

#include <sqlite3.h>

// 2: entries gain `source` (the model file) and `dims` (NAME=VALUE,...); a version-1 database
// is migrated in place by the first writable open (store.c, setup_schema).
#define DL_CACHE_SCHEMA_VERSION 2
#define DL_CACHE_DB_NAME        "cache.db"
#define DL_CACHE_DEFAULT_MAX    ((uint64_t)2 << 30) // 2 GiB
// Milliseconds a writer waits for another process's lock before giving up. Tests shorten it
// with DLCC_CACHE_BUSY_MS (an undocumented knob: a user has no reason to set it).
#define DL_CACHE_BUSY_MS 10000

struct dl_cache {
    sqlite3 *db;
    char *dir;     // OWNED, as given or defaulted
    char *db_path; // OWNED, dir + "/cache.db"
    bool is_readonly;
    // Why the handle is read-only when dl_cache_open chose it (DLCC_CACHE_READONLY, a directory
    // or database that is not writable); "" for a writable or dl_cache_open_readonly handle.
    char ro_why[320];
    int busy_ms;
    // SQLite's message for the last failure, saved before a ROLLBACK overwrites it; "" if none.
    char errmsg[256];
};

// Largest artifact the store takes (SQLite's default limit on one value is 1e9 bytes).
#define DL_CACHE_MAX_ARTIFACT ((uint64_t)1000000000)

// Converts a failed SQLite call into a warning in `d` (NULL: none) and returns DL_ERR_CACHE
// (DL_ERR_NOMEM for SQLITE_NOMEM). `what` names the operation ("store entry").
dl_status dl_cache__sql_fail(dl_cache *c, dl_diags *d, int rc, const char *what);
// A warning when `d` is not NULL (the store accepts a NULL sink everywhere).
void dl_cache__warn(dl_diags *d, const char *fmt, ...) DL_PRINTF(2, 3);
// Whether `blob` looks like an artifact this build can load: an ELF64 little-endian shared object
// (ET_DYN) for this machine whose program header table lies inside the bytes. A cheap check of
// the header only; the runtime validates the rest when it loads the artifact. On false *why
// says what is wrong.
bool dl_cache__artifact_ok(const uint8_t *blob, size_t len, const char **why);
// Stores one entry with the given timestamps and hit count (put and import), then evicts.
// Returns the SQLite result code (SQLITE_OK on success); reports nothing.
int dl_cache__store_rc(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                       const dl_cache_entry *meta, int64_t created, int64_t last_used,
                       int64_t hits);
// The same, with a failure turned into a warning in `d` and DL_ERR_CACHE.
dl_status dl_cache__store(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                          const dl_cache_entry *meta, int64_t created, int64_t last_used,
                          int64_t hits, dl_diags *d);

#endif
