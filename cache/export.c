// cache/export.c — dlcc-cache export / import: one self-describing file per entry, KEY.dlcc.
//
// Layout (all integers little-endian):
//   "DLCCENT\n" magic (8 bytes), u32 version (1), u32 header bytes that follow before the blob
//   fields, each a u32 length + bytes: key (32 hex), model, target, compiler_version
//   u64 size, u64 source_size, f64 compile_ms (IEEE bits), i64 created, i64 last_used, i64 hits,
//   blob_hash (u64 lo, u64 hi), then the blob (size bytes)
//   trailer: XXH3-128 of every byte before it (u64 lo, u64 hi)
// Import trusts nothing: by default only files that are yours and not writable by group or others
// are read (an artifact is code: a file someone else could write is their code), and magic,
// version, every length, the trailer, the blob hash, the artifact's ELF header and the metadata
// values are checked; a file failing any of them is skipped with a warning naming it, and the
// rest are imported.
#include "cache_internal.h"

#include <sqlite3.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT_MAGIC   "DLCCENT\n"
#define EXPORT_VERSION 1u

static void put_u32(dl_strbuf *b, uint32_t v) {
    unsigned char x[4];
    for (int i = 0; i < 4; i++) {
        x[i] = (unsigned char)(v >> (8 * i));
    }
    dl_strbuf_append(b, (const char *)x, 4);
}

static void put_u64(dl_strbuf *b, uint64_t v) {
    unsigned char x[8];
    for (int i = 0; i < 8; i++) {
        x[i] = (unsigned char)(v >> (8 * i));
    }
    dl_strbuf_append(b, (const char *)x, 8);
}

static void put_str(dl_strbuf *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    put_u32(b, (uint32_t)n);
    dl_strbuf_append(b, s ? s : "", n);
}

static uint64_t f64_bits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

// Serialises one entry into *out (a heap buffer of *out_len bytes).
static dl_status encode(const dl_cache_entry *e, const uint8_t *blob, size_t len, char **out,
                        size_t *out_len) {
    dl_strbuf b = {0};
    dl_strbuf_append(&b, EXPORT_MAGIC, 8);
    put_u32(&b, EXPORT_VERSION);
    put_u32(&b, 0); // header length, patched below
    size_t fields_at = b.len;
    char key_hex[33];
    dl_hash128_hex(e->key, key_hex);
    put_str(&b, key_hex);
    put_str(&b, e->model);
    put_str(&b, e->target);
    put_str(&b, e->compiler_version);
    put_u64(&b, (uint64_t)len);
    put_u64(&b, e->source_size);
    put_u64(&b, f64_bits(e->compile_ms));
    put_u64(&b, (uint64_t)e->created);
    put_u64(&b, (uint64_t)e->last_used);
    put_u64(&b, (uint64_t)e->hits);
    put_u64(&b, e->blob_hash.lo);
    put_u64(&b, e->blob_hash.hi);
    size_t hdr_len = b.len - fields_at;
    dl_strbuf_append(&b, len ? (const char *)blob : "", len);
    if (b.oom || !b.data) {
        dl_strbuf_fini(&b);
        return DL_ERR_NOMEM;
    }
    for (int i = 0; i < 4; i++) {
        b.data[12 + i] = (char)(unsigned char)(hdr_len >> (8 * i));
    }
    dl_hash128 h = dl_hash128_of(b.data, b.len);
    put_u64(&b, h.lo);
    put_u64(&b, h.hi);
    if (b.oom) {
        dl_strbuf_fini(&b);
        return DL_ERR_NOMEM;
    }
    *out_len = b.len;
    *out = dl_strbuf_take(&b);
    return DL_OK;
}

typedef struct reader {
    const unsigned char *p, *end;
} reader;

static bool get_u32(reader *r, uint32_t *v) {
    if (r->end - r->p < 4) {
        return false;
    }
    *v = 0;
    for (int i = 0; i < 4; i++) {
        *v |= (uint32_t)r->p[i] << (8 * i);
    }
    r->p += 4;
    return true;
}

