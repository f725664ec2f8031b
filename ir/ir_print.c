// ir/ir_print.c — the .dlg printer behind `dlcc fmt` and `--dump-after`: writes a module back as
// graph text that the frontend parses into an identical module.
//
// Layout: statements in m->stmts order; `model NAME` after the header comment; comments kept
// where the parser attached them; at most one blank line where a statement had one before it.
// Columns are aligned within a *run*: consecutive statements of the same class (dims; the
// declarations input/param/const; nodes) with no blank line or leading comment in between. Runs
// depend only on the module (kinds, blank_before, comment_before), never on the text the module
// came from, so printing is deterministic and fmt(parse(fmt(x))) == fmt(x).
#include "dl_ir.h"
#include "ir_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

// Alignment classes; statements of one class in a row share their columns.
typedef enum run_class { RUN_DIM, RUN_DECL, RUN_NODE, RUN_OTHER } run_class;

static run_class class_of(dl_ir_stmt_kind k) {
    switch (k) {
    case DL_IR_STMT_DIM:
        return RUN_DIM;
    case DL_IR_STMT_INPUT:
    case DL_IR_STMT_PARAM:
    case DL_IR_STMT_CONST:
        return RUN_DECL;
    case DL_IR_STMT_NODE:
        return RUN_NODE;
    case DL_IR_STMT_OUTPUT:
    case DL_IR_STMT_TRAIN:
        return RUN_OTHER;
    }
    return RUN_OTHER;
}

static void put_int(dl_strbuf *b, int64_t v) {
    dl_strbuf_printf(b, "%" PRId64, v);
}

static void put_double(dl_strbuf *b, double v) {
    char buf[40];
    dl_format_double(v, buf);
    dl_strbuf_puts(b, buf);
}

// string -> '"' (char | '\"' | '\\')* '"'
static void put_string(dl_strbuf *b, const char *s) {
    dl_strbuf_puts(b, "\"");
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '"' || *p == '\\') {
            dl_strbuf_append(b, "\\", 1);
        }
        dl_strbuf_append(b, p, 1);
    }
    dl_strbuf_puts(b, "\"");
}

// An int that may have been written as a dim name (sym >= 0). The name is printed only while
// the dim is bound to this very value: a zero-initialised sym (0 instead of -1) from a careless
// builder must not turn a literal into a different number (the verifier reports it).
static void put_sym_int(dl_strbuf *b, const dl_ir_module *m, int64_t v, int32_t sym) {
    if (sym >= 0 && (size_t)sym < m->dims.len && m->dims.data[sym].value == v) {
        dl_strbuf_puts(b, m->dims.data[sym].name);
    } else {
        put_int(b, v);
    }
}

// type -> ELEM '[' (dim (',' dim)*)? ']'      dim -> INT | DIM_NAME      ("float[]" is a scalar)
static void put_type(dl_strbuf *b, const dl_ir_module *m, const dl_ir_type *t) {
    dl_strbuf_puts(b, dl_dtype_name(t->dtype));
    dl_strbuf_puts(b, "[");
    for (int32_t i = 0; i < t->rank; i++) {
        if (i) {
            dl_strbuf_puts(b, ", ");
        }
        put_sym_int(b, m, t->dims[i].value, t->dims[i].sym);
    }
    dl_strbuf_puts(b, "]");
}

// value -> INT | DIM_NAME | FLOAT | STRING | '[' (value (',' value)*)? ']'
// Floats always carry a '.', 'e', "inf" or "nan" (dl_format_double), so a FLOAT attribute
// never reads back as an INT; the parser would coerce it anyway, but the text stays faithful.
static void put_attr_value(dl_strbuf *b, const dl_ir_module *m, const dl_ir_attr *a) {
    switch (a->kind) {
    case DL_IR_ATTR_INT:
        put_sym_int(b, m, a->i, a->i_sym);
        return;
    case DL_IR_ATTR_FLOAT:
        put_double(b, a->f);
        return;
    case DL_IR_ATTR_STRING:
        put_string(b, a->s);
        return;
    case DL_IR_ATTR_INTS:
    case DL_IR_ATTR_FLOATS:
    case DL_IR_ATTR_STRINGS:
        break;
    }
    dl_strbuf_puts(b, "[");
    for (size_t i = 0; i < a->n; i++) {
        if (i) {
            dl_strbuf_puts(b, ", ");
        }
        if (a->kind == DL_IR_ATTR_INTS) {
            put_sym_int(b, m, a->ints[i], a->int_syms ? a->int_syms[i] : -1);
        } else if (a->kind == DL_IR_ATTR_FLOATS) {
            put_double(b, a->floats[i]);
        } else {
            put_string(b, a->strs[i]);
        }
    }
    dl_strbuf_puts(b, "]");
}

