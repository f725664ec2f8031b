// tests/driver/test_driver.c — the compile-or-fetch API (driver/dlcc.h) and loading by key
// (dlrt_model_load_cached): key stability (names of intermediates, comments, layout and
// train-block hyper-parameter values do not count) and sensitivity (attributes, dims, dtypes,
// interface names, opt level, CPU, the train step's structure), miss-then-hit with identical
// bytes, a hit that takes another .dlg's hyper-parameter values, --no-cache writing nothing, and
// an artifact loaded from the cache by its key that runs.
//
// Every test uses a private cache directory under a fresh temporary directory (DLCC_CACHE_DIR
// is pointed there too, so nothing can reach the user's cache).
#include "dl_test.h"
#include "dlcc.h"
#include "dlrt.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The base model of the key tests: dims, an attribute, an optimizer, named interface.
static const char base_src[] = "model k\n"
                               "dim N = 4\n"
                               "input  x : float[N, 8]\n"
                               "input  t : int64[N]\n"
                               "param  w : float[8, 3] = glorot_uniform(seed = 1)\n"
                               "h    = MatMul (x, w)\n"
                               "p    = Softmax <axis = -1> (h)\n"
                               "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (h, t)\n"
                               "output p\n"
                               "output loss\n"
                               "train loss {\n"
                               "  optimizer = adam <lr = 0.001>\n"
                               "}\n";

static char work_dir[256];

static const char *work(void) {
    if (!work_dir[0]) {
        snprintf(work_dir, sizeof work_dir, "/tmp/dl_test_driver_XXXXXX");
        if (!mkdtemp(work_dir)) {
            abort();
        }
        char cache[300];
        snprintf(cache, sizeof cache, "%s/env-cache", work_dir);
        setenv("DLCC_CACHE_DIR", cache, 1);
    }
    return work_dir;
}

// Writes `text` to WORK/name and returns the path (static buffer per call site is not needed:
// the caller copies).
static void write_model(const char *name, const char *text, char *path, size_t size) {
    snprintf(path, size, "%s/%s", work(), name);
    FILE *f = fopen(path, "w");
    if (!f) {
        abort();
    }
    fputs(text, f);
    fclose(f);
}

