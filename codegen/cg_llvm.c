// codegen/cg_llvm.c — the LLVM helpers every lowering uses: diagnostics at the node being
// lowered, constants, storage and compute types, typed loads and stores (with the float16 /
// bfloat16 conversions), casts, intrinsic calls, math calls (through the target), strides,
// kernels (begin/end; the target gives the ABI and index model, cg_target.h) and counted loops.
//
// Determinism: kernels are named k<N>_<op>, N counting kernels in lowering order; nothing here
// depends on addresses.
#include "cg_internal.h"

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_error(cg *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (c->node) {
        dl_ir_node_vdiag(c->d, DL_SEV_ERROR, c->node, DL_NO_LOC, NULL, fmt, ap);
    } else {
        char msg[1024];
        vsnprintf(msg, sizeof msg, fmt, ap);
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "codegen: %s", msg);
    }
    va_end(ap);
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

// A constant i32 of the shape of t (i32 or <n x i32>).
static LLVMValueRef i32_like(cg *c, LLVMTypeRef t, int32_t k) {
    LLVMValueRef s = cg_i32(c, k);
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) {
        return s;
    }
    LLVMValueRef e[CG_MAX_LANES];
    unsigned n = LLVMGetVectorSize(t);
    DL_ASSERT(n <= CG_MAX_LANES);
    for (unsigned l = 0; l < n; l++) {
        e[l] = s;
    }
    return LLVMConstVector(e, n);
}

// f32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN (as dl_f32_to_bf16). A
// float or a vector of floats (then <n x i16>, lane by lane the same bits).
LLVMValueRef cg_f32_to_bf16(cg *c, LLVMValueRef v) {
    LLVMTypeRef ft = LLVMTypeOf(v);
    bool vec = LLVMGetTypeKind(ft) == LLVMVectorTypeKind;
    LLVMTypeRef it = vec ? LLVMVectorType(c->t_i32, LLVMGetVectorSize(ft)) : c->t_i32;
    LLVMTypeRef ht = vec ? LLVMVectorType(c->t_i16, LLVMGetVectorSize(ft)) : c->t_i16;
    LLVMValueRef x = LLVMBuildBitCast(c->b, v, it, "");
    LLVMValueRef k16 = i32_like(c, it, 16);
    LLVMValueRef lsb = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, x, k16, ""), i32_like(c, it, 1), "");
    LLVMValueRef r =
        LLVMBuildAdd(c->b, x, LLVMBuildAdd(c->b, i32_like(c, it, 0x7fff), lsb, ""), "");
    LLVMValueRef rounded = LLVMBuildLShr(c->b, r, k16, "");
    LLVMValueRef qnan =
        LLVMBuildOr(c->b, LLVMBuildLShr(c->b, x, k16, ""), i32_like(c, it, 0x40), "");
    LLVMValueRef is_nan = LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, "");
    LLVMValueRef w = LLVMBuildSelect(c->b, is_nan, qnan, rounded, "");
    return LLVMBuildTrunc(c->b, w, ht, "");
}

