// runtime/rt_device_cuda.c — the CUDA device (rt_device.h) for artifacts of `dlcc compile
// --target cuda:sm_XX`, whose kernels are PTX in the plan's device image (codegen/nvptx/).
//
// The driver: libcuda.so.1 ($DLRT_LIBCUDA names another) is dlopen'ed the first time a session of
// a CUDA model is made, never when libdlrt loads, so libdlrt works on machines without it; its
// functions are looked up by their versioned symbol names (cuMemAlloc_v2, ...: what cuda.h's
// macros name), and it is initialised once per process and never unloaded. Without the driver,
// with a driver that fails or sees no GPU, a session is DLRT_ERR_NO_DEVICE with that reason.
//
// Per session (rt_cuda, in rt_device.impl): the primary context of GPU $DLRT_CUDA_DEVICE
// (default 0), retained by the first dev_alloc and released by `release`; one stream; the module
// loaded from the PTX (the driver JIT-compiles it for the GPU, so an sm_80 artifact runs on later
// GPUs; its error log is the message when it cannot); one CUfunction per plan kernel-table entry,
// by symbol name; and the kernel argument table (the session's kargs: device addresses, back to
// back in plan order) copied to device memory once. A kernel is launched with three parameters,
// the kernel ABI of codegen/nvptx/: its argument array (table + first_arg), begin 0 and end =
// its range, on the grid and block the plan gives. An entry point launches its kernels in plan
// order on the stream (stream order is the dependency order) and returns; sync waits.
//
// Memory: device addresses are carried in `void *` (never dereferenced by the host); copies are
// synchronous (cuMemcpyHtoD/DtoH on the legacy default stream, which waits for the session's
// blocking stream). Every driver call makes the context current on the calling thread first, so
// a session may be used from any one thread at a time, as on the CPU.
//
// Not yet (issue 14): a CUDA graph per entry point, pinned host buffers and the loader's
// host-to-device copies on a second stream, cuBLASLt. This file has run only against the mock
// driver of tests/runtime/ (no GPU was at hand): tools/gpu-check.sh is its first real test.
#include "rt_device.h"
#include "rt_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The driver API's types, as cuda.h declares them (handles are pointers; a device address is an
// unsigned 64-bit integer on every 64-bit platform).
typedef int cu_result; // CUresult; 0 is CUDA_SUCCESS
typedef int cu_device;
typedef struct cu_ctx_st *cu_context;
typedef struct cu_mod_st *cu_module;
typedef struct cu_func_st *cu_function;
typedef struct cu_stream_st *cu_stream;
typedef unsigned long long cu_deviceptr;

enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        dlrt_status try_st_ = (expr);                                                              \
        if (try_st_ != DLRT_OK) {                                                                  \
            return try_st_;                                                                        \
        }                                                                                          \
    } while (0)

typedef struct cu_api {
    cu_result (*init)(unsigned flags);
    cu_result (*device_get_count)(int *count);
    cu_result (*device_get)(cu_device *dev, int ordinal);
    cu_result (*device_get_name)(char *name, int len, cu_device dev);
    cu_result (*primary_ctx_retain)(cu_context *ctx, cu_device dev);
    cu_result (*primary_ctx_release)(cu_device dev);
    cu_result (*ctx_set_current)(cu_context ctx);
    cu_result (*stream_create)(cu_stream *s, unsigned flags);
    cu_result (*stream_destroy)(cu_stream s);
    cu_result (*stream_synchronize)(cu_stream s);
    cu_result (*module_load_data_ex)(cu_module *m, const void *image, unsigned n_opts, int *opts,
                                     void **values);
    cu_result (*module_unload)(cu_module m);
    cu_result (*module_get_function)(cu_function *f, cu_module m, const char *name);
    cu_result (*mem_alloc)(cu_deviceptr *p, size_t size);
    cu_result (*mem_free)(cu_deviceptr p);
    cu_result (*memcpy_htod)(cu_deviceptr dst, const void *src, size_t n);
    cu_result (*memcpy_dtoh)(void *dst, cu_deviceptr src, size_t n);
    cu_result (*memset_d8)(cu_deviceptr dst, unsigned char v, size_t n);
    cu_result (*launch_kernel)(cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, cu_stream s,
                               void **params, void **extra);
    cu_result (*get_error_string)(cu_result r, const char **s);
} cu_api;

static cu_api cu; // the driver's functions, set once by driver_load_once

static struct {
    pthread_once_t once;
    dlrt_status st; // DLRT_OK: the driver is loaded, initialised and sees n_devices GPUs
    int n_devices;
    char lib[256];
    char why[512]; // the reason when st != DLRT_OK
} driver = {PTHREAD_ONCE_INIT, DLRT_OK, 0, {0}, {0}};

