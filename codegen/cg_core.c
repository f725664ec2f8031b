// codegen/cg_core.c — the compile driver and the helpers every lowering uses: the LLVM context
// and target machine, kernels, loops, typed loads and stores, the optimisation pipeline, the
// plan blob and the artifact (object emitted to memory, linked into a shared object).
//
// Determinism: nothing here depends on addresses, time or paths. Kernels are named k<N>_<op>,
// emitted in node order; the plan is written field by field in a fixed order; the link step runs
// in a private temporary directory whose name never reaches the output (the object's source
// file name is fixed).
#include "cg_internal.h"
#include "dl_tensor_io.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

_Static_assert(DLRT_DT_FLOAT == (int)DL_DT_FLOAT && DLRT_DT_FLOAT16 == (int)DL_DT_FLOAT16 &&
                   DLRT_DT_BFLOAT16 == (int)DL_DT_BFLOAT16 && DLRT_DT_INT32 == (int)DL_DT_INT32 &&
                   DLRT_DT_INT64 == (int)DL_DT_INT64 && DLRT_DT_BOOL == (int)DL_DT_BOOL,
               "dtype codes of the plan equal dl_dtype");

void cg_error(cg *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->node) {
        const dl_ir_node *n = c->node;
        dl_diag(c->d, DL_SEV_ERROR, n->loc, "%s '%s': %s", dl_ir_op_get_info(n->op)->name,
                n->n_outputs ? n->outputs[0]->name : "", msg);
    } else {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "codegen: %s", msg);
    }
}

// ---------------------------------------------------------------------------------------------
// Constants, types, conversions

LLVMValueRef cg_i64(cg *c, int64_t v) {
    return LLVMConstInt(c->t_i64, (unsigned long long)v, 1);
}

LLVMValueRef cg_i32(cg *c, int32_t v) {
    return LLVMConstInt(c->t_i32, (unsigned long long)(int64_t)v, 1);
}

LLVMValueRef cg_f32(cg *c, double v) {
    return LLVMConstReal(c->t_f32, v);
}

LLVMTypeRef cg_compute_type(cg *c, dl_dtype t) {
    switch (t) {
    case DL_DT_FLOAT:
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16:
        return c->t_f32;
    case DL_DT_INT32:
        return c->t_i32;
    case DL_DT_INT64:
        return c->t_i64;
    case DL_DT_BOOL:
        return c->t_i1;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

LLVMValueRef cg_const(cg *c, dl_dtype t, double v) {
    switch (t) {
    case DL_DT_FLOAT:
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16:
        return LLVMConstReal(c->t_f32, v);
    case DL_DT_INT32:
        return LLVMConstInt(c->t_i32, (unsigned long long)(int64_t)v, 1);
    case DL_DT_INT64:
        return LLVMConstInt(c->t_i64, (unsigned long long)(int64_t)v, 1);
    case DL_DT_BOOL:
        return LLVMConstInt(c->t_i1, v != 0.0, 0);
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

static LLVMTypeRef storage_type(cg *c, dl_dtype t) {
    switch (t) {
    case DL_DT_FLOAT:
        return c->t_f32;
    case DL_DT_FLOAT16:
        return c->t_f16;
    case DL_DT_BFLOAT16:
        return c->t_i16;
    case DL_DT_INT32:
        return c->t_i32;
    case DL_DT_INT64:
        return c->t_i64;
    case DL_DT_BOOL:
        return c->t_i8;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

LLVMValueRef cg_load(cg *c, LLVMValueRef base, dl_dtype t, LLVMValueRef idx) {
    LLVMTypeRef st = storage_type(c, t);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, st, base, &idx, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(c->b, st, p, "");
    switch (t) {
    case DL_DT_FLOAT16:
        return LLVMBuildFPExt(c->b, v, c->t_f32, "");
    case DL_DT_BFLOAT16: {
        LLVMValueRef w = LLVMBuildZExt(c->b, v, c->t_i32, "");
        w = LLVMBuildShl(c->b, w, cg_i32(c, 16), "");
        return LLVMBuildBitCast(c->b, w, c->t_f32, "");
    }
    case DL_DT_BOOL:
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->t_i8, 0, 0), "");
    case DL_DT_FLOAT:
    case DL_DT_INT32:
    case DL_DT_INT64:
        return v;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

// f32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN (as dl_f32_to_bf16).
static LLVMValueRef f32_to_bf16(cg *c, LLVMValueRef v) {
    LLVMValueRef x = LLVMBuildBitCast(c->b, v, c->t_i32, "");
    LLVMValueRef lsb =
        LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, x, cg_i32(c, 16), ""), cg_i32(c, 1), "");
    LLVMValueRef r = LLVMBuildAdd(c->b, x, LLVMBuildAdd(c->b, cg_i32(c, 0x7fff), lsb, ""), "");
    LLVMValueRef rounded = LLVMBuildLShr(c->b, r, cg_i32(c, 16), "");
    LLVMValueRef qnan =
        LLVMBuildOr(c->b, LLVMBuildLShr(c->b, x, cg_i32(c, 16), ""), cg_i32(c, 0x40), "");
    LLVMValueRef is_nan = LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, "");
    LLVMValueRef w = LLVMBuildSelect(c->b, is_nan, qnan, rounded, "");
    return LLVMBuildTrunc(c->b, w, c->t_i16, "");
}

void cg_store(cg *c, LLVMValueRef base, dl_dtype t, LLVMValueRef idx, LLVMValueRef v) {
    LLVMTypeRef st = storage_type(c, t);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, st, base, &idx, 1, "");
    switch (t) {
    case DL_DT_FLOAT16:
        v = LLVMBuildFPTrunc(c->b, v, c->t_f16, "");
        break;
    case DL_DT_BFLOAT16:
        v = f32_to_bf16(c, v);
        break;
    case DL_DT_BOOL:
        v = LLVMBuildZExt(c->b, v, c->t_i8, "");
        break;
    case DL_DT_FLOAT:
    case DL_DT_INT32:
    case DL_DT_INT64:
        break;
    case DL_DT_COUNT:
        DL_UNREACHABLE();
    }
    LLVMBuildStore(c->b, v, p);
}

LLVMValueRef cg_convert(cg *c, LLVMValueRef v, dl_dtype from, dl_dtype to) {
    bool ff = dl_dtype_is_float(from), tf = dl_dtype_is_float(to);
    if (ff && tf) {
        if (to == DL_DT_FLOAT16) { // round through the narrow type so the value is representable
            return LLVMBuildFPExt(c->b, LLVMBuildFPTrunc(c->b, v, c->t_f16, ""), c->t_f32, "");
        }
        if (to == DL_DT_BFLOAT16) {
            LLVMValueRef bits = LLVMBuildZExt(c->b, f32_to_bf16(c, v), c->t_i32, "");
            bits = LLVMBuildShl(c->b, bits, cg_i32(c, 16), "");
            return LLVMBuildBitCast(c->b, bits, c->t_f32, "");
        }
        return v;
    }
    LLVMTypeRef tt = cg_compute_type(c, to);
    if (to == DL_DT_BOOL) {
        if (ff) {
            return LLVMBuildFCmp(c->b, LLVMRealUNE, v, cg_f32(c, 0), "");
        }
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
    }
    if (from == DL_DT_BOOL) {
        return tf ? LLVMBuildUIToFP(c->b, v, tt, "") : LLVMBuildZExt(c->b, v, tt, "");
    }
    if (ff) { // float -> int: truncate toward zero, saturating (llvm.fptosi.sat)
        return cg_intrinsic1(c, "llvm.fptosi.sat", tt, v);
    }
    if (tf) {
        return LLVMBuildSIToFP(c->b, v, tt, "");
    }
    return LLVMBuildIntCast2(c->b, v, tt, 1, "");
}

LLVMValueRef cg_intrinsic1(cg *c, const char *name, LLVMTypeRef ty, LLVMValueRef a) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    DL_ASSERT(id != 0);
    LLVMTypeRef tys[2] = {ty, LLVMTypeOf(a)};
    // fptosi.sat is overloaded on result and operand; the math intrinsics on one type.
    size_t n_tys = strncmp(name, "llvm.fpto", 9) == 0 ? 2 : 1;
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, tys, n_tys);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, tys, n_tys);
    return LLVMBuildCall2(c->b, fty, fn, &a, 1, "");
}

