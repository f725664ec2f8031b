// tests/runtime/test_runtime.c — unit tests of libdlrt (runtime/dlrt.h) on artifacts compiled by
// dl_cg_compile: loading (memory and file), model introspection, deterministic param
// initialisation (bit-equal to dl_ir_param_materialize), infer against the reference evaluator,
// param get/set, argument errors, and untrusted artifacts (not ELF, truncated, a foreign shared
// library, any single flipped byte, altered plan bytes with a recomputed checksum) that must give
// a status, never a crash; a session whose memory is not there fails at creation. Format 5: the
// plan's device kind, kernel symbol names, op strings and empty device image round-trip from
// codegen to the runtime; a real format-4 artifact is refused with a message saying to
// recompile; the profiler names kernels by the plan's op strings, a fused kernel's list included.
//
// One small model (elementwise ops, every initialiser kind, float/float16/bfloat16 params) is
// compiled once and shared by the tests (fixture()). Calls that could crash a buggy runtime run
// in a forked child (in_child()), so a crash fails that check instead of the whole executable.
#define _DEFAULT_SOURCE // mkdtemp, readlink, MAP_* in glibc
#include "artifact_seal.h"
#include "dl_base.h"
#include "dl_cache.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dl_test.h"
#include "dlrt.h"
#include "dlrt_format.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

DL_TEST_MAIN()

// The shared model. Params cover every initialiser kind and the three float dtypes; outputs
// cover float, float16 and bool. y depends on p_lit, so set_param is observable through infer.
static const char model_text[] = "model rtm\n"
                                 "input x : float[2, 3]\n"
                                 "input h : float16[4]\n"
                                 "param p_zeros : float[2, 3] = zeros\n"
                                 "param p_ones : float16[5] = ones\n"
                                 "param p_const : float[7] = constant(2.5)\n"
                                 "param p_unif : float[3, 5] = uniform(-1, 2, seed = 7)\n"
                                 "param p_norm : float16[4, 4] = normal(0.5, 2, seed = 9)\n"
                                 "param p_glorot : float[6, 4] = glorot_uniform(seed = 3)\n"
                                 "param p_he : float16[8, 3, 3, 3] = he_normal(seed = 11)\n"
                                 "param p_he32 : float[5, 7] = he_normal()\n"
                                 "param p_unseeded : float[9] = normal(0, 0.02)\n"
                                 "param p_bf : bfloat16[3, 3] = uniform(-1, 1, seed = 5)\n"
                                 "param p_bfglorot : bfloat16[4, 2] = glorot_uniform(seed = 2)\n"
                                 "param p_lit : float[2, 3] = [[1, 2, 3], [4, 5, 6.5]]\n"
                                 "param p_hlit : float16[4] = [0.1, -2, 3.25, 65504]\n"
                                 "param p_scalar : float[] = constant(-0.75)\n"
                                 "y = Add (x, p_lit)\n"
                                 "z = Mul (y, p_zeros)\n"
                                 "g = Mul (h, p_hlit)\n"
                                 "b = Greater (x, p_lit)\n"
                                 "output y\n"
                                 "output g\n"
                                 "output b\n"
                                 "output z\n";

typedef struct fixture_state {
    bool ready, ok;
    dl_ir_module *m;
    uint8_t *art;
    size_t art_len;
    char dir[512]; // a private temporary directory for files the tests write
} fixture_state;

static fixture_state fx;

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

// Parses, shape-checks, verifies and compiles `text`. On success *m and the artifact bytes
// are the caller's.
static bool compile_text(const char *text, dl_ir_module **m, uint8_t **art, size_t *len) {
    dl_diags *d = NULL;
    bool ok = false;
    *m = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    if (dl_fe_parse("rt.dlg", text, strlen(text), d, m) == DL_OK && dl_pass_shape(*m, d) == DL_OK &&
        dl_ir_verify(*m, d) == DL_OK && dl_cg_compile(*m, NULL, d, art, len) == DL_OK) {
        ok = true;
    } else {
        print_diags(d);
    }
    dl_diags_destroy(d);
    return ok;
}

// atexit: removes the fixture's directory (tests remove their own files) and frees it.
static void fixture_cleanup(void) {
    char sub[600];
    snprintf(sub, sizeof sub, "%s/tmpdir", fx.dir);
    rmdir(sub);
    if (rmdir(fx.dir) != 0) {
        fprintf(stderr, "note: cannot remove %s: %s\n", fx.dir, strerror(errno));
    }
    dl_ir_module_destroy(fx.m);
    free(fx.art);
}

static const fixture_state *fixture(void) {
    if (!fx.ready) {
        fx.ready = true;
        atexit(fixture_cleanup);
        const char *tmp = getenv("TMPDIR");
        snprintf(fx.dir, sizeof fx.dir, "%s/dlrt-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        fx.ok = mkdtemp(fx.dir) != NULL && compile_text(model_text, &fx.m, &fx.art, &fx.art_len);
    }
    return &fx;
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return false;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

// The bytes of `path` (NUL-terminated, *n not counting the NUL), or NULL.
static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            break;
        }
    }
    fclose(f);
    buf[len] = 0; // room: the loop ends on a read of 0 bytes into a buffer with space left
    *n = len;
    return buf;
}

// Runs fn(arg) in a forked child. Returns the child's exit status (fn's return value), or
// 100 + the signal number if it was killed (a crash), so callers can tell which.
static int in_child(int (*fn)(void *), void *arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        return 99;
    }
    if (pid == 0) {
        alarm(60);
        _exit(fn(arg));
    }
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(wst)) {
        return 100 + WTERMSIG(wst);
    }
    return WEXITSTATUS(wst);
}

static const char *child_outcome(int rc) {
    static char buf[128];
    if (rc >= 100) {
        snprintf(buf, sizeof buf, "CRASHED with signal %d (%s)", rc - 100, strsignal(rc - 100));
    } else {
        snprintf(buf, sizeof buf, "exit %d", rc);
    }
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Loading and introspection

static void expect_desc(bool *dl_test_failed_, const dlrt_tensor_desc *got, const dl_ir_value *v) {
    DL_CHECK_STR_EQ(got->name, v->name);
    DL_CHECK_EQ_I64(got->dtype, v->type.dtype);
    DL_CHECK_EQ_I64(got->rank, v->type.rank);
    size_t n = dl_dtype_size(v->type.dtype);
    for (int32_t k = 0; k < v->type.rank; k++) {
        DL_CHECK_EQ_I64(got->dims[k], v->type.dims[k].value);
        n *= (size_t)v->type.dims[k].value;
    }
    DL_CHECK_EQ_I64(got->nbytes, n);
}

static void check_introspection(bool *dl_test_failed_, const dlrt_model *rm) {
    const dl_ir_module *m = fx.m;
    DL_CHECK_STR_EQ(dlrt_model_name(rm), "rtm");
    dl_cg_options o;
    dl_cg_options_init(&o);
    char target[256];
    dl_cg_target_describe(&o, target, sizeof target);
    DL_CHECK_STR_EQ(dlrt_model_target(rm), target);
    DL_CHECK(strchr(dlrt_model_target(rm), '/') != NULL);
    DL_CHECK_EQ_I64(dlrt_model_num_inputs(rm), m->inputs.len);
    DL_CHECK_EQ_I64(dlrt_model_num_outputs(rm), m->outputs.len);
    DL_CHECK_EQ_I64(dlrt_model_num_params(rm), m->params.len);
    dlrt_tensor_desc td;
    for (size_t i = 0; i < m->inputs.len; i++) {
        DL_CHECK_OK(dlrt_model_input(rm, i, &td));
        bool f = false;
        expect_desc(&f, &td, m->inputs.data[i]);
        DL_CHECK(!f);
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        DL_CHECK_OK(dlrt_model_output(rm, i, &td));
        bool f = false;
        expect_desc(&f, &td, m->outputs.data[i]);
        DL_CHECK(!f);
    }
    for (size_t i = 0; i < m->params.len; i++) {
        DL_CHECK_OK(dlrt_model_param(rm, i, &td));
        bool f = false;
        expect_desc(&f, &td, m->params.data[i]);
        DL_CHECK(!f);
    }
    // A few values spelled out, so a shared mistake of the IR and the runtime shows too.
    DL_CHECK_OK(dlrt_model_input(rm, 1, &td));
    DL_CHECK_STR_EQ(td.name, "h");
    DL_CHECK_EQ_I64(td.dtype, DLRT_FLOAT16);
    DL_CHECK_EQ_I64(td.nbytes, 8);
    DL_CHECK_OK(dlrt_model_output(rm, 2, &td));
    DL_CHECK_STR_EQ(td.name, "b");
    DL_CHECK_EQ_I64(td.dtype, DLRT_BOOL);
    DL_CHECK_EQ_I64(td.rank, 2);
    DL_CHECK_EQ_I64(td.nbytes, 6);
    DL_CHECK_OK(dlrt_model_param(rm, 6, &td));
    DL_CHECK_STR_EQ(td.name, "p_he");
    DL_CHECK_EQ_I64(td.rank, 4);
    DL_CHECK_EQ_I64(td.dims[3], 3);
    DL_CHECK_EQ_I64(td.nbytes, 8 * 27 * 2);
    DL_CHECK_OK(dlrt_model_param(rm, m->params.len - 1, &td));
    DL_CHECK_STR_EQ(td.name, "p_scalar");
    DL_CHECK_EQ_I64(td.rank, 0);
    DL_CHECK_EQ_I64(td.nbytes, 4);
    // Out of range.
    DL_CHECK_EQ_I64(dlrt_model_input(rm, m->inputs.len, &td), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "out of range") != NULL);
    DL_CHECK_EQ_I64(dlrt_model_output(rm, 99, &td), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_model_param(rm, SIZE_MAX, &td), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_model_input(rm, 0, NULL), DLRT_ERR_INVALID_ARG);
}

DL_TEST(rt_version_and_status_strings) {
    const char *v = dlrt_version();
    DL_CHECK(v != NULL);
    int a, b, c;
    DL_CHECK(sscanf(v, "%d.%d.%d", &a, &b, &c) == 3);
    const char *seen[6] = {0};
    for (int s = DLRT_OK; s <= DLRT_ERR_UNSUPPORTED; s++) {
        seen[s] = dlrt_status_str((dlrt_status)s);
        DL_CHECK(seen[s] != NULL && seen[s][0] != '\0');
        for (int k = 0; k < s; k++) {
            DL_CHECK(strcmp(seen[k], seen[s]) != 0);
        }
    }
    DL_CHECK(dlrt_status_str((dlrt_status)1234) != NULL);
}

DL_TEST(rt_load_memory_introspection) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK(rm != NULL);
    bool failed = false;
    check_introspection(&failed, rm);
    dlrt_model_release(rm);
    DL_CHECK(!failed);
}

DL_TEST(rt_load_file_introspection) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    char path[600];
    snprintf(path, sizeof path, "%s/rtm.so", f->dir);
    DL_CHECK(write_file(path, f->art, f->art_len));
    dlrt_model *rm = NULL;
    DL_CHECK_OK(dlrt_model_load_file(path, &rm));
    bool failed = false;
    check_introspection(&failed, rm);
    dlrt_model_release(rm);
    DL_CHECK(!failed);
    // A bare file name means the file in the current directory, not a library-path lookup.
    char cwd[1024];
    DL_CHECK(getcwd(cwd, sizeof cwd) != NULL);
    DL_CHECK(chdir(f->dir) == 0);
    dlrt_status st = dlrt_model_load_file("rtm.so", &rm);
    DL_CHECK(chdir(cwd) == 0);
    DL_CHECK_OK(st);
    DL_CHECK_STR_EQ(dlrt_model_name(rm), "rtm");
    dlrt_model_release(rm);
    remove(path);
}

static int not_dot(const struct dirent *e) {
    return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

// Lists a directory's entry names but . and .., sorted, one per line, into a malloc'd string.
static char *list_dir(const char *dir) {
    struct dirent **es = NULL;
    int n = scandir(dir, &es, not_dot, alphasort);
    size_t cap = 1, len = 0;
    for (int i = 0; i < n; i++) {
        cap += strlen(es[i]->d_name) + 1;
    }
    char *s = malloc(cap);
    if (!s) {
        return NULL;
    }
    s[0] = '\0';
    for (int i = 0; i < n; i++) {
        len += (size_t)sprintf(s + len, "%s\n", es[i]->d_name);
        free(es[i]);
    }
    free(es);
    return s;
}

// New lines of `after` that are not in `before` and mention dlcc/dlrt/artifact (other processes
// share /tmp, so only names that could be ours count).
static bool new_entry_of_ours(const char *before, const char *after) {
    const char *p = after;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        char key[520];
        snprintf(key, sizeof key, "\n%s\n", name);
        char *b = malloc(strlen(before) + 2);
        if (b) {
            sprintf(b, "\n%s", before);
            bool had = strstr(b, key) != NULL;
            free(b);
            if (!had &&
                (strstr(name, "dlcc") || strstr(name, "dlrt") || strstr(name, "artifact"))) {
                fprintf(stderr, "  new entry: %s\n", name);
                return true;
            }
        }
        p += n + (nl ? 1 : 0);
    }
    return false;
}

static bool maps_mention(const char *what) {
    size_t n = 0;
    uint8_t *maps = read_file("/proc/self/maps", &n);
    if (!maps) {
        return false;
    }
    bool found = false;
    char *txt = realloc(maps, n + 1);
    if (txt) {
        txt[n] = '\0';
        found = strstr(txt, what) != NULL;
        free(txt);
    } else {
        free(maps);
    }
    return found;
}

