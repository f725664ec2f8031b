// tests/cache/test_store_trust.c — the cache is never a way in: every file SQLite would read
// beside cache.db (-wal, -shm, -journal) passes the trust rules before SQLite opens anything; a
// forged WAL planted by another user is never replayed; import reads only the caller's files
// unless told to trust others, checks every entry like verify and skips a bad one without
// stopping; rows of the wrong type or value are reported by verify and never break a listing;
// triggers stored in the database never run.
//
// Tests run as root here: the "owned by another uid" cases chown to 65534 then; run as another
// user they are skipped with a message (the "writable by group or others" cases still run).
#include "cache_internal.h"
#include "cache_test_util.h"
#include "dl_test.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

static bool copy_file(const char *from, const char *to) {
    char *data = NULL;
    size_t n = 0;
    if (dl_read_file(from, &data, &n) != DL_OK) {
        return false;
    }
    FILE *f = fopen(to, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    if (f) {
        ok = fclose(f) == 0 && ok;
    }
    free(data);
    return ok;
}

static bool same_bytes(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    bool ok = dl_read_file(a, &x, &nx) == DL_OK && dl_read_file(b, &y, &ny) == DL_OK && nx == ny &&
              memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return ok;
}

static void touch_0600(const char *p) {
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) {
        close(fd);
    }
}

static bool am_root(const char *what) {
    if (geteuid() == 0) {
        return true;
    }
    printf("  skipped sub-case (%s): needs root to give a file to another uid\n", what);
    return false;
}

DL_TEST(side_files_of_others_or_writable_refused) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(500, 1, 1);
    dl_cache_entry m = meta_of("m", 1.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 500, &m, d));
    dl_cache_close(c);
    static const char *const sfx[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/cache.db%s", cdir, sfx[i]);
        if (!file_exists(p)) {
            touch_0600(p);
        }
        // Writable by group: refused by both handles, naming the file and the fix.
        DL_CHECK(chmod(p, 0660) == 0);
        dl_diags_clear(d);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(c == NULL);
        DL_CHECK(has_diag(d, p));
        DL_CHECK(has_diag(d, "writable by group or others"));
        DL_CHECK(has_diag(d, "rm -f"));
        DL_CHECK(dl_diags_get(d, 0)->sev == DL_SEV_WARNING);
        DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(chmod(p, 0606) == 0);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(chmod(p, 0600) == 0);
        dl_diags_clear(d);
        DL_CHECK_OK(dl_cache_open(cdir, d, &c));
        dl_cache_close(c);
        // Owned by someone else, even with the "right" mode.
        if (am_root(sfx[i])) {
            DL_CHECK(chown(p, 65534, 65534) == 0);
            dl_diags_clear(d);
            DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
            DL_CHECK(has_diag(d, "owned by uid 65534"));
            DL_CHECK(has_diag(d, p));
            DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CACHE);
            DL_CHECK(chown(p, 0, 0) == 0);
        }
        // A symbolic link (to a file of ours, even) or something that is not a file.
        char target[160];
        snprintf(target, sizeof target, "%s/elsewhere", root);
        touch_0600(target);
        DL_CHECK(rename(p, target) == 0);
        DL_CHECK(symlink(target, p) == 0);
        dl_diags_clear(d);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(has_diag(d, "symbolic link"));
        DL_CHECK(unlink(p) == 0);
        DL_CHECK(mkdir(p, 0700) == 0);
        dl_diags_clear(d);
        DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
        DL_CHECK(has_diag(d, "not a regular file"));
        DL_CHECK(rmdir(p) == 0);
        DL_CHECK(rename(target, p) == 0);
        // Back to normal, and the entry is still there.
        dl_diags_clear(d);
        DL_CHECK_OK(dl_cache_open(cdir, d, &c));
        uint8_t *got = NULL;
        size_t len = 0;
        DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
        DL_CHECK(got && len == 500 && memcmp(got, b, 500) == 0);
        free(got);
        dl_cache_close(c);
    }
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

