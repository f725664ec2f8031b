// ir/eval.c — the reference evaluator's driver (the oracle every backend is tested against):
// param materialisation, input checking, the walk over nodes in statement order, rounding of
// node outputs to their dtype, and conversion at the boundary (dl_tensor <-> double arrays).
//
// Data structures: one dl_ir__et (double array + dtype + shape) per value id, all held until
// the end of the evaluation. Invariants: a value's tensor exists before any node that reads it
// (statement order is topological); node outputs get the shape of their inferred type (the
// shape pass's result), so an unknown type (rank -1) is an error here, not a guess.
// Precision: float values stay in double between nodes; float16/bfloat16 round at each node;
// int32 wraps; int64 lives in double (exact up to 2^53, which is enough for an oracle).
#include "dl_ir.h"
#include "dl_tensor_io.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Index helpers shared with the kernels

void dl_ir__unravel(int64_t flat, const int64_t *dims, int32_t rank, int64_t *coord) {
    for (int32_t i = rank - 1; i >= 0; i--) {
        int64_t dm = dims[i] > 0 ? dims[i] : 1;
        coord[i] = flat % dm;
        flat /= dm;
    }
}

int64_t dl_ir__ravel(const int64_t *coord, const int64_t *dims, int32_t rank) {
    int64_t f = 0;
    for (int32_t i = 0; i < rank; i++) {
        f = f * dims[i] + coord[i];
    }
    return f;
}

int64_t dl_ir__bcast_index(const dl_ir__et *t, const int64_t *oc, int32_t orank) {
    int64_t f = 0;
    for (int32_t i = 0; i < t->rank; i++) {
        int32_t oi = orank - t->rank + i;
        int64_t c = (t->dims[i] == 1 || oi < 0) ? 0 : oc[oi];
        f = f * t->dims[i] + c;
    }
    return f;
}

bool dl_ir__bcast_ok(const dl_ir__et *t, const int64_t *dims, int32_t rank) {
    if (t->rank > rank) {
        return false;
    }
    for (int32_t i = 0; i < t->rank; i++) {
        int64_t o = dims[rank - t->rank + i];
        if (t->dims[i] != 1 && t->dims[i] != o) {
            return false;
        }
    }
    return true;
}

bool dl_ir__axis(int64_t axis, int32_t rank, int32_t *out) {
    if (axis < -(int64_t)rank || axis >= (int64_t)rank) {
        return false;
    }
    *out = (int32_t)(axis < 0 ? axis + rank : axis);
    return true;
}

dl_status dl_ir__node_err(dl_ir__ectx *cx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dl_ir_node_vdiag(cx->d, DL_SEV_ERROR, cx->node, DL_NO_LOC, NULL, fmt, ap);
    va_end(ap);
    return DL_ERR_INVALID_ARG;
}

// ---------------------------------------------------------------------------------------------
// Evaluator tensors

static void et_free(dl_ir__et *t) {
    free(t->d);
    t->d = NULL;
}

static dl_status et_alloc(dl_ir__et *t, dl_dtype dt, int32_t rank, const int64_t *dims) {
    t->dtype = dt;
    t->rank = rank;
    t->n = 1;
    for (int32_t i = 0; i < DL_MAX_RANK; i++) {
        t->dims[i] = i < rank ? dims[i] : 0;
    }
    for (int32_t i = 0; i < rank; i++) {
        t->n *= dims[i];
    }
    t->d = dl_mem_calloc((size_t)(t->n ? t->n : 1), sizeof(double));
    return t->d ? DL_OK : DL_ERR_NOMEM;
}

static void type_dims(const dl_ir_type *ty, int64_t *dims) {
    for (int32_t i = 0; i < ty->rank; i++) {
        dims[i] = ty->dims[i].value;
    }
}