LLVMValueRef cg_intrinsic2(cg *c, const char *name, LLVMTypeRef ty, LLVMValueRef a,
                           LLVMValueRef b) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    DL_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &ty, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &ty, 1);
    LLVMValueRef args[2] = {a, b};
    return LLVMBuildCall2(c->b, fty, fn, args, 2, "");
}

static LLVMValueRef libm_fn(cg *c, const char *name, unsigned n, LLVMTypeRef *fty) {
    LLVMTypeRef ps[2] = {c->t_f32, c->t_f32};
    *fty = LLVMFunctionType(c->t_f32, ps, n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(c->mod, name, *fty);
    }
    return fn;
}

LLVMValueRef cg_libm1(cg *c, const char *name, LLVMValueRef a) {
    LLVMTypeRef fty;
    LLVMValueRef fn = libm_fn(c, name, 1, &fty);
    return LLVMBuildCall2(c->b, fty, fn, &a, 1, "");
}

LLVMValueRef cg_libm2(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b) {
    LLVMTypeRef fty;
    LLVMValueRef fn = libm_fn(c, name, 2, &fty);
    LLVMValueRef args[2] = {a, b};
    return LLVMBuildCall2(c->b, fty, fn, args, 2, "");
}

void cg_strides(const dl_ir_type *t, int64_t *strides) {
    int64_t s = 1;
    for (int32_t i = t->rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= t->dims[i].value;
    }
}

void cg_broadcast_strides(const dl_ir_type *t, const dl_ir_type *out, int64_t *strides) {
    int64_t own[DL_MAX_RANK];
    cg_strides(t, own);
    int32_t off = out->rank - t->rank;
    for (int32_t j = 0; j < out->rank; j++) {
        int32_t k = j - off;
        if (k < 0 || t->dims[k].value == 1) {
            strides[j] = 0;
        } else {
            strides[j] = own[k];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels and loops

LLVMValueRef cg_entry_alloca(cg *c, const cg_kernel *k, LLVMTypeRef t, int64_t n) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(k->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) {
        LLVMPositionBuilderBefore(c->b, first);
    } else {
        LLVMPositionBuilderAtEnd(c->b, entry);
    }
    LLVMValueRef a = LLVMBuildAlloca(c->b, LLVMArrayType2(t, (uint64_t)n), "acc");
    LLVMSetAlignment(a, 64);
    LLVMPositionBuilderAtEnd(c->b, cur);
    return a;
}

LLVMValueRef cg_fadd_reassoc(cg *c, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef v = LLVMBuildFAdd(c->b, a, b, "");
    if (LLVMCanValueUseFastMathFlags(v)) {
        LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
    }
    return v;
}

dl_status cg_kernel_begin(cg *c, dl_ir_value *const *vals, size_t n_vals, int64_t range,
                          cg_kernel *k) {
    DL_ASSERT(n_vals <= DL_ARRAY_LEN(k->ptr));
    memset(k, 0, sizeof *k);
    const dl_ir_node *n = c->node;
    char name[96];
    snprintf(name, sizeof name, "k%zu_%s", c->kernels.len,
             n ? dl_ir_op_get_info(n->op)->name : "kernel");
    k->fn = LLVMAddFunction(c->mod, name, c->t_kernel);
    LLVMSetLinkage(k->fn, LLVMInternalLinkage);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "entry");
    LLVMPositionBuilderAtEnd(c->b, entry);
    LLVMValueRef args = LLVMGetParam(k->fn, 0);
    k->args = args;
    k->begin = LLVMGetParam(k->fn, 1);
    k->end = LLVMGetParam(k->fn, 2);
    k->n_args = n_vals;
    // Outputs come first: the leading values defined by the node being lowered are written.
    while (k->n_out < n_vals && n && vals[k->n_out]->def == n) {
        k->n_out++;
    }
    // Lowerings skip empty outputs: a kernel always has work (range >= 1).
    DL_ASSERT(range >= 1);
    k->range = range;
    k->first_arg = (uint32_t)c->args.len;
    for (size_t i = 0; i < n_vals; i++) {
        LLVMValueRef idx = cg_i64(c, (int64_t)i);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->t_ptr, args, &idx, 1, "");
        k->ptr[i] = LLVMBuildLoad2(c->b, c->t_ptr, slot, vals[i]->name);
        if (!DL_VEC_PUSH(&c->args, c->value_buf[vals[i]->id])) {
            return DL_ERR_NOMEM;
        }
    }
    // The pointers are loaded from `args`, so LLVM cannot know which alias: loops vectorise
    // behind runtime alias checks. Buffers live at the same time never overlap (memplan.c); an
    // in-place elementwise kernel's output is exactly its input's memory, read and written at
    // the same element, which those checks handle.
    return DL_OK;
}

