// tests/passes/test_shape.c — unit tests of dl_pass_shape: output types of every op (with dim
// symbols), dtype rules, attribute range errors and the exact text of a few diagnostics.
//
// Modules are built with the IR builder API through a small helper that reads one-line
// declarations ("x : float[N, 3]") and node statements ("z = Add <axis = 1> (x, y)"), so each
// case reads like the .dlg it stands for. Node i gets the source location of line i + 1 of a
// fake file made of the node lines, so rendered diagnostics show the statement and a caret.
#include "dl_pass.h"
#include "dl_test.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct tmod {
    dl_ir_module *m;
    dl_diags *d;
    dl_strbuf src;  // node lines, the fake source file
    uint32_t lines; // node lines so far
    bool bad;       // a helper call failed (bad test input)
    char buf[8][256];
    unsigned bi;
} tmod;

static tmod *t_new(void) {
    tmod *t = calloc(1, sizeof *t);
    if (!t || dl_ir_module_create("t", &t->m) != DL_OK || dl_diags_create(&t->d) != DL_OK) {
        abort();
    }
    return t;
}

static void t_free(tmod *t) {
    dl_ir_module_destroy(t->m);
    dl_diags_destroy(t->d);
    dl_strbuf_fini(&t->src);
    free(t);
}

static void t_dim(tmod *t, const char *name, int64_t v) {
    if (dl_ir_module_add_dim(t->m, name, v, DL_NO_LOC, NULL) != DL_OK) {
        t->bad = true;
    }
}

static const char *skip_ws(const char *p) {
    while (*p == ' ') {
        p++;
    }
    return p;
}

// Reads an identifier [A-Za-z_][A-Za-z0-9_.]* into out.
static const char *read_ident(const char *p, char *out, size_t size) {
    size_t n = 0;
    p = skip_ws(p);
    while ((isalnum((unsigned char)*p) || *p == '_' || *p == '.') && n + 1 < size) {
        out[n++] = *p++;
    }
    out[n] = 0;
    return p;
}

// An int or a dim name (value + sym).
static const char *read_int(tmod *t, const char *p, int64_t *v, int32_t *sym) {
    p = skip_ws(p);
    *sym = -1;
    if (*p == '-' || isdigit((unsigned char)*p)) {
        char *end;
        *v = strtoll(p, &end, 10);
        return end;
    }
    char name[64];
    p = read_ident(p, name, sizeof name);
    int32_t s = dl_ir_module_find_dim(t->m, name);
    if (s < 0) {
        t->bad = true;
        *v = 0;
        return p;
    }
    *v = t->m->dims.data[s].value;
    *sym = s;
    return p;
}

// "[1, N, -2]" -> values and syms; returns the count.
static const char *read_list(tmod *t, const char *p, int64_t *vs, int32_t *syms, size_t *n) {
    *n = 0;
    p = skip_ws(p);
    if (*p != '[') {
        t->bad = true;
        return p;
    }
    p = skip_ws(p + 1);
    while (*p && *p != ']') {
        p = read_int(t, p, &vs[*n], &syms[*n]);
        (*n)++;
        p = skip_ws(p);
        if (*p == ',') {
            p++;
        }
        p = skip_ws(p);
    }
    return *p == ']' ? p + 1 : p;
}

// "float[N, 3]"
static dl_ir_type parse_type(tmod *t, const char *s) {
    dl_ir_type ty = {0};
    char dt[32];
    const char *p = read_ident(s, dt, sizeof dt);
    if (!dl_dtype_from_name(dt, &ty.dtype)) {
        t->bad = true;
    }
    int64_t v[DL_MAX_RANK + 2];
    int32_t sy[DL_MAX_RANK + 2];
    size_t n;
    read_list(t, p, v, sy, &n);
    ty.rank = (int32_t)n;
    for (size_t i = 0; i < n && i < DL_MAX_RANK; i++) {
        ty.dims[i] = (dl_ir_dim){v[i], sy[i]};
    }
    return ty;
}

// "x : float[N, 3]"
static dl_ir_value *t_in(tmod *t, const char *decl) {
    char name[64];
    const char *p = skip_ws(read_ident(decl, name, sizeof name));
    if (*p == ':') {
        p++;
    }
    dl_ir_type ty = parse_type(t, p);
    dl_ir_value *v = NULL;
    if (dl_ir_module_add_input(t->m, name, &ty, DL_NO_LOC, &v) != DL_OK) {
        t->bad = true;
    }
    return v;
}

static dl_ir_value *t_param(tmod *t, const char *decl) {
    char name[64];
    const char *p = skip_ws(read_ident(decl, name, sizeof name));
    if (*p == ':') {
        p++;
    }
    dl_ir_type ty = parse_type(t, p);
    dl_ir_value *v = NULL;
    dl_ir_init *init = dl_ir_module_new_init(t->m, DL_IR_INIT_ZEROS);
    if (!init || dl_ir_module_add_param(t->m, name, &ty, init, DL_NO_LOC, &v) != DL_OK) {
        t->bad = true;
    }
    return v;
}

#define MAX_ATTRS 8
#define MAX_LIST  16

// "outs = Op <name = value, ...> (a, , b)"; returns the node (NULL on a bad line).
static dl_ir_node *t_node(tmod *t, const char *line) {
    const char *eq = strchr(line, '=');
    if (!eq) {
        t->bad = true;
        return NULL;
    }
    char outs[8][64];
    const char *out_ptrs[8];
    size_t n_out = 0;
    for (const char *p = line; p < eq && n_out < 8;) {
        p = read_ident(p, outs[n_out], sizeof outs[0]);
        out_ptrs[n_out] = outs[n_out];
        n_out++;
        p = skip_ws(p);
        if (*p == ',') {
            p++;
        }
        p = skip_ws(p);
    }
    char opname[64];
    const char *op_start = skip_ws(eq + 1);
    const char *p = read_ident(op_start, opname, sizeof opname);
    dl_ir_op op;
    if (!dl_ir_op_from_name(opname, &op)) {
        t->bad = true;
        return NULL;
    }
    dl_ir_attr attrs[MAX_ATTRS];
    int64_t lists[MAX_ATTRS][MAX_LIST];
    int32_t syms[MAX_ATTRS][MAX_LIST];
    char strs[MAX_ATTRS][64], names[MAX_ATTRS][64];
    size_t n_attrs = 0;
    p = skip_ws(p);
    if (*p == '<') {
        p++;
        while (*(p = skip_ws(p)) && *p != '>' && n_attrs < MAX_ATTRS) {
            dl_ir_attr *a = &attrs[n_attrs];
            memset(a, 0, sizeof *a);
            char *an = names[n_attrs];
            p = skip_ws(read_ident(p, an, sizeof names[0]));
            a->name = an;
            p = skip_ws(p + 1); // '='
            const dl_ir_attr_spec *sp = dl_ir_op_find_attr_spec(op, an);
            a->kind = sp ? sp->kind : DL_IR_ATTR_INT;
            a->i_sym = -1;
            switch (a->kind) {
            case DL_IR_ATTR_INTS:
                p = read_list(t, p, lists[n_attrs], syms[n_attrs], &a->n);
                a->ints = lists[n_attrs];
                a->int_syms = syms[n_attrs];
                break;
            case DL_IR_ATTR_INT:
                p = read_int(t, p, &a->i, &a->i_sym);
                break;
            case DL_IR_ATTR_FLOAT: {
                char *end;
                a->f = strtod(p, &end);
                p = end;
                break;
            }
            case DL_IR_ATTR_STRING: {
                size_t k = 0;
                p += *p == '"';
                while (*p && *p != '"' && *p != ',' && *p != '>' && *p != ' ' && k + 1 < 64) {
                    strs[n_attrs][k++] = *p++;
                }
                strs[n_attrs][k] = 0;
                p += *p == '"';
                a->s = strs[n_attrs];
                break;
            }
            case DL_IR_ATTR_FLOATS:
            case DL_IR_ATTR_STRINGS:
                t->bad = true;
                break;
            }
            n_attrs++;
            p = skip_ws(p);
            if (*p == ',') {
                p++;
            }
        }
        p = skip_ws(p + 1);
    }
    dl_ir_value *ins[16];
    size_t n_in = 0;
    if (*p == '(') {
        p++;
        for (;;) {
            char nm[64];
            p = skip_ws(read_ident(p, nm, sizeof nm));
            if (*p == ')' && n_in == 0 && !nm[0]) {
                break;
            }
            ins[n_in] = nm[0] ? dl_ir_module_find(t->m, nm) : NULL;
            if (nm[0] && !ins[n_in]) {
                t->bad = true;
            }
            n_in++;
            if (*p != ',') {
                break;
            }
            p++;
        }
    }
    t->lines++;
    dl_src_loc loc = {1, t->lines, (uint32_t)(op_start - line) + 1, (uint32_t)strlen(opname)};
    dl_strbuf_puts(&t->src, line);
    dl_strbuf_puts(&t->src, "\n");
    dl_ir_node *n = NULL;
    if (dl_ir_module_add_node(t->m, op, ins, n_in, out_ptrs, NULL, n_out, attrs, n_attrs, loc,
                              &n) != DL_OK) {
        t->bad = true;
    }
    return n;
}

static dl_status t_run(tmod *t) {
    return dl_pass_shape(t->m, t->d);
}

// The type of `name` as "float[N, 3]" (dim names where the sym is set), "?" if unknown.
static const char *t_ty(tmod *t, const char *name) {
    char *b = t->buf[t->bi++ % 8];
    const dl_ir_value *v = dl_ir_module_find(t->m, name);
    if (!v) {
        return "(no such value)";
    }
    if (v->type.rank < 0) {
        return "?";
    }
    dl_ir_type_format(t->m, &v->type, b, sizeof t->buf[0]);
    return b;
}

// Message of diagnostic i, or "" when there is none.
static const char *t_msg(tmod *t, size_t i) {
    const dl_diag_entry *e = dl_diags_get(t->d, i);
    return e ? e->msg : "";
}

// All diagnostics rendered against the fake file of node lines (caller frees).
static char *t_render(tmod *t) {
    uint32_t id;
    const char *text = t->src.data ? t->src.data : "";
    if (dl_diags_add_file(t->d, "t.dlg", text, strlen(text), &id) != DL_OK || id != 1) {
        return NULL;
    }
    char *out = NULL;
    return dl_diags_render(t->d, &out) == DL_OK ? out : NULL;
}