// Inserts (key, blob) as a complete, hash-consistent entry through a raw connection to DB that
// keeps its WAL (no checkpoint on close): the attacker's side of the forged-WAL test.
static bool raw_insert_keep_wal(const char *db_path, dl_hash128 key, const uint8_t *blob,
                                size_t len) {
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return false;
    }
    (void)sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
    bool ok = sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) == SQLITE_OK &&
              raw_insert_entry(db,
                               "INSERT INTO entries VALUES (?1, 'victim', 't', 'v', ?2, 1, 1.0, "
                               "1, 4000000000, 0, ?3, ?4, '', '')",
                               key, blob, len);
    sqlite3_close(db);
    return ok;
}

DL_TEST(forged_wal_never_replayed) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *good = blob_n(600, 2, 1);
    dl_cache_entry m = meta_of("good", 1.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), good, 600, &m, d));
    dl_cache_close(c);
    // Everything into cache.db (a fresh state: no -wal, no -shm).
    DL_CHECK(raw_sql(cdir, "PRAGMA wal_checkpoint(TRUNCATE)") >= 0);
    char p[160], q[512];
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/cache.db%s", cdir, i ? "-shm" : "-wal");
        (void)unlink(p);
    }
    // The attacker copies the victim's database, forges an entry (the blob hash matches: XXH3 is
    // unkeyed) and keeps only the WAL that holds it.
    char adir[96], adb[128], vdb[128], keep[128];
    snprintf(adir, sizeof adir, "%s/attacker", root);
    snprintf(adb, sizeof adb, "%s/cache.db", adir);
    snprintf(vdb, sizeof vdb, "%s/cache.db", cdir);
    snprintf(keep, sizeof keep, "%s/victim-db-before", root);
    DL_CHECK(mkdir(adir, 0700) == 0);
    DL_CHECK(copy_file(vdb, adb));
    DL_CHECK(copy_file(vdb, keep));
    uint8_t *evil = blob_n(700, 66, 0xee);
    DL_CHECK(raw_insert_keep_wal(adb, key_n(2), evil, 700));
    snprintf(p, sizeof p, "%s-wal", adb);
    DL_CHECK(file_exists(p));
    // The material is real: SQLite alone, given the victim's database and this WAL, replays it.
    char tdir[96], tdb[128];
    snprintf(tdir, sizeof tdir, "%s/check", root);
    snprintf(tdb, sizeof tdb, "%s/cache.db-wal", tdir);
    DL_CHECK(mkdir(tdir, 0700) == 0);
    snprintf(q, sizeof q, "%s/cache.db", tdir);
    DL_CHECK(copy_file(vdb, q));
    DL_CHECK(copy_file(p, tdb));
    char k2[33], sql[128];
    dl_hash128_hex(key_n(2), k2);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM entries WHERE key = '%s'", k2);
    DL_CHECK_EQ_I64(raw_sql(tdir, sql), 1);
    // Planted beside the victim's database: by another uid (then even mode 0600, after the
    // victim's chmod, is refused), or, when not root, left writable by group.
    snprintf(q, sizeof q, "%s/cache.db-wal", cdir);
    DL_CHECK(copy_file(p, q));
    if (geteuid() == 0) {
        DL_CHECK(chown(q, 65534, 65534) == 0);
        DL_CHECK(chmod(q, 0600) == 0);
    } else {
        printf("  not root: the planted WAL is ours but writable by group (0660)\n");
        DL_CHECK(chmod(q, 0660) == 0);
    }
    DL_CHECK(chmod(cdir, 0700) == 0 && chmod(vdb, 0600) == 0); // the victim's "fix"
    dl_diags_clear(d);
    DL_CHECK_EQ_I64(dl_cache_open(cdir, d, &c), DL_ERR_CACHE);
    DL_CHECK(c == NULL);
    DL_CHECK(has_diag(d, "cache.db-wal"));
    DL_CHECK_EQ_I64(dl_cache_open_readonly(cdir, d, &c), DL_ERR_CACHE);
    DL_CHECK(c == NULL);
    // Nothing was checkpointed into the database either.
    DL_CHECK(same_bytes(vdb, keep));
    // The fix the warning gives: remove the side files. The forged entry is gone for good.
    snprintf(q, sizeof q, "rm -f '%s'-wal '%s'-shm '%s'-journal", vdb, vdb, vdb);
    DL_CHECK(system(q) == 0);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(2), &got, &len, NULL, d));
    DL_CHECK(got == NULL);
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d));
    DL_CHECK(got && len == 600 && memcmp(got, good, 600) == 0);
    free(got);
    dl_cache_close(c);
    free(good);
    free(evil);
    dl_diags_destroy(d);
    rm_rf(root);
}

