// codegen/x86_nn.c — lowering of the neural-network ops: Conv, ConvTranspose, MaxPool,
// AveragePool, GlobalAveragePool, BatchNormalization (inference and training_mode) and
// LayerNormalization.
//
// Conv and ConvTranspose with 3 x 3 kernels and stride 1 run as Winograd's F(2 x 2, 3 x 3)
// (x86_winograd.c) where dl_cg__wino_ok says so; others as implicit GEMMs on x86_linalg.c's
// blocked engine where dl_cg__conv_gemm_ok says so (float32, wide vectors, products large
// enough: conv_gemm_desc); otherwise (first layers with one input channel, depthwise, low
// precision, NVPTX's width 1) they share one direct-convolution emitter (emit_conv). Both are
// written as a gather over the output: output row oh, tap kh reads input row (oh*a + b + kh*cc) / d
// when that divides exactly and lands inside the input (Conv: a = stride, b = -pad, cc = dilation,
// d = 1; ConvTranspose: a = 1, b = pad, cc = -dilation, d = stride), the same for columns. The
// outer parallel range is N * group * H_out (one output row of one group per iteration), so no two
// iterations write the same element. Inside, output channels go in register blocks of MB and
// output columns in vector tiles of TW floats: TW * MB accumulators live in registers, each input
// vector is reused for MB channels and each weight (broadcast) for TW columns, the bias is added
// in the epilogue. A Conv's float32 rows with unit column stride (on wide-vector targets) first
// copy their tap rows into a zero-padded buffer, so every tile, the edges included, reads whole
// vectors unchecked and a ragged row end is one masked store (conv_pad). Otherwise columns whose
// taps all fall inside the input (computed at compile time) use unchecked vector loads, the few
// edge columns a scalar, masked path, and a row whose interior is not a multiple of TW ends with
// one overlapping tile (same iteration, same values). A group ending with a 2 x 2 / stride 2
// MaxPool (passes/fusion.c) iterates over pooled rows instead: the two output rows of a window
// go to a row buffer and their pooling to y, so the full-size output is never written (the
// implicit GEMM pools from its scratch).
//
// Pools, GlobalAveragePool and the norms are loop nests over [N*C(, first output dim)] or the
// leading dims, with float sums accumulated in f32 (vector partial sums for the long ones).
#include "cg_geometry.h"
#include "cg_internal.h"
#include "x86_conv.h"

#include <math.h>
#include <string.h>

DL_CG_FAMILY_SWITCHES_ARE_PARTIAL

// ---------------------------------------------------------------------------------------------
// Small IR helpers (the shared ones: cg_geometry.h)

static LLVMValueRef iand(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildAnd(c->b, a, b, "");
}

static LLVMValueRef splat(cg *c, LLVMValueRef s, unsigned w) {
    if (w == 1) {
        return s;
    }
    LLVMTypeRef vt = vty(c, w);
    LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), s, cg_i32(c, 0), "");
    LLVMValueRef mask = LLVMConstNull(LLVMVectorType(c->t_i32, w));
    return LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(vt), mask, "");
}

// Stores an f32 vector of `w` lanes as contiguous elements idx.. of a float-typed buffer.
static void vstore(cg *c, LLVMValueRef base, dl_dtype dt, LLVMValueRef idx, LLVMValueRef v,
                   unsigned w) {
    if (w == 1) {
        cg_store(c, base, dt, idx, v);
        return;
    }
    if (dt == DL_DT_FLOAT || dt == DL_DT_FLOAT16) {
        LLVMTypeRef et = dt == DL_DT_FLOAT ? c->t_f32 : c->t_f16;
        if (dt == DL_DT_FLOAT16) {
            v = LLVMBuildFPTrunc(c->b, v, LLVMVectorType(c->t_f16, w), "");
        }
        LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, et, base, &idx, 1, "");
        LLVMValueRef s = LLVMBuildStore(c->b, v, p);
        LLVMSetAlignment(s, dt == DL_DT_FLOAT ? 4 : 2);
        return;
    }
    // bfloat16: cg_store's rounding lane by lane (the epilogue only).
    for (unsigned l = 0; l < w; l++) {
        LLVMValueRef e = LLVMBuildExtractElement(c->b, v, cg_i32(c, (int32_t)l), "");
        cg_store(c, base, dt, iaddk(c, idx, (int64_t)l), e);
    }
}

// ---------------------------------------------------------------------------------------------
// Builders shared with the gradient lowerings (declared in cg_geometry.h)

// An alloca in the entry block of the current function (so mem2reg/SROA promote it).
LLVMValueRef dl_cg__entry_alloca(cg *c, LLVMTypeRef ty) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->ctx);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) {
        LLVMPositionBuilderBefore(tb, first);
    } else {
        LLVMPositionBuilderAtEnd(tb, entry);
    }
    LLVMValueRef a = LLVMBuildAlloca(tb, ty, "acc");
    LLVMDisposeBuilder(tb);
    return a;
}

void dl_cg__if_begin(cg *c, dl_cg__if *f, LLVMValueRef cond) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    f->then = LLVMAppendBasicBlockInContext(c->ctx, fn, "then");
    f->merge = LLVMAppendBasicBlockInContext(c->ctx, fn, "endif");
    LLVMBuildCondBr(c->b, cond, f->then, f->merge);
    LLVMPositionBuilderAtEnd(c->b, f->then);
}

void dl_cg__if_end(cg *c, dl_cg__if *f) {
    LLVMBuildBr(c->b, f->merge);
    LLVMPositionBuilderAtEnd(c->b, f->merge);
}

// acc + a * b (llvm.fmuladd: fused where the target has FMA).
LLVMValueRef dl_cg__fmuladd(cg *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
    LLVMTypeRef ty = LLVMTypeOf(a);
    static const char name[] = "llvm.fmuladd";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &ty, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &ty, 1);
    LLVMValueRef args[3] = {a, b, acc};
    return LLVMBuildCall2(c->b, fty, fn, args, 3, "");
}

// Loads `w` contiguous elements of a float-typed buffer from element idx as an f32 vector.
LLVMValueRef dl_cg__vload(cg *c, LLVMValueRef base, dl_dtype dt, LLVMValueRef idx, unsigned w) {
    if (w == 1) {
        return cg_load(c, base, dt, idx);
    }
    LLVMTypeRef et = dt == DL_DT_FLOAT ? c->t_f32 : dt == DL_DT_FLOAT16 ? c->t_f16 : c->t_i16;
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, et, base, &idx, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(c->b, LLVMVectorType(et, w), p, "");
    LLVMSetAlignment(v, dt == DL_DT_FLOAT ? 4 : 2);
    switch (dt) {
    case DL_DT_FLOAT:
        return v;
    case DL_DT_FLOAT16:
        return LLVMBuildFPExt(c->b, v, vty(c, w), "");
    case DL_DT_BFLOAT16: {
        LLVMTypeRef it = LLVMVectorType(c->t_i32, w);
        LLVMValueRef x = LLVMBuildZExt(c->b, v, it, "");
        LLVMValueRef sixteen[64];
        DL_ASSERT(w <= 64);
        for (unsigned l = 0; l < w; l++) {
            sixteen[l] = cg_i32(c, 16);
        }
        x = LLVMBuildShl(c->b, x, LLVMConstVector(sixteen, w), "");
        return LLVMBuildBitCast(c->b, x, vty(c, w), "");
    }
    default:
        DL_UNREACHABLE();
    }
}

// Horizontal sum of an f32 vector (ordered over its lanes).
LLVMValueRef dl_cg__hsum(cg *c, LLVMValueRef v, unsigned w) {
    if (w == 1) {
        return v;
    }
    LLVMValueRef s = cg_f32(c, 0);
    for (unsigned l = 0; l < w; l++) {
        s = LLVMBuildFAdd(c->b, s, LLVMBuildExtractElement(c->b, v, cg_i32(c, (int32_t)l), ""), "");
    }
    return s;
}

// Kernel arguments of a node with outputs [0, 1?, 2?] (BatchNormalization in training mode and
// its gradient): vals = output 0, then outputs 1 and 2 where present (*a1, *a2: their argument
// indices, 0 when absent). Returns the number written.
size_t dl_cg__out_args3(const dl_ir_node *n, dl_ir_value **vals, size_t *a1, size_t *a2) {
    dl_ir_value *o1 = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *o2 = n->n_outputs > 2 ? n->outputs[2] : NULL;
    size_t nv = 0;
    vals[nv++] = n->outputs[0];
    *a1 = o1 ? nv++ : 0;
    *a2 = o2 ? nv++ : 0;
    if (o1) {
        vals[*a1] = o1;
    }
    if (o2) {
        vals[*a2] = o2;
    }
    return nv;
}

// Reads INTS attribute `name` of node `x` into out[n] (absent or empty: every entry `def`).
// Returns false (after a diagnostic) when it has the wrong length.
static bool attr_ints_of(cg *c, const dl_ir_node *x, const char *name, int32_t n, int64_t def,
                         int64_t *out) {
    const dl_ir_attr *a = dl_ir_node_attr(x, name);
    if (a && a->n > 0 && (int32_t)a->n != n) {
        cg_error(c, "%s has %zu entries, expected %d", name, a->n, n);
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        out[i] = (a && a->n > 0) ? a->ints[i] : def;
    }
    return true;
}

// The same of the node being lowered.
bool dl_cg__attr_ints(cg *c, const char *name, int32_t n, int64_t def, int64_t *out) {
    return attr_ints_of(c, c->node, name, n, def, out);
}

// ---------------------------------------------------------------------------------------------
// Direct convolution (Conv and ConvTranspose)

#define CONV_MAX_MB     16
#define CONV_PAD_FLOATS 8192 // padded tap rows (emit_conv) at most this many floats (32 KiB)

// Valid flag and input index of output position `o` and tap `kk` along dim i.
static LLVMValueRef conv_pos(cg *c, const conv_geo *g, int i, LLVMValueRef o, LLVMValueRef kk,
                             LLVMValueRef *valid) {
    int64_t size = i == 0 ? g->H : g->W;
    LLVMValueRef num = iadd(c, iaddk(c, imul(c, o, g->a[i]), g->b[i]), imul(c, kk, g->cc[i]));
    if (g->d[i] == 1) {
        *valid = in_range(c, num, 0, size);
        return num;
    }
    // num >= 0 first, so srem/sdiv see non-negative numbers (no UB either way: d > 0).
    LLVMValueRef rem = LLVMBuildSRem(c->b, num, cg_i64(c, g->d[i]), "");
    LLVMValueRef ok = iand(c, in_range(c, num, 0, size * g->d[i]),
                           LLVMBuildICmp(c->b, LLVMIntEQ, rem, cg_i64(c, 0), ""));
    *valid = ok;
    return LLVMBuildSDiv(c->b, num, cg_i64(c, g->d[i]), "");
}

// The weights' offset of channel m0 (local to the group), input channel ci, tap row kh: w[g,
// m0, ci, kh, 0] (or the transposed layout's).
static LLVMValueRef conv_wrow(cg *c, const conv_row *r, LLVMValueRef m0, LLVMValueRef ci,
                              LLVMValueRef kh) {
    const conv_geo *g = r->g;
    return iadd(c, iadd(c, r->wbase, imul(c, m0, g->wsm)),
                iadd(c, imul(c, ci, g->wsc), imul(c, kh, g->kW)));
}

// acc[j] = 0 for j < mb: vectors of type vt in entry-block allocas (promoted to registers).
static void conv_acc_init(cg *c, LLVMTypeRef vt, unsigned mb, LLVMValueRef *acc) {
    for (unsigned j = 0; j < mb; j++) {
        acc[j] = dl_cg__entry_alloca(c, vt);
        st(c, LLVMConstNull(vt), acc[j]);
    }
}

// acc[j] += w[wi + j*wsm] * xv for j < mb: one tap's weight of each channel of the block,
// broadcast over the tile's tw columns.
static void conv_acc_fma(cg *c, const conv_row *r, LLVMValueRef wi, LLVMValueRef xv, unsigned mb,
                         unsigned tw, const LLVMValueRef *acc) {
    const conv_geo *g = r->g;
    LLVMTypeRef vt = vty(c, tw);
    for (unsigned j = 0; j < mb; j++) {
        LLVMValueRef wv = cg_load(c, r->k->ptr[2], g->dt, iaddk(c, wi, (int64_t)j * g->wsm));
        LLVMValueRef a = ld(c, vt, acc[j]);
        st(c, dl_cg__fmuladd(c, splat(c, wv, tw), xv, a), acc[j]);
    }
}

