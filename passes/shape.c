// passes/shape.c — shape and type inference (dl_pass_shape): the driver, the diagnostics
// helpers and numpy broadcasting. The per-op rules live in shape_elem.c, shape_nn.c and
// shape_tensor.c (see shape_internal.h).
//
// The pass walks m->nodes in statement order (a topological order), so every input type is
// final when its user is visited. Invariants it establishes: every node output has rank >= 0
// after a node succeeded and rank -1 after it failed or was skipped; a node with an unknown input
// is skipped without a message (the earlier error already explained it). Output dims keep the
// dim symbol of the input dim they were copied from; computed dims get sym -1.
#include "dl_pass.h"
#include "shape_internal.h"

#include <stdarg.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Diagnostics helpers

static bool vfail_at(dl_pass__sh *c, dl_src_loc loc, const char *fmt, va_list ap) DL_PRINTF(3, 0);
static bool vfail_at(dl_pass__sh *c, dl_src_loc loc, const char *fmt, va_list ap) {
    dl_ir_node_vdiag(c->d, DL_SEV_ERROR, c->n, loc, NULL, fmt, ap);
    return false;
}

bool dl_pass__sh_fail(dl_pass__sh *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail_at(c, c->n->loc, fmt, ap);
    va_end(ap);
    return false;
}

bool dl_pass__sh_fail_at(dl_pass__sh *c, dl_src_loc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail_at(c, loc, fmt, ap);
    va_end(ap);
    return false;
}

static char *next_buf(dl_pass__sh *c) {
    char *b = c->bufs[c->buf_i];
    c->buf_i = (c->buf_i + 1) % DL_SH_NBUF;
    return b;
}

const char *dl_pass__sh_shape(dl_pass__sh *c, const dl_ir_type *t) {
    char *b = next_buf(c);
    dl_ir_type_format_shape(t, b, sizeof c->bufs[0]);
    return b;
}

const char *dl_pass__sh_ints(dl_pass__sh *c, const int64_t *v, size_t n) {
    char *b = next_buf(c);
    size_t cap = sizeof c->bufs[0], used = 0;
    used += (size_t)snprintf(b, cap, "[");
    for (size_t i = 0; i < n && used < cap; i++) {
        used += (size_t)snprintf(b + used, cap - used, "%s%lld", i ? ", " : "", (long long)v[i]);
    }
    if (used < cap) {
        snprintf(b + used, cap - used, "]");
    }
    return b;
}

bool dl_pass__sh_axis(dl_pass__sh *c, int64_t axis, int32_t rank, bool allow_end, int32_t *out) {
    int64_t hi = allow_end ? rank : rank - 1;
    if (axis < -(int64_t)rank || axis > hi) {
        return dl_pass__sh_fail(c, "axis %lld is out of range for rank %d", (long long)axis,
                                (int)rank);
    }
    *out = (int32_t)(axis < 0 ? axis + rank : axis);
    return true;
}

bool dl_pass__sh_need_float(dl_pass__sh *c, const dl_ir_type *t, const char *what) {
    if (!dl_dtype_is_float(t->dtype)) {
        return dl_pass__sh_fail(c, "%s must be a float type, got %s", what,
                                dl_dtype_name(t->dtype));
    }
    return true;
}

bool dl_pass__sh_need_numeric(dl_pass__sh *c, const dl_ir_type *t, const char *what) {
    if (t->dtype == DL_DT_BOOL) {
        return dl_pass__sh_fail(c, "%s must be a numeric type, got %s", what,
                                dl_dtype_name(t->dtype));
    }
    return true;
}

bool dl_pass__sh_need_int_index(dl_pass__sh *c, const dl_ir_type *t, const char *what) {
    if (t->dtype != DL_DT_INT32 && t->dtype != DL_DT_INT64) {
        return dl_pass__sh_fail(c, "%s must be int32 or int64, got %s", what,
                                dl_dtype_name(t->dtype));
    }
    return true;
}

