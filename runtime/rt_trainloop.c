// runtime/rt_trainloop.c — the training loop the trainers share (dlcc train,
// samples/train_fmnist.c, the Python binding): learning-rate schedules, the non-finite guard,
// epochs of zero-copy train steps over a data loader, and the test accuracy.
//
// dlrt_train_run holds at most one batch at a time: next, bind (x and y, or every array of a
// named-array loader, each to the input of its name, in place), set "lr",
// BATCH event, step, guard, STEP event, release. Progress, warnings and replays (dlcc's
// --detect-anomaly) are the caller's, in the callback, which sees the batch while it is held.
// A resumed run starts at options.start_step, inside an epoch, with that epoch's sums and the
// guard as they were; the loader must start at the same batch (every batch's seq is its step).
// Library code: nothing here prints; every failure is a status with dlrt_last_error() set by
// the call that failed (or here, for bad options).
#include "rt_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

static const char *const sched_names[] = {"constant", "step", "cosine", "warmup-cosine",
                                          "one-cycle"};

// PyTorch's OneCycleLR with its defaults (pct_start 0.3, cosine annealing, div_factor 25,
// final_div_factor 1e4, two phases): from lr/25 up to lr over the first 0.3 T - 1 steps, then
// down to lr/25/1e4 at step T - 1. The phase ends are PyTorch's float step numbers, so the values
// match its own to rounding.
static double one_cycle_at(double lr, int64_t t, int64_t total) {
    const double pi = 3.14159265358979323846;
    double lo = lr / 25.0, end = lo / 1e4, mid = 0.3 * (double)total - 1.0,
           last = (double)total - 1;
    double x = (double)t, a = lo, b = lr, t0 = 0, t1 = mid;
    if (!(x <= mid)) { // the annealing phase (also PyTorch's choice when mid < 0)
        a = lr;
        b = end;
        t0 = mid;
        t1 = last;
    }
    double pct = t1 > t0 ? (x - t0) / (t1 - t0) : 1.0;
    return b + (a - b) / 2.0 * (cos(pi * pct) + 1.0);
}

double dlrt_lr_schedule_at(dlrt_lr_schedule k, double lr, int64_t t, int64_t total,
                           int64_t warmup) {
    const double pi = 3.14159265358979323846;
    switch (k) {
    case DLRT_LR_CONSTANT:
        return lr;
    case DLRT_LR_STEP:
        return 4 * t >= 3 * total ? lr * 0.01 : 2 * t >= total ? lr * 0.1 : lr;
    case DLRT_LR_COSINE:
        return lr * 0.5 * (1.0 + cos(pi * (double)t / (double)total));
    case DLRT_LR_WARMUP_COSINE:
        if (t < warmup) {
            return lr * (double)(t + 1) / (double)warmup;
        }
        return lr * 0.5 * (1.0 + cos(pi * (double)(t - warmup) / (double)(total - warmup)));
    case DLRT_LR_ONE_CYCLE:
        return one_cycle_at(lr, t, total);
    }
    return lr;
}

const char *dlrt_lr_schedule_name(dlrt_lr_schedule k) {
    return (unsigned)k < sizeof sched_names / sizeof sched_names[0] ? sched_names[k] : NULL;
}

dlrt_status dlrt_lr_schedule_parse(const char *name, dlrt_lr_schedule *out) {
    for (size_t k = 0; name && k < sizeof sched_names / sizeof sched_names[0]; k++) {
        if (strcmp(name, sched_names[k]) == 0) {
            *out = (dlrt_lr_schedule)k;
            return DLRT_OK;
        }
    }
    return rt__fail(DLRT_ERR_INVALID_ARG,
                    "unknown learning-rate schedule '%s' (constant, step, cosine, warmup-cosine, "
                    "one-cycle)",
                    name ? name : "(null)");
}

void dlrt_nonfinite_guard_init(dlrt_nonfinite_guard *g, int64_t max, double loss_scale) {
    memset(g, 0, sizeof *g);
    g->max = max;
    g->scale = loss_scale;
}

