// codegen/lower_shape.c — lowering of the data-movement ops: Reshape Flatten Squeeze Unsqueeze
// Transpose Concat Split Slice Gather Expand Pad.
//
// Every op here only moves elements, so elements travel as raw storage (an integer of the
// element's width: float is copied as i32, float16/bfloat16 as i16, bool as i8), never through
// the compute type: no rounding, NaN payloads and bool bytes survive bit for bit.
//
// Most ops are one generic strided copy (copy_plan): an iteration space (the output dims, or a
// slice of them for Concat), per-dim output and input strides in elements, and constant base
// offsets. Size-1 dims are dropped and neighbours that are contiguous on both sides are merged
// (as emit_map in lower_elem.c), so Reshape and friends become one flat range copied with
// llvm.memcpy, and a contiguous innermost run becomes one memcpy per outer iteration. A
// transpose whose reads are contiguous along some other dim is tiled (tile x tile blocks) so
// both the reads and the writes stay in cache. The kernel's parallel range is the outermost
// merged dim; every outer iteration writes its own output elements only.
// Gather and Pad have their own index logic (below).
#include "cg_internal.h"

#include <string.h>

// ---------------------------------------------------------------------------------------------
// Raw element access

static size_t elem_size(dl_dtype t) {
    return dl_dtype_size(t);
}

// The integer type as wide as one element of `t`.
static LLVMTypeRef raw_type(cg *c, dl_dtype t) {
    return LLVMIntTypeInContext(c->ctx, (unsigned)(elem_size(t) * 8));
}

static LLVMValueRef raw_gep(cg *c, LLVMTypeRef rt, LLVMValueRef base, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(c->b, rt, base, &idx, 1, "");
}

static LLVMValueRef raw_load(cg *c, LLVMTypeRef rt, LLVMValueRef base, LLVMValueRef idx) {
    return LLVMBuildLoad2(c->b, rt, raw_gep(c, rt, base, idx), "");
}

static void raw_store(cg *c, LLVMTypeRef rt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v) {
    LLVMBuildStore(c->b, v, raw_gep(c, rt, base, idx));
}

// Copies `n` (i64) elements of dtype `t` from src[si] to dst[di] with llvm.memcpy (distinct
// buffers never overlap). Small constant sizes are expanded inline by LLVM.
static void raw_memcpy(cg *c, dl_dtype t, LLVMValueRef dst, LLVMValueRef di, LLVMValueRef src,
                       LLVMValueRef si, LLVMValueRef n) {
    LLVMTypeRef rt = raw_type(c, t);
    unsigned al = (unsigned)elem_size(t);
    LLVMValueRef bytes = LLVMBuildMul(c->b, n, cg_i64(c, (int64_t)al), "");
    LLVMBuildMemCpy(c->b, raw_gep(c, rt, dst, di), al, raw_gep(c, rt, src, si), al, bytes);
}

static LLVMValueRef add_scaled(cg *c, LLVMValueRef acc, LLVMValueRef iv, int64_t stride) {
    if (stride == 0) {
        return acc;
    }
    LLVMValueRef t = stride == 1 ? iv : LLVMBuildMul(c->b, iv, cg_i64(c, stride), "");
    return LLVMBuildAdd(c->b, acc, t, "");
}

static LLVMValueRef smin64(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return cg_intrinsic2(c, "llvm.smin", c->t_i64, a, b);
}

static LLVMValueRef smax64(cg *c, LLVMValueRef a, LLVMValueRef b) {
    return cg_intrinsic2(c, "llvm.smax", c->t_i64, a, b);
}

// Normalises a possibly negative axis; false if out of range.
static bool norm_axis(int64_t a, int32_t rank, int32_t *out) {
    if (a < -(int64_t)rank || a >= (int64_t)rank) {
        return false;
    }
    *out = (int32_t)(a < 0 ? a + rank : a);
    return true;
}