// The key of `text` under `o` (binds included); false if the model does not load.
static bool key_of(const char *text, const dlcc_options *o, dl_hash128 *out) {
    char path[512];
    write_model("key.dlg", text, path, sizeof path);
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    dl_ir_module *m = NULL;
    bool ok = dlcc_load_module(path, o, d, &m) == DL_OK && dlcc_key(m, o, out, NULL) == DL_OK;
    if (!ok) {
        char *txt = NULL;
        if (dl_diags_render(d, &txt) == DL_OK && txt) {
            fprintf(stderr, "%s", txt);
        }
        free(txt);
    }
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

// base_src with the first occurrence of `from` replaced by `to`.
static char *variant(const char *from, const char *to) {
    const char *at = strstr(base_src, from);
    if (!at) {
        abort();
    }
    size_t n = strlen(base_src) + strlen(to) + 1;
    char *s = malloc(n);
    if (!s) {
        abort();
    }
    size_t pre = (size_t)(at - base_src);
    memcpy(s, base_src, pre);
    strcpy(s + pre, to);
    strcat(s, at + strlen(from));
    return s;
}

// 0: same key as the base model, 1: different, -1: did not load.
static int differs(const char *from, const char *to, const dlcc_options *o) {
    dlcc_options def;
    dlcc_options_init(&def);
    dl_hash128 a, b;
    char *s = variant(from, to);
    int r = -1;
    if (key_of(base_src, &def, &a) && key_of(s, o ? o : &def, &b)) {
        r = dl_hash128_eq(a, b) ? 0 : 1;
    }
    free(s);
    return r;
}

DL_TEST(key_is_stable) {
    dlcc_options o;
    dlcc_options_init(&o);
    dl_hash128 a, b;
    dlcc_key_part pa[DLCC_KEY_PARTS], pb[DLCC_KEY_PARTS];
    DL_CHECK(key_of(base_src, &o, &a));
    DL_CHECK(key_of(base_src, &o, &b));
    DL_CHECK(dl_hash128_eq(a, b));
    char path[512];
    write_model("parts.dlg", base_src, path, sizeof path);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_module *m = NULL;
    DL_CHECK_OK(dlcc_load_module(path, &o, d, &m));
    DL_CHECK_OK(dlcc_key(m, &o, &a, pa));
    DL_CHECK_OK(dlcc_key(m, &o, &b, pb));
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    static const char *const names[] = {"ir", "dims", "options", "target", "format", "compiler"};
    for (int i = 0; i < DLCC_KEY_PARTS; i++) {
        DL_CHECK_STR_EQ(pa[i].name, names[i]);
        DL_CHECK(dl_hash128_eq(pa[i].hash, pb[i].hash));
    }
    char hex[33];
    dl_hash128_hex(a, hex);
    DL_CHECK_EQ_I64(strlen(hex), 32);
    const char *v = dlcc_version_string();
    DL_CHECK(strncmp(v, "dlcc ", 5) == 0 && strstr(v, " LLVM ") != NULL);
}

DL_TEST(key_ignores_layout_and_names) {
    DL_CHECK_EQ_I64(differs("h    = MatMul (x, w)\np    = Softmax <axis = -1> (h)\n"
                            "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (h, t)",
                            "hidden = MatMul (x, w)\np = Softmax <axis = -1> (hidden)\n"
                            "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (hidden, t)",
                            NULL),
                    0);
    DL_CHECK_EQ_I64(differs("dim N = 4\n", "# a comment\ndim N = 4   # trailing\n\n", NULL), 0);
    DL_CHECK_EQ_I64(differs("h    = MatMul (x, w)", "h=MatMul(x,w)", NULL), 0);
}

// Hyper-parameter values are session values (the compiled step reads them from its hyper
// buffer), so they are not in the key: a learning-rate sweep compiles once. The driver writes
// each .dlg's values into the artifact it hands out (compile_hit_takes_the_dlg_values).
DL_TEST(key_ignores_hyperparameter_values) {
    DL_CHECK_EQ_I64(differs("lr = 0.001", "lr = 0.01", NULL), 0);
    DL_CHECK_EQ_I64(differs("lr = 0.001", "lr = 0.5, beta1 = 0.8, beta2 = 0.99, eps = 1e-6", NULL),
                    0);
    DL_CHECK_EQ_I64(differs("lr = 0.001", "lr = 0.001, weight_decay = 0.1", NULL), 0);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  clip_norm = 2.0\n", NULL),
                    1);
    // The values of the clip norm and of the loss scale are session values too.
    char *a = variant("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  clip_norm = 1.0\n"
                                             "  loss_scale = dynamic <init = 1024, growth = 4>\n");
    char *b =
        variant("adam <lr = 0.001>\n", "adam <lr = 0.3>\n  clip_norm = 5.0\n"
                                       "  loss_scale = dynamic <backoff = 0.25, interval = 7>\n");
    dlcc_options o;
    dlcc_options_init(&o);
    dl_hash128 ka, kb;
    DL_CHECK(key_of(a, &o, &ka) && key_of(b, &o, &kb) && dl_hash128_eq(ka, kb));
    free(a);
    free(b);
}

// What decides the compiled step's structure or state is in the key.
DL_TEST(key_sees_train_structure) {
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>", "adamw <lr = 0.001>", NULL), 1);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>", "adam <lr = 0.001, amsgrad = 1>", NULL), 1);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>", "sgd <lr = 0.001>", NULL), 1);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  accumulate = 2\n", NULL),
                    1);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  loss_scale = 128\n", NULL),
                    1);
    DL_CHECK_EQ_I64(
        differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  loss_scale = dynamic\n", NULL), 1);
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  freeze = [w]\n", NULL), 1);
    DL_CHECK_EQ_I64(
        differs("adam <lr = 0.001>\n", "adam <lr = 0.001>\n  precision = bfloat16\n", NULL), 1);
    // Momentum adds a momentum buffer per param: zero or not is structural, its value is not.
    DL_CHECK_EQ_I64(differs("adam <lr = 0.001>", "sgd <lr = 0.001, momentum = 0.9>", NULL), 1);
    char *m1 = variant("adam <lr = 0.001>", "sgd <lr = 0.001, momentum = 0.9>");
    char *m2 = variant("adam <lr = 0.001>", "sgd <lr = 0.02, momentum = 0.5, dampening = 0.1>");
    char *m0 = variant("adam <lr = 0.001>", "sgd <lr = 0.001>");
    dlcc_options o;
    dlcc_options_init(&o);
    dl_hash128 k0, k1, k2;
    DL_CHECK(key_of(m0, &o, &k0) && key_of(m1, &o, &k1) && key_of(m2, &o, &k2));
    DL_CHECK(dl_hash128_eq(k1, k2) && !dl_hash128_eq(k0, k1));
    free(m0);
    free(m1);
    free(m2);
}

