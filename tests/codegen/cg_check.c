// tests/codegen/cg_check.c — see cg_check.h. The reference evaluator is the oracle. The ISA
// level (DLCC_TEST_CPU) is process state set once by cg_isa_setup before any case runs.
#include "cg_check.h"

#include "dl_base.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dl_tensor_io.h"
#include "dl_test.h"
#include "dlrt.h"
#include "ptxas_run.h"

#include <cpuid.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// ISA levels

// The feature lists spell out what LLVM's x86-64-v3 / x86-64-v4 CPUs imply (the psABI levels).
#define ISA_V3_FEATURES                                                                            \
    "+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+sahf,+crc32,+avx,+avx2,+bmi,+bmi2,+f16c,+fma,"    \
    "+lzcnt,+movbe,+xsave"
#define ISA_V4_FEATURES ISA_V3_FEATURES ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+evex512"

typedef struct isa_level {
    const char *name, *cpu, *features;           // cpu: the LLVM CPU name dl_cg_compile gets
    int (*host_has)(char *missing, size_t size); // 1 when the host runs the level
    // The level's extensions beyond its CPU are recorded in an artifact only when a kernel uses
    // them (AMX, runtime/dlrt_format.h's DLRT_ISA_ON_USE): a host without them may still load
    // the artifacts of the cases that do not.
    bool on_use;
} isa_level;

// __builtin_cpu_supports takes string literals only (and checks the OS enabled the registers).
#define NEED(feat)                                                                                 \
    if (!__builtin_cpu_supports(feat)) {                                                           \
        size_t used_ = strlen(missing);                                                            \
        snprintf(missing + used_, size - used_, "%s%s", used_ ? ", " : "", feat);                  \
    }

static int host_has_v3(char *missing, size_t size) {
    __builtin_cpu_init();
    missing[0] = '\0';
    NEED("avx");
    NEED("avx2");
    NEED("fma");
    NEED("f16c");
    NEED("bmi");
    NEED("bmi2");
    NEED("popcnt");
    NEED("sse4.2");
    return missing[0] == '\0';
}

static int host_has_v4(char *missing, size_t size) {
    host_has_v3(missing, size);
    NEED("avx512f");
    NEED("avx512bw");
    NEED("avx512cd");
    NEED("avx512dq");
    NEED("avx512vl");
    return missing[0] == '\0';
}

static int host_has_v4_bf16(char *missing, size_t size) {
    host_has_v4(missing, size);
    NEED("avx512bf16");
    return missing[0] == '\0';
}

// AMX from CPUID leaf 7, EDX bits 24 (tiles) and 22 (bf16); the OS's grant is libdlrt's to ask
// for (runtime/rt_model.c), and a kernel too old to grant it fails every case loudly.
static int host_has_v4_amx(char *missing, size_t size) {
    host_has_v4_bf16(missing, size);
    unsigned a = 0, b = 0, c = 0, d = 0;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    if (!((d >> 24) & 1) || !((d >> 22) & 1)) {
        size_t used = strlen(missing);
        snprintf(missing + used, size - used, "%samx-tile, amx-bf16", used ? ", " : "");
    }
    return missing[0] == '\0';
}

#undef NEED

static const isa_level isa_levels[] = {
    {"x86-64-v3", "x86-64-v3", ISA_V3_FEATURES, host_has_v3, false},
    {"x86-64-v4", "x86-64-v4", ISA_V4_FEATURES, host_has_v4, false},
    // AVX512-BF16 (vdpbf16ps products) and AMX (tdpbf16ps tiles) on top of v4
    {"x86-64-v4-bf16", "x86-64-v4", ISA_V4_FEATURES ",+avx512bf16", host_has_v4_bf16, false},
    {"x86-64-v4-amx", "x86-64-v4", ISA_V4_FEATURES ",+avx512bf16,+amx-tile,+amx-bf16",
     host_has_v4_amx, true},
};

static struct {
    const isa_level *level; // NULL: the host's CPU and features
    bool compile_only;
    bool host_runs; // the host can run the level's code
    // GPU mode (DLCC_TEST_CPU=cuda:sm_XX): every case emitted as PTX and assembled by ptxas.
    const char *sm;    // "sm_80"; NULL: x86-64
    const char *ptxas; // the assembler
    char dir[4096];    // where the .ptx files go
    size_t modules, kernels, failed;
    const char *export_dir; // DLCC_TEST_EXPORT: each case's artifact, inputs and references
    size_t exported;
    int opt_level; // DLCC_TEST_OPT: LLVM's optimisation level for the x86 artifacts (default 3)
} isa = {NULL, false, true, NULL, NULL, {0}, 0, 0, 0, NULL, 0, 3};