static LLVMValueRef f32_to_bf16(cg *c, LLVMValueRef v) {
    return cg_f32_to_bf16(c, v);
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

void cg_prefetch(cg *c, LLVMValueRef p) {
    static const char name[] = "llvm.prefetch";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    DL_ASSERT(id != 0);
    LLVMTypeRef pt = LLVMTypeOf(p);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &pt, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &pt, 1);
    // rw 0 (read), locality 2 (L2: used by the next block, not this one), data cache
    LLVMValueRef args[4] = {p, cg_i32(c, 0), cg_i32(c, 2), cg_i32(c, 1)};
    LLVMBuildCall2(c->b, fty, fn, args, 4, "");
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

// Math functions go through the target: libm on x86-64, libdevice on NVPTX.
LLVMValueRef cg_call_f32(cg *c, const char *symbol, LLVMValueRef *args, unsigned n) {
    DL_ASSERT(n == 1 || n == 2);
    LLVMTypeRef ps[2] = {c->t_f32, c->t_f32};
    LLVMTypeRef fty = LLVMFunctionType(c->t_f32, ps, n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, symbol);
    if (!fn) {
        fn = LLVMAddFunction(c->mod, symbol, fty);
    }
    return LLVMBuildCall2(c->b, fty, fn, args, n, "");
}

LLVMValueRef cg_libm1(cg *c, const char *name, LLVMValueRef a) {
    return c->target->math1(c, name, a);
}

LLVMValueRef cg_libm2(cg *c, const char *name, LLVMValueRef a, LLVMValueRef b) {
    return c->target->math2(c, name, a, b);
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
    c->target->kernel_begin(c, k, name); // the ABI and index model: k->fn, args, begin, end
    LLVMValueRef args = k->args;
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
    c->target->kernel_begin(c, k, fname);
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

dl_status cg_kernel_add_buf(cg *c, cg_kernel *k, uint32_t buf) {
    DL_ASSERT(k->n_args < DL_ARRAY_LEN(k->ptr) && k->first_arg + k->n_args == c->args.len);
    LLVMValueRef idx = cg_i64(c, (int64_t)k->n_args);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->t_ptr, k->args, &idx, 1, "");
    k->ptr[k->n_args++] = LLVMBuildLoad2(c->b, c->t_ptr, slot, "extra");
    return DL_VEC_PUSH(&c->args, buf) ? DL_OK : DL_ERR_NOMEM;
}

dl_status cg_extra_buffer(cg *c, uint64_t size, uint32_t kind, const void *init, uint32_t *id) {
    cg_extra_buf e = {size, kind, init ? DLRT_BUF_F_INIT_DATA : 0u, NULL};
    if (init) {
        e.init = dl_mem_alloc(size ? (size_t)size : 1);
        if (!e.init) {
            return DL_ERR_NOMEM;
        }
        memcpy(e.init, init, (size_t)size);
    }
    if (!DL_VEC_PUSH(&c->extra, e)) {
        free(e.init);
        return DL_ERR_NOMEM;
    }
    *id = (uint32_t)(c->m->values.len + c->extra.len - 1);
    return DL_OK;
}

dl_status cg_kernel_end(cg *c, cg_kernel *k) {
    DL_ASSERT(c->guard.n == 0 || k->guard_exit);
    if (k->guard_exit) {
        LLVMBuildBr(c->b, k->guard_exit);
        LLVMPositionBuilderAtEnd(c->b, k->guard_exit);
    }
    c->target->kernel_end(c, k);
    const dl_ir_node *n = k->name ? NULL : c->node;
    cg_kernel_rec r = {(uint32_t)c->fns.len,
                       k->first_arg,
                       (uint32_t)k->n_args,
                       (uint32_t)k->n_out,
                       n ? n->id : UINT32_MAX,
                       n ? (uint32_t)n->op : UINT32_MAX,
                       k->range,
                       n ? (c->node_first ? c->node_first : n)->loc.line : 0,
                       k->name             ? k->name
                       : n && n->n_outputs ? n->outputs[0]->name
                                           : "",
                       n ? c->node_ops : k->ops,
                       n && c->node_ops && c->node_ops_elementwise,
                       k->flags,
                       k->only};
    if (!DL_VEC_PUSH(&c->fns, k->fn) || !DL_VEC_PUSH(&c->kernels, r)) {
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

// Elements of v a cg_finite_check iteration scans (at most FINITE_MAX_CHUNKS iterations: the
// guarded kernels read every flag).
#define FINITE_CHUNK      (64 << 10)
#define FINITE_MAX_CHUNKS 64

void cg_abs_bits_max(cg *c, LLVMValueRef acc, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef bits =
        LLVMBuildLoad2(c->b, c->t_i32, LLVMBuildInBoundsGEP2(c->b, c->t_i32, p, &i, 1, ""), "");
    bits = LLVMBuildAnd(c->b, bits, cg_i32(c, 0x7fffffff), "");
    LLVMValueRef cur = LLVMBuildLoad2(c->b, c->t_i32, acc, "");
    LLVMBuildStore(c->b, cg_intrinsic2(c, "llvm.umax", c->t_i32, cur, bits), acc);
}

LLVMValueRef cg_bits_not_finite(cg *c, LLVMValueRef acc) {
    return LLVMBuildICmp(c->b, LLVMIntUGE, LLVMBuildLoad2(c->b, c->t_i32, acc, ""),
                         cg_i32(c, 0x7f800000), "");
}

dl_status cg_finite_check(cg *c, dl_ir_value *v, cg_guard *g) {
    DL_ASSERT(v->type.dtype == DL_DT_FLOAT && c->guard.n == 0);
    int64_t n = dl_ir_type_numel(&v->type);
    int64_t chunk = FINITE_CHUNK;
    if (n > chunk * FINITE_MAX_CHUNKS) {
        chunk = (n + FINITE_MAX_CHUNKS - 1) / FINITE_MAX_CHUNKS;
    }
    int64_t nch = n > 0 ? (n + chunk - 1) / chunk : 1;
    uint32_t bufs[2];
    DL_TRY(cg_extra_buffer(c, (uint64_t)nch * sizeof(int32_t), DLRT_BUF_TEMP, NULL, &bufs[0]));
    bufs[1] = c->value_buf[v->id];
    dl_strbuf name = {0};
    dl_strbuf_printf(&name, "%s.finite", v->name);
    if (name.oom || !DL_VEC_PUSH(&c->strs, name.data)) {
        dl_strbuf_fini(&name);
        return DL_ERR_NOMEM;
    }
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, 2, 1, nch, name.data, &k));
    k.ops = "FiniteCheck";
    LLVMValueRef flags = cg_kernel_arg(c, &k, 0), src = cg_kernel_arg(c, &k, 1);
    LLVMValueRef acc = cg_entry_alloca(c, &k, c->t_i32, 1);
    cg_loop lt, li;
    LLVMValueRef t = cg_for_begin(c, &lt, k.begin, k.end, "t");
    LLVMValueRef lo = LLVMBuildMul(c->b, t, cg_i64(c, chunk), "");
    LLVMValueRef hi = LLVMBuildAdd(c->b, lo, cg_i64(c, chunk), "");
    hi = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, hi, cg_i64(c, n), ""), hi,
                         cg_i64(c, n), "");
    LLVMBuildStore(c->b, cg_i32(c, 0), acc);
    LLVMValueRef i = cg_for_begin(c, &li, lo, hi, "i");
    cg_abs_bits_max(c, acc, src, i);
    cg_for_end(c, &li);
    LLVMBuildStore(c->b, LLVMBuildZExt(c->b, cg_bits_not_finite(c, acc), c->t_i32, ""),
                   LLVMBuildInBoundsGEP2(c->b, c->t_i32, flags, &t, 1, ""));
    cg_for_end(c, &lt);
    DL_TRY(cg_kernel_end(c, &k));
    *g = (cg_guard){bufs[0], nch, true};
    return DL_OK;
}

