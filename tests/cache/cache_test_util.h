// tests/cache/cache_test_util.h — helpers shared by the cache store tests: a fresh temporary
// cache directory per test (never the user's cache), keys, blobs, raw SQLite access to the
// database (to age or damage entries) and diagnostics lookup.
#ifndef CACHE_TEST_UTIL_H
#define CACHE_TEST_UTIL_H

#include "dl_cache.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A fresh directory /tmp/dlcc_store_XXXXXX; the cache lives in its subdirectory "c" (created by
// dl_cache_open). DLCC_CACHE_DIR points there too, so nothing can reach the real user cache.
static inline void tmp_root(char root[64], char cdir[80]) {
    snprintf(root, 64, "/tmp/dlcc_store_XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(cdir, 80, "%s/c", root);
    setenv("DLCC_CACHE_DIR", cdir, 1);
    unsetenv("DLCC_CACHE_MAX_SIZE");
    unsetenv("DLCC_CACHE_BUSY_MS");
}

static inline void rm_rf(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: cannot remove %s\n", dir);
    }
}

static inline dl_hash128 key_n(int i) {
    char s[32];
    snprintf(s, sizeof s, "key-%d", i);
    return dl_hash128_of(s, strlen(s));
}

// The byte of a test blob that carries its writer's tag (after the ELF header).
#define BLOB_TAG_AT 64

// `n` bytes derived from `seed` that look like an artifact: a minimal ELF64 shared-object header
// for this machine (what verify and import check) when n >= 65, then pseudo-random bytes; byte
// BLOB_TAG_AT (byte 0 for a shorter blob) is `tag` so a reader can tell which writer made it.
static inline uint8_t *blob_n(size_t n, unsigned seed, uint8_t tag) {
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)(dl_rng_bits(seed, i) & 0xff);
    }
    if (n > BLOB_TAG_AT) {
        static const uint8_t hdr[64] = {
            0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, // e_ident
            3,    0,                                                 // e_type = ET_DYN
#if defined(__aarch64__)
            183,  0, // e_machine = EM_AARCH64
#else
            62,   0, // e_machine = EM_X86_64
#endif
            1,    0,   0,   0,               // e_version
            0,    0,   0,   0,   0, 0, 0, 0, // e_entry
            0,    0,   0,   0,   0, 0, 0, 0, // e_phoff (no program headers)
            0,    0,   0,   0,   0, 0, 0, 0, // e_shoff
            0,    0,   0,   0,               // e_flags
            64,   0,                         // e_ehsize
            56,   0,                         // e_phentsize
            0,    0,                         // e_phnum
            64,   0,   0,   0,   0, 0,       // e_shentsize, e_shnum, e_shstrndx
        };
        memcpy(b, hdr, sizeof hdr);
        b[BLOB_TAG_AT] = tag;
    } else if (n) {
        b[0] = tag;
    }
    return b;
}

static inline dl_cache_entry meta_of(const char *model, double ms) {
    dl_cache_entry m;
    memset(&m, 0, sizeof m);
    m.model = (char *)(uintptr_t)model; // put copies; never freed through this struct
    m.target = (char *)(uintptr_t)"x86_64-pc-linux-gnu/znver3";
    m.compiler_version = (char *)(uintptr_t)"dlcc 0.1.0 (test) LLVM 19.1.7";
    m.source_size = 1234;
    m.compile_ms = ms;
    return m;
}

static inline bool has_diag(const dl_diags *d, const char *needle) {
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        const dl_diag_entry *e = dl_diags_get(d, i);
        if (strstr(e->msg, needle)) {
            return true;
        }
    }
    return false;
}

static inline void dump_diags(const dl_diags *d) {
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        fprintf(stderr, "  diag: %s\n", dl_diags_get(d, i)->msg);
    }
}

// Runs `insert` (an INSERT with ?1 the key's hex, ?2 the blob's length, ?3 its hash's hex and ?4
// the blob) on `db`: a complete, hash-consistent row written behind the store's back. True when
// the row went in.
static inline bool raw_insert_entry(sqlite3 *db, const char *insert, dl_hash128 key,
                                    const uint8_t *blob, size_t len) {
    char kh[33], hh[33];
    dl_hash128_hex(key, kh);
    dl_hash128_hex(dl_hash128_of(blob, len), hh);
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, insert, -1, &st, NULL) == SQLITE_OK;
    if (ok) {
        sqlite3_bind_text(st, 1, kh, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)len);
        sqlite3_bind_text(st, 3, hh, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(st, 4, blob, (int)len, SQLITE_TRANSIENT);
        ok = sqlite3_step(st) == SQLITE_DONE;
    }
    sqlite3_finalize(st);
    return ok;
}

// Runs `sql` on CDIR/cache.db through a separate connection; returns the first column of the
// first row as an integer (or -1 on error, 0 when no rows).
static inline long long raw_sql(const char *cdir, const char *sql) {
    char path[160];
    snprintf(path, sizeof path, "%s/cache.db", cdir);
    sqlite3 *db = NULL;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 10000);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            int rc = sqlite3_step(st);
            v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : rc == SQLITE_DONE ? 0 : -1;
        } else {
            fprintf(stderr, "raw_sql: %s: %s\n", sql, sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

// PRAGMA integrity_check through a separate connection: true when it says "ok".
static inline bool raw_integrity_ok(const char *cdir) {
    char path[160];
    snprintf(path, sizeof path, "%s/cache.db", cdir);
    sqlite3 *db = NULL;
    bool ok = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 10000);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            ok = t && strcmp(t, "ok") == 0;
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return ok;
}

static inline void set_last_used(const char *cdir, dl_hash128 k, long long t) {
    char hex[33], sql[160];
    dl_hash128_hex(k, hex);
    snprintf(sql, sizeof sql, "UPDATE entries SET last_used = %lld WHERE key = '%s'", t, hex);
    (void)raw_sql(cdir, sql);
}

#endif