// ---------------------------------------------------------------------------------------------
// Import

static void le_put(dl_strbuf *b, uint64_t v, int n) {
    unsigned char x[8];
    for (int i = 0; i < n; i++) {
        x[i] = (unsigned char)(v >> (8 * i));
    }
    dl_strbuf_append(b, (const char *)x, (size_t)n);
}

static void str_put(dl_strbuf *b, const char *s) {
    le_put(b, strlen(s), 4);
    dl_strbuf_append(b, s, strlen(s));
}

// Writes DIR/KEY.dlcc in the export format (cache/export.c), with a correct checksum and blob
// hash: whatever is wrong with it is wrong on purpose.
static bool write_export(const char *dir, dl_hash128 key, const char *model, double ms,
                         int64_t created, const uint8_t *blob, size_t len) {
    char kh[33];
    dl_hash128_hex(key, kh);
    dl_strbuf b = {0};
    dl_strbuf_append(&b, "DLCCENT\n", 8);
    le_put(&b, 1, 4);
    le_put(&b, 0, 4);
    size_t at = b.len;
    str_put(&b, kh);
    str_put(&b, model);
    str_put(&b, "x86_64-pc-linux-gnu/znver3");
    str_put(&b, "dlcc test");
    le_put(&b, len, 8);
    le_put(&b, 10, 8);
    uint64_t bits;
    memcpy(&bits, &ms, 8);
    le_put(&b, bits, 8);
    le_put(&b, (uint64_t)created, 8);
    le_put(&b, (uint64_t)created, 8);
    le_put(&b, 0, 8);
    dl_hash128 bh = dl_hash128_of(blob, len);
    le_put(&b, bh.lo, 8);
    le_put(&b, bh.hi, 8);
    size_t hl = b.len - at;
    dl_strbuf_append(&b, (const char *)blob, len);
    for (int i = 0; i < 4; i++) {
        b.data[12 + i] = (char)(unsigned char)(hl >> (8 * i));
    }
    dl_hash128 t = dl_hash128_of(b.data, b.len);
    le_put(&b, t.lo, 8);
    le_put(&b, t.hi, 8);
    char p[200];
    snprintf(p, sizeof p, "%s/%s.dlcc", dir, kh);
    bool ok = !b.oom && dl_write_file_atomic(p, b.data, b.len) == DL_OK && chmod(p, 0644) == 0;
    dl_strbuf_fini(&b);
    return ok;
}

static bool has_key(dl_cache *c, dl_hash128 k) {
    dl_diags *d = NULL;
    uint8_t *got = NULL;
    size_t len = 0;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    bool hit = dl_cache_get(c, k, &got, &len, NULL, d) == DL_OK && got != NULL;
    free(got);
    dl_diags_destroy(d);
    return hit;
}