static bool same_dtype(cg *c, const dl_ir_value *out, const dl_ir_value *in) {
    if (out->type.dtype != in->type.dtype) {
        cg_error(c, "input dtype %s differs from output dtype %s", dl_dtype_name(in->type.dtype),
                 dl_dtype_name(out->type.dtype));
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Generic strided copy: out[obase + sum_j i_j * ost[j]] = in[ibase + sum_j i_j * ist[j]] for
// every i in the box `dims`.

typedef struct copy_plan {
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    int64_t ost[DL_MAX_RANK], ist[DL_MAX_RANK];
    int64_t obase, ibase;
} copy_plan;

enum { TILE = 16 }; // transpose tile edge in elements (16 measured best of 8/16/32/64)

// A plan whose box is the output's own shape, written in C order from offset 0.
static void plan_over(copy_plan *p, const dl_ir_type *out) {
    memset(p, 0, sizeof *p);
    p->rank = out->rank;
    for (int32_t j = 0; j < out->rank; j++) {
        p->dims[j] = out->dims[j].value;
    }
    cg_strides(out, p->ost);
}

// Drops size-1 dims and fuses neighbours contiguous on both sides. Returns the element count.
static int64_t plan_merge(copy_plan *p) {
    int64_t numel = 1;
    int32_t R = 0;
    for (int32_t j = 0; j < p->rank; j++) {
        int64_t d = p->dims[j];
        numel *= d;
        if (d == 1) {
            continue;
        }
        if (R > 0 && p->ost[R - 1] == p->ost[j] * d && p->ist[R - 1] == p->ist[j] * d) {
            p->dims[R - 1] *= d;
            p->ost[R - 1] = p->ost[j];
            p->ist[R - 1] = p->ist[j];
        } else {
            p->dims[R] = d;
            p->ost[R] = p->ost[j];
            p->ist[R] = p->ist[j];
            R++;
        }
    }
    if (R == 0) { // a scalar or all dims 1: one element
        p->dims[0] = 1;
        p->ost[0] = 0;
        p->ist[0] = 0;
        R = 1;
    }
    p->rank = R;
    return numel;
}

// One loop level of a copy nest: a whole dim, the tile index of a tiled dim, or the elements
// inside the current tile of a tiled dim.
typedef enum { LV_FULL, LV_TILE, LV_IN_TILE } level_kind;

// Emits one kernel copying `in` into `out` along plan `p` (dtypes must match).
static dl_status emit_copy(cg *c, dl_ir_value *out, dl_ir_value *in, copy_plan p) {
    if (!same_dtype(c, out, in)) {
        return DL_ERR_UNSUPPORTED;
    }
    if (plan_merge(&p) == 0) {
        return DL_OK; // empty: nothing to write
    }
    dl_dtype dt = out->type.dtype;
    LLVMTypeRef rt = raw_type(c, dt);
    int32_t R = p.rank;
    dl_ir_value *vals[2] = {out, in};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 2, p.dims[0], &k));
    // Contiguous innermost run on both sides: memcpy it whole.
    bool inner_memcpy = p.ost[R - 1] == 1 && p.ist[R - 1] == 1;
    if (inner_memcpy && R == 1) {
        // out[obase + begin .. obase + end) = in[ibase + begin ..]. A flat copy whose output the
        // memory plan put in its input's place (Reshape, Flatten, Squeeze, Unsqueeze: the op
        // table's FLAT in-place column) has nothing to move.
        LLVMBasicBlockRef join = NULL;
        if (p.obase == p.ibase) {
            LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
            LLVMBasicBlockRef copy = LLVMAppendBasicBlockInContext(c->ctx, fn, "copy");
            join = LLVMAppendBasicBlockInContext(c->ctx, fn, "copied");
            LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, k.ptr[0], k.ptr[1], ""), join,
                            copy);
            LLVMPositionBuilderAtEnd(c->b, copy);
        }
        LLVMValueRef n = LLVMBuildSub(c->b, k.end, k.begin, "");
        raw_memcpy(c, dt, k.ptr[0], LLVMBuildAdd(c->b, k.begin, cg_i64(c, p.obase), ""), k.ptr[1],
                   LLVMBuildAdd(c->b, k.begin, cg_i64(c, p.ibase), ""), n);
        if (join) {
            LLVMBuildBr(c->b, join);
            LLVMPositionBuilderAtEnd(c->b, join);
        }
        return cg_kernel_end(c, &k);
    }
    // Tiling: writes are contiguous along the innermost dim q; if reads are contiguous along
    // another dim t, walk TILE x TILE blocks of (t, q) so both sides stay in cache.
    int32_t q = R - 1, t = -1;
    if (!inner_memcpy && p.ost[q] == 1 && p.dims[q] >= TILE) {
        for (int32_t j = 0; j < q; j++) {
            if (p.ist[j] == 1 && p.dims[j] >= TILE) {
                t = j;
            }
        }
    }
    // Loop order: untiled dims in order, then tile(t), tile(q), in-tile(t), in-tile(q).
    int32_t lv_dim[DL_MAX_RANK + 2];
    level_kind lv_kind[DL_MAX_RANK + 2];
    int32_t n_lv = 0;
    int32_t n_loops_dims = inner_memcpy ? R - 1 : R; // the memcpy'd dim gets no loop
    for (int32_t j = 0; j < n_loops_dims; j++) {
        if (t >= 0 && (j == t || j == q)) {
            continue;
        }
        lv_dim[n_lv] = j;
        lv_kind[n_lv++] = LV_FULL;
    }
    if (t >= 0) {
        int32_t order[4] = {t, q, t, q};
        for (int32_t i = 0; i < 4; i++) {
            lv_dim[n_lv] = order[i];
            lv_kind[n_lv++] = i < 2 ? LV_TILE : LV_IN_TILE;
        }
    }
    cg_loop loops[DL_MAX_RANK + 2];
    LLVMValueRef tile_lo[DL_MAX_RANK];
    LLVMValueRef oo = cg_i64(c, p.obase), io = cg_i64(c, p.ibase);
    for (int32_t l = 0; l < n_lv; l++) {
        int32_t j = lv_dim[l];
        // The dim's own range: [begin, end) for the parallel dim 0, else [0, dims[j]).
        LLVMValueRef lo = j == 0 ? k.begin : cg_i64(c, 0);
        LLVMValueRef hi = j == 0 ? k.end : cg_i64(c, p.dims[j]);
        if (lv_kind[l] == LV_TILE) {
            // tiles: ceil((hi - lo) / TILE); the tile's first element is lo + tile * TILE
            LLVMValueRef len = LLVMBuildSub(c->b, hi, lo, "");
            LLVMValueRef nt = LLVMBuildSDiv(c->b, LLVMBuildAdd(c->b, len, cg_i64(c, TILE - 1), ""),
                                            cg_i64(c, TILE), "");
            LLVMValueRef ti = cg_for_begin(c, &loops[l], cg_i64(c, 0), nt, "tile");
            tile_lo[j] = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, ti, cg_i64(c, TILE), ""), "");
            continue;
        }
        if (lv_kind[l] == LV_IN_TILE) {
            lo = tile_lo[j];
            hi = smin64(c, hi, LLVMBuildAdd(c->b, lo, cg_i64(c, TILE), ""));
        }
        LLVMValueRef iv = cg_for_begin(c, &loops[l], lo, hi, "i");
        oo = add_scaled(c, oo, iv, p.ost[j]);
        io = add_scaled(c, io, iv, p.ist[j]);
    }
    if (inner_memcpy) {
        raw_memcpy(c, dt, k.ptr[0], oo, k.ptr[1], io, cg_i64(c, p.dims[R - 1]));
    } else {
        raw_store(c, rt, k.ptr[0], oo, raw_load(c, rt, k.ptr[1], io));
    }
    for (int32_t l = n_lv - 1; l >= 0; l--) {
        cg_for_end(c, &loops[l]);
    }
    return cg_kernel_end(c, &k);
}