static bool get_u64(reader *r, uint64_t *v) {
    if (r->end - r->p < 8) {
        return false;
    }
    *v = 0;
    for (int i = 0; i < 8; i++) {
        *v |= (uint64_t)r->p[i] << (8 * i);
    }
    r->p += 8;
    return true;
}

// A length-prefixed string as a fresh heap copy; no embedded NULs, at most 64 KiB.
static bool get_str(reader *r, char **out) {
    uint32_t n;
    if (!get_u32(r, &n) || n > 65536 || (uint64_t)(r->end - r->p) < n ||
        memchr(r->p, 0, n) != NULL) {
        return false;
    }
    *out = dl_mem_alloc((size_t)n + 1);
    if (!*out) {
        return false;
    }
    memcpy(*out, r->p, n);
    (*out)[n] = 0;
    r->p += n;
    return true;
}

// Parses and checks one export file. On success *e holds the metadata (OWNED strings) and
// *blob/*len point into `data`. On failure *why names the problem.
static bool decode(const unsigned char *data, size_t size, dl_cache_entry *e, const uint8_t **blob,
                   size_t *len, const char **why) {
    memset(e, 0, sizeof *e);
    if (size < 8 + 4 + 4 + 16 || memcmp(data, EXPORT_MAGIC, 8) != 0) {
        *why = "not a dlcc cache export";
        return false;
    }
    reader r = {data + 8, data + size - 16};
    uint32_t version = 0, hdr_len = 0;
    (void)get_u32(&r, &version);
    (void)get_u32(&r, &hdr_len);
    if (version != EXPORT_VERSION) {
        *why = "unknown format version";
        return false;
    }
    reader t = {data + size - 16, data + size};
    dl_hash128 want = {0, 0};
    (void)get_u64(&t, &want.lo);
    (void)get_u64(&t, &want.hi);
    if (!dl_hash128_eq(dl_hash128_of(data, size - 16), want)) {
        *why = "checksum mismatch";
        return false;
    }
    const unsigned char *fields_at = r.p;
    char *key_hex = NULL;
    uint64_t blob_len = 0, ms = 0, created = 0, used = 0, hits = 0;
    bool ok = get_str(&r, &key_hex) && dl_hash128_parse(key_hex, &e->key) &&
              get_str(&r, &e->model) && get_str(&r, &e->target) &&
              get_str(&r, &e->compiler_version) && get_u64(&r, &blob_len) &&
              get_u64(&r, &e->source_size) && get_u64(&r, &ms) && get_u64(&r, &created) &&
              get_u64(&r, &used) && get_u64(&r, &hits) && get_u64(&r, &e->blob_hash.lo) &&
              get_u64(&r, &e->blob_hash.hi) && (size_t)(r.p - fields_at) == hdr_len &&
              (uint64_t)(r.end - r.p) == blob_len;
    free(key_hex);
    if (!ok) {
        *why = "malformed header";
        dl_cache_entry_fini(e);
        return false;
    }
    memcpy(&e->compile_ms, &ms, sizeof ms);
    e->created = (int64_t)created;
    e->last_used = (int64_t)used;
    e->hits = (int64_t)hits;
    e->size = blob_len;
    *blob = r.p;
    *len = (size_t)blob_len;
    if (!dl_hash128_eq(dl_hash128_of(*blob, *len), e->blob_hash)) {
        *why = "artifact hash mismatch";
        dl_cache_entry_fini(e);
        return false;
    }
    return true;
}

