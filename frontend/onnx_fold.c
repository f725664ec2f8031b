// frontend/onnx_fold.c — evaluates ONNX shape computations on constants at import.
//
// PyTorch's exporter computes reshape targets at run time: Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape, with Mul / Div / Add / Cast on the way. Our graph format takes those
// operands as attributes, so the importer evaluates such chains here once every input is known.
// Values are small dl_tensors; integer and bool arithmetic is done on int64. Each element also
// carries a dl_fe_symel saying how it depends on the module's named dims (a batch dim from
// dynamic_axes): `coef * dim` survives moves, multiplication and exact division by literals and
// adding zero; anything else that mixes a named dim becomes DL_FE_SYM_OPAQUE. The importer
// decides what an opaque element may still be used for (a Reshape's one inferred -1).
// Invariant: out->data holds the value at the named dims' current values.
#include "onnx_fold.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_int(dl_dtype t) {
    return t == DL_DT_INT64 || t == DL_DT_INT32 || t == DL_DT_BOOL;
}

static void seti(dl_tensor *t, int64_t i, int64_t v) {
    switch (t->dtype) {
    case DL_DT_INT64:
        ((int64_t *)t->data)[i] = v;
        break;
    case DL_DT_INT32:
        ((int32_t *)t->data)[i] = (int32_t)v;
        break;
    case DL_DT_BOOL:
        ((uint8_t *)t->data)[i] = v != 0;
        break;
    case DL_DT_FLOAT:
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16:
    case DL_DT_COUNT:
    default:
        dl_tensor_set(t, i, (double)v);
        break;
    }
}

static dl_fe_symel sel(const dl_fe_cv *v, int64_t i) {
    return v->se ? v->se[i] : (dl_fe_symel){DL_FE_SYM_LIT, 0};
}

static bool is_lit(dl_fe_symel s) {
    return s.dim == DL_FE_SYM_LIT;
}

// Opaque, remembering a dim it depends on (in coef, -1 when unknown) for the diagnostic.
static dl_fe_symel opq(dl_fe_symel a, dl_fe_symel b) {
    int64_t d = a.dim >= 0                  ? a.dim
                : a.dim == DL_FE_SYM_OPAQUE ? a.coef
                : b.dim >= 0                ? b.dim
                : b.dim == DL_FE_SYM_OPAQUE ? b.coef
                                            : -1;
    return (dl_fe_symel){DL_FE_SYM_OPAQUE, d};
}

// Output under construction: the tensor and its (lazily allocated) per-element dims.
typedef struct fout {
    dl_tensor *t;
    dl_fe_symel *se;
    bool nomem;
} fout;

static void put_sym(fout *o, int64_t i, dl_fe_symel s) {
    if (is_lit(s) && !o->se) {
        return;
    }
    if (!o->se) {
        int64_t n = dl_tensor_numel(o->t);
        o->se = dl_mem_calloc((size_t)(n ? n : 1), sizeof *o->se);
        if (!o->se) {
            o->nomem = true;
            return;
        }
        for (int64_t k = 0; k < n; k++) {
            o->se[k] = (dl_fe_symel){DL_FE_SYM_LIT, 0};
        }
    }
    o->se[i] = s;
}

// Source flat index, in a tensor of dims sd (rank sr, aligned right and broadcast), of output
// element `flat` of dims od (rank orank).
static int64_t bcast_index(const int64_t *od, int32_t orank, const int64_t *sd, int32_t sr,
                           int64_t flat) {
    int64_t src = 0, stride = 1;
    for (int32_t k = orank - 1; k >= 0; k--) {
        int64_t ix = flat % od[k];
        flat /= od[k];
        int32_t j = k - (orank - sr);
        if (j >= 0) {
            src += (sd[j] == 1 ? 0 : ix) * stride;
            stride *= sd[j];
        }
    }
    return src;
}