// Builds a module from `decls` (';'-separated "x : float[2, 3]" inputs) and one node line, runs
// the pass and returns the type of the node's first output, or "ERR: message".
static const char *infer(tmod *t, const char *decls, const char *node) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", decls);
    for (char *s = strtok(tmp, ";"); s; s = strtok(NULL, ";")) {
        t_in(t, s);
    }
    dl_ir_node *n = t_node(t, node);
    if (t->bad || !n) {
        return "BAD TEST";
    }
    dl_status st = t_run(t);
    if (st != DL_OK) {
        char *b = t->buf[t->bi++ % 8];
        snprintf(b, sizeof t->buf[0], "ERR: %s", t_msg(t, 0));
        return b;
    }
    return t_ty(t, n->outputs[0]->name);
}

// One-shot: fresh module, one node, compare with `want`.
#define CHECK_INFER(decls, node, want)                                                             \
    do {                                                                                           \
        tmod *t_ = t_new();                                                                        \
        const char *got_ = infer(t_, decls, node);                                                 \
        char gotc_[300];                                                                           \
        snprintf(gotc_, sizeof gotc_, "%s", got_);                                                 \
        t_free(t_);                                                                                \
        DL_CHECK_STR_EQ(gotc_, want);                                                              \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Elementwise

DL_TEST(shape_broadcast) {
    CHECK_INFER("x : float[4, 3]; y : float[3]", "z = Add (x, y)", "float[4, 3]");
    CHECK_INFER("x : float[4, 1]; y : float[1, 5]", "z = Mul (x, y)", "float[4, 5]");
    CHECK_INFER("x : float[2, 1, 3]; y : float[7, 1]", "z = Sub (x, y)", "float[2, 7, 3]");
    CHECK_INFER("x : float[]; y : float[2, 3]", "z = Div (x, y)", "float[2, 3]");
    CHECK_INFER("x : int64[5]; y : int64[5]", "z = Add (x, y)", "int64[5]");
    CHECK_INFER("x : float[4, 3]; y : float[5]", "z = Add (x, y)",
                "ERR: Add 'z': shapes are not broadcastable: [4, 3] and [5]");
    CHECK_INFER("x : float[3]; y : int64[3]", "z = Add (x, y)",
                "ERR: Add 'z': input types differ: float and int64");
    CHECK_INFER("x : bool[3]; y : bool[3]", "z = Add (x, y)",
                "ERR: Add 'z': input must be a numeric type, got bool");
}

DL_TEST(shape_broadcast_syms) {
    tmod *t = t_new();
    t_dim(t, "N", 8);
    t_dim(t, "C", 3);
    t_in(t, "x : float[N, 1]");
    t_in(t, "y : float[1, C]");
    t_in(t, "b : float[C]");
    t_in(t, "u : float[1, 3]");
    t_node(t, "z = Add (x, y)");
    t_node(t, "w = Add (u, b)"); // the literal 3 meets C: C's sym wins
    t_node(t, "v = Add (b, x)");
    DL_CHECK(!t->bad);
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "z"), "float[N, C]");
    DL_CHECK_STR_EQ(t_ty(t, "w"), "float[1, C]");
    DL_CHECK_STR_EQ(t_ty(t, "v"), "float[N, C]");
    t_free(t);
}

DL_TEST(shape_unary_dtypes) {
    CHECK_INFER("x : float16[2, 3]", "r = Relu (x)", "float16[2, 3]");
    CHECK_INFER("x : int64[2]", "r = Relu (x)",
                "ERR: Relu 'r': input must be a float type, got int64");
    CHECK_INFER("x : bool[2]", "r = Exp (x)", "ERR: Exp 'r': input must be a float type, got bool");
    CHECK_INFER("x : int32[2]", "r = Sqrt (x)",
                "ERR: Sqrt 'r': input must be a float type, got int32");
    CHECK_INFER("x : int32[2]", "r = Neg (x)", "int32[2]");
    CHECK_INFER("x : int64[2]", "r = Abs (x)", "int64[2]");
    CHECK_INFER("x : bool[2]", "r = Neg (x)",
                "ERR: Neg 'r': input must be a numeric type, got bool");
    CHECK_INFER("x : bfloat16[4]", "r = Gelu <approximate = tanh> (x)", "bfloat16[4]");
    CHECK_INFER("x : float[4]", "r = LeakyRelu <alpha = 0.2> (x)", "float[4]");
    CHECK_INFER("x : bool[4]", "r = Identity (x)", "bool[4]");
    CHECK_INFER("x : bool[4]", "r = Not (x)", "bool[4]");
    CHECK_INFER("x : float[4]", "r = Not (x)", "ERR: Not 'r': input must be bool, got float");
    CHECK_INFER("x : float[2, 3]", "r = Cast <to = int32> (x)", "int32[2, 3]");
    CHECK_INFER("x : bool[2, 3]", "r = Cast <to = bfloat16> (x)", "bfloat16[2, 3]");
}

DL_TEST(shape_compare_logic) {
    CHECK_INFER("x : float[2, 3]; y : float[3]", "r = Less (x, y)", "bool[2, 3]");
    CHECK_INFER("x : int64[2, 1]; y : int64[4]", "r = Greater (x, y)", "bool[2, 4]");
    CHECK_INFER("x : bool[2]; y : bool[2]", "r = Equal (x, y)", "bool[2]");
    CHECK_INFER("x : bool[2]; y : bool[2]", "r = Less (x, y)",
                "ERR: Less 'r': input must be a numeric type, got bool");
    CHECK_INFER("x : bool[2, 1]; y : bool[3]", "r = And (x, y)", "bool[2, 3]");
    CHECK_INFER("x : int32[2]; y : int32[2]", "r = Or (x, y)",
                "ERR: Or 'r': inputs must be bool, got int32");
    CHECK_INFER("c : bool[2, 1]; x : float[3]; y : float[]", "r = Where (c, x, y)", "float[2, 3]");
    CHECK_INFER("c : float[2]; x : float[2]; y : float[2]", "r = Where (c, x, y)",
                "ERR: Where 'r': condition must be bool, got float");
    CHECK_INFER("c : bool[2]; x : float[2]; y : int64[2]", "r = Where (c, x, y)",
                "ERR: Where 'r': input types differ: float and int64");
    CHECK_INFER("c : bool[2]; x : float[3]; y : float[2]", "r = Where (c, x, y)",
                "ERR: Where 'r': shapes are not broadcastable: [2], [3] and [2]");
}

DL_TEST(shape_variadic_pow_clip) {
    CHECK_INFER("a : float[3, 1]; b : float[4]; c : float[1, 1]", "r = Max (a, b, c)",
                "float[3, 4]");
    CHECK_INFER("a : int32[5]", "r = Min (a)", "int32[5]");
    CHECK_INFER("a : float[2]; b : float[2]; c : int32[2]", "r = Min (a, b, c)",
                "ERR: Min 'r': input types differ: float and int32");
    CHECK_INFER("x : float[2, 3]; e : int64[]", "r = Pow (x, e)", "float[2, 3]");
    CHECK_INFER("x : int32[3]; e : float16[3]", "r = Pow (x, e)", "int32[3]");
    CHECK_INFER("x : float[3]; e : bool[]", "r = Pow (x, e)",
                "ERR: Pow 'r': exponent must be a numeric type, got bool");
    CHECK_INFER("x : float[2, 3]; lo : float[]; hi : float[]", "r = Clip (x, lo, hi)",
                "float[2, 3]");
    CHECK_INFER("x : float[2, 3]; hi : float[]", "r = Clip (x, , hi)", "float[2, 3]");
    CHECK_INFER("x : float[2, 3]; lo : float[3]", "r = Clip (x, lo)",
                "ERR: Clip 'r': min must be a scalar, got shape [3]");
    CHECK_INFER("x : float[2, 3]; lo : int64[]", "r = Clip (x, lo)",
                "ERR: Clip 'r': min must have the input's type float, got int64");
}

// ---------------------------------------------------------------------------------------------
// Reductions

DL_TEST(shape_reduce) {
    CHECK_INFER("x : float[2, 3, 4]", "r = ReduceSum <axes = [1]> (x)", "float[2, 1, 4]");
    CHECK_INFER("x : float[2, 3, 4]", "r = ReduceMean <axes = [-1, 0], keepdims = 0> (x)",
                "float[3]");
    CHECK_INFER("x : float[2, 3, 4]", "r = ReduceMax (x)", "float[1, 1, 1]");
    CHECK_INFER("x : int64[2, 3, 4]", "r = ReduceMin <keepdims = 0> (x)", "int64[]");
    CHECK_INFER("x : float[2, 3, 4]", "r = ReduceSum <noop_with_empty_axes = 1> (x)",
                "float[2, 3, 4]");
    CHECK_INFER("x : float[2, 3]", "r = ReduceSum <axes = [2]> (x)",
                "ERR: ReduceSum 'r': axis 2 is out of range for rank 2");
    CHECK_INFER("x : float[2, 3]", "r = ReduceSum <axes = [1, -1]> (x)",
                "ERR: ReduceSum 'r': axis -1 is repeated in axes [1, -1]");
    CHECK_INFER("x : bool[2, 3]", "r = ReduceSum (x)",
                "ERR: ReduceSum 'r': input must be a numeric type, got bool");
    CHECK_INFER("x : float[2, 3, 4]", "r = ArgMax <axis = -1> (x)", "int64[2, 3, 1]");
    CHECK_INFER("x : int32[2, 3, 4]", "r = ArgMax <axis = 1, keepdims = 0> (x)", "int64[2, 4]");
    CHECK_INFER("x : float[2, 3]", "r = ArgMax <axis = -3> (x)",
                "ERR: ArgMax 'r': axis -3 is out of range for rank 2");
}