// Reshape, Flatten, Squeeze, Unsqueeze: the same elements in the same order.
static dl_status lower_flat_copy(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *in = n->inputs[0];
    int64_t numel = dl_ir_type_numel(&out->type);
    if (numel != dl_ir_type_numel(&in->type)) {
        cg_error(c, "cannot copy %lld elements into %lld", (long long)dl_ir_type_numel(&in->type),
                 (long long)numel);
        return DL_ERR_UNSUPPORTED;
    }
    copy_plan p = {.rank = 1, .dims = {numel}, .ost = {1}, .ist = {1}};
    return emit_copy(c, out, in, p);
}

bool dl_cg__transpose_perm(const dl_ir_node *n, int32_t *perm) {
    int32_t r = n->inputs[0]->type.rank;
    if (r < 0 || r > DL_MAX_RANK) {
        return false;
    }
    for (int32_t i = 0; i < r; i++) {
        perm[i] = r - 1 - i;
    }
    const dl_ir_attr *a = dl_ir_node_attr(n, "perm");
    if (a && a->n > 0) {
        if ((int32_t)a->n != r) {
            return false;
        }
        for (int32_t i = 0; i < r; i++) {
            if (!norm_axis(a->ints[i], r, &perm[i])) {
                return false;
            }
        }
    }
    bool seen[DL_MAX_RANK] = {false};
    for (int32_t i = 0; i < r; i++) {
        if (seen[perm[i]]) {
            return false;
        }
        seen[perm[i]] = true;
    }
    return true;
}

