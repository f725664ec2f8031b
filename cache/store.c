// cache/store.c — the compilation cache store: one SQLite database (DIR/cache.db, WAL mode).
//
// Tables (schema version in PRAGMA user_version):
//   entries(key TEXT PRIMARY KEY = 32 hex digits, metadata..., blob_hash TEXT, blob BLOB,
//           source TEXT, dims TEXT)  (source and dims came with schema version 2: a version-1
//           database is migrated in place, inside one write transaction, by a writable open)
//   stats(name, value)   hits / misses / compile_ms_saved since the database was created
//   config(name, value)  max_size (0: no limit)
//   pins(key, pid)       entries in use by a process; pins of dead processes are dropped lazily
// Invariants: every write runs in one BEGIN IMMEDIATE ... COMMIT (rolled back on any error), so
// another process never sees a partial entry; values always go through bound parameters; an
// entry's blob is only returned after its XXH3-128 matched blob_hash. Any failure is reported as
// a warning plus DL_ERR_CACHE and never crashes: callers go on without the cache.
#include "cache_internal.h"

#include <sqlite3.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Small helpers

void dl_cache__warn(dl_diags *d, const char *fmt, ...) {
    if (!d) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(d, DL_SEV_WARNING, DL_NO_LOC, fmt, ap);
    va_end(ap);
}

dl_status dl_cache__sql_fail(dl_cache *c, dl_diags *d, int rc, const char *what) {
    const char *path = c ? c->db_path : "(cache)";
    char msg[256];
    if (c && c->errmsg[0]) {
        snprintf(msg, sizeof msg, "%s", c->errmsg);
    } else {
        snprintf(msg, sizeof msg, "%s", (c && c->db) ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    }
    if (c) {
        c->errmsg[0] = 0; // consumed
    }
    if ((rc & 0xff) == SQLITE_IOERR && c && c->db && sqlite3_system_errno(c->db) != 0) {
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, ": %s", strerror(sqlite3_system_errno(c->db)));
    }
    switch (rc & 0xff) {
    case SQLITE_NOMEM:
        return DL_ERR_NOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        dl_cache__warn(d,
                       "cache database %s is damaged (%s); the compile goes on without the cache; "
                       "run dlcc-cache clear to start afresh",
                       path, msg);
        break;
    case SQLITE_FULL:
        dl_cache__warn(d,
                       "cannot %s in the cache database %s: the disk is full (%s); the compile "
                       "goes on without the cache; free some space or run dlcc-cache prune",
                       what, path, msg);
        break;
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        dl_cache__warn(d,
                       "cannot %s in the cache database %s (%s); the compile goes on without the "
                       "cache; check that the directory is writable or set DLCC_CACHE_DIR",
                       what, path, msg);
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        dl_cache__warn(d,
                       "cache database %s stayed locked by another process for %d ms (%s); the "
                       "compile goes on without the cache",
                       path, c ? c->busy_ms : 0, msg);
        break;
    default:
        dl_cache__warn(d,
                       "cannot %s in the cache database %s (%s); the compile goes on without "
                       "the cache",
                       what, path, msg);
        break;
    }
    return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB ? DL_ERR_CORRUPT
                                                                         : DL_ERR_CACHE;
}

static int64_t now_s(void) {
    return (int64_t)time(NULL);
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = dl_mem_alloc(n);
    if (p) {
        memcpy(p, s, n);
    }
    return p;
}

static char *path_join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *p = dl_mem_alloc(na + nb + 2);
    if (!p) {
        return NULL;
    }
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

static int exec(dl_cache *c, const char *sql) {
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL);
}

static void rollback(dl_cache *c) {
    if (!c->errmsg[0]) {
        snprintf(c->errmsg, sizeof c->errmsg, "%s", sqlite3_errmsg(c->db));
    }
    // Ignoring the result is deliberate: after some errors SQLite has already rolled back.
    (void)sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

static int prepare(dl_cache *c, const char *sql, sqlite3_stmt **out) {
    return sqlite3_prepare_v2(c->db, sql, -1, out, NULL);
}

static int bind_text(sqlite3_stmt *st, int i, const char *s) {
    return sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

static char *col_strdup(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return str_dup(t ? (const char *)t : "");
}

// A duration in milliseconds as stored: NaN, infinite or negative ones become 0 (unknown).
static double sane_ms(double v) {
    return isfinite(v) && v >= 0 ? v : 0.0;
}

// Whether column `i` of the row (a typeof(...) result) reads `type`.
static bool col_is(sqlite3_stmt *st, int i, const char *type) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t && strcmp((const char *)t, type) == 0;
}

static bool pid_alive(int64_t pid) {
    if (pid <= 0 || pid != (int64_t)(pid_t)pid) {
        return false;
    }
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

void dl_cache_entry_fini(dl_cache_entry *e) {
    if (!e) {
        return;
    }
    free(e->model);
    free(e->target);
    free(e->compiler_version);
    free(e->source);
    free(e->dims);
    e->model = e->target = e->compiler_version = e->source = e->dims = NULL;
}

const char *dl_cache_dir(const dl_cache *c) {
    return c ? c->dir : NULL;
}

const char *dl_cache_readonly_reason(const dl_cache *c) {
    return c && c->is_readonly && c->ro_why[0] ? c->ro_why : NULL;
}

// An environment switch: 1 for 1/true/yes/on, 0 for 0/false/no/off, -1 when unset or other.
static int env_switch(const char *name) {
    const char *v = getenv(name);
    if (!v) {
        return -1;
    }
    static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"0", "false", "no",
                                                                                "off"};
    for (size_t i = 0; i < DL_ARRAY_LEN(on); i++) {
        if (strcasecmp(v, on[i]) == 0) {
            return 1;
        }
        if (strcasecmp(v, off[i]) == 0) {
            return 0;
        }
    }
    return -1;
}

bool dl_cache_env_disabled(void) {
    return env_switch("DLCC_CACHE") == 0;
}

bool dl_cache_parse_size(const char *s, uint64_t *out) {
    if (!s || !isdigit((unsigned char)*s)) {
        return false;
    }
    uint64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        uint64_t dg = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - dg) / 10) {
            return false;
        }
        v = v * 10 + dg;
    }
    int shift = 0;
    switch (toupper((unsigned char)*s)) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) {
        s++;
        if (*s == 'i' && s[1] == 'B') { // "2GiB"
            s += 2;
        } else if (*s == 'B' || *s == 'b') { // "2GB"
            s++;
        }
        if (v > (UINT64_MAX >> shift)) {
            return false;
        }
        v <<= shift;
    } else if (*s == 'B' || *s == 'b') {
        s++;
    }
    if (*s) {
        return false;
    }
    *out = v;
    return true;
}