// Rounds v to what a tensor of dtype `dt` can hold (float stays double: see the file comment).
static double round_to(dl_dtype dt, double v) {
    switch (dt) {
    case DL_DT_FLOAT:
        return v;
    case DL_DT_FLOAT16:
        return dl_f16_to_f32(dl_f32_to_f16((float)v));
    case DL_DT_BFLOAT16:
        return dl_bf16_to_f32(dl_f32_to_bf16((float)v));
    case DL_DT_INT32:
    case DL_DT_INT64: {
        if (isnan(v)) {
            return 0;
        }
        double t = trunc(v);
        if (t >= 9.2233720368547758e18) {
            t = 9.2233720368547758e18;
        } else if (t <= -9.2233720368547758e18) {
            t = -9.2233720368547758e18;
        }
        if (dt == DL_DT_INT64) {
            return t;
        }
        // Two's-complement wrap to 32 bits, as a C int32 add/mul would (done on unsigned).
        int64_t i = (int64_t)t;
        uint32_t u = (uint32_t)(uint64_t)i;
        return (double)(int32_t)u;
    }
    case DL_DT_BOOL:
        return v != 0.0 ? 1.0 : 0.0;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

static void et_round(dl_ir__et *t) {
    if (t->dtype == DL_DT_FLOAT) {
        return;
    }
    for (int64_t i = 0; i < t->n; i++) {
        t->d[i] = round_to(t->dtype, t->d[i]);
    }
}

static dl_status et_from_tensor(dl_ir__et *t, const dl_tensor *src) {
    DL_TRY(et_alloc(t, src->dtype, src->rank, src->dims));
    for (int64_t i = 0; i < t->n; i++) {
        t->d[i] = dl_tensor_get(src, i);
    }
    return DL_OK;
}

static dl_status et_to_tensor(const dl_ir__et *t, dl_tensor *out) {
    DL_TRY(dl_tensor_alloc(out, t->dtype, t->rank, t->dims));
    for (int64_t i = 0; i < t->n; i++) {
        dl_tensor_set(out, i, t->d[i]);
    }
    return DL_OK;
}

static void format_tensor_type(dl_dtype dt, int32_t rank, const int64_t *dims, char *buf,
                               size_t size) {
    char shape[256];
    dl_shape_format(dims, rank, shape, sizeof shape);
    snprintf(buf, size, "%s%s", dl_dtype_name(dt), shape);
}

// Checks a caller tensor against a declared type; the message names both ("input 'x': expected
// float[128, 784], got float[64, 784]").
static dl_status check_tensor(const char *what, const dl_ir_value *v, const dl_tensor *t,
                              dl_diags *d) {
    bool ok = t->dtype == v->type.dtype && t->rank == v->type.rank;
    for (int32_t i = 0; ok && i < t->rank; i++) {
        ok = t->dims[i] == v->type.dims[i].value;
    }
    if (ok && !t->data && dl_tensor_numel(t) > 0) {
        dl_diag(d, DL_SEV_ERROR, v->loc, "%s '%s': tensor has no data", what, v->name);
        return DL_ERR_INVALID_ARG;
    }
    if (ok) {
        return DL_OK;
    }
    int64_t dims[DL_MAX_RANK];
    type_dims(&v->type, dims);
    char want[300], got[300];
    format_tensor_type(v->type.dtype, v->type.rank, dims, want, sizeof want);
    if (t->rank < 0 || t->rank > DL_MAX_RANK || (unsigned)t->dtype >= DL_DT_COUNT) {
        snprintf(got, sizeof got, "an invalid tensor (rank %d)", (int)t->rank);
    } else {
        format_tensor_type(t->dtype, t->rank, t->dims, got, sizeof got);
    }
    dl_diag(d, DL_SEV_ERROR, v->loc, "%s '%s': expected %s, got %s", what, v->name, want, got);
    return DL_ERR_INVALID_ARG;
}

// ---------------------------------------------------------------------------------------------
// Param materialisation
//
// Initialiser conventions (copied into docs/graph-format.md, "Seeded initialisers"):
//   seed S = dl_ir_init_seed(param): the `seed` argument, or FNV-1a 64 of the param name.
//   Element i (C order) of the param uses counter i:
//     uniform(a, b)    a + (b - a) * dl_rng_uniform(S, i)
//     normal(a, b)     a + b * dl_rng_normal(S, i)                (b is the standard deviation)
//     glorot_uniform   -l + 2l * dl_rng_uniform(S, i),  l = sqrt(6 / (fan_in + fan_out))
//     he_normal        sqrt(2 / fan_in) * dl_rng_normal(S, i)
//   fan_in / fan_out by rank:
//     0  []               1, 1
//     1  [n]              n, n
//     2  [in, out]        dims[0], dims[1]  (weights are used as x[N, in] @ w[in, out])
//     >= 3 conv kernel [out, in/group, k...]: fan_in = dims[1] * prod(k),
//                                             fan_out = dims[0] * prod(k)
//   The value is computed in double and rounded once to the param's dtype.

static dl_status materialize_file(const dl_ir_module *m, const dl_ir_value *p, dl_tensor *out,
                                  dl_diags *d) {
    const dl_ir_init *in = p->init;
    dl_src_loc loc = in->loc.file ? in->loc : p->loc;
    char path[4096];
    if (in->path[0] == '/' || !m->source_dir || !m->source_dir[0]) {
        snprintf(path, sizeof path, "%s", in->path);
    } else {
        snprintf(path, sizeof path, "%s/%s", m->source_dir, in->path);
    }
    char err[256] = "";
    dl_tensor t = {0};
    dl_status st = dl_safetensors_read_tensor(path, in->tensor, &t, err, sizeof err);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, loc, "param '%s': cannot load tensor '%s' from '%s': %s", p->name,
                in->tensor, path, err[0] ? err : dl_status_str(st));
        return st;
    }
    bool ok = t.dtype == p->type.dtype && t.rank == p->type.rank;
    for (int32_t i = 0; ok && i < t.rank; i++) {
        ok = t.dims[i] == p->type.dims[i].value;
    }
    if (!ok) {
        int64_t dims[DL_MAX_RANK];
        type_dims(&p->type, dims);
        char want[300], got[300];
        format_tensor_type(p->type.dtype, p->type.rank, dims, want, sizeof want);
        format_tensor_type(t.dtype, t.rank, t.dims, got, sizeof got);
        dl_diag(d, DL_SEV_ERROR, loc,
                "param '%s': tensor '%s' in '%s' is %s but the param is declared %s", p->name,
                in->tensor, path, got, want);
        dl_tensor_free(&t);
        return DL_ERR_INVALID_ARG;
    }
    *out = t;
    return DL_OK;
}

