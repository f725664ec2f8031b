// ir/dl_optim_ref.h — reference optimizer math in double precision: the oracle that compiled,
// fused optimizer steps are tested against. Transcribes PyTorch 2.x exactly (torch.optim.SGD,
// Adam, AdamW, RMSprop with their default single-tensor / foreach semantics, no `maximize`,
// no `fused`), torch.nn.utils.clip_grad_norm_ and torch.amp.GradScaler's scale update.
//
// One step of training with every feature on reads, in PyTorch terms:
//   scaler.scale(loss).backward()           grads arrive multiplied by the loss scale
//   scaler.unscale_(opt)                    dl_optim_ref_unscale (reports found_inf)
//   clip_grad_norm_(params, max_norm)       dl_optim_ref_clip_global_norm
//   scaler.step(opt)                        dl_optim_ref_step, skipped when found_inf (the step
//                                           count t does not advance on a skipped step)
//   scaler.update()                         dl_optim_ref_loss_scale_update
//
// State: each parameter owns the slots named by dl_optim_ref_slots (PyTorch's state_dict keys,
// which are also the checkpoint tensor names `PARAM.<slot>`), each as many doubles as the
// parameter, zero before the first step, plus PyTorch's per-parameter `step` count, which the
// caller keeps (dl_optim_ref_state does it for you).
#ifndef DL_OPTIM_REF_H
#define DL_OPTIM_REF_H

#include "dl_ir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_OPTIM_REF_MAX_SLOTS 3

// Hyper-parameters under PyTorch's names (`beta1`/`beta2` are the `betas` tuple). Only the
// fields of the chosen optimizer are read.
typedef struct dl_optim_ref_hparams {
    double lr;
    double momentum;     // sgd, rmsprop
    double dampening;    // sgd
    bool nesterov;       // sgd
    double weight_decay; // all: L2 added to the gradient; adamw: decoupled p *= 1 - lr*wd
    double beta1, beta2; // adam, adamw
    double eps;          // adam, adamw, rmsprop
    bool amsgrad;        // adam, adamw
    double alpha;        // rmsprop
    bool centered;       // rmsprop
} dl_optim_ref_hparams;

// PyTorch's defaults for `kind` (the specs of dl_ir_optim_attr_specs); other fields zero.
void dl_optim_ref_hparams_defaults(dl_ir_optim kind, dl_optim_ref_hparams *out);
// The train block's optimizer settings with defaults applied (dl_ir_train_opt_value).
void dl_optim_ref_hparams_from_train(const dl_ir_train *t, dl_optim_ref_hparams *out);
// The checks torch.optim's constructors make, every value finite: lr, eps, weight_decay,
// momentum >= 0, betas in [0, 1), alpha >= 0, nesterov needs momentum > 0 and dampening == 0.
// DL_ERR_INVALID_ARG else. The same ranges as the .dlg parser's and dlrt_session_set_hparam's.
dl_status dl_optim_ref_hparams_check(dl_ir_optim kind, const dl_optim_ref_hparams *hp);

// The state slots `kind` keeps under `hp`, in PyTorch's state_dict order, into names[] (room for
// DL_OPTIM_REF_MAX_SLOTS): sgd: momentum_buffer (momentum != 0); adam/adamw: exp_avg,
// exp_avg_sq, max_exp_avg_sq (amsgrad); rmsprop: square_avg, momentum_buffer (momentum > 0),
// grad_avg (centered). PyTorch's scalar `step` is not a slot.
void dl_optim_ref_slots(dl_ir_optim kind, const dl_optim_ref_hparams *hp, const char **names,
                        size_t *n);

// One optimizer step on a parameter of n elements. step_t is PyTorch's step count after its
// increment: 1 on the first step (SGD initialises momentum_buffer to the gradient there; Adam's
// bias corrections use it). slots[i] holds the i-th slot of dl_optim_ref_slots (n doubles each,
// zero before step 1). grad is not modified. DL_ERR_INVALID_ARG when step_t < 1, n < 0, or a
// pointer needed is NULL.
dl_status dl_optim_ref_step(dl_ir_optim kind, const dl_optim_ref_hparams *hp, int64_t step_t,
                            double *param, const double *grad, double *const *slots, int64_t n);

// Convenience owner of one parameter's slots and step count.
typedef struct dl_optim_ref_state {
    dl_ir_optim kind;
    dl_optim_ref_hparams hp;
    int64_t n;    // elements of the parameter
    int64_t step; // PyTorch's state["step"]: 0 before the first step
    size_t n_slots;
    const char *slot_names[DL_OPTIM_REF_MAX_SLOTS];
    double *slots[DL_OPTIM_REF_MAX_SLOTS]; // zeroed, n doubles each
} dl_optim_ref_state;

// Allocates zeroed slots. DL_ERR_NOMEM / DL_ERR_INVALID_ARG (n < 0). On failure *s is left
// safe to fini.
dl_status dl_optim_ref_state_init(dl_optim_ref_state *s, dl_ir_optim kind,
                                  const dl_optim_ref_hparams *hp, int64_t n);
void dl_optim_ref_state_fini(dl_optim_ref_state *s);
// step += 1, then dl_optim_ref_step.
dl_status dl_optim_ref_state_step(dl_optim_ref_state *s, double *param, const double *grad);

// torch.nn.utils.clip_grad_norm_(params, max_norm) with norm_type 2: per-parameter 2-norms,
// total = 2-norm of those, clip_coef = max_norm / (total + 1e-6), every grad *= min(coef, 1)
// (always multiplied, as PyTorch does, so a non-finite total propagates into the grads).
// *out_total_norm (may be NULL) gets the total norm from before clipping; 0 when n_params is 0.
void dl_optim_ref_clip_global_norm(double *const *grads, const int64_t *ns, size_t n_params,
                                   double max_norm, double *out_total_norm);

// GradScaler.unscale_: found_inf is set when any scaled gradient is not finite; every gradient
// is multiplied by inv_scale = (float)(1.0 / scale) as PyTorch computes it. Returns found_inf.
bool dl_optim_ref_unscale(double *const *grads, const int64_t *ns, size_t n_params, double scale);

// Dynamic loss scaling, torch.amp.GradScaler(init_scale, growth_factor, backoff_factor,
// growth_interval). The scale is a float32 in PyTorch; a grown scale that overflows float32 is
// not taken (the tracker still resets), as in _amp_update_scale_.
typedef struct dl_optim_ref_loss_scale {
    double scale;
    double growth;          // growth_factor, 2.0
    double backoff;         // backoff_factor, 0.5
    int64_t interval;       // growth_interval, 2000
    int64_t growth_tracker; // consecutive steps without inf/nan
} dl_optim_ref_loss_scale;

// GradScaler's defaults: init 65536, growth 2, backoff 0.5, interval 2000.
void dl_optim_ref_loss_scale_init_defaults(dl_optim_ref_loss_scale *ls);
// From `loss_scale = dynamic { init growth backoff interval }` with defaults applied. For
// `loss_scale = <value>` (static): scale = value, growth = backoff = 1 (never changes). For no
// loss scaling: scale 1, growth = backoff = 1.
void dl_optim_ref_loss_scale_init_from_train(dl_optim_ref_loss_scale *ls, const dl_ir_train *t);
// found_inf: scale *= backoff, tracker = 0. Else tracker += 1 and when it reaches interval:
// scale *= growth (unless that overflows float32), tracker = 0.
void dl_optim_ref_loss_scale_update(dl_optim_ref_loss_scale *ls, bool found_inf);

#endif
