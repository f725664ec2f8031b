// tests/fuzz/fuzz_npy.c — libFuzzer target for the .npy reader (base/tensor_io.c): any bytes go
// to dl_npy_view_parse (every element type accepted) and dl_npy_parse, and the contracts are
// checked: a good view lies inside the input and its size is the shape's, a failure writes a
// reason, and a parsed tensor matches the view. fuzz_npy_replay (tests/fuzz/fuzz_replay.c) runs
// the seed corpus tests/fuzz/corpus_npy under ctest.
#include "dl_tensor_io.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    err[0] = '\0';
    dl_npy_view v;
    dl_status st = dl_npy_view_parse(data, size, DL_NPY_ALL_ELEMS, &v, err, sizeof err);
    if (st != DL_OK) {
        if (err[0] == '\0' || memchr(err, '\n', strlen(err))) {
            abort(); // a failure says why, on one line
        }
    } else {
        int64_t n = 1;
        for (int32_t i = 0; i < v.rank; i++) {
            if (v.dims[i] < 0) {
                abort();
            }
            n *= v.dims[i];
        }
        if (v.rank < 0 || v.rank > DL_MAX_RANK || v.nbytes != (size_t)n * v.elem_size) {
            abort();
        }
        const uint8_t *p = v.data;
        if (p < data || p > data + size || v.nbytes != (size_t)(data + size - p)) {
            abort(); // the data is exactly the tail of the input
        }
    }
    err[0] = '\0';
    dl_tensor t = {0};
    dl_status st2 = dl_npy_parse(data, size, &t, err, sizeof err);
    if (st2 == DL_OK) {
        if (st != DL_OK || t.rank != v.rank ||
            dl_tensor_numel(&t) * (int64_t)v.elem_size != (int64_t)v.nbytes) {
            abort(); // dl_npy_parse takes a subset of what the view parser takes
        }
        dl_tensor_free(&t);
    } else if (t.data || err[0] == '\0') {
        abort();
    }
    return 0;
}
