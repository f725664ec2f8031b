// ir/optim_ref.c — reference optimizer math (see dl_optim_ref.h). Every update transcribes
// PyTorch 2.x's _single_tensor_* functions, operation by operation, in double precision:
//   add(x, alpha=a)        x0 + a * x
//   addcmul(a, b, value=v) x0 + v * a * b
//   addcdiv(a, b, value=v) x0 + v * a / b
// PyTorch 2.x writes some running averages as lerp_(g, 1 - beta) where the documented algorithm
// says beta * m + (1 - beta) * g; we follow the documented form (the two differ by rounding
// only, ~1e-16 relative).
#include "dl_optim_ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double opt(const dl_ir_train *t, const char *name) {
    return dl_ir_train_opt_value(t, name);
}

void dl_optim_ref_hparams_from_train(const dl_ir_train *t, dl_optim_ref_hparams *out) {
    memset(out, 0, sizeof *out);
    out->lr = opt(t, "lr");
    out->weight_decay = opt(t, "weight_decay");
    switch (t->optimizer) {
    case DL_IR_OPTIM_SGD:
        out->momentum = opt(t, "momentum");
        out->dampening = opt(t, "dampening");
        out->nesterov = opt(t, "nesterov") != 0.0;
        break;
    case DL_IR_OPTIM_ADAM:
    case DL_IR_OPTIM_ADAMW:
        out->beta1 = opt(t, "beta1");
        out->beta2 = opt(t, "beta2");
        out->eps = opt(t, "eps");
        out->amsgrad = opt(t, "amsgrad") != 0.0;
        break;
    case DL_IR_OPTIM_RMSPROP:
        out->alpha = opt(t, "alpha");
        out->eps = opt(t, "eps");
        out->momentum = opt(t, "momentum");
        out->centered = opt(t, "centered") != 0.0;
        break;
    }
}

void dl_optim_ref_hparams_defaults(dl_ir_optim kind, dl_optim_ref_hparams *out) {
    dl_ir_train t;
    memset(&t, 0, sizeof t);
    t.optimizer = kind; // no attributes written: every value is the spec's default
    dl_optim_ref_hparams_from_train(&t, out);
}

static bool nonneg(double x) {
    return x >= 0.0 && isfinite(x); // false for NaN and infinities too
}

dl_status dl_optim_ref_hparams_check(dl_ir_optim kind, const dl_optim_ref_hparams *hp) {
    if (!hp || !nonneg(hp->lr) || !nonneg(hp->weight_decay)) {
        return DL_ERR_INVALID_ARG;
    }
    switch (kind) {
    case DL_IR_OPTIM_SGD:
        if (!nonneg(hp->momentum) || !isfinite(hp->dampening)) {
            return DL_ERR_INVALID_ARG;
        }
        if (hp->nesterov && (hp->momentum <= 0.0 || hp->dampening != 0.0)) {
            return DL_ERR_INVALID_ARG;
        }
        return DL_OK;
    case DL_IR_OPTIM_ADAM:
    case DL_IR_OPTIM_ADAMW:
        if (!nonneg(hp->eps) || !(hp->beta1 >= 0.0 && hp->beta1 < 1.0) ||
            !(hp->beta2 >= 0.0 && hp->beta2 < 1.0)) {
            return DL_ERR_INVALID_ARG;
        }
        return DL_OK;
    case DL_IR_OPTIM_RMSPROP:
        if (!nonneg(hp->eps) || !nonneg(hp->momentum) || !nonneg(hp->alpha)) {
            return DL_ERR_INVALID_ARG;
        }
        return DL_OK;
    }
    return DL_ERR_INVALID_ARG;
}

void dl_optim_ref_slots(dl_ir_optim kind, const dl_optim_ref_hparams *hp, const char **names,
                        size_t *n) {
    size_t k = 0;
    switch (kind) {
    case DL_IR_OPTIM_SGD:
        if (hp->momentum != 0.0) {
            names[k++] = "momentum_buffer";
        }
        break;
    case DL_IR_OPTIM_ADAM:
    case DL_IR_OPTIM_ADAMW:
        names[k++] = "exp_avg";
        names[k++] = "exp_avg_sq";
        if (hp->amsgrad) {
            names[k++] = "max_exp_avg_sq";
        }
        break;
    case DL_IR_OPTIM_RMSPROP:
        names[k++] = "square_avg";
        if (hp->momentum > 0.0) {
            names[k++] = "momentum_buffer";
        }
        if (hp->centered) {
            names[k++] = "grad_avg";
        }
        break;
    }
    *n = k;
}

// torch.optim.SGD (_single_tensor_sgd). PyTorch's "buffer is None" is step_t == 1 here.
static void step_sgd(const dl_optim_ref_hparams *hp, int64_t step_t, double *p, const double *grad,
                     double *const *slots, int64_t n) {
    double *buf = hp->momentum != 0.0 ? slots[0] : NULL;
    for (int64_t i = 0; i < n; i++) {
        double g = grad[i];
        if (hp->weight_decay != 0.0) {
            g = g + hp->weight_decay * p[i];
        }
        if (buf) {
            if (step_t == 1) {
                buf[i] = g; // torch.clone(grad): no dampening on the first step
            } else {
                buf[i] = buf[i] * hp->momentum + (1.0 - hp->dampening) * g;
            }
            g = hp->nesterov ? g + hp->momentum * buf[i] : buf[i];
        }
        p[i] = p[i] + (-hp->lr) * g;
    }
}

