// ir/ir_module.c — module construction: the arena, the name table, builders for every statement
// kind, attribute getters with op-table defaults, dim rebinding and type formatting; removing
// nodes, and keeping only some outputs and what they depend on.
//
// The name table is an open-addressing hash map from name to value id, grown at 50% load; dims
// live in their own small vector and are looked up linearly (models have a handful).
#include "dl_ir.h"

#include <stdlib.h>
#include <string.h>

struct dl_ir_name_map {
    uint32_t *slots; // value id + 1; 0 = empty
    size_t cap;
    size_t used;
};

static dl_ir_value *map_get(const dl_ir_module *m, const char *name) {
    const dl_ir_name_map *nm = m->names;
    if (!nm || nm->cap == 0) {
        return NULL;
    }
    size_t mask = nm->cap - 1;
    for (size_t i = (size_t)dl_hash_fnv1a64(name) & mask;; i = (i + 1) & mask) {
        uint32_t s = nm->slots[i];
        if (s == 0) {
            return NULL;
        }
        dl_ir_value *v = m->values.data[s - 1];
        if (strcmp(v->name, name) == 0) {
            return v;
        }
    }
}

static void map_insert_slot(uint32_t *slots, size_t cap, const char *name, uint32_t id) {
    size_t mask = cap - 1;
    size_t i = (size_t)dl_hash_fnv1a64(name) & mask;
    while (slots[i]) {
        i = (i + 1) & mask;
    }
    slots[i] = id + 1;
}

static dl_status map_put(dl_ir_module *m, dl_ir_value *v) {
    dl_ir_name_map *nm = m->names;
    if ((nm->used + 1) * 2 > nm->cap) {
        size_t ncap = nm->cap ? nm->cap * 2 : 64;
        uint32_t *ns = dl_mem_calloc(ncap, sizeof(uint32_t));
        if (!ns) {
            return DL_ERR_NOMEM;
        }
        for (size_t i = 0; i < nm->cap; i++) {
            if (nm->slots[i]) {
                map_insert_slot(ns, ncap, m->values.data[nm->slots[i] - 1]->name, nm->slots[i] - 1);
            }
        }
        free(nm->slots);
        nm->slots = ns;
        nm->cap = ncap;
    }
    map_insert_slot(nm->slots, nm->cap, v->name, v->id);
    nm->used++;
    return DL_OK;
}

dl_status dl_ir_module_create(const char *name, dl_ir_module **out) {
    *out = NULL;
    dl_ir_module *m = dl_mem_calloc(1, sizeof(*m));
    if (!m) {
        return DL_ERR_NOMEM;
    }
    dl_arena_init(&m->arena);
    m->names = dl_mem_calloc(1, sizeof(dl_ir_name_map));
    m->name = dl_arena_strdup(&m->arena, name ? name : "");
    if (!m->names || !m->name) {
        dl_ir_module_destroy(m);
        return DL_ERR_NOMEM;
    }
    *out = m;
    return DL_OK;
}

void dl_ir_module_destroy(dl_ir_module *m) {
    if (!m) {
        return;
    }
    free(m->dims.data);
    free(m->values.data);
    free(m->inputs.data);
    free(m->params.data);
    free(m->consts.data);
    free(m->outputs.data);
    free(m->nodes.data);
    free(m->stmts.data);
    free(m->grads.data);
    free(m->assigns.data);
    if (m->names) {
        free(m->names->slots);
        free(m->names);
    }
    dl_arena_fini(&m->arena);
    free(m);
}

dl_ir_value *dl_ir_module_find(const dl_ir_module *m, const char *name) {
    return map_get(m, name);
}

int32_t dl_ir_module_find_dim(const dl_ir_module *m, const char *name) {
    for (size_t i = 0; i < m->dims.len; i++) {
        if (strcmp(m->dims.data[i].name, name) == 0) {
            return (int32_t)i;
        }
    }
    return -1;
}

static dl_status push_stmt(dl_ir_module *m, dl_ir_stmt_kind kind, uint32_t index) {
    dl_ir_stmt s = {kind, index, NULL, NULL, false};
    return DL_VEC_PUSH(&m->stmts, s) ? DL_OK : DL_ERR_NOMEM;
}

