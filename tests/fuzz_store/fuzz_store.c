// tests/fuzz_store/fuzz_store.c — libFuzzer entry point for the cache store opening a hostile
// database: the bytes become DIR/cache.db (mode 0600 in a 0700 directory of ours, so the trust
// rules pass and SQLite reads it), then the store is opened read-only (list, lookups, verify)
// and read-write (stats, list, prefix search, lookups, verify, export, import of the export into
// a second cache, prune, put), and closed. An input that starts like an export file
// ("DLCCENT\n") is instead imported into a fresh cache. ASan reports memory errors and leaks, UBSan
// undefined behaviour; the store's contracts are checked with abort():
//   - DL_OK from open hands back a handle, an error hands back NULL;
//   - every listed entry has its strings and a finite, non-negative compile time;
//   - a hit's bytes have the entry's size and blob hash (nothing unverified is ever returned);
//   - what import takes from an export passes verify in the second cache.
// Built with DL_FUZZ_REPLAY_MAIN it is a plain program over files or directories (the ctest over
// tests/fuzz/corpus_store, see tests/fuzz_store/tests.cmake), and with `--make-seeds DIR` it writes
// the seed corpus: small valid databases made by the store itself.
#include "dl_cache.h"

#include <sqlite3.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char g_root[64]; // a private directory for the whole run (0700)

// Removes `dir` and the plain files in it (all the fuzz directories ever hold: a database, its
// side files, export files). In-process: a fork per input would dominate the run time.
static void rm_tree_files(const char *dir) {
    DIR *dh = opendir(dir);
    if (!dh) {
        if (errno != ENOENT) {
            abort();
        }
        return;
    }
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) {
            rm_tree_files(p); // a directory after all (the seed maker's)
        }
    }
    closedir(dh);
    if (rmdir(dir) != 0) {
        abort();
    }
}

static void setup_root(void) {
    if (g_root[0]) {
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/fuzz_store_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (strlen(g_root) > 48 || !mkdtemp(g_root)) {
        snprintf(g_root, sizeof g_root, "/tmp/fuzz_store_XXXXXX");
        if (!mkdtemp(g_root)) {
            abort();
        }
    }
    setenv("DLCC_CACHE_BUSY_MS", "0", 1); // nobody else uses these databases: never wait
    unsetenv("DLCC_CACHE_MAX_SIZE");
}

static void cleanup_root(void) {
    if (g_root[0]) {
        rm_tree_files(g_root);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setup_root();
    atexit(cleanup_root);
    return 0;
}

static void check_entries(const dl_cache_entry *es, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!es[i].model || !es[i].target || !es[i].compiler_version) {
            abort();
        }
        if (!isfinite(es[i].compile_ms) || es[i].compile_ms < 0) {
            abort();
        }
    }
}

static void free_entries(dl_cache_entry *es, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dl_cache_entry_fini(&es[i]);
    }
    free(es);
}

// Looks `key` up; a hit must be exactly what the entry's metadata promises.
static void lookup(dl_cache *c, dl_hash128 key, dl_diags *d) {
    uint8_t *blob = NULL;
    size_t len = 0;
    dl_cache_entry meta;
    dl_status st = dl_cache_get(c, key, &blob, &len, &meta, d);
    if (st != DL_OK) {
        if (blob) {
            abort();
        }
        return;
    }
    if (blob) {
        if (len != meta.size || !dl_hash128_eq(dl_hash128_of(blob, len), meta.blob_hash) ||
            !dl_hash128_eq(meta.key, key) || !meta.model) {
            abort();
        }
        dl_cache_entry_fini(&meta);
        free(blob);
    }
}