bool dl_pass__sh_same_dtype(dl_pass__sh *c, const dl_ir_type *a, const dl_ir_type *b) {
    if (a->dtype != b->dtype) {
        return dl_pass__sh_fail(c, "input types differ: %s and %s", dl_dtype_name(a->dtype),
                                dl_dtype_name(b->dtype));
    }
    return true;
}

bool dl_pass__sh_broadcast(dl_pass__sh *c, const dl_ir_type *const *ts, size_t n, dl_ir_type *out) {
    int32_t r = 0;
    for (size_t k = 0; k < n; k++) {
        r = ts[k]->rank > r ? ts[k]->rank : r;
    }
    out->rank = r;
    for (int32_t i = 0; i < r; i++) {
        // Walk dims right-aligned. The result takes the first non-1 dim; its sym is the first
        // known sym among the inputs that have that value (a 1 that broadcasts gives no sym).
        dl_ir_dim res = {1, -1};
        bool have_big = false, ok = true;
        for (size_t k = 0; k < n; k++) {
            int32_t j = i - (r - ts[k]->rank);
            if (j < 0) {
                continue;
            }
            dl_ir_dim dk = ts[k]->dims[j];
            if (dk.value == 1) {
                if (!have_big && res.sym < 0) {
                    res.sym = dk.sym;
                }
                continue;
            }
            if (!have_big) {
                res = (dl_ir_dim){dk.value, dk.sym};
                have_big = true;
            } else if (dk.value != res.value) {
                ok = false;
            } else if (res.sym < 0) {
                res.sym = dk.sym;
            }
        }
        if (!ok) {
            char msg[768];
            size_t used = 0;
            for (size_t k = 0; k < n && used < sizeof msg; k++) {
                const char *sep = k == 0 ? "" : (k + 1 == n ? " and " : ", ");
                used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s", sep,
                                         dl_pass__sh_shape(c, ts[k]));
            }
            return dl_pass__sh_fail(c, "shapes are not broadcastable: %s", msg);
        }
        out->dims[i] = res;
    }
    return true;
}

const int64_t *dl_pass__sh_attr_ints(const dl_pass__sh *c, const char *name, size_t *n_out,
                                     const int32_t **syms) {
    const dl_ir_attr *a = dl_ir_node_attr(c->n, name);
    if (syms) {
        *syms = NULL;
    }
    if (!a || a->kind != DL_IR_ATTR_INTS) {
        *n_out = 0;
        return NULL;
    }
    *n_out = a->n;
    if (syms) {
        *syms = a->int_syms;
    }
    return a->ints;
}

// ---------------------------------------------------------------------------------------------
// Driver

// One rule per op, from the shape column of ir/ir_ops.def.
typedef bool (*shape_rule)(dl_pass__sh *c);
static const shape_rule shape_rules[] = {
#define DL_OP(e, name, min_in, max_in, min_out, max_out, diff, kind, elem, inplace, fuse, nan, sh, \
              ...)                                                                                 \
    [DL_IR_OP_##e] = dl_pass__sh_##sh,
#include "ir_ops.def"
#undef DL_OP
};
_Static_assert(DL_ARRAY_LEN(shape_rules) == DL_IR_OP_COUNT, "one shape rule per op");

static bool infer_node(dl_pass__sh *c) {
    return shape_rules[c->n->op](c);
}

static void reset_outputs(const dl_ir_node *n) {
    for (size_t i = 0; i < n->n_outputs; i++) {
        if (n->outputs[i]) {
            memset(&n->outputs[i]->type, 0, sizeof n->outputs[i]->type);
            n->outputs[i]->type.dtype = DL_DT_FLOAT;
            n->outputs[i]->type.rank = -1;
        }
    }
}

// Sizes (ir/dl_ir.h, DL_IR_MAX_TENSOR_BYTES): every declared value and every inferred output
// must be within the limit, which also bounds every dim and every product of dims, so the rules
// below can add and multiply dims without overflow (they still check what they compute from
// attributes). A value over the limit is reported once; nodes that use it are skipped quietly.