// Multidirectional broadcast of shapes a and b into o; false if incompatible.
static bool bcast_shape(const dl_tensor *a, const dl_tensor *b, int32_t *orank, int64_t *od) {
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    for (int32_t k = 0; k < r; k++) {
        int32_t ja = k - (r - a->rank), jb = k - (r - b->rank);
        int64_t da = ja >= 0 ? a->dims[ja] : 1, db = jb >= 0 ? b->dims[jb] : 1;
        if (da != db && da != 1 && db != 1) {
            return false;
        }
        od[k] = da == 1 ? db : da;
    }
    *orank = r;
    return true;
}

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *nd, const char *name) {
    for (size_t k = 0; k < nd->n_attribute; k++) {
        if (nd->attribute[k]->name && strcmp(nd->attribute[k]->name, name) == 0) {
            return nd->attribute[k];
        }
    }
    return NULL;
}

static const char *const fold_ops[] = {
    "Identity",
    "Cast",
    "Neg",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Max",
    "Min",
    "Equal",
    "Less",
    "Greater",
    "Not",
    "Where",
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Concat",
    "Slice",
    "Reshape",
    "Expand",
    "Range",
    "ConstantOfShape",
    "Size",
};

bool dl_fe__onnx_foldable(const char *opn) {
    for (size_t i = 0; i < DL_ARRAY_LEN(fold_ops); i++) {
        if (strcmp(fold_ops[i], opn) == 0) {
            return true;
        }
    }
    return false;
}

// Axes from input `slot` (opset >= 13) or attribute "axes"; n = 0 when absent.
static bool axes_of(const Onnx__NodeProto *nd, const dl_fe_cv *ins, size_t n_in, size_t slot,
                    int64_t *axes, size_t *n) {
    *n = 0;
    if (slot < n_in && ins[slot].t) {
        int64_t c = dl_tensor_numel(ins[slot].t);
        if (c > DL_MAX_RANK || !is_int(ins[slot].t->dtype)) {
            return false;
        }
        for (int64_t i = 0; i < c; i++) {
            axes[i] = dl_tensor_get_i64(ins[slot].t, i);
        }
        *n = (size_t)c;
        return true;
    }
    const Onnx__AttributeProto *a = find_attr(nd, "axes");
    if (a) {
        if (a->n_ints > DL_MAX_RANK) {
            return false;
        }
        for (size_t i = 0; i < a->n_ints; i++) {
            axes[i] = a->ints[i];
        }
        *n = a->n_ints;
    }
    return true;
}

static bool norm_axis(int64_t *a, int32_t rank) {
    if (*a < 0) {
        *a += rank;
    }
    return *a >= 0 && *a < rank;
}

// Copies element `src` of value v to element `dst` of o (bytes and dims).
static void move_el(fout *o, const dl_fe_cv *v, int64_t src, int64_t dst) {
    size_t esz = dl_dtype_size(o->t->dtype);
    memcpy((char *)o->t->data + (size_t)dst * esz, (const char *)v->t->data + (size_t)src * esz,
           esz);
    put_sym(o, dst, sel(v, src));
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(why, why_size, __VA_ARGS__);                                                      \
        st = DL_ERR_UNSUPPORTED;                                                                   \
        goto out;                                                                                  \
    } while (0)

// The elementwise integer ops: value and dependence on named dims.
static int64_t arith(const char *opn, int64_t a, int64_t b) {
    if (!strcmp(opn, "Add")) {
        return (int64_t)((uint64_t)a + (uint64_t)b);
    }
    if (!strcmp(opn, "Sub")) {
        return (int64_t)((uint64_t)a - (uint64_t)b);
    }
    if (!strcmp(opn, "Mul")) {
        return (int64_t)((uint64_t)a * (uint64_t)b);
    }
    if (!strcmp(opn, "Div")) {
        return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
    }
    if (!strcmp(opn, "Max")) {
        return a > b ? a : b;
    }
    if (!strcmp(opn, "Min")) {
        return a < b ? a : b;
    }
    if (!strcmp(opn, "Equal")) {
        return a == b;
    }
    if (!strcmp(opn, "Less")) {
        return a < b;
    }
    return a > b; // Greater
}