// True if one of this process's open descriptors links to something containing `what`.
static bool fd_mentions(const char *what) {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) {
        return false;
    }
    bool found = false;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char p[300], l[600];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(p, l, sizeof l - 1);
        if (n > 0) {
            l[n] = '\0';
            found = found || strstr(l, what) != NULL;
        }
    }
    closedir(dir);
    return found;
}

DL_TEST(rt_load_memory_leaves_no_file) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    const char *tmpdir = getenv("TMPDIR");
    char *tmp_before = list_dir("/tmp");
    char *env_before = tmpdir && tmpdir[0] ? list_dir(tmpdir) : NULL;
    // A fresh TMPDIR for the load: it must stay empty.
    char fresh[600];
    snprintf(fresh, sizeof fresh, "%s/tmpdir", f->dir);
    DL_CHECK(mkdir(fresh, 0700) == 0);
    char *saved = tmpdir ? strdup(tmpdir) : NULL;
    setenv("TMPDIR", fresh, 1);
    dlrt_model *rm = NULL;
    dlrt_status st = dlrt_model_load_memory(f->art, f->art_len, &rm);
    bool in_maps = maps_mention("memfd:");
    bool fd_open = fd_mentions("memfd:dlcc");
    char *fresh_after = list_dir(fresh);
    char *tmp_after = list_dir("/tmp");
    char *env_after = saved && saved[0] ? list_dir(saved) : NULL;
    if (saved) {
        setenv("TMPDIR", saved, 1);
        free(saved);
    } else {
        unsetenv("TMPDIR");
    }
    dlrt_model_release(rm);
    bool tmp_new = tmp_before && tmp_after && new_entry_of_ours(tmp_before, tmp_after);
    bool env_new = env_before && env_after && new_entry_of_ours(env_before, env_after);
    bool fresh_empty = fresh_after && fresh_after[0] == '\0';
    free(tmp_before);
    free(tmp_after);
    free(env_before);
    free(env_after);
    free(fresh_after);
    rmdir(fresh);
    DL_CHECK_OK(st);
    DL_CHECK(in_maps);  // the object is mapped from an anonymous memory file
    DL_CHECK(!fd_open); // and its descriptor is closed again
    DL_CHECK(fresh_empty);
    DL_CHECK(!tmp_new);
    DL_CHECK(!env_new);
}

// ---------------------------------------------------------------------------------------------
// Params

DL_TEST(rt_params_equal_materialize_bit_for_bit) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL, *s2 = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    DL_CHECK_OK(dlrt_session_create(rm, &s2));
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    int bad = 0;
    for (size_t i = 0; i < f->m->params.len; i++) {
        const dl_ir_value *p = f->m->params.data[i];
        dl_tensor want = {0};
        if (dl_ir_param_materialize(f->m, p, &want, d) != DL_OK) {
            fprintf(stderr, "  materialize %s failed\n", p->name);
            bad++;
            continue;
        }
        size_t nb = dl_tensor_nbytes(&want);
        uint8_t *got = malloc(nb + 1), *got2 = malloc(nb + 1);
        if (dlrt_session_get_param(s, p->name, got, nb) != DLRT_OK ||
            dlrt_session_get_param(s2, p->name, got2, nb) != DLRT_OK) {
            fprintf(stderr, "  get_param %s: %s\n", p->name, dlrt_last_error());
            bad++;
        } else if (memcmp(got, want.data, nb) != 0) {
            int64_t n = dl_tensor_numel(&want);
            dl_tensor gt = want;
            gt.data = got;
            for (int64_t k = 0; k < n; k++) {
                if (dl_tensor_get(&gt, k) != dl_tensor_get(&want, k)) {
                    fprintf(stderr, "  param %s[%lld]: runtime %.9g, materialize %.9g\n", p->name,
                            (long long)k, dl_tensor_get(&gt, k), dl_tensor_get(&want, k));
                    break;
                }
            }
            bad++;
        } else if (memcmp(got, got2, nb) != 0) {
            fprintf(stderr, "  param %s differs between two sessions\n", p->name);
            bad++;
        }
        free(got);
        free(got2);
        dl_tensor_free(&want);
    }
    // Spot values: the initialisers mean what they say.
    float c[7];
    DL_CHECK_OK(dlrt_session_get_param(s, "p_const", c, sizeof c));
    DL_CHECK(c[0] == 2.5f && c[6] == 2.5f);
    uint16_t ones[5];
    DL_CHECK_OK(dlrt_session_get_param(s, "p_ones", ones, sizeof ones));
    DL_CHECK_EQ_I64(ones[4], 0x3c00); // 1.0 in binary16
    float sc;
    DL_CHECK_OK(dlrt_session_get_param(s, "p_scalar", &sc, sizeof sc));
    DL_CHECK(sc == -0.75f);
    dl_diags_destroy(d);
    dlrt_session_destroy(s);
    dlrt_session_destroy(s2);
    dlrt_model_release(rm);
    DL_CHECK_EQ_I64(bad, 0);
}

DL_TEST(rt_params_identical_across_loads) {
    // A second compile and load (file this time) initialises the same bytes.
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dl_ir_module *m2 = NULL;
    uint8_t *art2 = NULL;
    size_t len2 = 0;
    DL_CHECK(compile_text(model_text, &m2, &art2, &len2));
    DL_CHECK(len2 == f->art_len && memcmp(art2, f->art, len2) == 0); // deterministic artifact
    char path[600];
    snprintf(path, sizeof path, "%s/again.so", f->dir);
    DL_CHECK(write_file(path, art2, len2));
    dlrt_model *a = NULL, *b = NULL;
    dlrt_session *sa = NULL, *sb = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &a));
    DL_CHECK_OK(dlrt_model_load_file(path, &b));
    DL_CHECK_OK(dlrt_session_create(a, &sa));
    DL_CHECK_OK(dlrt_session_create(b, &sb));
    uint8_t ba[8 * 27 * 2], bb[8 * 27 * 2];
    DL_CHECK_OK(dlrt_session_get_param(sa, "p_he", ba, sizeof ba));
    DL_CHECK_OK(dlrt_session_get_param(sb, "p_he", bb, sizeof bb));
    DL_CHECK(memcmp(ba, bb, sizeof ba) == 0);
    dlrt_session_destroy(sa);
    dlrt_session_destroy(sb);
    dlrt_model_release(a);
    dlrt_model_release(b);
    dl_ir_module_destroy(m2);
    free(art2);
    remove(path);
}

DL_TEST(rt_get_set_param_round_trip) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    float v[15], back[15];
    for (int i = 0; i < 15; i++) {
        v[i] = (float)i * 0.5f - 3.0f;
    }
    DL_CHECK_OK(dlrt_session_set_param(s, "p_unif", v, sizeof v));
    DL_CHECK_OK(dlrt_session_get_param(s, "p_unif", back, sizeof back));
    DL_CHECK(memcmp(v, back, sizeof v) == 0);
    uint16_t bf[9] = {0x3f80, 0xbf80, 0x4000, 0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001};
    uint16_t bfb[9];
    DL_CHECK_OK(dlrt_session_set_param(s, "p_bf", bf, sizeof bf));
    DL_CHECK_OK(dlrt_session_get_param(s, "p_bf", bfb, sizeof bfb));
    DL_CHECK(memcmp(bf, bfb, sizeof bf) == 0);
    // The new value is what infer uses: y = x + p_lit.
    float lit[6] = {10, 20, 30, 40, 50, 60}, x[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
    DL_CHECK_OK(dlrt_session_set_param(s, "p_lit", lit, sizeof lit));
    DL_CHECK_OK(dlrt_session_set_input(s, "x", x, sizeof x));
    DL_CHECK_OK(dlrt_session_set_input(s, "h", h, sizeof h));
    DL_CHECK_OK(dlrt_session_infer(s));
    const void *yp = NULL;
    DL_CHECK_OK(dlrt_session_output(s, "y", &yp, NULL));
    const float *y = yp;
    for (int i = 0; i < 6; i++) {
        DL_CHECK(y[i] == x[i] + lit[i]);
    }
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
}

// Zero-copy inputs: a bound input is read from the caller's memory at every step (changing it
// changes the next result with no call in between); set_input returns to the session's copy.
DL_TEST(rt_bind_input_zero_copy) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    static const float lit[6] = {1, 2, 3, 4, 5, 6.5f};
    float x[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
    DL_CHECK_OK(dlrt_session_bind_input(s, "x", x, sizeof x));
    DL_CHECK_OK(dlrt_session_bind_input(s, "h", h, sizeof h));
    const void *yp = NULL;
    DL_CHECK_OK(dlrt_session_infer(s));
    DL_CHECK_OK(dlrt_session_output(s, "y", &yp, NULL));
    const float *y = yp;
    for (int i = 0; i < 6; i++) {
        DL_CHECK(y[i] == x[i] + lit[i]);
    }
    for (int i = 0; i < 6; i++) {
        x[i] = (float)(10 * i); // no call: the next step reads the new values
    }
    DL_CHECK_OK(dlrt_session_infer(s));
    for (int i = 0; i < 6; i++) {
        DL_CHECK(y[i] == (float)(10 * i) + lit[i]);
    }
    // set_input copies into the session's memory and ends the binding.
    float x2[6] = {-1, -2, -3, -4, -5, -6};
    DL_CHECK_OK(dlrt_session_set_input(s, "x", x2, sizeof x2));
    x[0] = 1000.0f;
    x2[0] = 2000.0f;
    DL_CHECK_OK(dlrt_session_infer(s));
    DL_CHECK(y[0] == -1.0f + lit[0]);
    DL_CHECK(y[5] == -6.0f + lit[5]);
    // Binding again after a copy works, and rebinding to other memory follows it.
    float x3[6] = {7, 7, 7, 7, 7, 7};
    DL_CHECK_OK(dlrt_session_bind_input(s, "x", x, sizeof x));
    DL_CHECK_OK(dlrt_session_bind_input(s, "x", x3, sizeof x3));
    DL_CHECK_OK(dlrt_session_infer(s));
    DL_CHECK(y[0] == 7.0f + lit[0]);
    // Errors name the input and leave the binding as it was.
    _Alignas(8) unsigned char raw[32] = {0};
    DL_CHECK_EQ_I64(dlrt_session_bind_input(s, "x", raw + 1, 24), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "not aligned") != NULL);
    DL_CHECK_EQ_I64(dlrt_session_bind_input(s, "x", x3, 20), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "has 24 bytes, got 20") != NULL);
    DL_CHECK_EQ_I64(dlrt_session_bind_input(s, "x", NULL, 24), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_session_bind_input(s, "p_lit", x3, 24), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "no input named 'p_lit'") != NULL);
    DL_CHECK_EQ_I64(dlrt_session_bind_input(NULL, "x", x3, 24), DLRT_ERR_INVALID_ARG);
    DL_CHECK_OK(dlrt_session_infer(s));
    DL_CHECK(y[3] == 7.0f + lit[3]);
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
}

// ---------------------------------------------------------------------------------------------
// Infer against the reference evaluator

// Fills t with deterministic values in [-4, 4).
static void fill(dl_tensor *t, uint64_t seed) {
    for (int64_t i = 0; i < dl_tensor_numel(t); i++) {
        dl_tensor_set(t, i, -4.0 + 8.0 * dl_rng_uniform(seed, (uint64_t)i));
    }
}

static bool alloc_like(dl_tensor *t, const dl_ir_value *v) {
    int64_t dims[DL_MAX_RANK];
    for (int32_t k = 0; k < v->type.rank; k++) {
        dims[k] = v->type.dims[k].value;
    }
    return dl_tensor_alloc(t, v->type.dtype, v->type.rank, dims) == DL_OK;
}

