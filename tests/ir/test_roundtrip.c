// tests/ir/test_roundtrip.c — printer/parser round trip over every .dlg file in the source tree.
//
// For each file under samples/ and tests/ (sorted, so the order is stable): parse, print, parse
// the printout, print again; both printouts must be identical (fmt is idempotent), both modules
// must verify, and their canonical forms must be identical (printing loses nothing that affects
// results). Error-case inputs are skipped: everything under tests/golden/errors/ and any file
// whose first line contains "EXPECT-ERROR". Files under tests/fuzz/ (a fuzzer's seed corpus,
// malformed on purpose) are skipped when their first parse fails; those that parse must still
// round-trip. DL_SOURCE_DIR comes from tests/ir/tests.cmake.
#include "dl_fe.h"
#include "dl_ir.h"
#include "dl_test.h"

#include <dirent.h>
#include <sys/stat.h>

#ifndef DL_SOURCE_DIR
#    error "DL_SOURCE_DIR must be defined by the build"
#endif

typedef DL_VEC(char *) path_vec;

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void walk(const char *dir, path_vec *out) {
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            break;
        }
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) {
            free(p);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (!ends_with(p, "/tests/golden/errors")) {
                walk(p, out);
            }
            free(p);
        } else if (S_ISREG(st.st_mode) && ends_with(p, ".dlg") && DL_VEC_PUSH(out, p)) {
            // kept
        } else {
            free(p);
        }
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool first_line_expects_error(const char *text) {
    const char *nl = strchr(text, '\n');
    size_t n = nl ? (size_t)(nl - text) : strlen(text);
    const char *hit = strstr(text, "EXPECT-ERROR");
    return hit && (size_t)(hit - text) < n;
}

static void print_diags(const dl_diags *d) {
    char *r = NULL;
    if (dl_diags_render(d, &r) == DL_OK && r) {
        fprintf(stderr, "%s", r);
    }
    free(r);
}

// First differing line of two texts, for the failure message.
static void show_diff(const char *a, const char *b) {
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    const char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
    fprintf(stderr, "  first difference at line %d:\n  < %.*s\n  > %.*s\n", line,
            (int)(ea ? ea - la : (long)strlen(la)), la, (int)(eb ? eb - lb : (long)strlen(lb)), lb);
}

// Parses `text`; on failure reports the diagnostics unless `quiet`. Returns NULL on failure.
static dl_ir_module *parse(const char *name, const char *text, bool quiet) {
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return NULL;
    }
    if (dl_fe_parse(name, text, strlen(text), d, &m) != DL_OK || !m) {
        if (!quiet) {
            fprintf(stderr, "  parse of %s failed:\n", name);
            print_diags(d);
        }
        dl_ir_module_destroy(m);
        m = NULL;
    } else if (dl_ir_verify(m, d) != DL_OK) {
        fprintf(stderr, "  %s does not verify:\n", name);
        print_diags(d);
        dl_ir_module_destroy(m);
        m = NULL;
    }
    dl_diags_destroy(d);
    return m;
}

