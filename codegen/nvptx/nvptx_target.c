// codegen/nvptx/nvptx_target.c — the NVPTX target (nvptx64-nvidia-cuda, sm_XX): every op and
// the train step lowered through the same hooks as x86-64 (the shared families and
// codegen/x86/'s loop nests, at vector width 1) and emitted as PTX by LLVM's NVPTX backend
// (dl_cg_emit_ptx; tests/codegen/nvptx_ptxas.c and codegen_ops_sm80/_sm90 assemble it with
// ptxas). Still to come (issue 14): GPU artifacts, the runtime's CUDA device, cuBLASLt.
//
// Kernel ABI: the host range signature kept, void k(ptr args, i64 begin, i64 end), marked a
// kernel entry in !nvvm.annotations (LLVM 19's NVPTX backend reads the kernel mark there). Index
// model: one index per thread, i = begin + ctaid.x * ntid.x + tid.x; a thread with i >= end
// returns at once, the others compute the range [i, i + 1) through the shared lowering's loop.
// Math: libm names map to libdevice's __nv_* functions; libdevice
// ($DLCC_LIBDEVICE, else /usr/local/cuda/nvvm/libdevice/libdevice.10.bc) is linked only when a
// kernel calls one, its functions made internal so that only what is called stays.
#include "cg_internal.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Core.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVPTX_TRIPLE     "nvptx64-nvidia-cuda"
#define LIBDEVICE_PREFIX "__nv_"
#define LIBDEVICE_PATH   "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void init_nvptx_once(void) {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

// The GPUs LLVM 19's NVPTX backend knows (its processor list).
static const char *const sm_names[] = {"sm_50", "sm_52", "sm_53", "sm_60", "sm_61",
                                       "sm_62", "sm_70", "sm_72", "sm_75", "sm_80",
                                       "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};

// The GPU: "cuda:sm_XX" names it in the target; "nvptx" (and plain "cuda") take --cpu sm_XX;
// the default is sm_80.
static const char *sm_of(const dl_cg_options *o) {
    if (o->target && strncmp(o->target, "cuda:", 5) == 0) {
        return o->target + 5;
    }
    return o->cpu && o->cpu[0] ? o->cpu : "sm_80";
}

static dl_status nvptx_options_check(const dl_cg_options *o, char *err, size_t err_size) {
    if (o->target && strncmp(o->target, "cuda:", 5) == 0 && o->cpu && o->cpu[0]) {
        snprintf(err, err_size,
                 "--cpu '%s' does not apply to target '%s': the GPU is named in the target", o->cpu,
                 o->target);
        return DL_ERR_INVALID_ARG;
    }
    const char *sm = sm_of(o);
    bool known = false;
    for (size_t i = 0; i < DL_ARRAY_LEN(sm_names) && !known; i++) {
        known = strcmp(sm, sm_names[i]) == 0;
    }
    if (!known) {
        snprintf(err, err_size,
                 "unknown GPU '%s' (expected sm_XX: sm_70, sm_75, sm_80, sm_86, "
                 "sm_89, sm_90, ...)",
                 sm);
        return DL_ERR_INVALID_ARG;
    }
    if (o->features && o->features[0]) {
        snprintf(err, err_size, "nvptx takes no target features, got '%s'", o->features);
        return DL_ERR_INVALID_ARG;
    }
    return DL_OK;
}

static void nvptx_describe(const dl_cg_options *o, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", NVPTX_TRIPLE, sm_of(o));
}

static char *nvptx_key_part(const dl_cg_options *o) {
    char buf[64];
    nvptx_describe(o, buf, sizeof buf);
    return dl_mem_strdup(buf);
}

static dl_status nvptx_make_machine(cg *c, const dl_cg_options *o) {
    pthread_once(&nvptx_once, init_nvptx_once);
    char *err = NULL;
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(NVPTX_TRIPLE, &target, &err)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "llvm: no target for %s: %s", NVPTX_TRIPLE,
                err ? err : "");
        LLVMDisposeMessage(err);
        return DL_ERR_BACKEND;
    }
    LLVMCodeGenOptLevel lvl = o->opt_level <= 0 ? LLVMCodeGenLevelNone : LLVMCodeGenLevelAggressive;
    c->tm = LLVMCreateTargetMachine(target, NVPTX_TRIPLE, sm_of(o), "", lvl, LLVMRelocDefault,
                                    LLVMCodeModelDefault);
    if (!c->tm) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "llvm: cannot create a target machine for %s/%s",
                NVPTX_TRIPLE, sm_of(o));
        return DL_ERR_BACKEND;
    }
    LLVMSetTarget(c->mod, NVPTX_TRIPLE);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(c->tm);
    char *layout = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(c->mod, layout);
    LLVMDisposeMessage(layout);
    LLVMDisposeTargetData(td);
    c->isa = 0; // no host ISA bits: the GPU is the device
    return DL_OK;
}