int dlrt_nonfinite_guard_step(dlrt_nonfinite_guard *g, const dlrt_step_info *info, int64_t step) {
    double used = g->scale;
    g->scale = info->loss_scale;
    g->first = g->stop = 0;
    bool bad = info->skipped || !isfinite(info->loss);
    if (bad && isfinite(info->loss) && used > 1 && info->loss_scale < used) {
        bad = false; // dynamic loss scaling backing off
    }
    if (!bad) {
        if (++g->good >= g->max) { // recovered: the streak is over
            g->run = 0;
        }
        return 0;
    }
    g->good = 0;
    g->first = g->total == 0;
    if (g->run++ == 0) {
        g->run_start = step;
    }
    g->total++;
    g->stop = g->max > 0 && g->run >= g->max;
    return 1;
}

void dlrt_train_options_init(dlrt_train_options *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->schedule = DLRT_LR_CONSTANT;
    o->lr = NAN;
    o->warmup = -1;
    o->max_skipped = 10;
}

dlrt_status dlrt_train_plan(const dlrt_train_options *o, int64_t steps_per_epoch,
                            int64_t *out_total, int64_t *out_warmup) {
    if (!o || !out_total || !out_warmup) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "training loop: NULL argument");
    }
    if (o->epochs < 1 || steps_per_epoch < 1) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "training loop: %lld epochs of %lld steps: both must be at least 1",
                        (long long)o->epochs, (long long)steps_per_epoch);
    }
    if (steps_per_epoch > INT64_MAX / o->epochs) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "training loop: too many steps");
    }
    int64_t total = steps_per_epoch * o->epochs, warmup = 0;
    if (o->schedule == DLRT_LR_WARMUP_COSINE) {
        warmup = o->warmup >= 0 ? o->warmup : total / 20;
        *out_total = total; // also on the error: for the caller's message
        *out_warmup = warmup;
        if (warmup >= total) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "training loop: %lld warm-up steps must be below the %lld steps of "
                            "training",
                            (long long)warmup, (long long)total);
        }
    }
    *out_total = total;
    *out_warmup = warmup;
    return DLRT_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The byte size of the model's input `name` into *out.
static dlrt_status input_desc(const dlrt_session *s, const char *name, dlrt_tensor_desc *out) {
    for (size_t i = 0; name && i < dlrt_model_num_inputs(s->model); i++) {
        if (dlrt_model_input(s->model, i, out) == DLRT_OK && strcmp(out->name, name) == 0) {
            return DLRT_OK;
        }
    }
    return rt__fail(DLRT_ERR_INVALID_ARG, "training loop: the model has no input '%s'",
                    name ? name : "(null)");
}

// A named-array loader's arrays against the model: each must be an input of its name taking
// exactly one batch of it (a session of chunks: one per chunk). *out_batch: the batch size.
static dlrt_status check_arrays(const dlrt_session *s, const dlrt_loader *l, int64_t *out_batch) {
    for (size_t i = 0; i < dlrt_loader_num_arrays(l); i++) {
        dlrt_loader_array_info ai;
        dlrt_tensor_desc d;
        dlrt_status st = dlrt_loader_array_info_get(l, i, &ai);
        if (st == DLRT_OK) {
            st = input_desc(s, ai.name, &d);
        }
        if (st != DLRT_OK) {
            return st;
        }
        if (d.dtype != ai.dtype || d.nbytes * (size_t)dlrt_session_chunks(s) != ai.batch_bytes) {
            return rt__fail(DLRT_ERR_INVALID_ARG,
                            "training loop: %s: a batch of it is %zu bytes of dtype %d, input "
                            "'%s' takes %zu bytes of dtype %d",
                            ai.path, ai.batch_bytes, (int)ai.dtype, ai.name,
                            d.nbytes * (size_t)dlrt_session_chunks(s), (int)d.dtype);
        }
        *out_batch = (int64_t)(ai.batch_bytes / (ai.dtype == DLRT_INT64 ? 8 : 4)) / ai.sample_numel;
    }
    return DLRT_OK;
}

