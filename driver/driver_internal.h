// driver/driver_internal.h — shared between the driver's files; not installed.
#ifndef DRIVER_INTERNAL_H
#define DRIVER_INTERNAL_H

#include "dl_base.h"
#include "dl_ir.h"

// Writes train block `t`'s session values (hyper-parameters, clip norm, loss-scale settings)
// into artifact `art` of `len` bytes, in place (driver/train_values.c): the hyper buffer's
// initial data, every hparam record's init, the loss seed's initial value, and the trailer's
// checksum when there is one. `art` must hold a train step compiled from a module whose key
// (without hyper-parameter values) equals t's module's. DL_ERR_CORRUPT with a one-line reason
// in why[] when the plan cannot be found or does not match t's structure; the bytes are then
// unchanged.
DL_NODISCARD dl_status dlcc__set_train_values(uint8_t *art, size_t len, const dl_ir_train *t,
                                              char *why, size_t why_len);

#endif