// Scalar code per thread: the parallelism is the grid.
static int64_t nvptx_vector_width(const cg *c, dl_dtype t) {
    (void)c;
    (void)t;
    return 1;
}

// libdevice's function for the libm name (erff -> __nv_erff).
static LLVMValueRef libdevice_call(cg *c, const char *name, LLVMValueRef *args, unsigned n) {
    char nv[64];
    snprintf(nv, sizeof nv, LIBDEVICE_PREFIX "%s", name);
    return cg_call_f32(c, nv, args, n);
}

static LLVMValueRef nvptx_math1(cg *c, const char *name, LLVMValueRef a) {
    return libdevice_call(c, name, &a, 1);
}

static LLVMValueRef nvptx_math2(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef args[2] = {a, b};
    return libdevice_call(c, name, args, 2);
}

// A special register as i64: llvm.nvvm.read.ptx.sreg.NAME (i32, never negative).
static LLVMValueRef sreg(cg *c, const char *name) {
    char full[64];
    snprintf(full, sizeof full, "llvm.nvvm.read.ptx.sreg.%s", name);
    unsigned id = LLVMLookupIntrinsicID(full, strlen(full));
    DL_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
    LLVMValueRef v = LLVMBuildCall2(c->b, fty, fn, NULL, 0, name);
    return LLVMBuildZExt(c->b, v, c->t_i64, "");
}

// Grid index model (see the file comment): entry computes i and the bounds check; the body
// block, where the lowering goes on, covers [i, i + 1).
static void nvptx_kernel_begin(cg *c, cg_kernel *k, const char *name) {
    // A PTX identifier has letters, digits, '_' and '$' only: "k3_train.gradsq" becomes
    // "k3_train_gradsq" (the kN_ prefix keeps names unique).
    char ptx_name[256];
    size_t len = 0;
    for (; name[len] && len + 1 < sizeof ptx_name; len++) {
        char ch = name[len];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '$';
        ptx_name[len] = ok ? ch : '_';
    }
    ptx_name[len] = 0;
    k->fn = LLVMAddFunction(c->mod, ptx_name, c->t_kernel); // external: a kernel entry
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "body");
    LLVMBasicBlockRef skip = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "out_of_range");
    LLVMPositionBuilderAtEnd(c->b, entry);
    k->args = LLVMGetParam(k->fn, 0);
    LLVMValueRef begin = LLVMGetParam(k->fn, 1), end = LLVMGetParam(k->fn, 2);
    // One statement per instruction: C leaves the order of argument evaluation open, and the
    // emitted IR (so the PTX) must not depend on the compiler that built dlcc.
    LLVMValueRef ctaid = sreg(c, "ctaid.x");
    LLVMValueRef ntid = sreg(c, "ntid.x");
    LLVMValueRef tid = sreg(c, "tid.x");
    LLVMValueRef block = LLVMBuildMul(c->b, ctaid, ntid, "");
    LLVMValueRef gid = LLVMBuildAdd(c->b, block, tid, "");
    LLVMValueRef i = LLVMBuildAdd(c->b, begin, gid, "i");
    LLVMValueRef in_range = LLVMBuildICmp(c->b, LLVMIntSLT, i, end, "");
    LLVMBuildCondBr(c->b, in_range, body, skip);
    LLVMPositionBuilderAtEnd(c->b, skip);
    LLVMBuildRetVoid(c->b);
    LLVMPositionBuilderAtEnd(c->b, body);
    k->begin = i;
    k->end = LLVMBuildAdd(c->b, i, cg_i64(c, 1), "");
}

// ret void, and the kernel mark: !nvvm.annotations !{ptr @k, !"kernel", i32 1}.
static void nvptx_kernel_end(cg *c, cg_kernel *k) {
    LLVMBuildRetVoid(c->b);
    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(k->fn),
                             LLVMMDStringInContext2(c->ctx, "kernel", 6),
                             LLVMValueAsMetadata(LLVMConstInt(c->t_i32, 1, 0))};
    LLVMValueRef node = LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, md, 3));
    LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations", node);
}