dl_status dl_ir_param_materialize(const dl_ir_module *m, const dl_ir_value *param, dl_tensor *out,
                                  dl_diags *d) {
    out->data = NULL;
    const dl_ir_init *in = param->init;
    if (param->kind != DL_IR_VAL_PARAM || !in || param->type.rank < 0) {
        dl_diag(d, DL_SEV_ERROR, param->loc, "'%s' is not a param with an initialiser",
                param->name);
        return DL_ERR_INVALID_ARG;
    }
    if (in->kind == DL_IR_INIT_FILE) {
        return materialize_file(m, param, out, d);
    }
    int64_t dims[DL_MAX_RANK];
    type_dims(&param->type, dims);
    DL_TRY(dl_tensor_alloc(out, param->type.dtype, param->type.rank, dims));
    int64_t n = dl_tensor_numel(out);
    uint64_t seed = dl_ir_init_seed(param);
    double fan_in, fan_out;
    dl_ir_type_fans(&param->type, &fan_in, &fan_out);
    if (in->kind == DL_IR_INIT_LITERAL) {
        const dl_ir_literal *l = in->lit;
        if (!l || !(l->is_splat ? l->n == 1 : l->n == n)) {
            dl_diag(d, DL_SEV_ERROR, in->loc.file ? in->loc : param->loc,
                    "param '%s': literal has %lld values, the type needs %lld", param->name,
                    l ? (long long)l->n : 0LL, (long long)n);
            dl_tensor_free(out);
            return DL_ERR_INVALID_ARG;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        double v = 0;
        switch (in->kind) {
        case DL_IR_INIT_ZEROS:
            v = 0;
            break;
        case DL_IR_INIT_ONES:
            v = 1;
            break;
        case DL_IR_INIT_CONSTANT:
            v = in->a;
            break;
        case DL_IR_INIT_UNIFORM:
            v = in->a + (in->b - in->a) * dl_rng_uniform(seed, (uint64_t)i);
            break;
        case DL_IR_INIT_NORMAL:
            v = in->a + in->b * dl_rng_normal(seed, (uint64_t)i);
            break;
        case DL_IR_INIT_GLOROT_UNIFORM: {
            double l = sqrt(6.0 / (fan_in + fan_out));
            v = -l + 2.0 * l * dl_rng_uniform(seed, (uint64_t)i);
            break;
        }
        case DL_IR_INIT_HE_NORMAL:
            v = sqrt(2.0 / fan_in) * dl_rng_normal(seed, (uint64_t)i);
            break;
        case DL_IR_INIT_LITERAL: {
            int64_t k = in->lit->is_splat ? 0 : i;
            v = in->lit->f ? in->lit->f[k] : (double)in->lit->i[k];
            break;
        }
        case DL_IR_INIT_FILE:
            DL_UNREACHABLE();
        }
        dl_tensor_set(out, i, v);
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// The walk

static dl_status load_const(const dl_ir_value *v, dl_ir__et *t, dl_diags *d) {
    int64_t dims[DL_MAX_RANK];
    type_dims(&v->type, dims);
    DL_TRY(et_alloc(t, v->type.dtype, v->type.rank, dims));
    const dl_ir_literal *l = v->lit;
    if (!l || !(l->is_splat ? l->n == 1 : l->n == t->n) || (!l->f && !l->i)) {
        dl_diag(d, DL_SEV_ERROR, v->loc, "const '%s': literal has %lld values, the type needs %lld",
                v->name, l ? (long long)l->n : 0LL, (long long)t->n);
        return DL_ERR_INVALID_ARG;
    }
    for (int64_t i = 0; i < t->n; i++) {
        int64_t k = l->is_splat ? 0 : i;
        double x = l->f ? l->f[k] : (double)l->i[k];
        // A float const is stored as float32 by every backend, so round it like one.
        t->d[i] = v->type.dtype == DL_DT_FLOAT ? (double)(float)x : round_to(v->type.dtype, x);
    }
    return DL_OK;
}

static dl_status run_node(const dl_ir_module *m, const dl_ir_node *n, dl_ir__et *vals,
                          bool training, dl_diags *d) {
    dl_ir__ectx cx = {m, n, d, training};
    for (size_t k = 0; k < n->n_outputs; k++) {
        const dl_ir_value *o = n->outputs[k];
        if (o->type.rank < 0) {
            return dl_ir__node_err(&cx,
                                   "type of output '%s' is unknown (run shape inference "
                                   "before evaluating)",
                                   o->name);
        }
        int64_t dims[DL_MAX_RANK];
        type_dims(&o->type, dims);
        DL_TRY(et_alloc(&vals[o->id], o->type.dtype, o->type.rank, dims));
    }
    dl_ir__et *ins[64];
    if (n->n_inputs > DL_ARRAY_LEN(ins) || n->n_outputs > 64) {
        return dl_ir__node_err(&cx, "too many inputs or outputs for the evaluator (%zu, %zu)",
                               n->n_inputs, n->n_outputs);
    }
    for (size_t i = 0; i < n->n_inputs; i++) {
        ins[i] = n->inputs[i] ? &vals[n->inputs[i]->id] : NULL;
        if (ins[i] && !ins[i]->d) {
            return dl_ir__node_err(&cx, "input '%s' has no value", n->inputs[i]->name);
        }
    }
    // A node's output value ids need not be consecutive: gather them into a local array.
    dl_ir__et outs[64];
    for (size_t k = 0; k < n->n_outputs; k++) {
        outs[k] = vals[n->outputs[k]->id];
    }
    dl_status st = dl_ir__eval_node(&cx, ins, n->n_inputs, outs, n->n_outputs);
    for (size_t k = 0; k < n->n_outputs; k++) {
        et_round(&outs[k]);
        vals[n->outputs[k]->id] = outs[k];
    }
    return st;
}

static void free_vals(dl_ir__et *vals, size_t n) {
    if (!vals) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        et_free(&vals[i]);
    }
    free(vals);
}

// Evaluates everything into a fresh array of value tensors (*out_vals, free with free_vals).
static dl_status eval_values(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                             const dl_tensor *inputs, dl_ir__et **out_vals, dl_diags *d) {
    *out_vals = NULL;
    bool training = opts && opts->training;
    dl_status st = DL_OK;
    dl_ir__et *vals = dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof(dl_ir__et));
    if (!vals) {
        return DL_ERR_NOMEM;
    }
    if (m->inputs.len && !inputs) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "model '%s' has %zu inputs but none were given",
                m->name, m->inputs.len);
        st = DL_ERR_INVALID_ARG;
        goto out;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        if ((st = check_tensor("input", v, &inputs[i], d)) != DL_OK ||
            (st = et_from_tensor(&vals[v->id], &inputs[i])) != DL_OK) {
            goto out;
        }
    }
    if (opts && opts->params && opts->n_params != m->params.len) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "model '%s' has %zu params but %zu values were given",
                m->name, m->params.len, opts->n_params);
        st = DL_ERR_INVALID_ARG;
        goto out;
    }
    for (size_t i = 0; i < m->params.len; i++) {
        const dl_ir_value *v = m->params.data[i];
        if (opts && opts->params) {
            if ((st = check_tensor("param", v, &opts->params[i], d)) != DL_OK ||
                (st = et_from_tensor(&vals[v->id], &opts->params[i])) != DL_OK) {
                goto out;
            }
        } else {
            dl_tensor t = {0};
            if ((st = dl_ir_param_materialize(m, v, &t, d)) != DL_OK) {
                goto out;
            }
            st = et_from_tensor(&vals[v->id], &t);
            dl_tensor_free(&t);
            if (st != DL_OK) {
                goto out;
            }
        }
    }
    for (size_t i = 0; i < m->consts.len; i++) {
        const dl_ir_value *v = m->consts.data[i];
        if ((st = load_const(v, &vals[v->id], d)) != DL_OK) {
            goto out;
        }
    }
    for (size_t i = 0; i < m->nodes.len; i++) {
        if ((st = run_node(m, m->nodes.data[i], vals, training, d)) != DL_OK) {
            goto out;
        }
    }
