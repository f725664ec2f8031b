// tools/train_watch.c — the metrics log of `dlcc train --log`, the training loop's position in
// a checkpoint's metadata (--save-every, --resume, Ctrl-C) and the signal flag.
//
// The log goes through stdio: one whole record per line (a JSON object, or a CSV row under a
// fixed header), flushed by the caller at every epoch end and when the run stops, so a log cut
// short (an interrupted or killed run) ends with complete records except perhaps its last line.
// Numbers are written so they read back exactly (train_num), which is what lets a test compare
// the losses of a resumed run with an uninterrupted one bit for bit.
// The position is plain text metadata ("dlcc.train.step" = "37", doubles as C99 hex floats, so
// exact); the checkpoint's tensors and the runtime's own metadata are dlrt_session_save's.
// The signal handler only stores the signal number in a sig_atomic_t: the training loop looks
// at it between steps.
#include "train_watch.h"

#include "dl_base.h"
#include "dl_safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct train_log {
    FILE *f;
    bool csv;
    char *path;
};

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static const char csv_header[] =
    "kind,step,epoch,loss,lr,grad_norm,skipped,samples_per_s,time_s,eval_loss,eval_accuracy,"
    "eval_samples\n";

bool train_log_open(const char *path, bool append, train_log **out, char *err, size_t err_size) {
    *out = NULL;
    bool csv = ends_with(path, ".csv");
    if (!csv && !ends_with(path, ".jsonl")) {
        snprintf(err, err_size,
                 "--log %s: the format comes from the suffix: .jsonl (JSON Lines) or .csv", path);
        return false;
    }
    train_log *l = dl_mem_calloc(1, sizeof *l);
    char *p = l ? dl_mem_alloc(strlen(path) + 1) : NULL;
    if (!p) {
        free(l);
        snprintf(err, err_size, "--log %s: out of memory", path);
        return false;
    }
    strcpy(p, path);
    l->path = p;
    l->csv = csv;
    l->f = fopen(path, append ? "a" : "w");
    if (!l->f) {
        snprintf(err, err_size, "--log %s: cannot open it for writing: %s", path, strerror(errno));
        free(p);
        free(l);
        return false;
    }
    if (csv && ftell(l->f) == 0) {
        fputs(csv_header, l->f);
    }
    *out = l;
    return true;
}

const char *train_num(double v, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return buf;
    }
    // A float32 value (the loss) reads back from at most 9 digits, a double from at most 17.
    bool is_float = (double)(float)v == v;
    for (int p = is_float ? 6 : 9; p <= 17; p++) {
        snprintf(buf, size, "%.*g", p, v);
        if (is_float ? (double)strtof(buf, NULL) == v : strtod(buf, NULL) == v) {
            break;
        }
    }
    return buf;
}

// One field: JSON `"key":value` (null for NaN / infinities) or a CSV cell (empty for NaN).
// Measurements (times, rates) get `decimals` fixed decimals; values of the run (decimals < 0)
// are exact.
static void put_num(train_log *l, const char *key, double v, int decimals, bool *first) {
    char b[64];
    if (decimals >= 0 && isfinite(v)) {
        snprintf(b, sizeof b, "%.*f", decimals, v);
    } else {
        train_num(v, b, sizeof b);
    }
    if (l->csv) {
        fprintf(l->f, "%s%s", *first ? "" : ",", isnan(v) ? "" : b);
    } else {
        fprintf(l->f, "%s\"%s\":%s", *first ? "" : ",", key, isfinite(v) ? b : "null");
    }
    *first = false;
}

static void put_int(train_log *l, const char *key, int64_t v, bool *first) {
    if (l->csv) {
        fprintf(l->f, "%s%" PRId64, *first ? "" : ",", v);
    } else {
        fprintf(l->f, "%s\"%s\":%" PRId64, *first ? "" : ",", key, v);
    }
    *first = false;
}