DL_TEST(key_sees_what_changes_code) {
    DL_CHECK_EQ_I64(differs("reduction = \"mean\"", "reduction = \"sum\"", NULL), 1);
    DL_CHECK_EQ_I64(differs("dim N = 4", "dim N = 5", NULL), 1);
    DL_CHECK_EQ_I64(differs("input  t : int64[N]", "input  t : int32[N]", NULL), 1);
    DL_CHECK_EQ_I64(differs("seed = 1", "seed = 2", NULL), 1);
    DL_CHECK_EQ_I64(differs("output p\n", "", NULL), 1);
    dlcc_options o;
    dlcc_options_init(&o);
    dlcc_bind bind = {"N", 6};
    o.binds = &bind;
    o.n_binds = 1;
    DL_CHECK_EQ_I64(differs("", "", &o), 1); // -D N=6
    dlcc_options_init(&o);
    o.cg.opt_level = 2;
    DL_CHECK_EQ_I64(differs("", "", &o), 1);
    dlcc_options_init(&o);
    o.cg.cpu = "x86-64-v2";
    DL_CHECK_EQ_I64(differs("", "", &o), 1);
    dlcc_options_init(&o);
    o.cg.features = "-avx512f";
    DL_CHECK_EQ_I64(differs("", "", &o), 1);
    // Naming the default target gives the same code: the same key (the target's own key part).
    dlcc_options_init(&o);
    o.cg.target = "x86-64";
    DL_CHECK_EQ_I64(differs("", "", &o), 0);
    // A dim bound with -D to its own default value gives the same code: the same key.
    dlcc_options_init(&o);
    bind.value = 4;
    o.binds = &bind;
    o.n_binds = 1;
    DL_CHECK_EQ_I64(differs("", "", &o), 0);
}

// Targets: x86-64 is the default; cuda:sm_XX (and plain cuda: sm_80) is the NVPTX target, its
// GPU named in the target (a --cpu is refused, as is an unknown GPU); anything else is an
// unknown target. The GPU is part of the target's key.
DL_TEST(targets_are_listed_and_checked) {
    size_t n = 0;
    const dl_cg_target_info *t = dl_cg_target_list(&n);
    DL_CHECK(n >= 2 && strcmp(t[0].name, "x86-64") == 0 && t[0].is_built);
    DL_CHECK(strcmp(t[1].name, "cuda:sm_XX") == 0 && t[1].is_built);
    dl_cg_options o;
    dl_cg_options_init(&o);
    char err[256];
    o.target = "x86-64";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_OK);
    o.target = "cuda:sm_80";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_OK);
    char *k80 = dl_cg_target_key(&o);
    o.target = "cuda:sm_90";
    char *k90 = dl_cg_target_key(&o);
    DL_CHECK(k80 && k90 && strcmp(k80, k90) != 0 && strstr(k90, "sm_90") != NULL);
    free(k80);
    free(k90);
    o.target = "cuda";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_OK);
    char desc[128];
    dl_cg_target_describe(&o, desc, sizeof desc);
    DL_CHECK_STR_EQ(desc, "nvptx64-nvidia-cuda/sm_80");
    o.target = "cuda:sm_99";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(err, "unknown GPU 'sm_99'") != NULL);
    o.target = "cuda:sm_80";
    o.cpu = "znver3";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(err, "does not apply") != NULL);
    o.cpu = NULL;
    o.target = "arm64";
    DL_CHECK_EQ_I64(dl_cg_options_check(&o, err, sizeof err), DL_ERR_INVALID_ARG);
    DL_CHECK(strstr(err, "unknown target 'arm64'") != NULL);
}

