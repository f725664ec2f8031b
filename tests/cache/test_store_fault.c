// tests/cache/test_store_fault.c — the cache store under faults: a damaged blob, a garbage or
// truncated database file, a place where the cache cannot be written, a full disk (a file size
// limit in a child process) and a lock held past the busy timeout. In every case: no crash, a
// warning that says what happened and what to do, DL_ERR_CACHE or a miss, and no partial entry.
#include "cache_test_util.h"
#include "dl_cache.h"
#include "dl_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

DL_TEST(damaged_blob_dropped_and_reported_as_miss) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(4096, 21, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 4096, &m, d));
    DL_CHECK_OK(dl_cache_put(c, key_n(2), b, 4096, &m, d));
    // Same length, one byte different (the hash catches it, not the size).
    char hex[33], sql[256];
    dl_hash128_hex(key_n(1), hex);
    snprintf(sql, sizeof sql,
             "UPDATE entries SET blob = CAST(x'ff' || substr(blob, 2) AS BLOB) WHERE key = '%s'",
             hex);
    DL_CHECK_EQ_I64(raw_sql(cdir, sql), 0);
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK(got == NULL);
    char want[128];
    snprintf(want, sizeof want, "cache entry %s was damaged and was dropped; recompiling", hex);
    DL_CHECK(has_diag(d, want));
    DL_CHECK(dl_diags_get(d, 0)->sev == DL_SEV_WARNING);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key = '%s'", hex);
    DL_CHECK_EQ_I64(raw_sql(cdir, sql), 0);
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.misses, 1);
    DL_CHECK_EQ_I64(s.hits, 0);
    // Verify finds and drops a damaged (truncated) blob too.
    dl_hash128_hex(key_n(2), hex);
    snprintf(sql, sizeof sql, "UPDATE entries SET blob = x'0011' WHERE key = '%s'", hex);
    DL_CHECK_EQ_I64(raw_sql(cdir, sql), 0);
    dl_diags_clear(d);
    int64_t bad = 0;
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 1);
    DL_CHECK(has_diag(d, hex));
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

static void write_file(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        (void)!write(fd, data, n);
        close(fd);
    }
}

DL_TEST(garbage_database_refused_not_deleted) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    DL_CHECK(mkdir(cdir, 0700) == 0);
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) {
        junk[i] = (char)('a' + i % 26);
    }
    write_file(dbp, junk, sizeof junk);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CORRUPT);
    DL_CHECK(c == NULL);
    char want[200];
    snprintf(want, sizeof want, "cache database %s is damaged", dbp);
    DL_CHECK(has_diag(d, want));
    DL_CHECK(has_diag(d, "the compile goes on without the cache"));
    DL_CHECK(has_diag(d, "run dlcc-cache clear to start afresh"));
    DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CORRUPT);
    struct stat st;
    DL_CHECK(stat(dbp, &st) == 0 && st.st_size == (off_t)sizeof junk); // left alone
    // A valid SQLite header over garbage pages: SQLite itself reports the damage.
    memcpy(junk, "SQLite format 3", 16);
    junk[16] = 0x10; // page size 4096
    junk[17] = 0;
    write_file(dbp, junk, sizeof junk);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CORRUPT);
    DL_CHECK(dl_diags_count(d) >= 1);
    dump_diags(d);
    // The repair: refused while the directory breaks the trust rules, then done.
    bool gone = true;
    DL_CHECK(chmod(cdir, 0770) == 0);
    DL_CHECK_EQ_I64(dl_cache_remove_damaged(cdir, &gone), DL_ERR_CACHE);
    DL_CHECK(!gone);
    DL_CHECK(stat(dbp, &st) == 0);
    DL_CHECK(chmod(cdir, 0700) == 0);
    DL_CHECK_OK(dl_cache_remove_damaged(cdir, &gone));
    DL_CHECK(gone);
    DL_CHECK(stat(dbp, &st) != 0 && errno == ENOENT);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    dl_cache_close(c);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(truncated_database_refused) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *b = blob_n(8000, 22, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    for (int i = 0; i < 20; i++) {
        DL_CHECK_OK(dl_cache_put(c, key_n(i), b, 8000, &m, NULL));
    }
    dl_cache_close(c); // closing does not checkpoint (by design): move the WAL in by hand
    free(b);
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    sqlite3 *raw = NULL;
    DL_CHECK(sqlite3_open_v2(dbp, &raw, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    DL_CHECK(sqlite3_exec(raw, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(raw);
    struct stat st;
    DL_CHECK(stat(dbp, &st) == 0 && st.st_size > 100000);
    DL_CHECK(truncate(dbp, st.st_size / 2) == 0);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CORRUPT);
    DL_CHECK(has_diag(d, "is damaged (truncated"));
    DL_CHECK(has_diag(d, "dlcc-cache clear"));
    DL_CHECK(truncate(dbp, 50) == 0);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CORRUPT);
    DL_CHECK(has_diag(d, "is damaged"));
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(unwritable_place) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    if (geteuid() != 0) {
        // A read-only directory: the database cannot be created there.
        DL_CHECK(mkdir(cdir, 0500) == 0);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(has_diag(d, "cannot create the cache database"));
        DL_CHECK(has_diag(d, "DLCC_CACHE_DIR"));
    } else {
        printf("note: running as root, chmod 500 does not stop writes; checking a cache below "
               "a regular file and a read-only handle instead\n");
    }
    // The cache directory would live below a regular file: mkdir fails (any user).
    char file[128], below[160];
    snprintf(file, sizeof file, "%s/file", root);
    write_file(file, "x", 1);
    snprintf(below, sizeof below, "%s/sub/dlcc", file);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(below, d, &c), DL_ERR_CACHE);
    DL_CHECK(c == NULL);
    DL_CHECK(has_diag(d, "cannot create the cache directory"));
    // cache.db is a directory: SQLite cannot open it.
    char cdir2[128], dbdir[160];
    snprintf(cdir2, sizeof cdir2, "%s/c2", root);
    snprintf(dbdir, sizeof dbdir, "%s/cache.db", cdir2);
    DL_CHECK(mkdir(cdir2, 0700) == 0 && mkdir(dbdir, 0700) == 0);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(cdir2, d, &c), DL_ERR_CACHE);
    DL_CHECK(dl_diags_count(d) == 1);
    dump_diags(d);
    // Writes through a read-only handle fail cleanly.
    snprintf(cdir2, sizeof cdir2, "%s/c3", root);
    DL_CHECK_OK(dl_cache_open(cdir2, d, &c));
    dl_cache_close(c);
    DL_CHECK_OK(dl_cache_open_readonly(cdir2, d, &c));
    dl_diags_clear(d);
    uint8_t x = 1;
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_EQ_I64(dl_cache_put(c, key_n(1), &x, 1, &m, d), DL_ERR_CACHE);
    DL_CHECK(has_diag(d, "read-only"));
    int64_t n = 0;
    DL_CHECK_EQ_I64(dl_cache_clear(c, &n), DL_ERR_CACHE);
    dl_cache_close(c);
    dl_diags_destroy(d);
    rm_rf(root);
}