dl_status dl_ir_module_add_dim(dl_ir_module *m, const char *name, int64_t value, dl_src_loc loc,
                               int32_t *out_index) {
    if (dl_ir_module_find_dim(m, name) >= 0) {
        return DL_ERR_INVALID_ARG;
    }
    dl_ir_dim_def d = {dl_arena_strdup(&m->arena, name), value, value, loc};
    if (!d.name || !DL_VEC_PUSH(&m->dims, d)) {
        return DL_ERR_NOMEM;
    }
    if (out_index) {
        *out_index = (int32_t)(m->dims.len - 1);
    }
    return push_stmt(m, DL_IR_STMT_DIM, (uint32_t)(m->dims.len - 1));
}

static dl_status new_value(dl_ir_module *m, const char *name, dl_ir_value_kind kind,
                           const dl_ir_type *type, dl_src_loc loc, dl_ir_value **out) {
    *out = NULL;
    if (map_get(m, name)) {
        return DL_ERR_INVALID_ARG;
    }
    dl_ir_value *v = DL_ARENA_NEW(&m->arena, dl_ir_value);
    if (!v || !(v->name = dl_arena_strdup(&m->arena, name))) {
        return DL_ERR_NOMEM;
    }
    v->id = (uint32_t)m->values.len;
    v->kind = kind;
    if (type) {
        v->type = *type;
    } else {
        v->type.dtype = DL_DT_FLOAT;
        v->type.rank = -1;
    }
    v->loc = loc;
    if (!DL_VEC_PUSH(&m->values, v)) {
        return DL_ERR_NOMEM;
    }
    dl_status st = map_put(m, v);
    if (st != DL_OK) {
        m->values.len--;
        return st;
    }
    *out = v;
    return DL_OK;
}

#define PUSH_OR_NOMEM(vec, x) ((DL_VEC_PUSH((vec), (x))) ? DL_OK : DL_ERR_NOMEM)

dl_status dl_ir_module_add_input(dl_ir_module *m, const char *name, const dl_ir_type *type,
                                 dl_src_loc loc, dl_ir_value **out) {
    DL_TRY(new_value(m, name, DL_IR_VAL_INPUT, type, loc, out));
    DL_TRY(PUSH_OR_NOMEM(&m->inputs, *out));
    return push_stmt(m, DL_IR_STMT_INPUT, (*out)->id);
}

dl_status dl_ir_module_add_param(dl_ir_module *m, const char *name, const dl_ir_type *type,
                                 dl_ir_init *init, dl_src_loc loc, dl_ir_value **out) {
    DL_TRY(new_value(m, name, DL_IR_VAL_PARAM, type, loc, out));
    (*out)->init = init;
    DL_TRY(PUSH_OR_NOMEM(&m->params, *out));
    return push_stmt(m, DL_IR_STMT_PARAM, (*out)->id);
}

dl_status dl_ir_module_add_const(dl_ir_module *m, const char *name, const dl_ir_type *type,
                                 dl_ir_literal *lit, dl_src_loc loc, dl_ir_value **out) {
    DL_TRY(new_value(m, name, DL_IR_VAL_CONST, type, loc, out));
    (*out)->lit = lit;
    DL_TRY(PUSH_OR_NOMEM(&m->consts, *out));
    return push_stmt(m, DL_IR_STMT_CONST, (*out)->id);
}

