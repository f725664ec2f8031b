// tests/cache/test_store.c — unit tests of the cache store (cache/dl_cache.h): round trips,
// hit/miss counting, listing, removal, pruning (age, size, LRU order, pins held by a live
// process), the size limit, trust checks, export/import, and many processes at once.
// Faults (damaged files, full disk, locks, read-only places) are in test_store_fault.c.
#include "cache_test_util.h"
#include "dl_cache.h"
#include "dl_test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

DL_TEST(put_get_round_trip_with_metadata) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_OK(dl_cache_open(NULL, d, &c));
    DL_CHECK_STR_EQ(dl_cache_dir(c), cdir);
    struct stat st;
    DL_CHECK(stat(cdir, &st) == 0 && (st.st_mode & 0777) == 0700);
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    DL_CHECK(stat(dbp, &st) == 0 && (st.st_mode & 0777) == 0600);
    uint8_t *b = blob_n(5000, 1, 7);
    dl_cache_entry m = meta_of("mlp", 123.5);
    int64_t t0 = (int64_t)time(NULL);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 5000, &m, d));
    uint8_t *got = NULL;
    size_t len = 0;
    dl_cache_entry e;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, &e, d));
    DL_CHECK(got != NULL);
    DL_CHECK_EQ_I64(len, 5000);
    DL_CHECK(memcmp(got, b, 5000) == 0);
    DL_CHECK(dl_hash128_eq(e.key, key_n(1)));
    DL_CHECK_STR_EQ(e.model, "mlp");
    DL_CHECK_STR_EQ(e.target, "x86_64-pc-linux-gnu/znver3");
    DL_CHECK_STR_EQ(e.compiler_version, "dlcc 0.1.0 (test) LLVM 19.1.7");
    DL_CHECK_EQ_I64(e.size, 5000);
    DL_CHECK_EQ_I64(e.source_size, 1234);
    DL_CHECK_NEAR(e.compile_ms, 123.5, 0, 0);
    DL_CHECK(e.created >= t0 && e.created <= t0 + 5);
    DL_CHECK(e.last_used >= e.created);
    DL_CHECK_EQ_I64(e.hits, 1);
    DL_CHECK(dl_hash128_eq(e.blob_hash, dl_hash128_of(b, 5000)));
    dl_cache_entry_fini(&e);
    free(got);
    // Replacing keeps one row; an empty artifact round-trips too.
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 10, &m, d));
    DL_CHECK_OK(dl_cache_put(c, key_n(2), NULL, 0, &m, d));
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK_EQ_I64(len, 10);
    free(got);
    DL_CHECK_OK(dl_cache_get(c, key_n(2), &got, &len, NULL, d));
    DL_CHECK(got != NULL);
    DL_CHECK_EQ_I64(len, 0);
    free(got);
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    dl_cache_close(c);
    // Reopening finds the same data.
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK(got && len == 10 && memcmp(got, b, 10) == 0);
    free(got);
    char walp[128];
    snprintf(walp, sizeof walp, "%s/cache.db-wal", cdir);
    DL_CHECK(stat(walp, &st) == 0); // WAL mode: the log exists while a connection is open
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(miss_then_hit_counting_and_stats) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *got = (uint8_t *)1;
    size_t len = 99;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, NULL));
    DL_CHECK(got == NULL);
    DL_CHECK_EQ_I64(len, 0);
    uint8_t *b = blob_n(300, 2, 1);
    dl_cache_entry m = meta_of("a", 40.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 300, &m, NULL));
    m = meta_of("b", 2.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(2), b, 200, &m, NULL));
    for (int i = 0; i < 3; i++) {
        DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, NULL));
        DL_CHECK(got != NULL);
        free(got);
    }
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.entries, 2);
    DL_CHECK_EQ_I64(s.bytes, 500);
    DL_CHECK_EQ_I64(s.hits, 3);
    DL_CHECK_EQ_I64(s.misses, 1);
    DL_CHECK_NEAR(s.compile_ms_saved, 120.0, 1e-9, 0);
    DL_CHECK_EQ_I64(s.max_size, (int64_t)2 << 30);
    dl_cache_entry e;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, &e, NULL));
    DL_CHECK_EQ_I64(e.hits, 4);
    dl_cache_entry_fini(&e);
    free(got);
    dl_cache_close(c);
    free(b);
    rm_rf(root);
}

