// ir/ir_diff.c — the IR diff: where two modules differ, in the terms of their canonical form
// (what `dlcc explain` and `dlcc-cache explain` print next to the cache keys).
//
// The node comparison mirrors what the canonical IR (ir_canon.c) hashes, so that "ir differs"
// can be pinned to a node: op; each input as a reference (inputs, params, consts and module
// outputs by name, other node outputs by their number in definition order, so intermediate
// names do not count); every attribute the op knows with its default applied (plus unknown
// ones); output count and inferred types. Interface values (inputs, params, consts, outputs)
// compare by name, type and initialiser (ir_print.c's text of it); the train block by what is
// structural (in the key) and what is a hyper-parameter value (not in the key). Read-only on
// both modules; the result owns its strings.
#include "dl_ir.h"
#include "ir_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// One side of the comparison: the module and, per value id, the definition-order number of an
// intermediate value (-1 for inputs, params, consts and module outputs).
typedef struct side {
    const dl_ir_module *m;
    int64_t *num;
} side;

static void put_double_text(dl_strbuf *b, double v) {
    char f[40];
    dl_format_double(v, f);
    dl_strbuf_puts(b, f);
}

static bool number_values(side *s) {
    const dl_ir_module *m = s->m;
    s->num = dl_mem_alloc((m->values.len ? m->values.len : 1) * sizeof(int64_t));
    if (!s->num) {
        return false;
    }
    for (size_t i = 0; i < m->values.len; i++) {
        s->num[i] = -1;
    }
    int64_t k = 0;
    for (size_t i = 0; i < m->nodes.len; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        for (size_t o = 0; o < n->n_outputs; o++) {
            const dl_ir_value *v = n->outputs[o];
            if (v && !v->is_output && v->id < m->values.len) {
                s->num[v->id] = k++;
            }
        }
    }
    return true;
}

// Reference for comparison: "name" or "%k".
static void value_ref(const side *s, const dl_ir_value *v, char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "-");
    } else if (v->id < s->m->values.len && s->num[v->id] >= 0) {
        snprintf(buf, size, "%%%" PRId64, s->num[v->id]);
    } else {
        snprintf(buf, size, "%s", v->name);
    }
}

// Reference for display: "r" or "r (intermediate %3)".
static void value_display(const side *s, const dl_ir_value *v, char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "(omitted)");
    } else if (v->id < s->m->values.len && s->num[v->id] >= 0) {
        snprintf(buf, size, "%s (intermediate value #%" PRId64 ")", v->name, s->num[v->id]);
    } else {
        snprintf(buf, size, "%s", v->name);
    }
}

// An attribute value as .dlg text, converted to the spec's kind where exact (as the canonical
// IR does): `alpha = 1` and `alpha = 1.0` print the same.
static void attr_text(dl_strbuf *b, const dl_ir_attr_spec *spec, const dl_ir_attr *a) {
    dl_ir_attr_kind want = spec ? spec->kind : a->kind;
    bool as_float = want == DL_IR_ATTR_FLOAT || want == DL_IR_ATTR_FLOATS;
    switch (a->kind) {
    case DL_IR_ATTR_INT:
        if (as_float) {
            put_double_text(b, (double)a->i);
        } else {
            dl_strbuf_printf(b, "%" PRId64, a->i);
        }
        return;
    case DL_IR_ATTR_FLOAT:
        put_double_text(b, a->f);
        return;
    case DL_IR_ATTR_STRING:
        dl_strbuf_printf(b, "\"%s\"", a->s ? a->s : "");
        return;
    case DL_IR_ATTR_INTS:
    case DL_IR_ATTR_FLOATS:
    case DL_IR_ATTR_STRINGS:
        dl_strbuf_puts(b, "[");
        for (size_t k = 0; k < a->n; k++) {
            if (k) {
                dl_strbuf_puts(b, ", ");
            }
            if (a->kind == DL_IR_ATTR_INTS && !as_float) {
                dl_strbuf_printf(b, "%" PRId64, a->ints[k]);
            } else if (a->kind == DL_IR_ATTR_INTS) {
                put_double_text(b, (double)a->ints[k]);
            } else if (a->kind == DL_IR_ATTR_FLOATS) {
                put_double_text(b, a->floats[k]);
            } else {
                dl_strbuf_printf(b, "\"%s\"", a->strs[k] ? a->strs[k] : "");
            }
        }
        dl_strbuf_puts(b, "]");
        return;
    }
}