dl_status cg_kernel_begin_bufs(cg *c, const uint32_t *bufs, size_t n_bufs, size_t n_out,
                               int64_t range, const char *name, cg_kernel *k) {
    DL_ASSERT(range >= 1 && n_out <= n_bufs);
    memset(k, 0, sizeof *k);
    char fname[96];
    snprintf(fname, sizeof fname, "k%zu_%s", c->kernels.len, name);
    k->fn = LLVMAddFunction(c->mod, fname, c->t_kernel);
    LLVMSetLinkage(k->fn, LLVMInternalLinkage);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, k->fn, "entry");
    LLVMPositionBuilderAtEnd(c->b, entry);
    k->args = LLVMGetParam(k->fn, 0);
    k->begin = LLVMGetParam(k->fn, 1);
    k->end = LLVMGetParam(k->fn, 2);
    k->n_args = n_bufs;
    k->n_out = n_out;
    k->range = range;
    k->name = name;
    k->first_arg = (uint32_t)c->args.len;
    for (size_t i = 0; i < n_bufs; i++) {
        if (!DL_VEC_PUSH(&c->args, bufs[i])) {
            return DL_ERR_NOMEM;
        }
    }
    return DL_OK;
}

LLVMValueRef cg_kernel_arg(cg *c, const cg_kernel *k, size_t i) {
    DL_ASSERT(i < k->n_args);
    LLVMValueRef idx = cg_i64(c, (int64_t)i);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->t_ptr, k->args, &idx, 1, "");
    return LLVMBuildLoad2(c->b, c->t_ptr, slot, "");
}