static dl_status copy_attr(dl_arena *a, const dl_ir_attr *src, dl_ir_attr *dst) {
    *dst = *src;
    dst->name = dl_arena_strdup(a, src->name);
    if (!dst->name) {
        return DL_ERR_NOMEM;
    }
    if (src->s && !(dst->s = dl_arena_strdup(a, src->s))) {
        return DL_ERR_NOMEM;
    }
    size_t n = src->n;
    if (src->ints && !(dst->ints = dl_arena_memdup(a, src->ints, n * sizeof(int64_t)))) {
        return DL_ERR_NOMEM;
    }
    if (src->int_syms &&
        !(dst->int_syms = dl_arena_memdup(a, src->int_syms, n * sizeof(int32_t)))) {
        return DL_ERR_NOMEM;
    }
    if (src->floats && !(dst->floats = dl_arena_memdup(a, src->floats, n * sizeof(double)))) {
        return DL_ERR_NOMEM;
    }
    if (src->strs) {
        dst->strs = DL_ARENA_NEWN(a, const char *, n ? n : 1);
        if (!dst->strs) {
            return DL_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            if (!(dst->strs[i] = dl_arena_strdup(a, src->strs[i]))) {
                return DL_ERR_NOMEM;
            }
        }
    }
    return DL_OK;
}

dl_status dl_ir_module_add_node(dl_ir_module *m, dl_ir_op op, dl_ir_value *const *inputs,
                                size_t n_inputs, const char *const *out_names,
                                const dl_src_loc *out_locs, size_t n_outputs,
                                const dl_ir_attr *attrs, size_t n_attrs, dl_src_loc loc,
                                dl_ir_node **out) {
    *out = NULL;
    for (size_t i = 0; i < n_outputs; i++) {
        if (map_get(m, out_names[i])) {
            return DL_ERR_INVALID_ARG;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out_names[i], out_names[j]) == 0) {
                return DL_ERR_INVALID_ARG;
            }
        }
    }
    dl_ir_node *n = DL_ARENA_NEW(&m->arena, dl_ir_node);
    if (!n) {
        return DL_ERR_NOMEM;
    }
    n->id = (uint32_t)m->nodes.len;
    n->op = op;
    n->loc = loc;
    n->n_inputs = n_inputs;
    n->inputs = DL_ARENA_NEWN(&m->arena, dl_ir_value *, n_inputs ? n_inputs : 1);
    n->n_outputs = n_outputs;
    n->outputs = DL_ARENA_NEWN(&m->arena, dl_ir_value *, n_outputs ? n_outputs : 1);
    n->n_attrs = n_attrs;
    n->attrs = DL_ARENA_NEWN(&m->arena, dl_ir_attr, n_attrs ? n_attrs : 1);
    if (!n->inputs || !n->outputs || !n->attrs) {
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < n_inputs; i++) {
        n->inputs[i] = inputs[i];
    }
    for (size_t i = 0; i < n_attrs; i++) {
        DL_TRY(copy_attr(&m->arena, &attrs[i], &n->attrs[i]));
    }
    for (size_t i = 0; i < n_outputs; i++) {
        dl_ir_value *v;
        DL_TRY(new_value(m, out_names[i], DL_IR_VAL_NODE, NULL, out_locs ? out_locs[i] : loc, &v));
        v->def = n;
        v->def_out = (uint32_t)i;
        n->outputs[i] = v;
    }
    DL_TRY(PUSH_OR_NOMEM(&m->nodes, n));
    *out = n;
    return push_stmt(m, DL_IR_STMT_NODE, n->id);
}

dl_status dl_ir_module_add_output(dl_ir_module *m, dl_ir_value *v, dl_src_loc loc) {
    (void)loc;
    if (v->is_output) {
        return DL_ERR_INVALID_ARG;
    }
    v->is_output = true;
    DL_TRY(PUSH_OR_NOMEM(&m->outputs, v));
    return push_stmt(m, DL_IR_STMT_OUTPUT, v->id);
}

dl_status dl_ir_module_set_train(dl_ir_module *m, dl_ir_train *t) {
    if (m->train) {
        return DL_ERR_INVALID_ARG;
    }
    m->train = t;
    return push_stmt(m, DL_IR_STMT_TRAIN, 0);
}