// Runs infer on session s with inputs from `seed` and compares every output with dl_ir_eval
// (params: the module's initialisers, or `params` when non-NULL). Returns the mismatch count.
static int infer_vs_reference(dlrt_session *s, uint64_t seed, const dl_tensor *params) {
    const dl_ir_module *m = fx.m;
    dl_tensor ins[8] = {0}, refs[8] = {0};
    int bad = 0;
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return 1;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        if (!alloc_like(&ins[i], m->inputs.data[i])) {
            return 1;
        }
        fill(&ins[i], seed + i);
        if (dlrt_session_set_input(s, m->inputs.data[i]->name, ins[i].data,
                                   dl_tensor_nbytes(&ins[i])) != DLRT_OK) {
            fprintf(stderr, "  set_input: %s\n", dlrt_last_error());
            bad++;
        }
    }
    dl_ir_eval_opts opts = {params, params ? m->params.len : 0, false};
    if (dl_ir_eval(m, &opts, ins, refs, d) != DL_OK) {
        print_diags(d);
        bad++;
    } else if (dlrt_session_infer(s) != DLRT_OK) {
        fprintf(stderr, "  infer: %s\n", dlrt_last_error());
        bad++;
    } else {
        for (size_t j = 0; j < m->outputs.len; j++) {
            const void *data = NULL;
            dlrt_tensor_desc desc;
            if (dlrt_session_output(s, m->outputs.data[j]->name, &data, &desc) != DLRT_OK) {
                fprintf(stderr, "  output: %s\n", dlrt_last_error());
                bad++;
                continue;
            }
            if (desc.nbytes != dl_tensor_nbytes(&refs[j]) ||
                (int)desc.dtype != (int)refs[j].dtype) {
                fprintf(stderr, "  output %s: description disagrees\n", desc.name);
                bad++;
                continue;
            }
            dl_tensor got = refs[j];
            got.data = (void *)(uintptr_t)data;
            for (int64_t k = 0; k < dl_tensor_numel(&got); k++) {
                double g = dl_tensor_get(&got, k), r = dl_tensor_get(&refs[j], k);
                if (!(g == r || fabs(g - r) <= 1e-6 + 1e-6 * fabs(r))) {
                    fprintf(stderr, "  output %s[%lld]: got %.9g, reference %.9g\n", desc.name,
                            (long long)k, g, r);
                    bad++;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        dl_tensor_free(&ins[i]);
    }
    for (size_t j = 0; j < m->outputs.len; j++) {
        dl_tensor_free(&refs[j]);
    }
    dl_diags_destroy(d);
    return bad;
}

DL_TEST(rt_infer_equals_reference) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    DL_CHECK_EQ_I64(infer_vs_reference(s, 11, NULL), 0);
    DL_CHECK_EQ_I64(infer_vs_reference(s, 12, NULL), 0); // a second step on new inputs
    dlrt_tensor_desc desc;
    const void *data = NULL;
    DL_CHECK_OK(dlrt_session_output(s, "g", &data, &desc));
    DL_CHECK(data != NULL);
    DL_CHECK_STR_EQ(desc.name, "g");
    DL_CHECK_EQ_I64(desc.dtype, DLRT_FLOAT16);
    DL_CHECK_EQ_I64(desc.nbytes, 8);
    DL_CHECK_OK(dlrt_session_output(s, "b", NULL, NULL)); // both optional
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
}

DL_TEST(rt_two_sessions_are_independent) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s1 = NULL, *s2 = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s1));
    DL_CHECK_OK(dlrt_session_create(rm, &s2));
    // s2 gets other params; s1 must keep the initial ones.
    dl_tensor ps[32] = {0};
    for (size_t i = 0; i < f->m->params.len; i++) {
        DL_CHECK(alloc_like(&ps[i], f->m->params.data[i]));
        fill(&ps[i], 500 + i);
        DL_CHECK_OK(dlrt_session_set_param(s2, f->m->params.data[i]->name, ps[i].data,
                                           dl_tensor_nbytes(&ps[i])));
    }
    DL_CHECK_EQ_I64(infer_vs_reference(s2, 21, ps), 0);
    DL_CHECK_EQ_I64(infer_vs_reference(s1, 22, NULL), 0);
    // s2's outputs were not overwritten by s1's step.
    DL_CHECK_EQ_I64(infer_vs_reference(s2, 21, ps), 0);
    const void *y1 = NULL, *y2 = NULL;
    DL_CHECK_OK(dlrt_session_output(s1, "y", &y1, NULL));
    DL_CHECK_OK(dlrt_session_output(s2, "y", &y2, NULL));
    DL_CHECK(y1 != y2);
    for (size_t i = 0; i < f->m->params.len; i++) {
        dl_tensor_free(&ps[i]);
    }
    dlrt_session_destroy(s1);
    dlrt_session_destroy(s2);
    dlrt_model_release(rm);
}

// The "Cpus_allowed_list:" value of /proc/self/status or /proc/self/task/TID/status ("" when
// it cannot be read).
static void allowed_list(const char *status_path, char *out, size_t cap) {
    out[0] = '\0';
    FILE *f = fopen(status_path, "r");
    char line[8192]; // a sparse list of many CPUs is long
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            const char *v = line + 18 + strspn(line + 18, " \t");
            snprintf(out, cap, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    }
    if (f) {
        fclose(f);
    }
}

// CPUs in a list such as "0-3,6".
static int list_cpus(const char *list) {
    int n = 0;
    while (*list) {
        char *end = NULL;
        long a = strtol(list, &end, 10), b = a;
        if (end == list) {
            return -1;
        }
        if (*end == '-') {
            b = strtol(end + 1, &end, 10);
        }
        n += (int)(b - a + 1);
        list = *end == ',' ? end + 1 : end;
    }
    return n;
}

// Threads of this process whose allowed CPUs are not the process's (pinned by someone), -1 when
// /proc cannot be read.
static int threads_pinned(const char *proc_list) {
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[300], list[8192];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        allowed_list(path, list, sizeof list);
        n += list[0] && strcmp(list, proc_list) != 0;
    }
    closedir(d);
    return n;
}

// threads_pinned once it equals `want`, or after about two seconds: a joined thread's /proc
// entry goes a moment after pthread_join returns.
static int wait_pinned(const char *proc_list, int want) {
    int n = threads_pinned(proc_list);
    for (int i = 0; i < 200 && n != want; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        n = threads_pinned(proc_list);
    }
    return n;
}

// Placement of the workers (runtime/rt_exec.c, worker_cpus): a session with as many threads
// as the CPUs it may run on pins each worker to its own CPU (never the calling thread); fewer
// or more threads, or DLRT_AFFINITY=0, leave placement to the kernel. The pinned session
// computes what the reference evaluator does.
DL_TEST(rt_workers_pinned_when_threads_are_the_cpus) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    static char proc_list[8192];
    allowed_list("/proc/self/status", proc_list, sizeof proc_list);
    int ncpu = list_cpus(proc_list);
    if (ncpu < 1 || threads_pinned(proc_list) != 0) {
        printf("skipped: /proc/self/status unreadable or threads already pinned\n");
        return;
    }
    const char *inherited = getenv("DLRT_AFFINITY"); // the caller's setting, put back at the end
    char *saved = inherited ? strdup(inherited) : NULL;
    unsetenv("DLRT_AFFINITY");
    dlrt_model *rm = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    struct {
        int threads;
        const char *affinity; // DLRT_AFFINITY, NULL: unset
        int pinned;
    } cases[] = {
        {2, NULL, ncpu == 2 ? 1 : 0},
        {ncpu, NULL, ncpu >= 2 ? ncpu - 1 : 0},
        {ncpu + 1, NULL, 0},
        {ncpu, "0", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].threads > DLRT_MAX_THREADS) {
            continue;
        }
        if (cases[i].affinity) {
            setenv("DLRT_AFFINITY", cases[i].affinity, 1);
        }
        dlrt_session_options o;
        dlrt_session_options_init(&o);
        o.threads = cases[i].threads;
        dlrt_session *s = NULL;
        DL_CHECK_OK(dlrt_session_create_ex(rm, &o, &s));
        unsetenv("DLRT_AFFINITY");
        if (!s) {
            continue;
        }
        DL_CHECK_EQ_I64(wait_pinned(proc_list, cases[i].pinned), cases[i].pinned);
        DL_CHECK_EQ_I64(infer_vs_reference(s, 31 + i, NULL), 0);
        dlrt_session_destroy(s);
        DL_CHECK_EQ_I64(wait_pinned(proc_list, 0), 0);
    }
    if (saved) {
        setenv("DLRT_AFFINITY", saved, 1);
        free(saved);
    }
    dlrt_model_release(rm);
}

DL_TEST(rt_release_model_before_session) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    dlrt_model_retain(rm);
    dlrt_model_release(rm); // back to one reference
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    dlrt_model_release(rm); // the session's reference keeps the code and plan loaded
    DL_CHECK_EQ_I64(infer_vs_reference(s, 31, NULL), 0);
    dlrt_tensor_desc desc;
    DL_CHECK_OK(dlrt_session_output(s, "y", NULL, &desc));
    DL_CHECK_STR_EQ(desc.name, "y");
    dlrt_session_destroy(s); // unloads
    dlrt_model_release(NULL);
    dlrt_session_destroy(NULL);
}

// ---------------------------------------------------------------------------------------------
// Argument errors: DLRT_ERR_INVALID_ARG with a message naming the problem

typedef struct err_case {
    dlrt_session *s;
    dlrt_model *m;
    int which;
} err_case;

static dlrt_status call_case(err_case *c, const char **needle) {
    float buf[64] = {0};
    const void *p = NULL;
    dlrt_session *so = NULL;
    dlrt_model *mo = NULL;
    switch (c->which) {
    case 0:
        *needle = "nope";
        return dlrt_session_set_input(c->s, "nope", buf, 24);
    case 1:
        *needle = "24"; // wrong size: names the expected size
        return dlrt_session_set_input(c->s, "x", buf, 20);
    case 2:
        *needle = "p_lit";
        return dlrt_session_get_param(c->s, "p_lit", buf, 4);
    case 3:
        *needle = "nope";
        return dlrt_session_set_param(c->s, "nope", buf, 4);
    case 4:
        *needle = "zz";
        return dlrt_session_output(c->s, "zz", &p, NULL);
    case 5:
        *needle = "'x'"; // an input is not an output
        return dlrt_session_output(c->s, "x", &p, NULL);
    case 6:
        *needle = "'y'"; // an output is not a param
        return dlrt_session_get_param(c->s, "y", buf, 24);
    case 7:
        *needle = "null";
        return dlrt_session_set_input(c->s, NULL, buf, 24);
    case 8:
        *needle = "null";
        return dlrt_model_load_memory(NULL, 100, &mo);
    case 9:
        *needle = "null";
        return dlrt_model_load_file(NULL, &mo);
    case 10:
        *needle = "null";
        return dlrt_session_create(NULL, &so);
    case 11:
        *needle = "null";
        return dlrt_session_create(c->m, NULL);
    case 12:
        *needle = "null";
        return dlrt_model_load_memory(buf, sizeof buf, NULL);
    // The following pass NULL where the runtime dereferences: they must not crash.
    case 13:
        *needle = "null";
        return dlrt_session_set_input(c->s, "x", NULL, 24);
    case 14:
        *needle = "null";
        return dlrt_session_get_param(c->s, "p_lit", NULL, 24);
    case 15:
        *needle = "null";
        return dlrt_session_set_param(c->s, "p_lit", NULL, 24);
    case 16:
        *needle = "null";
        return dlrt_session_infer(NULL);
    case 17:
        *needle = "null";
        return dlrt_session_set_input(NULL, "x", buf, 24);
    case 18:
        *needle = "null";
        return dlrt_session_output(NULL, "y", &p, NULL);
    case 19:
        *needle = "null";
        return dlrt_model_input(NULL, 0, NULL);
    default:
        *needle = "";
        return DLRT_OK;
    }
}

#define N_ERR_CASES      20
#define N_ERR_CASES_SAFE 13 // cases before this one pass NULL where the runtime checks today

// strstr, ignoring ASCII case.
static bool contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t k = 0;
        while (k < n && p[k] && (p[k] | 0x20) == (needle[k] | 0x20)) {
            k++;
        }
        if (k == n) {
            return true;
        }
    }
    return n == 0;
}

static int err_child(void *arg) {
    const char *needle = NULL;
    dlrt_status st = call_case(arg, &needle);
    if (st != DLRT_ERR_INVALID_ARG) {
        fprintf(stderr, "  case %d: status %d (%s), want invalid argument; message '%s'\n",
                ((err_case *)arg)->which, (int)st, dlrt_status_str(st), dlrt_last_error());
        return 1;
    }
    if (!contains_nocase(dlrt_last_error(), needle)) {
        fprintf(stderr, "  case %d: message '%s' does not mention '%s'\n", ((err_case *)arg)->which,
                dlrt_last_error(), needle);
        return 2;
    }
    return 0;
}

DL_TEST(rt_argument_errors) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    int bad = 0;
    for (int w = 0; w < N_ERR_CASES_SAFE; w++) {
        err_case c = {s, rm, w};
        int rc = in_child(err_child, &c);
        if (rc != 0) {
            fprintf(stderr, "  argument error case %d: %s\n", w, child_outcome(rc));
            bad++;
        }
    }
    // The message is about the last failed call, and a good call keeps the session usable.
    float x[6] = {0};
    DL_CHECK_EQ_I64(dlrt_session_set_input(s, "xx", x, sizeof x), DLRT_ERR_INVALID_ARG);
    DL_CHECK(strstr(dlrt_last_error(), "'xx'") != NULL);
    DL_CHECK(strstr(dlrt_last_error(), "input") != NULL);
    DL_CHECK_OK(dlrt_session_set_input(s, "x", x, sizeof x));
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    DL_CHECK_EQ_I64(bad, 0);
}

// NULL data pointers and NULL sessions/models: an error status, not a crash.
DL_TEST(rt_null_pointer_arguments) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    int bad = 0;
    for (int w = N_ERR_CASES_SAFE; w < N_ERR_CASES; w++) {
        err_case c = {s, rm, w};
        int rc = in_child(err_child, &c);
        if (rc != 0) {
            fprintf(stderr, "  NULL argument case %d: %s\n", w, child_outcome(rc));
            bad++;
        }
    }
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    DL_CHECK_EQ_I64(bad, 0);
}

// ---------------------------------------------------------------------------------------------
// Untrusted artifacts: a status (CORRUPT, UNSUPPORTED or IO), never a crash

typedef struct bad_load {
    const uint8_t *bytes;
    size_t len;
    bool from_file;
    const char *path; // from_file: where to write bytes (or, with bytes NULL, load as is)
} bad_load;

static int bad_load_child(void *arg) {
    const bad_load *b = arg;
    dlrt_model *rm = NULL;
    dlrt_status st;
    if (b->from_file) {
        if (b->bytes && !write_file(b->path, b->bytes, b->len)) {
            return 3;
        }
        st = dlrt_model_load_file(b->path, &rm);
    } else {
        st = dlrt_model_load_memory(b->bytes, b->len, &rm);
    }
    if (st == DLRT_OK) {
        // Loaded: a session and an infer must still not crash... but an undetected corruption
        // is a failure of validation all the same.
        fprintf(stderr, "  loaded without complaint\n");
        dlrt_model_release(rm);
        return 1;
    }
    if (rm != NULL) {
        return 4;
    }
    if (st != DLRT_ERR_CORRUPT && st != DLRT_ERR_UNSUPPORTED && st != DLRT_ERR_IO) {
        fprintf(stderr, "  status %d\n", (int)st);
        return 5;
    }
    if (dlrt_last_error()[0] == '\0') {
        return 6;
    }
    printf("    -> %s: %s\n", dlrt_status_str(st), dlrt_last_error());
    return 0;
}

