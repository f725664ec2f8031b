// tests/fault/test_faultsim.c — allocation-failure injection over the whole pipeline (SQLite's
// faultsim): for a sample model, for every n from 0 up to the number of allocations the work
// makes, the (n+1)-th allocation fails (dl_test_fail_alloc_after(n)) and the work must end with a
// clean error status (or succeed, when the refused allocation had a fallback), never crash,
// abort or leak (the ASan build's LeakSanitizer checks every run), and leave no partial output.
//
//   test_faultsim front   SAMPLE.dlg [-D NAME=V]...   parse -> dims -> shapes -> verify
//   test_faultsim compile SAMPLE.dlg [-D NAME=V]...   + autodiff, codegen, LLVM, link, cache store
//   test_faultsim runtime SAMPLE.dlg [-D NAME=V]...   load -> session -> set inputs -> infer ->
//                                                     train_step -> checkpoint save -> destroy
//
// `compile` pays one LLVM compilation for every failure point that lies after code generation,
// so it takes --stride K (try every K-th point, always including the first K and the last 64)
// and --max-points M; `front` and `runtime` try every point. Prints
// "faultsim PHASE SAMPLE: N failure points, A allocations, E clean errors, S successes".
// Exit 0 when every point ended cleanly, 1 otherwise.
#include "dl_base.h"
#include "dlcc.h"
#include "dlrt.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// libdlrt's own copy of the hook (runtime/rt_fault.c).
void dlrt__test_fail_alloc_after(long n);
long dlrt__test_alloc_count(void);
int dlrt__test_alloc_failed(void);

typedef struct run_opts {
    const char *path;
    dlcc_bind binds[8];
    size_t n_binds;
    long stride;
    long max_points;
    long from; // first point tried (a debugging aid)
    char tmp[256];
} run_opts;

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            rm_tree(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

// Files in `dir` other than the cache's own (for "no partial output").
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
}

typedef struct tally {
    long points, errors, successes, allocs;
    bool bad;
} tally;

static void opts_init(dlcc_options *o, const run_opts *r, const char *cache_dir) {
    dlcc_options_init(o);
    o->binds = r->binds;
    o->n_binds = r->n_binds;
    o->cg.opt_level = 0; // the failure points are ours, not LLVM's: keep each compile cheap
    o->cache_dir = cache_dir;
    o->use_cache = cache_dir != NULL;
}

// One attempt of the front half with the (n+1)-th allocation failing (n < 0: none).
static dl_status front_once(const run_opts *r, long n, bool *refused, long *count) {
    dlcc_options o;
    opts_init(&o, r, NULL);
    dl_diags *d = NULL;
    dl_test_fail_alloc_after(n);
    dl_status st = dl_diags_create(&d);
    dl_ir_module *m = NULL;
    if (st == DL_OK) {
        st = dlcc_load_module(r->path, &o, d, &m);
    }
    *refused = dl_test_alloc_failed();
    *count = dl_test_alloc_count();
    dl_test_fail_alloc_after(-1);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return st;
}

static dl_status compile_once(const run_opts *r, long n, bool *refused, long *count, uint8_t **out,
                              size_t *out_len) {
    dlcc_options o;
    char cache_dir[300];
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", r->tmp);
    opts_init(&o, r, cache_dir);
    dl_diags *d = NULL;
    dlcc_result res;
    memset(&res, 0, sizeof res);
    dl_test_fail_alloc_after(n);
    dl_status st = dl_diags_create(&d);
    if (st == DL_OK) {
        st = dlcc_compile_file(r->path, &o, d, &res);
    }
    *refused = dl_test_alloc_failed();
    *count = dl_test_alloc_count();
    dl_test_fail_alloc_after(-1);
    dl_diags_destroy(d);
    if (st == DL_OK && out) {
        *out = res.artifact;
        *out_len = res.artifact_len;
    } else {
        free(res.artifact);
    }
    return st;
}

static bool status_is_clean(dl_status st, bool refused) {
    // An injected failure must come back as an error (DL_ERR_NOMEM, or the error of a layer that
    // reports it its own way, e.g. the cache falling back) or as success when a fallback
    // absorbed it; a failure without any refused allocation must be success.
    return refused || st == DL_OK;
}