DL_TEST(dtype_and_interface_names_change_the_key) {
    dlcc_options o;
    dlcc_options_init(&o);
    dl_hash128 a, b;
    DL_CHECK(key_of("model e\ninput x : float[4]\ny = Relu (x)\noutput y\n", &o, &a));
    DL_CHECK(key_of("model e\ninput x : float16[4]\ny = Relu (x)\noutput y\n", &o, &b));
    DL_CHECK(!dl_hash128_eq(a, b));
    // Interface names count (input and output), the intermediate's does not.
    DL_CHECK(key_of("model e\ninput u : float[4]\ny = Relu (u)\noutput y\n", &o, &b));
    DL_CHECK(!dl_hash128_eq(a, b));
    DL_CHECK(key_of("model e\ninput x : float[4]\nv = Relu (x)\noutput v\n", &o, &b));
    DL_CHECK(!dl_hash128_eq(a, b));
    DL_CHECK(
        key_of("model e\ninput x : float[4]\nt = Relu (x)\ny = Identity (t)\noutput y\n", &o, &b));
    DL_CHECK(!dl_hash128_eq(a, b)); // one more node
}

DL_TEST(unknown_dim_lists_the_dims) {
    char path[512];
    write_model("dims.dlg", base_src, path, sizeof path);
    dlcc_options o;
    dlcc_options_init(&o);
    dlcc_bind bind = {"M", 3};
    o.binds = &bind;
    o.n_binds = 1;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dl_ir_module *m = NULL;
    dl_status st = dlcc_load_module(path, &o, d, &m);
    DL_CHECK(st != DL_OK && m == NULL);
    DL_CHECK(dl_diags_count(d) >= 1);
    DL_CHECK(strstr(dl_diags_get(d, 0)->msg, "no dim named 'M' (dims: N)") != NULL);
    dl_diags_destroy(d);
}

static size_t dir_entries(const char *path) {
    DIR *dir = opendir(path);
    size_t n = 0;
    if (!dir) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(dir));) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(dir);
    return n;
}

static const char small_src[] = "model small\n"
                                "dim N = 2\n"
                                "input  x : float[N, 3]\n"
                                "param  b : float[3] = zeros\n"
                                "y = Add (x, b)\n"
                                "z = Relu (y)\n"
                                "output z\n";

DL_TEST(compile_miss_then_hit_same_bytes) {
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-hit", work());
    dlcc_options o;
    dlcc_options_init(&o);
    o.cache_dir = cache;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result r1, r2;
    DL_CHECK_OK(dlcc_compile_source("small.dlg", small_src, strlen(small_src), &o, d, &r1));
    DL_CHECK_OK(dlcc_compile_source("small.dlg", small_src, strlen(small_src), &o, d, &r2));
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    DL_CHECK(r1.cache_used && !r1.cache_hit && r1.compile_ms > 0);
    DL_CHECK(r2.cache_used && r2.cache_hit && r2.compile_ms == 0);
    DL_CHECK(dl_hash128_eq(r1.key, r2.key));
    DL_CHECK_STR_EQ(r2.model, "small");
    DL_CHECK(r1.artifact_len == r2.artifact_len && r1.artifact_len > 0);
    DL_CHECK(memcmp(r1.artifact, r2.artifact, r1.artifact_len) == 0);
    DL_CHECK(r2.total_ms < r1.total_ms);
    free(r1.artifact);
    free(r2.artifact);
    dl_diags_destroy(d);
}