dl_status cg_kernel_end(cg *c, cg_kernel *k) {
    LLVMBuildRetVoid(c->b);
    const dl_ir_node *n = k->name ? NULL : c->node;
    cg_kernel_rec r = {(uint32_t)c->fns.len,
                       k->first_arg,
                       (uint32_t)k->n_args,
                       (uint32_t)k->n_out,
                       n ? n->id : UINT32_MAX,
                       n ? (uint32_t)n->op : UINT32_MAX,
                       k->range,
                       n ? n->loc.line : 0,
                       k->name             ? k->name
                       : n && n->n_outputs ? n->outputs[0]->name
                                           : ""};
    if (!DL_VEC_PUSH(&c->fns, k->fn) || !DL_VEC_PUSH(&c->kernels, r)) {
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

LLVMValueRef cg_for_begin(cg *c, cg_loop *l, LLVMValueRef lo, LLVMValueRef hi, const char *name) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    l->header = LLVMAppendBasicBlockInContext(c->ctx, fn, "loop");
    l->body = LLVMAppendBasicBlockInContext(c->ctx, fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
    LLVMBuildBr(c->b, l->header);
    LLVMPositionBuilderAtEnd(c->b, l->header);
    l->iv = LLVMBuildPhi(c->b, c->t_i64, name ? name : "i");
    LLVMAddIncoming(l->iv, &lo, &pre, 1);
    LLVMValueRef cond = LLVMBuildICmp(c->b, LLVMIntSLT, l->iv, hi, "");
    LLVMBuildCondBr(c->b, cond, l->body, l->exit);
    LLVMPositionBuilderAtEnd(c->b, l->body);
    return l->iv;
}

void cg_for_end(cg *c, cg_loop *l) {
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMValueRef next = LLVMBuildAdd(c->b, l->iv, cg_i64(c, 1), "");
    LLVMBuildBr(c->b, l->header);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

// ---------------------------------------------------------------------------------------------
// Target

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

void dl_cg_options_init(dl_cg_options *o) {
    memset(o, 0, sizeof *o);
    o->opt_level = 3;
}

const char *dl_cg_llvm_version(void) {
    static char buf[32];
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, pat);
    return buf;
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

static dl_status make_target_machine(cg *c, const dl_cg_options *o) {
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

// ---------------------------------------------------------------------------------------------
// The plan blob

typedef struct blob {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} blob;

static size_t blob_put(blob *b, const void *data, size_t n) {
    size_t at = b->len;
    if (b->oom || !dl__vec_reserve((void **)&b->p, &b->cap, b->len + n, 1)) {
        b->oom = true;
        return at;
    }
    if (data) {
        memcpy(b->p + b->len, data, n);
    } else {
        memset(b->p + b->len, 0, n);
    }
    b->len += n;
    return at;
}

static void blob_align(blob *b, size_t a) {
    // (An out-of-memory blob never grows: stop rather than spin.)
    while (b->len % a && !b->oom) {
        blob_put(b, NULL, 1);
    }
}

// Strings and data are gathered separately and appended at the end.
typedef struct plan_ctx {
    blob strings, data;
} plan_ctx;

static uint32_t put_string(plan_ctx *pc, const char *s, uint32_t *len) {
    *len = (uint32_t)strlen(s);
    return (uint32_t)blob_put(&pc->strings, s, *len);
}

// Appends a tensor's bytes to the data blob (64-byte aligned), returns the offset.
static uint64_t put_data(plan_ctx *pc, const void *p, size_t n) {
    blob_align(&pc->data, DLRT_BUFFER_ALIGN);
    return (uint64_t)blob_put(&pc->data, p, n);
}

static void type_dims64(const dl_ir_type *t, int64_t *dims) {
    for (int32_t i = 0; i < t->rank; i++) {
        dims[i] = t->dims[i].value;
    }
}

static dl_status const_bytes(cg *c, const dl_ir_value *v, plan_ctx *pc, uint64_t *off) {
    int64_t dims[DL_MAX_RANK];
    type_dims64(&v->type, dims);
    dl_tensor t;
    DL_TRY(dl_tensor_alloc(&t, v->type.dtype, v->type.rank, dims));
    int64_t n = dl_tensor_numel(&t);
    const dl_ir_literal *l = v->lit;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = l->is_splat ? 0 : i;
        if (k >= l->n) {
            dl_tensor_free(&t);
            cg_error(c, "const '%s' has %lld values for %lld elements", v->name, (long long)l->n,
                     (long long)n);
            return DL_ERR_INVALID_ARG;
        }
        dl_tensor_set(&t, i, l->f ? l->f[k] : (double)l->i[k]);
    }
    *off = put_data(pc, t.data, dl_tensor_nbytes(&t));
    dl_tensor_free(&t);
    return DL_OK;
}

static dl_status param_init(cg *c, const dl_ir_value *p, plan_ctx *pc, dlrt_plan_tensor *t) {
    const dl_ir_init *in = p->init;
    double fan_in, fan_out;
    dl_ir_type_fans(&p->type, &fan_in, &fan_out);
    t->seed = dl_ir_init_seed(p);
    switch (in->kind) {
    case DL_IR_INIT_ZEROS:
        t->init = DLRT_INIT_FILL;
        t->a = 0;
        return DL_OK;
    case DL_IR_INIT_ONES:
        t->init = DLRT_INIT_FILL;
        t->a = 1;
        return DL_OK;
    case DL_IR_INIT_CONSTANT:
        t->init = DLRT_INIT_FILL;
        t->a = in->a;
        return DL_OK;
    case DL_IR_INIT_UNIFORM:
        t->init = DLRT_INIT_UNIFORM;
        t->a = in->a;
        t->b = in->b;
        return DL_OK;
    case DL_IR_INIT_NORMAL:
        t->init = DLRT_INIT_NORMAL;
        t->a = in->a;
        t->b = in->b;
        return DL_OK;
    case DL_IR_INIT_GLOROT_UNIFORM: {
        // -l + 2l*u computes exactly as a + (b - a)*u with a = -l, b = l.
        double l = sqrt(6.0 / (fan_in + fan_out));
        t->init = DLRT_INIT_UNIFORM;
        t->a = -l;
        t->b = l;
        return DL_OK;
    }
    case DL_IR_INIT_HE_NORMAL:
        t->init = DLRT_INIT_NORMAL;
        t->a = 0;
        t->b = sqrt(2.0 / fan_in);
        return DL_OK;
    case DL_IR_INIT_LITERAL:
    case DL_IR_INIT_FILE: {
        dl_tensor v = {0};
        DL_TRY(dl_ir_param_materialize(c->m, p, &v, c->d));
        t->init = DLRT_INIT_DATA;
        t->data_size = dl_tensor_nbytes(&v);
        t->data_off = put_data(pc, v.data, (size_t)t->data_size);
        dl_tensor_free(&v);
        return DL_OK;
    }
    }
    DL_UNREACHABLE();
}

static dl_status fill_tensor(cg *c, const dl_ir_value *v, uint32_t role, plan_ctx *pc,
                             dlrt_plan_tensor *t) {
    memset(t, 0, sizeof *t);
    t->name_off = put_string(pc, v->name, &t->name_len);
    t->role = role;
    t->dtype = (uint32_t)v->type.dtype;
    t->rank = (uint32_t)v->type.rank;
    type_dims64(&v->type, t->dims);
    t->buffer = c->value_buf[v->id];
    if (role == DLRT_ROLE_PARAM) {
        return param_init(c, v, pc, t);
    }
    return DL_OK;
}

typedef DL_VEC(uint32_t) u32_vec;

// The arena cut into segments for compute_deps: the distinct offsets and ends of every non-empty
// buffer, sorted; buffer b covers segments [seg_first[b], seg_end[b]). An empty buffer touches
// no memory but still gets a segment of its own (its accesses stay ordered like any buffer's).
typedef struct seg_map {
    uint32_t *seg_first, *seg_end; // per buffer
    size_t n_seg;
} seg_map;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t lower_bound_u64(const uint64_t *v, size_t n, uint64_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static dl_status seg_map_build(const dlrt_plan_buffer *bufs, size_t n_buf, seg_map *sm) {
    memset(sm, 0, sizeof *sm);
    uint64_t *cut = dl_mem_alloc((2 * n_buf + 1) * sizeof *cut);
    sm->seg_first = dl_mem_alloc((n_buf ? n_buf : 1) * sizeof(uint32_t));
    sm->seg_end = dl_mem_alloc((n_buf ? n_buf : 1) * sizeof(uint32_t));
    if (!cut || !sm->seg_first || !sm->seg_end) {
        free(cut);
        return DL_ERR_NOMEM;
    }
    size_t nc = 0;
    for (size_t b = 0; b < n_buf; b++) {
        if (bufs[b].size > 0) {
            cut[nc++] = bufs[b].offset;
            cut[nc++] = bufs[b].offset + bufs[b].size;
        }
    }
    qsort(cut, nc, sizeof *cut, cmp_u64);
    size_t nu = 0;
    for (size_t i = 0; i < nc; i++) {
        if (nu == 0 || cut[nu - 1] != cut[i]) {
            cut[nu++] = cut[i];
        }
    }
    size_t n_seg = nu ? nu - 1 : 0; // segment i = [cut[i], cut[i + 1])
    for (size_t b = 0; b < n_buf; b++) {
        if (bufs[b].size > 0) {
            sm->seg_first[b] = (uint32_t)lower_bound_u64(cut, nu, bufs[b].offset);
            sm->seg_end[b] = (uint32_t)lower_bound_u64(cut, nu, bufs[b].offset + bufs[b].size);
        } else {
            sm->seg_first[b] = (uint32_t)n_seg;
            sm->seg_end[b] = (uint32_t)++n_seg;
        }
    }
    sm->n_seg = n_seg;
    free(cut);
    return DL_OK;
}

static void seg_map_fini(seg_map *sm) {
    free(sm->seg_first);
    free(sm->seg_end);
    memset(sm, 0, sizeof *sm);
}

// Kernel dependencies from memory accesses, over one entry point's kernel sequence `seq`
// (indices into c->kernels) whose plan records are base, base + 1, ...: accesses are tracked per
// arena segment (sm), so buffers sharing memory through the memory plan count as the same memory.
// A kernel waits for the last writer of every segment it touches (read-after-write,
// write-after-write), for every reader since that write of each segment it writes
// (write-after-read), and for the previous kernel of its node. Earlier accesses of a segment are
// ordered before those through the chain of writers, so only the nearest ones are listed: the
// lists stay linear in the graph (a chain of in-place kernels on one segment gets one dependency
// each). Kernels never depend on another entry's kernels. Lists are appended to *all (each sorted
// and unique); first/count are indexed by plan record.
static dl_status compute_deps(cg *c, const seg_map *sm, const uint32_t *seq, size_t nk,
                              uint32_t base, u32_vec *all, uint32_t *first, uint32_t *count) {
    size_t ns = sm->n_seg ? sm->n_seg : 1;
    int64_t *last_writer = dl_mem_alloc(ns * sizeof(int64_t));
    u32_vec *readers = dl_mem_calloc(ns, sizeof *readers);
    uint8_t *mark = dl_mem_calloc(nk ? nk : 1, 1);
    dl_status st = DL_OK;
    if (!last_writer || !readers || !mark) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t q = 0; q < sm->n_seg; q++) {
        last_writer[q] = -1;
    }
    for (size_t k = 0; k < nk && st == DL_OK; k++) {
        const cg_kernel_rec *r = &c->kernels.data[seq[k]];
        size_t start = all->len;
        first[base + k] = (uint32_t)start;
#define ADD_DEP(j)                                                                                 \
    do {                                                                                           \
        uint32_t j_ = (uint32_t)(j);                                                               \
        if (j_ != k && !mark[j_]) {                                                                \
            mark[j_] = 1;                                                                          \
            if (!DL_VEC_PUSH(all, j_)) {                                                           \
                st = DL_ERR_NOMEM;                                                                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)
        if (k > 0 && r->node != UINT32_MAX && c->kernels.data[seq[k - 1]].node == r->node) {
            ADD_DEP(k - 1);
        }
        for (uint32_t a = 0; a < r->n_args; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b]; q++) {
                if (last_writer[q] >= 0) {
                    ADD_DEP(last_writer[q]);
                }
                for (size_t i = 0; a < r->n_out && i < readers[q].len; i++) {
                    ADD_DEP(readers[q].data[i]);
                }
            }
        }
#undef ADD_DEP
        // Update the access history after the kernel's own dependencies are known: writes
        // first (a segment the kernel writes needs no reader entry for it too).
        for (uint32_t a = 0; a < r->n_out; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b]; q++) {
                last_writer[q] = (int64_t)k;
                readers[q].len = 0;
            }
        }
        for (uint32_t a = r->n_out; a < r->n_args && st == DL_OK; a++) {
            uint32_t b = c->args.data[r->first_arg + a];
            for (uint32_t q = sm->seg_first[b]; q < sm->seg_end[b] && st == DL_OK; q++) {
                if (last_writer[q] == (int64_t)k ||
                    (readers[q].len > 0 && readers[q].data[readers[q].len - 1] == (uint32_t)k)) {
                    continue;
                }
                if (!DL_VEC_PUSH(&readers[q], (uint32_t)k)) {
                    st = DL_ERR_NOMEM;
                }
            }
        }
        for (size_t q = start; q < all->len; q++) {
            mark[all->data[q]] = 0;
            all->data[q] += base; // positions in the sequence -> plan records
        }
        // Sorted lists make the plan independent of discovery order (and easy to read).
        for (size_t i = start + 1; i < all->len; i++) {
            uint32_t v = all->data[i];
            size_t j = i;
            while (j > start && all->data[j - 1] > v) {
                all->data[j] = all->data[j - 1];
                j--;
            }
            all->data[j] = v;
        }
        count[base + k] = (uint32_t)(all->len - start);
    }
out:
    for (size_t q = 0; readers && q < sm->n_seg; q++) {
        free(readers[q].data);
    }
    free(readers);
    free(last_writer);
    free(mark);
    return st;
}

static dl_status build_plan(cg *c, const char *target, blob *out) {
    const dl_ir_module *m = c->m;
    plan_ctx pc = {0};
    dl_status st = DL_OK;
    size_t n_val = m->values.len;
    size_t n_buf = n_val + c->extra.len;
    size_t n_ten = m->inputs.len + m->outputs.len + m->params.len + c->states.len;
    size_t n_inf = c->infer_kernels.len, n_tr = c->train_kernels.len, nk = n_inf + n_tr;
    dlrt_plan_buffer *bufs = dl_mem_calloc(n_buf ? n_buf : 1, sizeof *bufs);
    dlrt_plan_tensor *tens = dl_mem_calloc(n_ten ? n_ten : 1, sizeof *tens);
    dlrt_plan_kernel *ks = dl_mem_calloc(nk ? nk : 1, sizeof *ks);
    uint32_t *dep_first = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    uint32_t *dep_count = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    uint32_t *seq = dl_mem_calloc(nk ? nk : 1, sizeof(uint32_t));
    dlrt_plan_hparam *hps = dl_mem_calloc(c->hparams.len ? c->hparams.len : 1, sizeof *hps);
    u32_vec deps = {0};
    dl_cg_memplan mp = {0};
    seg_map sm = {0};
    dlrt_plan_fn *fsig = dl_mem_calloc(c->fns.len ? c->fns.len : 1, sizeof *fsig);
    DL_VEC(uint64_t) fext = {0};
    if (!bufs || !tens || !ks || !dep_first || !dep_count || !seq || !hps || !fsig) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_inf; i++) {
        seq[i] = c->infer_kernels.data[i];
    }
    for (size_t i = 0; i < n_tr; i++) {
        seq[n_inf + i] = c->train_kernels.data[i];
    }
    for (size_t i = 0; i < n_val; i++) {
        const dl_ir_value *v = m->values.data[i];
        bufs[i].size = (uint64_t)dl_ir_type_numel(&v->type) * dl_dtype_size(v->type.dtype);
        if (i == c->seed_buf && c->seed_init) {
            // The loss seed of a train step with loss scaling: session state that starts at
            // the initial scale and that the prologue kernel rewrites each step.
            float f = (float)*c->seed_init;
            bufs[i].kind = DLRT_BUF_STATE;
            bufs[i].flags = DLRT_BUF_F_INIT_DATA;
            bufs[i].data_off = put_data(&pc, &f, sizeof f);
            continue;
        }
        if (i == c->counter_buf) {
            // The train step's RNG counter: session state starting at the const's value (0),
            // incremented by the prologue kernel at every call.
            bufs[i].kind = DLRT_BUF_STATE;
            bufs[i].flags = DLRT_BUF_F_INIT_DATA;
            if ((st = const_bytes(c, v, &pc, &bufs[i].data_off)) != DL_OK) {
                goto out;
            }
            continue;
        }
        switch (v->kind) {
        case DL_IR_VAL_INPUT:
            bufs[i].kind = DLRT_BUF_INPUT;
            break;
        case DL_IR_VAL_PARAM:
            bufs[i].kind = DLRT_BUF_PARAM;
            break;
        case DL_IR_VAL_CONST:
            bufs[i].kind = DLRT_BUF_CONST;
            if ((st = const_bytes(c, v, &pc, &bufs[i].data_off)) != DL_OK) {
                goto out;
            }
            break;
        case DL_IR_VAL_NODE:
            bufs[i].kind = DLRT_BUF_TEMP;
            break;
        }
    }
    for (size_t i = 0; i < c->extra.len; i++) {
        const cg_extra_buf *e = &c->extra.data[i];
        bufs[n_val + i].size = e->size;
        bufs[n_val + i].kind = e->kind;
        bufs[n_val + i].flags = e->flags;
        if (e->init) {
            bufs[n_val + i].data_off = put_data(&pc, e->init, (size_t)e->size);
        }
    }
    // The memory plan, then the dependencies it makes necessary (overlapping buffers are one
    // memory).
    if ((st = dl_cg__memplan(c, bufs, n_buf, &mp)) != DL_OK ||
        (st = seg_map_build(bufs, n_buf, &sm)) != DL_OK ||
        (st = compute_deps(c, &sm, c->infer_kernels.data, n_inf, 0, &deps, dep_first, dep_count)) !=
            DL_OK ||
        (st = compute_deps(c, &sm, c->train_kernels.data, n_tr, (uint32_t)n_inf, &deps, dep_first,
                           dep_count)) != DL_OK) {
        goto out;
    }
    // The kernel table's signatures: what each compiled kernel iterates over and touches (the
    // sizes its arguments had when it was compiled), so the runtime can check any plan against
    // them. Kernel table entry i is kernel record i.
    for (size_t i = 0; i < c->fns.len; i++) {
        const cg_kernel_rec *r = &c->kernels.data[i];
        DL_ASSERT(r->fn == i);
        fsig[i] = (dlrt_plan_fn){.range = r->range,
                                 .n_args = r->n_args,
                                 .n_out = r->n_out,
                                 .first_extent = (uint32_t)fext.len};
        for (uint32_t a = 0; a < r->n_args; a++) {
            if (!DL_VEC_PUSH(&fext, bufs[c->args.data[r->first_arg + a]].size)) {
                st = DL_ERR_NOMEM;
                goto out;
            }
        }
    }
    size_t t = 0;
    for (size_t i = 0; i < m->inputs.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->inputs.data[i], DLRT_ROLE_INPUT, &pc, &tens[t++]);
    }
    for (size_t i = 0; i < m->outputs.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->outputs.data[i], DLRT_ROLE_OUTPUT, &pc, &tens[t++]);
    }
    for (size_t i = 0; i < m->params.len && st == DL_OK; i++) {
        st = fill_tensor(c, m->params.data[i], DLRT_ROLE_PARAM, &pc, &tens[t++]);
    }
    if (st != DL_OK) {
        goto out;
    }
    for (size_t i = 0; i < c->states.len; i++) {
        const cg_state_tensor *sv = &c->states.data[i];
        dlrt_plan_tensor *pt = &tens[t++];
        memset(pt, 0, sizeof *pt);
        pt->name_off = put_string(&pc, sv->name, &pt->name_len);
        pt->role = DLRT_ROLE_STATE;
        pt->dtype = (uint32_t)sv->param->type.dtype;
        pt->rank = (uint32_t)sv->param->type.rank;
        type_dims64(&sv->param->type, pt->dims);
        pt->buffer = sv->buf;
    }
    for (size_t i = 0; i < c->hparams.len; i++) {
        hps[i] = c->hparams.data[i];
        hps[i].name_off = put_string(&pc, c->hparam_names.data[i], &hps[i].name_len);
    }
    for (size_t i = 0; i < nk; i++) {
        const cg_kernel_rec *r = &c->kernels.data[seq[i]];
        ks[i] = (dlrt_plan_kernel){.fn = r->fn,
                                   .first_arg = r->first_arg,
                                   .n_args = r->n_args,
                                   .n_out = r->n_out,
                                   .range = r->range,
                                   .op = r->op,
                                   .src_line = r->src_line,
                                   .first_dep = dep_first[i],
                                   .n_deps = dep_count[i]};
        ks[i].name_off = put_string(&pc, r->name, &ks[i].name_len);
        seq[i] = (uint32_t)i; // now the entry lists: plan records in order
    }
    dlrt_plan_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, DLRT_PLAN_MAGIC, 8);
    h.version = DLRT_FORMAT_VERSION;
    h.hdr_size = sizeof h;
    h.n_buffers = (uint32_t)n_buf;
    h.n_tensors = (uint32_t)n_ten;
    h.n_kernels = (uint32_t)nk;
    h.n_args = (uint32_t)c->args.len;
    h.n_entry_kernels = (uint32_t)nk;
    h.n_fns = (uint32_t)c->fns.len;
    h.entry_first[DLRT_ENTRY_INFER] = 0;
    h.entry_count[DLRT_ENTRY_INFER] = (uint32_t)n_inf;
    h.entry_first[DLRT_ENTRY_TRAIN_STEP] = (uint32_t)n_inf;
    h.entry_count[DLRT_ENTRY_TRAIN_STEP] = (uint32_t)n_tr;
    h.model_name_off = put_string(&pc, m->name, &h.model_name_len);
    h.target_off = put_string(&pc, target, &h.target_len);
    h.optimizer = c->has_train ? c->optimizer : DLRT_OPTIM_NONE;
    h.hyper_buffer = c->has_train ? c->hyper_buf : UINT32_MAX;
    h.loss_buffer = c->has_train ? c->loss_buf : UINT32_MAX;
    h.seed_buffer = c->has_train && c->seed_init ? c->seed_buf : UINT32_MAX;
    h.n_hparams = (uint32_t)c->hparams.len;
    h.counter_buffer = c->has_train ? c->counter_buf : UINT32_MAX;
    h.arena_size = mp.arena_size;

    blob_put(out, NULL, sizeof h);
    blob_align(out, 8);
    h.off_buffers = blob_put(out, bufs, n_buf * sizeof *bufs);
    blob_align(out, 8);
    h.off_tensors = blob_put(out, tens, n_ten * sizeof *tens);
    blob_align(out, 8);
    h.off_kernels = blob_put(out, ks, nk * sizeof *ks);
    blob_align(out, 8);
    h.off_hparams = blob_put(out, hps, c->hparams.len * sizeof *hps);
    blob_align(out, 8);
    h.off_fns = blob_put(out, fsig, c->fns.len * sizeof *fsig);
    blob_align(out, 8);
    h.n_fn_extents = (uint32_t)fext.len;
    h.off_fn_extents = blob_put(out, fext.data, fext.len * sizeof(uint64_t));
    blob_align(out, 8);
    h.off_args = blob_put(out, c->args.data, c->args.len * sizeof(uint32_t));
    blob_align(out, 8);
    h.off_entry_kernels = blob_put(out, seq, nk * sizeof(uint32_t));
    blob_align(out, 8);
    h.n_deps = (uint32_t)deps.len;
    h.isa = c->isa;
    h.off_deps = blob_put(out, deps.data, deps.len * sizeof(uint32_t));
    blob_align(out, 8);
    h.off_strings = blob_put(out, pc.strings.p, pc.strings.len);
    h.size_strings = pc.strings.len;
    blob_align(out, DLRT_BUFFER_ALIGN);
    h.off_data = blob_put(out, pc.data.p, pc.data.len);
    h.size_data = pc.data.len;
    h.total_size = out->len;
    if (pc.strings.oom || pc.data.oom || out->oom) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    memcpy(out->p, &h, sizeof h);
