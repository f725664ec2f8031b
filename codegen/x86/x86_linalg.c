// codegen/x86/x86_linalg.c — lowering of: MatMul Gemm.
//
// Both ops become one strided problem: y[b, i, j] = alpha * sum_k A[b, i, k] B[b, k, j]
// (+ beta * C[i, j]), where A and B are read through static element strides (sa_m, sa_k),
// (sb_k, sb_n) plus a per-batch offset. That covers MatMul's 1-D promotion (a 1-D a is
// [1, K], a 1-D b is [K, 1]), its broadcast batch dims (stride 0 on a broadcast dim) and
// Gemm's transA / transB (swapped strides). y is always contiguous [batch, M, N].
//
// Float dtypes (float, float16, bfloat16) use a blocked, vectorised loop nest (GotoBLAS-like,
// sized for one core):
//
//   outer parallel range: batch * ceil(N / NC) * ceil(M / MB); one iteration = the MB rows x
//   NC columns of row block ib in column group jc of one batch's y (the row blocks of a group
//   are consecutive iterations, so a thread running a range of them reuses one packed B):
//     scratch[MB][NC]                           (f32 accumulators of the block)
//     for pc in K blocks of KC:                 (the last block may be shorter)
//       ap[MB / MR][KC][MR] = A[rows, pc..]     (packed per MR-row tile, f32; float32 A by
//                                               register transposes, emit_pack_a)
//       bp[NC / NR][KC][NR] = B[pc.., jc..]     (packed per NR-column panel, f32, zero past N;
//                                               when all of K fits SHARE_B_BYTES, packed for
//                                               every K block by the first row block a thread
//                                               runs in the group, and reused by the others;
//                                               past it, with several row blocks, packed once
//                                               per call by a kernel of its own into a TEMP
//                                               buffer read like prepacked weights:
//                                               pack_per_call)
//       for each NR panel, for each MR-row tile (the last block may end with mr_e rows):
//         microkernel: MR accumulators of <NR x float> in registers; per k one B vector from
//         bp and, per row, fmuladd(broadcast(ap[tile][k][r]), B, acc[r]); the accumulators
//         start from zero in the first K block and from scratch in the others, and are stored
//         to scratch after the k loop (unrolled by 4); in the last K block, where the
//         epilogue goes a row at a time as one vector (epi_is_vec: x86, no pooling, no bf16
//         dot or AMX tiles), the microkernel applies it to its accumulators and stores them
//         to y itself (y's last panel through a constant lane mask)
//     epilogue: y = alpha * scratch (+ beta * C), converted to y's dtype (the last panel of y
//     may be narrower than NR: static width nr_e), for the products that do not store from
//     the microkernel (a separate pass over the scratch: with K = 64 (attention's scores) it
//     was 14 % of the kernel's time, the scratch of 96 KiB read back from L2)
//
// MR x NR follows the target's f32 vector width (c->target->vector_width, cg_target.h):
// 6 x 16 with AVX2+FMA (12 ymm accumulators, two for B, one broadcast), 12 x 32 with AVX-512F,
// 4 x 8 otherwise. KC keeps one B panel at 16 KiB (L1); MB = 8 MR (up to 16 MR in one block when
// B cannot be shared across blocks), NC = 256 columns with AVX-512 (8 NR), 512 with AVX2 (32 NR),
// 8 NR otherwise. Packing A makes
// the microkernel's reads contiguous whatever A's strides (transA, power-of-two leading dims
// that would alias in L1). The allocas are the kernel's whole state (AVX-512: ap 48 KiB,
// scratch 96 KiB, bp 128 KiB per K block, at most 1 MiB when shared), private to one call, and
// every outer iteration writes only its own block of y, so any split of the range gives the
// same bytes. Splitting the columns as well as the rows gives the threaded executor iterations
// to balance; a product that would have fewer than MIN_UNITS of them uses groups half as wide
// (AVX-512: a 256 x 256 x 784 product has 6, not 3), and one of a single row block whose
// columns fit one group gets two (64 x 128 x 3136: each thread packs A once). Accumulation
// is in f32 for every float dtype (float16 and bfloat16 are converted when packed and rounded
// once when y is stored); the order of the sum over k is fixed (k ascending, in KC blocks),
// independent of the split.
//
// bfloat16 A and B take one of two other microkernels where the target has them: AMX tiles
// (tdpbf16ps; 32 x 32 blocks in four tiles over all of K up to 1024, packs in tile order) or
// AVX512-BF16's vdpbf16ps (k pairs); see their sections below.
//
// Convolutions reuse the blocked kernel as implicit GEMMs (dl_cg__emit_conv_gemm, cg_geometry.h):
// per image and group, y = A x im2col(x) where the B panel is packed straight from the image
// (one masked gather per k row, or one masked load when a stride-1 "same" row is contiguous;
// zero outside the image), A may be read with a split k stride (ConvTranspose's weights, the
// weight gradient's dy) and a per-row bias is added in the epilogue. The packing buffers are the
// same allocas: no im2col buffer exists. Same ownership of y blocks, same fixed k order.
//
// Integer MatMul / Gemm (int32, int64) use a simple loop per output element, accumulating in
// i64; MatMul wraps to int32 as int32 arithmetic would. Integer Gemm computes
// alpha * s + beta * c in double and converts as the reference evaluator does (truncate,
// saturate to int64, wrap to int32).
#include "cg_geometry.h"
#include "cg_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_MR       16 // accumulator rows of the widest microkernel
#define MAX_NR       32 // lanes of the widest microkernel vector
#define PLOOP_MAX    32 // values a ploop carries
#define GEMM_MAX_EXT 12 // values a fused epilogue reads (passes/fusion.c allows 11)
#define GEMM_MAX_EPI 64 // nodes of a fused epilogue group (with the product)

// The static description of one (batched) product.
typedef struct gemm_prob {
    int64_t M, N, K;
    int64_t sa_m, sa_k, sb_k, sb_n; // element strides of A and B inside one batch
    int32_t br;                     // batch rank
    int64_t bd[DL_MAX_RANK];        // batch dims of y
    int64_t abs_[DL_MAX_RANK];      // per batch dim: element stride of A (0: broadcast)
    int64_t bbs[DL_MAX_RANK];       // same for B
    int64_t nb;                     // number of batches (product of bd)
    double alpha, beta;
    dl_ir_value *y, *a, *b, *cv; // cv: Gemm's C or NULL
    int64_t cs_m, cs_n;          // C's strides broadcast to [M, N]
    // Convolutions (dl_cg__emit_conv_gemm): A[i, k] at i*sa_m + (k / ka_in)*sa_k +
    // (k % ka_in)*sa_k2 when ka_in > 0; B gathered from an image by `im` (b is the image);
    // bias[bias_off + i] added in the epilogue (cv is then NULL and alpha 1).
    int64_t ka_in, sa_k2;
    const dl_cg__im2col *im;
    dl_ir_value *bias;
    int64_t bis[DL_MAX_RANK]; // per batch dim: element stride of the bias
    int64_t nc_panels;        // > 0: NR panels per column group (instead of the blocking's)
    // A convolution whose group ends with a 2 x 2 / stride 2 MaxPool (im->OW <= 128: fusion.c):
    // column groups of whole row pairs, the epilogue's values stay in the scratch and y is their
    // pooling, [batch, M, OH / 2, OW / 2].
    bool pool;
    // A fusion group whose head this product is (passes/fusion.c), NULL otherwise: y is the
    // group root's output and every element goes through the members epi[1 .. n_epi) before it
    // is stored; they read ext[] (kernel arguments after A, B and C) at (i, j) with strides
    // ext_sm, ext_sn over [M, N] (the same offsets in every batch: a batched product's ext are
    // single elements).
    const dl_ir_node *const *epi;
    size_t n_epi;
    dl_ir_value *ext[GEMM_MAX_EXT];
    int64_t ext_sm[GEMM_MAX_EXT], ext_sn[GEMM_MAX_EXT];
    size_t n_ext;
    // ext_y (a convolution's epilogue values): every ext is a float32 value of y's dims read at
    // y's own element, batch included (never pooled), as rows of the vector epilogue (epi_vec),
    // or a value per output channel (read at bias_off + i) or a single element (ext_kind).
    bool ext_y;
    dl_cg__conv_ext ext_kind[GEMM_MAX_EXT];
} gemm_prob;

// Whether the epilogue reads ext e as rows of y's own elements (a convolution's residual), or,
// for a product, as float32 rows along j (a residual Add's input, an activation for its
// gradient: ext_sn == 1; one batch, see fused_prob).
static bool ext_row(const gemm_prob *p, size_t e) {
    if (p->ext_y) {
        return p->ext_kind[e] == DL_CG__CONV_EXT_ELEM;
    }
    return p->ext_sn[e] == 1 && p->ext[e]->type.dtype == DL_DT_FLOAT;
}

// The kernel's arguments: y, A, B, then C or a convolution's bias when present, then the
// epilogue's inputs.
static size_t prob_vals(const gemm_prob *p, dl_ir_value **vals) {
    size_t n = 0;
    vals[n++] = p->y;
    vals[n++] = p->a;
    vals[n++] = p->b;
    if (p->cv || p->bias) {
        vals[n++] = p->cv ? p->cv : p->bias;
    }
    for (size_t e = 0; e < p->n_ext; e++) {
        vals[n++] = p->ext[e];
    }
    return n;
}

// The kernel argument of the epilogue's first input (prob_vals' order).
static size_t ext_arg0(const gemm_prob *p) {
    return p->cv || p->bias ? 4 : 3;
}

// The value stored at y[i, j] (i, j: i64) for the product's value v there (f32): v itself, or
// v through the fused epilogue.
static LLVMValueRef epilogue_apply(cg *c, const gemm_prob *p, const cg_kernel *k, LLVMValueRef v,
                                   LLVMValueRef i, LLVMValueRef j) {
    if (!p->epi) {
        return v;
    }
    DL_ASSERT(!p->ext_y); // epi_is_vec holds for every such product: epi_vec loads them
    size_t base = ext_arg0(p);
    LLVMValueRef xin[GEMM_MAX_EXT], val[GEMM_MAX_EPI];
    for (size_t e = 0; e < p->n_ext; e++) {
        LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, i, cg_i64(c, p->ext_sm[e]), ""),
                                        LLVMBuildMul(c->b, j, cg_i64(c, p->ext_sn[e]), ""), "");
        xin[e] = cg_load(c, k->ptr[base + e], p->ext[e]->type.dtype, off);
    }
    val[0] = v;
    return dl_cg__fused_values(c, p->epi, p->n_epi, 1, val, p->ext, xin, p->n_ext);
}

// The value stored at y[i, j] for the product's sum v there (f32): alpha * v (+ bias, a
// convolution's, may be NULL) (+ beta * C at element offset c_off, Gemm's C), through the fused
// epilogue. One place for every kernel's scalar store, so that they all round alike.
static LLVMValueRef finish_elem(cg *c, const gemm_prob *p, const cg_kernel *k, LLVMValueRef v,
                                LLVMValueRef bias, LLVMValueRef c_off, LLVMValueRef i,
                                LLVMValueRef j) {
    if (p->alpha != 1.0) {
        v = LLVMBuildFMul(c->b, v, cg_f32(c, p->alpha), "");
    }
    if (bias) {
        v = LLVMBuildFAdd(c->b, v, bias, "");
    }
    if (p->cv) {
        LLVMValueRef cvv = cg_load(c, k->ptr[3], p->cv->type.dtype, c_off);
        if (p->beta != 1.0) {
            cvv = LLVMBuildFMul(c->b, cvv, cg_f32(c, p->beta), "");
        }
        v = LLVMBuildFAdd(c->b, v, cvv, "");
    }
    return epilogue_apply(c, p, k, v, i, j);
}

// Register blocking for the target.
typedef struct gemm_blk {
    int64_t MR, NR; // microkernel tile: MR rows x NR columns (NR = one LLVM vector)
    int64_t KC;     // K block
    int64_t MB;     // rows per outer iteration (a multiple of MR)
    int64_t NC;     // columns per packed B group (a multiple of NR)
} gemm_blk;

// The tile follows the target's f32 vector width (x86-64: 16 lanes with AVX-512F, 8 with AVX2
// and FMA, else 4).
static gemm_blk choose_blocking(cg *c) {
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    gemm_blk g;
    if (vw >= 16) {
        g = (gemm_blk){12, 32, 0, 0, 0};
    } else if (vw >= 8) {
        g = (gemm_blk){6, 16, 0, 0, 0};
    } else {
        g = (gemm_blk){4, 8, 0, 0, 0};
    }
    g.KC = 4096 / g.NR; // one packed B panel = KC * NR floats = 16 KiB (L1)
    g.MB = 8 * g.MR;
    // A block is packed once per column group: NC / NR panels share it. The AVX2 tiles are
    // half as wide, so their groups take more panels to pack A as rarely per flop: 16 (256
    // columns, as AVX-512's) took Zen 3's 1024^3 from 77 to 85 GFLOP/s; 32 (512 columns) took
    // the 784-1024x3-10 MLP's 1-thread train step from 55.8 to 50.0 ms (its 256-row products
    // packed A four times per call; K = 1024 now packs B per call, pack_per_call, and A once).
    g.NC = (vw == 8 ? 32 : 8) * g.NR;
    return g;
}

// ---------------------------------------------------------------------------------------------
// IR helpers

// A counted loop whose body carries `n` values (phis) from one iteration to the next.
typedef struct ploop {
    LLVMBasicBlockRef header, body, exit;
    LLVMValueRef iv;
    LLVMValueRef v[PLOOP_MAX];
    size_t n;
} ploop;

static void ploop_begin(cg *c, ploop *l, LLVMValueRef lo, LLVMValueRef hi, const LLVMValueRef *init,
                        size_t n) {
    DL_ASSERT(n <= PLOOP_MAX);
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    l->header = LLVMAppendBasicBlockInContext(c->ctx, fn, "kloop");
    l->body = LLVMAppendBasicBlockInContext(c->ctx, fn, "kbody");
    l->exit = LLVMAppendBasicBlockInContext(c->ctx, fn, "kdone");
    l->n = n;
    LLVMBuildBr(c->b, l->header);
    LLVMPositionBuilderAtEnd(c->b, l->header);
    l->iv = LLVMBuildPhi(c->b, c->t_i64, "k");
    LLVMAddIncoming(l->iv, &lo, &pre, 1);
    for (size_t i = 0; i < n; i++) {
        l->v[i] = LLVMBuildPhi(c->b, LLVMTypeOf(init[i]), "acc");
        LLVMValueRef v0 = init[i];
        LLVMAddIncoming(l->v[i], &v0, &pre, 1);
    }
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, l->iv, hi, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(c->b, l->body);
}

// Closes the loop; after it, l->v[] hold the final values.
static void ploop_end(cg *c, ploop *l, const LLVMValueRef *next) {
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMValueRef inc = LLVMBuildAdd(c->b, l->iv, cg_i64(c, 1), "");
    LLVMBuildBr(c->b, l->header);
    LLVMAddIncoming(l->iv, &inc, &latch, 1);
    for (size_t i = 0; i < l->n; i++) {
        LLVMValueRef v = next[i];
        LLVMAddIncoming(l->v[i], &v, &latch, 1);
    }
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

// if (cond) { ... }: returns the join block; the builder is positioned in the then-block.
static LLVMBasicBlockRef if_begin(cg *c, LLVMValueRef cond) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, fn, "then");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c->ctx, fn, "join");
    LLVMBuildCondBr(c->b, cond, then, join);
    LLVMPositionBuilderAtEnd(c->b, then);
    return join;
}

static void if_end(cg *c, LLVMBasicBlockRef join) {
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
}

// if (cond) { then } else { else }: if_else_begin positions in `then`, if_else_mid in `else`.
typedef struct if_else {
    LLVMBasicBlockRef els, join;
} if_else;

static void if_else_begin(cg *c, if_else *ie, LLVMValueRef cond) {
    LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, fn, "then");
    ie->els = LLVMAppendBasicBlockInContext(c->ctx, fn, "else");
    ie->join = LLVMAppendBasicBlockInContext(c->ctx, fn, "join");
    LLVMBuildCondBr(c->b, cond, then, ie->els);
    LLVMPositionBuilderAtEnd(c->b, then);
}

static void if_else_mid(cg *c, if_else *ie) {
    LLVMBuildBr(c->b, ie->join);
    LLVMPositionBuilderAtEnd(c->b, ie->els);
}

static void if_else_end(cg *c, if_else *ie) {
    LLVMBuildBr(c->b, ie->join);
    LLVMPositionBuilderAtEnd(c->b, ie->join);
}

static LLVMValueRef add(cg *c, LLVMValueRef x, LLVMValueRef y) {
    return LLVMBuildAdd(c->b, x, y, "");
}

static LLVMValueRef mul_c(cg *c, LLVMValueRef x, int64_t s) {
    return s == 1 ? x : LLVMBuildMul(c->b, x, cg_i64(c, s), "");
}

static LLVMValueRef min_c(cg *c, LLVMValueRef x, LLVMValueRef y) {
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, x, y, ""), x, y, "");
}

// A float pointer + element offset.
static LLVMValueRef fptr(cg *c, LLVMValueRef base, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(c->b, c->t_f32, base, &idx, 1, "");
}

static LLVMValueRef load_vec(cg *c, LLVMTypeRef vt, LLVMValueRef p, unsigned align) {
    LLVMValueRef v = LLVMBuildLoad2(c->b, vt, p, "");
    LLVMSetAlignment(v, align);
    return v;
}

static void store_vec(cg *c, LLVMValueRef v, LLVMValueRef p, unsigned align) {
    LLVMSetAlignment(LLVMBuildStore(c->b, v, p), align);
}

static LLVMValueRef splat(cg *c, LLVMTypeRef vt, LLVMValueRef s) {
    LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), s, cg_i32(c, 0), "");
    LLVMTypeRef mt = LLVMVectorType(c->t_i32, LLVMGetVectorSize(vt));
    return LLVMBuildShuffleVector(c->b, v, LLVMGetPoison(vt), LLVMConstNull(mt), "");
}

static LLVMValueRef fmuladd(cg *c, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
    static const char name[] = "llvm.fmuladd";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, &t, 1);
    LLVMValueRef args[3] = {x, y, z};
    return LLVMBuildCall2(c->b, fty, fn, args, 3, "");
}

// An alloca of `n` floats in the kernel's entry block (the builder is still there).
static LLVMValueRef entry_alloca(cg *c, int64_t n) {
    LLVMValueRef p = LLVMBuildAlloca(c->b, LLVMArrayType2(c->t_f32, (uint64_t)n), "scratch");
    LLVMSetAlignment(p, 64);
    return p;
}

// Element offsets of batch `bi` (i64) in A, B and the bias (bias_off may be NULL): unravel over
// the static batch dims.
static void batch_offsets(cg *c, const gemm_prob *p, LLVMValueRef bi, LLVMValueRef *a_off,
                          LLVMValueRef *b_off, LLVMValueRef *bias_off) {
    *a_off = cg_i64(c, 0);
    *b_off = cg_i64(c, 0);
    LLVMValueRef zoff = cg_i64(c, 0);
    bias_off = bias_off ? bias_off : &zoff;
    *bias_off = cg_i64(c, 0);
    LLVMValueRef rem = bi;
    for (int32_t d = p->br - 1; d >= 0; d--) {
        if (p->bd[d] == 1) {
            continue;
        }
        LLVMValueRef idx = LLVMBuildURem(c->b, rem, cg_i64(c, p->bd[d]), "");
        rem = LLVMBuildUDiv(c->b, rem, cg_i64(c, p->bd[d]), "");
        if (p->abs_[d]) {
            *a_off = add(c, *a_off, mul_c(c, idx, p->abs_[d]));
        }
        if (p->bbs[d]) {
            *b_off = add(c, *b_off, mul_c(c, idx, p->bbs[d]));
        }
        if (p->bis[d]) {
            *bias_off = add(c, *bias_off, mul_c(c, idx, p->bis[d]));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The blocked float kernel

// Values live inside one outer iteration.
typedef struct fctx {
    const gemm_prob *p;
    gemm_blk g;
    cg_kernel *k;
    LLVMTypeRef vt; // <NR x float>
    unsigned valign;
    LLVMValueRef ap, bp, scr;  // allocas: [MB / MR][KC][MR], [NC / NR][KC][NR], [MB][NC]
    LLVMValueRef a_off, b_off; // batch offsets (elements)
    LLVMValueRef bias_off;     // the bias's batch offset
    LLVMValueRef y_off;        // element offset of y[b, 0, 0]
    LLVMValueRef i0;           // first row of the block
    LLVMValueRef rows;         // rows in the block (runtime, <= MB)
    LLVMValueRef c0;           // first column of the NC group
    LLVMValueRef j0;           // first column of the NR panel
    LLVMValueRef sub;          // panel index inside the group
    // Pooled (p->pool): the group's columns (runtime) and whether it is the last group; the
    // partial panel's width in the other groups and in the last (0: none).
    LLVMValueRef ncols, last_group;
    int64_t nr_mid, nr_last;
    LLVMValueRef pc, kc; // K block start and length
    // Gathered B (p->im): per k row of the K block, its scalar parts (tap row / column offsets
    // and the channel or image offset), computed once per K block for all panels.
    LLVMValueRef tab_h, tab_w, tab_b; // [KC] i32, [KC] i32, [KC] i64
    LLVMValueRef tab_a;               // split k (p->ka_in > 0): [KC] i64 offsets in A
    // bfloat16 A and B on a target with AVX512-BF16 (use_bf16_dot): ap and bp hold k pairs,
    // ap: [MB / MR][KC / 2][MR] and bp: [NC / NR][KC / 2][NR] of i32 (bf16 of k even | bf16 of
    // k odd << 16, zero past K), and the microkernel is vdpbf16ps.
    bool bf;
    // bfloat16 on AMX tiles (use_amx): ap and bp hold i32 pairs in tile order (emit_pack_a_amx,
    // amx_store_b_row), zero past kc to the next multiple of 32; the microkernel is tdpbf16ps.
    bool amx;
    // The microkernel of the last K block applies the epilogue to its accumulators and stores
    // them to y itself (epi_vec), instead of the scratch and emit_epilogue's pass over it.
    bool direct;
    // Prepacked B (emit_prepack; a PACKED buffer, or a TEMP one packed per call): the kernel's
    // last argument holds every panel of B, [n_kblk][ceil(N / NR)][KC][NR], and bp points into it
    // instead of being packed; NULL: none.
    LLVMValueRef pb;
    // The prepack kernel of a bfloat16 B made by a Cast of a float32 weight (c->cast_pp): B's
    // argument is the weight, and the bf16 packs round each element as the Cast would.
    bool b_cvt;
} fctx;

// Split k (p->ka_in > 0): tab_a[k] = ((pc + k) / ka_in) * sa_k + ((pc + k) % ka_in) * sa_k2 for
// k < kc, once per K block for all the A tiles.
static void emit_ka_rows(cg *c, const fctx *f) {
    const gemm_prob *p = f->p;
    cg_loop lk;
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "ka");
    LLVMValueRef k = add(c, f->pc, kk);
    LLVMValueRef hi = LLVMBuildUDiv(c->b, k, cg_i64(c, p->ka_in), "");
    LLVMValueRef lo = LLVMBuildURem(c->b, k, cg_i64(c, p->ka_in), "");
    LLVMBuildStore(c->b, add(c, mul_c(c, hi, p->sa_k), mul_c(c, lo, p->sa_k2)),
                   LLVMBuildInBoundsGEP2(c->b, c->t_i64, f->tab_a, &kk, 1, ""));
    cg_for_end(c, &lk);
}

// <n x i1> with the first `m` lanes set, or NULL when m == n (no mask needed).
static LLVMValueRef lane_mask(cg *c, int64_t m, int64_t n) {
    if (m >= n) {
        return NULL;
    }
    LLVMValueRef e[MAX_NR];
    for (int64_t l = 0; l < n; l++) {
        e[l] = LLVMConstInt(c->t_i1, l < m, 0);
    }
    return LLVMConstVector(e, (unsigned)n);
}

// Transposes n vectors of n floats (n a power of two, <= MAX_NR): afterwards x[k] lane r holds
// what x[r] lane k held. log2(n) perfect shuffles: each pairs x[i] with x[i + n/2] and
// interleaves them (low halves into y[2i], high halves into y[2i + 1]), which rotates the bits of
// the element index (row bits, then lane bits) left by one; after log2(n) rotations rows and
// lanes have traded places. Each step is a two-source shuffle of one register width (one
// vpermt2ps with AVX-512). Undefined rows give undefined lanes, nothing else.
void dl_cg__transpose_sq(cg *c, LLVMValueRef *x, unsigned n) {
    LLVMValueRef lo[MAX_NR], hi[MAX_NR], y[MAX_NR];
    DL_ASSERT(n <= MAX_NR);
    for (unsigned j = 0; j < n / 2; j++) {
        for (unsigned s = 0; s < 2; s++) {
            lo[2 * j + s] = cg_i32(c, (int32_t)(j + s * n));
            hi[2 * j + s] = cg_i32(c, (int32_t)(n / 2 + j + s * n));
        }
    }
    LLVMValueRef mlo = LLVMConstVector(lo, n), mhi = LLVMConstVector(hi, n);
    for (unsigned step = 1; step < n; step *= 2) {
        for (unsigned i = 0; i < n / 2; i++) {
            y[2 * i] = LLVMBuildShuffleVector(c->b, x[i], x[i + n / 2], mlo, "");
            y[2 * i + 1] = LLVMBuildShuffleVector(c->b, x[i], x[i + n / 2], mhi, "");
        }
        memcpy(x, y, sizeof(LLVMValueRef) * n);
    }
}

// ap[tile][k][r] = A[i0 + tile * MR + r, pc + k] for r < mr, k < kc.
//
// float32 A read along k (sa_k == 1: A not transposed) is packed vw k at a time: one vector
// load per row (masked to the k left in the block: the last group of a block may be short), a
// vw x vw transpose in registers (dl_cg__transpose_sq), one store of mr lanes per k. A short last
// group also writes rows kc .. up to the next multiple of vw of the tile (zeros; never read: KC is
// a multiple of vw, so they stay inside the tile). Every other dtype or stride goes element by
// element. Every path moves the same values: the packed bytes do not depend on which one ran.
// (transA: emit_pack_a_block.)
static void emit_pack_a_bf(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr);

static void emit_pack_a_amx(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr);

// One group of vw k of emit_pack_a's transposing path: rows src0 + r * sa_m (r < mr) at k = kk,
// loaded through kmask (NULL: all vw k), transposed, stored to ap at dst0; with `pf`, each row's
// line PACK_AHEAD floats further along k is prefetched.
#define PACK_AHEAD 64
static void pack_a_group(cg *c, const fctx *f, LLVMValueRef src0, LLVMValueRef dst0,
                         LLVMValueRef kk, LLVMValueRef kmask, int64_t mr, bool pf) {
    const gemm_prob *p = f->p;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    LLVMTypeRef wt = LLVMVectorType(c->t_f32, (unsigned)vw);
    LLVMValueRef x[MAX_NR];
    for (int64_t r = 0; r < vw; r++) {
        LLVMValueRef at = add(c, add(c, src0, kk), cg_i64(c, r * p->sa_m));
        x[r] = r < mr ? cg_masked_load(c, wt, fptr(c, f->k->ptr[1], at), kmask) : LLVMGetUndef(wt);
        if (pf && r < mr) {
            cg_prefetch(c, fptr(c, f->k->ptr[1], add(c, at, cg_i64(c, PACK_AHEAD))));
        }
    }
    dl_cg__transpose_sq(c, x, (unsigned)vw);
    LLVMValueRef mask = lane_mask(c, mr, vw);
    for (int64_t k = 0; k < vw; k++) {
        LLVMValueRef d = add(c, dst0, mul_c(c, add(c, kk, cg_i64(c, k)), f->g.MR));
        cg_masked_store(c, x[k], fptr(c, f->ap, d), mask);
    }
}

static void emit_pack_a(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr) {
    const gemm_prob *p = f->p;
    if (f->amx) {
        emit_pack_a_amx(c, f, tile, mr);
        return;
    }
    if (f->bf) {
        emit_pack_a_bf(c, f, tile, mr);
        return;
    }
    dl_dtype at = p->a->type.dtype;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    LLVMValueRef row = add(c, f->i0, mul_c(c, tile, f->g.MR));
    LLVMValueRef src0 = add(c, f->a_off, add(c, mul_c(c, row, p->sa_m), mul_c(c, f->pc, p->sa_k)));
    LLVMValueRef dst0 = mul_c(c, tile, f->g.KC * f->g.MR);
    if (at == DL_DT_FLOAT && p->ka_in == 0 && p->sa_k == 1 && vw >= 4 && mr <= vw &&
        f->g.KC % vw == 0) {
        // Whole groups with plain loads, each row's line PACK_AHEAD floats on prefetched (rows
        // far apart are short streams: a 1024-wide A's rows give 1 KiB each per K block, which
        // the hardware prefetchers barely start on); then a last, short group through a mask.
        LLVMValueRef nq = LLVMBuildUDiv(c->b, f->kc, cg_i64(c, vw), "");
        bool pf = p->sa_m >= 2 * PACK_AHEAD;
        cg_loop lq;
        LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "pav");
        pack_a_group(c, f, src0, dst0, mul_c(c, q, vw), NULL, mr, pf);
        cg_for_end(c, &lq);
        LLVMValueRef kk = mul_c(c, nq, vw);
        LLVMBasicBlockRef join = if_begin(c, LLVMBuildICmp(c->b, LLVMIntSLT, kk, f->kc, ""));
        pack_a_group(c, f, src0, dst0, kk,
                     cg_lane_mask_rt(c, LLVMBuildSub(c->b, f->kc, kk, ""), vw), mr, false);
        if_end(c, join);
        return;
    }
    cg_loop lk;
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "pa");
    LLVMValueRef src;
    if (p->ka_in > 0) { // split k: the K block's offsets from emit_ka_rows
        LLVMValueRef ko = LLVMBuildLoad2(
            c->b, c->t_i64, LLVMBuildInBoundsGEP2(c->b, c->t_i64, f->tab_a, &kk, 1, ""), "");
        src = add(c, add(c, f->a_off, mul_c(c, row, p->sa_m)), ko);
    } else {
        src = add(c, src0, mul_c(c, kk, p->sa_k));
    }
    LLVMValueRef dst = add(c, dst0, mul_c(c, kk, f->g.MR));
    for (int64_t r = 0; r < mr; r++) {
        LLVMValueRef v = cg_load(c, f->k->ptr[1], at, add(c, src, cg_i64(c, r * p->sa_m)));
        LLVMBuildStore(c->b, v, fptr(c, f->ap, add(c, dst, cg_i64(c, r))));
    }
    cg_for_end(c, &lk);
}

