// ir/ir_verify.c — structural checks of a module, run after the frontend and after every pass
// (QBE's ssacheck, Glow's verify()).
//
// It checks the invariants listed at the top of dl_ir.h plus the op table's contracts: ids match
// positions; NODE values point back at their producing node; arities within the op table's
// bounds with required inputs present; attributes known to the op, of the right kind, within
// range, required ones present; every use after its definition (node ids and statement order);
// outputs and their is_output flags agree; dims referenced by types are bound consistently; the
// train block names a loss value of the module and only params in `freeze`. Every problem is a
// diagnostic starting "verify: " at the closest location; nothing is repaired.
#include "dl_ir.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct vctx {
    const dl_ir_module *m;
    dl_diags *d;
    size_t n_errors;
} vctx;

static void fail(vctx *c, dl_src_loc loc, const char *fmt, ...) DL_PRINTF(3, 4);
static void fail(vctx *c, dl_src_loc loc, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    dl_diag(c->d, DL_SEV_ERROR, loc, "verify: %s", msg);
    c->n_errors++;
}

// True when `v` is the module's value with its id (not a stray pointer from another module).
static bool owns(const dl_ir_module *m, const dl_ir_value *v) {
    return v && v->id < m->values.len && m->values.data[v->id] == v;
}

static const char *vname(const dl_ir_value *v) {
    return v && v->name ? v->name : "?";
}

// Membership bits per value id, so the list checks stay linear on models with many params.
enum { IN_INPUTS = 1, IN_PARAMS = 2, IN_CONSTS = 4, IN_OUTPUTS = 8, SEEN_OUTPUT = 16 };

static void mark_list(const dl_ir_module *m, uint8_t *bits, dl_ir_value *const *xs, size_t n,
                      uint8_t bit) {
    for (size_t i = 0; i < n; i++) {
        if (owns(m, xs[i])) {
            bits[xs[i]->id] |= bit;
        }
    }
}

static void check_type_dims(vctx *c, const dl_ir_value *v) {
    const dl_ir_type *t = &v->type;
    if (t->rank > DL_MAX_RANK || (t->rank < 0 && v->kind != DL_IR_VAL_NODE)) {
        fail(c, v->loc, "'%s' has invalid rank %d", vname(v), t->rank);
        return;
    }
    if ((unsigned)t->dtype >= DL_DT_COUNT) {
        fail(c, v->loc, "'%s' has invalid dtype %d", vname(v), (int)t->dtype);
    }
    for (int32_t i = 0; i < t->rank; i++) {
        const dl_ir_dim *dm = &t->dims[i];
        if (dm->sym >= 0) {
            if ((size_t)dm->sym >= c->m->dims.len) {
                fail(c, v->loc, "'%s' dim %d refers to unknown dim #%d", vname(v), i, dm->sym);
            } else if (v->kind != DL_IR_VAL_NODE && c->m->dims.data[dm->sym].value != dm->value) {
                fail(c, v->loc, "'%s' dim %d is %" PRId64 " but dim %s is bound to %" PRId64,
                     vname(v), i, dm->value, c->m->dims.data[dm->sym].name,
                     c->m->dims.data[dm->sym].value);
            }
        }
        if (dm->value < 0) { // zero-size tensors are valid (ONNX has them); negative never
            fail(c, v->loc, "'%s' dim %d has invalid size %" PRId64, vname(v), i, dm->value);
            return;
        }
    }
    // The size limits every later stage relies on (no int64 overflow in shape arithmetic,
    // codegen or the runtime's plan): dl_pass_shape reports them, this is the backstop.
    char why[600];
    bool is_const = v->kind == DL_IR_VAL_CONST;
    if (t->rank >= 0 &&
        !dl_ir_type_check_limit(t, is_const ? DL_IR_MAX_CONST_BYTES : DL_IR_MAX_TENSOR_BYTES,
                                is_const ? "a constant" : "a tensor", why, sizeof why)) {
        fail(c, v->loc, "'%s': %s", vname(v), why);
    }
}