// One tile: output channels [m0, m0 + mb) (local to the group) x output columns
// [ow0, ow0 + tw). `checked`: tw == 1 and every tap is masked; otherwise every tap of every lane
// lies inside the input (d[1] == 1) and loads are unchecked.
//   acc[j][l] = sum_{kh valid, ci, kw} x[n, g*Cg+ci, ih, iw(ow0+l, kw)] * w[g, m0+j, ci, kh, kw]
static void conv_store(cg *c, const conv_row *r, LLVMValueRef m0, unsigned mb, LLVMValueRef ow0,
                       unsigned tw, unsigned nl, const LLVMValueRef *acc);

static void conv_tile(cg *c, const conv_row *r, LLVMValueRef m0, unsigned mb, LLVMValueRef ow0,
                      unsigned tw, bool checked) {
    const conv_geo *g = r->g;
    const cg_kernel *k = r->k;
    LLVMTypeRef vt = vty(c, tw);
    LLVMValueRef acc[CONV_MAX_MB];
    conv_acc_init(c, vt, mb, acc);
    // kh outermost so the row check is made once per tile and tap row.
    cg_loop lkh, lci, lkw;
    LLVMValueRef kh = cg_for_begin(c, &lkh, cg_i64(c, 0), cg_i64(c, g->kH), "kh");
    LLVMValueRef hvalid;
    LLVMValueRef ih = conv_pos(c, g, 0, r->oh, kh, &hvalid);
    dl_cg__if fh;
    if (g->pad_zero) { // a row in the padding: row 0 read, its values replaced by zeros
        ih = LLVMBuildSelect(c->b, hvalid, ih, cg_i64(c, 0), "");
    } else {
        dl_cg__if_begin(c, &fh, hvalid);
    }
    LLVMValueRef ci = cg_for_begin(c, &lci, cg_i64(c, 0), cg_i64(c, g->Cg), "ci");
    // x row: x[n, g*Cg + ci, ih, :]; weights w[g, m0 + j, ci, kh, :] (or the transposed layout)
    LLVMValueRef xrow = iadd(c, r->xbase, iadd(c, imul(c, ci, g->H * g->W), imul(c, ih, g->W)));
    LLVMValueRef wrow = conv_wrow(c, r, m0, ci, kh);
    LLVMValueRef kw = cg_for_begin(c, &lkw, cg_i64(c, 0), cg_i64(c, g->kW), "kw");
    LLVMValueRef xv, wvalid = NULL;
    if (checked) {
        LLVMValueRef iw = conv_pos(c, g, 1, ow0, kw, &wvalid);
        LLVMValueRef idx = LLVMBuildSelect(c->b, wvalid, iadd(c, xrow, iw), xrow, "");
        xv = LLVMBuildSelect(c->b, wvalid, cg_load(c, k->ptr[1], g->dt, idx), cg_f32(c, 0), "");
    } else {
        LLVMValueRef iw0 = iadd(c, iaddk(c, imul(c, ow0, g->a[1]), g->b[1]), imul(c, kw, g->cc[1]));
        LLVMValueRef p0 = iadd(c, xrow, iw0);
        if (g->a[1] == 1) {
            xv = dl_cg__vload(c, k->ptr[1], g->dt, p0, tw);
        } else if (g->a[1] <= 4) {
            // strided columns: one wide load of tw*a elements, keep every a-th (emit_conv keeps
            // the a-1 extra elements inside the row)
            LLVMValueRef wide = dl_cg__vload(c, k->ptr[1], g->dt, p0, tw * (unsigned)g->a[1]);
            LLVMValueRef mask[16];
            for (unsigned l = 0; l < tw; l++) {
                mask[l] = cg_i32(c, (int32_t)(l * (unsigned)g->a[1]));
            }
            xv = LLVMBuildShuffleVector(c->b, wide, LLVMGetUndef(LLVMTypeOf(wide)),
                                        LLVMConstVector(mask, tw), "");
        } else { // large strides: lane by lane
            xv = LLVMGetUndef(vt);
            for (unsigned l = 0; l < tw; l++) {
                LLVMValueRef e = cg_load(c, k->ptr[1], g->dt, iaddk(c, p0, (int64_t)l * g->a[1]));
                xv = LLVMBuildInsertElement(c->b, xv, e, cg_i32(c, (int32_t)l), "");
            }
        }
    }
    if (g->pad_zero) {
        xv = LLVMBuildSelect(c->b, hvalid, xv, LLVMConstNull(LLVMTypeOf(xv)), "");
    }
    if (wvalid && !g->pad_zero) { // ConvTranspose: a tap that does not exist adds nothing
        dl_cg__if fw;
        dl_cg__if_begin(c, &fw, wvalid);
        conv_acc_fma(c, r, iadd(c, wrow, kw), xv, mb, tw, acc);
        dl_cg__if_end(c, &fw);
    } else {
        conv_acc_fma(c, r, iadd(c, wrow, kw), xv, mb, tw, acc);
    }
    cg_for_end(c, &lkw);
    cg_for_end(c, &lci);
    if (!g->pad_zero) {
        dl_cg__if_end(c, &fh);
    }
    cg_for_end(c, &lkh);
    conv_store(c, r, m0, mb, ow0, tw, tw, acc);
}

// The tile's values of channel mj (local to the group) before they are stored: the sums v (tw
// lanes), plus the bias, through the fused members (on the vector where each member can be,
// else lane by lane: LLVM's SLP vectoriser joined a Relu's lanes in pieces of 8, 4 and 1).
LLVMValueRef dl_cg__conv_epi(cg *c, const conv_row *r, LLVMValueRef mj, LLVMValueRef v, unsigned tw,
                             LLVMValueRef yi, unsigned nl) {
    const conv_geo *g = r->g;
    LLVMValueRef xin[CONV_MAX_EXT], xl[CONV_MAX_EXT];
    for (size_t e = 0; e < g->n_ext; e++) { // the tile's lanes of each (nl of them read)
        LLVMValueRef ep = r->k->ptr[(g->has_bias ? 4 : 3) + e];
        if (g->kind[e] != DL_CG__CONV_EXT_ELEM) { // one value for the tile: its channel's
            LLVMValueRef at = g->kind[e] == DL_CG__CONV_EXT_CHANNEL ? iadd(c, r->bbase, mj)
                                                                    : LLVMConstNull(LLVMTypeOf(mj));
            xin[e] = cg_load(c, ep, DL_DT_FLOAT, at);
            continue;
        }
        if (tw == 1) {
            xin[e] = cg_load(c, ep, DL_DT_FLOAT, yi);
            continue;
        }
        LLVMValueRef m[CG_MAX_LANES];
        for (unsigned l = 0; l < tw; l++) {
            m[l] = LLVMConstInt(c->t_i1, l < nl, 0);
        }
        xin[e] =
            cg_masked_load(c, vty(c, tw), LLVMBuildInBoundsGEP2(c->b, c->t_f32, ep, &yi, 1, ""),
                           nl < tw ? LLVMConstVector(m, tw) : NULL);
    }
    if (g->has_bias) {
        LLVMValueRef bv = cg_load(c, r->k->ptr[3], g->dt, iadd(c, r->bbase, mj));
        v = LLVMBuildFAdd(c->b, v, splat(c, bv, tw), "");
    }
    if (g->epi) {
        LLVMValueRef val[CONV_MAX_EPI];
        val[0] = v;
        LLVMValueRef ve =
            tw > 1 ? dl_cg__fused_values_vec(c, g->epi, g->n_epi, 1, val, g->ext, xin, g->n_ext)
                   : NULL;
        if (ve) { // every member on the whole vector
            return ve;
        }
        for (unsigned l = 0; l < tw; l++) {
            LLVMValueRef lane = cg_i32(c, (int32_t)l);
            val[0] = tw == 1 ? v : LLVMBuildExtractElement(c->b, v, lane, "");
            for (size_t e = 0; e < g->n_ext; e++) {
                xl[e] = tw == 1 || g->kind[e] != DL_CG__CONV_EXT_ELEM
                            ? xin[e]
                            : LLVMBuildExtractElement(c->b, xin[e], lane, "");
            }
            LLVMValueRef e = dl_cg__fused_values(c, g->epi, g->n_epi, 1, val, g->ext, xl, g->n_ext);
            v = tw == 1 ? e : LLVMBuildInsertElement(c->b, v, e, cg_i32(c, (int32_t)l), "");
        }
    }
    return v;
}

// The tile's epilogue (conv_epi), stored to y[n, g*Mg + m0 + j, oh, ow0 + l] for l < nl (a
// float32 y's last tile may have nl < tw lanes: a masked store), or to the row buffer.
static void conv_store(cg *c, const conv_row *r, LLVMValueRef m0, unsigned mb, LLVMValueRef ow0,
                       unsigned tw, unsigned nl, const LLVMValueRef *acc) {
    const conv_geo *g = r->g;
    const cg_kernel *k = r->k;
    LLVMTypeRef vt = vty(c, tw);
    for (unsigned j = 0; j < mb; j++) {
        LLVMValueRef mj = iaddk(c, m0, (int64_t)j);
        LLVMValueRef yp = k->ptr[0], yi;
        if (r->ybuf) {
            yp = r->ybuf;
            yi = iaddk(c, ow0, ((int64_t)j * 2 + r->dr) * g->OW);
        } else {
            yi = iadd(c, iadd(c, r->ybase, imul(c, mj, g->OH * g->OW)), ow0);
        }
        // ext is read at y's index (never pooled: dl_cg__lower_conv_fused)
        LLVMValueRef v = dl_cg__conv_epi(c, r, mj, ld(c, vt, acc[j]), tw, r->ybuf ? NULL : yi, nl);
        if (nl < tw) {
            LLVMValueRef m[CG_MAX_LANES];
            for (unsigned l = 0; l < tw; l++) {
                m[l] = LLVMConstInt(c->t_i1, l < nl, 0);
            }
            cg_masked_store(c, v, LLVMBuildInBoundsGEP2(c->b, c->t_f32, yp, &yi, 1, ""),
                            LLVMConstVector(m, tw));
        } else {
            vstore(c, yp, r->ybuf ? DL_DT_FLOAT : g->dt, yi, v, tw);
        }
    }
}

// Scalar, masked columns [lo, hi) of channels [m0, m0 + mb).
static void conv_cols_checked(cg *c, const conv_row *r, LLVMValueRef m0, unsigned mb, int64_t lo,
                              int64_t hi) {
    if (lo >= hi) {
        return;
    }
    cg_loop l;
    LLVMValueRef ow = cg_for_begin(c, &l, cg_i64(c, lo), cg_i64(c, hi), "ow");
    conv_tile(c, r, m0, mb, ow, 1, true);
    cg_for_end(c, &l);
}

// All columns of one output row for channels [m0, m0 + mb).
static void conv_row_cols(cg *c, const conv_row *r, LLVMValueRef m0, unsigned mb, int64_t in_lo,
                          int64_t in_hi, unsigned tw) {
    const conv_geo *g = r->g;
    if (tw == 0) {
        conv_cols_checked(c, r, m0, mb, 0, g->OW);
        return;
    }
    conv_cols_checked(c, r, m0, mb, 0, in_lo);
    int64_t width = in_hi - in_lo, n_full = width / (int64_t)tw;
    cg_loop l;
    LLVMValueRef t = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, n_full), "tile");
    conv_tile(c, r, m0, mb, iaddk(c, imul(c, t, (int64_t)tw), in_lo), tw, false);
    cg_for_end(c, &l);
    if (width % (int64_t)tw != 0) { // one overlapping tile ends the interior
        conv_tile(c, r, m0, mb, cg_i64(c, in_hi - (int64_t)tw), tw, false);
    }
    conv_cols_checked(c, r, m0, mb, in_hi, g->OW);
}

// Padded rows (float32, unit column stride and divisor: pad_row_width): per output row, the
// tap rows of every input channel of the group are copied once into buf[ci][kh][0 .. wb), a
// row of zeros where the tap row falls outside the input, the input's columns shifted by umin
// (the leftmost tap offset) and zeros around them. Every tile then reads whole vectors from buf
// with no checks, the edge columns included; a row whose width is not a multiple of TW ends
// with a masked store. The sums are those of conv_tile (kh, ci, kw ascending; the taps in the
// padding add their weight times zero, as ONNX's zero padding does). Not for ConvTranspose,
// whose absent taps add nothing (an infinite weight must not meet a zero there).
typedef struct conv_pad {
    LLVMValueRef buf; // [Cg][kH][wb] floats
    int64_t wb, umin;
} conv_pad;