// Keys 0..7 sorted by their hex spelling: the import reads files in that order.
static void sorted_keys(int order[8]) {
    char hex[8][33];
    for (int i = 0; i < 8; i++) {
        dl_hash128_hex(key_n(i), hex[i]);
        order[i] = i;
    }
    for (int i = 1; i < 8; i++) {
        for (int j = i; j > 0 && strcmp(hex[order[j - 1]], hex[order[j]]) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    }
}

DL_TEST(import_bad_entries_skipped_rest_imported) {
    char root[64], cdir[80], xdir[96];
    tmp_root(root, cdir);
    snprintf(xdir, sizeof xdir, "%s/x", root);
    DL_CHECK(mkdir(xdir, 0700) == 0);
    int o[8];
    sorted_keys(o);
    uint8_t *b = blob_n(400, 3, 1);
    uint8_t *junk = blob_n(400, 4, 2);
    memset(junk, 'J', 64); // not an ELF header, but hash and checksum are right
    // The first file read is the NaN one: it used to stop the whole import (the store's NOT NULL
    // constraint failed and the loop ended).
    DL_CHECK(write_export(xdir, key_n(o[0]), "nan", NAN, 100, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[1]), "good1", 5.0, 100, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[2]), "inf", INFINITY, 100, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[3]), "notelf", 5.0, 100, junk, 400));
    DL_CHECK(write_export(xdir, key_n(o[4]), "esc\x1b[2Jape", 5.0, 100, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[5]), "neg", -3.0, 100, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[6]), "past", 5.0, -7, b, 400));
    DL_CHECK(write_export(xdir, key_n(o[7]), "good2", 7.0, 100, b, 400));
    // A truncated copy of a good file, under another name.
    char kh[33], p[200], p2[200];
    dl_hash128_hex(key_n(o[1]), kh);
    snprintf(p, sizeof p, "%s/%s.dlcc", xdir, kh);
    snprintf(p2, sizeof p2, "%s/truncated.dlcc", xdir);
    DL_CHECK(copy_file(p, p2));
    DL_CHECK(truncate(p2, 300) == 0);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    int64_t n = -1, skipped = -1;
    DL_CHECK_OK(dl_cache_import(c, xdir, false, d, &n, &skipped));
    DL_CHECK_EQ_I64(n, 2);
    DL_CHECK_EQ_I64(skipped, 7);
    DL_CHECK(has_key(c, key_n(o[1])) && has_key(c, key_n(o[7])));
    for (int i = 0; i < 8; i++) {
        if (i != 1 && i != 7) {
            DL_CHECK(!has_key(c, key_n(o[i])));
            dl_hash128_hex(key_n(o[i]), kh);
            DL_CHECK(has_diag(d, kh)); // each skipped file is named
        }
    }
    DL_CHECK(has_diag(d, "compile time is not a non-negative number"));
    DL_CHECK(has_diag(d, "not an ELF file"));
    DL_CHECK(has_diag(d, "control characters"));
    DL_CHECK(has_diag(d, "out of range"));
    DL_CHECK(has_diag(d, "truncated.dlcc"));
    int64_t bad = -1;
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    dl_cache_stats s;
    DL_CHECK_OK(dl_cache_stats_get(c, &s));
    DL_CHECK(isfinite(s.compile_ms_saved));
    dl_cache_close(c);
    free(b);
    free(junk);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(import_only_own_files_unless_trusted) {
    char root[64], cdir[80], xdir[96];
    tmp_root(root, cdir);
    snprintf(xdir, sizeof xdir, "%s/x", root);
    DL_CHECK(mkdir(xdir, 0755) == 0);
    uint8_t *b = blob_n(300, 5, 1);
    for (int i = 0; i < 4; i++) {
        DL_CHECK(write_export(xdir, key_n(i), "m", 1.0, 100, b, 300));
    }
    char kh[33], p[200], elsewhere[200];
    dl_hash128_hex(key_n(0), kh);
    snprintf(p, sizeof p, "%s/%s.dlcc", xdir, kh);
    DL_CHECK(chmod(p, 0666) == 0); // anyone could have put their code in it
    dl_hash128_hex(key_n(1), kh);
    snprintf(p, sizeof p, "%s/%s.dlcc", xdir, kh);
    snprintf(elsewhere, sizeof elsewhere, "%s/linked", root);
    DL_CHECK(rename(p, elsewhere) == 0);
    DL_CHECK(symlink(elsewhere, p) == 0);
    bool root_case = am_root("import of another uid's file");
    if (root_case) {
        dl_hash128_hex(key_n(2), kh);
        snprintf(p, sizeof p, "%s/%s.dlcc", xdir, kh);
        DL_CHECK(chown(p, 65534, 65534) == 0);
    }
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    int64_t n = -1, skipped = -1;
    DL_CHECK_OK(dl_cache_import(c, xdir, false, d, &n, &skipped));
    DL_CHECK_EQ_I64(n, root_case ? 1 : 2);
    DL_CHECK_EQ_I64(skipped, root_case ? 3 : 2);
    DL_CHECK(!has_key(c, key_n(0)) && !has_key(c, key_n(1)) && has_key(c, key_n(3)));
    DL_CHECK(has_diag(d, "writable by group or others"));
    DL_CHECK(has_diag(d, "symbolic link"));
    DL_CHECK(has_diag(d, "--trust"));
    if (root_case) {
        DL_CHECK(!has_key(c, key_n(2)));
        DL_CHECK(has_diag(d, "owned by uid 65534"));
    }
    // Told to trust them, it takes all four (still checked: they are well-formed).
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_import(c, xdir, true, d, &n, &skipped));
    DL_CHECK_EQ_I64(n, 4);
    DL_CHECK_EQ_I64(skipped, 0);
    for (int i = 0; i < 4; i++) {
        DL_CHECK(has_key(c, key_n(i)));
    }
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