// The disk fills up midway through a put: a child process with a small file size limit.
DL_TEST(full_disk_leaves_no_partial_entry) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *small = blob_n(1000, 23, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), small, 1000, &m, NULL));
    dl_cache_close(c);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        signal(SIGXFSZ, SIG_IGN); // a write past the limit fails with EFBIG instead
        struct rlimit rl = {256 * 1024, 256 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
            _exit(20);
        }
        dl_diags *d = NULL;
        if (dl_diags_create(&d) != DL_OK || dl_cache_open(cdir, d, &c) != DL_OK) {
            _exit(21);
        }
        uint8_t *big = blob_n(2 << 20, 24, 0);
        dl_cache_entry mm = meta_of("big", 1.0);
        dl_status s = dl_cache_put(c, key_n(2), big, 2 << 20, &mm, d);
        dump_diags(d);
        int rc = s == DL_ERR_CACHE && has_diag(d, "the compile goes on without the cache") ? 0 : 22;
        // The handle stays usable for reads after the failure.
        uint8_t *got = NULL;
        size_t len = 0;
        if (rc == 0 && (dl_cache_get(c, key_n(1), &got, &len, NULL, d) != DL_OK || !got)) {
            rc = 23;
        }
        free(got);
        dl_cache_close(c);
        dl_diags_destroy(d);
        _exit(rc);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    DL_CHECK(WIFEXITED(status));
    DL_CHECK_EQ_I64(WEXITSTATUS(status), 0);
    DL_CHECK(raw_integrity_ok(cdir));
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 1);
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    int64_t bad = -1;
    DL_CHECK_OK(dl_cache_verify(c, NULL, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    dl_cache_close(c);
    free(small);
    rm_rf(root);
}

DL_TEST(lock_held_past_busy_timeout) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    setenv("DLCC_CACHE_BUSY_MS", "200", 1);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    sqlite3 *other = NULL;
    DL_CHECK(sqlite3_open_v2(dbp, &other, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    DL_CHECK(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    uint8_t x[10] = {1, 2, 3};
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_EQ_I64(dl_cache_put(c, key_n(1), x, 10, &m, d), DL_ERR_CACHE);
    DL_CHECK(has_diag(d, "locked by another process"));
    // Lookups still work under a writer's lock (WAL); only the bookkeeping waits and gives up.
    uint8_t *got = NULL;
    size_t len = 0;
    dl_diags_clear(d);
    dl_status s = dl_cache_get(c, key_n(1), &got, &len, NULL, d);
    DL_CHECK(s == DL_ERR_CACHE || (s == DL_OK && got == NULL));
    free(got);
    // A second opener waits for the lock only while it creates the schema: the schema exists.
    dl_cache *c2 = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c2));
    dl_cache_close(c2);
    DL_CHECK(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(other);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), x, 10, &m, d));
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 1);
    dl_cache_close(c);
    unsetenv("DLCC_CACHE_BUSY_MS");
    dl_diags_destroy(d);
    rm_rf(root);
}

// A hit whose bookkeeping (hit count, last use) cannot be written because another process holds
// the write lock is still a hit, and the warning says the artifact is used (it used to say that
// the compile goes on without the cache, which was false).
DL_TEST(hit_under_a_lock_is_used_and_says_so) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    setenv("DLCC_CACHE_BUSY_MS", "100", 1);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(300, 31, 1);
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 300, &m, d));
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    sqlite3 *other = NULL;
    DL_CHECK(sqlite3_open_v2(dbp, &other, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    DL_CHECK(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    uint8_t *got = NULL;
    size_t len = 0;
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK(got && len == 300 && memcmp(got, b, 300) == 0);
    DL_CHECK(has_diag(d, "used all the same"));
    DL_CHECK(!has_diag(d, "without the cache"));
    free(got);
    DL_CHECK(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(other);
    dl_cache_close(c);
    unsetenv("DLCC_CACHE_BUSY_MS");
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST_MAIN()