// Every op goes through the lowering hooks x86-64 uses: the shared families and the loop nests
// of codegen/x86/'s families, which are plain LLVM IR sized by vector_width (1 here). Under the
// grid index model each thread computes one index of a kernel's parallel range (a row block of
// a GEMM, a channel of a reduction), so every op is correct on a GPU; the fast GPU kernels
// (cuBLASLt GEMM and convolution, block reductions) are the rest of issue 14.
static dl_status nvptx_lower_node(cg *c, const dl_ir_node *n) {
    return dl_cg__lower_node(c, n);
}

// LLVM math intrinsics the NVPTX backend has no instruction for (it would emit a call to the C
// library's function, which a GPU lacks) and libdevice's function of the same meaning.
static const struct {
    const char *intrinsic, *nv;
} math_intrinsics[] = {
    {"llvm.exp.f32", "__nv_expf"},     {"llvm.exp.f64", "__nv_exp"},
    {"llvm.exp2.f32", "__nv_exp2f"},   {"llvm.exp2.f64", "__nv_exp2"},
    {"llvm.log.f32", "__nv_logf"},     {"llvm.log.f64", "__nv_log"},
    {"llvm.log2.f32", "__nv_log2f"},   {"llvm.log2.f64", "__nv_log2"},
    {"llvm.log10.f32", "__nv_log10f"}, {"llvm.log10.f64", "__nv_log10"},
    {"llvm.pow.f32", "__nv_powf"},     {"llvm.pow.f64", "__nv_pow"},
    {"llvm.sin.f32", "__nv_sinf"},     {"llvm.sin.f64", "__nv_sin"},
    {"llvm.cos.f32", "__nv_cosf"},     {"llvm.cos.f64", "__nv_cos"},
};

// Calls of those intrinsics become calls of libdevice (same signature: the callee is replaced).
// A vector form of one of them is refused: the lowering at vector width 1 makes none.
static dl_status nvptx_map_math_intrinsics(cg *c) {
    LLVMValueRef next;
    for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f; f = next) {
        next = LLVMGetNextFunction(f);
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (!LLVMIsDeclaration(f) || strncmp(name, "llvm.", 5) != 0) {
            continue;
        }
        for (size_t i = 0; i < DL_ARRAY_LEN(math_intrinsics); i++) {
            const char *in = math_intrinsics[i].intrinsic;
            size_t stem = strrchr(in, '.') - in; // "llvm.exp" of "llvm.exp.f32"
            if (strcmp(name, in) == 0) {
                LLVMTypeRef fty = LLVMGlobalGetValueType(f);
                LLVMValueRef nv = LLVMGetNamedFunction(c->mod, math_intrinsics[i].nv);
                if (!nv) {
                    nv = LLVMAddFunction(c->mod, math_intrinsics[i].nv, fty);
                }
                LLVMReplaceAllUsesWith(f, nv);
                LLVMDeleteFunction(f);
                break;
            }
            if (strncmp(name, in, stem) == 0 && strncmp(name + stem, ".v", 2) == 0) {
                dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                        "internal error: nvptx: %s has no libdevice form", name);
                return DL_ERR_BACKEND;
            }
        }
    }
    return DL_OK;
}

static bool calls_libdevice(LLVMModuleRef mod) {
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (LLVMIsDeclaration(f) && strncmp(name, LIBDEVICE_PREFIX, 5) == 0) {
            return true;
        }
    }
    return false;
}

static bool is_kernel(const cg *c, LLVMValueRef f) {
    for (size_t i = 0; i < c->fns.len; i++) {
        if (c->fns.data[i] == f) {
            return true;
        }
    }
    return false;
}