// ---------------------------------------------------------------------------------------------
// Hostile rows and schema objects in a database that passes the trust rules

DL_TEST(rows_of_wrong_type_reported_by_verify_and_listed_cleanly) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(300, 6, 1);
    dl_cache_entry m = meta_of("ok", 2.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 300, &m, d));
    dl_cache_close(c);
    char k1[33], sql[512];
    dl_hash128_hex(key_n(1), k1);
    // Copies of the good row with one column spoiled each.
    static const char *const spoil[] = {
        "compile_ms = 1e999",        // infinity
        "compile_ms = 'fast'",       // text in a REAL column
        "size = 'big'",              // text in an INTEGER column
        "blob = CAST(blob AS TEXT)", // the artifact as text
        "model = x'00ff'",           // a blob where text belongs
        "hits = -5",
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(spoil); i++) {
        char k[33];
        dl_hash128_hex(key_n(10 + (int)i), k);
        snprintf(sql, sizeof sql,
                 "INSERT INTO entries SELECT '%s', model, target, compiler_version, size, "
                 "source_size, compile_ms, created, last_used, hits, blob_hash, blob, source, "
                 "dims FROM entries "
                 "WHERE key = '%s'",
                 k, k1);
        DL_CHECK(raw_sql(cdir, sql) == 0);
        snprintf(sql, sizeof sql, "UPDATE entries SET %s WHERE key = '%s'", spoil[i], k);
        DL_CHECK(raw_sql(cdir, sql) == 0);
    }
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 7);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    dl_cache_entry *es = NULL;
    size_t n = 0;
    DL_CHECK_OK(dl_cache_list(c, &es, &n));
    DL_CHECK_EQ_I64(n, 7);
    for (size_t i = 0; i < n; i++) {
        DL_CHECK(es[i].model && es[i].target && es[i].compiler_version);
        DL_CHECK(isfinite(es[i].compile_ms) && es[i].compile_ms >= 0);
        dl_cache_entry_fini(&es[i]);
    }
    free(es);
    int64_t bad = 0;
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 6);
    for (size_t i = 0; i < DL_ARRAY_LEN(spoil); i++) {
        char k[33];
        dl_hash128_hex(key_n(10 + (int)i), k);
        DL_CHECK(has_diag(d, k));
    }
    DL_CHECK(has_diag(d, "compile time is not a non-negative number"));
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM entries"), 1);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK_EQ_I64(bad, 0);
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST(triggers_in_the_database_never_run) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(300, 7, 1);
    dl_cache_entry m = meta_of("ok", 2.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 300, &m, d));
    dl_cache_close(c);
    DL_CHECK(raw_sql(cdir, "CREATE TABLE spy(n INTEGER)") == 0);
    DL_CHECK(raw_sql(cdir, "CREATE TRIGGER t AFTER UPDATE ON entries BEGIN "
                           "INSERT INTO spy VALUES (1); END") == 0);
    DL_CHECK(raw_sql(cdir, "CREATE TRIGGER t2 AFTER INSERT ON entries BEGIN "
                           "INSERT INTO spy VALUES (2); END") == 0);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *got = NULL;
    size_t len = 0;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, NULL, d)); // updates hits
    DL_CHECK(got != NULL);
    free(got);
    DL_CHECK_OK(dl_cache_put(c, key_n(2), b, 300, &m, d));
    dl_cache_close(c);
    DL_CHECK_EQ_I64(raw_sql(cdir, "SELECT count(*) FROM spy"), 0);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

