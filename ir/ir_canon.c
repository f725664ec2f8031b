// ir/ir_canon.c — the canonical serialisation of a module: the input of the compile cache key.
//
// The text is line-oriented and unambiguous: every name or string is length-prefixed
// ("5:probs"), every float is written exactly in C99 hex ("%a"), every list carries its count.
// It starts with the version line "dlcc-canon 1"; bump it whenever the format changes.
//
// What goes in: the module name; dims (name, bound value); inputs, params and consts in
// declaration order (name, dtype, concrete dims, initialiser with the effective seed, literal
// data); nodes in node order (op, which inputs are present, output arity and inferred types,
// every attribute the op knows with its default applied, sorted by name); outputs in order; the
// train config with defaults applied. What stays out: comments, layout, statement interleaving,
// dim *names* inside types (their values are in), and the names of intermediate values: node
// outputs that are not module outputs are renumbered %0, %1, ... in definition order.
#include "dl_ir.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void put_str(dl_strbuf *b, const char *s) {
    s = s ? s : "";
    dl_strbuf_printf(b, " %zu:", strlen(s));
    dl_strbuf_puts(b, s);
}

static void put_i64(dl_strbuf *b, int64_t v) {
    dl_strbuf_printf(b, " %" PRId64, v);
}

// Exact: hex floats round-trip every double; NaNs collapse to one spelling (payloads do not
// reach the compiled code).
static void put_f64(dl_strbuf *b, double v) {
    if (v != v) {
        dl_strbuf_puts(b, " nan");
    } else {
        dl_strbuf_printf(b, " %a", v);
    }
}

static void put_type(dl_strbuf *b, const dl_ir_type *t) {
    if (t->rank < 0) {
        dl_strbuf_puts(b, " ?"); // not inferred yet: the dtype field is a placeholder too
        return;
    }
    dl_strbuf_printf(b, " %s[", dl_dtype_name(t->dtype));
    for (int32_t i = 0; i < t->rank; i++) {
        dl_strbuf_printf(b, "%s%" PRId64, i ? "," : "", t->dims[i].value);
    }
    dl_strbuf_puts(b, "]");
}