// Binds a batch as the session's inputs: the step reads the loader's slot in place. A
// named-array loader binds each array to the input of its name (x and y unused). A session of
// chunks takes every chunk's rows at once.
static dlrt_status bind_batch(dlrt_session *s, const dlrt_loader *l, const dlrt_tensor_desc *x,
                              const dlrt_tensor_desc *y, const dlrt_loader_batch *b) {
    size_t n_arr = dlrt_loader_num_arrays(l);
    for (size_t i = 0; i < n_arr; i++) {
        dlrt_loader_array_info ai;
        const void *p = NULL;
        size_t nb = 0;
        dlrt_status st = dlrt_loader_array_info_get(l, i, &ai);
        if (st == DLRT_OK) {
            st = dlrt_loader_batch_array(l, b, i, &p, &nb);
        }
        if (st == DLRT_OK) {
            st = dlrt_session_bind_input(s, ai.name, p, nb);
        }
        if (st != DLRT_OK || i + 1 == n_arr) {
            return st;
        }
    }
    size_t k = (size_t)dlrt_session_chunks(s);
    dlrt_status st = dlrt_session_bind_input(s, x->name, b->x, x->nbytes * k);
    if (st == DLRT_OK) {
        const void *labels = b->y_i32 ? (const void *)b->y_i32 : (const void *)b->y;
        st = dlrt_session_bind_input(s, y->name, labels, y->nbytes * k);
    }
    return st;
}

dlrt_status dlrt_train_run(dlrt_session *s, dlrt_loader *train, const dlrt_train_options *o,
                           dlrt_train_result *out) {
    if (!s || !train || !o || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "training loop: NULL argument");
    }
    memset(out, 0, sizeof *out);
    dlrt_tensor_desc xd, yd;
    memset(&xd, 0, sizeof xd);
    memset(&yd, 0, sizeof yd);
    int64_t batch = 0;
    bool arrays = dlrt_loader_num_arrays(train) > 0;
    dlrt_status st = arrays ? check_arrays(s, train, &batch) : input_desc(s, o->data_input, &xd);
    if (st == DLRT_OK && !arrays) {
        st = input_desc(s, o->label_input, &yd);
    }
    if (st != DLRT_OK) {
        return st;
    }
    dlrt_loader_info li;
    dlrt_loader_info_get(train, &li);
    if (!arrays) {
        batch = (int64_t)(xd.nbytes / sizeof(float)) / (li.sample_numel ? li.sample_numel : 1) *
                dlrt_session_chunks(s);
    }
    int64_t spe = li.batches_per_epoch, total = 0, warmup = 0;
    if ((st = dlrt_train_plan(o, spe, &total, &warmup)) != DLRT_OK) {
        return st;
    }
    double base_lr = o->lr;
    if (isnan(base_lr) && (st = dlrt_session_get_hparam(s, "lr", &base_lr)) != DLRT_OK) {
        return st;
    }
    out->base_lr = base_lr;
    double scale = 1;
    if (dlrt_session_get_hparam(s, "loss_scale", &scale) != DLRT_OK) {
        scale = 1;
    }
    dlrt_nonfinite_guard g;
    dlrt_nonfinite_guard_init(&g, o->max_skipped, scale);
    if (o->start_step < 0 || o->start_step > total) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "training loop: start step %lld is outside the run's %lld steps",
                        (long long)o->start_step, (long long)total);
    }
    if (o->start_guard) { // resuming: the streak goes on; the scale is the session's
        g = *o->start_guard;
        g.max = o->max_skipped;
        g.scale = scale;
    }
    dlrt_train_event ev;
    memset(&ev, 0, sizeof ev);
    ev.steps_per_epoch = spe;
    ev.total_steps = total;
    ev.batch_size = batch;
    ev.guard = &g;
    double t_start = now_s();
    int64_t e0 = o->start_step / spe, k0 = o->start_step % spe;
    for (int64_t e = e0; e < o->epochs; e++) {
        double t0 = now_s();
        ev.epoch = e;
        ev.loss_sum = e == e0 ? o->start_loss_sum : 0;
        ev.skipped = e == e0 ? o->start_skipped : 0;
        ev.wait_ms = 0;
        for (int64_t k = e == e0 ? k0 : 0; k < spe; k++) {
            int64_t t = e * spe + k;
            dlrt_loader_batch bt;
            st = dlrt_loader_next(train, &bt);
            if (st != DLRT_OK) {
                return st;
            }
            if (!bt.x) {
                return rt__fail(DLRT_ERR_INVALID_ARG,
                                "training loop: the data loader ended after %lld of %lld epochs",
                                (long long)e, (long long)o->epochs);
            }
            if (bt.seq != t) { // a resumed run with a loader that does not start there
                (void)dlrt_loader_release(train, &bt);
                return rt__fail(DLRT_ERR_INVALID_ARG,
                                "training loop: step %lld got the loader's batch %lld (create the "
                                "loader with start_batch = start_step)",
                                (long long)t, (long long)bt.seq);
            }
            ev.wait_ms += bt.wait_ms;
            ev.batch = k;
            ev.step = t;
            ev.data = &bt;
            ev.lr = dlrt_lr_schedule_at(o->schedule, base_lr, t, total, warmup);
            ev.nonfinite = 0;
            st = bind_batch(s, train, &xd, &yd, &bt);
            if (st == DLRT_OK) {
                st = dlrt_session_set_hparam(s, "lr", ev.lr);
            }
            int stop = 0;
            if (st == DLRT_OK && o->callback) {
                ev.kind = DLRT_TRAIN_EVENT_BATCH;
                ev.epoch_s = now_s() - t0;
                ev.run_s = now_s() - t_start;
                stop = o->callback(o->user, &ev);
            }
            if (st == DLRT_OK && !stop) {
                ev.loss_scale_used = g.scale;
                memset(&ev.info, 0, sizeof ev.info);
                st = dlrt_session_train_step(s, &ev.info);
            }
            if (st == DLRT_OK && !stop) {
                out->steps++;
                ev.nonfinite = dlrt_nonfinite_guard_step(&g, &ev.info, t + 1);
                ev.loss_sum += ev.info.loss;
                ev.skipped += ev.info.skipped != 0;
                if (o->callback) {
                    ev.kind = DLRT_TRAIN_EVENT_STEP;
                    ev.epoch_s = now_s() - t0;
                    ev.run_s = now_s() - t_start;
                    stop = o->callback(o->user, &ev);
                }
            }
            ev.data = NULL;
            (void)dlrt_loader_release(train, &bt); // held by us: cannot fail
            out->nonfinite = g.total;
            if (st != DLRT_OK) {
                return st;
            }
            if (stop) {
                out->stopped = 1;
                return DLRT_OK;
            }
            if (ev.nonfinite && g.stop) {
                out->diverged = 1;
                return DLRT_OK;
            }
        }
        if (o->callback) {
            ev.kind = DLRT_TRAIN_EVENT_EPOCH;
            ev.batch = spe;
            ev.step = (e + 1) * spe;
            ev.epoch_s = now_s() - t0;
            ev.run_s = now_s() - t_start;
            if (o->callback(o->user, &ev)) {
                out->stopped = 1;
                return DLRT_OK;
            }
        }
    }
    return DLRT_OK;
}