static void gpu_summary(void) {
    if (isa.export_dir) {
        printf("exported %zu cases compiled for cuda:%s to %s\n", isa.exported, isa.sm,
               isa.export_dir);
        rmdir(isa.dir);
        return;
    }
    printf("ptxas -arch=%s --warning-as-error: %zu modules, %zu kernels accepted; %zu refused\n",
           isa.sm, isa.modules - isa.failed, isa.kernels, isa.failed);
    rmdir(isa.dir);
}

// DLCC_TEST_CPU=cuda:SM: the NVPTX target, compile only. Returns 0, 77 (no ptxas) or 2.
static int gpu_setup(const char *sm) {
    if (strncmp(sm, "sm_", 3) != 0) { // dl_cg_emit_ptx checks the rest at the first case
        fprintf(stderr, "DLCC_TEST_CPU=cuda:%s: expected cuda:sm_XX, e.g. cuda:sm_80\n", sm);
        return 2;
    }
    const char *run = getenv("DLCC_TEST_GPU");
    if (run && run[0] == '1') { // compiled for the GPU and run there (tools/gpu-check.sh)
        isa.sm = sm;
        isa.compile_only = false;
        printf("target: cuda:%s, run on the GPU (DLCC_TEST_GPU=1) against the reference\n", sm);
        return 0;
    }
    isa.ptxas = ptxas_find();
    if (!isa.ptxas) {
        printf("skipped: DLCC_TEST_CPU=cuda:%s needs ptxas ($DLCC_PTXAS or "
               "/usr/local/cuda/bin/ptxas: the CUDA toolkit), which is not installed\n",
               sm);
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(isa.dir, sizeof isa.dir, "%s/dlcc-cg-ptx-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(isa.dir)) {
        perror("mkdtemp");
        return 2;
    }
    isa.sm = sm;
    isa.compile_only = true;
    atexit(gpu_summary);
    printf("target: nvptx %s, compile only (PTX assembled by %s, not run)\n", sm, isa.ptxas);
    return 0;
}

int cg_isa_setup(void) {
    const char *ex = getenv("DLCC_TEST_EXPORT");
    isa.export_dir = ex && ex[0] ? ex : NULL;
    isa.opt_level = dl_test_opt_level();
    if (isa.opt_level < 0) {
        fprintf(stderr, "DLCC_TEST_OPT=%s: expected an LLVM optimisation level, 0 to 3\n",
                getenv("DLCC_TEST_OPT"));
        return 2;
    }
    if (isa.opt_level != 3) {
        printf("LLVM optimisation level %d (DLCC_TEST_OPT)\n", isa.opt_level);
    }
    const char *cpu = getenv("DLCC_TEST_CPU");
    const char *co = getenv("DLCC_TEST_COMPILE_ONLY");
    isa.compile_only = co && co[0] && strcmp(co, "0") != 0;
    isa.level = NULL;
    isa.host_runs = true;
    if (cpu && strncmp(cpu, "cuda:", 5) == 0) {
        return gpu_setup(cpu + 5);
    }
    if (cpu && cpu[0] && strcmp(cpu, "native") != 0) {
        for (size_t i = 0; i < DL_ARRAY_LEN(isa_levels); i++) {
            if (strcmp(cpu, isa_levels[i].name) == 0) {
                isa.level = &isa_levels[i];
            }
        }
        if (!isa.level) {
            fprintf(stderr,
                    "DLCC_TEST_CPU=%s: unknown ISA level (native, x86-64-v3, x86-64-v4, "
                    "x86-64-v4-bf16, x86-64-v4-amx)\n",
                    cpu);
            return 2;
        }
        dl_cg_options o;
        dl_cg_options_init(&o);
        o.cpu = isa.level->cpu;
        o.features = isa.level->features;
        char err[256];
        if (dl_cg_options_check(&o, err, sizeof err) != DL_OK) {
            fprintf(stderr, "DLCC_TEST_CPU=%s: LLVM rejects the level: %s\n", cpu, err);
            return 2;
        }
        char missing[256];
        isa.host_runs = isa.level->host_has(missing, sizeof missing) != 0;
        if (!isa.host_runs && !isa.compile_only) {
            printf("skipped: DLCC_TEST_CPU=%s needs %s, which this CPU (or its OS) lacks; "
                   "DLCC_TEST_COMPILE_ONLY=1 still compiles the cases for it\n",
                   cpu, missing);
            return 77;
        }
        // On a host without AVX-512 the native level is the AVX2 one: the backend lowers every
        // case as for x86-64-v3 (8-lane vectors, the 6 x 16 tiles), which codegen_ops already
        // runs; only LLVM's tuning for the CPU model differs. AVX-512 hosts run this level.
        __builtin_cpu_init();
        if (!isa.compile_only && strcmp(isa.level->name, "x86-64-v3") == 0 &&
            !__builtin_cpu_supports("avx512f")) {
            printf("skipped: DLCC_TEST_CPU=x86-64-v3 is this host's own vector level (AVX2, no "
                   "AVX-512): the native run lowers every case the same way\n");
            return 77;
        }
    }
    printf("ISA level: %s%s\n",
           isa.level ? isa.level->name : "native (the host CPU and its features)",
           isa.compile_only ? ", compile only (artifacts built and checked, not run)" : "");
    return 0;
}

bool cg_runs_code(void) {
    return !isa.compile_only;
}

// x86-64 ELF shared object: magic, 64-bit class, little endian, ET_DYN, EM_X86_64.
static bool is_x86_64_so(const uint8_t *p, size_t n) {
    return n >= 64 &&
           memcmp(p,
                  "\x7f"
                  "ELF",
                  4) == 0 &&
           p[4] == 2 && p[5] == 1 && (p[16] | p[17] << 8) == 3 && (p[18] | p[19] << 8) == 62;
}

// Compile-only: the artifact must be an x86-64 shared object the runtime accepts exactly when
// the host has the level (a refusal names the missing instruction set; an acceptance means
// the plan and the ELF load).
static bool check_artifact_only(const uint8_t *art, size_t len, const char *text) {
    if (!is_x86_64_so(art, len)) {
        fprintf(stderr, "cg_check: the artifact (%zu bytes) is no x86-64 ELF shared object:\n%s\n",
                len, text);
        return false;
    }
    dlrt_model *rm = NULL;
    dlrt_status st = dlrt_model_load_memory(art, len, &rm);
    bool ok = isa.host_runs ? st == DLRT_OK
                            : st == DLRT_ERR_UNSUPPORTED || (isa.level->on_use && st == DLRT_OK);
    if (!ok) {
        fprintf(stderr, "cg_check: loading the %s artifact gave status %d (%s); expected %s:\n%s\n",
                isa.level ? isa.level->name : "native", (int)st,
                st == DLRT_OK ? "ok" : dlrt_last_error(),
                isa.host_runs ? "success" : "an unsupported-ISA refusal", text);
    }
    dlrt_model_release(rm);
    return ok;
}

// ---------------------------------------------------------------------------------------------

static void print_diags(dl_diags *d);

// DLCC_TEST_EXPORT=DIR: the case as DIR/caseNNNN/ for tests/cuda/gpu_replay.c to run elsewhere
// (a GPU machine without LLVM): model.so (the artifact), case.dlg, in_K.npy per input, ref_J.npy
// per output (the reference evaluator's values) and check.txt: "tol ATOL RTOL", then
// "input NAME FILE" and "output NAME FILE" lines.
static bool export_case(const dl_ir_module *m, const char *text, const uint8_t *art, size_t art_len,
                        const dl_tensor *ins, const dl_tensor *refs, cg_tol tol) {
    char dir[4200], path[4400];
    snprintf(dir, sizeof dir, "%s/case%04zu", isa.export_dir, isa.exported++);
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "cg_check: cannot create %s\n", dir);
        return false;
    }
    snprintf(path, sizeof path, "%s/model.so", dir);
    bool ok = dl_write_file_atomic(path, art, art_len) == DL_OK;
    snprintf(path, sizeof path, "%s/case.dlg", dir);
    ok = ok && dl_write_file_atomic(path, text, strlen(text)) == DL_OK;
    snprintf(path, sizeof path, "%s/check.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        return false;
    }
    fprintf(f, "tol %.17g %.17g\n", tol.atol, tol.rtol);
    for (size_t i = 0; i < m->inputs.len && ok; i++) {
        snprintf(path, sizeof path, "%s/in_%zu.npy", dir, i);
        ok = dl_npy_write(path, &ins[i]) == DL_OK;
        fprintf(f, "input %s in_%zu.npy\n", m->inputs.data[i]->name, i);
    }
    for (size_t j = 0; j < m->outputs.len && ok; j++) {
        snprintf(path, sizeof path, "%s/ref_%zu.npy", dir, j);
        ok = dl_npy_write(path, &refs[j]) == DL_OK;
        fprintf(f, "output %s ref_%zu.npy\n", m->outputs.data[j]->name, j);
    }
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "cg_check: cannot export the case to %s\n", dir);
    }
    return ok;
}