// The padded row width for tiles of tw columns, or 0 when the padded path does not apply.
static int64_t pad_row_width(const conv_geo *g, unsigned tw, int64_t *umin) {
    if (!g->pad_zero || g->dt != DL_DT_FLOAT || g->a[1] != 1 || g->d[1] != 1) {
        return 0;
    }
    int64_t span = (g->kW - 1) * g->cc[1];
    *umin = g->b[1] + (span < 0 ? span : 0);
    int64_t owp = (g->OW + (int64_t)tw - 1) / (int64_t)tw * (int64_t)tw;
    int64_t wb = (owp + (span < 0 ? -span : span) + 15) / 16 * 16; // whole fill vectors
    return g->Cg * g->kH * wb <= CONV_PAD_FLOATS ? wb : 0;
}

// Fills buf for output row r->oh: buf[ci][kh][u] = x[n, g*Cg + ci, ih(kh), u + umin] (0 outside
// the input), vw columns at a time through masked loads (the masked-off lanes are not read).
static void conv_pad_fill(cg *c, const conv_row *r, const conv_pad *pd, unsigned vw) {
    const conv_geo *g = r->g;
    LLVMTypeRef vt = vty(c, vw);
    cg_loop lkh, lci, lu;
    LLVMValueRef kh = cg_for_begin(c, &lkh, cg_i64(c, 0), cg_i64(c, g->kH), "pkh");
    LLVMValueRef hvalid;
    LLVMValueRef ih = conv_pos(c, g, 0, r->oh, kh, &hvalid);
    ih = LLVMBuildSelect(c->b, hvalid, ih, cg_i64(c, 0), "");
    LLVMValueRef ci = cg_for_begin(c, &lci, cg_i64(c, 0), cg_i64(c, g->Cg), "pci");
    LLVMValueRef xrow = iadd(c, r->xbase, iadd(c, imul(c, ci, g->H * g->W), imul(c, ih, g->W)));
    LLVMValueRef brow = imul(c, iadd(c, imul(c, ci, g->kH), kh), pd->wb);
    LLVMValueRef u = cg_for_begin(c, &lu, cg_i64(c, 0), cg_i64(c, pd->wb / vw), "pu");
    LLVMValueRef u0 = imul(c, u, (int64_t)vw);
    // lanes lo <= l < hi: 0 <= iw0 + l < W, none when the tap row is outside the input
    LLVMValueRef iw0 = iaddk(c, u0, pd->umin);
    LLVMValueRef zero = cg_i64(c, 0);
    LLVMValueRef neg = LLVMBuildSub(c->b, zero, iw0, "");
    LLVMValueRef lo =
        LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, neg, zero, ""), neg, zero, "");
    LLVMValueRef hi = LLVMBuildSub(c->b, cg_i64(c, g->W), iw0, "");
    hi = LLVMBuildSelect(c->b, iand(c, hvalid, LLVMBuildICmp(c->b, LLVMIntSGT, hi, zero, "")), hi,
                         zero, "");
    LLVMValueRef ok =
        iand(c, cg_lane_mask_rt(c, hi, vw), LLVMBuildNot(c->b, cg_lane_mask_rt(c, lo, vw), ""));
    // x + xrow + iw0 may lie before x's first element: a plain (not inbounds) GEP
    LLVMValueRef xi = iadd(c, xrow, iw0);
    LLVMValueRef src = LLVMBuildGEP2(c->b, c->t_f32, r->k->ptr[1], &xi, 1, "");
    LLVMValueRef v = cg_masked_load(c, vt, src, ok);
    LLVMValueRef bi = iadd(c, brow, u0);
    LLVMValueRef dst = LLVMBuildInBoundsGEP2(c->b, c->t_f32, pd->buf, &bi, 1, "");
    LLVMValueRef s = LLVMBuildStore(c->b, v, dst);
    LLVMSetAlignment(s, 4);
    cg_for_end(c, &lu);
    cg_for_end(c, &lci);
    cg_for_end(c, &lkh);
}

// One tile of channels [m0, m0 + mb) x columns [ow0, ow0 + tw) read from the padded rows; nl of
// its lanes are stored.
static void conv_tile_padded(cg *c, const conv_row *r, const conv_pad *pd, LLVMValueRef m0,
                             unsigned mb, LLVMValueRef ow0, unsigned tw, unsigned nl) {
    const conv_geo *g = r->g;
    LLVMTypeRef vt = vty(c, tw);
    LLVMValueRef acc[CONV_MAX_MB];
    conv_acc_init(c, vt, mb, acc);
    cg_loop lkh, lci, lkw;
    LLVMValueRef kh = cg_for_begin(c, &lkh, cg_i64(c, 0), cg_i64(c, g->kH), "kh");
    LLVMValueRef ci = cg_for_begin(c, &lci, cg_i64(c, 0), cg_i64(c, g->Cg), "ci");
    LLVMValueRef brow = imul(c, iadd(c, imul(c, ci, g->kH), kh), pd->wb);
    LLVMValueRef wrow = conv_wrow(c, r, m0, ci, kh);
    LLVMValueRef kw = cg_for_begin(c, &lkw, cg_i64(c, 0), cg_i64(c, g->kW), "kw");
    // column ow0 + l, tap kw: input column ow0 + l + b + kw*cc, at buf column that - umin
    LLVMValueRef bi =
        iadd(c, iadd(c, brow, ow0), iaddk(c, imul(c, kw, g->cc[1]), g->b[1] - pd->umin));
    LLVMValueRef xv = ld(c, vt, LLVMBuildInBoundsGEP2(c->b, c->t_f32, pd->buf, &bi, 1, ""));
    LLVMSetAlignment(LLVMGetLastInstruction(LLVMGetInsertBlock(c->b)), 4);
    conv_acc_fma(c, r, iadd(c, wrow, kw), xv, mb, tw, acc);
    cg_for_end(c, &lkw);
    cg_for_end(c, &lci);
    cg_for_end(c, &lkh);
    conv_store(c, r, m0, mb, ow0, tw, nl, acc);
}

// MaxPool's 2 x 2 window over lanes 2i, 2i + 1 of the two rows v0, v1 (tw lanes each): tw / 2
// lanes, the taps taken in MaxPool's order (row 0 then row 1, left then right). Each row's pair
// first, then the rows: dl_cg__max_takes keeps the earliest of equal values and the first NaN, so
// the pairing gives the same bits as the four taps in turn.
static LLVMValueRef pool2_lanes(cg *c, LLVMValueRef v0, LLVMValueRef v1, unsigned tw) {
    LLVMValueRef ev[CG_MAX_LANES / 2], od[CG_MAX_LANES / 2];
    for (unsigned l = 0; l < tw / 2; l++) {
        ev[l] = cg_i32(c, (int32_t)(2 * l));
        od[l] = cg_i32(c, (int32_t)(2 * l + 1));
    }
    LLVMValueRef em = LLVMConstVector(ev, tw / 2), om = LLVMConstVector(od, tw / 2);
    LLVMValueRef h[2];
    for (int d = 0; d < 2; d++) {
        LLVMValueRef v = d == 0 ? v0 : v1;
        LLVMValueRef e = LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(LLVMTypeOf(v)), em, "");
        LLVMValueRef o = LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(LLVMTypeOf(v)), om, "");
        h[d] = LLVMBuildSelect(c->b, dl_cg__max_takes(c, o, e), o, e, "");
    }
    return LLVMBuildSelect(c->b, dl_cg__max_takes(c, h[1], h[0]), h[1], h[0], "");
}

// A pooled row's tile in registers (g->pool, padded rows, tw even): channels [m0, m0 + mb) x
// columns [ow0, ow0 + tw) of both rows of the pooling window at once (each weight broadcast
// feeds 2 mb accumulators), then bias, fused members and the 2 x 2 pooling on the vectors, and
// the tile's nl / 2 pooled columns stored to y: no row buffer, no reload. Sums as
// conv_tile_padded's.
static void conv_tile_pooled(cg *c, const conv_row *r, const conv_pad *pd, LLVMValueRef m0,
                             unsigned mb, LLVMValueRef ow0, unsigned tw, unsigned nl,
                             LLVMValueRef ybase) {
    const conv_geo *g = r->g;
    LLVMTypeRef vt = vty(c, tw);
    LLVMValueRef acc[2][CONV_MAX_MB];
    conv_acc_init(c, vt, mb, acc[0]);
    conv_acc_init(c, vt, mb, acc[1]);
    cg_loop lkh, lci, lkw;
    LLVMValueRef kh = cg_for_begin(c, &lkh, cg_i64(c, 0), cg_i64(c, g->kH), "kh");
    LLVMValueRef ci = cg_for_begin(c, &lci, cg_i64(c, 0), cg_i64(c, g->Cg), "ci");
    LLVMValueRef brow = imul(c, iadd(c, imul(c, ci, g->kH), kh), pd[0].wb);
    LLVMValueRef wrow = conv_wrow(c, r, m0, ci, kh);
    LLVMValueRef kw = cg_for_begin(c, &lkw, cg_i64(c, 0), cg_i64(c, g->kW), "kw");
    LLVMValueRef bi =
        iadd(c, iadd(c, brow, ow0), iaddk(c, imul(c, kw, g->cc[1]), g->b[1] - pd[0].umin));
    LLVMValueRef xv[2];
    for (int d = 0; d < 2; d++) {
        xv[d] = ld(c, vt, LLVMBuildInBoundsGEP2(c->b, c->t_f32, pd[d].buf, &bi, 1, ""));
        LLVMSetAlignment(LLVMGetLastInstruction(LLVMGetInsertBlock(c->b)), 4);
    }
    LLVMValueRef wi = iadd(c, wrow, kw);
    for (unsigned j = 0; j < mb; j++) {
        LLVMValueRef wv =
            splat(c, cg_load(c, r->k->ptr[2], g->dt, iaddk(c, wi, (int64_t)j * g->wsm)), tw);
        for (int d = 0; d < 2; d++) {
            st(c, dl_cg__fmuladd(c, wv, xv[d], ld(c, vt, acc[d][j])), acc[d][j]);
        }
    }
    cg_for_end(c, &lkw);
    cg_for_end(c, &lci);
    cg_for_end(c, &lkh);
    int64_t PH = g->OH / 2, PW = g->OW / 2;
    unsigned np = nl / 2; // pooled columns of the tile (a last odd column pools nothing)
    LLVMValueRef m[CG_MAX_LANES / 2];
    for (unsigned l = 0; l < tw / 2; l++) {
        m[l] = LLVMConstInt(c->t_i1, l < np, 0);
    }
    LLVMValueRef pm = LLVMConstVector(m, tw / 2);
    LLVMValueRef p0 = LLVMBuildUDiv(c->b, ow0, cg_i64(c, 2), "");
    for (unsigned j = 0; j < mb; j++) {
        LLVMValueRef mj = iaddk(c, m0, (int64_t)j);
        LLVMValueRef v0 = dl_cg__conv_epi(c, r, mj, ld(c, vt, acc[0][j]), tw, NULL, tw);
        LLVMValueRef v1 = dl_cg__conv_epi(c, r, mj, ld(c, vt, acc[1][j]), tw, NULL, tw);
        LLVMValueRef pv = pool2_lanes(c, v0, v1, tw);
        // y[n, grp*Mg + mj, row, p0 ..]: ybase is n*M + grp*Mg channels' pooled row `row`
        LLVMValueRef yi = iadd(c, iadd(c, ybase, imul(c, mj, PH * PW)), p0);
        LLVMValueRef yp = LLVMBuildInBoundsGEP2(c->b, c->t_f32, r->k->ptr[0], &yi, 1, "");
        if (np == tw / 2) {
            LLVMValueRef s = LLVMBuildStore(c->b, pv, yp);
            LLVMSetAlignment(s, 4);
        } else {
            cg_masked_store(c, pv, yp, pm);
        }
    }
}

// Both rows of a pooled row for channels [m0, m0 + mb) in register tiles (conv_tile_pooled).
static void conv_row_pooled(cg *c, const conv_row *r, const conv_pad *pd, LLVMValueRef m0,
                            unsigned mb, unsigned tw, LLVMValueRef ybase) {
    int64_t n_full = r->g->OW / (int64_t)tw, rest = r->g->OW % (int64_t)tw;
    cg_loop l;
    LLVMValueRef t = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, n_full), "qtile");
    conv_tile_pooled(c, r, pd, m0, mb, imul(c, t, (int64_t)tw), tw, tw, ybase);
    cg_for_end(c, &l);
    if (rest > 1) {
        conv_tile_pooled(c, r, pd, m0, mb, cg_i64(c, n_full * (int64_t)tw), tw, (unsigned)rest,
                         ybase);
    }
}