static uint64_t le_u(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

bool dl_cache__artifact_ok(const uint8_t *blob, size_t len, const char **why) {
    // ELF64 header fields (System V gABI): e_ident[16], e_type@16, e_machine@18, e_version@20,
    // e_phoff@32, e_ehsize@52, e_phentsize@54, e_phnum@56.
    if (len < 64 || memcmp(blob, "\177ELF", 4) != 0) {
        *why = "it is not an ELF file";
        return false;
    }
    if (blob[4] != 2 || blob[5] != 1 || blob[6] != 1) {
        *why = "it is not a 64-bit little-endian ELF file";
        return false;
    }
    if (le_u(blob + 16, 2) != 3) { // ET_DYN
        *why = "it is not an ELF shared object";
        return false;
    }
#if defined(__x86_64__)
    if (le_u(blob + 18, 2) != 62) { // EM_X86_64
        *why = "it is not built for x86-64";
        return false;
    }
#elif defined(__aarch64__)
    if (le_u(blob + 18, 2) != 183) { // EM_AARCH64
        *why = "it is not built for AArch64";
        return false;
    }
#endif
    uint64_t phoff = le_u(blob + 32, 8), phentsize = le_u(blob + 54, 2), phnum = le_u(blob + 56, 2);
    if (le_u(blob + 52, 2) != 64 || (phnum && phentsize != 56) || phoff > len ||
        phnum * 56 > len - phoff) {
        *why = "its ELF header is malformed";
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Location and trust

dl_status dl_cache_default_dir(char **out) {
    *out = NULL;
    const char *env = getenv("DLCC_CACHE_DIR");
    if (env && *env) {
        *out = str_dup(env);
        return *out ? DL_OK : DL_ERR_NOMEM;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && *xdg == '/') { // the XDG spec says relative values are to be ignored
        *out = path_join(xdg, "dlcc");
        return *out ? DL_OK : DL_ERR_NOMEM;
    }
    const char *home = getenv("HOME");
    if (home && *home) {
        *out = path_join(home, ".cache/dlcc");
        return *out ? DL_OK : DL_ERR_NOMEM;
    }
    return DL_ERR_CACHE;
}

// mkdir -p: intermediate directories with the usual mode, the last one 0700.
static bool mkdir_p(const char *dir) {
    char *p = str_dup(dir);
    if (!p) {
        return false;
    }
    bool ok = true;
    for (char *s = p + 1; *s && ok; s++) {
        if (*s != '/') {
            continue;
        }
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            ok = false;
        }
        *s = '/';
    }
    if (ok && mkdir(p, 0700) != 0 && errno != EEXIST) {
        ok = false;
    }
    free(p);
    return ok;
}

// Refuses a directory or database owned by someone else or writable by group/others: a cache
// someone else can write is a way to make us load their code.
static bool trusted(const struct stat *st, const char *path, bool is_dir, dl_diags *d) {
    const char *what = is_dir ? "cache directory" : "cache database";
    if (st->st_uid != geteuid()) {
        dl_cache__warn(d,
                       "the %s %s is owned by uid %ld, not you (uid %ld); the compile goes on "
                       "without the cache; set DLCC_CACHE_DIR to a directory of your own",
                       what, path, (long)st->st_uid, (long)geteuid());
        return false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        if (is_dir) {
            dl_cache__warn(d,
                           "the cache directory %s is writable by group or others; the compile "
                           "goes on without the cache; run chmod 700 %s",
                           path, path);
        } else {
            dl_cache__warn(d,
                           "the cache database %s is writable by group or others; the compile "
                           "goes on without the cache; run chmod 600 %s if nobody else can have "
                           "written to it, else delete the cache (rm -f %s %s-wal %s-shm)",
                           path, path, path, path, path);
        }
        return false;
    }
    return true;
}

// The files SQLite opens next to the database: the write-ahead log and its index (WAL mode) and
// the rollback journal (a database still in rollback mode, or one switching modes). SQLite
// replays a -wal or -journal it finds, so each must pass the same rules as the database: one
// planted by another user while the directory was writable would otherwise survive the
// chmod 700 / chmod 600 fix and be read as ours.
static const char *const side_suffixes[] = {"-wal", "-shm", "-journal"};

// Checks DIR/cache.db<suffix> through `dirfd` (O_NOFOLLOW, then fstat on the open file, so what
// is checked is what is there). Absent is fine. Any other trouble is a warning naming the file
// and the fix, and false.
static bool side_file_ok(dl_cache *c, int dirfd, const char *suffix, dl_diags *d) {
    char name[32], path[4200];
    snprintf(name, sizeof name, "%s%s", DL_CACHE_DB_NAME, suffix);
    snprintf(path, sizeof path, "%s%s", c->db_path, suffix);
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 && errno == ENOENT) {
        return true;
    }
    const char *why = NULL;
    char buf[160];
    struct stat st;
    if (fd < 0) {
        if (errno == ELOOP) {
            why = "is a symbolic link";
        } else {
            snprintf(buf, sizeof buf, "cannot be opened (%s)", strerror(errno));
            why = buf;
        }
    } else if (fstat(fd, &st) != 0) {
        snprintf(buf, sizeof buf, "cannot be checked (%s)", strerror(errno));
        why = buf;
    } else if (!S_ISREG(st.st_mode)) {
        why = "is not a regular file";
    } else if (st.st_uid != geteuid()) {
        snprintf(buf, sizeof buf, "is owned by uid %ld, not you (uid %ld)", (long)st.st_uid,
                 (long)geteuid());
        why = buf;
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        why = "is writable by group or others";
    }
    if (fd >= 0) {
        close(fd);
    }
    if (!why) {
        return true;
    }
    dl_cache__warn(d,
                   "the cache file %s %s: SQLite would read it as part of the cache, and "
                   "someone else may have written entries into it; the compile goes on without "
                   "the cache; remove it (rm -f %s-wal %s-shm %s-journal: at worst the last "
                   "few entries are compiled again)",
                   path, why, c->db_path, c->db_path, c->db_path);
    return false;
}

// A quick look at the file header, so that a garbage or truncated database is refused at open
// rather than midway through a compile. SQLite's own errors (NOTADB, CORRUPT) catch the rest.
static bool header_ok(const char *path, int fd, int busy_ms, char *why, size_t why_size) {
    struct stat st;
    unsigned char h[100];
    // Up to 3 looks 50 ms apart, within the time we would wait for another process's lock.
    int max_attempts = busy_ms / 50 < 3 ? busy_ms / 50 : 3;
    for (int attempt = 0;; attempt++) {
        if (fstat(fd, &st) != 0) {
            snprintf(why, why_size, "cannot stat it");
            return false;
        }
        if (st.st_size == 0) {
            return true; // a new database
        }
        ssize_t n = pread(fd, h, sizeof h, 0);
        if (n != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0) {
            snprintf(why, why_size, "not an SQLite database");
            return false;
        }
        uint32_t page = (uint32_t)h[16] << 8 | h[17];
        uint64_t page_size = page == 1 ? 65536 : page;
        uint32_t change =
            (uint32_t)h[24] << 24 | (uint32_t)h[25] << 16 | (uint32_t)h[26] << 8 | h[27];
        uint32_t valid =
            (uint32_t)h[92] << 24 | (uint32_t)h[93] << 16 | (uint32_t)h[94] << 8 | h[95];
        uint64_t n_pages = (uint64_t)((uint32_t)h[28] << 24 | (uint32_t)h[29] << 16 |
                                      (uint32_t)h[30] << 8 | h[31]);
        if (change != valid || (uint64_t)st.st_size >= n_pages * page_size) {
            return true;
        }
        // Shorter than its header says. A checkpoint in another process writes page 1 before
        // extending the file, so look again before calling it truncated.
        if (attempt >= max_attempts) {
            snprintf(why, why_size, "truncated: %lld of %llu bytes", (long long)st.st_size,
                     (unsigned long long)(n_pages * page_size));
            (void)path;
            return false;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS entries("
    " key TEXT PRIMARY KEY NOT NULL CHECK(length(key) = 32),"
    " model TEXT NOT NULL, target TEXT NOT NULL, compiler_version TEXT NOT NULL,"
    " size INTEGER NOT NULL, source_size INTEGER NOT NULL, compile_ms REAL NOT NULL,"
    " created INTEGER NOT NULL, last_used INTEGER NOT NULL, hits INTEGER NOT NULL DEFAULT 0,"
    " blob_hash TEXT NOT NULL, blob BLOB NOT NULL,"
    " source TEXT NOT NULL DEFAULT '', dims TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_used);"
    "CREATE TABLE IF NOT EXISTS stats(name TEXT PRIMARY KEY NOT NULL, value NOT NULL);"
    "CREATE TABLE IF NOT EXISTS config(name TEXT PRIMARY KEY NOT NULL, value NOT NULL);"
    "CREATE TABLE IF NOT EXISTS pins(key TEXT NOT NULL, pid INTEGER NOT NULL,"
    " PRIMARY KEY(key, pid));"
    "INSERT OR IGNORE INTO stats(name, value) VALUES ('hits', 0), ('misses', 0),"
    " ('compile_ms_saved', 0.0);"
    "PRAGMA user_version = 2;";

// Version 1 -> 2: the columns a version-1 table lacks (old entries get "": unknown).
static const char migrate_1_2_sql[] =
    "ALTER TABLE entries ADD COLUMN source TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE entries ADD COLUMN dims TEXT NOT NULL DEFAULT '';"
    "PRAGMA user_version = 2;";

static int read_user_version(dl_cache *c, int *out) {
    sqlite3_stmt *st = NULL;
    int rc = prepare(c, "PRAGMA user_version", &st);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(st, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

// Creates or checks the schema (read-write handles only).
static dl_status setup_schema(dl_cache *c, bool is_new, dl_diags *d) {
    // Free pages go back to the file system after clear/prune (incremental_vacuum) without a
    // VACUUM, which would need every other process out of the database. Only effective while the
    // database is empty (before the WAL switch writes page 1); a no-op afterwards.
    // Setting it on an existing database may want a write lock, and losing the race to create
    // the database only loses the space saving: so only on an empty file, and failure is fine.
    if (is_new) {
        (void)exec(c, "PRAGMA auto_vacuum = INCREMENTAL");
    }
    int rc;
    // journal_mode=WAL needs an exclusive lock only the first time; the busy handler is not
    // always invoked for it, so retry by hand for as long as the busy timeout.
    rc = SQLITE_BUSY;
    for (int waited = 0; waited <= c->busy_ms; waited += 10) {
        rc = exec(c, "PRAGMA journal_mode = WAL");
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) {
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, d, rc, "switch to WAL mode");
    }
    int ver = 0;
    rc = read_user_version(c, &ver);
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, d, rc, "read the schema version");
    }
    if (ver == DL_CACHE_SCHEMA_VERSION) {
        // Still verify the tables are readable: a damaged file may pass the header check.
        sqlite3_stmt *st = NULL;
        rc = prepare(c, "SELECT count(*) FROM entries", &st);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, d, rc, "read the entries");
    }
    if (ver > DL_CACHE_SCHEMA_VERSION) {
        dl_cache__warn(d,
                       "cache database %s has schema version %d, newer than this dlcc knows (%d); "
                       "the compile goes on without the cache; set DLCC_CACHE_DIR to use "
                       "another cache",
                       c->db_path, ver, DL_CACHE_SCHEMA_VERSION);
        return DL_ERR_CACHE;
    }
    // Create (version 0) or migrate (version 1) under the write lock, after reading the version
    // again: another process may have done it since.
    rc = exec(c, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, d, rc, "create the schema");
    }
    rc = read_user_version(c, &ver);
    if (rc == SQLITE_OK && ver == 0) {
        rc = exec(c, schema_sql);
    } else if (rc == SQLITE_OK && ver == 1) {
        rc = exec(c, migrate_1_2_sql);
    }
    if (rc == SQLITE_OK) {
        rc = exec(c, "COMMIT");
    }
    if (rc != SQLITE_OK) {
        rollback(c);
        return dl_cache__sql_fail(c, d, rc, ver == 1 ? "upgrade the schema" : "create the schema");
    }
    return DL_OK;
}

// Why this process must not write the cache: DLCC_CACHE_READONLY, or a directory or database
// that exists and is not writable by us (access(2) with the effective ids; root passes it unless
// the file system is read-only). Writes the reason into why[] and returns true; false: writable.
static bool readonly_why(const dl_cache *c, char *why, size_t size) {
    if (env_switch("DLCC_CACHE_READONLY") == 1) {
        snprintf(why, size, "DLCC_CACHE_READONLY=%s", getenv("DLCC_CACHE_READONLY"));
        return true;
    }
    struct stat st;
    if (stat(c->dir, &st) == 0 && S_ISDIR(st.st_mode) &&
        faccessat(AT_FDCWD, c->dir, W_OK, AT_EACCESS) != 0) {
        snprintf(why, size, "the cache directory %s is not writable: %s", c->dir, strerror(errno));
        return true;
    }
    if (lstat(c->db_path, &st) == 0 && S_ISREG(st.st_mode) &&
        faccessat(AT_FDCWD, c->db_path, W_OK, AT_EACCESS) != 0) {
        snprintf(why, size, "the cache database %s is not writable: %s", c->db_path,
                 strerror(errno));
        return true;
    }
    return false;
}

// "file:PATH?immutable=1" with PATH percent-encoded where URI syntax needs it (SQLite's URI
// filenames). NULL when out of memory.
static char *immutable_uri(const char *path) {
    size_t n = strlen(path);
    char *u = dl_mem_alloc(3 * n + 32);
    if (!u) {
        return NULL;
    }
    char *p = u + sprintf(u, "file:");
    for (const char *s = path; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '%' || ch == '?' || ch == '#' || ch < 0x21 || ch >= 0x7f) {
            p += sprintf(p, "%%%02X", ch);
        } else {
            *p++ = (char)ch;
        }
    }
    strcpy(p, "?immutable=1");
    return u;
}

// is_readonly: open read-only; is_auto: read-write unless readonly_why says otherwise.
static dl_status open_impl(const char *dir_in, bool is_readonly, bool is_auto, dl_diags *d,
                           dl_cache **out) {
    *out = NULL;
    dl_status s = DL_OK;
    int fd = -1, dirfd = -1;
    dl_cache *c = dl_mem_calloc(1, sizeof *c);
    if (!c) {
        return DL_ERR_NOMEM;
    }
    c->is_readonly = is_readonly;
    c->busy_ms = DL_CACHE_BUSY_MS;
    const char *busy_env = getenv("DLCC_CACHE_BUSY_MS");
    if (busy_env && *busy_env) {
        long v = strtol(busy_env, NULL, 10);
        if (v >= 0 && v <= 600000) {
            c->busy_ms = (int)v;
        }
    }
    if (dir_in) {
        c->dir = str_dup(dir_in);
        if (!c->dir) {
            s = DL_ERR_NOMEM;
            goto out;
        }
    } else {
        s = dl_cache_default_dir(&c->dir);
        if (s == DL_ERR_CACHE) {
            dl_cache__warn(d, "no cache directory: none of DLCC_CACHE_DIR, XDG_CACHE_HOME and "
                              "HOME is set; the compile goes on without the cache");
        }
        if (s != DL_OK) {
            goto out;
        }
    }
    c->db_path = path_join(c->dir, DL_CACHE_DB_NAME);
    if (!c->db_path) {
        s = DL_ERR_NOMEM;
        goto out;
    }
    if (is_auto && readonly_why(c, c->ro_why, sizeof c->ro_why)) {
        is_readonly = c->is_readonly = true;
    }

    // The directory.
    if (!is_readonly && !mkdir_p(c->dir)) {
        dl_cache__warn(d,
                       "cannot create the cache directory %s (%s); the compile goes on without "
                       "the cache; set DLCC_CACHE_DIR to a writable directory",
                       c->dir, strerror(errno));
        s = DL_ERR_CACHE;
        goto out;
    }
    // The directory is opened once and everything in it is checked through that descriptor
    // (O_NOFOLLOW + fstat): what is checked is what is there, not what a path named earlier.
    struct stat st, dir_st, db_st;
    dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0 || fstat(dirfd, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) {
        int e = dirfd < 0 ? errno : ENOTDIR;
        dl_cache__warn(d, "the cache directory %s %s%s; the compile goes on without the cache",
                       c->dir,
                       e == ENOENT    ? "does not exist"
                       : e == ENOTDIR ? "is not a directory"
                                      : "cannot be opened: ",
                       e == ENOENT || e == ENOTDIR ? "" : strerror(e));
        s = DL_ERR_CACHE;
        goto out;
    }
    if (!trusted(&dir_st, c->dir, true, d)) {
        s = DL_ERR_CACHE;
        goto out;
    }

    // The database file: created here with 0600 so it never exists with looser permissions.
    fd = openat(dirfd, DL_CACHE_DB_NAME,
                (is_readonly ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                    O_NOCTTY,
                0600);
    if (fd < 0 && errno == ENOENT && c->ro_why[0]) {
        dl_cache__warn(d,
                       "cannot create the cache database %s: the cache is read-only (%s); the "
                       "compile goes on without the cache; set DLCC_CACHE_DIR to a writable "
                       "directory to keep artifacts",
                       c->db_path, c->ro_why);
        s = DL_ERR_CACHE;
        goto out;
    }
    if (fd < 0) {
        int e = errno;
        dl_cache__warn(d,
                       "cannot %s the cache database %s (%s); the compile goes on without the "
                       "cache%s",
                       is_readonly ? "open" : "create", c->db_path,
                       e == ELOOP ? "it is a symbolic link" : strerror(e),
                       (e == EACCES || e == EROFS || e == EPERM)
                           ? "; check that the directory is writable or set DLCC_CACHE_DIR"
                           : "");
        s = DL_ERR_CACHE;
        goto out;
    }
    if (fstat(fd, &db_st) != 0 || !S_ISREG(db_st.st_mode)) {
        dl_cache__warn(d,
                       "the cache database %s is not a regular file; the compile goes on "
                       "without the cache",
                       c->db_path);
        s = DL_ERR_CACHE;
        goto out;
    }
    if (!trusted(&db_st, c->db_path, false, d)) {
        s = DL_ERR_CACHE;
        goto out;
    }
    // Every other file SQLite may open, before SQLite opens anything.
    for (size_t i = 0; i < DL_ARRAY_LEN(side_suffixes); i++) {
        if (!side_file_ok(c, dirfd, side_suffixes[i], d)) {
            s = DL_ERR_CACHE;
            goto out;
        }
    }
    bool is_new = db_st.st_size == 0;
    char why[96];
    if (!header_ok(c->db_path, fd, c->busy_ms, why, sizeof why)) {
        dl_cache__warn(d,
                       "cache database %s is damaged (%s); the compile goes on without the "
                       "cache; run dlcc-cache clear to start afresh",
                       c->db_path, why);
        s = DL_ERR_CORRUPT;
        goto out;
    }
    close(fd);
    fd = -1;

    int flags = (is_readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX |
                SQLITE_OPEN_NOFOLLOW;
    // A WAL database is read through its -shm index, which SQLite must create when it is not
    // there: impossible in a directory we cannot write. Without a -wal nobody can write either
    // (a writer needs to create it), so the file holds every entry and is opened immutable.
    char *uri = NULL;
    struct stat wal_st;
    char wal_name[32];
    snprintf(wal_name, sizeof wal_name, "%s-wal", DL_CACHE_DB_NAME);
    if (is_readonly && faccessat(dirfd, ".", W_OK, AT_EACCESS) != 0 &&
        fstatat(dirfd, wal_name, &wal_st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
        uri = immutable_uri(c->db_path);
        if (!uri) {
            s = DL_ERR_NOMEM;
            goto out;
        }
        flags |= SQLITE_OPEN_URI;
    }
    int rc = sqlite3_open_v2(uri ? uri : c->db_path, &c->db, flags, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        s = dl_cache__sql_fail(c, d, rc, "open");
        goto out;
    }
    // SQLite opened the paths itself: they must still name what was checked above. Only the
    // directory's owner can change them now (it is ours and closed to others), so this catches a
    // directory path that was repointed (a symbolic link swapped) while we looked.
    if (stat(c->dir, &st) != 0 || st.st_dev != dir_st.st_dev || st.st_ino != dir_st.st_ino ||
        lstat(c->db_path, &st) != 0 || st.st_dev != db_st.st_dev || st.st_ino != db_st.st_ino) {
        dl_cache__warn(d,
                       "the cache directory %s changed while it was being opened; the compile "
                       "goes on without the cache",
                       c->dir);
        s = DL_ERR_CACHE;
        goto out;
    }
    // The database is data, never code: no triggers or views from the file run, schema-defined
    // SQL may not call functions with side effects, and the schema cannot be edited through
    // writable_schema (SQLite's advice for databases that may be hostile).
    (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
    (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)NULL);
    (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)NULL);
    (void)exec(c, "PRAGMA cell_size_check = ON");
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, c->busy_ms);
    // After a checkpoint, shrink a WAL that a large put made big (the default keeps it).
    if (!is_readonly) {
        (void)exec(c, "PRAGMA journal_size_limit = 67108864");
        // In WAL mode NORMAL keeps the database consistent across crashes (a power loss may
        // only forget the last transactions: a lost entry is a recompile, never a wrong one);
        // FULL would fsync on every hit-count update, the bulk of a warm lookup.
        (void)exec(c, "PRAGMA synchronous = NORMAL");
        // Closing must not checkpoint: every short-lived `dlcc compile` would pay for it.
        // SQLite still checkpoints automatically as the WAL grows.
        (void)sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    }
    if (is_readonly) {
        int ver = 0;
        rc = read_user_version(c, &ver);
        if (rc != SQLITE_OK) {
            s = dl_cache__sql_fail(c, d, rc, "read the schema version");
            goto out;
        }
        if (ver != DL_CACHE_SCHEMA_VERSION) {
            // An older database is upgraded by a writable open, which this one is not.
            dl_cache__warn(d,
                           "cache database %s has schema version %d, not %d; the compile goes "
                           "on without the cache%s",
                           c->db_path, ver, DL_CACHE_SCHEMA_VERSION,
                           ver < DL_CACHE_SCHEMA_VERSION
                               ? "; it is opened read-only and so cannot be upgraded: run one "
                                 "dlcc compile with write access to the cache to upgrade it"
                               : "");
            s = DL_ERR_CACHE;
            goto out;
        }
    } else {
        s = setup_schema(c, is_new, d);
        if (s != DL_OK) {
            goto out;
        }
    }
    *out = c;
    c = NULL;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    dl_cache_close(c);
    return s;
}

dl_status dl_cache_open(const char *dir, dl_diags *d, dl_cache **out) {
    return open_impl(dir, false, true, d, out);
}

dl_status dl_cache_open_readonly(const char *dir, dl_diags *d, dl_cache **out) {
    return open_impl(dir, true, false, d, out);
}

void dl_cache_close(dl_cache *c) {
    if (!c) {
        return;
    }
    sqlite3_close_v2(c->db); // NULL is a no-op
    free(c->dir);
    free(c->db_path);
    free(c);
}

// ---------------------------------------------------------------------------------------------
// Size limit and eviction

static int config_max_size(dl_cache *c, uint64_t *out) {
    const char *env = getenv("DLCC_CACHE_MAX_SIZE");
    uint64_t v;
    if (env && dl_cache_parse_size(env, &v)) {
        *out = v ? v : UINT64_MAX; // 0: no limit
        return SQLITE_OK;
    }
    *out = DL_CACHE_DEFAULT_MAX;
    sqlite3_stmt *st = NULL;
    int rc = prepare(c, "SELECT value FROM config WHERE name = 'max_size'", &st);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            sqlite3_int64 x = sqlite3_column_int64(st, 0);
            if (x > 0) {
                *out = (uint64_t)x;
            } else if (x == 0) {
                *out = UINT64_MAX; // 0: no limit
            }
        }
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

// Whether a live process pins `key`; pins of dead processes are deleted on the way (the caller
// holds a write transaction).
static int is_pinned(dl_cache *c, const char *key_hex, bool *out) {
    *out = false;
    sqlite3_stmt *st = NULL, *del = NULL;
    int rc = prepare(c, "SELECT pid FROM pins WHERE key = ?1", &st);
    if (rc == SQLITE_OK) {
        rc = prepare(c, "DELETE FROM pins WHERE key = ?1 AND pid = ?2", &del);
    }
    if (rc == SQLITE_OK) {
        rc = bind_text(st, 1, key_hex);
    }
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        sqlite3_int64 pid = sqlite3_column_int64(st, 0);
        if (pid_alive(pid)) {
            *out = true;
            continue;
        }
        sqlite3_reset(del);
        bind_text(del, 1, key_hex);
        sqlite3_bind_int64(del, 2, pid);
        rc = sqlite3_step(del);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    sqlite3_finalize(del);
    return rc;
}

// Deletes entries until the total size is <= limit (least recently used first), or, with
// older_than >= 0, every entry last used before that time first. Skips `keep_hex` (may be NULL)
// and pinned entries. Runs inside the caller's write transaction.
static int evict(dl_cache *c, uint64_t limit, int64_t older_than, const char *keep_hex,
                 int64_t *n_removed, uint64_t *freed) {
    sqlite3_stmt *sum = NULL, *sel = NULL, *del = NULL;
    uint64_t total = 0;
    int rc = prepare(c, "SELECT coalesce(sum(size), 0) FROM entries", &sum);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(sum);
        if (rc == SQLITE_ROW) {
            total = (uint64_t)sqlite3_column_int64(sum, 0);
            rc = SQLITE_OK;
        }
    }
    if (rc == SQLITE_OK) {
        rc = prepare(c,
                     "SELECT key, size, last_used FROM entries WHERE key != ?1 "
                     "ORDER BY last_used ASC, created ASC, key ASC",
                     &sel);
    }
    if (rc == SQLITE_OK) {
        rc = prepare(c, "DELETE FROM entries WHERE key = ?1", &del);
    }
    if (rc == SQLITE_OK) {
        rc = bind_text(sel, 1, keep_hex ? keep_hex : "");
    }
    // Collect the candidates (keys and sizes only, no blobs) before deleting, so the pin check's
    // writes never race the read cursor.
    DL_VEC(char *) keys = {0};
    DL_VEC(uint64_t) sizes = {0};
    DL_VEC(int64_t) used = {0};
    while (rc == SQLITE_OK && (total > limit || older_than >= 0)) {
        rc = sqlite3_step(sel);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        char *k = col_strdup(sel, 0);
        if (!k || !DL_VEC_PUSH(&keys, k) || !DL_VEC_PUSH(&sizes, 0) || !DL_VEC_PUSH(&used, 0)) {
            free(k);
            rc = SQLITE_NOMEM;
            break;
        }
        sizes.data[sizes.len - 1] = (uint64_t)sqlite3_column_int64(sel, 1);
        used.data[used.len - 1] = sqlite3_column_int64(sel, 2);
    }
    sqlite3_reset(sel);
    for (size_t i = 0; rc == SQLITE_OK && i < keys.len; i++) {
        bool is_old = older_than >= 0 && used.data[i] < older_than;
        if (!is_old && total <= limit) {
            continue;
        }
        bool pinned = false;
        rc = is_pinned(c, keys.data[i], &pinned);
        if (rc != SQLITE_OK || pinned) {
            continue;
        }
        sqlite3_reset(del);
        bind_text(del, 1, keys.data[i]);
        rc = sqlite3_step(del);
        if (rc != SQLITE_DONE) {
            break;
        }
        rc = SQLITE_OK;
        if (sqlite3_changes(c->db) > 0) {
            total -= sizes.data[i] <= total ? sizes.data[i] : total;
            (*n_removed)++;
            *freed += sizes.data[i];
        }
    }
    for (size_t i = 0; i < keys.len; i++) {
        free(keys.data[i]);
    }
    free(keys.data);
    free(sizes.data);
    free(used.data);
    sqlite3_finalize(sum);
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Get and put

static dl_status need_writable(dl_cache *c, dl_diags *d, const char *what) {
    if (!c->is_readonly) {
        return DL_OK;
    }
    if (c->ro_why[0]) {
        dl_cache__warn(d, "cannot %s: the cache %s is read-only (%s)", what, c->db_path, c->ro_why);
    } else {
        dl_cache__warn(d, "cannot %s: the cache %s was opened read-only", what, c->db_path);
    }
    return DL_ERR_CACHE;
}

static int bump_stat(dl_cache *c, const char *name, double delta) {
    sqlite3_stmt *st = NULL;
    int rc = prepare(c, "UPDATE stats SET value = value + ?2 WHERE name = ?1", &st);
    if (rc == SQLITE_OK) {
        bind_text(st, 1, name);
        sqlite3_bind_double(st, 2, delta);
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

// Runs `fn` inside BEGIN IMMEDIATE ... COMMIT, rolling back on error. Returns the SQLite code.
typedef int (*txn_fn)(dl_cache *c, void *arg);
static int in_txn(dl_cache *c, txn_fn fn, void *arg) {
    c->errmsg[0] = 0;
    int rc = exec(c, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        return rc;
    }
    rc = fn(c, arg);
    if (rc == SQLITE_OK) {
        rc = exec(c, "COMMIT");
    }
    if (rc != SQLITE_OK) {
        rollback(c);
    }
    return rc;
}

typedef struct get_update {
    const char *key_hex;
    const char *bad_hash_hex; // non-NULL: drop the damaged row instead of counting a hit
    bool is_hit;
    double compile_ms;
} get_update;

static int get_update_fn(dl_cache *c, void *arg) {
    get_update *u = arg;
    sqlite3_stmt *st = NULL;
    int rc;
    if (u->bad_hash_hex) {
        // Only the damaged version: another process may have replaced it meanwhile.
        rc = prepare(c, "DELETE FROM entries WHERE key = ?1 AND blob_hash = ?2", &st);
        if (rc == SQLITE_OK) {
            bind_text(st, 1, u->key_hex);
            bind_text(st, 2, u->bad_hash_hex);
            rc = sqlite3_step(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
    } else if (u->is_hit) {
        rc = prepare(c,
                     "UPDATE entries SET hits = hits + 1, last_used = max(last_used, ?2) "
                     "WHERE key = ?1",
                     &st);
        if (rc == SQLITE_OK) {
            bind_text(st, 1, u->key_hex);
            sqlite3_bind_int64(st, 2, now_s());
            rc = sqlite3_step(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK) {
            rc = bump_stat(c, "hits", 1);
        }
        if (rc == SQLITE_OK) {
            rc = bump_stat(c, "compile_ms_saved", u->compile_ms);
        }
        return rc;
    } else {
        rc = SQLITE_OK;
    }
    if (rc == SQLITE_OK && !u->is_hit) {
        rc = bump_stat(c, "misses", 1);
    }
    return rc;
}

static void row_to_entry(sqlite3_stmt *st, int first, dl_cache_entry *e) {
    // Columns from `first`: key, model, target, compiler_version, size, source_size, compile_ms,
    // created, last_used, hits, blob_hash, source, dims (ENTRY_COLS).
    memset(e, 0, sizeof *e);
    const unsigned char *k = sqlite3_column_text(st, first);
    if (k) {
        (void)dl_hash128_parse((const char *)k, &e->key);
    }
    e->model = col_strdup(st, first + 1);
    e->target = col_strdup(st, first + 2);
    e->compiler_version = col_strdup(st, first + 3);
    e->size = (uint64_t)sqlite3_column_int64(st, first + 4);
    e->source_size = (uint64_t)sqlite3_column_int64(st, first + 5);
    // A time is finite and not negative; anything else in the file counts as unknown (0), so no
    // NaN or infinity reaches "compile time saved" (dlcc-cache verify reports such rows).
    e->compile_ms = sane_ms(sqlite3_column_double(st, first + 6));
    e->created = sqlite3_column_int64(st, first + 7);
    e->last_used = sqlite3_column_int64(st, first + 8);
    e->hits = sqlite3_column_int64(st, first + 9);
    const unsigned char *h = sqlite3_column_text(st, first + 10);
    if (h) {
        (void)dl_hash128_parse((const char *)h, &e->blob_hash);
    }
    e->source = col_strdup(st, first + 11);
    e->dims = col_strdup(st, first + 12);
}

// Whether row_to_entry could copy every string (false: out of memory).
static bool entry_strings_ok(const dl_cache_entry *e) {
    return e->model && e->target && e->compiler_version && e->source && e->dims;
}

#define ENTRY_COLS                                                                                 \
    "key, model, target, compiler_version, size, source_size, compile_ms, created, last_used, "    \
    "hits, blob_hash, source, dims"

dl_status dl_cache_get(dl_cache *c, dl_hash128 key, uint8_t **out_blob, size_t *out_len,
                       dl_cache_entry *meta, dl_diags *d) {
    *out_blob = NULL;
    *out_len = 0;
    if (meta) {
        memset(meta, 0, sizeof *meta);
    }
    char key_hex[33], stored_hex[33] = {0};
    dl_hash128_hex(key, key_hex);
    sqlite3_stmt *st = NULL;
    uint8_t *blob = NULL;
    size_t len = 0;
    bool found = false, damaged = false, other_key = false;
    dl_cache_entry e = {0};
    // The index finds the row; its columns (the key included) are then read from the table
    // itself, not from the index, so a stale index cannot hand back another key's row unnoticed.
    int rc = prepare(c,
                     "SELECT " ENTRY_COLS ", blob FROM entries NOT INDEXED WHERE rowid IN "
                     "(SELECT rowid FROM entries WHERE key = ?1) LIMIT 1",
                     &st);
    if (rc == SQLITE_OK) {
        rc = bind_text(st, 1, key_hex);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            rc = SQLITE_OK;
            found = true;
            row_to_entry(st, 0, &e);
            const unsigned char *rk = sqlite3_column_text(st, 0);
            other_key = !rk || strcmp((const char *)rk, key_hex) != 0;
            const unsigned char *h = sqlite3_column_text(st, 10);
            snprintf(stored_hex, sizeof stored_hex, "%s", h ? (const char *)h : "");
            const void *b = sqlite3_column_blob(st, 13);
            int n = sqlite3_column_bytes(st, 13);
            len = n > 0 ? (size_t)n : 0;
            blob = dl_mem_alloc(len ? len : 1);
            if (!entry_strings_ok(&e) || !blob) {
                rc = SQLITE_NOMEM;
            } else if (len) {
                memcpy(blob, b, len);
            }
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(blob);
        dl_cache_entry_fini(&e);
        return dl_cache__sql_fail(c, d, rc, "look up an entry");
    }
    if (found && other_key) {
        // Only a damaged index finds a row by a key it does not hold: its artifact belongs to
        // another model. Never return it; leave the row alone (a delete would go through the
        // same index) and say how to repair.
        dl_cache__warn(d,
                       "cache database %s is damaged (looking up %s found another entry); "
                       "recompiling; run dlcc-cache verify, or dlcc-cache clear to start afresh",
                       c->db_path, key_hex);
        free(blob);
        blob = NULL;
        found = false;
    }
    if (found) {
        dl_hash128 got = dl_hash128_of(blob, len);
        if (!dl_hash128_eq(got, e.blob_hash) || len != e.size) {
            damaged = true;
            dl_cache__warn(d, "cache entry %s was damaged and was dropped; recompiling", key_hex);
            free(blob);
            blob = NULL;
            found = false;
        }
    }
    if (!c->is_readonly) {
        // A failed bookkeeping update does not spoil a good hit: warn and go on.
        get_update u = {key_hex, damaged ? stored_hex : NULL, found, e.compile_ms};
        rc = in_txn(c, get_update_fn, &u);
        if (rc != SQLITE_OK) {
            // On a hit the artifact is used all the same, so the warning must not say that the
            // compile goes on without the cache (the generic message does).
            dl_status s =
                dl_cache__sql_fail(c, found ? NULL : d, rc, found ? "count a hit" : "count a miss");
            if (found && s != DL_ERR_NOMEM) {
                dl_cache__warn(d,
                               "cannot record the hit in the cache database %s (%s); the cached "
                               "artifact is used all the same",
                               c->db_path, sqlite3_errstr(rc));
            }
            if (s == DL_ERR_NOMEM || !found) {
                free(blob);
                dl_cache_entry_fini(&e);
                return s;
            }
        } else if (found) {
            e.hits++;
            int64_t t = now_s();
            e.last_used = t > e.last_used ? t : e.last_used;
        }
    }
    if (found) {
        *out_blob = blob;
        *out_len = len;
        if (meta) {
            *meta = e;
            return DL_OK;
        }
    }
    dl_cache_entry_fini(&e);
    return DL_OK;
}

typedef struct put_args {
    const char *key_hex;
    const uint8_t *blob;
    size_t len;
    const dl_cache_entry *meta;
    const char *hash_hex;
    int64_t created, last_used, hits;
} put_args;

static int put_fn(dl_cache *c, void *arg) {
    put_args *a = arg;
    sqlite3_stmt *st = NULL;
    int rc = prepare(c,
                     "INSERT OR REPLACE INTO entries(key, model, target, compiler_version, size, "
                     "source_size, compile_ms, created, last_used, hits, blob_hash, blob, source, "
                     "dims) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                     &st);
    if (rc == SQLITE_OK) {
        bind_text(st, 1, a->key_hex);
        bind_text(st, 2, a->meta ? a->meta->model : "");
        bind_text(st, 3, a->meta ? a->meta->target : "");
        bind_text(st, 4, a->meta ? a->meta->compiler_version : "");
        sqlite3_bind_int64(st, 5, (sqlite3_int64)a->len);
        sqlite3_bind_int64(st, 6, a->meta ? (sqlite3_int64)a->meta->source_size : 0);
        sqlite3_bind_double(st, 7, a->meta ? sane_ms(a->meta->compile_ms) : 0.0);
        sqlite3_bind_int64(st, 8, a->created);
        sqlite3_bind_int64(st, 9, a->last_used);
        sqlite3_bind_int64(st, 10, a->hits);
        bind_text(st, 11, a->hash_hex);
        bind_text(st, 13, a->meta ? a->meta->source : "");
        bind_text(st, 14, a->meta ? a->meta->dims : "");
        if (a->len) {
            rc = sqlite3_bind_blob64(st, 12, a->blob, (sqlite3_uint64)a->len, SQLITE_STATIC);
        } else {
            rc = sqlite3_bind_zeroblob(st, 12, 0);
        }
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    uint64_t limit = 0;
    if (rc == SQLITE_OK) {
        rc = config_max_size(c, &limit);
    }
    if (rc == SQLITE_OK) {
        int64_t n = 0;
        uint64_t freed = 0;
        rc = evict(c, limit, -1, a->key_hex, &n, &freed);
    }
    return rc;
}

int dl_cache__store_rc(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                       const dl_cache_entry *meta, int64_t created, int64_t last_used,
                       int64_t hits) {
    if (c->is_readonly) {
        return SQLITE_READONLY;
    }
    if (len && !blob) {
        return SQLITE_MISUSE;
    }
    if ((uint64_t)len > DL_CACHE_MAX_ARTIFACT) {
        return SQLITE_TOOBIG;
    }
    char key_hex[33], hash_hex[33];
    dl_hash128_hex(key, key_hex);
    dl_hash128_hex(dl_hash128_of(blob ? (const void *)blob : "", len), hash_hex);
    put_args a = {key_hex, blob, len, meta, hash_hex, created, last_used, hits};
    return in_txn(c, put_fn, &a);
}

dl_status dl_cache__store(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                          const dl_cache_entry *meta, int64_t created, int64_t last_used,
                          int64_t hits, dl_diags *d) {
    DL_TRY(need_writable(c, d, "store an entry"));
    if (len && !blob) {
        return DL_ERR_INVALID_ARG;
    }
    int rc = dl_cache__store_rc(c, key, blob, len, meta, created, last_used, hits);
    return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, d, rc, "store an entry");
}

dl_status dl_cache_put(dl_cache *c, dl_hash128 key, const uint8_t *blob, size_t len,
                       const dl_cache_entry *meta, dl_diags *d) {
    int64_t t = now_s();
    return dl_cache__store(c, key, blob, len, meta, t, t, 0, d);
}

// ---------------------------------------------------------------------------------------------
// Pins

static dl_status pin_op(dl_cache *c, dl_hash128 key, const char *sql, const char *what) {
    DL_TRY(need_writable(c, NULL, what));
    char key_hex[33];
    dl_hash128_hex(key, key_hex);
    int rc = exec(c, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        rc = prepare(c, sql, &st);
        if (rc == SQLITE_OK) {
            bind_text(st, 1, key_hex);
            sqlite3_bind_int64(st, 2, (sqlite3_int64)getpid());
            rc = sqlite3_step(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK) {
            rc = exec(c, "COMMIT");
        }
        if (rc != SQLITE_OK) {
            rollback(c);
        }
    }
    return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, NULL, rc, what);
}

dl_status dl_cache_pin(dl_cache *c, dl_hash128 key) {
    return pin_op(c, key, "INSERT OR IGNORE INTO pins(key, pid) VALUES (?1, ?2)", "pin an entry");
}

dl_status dl_cache_unpin(dl_cache *c, dl_hash128 key) {
    return pin_op(c, key, "DELETE FROM pins WHERE key = ?1 AND pid = ?2", "unpin an entry");
}

// ---------------------------------------------------------------------------------------------
// Maintenance

dl_status dl_cache_stats_get(dl_cache *c, dl_cache_stats *out) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    // One read transaction so the numbers agree with each other.
    int rc = exec(c, "BEGIN");
    if (rc == SQLITE_OK) {
        rc = prepare(c, "SELECT count(*), coalesce(sum(size), 0) FROM entries", &st);
    }
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        out->entries = sqlite3_column_int64(st, 0);
        out->bytes = (uint64_t)sqlite3_column_int64(st, 1);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_OK) {
        rc = prepare(c, "SELECT name, value FROM stats", &st);
    }
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name) {
            continue;
        }
        if (!strcmp(name, "hits")) {
            out->hits = sqlite3_column_int64(st, 1);
        } else if (!strcmp(name, "misses")) {
            out->misses = sqlite3_column_int64(st, 1);
        } else if (!strcmp(name, "compile_ms_saved")) {
            out->compile_ms_saved = sane_ms(sqlite3_column_double(st, 1));
        }
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK) {
        rc = config_max_size(c, &out->max_size);
        out->max_size = out->max_size == UINT64_MAX ? 0 : out->max_size;
    }
    if (rc == SQLITE_OK) {
        rc = exec(c, "COMMIT");
    }
    if (rc != SQLITE_OK) {
        rollback(c);
        return dl_cache__sql_fail(c, NULL, rc, "read the statistics");
    }
    return DL_OK;
}

static int zero_fn(dl_cache *c, void *arg) {
    (void)arg;
    return exec(c, "UPDATE stats SET value = 0 WHERE name IN ('hits', 'misses', "
                   "'compile_ms_saved')");
}

dl_status dl_cache_stats_zero(dl_cache *c) {
    DL_TRY(need_writable(c, NULL, "zero the statistics"));
    int rc = in_txn(c, zero_fn, NULL);
    return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, NULL, rc, "zero the statistics");
}

static dl_status list_where(dl_cache *c, const char *where, const char *arg, dl_cache_entry **out,
                            size_t *n) {
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT " ENTRY_COLS " FROM entries %s ORDER BY last_used DESC, created DESC, key",
             where);
    sqlite3_stmt *st = NULL;
    DL_VEC(dl_cache_entry) v = {0};
    int rc = prepare(c, sql, &st);
    if (rc == SQLITE_OK && arg) {
        rc = bind_text(st, 1, arg);
    }
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        dl_cache_entry e;
        row_to_entry(st, 0, &e);
        if (!entry_strings_ok(&e) || !DL_VEC_PUSH(&v, e)) {
            dl_cache_entry_fini(&e);
            rc = SQLITE_NOMEM;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        for (size_t i = 0; i < v.len; i++) {
            dl_cache_entry_fini(&v.data[i]);
        }
        free(v.data);
        return dl_cache__sql_fail(c, NULL, rc, "list the entries");
    }
    *out = v.data;
    *n = v.len;
    return DL_OK;
}

dl_status dl_cache_list(dl_cache *c, dl_cache_entry **out, size_t *n) {
    return list_where(c, "", NULL, out, n);
}

dl_status dl_cache_find_prefix(dl_cache *c, const char *prefix, dl_cache_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    size_t len = prefix ? strlen(prefix) : 0;
    if (len < 4 || len > 32) {
        return DL_ERR_INVALID_ARG;
    }
    char lower[33];
    for (size_t i = 0; i < len; i++) {
        if (!isxdigit((unsigned char)prefix[i])) {
            return DL_ERR_INVALID_ARG;
        }
        lower[i] = (char)tolower((unsigned char)prefix[i]);
    }
    lower[len] = 0;
    return list_where(c, "WHERE substr(key, 1, length(?1)) = ?1", lower, out, n);
}

typedef struct count_args {
    const char *sql;
    const char *key_hex; // NULL: no parameter
    int64_t changes;
} count_args;

static int count_fn(dl_cache *c, void *arg) {
    count_args *a = arg;
    sqlite3_stmt *st = NULL;
    int rc = prepare(c, a->sql, &st);
    if (rc == SQLITE_OK && a->key_hex) {
        rc = bind_text(st, 1, a->key_hex);
    }
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    a->changes = rc == SQLITE_OK ? sqlite3_changes(c->db) : 0;
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && a->changes > 0) {
        rc = exec(c, "PRAGMA incremental_vacuum"); // give the freed pages back
    }
    return rc;
}

dl_status dl_cache_remove(dl_cache *c, dl_hash128 key, bool *out_removed) {
    *out_removed = false;
    DL_TRY(need_writable(c, NULL, "remove an entry"));
    char key_hex[33];
    dl_hash128_hex(key, key_hex);
    count_args a = {"DELETE FROM entries WHERE key = ?1", key_hex, 0};
    int rc = in_txn(c, count_fn, &a);
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, NULL, rc, "remove an entry");
    }
    *out_removed = a.changes > 0;
    return DL_OK;
}