static const char *cu_error(cu_result r) {
    const char *s = NULL;
    if (!cu.get_error_string || cu.get_error_string(r, &s) != 0 || !s) {
        return "unknown error";
    }
    return s;
}

// Looks up every driver function; false (naming the first missing one) when one is absent.
static bool resolve(void *h, const char **missing) {
    static const struct {
        const char *sym;
        size_t off;
    } table[] = {
#define CU_FN(field, sym) {sym, offsetof(cu_api, field)}
        CU_FN(init, "cuInit"),
        CU_FN(device_get_count, "cuDeviceGetCount"),
        CU_FN(device_get, "cuDeviceGet"),
        CU_FN(device_get_name, "cuDeviceGetName"),
        CU_FN(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
        CU_FN(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2"),
        CU_FN(ctx_set_current, "cuCtxSetCurrent"),
        CU_FN(stream_create, "cuStreamCreate"),
        CU_FN(stream_destroy, "cuStreamDestroy_v2"),
        CU_FN(stream_synchronize, "cuStreamSynchronize"),
        CU_FN(module_load_data_ex, "cuModuleLoadDataEx"),
        CU_FN(module_unload, "cuModuleUnload"),
        CU_FN(module_get_function, "cuModuleGetFunction"),
        CU_FN(mem_alloc, "cuMemAlloc_v2"),
        CU_FN(mem_free, "cuMemFree_v2"),
        CU_FN(memcpy_htod, "cuMemcpyHtoD_v2"),
        CU_FN(memcpy_dtoh, "cuMemcpyDtoH_v2"),
        CU_FN(memset_d8, "cuMemsetD8_v2"),
        CU_FN(launch_kernel, "cuLaunchKernel"),
        CU_FN(get_error_string, "cuGetErrorString"),
#undef CU_FN
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        void *f = dlsym(h, table[i].sym);
        if (!f) {
            *missing = table[i].sym;
            return false;
        }
        // A function pointer stored through its object representation (POSIX: dlsym's result
        // converts to the function type).
        memcpy((char *)&cu + table[i].off, &f, sizeof f);
    }
    return true;
}

static void driver_load_once(void) {
    const char *lib = getenv("DLRT_LIBCUDA");
    snprintf(driver.lib, sizeof driver.lib, "%s", lib && lib[0] ? lib : "libcuda.so.1");
    void *h = dlopen(driver.lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        driver.st = DLRT_ERR_NO_DEVICE;
        snprintf(driver.why, sizeof driver.why, "no CUDA driver: %s", e ? e : driver.lib);
        return;
    }
    const char *missing = NULL;
    if (!resolve(h, &missing)) {
        driver.st = DLRT_ERR_NO_DEVICE;
        snprintf(driver.why, sizeof driver.why,
                 "%s is not a CUDA driver this libdlrt can use (no %s)", driver.lib, missing);
        return;
    }
    cu_result r = cu.init(0);
    if (r == 0) {
        r = cu.device_get_count(&driver.n_devices);
    }
    if (r != 0) {
        driver.st = DLRT_ERR_NO_DEVICE;
        snprintf(driver.why, sizeof driver.why, "the CUDA driver (%s) fails: %s (CUresult %d)",
                 driver.lib, cu_error(r), r);
        return;
    }
    if (driver.n_devices < 1) {
        driver.st = DLRT_ERR_NO_DEVICE;
        snprintf(driver.why, sizeof driver.why, "the CUDA driver (%s) sees no GPU", driver.lib);
    }
}

// ---------------------------------------------------------------------------------------------
// Per-session state

typedef struct rt_cuda {
    cu_device dev;
    cu_context ctx; // the primary context, retained
    cu_stream stream;
    cu_module mod;
    cu_function *fns;   // per kernel-table entry (OWNED array)
    cu_deviceptr kargs; // the session's kernel argument table in device memory (0: none)
} rt_cuda;

static dlrt_status fail_cu(const dlrt_session *s, const char *what, cu_result r) {
    return rt__fail(DLRT_ERR_IO, "CUDA (model '%s'): %s: %s (CUresult %d)", s->model->name, what,
                    cu_error(r), r);
}

// The session's state, made on first use (dev_alloc comes before open): the driver, the GPU and
// its primary context, made current on this thread.
static dlrt_status cuda_state(rt_device *d, rt_cuda **out) {
    rt_cuda *c = d->impl;
    if (!c) {
        pthread_once(&driver.once, driver_load_once);
        if (driver.st != DLRT_OK) {
            return rt__fail(driver.st, "model '%s' was compiled for %s and needs a CUDA GPU: %s",
                            d->s->model->name, d->s->model->target, driver.why);
        }
        const char *env = getenv("DLRT_CUDA_DEVICE");
        long ordinal = env && env[0] ? strtol(env, NULL, 10) : 0;
        if (ordinal < 0 || ordinal >= driver.n_devices) {
            return rt__fail(DLRT_ERR_NO_DEVICE,
                            "DLRT_CUDA_DEVICE=%s: the CUDA driver sees GPUs 0..%d", env,
                            driver.n_devices - 1);
        }
        c = dl_mem_calloc(1, sizeof *c);
        if (!c) {
            return rt__fail(DLRT_ERR_NOMEM, "out of memory");
        }
        cu_result r = cu.device_get(&c->dev, (int)ordinal);
        if (r == 0) {
            r = cu.primary_ctx_retain(&c->ctx, c->dev);
        }
        if (r != 0) {
            free(c);
            return fail_cu(d->s, "cannot open the GPU's context", r);
        }
        d->impl = c;
    }
    cu_result r = cu.ctx_set_current(c->ctx);
    if (r != 0) {
        return fail_cu(d->s, "cannot make the GPU's context current", r);
    }
    *out = c;
    return DLRT_OK;
}

static cu_deviceptr dptr(const void *p) {
    return (cu_deviceptr)(uintptr_t)p;
}

static dlrt_status cuda_open(rt_device *d, const dlrt_session_options *opts) {
    (void)opts; // threads: the GPU's own parallelism
    dlrt_session *s = d->s;
    const dlrt_model *m = s->model;
    const dlrt_plan_hdr *h = m->hdr;
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    s->n_threads = 1;
    cu_result r = cu.stream_create(&c->stream, 0);
    if (r != 0) {
        return fail_cu(s, "cannot create a stream", r);
    }
    // The module: the PTX image (validated on load: inside the plan, NUL-terminated by codegen;
    // the driver reads up to the NUL, so check it is there).
    const char *image = (const char *)m->plan + h->off_image;
    if (h->image_kind != DLRT_IMAGE_PTX || h->size_image == 0 || image[h->size_image - 1] != '\0') {
        return rt__fail(DLRT_ERR_CORRUPT, "model '%s': the device image is no NUL-terminated PTX",
                        m->name);
    }
    char log[4096] = "";
    int opts_k[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *opts_v[2] = {log, (void *)(uintptr_t)sizeof log};
    r = cu.module_load_data_ex(&c->mod, image, 2, opts_k, opts_v);
    if (r != 0) {
        log[sizeof log - 1] = '\0';
        return rt__fail(DLRT_ERR_UNSUPPORTED,
                        "CUDA cannot load the PTX of model '%s' (%s): %s (CUresult %d)%s%s",
                        m->name, m->target, cu_error(r), r, log[0] ? ": " : "", log);
    }
    c->fns = dl_mem_calloc(h->n_fns ? h->n_fns : 1, sizeof *c->fns);
    if (!c->fns) {
        return rt__fail(DLRT_ERR_NOMEM, "out of memory");
    }
    const dlrt_plan_fn *fsig = (const dlrt_plan_fn *)(m->plan + h->off_fns);
    for (uint32_t i = 0; i < h->n_fns; i++) {
        char name[256];
        if (fsig[i].name_len >= sizeof name) {
            return rt__fail(DLRT_ERR_UNSUPPORTED, "model '%s': kernel name of %u bytes", m->name,
                            fsig[i].name_len);
        }
        memcpy(name, m->strings + fsig[i].name_off, fsig[i].name_len);
        name[fsig[i].name_len] = '\0';
        r = cu.module_get_function(&c->fns[i], c->mod, name);
        if (r != 0) {
            return rt__fail(DLRT_ERR_CORRUPT, "model '%s': its PTX has no kernel %s: %s", m->name,
                            name, cu_error(r));
        }
    }
    // The argument table: s->kargs holds the device address of every kernel argument.
    size_t bytes = (size_t)h->n_args * sizeof(void *);
    if (bytes) {
        r = cu.mem_alloc(&c->kargs, bytes);
        if (r == 0) {
            r = cu.memcpy_htod(c->kargs, s->kargs, bytes);
        }
        if (r != 0) {
            return fail_cu(s, "cannot place the kernel argument table on the GPU", r);
        }
    }
    return DLRT_OK;
}

static void cuda_close(rt_device *d) {
    rt_cuda *c = d->impl;
    if (!c || cu.ctx_set_current(c->ctx) != 0) {
        return;
    }
    if (c->stream) {
        (void)cu.stream_synchronize(c->stream);
        (void)cu.stream_destroy(c->stream);
        c->stream = NULL;
    }
    if (c->kargs) {
        (void)cu.mem_free(c->kargs);
        c->kargs = 0;
    }
    if (c->mod) {
        (void)cu.module_unload(c->mod);
        c->mod = NULL;
    }
    free(c->fns);
    c->fns = NULL;
}

static void cuda_release(rt_device *d) {
    rt_cuda *c = d->impl;
    if (c) {
        (void)cu.primary_ctx_release(c->dev);
        free(c);
        d->impl = NULL;
    }
}

static dlrt_status cuda_alloc(rt_device *d, size_t size, void **out) {
    *out = NULL;
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    cu_deviceptr p = 0;
    cu_result r = cu.mem_alloc(&p, size);
    if (r != 0) {
        return rt__fail(DLRT_ERR_NOMEM,
                        "CUDA (model '%s'): cannot allocate %zu bytes on the GPU: %s",
                        d->s->model->name, size, cu_error(r));
    }
    r = cu.memset_d8(p, 0, size);
    if (r != 0) {
        (void)cu.mem_free(p);
        return fail_cu(d->s, "cannot clear the session's GPU memory", r);
    }
    *out = (void *)(uintptr_t)p;
    return DLRT_OK;
}

static void cuda_free(rt_device *d, void *p, size_t size) {
    (void)size;
    rt_cuda *c = d->impl;
    if (p && c && cu.ctx_set_current(c->ctx) == 0) {
        (void)cu.mem_free(dptr(p));
    }
}

static dlrt_status cuda_copy_in(rt_device *d, void *dst, const void *src, size_t n) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    cu_result r = n ? cu.memcpy_htod(dptr(dst), src, n) : 0;
    return r ? fail_cu(d->s, "host-to-GPU copy", r) : DLRT_OK;
}

static dlrt_status cuda_copy_out(rt_device *d, void *dst, const void *src, size_t n) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    cu_result r = n ? cu.memcpy_dtoh(dst, dptr(src), n) : 0;
    return r ? fail_cu(d->s, "GPU-to-host copy", r) : DLRT_OK;
}

static dlrt_status cuda_fill(rt_device *d, void *dst, int byte, size_t n) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    cu_result r = n ? cu.memset_d8(dptr(dst), (unsigned char)byte, n) : 0;
    return r ? fail_cu(d->s, "GPU memset", r) : DLRT_OK;
}