dlrt_status dlrt_evaluate_accuracy(dlrt_session *s, dlrt_loader *test, const char *data_input,
                                   const char *label_input, const char *scores_output,
                                   int64_t *out_correct, int64_t *out_total) {
    if (!s || !test || !scores_output || !out_correct || !out_total) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "evaluation: NULL argument");
    }
    dlrt_eval_result r;
    dlrt_status st = dlrt_evaluate(s, test, data_input, label_input, scores_output, NULL, &r);
    *out_correct = r.correct;
    *out_total = r.total;
    return st;
}

// The model's output `name` into *out; false when there is none.
static bool output_desc(const dlrt_session *s, const char *name, dlrt_tensor_desc *out) {
    for (size_t i = 0; name && i < dlrt_model_num_outputs(s->model); i++) {
        if (dlrt_model_output(s->model, i, out) == DLRT_OK && strcmp(out->name, name) == 0) {
            return true;
        }
    }
    return false;
}

dlrt_status dlrt_evaluate(dlrt_session *s, dlrt_loader *test, const char *data_input,
                          const char *label_input, const char *scores_output,
                          const char *loss_output, dlrt_eval_result *out) {
    if (!s || !test || !out) {
        return rt__fail(DLRT_ERR_INVALID_ARG, "evaluation: NULL argument");
    }
    memset(out, 0, sizeof *out);
    out->loss = NAN;
    dlrt_tensor_desc xd, yd, od, ld;
    memset(&xd, 0, sizeof xd);
    memset(&yd, 0, sizeof yd);
    int64_t batch = 0;
    size_t n_arr = dlrt_loader_num_arrays(test), label_arr = n_arr;
    dlrt_status st = n_arr ? check_arrays(s, test, &batch) : input_desc(s, data_input, &xd);
    if (st == DLRT_OK && !n_arr) {
        st = input_desc(s, label_input, &yd);
    }
    if (st != DLRT_OK) {
        return st;
    }
    for (size_t i = 0; i < n_arr && scores_output; i++) { // the labels the scores are judged by
        dlrt_loader_array_info ai;
        if (dlrt_loader_array_info_get(test, i, &ai) == DLRT_OK && label_input &&
            strcmp(ai.name, label_input) == 0 && ai.dtype != DLRT_FLOAT32 && ai.sample_numel == 1) {
            label_arr = i;
        }
    }
    if (n_arr && scores_output && label_arr == n_arr) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "evaluation: no integer [batch] array '%s' to judge the scores by",
                        label_input ? label_input : "(null)");
    }
    if (!n_arr) {
        batch = xd.dims[0];
    }
    if (scores_output && (!output_desc(s, scores_output, &od) || od.dtype != DLRT_FLOAT32 ||
                          od.rank != 2 || od.dims[1] < 1)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "evaluation: the model has no float [batch, C] output '%s'", scores_output);
    }
    if (loss_output &&
        (!output_desc(s, loss_output, &ld) || ld.dtype != DLRT_FLOAT32 || ld.nbytes != 4)) {
        return rt__fail(DLRT_ERR_INVALID_ARG,
                        "evaluation: the model has no float scalar output '%s'", loss_output);
    }
    int64_t C = scores_output ? od.dims[1] : 0, correct = 0, total = 0, loss_n = 0;
    double loss_sum = 0;
    for (;;) {
        dlrt_loader_batch b;
        if ((st = dlrt_loader_next(test, &b)) != DLRT_OK) {
            return st;
        }
        if (!b.x) {
            break; // every batch evaluated
        }
        const void *outp = NULL;
        st = bind_batch(s, test, &xd, &yd, &b);
        if (st == DLRT_OK) {
            st = dlrt_session_infer(s);
        }
        if (st == DLRT_OK && loss_output && b.n_valid == batch) {
            st = dlrt_session_output(s, loss_output, &outp, NULL);
            if (st == DLRT_OK) {
                float v;
                memcpy(&v, outp, sizeof v);
                loss_sum += (double)v * (double)b.n_valid; // a full batch: every row is real
                loss_n += b.n_valid;
            }
        }
        if (st == DLRT_OK && scores_output) {
            st = dlrt_session_output(s, scores_output, &outp, NULL);
        }
        if (st == DLRT_OK && scores_output) {
            const float *p = outp;
            for (int64_t r = 0; r < b.n_valid && r < od.dims[0]; r++) { // padding rows do not count
                int64_t best = 0;
                for (int64_t c = 1; c < C; c++) {
                    best = p[r * C + c] > p[r * C + best] ? c : best;
                }
                int64_t label = b.y ? b.y[r] : b.y_i32 ? b.y_i32[r] : 0;
                if (n_arr) { // a named-array loader: its int32 / int64 label array
                    const void *lp = NULL;
                    dlrt_loader_array_info ai;
                    (void)dlrt_loader_array_info_get(test, label_arr, &ai); // checked above
                    (void)dlrt_loader_batch_array(test, &b, label_arr, &lp, NULL);
                    if (ai.dtype == DLRT_INT64) {
                        label = ((const int64_t *)lp)[r];
                    } else {
                        label = ((const int32_t *)lp)[r];
                    }
                }
                correct += best == label;
            }
        }
        if (st == DLRT_OK) {
            total += b.n_valid;
        }
        (void)dlrt_loader_release(test, &b);
        if (st != DLRT_OK) {
            return st;
        }
    }
    out->correct = correct;
    out->total = total;
    out->loss = loss_n ? loss_sum / (double)loss_n : NAN;
    out->loss_samples = loss_n;
    return DLRT_OK;
}