dl_status dl_cache_clear(dl_cache *c, int64_t *out_removed) {
    *out_removed = 0;
    DL_TRY(need_writable(c, NULL, "clear the cache"));
    count_args a = {"DELETE FROM entries", NULL, 0};
    int rc = in_txn(c, count_fn, &a);
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, NULL, rc, "clear the cache");
    }
    *out_removed = a.changes;
    return DL_OK;
}

typedef struct prune_args {
    uint64_t max_size;
    int64_t older_than;
    int64_t removed;
    uint64_t freed;
} prune_args;

static int prune_fn(dl_cache *c, void *arg) {
    prune_args *a = arg;
    uint64_t limit = a->max_size;
    int rc = SQLITE_OK;
    if (limit == 0) {
        rc = config_max_size(c, &limit);
    }
    if (rc == SQLITE_OK) {
        rc = evict(c, limit, a->older_than, NULL, &a->removed, &a->freed);
    }
    if (rc == SQLITE_OK && a->removed > 0) {
        rc = exec(c, "PRAGMA incremental_vacuum"); // give the freed pages back
    }
    return rc;
}

dl_status dl_cache_prune(dl_cache *c, uint64_t max_size, int64_t older_than_s, int64_t *out_removed,
                         uint64_t *out_freed) {
    *out_removed = 0;
    *out_freed = 0;
    DL_TRY(need_writable(c, NULL, "prune the cache"));
    prune_args a = {max_size, older_than_s >= 0 ? now_s() - older_than_s : -1, 0, 0};
    int rc = in_txn(c, prune_fn, &a);
    if (rc != SQLITE_OK) {
        return dl_cache__sql_fail(c, NULL, rc, "prune the cache");
    }
    *out_removed = a.removed;
    *out_freed = a.freed;
    return DL_OK;
}