dl_status dl_ir_module_remove_nodes(dl_ir_module *m, const uint8_t *dead) {
    size_t nn = m->nodes.len, nv = m->values.len;
    uint32_t *new_node = dl_mem_alloc((nn ? nn : 1) * sizeof *new_node);
    uint32_t *new_val = dl_mem_alloc((nv ? nv : 1) * sizeof *new_val);
    uint32_t *slots = dl_mem_calloc(m->names && m->names->cap ? m->names->cap : 1, sizeof *slots);
    if (!new_node || !new_val || !slots) {
        free(new_node);
        free(new_val);
        free(slots);
        return DL_ERR_NOMEM;
    }
    // Nothing below allocates: the module is never left half rewritten. Values first, while
    // node ids are still the old ones.
    size_t kn = 0, kv = 0, fwd = 0;
    for (size_t i = 0; i < nv; i++) {
        dl_ir_value *v = m->values.data[i];
        new_val[i] = UINT32_MAX;
        if (v->kind == DL_IR_VAL_NODE && dead[v->def->id]) {
            continue;
        }
        new_val[i] = (uint32_t)kv;
        v->id = (uint32_t)kv;
        m->values.data[kv++] = v;
    }
    for (size_t i = 0; i < nn; i++) {
        dl_ir_node *n = m->nodes.data[i];
        new_node[i] = dead[i] ? UINT32_MAX : (uint32_t)kn;
        if (!dead[i]) {
            fwd += m->has_backward && i < m->n_fwd_nodes;
            n->id = (uint32_t)kn;
            m->nodes.data[kn++] = n;
        }
    }
    // Statements: a removed node's comment moves to the next statement that has none.
    size_t ks = 0;
    const char *carry = NULL;
    bool carry_blank = false;
    for (size_t i = 0; i < m->stmts.len; i++) {
        dl_ir_stmt s = m->stmts.data[i];
        switch (s.kind) {
        case DL_IR_STMT_NODE:
            s.index = new_node[s.index];
            break;
        case DL_IR_STMT_INPUT:
        case DL_IR_STMT_PARAM:
        case DL_IR_STMT_CONST:
        case DL_IR_STMT_OUTPUT:
            s.index = new_val[s.index];
            break;
        case DL_IR_STMT_DIM:
        case DL_IR_STMT_TRAIN:
            break;
        }
        if (s.index == UINT32_MAX) {
            if (s.comment_before && !carry) {
                carry = s.comment_before;
            }
            carry_blank |= s.blank_before;
            continue;
        }
        if (carry && !s.comment_before) {
            s.comment_before = carry;
        }
        s.blank_before |= carry_blank;
        carry = NULL;
        carry_blank = false;
        m->stmts.data[ks++] = s;
    }
    m->stmts.len = ks;
    m->nodes.len = kn;
    m->values.len = kv;
    if (m->has_backward) {
        m->n_fwd_nodes = fwd;
    }
    if (m->names) {
        for (size_t i = 0; i < kv; i++) {
            map_insert_slot(slots, m->names->cap, m->values.data[i]->name, (uint32_t)i);
        }
        free(m->names->slots);
        m->names->slots = slots;
        m->names->used = kv;
        slots = NULL;
    }
    free(slots);
    free(new_node);
    free(new_val);
    return DL_OK;
}

dl_ir_init *dl_ir_module_new_init(dl_ir_module *m, dl_ir_init_kind kind) {
    dl_ir_init *i = DL_ARENA_NEW(&m->arena, dl_ir_init);
    if (i) {
        i->kind = kind;
    }
    return i;
}

dl_ir_literal *dl_ir_module_new_literal(dl_ir_module *m, dl_dtype dtype, int64_t n) {
    // A literal holds one double or int64 per element: n beyond what size_t can address is
    // refused here rather than wrapping the arena request.
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(double)) {
        return NULL;
    }
    dl_ir_literal *l = DL_ARENA_NEW(&m->arena, dl_ir_literal);
    if (!l) {
        return NULL;
    }
    l->n = n;
    if (dl_dtype_is_float(dtype)) {
        l->f = DL_ARENA_NEWN(&m->arena, double, n ? n : 1);
        if (!l->f) {
            return NULL;
        }
    } else {
        l->i = DL_ARENA_NEWN(&m->arena, int64_t, n ? n : 1);
        if (!l->i) {
            return NULL;
        }
    }
    return l;
}

// ---------------------------------------------------------------------------------------------
// Attributes