// Loads bytes from memory and from a file; both must fail cleanly. Returns failures.
static int expect_bad(const char *what, const uint8_t *bytes, size_t len) {
    int bad = 0;
    char path[600];
    snprintf(path, sizeof path, "%s/bad.so", fx.dir);
    for (int from_file = 0; from_file < 2; from_file++) {
        bad_load b = {bytes, len, from_file != 0, path};
        printf("  %s (%s)\n", what, from_file ? "file" : "memory");
        int rc = in_child(bad_load_child, &b);
        if (rc != 0) {
            fprintf(stderr, "  %s, loaded from %s: %s\n", what, from_file ? "a file" : "memory",
                    child_outcome(rc));
            bad++;
        }
    }
    remove(path);
    return bad;
}

DL_TEST(rt_rejects_non_elf) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    int bad = 0;
    const char text[] = "model m\ninput x : float[2]\ny = Relu (x)\noutput y\n"
                        "this is not a shared object, just text that is long enough to pass the "
                        "size check of the memory loader\n";
    bad += expect_bad("a text file", (const uint8_t *)text, sizeof text - 1);
    bad += expect_bad("an empty file", (const uint8_t *)"", 0);
    bad += expect_bad("the ELF magic alone", (const uint8_t *)"\177ELF", 4);
    // An ELF header with garbage after it.
    uint8_t *junk = malloc(f->art_len);
    DL_CHECK(junk != NULL);
    memcpy(junk, f->art, 64);
    for (size_t i = 64; i < f->art_len; i++) {
        junk[i] = (uint8_t)(dl_rng_bits(99, i) & 0xff);
    }
    bad += expect_bad("an ELF header followed by random bytes", junk, f->art_len);
    free(junk);
    bad += expect_bad("truncated to 63 bytes", f->art, 63);
    bad += expect_bad("truncated to 64 bytes", f->art, 64);
    // A file that does not exist, and a directory.
    {
        char path[600];
        snprintf(path, sizeof path, "%s/does-not-exist.so", f->dir);
        dlrt_model *rm = NULL;
        DL_CHECK_EQ_I64(dlrt_model_load_file(path, &rm), DLRT_ERR_IO);
        DL_CHECK(strstr(dlrt_last_error(), "does-not-exist.so") != NULL);
        DL_CHECK(rm == NULL);
        bad_load b = {NULL, 0, true, f->dir};
        int rc = in_child(bad_load_child, &b);
        if (rc != 0) {
            fprintf(stderr, "  loading a directory: %s\n", child_outcome(rc));
            bad++;
        }
    }
    DL_CHECK_EQ_I64(bad, 0);
}

// Cut anywhere: inside the program headers, inside a loaded segment, or only the section headers
// at the end (dlopen itself does not check that segments lie inside the file: the runtime must).
DL_TEST(rt_rejects_truncated_artifact) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    int bad = 0;
    size_t cuts[] = {
        200,           1000, f->art_len / 4, f->art_len / 2, f->art_len - 4096, f->art_len - 100,
        f->art_len - 1};
    for (size_t i = 0; i < DL_ARRAY_LEN(cuts); i++) {
        if (cuts[i] > 0 && cuts[i] < f->art_len) {
            char what[64];
            snprintf(what, sizeof what, "truncated to %zu of %zu bytes", cuts[i], f->art_len);
            bad += expect_bad(what, f->art, cuts[i]);
        }
    }
    DL_CHECK_EQ_I64(bad, 0);
}

DL_TEST(rt_rejects_foreign_shared_library) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    size_t n = 0;
    uint8_t *lib = read_file(DLRT_LIB_PATH, &n);
    DL_CHECK(lib != NULL);
    int bad = 0;
    bad_load b = {NULL, 0, true, DLRT_LIB_PATH};
    printf("  libdlrt.so itself (file)\n");
    int rc = in_child(bad_load_child, &b);
    if (rc != 0) {
        fprintf(stderr, "  libdlrt.so from its file: %s\n", child_outcome(rc));
        bad++;
    }
    // And its bytes, from memory (a second copy of the library: no dlcc_artifact_v1 either).
    bad_load bm = {lib, n, false, NULL};
    printf("  libdlrt.so itself (memory)\n");
    rc = in_child(bad_load_child, &bm);
    if (rc != 0) {
        fprintf(stderr, "  libdlrt.so from memory: %s\n", child_outcome(rc));
        bad++;
    }
    // The message says what is wrong.
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_file(DLRT_LIB_PATH, &rm), DLRT_ERR_CORRUPT);
    DL_CHECK(strstr(dlrt_last_error(), "not a dlcc artifact") != NULL);
    free(lib);
    DL_CHECK_EQ_I64(bad, 0);
}

// Offset of the plan blob (its DLRTPLAN magic) in the artifact; -1 unless exactly one.
static long find_plan(const uint8_t *a, size_t n) {
    long at = -1;
    for (size_t i = 0; i + 8 <= n; i++) {
        if (memcmp(a + i, DLRT_PLAN_MAGIC, 8) == 0) {
            if (at >= 0) {
                return -1;
            }
            at = (long)i;
        }
    }
    return at;
}

static void put32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}

DL_TEST(rt_rejects_altered_plan) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    long at = find_plan(f->art, f->art_len);
    DL_CHECK(at >= 0);
    dlrt_plan_hdr h;
    memcpy(&h, f->art + at, sizeof h);
    DL_CHECK_EQ_I64(h.version, DLRT_FORMAT_VERSION);
    DL_CHECK(h.n_tensors >= 6 && h.n_kernels >= 1 && h.n_args >= 1);
    // Each alteration: a field offset within the plan, its width and the new value.
    typedef struct alt {
        const char *what;
        uint64_t off;
        int width;
        uint64_t val;
        dlrt_status want;
    } alt;
    const uint64_t tens = h.off_tensors, kern = h.off_kernels;
    // The first kernel (y = Add (x, p_lit): writes y, reads x and p_lit), its compiled signature,
    // the first tensor (input x) and the buffers of x, y and p_lit.
    dlrt_plan_kernel k0;
    dlrt_plan_fn sig0;
    dlrt_plan_tensor t0;
    memcpy(&k0, f->art + at + (long)kern, sizeof k0);
    memcpy(&sig0, f->art + at + (long)(h.off_fns + k0.fn * sizeof sig0), sizeof sig0);
    DL_CHECK(h.n_fns >= 2 && k0.fn == 0 && k0.ops_len > 0 && sig0.name_len > 0);
    const uint64_t fsig0 = h.off_fns, fsig1 = h.off_fns + sizeof(dlrt_plan_fn);
    dlrt_plan_fn sig1;
    memcpy(&sig1, f->art + at + (long)fsig1, sizeof sig1);
    DL_CHECK_EQ_I64(sig1.name_len, sig0.name_len); // so pointing 1 at 0's name duplicates it
    memcpy(&t0, f->art + at + (long)tens, sizeof t0);
    uint32_t kargs[3];
    DL_CHECK(k0.n_args == 3 && k0.n_out == 1 && t0.role == DLRT_ROLE_INPUT);
    memcpy(kargs, f->art + at + (long)(h.off_args + 4ull * k0.first_arg), sizeof kargs);
    const uint32_t out_buf = kargs[0], in_buf = kargs[1], param_buf = kargs[2];
    DL_CHECK_EQ_I64(in_buf, t0.buffer);
    DL_CHECK(h.n_entry_kernels >= 2);
    alt alts[] = {
        {"bad magic", 0, 4, 0x4e4c5244, DLRT_ERR_CORRUPT},
        {"version +1", offsetof(dlrt_plan_hdr, version), 4, DLRT_FORMAT_VERSION + 1,
         DLRT_ERR_UNSUPPORTED},
        {"version 0", offsetof(dlrt_plan_hdr, version), 4, 0, DLRT_ERR_UNSUPPORTED},
        {"header size", offsetof(dlrt_plan_hdr, hdr_size), 4, 8, DLRT_ERR_CORRUPT},
        {"total size", offsetof(dlrt_plan_hdr, total_size), 8, h.total_size + 8, DLRT_ERR_CORRUPT},
        {"n_buffers huge", offsetof(dlrt_plan_hdr, n_buffers), 4, 0xfffffff0u, DLRT_ERR_CORRUPT},
        {"n_tensors huge", offsetof(dlrt_plan_hdr, n_tensors), 4, 0x7fffffffu, DLRT_ERR_CORRUPT},
        {"n_kernels huge", offsetof(dlrt_plan_hdr, n_kernels), 4, 0xffffffffu, DLRT_ERR_CORRUPT},
        {"n_args huge", offsetof(dlrt_plan_hdr, n_args), 4, 0x40000000u, DLRT_ERR_CORRUPT},
        {"n_fns off by one", offsetof(dlrt_plan_hdr, n_fns), 4, h.n_fns + 1, DLRT_ERR_CORRUPT},
        {"tensor table offset past the end", offsetof(dlrt_plan_hdr, off_tensors), 8,
         h.total_size + 64, DLRT_ERR_CORRUPT},
        {"tensor table offset misaligned", offsetof(dlrt_plan_hdr, off_tensors), 8, tens + 4,
         DLRT_ERR_CORRUPT},
        {"tensor table offset overflowing", offsetof(dlrt_plan_hdr, off_tensors), 8, UINT64_MAX - 7,
         DLRT_ERR_CORRUPT},
        {"buffer table offset huge", offsetof(dlrt_plan_hdr, off_buffers), 8, UINT64_C(1) << 62,
         DLRT_ERR_CORRUPT},
        {"kernel table offset past the end", offsetof(dlrt_plan_hdr, off_kernels), 8,
         h.total_size - 8, DLRT_ERR_CORRUPT},
        {"strings past the end", offsetof(dlrt_plan_hdr, size_strings), 8, h.total_size,
         DLRT_ERR_CORRUPT},
        {"data size overflowing", offsetof(dlrt_plan_hdr, size_data), 8, UINT64_MAX,
         DLRT_ERR_CORRUPT},
        {"infer entry outside the kernel list", offsetof(dlrt_plan_hdr, entry_count), 4,
         h.n_entry_kernels + 1, DLRT_ERR_CORRUPT},
        {"model name outside the strings", offsetof(dlrt_plan_hdr, model_name_off), 4,
         (uint64_t)h.size_strings, DLRT_ERR_CORRUPT},
        {"target outside the strings", offsetof(dlrt_plan_hdr, target_len), 4, 0xffffffffu,
         DLRT_ERR_CORRUPT},
        {"tensor dtype", tens + offsetof(dlrt_plan_tensor, dtype), 4, 77, DLRT_ERR_CORRUPT},
        {"tensor role", tens + offsetof(dlrt_plan_tensor, role), 4, 9, DLRT_ERR_CORRUPT},
        {"tensor rank", tens + offsetof(dlrt_plan_tensor, rank), 4, 9, DLRT_ERR_CORRUPT},
        {"tensor buffer id", tens + offsetof(dlrt_plan_tensor, buffer), 4, 0xffffffu,
         DLRT_ERR_CORRUPT},
        {"tensor dim", tens + offsetof(dlrt_plan_tensor, dims), 8, 3, DLRT_ERR_CORRUPT},
        {"negative tensor dim", tens + offsetof(dlrt_plan_tensor, dims), 8, UINT64_MAX,
         DLRT_ERR_CORRUPT},
        {"tensor name outside the strings", tens + offsetof(dlrt_plan_tensor, name_off), 4,
         0xfffffff0u, DLRT_ERR_CORRUPT},
        {"empty tensor name", tens + offsetof(dlrt_plan_tensor, name_len), 4, 0, DLRT_ERR_CORRUPT},
        {"kernel fn index", kern + offsetof(dlrt_plan_kernel, fn), 4, h.n_fns, DLRT_ERR_CORRUPT},
        {"kernel args outside the list", kern + offsetof(dlrt_plan_kernel, first_arg), 4, h.n_args,
         DLRT_ERR_CORRUPT},
        {"kernel range 0", kern + offsetof(dlrt_plan_kernel, range), 8, 0, DLRT_ERR_CORRUPT},
        {"kernel argument buffer id", h.off_args, 4, h.n_buffers, DLRT_ERR_CORRUPT},
        {"entry kernel id", h.off_entry_kernels, 4, h.n_kernels, DLRT_ERR_CORRUPT},
        // Format 4: kernels checked against what they were compiled for.
        {"kernel range beyond its compiled range", kern + offsetof(dlrt_plan_kernel, range), 8,
         (uint64_t)k0.range + 1, DLRT_ERR_CORRUPT},
        {"kernel output on an input buffer", h.off_args + 4ull * k0.first_arg, 4, in_buf,
         DLRT_ERR_CORRUPT},
        {"infer kernel output on a param buffer", h.off_args + 4ull * k0.first_arg, 4, param_buf,
         DLRT_ERR_CORRUPT},
        {"compiled extent beyond the argument's buffer",
         h.off_fn_extents + 8ull * sig0.first_extent, 8, (uint64_t)1 << 40, DLRT_ERR_CORRUPT},
        {"kernel argument count beyond its compiled one", kern + offsetof(dlrt_plan_kernel, n_args),
         4, (uint64_t)k0.n_args + 1, DLRT_ERR_CORRUPT},
        {"kernel signature table past the end", offsetof(dlrt_plan_hdr, off_fns), 8, h.total_size,
         DLRT_ERR_CORRUPT},
        {"extent count huge", offsetof(dlrt_plan_hdr, n_fn_extents), 4, 0xfffffff0u,
         DLRT_ERR_CORRUPT},
        {"entry kernels repeated", h.off_entry_kernels + 4, 4, 0, DLRT_ERR_CORRUPT},
        {"input tensor on a temp buffer", tens + offsetof(dlrt_plan_tensor, buffer), 4, out_buf,
         DLRT_ERR_CORRUPT},
        {"NUL inside a tensor name", h.off_strings + t0.name_off, 1, 0, DLRT_ERR_CORRUPT},
        // Format 5: the device, its image, kernel symbol names, launch data and op strings.
        {"unknown device kind", offsetof(dlrt_plan_hdr, device), 4, DLRT_PLAN_DEVICE_COUNT,
         DLRT_ERR_CORRUPT},
        {"a CUDA plan without a device image", offsetof(dlrt_plan_hdr, device), 4,
         DLRT_PLAN_DEVICE_CUDA, DLRT_ERR_CORRUPT},
        {"an image kind on a CPU plan", offsetof(dlrt_plan_hdr, image_kind), 4, DLRT_IMAGE_CUBIN,
         DLRT_ERR_CORRUPT},
        {"an unknown image kind", offsetof(dlrt_plan_hdr, image_kind), 4, 77, DLRT_ERR_CORRUPT},
        {"an image on a CPU plan", offsetof(dlrt_plan_hdr, size_image), 8, 64, DLRT_ERR_CORRUPT},
        {"an image past the end", offsetof(dlrt_plan_hdr, size_image), 8, h.total_size + 64,
         DLRT_ERR_CORRUPT},
        {"an image offset misaligned", offsetof(dlrt_plan_hdr, off_image), 8, 8, DLRT_ERR_CORRUPT},
        // an instruction-set bit a later dlcc may set: refused, never run on trust
        {"an isa bit this runtime does not know", offsetof(dlrt_plan_hdr, isa), 4, 1u << 20,
         DLRT_ERR_UNSUPPORTED},
        // Format 6: the data-parallel all-reduce point (this model has no train step).
        {"header reserved word", offsetof(dlrt_plan_hdr, reserved6), 4, 1, DLRT_ERR_CORRUPT},
        {"gradients without a train step", offsetof(dlrt_plan_hdr, n_grads), 4, 1,
         DLRT_ERR_CORRUPT},
        {"an all-reduce point without a train step", offsetof(dlrt_plan_hdr, comm_at), 4, 1,
         DLRT_ERR_CORRUPT},
        {"a gradient table past the end", offsetof(dlrt_plan_hdr, off_grads), 8, h.total_size + 8,
         DLRT_ERR_CORRUPT},
        {"empty kernel symbol name", fsig0 + offsetof(dlrt_plan_fn, name_len), 4, 0,
         DLRT_ERR_CORRUPT},
        {"kernel symbol name outside the strings", fsig0 + offsetof(dlrt_plan_fn, name_off), 4,
         (uint64_t)h.size_strings, DLRT_ERR_CORRUPT},
        {"NUL inside a kernel symbol name", h.off_strings + sig0.name_off, 1, 0, DLRT_ERR_CORRUPT},
        {"two kernels of one symbol name", fsig1 + offsetof(dlrt_plan_fn, name_off), 4,
         sig0.name_off, DLRT_ERR_CORRUPT},
        {"a grid on a CPU kernel", fsig0 + offsetof(dlrt_plan_fn, grid), 4, 1, DLRT_ERR_CORRUPT},
        {"a block on a CPU kernel", fsig0 + offsetof(dlrt_plan_fn, block) + 8, 4, 32,
         DLRT_ERR_CORRUPT},
        {"shared memory on a CPU kernel", fsig0 + offsetof(dlrt_plan_fn, shared_bytes), 4, 1024,
         DLRT_ERR_CORRUPT},
        {"op names outside the strings", kern + offsetof(dlrt_plan_kernel, ops_len), 4, 0xfffffff0u,
         DLRT_ERR_CORRUPT},
        {"NUL inside op names", h.off_strings + k0.ops_off, 1, 0, DLRT_ERR_CORRUPT},
        {"kernel record unknown flag", kern + offsetof(dlrt_plan_kernel, flags), 4,
         DLRT_KERNEL_F_ALL + 1, DLRT_ERR_CORRUPT},
    };
    // Param records: the first tensor with role PARAM.
    uint64_t ptens = 0;
    for (uint32_t i = 0; i < h.n_tensors; i++) {
        dlrt_plan_tensor t;
        memcpy(&t, f->art + at + (long)(tens + i * sizeof t), sizeof t);
        if (t.role == DLRT_ROLE_PARAM) {
            ptens = tens + i * sizeof t;
            break;
        }
    }
    DL_CHECK(ptens != 0);
    alt palts[] = {
        {"param init kind", ptens + offsetof(dlrt_plan_tensor, init), 4, 17, DLRT_ERR_CORRUPT},
    };
    uint8_t *copy = malloc(f->art_len);
    DL_CHECK(copy != NULL);
    int bad = 0;
    for (size_t i = 0; i < DL_ARRAY_LEN(alts) + DL_ARRAY_LEN(palts); i++) {
        const alt *a = i < DL_ARRAY_LEN(alts) ? &alts[i] : &palts[i - DL_ARRAY_LEN(alts)];
        memcpy(copy, f->art, f->art_len);
        uint8_t *p = copy + at + (long)a->off;
        if (a->width == 1) {
            *p = (uint8_t)a->val;
        } else if (a->width == 4) {
            put32(p, (uint32_t)a->val);
        } else {
            put64(p, a->val);
        }
        // A forged artifact: the checksum is right, the plan validation must catch it.
        DL_CHECK(dl_test_artifact_reseal(copy, f->art_len));
        // Memory: the status must be the expected one.
        dlrt_model *rm = NULL;
        bad_load b = {copy, f->art_len, false, NULL};
        printf("  altered: %s\n", a->what);
        int rc = in_child(bad_load_child, &b);
        if (rc != 0) {
            fprintf(stderr, "  altered plan (%s): %s\n", a->what, child_outcome(rc));
            bad++;
            continue;
        }
        dlrt_status st = dlrt_model_load_memory(copy, f->art_len, &rm);
        printf("    -> %s\n", dlrt_last_error());
        if (st != a->want) {
            fprintf(stderr, "  altered plan (%s): status %s, want %s (%s)\n", a->what,
                    dlrt_status_str(st), dlrt_status_str(a->want), dlrt_last_error());
            bad++;
        }
        dlrt_model_release(rm);
    }
    // The version message names both versions and says what to do: format 7 (the one before
    // prepacked weights) is refused like any other.
    memcpy(copy, f->art, f->art_len);
    put32(copy + at + offsetof(dlrt_plan_hdr, version), 7);
    DL_CHECK(dl_test_artifact_reseal(copy, f->art_len));
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_memory(copy, f->art_len, &rm), DLRT_ERR_UNSUPPORTED);
    DL_CHECK(strstr(dlrt_last_error(), "version 7") != NULL);
    DL_CHECK(strstr(dlrt_last_error(), "reads version 8") != NULL);
    DL_CHECK(strstr(dlrt_last_error(), "recompile") != NULL);
    free(copy);
    DL_CHECK_EQ_I64(bad, 0);
}