static void check_values(vctx *c) {
    const dl_ir_module *m = c->m;
    uint8_t *bits = dl_mem_calloc(m->values.len ? m->values.len : 1, 1);
    if (!bits) {
        fail(c, DL_NO_LOC, "out of memory");
        return;
    }
    mark_list(m, bits, m->inputs.data, m->inputs.len, IN_INPUTS);
    mark_list(m, bits, m->params.data, m->params.len, IN_PARAMS);
    mark_list(m, bits, m->consts.data, m->consts.len, IN_CONSTS);
    mark_list(m, bits, m->outputs.data, m->outputs.len, IN_OUTPUTS);
    for (size_t i = 0; i < m->values.len; i++) {
        const dl_ir_value *v = m->values.data[i];
        if (!v) {
            fail(c, DL_NO_LOC, "value #%zu is NULL", i);
            continue;
        }
        if (v->id != i) {
            fail(c, v->loc, "value '%s' at position %zu has id %" PRIu32, vname(v), i, v->id);
        }
        if (!v->name || !*v->name) {
            fail(c, v->loc, "value #%zu has no name", i);
        } else if (dl_ir_module_find(m, v->name) != v) {
            fail(c, v->loc, "value '%s' is not found under its name", v->name);
        }
        switch (v->kind) {
        case DL_IR_VAL_INPUT:
            if (!(bits[i] & IN_INPUTS)) {
                fail(c, v->loc, "input '%s' is missing from the module's inputs", vname(v));
            }
            break;
        case DL_IR_VAL_PARAM:
            if (!(bits[i] & IN_PARAMS)) {
                fail(c, v->loc, "param '%s' is missing from the module's params", vname(v));
            }
            if (!v->init) {
                fail(c, v->loc, "param '%s' has no initialiser", vname(v));
            } else if (v->init->kind == DL_IR_INIT_LITERAL &&
                       (!v->init->lit || (!v->init->lit->is_splat &&
                                          v->init->lit->n != dl_ir_type_numel(&v->type)))) {
                fail(c, v->loc, "param '%s' literal does not match its %" PRId64 " elements",
                     vname(v), dl_ir_type_numel(&v->type));
            } else if (v->init->kind == DL_IR_INIT_FILE && (!v->init->path || !v->init->tensor)) {
                fail(c, v->loc, "param '%s' file initialiser lacks a path or tensor", vname(v));
            }
            break;
        case DL_IR_VAL_CONST:
            if (!(bits[i] & IN_CONSTS)) {
                fail(c, v->loc, "const '%s' is missing from the module's consts", vname(v));
            }
            if (!v->lit) {
                fail(c, v->loc, "const '%s' has no literal", vname(v));
            } else if (v->lit->is_splat ? v->lit->n != 1
                                        : v->lit->n != dl_ir_type_numel(&v->type)) {
                fail(c, v->loc, "const '%s' literal has %" PRId64 " values, type needs %" PRId64,
                     vname(v), v->lit->n, dl_ir_type_numel(&v->type));
            }
            break;
        case DL_IR_VAL_NODE:
            if (!v->def || v->def->id >= m->nodes.len || m->nodes.data[v->def->id] != v->def) {
                fail(c, v->loc, "value '%s' has no producing node in the module", vname(v));
            } else if (v->def_out >= v->def->n_outputs || v->def->outputs[v->def_out] != v) {
                fail(c, v->loc, "value '%s' is not output %" PRIu32 " of its node", vname(v),
                     v->def_out);
            }
            break;
        default:
            fail(c, v->loc, "value '%s' has invalid kind %d", vname(v), (int)v->kind);
            break;
        }
        check_type_dims(c, v);
        if (v->is_output && !(bits[i] & IN_OUTPUTS)) {
            fail(c, v->loc, "'%s' is marked as an output but is not in the module's outputs",
                 vname(v));
        }
    }
    // The per-kind lists hold module values of that kind, once each.
    struct {
        const char *what;
        dl_ir_value *const *xs;
        size_t n;
        dl_ir_value_kind kind;
    } lists[] = {
        {"input", m->inputs.data, m->inputs.len, DL_IR_VAL_INPUT},
        {"param", m->params.data, m->params.len, DL_IR_VAL_PARAM},
        {"const", m->consts.data, m->consts.len, DL_IR_VAL_CONST},
    };
    for (size_t l = 0; l < DL_ARRAY_LEN(lists); l++) {
        for (size_t i = 0; i < lists[l].n; i++) {
            const dl_ir_value *v = lists[l].xs[i];
            if (!owns(m, v) || v->kind != lists[l].kind) {
                fail(c, v ? v->loc : DL_NO_LOC,
                     "%s list entry %zu ('%s') is not a %s of the module", lists[l].what, i,
                     vname(v), lists[l].what);
            }
        }
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        const dl_ir_value *v = m->outputs.data[i];
        if (!owns(m, v)) {
            fail(c, DL_NO_LOC, "output %zu ('%s') is not a value of the module", i, vname(v));
            continue;
        }
        if (!v->is_output) {
            fail(c, v->loc, "output '%s' is not marked is_output", vname(v));
        }
        if (bits[v->id] & SEEN_OUTPUT) {
            fail(c, v->loc, "'%s' is listed as an output twice", vname(v));
        }
        bits[v->id] |= SEEN_OUTPUT;
    }
    free(bits);
}