const dl_ir_attr *dl_ir_node_attr(const dl_ir_node *n, const char *name) {
    for (size_t i = 0; i < n->n_attrs; i++) {
        if (strcmp(n->attrs[i].name, name) == 0) {
            return &n->attrs[i];
        }
    }
    return NULL;
}

int64_t dl_ir_node_attr_int(const dl_ir_node *n, const char *name) {
    const dl_ir_attr *a = dl_ir_node_attr(n, name);
    if (a && a->kind == DL_IR_ATTR_INT) {
        return a->i;
    }
    const dl_ir_attr_spec *s = dl_ir_op_find_attr_spec(n->op, name);
    DL_ASSERT(s != NULL && s->kind == DL_IR_ATTR_INT);
    return s->def_i;
}

double dl_ir_node_attr_float(const dl_ir_node *n, const char *name) {
    const dl_ir_attr *a = dl_ir_node_attr(n, name);
    if (a && a->kind == DL_IR_ATTR_FLOAT) {
        return a->f;
    }
    if (a && a->kind == DL_IR_ATTR_INT) {
        return (double)a->i;
    }
    const dl_ir_attr_spec *s = dl_ir_op_find_attr_spec(n->op, name);
    DL_ASSERT(s != NULL && s->kind == DL_IR_ATTR_FLOAT);
    return s->def_f;
}

const char *dl_ir_node_attr_string(const dl_ir_node *n, const char *name) {
    const dl_ir_attr *a = dl_ir_node_attr(n, name);
    if (a && a->kind == DL_IR_ATTR_STRING) {
        return a->s;
    }
    const dl_ir_attr_spec *s = dl_ir_op_find_attr_spec(n->op, name);
    DL_ASSERT(s != NULL && s->kind == DL_IR_ATTR_STRING);
    return s->def_s;
}

// ---------------------------------------------------------------------------------------------
// Types

// Checked product of t's dims, each 0 counted as 1 when `zero_as_one` (then the result bounds
// every product of a subset of the dims). False on overflow or a negative dim.
static bool dims_product(const dl_ir_type *t, bool zero_as_one, int64_t *out) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++) {
        int64_t v = t->dims[i].value;
        if (v < 0) {
            return false;
        }
        if (v == 0 && zero_as_one) {
            v = 1;
        }
        if (__builtin_mul_overflow(n, v, &n)) {
            return false;
        }
    }
    *out = n;
    return true;
}

int64_t dl_ir_type_numel(const dl_ir_type *t) {
    int64_t n;
    if (t->rank < 0) {
        return 1; // not inferred yet: what the plain product over no dims gave
    }
    return dims_product(t, false, &n) ? n : INT64_MAX;
}

bool dl_ir_type_size(const dl_ir_type *t, int64_t *numel, int64_t *nbytes) {
    *numel = INT64_MAX;
    *nbytes = INT64_MAX;
    int64_t n;
    if (t->rank < 0 || (unsigned)t->dtype >= DL_DT_COUNT || !dims_product(t, false, &n)) {
        return false;
    }
    *numel = n;
    return !__builtin_mul_overflow(n, (int64_t)dl_dtype_size(t->dtype), nbytes);
}

// "float[2, 3]" with dim values (no symbols: a message about sizes wants the numbers), without
// allocating.
static void format_type_values(const dl_ir_type *t, char *buf, size_t size) {
    char shape[256];
    dl_ir_type_format_shape(t, shape, sizeof shape);
    snprintf(buf, size, "%s%s", dl_dtype_name(t->dtype), shape);
}

// "1 TiB", "256 MiB" for power-of-two limits, else "N bytes".
static void format_bytes(int64_t v, char *buf, size_t size) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t u = 0;
    while (u + 1 < DL_ARRAY_LEN(units) && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, "%lld %s", (long long)v, units[u]);
}

