// passes/precision.c — the mixed-precision ("autocast") pass: `precision = bfloat16 | float16`
// of the train block (dl_pass_precision, docs/precision.md).
//
// Rewrite, per target op n (MatMul, Gemm, Conv, ConvTranspose, ConvGradWeight) whose inputs and
// single output are all float32, in node order:
//
//   before:  y = Op (a, b, c)                      (y float32, read by anything)
//   after:   a.p = Cast <to = "P"> (a)   ...       (one per input value, shared by later users)
//            prec.N = Op (a.p, b.p, c.p)           (P: the kernels accumulate in f32, round to P)
//            y = Cast <to = "float"> (prec.N)
//
// The Cast back to float takes over the op's output value `y` itself (its def/def_out are
// moved, the op gets a fresh P value), so every consumer — later nodes, the outputs list (whose
// names are the artifact's interface), train->loss, train_loss, grads, assigns — keeps pointing
// at a float32 value with no rewiring. An input that is itself such a `y` is read as the P value
// the op produced (P -> float -> P is exact), so chained products cast nothing twice.
//
// Order: dl_ir_module_add_node appends the Casts at the end of m->nodes and m->stmts; once every
// op is rewritten, both lists are rebuilt with each op's input Casts right before it and its
// output Cast right after it (ids renumbered so nodes[i]->id == i), and n_fwd_nodes moved so the
// forward region [0, n_fwd_nodes) holds the forward ops with their Casts. An input Cast shared by
// later users sits before its first user, hence before all of them; a Cast made for a training
// node sits in the training region, used only by training nodes after it.
#include "dl_pass.h"
#include "shape_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Where a node added by the pass goes: right before or right after original node `anchor`.
typedef struct placed {
    size_t anchor;
    bool before;
} placed;

typedef struct prec {
    dl_ir_module *m;
    dl_diags *d;
    dl_dtype p;
    size_t n_vals;        // values before the pass (the maps below are indexed by them)
    dl_ir_value **to_p;   // [n_vals] the P Cast of a float32 value, NULL if none yet
    dl_ir_value **p_of;   // [n_vals] for an op output the pass moved onto a Cast: the op's P value
    DL_VEC(placed) where; // one per added node, in creation order
    uint32_t counter;     // for "prec.N" names
    size_t n_ops;         // ops rewritten
    dl_status st;
} prec;

// A switch would have to list every op (-Wswitch-enum); the set is small and fixed.
static bool is_target(dl_ir_op op) {
    return op == DL_IR_OP_MATMUL || op == DL_IR_OP_GEMM || op == DL_IR_OP_CONV ||
           op == DL_IR_OP_CONV_TRANSPOSE || op == DL_IR_OP_CONV_GRAD_WEIGHT;
}

// All present inputs and the one output are float32 with known types.
static bool eligible(const dl_ir_node *n) {
    if (!is_target(n->op) || n->n_outputs != 1 || n->outputs[0]->type.rank < 0 ||
        n->outputs[0]->type.dtype != DL_DT_FLOAT) {
        return false;
    }
    for (size_t i = 0; i < n->n_inputs; i++) {
        const dl_ir_value *v = n->inputs[i];
        if (v && (v->type.rank < 0 || v->type.dtype != DL_DT_FLOAT)) {
            return false;
        }
    }
    return true;
}

static void fail(prec *pr, dl_status st) {
    if (pr->st == DL_OK) {
        pr->st = st;
    }
}

// Adds `Cast <to = dtype> (v)` placed before/after original node `anchor` (whose location it
// takes); its output gets a fresh "prec.N" name. Types are not inferred here.
static dl_ir_node *add_cast(prec *pr, dl_ir_value *v, dl_dtype to, size_t anchor, bool before) {
    if (pr->st != DL_OK) {
        return NULL;
    }
    char name[32];
    do {
        snprintf(name, sizeof name, "prec.%u", pr->counter++);
    } while (dl_ir_module_find(pr->m, name));
    const char *np = name;
    dl_ir_attr at = {.name = "to", .kind = DL_IR_ATTR_STRING, .s = dl_dtype_name(to), .i_sym = -1};
    const dl_ir_node *an = pr->m->nodes.data[anchor];
    dl_ir_node *cn = NULL;
    dl_status st =
        dl_ir_module_add_node(pr->m, DL_IR_OP_CAST, &v, 1, &np, NULL, 1, &at, 1, an->loc, &cn);
    if (st == DL_OK && !DL_VEC_PUSH(&pr->where, ((placed){anchor, before}))) {
        st = DL_ERR_NOMEM;
    }
    if (st != DL_OK) {
        fail(pr, st);
        return NULL;
    }
    return cn;
}