// GPU mode: the case's PTX, assembled for isa.sm with no error and no warning.
static bool check_ptx(const dl_ir_module *m, dl_diags *d, const char *text) {
    char *ptx = NULL;
    size_t len = 0;
    isa.modules++;
    if (dl_cg_emit_ptx(m, isa.sm, d, &ptx, &len) != DL_OK) {
        fprintf(stderr, "cg_check: emitting PTX for %s failed:\n%s\n", isa.sm, text);
        print_diags(d);
        isa.failed++;
        return false;
    }
    char name[32], log[8192];
    snprintf(name, sizeof name, "case%zu", isa.modules);
    int rc = ptxas_run(isa.ptxas, isa.dir, name, isa.sm, ptx, log, sizeof log);
    bool ok = rc == 0 && strstr(ptx, ".extern") == NULL;
    if (ok) {
        isa.kernels += ptxas_count_entries(ptx);
    } else {
        fprintf(stderr, "cg_check: ptxas -arch=%s refused the PTX (exit %d)%s:\n%s\n%s\n", isa.sm,
                rc, strstr(ptx, ".extern") ? " or it declares an external function" : "", log,
                text);
        isa.failed++;
    }
    free(ptx);
    return ok;
}

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static void fill_input(const dl_ir_value *v, dl_tensor *t, cg_tol tol, uint64_t seed) {
    int64_t n = dl_tensor_numel(t);
    bool pos = strncmp(v->name, "pos_", 4) == 0;
    int64_t hi = tol.int_hi > 0 ? tol.int_hi : 3;
    for (int64_t i = 0; i < n; i++) {
        double u = dl_rng_uniform(seed, (uint64_t)i);
        double x;
        if (dl_dtype_is_float(t->dtype)) {
            x = pos ? 0.1 + 2.0 * u : -2.0 + 4.0 * u;
        } else if (t->dtype == DL_DT_BOOL) {
            x = u < 0.5;
        } else {
            x = floor(u * (double)hi);
        }
        dl_tensor_set(t, i, x);
    }
}