dl_status dl_cache_set_max_size(dl_cache *c, uint64_t bytes) {
    DL_TRY(need_writable(c, NULL, "set the size limit"));
    if (bytes > (uint64_t)INT64_MAX) {
        return DL_ERR_INVALID_ARG;
    }
    int rc = exec(c, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        rc = prepare(c, "INSERT OR REPLACE INTO config(name, value) VALUES ('max_size', ?1)", &st);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, (sqlite3_int64)bytes);
            rc = sqlite3_step(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        sqlite3_finalize(st);
        if (rc == SQLITE_OK) {
            rc = exec(c, "COMMIT");
        }
        if (rc != SQLITE_OK) {
            rollback(c);
        }
    }
    return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, NULL, rc, "set the size limit");
}

dl_status dl_cache_verify(dl_cache *c, dl_diags *d, int64_t *out_bad) {
    *out_bad = 0;
    sqlite3_stmt *st = NULL;
    int rc = prepare(c, "PRAGMA integrity_check", &st);
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        if (msg && strcmp(msg, "ok") != 0) {
            (*out_bad)++;
            dl_cache__warn(d, "cache database %s: %s; run dlcc-cache clear to start afresh",
                           c->db_path, msg);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_OK) {
        (*out_bad)++;
        return dl_cache__sql_fail(c, d, rc, "check the database");
    }
    // Every row: its columns' types and values, its blob against its hash and the artifact's
    // header. The bad ones are collected (by rowid: a row replaced meanwhile by a good put of the
    // same key has another rowid and stays), then reported and, on a writable handle, dropped.
    typedef struct bad_row {
        int64_t rowid;
        char *label; // "entry KEY" or "row N" when the key itself is unusable
        const char *why;
    } bad_row;
    DL_VEC(bad_row) bad = {0};
    rc = prepare(c,
                 "SELECT rowid, key, blob_hash, size, blob, typeof(key), typeof(blob_hash), "
                 "typeof(size), typeof(blob), typeof(compile_ms), compile_ms, typeof(source_size), "
                 "source_size, typeof(created), created, typeof(last_used), last_used, "
                 "typeof(hits), hits, typeof(model), typeof(target), typeof(compiler_version), "
                 "typeof(source), typeof(dims) FROM entries ORDER BY key",
                 &st);
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            break;
        }
        rc = SQLITE_OK;
        int64_t rowid = sqlite3_column_int64(st, 0);
        const char *k = (const char *)sqlite3_column_text(st, 1);
        dl_hash128 kh;
        bool key_ok = col_is(st, 5, "text") && k && strlen(k) == 32 && dl_hash128_parse(k, &kh);
        if (key_ok) { // the canonical spelling (lower-case), as put writes it
            char canon[33];
            dl_hash128_hex(kh, canon);
            key_ok = strcmp(canon, k) == 0;
        }
        const char *why = NULL;
        if (!key_ok) {
            why = "its key is not 32 lower-case hex digits";
        } else if (!col_is(st, 19, "text") || !col_is(st, 20, "text") || !col_is(st, 21, "text") ||
                   !col_is(st, 22, "text") || !col_is(st, 23, "text")) {
            why = "its model, target, compiler version, source or dims is not text";
        } else if (!col_is(st, 7, "integer") || sqlite3_column_int64(st, 3) < 0 ||
                   !col_is(st, 11, "integer") || sqlite3_column_int64(st, 12) < 0 ||
                   !col_is(st, 13, "integer") || sqlite3_column_int64(st, 14) < 0 ||
                   !col_is(st, 15, "integer") || sqlite3_column_int64(st, 16) < 0 ||
                   !col_is(st, 17, "integer") || sqlite3_column_int64(st, 18) < 0) {
            why = "a size, time or hit count is not a non-negative integer";
        } else if (!(col_is(st, 9, "real") || col_is(st, 9, "integer")) ||
                   !isfinite(sqlite3_column_double(st, 10)) || sqlite3_column_double(st, 10) < 0) {
            why = "its compile time is not a non-negative number";
        } else {
            const char *h = (const char *)sqlite3_column_text(st, 2);
            const uint8_t *b = sqlite3_column_blob(st, 4);
            size_t n = (size_t)sqlite3_column_bytes(st, 4);
            uint64_t size = (uint64_t)sqlite3_column_int64(st, 3);
            dl_hash128 want;
            if (!col_is(st, 6, "text") || !h || !dl_hash128_parse(h, &want) ||
                !col_is(st, 8, "blob") || n != size ||
                !dl_hash128_eq(dl_hash128_of(b ? (const void *)b : "", n), want)) {
                why = "its hash does not match";
            } else if (!dl_cache__artifact_ok(b, n, &why)) {
                // why set: the artifact is not something this build can load
            }
        }
        if (!why) {
            continue;
        }
        (*out_bad)++;
        char label[64];
        if (key_ok) {
            snprintf(label, sizeof label, "%s", k);
        } else {
            snprintf(label, sizeof label, "(row %lld)", (long long)rowid);
        }
        bad_row r = {rowid, str_dup(label), why};
        if (!r.label || !DL_VEC_PUSH(&bad, r)) {
            free(r.label);
            rc = SQLITE_NOMEM;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_OK && bad.len && !c->is_readonly) {
        rc = prepare(c, "DELETE FROM entries WHERE rowid = ?1", &st);
    }
    for (size_t i = 0; rc == SQLITE_OK && i < bad.len; i++) {
        if (c->is_readonly) {
            dl_cache__warn(d, "cache entry %s is damaged (%s)", bad.data[i].label, bad.data[i].why);
            continue;
        }
        rc = exec(c, "BEGIN IMMEDIATE");
        if (rc == SQLITE_OK) {
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, bad.data[i].rowid);
            rc = sqlite3_step(st);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
            if (rc == SQLITE_OK) {
                rc = exec(c, "COMMIT");
            }
            if (rc != SQLITE_OK) {
                rollback(c);
            }
        }
        if (rc == SQLITE_OK) {
            dl_cache__warn(d, "cache entry %s was damaged (%s) and was dropped", bad.data[i].label,
                           bad.data[i].why);
        }
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < bad.len; i++) {
        free(bad.data[i].label);
    }
    free(bad.data);
    return rc == SQLITE_OK ? DL_OK : dl_cache__sql_fail(c, d, rc, "check the entries");
}