// Plan kernel record `kernel` once on its grid: (args, begin = 0, end = range).
static dlrt_status cuda_launch(rt_device *d, rt_cuda *c, uint32_t kernel) {
    const dlrt_model *m = d->s->model;
    const dlrt_plan_kernel *k = &m->kernels[kernel];
    const dlrt_plan_fn *f = (const dlrt_plan_fn *)(m->plan + m->hdr->off_fns) + k->fn;
    cu_deviceptr args = c->kargs + (cu_deviceptr)k->first_arg * sizeof(void *);
    int64_t begin = 0, end = k->range;
    void *params[3] = {&args, &begin, &end};
    cu_result r =
        cu.launch_kernel(c->fns[k->fn], f->grid[0], f->grid[1], f->grid[2], f->block[0],
                         f->block[1], f->block[2], f->shared_bytes, c->stream, params, NULL);
    return r ? fail_cu(d->s, "kernel launch", r) : DLRT_OK;
}

static dlrt_status cuda_launch_grid(rt_device *d, uint32_t kernel) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    return cuda_launch(d, c, kernel);
}

// Every kernel of the entry point in plan order on the stream (the plan's order satisfies its
// dependencies; the stream keeps it). Format 8's prepack kernels run in every infer here (codegen
// makes none for CUDA): packing again is always right, only slower, so the session's
// packed_stale is neither read nor cleared.
static dlrt_status cuda_run(rt_device *d, int entry) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    const dlrt_model *m = d->s->model;
    uint32_t first = m->hdr->entry_first[entry], n = m->hdr->entry_count[entry];
    for (uint32_t i = 0; i < n; i++) {
        TRY(cuda_launch(d, c, m->entry_kernels[first + i]));
    }
    return DLRT_OK;
}

static dlrt_status cuda_sync(rt_device *d) {
    rt_cuda *c;
    TRY(cuda_state(d, &c));
    cu_result r = cu.stream_synchronize(c->stream);
    return r ? fail_cu(d->s, "a kernel failed", r) : DLRT_OK;
}

const rt_device_ops rt__device_cuda = {
    .name = "cuda",
    .kind = DLRT_DEVICE_CUDA,
    .caps = RT_DEVCAP_GRID | RT_DEVCAP_ASYNC,
    .open = cuda_open,
    .close = cuda_close,
    .dev_alloc = cuda_alloc,
    .dev_free = cuda_free,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
    .fill = cuda_fill,
    .launch_range = NULL,
    .launch_grid = cuda_launch_grid,
    .run = cuda_run,
    .sync = cuda_sync,
    .release = cuda_release,
};