// Packs the block's A tiles: n_tiles full ones, then, in the last block (is_last), tile tile_e of
// mr_e rows. float32 A read along the rows (sa_m == 1: transA, the weight gradient's X^T) goes
// k by k over all the tiles, one vector of MR lanes per tile: each k row of the block is read
// once, in order (tile by tile, its lines would be fetched again for every tile, rows K apart).
// Its lines PACK_AT_AHEAD rows on are prefetched: each row is a few lines of another page, which
// the hardware prefetchers do not follow, so every load waited on memory (the transformer's
// weight gradient ge^T dy, 1024 x 256 x 1024, AVX2, Zen 3, 9 alternating rounds: 7.61-7.67 ->
// 6.34-7.12 ms median on 1 thread, 4.43 -> 3.53 on 2; as fast as the same product with A not
// transposed; 8 to 32 rows ahead all gained, 16 the most steadily).
#define PACK_AT_AHEAD 16
static void emit_pack_a_block(cg *c, const fctx *f, LLVMValueRef n_tiles, LLVMValueRef is_last,
                              int64_t tile_e, int64_t mr_e) {
    const gemm_prob *p = f->p;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    if (!f->bf && p->a->type.dtype == DL_DT_FLOAT && p->ka_in == 0 && p->sa_m == 1 && vw >= 4 &&
        f->g.MR <= vw) {
        LLVMTypeRef wt = LLVMVectorType(c->t_f32, (unsigned)vw);
        LLVMValueRef mask = lane_mask(c, f->g.MR, vw), mask_e = lane_mask(c, mr_e, vw);
        cg_loop lk, lt;
        LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "pat");
        LLVMValueRef src0 = add(c, f->a_off, add(c, f->i0, mul_c(c, add(c, f->pc, kk), p->sa_k)));
        LLVMValueRef dst0 = mul_c(c, kk, f->g.MR);
        // The block's lines of row k + PACK_AT_AHEAD (MB floats: a few lines, a new 4 KiB page
        // per row when rows are 1024 floats, where the hardware prefetchers do not follow). Past
        // the end of K the address lies past A: a plain GEP, and a prefetch never faults.
        LLVMValueRef pf0 = add(c, src0, cg_i64(c, PACK_AT_AHEAD * p->sa_k));
        for (int64_t l = 0; l < (f->g.MB + 15) / 16 + 1; l++) {
            LLVMValueRef at = add(c, pf0, cg_i64(c, l * 16));
            cg_prefetch(c, LLVMBuildGEP2(c->b, c->t_f32, f->k->ptr[1], &at, 1, ""));
        }
        LLVMValueRef tile = cg_for_begin(c, &lt, cg_i64(c, 0), n_tiles, "pat_t");
        LLVMValueRef src = fptr(c, f->k->ptr[1], add(c, src0, mul_c(c, tile, f->g.MR)));
        LLVMValueRef dst = fptr(c, f->ap, add(c, dst0, mul_c(c, tile, f->g.KC * f->g.MR)));
        cg_masked_store(c, cg_masked_load(c, wt, src, mask), dst, mask);
        cg_for_end(c, &lt);
        if (mr_e) {
            LLVMBasicBlockRef join = if_begin(c, is_last);
            src = fptr(c, f->k->ptr[1], add(c, src0, cg_i64(c, tile_e * f->g.MR)));
            dst = fptr(c, f->ap, add(c, dst0, cg_i64(c, tile_e * f->g.KC * f->g.MR)));
            cg_masked_store(c, cg_masked_load(c, wt, src, mask_e), dst, mask_e);
            if_end(c, join);
        }
        cg_for_end(c, &lk);
        return;
    }
    cg_loop lm;
    LLVMValueRef tile = cg_for_begin(c, &lm, cg_i64(c, 0), n_tiles, "ta");
    emit_pack_a(c, f, tile, f->g.MR);
    cg_for_end(c, &lm);
    if (mr_e) {
        LLVMBasicBlockRef join = if_begin(c, is_last);
        emit_pack_a(c, f, cg_i64(c, tile_e), mr_e);
        if_end(c, join);
    }
}

static void emit_pack_b_im2col(cg *c, const fctx *f, int64_t nr);
static bool im_taps_contiguous(const fctx *f);
static bool im_rows_contiguous(cg *c, const fctx *f);
static void emit_pack_b_im_rows(cg *c, const fctx *f, int64_t nr);
static void emit_im_rows(cg *c, const fctx *f);

// bp[sub][k][0..NR) = B[pc + k, j0 .. j0 + nr), zero past nr, for k in [0, kc).
//
// float32 B read along k (sb_k == 1: transB, the input gradient's W^T) is packed vw k at a time:
// per vw columns of the panel, one vector load per column (zeros past nr; masked to the k left
// in the block, the rows past kc written as zeros inside the panel as in emit_pack_a), a
// vw x vw transpose (dl_cg__transpose_sq) and one store per k. B read along its rows (sb_n == 1) is
// one vector load per k; every other layout or dtype goes element by element.
static void emit_pack_b_bf(cg *c, const fctx *f, int64_t nr);

static void emit_pack_b_amx(cg *c, const fctx *f, int64_t nr);

// One group of vw k of emit_pack_b's transposing path (B read along k): per vw columns of the
// panel one load per column at k = pc + kk (zeros past nr; through kmask, NULL: all vw k), the
// transpose, one store per k; with `pf`, each column's line PACK_AHEAD floats on prefetched.
static void pack_b_group(cg *c, const fctx *f, LLVMValueRef dst0, LLVMValueRef kk,
                         LLVMValueRef kmask, int64_t nr, bool pf) {
    const gemm_prob *p = f->p;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    LLVMTypeRef wt = LLVMVectorType(c->t_f32, (unsigned)vw);
    unsigned walign = (unsigned)(vw * 4 < 64 ? vw * 4 : 64);
    LLVMValueRef src0 = add(c, f->b_off, add(c, add(c, f->pc, kk), mul_c(c, f->j0, p->sb_n)));
    for (int64_t h = 0; h < f->g.NR / vw; h++) {
        LLVMValueRef x[MAX_NR];
        for (int64_t jj = 0; jj < vw; jj++) {
            int64_t col = h * vw + jj;
            if (col >= nr) {
                x[jj] = LLVMConstNull(wt);
                continue;
            }
            LLVMValueRef at = add(c, src0, cg_i64(c, col * p->sb_n));
            x[jj] = cg_masked_load(c, wt, fptr(c, f->k->ptr[2], at), kmask);
            if (pf) {
                cg_prefetch(c, fptr(c, f->k->ptr[2], add(c, at, cg_i64(c, PACK_AHEAD))));
            }
        }
        dl_cg__transpose_sq(c, x, (unsigned)vw);
        for (int64_t k = 0; k < vw; k++) {
            LLVMValueRef d = add(c, dst0, mul_c(c, add(c, kk, cg_i64(c, k)), f->g.NR));
            store_vec(c, x[k], fptr(c, f->bp, add(c, d, cg_i64(c, h * vw))), walign);
        }
    }
}

static void emit_pack_b(cg *c, const fctx *f, int64_t nr) {
    const gemm_prob *p = f->p;
    if (f->amx) {
        emit_pack_b_amx(c, f, nr);
        return;
    }
    if (f->bf) {
        emit_pack_b_bf(c, f, nr);
        return;
    }
    if (p->im) {
        if (im_rows_contiguous(c, f)) {
            emit_pack_b_im_rows(c, f, nr);
        } else {
            emit_pack_b_im2col(c, f, nr);
        }
        return;
    }
    dl_dtype bt = p->b->type.dtype;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    LLVMValueRef dst0 = mul_c(c, f->sub, f->g.KC * f->g.NR);
    if (bt == DL_DT_FLOAT && p->sb_k == 1 && p->sb_n != 1 && vw >= 4 && f->g.NR % vw == 0 &&
        f->g.KC % vw == 0) {
        // As emit_pack_a's: whole groups with plain loads (each column's line PACK_AHEAD
        // floats on prefetched when the columns are far apart), then a masked short group.
        LLVMValueRef nq = LLVMBuildUDiv(c->b, f->kc, cg_i64(c, vw), "");
        bool pf = p->sb_n >= 2 * PACK_AHEAD;
        cg_loop lq;
        LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "pbv");
        pack_b_group(c, f, dst0, mul_c(c, q, vw), NULL, nr, pf);
        cg_for_end(c, &lq);
        LLVMValueRef kk = mul_c(c, nq, vw);
        LLVMBasicBlockRef join = if_begin(c, LLVMBuildICmp(c->b, LLVMIntSLT, kk, f->kc, ""));
        pack_b_group(c, f, dst0, kk, cg_lane_mask_rt(c, LLVMBuildSub(c->b, f->kc, kk, ""), vw), nr,
                     false);
        if_end(c, join);
        return;
    }
    cg_loop lk;
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "pb");
    LLVMValueRef src =
        add(c, f->b_off, add(c, mul_c(c, add(c, f->pc, kk), p->sb_k), mul_c(c, f->j0, p->sb_n)));
    LLVMValueRef dst = fptr(c, f->bp, add(c, dst0, mul_c(c, kk, f->g.NR)));
    LLVMValueRef v;
    if (bt == DL_DT_FLOAT && p->sb_n == 1 && nr == f->g.NR) {
        v = load_vec(c, f->vt, fptr(c, f->k->ptr[2], src), 4);
    } else {
        v = LLVMConstNull(f->vt);
        for (int64_t j = 0; j < nr; j++) {
            LLVMValueRef e = cg_load(c, f->k->ptr[2], bt, add(c, src, cg_i64(c, j * p->sb_n)));
            v = LLVMBuildInsertElement(c->b, v, e, cg_i32(c, (int32_t)j), "");
        }
    }
    store_vec(c, v, dst, f->valign);
    cg_for_end(c, &lk);
}

// One k step of the microkernel: acc[r] += ap[tile][kk][r] * bp[sub][kk].
static void micro_step(cg *c, const fctx *f, LLVMValueRef abase, LLVMValueRef bbase,
                       LLVMValueRef kk, int64_t mr, LLVMValueRef *acc) {
    LLVMValueRef bv =
        load_vec(c, f->vt, fptr(c, f->bp, add(c, bbase, mul_c(c, kk, f->g.NR))), f->valign);
    LLVMValueRef ak = add(c, abase, mul_c(c, kk, f->g.MR));
    for (int64_t r = 0; r < mr; r++) {
        LLVMValueRef a =
            LLVMBuildLoad2(c->b, c->t_f32, fptr(c, f->ap, add(c, ak, cg_i64(c, r))), "");
        acc[r] = fmuladd(c, splat(c, f->vt, a), bv, acc[r]);
    }
}

// ---------------------------------------------------------------------------------------------
// bfloat16 products with AVX512-BF16: vdpbf16ps multiplies 32 bf16 pairs and adds each pair's
// two products to a float32 lane, so one instruction does the work of two float32 FMAs. Both
// operands are packed as k pairs (fctx.bf); a K block's odd last k pairs with zeros.

static bool use_bf16_dot(cg *c, const gemm_prob *p, const gemm_blk *g) {
    return (c->isa & DLRT_ISA_AVX512BF16) && g->NR == 32 && g->KC % 2 == 0 &&
           p->a->type.dtype == DL_DT_BFLOAT16 && p->b->type.dtype == DL_DT_BFLOAT16 && !p->im &&
           p->ka_in == 0;
}

// The raw 16 bits of bfloat16 element idx of base, zero-extended to i32.
static LLVMValueRef ld16(cg *c, LLVMValueRef base, LLVMValueRef idx) {
    LLVMValueRef v = LLVMBuildLoad2(c->b, c->t_i16,
                                    LLVMBuildInBoundsGEP2(c->b, c->t_i16, base, &idx, 1, ""), "");
    return LLVMBuildZExt(c->b, v, c->t_i32, "");
}

static LLVMValueRef pair32(cg *c, LLVMValueRef lo, LLVMValueRef hi) {
    return hi ? LLVMBuildOr(c->b, lo, LLVMBuildShl(c->b, hi, cg_i32(c, 16), ""), "") : lo;
}

// The pair of bfloat16 elements idx, idx + step of base as pair32 makes it: when they are
// adjacent (step 1), one i32 load (little-endian: idx in the low half).
static LLVMValueRef ld_pair(cg *c, LLVMValueRef base, LLVMValueRef idx, int64_t step) {
    if (step != 1) {
        return pair32(c, ld16(c, base, idx), ld16(c, base, add(c, idx, cg_i64(c, step))));
    }
    LLVMValueRef v = LLVMBuildLoad2(c->b, c->t_i32,
                                    LLVMBuildInBoundsGEP2(c->b, c->t_i16, base, &idx, 1, ""), "");
    LLVMSetAlignment(v, 2);
    return v;
}

// ap[tile][k2][r] = A[row r, pc + 2 k2] | A[row r, pc + 2 k2 + 1] << 16 for k2 < ceil(kc / 2).
static void emit_pack_a_bf(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr) {
    const gemm_prob *p = f->p;
    LLVMValueRef a = f->k->ptr[1];
    LLVMValueRef row = add(c, f->i0, mul_c(c, tile, f->g.MR));
    LLVMValueRef src0 = add(c, f->a_off, add(c, mul_c(c, row, p->sa_m), mul_c(c, f->pc, p->sa_k)));
    LLVMValueRef dst0 = mul_c(c, tile, f->g.KC / 2 * f->g.MR);
    LLVMValueRef np = LLVMBuildUDiv(c->b, f->kc, cg_i64(c, 2), ""); // whole pairs
    cg_loop lk;
    LLVMValueRef k2 = cg_for_begin(c, &lk, cg_i64(c, 0), np, "pa2");
    LLVMValueRef src = add(c, src0, mul_c(c, k2, 2 * p->sa_k));
    LLVMValueRef dst = add(c, dst0, mul_c(c, k2, f->g.MR));
    for (int64_t r = 0; r < mr; r++) {
        LLVMValueRef e = add(c, src, cg_i64(c, r * p->sa_m));
        LLVMValueRef v = ld_pair(c, a, e, p->sa_k);
        LLVMBuildStore(c->b, v, fptr(c, f->ap, add(c, dst, cg_i64(c, r))));
    }
    cg_for_end(c, &lk);
    // an odd kc: the last k with a zero
    LLVMBasicBlockRef join =
        if_begin(c, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildURem(c->b, f->kc, cg_i64(c, 2), ""),
                                  cg_i64(c, 0), ""));
    src = add(c, src0, mul_c(c, np, 2 * p->sa_k));
    dst = add(c, dst0, mul_c(c, np, f->g.MR));
    for (int64_t r = 0; r < mr; r++) {
        LLVMValueRef v = ld16(c, a, add(c, src, cg_i64(c, r * p->sa_m)));
        LLVMBuildStore(c->b, v, fptr(c, f->ap, add(c, dst, cg_i64(c, r))));
    }
    if_end(c, join);
}

// <n x i32> pairs lo[l] | hi[l] << 16 of two <n x i16> (n <= MAX_NR).
static LLVMValueRef interleave_pairs(cg *c, LLVMValueRef lo, LLVMValueRef hi, unsigned n) {
    LLVMValueRef m[2 * MAX_NR];
    for (unsigned j = 0; j < n; j++) {
        m[2 * j] = cg_i32(c, (int32_t)j);
        m[2 * j + 1] = cg_i32(c, (int32_t)(n + j));
    }
    LLVMValueRef v = LLVMBuildShuffleVector(c->b, lo, hi, LLVMConstVector(m, 2 * n), "");
    return LLVMBuildBitCast(c->b, v, LLVMVectorType(c->t_i32, n), "");
}

static LLVMValueRef load_h(cg *c, LLVMValueRef base, LLVMValueRef idx, unsigned n,
                           LLVMValueRef mask);

// n bfloat16 elements of B from element idx as <n x i16> (n = 1: an i16), masked (mask non-NULL,
// masked-off lanes 0): loaded, or with f->b_cvt the weight's float32 elements rounded as the
// Cast to bfloat16 rounds them (cg_f32_to_bf16).
static LLVMValueRef ld_b16(cg *c, const fctx *f, LLVMValueRef idx, unsigned n, LLVMValueRef mask) {
    LLVMValueRef b = f->k->ptr[2];
    if (!f->b_cvt) {
        if (n == 1) {
            return LLVMBuildLoad2(c->b, c->t_i16,
                                  LLVMBuildInBoundsGEP2(c->b, c->t_i16, b, &idx, 1, ""), "");
        }
        return load_h(c, b, idx, n, mask);
    }
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_f32, b, &idx, 1, "");
    LLVMValueRef v = n == 1 ? LLVMBuildLoad2(c->b, c->t_f32, p, "")
                            : cg_masked_load(c, LLVMVectorType(c->t_f32, n), p, mask);
    return cg_f32_to_bf16(c, v);
}

// One k pair of the panel: <NR x i32> of B[k, j0 + j] | B[k + 1, j0 + j] << 16 (hi_ok false:
// the k + 1 half is zero), zero past nr.
static LLVMValueRef pack_b_pair(cg *c, const fctx *f, LLVMValueRef k, bool hi_ok, int64_t nr) {
    const gemm_prob *p = f->p;
    LLVMValueRef src = add(c, f->b_off, add(c, mul_c(c, k, p->sb_k), mul_c(c, f->j0, p->sb_n)));
    unsigned n = (unsigned)f->g.NR;
    if (p->sb_n == 1 && nr == f->g.NR) {
        // two rows of NR bf16, interleaved
        LLVMValueRef r0 = ld_b16(c, f, src, n, NULL);
        LLVMValueRef r1 = LLVMConstNull(LLVMVectorType(c->t_i16, n));
        if (hi_ok) {
            r1 = ld_b16(c, f, add(c, src, cg_i64(c, p->sb_k)), n, NULL);
        }
        return interleave_pairs(c, r0, r1, n);
    }
    LLVMValueRef v = LLVMConstNull(LLVMVectorType(c->t_i32, n));
    for (int64_t j = 0; j < nr; j++) {
        LLVMValueRef e = add(c, src, cg_i64(c, j * p->sb_n));
        LLVMValueRef x;
        if (f->b_cvt) {
            x = LLVMBuildZExt(c->b, ld_b16(c, f, e, 1, NULL), c->t_i32, "");
            if (hi_ok) {
                LLVMValueRef h = ld_b16(c, f, add(c, e, cg_i64(c, p->sb_k)), 1, NULL);
                x = pair32(c, x, LLVMBuildZExt(c->b, h, c->t_i32, ""));
            }
        } else {
            x = hi_ok ? ld_pair(c, f->k->ptr[2], e, p->sb_k) : ld16(c, f->k->ptr[2], e);
        }
        v = LLVMBuildInsertElement(c->b, v, x, cg_i32(c, (int32_t)j), "");
    }
    return v;
}

// bp[sub][k2] = pack_b_pair(pc + 2 k2) for k2 < ceil(kc / 2).
static void emit_pack_b_bf(cg *c, const fctx *f, int64_t nr) {
    LLVMValueRef dst0 = mul_c(c, f->sub, f->g.KC / 2 * f->g.NR);
    LLVMValueRef np = LLVMBuildUDiv(c->b, f->kc, cg_i64(c, 2), "");
    cg_loop lk;
    LLVMValueRef k2 = cg_for_begin(c, &lk, cg_i64(c, 0), np, "pb2");
    LLVMValueRef v = pack_b_pair(c, f, add(c, f->pc, mul_c(c, k2, 2)), true, nr);
    store_vec(c, v, fptr(c, f->bp, add(c, dst0, mul_c(c, k2, f->g.NR))), f->valign);
    cg_for_end(c, &lk);
    LLVMBasicBlockRef join =
        if_begin(c, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildURem(c->b, f->kc, cg_i64(c, 2), ""),
                                  cg_i64(c, 0), ""));
    v = pack_b_pair(c, f, add(c, f->pc, mul_c(c, np, 2)), false, nr);
    store_vec(c, v, fptr(c, f->bp, add(c, dst0, mul_c(c, np, f->g.NR))), f->valign);
    if_end(c, join);
}

// One k pair of the bf16 microkernel: acc[r] (<32 x float>) += A pair of row r . B pairs, per
// 16 lanes one vdpbf16ps.
static void micro_step_bf(cg *c, const fctx *f, LLVMValueRef abase, LLVMValueRef bbase,
                          LLVMValueRef k2, int64_t mr, LLVMValueRef *acc) {
    LLVMTypeRef v16i = LLVMVectorType(c->t_i32, 16);
    LLVMTypeRef v32b = LLVMVectorType(LLVMBFloatTypeInContext(c->ctx), 32);
    static const char name[] = "llvm.x86.avx512bf16.dpbf16ps.512";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
    DL_ASSERT(f->g.NR == 32); // use_bf16_dot: two halves of 16 lanes
    int64_t nh = 2;
    LLVMValueRef bv = load_vec(c, LLVMVectorType(c->t_i32, (unsigned)f->g.NR),
                               fptr(c, f->bp, add(c, bbase, mul_c(c, k2, f->g.NR))), f->valign);
    LLVMValueRef bh[MAX_NR / 16], m[MAX_NR];
    for (int64_t h = 0; h < nh; h++) {
        for (int l = 0; l < 16; l++) {
            m[l] = cg_i32(c, (int32_t)(h * 16 + l));
        }
        LLVMValueRef half = LLVMBuildShuffleVector(c->b, bv, LLVMGetUndef(LLVMTypeOf(bv)),
                                                   LLVMConstVector(m, 16), "");
        bh[h] = LLVMBuildBitCast(c->b, half, v32b, "");
    }
    LLVMValueRef ak = add(c, abase, mul_c(c, k2, f->g.MR));
    for (int64_t r = 0; r < mr; r++) {
        LLVMValueRef a =
            LLVMBuildLoad2(c->b, c->t_i32, fptr(c, f->ap, add(c, ak, cg_i64(c, r))), "");
        LLVMValueRef as = LLVMBuildBitCast(c->b, splat(c, v16i, a), v32b, "");
        LLVMValueRef out[2] = {NULL, NULL};
        for (int64_t h = 0; h < 2; h++) {
            for (int l = 0; l < 16; l++) {
                m[l] = cg_i32(c, (int32_t)(h * 16 + l));
            }
            LLVMValueRef ah = LLVMBuildShuffleVector(c->b, acc[r], LLVMGetUndef(f->vt),
                                                     LLVMConstVector(m, 16), "");
            LLVMValueRef args[3] = {ah, as, bh[h]};
            out[h] = LLVMBuildCall2(c->b, fty, fn, args, 3, "");
        }
        for (int l = 0; l < 32; l++) {
            m[l] = cg_i32(c, l);
        }
        LLVMValueRef v = LLVMBuildShuffleVector(c->b, out[0], out[1], LLVMConstVector(m, 32), "");
        acc[r] = v;
    }
}

