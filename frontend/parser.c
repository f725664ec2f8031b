// frontend/parser.c — recursive-descent parser for the .dlg graph format (docs/graph-format.md),
// building a dl_ir_module through the ir builders.
//
// Data: a small lookahead buffer over the on-demand lexer, a bracket stack (newlines are skipped
// while the innermost open bracket is ( [ or <; inside { the train block treats them as entry
// separators), and the comment cursor that hands `#` comments to statements for `dlcc fmt`.
// Statement kinds are decided by lookahead, so keywords are never reserved: IDENT followed by
// '=' or ',' is always a node statement.
// Recovery: a statement function reports its first error and returns false; the main loop then
// skips to the end of the statement (a newline at bracket depth 0) and goes on. Every error goes
// through dl_fe__error, which stops the parse after FE_MAX_ERRORS. On any error the module is
// destroyed and DL_ERR_PARSE returned. Recursion is bounded (literals nest at most DL_MAX_RANK).
#include "fe_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOKAHEAD 4
#define STACK_MAX 64
// Bounds the quadratic duplicate-name check of a node statement's outputs.
#define FE_MAX_OUTPUTS 4096

typedef struct parser {
    fe_ctx cx;
    fe_lexer lx;
    dl_arena scratch; // identifier copies, messages, element locations
    fe_token la[LOOKAHEAD];
    int n_la;
    char stack[STACK_MAX]; // open brackets, innermost last
    int depth;             // may exceed STACK_MAX; entries beyond it count as '('
    dl_ir_module *m;
    bool have_model;
    dl_src_loc model_loc;
    uint32_t stmt_line;     // first line of the statement being parsed
    uint32_t prev_end_line; // last line of the previous statement (0 before the first)
    size_t cmt_pos;         // next comment not yet handed to a statement
    const char *pend_before;
    bool pend_blank;
    // Names that a failed statement would have defined. A later use of one is not reported
    // again as "undefined name": the user sees the real error once, not a cascade after it.
    DL_VEC(const char *) poisoned;
} parser;

// ---------------------------------------------------------------------------------------------
// Tokens

static dl_src_loc tok_loc(const parser *p, const fe_token *t) {
    if (t->kind == FE_TOK_ERROR) {
        return (dl_src_loc){p->cx.file, t->line, t->err_col, t->err_len ? t->err_len : 1};
    }
    return (dl_src_loc){p->cx.file, t->line, t->col, t->len ? t->len : 1};
}

static void fill(parser *p, int n) {
    while (p->n_la < n) {
        dl_fe__lex_next(&p->lx, &p->la[p->n_la]);
        if (p->lx.oom) {
            p->cx.oom = true;
        }
        p->n_la++;
    }
}

static bool skipping_newlines(const parser *p) {
    if (p->depth <= 0) {
        return false;
    }
    return p->depth > STACK_MAX || p->stack[p->depth - 1] != '{';
}

static void drop_front(parser *p) {
    for (int i = 1; i < p->n_la; i++) {
        p->la[i - 1] = p->la[i];
    }
    p->n_la--;
}

// The current token (newlines skipped inside ( [ <).
static fe_token *cur(parser *p) {
    for (;;) {
        fill(p, 1);
        if (p->la[0].kind == FE_TOK_NEWLINE && skipping_newlines(p)) {
            drop_front(p);
            continue;
        }
        return &p->la[0];
    }
}

// The token after the current one, same newline rule.
static fe_token *peek2(parser *p) {
    cur(p);
    for (;;) {
        fill(p, 2);
        if (p->la[1].kind == FE_TOK_NEWLINE && skipping_newlines(p)) {
            for (int i = 2; i < p->n_la; i++) {
                p->la[i - 1] = p->la[i];
            }
            p->n_la--;
            continue;
        }
        return &p->la[1];
    }
}

static bool is_open(char c) {
    return c == '(' || c == '[' || c == '<' || c == '{';
}

static bool is_close(char c) {
    return c == ')' || c == ']' || c == '>' || c == '}';
}

// Consumes the current token, keeping the bracket stack.
static void advance(parser *p) {
    fe_token *t = cur(p);
    if (t->kind == FE_TOK_PUNCT && is_open(t->punct)) {
        if (p->depth < STACK_MAX) {
            p->stack[p->depth] = t->punct;
        }
        p->depth++;
    } else if (t->kind == FE_TOK_PUNCT && is_close(t->punct) && p->depth > 0) {
        p->depth--;
    }
    drop_front(p);
}

static bool is_punct(const fe_token *t, char c) {
    return t->kind == FE_TOK_PUNCT && t->punct == c;
}

static bool is_ident(const fe_token *t, const char *s) {
    return t->kind == FE_TOK_IDENT && strcmp(t->s, s) == 0;
}

// "'x'", "end of line", "end of file", "string \"...\"" — for "found ..." messages.
static void describe(const fe_token *t, char *buf, size_t size) {
    switch (t->kind) {
    case FE_TOK_EOF:
        snprintf(buf, size, "end of file");
        return;
    case FE_TOK_NEWLINE:
        snprintf(buf, size, "end of line");
        return;
    case FE_TOK_STRING:
    case FE_TOK_IDENT:
    case FE_TOK_INT:
    case FE_TOK_FLOAT:
    case FE_TOK_PUNCT:
    case FE_TOK_ERROR:
        break;
    }
    size_t n = t->len > 40 ? 40 : t->len;
    size_t o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < n && o + 8 < size; i++) {
        unsigned char c = (unsigned char)t->text[i];
        if (c >= 0x20 && c < 0x7f && c != '\'') {
            buf[o++] = (char)c;
        } else if (c == '\'') {
            buf[o++] = '\\';
            buf[o++] = '\'';
        } else {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        }
    }
    if (t->len > 40 && o + 4 < size) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '\'';
    buf[o] = 0;
}

// Reports "expected WHAT, found TOKEN" at the current token (or the lexical error it carries).
static bool syntax_error(parser *p, const char *what) {
    fe_token *t = cur(p);
    if (t->kind == FE_TOK_ERROR) {
        dl_fe__error(&p->cx, tok_loc(p, t), "%s", t->s);
        return false;
    }
    char found[200];
    describe(t, found, sizeof(found));
    dl_fe__error(&p->cx, tok_loc(p, t), "expected %s, found %s", what, found);
    return false;
}

static bool expect_punct(parser *p, char c, const char *what) {
    if (!is_punct(cur(p), c)) {
        return syntax_error(p, what);
    }
    advance(p);
    return true;
}

// Expects an identifier; on success *out is its NUL-terminated text and *loc its location.
static bool expect_ident(parser *p, const char *what, const char **out, dl_src_loc *loc) {
    fe_token *t = cur(p);
    if (t->kind != FE_TOK_IDENT) {
        return syntax_error(p, what);
    }
    *out = t->s;
    *loc = tok_loc(p, t);
    advance(p);
    return true;
}

static bool oom(parser *p) {
    p->cx.oom = true;
    return false;
}

// Maps a builder status: NOMEM marks the parse failed for lack of memory.
static bool built(parser *p, dl_status st) {
    if (st == DL_OK) {
        return true;
    }
    if (st == DL_ERR_NOMEM) {
        return oom(p);
    }
    // Redefinitions are checked before building, so this is our bug; report rather than abort.
    dl_fe__error(&p->cx, DL_NO_LOC, "internal error: ir builder failed (%s)", dl_status_str(st));
    return false;
}

// ---------------------------------------------------------------------------------------------
// Names

static bool check_new_value_name(parser *p, const char *name, dl_src_loc loc) {
    dl_ir_value *prev = dl_ir_module_find(p->m, name);
    if (prev) {
        dl_fe__error(&p->cx, loc, "redefinition of '%s'", name);
        dl_fe__note(&p->cx, prev->loc, "previous definition of '%s' is here", name);
        return false;
    }
    return true;
}

static void poison(parser *p, const char *name) {
    if (name && !DL_VEC_PUSH(&p->poisoned, name)) {
        oom(p);
    }
}

static bool is_poisoned(const parser *p, const char *name) {
    for (size_t i = 0; i < p->poisoned.len; i++) {
        if (strcmp(p->poisoned.data[i], name) == 0) {
            return true;
        }
    }
    return false;
}