// torch.optim.Adam / AdamW (_single_tensor_adam, non-capturable branch). AdamW first decays the
// parameter (param.mul_(1 - lr * weight_decay)) and adds no L2 term to the gradient.
static void step_adam(bool is_adamw, const dl_optim_ref_hparams *hp, int64_t step_t, double *p,
                      const double *grad, double *const *slots, int64_t n) {
    double *m = slots[0], *v = slots[1], *vmax = hp->amsgrad ? slots[2] : NULL;
    double t = (double)step_t;
    double bias_correction1 = 1.0 - pow(hp->beta1, t);
    double bias_correction2 = 1.0 - pow(hp->beta2, t);
    double step_size = hp->lr / bias_correction1;
    double bias_correction2_sqrt = sqrt(bias_correction2);
    for (int64_t i = 0; i < n; i++) {
        double g = grad[i];
        if (is_adamw) {
            p[i] = p[i] * (1.0 - hp->lr * hp->weight_decay);
        } else if (hp->weight_decay != 0.0) {
            g = g + hp->weight_decay * p[i];
        }
        m[i] = m[i] * hp->beta1 + (1.0 - hp->beta1) * g;
        v[i] = v[i] * hp->beta2 + (1.0 - hp->beta2) * g * g;
        double denom;
        if (vmax) {
            vmax[i] = fmax(vmax[i], v[i]);
            denom = sqrt(vmax[i]) / bias_correction2_sqrt + hp->eps;
        } else {
            denom = sqrt(v[i]) / bias_correction2_sqrt + hp->eps;
        }
        p[i] = p[i] + (-step_size) * m[i] / denom;
    }
}

// torch.optim.RMSprop (_single_tensor_rmsprop). Its momentum buffer starts at zero.
static void step_rmsprop(const dl_optim_ref_hparams *hp, double *p, const double *grad,
                         double *const *slots, int64_t n) {
    size_t k = 0;
    double *sq = slots[k++];
    double *buf = hp->momentum > 0.0 ? slots[k++] : NULL;
    double *gavg = hp->centered ? slots[k++] : NULL;
    for (int64_t i = 0; i < n; i++) {
        double g = grad[i];
        if (hp->weight_decay != 0.0) {
            g = g + hp->weight_decay * p[i];
        }
        sq[i] = sq[i] * hp->alpha + (1.0 - hp->alpha) * g * g;
        double avg;
        if (gavg) {
            gavg[i] = gavg[i] * hp->alpha + (1.0 - hp->alpha) * g;
            avg = sqrt(sq[i] + (-1.0) * gavg[i] * gavg[i]);
        } else {
            avg = sqrt(sq[i]);
        }
        avg = avg + hp->eps;
        if (buf) {
            buf[i] = buf[i] * hp->momentum + g / avg;
            p[i] = p[i] + (-hp->lr) * buf[i];
        } else {
            p[i] = p[i] + (-hp->lr) * g / avg;
        }
    }
}

dl_status dl_optim_ref_step(dl_ir_optim kind, const dl_optim_ref_hparams *hp, int64_t step_t,
                            double *param, const double *grad, double *const *slots, int64_t n) {
    if (!hp || step_t < 1 || n < 0 || (n > 0 && (!param || !grad))) {
        return DL_ERR_INVALID_ARG;
    }
    const char *names[DL_OPTIM_REF_MAX_SLOTS];
    size_t n_slots;
    dl_optim_ref_slots(kind, hp, names, &n_slots);
    if (n_slots > 0 && !slots) {
        return DL_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n_slots; i++) {
        if (n > 0 && !slots[i]) {
            return DL_ERR_INVALID_ARG;
        }
    }
    switch (kind) {
    case DL_IR_OPTIM_SGD:
        step_sgd(hp, step_t, param, grad, slots, n);
        return DL_OK;
    case DL_IR_OPTIM_ADAM:
        step_adam(false, hp, step_t, param, grad, slots, n);
        return DL_OK;
    case DL_IR_OPTIM_ADAMW:
        step_adam(true, hp, step_t, param, grad, slots, n);
        return DL_OK;
    case DL_IR_OPTIM_RMSPROP:
        step_rmsprop(hp, param, grad, slots, n);
        return DL_OK;
    }
    return DL_ERR_INVALID_ARG;
}

dl_status dl_optim_ref_state_init(dl_optim_ref_state *s, dl_ir_optim kind,
                                  const dl_optim_ref_hparams *hp, int64_t n) {
    memset(s, 0, sizeof *s);
    if (!hp || n < 0) {
        return DL_ERR_INVALID_ARG;
    }
    s->kind = kind;
    s->hp = *hp;
    s->n = n;
    dl_optim_ref_slots(kind, hp, s->slot_names, &s->n_slots);
    for (size_t i = 0; i < s->n_slots; i++) {
        s->slots[i] = dl_mem_calloc(n > 0 ? (size_t)n : 1, sizeof(double));
        if (!s->slots[i]) {
            dl_optim_ref_state_fini(s);
            return DL_ERR_NOMEM;
        }
    }
    return DL_OK;
}