DL_TEST(list_order_find_prefix_remove_clear) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *b = blob_n(100, 3, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    for (int i = 0; i < 4; i++) {
        DL_CHECK_OK(dl_cache_put(c, key_n(i), b, 100, &m, NULL));
    }
    // last_used: key 2 newest, then 0, 3, 1.
    set_last_used(cdir, key_n(0), 3000);
    set_last_used(cdir, key_n(1), 1000);
    set_last_used(cdir, key_n(2), 4000);
    set_last_used(cdir, key_n(3), 2000);
    dl_cache_entry *es = NULL;
    size_t n = 0;
    DL_CHECK_OK(dl_cache_list(c, &es, &n));
    DL_CHECK_EQ_I64(n, 4);
    int want[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++) {
        DL_CHECK(dl_hash128_eq(es[i].key, key_n(want[i])));
        DL_CHECK_STR_EQ(es[i].model, "m");
    }
    for (size_t i = 0; i < n; i++) {
        dl_cache_entry_fini(&es[i]);
    }
    free(es);

    char hex[33], pre[12];
    dl_hash128_hex(key_n(3), hex);
    snprintf(pre, sizeof pre, "%.8s", hex);
    pre[0] = (char)(pre[0] >= 'a' ? pre[0] - 32 : pre[0]); // upper case is accepted
    DL_CHECK_OK(dl_cache_find_prefix(c, pre, &es, &n));
    DL_CHECK_EQ_I64(n, 1);
    DL_CHECK(dl_hash128_eq(es[0].key, key_n(3)));
    dl_cache_entry_fini(&es[0]);
    free(es);
    DL_CHECK_OK(dl_cache_find_prefix(c, hex, &es, &n));
    DL_CHECK_EQ_I64(n, 1);
    dl_cache_entry_fini(&es[0]);
    free(es);
    DL_CHECK_EQ_I64(dl_cache_find_prefix(c, "abc", &es, &n), DL_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dl_cache_find_prefix(c, "zzzz", &es, &n), DL_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dl_cache_find_prefix(c, "ab'%", &es, &n), DL_ERR_INVALID_ARG);

    bool removed = false;
    DL_CHECK_OK(dl_cache_remove(c, key_n(3), &removed));
    DL_CHECK(removed);
    DL_CHECK_OK(dl_cache_remove(c, key_n(3), &removed));
    DL_CHECK(!removed);
    int64_t nr = 0;
    DL_CHECK_EQ_I64(raw_sql(cdir, "PRAGMA auto_vacuum"), 2); // incremental
    uint8_t *big = blob_n(200000, 9, 0);
    DL_CHECK_OK(dl_cache_put(c, key_n(9), big, 200000, &m, NULL));
    free(big);
    DL_CHECK_OK(dl_cache_clear(c, &nr));
    DL_CHECK_EQ_I64(nr, 4);
    DL_CHECK(raw_sql(cdir, "PRAGMA page_count") < 20); // the space was given back
    DL_CHECK_OK(dl_cache_list(c, &es, &n));
    DL_CHECK_EQ_I64(n, 0);
    free(es);
    dl_cache_close(c);
    free(b);
    rm_rf(root);
}

DL_TEST(prune_by_age) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *b = blob_n(100, 4, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    for (int i = 0; i < 4; i++) {
        DL_CHECK_OK(dl_cache_put(c, key_n(i), b, 100, &m, NULL));
    }
    long long now = (long long)time(NULL);
    set_last_used(cdir, key_n(0), now - 10000);
    set_last_used(cdir, key_n(2), now - 5000);
    int64_t removed = 0;
    uint64_t freed = 0;
    DL_CHECK_OK(dl_cache_prune(c, 0, 1000, &removed, &freed));
    DL_CHECK_EQ_I64(removed, 2);
    DL_CHECK_EQ_I64(freed, 200);
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(0), &got, &len, NULL, NULL));
    DL_CHECK(got == NULL);
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, NULL));
    DL_CHECK(got != NULL);
    free(got);
    dl_cache_close(c);
    free(b);
    rm_rf(root);
}