// The plan's kernel dependencies for a diamond a -> (b, c) -> d: b and c wait for a only (they
// may run concurrently), d waits for both, and every dependency points to an earlier kernel.
DL_TEST(rt_plan_dependencies_of_a_diamond) {
    dl_ir_module *m = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(compile_text("model diamond\ninput x : float[64]\na = Relu (x)\nb = Exp (a)\n"
                          "c = Neg (a)\nd = Add (b, c)\noutput d\n",
                          &m, &art, &len));
    long off = find_plan(art, len);
    DL_CHECK(off >= 0);
    dlrt_plan_hdr h;
    memcpy(&h, art + off, sizeof h);
    DL_CHECK_EQ_I64(h.n_kernels, 4);
    dlrt_plan_kernel ks[4];
    memcpy(ks, art + off + h.off_kernels, sizeof ks);
    uint32_t deps[16] = {0};
    DL_CHECK(h.n_deps <= 16);
    memcpy(deps, art + off + h.off_deps, h.n_deps * sizeof(uint32_t));
    DL_CHECK_EQ_I64(ks[0].n_deps, 0);
    DL_CHECK_EQ_I64(ks[1].n_deps, 1);
    DL_CHECK_EQ_I64(deps[ks[1].first_dep], 0);
    DL_CHECK_EQ_I64(ks[2].n_deps, 1);
    DL_CHECK_EQ_I64(deps[ks[2].first_dep], 0);
    DL_CHECK_EQ_I64(ks[3].n_deps, 2);
    DL_CHECK_EQ_I64(deps[ks[3].first_dep], 1);
    DL_CHECK_EQ_I64(deps[ks[3].first_dep + 1], 2);
    for (int k = 0; k < 4; k++) {
        DL_CHECK_EQ_I64(ks[k].n_out, 1);
    }
    free(art);
    dl_ir_module_destroy(m);
}

// ---------------------------------------------------------------------------------------------
// The checksum (format 4): any accidental change of the file is refused before dlopen

typedef struct flip_job {
    const uint8_t *art;
    size_t len;
    const size_t *pos; // positions to flip (NULL: every byte)
    size_t n_pos;
    bool from_file;
    const char *path;
} flip_job;

// In a child: flips each position in turn (xor 0x5a) and loads; every load must be refused with
// DLRT_ERR_CORRUPT and a message. Returns the number of positions that were not.
static int flip_child(void *arg) {
    const flip_job *j = arg;
    uint8_t *copy = malloc(j->len);
    if (!copy) {
        return 90;
    }
    memcpy(copy, j->art, j->len);
    int missed = 0;
    size_t n = j->pos ? j->n_pos : j->len;
    for (size_t i = 0; i < n; i++) {
        size_t at = j->pos ? j->pos[i] : i;
        copy[at] ^= 0x5a;
        dlrt_model *rm = NULL;
        dlrt_status st;
        if (j->from_file) {
            st = write_file(j->path, copy, j->len) ? dlrt_model_load_file(j->path, &rm)
                                                   : DLRT_ERR_IO;
        } else {
            st = dlrt_model_load_memory(copy, j->len, &rm);
        }
        if (st != DLRT_ERR_CORRUPT || rm != NULL || dlrt_last_error()[0] == 0) {
            fprintf(stderr, "  byte %zu flipped: status %s (%s)\n", at, dlrt_status_str(st),
                    dlrt_last_error());
            if (++missed > 20) {
                break;
            }
        }
        dlrt_model_release(rm);
        copy[at] ^= 0x5a;
    }
    free(copy);
    return missed > 80 ? 80 : missed;
}

// 64 evenly spread bytes from a file and from memory, each in a child of its own (a crash is a
// failure of that byte), then every byte of the artifact from memory in one child (a crash there
// fails the test too). Before the checksum, 33 of 50 flips crashed the process.
DL_TEST(rt_every_flipped_byte_is_refused) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    char path[600];
    snprintf(path, sizeof path, "%s/flip.so", f->dir);
    int bad = 0;
    for (size_t i = 0; i < 64; i++) {
        size_t at = i == 63 ? f->art_len - 1 : i * (f->art_len / 63);
        for (int from_file = 0; from_file < 2; from_file++) {
            flip_job j = {f->art, f->art_len, &at, 1, from_file != 0, path};
            int rc = in_child(flip_child, &j);
            if (rc != 0) {
                fprintf(stderr, "  byte %zu flipped (%s): %s\n", at, from_file ? "file" : "memory",
                        child_outcome(rc));
                bad++;
            }
        }
    }
    remove(path);
    DL_CHECK_EQ_I64(bad, 0);
    // Every byte (bounded: the fixture's artifact is small; hashing it ~10^4 times is fast).
    DL_CHECK(f->art_len < ((size_t)1 << 20));
    flip_job all = {f->art, f->art_len, NULL, 0, false, NULL};
    int rc = in_child(flip_child, &all);
    if (rc != 0) {
        fprintf(stderr, "  every byte flipped in turn: %s\n", child_outcome(rc));
    }
    DL_CHECK_EQ_I64(rc, 0);
}

// The messages: a damaged file says so, and a file without the trailer (an older dlcc's, or one
// cut short) is no dlcc artifact of this format.
DL_TEST(rt_checksum_messages) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    uint8_t *copy = malloc(f->art_len);
    DL_CHECK(copy != NULL);
    memcpy(copy, f->art, f->art_len);
    copy[f->art_len / 2] ^= 1;
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_memory(copy, f->art_len, &rm), DLRT_ERR_CORRUPT);
    DL_CHECK(strstr(dlrt_last_error(), "checksum") != NULL);
    DL_CHECK(rm == NULL);
    size_t elf_len = f->art_len - sizeof(dlrt_artifact_trailer);
    DL_CHECK_EQ_I64(dlrt_model_load_memory(f->art, elf_len, &rm), DLRT_ERR_CORRUPT);
    DL_CHECK(strstr(dlrt_last_error(), "no checksum trailer") != NULL);
    // A trailer of another format version, with a right checksum: unsupported, naming both.
    memcpy(copy, f->art, f->art_len);
    put32(copy + elf_len + offsetof(dlrt_artifact_trailer, version), 3);
    DL_CHECK(dl_test_artifact_reseal(copy, f->art_len));
    DL_CHECK_EQ_I64(dlrt_model_load_memory(copy, f->art_len, &rm), DLRT_ERR_UNSUPPORTED);
    DL_CHECK(strstr(dlrt_last_error(), "version 3") != NULL);
    free(copy);
    // And the intact artifact still loads (the trailer is part of every compile).
    DL_CHECK_EQ_I64(dlrt_model_load_memory(f->art, f->art_len, &rm), DLRT_OK);
    dlrt_model_release(rm);
}

// ---------------------------------------------------------------------------------------------
// Format 5: devices, kernel names and op strings

// The plan's string [off, off + len) as a C string in buf.
static const char *plan_string(const uint8_t *plan, const dlrt_plan_hdr *h, uint32_t off,
                               uint32_t len, char *buf, size_t size) {
    size_t n = len < size - 1 ? len : size - 1;
    memcpy(buf, plan + h->off_strings + off, n);
    buf[n] = 0;
    return buf;
}