// ---------------------------------------------------------------------------------------------
// bfloat16 products on AMX tiles (amx-tile + amx-bf16: Intel Sapphire Rapids and later).
// tdpbf16ps adds to a 16 x 16 float32 tile C the products of a tile A (16 rows of 32 bf16 along
// k) and a tile B (16 k pairs x 16 columns, each row 16 pairs B[2 k2, j] | B[2 k2 + 1, j] << 16):
// 16 x 16 x 32 products, sixteen vdpbf16ps' worth, in one instruction. The microkernel takes a
// 32 x 32 block of y as four C tiles (tmm0-3: rows 0-15 / 16-31 x columns 0-15 / 16-31) and, per
// 32 k, two A tiles (tmm4-5) and two B tiles (tmm6-7).
//
// Packing (fctx.amx): i32 pairs in tile order, every tile 1 KiB of contiguous memory (rows 64
// bytes apart), so that the k loop reads two sequential streams the hardware prefetchers follow
// (rows a K block apart made the tile loads miss L1 on every row): ap[tile][k2 / 16][r][k2 % 16]
// and bp[sub][k2 / 16][half][k2 % 16][16]; both are zero past kc up to the next multiple of 32,
// so every k step is whole, and a tile's rows past mr are zero. The K block is all of K up to
// AMX_KC: the C tiles start from zero (or from the scratch in a later K block) and are stored
// to the scratch once, after the k loop (a tile store followed by a load of the same lines
// stalls: four K blocks of 256 cost more than the products). Each block of y is computed by the
// same instructions in the same order whichever thread runs it. Every tile has 16 rows of 64
// bytes: one configuration, loaded at the kernel's start and released at its end.

#define AMX_K  32   // bf16 k per tile step
#define AMX_KC 1024 // the largest K block

static bool use_amx(cg *c, const gemm_prob *p) {
    return (c->isa & DLRT_ISA_AMXTILE) && (c->isa & DLRT_ISA_AMXBF16) &&
           p->a->type.dtype == DL_DT_BFLOAT16 && p->b->type.dtype == DL_DT_BFLOAT16 && !p->im &&
           p->ka_in == 0 && !p->pool;
}

// A call of the AMX intrinsic `name` (no overloads, no result).
static void amx_op(cg *c, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    DL_ASSERT(id != 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
    LLVMBuildCall2(c->b, fty, fn, args, n, "");
}

static LLVMValueRef tmm(cg *c, int t) {
    return LLVMConstInt(c->t_i8, (unsigned long long)t, 0);
}

// Tile t = rows of 64 bytes at p, `stride` bytes apart.
static void amx_load(cg *c, int t, LLVMValueRef p, int64_t stride) {
    LLVMValueRef a[3] = {tmm(c, t), p, cg_i64(c, stride)};
    amx_op(c, "llvm.x86.tileloadd64", a, 3);
}

static void amx_store(cg *c, int t, LLVMValueRef p, int64_t stride) {
    LLVMValueRef a[3] = {tmm(c, t), p, cg_i64(c, stride)};
    amx_op(c, "llvm.x86.tilestored64", a, 3);
}

// ldtilecfg of palette 1 with tiles 0-7 of 16 rows x 64 bytes (a constant of the module).
static void amx_config(cg *c) {
    static const char name[] = "dl_amx_tilecfg";
    LLVMValueRef g = LLVMGetNamedGlobal(c->mod, name);
    if (!g) {
        uint8_t cfg[64] = {0};
        cfg[0] = 1; // palette
        for (int t = 0; t < 8; t++) {
            cfg[16 + 2 * t] = 64; // colsb (little-endian u16)
            cfg[48 + t] = 16;     // rows
        }
        LLVMValueRef e[64];
        for (int i = 0; i < 64; i++) {
            e[i] = LLVMConstInt(c->t_i8, cfg[i], 0);
        }
        LLVMTypeRef at = LLVMArrayType2(c->t_i8, 64);
        g = LLVMAddGlobal(c->mod, at, name);
        LLVMSetInitializer(g, LLVMConstArray2(c->t_i8, e, 64));
        LLVMSetGlobalConstant(g, 1);
        LLVMSetLinkage(g, LLVMPrivateLinkage);
        LLVMSetAlignment(g, 64);
    }
    amx_op(c, "llvm.x86.ldtilecfg", &g, 1);
}

static void amx_release(cg *c) {
    amx_op(c, "llvm.x86.tilerelease", NULL, 0);
}

// k steps of the K block: ceil(kc / 32) (runtime).
static LLVMValueRef amx_steps(cg *c, const fctx *f) {
    return LLVMBuildUDiv(c->b, add(c, f->kc, cg_i64(c, AMX_K - 1)), cg_i64(c, AMX_K), "");
}

// <n x i1> mask (runtime) of the lanes l < rem, none when rem <= 0.
static LLVMValueRef mask_upto(cg *c, LLVMValueRef rem, int64_t n) {
    LLVMValueRef pos = LLVMBuildICmp(c->b, LLVMIntSGT, rem, cg_i64(c, 0), "");
    return cg_lane_mask_rt(c, LLVMBuildSelect(c->b, pos, rem, cg_i64(c, 0), ""), n);
}

// A masked load of <n x i16> bf16 at element idx of base (lanes off: 0; alignment 2).
static LLVMValueRef load_h(cg *c, LLVMValueRef base, LLVMValueRef idx, unsigned n,
                           LLVMValueRef mask) {
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, c->t_i16, base, &idx, 1, "");
    return cg_masked_load_align(c, LLVMVectorType(c->t_i16, n), p, mask, 2);
}

// ap[tile][k2 / 16][r][k2 % 16] for r < MR (rows past mr zero), k2 < 16 * amx_steps: each A
// tile (16 rows x 16 k pairs) is 1 KiB of contiguous memory.
static void emit_pack_a_amx(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr) {
    const gemm_prob *p = f->p;
    LLVMValueRef a = f->k->ptr[1];
    int64_t kc2 = f->g.KC / 2;
    LLVMTypeRef v16 = LLVMVectorType(c->t_i32, 16);
    LLVMValueRef row0 = add(c, f->i0, mul_c(c, tile, f->g.MR));
    LLVMValueRef src0 = add(c, f->a_off, add(c, mul_c(c, row0, p->sa_m), mul_c(c, f->pc, p->sa_k)));
    LLVMValueRef dst0 = mul_c(c, tile, f->g.MR * kc2);
    LLVMValueRef nq = amx_steps(c, f);
    if (p->sa_m == 1 && p->sa_k != 1) {
        // transposed A (a weight gradient's X^T): 16 rows are contiguous per k. Per 16 rows and
        // 16 k pairs: 32 masked loads (rows past mr and k past kc load zeros), interleaved into
        // 16 <16 x i32> of pairs (lane = row), transposed in registers (lane = k pair).
        for (int64_t h = 0; h < f->g.MR / 16; h++) {
            LLVMValueRef rmask = lane_mask(c, mr - h * 16, 16);
            if (mr - h * 16 <= 0) {
                rmask = LLVMConstNull(LLVMVectorType(c->t_i1, 16));
            } else if (!rmask) {
                rmask = LLVMConstAllOnes(LLVMVectorType(c->t_i1, 16));
            }
            cg_loop lq;
            LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "pax");
            LLVMValueRef x[16];
            for (int64_t j = 0; j < 16; j++) {
                LLVMValueRef kk = add(c, mul_c(c, q, AMX_K), cg_i64(c, 2 * j));
                LLVMValueRef hv[2];
                for (int s = 0; s < 2; s++) {
                    LLVMValueRef ks = add(c, kk, cg_i64(c, s));
                    LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntSLT, ks, f->kc, "");
                    LLVMValueRef m =
                        LLVMBuildSelect(c->b, ok, rmask, LLVMConstNull(LLVMTypeOf(rmask)), "");
                    LLVMValueRef e = add(c, src0, add(c, mul_c(c, ks, p->sa_k), cg_i64(c, h * 16)));
                    hv[s] = load_h(c, a, e, 16, m);
                }
                x[j] = interleave_pairs(c, hv[0], hv[1], 16);
            }
            dl_cg__transpose_sq(c, x, 16);
            for (int64_t r = 0; r < 16; r++) {
                LLVMValueRef d =
                    add(c, dst0, add(c, mul_c(c, q, 512), cg_i64(c, (h * 16 + r) * 16)));
                store_vec(c, x[r], fptr(c, f->ap, d), 64);
            }
            cg_for_end(c, &lq);
        }
        return;
    }
    cg_loop lr, lq;
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, f->g.MR), "par");
    LLVMValueRef live = LLVMBuildICmp(c->b, LLVMIntSLT, r, cg_i64(c, mr), "");
    LLVMValueRef src = add(c, src0, mul_c(c, r, p->sa_m));
    LLVMValueRef dst = add(c, dst0, mul_c(c, r, 16));
    LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "paq");
    LLVMValueRef kk = mul_c(c, q, AMX_K);
    LLVMValueRef v;
    if (p->sa_k == 1) { // one masked load of 32 bf16 (zero past kc and in dead rows)
        LLVMValueRef rem =
            LLVMBuildSelect(c->b, live, LLVMBuildSub(c->b, f->kc, kk, ""), cg_i64(c, 0), "");
        v = LLVMBuildBitCast(c->b, load_h(c, a, add(c, src, kk), 32, mask_upto(c, rem, 32)), v16,
                             "");
    } else { // any other strides: pair by pair, guarded
        v = LLVMConstNull(v16);
        for (int64_t j = 0; j < 16; j++) {
            LLVMValueRef k0 = add(c, kk, cg_i64(c, 2 * j));
            LLVMValueRef k1 = add(c, k0, cg_i64(c, 1));
            LLVMValueRef ok0 =
                LLVMBuildAnd(c->b, live, LLVMBuildICmp(c->b, LLVMIntSLT, k0, f->kc, ""), "");
            LLVMValueRef ok1 =
                LLVMBuildAnd(c->b, live, LLVMBuildICmp(c->b, LLVMIntSLT, k1, f->kc, ""), "");
            // guarded element loads: an index past the block reads element 0 (in bounds), masked
            LLVMValueRef e0 =
                LLVMBuildSelect(c->b, ok0, add(c, src, mul_c(c, k0, p->sa_k)), cg_i64(c, 0), "");
            LLVMValueRef e1 =
                LLVMBuildSelect(c->b, ok1, add(c, src, mul_c(c, k1, p->sa_k)), cg_i64(c, 0), "");
            LLVMValueRef x0 = LLVMBuildSelect(c->b, ok0, ld16(c, a, e0), cg_i32(c, 0), "");
            LLVMValueRef x1 = LLVMBuildSelect(c->b, ok1, ld16(c, a, e1), cg_i32(c, 0), "");
            v = LLVMBuildInsertElement(c->b, v, pair32(c, x0, x1), cg_i32(c, (int32_t)j), "");
        }
    }
    store_vec(c, v, fptr(c, f->ap, add(c, dst, mul_c(c, q, 512))), 64);
    cg_for_end(c, &lq);
    cg_for_end(c, &lr);
}

// Row k2 of panel (dst0) of the AMX pack, v (<NR x i32>) split into its two 16-column halves:
// bp[sub][k2 / 16][half][k2 % 16][16], so that each B tile (16 k pairs x 16 columns) is 1 KiB of
// contiguous memory.
static void amx_store_b_row(cg *c, const fctx *f, LLVMValueRef dst0, LLVMValueRef k2,
                            LLVMValueRef v) {
    LLVMValueRef slot = add(c, dst0,
                            add(c, mul_c(c, LLVMBuildUDiv(c->b, k2, cg_i64(c, 16), ""), 512),
                                mul_c(c, LLVMBuildURem(c->b, k2, cg_i64(c, 16), ""), 16)));
    LLVMValueRef m[16];
    for (int h = 0; h < 2; h++) {
        for (int l = 0; l < 16; l++) {
            m[l] = cg_i32(c, h * 16 + l);
        }
        LLVMValueRef half = LLVMBuildShuffleVector(c->b, v, LLVMGetPoison(LLVMTypeOf(v)),
                                                   LLVMConstVector(m, 16), "");
        store_vec(c, half, fptr(c, f->bp, add(c, slot, cg_i64(c, h * 256))), 64);
    }
}

// bp[sub] for k2 < 16 * amx_steps (amx_store_b_row's layout): pack_b_pair's rows, zero rows to
// the step boundary; transposed B (sb_k == 1: a backward product's W^T) by 16 x 16 register
// transposes.
static void emit_pack_b_amx(cg *c, const fctx *f, int64_t nr) {
    const gemm_prob *p = f->p;
    int64_t kc2 = f->g.KC / 2;
    LLVMValueRef dst0 = mul_c(c, f->sub, kc2 * f->g.NR);
    LLVMValueRef nq = amx_steps(c, f);
    LLVMTypeRef v16 = LLVMVectorType(c->t_i32, 16);
    if (p->sb_k == 1 && p->sb_n != 1) {
        // column j's k run is contiguous: one masked load of 32 bf16 per column and 32 k gives
        // its 16 pairs (lane = k pair); 16 columns transposed give 16 rows of the panel half.
        cg_loop lq;
        LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "pbx");
        LLVMValueRef kk = mul_c(c, q, AMX_K);
        LLVMValueRef kmask = mask_upto(c, LLVMBuildSub(c->b, f->kc, kk, ""), 32);
        LLVMValueRef src0 = add(c, f->b_off, add(c, add(c, f->pc, kk), mul_c(c, f->j0, p->sb_n)));
        for (int64_t h = 0; h < f->g.NR / 16; h++) {
            LLVMValueRef x[16];
            for (int64_t j = 0; j < 16; j++) {
                int64_t col = h * 16 + j;
                x[j] =
                    col < nr
                        ? LLVMBuildBitCast(
                              c->b, ld_b16(c, f, add(c, src0, cg_i64(c, col * p->sb_n)), 32, kmask),
                              v16, "")
                        : LLVMConstNull(v16);
            }
            dl_cg__transpose_sq(c, x, 16);
            for (int64_t k2 = 0; k2 < 16; k2++) {
                LLVMValueRef d =
                    add(c, dst0, add(c, mul_c(c, q, 512), cg_i64(c, h * 256 + k2 * 16)));
                store_vec(c, x[k2], fptr(c, f->bp, d), 64);
            }
        }
        cg_for_end(c, &lq);
        return;
    }
    // k2 < kc / 2: pack_b_pair's rows; an odd kc's last pair with a zero; zeros to 16 * nq
    LLVMValueRef whole = LLVMBuildUDiv(c->b, f->kc, cg_i64(c, 2), "");
    LLVMValueRef np = LLVMBuildUDiv(c->b, add(c, f->kc, cg_i64(c, 1)), cg_i64(c, 2), "");
    cg_loop lk;
    LLVMValueRef k2 = cg_for_begin(c, &lk, cg_i64(c, 0), whole, "pbk");
    amx_store_b_row(c, f, dst0, k2, pack_b_pair(c, f, add(c, f->pc, mul_c(c, k2, 2)), true, nr));
    cg_for_end(c, &lk);
    LLVMBasicBlockRef join = if_begin(c, LLVMBuildICmp(c->b, LLVMIntULT, whole, np, ""));
    amx_store_b_row(c, f, dst0, whole,
                    pack_b_pair(c, f, add(c, f->pc, mul_c(c, whole, 2)), false, nr));
    if_end(c, join);
    cg_loop lz;
    k2 = cg_for_begin(c, &lz, np, mul_c(c, nq, 16), "pbz");
    amx_store_b_row(c, f, dst0, k2, LLVMConstNull(LLVMVectorType(c->t_i32, (unsigned)f->g.NR)));
    cg_for_end(c, &lz);
}

// The AMX microkernel on tile `tile` of the block and panel `sub` (MR = NR = 32): scratch rows
// [tile * 32, +32) x panel columns += ap[tile] . bp[sub] over the K block.
static void emit_micro_amx(cg *c, const fctx *f, LLVMValueRef tile) {
    int64_t kc2 = f->g.KC / 2, NR = f->g.NR, NC = f->g.NC;
    DL_ASSERT(f->g.MR == 32 && NR == 32);
    LLVMValueRef srow = add(c, mul_c(c, tile, f->g.MR * NC), mul_c(c, f->sub, NR));
    LLVMValueRef cp[4];
    for (int t = 0; t < 4; t++) { // C tile t: rows (t / 2) * 16, columns (t % 2) * 16
        cp[t] = fptr(c, f->scr, add(c, srow, cg_i64(c, (t / 2) * 16 * NC + (t % 2) * 16)));
    }
    if_else ie;
    if_else_begin(c, &ie, LLVMBuildICmp(c->b, LLVMIntEQ, f->pc, cg_i64(c, 0), ""));
    for (int t = 0; t < 4; t++) {
        LLVMValueRef tz = tmm(c, t);
        amx_op(c, "llvm.x86.tilezero", &tz, 1);
    }
    if_else_mid(c, &ie);
    for (int t = 0; t < 4; t++) {
        amx_load(c, t, cp[t], NC * 4);
    }
    if_else_end(c, &ie);
    LLVMValueRef abase = mul_c(c, tile, f->g.MR * kc2);
    LLVMValueRef bbase = mul_c(c, f->sub, kc2 * NR);
    cg_loop lq;
    LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), amx_steps(c, f), "amx");
    LLVMValueRef a0 = add(c, abase, mul_c(c, q, 512));
    LLVMValueRef b0 = add(c, bbase, mul_c(c, q, 512));
    amx_load(c, 4, fptr(c, f->ap, a0), 64);
    amx_load(c, 5, fptr(c, f->ap, add(c, a0, cg_i64(c, 256))), 64);
    amx_load(c, 6, fptr(c, f->bp, b0), 64);
    amx_load(c, 7, fptr(c, f->bp, add(c, b0, cg_i64(c, 256))), 64);
    static const int dp[4][3] = {{0, 4, 6}, {1, 4, 7}, {2, 5, 6}, {3, 5, 7}};
    for (int t = 0; t < 4; t++) {
        LLVMValueRef args[3] = {tmm(c, dp[t][0]), tmm(c, dp[t][1]), tmm(c, dp[t][2])};
        amx_op(c, "llvm.x86.tdpbf16ps", args, 3);
    }
    cg_for_end(c, &lq);
    for (int t = 0; t < 4; t++) {
        amx_store(c, t, cp[t], NC * 4);
    }
}

// Whether the epilogue can go a row of a panel at a time as one vector (x86's masked
// operations; float32 or bfloat16 y; an epilogue group reading single elements, a value per
// row, or, `rows`, float32 rows along j (ext_row); a C of float32 or bfloat16 read along its
// rows or broadcast along them).
static bool epi_vec_ok(cg *c, const gemm_prob *p, bool rows) {
    dl_dtype yt = p->y->type.dtype;
    bool bf_y = yt == DL_DT_BFLOAT16 && !p->epi && !p->pool;
    dl_dtype ct = p->cv ? p->cv->type.dtype : DL_DT_FLOAT;
    bool ext_fixed = true; // every value the epilogue reads is one element (a scale)
    bool ext_ok = true;    // a product's: single elements, values per row, rows
    for (size_t e = 0; e < p->n_ext; e++) {
        ext_fixed = ext_fixed && p->ext_sm[e] == 0 && p->ext_sn[e] == 0;
        ext_ok = ext_ok && (p->ext_sn[e] == 0 ? p->ext_sm[e] == 0 || rows : rows && ext_row(p, e));
    }
    return c->target->vector_width(c, DL_DT_FLOAT) >= 8 && (yt == DL_DT_FLOAT || bf_y) &&
           (!p->epi || ext_fixed || (p->ext_y ? !p->pool : ext_ok)) &&
           (!p->cv || ((ct == DL_DT_FLOAT || ct == DL_DT_BFLOAT16) && p->cs_n <= 1));
}

// Whether the microkernel applies the epilogue to its accumulators (f.direct): a product's
// epilogue reading only single elements (a convolution's reads its rows there too). One
// reading [M, N] rows ran no faster there than in the vector pass over the scratch (the
// transformer's and the MLPs' Gemm+Add and Gemm+UnaryGrad, K >= 256).
static bool epi_is_vec(cg *c, const gemm_prob *p) {
    return epi_vec_ok(c, p, false);
}

// The vector epilogue of row i, columns j0 .. j0 + vl of y (epi_is_vec): v, the row's f32 sums
// (vl lanes), becomes alpha * v (+ bias[i]) (+ beta * C[i, j0 ..]) and goes through the fused
// members, on the vector where every member can be (dl_cg__fused_values_vec), else lane by lane
// (the first `lanes`; LLVM's vectoriser joins them again), then is stored
// to y (rounded to bfloat16 for a bfloat16 y) or, pooled, to `scr_dst`, through `mask` (NULL:
// every lane; a constant prefix: see cg_masked_store).
static void epi_vec(cg *c, const fctx *f, LLVMValueRef v, int64_t lanes, LLVMValueRef i,
                    LLVMValueRef j0, LLVMValueRef mask, LLVMValueRef scr_dst) {
    const gemm_prob *p = f->p;
    LLVMTypeRef vt = LLVMTypeOf(v);
    unsigned vl = LLVMGetVectorSize(vt);
    dl_dtype ct = p->cv ? p->cv->type.dtype : DL_DT_FLOAT;
    if (p->alpha != 1.0) {
        v = LLVMBuildFMul(c->b, v, splat(c, vt, cg_f32(c, p->alpha)), "");
    }
    if (p->bias) {
        LLVMValueRef bias = cg_load(c, f->k->ptr[3], p->bias->type.dtype, add(c, f->bias_off, i));
        v = LLVMBuildFAdd(c->b, v, splat(c, vt, bias), "");
    }
    if (p->cv) {
        LLVMValueRef crow = add(c, mul_c(c, i, p->cs_m), mul_c(c, j0, p->cs_n));
        LLVMValueRef cvv;
        if (p->cs_n == 0) {
            cvv = splat(c, vt, cg_load(c, f->k->ptr[3], ct, crow));
        } else if (ct == DL_DT_BFLOAT16) { // bf16 bits in the high half of f32 lanes
            LLVMValueRef m = mask ? mask : LLVMConstAllOnes(LLVMVectorType(c->t_i1, vl));
            LLVMValueRef h = load_h(c, f->k->ptr[3], crow, vl, m);
            LLVMTypeRef it = LLVMVectorType(c->t_i32, vl);
            LLVMValueRef w =
                LLVMBuildShl(c->b, LLVMBuildZExt(c->b, h, it, ""), splat(c, it, cg_i32(c, 16)), "");
            cvv = LLVMBuildBitCast(c->b, w, vt, "");
        } else {
            cvv = cg_masked_load(c, vt, fptr(c, f->k->ptr[3], crow), mask);
        }
        if (p->beta != 1.0) {
            cvv = LLVMBuildFMul(c->b, cvv, splat(c, vt, cg_f32(c, p->beta)), "");
        }
        v = LLVMBuildFAdd(c->b, v, cvv, "");
    }
    LLVMValueRef yrow = add(c, f->y_off, add(c, mul_c(c, i, p->N), j0));
    if (p->epi) {
        LLVMValueRef val[GEMM_MAX_EPI], xin[GEMM_MAX_EXT], xl[GEMM_MAX_EXT];
        size_t base = ext_arg0(p);
        for (size_t e = 0; e < p->n_ext; e++) { // ext_row: the row's lanes, else one
            LLVMValueRef xrow = p->ext_y ? yrow : mul_c(c, i, p->ext_sm[e]); // nb == 1
            if (ext_row(p, e)) {
                xin[e] = cg_masked_load(
                    c, vt, fptr(c, f->k->ptr[base + e], p->ext_y ? xrow : add(c, xrow, j0)), mask);
                continue;
            }
            bool ch = p->ext_y && p->ext_kind[e] == DL_CG__CONV_EXT_CHANNEL;
            xin[e] = cg_load(c, f->k->ptr[base + e], p->ext[e]->type.dtype,
                             ch         ? add(c, f->bias_off, i)
                             : p->ext_y ? cg_i64(c, 0)
                                        : xrow);
        }
        val[0] = v;
        LLVMValueRef ev =
            dl_cg__fused_values_vec(c, p->epi, p->n_epi, 1, val, p->ext, xin, p->n_ext);
        for (int64_t l = 0; l < lanes && !ev; l++) {
            LLVMValueRef lane = cg_i32(c, (int32_t)l);
            val[0] = LLVMBuildExtractElement(c->b, v, lane, "");
            for (size_t e = 0; e < p->n_ext; e++) {
                xl[e] = ext_row(p, e) ? LLVMBuildExtractElement(c->b, xin[e], lane, "") : xin[e];
            }
            LLVMValueRef e = dl_cg__fused_values(c, p->epi, p->n_epi, 1, val, p->ext, xl, p->n_ext);
            v = LLVMBuildInsertElement(c->b, v, e, lane, "");
        }
        v = ev ? ev : v;
    }
    if (p->y->type.dtype == DL_DT_BFLOAT16) {
        LLVMValueRef h = cg_f32_to_bf16(c, v);
        LLVMValueRef yp = LLVMBuildInBoundsGEP2(c->b, c->t_i16, f->k->ptr[0], &yrow, 1, "");
        cg_masked_store(c, h, yp, mask);
    } else {
        cg_masked_store(c, v, scr_dst ? scr_dst : fptr(c, f->k->ptr[0], yrow), mask);
    }
}