// attrs -> '<' name '=' value (',' name '=' value)* '>'   (nothing when there are none)
static void put_attrs(dl_strbuf *b, const dl_ir_module *m, const dl_ir_attr *attrs, size_t n) {
    if (n == 0) {
        return;
    }
    dl_strbuf_puts(b, " <");
    for (size_t i = 0; i < n; i++) {
        if (i) {
            dl_strbuf_puts(b, ", ");
        }
        dl_strbuf_puts(b, attrs[i].name);
        dl_strbuf_puts(b, " = ");
        put_attr_value(b, m, &attrs[i]);
    }
    dl_strbuf_puts(b, ">");
}

// One literal element: float dtypes keep their float spelling, integer dtypes print exact
// integers (an int64 beyond 2^53 would not survive a trip through double), bool prints 0/1.
static void put_lit_elem(dl_strbuf *b, dl_dtype dt, const dl_ir_literal *l, int64_t i) {
    if (l->f) {
        put_double(b, l->f[i]);
    } else if (dt == DL_DT_BOOL) {
        dl_strbuf_puts(b, l->i[i] ? "1" : "0");
    } else {
        put_int(b, l->i[i]);
    }
}

// Nested brackets following dims[d..rank); *pos walks the flat data.
static void put_lit_nested(dl_strbuf *b, const dl_ir_type *t, const dl_ir_literal *l, int32_t d,
                           int64_t *pos) {
    if (d == t->rank) {
        if (*pos < l->n) {
            put_lit_elem(b, t->dtype, l, *pos);
        } else {
            dl_strbuf_puts(b, "0"); // short literal: a verifier error; print something parseable
        }
        (*pos)++;
        return;
    }
    dl_strbuf_puts(b, "[");
    for (int64_t k = 0; k < t->dims[d].value; k++) {
        if (k) {
            dl_strbuf_puts(b, ", ");
        }
        put_lit_nested(b, t, l, d + 1, pos);
    }
    dl_strbuf_puts(b, "]");
}

// literal -> number | '[' literal (',' literal)* ']'
static void put_literal(dl_strbuf *b, const dl_ir_type *t, const dl_ir_literal *l) {
    if (!l) {
        dl_strbuf_puts(b, "0");
        return;
    }
    if (l->is_splat || t->rank <= 0) {
        if (l->n >= 1) {
            put_lit_elem(b, t->dtype, l, 0);
        } else {
            dl_strbuf_puts(b, "0");
        }
        return;
    }
    int64_t pos = 0;
    put_lit_nested(b, t, l, 0, &pos);
}

// An omitted seed stays omitted: the effective seed is derived from the param's name
// (dl_ir_init_seed), and writing it out would pin it against a later rename.
// `of` (the param, only for the IR diff's text) prints the effective seed, omitted or not.
static void put_seed(dl_strbuf *b, const dl_ir_init *in, bool after_args, const dl_ir_value *of) {
    if (in->has_seed || of) {
        dl_strbuf_printf(b, "%sseed = %" PRIu64, after_args ? ", " : "",
                         of ? dl_ir_init_seed(of) : in->seed);
    }
}

// A literal as the IR diff shows it: its size and a digest of its data (equal data gives equal
// text, and the text stays short).
static void put_literal_digest(dl_strbuf *b, const dl_ir_literal *l) {
    dl_strbuf_puts(b, "literal");
    if (!l) {
        return;
    }
    dl_hash128 h = {0, 0};
    if (l->f) {
        h = dl_hash128_of(l->f, (size_t)l->n * sizeof(double));
    } else if (l->i) {
        h = dl_hash128_of(l->i, (size_t)l->n * sizeof(int64_t));
    }
    char hex[33];
    dl_hash128_hex(h, hex);
    dl_strbuf_printf(b, "(%" PRId64 " values%s, data %.8s)", l->n, l->is_splat ? ", splat" : "",
                     hex);
}