// Literal data as stored: a splat and the same values written out in full serialise
// differently, which only costs a cache miss.
static void put_literal(dl_strbuf *b, const dl_ir_literal *l) {
    if (!l) {
        dl_strbuf_puts(b, " nolit");
        return;
    }
    dl_strbuf_puts(b, l->is_splat ? " splat" : " data");
    put_i64(b, l->n);
    for (int64_t i = 0; i < l->n; i++) {
        if (l->f) {
            put_f64(b, l->f[i]);
        } else if (l->i) {
            put_i64(b, l->i[i]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Attributes

// Attributes whose *absence* means something other than the op table's default, so the default
// must not be filled in: Clip's min/max (absent = unbounded; the table's 0 is only a type
// placeholder) and Dropout's seed (absent = derived, not 0).
static bool presence_matters(dl_ir_op op, const char *name) {
    return (op == DL_IR_OP_CLIP && (strcmp(name, "min") == 0 || strcmp(name, "max") == 0)) ||
           (op == DL_IR_OP_DROPOUT && strcmp(name, "seed") == 0);
}

// One attribute value, converted to the spec's kind where the conversion is exact (an int
// written for a float attribute: `alpha = 1` and `alpha = 1.0` are the same).
static void put_attr_value(dl_strbuf *b, const dl_ir_attr_spec *spec, const dl_ir_attr *a) {
    dl_ir_attr_kind want = spec ? spec->kind : a->kind;
    if (want == DL_IR_ATTR_FLOAT && a->kind == DL_IR_ATTR_INT) {
        dl_strbuf_puts(b, " float");
        put_f64(b, (double)a->i);
        return;
    }
    if (want == DL_IR_ATTR_FLOATS && a->kind == DL_IR_ATTR_INTS) {
        dl_strbuf_puts(b, " floats");
        put_i64(b, (int64_t)a->n);
        for (size_t k = 0; k < a->n; k++) {
            put_f64(b, (double)a->ints[k]);
        }
        return;
    }
    // An empty list takes the spec's list kind (the parser cannot tell `[]` apart).
    dl_ir_attr_kind kind = a->kind;
    bool is_list =
        kind == DL_IR_ATTR_INTS || kind == DL_IR_ATTR_FLOATS || kind == DL_IR_ATTR_STRINGS;
    bool want_list =
        want == DL_IR_ATTR_INTS || want == DL_IR_ATTR_FLOATS || want == DL_IR_ATTR_STRINGS;
    if (is_list && want_list && a->n == 0) {
        kind = want;
    }
    switch (kind) {
    case DL_IR_ATTR_INT:
        dl_strbuf_puts(b, " int");
        put_i64(b, a->i);
        return;
    case DL_IR_ATTR_FLOAT:
        dl_strbuf_puts(b, " float");
        put_f64(b, a->f);
        return;
    case DL_IR_ATTR_STRING:
        dl_strbuf_puts(b, " string");
        put_str(b, a->s);
        return;
    case DL_IR_ATTR_INTS:
        dl_strbuf_puts(b, " ints");
        put_i64(b, (int64_t)a->n);
        for (size_t k = 0; k < a->n; k++) {
            put_i64(b, a->ints[k]);
        }
        return;
    case DL_IR_ATTR_FLOATS:
        dl_strbuf_puts(b, " floats");
        put_i64(b, (int64_t)a->n);
        for (size_t k = 0; k < a->n; k++) {
            put_f64(b, a->floats[k]);
        }
        return;
    case DL_IR_ATTR_STRINGS:
        dl_strbuf_puts(b, " strings");
        put_i64(b, (int64_t)a->n);
        for (size_t k = 0; k < a->n; k++) {
            put_str(b, a->strs[k]);
        }
        return;
    }
}

static void put_spec_default(dl_strbuf *b, const dl_ir_attr_spec *s) {
    switch (s->kind) {
    case DL_IR_ATTR_INT:
        dl_strbuf_puts(b, " int");
        put_i64(b, s->def_i);
        return;
    case DL_IR_ATTR_FLOAT:
        dl_strbuf_puts(b, " float");
        put_f64(b, s->def_f);
        return;
    case DL_IR_ATTR_STRING:
        if (s->def_s) {
            dl_strbuf_puts(b, " string");
            put_str(b, s->def_s);
        } else {
            dl_strbuf_puts(b, " absent");
        }
        return;
    case DL_IR_ATTR_INTS:
    case DL_IR_ATTR_FLOATS:
    case DL_IR_ATTR_STRINGS:
        dl_strbuf_puts(b, " absent");
        return;
    }
}

static const dl_ir_attr *find_attr(const dl_ir_attr *attrs, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(attrs[i].name, name) == 0) {
            return &attrs[i];
        }
    }
    return NULL;
}

static dl_status put_unknown_attrs(dl_strbuf *b, const dl_ir_attr_spec *specs, size_t n_specs,
                                   const dl_ir_attr *attrs, size_t n_attrs);

static int cmp_attr_name(const void *x, const void *y) {
    const dl_ir_attr *a = *(const dl_ir_attr *const *)x;
    const dl_ir_attr *c = *(const dl_ir_attr *const *)y;
    return strcmp(a->name, c->name);
}

// Every attribute of `specs` (sorted by name in the op table) with its default applied, then
// any attribute the specs do not know (a verifier error, kept so the key still differs), sorted.
// `op` is DL_IR_OP_COUNT for the train block's attribute lists.
static dl_status put_attr_set(dl_strbuf *b, dl_ir_op op, const dl_ir_attr_spec *specs,
                              size_t n_specs, const dl_ir_attr *attrs, size_t n_attrs) {
    dl_strbuf_printf(b, " attrs %zu", n_specs);
    for (size_t i = 0; i < n_specs; i++) {
        const dl_ir_attr_spec *s = &specs[i];
        const dl_ir_attr *a = find_attr(attrs, n_attrs, s->name);
        put_str(b, s->name);
        if (a) {
            put_attr_value(b, s, a);
        } else if (op != DL_IR_OP_COUNT && presence_matters(op, s->name)) {
            dl_strbuf_puts(b, " absent");
        } else {
            put_spec_default(b, s);
        }
    }
    return put_unknown_attrs(b, specs, n_specs, attrs, n_attrs);
}

// The attributes `specs` does not know, sorted by name.
static dl_status put_unknown_attrs(dl_strbuf *b, const dl_ir_attr_spec *specs, size_t n_specs,
                                   const dl_ir_attr *attrs, size_t n_attrs) {
    const dl_ir_attr **extra = dl_mem_alloc((n_attrs ? n_attrs : 1) * sizeof(*extra));
    if (!extra) {
        return DL_ERR_NOMEM;
    }
    size_t n_extra = 0;
    for (size_t i = 0; i < n_attrs; i++) {
        bool known = false;
        for (size_t k = 0; k < n_specs && !known; k++) {
            known = strcmp(specs[k].name, attrs[i].name) == 0;
        }
        if (!known) {
            extra[n_extra++] = &attrs[i];
        }
    }
    qsort(extra, n_extra, sizeof(*extra), cmp_attr_name);
    dl_strbuf_printf(b, " unknown %zu", n_extra);
    for (size_t i = 0; i < n_extra; i++) {
        put_str(b, extra[i]->name);
        put_attr_value(b, NULL, extra[i]);
    }
    free(extra);
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Values

typedef struct canon_ctx {
    const dl_ir_module *m;
    dl_strbuf *b;
    int64_t *num; // per value id: %number of an intermediate, or -1 (referenced by name)
} canon_ctx;

static void put_ref(canon_ctx *c, const dl_ir_value *v) {
    if (!v) {
        dl_strbuf_puts(c->b, " -");
    } else if (v->id < c->m->values.len && c->num[v->id] >= 0) {
        dl_strbuf_printf(c->b, " %%%" PRId64, c->num[v->id]);
    } else {
        put_str(c->b, v->name);
    }
}

static void put_init(canon_ctx *c, const dl_ir_value *p) {
    dl_strbuf *b = c->b;
    const dl_ir_init *in = p->init;
    if (!in) {
        dl_strbuf_puts(b, " noinit");
        return;
    }
    switch (in->kind) {
    case DL_IR_INIT_ZEROS:
        dl_strbuf_puts(b, " zeros");
        return;
    case DL_IR_INIT_ONES:
        dl_strbuf_puts(b, " ones");
        return;
    case DL_IR_INIT_CONSTANT:
        dl_strbuf_puts(b, " constant");
        put_f64(b, in->a);
        return;
    case DL_IR_INIT_UNIFORM:
    case DL_IR_INIT_NORMAL:
        dl_strbuf_puts(b, in->kind == DL_IR_INIT_UNIFORM ? " uniform" : " normal");
        put_f64(b, in->a);
        put_f64(b, in->b);
        dl_strbuf_printf(b, " seed %" PRIu64, dl_ir_init_seed(p));
        return;
    case DL_IR_INIT_GLOROT_UNIFORM:
    case DL_IR_INIT_HE_NORMAL:
        dl_strbuf_puts(b, in->kind == DL_IR_INIT_GLOROT_UNIFORM ? " glorot_uniform" : " he_normal");
        dl_strbuf_printf(b, " seed %" PRIu64, dl_ir_init_seed(p));
        return;
    case DL_IR_INIT_LITERAL:
        dl_strbuf_puts(b, " literal");
        put_literal(b, in->lit);
        return;
    case DL_IR_INIT_FILE:
        // The path as written (relative to the .dlg): no absolute paths in the key. The file's
        // contents are the cache layer's business (it hashes them beside this text).
        dl_strbuf_puts(b, " file");
        put_str(b, in->path);
        put_str(b, in->tensor);
        return;
    }
}

static void put_decls(canon_ctx *c, const char *kw, const dl_ir_value *const *vs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const dl_ir_value *v = vs[i];
        dl_strbuf_puts(c->b, kw);
        put_str(c->b, v->name);
        put_type(c->b, &v->type);
        if (v->kind == DL_IR_VAL_PARAM) {
            put_init(c, v);
        } else if (v->kind == DL_IR_VAL_CONST) {
            put_literal(c->b, v->lit);
        }
        dl_strbuf_puts(c->b, "\n");
    }
}

static dl_status put_node(canon_ctx *c, const dl_ir_node *n) {
    dl_strbuf *b = c->b;
    const dl_ir_op_info *info = dl_ir_op_get_info(n->op);
    dl_strbuf_puts(b, "node");
    put_str(b, info->name);
    // Trailing omitted inputs mean the same as fewer inputs (`Clip (x, lo, )` == `Clip (x, lo)`).
    size_t n_in = n->n_inputs;
    while (n_in > 0 && !n->inputs[n_in - 1]) {
        n_in--;
    }
    dl_strbuf_printf(b, " in %zu", n_in);
    for (size_t i = 0; i < n_in; i++) {
        put_ref(c, n->inputs[i]);
    }
    dl_strbuf_printf(b, " out %zu", n->n_outputs);
    for (size_t i = 0; i < n->n_outputs; i++) {
        put_ref(c, n->outputs[i]);
        put_type(b, &n->outputs[i]->type);
    }
    DL_TRY(put_attr_set(b, n->op, info->attrs, info->n_attrs, n->attrs, n->n_attrs));
    dl_strbuf_puts(b, "\n");
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Train config

// With DL_IR_CANON_NO_HYPERPARAMS the *values* of the optimizer's continuous hyper-parameters
// are left out: they become runtime values of a session, so a sweep over lr reuses one
// artifact. What stays is everything that changes the compiled step's structure or state:
// the optimizer, its integer flags (nesterov, amsgrad, centered) and whether momentum is zero
// (a non-zero momentum adds a momentum buffer per param). weight_decay and dampening are
// treated as pure values: codegen must emit their terms unconditionally in that mode. The clip
// norm and the loss scale's numbers are values as well (put_train); whether clipping and which
// loss scaling exist stay structural.
static bool is_hyperparam(const char *name) {
    static const char *const hp[] = {"lr",       "beta1",        "beta2", "eps",
                                     "momentum", "weight_decay", "alpha", "dampening"};
    for (size_t i = 0; i < DL_ARRAY_LEN(hp); i++) {
        if (strcmp(hp[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static int cmp_value_name(const void *x, const void *y) {
    const dl_ir_value *a = *(const dl_ir_value *const *)x;
    const dl_ir_value *c = *(const dl_ir_value *const *)y;
    return strcmp(a->name ? a->name : "", c->name ? c->name : "");
}

static dl_status put_train(canon_ctx *c, const dl_ir_train *t, unsigned flags) {
    dl_strbuf *b = c->b;
    dl_strbuf_puts(b, "train loss");
    put_ref(c, t->loss);
    dl_strbuf_puts(b, "\noptimizer");
    put_str(b, dl_ir_optim_name(t->optimizer));
    size_t n_specs;
    const dl_ir_attr_spec *specs = dl_ir_optim_attr_specs(t->optimizer, &n_specs);
    if (flags & DL_IR_CANON_NO_HYPERPARAMS) {
        dl_strbuf_puts(b, " structural");
        for (size_t i = 0; i < n_specs; i++) {
            const char *name = specs[i].name;
            if (strcmp(name, "momentum") == 0) {
                dl_strbuf_printf(b, " momentum %s",
                                 dl_ir_train_opt_value(t, name) != 0.0 ? "nonzero" : "zero");
            } else if (!is_hyperparam(name)) {
                put_str(b, name);
                put_f64(b, dl_ir_train_opt_value(t, name));
            }
        }
        // Unknown attributes still count (a verifier error, but never a silent key collision).
        DL_TRY(put_unknown_attrs(b, specs, n_specs, t->opt_attrs, t->n_opt_attrs));
    } else {
        DL_TRY(put_attr_set(b, DL_IR_OP_COUNT, specs, n_specs, t->opt_attrs, t->n_opt_attrs));
    }
    // The clip norm and the loss scale's values (static scale; dynamic init, growth, backoff,
    // interval) are session values too: only whether they exist is structural.
    bool values = !(flags & DL_IR_CANON_NO_HYPERPARAMS);
    dl_strbuf_puts(b, "\nclip_norm");
    if (t->has_clip_norm && values) {
        put_f64(b, t->clip_norm);
    } else {
        dl_strbuf_puts(b, t->has_clip_norm ? " some" : " none");
    }
    dl_strbuf_printf(b, "\nprecision %s",
                     dl_dtype_name(t->has_precision ? t->precision : DL_DT_FLOAT));
    dl_strbuf_puts(b, "\nloss_scale");
    size_t n_ls;
    const dl_ir_attr_spec *ls = dl_ir_loss_scale_attr_specs(&n_ls);
    switch (t->loss_scale) {
    case DL_IR_LS_NONE:
        dl_strbuf_puts(b, " none");
        break;
    case DL_IR_LS_STATIC:
        dl_strbuf_puts(b, " static");
        if (values) {
            put_f64(b, t->loss_scale_value);
        }
        break;
    case DL_IR_LS_DYNAMIC:
        dl_strbuf_puts(b, " dynamic");
        if (values) {
            DL_TRY(put_attr_set(b, DL_IR_OP_COUNT, ls, n_ls, t->ls_attrs, t->n_ls_attrs));
        } else {
            DL_TRY(put_unknown_attrs(b, ls, n_ls, t->ls_attrs, t->n_ls_attrs));
        }
        break;
    }
    const dl_ir_value **fr = dl_mem_alloc((t->n_freeze ? t->n_freeze : 1) * sizeof(*fr));
    if (!fr) {
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < t->n_freeze; i++) {
        fr[i] = t->freeze[i];
    }
    qsort(fr, t->n_freeze, sizeof(*fr), cmp_value_name);
    dl_strbuf_printf(b, "\nfreeze %zu", t->n_freeze);
    for (size_t i = 0; i < t->n_freeze; i++) {
        put_str(b, fr[i] ? fr[i]->name : "");
    }
    free(fr);
    dl_strbuf_printf(b, "\naccumulate %" PRId64 "\n", t->has_accumulate ? t->accumulate : 1);
    if (t->sync_bn) { // only when set: the keys of every other model stay as they were
        dl_strbuf_puts(b, "sync_batchnorm 1\n");
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------

static dl_status canon_body(canon_ctx *c, unsigned flags) {
    const dl_ir_module *m = c->m;
    dl_strbuf *b = c->b;
    dl_strbuf_puts(b, "dlcc-canon 1\nmodel");
    put_str(b, m->name);
    dl_strbuf_printf(b, "\ndims %zu\n", m->dims.len);
    for (size_t i = 0; i < m->dims.len; i++) {
        dl_strbuf_puts(b, "dim");
        put_str(b, m->dims.data[i].name);
        put_i64(b, m->dims.data[i].value);
        dl_strbuf_puts(b, "\n");
    }
    dl_strbuf_printf(b, "inputs %zu params %zu consts %zu nodes %zu outputs %zu\n", m->inputs.len,
                     m->params.len, m->consts.len, m->nodes.len, m->outputs.len);
    put_decls(c, "input", (const dl_ir_value *const *)m->inputs.data, m->inputs.len);
    put_decls(c, "param", (const dl_ir_value *const *)m->params.data, m->params.len);
    put_decls(c, "const", (const dl_ir_value *const *)m->consts.data, m->consts.len);
    for (size_t i = 0; i < m->nodes.len; i++) {
        DL_TRY(put_node(c, m->nodes.data[i]));
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        dl_strbuf_puts(b, "output");
        put_ref(c, m->outputs.data[i]);
        dl_strbuf_puts(b, "\n");
    }
    if (m->train) {
        DL_TRY(put_train(c, m->train, flags));
    } else {
        dl_strbuf_puts(b, "notrain\n");
    }
    return DL_OK;
}

dl_status dl_ir_canonical(const dl_ir_module *m, unsigned flags, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) {
        *out_len = 0;
    }
    dl_strbuf b = {0};
    canon_ctx c = {m, &b, dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof(int64_t))};
    if (!c.num) {
        return DL_ERR_NOMEM;
    }
    // Intermediates are numbered in definition order: node order, then output order.
    for (size_t i = 0; i < m->values.len; i++) {
        c.num[i] = -1;
    }
    int64_t next = 0;
    for (size_t i = 0; i < m->nodes.len; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        for (size_t k = 0; k < n->n_outputs; k++) {
            const dl_ir_value *v = n->outputs[k];
            if (v && !v->is_output && v->id < m->values.len) {
                c.num[v->id] = next++;
            }
        }
    }
    dl_status st = canon_body(&c, flags);
    free(c.num);
    if (st != DL_OK) {
        dl_strbuf_fini(&b);
        return st;
    }
    size_t len = b.len;
    char *text = dl_strbuf_take(&b);
    if (!text) {
        return DL_ERR_NOMEM;
    }
    *out = text;
    if (out_len) {
        *out_len = len;
    }
    return DL_OK;
}