// Transpose <perm> (x): y dim i is x dim perm[i] (default: reversed).
static dl_status lower_transpose(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *in = n->inputs[0];
    const dl_ir_type *xt = &in->type;
    int32_t r = xt->rank;
    int32_t perm[DL_MAX_RANK];
    if (!dl_cg__transpose_perm(n, perm)) {
        cg_error(c, "perm is not a permutation of the %d axes", (int)r);
        return DL_ERR_UNSUPPORTED;
    }
    // x: [d_0 .. d_{r-1}] -> y: [d_perm[0] .. d_perm[r-1]]
    copy_plan p;
    plan_over(&p, &out->type);
    int64_t xst[DL_MAX_RANK];
    cg_strides(xt, xst);
    for (int32_t i = 0; i < r; i++) {
        p.ist[i] = xst[perm[i]];
    }
    return emit_copy(c, out, in, p);
}

// Expand <shape> (x): numpy broadcast of x to the output shape.
static dl_status lower_expand(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *in = n->inputs[0];
    copy_plan p;
    plan_over(&p, &out->type);
    cg_broadcast_strides(&in->type, &out->type, p.ist);
    return emit_copy(c, out, in, p);
}

// Concat <axis> (x_0, ..., x_{n-1}): one kernel per input, each writing its own slab
// y[..., off_k : off_k + x_k.dims[axis], ...].
static dl_status lower_concat(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0];
    const dl_ir_type *yt = &out->type;
    int32_t ax;
    if (!norm_axis(dl_ir_node_attr_int(n, "axis"), yt->rank, &ax)) {
        cg_error(c, "axis is out of range for rank %d", (int)yt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    int64_t yst[DL_MAX_RANK];
    cg_strides(yt, yst);
    int64_t off = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        dl_ir_value *in = n->inputs[i];
        if (!in || in->type.rank != yt->rank) {
            cg_error(c, "input %zu has a different rank", i);
            return DL_ERR_UNSUPPORTED;
        }
        copy_plan p;
        plan_over(&p, &in->type);
        cg_strides(&in->type, p.ist);
        memcpy(p.ost, yst, sizeof yst);
        p.obase = off * yst[ax];
        DL_TRY(emit_copy(c, out, in, p));
        off += in->type.dims[ax].value;
    }
    if (off != yt->dims[ax].value) {
        cg_error(c, "inputs add up to %lld along axis %d, output has %lld", (long long)off, (int)ax,
                 (long long)yt->dims[ax].value);
        return DL_ERR_UNSUPPORTED;
    }
    return DL_OK;
}