// One file through the round trip; true on success. *skipped is set for a fuzz seed that does
// not parse.
static bool roundtrip_one(const char *path, bool *skipped) {
    char *src = NULL, *p1 = NULL, *p2 = NULL, *c1 = NULL, *c2 = NULL;
    size_t len = 0, l1 = 0, l2 = 0;
    dl_ir_module *m1 = NULL, *m2 = NULL;
    bool ok = false;
    if (dl_read_file(path, &src, &len) != DL_OK) {
        fprintf(stderr, "  cannot read %s\n", path);
        goto out;
    }
    if (first_line_expects_error(src)) {
        ok = true;
        goto out;
    }
    bool is_fuzz_seed = strstr(path, "/tests/fuzz/") != NULL;
    if (!(m1 = parse(path, src, is_fuzz_seed))) {
        *skipped = ok = is_fuzz_seed;
        goto out;
    }
    if (dl_ir_print(m1, &p1) != DL_OK) {
        goto out;
    }
    if (!(m2 = parse("<printout>", p1, false))) {
        fprintf(stderr, "--- printout:\n%s", p1);
        goto out;
    }
    if (dl_ir_print(m2, &p2) != DL_OK) {
        goto out;
    }
    if (strcmp(p1, p2) != 0) {
        fprintf(stderr, "  fmt is not idempotent:\n");
        show_diff(p1, p2);
        goto out;
    }
    if (dl_ir_canonical(m1, 0, &c1, &l1) != DL_OK || dl_ir_canonical(m2, 0, &c2, &l2) != DL_OK) {
        goto out;
    }
    if (l1 != l2 || memcmp(c1, c2, l1) != 0) {
        fprintf(stderr, "  canonical forms differ after the round trip:\n");
        show_diff(c1, c2);
        goto out;
    }
    ok = true;
out:
    free(src);
    free(p1);
    free(p2);
    free(c1);
    free(c2);
    dl_ir_module_destroy(m1);
    dl_ir_module_destroy(m2);
    return ok;
}

DL_TEST(roundtrip_all_dlg_files) {
    path_vec files = {0};
    walk(DL_SOURCE_DIR "/samples", &files);
    walk(DL_SOURCE_DIR "/tests", &files);
    qsort(files.data, files.len, sizeof(char *), cmp_str);
    size_t n_fail = 0;
    for (size_t i = 0; i < files.len; i++) {
        bool skipped = false;
        bool ok = roundtrip_one(files.data[i], &skipped);
        printf("%s %s\n",
               skipped ? "  skip"
               : ok    ? "  ok  "
                       : "  FAIL",
               files.data[i] + strlen(DL_SOURCE_DIR) + 1);
        n_fail += !ok;
    }
    size_t n_files = files.len;
    for (size_t i = 0; i < files.len; i++) {
        free(files.data[i]);
    }
    free(files.data);
    DL_CHECK(n_files > 0);
    DL_CHECK_EQ_I64(n_fail, 0);
}

// ---------------------------------------------------------------------------------------------
// Canonical form of parsed text: layout, comments and intermediate names do not matter; what
// changes results does.

static char *canon_text(const char *text, unsigned flags) {
    dl_ir_module *m = parse("<text>", text, false);
    char *c = NULL;
    size_t len;
    if (m && dl_ir_canonical(m, flags, &c, &len) != DL_OK) {
        c = NULL;
    }
    dl_ir_module_destroy(m);
    return c;
}

static const char base_text[] = "model m\n"
                                "dim N = 8\n"
                                "input x : float[N, 4]\n"
                                "input y : int64[N]\n"
                                "param w : float[4, 3] = glorot_uniform(seed = 1)\n"
                                "param b : float[3] = zeros\n"
                                "h = Gemm <alpha = 1.0> (x, w, b)\n"
                                "p = Softmax (h)\n"
                                "loss = SoftmaxCrossEntropyLoss (h, y)\n"
                                "output p\n"
                                "output loss\n"
                                "train loss { optimizer = adam <lr = 1e-3> }\n";

