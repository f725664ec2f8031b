// tests/codegen/cg_check.c — see cg_check.h. The reference evaluator is the oracle.
#include "cg_check.h"

#include "dl_base.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_pass.h"
#include "dlrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_diags(dl_diags *d) {
    char *s = NULL;
    if (dl_diags_render(d, &s) == DL_OK && s) {
        fputs(s, stderr);
    }
    free(s);
}

static void fill_input(const dl_ir_value *v, dl_tensor *t, cg_tol tol, uint64_t seed) {
    int64_t n = dl_tensor_numel(t);
    bool pos = strncmp(v->name, "pos_", 4) == 0;
    int64_t hi = tol.int_hi > 0 ? tol.int_hi : 3;
    for (int64_t i = 0; i < n; i++) {
        double u = dl_rng_uniform(seed, (uint64_t)i);
        double x;
        if (dl_dtype_is_float(t->dtype)) {
            x = pos ? 0.1 + 2.0 * u : -2.0 + 4.0 * u;
        } else if (t->dtype == DL_DT_BOOL) {
            x = u < 0.5;
        } else {
            x = floor(u * (double)hi);
        }
        dl_tensor_set(t, i, x);
    }
}

static bool close_enough(double g, double r, cg_tol tol) {
    if (isnan(g) && isnan(r)) {
        return true;
    }
    if (g == r) {
        return true;
    }
    return fabs(g - r) <= tol.atol + tol.rtol * fabs(r);
}

bool cg_check(const char *text, cg_tol tol) {
    bool ok = false;
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    dl_tensor *ins = NULL, *refs = NULL;
    uint8_t *art = NULL;
    size_t art_len = 0;
    dlrt_model *rm = NULL;
    dlrt_session *s = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        return false;
    }
    if (dl_fe_parse("case.dlg", text, strlen(text), d, &m) != DL_OK ||
        dl_pass_shape(m, d) != DL_OK || dl_ir_verify(m, d) != DL_OK) {
        fprintf(stderr, "cg_check: model does not check:\n%s\n", text);
        print_diags(d);
        goto out;
    }
    ins = calloc(m->inputs.len + 1, sizeof *ins);
    refs = calloc(m->outputs.len + 1, sizeof *refs);
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < v->type.rank; k++) {
            dims[k] = v->type.dims[k].value;
        }
        if (dl_tensor_alloc(&ins[i], v->type.dtype, v->type.rank, dims) != DL_OK) {
            goto out;
        }
        fill_input(v, &ins[i], tol, (tol.seed ? tol.seed : 1) * 1000 + i);
    }
    dl_ir_eval_opts opts = {NULL, 0, false};
    if (dl_ir_eval(m, &opts, ins, refs, d) != DL_OK) {
        fprintf(stderr, "cg_check: reference evaluation failed:\n%s\n", text);
        print_diags(d);
        goto out;
    }
    if (dl_cg_compile(m, NULL, d, &art, &art_len) != DL_OK) {
        fprintf(stderr, "cg_check: compile failed:\n%s\n", text);
        print_diags(d);
        goto out;
    }
    if (dlrt_model_load_memory(art, art_len, &rm) != DLRT_OK ||
        dlrt_session_create(rm, &s) != DLRT_OK) {
        fprintf(stderr, "cg_check: runtime: %s\n", dlrt_last_error());
        goto out;
    }
    for (size_t i = 0; i < m->inputs.len; i++) {
        if (dlrt_session_set_input(s, m->inputs.data[i]->name, ins[i].data,
                                   dl_tensor_nbytes(&ins[i])) != DLRT_OK) {
            fprintf(stderr, "cg_check: set_input: %s\n", dlrt_last_error());
            goto out;
        }
    }
    if (dlrt_session_infer(s) != DLRT_OK) {
        fprintf(stderr, "cg_check: infer: %s\n", dlrt_last_error());
        goto out;
    }
    ok = true;
    for (size_t j = 0; j < m->outputs.len; j++) {
        const dl_ir_value *v = m->outputs.data[j];
        const void *data;
        if (dlrt_session_output(s, v->name, &data, NULL) != DLRT_OK) {
            fprintf(stderr, "cg_check: output %s: %s\n", v->name, dlrt_last_error());
            ok = false;
            continue;
        }
        dl_tensor got = refs[j];
        got.data = (void *)(uintptr_t)data;
        int64_t n = dl_tensor_numel(&refs[j]);
        int bad = 0;
        cg_tol t = tol;
        if (!dl_dtype_is_float(v->type.dtype)) {
            t.atol = t.rtol = 0;
        }
        for (int64_t i = 0; i < n; i++) {
            double g = dl_tensor_get(&got, i), r = dl_tensor_get(&refs[j], i);
            if (!close_enough(g, r, t)) {
                if (bad == 0) {
                    fprintf(stderr, "cg_check: output '%s' differs from the reference:\n%s\n",
                            v->name, text);
                }
                if (bad < 5) {
                    fprintf(stderr, "  [%lld] got %.9g, reference %.9g (|diff| %.3g)\n",
                            (long long)i, g, r, fabs(g - r));
                }
                bad++;
            }
        }
        if (bad) {
            fprintf(stderr, "  %d of %lld elements differ (atol %g, rtol %g)\n", bad, (long long)n,
                    t.atol, t.rtol);
            ok = false;
        }
    }
out:
    dlrt_session_destroy(s);
    dlrt_model_release(rm);
    free(art);
    if (m) {
        for (size_t i = 0; ins && i < m->inputs.len; i++) {
            dl_tensor_free(&ins[i]);
        }
        for (size_t i = 0; refs && i < m->outputs.len; i++) {
            dl_tensor_free(&refs[i]);
        }
    }
    free(ins);
    free(refs);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return ok;
}