// init -> zeros | ones | constant(v) | uniform(lo, hi[, seed = S]) | normal(mean, std[, seed = S])
//       | glorot_uniform([seed = S]) | he_normal([seed = S]) | literal | file("path", "tensor")
// With `of` (the param whose init this is) the text is the IR diff's (dl_ir__init_text).
static void put_init(dl_strbuf *b, const dl_ir_type *t, const dl_ir_init *in,
                     const dl_ir_value *of) {
    if (!in) {
        dl_strbuf_puts(b, of ? "none" : "zeros"); // printing: a verifier error; keep it parseable
        return;
    }
    switch (in->kind) {
    case DL_IR_INIT_ZEROS:
        dl_strbuf_puts(b, "zeros");
        return;
    case DL_IR_INIT_ONES:
        dl_strbuf_puts(b, "ones");
        return;
    case DL_IR_INIT_CONSTANT:
        dl_strbuf_puts(b, "constant(");
        put_double(b, in->a);
        dl_strbuf_puts(b, ")");
        return;
    case DL_IR_INIT_UNIFORM:
    case DL_IR_INIT_NORMAL:
        dl_strbuf_puts(b, in->kind == DL_IR_INIT_UNIFORM ? "uniform(" : "normal(");
        put_double(b, in->a);
        dl_strbuf_puts(b, ", ");
        put_double(b, in->b);
        put_seed(b, in, true, of);
        dl_strbuf_puts(b, ")");
        return;
    case DL_IR_INIT_GLOROT_UNIFORM:
    case DL_IR_INIT_HE_NORMAL:
        dl_strbuf_puts(b, in->kind == DL_IR_INIT_GLOROT_UNIFORM ? "glorot_uniform(" : "he_normal(");
        put_seed(b, in, false, of);
        dl_strbuf_puts(b, ")");
        return;
    case DL_IR_INIT_LITERAL:
        if (of) {
            put_literal_digest(b, in->lit);
        } else {
            put_literal(b, t, in->lit);
        }
        return;
    case DL_IR_INIT_FILE:
        dl_strbuf_puts(b, "file(");
        put_string(b, in->path);
        dl_strbuf_puts(b, ", ");
        put_string(b, in->tensor);
        dl_strbuf_puts(b, ")");
        return;
    }
}

static void put_pad(dl_strbuf *b, size_t have, size_t want) {
    for (; have < want; have++) {
        dl_strbuf_append(b, " ", 1);
    }
}

// The left-hand side of a node: its output names joined by ", ".
static void put_node_lhs(dl_strbuf *b, const dl_ir_node *n) {
    for (size_t i = 0; i < n->n_outputs; i++) {
        if (i) {
            dl_strbuf_puts(b, ", ");
        }
        dl_strbuf_puts(b, n->outputs[i]->name);
    }
}

static size_t node_lhs_len(const dl_ir_node *n) {
    size_t len = 0;
    for (size_t i = 0; i < n->n_outputs; i++) {
        len += strlen(n->outputs[i]->name) + (i ? 2 : 0);
    }
    return len;
}

// Column widths of one run.
typedef struct run_cols {
    size_t name; // name (or node lhs) width
    size_t type; // type text width of params/consts (for the '=' column)
} run_cols;

static size_t type_len(const dl_ir_module *m, const dl_ir_type *t) {
    dl_strbuf tb = {0};
    put_type(&tb, m, t);
    size_t len = tb.len;
    dl_strbuf_fini(&tb);
    return len;
}

static const dl_ir_value *stmt_value(const dl_ir_module *m, const dl_ir_stmt *s) {
    return s->index < m->values.len ? m->values.data[s->index] : NULL;
}

static void measure(const dl_ir_module *m, const dl_ir_stmt *s, run_cols *c) {
    size_t name = 0, type = 0;
    switch (s->kind) {
    case DL_IR_STMT_DIM:
        if (s->index < m->dims.len) {
            name = strlen(m->dims.data[s->index].name);
        }
        break;
    case DL_IR_STMT_INPUT:
    case DL_IR_STMT_PARAM:
    case DL_IR_STMT_CONST: {
        const dl_ir_value *v = stmt_value(m, s);
        if (v) {
            name = strlen(v->name);
            if (s->kind != DL_IR_STMT_INPUT) {
                type = type_len(m, &v->type);
            }
        }
        break;
    }
    case DL_IR_STMT_NODE:
        if (s->index < m->nodes.len) {
            name = node_lhs_len(m->nodes.data[s->index]);
        }
        break;
    case DL_IR_STMT_OUTPUT:
    case DL_IR_STMT_TRAIN:
        break;
    }
    if (name > c->name) {
        c->name = name;
    }
    if (type > c->type) {
        c->type = type;
    }
}