// Two .dlg files that differ only in hyper-parameter values share one cache entry; the hit hands
// out the second file's values, byte for byte the artifact a fresh compile of it gives (so no
// value is compiled into code), and each session starts from its own file's values.
static const char hp_src_a[] = "model hp\n"
                               "input  x : float[4, 8]\n"
                               "input  t : int64[4]\n"
                               "param  w : float[8, 3] = glorot_uniform(seed = 1)\n"
                               "h    = MatMul (x, w)\n"
                               "loss = SoftmaxCrossEntropyLoss (h, t)\n"
                               "output h\n"
                               "train loss {\n"
                               "  optimizer = sgd <lr = 0.1, momentum = 0.9>\n"
                               "  clip_norm = 1.0\n"
                               "  loss_scale = dynamic <init = 1024>\n"
                               "}\n";
static const char hp_src_b[] = "model hp\n"
                               "input  x : float[4, 8]\n"
                               "input  t : int64[4]\n"
                               "param  w : float[8, 3] = glorot_uniform(seed = 1)\n"
                               "h    = MatMul (x, w)\n"
                               "loss = SoftmaxCrossEntropyLoss (h, t)\n"
                               "output h\n"
                               "train loss {\n"
                               "  optimizer = sgd <lr = 0.5, momentum = 0.5, dampening = 0.25>\n"
                               "  clip_norm = 3.0\n"
                               "  loss_scale = dynamic <init = 256, growth = 3, backoff = 0.25, "
                               "interval = 5>\n"
                               "}\n";

static bool session_hparams(const dlcc_result *r, const char *const *names, const double *want,
                            size_t n) {
    dlrt_model *m = NULL;
    dlrt_session *s = NULL;
    bool ok = dlrt_model_load_memory(r->artifact, r->artifact_len, &m) == DLRT_OK &&
              dlrt_session_create(m, &s) == DLRT_OK;
    for (size_t i = 0; ok && i < n; i++) {
        double v = -1;
        ok = dlrt_session_get_hparam(s, names[i], &v) == DLRT_OK && v == want[i];
        if (!ok) {
            fprintf(stderr, "hparam %s = %.17g, want %.17g\n", names[i], v, want[i]);
        }
    }
    dlrt_session_destroy(s);
    dlrt_model_release(m);
    return ok;
}

DL_TEST(compile_hit_takes_the_dlg_values) {
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-hparams", work());
    dlcc_options o;
    dlcc_options_init(&o);
    o.cache_dir = cache;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result ra, rb, rf;
    DL_CHECK_OK(dlcc_compile_source("a.dlg", hp_src_a, strlen(hp_src_a), &o, d, &ra));
    DL_CHECK_OK(dlcc_compile_source("b.dlg", hp_src_b, strlen(hp_src_b), &o, d, &rb));
    o.use_cache = false;
    DL_CHECK_OK(dlcc_compile_source("b.dlg", hp_src_b, strlen(hp_src_b), &o, d, &rf));
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    DL_CHECK(!ra.cache_hit && rb.cache_hit && dl_hash128_eq(ra.key, rb.key));
    DL_CHECK(ra.artifact_len == rb.artifact_len &&
             memcmp(ra.artifact, rb.artifact, ra.artifact_len) != 0);
    DL_CHECK(rb.artifact_len == rf.artifact_len &&
             memcmp(rb.artifact, rf.artifact, rb.artifact_len) == 0);
    static const char *const names[] = {"lr",         "momentum", "dampening", "clip_norm",
                                        "loss_scale", "growth",   "backoff",   "interval"};
    static const double want_a[] = {0.1, 0.9, 0, 1.0, 1024, 2, 0.5, 2000};
    static const double want_b[] = {0.5, 0.5, 0.25, 3.0, 256, 3, 0.25, 5};
    DL_CHECK(session_hparams(&ra, names, want_a, DL_ARRAY_LEN(names)));
    DL_CHECK(session_hparams(&rb, names, want_b, DL_ARRAY_LEN(names)));
    // The stored entry is untouched by the hit: A again gets A's values, from the cache.
    dlcc_result ra2;
    o.use_cache = true;
    DL_CHECK_OK(dlcc_compile_source("a.dlg", hp_src_a, strlen(hp_src_a), &o, d, &ra2));
    DL_CHECK(ra2.cache_hit && ra2.artifact_len == ra.artifact_len &&
             memcmp(ra2.artifact, ra.artifact, ra.artifact_len) == 0);
    free(ra.artifact);
    free(rb.artifact);
    free(rf.artifact);
    free(ra2.artifact);
    dl_diags_destroy(d);
}

