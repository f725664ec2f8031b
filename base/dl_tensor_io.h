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
// The element types an .npy header may name: dlcc's tensor dtypes and the integer and float64
// types data sets come in. Names (dl_npy_elem_name) follow dl_dtype_name: "float", "float16",
// "bfloat16" ('<u2', dlcc's convention), "int32", "int64", "bool", "float64", "uint8", "int8",
// "int16".
typedef enum dl_npy_elem {
    DL_NPY_F32,  // '<f4'
    DL_NPY_F16,  // '<f2'
    DL_NPY_BF16, // '<u2'
    DL_NPY_I32,  // '<i4'
    DL_NPY_I64,  // '<i8'
    DL_NPY_BOOL, // '|b1'
    DL_NPY_F64,  // '<f8'
    DL_NPY_U8,   // '|u1'
    DL_NPY_I8,   // '|i1'
    DL_NPY_I16,  // '<i2'
    DL_NPY_ELEM_COUNT
} dl_npy_elem;
#define DL_NPY_ALL_ELEMS ((1u << DL_NPY_ELEM_COUNT) - 1u)

// An .npy image parsed in place: its element type, shape and data (BORROWED from the image).
typedef struct dl_npy_view {
    dl_npy_elem elem;
    size_t elem_size;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
    const void *data; // points into the parsed bytes
    size_t nbytes;    // element count * elem_size, exactly the data that follows the header
} dl_npy_view;

// Parses an .npy image (format 1.0/2.0/3.0, C order, little-endian or single-byte elements)
// without copying: the header dict as numpy writes it, then the data size, which must match the
// shape exactly. `accept` is a mask of (1u << dl_npy_elem) bits (DL_NPY_ALL_ELEMS: any); another
// element type is refused with the accepted list in the message. Errors: DL_ERR_PARSE (not
// .npy, malformed header, wrong data size), DL_ERR_UNSUPPORTED (a valid file this reader does
// not take: element type, byte order, Fortran order, structured arrays), with a one-line reason
// (no path prefix) in `err`.
DL_NODISCARD dl_status dl_npy_view_parse(const void *data, size_t len, unsigned accept,
                                         dl_npy_view *out, char *err, size_t err_size);
const char *dl_npy_elem_name(dl_npy_elem e);

// Writes `t` as .npy version 1.0 atomically (no partial file on failure).
DL_NODISCARD dl_status dl_npy_write(const char *path, const dl_tensor *t);
// The numpy descr for a dtype ("<f4", ...).
const char *dl_npy_descr(dl_dtype t);

// Reads tensor `name` from a safetensors file (8-byte little-endian header length, JSON header,
// raw little-endian data). Dtypes F32 F16 BF16 I32 I64 BOOL. Errors as for dl_npy_read.
DL_NODISCARD dl_status dl_safetensors_read_tensor(const char *path, const char *name,
                                                  dl_tensor *out, char *err, size_t err_size);

#endif
