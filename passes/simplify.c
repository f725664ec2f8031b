// passes/simplify.c — simplify, CSE and DCE of the derived graph (after autodiff and precision,
// before fusion). Every rule is exact in IEEE float32: the graph computes the same bits after it.
//
// Rules, in one walk over the nodes in statement order (inputs are rewritten to their
// replacement first, so chains collapse):
//  1. Forwarding: y = OP(x) whose result is bit for bit x becomes x in every use:
//       Identity; Cast to x's own dtype (a Cast converts, and float->float converts nothing);
//       Reshape, Flatten, Squeeze, Unsqueeze and Expand when y's type equals x's (they move
//       elements in row-major order, so equal dims mean an element-for-element copy).
//     Not done, because they are not exact: x * 1 -> x (a signalling NaN comes out quiet, and a
//     broadcast 1 changes the shape), x + 0 -> x (-0 + 0 is +0), x - x -> 0 and x * 0 -> 0 (Inf,
//     NaN), x / x -> 1, Transpose or Slice of equal type (a square transpose or a reversing slice
//     keeps the type and moves elements), Cast of a Cast (rounding).
//  2. CSE: a node with the op, inputs (the same values, after rule 1) and attributes (the same
//     names and values, floats compared by bits) of an earlier node, and as many outputs, is
//     replaced by it. Dropout never is (its mask comes from the RNG counter; an inference-mode
//     Dropout is excluded too, to keep the rule simple); no other op has state or randomness.
//  3. DCE: nodes none of whose outputs reach a root are removed. Roots: the outputs, the train
//     block's loss, the training graph's loss, every gradient and every assign's value.
// A node defining a root is never replaced by rules 1-2 (outputs keep their names, and codegen
// gives the loss, gradients and assigns their own buffers), so the module's root pointers never
// change. Kept nodes keep their source locations; removed nodes' values disappear.
#include "dl_pass.h"

#include <stdlib.h>
#include <string.h>