static void exercise(dl_cache *c, dl_diags *d, bool writable, const char *xdir, const char *c2dir) {
    dl_cache_entry *es = NULL;
    size_t n = 0;
    dl_cache_stats s;
    if (dl_cache_stats_get(c, &s) == DL_OK && !(isfinite(s.compile_ms_saved))) {
        abort();
    }
    if (dl_cache_list(c, &es, &n) == DL_OK) {
        check_entries(es, n);
        for (size_t i = 0; i < n && i < 8; i++) {
            lookup(c, es[i].key, d);
        }
        if (n > 0) {
            char hex[33];
            dl_hash128_hex(es[0].key, hex);
            hex[6] = 0;
            dl_cache_entry *ps = NULL;
            size_t pn = 0;
            if (dl_cache_find_prefix(c, hex, &ps, &pn) == DL_OK) {
                check_entries(ps, pn);
                free_entries(ps, pn);
            }
        }
        free_entries(es, n);
    }
    lookup(c, dl_hash128_of("absent", 6), d);
    int64_t bad = 0;
    if (dl_cache_verify(c, d, &bad) != DL_OK && bad == 0 && dl_diags_count(d) == 0) {
        abort(); // a failed check always says why
    }
    if (!writable) {
        return;
    }
    // Whatever survived verify goes out and into a second, fresh cache, which must verify clean.
    int64_t nx = 0;
    if (dl_cache_export(c, xdir, d, &nx) == DL_OK && nx > 0) {
        dl_cache *c2 = NULL;
        if (dl_cache_open(c2dir, d, &c2) == DL_OK) {
            int64_t ni = 0, skipped = 0;
            if (dl_cache_import(c2, xdir, false, d, &ni, &skipped) == DL_OK) {
                int64_t bad2 = 0;
                if (dl_cache_verify(c2, d, &bad2) == DL_OK && bad2 != 0) {
                    abort(); // import let in something verify rejects
                }
            }
            dl_cache_close(c2);
        }
    }
    int64_t removed = 0;
    uint64_t freed = 0;
    if (dl_cache_prune(c, 0, 3600, &removed, &freed) != DL_OK && removed != 0) {
        abort(); // a failed prune reports nothing removed
    }
    static const uint8_t tiny[80] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    dl_cache_entry m;
    memset(&m, 0, sizeof m);
    m.model = (char *)(uintptr_t)"fuzz";
    m.target = (char *)(uintptr_t)"t";
    m.compiler_version = (char *)(uintptr_t)"v";
    m.compile_ms = 1.0;
    if (dl_cache_put(c, dl_hash128_of("fuzz", 4), tiny, sizeof tiny, &m, d) == DL_OK) {
        lookup(c, dl_hash128_of("fuzz", 4), d);
    }
}

// An input that starts like an export file is one: it is imported into a fresh cache, which must
// then verify clean (import takes nothing verify would reject).
static void import_one(const uint8_t *data, size_t size, const char *xdir, const char *c2dir) {
    char path[160];
    snprintf(path, sizeof path, "%s/0123456789abcdef0123456789abcdef.dlcc", xdir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size || close(fd) != 0) {
        abort();
    }
    dl_diags *d = NULL;
    dl_cache *c2 = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return;
    }
    if (dl_cache_open(c2dir, d, &c2) == DL_OK) {
        int64_t n = 0, skipped = 0;
        dl_status st = dl_cache_import(c2, xdir, false, d, &n, &skipped);
        if (st == DL_OK && n + skipped != 1) {
            abort(); // the one file is either imported or skipped
        }
        if (st == DL_OK && skipped == 1 && dl_diags_count(d) == 0) {
            abort(); // a skipped file is always named with the reason
        }
        int64_t bad = 0;
        if (dl_cache_verify(c2, d, &bad) == DL_OK && bad != 0) {
            abort(); // import let in something verify rejects
        }
        dl_cache_close(c2);
    }
    dl_diags_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup_root();
    char cdir[96], xdir[96], c2dir[96], db[128];
    snprintf(cdir, sizeof cdir, "%s/c", g_root);
    snprintf(xdir, sizeof xdir, "%s/x", g_root);
    snprintf(c2dir, sizeof c2dir, "%s/c2", g_root);
    snprintf(db, sizeof db, "%s/cache.db", cdir);
    rm_tree_files(cdir);
    rm_tree_files(xdir);
    rm_tree_files(c2dir);
    if (mkdir(cdir, 0700) != 0 || mkdir(xdir, 0700) != 0) {
        abort();
    }
    if (size >= 8 && memcmp(data, "DLCCENT\n", 8) == 0) {
        import_one(data, size, xdir, c2dir);
        return 0;
    }
    int fd = open(db, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0) {
        abort();
    }
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        bool writable = pass == 1;
        dl_cache *c = NULL;
        dl_status st = writable ? dl_cache_open(cdir, d, &c) : dl_cache_open_readonly(cdir, d, &c);
        if ((st == DL_OK) != (c != NULL)) {
            abort();
        }
        if (st != DL_OK && st != DL_ERR_NOMEM && dl_diags_count(d) == 0) {
            abort(); // a refusal always says why
        }
        if (c) {
            exercise(c, d, writable, xdir, c2dir);
            dl_cache_close(c);
        }
        dl_diags_clear(d);
    }
    dl_diags_destroy(d);
    return 0;
}

