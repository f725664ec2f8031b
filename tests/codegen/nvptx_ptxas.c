// tests/codegen/nvptx_ptxas.c — the target seam, proven: elementwise kernels lowered by the
// SHARED elementwise lowering through codegen/nvptx/ (dl_cg_emit_ptx), emitted as PTX by LLVM's
// NVPTX backend for sm_80 and assembled by NVIDIA's ptxas (`-arch=sm_80 -v`). Needs no GPU.
//
// Cases: Relu (no math call: libdevice is not linked, no __nv_ symbol in the PTX) and Gelu
// (erf through libdevice's __nv_erff). For each: ptxas exits 0, the PTX has a `.visible .entry`
// kernel that reads the grid index registers (ctaid.x, ntid.x, tid.x) and compares it against
// the range (setp); ptxas's -v report (registers per kernel) is printed. MatMul: a family from
// codegen/x86/ lowered at vector width 1 under the grid index model. Every other op is
// assembled by codegen_ops_sm80 / _sm90 (cg_check's GPU mode).
// DLCC_TEST_KEEP_PTX=1 keeps the .ptx and .cubin files. Exits 77 (ctest SKIP_RETURN_CODE), saying
// why, where ptxas is absent ($DLCC_PTXAS, else /usr/local/cuda/bin/ptxas).
#include "dl_cg.h"
#include "dl_check.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "ptxas_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_diags(const dl_diags *d) {
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        fprintf(stderr, "  diag: %s\n", dl_diags_get(d, i)->msg);
    }
}

// Parses and shape-checks `text`, then emits PTX for sm_80. Returns the status; *ptx (malloc'd)
// on DL_OK; diagnostics in d.
static dl_status emit(const char *text, dl_diags *d, char **ptx) {
    dl_ir_module *m = NULL;
    size_t len = 0;
    *ptx = NULL;
    dl_status st = dl_fe_parse("case.dlg", text, strlen(text), d, &m);
    if (st == DL_OK) {
        st = dl_pass_shape(m, d);
    }
    if (st == DL_OK) {
        st = dl_ir_verify(m, d);
    }
    if (st == DL_OK) {
        st = dl_cg_emit_ptx(m, "sm_80", d, ptx, &len);
    }
    dl_ir_module_destroy(m);
    return st;
}

// Assembles the PTX for sm_80 (ptxas_run.h) and prints what ptxas said (registers per kernel).
static int run_ptxas(const char *ptxas, const char *dir, const char *name, const char *ptx) {
    char log[8192];
    printf("$ ptxas -arch=sm_80 -v --warning-as-error %s.ptx -o %s.cubin\n", name, name);
    int rc = ptxas_run(ptxas, dir, name, "sm_80", ptx, log, sizeof log);
    fputs(log, stdout);
    printf("(ptxas exit status %d)\n", rc);
    return rc;
}

static void check_kernel(const char *ptxas, const char *dir, const char *name, const char *text,
                         bool uses_libdevice) {
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        dl_check_failures++;
        return;
    }
    char *ptx = NULL;
    dl_status st = emit(text, d, &ptx);
    CHECK(st == DL_OK, "%s: dl_cg_emit_ptx: %s", name, dl_status_str(st));
    if (st != DL_OK) {
        print_diags(d);
        dl_diags_destroy(d);
        return;
    }
    CHECK(strstr(ptx, ".visible .entry") != NULL, "%s: no .visible .entry in the PTX", name);
    CHECK(strstr(ptx, ".target sm_80") != NULL, "%s: the PTX does not target sm_80", name);
    CHECK(strstr(ptx, "%ctaid.x") && strstr(ptx, "%ntid.x") && strstr(ptx, "%tid.x"),
          "%s: the kernel does not compute its grid index", name);
    CHECK(strstr(ptx, "setp.") != NULL, "%s: no bounds check (setp) in the PTX", name);
    // Relu needs no libdevice; Gelu's erf comes from it (inlined or as an internal .func, never
    // an external declaration ptxas cannot resolve).
    CHECK(strstr(ptx, ".extern") == NULL, "%s: the PTX declares an external function", name);
    if (!uses_libdevice) {
        CHECK(strstr(ptx, "__nv_") == NULL, "%s: libdevice linked without a math call", name);
    }
    int rc = run_ptxas(ptxas, dir, name, ptx);
    CHECK(rc == 0, "%s: ptxas exit status %d", name, rc);
    if (rc != 0) {
        fputs(ptx, stderr);
    }
    free(ptx);
    dl_diags_destroy(d);
}

int main(void) {
    const char *ptxas = ptxas_find();
    if (!ptxas) {
        printf("SKIP: ptxas not found at $DLCC_PTXAS or /usr/local/cuda/bin/ptxas (the CUDA "
               "toolkit is not installed; set DLCC_PTXAS to test the NVPTX seam)\n");
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/dlcc-ptxas-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    check_kernel(ptxas, dir, "relu",
                 "model relu_gpu\ninput x : float[1000]\ny = Relu (x)\noutput y\n", false);
    check_kernel(ptxas, dir, "gelu",
                 "model gelu_gpu\ninput x : float[4, 250]\ny = Gelu (x)\noutput y\n", true);
    // A per-target family (x86's loop nests, at vector width 1, one grid index per row block).
    check_kernel(ptxas, dir, "matmul",
                 "model mm\ninput a : float[64, 48]\ninput b : float[48, 40]\n"
                 "y = MatMul (a, b)\noutput y\n",
                 false);
    rmdir(dir);
    printf("%s\n", dl_check_failures ? "FAILED" : "ok");
    return dl_check_failures ? 1 : 0;
}