DL_TEST(shape_reduce_syms) {
    tmod *t = t_new();
    t_dim(t, "N", 5);
    t_in(t, "x : float[N, 7]");
    t_node(t, "r = ReduceSum <axes = [1]> (x)");
    t_node(t, "a = ArgMax <axis = 1, keepdims = 0> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "r"), "float[N, 1]");
    DL_CHECK_STR_EQ(t_ty(t, "a"), "int64[N]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

DL_TEST(shape_matmul) {
    CHECK_INFER("a : float[128, 768]; b : float[768, 10]", "y = MatMul (a, b)", "float[128, 10]");
    CHECK_INFER("a : float[128, 768]; b : float[512, 10]", "y = MatMul (a, b)",
                "ERR: MatMul 'y': inner dimensions differ: [128, 768] x [512, 10]");
    CHECK_INFER("a : float[3]; b : float[3]", "y = MatMul (a, b)", "float[]");
    CHECK_INFER("a : float[3]; b : float[2, 3, 4]", "y = MatMul (a, b)", "float[2, 4]");
    CHECK_INFER("a : float[2, 5, 3]; b : float[3]", "y = MatMul (a, b)", "float[2, 5]");
    CHECK_INFER("a : float[2, 1, 5, 3]; b : float[4, 3, 6]", "y = MatMul (a, b)",
                "float[2, 4, 5, 6]");
    CHECK_INFER("a : float[2, 5, 3]; b : float[4, 3, 6]", "y = MatMul (a, b)",
                "ERR: MatMul 'y': batch dimensions are not broadcastable: [2, 5, 3] x [4, 3, 6]");
    CHECK_INFER("a : int32[2, 3]; b : int32[3, 2]", "y = MatMul (a, b)", "int32[2, 2]");
    CHECK_INFER("a : float[2, 3]; b : float16[3, 2]", "y = MatMul (a, b)",
                "ERR: MatMul 'y': input types differ: float and float16");
    CHECK_INFER("a : float[]; b : float[3]", "y = MatMul (a, b)",
                "ERR: MatMul 'y': inputs must have rank >= 1: [] x [3]");
}

DL_TEST(shape_gemm) {
    CHECK_INFER("a : float[4, 3]; b : float[3, 5]; c : float[5]", "y = Gemm (a, b, c)",
                "float[4, 5]");
    CHECK_INFER("a : float[3, 4]; b : float[5, 3]", "y = Gemm <transA = 1, transB = 1> (a, b)",
                "float[4, 5]");
    CHECK_INFER("a : float[4, 3]; b : float[3, 5]; c : float[4, 1]", "y = Gemm (a, b, c)",
                "float[4, 5]");
    CHECK_INFER("a : float[4, 3]; b : float[3, 5]; c : float[]", "y = Gemm (a, b, c)",
                "float[4, 5]");
    CHECK_INFER("a : float[4, 3]; b : float[3, 5]; c : float[4]", "y = Gemm (a, b, c)",
                "ERR: Gemm 'y': C is not broadcastable to [4, 5]: [4]");
    CHECK_INFER("a : float[4, 3]; b : float[5, 3]", "y = Gemm (a, b)",
                "ERR: Gemm 'y': inner dimensions differ: [4, 3] x [5, 3]");
    CHECK_INFER("a : float[2, 4, 3]; b : float[3, 5]", "y = Gemm (a, b)",
                "ERR: Gemm 'y': A and B must have rank 2: [2, 4, 3] x [3, 5]");
}

DL_TEST(shape_gemm_syms) {
    tmod *t = t_new();
    t_dim(t, "N", 128);
    t_in(t, "x : float[N, 784]");
    t_param(t, "w : float[784, 256]");
    t_param(t, "b : float[256]");
    t_node(t, "h = Gemm (x, w, b)");
    t_node(t, "m = MatMul (x, w)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "h"), "float[N, 256]");
    DL_CHECK_STR_EQ(t_ty(t, "m"), "float[N, 256]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Convolutions and pools

DL_TEST(shape_conv) {
    const char *d = "x : float[2, 4, 28, 28]; w : float[8, 4, 3, 3]; b : float[8]";
    CHECK_INFER(d, "y = Conv (x, w, b)", "float[2, 8, 26, 26]");
    CHECK_INFER(d, "y = Conv <pads = [1, 1, 1, 1]> (x, w, b)", "float[2, 8, 28, 28]");
    CHECK_INFER(d, "y = Conv <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)",
                "float[2, 8, 14, 14]");
    CHECK_INFER(d, "y = Conv <dilations = [2, 2]> (x, w)", "float[2, 8, 24, 24]");
    CHECK_INFER(d, "y = Conv <strides = [3, 2], pads = [0, 1, 2, 0]> (x, w)",
                "float[2, 8, 10, 14]");
    CHECK_INFER(d, "y = Conv <auto_pad = SAME_UPPER, strides = [2, 2]> (x, w)",
                "float[2, 8, 14, 14]");
    CHECK_INFER("x : float[1, 1, 5, 7]; w : float[1, 1, 3, 3]",
                "y = Conv <auto_pad = SAME_LOWER, strides = [2, 3]> (x, w)", "float[1, 1, 3, 3]");
    CHECK_INFER(d, "y = Conv <auto_pad = VALID, strides = [2, 2]> (x, w)", "float[2, 8, 13, 13]");
    CHECK_INFER(d, "y = Conv <kernel_shape = [3, 3]> (x, w)", "float[2, 8, 26, 26]");
    CHECK_INFER(d, "y = Conv <kernel_shape = [2, 3]> (x, w)",
                "ERR: Conv 'y': kernel_shape [2, 3] does not match W [8, 4, 3, 3]");
    CHECK_INFER("x : float[2, 4, 9, 9]; w : float[6, 2, 3, 3]", "y = Conv <group = 2> (x, w)",
                "float[2, 6, 7, 7]");
    CHECK_INFER("x : float[2, 4, 9, 9]; w : float[4, 1, 3, 3]", "y = Conv <group = 4> (x, w)",
                "float[2, 4, 7, 7]");
    CHECK_INFER("x : float[2, 4, 9, 9]; w : float[6, 2, 3, 3]", "y = Conv <group = 3> (x, w)",
                "ERR: Conv 'y': group 3 does not divide the channels: X [2, 4, 9, 9], W [6, 2, "
                "3, 3]");
    CHECK_INFER("x : float[2, 4, 9, 9]; w : float[6, 3, 3, 3]", "y = Conv (x, w)",
                "ERR: Conv 'y': W expects 3 input channels, X has 4: X [2, 4, 9, 9], W [6, 3, 3, "
                "3]");
    CHECK_INFER("x : float[1, 1, 2, 2]; w : float[1, 1, 3, 3]", "y = Conv (x, w)",
                "ERR: Conv 'y': kernel [3, 3] (dilated [3, 3]) is larger than the padded input "
                "[2, 2]");
    CHECK_INFER("x : float[1, 1, 4, 4]; w : float[1, 1, 3, 3]",
                "y = Conv <dilations = [2, 1]> "
                "(x, w)",
                "ERR: Conv 'y': kernel [3, 3] (dilated [5, 3]) is larger than the padded input "
                "[4, 4]");
    CHECK_INFER("x : int64[1, 1, 4, 4]; w : int64[1, 1, 3, 3]", "y = Conv (x, w)",
                "ERR: Conv 'y': X must be a float type, got int64");
    CHECK_INFER("x : float[1, 4, 4]; w : float[1, 1, 3]", "y = Conv (x, w)",
                "ERR: Conv 'y': X must have rank 4 (N, C, H, W), got [1, 4, 4]");
    CHECK_INFER("x : float[1, 1, 4, 4]; w : float[2, 1, 3, 3]; b : float[3]", "y = Conv (x, w, b)",
                "ERR: Conv 'y': B must have shape [2], got [3]");
    CHECK_INFER(d, "y = Conv <strides = [1, 1, 1]> (x, w)",
                "ERR: Conv 'y': strides must have 2 entries, got 3");
}

DL_TEST(shape_conv_syms) {
    tmod *t = t_new();
    t_dim(t, "N", 64);
    t_dim(t, "M", 32);
    t_in(t, "x : float[N, 1, 28, 28]");
    t_param(t, "k : float[M, 1, 3, 3]");
    t_node(t, "c = Conv <pads = [1, 1, 1, 1]> (x, k)");
    t_node(t, "p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (c)");
    t_node(t, "g = GlobalAveragePool (p)");
    t_node(t, "f = Flatten (p)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "c"), "float[N, M, 28, 28]");
    DL_CHECK_STR_EQ(t_ty(t, "p"), "float[N, M, 14, 14]");
    DL_CHECK_STR_EQ(t_ty(t, "g"), "float[N, M, 1, 1]");
    DL_CHECK_STR_EQ(t_ty(t, "f"), "float[N, 6272]");
    t_free(t);
}

DL_TEST(shape_conv_transpose) {
    const char *d = "x : float[1, 4, 5, 5]; w : float[4, 3, 3, 3]";
    CHECK_INFER(d, "y = ConvTranspose (x, w)", "float[1, 3, 7, 7]");
    CHECK_INFER(d, "y = ConvTranspose <strides = [2, 2]> (x, w)", "float[1, 3, 11, 11]");
    CHECK_INFER(d, "y = ConvTranspose <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)",
                "float[1, 3, 9, 9]");
    CHECK_INFER(d, "y = ConvTranspose <strides = [2, 2], output_padding = [1, 0]> (x, w)",
                "float[1, 3, 12, 11]");
    CHECK_INFER(d, "y = ConvTranspose <strides = [3, 2], output_shape = [15, 10]> (x, w)",
                "float[1, 3, 15, 10]");
    CHECK_INFER(d, "y = ConvTranspose <auto_pad = SAME_UPPER, strides = [2, 2]> (x, w)",
                "float[1, 3, 10, 10]");
    CHECK_INFER(d, "y = ConvTranspose <dilations = [2, 2]> (x, w)", "float[1, 3, 9, 9]");
    CHECK_INFER(d, "y = ConvTranspose <group = 2> (x, w)", "float[1, 6, 7, 7]");
    CHECK_INFER("x : float[1, 4, 5, 5]; w : float[2, 3, 3, 3]", "y = ConvTranspose (x, w)",
                "ERR: ConvTranspose 'y': W expects 2 input channels, X has 4: X [1, 4, 5, 5], W "
                "[2, 3, 3, 3]");
    CHECK_INFER(d, "y = ConvTranspose <output_shape = [30, 10]> (x, w)", "float[1, 3, 30, 10]");
    CHECK_INFER(d, "y = ConvTranspose <output_shape = [30]> (x, w)",
                "ERR: ConvTranspose 'y': output_shape must have 2 entries, got 1");
    CHECK_INFER("x : float[1, 4, 5, 5]; w : float[4, 3, 3, 3]; b : float[6]",
                "y = ConvTranspose <group = 2> (x, w, b)", "float[1, 6, 7, 7]");
}

DL_TEST(shape_pool) {
    const char *d = "x : float[1, 3, 32, 32]";
    CHECK_INFER(d, "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)",
                "float[1, 3, 16, 16]");
    CHECK_INFER(d, "y = MaxPool <kernel_shape = [3, 3]> (x)", "float[1, 3, 30, 30]");
    CHECK_INFER(d, "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2]> (x)",
                "float[1, 3, 15, 15]");
    CHECK_INFER(d, "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1> (x)",
                "float[1, 3, 16, 16]");
    CHECK_INFER(d,
                "y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, "
                "1]> (x)",
                "float[1, 3, 16, 16]");
    CHECK_INFER(d,
                "y = AveragePool <kernel_shape = [5, 5], auto_pad = SAME_UPPER, strides = [3, "
                "3]> (x)",
                "float[1, 3, 11, 11]");
    CHECK_INFER(d,
                "y = AveragePool <kernel_shape = [5, 5], auto_pad = VALID, strides = [3, 3]> "
                "(x)",
                "float[1, 3, 10, 10]");
    CHECK_INFER(d, "y = MaxPool <kernel_shape = [2, 2], dilations = [2, 2]> (x)",
                "float[1, 3, 30, 30]");
    // ceil_mode: 4 + 2 end pad, kernel 3, stride 2 gives ceil(3/2) + 1 = 3 windows, but the
    // third would start at 4, inside the end padding, and is dropped. (The pads stay smaller
    // than the kernel, as pools require.)
    CHECK_INFER("x : float[1, 1, 4, 4]",
                "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 2, 2], "
                "ceil_mode = 1> (x)",
                "float[1, 1, 2, 2]");
    CHECK_INFER("x : float[1, 1, 6, 6]",
                "y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [0, 0, 1, 1], "
                "ceil_mode = 1> (x)",
                "float[1, 1, 3, 3]");
    CHECK_INFER("x : float[1, 1, 4, 4]",
                "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], "
                "ceil_mode = 1> (x)",
                "float[1, 1, 3, 3]");
    CHECK_INFER("x : float[1, 1, 2, 2]", "y = MaxPool <kernel_shape = [3, 3]> (x)",
                "ERR: MaxPool 'y': kernel [3, 3] (dilated [3, 3]) is larger than the padded input "
                "[2, 2]");
    CHECK_INFER("x : int32[1, 1, 4, 4]", "y = MaxPool <kernel_shape = [2, 2]> (x)",
                "ERR: MaxPool 'y': X must be a float type, got int32");
    CHECK_INFER("x : float[1, 3, 7, 9]", "y = GlobalAveragePool (x)", "float[1, 3, 1, 1]");
    CHECK_INFER("x : float[1, 3, 7, 9, 4]", "y = GlobalAveragePool (x)", "float[1, 3, 1, 1, 1]");
    CHECK_INFER("x : float[1, 3, 32]", "y = MaxPool <kernel_shape = [2]> (x)", "float[1, 3, 31]");
    CHECK_INFER("x : float[1, 3, 8, 8, 8]",
                "y = AveragePool <kernel_shape = [2, 2, 2], strides = [2, 2, 2]> (x)",
                "float[1, 3, 4, 4, 4]");
    CHECK_INFER("x : float[1, 3, 8, 8, 8]", "y = AveragePool <kernel_shape = [2, 2]> (x)",
                "ERR: AveragePool 'y': kernel_shape must have 3 entries, got 2");
    CHECK_INFER("x : float[3, 8]", "y = MaxPool <kernel_shape = [2]> (x)",
                "ERR: MaxPool 'y': X must have rank >= 3 (N, C, spatial...), got [3, 8]");

    tmod *t = t_new();
    t_in(t, "x : float[1, 3, 8, 8]");
    t_node(t, "y, idx = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[1, 3, 4, 4]");
    DL_CHECK_STR_EQ(t_ty(t, "idx"), "int64[1, 3, 4, 4]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Normalisation, softmax, dropout

DL_TEST(shape_norms) {
    tmod *t = t_new();
    t_dim(t, "N", 4);
    t_in(t, "x : float[N, 3, 5, 5]");
    t_param(t, "s : float[3]");
    t_param(t, "b : float[3]");
    t_param(t, "mu : float[3]");
    t_param(t, "var : float[3]");
    t_node(t, "y, rm, rv = BatchNormalization <training_mode = 1> (x, s, b, mu, var)");
    t_in(t, "h : float[N, 10, 64]");
    t_param(t, "g : float[64]");
    t_param(t, "g2 : float[10, 64]");
    t_node(t, "l, mean, isd = LayerNormalization (h, g, g)");
    t_node(t, "l2, mean2 = LayerNormalization <axis = 1> (h, g2)");
    DL_CHECK(!t->bad);
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[N, 3, 5, 5]");
    DL_CHECK_STR_EQ(t_ty(t, "rm"), "float[3]");
    DL_CHECK_STR_EQ(t_ty(t, "rv"), "float[3]");
    DL_CHECK_STR_EQ(t_ty(t, "l"), "float[N, 10, 64]");
    DL_CHECK_STR_EQ(t_ty(t, "mean"), "float[N, 10, 1]");
    DL_CHECK_STR_EQ(t_ty(t, "isd"), "float[N, 10, 1]");
    DL_CHECK_STR_EQ(t_ty(t, "mean2"), "float[N, 1, 1]");
    t_free(t);

    CHECK_INFER("x : float[2, 3]; s : float[4]; b : float[3]; m : float[3]; v : float[3]",
                "y = BatchNormalization (x, s, b, m, v)",
                "ERR: BatchNormalization 'y': scale must have shape [3] (the channels of X [2, "
                "3]), got [4]");
    CHECK_INFER("x : float[2, 8]; s : float[4]", "y = LayerNormalization (x, s)",
                "ERR: LayerNormalization 'y': Scale [4] is not broadcastable to the normalised "
                "shape [8]");
    CHECK_INFER("x : float[2, 8]; s : float[8]", "y = LayerNormalization <axis = 2> (x, s)",
                "ERR: LayerNormalization 'y': axis 2 is out of range for rank 2");
    CHECK_INFER("x : float16[2, 8]; s : float16[8]", "y = LayerNormalization <axis = -2> (x, s)",
                "float16[2, 8]");
    CHECK_INFER("x : float16[2, 8]; s : float16[3, 8]", "y = LayerNormalization <axis = -2> (x, s)",
                "ERR: LayerNormalization 'y': Scale [3, 8] is not broadcastable to the normalised "
                "shape [2, 8]");
    CHECK_INFER("x : float[2, 8]; s : float16[8]", "y = LayerNormalization (x, s)",
                "ERR: LayerNormalization 'y': input types differ: float and float16");
    CHECK_INFER("x : float16[2, 8]; s : float16[2, 8]", "y = LayerNormalization <axis = -2> (x, s)",
                "float16[2, 8]");
}

DL_TEST(shape_softmax_dropout) {
    CHECK_INFER("x : float[2, 10]", "y = Softmax (x)", "float[2, 10]");
    CHECK_INFER("x : float[2, 10]", "y = LogSoftmax <axis = 0> (x)", "float[2, 10]");
    CHECK_INFER("x : float[2, 10]", "y = Softmax <axis = 2> (x)",
                "ERR: Softmax 'y': axis 2 is out of range for rank 2");
    CHECK_INFER("x : int64[2, 10]", "y = Softmax (x)",
                "ERR: Softmax 'y': input must be a float type, got int64");
    CHECK_INFER("x : float[2, 10]", "y = Dropout <ratio = 0.1> (x)", "float[2, 10]");
    CHECK_INFER("x : float[2, 10]; r : float[]; tm : bool[]", "y = Dropout (x, r, tm)",
                "float[2, 10]");
    CHECK_INFER("x : float[2, 10]; r : float[]; tm : int64[]", "y = Dropout (x, r, tm)",
                "ERR: Dropout 'y': training_mode must be a bool scalar, got int64[]");

    tmod *t = t_new();
    t_in(t, "x : bfloat16[2, 10]");
    t_node(t, "y, mask = Dropout (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "bfloat16[2, 10]");
    DL_CHECK_STR_EQ(t_ty(t, "mask"), "bool[2, 10]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Shape ops

DL_TEST(shape_reshape) {
    const char *d = "x : float[2, 3, 4]";
    CHECK_INFER(d, "y = Reshape <shape = [6, 4]> (x)", "float[6, 4]");
    CHECK_INFER(d, "y = Reshape <shape = [0, -1]> (x)", "float[2, 12]");
    CHECK_INFER(d, "y = Reshape <shape = [-1]> (x)", "float[24]");
    CHECK_INFER(d, "y = Reshape <shape = [0, 0, 2, 2]> (x)", "float[2, 3, 2, 2]");
    CHECK_INFER("x : float[0, 3]", "y = Reshape <shape = [3, 0], allowzero = 1> (x)",
                "float[3, 0]");
    CHECK_INFER(d, "y = Reshape <shape = [-1, -1]> (x)",
                "ERR: Reshape 'y': shape [-1, -1] has more than one -1");
    CHECK_INFER(d, "y = Reshape <shape = [5, -1]> (x)",
                "ERR: Reshape 'y': cannot reshape [2, 3, 4] into [5, -1]");
    CHECK_INFER(d, "y = Reshape <shape = [5, 5]> (x)",
                "ERR: Reshape 'y': cannot reshape [2, 3, 4] (24 elements) into [5, 5] (25 "
                "elements)");
    CHECK_INFER(d, "y = Reshape <shape = [-2, 12]> (x)",
                "ERR: Reshape 'y': shape [-2, 12] has the invalid entry -2");
    CHECK_INFER("x : int64[6]", "y = Reshape <shape = [3, 2]> (x)", "int64[3, 2]");

    tmod *t = t_new();
    t_dim(t, "N", 8);
    t_in(t, "x : float[N, 3, 4]");
    t_node(t, "a = Reshape <shape = [0, -1]> (x)");
    t_node(t, "b = Reshape <shape = [N, 12]> (x)");
    t_node(t, "c = Reshape <shape = [-1, 4]> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "a"), "float[N, 12]");
    DL_CHECK_STR_EQ(t_ty(t, "b"), "float[N, 12]");
    DL_CHECK_STR_EQ(t_ty(t, "c"), "float[24, 4]");
    t_free(t);
}

DL_TEST(shape_transpose_flatten) {
    CHECK_INFER("x : float[2, 3, 4]", "y = Transpose (x)", "float[4, 3, 2]");
    CHECK_INFER("x : float[2, 3, 4]", "y = Transpose <perm = [0, 2, 1]> (x)", "float[2, 4, 3]");
    CHECK_INFER("x : float[2, 3, 4]", "y = Transpose <perm = [0, 0, 1]> (x)",
                "ERR: Transpose 'y': perm [0, 0, 1] is not a permutation of the 3 axes of [2, 3, "
                "4]");
    CHECK_INFER("x : float[2, 3, 4]", "y = Transpose <perm = [1, 0]> (x)",
                "ERR: Transpose 'y': perm [1, 0] is not a permutation of the 3 axes of [2, 3, 4]");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten (x)", "float[2, 60]");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten <axis = 0> (x)", "float[1, 120]");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten <axis = 4> (x)", "float[120, 1]");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten <axis = -2> (x)", "float[6, 20]");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten <axis = 5> (x)",
                "ERR: Flatten 'y': axis 5 is out of range for rank 4");
    CHECK_INFER("x : float[2, 3, 4, 5]", "y = Flatten <axis = -5> (x)",
                "ERR: Flatten 'y': axis -5 is out of range for rank 4");

    tmod *t = t_new();
    t_dim(t, "N", 8);
    t_dim(t, "T", 16);
    t_in(t, "x : float[N, T, 4]");
    t_node(t, "y = Transpose <perm = [1, 0, 2]> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[T, N, 4]");
    t_free(t);
}

DL_TEST(shape_concat) {
    CHECK_INFER("a : float[2, 3]; b : float[2, 5]", "c = Concat <axis = 1> (a, b)", "float[2, 8]");
    CHECK_INFER("a : float[2, 3]; b : float[4, 3]; d : float[1, 3]",
                "c = Concat <axis = -2> (a, b, d)", "float[7, 3]");
    CHECK_INFER("a : float[2, 3]; b : float[2, 3]", "c = Concat <axis = 3> (a, b)",
                "ERR: Concat 'c': axis 3 is out of range for rank 2");
    CHECK_INFER("a : float[2, 3]; b : float[4, 5]", "c = Concat <axis = 1> (a, b)",
                "ERR: Concat 'c': input shapes differ outside axis 1: [2, 3] and [4, 5]");
    CHECK_INFER("a : float[2, 3]; b : float[2, 3, 1]", "c = Concat <axis = 0> (a, b)",
                "ERR: Concat 'c': input shapes differ outside axis 0: [2, 3] and [2, 3, 1]");
    CHECK_INFER("a : float[2, 3]; b : int64[2, 3]", "c = Concat <axis = 0> (a, b)",
                "ERR: Concat 'c': input types differ: float and int64");

    tmod *t = t_new();
    t_dim(t, "N", 8);
    t_in(t, "a : float[N, 3]");
    t_in(t, "b : float[N, 5]");
    t_node(t, "c = Concat <axis = 1> (a, b)");
    t_node(t, "d = Concat <axis = 0> (a)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "c"), "float[N, 8]");
    DL_CHECK_STR_EQ(t_ty(t, "d"), "float[N, 3]");
    t_free(t);
}

DL_TEST(shape_split) {
    tmod *t = t_new();
    t_in(t, "x : float[6, 10]");
    t_node(t, "a, b = Split <axis = 1> (x)");
    t_node(t, "c, d, e = Split <split = [1, 2, 3]> (x)");
    t_node(t, "f, g, h = Split <axis = -1, num_outputs = 3> (x)");
    t_node(t, "i, j, k, l = Split <axis = 1, num_outputs = 4> (x)");
    DL_CHECK(!t->bad);
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "a"), "float[6, 5]");
    DL_CHECK_STR_EQ(t_ty(t, "b"), "float[6, 5]");
    DL_CHECK_STR_EQ(t_ty(t, "c"), "float[1, 10]");
    DL_CHECK_STR_EQ(t_ty(t, "d"), "float[2, 10]");
    DL_CHECK_STR_EQ(t_ty(t, "e"), "float[3, 10]");
    DL_CHECK_STR_EQ(t_ty(t, "f"), "float[6, 4]");
    DL_CHECK_STR_EQ(t_ty(t, "g"), "float[6, 4]");
    DL_CHECK_STR_EQ(t_ty(t, "h"), "float[6, 2]");
    DL_CHECK_STR_EQ(t_ty(t, "i"), "float[6, 3]");
    DL_CHECK_STR_EQ(t_ty(t, "l"), "float[6, 1]");
    t_free(t);

    CHECK_INFER("x : float[6, 10]", "a, b = Split <split = [2, 3]> (x)",
                "ERR: Split 'a': split [2, 3] sums to 5, but axis 0 of [6, 10] has size 6");
    CHECK_INFER("x : float[6, 10]", "a, b = Split <split = [6]> (x)",
                "ERR: Split 'a': split [6] has 1 entries for 2 outputs");
    CHECK_INFER("x : float[6, 10]", "a, b, c, d = Split (x)",
                "ERR: Split 'a': axis 0 of [6, 10] (size 6) does not split evenly into 4 outputs");
    CHECK_INFER("x : float[6, 10]", "a, b = Split <num_outputs = 3> (x)",
                "ERR: Split 'a': num_outputs is 3, but the node has 2 outputs");
    CHECK_INFER("x : float[5, 10]", "a, b, c, d = Split <num_outputs = 4> (x)",
                "ERR: Split 'a': axis 0 of [5, 10] (size 5) is too small for 4 outputs");
    CHECK_INFER("x : float[6, 10]", "a, b = Split <axis = 2> (x)",
                "ERR: Split 'a': axis 2 is out of range for rank 2");
}

DL_TEST(shape_slice) {
    const char *d = "x : float[10, 20]";
    CHECK_INFER(d, "y = Slice <starts = [2], ends = [7]> (x)", "float[5, 20]");
    CHECK_INFER(d, "y = Slice <starts = [0, 1], ends = [10, 20], steps = [1, 3]> (x)",
                "float[10, 7]");
    CHECK_INFER(d, "y = Slice <starts = [-3], ends = [100], axes = [1]> (x)", "float[10, 3]");
    CHECK_INFER(d, "y = Slice <starts = [-100], ends = [-2], axes = [-1]> (x)", "float[10, 18]");
    CHECK_INFER(d, "y = Slice <starts = [5], ends = [2]> (x)", "float[0, 20]");
    CHECK_INFER(d, "y = Slice <starts = [-1], ends = [-100], steps = [-1]> (x)", "float[10, 20]");
    CHECK_INFER(d, "y = Slice <starts = [8], ends = [1], steps = [-2]> (x)", "float[4, 20]");
    CHECK_INFER(d, "y = Slice <starts = [100], ends = [0], steps = [-3], axes = [1]> (x)",
                "float[10, 7]");
    CHECK_INFER(d, "y = Slice <starts = [0], ends = [-1], steps = [-1]> (x)", "float[0, 20]");
    // ONNX exporters write INT64_MAX / INT64_MIN for "to the end"; no overflow.
    CHECK_INFER(d,
                "y = Slice <starts = [0], ends = [9223372036854775807], steps = "
                "[9223372036854775807]> (x)",
                "float[1, 20]");
    CHECK_INFER(d,
                "y = Slice <starts = [-1], ends = [-9223372036854775807], steps = "
                "[-9223372036854775807]> (x)",
                "float[1, 20]");
    CHECK_INFER(d, "y = Slice <starts = [0], ends = [5], steps = [0]> (x)",
                "ERR: Slice 'y': steps must not be 0: [0]");
    CHECK_INFER(d, "y = Slice <starts = [0], ends = [5], axes = [2]> (x)",
                "ERR: Slice 'y': axis 2 is out of range for rank 2");
    CHECK_INFER(d, "y = Slice <starts = [0, 0], ends = [5, 5], axes = [1, -1]> (x)",
                "ERR: Slice 'y': axis -1 is repeated in axes [1, -1]");
    CHECK_INFER(d, "y = Slice <starts = [0, 0], ends = [5]> (x)",
                "ERR: Slice 'y': starts, ends, axes and steps must have the same length, got 2, "
                "1, 2 and 2");

    tmod *t = t_new();
    t_dim(t, "N", 8);
    t_in(t, "x : float[N, 20]");
    t_node(t, "y = Slice <starts = [1], ends = [5], axes = [1]> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[N, 4]");
    t_free(t);
}

DL_TEST(shape_gather) {
    CHECK_INFER("x : float[10, 20]; i : int64[3, 4]", "y = Gather (x, i)", "float[3, 4, 20]");
    CHECK_INFER("x : float[10, 20, 5]; i : int32[7]", "y = Gather <axis = -2> (x, i)",
                "float[10, 7, 5]");
    CHECK_INFER("x : float[10, 20]; i : int64[]", "y = Gather <axis = 1> (x, i)", "float[10]");
    CHECK_INFER("x : float[10, 20]; i : float[3]", "y = Gather (x, i)",
                "ERR: Gather 'y': indices must be int32 or int64, got float");
    CHECK_INFER("x : float[10, 20]; i : int64[3]", "y = Gather <axis = 2> (x, i)",
                "ERR: Gather 'y': axis 2 is out of range for rank 2");
}

DL_TEST(shape_squeeze_unsqueeze) {
    CHECK_INFER("x : float[1, 3, 1, 4]", "y = Squeeze (x)", "float[3, 4]");
    CHECK_INFER("x : float[1, 3, 1, 4]", "y = Squeeze <axes = [-2]> (x)", "float[1, 3, 4]");
    CHECK_INFER("x : float[1, 3, 1, 4]", "y = Squeeze <axes = [1]> (x)",
                "ERR: Squeeze 'y': cannot squeeze axis 1 of size 3: [1, 3, 1, 4]");
    CHECK_INFER("x : float[1, 3, 1, 4]", "y = Squeeze <axes = [4]> (x)",
                "ERR: Squeeze 'y': axis 4 is out of range for rank 4");
    CHECK_INFER("x : float[1]", "y = Squeeze (x)", "float[]");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [0]> (x)", "float[1, 3, 4]");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [-1]> (x)", "float[3, 4, 1]");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [0, 3]> (x)", "float[1, 3, 4, 1]");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [1, -2]> (x)", "float[3, 1, 1, 4]");
    CHECK_INFER("x : float[]", "y = Unsqueeze <axes = [0]> (x)", "float[1]");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [3]> (x)",
                "ERR: Unsqueeze 'y': axis 3 is out of range for rank 3");
    CHECK_INFER("x : float[3, 4]", "y = Unsqueeze <axes = [0, 0]> (x)",
                "ERR: Unsqueeze 'y': axis 0 is repeated in axes [0, 0]");
}

DL_TEST(shape_expand_pad) {
    CHECK_INFER("x : float[3, 1]", "y = Expand <shape = [2, 1, 6]> (x)", "float[2, 3, 6]");
    CHECK_INFER("x : float[3, 4]", "y = Expand <shape = [1]> (x)", "float[3, 4]");
    CHECK_INFER("x : float[3, 4]", "y = Expand <shape = [2, 4]> (x)",
                "ERR: Expand 'y': shapes are not broadcastable: [3, 4] and [2, 4]");
    CHECK_INFER("x : float[2, 3]", "y = Pad <pads = [1, 2, 3, 4]> (x)", "float[6, 9]");
    CHECK_INFER("x : float[5, 6]", "y = Pad <pads = [-1, 0, -2, 1]> (x)", "float[2, 7]");
    CHECK_INFER("x : int64[2, 3]; v : int64[]", "y = Pad <pads = [0, 1, 0, 1]> (x, v)",
                "int64[2, 5]");
    CHECK_INFER("x : float[2, 3]", "y = Pad <pads = [1, 1]> (x)",
                "ERR: Pad 'y': pads [1, 1] must have 4 entries for rank 2");
    CHECK_INFER("x : float[2, 3]", "y = Pad <pads = [-2, 0, -1, 0]> (x)",
                "ERR: Pad 'y': pads [-2, 0, -1, 0] remove more than the 2 elements of axis 0 of "
                "[2, 3]");
    CHECK_INFER("x : float[2, 3]; v : int64[]", "y = Pad <pads = [0, 1, 0, 1]> (x, v)",
                "ERR: Pad 'y': constant_value must be a scalar of the data's type float, got "
                "int64[]");

    tmod *t = t_new();
    t_dim(t, "N", 4);
    t_in(t, "x : float[N, 1]");
    t_in(t, "u : float[1, 5]");
    t_node(t, "y = Expand <shape = [N, 1]> (u)");
    t_node(t, "z = Pad <pads = [0, 1, 0, 1]> (x)");
    t_node(t, "w = Expand <shape = [3, 1, 1]> (x)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[N, 5]");
    DL_CHECK_STR_EQ(t_ty(t, "w"), "float[3, N, 1]");
    DL_CHECK_STR_EQ(t_ty(t, "z"), "float[N, 3]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Losses

DL_TEST(shape_losses) {
    CHECK_INFER("s : float[8, 10]; l : int64[8]", "y = SoftmaxCrossEntropyLoss (s, l)", "float[]");
    CHECK_INFER("s : float[8, 10]; l : int32[8]",
                "y = SoftmaxCrossEntropyLoss <reduction = none> (s, l)", "float[8]");
    CHECK_INFER("s : float[8, 10, 4, 5]; l : int64[8, 4, 5]; w : float[10]",
                "y = NegativeLogLikelihoodLoss <reduction = none> (s, l, w)", "float[8, 4, 5]");
    CHECK_INFER("s : float[8, 10, 4]; l : int64[8, 4]",
                "y = NegativeLogLikelihoodLoss <reduction = sum> (s, l)", "float[]");
    CHECK_INFER("s : float[8, 10]; l : float[8]", "y = SoftmaxCrossEntropyLoss (s, l)",
                "ERR: SoftmaxCrossEntropyLoss 'y': labels must be int32 or int64, got float");
    CHECK_INFER("s : float[8, 10]; l : int64[8, 10]", "y = SoftmaxCrossEntropyLoss (s, l)",
                "ERR: SoftmaxCrossEntropyLoss 'y': labels must have shape [8] for scores [8, 10], "
                "got [8, 10]");
    CHECK_INFER("s : float[8, 10]; l : int64[8]; w : float[8]",
                "y = SoftmaxCrossEntropyLoss (s, l, w)",
                "ERR: SoftmaxCrossEntropyLoss 'y': weights must have shape [10] (the classes of "
                "[8, 10]), got [8]");
    CHECK_INFER("s : int64[8, 10]; l : int64[8]", "y = SoftmaxCrossEntropyLoss (s, l)",
                "ERR: SoftmaxCrossEntropyLoss 'y': scores must be a float type, got int64");
    CHECK_INFER("s : float[8]; l : int64[8]", "y = NegativeLogLikelihoodLoss (s, l)",
                "ERR: NegativeLogLikelihoodLoss 'y': scores must have rank >= 2 (N, C, ...), got "
                "[8]");
    CHECK_INFER("a : float[4, 3]; b : float[4, 3]", "y = MeanSquaredError (a, b)", "float[]");
    CHECK_INFER("a : float16[4, 3]; b : float16[4, 3]",
                "y = MeanSquaredError <reduction = none> (a, b)", "float16[4, 3]");
    CHECK_INFER("a : float[4, 3]; b : float[3]", "y = MeanSquaredError (a, b)",
                "ERR: MeanSquaredError 'y': inputs must have the same shape: [4, 3] and [3]");
    CHECK_INFER("a : int64[4]; b : int64[4]", "y = MeanSquaredError (a, b)",
                "ERR: MeanSquaredError 'y': input must be a float type, got int64");

    tmod *t = t_new();
    t_dim(t, "N", 32);
    t_in(t, "s : float[N, 10]");
    t_in(t, "l : int64[N]");
    t_node(t, "loss, lp = SoftmaxCrossEntropyLoss <reduction = none> (s, l)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "loss"), "float[N]");
    DL_CHECK_STR_EQ(t_ty(t, "lp"), "float[N, 10]");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Driver behaviour: error recovery, rerun after binding a dim, consts, train block

DL_TEST(shape_continues_past_errors) {
    tmod *t = t_new();
    t_in(t, "x : float[4, 3]");
    t_in(t, "y : float[5]");
    t_in(t, "i : int64[4]");
    t_node(t, "a = Add (x, y)");  // error
    t_node(t, "b = Relu (a)");    // skipped silently
    t_node(t, "c = Relu (i)");    // second, independent error
    t_node(t, "d = Sigmoid (x)"); // fine
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_EQ_I64(dl_diags_count(t->d), 2);
    DL_CHECK_STR_EQ(t_msg(t, 0), "Add 'a': shapes are not broadcastable: [4, 3] and [5]");
    DL_CHECK_STR_EQ(t_msg(t, 1), "Relu 'c': input must be a float type, got int64");
    DL_CHECK_STR_EQ(t_ty(t, "a"), "?");
    DL_CHECK_STR_EQ(t_ty(t, "b"), "?");
    DL_CHECK_STR_EQ(t_ty(t, "d"), "float[4, 3]");
    t_free(t);
}

DL_TEST(shape_rerun_after_bind) {
    tmod *t = t_new();
    t_dim(t, "N", 4);
    t_in(t, "x : float[N, 3]");
    t_node(t, "y = Reshape <shape = [-1]> (x)");
    t_node(t, "z = Reshape <shape = [N, 3]> (y)");
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[12]");
    DL_CHECK_OK(dl_ir_module_bind_dim(t->m, "N", 10, t->d));
    DL_CHECK_OK(t_run(t));
    DL_CHECK_STR_EQ(t_ty(t, "y"), "float[30]");
    DL_CHECK_STR_EQ(t_ty(t, "z"), "float[N, 3]");
    DL_CHECK_EQ_I64(t->m->values.data[dl_ir_module_find(t->m, "z")->id]->type.dims[0].value, 10);
    t_free(t);
}

DL_TEST(shape_consts) {
    tmod *t = t_new();
    dl_ir_type ty = parse_type(t, "float[2, 3]");
    dl_ir_literal *ok = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 6);
    dl_ir_literal *splat = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 1);
    dl_ir_literal *bad = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 5);
    DL_CHECK(ok && splat && bad);
    splat->is_splat = true;
    dl_ir_value *v;
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c1", &ty, ok, DL_NO_LOC, &v));
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c2", &ty, splat, DL_NO_LOC, &v));
    DL_CHECK_OK(t_run(t));
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c3", &ty, bad, DL_NO_LOC, &v));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(t_msg(t, 0), "const 'c3': literal has 5 elements, but shape [2, 3] needs 6");
    t_free(t);
}

// ---------------------------------------------------------------------------------------------
// Size limits and overflow (DL_IR_MAX_TENSOR_BYTES): every declared value and every result is
// checked, and the arithmetic on attributes is checked, so nothing overflows int64 (the ASan +
// UBSan build turns an overflow into a failure) and each case is a located error.

// Runs one node over `decls` and copies the first diagnostic, whole, into buf ("" when the pass
// succeeded); returns the number of errors.
static size_t infer_err(const char *decls, const char *node, char *buf, size_t size) {
    tmod *t = t_new();
    const char *got = infer(t, decls, node);
    snprintf(buf, size, "%s", strcmp(got, "BAD TEST") == 0 ? got : t_msg(t, 0));
    size_t n = dl_diags_error_count(t->d);
    t_free(t);
    return n;
}

#define CHECK_ERR(decls, node, want)                                                               \
    do {                                                                                           \
        char msg_[1024];                                                                           \
        DL_CHECK_EQ_I64((int64_t)infer_err(decls, node, msg_, sizeof msg_), 1);                    \
        DL_CHECK_STR_EQ(msg_, want);                                                               \
    } while (0)

#define CHECK_ERR_HAS(decls, node, part)                                                           \
    do {                                                                                           \
        char msg_[1024];                                                                           \
        DL_CHECK_EQ_I64((int64_t)infer_err(decls, node, msg_, sizeof msg_), 1);                    \
        if (!strstr(msg_, part)) {                                                                 \
            fprintf(stderr, "message: %s\nlacks: %s\n", msg_, part);                               \
        }                                                                                          \
        DL_CHECK(strstr(msg_, part) != NULL);                                                      \
    } while (0)

DL_TEST(shape_limits_declared) {
    // Element count overflowing int64: reported once at the input, its users skipped quietly.
    CHECK_ERR("x : float[99999999999, 99999999999]", "y = Relu (x)",
              "input 'x': float[99999999999, 99999999999] is too large: its size overflows int64 "
              "(the limit for a tensor is 1099511627776 bytes, 1 TiB)");
    CHECK_ERR_HAS("x : float[4611686018427387904, 4611686018427387904, 4]", "y = Relu (x)",
                  "its size overflows int64");
    // No overflow, but 2^40 elements of 4 bytes.
    CHECK_ERR("x : float[1048576, 1048576]", "y = Relu (x)",
              "input 'x': float[1048576, 1048576] is too large: 1099511627776 elements of 4 bytes "
              "are 4398046511104 bytes, more than the limit of 1099511627776 bytes (1 TiB) for a "
              "tensor");
    // A zero-size tensor may not hide out-of-range dims (products of them must fit too).
    CHECK_ERR("x : float[0, 2199023255552]", "y = Relu (x)",
              "input 'x': float[0, 2199023255552] is too large: its non-zero dims span "
              "8796093022208 bytes, more than the limit of 1099511627776 bytes (1 TiB) for a "
              "tensor");
    // Exactly at the limit is fine: bool[2^20, 2^20] is 2^40 bytes, a zero-size one too.
    CHECK_INFER("x : bool[1048576, 1048576]", "y = Not (x)", "bool[1048576, 1048576]");
    CHECK_INFER("x : float[0, 274877906944]", "y = Relu (x)", "float[0, 274877906944]");

    // Params are checked like inputs, consts against the 256 MiB limit of materialised data.
    tmod *t = t_new();
    t_param(t, "w : float[1099511627776, 2]");
    dl_ir_type ty = parse_type(t, "float[100000000]");
    dl_ir_literal *splat = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 1);
    DL_CHECK(splat != NULL);
    splat->is_splat = true;
    dl_ir_value *v;
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c", &ty, splat, DL_NO_LOC, &v));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_EQ_I64((int64_t)dl_diags_error_count(t->d), 2);
    DL_CHECK_STR_EQ(t_msg(t, 0), "param 'w': float[1099511627776, 2] is too large: 2199023255552 "
                                 "elements of 4 bytes are 8796093022208 bytes, more than the "
                                 "limit of 1099511627776 bytes (1 TiB) for a tensor");
    DL_CHECK_STR_EQ(t_msg(t, 1), "const 'c': float[100000000] is too large: 100000000 elements "
                                 "of 4 bytes are 400000000 bytes, more than the limit of "
                                 "268435456 bytes (256 MiB) for a constant");
    t_free(t);
}

// Consts and splat-literal params are materialised by the compiler: together within 256 MiB.
static dl_ir_literal *splat(tmod *t, double v) {
    dl_ir_literal *l = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 1);
    if (!l) {
        abort();
    }
    l->is_splat = true;
    l->f[0] = v;
    return l;
}

DL_TEST(shape_limits_materialised_total) {
    tmod *t = t_new();
    dl_ir_type ty = parse_type(t, "float[33554432]"); // 128 MiB each: fine alone
    dl_ir_value *v;
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c1", &ty, splat(t, 1), DL_NO_LOC, &v));
    DL_CHECK_OK(t_run(t));
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c2", &ty, splat(t, 2), DL_NO_LOC, &v));
    DL_CHECK_OK(t_run(t)); // exactly 256 MiB
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "c3", &ty, splat(t, 3), DL_NO_LOC, &v));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(t_msg(t, 0), "const 'c3': float[33554432] would bring the model's "
                                 "materialised constants to 402653184 bytes, more than the "
                                 "limit of 268435456 bytes (256 MiB)");
    t_free(t);
    // A param initialised with one number is materialised too; constant(v) is not.
    t = t_new();
    ty = parse_type(t, "float[65536, 4096]");
    dl_ir_init *lit = dl_ir_module_new_init(t->m, DL_IR_INIT_LITERAL);
    dl_ir_init *fill = dl_ir_module_new_init(t->m, DL_IR_INIT_CONSTANT);
    DL_CHECK(lit && fill);
    lit->lit = splat(t, 0.5);
    fill->a = 0.5;
    DL_CHECK_OK(dl_ir_module_add_param(t->m, "b", &ty, fill, DL_NO_LOC, &v));
    DL_CHECK_OK(t_run(t));
    DL_CHECK_OK(dl_ir_module_add_param(t->m, "w", &ty, lit, DL_NO_LOC, &v));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(t_msg(t, 0), "param 'w': the single-number literal initialising float[65536, "
                                 "4096] would bring the model's materialised constants to "
                                 "1073741824 bytes, more than the limit of 268435456 bytes (256 "
                                 "MiB); constant(v) fills a param at run time instead");
    t_free(t);
}

// dl_ir_verify is the backstop for modules that skipped the shape pass.
DL_TEST(shape_limits_verify) {
    tmod *t = t_new();
    t_in(t, "x : float[1099511627776, 1099511627776]");
    DL_CHECK_EQ_I64(dl_ir_verify(t->m, t->d), DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(t_msg(t, 0), "verify: 'x': float[1099511627776, 1099511627776] is too large: "
                                 "its size overflows int64 (the limit for a tensor is "
                                 "1099511627776 bytes, 1 TiB)");
    t_free(t);
}

DL_TEST(shape_limits_results) {
    CHECK_ERR("x : bool[1048576, 1048576]", "y = Cast <to = float> (x)",
              "Cast 'y': result 'y' float[1048576, 1048576] is too large: 1099511627776 "
              "elements of 4 bytes are 4398046511104 bytes, more than the limit of "
              "1099511627776 bytes (1 TiB) for a tensor");
    CHECK_ERR_HAS("a : float[1048576, 1]; b : float[1, 1048576]", "y = MatMul (a, b)",
                  "MatMul 'y': result 'y' float[1048576, 1048576] is too large");
    // MatMul's batch dims broadcast to 2^40 elements.
    CHECK_ERR_HAS("a : float[1048576, 1, 1, 1]; b : float[1, 1048576, 1, 1]", "y = MatMul (a, b)",
                  "MatMul 'y': result 'y' float[1048576, 1048576, 1, 1] is too large");
    CHECK_ERR_HAS("x : float[1]", "y = Expand <shape = [4611686018427387904]> (x)",
                  "Expand 'y': result 'y' float[4611686018427387904] is too large: its size "
                  "overflows int64");
    CHECK_ERR_HAS("x : float[0]", "y = Reshape <shape = [0, 2199023255552], allowzero = 1> (x)",
                  "Reshape 'y': result 'y' float[0, 2199023255552] is too large");
    CHECK_ERR_HAS("x : float[2]",
                  "y = Reshape <shape = [4611686018427387904, 4611686018427387904]> (x)",
                  "has too many elements");
    CHECK_ERR_HAS("x : float[137438953472]", "y = Concat <axis = 0> (x, x, x, x, x, x, x, x, x)",
                  "Concat 'y': result 'y' float[1236950581248] is too large");
    // Pad: pads near INT64_MAX overflow; large ones give a result over the limit.
    CHECK_ERR("x : float[3]", "y = Pad <pads = [9223372036854775807, 1]> (x)",
              "Pad 'y': pads [9223372036854775807, 1] overflow int64 on axis 0 of [3]");
    CHECK_ERR_HAS("x : float[3]", "y = Pad <pads = [2199023255552, 0]> (x)",
                  "Pad 'y': result 'y' float[2199023255555] is too large");
    // Split sizes whose sum overflows.
    CHECK_ERR_HAS("x : float[4]",
                  "a, b, c = Split <split = [9223372036854775807, 9223372036854775807, 2]> (x)",
                  "sums to more than int64 holds");
    CHECK_ERR_HAS("x : float[4]", "a, b = Split <split = [6, -2]> (x)",
                  "split [6, -2] has the negative entry -2");
    // reflect / edge / wrap have nothing to pad an empty axis with (found by a fuzzer: check
    // passed, the evaluator and codegen refused).
    CHECK_ERR("x : float[0, 3]", "y = Pad <pads = [1, 0, 0, 0], mode = reflect> (x)",
              "Pad 'y': reflect padding of the empty axis 0 of [0, 3]");
    CHECK_INFER("x : float[0, 3]", "y = Pad <pads = [1, 0, 0, 0], mode = constant> (x)",
                "float[1, 3]");
    CHECK_INFER("x : float[0, 3]", "y = Pad <pads = [0, 1, 0, 1], mode = edge> (x)", "float[0, 5]");
    CHECK_ERR("x : float[0, 3]; i : int64[2]", "y = Gather <axis = 0> (x, i)",
              "Gather 'y': cannot gather [2] indices from the empty axis 0 of [0, 3]");
    CHECK_INFER("x : float[0, 3]; i : int64[0]", "y = Gather <axis = 0> (x, i)", "float[0, 3]");
}

DL_TEST(shape_limits_conv_geometry) {
    const char *xw = "x : float[1, 1, 5, 5]; w : float[1, 1, 3, 3]";
    // A huge stride is valid (one window); huge dilations or pads overflow int64.
    CHECK_INFER(xw, "y = Conv <strides = [9223372036854775807, 1]> (x, w)", "float[1, 1, 1, 3]");
    CHECK_ERR(xw, "y = Conv <dilations = [9223372036854775807, 1]> (x, w)",
              "Conv 'y': kernel [3, 3] with dilations [9223372036854775807, 1] and pads [0, 0, 0, "
              "0] overflows int64 for the input [1, 1, 5, 5]");
    CHECK_ERR_HAS(xw, "y = Conv <pads = [9223372036854775807, 0, 9223372036854775807, 0]> (x, w)",
                  "overflows int64 for the input [1, 1, 5, 5]");
    CHECK_ERR_HAS(xw, "y = Conv <pads = [2305843009213693952, 0, 2305843009213693952, 0]> (x, w)",
                  "Conv 'y': result 'y' float[1, 1, 4611686018427387907, 3] is too large");
    CHECK_INFER(xw, "y = Conv <auto_pad = SAME_UPPER, strides = [9223372036854775807, 1]> (x, w)",
                "float[1, 1, 1, 5]");
    // group near INT64_MAX: channels per group times group overflows.
    CHECK_ERR("x : float[1, 0, 5, 5]; w : float[0, 2, 3, 3]",
              "y = Conv <group = 9223372036854775807> (x, w)",
              "Conv 'y': group 9223372036854775807 times W's 2 channels overflows int64: X [1, 0, "
              "5, 5], W [0, 2, 3, 3]");
    // Modules built in code skip the frontend's attribute checks: the rule checks them too.
    CHECK_ERR(xw, "y = Conv <strides = [0, 1]> (x, w)", "Conv 'y': strides [0, 1] must be >= 1");
    CHECK_ERR(xw, "y = Conv <dilations = [1, -3]> (x, w)",
              "Conv 'y': dilations [1, -3] must be >= 1");
    CHECK_ERR(xw, "y = Conv <pads = [0, -1, 0, 0]> (x, w)",
              "Conv 'y': pads [0, -1, 0, 0] must be >= 0");
    CHECK_ERR("x : float[1, 1, 5, 5]; w : float[1, 1, 0, 3]", "y = Conv (x, w)",
              "Conv 'y': kernel [0, 3] must be >= 1 in every spatial dim");
    CHECK_ERR("x : float[1, 1, 5, 5]", "y = MaxPool <kernel_shape = [2, 0]> (x)",
              "MaxPool 'y': kernel [2, 0] must be >= 1 in every spatial dim");
    CHECK_ERR_HAS("x : float[1, 1, 5, 5]",
                  "y = MaxPool <kernel_shape = [4611686018427387904, 2], dilations = [3, 1]> (x)",
                  "overflows int64");
}

DL_TEST(shape_limits_conv_transpose) {
    const char *xw = "x : float[1, 1, 5, 5]; w : float[1, 1, 3, 3]";
    CHECK_ERR_HAS(xw, "y = ConvTranspose <output_shape = [1099511627776, 1099511627776]> (x, w)",
                  "ConvTranspose 'y': result 'y' float[1, 1, 1099511627776, 1099511627776] is too "
                  "large");
    CHECK_ERR(xw, "y = ConvTranspose <strides = [4611686018427387904, 1]> (x, w)",
              "ConvTranspose 'y': strides [4611686018427387904, 1], dilations [1, 1] and "
              "output_padding [0, 0] overflow int64 for the input [1, 1, 5, 5] and kernel [3, 3]");
    CHECK_ERR_HAS(xw,
                  "y = ConvTranspose <auto_pad = SAME_UPPER, strides = [2305843009213693952, 1]> "
                  "(x, w)",
                  "overflow int64 for the input [1, 1, 5, 5]");
    CHECK_ERR_HAS(xw, "y = ConvTranspose <dilations = [9223372036854775807, 1]> (x, w)",
                  "overflow int64");
    CHECK_ERR_HAS("x : float[1, 0, 5, 5]; w : float[0, 2, 3, 3]",
                  "y = ConvTranspose <group = 9223372036854775807> (x, w)",
                  "times W's 2 channels overflows int64");
    // output_padding must be smaller than the stride or the dilation (ONNX, PyTorch).
    CHECK_ERR(xw, "y = ConvTranspose <strides = [2, 2], output_padding = [2, 0]> (x, w)",
              "ConvTranspose 'y': output_padding [2, 0] must be >= 0 and smaller than strides "
              "[2, 2] or dilations [1, 1]");
    CHECK_ERR_HAS(xw, "y = ConvTranspose <output_padding = [1, 0]> (x, w)",
                  "output_padding [1, 0] must be >= 0 and smaller than strides [1, 1]");
    CHECK_INFER(xw, "y = ConvTranspose <dilations = [2, 1], output_padding = [1, 0]> (x, w)",
                "float[1, 1, 10, 7]");
    CHECK_INFER(xw, "y = ConvTranspose <strides = [2, 2], output_padding = [1, 1]> (x, w)",
                "float[1, 1, 12, 12]");
}

DL_TEST(shape_limits_attr_ranges) {
    // Pools: explicit pads must be smaller than the kernel (no window wholly in padding).
    CHECK_ERR("x : float[1, 1, 5, 5]",
              "y = MaxPool <kernel_shape = [2, 2], pads = [2, 2, 2, 2]> (x)",
              "MaxPool 'y': pads [2, 2, 2, 2] must be smaller than the kernel [2, 2]");
    CHECK_ERR("x : float[1, 1, 5, 5]",
              "y = AveragePool <kernel_shape = [3, 3], pads = [0, 0, 3, 0]> (x)",
              "AveragePool 'y': pads [0, 0, 3, 0] must be smaller than the kernel [3, 3]");
    CHECK_INFER("x : float[1, 1, 5, 5]",
                "y = AveragePool <kernel_shape = [3, 3], pads = [2, 2, 2, 2]> (x)",
                "float[1, 1, 7, 7]");
    // Dropout's ratio in [0, 1), as an attribute or a constant input.
    CHECK_ERR("x : float[4]", "y = Dropout <ratio = 1.5> (x)",
              "Dropout 'y': ratio must be in [0, 1), got 1.5");
    CHECK_ERR("x : float[4]", "y = Dropout <ratio = 1> (x)",
              "Dropout 'y': ratio must be in [0, 1), got 1.0");
    CHECK_ERR("x : float[4]", "y = Dropout <ratio = -0.25> (x)",
              "Dropout 'y': ratio must be in [0, 1), got -0.25");
    CHECK_ERR("x : float[4]", "y = Dropout <ratio = nan> (x)",
              "Dropout 'y': ratio must be in [0, 1), got nan");
    CHECK_INFER("x : float[4]", "y = Dropout <ratio = 0> (x)", "float[4]");
    tmod *t = t_new();
    t_in(t, "x : float[4]");
    dl_ir_type sc = {.dtype = DL_DT_FLOAT, .rank = 0};
    dl_ir_literal *one = dl_ir_module_new_literal(t->m, DL_DT_FLOAT, 1);
    DL_CHECK(one != NULL);
    one->f[0] = 1.0;
    dl_ir_value *r;
    DL_CHECK_OK(dl_ir_module_add_const(t->m, "r", &sc, one, DL_NO_LOC, &r));
    t_node(t, "y = Dropout (x, r)");
    DL_CHECK(!t->bad);
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(t_msg(t, 0), "Dropout 'y': ratio must be in [0, 1), got 1.0");
    t_free(t);
    // Normalisation epsilon: finite and >= 0.
    CHECK_ERR("x : float[2, 3]; s : float[3]", "y = LayerNormalization <epsilon = -0.001> (x, s)",
              "LayerNormalization 'y': epsilon must be finite and >= 0, got -0.001");
    CHECK_ERR("x : float[2, 3]; s : float[3]; b : float[3]; m : float[3]; v : float[3]",
              "y = BatchNormalization <epsilon = inf> (x, s, b, m, v)",
              "BatchNormalization 'y': epsilon must be finite and >= 0, got inf");
}

DL_TEST(shape_limits_bind_dim) {
    tmod *t = t_new();
    t_dim(t, "N", 4);
    t_in(t, "x : float[N, 1024]");
    t_node(t, "y = Relu (x)");
    DL_CHECK_EQ_I64(dl_ir_module_bind_dim(t->m, "N", INT64_C(1) << 41, t->d), DL_ERR_INVALID_ARG);
    DL_CHECK_STR_EQ(t_msg(t, 0), "-D N=2199023255552: a dim must be at most 1099511627776 (2^40)");
    dl_diags_clear(t->d);
    // Within the dim bound, but x would be 2^40 * 1024 * 4 bytes.
    DL_CHECK_OK(dl_ir_module_bind_dim(t->m, "N", INT64_C(1) << 40, t->d));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_EQ_I64((int64_t)dl_diags_error_count(t->d), 1);
    DL_CHECK_STR_EQ(t_msg(t, 0), "input 'x': float[1099511627776, 1024] is too large: "
                                 "1125899906842624 elements of 4 bytes are 4503599627370496 "
                                 "bytes, more than the limit of 1099511627776 bytes (1 TiB) for "
                                 "a tensor");
    DL_CHECK_STR_EQ(t_ty(t, "y"), "?");
    t_free(t);
}

DL_TEST(shape_train_block) {
    tmod *t = t_new();
    t_in(t, "x : float[4, 3]");
    t_param(t, "w : float[3, 2]");
    t_node(t, "y = MatMul (x, w)");
    t_node(t, "s = ReduceSum <keepdims = 0> (y)");
    dl_ir_train *tr = DL_ARENA_NEW(&t->m->arena, dl_ir_train);
    DL_CHECK(tr != NULL);
    tr->loc = (dl_src_loc){0, 0, 0, 0};
    tr->loss = dl_ir_module_find(t->m, "s");
    DL_CHECK_OK(dl_ir_module_set_train(t->m, tr));
    DL_CHECK_OK(t_run(t));

    tr->loss = dl_ir_module_find(t->m, "y");
    dl_ir_value *fr[2] = {dl_ir_module_find(t->m, "w"), dl_ir_module_find(t->m, "x")};
    tr->freeze = fr;
    tr->n_freeze = 2;
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_EQ_I64(dl_diags_count(t->d), 2);
    DL_CHECK_STR_EQ(t_msg(t, 0), "train: the loss 'y' must be a float scalar, got float[4, 2]");
    DL_CHECK_STR_EQ(t_msg(t, 1), "train: freeze entry 'x' is not a param");
    t_free(t);

    t = t_new();
    t_in(t, "l : int64[]");
    tr = DL_ARENA_NEW(&t->m->arena, dl_ir_train);
    DL_CHECK(tr != NULL);
    tr->loss = dl_ir_module_find(t->m, "l");
    DL_CHECK_OK(dl_ir_module_set_train(t->m, tr));
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    DL_CHECK_STR_EQ(t_msg(t, 0), "train: the loss 'l' must be a float scalar, got int64[]");
    t_free(t);
}

DL_TEST(shape_rendered_messages) {
    tmod *t = t_new();
    t_in(t, "x : float[128, 768]");
    t_in(t, "w : float[512, 10]");
    t_in(t, "a : float[2, 3]");
    t_in(t, "b : float[2, 3]");
    t_node(t, "y = MatMul (x, w)");
    t_node(t, "c = Concat <axis = 3> (a, b)");
    t_node(t, "r = Relu (y)");
    DL_CHECK_EQ_I64(t_run(t), DL_ERR_SHAPE);
    char *s = t_render(t);
    DL_CHECK_STR_EQ(s, "t.dlg:1:5: error: MatMul 'y': inner dimensions differ: [128, 768] x "
                       "[512, 10]\n"
                       "    1 | y = MatMul (x, w)\n"
                       "      |     ^~~~~~\n"
                       "t.dlg:2:5: error: Concat 'c': axis 3 is out of range for rank 2\n"
                       "    2 | c = Concat <axis = 3> (a, b)\n"
                       "      |     ^~~~~~\n");
    free(s);
    t_free(t);
}

DL_TEST_MAIN()