bool dl_ir_type_check_limit(const dl_ir_type *t, int64_t max_bytes, const char *what, char *why,
                            size_t why_size) {
    int64_t span, numel, nbytes;
    int64_t esz = (unsigned)t->dtype < DL_DT_COUNT ? (int64_t)dl_dtype_size(t->dtype) : 8;
    bool overflow = !dims_product(t, true, &span) || __builtin_mul_overflow(span, esz, &span);
    if (!overflow && span <= max_bytes) {
        return true; // the common case formats nothing (shape rules never allocate)
    }
    if (why_size == 0) {
        return false;
    }
    char ty[300], lim[40];
    format_type_values(t, ty, sizeof ty);
    format_bytes(max_bytes, lim, sizeof lim);
    bool negative = false;
    for (int32_t i = 0; i < t->rank; i++) {
        negative |= t->dims[i].value < 0;
    }
    if (negative) {
        snprintf(why, why_size, "%s has a negative dim", ty);
        return false;
    }
    if (overflow) {
        snprintf(why, why_size,
                 "%s is too large: its size overflows int64 (the limit for %s is %lld bytes, "
                 "%s)",
                 ty, what, (long long)max_bytes, lim);
        return false;
    }
    if (dl_ir_type_size(t, &numel, &nbytes) && numel == 0) {
        // A zero-size tensor whose other dims are still out of bounds.
        snprintf(why, why_size,
                 "%s is too large: its non-zero dims span %lld bytes, more than the limit of "
                 "%lld bytes (%s) for %s",
                 ty, (long long)span, (long long)max_bytes, lim, what);
    } else {
        snprintf(why, why_size,
                 "%s is too large: %lld elements of %lld bytes are %lld bytes, more than the "
                 "limit of %lld bytes (%s) for %s",
                 ty, (long long)numel, (long long)esz, (long long)nbytes, (long long)max_bytes, lim,
                 what);
    }
    return false;
}

bool dl_ir_type_equal(const dl_ir_type *a, const dl_ir_type *b) {
    return a->dtype == b->dtype && dl_ir_type_same_dims(a, b);
}

bool dl_ir_type_same_dims(const dl_ir_type *a, const dl_ir_type *b) {
    if (a->rank != b->rank) {
        return false;
    }
    for (int32_t i = 0; i < a->rank; i++) {
        if (a->dims[i].value != b->dims[i].value) {
            return false;
        }
    }
    return true;
}

bool dl_ir_type_per_channel_of(const dl_ir_type *v, const dl_ir_type *t) {
    if (v->rank > t->rank || t->rank < 2) {
        return false;
    }
    for (int32_t i = 0; i < v->rank; i++) {
        int64_t d = v->dims[i].value;
        if (d != 1 && (t->rank - v->rank + i != 1 || d != t->dims[1].value)) {
            return false;
        }
    }
    return true;
}

void dl_ir_type_format(const dl_ir_module *m, const dl_ir_type *t, char *buf, size_t size) {
    dl_strbuf b = {0};
    dl_strbuf_puts(&b, dl_dtype_name(t->dtype));
    dl_strbuf_puts(&b, "[");
    for (int32_t i = 0; i < t->rank; i++) {
        if (i) {
            dl_strbuf_puts(&b, ", ");
        }
        int32_t s = t->dims[i].sym;
        if (m && s >= 0 && (size_t)s < m->dims.len) {
            dl_strbuf_puts(&b, m->dims.data[s].name);
        } else {
            dl_strbuf_printf(&b, "%lld", (long long)t->dims[i].value);
        }
    }
    dl_strbuf_puts(&b, t->rank < 0 ? "?]" : "]");
    snprintf(buf, size, "%s", b.data ? b.data : "?");
    dl_strbuf_fini(&b);
}

void dl_ir_type_format_shape(const dl_ir_type *t, char *buf, size_t size) {
    if (t->rank < 0) {
        snprintf(buf, size, "[?]");
        return;
    }
    int64_t d[DL_MAX_RANK];
    for (int32_t i = 0; i < t->rank; i++) {
        d[i] = t->dims[i].value;
    }
    dl_shape_format(d, t->rank, buf, size);
}

static void rebind_type(dl_ir_type *t, int32_t sym, int64_t value) {
    for (int32_t i = 0; i < t->rank; i++) {
        if (t->dims[i].sym == sym) {
            t->dims[i].value = value;
        }
    }
}