static bool size_ok(const dl_ir_type *t) {
    return t->rank < 0 || dl_ir_type_check_limit(t, DL_IR_MAX_TENSOR_BYTES, "", NULL, 0);
}

static const char *const value_kind_names[] = {"input", "param", "const", "value"};

// Reports a declared value (input, param, const) over its limit: a const is materialised by the
// compiler, so it gets the smaller DL_IR_MAX_CONST_BYTES.
static bool check_value_size(const dl_ir_value *v, dl_diags *d) {
    if (v->type.rank < 0) {
        return true;
    }
    bool is_const = v->kind == DL_IR_VAL_CONST;
    char why[600];
    if (dl_ir_type_check_limit(&v->type, is_const ? DL_IR_MAX_CONST_BYTES : DL_IR_MAX_TENSOR_BYTES,
                               is_const ? "a constant" : "a tensor", why, sizeof why)) {
        return true;
    }
    dl_diag(d, DL_SEV_ERROR, v->loc, "%s '%s': %s", value_kind_names[v->kind], v->name, why);
    return false;
}

// The compiler materialises every const and every param initialised with a literal that is a
// single number (a splat), however small the text: together they must stay within
// DL_IR_MAX_CONST_BYTES, else a few lines could make an artifact of any size. (A param
// initialised with constant(v), zeros, ... is filled at run time and does not count; a literal
// with all its values is already data of that size.) Reported at the value that crosses it.
static bool check_materialised(const dl_ir_module *m, dl_diags *d) {
    int64_t total = 0;
    for (size_t i = 0; i < m->values.len; i++) {
        const dl_ir_value *v = m->values.data[i];
        bool is_const = v->kind == DL_IR_VAL_CONST;
        bool splat_param = v->kind == DL_IR_VAL_PARAM && v->init &&
                           v->init->kind == DL_IR_INIT_LITERAL && v->init->lit &&
                           v->init->lit->is_splat;
        int64_t numel, nbytes;
        if ((!is_const && !splat_param) || v->type.rank < 0 || !size_ok(&v->type) ||
            !dl_ir_type_size(&v->type, &numel, &nbytes)) {
            continue; // not materialised, or already reported as too large
        }
        // Each term is <= 2^40 (size_ok), so the sum of 2^23 of them cannot overflow; checked.
        if (__builtin_add_overflow(total, nbytes, &total) || total > DL_IR_MAX_CONST_BYTES) {
            char ty[300];
            dl_ir_type_format(NULL, &v->type, ty, sizeof ty);
            dl_diag(d, DL_SEV_ERROR, v->loc,
                    "%s '%s': %s%s would bring the model's materialised constants to %lld "
                    "bytes, more than the limit of %lld bytes (256 MiB)%s",
                    value_kind_names[v->kind], v->name,
                    splat_param ? "the single-number literal initialising " : "", ty,
                    (long long)total, (long long)DL_IR_MAX_CONST_BYTES,
                    splat_param ? "; constant(v) fills a param at run time instead" : "");
            return false;
        }
    }
    return true;
}

// After a rule succeeded: every output within the limit, else "OP 'y': result 'y' float[...] is
// too large: ...".
static bool check_outputs_size(dl_pass__sh *c) {
    for (size_t i = 0; i < c->n->n_outputs; i++) {
        const dl_ir_value *o = c->n->outputs[i];
        char why[600];
        if (o && o->type.rank >= 0 &&
            !dl_ir_type_check_limit(&o->type, DL_IR_MAX_TENSOR_BYTES, "a tensor", why,
                                    sizeof why)) {
            return dl_pass__sh_fail(c, "result '%s' %s", o->name, why);
        }
    }
    return true;
}