// The microkernel on rows [tile * MR, tile * MR + mr) of the block and panel `sub`:
// scratch[row][sub * NR ..] += sum over k in [0, kc) of ap[tile][k][r] * bp[sub][k].
#define UNROLL 4
static void emit_micro(cg *c, const fctx *f, LLVMValueRef tile, int64_t mr) {
    if (f->amx) { // whole tiles: the pack zeroed the rows past mr
        emit_micro_amx(c, f, tile);
        return;
    }
    LLVMValueRef acc[MAX_MR];
    // srow: scratch index of [tile * MR][sub * NR]
    LLVMValueRef srow = add(c, mul_c(c, tile, f->g.MR * f->g.NC), mul_c(c, f->sub, f->g.NR));
    // The first K block starts from zero (the scratch is not cleared), the others from the
    // scratch: acc[r] = pc == 0 ? 0 : scratch row.
    LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntEQ, f->pc, cg_i64(c, 0), "");
    if_else ie;
    if_else_begin(c, &ie, first);
    LLVMBasicBlockRef from_zero = LLVMGetInsertBlock(c->b);
    if_else_mid(c, &ie);
    LLVMValueRef loaded[MAX_MR];
    for (int64_t r = 0; r < mr; r++) {
        loaded[r] =
            load_vec(c, f->vt, fptr(c, f->scr, add(c, srow, cg_i64(c, r * f->g.NC))), f->valign);
    }
    LLVMBasicBlockRef from_scr = LLVMGetInsertBlock(c->b);
    if_else_end(c, &ie);
    for (int64_t r = 0; r < mr; r++) {
        acc[r] = LLVMBuildPhi(c->b, f->vt, "acc0");
        LLVMValueRef in[2] = {LLVMConstNull(f->vt), loaded[r]};
        LLVMBasicBlockRef from[2] = {from_zero, from_scr};
        LLVMAddIncoming(acc[r], in, from, 2);
    }
    // A convolution's residual (ext_y), read by the epilogue after the last K block: its
    // tile's lines (mr rows, a row of y apart) are requested while the block's k loop runs,
    // not when the epilogue needs them.
    if (f->direct && f->p->ext_y) {
        const gemm_prob *p = f->p;
        LLVMBasicBlockRef join =
            if_begin(c, LLVMBuildICmp(c->b, LLVMIntEQ, add(c, f->pc, f->kc), cg_i64(c, p->K), ""));
        LLVMValueRef j0 = add(c, f->c0, mul_c(c, f->sub, f->g.NR));
        LLVMValueRef i0 = add(c, f->i0, mul_c(c, tile, f->g.MR));
        LLVMValueRef row0 = add(c, f->y_off, add(c, mul_c(c, i0, p->N), j0));
        for (size_t e = 0; e < p->n_ext; e++) {
            for (int64_t r = 0; r < mr && ext_row(p, e); r++) {
                for (int64_t h = 0; h < f->g.NR; h += 16) {
                    cg_prefetch(c, fptr(c, f->k->ptr[ext_arg0(p) + e],
                                        add(c, row0, cg_i64(c, r * p->N + h))));
                }
            }
        }
        if_end(c, join);
    }
    // bf16: steps over k pairs, the tiles and panels half as long (in i32 elements)
    int64_t kstep = f->bf ? 2 : 1;
    void (*step)(cg *, const fctx *, LLVMValueRef, LLVMValueRef, LLVMValueRef, int64_t,
                 LLVMValueRef *) = f->bf ? micro_step_bf : micro_step;
    LLVMValueRef nk =
        f->bf ? LLVMBuildUDiv(c->b, add(c, f->kc, cg_i64(c, 1)), cg_i64(c, 2), "") : f->kc;
    LLVMValueRef abase = mul_c(c, tile, f->g.KC / kstep * f->g.MR);
    LLVMValueRef bbase = mul_c(c, f->sub, f->g.KC / kstep * f->g.NR);
    // Unrolled main loop over groups of UNROLL k, then the remainder one by one.
    LLVMValueRef ng = LLVMBuildUDiv(c->b, nk, cg_i64(c, UNROLL), "");
    ploop l;
    ploop_begin(c, &l, cg_i64(c, 0), ng, acc, (size_t)mr);
    LLVMValueRef next[MAX_MR];
    memcpy(next, l.v, sizeof(LLVMValueRef) * (size_t)mr);
    LLVMValueRef kb = mul_c(c, l.iv, UNROLL);
    // The next panel's B into L2, one cache line per unrolled step, the tiles of a block taking
    // turns (a block of MB / MR tiles requests every line of a panel once): the panel's first
    // tile then does not wait on L3 (prepacked weights, larger than L2 with the packed A) or on
    // memory. MLP 784-1024x3-10 inference at batch 256, 1 thread: 10.7 -> 9.7 ms a call. Past
    // the group's last panel it requests lines no tile reads (the address may lie past the
    // buffer: a plain GEP, and a prefetch never faults).
    int64_t lines = f->g.KC / kstep * f->g.NR / 16;
    LLVMValueRef line = LLVMBuildURem(c->b, add(c, mul_c(c, tile, f->g.KC / kstep / UNROLL), l.iv),
                                      cg_i64(c, lines), "");
    LLVMValueRef pf = add(c, add(c, bbase, cg_i64(c, lines * 16)), mul_c(c, line, 16));
    cg_prefetch(c, LLVMBuildGEP2(c->b, c->t_f32, f->bp, &pf, 1, ""));
    for (int64_t u = 0; u < UNROLL; u++) {
        step(c, f, abase, bbase, add(c, kb, cg_i64(c, u)), mr, next);
    }
    ploop_end(c, &l, next);
    ploop l2;
    ploop_begin(c, &l2, mul_c(c, ng, UNROLL), nk, l.v, (size_t)mr);
    memcpy(next, l2.v, sizeof(LLVMValueRef) * (size_t)mr);
    step(c, f, abase, bbase, l2.iv, mr, next);
    ploop_end(c, &l2, next);
    if_else il;
    if (f->direct) { // the last K block: the epilogue here and y, a row at a time
        const gemm_prob *p = f->p;
        int64_t vl = LLVMGetVectorSize(f->vt), nr_e = p->N % f->g.NR;
        if_else_begin(c, &il,
                      LLVMBuildICmp(c->b, LLVMIntEQ, add(c, f->pc, f->kc), cg_i64(c, p->K), ""));
        LLVMValueRef j0 = add(c, f->c0, mul_c(c, f->sub, f->g.NR));
        LLVMValueRef i0 = add(c, f->i0, mul_c(c, tile, f->g.MR));
        // y's last panel, nr_e columns, when partial (only it can be: groups are whole panels)
        if_else ip;
        if (nr_e > 0) {
            if_else_begin(
                c, &ip,
                LLVMBuildICmp(c->b, LLVMIntSLE, add(c, j0, cg_i64(c, vl)), cg_i64(c, p->N), ""));
        }
        for (int64_t r = 0; r < mr; r++) {
            epi_vec(c, f, l2.v[r], vl, add(c, i0, cg_i64(c, r)), j0, NULL, NULL);
        }
        if (nr_e > 0) {
            if_else_mid(c, &ip);
            for (int64_t r = 0; r < mr; r++) {
                epi_vec(c, f, l2.v[r], nr_e < vl ? nr_e : vl, add(c, i0, cg_i64(c, r)), j0,
                        lane_mask(c, nr_e, vl), NULL);
            }
            if_else_end(c, &ip);
        }
        if_else_mid(c, &il);
    }
    for (int64_t r = 0; r < mr; r++) {
        store_vec(c, l2.v[r], fptr(c, f->scr, add(c, srow, cg_i64(c, r * f->g.NC))), f->valign);
    }
    if (f->direct) {
        if_else_end(c, &il);
    }
}

// y[i0 + r, j0 + j] = alpha * scratch[r][sub * NR + j] (+ bias[i0 + r]) (+ beta * C[i0 + r,
// j0 + j]) for r < rows, j < nr.
static void emit_epilogue(cg *c, const fctx *f, int64_t nr) {
    const gemm_prob *p = f->p;
    dl_dtype yt = p->y->type.dtype;
    cg_loop lr;
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), f->rows, "er");
    LLVMValueRef i = add(c, f->i0, r);
    LLVMValueRef srow = add(c, mul_c(c, r, f->g.NC), mul_c(c, f->sub, f->g.NR));
    if (epi_vec_ok(c, p, true)) {
        // The panel row as one vector (the same operations lane by lane as below); a narrower
        // last panel stores (and reads C) through a lane mask. A last panel at most half as
        // wide as NR goes as half a vector (its scratch has only those lanes when the
        // microkernel ran at half width: emit_tiles).
        int64_t vl = nr <= f->g.NR / 2 && !f->bf ? f->g.NR / 2 : f->g.NR;
        LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)vl);
        LLVMValueRef v = load_vec(c, vt, fptr(c, f->scr, srow), f->valign);
        epi_vec(c, f, v, nr, i, f->j0, lane_mask(c, nr, vl),
                p->pool ? fptr(c, f->scr, srow) : NULL);
        cg_for_end(c, &lr);
        return;
    }
    LLVMValueRef yrow = add(c, f->y_off, add(c, mul_c(c, i, p->N), f->j0));
    LLVMValueRef crow = NULL;
    if (p->cv) {
        crow = add(c, mul_c(c, i, p->cs_m), mul_c(c, f->j0, p->cs_n));
    }
    LLVMValueRef bias = NULL;
    if (p->bias) {
        bias = cg_load(c, f->k->ptr[3], p->bias->type.dtype, add(c, f->bias_off, i));
    }
    for (int64_t j = 0; j < nr; j++) {
        LLVMValueRef v =
            LLVMBuildLoad2(c->b, c->t_f32, fptr(c, f->scr, add(c, srow, cg_i64(c, j))), "");
        v = finish_elem(c, p, f->k, v, bias, p->cv ? add(c, crow, cg_i64(c, j * p->cs_n)) : NULL, i,
                        add(c, f->j0, cg_i64(c, j)));
        if (p->pool) {
            LLVMBuildStore(c->b, v, fptr(c, f->scr, add(c, srow, cg_i64(c, j))));
        } else {
            cg_store(c, f->k->ptr[0], yt, add(c, yrow, cg_i64(c, j)), v);
        }
    }
    cg_for_end(c, &lr);
}

// The microkernel over the block's tiles for panel f->sub: n_tiles full ones, then, in the last
// block (is_last), tile tile_e of mr_e rows. f->vt is NR lanes wide, or NR / 2 for a last panel
// that narrow (the packed panel is NR wide either way; the scratch gets only f->vt's lanes).
static void emit_tiles(cg *c, const fctx *f, LLVMValueRef n_tiles, LLVMValueRef is_last,
                       int64_t tile_e, int64_t mr_e) {
    cg_loop lm;
    LLVMValueRef tile = cg_for_begin(c, &lm, cg_i64(c, 0), n_tiles, "tile");
    emit_micro(c, f, tile, f->g.MR);
    cg_for_end(c, &lm);
    if (mr_e) {
        LLVMBasicBlockRef join = if_begin(c, is_last);
        emit_micro(c, f, cg_i64(c, tile_e), mr_e);
        if_end(c, join);
    }
}

typedef void (*panel_fn)(cg *c, const fctx *f, int64_t nr);

// For each NR panel of the current NC group: sets f->sub and f->j0 and emits fn(nr) with the
// panel's static width (NR, or nr_e for the last panel of y).
static void for_panels(cg *c, fctx *f, LLVMValueRef n_sub, panel_fn fn) {
    const gemm_prob *p = f->p;
    int64_t n_full = p->N / f->g.NR, nr_e = p->N % f->g.NR;
    cg_loop ls;
    f->sub = cg_for_begin(c, &ls, cg_i64(c, 0), n_sub, "sub");
    f->j0 = add(c, f->c0, mul_c(c, f->sub, f->g.NR));
    if (p->pool && (f->nr_mid > 0 || f->nr_last > 0)) {
        // Pooled groups end where a row pair ends: any group's last panel may be partial
        if_else ie;
        LLVMValueRef end = mul_c(c, add(c, f->sub, cg_i64(c, 1)), f->g.NR);
        if_else_begin(c, &ie, LLVMBuildICmp(c->b, LLVMIntSLE, end, f->ncols, ""));
        fn(c, f, f->g.NR);
        if_else_mid(c, &ie);
        if (f->nr_mid == 0 || f->nr_last == 0 || f->nr_mid == f->nr_last) {
            fn(c, f, f->nr_mid > 0 ? f->nr_mid : f->nr_last);
        } else {
            if_else il;
            if_else_begin(c, &il, f->last_group);
            fn(c, f, f->nr_last);
            if_else_mid(c, &il);
            fn(c, f, f->nr_mid);
            if_else_end(c, &il);
        }
        if_else_end(c, &ie);
    } else if (p->pool || nr_e == 0) {
        fn(c, f, f->g.NR);
    } else if (n_full == 0) {
        fn(c, f, nr_e);
    } else {
        LLVMValueRef is_full =
            LLVMBuildICmp(c->b, LLVMIntSLT, f->j0, cg_i64(c, n_full * f->g.NR), "");
        if_else ie;
        if_else_begin(c, &ie, is_full);
        fn(c, f, f->g.NR);
        if_else_mid(c, &ie);
        fn(c, f, nr_e);
        if_else_end(c, &ie);
    }
    cg_for_end(c, &ls);
}

// The largest packed B a kernel keeps for all its K blocks. It is on the stack, with about
// 150 KiB of per-block buffers: the frame stays under the 2 MiB glibc gives a thread when the
// stack limit is unlimited (libdlrt's own workers get 16 MiB, runtime/rt_exec.c).
#define SHARE_B_BYTES (1 << 20)
// The largest packed A (all row blocks and K blocks) a kernel keeps across its outer
// iterations (a convolution's weights, packed once per thread instead of once per image and
// column group).
#define SHARE_A_BYTES (256 << 10)
#define MIN_UNITS     8 // outer iterations below which column groups are halved
// The largest packed B (one K block) plus scratch of a product whose chunk of column groups
// runs as one (emit_float's merged groups), sized for all its groups: with the other buffers the
// frame stays under the 2 MiB above.
#define MERGE_BYTES (768 << 10)

// The block size that splits n into as many blocks as `blk` would, evenly: an equal share rounded
// up to a multiple of `unit`, never above blk.
static int64_t even_block(int64_t n, int64_t blk, int64_t unit) {
    int64_t nb = (n + blk - 1) / blk;
    int64_t even = ((n + nb - 1) / nb + unit - 1) / unit * unit;
    return even < blk ? even : blk;
}

// Prefetches the elements k in [k0, k1) (k1 - k0 <= max_len) of `rows` rows laid out in runs of
// `run` consecutive floats per image: element (r, k) at base + r * row_stride +
// (k / run) * img_stride + k % run; one prefetch per 16 floats (a cache line) of each run.
static void prefetch_runs(cg *c, LLVMValueRef ptr, LLVMValueRef base, LLVMValueRef rows,
                          int64_t row_stride, LLVMValueRef k0, LLVMValueRef k1, int64_t max_len,
                          int64_t run, int64_t img_stride) {
    // The segments, one per image the range touches: at most max_len / run + 2 of them, the
    // ones past k1 empty.
    ploop ls;
    LLVMValueRef init = k0;
    ploop_begin(c, &ls, cg_i64(c, 0), cg_i64(c, max_len / run + 2), &init, 1);
    LLVMValueRef k = ls.v[0];
    LLVMValueRef img = LLVMBuildUDiv(c->b, k, cg_i64(c, run), "");
    LLVMValueRef pos = LLVMBuildURem(c->b, k, cg_i64(c, run), "");
    LLVMValueRef left = LLVMBuildSub(c->b, k1, k, "");
    LLVMValueRef len =
        min_c(c, LLVMBuildSub(c->b, cg_i64(c, run), pos, ""),
              LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, left, cg_i64(c, 0), ""), left,
                              cg_i64(c, 0), ""));
    LLVMValueRef seg = add(c, base, add(c, mul_c(c, img, img_stride), pos));
    LLVMValueRef nl = LLVMBuildUDiv(c->b, add(c, len, cg_i64(c, 15)), cg_i64(c, 16), "");
    cg_loop lr, ll;
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), rows, "pfr");
    LLVMValueRef rb = add(c, seg, mul_c(c, r, row_stride));
    LLVMValueRef l = cg_for_begin(c, &ll, cg_i64(c, 0), nl, "pfl");
    cg_prefetch(c, fptr(c, ptr, add(c, rb, mul_c(c, l, 16))));
    cg_for_end(c, &ll);
    cg_for_end(c, &lr);
    LLVMValueRef next = add(c, k, len);
    ploop_end(c, &ls, &next);
}

// Software prefetch of the next K block's sources where the hardware prefetchers see only
// short streams (runs of one image's positions, rows or channel planes apart): the weight
// gradient's split-k dy (A) and its image (B, gathered by im_rows_contiguous's pack). Issued
// at the start of block q for block q + 1, whose packing then finds them in L2.
static void emit_prefetch_next(cg *c, const fctx *f, LLVMValueRef q, int64_t n_kblk,
                               LLVMValueRef ncols) {
    const gemm_prob *p = f->p;
    bool pf_a = p->ka_in >= 16 && p->sa_k2 == 1 && p->a->type.dtype == DL_DT_FLOAT;
    bool pf_b = p->im && im_rows_contiguous(c, f);
    if (n_kblk < 2 || (!pf_a && !pf_b)) {
        return;
    }
    LLVMBasicBlockRef join =
        if_begin(c, LLVMBuildICmp(c->b, LLVMIntSLT, q, cg_i64(c, n_kblk - 1), ""));
    LLVMValueRef k0 = add(c, f->pc, cg_i64(c, f->g.KC));
    LLVMValueRef k1 = min_c(c, add(c, k0, cg_i64(c, f->g.KC)), cg_i64(c, p->K));
    if (pf_a) {
        LLVMValueRef base = add(c, f->a_off, mul_c(c, f->i0, p->sa_m));
        prefetch_runs(c, f->k->ptr[1], base, f->rows, p->sa_m, k0, k1, f->g.KC, p->ka_in, p->sa_k);
    }
    if (pf_b) { // the channel planes of the group's columns (ci, kh, kw)
        const dl_cg__im2col *im = p->im;
        int64_t kk = im->kH * im->kW;
        LLVMValueRef ci0 = LLVMBuildUDiv(c->b, f->c0, cg_i64(c, kk), "");
        LLVMValueRef ci1 = LLVMBuildUDiv(
            c->b, LLVMBuildSub(c->b, add(c, f->c0, ncols), cg_i64(c, 1), ""), cg_i64(c, kk), "");
        LLVMValueRef nch = add(c, LLVMBuildSub(c->b, ci1, ci0, ""), cg_i64(c, 1));
        LLVMValueRef base = add(c, f->b_off, mul_c(c, ci0, im->cs));
        prefetch_runs(c, f->k->ptr[2], base, nch, im->cs, k0, k1, f->g.KC, im->OH * im->OW, im->ns);
    }
    if_end(c, join);
}

// The K block of a prepacked product: KC, or all of a shorter K rounded up to 16 (the transposing
// pack's step), so that the packed buffer holds no rows that no K block reads (the sample
// transformer block's K = 64 weights would be half empty with AVX-512's KC of 128, three
// quarters with AVX2's 256). One K block either way: the sums are the same.
static int64_t prepack_kc(const gemm_blk *g, int64_t K) {
    int64_t k16 = (K + 15) / 16 * 16;
    return k16 < g->KC ? k16 : g->KC;
}

// The blocking of p's blocked kernel: the target's tiles, or AMX's (32 x 32 tiles, four C
// tiles; all of K in one block up to AMX_KC: packed A of a block 256 KiB, B of a group 512 KiB
// at most, in L2; four tiles of rows a block, 256 columns a group); with prepacked B, the K block
// prepack_kc makes of a short K (AMX's already ends at K rounded up to its tiles).
static gemm_blk kernel_blocking(cg *c, const gemm_prob *p, bool prepacked) {
    gemm_blk g = choose_blocking(c);
    if (use_amx(c, p)) {
        int64_t kc = (p->K + AMX_K - 1) / AMX_K * AMX_K;
        g = (gemm_blk){32, 32, kc < AMX_KC ? kc : AMX_KC, 4 * 32, 8 * 32};
    } else if (prepacked) {
        g.KC = prepack_kc(&g, p->K);
    }
    return g;
}

// 4-byte elements of one packed B panel: KC x NR floats, or KC / 2 x NR bfloat16 k pairs (the
// vdpbf16ps and AMX layouts).
static int64_t panel_elems(cg *c, const gemm_prob *p, const gemm_blk *g) {
    return use_amx(c, p) || use_bf16_dot(c, p, g) ? g->KC / 2 * g->NR : g->KC * g->NR;
}

