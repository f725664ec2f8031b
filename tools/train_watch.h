// tools/train_watch.h — what makes a long `dlcc train` run watchable and resumable: the metrics
// log (--log, JSON Lines or CSV), the training loop's position stored in a checkpoint's
// __metadata__ (--save-every, --resume, the checkpoint of an interrupted run), and the
// SIGINT / SIGTERM flag. Part of the dlcc main (tools/): it prints nothing itself; errors come
// back as text for the caller to print.
#ifndef DL_TOOLS_TRAIN_WATCH_H
#define DL_TOOLS_TRAIN_WATCH_H

#include "dlrt.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- the metrics log

typedef struct train_log train_log; // opaque: the open file and its format

// One record: a step (is_eval false) or an evaluation. NaN fields are written as null (JSON) or
// left empty (CSV); grad_norm is what the compiled step reports (dlrt_step_info.grad_norm).
typedef struct train_log_rec {
    bool is_eval;
    int64_t step;  // train steps done (1-based: the step just run)
    int64_t epoch; // 1-based epoch of that step
    double loss, lr, grad_norm;
    int skipped;                // the step's update was skipped (non-finite gradient)
    double samples_per_s;       // since the previous record
    double time_s;              // wall time since the run began (resumed runs continue it)
    double eval_loss, eval_acc; // eval records (NaN: not measured)
    int64_t eval_samples, eval_loss_samples;
} train_log_rec;

// Opens `path` for writing: JSON Lines when it ends in ".jsonl", CSV (with a header row) when
// it ends in ".csv". `append` (a resumed run): added to an existing file (a CSV header only if
// the file is empty). False with a message in `err` for another suffix or a file that cannot
// be opened.
bool train_log_open(const char *path, bool append, train_log **out, char *err, size_t err_size);
void train_log_write(train_log *l, const train_log_rec *r);
void train_log_flush(train_log *l);
// Closes the log; `remove` deletes the file (a run that failed before its first step). False
// with errno set when a write failed.
bool train_log_close(train_log *l, bool remove);

// The shortest "%.Ng" (N >= 6) that reads back as `v` exactly (as a float32 when `v` is one,
// else as a double), "nan", "inf" or "-inf".
const char *train_num(double v, char *buf, size_t size);

// ---- the training loop's position in a checkpoint (metadata keys "dlcc.train.*")

typedef struct train_position {
    int64_t step;               // train steps done: the resumed run begins with this one (0-based)
    int64_t steps_per_epoch;    // of the data and batch the run had
    int64_t epoch_samples;      // samples per epoch (of this rank's shard)
    int64_t batch;              // batch size (per rank)
    int64_t world;              // data-parallel ranks (1 without)
    uint64_t seed;              // the loader's shuffling seed
    double loss_sum;            // the losses of step `step`'s epoch before it
    int64_t skipped;            // its skipped updates before it
    dlrt_nonfinite_guard guard; // run, good, run_start, total (max and scale are not stored)
    double time_s;              // wall time of the run so far
} train_position;

enum { TRAIN_POSITION_KEYS = 10 };

// The metadata pairs of `p`, pointing into `buf` (which must outlive them).
void train_position_meta(const train_position *p, char (*buf)[64],
                         dlrt_meta_pair pairs[TRAIN_POSITION_KEYS]);
// Reads the position stored in checkpoint `path` and its model name (into model). False with a
// message in `err` (a file that cannot be read, no "dlcc.train.step": not written by dlcc
// train, a malformed value).
bool train_position_read(const char *path, train_position *out, char *model, size_t model_size,
                         char *err, size_t err_size);

// ---- signals

// Installs the SIGINT / SIGTERM handler, which only records the signal (the first one; the
// disposition then reverts to the default, so a second Ctrl-C ends the process at once).
void train_signals_install(void);
void train_signals_restore(void);
// The signal received since train_signals_install (0: none).
int train_signal_pending(void);

// "--save-every" value: N (steps) or Ns / Nm / Nh (time). False when malformed.
bool train_parse_every(const char *s, long *steps, double *seconds);

#endif