// True when every present input is typed and within the limit (else the node is skipped: the
// earlier error already explained it).
static bool inputs_known(const dl_ir_node *n) {
    for (size_t k = 0; k < n->n_inputs; k++) {
        if (n->inputs[k] && (n->inputs[k]->type.rank < 0 || !size_ok(&n->inputs[k]->type))) {
            return false;
        }
    }
    return true;
}

// A constant's literal must hold one value per element unless it is a splat (the parser checks
// nesting, but the ONNX importer builds literals directly).
static bool check_const(const dl_ir_value *v, dl_diags *d) {
    const dl_ir_literal *l = v->lit;
    if (!l || v->type.rank < 0 || !size_ok(&v->type)) {
        return true;
    }
    char shape[256];
    dl_ir_type_format_shape(&v->type, shape, sizeof shape);
    int64_t numel = dl_ir_type_numel(&v->type);
    if (l->is_splat) {
        if (l->n != 1) {
            dl_diag(d, DL_SEV_ERROR, v->loc,
                    "const '%s': a splat literal must have 1 element, got %lld", v->name,
                    (long long)l->n);
            return false;
        }
        return true;
    }
    if (l->n != numel) {
        dl_diag(d, DL_SEV_ERROR, v->loc,
                "const '%s': literal has %lld elements, but shape %s needs %lld", v->name,
                (long long)l->n, shape, (long long)numel);
        return false;
    }
    return true;
}

static bool check_train(const dl_ir_module *m, dl_diags *d) {
    const dl_ir_train *t = m->train;
    bool ok = true;
    if (!t) {
        return true;
    }
    if (t->loss && t->loss->type.rank >= 0) {
        const dl_ir_type *lt = &t->loss->type;
        if (lt->rank != 0 || !dl_dtype_is_float(lt->dtype)) {
            char ty[300];
            dl_ir_type_format(m, lt, ty, sizeof ty);
            dl_diag(d, DL_SEV_ERROR, t->loc, "train: the loss '%s' must be a float scalar, got %s",
                    t->loss->name, ty);
            ok = false;
        }
    }
    for (size_t i = 0; i < t->n_freeze; i++) {
        const dl_ir_value *f = t->freeze[i];
        if (f && f->kind != DL_IR_VAL_PARAM) {
            dl_diag(d, DL_SEV_ERROR, t->loc, "train: freeze entry '%s' is not a param", f->name);
            ok = false;
        }
    }
    return ok;
}

bool dl_pass__shape_node(const dl_ir_module *m, const dl_ir_node *n, dl_diags *d) {
    dl_pass__sh c = {.m = m, .d = d, .n = n};
    reset_outputs(n);
    if (!inputs_known(n)) {
        return false;
    }
    if (!infer_node(&c) || !check_outputs_size(&c)) {
        reset_outputs(n);
        return false;
    }
    return true;
}

bool dl_pass_shape_node(const dl_ir_module *m, const dl_ir_node *n, dl_diags *d) {
    return dl_pass__shape_node(m, n, d);
}

dl_status dl_pass_shape(dl_ir_module *m, dl_diags *d) {
    bool ok = true;
    for (size_t i = 0; i < m->values.len; i++) {
        const dl_ir_value *v = m->values.data[i];
        if (v->kind != DL_IR_VAL_NODE) {
            ok &= check_value_size(v, d);
        }
    }
    if (ok) {
        ok &= check_materialised(m, d);
    }
    for (size_t i = 0; i < m->consts.len; i++) {
        ok &= check_const(m->consts.data[i], d);
    }
    dl_pass__sh c = {.m = m, .d = d};
    for (size_t i = 0; i < m->nodes.len; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        reset_outputs(n);
        if (!inputs_known(n)) {
            continue;
        }
        c.n = n;
        if (!infer_node(&c) || !check_outputs_size(&c)) {
            reset_outputs(n);
            ok = false;
        }
    }
    ok &= check_train(m, d);
    return ok ? DL_OK : DL_ERR_SHAPE;
}