static int run_front(const run_opts *r, tally *t) {
    bool refused;
    long total;
    if (front_once(r, -1, &refused, &total) != DL_OK) {
        fprintf(stderr, "faultsim: %s does not load without failures\n", r->path);
        return 1;
    }
    t->allocs = total;
    for (long n = 0; n <= total; n++) {
        long cnt;
        dl_status st = front_once(r, n, &refused, &cnt);
        t->points++;
        if (!status_is_clean(st, refused)) {
            fprintf(stderr, "faultsim front: point %ld: status %s without a refused allocation\n",
                    n, dl_status_str(st));
            t->bad = true;
        }
        if (st == DL_OK) {
            t->successes++;
        } else {
            t->errors++;
        }
    }
    return t->bad ? 1 : 0;
}

static int run_compile(const run_opts *r, tally *t) {
    bool refused;
    long total;
    char cache_dir[300];
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", r->tmp);
    // The count of a cold compile (cache miss, store included); the cache is emptied before
    // every attempt so each one takes the same path.
    rm_tree(cache_dir);
    if (compile_once(r, -1, &refused, &total, NULL, NULL) != DL_OK) {
        fprintf(stderr, "faultsim: %s does not compile without failures\n", r->path);
        return 1;
    }
    t->allocs = total;
    if (getenv("DL_FAULTSIM_VERBOSE")) {
        fprintf(stderr, "faultsim compile: %ld allocations in a cold compile\n", total);
    }
    long stride = r->stride > 0 ? r->stride : 1;
    for (long n = r->from; n <= total; n++) {
        bool in_head = n<stride, in_tail = n> total - 64;
        if (!in_head && !in_tail && n % stride != 0) {
            continue;
        }
        if (r->max_points > 0 && t->points >= r->max_points && !in_tail) {
            continue;
        }
        rm_tree(cache_dir);
        long cnt;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        dl_status st = compile_once(r, n, &refused, &cnt, NULL, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (getenv("DL_FAULTSIM_VERBOSE")) {
            fprintf(stderr, "faultsim compile: point %ld: %s in %.0f ms\n", n, dl_status_str(st),
                    (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                        (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
        }
        t->points++;
        if (!status_is_clean(st, refused)) {
            fprintf(stderr, "faultsim compile: point %ld: status %s without a refused allocation\n",
                    n, dl_status_str(st));
            t->bad = true;
        }
        if (st == DL_OK) {
            t->successes++;
        } else {
            t->errors++;
        }
        // Whatever the failed attempt left in the cache must be whole: a later compile either
        // hits a valid entry or recompiles, and the result loads. (Checked on a sample of points,
        // as each check is another compile.)
        if (st != DL_OK && (n % (stride * 8) == 0 || in_tail)) {
            uint8_t *art = NULL;
            size_t len = 0;
            long c2;
            bool r2;
            if (compile_once(r, -1, &r2, &c2, &art, &len) != DL_OK) {
                fprintf(stderr,
                        "faultsim compile: point %ld left a cache that breaks the next "
                        "compile\n",
                        n);
                t->bad = true;
            } else {
                dlrt_model *mdl = NULL;
                if (dlrt_model_load_memory(art, len, &mdl) != DLRT_OK) {
                    fprintf(stderr,
                            "faultsim compile: point %ld: the next artifact does not load: "
                            "%s\n",
                            n, dlrt_last_error());
                    t->bad = true;
                }
                dlrt_model_release(mdl);
            }
            free(art);
        }
    }
    return t->bad ? 1 : 0;
}

static void fill_inputs(dlrt_session *s, const dlrt_model *m, uint8_t *scratch) {
    size_t n_in = dlrt_model_num_inputs(m);
    for (size_t i = 0; i < n_in; i++) {
        dlrt_tensor_desc desc;
        if (dlrt_model_input(m, i, &desc) != DLRT_OK) {
            continue;
        }
        memset(scratch, 0, desc.nbytes);
        if (dlrt_session_set_input(s, desc.name, scratch, desc.nbytes) != DLRT_OK) {
            continue;
        }
    }
}

// One runtime attempt. Returns the first error status (DLRT_OK when all went through).
static dlrt_status runtime_once(const uint8_t *art, size_t len, const char *ckpt, long n,
                                uint8_t *scratch, bool *refused, long *count) {
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    dlrt__test_fail_alloc_after(n);
    dlrt_status st = dlrt_model_load_memory(art, len, &m);
    if (st == DLRT_OK) {
        dlrt_session_options so;
        dlrt_session_options_init(&so);
        so.threads = 2;
        st = dlrt_session_create_ex(m, &so, &s);
    }
    if (st == DLRT_OK) {
        fill_inputs(s, m, scratch);
        if (dlrt_model_num_outputs(m) > 0) {
            st = dlrt_session_infer(s);
        }
    }
    if (st == DLRT_OK && dlrt_model_has_train_step(m)) {
        dlrt_step_info info;
        st = dlrt_session_train_step(s, &info);
        if (st == DLRT_OK) {
            st = dlrt_session_save(s, ckpt);
        }
    }
    *refused = dlrt__test_alloc_failed() != 0;
    *count = dlrt__test_alloc_count();
    dlrt__test_fail_alloc_after(-1);
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    return st;
}

static int run_runtime(const run_opts *r, tally *t) {
    bool refused;
    long total;
    uint8_t *art = NULL;
    size_t len = 0;
    if (compile_once(r, -1, &refused, &total, &art, &len) != DL_OK) {
        fprintf(stderr, "faultsim: %s does not compile\n", r->path);
        return 1;
    }
    char out_dir[300], ckpt[400];
    snprintf(out_dir, sizeof out_dir, "%s/out", r->tmp);
    mkdir(out_dir, 0700);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", out_dir);
    uint8_t *scratch = calloc(1, 64u << 20);
    if (!scratch) {
        free(art);
        return 1;
    }
    if (runtime_once(art, len, ckpt, -1, scratch, &refused, &total) != DLRT_OK) {
        fprintf(stderr, "faultsim: %s does not run without failures: %s\n", r->path,
                dlrt_last_error());
        free(scratch);
        free(art);
        return 1;
    }
    t->allocs = total;
    for (long n = 0; n <= total; n++) {
        unlink(ckpt);
        long cnt;
        dlrt_status st = runtime_once(art, len, ckpt, n, scratch, &refused, &cnt);
        t->points++;
        if (st != DLRT_OK && !refused) {
            fprintf(stderr, "faultsim runtime: point %ld: %s without a refused allocation: %s\n", n,
                    dlrt_status_str(st), dlrt_last_error());
            t->bad = true;
        }
        if (st == DLRT_OK) {
            t->successes++;
        } else {
            t->errors++;
            // A failed run leaves no checkpoint (or a whole one: saving is atomic) and no
            // temporary file beside it.
            if (count_files(out_dir) > 1) {
                fprintf(stderr, "faultsim runtime: point %ld left %d files in %s\n", n,
                        count_files(out_dir), out_dir);
                t->bad = true;
            }
        }
    }
    free(scratch);
    free(art);
    return t->bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_faultsim front|compile|runtime SAMPLE.dlg [-D NAME=V]... "
                        "[--stride K] [--max-points M]\n");
        return 2;
    }
    run_opts r;
    memset(&r, 0, sizeof r);
    const char *phase = argv[1];
    r.path = argv[2];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "-D") == 0 && i + 1 < argc && r.n_binds < DL_ARRAY_LEN(r.binds)) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) {
                return 2;
            }
            *eq = 0;
            r.binds[r.n_binds].name = argv[i];
            r.binds[r.n_binds++].value = strtoll(eq + 1, NULL, 10);
        } else if (strcmp(argv[i], "--stride") == 0 && i + 1 < argc) {
            r.stride = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            r.from = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--max-points") == 0 && i + 1 < argc) {
            r.max_points = strtol(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "test_faultsim: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    snprintf(r.tmp, sizeof r.tmp, "%s/dlcc-faultsim-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(r.tmp)) {
        perror("mkdtemp");
        return 1;
    }
    tally t;
    memset(&t, 0, sizeof t);
    int rc;
    if (strcmp(phase, "front") == 0) {
        rc = run_front(&r, &t);
    } else if (strcmp(phase, "compile") == 0) {
        rc = run_compile(&r, &t);
    } else if (strcmp(phase, "runtime") == 0) {
        rc = run_runtime(&r, &t);
    } else {
        fprintf(stderr, "test_faultsim: unknown phase '%s'\n", phase);
        rc = 2;
    }
    rm_tree(r.tmp);
    const char *base = strrchr(r.path, '/');
    printf("faultsim %s %s: %ld failure points, %ld allocations, %ld clean errors, %ld successes"
           "%s\n",
           phase, base ? base + 1 : r.path, t.points, t.allocs, t.errors, t.successes,
           rc == 0 ? "" : " -- FAILED");
    return rc;
}