out:
    free(bufs);
    free(tens);
    free(ks);
    free(dep_first);
    free(dep_count);
    free(seq);
    free(hps);
    free(deps.data);
    free(fsig);
    free(fext.data);
    seg_map_fini(&sm);
    dl_cg__memplan_fini(&mp);
    free(pc.strings.p);
    free(pc.data.p);
    return st;
}

// Adds @dlcc_plan, @dlcc_fns and the exported descriptor @dlcc_artifact_v1.
static void add_artifact_globals(cg *c, const blob *plan) {
    LLVMValueRef pdata =
        LLVMConstStringInContext(c->ctx, (const char *)plan->p, (unsigned)plan->len, 1);
    LLVMValueRef gplan = LLVMAddGlobal(c->mod, LLVMTypeOf(pdata), "dlcc_plan");
    LLVMSetInitializer(gplan, pdata);
    LLVMSetGlobalConstant(gplan, 1);
    LLVMSetLinkage(gplan, LLVMPrivateLinkage);
    LLVMSetAlignment(gplan, DLRT_BUFFER_ALIGN);

    LLVMTypeRef fns_ty = LLVMArrayType2(c->t_ptr, c->fns.len);
    LLVMValueRef gfns = LLVMAddGlobal(c->mod, fns_ty, "dlcc_fns");
    LLVMSetInitializer(gfns, LLVMConstArray2(c->t_ptr, c->fns.data, c->fns.len));
    LLVMSetGlobalConstant(gfns, 1);
    LLVMSetLinkage(gfns, LLVMPrivateLinkage);

    LLVMTypeRef fields[5] = {c->t_i32, c->t_i32, c->t_ptr, c->t_i64, c->t_ptr};
    LLVMTypeRef desc_ty = LLVMStructTypeInContext(c->ctx, fields, 5, 0);
    LLVMValueRef vals[5] = {LLVMConstInt(c->t_i32, DLRT_FORMAT_VERSION, 0),
                            LLVMConstInt(c->t_i32, c->fns.len, 0), gplan,
                            LLVMConstInt(c->t_i64, plan->len, 0), gfns};
    LLVMValueRef gdesc = LLVMAddGlobal(c->mod, desc_ty, DLRT_ARTIFACT_SYMBOL);
    LLVMSetInitializer(gdesc, LLVMConstNamedStruct(desc_ty, vals, 5));
    LLVMSetGlobalConstant(gdesc, 1);
    LLVMSetVisibility(gdesc, LLVMDefaultVisibility);
}