// train -> 'train' LOSS '{' NEWLINE (KEY '=' VALUE NEWLINE)* '}'
// One entry per line in a fixed order (optimizer, clip_norm, precision, loss_scale, freeze,
// accumulate, sync_batchnorm), only those present; the author's entry order is not recorded by the
// IR. The optimizer is always printed: the IR has no "absent" optimizer (the parser defaults it).
static void put_train(dl_strbuf *b, const dl_ir_module *m, const dl_ir_train *t) {
    dl_strbuf_puts(b, "train ");
    dl_strbuf_puts(b, t->loss ? t->loss->name : "?");
    dl_strbuf_puts(b, " {\n  optimizer = ");
    dl_strbuf_puts(b, dl_ir_optim_name(t->optimizer));
    put_attrs(b, m, t->opt_attrs, t->n_opt_attrs);
    dl_strbuf_puts(b, "\n");
    if (t->has_clip_norm) {
        dl_strbuf_puts(b, "  clip_norm = ");
        put_double(b, t->clip_norm);
        dl_strbuf_puts(b, "\n");
    }
    if (t->has_precision) {
        dl_strbuf_printf(b, "  precision = %s\n", dl_dtype_name(t->precision));
    }
    switch (t->loss_scale) {
    case DL_IR_LS_NONE:
        break;
    case DL_IR_LS_STATIC:
        dl_strbuf_puts(b, "  loss_scale = ");
        put_double(b, t->loss_scale_value);
        dl_strbuf_puts(b, "\n");
        break;
    case DL_IR_LS_DYNAMIC:
        dl_strbuf_puts(b, "  loss_scale = dynamic");
        put_attrs(b, m, t->ls_attrs, t->n_ls_attrs);
        dl_strbuf_puts(b, "\n");
        break;
    }
    if (t->n_freeze) {
        dl_strbuf_puts(b, "  freeze = [");
        for (size_t i = 0; i < t->n_freeze; i++) {
            dl_strbuf_puts(b, i ? ", " : "");
            dl_strbuf_puts(b, t->freeze[i] ? t->freeze[i]->name : "?");
        }
        dl_strbuf_puts(b, "]\n");
    }
    if (t->has_accumulate) {
        dl_strbuf_printf(b, "  accumulate = %" PRId64 "\n", t->accumulate);
    }
    if (t->sync_bn) {
        dl_strbuf_puts(b, "  sync_batchnorm = true\n");
    }
    dl_strbuf_puts(b, "}");
}