DL_TEST(canon_text_invariance) {
    static const char *const same[] = {
        // whitespace, comments, blank lines, line continuation
        "# header\nmodel   m\n\ndim N=8\ninput x:float[N,4]   # features\ninput y : int64[N]\n"
        "param w : float[4,\n  3] = glorot_uniform(seed=1)\nparam b:float[3]=zeros\n\n"
        "# body\nh=Gemm<alpha=1.0>(x,w,b)\np = Softmax (h)\nloss = SoftmaxCrossEntropyLoss (h, y)\n"
        "output p\noutput loss\ntrain loss {\n  optimizer = adam <lr = 0.001>\n}\n# end\n",
        // intermediate renamed
        "model m\ndim N = 8\ninput x : float[N, 4]\ninput y : int64[N]\n"
        "param w : float[4, 3] = glorot_uniform(seed = 1)\nparam b : float[3] = zeros\n"
        "hidden_pre = Gemm <alpha = 1.0> (x, w, b)\np = Softmax (hidden_pre)\n"
        "loss = SoftmaxCrossEntropyLoss (hidden_pre, y)\noutput p\noutput loss\n"
        "train loss { optimizer = adam <lr = 1e-3> }\n",
        // explicit defaults, int for a float attribute, another statement interleaving
        "model m\ndim N = 8\ninput x : float[N, 4]\nparam w : float[4, 3] = glorot_uniform(seed = "
        "1)\n"
        "param b : float[3] = zeros\ninput y : int64[N]\n"
        "h = Gemm <alpha = 1, beta = 1.0, transA = 0> (x, w, b)\np = Softmax <axis = -1> (h)\n"
        "loss = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (h, y)\noutput p\noutput loss\n"
        "train loss { optimizer = adam <lr = 1e-3, beta1 = 0.9> }\n",
        // dims written as literals
        "model m\ndim N = 8\ninput x : float[8, 4]\ninput y : int64[8]\n"
        "param w : float[4, 3] = glorot_uniform(seed = 1)\nparam b : float[3] = zeros\n"
        "h = Gemm <alpha = 1.0> (x, w, b)\np = Softmax (h)\nloss = SoftmaxCrossEntropyLoss (h, y)\n"
        "output p\noutput loss\ntrain loss { optimizer = adam <lr = 1e-3> }\n",
    };
    char *c0 = canon_text(base_text, 0);
    DL_CHECK(c0 != NULL);
    for (size_t i = 0; i < DL_ARRAY_LEN(same); i++) {
        char *c = canon_text(same[i], 0);
        bool eq = c && strcmp(c, c0) == 0;
        if (!eq) {
            fprintf(stderr, "variant %zu differs\n", i);
            if (c) {
                show_diff(c0, c);
            }
        }
        free(c);
        DL_CHECK(eq);
    }
    free(c0);
}

// Replaces the first occurrence of `from` in `text` by `to` (heap string).
static char *edit_in(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    if (!at) {
        return NULL;
    }
    size_t pre = (size_t)(at - text), n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    if (s) {
        snprintf(s, n, "%.*s%s%s", (int)pre, text, to, at + strlen(from));
    }
    return s;
}

static char *edit(const char *from, const char *to) {
    return edit_in(base_text, from, to);
}

// Two edits in a row (a rename touches the definition and the use).
static char *edit2(const char *from, const char *to, const char *from2, const char *to2) {
    char *once = edit(from, to);
    char *twice = once ? edit_in(once, from2, to2) : NULL;
    free(once);
    return twice;
}