// The blocked kernel of `p`; with pbuf != UINT32_MAX it reads B's panels from that PACKED or TEMP
// buffer (emit_prepack's layout) and runs only in the entry points `only` names.
static dl_status emit_float_k(cg *c, const gemm_prob *p, uint32_t pbuf, uint8_t only) {
    gemm_blk g = kernel_blocking(c, p, pbuf != UINT32_MAX);
    bool amx = use_amx(c, p);
    if (amx) {
        c->isa_used |= DLRT_ISA_AMXTILE | DLRT_ISA_AMXBF16;
    }
    if (p->nc_panels > 0) {
        g.NC = p->nc_panels * g.NR;
    }
    int64_t M = p->M, N = p->N, K = p->K;
    // Even blocks: as many row blocks (column groups) as MB (NC) needs, each as large as an even
    // share rounded up to whole tiles (panels), so that threads splitting the range get equal
    // work (M = 128: blocks of 72 and 56 rows, not 96 and 32). The sum over k does not depend on
    // the blocking.
    g.MB = even_block(M, g.MB, g.MR);
    if (p->nc_panels == 0 &&
        p->nb * ((M + g.MB - 1) / g.MB) * ((N + g.NC - 1) / g.NC) < MIN_UNITS) {
        g.NC /= 2;
    }
    // Several row blocks whose packed B (all of K, NC wide) would not fit SHARE_B_BYTES: half as
    // wide a group when that makes it fit (K = 2048), so that B is still packed once. (Prepacked
    // B, or B packed per call, pack_per_call, is packed by no row block: this is for a batched B
    // and the implicit GEMMs.)
    bool packs_b = pbuf == UINT32_MAX;
    int64_t kpad = (K + g.KC - 1) / g.KC * g.KC;
    if (packs_b && p->nc_panels == 0 && M > g.MB && g.NC / 2 >= g.NR &&
        kpad * g.NC * 4 > SHARE_B_BYTES && kpad * (g.NC / 2) * 4 <= SHARE_B_BYTES) {
        g.NC /= 2;
    }
    g.NC = even_block(N, g.NC, g.NR);
    // One row block of one batch in one column group: two groups, so that a second thread has
    // work (the CNN's fc1, 64 x 128 x 3136, ran whole on one thread). A thread that takes both
    // runs them as one (merged groups, below): one thread packs A once, as before.
    if (p->nc_panels == 0 && !p->pool && p->nb == 1 && M <= g.MB && N <= g.NC && N >= 2 * g.NR) {
        g.NC = ((N + 1) / 2 + g.NR - 1) / g.NR * g.NR;
    }
    // Pooled: groups of gcols columns, whole row pairs of the image (as many as fit 256 columns,
    // at least one), so that each pooling window lies in one group; NC covers one group.
    int64_t gcols = g.NC;
    if (p->pool) {
        int64_t pair = 2 * p->im->OW;
        gcols = pair * (256 / pair > 1 ? 256 / pair : 1);
        gcols = gcols < N ? gcols : N;
        // One image in one group and one row block (conv2 of the CNN at batch 1: 64 x 196 x
        // 288): half its row pairs a group, so that a second thread has work.
        if (p->nb == 1 && M <= g.MB && gcols >= N && N >= 2 * pair) {
            gcols = pair * ((N / pair + 1) / 2);
        }
        g.NC = (gcols + g.NR - 1) / g.NR * g.NR;
    }
    // K = 0: one empty K block, whose microkernel stores its zero accumulators through the
    // epilogue (y = beta * C, the bias, the fused members), as every other K does in its last.
    int64_t n_kblk = K > 0 ? (K + g.KC - 1) / g.KC : 1;
    // Row blocks that cannot share a packed B (all of K, NC wide, past SHARE_B_BYTES) pack it
    // once each: at most 16 tiles of rows (AVX2: 96) go in one block instead (a convolution's
    // weight gradient, 64 x 288 x 12544, packs its gathered image once, not twice).
    if (packs_b && M > g.MB && M <= 16 * g.MR && n_kblk * g.KC * g.NC * 4 > SHARE_B_BYTES) {
        g.MB = (M + g.MR - 1) / g.MR * g.MR;
    }
    int64_t nblk = (M + g.MB - 1) / g.MB;
    int64_t n_groups = (N + gcols - 1) / gcols;
    int64_t mr_e = M % g.MR;                   // rows of the last, partial tile
    int64_t last_rows = M - (nblk - 1) * g.MB; // rows of the last block
    int64_t tile_e = last_rows / g.MR;         // index of its partial tile
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, p->nb * nblk * n_groups, &k));
    k.only = only;
    fctx f;
    memset(&f, 0, sizeof f);
    if (pbuf != UINT32_MAX) {
        DL_TRY(cg_kernel_add_buf(c, &k, pbuf));
        f.pb = k.ptr[k.n_args - 1];
    }
    DL_TRY(cg_guard_open(c, &k));
    f.p = p;
    f.g = g;
    f.k = &k;
    f.vt = LLVMVectorType(c->t_f32, (unsigned)g.NR);
    f.valign = (unsigned)(g.NR * 4 < 64 ? g.NR * 4 : 64);
    f.amx = amx;
    f.bf = !amx && use_bf16_dot(c, p, &g);
    f.direct = !amx && !f.bf && !p->pool && epi_is_vec(c, p);
    // Shared A: when the packed A of every row block and K block fits SHARE_A_BYTES and some
    // row block is visited more than once (several column groups or batches), ap_all keeps it:
    // [nblk][n_kblk][MB * KC]; apk[ib] holds the A offset (batch) whose row block ib it has
    // (-1: none yet), so a row block is packed again only when A moves (a batched A).
    // Merged groups: one batch and one row block, so a chunk [begin, end) of the outer range is
    // a run of column groups; it runs as one group of their columns (A, all of K, is packed once
    // per chunk instead of once per group: one thread takes every group in one chunk). The same
    // sums in the same order: only the packing is shared.
    int64_t ncw = n_groups * g.NC;
    bool merge = !p->pool && p->nb == 1 && nblk == 1 && n_groups > 1 &&
                 ncw * (g.KC + g.MB) * 4 <= MERGE_BYTES;
    int64_t nc_group = gcols; // columns per outer iteration
    if (merge) {
        g.NC = ncw; // the scratch and packed B hold a chunk's columns
        f.g = g;
    }
    // With prepacked B the stack has no bp_all: A may take its room too (M = 256, K = 1024:
    // 1.1 MiB, packed once per thread instead of once per column group).
    int64_t share_a_max = f.pb ? SHARE_A_BYTES + SHARE_B_BYTES : SHARE_A_BYTES;
    bool share_a =
        !merge && (n_groups > 1 || p->nb > 1) && nblk * n_kblk * g.MB * g.KC * 4 <= share_a_max;
    LLVMValueRef ap_all = NULL, apk = NULL;
    if (share_a) {
        ap_all = entry_alloca(c, nblk * n_kblk * g.MB * g.KC);
        apk = cg_entry_alloca(c, &k, c->t_i64, (size_t)nblk);
    }
    f.ap = share_a ? NULL : entry_alloca(c, g.MB * g.KC); // ap: [MB / MR, KC, MR]
    f.scr = entry_alloca(c, g.MB * g.NC);                 // scratch: [MB, NC]
    // Shared B: a thread's consecutive row blocks of one column group use the same packed B, so
    // when the whole group fits (K x NC floats, at most SHARE_B_BYTES) every K block of it is
    // packed once, by the first of those row blocks, into bp_all: [n_kblk][NC / NR, KC, NR].
    // `packed` holds the (batch, group) whose panels bp_all has (-1: none yet).
    bool share = !f.pb && nblk > 1 && n_kblk * g.KC * g.NC * 4 <= SHARE_B_BYTES;
    LLVMValueRef bp_all = f.pb ? NULL : entry_alloca(c, (share ? n_kblk : 1) * g.NC * g.KC);
    LLVMValueRef packed = NULL;
    if (share) {
        packed = cg_entry_alloca(c, &k, c->t_i64, 1);
        LLVMBuildStore(c->b, cg_i64(c, -1), packed);
    }
    if (p->ka_in > 0) {
        f.tab_a = cg_entry_alloca(c, &k, c->t_i64, g.KC);
    }
    if (p->im) {
        f.tab_h = cg_entry_alloca(c, &k, c->t_i32, g.KC);
        f.tab_w = cg_entry_alloca(c, &k, c->t_i32, g.KC);
        f.tab_b = cg_entry_alloca(c, &k, c->t_i64, g.KC);
    }

    if (amx) {
        amx_config(c);
    }
    if (share_a) { // after every alloca: the loop leaves the entry block
        cg_loop li;
        LLVMValueRef ii = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, nblk), "apk");
        LLVMBuildStore(c->b, cg_i64(c, -1), LLVMBuildInBoundsGEP2(c->b, c->t_i64, apk, &ii, 1, ""));
        cg_for_end(c, &li);
    }
    // t: [batch, n_groups, nblk] (a chunk of t takes whole runs of one group's row blocks)
    cg_loop lt;
    LLVMValueRef t = cg_for_begin(
        c, &lt, k.begin, merge ? min_c(c, k.end, add(c, k.begin, cg_i64(c, 1))) : k.end, "t");
    LLVMValueRef bg = LLVMBuildUDiv(c->b, t, cg_i64(c, nblk), "");
    LLVMValueRef bi = LLVMBuildUDiv(c->b, bg, cg_i64(c, n_groups), "");
    LLVMValueRef jg = LLVMBuildURem(c->b, bg, cg_i64(c, n_groups), "");
    LLVMValueRef ib = LLVMBuildURem(c->b, t, cg_i64(c, nblk), "");
    LLVMValueRef need_pack = NULL;
    if (share) {
        LLVMValueRef have = LLVMBuildLoad2(c->b, c->t_i64, packed, "");
        need_pack = LLVMBuildICmp(c->b, LLVMIntNE, have, bg, "");
        LLVMBuildStore(c->b, bg, packed);
    }
    batch_offsets(c, p, bi, &f.a_off, &f.b_off, &f.bias_off);
    LLVMValueRef need_a = NULL;
    if (share_a) {
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(c->b, c->t_i64, apk, &ib, 1, "");
        LLVMValueRef have = LLVMBuildLoad2(c->b, c->t_i64, slot, "");
        need_a = LLVMBuildICmp(c->b, LLVMIntNE, have, f.a_off, "");
        LLVMBuildStore(c->b, f.a_off, slot);
    }
    int64_t PH = p->pool ? p->im->OH / 2 : 0, PW = p->pool ? p->im->OW / 2 : 0;
    f.y_off = mul_c(c, bi, p->pool ? M * PH * PW : M * N);
    f.i0 = mul_c(c, ib, g.MB);
    f.rows = min_c(c, cg_i64(c, g.MB), LLVMBuildSub(c->b, cg_i64(c, M), f.i0, ""));
    LLVMValueRef n_tiles = LLVMBuildUDiv(c->b, f.rows, cg_i64(c, g.MR), "");
    LLVMValueRef is_last = LLVMBuildICmp(c->b, LLVMIntEQ, ib, cg_i64(c, nblk - 1), "");

    // The NC column group jg
    f.c0 = mul_c(c, jg, nc_group);
    LLVMValueRef ncols = min_c(c, cg_i64(c, nc_group), LLVMBuildSub(c->b, cg_i64(c, N), f.c0, ""));
    if (merge) { // groups begin .. end - 1 (jg = t = begin)
        ncols = LLVMBuildSub(c->b, min_c(c, mul_c(c, k.end, nc_group), cg_i64(c, N)), f.c0, "");
    }
    f.ncols = ncols;
    f.last_group = LLVMBuildICmp(c->b, LLVMIntEQ, jg, cg_i64(c, n_groups - 1), "");
    f.nr_mid = gcols % g.NR;
    f.nr_last = (N - (n_groups - 1) * gcols) % g.NR;
    LLVMValueRef n_sub =
        LLVMBuildUDiv(c->b, add(c, ncols, cg_i64(c, g.NR - 1)), cg_i64(c, g.NR), "");
    // K blocks
    cg_loop lq;
    LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), cg_i64(c, n_kblk), "kb");
    f.pc = mul_c(c, q, g.KC);
    f.kc = min_c(c, cg_i64(c, g.KC), LLVMBuildSub(c->b, cg_i64(c, K), f.pc, ""));
    if (p->ka_in > 0) {
        emit_ka_rows(c, &f);
    }
    emit_prefetch_next(c, &f, q, n_kblk, ncols);
    if (share_a) {
        f.ap = fptr(c, ap_all, mul_c(c, add(c, mul_c(c, ib, n_kblk), q), g.MB * g.KC));
        LLVMBasicBlockRef join = if_begin(c, need_a);
        emit_pack_a_block(c, &f, n_tiles, is_last, tile_e, mr_e);
        if_end(c, join);
    } else {
        emit_pack_a_block(c, &f, n_tiles, is_last, tile_e, mr_e);
    }
    if (p->im && !im_rows_contiguous(c, &f) && !im_taps_contiguous(&f)) {
        emit_im_rows(c, &f); // the gathered pack's row tables
    }
    f.bp = bp_all;
    if (f.pb) { // the group's panels of K block q, packed by emit_prepack
        int64_t n_pan = (N + g.NR - 1) / g.NR;
        LLVMValueRef pan = LLVMBuildUDiv(c->b, f.c0, cg_i64(c, g.NR), "");
        f.bp = fptr(c, f.pb, mul_c(c, add(c, mul_c(c, q, n_pan), pan), panel_elems(c, p, &g)));
    } else if (share) {
        f.bp = fptr(c, bp_all, mul_c(c, q, g.KC * g.NC));
        LLVMBasicBlockRef join = if_begin(c, need_pack);
        for_panels(c, &f, n_sub, emit_pack_b);
        if_end(c, join);
    } else {
        for_panels(c, &f, n_sub, emit_pack_b);
    }
    cg_loop ls;
    f.sub = cg_for_begin(c, &ls, cg_i64(c, 0), n_sub, "sub");
    int64_t nr_e = N % g.NR;
    // A partial panel at most half full runs its microkernel half as wide. `full` (NULL: every
    // panel at full width) tells the others apart: y's last panel (N = 196, a convolution's 14 x
    // 14 positions, computed 224 columns at full width, 208 so), or in a pooled product a
    // group's last panel when every partial one (nr_mid, nr_last) is at most half full (conv2 of
    // the CNN, 196 columns a group).
    LLVMValueRef full = NULL;
    if (!f.bf && !f.amx && p->pool && (f.nr_mid > 0 || f.nr_last > 0) && f.nr_mid <= g.NR / 2 &&
        f.nr_last <= g.NR / 2) {
        LLVMValueRef end = mul_c(c, add(c, f.sub, cg_i64(c, 1)), g.NR);
        full = LLVMBuildICmp(c->b, LLVMIntSLE, end, f.ncols, "");
    } else if (!f.bf && !f.amx && !p->pool && nr_e > 0 && nr_e <= g.NR / 2) {
        LLVMValueRef j0 = add(c, f.c0, mul_c(c, f.sub, g.NR));
        full = LLVMBuildICmp(c->b, LLVMIntSLT, j0, cg_i64(c, N - nr_e), "");
    }
    if (full) {
        fctx fh = f;
        fh.vt = LLVMVectorType(c->t_f32, (unsigned)(g.NR / 2));
        if_else ie;
        if_else_begin(c, &ie, full);
        emit_tiles(c, &f, n_tiles, is_last, tile_e, mr_e);
        if_else_mid(c, &ie);
        emit_tiles(c, &fh, n_tiles, is_last, tile_e, mr_e);
        if_else_end(c, &ie);
    } else {
        emit_tiles(c, &f, n_tiles, is_last, tile_e, mr_e);
    }
    cg_for_end(c, &ls);
    cg_for_end(c, &lq);
    if (!f.direct) {
        for_panels(c, &f, n_sub, emit_epilogue);
    }
    if (p->pool) { // the group's pooled rows of the block's rows, from the scratch into y
        int64_t pair = 2 * p->im->OW;
        LLVMValueRef ph0 = LLVMBuildUDiv(c->b, f.c0, cg_i64(c, pair), "");
        LLVMValueRef ph1 =
            min_c(c, LLVMBuildUDiv(c->b, add(c, f.c0, ncols), cg_i64(c, pair), ""), cg_i64(c, PH));
        cg_loop lr, lh;
        LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), f.rows, "prow");
        LLVMValueRef yr = add(c, f.y_off, mul_c(c, add(c, f.i0, r), PH * PW));
        LLVMValueRef ph = cg_for_begin(c, &lh, ph0, ph1, "ph");
        LLVMValueRef sc = LLVMBuildSub(c->b, mul_c(c, ph, pair), f.c0, ""); // group column
        dl_cg__pool2_row(c, f.scr, add(c, mul_c(c, r, g.NC), sc), p->im->OW, k.ptr[0],
                         add(c, yr, mul_c(c, ph, PW)), PW);
        cg_for_end(c, &lh);
        cg_for_end(c, &lr);
    }
    cg_for_end(c, &lt);
    if (amx) {
        amx_release(c);
    }
    return cg_kernel_end(c, &k);
}

// Prepacked weights (artifact format 8). A product whose B is a param or constant packs the
// same panels at every call; in the infer entry it instead reads them from a PACKED buffer that
// emit_prepack's kernel (flagged DLRT_KERNEL_F_PREPACK) fills, and that the runtime runs only when
// the params may have changed since it last did (MLAS prepacks constant weights so): the batch-256
// MLP's inference spent 12-13 % of its time packing its weights. The train step keeps the kernel
// that packs (its params change every step). The panels are emit_pack_b's, so y's bytes are the
// same either way.
// The value p's prepack kernel packs: B when it is a param or constant, the weight of a Cast
// folded into the prepack (c->cast_pp), else NULL.
static dl_ir_value *prepack_src(const cg *c, const gemm_prob *p) {
    if (p->b->kind == DL_IR_VAL_PARAM || p->b->kind == DL_IR_VAL_CONST) {
        return p->b;
    }
    const dl_ir_node *d = p->b->def;
    return d && c->cast_pp && c->cast_pp[d->id] ? d->inputs[0] : NULL;
}

// Whether p's B can be prepacked (c->prepack aside); with B a weight's Cast to bfloat16, only by
// the bf16 instructions' packs (use_amx, use_bf16_dot), which round as they load.
static bool prepackable(cg *c, const gemm_prob *p, const dl_ir_value *src) {
    bool one_b = true; // every batch reads the same B (broadcast)
    for (int32_t d = 0; d < p->br; d++) {
        one_b = one_b && p->bbs[d] == 0;
    }
    if (p->K <= 0 || p->im || p->pool || !one_b || !src) {
        return false;
    }
    gemm_blk g = kernel_blocking(c, p, true);
    return src == p->b || use_amx(c, p) || use_bf16_dot(c, p, &g);
}

static bool prepack_b(cg *c, const gemm_prob *p) {
    return c->prepack && prepackable(c, p, prepack_src(c, p));
}

// Rows of a K block that one iteration of a pack kernel packs into every panel (emit_prepack).
#define PACK_ROWS 16

// emit_pack_b of panel `pan` (of n_pan) at f's rows: the last one nr_e wide when nr_e > 0.
static void pack_panel(cg *c, const fctx *f, LLVMValueRef pan, int64_t n_pan, int64_t nr_e) {
    if (nr_e == 0) {
        emit_pack_b(c, f, f->g.NR);
    } else if (n_pan == 1) {
        emit_pack_b(c, f, nr_e);
    } else {
        if_else ie;
        if_else_begin(c, &ie, LLVMBuildICmp(c->b, LLVMIntSLT, pan, cg_i64(c, n_pan - 1), ""));
        emit_pack_b(c, f, f->g.NR);
        if_else_mid(c, &ie);
        emit_pack_b(c, f, nr_e);
        if_else_end(c, &ie);
    }
}

// The prepack kernel of p's B into buffer pbuf (with `only` CG_ENTRY_INFER a PACKED buffer of a
// weight, else the per-call pack into a TEMP one): [n_kblk][ceil(N / NR)][panel] (emit_pack_b's
// panels, in the float32, vdpbf16ps or AMX layout: zero past N; rows past a short last block's kc
// are not read), its iterations as the comment below says.
static dl_status emit_prepack(cg *c, const gemm_prob *p, uint32_t pbuf, uint8_t only) {
    gemm_blk g = kernel_blocking(c, p, true);
    int64_t n_pan = (p->N + g.NR - 1) / g.NR, n_kblk = (p->K + g.KC - 1) / g.KC;
    int64_t nr_e = p->N % g.NR;
    bool per_call = only != CG_ENTRY_INFER; // else a PACKED buffer of a weight
    dl_strbuf name = {0};
    dl_strbuf_printf(&name, "%s.%s", p->b->name, per_call ? "pack" : "prepack");
    if (name.oom || !DL_VEC_PUSH(&c->strs, name.data)) {
        dl_strbuf_fini(&name);
        return DL_ERR_NOMEM;
    }
    dl_ir_value *src = per_call ? p->b : prepack_src(c, p);
    uint32_t bufs[2] = {pbuf, c->value_buf[src->id]};
    // The iterations: with B's rows contiguous (sb_n == 1, float32 layout), PACK_ROWS rows of a
    // K block across every panel (each row read as one run: one panel per iteration read 64
    // bytes from each of KC rows 4 KiB apart, a miss to memory per line, 0.52-0.65 ms for a
    // 1024 x 1024 weight on Zen 3); with its columns contiguous (sb_k == 1), one panel over
    // every K block (its NR rows read whole); else one panel of one K block.
    bool amx = use_amx(c, p), bf = !amx && use_bf16_dot(c, p, &g);
    bool rows = !amx && !bf && p->sb_n == 1, cols = !amx && !bf && !rows && p->sb_k == 1;
    int64_t nrc = g.KC / PACK_ROWS;
    int64_t range = rows ? n_kblk * nrc : cols ? n_pan : n_kblk * n_pan;
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, 2, 1, range, name.data, &k));
    k.flags = per_call ? 0 : DLRT_KERNEL_F_PREPACK;
    k.only = only;
    k.ops = per_call ? "Pack" : "Prepack";
    k.ptr[0] = cg_kernel_arg(c, &k, 0);
    k.ptr[2] = cg_kernel_arg(c, &k, 1); // emit_pack_b reads B where a product's kernel has it
    fctx f;
    memset(&f, 0, sizeof f);
    f.p = p;
    f.g = g;
    f.k = &k;
    f.vt = LLVMVectorType(c->t_f32, (unsigned)g.NR);
    f.valign = (unsigned)(g.NR * 4 < 64 ? g.NR * 4 : 64);
    f.b_off = cg_i64(c, 0);
    f.sub = cg_i64(c, 0);
    f.amx = amx;
    f.bf = bf;
    f.b_cvt = src != p->b;
    DL_ASSERT(!f.b_cvt || f.amx || f.bf);
    int64_t pe = panel_elems(c, p, &g);
    cg_loop lt, li;
    LLVMValueRef t = cg_for_begin(c, &lt, k.begin, k.end, "t");
    if (rows) { // rows kl .. kl + PACK_ROWS of K block kb (fewer past its kc), every panel
        LLVMValueRef kb = LLVMBuildUDiv(c->b, t, cg_i64(c, nrc), "");
        LLVMValueRef kl = mul_c(c, LLVMBuildURem(c->b, t, cg_i64(c, nrc), ""), PACK_ROWS);
        LLVMValueRef k0 = mul_c(c, kb, g.KC);
        LLVMValueRef kc = min_c(c, cg_i64(c, g.KC), LLVMBuildSub(c->b, cg_i64(c, p->K), k0, ""));
        f.pc = add(c, k0, kl);
        f.kc = min_c(c, cg_i64(c, PACK_ROWS), LLVMBuildSub(c->b, kc, kl, ""));
        LLVMBasicBlockRef join =
            if_begin(c, LLVMBuildICmp(c->b, LLVMIntSGT, f.kc, cg_i64(c, 0), ""));
        LLVMValueRef pan = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, n_pan), "pan");
        f.j0 = mul_c(c, pan, g.NR);
        f.bp = fptr(c, k.ptr[0],
                    add(c, mul_c(c, add(c, mul_c(c, kb, n_pan), pan), pe), mul_c(c, kl, g.NR)));
        pack_panel(c, &f, pan, n_pan, nr_e);
        cg_for_end(c, &li);
        if_end(c, join);
    } else if (cols) { // panel t of every K block
        f.j0 = mul_c(c, t, g.NR);
        LLVMValueRef kb = cg_for_begin(c, &li, cg_i64(c, 0), cg_i64(c, n_kblk), "kb");
        f.pc = mul_c(c, kb, g.KC);
        f.kc = min_c(c, cg_i64(c, g.KC), LLVMBuildSub(c->b, cg_i64(c, p->K), f.pc, ""));
        f.bp = fptr(c, k.ptr[0], mul_c(c, add(c, mul_c(c, kb, n_pan), t), pe));
        pack_panel(c, &f, t, n_pan, nr_e);
        cg_for_end(c, &li);
    } else {
        LLVMValueRef pan = LLVMBuildURem(c->b, t, cg_i64(c, n_pan), "");
        f.pc = mul_c(c, LLVMBuildUDiv(c->b, t, cg_i64(c, n_pan), ""), g.KC);
        f.kc = min_c(c, cg_i64(c, g.KC), LLVMBuildSub(c->b, cg_i64(c, p->K), f.pc, ""));
        f.j0 = mul_c(c, pan, g.NR);
        f.bp = fptr(c, k.ptr[0], mul_c(c, t, pe));
        pack_panel(c, &f, pan, n_pan, nr_e);
    }
    cg_for_end(c, &lt);
    return cg_kernel_end(c, &k);
}

// Whether p's B is packed at every call by a kernel of its own, into a TEMP buffer that p's
// kernel then reads as it reads prepacked weights: a product of several row blocks whose packed
// B (all of K, one column group wide) would not fit SHARE_B_BYTES on the stack. Its kernel would
// halve its column groups (or pack B once per row block), and pack A once per group: the
// 2048 x 2048 x 2048 product at 76-77 GFLOP/s where OpenBLAS ran 87-92 (AVX2, Zen 3); packed by
// the pack kernel, in parallel and once, 85-87. Also a product of at least PPC_ROWS rows whose
// packed B group passes PPC_BYTES: its kernel packs B once per chunk of the parallel range, and
// 2 threads cut the range into ~10 chunks (the executor's guided cut), so B was packed ~5 times
// as often as on 1 thread (the transformer's 1024-row products: 2-thread busy time 6.4-6.6 ->
// 5.8-5.9 ms each, the step 41.5 -> 38.1 ms median, 7 rounds; its 1-thread step and the
// MLPs' and CNN's the same within the noise; a 384^3 product 3 % slower on 1 thread, 5 % faster
// on 2, so not below PPC_ROWS). Smaller products keep packing B themselves: B packed into L2
// just before its tiles read it, not written to memory and read back.
#define PPC_ROWS  512
#define PPC_BYTES (256 << 10)

static bool pack_per_call(cg *c, const gemm_prob *p) {
    if (p->nc_panels > 0 || !prepackable(c, p, p->b)) {
        return false;
    }
    gemm_blk g = kernel_blocking(c, p, false);
    int64_t kpad = (p->K + g.KC - 1) / g.KC * g.KC;
    int64_t ncols = (p->N + g.NR - 1) / g.NR * g.NR; // a B narrower than one group is that wide
    int64_t group_bytes = kpad * (ncols < g.NC ? ncols : g.NC) * 4;
    return p->M > g.MB &&
           (group_bytes > SHARE_B_BYTES || (p->M >= PPC_ROWS && group_bytes > PPC_BYTES));
}

// Bytes of the buffer holding every packed panel of p's B (K > 0).
static uint64_t packed_b_bytes(cg *c, const gemm_prob *p) {
    gemm_blk g = kernel_blocking(c, p, true);
    return (uint64_t)((p->K + g.KC - 1) / g.KC) * (uint64_t)((p->N + g.NR - 1) / g.NR) *
           (uint64_t)panel_elems(c, p, &g) * sizeof(float);
}

// The blocked kernel of `p`: with prepacked B, the prepack kernel and the infer kernel that reads
// its buffer, then (a model with a train step) the train step's own kernel; a
// B packed per call, its pack kernel and the kernel that reads it.
static dl_status emit_float(cg *c, const gemm_prob *p) {
    uint8_t rest = CG_ENTRY_BOTH; // the entries left to the kernel(s) below
    if (prepack_b(c, p)) {
        uint32_t pbuf;
        DL_TRY(cg_extra_buffer(c, packed_b_bytes(c, p), DLRT_BUF_PACKED, NULL, &pbuf));
        DL_TRY(emit_prepack(c, p, pbuf, CG_ENTRY_INFER));
        DL_TRY(emit_float_k(c, p, pbuf, CG_ENTRY_INFER));
        if (!(c->m->has_backward && c->m->train)) {
            return DL_OK;
        }
        rest = CG_ENTRY_TRAIN;
    }
    if (!pack_per_call(c, p)) {
        return emit_float_k(c, p, UINT32_MAX, rest);
    }
    uint32_t tbuf;
    DL_TRY(cg_extra_buffer(c, packed_b_bytes(c, p), DLRT_BUF_TEMP, NULL, &tbuf));
    DL_TRY(emit_prepack(c, p, tbuf, rest));
    return emit_float_k(c, p, tbuf, rest);
}

// ---------------------------------------------------------------------------------------------
// Convolutions as implicit GEMMs: the B panel gathered straight from the image.

// <n x i32> constant vector of `v`.
static LLVMValueRef ivec_c(cg *c, unsigned n, int64_t v) {
    LLVMValueRef e[MAX_NR];
    DL_ASSERT(n <= MAX_NR);
    for (unsigned l = 0; l < n; l++) {
        e[l] = cg_i32(c, (int32_t)v);
    }
    return LLVMConstVector(e, n);
}

static LLVMValueRef ivec_splat(cg *c, unsigned n, LLVMValueRef s64) {
    LLVMTypeRef vt = LLVMVectorType(c->t_i32, n);
    return splat(c, vt, LLVMBuildTrunc(c->b, s64, c->t_i32, ""));
}

// Lanes of a gathered vector: `num` = o*a + b + t*cc along dim i (i32 lanes) -> valid lanes and
// the index num / d inside the dim.
static LLVMValueRef im_dim(cg *c, const dl_cg__im2col *im, int i, LLVMValueRef num, unsigned n,
                           LLVMValueRef *valid) {
    int64_t size = i == 0 ? im->H : im->W, d = im->d[i];
    LLVMValueRef ok =
        LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, num, ivec_c(c, n, 0), ""),
                     LLVMBuildICmp(c->b, LLVMIntSLT, num, ivec_c(c, n, size * d), ""), "");
    if (d == 1) {
        *valid = LLVMBuildAnd(c->b, *valid, ok, "");
        return num;
    }
    LLVMValueRef rem = LLVMBuildSRem(c->b, num, ivec_c(c, n, d), "");
    ok = LLVMBuildAnd(c->b, ok, LLVMBuildICmp(c->b, LLVMIntEQ, rem, ivec_c(c, n, 0), ""), "");
    *valid = LLVMBuildAnd(c->b, *valid, ok, "");
    return LLVMBuildSDiv(c->b, num, ivec_c(c, n, d), "");
}

// A (scalar) tap or position index split into its parts: q = (u * n1 + v) * n2 + w.
// q: i64, or a vector of i32 lanes.
static void split3(cg *c, LLVMValueRef q, int64_t n1, int64_t n2, LLVMValueRef *u, LLVMValueRef *v,
                   LLVMValueRef *w) {
    LLVMTypeRef t = LLVMTypeOf(q);
    bool is_vec = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
    LLVMValueRef c1 = is_vec ? ivec_c(c, LLVMGetVectorSize(t), n1) : cg_i64(c, n1);
    LLVMValueRef c2 = is_vec ? ivec_c(c, LLVMGetVectorSize(t), n2) : cg_i64(c, n2);
    LLVMValueRef r = LLVMBuildUDiv(c->b, q, c2, "");
    *w = LLVMBuildURem(c->b, q, c2, "");
    *u = LLVMBuildUDiv(c->b, r, c1, "");
    *v = LLVMBuildURem(c->b, r, c1, "");
}

static LLVMValueRef vmul_c(cg *c, LLVMValueRef v, int64_t k) {
    return k == 1 ? v : LLVMBuildMul(c->b, v, ivec_c(c, LLVMGetVectorSize(LLVMTypeOf(v)), k), "");
}

static LLVMValueRef vadd(cg *c, LLVMValueRef x, LLVMValueRef y) {
    return LLVMBuildAdd(c->b, x, y, "");
}

static LLVMValueRef iptr(cg *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(c->b, t, base, &idx, 1, "");
}

// The scalar parts of the k rows [pc, pc + kc) of the gathered B: tap row and column offsets
// (hs, ws) and the channel (taps by position) or image (positions by taps) offset.
static void emit_im_rows(cg *c, const fctx *f) {
    const dl_cg__im2col *im = f->p->im;
    cg_loop lk;
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "ir");
    LLVMValueRef kq = add(c, f->pc, kk);
    LLVMValueRef hs, ws, bases;
    if (im->kind == DL_CG__IM2COL_TAPS_BY_POS) { // k = (ci*kH + kh)*kW + kw
        LLVMValueRef ci, kh, kw;
        split3(c, kq, im->kH, im->kW, &ci, &kh, &kw);
        hs = mul_c(c, kh, im->cc[0]);
        ws = mul_c(c, kw, im->cc[1]);
        bases = mul_c(c, ci, im->cs);
    } else { // k = (n*OH + oh)*OW + ow
        LLVMValueRef nn, oh, ow;
        split3(c, kq, im->OH, im->OW, &nn, &oh, &ow);
        hs = add(c, mul_c(c, oh, im->a[0]), cg_i64(c, im->b[0]));
        ws = add(c, mul_c(c, ow, im->a[1]), cg_i64(c, im->b[1]));
        bases = mul_c(c, nn, im->ns);
    }
    LLVMBuildStore(c->b, LLVMBuildTrunc(c->b, hs, c->t_i32, ""), iptr(c, c->t_i32, f->tab_h, kk));
    LLVMBuildStore(c->b, LLVMBuildTrunc(c->b, ws, c->t_i32, ""), iptr(c, c->t_i32, f->tab_w, kk));
    LLVMBuildStore(c->b, bases, iptr(c, c->t_i64, f->tab_b, kk));
    cg_for_end(c, &lk);
}

// The panel's column lanes j0 + l (i32), and in *live the constant mask of the lanes l < nr.
static LLVMValueRef panel_lanes(cg *c, const fctx *f, int64_t nr, LLVMValueRef *live) {
    unsigned n = (unsigned)f->g.NR;
    LLVMValueRef lanes[MAX_NR], lmask[MAX_NR];
    for (unsigned l = 0; l < n; l++) {
        lanes[l] = cg_i32(c, (int32_t)l);
        lmask[l] = LLVMConstInt(c->t_i1, (int64_t)l < nr, 0);
    }
    *live = LLVMConstVector(lmask, n);
    return vadd(c, ivec_splat(c, n, f->j0), LLVMConstVector(lanes, n));
}