out:
    if (st != DL_OK) {
        free_vals(vals, m->values.len);
        return st;
    }
    *out_vals = vals;
    return DL_OK;
}

dl_status dl_ir_eval(const dl_ir_module *m, const dl_ir_eval_opts *opts, const dl_tensor *inputs,
                     dl_tensor *out_outputs, dl_diags *d) {
    dl_ir__et *vals;
    DL_TRY(eval_values(m, opts, inputs, &vals, d));
    dl_status st = DL_OK;
    size_t k = 0;
    for (; k < m->outputs.len; k++) {
        const dl_ir_value *v = m->outputs.data[k];
        if (!vals[v->id].d) {
            dl_diag(d, DL_SEV_ERROR, v->loc, "output '%s' has no value", v->name);
            st = DL_ERR_INVALID_ARG;
            break;
        }
        if ((st = et_to_tensor(&vals[v->id], &out_outputs[k])) != DL_OK) {
            break;
        }
    }
    if (st != DL_OK) {
        for (size_t j = 0; j < k; j++) {
            dl_tensor_free(&out_outputs[j]);
        }
    }
    free_vals(vals, m->values.len);
    return st;
}

dl_status dl_ir_eval_all(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                         const dl_tensor *inputs, dl_tensor **out_values, dl_diags *d) {
    *out_values = NULL;
    dl_ir__et *vals;
    DL_TRY(eval_values(m, opts, inputs, &vals, d));
    size_t nv = m->values.len;
    dl_tensor *res = dl_mem_calloc(nv ? nv : 1, sizeof(dl_tensor));
    dl_status st = res ? DL_OK : DL_ERR_NOMEM;
    for (size_t i = 0; st == DL_OK && i < nv; i++) {
        if (vals[i].d) {
            st = et_to_tensor(&vals[i], &res[i]);
        }
    }
    free_vals(vals, nv);
    if (st != DL_OK) {
        for (size_t i = 0; res && i < nv; i++) {
            dl_tensor_free(&res[i]);
        }
        free(res);
        return st;
    }
    *out_values = res;
    return DL_OK;
}

dl_status dl_ir_eval_all_f64(const dl_ir_module *m, const dl_ir_eval_opts *opts,
                             const dl_tensor *inputs, double ***out_values, dl_diags *d) {
    *out_values = NULL;
    dl_ir__et *vals;
    DL_TRY(eval_values(m, opts, inputs, &vals, d));
    size_t nv = m->values.len;
    double **res = dl_mem_calloc(nv ? nv : 1, sizeof(double *));
    if (!res) {
        free_vals(vals, nv);
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < nv; i++) { // hand the evaluator's own arrays over
        res[i] = vals[i].d;
        vals[i].d = NULL;
    }
    free_vals(vals, nv);
    *out_values = res;
    return DL_OK;
}