static void rebind_attrs(dl_ir_attr *attrs, size_t n, int32_t sym, int64_t value) {
    for (size_t k = 0; k < n; k++) {
        dl_ir_attr *a = &attrs[k];
        if (a->kind == DL_IR_ATTR_INT && a->i_sym == sym) {
            a->i = value;
        }
        if (a->kind == DL_IR_ATTR_INTS && a->int_syms) {
            for (size_t j = 0; j < a->n; j++) {
                if (a->int_syms[j] == sym) {
                    a->ints[j] = value;
                }
            }
        }
    }
}

dl_status dl_ir_module_bind_dim(dl_ir_module *m, const char *name, int64_t value, dl_diags *d) {
    int32_t sym = dl_ir_module_find_dim(m, name);
    if (sym < 0) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "-D %s: model '%s' has no dim named '%s'", name,
                m->name, name);
        return DL_ERR_INVALID_ARG;
    }
    if (value < 1) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "-D %s=%lld: a dim must be at least 1", name,
                (long long)value);
        return DL_ERR_INVALID_ARG;
    }
    if (value > DL_IR_MAX_TENSOR_BYTES) {
        // No tensor can have such a dim (DL_IR_MAX_TENSOR_BYTES bounds every dim too).
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "-D %s=%lld: a dim must be at most %lld (2^40)", name,
                (long long)value, (long long)DL_IR_MAX_TENSOR_BYTES);
        return DL_ERR_INVALID_ARG;
    }
    m->dims.data[sym].value = value;
    for (size_t i = 0; i < m->values.len; i++) {
        dl_ir_value *v = m->values.data[i];
        if (v->kind == DL_IR_VAL_NODE) {
            v->type.rank = -1;
        } else {
            rebind_type(&v->type, sym, value);
        }
    }
    for (size_t i = 0; i < m->nodes.len; i++) {
        dl_ir_node *n = m->nodes.data[i];
        rebind_attrs(n->attrs, n->n_attrs, sym, value);
    }
    return DL_OK;
}

uint64_t dl_ir_init_seed(const dl_ir_value *param) {
    if (param->init && param->init->has_seed) {
        return param->init->seed;
    }
    return dl_hash_fnv1a64(param->name);
}

void dl_ir_type_fans(const dl_ir_type *t, double *fan_in, double *fan_out) {
    if (t->rank <= 0) {
        *fan_in = *fan_out = 1;
    } else if (t->rank == 1) {
        *fan_in = *fan_out = (double)t->dims[0].value;
    } else if (t->rank == 2) {
        *fan_in = (double)t->dims[0].value;
        *fan_out = (double)t->dims[1].value;
    } else {
        double rf = 1;
        for (int32_t i = 2; i < t->rank; i++) {
            rf *= (double)t->dims[i].value;
        }
        *fan_in = (double)t->dims[1].value * rf;
        *fan_out = (double)t->dims[0].value * rf;
    }
}