// Every optimizer's values stay out of the code: after a hit with other values the artifact is
// byte-identical to a fresh compile of the .dlg.
DL_TEST(compile_hit_equals_a_fresh_compile_for_every_optimizer) {
    static const char *const pairs[][2] = {
        {"adam <lr = 0.01>", "adam <lr = 0.2, beta1 = 0.5, beta2 = 0.9, eps = 1e-3>"},
        {"adam <lr = 0.01, amsgrad = 1, weight_decay = 0.1>",
         "adam <lr = 0.03, amsgrad = 1, weight_decay = 0>"},
        {"adamw <lr = 0.01>", "adamw <lr = 0.02, weight_decay = 0.3, beta1 = 0.7>"},
        {"rmsprop <lr = 0.01, centered = 1, momentum = 0.9>",
         "rmsprop <lr = 0.5, centered = 1, momentum = 0.1, alpha = 0.5, eps = 0.1>"},
        {"sgd <lr = 0.1, momentum = 0.9, nesterov = 1>",
         "sgd <lr = 0.3, momentum = 0.2, nesterov = 1, weight_decay = 0.01>"},
    };
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-optims", work());
    for (size_t i = 0; i < DL_ARRAY_LEN(pairs); i++) {
        char src[2][1024];
        for (int k = 0; k < 2; k++) {
            snprintf(src[k], sizeof src[k],
                     "model opt\ninput x : float[4, 8]\ninput t : int64[4]\n"
                     "param w : float[8, 3] = glorot_uniform(seed = 1)\n"
                     "h = MatMul (x, w)\nloss = SoftmaxCrossEntropyLoss (h, t)\noutput h\n"
                     "train loss {\n optimizer = %s\n loss_scale = %s\n}\n",
                     pairs[i][k], k ? "512" : "64");
        }
        dlcc_options o;
        dlcc_options_init(&o);
        o.cache_dir = cache;
        dl_diags *d = NULL;
        DL_CHECK_OK(dl_diags_create(&d));
        dlcc_result ra, rb, rf;
        DL_CHECK_OK(dlcc_compile_source("a.dlg", src[0], strlen(src[0]), &o, d, &ra));
        DL_CHECK_OK(dlcc_compile_source("b.dlg", src[1], strlen(src[1]), &o, d, &rb));
        o.use_cache = false;
        DL_CHECK_OK(dlcc_compile_source("b.dlg", src[1], strlen(src[1]), &o, d, &rf));
        DL_CHECK_EQ_I64(dl_diags_count(d), 0);
        DL_CHECK(rb.cache_hit && dl_hash128_eq(ra.key, rb.key));
        DL_CHECK(rb.artifact_len == rf.artifact_len &&
                 memcmp(rb.artifact, rf.artifact, rb.artifact_len) == 0);
        static const char *const names[] = {"loss_scale"};
        static const double want[] = {512};
        DL_CHECK(session_hparams(&rb, names, want, 1));
        free(ra.artifact);
        free(rb.artifact);
        free(rf.artifact);
        dl_diags_destroy(d);
    }
}

DL_TEST(no_cache_writes_nothing) {
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-off", work());
    DL_CHECK(mkdir(cache, 0700) == 0);
    dlcc_options o;
    dlcc_options_init(&o);
    o.cache_dir = cache;
    o.use_cache = false;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result r;
    DL_CHECK_OK(dlcc_compile_source("small.dlg", small_src, strlen(small_src), &o, d, &r));
    DL_CHECK(!r.cache_used && !r.cache_hit && r.artifact_len > 0);
    DL_CHECK_EQ_I64(dl_diags_count(d), 0);
    DL_CHECK_EQ_I64(dir_entries(cache), 0);
    free(r.artifact);
    dl_diags_destroy(d);
}

