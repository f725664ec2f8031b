// codegen/x86/x86_target.c — the x86-64 target machine: LLVM's X86 target registered once,
// --cpu / --features validated against the names this LLVM knows (dl_cg_x86_names.h, generated
// by CMake from `llc -mcpu=help`), the psABI levels' implied features, the host CPU and features,
// the DLRT_ISA_* bits an artifact records, and the LLVMTargetMachine (PIC, opt level).
//
// Invariant: the feature string given to LLVM always ends in "+64bit" (LLVM aborts on a CPU
// without 64-bit support), and dl_cg_target_features returns exactly that string, which the
// cache key hashes.
#include "cg_internal.h"
#include "x86/x86.h"

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------

static pthread_once_t targets_once = PTHREAD_ONCE_INIT;

static void init_targets_once(void) {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
}

// LLVM's target registration is not thread-safe; concurrent first compiles go through once.
static void init_targets(void) {
    pthread_once(&targets_once, init_targets_once);
}

#include "dl_cg_x86_names.h"

static bool in_names(const char *s, size_t n, const char *const *names, size_t n_names) {
    for (size_t i = 0; i < n_names; i++) {
        if (strlen(names[i]) == n && strncmp(names[i], s, n) == 0) {
            return true;
        }
    }
    return false;
}

dl_status dl_cg_options_check(const dl_cg_options *o, char *err, size_t err_size) {
    if (o->opt_level < 0 || o->opt_level > 3) {
        snprintf(err, err_size, "optimisation level must be 0..3, got %d", o->opt_level);
        return DL_ERR_INVALID_ARG;
    }
    if (o->cpu && o->cpu[0] && strcmp(o->cpu, "native") != 0 &&
        !in_names(o->cpu, strlen(o->cpu), dl_cg_x86_cpus, DL_ARRAY_LEN(dl_cg_x86_cpus))) {
        snprintf(err, err_size,
                 "unknown CPU '%s' for x86-64 (e.g. native, x86-64-v3, skylake-avx512, znver3)",
                 o->cpu);
        return DL_ERR_INVALID_ARG;
    }
    const char *f = o->features ? o->features : "";
    while (*f) {
        const char *e = strchr(f, ',');
        size_t n = e ? (size_t)(e - f) : strlen(f);
        if (n < 2 || (f[0] != '+' && f[0] != '-') ||
            !in_names(f + 1, n - 1, dl_cg_x86_features, DL_ARRAY_LEN(dl_cg_x86_features))) {
            snprintf(err, err_size,
                     "bad target feature '%.*s' (expected +NAME or -NAME with an x86 feature "
                     "name such as avx2)",
                     (int)n, f);
            return DL_ERR_INVALID_ARG;
        }
        f += n + (e ? 1 : 0);
    }
    return DL_OK;
}

// The features an x86-64 psABI level implies (LLVM's x86-64-v2/v3/v4 CPUs), spelled out so
// that the lowering's tile choice and the artifact's ISA record see them: `--cpu x86-64-v4`
// alone gets the AVX-512 tiles and an artifact the runtime refuses on a CPU without AVX-512.
// Other CPU names without --features contribute nothing (LLVM still uses their features).
#define LEVEL_V2_FEATURES "+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+sahf,+crc32"
#define LEVEL_V3_FEATURES LEVEL_V2_FEATURES ",+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"
#define LEVEL_V4_FEATURES                                                                          \
    LEVEL_V3_FEATURES ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+evex512"

static const char *level_features(const char *cpu) {
    static const struct {
        const char *cpu, *features;
    } levels[] = {
        {"x86-64-v2", LEVEL_V2_FEATURES},
        {"x86-64-v3", LEVEL_V3_FEATURES},
        {"x86-64-v4", LEVEL_V4_FEATURES},
    };
    for (size_t i = 0; i < DL_ARRAY_LEN(levels); i++) {
        if (strcmp(cpu, levels[i].cpu) == 0) {
            return levels[i].features;
        }
    }
    return "";
}

// Resolves cpu/features: "native"/NULL means the host. Returns malloc'd strings via LLVM.
static void resolve_cpu(const dl_cg_options *o, char **cpu, char **features, bool *llvm_owned) {
    bool host = !o->cpu || !o->cpu[0] || strcmp(o->cpu, "native") == 0;
    if (host) {
        *cpu = LLVMGetHostCPUName();
        *features = o->features ? dl_mem_strdup(o->features) : LLVMGetHostCPUFeatures();
        *llvm_owned = !o->features;
    } else {
        *cpu = dl_mem_strdup(o->cpu);
        *features = dl_mem_strdup(o->features ? o->features : level_features(o->cpu));
        *llvm_owned = false;
    }
}

