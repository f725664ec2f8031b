// tests/cuda/mock_cuda.c — a stand-in for libcuda.so.1 (the driver API functions libdlrt's CUDA
// device calls, rt_device_cuda.c) that runs on the host, for testing that device's plumbing on a
// machine without a GPU: "device" memory is host memory (malloc'd, so copies and memsets are
// real), a module is the PTX text (functions are found by their `.entry NAME(` line), and a
// launch checks its arguments and is counted but runs nothing (no kernel code can run here).
// Loaded through DLRT_LIBCUDA by tests/cuda/test_cuda_mock.c, which reads the counters through
// mock_cuda_stats. MOCK_CUDA_JIT_FAIL=1 makes module loading fail with a JIT log, as the driver
// does for PTX it cannot compile.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

typedef struct mock_stats {
    long allocs_live, ctx_retains, modules_live, streams_live;
    long launches, bad_launches, copies_in, copies_out;
} mock_stats;

static mock_stats st;
static const char *module_text; // the loaded PTX (one module at a time is enough here)

#define API __attribute__((visibility("default")))

API void mock_cuda_stats(mock_stats *out);
API void mock_cuda_stats(mock_stats *out) {
    *out = st;
}

API CUresult cuInit(unsigned flags);
API CUresult cuInit(unsigned flags) {
    return flags == 0 ? 0 : 1;
}
API CUresult cuDeviceGetCount(int *n);
API CUresult cuDeviceGetCount(int *n) {
    *n = 1;
    return 0;
}
API CUresult cuDeviceGet(int *dev, int ordinal);
API CUresult cuDeviceGet(int *dev, int ordinal) {
    *dev = ordinal;
    return ordinal == 0 ? 0 : 101; // CUDA_ERROR_INVALID_DEVICE
}
API CUresult cuDeviceGetName(char *name, int len, int dev);
API CUresult cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    snprintf(name, (size_t)len, "mock GPU");
    return 0;
}
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev);
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    (void)dev;
    *ctx = &st;
    st.ctx_retains++;
    return 0;
}
API CUresult cuDevicePrimaryCtxRelease_v2(int dev);
API CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    st.ctx_retains--;
    return 0;
}
API CUresult cuCtxSetCurrent(void *ctx);
API CUresult cuCtxSetCurrent(void *ctx) {
    return ctx == &st ? 0 : 201; // CUDA_ERROR_INVALID_CONTEXT
}
API CUresult cuStreamCreate(void **s, unsigned flags);
API CUresult cuStreamCreate(void **s, unsigned flags) {
    (void)flags;
    *s = &module_text;
    st.streams_live++;
    return 0;
}
API CUresult cuStreamDestroy_v2(void *s);
API CUresult cuStreamDestroy_v2(void *s) {
    (void)s;
    st.streams_live--;
    return 0;
}
API CUresult cuStreamSynchronize(void *s);
API CUresult cuStreamSynchronize(void *s) {
    return s == &module_text ? 0 : 400; // CUDA_ERROR_INVALID_HANDLE
}
API CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals);
API CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
    const char *ptx = image;
    const char *fail = getenv("MOCK_CUDA_JIT_FAIL");
    if ((fail && fail[0] == '1') || !strstr(ptx, ".version") || !strstr(ptx, ".target")) {
        char *log = NULL;
        size_t size = 0;
        for (unsigned i = 0; i < n; i++) {
            if (opts[i] == 5) { // CU_JIT_ERROR_LOG_BUFFER
                log = vals[i];
            } else if (opts[i] == 6) { // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
                size = (size_t)(uintptr_t)vals[i];
            }
        }
        if (log && size) {
            snprintf(log, size, "ptxas application ptx input, line 1; error   : mock JIT refusal");
        }
        return 218; // CUDA_ERROR_INVALID_PTX
    }
    module_text = ptx;
    *m = &module_text;
    st.modules_live++;
    return 0;
}
API CUresult cuModuleUnload(void *m);
API CUresult cuModuleUnload(void *m) {
    (void)m;
    st.modules_live--;
    return 0;
}
API CUresult cuModuleGetFunction(void **f, void *m, const char *name);
API CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)m;
    char pat[300];
    snprintf(pat, sizeof pat, ".entry %s(", name);
    const char *hit = module_text ? strstr(module_text, pat) : NULL;
    if (!hit) {
        return 500; // CUDA_ERROR_NOT_FOUND
    }
    *f = (void *)hit;
    return 0;
}
API CUresult cuMemAlloc_v2(unsigned long long *p, size_t size);
API CUresult cuMemAlloc_v2(unsigned long long *p, size_t size) {
    void *q = aligned_alloc(256, (size + 255) / 256 * 256);
    if (!q) {
        return 2; // CUDA_ERROR_OUT_OF_MEMORY
    }
    *p = (unsigned long long)(uintptr_t)q;
    st.allocs_live++;
    return 0;
}
API CUresult cuMemFree_v2(unsigned long long p);
API CUresult cuMemFree_v2(unsigned long long p) {
    free((void *)(uintptr_t)p);
    st.allocs_live--;
    return 0;
}
API CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);
API CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
    memcpy((void *)(uintptr_t)dst, src, n);
    st.copies_in++;
    return 0;
}
API CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n);
API CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    st.copies_out++;
    return 0;
}
API CUresult cuMemsetD8_v2(unsigned long long dst, unsigned char v, size_t n);
API CUresult cuMemsetD8_v2(unsigned long long dst, unsigned char v, size_t n) {
    memset((void *)(uintptr_t)dst, v, n);
    return 0;
}
// Checks what codegen/nvptx/'s kernel ABI needs: three parameters (a device address of the
// argument array, begin = 0, end = the range) and a grid of blocks that covers [0, end).
API CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void *s, void **params,
                            void **extra);
API CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void *s, void **params,
                            void **extra) {
    (void)shared;
    st.launches++;
    int64_t begin, end;
    memcpy(&begin, params[1], sizeof begin);
    memcpy(&end, params[2], sizeof end);
    unsigned long long args;
    memcpy(&args, params[0], sizeof args);
    uint64_t threads = (uint64_t)gx * gy * gz * bx * by * bz;
    if (!f || s != &module_text || extra || begin != 0 || end < 1 || threads < (uint64_t)end ||
        args == 0 || args % 8 != 0) {
        st.bad_launches++;
        return 1; // CUDA_ERROR_INVALID_VALUE
    }
    return 0;
}
API CUresult cuGetErrorString(CUresult r, const char **s);
API CUresult cuGetErrorString(CUresult r, const char **s) {
    *s = r == 218 ? "a PTX JIT compilation failed" : "mock driver error";
    return 0;
}