dl_status cg_guard_open(cg *c, cg_kernel *k) {
    if (c->guard.n == 0) {
        return DL_OK;
    }
    DL_ASSERT(!k->guard_exit);
    DL_TRY(cg_kernel_add_buf(c, k, c->guard.buf));
    LLVMValueRef fp = k->ptr[k->n_args - 1], any = cg_i32(c, 0);
    for (int64_t i = 0; i < c->guard.n; i++) {
        LLVMValueRef idx = cg_i64(c, i);
        LLVMValueRef f = LLVMBuildLoad2(c->b, c->t_i32,
                                        LLVMBuildInBoundsGEP2(c->b, c->t_i32, fp, &idx, 1, ""), "");
        any = LLVMBuildOr(c->b, any, f, "");
    }
    LLVMValueRef run =
        LLVMBuildICmp(c->b, c->guard.finite ? LLVMIntEQ : LLVMIntNE, any, cg_i32(c, 0), "guard");
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, fn, "guarded");
    k->guard_exit = LLVMAppendBasicBlockInContext(c->ctx, fn, "unguarded");
    LLVMBuildCondBr(c->b, run, body, k->guard_exit);
    LLVMPositionBuilderAtEnd(c->b, body);
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
    l->backedge = LLVMBuildBr(c->b, l->header);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

// Attaches !{!self, opt} as the loop ID of closed loop `l`: a loop ID refers to itself, made
// through a temporary node replaced by the finished one.
static void loop_md(cg *c, const cg_loop *l, LLVMMetadataRef opt) {
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(c->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {tmp, opt};
    LLVMMetadataRef id = LLVMMDNodeInContext2(c->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    static const char kind[] = "llvm.loop";
    LLVMSetMetadata(l->backedge, LLVMGetMDKindIDInContext(c->ctx, kind, sizeof kind - 1),
                    LLVMMetadataAsValue(c->ctx, id));
}

void cg_loop_interleave(cg *c, const cg_loop *l, unsigned count) {
    static const char key[] = "llvm.loop.interleave.count";
    LLVMMetadataRef opt[2] = {
        LLVMMDStringInContext2(c->ctx, key, sizeof key - 1),
        LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c->ctx), count, 0))};
    loop_md(c, l, LLVMMDNodeInContext2(c->ctx, opt, 2));
}

void cg_loop_no_unroll(cg *c, const cg_loop *l) {
    static const char key[] = "llvm.loop.unroll.disable";
    LLVMMetadataRef opt = LLVMMDStringInContext2(c->ctx, key, sizeof key - 1);
    loop_md(c, l, LLVMMDNodeInContext2(c->ctx, &opt, 1));
}

// A closed innermost loop whose body is long (an erf, an exp: one dependency chain of tens of
// 4-cycle operations per element) is interleaved: LLVM's vectoriser keeps such a loop at one
// vector per iteration, and an out-of-order core then waits on the chain instead of running
// the next vector's (Gelu over [1024, 1024], AVX-512, Xeon family 6 model 207: 1.05-1.48 ->
// 0.93-0.99 ms with 4; AVX2's 16 registers take 2). Vector targets only: NVPTX runs a lane per
// thread.
#define LONG_BODY_INSTRS 32