// All columns of one output row for channels [m0, m0 + mb), from the padded rows.
static void conv_row_padded(cg *c, const conv_row *r, const conv_pad *pd, LLVMValueRef m0,
                            unsigned mb, unsigned tw) {
    int64_t n_full = r->g->OW / (int64_t)tw, rest = r->g->OW % (int64_t)tw;
    cg_loop l;
    LLVMValueRef t = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, n_full), "ptile");
    conv_tile_padded(c, r, pd, m0, mb, imul(c, t, (int64_t)tw), tw, tw);
    cg_for_end(c, &l);
    if (rest > 0) {
        conv_tile_padded(c, r, pd, m0, mb, cg_i64(c, n_full * (int64_t)tw), tw, (unsigned)rest);
    }
}

// The implicit GEMM of a (de)convolution, per image n and group grp:
//   y[n, grp*Mg + m, oh*OW + ow] = sum over k = (ci, kh, kw) of A[m, k] * B[k, oh*OW + ow]
//   (+ b[grp*Mg + m]), A[m, k] = w at grp*wsg + m*wsm + ci*wsc + kh*kW + kw, B gathered from
//   x[n, grp*Cg + ci] by the tap geometry (a, b, cc, d) of g.
static void conv_gemm_desc(const dl_ir_node *n, const conv_geo *g, dl_cg__conv_gemm *p) {
    memset(p, 0, sizeof *p);
    int64_t kk = g->kH * g->kW;
    p->y = n->outputs[0];
    p->a = n->inputs[1];
    p->x = n->inputs[0];
    p->bias = g->has_bias ? n->inputs[2] : NULL;
    p->M = g->Mg;
    p->N = g->OH * g->OW;
    p->K = g->Cg * kk;
    p->sa_m = g->wsm;
    if (g->wsc == kk) { // Conv: k is contiguous in w
        p->sa_k = 1;
    } else { // ConvTranspose: ci strides over the local output channels
        p->ka_in = kk;
        p->sa_k = g->wsc;
        p->sa_k2 = 1;
    }
    p->br = 2; // batch [N, G]
    p->bd[0] = g->N;
    p->bd[1] = g->G;
    p->abs_[1] = g->wsg;
    p->xbs[0] = g->C * g->H * g->W;
    p->xbs[1] = g->Cg * g->H * g->W;
    p->bis[1] = g->Mg;
    dl_cg__im2col *im = &p->im;
    im->kind = DL_CG__IM2COL_TAPS_BY_POS;
    im->H = g->H;
    im->W = g->W;
    im->OH = g->OH;
    im->OW = g->OW;
    im->kH = g->kH;
    im->kW = g->kW;
    for (int i = 0; i < 2; i++) {
        im->a[i] = g->a[i];
        im->b[i] = g->b[i];
        im->cc[i] = g->cc[i];
        im->d[i] = g->d[i];
    }
    im->cs = g->H * g->W;
}

// One outer row of the direct kernel for a block of channels.
// Output row d (0 or 1) of outer row `row`: the row itself, or row d of pooled row `row`'s window.
static LLVMValueRef window_row(cg *c, const conv_geo *g, LLVMValueRef row, int d) {
    return g->pool ? iaddk(c, imul(c, row, 2), d) : row;
}

typedef struct conv_blocks {
    conv_row *r;
    const conv_pad *pd; // [2]: pd[0].wb == 0 when the padded rows do not apply
    LLVMValueRef mbase; // n * M + grp * Mg
    LLVMValueRef row;   // output row, or pooled row
    int64_t in_lo, in_hi;
    unsigned tw;
    bool pooled_regs; // both window rows in register tiles, pooled there (conv_row_pooled)
} conv_blocks;

// Channels [m0, m0 + mb) of the outer row: the output row, or the two rows of the pooling
// window into the row buffer and then their pooled row into y.
static void conv_block(cg *c, conv_blocks *b, LLVMValueRef m0, unsigned mb) {
    conv_row *r = b->r;
    const conv_geo *g = r->g;
    if (b->pooled_regs) {
        int64_t PH = g->OH / 2, PW = g->OW / 2;
        LLVMValueRef ybase = iadd(c, imul(c, b->mbase, PH * PW), imul(c, b->row, PW));
        conv_row_pooled(c, r, b->pd, m0, mb, b->tw, ybase);
        return;
    }
    for (int d = 0; d < (g->pool ? 2 : 1); d++) {
        r->oh = window_row(c, g, b->row, d);
        r->dr = d;
        if (b->pd[0].wb > 0) {
            conv_row_padded(c, r, &b->pd[d], m0, mb, b->tw);
        } else {
            conv_row_cols(c, r, m0, mb, b->in_lo, b->in_hi, b->tw);
        }
    }
    if (!g->pool) {
        return;
    }
    int64_t PH = g->OH / 2, PW = g->OW / 2;
    for (unsigned j = 0; j < mb; j++) {
        LLVMValueRef ch = iadd(c, b->mbase, iaddk(c, m0, (int64_t)j));
        LLVMValueRef yo = iadd(c, imul(c, ch, PH * PW), imul(c, b->row, PW));
        dl_cg__pool2_row(c, r->ybuf, cg_i64(c, (int64_t)j * 2 * g->OW), g->OW, r->k->ptr[0], yo,
                         PW);
    }
}

dl_cg__conv_ext dl_cg__conv_ext_kind(const dl_ir_value *ext, const dl_ir_value *y) {
    const dl_ir_type *t = &ext->type, *yt = &y->type;
    if (t->dtype != DL_DT_FLOAT || t->rank > yt->rank) {
        return DL_CG__CONV_EXT_NONE;
    }
    if (dl_ir_type_same_dims(t, yt)) {
        return DL_CG__CONV_EXT_ELEM;
    }
    if (!dl_ir_type_per_channel_of(t, yt)) {
        return DL_CG__CONV_EXT_NONE;
    }
    return dl_ir_type_numel(t) == 1 ? DL_CG__CONV_EXT_ONE : DL_CG__CONV_EXT_CHANNEL;
}

// y: [N, M, OH, OW] from x: [N, C, H, W], w, b?: [M]; Winograd where dl_cg__wino_ok takes
// it, the implicit GEMM where dl_cg__conv_gemm_ok does, else the direct kernel (outer range
// N * G * OH).
static dl_status emit_conv(cg *c, const dl_ir_node *n, const conv_geo *g) {
    dl_ir_value *vals[4 + CONV_MAX_EXT] = {g->y ? g->y : n->outputs[0], n->inputs[0], n->inputs[1],
                                           g->has_bias ? n->inputs[2] : NULL};
    size_t n_vals = g->has_bias ? 4 : 3; // then the epilogue's values (conv_epi)
    for (size_t e = 0; e < g->n_ext; e++) {
        vals[n_vals++] = g->ext[e];
    }
    if (g->N * g->M * g->OH * g->OW == 0) {
        return DL_OK; // empty output: nothing to compute
    }
    if (dl_cg__wino_ok(c, g)) {
        return dl_cg__emit_wino(c, vals, n_vals, g);
    }
    dl_cg__conv_gemm cgp;
    conv_gemm_desc(n, g, &cgp);
    cgp.pool = g->pool;
    if (dl_cg__conv_gemm_ok(c, &cgp)) {
        if (g->epi || g->pool) {
            cgp.y = g->y;
        }
        if (g->epi) {
            cgp.epi = g->epi;
            cgp.n_epi = g->n_epi;
            cgp.ext = g->ext;
            cgp.ext_kind = g->kind;
            cgp.n_ext = g->n_ext;
        }
        // ConvTranspose's taps between or past the inputs do not exist, but the implicit GEMM
        // gathers zeros for them and multiplies those by the weights: an infinite or NaN weight
        // would make NaN of outputs its taps never reach. Where such taps occur, it runs only
        // when the weights are all finite, and the direct kernel below (which skips them) when
        // they are not.
        int64_t in[2] = {g->H, g->W}, out[2] = {g->OH, g->OW}, kk[2] = {g->kH, g->kW};
        if (g->pad_zero || !dl_cg__taps_absent(in, out, kk, g->a, g->b, g->cc, g->d)) {
            return dl_cg__emit_conv_gemm(c, &cgp);
        }
        DL_TRY(cg_finite_check(c, cgp.a, &c->guard));
        DL_TRY(dl_cg__emit_conv_gemm(c, &cgp));
        c->guard.finite = false;
    }
    // Interior columns: every tap of ow in [in_lo, in_hi) reads inside the row (needs d[1] = 1).
    int64_t span = (g->kW - 1) * g->cc[1];
    int64_t offmin = g->b[1] + (span < 0 ? span : 0), offmax = g->b[1] + (span > 0 ? span : 0);
    if (g->a[1] > 1 && g->a[1] <= 4) {
        offmax += g->a[1] - 1; // the wide loads of conv_tile read a-1 elements past the last tap
    }
    int64_t in_lo = ceil_div(-offmin, g->a[1]), in_hi = floor_div(g->W - 1 - offmax, g->a[1]) + 1;
    in_lo = in_lo < 0 ? 0 : in_lo;
    in_hi = in_hi > g->OW ? g->OW : in_hi;
    int64_t width = g->d[1] == 1 && in_hi > in_lo ? in_hi - in_lo : 0;
    unsigned tw = width >= 16 ? 16 : width >= 8 ? 8 : width >= 4 ? 4 : 0;
    // Padded rows where they apply (wide-vector targets): the whole row in vector tiles
    // (OW >= 12: tiles of 16). A pooled group fills one set per row of the pooling window.
    conv_pad pd[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    unsigned ptw = g->OW >= 12 ? 16 : g->OW >= 6 ? 8 : 4;
    unsigned vw = (unsigned)c->target->vector_width(c, DL_DT_FLOAT);
    if (vw >= 8) {
        pd[0].wb = pad_row_width(g, ptw, &pd[0].umin);
    }
    if (pd[0].wb > 0) {
        tw = ptw;
        pd[1] = pd[0];
    }
    // Register tile: tw * mb accumulators (16 x 6 = 12 of the 16 ymm registers on AVX2; 6 beat 4
    // and 8 on a 64->64 3x3 conv, see the report). A pooled row with AVX-512 takes 12 channels
    // (12 of the 32 zmm registers: 12 independent FMA chains per input vector instead of 6) when
    // its row buffer stays small (12 x 2 rows of OW <= 512: 48 KiB): the CNN's first layer with
    // its pooling, 1 -> 32 channels at batch 256, 2.67-3.18 -> 2.24-2.36 ms on a Xeon of family 6
    // model 207 (8: no better than 6; 16: 2.32-2.54).
    unsigned mb_full = tw == 16 ? (g->pool && vw >= 16 && g->OW <= 512 ? 12 : 6) : 8;
    // A pooled row through padded rows computes both rows of its windows in one register tile
    // and pools there (conv_row_pooled): 2 x mb accumulators, 12 channels with AVX-512 (24 of
    // the 32 zmm registers), 3 with AVX2 (a 16-lane tile is 2 ymm: 12 of 16). The CNN's first
    // layer with its pooling, 1 -> 32 channels at batch 256 on one thread of a Xeon of family 6
    // model 207, took 2.15 ms through the row buffer (half of it storing, reloading and
    // pooling the rows).
    bool pooled_regs = g->pool && pd[0].wb > 0 && tw % 2 == 0;
    if (pooled_regs) {
        mb_full = vw >= 16 ? 12 : 3;
    }
    // Outer rows: output rows, or pooled rows (two output rows each)
    int64_t rows = g->pool ? g->OH / 2 : g->OH;

    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, n_vals, g->N * g->G * rows, &k));
    DL_TRY(cg_guard_open(c, &k));
    for (int d = 0; d < (g->pool ? 2 : 1) && pd[0].wb > 0; d++) {
        pd[d].buf =
            dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(g->Cg * g->kH * pd[d].wb)));
    }
    LLVMValueRef ybuf = NULL;
    if (g->pool && !pooled_regs) {
        ybuf = dl_cg__entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(mb_full * 2 * g->OW)));
    }
    cg_loop lit;
    LLVMValueRef it = cg_for_begin(c, &lit, k.begin, k.end, "it");
    // it = (n * G + grp) * rows + row
    LLVMValueRef row = LLVMBuildSRem(c->b, it, cg_i64(c, rows), "oh");
    LLVMValueRef ng = LLVMBuildSDiv(c->b, it, cg_i64(c, rows), "");
    LLVMValueRef grp = LLVMBuildSRem(c->b, ng, cg_i64(c, g->G), "grp");
    LLVMValueRef nn = LLVMBuildSDiv(c->b, ng, cg_i64(c, g->G), "n");
    conv_row r = {g, &k, row, NULL, NULL, NULL, NULL, ybuf, 0};
    r.xbase = imul(c, iadd(c, imul(c, nn, g->C), imul(c, grp, g->Cg)), g->H * g->W);
    LLVMValueRef mbase = iadd(c, imul(c, nn, g->M), imul(c, grp, g->Mg));
    r.ybase = iadd(c, imul(c, mbase, g->OH * g->OW), imul(c, row, g->OW));
    r.wbase = imul(c, grp, g->wsg);
    r.bbase = imul(c, grp, g->Mg);
    for (int d = 0; d < (g->pool ? 2 : 1) && pd[0].wb > 0; d++) {
        r.oh = window_row(c, g, row, d);
        conv_pad_fill(c, &r, &pd[d], vw >= 16 ? 16 : 8);
    }
    conv_blocks cb = {&r, pd, mbase, row, in_lo, in_hi, tw, pooled_regs};
    int64_t n_blocks = g->Mg / mb_full, tail = g->Mg % mb_full;
    if (n_blocks > 0) {
        cg_loop lmb;
        LLVMValueRef mbi = cg_for_begin(c, &lmb, cg_i64(c, 0), cg_i64(c, n_blocks), "mb");
        conv_block(c, &cb, imul(c, mbi, mb_full), mb_full);
        cg_for_end(c, &lmb);
    }
    if (tail > 0) {
        conv_block(c, &cb, cg_i64(c, n_blocks * mb_full), (unsigned)tail);
    }
    cg_for_end(c, &lit);
    dl_status st = cg_kernel_end(c, &k);
    c->guard = (cg_guard){0};
    return st;
}