DL_TEST(canon_text_sensitivity) {
    static const char *const edits[][4] = {
        {"alpha = 1.0", "alpha = 0.5"},                                 // attribute value
        {"Softmax (h)", "Softmax <axis = 0> (h)"},                      // attribute vs default
        {"input x : float", "input x : float16"},                       // dtype
        {"dim N = 8", "dim N = 16"},                                    // dim value
        {"seed = 1", "seed = 2"},                                       // param seed
        {"glorot_uniform(seed = 1)", "glorot_uniform()"},               // derived seed
        {"input y :", "input labels :", "(h, y)", "(h, labels)"},       // input name (interface)
        {"param w :", "param weight :", "(x, w, b)", "(x, weight, b)"}, // param name
        {"output p\noutput loss", "output loss\noutput p"},             // output order
        {"adam <lr = 1e-3>", "adam <lr = 1e-2>"},                       // optimizer hyper-parameter
        {"adam <lr = 1e-3>", "adamw <lr = 1e-3>"},                      // optimizer
        {"param b : float[3] = zeros", "param b : float[3] = ones"},    // initialiser
        {"(x, w, b)", "(x, w)"},                                        // optional input present
    };
    char *c0 = canon_text(base_text, 0);
    DL_CHECK(c0 != NULL);
    for (size_t i = 0; i < DL_ARRAY_LEN(edits); i++) {
        char *text = edits[i][2] ? edit2(edits[i][0], edits[i][1], edits[i][2], edits[i][3])
                                 : edit(edits[i][0], edits[i][1]);
        DL_CHECK(text != NULL);
        char *c = canon_text(text, 0);
        bool ne = c && strcmp(c, c0) != 0;
        if (!ne) {
            fprintf(stderr, "edit %zu (%s -> %s) did not change the canonical form\n", i,
                    edits[i][0], edits[i][1]);
        }
        free(c);
        free(text);
        DL_CHECK(ne);
    }
    free(c0);
    // Hyper-parameter values drop out with DL_IR_CANON_NO_HYPERPARAMS; structure does not.
    char *lr2 = edit("adam <lr = 1e-3>", "adam <lr = 0.5, beta2 = 0.9, eps = 1e-6>");
    char *ams = edit("adam <lr = 1e-3>", "adam <lr = 1e-3, amsgrad = 1>");
    char *h0 = canon_text(base_text, DL_IR_CANON_NO_HYPERPARAMS);
    char *h1 = lr2 ? canon_text(lr2, DL_IR_CANON_NO_HYPERPARAMS) : NULL;
    char *h2 = ams ? canon_text(ams, DL_IR_CANON_NO_HYPERPARAMS) : NULL;
    DL_CHECK(h0 && h1 && h2);
    DL_CHECK_STR_EQ(h0, h1);
    DL_CHECK(strcmp(h0, h2) != 0);
    free(lr2);
    free(ams);
    free(h0);
    free(h1);
    free(h2);
}

// UnaryGrad's sub-op is typed inside (dl_ir_node_unary_grad_op) and stays the `op = "Name"`
// attribute in the text: it prints and parses back identically.
DL_TEST(unary_grad_op_roundtrip) {
    static const char text[] = "model m\n"
                               "input x : float[2, 3]\n"
                               "input dy : float[2, 3]\n"
                               "g = UnaryGrad <approximate = \"tanh\", op = \"Gelu\"> (dy, x)\n"
                               "h = UnaryGrad <alpha = 0.2, op = \"LeakyRelu\"> (dy, x)\n"
                               "output g\n"
                               "output h\n";
    dl_ir_module *m1 = parse("<text>", text, false);
    DL_CHECK(m1 != NULL);
    if (!m1) {
        return;
    }
    DL_CHECK_EQ_I64(dl_ir_node_unary_grad_op(m1->nodes.data[0]), DL_IR_OP_GELU);
    DL_CHECK_EQ_I64(dl_ir_node_unary_grad_op(m1->nodes.data[1]), DL_IR_OP_LEAKY_RELU);
    char *p1 = NULL, *p2 = NULL;
    DL_CHECK_OK(dl_ir_print(m1, &p1));
    DL_CHECK(p1 && strstr(p1, "op = \"Gelu\"") && strstr(p1, "op = \"LeakyRelu\""));
    dl_ir_module *m2 = p1 ? parse("<printout>", p1, false) : NULL;
    DL_CHECK(m2 != NULL);
    if (m2) {
        DL_CHECK_OK(dl_ir_print(m2, &p2));
        DL_CHECK(p2 && strcmp(p1, p2) == 0);
        DL_CHECK_EQ_I64(dl_ir_node_unary_grad_op(m2->nodes.data[0]), DL_IR_OP_GELU);
    }
    free(p1);
    free(p2);
    dl_ir_module_destroy(m1);
    dl_ir_module_destroy(m2);
    // A name that is no UnaryGrad sub-op (MatMul has its own rule) is refused by the parser.
    DL_CHECK(parse("<bad>",
                   "model m\ninput x : float[2]\ng = UnaryGrad <op = \"MatMul\"> (x, x)\n"
                   "output g\n",
                   true) == NULL);
}

DL_TEST_MAIN()
