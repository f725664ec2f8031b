// tests/onnx/conformance.c — runs the ONNX backend node tests (Debian's libonnx-testdata) through
// the whole front half of dlcc: import (shape-like graph inputs bound to their test data), print
// as .dlg, parse back, shape inference, reference evaluation, and comparison with the expected
// outputs (ONNX's backend tolerance: |got - want| <= atol + rtol * |want|, rtol 1e-3, atol 1e-7;
// NaN matches NaN; integers and bools exact).
//
// A case whose ops, dtypes or opset are outside our spec is "skipped (not applicable)"; one
// listed in exclusions.txt is skipped with its reason; every other case must pass. The last
// line is "N passed, N failed, N skipped"; the exit status is 1 if any case failed, 77 if the
// test data is not installed.
//
// With --backend cpu the reference evaluator is replaced by the compiled path: the module is
// compiled by dl_cg_compile (default options) and run through libdlrt (load from memory,
// session, set inputs, infer, outputs), and its outputs are compared with the same tolerance.
// A case whose model needs an op the cpu backend does not lower yet FAILS (it is applicable).
// Each case then runs in a forked child with a time limit, so a crashing or hanging kernel
// fails its case instead of ending the run (--no-fork turns that off, for a debugger).
//
// Usage: onnx_conformance [--verbose] [--only SUBSTRING] [--no-text] [--data DIR]
//                         [--exclusions FILE] [--backend cpu|ref] [--no-fork]
// DL_ONNX_NO_TEXT=1 in the environment has the effect of --no-text (skip print/parse).
#define _DEFAULT_SOURCE // MAP_ANONYMOUS
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dlrt.h"
#include "fe_onnx.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_IO 64

typedef struct exclusion {
    char *name;
    char *reason;
} exclusion;

typedef struct runner {
    const char *dir;
    bool verbose, no_text;
    bool use_cpu; // --backend cpu: compile and run through libdlrt instead of dl_ir_eval
    bool no_fork; // cpu only: run cases in this process
    const char *only;
    exclusion *excl;
    size_t n_excl;
    bool op_covered[DL_IR_OP_COUNT];
    int passed, failed, skipped_na, skipped_excl;
} runner;

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *xstrdup(const char *s) {
    char *r = malloc(strlen(s) + 1);
    if (!r) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return strcpy(r, s);
}

static void load_exclusions(runner *r, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "note: no exclusions file %s\n", path);
        return;
    }
    char line[1024];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        char *hash = strchr(p, '#');
        if (hash) {
            *hash = '\0';
        }
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        size_t n = strcspn(p, " \t\r\n");
        if (n == 0) {
            continue;
        }
        char *rest = p + n;
        if (*rest) {
            *rest++ = '\0';
        }
        while (*rest == ' ' || *rest == '\t') {
            rest++;
        }
        rest[strcspn(rest, "\r\n")] = '\0';
        size_t rl = strlen(rest);
        while (rl > 0 && (rest[rl - 1] == ' ' || rest[rl - 1] == '\t')) {
            rest[--rl] = '\0';
        }
        if (r->n_excl == cap) {
            cap = cap ? cap * 2 : 32;
            exclusion *ne = realloc(r->excl, cap * sizeof(exclusion));
            if (!ne) {
                exit(2);
            }
            r->excl = ne;
        }
        r->excl[r->n_excl].name = xstrdup(p);
        r->excl[r->n_excl].reason = xstrdup(rl ? rest : "(no reason given)");
        r->n_excl++;
    }
    fclose(f);
}

static const char *excluded(const runner *r, const char *name) {
    for (size_t i = 0; i < r->n_excl; i++) {
        if (strcmp(r->excl[i].name, name) == 0) {
            return r->excl[i].reason;
        }
    }
    return NULL;
}

// First error of a sink, flattened to one line, into buf.
static void first_diag(const dl_diags *d, char *buf, size_t size) {
    buf[0] = '\0';
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        const dl_diag_entry *e = dl_diags_get(d, i);
        if (e->sev == DL_SEV_ERROR) {
            snprintf(buf, size, "%s", e->msg);
            for (char *p = buf; *p; p++) {
                if (*p == '\n') {
                    *p = ' ';
                }
            }
            return;
        }
    }
    snprintf(buf, size, "(no diagnostic)");
}

