// runtime/rt_device_cuda.c — the CUDA side of libdlrt, so far: finding the driver. A session of
// a CUDA artifact (codegen/nvptx/: its kernels are PTX in the plan's device image) asks here why
// it cannot run. libcuda.so.1 ($DLRT_LIBCUDA to name another) is dlopen'ed only then, never when
// libdlrt loads, so libdlrt works on machines without the driver; without it (or without a GPU)
// the answer is DLRT_ERR_NO_DEVICE with the loader's or the driver's reason. Where the driver
// sees a GPU the answer is DLRT_ERR_UNSUPPORTED: the device that runs the kernels (rt_device.h:
// module load, launches on one stream, a CUDA graph per entry point) is still to be written
// (issue 14).
//
// The driver is initialised once per process (cuInit is process-wide) and never unloaded.
#include "rt_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int cu_result; // CUresult; 0 is CUDA_SUCCESS
typedef cu_result (*cu_init_fn)(unsigned flags);
typedef cu_result (*cu_device_get_count_fn)(int *count);
typedef cu_result (*cu_get_error_string_fn)(cu_result r, const char **s);

static struct {
    pthread_once_t once;
    dlrt_status st;  // DLRT_OK: the driver sees n_devices GPUs
    int n_devices;
    char why[512];   // the reason when st != DLRT_OK
} cuda = {PTHREAD_ONCE_INIT, DLRT_OK, 0, {0}};

static void cuda_probe_once(void) {
    const char *lib = getenv("DLRT_LIBCUDA");
    lib = lib && lib[0] ? lib : "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        cuda.st = DLRT_ERR_NO_DEVICE;
        snprintf(cuda.why, sizeof cuda.why, "no CUDA driver: %s", e ? e : lib);
        return;
    }
    cu_init_fn init = (cu_init_fn)(uintptr_t)dlsym(h, "cuInit");
    cu_device_get_count_fn count = (cu_device_get_count_fn)(uintptr_t)dlsym(h, "cuDeviceGetCount");
    cu_get_error_string_fn errstr = (cu_get_error_string_fn)(uintptr_t)dlsym(h, "cuGetErrorString");
    if (!init || !count) {
        cuda.st = DLRT_ERR_NO_DEVICE;
        snprintf(cuda.why, sizeof cuda.why, "%s is not a CUDA driver (no cuInit)", lib);
        return;
    }
    cu_result r = init(0);
    if (r == 0) {
        r = count(&cuda.n_devices);
    }
    if (r != 0) {
        const char *s = NULL;
        if (!errstr || errstr(r, &s) != 0 || !s) {
            s = "unknown error";
        }
        cuda.st = DLRT_ERR_NO_DEVICE;
        snprintf(cuda.why, sizeof cuda.why, "the CUDA driver (%s) fails: %s (CUresult %d)", lib,
                 s, r);
        return;
    }
    if (cuda.n_devices < 1) {
        cuda.st = DLRT_ERR_NO_DEVICE;
        snprintf(cuda.why, sizeof cuda.why, "the CUDA driver (%s) sees no GPU", lib);
    }
}

dlrt_status rt__cuda_refuse_session(const dlrt_model *m) {
    pthread_once(&cuda.once, cuda_probe_once);
    if (cuda.st != DLRT_OK) {
        return rt__fail(cuda.st, "model '%s' was compiled for %s and needs a CUDA GPU: %s",
                        m->name, m->target, cuda.why);
    }
    return rt__fail(DLRT_ERR_UNSUPPORTED,
                    "model '%s' was compiled for %s; the CUDA driver sees %d GPU(s), but this "
                    "libdlrt cannot run CUDA kernels yet (its CUDA device is still to come): "
                    "recompile it for the CPU (dlcc compile --target x86-64)",
                    m->name, m->target, cuda.n_devices);
}