static void free_cpu(char *cpu, char *features, const dl_cg_options *o, bool features_llvm) {
    bool host = !o->cpu || !o->cpu[0] || strcmp(o->cpu, "native") == 0;
    if (host) {
        LLVMDisposeMessage(cpu);
    } else {
        free(cpu);
    }
    if (features_llvm) {
        LLVMDisposeMessage(features);
    } else {
        free(features);
    }
}

void dl_cg_target_describe(const dl_cg_options *o, char *buf, size_t size) {
    dl_cg_options def;
    if (!o) {
        dl_cg_options_init(&def);
        o = &def;
    }
    char *triple = LLVMGetDefaultTargetTriple();
    char *cpu, *features;
    bool fl;
    resolve_cpu(o, &cpu, &features, &fl);
    snprintf(buf, size, "%s/%s", triple, cpu);
    LLVMDisposeMessage(triple);
    free_cpu(cpu, features, o, fl);
}

// The DLRT_ISA_* bits a feature string enables (later entries override earlier ones, as in LLVM).
// A CPU name without explicit features contributes nothing: such artifacts are not checked.
static uint32_t isa_of_features(const char *f) {
    static const struct {
        const char *name;
        uint32_t bit;
    } isas[] = {{"avx", DLRT_ISA_AVX},           {"avx2", DLRT_ISA_AVX2},
                {"fma", DLRT_ISA_FMA},           {"f16c", DLRT_ISA_F16C},
                {"avx512f", DLRT_ISA_AVX512F},   {"avx512bw", DLRT_ISA_AVX512BW},
                {"avx512dq", DLRT_ISA_AVX512DQ}, {"avx512vl", DLRT_ISA_AVX512VL},
                {"bmi2", DLRT_ISA_BMI2}};
    uint32_t isa = 0;
    while (*f) {
        const char *e = strchr(f, ',');
        size_t n = e ? (size_t)(e - f) : strlen(f);
        for (size_t i = 0; n > 1 && i < DL_ARRAY_LEN(isas); i++) {
            if (strlen(isas[i].name) == n - 1 && strncmp(f + 1, isas[i].name, n - 1) == 0) {
                isa = f[0] == '+' ? isa | isas[i].bit : isa & ~isas[i].bit;
            }
        }
        f += n + (e ? 1 : 0);
    }
    return isa;
}

// The resolved features plus "+64bit" (x86-64 code needs the 64-bit feature; a CPU name without
// it, such as i686, would make LLVM abort). Heap string or NULL.
static char *features_with_64bit(const char *features) {
    char *f = dl_mem_alloc(strlen(features) + 8);
    if (f) {
        sprintf(f, "%s%s+64bit", features, features[0] ? "," : "");
    }
    return f;
}

char *dl_cg_target_features(const dl_cg_options *o) {
    dl_cg_options def;
    if (!o) {
        dl_cg_options_init(&def);
        o = &def;
    }
    char *cpu, *features;
    bool fl;
    resolve_cpu(o, &cpu, &features, &fl);
    char *f = features_with_64bit(features ? features : "");
    free_cpu(cpu, features, o, fl);
    return f;
}

dl_status dl_cg__x86_make_target_machine(cg *c, const dl_cg_options *o) {
    init_targets();
    char *triple = LLVMGetDefaultTargetTriple();
    char *err = NULL;
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "llvm: no target for %s: %s", triple,
                err ? err : "");
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(triple);
        return DL_ERR_BACKEND;
    }
    char *cpu, *features;
    bool fl;
    resolve_cpu(o, &cpu, &features, &fl);
    char *feats64 = features_with_64bit(features);
    if (!feats64) {
        free_cpu(cpu, features, o, fl);
        LLVMDisposeMessage(triple);
        return DL_ERR_NOMEM;
    }
    c->isa = isa_of_features(feats64);
    LLVMCodeGenOptLevel lvl = o->opt_level <= 0   ? LLVMCodeGenLevelNone
                              : o->opt_level == 1 ? LLVMCodeGenLevelLess
                              : o->opt_level == 2 ? LLVMCodeGenLevelDefault
                                                  : LLVMCodeGenLevelAggressive;
    c->tm = LLVMCreateTargetMachine(target, triple, cpu, feats64, lvl, LLVMRelocPIC,
                                    LLVMCodeModelDefault);
    free(feats64);
    LLVMSetTarget(c->mod, triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(c->tm);
    char *layout = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(c->mod, layout);
    LLVMDisposeMessage(layout);
    LLVMDisposeTargetData(td);
    free_cpu(cpu, features, o, fl);
    LLVMDisposeMessage(triple);
    return c->tm ? DL_OK : DL_ERR_BACKEND;
}