// ---------------------------------------------------------------------------------------------
// Repair

dl_status dl_cache_remove_damaged(const char *dir, bool *out_removed) {
    *out_removed = false;
    // The trust rules of dl_cache_open: a directory of ours that group and others cannot write,
    // and a database that is a regular file of ours (never a link: lstat).
    struct stat ds, fs;
    if (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) || ds.st_uid != geteuid() ||
        (ds.st_mode & 022) != 0) {
        return DL_ERR_CACHE;
    }
    char *db = path_join(dir, DL_CACHE_DB_NAME);
    if (!db) {
        return DL_ERR_NOMEM;
    }
    dl_status st = DL_OK;
    if (lstat(db, &fs) != 0 || !S_ISREG(fs.st_mode) || fs.st_uid != geteuid()) {
        st = DL_ERR_CACHE;
        goto out;
    }
    // The side files first, the database last: a failure leaves the database (and the warning
    // that sends the user here) in place.
    for (size_t i = 0; i <= DL_ARRAY_LEN(side_suffixes); i++) {
        const char *suffix = i < DL_ARRAY_LEN(side_suffixes) ? side_suffixes[i] : "";
        char *p = dl_mem_alloc(strlen(db) + strlen(suffix) + 1);
        if (!p) {
            st = DL_ERR_NOMEM;
            goto out;
        }
        strcpy(p, db);
        strcat(p, suffix);
        int rc = unlink(p);
        free(p);
        if (rc != 0 && errno != ENOENT) {
            st = DL_ERR_IO;
            goto out;
        }
    }
    *out_removed = true;
out:
    free(db);
    return st;
}