static bool has_input(const dl_ir_node *n, size_t i) {
    return n->n_inputs > i && n->inputs[i] != NULL;
}

// Shared shape checks; fills N..kW and dt.
static dl_status conv_dims(cg *c, const dl_ir_node *n, conv_geo *g) {
    const dl_ir_type *x = &n->inputs[0]->type, *w = &n->inputs[1]->type, *y = &n->outputs[0]->type;
    if (x->rank != 4 || w->rank != 4 || y->rank != 4) {
        cg_error(c, "only 2-D convolutions (rank-4 tensors) are supported");
        return DL_ERR_UNSUPPORTED;
    }
    memset(g, 0, sizeof *g);
    g->N = x->dims[0].value;
    g->C = x->dims[1].value;
    g->H = x->dims[2].value;
    g->W = x->dims[3].value;
    g->M = y->dims[1].value;
    g->OH = y->dims[2].value;
    g->OW = y->dims[3].value;
    g->kH = w->dims[2].value;
    g->kW = w->dims[3].value;
    g->G = dl_ir_node_attr_int(n, "group");
    g->dt = x->dtype;
    g->has_bias = has_input(n, 2);
    if (g->G < 1 || g->C % g->G != 0 || g->M % g->G != 0) {
        cg_error(c, "group %lld does not divide the channels", (long long)g->G);
        return DL_ERR_UNSUPPORTED;
    }
    g->Cg = g->C / g->G;
    g->Mg = g->M / g->G;
    return DL_OK;
}

// Conv: x: [N, C, H, W], w: [M, C/group, kH, kW], b: [M] -> y: [N, M, OH, OW]; with a fusion
// group's members epi[1 .. n_epi) applied before y (then the group's output) is stored.
static dl_status lower_conv(cg *c, const dl_ir_node *n, const dl_ir_node *const *epi, size_t n_epi,
                            dl_ir_value *const *ext, size_t n_ext, const dl_ir_node *pool) {
    conv_geo g;
    DL_TRY(conv_dims(c, n, &g));
    if (epi) {
        g.epi = epi;
        g.n_epi = n_epi;
        g.y = epi[n_epi - 1]->outputs[0];
        DL_ASSERT(n_ext <= CONV_MAX_EXT);
        for (size_t e = 0; e < n_ext; e++) {
            g.ext[e] = ext[e];
            g.kind[e] = dl_cg__conv_ext_kind(ext[e], n->outputs[0]);
        }
        g.n_ext = n_ext;
    }
    if (pool) {
        g.pool = true;
        g.y = pool->outputs[0];
    }
    int64_t s[2], dil[2], pads[4];
    // n's attributes: the node being lowered (c->node) is the group's root when fused
    if (!attr_ints_of(c, n, "strides", 2, 1, s) || !attr_ints_of(c, n, "dilations", 2, 1, dil) ||
        !attr_ints_of(c, n, "pads", 4, 0, pads)) {
        return DL_ERR_UNSUPPORTED;
    }
    const char *ap = dl_ir_node_attr_string(n, "auto_pad");
    int64_t in[2] = {g.H, g.W}, out[2] = {g.OH, g.OW}, kk[2] = {g.kH, g.kW};
    for (int i = 0; i < 2; i++) {
        int64_t pb, pe;
        dl_ir_conv_pads(ap, in[i], out[i], kk[i], s[i], dil[i], pads[i], pads[2 + i], &pb, &pe);
        g.a[i] = s[i];
        g.b[i] = -pb;
        g.cc[i] = dil[i];
        g.d[i] = 1;
    }
    g.pad_zero = true;
    int64_t kk2 = g.kH * g.kW;
    g.wsm = g.Cg * kk2; // w[(grp*Mg + m)*Cg + ci][kh][kw]
    g.wsg = g.Mg * g.wsm;
    g.wsc = kk2;
    return emit_conv(c, n, &g);
}

// ConvTranspose: x: [N, C, H, W], w: [C, M/group, kH, kW], b: [M] -> y: [N, M, OH, OW], as a
// gather: y[oh] sums x[ih] * w[kh] over ih*s - pb + kh*dil == oh.
static dl_status lower_conv_transpose(cg *c, const dl_ir_node *n) {
    conv_geo g;
    DL_TRY(conv_dims(c, n, &g));
    int64_t s[2], dil[2], pads[4], outpad[2];
    if (!dl_cg__attr_ints(c, "strides", 2, 1, s) || !dl_cg__attr_ints(c, "dilations", 2, 1, dil) ||
        !dl_cg__attr_ints(c, "pads", 4, 0, pads) ||
        !dl_cg__attr_ints(c, "output_padding", 2, 0, outpad)) {
        return DL_ERR_UNSUPPORTED;
    }
    const char *ap = dl_ir_node_attr_string(n, "auto_pad");
    const dl_ir_attr *os = dl_ir_node_attr(n, "output_shape");
    int64_t in[2] = {g.H, g.W}, out[2] = {g.OH, g.OW}, kk[2] = {g.kH, g.kW};
    for (int i = 0; i < 2; i++) {
        int64_t pb = pads[i];
        if (strcmp(ap, "VALID") == 0) {
            pb = 0;
        } else if ((os && os->n > 0) || strncmp(ap, "SAME", 4) == 0) { // as the evaluator
            int64_t total = s[i] * (in[i] - 1) + outpad[i] + (kk[i] - 1) * dil[i] + 1 - out[i];
            int64_t half = floor_div(total, 2);
            pb = strcmp(ap, "SAME_UPPER") == 0 ? half : total - half;
        }
        g.a[i] = 1;
        g.b[i] = pb;
        g.cc[i] = -dil[i];
        g.d[i] = s[i];
    }
    int64_t kk2 = g.kH * g.kW;
    g.wsm = kk2; // w[(grp*Cg + ci)*Mg + m][kh][kw]
    g.wsc = g.Mg * kk2;
    g.wsg = g.Cg * g.wsc;
    return emit_conv(c, n, &g);
}

// ---------------------------------------------------------------------------------------------
// Pools

// Sum over `len` contiguous elements base[off..] (f32; 16-lane partial sums, then the tail).
// With `mean` non-NULL it sums (x - mean)^2 instead.
static LLVMValueRef emit_sum(cg *c, LLVMValueRef base, dl_dtype dt, LLVMValueRef off, int64_t len,
                             LLVMValueRef mean) {
    enum { SW = 16 };
    int64_t nv = len / SW;
    LLVMValueRef total = cg_f32(c, 0);
    if (nv > 0) {
        LLVMTypeRef vt = vty(c, SW);
        LLVMValueRef acc = dl_cg__entry_alloca(c, vt);
        st(c, LLVMConstNull(vt), acc);
        LLVMValueRef vm = mean ? splat(c, mean, SW) : NULL;
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, nv), "v");
        LLVMValueRef v = dl_cg__vload(c, base, dt, iadd(c, off, imul(c, i, SW)), SW);
        if (vm) {
            LLVMValueRef d = LLVMBuildFSub(c->b, v, vm, "");
            st(c, dl_cg__fmuladd(c, d, d, ld(c, vt, acc)), acc);
        } else {
            st(c, LLVMBuildFAdd(c->b, ld(c, vt, acc), v, ""), acc);
        }
        cg_for_end(c, &l);
        total = dl_cg__hsum(c, ld(c, vt, acc), SW);
    }
    if (len % SW != 0) {
        LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
        st(c, total, acc);
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, cg_i64(c, nv * SW), cg_i64(c, len), "t");
        LLVMValueRef v = cg_load(c, base, dt, iadd(c, off, i));
        if (mean) {
            LLVMValueRef d = LLVMBuildFSub(c->b, v, mean, "");
            st(c, dl_cg__fmuladd(c, d, d, ld(c, c->t_f32, acc)), acc);
        } else {
            st(c, LLVMBuildFAdd(c->b, ld(c, c->t_f32, acc), v, ""), acc);
        }
        cg_for_end(c, &l);
        total = ld(c, c->t_f32, acc);
    }
    return total;
}

// Pool geometry, window count and the max rule, shared with MaxPoolGrad / AveragePoolGrad
// (lower_grad_nn.c) through cg_geometry.h.
bool dl_cg__pool_geometry(cg *c, const dl_ir_type *xt, const dl_ir_type *yt, dl_cg__pool_geo *g) {
    int32_t nsp = xt->rank - 2;
    int64_t pads[2 * DL_MAX_RANK];
    g->nsp = nsp;
    if (!dl_cg__attr_ints(c, "kernel_shape", nsp, 1, g->k) ||
        !dl_cg__attr_ints(c, "strides", nsp, 1, g->s) ||
        !dl_cg__attr_ints(c, "dilations", nsp, 1, g->dil) ||
        !dl_cg__attr_ints(c, "pads", 2 * nsp, 0, pads)) {
        return false;
    }
    const char *ap = dl_ir_node_attr_string(c->node, "auto_pad");
    g->in_sp = 1;
    g->out_sp = 1;
    for (int32_t i = 0; i < nsp; i++) {
        g->xd[i] = xt->dims[2 + i].value;
        g->yd[i] = yt->dims[2 + i].value;
        dl_ir_conv_pads(ap, g->xd[i], g->yd[i], g->k[i], g->s[i], g->dil[i], pads[i], pads[nsp + i],
                        &g->pb[i], &g->pe[i]);
        g->in_sp *= g->xd[i];
        g->out_sp *= g->yd[i];
    }
    int64_t sx = 1, sy = 1;
    for (int32_t i = nsp - 1; i >= 0; i--) {
        g->xs[i] = sx;
        g->ys[i] = sy;
        sx *= g->xd[i];
        sy *= g->yd[i];
    }
    return true;
}

LLVMValueRef dl_cg__pool_count(cg *c, const dl_cg__pool_geo *g, const LLVMValueRef *wst,
                               bool incl) {
    LLVMValueRef cnt = cg_i64(c, 1);
    for (int32_t i = 0; i < g->nsp; i++) {
        LLVMValueRef ca = dl_cg__entry_alloca(c, c->t_i64);
        st(c, cg_i64(c, 0), ca);
        cg_loop l;
        LLVMValueRef j = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, g->k[i]), "j");
        LLVMValueRef p = iadd(c, wst[i], imul(c, j, g->dil[i]));
        LLVMValueRef ok =
            incl ? in_range(c, p, -g->pb[i], g->xd[i] + g->pe[i]) : in_range(c, p, 0, g->xd[i]);
        st(c, iadd(c, ld(c, c->t_i64, ca), LLVMBuildZExt(c->b, ok, c->t_i64, "")), ca);
        cg_for_end(c, &l);
        cnt = LLVMBuildMul(c->b, cnt, ld(c, c->t_i64, ca), "");
    }
    return cnt;
}

