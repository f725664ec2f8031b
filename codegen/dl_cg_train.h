// codegen/dl_cg_train.h — the train step's session values as codegen writes them into a plan,
// for the driver (driver/train_values.c), which writes a .dlg's values into an artifact fetched
// from the cache under a key that leaves them out (docs/cache.md, docs/training.md).
#ifndef DL_CG_TRAIN_H
#define DL_CG_TRAIN_H

#include "dl_ir.h"
#include "dlrt_format.h"

// The initial contents of the hyper buffer (runtime/dlrt_format.h DLRT_HP_*) for train block
// `t`: the optimizer's hyper-parameters with defaults applied, the clip norm (0 without
// clipping), the loss scale's initial value, growth, backoff and interval, the accumulate
// setting, and the step state a fresh session starts from. The loss seed buffer (loss scaling
// only) starts at (float)out[DLRT_HP_LOSS_SCALE]. Pure; thread-safe.
void dl_cg_train_hyper_init(const dl_ir_train *t, double out[DLRT_HP_COUNT]);

#endif