// What codegen writes, read back: the CPU device, no image, every kernel-table entry named by its
// LLVM function ("k<i>_<Op>": unique, non-empty) with zero launch data, every kernel record
// naming the op of the node it came from; and the runtime's view of it: the model's and the
// session's device, each tensor's device, the copy-out functions agreeing with the borrowed
// pointer.
DL_TEST(rt_format8_round_trip) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    long at = find_plan(f->art, f->art_len);
    DL_CHECK(at >= 0);
    const uint8_t *plan = f->art + at;
    dlrt_plan_hdr h;
    memcpy(&h, plan, sizeof h);
    DL_CHECK_EQ_I64(h.version, 8);
    DL_CHECK_EQ_I64(DLRT_FORMAT_VERSION, 8);
    DL_CHECK_EQ_I64(h.device, DLRT_PLAN_DEVICE_CPU);
    DL_CHECK_EQ_I64(h.image_kind, DLRT_IMAGE_NONE);
    DL_CHECK_EQ_I64(h.size_image, 0);
    DL_CHECK_EQ_I64(h.reserved6, 0);
    DL_CHECK_EQ_I64(h.n_grads, 0); // no train step: nothing to all-reduce
    DL_CHECK_EQ_I64(h.comm_at, 0);
    DL_CHECK(h.n_fns == h.n_kernels && h.n_kernels == 4);
    char buf[128], buf2[128];
    for (uint32_t i = 0; i < h.n_fns; i++) {
        dlrt_plan_fn fn;
        memcpy(&fn, plan + h.off_fns + i * sizeof fn, sizeof fn);
        const char *name = plan_string(plan, &h, fn.name_off, fn.name_len, buf, sizeof buf);
        char want[32];
        snprintf(want, sizeof want, "k%u_", i);
        DL_CHECK(strncmp(name, want, strlen(want)) == 0);
        DL_CHECK((fn.grid[0] | fn.grid[1] | fn.grid[2] | fn.block[0] | fn.block[1] | fn.block[2] |
                  fn.shared_bytes) == 0);
        for (uint32_t j = 0; j < i; j++) {
            dlrt_plan_fn other;
            memcpy(&other, plan + h.off_fns + j * sizeof other, sizeof other);
            DL_CHECK(strcmp(name, plan_string(plan, &h, other.name_off, other.name_len, buf2,
                                              sizeof buf2)) != 0);
        }
    }
    // Every kernel record names the op of its node (found by the node's first output name), and
    // the kernel's symbol name ends in the same op name.
    for (uint32_t i = 0; i < h.n_kernels; i++) {
        dlrt_plan_kernel k;
        memcpy(&k, plan + h.off_kernels + i * sizeof k, sizeof k);
        DL_CHECK_EQ_I64(k.flags, 0); // no AllReduceMean, nothing packed in this model
        char node[64], ops[64];
        plan_string(plan, &h, k.name_off, k.name_len, node, sizeof node);
        plan_string(plan, &h, k.ops_off, k.ops_len, ops, sizeof ops);
        const dl_ir_node *n = NULL;
        for (size_t j = 0; j < f->m->nodes.len; j++) {
            const dl_ir_node *c = f->m->nodes.data[j];
            if (c->n_outputs > 0 && strcmp(c->outputs[0]->name, node) == 0) {
                n = c;
            }
        }
        DL_CHECK(n != NULL);
        DL_CHECK_STR_EQ(ops, dl_ir_op_get_info(n->op)->name);
        dlrt_plan_fn fn;
        memcpy(&fn, plan + h.off_fns + k.fn * sizeof fn, sizeof fn);
        const char *sym = plan_string(plan, &h, fn.name_off, fn.name_len, buf, sizeof buf);
        DL_CHECK(strlen(sym) > strlen(ops) && strcmp(sym + strlen(sym) - strlen(ops), ops) == 0);
    }
    // The runtime's side.
    dlrt_model *rm = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(f->art, f->art_len, &rm));
    DL_CHECK_EQ_I64(dlrt_model_device(rm), DLRT_DEVICE_CPU);
    DL_CHECK_STR_EQ(dlrt_device_name(dlrt_model_device(rm)), "cpu");
    DL_CHECK_STR_EQ(dlrt_device_name(DLRT_DEVICE_CUDA), "cuda");
    DL_CHECK_STR_EQ(dlrt_model_target(rm),
                    plan_string(plan, &h, h.target_off, h.target_len, buf, sizeof buf));
    dlrt_tensor_desc d;
    for (size_t i = 0; i < dlrt_model_num_outputs(rm); i++) {
        DL_CHECK_OK(dlrt_model_output(rm, i, &d));
        DL_CHECK_EQ_I64(d.device, DLRT_DEVICE_CPU);
    }
    DL_CHECK_OK(dlrt_model_input(rm, 0, &d));
    DL_CHECK_EQ_I64(d.device, DLRT_DEVICE_CPU);
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_session_create(rm, &s));
    DL_CHECK_EQ_I64(dlrt_session_device(s), DLRT_DEVICE_CPU);
    float x[6] = {1, -2, 3, -4, 5, -6}, x_back[6] = {0};
    uint16_t hx[4] = {0x3c00, 0x4000, 0xbc00, 0}; // 1, 2, -1, 0 in binary16
    DL_CHECK_OK(dlrt_session_set_input(s, "x", x, sizeof x));
    DL_CHECK_OK(dlrt_session_set_input(s, "h", hx, sizeof hx));
    DL_CHECK_OK(dlrt_session_input_copy(s, "x", x_back, sizeof x_back));
    DL_CHECK(memcmp(x, x_back, sizeof x) == 0);
    DL_CHECK_OK(dlrt_session_infer(s));
    const void *y_ptr = NULL;
    float y_copy[6] = {0};
    DL_CHECK_OK(dlrt_session_output(s, "y", &y_ptr, &d));
    DL_CHECK_EQ_I64(d.device, DLRT_DEVICE_CPU);
    DL_CHECK_OK(dlrt_session_output_copy(s, "y", y_copy, sizeof y_copy));
    DL_CHECK(memcmp(y_ptr, y_copy, sizeof y_copy) == 0);
    DL_CHECK(y_copy[0] == 2.0f && y_copy[5] == 0.5f); // x + p_lit
    // Copy-out errors: a wrong size, an unknown name, NULL data.
    DL_CHECK_EQ_I64(dlrt_session_output_copy(s, "y", y_copy, 4), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_session_output_copy(s, "nope", y_copy, sizeof y_copy),
                    DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_session_output_copy(s, "y", NULL, sizeof y_copy), DLRT_ERR_INVALID_ARG);
    DL_CHECK_EQ_I64(dlrt_session_input_copy(s, "y", x_back, sizeof x_back), DLRT_ERR_INVALID_ARG);
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
}

// ---------------------------------------------------------------------------------------------
// Format 8: prepacked weights (PACKED buffers, DLRT_KERNEL_F_PREPACK kernels)
//
// Codegen makes no prepack kernel yet, so these tests forge them into a compiled plan: in the
// model below wn and wa are made of the param w alone, so their kernels may be flagged prepack
// and their buffers made PACKED (moved to the end of the arena, where nothing shares them). The
// forged plan loads and runs, the prepack kernels running only in infers after a change of w;
// each broken rule is refused as corrupt, with a message naming it.

static const char prepack_model[] = "model pk\n"
                                    "input x : float[4]\n"
                                    "param w : float[4] = [1, -2, 3, -4]\n"
                                    "wn = Neg (w)\n"
                                    "wa = Abs (w)\n"
                                    "u = Mul (x, wn)\n"
                                    "y = Add (u, wa)\n"
                                    "t = Mul (x, w)\n"
                                    "loss = ReduceSum <keepdims = 0> (t)\n"
                                    "output y\n"
                                    "train loss { optimizer = sgd <lr = 0.5> }\n";