#ifdef DL_FUZZ_REPLAY_MAIN

static int run_file(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    if (dl_read_file(path, &buf, &len) != DL_OK) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    return 0;
}

// The seed corpus: small databases written by the store itself (512-byte pages, so a few KB
// each), in WAL mode as the store leaves them.
static uint8_t *elf_blob(size_t n, unsigned seed) {
    uint8_t *b = dl_mem_alloc(n);
    if (!b) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)(dl_rng_bits(seed, i) & 0xff);
    }
    static const uint8_t hdr[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1,         0,        0,
                                    0,    0,   0,   0,   0, 0, 0,         3,        0,
                                    62,   0,   1,   0,   0, 0, [52] = 64, [54] = 56};
    memcpy(b, hdr, n < 64 ? n : 64);
    return b;
}

static int make_seed(const char *out_dir, const char *name, int n_entries, bool damage) {
    char cdir[96], db[128], out[512];
    snprintf(cdir, sizeof cdir, "%s/seed", g_root);
    snprintf(db, sizeof db, "%s/cache.db", cdir);
    rm_tree_files(cdir);
    if (mkdir(cdir, 0700) != 0) {
        return 1;
    }
    // A database with small pages, then the store's schema on top.
    sqlite3 *raw = NULL;
    if (sqlite3_open(db, &raw) != SQLITE_OK ||
        sqlite3_exec(raw,
                     "PRAGMA page_size = 512; PRAGMA auto_vacuum = INCREMENTAL; "
                     "CREATE TABLE x(a); DROP TABLE x; VACUUM;",
                     NULL, NULL, NULL) != SQLITE_OK) {
        return 1;
    }
    sqlite3_close(raw);
    chmod(db, 0600);
    dl_diags *d = NULL;
    dl_cache *c = NULL;
    if (dl_diags_create(&d) != DL_OK || dl_cache_open(cdir, d, &c) != DL_OK) {
        return 1;
    }
    for (int i = 0; i < n_entries; i++) {
        char k[16];
        snprintf(k, sizeof k, "seed-%d", i);
        size_t len = 96 + 40 * (size_t)i;
        uint8_t *b = elf_blob(len, (unsigned)i + 1);
        dl_cache_entry m;
        memset(&m, 0, sizeof m);
        m.model = (char *)(uintptr_t)(i % 2 ? "mlp" : "cnn_block");
        m.target = (char *)(uintptr_t)"x86_64-pc-linux-gnu/znver3";
        m.compiler_version = (char *)(uintptr_t)"dlcc 0.1.0 (seed) LLVM 19.1.7";
        m.compile_ms = 10.0 * (i + 1);
        m.source_size = 100;
        if (dl_cache_put(c, dl_hash128_of(k, strlen(k)), b, len, &m, d) != DL_OK) {
            return 1;
        }
        free(b);
        if (i == 0) {
            uint8_t *got = NULL;
            size_t gl = 0;
            if (dl_cache_get(c, dl_hash128_of(k, strlen(k)), &got, &gl, NULL, d) != DL_OK) {
                return 1;
            }
            free(got);
        }
    }
    if (dl_cache_pin(c, dl_hash128_of("seed-0", 6)) != DL_OK ||
        dl_cache_set_max_size(c, 1 << 20) != DL_OK) {
        return 1;
    }
    dl_cache_close(c);
    dl_diags_destroy(d);
    // Fold the WAL in, so the one file holds everything.
    if (sqlite3_open(db, &raw) != SQLITE_OK) {
        return 1;
    }
    const char *sql = damage ? "PRAGMA wal_checkpoint(TRUNCATE); UPDATE entries SET compile_ms = "
                               "1e999, size = 'big' WHERE rowid = 1; "
                               "PRAGMA wal_checkpoint(TRUNCATE);"
                             : "PRAGMA wal_checkpoint(TRUNCATE);";
    if (sqlite3_exec(raw, sql, NULL, NULL, NULL) != SQLITE_OK) {
        return 1;
    }
    sqlite3_close(raw);
    char *buf = NULL;
    size_t len = 0;
    if (dl_read_file(db, &buf, &len) != DL_OK) {
        return 1;
    }
    snprintf(out, sizeof out, "%s/%s", out_dir, name);
    dl_status st = dl_write_file_atomic(out, buf, len);
    free(buf);
    printf("%s: %zu bytes\n", out, len);
    return st == DL_OK ? 0 : 1;
}