dl_status dl_cache_export(dl_cache *c, const char *dir, dl_diags *d, int64_t *out_n) {
    *out_n = 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        dl_cache__warn(d, "cannot create the export directory %s (%s)", dir, strerror(errno));
        return DL_ERR_IO;
    }
    dl_cache_entry *es = NULL;
    size_t n = 0;
    DL_TRY(dl_cache_list(c, &es, &n));
    dl_status s = DL_OK;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(c->db, "SELECT blob FROM entries WHERE key = ?1", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        s = dl_cache__sql_fail(c, d, rc, "export the entries");
    }
    for (size_t i = 0; s == DL_OK && i < n; i++) {
        char key_hex[33];
        dl_hash128_hex(es[i].key, key_hex);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, key_hex, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            continue; // removed since the listing
        }
        if (rc != SQLITE_ROW) {
            s = dl_cache__sql_fail(c, d, rc, "export the entries");
            break;
        }
        const uint8_t *blob = sqlite3_column_blob(st, 0);
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        if (!dl_hash128_eq(dl_hash128_of(blob ? (const void *)blob : "", len), es[i].blob_hash)) {
            dl_cache__warn(d, "cache entry %s is damaged (its hash does not match); not exported",
                           key_hex);
            continue;
        }
        char *buf = NULL;
        size_t buf_len = 0;
        s = encode(&es[i], blob, len, &buf, &buf_len);
        if (s != DL_OK) {
            break;
        }
        size_t plen = strlen(dir) + 40;
        char *path = dl_mem_alloc(plen);
        if (!path) {
            free(buf);
            s = DL_ERR_NOMEM;
            break;
        }
        snprintf(path, plen, "%s/%s.dlcc", dir, key_hex);
        s = dl_write_file_atomic(path, buf, buf_len);
        if (s != DL_OK) {
            dl_cache__warn(d, "cannot write %s (%s)", path, strerror(errno));
        } else {
            (*out_n)++;
        }
        free(path);
        free(buf);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++) {
        dl_cache_entry_fini(&es[i]);
    }
    free(es);
    return s;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Reads one export file through an open descriptor (what was checked is what is read). false
// with *why set when it cannot be read whole.
static bool read_fd(int fd, uint64_t size, char **out, const char **why) {
    *out = NULL;
    if (size > DL_CACHE_MAX_ARTIFACT + 65536 * 4 + 256) {
        *why = "it is larger than any artifact the cache takes";
        return false;
    }
    char *buf = dl_mem_alloc(size ? (size_t)size : 1);
    if (!buf) {
        *why = "out of memory reading it";
        return false;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, (size_t)size - got, (off_t)got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            free(buf);
            *why = n < 0 ? "it cannot be read" : "it shrank while being read";
            return false;
        }
        got += (size_t)n;
    }
    *out = buf;
    return true;
}

// Whether a string from an export file is fit to store and print: no control characters (a
// model name must not carry terminal escape sequences into `dlcc-cache ls`).
static bool plain_text(const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f) {
            return false;
        }
    }
    return true;
}

// The checks `verify` applies to a stored row, applied to a decoded entry before it is stored;
// *why names the first failure. Future times (another machine's clock) are clamped to now.
static bool entry_ok(dl_cache_entry *e, const uint8_t *blob, size_t len, const char **why) {
    int64_t now = (int64_t)time(NULL);
    if (!isfinite(e->compile_ms) || e->compile_ms < 0) {
        *why = "its compile time is not a non-negative number";
        return false;
    }
    if (e->created < 0 || e->last_used < 0 || e->source_size > (uint64_t)INT64_MAX) {
        *why = "a time or size is out of range";
        return false;
    }
    if (!plain_text(e->model) || !plain_text(e->target) || !plain_text(e->compiler_version)) {
        *why = "its model, target or compiler version holds control characters";
        return false;
    }
    if ((uint64_t)len > DL_CACHE_MAX_ARTIFACT) {
        *why = "its artifact is larger than the cache takes";
        return false;
    }
    if (!dl_cache__artifact_ok(blob, len, why)) {
        return false;
    }
    e->created = e->created > now ? now : e->created;
    e->last_used = e->last_used > now ? now : e->last_used;
    return true;
}