// compile_text with the gradients of the train block (dl_pass_autodiff).
static bool compile_train_text(const char *text, uint8_t **art, size_t *len) {
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    bool ok = false;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    if (dl_fe_parse("rt.dlg", text, strlen(text), d, &m) == DL_OK && dl_pass_shape(m, d) == DL_OK &&
        dl_pass_autodiff(m, d) == DL_OK && dl_ir_verify(m, d) == DL_OK &&
        dl_cg_compile(m, NULL, d, art, len) == DL_OK) {
        ok = true;
    } else {
        print_diags(d);
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

// The compiled prepack_model and where its parts are.
typedef struct pk_art {
    uint8_t *art;
    size_t len;
    long at; // the plan's offset in art
    dlrt_plan_hdr h;
    uint32_t k_wn, k_wa, k_u, k_y, k_t_train; // plan kernel ids (t: its train step record)
    uint32_t b_wn, b_wa, b_w, b_x;            // buffer ids
    // Indices into the plan's args: wa's and wn's outputs, wn's input w, and the train step's
    // t's argument w.
    uint32_t a_wa_out, a_wn_out, a_wn_in, a_t_w;
} pk_art;

static uint32_t plan_u32(const pk_art *p, uint64_t off) {
    uint32_t v;
    memcpy(&v, p->art + p->at + off, 4);
    return v;
}

// Plan kernel `kid`.
static dlrt_plan_kernel pk_kernel(const pk_art *p, uint32_t kid) {
    dlrt_plan_kernel k;
    memcpy(&k, p->art + p->at + p->h.off_kernels + kid * sizeof k, sizeof k);
    return k;
}

// The kernel of entry point `e` named `name` (its node's first output), UINT32_MAX if none.
static uint32_t pk_kernel_named(const pk_art *p, int e, const char *name) {
    for (uint32_t i = 0; i < p->h.entry_count[e]; i++) {
        uint32_t kid = plan_u32(p, p->h.off_entry_kernels + 4ull * (p->h.entry_first[e] + i));
        dlrt_plan_kernel k = pk_kernel(p, kid);
        if (k.name_len == strlen(name) &&
            memcmp(p->art + p->at + p->h.off_strings + k.name_off, name, k.name_len) == 0) {
            return kid;
        }
    }
    return UINT32_MAX;
}

static bool pk_compile(pk_art *p) {
    memset(p, 0, sizeof *p);
    if (!compile_train_text(prepack_model, &p->art, &p->len) ||
        (p->at = find_plan(p->art, p->len)) < 0) {
        return false;
    }
    memcpy(&p->h, p->art + p->at, sizeof p->h);
    p->k_wn = pk_kernel_named(p, DLRT_ENTRY_INFER, "wn");
    p->k_wa = pk_kernel_named(p, DLRT_ENTRY_INFER, "wa");
    p->k_u = pk_kernel_named(p, DLRT_ENTRY_INFER, "u");
    p->k_y = pk_kernel_named(p, DLRT_ENTRY_INFER, "y");
    p->k_t_train = pk_kernel_named(p, DLRT_ENTRY_TRAIN_STEP, "t");
    if (p->k_wn == UINT32_MAX || p->k_wa == UINT32_MAX || p->k_u == UINT32_MAX ||
        p->k_y == UINT32_MAX || p->k_t_train == UINT32_MAX) {
        fprintf(stderr, "prepack model: kernels wn %u wa %u u %u t %u\n", p->k_wn, p->k_wa, p->k_u,
                p->k_t_train);
        return false;
    }
    dlrt_plan_kernel wn = pk_kernel(p, p->k_wn), wa = pk_kernel(p, p->k_wa);
    dlrt_plan_kernel u = pk_kernel(p, p->k_u), t = pk_kernel(p, p->k_t_train);
    if (wn.n_args != 2 || wn.n_out != 1 || wa.n_args != 2 || wa.n_out != 1 || u.n_args != 3 ||
        t.n_args != 3 || wn.n_deps != 0 || wa.n_deps != 0) {
        fprintf(stderr, "prepack model: unexpected kernel records\n");
        return false;
    }
    p->a_wa_out = wa.first_arg;
    p->a_wn_out = wn.first_arg;
    p->a_wn_in = wn.first_arg + 1;
    p->b_wn = plan_u32(p, p->h.off_args + 4ull * wn.first_arg);
    p->b_wa = plan_u32(p, p->h.off_args + 4ull * p->a_wa_out);
    p->b_w = plan_u32(p, p->h.off_args + 4ull * p->a_wn_in);
    // u = Mul (x, wn): x is the input among its arguments.
    for (uint32_t a = 1; a < u.n_args; a++) {
        uint32_t b = plan_u32(p, p->h.off_args + 4ull * (u.first_arg + a));
        if (b != p->b_wn) {
            p->b_x = b;
        }
    }
    // t = Mul (x, w) in the train step: the argument that is w.
    p->a_t_w = UINT32_MAX;
    for (uint32_t a = 1; a < t.n_args; a++) {
        if (plan_u32(p, p->h.off_args + 4ull * (t.first_arg + a)) == p->b_w) {
            p->a_t_w = t.first_arg + a;
        }
    }
    return p->a_t_w != UINT32_MAX && p->b_wn != p->b_wa && p->b_w != p->b_x;
}

// An alteration of the plan: `width` bytes at plan offset `off` become `val`.
typedef struct plan_edit {
    uint64_t off;
    int width;
    uint64_t val;
} plan_edit;

#define PK_MAX_EDITS 12

typedef struct pk_forgery {
    const char *what;
    const char *msg; // in the error message
    plan_edit e[PK_MAX_EDITS];
    size_t n;
} pk_forgery;

static void pk_add(pk_forgery *f, uint64_t off, int width, uint64_t val) {
    if (f->n < PK_MAX_EDITS) {
        f->e[f->n++] = (plan_edit){off, width, val};
    }
}

static uint64_t pk_buf_field(const pk_art *p, uint32_t b, size_t field) {
    return p->h.off_buffers + (uint64_t)b * sizeof(dlrt_plan_buffer) + field;
}

static void pk_flag(pk_forgery *f, const pk_art *p, uint32_t kid, uint32_t flags) {
    pk_add(f,
           p->h.off_kernels + (uint64_t)kid * sizeof(dlrt_plan_kernel) +
               offsetof(dlrt_plan_kernel, flags),
           4, flags);
}

// Buffers bufs[0, n) become PACKED, laid out after the end of the arena (the arena grows).
static void pk_pack(pk_forgery *f, const pk_art *p, const uint32_t *bufs, size_t n) {
    uint64_t end = (p->h.arena_size + 63) / 64 * 64;
    for (size_t i = 0; i < n; i++) {
        dlrt_plan_buffer b;
        memcpy(&b, p->art + p->at + pk_buf_field(p, bufs[i], 0), sizeof b);
        pk_add(f, pk_buf_field(p, bufs[i], offsetof(dlrt_plan_buffer, kind)), 4, DLRT_BUF_PACKED);
        pk_add(f, pk_buf_field(p, bufs[i], offsetof(dlrt_plan_buffer, offset)), 8, end);
        end += (b.size + 63) / 64 * 64;
    }
    pk_add(f, offsetof(dlrt_plan_hdr, arena_size), 8, end);
}

// The valid forgery: wn and wa packed by their kernels, flagged prepack.
static void pk_valid(pk_forgery *f, const pk_art *p) {
    const uint32_t bufs[2] = {p->b_wn, p->b_wa};
    pk_pack(f, p, bufs, 2);
    pk_flag(f, p, p->k_wn, DLRT_KERNEL_F_PREPACK);
    pk_flag(f, p, p->k_wa, DLRT_KERNEL_F_PREPACK);
}

// A copy of the artifact with f's edits, resealed (NULL on failure).
static uint8_t *pk_forge(const pk_art *p, const pk_forgery *f) {
    uint8_t *c = malloc(p->len);
    if (!c) {
        return NULL;
    }
    memcpy(c, p->art, p->len);
    for (size_t i = 0; i < f->n; i++) {
        uint8_t *q = c + p->at + f->e[i].off;
        if (f->e[i].width == 4) {
            put32(q, (uint32_t)f->e[i].val);
        } else {
            put64(q, f->e[i].val);
        }
    }
    if (!dl_test_artifact_reseal(c, p->len)) {
        free(c);
        return NULL;
    }
    return c;
}

// Each broken rule of format 8, forged into the compiled model: refused (in a child first, so a
// crash fails the case), DLRT_ERR_CORRUPT, naming what is wrong.
DL_TEST(rt_rejects_forged_prepack_plan) {
    pk_art p;
    bool ok = pk_compile(&p);
    DL_CHECK(ok);
    if (!ok) {
        free(p.art);
        return;
    }
    const uint32_t wn_only[1] = {p.b_wn};
    enum { N = 12 };
    pk_forgery fs[N];
    memset(fs, 0, sizeof fs);
    size_t n = 0;
    // The rules on kernels.
    fs[n] = (pk_forgery){.what = "a train step kernel flagged prepack",
                         .msg = "a prepack kernel is in the train step"};
    pk_flag(&fs[n++], &p, p.k_t_train, DLRT_KERNEL_F_PREPACK);
    fs[n] = (pk_forgery){.what = "a prepack kernel writing a temporary",
                         .msg = "a prepack kernel writes a buffer that is not a packed buffer"};
    pk_flag(&fs[n++], &p, p.k_wn, DLRT_KERNEL_F_PREPACK);
    fs[n] = (pk_forgery){.what = "a prepack kernel also flagged for an all-reduce",
                         .msg = "a prepack kernel is also flagged for an all-reduce"};
    pk_pack(&fs[n], &p, wn_only, 1);
    pk_flag(&fs[n++], &p, p.k_wn, DLRT_KERNEL_F_PREPACK | DLRT_KERNEL_F_ALLREDUCE_MEAN);
    fs[n] = (pk_forgery){.what = "a prepack kernel reading an input",
                         .msg = "a prepack kernel reads a buffer that is not a param or constant"};
    pk_valid(&fs[n], &p);
    pk_add(&fs[n++], p.h.off_args + 4ull * p.a_wn_in, 4, p.b_x);
    fs[n] = (pk_forgery){.what = "a prepack kernel waiting for an ordinary kernel",
                         .msg = "a prepack kernel waits for a kernel that is not a prepack kernel"};
    pk_valid(&fs[n], &p);
    pk_flag(&fs[n++], &p, p.k_y, DLRT_KERNEL_F_PREPACK); // y = Add (u, wa) waits for u
    // The rules on PACKED buffers.
    fs[n] = (pk_forgery){.what = "a packed buffer an ordinary kernel writes",
                         .msg = "a kernel that is not a prepack kernel writes a packed buffer"};
    pk_pack(&fs[n++], &p, wn_only, 1);
    fs[n] = (pk_forgery){.what = "a packed buffer with flags", .msg = "a packed buffer has flags"};
    pk_valid(&fs[n], &p);
    pk_add(&fs[n++], pk_buf_field(&p, p.b_wn, offsetof(dlrt_plan_buffer, flags)), 4,
           DLRT_BUF_F_INIT_DATA);
    fs[n] = (pk_forgery){.what = "a packed buffer two prepack kernels write",
                         .msg = "two kernels write one packed buffer"};
    pk_valid(&fs[n], &p);
    pk_add(&fs[n++], p.h.off_args + 4ull * p.a_wa_out, 4, p.b_wn);
    fs[n] = (pk_forgery){.what = "a packed buffer no kernel writes",
                         .msg = "no prepack kernel writes a packed buffer"};
    pk_pack(&fs[n], &p, wn_only, 1); // and wn's kernel writes wa's buffer instead
    pk_add(&fs[n++], p.h.off_args + 4ull * p.a_wn_out, 4, p.b_wa);
    fs[n] = (pk_forgery){.what = "a packed buffer a train step kernel reads",
                         .msg = "a train step kernel reads or writes a packed buffer"};
    pk_valid(&fs[n], &p);
    pk_add(&fs[n++], p.h.off_args + 4ull * p.a_t_w, 4, p.b_wn);
    fs[n] = (pk_forgery){.what = "a packed buffer sharing memory with another buffer",
                         .msg = "packed buffer overlaps another buffer"};
    pk_valid(&fs[n], &p);
    dlrt_plan_buffer bwa;
    memcpy(&bwa, p.art + p.at + pk_buf_field(&p, p.b_wa, 0), sizeof bwa);
    pk_add(&fs[n++], pk_buf_field(&p, p.b_wn, offsetof(dlrt_plan_buffer, offset)), 8, bwa.offset);
    fs[n] = (pk_forgery){.what = "an unknown buffer kind", .msg = "bad buffer"};
    pk_add(&fs[n++], pk_buf_field(&p, p.b_wn, offsetof(dlrt_plan_buffer, kind)), 4,
           DLRT_BUF_PACKED + 1);
    DL_CHECK_EQ_I64(n, N);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *copy = pk_forge(&p, &fs[i]);
        DL_CHECK(copy != NULL);
        if (!copy) {
            continue;
        }
        printf("  forged: %s\n", fs[i].what);
        bad_load b = {copy, p.len, false, NULL};
        int rc = in_child(bad_load_child, &b);
        dlrt_model *rm = NULL;
        dlrt_status st = rc == 0 ? dlrt_model_load_memory(copy, p.len, &rm) : DLRT_OK;
        if (rc != 0 || st != DLRT_ERR_CORRUPT || !strstr(dlrt_last_error(), fs[i].msg)) {
            fprintf(stderr, "  forged plan (%s): %s, status %s (%s), want \"%s\"\n", fs[i].what,
                    child_outcome(rc), dlrt_status_str(st), dlrt_last_error(), fs[i].msg);
            bad++;
        }
        dlrt_model_release(rm);
        free(copy);
    }
    DL_CHECK_EQ_I64(bad, 0);
    // The valid forgery loads (the cases above each break one rule of it).
    pk_forgery v = {.what = "valid"};
    pk_valid(&v, &p);
    uint8_t *copy = pk_forge(&p, &v);
    dlrt_model *rm = NULL;
    DL_CHECK(copy != NULL);
    if (copy) {
        DL_CHECK_OK(dlrt_model_load_memory(copy, p.len, &rm));
    }
    dlrt_model_release(rm);
    free(copy);
    free(p.art);
}

// y = x * -w + |w| (prepack_model's infer) against the session's output, for the session's w.
static bool pk_y_right(dlrt_session *s, const float x[4]) {
    float w[4], y[4];
    if (dlrt_session_get_param(s, "w", w, sizeof w) != DLRT_OK ||
        dlrt_session_output_copy(s, "y", y, sizeof y) != DLRT_OK) {
        return false;
    }
    for (int i = 0; i < 4; i++) {
        if (y[i] != x[i] * -w[i] + fabsf(w[i])) {
            fprintf(stderr, "  y[%d] = %g, want %g (w %g)\n", i, y[i], x[i] * -w[i] + fabsf(w[i]),
                    w[i]);
            return false;
        }
    }
    return true;
}

// Occurrences of `what` in the text s.
static int count_in(const char *s, const char *what) {
    int n = 0;
    for (const char *q = s; (q = strstr(q, what)) != NULL; q += strlen(what)) {
        n++;
    }
    return n;
}

// The forged prepack plan runs: the prepack kernels run in the first infer and in the first
// infer after each change of w (dlrt_session_set_param, a checkpoint load, a train step), and
// in no other; every infer computes with the current w. On one thread and on two.
DL_TEST(rt_prepack_kernels_run_only_after_a_param_change) {
    const fixture_state *fxs = fixture();
    DL_CHECK(fxs->ok);
    pk_art p;
    bool ok = pk_compile(&p);
    DL_CHECK(ok);
    pk_forgery v = {.what = "valid"};
    uint8_t *copy = ok ? (pk_valid(&v, &p), pk_forge(&p, &v)) : NULL;
    dlrt_model *rm = NULL;
    DL_CHECK(copy != NULL);
    if (!copy || dlrt_model_load_memory(copy, p.len, &rm) != DLRT_OK) {
        free(copy);
        free(p.art);
        DL_FAIL_("the forged prepack plan does not load: %s", dlrt_last_error());
    }
    char trace[600], ckpt[600];
    snprintf(trace, sizeof trace, "%s/prepack-trace.json", fxs->dir);
    snprintf(ckpt, sizeof ckpt, "%s/prepack.safetensors", fxs->dir);
    const float x[4] = {2, 2, 0.5f, -1};
    for (int threads = 1; threads <= 2; threads++) {
        dlrt_session_options o;
        dlrt_session_options_init(&o);
        o.threads = threads;
        dlrt_session *s = NULL;
        DL_CHECK_OK(dlrt_session_create_ex(rm, &o, &s));
        if (!s) {
            break;
        }
        DL_CHECK_OK(dlrt_session_profile_begin(s));
        DL_CHECK_OK(dlrt_session_set_input(s, "x", x, sizeof x));
        int infers = 0;
        // Packs (at creation's params), then not.
        for (int i = 0; i < 2; i++, infers++) {
            DL_CHECK_OK(dlrt_session_infer(s));
            DL_CHECK(pk_y_right(s, x));
        }
        // set_param: packs again, then not.
        const float w2[4] = {-3, 0.25f, 7, 8}, w3[4] = {5, 5, -5, 5};
        DL_CHECK_OK(dlrt_session_set_param(s, "w", w2, sizeof w2));
        for (int i = 0; i < 2; i++, infers++) {
            DL_CHECK_OK(dlrt_session_infer(s));
            DL_CHECK(pk_y_right(s, x));
        }
        // A checkpoint load: packs again (saving changes nothing).
        DL_CHECK_OK(dlrt_session_save(s, ckpt));
        DL_CHECK_OK(dlrt_session_set_param(s, "w", w3, sizeof w3));
        DL_CHECK_OK(dlrt_session_infer(s));
        DL_CHECK(pk_y_right(s, x));
        DL_CHECK_OK(dlrt_session_load(s, ckpt));
        DL_CHECK_OK(dlrt_session_infer(s));
        DL_CHECK(pk_y_right(s, x));
        infers += 2;
        float w_back[4];
        DL_CHECK_OK(dlrt_session_get_param(s, "w", w_back, sizeof w_back));
        DL_CHECK(memcmp(w_back, w2, sizeof w2) == 0);
        // A train step changes w (by -lr * x): packs again, then not.
        dlrt_step_info info;
        DL_CHECK_OK(dlrt_session_train_step(s, &info));
        DL_CHECK_OK(dlrt_session_get_param(s, "w", w_back, sizeof w_back));
        DL_CHECK(memcmp(w_back, w2, sizeof w2) != 0);
        for (int i = 0; i < 2; i++, infers++) {
            DL_CHECK_OK(dlrt_session_infer(s));
            DL_CHECK(pk_y_right(s, x));
        }
        DL_CHECK_OK(dlrt_session_profile_write(s, trace));
        dlrt_session_destroy(s);
        size_t tn = 0;
        char *t = (char *)read_file(trace, &tn);
        DL_CHECK(t != NULL);
        if (t) {
            // 5 of the 8 infers packed: after creation, two set_params, the load, the step.
            DL_CHECK_EQ_I64(count_in(t, "\"name\":\"Neg wn\""), 5);
            DL_CHECK_EQ_I64(count_in(t, "\"name\":\"Abs wa\""), 5);
            DL_CHECK_EQ_I64(count_in(t, "\"name\":\"Add y\""), infers);
            DL_CHECK_EQ_I64(infers, 8);
        }
        free(t);
        remove(trace);
        remove(ckpt);
    }
    dlrt_model_release(rm);
    free(copy);
    free(p.art);
}

// A real artifact of format 4 (tests/runtime/data/format4-small.so, compiled from
// format4-small.dlg by the dlcc before format 5) is refused, from a file and from memory, as
// unsupported, with a message naming both versions and saying to recompile.
DL_TEST(rt_format4_artifact_is_refused) {
    const char *path = DL_SOURCE_DIR "/tests/runtime/data/format4-small.so";
    size_t len = 0;
    uint8_t *old = read_file(path, &len);
    DL_CHECK(old != NULL);
    dlrt_model *rm = NULL;
    for (int from_file = 0; from_file < 2; from_file++) {
        dlrt_status st =
            from_file ? dlrt_model_load_file(path, &rm) : dlrt_model_load_memory(old, len, &rm);
        printf("  %s: %s\n", from_file ? "file" : "memory", dlrt_last_error());
        DL_CHECK_EQ_I64(st, DLRT_ERR_UNSUPPORTED);
        DL_CHECK(rm == NULL);
        DL_CHECK(strstr(dlrt_last_error(), "format version 4") != NULL);
        DL_CHECK(strstr(dlrt_last_error(), "reads version 8") != NULL);
        DL_CHECK(strstr(dlrt_last_error(), "recompile") != NULL);
    }
    free(old);
}

// The profiler names kernels by the plan's op strings, the runtime never knowing op ids. A fused
// kernel carries several ("MatMul+Add+Relu"): codegen fuses nothing yet, so the test writes that
// string over the model name's bytes of a compiled artifact (a model named for the purpose),
// points the kernel's ops at it and reseals the checksum; the trace's event is then named
// "MatMul+Add+Relu y" with args.op the string and args.ops the list, and the summary line shows
// the string.
DL_TEST(rt_profile_names_ops_from_strings) {
    dl_ir_module *m = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(compile_text("model MatMul_Add_Relu_model\ninput x : float[256]\ny = Relu (x)\n"
                          "z = Neg (y)\noutput z\n",
                          &m, &art, &len));
    dl_ir_module_destroy(m);
    long at = find_plan(art, len);
    DL_CHECK(at >= 0);
    dlrt_plan_hdr h;
    memcpy(&h, art + at, sizeof h);
    DL_CHECK_EQ_I64(h.n_kernels, 2);
    const char fused[] = "MatMul+Add+Relu";
    DL_CHECK(h.model_name_len >= sizeof fused - 1);
    memcpy(art + at + h.off_strings + h.model_name_off, fused, sizeof fused - 1);
    uint64_t k0 = h.off_kernels;
    put32(art + at + k0 + offsetof(dlrt_plan_kernel, ops_off), h.model_name_off);
    put32(art + at + k0 + offsetof(dlrt_plan_kernel, ops_len), (uint32_t)(sizeof fused - 1));
    DL_CHECK(dl_test_artifact_reseal(art, len));
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    char trace[600], summary[600];
    snprintf(trace, sizeof trace, "%s/fused-trace.json", f->dir);
    snprintf(summary, sizeof summary, "%s/fused-summary.txt", f->dir);
    dlrt_model *rm = NULL;
    DL_CHECK_OK(dlrt_model_load_memory(art, len, &rm));
    free(art);
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = 1;
    dlrt_session *s = NULL;
    DL_CHECK_OK(dlrt_session_create_ex(rm, &o, &s));
    float x[256] = {0};
    DL_CHECK_OK(dlrt_session_set_input(s, "x", x, sizeof x));
    DL_CHECK_OK(dlrt_session_profile_begin(s));
    DL_CHECK_OK(dlrt_session_infer(s));
    DL_CHECK_OK(dlrt_session_profile_write(s, trace));
    FILE *sf = fopen(summary, "w");
    DL_CHECK(sf != NULL);
    DL_CHECK_OK(dlrt_session_profile_summary(s, sf, 10));
    fclose(sf);
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    size_t tn = 0, sn = 0;
    char *t = (char *)read_file(trace, &tn), *sm = (char *)read_file(summary, &sn);
    DL_CHECK(t != NULL && sm != NULL);
    printf("%s", sm);
    DL_CHECK(strstr(t, "\"name\":\"MatMul+Add+Relu y\"") != NULL);
    DL_CHECK(strstr(t, "\"op\":\"MatMul+Add+Relu\",\"ops\":[\"MatMul\",\"Add\",\"Relu\"]") != NULL);
    DL_CHECK(strstr(t, "\"name\":\"Neg z\"") != NULL);
    DL_CHECK(strstr(t, "\"op\":\"Neg\",\"ops\":[\"Neg\"],\"symbol\":\"k1_Neg\"") != NULL);
    DL_CHECK(strstr(sm, "MatMul+Add+Relu y") != NULL);
    DL_CHECK(strstr(sm, "Neg z") != NULL);
    free(t);
    free(sm);
    remove(trace);
    remove(summary);
}

// Removes a directory tree the test made (files and directories only).
static void remove_tree(const char *path) {
    if (remove(path) == 0) {
        return;
    }
    char *names = list_dir(path);
    char *save = NULL;
    for (char *n = names ? strtok_r(names, "\n", &save) : NULL; n;
         n = strtok_r(NULL, "\n", &save)) {
        char sub[1200];
        snprintf(sub, sizeof sub, "%s/%s", path, n);
        remove_tree(sub);
    }
    free(names);
    rmdir(path);
}

// The cache path: an artifact damaged before it was stored (so the store's own blob hash is
// right) is refused by dlrt_model_load_cached with DLRT_ERR_CORRUPT, not mapped.
DL_TEST(rt_load_cached_checks_the_checksum) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", f->dir);
    dl_diags *d = NULL;
    DL_CHECK_EQ_I64(dl_diags_create(&d), DL_OK);
    dl_cache *c = NULL;
    DL_CHECK_EQ_I64(dl_cache_open(dir, d, &c), DL_OK);
    uint8_t *copy = malloc(f->art_len);
    DL_CHECK(copy != NULL && c != NULL);
    memcpy(copy, f->art, f->art_len);
    copy[f->art_len / 3] ^= 0x10;
    dl_hash128 key = dl_hash128_of("rt_load_cached_checks_the_checksum", 34);
    dl_cache_entry meta;
    memset(&meta, 0, sizeof meta);
    DL_CHECK_EQ_I64(dl_cache_put(c, key, copy, f->art_len, &meta, d), DL_OK);
    dl_cache_close(c);
    char hex[33];
    dl_hash128_hex(key, hex);
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_cached(dir, hex, &rm), DLRT_ERR_CORRUPT);
    DL_CHECK(strstr(dlrt_last_error(), "checksum") != NULL);
    DL_CHECK(rm == NULL);
    free(copy);
    dl_diags_destroy(d);
    remove_tree(dir);
}