static bool close_enough(double g, double r, cg_tol tol) {
    if (isnan(g) && isnan(r)) {
        return true;
    }
    if (g == r) {
        return true;
    }
    return fabs(g - r) <= tol.atol + tol.rtol * fabs(r);
}

// A want: NaN only as NaN, an exact zero with its sign, else close_enough.
static bool matches_want(double g, double w, cg_tol tol) {
    if (isnan(w) || isnan(g)) {
        return isnan(w) && isnan(g);
    }
    if (w == 0 && tol.atol == 0 && tol.rtol == 0) {
        return g == 0 && signbit(g) == signbit(w);
    }
    return close_enough(g, w, tol);
}

// Checks output `t` (named `name`) of backend `who` against the wants that name it.
static bool check_wants(const char *who, const char *name, const dl_tensor *t, const cg_want *want,
                        size_t n_want, cg_tol tol, const char *text) {
    bool ok = true;
    for (size_t w = 0; w < n_want; w++) {
        if (strcmp(want[w].output, name) != 0) {
            continue;
        }
        int64_t n = dl_tensor_numel(t);
        if (n != want[w].n) {
            fprintf(stderr, "cg_check: output '%s' has %lld elements, the test wants %lld\n", name,
                    (long long)n, (long long)want[w].n);
            return false;
        }
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double g = dl_tensor_get(t, i);
            if (!matches_want(g, want[w].v[i], tol)) {
                if (bad == 0) {
                    fprintf(stderr, "cg_check: the %s's output '%s' is not the expected one:\n%s\n",
                            who, name, text);
                }
                if (bad < 5) {
                    fprintf(stderr, "  [%lld] got %.9g, want %.9g\n", (long long)i, g,
                            want[w].v[i]);
                }
                bad++;
            }
        }
        ok = ok && bad == 0;
    }
    return ok;
}

// Whether v is computed after a row node that the fusion pass grouped (a ReduceSum, ReduceMean,
// Softmax, LogSoftmax or LayerNormalization with a fuse_root, or the root of other members):
// such a group sums in its own loop's order. seen: one byte per node of m, zero on the first
// call.
static bool after_row_group(const dl_ir_module *m, const dl_ir_value *v, uint8_t *seen) {
    const dl_ir_node *x = v ? v->def : NULL;
    if (!x || seen[x->id]) {
        return false;
    }
    seen[x->id] = 1;
    if (dl_pass_fusion_is_row_node(x)) {
        bool grouped = x->fuse_root != NULL;
        for (size_t i = 0; i < m->nodes.len && !grouped; i++) {
            grouped = m->nodes.data[i]->fuse_root == x;
        }
        if (grouped) {
            return true;
        }
    }
    for (size_t a = 0; a < x->n_inputs; a++) {
        if (after_row_group(m, x->inputs[a], seen)) {
            return true;
        }
    }
    return false;
}