// A damaged index can map a key to the row of another key (found by fuzz_store): a lookup must
// never return that row's artifact (another model's code), only a miss and a warning.
DL_TEST(stale_index_never_returns_another_keys_artifact) {
    char root[64], cdir[80];
    tmp_root(root, cdir);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_cache *c = NULL;
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *b = blob_n(300, 8, 1);
    dl_cache_entry m = meta_of("a", 2.0);
    DL_CHECK_OK(dl_cache_put(c, key_n(1), b, 300, &m, d));
    dl_cache_close(c);
    DL_CHECK(raw_sql(cdir, "PRAGMA wal_checkpoint(TRUNCATE)") >= 0);
    long long page = raw_sql(cdir, "SELECT rootpage FROM sqlite_schema WHERE name = 'entries'");
    long long psize = raw_sql(cdir, "PRAGMA page_size");
    DL_CHECK(page > 0 && psize > 0);
    // Rewrite key 1 as key 2 in the table's (single) page only: the index still says key 1.
    char dbp[128], k1[33], k2[33];
    snprintf(dbp, sizeof dbp, "%s/cache.db", cdir);
    dl_hash128_hex(key_n(1), k1);
    dl_hash128_hex(key_n(2), k2);
    char *data = NULL;
    size_t n = 0;
    DL_CHECK_OK(dl_read_file(dbp, &data, &n));
    size_t lo = (size_t)((page - 1) * psize), hi = lo + (size_t)psize;
    DL_CHECK(hi <= n);
    char *at = NULL;
    for (size_t i = lo; i + 32 <= hi; i++) {
        if (memcmp(data + i, k1, 32) == 0) {
            at = data + i;
            break;
        }
    }
    DL_CHECK(at != NULL);
    memcpy(at, k2, 32);
    FILE *f = fopen(dbp, "r+b");
    DL_CHECK(f != NULL);
    DL_CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
    free(data);
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_open(cdir, d, &c));
    uint8_t *got = NULL;
    size_t len = 0;
    dl_cache_entry e;
    DL_CHECK_OK(dl_cache_get(c, key_n(1), &got, &len, &e, d));
    if (got) {
        dl_cache_entry_fini(&e);
    }
    DL_CHECK(got == NULL);
    free(got);
    DL_CHECK(has_diag(d, "is damaged"));
    int64_t bad = 0;
    dl_diags_clear(d);
    DL_CHECK_OK(dl_cache_verify(c, d, &bad));
    DL_CHECK(bad > 0); // the integrity check sees the stale index
    dl_cache_close(c);
    free(b);
    dl_diags_destroy(d);
    rm_rf(root);
}

DL_TEST_MAIN()