// An old cache entry: the dlcc of format 5 never looks one up (the cache key includes the format
// version, driver/driver.c), and loading a format-4 artifact by its key is refused too, saying to
// recompile.
DL_TEST(rt_load_cached_refuses_format4) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    size_t len = 0;
    uint8_t *old = read_file(DL_SOURCE_DIR "/tests/runtime/data/format4-small.so", &len);
    DL_CHECK(old != NULL);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache4", f->dir);
    dl_diags *d = NULL;
    DL_CHECK_EQ_I64(dl_diags_create(&d), DL_OK);
    dl_cache *c = NULL;
    DL_CHECK_EQ_I64(dl_cache_open(dir, d, &c), DL_OK);
    dl_hash128 key = dl_hash128_of("rt_load_cached_refuses_format4", 30);
    dl_cache_entry meta;
    memset(&meta, 0, sizeof meta);
    DL_CHECK_EQ_I64(dl_cache_put(c, key, old, len, &meta, d), DL_OK);
    dl_cache_close(c);
    char hex[33];
    dl_hash128_hex(key, hex);
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_cached(dir, hex, &rm), DLRT_ERR_UNSUPPORTED);
    DL_CHECK(strstr(dlrt_last_error(), "format version 4") != NULL);
    DL_CHECK(strstr(dlrt_last_error(), "recompile") != NULL);
    DL_CHECK(rm == NULL);
    free(old);
    dl_diags_destroy(d);
    remove_tree(dir);
}

// ---------------------------------------------------------------------------------------------
// Memory up front: a session whose arena cannot be had fails at creation

// A model with a 32 MiB arena (input and output of 16 MiB each).
static const char big_model[] = "model big\ninput x : float[4194304]\ny = Relu (x)\noutput y\n";

static bool write_text(const char *dir, const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return write_file(p, text, strlen(text));
}

// Under a memory cgroup, pages that do not fit get the process OOM-killed when first touched;
// the session checks the cgroup's headroom first (here a fake cgroup directory through the
// DLRT_DEBUG_CGROUP_DIR testing aid: limit 100 MB, 90 MB in use) and refuses cleanly. With the
// usage mostly page cache (reclaimable), the same session is created.
DL_TEST(rt_session_refuses_an_arena_the_cgroup_cannot_hold) {
    const fixture_state *f = fixture();
    DL_CHECK(f->ok);
    dl_ir_module *m = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(compile_text(big_model, &m, &art, &len));
    dlrt_model *rm = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_memory(art, len, &rm), DLRT_OK);
    uint64_t arena = 0;
    dlrt_model_memory(rm, &arena, NULL);
    DL_CHECK(arena >= (32u << 20));
    char cg[600];
    snprintf(cg, sizeof cg, "%s/cgroup", f->dir);
    DL_CHECK(mkdir(cg, 0700) == 0);
    DL_CHECK(write_text(cg, "memory.max", "100000000\n"));
    DL_CHECK(write_text(cg, "memory.current", "90000000\n"));
    DL_CHECK(write_text(cg, "memory.stat", "anon 90000000\nfile 0\n"));
    setenv("DLRT_DEBUG_CGROUP_DIR", cg, 1);
    dlrt_session *s = NULL;
    DL_CHECK_EQ_I64(dlrt_session_create(rm, &s), DLRT_ERR_NOMEM);
    DL_CHECK(s == NULL);
    DL_CHECK(strstr(dlrt_last_error(), "cgroup") != NULL);
    printf("  -> %s\n", dlrt_last_error());
    DL_CHECK(write_text(cg, "memory.stat", "anon 10000000\nfile 80000000\n"));
    DL_CHECK_EQ_I64(dlrt_session_create(rm, &s), DLRT_OK);
    dlrt_session_destroy(s);
    // No limit ("max"): no check.
    DL_CHECK(write_text(cg, "memory.max", "max\n"));
    DL_CHECK(write_text(cg, "memory.stat", "anon 90000000\nfile 0\n"));
    s = NULL;
    DL_CHECK_EQ_I64(dlrt_session_create(rm, &s), DLRT_OK);
    dlrt_session_destroy(s);
    unsetenv("DLRT_DEBUG_CGROUP_DIR");
    const char *files[] = {"memory.max", "memory.current", "memory.stat"};
    for (size_t i = 0; i < DL_ARRAY_LEN(files); i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", cg, files[i]);
        remove(p);
    }
    rmdir(cg);
    dlrt_model_release(rm);
    free(art);
    dl_ir_module_destroy(m);
}

typedef struct mem_job {
    const uint8_t *art;
    size_t len;
} mem_job;

static long resident_bytes(void) {
    FILE *fp = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (!fp || fscanf(fp, "%ld %ld", &size, &res) != 2) {
        res = -1;
    }
    if (fp) {
        fclose(fp);
    }
    return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

// In a child: the created session's arena is resident (committed) right after creation.
static int committed_child(void *arg) {
    const mem_job *j = arg;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    if (dlrt_model_load_memory(j->art, j->len, &rm) != DLRT_OK) {
        return 2;
    }
    long before = resident_bytes();
    if (dlrt_session_create(rm, &s) != DLRT_OK) {
        return 3;
    }
    long after = resident_bytes();
    int rc = before >= 0 && after - before >= (long)(30u << 20) ? 0 : 4;
    if (rc) {
        fprintf(stderr, "  resident %ld -> %ld bytes\n", before, after);
    }
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    return rc;
}

// In a child whose address space cannot take the arena: a clean DLRT_ERR_NOMEM with a message.
static int rlimit_child(void *arg) {
    const mem_job *j = arg;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    if (dlrt_model_load_memory(j->art, j->len, &rm) != DLRT_OK) {
        return 2;
    }
    FILE *fp = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (!fp || fscanf(fp, "%ld", &pages) != 1) {
        return 3;
    }
    fclose(fp);
    rlim_t limit = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (8u << 20);
    struct rlimit rl = {limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        return 4;
    }
    dlrt_status st = dlrt_session_create(rm, &s);
    if (st != DLRT_ERR_NOMEM || s != NULL || strstr(dlrt_last_error(), "bytes") == NULL) {
        fprintf(stderr, "  status %s (%s)\n", dlrt_status_str(st), dlrt_last_error());
        return 5;
    }
    printf("  -> %s\n", dlrt_last_error());
    return 0;
}

DL_TEST(rt_session_memory_is_committed_at_creation) {
    dl_ir_module *m = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    DL_CHECK(compile_text(big_model, &m, &art, &len));
    mem_job j = {art, len};
    int rc = in_child(committed_child, &j);
    if (rc != 0) {
        fprintf(stderr, "  committed arena: %s\n", child_outcome(rc));
    }
    DL_CHECK_EQ_I64(rc, 0);
    rc = in_child(rlimit_child, &j);
    if (rc != 0) {
        fprintf(stderr, "  address-space limit: %s\n", child_outcome(rc));
    }
    DL_CHECK_EQ_I64(rc, 0);
    free(art);
    dl_ir_module_destroy(m);
}