// Pins key 0 from a child process that stays alive until told to exit.
static pid_t pin_in_child(const char *cdir, dl_hash128 k, int *release_fd) {
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        dl_cache *c = NULL;
        char ok = 'n';
        if (dl_cache_open(cdir, NULL, &c) == DL_OK && dl_cache_pin(c, k) == DL_OK) {
            ok = 'y';
        }
        dl_cache_close(c);
        if (write(ready[1], &ok, 1) != 1) {
            _exit(2);
        }
        char x;
        (void)!read(go[0], &x, 1); // until the parent closes its end
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char ok = 'n';
    if (read(ready[0], &ok, 1) != 1 || ok != 'y') {
        pid = -1;
    }
    close(ready[0]);
    *release_fd = go[1];
    return pid;
}

DL_TEST(prune_by_size_lru_keeps_pinned) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *b = blob_n(1000, 5, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    for (int i = 0; i < 4; i++) {
        DL_CHECK_OK(dl_cache_put(c, key_n(i), b, 1000, &m, NULL));
        set_last_used(cdir, key_n(i), 100 * (i + 1)); // key 0 least recently used
    }
    int release = -1;
    pid_t child = pin_in_child(cdir, key_n(0), &release);
    DL_CHECK(child > 0);
    int64_t removed = 0;
    uint64_t freed = 0;
    DL_CHECK_OK(dl_cache_prune(c, 2000, -1, &removed, &freed));
    DL_CHECK_EQ_I64(removed, 2);
    DL_CHECK_EQ_I64(freed, 2000);
    dl_cache_entry *es = NULL;
    size_t n = 0;
    DL_CHECK_OK(dl_cache_list(c, &es, &n));
    DL_CHECK_EQ_I64(n, 2);
    DL_CHECK(dl_hash128_eq(es[0].key, key_n(3)) && dl_hash128_eq(es[1].key, key_n(0)));
    for (size_t i = 0; i < n; i++) {
        dl_cache_entry_fini(&es[i]);
    }
    free(es);
    // Once the child is gone its pin is stale and key 0 (oldest) goes first.
    close(release);
    int status = 0;
    waitpid(child, &status, 0);
    DL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    DL_CHECK_OK(dl_cache_prune(c, 1000, -1, &removed, &freed));
    DL_CHECK_EQ_I64(removed, 1);
    DL_CHECK_OK(dl_cache_list(c, &es, &n));
    DL_CHECK_EQ_I64(n, 1);
    DL_CHECK(dl_hash128_eq(es[0].key, key_n(3)));
    dl_cache_entry_fini(&es[0]);
    free(es);
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM pins"), 0);
    // Own pins protect too, and unpin releases.
    DL_CHECK_OK(dl_cache_pin(c, key_n(3)));
    DL_CHECK_OK(dl_cache_prune(c, 1, -1, &removed, &freed));
    DL_CHECK_EQ_I64(removed, 0);
    DL_CHECK_OK(dl_cache_unpin(c, key_n(3)));
    DL_CHECK_OK(dl_cache_prune(c, 1, -1, &removed, &freed));
    DL_CHECK_EQ_I64(removed, 1);
    dl_cache_close(c);
    free(b);
    rm_rf(root);
}

