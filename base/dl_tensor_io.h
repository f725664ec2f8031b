// base/dl_tensor_io.h — tensor files: NumPy .npy (format 1.0/2.0/3.0, C order) and safetensors.
// Used by `dlcc run` (--in/--out), by file() initialisers and (later) by checkpoints.
#ifndef DL_TENSOR_IO_H
#define DL_TENSOR_IO_H

#include "dl_base.h"

// Reads an .npy file. Supported descr: '<f4' float, '<f2' float16, '<u2' bfloat16 (the dlcc
// convention: bfloat16 travels as little-endian uint16), '<i4' int32, '<i8' int64, '|b1' bool;
// '|u1'/'|i1' are read as bool only if every byte is 0/1 (no: they are rejected). Fortran order,
// big-endian, object and structured arrays are rejected. On error returns DL_ERR_IO (cannot
// read) or DL_ERR_PARSE (bad file), and writes a one-line reason (no path prefix) into `err`.
// *out is caller-owned (dl_tensor_free).
DL_NODISCARD dl_status dl_npy_read(const char *path, dl_tensor *out, char *err, size_t err_size);
// Same, from memory.
DL_NODISCARD dl_status dl_npy_parse(const void *data, size_t len, dl_tensor *out, char *err,
                                    size_t err_size);
// Writes `t` as .npy version 1.0 atomically (no partial file on failure).
DL_NODISCARD dl_status dl_npy_write(const char *path, const dl_tensor *t);
// The numpy descr for a dtype ("<f4", ...).
const char *dl_npy_descr(dl_dtype t);

// Reads tensor `name` from a safetensors file (8-byte little-endian header length, JSON header,
// raw little-endian data). Dtypes F32 F16 BF16 I32 I64 BOOL. Errors as for dl_npy_read.
DL_NODISCARD dl_status dl_safetensors_read_tensor(const char *path, const char *name,
                                                  dl_tensor *out, char *err, size_t err_size);

#endif