void train_log_write(train_log *l, const train_log_rec *r) {
    if (!l) {
        return;
    }
    bool first = true;
    if (l->csv) {
        fputs(r->is_eval ? "eval" : "step", l->f);
        first = false;
    } else {
        fprintf(l->f, "{\"kind\":\"%s\"", r->is_eval ? "eval" : "step");
        first = false;
    }
    put_int(l, "step", r->step, &first);
    put_int(l, "epoch", r->epoch, &first);
    if (!r->is_eval) {
        put_num(l, "loss", r->loss, -1, &first);
        put_num(l, "lr", r->lr, -1, &first);
        put_num(l, "grad_norm", r->grad_norm, -1, &first);
        put_int(l, "skipped", r->skipped, &first);
        put_num(l, "samples_per_s", r->samples_per_s, 1, &first);
        put_num(l, "time_s", r->time_s, 6, &first);
        if (l->csv) {
            fputs(",,,", l->f);
        }
    } else {
        if (l->csv) {
            fputs(",,,,,", l->f);
        }
        put_num(l, "time_s", r->time_s, 6, &first);
        if (l->csv || !isnan(r->eval_loss)) {
            put_num(l, "eval_loss", r->eval_loss, -1, &first);
        }
        if (l->csv || !isnan(r->eval_acc)) {
            put_num(l, "eval_accuracy", r->eval_acc, -1, &first);
        }
        put_int(l, "eval_samples", r->eval_samples, &first);
        if (!l->csv && !isnan(r->eval_loss)) {
            put_int(l, "eval_loss_samples", r->eval_loss_samples, &first);
        }
    }
    fputs(l->csv ? "\n" : "}\n", l->f);
}

void train_log_flush(train_log *l) {
    if (l) {
        fflush(l->f);
    }
}

bool train_log_close(train_log *l, bool remove) {
    if (!l) {
        return true;
    }
    bool ok = !ferror(l->f);
    int e = errno;
    ok = fclose(l->f) == 0 && ok;
    if (remove) {
        (void)unlink(l->path);
        ok = true;
    }
    free(l->path);
    free(l);
    errno = e;
    return ok;
}

// ---- the position

static const char *const pos_keys[TRAIN_POSITION_KEYS] = {
    "dlcc.train.step",     "dlcc.train.steps_per_epoch", "dlcc.train.epoch_samples",
    "dlcc.train.batch",    "dlcc.train.world",           "dlcc.train.seed",
    "dlcc.train.loss_sum", "dlcc.train.skipped",         "dlcc.train.guard",
    "dlcc.train.time_s"};

void train_position_meta(const train_position *p, char (*buf)[64],
                         dlrt_meta_pair pairs[TRAIN_POSITION_KEYS]) {
    snprintf(buf[0], 64, "%" PRId64, p->step);
    snprintf(buf[1], 64, "%" PRId64, p->steps_per_epoch);
    snprintf(buf[2], 64, "%" PRId64, p->epoch_samples);
    snprintf(buf[3], 64, "%" PRId64, p->batch);
    snprintf(buf[4], 64, "%" PRId64, p->world);
    snprintf(buf[5], 64, "%" PRIu64, p->seed);
    snprintf(buf[6], 64, "%a", p->loss_sum); // hex: exact
    snprintf(buf[7], 64, "%" PRId64, p->skipped);
    snprintf(buf[8], 64, "%" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, p->guard.run,
             p->guard.good, p->guard.run_start, p->guard.total);
    snprintf(buf[9], 64, "%a", p->time_s);
    for (int i = 0; i < TRAIN_POSITION_KEYS; i++) {
        pairs[i].key = pos_keys[i];
        pairs[i].value = buf[i];
    }
}

static bool parse_i64(const char *v, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long x = v && *v ? strtoll(v, &end, 10) : -1;
    if (!v || !*v || *end || errno || x < 0) {
        return false;
    }
    *out = (int64_t)x;
    return true;
}