DL_TEST(size_limit_env_and_config) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, NULL, &c));
    uint8_t *b = blob_n(1000, 6, 0);
    dl_cache_entry m = meta_of("m", 1.0);
    setenv("DLCC_CACHE_MAX_SIZE", "2500", 1);
    DL_CHECK_OK(dl_cache_put(c, key_n(0), b, 1000, &m, NULL));
    set_last_used(cdir, key_n(0), 100);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 1000, &m, NULL));
    set_last_used(cdir, key_n(1), 200);
    DL_CHECK_OK(dl_cache_put(c, key_n(2), b, 1000, &m, NULL)); // 3000 > 2500: key 0 goes
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 2);
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(0), &got, &len, NULL, NULL));
    DL_CHECK(got == NULL);
    // The environment overrides the stored limit.
    DL_CHECK_OK(dl_cache_set_max_size(c, 100));
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.max_size, 2500);
    unsetenv("DLCC_CACHE_MAX_SIZE");
    DL_CHECK_OK(dl_cache_set_max_size(c, 1500));
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.max_size, 1500);
    DL_CHECK_OK(dl_cache_put(c, key_n(3), b, 1000, &m, NULL)); // keeps only key 3
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 1);
    DL_CHECK_OK(dl_cache_get(c, key_n(3), &got, &len, NULL, NULL));
    DL_CHECK(got != NULL);
    free(got);
    // An artifact larger than the limit is still stored (never the entry just stored).
    uint8_t *big = blob_n(4000, 7, 0);
    DL_CHECK_OK(dl_cache_put(c, key_n(4), big, 4000, &m, NULL));
    DL_CHECK_OK(dl_cache_get(c, key_n(4), &got, &len, NULL, NULL));
    DL_CHECK(got != NULL && len == 4000);
    free(got);
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 1);
    free(big);
    dl_cache_close(c);
    free(b);
    rm_rf(root);
}

DL_TEST(parse_size) {
    uint64_t v = 0;
    DL_CHECK(dl_cache_parse_size("1048576", &v) && v == 1048576);
    DL_CHECK(dl_cache_parse_size("2G", &v) && v == (uint64_t)2 << 30);
    DL_CHECK(dl_cache_parse_size("512M", &v) && v == (uint64_t)512 << 20);
    DL_CHECK(dl_cache_parse_size("4k", &v) && v == 4096);
    DL_CHECK(dl_cache_parse_size("1T", &v) && v == (uint64_t)1 << 40);
    DL_CHECK(dl_cache_parse_size("3GiB", &v) && v == (uint64_t)3 << 30);
    DL_CHECK(dl_cache_parse_size("0", &v) && v == 0);
    DL_CHECK(!dl_cache_parse_size("", &v));
    DL_CHECK(!dl_cache_parse_size("G", &v));
    DL_CHECK(!dl_cache_parse_size("-1", &v));
    DL_CHECK(!dl_cache_parse_size("12X", &v));
    DL_CHECK(!dl_cache_parse_size("1 G", &v));
    DL_CHECK(!dl_cache_parse_size("99999999999999999999", &v));
    DL_CHECK(!dl_cache_parse_size("17179869184G", &v));
}

