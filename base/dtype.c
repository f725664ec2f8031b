// base/dtype.c — element types and the plain host tensor used by the evaluator and .npy I/O.
#include "dl_base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[DL_DT_COUNT] = {"float", "float16", "bfloat16",
                                                     "int32", "int64",   "bool"};

const char *dl_dtype_name(dl_dtype t) {
    return (unsigned)t < DL_DT_COUNT ? dtype_names[t] : "?";
}

bool dl_dtype_from_name(const char *name, dl_dtype *out) {
    for (int i = 0; i < DL_DT_COUNT; i++) {
        if (strcmp(name, dtype_names[i]) == 0) {
            *out = (dl_dtype)i;
            return true;
        }
    }
    return false;
}

size_t dl_dtype_size(dl_dtype t) {
    switch (t) {
    case DL_DT_FLOAT:
        return 4;
    case DL_DT_FLOAT16:
        return 2;
    case DL_DT_BFLOAT16:
        return 2;
    case DL_DT_INT32:
        return 4;
    case DL_DT_INT64:
        return 8;
    case DL_DT_BOOL:
        return 1;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

bool dl_dtype_is_float(dl_dtype t) {
    return t == DL_DT_FLOAT || t == DL_DT_FLOAT16 || t == DL_DT_BFLOAT16;
}

int64_t dl_tensor_numel(const dl_tensor *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++) {
        n *= t->dims[i];
    }
    return n;
}

size_t dl_tensor_nbytes(const dl_tensor *t) {
    return (size_t)dl_tensor_numel(t) * dl_dtype_size(t->dtype);
}

dl_status dl_tensor_alloc(dl_tensor *t, dl_dtype dtype, int32_t rank, const int64_t *dims) {
    if (rank < 0 || rank > DL_MAX_RANK || (unsigned)dtype >= DL_DT_COUNT) {
        return DL_ERR_INVALID_ARG;
    }
    t->dtype = dtype;
    t->rank = rank;
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            return DL_ERR_INVALID_ARG;
        }
        t->dims[i] = dims[i];
        if (dims[i] != 0 && n > INT64_MAX / 16 / dims[i]) {
            return DL_ERR_INVALID_ARG;
        }
        n *= dims[i];
    }
    for (int32_t i = rank; i < DL_MAX_RANK; i++) {
        t->dims[i] = 0;
    }
    size_t bytes = (size_t)n * dl_dtype_size(dtype);
    t->data = dl_mem_calloc(1, bytes ? bytes : 1);
    return t->data ? DL_OK : DL_ERR_NOMEM;
}

void dl_tensor_free(dl_tensor *t) {
    free(t->data);
    t->data = NULL;
}

double dl_tensor_get(const dl_tensor *t, int64_t i) {
    switch (t->dtype) {
    case DL_DT_FLOAT:
        return ((const float *)t->data)[i];
    case DL_DT_FLOAT16:
        return dl_f16_to_f32(((const uint16_t *)t->data)[i]);
    case DL_DT_BFLOAT16:
        return dl_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case DL_DT_INT32:
        return ((const int32_t *)t->data)[i];
    case DL_DT_INT64:
        return (double)((const int64_t *)t->data)[i];
    case DL_DT_BOOL:
        return ((const uint8_t *)t->data)[i] ? 1.0 : 0.0;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

static int64_t to_i64(double v) {
    if (isnan(v)) {
        return 0;
    }
    if (v >= 9.2233720368547758e18) {
        return INT64_MAX;
    }
    if (v <= -9.2233720368547758e18) {
        return INT64_MIN;
    }
    return (int64_t)v;
}

int64_t dl_tensor_get_i64(const dl_tensor *t, int64_t i) {
    switch (t->dtype) {
    case DL_DT_INT64:
        return ((const int64_t *)t->data)[i];
    case DL_DT_INT32:
        return ((const int32_t *)t->data)[i];
    case DL_DT_BOOL:
        return ((const uint8_t *)t->data)[i] != 0;
    case DL_DT_FLOAT:
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16:
        return to_i64(dl_tensor_get(t, i));
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

void dl_tensor_set(dl_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case DL_DT_FLOAT:
        ((float *)t->data)[i] = (float)v;
        return;
    case DL_DT_FLOAT16:
        ((uint16_t *)t->data)[i] = dl_f32_to_f16((float)v);
        return;
    case DL_DT_BFLOAT16:
        ((uint16_t *)t->data)[i] = dl_f32_to_bf16((float)v);
        return;
    case DL_DT_INT32:
        ((int32_t *)t->data)[i] = (int32_t)to_i64(v);
        return;
    case DL_DT_INT64:
        ((int64_t *)t->data)[i] = to_i64(v);
        return;
    case DL_DT_BOOL:
        ((uint8_t *)t->data)[i] = v != 0.0;
        return;
    case DL_DT_COUNT:
        break;
    }
    DL_UNREACHABLE();
}

void dl_shape_format(const int64_t *dims, int32_t rank, char *buf, size_t size) {
    size_t used = 0;
    int n = snprintf(buf, size, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int32_t i = 0; i < rank && used < size; i++) {
        n = snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size) {
        snprintf(buf + used, size - used, "]");
    }
}