static dl_fe_symel arith_sym(const char *opn, dl_fe_symel sa, int64_t a, dl_fe_symel sb,
                             int64_t b) {
    if (is_lit(sa) && is_lit(sb)) {
        return sa;
    }
    if (sa.dim == DL_FE_SYM_OPAQUE || sb.dim == DL_FE_SYM_OPAQUE) {
        return opq(sa, sb);
    }
    bool add = !strcmp(opn, "Add"), sub = !strcmp(opn, "Sub");
    if (add || sub) {
        if (is_lit(sb) && b == 0) {
            return sa;
        }
        if (add && is_lit(sa) && a == 0) {
            return sb;
        }
        if (sa.dim == sb.dim) {
            int64_t c = add ? sa.coef + sb.coef : sa.coef - sb.coef;
            return c ? (dl_fe_symel){sa.dim, c} : (dl_fe_symel){DL_FE_SYM_LIT, 0};
        }
        return opq(sa, sb);
    }
    if (!strcmp(opn, "Mul")) {
        if (is_lit(sb)) {
            return b ? (dl_fe_symel){sa.dim, sa.coef * b} : (dl_fe_symel){DL_FE_SYM_LIT, 0};
        }
        if (is_lit(sa)) {
            return a ? (dl_fe_symel){sb.dim, sb.coef * a} : (dl_fe_symel){DL_FE_SYM_LIT, 0};
        }
        return opq(sa, sb);
    }
    if (!strcmp(opn, "Div") && is_lit(sb) && b != 0 && sa.coef % b == 0) {
        return (dl_fe_symel){sa.dim, sa.coef / b};
    }
    return opq(sa, sb);
}

// Largest tensor folded (elements): shape computations are small; a bigger result stays a node.
#define FOLD_MAX_NUMEL ((int64_t)1 << 16)