static bool infer(prec *pr, const dl_ir_node *n) {
    if (pr->st != DL_OK) {
        return false;
    }
    if (!dl_pass__shape_node(pr->m, n, pr->d)) {
        dl_diag(pr->d, DL_SEV_ERROR, n->loc, "precision: cannot run %s '%s' in %s",
                dl_ir_op_get_info(n->op)->name, n->outputs[0]->name, dl_dtype_name(pr->p));
        fail(pr, DL_ERR_SHAPE);
        return false;
    }
    return true;
}

// Rewrites original node k (eligible) as described at the top of the file.
static void rewrite(prec *pr, size_t k) {
    dl_ir_node *n = pr->m->nodes.data[k];
    for (size_t i = 0; i < n->n_inputs && pr->st == DL_OK; i++) {
        dl_ir_value *v = n->inputs[i];
        if (!v) {
            continue;
        }
        dl_ir_value *vp = v->id < pr->n_vals ? pr->p_of[v->id] : NULL;
        if (!vp && v->id < pr->n_vals) {
            vp = pr->to_p[v->id];
        }
        if (!vp) {
            dl_ir_node *cn = add_cast(pr, v, pr->p, k, true);
            if (!cn || !infer(pr, cn)) {
                return;
            }
            vp = cn->outputs[0];
            if (v->id < pr->n_vals) {
                pr->to_p[v->id] = vp;
            }
        }
        n->inputs[i] = vp;
    }
    dl_ir_value *y = n->outputs[0];
    dl_ir_node *cn = add_cast(pr, y, DL_DT_FLOAT, k, false);
    if (!cn) {
        return;
    }
    // Swap the output values: the op now defines the fresh value z (of type P), the Cast
    // defines y (float32, with its name, uses and is_output flag).
    dl_ir_value *z = cn->outputs[0];
    n->outputs[0] = z;
    z->def = n;
    z->def_out = 0;
    cn->outputs[0] = y;
    y->def = cn;
    y->def_out = 0;
    cn->inputs[0] = z;
    if (!infer(pr, n) || !infer(pr, cn)) {
        return;
    }
    pr->p_of[y->id] = z;
    pr->n_ops++;
}