// A NULL result without a new diagnostic means the name belongs to a statement that already
// failed; the caller's statement then fails quietly and poisons its own names in turn.
static dl_ir_value *lookup_value(parser *p, const char *name, dl_src_loc loc) {
    dl_ir_value *v = dl_ir_module_find(p->m, name);
    if (!v && !is_poisoned(p, name)) {
        dl_fe__error(&p->cx, loc, "undefined name '%s'", name);
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Numbers

typedef struct number {
    double f;
    int64_t i;
    bool is_int;
    bool is_bool_word; // `true` / `false`
    dl_src_loc loc;
} number;

// number -> INT | FLOAT | 'inf' | 'nan' | ('true' | 'false' when allow_bool)
static bool parse_number(parser *p, bool allow_bool, const char *what, number *out) {
    fe_token *t = cur(p);
    memset(out, 0, sizeof(*out));
    out->loc = tok_loc(p, t);
    if (t->kind == FE_TOK_INT) {
        out->i = t->i;
        out->f = (double)t->i;
        out->is_int = true;
    } else if (t->kind == FE_TOK_FLOAT) {
        out->f = t->f;
    } else if (is_ident(t, "inf")) {
        out->f = INFINITY;
    } else if (is_ident(t, "nan")) {
        out->f = NAN;
    } else if (allow_bool && (is_ident(t, "true") || is_ident(t, "false"))) {
        out->i = is_ident(t, "true");
        out->f = (double)out->i;
        out->is_int = true;
        out->is_bool_word = true;
    } else {
        return syntax_error(p, what);
    }
    advance(p);
    return true;
}

static void format_number(const number *n, char *buf) {
    if (n->is_bool_word) {
        snprintf(buf, 40, "%s", n->i ? "true" : "false");
    } else if (n->is_int) {
        snprintf(buf, 40, "%lld", (long long)n->i);
    } else {
        snprintf(buf, 40, "%.17g", n->f);
    }
}

static bool parse_int(parser *p, const char *what, int64_t *out, dl_src_loc *loc) {
    fe_token *t = cur(p);
    if (t->kind != FE_TOK_INT) {
        return syntax_error(p, what);
    }
    *out = t->i;
    *loc = tok_loc(p, t);
    advance(p);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Types

static const char *const dtype_names[] = {"float", "float16", "bfloat16", "int32", "int64", "bool"};

// A declared type must be within the size limit (docs/graph-format.md, "Limits"): a const's is
// the smaller DL_IR_MAX_CONST_BYTES because the compiler materialises its data. Reported at the
// type (loc), naming the statement and its value.
static bool check_type_size(parser *p, const dl_ir_type *ty, dl_src_loc loc, const char *kind,
                            const char *name) {
    bool is_const = strcmp(kind, "const") == 0;
    char why[600];
    if (dl_ir_type_check_limit(ty, is_const ? DL_IR_MAX_CONST_BYTES : DL_IR_MAX_TENSOR_BYTES,
                               is_const ? "a constant" : "a tensor", why, sizeof why)) {
        return true;
    }
    dl_fe__error(&p->cx, loc, "%s '%s': %s", kind, name, why);
    return false;
}

// type -> ELEM '[' (dim (',' dim)*)? ']'      dim -> INT | DIM_NAME
static bool parse_type(parser *p, dl_ir_type *ty) {
    memset(ty, 0, sizeof(*ty));
    const char *elem = NULL;
    dl_src_loc eloc = DL_NO_LOC;
    if (!expect_ident(p, "an element type (float, float16, bfloat16, int32, int64, bool)", &elem,
                      &eloc)) {
        return false;
    }
    if (!dl_dtype_from_name(elem, &ty->dtype)) {
        const char *s = dl_fe__suggest(elem, dtype_names, DL_ARRAY_LEN(dtype_names));
        if (s) {
            dl_fe__error(&p->cx, eloc, "unknown element type '%s' (did you mean '%s'?)", elem, s);
        } else {
            dl_fe__error(&p->cx, eloc,
                         "unknown element type '%s' (expected float, float16, bfloat16, int32, "
                         "int64 or bool)",
                         elem);
        }
        return false;
    }
    if (!expect_punct(p, '[', "'[' after the element type")) {
        return false;
    }
    if (is_punct(cur(p), ']')) {
        advance(p);
        ty->rank = 0;
        return true;
    }
    for (;;) {
        fe_token *t = cur(p);
        dl_src_loc loc = tok_loc(p, t);
        dl_ir_dim dim = {0, -1};
        if (t->kind == FE_TOK_INT) {
            dim.value = t->i;
            // Zero-size tensors are valid (ONNX has them, e.g. empty splits); a named `dim`
            // must still be >= 1 because it is a batch-like size a user rebinds.
            if (t->i < 0) {
                dl_fe__error(&p->cx, loc, "dimension must be >= 0, got %lld", (long long)t->i);
                return false;
            }
            // No tensor can have a larger dim (DL_IR_MAX_TENSOR_BYTES bounds every dim), and
            // refusing it here keeps all later shape arithmetic within int64.
            if (t->i > DL_IR_MAX_TENSOR_BYTES) {
                dl_fe__error(&p->cx, loc, "dimension %lld is too large (at most %lld = 2^40)",
                             (long long)t->i, (long long)DL_IR_MAX_TENSOR_BYTES);
                return false;
            }
        } else if (t->kind == FE_TOK_IDENT) {
            int32_t sym = dl_ir_module_find_dim(p->m, t->s);
            if (sym < 0) {
                dl_fe__error(&p->cx, loc, "undefined dim '%s'", t->s);
                return false;
            }
            dim.sym = sym;
            dim.value = p->m->dims.data[sym].value;
        } else {
            return syntax_error(p, "a dimension (an int or a dim name)");
        }
        if (ty->rank >= DL_MAX_RANK) {
            dl_fe__error(&p->cx, loc, "too many dimensions (at most %d)", DL_MAX_RANK);
            return false;
        }
        ty->dims[ty->rank++] = dim;
        advance(p);
        if (is_punct(cur(p), ',')) {
            advance(p);
            continue;
        }
        return expect_punct(p, ']', "',' or ']' in the dimension list");
    }
}

// A statement's type (input, param, const): parse_type plus the size check at the type.
static bool parse_decl_type(parser *p, dl_ir_type *ty, const char *kind, const char *name) {
    dl_src_loc loc = tok_loc(p, cur(p));
    return parse_type(p, ty) && check_type_size(p, ty, loc, kind, name);
}

// ---------------------------------------------------------------------------------------------
// Literals

// A bracketed literal's values are converted as they are read and kept compactly (8 bytes each,
// not a token per element), and never more than the type's element count: a large literal costs
// what its data costs, however many elements the text has. A bad element is remembered and
// reported only once the shape matched, as the shape is the more useful error.
typedef struct lit_state {
    dl_dtype dtype;
    int64_t max_elems; // the type's element count; further elements are counted, not kept
    DL_VEC(double) f;  // float dtypes (heap)
    DL_VEC(int64_t) i; // integer and bool dtypes (heap)
    int64_t n;         // elements read
    bool has_bad;      // bad holds the first element that does not fit the dtype
    number bad;
    int64_t shape[DL_MAX_RANK];
    bool shape_set[DL_MAX_RANK];
    int leaf_depth; // depth at which numbers sit; -1 until the first number
    int max_depth;  // deepest list seen
} lit_state;

// Converts number `n` for `dtype` into *f (float dtypes) or *i: ints must be integral and in
// range, bool must be 0/1/true/false, true/false only for bool. On failure reports (when
// `report`) and returns false.
static bool elem_value(parser *p, dl_dtype dtype, const number *n, bool report, double *f,
                       int64_t *i) {
    char buf[40];
    if (n->is_bool_word && dtype != DL_DT_BOOL) {
        if (report) {
            format_number(n, buf);
            dl_fe__error(&p->cx, n->loc, "'%s' is only valid in a bool literal (type %s)", buf,
                         dl_dtype_name(dtype));
        }
        return false;
    }
    if (dl_dtype_is_float(dtype)) {
        *f = n->f;
        return true;
    }
    int64_t v = n->i;
    if (!n->is_int) {
        if (!(n->f == trunc(n->f)) || !(n->f >= -9223372036854775808.0) ||
            !(n->f < 9223372036854775808.0)) {
            if (report) {
                format_number(n, buf);
                dl_fe__error(&p->cx, n->loc, "literal value %s is not an integer (type %s)", buf,
                             dl_dtype_name(dtype));
            }
            return false;
        }
        v = (int64_t)n->f;
    }
    if (dtype == DL_DT_BOOL && v != 0 && v != 1) {
        if (report) {
            format_number(n, buf);
            dl_fe__error(&p->cx, n->loc, "bool literal must be 0, 1, true or false, got %s", buf);
        }
        return false;
    }
    if (dtype == DL_DT_INT32 && (v < INT32_MIN || v > INT32_MAX)) {
        if (report) {
            format_number(n, buf);
            dl_fe__error(&p->cx, n->loc, "literal value %s is out of range for int32", buf);
        }
        return false;
    }
    *i = v;
    return true;
}

// Takes one element of a bracketed literal (see lit_state).
static bool lit_push(parser *p, lit_state *st, const number *n) {
    double f = 0;
    int64_t i = 0;
    if (!elem_value(p, st->dtype, n, false, &f, &i) && !st->has_bad) {
        st->has_bad = true;
        st->bad = *n;
    }
    if (st->n++ >= st->max_elems) {
        return true; // the shape cannot match; parse_literal says so
    }
    bool pushed = dl_dtype_is_float(st->dtype) ? DL_VEC_PUSH(&st->f, f) : DL_VEC_PUSH(&st->i, i);
    return pushed || oom(p);
}

// lit_list -> '[' (lit_elem (',' lit_elem)*)? ']'     lit_elem -> number | lit_list
static bool parse_lit_list(parser *p, lit_state *st, int depth) {
    dl_src_loc open = tok_loc(p, cur(p));
    if (depth >= DL_MAX_RANK) {
        dl_fe__error(&p->cx, open, "literal is nested too deeply (at most %d levels)", DL_MAX_RANK);
        return false;
    }
    advance(p); // '['
    if (depth > st->max_depth) {
        st->max_depth = depth;
    }
    int64_t count = 0;
    if (!is_punct(cur(p), ']')) {
        for (;;) {
            if (is_punct(cur(p), '[')) {
                if (st->leaf_depth >= 0 && st->leaf_depth != depth + 1 && st->leaf_depth <= depth) {
                    dl_fe__error(&p->cx, tok_loc(p, cur(p)),
                                 "ragged literal: expected a number, found a list");
                    return false;
                }
                if (!parse_lit_list(p, st, depth + 1)) {
                    return false;
                }
            } else {
                number n;
                if (!parse_number(p, true, "a number or '[' in the literal", &n)) {
                    return false;
                }
                if (st->leaf_depth < 0) {
                    st->leaf_depth = depth;
                } else if (st->leaf_depth != depth) {
                    dl_fe__error(&p->cx, n.loc, "ragged literal: expected a list, found a number");
                    return false;
                }
                if (!lit_push(p, st, &n)) {
                    return false;
                }
            }
            count++;
            if (is_punct(cur(p), ',')) {
                advance(p);
                continue;
            }
            if (!expect_punct(p, ']', "',' or ']' in the literal")) {
                return false;
            }
            break;
        }
    } else {
        advance(p);
    }
    if (st->shape_set[depth] && st->shape[depth] != count) {
        dl_fe__error(&p->cx, open, "ragged literal: expected %lld elements, found %lld",
                     (long long)st->shape[depth], (long long)count);
        return false;
    }
    st->shape[depth] = count;
    st->shape_set[depth] = true;
    return true;
}

// literal -> number | lit_list   (a number is broadcast to the type's shape)
static bool parse_literal(parser *p, const dl_ir_type *ty, dl_ir_literal **out) {
    fe_token *t = cur(p);
    if (!is_punct(t, '[')) {
        number n;
        if (!parse_number(p, true, "a literal (a number or a bracketed list)", &n)) {
            return false;
        }
        dl_ir_literal *lit = dl_ir_module_new_literal(p->m, ty->dtype, 1);
        if (!lit) {
            return oom(p);
        }
        // A scalar type holds exactly its one number; any other shape broadcasts it.
        lit->is_splat = ty->rank != 0;
        *out = lit;
        double f = 0;
        int64_t i = 0;
        if (!elem_value(p, ty->dtype, &n, true, &f, &i)) {
            return false;
        }
        if (lit->f) {
            lit->f[0] = f;
        } else {
            lit->i[0] = i;
        }
        return true;
    }
    dl_src_loc open = tok_loc(p, t);
    lit_state st;
    memset(&st, 0, sizeof(st));
    st.dtype = ty->dtype;
    st.max_elems = dl_ir_type_numel(ty); // the type passed the size check: no overflow
    st.leaf_depth = -1;
    bool ok = parse_lit_list(p, &st, 0);
    if (ok) {
        int rank = st.leaf_depth >= 0 ? st.leaf_depth + 1 : st.max_depth + 1;
        // A literal with no numbers ends in empty lists, so its last level has 0 elements:
        // it names an empty tensor, and the dims below that level are the type's to say
        // (float[0, 5] is written, and printed, as []).
        bool match = st.leaf_depth >= 0 ? rank == ty->rank : rank <= ty->rank;
        for (int d = 0; match && d < rank; d++) {
            match = st.shape[d] == ty->dims[d].value;
        }
        if (!match) {
            int64_t got[DL_MAX_RANK], want[DL_MAX_RANK];
            for (int d = 0; d < rank; d++) {
                got[d] = st.shape[d];
            }
            for (int d = 0; d < ty->rank; d++) {
                want[d] = ty->dims[d].value;
            }
            char gs[200], ws[200];
            dl_shape_format(got, rank, gs, sizeof(gs));
            dl_shape_format(want, ty->rank, ws, sizeof(ws));
            dl_fe__error(&p->cx, open, "literal shape %s does not match the type's shape %s", gs,
                         ws);
            ok = false;
        }
    }
    if (ok && st.has_bad) {
        double f;
        int64_t i;
        ok = elem_value(p, ty->dtype, &st.bad, true, &f, &i); // reports it
    }
    if (ok) {
        // The shape matched, so exactly st.n (= the type's numel) values were kept.
        dl_ir_literal *lit = dl_ir_module_new_literal(p->m, ty->dtype, st.n);
        if (!lit) {
            ok = oom(p);
        } else if (st.n > 0) {
            if (lit->f) {
                memcpy(lit->f, st.f.data, sizeof(double) * (size_t)st.n);
            } else {
                memcpy(lit->i, st.i.data, sizeof(int64_t) * (size_t)st.n);
            }
        }
        *out = lit;
    }
    free(st.f.data);
    free(st.i.data);
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Attributes

// attr_value -> INT | FLOAT | STRING | DIM_NAME | 'inf' | 'nan' | '[' (scalar (',' scalar)*)? ']'
static bool parse_attr_value(parser *p, fe_attr *at) {
    dl_ir_attr *a = &at->a;
    a->i_sym = -1;
    fe_token *t = cur(p);
    at->vloc = tok_loc(p, t);
    if (t->kind == FE_TOK_STRING) {
        a->kind = DL_IR_ATTR_STRING;
        a->s = dl_arena_strdup(&p->m->arena, t->s);
        advance(p);
        return a->s ? true : oom(p);
    }
    if (t->kind == FE_TOK_IDENT && !is_ident(t, "inf") && !is_ident(t, "nan")) {
        int32_t sym = dl_ir_module_find_dim(p->m, t->s);
        if (sym < 0) {
            dl_fe__error(&p->cx, at->vloc,
                         "undefined dim '%s' in the value of attribute '%s' (strings are "
                         "written in quotes: \"%s\")",
                         t->s, a->name, t->s);
            return false;
        }
        a->kind = DL_IR_ATTR_INT;
        a->i = p->m->dims.data[sym].value;
        a->i_sym = sym;
        advance(p);
        return true;
    }
    if (!is_punct(t, '[')) {
        number n;
        if (!parse_number(p, false, "an attribute value (a number, a string or a list)", &n)) {
            return false;
        }
        if (n.is_int) {
            a->kind = DL_IR_ATTR_INT;
            a->i = n.i;
        } else {
            a->kind = DL_IR_ATTR_FLOAT;
            a->f = n.f;
        }
        return true;
    }
    // A list: collect numbers (with dim syms) or strings, then decide the kind.
    advance(p);
    DL_VEC(number) nums = {0};
    DL_VEC(const char *) strs = {0};
    DL_VEC(int32_t) syms = {0};
    DL_VEC(dl_src_loc) locs = {0};
    bool ok = true, any_float = false, any_sym = false;
    if (!is_punct(cur(p), ']')) {
        for (;;) {
            t = cur(p);
            dl_src_loc loc = tok_loc(p, t);
            if (is_punct(t, '[')) {
                dl_fe__error(&p->cx, loc, "attribute '%s': nested lists are not allowed", a->name);
                ok = false;
                break;
            }
            if (t->kind == FE_TOK_STRING) {
                if (nums.len) {
                    dl_fe__error(&p->cx, loc, "attribute '%s': list mixes numbers and strings",
                                 a->name);
                    ok = false;
                    break;
                }
                const char *s = dl_arena_strdup(&p->m->arena, t->s);
                if (!s || !DL_VEC_PUSH(&strs, s)) {
                    ok = oom(p);
                    break;
                }
                advance(p);
            } else {
                if (strs.len) {
                    dl_fe__error(&p->cx, loc, "attribute '%s': list mixes numbers and strings",
                                 a->name);
                    ok = false;
                    break;
                }
                number n;
                int32_t sym = -1;
                if (t->kind == FE_TOK_IDENT && !is_ident(t, "inf") && !is_ident(t, "nan")) {
                    sym = dl_ir_module_find_dim(p->m, t->s);
                    if (sym < 0) {
                        dl_fe__error(&p->cx, loc, "undefined dim '%s' in attribute '%s'", t->s,
                                     a->name);
                        ok = false;
                        break;
                    }
                    memset(&n, 0, sizeof(n));
                    n.is_int = true;
                    n.i = p->m->dims.data[sym].value;
                    n.f = (double)n.i;
                    n.loc = loc;
                    any_sym = true;
                    advance(p);
                } else if (!parse_number(p, false, "a list element (a number, a string or a dim)",
                                         &n)) {
                    ok = false;
                    break;
                }
                any_float |= !n.is_int;
                if (!DL_VEC_PUSH(&nums, n) || !DL_VEC_PUSH(&syms, sym)) {
                    ok = oom(p);
                    break;
                }
            }
            if (!DL_VEC_PUSH(&locs, loc)) {
                ok = oom(p);
                break;
            }
            if (is_punct(cur(p), ',')) {
                advance(p);
                continue;
            }
            ok = expect_punct(p, ']', "',' or ']' in the list");
            break;
        }
    } else {
        advance(p);
    }
    if (ok) {
        dl_arena *ar = &p->m->arena;
        size_t n = strs.len ? strs.len : nums.len;
        a->n = n;
        at->elocs = n ? dl_arena_memdup(&p->scratch, locs.data, n * sizeof(dl_src_loc)) : NULL;
        if (n == 0) {
            at->empty_list = true;
            a->kind = DL_IR_ATTR_INTS;
        } else if (strs.len) {
            a->kind = DL_IR_ATTR_STRINGS;
            a->strs = dl_arena_memdup(ar, strs.data, n * sizeof(const char *));
            ok = a->strs ? ok : oom(p);
        } else {
            // Build both readings so an int list can become a float list during validation.
            a->floats = DL_ARENA_NEWN(ar, double, n);
            ok = a->floats ? ok : oom(p);
            if (ok && !any_float) {
                a->kind = DL_IR_ATTR_INTS;
                a->ints = DL_ARENA_NEWN(ar, int64_t, n);
                a->int_syms = any_sym ? dl_arena_memdup(ar, syms.data, n * sizeof(int32_t)) : NULL;
                ok = (a->ints && (!any_sym || a->int_syms)) ? ok : oom(p);
            } else {
                a->kind = DL_IR_ATTR_FLOATS;
            }
            for (size_t k = 0; ok && k < n; k++) {
                a->floats[k] = nums.data[k].f;
                if (a->ints) {
                    a->ints[k] = nums.data[k].i;
                }
            }
        }
        if (n && !at->elocs) {
            ok = oom(p);
        }
    }
    free(nums.data);
    free(strs.data);
    free(syms.data);
    free(locs.data);
    return ok;
}

typedef DL_VEC(fe_attr) attr_vec;

// attrs -> '<' (NAME '=' attr_value (',' NAME '=' attr_value)*)? '>'
static bool parse_attrs(parser *p, attr_vec *out) {
    advance(p); // '<'
    if (is_punct(cur(p), '>')) {
        advance(p);
        return true;
    }
    for (;;) {
        fe_attr at;
        memset(&at, 0, sizeof(at));
        const char *name = NULL;
        if (!expect_ident(p, "an attribute name", &name, &at.a.loc)) {
            return false;
        }
        at.a.name = dl_arena_strdup(&p->m->arena, name);
        if (!at.a.name) {
            return oom(p);
        }
        if (!expect_punct(p, '=', "'=' after the attribute name")) {
            return false;
        }
        if (!parse_attr_value(p, &at)) {
            return false;
        }
        if (!DL_VEC_PUSH(out, at)) {
            return oom(p);
        }
        if (is_punct(cur(p), ',')) {
            advance(p);
            continue;
        }
        return expect_punct(p, '>', "',' or '>' after the attribute");
    }
}

// Copies validated attributes into a module-arena array (payloads already live there).
static dl_ir_attr *attrs_to_arena(parser *p, const attr_vec *v) {
    dl_ir_attr *a = DL_ARENA_NEWN(&p->m->arena, dl_ir_attr, v->len ? v->len : 1);
    if (!a) {
        oom(p);
        return NULL;
    }
    for (size_t i = 0; i < v->len; i++) {
        a[i] = v->data[i].a;
    }
    return a;
}

// ---------------------------------------------------------------------------------------------
// Statements

// dim_stmt -> 'dim' NAME '=' INT
static bool parse_dim(parser *p) {
    advance(p); // 'dim'
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC, vloc = DL_NO_LOC;
    int64_t v = 0;
    if (!expect_ident(p, "a dim name after 'dim'", &name, &loc) ||
        !expect_punct(p, '=', "'=' after the dim name") ||
        !parse_int(p, "an int value for the dim", &v, &vloc)) {
        return false;
    }
    int32_t prev = dl_ir_module_find_dim(p->m, name);
    if (prev >= 0) {
        dl_fe__error(&p->cx, loc, "redefinition of '%s'", name);
        dl_fe__note(&p->cx, p->m->dims.data[prev].loc, "previous definition of '%s' is here", name);
        return false;
    }
    if (v < 1) {
        dl_fe__error(&p->cx, vloc, "dim '%s' must be >= 1, got %lld", name, (long long)v);
        return false;
    }
    if (v > DL_IR_MAX_TENSOR_BYTES) {
        dl_fe__error(&p->cx, vloc, "dim '%s' = %lld is too large (at most %lld = 2^40)", name,
                     (long long)v, (long long)DL_IR_MAX_TENSOR_BYTES);
        return false;
    }
    return built(p, dl_ir_module_add_dim(p->m, name, v, loc, NULL));
}

// input_stmt -> 'input' NAME ':' type
static bool parse_input(parser *p) {
    advance(p); // 'input'
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    dl_ir_type ty;
    if (!expect_ident(p, "an input name after 'input'", &name, &loc) ||
        !check_new_value_name(p, name, loc) ||
        !expect_punct(p, ':', "':' and a type after the input name") ||
        !parse_decl_type(p, &ty, "input", name)) {
        poison(p, name);
        return false;
    }
    dl_ir_value *v;
    return built(p, dl_ir_module_add_input(p->m, name, &ty, loc, &v));
}

// seed_arg -> 'seed' '=' INT
static bool parse_seed(parser *p, dl_ir_init *init) {
    const char *key = NULL;
    dl_src_loc kloc = DL_NO_LOC, vloc = DL_NO_LOC;
    if (!expect_ident(p, "'seed = N'", &key, &kloc)) {
        return false;
    }
    if (strcmp(key, "seed") != 0) {
        dl_fe__error(&p->cx, kloc, "unknown initialiser argument '%s' (expected 'seed')", key);
        return false;
    }
    int64_t s = 0;
    if (!expect_punct(p, '=', "'=' after 'seed'") || !parse_int(p, "an int seed", &s, &vloc)) {
        return false;
    }
    if (s < 0) {
        dl_fe__error(&p->cx, vloc, "seed must be >= 0, got %lld", (long long)s);
        return false;
    }
    init->seed = (uint64_t)s;
    init->has_seed = true;
    return true;
}

static bool parse_finite(parser *p, const char *what, double *out, dl_src_loc *loc) {
    number n;
    if (!parse_number(p, false, what, &n)) {
        return false;
    }
    if (!isfinite(n.f)) {
        char buf[40];
        format_number(&n, buf);
        dl_fe__error(&p->cx, n.loc, "expected a finite number, got %s", buf);
        return false;
    }
    *out = n.f;
    if (loc) {
        *loc = n.loc;
    }
    return true;
}

static const char *const init_names[] = {"zeros",  "ones",           "constant",  "uniform",
                                         "normal", "glorot_uniform", "he_normal", "file"};

// init -> 'zeros' | 'ones' | 'constant' '(' number ')'
//       | ('uniform' | 'normal') '(' number ',' number (',' seed_arg)? ')'
//       | ('glorot_uniform' | 'he_normal') ('(' seed_arg? ')')?
//       | 'file' '(' STRING ',' STRING ')' | literal
static bool parse_init(parser *p, const dl_ir_type *ty, dl_ir_init **out) {
    fe_token *t = cur(p);
    dl_src_loc loc = tok_loc(p, t);
    bool is_word = t->kind == FE_TOK_IDENT && !is_ident(t, "inf") && !is_ident(t, "nan") &&
                   !is_ident(t, "true") && !is_ident(t, "false");
    if (!is_word) {
        dl_ir_init *init = dl_ir_module_new_init(p->m, DL_IR_INIT_LITERAL);
        if (!init) {
            return oom(p);
        }
        init->loc = loc;
        *out = init;
        return parse_literal(p, ty, &init->lit);
    }
    static const dl_ir_init_kind kinds[] = {
        DL_IR_INIT_ZEROS,  DL_IR_INIT_ONES,           DL_IR_INIT_CONSTANT,  DL_IR_INIT_UNIFORM,
        DL_IR_INIT_NORMAL, DL_IR_INIT_GLOROT_UNIFORM, DL_IR_INIT_HE_NORMAL, DL_IR_INIT_FILE};
    size_t k = 0;
    while (k < DL_ARRAY_LEN(init_names) && strcmp(init_names[k], t->s) != 0) {
        k++;
    }
    if (k == DL_ARRAY_LEN(init_names)) {
        const char *s = dl_fe__suggest(t->s, init_names, DL_ARRAY_LEN(init_names));
        if (s) {
            dl_fe__error(&p->cx, loc, "unknown initialiser '%s' (did you mean '%s'?)", t->s, s);
        } else {
            dl_fe__error(&p->cx, loc,
                         "unknown initialiser '%s' (expected zeros, ones, constant, uniform, "
                         "normal, glorot_uniform, he_normal, file or a literal)",
                         t->s);
        }
        return false;
    }
    const char *name = init_names[k];
    dl_ir_init *init = dl_ir_module_new_init(p->m, kinds[k]);
    if (!init) {
        return oom(p);
    }
    init->loc = loc;
    *out = init;
    advance(p);
    bool has_parens = is_punct(cur(p), '(');
    switch (init->kind) {
    case DL_IR_INIT_ZEROS:
    case DL_IR_INIT_ONES:
        // `zeros()` is accepted as a courtesy.
        if (has_parens) {
            advance(p);
            return expect_punct(p, ')', "')': zeros/ones take no arguments");
        }
        return true;
    case DL_IR_INIT_GLOROT_UNIFORM:
    case DL_IR_INIT_HE_NORMAL:
        if (!has_parens) {
            return true;
        }
        advance(p);
        if (is_punct(cur(p), ')')) {
            advance(p);
            return true;
        }
        return parse_seed(p, init) && expect_punct(p, ')', "')' after the seed");
    case DL_IR_INIT_CONSTANT: {
        char what[64];
        snprintf(what, sizeof(what), "'(' after '%s'", name);
        if (!expect_punct(p, '(', what)) {
            return false;
        }
        number n;
        if (!parse_number(p, false, "a number", &n)) {
            return false;
        }
        init->a = n.f;
        return expect_punct(p, ')', "')' after the constant");
    }
    case DL_IR_INIT_UNIFORM:
    case DL_IR_INIT_NORMAL: {
        char what[64];
        snprintf(what, sizeof(what), "'(' after '%s'", name);
        dl_src_loc bloc = DL_NO_LOC;
        if (!expect_punct(p, '(', what) || !parse_finite(p, "a number", &init->a, NULL) ||
            !expect_punct(p, ',', "',' and a second number") ||
            !parse_finite(p, "a number", &init->b, &bloc)) {
            return false;
        }
        if (is_punct(cur(p), ',')) {
            advance(p);
            if (!parse_seed(p, init)) {
                return false;
            }
        }
        if (!expect_punct(p, ')', "')' after the initialiser arguments")) {
            return false;
        }
        if (init->kind == DL_IR_INIT_UNIFORM && init->a > init->b) {
            dl_fe__error(&p->cx, bloc, "uniform: low bound %g is greater than high bound %g",
                         init->a, init->b);
            return false;
        }
        if (init->kind == DL_IR_INIT_NORMAL && init->b < 0) {
            dl_fe__error(&p->cx, bloc, "normal: std must be >= 0, got %g", init->b);
            return false;
        }
        return true;
    }
    case DL_IR_INIT_FILE: {
        if (!expect_punct(p, '(', "'(' after 'file'")) {
            return false;
        }
        if (cur(p)->kind != FE_TOK_STRING) {
            return syntax_error(p, "a file path string");
        }
        init->path = dl_arena_strdup(&p->m->arena, cur(p)->s);
        advance(p);
        if (!expect_punct(p, ',', "',' and a tensor name string")) {
            return false;
        }
        if (cur(p)->kind != FE_TOK_STRING) {
            return syntax_error(p, "a tensor name string");
        }
        init->tensor = dl_arena_strdup(&p->m->arena, cur(p)->s);
        advance(p);
        if (!init->path || !init->tensor) {
            return oom(p);
        }
        return expect_punct(p, ')', "')' after the tensor name");
    }
    case DL_IR_INIT_LITERAL:
        break;
    }
    DL_UNREACHABLE();
}

// param_stmt -> 'param' NAME ':' type '=' init
static bool parse_param(parser *p) {
    advance(p); // 'param'
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    dl_ir_type ty;
    dl_ir_init *init = NULL;
    if (!expect_ident(p, "a param name after 'param'", &name, &loc) ||
        !check_new_value_name(p, name, loc) ||
        !expect_punct(p, ':', "':' and a type after the param name") ||
        !parse_decl_type(p, &ty, "param", name) ||
        !expect_punct(p, '=', "'=' and an initialiser after the type") ||
        !parse_init(p, &ty, &init)) {
        poison(p, name);
        return false;
    }
    dl_ir_value *v;
    return built(p, dl_ir_module_add_param(p->m, name, &ty, init, loc, &v));
}

// const_stmt -> 'const' NAME ':' type '=' literal
static bool parse_const(parser *p) {
    advance(p); // 'const'
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    dl_ir_type ty;
    dl_ir_literal *lit = NULL;
    if (!expect_ident(p, "a const name after 'const'", &name, &loc) ||
        !check_new_value_name(p, name, loc) ||
        !expect_punct(p, ':', "':' and a type after the const name") ||
        !parse_decl_type(p, &ty, "const", name) ||
        !expect_punct(p, '=', "'=' and a literal after the type") || !parse_literal(p, &ty, &lit)) {
        poison(p, name);
        return false;
    }
    dl_ir_value *v;
    return built(p, dl_ir_module_add_const(p->m, name, &ty, lit, loc, &v));
}

// output_stmt -> 'output' NAME
static bool parse_output(parser *p) {
    advance(p); // 'output'
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    if (!expect_ident(p, "a value name after 'output'", &name, &loc)) {
        return false;
    }
    dl_ir_value *v = lookup_value(p, name, loc);
    if (!v) {
        return false;
    }
    if (v->is_output) {
        dl_fe__error(&p->cx, loc, "'%s' is already an output", name);
        return false;
    }
    return built(p, dl_ir_module_add_output(p->m, v, loc));
}

// "1 input", "1 or 2 outputs", "2 to 3 inputs", "at least 1 input"
static void count_phrase(int32_t lo, int32_t hi, const char *noun, char *buf, size_t size) {
    if (hi < 0) {
        snprintf(buf, size, "at least %d %s%s", lo, noun, lo == 1 ? "" : "s");
    } else if (lo == hi) {
        snprintf(buf, size, "%d %s%s", lo, noun, lo == 1 ? "" : "s");
    } else if (hi == lo + 1) {
        snprintf(buf, size, "%d or %d %ss", lo, hi, noun);
    } else {
        snprintf(buf, size, "%d to %d %ss", lo, hi, noun);
    }
}

// Clip's min/max and Dropout's ratio may be attributes (older opsets) or inputs, not both.
static bool check_attr_input_conflicts(parser *p, dl_ir_op op, const attr_vec *attrs,
                                       dl_ir_value *const *ins, size_t n_ins) {
    static const struct {
        dl_ir_op op;
        const char *attr;
        size_t input;
    } rules[] = {
        {DL_IR_OP_CLIP, "min", 1}, {DL_IR_OP_CLIP, "max", 2}, {DL_IR_OP_DROPOUT, "ratio", 1}};
    bool ok = true;
    for (size_t r = 0; r < DL_ARRAY_LEN(rules); r++) {
        if (rules[r].op != op || rules[r].input >= n_ins || !ins[rules[r].input]) {
            continue;
        }
        for (size_t i = 0; i < attrs->len; i++) {
            if (strcmp(attrs->data[i].a.name, rules[r].attr) == 0) {
                dl_fe__error(&p->cx, attrs->data[i].a.loc,
                             "%s: '%s' is given both as an attribute and as input %zu ('%s')",
                             dl_ir_op_get_info(op)->name, rules[r].attr, rules[r].input,
                             ins[rules[r].input]->name);
                ok = false;
            }
        }
    }
    return ok;
}

// Cast's `to` may be an ONNX TensorProto code; it is stored as the dtype name.
static bool fix_cast_to(parser *p, attr_vec *attrs) {
    static const struct {
        int64_t code;
        const char *name;
    } codes[] = {{1, "float"}, {10, "float16"}, {16, "bfloat16"},
                 {6, "int32"}, {7, "int64"},    {9, "bool"}};
    for (size_t i = 0; i < attrs->len; i++) {
        fe_attr *at = &attrs->data[i];
        if (strcmp(at->a.name, "to") != 0 || at->a.kind != DL_IR_ATTR_INT || at->empty_list) {
            continue;
        }
        const char *name = NULL;
        for (size_t k = 0; k < DL_ARRAY_LEN(codes); k++) {
            if (codes[k].code == at->a.i) {
                name = codes[k].name;
            }
        }
        if (!name) {
            dl_fe__error(&p->cx, at->vloc,
                         "Cast: attribute 'to' has unknown type code %lld (valid: 1 float, "
                         "10 float16, 16 bfloat16, 6 int32, 7 int64, 9 bool)",
                         (long long)at->a.i);
            return false;
        }
        at->a.kind = DL_IR_ATTR_STRING;
        at->a.s = name;
        at->a.i = 0;
        at->a.i_sym = -1;
    }
    return true;
}

typedef DL_VEC(const char *) name_vec;
typedef DL_VEC(dl_src_loc) loc_vec;
typedef DL_VEC(dl_ir_value *) value_vec;

// node_stmt -> NAME (',' NAME)* '=' OP attrs? '(' (arg (',' arg)*)? ')'     arg -> NAME | empty
static bool parse_node_body(parser *p, name_vec *outs, loc_vec *out_locs, attr_vec *attrs,
                            value_vec *ins) {
    for (;;) {
        const char *name = NULL;
        dl_src_loc loc = DL_NO_LOC;
        if (!expect_ident(p, "an output name", &name, &loc)) {
            return false;
        }
        if (outs->len >= FE_MAX_OUTPUTS) {
            dl_fe__error(&p->cx, loc, "too many outputs in one statement (at most %d)",
                         FE_MAX_OUTPUTS);
            return false;
        }
        for (size_t i = 0; i < outs->len; i++) {
            if (strcmp(outs->data[i], name) == 0) {
                dl_fe__error(&p->cx, loc, "redefinition of '%s'", name);
                dl_fe__note(&p->cx, out_locs->data[i], "previous definition of '%s' is here", name);
                return false;
            }
        }
        if (!check_new_value_name(p, name, loc)) {
            return false;
        }
        if (!DL_VEC_PUSH(outs, name) || !DL_VEC_PUSH(out_locs, loc)) {
            return oom(p);
        }
        if (is_punct(cur(p), ',')) {
            advance(p);
            continue;
        }
        if (!expect_punct(p, '=', "'=' or ',' after the output name")) {
            return false;
        }
        break;
    }
    const char *opname = NULL;
    dl_src_loc oploc = DL_NO_LOC;
    if (!expect_ident(p, "an op name", &opname, &oploc)) {
        return false;
    }
    dl_ir_op op;
    if (!dl_ir_op_from_name(opname, &op)) {
        const char *op_names[DL_IR_OP_COUNT];
        for (int i = 0; i < DL_IR_OP_COUNT; i++) {
            op_names[i] = dl_ir_op_get_info((dl_ir_op)i)->name;
        }
        const char *s = dl_fe__suggest(opname, op_names, DL_IR_OP_COUNT);
        if (s) {
            dl_fe__error(&p->cx, oploc, "unknown op '%s' (did you mean '%s'?)", opname, s);
        } else {
            dl_fe__error(&p->cx, oploc, "unknown op '%s'", opname);
        }
        return false;
    }
    const dl_ir_op_info *info = dl_ir_op_get_info(op);
    if (is_punct(cur(p), '<') && !parse_attrs(p, attrs)) {
        return false;
    }
    char what[96];
    snprintf(what, sizeof(what), "'(' and the arguments of %s", info->name);
    if (!expect_punct(p, '(', what)) {
        return false;
    }
    bool ok = true;
    if (is_punct(cur(p), ')')) {
        advance(p);
    } else {
        for (;;) {
            fe_token *t = cur(p);
            dl_ir_value *v = NULL;
            if (t->kind == FE_TOK_IDENT) {
                v = lookup_value(p, t->s, tok_loc(p, t));
                ok &= v != NULL;
                advance(p);
            } else if (!is_punct(t, ',') && !is_punct(t, ')')) {
                return syntax_error(p, "an input name, ',' or ')' in the arguments");
            }
            if (!DL_VEC_PUSH(ins, v)) {
                return oom(p);
            }
            if (is_punct(cur(p), ',')) {
                advance(p);
                continue;
            }
            if (!expect_punct(p, ')', "')' after arguments")) {
                return false;
            }
            break;
        }
    }
    if (!ok) {
        return false;
    }
    // Arity against the op table.
    if ((int64_t)ins->len < info->min_inputs ||
        (info->max_inputs >= 0 && (int64_t)ins->len > info->max_inputs)) {
        char want[64];
        count_phrase(info->min_inputs, info->max_inputs, "input", want, sizeof(want));
        dl_fe__error(&p->cx, oploc, "%s: expected %s, got %zu", info->name, want, ins->len);
        return false;
    }
    for (size_t i = 0; i < ins->len && (int64_t)i < info->min_inputs; i++) {
        if (!ins->data[i]) {
            dl_fe__error(&p->cx, oploc, "%s: input %zu is required and cannot be omitted",
                         info->name, i);
            return false;
        }
    }
    if ((int64_t)outs->len < info->min_outputs ||
        (info->max_outputs >= 0 && (int64_t)outs->len > info->max_outputs)) {
        char want[64];
        count_phrase(info->min_outputs, info->max_outputs, "output", want, sizeof(want));
        dl_fe__error(&p->cx, oploc, "%s: expected %s, got %zu", info->name, want, outs->len);
        return false;
    }
    if (op == DL_IR_OP_CAST && !fix_cast_to(p, attrs)) {
        return false;
    }
    if (!dl_fe__check_attrs(&p->cx, info->name, info->attrs, info->n_attrs, attrs->data, attrs->len,
                            oploc)) {
        return false;
    }
    if (!check_attr_input_conflicts(p, op, attrs, ins->data, ins->len)) {
        return false;
    }
    dl_ir_attr *as = attrs_to_arena(p, attrs);
    if (!as) {
        return false;
    }
    dl_ir_node *node;
    return built(p, dl_ir_module_add_node(p->m, op, ins->data, ins->len,
                                          (const char *const *)outs->data, out_locs->data,
                                          outs->len, as, attrs->len, oploc, &node));
}

static bool parse_node(parser *p) {
    name_vec outs = {0};
    loc_vec locs = {0};
    attr_vec attrs = {0};
    value_vec ins = {0};
    bool ok = parse_node_body(p, &outs, &locs, &attrs, &ins);
    for (size_t i = 0; !ok && i < outs.len; i++) {
        poison(p, outs.data[i]);
    }
    free(outs.data);
    free(locs.data);
    free(attrs.data);
    free(ins.data);
    return ok;
}

// ---------------------------------------------------------------------------------------------
// The train block

enum {
    TK_OPTIMIZER,
    TK_CLIP_NORM,
    TK_PRECISION,
    TK_LOSS_SCALE,
    TK_FREEZE,
    TK_ACCUMULATE,
    TK_SYNC_BATCHNORM,
    TK_COUNT
};
static const char *const train_keys[TK_COUNT] = {
    "optimizer", "clip_norm", "precision", "loss_scale", "freeze", "accumulate", "sync_batchnorm"};

// The values a train block may give, checked where they are written (the attribute's value) with
// the ranges dlrt_session_set_hparam enforces at run time (runtime/rt_train.c), which are
// torch.optim's and GradScaler's: a value the runtime would refuse never compiles. `owner` is
// the optimizer name or "loss_scale".
typedef struct hp_range {
    const char *name;
    double lo;           // lowest allowed value (inclusive unless lo_open)
    bool lo_open;        // lo itself is excluded
    double hi;           // INFINITY: no upper bound (the value must still be finite)
    bool hi_open;        // hi itself is excluded
    const char *allowed; // the range as the message says it
} hp_range;

static const hp_range hp_ranges[] = {
    {"lr", 0, false, INFINITY, false, "a finite number >= 0"},
    {"eps", 0, false, INFINITY, false, "a finite number >= 0"},
    {"weight_decay", 0, false, INFINITY, false, "a finite number >= 0"},
    {"alpha", 0, false, INFINITY, false, "a finite number >= 0"},
    {"momentum", 0, false, INFINITY, false, "a finite number >= 0"},
    {"dampening", -INFINITY, false, INFINITY, false, "a finite number"},
    {"beta1", 0, false, 1, true, "in [0, 1)"},
    {"beta2", 0, false, 1, true, "in [0, 1)"},
    {"init", 0, true, INFINITY, false, "a finite number > 0"},
    {"growth", 1, true, INFINITY, false, "a finite number > 1"},
    {"backoff", 0, true, 1, true, "in (0, 1)"},
};

static const fe_attr *find_fe_attr(const attr_vec *attrs, const char *name) {
    for (size_t i = 0; i < attrs->len; i++) {
        if (strcmp(attrs->data[i].a.name, name) == 0) {
            return &attrs->data[i];
        }
    }
    return NULL;
}

static double fe_attr_num(const fe_attr *a) {
    return a->a.kind == DL_IR_ATTR_INT ? (double)a->a.i : a->a.f;
}

static bool check_train_values(parser *p, const char *owner, const attr_vec *attrs) {
    bool ok = true;
    for (size_t i = 0; i < attrs->len; i++) {
        const fe_attr *a = &attrs->data[i];
        for (size_t k = 0; k < DL_ARRAY_LEN(hp_ranges); k++) {
            const hp_range *r = &hp_ranges[k];
            if (strcmp(r->name, a->a.name) != 0) {
                continue;
            }
            double v = fe_attr_num(a);
            bool in = isfinite(v) && (r->lo_open ? v > r->lo : v >= r->lo) &&
                      (r->hi_open ? v < r->hi : v <= r->hi);
            if (!in) {
                dl_fe__error(&p->cx, a->vloc, "%s: %s must be %s, got %g", owner, r->name,
                             r->allowed, v);
                ok = false;
            }
        }
    }
    // torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening".
    const fe_attr *nest = find_fe_attr(attrs, "nesterov");
    if (ok && nest && fe_attr_num(nest) != 0.0) {
        const fe_attr *mom = find_fe_attr(attrs, "momentum");
        const fe_attr *damp = find_fe_attr(attrs, "dampening");
        if (!mom || !(fe_attr_num(mom) > 0.0)) {
            dl_fe__error(&p->cx, nest->vloc, "%s: nesterov needs a momentum > 0, got %g", owner,
                         mom ? fe_attr_num(mom) : 0.0);
            ok = false;
        } else if (damp && fe_attr_num(damp) != 0.0) {
            dl_fe__error(&p->cx, nest->vloc, "%s: nesterov needs dampening = 0, got %g", owner,
                         fe_attr_num(damp));
            ok = false;
        }
    }
    return ok;
}

// optimizer = NAME attrs?
static bool parse_optimizer(parser *p, dl_ir_train *t) {
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    if (!expect_ident(p, "an optimizer name (sgd, adam, adamw or rmsprop)", &name, &loc)) {
        return false;
    }
    if (!dl_ir_optim_from_name(name, &t->optimizer)) {
        static const char *const names[] = {"sgd", "adam", "adamw", "rmsprop"};
        const char *s = dl_fe__suggest(name, names, DL_ARRAY_LEN(names));
        if (s) {
            dl_fe__error(&p->cx, loc, "unknown optimizer '%s' (did you mean '%s'?)", name, s);
        } else {
            dl_fe__error(&p->cx, loc,
                         "unknown optimizer '%s' (expected sgd, adam, adamw or rmsprop)", name);
        }
        return false;
    }
    t->optimizer_loc = loc;
    attr_vec attrs = {0};
    bool ok = !is_punct(cur(p), '<') || parse_attrs(p, &attrs);
    if (ok) {
        size_t n;
        const dl_ir_attr_spec *specs = dl_ir_optim_attr_specs(t->optimizer, &n);
        ok = dl_fe__check_attrs(&p->cx, name, specs, n, attrs.data, attrs.len, loc) &&
             check_train_values(p, name, &attrs);
    }
    if (ok) {
        t->opt_attrs = attrs_to_arena(p, &attrs);
        t->n_opt_attrs = attrs.len;
        ok = t->opt_attrs != NULL;
    }
    free(attrs.data);
    return ok;
}

// loss_scale = 'dynamic' attrs? | number
static bool parse_loss_scale(parser *p, dl_ir_train *t) {
    fe_token *tk = cur(p);
    dl_src_loc loc = tok_loc(p, tk);
    if (is_ident(tk, "dynamic")) {
        advance(p);
        t->loss_scale = DL_IR_LS_DYNAMIC;
        attr_vec attrs = {0};
        bool ok = !is_punct(cur(p), '<') || parse_attrs(p, &attrs);
        if (ok) {
            size_t n;
            const dl_ir_attr_spec *specs = dl_ir_loss_scale_attr_specs(&n);
            ok = dl_fe__check_attrs(&p->cx, "loss_scale", specs, n, attrs.data, attrs.len, loc) &&
                 check_train_values(p, "loss_scale", &attrs);
        }
        if (ok) {
            t->ls_attrs = attrs_to_arena(p, &attrs);
            t->n_ls_attrs = attrs.len;
            ok = t->ls_attrs != NULL;
        }
        free(attrs.data);
        return ok;
    }
    number n;
    if (!parse_number(p, false, "'dynamic' or a number for loss_scale", &n)) {
        return false;
    }
    if (!(n.f > 0) || !isfinite(n.f)) {
        char buf[40];
        format_number(&n, buf);
        dl_fe__error(&p->cx, n.loc, "loss_scale must be a finite number > 0, got %s", buf);
        return false;
    }
    t->loss_scale = DL_IR_LS_STATIC;
    t->loss_scale_value = n.f;
    return true;
}

// freeze = '[' (NAME (',' NAME)*)? ']'
static bool parse_freeze(parser *p, dl_ir_train *t) {
    if (!expect_punct(p, '[', "'[' and a list of params")) {
        return false;
    }
    value_vec vs = {0};
    bool *listed = NULL; // by value id: already in the list
    bool ok = true;
    if (is_punct(cur(p), ']')) {
        advance(p);
    } else {
        for (;;) {
            const char *name = NULL;
            dl_src_loc loc = DL_NO_LOC;
            if (!expect_ident(p, "a param name", &name, &loc)) {
                ok = false;
                break;
            }
            dl_ir_value *v = lookup_value(p, name, loc);
            if (!v) {
                ok = false;
                break;
            }
            if (v->kind != DL_IR_VAL_PARAM) {
                dl_fe__error(&p->cx, loc, "freeze: '%s' is not a param", name);
                ok = false;
                break;
            }
            if (!listed) {
                listed = dl_mem_calloc(p->m->values.len, sizeof(bool));
                if (!listed) {
                    ok = oom(p);
                    break;
                }
            }
            if (listed[v->id]) {
                dl_fe__error(&p->cx, loc, "freeze: '%s' is listed twice", name);
                ok = false;
                break;
            }
            listed[v->id] = true;
            if (!DL_VEC_PUSH(&vs, v)) {
                ok = oom(p);
                break;
            }
            if (is_punct(cur(p), ',')) {
                advance(p);
                continue;
            }
            ok = expect_punct(p, ']', "',' or ']' in the freeze list");
            break;
        }
    }
    if (ok) {
        t->n_freeze = vs.len;
        t->freeze = DL_ARENA_NEWN(&p->m->arena, dl_ir_value *, vs.len ? vs.len : 1);
        if (!t->freeze) {
            ok = oom(p);
        } else if (vs.len) {
            memcpy(t->freeze, vs.data, vs.len * sizeof(dl_ir_value *));
        }
    }
    free(vs.data);
    free(listed);
    return ok;
}

static bool parse_train_entry(parser *p, dl_ir_train *t, int key) {
    switch (key) {
    case TK_OPTIMIZER:
        return parse_optimizer(p, t);
    case TK_CLIP_NORM: {
        number n;
        if (!parse_number(p, false, "a number for clip_norm", &n)) {
            return false;
        }
        if (!(n.f > 0) || !isfinite(n.f)) {
            char buf[40];
            format_number(&n, buf);
            dl_fe__error(&p->cx, n.loc, "clip_norm must be a finite number > 0, got %s", buf);
            return false;
        }
        t->has_clip_norm = true;
        t->clip_norm = n.f;
        return true;
    }
    case TK_PRECISION: {
        const char *name = NULL;
        dl_src_loc loc = DL_NO_LOC;
        if (!expect_ident(p, "a precision (float, bfloat16 or float16)", &name, &loc)) {
            return false;
        }
        dl_dtype dt;
        if (!dl_dtype_from_name(name, &dt) ||
            (dt != DL_DT_FLOAT && dt != DL_DT_BFLOAT16 && dt != DL_DT_FLOAT16)) {
            dl_fe__error(&p->cx, loc, "precision must be float, bfloat16 or float16, got '%s'",
                         name);
            return false;
        }
        t->has_precision = true;
        t->precision = dt;
        return true;
    }
    case TK_LOSS_SCALE:
        return parse_loss_scale(p, t);
    case TK_FREEZE:
        return parse_freeze(p, t);
    case TK_ACCUMULATE: {
        int64_t v = 0;
        dl_src_loc loc = DL_NO_LOC;
        if (!parse_int(p, "an int for accumulate", &v, &loc)) {
            return false;
        }
        if (v < 1) {
            dl_fe__error(&p->cx, loc, "accumulate must be >= 1, got %lld", (long long)v);
            return false;
        }
        t->has_accumulate = true;
        t->accumulate = v;
        return true;
    }
    case TK_SYNC_BATCHNORM: {
        const char *name = NULL;
        dl_src_loc loc = DL_NO_LOC;
        if (!expect_ident(p, "true or false for sync_batchnorm", &name, &loc)) {
            return false;
        }
        if (strcmp(name, "true") != 0 && strcmp(name, "false") != 0) {
            dl_fe__error(&p->cx, loc, "sync_batchnorm must be true or false, got '%s'", name);
            return false;
        }
        t->sync_bn = strcmp(name, "true") == 0;
        return true;
    }
    default:
        break;
    }
    DL_UNREACHABLE();
}

// train_stmt -> 'train' NAME '{' (entry ((NEWLINE | ',') entry)*)? '}'    entry -> KEY '=' value
static bool parse_train(parser *p) {
    dl_src_loc tloc = tok_loc(p, cur(p));
    advance(p); // 'train'
    if (p->m->train) {
        dl_fe__error(&p->cx, tloc, "duplicate train block");
        dl_fe__note(&p->cx, p->m->train->loc, "previous train block is here");
        return false;
    }
    const char *loss = NULL;
    dl_src_loc lloc = DL_NO_LOC;
    if (!expect_ident(p, "the loss value name after 'train'", &loss, &lloc)) {
        return false;
    }
    dl_ir_value *lv = lookup_value(p, loss, lloc);
    if (!lv) {
        return false;
    }
    dl_ir_train *t = DL_ARENA_NEW(&p->m->arena, dl_ir_train);
    if (!t) {
        return oom(p);
    }
    t->loc = tloc;
    t->loss = lv;
    t->precision = DL_DT_FLOAT;
    if (!expect_punct(p, '{', "'{' to open the train block")) {
        return false;
    }
    dl_src_loc seen[TK_COUNT];
    bool have[TK_COUNT] = {false};
    for (;;) {
        fe_token *tk = cur(p);
        if (tk->kind == FE_TOK_NEWLINE || is_punct(tk, ',')) {
            advance(p);
            continue;
        }
        if (is_punct(tk, '}')) {
            advance(p);
            break;
        }
        const char *key = NULL;
        dl_src_loc kloc = DL_NO_LOC;
        if (!expect_ident(p, "a train setting or '}'", &key, &kloc)) {
            return false;
        }
        int k = 0;
        while (k < TK_COUNT && strcmp(train_keys[k], key) != 0) {
            k++;
        }
        if (k == TK_COUNT) {
            dl_fe__error(&p->cx, kloc,
                         "unknown train setting '%s' (valid: optimizer, clip_norm, precision, "
                         "loss_scale, freeze, accumulate, sync_batchnorm)",
                         key);
            return false;
        }
        if (have[k]) {
            dl_fe__error(&p->cx, kloc, "duplicate train setting '%s'", key);
            dl_fe__note(&p->cx, seen[k], "previous definition of '%s' is here", key);
            return false;
        }
        have[k] = true;
        seen[k] = kloc;
        char what[64];
        snprintf(what, sizeof(what), "'=' after '%s'", key);
        if (!expect_punct(p, '=', what) || !parse_train_entry(p, t, k)) {
            return false;
        }
        tk = cur(p);
        if (tk->kind != FE_TOK_NEWLINE && !is_punct(tk, ',') && !is_punct(tk, '}')) {
            return syntax_error(p, "',', end of line or '}' after the train setting");
        }
    }
    if (!have[TK_OPTIMIZER]) {
        dl_fe__error(&p->cx, tloc, "train block needs an 'optimizer' setting");
        return false;
    }
    return built(p, dl_ir_module_set_train(p->m, t));
}

// ---------------------------------------------------------------------------------------------
// Comments and statement dispatch

// Joins comments [from, to) into one arena string, lines separated by '\n'.
static const char *join_comments(parser *p, size_t from, size_t to) {
    if (from >= to) {
        return NULL;
    }
    size_t n = 0;
    for (size_t i = from; i < to; i++) {
        n += p->lx.comments.data[i].len + 1;
    }
    char *s = dl_arena_alloc(&p->m->arena, n);
    if (!s) {
        oom(p);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = from; i < to; i++) {
        const fe_comment *c = &p->lx.comments.data[i];
        if (o) {
            s[o++] = '\n';
        }
        memcpy(s + o, c->text, c->len);
        o += c->len;
    }
    s[o] = 0;
    return s;
}

// Full-line comments between the previous statement and line `line`, and whether a blank line
// is among them. Comments on or before the previous statement's last line are skipped (interior
// comments of multi-line statements have no place in the IR).
static void take_comments_before(parser *p, uint32_t line, const char **out, bool *blank) {
    const DL_VEC(fe_comment) *cs = (const void *)&p->lx.comments;
    while (p->cmt_pos < cs->len && cs->data[p->cmt_pos].line <= p->prev_end_line) {
        p->cmt_pos++;
    }
    size_t from = p->cmt_pos;
    while (p->cmt_pos < cs->len && cs->data[p->cmt_pos].line < line) {
        p->cmt_pos++;
    }
    *out = join_comments(p, from, p->cmt_pos);
    uint32_t between = line > p->prev_end_line + 1 ? line - p->prev_end_line - 1 : 0;
    *blank = between > (uint32_t)(p->cmt_pos - from);
}

// The trailing comment on line `line`, if any.
static const char *take_comment_after(parser *p, uint32_t line) {
    const DL_VEC(fe_comment) *cs = (const void *)&p->lx.comments;
    while (p->cmt_pos < cs->len && cs->data[p->cmt_pos].line < line) {
        p->cmt_pos++;
    }
    if (p->cmt_pos < cs->len && cs->data[p->cmt_pos].line == line &&
        !cs->data[p->cmt_pos].full_line) {
        p->cmt_pos++;
        return join_comments(p, p->cmt_pos - 1, p->cmt_pos);
    }
    return NULL;
}

static const char *const stmt_words[] = {"model", "dim",    "input", "param",
                                         "const", "output", "train"};

// model_stmt -> 'model' NAME
static bool parse_model(parser *p) {
    dl_src_loc kloc = tok_loc(p, cur(p));
    advance(p);
    const char *name = NULL;
    dl_src_loc loc = DL_NO_LOC;
    if (!expect_ident(p, "a model name after 'model'", &name, &loc)) {
        return false;
    }
    if (p->have_model) {
        dl_fe__error(&p->cx, kloc, "duplicate 'model' statement");
        dl_fe__note(&p->cx, p->model_loc, "previous 'model' statement is here");
        return false;
    }
    p->have_model = true;
    p->model_loc = kloc;
    p->m->name = dl_arena_strdup(&p->m->arena, name);
    p->m->name_loc = loc;
    return p->m->name ? true : oom(p);
}

// statement -> model_stmt | dim_stmt | input_stmt | param_stmt | const_stmt | node_stmt
//            | output_stmt | train_stmt
static bool parse_statement(parser *p) {
    fe_token *t = cur(p);
    if (t->kind != FE_TOK_IDENT) {
        return syntax_error(p, "a statement");
    }
    fe_token *t2 = peek2(p);
    bool is_node = is_punct(t2, '=') || is_punct(t2, ',');
    bool is_model = !is_node && strcmp(t->s, "model") == 0;
    if (!p->have_model && !is_model) {
        char found[200];
        describe(t, found, sizeof(found));
        dl_fe__error(&p->cx, tok_loc(p, t),
                     "expected 'model NAME' as the first statement, found %s", found);
        // Go on as if it were there, so later errors are reported too.
        p->have_model = true;
        p->model_loc = tok_loc(p, t);
        return false;
    }
    if (is_node) {
        return parse_node(p);
    }
    if (is_model) {
        return parse_model(p);
    }
    if (strcmp(t->s, "dim") == 0) {
        return parse_dim(p);
    }
    if (strcmp(t->s, "input") == 0) {
        return parse_input(p);
    }
    if (strcmp(t->s, "param") == 0) {
        return parse_param(p);
    }
    if (strcmp(t->s, "const") == 0) {
        return parse_const(p);
    }
    if (strcmp(t->s, "output") == 0) {
        return parse_output(p);
    }
    if (strcmp(t->s, "train") == 0) {
        return parse_train(p);
    }
    const char *s = dl_fe__suggest(t->s, stmt_words, DL_ARRAY_LEN(stmt_words));
    if (s) {
        dl_fe__error(&p->cx, tok_loc(p, t), "unknown statement '%s' (did you mean '%s'?)", t->s, s);
    } else {
        dl_fe__error(&p->cx, tok_loc(p, t),
                     "unknown statement '%s' (expected model, dim, input, param, const, output, "
                     "train or NAME = OP (...))",
                     t->s);
    }
    return false;
}

// Skips the rest of a bad statement: up to a newline outside brackets. While inside brackets, a
// newline followed by an identifier in column 1 also ends it (continuation lines are indented in
// practice, and one unclosed '(' should not swallow the rest of the file).
static void recover(parser *p) {
    int depth = p->depth;
    p->depth = 0; // newlines are seen one by one below
    fill(p, 1);
    if (depth > 0 && p->la[0].kind == FE_TOK_IDENT && p->la[0].col == 1 &&
        p->la[0].line > p->stmt_line) {
        // The error was found at the start of the next statement (an unclosed bracket).
        return;
    }
    for (;;) {
        fill(p, 1);
        fe_token *t = &p->la[0];
        if (t->kind == FE_TOK_EOF) {
            break;
        }
        if (t->kind == FE_TOK_NEWLINE) {
            p->prev_end_line = t->line;
            drop_front(p);
            if (depth <= 0) {
                break;
            }
            fill(p, 1);
            if (p->la[0].kind == FE_TOK_IDENT && p->la[0].col == 1) {
                break;
            }
            continue;
        }
        if (t->kind == FE_TOK_PUNCT && is_open(t->punct)) {
            depth++;
        } else if (t->kind == FE_TOK_PUNCT && is_close(t->punct) && depth > 0) {
            depth--;
        }
        drop_front(p);
    }
    p->depth = 0;
}

static dl_status parse_module(parser *p) {
    for (;;) {
        if (p->cx.stop || p->cx.oom) {
            break;
        }
        p->depth = 0;
        fe_token *t = cur(p);
        if (t->kind == FE_TOK_NEWLINE) {
            advance(p);
            continue;
        }
        if (t->kind == FE_TOK_EOF) {
            break;
        }
        bool first = !p->have_model;
        uint32_t start_line = t->line;
        p->stmt_line = start_line;
        const char *before;
        bool blank;
        take_comments_before(p, start_line, &before, &blank);
        size_t n_stmts = p->m->stmts.len;
        if (!parse_statement(p)) {
            recover(p);
            continue;
        }
        t = cur(p);
        if (t->kind != FE_TOK_NEWLINE && t->kind != FE_TOK_EOF) {
            syntax_error(p, "end of line after the statement");
            recover(p);
            continue;
        }
        uint32_t end_line = t->line;
        if (t->kind == FE_TOK_NEWLINE) {
            advance(p);
        }
        const char *after = take_comment_after(p, end_line);
        if (first && p->have_model) {
            // Comments before `model` (and one trailing it) form the file header.
            const char *h = before;
            if (after) {
                size_t n1 = h ? strlen(h) : 0, n2 = strlen(after);
                char *s = dl_arena_alloc(&p->m->arena, n1 + n2 + 2);
                if (!s) {
                    oom(p);
                    break;
                }
                if (h) {
                    memcpy(s, h, n1);
                    s[n1++] = '\n';
                }
                memcpy(s + n1, after, n2 + 1);
                h = s;
            }
            p->m->comment_header = h;
        } else if (p->m->stmts.len > n_stmts) {
            dl_ir_stmt *st = &p->m->stmts.data[p->m->stmts.len - 1];
            st->comment_before = before;
            st->comment_after = after;
            st->blank_before = blank;
        }
        p->prev_end_line = end_line;
    }
    if (!p->cx.stop && !p->cx.oom && !p->have_model && p->cx.n_errors == 0) {
        fe_token *t = cur(p);
        dl_fe__error(&p->cx, tok_loc(p, t),
                     "expected 'model NAME' as the first statement, found end of file");
    }
    if (p->cx.oom) {
        dl_diag(p->cx.d, DL_SEV_ERROR, DL_NO_LOC, "out of memory while parsing");
        return DL_ERR_NOMEM;
    }
    if (p->cx.n_errors > 0) {
        return DL_ERR_PARSE;
    }
    // Comments after the last statement.
    const char *trailer = NULL;
    bool blank;
    take_comments_before(p, UINT32_MAX, &trailer, &blank);
    p->m->comment_trailer = trailer;
    return p->cx.oom ? DL_ERR_NOMEM : DL_OK;
}

static dl_status parse_text(uint32_t file, const char *text, size_t len, dl_diags *d,
                            const char *source_dir, dl_ir_module **out) {
    parser *p = dl_mem_calloc(1, sizeof(*p));
    if (!p) {
        return DL_ERR_NOMEM;
    }
    p->cx.d = d;
    p->cx.file = file;
    dl_arena_init(&p->scratch);
    dl_fe__lex_init(&p->lx, text, len, &p->scratch);
    dl_status st = dl_ir_module_create("", &p->m);
    if (st == DL_OK) {
        p->m->source_dir = dl_arena_strdup(&p->m->arena, source_dir);
        st = p->m->source_dir ? parse_module(p) : DL_ERR_NOMEM;
    }
    if (st == DL_OK) {
        *out = p->m;
    } else {
        dl_ir_module_destroy(p->m);
    }
    dl_fe__lex_fini(&p->lx);
    dl_arena_fini(&p->scratch);
    free(p->poisoned.data);
    free(p);
    return st;
}

dl_status dl_fe_parse(const char *file_name, const char *text, size_t len, dl_diags *d,
                      dl_ir_module **out) {
    *out = NULL;
    if (!text) {
        text = "";
        len = 0;
    }
    uint32_t file;
    DL_TRY(dl_diags_add_file(d, file_name ? file_name : "<input>", text, len, &file));
    return parse_text(file, text, len, d, ".", out);
}

dl_status dl_fe_parse_file(const char *path, dl_diags *d, dl_ir_module **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    char why[160];
    // A .dlg is text a person wrote: DL_READ_LIMIT_DLG, and only a regular file (/dev/zero or a
    // FIFO would never end).
    dl_status st = dl_read_file_max(path, DL_READ_LIMIT_DLG, &text, &len, why, sizeof why);
    if (st != DL_OK) {
        if (st == DL_ERR_NOMEM) {
            return st;
        }
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "cannot read '%s': %s", path, why);
        return DL_ERR_IO;
    }
    // source_dir: everything before the last '/', "/" for a file in the root, "." for none.
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char *dir = dl_mem_alloc(dlen + 2);
    uint32_t file = 0;
    if (!dir) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    if (!slash) {
        strcpy(dir, ".");
    } else if (dlen == 0) {
        strcpy(dir, "/");
    } else {
        memcpy(dir, path, dlen);
        dir[dlen] = 0;
    }
    st = dl_diags_add_file(d, path, text, len, &file);
    if (st == DL_OK) {
        st = parse_text(file, text, len, d, dir, out);
    }
out:
    free(dir);
    free(text);
    return st;
}