// One statement without its comments or newline, padded to the run's columns:
//   dim NAME = INT
//   input  NAME : TYPE                 (keywords padded to 6 so names line up across kinds)
//   param  NAME : TYPE = INIT
//   const  NAME : TYPE = LITERAL
//   OUT[, OUT...] = OP [<ATTRS>] (ARGS)
//   output NAME
static void put_stmt(dl_strbuf *b, const dl_ir_module *m, const dl_ir_stmt *s, const run_cols *c) {
    switch (s->kind) {
    case DL_IR_STMT_DIM: {
        if (s->index >= m->dims.len) {
            return;
        }
        const dl_ir_dim_def *d = &m->dims.data[s->index];
        dl_strbuf_puts(b, "dim ");
        dl_strbuf_puts(b, d->name);
        put_pad(b, strlen(d->name), c->name);
        dl_strbuf_puts(b, " = ");
        // The bound value (== the default unless -D rebound it), so a printout after binding
        // (--dump-after) compiles to the same graph.
        put_int(b, d->value);
        return;
    }
    case DL_IR_STMT_INPUT:
    case DL_IR_STMT_PARAM:
    case DL_IR_STMT_CONST: {
        const dl_ir_value *v = stmt_value(m, s);
        if (!v) {
            return;
        }
        dl_strbuf_puts(b, s->kind == DL_IR_STMT_INPUT   ? "input  "
                          : s->kind == DL_IR_STMT_PARAM ? "param  "
                                                        : "const  ");
        dl_strbuf_puts(b, v->name);
        put_pad(b, strlen(v->name), c->name);
        dl_strbuf_puts(b, " : ");
        size_t at = b->len;
        put_type(b, m, &v->type);
        if (s->kind == DL_IR_STMT_INPUT) {
            return;
        }
        put_pad(b, b->len - at, c->type);
        dl_strbuf_puts(b, " = ");
        if (s->kind == DL_IR_STMT_PARAM) {
            put_init(b, &v->type, v->init, NULL);
        } else {
            put_literal(b, &v->type, v->lit);
        }
        return;
    }
    case DL_IR_STMT_NODE: {
        if (s->index >= m->nodes.len) {
            return;
        }
        const dl_ir_node *n = m->nodes.data[s->index];
        put_node_lhs(b, n);
        put_pad(b, node_lhs_len(n), c->name);
        dl_strbuf_puts(b, " = ");
        dl_strbuf_puts(b, dl_ir_op_get_info(n->op)->name);
        put_attrs(b, m, n->attrs, n->n_attrs);
        // Trailing omitted inputs are dropped; inner ones print as nothing between commas.
        size_t n_in = n->n_inputs;
        while (n_in > 0 && !n->inputs[n_in - 1]) {
            n_in--;
        }
        dl_strbuf_puts(b, " (");
        for (size_t i = 0; i < n_in; i++) {
            if (i) {
                dl_strbuf_puts(b, ", ");
            }
            if (n->inputs[i]) {
                dl_strbuf_puts(b, n->inputs[i]->name);
            }
        }
        dl_strbuf_puts(b, ")");
        return;
    }
    case DL_IR_STMT_OUTPUT: {
        const dl_ir_value *v = stmt_value(m, s);
        if (v) {
            dl_strbuf_puts(b, "output ");
            dl_strbuf_puts(b, v->name);
        }
        return;
    }
    case DL_IR_STMT_TRAIN:
        if (m->train) {
            put_train(b, m, m->train);
        }
        return;
    }
}

// A comment block: lines joined by '\n', each printed on its own line.
static void put_comment_lines(dl_strbuf *b, const char *text) {
    if (!text || !*text) {
        return;
    }
    dl_strbuf_puts(b, text);
    dl_strbuf_puts(b, "\n");
}

// A run ends at a blank line, a leading comment or a change of class. A trailing comment does
// not end it (it sits after the aligned columns).
static bool starts_run(const dl_ir_stmt *s, const dl_ir_stmt *prev) {
    return !prev || s->blank_before || s->comment_before ||
           class_of(s->kind) != class_of(prev->kind);
}

void dl_ir__init_text(dl_strbuf *b, const dl_ir_value *param) {
    put_init(b, &param->type, param->init, param);
}

dl_status dl_ir_print(const dl_ir_module *m, char **out) {
    *out = NULL;
    dl_strbuf b = {0};
    put_comment_lines(&b, m->comment_header);
    bool any = b.len > 0;
    if (m->name && *m->name) {
        dl_strbuf_puts(&b, "model ");
        dl_strbuf_puts(&b, m->name);
        dl_strbuf_puts(&b, "\n");
        any = true;
    }
    run_cols cols = {0, 0};
    for (size_t i = 0; i < m->stmts.len; i++) {
        const dl_ir_stmt *s = &m->stmts.data[i];
        const dl_ir_stmt *prev = i ? &m->stmts.data[i - 1] : NULL;
        if (starts_run(s, prev)) {
            // Measure the whole run ahead so every line of it shares the same columns.
            cols = (run_cols){0, 0};
            for (size_t j = i; j < m->stmts.len; j++) {
                if (j > i && starts_run(&m->stmts.data[j], &m->stmts.data[j - 1])) {
                    break;
                }
                measure(m, &m->stmts.data[j], &cols);
            }
        }
        if (s->blank_before && any) {
            dl_strbuf_puts(&b, "\n");
        }
        put_comment_lines(&b, s->comment_before);
        put_stmt(&b, m, s, &cols);
        if (s->comment_after && *s->comment_after) {
            dl_strbuf_puts(&b, "  ");
            dl_strbuf_puts(&b, s->comment_after);
        }
        dl_strbuf_puts(&b, "\n");
        any = true;
    }
    if (m->comment_trailer && *m->comment_trailer) {
        put_comment_lines(&b, m->comment_trailer);
    }
    char *text = dl_strbuf_take(&b);
    if (!text) {
        return DL_ERR_NOMEM;
    }
    *out = text;
    return DL_OK;
}