void dl_optim_ref_state_fini(dl_optim_ref_state *s) {
    for (size_t i = 0; i < DL_OPTIM_REF_MAX_SLOTS; i++) {
        free(s->slots[i]);
        s->slots[i] = NULL;
    }
    s->n_slots = 0;
}

dl_status dl_optim_ref_state_step(dl_optim_ref_state *s, double *param, const double *grad) {
    dl_status st = dl_optim_ref_step(s->kind, &s->hp, s->step + 1, param, grad, s->slots, s->n);
    if (st == DL_OK) {
        s->step++;
    }
    return st;
}

void dl_optim_ref_clip_global_norm(double *const *grads, const int64_t *ns, size_t n_params,
                                   double max_norm, double *out_total_norm) {
    if (n_params == 0) {
        if (out_total_norm) {
            *out_total_norm = 0.0;
        }
        return;
    }
    // total = || (||g_0||, ||g_1||, ...) ||, as torch.linalg.vector_norm(torch.stack(norms)).
    double sum_norms_sq = 0.0;
    for (size_t j = 0; j < n_params; j++) {
        double s = 0.0;
        for (int64_t i = 0; i < ns[j]; i++) {
            s += grads[j][i] * grads[j][i];
        }
        double norm_j = sqrt(s);
        sum_norms_sq += norm_j * norm_j;
    }
    double total = sqrt(sum_norms_sq);
    double clip_coef = max_norm / (total + 1e-6);
    double coef = clip_coef < 1.0 || isnan(clip_coef) ? clip_coef : 1.0; // clamp(max=1.0)
    for (size_t j = 0; j < n_params; j++) {
        for (int64_t i = 0; i < ns[j]; i++) {
            grads[j][i] *= coef;
        }
    }
    if (out_total_norm) {
        *out_total_norm = total;
    }
}

bool dl_optim_ref_unscale(double *const *grads, const int64_t *ns, size_t n_params, double scale) {
    double inv_scale = (double)(float)(1.0 / scale); // scale.double().reciprocal().float()
    bool found_inf = false;
    for (size_t j = 0; j < n_params; j++) {
        for (int64_t i = 0; i < ns[j]; i++) {
            if (!isfinite(grads[j][i])) {
                found_inf = true;
            }
            grads[j][i] *= inv_scale;
        }
    }
    return found_inf;
}

void dl_optim_ref_loss_scale_init_defaults(dl_optim_ref_loss_scale *ls) {
    size_t n;
    const dl_ir_attr_spec *s = dl_ir_loss_scale_attr_specs(&n);
    memset(ls, 0, sizeof *ls);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].name, "init") == 0) {
            ls->scale = s[i].def_f;
        } else if (strcmp(s[i].name, "growth") == 0) {
            ls->growth = s[i].def_f;
        } else if (strcmp(s[i].name, "backoff") == 0) {
            ls->backoff = s[i].def_f;
        } else if (strcmp(s[i].name, "interval") == 0) {
            ls->interval = s[i].def_i;
        }
    }
}

void dl_optim_ref_loss_scale_init_from_train(dl_optim_ref_loss_scale *ls, const dl_ir_train *t) {
    dl_optim_ref_loss_scale_init_defaults(ls);
    switch (t->loss_scale) {
    case DL_IR_LS_NONE:
    case DL_IR_LS_STATIC:
        ls->scale = t->loss_scale == DL_IR_LS_STATIC ? t->loss_scale_value : 1.0;
        ls->growth = 1.0;
        ls->backoff = 1.0;
        return;
    case DL_IR_LS_DYNAMIC:
        break;
    }
    for (size_t i = 0; i < t->n_ls_attrs; i++) {
        const dl_ir_attr *a = &t->ls_attrs[i];
        double v = a->kind == DL_IR_ATTR_INT ? (double)a->i : a->f;
        if (strcmp(a->name, "init") == 0) {
            ls->scale = v;
        } else if (strcmp(a->name, "growth") == 0) {
            ls->growth = v;
        } else if (strcmp(a->name, "backoff") == 0) {
            ls->backoff = v;
        } else if (strcmp(a->name, "interval") == 0) {
            ls->interval = a->kind == DL_IR_ATTR_INT ? a->i : (int64_t)a->f;
        }
    }
}

void dl_optim_ref_loss_scale_update(dl_optim_ref_loss_scale *ls, bool found_inf) {
    if (found_inf) {
        ls->scale = ls->scale * ls->backoff;
        ls->growth_tracker = 0;
        return;
    }
    int64_t successful = ls->growth_tracker + 1;
    if (successful == ls->interval) {
        double new_scale = ls->scale * ls->growth;
        if (isfinite((float)new_scale)) { // do not grow past float32's range to inf
            ls->scale = new_scale;
        }
        ls->growth_tracker = 0;
    } else {
        ls->growth_tracker = successful;
    }
}