// Split <axis, split | num_outputs> (x): output k is x[..., off_k : off_k + y_k.dims[axis], ...];
// the sizes come from the outputs' inferred types.
static dl_status lower_split(cg *c, const dl_ir_node *n) {
    dl_ir_value *in = n->inputs[0];
    const dl_ir_type *xt = &in->type;
    int32_t ax;
    if (!norm_axis(dl_ir_node_attr_int(n, "axis"), xt->rank, &ax)) {
        cg_error(c, "axis is out of range for rank %d", (int)xt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    int64_t xst[DL_MAX_RANK];
    cg_strides(xt, xst);
    int64_t off = 0;
    for (size_t i = 0; i < n->n_outputs; i++) {
        dl_ir_value *out = n->outputs[i];
        if (out->type.rank != xt->rank) {
            cg_error(c, "output %zu has a different rank", i);
            return DL_ERR_UNSUPPORTED;
        }
        off += out->type.dims[ax].value;
    }
    if (off != xt->dims[ax].value) {
        cg_error(c, "outputs add up to %lld along axis %d, input has %lld", (long long)off, (int)ax,
                 (long long)xt->dims[ax].value);
        return DL_ERR_UNSUPPORTED;
    }
    off = 0;
    for (size_t i = 0; i < n->n_outputs; i++) {
        dl_ir_value *out = n->outputs[i];
        copy_plan p;
        plan_over(&p, &out->type);
        memcpy(p.ist, xst, sizeof xst);
        p.ibase = off * xst[ax];
        DL_TRY(emit_copy(c, out, in, p));
        off += out->type.dims[ax].value;
    }
    return DL_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// Slice <starts, ends, axes?, steps?> (x): the effective start and step per axis are computed
// here exactly as the shape pass and the evaluator do (negative starts/ends count from the end,
// then clamp to [0, dim] for positive steps, start to [0, dim-1] and end to [-1, dim-1] for
// negative ones); the output dims are the inferred type's.
static dl_status lower_slice(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *in = n->inputs[0];
    const dl_ir_type *xt = &in->type;
    const dl_ir_attr *st = dl_ir_node_attr(n, "starts"), *en = dl_ir_node_attr(n, "ends");
    const dl_ir_attr *axs = dl_ir_node_attr(n, "axes"), *sp = dl_ir_node_attr(n, "steps");
    if (!st || !en || st->n != en->n || (axs && axs->n && axs->n != st->n) ||
        (sp && sp->n && sp->n != st->n) || out->type.rank != xt->rank) {
        cg_error(c, "starts, ends, axes and steps must have the same length");
        return DL_ERR_UNSUPPORTED;
    }
    int64_t start[DL_MAX_RANK] = {0}, step[DL_MAX_RANK];
    for (int32_t i = 0; i < xt->rank; i++) {
        step[i] = 1;
    }
    for (size_t i = 0; i < st->n; i++) {
        int64_t axis = (axs && axs->n) ? axs->ints[i] : (int64_t)i;
        int32_t a;
        if (!norm_axis(axis, xt->rank, &a)) {
            cg_error(c, "axis %lld is out of range for rank %d", (long long)axis, (int)xt->rank);
            return DL_ERR_UNSUPPORTED;
        }
        int64_t d = xt->dims[a].value, s = st->ints[i];
        int64_t pstep = (sp && sp->n) ? sp->ints[i] : 1;
        if (pstep == 0) {
            cg_error(c, "step must not be 0");
            return DL_ERR_UNSUPPORTED;
        }
        s = s < 0 ? s + d : s;
        s = pstep > 0 ? clamp64(s, 0, d) : clamp64(s, 0, d - 1);
        start[a] = s;
        step[a] = pstep;
    }
    // y[i] = x[start + i * step]
    copy_plan p;
    plan_over(&p, &out->type);
    int64_t xst[DL_MAX_RANK];
    cg_strides(xt, xst);
    for (int32_t i = 0; i < xt->rank; i++) {
        p.ist[i] = step[i] * xst[i];
        if (out->type.dims[i].value > 0) { // an empty axis never reads: its start is moot
            p.ibase += start[i] * xst[i];
        }
    }
    return emit_copy(c, out, in, p);
}

// ---------------------------------------------------------------------------------------------
// Gather <axis> (x, idx): y[a..., i..., b...] = x[a..., idx[i...], b...].
//
// x viewed as [O, D, I] (O = dims before axis, I = dims after), idx flattened to [K], y as
// [O, K, I]. The parallel range is O * K; iteration r = o * K + k copies one run of I elements
// (memcpy). Negative indices wrap once (j + D); an index still outside [0, D) is a data error
// in the reference and is CLAMPED into [0, D - 1] here, so compiled code never reads out of
// bounds.

static dl_status lower_gather(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *x = n->inputs[0], *idx = n->inputs[1];
    const dl_ir_type *xt = &x->type;
    if (!same_dtype(c, out, x)) {
        return DL_ERR_UNSUPPORTED;
    }
    dl_dtype it = idx->type.dtype;
    if (it != DL_DT_INT32 && it != DL_DT_INT64) {
        cg_error(c, "indices must be int32 or int64, got %s", dl_dtype_name(it));
        return DL_ERR_UNSUPPORTED;
    }
    int32_t ax;
    if (!norm_axis(dl_ir_node_attr_int(n, "axis"), xt->rank, &ax)) {
        cg_error(c, "axis is out of range for rank %d", (int)xt->rank);
        return DL_ERR_UNSUPPORTED;
    }
    int64_t O = 1, I = 1, D = xt->dims[ax].value, K = dl_ir_type_numel(&idx->type);
    for (int32_t i = 0; i < ax; i++) {
        O *= xt->dims[i].value;
    }
    for (int32_t i = ax + 1; i < xt->rank; i++) {
        I *= xt->dims[i].value;
    }
    if (O * K * I != dl_ir_type_numel(&out->type)) {
        cg_error(c, "output has %lld elements, expected %lld",
                 (long long)dl_ir_type_numel(&out->type), (long long)(O * K * I));
        return DL_ERR_UNSUPPORTED;
    }
    if (O * K * I == 0) {
        return DL_OK;
    }
    if (D == 0) {
        cg_error(c, "cannot gather from an empty axis");
        return DL_ERR_UNSUPPORTED;
    }
    dl_dtype dt = out->type.dtype;
    dl_ir_value *vals[3] = {out, x, idx};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, 3, O * K, &k));
    cg_loop l;
    LLVMValueRef r = cg_for_begin(c, &l, k.begin, k.end, "r");
    LLVMValueRef o = LLVMBuildSDiv(c->b, r, cg_i64(c, K), "o");
    LLVMValueRef kk = LLVMBuildSRem(c->b, r, cg_i64(c, K), "k");
    LLVMValueRef j = cg_load(c, k.ptr[2], it, kk);
    if (it == DL_DT_INT32) {
        j = LLVMBuildSExt(c->b, j, c->t_i64, "");
    }
    // j < 0: j + D; then clamp into [0, D - 1] (out-of-range data error: see above)
    LLVMValueRef neg = LLVMBuildICmp(c->b, LLVMIntSLT, j, cg_i64(c, 0), "");
    j = LLVMBuildSelect(c->b, neg, LLVMBuildAdd(c->b, j, cg_i64(c, D), ""), j, "");
    j = smax64(c, cg_i64(c, 0), smin64(c, j, cg_i64(c, D - 1)));
    // src = (o * D + j) * I, dst = r * I
    LLVMValueRef src = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, o, cg_i64(c, D), ""), j, "");
    src = LLVMBuildMul(c->b, src, cg_i64(c, I), "");
    LLVMValueRef dst = LLVMBuildMul(c->b, r, cg_i64(c, I), "");
    if (I == 1) {
        LLVMTypeRef rt = raw_type(c, dt);
        raw_store(c, rt, k.ptr[0], dst, raw_load(c, rt, k.ptr[1], src));
    } else {
        raw_memcpy(c, dt, k.ptr[0], dst, k.ptr[1], src, cg_i64(c, I));
    }
    cg_for_end(c, &l);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------