bool train_position_read(const char *path, train_position *out, char *model, size_t model_size,
                         char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    char why[256];
    dl_st_file *f = NULL;
    if (dl_st_open(path, &f, why, sizeof why) != DL_OK) {
        snprintf(err, err_size, "--resume %s: %s", path, why);
        return false;
    }
    const char *v[TRAIN_POSITION_KEYS];
    for (int i = 0; i < TRAIN_POSITION_KEYS; i++) {
        v[i] = dl_st_metadata(f, pos_keys[i]);
    }
    const char *mn = dl_st_metadata(f, "dlcc.model");
    snprintf(model, model_size, "%s", mn ? mn : "");
    bool ok = true;
    const char *bad = NULL;
    if (!v[0]) {
        snprintf(err, err_size,
                 "--resume %s: the file holds no training position (dlcc.train.step): only a "
                 "checkpoint written by dlcc train --save resumes; --init starts from the params "
                 "and optimizer state of any checkpoint",
                 path);
        ok = false;
    }
    // The integer keys (positive: steps per epoch, batch, world), then the others by index.
    int64_t *ints[TRAIN_POSITION_KEYS] = {&out->step,  &out->steps_per_epoch, &out->epoch_samples,
                                          &out->batch, &out->world,           NULL,
                                          NULL,        &out->skipped,         NULL,
                                          NULL};
    char *end = NULL;
    for (int i = 0; ok && i < TRAIN_POSITION_KEYS && !bad; i++) {
        if (!v[i]) {
            bad = pos_keys[i];
            break;
        }
        errno = 0;
        if (ints[i]) {
            ok = parse_i64(v[i], ints[i]) && (*ints[i] > 0 || !(i == 1 || i == 3 || i == 4));
        } else if (i == 5) {
            out->seed = strtoull(v[i], &end, 10);
            ok = *v[i] && *v[i] != '-' && !*end && !errno;
        } else if (i == 6 || i == 9) {
            double x = strtod(v[i], &end);
            ok = *v[i] && !*end && (i == 6 || (isfinite(x) && x >= 0)); // a sum may be NaN
            *(i == 6 ? &out->loss_sum : &out->time_s) = x;
        } else {
            long long g[4] = {0, 0, 0, 0};
            int n = 0;
            ok = sscanf(v[i], "%lld %lld %lld %lld%n", &g[0], &g[1], &g[2], &g[3], &n) == 4 &&
                 !v[i][n] && g[0] >= 0 && g[1] >= 0 && g[2] >= 0 && g[3] >= 0;
            out->guard.run = g[0];
            out->guard.good = g[1];
            out->guard.run_start = g[2];
            out->guard.total = g[3];
        }
        if (!ok) {
            bad = pos_keys[i];
        }
    }
    for (int i = 0; bad && i < TRAIN_POSITION_KEYS; i++) {
        if (pos_keys[i] == bad && v[i]) {
            snprintf(err, err_size, "--resume %s: metadata %s is malformed: '%s'", path, bad, v[i]);
        } else if (pos_keys[i] == bad) {
            snprintf(err, err_size, "--resume %s: metadata %s is missing", path, bad);
        }
        ok = false;
    }
    dl_st_close(f);
    return ok;
}

// ---- signals

static volatile sig_atomic_t pending_signal;

static void on_signal(int sig) {
    pending_signal = sig;
}

void train_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND; // a second signal: the default action (ends)
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
}

void train_signals_restore(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
}

int train_signal_pending(void) {
    return (int)pending_signal;
}

bool train_parse_every(const char *s, long *steps, double *seconds) {
    *steps = 0;
    *seconds = 0;
    char *end = NULL;
    errno = 0;
    if (!s || !*s || *s == '-' || *s == '+') {
        return false;
    }
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 1) {
        return false;
    }
    if (!*end) {
        *steps = v;
        return true;
    }
    if (end[1]) {
        return false;
    }
    double mul = *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600 : 0;
    *seconds = (double)v * mul;
    return mul > 0;
}
