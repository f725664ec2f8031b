// base/dl_idx.h — IDX files (the MNIST / Fashion-MNIST container), plain or gzip-compressed.
// Used by the trainer to load data sets; needs zlib (dl_base links it).
//
// The IDX format (Y. LeCun, http://yann.lecun.com/exdb/mnist/), all multi-byte fields big-endian:
//
//   offset 0  u8  0x00
//   offset 1  u8  0x00
//   offset 2  u8  element type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
//                 0x0E float64
//   offset 3  u8  ndims, 1..8 here (the format allows up to 255; nobody uses more than 3)
//   offset 4  u32 dims[0], u32 dims[1], ... dims[ndims-1]           (big-endian)
//   then      prod(dims) elements of the element type, C order        (big-endian)
//
// and nothing after: the file holds exactly 4 + 4*ndims + prod(dims)*elem_size bytes. A file
// whose first two bytes are the gzip magic 1f 8b is decompressed first (the name does not
// matter); the decompressed bytes must then follow the layout above. Examples: MNIST images are
// `00 00 08 03 | 60000 28 28 | pixels`, labels `00 00 08 01 | 60000 | labels`.
#ifndef DL_IDX_H
#define DL_IDX_H

#include "dl_base.h"

typedef enum dl_idx_type {
    DL_IDX_U8 = 0x08,
    DL_IDX_I8 = 0x09,
    DL_IDX_I16 = 0x0B,
    DL_IDX_I32 = 0x0C,
    DL_IDX_F32 = 0x0D,
    DL_IDX_F64 = 0x0E,
} dl_idx_type;

#define DL_IDX_MAX_RANK 8

// One IDX file in memory. `data` holds numel * dl_idx_type_size(type) bytes in HOST byte order
// (the reader converts from big-endian), C order. OWNED by whoever filled the struct
// (dl_idx_read: the caller), freed with dl_idx_free.
typedef struct dl_idx {
    dl_idx_type type;
    int32_t rank;                  // 1..DL_IDX_MAX_RANK
    int64_t dims[DL_IDX_MAX_RANK]; // each 0..UINT32_MAX; unused entries are 0
    void *data;                    // OWNED
    size_t nbytes;                 // size of data
} dl_idx;

// Bytes per element (1, 2, 4, 8), 0 for a value that is not a dl_idx_type.
size_t dl_idx_type_size(dl_idx_type t);
// "uint8", "int8", "int16", "int32", "float32", "float64", or "?" for anything else.
const char *dl_idx_type_name(dl_idx_type t);

// Reads the IDX file at `path` (plain, or gzip detected by its magic bytes) into *out.
// Validation is strict: magic 00 00, a known element type, 1..8 dims, and exactly
// prod(dims) * elem_size data bytes after the header ("truncated: expected N bytes, got M"
// and "trailing data" name the two ways to miss; N and M count the whole decompressed file).
// A gzip stream that is corrupt, fails its CRC or ends early is an error as well; bytes after
// the end of the (last) gzip member are ignored, as zlib does.
// Errors: DL_ERR_IO (cannot open or read), DL_ERR_PARSE (bad or truncated content),
// DL_ERR_NOMEM; a one-line reason (without the path) goes into `err` (may be NULL). On error
// *out is zeroed and nothing needs freeing. Thread-safety: reentrant, no shared state.
DL_NODISCARD dl_status dl_idx_read(const char *path, dl_idx *out, char *err, size_t err_size);
void dl_idx_free(dl_idx *x); // frees data and zeroes *x; NULL or a zeroed struct is a no-op

int64_t dl_idx_numel(const dl_idx *x); // product of the dims

// Converts every element to float as x * scale + shift into out[0 .. numel): e.g. scale 1/255,
// shift 0 maps uint8 pixels to [0, 1]. `out` is BORROWED and must hold dl_idx_numel(x) floats.
void dl_idx_to_float(const dl_idx *x, float *out, float scale, float shift);

// Copies integer labels into out[0 .. numel) (BORROWED, numel int64_t). The type must be an
// integer type (uint8/int8/int16/int32; else DL_ERR_INVALID_ARG). When n_classes > 0 every label
// must lie in [0, n_classes): otherwise DL_ERR_PARSE naming the first bad index and value.
DL_NODISCARD dl_status dl_idx_labels_to_i64(const dl_idx *x, int64_t *out, int64_t n_classes,
                                            char *err, size_t err_size);

// Checks that `images` (rank >= 2) and `labels` (rank 1, integer type) describe the same number
// of examples (dims[0]). DL_ERR_SHAPE with a reason in `err` when not.
DL_NODISCARD dl_status dl_idx_check_pair(const dl_idx *images, const dl_idx *labels, char *err,
                                         size_t err_size);

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST (same file names and layout as MNIST)

// "/usr/share/datasets/fashion-mnist", where Debian's dataset-fashion-mnist package puts it.
const char *dl_idx_default_fashion_mnist_dir(void);

typedef enum dl_idx_mnist_file {
    DL_IDX_TRAIN_IMAGES, // train-images-idx3-ubyte  [60000, 28, 28] uint8
    DL_IDX_TRAIN_LABELS, // train-labels-idx1-ubyte  [60000] uint8
    DL_IDX_TEST_IMAGES,  // t10k-images-idx3-ubyte   [10000, 28, 28] uint8
    DL_IDX_TEST_LABELS,  // t10k-labels-idx1-ubyte   [10000] uint8
    DL_IDX_MNIST_N_FILES
} dl_idx_mnist_file;

// The standard base name of file `f` (without ".gz"), e.g. "t10k-labels-idx1-ubyte".
const char *dl_idx_mnist_file_name(dl_idx_mnist_file f);

// The four paths found in a directory, OWNED (free with dl_idx_mnist_paths_fini).
typedef struct dl_idx_mnist_paths {
    char *path[DL_IDX_MNIST_N_FILES];
} dl_idx_mnist_paths;

// Looks in `dir` for each standard file, plain name first, then name + ".gz". When one is
// missing returns DL_ERR_IO with a message naming the file, the directory and the fix (install
// Debian's dataset-fashion-mnist package, or point at a directory with the four files); *out is
// then empty. DL_ERR_NOMEM on allocation failure.
DL_NODISCARD dl_status dl_idx_find_mnist_files(const char *dir, dl_idx_mnist_paths *out, char *err,
                                               size_t err_size);
void dl_idx_mnist_paths_fini(dl_idx_mnist_paths *p); // NULL-safe

#endif