// A convolution's B (taps by positions) whose tap rows are consecutive elements of x: unit
// strides and dilations, output rows as wide as the image's (a stride-1 "same" convolution).
static bool im_taps_contiguous(const fctx *f) {
    const dl_cg__im2col *im = f->p->im;
    return im && !f->bf && im->kind == DL_CG__IM2COL_TAPS_BY_POS && im->a[0] == 1 &&
           im->a[1] == 1 && im->d[0] == 1 && im->d[1] == 1 && im->OW == im->W;
}

// bp[sub][k][l] for im_taps_contiguous, tap by tap: row k = ci*T + t (T = kH*kW taps) of the
// panel reads x[n, ci] at j0 + l shifted by the tap's (hs, ws), valid where the shifted position
// stays inside the image. The valid lanes and the shift depend on the tap alone, so they are
// computed once per tap (not once per row: T times fewer vector compares, the bulk of a row's
// work), then each of the tap's rows in the K block is one masked load (at +ci*cs) and one
// store. The same values land in the same places as emit_pack_b_im2col's rows.
static void emit_pack_b_im_taps(cg *c, const fctx *f, int64_t nr) {
    const dl_cg__im2col *im = f->p->im;
    unsigned n = (unsigned)f->g.NR;
    int64_t T = im->kH * im->kW;
    LLVMValueRef live;
    LLVMValueRef jv = panel_lanes(c, f, nr, &live);
    LLVMValueRef hv =
        vadd(c, LLVMBuildUDiv(c->b, jv, ivec_c(c, n, im->OW), ""), ivec_c(c, n, im->b[0]));
    LLVMValueRef wv =
        vadd(c, LLVMBuildURem(c->b, jv, ivec_c(c, n, im->OW), ""), ivec_c(c, n, im->b[1]));
    LLVMValueRef dst0 = mul_c(c, f->sub, f->g.KC * f->g.NR);
    LLVMValueRef kend = add(c, f->pc, f->kc); // rows [pc, kend) of B in this block
    cg_loop lt, lc;
    LLVMValueRef t = cg_for_begin(c, &lt, cg_i64(c, 0), cg_i64(c, T), "tap");
    LLVMValueRef hs = mul_c(c, LLVMBuildUDiv(c->b, t, cg_i64(c, im->kW), ""), im->cc[0]);
    LLVMValueRef ws = mul_c(c, LLVMBuildURem(c->b, t, cg_i64(c, im->kW), ""), im->cc[1]);
    LLVMValueRef valid = live;
    (void)im_dim(c, im, 0, vadd(c, ivec_splat(c, n, hs), hv), n, &valid);
    (void)im_dim(c, im, 1, vadd(c, ivec_splat(c, n, ws), wv), n, &valid);
    // x offset of lane l on row (ci, t): b_off + ci*cs + (j0 + l) + (b0 + hs)*W + b1 + ws. The
    // first lane's pointer may lie outside x (only valid lanes are read): no inbounds.
    LLVMValueRef o0 =
        add(c, add(c, f->b_off, f->j0),
            add(c, mul_c(c, hs, im->W), add(c, ws, cg_i64(c, im->b[0] * im->W + im->b[1]))));
    // the tap's rows in the block: ci from ceil((pc - t) / T) (0 when pc <= t) while
    // ci*T + t < kend
    LLVMValueRef after = LLVMBuildICmp(c->b, LLVMIntUGT, f->pc, t, "");
    LLVMValueRef ci_lo = LLVMBuildSelect(
        c->b, after,
        LLVMBuildUDiv(c->b, add(c, LLVMBuildSub(c->b, f->pc, t, ""), cg_i64(c, T - 1)),
                      cg_i64(c, T), ""),
        cg_i64(c, 0), "");
    LLVMValueRef within = LLVMBuildICmp(c->b, LLVMIntUGT, kend, t, "");
    LLVMValueRef ci_hi = LLVMBuildSelect(
        c->b, within,
        LLVMBuildUDiv(c->b, add(c, LLVMBuildSub(c->b, kend, t, ""), cg_i64(c, T - 1)), cg_i64(c, T),
                      ""),
        cg_i64(c, 0), "");
    LLVMValueRef ci = cg_for_begin(c, &lc, ci_lo, ci_hi, "tap_ci");
    LLVMValueRef o = add(c, o0, mul_c(c, ci, im->cs));
    LLVMValueRef v =
        cg_masked_load(c, f->vt, LLVMBuildGEP2(c->b, c->t_f32, f->k->ptr[2], &o, 1, ""), valid);
    LLVMValueRef kk = LLVMBuildSub(c->b, add(c, mul_c(c, ci, T), t), f->pc, "");
    store_vec(c, v, fptr(c, f->bp, add(c, dst0, mul_c(c, kk, f->g.NR))), f->valign);
    cg_for_end(c, &lc);
    cg_for_end(c, &lt);
}

// bp[sub][k][l] = B[pc + k, j0 + l] gathered from the image (zero outside it and for l >= nr),
// k in [0, kc). Row k contributes scalars (its tap or position), column j0 + l the lanes: each
// row is one masked gather of NR lanes, offsets in i32 inside an image (dl_cg__conv_gemm_ok).
static void emit_pack_b_im2col(cg *c, const fctx *f, int64_t nr) {
    const gemm_prob *p = f->p;
    const dl_cg__im2col *im = p->im;
    if (im_taps_contiguous(f)) {
        emit_pack_b_im_taps(c, f, nr);
        return;
    }
    unsigned n = (unsigned)f->g.NR;
    bool taps_by_pos = im->kind == DL_CG__IM2COL_TAPS_BY_POS;
    // Column lanes: j = j0 + l.
    LLVMValueRef live;
    LLVMValueRef jv = panel_lanes(c, f, nr, &live);
    LLVMValueRef hv, wv, basev; // per-lane parts of the tap row, column and channel offset
    if (taps_by_pos) {          // j = oh*OW + ow
        LLVMValueRef oh = LLVMBuildUDiv(c->b, jv, ivec_c(c, n, im->OW), "");
        LLVMValueRef ow = LLVMBuildURem(c->b, jv, ivec_c(c, n, im->OW), "");
        hv = vadd(c, vmul_c(c, oh, im->a[0]), ivec_c(c, n, im->b[0]));
        wv = vadd(c, vmul_c(c, ow, im->a[1]), ivec_c(c, n, im->b[1]));
        basev = ivec_c(c, n, 0);
    } else { // j = (ci*kH + kh)*kW + kw
        LLVMValueRef ci, kh, kw;
        split3(c, jv, im->kH, im->kW, &ci, &kh, &kw);
        hv = vmul_c(c, kh, im->cc[0]);
        wv = vmul_c(c, kw, im->cc[1]);
        basev = vmul_c(c, ci, im->cs);
    }
    LLVMValueRef dst0 = mul_c(c, f->sub, f->g.KC * f->g.NR);
    LLVMValueRef offv = NULL; // lane offsets of the panel when no division is needed
    if (im->d[0] == 1 && im->d[1] == 1) {
        offv = vadd(c, basev, vadd(c, vmul_c(c, hv, im->W), wv));
    }
    static const char gname[] = "llvm.masked.gather";
    unsigned gid = LLVMLookupIntrinsicID(gname, sizeof gname - 1);
    LLVMTypeRef gtys[2] = {f->vt, LLVMVectorType(c->t_ptr, n)};
    cg_loop lk;
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), f->kc, "pb");
    // the row's scalar parts (i64), from emit_im_rows's table
    LLVMValueRef hs = LLVMBuildSExt(
        c->b, LLVMBuildLoad2(c->b, c->t_i32, iptr(c, c->t_i32, f->tab_h, kk), ""), c->t_i64, "");
    LLVMValueRef ws = LLVMBuildSExt(
        c->b, LLVMBuildLoad2(c->b, c->t_i32, iptr(c, c->t_i32, f->tab_w, kk), ""), c->t_i64, "");
    LLVMValueRef bases = LLVMBuildLoad2(c->b, c->t_i64, iptr(c, c->t_i64, f->tab_b, kk), "");
    LLVMValueRef valid = live;
    LLVMValueRef ih = im_dim(c, im, 0, vadd(c, ivec_splat(c, n, hs), hv), n, &valid);
    LLVMValueRef iw = im_dim(c, im, 1, vadd(c, ivec_splat(c, n, ws), wv), n, &valid);
    LLVMValueRef v;
    LLVMValueRef base = add(c, f->b_off, bases);
    // Masked-off lanes are not read; their offsets are plain arithmetic (no inbounds). With
    // no stride division the lane offsets are the panel's (offv), the row adds a scalar.
    LLVMValueRef off;
    if (offv) {
        // The row's in-image part joins the lanes in i32 (the backend then gathers with
        // 32-bit indices); only the image offset stays in the scalar base.
        LLVMValueRef rs = add(c, mul_c(c, hs, im->W), ws);
        if (taps_by_pos) {
            rs = add(c, rs, bases);
            base = f->b_off;
        }
        off = vadd(c, offv, ivec_splat(c, n, rs));
    } else {
        off = vadd(c, basev, vadd(c, vmul_c(c, ih, im->W), iw));
    }
    LLVMValueRef ptrs = LLVMBuildGEP2(c->b, c->t_f32, fptr(c, f->k->ptr[2], base), &off, 1, "");
    LLVMValueRef args[4] = {ptrs, cg_i32(c, 4), valid, LLVMConstNull(f->vt)};
    LLVMValueRef gfn = LLVMGetIntrinsicDeclaration(c->mod, gid, gtys, 2);
    LLVMTypeRef gfty = LLVMIntrinsicGetType(c->ctx, gid, gtys, 2);
    v = LLVMBuildCall2(c->b, gfty, gfn, args, 4, "");
    store_vec(c, v, fptr(c, f->bp, add(c, dst0, mul_c(c, kk, f->g.NR))), f->valign);
    cg_for_end(c, &lk);
}

// The weight gradient's B (positions by taps) when a tap's lanes over consecutive positions are
// consecutive elements of x: unit strides, no stride division, and output rows as wide as the
// image's (OW == W, a "same" convolution), so that position p = oh*OW + ow of image n reads
// x[n*ns + p + toff(j)] with toff(j) = ci*cs + hs(j)*W + ws(j) the tap's offset, valid while
// oh + hs(j) and ow + ws(j) stay inside the image. An image has at least a vector of positions
// (a vector of them spans at most two images). The float32 wide-vector case only.
static bool im_rows_contiguous(cg *c, const fctx *f) {
    const dl_cg__im2col *im = f->p->im;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    return !f->bf && im->kind == DL_CG__IM2COL_POS_BY_TAPS && im->a[0] == 1 && im->a[1] == 1 &&
           im->d[0] == 1 && im->d[1] == 1 && im->OW == im->W && im->OH * im->OW >= vw && vw >= 8 &&
           vw <= MAX_NR && f->g.NR % vw == 0 && f->g.KC % vw == 0;
}

// bp[sub][k][l] for im_rows_contiguous: vw positions at a time, each column of the panel one
// masked load of vw consecutive elements (two when the positions cross into the next image),
// then vw x vw transposes (dl_cg__transpose_sq) and one store per k, as the transposed-B pack. Rows
// past kc (up to the next multiple of vw, inside the panel) are zeros; so are columns past nr. The
// packed values are the gather's (emit_pack_b_im2col): the same bytes, without a gather.
static void emit_pack_b_im_rows(cg *c, const fctx *f, int64_t nr) {
    const gemm_prob *p = f->p;
    const dl_cg__im2col *im = p->im;
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT), ohw = im->OH * im->OW;
    unsigned n = (unsigned)vw;
    LLVMTypeRef wt = LLVMVectorType(c->t_f32, n);
    unsigned walign = (unsigned)(vw * 4 < 64 ? vw * 4 : 64);
    // The panel's columns: tap offset in the image and the row / column shifts (i32 lanes).
    LLVMValueRef toff[MAX_NR], hsv[MAX_NR], wsv[MAX_NR];
    for (int64_t jj = 0; jj < nr; jj++) {
        LLVMValueRef ci, kh, kw;
        split3(c, add(c, f->j0, cg_i64(c, jj)), im->kH, im->kW, &ci, &kh, &kw);
        LLVMValueRef hs = add(c, mul_c(c, kh, im->cc[0]), cg_i64(c, im->b[0]));
        LLVMValueRef ws = add(c, mul_c(c, kw, im->cc[1]), cg_i64(c, im->b[1]));
        toff[jj] = add(c, mul_c(c, ci, im->cs), add(c, mul_c(c, hs, im->W), ws));
        hsv[jj] = ivec_splat(c, n, hs);
        wsv[jj] = ivec_splat(c, n, ws);
    }
    LLVMValueRef lanes[MAX_NR];
    for (unsigned l = 0; l < n; l++) {
        lanes[l] = cg_i32(c, (int32_t)l);
    }
    LLVMValueRef lane = LLVMConstVector(lanes, n);
    LLVMValueRef dst0 = mul_c(c, f->sub, f->g.KC * f->g.NR);
    LLVMValueRef nq = LLVMBuildUDiv(c->b, add(c, f->kc, cg_i64(c, vw - 1)), cg_i64(c, vw), "");
    cg_loop lq;
    LLVMValueRef q = cg_for_begin(c, &lq, cg_i64(c, 0), nq, "pbr");
    LLVMValueRef kk = mul_c(c, q, vw);
    LLVMValueRef kq = add(c, f->pc, kk);
    LLVMValueRef img = LLVMBuildUDiv(c->b, kq, cg_i64(c, ohw), "");
    LLVMValueRef p0 = LLVMBuildURem(c->b, kq, cg_i64(c, ohw), "");
    // Lanes l < left are image img's positions p0 + l, the others image img + 1's l - left.
    LLVMValueRef left = LLVMBuildSub(c->b, cg_i64(c, ohw), p0, "");
    LLVMValueRef lo =
        LLVMBuildICmp(c->b, LLVMIntULT, lane, ivec_splat(c, n, min_c(c, left, cg_i64(c, vw))), "");
    LLVMValueRef pos = LLVMBuildSelect(
        c->b, lo, vadd(c, ivec_splat(c, n, p0), lane),
        LLVMBuildSub(c->b, lane, ivec_splat(c, n, min_c(c, left, cg_i64(c, vw))), ""), "");
    LLVMValueRef oh = LLVMBuildUDiv(c->b, pos, ivec_c(c, n, im->OW), "");
    LLVMValueRef ow = LLVMBuildURem(c->b, pos, ivec_c(c, n, im->OW), "");
    LLVMValueRef kmask = cg_lane_mask_rt(c, LLVMBuildSub(c->b, f->kc, kk, ""), vw);
    LLVMValueRef base0 = add(c, f->b_off, add(c, mul_c(c, img, im->ns), p0));
    LLVMValueRef base1 =
        LLVMBuildSub(c->b, add(c, f->b_off, mul_c(c, add(c, img, cg_i64(c, 1)), im->ns)), left, "");
    LLVMValueRef hi = LLVMBuildNot(c->b, lo, "");
    LLVMValueRef straddle = LLVMBuildICmp(c->b, LLVMIntSLT, left, cg_i64(c, vw), "");
    LLVMValueRef x[MAX_NR];
    if_else ie;
    LLVMValueRef xa[MAX_NR], xb[MAX_NR];
    LLVMBasicBlockRef from_a, from_b;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) {
            if_else_begin(c, &ie, straddle);
        } else {
            if_else_mid(c, &ie);
        }
        LLVMValueRef *out = pass == 0 ? xb : xa; // pass 0: the straddling vector
        for (int64_t jj = 0; jj < f->g.NR; jj++) {
            if (jj >= nr) {
                out[jj] = LLVMConstNull(wt);
                continue;
            }
            LLVMValueRef rok =
                LLVMBuildICmp(c->b, LLVMIntULT, vadd(c, oh, hsv[jj]), ivec_c(c, n, im->H), "");
            LLVMValueRef cok =
                LLVMBuildICmp(c->b, LLVMIntULT, vadd(c, ow, wsv[jj]), ivec_c(c, n, im->W), "");
            LLVMValueRef m = LLVMBuildAnd(c->b, kmask, LLVMBuildAnd(c->b, rok, cok, ""), "");
            // Masked-off lanes are not read: the first lane's address may lie outside x.
            LLVMValueRef v0 = cg_masked_load(c, wt, fptr(c, f->k->ptr[2], add(c, base0, toff[jj])),
                                             pass == 0 ? LLVMBuildAnd(c->b, m, lo, "") : m);
            if (pass == 0) {
                LLVMValueRef v1 =
                    cg_masked_load(c, wt, fptr(c, f->k->ptr[2], add(c, base1, toff[jj])),
                                   LLVMBuildAnd(c->b, m, hi, ""));
                v0 = LLVMBuildSelect(c->b, lo, v0, v1, "");
            }
            out[jj] = v0;
        }
        if (pass == 0) {
            from_b = LLVMGetInsertBlock(c->b);
        } else {
            from_a = LLVMGetInsertBlock(c->b);
        }
    }
    if_else_end(c, &ie);
    for (int64_t jj = 0; jj < f->g.NR; jj++) {
        if (jj >= nr) {
            x[jj] = LLVMConstNull(wt);
            continue;
        }
        x[jj] = LLVMBuildPhi(c->b, wt, "imr");
        LLVMValueRef in[2] = {xb[jj], xa[jj]};
        LLVMBasicBlockRef from[2] = {from_b, from_a};
        LLVMAddIncoming(x[jj], in, from, 2);
    }
    for (int64_t h = 0; h < f->g.NR / vw; h++) {
        dl_cg__transpose_sq(c, x + h * vw, n);
        for (int64_t k = 0; k < vw; k++) {
            LLVMValueRef d = add(c, dst0, mul_c(c, add(c, kk, cg_i64(c, k)), f->g.NR));
            store_vec(c, x[h * vw + k], fptr(c, f->bp, add(c, d, cg_i64(c, h * vw))), walign);
        }
    }
    cg_for_end(c, &lq);
}

// Smallest products the implicit GEMM takes (below them the direct kernels win: a 1-channel
// first layer has K = 9, its weight gradient N = 9 of a 32-lane panel).
#define CONV_GEMM_MIN_M 8
#define CONV_GEMM_MIN_N 16
#define CONV_GEMM_MIN_K 16

bool dl_cg__conv_gemm_ok(cg *c, const dl_cg__conv_gemm *p) {
    if (c->target->vector_width(c, DL_DT_FLOAT) < 8) {
        return false; // no wide vectors (NVPTX: width 1): the direct kernels
    }
    if (p->y->type.dtype != DL_DT_FLOAT || p->a->type.dtype != DL_DT_FLOAT ||
        p->x->type.dtype != DL_DT_FLOAT || (p->bias && p->bias->type.dtype != DL_DT_FLOAT)) {
        return false;
    }
    // The gathered lanes' offsets span the group's channel planes of one image.
    int64_t kk = p->im.kH * p->im.kW, plane = p->im.H * p->im.W;
    int64_t span =
        kk > 0 ? ((p->im.kind == DL_CG__IM2COL_POS_BY_TAPS ? p->N : p->K) / kk + 1) * plane : plane;
    if (span >= ((int64_t)1 << 30) || p->im.H * p->im.d[0] >= ((int64_t)1 << 30) ||
        p->im.W * p->im.d[1] >= ((int64_t)1 << 30)) {
        return false; // gathered offsets are i32
    }
    return p->M >= CONV_GEMM_MIN_M && p->N >= CONV_GEMM_MIN_N && p->K >= CONV_GEMM_MIN_K;
}

dl_status dl_cg__emit_conv_gemm(cg *c, const dl_cg__conv_gemm *cp) {
    gemm_prob p;
    memset(&p, 0, sizeof p);
    p.M = cp->M;
    p.N = cp->N;
    p.K = cp->K;
    p.sa_m = cp->sa_m;
    p.sa_k = cp->sa_k;
    p.ka_in = cp->ka_in;
    p.sa_k2 = cp->sa_k2;
    p.sb_n = 1;
    p.br = cp->br;
    p.nb = 1;
    DL_ASSERT(cp->br <= 2);
    for (int32_t d = 0; d < cp->br; d++) {
        p.bd[d] = cp->bd[d];
        p.abs_[d] = cp->abs_[d];
        p.bbs[d] = cp->xbs[d];
        p.bis[d] = cp->bis[d];
        p.nb *= cp->bd[d];
    }
    p.alpha = 1.0;
    p.y = cp->y;
    p.a = cp->a;
    p.b = cp->x;
    p.bias = cp->bias;
    p.im = &cp->im;
    p.epi = cp->epi;
    p.n_epi = cp->n_epi;
    p.pool = cp->pool;
    if (cp->n_ext > GEMM_MAX_EXT || (cp->n_ext > 0 && cp->pool)) {
        cg_error(c, "a fused convolution reads at most %d values, and none when it pools",
                 GEMM_MAX_EXT);
        return DL_ERR_UNSUPPORTED;
    }
    for (size_t e = 0; e < cp->n_ext; e++) {
        p.ext[e] = cp->ext[e];
        p.ext_kind[e] = cp->ext_kind[e];
    }
    p.n_ext = cp->n_ext;
    p.ext_y = cp->n_ext > 0;
    if (p.nb * p.M * p.N == 0) {
        DL_ASSERT(c->guard.n == 0); // a guarded lowering returns earlier for empty outputs
        return DL_OK;
    }
    // Column groups: a whole image's positions in one group when they fit 8 panels (the A block
    // is then packed once per image, not once per 4 panels); the weight gradient (one batch per
    // group, a few thousand k) in two groups, so two threads share it evenly.
    int64_t nr = choose_blocking(c).NR, panels = (p.N + nr - 1) / nr;
    if (cp->pool) {
        p.nc_panels = 0; // emit_float's pooled groups
    } else if (cp->im.kind == DL_CG__IM2COL_TAPS_BY_POS) {
        p.nc_panels = panels < 8 ? panels : 8;
    } else {
        p.nc_panels = panels < 2 ? 1 : (panels + 1) / 2;
        p.nc_panels = p.nc_panels < 16 ? p.nc_panels : 16;
    }
    return emit_float(c, &p);
}

// ---------------------------------------------------------------------------------------------
// Integers: one output element at a time, i64 accumulation.

static dl_status emit_int(cg *c, const gemm_prob *p, bool is_gemm) {
    dl_dtype at = p->a->type.dtype, bt = p->b->type.dtype, yt = p->y->type.dtype;
    int64_t M = p->M, N = p->N;
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, p->nb * M, &k));
    LLVMValueRef accp = LLVMBuildAlloca(c->b, c->t_i64, "acc");
    // t: [batch, M], one row of y per outer iteration
    cg_loop lt, lj, lk;
    LLVMValueRef t = cg_for_begin(c, &lt, k.begin, k.end, "t");
    LLVMValueRef bi = LLVMBuildUDiv(c->b, t, cg_i64(c, M), "");
    LLVMValueRef i = LLVMBuildURem(c->b, t, cg_i64(c, M), "");
    LLVMValueRef a_off, b_off;
    batch_offsets(c, p, bi, &a_off, &b_off, NULL);
    LLVMValueRef arow = add(c, a_off, mul_c(c, i, p->sa_m));
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, N), "j");
    LLVMBuildStore(c->b, cg_i64(c, 0), accp);
    LLVMValueRef bcol = add(c, b_off, mul_c(c, j, p->sb_n));
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, p->K), "k");
    LLVMValueRef av = cg_load(c, k.ptr[1], at, add(c, arow, mul_c(c, kk, p->sa_k)));
    LLVMValueRef bv = cg_load(c, k.ptr[2], bt, add(c, bcol, mul_c(c, kk, p->sb_k)));
    av = LLVMBuildIntCast2(c->b, av, c->t_i64, 1, "");
    bv = LLVMBuildIntCast2(c->b, bv, c->t_i64, 1, "");
    LLVMValueRef s = LLVMBuildLoad2(c->b, c->t_i64, accp, "");
    LLVMBuildStore(c->b, add(c, s, LLVMBuildMul(c->b, av, bv, "")), accp);
    cg_for_end(c, &lk);
    LLVMValueRef acc = LLVMBuildLoad2(c->b, c->t_i64, accp, "");
    LLVMValueRef v;
    if (is_gemm && (p->alpha != 1.0 || (p->cv && p->beta != 1.0))) {
        // As the evaluator: alpha * s + beta * c in double, truncated and saturated to int64,
        // then wrapped to the output's width.
        LLVMValueRef d = LLVMBuildSIToFP(c->b, acc, c->t_f64, "");
        d = LLVMBuildFMul(c->b, d, LLVMConstReal(c->t_f64, p->alpha), "");
        if (p->cv) {
            LLVMValueRef cvv = cg_load(c, k.ptr[3], p->cv->type.dtype,
                                       add(c, mul_c(c, i, p->cs_m), mul_c(c, j, p->cs_n)));
            cvv = LLVMBuildSIToFP(c->b, cvv, c->t_f64, "");
            d = LLVMBuildFAdd(c->b, d,
                              LLVMBuildFMul(c->b, cvv, LLVMConstReal(c->t_f64, p->beta), ""), "");
        }
        v = cg_intrinsic1(c, "llvm.fptosi.sat", c->t_i64, d);
    } else {
        v = acc;
        if (is_gemm && p->cv) {
            LLVMValueRef cvv = cg_load(c, k.ptr[3], p->cv->type.dtype,
                                       add(c, mul_c(c, i, p->cs_m), mul_c(c, j, p->cs_n)));
            v = add(c, v, LLVMBuildIntCast2(c->b, cvv, c->t_i64, 1, ""));
        }
    }
    v = LLVMBuildIntCast2(c->b, v, cg_compute_type(c, yt), 1, "");
    cg_store(c, k.ptr[0], yt, add(c, mul_c(c, t, N), j), v);
    cg_for_end(c, &lj);
    cg_for_end(c, &lt);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// Small float products: one row of y per outer iteration, y_row[j] += A[i, k] * B[k, j] with k
// outer and j inner (contiguous in y and, for untransposed B, in B), f32 accumulators in a row
// buffer. Far less code than the blocked kernel, so a model with many small products (attention
// heads, classifier layers) compiles quickly; for such sizes packing would not pay anyway. The
// sum over k runs in ascending order, as in the blocked kernel.

#define SMALL_MNK   (64 * 64 * 64) // M * N * K up to this uses the small kernel
#define SMALL_MAX_N 1024           // the row buffer holds N floats

static bool is_small(const gemm_prob *p) {
    return p->N <= SMALL_MAX_N && p->M * p->N * p->K <= SMALL_MNK;
}