void cg_loop_interleave_long(cg *c, const cg_loop *l) {
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    if (vw < 8) {
        return;
    }
    LLVMBasicBlockRef latch = LLVMGetInstructionParent(l->backedge);
    size_t n = 0;
    for (LLVMBasicBlockRef bb = l->body; bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            n++;
        }
        if (bb == latch) {
            break;
        }
    }
    if (n >= LONG_BODY_INSTRS) {
        cg_loop_interleave(c, l, vw >= 16 ? 4 : 2);
    }
}

// ---------------------------------------------------------------------------------------------
// Masked vector memory access (x86: AVX-512 masks, AVX2 vmaskmov)

LLVMValueRef cg_masked_load(cg *c, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask) {
    return cg_masked_load_align(c, vt, p, mask, 4);
}

LLVMValueRef cg_masked_load_align(cg *c, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask,
                                  unsigned align) {
    if (!mask) {
        LLVMValueRef v = LLVMBuildLoad2(c->b, vt, p, "");
        LLVMSetAlignment(v, align);
        return v;
    }
    static const char name[] = "llvm.masked.load";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMTypeRef tys[2] = {vt, c->t_ptr};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, tys, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, tys, 2);
    LLVMValueRef args[4] = {p, cg_i32(c, (int32_t)align), mask, LLVMConstNull(vt)};
    return LLVMBuildCall2(c->b, fty, fn, args, 4, "");
}

// The n of a constant mask whose first n lanes are set and the others clear; -1 otherwise.
static int64_t const_prefix_mask(LLVMValueRef mask) {
    if (!LLVMIsConstant(mask)) {
        return -1;
    }
    unsigned lanes = LLVMGetVectorSize(LLVMTypeOf(mask));
    int64_t n = 0;
    for (unsigned l = 0; l < lanes; l++) {
        LLVMValueRef e = LLVMGetAggregateElement(mask, l);
        if (!e || !LLVMIsAConstantInt(e)) {
            return -1;
        }
        if (LLVMConstIntGetZExtValue(e) != 0) {
            if (l != (unsigned)n) {
                return -1; // a set lane after a clear one
            }
            n++;
        }
    }
    return n;
}

void cg_masked_store(cg *c, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
    if (!mask) {
        LLVMSetAlignment(LLVMBuildStore(c->b, v, p), 4);
        return;
    }
    // Without AVX-512's mask registers a masked store is vmaskmovps, which AMD's cores run as
    // a long microcoded sequence (Zen 3: ~12 cycles each): a constant prefix of n lanes is
    // stored as plain stores of power-of-two pieces instead (6 lanes: 4 + 2).
    int64_t n = (c->isa & DLRT_ISA_AVX512F) ? -1 : const_prefix_mask(mask);
    if (n >= 0) {
        LLVMTypeRef et = LLVMGetElementType(LLVMTypeOf(v));
        int64_t at = 0;
        while (at < n) {
            int64_t w = 1;
            while (2 * w <= n - at) {
                w *= 2;
            }
            LLVMValueRef idx[CG_MAX_LANES];
            for (int64_t l = 0; l < w; l++) {
                idx[l] = cg_i32(c, (int32_t)(at + l));
            }
            LLVMValueRef piece =
                w == 1 ? LLVMBuildExtractElement(c->b, v, cg_i32(c, (int32_t)at), "")
                       : LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(LLVMTypeOf(v)),
                                                LLVMConstVector(idx, (unsigned)w), "");
            LLVMValueRef off = cg_i64(c, at);
            LLVMValueRef q = LLVMBuildGEP2(c->b, et, p, &off, 1, "");
            LLVMSetAlignment(LLVMBuildStore(c->b, piece, q), 4);
            at += w;
        }
        return;
    }
    static const char name[] = "llvm.masked.store";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMTypeRef tys[2] = {LLVMTypeOf(v), c->t_ptr};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, tys, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, tys, 2);
    LLVMValueRef args[4] = {v, p, cg_i32(c, 4), mask};
    LLVMBuildCall2(c->b, fty, fn, args, 4, "");
}

LLVMValueRef cg_lane_mask_rt(cg *c, LLVMValueRef rem, int64_t n) {
    LLVMValueRef e[CG_MAX_LANES], zero[CG_MAX_LANES];
    DL_ASSERT(n <= CG_MAX_LANES);
    for (int64_t l = 0; l < n; l++) {
        e[l] = cg_i64(c, l);
        zero[l] = cg_i32(c, 0);
    }
    LLVMTypeRef vt = LLVMVectorType(c->t_i64, (unsigned)n);
    LLVMValueRef r = LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), rem, cg_i32(c, 0), "");
    r = LLVMBuildShuffleVector(c->b, r, LLVMGetUndef(vt), LLVMConstVector(zero, (unsigned)n), "");
    return LLVMBuildICmp(c->b, LLVMIntULT, LLVMConstVector(e, (unsigned)n), r, "");
}