void dl_cg__pool_max_update(cg *c, LLVMValueRef v, LLVMValueRef pos, LLVMValueRef acc,
                            LLVMValueRef arg) {
    LLVMValueRef cur = ld(c, c->t_f32, acc), a = ld(c, c->t_i64, arg);
    LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntSLT, a, cg_i64(c, 0), "");
    LLVMValueRef upd = LLVMBuildOr(c->b, first, dl_cg__max_takes(c, v, cur), "");
    st(c, LLVMBuildSelect(c->b, upd, v, cur, ""), acc);
    st(c, LLVMBuildSelect(c->b, upd, pos, a, ""), arg);
}

// MaxPool fast path: 2-D, no Indices output, no padding, dilation 1, every window inside the
// input (floor mode, or ceil mode that happens to fit): no bounds checks, the window's taps
// unrolled. float32 with a column stride of 1 or 2 goes a vector of windows at a time
// (dl_cg__pool_max_vec: a tap's lanes are one masked load, or the even lanes of two; LLVM left
// the scalar loop scalar); other cases loop over output columns. Same result as the general
// path: the first tap starts the max, a later tap replaces it when greater, or when it is NaN
// and the current max is not.
static bool pool_fits_inside(const dl_cg__pool_geo *g) {
    if (g->nsp != 2 || g->k[0] * g->k[1] > 16) {
        return false;
    }
    for (int32_t i = 0; i < 2; i++) {
        if (g->pb[i] != 0 || g->dil[i] != 1 || (g->yd[i] - 1) * g->s[i] + g->k[i] > g->xd[i]) {
            return false;
        }
    }
    return true;
}

// i64 max(v, 0)
static LLVMValueRef clamp0(cg *c, LLVMValueRef v) {
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, v, cg_i64(c, 0), ""), cg_i64(c, 0),
                           v, "");
}

// Lanes x[start + s l] for l < nvalid (s = 1 or 2; x float32), 0 in the others: one masked load,
// or for s = 2 the even lanes of two (no element past the last needed one is read).
static LLVMValueRef pool_tap_vec(cg *c, LLVMValueRef xp, LLVMValueRef start, int64_t s, unsigned V,
                                 LLVMValueRef nvalid) {
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, V);
    LLVMValueRef p0 = LLVMBuildGEP2(c->b, c->t_f32, xp, &start, 1, "");
    if (s == 1) {
        return cg_masked_load(c, vt, p0, cg_lane_mask_rt(c, nvalid, V));
    }
    // element e of [start, start + 2V) is needed when e <= 2 (nvalid - 1)
    LLVMValueRef lim = iaddk(c, imul(c, nvalid, 2), -1);
    LLVMValueRef s1 = iaddk(c, start, V);
    LLVMValueRef lo = cg_masked_load(c, vt, p0, cg_lane_mask_rt(c, lim, V));
    LLVMValueRef hi = cg_masked_load(c, vt, LLVMBuildGEP2(c->b, c->t_f32, xp, &s1, 1, ""),
                                     cg_lane_mask_rt(c, clamp0(c, iaddk(c, lim, -(int64_t)V)), V));
    LLVMValueRef m[CG_MAX_LANES];
    for (unsigned l = 0; l < V; l++) {
        m[l] = cg_i32(c, (int32_t)(2 * l));
    }
    return LLVMBuildShuffleVector(c->b, lo, hi, LLVMConstVector(m, V), "");
}

// v > acc, or v is NaN and acc is not: (v > acc or unordered) and acc is a number. Two compares
// (one masked by the other with AVX-512) instead of three and two logic operations.
LLVMValueRef dl_cg__max_takes(cg *c, LLVMValueRef v, LLVMValueRef acc) {
    LLVMValueRef ugt = LLVMBuildFCmp(c->b, LLVMRealUGT, v, acc, "");
    LLVMValueRef anum = LLVMBuildFCmp(c->b, LLVMRealORD, acc, acc, "");
    return LLVMBuildAnd(c->b, ugt, anum, "");
}

bool dl_cg__pool_vec_ok(cg *c, const dl_cg__pool_geo *g, dl_dtype dt) {
    return dt == DL_DT_FLOAT && g->nsp == 2 && (g->s[1] == 1 || g->s[1] == 2) &&
           c->target->vector_width(c, DL_DT_FLOAT) >= 8;
}

// MaxPool's rule over the k0 x k1 window taps, V windows at a time (lane l: the window at
// element xb + s[1] l of a row, rows W apart): the running max (and in *idx, when non-NULL, the
// selected tap as <V x i32>), the same selects as the scalar loop lane by lane.
LLVMValueRef dl_cg__pool_max_vec(cg *c, LLVMValueRef xp, LLVMValueRef xb, const dl_cg__pool_geo *g,
                                 unsigned V, LLVMValueRef nvalid, LLVMValueRef *idx) {
    LLVMValueRef acc = NULL, id = NULL;
    LLVMTypeRef it = LLVMVectorType(c->t_i32, V);
    for (int64_t t = 0; t < g->k[0] * g->k[1]; t++) {
        LLVMValueRef v = pool_tap_vec(c, xp, iaddk(c, xb, (t / g->k[1]) * g->xd[1] + t % g->k[1]),
                                      g->s[1], V, nvalid);
        if (!acc) {
            acc = v;
            id = LLVMConstNull(it);
            continue;
        }
        LLVMValueRef upd = dl_cg__max_takes(c, v, acc);
        acc = LLVMBuildSelect(c->b, upd, v, acc, "");
        if (idx) {
            LLVMValueRef tv = LLVMBuildInsertElement(c->b, LLVMGetUndef(it), cg_i32(c, (int32_t)t),
                                                     cg_i32(c, 0), "");
            tv = LLVMBuildShuffleVector(c->b, tv, LLVMGetUndef(it), LLVMConstNull(it), "");
            id = LLVMBuildSelect(c->b, upd, tv, id, "");
        }
    }
    if (idx) {
        *idx = id;
    }
    return acc;
}

typedef struct pool2_ctx {
    LLVMValueRef src, xb, yp, yo;
    dl_cg__pool_geo pg;
    unsigned V;
} pool2_ctx;

static void pool2_chunk(cg *c, void *ctx, LLVMValueRef pw0, LLVMValueRef nvalid) {
    const pool2_ctx *q = ctx;
    LLVMValueRef v =
        dl_cg__pool_max_vec(c, q->src, iadd(c, q->xb, imul(c, pw0, 2)), &q->pg, q->V, nvalid, NULL);
    LLVMValueRef yi = iadd(c, q->yo, pw0);
    cg_masked_store(c, v, LLVMBuildInBoundsGEP2(c->b, c->t_f32, q->yp, &yi, 1, ""),
                    cg_lane_mask_rt(c, nvalid, q->V));
}

void dl_cg__pool2_row(cg *c, LLVMValueRef src, LLVMValueRef xb, int64_t rs, LLVMValueRef yp,
                      LLVMValueRef yo, int64_t PW) {
    unsigned vw = (unsigned)c->target->vector_width(c, DL_DT_FLOAT);
    if (vw >= 8) {
        pool2_ctx q = {src, xb, yp, yo, {0}, vw};
        q.pg.nsp = 2;
        q.pg.k[0] = q.pg.k[1] = q.pg.s[0] = q.pg.s[1] = 2;
        q.pg.xd[1] = rs;
        dl_cg__pool_row_chunks(c, PW, vw, pool2_chunk, &q);
        return;
    }
    cg_loop l; // one window at a time, taps in row-major order
    LLVMValueRef pw = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, PW), "pw");
    LLVMValueRef x0 = iadd(c, xb, imul(c, pw, 2)), acc = NULL;
    for (int64_t t = 0; t < 4; t++) {
        LLVMValueRef v = cg_load(c, src, DL_DT_FLOAT, iaddk(c, x0, (t / 2) * rs + t % 2));
        acc = acc ? LLVMBuildSelect(c->b, dl_cg__max_takes(c, v, acc), v, acc, "") : v;
    }
    cg_store(c, yp, DL_DT_FLOAT, iadd(c, yo, pw), acc);
    cg_for_end(c, &l);
}

// The row loop of the vector pool kernels: body(ow0, nvalid) for the full chunks of V outputs,
// then for the last, partial one.
void dl_cg__pool_row_chunks(cg *c, int64_t OW, unsigned V, dl_cg__pool_chunk_fn body, void *ctx) {
    int64_t n_full = OW / (int64_t)V, rest = OW % (int64_t)V;
    if (n_full > 0) {
        cg_loop l;
        LLVMValueRef q = cg_for_begin(c, &l, cg_i64(c, 0), cg_i64(c, n_full), "owv");
        body(c, ctx, imul(c, q, (int64_t)V), cg_i64(c, (int64_t)V));
        cg_for_end(c, &l);
    }
    if (rest > 0) {
        body(c, ctx, cg_i64(c, n_full * (int64_t)V), cg_i64(c, rest));
    }
}

static void pool_fwd_chunk(cg *c, void *ctx, LLVMValueRef ow0, LLVMValueRef nvalid) {
    const dl_cg__pool_row *f = ctx;
    LLVMValueRef xb = iadd(c, f->xrow, imul(c, ow0, f->g->s[1]));
    LLVMValueRef acc = dl_cg__pool_max_vec(c, f->k->ptr[1], xb, f->g, f->V, nvalid, NULL);
    LLVMValueRef yo = iadd(c, f->yrow, ow0);
    cg_masked_store(c, acc, LLVMBuildGEP2(c->b, c->t_f32, f->k->ptr[0], &yo, 1, ""),
                    cg_lane_mask_rt(c, nvalid, f->V));
}

static dl_status lower_max_pool_2d_inside(cg *c, dl_ir_value *x, dl_ir_value *y,
                                          const dl_cg__pool_geo *g) {
    // x: [N, C, H, W] -> y: [N, C, OH, OW]; outer range N*C*OH (one output row each).
    dl_dtype dt = x->type.dtype;
    int64_t NC = x->type.dims[0].value * x->type.dims[1].value;
    dl_ir_value *vals[2] = {y, x};
    cg_kernel kr;
    DL_TRY(cg_kernel_begin(c, vals, 2, NC * g->yd[0], &kr));
    cg_loop lit, low;
    LLVMValueRef it = cg_for_begin(c, &lit, kr.begin, kr.end, "it");
    LLVMValueRef oh = LLVMBuildSRem(c->b, it, cg_i64(c, g->yd[0]), "oh");
    LLVMValueRef nc = LLVMBuildSDiv(c->b, it, cg_i64(c, g->yd[0]), "nc");
    LLVMValueRef xrow = iadd(c, imul(c, nc, g->in_sp), imul(c, oh, g->s[0] * g->xd[1]));
    LLVMValueRef yrow = imul(c, it, g->yd[1]);
    if (dl_cg__pool_vec_ok(c, g, dt)) {
        dl_cg__pool_row f = {g, &kr, xrow, yrow, (unsigned)c->target->vector_width(c, DL_DT_FLOAT)};
        dl_cg__pool_row_chunks(c, g->yd[1], f.V, pool_fwd_chunk, &f);
        cg_for_end(c, &lit);
        return cg_kernel_end(c, &kr);
    }
    LLVMValueRef ow = cg_for_begin(c, &low, cg_i64(c, 0), cg_i64(c, g->yd[1]), "ow");
    LLVMValueRef xb = iadd(c, xrow, imul(c, ow, g->s[1]));
    LLVMValueRef acc = NULL;
    for (int64_t i = 0; i < g->k[0]; i++) {
        for (int64_t j = 0; j < g->k[1]; j++) {
            LLVMValueRef v = cg_load(c, kr.ptr[1], dt, iaddk(c, xb, i * g->xd[1] + j));
            if (!acc) {
                acc = v;
                continue;
            }
            LLVMValueRef upd = dl_cg__max_takes(c, v, acc);
            acc = LLVMBuildSelect(c->b, upd, v, acc, "");
        }
    }
    cg_store(c, kr.ptr[0], y->type.dtype, iadd(c, yrow, ow), acc);
    cg_for_end(c, &low);
    cg_for_end(c, &lit);
    return cg_kernel_end(c, &kr);
}