// Opens DIR/NAME for import and checks who could have written it. Returns the descriptor, or -1
// with *why set (the file is skipped).
static int open_trusted(const char *path, bool trust_others, struct stat *st, const char **why,
                        char *buf, size_t buf_size) {
    int fd =
        open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (trust_others ? 0 : O_NOFOLLOW));
    if (fd < 0) {
        if (errno == ELOOP) {
            *why = "it is a symbolic link (import follows links only with --trust)";
        } else {
            snprintf(buf, buf_size, "it cannot be opened (%s)", strerror(errno));
            *why = buf;
        }
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        *why = "it is not a regular file";
        close(fd);
        return -1;
    }
    if (!trust_others && st->st_uid != geteuid()) {
        snprintf(buf, buf_size,
                 "it is owned by uid %ld, not you (uid %ld), and an artifact is code dlcc will "
                 "load; import it with --trust only if you trust that user",
                 (long)st->st_uid, (long)geteuid());
        *why = buf;
        close(fd);
        return -1;
    }
    if (!trust_others && (st->st_mode & (S_IWGRP | S_IWOTH))) {
        *why = "it is writable by group or others, so anyone of them may have replaced the "
               "artifact (code dlcc will load); import it with --trust only if you trust them";
        close(fd);
        return -1;
    }
    return fd;
}

dl_status dl_cache_import(dl_cache *c, const char *dir, bool trust_others, dl_diags *d,
                          int64_t *out_n, int64_t *out_skipped) {
    *out_n = 0;
    *out_skipped = 0;
    DIR *dh = opendir(dir);
    if (!dh) {
        dl_cache__warn(d, "cannot read the directory %s (%s)", dir, strerror(errno));
        return DL_ERR_IO;
    }
    // Sorted names, so the import order (and thus LRU order among equal times) is reproducible.
    DL_VEC(char *) names = {0};
    dl_status s = DL_OK;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl < 6 || strcmp(de->d_name + nl - 5, ".dlcc") != 0) {
            continue;
        }
        size_t plen = strlen(dir) + nl + 2;
        char *p = dl_mem_alloc(plen);
        if (!p || !DL_VEC_PUSH(&names, p)) {
            free(p);
            s = DL_ERR_NOMEM;
            break;
        }
        snprintf(p, plen, "%s/%s", dir, de->d_name);
    }
    closedir(dh);
    if (names.len) {
        qsort(names.data, names.len, sizeof(char *), cmp_str);
    }
    // One bad file never stops the rest: it is skipped with a warning naming it and counted.
    // Only a problem of the database itself (full disk, lock, damage) ends the import early.
    for (size_t i = 0; s == DL_OK && i < names.len; i++) {
        const char *path = names.data[i];
        char buf[256];
        const char *why = NULL;
        struct stat st;
        char *data = NULL;
        int fd = open_trusted(path, trust_others, &st, &why, buf, sizeof buf);
        if (fd >= 0) {
            (void)read_fd(fd, (uint64_t)st.st_size, &data, &why);
            close(fd);
        }
        dl_cache_entry e;
        memset(&e, 0, sizeof e);
        const uint8_t *blob = NULL;
        size_t len = 0;
        if (data) {
            if (!decode((const unsigned char *)data, (size_t)st.st_size, &e, &blob, &len, &why)) {
                snprintf(buf, sizeof buf, "it is damaged (%s)", why);
                why = buf;
            } else if (!entry_ok(&e, blob, len, &why)) {
                dl_cache_entry_fini(&e);
            } else {
                int rc = dl_cache__store_rc(c, e.key, blob, len, &e, e.created, e.last_used, 0);
                int prim = rc & 0xff;
                if (rc == SQLITE_OK) {
                    (*out_n)++;
                } else if (prim == SQLITE_CONSTRAINT || prim == SQLITE_MISMATCH ||
                           prim == SQLITE_TOOBIG || prim == SQLITE_RANGE) {
                    snprintf(buf, sizeof buf, "the database refused it (%s)", sqlite3_errstr(rc));
                    why = buf;
                } else {
                    s = dl_cache__sql_fail(c, d, rc, "import an entry");
                    dl_cache__warn(d, "the import stopped at %s; %lld entr%s imported before it",
                                   path, (long long)*out_n, *out_n == 1 ? "y was" : "ies were");
                }
                dl_cache_entry_fini(&e);
            }
        }
        free(data);
        if (s == DL_OK && (why != NULL)) {
            (*out_skipped)++;
            dl_cache__warn(d, "skipping %s: %s", path, why);
        }
    }
    for (size_t i = 0; i < names.len; i++) {
        free(names.data[i]);
    }
    free(names.data);
    return s;
}