// Export files (inputs starting "DLCCENT\n" are imported): the entries of a small seed cache.
static int make_export_seeds(const char *out_dir) {
    char cdir[96], xdir[96];
    snprintf(cdir, sizeof cdir, "%s/seed", g_root);
    snprintf(xdir, sizeof xdir, "%s/seedx", g_root);
    if (make_seed(g_root, "scratch.db", 2, false) != 0) { // leaves the cache in cdir
        return 1;
    }
    dl_diags *d = NULL;
    dl_cache *c = NULL;
    int64_t n = 0;
    if (dl_diags_create(&d) != DL_OK || dl_cache_open(cdir, d, &c) != DL_OK ||
        dl_cache_export(c, xdir, d, &n) != DL_OK || n != 2) {
        return 1;
    }
    dl_cache_close(c);
    dl_diags_destroy(d);
    DIR *dh = opendir(xdir);
    if (!dh) {
        return 1;
    }
    struct dirent *e;
    int i = 0, bad = 0;
    while ((e = readdir(dh)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char from[512], to[512];
        snprintf(from, sizeof from, "%s/%s", xdir, e->d_name);
        snprintf(to, sizeof to, "%s/export%d.dlcc", out_dir, i++);
        char *buf = NULL;
        size_t len = 0;
        bad +=
            dl_read_file(from, &buf, &len) != DL_OK || dl_write_file_atomic(to, buf, len) != DL_OK;
        printf("%s: %zu bytes\n", to, len);
        free(buf);
    }
    closedir(dh);
    return bad;
}

int main(int argc, char **argv) {
    setup_root();
    atexit(cleanup_root);
    if (argc == 3 && strcmp(argv[1], "--make-seeds") == 0) {
        int bad = make_seed(argv[2], "empty.db", 0, false) +
                  make_seed(argv[2], "one.db", 1, false) +
                  make_seed(argv[2], "three.db", 3, false) +
                  make_seed(argv[2], "bad_row.db", 3, true) + make_export_seeds(argv[2]);
        return bad ? 1 : 0;
    }
    int n = 0, bad = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "cannot stat %s\n", argv[a]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            bad += run_file(argv[a]);
            n++;
            continue;
        }
        DIR *dir = opendir(argv[a]);
        if (!dir) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[a], e->d_name);
            bad += run_file(p);
            n++;
        }
        closedir(dir);
    }
    printf("%d inputs replayed, %d unreadable\n", n, bad);
    return bad || n == 0 ? 1 : 0;
}
#endif