// ---------------------------------------------------------------------------------------------
// Attributes

static bool in_choices(const char *choices, const char *s) {
    size_t n = strlen(s);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0) {
            return true;
        }
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

// The frontend coerces these spellings to the spec's kind, but builders in passes may not;
// every consumer reads them through dl_ir_node_attr_float & co., which accept both.
static bool kind_ok(dl_ir_attr_kind want, const dl_ir_attr *a) {
    if (a->kind == want) {
        return true;
    }
    // An int written where a float is expected reads as that float.
    if (want == DL_IR_ATTR_FLOAT && a->kind == DL_IR_ATTR_INT) {
        return true;
    }
    // A list of ints (or an empty list of any kind) where a list of floats/strings is expected.
    if (want == DL_IR_ATTR_FLOATS && a->kind == DL_IR_ATTR_INTS) {
        return true;
    }
    bool a_list =
        a->kind == DL_IR_ATTR_INTS || a->kind == DL_IR_ATTR_FLOATS || a->kind == DL_IR_ATTR_STRINGS;
    bool w_list =
        want == DL_IR_ATTR_INTS || want == DL_IR_ATTR_FLOATS || want == DL_IR_ATTR_STRINGS;
    return a_list && w_list && a->n == 0;
}

// Checks `attrs` against `specs`. `what` names the owner in messages ("Gemm", "optimizer adam").
static void check_attrs(vctx *c, const char *what, dl_src_loc loc, const dl_ir_attr_spec *specs,
                        size_t n_specs, const dl_ir_attr *attrs, size_t n_attrs) {
    for (size_t i = 0; i < n_attrs; i++) {
        const dl_ir_attr *a = &attrs[i];
        dl_src_loc al = a->loc.file ? a->loc : loc;
        if (!a->name) {
            fail(c, al, "%s: attribute %zu has no name", what, i);
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            if (attrs[j].name && strcmp(attrs[j].name, a->name) == 0) {
                fail(c, al, "%s: attribute '%s' given twice", what, a->name);
            }
        }
        const dl_ir_attr_spec *s = NULL;
        for (size_t k = 0; k < n_specs; k++) {
            if (strcmp(specs[k].name, a->name) == 0) {
                s = &specs[k];
            }
        }
        if (!s) {
            fail(c, al, "%s: unknown attribute '%s'", what, a->name);
            continue;
        }
        if (!kind_ok(s->kind, a)) {
            fail(c, al, "%s: attribute '%s' must be %s, not %s", what, a->name,
                 dl_ir_attr_kind_name(s->kind), dl_ir_attr_kind_name(a->kind));
            continue;
        }
        if (s->has_min && a->kind == DL_IR_ATTR_INT && a->i < s->min_i) {
            fail(c, al, "%s: attribute '%s' is %" PRId64 ", must be at least %" PRId64, what,
                 a->name, a->i, s->min_i);
        }
        if (s->has_min && a->kind == DL_IR_ATTR_INTS) {
            for (size_t k = 0; k < a->n; k++) {
                if (a->ints[k] < s->min_i) {
                    fail(c, al,
                         "%s: attribute '%s' element %zu is %" PRId64 ", must be at least %" PRId64,
                         what, a->name, k, a->ints[k], s->min_i);
                    break;
                }
            }
        }
        if (s->choices && a->kind == DL_IR_ATTR_STRING &&
            !in_choices(s->choices, a->s ? a->s : "")) {
            fail(c, al, "%s: attribute '%s' is \"%s\", must be one of %s", what, a->name,
                 a->s ? a->s : "", s->choices);
        }
        if (s->choices && a->kind == DL_IR_ATTR_STRINGS) {
            for (size_t k = 0; k < a->n; k++) {
                if (!in_choices(s->choices, a->strs[k] ? a->strs[k] : "")) {
                    fail(c, al, "%s: attribute '%s' has \"%s\", must be one of %s", what, a->name,
                         a->strs[k] ? a->strs[k] : "", s->choices);
                    break;
                }
            }
        }
        if ((a->kind == DL_IR_ATTR_INTS && a->n && !a->ints) ||
            (a->kind == DL_IR_ATTR_FLOATS && a->n && !a->floats) ||
            (a->kind == DL_IR_ATTR_STRINGS && a->n && !a->strs) ||
            (a->kind == DL_IR_ATTR_STRING && !a->s)) {
            fail(c, al, "%s: attribute '%s' has no data", what, a->name);
        }
    }
    for (size_t k = 0; k < n_specs; k++) {
        if (!specs[k].required) {
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < n_attrs && !found; i++) {
            found = attrs[i].name && strcmp(attrs[i].name, specs[k].name) == 0;
        }
        if (!found) {
            fail(c, loc, "%s: required attribute '%s' is missing", what, specs[k].name);
        }
    }
}