// MaxPool / AveragePool: x: [N, C, d1..dk] -> y (and MaxPool's Indices, int64): [N, C, o1..ok],
// k >= 1 spatial dims. Outer range N*C*o1; the window is a nest of per-dim tap loops, each
// skipping taps outside the input (checked once per dim level). Semantics as ir/eval_nn.c's
// pool(): padding never wins a max, the first maximum in window order wins and NaN beats
// numbers; the average divides by the count of taps inside the input, or inside the explicitly
// padded input with count_include_pad (an empty window gives 0/0 = NaN).
static dl_status lower_pool(cg *c, const dl_ir_node *n) {
    bool is_max = n->op == DL_IR_OP_MAX_POOL;
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    dl_ir_value *yi = is_max && n->n_outputs > 1 ? n->outputs[1] : NULL;
    const dl_ir_type *xt = &x->type, *yt = &y->type;
    if (xt->rank < 3 || yt->rank != xt->rank) {
        cg_error(c, "pooling needs an input of rank >= 3");
        return DL_ERR_UNSUPPORTED;
    }
    dl_cg__pool_geo geo;
    if (!dl_cg__pool_geometry(c, xt, yt, &geo)) {
        return DL_ERR_UNSUPPORTED;
    }
    if (is_max && !yi && pool_fits_inside(&geo) && dl_ir_type_numel(yt) > 0) {
        return lower_max_pool_2d_inside(c, x, y, &geo);
    }
    int32_t nsp = geo.nsp;
    const int64_t *k = geo.k, *s = geo.s, *dil = geo.dil, *pb = geo.pb;
    const int64_t *xd = geo.xd, *yd = geo.yd, *xs = geo.xs, *ys = geo.ys;
    int64_t in_sp = geo.in_sp, out_sp = geo.out_sp;
    // The index output: row or column major inside one [N, C] block.
    int64_t is[DL_MAX_RANK];
    bool col_major = is_max && dl_ir_node_attr_int(n, "storage_order") != 0;
    bool incl = !is_max && dl_ir_node_attr_int(n, "count_include_pad") != 0;
    int64_t scm = 1;
    for (int32_t i = 0; i < nsp; i++) {
        is[i] = col_major ? scm : xs[i];
        scm *= xd[i];
    }
    int64_t NC = xt->dims[0].value * xt->dims[1].value;
    if (NC * out_sp == 0) {
        return DL_OK;
    }
    dl_ir_value *vals[3] = {y, yi ? yi : x, x};
    size_t n_vals = yi ? 3 : 2;
    size_t xa = n_vals - 1; // argument index of x
    cg_kernel kr;
    DL_TRY(cg_kernel_begin(c, vals, n_vals, NC * yd[0], &kr));
    cg_loop lit, lo[DL_MAX_RANK], lk[DL_MAX_RANK];
    LLVMValueRef it = cg_for_begin(c, &lit, kr.begin, kr.end, "it");
    LLVMValueRef oc[DL_MAX_RANK];
    oc[0] = LLVMBuildSRem(c->b, it, cg_i64(c, yd[0]), "o0");
    LLVMValueRef nc = LLVMBuildSDiv(c->b, it, cg_i64(c, yd[0]), "nc");
    for (int32_t i = 1; i < nsp; i++) {
        oc[i] = cg_for_begin(c, &lo[i], cg_i64(c, 0), cg_i64(c, yd[i]), "o");
    }
    LLVMValueRef yoff = imul(c, nc, out_sp);
    for (int32_t i = 0; i < nsp; i++) {
        yoff = iadd(c, yoff, imul(c, oc[i], ys[i]));
    }
    LLVMValueRef xb = imul(c, nc, in_sp);
    // Window start per dim: oc*s - pb.
    LLVMValueRef wst[DL_MAX_RANK];
    for (int32_t i = 0; i < nsp; i++) {
        wst[i] = iaddk(c, imul(c, oc[i], s[i]), -pb[i]);
    }
    LLVMValueRef cntf = NULL;
    if (!is_max) {
        cntf = LLVMBuildSIToFP(c->b, dl_cg__pool_count(c, &geo, wst, incl), c->t_f32, "");
    }
    LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32), arg = dl_cg__entry_alloca(c, c->t_i64);
    st(c, cg_f32(c, is_max ? -(double)INFINITY : 0.0), acc);
    st(c, cg_i64(c, -1), arg);
    dl_cg__if fk[DL_MAX_RANK];
    LLVMValueRef xoff = xb, ioff = xb;
    for (int32_t i = 0; i < nsp; i++) {
        LLVMValueRef j = cg_for_begin(c, &lk[i], cg_i64(c, 0), cg_i64(c, k[i]), "kj");
        LLVMValueRef p = iadd(c, wst[i], imul(c, j, dil[i]));
        dl_cg__if_begin(c, &fk[i], in_range(c, p, 0, xd[i]));
        xoff = iadd(c, xoff, imul(c, p, xs[i]));
        ioff = iadd(c, ioff, imul(c, p, is[i]));
    }
    LLVMValueRef v = cg_load(c, kr.ptr[xa], xt->dtype, xoff);
    if (is_max) {
        dl_cg__pool_max_update(c, v, ioff, acc, arg);
    } else {
        st(c, LLVMBuildFAdd(c->b, ld(c, c->t_f32, acc), v, ""), acc);
    }
    for (int32_t i = nsp - 1; i >= 0; i--) {
        dl_cg__if_end(c, &fk[i]);
        cg_for_end(c, &lk[i]);
    }
    LLVMValueRef res = ld(c, c->t_f32, acc);
    if (!is_max) {
        res = LLVMBuildFDiv(c->b, res, cntf, "");
    }
    cg_store(c, kr.ptr[0], yt->dtype, yoff, res);
    if (yi) {
        LLVMValueRef a = ld(c, c->t_i64, arg);
        LLVMValueRef neg = LLVMBuildICmp(c->b, LLVMIntSLT, a, cg_i64(c, 0), "");
        cg_store(c, kr.ptr[1], yi->type.dtype, yoff,
                 LLVMBuildSelect(c->b, neg, cg_i64(c, 0), a, ""));
    }
    for (int32_t i = nsp - 1; i >= 1; i--) {
        cg_for_end(c, &lo[i]);
    }
    cg_for_end(c, &lit);
    return cg_kernel_end(c, &kr);
}

// GlobalAveragePool: x: [N, C, d...] -> y: [N, C, 1, ...]; outer range N*C.
static dl_status lower_global_avg_pool(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    if (x->type.rank < 2) {
        cg_error(c, "GlobalAveragePool needs an input of rank >= 3");
        return DL_ERR_UNSUPPORTED;
    }
    int64_t NC = x->type.dims[0].value * x->type.dims[1].value;
    if (NC == 0) {
        return DL_OK;
    }
    int64_t sp = dl_ir_type_numel(&x->type) / NC;
    dl_ir_value *vals[2] = {y, x};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 2, NC, &k));
    cg_loop l;
    LLVMValueRef it = cg_for_begin(c, &l, k.begin, k.end, "nc");
    LLVMValueRef s = emit_sum(c, k.ptr[1], x->type.dtype, imul(c, it, sp), sp, NULL);
    cg_store(c, k.ptr[0], y->type.dtype, it, LLVMBuildFDiv(c->b, s, cg_f32(c, (double)sp), ""));
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// Normalisation

// BatchNormalization, training (training_mode = 1): x: [N, C, S...], scale, B, input_mean,
// input_var: [C]. One kernel, outer range C: iteration c computes the batch mean and the biased
// batch variance of channel c over N and the spatial dims (two passes, f32 sums: per batch item
// a contiguous run of S elements through emit_sum, the runs added in order), then writes
// y[:, c, ...] = (x - mean) * (scale / sqrt(var + eps)) + B and, when requested,
// running_mean[c] = input_mean * momentum + mean * (1 - momentum) and running_var[c] likewise
// with the biased variance (as ir/eval_nn.c's batch_norm, ONNX's reference). Everything a channel
// needs is inside its own iteration, so any split of [0, C) gives the same bytes. An empty batch
// (N * S == 0) gives mean = var = 0/0 = NaN, as the evaluator.
static dl_status lower_batch_norm_train(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0];
    const dl_ir_type *xt = &x->type;
    int64_t N = xt->dims[0].value, C = xt->dims[1].value;
    if (C == 0) {
        return DL_OK;
    }
    int64_t S = N != 0 ? dl_ir_type_numel(xt) / (N * C) : 0;
    double eps = dl_ir_node_attr_float(n, "epsilon"), mom = dl_ir_node_attr_float(n, "momentum");
    dl_ir_value *rm = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *rv = n->n_outputs > 2 ? n->outputs[2] : NULL;
    // args: y, [running_mean], [running_var], x, scale, B, input_mean, input_var
    dl_ir_value *vals[8];
    size_t a_rm, a_rv;
    size_t nv = dl_cg__out_args3(n, vals, &a_rm, &a_rv);
    size_t a_x = nv;
    for (size_t i = 0; i < 5; i++) {
        vals[nv++] = n->inputs[i];
    }
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, C, &k));
    cg_loop l, ln;
    LLVMValueRef ch = cg_for_begin(c, &l, k.begin, k.end, "c");
    LLVMValueRef acc = dl_cg__entry_alloca(c, c->t_f32);
    LLVMValueRef cnt = cg_f32(c, (double)(N * S));
    // pass 1: mean; pass 2: biased variance. Batch item b's run starts at (b*C + c)*S.
    LLVMValueRef stat[2] = {NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        st(c, cg_f32(c, 0), acc);
        if (N > 0 && S > 0) {
            LLVMValueRef b = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, N), "b");
            LLVMValueRef off = imul(c, iadd(c, imul(c, b, C), ch), S);
            LLVMValueRef part = emit_sum(c, k.ptr[a_x], xt->dtype, off, S, stat[0]);
            st(c, LLVMBuildFAdd(c->b, ld(c, c->t_f32, acc), part, ""), acc);
            cg_for_end(c, &ln);
        }
        stat[pass] = LLVMBuildFDiv(c->b, ld(c, c->t_f32, acc), cnt, pass ? "var" : "mean");
    }
    LLVMValueRef mean = stat[0], var = stat[1];
    dl_dtype dts = n->inputs[1]->type.dtype, dtb = n->inputs[2]->type.dtype;
    dl_dtype dtm = n->inputs[3]->type.dtype, dtv = n->inputs[4]->type.dtype;
    LLVMValueRef sc = cg_load(c, k.ptr[a_x + 1], dts, ch);
    LLVMValueRef bi = cg_load(c, k.ptr[a_x + 2], dtb, ch);
    LLVMValueRef sd =
        cg_intrinsic1(c, "llvm.sqrt", c->t_f32, LLVMBuildFAdd(c->b, var, cg_f32(c, eps), ""));
    LLVMValueRef a = LLVMBuildFDiv(c->b, sc, sd, "");
    if (N > 0 && S > 0) {
        cg_loop li;
        LLVMValueRef b = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, N), "b");
        LLVMValueRef off = imul(c, iadd(c, imul(c, b, C), ch), S);
        LLVMValueRef i = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, S), "s");
        LLVMValueRef idx = iadd(c, off, i);
        LLVMValueRef xv = cg_load(c, k.ptr[a_x], xt->dtype, idx);
        LLVMValueRef r = dl_cg__fmuladd(c, LLVMBuildFSub(c->b, xv, mean, ""), a, bi);
        cg_store(c, k.ptr[0], n->outputs[0]->type.dtype, idx, r);
        cg_for_end(c, &li);
        cg_for_end(c, &ln);
    }
    // running stats: input * momentum + batch * (1 - momentum)
    LLVMValueRef km = cg_f32(c, mom), k1m = cg_f32(c, 1 - mom);
    if (rm) {
        LLVMValueRef mu = cg_load(c, k.ptr[a_x + 3], dtm, ch);
        LLVMValueRef r = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, mu, km, ""),
                                       LLVMBuildFMul(c->b, mean, k1m, ""), "");
        cg_store(c, k.ptr[a_rm], rm->type.dtype, ch, r);
    }
    if (rv) {
        LLVMValueRef va = cg_load(c, k.ptr[a_x + 4], dtv, ch);
        LLVMValueRef r = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, va, km, ""),
                                       LLVMBuildFMul(c->b, var, k1m, ""), "");
        cg_store(c, k.ptr[a_rv], rv->type.dtype, ch, r);
    }
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// BatchNormalization, inference: x: [N, C, ...], scale, B, mean, var: [C];
// y = (x - mean) * (scale / sqrt(var + eps)) + B. Outer range N*C. The optional outputs
// (running mean / var) pass mean and var through, as the evaluator does outside training.
// training_mode = 1 goes to lower_batch_norm_train.
static dl_status lower_batch_norm(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *y = n->outputs[0];
    const dl_ir_type *xt = &x->type;
    if (xt->rank < 2 || n->n_inputs < 5) {
        cg_error(c, "needs X of rank >= 2 and all four channel inputs");
        return DL_ERR_UNSUPPORTED;
    }
    for (size_t i = 1; i < 5; i++) {
        if (!has_input(n, i)) {
            cg_error(c, "needs all four channel inputs");
            return DL_ERR_UNSUPPORTED;
        }
    }
    if (dl_ir_node_attr_int(n, "training_mode") != 0) {
        return lower_batch_norm_train(c, n);
    }
    int64_t C = xt->dims[1].value, NC = xt->dims[0].value * C;
    double eps = dl_ir_node_attr_float(n, "epsilon");
    if (NC > 0) {
        int64_t S = dl_ir_type_numel(xt) / NC;
        dl_ir_value *vals[6] = {y, x, n->inputs[1], n->inputs[2], n->inputs[3], n->inputs[4]};
        cg_kernel k;
        DL_TRY(cg_kernel_begin(c, vals, 6, NC, &k));
        cg_loop l, li;
        LLVMValueRef it = cg_for_begin(c, &l, k.begin, k.end, "nc");
        LLVMValueRef ch = LLVMBuildSRem(c->b, it, cg_i64(c, C), "c");
        LLVMValueRef sc = cg_load(c, k.ptr[2], n->inputs[1]->type.dtype, ch);
        LLVMValueRef bi = cg_load(c, k.ptr[3], n->inputs[2]->type.dtype, ch);
        LLVMValueRef mu = cg_load(c, k.ptr[4], n->inputs[3]->type.dtype, ch);
        LLVMValueRef va = cg_load(c, k.ptr[5], n->inputs[4]->type.dtype, ch);
        LLVMValueRef sd =
            cg_intrinsic1(c, "llvm.sqrt", c->t_f32, LLVMBuildFAdd(c->b, va, cg_f32(c, eps), ""));
        LLVMValueRef a = LLVMBuildFDiv(c->b, sc, sd, "");
        LLVMValueRef i = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, S), "s");
        LLVMValueRef idx = iadd(c, imul(c, it, S), i);
        LLVMValueRef xv = cg_load(c, k.ptr[1], xt->dtype, idx);
        LLVMValueRef r = dl_cg__fmuladd(c, LLVMBuildFSub(c->b, xv, mu, ""), a, bi);
        cg_store(c, k.ptr[0], y->type.dtype, idx, r);
        cg_for_end(c, &li);
        cg_for_end(c, &l);
        DL_TRY(cg_kernel_end(c, &k));
    }
    // running_mean / running_var = mean / var (inference).
    for (size_t o = 1; o < n->n_outputs && o < 3; o++) {
        dl_ir_value *out = n->outputs[o], *src = n->inputs[2 + o];
        if (!out || C == 0) {
            continue;
        }
        dl_ir_value *vals[2] = {out, src};
        cg_kernel k;
        DL_TRY(cg_kernel_begin(c, vals, 2, C, &k));
        cg_loop l;
        LLVMValueRef i = cg_for_begin(c, &l, k.begin, k.end, "c");
        LLVMValueRef v = cg_load(c, k.ptr[1], src->type.dtype, i);
        cg_store(c, k.ptr[0], out->type.dtype, i,
                 cg_convert(c, v, src->type.dtype, out->type.dtype));
        cg_for_end(c, &l);
        DL_TRY(cg_kernel_end(c, &k));
    }
    return DL_OK;
}

