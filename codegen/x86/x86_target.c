// codegen/x86/x86_target.c — the x86-64 target machine: LLVM's X86 target registered once,
// --cpu / --features validated against the names this LLVM knows (dl_cg_x86_names.h, generated
// by CMake from `llc -mcpu=help`), the psABI levels' implied features, the host CPU and features,
// the DLRT_ISA_* bits an artifact records, and the LLVMTargetMachine (PIC, opt level).
//
// Invariant: the feature string given to LLVM always ends in "+64bit" (LLVM aborts on a CPU
// without 64-bit support), and dl_cg_target_features returns exactly that string, which the
// cache key hashes.
#include "cg_internal.h"
#include "cg_target.h"
#include "x86/x86.h"

#include <llvm-c/Core.h>
#include <llvm-c/Support.h>
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
    // LLVM 19's store-forwarding-block pass aborts the process ("Invalid size request on a
    // scalable vector") on some masked accesses of AVX2 code (a pooled convolution's kernel with
    // 33-column rows): it is only a tuning pass, so it is off.
    const char *const opts[] = {"dlcc", "-x86-disable-avoid-SFB"};
    LLVMParseCommandLineOptions(2, opts, NULL);
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

static dl_status x86_options_check(const dl_cg_options *o, char *err, size_t err_size) {
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

static void x86_describe(const dl_cg_options *o, char *buf, size_t size) {
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
                {"bmi2", DLRT_ISA_BMI2},         {"avx512bf16", DLRT_ISA_AVX512BF16},
                {"amx-tile", DLRT_ISA_AMXTILE},  {"amx-bf16", DLRT_ISA_AMXBF16}};
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

// The exact feature string codegen uses for `o` (the host's features from cpuid when the CPU is
// the host and no features are given, then "+64bit"). Heap string or NULL.
static char *x86_features(const dl_cg_options *o) {
    char *cpu, *features;
    bool fl;
    resolve_cpu(o, &cpu, &features, &fl);
    char *f = features_with_64bit(features ? features : "");
    free_cpu(cpu, features, o, fl);
    return f;
}

static dl_status x86_make_machine(cg *c, const dl_cg_options *o) {
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

// The cache key's target part: the description (triple/CPU as resolved), the user's CPU and
// feature strings, and the exact feature string LLVM gets. No field holds a newline (names are
// checked against LLVM's lists), so the joined string is unambiguous.
static char *x86_key_part(const dl_cg_options *o) {
    char target[256];
    x86_describe(o, target, sizeof target);
    char *feats = x86_features(o);
    if (!feats) {
        return NULL;
    }
    const char *cpu = o->cpu ? o->cpu : "", *uf = o->features ? o->features : "";
    size_t n = strlen(target) + strlen(cpu) + strlen(uf) + strlen(feats) + 8;
    char *k = dl_mem_alloc(n);
    if (k) {
        snprintf(k, n, "%s\n%s\n%s\n%s", target, cpu, uf, feats);
    }
    free(feats);
    return k;
}

// The f32 lanes of the vectors the kernels are tiled for: AVX-512F 16; AVX2 with FMA 8 (the
// 256-bit tiles need both); else SSE's 4. Other dtypes: the same bits over their compute size.
static int64_t x86_vector_width(const cg *c, dl_dtype t) {
    int64_t bits = (c->isa & DLRT_ISA_AVX512F)                           ? 512
                   : (c->isa & DLRT_ISA_AVX2) && (c->isa & DLRT_ISA_FMA) ? 256
                                                                         : 128;
    size_t size =
        t == DL_DT_FLOAT16 || t == DL_DT_BFLOAT16 || t == DL_DT_BOOL ? 4 : dl_dtype_size(t);
    return bits / (int64_t)(8 * size);
}

// libm: float f(float) / float f(float, float) by its own name; the .so links -lm.
static LLVMValueRef x86_math1(cg *c, const char *name, LLVMValueRef a) {
    return cg_call_f32(c, name, &a, 1);
}

static LLVMValueRef x86_math2(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef args[2] = {a, b};
    return cg_call_f32(c, name, args, 2);
}

// Host range ABI: void k(ptr args, i64 begin, i64 end), internal (the kernel table, a global of
// the module, is how the runtime reaches it); the kernel loops over [begin, end).
static void x86_kernel_begin(cg *c, cg_kernel *k, const char *name) {
    k->fn = LLVMAddFunction(c->mod, name, c->t_kernel);
    LLVMSetLinkage(k->fn, LLVMInternalLinkage);
    if (c->isa & DLRT_ISA_AVX512F) {
        // LLVM's tuning for Intel's AVX-512 server cores prefers 256-bit vectors in the loops it
        // vectorises itself (to stay out of the 512-bit frequency licence). The products and
        // convolutions here run on zmm throughout, so that licence is paid anyway, and the
        // compute-bound elementwise loops (the exact Gelu's erf and its gradient: 1M elements
        // 2.5 -> 1.5 ms on a Xeon of family 6 model 207) want the full width.
        static const char key[] = "prefer-vector-width", val[] = "512";
        LLVMAddAttributeAtIndex(
            k->fn, LLVMAttributeFunctionIndex,
            LLVMCreateStringAttribute(c->ctx, key, sizeof key - 1, val, sizeof val - 1));
    }
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "entry");
    LLVMPositionBuilderAtEnd(c->b, entry);
    k->args = LLVMGetParam(k->fn, 0);
    k->begin = LLVMGetParam(k->fn, 1);
    k->end = LLVMGetParam(k->fn, 2);
}

static void x86_kernel_end(cg *c, cg_kernel *k) {
    (void)k;
    LLVMBuildRetVoid(c->b);
}

static dl_status x86_finish_module(cg *c, const uint8_t *plan, size_t plan_len) {
    dl_cg__x86_add_artifact_globals(c, plan, plan_len);
    return DL_OK;
}

// Object code emitted to memory, linked into an ELF shared object.
static dl_status x86_package(cg *c, const dl_cg_options *o, uint8_t **out, size_t *out_len) {
    char *err = NULL;
    LLVMMemoryBufferRef obj = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(c->tm, c->mod, LLVMObjectFile, &err, &obj)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "llvm: cannot emit object code: %s", err);
        LLVMDisposeMessage(err);
        return DL_ERR_BACKEND;
    }
    dl_status st =
        dl_cg__x86_link_object(c, o, LLVMGetBufferStart(obj), LLVMGetBufferSize(obj), out, out_len);
    LLVMDisposeMemoryBuffer(obj);
    return st;
}

const cg_target dl_cg__x86_64_target = {
    .name = "x86-64",
    .index_model = CG_INDEX_HOST_RANGE,
    .packaging = CG_PACKAGE_ELF_SO,
    .options_check = x86_options_check,
    .describe = x86_describe,
    .key_part = x86_key_part,
    .make_machine = x86_make_machine,
    .vector_width = x86_vector_width,
    .math1 = x86_math1,
    .math2 = x86_math2,
    .kernel_begin = x86_kernel_begin,
    .kernel_end = x86_kernel_end,
    .lower_node = dl_cg__lower_node,
    .finish_module = x86_finish_module,
    .package = x86_package,
};