typedef struct simp {
    dl_ir_module *m;
    dl_ir_value **repl; // by value id: the value to use instead, or NULL
    uint8_t *root;      // by value id
    uint32_t *table;    // CSE hash table of node index + 1 (0: empty), `cap` slots
    size_t cap;
} simp;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t f64_bits(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static bool attr_equal(const dl_ir_attr *a, const dl_ir_attr *b) {
    if (a->kind != b->kind) {
        return false;
    }
    switch (a->kind) {
    case DL_IR_ATTR_INT:
        return a->i == b->i;
    case DL_IR_ATTR_FLOAT:
        return f64_bits(a->f) == f64_bits(b->f);
    case DL_IR_ATTR_STRING:
        return strcmp(a->s, b->s) == 0;
    case DL_IR_ATTR_INTS:
        return a->n == b->n && (a->n == 0 || memcmp(a->ints, b->ints, a->n * sizeof *a->ints) == 0);
    case DL_IR_ATTR_FLOATS:
        if (a->n != b->n) {
            return false;
        }
        for (size_t i = 0; i < a->n; i++) {
            if (f64_bits(a->floats[i]) != f64_bits(b->floats[i])) {
                return false;
            }
        }
        return true;
    case DL_IR_ATTR_STRINGS:
        if (a->n != b->n) {
            return false;
        }
        for (size_t i = 0; i < a->n; i++) {
            if (strcmp(a->strs[i], b->strs[i]) != 0) {
                return false;
            }
        }
        return true;
    }
    return false;
}

// Same op, inputs, attributes (as written: a default spelled out differs from one left out,
// which only costs a missed merge) and output count.
static bool same_node(const dl_ir_node *a, const dl_ir_node *b) {
    if (a->op != b->op || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs ||
        a->n_attrs != b->n_attrs) {
        return false;
    }
    for (size_t i = 0; i < a->n_inputs; i++) {
        if (a->inputs[i] != b->inputs[i]) {
            return false;
        }
    }
    for (size_t i = 0; i < a->n_attrs; i++) {
        const dl_ir_attr *o = dl_ir_node_attr(b, a->attrs[i].name);
        if (!o || !attr_equal(&a->attrs[i], o)) {
            return false;
        }
    }
    for (size_t i = 0; i < a->n_outputs; i++) {
        if (!dl_ir_type_equal(&a->outputs[i]->type, &b->outputs[i]->type)) {
            return false;
        }
    }
    return true;
}

// Order-independent over attributes (they are compared by name).
static uint64_t node_hash(const dl_ir_node *n) {
    uint64_t h = mix((uint64_t)n->op, n->n_inputs);
    for (size_t i = 0; i < n->n_inputs; i++) {
        h = mix(h, n->inputs[i] ? n->inputs[i]->id : UINT32_MAX);
    }
    uint64_t ah = 0;
    for (size_t i = 0; i < n->n_attrs; i++) {
        ah += dl_hash_fnv1a64(n->attrs[i].name);
    }
    return mix(mix(h, ah), n->n_outputs);
}

static bool defines_root(const simp *s, const dl_ir_node *n) {
    for (size_t i = 0; i < n->n_outputs; i++) {
        if (s->root[n->outputs[i]->id]) {
            return true;
        }
    }
    return false;
}

// The switch in forwarded() names the forwarding ops only.
#pragma GCC diagnostic ignored "-Wswitch-enum"

// Rule 1: the value y = n's only output equals, bit for bit (see the file comment).
static dl_ir_value *forwarded(const dl_ir_node *n) {
    if (n->n_outputs != 1 || n->n_inputs < 1 || !n->inputs[0]) {
        return NULL;
    }
    dl_ir_value *x = n->inputs[0];
    const dl_ir_type *ty = &n->outputs[0]->type;
    switch (n->op) {
    case DL_IR_OP_IDENTITY:
        return x;
    case DL_IR_OP_CAST:
    case DL_IR_OP_RESHAPE:
    case DL_IR_OP_FLATTEN:
    case DL_IR_OP_SQUEEZE:
    case DL_IR_OP_UNSQUEEZE:
    case DL_IR_OP_EXPAND:
        return n->n_inputs == 1 && dl_ir_type_equal(ty, &x->type) ? x : NULL;
    default:
        return NULL;
    }
}

// Rule 2: the earlier node equal to n, or NULL (then n enters the table).
static const dl_ir_node *cse_find(simp *s, const dl_ir_node *n) {
    if (n->op == DL_IR_OP_DROPOUT) {
        return NULL;
    }
    size_t mask = s->cap - 1;
    for (size_t i = (size_t)node_hash(n) & mask;; i = (i + 1) & mask) {
        uint32_t e = s->table[i];
        if (e == 0) {
            s->table[i] = n->id + 1;
            return NULL;
        }
        const dl_ir_node *o = s->m->nodes.data[e - 1];
        if (same_node(o, n)) {
            return o;
        }
    }
}

static void mark_root(simp *s, const dl_ir_value *v) {
    if (v) {
        s->root[v->id] = 1;
    }
}

dl_status dl_pass_simplify(dl_ir_module *m, dl_diags *d, size_t *out_n_removed) {
    if (out_n_removed) {
        *out_n_removed = 0;
    }
    size_t nv = m->values.len, nn = m->nodes.len;
    simp s = {.m = m};
    s.cap = 16;
    while (s.cap < 2 * nn) {
        s.cap *= 2;
    }
    s.repl = dl_mem_calloc(nv ? nv : 1, sizeof *s.repl);
    s.root = dl_mem_calloc(nv ? nv : 1, 1);
    s.table = dl_mem_calloc(s.cap, sizeof *s.table);
    uint8_t *live = dl_mem_calloc(nv ? nv : 1, 1);
    uint8_t *dead = dl_mem_calloc(nn ? nn : 1, 1);
    dl_status st = DL_OK;
    if (!s.repl || !s.root || !s.table || !live || !dead) {
        st = DL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < m->outputs.len; i++) {
        mark_root(&s, m->outputs.data[i]);
    }
    if (m->train) {
        mark_root(&s, m->train->loss);
    }
    mark_root(&s, m->train_loss);
    for (size_t i = 0; i < m->grads.len; i++) {
        mark_root(&s, m->grads.data[i]);
    }
    for (size_t i = 0; i < m->assigns.len; i++) {
        mark_root(&s, m->assigns.data[i].value);
    }
    // Rules 1 and 2, in order: an input's replacement is always defined earlier.
    for (size_t k = 0; k < nn; k++) {
        dl_ir_node *n = m->nodes.data[k];
        for (size_t i = 0; i < n->n_inputs; i++) {
            dl_ir_value *v = n->inputs[i];
            if (v && s.repl[v->id]) {
                n->inputs[i] = s.repl[v->id];
            }
        }
        if (defines_root(&s, n)) {
            (void)cse_find(&s, n); // it may still stand for later copies of itself
            continue;
        }
        dl_ir_value *x = forwarded(n);
        if (x) {
            s.repl[n->outputs[0]->id] = x;
            continue;
        }
        const dl_ir_node *o = cse_find(&s, n);
        for (size_t i = 0; o && i < n->n_outputs; i++) {
            s.repl[n->outputs[i]->id] = o->outputs[i];
        }
    }
    // Rule 3: liveness backwards from the roots.
    memcpy(live, s.root, nv);
    size_t n_dead = 0;
    for (size_t k = nn; k-- > 0;) {
        const dl_ir_node *n = m->nodes.data[k];
        bool used = false;
        for (size_t i = 0; i < n->n_outputs && !used; i++) {
            used = live[n->outputs[i]->id];
        }
        if (!used) {
            dead[k] = 1;
            n_dead++;
            continue;
        }
        for (size_t i = 0; i < n->n_inputs; i++) {
            if (n->inputs[i]) {
                live[n->inputs[i]->id] = 1;
            }
        }
    }
    if (n_dead) {
        st = dl_ir_module_remove_nodes(m, dead);
    }
    if (st == DL_OK && out_n_removed) {
        *out_n_removed = n_dead;
    }
out:
    if (st == DL_ERR_NOMEM) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "simplify: out of memory");
    }
    free(s.repl);
    free(s.root);
    free(s.table);
    free(live);
    free(dead);
    return st;
}