// Pad <pads, mode, value> (x, constant_value?): y coordinate o maps to x coordinate o - b along
// each axis (b = begin pad, negative pads crop); outside [0, d) the mode decides: constant
// writes the value (input 1 when given, else the `value` attribute — the evaluator's order),
// edge clamps, wrap takes it modulo d, reflect mirrors without repeating the edge.
//
// y viewed as [rows, W] (W = last dim). The parallel range is the row count; a row's outer
// coordinates are decoded with div/mod by constants. A row lies either wholly outside x
// (constant mode: fill) or maps to one x row, copied as three runs: left pad [0, L), the
// interior [L, M) (one memcpy), right pad [M, W).

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

// Maps coordinate `cc` (i64, may be outside [0, d)) into [0, d) for the non-constant modes.
static LLVMValueRef pad_map(cg *c, pad_mode mode, LLVMValueRef cc, int64_t d) {
    LLVMValueRef zero = cg_i64(c, 0);
    switch (mode) {
    case PAD_EDGE:
        return smax64(c, zero, smin64(c, cc, cg_i64(c, d - 1)));
    case PAD_WRAP: {
        LLVMValueRef m = LLVMBuildSRem(c->b, cc, cg_i64(c, d), "");
        LLVMValueRef neg = LLVMBuildICmp(c->b, LLVMIntSLT, m, zero, "");
        return LLVMBuildSelect(c->b, neg, LLVMBuildAdd(c->b, m, cg_i64(c, d), ""), m, "");
    }
    case PAD_REFLECT: {
        if (d == 1) {
            return zero;
        }
        int64_t per = 2 * (d - 1);
        LLVMValueRef m = LLVMBuildSRem(c->b, cc, cg_i64(c, per), "");
        LLVMValueRef neg = LLVMBuildICmp(c->b, LLVMIntSLT, m, zero, "");
        m = LLVMBuildSelect(c->b, neg, LLVMBuildAdd(c->b, m, cg_i64(c, per), ""), m, "");
        LLVMValueRef hi = LLVMBuildICmp(c->b, LLVMIntSGE, m, cg_i64(c, d), "");
        return LLVMBuildSelect(c->b, hi, LLVMBuildSub(c->b, cg_i64(c, per), m, ""), m, "");
    }
    case PAD_CONSTANT:
        break;
    }
    DL_UNREACHABLE();
}

typedef struct pad_ctx {
    pad_mode mode;
    dl_dtype dt;
    LLVMTypeRef rt;
    LLVMValueRef y, x;
    LLVMValueRef cval; // constant mode: the pad value as raw storage
} pad_ctx;