// A model with fusion groups (passes/fusion.c) compiled again without them must give the same
// bytes for every output as the fused session `fused` (which has run infer): a fused kernel
// keeps its inner values in registers in their own dtype, and nothing else changes. A group
// around a row node sums in its own loop's order: a float32 output computed after one
// agrees within the case's tolerance `tol` instead.
// A second session of `m` compiled with options `co`, its inputs set to `ins`; `what` names it
// in messages. On success the caller destroys *s, releases *rm and frees *art.
static bool sibling_session(const dl_ir_module *m, const dl_cg_options *co, const dl_tensor *ins,
                            const char *what, const char *text, uint8_t **art, dlrt_model **rm,
                            dlrt_session **s) {
    dl_diags *d = NULL;
    size_t len = 0;
    bool ok = dl_diags_create(&d) == DL_OK && dl_cg_compile(m, co, d, art, &len) == DL_OK &&
              dlrt_model_load_memory(*art, len, rm) == DLRT_OK &&
              dlrt_session_create(*rm, s) == DLRT_OK;
    if (!ok) {
        fprintf(stderr, "cg_check: the %s compile failed:\n%s\n", what, text);
        print_diags(d);
    }
    for (size_t i = 0; ok && i < m->inputs.len; i++) {
        const char *name = m->inputs.data[i]->name;
        ok = dlrt_session_set_input(*s, name, ins[i].data, dl_tensor_nbytes(&ins[i])) == DLRT_OK;
        if (!ok) {
            fprintf(stderr, "cg_check: %s input %s: %s\n", what, name, dlrt_last_error());
        }
    }
    dl_diags_destroy(d);
    return ok;
}

static bool same_unfused(dl_ir_module *m, const dl_cg_options *co, const dl_tensor *ins,
                         dlrt_session *fused, const char *text, cg_tol tol) {
    bool *near = calloc(m->outputs.len + 1, sizeof *near);
    uint8_t *seen = malloc(m->nodes.len + 1);
    for (size_t j = 0; near && seen && j < m->outputs.len; j++) {
        memset(seen, 0, m->nodes.len + 1);
        near[j] = m->outputs.data[j]->type.dtype == DL_DT_FLOAT &&
                  after_row_group(m, m->outputs.data[j], seen);
    }
    free(seen);
    if (!near) {
        return false;
    }
    for (size_t i = 0; i < m->nodes.len; i++) {
        m->nodes.data[i]->fuse_root = NULL;
    }
    uint8_t *art = NULL;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    bool ok = false;
    if (!sibling_session(m, co, ins, "unfused", text, &art, &rm, &s)) {
        goto out;
    }
    if (dlrt_session_infer(s) != DLRT_OK) {
        fprintf(stderr, "cg_check: unfused infer: %s\n", dlrt_last_error());
        goto out;
    }
    ok = true;
    for (size_t j = 0; j < m->outputs.len && ok; j++) {
        const char *name = m->outputs.data[j]->name;
        int64_t nel = 0, nbytes = 0;
        ok = dl_ir_type_size(&m->outputs.data[j]->type, &nel, &nbytes);
        size_t n = (size_t)nbytes;
        uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
        // Copies into host memory work on every device (a CUDA output is device memory).
        ok = ok && a && b && dlrt_session_output_copy(fused, name, a, n) == DLRT_OK &&
             dlrt_session_output_copy(s, name, b, n) == DLRT_OK;
        if (ok && near[j]) {
            for (size_t i = 0; i + sizeof(float) <= n && ok; i += sizeof(float)) {
                float fa, fb;
                memcpy(&fa, a + i, sizeof fa);
                memcpy(&fb, b + i, sizeof fb);
                ok = close_enough(fa, fb, tol);
            }
        } else {
            ok = ok && memcmp(a, b, n) == 0;
        }
        free(a);
        free(b);
        if (!ok) {
            fprintf(stderr,
                    "cg_check: output '%s' of the fused kernels differs from the unfused "
                    "ones:\n%s\n",
                    name, text);
        }
    }
out:
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    free(art);
    free(near);
    return ok;
}