// Ints written as dim names must name a module dim and carry its bound value
// (dl_ir_module_bind_dim keeps them in step).
static void check_attr_syms(vctx *c, const char *what, dl_src_loc loc, const dl_ir_attr *attrs,
                            size_t n_attrs) {
    const dl_ir_module *m = c->m;
    for (size_t i = 0; i < n_attrs; i++) {
        const dl_ir_attr *a = &attrs[i];
        size_t n = a->kind == DL_IR_ATTR_INT                   ? 1
                   : a->kind == DL_IR_ATTR_INTS && a->int_syms ? a->n
                                                               : 0;
        for (size_t k = 0; k < n; k++) {
            int32_t sym = a->kind == DL_IR_ATTR_INT ? a->i_sym : a->int_syms[k];
            int64_t v = a->kind == DL_IR_ATTR_INT ? a->i : a->ints[k];
            if (sym < 0) {
                continue;
            }
            if ((size_t)sym >= m->dims.len) {
                fail(c, loc, "%s: attribute '%s' refers to unknown dim #%d", what,
                     a->name ? a->name : "?", sym);
            } else if (m->dims.data[sym].value != v) {
                fail(c, loc, "%s: attribute '%s' is %" PRId64 " but dim %s is bound to %" PRId64,
                     what, a->name ? a->name : "?", v, m->dims.data[sym].name,
                     m->dims.data[sym].value);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Nodes

// Arity against the op table, inputs defined by earlier nodes (node order is a topological
// order, which the evaluator and codegen rely on), outputs pointing back, attributes.
static void check_node(vctx *c, size_t k, const dl_ir_node *n) {
    const dl_ir_module *m = c->m;
    if (n->id != k) {
        fail(c, n->loc, "node at position %zu has id %" PRIu32, k, n->id);
    }
    if ((unsigned)n->op >= DL_IR_OP_COUNT) {
        fail(c, n->loc, "node %zu has invalid op %d", k, (int)n->op);
        return;
    }
    const dl_ir_op_info *info = dl_ir_op_get_info(n->op);
    const char *op = info->name;
    if ((int64_t)n->n_inputs < info->min_inputs ||
        (info->max_inputs >= 0 && (int64_t)n->n_inputs > info->max_inputs)) {
        fail(c, n->loc, "%s: %zu inputs, expected %d to %d", op, n->n_inputs, info->min_inputs,
             info->max_inputs);
    }
    if ((int64_t)n->n_outputs < info->min_outputs ||
        (info->max_outputs >= 0 && (int64_t)n->n_outputs > info->max_outputs)) {
        fail(c, n->loc, "%s: %zu outputs, expected %d to %d", op, n->n_outputs, info->min_outputs,
             info->max_outputs);
    }
    for (size_t i = 0; i < n->n_inputs; i++) {
        const dl_ir_value *v = n->inputs[i];
        if (!v) {
            // Optional inputs are the trailing ones; the first min_inputs are required, and a
            // variadic list (Max, Min, Concat) has no holes.
            if ((int64_t)i < info->min_inputs || info->max_inputs < 0) {
                fail(c, n->loc, "%s: required input %zu is missing", op, i);
            }
            continue;
        }
        if (!owns(m, v)) {
            fail(c, n->loc, "%s: input %zu ('%s') is not a value of the module", op, i, vname(v));
        } else if (v->kind == DL_IR_VAL_NODE && v->def && v->def->id >= n->id) {
            fail(c, n->loc, "%s: input %zu ('%s') is used before its definition", op, i, vname(v));
        }
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        const dl_ir_value *v = n->outputs[i];
        if (!owns(m, v) || v->kind != DL_IR_VAL_NODE || v->def != n || v->def_out != i) {
            fail(c, n->loc, "%s: output %zu ('%s') does not point back at this node", op, i,
                 vname(v));
        }
    }
    check_attrs(c, op, n->loc, info->attrs, info->n_attrs, n->attrs, n->n_attrs);
    check_attr_syms(c, op, n->loc, n->attrs, n->n_attrs);
}

// ---------------------------------------------------------------------------------------------
// Statement order: every value is defined by an earlier statement than any use.

// Node ids order the dataflow, but the printer writes statements: a param a pass appended after
// its first use would print as a use before definition, which the parser rejects. So the
// statement order is checked too, and every node must have its statement.
static void check_stmts(vctx *c) {
    const dl_ir_module *m = c->m;
    bool *defined = dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof(bool));
    if (!defined) {
        fail(c, DL_NO_LOC, "out of memory");
        return;
    }
    bool *seen_node = dl_mem_calloc(m->nodes.len ? m->nodes.len : 1, sizeof(bool));
    if (!seen_node) {
        free(defined);
        fail(c, DL_NO_LOC, "out of memory");
        return;
    }
    size_t n_train = 0;
    for (size_t i = 0; i < m->stmts.len; i++) {
        const dl_ir_stmt *s = &m->stmts.data[i];
        switch (s->kind) {
        case DL_IR_STMT_DIM:
            if (s->index >= m->dims.len) {
                fail(c, DL_NO_LOC, "statement %zu refers to unknown dim #%" PRIu32, i, s->index);
            }
            break;
        case DL_IR_STMT_INPUT:
        case DL_IR_STMT_PARAM:
        case DL_IR_STMT_CONST:
            if (s->index >= m->values.len) {
                fail(c, DL_NO_LOC, "statement %zu refers to unknown value #%" PRIu32, i, s->index);
            } else {
                defined[s->index] = true;
            }
            break;
        case DL_IR_STMT_NODE: {
            if (s->index >= m->nodes.len) {
                fail(c, DL_NO_LOC, "statement %zu refers to unknown node #%" PRIu32, i, s->index);
                break;
            }
            const dl_ir_node *n = m->nodes.data[s->index];
            if (!n) {
                break;
            }
            seen_node[s->index] = true;
            for (size_t k = 0; k < n->n_inputs; k++) {
                const dl_ir_value *v = n->inputs[k];
                if (owns(m, v) && !defined[v->id]) {
                    fail(c, n->loc, "%s: input '%s' is used before the statement defining it",
                         dl_ir_op_get_info(n->op)->name, vname(v));
                }
            }
            for (size_t k = 0; k < n->n_outputs; k++) {
                if (owns(m, n->outputs[k])) {
                    defined[n->outputs[k]->id] = true;
                }
            }
            break;
        }
        case DL_IR_STMT_OUTPUT:
            if (s->index >= m->values.len) {
                fail(c, DL_NO_LOC, "output statement %zu refers to unknown value #%" PRIu32, i,
                     s->index);
            } else if (!defined[s->index]) {
                fail(c, m->values.data[s->index]->loc, "output '%s' comes before its definition",
                     vname(m->values.data[s->index]));
            }
            break;
        case DL_IR_STMT_TRAIN:
            n_train++;
            if (m->train && owns(m, m->train->loss) && !defined[m->train->loss->id]) {
                fail(c, m->train->loc, "train loss '%s' comes before its definition",
                     vname(m->train->loss));
            }
            break;
        default:
            fail(c, DL_NO_LOC, "statement %zu has invalid kind %d", i, (int)s->kind);
            break;
        }
    }
    // Every node has its statement (the printer prints statements, not the node list).
    if (m->stmts.len) {
        for (size_t i = 0; i < m->nodes.len; i++) {
            if (!seen_node[i] && m->nodes.data[i]) {
                fail(c, m->nodes.data[i]->loc, "%s: node %zu has no statement",
                     dl_ir_op_get_info(m->nodes.data[i]->op)->name, i);
            }
        }
        if ((m->train != NULL) != (n_train == 1)) {
            fail(c, m->train ? m->train->loc : DL_NO_LOC,
                 "train block and train statements disagree (%zu statements)", n_train);
        }
    }
    free(seen_node);
    free(defined);
}

// ---------------------------------------------------------------------------------------------
// Train config

// The train block refers to values by pointer; after a pass rebuilds a module those pointers
// must point into the new one (owns), and freeze may name params only.
static void check_train(vctx *c, const dl_ir_train *t) {
    const dl_ir_module *m = c->m;
    if (!owns(m, t->loss)) {
        fail(c, t->loc, "train loss '%s' is not a value of the module", vname(t->loss));
    }
    size_t n;
    const dl_ir_attr_spec *specs = dl_ir_optim_attr_specs(t->optimizer, &n);
    if (!specs) {
        fail(c, t->optimizer_loc, "invalid optimizer %d", (int)t->optimizer);
    } else {
        char what[64];
        snprintf(what, sizeof(what), "optimizer %s", dl_ir_optim_name(t->optimizer));
        check_attrs(c, what, t->optimizer_loc, specs, n, t->opt_attrs, t->n_opt_attrs);
    }
    if (t->loss_scale == DL_IR_LS_DYNAMIC) {
        const dl_ir_attr_spec *ls = dl_ir_loss_scale_attr_specs(&n);
        check_attrs(c, "loss_scale", t->loc, ls, n, t->ls_attrs, t->n_ls_attrs);
    } else if (t->n_ls_attrs) {
        fail(c, t->loc, "loss_scale attributes given without a dynamic loss scale");
    }
    if (t->has_precision && t->precision != DL_DT_FLOAT && t->precision != DL_DT_BFLOAT16 &&
        t->precision != DL_DT_FLOAT16) {
        fail(c, t->loc, "precision must be float, bfloat16 or float16, not %s",
             dl_dtype_name(t->precision));
    }
    if (t->has_accumulate && t->accumulate < 1) {
        fail(c, t->loc, "accumulate is %" PRId64 ", must be at least 1", t->accumulate);
    }
    for (size_t i = 0; i < t->n_freeze; i++) {
        const dl_ir_value *v = t->freeze[i];
        if (!owns(m, v) || v->kind != DL_IR_VAL_PARAM) {
            fail(c, v && owns(m, v) ? v->loc : t->loc, "freeze entry '%s' is not a param",
                 vname(v));
        }
        for (size_t j = 0; j < i; j++) {
            if (t->freeze[j] == v) {
                fail(c, t->loc, "param '%s' is frozen twice", vname(v));
            }
        }
    }
}

dl_status dl_ir_verify(const dl_ir_module *m, dl_diags *d) {
    vctx c = {m, d, 0};
    for (size_t i = 0; i < m->dims.len; i++) {
        if (m->dims.data[i].value < 1) {
            fail(&c, m->dims.data[i].loc, "dim %s is bound to %" PRId64, m->dims.data[i].name,
                 m->dims.data[i].value);
        }
    }
    check_values(&c);
    for (size_t k = 0; k < m->nodes.len; k++) {
        const dl_ir_node *n = m->nodes.data[k];
        if (!n) {
            fail(&c, DL_NO_LOC, "node #%zu is NULL", k);
            continue;
        }
        check_node(&c, k, n);
    }
    check_stmts(&c);
    if (m->train) {
        check_train(&c, m->train);
    }
    return c.n_errors ? DL_ERR_INVALID_ARG : DL_OK;
}