static void spec_default_text(dl_strbuf *b, const dl_ir_attr_spec *s) {
    switch (s->kind) {
    case DL_IR_ATTR_INT:
        dl_strbuf_printf(b, "%" PRId64 " (default)", s->def_i);
        return;
    case DL_IR_ATTR_FLOAT:
        put_double_text(b, s->def_f);
        dl_strbuf_puts(b, " (default)");
        return;
    case DL_IR_ATTR_STRING:
        if (s->def_s) {
            dl_strbuf_printf(b, "\"%s\" (default)", s->def_s);
            return;
        }
        dl_strbuf_puts(b, "(absent)");
        return;
    case DL_IR_ATTR_INTS:
    case DL_IR_ATTR_FLOATS:
    case DL_IR_ATTR_STRINGS:
        dl_strbuf_puts(b, "(absent)");
        return;
    }
}

// Attribute `name` of node n as text with the default applied; *out_cmp gets the same without
// the " (default)" marker, for comparison. Returns false when out of memory.
static bool node_attr_text(const dl_ir_node *n, const char *name, char **out_disp, char **out_cmp) {
    const dl_ir_attr_spec *spec = dl_ir_op_find_attr_spec(n->op, name);
    const dl_ir_attr *a = dl_ir_node_attr(n, name);
    dl_strbuf b = {0};
    if (a) {
        attr_text(&b, spec, a);
    } else if (spec) {
        // Clip min/max and Dropout seed: absence means something else than the default.
        bool presence =
            (n->op == DL_IR_OP_CLIP && (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)) ||
            (n->op == DL_IR_OP_DROPOUT && strcmp(name, "seed") == 0);
        if (presence) {
            dl_strbuf_puts(&b, "(absent)");
        } else {
            spec_default_text(&b, spec);
        }
    } else {
        dl_strbuf_puts(&b, "(absent)");
    }
    char *disp = dl_strbuf_take(&b);
    if (!disp) {
        return false;
    }
    char *cmp = dl_mem_strdup(disp);
    if (!cmp) {
        free(disp);
        return false;
    }
    char *mark = strstr(cmp, " (default)");
    if (mark) {
        *mark = 0;
    }
    *out_disp = disp;
    *out_cmp = cmp;
    return true;
}

static void type_text(const dl_ir_type *t, char *buf, size_t size) {
    if (t->rank < 0) {
        snprintf(buf, size, "?");
        return;
    }
    dl_ir_type_format(NULL, t, buf, size);
}

// Attribute names to compare (each once).
typedef DL_VEC(const char *) name_vec;

static bool push_unique(name_vec *v, const char *s) {
    for (size_t i = 0; i < v->len; i++) {
        if (strcmp(v->data[i], s) == 0) {
            return true;
        }
    }
    return DL_VEC_PUSH(v, s);
}

// Compares node na (in A) with nb (in B). Returns 1 if they differ (description in *what), 0 if
// not, -1 when out of memory.
static int compare_nodes(const side *A, const side *B, const dl_ir_node *na, const dl_ir_node *nb,
                         dl_strbuf *what) {
    if (na->op != nb->op) {
        dl_strbuf_printf(what, "op %s vs %s", dl_ir_op_get_info(na->op)->name,
                         dl_ir_op_get_info(nb->op)->name);
        return 1;
    }
    if (na->n_inputs != nb->n_inputs) {
        dl_strbuf_printf(what, "%zu inputs vs %zu", na->n_inputs, nb->n_inputs);
        return 1;
    }
    for (size_t i = 0; i < na->n_inputs; i++) {
        char ra[160], rb[160];
        value_ref(A, na->inputs[i], ra, sizeof ra);
        value_ref(B, nb->inputs[i], rb, sizeof rb);
        if (strcmp(ra, rb) != 0) {
            char da[200], db[200];
            value_display(A, na->inputs[i], da, sizeof da);
            value_display(B, nb->inputs[i], db, sizeof db);
            dl_strbuf_printf(what, "input %zu is %s vs %s", i, da, db);
            return 1;
        }
    }
    // Attributes: every spec of the op, then unknown ones of either node.
    const dl_ir_op_info *info = dl_ir_op_get_info(na->op);
    name_vec names = {0};
    bool ok = true;
    for (size_t i = 0; i < info->n_attrs && ok; i++) {
        ok = push_unique(&names, info->attrs[i].name);
    }
    for (size_t i = 0; i < na->n_attrs && ok; i++) {
        ok = push_unique(&names, na->attrs[i].name);
    }
    for (size_t i = 0; i < nb->n_attrs && ok; i++) {
        ok = push_unique(&names, nb->attrs[i].name);
    }
    int rc = 0;
    for (size_t i = 0; i < names.len && ok && rc == 0; i++) {
        char *da = NULL, *ca = NULL, *db = NULL, *cb = NULL;
        ok = node_attr_text(na, names.data[i], &da, &ca) &&
             node_attr_text(nb, names.data[i], &db, &cb);
        if (ok && strcmp(ca, cb) != 0) {
            dl_strbuf_printf(what, "attribute %s %s vs %s", names.data[i], da, db);
            rc = 1;
        }
        free(da);
        free(ca);
        free(db);
        free(cb);
    }
    free(names.data);
    if (!ok) {
        return -1;
    }
    if (rc) {
        return rc;
    }
    if (na->n_outputs != nb->n_outputs) {
        dl_strbuf_printf(what, "%zu outputs vs %zu", na->n_outputs, nb->n_outputs);
        return 1;
    }
    for (size_t i = 0; i < na->n_outputs; i++) {
        const dl_ir_value *va = na->outputs[i], *vb = nb->outputs[i];
        if (!va || !vb) {
            continue;
        }
        char ta[160], tb[160];
        type_text(&va->type, ta, sizeof ta);
        type_text(&vb->type, tb, sizeof tb);
        if (strcmp(ta, tb) != 0) {
            dl_strbuf_printf(what, "output %s has type %s vs %s", va->name, ta, tb);
            return 1;
        }
        if (va->is_output != vb->is_output || (va->is_output && strcmp(va->name, vb->name) != 0)) {
            dl_strbuf_printf(what, "output %zu is %s%s vs %s%s", i, va->name,
                             va->is_output ? " (a model output)" : "", vb->name,
                             vb->is_output ? " (a model output)" : "");
            return 1;
        }
    }
    return 0;
}

