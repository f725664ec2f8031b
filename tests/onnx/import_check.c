// tests/onnx/import_check.c — `dlcc import` must never write a .dlg that `dlcc check` rejects.
// For every model of ONNX's test data (Debian's libonnx-testdata: node, simple,
// pytorch-operator, pytorch-converted) that the importer accepts, with initializers as params
// and as consts, the module goes the way `dlcc import` and `dlcc check` send it: printed, parsed
// back, shapes inferred, verified; and the printed text must be a fixed point (print(parse(t))
// == t, the canonical-layout promise). A model the importer refuses is fine (that refusal is the
// importer's answer). One that imports but fails shape inference or the verifier is refused by
// `dlcc import` itself, which runs that check before writing (listed as "check-refused": the
// importer does not check shapes, e.g. an Add of shapes that do not broadcast). An accepted
// model whose printed text does not parse back, or not to the same text, is a MISMATCH.
//
// Usage: onnx_import_check [--verbose] [DATA_DIR]; exit 1 on any mismatch, 77 when the data is
// not installed. Last line: "N accepted, N refused, N check-refused, N mismatches".
#include "dl_fe.h"
#include "dl_pass.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool verbose;
static int n_ok, n_refused, n_check_refused, n_bad;

static void first_msg(const dl_diags *d, char *buf, size_t size) {
    snprintf(buf, size, "%s", dl_diags_count(d) ? dl_diags_get(d, 0)->msg : "(no diagnostic)");
    for (char *p = buf; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
}

static void check_model(const char *path, bool consts) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        printf("MISMATCH %s: out of memory\n", path);
        n_bad++;
        return;
    }
    dl_ir_module *m = NULL, *m2 = NULL;
    char *text = NULL, *text2 = NULL;
    const char *stage = "import";
    char msg[512];
    dl_status st = dl_fe_import_onnx_shaped(path, consts, dl_pass_shape_node, d, &m);
    if (st != DL_OK) {
        n_refused++;
        if (verbose) {
            first_msg(d, msg, sizeof msg);
            printf("refused %s%s: %s\n", path, consts ? " (--consts)" : "", msg);
        }
        goto out;
    }
    stage = "print";
    if ((st = dl_ir_print(m, &text)) != DL_OK) {
        goto bad;
    }
    stage = "parse";
    if ((st = dl_fe_parse("imported.dlg", text, strlen(text), d, &m2)) != DL_OK) {
        goto bad;
    }
    stage = "print of the parsed text";
    if ((st = dl_ir_print(m2, &text2)) != DL_OK) {
        goto bad;
    }
    if (strcmp(text, text2) != 0) {
        stage = "round trip (print(parse(text)) differs from text)";
        st = DL_ERR_PARSE;
        goto bad;
    }
    stage = "shape";
    st = dl_pass_shape(m2, d);
    if (st == DL_OK) {
        stage = "verify";
        st = dl_ir_verify(m2, d);
    }
    if (st != DL_OK) {
        first_msg(d, msg, sizeof msg);
        printf("check-refused %s%s: %s: %s\n", path, consts ? " (--consts)" : "", stage, msg);
        n_check_refused++;
        goto out;
    }
    n_ok++;
    goto out;
bad:
    first_msg(d, msg, sizeof msg);
    printf("MISMATCH %s%s: %s: %s (%s)\n", path, consts ? " (--consts)" : "", stage,
           dl_status_str(st), msg);
    if (verbose && text) {
        printf("--- printed text:\n%s---\n", text);
    }
    n_bad++;
out:
    free(text);
    free(text2);
    dl_ir_module_destroy(m);
    dl_ir_module_destroy(m2);
    dl_diags_destroy(d);
}

static int name_cmp(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *e) {
    return e->d_name[0] != '.';
}

static void run_set(const char *dir) {
    struct dirent **cases = NULL;
    int n = scandir(dir, &cases, not_hidden, name_cmp);
    for (int i = 0; i < n; i++) {
        char path[2048];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, cases[i]->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            check_model(path, false);
            check_model(path, true);
        }
        free(cases[i]);
    }
    free(cases);
}

int main(int argc, char **argv) {
    const char *root = DL_ONNX_DATA_ROOT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            verbose = true;
        } else {
            root = argv[i];
        }
    }
    static const char *const sets[] = {"node", "simple", "pytorch-operator", "pytorch-converted"};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/node", root);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        printf("ONNX test data not found at %s (install libonnx-testdata): skipped\n", root);
        return 77;
    }
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, sets[i]);
        run_set(dir);
    }
    printf("%d accepted, %d refused, %d check-refused, %d mismatches\n", n_ok, n_refused,
           n_check_refused, n_bad);
    return n_bad ? 1 : 0;
}