static dl_status emit_float_small(cg *c, const gemm_prob *p) {
    dl_dtype at = p->a->type.dtype, bt = p->b->type.dtype, yt = p->y->type.dtype;
    int64_t M = p->M, N = p->N;
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, p->nb * M, &k));
    LLVMValueRef row = cg_entry_alloca(c, &k, c->t_f32, N); // acc: [N]
    cg_loop lt, lj, lk, lj2, lj3;
    // t: [batch, M], one row of y per outer iteration
    LLVMValueRef t = cg_for_begin(c, &lt, k.begin, k.end, "t");
    LLVMValueRef bi = LLVMBuildUDiv(c->b, t, cg_i64(c, M), "");
    LLVMValueRef i = LLVMBuildURem(c->b, t, cg_i64(c, M), "");
    LLVMValueRef a_off, b_off;
    batch_offsets(c, p, bi, &a_off, &b_off, NULL);
    LLVMValueRef arow = add(c, a_off, mul_c(c, i, p->sa_m));
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, N), "j");
    LLVMBuildStore(c->b, cg_f32(c, 0), fptr(c, row, j));
    cg_for_end(c, &lj);
    LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, p->K), "k");
    LLVMValueRef av = cg_load(c, k.ptr[1], at, add(c, arow, mul_c(c, kk, p->sa_k)));
    LLVMValueRef brow = add(c, b_off, mul_c(c, kk, p->sb_k));
    LLVMValueRef j2 = cg_for_begin(c, &lj2, cg_i64(c, 0), cg_i64(c, N), "j");
    LLVMValueRef bv = cg_load(c, k.ptr[2], bt, add(c, brow, mul_c(c, j2, p->sb_n)));
    LLVMValueRef slot = fptr(c, row, j2);
    LLVMValueRef acc = LLVMBuildLoad2(c->b, c->t_f32, slot, "");
    LLVMBuildStore(c->b, fmuladd(c, av, bv, acc), slot);
    cg_for_end(c, &lj2);
    cg_for_end(c, &lk);
    // epilogue: y[t, j] = alpha * acc[j] (+ beta * C[i, j])
    LLVMValueRef j3 = cg_for_begin(c, &lj3, cg_i64(c, 0), cg_i64(c, N), "j");
    LLVMValueRef v = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, row, j3), "");
    v = finish_elem(c, p, &k, v, NULL, add(c, mul_c(c, i, p->cs_m), mul_c(c, j3, p->cs_n)), i, j3);
    cg_store(c, k.ptr[0], yt, add(c, mul_c(c, t, N), j3), v);
    cg_for_end(c, &lj3);
    cg_for_end(c, &lt);
    return cg_kernel_end(c, &k);
}

// Small products with float32 B read along its rows (sb_n == 1, or copied to rows: below), on
// targets with 8 or more f32 lanes: register tiles of up to ST_ACC vector accumulators, no
// packing (the operands sit in L1). The parallel range is batch * ceil(M / rs) row tiles of rs
// rows; per tile and per chunk of cv vectors of columns (the last chunk through a lane mask):
//
//   acc[r][v] = 0; for k: b[v] = B[k, j0 + v vw ..]; acc[r][v] = fmuladd(A[i0 + r, k], b[v], acc)
//   buf = acc; y[i0 + r, j0 + j] = finish_elem(buf[r][j])
//
// Each element is one fmuladd chain over ascending k from zero, as in the other kernels.
//
// A B read across its rows (transB: the last layer's input gradient dy W^T, W stored [in, out],
// K its few outputs) of a small product (is_small) is first copied whole into a [K][N] buffer by
// each call, when it has at most ST_PACK_T floats and one batch: the small kernel read its
// columns with strided scalar loads (26 us for the small MLP's 32 x 256 x 8 dX, ~5 GFLOP/s).
// Other products with such a B (a few rows, N past 1024) keep the blocked kernel, which packs B
// (prepacked for infer) instead of copying all of it per call.
#define ST_ACC    24         // AVX-512 (32 registers): 24 accumulators, 4 B vectors, one broadcast
#define ST_GROUP  4          // column chunks per outer iteration
#define ST_THIN_M 12         // products of at most this many rows use it whatever their size
#define ST_PACK_T (16 << 10) // the most floats of a B copied to rows (64 KiB on the stack)

typedef struct stile {
    const gemm_prob *p;
    cg_kernel *k;
    LLVMTypeRef vt;
    int64_t vw, cw;   // lanes, columns per chunk (cv * vw)
    LLVMValueRef buf; // [rs][cw] f32
    LLVMValueRef a_off, b_off, y_off;
    LLVMValueRef bp; // B's elements: the argument, or its [K][N] copy
    int64_t sb_k;    // B's k stride in bp
} stile;

// B is read along its rows (in place), or copied to rows first (ST_PACK_T).
static bool st_b_rows(const gemm_prob *p) {
    return p->sb_n == 1 || (p->nb == 1 && p->K * p->N <= ST_PACK_T && is_small(p));
}

static bool is_small_tiled(cg *c, const gemm_prob *p) {
    return c->target->vector_width(c, DL_DT_FLOAT) >= 8 && p->b->type.dtype == DL_DT_FLOAT &&
           st_b_rows(p) && !p->im && p->ka_in == 0 && !p->bias;
}

// One tile of `rows` rows (from i0) by `cols` columns (from j0), both static.
static void small_tile(cg *c, const stile *s, LLVMValueRef i0, LLVMValueRef j0, int64_t rows,
                       int64_t cols) {
    const gemm_prob *p = s->p;
    int64_t nv = (cols + s->vw - 1) / s->vw;
    LLVMValueRef tail = cols % s->vw ? lane_mask(c, cols % s->vw, s->vw) : NULL;
    LLVMValueRef acc[PLOOP_MAX];
    for (int64_t a = 0; a < rows * nv; a++) {
        acc[a] = LLVMConstNull(s->vt);
    }
    ploop l;
    ploop_begin(c, &l, cg_i64(c, 0), cg_i64(c, p->K), acc, (size_t)(rows * nv));
    LLVMValueRef next[PLOOP_MAX] = {0}, bv[4];
    LLVMValueRef brow = add(c, s->b_off, add(c, mul_c(c, l.iv, s->sb_k), j0));
    for (int64_t v = 0; v < nv; v++) {
        bv[v] = cg_masked_load(c, s->vt, fptr(c, s->bp, add(c, brow, cg_i64(c, v * s->vw))),
                               v == nv - 1 ? tail : NULL);
    }
    LLVMValueRef arow = add(c, s->a_off, add(c, mul_c(c, i0, p->sa_m), mul_c(c, l.iv, p->sa_k)));
    for (int64_t r = 0; r < rows; r++) {
        LLVMValueRef av =
            cg_load(c, s->k->ptr[1], p->a->type.dtype, add(c, arow, cg_i64(c, r * p->sa_m)));
        LLVMValueRef as = splat(c, s->vt, av);
        for (int64_t v = 0; v < nv; v++) {
            next[r * nv + v] = fmuladd(c, as, bv[v], l.v[r * nv + v]);
        }
    }
    ploop_end(c, &l, next);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t v = 0; v < nv; v++) {
            store_vec(c, l.v[r * nv + v], fptr(c, s->buf, cg_i64(c, r * s->cw + v * s->vw)), 4);
        }
    }
    cg_loop lr, lj;
    LLVMValueRef r = cg_for_begin(c, &lr, cg_i64(c, 0), cg_i64(c, rows), "sr");
    LLVMValueRef i = add(c, i0, r);
    LLVMValueRef jj = cg_for_begin(c, &lj, cg_i64(c, 0), cg_i64(c, cols), "sj");
    LLVMValueRef j = add(c, j0, jj);
    LLVMValueRef v =
        LLVMBuildLoad2(c->b, c->t_f32, fptr(c, s->buf, add(c, mul_c(c, r, s->cw), jj)), "");
    v = finish_elem(c, p, s->k, v, NULL, add(c, mul_c(c, i, p->cs_m), mul_c(c, j, p->cs_n)), i, j);
    cg_store(c, s->k->ptr[0], p->y->type.dtype, add(c, s->y_off, add(c, mul_c(c, i, p->N), j)), v);
    cg_for_end(c, &lj);
    cg_for_end(c, &lr);
}

// The column chunks of group `cgi` (ST_GROUP chunks, the last group's last chunk may be
// narrower) in the row tile at i0 (`rows` static).
static void small_row_tile(cg *c, const stile *s, LLVMValueRef cgi, LLVMValueRef i0, int64_t rows) {
    int64_t N = s->p->N, cw_e = N % s->cw;
    LLVMValueRef c0 = mul_c(c, cgi, ST_GROUP * s->cw);
    LLVMValueRef n_full = LLVMBuildUDiv(
        c->b, min_c(c, cg_i64(c, ST_GROUP * s->cw), LLVMBuildSub(c->b, cg_i64(c, N), c0, "")),
        cg_i64(c, s->cw), "");
    cg_loop lc;
    LLVMValueRef ch = cg_for_begin(c, &lc, cg_i64(c, 0), n_full, "sc");
    small_tile(c, s, i0, add(c, c0, mul_c(c, ch, s->cw)), rows, s->cw);
    cg_for_end(c, &lc);
    if (cw_e) { // only the last group has it
        LLVMBasicBlockRef join = if_begin(
            c, LLVMBuildICmp(c->b, LLVMIntEQ, cgi, cg_i64(c, (N - 1) / (ST_GROUP * s->cw)), ""));
        small_tile(c, s, i0, cg_i64(c, N - cw_e), rows, cw_e);
        if_end(c, join);
    }
}

static dl_status emit_float_small_tiled(cg *c, const gemm_prob *p) {
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    int64_t max_acc = vw >= 16 ? ST_ACC : 12, max_cv = vw >= 16 ? 4 : 2;
    int64_t cv = (p->N + vw - 1) / vw;
    cv = cv < max_cv ? cv : max_cv;
    if (p->M > max_acc / cv && p->M <= max_acc / 2 && cv > 2) {
        cv = 2; // one row tile of all M rows: B is read once
    }
    int64_t rs = max_acc / cv;
    rs = rs < p->M ? rs : p->M;
    int64_t nt = (p->M + rs - 1) / rs, rs_e = p->M - (nt - 1) * rs;
    int64_t ngr = (p->N + ST_GROUP * cv * vw - 1) / (ST_GROUP * cv * vw);
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nval = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nval, p->nb * nt * ngr, &k));
    stile s = {.p = p,
               .k = &k,
               .vt = LLVMVectorType(c->t_f32, (unsigned)vw),
               .vw = vw,
               .cw = cv * vw,
               .bp = k.ptr[2],
               .sb_k = p->sb_k};
    s.buf = cg_entry_alloca(c, &k, c->t_f32, rs * s.cw);
    if (p->sb_n != 1) {        // bp[k][n] = B[k, n], rows written in order
        DL_ASSERT(p->nb == 1); // b_off stays 0 (batch_offsets)
        s.bp = cg_entry_alloca(c, &k, c->t_f32, p->K * p->N);
        s.sb_k = p->N;
        cg_loop lk, ln;
        LLVMValueRef kk = cg_for_begin(c, &lk, cg_i64(c, 0), cg_i64(c, p->K), "pk");
        LLVMValueRef n = cg_for_begin(c, &ln, cg_i64(c, 0), cg_i64(c, p->N), "pn");
        LLVMValueRef v = LLVMBuildLoad2(
            c->b, c->t_f32, fptr(c, k.ptr[2], add(c, mul_c(c, kk, p->sb_k), mul_c(c, n, p->sb_n))),
            "");
        LLVMBuildStore(c->b, v, fptr(c, s.bp, add(c, mul_c(c, kk, p->N), n)));
        cg_for_end(c, &ln);
        cg_for_end(c, &lk);
    }
    // t: [batch, row tiles, column groups]
    cg_loop lt;
    LLVMValueRef t = cg_for_begin(c, &lt, k.begin, k.end, "t");
    LLVMValueRef bt = LLVMBuildUDiv(c->b, t, cg_i64(c, ngr), "");
    LLVMValueRef cgi = LLVMBuildURem(c->b, t, cg_i64(c, ngr), "");
    LLVMValueRef bi = LLVMBuildUDiv(c->b, bt, cg_i64(c, nt), "");
    LLVMValueRef ti = LLVMBuildURem(c->b, bt, cg_i64(c, nt), "");
    batch_offsets(c, p, bi, &s.a_off, &s.b_off, NULL);
    s.y_off = mul_c(c, bi, p->M * p->N);
    LLVMValueRef i0 = mul_c(c, ti, rs);
    if (rs_e == rs) {
        small_row_tile(c, &s, cgi, i0, rs);
    } else {
        if_else ie;
        if_else_begin(c, &ie, LLVMBuildICmp(c->b, LLVMIntSLT, ti, cg_i64(c, nt - 1), ""));
        small_row_tile(c, &s, cgi, i0, rs);
        if_else_mid(c, &ie);
        small_row_tile(c, &s, cgi, i0, rs_e);
        if_else_end(c, &ie);
    }
    cg_for_end(c, &lt);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// Matrix-vector products: one row of A (M == 1, one batch; a Linear layer at batch 1), B's rows
// contiguous (sb_n == 1, weights stored [in, out]), all float32. The blocked kernel would pack
// the whole of B on every call to use each element once; this kernel streams B once:
//
//   outer parallel range: ceil(N / nb) column blocks of nb = gv_block(N) columns (half of N
//   rounded up to 16, at most GV_NB: two blocks up to N = 1024, so that two threads each stream
//   half of every row and a 128-wide layer still splits); a call's chunk [begin, end) of them is
//   the columns j_lo .. j_hi, done in spans j0 .. j0 + nb of at most GV_SPAN columns:
//     acc[nb] = 0                                    (an alloca: 16 KiB at most, in L1)
//     for k in steps of 4: acc[j] = fma(a[k+3], B[k+3, j], ... fma(a[k], B[k, j], acc[j]))
//     for the last K % 4 rows one at a time
//     y[j] = alpha * acc[j] (+ beta * C[j])
//
// The inner loops are over contiguous columns (LLVM vectorises them at the target's width); the
// sum over k is one fmuladd chain per element in ascending k, as in the blocked kernel, so any
// split of the range gives the same bytes. The span is the whole chunk, not one block: a thread
// that owns all the columns of a 1024-wide layer reads B's rows k .. k + 3 as one 16 KiB run,
// which the hardware prefetcher follows, where 256-column blocks read 1 KiB from each of four
// pages and leave it a new stream every 16 lines (Xeon family 6 model 207, batch-1 MLP
// 784-1024x3-10: 19 GB/s that way, 26 GB/s, the core's streaming read rate, this way).
// A large B is streamed in slices of rows by a kernel before this one instead (gv_slices), and
// this kernel's blocks add the slices' partial sums where they would have streamed B.
#define GV_NB   512  // columns per block of the parallel range
#define GV_SPAN 4096 // most columns accumulated at once (acc: 16 KiB)

static bool is_gemv(cg *c, const gemm_prob *p) {
    return p->M == 1 && p->nb == 1 && p->sb_n == 1 && p->N >= 32 &&
           c->target->vector_width(c, DL_DT_FLOAT) >= 8 && p->a->type.dtype == DL_DT_FLOAT &&
           p->b->type.dtype == DL_DT_FLOAT && p->y->type.dtype == DL_DT_FLOAT;
}

static int64_t gv_block(int64_t N) {
    int64_t half = ((N + 1) / 2 + 15) / 16 * 16;
    return half < 16 ? 16 : half > GV_NB ? GV_NB : half;
}

// acc[0 .. nb) += sum over the rows k in [k_lo, k_hi) of a[k] * B[k, j0 .. j0 + nb): rows k .. k +
// 3 per pass over the span (one load and store of acc[j] per 4 FMAs), then the last rows one at a
// time; one fmuladd chain per element in ascending k.
static void gemv_rows(cg *c, const gemm_prob *p, LLVMValueRef ap, LLVMValueRef bp, LLVMValueRef acc,
                      LLVMValueRef j0, LLVMValueRef nb, LLVMValueRef k_lo, LLVMValueRef k_hi) {
    cg_loop lk, lj, lr, lj2;
    LLVMValueRef n4 = LLVMBuildUDiv(c->b, LLVMBuildSub(c->b, k_hi, k_lo, ""), cg_i64(c, 4), "");
    LLVMValueRef k4 = cg_for_begin(c, &lk, cg_i64(c, 0), n4, "k4");
    LLVMValueRef kk = add(c, k_lo, mul_c(c, k4, 4));
    LLVMValueRef av[4], brow[4];
    for (int q = 0; q < 4; q++) {
        LLVMValueRef kq = add(c, kk, cg_i64(c, q));
        av[q] = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, ap, mul_c(c, kq, p->sa_k)), "");
        brow[q] = add(c, mul_c(c, kq, p->sb_k), j0);
    }
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), nb, "j");
    LLVMValueRef slot = fptr(c, acc, j);
    LLVMValueRef a = LLVMBuildLoad2(c->b, c->t_f32, slot, "");
    for (int q = 0; q < 4; q++) {
        LLVMValueRef bv = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, bp, add(c, brow[q], j)), "");
        a = fmuladd(c, av[q], bv, a);
    }
    LLVMBuildStore(c->b, a, slot);
    cg_for_end(c, &lj);
    cg_for_end(c, &lk);
    LLVMValueRef kr = cg_for_begin(c, &lr, add(c, k_lo, mul_c(c, n4, 4)), k_hi, "k");
    LLVMValueRef ar = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, ap, mul_c(c, kr, p->sa_k)), "");
    LLVMValueRef br = add(c, mul_c(c, kr, p->sb_k), j0);
    LLVMValueRef j2 = cg_for_begin(c, &lj2, cg_i64(c, 0), nb, "j");
    LLVMValueRef slot2 = fptr(c, acc, j2);
    LLVMValueRef bv = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, bp, add(c, br, j2)), "");
    LLVMBuildStore(c->b, fmuladd(c, ar, bv, LLVMBuildLoad2(c->b, c->t_f32, slot2, "")), slot2);
    cg_for_end(c, &lj2);
    cg_for_end(c, &lr);
}

// Zeroes acc[0 .. nb).
static void zero_floats(cg *c, LLVMValueRef acc, LLVMValueRef nb) {
    cg_loop lz;
    LLVMValueRef jz = cg_for_begin(c, &lz, cg_i64(c, 0), nb, "j");
    LLVMBuildStore(c->b, cg_f32(c, 0), fptr(c, acc, jz));
    cg_for_end(c, &lz);
}

// The K slices of a matrix-vector product whose B is streamed in slices of its rows (0: in
// column blocks). Two threads splitting the columns each read half of every row of B, runs of
// 2 KiB 4 KiB apart for a 1024-wide layer, and the one reading the first halves ran 20-25 %
// slower than the other (AMD Zen 3, batch-1 MLP 784-1024x3-10: 58 against 47 us for a 1024 x
// 1024 layer, 72 GB/s together where two threads each streaming their own buffer read 124 GB/s,
// bench/read_bw.c); a 128-wide layer (the CNN's fc1) read 256-byte runs. Slices of rows are
// contiguous runs of B, whatever N. GV_SLICES slices of at least GV_SLICE_ROWS rows, fixed by
// K alone, so any split of the range (and any thread count) gives the same bytes; from
// GV_SPLIT_BYTES of B.
#define GV_SLICES      8
#define GV_SLICE_ROWS  64
#define GV_SPLIT_BYTES (256 << 10)

static int64_t gv_slices(const gemm_prob *p) {
    if (p->N > GV_SPAN || p->K * p->N * 4 < GV_SPLIT_BYTES) {
        return 0;
    }
    int64_t n = p->K / GV_SLICE_ROWS;
    return n < 2 ? 0 : n > GV_SLICES ? GV_SLICES : n;
}

// Chained matrix-vector products. A batch-1 MLP's layers are sliced products in a row, each a
// slices kernel and a kernel summing the slices through the epilogue (bias, Relu), so a layer's
// output passes two kernel boundaries before the next layer reads it; on 2 threads each is a
// handoff between the cores (the MLP 784-1024x3-10 spent ~0.025 of its 0.15 ms per call between
// its seven kernels, AMD Zen 3). When a sliced product's output y is read by nothing but the A
// operand of a later matrix-vector product R, the sum and the epilogue move into R's first
// kernel: R's slice s reads only y's elements k_lo .. k_hi (its rows of B), so it sums and
// finishes exactly those from the producer's partial sums, stores them to y (y stays whole, as
// its value's buffer, now written by R's kernel) and goes on from there. R must be sliced too:
// the last layer (N = 10) is not a matrix-vector kernel's, so the last epilogue stays a kernel of
// its own. Every element of y is computed by the same instructions in the same order as in the
// producer's own kernel: the bytes do not change. The producer leaves its problem in
// c->gv_defer; R's lowering takes it (cg_compile.c fails the compilation if no reader did).
static dl_status matmul_setup(cg *c, const dl_ir_node *n, gemm_prob *pp);
static dl_status gemm_setup(cg *c, const dl_ir_node *n, gemm_prob *pp);

typedef struct cg_gv_defer {
    gemm_prob p;                         // the producer (p.epi points at epi)
    const dl_ir_node *epi[GEMM_MAX_EPI]; // its fusion group
    int64_t S;                           // its slices
    uint32_t part;                       // their partial sums' buffer
    const char *ops;                     // its kernel's ops ("Gemm+Relu"; static or c->strs)
} cg_gv_defer;

// The fusion group root a node is lowered at.
static const dl_ir_node *group_root(const dl_ir_node *n) {
    return n->fuse_root ? n->fuse_root : n;
}

// Whether the sliced product p (S slices, lowered at c->node) may leave its sum and epilogue
// to the kernel of the one product that reads its output (see above).
static bool gv_defer_ok(cg *c, const gemm_prob *p, int64_t S) {
    const dl_ir_module *m = c->m;
    const dl_ir_value *y = p->y;
    size_t n_fwd = m->has_backward ? m->n_fwd_nodes : m->nodes.len;
    if (S == 0 || p->nb != 1 || c->gv_defer || !c->node || c->node->id >= n_fwd ||
        y->def != c->node) {
        return false;
    }
    const dl_ir_node *reader = NULL;
    size_t uses = 0;
    for (size_t i = c->node->id + 1; i < m->nodes.len; i++) {
        const dl_ir_node *x = m->nodes.data[i];
        for (size_t a = 0; a < x->n_inputs; a++) {
            if (x->inputs[a] == y) {
                reader = x;
                uses++;
            }
        }
    }
    if (uses != 1 || reader->inputs[0] != y || group_root(reader)->id >= n_fwd ||
        (reader->op != DL_IR_OP_GEMM && reader->op != DL_IR_OP_MATMUL)) {
        return false;
    }
    uint8_t *root = dl_mem_calloc(m->values.len, 1);
    if (!root) {
        return false; // not deferring is always correct
    }
    dl_ir_module_mark_roots(m, root);
    bool is_root = root[y->id] != 0;
    free(root);
    const dl_ir_node *rr = group_root(reader);
    gemm_prob q;
    return !is_root && rr->n_outputs == 1 && rr->outputs[0]->type.dtype == DL_DT_FLOAT &&
           (reader->op == DL_IR_OP_GEMM ? gemm_setup(c, reader, &q)
                                        : matmul_setup(c, reader, &q)) == DL_OK &&
           q.a == y && is_gemv(c, &q) && q.sa_k == 1 && q.K == p->N && gv_slices(&q) > 0;
}

// y[col] for the sliced product p at column col (i64): its S partial sums (part, [S, N]) added
// in slice order, finished through the epilogue (k: a kernel whose ptr[] holds p's epilogue
// inputs at prob_vals' positions) and stored to y.
static void gv_sum_col(cg *c, const gemm_prob *p, int64_t S, const cg_kernel *k, LLVMValueRef yp,
                       LLVMValueRef part, LLVMValueRef col) {
    LLVMValueRef v = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, part, col), "");
    for (int64_t q = 1; q < S; q++) {
        LLVMValueRef w =
            LLVMBuildLoad2(c->b, c->t_f32, fptr(c, part, add(c, col, cg_i64(c, q * p->N))), "");
        v = LLVMBuildFAdd(c->b, v, w, "");
    }
    v = finish_elem(c, p, k, v, NULL, mul_c(c, col, p->cs_n), cg_i64(c, 0), col);
    LLVMBuildStore(c->b, v, fptr(c, yp, col));
}

// A kernel's arguments for a deferred producer d: its partial sums' buffer, then its epilogue
// inputs (prob_vals' order after A and B), appended to the buffer list bufs (n: its length).
static size_t gv_defer_bufs(cg *c, const cg_gv_defer *d, uint32_t *bufs, size_t n) {
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(&d->p, vals);
    bufs[n++] = d->part;
    for (size_t i = 3; i < nv; i++) {
        bufs[n++] = c->value_buf[vals[i]->id];
    }
    return n;
}

// Finishes y's columns [lo, hi) of the deferred producer d (yp: y's pointer) in a kernel whose
// n_args arguments `args` are the pointers of gv_defer_bufs' buffers.
static void gv_defer_cols(cg *c, const cg_gv_defer *d, const LLVMValueRef *args, size_t n_args,
                          LLVMValueRef yp, LLVMValueRef lo, LLVMValueRef hi) {
    cg_kernel kp; // finish_elem's view: the epilogue inputs at prob_vals' positions (y, A, B, ..)
    memset(&kp, 0, sizeof kp);
    for (size_t i = 1; i < n_args; i++) {
        kp.ptr[2 + i] = args[i];
    }
    cg_loop l;
    LLVMValueRef col = cg_for_begin(c, &l, lo, hi, "col");
    gv_sum_col(c, &d->p, d->S, &kp, yp, args[0], col);
    cg_for_end(c, &l);
}