// Writes y[yrow + o] for o in [lo, hi) that lie outside x along the last axis (d = its size,
// b = its begin pad): the constant, or the mapped element of the x row at xrow.
static void pad_edge_run(cg *c, const pad_ctx *pc, LLVMValueRef yrow, LLVMValueRef xrow, int64_t lo,
                         int64_t hi, int64_t b, int64_t d) {
    if (lo >= hi) {
        return;
    }
    cg_loop l;
    LLVMValueRef o = cg_for_begin(c, &l, cg_i64(c, lo), cg_i64(c, hi), "o");
    LLVMValueRef v;
    if (pc->mode == PAD_CONSTANT) {
        v = pc->cval;
    } else {
        LLVMValueRef xc = pad_map(c, pc->mode, LLVMBuildSub(c->b, o, cg_i64(c, b), ""), d);
        v = raw_load(c, pc->rt, pc->x, LLVMBuildAdd(c->b, xrow, xc, ""));
    }
    raw_store(c, pc->rt, pc->y, LLVMBuildAdd(c->b, yrow, o, ""), v);
    cg_for_end(c, &l);
}

static dl_status lower_pad(cg *c, const dl_ir_node *n) {
    dl_ir_value *out = n->outputs[0], *x = n->inputs[0];
    dl_ir_value *cv = n->n_inputs > 1 ? n->inputs[1] : NULL;
    const dl_ir_type *xt = &x->type, *yt = &out->type;
    int32_t r = xt->rank;
    if (!same_dtype(c, out, x)) {
        return DL_ERR_UNSUPPORTED;
    }
    const dl_ir_attr *pa = dl_ir_node_attr(n, "pads");
    if (!pa || (int32_t)pa->n != 2 * r || yt->rank != r) {
        cg_error(c, "pads must have %d entries", (int)(2 * r));
        return DL_ERR_UNSUPPORTED;
    }
    const char *ms = dl_ir_node_attr_string(n, "mode");
    pad_mode mode = strcmp(ms, "reflect") == 0 ? PAD_REFLECT
                    : strcmp(ms, "edge") == 0  ? PAD_EDGE
                    : strcmp(ms, "wrap") == 0  ? PAD_WRAP
                                               : PAD_CONSTANT;
    if (cv && (cv->type.dtype != x->type.dtype || dl_ir_type_numel(&cv->type) != 1)) {
        cg_error(c, "constant_value must be a scalar of the data's type");
        return DL_ERR_UNSUPPORTED;
    }
    for (int32_t i = 0; i < r; i++) {
        if (xt->dims[i].value + pa->ints[i] + pa->ints[i + r] != yt->dims[i].value) {
            cg_error(c, "output dim %d does not match the padding", (int)i);
            return DL_ERR_UNSUPPORTED;
        }
    }
    int64_t numel = dl_ir_type_numel(yt);
    if (numel == 0) {
        return DL_OK;
    }
    if (r == 0) { // nothing to pad: a copy
        copy_plan p = {.rank = 1, .dims = {1}, .ost = {1}, .ist = {1}};
        return emit_copy(c, out, x, p);
    }
    for (int32_t i = 0; i < r; i++) {
        if (mode != PAD_CONSTANT && xt->dims[i].value == 0) {
            cg_error(c, "%s padding of an empty axis", ms);
            return DL_ERR_UNSUPPORTED;
        }
    }
    // y: [rows, W], x row length d = x.dims[r-1], begin pad b
    int64_t W = yt->dims[r - 1].value, d = xt->dims[r - 1].value, b = pa->ints[r - 1];
    int64_t rows = numel / W;
    int64_t xst[DL_MAX_RANK];
    cg_strides(xt, xst);
    dl_ir_value *vals[3] = {out, x, cv};
    cg_kernel k;
    DL_TRY(cg_kernel_begin(c, vals, cv ? 3 : 2, rows, &k));
    pad_ctx pc = {mode, out->type.dtype, raw_type(c, out->type.dtype), k.ptr[0], k.ptr[1], NULL};
    if (mode == PAD_CONSTANT) {
        // The value in compute type, stored through a stack slot to get its raw storage bits
        // (cg_store does the rounding); LLVM folds the slot away.
        LLVMValueRef v = cv ? cg_load(c, k.ptr[2], cv->type.dtype, cg_i64(c, 0))
                            : cg_const(c, pc.dt, dl_ir_node_attr_float(n, "value"));
        LLVMValueRef slot = LLVMBuildAlloca(c->b, pc.rt, "padv");
        cg_store(c, slot, pc.dt, cg_i64(c, 0), v);
        pc.cval = LLVMBuildLoad2(c->b, pc.rt, slot, "");
    }
    cg_loop lrow;
    LLVMValueRef row = cg_for_begin(c, &lrow, k.begin, k.end, "row");
    // Decode the row's outer coordinates (last outer dim first) and map each into x.
    LLVMValueRef rem = row, xrow = cg_i64(c, 0), outside = LLVMConstInt(c->t_i1, 0, 0);
    for (int32_t i = r - 2; i >= 0; i--) {
        int64_t yd = yt->dims[i].value, xd = xt->dims[i].value;
        LLVMValueRef oc = LLVMBuildSRem(c->b, rem, cg_i64(c, yd), "");
        rem = LLVMBuildSDiv(c->b, rem, cg_i64(c, yd), "");
        LLVMValueRef cc = LLVMBuildSub(c->b, oc, cg_i64(c, pa->ints[i]), "");
        if (mode == PAD_CONSTANT) {
            LLVMValueRef lo = LLVMBuildICmp(c->b, LLVMIntSLT, cc, cg_i64(c, 0), "");
            LLVMValueRef hi = LLVMBuildICmp(c->b, LLVMIntSGE, cc, cg_i64(c, xd), "");
            outside = LLVMBuildOr(c->b, outside, LLVMBuildOr(c->b, lo, hi, ""), "");
        } else {
            cc = pad_map(c, mode, cc, xd);
        }
        xrow = add_scaled(c, xrow, cc, xst[i]);
    }
    LLVMValueRef yrow = LLVMBuildMul(c->b, row, cg_i64(c, W), "");
    // Interior along the last axis: y positions [L, M) read x[o - b], contiguous.
    int64_t L = clamp64(b, 0, W), M = clamp64(b + d, L, W);
    LLVMBasicBlockRef after = NULL;
    if (mode == PAD_CONSTANT && r > 1) {
        // if (outside) { fill the row } else { copy it }
        LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
        LLVMBasicBlockRef fill = LLVMAppendBasicBlockInContext(c->ctx, fn, "fill");
        LLVMBasicBlockRef copy = LLVMAppendBasicBlockInContext(c->ctx, fn, "copy");
        after = LLVMAppendBasicBlockInContext(c->ctx, fn, "row_done");
        LLVMBuildCondBr(c->b, outside, fill, copy);
        LLVMPositionBuilderAtEnd(c->b, fill);
        pad_edge_run(c, &pc, yrow, xrow, 0, W, W, d); // b = W: every position is outside
        LLVMBuildBr(c->b, after);
        LLVMPositionBuilderAtEnd(c->b, copy);
    }
    pad_edge_run(c, &pc, yrow, xrow, 0, L, b, d);
    if (M > L) {
        raw_memcpy(c, pc.dt, pc.y, LLVMBuildAdd(c->b, yrow, cg_i64(c, L), ""), pc.x,
                   LLVMBuildAdd(c->b, xrow, cg_i64(c, L - b), ""), cg_i64(c, M - L));
    }
    pad_edge_run(c, &pc, yrow, xrow, M, W, b, d);
    if (after) {
        LLVMBuildBr(c->b, after);
        LLVMPositionBuilderAtEnd(c->b, after);
    }
    cg_for_end(c, &lrow);
    return cg_kernel_end(c, &k);
}

// ---------------------------------------------------------------------------------------------

// Hooks of lower.c's table.

dl_status dl_cg__lower_copy(cg *c, const dl_ir_node *n) {
    return lower_flat_copy(c, n);
}

dl_status dl_cg__lower_transpose(cg *c, const dl_ir_node *n) {
    return lower_transpose(c, n);
}

dl_status dl_cg__lower_concat(cg *c, const dl_ir_node *n) {
    return lower_concat(c, n);
}

dl_status dl_cg__lower_split(cg *c, const dl_ir_node *n) {
    return lower_split(c, n);
}

dl_status dl_cg__lower_slice(cg *c, const dl_ir_node *n) {
    return lower_slice(c, n);
}

dl_status dl_cg__lower_gather(cg *c, const dl_ir_node *n) {
    return lower_gather(c, n);
}

dl_status dl_cg__lower_expand(cg *c, const dl_ir_node *n) {
    return lower_expand(c, n);
}

dl_status dl_cg__lower_pad(cg *c, const dl_ir_node *n) {
    return lower_pad(c, n);
}