// Runs infer in both sessions and compares every output byte for byte.
static bool same_outputs(const dl_ir_module *m, dlrt_session *a, dlrt_session *b) {
    if (dlrt_session_infer(a) != DLRT_OK || dlrt_session_infer(b) != DLRT_OK) {
        fprintf(stderr, "cg_check: infer: %s\n", dlrt_last_error());
        return false;
    }
    bool ok = true;
    for (size_t j = 0; j < m->outputs.len && ok; j++) {
        const char *name = m->outputs.data[j]->name;
        int64_t nel = 0, nbytes = 0;
        ok = dl_ir_type_size(&m->outputs.data[j]->type, &nel, &nbytes);
        size_t n = (size_t)nbytes;
        uint8_t *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
        ok = ok && x && y && dlrt_session_output_copy(a, name, x, n) == DLRT_OK &&
             dlrt_session_output_copy(b, name, y, n) == DLRT_OK && memcmp(x, y, n) == 0;
        free(x);
        free(y);
        if (!ok) {
            fprintf(stderr, "cg_check: output '%s' with prepacked weights differs: ", name);
        }
    }
    return ok;
}

// Sets every param of session s (and of u, when not NULL) to s's values in reverse order, a
// float32 param's also scaled by `scale` (so that a param filled with one value changes too;
// 1 / scale undoes it).
static bool reverse_params(const dl_ir_module *m, dlrt_session *s, dlrt_session *u, float scale) {
    bool ok = true;
    for (size_t i = 0; i < m->params.len && ok; i++) {
        const dl_ir_value *p = m->params.data[i];
        int64_t nel = 0, nbytes = 0;
        ok = dl_ir_type_size(&p->type, &nel, &nbytes);
        size_t n = (size_t)nbytes, es = dl_dtype_size(p->type.dtype);
        uint8_t *v = malloc(n ? n : 1), *r = malloc(n ? n : 1);
        ok = ok && v && r && dlrt_session_get_param(s, p->name, v, n) == DLRT_OK;
        for (size_t e = 0; ok && e < (size_t)nel; e++) {
            memcpy(r + e * es, v + ((size_t)nel - 1 - e) * es, es);
            if (p->type.dtype == DL_DT_FLOAT) {
                float f;
                memcpy(&f, r + e * es, sizeof f);
                f *= scale;
                memcpy(r + e * es, &f, sizeof f);
            }
        }
        ok = ok && dlrt_session_set_param(s, p->name, r, n) == DLRT_OK &&
             (!u || dlrt_session_set_param(u, p->name, r, n) == DLRT_OK);
        free(v);
        free(r);
    }
    return ok;
}

// Prepacked weights (codegen/x86/x86_linalg.c, artifact format 8): the model compiled without
// them (--no-prepack: every call packs) gives the same bytes (products of constants are
// prepacked too; models with no prepack kernel are not compiled again), and again, in two infers,
// after every param has been set to new values (its elements in reverse order, float32 ones scaled
// by 2): the first must run the prepack kernels again (a stale pack would keep computing with the
// old weights), the second skips them.
static bool same_unpacked(const dl_ir_module *m, const dl_cg_options *co, const dl_tensor *ins,
                          const dlrt_model *sm, dlrt_session *s, const char *text) {
    if (isa.sm || dlrt_model_prepack(sm, NULL) == 0) {
        return true; // nothing is prepacked: --no-prepack compiles the same artifact
    }
    dl_cg_options o = *co;
    o.no_prepack = true;
    uint8_t *art = NULL;
    dlrt_model *rm = NULL;
    dlrt_session *u = NULL;
    bool ok = false;
    if (!sibling_session(m, &o, ins, "--no-prepack", text, &art, &rm, &u)) {
        goto out;
    }
    ok = same_outputs(m, s, u);
    const char *when = "at the first infer";
    if (ok && m->params.len > 0) {
        when = "after every param was set";
        ok = reverse_params(m, s, u, 2.0f) && same_outputs(m, s, u) && same_outputs(m, s, u);
        // Reversed again: s has its params back (same_unfused compares it with a fresh one).
        ok = ok && reverse_params(m, s, NULL, 0.5f);
    }
    ok = ok && dlrt_session_infer(s) == DLRT_OK;
    if (!ok) {
        fprintf(stderr, "%s (vs --no-prepack)\n%s\n", when, text);
    }
out:
    dlrt_session_destroy(u);
    dlrt_model_release(rm);
    free(art);
    return ok;
}

bool cg_check(const char *text, cg_tol tol) {
    return cg_check_io(text, tol, NULL, 0, NULL, 0, NULL);
}

bool cg_check_want(const char *text, cg_tol tol, const cg_want *want, size_t n_want) {
    return cg_check_io(text, tol, want, n_want, NULL, 0, NULL);
}