// Appends one difference line to x->diffs. False when out of memory.
static bool add_diff(dl_ir_diff *x, const char *fmt, ...) DL_PRINTF(2, 3);
static bool add_diff(dl_ir_diff *x, const char *fmt, ...) {
    dl_strbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    dl_strbuf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *s = dl_strbuf_take(&b);
    if (!s || !DL_VEC_PUSH(&x->diffs, s)) {
        free(s);
        return false;
    }
    return true;
}

// Compares two lists of interface values (inputs, params or outputs) by position.
static bool compare_values(dl_ir_diff *x, const char *what, dl_ir_value *const *va, size_t na,
                           dl_ir_value *const *vb, size_t nb) {
    if (na != nb) {
        if (!add_diff(x, "%s: %zu vs %zu", what, na, nb)) {
            return false;
        }
    }
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++) {
        const dl_ir_value *a = va[i], *b = vb[i];
        if (strcmp(a->name, b->name) != 0) {
            if (!add_diff(x, "%s %zu: name %s vs %s", what, i, a->name, b->name)) {
                return false;
            }
            continue;
        }
        char ta[160], tb[160];
        type_text(&a->type, ta, sizeof ta);
        type_text(&b->type, tb, sizeof tb);
        if (strcmp(ta, tb) != 0) {
            if (!add_diff(x, "%s %s: type %s vs %s", what, a->name, ta, tb)) {
                return false;
            }
        }
        if (a->kind == DL_IR_VAL_PARAM && b->kind == DL_IR_VAL_PARAM) {
            dl_strbuf ia = {0}, ib = {0};
            dl_ir__init_text(&ia, a);
            dl_ir__init_text(&ib, b);
            bool ok = !ia.oom && !ib.oom;
            if (ok && strcmp(ia.data ? ia.data : "", ib.data ? ib.data : "") != 0) {
                ok = add_diff(x, "%s %s: initialiser %s vs %s", what, a->name, ia.data, ib.data);
            }
            dl_strbuf_fini(&ia);
            dl_strbuf_fini(&ib);
            if (!ok) {
                return false;
            }
        }
    }
    return true;
}

// Train-block differences. Hyper-parameter values (lr, betas, eps, weight_decay, alpha,
// dampening, a non-zero momentum's value, the clip norm, the loss scale's numbers) are session
// values and not in the key (driver/train_values.c writes them into the artifact); what shapes
// the compiled step (optimizer, its flags, whether momentum / clipping / which loss scaling /
// accumulation / precision / frozen params / the loss) is in the key.
#define TRAIN_VALUE_NOTE  "a hyper-parameter value: not in the key"
#define TRAIN_STRUCT_NOTE "structural: in the key"

// Value of `name` in an attribute list with the spec's default applied.
static double train_attr_value(const dl_ir_attr_spec *sp, const dl_ir_attr *attrs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(attrs[i].name, sp->name) == 0) {
            return attrs[i].kind == DL_IR_ATTR_INT ? (double)attrs[i].i : attrs[i].f;
        }
    }
    return sp->kind == DL_IR_ATTR_INT ? (double)sp->def_i : sp->def_f;
}