DL_TEST(unusable_cache_is_one_warning) {
    // A cache "directory" below a regular file: it can never be created, even as root.
    char file[512], cache[600];
    snprintf(file, sizeof file, "%s/plain-file", work());
    FILE *f = fopen(file, "w");
    DL_CHECK(f != NULL);
    fclose(f);
    snprintf(cache, sizeof cache, "%s/sub", file);
    dlcc_options o;
    dlcc_options_init(&o);
    o.cache_dir = cache;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result r;
    DL_CHECK_OK(dlcc_compile_source("small.dlg", small_src, strlen(small_src), &o, d, &r));
    DL_CHECK(!r.cache_used && r.artifact_len > 0);
    DL_CHECK_EQ_I64(dl_diags_count(d), 1);
    DL_CHECK_EQ_I64(dl_diags_error_count(d), 0);
    DL_CHECK(strstr(dl_diags_get(d, 0)->msg, "cache unavailable (") != NULL);
    DL_CHECK(strstr(dl_diags_get(d, 0)->msg, "; compiling without it") != NULL);
    free(r.artifact);
    dl_diags_destroy(d);
}

DL_TEST(model_errors_are_errors) {
    (void)work(); // points DLCC_CACHE_DIR at the private directory
    dlcc_options o;
    dlcc_options_init(&o);
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result r;
    const char *bad = "model bad\ninput x : float[2, 3]\ny = MatMul (x, x)\noutput y\n";
    DL_CHECK(dlcc_compile_source("bad.dlg", bad, strlen(bad), &o, d, &r) != DL_OK);
    DL_CHECK(r.artifact == NULL);
    DL_CHECK(dl_diags_error_count(d) >= 1);
    dl_diags_destroy(d);
}

DL_TEST(load_cached_by_key_runs) {
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-load", work());
    dlcc_options o;
    dlcc_options_init(&o);
    o.cache_dir = cache;
    dl_diags *d = NULL;
    DL_CHECK_OK(dl_diags_create(&d));
    dlcc_result r;
    DL_CHECK_OK(dlcc_compile_source("small.dlg", small_src, strlen(small_src), &o, d, &r));
    free(r.artifact);
    dl_diags_destroy(d);
    char hex[33];
    dl_hash128_hex(r.key, hex);

    dlrt_model *m = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_cached(cache, hex, &m), DLRT_OK);
    DL_CHECK_STR_EQ(dlrt_model_name(m), "small");
    dlrt_session *s = NULL;
    DL_CHECK_EQ_I64(dlrt_session_create(m, &s), DLRT_OK);
    const float x[6] = {-1, 2, -3, 4, -5, 6};
    DL_CHECK_EQ_I64(dlrt_session_set_input(s, "x", x, sizeof x), DLRT_OK);
    DL_CHECK_EQ_I64(dlrt_session_infer(s), DLRT_OK);
    const void *out = NULL;
    DL_CHECK_EQ_I64(dlrt_session_output(s, "z", &out, NULL), DLRT_OK);
    const float *z = out;
    const float want[6] = {0, 2, 0, 4, 0, 6};
    for (int i = 0; i < 6; i++) {
        DL_CHECK_NEAR(z[i], want[i], 0, 0);
    }
    dlrt_session_destroy(s);
    dlrt_model_release(m);

    // An unknown key, a malformed key, a cache that does not exist.
    char other[33];
    memcpy(other, hex, sizeof other);
    other[0] = other[0] == '0' ? '1' : '0';
    m = NULL;
    DL_CHECK_EQ_I64(dlrt_model_load_cached(cache, other, &m), DLRT_ERR_INVALID_ARG);
    DL_CHECK(m == NULL);
    DL_CHECK(strstr(dlrt_last_error(), "no artifact with key") != NULL);
    DL_CHECK(strstr(dlrt_last_error(), cache) != NULL);
    DL_CHECK_EQ_I64(dlrt_model_load_cached(cache, "xyz", &m), DLRT_ERR_INVALID_ARG);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-cache", work());
    DL_CHECK_EQ_I64(dlrt_model_load_cached(missing, hex, &m), DLRT_ERR_IO);
    DL_CHECK(dlrt_last_error()[0] != 0);
    DL_CHECK_EQ_I64(dir_entries(work()) > 0, 1);
    struct stat sb;
    DL_CHECK(stat(missing, &sb) != 0); // read-only: never created
}

DL_TEST_MAIN()