// The partial sums of the sliced product: part[s][j] = sum over slice s's rows of a[k] B[k, j],
// one iteration per slice (rows K * s / S .. K * (s + 1) / S). With d (a deferred producer of
// A), each slice first finishes its rows' elements of A.
static dl_status emit_gemv_slices(cg *c, const gemm_prob *p, int64_t S, uint32_t part,
                                  const cg_gv_defer *d) {
    dl_strbuf name = {0}, ops = {0};
    dl_strbuf_printf(&name, "%s.slices", p->y->name);
    if (name.oom || !DL_VEC_PUSH(&c->strs, name.data)) {
        dl_strbuf_fini(&name);
        return DL_ERR_NOMEM;
    }
    if (d) { // named with the producer's ops: the op count stays that of the unfused kernels
        dl_strbuf_printf(&ops, "MatVecSlices+%s", d->ops);
        if (ops.oom || !DL_VEC_PUSH(&c->strs, ops.data)) {
            dl_strbuf_fini(&ops);
            return DL_ERR_NOMEM;
        }
    }
    uint32_t bufs[3 + 2 + GEMM_MAX_EXT] = {part, c->value_buf[p->a->id], c->value_buf[p->b->id]};
    size_t nbufs = d ? gv_defer_bufs(c, d, bufs, 3) : 3;
    cg_kernel k;
    DL_TRY(cg_kernel_begin_bufs(c, bufs, nbufs, d ? 2 : 1, S, name.data, &k));
    k.ops = d ? ops.data : "MatVecSlices";
    LLVMValueRef acc = cg_entry_alloca(c, &k, c->t_f32, p->N);
    LLVMValueRef pp = cg_kernel_arg(c, &k, 0), ap = cg_kernel_arg(c, &k, 1),
                 bp = cg_kernel_arg(c, &k, 2);
    LLVMValueRef dargs[2 + GEMM_MAX_EXT];
    for (size_t i = 3; i < nbufs; i++) {
        dargs[i - 3] = cg_kernel_arg(c, &k, i);
    }
    cg_loop ls, lj;
    LLVMValueRef sl = cg_for_begin(c, &ls, k.begin, k.end, "slice");
    LLVMValueRef k_lo = LLVMBuildUDiv(c->b, mul_c(c, sl, p->K), cg_i64(c, S), "");
    LLVMValueRef k_hi =
        LLVMBuildUDiv(c->b, mul_c(c, add(c, sl, cg_i64(c, 1)), p->K), cg_i64(c, S), "");
    if (d) {
        gv_defer_cols(c, d, dargs, nbufs - 3, ap, k_lo, k_hi);
    }
    LLVMValueRef nb = cg_i64(c, p->N);
    zero_floats(c, acc, nb);
    gemv_rows(c, p, ap, bp, acc, cg_i64(c, 0), nb, k_lo, k_hi);
    LLVMValueRef dst = mul_c(c, sl, p->N);
    LLVMValueRef j = cg_for_begin(c, &lj, cg_i64(c, 0), nb, "j");
    LLVMBuildStore(c->b, LLVMBuildLoad2(c->b, c->t_f32, fptr(c, acc, j), ""),
                   fptr(c, pp, add(c, dst, j)));
    cg_for_end(c, &lj);
    cg_for_end(c, &ls);
    return cg_kernel_end(c, &k);
}

static dl_status emit_float_gemv(cg *c, const gemm_prob *p) {
    int64_t N = p->N, K = p->K, unit = gv_block(N), nblk = (N + unit - 1) / unit;
    int64_t S = gv_slices(p);
    // A deferred producer of A: taken here (its slices kernel finishes A)
    cg_gv_defer *d = c->gv_defer && c->gv_defer->p.y == p->a ? c->gv_defer : NULL;
    if (d) {
        c->gv_defer = NULL;
        if (p->sa_k != 1 || S == 0) {
            free(d);
            cg_error(c, "internal: '%s' cannot finish the deferred '%s'", p->y->name, p->a->name);
            return DL_ERR_BACKEND;
        }
    }
    uint32_t part = UINT32_MAX;
    if (S > 0) {
        dl_status st =
            cg_extra_buffer(c, (uint64_t)(S * N) * sizeof(float), DLRT_BUF_TEMP, NULL, &part);
        st = st == DL_OK ? emit_gemv_slices(c, p, S, part, d) : st;
        free(d);
        DL_TRY(st);
        if (gv_defer_ok(c, p, S)) { // this product's own sum goes to its reader
            cg_gv_defer *nd = dl_mem_calloc(1, sizeof *nd);
            if (!nd) {
                return DL_ERR_NOMEM;
            }
            nd->p = *p;
            if (p->epi) {
                memcpy(nd->epi, p->epi, p->n_epi * sizeof *p->epi);
                nd->p.epi = nd->epi;
            }
            nd->S = S;
            nd->part = part;
            nd->ops = c->node_ops ? c->node_ops : dl_ir_op_get_info(c->node->op)->name;
            c->gv_defer = nd;
            return DL_OK;
        }
    }
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, nblk, &k));
    LLVMValueRef pp = NULL;
    if (S > 0) {
        DL_TRY(cg_kernel_add_buf(c, &k, part));
        pp = k.ptr[k.n_args - 1];
    }
    int64_t span = N < GV_SPAN ? N : GV_SPAN;
    // acc: the span's sums (streamed here); with slices, none: each column's partial sums are
    // added where the epilogue reads its value.
    LLVMValueRef acc = S > 0 ? NULL : cg_entry_alloca(c, &k, c->t_f32, span);
    LLVMValueRef ap = k.ptr[1], bp = k.ptr[2];
    cg_loop lb, le;
    LLVMValueRef j_lo = mul_c(c, k.begin, unit);
    LLVMValueRef j_hi = min_c(c, mul_c(c, k.end, unit), cg_i64(c, N));
    LLVMValueRef cols = LLVMBuildSub(c->b, j_hi, j_lo, "");
    LLVMValueRef nspan =
        LLVMBuildUDiv(c->b, add(c, cols, cg_i64(c, span - 1)), cg_i64(c, span), "");
    LLVMValueRef sp = cg_for_begin(c, &lb, cg_i64(c, 0), nspan, "span");
    LLVMValueRef j0 = add(c, j_lo, mul_c(c, sp, span));
    LLVMValueRef nb = min_c(c, cg_i64(c, span), LLVMBuildSub(c->b, j_hi, j0, ""));
    if (S == 0) {
        zero_floats(c, acc, nb);
        gemv_rows(c, p, ap, bp, acc, j0, nb, cg_i64(c, 0), cg_i64(c, K));
    }
    // epilogue: y[j0 + j] = alpha * sum (+ beta * C[0, j0 + j]), the sum acc[j] or the slices'
    // partial sums of the column added in slice order
    LLVMValueRef j = cg_for_begin(c, &le, cg_i64(c, 0), nb, "j");
    LLVMValueRef col = add(c, j0, j);
    if (S > 0) {
        gv_sum_col(c, p, S, &k, k.ptr[0], pp, col);
    } else {
        LLVMValueRef v = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, acc, j), "");
        v = finish_elem(c, p, &k, v, NULL, mul_c(c, col, p->cs_n), cg_i64(c, 0), col);
        LLVMBuildStore(c->b, v, fptr(c, k.ptr[0], col));
    }
    cg_for_end(c, &le);
    cg_for_end(c, &lb);
    return cg_kernel_end(c, &k);
}

// The other layout: B's columns contiguous (sb_k == 1: Gemm's transB, weights stored [out, in]
// as PyTorch's Linear and ONNX exports have them) and A's row contiguous (sa_k == 1). Each y[j]
// is a dot product of A's row with one row of the stored B:
//
//   outer parallel range: ceil(N / GVT_ROWS) groups of rows j0 .. j0 + 3 (a last group past N
//   recomputes row N - 1 and stores nothing for the rows past N)
//     acc[r] = 0 (one <VW x float> per row, in registers)
//     for each VW-wide chunk of k: acc[r] = fmuladd(a[k..], B[j0 + r, k..], acc[r])
//     s[r] = the lanes of acc[r] summed in lane order, then the last K % VW terms one by one
//     y[j0 + r] = alpha * s[r] (+ beta * C[j0 + r])
//
// The order of every sum is fixed by K and the vector width alone, so any split of the range
// gives the same bytes.
#define GVT_ROWS 4

static bool is_gemv_t(cg *c, const gemm_prob *p) {
    int64_t vw = c->target->vector_width(c, DL_DT_FLOAT);
    return p->M == 1 && p->nb == 1 && p->sb_k == 1 && p->sa_k == 1 && vw >= 8 && p->K >= vw &&
           p->N >= GVT_ROWS && p->a->type.dtype == DL_DT_FLOAT && p->b->type.dtype == DL_DT_FLOAT &&
           p->y->type.dtype == DL_DT_FLOAT;
}

static dl_status emit_float_gemv_t(cg *c, const gemm_prob *p) {
    int64_t N = p->N, K = p->K, vw = c->target->vector_width(c, DL_DT_FLOAT);
    int64_t ngroups = (N + GVT_ROWS - 1) / GVT_ROWS, kv = K / vw;
    LLVMTypeRef vt = LLVMVectorType(c->t_f32, (unsigned)vw);
    dl_ir_value *vals[4 + GEMM_MAX_EXT];
    size_t nv = prob_vals(p, vals);
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, nv, ngroups, &k));
    LLVMValueRef ap = k.ptr[1], bp = k.ptr[2];
    cg_loop lg;
    LLVMValueRef g = cg_for_begin(c, &lg, k.begin, k.end, "g");
    LLVMValueRef j0 = mul_c(c, g, GVT_ROWS);
    LLVMValueRef row[GVT_ROWS], zero[GVT_ROWS];
    for (int r = 0; r < GVT_ROWS; r++) {
        LLVMValueRef jr = min_c(c, add(c, j0, cg_i64(c, r)), cg_i64(c, N - 1));
        row[r] = mul_c(c, jr, p->sb_n);
        zero[r] = LLVMConstNull(vt);
    }
    ploop lk;
    ploop_begin(c, &lk, cg_i64(c, 0), cg_i64(c, kv), zero, GVT_ROWS);
    LLVMValueRef k0 = mul_c(c, lk.iv, vw);
    LLVMValueRef x = load_vec(c, vt, fptr(c, ap, k0), 4);
    LLVMValueRef next[GVT_ROWS];
    for (int r = 0; r < GVT_ROWS; r++) {
        LLVMValueRef w = load_vec(c, vt, fptr(c, bp, add(c, row[r], k0)), 4);
        next[r] = fmuladd(c, x, w, lk.v[r]);
    }
    ploop_end(c, &lk, next);
    for (int r = 0; r < GVT_ROWS; r++) {
        LLVMValueRef sum = cg_f32(c, 0);
        for (int64_t l = 0; l < vw; l++) { // lane order
            sum = LLVMBuildFAdd(
                c->b, sum, LLVMBuildExtractElement(c->b, lk.v[r], cg_i32(c, (int32_t)l), ""), "");
        }
        for (int64_t kk = kv * vw; kk < K; kk++) { // at most vw - 1 terms, unrolled
            LLVMValueRef av = LLVMBuildLoad2(c->b, c->t_f32, fptr(c, ap, cg_i64(c, kk)), "");
            LLVMValueRef bv =
                LLVMBuildLoad2(c->b, c->t_f32, fptr(c, bp, add(c, row[r], cg_i64(c, kk))), "");
            sum = fmuladd(c, av, bv, sum);
        }
        LLVMValueRef j = add(c, j0, cg_i64(c, r));
        LLVMBasicBlockRef join = if_begin(c, LLVMBuildICmp(c->b, LLVMIntSLT, j, cg_i64(c, N), ""));
        LLVMValueRef v = finish_elem(c, p, &k, sum, NULL, mul_c(c, j, p->cs_n), cg_i64(c, 0), j);
        LLVMBuildStore(c->b, v, fptr(c, k.ptr[0], j));
        if_end(c, join);
    }
    cg_for_end(c, &lg);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// Problem setup

// Whether emit_prob runs p on the blocked kernel with prepacked B (c->prepack aside).
static bool takes_prepacked(cg *c, const gemm_prob *p) {
    if (!dl_dtype_is_float(p->y->type.dtype) || dl_ir_type_numel(&p->y->type) == 0 ||
        is_gemv(c, p) || is_gemv_t(c, p) || is_small(p) ||
        (is_small_tiled(c, p) && p->M <= ST_THIN_M)) {
        return false;
    }
    return prepackable(c, p, prepack_src(c, p));
}

static dl_status emit_prob(cg *c, const gemm_prob *p, bool is_gemm) {
    dl_dtype t = p->y->type.dtype;
    if (dl_ir_type_numel(&p->y->type) == 0) {
        return DL_OK; // nothing to write
    }
    // The infer entry computes no folded Cast (dl_cg__cast_prepacks): its reader must prepack.
    if (c->prepack && p->b->def && c->cast_pp && c->cast_pp[p->b->def->id] &&
        !takes_prepacked(c, p)) {
        cg_error(c, "internal: '%s' should read '%s' prepacked", p->y->name, p->b->name);
        return DL_ERR_BACKEND;
    }
    if (dl_dtype_is_float(t)) {
        if (is_gemv(c, p)) {
            return emit_float_gemv(c, p);
        }
        if (is_gemv_t(c, p)) {
            return emit_float_gemv_t(c, p);
        }
        if (is_small_tiled(c, p) && (is_small(p) || p->M <= ST_THIN_M)) {
            return emit_float_small_tiled(c, p);
        }
        return is_small(p) ? emit_float_small(c, p) : emit_float(c, p);
    }
    if (t == DL_DT_INT32 || t == DL_DT_INT64) {
        return emit_int(c, p, is_gemm);
    }
    cg_error(c, "dtype %s is not supported", dl_dtype_name(t));
    return DL_ERR_UNSUPPORTED;
}

// ---------------------------------------------------------------------------------------------
// Transposes read through strides
//
// Every kernel here reads A and B through element strides (sa_m, sa_k, sb_k, sb_n and one per
// batch dim), so a Transpose whose only readers are MatMul operands need not be materialised:
// the MatMul reads the Transpose's input with the permuted strides. Attention's K^T
// (Transpose <perm = [0, 2, 3, 1]> of the heads' view) and V, and the backward's B^T and A^T of
// a batched product (autodiff writes Transpose <perm = [.., -1, -2]>), each a copy of a
// [B, heads, T, d] tensor per step, become views. The packs move the same values either way
// (each has a fast path for a unit stride along k or along the rows, and an element-by-element
// one for any other layout), so the bytes of y do not change.

// A forward Cast to bfloat16 of a float32 param or constant W (mixed precision's weight cast)
// whose output is no root and whose every forward reader is a Gemm or MatMul reading it only as
// B on the blocked kernel with the bf16 instructions' prepacked panels (takes_prepacked): those
// readers' prepack kernels read W and round it as the Cast would, when the params change, so the
// infer entry needs no Cast kernel (the train step's forward still runs it for its own
// products). The MLP 784-1024x3-10 with `precision = bfloat16` at batch 256 spent 1.25 of 4.7 ms
// of inference in the three weight Casts.
dl_status dl_cg__cast_prepacks(cg *c, size_t n_fwd) {
    const dl_ir_module *m = c->m;
    size_t nn = m->nodes.len, nv = m->values.len;
    c->cast_pp = dl_mem_calloc(nn ? nn : 1, 1);
    uint8_t *root = dl_mem_calloc(nv ? nv : 1, 1);
    if (!c->cast_pp || !root) {
        free(root);
        return DL_ERR_NOMEM;
    }
    dl_ir_module_mark_roots(m, root);
    bool train = m->has_backward && m->train;
    for (size_t i = 0; i < n_fwd && i < nn; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        if (n->op != DL_IR_OP_CAST || n->n_inputs != 1 || n->n_outputs != 1 || !n->inputs[0]) {
            continue;
        }
        const dl_ir_value *w = n->inputs[0], *v = n->outputs[0];
        if (w->type.dtype != DL_DT_FLOAT || v->type.dtype != DL_DT_BFLOAT16 || root[v->id] ||
            (w->kind != DL_IR_VAL_PARAM && w->kind != DL_IR_VAL_CONST) || n->fuse_root) {
            continue;
        }
        c->cast_pp[i] = train ? 1 : 2; // tentatively: takes_prepacked reads it through B
        bool ok = false;
        for (size_t q = i + 1; q < n_fwd && q < nn; q++) {
            const dl_ir_node *x = m->nodes.data[q];
            bool reads = false, as_b = x->n_inputs > 1 && x->inputs[1] == v;
            for (size_t a = 0; a < x->n_inputs; a++) {
                reads = reads || x->inputs[a] == v;
                as_b = as_b && (a == 1 || x->inputs[a] != v);
            }
            if (!reads) {
                continue;
            }
            gemm_prob p;
            ok =
                as_b && (x->op == DL_IR_OP_GEMM || x->op == DL_IR_OP_MATMUL) &&
                (x->op == DL_IR_OP_GEMM ? gemm_setup(c, x, &p) : matmul_setup(c, x, &p)) == DL_OK &&
                p.b == v && takes_prepacked(c, &p);
            if (!ok) {
                break;
            }
        }
        c->cast_pp[i] = ok ? c->cast_pp[i] : 0;
    }
    free(root);
    return DL_OK;
}

dl_status dl_cg__transpose_folds(cg *c) {
    const dl_ir_module *m = c->m;
    size_t nn = m->nodes.len, nv = m->values.len;
    c->tr_fold = dl_mem_calloc(nn ? nn : 1, 1);
    // bad[v]: v has a use that needs it materialised (or is a root of the module); used[v]: some
    // node reads it.
    uint8_t *bad = dl_mem_calloc(nv ? nv : 1, 1), *used = dl_mem_calloc(nv ? nv : 1, 1);
    if (!c->tr_fold || !bad || !used) {
        free(bad);
        free(used);
        return DL_ERR_NOMEM;
    }
    dl_ir_module_mark_roots(m, bad);
    // In reverse topological order every use of a node's output is known when it is reached.
    for (size_t i = nn; i-- > 0;) {
        const dl_ir_node *n = m->nodes.data[i];
        int32_t perm[DL_MAX_RANK];
        const dl_ir_value *v = n->n_outputs == 1 ? n->outputs[0] : NULL;
        bool fold = n->op == DL_IR_OP_TRANSPOSE && v && n->n_inputs == 1 && n->inputs[0] &&
                    used[v->id] && !bad[v->id] && v->type.rank >= 2 &&
                    v->type.dtype == DL_DT_FLOAT && n->inputs[0]->type.dtype == DL_DT_FLOAT &&
                    dl_ir_type_numel(&v->type) > 0 && dl_cg__transpose_perm(n, perm);
        c->tr_fold[i] = fold;
        bool product = n->op == DL_IR_OP_MATMUL && n->n_inputs == 2 && n->inputs[0] &&
                       n->inputs[1] && n->inputs[0]->type.dtype == DL_DT_FLOAT &&
                       n->inputs[1]->type.dtype == DL_DT_FLOAT && v && v->type.dtype == DL_DT_FLOAT;
        for (size_t a = 0; a < n->n_inputs; a++) {
            const dl_ir_value *x = n->inputs[a];
            if (!x) {
                continue;
            }
            used[x->id] = 1;
            if (!fold && !(product && x->type.rank >= 2)) {
                bad[x->id] = 1;
            }
        }
    }
    free(bad);
    free(used);
    return DL_OK;
}

// The value a MatMul operand v is read from and v's element strides st[] in it: through the
// Transposes folded into their readers (c->tr_fold) to the first materialised value, which is
// contiguous.
static dl_ir_value *operand_view(const cg *c, dl_ir_value *v, int64_t *st) {
    int32_t r = v->type.rank, map[DL_MAX_RANK], perm[DL_MAX_RANK];
    for (int32_t i = 0; i < r; i++) {
        map[i] = i; // dim i of v is dim map[i] of `base`
    }
    dl_ir_value *base = v;
    while (c->tr_fold && base->def && c->tr_fold[base->def->id]) {
        const dl_ir_node *t = base->def;
        bool ok = dl_cg__transpose_perm(t, perm); // checked by dl_cg__transpose_folds
        DL_ASSERT(ok);
        (void)ok;
        for (int32_t i = 0; i < r; i++) {
            map[i] = perm[map[i]];
        }
        base = t->inputs[0];
    }
    int64_t cs[DL_MAX_RANK];
    cg_strides(&base->type, cs);
    for (int32_t i = 0; i < r; i++) {
        st[i] = cs[map[i]];
    }
    return base;
}

// x: [batch_a..., M, K] (or [K]); w: [batch_b..., K, N] (or [K]); y: [batch..., M, N] minus the
// dims dropped by 1-D promotion.
static dl_status matmul_setup(cg *c, const dl_ir_node *n, gemm_prob *pp) {
    gemm_prob p;
    memset(&p, 0, sizeof p);
    p.y = n->outputs[0];
    p.a = n->inputs[0];
    p.b = n->inputs[1];
    p.alpha = 1.0;
    const dl_ir_type *at = &p.a->type, *bt = &p.b->type;
    if (at->rank < 1 || bt->rank < 1) {
        cg_error(c, "inputs must have rank >= 1");
        return DL_ERR_UNSUPPORTED;
    }
    int32_t ra = at->rank, rb = bt->rank;
    p.M = ra == 1 ? 1 : at->dims[ra - 2].value;
    p.K = at->dims[ra - 1].value;
    p.N = rb == 1 ? 1 : bt->dims[rb - 1].value;
    // Element strides of a and b (contiguous, or through folded Transposes: operand_view).
    int64_t sta[DL_MAX_RANK], stb[DL_MAX_RANK];
    p.a = operand_view(c, p.a, sta);
    p.b = operand_view(c, p.b, stb);
    p.sa_k = sta[ra - 1];
    p.sa_m = ra == 1 ? p.K : sta[ra - 2];
    p.sb_n = rb == 1 ? 1 : stb[rb - 1];
    p.sb_k = rb == 1 ? stb[0] : stb[rb - 2];
    // Batch dims: numpy broadcast of a's and b's leading dims.
    int32_t bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0;
    p.br = bra > brb ? bra : brb;
    p.nb = 1;
    for (int32_t d = p.br - 1; d >= 0; d--) {
        int32_t ia = d - (p.br - bra), ib = d - (p.br - brb);
        int64_t da = ia >= 0 ? at->dims[ia].value : 1, db = ib >= 0 ? bt->dims[ib].value : 1;
        if (da != db && da != 1 && db != 1) {
            cg_error(c, "batch dimensions do not broadcast");
            return DL_ERR_UNSUPPORTED;
        }
        p.bd[d] = da == 1 ? db : da;
        p.abs_[d] = da == 1 ? 0 : sta[ia];
        p.bbs[d] = db == 1 ? 0 : stb[ib];
        p.nb *= p.bd[d];
    }
    if (p.nb * p.M * p.N != dl_ir_type_numel(&p.y->type)) {
        cg_error(c, "the output type does not match the inputs");
        return DL_ERR_UNSUPPORTED;
    }
    *pp = p;
    return DL_OK;
}

static dl_status lower_matmul(cg *c, const dl_ir_node *n) {
    gemm_prob p;
    DL_TRY(matmul_setup(c, n, &p));
    return emit_prob(c, &p, false);
}

// A: [M, K] (transA: [K, M]); B: [K, N] (transB: [N, K]); C broadcast to [M, N]; y: [M, N].
static dl_status gemm_setup(cg *c, const dl_ir_node *n, gemm_prob *pp) {
    gemm_prob p;
    memset(&p, 0, sizeof p);
    p.y = n->outputs[0];
    p.a = n->inputs[0];
    p.b = n->inputs[1];
    p.cv = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const dl_ir_type *at = &p.a->type, *bt = &p.b->type, *yt = &p.y->type;
    if (at->rank != 2 || bt->rank != 2 || yt->rank != 2) {
        cg_error(c, "A, B and the output must have rank 2");
        return DL_ERR_UNSUPPORTED;
    }
    bool ta = dl_ir_node_attr_int(n, "transA") != 0, tb = dl_ir_node_attr_int(n, "transB") != 0;
    p.alpha = dl_ir_node_attr_float(n, "alpha");
    p.beta = dl_ir_node_attr_float(n, "beta");
    int64_t a0 = at->dims[0].value, a1 = at->dims[1].value;
    int64_t b0 = bt->dims[0].value, b1 = bt->dims[1].value;
    p.M = ta ? a1 : a0;
    p.K = ta ? a0 : a1;
    p.N = tb ? b0 : b1;
    int64_t Kb = tb ? b1 : b0;
    if (Kb != p.K || yt->dims[0].value != p.M || yt->dims[1].value != p.N) {
        cg_error(c, "the shapes of A, B and the output do not agree");
        return DL_ERR_UNSUPPORTED;
    }
    // A[i, k] at i * sa_m + k * sa_k; B[k, j] at k * sb_k + j * sb_n.
    p.sa_m = ta ? 1 : a1;
    p.sa_k = ta ? a1 : 1;
    p.sb_k = tb ? 1 : b1;
    p.sb_n = tb ? b1 : 1;
    p.nb = 1;
    if (p.cv) {
        const dl_ir_type *ct = &p.cv->type;
        if (ct->rank > 2) {
            cg_error(c, "C must have rank <= 2");
            return DL_ERR_UNSUPPORTED;
        }
        for (int32_t d = 0; d < ct->rank; d++) {
            int64_t cd = ct->dims[d].value, yd = yt->dims[d + 2 - ct->rank].value;
            if (cd != 1 && cd != yd) {
                cg_error(c, "C does not broadcast to the output");
                return DL_ERR_UNSUPPORTED;
            }
        }
        int64_t cs[2];
        cg_broadcast_strides(ct, yt, cs);
        p.cs_m = cs[0];
        p.cs_n = cs[1];
    }
    *pp = p;
    return DL_OK;
}

static dl_status lower_gemm(cg *c, const dl_ir_node *n) {
    gemm_prob p;
    DL_TRY(gemm_setup(c, n, &p));
    return emit_prob(c, &p, true);
}

// A fusion group headed by a Gemm or MatMul of float32 (passes/fusion.c): the product's kernel
// with the other members as its epilogue, storing only the root's output. The epilogue loads
// an outside value at the element's row and column in its batch, so a batched product's
// members may read only single-element values (offset 0 in every batch).
dl_status dl_cg__lower_product_fused(cg *c, const dl_ir_node *const *g, size_t n) {
    const dl_ir_node *head = g[0];
    dl_ir_value *y = g[n - 1]->outputs[0];
    gemm_prob p;
    if (n > GEMM_MAX_EPI || y->type.rank < 2) {
        cg_error(c, "a fused product epilogue has at most %d nodes and an output of rank >= 2",
                 GEMM_MAX_EPI - 1);
        return DL_ERR_UNSUPPORTED;
    }
    DL_TRY(head->op == DL_IR_OP_GEMM ? gemm_setup(c, head, &p) : matmul_setup(c, head, &p));
    if (!dl_ir_type_same_dims(&y->type, &p.y->type)) {
        cg_error(c, "a fused product epilogue needs the product's dims");
        return DL_ERR_UNSUPPORTED;
    }
    p.y = y;
    p.epi = g;
    p.n_epi = n;
    DL_TRY(dl_cg__fused_inputs(c, g, n, 1, p.ext, GEMM_MAX_EXT, &p.n_ext));
    int32_t r = y->type.rank;
    for (size_t e = 0; e < p.n_ext; e++) {
        if ((p.nb != 1 || r != 2) && dl_ir_type_numel(&p.ext[e]->type) != 1) {
            cg_error(c, "a batched product's fused epilogue reads only single-element values");
            return DL_ERR_UNSUPPORTED;
        }
        int64_t st[DL_MAX_RANK];
        cg_broadcast_strides(&p.ext[e]->type, &y->type, st);
        p.ext_sm[e] = st[r - 2];
        p.ext_sn[e] = st[r - 1];
    }
    return emit_prob(c, &p, head->op == DL_IR_OP_GEMM);
}

// Hooks of lower.c's table.

dl_status dl_cg__lower_matmul(cg *c, const dl_ir_node *n) {
    return lower_matmul(c, n);
}

dl_status dl_cg__lower_gemm(cg *c, const dl_ir_node *n) {
    return lower_gemm(c, n);
}