dl_status dl_fe__onnx_fold(const Onnx__NodeProto *nd, const char *opn, int64_t opset,
                           const dl_fe_cv *ins, size_t n_in, dl_tensor *out, dl_fe_symel **out_se,
                           char *why, size_t why_size) {
    memset(out, 0, sizeof *out);
    *out_se = NULL;
    fout o = {out, NULL, false};
    dl_status st = DL_OK;
    const dl_fe_cv *x = n_in > 0 && ins[0].t ? &ins[0] : NULL;
    int64_t od[DL_MAX_RANK];
    int32_t orank = 0;
    if (!x && strcmp(opn, "Range") != 0) {
        FAIL("%s: input 0 is missing", opn);
    }
    if (!strcmp(opn, "Identity") || !strcmp(opn, "Reshape") || !strcmp(opn, "Unsqueeze") ||
        !strcmp(opn, "Squeeze")) {
        // Moves only: the same elements, another shape.
        int64_t n = dl_tensor_numel(x->t);
        orank = x->t->rank;
        memcpy(od, x->t->dims, sizeof od);
        if (!strcmp(opn, "Reshape")) {
            if (n_in < 2 || !ins[1].t || ins[1].se || dl_tensor_numel(ins[1].t) > DL_MAX_RANK) {
                FAIL("Reshape: the shape is not a literal");
            }
            orank = (int32_t)dl_tensor_numel(ins[1].t);
            int64_t known = 1, infer = -1;
            for (int32_t k = 0; k < orank; k++) {
                od[k] = dl_tensor_get_i64(ins[1].t, k);
                if (od[k] == 0 && k < x->t->rank) {
                    od[k] = x->t->dims[k];
                }
                if (od[k] == -1) {
                    infer = k;
                } else {
                    known *= od[k];
                }
            }
            if (infer >= 0) {
                od[infer] = known ? n / known : 0;
            }
        } else {
            int64_t axes[DL_MAX_RANK];
            size_t na;
            if (!axes_of(nd, ins, n_in, 1, axes, &na)) {
                FAIL("%s: bad axes", opn);
            }
            if (!strcmp(opn, "Unsqueeze")) {
                int32_t r = x->t->rank + (int32_t)na;
                if (r > DL_MAX_RANK) {
                    FAIL("Unsqueeze: rank %d too large", (int)r);
                }
                bool ins_ax[DL_MAX_RANK] = {0};
                for (size_t i = 0; i < na; i++) {
                    if (!norm_axis(&axes[i], r)) {
                        FAIL("Unsqueeze: axis out of range");
                    }
                    ins_ax[axes[i]] = true;
                }
                for (int32_t k = 0, j = 0; k < r; k++) {
                    od[k] = ins_ax[k] ? 1 : x->t->dims[j++];
                }
                orank = r;
            } else {
                bool drop[DL_MAX_RANK] = {0};
                for (size_t i = 0; i < na; i++) {
                    if (!norm_axis(&axes[i], x->t->rank)) {
                        FAIL("Squeeze: axis out of range");
                    }
                    drop[axes[i]] = true;
                }
                orank = 0;
                for (int32_t k = 0; k < x->t->rank; k++) {
                    if (na ? !drop[k] : x->t->dims[k] != 1) {
                        od[orank++] = x->t->dims[k];
                    }
                }
            }
        }
        st = dl_tensor_alloc(out, x->t->dtype, orank, od);
        if (st != DL_OK || dl_tensor_numel(out) != n) {
            FAIL("%s: bad shape", opn);
        }
        for (int64_t i = 0; i < n; i++) {
            move_el(&o, x, i, i);
        }
    } else if (!strcmp(opn, "Cast")) {
        int64_t to = dl_fe__onnx_int_attr(nd, "to", 0);
        dl_dtype dt;
        if (!dl_fe__dtype_from_onnx((int32_t)to, &dt)) {
            FAIL("Cast: target type not supported here");
        }
        st = dl_tensor_alloc(out, dt, x->t->rank, x->t->dims);
        if (st != DL_OK) {
            goto out;
        }
        int64_t n = dl_tensor_numel(x->t);
        for (int64_t i = 0; i < n; i++) {
            if (is_int(dt) && is_int(x->t->dtype)) {
                seti(out, i, dl_tensor_get_i64(x->t, i));
                put_sym(&o, i,
                        dt == DL_DT_BOOL && !is_lit(sel(x, i)) ? opq(sel(x, i), sel(x, i))
                                                               : sel(x, i));
            } else {
                dl_tensor_set(out, i, dl_tensor_get(x->t, i));
                put_sym(&o, i, is_lit(sel(x, i)) ? sel(x, i) : opq(sel(x, i), sel(x, i)));
            }
        }
    } else if (!strcmp(opn, "Neg") || !strcmp(opn, "Not")) {
        if (!is_int(x->t->dtype)) {
            FAIL("%s: only integer values are folded", opn);
        }
        st = dl_tensor_alloc(out, x->t->dtype, x->t->rank, x->t->dims);
        if (st != DL_OK) {
            goto out;
        }
        bool neg = opn[0] == 'N' && opn[1] == 'e';
        int64_t n = dl_tensor_numel(x->t);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = dl_tensor_get_i64(x->t, i);
            seti(out, i, neg ? (int64_t)(0 - (uint64_t)v) : !v);
            dl_fe_symel s = sel(x, i);
            put_sym(&o, i,
                    is_lit(s) || s.dim == DL_FE_SYM_OPAQUE || !neg ? (is_lit(s) ? s : opq(s, s))
                                                                   : (dl_fe_symel){s.dim, -s.coef});
        }
    } else if (!strcmp(opn, "Where")) {
        if (n_in != 3 || !ins[1].t || !ins[2].t || x->t->dtype != DL_DT_BOOL ||
            ins[1].t->dtype != ins[2].t->dtype) {
            FAIL("Where: bad operands");
        }
        int32_t r1;
        int64_t d1[DL_MAX_RANK];
        dl_tensor tmp = {.rank = 0};
        if (!bcast_shape(ins[1].t, ins[2].t, &r1, d1)) {
            FAIL("Where: shapes do not broadcast");
        }
        tmp.rank = r1;
        memcpy(tmp.dims, d1, sizeof d1);
        if (!bcast_shape(x->t, &tmp, &orank, od)) {
            FAIL("Where: shapes do not broadcast");
        }
        st = dl_tensor_alloc(out, ins[1].t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        int64_t n = dl_tensor_numel(out);
        for (int64_t i = 0; i < n; i++) {
            int64_t ci = bcast_index(od, orank, x->t->dims, x->t->rank, i);
            bool c = dl_tensor_get_i64(x->t, ci) != 0;
            const dl_fe_cv *src = c ? &ins[1] : &ins[2];
            move_el(&o, src, bcast_index(od, orank, src->t->dims, src->t->rank, i), i);
            if (!is_lit(sel(x, ci))) {
                put_sym(&o, i, opq(sel(x, ci), sel(x, ci)));
            }
        }
    } else if (!strcmp(opn, "Add") || !strcmp(opn, "Sub") || !strcmp(opn, "Mul") ||
               !strcmp(opn, "Div") || !strcmp(opn, "Max") || !strcmp(opn, "Min") ||
               !strcmp(opn, "Equal") || !strcmp(opn, "Less") || !strcmp(opn, "Greater")) {
        if (n_in != 2 || !ins[1].t || !is_int(x->t->dtype) || !is_int(ins[1].t->dtype)) {
            FAIL("%s: only integer values are folded", opn);
        }
        if (!bcast_shape(x->t, ins[1].t, &orank, od)) {
            FAIL("%s: shapes do not broadcast", opn);
        }
        bool cmp = !strcmp(opn, "Equal") || !strcmp(opn, "Less") || !strcmp(opn, "Greater");
        st = dl_tensor_alloc(out, cmp ? DL_DT_BOOL : x->t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        int64_t n = dl_tensor_numel(out);
        for (int64_t i = 0; i < n; i++) {
            int64_t ia = bcast_index(od, orank, x->t->dims, x->t->rank, i);
            int64_t ib = bcast_index(od, orank, ins[1].t->dims, ins[1].t->rank, i);
            int64_t a = dl_tensor_get_i64(x->t, ia), b = dl_tensor_get_i64(ins[1].t, ib);
            seti(out, i, arith(opn, a, b));
            dl_fe_symel s = cmp ? (is_lit(sel(x, ia)) && is_lit(sel(&ins[1], ib))
                                       ? sel(x, ia)
                                       : opq(sel(x, ia), sel(&ins[1], ib)))
                                : arith_sym(opn, sel(x, ia), a, sel(&ins[1], ib), b);
            put_sym(&o, i, s);
        }
    } else if (!strcmp(opn, "Gather")) {
        int64_t axis = 0;
        axis = dl_fe__onnx_int_attr(nd, "axis", 0);
        const dl_fe_cv *ix = n_in > 1 && ins[1].t ? &ins[1] : NULL;
        if (!ix || !is_int(ix->t->dtype) || ix->se || !norm_axis(&axis, x->t->rank) ||
            x->t->rank - 1 + ix->t->rank > DL_MAX_RANK) {
            FAIL("Gather: bad operands");
        }
        orank = 0;
        for (int32_t k = 0; k < axis; k++) {
            od[orank++] = x->t->dims[k];
        }
        for (int32_t k = 0; k < ix->t->rank; k++) {
            od[orank++] = ix->t->dims[k];
        }
        for (int32_t k = (int32_t)axis + 1; k < x->t->rank; k++) {
            od[orank++] = x->t->dims[k];
        }
        st = dl_tensor_alloc(out, x->t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        int64_t inner = 1, nidx = dl_tensor_numel(ix->t), dax = x->t->dims[axis];
        for (int32_t k = (int32_t)axis + 1; k < x->t->rank; k++) {
            inner *= x->t->dims[k];
        }
        int64_t n = dl_tensor_numel(out);
        for (int64_t i = 0; i < n; i++) {
            int64_t in_i = i % inner, rest = i / inner;
            int64_t j = rest % (nidx ? nidx : 1), outer = rest / (nidx ? nidx : 1);
            int64_t g = dl_tensor_get_i64(ix->t, j);
            if (g < 0) {
                g += dax;
            }
            if (g < 0 || g >= dax) {
                FAIL("Gather: index %lld out of range", (long long)dl_tensor_get_i64(ix->t, j));
            }
            move_el(&o, x, (outer * dax + g) * inner + in_i, i);
        }
    } else if (!strcmp(opn, "Concat")) {
        int64_t axis = 0;
        axis = dl_fe__onnx_int_attr(nd, "axis", 0);
        if (!norm_axis(&axis, x->t->rank)) {
            FAIL("Concat: axis out of range");
        }
        orank = x->t->rank;
        memcpy(od, x->t->dims, sizeof od);
        od[axis] = 0;
        for (size_t k = 0; k < n_in; k++) {
            if (!ins[k].t || ins[k].t->rank != orank || ins[k].t->dtype != x->t->dtype) {
                FAIL("Concat: operands differ in rank or type");
            }
            od[axis] += ins[k].t->dims[axis];
        }
        st = dl_tensor_alloc(out, x->t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        int64_t inner = 1, outer = 1;
        for (int32_t k = (int32_t)axis + 1; k < orank; k++) {
            inner *= od[k];
        }
        for (int32_t k = 0; k < axis; k++) {
            outer *= od[k];
        }
        int64_t at = 0;
        for (int64_t ou = 0; ou < outer; ou++) {
            for (size_t k = 0; k < n_in; k++) {
                int64_t blk = ins[k].t->dims[axis] * inner;
                for (int64_t e = 0; e < blk; e++) {
                    move_el(&o, &ins[k], ou * blk + e, at++);
                }
            }
        }
    } else if (!strcmp(opn, "Slice")) {
        int64_t starts[DL_MAX_RANK], ends[DL_MAX_RANK], axes[DL_MAX_RANK], steps[DL_MAX_RANK];
        size_t ns = n_in > 1 && ins[1].t ? (size_t)dl_tensor_numel(ins[1].t) : 0;
        if (opset < 10 || n_in < 3 || !ins[1].t || !ins[2].t || ns > DL_MAX_RANK ||
            dl_tensor_numel(ins[2].t) != (int64_t)ns || ins[1].se || ins[2].se) {
            FAIL("Slice: starts and ends must be literal");
        }
        for (size_t i = 0; i < ns; i++) {
            starts[i] = dl_tensor_get_i64(ins[1].t, (int64_t)i);
            ends[i] = dl_tensor_get_i64(ins[2].t, (int64_t)i);
            axes[i] = (int64_t)i;
            steps[i] = 1;
            if (n_in > 3 && ins[3].t) {
                axes[i] = dl_tensor_get_i64(ins[3].t, (int64_t)i);
            }
            if (n_in > 4 && ins[4].t) {
                steps[i] = dl_tensor_get_i64(ins[4].t, (int64_t)i);
            }
        }
        int64_t beg[DL_MAX_RANK], stp[DL_MAX_RANK];
        orank = x->t->rank;
        for (int32_t k = 0; k < orank; k++) {
            beg[k] = 0;
            stp[k] = 1;
            od[k] = x->t->dims[k];
        }
        for (size_t i = 0; i < ns; i++) {
            int64_t a = axes[i];
            if (!norm_axis(&a, orank) || steps[i] == 0) {
                FAIL("Slice: bad axis or step");
            }
            int64_t d = x->t->dims[a], s = starts[i], e = ends[i];
            if (s < 0) {
                s += d;
            }
            if (e < 0) {
                e += d;
            }
            if (steps[i] > 0) {
                s = s < 0 ? 0 : s > d ? d : s;
                e = e < 0 ? 0 : e > d ? d : e;
                od[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
            } else {
                s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
                e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
                od[a] = s > e ? (s - e + (-steps[i]) - 1) / (-steps[i]) : 0;
            }
            beg[a] = s;
            stp[a] = steps[i];
        }
        st = dl_tensor_alloc(out, x->t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        int64_t n = dl_tensor_numel(out);
        for (int64_t i = 0; i < n; i++) {
            int64_t f = i, src = 0, stride = 1;
            for (int32_t k = orank - 1; k >= 0; k--) {
                int64_t ixk = f % od[k];
                f /= od[k];
                src += (beg[k] + ixk * stp[k]) * stride;
                stride *= x->t->dims[k];
            }
            move_el(&o, x, src, i);
        }
    } else if (!strcmp(opn, "Expand") || !strcmp(opn, "ConstantOfShape")) {
        bool cos = opn[0] == 'C';
        const dl_fe_cv *shp = cos ? x : n_in > 1 && ins[1].t ? &ins[1] : NULL;
        if (!shp || shp->se || !is_int(shp->t->dtype) || dl_tensor_numel(shp->t) > DL_MAX_RANK) {
            FAIL("%s: the shape is not a literal", opn);
        }
        dl_tensor sh = {.rank = (int32_t)dl_tensor_numel(shp->t)};
        for (int32_t k = 0; k < sh.rank; k++) {
            sh.dims[k] = dl_tensor_get_i64(shp->t, k);
            if (sh.dims[k] < 0) {
                FAIL("%s: negative dimension", opn);
            }
        }
        const dl_fe_cv *src = x;
        if (cos) {
            // The importer passes the decoded `value` attribute as input 1.
            if (n_in < 2 || !ins[1].t || dl_tensor_numel(ins[1].t) != 1) {
                FAIL("ConstantOfShape: value must hold one element");
            }
            orank = sh.rank;
            memcpy(od, sh.dims, sizeof od);
            src = &ins[1];
        } else if (!bcast_shape(x->t, &sh, &orank, od)) {
            FAIL("Expand: shapes do not broadcast");
        }
        int64_t n = 1;
        for (int32_t k = 0; k < orank; k++) {
            n *= od[k];
            if (n > FOLD_MAX_NUMEL) {
                FAIL("%s: result too large to fold", opn);
            }
        }
        st = dl_tensor_alloc(out, src->t->dtype, orank, od);
        if (st != DL_OK) {
            goto out;
        }
        for (int64_t i = 0; i < n; i++) {
            move_el(&o, src, cos ? 0 : bcast_index(od, orank, src->t->dims, src->t->rank, i), i);
        }
    } else if (!strcmp(opn, "Range")) {
        if (n_in != 3 || !ins[0].t || !ins[1].t || !ins[2].t || ins[0].se || ins[1].se ||
            ins[2].se) {
            FAIL("Range: only literal bounds are folded");
        }
        if (!is_int(ins[0].t->dtype)) {
            // ONNX: max(ceil((limit - start) / delta), 0) elements start + i * delta, computed
            // in the input type (float: the reference's float32 arithmetic).
            double s0 = dl_tensor_get(ins[0].t, 0), l0 = dl_tensor_get(ins[1].t, 0);
            double d0 = dl_tensor_get(ins[2].t, 0);
            double cnt = d0 != 0 ? ceil((l0 - s0) / d0) : 0;
            if (d0 == 0 || !(cnt < (double)FOLD_MAX_NUMEL)) {
                FAIL("Range: bad delta or result too large to fold");
            }
            int64_t n = cnt > 0 ? (int64_t)cnt : 0;
            st = dl_tensor_alloc(out, ins[0].t->dtype, 1, &n);
            if (st != DL_OK) {
                goto out;
            }
            for (int64_t i = 0; i < n; i++) {
                dl_tensor_set(out, i, (double)((float)s0 + (float)i * (float)d0));
            }
            goto out;
        }
        int64_t s = dl_tensor_get_i64(ins[0].t, 0), l = dl_tensor_get_i64(ins[1].t, 0),
                d = dl_tensor_get_i64(ins[2].t, 0);
        if (d == 0) {
            FAIL("Range: delta is 0");
        }
        int64_t n = d > 0 ? (l > s ? (l - s + d - 1) / d : 0) : (s > l ? (s - l - d - 1) / -d : 0);
        if (n > FOLD_MAX_NUMEL) {
            FAIL("Range: result too large to fold");
        }
        st = dl_tensor_alloc(out, ins[0].t->dtype, 1, &n);
        if (st != DL_OK) {
            goto out;
        }
        for (int64_t i = 0; i < n; i++) {
            seti(out, i, s + i * d);
        }
    } else if (!strcmp(opn, "Size")) {
        st = dl_tensor_alloc(out, DL_DT_INT64, 0, NULL);
        if (st != DL_OK) {
            goto out;
        }
        seti(out, 0, dl_tensor_numel(x->t));
    } else {
        FAIL("%s is not folded", opn);
    }
out:
    if (st == DL_OK && o.nomem) {
        st = DL_ERR_NOMEM;
    }
    if (st != DL_OK) {
        dl_tensor_free(out);
        free(o.se);
        return st;
    }
    *out_se = o.se;
    return DL_OK;
}