DL_TEST(default_dir) {
    char *saved = getenv("DLCC_CACHE_DIR") ? strdup(getenv("DLCC_CACHE_DIR")) : NULL;
    char *dir = NULL;
    setenv("DLCC_CACHE_DIR", "/x/y", 1);
    DL_CHECK_OK(dl_cache_default_dir(&dir));
    DL_CHECK_STR_EQ(dir, "/x/y");
    free(dir);
    unsetenv("DLCC_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    DL_CHECK_OK(dl_cache_default_dir(&dir));
    DL_CHECK_STR_EQ(dir, "/xdg/dlcc");
    free(dir);
    unsetenv("XDG_CACHE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", "/home/u", 1);
    DL_CHECK_OK(dl_cache_default_dir(&dir));
    DL_CHECK_STR_EQ(dir, "/home/u/.cache/dlcc");
    free(dir);
    unsetenv("HOME");
    DL_CHECK_EQ_I64(dl_cache_default_dir(&dir), DL_ERR_CACHE);
    DL_CHECK(dir == NULL);
    if (home) {
        setenv("HOME", home, 1);
        free(home);
    }
    if (saved) {
        setenv("DLCC_CACHE_DIR", saved, 1);
        free(saved);
    }
}

DL_TEST(untrusted_directory_and_database_refused) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    dl_cache_close(c);
    DL_CHECK(chmod(cdir, 0770) == 0);
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
    DL_CHECK(c == NULL);
    char fix[200];
    snprintf(fix, sizeof fix, "chmod 700 %s", cdir);
    DL_CHECK(has_diag(d, fix));
    DL_CHECK(dl_diags_get(d, 0)->sev == DL_SEV_WARNING);
    DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CACHE);
    DL_CHECK(chmod(cdir, 0700) == 0);
    char dbp[128];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    DL_CHECK(chmod(dbp, 0660) == 0);
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
    snprintf(fix, sizeof fix, "chmod 600 %s", dbp);
    DL_CHECK(has_diag(d, fix));
    DL_CHECK(chmod(dbp, 0600) == 0);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    dl_cache_close(c);
    if (geteuid() == 0) { // root can hand the directory to someone else
        DL_CHECK(chown(cdir, 12345, 12345) == 0);
        dl_diags_clear(d);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(has_diag(d, "owned by uid 12345"));
        DL_CHECK(has_diag(d, "DLCC_CACHE_DIR"));
    }
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(readonly_handle) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    // Never creates.
    DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CACHE);
    DL_CHECK(c == NULL);
    struct stat st;
    DL_CHECK(stat(cdir, &st) != 0);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(700, 8, 0);
    dl_cache_entry m = meta_of("m", 5.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 700, &m, d));
    dl_cache_close(c);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_open_readonly(cdir, d, &c));
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK(got && len == 700 && memcmp(got, b, 700) == 0);
    free(got);
    DL_CHECK_OK(dl_cache_get(c, key_n(2), &got, &len, NULL, d));
    DL_CHECK(got == NULL);
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    DL_CHECK_EQ_I64(dl_cache_put(c, key_n(2), b, 700, &m, d), DL_ERR_CACHE);
    DL_CHECK(has_diag(d, "read-only"));
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.entries, 1);
    DL_CHECK_EQ_I64(s.hits, 0); // the read-only handle does not count
    // A read-only handle works while a writer has the database open.
    dl_cache *w = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &w));
    DL_CHECK_OK(dl_cache_put(w, key_n(3), b, 700, &m, d));
    DL_CHECK_OK(dl_cache_get(c, key_n(3), &got, &len, NULL, d));
    DL_CHECK(got != NULL);
    free(got);
    dl_cache_close(w);
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(export_import_round_trip_skips_damaged) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *bs[3];
    for (int i = 0; i < 3; i++) {
        bs[i] = blob_n(1000 + 100 * (size_t)i, 10 + (unsigned)i, (uint8_t)i);
        dl_cache_entry m = meta_of(i == 0 ? "zero" : i == 1 ? "one" : "two", 10.0 * i);
        DL_CHECK_OK(dl_cache_put(c, key_n(i), bs[i], 1000 + 100 * (size_t)i, &m, d));
    }
    char xdir[128];
    snprintf(xdir, sizeof xdir, "%s/export", root);
    int64_t n = 0;
    DL_CHECK_OK(dl_cache_export(c, xdir, d, &n));
    DL_CHECK_EQ_I64(n, 3);
    dl_cache_close(c);
    // Damage key 1's file: flip a byte in its artifact.
    char hex[33], p[200];
    dl_hash128_hex(key_n(1), hex);
    snprintf(p, sizeof p, "%s/%s.dlcc", xdir, hex);
    FILE *f = fopen(p, "r+b");
    DL_CHECK(f != NULL);
    fseek(f, 500, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 500, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    // And a file that is not an export at all.
    snprintf(p, sizeof p, "%s/junk.dlcc", xdir);
    f = fopen(p, "wb");
    fputs("hello", f);
    fclose(f);

    char cdir2[128];
    snprintf(cdir2, sizeof cdir2, "%s/c2", root);
    DL_CHECK_OK(dl_cache_open(cdir2, d, &c));
    dl_diags_clear(d);
    int64_t skipped = 0;
    DL_CHECK_OK(dl_cache_import(c, xdir, false, d, &n, &skipped));
    DL_CHECK_EQ_I64(n, 2);
    DL_CHECK_EQ_I64(skipped, 2);
    DL_CHECK(has_diag(d, "it is damaged"));
    DL_CHECK(has_diag(d, hex));
    DL_CHECK(has_diag(d, "junk.dlcc"));
    for (int i = 0; i < 3; i++) {
        uint8_t *got = NULL;
        size_t len = 0;
        dl_cache_entry e;
        DL_CHECK_OK(dl_cache_get(c, key_n(i), &got, &len, &e, d));
        if (i == 1) {
            DL_CHECK(got == NULL);
            continue;
        }
        DL_CHECK(got && len == 1000 + 100 * (size_t)i && memcmp(got, bs[i], len) == 0);
        DL_CHECK_STR_EQ(e.model, i == 0 ? "zero" : "two");
        DL_CHECK_NEAR(e.compile_ms, 10.0 * i, 0, 0);
        DL_CHECK_STR_EQ(e.target, "x86_64-pc-linux-gnu/znver3");
        dl_cache_entry_fini(&e);
        free(got);
    }
    int64_t bad = 0;
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    dl_cache_close(c);
    for (int i = 0; i < 3; i++) {
        free(bs[i]);
    }
    dl_diags_destroy(d);
    rm_rf(root);
}