static bool same_freeze(const dl_ir_train *a, const dl_ir_train *b) {
    if (a->n_freeze != b->n_freeze) {
        return false;
    }
    for (size_t i = 0; i < a->n_freeze; i++) {
        bool found = false;
        for (size_t k = 0; k < b->n_freeze && !found; k++) {
            found =
                a->freeze[i] && b->freeze[k] && strcmp(a->freeze[i]->name, b->freeze[k]->name) == 0;
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

static bool diff_train(dl_ir_diff *x, const dl_ir_train *a, const dl_ir_train *b) {
    bool ok = true;
    if (strcmp(a->loss->name, b->loss->name) != 0) {
        ok = add_diff(x, "train: loss %s vs %s (" TRAIN_STRUCT_NOTE ")", a->loss->name,
                      b->loss->name);
    }
    if (ok && a->optimizer != b->optimizer) {
        ok = add_diff(x, "train: optimizer %s vs %s (" TRAIN_STRUCT_NOTE ")",
                      dl_ir_optim_name(a->optimizer), dl_ir_optim_name(b->optimizer));
    } else if (ok) {
        size_t n;
        const dl_ir_attr_spec *sp = dl_ir_optim_attr_specs(a->optimizer, &n);
        for (size_t i = 0; ok && i < n; i++) {
            double va = train_attr_value(&sp[i], a->opt_attrs, a->n_opt_attrs);
            double vb = train_attr_value(&sp[i], b->opt_attrs, b->n_opt_attrs);
            if (va == vb) {
                continue;
            }
            // Flags decide the step's code and state; momentum whether a buffer exists.
            bool structural = sp[i].kind == DL_IR_ATTR_INT ||
                              (strcmp(sp[i].name, "momentum") == 0 && (va != 0.0) != (vb != 0.0));
            ok = add_diff(x, "train: %s %s %g vs %g (%s)", dl_ir_optim_name(a->optimizer),
                          sp[i].name, va, vb,
                          structural ? strcmp(sp[i].name, "momentum") == 0
                                           ? "structural: whether momentum is used is in the key"
                                           : TRAIN_STRUCT_NOTE
                                     : TRAIN_VALUE_NOTE);
        }
    }
    if (ok && a->has_clip_norm != b->has_clip_norm) {
        ok = add_diff(x, "train: clip_norm %s vs %s (" TRAIN_STRUCT_NOTE ")",
                      a->has_clip_norm ? "set" : "none", b->has_clip_norm ? "set" : "none");
    } else if (ok && a->has_clip_norm && a->clip_norm != b->clip_norm) {
        ok = add_diff(x, "train: clip_norm %g vs %g (" TRAIN_VALUE_NOTE ")", a->clip_norm,
                      b->clip_norm);
    }
    static const char *const ls_names[] = {"none", "static", "dynamic"};
    if (ok && a->loss_scale != b->loss_scale) {
        ok = add_diff(x, "train: loss_scale %s vs %s (" TRAIN_STRUCT_NOTE ")",
                      ls_names[a->loss_scale], ls_names[b->loss_scale]);
    } else if (ok && a->loss_scale == DL_IR_LS_STATIC &&
               a->loss_scale_value != b->loss_scale_value) {
        ok = add_diff(x, "train: loss_scale %g vs %g (" TRAIN_VALUE_NOTE ")", a->loss_scale_value,
                      b->loss_scale_value);
    } else if (ok && a->loss_scale == DL_IR_LS_DYNAMIC) {
        size_t n;
        const dl_ir_attr_spec *sp = dl_ir_loss_scale_attr_specs(&n);
        for (size_t i = 0; ok && i < n; i++) {
            double va = train_attr_value(&sp[i], a->ls_attrs, a->n_ls_attrs);
            double vb = train_attr_value(&sp[i], b->ls_attrs, b->n_ls_attrs);
            if (va != vb) {
                ok = add_diff(x, "train: loss_scale %s %g vs %g (" TRAIN_VALUE_NOTE ")", sp[i].name,
                              va, vb);
            }
        }
    }
    dl_dtype pa = a->has_precision ? a->precision : DL_DT_FLOAT;
    dl_dtype pb = b->has_precision ? b->precision : DL_DT_FLOAT;
    if (ok && pa != pb) {
        ok = add_diff(x, "train: precision %s vs %s (" TRAIN_STRUCT_NOTE ")", dl_dtype_name(pa),
                      dl_dtype_name(pb));
    }
    int64_t ka = a->has_accumulate ? a->accumulate : 1, kb = b->has_accumulate ? b->accumulate : 1;
    if (ok && ka != kb) {
        ok = add_diff(x, "train: accumulate %lld vs %lld (" TRAIN_STRUCT_NOTE ")", (long long)ka,
                      (long long)kb);
    }
    if (ok && a->sync_bn != b->sync_bn) {
        ok = add_diff(x, "train: sync_batchnorm %s vs %s (" TRAIN_STRUCT_NOTE ")",
                      a->sync_bn ? "true" : "false", b->sync_bn ? "true" : "false");
    }
    if (ok && !same_freeze(a, b)) {
        ok = add_diff(x, "train: freeze lists differ (" TRAIN_STRUCT_NOTE ")");
    }
    return ok;
}

static bool diff_modules(const side *A, const side *B, dl_ir_diff *x) {
    const dl_ir_module *ma = A->m, *mb = B->m;
    if (strcmp(ma->name ? ma->name : "", mb->name ? mb->name : "") != 0 &&
        !add_diff(x, "model name %s vs %s", ma->name, mb->name)) {
        return false;
    }
    if (!compare_values(x, "input", ma->inputs.data, ma->inputs.len, mb->inputs.data,
                        mb->inputs.len) ||
        !compare_values(x, "param", ma->params.data, ma->params.len, mb->params.data,
                        mb->params.len) ||
        !compare_values(x, "const", ma->consts.data, ma->consts.len, mb->consts.data,
                        mb->consts.len) ||
        !compare_values(x, "output", ma->outputs.data, ma->outputs.len, mb->outputs.data,
                        mb->outputs.len)) {
        return false;
    }
    if (ma->nodes.len != mb->nodes.len &&
        !add_diff(x, "node count: %zu vs %zu", ma->nodes.len, mb->nodes.len)) {
        return false;
    }
    bool ta = ma->train != NULL, tb = mb->train != NULL;
    if (ta != tb && !add_diff(x, "train block: %s vs %s", ta ? "present" : "absent",
                              tb ? "present" : "absent")) {
        return false;
    }
    if (ta && tb && !diff_train(x, ma->train, mb->train)) {
        return false;
    }
    size_t n = ma->nodes.len < mb->nodes.len ? ma->nodes.len : mb->nodes.len;
    for (size_t i = 0; i < n; i++) {
        const dl_ir_node *na = ma->nodes.data[i], *nb = mb->nodes.data[i];
        dl_strbuf what = {0};
        int r = compare_nodes(A, B, na, nb, &what);
        if (r < 0 || what.oom) {
            dl_strbuf_fini(&what);
            return false;
        }
        if (r > 0) {
            x->has_first = true;
            x->node_index = i;
            x->line_a = na->loc.line;
            x->line_b = nb->loc.line;
            x->first_what = dl_strbuf_take(&what);
            return x->first_what != NULL;
        }
        dl_strbuf_fini(&what);
    }
    if (ma->nodes.len != mb->nodes.len) {
        // Every common node is equal: the first extra node is the first difference.
        const side *S = ma->nodes.len > n ? A : B;
        const dl_ir_node *extra = S->m->nodes.data[n];
        x->has_first = true;
        x->node_index = n;
        if (S == A) {
            x->line_a = extra->loc.line;
        } else {
            x->line_b = extra->loc.line;
        }
        dl_strbuf what = {0};
        dl_strbuf_printf(&what, "only %s has a node %zu (%s)", S == A ? "A" : "B", n,
                         dl_ir_op_get_info(extra->op)->name);
        x->first_what = dl_strbuf_take(&what);
        return x->first_what != NULL;
    }
    return true;
}

dl_status dl_ir_diff_modules(const dl_ir_module *a, const dl_ir_module *b, dl_ir_diff *out) {
    memset(out, 0, sizeof *out);
    side A = {a, NULL}, B = {b, NULL};
    dl_status st = DL_ERR_NOMEM;
    if (number_values(&A) && number_values(&B) && diff_modules(&A, &B, out)) {
        st = DL_OK;
    }
    free(A.num);
    free(B.num);
    if (st != DL_OK) {
        dl_ir_diff_fini(out);
    }
    return st;
}

void dl_ir_diff_fini(dl_ir_diff *d) {
    for (size_t i = 0; i < d->diffs.len; i++) {
        free(d->diffs.data[i]);
    }
    free(d->diffs.data);
    free(d->first_what);
    memset(d, 0, sizeof *d);
}