// ---------------------------------------------------------------------------------------------
// Linking

static char *find_on_path(const char *name) {
    if (strchr(name, '/')) {
        return access(name, X_OK) == 0 ? dl_mem_strdup(name) : NULL;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char buf[4096];
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '/';
            strcpy(buf + n + 1, name);
            if (access(buf, X_OK) == 0) {
                return dl_mem_strdup(buf);
            }
        }
        p = e ? e + 1 : p + n;
    }
    return NULL;
}

static bool is_lld(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "ld.lld", 6) == 0 || strncmp(base, "ld", 2) == 0;
}

static dl_status run_linker(cg *c, const dl_cg_options *o, const char *dir, const char *obj,
                            const char *so) {
    const char *cands[] = {o->linker, getenv("DLCC_LD"), "ld.lld-19", "ld.lld", "cc"};
    char *ld = NULL;
    for (size_t i = 0; i < DL_ARRAY_LEN(cands) && !ld; i++) {
        if (cands[i] && cands[i][0]) {
            ld = find_on_path(cands[i]);
            if (!ld && i < 2) {
                dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                        "linker '%s' not found (set by %s); install lld-19 or unset it", cands[i],
                        i == 0 ? "--linker" : "DLCC_LD");
                return DL_ERR_BACKEND;
            }
        }
    }
    if (!ld) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                "no linker found: dlcc links artifacts with ld.lld-19, ld.lld or cc; install "
                "Debian's lld-19 (tools/setup.sh does) or set DLCC_LD");
        return DL_ERR_BACKEND;
    }
    char log[4200];
    snprintf(log, sizeof log, "%s/link.log", dir);
    const char *argv_lld[] = {ld,
                              "-shared",
                              "--hash-style=gnu",
                              "-z",
                              "noexecstack",
                              "-o",
                              so,
                              obj,
                              "-L/usr/lib/x86_64-linux-gnu",
                              "-L/lib/x86_64-linux-gnu",
                              "--as-needed",
                              "-lm",
                              NULL};
    const char *argv_cc[] = {ld, "-shared", "-o", so, obj, "-lm", NULL};
    const char *const *argv = is_lld(ld) ? argv_lld : argv_cc;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    // posix_spawn takes char *const[] for historical reasons and never writes the strings.
    char *const *av;
    memcpy(&av, &argv, sizeof av);
    int rc = posix_spawn(&pid, ld, &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    dl_status st = DL_OK;
    if (rc != 0) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot run linker %s: %s", ld, strerror(rc));
        st = DL_ERR_BACKEND;
    } else {
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            char *text = NULL;
            size_t len = 0;
            if (dl_read_file(log, &text, &len) != DL_OK) {
                text = NULL;
            }
            dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "linker %s failed: %s", ld,
                    text && len ? text : "(no output)");
            free(text);
            st = DL_ERR_BACKEND;
        }
    }
    free(ld);
    return st;
}