// 8 processes x 20 operations over 4 keys on one fresh cache: puts with a blob distinct per
// writer, gets that check what they read is some writer's complete blob.
#ifndef STRESS_PROCS
#    define STRESS_PROCS 8
#endif
#ifndef STRESS_OPS
#    define STRESS_OPS 20
#endif
static int stress_child(const char *cdir, int who) {
    dl_cache *c = NULL;
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK || dl_cache_open(cdir, d, &c) != DL_OK) {
        dump_diags(d);
        return 10;
    }
    int rc = 0;
    for (int i = 0; i < STRESS_OPS && rc == 0; i++) {
        int k = (who + i) % 4;
        if (i % 2 == 0) {
            size_t len = 2000 + (size_t)(who * 97 + i * 13);
            uint8_t *b = blob_n(len, (unsigned)(1000 * who + i), (uint8_t)k);
            dl_cache_entry m = meta_of("stress", (double)who);
            if (dl_cache_put(c, key_n(k), b, len, &m, d) != DL_OK) {
                rc = 11;
            }
            free(b);
        } else {
            uint8_t *got = NULL;
            size_t len = 0;
            if (dl_cache_get(c, key_n(k), &got, &len, NULL, d) != DL_OK) {
                rc = 12;
            } else if (got && (len < 2000 || got[BLOB_TAG_AT] != (uint8_t)k)) {
                rc = 13;
            }
            free(got);
        }
    }
    if (rc || dl_diags_count(d)) {
        dump_diags(d);
        rc = rc ? rc : 14;
    }
    dl_cache_close(c);
    dl_diags_destroy(d);
    return rc;
}

DL_TEST(concurrency_stress_many_processes) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    pid_t kids[STRESS_PROCS];
    for (int i = 0; i < STRESS_PROCS; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            alarm(30); // never hang the suite
            _exit(stress_child(cdir, i));
        }
        DL_CHECK(kids[i] > 0);
    }
    int n_ok = 0;
    for (int i = 0; i < STRESS_PROCS; i++) {
        int status = 0;
        waitpid(kids[i], &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            n_ok++;
        } else {
            fprintf(stderr, "child %d: status %d\n", i, status);
        }
    }
    DL_CHECK_EQ_I64(n_ok, STRESS_PROCS);
    DL_CHECK(raw_integrity_ok(cdir));
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 4);
    dl_cache *c = NULL;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    int64_t bad = -1;
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    for (int k = 0; k < 4; k++) {
        uint8_t *got = NULL;
        size_t len = 0;
        DL_CHECK_OK(dl_cache_get(c, key_n(k), &got, &len, NULL, d));
        DL_CHECK(got != NULL && got[BLOB_TAG_AT] == (uint8_t)k);
        free(got);
    }
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK_EQ_I64(s.hits + s.misses, STRESS_PROCS * STRESS_OPS / 2 + 4);
    dl_cache_close(c);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST_MAIN()