// LayerNormalization: x: [d0..d_{a-1}, d_a..d_{r-1}], normalised over [a, r) with the biased
// variance (two passes, f32); y = (x - mean) * inv_std * scale + B, scale and B broadcast to
// x.shape[a:]. Mean and InvStdDev: [d0..d_{a-1}, 1, ...]. Outer range = d0 * ... * d_{a-1}.
static dl_status lower_layer_norm(cg *c, const dl_ir_node *n) {
    dl_ir_value *x = n->inputs[0], *sc = n->inputs[1], *bi = has_input(n, 2) ? n->inputs[2] : NULL;
    const dl_ir_type *xt = &x->type;
    int32_t r = xt->rank;
    int64_t axis = dl_ir_node_attr_int(n, "axis");
    if (axis < 0) {
        axis += r;
    }
    if (axis < 0 || axis >= r) {
        cg_error(c, "axis %lld is out of range for rank %d", (long long)axis, r);
        return DL_ERR_UNSUPPORTED;
    }
    int32_t ax = (int32_t)axis;
    int64_t outer = 1;
    for (int32_t i = 0; i < ax; i++) {
        outer *= xt->dims[i].value;
    }
    int64_t numel = dl_ir_type_numel(xt);
    if (numel == 0) {
        return DL_OK;
    }
    int64_t inner = numel / outer;
    dl_ir_value *mo = n->n_outputs > 1 ? n->outputs[1] : NULL;
    dl_ir_value *io = n->n_outputs > 2 ? n->outputs[2] : NULL;
    // Operands of the normalise loop (x/y, scale, B) and their strides over the inner dims,
    // size-1 dims dropped and contiguous neighbours merged.
    int64_t sx[DL_MAX_RANK], ss[DL_MAX_RANK], sb[DL_MAX_RANK];
    cg_strides(xt, sx);
    cg_broadcast_strides(&sc->type, xt, ss);
    if (bi) {
        cg_broadcast_strides(&bi->type, xt, sb);
    } else {
        memset(sb, 0, sizeof sb);
    }
    int64_t dims[DL_MAX_RANK], mst[3][DL_MAX_RANK];
    int32_t R = 0;
    for (int32_t j = ax; j < r; j++) {
        int64_t d = xt->dims[j].value;
        if (d == 1) {
            continue;
        }
        const int64_t *sj[3] = {sx, ss, sb};
        bool fuse = R > 0;
        for (int q = 0; fuse && q < 3; q++) {
            fuse = mst[q][R - 1] == sj[q][j] * d;
        }
        if (fuse) {
            dims[R - 1] *= d;
        } else {
            dims[R++] = d;
        }
        for (int q = 0; q < 3; q++) {
            mst[q][R - 1] = sj[q][j];
        }
    }
    dl_ir_value *vals[6];
    size_t nv = 0;
    vals[nv++] = n->outputs[0];
    size_t a_mo = mo ? nv++ : 0, a_io = io ? nv++ : 0;
    if (mo) {
        vals[a_mo] = mo;
    }
    if (io) {
        vals[a_io] = io;
    }
    size_t a_x = nv++, a_s = nv++, a_b = bi ? nv++ : 0;
    vals[a_x] = x;
    vals[a_s] = sc;
    if (bi) {
        vals[a_b] = bi;
    }
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, outer, &k));
    cg_loop l;
    LLVMValueRef it = cg_for_begin(c, &l, k.begin, k.end, "o");
    LLVMValueRef xo = imul(c, it, inner);
    LLVMValueRef fin = cg_f32(c, (double)inner);
    LLVMValueRef mean =
        LLVMBuildFDiv(c->b, emit_sum(c, k.ptr[a_x], xt->dtype, xo, inner, NULL), fin, "mean");
    LLVMValueRef var =
        LLVMBuildFDiv(c->b, emit_sum(c, k.ptr[a_x], xt->dtype, xo, inner, mean), fin, "var");
    LLVMValueRef sd =
        cg_intrinsic1(c, "llvm.sqrt", c->t_f32,
                      LLVMBuildFAdd(c->b, var, cg_f32(c, dl_ir_node_attr_float(n, "epsilon")), ""));
    LLVMValueRef inv = LLVMBuildFDiv(c->b, cg_f32(c, 1), sd, "inv");
    if (mo) {
        cg_store(c, k.ptr[a_mo], mo->type.dtype, it, mean);
    }
    if (io) {
        cg_store(c, k.ptr[a_io], io->type.dtype, it, inv);
    }
    cg_loop li[DL_MAX_RANK];
    LLVMValueRef off[3] = {xo, cg_i64(c, 0), cg_i64(c, 0)};
    for (int32_t j = 0; j < R; j++) {
        LLVMValueRef iv = cg_for_begin(c, &li[j], cg_i64(c, 0), cg_i64(c, dims[j]), "i");
        for (int q = 0; q < 3; q++) {
            if (mst[q][j] != 0) {
                off[q] = iadd(c, off[q], imul(c, iv, mst[q][j]));
            }
        }
    }
    LLVMValueRef xv = cg_load(c, k.ptr[a_x], xt->dtype, off[0]);
    LLVMValueRef v = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, xv, mean, ""), inv, "");
    v = LLVMBuildFMul(c->b, v, cg_load(c, k.ptr[a_s], sc->type.dtype, off[1]), "");
    if (bi) {
        v = LLVMBuildFAdd(c->b, v, cg_load(c, k.ptr[a_b], bi->type.dtype, off[2]), "");
    }
    cg_store(c, k.ptr[0], n->outputs[0]->type.dtype, off[0], v);
    for (int32_t j = R - 1; j >= 0; j--) {
        cg_for_end(c, &li[j]);
    }
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table.

dl_status dl_cg__lower_conv(cg *c, const dl_ir_node *n) {
    return lower_conv(c, n, NULL, 0, NULL, 0, NULL);
}

dl_status dl_cg__lower_conv_fused(cg *c, const dl_ir_node *const *g, size_t n) {
    // A trailing MaxPool (passes/fusion.c: 2 x 2, stride 2, no padding) pools the stored values
    const dl_ir_node *pool = n > 1 && g[n - 1]->op == DL_IR_OP_MAX_POOL ? g[n - 1] : NULL;
    size_t n_epi = pool ? n - 1 : n;
    const dl_ir_type *y = &g[n_epi - 1]->outputs[0]->type, *v = &g[0]->outputs[0]->type;
    if (pool) {
        const dl_ir_type *py = &pool->outputs[0]->type;
        if (py->dtype != DL_DT_FLOAT || py->rank != 4 || v->rank != 4 ||
            py->dims[0].value != v->dims[0].value || py->dims[1].value != v->dims[1].value ||
            py->dims[2].value != v->dims[2].value / 2 ||
            py->dims[3].value != v->dims[3].value / 2) {
            cg_error(c, "a fused convolution's pooling is a 2 x 2 / stride 2 MaxPool of its value");
            return DL_ERR_UNSUPPORTED;
        }
    }
    if (n_epi > CONV_MAX_EPI || y->dtype != DL_DT_FLOAT || !dl_ir_type_same_dims(y, v)) {
        cg_error(c,
                 "a fused convolution epilogue has at most %d float32 nodes of the "
                 "convolution's dims",
                 CONV_MAX_EPI - 1);
        return DL_ERR_UNSUPPORTED;
    }
    // Other values the members read: float32 of the convolution's dims (a residual), loaded at
    // the stored element's index, or per channel (a scale), loaded at its channel; none when the
    // group pools (its kernels store pooled values).
    dl_ir_value *ext[CONV_MAX_EXT];
    size_t n_ext = 0;
    DL_TRY(dl_cg__fused_inputs(c, g, n_epi, 1, ext, CONV_MAX_EXT, &n_ext));
    for (size_t e = 0; e < n_ext; e++) {
        if (pool || dl_cg__conv_ext_kind(ext[e], g[0]->outputs[0]) == DL_CG__CONV_EXT_NONE) {
            cg_error(c,
                     "a fused convolution epilogue reads besides the group's values only float32 "
                     "values of the convolution's dims or per channel, and none when it pools "
                     "('%s')",
                     ext[e]->name);
            return DL_ERR_UNSUPPORTED;
        }
    }
    return lower_conv(c, g[0], n_epi > 1 ? g : NULL, n_epi, ext, n_ext, pool);
}

dl_status dl_cg__lower_conv_transpose(cg *c, const dl_ir_node *n) {
    return lower_conv_transpose(c, n);
}

dl_status dl_cg__lower_pool(cg *c, const dl_ir_node *n) {
    return lower_pool(c, n);
}

dl_status dl_cg__lower_global_pool(cg *c, const dl_ir_node *n) {
    return lower_global_avg_pool(c, n);
}

dl_status dl_cg__lower_batch_norm(cg *c, const dl_ir_node *n) {
    return lower_batch_norm(c, n);
}

dl_status dl_cg__lower_layer_norm(cg *c, const dl_ir_node *n) {
    return lower_layer_norm(c, n);
}