static dl_status link_object(cg *c, const dl_cg_options *o, const char *obj_data, size_t obj_len,
                             uint8_t **out, size_t *out_len) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/dlcc-link-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot create a temporary directory in %s: %s",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return DL_ERR_IO;
    }
    char obj[4200], so[4200], log[4200];
    snprintf(obj, sizeof obj, "%s/kernels.o", dir);
    snprintf(so, sizeof so, "%s/artifact.so", dir);
    snprintf(log, sizeof log, "%s/link.log", dir);
    dl_status st = dl_write_file_atomic(obj, obj_data, obj_len);
    if (st != DL_OK) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot write %s: %s", obj, strerror(errno));
    } else if ((st = run_linker(c, o, dir, obj, so)) == DL_OK) {
        char *bytes = NULL;
        st = dl_read_file(so, &bytes, out_len);
        *out = (uint8_t *)bytes;
        if (st != DL_OK) {
            dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot read the linked artifact: %s",
                    strerror(errno));
        }
    }
    unlink(obj);
    unlink(so);
    unlink(log);
    rmdir(dir);
    return st;
}

// Appends the checksum trailer (runtime/dlrt_format.h) to the linked object in *out.
static dl_status append_trailer(uint8_t **out, size_t *len) {
    size_t n = *len + sizeof(dlrt_artifact_trailer);
    uint8_t *p = dl_mem_realloc(*out, n);
    if (!p) {
        free(*out);
        *out = NULL;
        *len = 0;
        return DL_ERR_NOMEM;
    }
    dlrt_artifact_trailer t;
    memset(&t, 0, sizeof t);
    memcpy(t.magic, DLRT_TRAILER_MAGIC, sizeof t.magic);
    t.version = DLRT_FORMAT_VERSION;
    t.size = n;
    memcpy(p + *len, &t, sizeof t);
    dl_hash128 h = dl_hash128_of(p, n - 16);
    t.hash_lo = h.lo;
    t.hash_hi = h.hi;
    memcpy(p + *len, &t, sizeof t);
    *out = p;
    *len = n;
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// The driver

static void cg_fini(cg *c) {
    if (c->b) {
        LLVMDisposeBuilder(c->b);
    }
    if (c->mod) {
        LLVMDisposeModule(c->mod);
    }
    if (c->tm) {
        LLVMDisposeTargetMachine(c->tm);
    }
    if (c->ctx) {
        LLVMContextDispose(c->ctx);
    }
    free(c->value_buf);
    free(c->fns.data);
    free(c->kernels.data);
    free(c->args.data);
    free(c->infer_kernels.data);
    free(c->train_kernels.data);
    free(c->node_k0);
    free(c->node_k1);
    for (size_t i = 0; i < c->extra.len; i++) {
        free(c->extra.data[i].init);
    }
    free(c->extra.data);
    for (size_t i = 0; i < c->states.len; i++) {
        free(c->states.data[i].name);
    }
    free(c->states.data);
    free(c->hparams.data);
    free(c->hparam_names.data);
    free(c->seed_init);
}

dl_status dl_cg_compile(const dl_ir_module *m, const dl_cg_options *o, dl_diags *d, uint8_t **out,
                        size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    dl_cg_options def;
    if (!o) {
        dl_cg_options_init(&def);
        o = &def;
    }
    char oerr[256];
    if (dl_cg_options_check(o, oerr, sizeof oerr) != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", oerr);
        return DL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < m->values.len; i++) {
        if (m->values.data[i]->type.rank < 0) {
            dl_diag(d, DL_SEV_ERROR, m->values.data[i]->loc,
                    "codegen: the type of '%s' is unknown (run shape inference first)",
                    m->values.data[i]->name);
            return DL_ERR_INVALID_ARG;
        }
    }
    cg c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.d = d;
    c.ctx = LLVMContextCreate();
    c.mod = LLVMModuleCreateWithNameInContext("dlcc", c.ctx);
    LLVMSetSourceFileName(c.mod, "dlcc", 4);
    c.b = LLVMCreateBuilderInContext(c.ctx);
    c.t_void = LLVMVoidTypeInContext(c.ctx);
    c.t_i1 = LLVMInt1TypeInContext(c.ctx);
    c.t_i8 = LLVMInt8TypeInContext(c.ctx);
    c.t_i16 = LLVMInt16TypeInContext(c.ctx);
    c.t_i32 = LLVMInt32TypeInContext(c.ctx);
    c.t_i64 = LLVMInt64TypeInContext(c.ctx);
    c.t_f16 = LLVMHalfTypeInContext(c.ctx);
    c.t_f32 = LLVMFloatTypeInContext(c.ctx);
    c.t_f64 = LLVMDoubleTypeInContext(c.ctx);
    c.t_ptr = LLVMPointerTypeInContext(c.ctx, 0);
    LLVMTypeRef kps[3] = {c.t_ptr, c.t_i64, c.t_i64};
    c.t_kernel = LLVMFunctionType(c.t_void, kps, 3, 0);
    dl_status st = make_target_machine(&c, o);
    blob plan = {0};
    LLVMMemoryBufferRef obj = NULL;
    if (st != DL_OK) {
        goto out;
    }
    c.value_buf = dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof(uint32_t));
    if (!c.value_buf) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < m->values.len; i++) {
        c.value_buf[i] = (uint32_t)i; // one buffer per value; memplan.c places them
    }
    c.hyper_buf = c.loss_buf = c.seed_buf = c.counter_buf = UINT32_MAX;
    c.optimizer = DLRT_OPTIM_NONE;
    c.node_k0 = dl_mem_calloc(m->nodes.len ? m->nodes.len : 1, sizeof(uint32_t));
    c.node_k1 = dl_mem_calloc(m->nodes.len ? m->nodes.len : 1, sizeof(uint32_t));
    if (!c.node_k0 || !c.node_k1) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    // Every node is lowered once. Forward nodes [0, n_fwd) make the infer entry; the train step
    // (lower_train.c) reuses the LLVM functions of the forward nodes it needs.
    size_t n_fwd = m->has_backward ? m->n_fwd_nodes : m->nodes.len;
    for (size_t i = 0; i < m->nodes.len && st == DL_OK; i++) {
        c.node = m->nodes.data[i];
        DL_ASSERT(c.node->id == i);
        c.node_k0[i] = (uint32_t)c.kernels.len;
        st = dl_cg__lower_node(&c, c.node);
        c.node_k1[i] = (uint32_t)c.kernels.len;
        for (uint32_t k = c.node_k0[i]; st == DL_OK && i < n_fwd && k < c.node_k1[i]; k++) {
            if (!DL_VEC_PUSH(&c.infer_kernels, k)) {
                st = DL_ERR_NOMEM;
            }
        }
    }
    c.node = NULL;
    if (st == DL_OK && m->has_backward && m->train) {
        st = dl_cg__lower_train(&c);
    }
    if (st != DL_OK) {
        goto out;
    }
    char target[256];
    dl_cg_target_describe(o, target, sizeof target);
    if ((st = build_plan(&c, target, &plan)) != DL_OK) {
        goto out;
    }
    add_artifact_globals(&c, &plan);
    char *err = NULL;
    if (LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &err)) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "internal error: invalid LLVM IR: %s", err);
        LLVMDisposeMessage(err);
        st = DL_ERR_BACKEND;
        goto out;
    }
    LLVMDisposeMessage(err);
    char passes[32];
    snprintf(passes, sizeof passes, "default<O%d>",
             o->opt_level < 0   ? 0
             : o->opt_level > 3 ? 3
                                : o->opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, o->opt_level >= 2);
    LLVMErrorRef perr = LLVMRunPasses(c.mod, passes, c.tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (perr) {
        char *msg = LLVMGetErrorMessage(perr);
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "llvm: optimisation failed: %s", msg);
        LLVMDisposeErrorMessage(msg);
        st = DL_ERR_BACKEND;
        goto out;
    }
    if (LLVMTargetMachineEmitToMemoryBuffer(c.tm, c.mod, LLVMObjectFile, &err, &obj)) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "llvm: cannot emit object code: %s", err);
        LLVMDisposeMessage(err);
        st = DL_ERR_BACKEND;
        goto out;
    }
    st = link_object(&c, o, LLVMGetBufferStart(obj), LLVMGetBufferSize(obj), out, out_len);
    if (st == DL_OK) {
        st = append_trailer(out, out_len);
    }
out:
    if (obj) {
        LLVMDisposeMemoryBuffer(obj);
    }
    free(plan.p);
    cg_fini(&c);
    return st;
}
