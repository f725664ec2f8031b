// tests/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader
// (base/safetensors.c): any bytes are opened as an in-memory file (dl_st_open_mem); when the
// header validates, every tensor is listed, looked up by name and read, and every metadata pair
// is looked up by key. Contracts checked: failures say why, lookups find what was listed, reads
// of validated entries succeed except for BOOL bytes other than 0/1. fuzz_safetensors_replay
// (tests/fuzz/fuzz_replay.c) runs the seed corpus tests/fuzz/corpus_safetensors under ctest.
#include "dl_safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    err[0] = '\0';
    dl_st_file *f = NULL;
    dl_status st = dl_st_open_mem(data, size, &f, err, sizeof err);
    if (st != DL_OK) {
        if (f || err[0] == '\0' || memchr(err, '\n', strlen(err))) {
            abort();
        }
        return 0;
    }
    for (size_t i = 0; i < dl_st_count(f); i++) {
        dl_st_tensor_info info;
        if (dl_st_info(f, i, &info) != DL_OK || dl_st_find(f, info.name) != (int64_t)i) {
            abort();
        }
        if (info.end - info.begin > size) {
            abort(); // validated offsets lie inside the input
        }
        dl_tensor t = {0};
        err[0] = '\0';
        dl_status rs = dl_st_read(f, i, &t, err, sizeof err);
        if (rs == DL_OK) {
            if ((uint64_t)dl_tensor_numel(&t) * dl_dtype_size(t.dtype) != info.end - info.begin) {
                abort();
            }
            dl_tensor_free(&t);
        } else if (!(rs == DL_ERR_PARSE && info.dtype == DL_DT_BOOL) || t.data || !err[0]) {
            abort();
        }
    }
    for (size_t i = 0; i < dl_st_metadata_count(f); i++) {
        const char *k = NULL, *v = NULL;
        if (dl_st_metadata_at(f, i, &k, &v) != DL_OK || dl_st_metadata(f, k) != v) {
            abort();
        }
    }
    dl_st_close(f);
    return 0;
}