// Whether one of the n values is named `name`.
static bool names_one(dl_ir_value *const *vals, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(vals[i]->name, name) == 0) {
            return true;
        }
    }
    return false;
}

// The given data of input v, or NULL (then it gets the random fill); a given one must have
// v's element count.
static const cg_data *given_input(const dl_ir_value *v, const cg_data *given, size_t n_given) {
    for (size_t g = 0; g < n_given; g++) {
        if (strcmp(given[g].name, v->name) == 0) {
            return &given[g];
        }
    }
    return NULL;
}

bool cg_check_io(const char *text, cg_tol tol, const cg_want *want, size_t n_want,
                 const cg_data *given, size_t n_given, double *const *got_out) {
    bool ok = false;
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    dl_tensor *ins = NULL, *refs = NULL;
    uint8_t *art = NULL;
    size_t art_len = 0;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    dl_pass_fusion_stats fs;
    if (dl_fe_parse("case.dlg", text, strlen(text), d, &m) != DL_OK ||
        dl_pass_shape(m, d) != DL_OK || dl_ir_verify(m, d) != DL_OK ||
        dl_pass_fusion(m, d, &fs) != DL_OK) {
        fprintf(stderr, "cg_check: model does not check:\n%s\n", text);
        print_diags(d);
        goto out;
    }
    for (size_t g = 0; g < n_given; g++) {
        if (!names_one(m->inputs.data, m->inputs.len, given[g].name)) {
            fprintf(stderr, "cg_check: the test gives values of '%s', which is no input\n",
                    given[g].name);
            goto out;
        }
    }
    ins = calloc(m->inputs.len + 1, sizeof *ins);
    refs = calloc(m->outputs.len + 1, sizeof *refs);
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < v->type.rank; k++) {
            dims[k] = v->type.dims[k].value;
        }
        if (dl_tensor_alloc(&ins[i], v->type.dtype, v->type.rank, dims) != DL_OK) {
            goto out;
        }
        const cg_data *gv = given_input(v, given, n_given);
        if (!gv) {
            fill_input(v, &ins[i], tol, (tol.seed ? tol.seed : 1) * 1000 + i);
        } else if (gv->n != dl_tensor_numel(&ins[i])) {
            fprintf(stderr, "cg_check: the test gives %lld values for input '%s' of %lld\n",
                    (long long)gv->n, v->name, (long long)dl_tensor_numel(&ins[i]));
            goto out;
        } else {
            for (int64_t e = 0; e < gv->n; e++) {
                dl_tensor_set(&ins[i], e, gv->v[e]);
            }
        }
    }
    for (size_t w = 0; w < n_want; w++) {
        if (!names_one(m->outputs.data, m->outputs.len, want[w].output)) {
            fprintf(stderr, "cg_check: the test wants values of '%s', which is no output\n",
                    want[w].output);
            goto out;
        }
    }
    // The reference values serve a run (or an export, which stores them); a compile-only level
    // checks the artifact alone, and the same case's evaluation and wanted values are checked
    // by the run at the host's level (codegen_ops). (The sanitizer build's codegen_ops_sm80:
    // 257 -> 221 s in CI.)
    bool ref_ok = true;
    if (!isa.compile_only || isa.export_dir) {
        dl_ir_eval_opts opts = {NULL, 0, false};
        if (dl_ir_eval(m, &opts, ins, refs, d) != DL_OK) {
            fprintf(stderr, "cg_check: reference evaluation failed:\n%s\n", text);
            print_diags(d);
            goto out;
        }
        for (size_t j = 0; j < m->outputs.len; j++) {
            ref_ok = check_wants("reference evaluator", m->outputs.data[j]->name, &refs[j], want,
                                 n_want, tol, text) &&
                     ref_ok;
        }
    }
    if (isa.sm && isa.compile_only && !isa.export_dir) {
        ok = check_ptx(m, d, text) && ref_ok;
        goto out;
    }
    dl_cg_options co;
    dl_cg_options_init(&co);
    if (!isa.sm) {
        co.opt_level = isa.opt_level; // DLCC_TEST_OPT: the x86 artifacts only
    }
    char gpu_target[32];
    if (isa.sm) { // run on the GPU (DLCC_TEST_GPU=1), or export GPU artifacts
        snprintf(gpu_target, sizeof gpu_target, "cuda:%s", isa.sm);
        co.target = gpu_target;
    } else if (isa.level) {
        co.cpu = isa.level->cpu;
        co.features = isa.level->features;
    }
    if (dl_cg_compile(m, &co, d, &art, &art_len) != DL_OK) {
        fprintf(stderr, "cg_check: compile failed (ISA level %s):\n%s\n",
                isa.level ? isa.level->name : "native", text);
        print_diags(d);
        goto out;
    }
    if (isa.export_dir && !export_case(m, text, art, art_len, ins, refs, tol)) {
        goto out;
    }
    if (isa.sm && isa.compile_only) { // exported, for a GPU machine to run
        ok = ref_ok;
        goto out;
    }
    if (isa.compile_only) {
        ok = check_artifact_only(art, art_len, text) && ref_ok;
        goto out;
    }
    if (dlrt_model_load_memory(art, art_len, &rm) != DLRT_OK ||
        dlrt_session_create(rm, &s) != DLRT_OK) {
        fprintf(stderr, "cg_check: runtime: %s\n", dlrt_last_error());
        goto out;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        if (dlrt_session_set_input(s, m->inputs.data[i]->name, ins[i].data,
                                   dl_tensor_nbytes(&ins[i])) != DLRT_OK) {
            fprintf(stderr, "cg_check: set_input: %s\n", dlrt_last_error());
            goto out;
        }
    }
    if (dlrt_session_infer(s) != DLRT_OK) {
        fprintf(stderr, "cg_check: infer: %s\n", dlrt_last_error());
        goto out;
    }
    ok = ref_ok;
    for (size_t j = 0; j < m->outputs.len; j++) {
        const dl_ir_value *v = m->outputs.data[j];
        // A copy into host memory works on every device (a CUDA output is device memory).
        size_t nbytes = dl_tensor_nbytes(&refs[j]);
        void *data = malloc(nbytes ? nbytes : 1);
        if (!data || dlrt_session_output_copy(s, v->name, data, nbytes) != DLRT_OK) {
            fprintf(stderr, "cg_check: output %s: %s\n", v->name, dlrt_last_error());
            free(data);
            ok = false;
            continue;
        }
        dl_tensor got = refs[j];
        got.data = data;
        int64_t n = dl_tensor_numel(&refs[j]);
        int bad = 0;
        cg_tol t = tol;
        if (!dl_dtype_is_float(v->type.dtype)) {
            t.atol = t.rtol = 0;
        }
        for (int64_t i = 0; i < n; i++) {
            double g = dl_tensor_get(&got, i), r = dl_tensor_get(&refs[j], i);
            if (!close_enough(g, r, t)) {
                if (bad == 0) {
                    fprintf(stderr, "cg_check: output '%s' differs from the reference:\n%s\n",
                            v->name, text);
                }
                if (bad < 5) {
                    fprintf(stderr, "  [%lld] got %.9g, reference %.9g (|diff| %.3g)\n",
                            (long long)i, g, r, fabs(g - r));
                }
                bad++;
            }
        }
        if (bad) {
            fprintf(stderr, "  %d of %lld elements differ (atol %g, rtol %g)\n", bad, (long long)n,
                    t.atol, t.rtol);
            ok = false;
        }
        if (!check_wants("compiled code", v->name, &got, want, n_want, t, text)) {
            ok = false;
        }
        for (int64_t i = 0; got_out && got_out[j] && i < n; i++) {
            got_out[j][i] = dl_tensor_get(&got, i);
        }
        free(data);
    }
    if (ok && !same_unpacked(m, &co, ins, rm, s, text)) {
        ok = false;
    }
    if (ok && fs.groups > 0 && !same_unfused(m, &co, ins, s, text, tol)) {
        ok = false;
    }
out:
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    free(art);
    if (m) {
        for (size_t i = 0; ins && i < m->inputs.len; i++) {
            dl_tensor_free(&ins[i]);
        }
        for (size_t i = 0; refs && i < m->outputs.len; i++) {
            dl_tensor_free(&refs[i]);
        }
    }
    free(ins);
    free(refs);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}

long cg_infer_kernels(const char *text) {
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    uint8_t *art = NULL;
    size_t len = 0;
    dlrt_model *rm = NULL;
    long n = -1;
    dl_cg_options co;
    dl_cg_options_init(&co);
    if (dl_diags_create(&d) == DL_OK &&
        dl_fe_parse("case.dlg", text, strlen(text), d, &m) == DL_OK &&
        dl_pass_shape(m, d) == DL_OK && dl_cg_compile(m, &co, d, &art, &len) == DL_OK &&
        dlrt_model_load_memory(art, len, &rm) == DLRT_OK) {
        uint32_t nk = 0, nf = 0, nops = 0;
        dlrt_model_kernels(rm, 0, &nk, &nf, &nops);
        n = (long)nk;
    }
    dlrt_model_release(rm);
    free(art);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return n;
}
