// tests/codegen/nvptx_samples.c — every sample, trained on a GPU: `dlcc compile --target
// cuda:sm_80` and `cuda:sm_90` of each .dlg named on the command line (samples/*.dlg: infer and
// the whole train step) through the driver (dlcc_compile_file, no cache), as a user gets it.
// For each artifact: libdlrt loads it (the plan validates; device CUDA; a PTX image); ptxas
// assembles the image for the named GPU with no error and no warning, and the image holds one
// kernel entry per kernel of the plan; a second compile gives the same bytes; without a GPU a
// session is refused with DLRT_ERR_NO_DEVICE (the loader's or driver's reason printed), never a
// crash. Needs no GPU;
// exits 77 (ctest SKIP_RETURN_CODE) without ptxas ($DLCC_PTXAS, else /usr/local/cuda/bin/ptxas).
#include "dl_check.h"
#include "dlcc.h"
#include "dlrt.h"
#include "ptxas_run.h"
#include "rt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t n_artifacts, n_kernels;

static dl_status compile(const char *path, const char *target, dlcc_result *r) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return DL_ERR_NOMEM;
    }
    dlcc_options o;
    dlcc_options_init(&o);
    o.cg.target = target;
    o.use_cache = false;
    memset(r, 0, sizeof *r);
    dl_status st = dlcc_compile_file(path, &o, d, r);
    for (size_t i = 0; st != DL_OK && i < dl_diags_count(d); i++) {
        fprintf(stderr, "  diag: %s\n", dl_diags_get(d, i)->msg);
    }
    dl_diags_destroy(d);
    return st;
}

static void check_sample(const char *ptxas, const char *dir, const char *path, const char *sm) {
    char target[32];
    snprintf(target, sizeof target, "cuda:%s", sm);
    dlcc_result r, again;
    dl_status st = compile(path, target, &r);
    CHECK(st == DL_OK, "%s for %s: %s", path, target, dl_status_str(st));
    if (st != DL_OK) {
        return;
    }
    st = compile(path, target, &again);
    CHECK(st == DL_OK && again.artifact_len == r.artifact_len &&
              memcmp(again.artifact, r.artifact, r.artifact_len) == 0,
          "%s for %s: two compiles differ", path, target);
    if (getenv("DLCC_TEST_KEEP_PTX") && st == DL_OK) {
        char p1[4200];
        snprintf(p1, sizeof p1, "%s/a%zu.so", dir, n_artifacts);
        // Kept for comparing (cmp -l) when the two compiles differ.
        FILE *f = fopen(p1, "wb");
        if (f) {
            fwrite(r.artifact, 1, r.artifact_len, f);
            fclose(f);
        }
        snprintf(p1, sizeof p1, "%s/b%zu.so", dir, n_artifacts);
        f = fopen(p1, "wb");
        if (f) {
            fwrite(again.artifact, 1, again.artifact_len, f);
            fclose(f);
        }
    }
    free(again.artifact);

    dlrt_model *m = NULL;
    dlrt_status rs = dlrt_model_load_memory(r.artifact, r.artifact_len, &m);
    CHECK(rs == DLRT_OK, "%s for %s: load: %s", path, target, dlrt_last_error());
    if (rs == DLRT_OK) {
        const dlrt_plan_hdr *h = m->hdr;
        CHECK(dlrt_model_device(m) == DLRT_DEVICE_CUDA, "%s: not a CUDA model", path);
        CHECK(h->image_kind == DLRT_IMAGE_PTX && h->size_image > 1, "%s: no PTX image", path);
        const char *ptx = (const char *)m->plan + h->off_image;
        bool terminated = h->size_image > 0 && ptx[h->size_image - 1] == 0;
        CHECK(terminated, "%s: the PTX image is not NUL-terminated", path);
        CHECK(strstr(m->target, sm) != NULL, "%s: plan target '%s' does not name %s", path,
              m->target, sm);
        if (terminated) {
            char name[64], log[8192];
            snprintf(name, sizeof name, "sample%zu_%s", n_artifacts, sm);
            int rc = ptxas_run(ptxas, dir, name, sm, ptx, log, sizeof log);
            size_t entries = ptxas_count_entries(ptx);
            CHECK(rc == 0, "%s for %s: ptxas exit %d:\n%s", path, target, rc, log);
            CHECK(strstr(ptx, ".extern") == NULL, "%s: the PTX declares an external function",
                  path);
            CHECK(entries == h->n_fns, "%s: %zu kernel entries in the PTX, %u in the plan", path,
                  entries, h->n_fns);
            printf("%s %s: %zu bytes, %zu kernels (infer %u, train_step %u launches), ptxas "
                   "exit %d\n",
                   path, target, r.artifact_len, entries, h->entry_count[DLRT_ENTRY_INFER],
                   h->entry_count[DLRT_ENTRY_TRAIN_STEP], rc);
            if (rc == 0) {
                n_kernels += entries;
            }
        }
        dlrt_session *s = NULL;
        rs = dlrt_session_create(m, &s);
        // Without a GPU (this test's machines) the session is refused, saying why; on a GPU
        // machine it is made (what it computes is tools/gpu-check.sh's to check).
        CHECK(rs == DLRT_OK || rs == DLRT_ERR_NO_DEVICE,
              "%s: a session of a CUDA model gave %s: %s", path, dlrt_status_str(rs),
              dlrt_last_error());
        CHECK(rs == DLRT_OK || strstr(dlrt_last_error(), "CUDA") != NULL,
              "%s: the refusal does not say CUDA: %s", path, dlrt_last_error());
        if (n_artifacts == 0) {
            printf("a session: %s%s%s\n", dlrt_status_str(rs), rs ? ": " : "",
                   rs ? dlrt_last_error() : "");
        }
        dlrt_session_destroy(s);
        dlrt_model_release(m);
    }
    n_artifacts++;
    free(r.artifact);
}

int main(int argc, char **argv) {
    const char *ptxas = ptxas_find();
    if (!ptxas) {
        printf("SKIP: ptxas not found at $DLCC_PTXAS or /usr/local/cuda/bin/ptxas (the CUDA "
               "toolkit is not installed)\n");
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/dlcc-samples-ptx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const char *const sms[] = {"sm_80", "sm_90"};
    for (int i = 1; i < argc; i++) {
        for (size_t k = 0; k < sizeof sms / sizeof sms[0]; k++) {
            check_sample(ptxas, dir, argv[i], sms[k]);
        }
    }
    rmdir(dir);
    printf("%zu GPU artifacts of %d samples (sm_80, sm_90): %zu kernels accepted by ptxas; %s\n",
           n_artifacts, argc - 1, n_kernels, dl_check_failures ? "FAILED" : "ok");
    return dl_check_failures ? 1 : 0;
}
