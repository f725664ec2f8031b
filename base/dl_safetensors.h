// base/dl_safetensors.h — safetensors files: a writer for many tensors plus string metadata, and
// a validating reader that lists every tensor and reads any of them. Used by training
// checkpoints (and by anything else that wants a whole file rather than one tensor; for one
// tensor by name, dl_safetensors_read_tensor in dl_tensor_io.h is enough).
//
// Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"__metadata__":{"k":"v",...},"name":{"dtype":"F32","shape":[2,3],"data_offsets":[b,e]},...}
// then the raw little-endian data; offsets are relative to the start of the data section.
// Dtypes: F32 F16 BF16 I32 I64 BOOL (dl_dtype FLOAT FLOAT16 BFLOAT16 INT32 INT64 BOOL).
#ifndef DL_SAFETENSORS_H
#define DL_SAFETENSORS_H

#include "dl_base.h"

// The safetensors dtype string for `t` ("F32", ...), "?" for an invalid value.
const char *dl_st_dtype_name(dl_dtype t);

// ---------------------------------------------------------------------------------------------
// Writer
//
// Output bytes are a pure function of the calls made: `__metadata__` first (omitted when no
// metadata was set), its pairs in the order set, then the tensors in the order added, the JSON
// without any whitespace, padded with spaces so N is a multiple of 8; the data of the tensors
// follows contiguously in the same order (data_offsets increase in add order).
// Thread-safety: a writer is used by one thread at a time.

typedef struct dl_st_writer dl_st_writer; // opaque

DL_NODISCARD dl_status dl_st_writer_create(dl_st_writer **out);
void dl_st_writer_destroy(dl_st_writer *w); // NULL is a no-op

// Adds tensor `name`. The name is copied; `t->data` is BORROWED and must stay valid and unchanged
// until the last dl_st_write_file / dl_st_writer_serialize call. DL_ERR_INVALID_ARG when the
// name is a duplicate, "__metadata__", or not valid UTF-8, or when `t` has a bad dtype, rank or
// negative dim, or NULL data with a non-zero size; DL_ERR_NOMEM.
DL_NODISCARD dl_status dl_st_writer_add(dl_st_writer *w, const char *name, const dl_tensor *t);

// Adds a metadata pair (both copied). DL_ERR_INVALID_ARG for a duplicate key or text that is not
// valid UTF-8; DL_ERR_NOMEM.
DL_NODISCARD dl_status dl_st_writer_set_metadata(dl_st_writer *w, const char *key,
                                                 const char *value);

// Writes the file atomically: streamed into a temporary file next to `path`, fsync'd, renamed
// over `path`; on any failure no file (partial or temporary) is left and DL_ERR_IO is returned
// with errno set. DL_ERR_NOMEM.
DL_NODISCARD dl_status dl_st_write_file(const dl_st_writer *w, const char *path);

// The whole file in memory (*out caller-owned, free()). DL_ERR_NOMEM.
DL_NODISCARD dl_status dl_st_writer_serialize(const dl_st_writer *w, unsigned char **out,
                                              size_t *out_len);

// ---------------------------------------------------------------------------------------------
// Reader
//
// dl_st_open validates the whole header up front, treating the file as untrusted: header length
// (at most 100 MiB and within the file), strict JSON (objects, strings with escapes, valid
// UTF-8, non-negative integers, arrays; no duplicate keys), every entry's dtype, shape and
// data_offsets, and that the tensors' byte ranges tile the data section exactly (sorted by
// offset, each starts where the previous ended, the last ends at the end of the file). Errors
// are a status plus a one-line reason (no path prefix) in `err`: DL_ERR_IO (cannot read),
// DL_ERR_PARSE (bad file), DL_ERR_UNSUPPORTED (a valid safetensors dtype we do not handle, such
// as F64), DL_ERR_NOMEM.
// Thread-safety: a dl_st_file is used by one thread at a time (it holds a file position).

typedef struct dl_st_file dl_st_file; // opaque; keeps the file open until dl_st_close

typedef struct dl_st_tensor_info {
    const char *name; // BORROWED from the dl_st_file, valid until dl_st_close
    dl_dtype dtype;
    int32_t rank; // 0 = scalar
    int64_t dims[DL_MAX_RANK];
    uint64_t begin, end; // data_offsets, relative to the data section; end - begin = nbytes
} dl_st_tensor_info;

DL_NODISCARD dl_status dl_st_open(const char *path, dl_st_file **out, char *err, size_t err_size);
// Same over an in-memory image of a file: `data` is BORROWED and must stay valid and unchanged
// until dl_st_close (tensors are read from it on demand).
DL_NODISCARD dl_status dl_st_open_mem(const void *data, size_t len, dl_st_file **out, char *err,
                                      size_t err_size);
void dl_st_close(dl_st_file *f); // NULL is a no-op

// Tensors are numbered 0..count-1 in the order the header lists them.
size_t dl_st_count(const dl_st_file *f);
// DL_ERR_INVALID_ARG when i >= count.
DL_NODISCARD dl_status dl_st_info(const dl_st_file *f, size_t i, dl_st_tensor_info *out);
// Index of tensor `name`, or -1 (O(log n)).
int64_t dl_st_find(const dl_st_file *f, const char *name);

// Reads tensor i into a freshly allocated *out (caller-owned, dl_tensor_free). DL_ERR_IO on a
// short read (the file changed), DL_ERR_PARSE for a BOOL byte other than 0/1,
// DL_ERR_INVALID_ARG for a bad index, DL_ERR_NOMEM; on failure out->data is NULL.
DL_NODISCARD dl_status dl_st_read(dl_st_file *f, size_t i, dl_tensor *out, char *err,
                                  size_t err_size);
// Same into caller memory: `size` must equal end - begin (else DL_ERR_INVALID_ARG).
DL_NODISCARD dl_status dl_st_read_into(dl_st_file *f, size_t i, void *dst, size_t size, char *err,
                                       size_t err_size);

// Metadata value for `key` (BORROWED, valid until dl_st_close), or NULL.
const char *dl_st_metadata(const dl_st_file *f, const char *key);
// Metadata pairs in file order.
size_t dl_st_metadata_count(const dl_st_file *f);
// DL_ERR_INVALID_ARG when i >= count; *out_key / *out_value are BORROWED.
DL_NODISCARD dl_status dl_st_metadata_at(const dl_st_file *f, size_t i, const char **out_key,
                                         const char **out_value);

// Renaming a checkpoint's tensors (a PyTorch state_dict's names to a model's): a rule maps a file
// name to a model name, exactly ("fc1.weight" -> "w1") or, when both sides end in '*', by prefix
// ("encoder.*" -> "enc.*"). dl_st_rule_apply writes the name `name` gets under the first rule
// that matches (`name` itself when none does) into buf; false when it does not fit. The runtime's
// load rules (dlrt_load_rule) and dlcc's --map files are both applied by it.
typedef struct dl_st_rule {
    const char *from, *to;
} dl_st_rule;
bool dl_st_rule_apply(const dl_st_rule *rules, size_t n_rules, const char *name, char *buf,
                      size_t size);

#endif