void dl_ir_conv_pads(const char *auto_pad, int64_t in, int64_t out, int64_t k, int64_t stride,
                     int64_t dil, int64_t pad_begin, int64_t pad_end, int64_t *pb, int64_t *pe) {
    *pb = pad_begin;
    *pe = pad_end;
    if (strcmp(auto_pad, "VALID") == 0) {
        *pb = *pe = 0;
    } else if (strncmp(auto_pad, "SAME", 4) == 0) {
        int64_t total = (out - 1) * stride + (k - 1) * dil + 1 - in;
        total = total < 0 ? 0 : total;
        *pb = strcmp(auto_pad, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        *pe = total - *pb;
    }
}

static void mark_root(uint8_t *mark, const dl_ir_value *v) {
    if (v) {
        mark[v->id] = 1;
    }
}

void dl_ir_module_mark_roots(const dl_ir_module *m, uint8_t *mark) {
    for (size_t i = 0; i < m->outputs.len; i++) {
        mark_root(mark, m->outputs.data[i]);
    }
    mark_root(mark, m->train_loss);
    mark_root(mark, m->grad_seed);
    mark_root(mark, m->step_counter);
    for (size_t i = 0; i < m->grads.len; i++) {
        mark_root(mark, m->grads.data[i]);
    }
    for (size_t i = 0; i < m->assigns.len; i++) {
        mark_root(mark, m->assigns.data[i].value);
        mark_root(mark, m->assigns.data[i].param);
    }
}

void dl_ir_module_mark_deps(const dl_ir_module *m, const dl_ir_value *const *roots, size_t n_roots,
                            uint8_t *live) {
    for (size_t i = 0; i < n_roots; i++) {
        live[roots[i]->id] = 1;
    }
    // Nodes are in a topological order: one backward sweep sees every user before its inputs.
    for (size_t k = m->nodes.len; k-- > 0;) {
        const dl_ir_node *n = m->nodes.data[k];
        bool needed = false;
        for (size_t o = 0; o < n->n_outputs && !needed; o++) {
            needed = live[n->outputs[o]->id] != 0;
        }
        for (size_t i = 0; needed && i < n->n_inputs; i++) {
            if (n->inputs[i]) {
                live[n->inputs[i]->id] = 1;
            }
        }
    }
}

dl_status dl_ir_module_keep_outputs(dl_ir_module *m, dl_ir_value *const *keep, size_t n_keep) {
    if (m->has_backward) {
        return DL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n_keep; i++) {
        if (!keep[i]->is_output) {
            return DL_ERR_INVALID_ARG;
        }
    }
    size_t nv = m->values.len, nn = m->nodes.len;
    uint8_t *live = dl_mem_calloc(nv ? nv : 1, 1);
    uint8_t *dead = dl_mem_calloc(nn ? nn : 1, 1);
    if (!live || !dead) {
        free(live);
        free(dead);
        return DL_ERR_NOMEM;
    }
    dl_ir_module_mark_deps(m, (const dl_ir_value *const *)keep, n_keep, live);
    for (size_t k = 0; k < nn; k++) {
        const dl_ir_node *n = m->nodes.data[k];
        bool needed = false;
        for (size_t o = 0; o < n->n_outputs && !needed; o++) {
            needed = live[n->outputs[o]->id] != 0;
        }
        dead[k] = !needed;
    }
    // The outputs, the train block and their statements first (nothing left may refer to a
    // removed value), then the nodes. Only remove_nodes allocates, before it changes anything,
    // so on DL_ERR_NOMEM the module is restored from the saved output list.
    size_t n_out = m->outputs.len;
    dl_ir_value **saved = dl_mem_alloc((n_out ? n_out : 1) * sizeof *saved);
    if (!saved) {
        free(live);
        free(dead);
        return DL_ERR_NOMEM;
    }
    memcpy(saved, m->outputs.data, n_out * sizeof *saved);
    size_t ko = 0;
    for (size_t i = 0; i < n_out; i++) {
        dl_ir_value *v = m->outputs.data[i];
        bool kept = false;
        for (size_t j = 0; j < n_keep && !kept; j++) {
            kept = keep[j] == v;
        }
        v->is_output = kept;
        if (kept) {
            m->outputs.data[ko++] = v;
        }
    }
    m->outputs.len = ko;
    dl_ir_train *train = m->train;
    m->train = NULL;
    dl_status st = dl_ir_module_remove_nodes(m, dead);
    if (st != DL_OK) {
        memcpy(m->outputs.data, saved, n_out * sizeof *saved);
        m->outputs.len = n_out;
        for (size_t i = 0; i < n_out; i++) {
            saved[i]->is_output = true;
        }
        m->train = train;
    } else {
        // Statements of what is gone but still defined: outputs no longer listed, the train block.
        size_t ks = 0;
        for (size_t i = 0; i < m->stmts.len; i++) {
            dl_ir_stmt t = m->stmts.data[i];
            if (t.kind == DL_IR_STMT_TRAIN ||
                (t.kind == DL_IR_STMT_OUTPUT && !m->values.data[t.index]->is_output)) {
                continue;
            }
            m->stmts.data[ks++] = t;
        }
        m->stmts.len = ks;
    }
    free(saved);
    free(live);
    free(dead);
    return st;
}