static int name_cmp(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int case_filter(const struct dirent *e) {
    return strncmp(e->d_name, "test_", 5) == 0;
}

static int set_filter(const struct dirent *e) {
    return strncmp(e->d_name, "test_data_set_", 14) == 0;
}

// Reads <dir>/<prefix>_<k>.pb for k = 0.. while they exist. Returns the count or -1.
static int read_pbs(const char *dir, const char *prefix, dl_tensor *ts, dl_diags *d, char *why,
                    size_t why_size) {
    int n = 0;
    for (; n < MAX_IO; n++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s_%d.pb", dir, prefix, n);
        if (!is_file(p)) {
            break;
        }
        if (dl_fe__onnx_read_tensor_pb(p, &ts[n], NULL, 0, d) != DL_OK) {
            first_diag(d, why, why_size);
            for (int i = 0; i < n; i++) {
                dl_tensor_free(&ts[i]);
            }
            return -1;
        }
    }
    return n;
}

// Compares one output; on mismatch writes the reason into why and returns false.
static bool compare(const dl_tensor *got, const dl_tensor *want, double rtol, double atol,
                    char *why, size_t why_size) {
    if (got->dtype != want->dtype) {
        snprintf(why, why_size, "dtype %s, expected %s", dl_dtype_name(got->dtype),
                 dl_dtype_name(want->dtype));
        return false;
    }
    bool same_shape = got->rank == want->rank;
    for (int32_t i = 0; same_shape && i < got->rank; i++) {
        same_shape = got->dims[i] == want->dims[i];
    }
    if (!same_shape) {
        char a[128], b[128];
        dl_shape_format(got->dims, got->rank, a, sizeof a);
        dl_shape_format(want->dims, want->rank, b, sizeof b);
        snprintf(why, why_size, "shape %s, expected %s", a, b);
        return false;
    }
    int64_t n = dl_tensor_numel(want);
    for (int64_t i = 0; i < n; i++) {
        if (dl_dtype_is_float(want->dtype)) {
            double g = dl_tensor_get(got, i), w = dl_tensor_get(want, i);
            bool ok = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= atol + rtol * fabs(w);
            if (!ok) {
                snprintf(why, why_size, "element %lld: got %.9g, expected %.9g", (long long)i, g,
                         w);
                return false;
            }
        } else if (dl_tensor_get_i64(got, i) != dl_tensor_get_i64(want, i)) {
            snprintf(why, why_size, "element %lld: got %lld, expected %lld", (long long)i,
                     (long long)dl_tensor_get_i64(got, i), (long long)dl_tensor_get_i64(want, i));
            return false;
        }
    }
    return true;
}

// Imports the case's model, binding the graph inputs that must be constant to this data set's
// values. Returns the module (after the optional text round trip) or NULL with `why` set.
static dl_ir_module *import_case(const runner *r, const char *model, const dl_tensor *ins, int n_in,
                                 dl_fe_onnx_info *info, dl_diags *d, char *why, size_t why_size) {
    dl_ir_module *m = NULL;
    dl_status st =
        dl_fe__import_onnx_ex(model, NULL, NULL, 0, false, dl_pass_shape_node, d, &m, info);
    if (st != DL_OK && info->n_need_const > 0) {
        size_t nb = info->n_need_const;
        const char *names[MAX_IO];
        dl_tensor vals[MAX_IO];
        bool ok = nb <= MAX_IO;
        for (size_t i = 0; ok && i < nb; i++) {
            ok = info->need_const[i] < n_in;
            if (ok) {
                names[i] = info->need_const_names[i];
                vals[i] = ins[info->need_const[i]];
            }
        }
        if (!ok) {
            snprintf(why, why_size, "import: an operand must be constant, no test data for it");
            return NULL;
        }
        // The names live in info, which the second import refills: keep copies.
        char *copies[MAX_IO];
        for (size_t i = 0; i < nb; i++) {
            copies[i] = xstrdup(names[i]);
            names[i] = copies[i];
        }
        dl_fe__onnx_info_fini(info);
        dl_diags_clear(d);
        st = dl_fe__import_onnx_ex(model, names, vals, nb, false, dl_pass_shape_node, d, &m, info);
        for (size_t i = 0; i < nb; i++) {
            free(copies[i]);
        }
    }
    if (st != DL_OK) {
        char msg[400];
        first_diag(d, msg, sizeof msg);
        snprintf(why, why_size, "import: %s", msg);
        return NULL;
    }
    if (r->no_text) {
        return m;
    }
    char *text = NULL;
    st = dl_ir_print(m, &text);
    dl_ir_module_destroy(m);
    if (st != DL_OK) {
        char msg[400];
        first_diag(d, msg, sizeof msg);
        snprintf(why, why_size, "print: %s (%s)", dl_status_str(st), msg);
        free(text);
        return NULL;
    }
    dl_ir_module *m2 = NULL;
    st = dl_fe_parse("onnx.dlg", text, strlen(text), d, &m2);
    if (st != DL_OK) {
        char msg[400];
        first_diag(d, msg, sizeof msg);
        snprintf(why, why_size, "parse of printed text: %s", msg);
        if (r->verbose) {
            fprintf(stderr, "--- printed text:\n%s---\n", text);
        }
        free(text);
        return NULL;
    }
    free(text);
    return m2;
}

// Copies a message with its newlines flattened into buf.
static void flat_copy(char *buf, size_t size, const char *msg) {
    snprintf(buf, size, "%s", msg);
    for (char *p = buf; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
}

// The compiled path: compiles `m`, loads the artifact from memory, feeds `feed` (m->inputs
// order) and copies every output into got[] (m->outputs order; the caller frees each). Returns
// false with `why` set on any failure; on failure no got[] is left allocated.
static bool run_cpu(const dl_ir_module *m, const dl_tensor *const *feed, dl_tensor *got,
                    dl_diags *d, char *why, size_t why_size) {
    uint8_t *art = NULL;
    size_t art_len = 0;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    size_t n_done = 0;
    bool ok = false;
    if (dl_cg_compile(m, NULL, d, &art, &art_len) != DL_OK) {
        char msg[400];
        first_diag(d, msg, sizeof msg);
        snprintf(why, why_size, "compile: %s", msg);
        goto out;
    }
    if (dlrt_model_load_memory(art, art_len, &rm) != DLRT_OK ||
        dlrt_session_create(rm, &s) != DLRT_OK) {
        char msg[400];
        flat_copy(msg, sizeof msg, dlrt_last_error());
        snprintf(why, why_size, "runtime load: %s", msg);
        goto out;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        if (feed[i]->dtype != v->type.dtype) {
            snprintf(why, why_size, "input '%s': test data is %s, the model wants %s", v->name,
                     dl_dtype_name(feed[i]->dtype), dl_dtype_name(v->type.dtype));
            goto out;
        }
        if (dlrt_session_set_input(s, v->name, feed[i]->data, dl_tensor_nbytes(feed[i])) !=
            DLRT_OK) {
            char msg[400];
            flat_copy(msg, sizeof msg, dlrt_last_error());
            snprintf(why, why_size, "set_input: %s", msg);
            goto out;
        }
    }
    if (dlrt_session_infer(s) != DLRT_OK) {
        char msg[400];
        flat_copy(msg, sizeof msg, dlrt_last_error());
        snprintf(why, why_size, "infer: %s", msg);
        goto out;
    }
    for (; n_done < m->outputs.len; n_done++) {
        const char *name = m->outputs.data[n_done]->name;
        const void *data = NULL;
        dlrt_tensor_desc desc;
        if (dlrt_session_output(s, name, &data, &desc) != DLRT_OK) {
            char msg[400];
            flat_copy(msg, sizeof msg, dlrt_last_error());
            snprintf(why, why_size, "output '%s': %s", name, msg);
            goto out;
        }
        dl_tensor *t = &got[n_done];
        if (dl_tensor_alloc(t, (dl_dtype)desc.dtype, desc.rank, desc.dims) != DL_OK) {
            snprintf(why, why_size, "out of memory");
            goto out;
        }
        if (dl_tensor_nbytes(t) != desc.nbytes) {
            dl_tensor_free(t);
            snprintf(why, why_size, "output '%s': described as %zu bytes, its shape has %zu", name,
                     desc.nbytes, dl_tensor_nbytes(t));
            goto out;
        }
        if (desc.nbytes) {
            memcpy(t->data, data, desc.nbytes);
        }
    }
    ok = true;
out:
    if (!ok) {
        for (size_t i = 0; i < n_done; i++) {
            dl_tensor_free(&got[i]);
        }
    }
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    free(art);
    return ok;
}

// Runs one data set. Returns true on success, else false with `why` set.
// The ops of the module go into ops_seen.
static bool run_set(const runner *r, const char *model, const char *set_dir, bool *ops_seen,
                    char *why, size_t why_size) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    dl_tensor ins[MAX_IO], want[MAX_IO], got[MAX_IO];
    const dl_tensor *feed[MAX_IO];
    int n_in = read_pbs(set_dir, "input", ins, d, why, why_size);
    int n_out = n_in < 0 ? -1 : read_pbs(set_dir, "output", want, d, why, why_size);
    bool ok = false;
    dl_ir_module *m = NULL;
    dl_fe_onnx_info info = {0};
    size_t n_got = 0;
    if (n_in < 0 || n_out < 0) {
        goto out;
    }
    m = import_case(r, model, ins, n_in, &info, d, why, why_size);
    if (!m) {
        goto out;
    }
    if (dl_pass_shape(m, d) != DL_OK) {
        char msg[400];
        first_diag(d, msg, sizeof msg);
        snprintf(why, why_size, "shape: %s", msg);
        goto out;
    }
    if (m->inputs.len != info.n_input_src || m->outputs.len != (size_t)n_out) {
        snprintf(why, why_size, "module has %zu inputs / %zu outputs, test data %zu / %d",
                 m->inputs.len, m->outputs.len, info.n_input_src, n_out);
        goto out;
    }
    dl_tensor *in_vals = calloc(m->inputs.len + 1, sizeof(dl_tensor));
    if (!in_vals) {
        snprintf(why, why_size, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        int32_t src = info.input_src[i];
        if (src < 0 || src >= n_in) {
            snprintf(why, why_size, "no test data for input '%s'", m->inputs.data[i]->name);
            free(in_vals);
            goto out;
        }
        feed[i] = &ins[src];
        in_vals[i] = *feed[i];
    }
    if (r->use_cpu) {
        free(in_vals);
        if (!run_cpu(m, feed, got, d, why, why_size)) {
            goto out;
        }
    } else {
        dl_ir_eval_opts opts = {NULL, 0, false};
        dl_status st = dl_ir_eval(m, &opts, in_vals, got, d);
        free(in_vals);
        if (st != DL_OK) {
            char msg[400];
            first_diag(d, msg, sizeof msg);
            snprintf(why, why_size, "eval: %s", msg);
            goto out;
        }
    }
    n_got = m->outputs.len;
    ok = true;
    for (size_t i = 0; i < m->nodes.len; i++) {
        ops_seen[m->nodes.data[i]->op] = true;
    }
    for (size_t i = 0; ok && i < n_got; i++) {
        char msg[400];
        if (!compare(&got[i], &want[i], 1e-3, 1e-7, msg, sizeof msg)) {
            snprintf(why, why_size, "output %zu '%s': %s", i, m->outputs.data[i]->name, msg);
            ok = false;
        }
    }
out:
    for (size_t i = 0; i < n_got; i++) {
        dl_tensor_free(&got[i]);
    }
    for (int i = 0; i < n_in; i++) {
        dl_tensor_free(&ins[i]);
    }
    for (int i = 0; i < n_out; i++) {
        dl_tensor_free(&want[i]);
    }
    dl_fe__onnx_info_fini(&info);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

// Runs every test_data_set_* of a case; stops at the first failure (`why` set).
static bool run_sets(const runner *r, const char *cdir, const char *model, bool *ops_seen,
                     char *why, size_t why_size) {
    struct dirent **sets = NULL;
    int n_sets = scandir(cdir, &sets, set_filter, name_cmp);
    bool ok = n_sets > 0;
    if (n_sets <= 0) {
        snprintf(why, why_size, "no test_data_set_* directory");
    }
    for (int i = 0; i < n_sets; i++) {
        if (ok) {
            char sdir[1400], swhy[900];
            snprintf(sdir, sizeof sdir, "%s/%s", cdir, sets[i]->d_name);
            if (!run_set(r, model, sdir, ops_seen, swhy, sizeof swhy)) {
                snprintf(why, why_size, "%s: %s", sets[i]->d_name, swhy);
                ok = false;
            }
        }
        free(sets[i]);
    }
    free(sets);
    return ok;
}

// What a forked case hands back, in shared anonymous memory.
typedef struct case_result {
    bool done, ok;
    char why[2048];
    bool ops_seen[DL_IR_OP_COUNT];
} case_result;

#define CASE_TIME_LIMIT_S 120

// run_sets in a child process, so a kernel that crashes or hangs fails its case only.
static bool run_sets_forked(const runner *r, const char *cdir, const char *model, bool *ops_seen,
                            char *why, size_t why_size) {
    case_result *res =
        mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        snprintf(why, why_size, "mmap failed");
        return false;
    }
    memset(res, 0, sizeof *res);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        munmap(res, sizeof *res);
        snprintf(why, why_size, "fork failed");
        return false;
    }
    if (pid == 0) {
        alarm(CASE_TIME_LIMIT_S);
        res->ok = run_sets(r, cdir, model, res->ops_seen, res->why, sizeof res->why);
        res->done = true;
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0) {
    }
    bool ok = false;
    if (WIFSIGNALED(wst)) {
        int sig = WTERMSIG(wst);
        if (sig == SIGALRM) {
            snprintf(why, why_size, "timed out after %d s", CASE_TIME_LIMIT_S);
        } else {
            snprintf(why, why_size, "crashed: signal %d (%s)", sig, strsignal(sig));
        }
    } else if (!res->done) {
        snprintf(why, why_size, "child exited with status %d", WEXITSTATUS(wst));
    } else {
        ok = res->ok;
        snprintf(why, why_size, "%s", res->why);
        memcpy(ops_seen, res->ops_seen, sizeof res->ops_seen);
    }
    munmap(res, sizeof *res);
    return ok;
}

static void run_case(runner *r, const char *name) {
    char cdir[1024], model[1100], why[2048];
    snprintf(cdir, sizeof cdir, "%s/%s", r->dir, name);
    snprintf(model, sizeof model, "%s/model.onnx", cdir);
    const char *reason = excluded(r, name);
    if (reason) {
        r->skipped_excl++;
        if (r->verbose) {
            printf("SKIP %s: excluded: %s\n", name, reason);
        }
        return;
    }
    dl_status st = dl_fe__onnx_probe(model, why, sizeof why);
    if (st == DL_ERR_UNSUPPORTED) {
        r->skipped_na++;
        if (r->verbose) {
            printf("SKIP %s: not applicable: %s\n", name, why);
        }
        return;
    }
    if (st != DL_OK) {
        r->failed++;
        printf("FAIL %s: %s\n", name, why);
        return;
    }
    bool ops_seen[DL_IR_OP_COUNT] = {false};
    bool ok = r->use_cpu && !r->no_fork ? run_sets_forked(r, cdir, model, ops_seen, why, sizeof why)
                                        : run_sets(r, cdir, model, ops_seen, why, sizeof why);
    if (ok) {
        r->passed++;
        for (int i = 0; i < DL_IR_OP_COUNT; i++) {
            r->op_covered[i] = r->op_covered[i] || ops_seen[i];
        }
        if (r->verbose) {
            printf("PASS %s\n", name);
        }
    } else {
        r->failed++;
        printf("FAIL %s: %s\n", name, why);
    }
}

int main(int argc, char **argv) {
    runner r = {0};
    r.dir = DL_ONNX_NODE_DIR;
    const char *excl_path = DL_ONNX_EXCLUSIONS;
    const char *env = getenv("DL_ONNX_NO_TEXT");
    r.no_text = env && env[0] && strcmp(env, "0") != 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            r.verbose = true;
        } else if (strcmp(argv[i], "--no-text") == 0) {
            r.no_text = true;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            r.only = argv[++i];
        } else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            r.dir = argv[++i];
        } else if (strcmp(argv[i], "--exclusions") == 0 && i + 1 < argc) {
            excl_path = argv[++i];
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "cpu") == 0 || strcmp(argv[i + 1], "ref") == 0)) {
            r.use_cpu = strcmp(argv[++i], "cpu") == 0;
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            r.no_fork = true;
        } else {
            fprintf(stderr,
                    "usage: %s [--verbose] [--only SUBSTRING] [--no-text] [--data DIR] "
                    "[--exclusions FILE] [--backend cpu|ref] [--no-fork]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!is_dir(r.dir)) {
        printf("ONNX node test data not found at %s (install libonnx-testdata): skipped\n", r.dir);
        return 77;
    }
    load_exclusions(&r, excl_path);
    struct dirent **cases = NULL;
    int n = scandir(r.dir, &cases, case_filter, name_cmp);
    if (n < 0) {
        printf("cannot list %s\n", r.dir);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        if (!r.only || strstr(cases[i]->d_name, r.only)) {
            run_case(&r, cases[i]->d_name);
        }
        free(cases[i]);
    }
    free(cases);
    int n_ops = 0;
    char ops[2048] = "";
    for (int i = 0; i < DL_IR_OP_COUNT; i++) {
        if (r.op_covered[i]) {
            n_ops++;
            size_t l = strlen(ops);
            snprintf(ops + l, sizeof ops - l, "%s%s", l ? " " : "",
                     dl_ir_op_get_info((dl_ir_op)i)->name);
        }
    }
    if (r.use_cpu) {
        printf("backend: cpu (compiled with dl_cg_compile, run through libdlrt %s)\n",
               dlrt_version());
    }
    printf("ops covered by passing cases: %d of %d (%s)\n", n_ops, (int)DL_IR_OP_COUNT, ops);
    printf("skipped: %d not applicable, %d excluded\n", r.skipped_na, r.skipped_excl);
    printf("%d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped_na + r.skipped_excl);
    for (size_t i = 0; i < r.n_excl; i++) {
        free(r.excl[i].name);
        free(r.excl[i].reason);
    }
    free(r.excl);
    return r.failed ? 1 : 0;
}