// Rebuilds m->nodes and m->stmts with each added node next to its anchor (see the top).
static dl_status reorder(prec *pr, size_t n_old_nodes, size_t n_old_stmts) {
    dl_ir_module *m = pr->m;
    size_t n_all = m->nodes.len, n_added = n_all - n_old_nodes;
    DL_ASSERT(n_added == pr->where.len);
    DL_ASSERT(m->stmts.len == 0 || m->stmts.len == n_old_stmts + n_added);
    dl_ir_node **order = dl_mem_alloc((n_all ? n_all : 1) * sizeof *order);
    size_t *n_pre = dl_mem_calloc(n_old_nodes ? n_old_nodes : 1, sizeof *n_pre);
    size_t *n_post = dl_mem_calloc(n_old_nodes ? n_old_nodes : 1, sizeof *n_post);
    dl_ir_stmt *stmts = dl_mem_alloc((m->stmts.len ? m->stmts.len : 1) * sizeof *stmts);
    if (!order || !n_pre || !n_post || !stmts) {
        free(order);
        free(n_pre);
        free(n_post);
        free(stmts);
        return DL_ERR_NOMEM;
    }
    size_t pos = 0, j = 0, n_fwd = m->has_backward ? m->n_fwd_nodes : n_old_nodes;
    size_t new_fwd = 0;
    for (size_t k = 0; k < n_old_nodes; k++) {
        if (k == n_fwd) {
            new_fwd = pos;
        }
        for (; j < n_added && pr->where.data[j].anchor == k && pr->where.data[j].before; j++) {
            order[pos++] = m->nodes.data[n_old_nodes + j];
            n_pre[k]++;
        }
        order[pos++] = m->nodes.data[k];
        for (; j < n_added && pr->where.data[j].anchor == k && !pr->where.data[j].before; j++) {
            order[pos++] = m->nodes.data[n_old_nodes + j];
            n_post[k]++;
        }
    }
    if (n_fwd >= n_old_nodes) {
        new_fwd = pos;
    }
    DL_ASSERT(j == n_added && pos == n_all);
    // Statements: an original node statement refers to its node by the old id (= k).
    size_t ns = 0;
    for (size_t i = 0; i < n_old_stmts && m->stmts.len; i++) {
        dl_ir_stmt s = m->stmts.data[i];
        if (s.kind != DL_IR_STMT_NODE || s.index >= n_old_nodes) {
            stmts[ns++] = s;
            continue;
        }
        size_t k = s.index;
        // The new id of node k is found below once ids are renumbered; record positions now.
        for (size_t q = 0; q < n_pre[k]; q++) {
            stmts[ns++] = (dl_ir_stmt){DL_IR_STMT_NODE, UINT32_MAX, NULL, NULL, false};
        }
        if (n_pre[k]) { // the comment above the op goes above its input Casts
            stmts[ns - n_pre[k]].comment_before = s.comment_before;
            stmts[ns - n_pre[k]].blank_before = s.blank_before;
            s.comment_before = NULL;
            s.blank_before = false;
        }
        stmts[ns++] = s;
        for (size_t q = 0; q < n_post[k]; q++) {
            stmts[ns++] = (dl_ir_stmt){DL_IR_STMT_NODE, UINT32_MAX, NULL, NULL, false};
        }
    }
    for (size_t i = 0; i < n_all; i++) {
        m->nodes.data[i] = order[i];
    }
    // Renumber: remember each original node's new position through its old id.
    size_t *new_pos = dl_mem_alloc((n_old_nodes ? n_old_nodes : 1) * sizeof *new_pos);
    if (!new_pos) {
        free(order);
        free(n_pre);
        free(n_post);
        free(stmts);
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n_all; i++) {
        dl_ir_node *nd = m->nodes.data[i];
        if (nd->id < n_old_nodes) {
            new_pos[nd->id] = i;
        }
    }
    for (size_t i = 0; i < n_all; i++) {
        m->nodes.data[i]->id = (uint32_t)i;
    }
    for (size_t i = 0; i < ns; i++) {
        dl_ir_stmt *s = &stmts[i];
        if (s->kind != DL_IR_STMT_NODE || s->index == UINT32_MAX) {
            continue;
        }
        size_t k = s->index, p = new_pos[k];
        s->index = (uint32_t)p;
        for (size_t q = 1; q <= n_pre[k]; q++) {
            stmts[i - q].index = (uint32_t)(p - q);
        }
        for (size_t q = 1; q <= n_post[k]; q++) {
            stmts[i + q].index = (uint32_t)(p + q);
        }
        i += n_post[k]; // the post Casts are filled in: skip them
    }
    if (m->stmts.len) {
        DL_ASSERT(ns == m->stmts.len);
        memcpy(m->stmts.data, stmts, ns * sizeof *stmts);
    }
    if (m->has_backward) {
        m->n_fwd_nodes = new_fwd;
    }
    free(new_pos);
    free(order);
    free(n_pre);
    free(n_post);
    free(stmts);
    return DL_OK;
}

dl_status dl_pass_precision(dl_ir_module *m, dl_dtype precision, dl_diags *d, size_t *out_n_ops) {
    if (out_n_ops) {
        *out_n_ops = 0;
    }
    if (precision == DL_DT_FLOAT) {
        return DL_OK;
    }
    if (precision != DL_DT_BFLOAT16 && precision != DL_DT_FLOAT16) {
        dl_diag(d, DL_SEV_ERROR, m->train ? m->train->loc : DL_NO_LOC,
                "precision: must be float, bfloat16 or float16, not %s", dl_dtype_name(precision));
        return DL_ERR_INVALID_ARG;
    }
    prec pr = {.m = m, .d = d, .p = precision, .n_vals = m->values.len};
    pr.to_p = dl_mem_calloc(pr.n_vals ? pr.n_vals : 1, sizeof *pr.to_p);
    pr.p_of = dl_mem_calloc(pr.n_vals ? pr.n_vals : 1, sizeof *pr.p_of);
    size_t n_old_nodes = m->nodes.len, n_old_stmts = m->stmts.len;
    if (!pr.to_p || !pr.p_of) {
        pr.st = DL_ERR_NOMEM;
    }
    for (size_t k = 0; k < n_old_nodes && pr.st == DL_OK; k++) {
        if (eligible(m->nodes.data[k])) {
            rewrite(&pr, k);
        }
    }
    if (pr.st == DL_OK && pr.where.len) {
        pr.st = reorder(&pr, n_old_nodes, n_old_stmts);
    }
    if (pr.st == DL_OK && out_n_ops) {
        *out_n_ops = pr.n_ops;
    }
    if (pr.st == DL_ERR_NOMEM) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "precision: out of memory");
    }
    free(pr.to_p);
    free(pr.p_of);
    free(pr.where.data);
    return pr.st;
}