// Links libdevice into the module when a kernel calls it; its definitions become internal, so
// the optimiser keeps (and inlines) only what is called.
static dl_status nvptx_finish_module(cg *c, const uint8_t *plan, size_t plan_len) {
    (void)plan; // the device-image artifact that carries the plan is issue 14
    (void)plan_len;
    DL_TRY(nvptx_map_math_intrinsics(c));
    if (!calls_libdevice(c->mod)) {
        return DL_OK;
    }
    const char *path = getenv("DLCC_LIBDEVICE");
    path = path && path[0] ? path : LIBDEVICE_PATH;
    LLVMMemoryBufferRef buf = NULL;
    char *err = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                "nvptx: a kernel calls a math function, which needs libdevice, and %s cannot be "
                "read: %s (install the CUDA toolkit or set DLCC_LIBDEVICE)",
                path, err ? err : "");
        LLVMDisposeMessage(err);
        return DL_ERR_BACKEND;
    }
    LLVMModuleRef lib = NULL;
    LLVMBool bad = LLVMParseBitcodeInContext2(c->ctx, buf, &lib);
    LLVMDisposeMemoryBuffer(buf);
    if (bad) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "nvptx: %s is not LLVM bitcode", path);
        return DL_ERR_BACKEND;
    }
    // libdevice says nvptx64-nvidia-gpulibs; ours wins, so linking has nothing to warn about.
    LLVMSetTarget(lib, NVPTX_TRIPLE);
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(c->mod));
    if (LLVMLinkModules2(c->mod, lib)) { // consumes lib
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "nvptx: cannot link %s", path);
        return DL_ERR_BACKEND;
    }
    // What libdevice brought becomes internal (after linking: an internal definition would not
    // resolve our declarations): every function that is no kernel, and every global (the device
    // module has none of its own).
    for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (LLVMIsDeclaration(f)) {
            if (strncmp(name, LIBDEVICE_PREFIX, 5) == 0) {
                dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "nvptx: libdevice has no %s", name);
                return DL_ERR_UNSUPPORTED;
            }
        } else if (!is_kernel(c, f)) {
            LLVMSetLinkage(f, LLVMInternalLinkage);
        }
    }
    for (LLVMValueRef g = LLVMGetFirstGlobal(c->mod); g; g = LLVMGetNextGlobal(g)) {
        if (!LLVMIsDeclaration(g)) {
            LLVMSetLinkage(g, LLVMInternalLinkage);
        }
    }
    return DL_OK;
}

// Drops the "// callseq N, M" comments the NVPTX backend writes at calls: N counts calls per
// process, not per module, so the same module would print differently in a second compile of
// one process. The comments go from the '//' to the end of the line; nothing else changes.
static size_t strip_callseq_comments(uint8_t *p, size_t n) {
    static const char tag[] = " // callseq ";
    size_t w = 0;
    for (size_t r = 0; r < n;) {
        if (p[r] == ' ' && n - r >= sizeof tag - 1 && memcmp(p + r, tag, sizeof tag - 1) == 0) {
            while (r < n && p[r] != '\n') {
                r++;
            }
            continue;
        }
        p[w++] = p[r++];
    }
    return w;
}

// PTX text from the optimised module, NUL-terminated (the length leaves the NUL out).
static dl_status nvptx_package(cg *c, const dl_cg_options *o, uint8_t **out, size_t *out_len) {
    (void)o;
    char *err = NULL;
    LLVMMemoryBufferRef asm_buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(c->tm, c->mod, LLVMAssemblyFile, &err, &asm_buf)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "llvm: cannot emit PTX: %s", err);
        LLVMDisposeMessage(err);
        return DL_ERR_BACKEND;
    }
    size_t n = LLVMGetBufferSize(asm_buf);
    uint8_t *p = dl_mem_alloc(n + 1);
    if (p) {
        memcpy(p, LLVMGetBufferStart(asm_buf), n);
        n = strip_callseq_comments(p, n);
        p[n] = 0;
    }
    LLVMDisposeMemoryBuffer(asm_buf);
    if (!p) {
        return DL_ERR_NOMEM;
    }
    *out = p;
    *out_len = n;
    return DL_OK;
}

const cg_target dl_cg__nvptx_target = {
    .name = "nvptx",
    .index_model = CG_INDEX_GPU_GRID,
    .packaging = CG_PACKAGE_DEVICE_IMAGE,
    .options_check = nvptx_options_check,
    .describe = nvptx_describe,
    .key_part = nvptx_key_part,
    .make_machine = nvptx_make_machine,
    .vector_width = nvptx_vector_width,
    .math1 = nvptx_math1,
    .math2 = nvptx_math2,
    .kernel_begin = nvptx_kernel_begin,
    .kernel_end = nvptx_kernel_end,
    .lower_node = nvptx_lower_node,
    .finish_module = nvptx_finish_module,
    .package = nvptx_package,
};
